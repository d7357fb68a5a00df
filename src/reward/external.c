// external.c: the external reward process (see external.h).
#include "reward/external.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/common.h"
#include "core/json.h"
#include "core/strbuf.h"

void rlc_reward_result_free(rlc_reward_result *r) {
    for (int i = 0; i < r->n_extra; i++) free(r->extra_keys[i]);
    free(r->extra_keys);
    free(r->extra_vals);
    free(r->pred);
    memset(r, 0, sizeof *r);
}

void rlc_reward_ext_start(rlc_reward_ext *x, const char *command, double timeout_s) {
    memset(x, 0, sizeof *x);
    x->command = rlc_strdup(command);
    x->timeout_s = timeout_s;
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
        rlc_die("reward command '%s': cannot create pipes: %s", command, strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) rlc_die("reward command '%s': cannot fork: %s", command, strerror(errno));
    if (pid == 0) {
        // child: stdin <- in[0], stdout -> out[1]; default SIGPIPE so a vanished parent ends it
        signal(SIGPIPE, SIG_DFL);
        setpgid(0, 0);   // its own process group: a timeout or stop ends everything the command started
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0) _exit(127);
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);   // also here, so the group exists before any kill below
    close(in[0]);
    close(out[1]);
    x->pid = pid;
    x->to_child = in[1];
    x->from_child = out[0];
    fcntl(x->to_child, F_SETFL, fcntl(x->to_child, F_GETFL) | O_NONBLOCK);
    fcntl(x->from_child, F_SETFL, fcntl(x->from_child, F_GETFL) | O_NONBLOCK);
}

// Describe request i for error messages.
static void describe(char *buf, size_t n, int64_t id, const rlc_reward_request *r) {
    char resp[64];
    size_t k = 0;
    for (const char *p = r->response; *p && k < 40; p++) resp[k++] = (*p == '\n' || *p == '"') ? ' ' : *p;
    resp[k] = 0;
    snprintf(buf, n, "request %lld (data_source '%s', ground_truth '%s', response \"%s%s\")", (long long)id,
             r->data_source ? r->data_source : "", r->ground_truth ? r->ground_truth : "", resp,
             strlen(r->response) > 40 ? "..." : "");
}

static RLC_NORETURN void die_dead(rlc_reward_ext *x, const char *what) {
    int st = 0;
    pid_t w = 0;
    double t0 = rlc_now();
    while ((w = waitpid(x->pid, &st, WNOHANG)) == 0 && rlc_now() - t0 < 1.0) usleep(2000);
    kill(-x->pid, SIGKILL);   // whatever the command left behind
    char how[64] = "closed its stdout";
    if (w == 0) waitpid(x->pid, &st, 0);
    else if (w == x->pid) {
        if (WIFEXITED(st)) snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(st));
        else if (WIFSIGNALED(st)) snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(st));
    }
    x->pid = 0;
    rlc_die("reward command '%s' %s before answering %s", x->command, how, what);
}

// Write with SIGPIPE blocked for this thread; a pending SIGPIPE is consumed. Returns bytes written or -1.
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

static void parse_reply(rlc_reward_ext *x, const char *line, const char *what, int64_t id, rlc_reward_result *out) {
    char err[512];
    cJSON *j = rlc_json_parse_err(line, strlen(line), "reply", err, sizeof err);   // one value, nothing after it
    char shown[160];
    snprintf(shown, sizeof shown, "%.120s%s", line, strlen(line) > 120 ? "..." : "");
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        rlc_die("reward command '%s': the reply to %s is not a JSON object: '%s'", x->command, what, shown);
    }
    cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "score");
    if (!cJSON_IsNumber(s) || !isfinite(s->valuedouble)) {
        cJSON_Delete(j);
        rlc_die("reward command '%s': the reply to %s has no finite numeric \"score\": '%s'", x->command, what, shown);
    }
    cJSON *jid = cJSON_GetObjectItemCaseSensitive(j, "id");
    if (jid && (!cJSON_IsNumber(jid) || (int64_t)jid->valuedouble != id)) {
        char got[64] = "a non-numeric id";
        if (cJSON_IsNumber(jid)) snprintf(got, sizeof got, "id %lld", (long long)jid->valuedouble);
        cJSON_Delete(j);
        rlc_die("reward command '%s': the reply to %s carries %s, expected id %lld (replies must come in request order)",
                x->command, what, got, (long long)id);
    }
    memset(out, 0, sizeof *out);
    out->score = s->valuedouble;
    int n = 0;
    for (cJSON *c = j->child; c; c = c->next) n += cJSON_IsNumber(c) && strcmp(c->string, "score") && strcmp(c->string, "id");
    out->extra_keys = rlc_malloc((size_t)(n ? n : 1) * sizeof(char *));
    out->extra_vals = rlc_malloc((size_t)(n ? n : 1) * sizeof(double));
    for (cJSON *c = j->child; c; c = c->next) {
        if (cJSON_IsNumber(c) && strcmp(c->string, "score") && strcmp(c->string, "id")) {
            out->extra_keys[out->n_extra] = rlc_strdup(c->string);
            out->extra_vals[out->n_extra++] = c->valuedouble;
        } else if (!strcmp(c->string, "pred") && cJSON_IsString(c)) out->pred = rlc_strdup(c->valuestring);
    }
    cJSON_Delete(j);
}

void rlc_reward_ext_score(rlc_reward_ext *x, int64_t n, const rlc_reward_request *req, rlc_reward_result *out) {
    CHECK(x->pid > 0, "reward process not running");
    // Serialise all requests.
    rlc_strbuf w = {0};
    size_t *ends = rlc_malloc((size_t)(n ? n : 1) * sizeof(size_t));
    int64_t id0 = x->next_id;
    for (int64_t i = 0; i < n; i++) {
        const rlc_reward_request *r = &req[i];
        rlc_sb_printf(&w, "{\"id\": %lld, \"data_source\": ", (long long)(id0 + i));
        rlc_sb_json_str(&w, r->data_source ? r->data_source : "", strlen(r->data_source ? r->data_source : ""));
        rlc_sb_puts(&w, ", \"response\": ");
        rlc_sb_json_str(&w, r->response, strlen(r->response));
        rlc_sb_puts(&w, ", \"ground_truth\": ");
        rlc_sb_json_str(&w, r->ground_truth ? r->ground_truth : "", strlen(r->ground_truth ? r->ground_truth : ""));
        rlc_sb_puts(&w, ", \"extra_info\": ");
        rlc_sb_puts(&w, r->extra_info && *r->extra_info ? r->extra_info : "{}");
        rlc_sb_puts(&w, "}\n");
        ends[i] = w.n;
    }
    x->next_id += n;
    size_t sent = 0;
    int64_t got = 0;
    double last = rlc_now();
    char what[512];
    while (got < n) {
        struct pollfd p[2];
        int np = 0;
        p[np++] = (struct pollfd){x->from_child, POLLIN, 0};
        if (sent < w.n) p[np++] = (struct pollfd){x->to_child, POLLOUT, 0};
        double left = x->timeout_s - (rlc_now() - last);
        if (left <= 0) {
            describe(what, sizeof what, id0 + got, &req[got]);
            kill(-x->pid, SIGKILL);
            waitpid(x->pid, NULL, 0);
            x->pid = 0;
            rlc_die("reward command '%s' did not answer %s within %g s", x->command, what, x->timeout_s);
        }
        int ms = (int)(left * 1000.0) + 1;
        int rc = poll(p, (nfds_t)np, ms);
        if (rc < 0) {
            if (errno == EINTR) continue;
            rlc_die("reward command '%s': poll failed: %s", x->command, strerror(errno));
        }
        if (rc == 0) continue;   // timeout handled at the top
        if (np > 1 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t k = write_nosigpipe(x->to_child, w.s + sent, w.n - sent);
            if (k < 0 && errno != EAGAIN && errno != EINTR) {
                describe(what, sizeof what, id0 + got, &req[got]);
                die_dead(x, what);
            }
            if (k > 0) sent += (size_t)k;
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            if (x->rcap - x->rlen < 65536) {
                x->rcap = x->rcap * 2 + 65536;
                x->rbuf = rlc_realloc(x->rbuf, x->rcap);
            }
            ssize_t k = read(x->from_child, x->rbuf + x->rlen, x->rcap - x->rlen - 1);
            if (k == 0) {
                describe(what, sizeof what, id0 + got, &req[got]);
                die_dead(x, what);
            }
            if (k < 0) {
                if (errno == EAGAIN || errno == EINTR) continue;
                rlc_die("reward command '%s': read failed: %s", x->command, strerror(errno));
            }
            x->rlen += (size_t)k;
            last = rlc_now();
            // Consume complete lines.
            size_t off = 0;
            for (;;) {
                char *nl = memchr(x->rbuf + off, '\n', x->rlen - off);
                if (!nl) break;
                *nl = 0;
                char *line = x->rbuf + off;
                off = (size_t)(nl - x->rbuf) + 1;
                size_t ll = strlen(line);
                if (ll && line[ll - 1] == '\r') line[--ll] = 0;
                if (got >= n) {
                    rlc_die("reward command '%s' sent an unrequested line after %lld replies: '%.120s'", x->command,
                            (long long)n, line);
                }
                describe(what, sizeof what, id0 + got, &req[got]);
                parse_reply(x, line, what, id0 + got, &out[got]);
                got++;
            }
            memmove(x->rbuf, x->rbuf + off, x->rlen - off);
            x->rlen -= off;
        }
    }
    if (x->rlen) {
        x->rbuf[x->rlen] = 0;
        rlc_die("reward command '%s' sent extra output after the last reply: '%.120s'", x->command, x->rbuf);
    }
    free(ends);
    rlc_sb_free(&w);
}

void rlc_reward_ext_stop(rlc_reward_ext *x) {
    if (x->to_child > 0) close(x->to_child);
    if (x->pid > 0) {
        double t0 = rlc_now();
        int st;
        while (waitpid(x->pid, &st, WNOHANG) == 0) {
            if (rlc_now() - t0 > 2.0) {
                kill(-x->pid, SIGTERM);
                usleep(100000);
                if (waitpid(x->pid, &st, WNOHANG) == 0) {
                    kill(-x->pid, SIGKILL);
                    waitpid(x->pid, &st, 0);
                }
                break;
            }
            usleep(5000);
        }
    }
    if (x->from_child > 0) close(x->from_child);
    free(x->rbuf);
    free(x->command);
    memset(x, 0, sizeof *x);
}
