// bench_generate.c: rollout engine throughput on the Qwen3-0.6B shape (or, --shape, Llama-3.2-1B's or
// Gemma-3-1b's, from examples/*-config.json: Gemma's 5:1 sliding layers with W = 512) with random weights.
//
// Scenarios (64-token prompts (--prompt-len), --new tokens each, eos disabled, temperature 1 sampling):
//   batch 1 (one prompt, n=1) | n=8 from one prompt (prompt sharing) | 64 sequences (64 prompts, n=1)
// Reported: decode tokens/s (tokens after each sample's first, over the time after the last first token),
// time to first token, peak RSS; the memory-bandwidth roofline for batch 1 = measured copy bandwidth /
// weight bytes per token (the median of copy probes taken right before, during (every 32 tokens, their time
// taken out of the decode time) and after each batch-1 run), and the read-only roofline from read passes over
// the weights at the same moments;
// and PyTorch's KV-cache decode (bench/torch_decode.py, batch 1 and 16) in the same run, on the same workload
// (--torch-new defaults to --new: the peer's per-token cost grows with the context too), with the ratios to it and
// where they stand against the rollout engine's targets (batch 1 >= 75% of the copy roofline, 64 sequences >= 8x
// PyTorch's batch 16). Never pass/fail.
//
// --bf16 adds runs with bf16 weights, --kv-bf16 runs with a bf16 KV cache (fp32 weights), after the fp32 ones.
// --warm measures an engine's second rollout of the same workload, as a trainer's steps after the first are:
// a fresh engine's first rollout also pays the page faults of its KV pool (on these VMs ~3 s per GB touched,
// most of it inside the decode steps), which the trainer pays once per run because it keeps its engine.
//
// --contexts C1,C2,...: instead, for each context C, 4 samples of one C-token prompt (prefilled once) decode 16
// tokens: the decode step time and the KV memory (both pools, and what one pool without recycling would hold),
// to show the sliding layers' KV stop growing past the window.
//
// The other families, each against PyTorch's decode of the same shape (torch_decode.py --shape):
//   bench_generate --shape llama-3.2-1b --only 2        the 64-sequence decode against PyTorch's batch 16
//   bench_generate --shape gemma-3-1b --only 2          likewise (5 of 6 layers slide, W = 512)
//   bench_generate --shape gemma-3-1b --contexts 512,2048,4096   Gemma 3's decode step time and KV memory by context
//
// usage: bench_generate [--shape qwen3-0.6b|llama-3.2-1b|gemma-3-1b|config=PATH] [--new N] [--reps R] [--threads T] [--bf16]
//                       [--kv-bf16] [--warm] [--no-torch] [--torch-new N] [--skip64] [--only 0|1|2] [--contexts C,...]
//                       [--prompt-len P (64)]
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/common.h"
#include "model/decoder.h"
#include "rollout/engine.h"
#include "rollout/paged_attention.h"
#include "rollout/rowgemm.h"
#include "bench_util.h"

static void qwen3_06b(model_config *c) {
    memset(c, 0, sizeof *c);
    c->vocab_size = 151936;
    c->hidden_size = 1024;
    c->intermediate_size = 3072;
    c->num_hidden_layers = 28;
    c->num_attention_heads = 16;
    c->num_key_value_heads = 8;
    c->head_dim = 128;
    c->attn_scale = (float)(1.0 / sqrt(128.0));
    c->max_position_embeddings = 40960;
    c->rms_norm_eps = 1e-6f;
    c->rope_theta = 1e6;
    c->tie_word_embeddings = 1;
    c->bos_token_id = 151643;
    c->eos_token_id = 151645;
    c->eos_token_ids[0] = 151645;
    c->eos_token_ids[1] = 151643;
    c->n_eos_token_ids = 2;
    c->sliding_window = -1;
    c->max_window_layers = 28;
    c->initializer_range = 0.02f;
    snprintf(c->torch_dtype, sizeof c->torch_dtype, "float32");
    model_config_finalize(c);
}

// Uniform(-a, a) weights with std 0.02 (matrices), ones (norms); parallel, seeded per chunk.
static void random_weights(param_set *ps) {
    const param_layout *pl = ps->layout;
    for (int i = 0; i < pl->n_tensors; i++) {
        const param_tensor *t = &pl->tensors[i];
        float *p = ps->data + t->offset;
        if (t->ndim == 1) {
            for (int64_t j = 0; j < t->numel; j++) p[j] = 1.0f;
            continue;
        }
        const float a = 0.02f * 1.7320508f;
#pragma omp parallel for schedule(static)
        for (int64_t c0 = 0; c0 < t->numel; c0 += 65536) {
            uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(c0 + 1 + i * 7919);
            int64_t c1 = c0 + 65536 < t->numel ? c0 + 65536 : t->numel;
            for (int64_t j = c0; j < c1; j++) {
                s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
                p[j] = a * (2.0f * (float)((s * 2685821657736338717ull) >> 40) * (1.0f / 16777216.0f) - 1.0f);
            }
        }
    }
}


// Read-only bandwidth over the weights themselves (the first n - n % 4096 floats of a), bytes per second,
// median of 5 passes: what batch-1 decode can stream at best, since it only reads weights.
static double read_bandwidth(const float *a, size_t n) {
    double r[5], sink = 0;
    for (int k = 0; k < 5; k++) {
        const double t0 = rlc_now();
        sink += bench_read_pass(a, n);
        r[k] = (double)(n / 4096 * 4096 * sizeof(float)) / (rlc_now() - t0);
    }
    if (sink == 1.234) printf(" ");   // keeps the sums live
    return bench_median(r, 5);
}

// memcpy bandwidth, bytes read + written per second, all threads, median of reps. The two 256 MiB buffers
// (8x the L3) are allocated once and reused, so probing around every batch-1 run neither pays page faults
// nor moves the peak RSS by more than 0.5 GB.
typedef struct { char *a, *b; size_t n; } bw_probe;
static void bw_probe_init(bw_probe *p) {
    p->n = (size_t)256 << 20;
    p->a = rlc_alloc(p->n);
    p->b = rlc_alloc(p->n);
    memset(p->a, 1, p->n);
    memset(p->b, 2, p->n);
}
static void bw_probe_free(bw_probe *p) {
    rlc_free(p->a);
    rlc_free(p->b);
}
static double copy_bandwidth(const bw_probe *p, int reps) {
    double r[9];
    if (reps > 9) reps = 9;
    for (int k = 0; k < reps; k++) r[k] = bench_copy_pass(p->b, p->a, p->n);
    return bench_median(r, reps);
}

typedef struct { double decode_tok_s, ttft_s, total_s; int64_t gen; } run_stats;

// Bandwidth probes during a batch-1 run, from the engine's logits hook every `every` tokens: a copy probe and a
// read-only pass over the weights, taken at the same moments as the decode they are the roofline of. Their time
// is taken out of the decode time.
#define MAX_MID 64
typedef struct {
    const bw_probe *probe;
    const float *w;   // (numel) the weights, for the read-only pass
    size_t numel;
    int every, n, off;   // off: the hook does nothing (a warm-up rollout)
    double copy[MAX_MID], read[MAX_MID], spent_s, sink;
} mid_probes;
static void mid_probe_hook(void *ctx, int prompt, int sample, int64_t step, const float *logits, int64_t V) {
    (void)prompt, (void)sample, (void)logits, (void)V;
    mid_probes *mp = ctx;
    if (mp->off || step == 0 || step % mp->every || mp->n >= MAX_MID) return;
    const double t0 = rlc_now();
    mp->copy[mp->n] = copy_bandwidth(mp->probe, 3);
    const double t1 = rlc_now();
    mp->sink += bench_read_pass(mp->w, mp->numel);
    mp->read[mp->n++] = (double)(mp->numel / 4096 * 4096) * 4 / (rlc_now() - t1);
    mp->spent_s += rlc_now() - t0;
}

static run_stats run(decoder_model *m, int P, int n_prompts, int n, int new_tokens, int bf16, kv_dtype kvdt, int64_t kv_bytes,
                     int warm, mid_probes *mp) {
    rollout_config rc;
    rollout_config_default(&rc);
    rc.n = n;
    rc.max_new_tokens = new_tokens;
    rc.ignore_eos = 1;
    rc.seed = 1;
    rc.weights_bf16 = bf16;
    rc.kv_cache_dtype = kvdt;
    rc.kv_cache_bytes = kv_bytes;
    if (mp) {
        rc.on_logits = mid_probe_hook;
        rc.on_logits_ctx = mp;
    }
    rollout_engine *e = rollout_engine_new(m, &rc);
    int32_t *ids = malloc((size_t)(n_prompts * P) * sizeof(int32_t));
    rollout_prompt *pr = calloc((size_t)n_prompts, sizeof *pr);
    uint64_t s = 12345;
    for (int i = 0; i < n_prompts * P; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((s >> 33) % (uint64_t)m->cfg->vocab_size);
    }
    for (int p = 0; p < n_prompts; p++) pr[p] = (rollout_prompt){ids + p * P, P, (uint64_t)p};
    rollout_result res;
    if (warm) {   // the same rollout once, untimed: the measured one then reuses the KV pool's touched pages
        if (mp) mp->off = 1;
        rollout_generate(e, pr, n_prompts, &res);
        rollout_result_free(&res);
        if (mp) mp->off = 0;
    }
    rollout_generate(e, pr, n_prompts, &res);
    double t_first_max = 0;
    for (int i = 0; i < res.n_samples; i++)
        if (res.samples[i].t_first > t_first_max) t_first_max = res.samples[i].t_first;
    // the hook runs after the first token's logits only from step `every` on, so all of its time is decode time
    const double probe_s = mp ? mp->spent_s : 0;
    run_stats st = {(double)(res.gen_tokens - res.n_samples) / (res.t_total - t_first_max - probe_s), t_first_max,
                    res.t_total - probe_s, res.gen_tokens};
    rollout_result_free(&res);
    rollout_engine_free(e);
    free(ids);
    free(pr);
    return st;
}

static double torch_tok_s(const char *shape, int prompt_len, int batch, int new_tokens, int threads, double *ttft) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 bench/torch_decode.py --shape %s --prompt-len %d --batch %d --new %d --threads %d "
             "2>/dev/null", shape, prompt_len, batch, new_tokens, threads);
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    char line[1024] = {0};
    double tok = -1;
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "\"decode_tok_s\": ");
        const char *q = strstr(line, "\"ttft_s\": ");
        if (p) tok = atof(p + 16);
        if (q && ttft) *ttft = atof(q + 10);
    }
    pclose(f);
    return tok;
}

// Decode step time and KV memory at each context (see the top): one prompt of ctx tokens, n = 4, 16 new tokens.
static void run_contexts(decoder_model *m, const char *list) {
    const model_config *c = m->cfg;
    int n_win = 0;
    for (int l = 0; l < c->num_hidden_layers; l++) n_win += decoder_layer_window(c, l) > 0;
    printf("contexts: %d of %d layers slide (W = %d); 4 samples of one prompt, 16 new tokens, fp32 KV, 512-token prefill "
           "chunks\n", n_win,
           c->num_hidden_layers, c->sliding_window);
    const int N = 4, NEW = 16;
    for (const char *p = list; *p;) {
        const int ctx = atoi(p);
        if (ctx < 1 || ctx + NEW > c->max_position_embeddings) rlc_die("bench_generate: bad context %d", ctx);
        rollout_config rc;
        rollout_config_default(&rc);
        rc.n = N;
        rc.max_new_tokens = NEW;
        rc.ignore_eos = 1;
        rc.seed = 1;
        rc.kv_cache_bytes = (int64_t)8 << 30;
        // the peak counts a prefill chunk's k/v before its step recycles them (a sliding layer needs a chunk's
        // keys while the chunk attends): 512-token chunks keep that at one window
        rc.max_batched_tokens = 512;
        rollout_engine *e = rollout_engine_new(m, &rc);
        int32_t *ids = malloc((size_t)ctx * sizeof(int32_t));
        uint64_t s = 777;
        for (int i = 0; i < ctx; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            ids[i] = (int32_t)((s >> 33) % (uint64_t)c->vocab_size);
        }
        rollout_prompt pr = {ids, ctx, 0};
        rollout_result res;
        rollout_generate(e, &pr, 1, &res);
        double t_first_max = 0;
        for (int i = 0; i < res.n_samples; i++)
            if (res.samples[i].t_first > t_first_max) t_first_max = res.samples[i].t_first;
        // a logical block takes one block in each pool; one pool for every layer would hold that many whole blocks
        const int64_t one_pool = (int64_t)(res.kv_blocks_peak ? res.kv_blocks_peak : res.kv_window_blocks_peak) *
                                 kv_cache_block_bytes(c->num_hidden_layers, c->num_key_value_heads, c->head_dim, rc.block_size,
                                                      KV_F32);
        printf("context %5d: decode step %.1f ms (%d sequences), prefill %.2f s; KV peak %.1f MB: full layers %.1f MB "
               "(%d blocks), sliding layers %.1f MB (%d blocks); one pool without recycling %.1f MB (%.2fx); peak RSS %.2f GB\n",
               ctx, 1e3 * (res.t_total - t_first_max) / (NEW - 1), N, t_first_max, res.kv_bytes_peak / 1e6,
               (double)res.kv_blocks_peak * res.kv_block_bytes / 1e6, res.kv_blocks_peak,
               (double)res.kv_window_blocks_peak * res.kv_window_block_bytes / 1e6, res.kv_window_blocks_peak, one_pool / 1e6,
               (double)one_pool / (double)res.kv_bytes_peak, rlc_peak_rss() / 1e9);
        fflush(stdout);
        rollout_result_free(&res);
        rollout_engine_free(e);
        free(ids);
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
}

int main(int argc, char **argv) {
    backend_fix_blas_coretype(argc, argv);
    const char *shape = "qwen3-0.6b", *contexts = NULL;
    int prompt_len = 64;
    int new_tokens = 256, reps = 1, threads = 0, bf16 = 0, kv_bf16 = 0, warm = 0, torch = 1, torch_new = -1, skip64 = 0, only = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--new") && i + 1 < argc) new_tokens = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--torch-new") && i + 1 < argc) torch_new = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bf16")) bf16 = 1;
        else if (!strcmp(argv[i], "--kv-bf16")) kv_bf16 = 1;
        else if (!strcmp(argv[i], "--warm")) warm = 1;
        else if (!strcmp(argv[i], "--no-torch")) torch = 0;
        else if (!strcmp(argv[i], "--skip64")) skip64 = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = atoi(argv[++i]);   // 0, 1, 2: one scenario
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) shape = argv[++i];
        else if (!strcmp(argv[i], "--contexts") && i + 1 < argc) contexts = argv[++i];
        else if (!strcmp(argv[i], "--prompt-len") && i + 1 < argc) prompt_len = atoi(argv[++i]);
        else rlc_die("bench_generate: unknown argument '%s'", argv[i]);
    }
    if (reps < 1 || reps > 9) rlc_die("bench_generate: --reps must be 1..9");
    if (prompt_len < 1 || prompt_len > 512) rlc_die("bench_generate: --prompt-len must be 1..512");
    if (torch_new < 0) torch_new = new_tokens;   // the peer decodes the same workload (context grows the same way)
    backend_ctx be;
    backend_init(&be, threads);
    model_config cfg;
    if (!strcmp(shape, "qwen3-0.6b")) qwen3_06b(&cfg);
    else if (!strcmp(shape, "llama-3.2-1b")) model_config_load(&cfg, "examples/llama-3.2-1b-instruct-config.json");
    else if (!strcmp(shape, "gemma-3-1b")) model_config_load(&cfg, "examples/gemma-3-1b-it-config.json");
    else if (!strncmp(shape, "config=", 7)) model_config_load(&cfg, shape + 7);   // any config.json (no PyTorch peer)
    else rlc_die("bench_generate: --shape %s, expected qwen3-0.6b, llama-3.2-1b, gemma-3-1b or config=PATH", shape);
    printf("bench_generate: %s shape (%s), random fp32 weights, %d-token prompts, %d new tokens, eos off; threads %d, BLAS %s, "
           "rowgemm %s, paged attention %s; %s\n", shape, cfg.model_type, prompt_len, new_tokens, be.n_threads, be.blas_core, rowgemm_isa(),
           paged_attention_isa(), warm ? "warm engines (each measured rollout is its engine's second)" : "fresh engines");
    param_layout pl;
    param_layout_init(&pl, &cfg);
    param_set ps;
    param_set_init(&ps, &pl);
    random_weights(&ps);
    decoder_model m;
    decoder_model_init(&m, &pl, &ps, &be);
    if (contexts) {
        run_contexts(&m, contexts);
        decoder_model_free(&m);
        param_set_free(&ps);
        param_layout_free(&pl);
        return 0;
    }
    bw_probe probe;
    bw_probe_init(&probe);
    const double bw = copy_bandwidth(&probe, 9), rbw = read_bandwidth(ps.data, (size_t)pl.numel);
    const int64_t w_bytes = (pl.numel - (cfg.tie_word_embeddings ? 0 : (int64_t)cfg.vocab_size * cfg.hidden_size)) * 4;
    printf("copy bandwidth %.1f GB/s (read+write); weight bytes per decode step %.3f GB (fp32) -> roofline %.2f tokens/s at batch 1\n",
           bw / 1e9, w_bytes / 1e9, bw / (double)w_bytes);
    printf("read-only bandwidth %.1f GB/s -> read roofline %.2f tokens/s at batch 1\n", rbw / 1e9, rbw / (double)w_bytes);
    const int64_t kv = (int64_t)8 << 30;
    struct { const char *name; int np, n; } sc[] = {{"batch 1", 1, 1}, {"n=8 from one prompt", 1, 8}, {"64 sequences", 64, 1}};
    const int n_sc = skip64 ? 2 : 3;
    // modes: 0 fp32 weights and KV; 1 bf16 weights (--bf16); 2 bf16 KV cache (--kv-bf16)
    static const char *mode_name[] = {"fp32", "bf16", "fp32 w, bf16 KV"};
    double res_tok[3][3] = {{0}}, res_copy_pct[3] = {0};   // [mode][scenario] decode tokens/s; batch 1 % of copy roofline
    for (int mode = 0; mode < 3; mode++)
        for (int i = 0; i < n_sc; i++) {
            if ((mode == 1 && !bf16) || (mode == 2 && !kv_bf16)) continue;
            const int b16 = mode == 1;
            const kv_dtype kvdt = mode == 2 ? KV_BF16 : KV_F32;
            if (only >= 0 && i != only) continue;
            double tk[9], tt[9], probes[9 * (MAX_MID + 2)], rprobes[9 * MAX_MID], bw_lo = 1e30, bw_hi = 0;
            int n_probes = 0, n_rprobes = 0;
            const double bytes = (double)(b16 ? w_bytes / 2 : w_bytes);
            for (int r = 0; r < reps; r++) {
                // batch 1: this VM's copy bandwidth swings by up to 1.5x from one second to the next while decode
                // speed stays put, so the roofline is the median of copy probes taken before, during (every 32
                // tokens) and after every run; the read-only roofline likewise, from passes during the runs
                mid_probes mp = {.probe = &probe, .w = ps.data, .numel = (size_t)pl.numel, .every = 32};
                if (i == 0) probes[n_probes++] = copy_bandwidth(&probe, 5);
                run_stats st = run(&m, prompt_len, sc[i].np, sc[i].n, new_tokens, b16, kvdt, kv, warm, i == 0 ? &mp : NULL);
                tk[r] = st.decode_tok_s;
                tt[r] = st.ttft_s;
                if (i == 0) {
                    probes[n_probes++] = copy_bandwidth(&probe, 5);
                    for (int k = 0; k < mp.n; k++) {
                        probes[n_probes++] = mp.copy[k];
                        rprobes[n_rprobes++] = mp.read[k];
                    }
                    if (mp.sink == 1.234) printf(" ");   // keeps the sums live
                }
            }
            for (int k = 0; k < n_probes; k++) {
                if (probes[k] < bw_lo) bw_lo = probes[k];
                if (probes[k] > bw_hi) bw_hi = probes[k];
            }
            double tok = bench_median(tk, reps), ttft = bench_median(tt, reps);
            printf("%-22s %s: decode %.2f tokens/s, time to first token %.3f s (median of %d), peak RSS %.2f GB", sc[i].name,
                   mode_name[mode], tok, ttft, reps, rlc_peak_rss() / 1e9);
            res_tok[mode][i] = tok;
            if (i == 0) {
                const double bw_med = bench_median(probes, n_probes);
                res_copy_pct[mode] = 100.0 * tok / (bw_med / bytes);
                const double rbw_med = n_rprobes ? bench_median(rprobes, n_rprobes) : rbw;
                printf(", %.0f%% of the %s roofline at the median of %d copy probes around and during the runs (%.1f GB/s; "
                       "probes %.1f-%.1f: %.0f-%.0f%%), %.0f%% of the read roofline (median read-only pass during the "
                       "runs %.1f GB/s)",
                       100.0 * tok / (bw_med / bytes), b16 ? "bf16" : "fp32", n_probes, bw_med / 1e9, bw_lo / 1e9,
                       bw_hi / 1e9, 100.0 * tok / (bw_hi / bytes), 100.0 * tok / (bw_lo / bytes),
                       100.0 * tok / (rbw_med / bytes), rbw_med / 1e9);
            }
            printf("\n");
            fflush(stdout);
        }
    bw_probe_free(&probe);
    decoder_model_free(&m);
    param_set_free(&ps);
    param_layout_free(&pl);
    if (torch) {
        double tt1 = 0, tt16 = 0;   // the peer at batch 1 only when batch 1 ran
        const int b1 = res_tok[0][0] > 0 || res_tok[1][0] > 0 || res_tok[2][0] > 0;
        double t1 = b1 ? torch_tok_s(shape, prompt_len, 1, torch_new, be.n_threads, &tt1) : 0;
        double t16 = torch_tok_s(shape, prompt_len, 16, torch_new, be.n_threads, &tt16);
        printf("PyTorch %s KV-cache decode (bench/torch_decode.py, %d new tokens): batch 1 %.2f tokens/s (ttft %.2f s), batch 16 %.2f "
               "tokens/s (ttft %.2f s)\n",
               "fp32", torch_new, t1, tt1, t16, tt16);
        // the ratios to the peer, and the two targets (batch 1 >= 75% of the copy roofline; 64 sequences >= 8x
        // PyTorch's batch 16), for every weight/KV mode measured
        for (int mode = 0; mode < 3; mode++) {
            if ((mode == 1 && !bf16) || (mode == 2 && !kv_bf16)) continue;
            printf("%-16s", mode_name[mode]);
            if (res_tok[mode][0] > 0)
                printf(" batch 1: %.2fx PyTorch batch 1, %.0f%% of the copy roofline (target 75%%: %s);", res_tok[mode][0] / t1,
                       res_copy_pct[mode], res_copy_pct[mode] >= 75 ? "met" : "not met");
            if (res_tok[mode][2] > 0)
                printf(" 64 sequences: %.2fx PyTorch batch 16 (target 8x: %s)", res_tok[mode][2] / t16,
                       res_tok[mode][2] >= 8 * t16 ? "met" : "not met");
            printf("\n");
        }
    }
    return 0;
}
