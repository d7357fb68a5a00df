// bench_logprob.c: log-prob throughput of the Qwen3 forward + fused head (what `rlc logprob` runs) on the
// Qwen3-0.6B shape with random weights, 8 sequences of 512 tokens packed into one batch.
// Reports tokens/s, GFLOP/s with work = 2 x params x tokens, the OpenBLAS sgemm ceiling measured in the same
// run (512x2048x1024, NT as the model's products), the BLAS core, peak RSS against 1.25 x fp32 weights
// + 1 GiB, the activation memory of each checkpoint mode, and the PyTorch reference (bench/torch_logprob.py,
// the eager fp32 model of tests/py/qwen3_ref.py) on the same weights and tokens, with the ratio.
// OPENBLAS_CORETYPE: the bench sets it to the recommended core (SkylakeX on AVX-512; RLC_BENCH_CORETYPE
// overrides) and re-execs, and passes the same value to PyTorch.
// Usage: bench_logprob [--config examples/qwen3-0.6b-config.json] [--seqs 8] [--len 512] [--reps 3]
//                      [--threads N] [--layers L] [--torch-reps 1] [--no-torch] [--tiny]
// --tiny: the demo's model (bench/demo_shape.h) at its GRPO log-prob micro-batch, 64 sequences of 80 tokens.
// Every run also reports GFLOP/s against the fp32 register peak of the same threads, measured by an
// FMA-throughput probe (bench/fma_peak.h).
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/common.h"
#include "io/checkpoint.h"
#include "model/decoder.h"
#include "bench_util.h"
#include "demo_shape.h"
#include "fma_peak.h"

// uniform with standard deviation `std` around `mean`, a pure function of (seed, i)
static void fill(float *x, int64_t n, uint64_t seed, float mean, float std) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    const float a = std * 3.4641016f;   // sqrt(12)
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = s + (uint64_t)i * 0xBF58476D1CE4E5B9ull;
        z ^= z >> 31; z *= 0x94D049BB133111EBull; z ^= z >> 29;
        x[i] = mean + a * ((float)(z >> 40) * (1.0f / 16777216.0f) - 0.5f);
    }
}

// The sgemm ceiling: 512x2048x1024, out = A (512,1024) @ B^T, B (2048,1024) (NT, as the model's products).
// GFLOP/s of the median of n calls. Measured before every timed rep (the machine is shared), and the
// median over reps is reported.
typedef struct { float *A, *B, *C; } ceil_bufs;
static double sgemm_ceiling(ceil_bufs *cb, int n) {
    const int64_t M = 512, N = 2048, K = 1024;
    if (!cb->A) {
        cb->A = rlc_alloc((size_t)(M * K) * 4); cb->B = rlc_alloc((size_t)(N * K) * 4); cb->C = rlc_alloc((size_t)(M * N) * 4);
        fill(cb->A, M * K, 1, 0, 1);
        fill(cb->B, N * K, 2, 0, 1);
        backend_sgemm(0, 1, M, N, K, 1.f, cb->A, K, cb->B, K, 0.f, cb->C, N);   // warm-up
    }
    double ts[64];
    for (int r = 0; r < n; r++) {
        double t0 = rlc_now();
        backend_sgemm(0, 1, M, N, K, 1.f, cb->A, K, cb->B, K, 0.f, cb->C, N);
        ts[r] = rlc_now() - t0;
    }
    return 2.0 * M * N * K / bench_median(ts, n) * 1e-9;
}

static void qwen3_06b(model_config *c) {
    memset(c, 0, sizeof *c);
    c->vocab_size = 151936; c->hidden_size = 1024; c->intermediate_size = 3072; c->num_hidden_layers = 28;
    c->num_attention_heads = 16; c->num_key_value_heads = 8; c->head_dim = 128; c->max_position_embeddings = 40960;
    c->rms_norm_eps = 1e-6f; c->rope_theta = 1e6; c->tie_word_embeddings = 1; c->bos_token_id = 151643;
    c->eos_token_id = 151645; c->eos_token_ids[0] = 151645; c->n_eos_token_ids = 1; c->sliding_window = -1;
    c->max_window_layers = 28; c->initializer_range = 0.02f;
    snprintf(c->torch_dtype, sizeof c->torch_dtype, "float32");
    model_config_finalize(c);
}

int main(int argc, char **argv) {
    // Same BLAS kernels for rlc and PyTorch: pick the core type before OpenBLAS initialises.
    // The issue compares with OPENBLAS_CORETYPE=SkylakeX for both (the recommended core on AVX-512 CPUs);
    // RLC_BENCH_CORETYPE overrides. An inherited different value (e.g. Haswell) is replaced.
    const char *want = getenv("RLC_BENCH_CORETYPE") ? getenv("RLC_BENCH_CORETYPE") : backend_blas_recommended_core();
    if (want && (!getenv("OPENBLAS_CORETYPE") || strcmp(getenv("OPENBLAS_CORETYPE"), want) != 0)) {
        setenv("OPENBLAS_CORETYPE", want, 1);
        execv("/proc/self/exe", argv);
        rlc_warn("bench_logprob: re-exec with OPENBLAS_CORETYPE=%s failed", want);
    }
    backend_fix_blas_coretype(argc, argv);   // the OpenMP settings rlc itself runs with
    setvbuf(stdout, NULL, _IOLBF, 0);   // progress lines appear as they come, even into a file
    const char *config = "examples/qwen3-0.6b-config.json";
    int seqs = 8, len = 512, reps = 3, threads = 0, layers = -1, torch_reps = 1, no_torch = 0, tiny = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--config")) config = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--seqs")) seqs = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--len")) len = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--layers")) layers = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--torch-reps")) torch_reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-torch")) no_torch = 1;
        else if (!strcmp(argv[i], "--tiny")) tiny = 1;
        else rlc_die("bench_logprob: unknown argument '%s' (expected --config, --seqs, --len, --reps, --threads, --layers, "
                     "--torch-reps, --no-torch, --tiny)", argv[i]);
    }
    if (seqs < 1 || len < 2 || reps < 1 || reps > 50 || torch_reps < 1) rlc_die("bench_logprob: bad sizes or reps");
    char tiny_path[] = "/tmp/rlc-bench-tiny-XXXXXX.json";
    if (tiny) config = demo_shape_write(tiny_path), seqs = 64, len = 80;
    backend_ctx be;
    backend_init(&be, threads);
    model_config cfg;
    if (rlc_file_exists(config)) model_config_load(&cfg, config);
    else qwen3_06b(&cfg);
    if (layers > 0) cfg.num_hidden_layers = cfg.max_window_layers = layers;
    snprintf(cfg.torch_dtype, sizeof cfg.torch_dtype, "float32");
    param_layout pl;
    param_layout_init(&pl, &cfg);
    param_set ps;
    param_set_init(&ps, &pl);
    for (int i = 0; i < pl.n_tensors; i++) {
        const param_tensor *t = &pl.tensors[i];
        if (t->ndim == 1) fill(ps.data + t->offset, t->numel, 100 + (uint64_t)i, 1.0f, 0.1f);
        else fill(ps.data + t->offset, t->numel, 100 + (uint64_t)i, 0.0f, cfg.initializer_range);
    }
    const int64_t T = (int64_t)seqs * len;
    const double params = (double)pl.numel;
    printf("bench_logprob: %s%s, L=%d H=%d I=%d heads %d/%d D=%d V=%d tied=%d, %.1fM params; %d x %d tokens; threads=%d "
           "blas_core=%s (OPENBLAS_CORETYPE=%s); reps=%d\n",
           rlc_file_exists(config) ? config : "built-in Qwen3-0.6B", layers > 0 ? " (layers overridden)" : "",
           cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads, cfg.num_key_value_heads,
           cfg.head_dim, cfg.vocab_size, cfg.tie_word_embeddings, params * 1e-6, seqs, len, be.n_threads, be.blas_core,
           getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset", reps);

    // tokens: seqs x len random ids, packed; targets = next token, none at each sequence end
    int32_t *tokens = rlc_malloc((size_t)T * 4), *targets = rlc_malloc((size_t)T * 4), *pos = rlc_malloc((size_t)T * 4);
    int32_t *cu = rlc_malloc((size_t)(seqs + 1) * 4);
    uint64_t z = 42;
    for (int64_t t = 0; t < T; t++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        tokens[t] = (int32_t)((z >> 33) % (uint64_t)cfg.vocab_size);
    }
    for (int s = 0; s <= seqs; s++) cu[s] = s * len;
    for (int64_t t = 0; t < T; t++) targets[t] = (t + 1) % len ? tokens[t + 1] : -1;
    decoder_batch b = {.T = T, .n_seqs = seqs, .tokens = tokens, .cu_seqlens = cu, .pos = pos};
    decoder_batch_positions(&b);

    decoder_model m;
    decoder_model_init(&m, &pl, &ps, &be);
    float *logp = rlc_malloc((size_t)T * 4), *ent = rlc_malloc((size_t)T * 4);
    double tb[50], th[50], tt[50];
    decoder_forward(&m, NULL, &b, NULL);   // warm-up (allocates the scratch)
    decoder_logprob(&m, NULL, &b, targets, 1.0f, logp, ent);
    ceil_bufs cb = {0};
    double ceils[50];
    for (int r = 0; r < reps; r++) {
        ceils[r] = sgemm_ceiling(&cb, 15);
        double t0 = rlc_now();
        decoder_forward(&m, NULL, &b, NULL);
        double t1 = rlc_now();
        decoder_logprob(&m, NULL, &b, targets, 1.0f, logp, ent);
        double t2 = rlc_now();
        tb[r] = t1 - t0; th[r] = t2 - t1; tt[r] = t2 - t0;
    }
    double ceil_gf = bench_median(ceils, reps);
    rlc_free(cb.A); rlc_free(cb.B); rlc_free(cb.C);
    printf("sgemm ceiling 512x2048x1024 (NT): %.1f GFLOP/s (median over reps of the median of 15 calls)\n", ceil_gf);
    const double peak_gf = fma_peak_gflops(be.n_threads, 20000000);
    printf("fp32 register peak (FMA probe, %d threads): %.1f GFLOP/s\n", be.n_threads, peak_gf);
    double ratios[50];   // per rep: achieved / the ceiling measured just before it (robust to a shared machine)
    for (int r = 0; r < reps; r++) ratios[r] = 2.0 * params * (double)T / tt[r] * 1e-9 / ceils[r];
    double ratio_med = bench_median(ratios, reps);
    double t_med = bench_median(tt, reps), tb_med = bench_median(tb, reps), th_med = bench_median(th, reps);
    double gf = 2.0 * params * (double)T / t_med * 1e-9;
    double tok_s = (double)T / t_med;
    printf("rlc: %.3f s per batch (body %.3f s, head %.3f s), %.1f tokens/s, %.1f GFLOP/s = %.1f%% of the sgemm ceiling "
           "(target >= 75%%), %.1f%% of register peak; per-rep ratio median %.1f%%\n", t_med, tb_med, th_med, tok_s, gf,
           100.0 * gf / ceil_gf, 100.0 * gf / peak_gf, 100.0 * ratio_med);
    int64_t rss = rlc_peak_rss();
    double wbytes = 4.0 * params, limit = 1.25 * wbytes + 1073741824.0;
    printf("peak RSS %.2f GiB vs target %.2f GiB (1.25 x %.2f GiB fp32 weights + 1 GiB): %s\n", rss / 1073741824.0,
           limit / 1073741824.0, wbytes / 1073741824.0, rss < limit ? "ok" : "OVER");
    for (int mode = 0; mode < 3; mode++)
        printf("training activations at T=%lld, ckpt %-9s: %.2f GiB\n", (long long)T, decoder_ckpt_name((ckpt_mode)mode),
               decoder_acts_bytes_for(&cfg, T, (ckpt_mode)mode) / 1073741824.0);

    if (no_torch) { printf("torch: skipped (--no-torch)\n"); }
    else if (system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) { printf("torch: not available, skipped\n"); }
    else {
        char tmpl[] = "/tmp/rlc-bench-logprob-XXXXXX";
        char *dir = mkdtemp(tmpl);
        CHECK(dir, "mkdtemp");
        char *mdir = rlc_path_join(dir, "model");
        checkpoint_save(mdir, &ps, ST_F32);
        char *tok_path = rlc_path_join(dir, "tokens.json"), *out_path = rlc_path_join(dir, "rlc.bin");
        FILE *f = fopen(tok_path, "w");
        CHECK(f, "open %s", tok_path);
        fprintf(f, "{\"seqs\": [");
        for (int s = 0; s < seqs; s++) {
            fprintf(f, "%s[", s ? "," : "");
            for (int t = 0; t < len; t++) fprintf(f, "%s%d", t ? "," : "", tokens[cu[s] + t]);
            fprintf(f, "]");
        }
        fprintf(f, "]}\n");
        fclose(f);
        f = fopen(out_path, "wb");
        for (int s = 0; s < seqs; s++) fwrite(logp + cu[s], 4, (size_t)(len - 1), f);
        for (int s = 0; s < seqs; s++) fwrite(ent + cu[s], 4, (size_t)(len - 1), f);
        fclose(f);
        // free our model before torch runs: the two should not share the machine's memory
        decoder_model_free(&m);
        param_set_free(&ps);
        char cmd[2048], line[512];
        snprintf(cmd, sizeof cmd, "OPENBLAS_CORETYPE=%s /usr/bin/python3 bench/torch_logprob.py %s %s %s %d %d",
                 getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "", mdir, tok_path, out_path, torch_reps, be.n_threads);
        FILE *p = popen(cmd, "r");
        double torch_tok_s = 0;
        while (p && fgets(line, sizeof line, p)) {
            printf("  %s", line);
            if (!strncmp(line, "torch_tokens_per_s ", 19)) torch_tok_s = atof(line + 19);
        }
        int rc = p ? pclose(p) : -1;
        if (rc != 0 || torch_tok_s <= 0) printf("torch: failed (rc %d)\n", rc);
        else printf("torch: %.1f tokens/s, %.1f GFLOP/s = %.1f%% of register peak; rlc / torch = %.2fx (target >= 1.5x)\n",
                    torch_tok_s, 2.0 * params * torch_tok_s * 1e-9, 100.0 * 2.0 * params * torch_tok_s * 1e-9 / peak_gf,
                    tok_s / torch_tok_s);
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) rlc_warn("could not remove %s", dir);
        free(mdir); free(tok_path); free(out_path);
        free(tokens); free(targets); free(pos); free(cu); free(logp); free(ent);
        param_layout_free(&pl);
        if (tiny) unlink(tiny_path);
        return 0;
    }
    decoder_model_free(&m);
    param_set_free(&ps);
    param_layout_free(&pl);
    free(tokens); free(targets); free(pos); free(cu); free(logp); free(ent);
    if (tiny) unlink(tiny_path);
    return 0;
}
