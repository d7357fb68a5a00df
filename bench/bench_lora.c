// bench_lora.c: LoRA against full fine-tuning on one model shape (default Qwen3-0.6B; --layers L keeps the first L
// layers), in the same run and with the same batch:
//   - update: forward + backward + clip + AdamW through the engine on --seqs x --len random tokens: LoRA (rank
//     --rank, alpha 32, all-linear: the base frozen, no base dW, state over the adapters only) on an fp32 base and on
//     the bf16 base (param_bf16, LoRA's default storage), and full fine-tuning. The three alternate step by step, so
//     a shared machine's load falls on all of them alike. Reports tokens/s, the LoRA/full ratios, the
//     optimizer-state bytes, and the peak RSS before and after the full fine-tuning state exists;
//   - ref: the reference log-prob pass as the same model with adapters off: tokens/s and the peak memory it adds
//     after the adapters-on log-prob pass that precedes it in a step (old_log_prob), which sizes the inference
//     workspace both use: 0 bytes, no weight copy;
//   - decode: the rollout engine decoding --decode-seqs sequences of --new tokens, fp32 base: plain model, the
//     unmerged rank-r side path, merged weights (lora.merge); bf16 base read in place: plain and side path. The
//     variants alternate run by run; tokens/s and the side path's ratio to plain on the same base;
//   - peer: the OpenBLAS sgemm ceiling (T x 3072 x 1024 NT) measured in the same run.
// Medians of --steps timed steps (updates) or --reps runs (decode). The machine may be shared: read ratios, not
// absolute numbers.
// Usage: bench_lora [--config examples/qwen3-0.6b-config.json] [--layers L] [--rank 32] [--seqs 4] [--len 256]
//        [--steps 3] [--decode-seqs 8] [--new 32] [--reps 3] [--threads N] [--ckpt none|selective|full]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/common.h"
#include "core/rng.h"
#include "model/decoder.h"
#include "model/lora.h"
#include "model/params.h"
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

// Seconds of one engine_train_batch call.
static double time_update(engine *e, const engine_batch *b, double *loss) {
    engine_mb mb = {0};
    engine_step_stats st;
    const double t0 = rlc_now();
    engine_train_batch(e, b, &mb, 0, ce_loss, NULL, 0, &st);
    const double t = rlc_now() - t0;
    *loss = st.fb.loss;
    return t;
}

static rollout_engine *decode_engine(decoder_model *m, int merge, int new_tokens) {
    rollout_config rc;
    rollout_config_default(&rc);
    rc.n = 1;
    rc.max_new_tokens = new_tokens;
    rc.ignore_eos = 1;
    rc.kv_cache_bytes = (int64_t)256 << 20;
    rc.lora_merge = merge;
    rc.sampling.do_sample = 0;
    rc.sampling.temperature = 0;
    return rollout_engine_new(m, &rc);
}

// Generated tokens per second of one rollout_generate over `seqs` 8-token prompts.
static double time_decode(rollout_engine *e, int V, int seqs) {
    int32_t *ids = malloc((size_t)seqs * 8 * sizeof(int32_t));
    rollout_prompt *pr = malloc((size_t)seqs * sizeof *pr);
    for (int s = 0; s < seqs; s++) {
        for (int k = 0; k < 8; k++) ids[s * 8 + k] = (int32_t)((s * 131 + k * 17 + 3) % V);
        pr[s] = (rollout_prompt){ids + s * 8, 8, (uint64_t)s};
    }
    rollout_result res;
    const double t0 = rlc_now();
    rollout_generate(e, pr, seqs, &res);
    const double tps = (double)res.gen_tokens / (rlc_now() - t0);
    rollout_result_free(&res);
    free(pr); free(ids);
    return tps;
}

int main(int argc, char **argv) {
    const char *config = "examples/qwen3-0.6b-config.json";
    int layers = 0, rank = 32, seqs = 4, len = 256, steps = 3, dseqs = 8, new_tokens = 32, reps = 3, threads = 0;
    const char *ckpt = "selective";
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
        else if (i + 1 < argc && !strcmp(argv[i], "--ckpt")) ckpt = argv[++i];
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
    if (decoder_ckpt_parse(ckpt, &ec.ckpt) != 0) { fprintf(stderr, "bench_lora: --ckpt %s: expected none|selective|full\n", ckpt); return 2; }

    // the same base in bf16 (LoRA's default storage), read through get_block as the trainer does
    param_bf16 pb;
    param_bf16_init(&pb, &ps);
    decoder_model m, m16, mf;
    decoder_model_init(&m, &pl, &ps, &be);
    decoder_model_init(&m16, &pl, NULL, &be);
    m16.get_block = param_bf16_get_block;
    m16.get_block_ctx = &pb;
    // LoRA: base frozen, each engine's state over the adapters (both models share the adapter weights)
    decoder_set_lora(&m, &ll, ad.data, NULL);
    decoder_set_lora(&m16, &ll, ad.data, NULL);
    engine el, el16, ef;
    engine_init(&el, &m, &ec);
    engine_init(&el16, &m16, &ec);
    double loss_l, loss_l16, loss_f;
    time_update(&el, &b, &loss_l);   // warm-up
    time_update(&el16, &b, &loss_l16);
    const int64_t state_lora = 3 * ll.pl.numel * (int64_t)sizeof(float);
    // ref = adapters off: the same model and buffers, nothing allocated beyond what the adapters-on log-prob pass
    // before it (a step's old_log_prob) sized
    double *tr = malloc((size_t)steps * sizeof(double));
    float *lp = malloc((size_t)T * 4);
    int32_t *pos = malloc((size_t)T * 4);
    decoder_batch db = {.T = T, .n_seqs = seqs, .tokens = tok, .cu_seqlens = cu, .pos = pos};
    decoder_batch_positions(&db);
    decoder_forward(&m, NULL, &db, NULL);
    decoder_logprob(&m, NULL, &db, tgt, 1.0f, lp, NULL);
    decoder_lora_enable(&m, 0);
    const int64_t rss0 = rlc_peak_rss();
    for (int i = 0; i < steps; i++) {
        double t0 = rlc_now();
        decoder_forward(&m, NULL, &db, NULL);
        decoder_logprob(&m, NULL, &db, tgt, 1.0f, lp, NULL);
        tr[i] = rlc_now() - t0;
    }
    const double t_ref = bench_median(tr, steps);
    const int64_t ref_extra = rlc_peak_rss() - rss0;
    decoder_lora_enable(&m, 1);
    // decode: fp32 base (plain = adapters off, side path, merged) and bf16 base (plain, side path), alternating
    enum { D_PLAIN, D_SIDE, D_MERGED, D_PLAIN16, D_SIDE16, D_N };
    static const char *dname[D_N] = {"plain", "side path", "merged", "bf16 plain", "bf16 side path"};
    rollout_engine *de = decode_engine(&m, 0, new_tokens), *dm = decode_engine(&m, 1, new_tokens),
                   *d16 = decode_engine(&m16, 0, new_tokens);
    double *td[D_N];
    for (int k = 0; k < D_N; k++) td[k] = malloc((size_t)reps * sizeof(double));
    for (int r = -1; r < reps; r++)   // r = -1: warm-up
        for (int k = 0; k < D_N; k++) {
            decoder_model *mk = k >= D_PLAIN16 ? &m16 : &m;
            decoder_lora_enable(mk, k == D_SIDE || k == D_MERGED || k == D_SIDE16);
            const double tps = time_decode(k == D_MERGED ? dm : k >= D_PLAIN16 ? d16 : de, cfg.vocab_size, dseqs);
            if (r >= 0) td[k][r] = tps;
        }
    decoder_lora_enable(&m, 1);
    decoder_lora_enable(&m16, 1);
    double dmed[D_N];
    for (int k = 0; k < D_N; k++) dmed[k] = bench_median(td[k], reps);
    rollout_engine_free(de); rollout_engine_free(dm); rollout_engine_free(d16);
    const int64_t rss_lora = rlc_peak_rss();
    // full fine-tuning on its own model; then the three updates alternate step by step
    decoder_model_init(&mf, &pl, &ps, &be);
    engine_init(&ef, &mf, &ec);
    time_update(&ef, &b, &loss_f);   // warm-up
    double *tl = malloc((size_t)steps * sizeof(double)), *tl16 = malloc((size_t)steps * sizeof(double)),
           *tf = malloc((size_t)steps * sizeof(double));
    for (int i = 0; i < steps; i++) {
        tl[i] = time_update(&el, &b, &loss_l);
        tl16[i] = time_update(&el16, &b, &loss_l16);
        tf[i] = time_update(&ef, &b, &loss_f);
    }
    const double t_lora = bench_median(tl, steps), t_lora16 = bench_median(tl16, steps), t_full = bench_median(tf, steps);
    const int64_t state_full = 3 * pl.numel * (int64_t)sizeof(float);
    engine_free(&ef);
    engine_free(&el);
    engine_free(&el16);

    const double P = (double)pl.numel;
    printf("update  LoRA fp32 base %8.1f tokens/s  %6.1f GFLOP/s (4·N·T)  state %8.1f MiB  loss %.4f\n", T / t_lora,
           4 * P * T / t_lora / 1e9, state_lora / 1048576.0, loss_l);
    printf("update  LoRA bf16 base %8.1f tokens/s  %6.1f GFLOP/s (4·N·T)  state %8.1f MiB  loss %.4f\n", T / t_lora16,
           4 * P * T / t_lora16 / 1e9, state_lora / 1048576.0, loss_l16);
    printf("update  full           %8.1f tokens/s  %6.1f GFLOP/s (6·N·T)  state %8.1f MiB  loss %.4f\n", T / t_full,
           6 * P * T / t_full / 1e9, state_full / 1048576.0, loss_f);
    printf("update  LoRA / full = %.2fx (fp32 base), %.2fx (bf16 base);  sgemm ceiling %.1f GFLOP/s (LoRA at %.0f%%, full at %.0f%%)\n",
           t_full / t_lora, t_full / t_lora16, ceil_gf, 100 * 4 * P * T / t_lora / 1e9 / ceil_gf, 100 * 6 * P * T / t_full / 1e9 / ceil_gf);
    printf("memory  peak RSS %.2f GiB before the full fine-tuning state exists, %.2f GiB after\n", rss_lora / 1073741824.0,
           rlc_peak_rss() / 1073741824.0);
    printf("ref     adapters off: %8.1f tokens/s, %lld bytes of peak memory beyond the adapters-on log-prob pass\n", T / t_ref, (long long)ref_extra);
    printf("decode  [%d seqs x %d tokens, ckpt %s]", dseqs, new_tokens, decoder_ckpt_name(ec.ckpt));
    for (int k = 0; k < D_N; k++) printf("%s %s %.1f", k ? " |" : "", dname[k], dmed[k]);
    printf(" tokens/s\n");
    printf("decode  side path / plain = %.3f (fp32 base), %.3f (bf16 base); merged / plain = %.3f; bf16 plain / fp32 plain = %.2f\n",
           dmed[D_SIDE] / dmed[D_PLAIN], dmed[D_SIDE16] / dmed[D_PLAIN16], dmed[D_MERGED] / dmed[D_PLAIN],
           dmed[D_PLAIN16] / dmed[D_PLAIN]);
    for (int k = 0; k < D_N; k++) free(td[k]);
    free(tl); free(tl16); free(tf);
    decoder_model_free(&mf);
    decoder_model_free(&m16);
    param_bf16_free(&pb);
    free(tok); free(tgt); free(cu); free(tr); free(lp); free(pos);
    decoder_model_free(&m);
    param_set_free(&ad);
    lora_layout_free(&ll);
    rlc_free(ps.data);
    param_layout_free(&pl);
    return 0;
}
