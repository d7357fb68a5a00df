// test_reward.c: the GSM8K scorer (hand cases + Python's re on random strings), reward dispatch, and the
// external reward process (success, pipelining big batches, and every failure mode as a one-line error).
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/common.h"
#include "reward/external.h"
#include "reward/gsm8k.h"
#include "reward/reward.h"
#include "testlib.h"

typedef void (*die_fn)(const void *arg);

static void expect_die(const char *what, die_fn fn, const void *arg, const char **needles) {
    int pfd[2];
    if (pipe(pfd) != 0) { TL_CHECK(0, "pipe"); return; }
    fflush(stdout); fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 2);
        close(pfd[0]);
        close(pfd[1]);
        fn(arg);
        _exit(0);
    }
    close(pfd[1]);
    char buf[8192];
    size_t n = 0;
    int st = 0, exited = 0;
    // read until the child has exited and the pipe is drained (a lingering grandchild may hold it open)
    for (;;) {
        struct pollfd p = {pfd[0], POLLIN, 0};
        int rc = poll(&p, 1, 50);
        if (rc > 0 && (p.revents & POLLIN) && n < sizeof buf - 1) {
            ssize_t r = read(pfd[0], buf + n, sizeof buf - 1 - n);
            if (r > 0) { n += (size_t)r; continue; }
            if (r == 0 && exited) break;
        }
        if (rc > 0 && !(p.revents & POLLIN) && exited) break;
        if (exited && (rc == 0 || n >= sizeof buf - 1)) break;
        if (!exited && waitpid(pid, &st, WNOHANG) == pid) exited = 1;
    }
    buf[n] = 0;
    close(pfd[0]);
    // the error line (a script may print its own traceback first; a sanitizer may add a report after)
    char *last = strstr(buf, "rlc: error: ");
    if (!last) last = buf;
    char *eol = strchr(last, '\n');
    if (eol) *eol = 0;
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 1 && !strncmp(last, "rlc: error: ", 12);
    for (const char **p = needles; *p; p++) ok = ok && strstr(last, *p) != NULL;
    TL_CHECK(ok, "%s: want exit 1 and an error line with the expected text; got status %d: %s", what,
             WIFEXITED(st) ? WEXITSTATUS(st) : -1, buf);
}

static void check_extract(const char *s, gsm8k_method m, const char *want) {
    char *a = gsm8k_extract(s, strlen(s), m);
    int ok = (a == NULL && want == NULL) || (a && want && !strcmp(a, want));
    TL_CHECK(ok, "gsm8k %s extract of \"%.60s\": got %s%s%s want %s", m ? "flexible" : "strict", s, a ? "'" : "",
             a ? a : "None", a ? "'" : "", want ? want : "None");
    free(a);
}

static void test_gsm8k_hand(void) {
    check_extract("Natalia sold 48 clips... so 48 + 24 = 72.\n#### 72", GSM8K_STRICT, "72");
    TL_CHECK(gsm8k_compute_score("so the answer is\n#### 72", "72", GSM8K_STRICT, 0.0, 1.0) == 1.0, "correct -> 1");
    // The `#### 72.` trap: the character class swallows the period, "72." != "72" -> format_score.
    check_extract("#### 72.", GSM8K_STRICT, "72.");
    TL_CHECK(gsm8k_compute_score("#### 72.", "72", GSM8K_STRICT, 0.0, 1.0) == 0.0, "'#### 72.' scores 0");
    TL_CHECK(gsm8k_compute_score("#### 72.", "72", GSM8K_STRICT, 0.1, 1.0) == 0.1, "'#### 72.' scores format_score");
    check_extract("#### 1,234", GSM8K_STRICT, "1234");                       // commas removed
    TL_CHECK(gsm8k_compute_score("total\n#### 1,234", "1234", GSM8K_STRICT, 0.0, 1.0) == 1.0, "commas");
    check_extract("#### -5", GSM8K_STRICT, "-5");                             // negatives
    TL_CHECK(gsm8k_compute_score("#### -5", "-5", GSM8K_STRICT, 0.0, 1.0) == 1.0, "negative");
    check_extract("#### -.5", GSM8K_STRICT, "-.5");
    check_extract("#### $5", GSM8K_STRICT, NULL);                             // '$' is not in the class
    check_extract("#### 5$", GSM8K_STRICT, "5");
    check_extract("#### -", GSM8K_STRICT, NULL);
    check_extract("####  5", GSM8K_STRICT, NULL);                             // two spaces
    check_extract("####5", GSM8K_STRICT, NULL);
    check_extract("#### 3 then #### 4", GSM8K_STRICT, "4");                  // the last one
    check_extract("##### 8", GSM8K_STRICT, "8");
    check_extract("The answer is 72", GSM8K_STRICT, NULL);                    // no answer
    TL_CHECK(gsm8k_compute_score("The answer is 72", "72", GSM8K_STRICT, 0.5, 1.0) == 0.0, "no answer -> 0, not format");
    check_extract("", GSM8K_STRICT, NULL);
    // Flexible mode.
    check_extract("The answer is 72", GSM8K_FLEXIBLE, "72");
    check_extract("I think it is 42. Then 17.", GSM8K_FLEXIBLE, "17.");
    check_extract("total 1,234 apples", GSM8K_FLEXIBLE, "1,234");            // no comma stripping
    check_extract("a -3 b", GSM8K_FLEXIBLE, "-3");
    check_extract("5-3", GSM8K_FLEXIBLE, "-3");
    check_extract("it is 7. Done.", GSM8K_FLEXIBLE, "7.");
    check_extract("Hmm. Ok.", GSM8K_FLEXIBLE, ".");                          // all '.': the first match stays
    check_extract("x 9 then .", GSM8K_FLEXIBLE, "9");
    check_extract("no digits here", GSM8K_FLEXIBLE, NULL);
    TL_CHECK(gsm8k_compute_score("The answer is 72", "72", GSM8K_FLEXIBLE, 0.0, 1.0) == 1.0, "flexible score");
    // Only the last 300 characters (code points, not bytes) are searched.
    char buf[2048];
    strcpy(buf, "#### 5");
    for (int i = 0; i < 300; i++) strcat(buf, "x");
    check_extract(buf, GSM8K_STRICT, NULL);
    strcpy(buf, "#### 7");
    for (int i = 0; i < 294; i++) strcat(buf, "\xc3\xa9");   // 6 + 294 = 300 characters, 594 bytes
    check_extract(buf, GSM8K_STRICT, "7");
    strcat(buf, "\xc3\xa9");                                 // 301 characters: "#" is cut, "### 7" stays
    check_extract(buf, GSM8K_STRICT, NULL);
}

static void test_gsm8k_python(void) {
    if (access("/usr/bin/python3", X_OK) != 0) { tl_skip("no /usr/bin/python3: GSM8K regex cross-check skipped"); return; }
    char *dir = tl_tmpdir("gsm8k");
    char *path = rlc_path_join(dir, "cases.jsonl");
    if (tl_system("/usr/bin/python3 tests/py/gsm8k_ref.py %s 5 3000", path) != 0) { TL_CHECK(0, "gsm8k_ref.py failed"); return; }
    char *text = rlc_read_file(path, NULL);
    int n = 0, bad = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        const char *s = cJSON_GetObjectItem(j, "s")->valuestring;
        for (int m = 0; m < 2; m++) {
            cJSON *w = cJSON_GetObjectItem(j, m ? "flexible" : "strict");
            char *a = gsm8k_extract(s, strlen(s), (gsm8k_method)m);
            int ok = cJSON_IsNull(w) ? a == NULL : (a && !strcmp(a, w->valuestring));
            if (!ok && bad++ < 5)
                fprintf(stderr, "mismatch (%s) on \"%s\": got %s want %s\n", m ? "flexible" : "strict", s, a ? a : "None",
                        cJSON_IsNull(w) ? "None" : w->valuestring);
            free(a);
        }
        n++;
        cJSON_Delete(j);
    }
    TL_CHECK(n == 3000 && bad == 0, "GSM8K extraction matches Python re on %d random strings (%d mismatches)", n, bad);
    free(text);
    tl_system("rm -rf %s", dir);
    free(path);
    free(dir);
}

static void die_unknown_source(const void *arg) {
    rlc_reward_fn r;
    rlc_reward_init(&r, NULL, 1);
    rlc_reward_request q[2] = {{"openai/gsm8k", "#### 1", "1", NULL}, {(const char *)arg, "x", "1", NULL}};
    rlc_reward_result o[2];
    rlc_reward_compute(&r, 2, q, o);
}

static void test_dispatch(void) {
    rlc_reward_fn r;
    rlc_reward_init(&r, NULL, 1);
    rlc_reward_request q[3] = {{"openai/gsm8k", "so\n#### 18", "18", NULL},
                               {"openai/gsm8k", "#### 18.", "18", NULL},
                               {"openai/gsm8k", "eighteen", "18", NULL}};
    rlc_reward_result o[3];
    rlc_reward_compute(&r, 3, q, o);
    TL_CHECK(o[0].score == 1 && o[1].score == 0 && o[2].score == 0, "built-in gsm8k scores");
    TL_CHECK(o[0].n_extra == 1 && !strcmp(o[0].extra_keys[0], "acc") && o[0].extra_vals[0] == 1, "acc extra metric");
    TL_CHECK(!strcmp(o[0].pred, "18") && !strcmp(o[1].pred, "18.") && !strcmp(o[2].pred, ""), "pred");
    for (int i = 0; i < 3; i++) rlc_reward_result_free(&o[i]);
    rlc_reward_free(&r);
    float sc[3] = {1, 0.5f, 2}, ts[12];
    int64_t len[3] = {4, 2, 0};
    rlc_reward_token_scores(ts, sc, len, 3, 4);
    TL_CHECK(ts[3] == 1 && ts[4 + 1] == 0.5f && ts[8 + 3] == 2 && ts[0] == 0 && ts[4 + 2] == 0, "scores at the last valid token");
    expect_die("unknown data_source", die_unknown_source, "lighteval/MATH",
               (const char *[]){"data_source 'lighteval/MATH'", "sample 1", "custom_reward_function.command", NULL});
}

typedef struct { const char *cmd; double timeout; int n; int big; } ext_case;

static void run_ext(const void *arg) {
    const ext_case *c = arg;
    rlc_reward_ext x;
    rlc_reward_ext_start(&x, c->cmd, c->timeout);
    rlc_reward_request *q = rlc_calloc((size_t)c->n, sizeof *q);
    char *big = NULL;
    if (c->big) {
        big = rlc_malloc(1 << 20);
        memset(big, 'a', (1 << 20) - 1);
        big[(1 << 20) - 1] = 0;
    }
    for (int i = 0; i < c->n; i++) q[i] = (rlc_reward_request){"openai/gsm8k", big ? big : "#### 3", "3", NULL};
    rlc_reward_result *o = rlc_calloc((size_t)c->n, sizeof *o);
    rlc_reward_ext_score(&x, c->n, q, o);
    rlc_reward_ext_stop(&x);
}

static void test_external(void) {
    if (access("/usr/bin/python3", X_OK) != 0) { tl_skip("no /usr/bin/python3: external reward tests skipped"); return; }
    rlc_reward_fn r;
    rlc_reward_init(&r, "/usr/bin/python3 tests/py/reward_server.py ok", 20);
    // 64 requests of ~100 KB each (6 MB, far beyond a pipe buffer) while the server answers as it reads.
    const int n = 64;
    const size_t L = 100000;
    char **resp = rlc_malloc(n * sizeof(char *));
    rlc_reward_request *q = rlc_malloc(n * sizeof *q);
    char gt[32];
    for (int i = 0; i < n; i++) {
        resp[i] = rlc_malloc(L + 64);
        memset(resp[i], 'z', L);
        snprintf(resp[i] + L, 64, " \"quoted\"\n\\ line %s #### %d", i % 3 ? "é" : "", i);
        q[i] = (rlc_reward_request){"my/source", resp[i], NULL, i == 5 ? "{\"bonus\": 0.25}" : NULL};
    }
    char *gts[64];
    for (int i = 0; i < n; i++) {
        snprintf(gt, sizeof gt, "#### %d", (i % 2) ? i : 1000 + i);
        gts[i] = rlc_strdup(gt);
        q[i].ground_truth = gts[i];
    }
    rlc_reward_result *o = rlc_calloc(n, sizeof *o);
    double t0 = rlc_now();
    rlc_reward_compute(&r, n, q, o);
    int ok = 1;
    for (int i = 0; i < n; i++) {
        double want = (i % 2) ? 1.0 : 0.0;
        if (i == 5) want += 0.25;
        ok = ok && o[i].score == want && o[i].n_extra == 2 && !strcmp(o[i].extra_keys[0], "len") &&
             o[i].extra_vals[0] == (double)strlen(resp[i]) - (i % 3 ? 1 : 0) && !strcmp(o[i].extra_keys[1], "acc") &&
             o[i].pred != NULL;
    }
    TL_CHECK(ok, "external reward: scores, extra metrics and extra_info for 64 pipelined 100 KB requests");
    printf("external reward: 64 x 100 KB requests in %.2f s\n", rlc_now() - t0);
    for (int i = 0; i < n; i++) rlc_reward_result_free(&o[i]);
    // A second batch on the same process (ids continue).
    rlc_reward_compute(&r, 3, q, o);
    TL_CHECK(o[0].score == 0 && o[1].score == 1, "second batch on the long-running process");
    for (int i = 0; i < 3; i++) rlc_reward_result_free(&o[i]);
    rlc_reward_free(&r);
    for (int i = 0; i < n; i++) { free(resp[i]); free(gts[i]); }
    free(resp); free(q); free(o);

    ext_case die = {"/usr/bin/python3 tests/py/reward_server.py die 2", 20, 5, 0};
    expect_die("process dies", run_ext, &die, (const char *[]){"exited with status 3", "before answering request 2", NULL});
    ext_case hang = {"/usr/bin/python3 tests/py/reward_server.py hang", 0.5, 2, 0};
    expect_die("hang -> timeout", run_ext, &hang, (const char *[]){"did not answer request 0", "within 0.5 s", NULL});
    ext_case mal = {"/usr/bin/python3 tests/py/reward_server.py malformed", 20, 2, 0};
    expect_die("malformed JSON", run_ext, &mal,
               (const char *[]){"reply to request 0", "not a JSON object", "this is not json", NULL});
    ext_case nos = {"/usr/bin/python3 tests/py/reward_server.py noscore", 20, 2, 0};
    expect_die("no score", run_ext, &nos, (const char *[]){"reply to request 0", "\"score\"", NULL});
    ext_case wid = {"/usr/bin/python3 tests/py/reward_server.py wrongid", 20, 2, 0};
    expect_die("wrong id", run_ext, &wid, (const char *[]){"reply to request 0", "request order", NULL});
    ext_case ex0 = {"exit 0", 5, 2, 0};
    expect_die("exits at once", run_ext, &ex0, (const char *[]){"'exit 0' exited with status 0", "request 0", NULL});
    // Writing 4 x 1 MB to a process that never reads and exits: EPIPE, not a SIGPIPE death.
    ext_case pipe_ = {"sleep 0.2; exit 0", 5, 4, 1};
    expect_die("SIGPIPE handled", run_ext, &pipe_, (const char *[]){"exited with status 0", "before answering request 0", NULL});
    ext_case nocmd = {"/nonexistent/reward-program", 5, 1, 0};
    expect_die("missing program", run_ext, &nocmd, (const char *[]){"exited with status 127", NULL});
}

static void test_python_adapter(void) {
    if (access("/usr/bin/python3", X_OK) != 0) { tl_skip("no /usr/bin/python3: adapter test skipped"); return; }
    char *cmd = rlc_reward_python_command("/usr/bin/python3", "tests/py/my_reward.py", "compute_score");
    rlc_reward_fn r;
    rlc_reward_init(&r, cmd, 20);
    rlc_reward_request q[3] = {{"x", "it's 12 o'clock", "12", NULL},
                               {"x", "nope", "12", NULL},
                               {"x", "ends with 12", "12", "{\"as_dict\": true}"}};
    rlc_reward_result o[3];
    rlc_reward_compute(&r, 3, q, o);
    TL_CHECK(o[0].score == 1 && o[1].score == 0 && o[2].score == 1, "verl-style compute_score through the adapter");
    TL_CHECK(o[0].n_extra == 1 && !strcmp(o[0].extra_keys[0], "acc"), "float result: acc = score");
    TL_CHECK(o[2].n_extra == 1 && !strcmp(o[2].extra_keys[0], "acc") && o[2].pred && !strcmp(o[2].pred, "12"),
             "dict result: numeric extras and pred kept, strings dropped");
    for (int i = 0; i < 3; i++) rlc_reward_result_free(&o[i]);
    rlc_reward_free(&r);
    free(cmd);
    cmd = rlc_reward_python_command("/usr/bin/python3", "tests/py/my_reward.py", "always_two");
    rlc_reward_init(&r, cmd, 20);
    rlc_reward_compute(&r, 1, q, o);
    TL_CHECK(o[0].score == 2, "another function name");
    rlc_reward_result_free(&o[0]);
    rlc_reward_free(&r);
    free(cmd);
}

int main(void) {
    test_gsm8k_hand();
    test_gsm8k_python();
    test_dispatch();
    test_external();
    test_python_adapter();
    return tl_summary();
}
