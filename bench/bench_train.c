// bench_train.c: training throughput on the Qwen3-0.6B shape: forward + backward + clip + AdamW through the
// engine (src/trainer/engine.h) on --seqs sequences of --len tokens (8 x 512), for each activation
// checkpointing mode (default none and full; each mode runs in its own child process, so peak RSS is per
// mode). Reports tokens/s, achieved GFLOP/s counted as 6 x params x tokens (the recompute of `full` is not
// counted), the ratio to the OpenBLAS sgemm ceiling measured in the same run (T x 3072 x 1024 NT, the MLP
// up-projection shape), activation bytes, peak RSS, and the PyTorch reference step (bench/torch_train.py)
// on the same shape and batch size in the same run. Medians of --steps timed steps after --warmup.
// Any family's config.json; --layers L keeps the first L layers (a model that fits next to its PyTorch peer).
// --tiny: the demo's model (bench/demo_shape.h) at its SFT batch, 32 sequences of 92 tokens (the mean length of
// its SFT data), mode none. Every run also reports GFLOP/s against the fp32 register peak of the same threads,
// measured by an FMA-throughput probe (bench/fma_peak.h).
// Usage: bench_train [--config examples/qwen3-0.6b-config.json] [--layers L] [--seqs 8] [--len 512] [--steps 2]
//        [--warmup 0] [--threads N] [--modes none,full] [--micro-seqs-none K] [--micro-seqs-full K] [--no-torch]
//        [--tiny]
// Run with OPENBLAS_CORETYPE=SkylakeX on AVX-512 machines (rlc fixes it itself when unset; torch reads it too).
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/common.h"
#include "core/rng.h"
#include "model/decoder.h"
#include "trainer/engine.h"
#include "bench_util.h"
#include "demo_shape.h"
#include "fma_peak.h"


static double sgemm_ceiling(int64_t M, int64_t N, int64_t K) {
    float *A = rlc_alloc((size_t)(M * K) * 4), *B = rlc_alloc((size_t)(N * K) * 4), *C = rlc_alloc((size_t)(M * N) * 4);
    for (int64_t i = 0; i < M * K; i++) A[i] = (float)((i * 7) % 13) * 0.01f;
    for (int64_t i = 0; i < N * K; i++) B[i] = (float)((i * 5) % 11) * 0.01f;
    backend_sgemm(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);   // warm
    double t[5];
    for (int r = 0; r < 5; r++) {
        double t0 = rlc_now();
        backend_sgemm(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
        t[r] = rlc_now() - t0;
    }
    rlc_free(A); rlc_free(B); rlc_free(C);
    return 2.0 * (double)M * N * K / bench_median(t, 5) / 1e9;
}

typedef struct {
    double step_s, tokens_per_s, gflops, first_s;
    int64_t acts_bytes, peak_rss, state_bytes;
    int n_micro;
    double loss, grad_norm;
} mode_result;

static double ce_loss(void *user, const engine_micro *mb) {
    (void)user;
    double s = 0;
    for (int64_t t = 0; t < mb->T; t++) {
        if (mb->targets[t] < 0) continue;
        s += mb->logp[t];
        mb->dlogp[t] = (float)(-1.0 / mb->global_tokens);
    }
    return -s / mb->global_tokens;
}

static void run_mode(const model_config *cfg, ckpt_mode mode, int seqs, int len, int micro_seqs, int steps, int warmup,
                     int threads, mode_result *res) {
    backend_ctx be;
    backend_init(&be, threads);
    param_layout pl;
    param_layout_init(&pl, cfg);
    param_set ps;
    ps.layout = &pl;
    ps.data = rlc_alloc((size_t)pl.numel * sizeof(float));
    // HF-style init: matrices ~ N(0, 0.02), norms 1 (one Philox stream per 64K chunk: thread-count independent)
    const int64_t CH = 1 << 16;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < (pl.numel + CH - 1) / CH; c++) {
        rng r;
        rng_stream(&r, 1234, 0, (uint64_t)c);
        int64_t b = c * CH, n = pl.numel - b < CH ? pl.numel - b : CH;
        rng_fill_normal(&r, ps.data + b, n, 0.0f, 0.02f);
    }
    for (int i = 0; i < pl.n_tensors; i++)
        if (pl.tensors[i].ndim == 1)
            for (int64_t j = 0; j < pl.tensors[i].numel; j++) ps.data[pl.tensors[i].offset + j] = 1.0f;
    decoder_model m;
    decoder_model_init(&m, &pl, &ps, &be);
    engine_config ec;
    engine_config_default(&ec);
    ec.lr = 1e-5;
    ec.ckpt = mode;
    engine e;
    engine_init(&e, &m, &ec);
    const int64_t T = (int64_t)seqs * len;
    int32_t *tokens = rlc_malloc((size_t)T * 4), *targets = rlc_malloc((size_t)T * 4), *cu = rlc_malloc(((size_t)seqs + 1) * 4);
    rng r;
    rng_stream(&r, 99, 1, 0);
    for (int64_t t = 0; t < T; t++) tokens[t] = (int32_t)rng_below(&r, (uint64_t)cfg->vocab_size);
    for (int s = 0; s <= seqs; s++) cu[s] = s * len;
    for (int64_t t = 0; t < T; t++) targets[t] = (t + 1) % len ? tokens[t + 1] : -1;
    engine_batch b = {.n_seqs = seqs, .cu_seqlens = cu, .tokens = tokens, .targets = targets, .loss_mask = NULL};
    engine_mb mb = {.micro_batch_seqs = micro_seqs, .micro_batch_tokens = 0};
    double *t = rlc_malloc(sizeof(double) * (size_t)(steps + warmup));
    engine_step_stats st;
    for (int i = 0; i < warmup + steps; i++) {
        double t0 = rlc_now();
        engine_train_batch(&e, &b, &mb, 0, ce_loss, NULL, 0, &st);
        engine_lr_scheduler_step(&e);
        t[i] = rlc_now() - t0;
        fprintf(stderr, "  [%s] step %d: %.2f s (%.1f tokens/s; forward+backward %.2f s, clip+AdamW %.2f s), loss %.4f, "
                "grad_norm %.4f, %d micro-batches, peak RSS %.2f GiB\n", decoder_ckpt_name(mode), i, t[i], (double)T / t[i],
                st.fb.seconds, st.opt_seconds, st.fb.loss, st.opt.grad_norm, st.fb.n_micro, (double)rlc_peak_rss() / (1 << 30));
    }
    res->first_s = t[0];
    res->step_s = bench_median(t + warmup, steps);
    res->tokens_per_s = (double)T / res->step_s;
    res->gflops = 6.0 * (double)pl.numel * (double)T / res->step_s / 1e9;
    res->acts_bytes = decoder_acts_bytes(e.acts);
    res->state_bytes = 16 * pl.numel;
    res->peak_rss = rlc_peak_rss();
    res->n_micro = st.fb.n_micro;
    res->loss = st.fb.loss;
    res->grad_norm = st.opt.grad_norm;
    free(t); free(tokens); free(targets); free(cu);
    engine_free(&e);
    decoder_model_free(&m);
    param_set_free(&ps);
    param_layout_free(&pl);
}

int main(int argc, char **argv) {
    backend_fix_blas_coretype(argc, argv);
    const char *config = "examples/qwen3-0.6b-config.json", *modes = "none,full";
    int seqs = 8, len = 512, steps = 2, warmup = 0, threads = 0, no_torch = 0, micro_none = -1, micro_full = -1, layers = 0;
    const char *child_mode = NULL;
    int child_micro = 0, tiny = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--config")) config = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--seqs")) seqs = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--layers")) layers = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--len")) len = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--steps")) steps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--warmup")) warmup = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--modes")) modes = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--micro-seqs-none")) micro_none = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--micro-seqs-full")) micro_full = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-torch")) no_torch = 1;
        else if (!strcmp(argv[i], "--tiny")) tiny = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--child-mode")) child_mode = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--child-micro")) child_micro = atoi(argv[++i]);
        else rlc_die("bench_train: unknown argument '%s' (see the usage at the top of bench/bench_train.c)", argv[i]);
    }
    if (seqs < 1 || len < 2 || steps < 1 || warmup < 0) rlc_die("bench_train: --seqs >= 1, --len >= 2, --steps >= 1 needed");
    char tiny_path[] = "/tmp/rlc-bench-tiny-XXXXXX.json";
    if (tiny) {   // the parent writes the demo's config; its children get it through --config
        config = demo_shape_write(tiny_path);
        seqs = 32, len = 92, modes = "none";
    }
    model_config cfg;
    model_config_load(&cfg, config);
    char cut_path[] = "/tmp/rlc-bench-train-XXXXXX.json";   // a .json path: read as a file, not a model directory
    if (layers > 0 && layers < cfg.num_hidden_layers) {
        // the first `layers` layers (their kinds kept), as a config file the children and PyTorch read
        cfg.num_hidden_layers = layers;
        if (cfg.max_window_layers > layers) cfg.max_window_layers = layers;
        int fd = mkstemps(cut_path, 5);
        CHECK(fd >= 0, "mkstemps %s", cut_path);
        close(fd);
        char *js = model_config_to_json(&cfg);
        CHECK(rlc_write_file_atomic(cut_path, js, strlen(js)) == 0, "write %s", cut_path);
        free(js);
        config = cut_path;
    }
    if (child_mode) {   // internal: one mode, results on one line for the parent
        ckpt_mode mode;
        if (decoder_ckpt_parse(child_mode, &mode) != 0) rlc_die("bench_train: unknown mode '%s'", child_mode);
        mode_result r;
        memset(&r, 0, sizeof r);
        run_mode(&cfg, mode, seqs, len, child_micro, steps, warmup, threads, &r);
        printf("RESULT %.17g %.17g %.17g %.17g %lld %lld %lld %d %.17g %.17g\n", r.step_s, r.first_s, r.tokens_per_s, r.gflops,
               (long long)r.acts_bytes, (long long)r.state_bytes, (long long)r.peak_rss, r.n_micro, r.loss, r.grad_norm);
        return 0;
    }
    backend_ctx be;
    backend_init(&be, threads);
    param_layout pl;
    param_layout_init(&pl, &cfg);
    const int64_t T = (int64_t)seqs * len, P = pl.numel;
    param_layout_free(&pl);
    printf("bench_train: %s%s: %lld params, %d x %d tokens, threads %d, blas_core %s, OPENBLAS_CORETYPE=%s, steps %d (+%d warmup)\n",
           config, layers > 0 ? " (first layers only)" : "", (long long)P, seqs, len, be.n_threads, be.blas_core, getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "(unset)",
           steps, warmup);
    double ceil_gf = sgemm_ceiling(T, cfg.intermediate_size, cfg.hidden_size);
    printf("sgemm ceiling (%lld x %d x %d NT): %.1f GFLOP/s\n", (long long)T, cfg.intermediate_size, cfg.hidden_size, ceil_gf);
    const double peak_gf = fma_peak_gflops(be.n_threads, 20000000);
    printf("fp32 register peak (FMA probe, %d threads): %.1f GFLOP/s\n", be.n_threads, peak_gf);
    fflush(stdout);

    double best_tps = 0;
    char *ms = rlc_strdup(modes);
    for (char *tok = strtok(ms, ","); tok; tok = strtok(NULL, ",")) {
        ckpt_mode mode;
        if (decoder_ckpt_parse(tok, &mode) != 0) rlc_die("bench_train: unknown mode '%s'", tok);
        // micro-batch: the whole batch when its activations fit in 3 GiB (16 bytes/param of state + activations
        // must fit next to other work in 24 GiB), else fewer sequences at a time; --micro-seqs-* override
        int micro = mode == CKPT_NONE ? micro_none : micro_full;
        if (micro <= 0) {
            micro = seqs;
            while (micro > 1 && decoder_acts_bytes_for(&cfg, (int64_t)micro * len, mode) > ((int64_t)3 << 30)) micro /= 2;
        }
        // Each mode in a fresh process (its own peak RSS; fork after OpenMP would deadlock libgomp).
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "/proc/%d/exe --config %s --seqs %d --len %d --steps %d --warmup %d --threads %d "
                 "--child-mode %s --child-micro %d", (int)getpid(), config, seqs, len, steps, warmup, be.n_threads, tok, micro);
        fflush(stdout);
        FILE *p = popen(cmd, "r");
        mode_result r;
        memset(&r, 0, sizeof r);
        int ok = 0;
        char line[1024];
        while (p && fgets(line, sizeof line, p)) {
            long long ab, sb, rss;
            if (sscanf(line, "RESULT %lf %lf %lf %lf %lld %lld %lld %d %lf %lf", &r.step_s, &r.first_s, &r.tokens_per_s,
                       &r.gflops, &ab, &sb, &rss, &r.n_micro, &r.loss, &r.grad_norm) == 10) {
                r.acts_bytes = ab; r.state_bytes = sb; r.peak_rss = rss;
                ok = 1;
            }
        }
        if (!p || pclose(p) != 0 || !ok) {
            printf("rlc [%s]: child run failed (%s)\n", tok, cmd);
            continue;
        }
        printf("rlc [%-9s] micro-batches of %d seqs: step %.2f s (first %.2f s): %.1f tokens/s, %.1f GFLOP/s (6NT) = %.0f%% of "
               "sgemm ceiling, %.0f%% of register peak; activations %.2f GiB, state %.2f GiB, peak RSS %.2f GiB\n",
               tok, micro, r.step_s, r.first_s, r.tokens_per_s, r.gflops, 100.0 * r.gflops / ceil_gf, 100.0 * r.gflops / peak_gf,
               (double)r.acts_bytes / (1 << 30), (double)r.state_bytes / (1 << 30), (double)r.peak_rss / (1 << 30));
        fflush(stdout);
        if (r.tokens_per_s > best_tps) best_tps = r.tokens_per_s;
    }
    free(ms);
    if (!no_torch) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 bench/torch_train.py %s --seqs %d --len %d --steps %d --warmup %d --threads %d",
                 config, seqs, len, steps, warmup, be.n_threads);
        fflush(stdout);
        FILE *p = popen(cmd, "r");
        char line[4096] = {0};
        double tps = 0, rss = 0, med = 0;
        if (p) {
            while (fgets(line, sizeof line, p)) {
                char *q = strstr(line, "\"tokens_per_s\": ");
                if (q) tps = atof(q + 16);
                q = strstr(line, "\"peak_rss_gib\": ");
                if (q) rss = atof(q + 16);
                q = strstr(line, "\"median_s\": ");
                if (q) med = atof(q + 12);
            }
            pclose(p);
        }
        if (tps > 0) {
            printf("torch [eager fp32, 1 seq per micro-batch]: step %.2f s: %.1f tokens/s, %.1f GFLOP/s (6NT) = %.0f%% of "
                   "register peak, peak RSS %.2f GiB\n", med, tps, 6.0 * (double)P * tps / 1e9,
                   100.0 * 6.0 * (double)P * tps / 1e9 / peak_gf, rss);
            printf("best rlc / torch: %.2fx (target >= 1.5x)\n", best_tps / tps);
        } else {
            printf("torch reference did not run (%s)\n", cmd);
        }
    }
    if (config == cut_path) unlink(cut_path);
    if (tiny) unlink(tiny_path);
    return 0;
}
