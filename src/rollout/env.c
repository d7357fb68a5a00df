// env.c: the environment process and its JSON Lines protocol (see env.h, docs/env-protocol.md).
#include "rollout/env.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/common.h"
#include "core/json.h"

#define ENV_PROTOCOL "rlc-env/1"

// A line shown in an error message: the first 120 bytes.
static void shown(char *buf, size_t n, const char *line, size_t len) {
    snprintf(buf, n, "%.*s%s", (int)(len > 120 ? 120 : len), line, len > 120 ? "..." : "");
}

int rlc_env_check_tools(const cJSON *tools, rlc_strbuf *err) {
    if (!cJSON_IsArray(tools)) {
        rlc_sb_puts(err, "\"tools\" is not a list");
        return -1;
    }
    int ti = 0;
    for (const cJSON *t = tools->child; t; t = t->next, ti++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *nm = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
        if (!cJSON_IsObject(t) || !cJSON_IsString(nm) || !*nm->valuestring) {
            rlc_sb_printf(err, "tools[%d] is not {\"type\": \"function\", \"function\": {\"name\": <non-empty string>, ...}}", ti);
            return -1;
        }
    }
    return 0;
}

cJSON *rlc_env_parse_line(const char *line, size_t n, rlc_strbuf *err) {
    char sh[160];
    shown(sh, sizeof sh, line, n);
    if (memchr(line, 0, n)) {
        rlc_sb_printf(err, "a line holds a NUL byte: '%s'", sh);
        return NULL;
    }
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(line, n, &end, 0);
    while (j && end < line + n && (*end == ' ' || *end == '\t' || *end == '\r')) end++;
    if (!j || !cJSON_IsObject(j) || end != line + n) {   // one object and nothing after it
        cJSON_Delete(j);
        rlc_sb_printf(err, "a line is not a JSON object: '%s'", sh);
        return NULL;
    }
    rlc_json_mark_floats(j, line, n);   // a tool schema's 1.0 renders as 1.0 in the prompt, as Python's json would
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "type");
    static const char *types[] = {"hello", "started", "observation", "finished", "error"};
    int known = 0;
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) known |= cJSON_IsString(t) && !strcmp(t->valuestring, types[i]);
    if (!known) {
        cJSON_Delete(j);
        rlc_sb_printf(err, "a line has no \"type\" among hello, started, observation, finished, error: '%s'", sh);
        return NULL;
    }
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "traj");
    const int needs = strcmp(t->valuestring, "hello") && strcmp(t->valuestring, "error");
    if (needs ? !cJSON_IsString(tr) : (tr && !cJSON_IsString(tr) && !cJSON_IsNull(tr))) {
        cJSON_Delete(j);
        rlc_sb_printf(err, "a line has no string \"traj\": '%s'", sh);
        return NULL;
    }
    return j;
}

// Write with SIGPIPE blocked for this thread (a pending SIGPIPE is consumed). Returns bytes written or -1.
static ssize_t write_nosigpipe(int fd, const void *p, size_t n) {
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    ssize_t w = write(fd, p, n);
    int e = errno;
    if (w < 0 && e == EPIPE) {
        struct timespec zero = {0, 0};
        sigtimedwait(&set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return w;
}

static RLC_NORETURN void die_dead(rlc_env *env, const char *what) {
    int st = 0;
    pid_t w = 0;
    double t0 = rlc_now();
    while ((w = waitpid(env->pid, &st, WNOHANG)) == 0 && rlc_now() - t0 < 1.0) usleep(2000);
    kill(-env->pid, SIGKILL);   // whatever the command left behind
    char how[64] = "closed its stdout";
    if (w == 0) waitpid(env->pid, &st, 0);
    else if (w == env->pid) {
        if (WIFEXITED(st)) snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(st));
        else if (WIFSIGNALED(st)) snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(st));
    }
    env->pid = 0;
    rlc_die("environment '%s' %s before answering %s", env->command, how, what);
}

static RLC_NORETURN void die_kill(rlc_env *env, const char *fmt, const char *a, const char *b) {
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, a, b);
    if (env->pid > 0) {
        kill(-env->pid, SIGKILL);
        waitpid(env->pid, NULL, 0);
        env->pid = 0;
    }
    rlc_die("environment '%s': %s", env->command, msg);
}

typedef struct rlc_env_req {
    char *traj, *expect, *req;
    int64_t tag;
    double t_sent;
    int sent;
} rlc_env_req;

static void describe(char *buf, size_t n, const rlc_env_req *r) {
    snprintf(buf, n, "trajectory '%s' (waiting for its \"%s\")", r->traj, r->expect);
}

// The oldest outstanding request (for messages), else the oldest queued one.
static const rlc_env_req *oldest(const rlc_env *env) {
    for (int i = 0; i < env->nq; i++)
        if (env->q[i].sent) return &env->q[i];
    return env->nq ? &env->q[0] : NULL;
}

void rlc_env_send(rlc_env *env, const char *req, const char *traj, const char *expect, int64_t tag) {
    CHECK(env->pid > 0, "environment not running");
    for (int i = 0; i < env->nq; i++) CHECK(strcmp(env->q[i].traj, traj), "two outstanding requests for trajectory %s", traj);
    if (env->nq == env->capq) {
        env->capq = env->capq ? env->capq * 2 : 64;
        env->q = rlc_realloc(env->q, (size_t)env->capq * sizeof *env->q);
    }
    if (env->nq == 0) env->last = rlc_now();   // the deadline counts from here when nothing was pending
    env->q[env->nq++] = (rlc_env_req){rlc_strdup(traj), rlc_strdup(expect), rlc_strdup(req), tag, 0.0, 0};
}

int rlc_env_pending(const rlc_env *env) { return env->nq; }

// Parse the complete line at rbuf[0..ll) (used bytes: used) and match it; returns the reply and its slot, or dies.
static cJSON *take_line(rlc_env *env, size_t ll, size_t used, int *slot) {
    char *line = env->rbuf;
    if (ll && line[ll - 1] == '\r') ll--;
    rlc_strbuf err = {0};
    cJSON *j = rlc_env_parse_line(line, ll, &err);
    if (!j) die_kill(env, "%s%s", err.s, "");
    const char *ty = cJSON_GetObjectItemCaseSensitive(j, "type")->valuestring;
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "traj");
    const char *tid = cJSON_IsString(tr) ? tr->valuestring : NULL;
    if (!strcmp(ty, "error")) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
        char sm[400], tw[300];
        snprintf(sm, sizeof sm, "%.300s", cJSON_IsString(m) ? m->valuestring : "(no message)");
        snprintf(tw, sizeof tw, "%s%.200s%s", tid ? "trajectory '" : "", tid ? tid : "", tid ? "'" : "no trajectory");
        die_kill(env, "reported an error for %s: %s", tw, sm);
    }
    int q = -1;
    for (int i = 0; tid && i < env->nq; i++)
        if (env->q[i].sent && !strcmp(env->q[i].traj, tid)) {
            q = i;
            break;
        }
    if (q < 0) {
        char sh[160];
        shown(sh, sizeof sh, line, ll);
        die_kill(env, "a \"%s\" reply for a trajectory with no outstanding request: '%s'", ty, sh);
    }
    if (strcmp(ty, env->q[q].expect)) {
        char what[512];
        describe(what, sizeof what, &env->q[q]);
        die_kill(env, "%s got a \"%s\" reply", what, ty);
    }
    memmove(env->rbuf, env->rbuf + used, env->rlen - used);
    env->rlen -= used;
    *slot = q;
    return j;
}

cJSON *rlc_env_recv(rlc_env *env, int block, int64_t *tag, double *wait_s) {
    CHECK(env->pid > 0, "environment not running");
    char what[512];
    for (;;) {
        // a complete line already buffered
        char *nl = env->rlen ? memchr(env->rbuf, '\n', env->rlen) : NULL;
        if (nl) {
            int q;
            const size_t ll = (size_t)(nl - env->rbuf);
            cJSON *j = take_line(env, ll, ll + 1, &q);
            rlc_env_req *r = &env->q[q];
            *tag = r->tag;
            if (wait_s) *wait_s = rlc_now() - r->t_sent;
            free(r->traj);
            free(r->expect);
            free(r->req);
            memmove(r, r + 1, (size_t)(env->nq - q - 1) * sizeof *r);
            env->nq--;
            env->outstanding--;
            return j;
        }
        if (env->nq == 0) return NULL;
        // queue requests while the cap allows (in order)
        for (int i = 0; i < env->nq && (env->max_inflight <= 0 || env->outstanding < env->max_inflight); i++) {
            rlc_env_req *r = &env->q[i];
            if (r->sent) continue;
            rlc_sb_puts(&env->wbuf, r->req);
            rlc_sb_putc(&env->wbuf, '\n');
            r->sent = 1;
            r->t_sent = rlc_now();
            env->outstanding++;
        }
        struct pollfd p[2];
        int np = 0;
        p[np++] = (struct pollfd){env->from_child, POLLIN, 0};
        if (env->woff < env->wbuf.n) p[np++] = (struct pollfd){env->to_child, POLLOUT, 0};
        const double left = env->timeout_s - (rlc_now() - env->last);
        if (left <= 0) {
            describe(what, sizeof what, oldest(env));
            char tm[64];
            snprintf(tm, sizeof tm, "%g", env->timeout_s);
            die_kill(env, "no reply for %s within %s s (multi_turn.env_timeout_s)", what, tm);
        }
        int rc = poll(p, (nfds_t)np, block ? (int)(left * 1000.0) + 1 : 0);
        if (rc < 0) {
            if (errno == EINTR) continue;
            rlc_die("environment '%s': poll failed: %s", env->command, strerror(errno));
        }
        if (rc == 0) {
            if (!block) return NULL;
            continue;
        }
        if (np > 1 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t k = write_nosigpipe(env->to_child, env->wbuf.s + env->woff, env->wbuf.n - env->woff);
            if (k < 0 && errno != EAGAIN && errno != EINTR) {
                describe(what, sizeof what, oldest(env));
                die_dead(env, what);
            }
            if (k > 0) env->woff += (size_t)k;
            if (env->woff == env->wbuf.n) {
                rlc_sb_clear(&env->wbuf);
                env->woff = 0;
            }
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            if (env->rcap - env->rlen < 65536) {
                env->rcap = env->rcap * 2 + 65536;
                env->rbuf = rlc_realloc(env->rbuf, env->rcap);
            }
            ssize_t k = read(env->from_child, env->rbuf + env->rlen, env->rcap - env->rlen - 1);
            if (k == 0) {
                describe(what, sizeof what, oldest(env));
                die_dead(env, what);
            }
            if (k < 0) {
                if (errno == EAGAIN || errno == EINTR) continue;
                rlc_die("environment '%s': read failed: %s", env->command, strerror(errno));
            }
            env->rlen += (size_t)k;
            env->last = rlc_now();
        }
    }
}

void rlc_env_exchange(rlc_env *env, int n, const char *const *req, const char *const *traj, const char *const *expect,
                      cJSON **reply, double *wait_s) {
    const double t0 = rlc_now();
    for (int i = 0; i < n; i++) {
        reply[i] = NULL;
        rlc_env_send(env, req[i], traj[i], expect[i], i);
    }
    for (int got = 0; got < n; got++) {
        int64_t tag;
        double w;
        cJSON *j = rlc_env_recv(env, 1, &tag, &w);
        CHECK(j && tag >= 0 && tag < n && !reply[tag], "reply slot %lld", (long long)tag);
        reply[tag] = j;
        if (wait_s) wait_s[tag] = w;
    }
    env->wait_s += rlc_now() - t0;
}

void rlc_env_start(rlc_env *env, const char *command, double timeout_s, int max_inflight, const rlc_env_hello *h) {
    memset(env, 0, sizeof *env);
    if (!(timeout_s > 0)) rlc_die("multi_turn.env_timeout_s=%g, expected > 0", timeout_s);
    if (max_inflight < 0) rlc_die("multi_turn.env_max_inflight=%d, expected >= 0", max_inflight);
    env->command = rlc_strdup(command);
    env->timeout_s = timeout_s;
    env->max_inflight = max_inflight;
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
        rlc_die("environment '%s': cannot create pipes: %s", command, strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) rlc_die("environment '%s': cannot fork: %s", command, strerror(errno));
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        setpgid(0, 0);   // its own process group: stop and fatal errors end everything the command started
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0) _exit(127);
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    close(in[0]);
    close(out[1]);
    env->pid = pid;
    env->to_child = in[1];
    env->from_child = out[0];
    fcntl(env->to_child, F_SETFL, fcntl(env->to_child, F_GETFL) | O_NONBLOCK);
    fcntl(env->from_child, F_SETFL, fcntl(env->from_child, F_GETFL) | O_NONBLOCK);

    rlc_strbuf r = {0};
    rlc_sb_puts(&r, "{\"type\":\"hello\",\"protocol\":\"" ENV_PROTOCOL "\",\"format\":");
    rlc_sb_json_str(&r, h->format, strlen(h->format));
    rlc_sb_puts(&r, ",\"chat_template\":");
    rlc_sb_json_str(&r, h->chat_template, strlen(h->chat_template));
    rlc_sb_printf(&r, ",\"enable_thinking\":%s,\"response_length\":%lld,\"max_parallel_calls\":%d,\"max_tool_response_length\":%d}",
                  h->enable_thinking < 0 ? "null" : h->enable_thinking ? "true" : "false", (long long)h->response_length,
                  h->max_parallel_calls, h->max_tool_response_length);
    // The hello reply has no trajectory id, so it is read here rather than through rlc_env_exchange.
    cJSON *rep = NULL;
    const double t0 = rlc_now();
    size_t off = 0;
    while (off < r.n) {
        struct pollfd p = {env->to_child, POLLOUT, 0};
        if (poll(&p, 1, 100) > 0) {
            ssize_t k = write_nosigpipe(env->to_child, r.s + off, r.n - off);
            if (k < 0 && errno != EAGAIN && errno != EINTR) die_dead(env, "the hello");
            if (k > 0) off += (size_t)k;
        }
        if (rlc_now() - t0 > timeout_s) die_kill(env, "did not read the hello within multi_turn.env_timeout_s%s%s", "", "");
    }
    if (write_nosigpipe(env->to_child, "\n", 1) != 1) die_dead(env, "the hello");
    for (;;) {
        char *nl = env->rlen ? memchr(env->rbuf, '\n', env->rlen) : NULL;
        if (nl) {
            size_t ll = (size_t)(nl - env->rbuf);
            size_t used = ll + 1;
            if (ll && env->rbuf[ll - 1] == '\r') ll--;
            rlc_strbuf err = {0};
            rep = rlc_env_parse_line(env->rbuf, ll, &err);
            if (!rep) die_kill(env, "the hello reply: %s%s", err.s, "");
            memmove(env->rbuf, env->rbuf + used, env->rlen - used);
            env->rlen -= used;
            break;
        }
        const double left = timeout_s - (rlc_now() - t0);
        if (left <= 0) die_kill(env, "no hello reply within multi_turn.env_timeout_s%s%s", "", "");
        struct pollfd p = {env->from_child, POLLIN, 0};
        int rc = poll(&p, 1, (int)(left * 1000.0) + 1);
        if (rc <= 0) continue;
        if (env->rcap - env->rlen < 65536) {
            env->rcap = env->rcap * 2 + 65536;
            env->rbuf = rlc_realloc(env->rbuf, env->rcap);
        }
        ssize_t k = read(env->from_child, env->rbuf + env->rlen, env->rcap - env->rlen - 1);
        if (k == 0) die_dead(env, "the hello");
        if (k > 0) env->rlen += (size_t)k;
    }
    rlc_sb_free(&r);
    const char *ty = cJSON_GetObjectItemCaseSensitive(rep, "type")->valuestring;
    if (!strcmp(ty, "error")) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(rep, "message");
        die_kill(env, "reported an error in the hello: %.300s%s", cJSON_IsString(m) ? m->valuestring : "(no message)", "");
    }
    if (strcmp(ty, "hello")) die_kill(env, "answered the hello with a \"%s\" line, expected \"hello\"%s", ty, "");
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(rep, "protocol");
    if (!cJSON_IsString(pr) || strcmp(pr->valuestring, ENV_PROTOCOL))
        die_kill(env, "the hello reply's \"protocol\" is %s, expected \"%s\"",
                 cJSON_IsString(pr) ? pr->valuestring : "missing or not a string", ENV_PROTOCOL);
    cJSON *tools = cJSON_DetachItemFromObjectCaseSensitive(rep, "tools");
    if (!tools) tools = cJSON_CreateArray();
    if (!cJSON_IsArray(tools)) die_kill(env, "the hello reply's \"tools\" is not a list%s%s", "", "");
    rlc_strbuf terr = {0};
    if (rlc_env_check_tools(tools, &terr)) die_kill(env, "the hello reply's %s%s", terr.s, "");
    env->tools = tools;
    const cJSON *ob = cJSON_GetObjectItemCaseSensitive(rep, "observe");
    if (ob && !cJSON_IsNull(ob)) {
        if (cJSON_IsString(ob) && !strcmp(ob->valuestring, "tool_calls")) env->observe = RLC_ENV_OBSERVE_TOOL_CALLS;
        else if (cJSON_IsString(ob) && !strcmp(ob->valuestring, "all")) env->observe = RLC_ENV_OBSERVE_ALL;
        else die_kill(env, "the hello reply's \"observe\" must be \"tool_calls\" or \"all\"%s%s", "", "");
    }
    const cJSON *mi = cJSON_GetObjectItemCaseSensitive(rep, "max_inflight");
    if (mi && !cJSON_IsNull(mi)) {
        if (!cJSON_IsNumber(mi) || mi->valuedouble < 0 || mi->valuedouble != (double)(int)mi->valuedouble)
            die_kill(env, "the hello reply's \"max_inflight\" must be an integer >= 0%s%s", "", "");
        const int m = (int)mi->valuedouble;
        if (m > 0 && (env->max_inflight == 0 || m < env->max_inflight)) env->max_inflight = m;
    }
    cJSON_Delete(rep);
}

void rlc_env_stop(rlc_env *env) {
    if (env->to_child > 0) close(env->to_child);
    if (env->pid > 0) {
        double t0 = rlc_now();
        int st;
        while (waitpid(env->pid, &st, WNOHANG) == 0) {
            if (rlc_now() - t0 > 2.0) {
                kill(-env->pid, SIGTERM);
                usleep(100000);
                if (waitpid(env->pid, &st, WNOHANG) == 0) {
                    kill(-env->pid, SIGKILL);
                    waitpid(env->pid, &st, 0);
                }
                break;
            }
            usleep(5000);
        }
    }
    if (env->from_child > 0) close(env->from_child);
    cJSON_Delete(env->tools);
    for (int i = 0; i < env->nq; i++) {
        free(env->q[i].traj);
        free(env->q[i].expect);
        free(env->q[i].req);
    }
    free(env->q);
    rlc_sb_free(&env->wbuf);
    free(env->rbuf);
    free(env->command);
    memset(env, 0, sizeof *env);
}
