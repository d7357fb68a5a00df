// bench_template.c: chat rendering throughput: conversations per second rendering each family's real chat
// template (tests/data/templates) with rlc's engine, against Python jinja2 rendering the same template and
// conversations in the same run (bench/jinja2_chat_bench.py, transformers' environment). The conversations
// are tests/py/chat_cases.py's (seeded; the ones the template rejects are left out). One thread. Medians
// of REPS repetitions of about SECONDS of CPU time each (both sides count their own thread's CPU time, so a
// shared machine slows neither figure much). Never pass/fail.
// usage: build/bench/bench_template [N_CONVERSATIONS] [SECONDS] [REPS] [FAMILY]   (FAMILY: only that template)
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "template/chat_render.h"
#include "template/template.h"
#include "bench_util.h"

#define TDIR "tests/data/templates"

typedef struct {
    cJSON **conv;
    const cJSON **messages, **tools, **kwargs;   // (n) each conversation's fields, looked up once
    int *add_gen;                                // (n)
    int n;
} conv_set;

// The generated conversations that render (the oracle's verdict), written to `keep` for the Python peer.
static void load_convs(conv_set *cs, const char *fam, int n, const char *tmp, const char *keep) {
    char in[4200], want[4200];
    snprintf(in, sizeof in, "%s/%s.in.jsonl", tmp, fam);
    snprintf(want, sizeof want, "%s/%s.want.jsonl", tmp, fam);
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 tests/py/chat_cases.py %s %d 7 '%s' && /usr/bin/python3 tests/py/jinja_render.py chat "
             TDIR "/%s.jinja " TDIR "/%s.json '%s' '%s'", fam, n, in, fam, fam, in, want);
    if (system(cmd) != 0) rlc_die("bench_template: generating %s conversations failed", fam);
    char *a = rlc_read_file(in, NULL), *b = rlc_read_file(want, NULL);
    FILE *f = fopen(keep, "w");
    if (!f) rlc_die("%s: cannot write", keep);
    cs->conv = rlc_calloc((size_t)n, sizeof *cs->conv);
    cs->n = 0;
    char *sa, *sb;
    for (char *la = strtok_r(a, "\n", &sa), *lb = strtok_r(b, "\n", &sb); la && lb;
         la = strtok_r(NULL, "\n", &sa), lb = strtok_r(NULL, "\n", &sb)) {
        if (strncmp(lb, "{\"text\"", 7)) continue;
        cs->conv[cs->n++] = cJSON_Parse(la);
        fprintf(f, "%s\n", la);
    }
    fclose(f);
    cs->messages = rlc_calloc((size_t)cs->n + 1, sizeof *cs->messages);
    cs->tools = rlc_calloc((size_t)cs->n + 1, sizeof *cs->tools);
    cs->kwargs = rlc_calloc((size_t)cs->n + 1, sizeof *cs->kwargs);
    cs->add_gen = rlc_calloc((size_t)cs->n + 1, sizeof *cs->add_gen);
    for (int i = 0; i < cs->n; i++) {
        const cJSON *c = cs->conv[i];
        cs->messages[i] = cJSON_GetObjectItemCaseSensitive(c, "messages");
        cs->tools[i] = cJSON_GetObjectItemCaseSensitive(c, "tools");
        cs->kwargs[i] = cJSON_GetObjectItemCaseSensitive(c, "kwargs");
        cs->add_gen[i] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt"));
    }
    free(a);
    free(b);
}

// CPU time of this thread: the machine is shared, so wall time would measure the neighbours too
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double rlc_rate(const rlc_tmpl *t, const cJSON *specials, const conv_set *cs, double secs) {
    rlc_strbuf out = {0}, err = {0};
    long long n = 0;
    double t0 = cpu_now(), dt;
    do {
        for (int i = 0; i < cs->n; i++) {
            rlc_sb_clear(&out);
            if (rlc_chat_render(t, specials, cs->messages[i], cs->tools[i], cs->add_gen[i], cs->kwargs[i], &out, &err))
                rlc_die("bench_template: %s", err.s);
        }
        n += cs->n;
        dt = cpu_now() - t0;
    } while (dt < secs);
    rlc_sb_free(&out);
    rlc_sb_free(&err);
    return (double)n / dt;
}

int main(int argc, char **argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 200;
    const double secs = argc > 2 ? atof(argv[2]) : 1.0;
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    if (reps < 1 || reps > 64) reps = 5;
    if (system("/usr/bin/python3 -c 'import jinja2' 2>/dev/null") != 0) {
        printf("bench_template: /usr/bin/python3 has no jinja2 (python3-jinja2): no conversations, no peer\n");
        return 0;
    }
    char tmp[] = "/tmp/rlc-bench-template-XXXXXX";
    if (!mkdtemp(tmp)) rlc_die("bench_template: mkdtemp failed");
    static const char *const FAMS[] = {"qwen3", "qwen2.5", "llama3.1", "llama3.2", "gemma3", "mistral", "smollm2"};
    printf("bench_template: %d generated conversations per family, one thread, median of %d x %.1f s of CPU time\n", n, reps, secs);
    printf("%-9s %6s %14s %14s %8s\n", "family", "convs", "rlc conv/s", "jinja2 conv/s", "ratio");
    const char *only = argc > 4 ? argv[4] : NULL;
    for (size_t f = 0; f < sizeof FAMS / sizeof *FAMS; f++) {
        if (only && strcmp(only, FAMS[f])) continue;
        char keep[4200], tpath[256], spath[256];
        snprintf(keep, sizeof keep, "%s/%s.bench.jsonl", tmp, FAMS[f]);
        snprintf(tpath, sizeof tpath, TDIR "/%s.jinja", FAMS[f]);
        snprintf(spath, sizeof spath, TDIR "/%s.json", FAMS[f]);
        conv_set cs;
        load_convs(&cs, FAMS[f], n, tmp, keep);
        size_t len;
        char *src = rlc_read_file(tpath, &len), *stxt = rlc_read_file(spath, NULL);
        rlc_strbuf err = {0};
        rlc_tmpl *t = rlc_tmpl_parse(src, len, tpath, &err);
        if (!t) rlc_die("%s", err.s);
        cJSON *specials = cJSON_Parse(stxt);
        double r[64], p[64];
        for (int k = 0; k < reps; k++) r[k] = rlc_rate(t, specials, &cs, secs);
        // the peer, same conversations, same machine, right after
        char cmd[16384];
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 bench/jinja2_chat_bench.py %s %s '%s' %g %d", tpath, spath, keep, secs, reps);
        FILE *pp = popen(cmd, "r");
        int np = 0;
        char line[256];
        while (pp && fgets(line, sizeof line, pp) && np < reps)
            if (sscanf(line, "conversations/s: %lf", &p[np]) == 1) np++;
        if (pp) pclose(pp);
        const double rm = bench_median(r, reps), pm = np ? bench_median(p, np) : 0;
        printf("%-9s %6d %14.0f %14.0f %7.1fx\n", FAMS[f], cs.n, rm, pm, pm > 0 ? rm / pm : 0);
        fflush(stdout);
        for (int i = 0; i < cs.n; i++) cJSON_Delete(cs.conv[i]);
        free(cs.conv);
        free(cs.messages);
        free(cs.tools);
        free(cs.kwargs);
        free(cs.add_gen);
        cJSON_Delete(specials);
        rlc_tmpl_free(t);
        rlc_sb_free(&err);
        free(src);
        free(stxt);
    }
    printf("peak RSS %.1f MB\n", (double)rlc_peak_rss() / 1e6);
    char rm[4200];
    snprintf(rm, sizeof rm, "rm -rf '%s'", tmp);
    if (system(rm) != 0) fprintf(stderr, "bench_template: could not remove %s\n", tmp);
    return 0;
}
