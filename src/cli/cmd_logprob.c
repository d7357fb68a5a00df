// cmd_logprob.c: `rlc logprob`: per-token log-probs and entropy of sequences under a checkpoint.
//
// Input: JSONL, one {"input_ids": [...]} per line (other keys are ignored). Output: JSONL in input order,
// {"logprobs": [n-1 values], "entropy": [n-1 values]}: logprobs[t-1] = log p(token t | tokens 0..t-1) and
// entropy[t-1] the entropy of that distribution, for t = 1..n-1, both at the given temperature. Many
// lines are packed into one batch up to --max-batch-tokens. The whole input is validated before any
// compute; the output is written atomically.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cli/cli.h"
#include "core/atomic_writer.h"
#include "core/common.h"
#include "data/jsonl.h"
#include "io/checkpoint.h"
#include "io/hf_cache.h"
#include "io/peft.h"
#include "model/decoder.h"

static const char *USAGE =
    "rlc logprob --model DIR|ORG/NAME --data IN.jsonl --out OUT.jsonl [--temperature T] [--max-batch-tokens N] [--threads N] "
    "[--adapter DIR] [--allow-nonfinite]";

typedef struct {
    int n;             // sequences
    int64_t T;         // tokens in all
    int32_t *tokens;   // (T)
    int64_t *start;    // (n+1) offsets into tokens
} seq_set;

// Parse and validate every line of `path` against the model's vocab and max_position_embeddings.
static void read_sequences(seq_set *ss, const char *path, const model_config *cfg) {
    memset(ss, 0, sizeof *ss);
    int64_t cap_n = 64;
    ss->start = rlc_malloc((size_t)(cap_n + 1) * sizeof(int64_t));
    ss->start[0] = 0;
    rlc_ivec all = {0};
    rlc_jsonl r;
    rlc_jsonl_open(&r, path, "sequences");
    r.blank_is_error = 1;   // output line i scores input line i
    const cJSON *o;
    while ((o = rlc_jsonl_next(&r, "{\"input_ids\": [...]}"))) {
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, "input_ids");
        if (!ids) rlc_die("%s:%lld: missing key \"input_ids\"", path, (long long)r.line);
        rlc_jsonl_token_ids(&r, ids, "input_ids", cfg->vocab_size, &all);
        const int64_t n = all.n - ss->T;
        if (n < 1) rlc_die("%s:%lld: \"input_ids\" is empty; expected at least 1 token", path, (long long)r.line);
        if (n > cfg->max_position_embeddings)
            rlc_die("%s:%lld: sequence of %lld tokens is longer than max_position_embeddings = %d", path, (long long)r.line,
                    (long long)n, cfg->max_position_embeddings);
        if (ss->n == cap_n) {
            cap_n *= 2;
            ss->start = rlc_realloc(ss->start, (size_t)(cap_n + 1) * sizeof(int64_t));
        }
        ss->T = all.n;
        ss->start[++ss->n] = ss->T;
    }
    rlc_jsonl_close(&r);
    ss->tokens = all.v;
}

static void put_floats(rlc_atomic_writer *w, const char *key, const float *x, int64_t n, int first) {
    char buf[64];
    int k = snprintf(buf, sizeof buf, "%s\"%s\": [", first ? "{" : ", ", key);
    rlc_atomic_write(w, buf, (size_t)k);
    for (int64_t i = 0; i < n; i++) {
        if (isfinite(x[i])) k = snprintf(buf, sizeof buf, "%s%.9g", i ? ", " : "", x[i]);
        else k = snprintf(buf, sizeof buf, "%snull", i ? ", " : "");   // JSON has no inf/nan
        rlc_atomic_write(w, buf, (size_t)k);
    }
    rlc_atomic_write(w, "]", 1);
}

int cmd_logprob(int argc, char **argv) {
    cli_args args;
    cli_args_init(&args, argc, argv);
    if (cli_flag(&args, "help")) { printf("usage: %s\n", USAGE); cli_args_free(&args); return 0; }
    char *model_dir = hf_resolve_model(cli_opt_req(&args, "model"), "--model");   // a directory or a cached hub id
    const char *data = cli_opt_req(&args, "data");
    const char *out_path = cli_opt_req(&args, "out");
    float temperature = (float)cli_double(&args, "temperature", 1.0, 1e-6, 1e6);
    int64_t budget = cli_int(&args, "max-batch-tokens", 4096, 1, 1 << 30);
    int threads = (int)cli_int(&args, "threads", 0, 0, 1024);
    // forensics on a broken checkpoint: load non-finite weights and write non-finite outputs as null
    const int allow_nonfinite = cli_flag(&args, "allow-nonfinite");
    const char *adapter = cli_opt(&args, "adapter");   // a PEFT LoRA folder applied unmerged on the base
    cli_check_unknown(&args, USAGE);

    backend_ctx be;
    backend_init(&be, threads);
    model_config cfg;
    model_config_load(&cfg, model_dir);
    seq_set ss;
    read_sequences(&ss, data, &cfg);   // validate the whole input before loading weights
    param_layout pl;
    param_set ps;
    double t0 = rlc_now();
    checkpoint_load_ex(model_dir, &cfg, &pl, &ps, allow_nonfinite);
    double t_load = rlc_now() - t0;
    decoder_model m;
    decoder_model_init(&m, &pl, &ps, &be);
    lora_layout ll;
    param_set ad = {0};
    if (adapter) {
        peft_load(adapter, &cfg, &ll, &ad);
        decoder_set_lora(&m, &ll, ad.data, NULL);
    }

    int64_t max_len = 0;
    for (int i = 0; i < ss.n; i++)
        if (ss.start[i + 1] - ss.start[i] > max_len) max_len = ss.start[i + 1] - ss.start[i];
    if (budget < max_len) budget = max_len;   // a long sequence gets a batch of its own
    int64_t cap = budget < ss.T ? budget : ss.T;
    if (cap < 1) cap = 1;
    int32_t *cu = rlc_malloc((size_t)(ss.n + 1) * sizeof(int32_t));
    int32_t *pos = rlc_malloc((size_t)cap * sizeof(int32_t));
    int32_t *targets = rlc_malloc((size_t)cap * sizeof(int32_t));
    float *logp = rlc_malloc((size_t)cap * sizeof(float));
    float *ent = rlc_malloc((size_t)cap * sizeof(float));

    rlc_atomic_writer w;
    if (rlc_atomic_open(&w, out_path) != 0) rlc_die("%s: cannot create output file", out_path);
    t0 = rlc_now();
    int n_batches = 0;
    for (int s0 = 0; s0 < ss.n;) {
        int s1 = s0 + 1;
        while (s1 < ss.n && ss.start[s1 + 1] - ss.start[s0] <= budget) s1++;
        int64_t base = ss.start[s0];
        decoder_batch b = {.T = ss.start[s1] - base, .n_seqs = s1 - s0, .tokens = ss.tokens + base, .cu_seqlens = cu, .pos = pos};
        for (int s = s0; s <= s1; s++) cu[s - s0] = (int32_t)(ss.start[s] - base);
        for (int s = s0; s < s1; s++)
            for (int64_t t = ss.start[s]; t < ss.start[s + 1]; t++) targets[t - base] = t + 1 < ss.start[s + 1] ? ss.tokens[t + 1] : -1;
        decoder_batch_positions(&b);
        decoder_forward(&m, NULL, &b, NULL);
        decoder_logprob(&m, NULL, &b, targets, temperature, logp, ent);
        for (int s = s0; s < s1; s++) {
            int64_t o = ss.start[s] - base, n = ss.start[s + 1] - ss.start[s];
            for (int64_t t = 0; t + 1 < n && !allow_nonfinite; t++)
                if (!isfinite(logp[o + t]) || !isfinite(ent[o + t]))
                    rlc_die("%s:%d: token %lld has a non-finite %s (%g) under %s; the model's outputs are not finite "
                            "(--allow-nonfinite writes null)", data, s + 1, (long long)t + 1,
                            isfinite(logp[o + t]) ? "entropy" : "log-prob", isfinite(logp[o + t]) ? ent[o + t] : logp[o + t],
                            model_dir);
            put_floats(&w, "logprobs", logp + o, n - 1, 1);
            put_floats(&w, "entropy", ent + o, n - 1, 0);
            rlc_atomic_write(&w, "}\n", 2);
        }
        n_batches++;
        s0 = s1;
    }
    if (rlc_atomic_commit(&w) != 0) rlc_die("%s: cannot write output file", out_path);
    double dt = rlc_now() - t0;
    fprintf(stderr, "rlc logprob: %d sequences, %lld tokens in %d batches; load %.2f s, compute %.2f s (%.1f tokens/s), BLAS %s, %d threads\n",
            ss.n, (long long)ss.T, n_batches, t_load, dt, dt > 0 ? (double)ss.T / dt : 0.0, be.blas_core, be.n_threads);

    free(cu); free(pos); free(targets); free(logp); free(ent);
    free(ss.tokens); free(ss.start);
    decoder_model_free(&m);
    if (adapter) { param_set_free(&ad); lora_layout_free(&ll); }
    param_set_free(&ps);
    param_layout_free(&pl);
    free(model_dir);
    cli_args_free(&args);
    return 0;
}
