// bench_lora.c: LoRA against full fine-tuning on one model shape (default Qwen3-0.6B; --layers L keeps the first L
// layers), in the same run and with the same batch:
//   - update: forward + backward + clip + AdamW through the engine on --seqs x --len random tokens; LoRA (rank --rank,
//     alpha 32, all-linear: the base frozen, no base dW, state over the adapters only) first, then full fine-tuning.
//     Reports tokens/s, the LoRA/full ratio, the optimizer-state bytes and the peak RSS after each phase;
//   - ref: the reference log-prob pass as the same model with adapters off: tokens/s and the bytes it allocates (0);
//   - decode: the rollout engine (fp32 weights) decoding --decode-seqs sequences of --new tokens: plain model, the
//     unmerged rank-r side path, and merged weights (lora.merge); tokens/s and the side path's ratio to plain;
//   - peer: the OpenBLAS sgemm ceiling (T x 3072 x 1024 NT) measured in the same run.
// Medians of --steps timed steps (updates) or --reps runs (decode). The machine may be shared: read ratios, not
// absolute numbers.
// Usage: bench_lora [--config examples/qwen3-0.6b-config.json] [--layers L] [--rank 32] [--seqs 4] [--len 256]
//        [--steps 3] [--decode-seqs 8] [--new 32] [--reps 3] [--threads N]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/common.h"
#include "core/rng.h"
#include "model/decoder.h"
#include "model/lora.h"
#include "rollout/engine.h"
#include "trainer/engine.h"
#include "bench_util.h"

static double sgemm_ceiling(int64_t M, int64_t N, int64_t K) {
    float *A = rlc_alloc((size_t)(M * K) * 4), *B = rlc_alloc((size_t)(N * K) * 4), *C = rlc_alloc((size_t)(M * N) * 4);
    for (int64_t i = 0; i < M * K; i++) A[i] = (float)((i * 7) % 13) * 0.01f;
    for (int64_t i = 0; i < N * K; i++) B[i] = (float)((i * 5) % 11) * 0.01f;
    backend_sgemm(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
    double t[5];
    for (int r = 0; r < 5; r++) {
        double t0 = rlc_now();
        backend_sgemm(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
        t[r] = rlc_now() - t0;
    }
    rlc_free(A); rlc_free(B); rlc_free(C);
    return 2.0 * (double)M * N * K / bench_median(t, 5) / 1e9;
}

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

static void fill(float *x, int64_t n, uint64_t seed, float std) {
    const int64_t CH = 1 << 16;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < (n + CH - 1) / CH; c++) {
        rng r;
        rng_stream(&r, seed, 0, (uint64_t)c);
        int64_t b = c * CH, k = n - b < CH ? n - b : CH;
        rng_fill_normal(&r, x + b, k, 0.0f, std);
    }
}

// Median seconds of `steps` engine_train_batch calls (after one untimed warm-up step).
static double time_updates(engine *e, const engine_batch *b, int steps, double *loss) {
    engine_mb mb = {0};
    engine_step_stats st;
    double *t = malloc((size_t)steps * sizeof(double));
    engine_train_batch(e, b, &mb, 0, ce_loss, NULL, 0, &st);
    for (int i = 0; i < steps; i++) {
        double t0 = rlc_now();
        engine_train_batch(e, b, &mb, 0, ce_loss, NULL, 0, &st);
        t[i] = rlc_now() - t0;
    }
    *loss = st.fb.loss;
    double med = bench_median(t, steps);
    free(t);
    return med;
}

static double time_decode(decoder_model *m, int merge, int seqs, int new_tokens, int reps) {
    rollout_config rc;
    rollout_config_default(&rc);
    rc.n = 1;
    rc.max_new_tokens = new_tokens;
    rc.ignore_eos = 1;
    rc.kv_cache_bytes = (int64_t)256 << 20;
    rc.lora_merge = merge;
    rc.sampling.do_sample = 0;
    rc.sampling.temperature = 0;
    rollout_engine *e = rollout_engine_new(m, &rc);
    int32_t *ids = malloc((size_t)seqs * 8 * sizeof(int32_t));
    rollout_prompt *pr = malloc((size_t)seqs * sizeof *pr);
    for (int s = 0; s < seqs; s++) {
        for (int k = 0; k < 8; k++) ids[s * 8 + k] = (int32_t)((s * 131 + k * 17 + 3) % m->cfg->vocab_size);
        pr[s] = (rollout_prompt){ids + s * 8, 8, (uint64_t)s};
    }
    double *t = malloc((size_t)reps * sizeof(double));
    for (int r = 0; r < reps; r++) {
        rollout_result res;
        double t0 = rlc_now();
        rollout_generate(e, pr, seqs, &res);
        t[r] = (double)res.gen_tokens / (rlc_now() - t0);
        rollout_result_free(&res);
    }
    double med = bench_median(t, reps);
    free(t); free(pr); free(ids);
    rollout_engine_free(e);
    return med;
}

int main(int argc, char **argv) {
    const char *config = "examples/qwen3-0.6b-config.json";
    int layers = 0, rank = 32, seqs = 4, len = 256, steps = 3, dseqs = 8, new_tokens = 32, reps = 3, threads = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--config")) config = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--layers")) layers = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--rank")) rank = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--seqs")) seqs = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--len")) len = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--steps")) steps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--decode-seqs")) dseqs = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--new")) new_tokens = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else { fprintf(stderr, "bench_lora: unknown argument %s\n", argv[i]); return 2; }
    }
    if (steps < 1 || reps < 1 || seqs < 1 || len < 2 || rank < 1) { fprintf(stderr, "bench_lora: bad sizes\n"); return 2; }
    backend_ctx be;
    backend_init(&be, threads);
    model_config cfg;
    model_config_load(&cfg, config);
    if (layers > 0 && layers < cfg.num_hidden_layers) {
        cfg.num_hidden_layers = layers;
        if (cfg.max_window_layers > layers) cfg.max_window_layers = layers;
    }
    param_layout pl;
    param_layout_init(&pl, &cfg);
    param_set ps = {&pl, rlc_alloc((size_t)pl.numel * sizeof(float))};
    fill(ps.data, pl.numel, 1234, 0.02f);
    for (int i = 0; i < pl.n_tensors; i++)
        if (pl.tensors[i].ndim == 1)
            for (int64_t j = 0; j < pl.tensors[i].numel; j++) ps.data[pl.tensors[i].offset + j] = 1.0f;
    lora_config lc;
    lora_config_default(&lc);
    lc.rank = rank;
    lc.alpha = 32;
    lora_layout ll;
    lora_layout_init(&ll, &cfg, &lc, NULL);
    param_set ad;
    param_set_init(&ad, &ll.pl);
    lora_init_weights(&ll, &ad, 7);
    for (int i = 0; i < ll.pl.n_tensors; i++)   // B != 0, so the side path does real work
        if (strstr(ll.pl.tensors[i].name, "lora_B")) fill(ad.data + ll.pl.tensors[i].offset, ll.pl.tensors[i].numel, 99 + (uint64_t)i, 1e-3f);
    char line[160];
    lora_trainable_line(&ll, line, sizeof line);
    printf("bench_lora: %s, %d layers, V %d; LoRA r %d alpha 32 all-linear: %s; batch %d x %d tokens; %d threads, BLAS %s\n",
           config, cfg.num_hidden_layers, cfg.vocab_size, rank, line, seqs, len, be.n_threads, be.blas_core);
    const double ceil_gf = sgemm_ceiling((int64_t)seqs * len, 3072, 1024);

    // the batch: random tokens, next-token targets
    const int64_t T = (int64_t)seqs * len;
    int32_t *tok = malloc((size_t)T * 4), *tgt = malloc((size_t)T * 4), *cu = malloc((size_t)(seqs + 1) * 4);
    for (int64_t t = 0; t < T; t++) tok[t] = (int32_t)((t * 2654435761u) % (uint64_t)cfg.vocab_size);
    for (int s = 0; s <= seqs; s++) cu[s] = s * len;
    for (int64_t t = 0; t < T; t++) tgt[t] = (t + 1) % len ? tok[t + 1] : -1;
    engine_batch b = {.n_seqs = seqs, .cu_seqlens = cu, .tokens = tok, .targets = tgt};
    engine_config ec;
    engine_config_default(&ec);
    ec.ckpt = CKPT_SELECTIVE;

    decoder_model m;
    decoder_model_init(&m, &pl, &ps, &be);
    // LoRA: base frozen, the engine's state over the adapters
    decoder_set_lora(&m, &ll, ad.data, NULL);
    engine e;
    engine_init(&e, &m, &ec);
    double loss_l, t_lora = time_updates(&e, &b, steps, &loss_l);
    const int64_t state_lora = 3 * ll.pl.numel * (int64_t)sizeof(float);
    // ref = adapters off: the same model and buffers, nothing allocated
    decoder_lora_enable(&m, 0);
    const int64_t rss0 = rlc_peak_rss();
    double *tr = malloc((size_t)steps * sizeof(double));
    float *lp = malloc((size_t)T * 4);
    int32_t *pos = malloc((size_t)T * 4);
    decoder_batch db = {.T = T, .n_seqs = seqs, .tokens = tok, .cu_seqlens = cu, .pos = pos};
    decoder_batch_positions(&db);
    for (int i = 0; i < steps; i++) {
        double t0 = rlc_now();
        decoder_forward(&m, NULL, &db, NULL);
        decoder_logprob(&m, NULL, &db, tgt, 1.0f, lp, NULL);
        tr[i] = rlc_now() - t0;
    }
    const double t_ref = bench_median(tr, steps);
    const int64_t ref_extra = rlc_peak_rss() - rss0;
    decoder_lora_enable(&m, 1);
    const int64_t rss_lora = rlc_peak_rss();
    engine_free(&e);
    // decode: plain, unmerged side path, merged
    decoder_set_lora(&m, NULL, NULL, NULL);
    const double d_plain = time_decode(&m, 0, dseqs, new_tokens, reps);
    decoder_set_lora(&m, &ll, ad.data, NULL);
    const double d_side = time_decode(&m, 0, dseqs, new_tokens, reps);
    const double d_merged = time_decode(&m, 1, dseqs, new_tokens, reps);
    // full fine-tuning last (its state dominates the peak RSS)
    decoder_set_lora(&m, NULL, NULL, NULL);
    engine_init(&e, &m, &ec);
    double loss_f, t_full = time_updates(&e, &b, steps, &loss_f);
    const int64_t state_full = 3 * pl.numel * (int64_t)sizeof(float);
    engine_free(&e);

    const double P = (double)pl.numel;
    printf("update  LoRA  %8.1f tokens/s  %6.1f GFLOP/s (4·N·T)  state %8.1f MiB  peak RSS %.2f GiB  loss %.4f\n", T / t_lora,
           4 * P * T / t_lora / 1e9, state_lora / 1048576.0, rss_lora / 1073741824.0, loss_l);
    printf("update  full  %8.1f tokens/s  %6.1f GFLOP/s (6·N·T)  state %8.1f MiB  peak RSS %.2f GiB  loss %.4f\n", T / t_full,
           6 * P * T / t_full / 1e9, state_full / 1048576.0, rlc_peak_rss() / 1073741824.0, loss_f);
    printf("update  LoRA / full = %.2fx;  sgemm ceiling %.1f GFLOP/s (LoRA at %.0f%%, full at %.0f%%)\n", t_full / t_lora, ceil_gf,
           100 * 4 * P * T / t_lora / 1e9 / ceil_gf, 100 * 6 * P * T / t_full / 1e9 / ceil_gf);
    printf("ref     adapters off: %8.1f tokens/s, %lld bytes of extra peak memory\n", T / t_ref, (long long)ref_extra);
    printf("decode  plain %8.1f tokens/s | LoRA side path %8.1f (%.3f of plain) | merged %8.1f (%.3f)  [%d seqs x %d tokens]\n",
           d_plain, d_side, d_side / d_plain, d_merged, d_merged / d_plain, dseqs, new_tokens);
    free(tok); free(tgt); free(cu); free(tr); free(lp); free(pos);
    decoder_model_free(&m);
    param_set_free(&ad);
    lora_layout_free(&ll);
    rlc_free(ps.data);
    param_layout_free(&pl);
    return 0;
}
