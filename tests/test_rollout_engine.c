// test_rollout_engine.c: the rollout engine on tiny random Qwen3 models, against the model's own full
// (uncached) forward and log-prob head:
// - temperature 0: every generated token is the argmax of a full forward recomputed at that step, and the
//   KV-cache logits equal the full forward's to 1e-5 relative;
// - rollout log-probs equal decoder_logprob's for the same sequences (verl's probs-diff / Pearson printed);
// - the same seed gives bitwise identical samples alone / in a batch of 16 / with 1 or 2 threads / with a KV
//   budget that forces queueing and preemption / with chunked prefill / with and without prompt sharing;
// - prompt sharing prefills each prompt once; stop tokens, eos and max length; bf16 drift reported;
// - bad prompts (empty, too long, cannot fit the KV budget) are one-line errors (exit 1).
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/common.h"
#include "model/decoder.h"
#include "rollout/engine.h"
#include "io_testutil.h"
#include "testlib.h"

typedef struct {
    model_config cfg;
    param_layout pl;
    param_set ps;
    decoder_model m;
} tiny_model;

static void tiny_build(tiny_model *t, backend_ctx *be, uint64_t seed);

// window > 0: Gemma 3's layer pattern, every 6th layer full and the others sliding with that window.
static void tiny_init_window(tiny_model *t, backend_ctx *be, int V, int H, int I, int L, int nh, int nkv, int D, int tied,
                             int max_pos, uint64_t seed, int window) {
    memset(t, 0, sizeof *t);
    model_config *c = &t->cfg;
    c->vocab_size = V;
    c->hidden_size = H;
    c->intermediate_size = I;
    c->num_hidden_layers = L;
    c->num_attention_heads = nh;
    c->num_key_value_heads = nkv;
    c->head_dim = D;
    c->attn_scale = (float)(1.0 / sqrt((double)D));   // as model_config_parse sets it
    c->max_position_embeddings = max_pos;
    c->rms_norm_eps = 1e-6f;
    c->rope_theta = 1e6;
    c->tie_word_embeddings = tied;
    c->bos_token_id = -1;
    c->eos_token_id = -1;
    c->sliding_window = window > 0 ? window : -1;
    for (int l = 0; l < L; l++) c->layer_types[l] = window > 0 && (l + 1) % 6 != 0 ? LAYER_SLIDING : LAYER_FULL;
    c->max_window_layers = L;
    c->initializer_range = 0.02f;
    snprintf(c->torch_dtype, sizeof c->torch_dtype, "float32");
    model_config_finalize(c);
    tiny_build(t, be, seed);
}

// A tiny model of any family from config.json text (model_config_parse).
static void tiny_init_json(tiny_model *t, backend_ctx *be, const char *json, uint64_t seed) {
    memset(t, 0, sizeof *t);
    model_config_parse(&t->cfg, json, "tiny config.json");
    tiny_build(t, be, seed);
}

// Random weights for t->cfg: activations O(1), logits spread over a few units.
static void tiny_build(tiny_model *t, backend_ctx *be, uint64_t seed) {
    const model_config *c = &t->cfg;
    param_layout_init(&t->pl, c);
    param_set_init(&t->ps, &t->pl);
    tl_rng r;
    tl_rng_init(&r, seed);
    for (int i = 0; i < t->pl.n_tensors; i++) {
        const param_tensor *pt = &t->pl.tensors[i];
        float *p = t->ps.data + pt->offset;
        // norms: gain ~1 (Gemma's (1+w) norms store the offset w, so w ~ 0); biases ~0.2
        const float base1 = !strstr(pt->name, "norm") ? 0.f : c->norm_plus_one ? 0.f : 1.f;
        if (pt->ndim == 1) for (int64_t j = 0; j < pt->numel; j++) p[j] = base1 + tl_normal(&r, 0.2f);
        else if (strstr(pt->name, "embed_tokens")) tl_fill_normal(&r, p, pt->numel, 2.0f / sqrtf((float)pt->shape[1]));
        else tl_fill_normal(&r, p, pt->numel, (strstr(pt->name, "lm_head") ? 2.0f : 0.7f) / sqrtf((float)pt->shape[1]));
    }
    decoder_model_init(&t->m, &t->pl, &t->ps, be);
}

static void tiny_init(tiny_model *t, backend_ctx *be, int V, int H, int I, int L, int nh, int nkv, int D, int tied, int max_pos,
                      uint64_t seed) {
    tiny_init_window(t, be, V, H, I, L, nh, nkv, D, tied, max_pos, seed, 0);
}

static void tiny_free(tiny_model *t) {
    decoder_model_free(&t->m);
    param_set_free(&t->ps);
    param_layout_free(&t->pl);
}

// Random prompts: n prompts with the given lengths, ids in [0, V).
static int32_t **make_prompts(rollout_prompt *pr, int n, const int *lens, int V, uint64_t seed) {
    tl_rng r;
    tl_rng_init(&r, seed);
    int32_t **ids = malloc((size_t)n * sizeof(int32_t *));
    for (int p = 0; p < n; p++) {
        ids[p] = malloc((size_t)lens[p] * 4);
        for (int t = 0; t < lens[p]; t++) ids[p][t] = (int32_t)(tl_uniform(&r, 0, 1) * V) % V;
        pr[p].ids = ids[p];
        pr[p].len = lens[p];
        pr[p].id = (uint64_t)p;
    }
    return ids;
}

static int has_sliding(const model_config *c) {
    for (int l = 0; l < c->num_hidden_layers; l++)
        if (c->layer_types[l] == LAYER_SLIDING && c->sliding_window > 0) return 1;
    return 0;
}

// The uncached reference over toks (T): final-normed hidden (T, H) of the decoder's full forward (its flash
// attention applies the sliding windows).
static void ref_hidden(decoder_model *m, const int32_t *toks, int64_t T, float *hidden) {
    int32_t cu[2] = {0, (int32_t)T};
    int32_t *pos = malloc((size_t)T * 4);
    decoder_batch b = {T, 1, toks, cu, pos, 0};
    decoder_batch_positions(&b);
    decoder_forward(m, NULL, &b, hidden);
    free(pos);
}

// A second uncached reference, independent of both the engine's and the decoder's attention: the decoder's
// per-layer pieces (q/k/v with biases, norms and RoPE; o_proj + MLP) around a dense masked attention in
// double: query t sees keys t - W < u <= t on sliding layers (decoder_layer_window), u <= t on the others.
static void masked_hidden(decoder_model *m, const int32_t *toks, int64_t T, float *hidden) {
    const model_config *c = m->cfg;
    int32_t cu[2] = {0, (int32_t)T};
    int32_t *pos = malloc((size_t)T * 4);
    decoder_batch b = {T, 1, toks, cu, pos, 0};
    decoder_batch_positions(&b);
    const int64_t H = c->hidden_size, nh = c->num_attention_heads, nkv = c->num_key_value_heads, D = c->head_dim;
    float *x = malloc((size_t)(T * H) * 4), *q = malloc((size_t)(T * nh * D) * 4), *att = malloc((size_t)(T * nh * D) * 4);
    float *k = malloc((size_t)(T * nkv * D) * 4), *v = malloc((size_t)(T * nkv * D) * 4);
    double *p = malloc((size_t)T * sizeof(double));
    decoder_embed(m, x, toks, T);
    for (int l = 0; l < c->num_hidden_layers; l++) {
        decoder_layer_qkv(m, l, x, pos, T, q, k, v);
        const int64_t W = decoder_layer_window(c, l);
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < nh; h++) {
                const int64_t g = h / (nh / nkv), u0 = W > 0 && t - W + 1 > 0 ? t - W + 1 : 0;
                double mx = -INFINITY, sum = 0;
                for (int64_t u = u0; u <= t; u++) {
                    double sc = 0;
                    for (int64_t d = 0; d < D; d++) sc += (double)q[(t * nh + h) * D + d] * k[(u * nkv + g) * D + d];
                    p[u] = sc * (double)c->attn_scale;
                    if (p[u] > mx) mx = p[u];
                }
                for (int64_t u = u0; u <= t; u++) { p[u] = exp(p[u] - mx); sum += p[u]; }
                for (int64_t d = 0; d < D; d++) {
                    double a = 0;
                    for (int64_t u = u0; u <= t; u++) a += p[u] * v[(u * nkv + g) * D + d];
                    att[(t * nh + h) * D + d] = (float)(a / sum);
                }
            }
        decoder_layer_out(m, l, x, att, T);
    }
    decoder_final_norm(m, hidden, x, T);
    free(x); free(q); free(att); free(k); free(v); free(p); free(pos);
}

// Uncached reference logits (V) of the last position of toks (T).
static void full_last_logits(decoder_model *m, const int32_t *toks, int64_t T, float *logits) {
    float *hid = malloc((size_t)(T * m->cfg->hidden_size) * 4);
    ref_hidden(m, toks, T, hid);
    decoder_logits(m, logits, hid + (T - 1) * m->cfg->hidden_size, 1);
    free(hid);
}

typedef struct {
    int n_prompts, n, max_new;
    int64_t V;
    float *store;   // (n_prompts, n, max_new, V)
} logit_store;
static void store_logits(void *ctx, int prompt, int sample, int64_t step, const float *logits, int64_t V) {
    logit_store *ls = ctx;
    memcpy(ls->store + (((int64_t)prompt * ls->n + sample) * ls->max_new + step) * V, logits, (size_t)V * 4);
}

static int64_t argmax_f(const float *x, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

static void test_greedy_and_logits(tiny_model *t, const char *name) {
    decoder_model *m = &t->m;
    const int64_t V = t->cfg.vocab_size;
    const int lens[] = {5, 17, 33};
    const int NP = 3, MAXN = 20;
    rollout_prompt pr[3];
    int32_t **ids = make_prompts(pr, NP, lens, (int)V, 77);
    logit_store ls = {NP, 1, MAXN, V, malloc((size_t)(NP * MAXN * V) * 4)};
    rollout_config rc;
    rollout_config_default(&rc);
    rc.sampling.temperature = 0.f;
    rc.max_new_tokens = MAXN;
    rc.ignore_eos = 1;
    rc.kv_cache_bytes = 64 << 20;
    rc.on_logits = store_logits;
    rc.on_logits_ctx = &ls;
    rollout_engine *e = rollout_engine_new(m, &rc);
    rollout_result res;
    rollout_generate(e, pr, NP, &res);
    int argmax_ok = 1, len_ok = 1;
    double worst = 0;
    float *full = malloc((size_t)V * 4);
    int32_t *seq = malloc((size_t)(64 + MAXN) * 4);
    for (int p = 0; p < NP; p++) {
        const rollout_sample *s = &res.samples[p];
        if (s->len != MAXN || s->finish != ROLLOUT_FINISH_LENGTH) len_ok = 0;
        memcpy(seq, ids[p], (size_t)lens[p] * 4);
        for (int k = 0; k < s->len; k++) {   // recompute the full forward at every step
            full_last_logits(m, seq, lens[p] + k, full);
            if (argmax_f(full, V) != s->ids[k]) argmax_ok = 0;
            double e_rel = tl_rel_err(ls.store + ((int64_t)p * MAXN + k) * V, full, V, NULL);
            if (e_rel > worst) worst = e_rel;
            seq[lens[p] + k] = s->ids[k];
        }
    }
    TL_CHECK(len_ok, "%s: greedy runs to max_new_tokens with finish=length", name);
    TL_CHECK(argmax_ok, "%s: greedy tokens == argmax of the full uncached forward at every step", name);
    // fp32: different summation orders (rowgemm lanes vs BLAS, paged vs flash attention) only: 1e-5
    TL_CHECK(worst <= 1e-5, "%s: KV-cache logits vs full forward rel err %.3g <= 1e-5", name, worst);
    printf("%s: KV-cache logits vs full forward: max rel err %.3g over %d steps\n", name, worst, NP * MAXN);
    rollout_result_free(&res);
    rollout_engine_free(e);
    free(full); free(seq); free(ls.store);
    for (int p = 0; p < NP; p++) free(ids[p]);
    free(ids);
}

// Rollout log-probs vs decoder_logprob on prompt + response, at the sampling temperature.
static void test_logprobs(tiny_model *t, const char *name, float temp, int top_k, float top_p) {
    decoder_model *m = &t->m;
    const int V = t->cfg.vocab_size;
    const int lens[] = {9, 30, 4, 21};
    const int NP = 4, N = 3, MAXN = 24;
    rollout_prompt pr[4];
    int32_t **ids = make_prompts(pr, NP, lens, V, 99);
    rollout_config rc;
    rollout_config_default(&rc);
    rc.n = N;
    rc.sampling.temperature = temp;
    rc.sampling.top_k = top_k;
    rc.sampling.top_p = top_p;
    rc.max_new_tokens = MAXN;
    rc.seed = 3;
    rc.kv_cache_bytes = 64 << 20;
    rollout_engine *e = rollout_engine_new(m, &rc);
    rollout_result res;
    rollout_generate(e, pr, NP, &res);
    int64_t ntok = 0;
    float *la = malloc((size_t)(NP * N * MAXN) * 4), *lr = malloc((size_t)(NP * N * MAXN) * 4);
    double max_abs = 0;
    for (int i = 0; i < res.n_samples; i++) {
        const rollout_sample *s = &res.samples[i];
        const int64_t P = lens[s->prompt], T = P + s->len;
        int32_t *toks = malloc((size_t)T * 4), *tg = malloc((size_t)T * 4), *pos = malloc((size_t)T * 4);
        memcpy(toks, ids[s->prompt], (size_t)P * 4);
        memcpy(toks + P, s->ids, (size_t)s->len * 4);
        for (int64_t j = 0; j < T; j++) tg[j] = j >= P - 1 && j + 1 < T ? toks[j + 1] : -1;
        int32_t cu[2] = {0, (int32_t)T};
        decoder_batch b = {T, 1, toks, cu, pos, 0};
        decoder_batch_positions(&b);
        float *lp = malloc((size_t)T * 4);
        decoder_forward(m, NULL, &b, NULL);
        decoder_logprob(m, NULL, &b, tg, temp > 0 ? temp : 1.f, lp, NULL);
        for (int64_t k = 0; k < s->len; k++) {
            la[ntok] = lp[P - 1 + k];
            lr[ntok] = s->logprobs[k];
            double d = fabs((double)la[ntok] - lr[ntok]);
            if (d > max_abs) max_abs = d;
            ntok++;
        }
        free(toks); free(tg); free(pos); free(lp);
    }
    rollout_probs_diff pd;
    rollout_probs_diff_compute(&pd, la, lr, ntok);
    printf("%s T=%g top_k=%d top_p=%g: %lld tokens, max |logp diff| %.3g, training/rollout_probs_diff_max %.3g mean %.3g "
           "std %.3g, rollout_actor_probs_pearson_corr %.9f\n",
           name, (double)temp, top_k, (double)top_p, (long long)ntok, max_abs, pd.diff_max, pd.diff_mean, pd.diff_std, pd.pearson);
    // log-probs of the same hidden states through two fp32 paths: 1e-5 absolute (and relative to max |logp|)
    TL_CHECK(ntok > 0 && max_abs <= 1e-5, "%s: rollout log-probs == decoder_logprob to 1e-5 (max %.3g)", name, max_abs);
    tl_check_close("rollout logprobs vs decoder_logprob", lr, la, ntok, 1e-5);
    TL_CHECK(pd.pearson > 0.999999, "%s: Pearson %.9f", name, pd.pearson);
    rollout_result_free(&res);
    rollout_engine_free(e);
    free(la); free(lr);
    for (int p = 0; p < NP; p++) free(ids[p]);
    free(ids);
}

static int same_sample(const rollout_sample *a, const rollout_sample *b) {
    return a->len == b->len && a->finish == b->finish && !memcmp(a->ids, b->ids, (size_t)a->len * 4) &&
           !memcmp(a->logprobs, b->logprobs, (size_t)a->len * 4);
}

static void test_determinism(tiny_model *t, backend_ctx *be, const char *model_name, kv_dtype dt) {
    char name[96];
    snprintf(name, sizeof name, "%s, %s KV", model_name, kv_dtype_name(dt));
    decoder_model *m = &t->m;
    const int V = t->cfg.vocab_size;
    const int NP = 16, N = 2, MAXN = 30;
    int lens[16];
    for (int p = 0; p < NP; p++) lens[p] = 3 + (p * 7) % 29;
    rollout_prompt pr[16];
    int32_t **ids = make_prompts(pr, NP, lens, V, 1234);
    int32_t stops[12];
    for (int i = 0; i < 12; i++) stops[i] = (int32_t)(i * 17 % V);
    rollout_config rc;
    rollout_config_default(&rc);
    rc.n = N;
    rc.sampling.temperature = 1.0f;
    rc.sampling.top_p = 0.95f;
    rc.max_new_tokens = MAXN;
    rc.seed = 42;
    rc.stop_ids = stops;
    rc.n_stop_ids = 12;
    rc.kv_cache_bytes = 64 << 20;
    rc.kv_cache_dtype = dt;
    rollout_engine *e = rollout_engine_new(m, &rc);
    rollout_result ref;
    rollout_generate(e, pr, NP, &ref);
    rollout_engine_free(e);
    // stop semantics on the reference run
    int stop_ok = 1, n_stop = 0, n_len = 0;
    for (int i = 0; i < ref.n_samples; i++) {
        const rollout_sample *s = &ref.samples[i];
        for (int64_t k = 0; k < s->len; k++) {
            int is = 0;
            for (int j = 0; j < 12; j++) is |= s->ids[k] == stops[j];
            if (is && k != s->len - 1) stop_ok = 0;
            if (k == s->len - 1 && s->finish == ROLLOUT_FINISH_STOP && !is) stop_ok = 0;
        }
        if (s->finish == ROLLOUT_FINISH_LENGTH && s->len != MAXN) stop_ok = 0;
        n_stop += s->finish == ROLLOUT_FINISH_STOP;
        n_len += s->finish == ROLLOUT_FINISH_LENGTH;
    }
    TL_CHECK(stop_ok && n_stop > 0 && n_len > 0, "%s: stop tokens end a sample (kept), else max length (%d stop, %d length)", name,
             n_stop, n_len);
    // computed = each prompt once + every generated token but the last (never fed)
    int64_t want_computed = ref.prompt_tokens / N;
    for (int i = 0; i < ref.n_samples; i++) want_computed += ref.samples[i].len - 1;
    TL_CHECK(ref.computed_tokens == want_computed, "%s: prompt sharing prefills each prompt once (%lld computed, want %lld)", name,
             (long long)ref.computed_tokens, (long long)want_computed);
    // (a) prompt 5 alone
    {
        rollout_engine *e1 = rollout_engine_new(m, &rc);
        rollout_result r1;
        rollout_generate(e1, &pr[5], 1, &r1);
        TL_CHECK(same_sample(&r1.samples[0], &ref.samples[5 * N]) && same_sample(&r1.samples[1], &ref.samples[5 * N + 1]),
                 "%s: a prompt alone == in a batch of 16 (bitwise)", name);
        rollout_result_free(&r1);
        rollout_engine_free(e1);
    }
    struct { const char *what; int threads, share, max_seqs, max_tok; int64_t kv; } var[] = {
        {"1 thread", 1, 1, 256, 2048, 64 << 20},
        {"no prompt sharing (separate prefills)", 2, 0, 256, 2048, 64 << 20},
        {"chunked prefill (4 seqs, 8 tokens/step)", 2, 1, 4, 8, 64 << 20},
        {"KV budget forcing queueing + preemption", 2, 1, 256, 2048, 0},
    };
    const int bs = 16;
    const int64_t block_bytes = kv_cache_block_bytes(t->cfg.num_hidden_layers, t->cfg.num_key_value_heads, t->cfg.head_dim, bs, dt);
    for (size_t vi = 0; vi < sizeof var / sizeof var[0]; vi++) {
        rollout_config rv = rc;
        rv.share_prompts = var[vi].share;
        rv.max_num_seqs = var[vi].max_seqs;
        rv.max_batched_tokens = var[vi].max_tok;
        rv.kv_cache_bytes = var[vi].kv ? var[vi].kv : block_bytes * 6;   // the longest sample needs 4 blocks
        backend_set_threads(be, var[vi].threads);
        rollout_engine *ev = rollout_engine_new(m, &rv);
        rollout_result rr;
        rollout_generate(ev, pr, NP, &rr);
        int same = rr.n_samples == ref.n_samples;
        for (int i = 0; same && i < rr.n_samples; i++) same = same_sample(&rr.samples[i], &ref.samples[i]);
        TL_CHECK(same, "%s: identical samples with %s", name, var[vi].what);
        printf("%s: %s: %lld steps, peak running %d, preempted %lld, cow %lld, prefix hits %lld, computed %lld tokens\n", name,
               var[vi].what, (long long)rr.n_steps, rr.max_running, (long long)rr.n_preempt, (long long)rr.n_cow,
               (long long)rr.n_prefix_hits, (long long)rr.computed_tokens);
        if (!var[vi].kv) TL_CHECK(rr.n_preempt > 0 && rr.max_running < NP * N, "%s: the small budget queued (peak %d) and preempted (%lld)",
                                  name, rr.max_running, (long long)rr.n_preempt);
        if (!var[vi].share)
            TL_CHECK(rr.computed_tokens == ref.computed_tokens + ref.prompt_tokens / N * (N - 1),
                     "%s: separate prefills compute each prompt n times (%lld vs %lld)", name, (long long)rr.computed_tokens,
                     (long long)(ref.computed_tokens + ref.prompt_tokens / N * (N - 1)));
        rollout_result_free(&rr);
        rollout_engine_free(ev);
    }
    backend_set_threads(be, 2);
    rollout_result_free(&ref);
    for (int p = 0; p < NP; p++) free(ids[p]);
    free(ids);
}

static void test_eos_and_max_pos(tiny_model *t, const char *name) {
    decoder_model *m = &t->m;
    const int V = t->cfg.vocab_size;
    // greedy run, then make its 4th token an eos id: generation must stop there with finish=stop
    const int lens[] = {6};
    rollout_prompt pr[1];
    int32_t **ids = make_prompts(pr, 1, lens, V, 5);
    rollout_config rc;
    rollout_config_default(&rc);
    rc.sampling.temperature = 0.f;
    rc.max_new_tokens = 12;
    rc.kv_cache_bytes = 16 << 20;
    rollout_engine *e = rollout_engine_new(m, &rc);
    rollout_result r0, r1;
    rollout_generate(e, pr, 1, &r0);
    model_config *mc = (model_config *)m->cfg;   // the model's config (the layout's copy)
    model_config saved = *mc;
    int32_t eos = r0.samples[0].ids[3];
    int first = 0;
    while (r0.samples[0].ids[first] != eos) first++;
    mc->eos_token_ids[0] = 100000;   // a list of eos ids; the second matches
    mc->eos_token_ids[1] = eos;
    mc->n_eos_token_ids = 2;
    mc->eos_token_id = 100000;
    rollout_generate(e, pr, 1, &r1);
    TL_CHECK(r1.samples[0].len == first + 1 && r1.samples[0].finish == ROLLOUT_FINISH_STOP &&
                 r1.samples[0].ids[first] == eos && !memcmp(r1.samples[0].ids, r0.samples[0].ids, (size_t)(first + 1) * 4),
             "%s: stops at the first eos (kept), len %lld (want %d)", name, (long long)r1.samples[0].len, first + 1);
    *mc = saved;
    rollout_result_free(&r0);
    rollout_result_free(&r1);
    // a prompt 3 below max positions: 3 tokens, finish=length
    int64_t P = t->cfg.max_position_embeddings - 3;
    int32_t *lp = malloc((size_t)P * 4);
    for (int64_t i = 0; i < P; i++) lp[i] = (int32_t)(i % V);
    rollout_prompt pl = {lp, P, 0};
    rollout_generate(e, &pl, 1, &r0);
    TL_CHECK(r0.samples[0].len == 3 && r0.samples[0].finish == ROLLOUT_FINISH_LENGTH, "%s: capped at max_position_embeddings (len %lld)",
             name, (long long)r0.samples[0].len);
    rollout_result_free(&r0);
    rollout_engine_free(e);
    free(lp);
    free(ids[0]);
    free(ids);
}

typedef struct { tiny_model *t; int64_t len; int64_t kv; int max_new; } bad_arg;
static void run_bad(void *p) {
    bad_arg *a = p;
    int32_t *ids = calloc((size_t)(a->len + 1), 4);
    rollout_config rc;
    rollout_config_default(&rc);
    rc.max_new_tokens = a->max_new;
    rc.kv_cache_bytes = a->kv;
    rollout_engine *e = rollout_engine_new(&a->t->m, &rc);
    rollout_prompt pr = {ids, a->len, 0};
    rollout_result r;
    rollout_generate(e, &pr, 1, &r);
}

static void run_bad_sampling(void *p) {
    tiny_model *t = p;
    rollout_config rc;
    rollout_config_default(&rc);
    rc.kv_cache_bytes = 16 << 20;
    rollout_engine *e = rollout_engine_new(&t->m, &rc);
    rollout_engine_set_sampling(e, 0, &rc.sampling);
}

static void test_bad_prompts(tiny_model *t) {
    io_expect_die("set_sampling with n = 0", run_bad_sampling, t, "n=0, expected >= 1", (const char *)NULL);
    bad_arg a = {t, 0, 16 << 20, 8};
    io_expect_die("empty prompt", run_bad, &a, "prompt 0 is empty", (const char *)NULL);
    a.len = t->cfg.max_position_embeddings;
    io_expect_die("prompt at max positions", run_bad, &a, "max_position_embeddings", (const char *)NULL);
    const int64_t bb = (int64_t)t->cfg.num_hidden_layers * 2 * t->cfg.num_key_value_heads * 16 * t->cfg.head_dim * 4;
    bad_arg b = {t, 40, bb * 2, 100};   // needs 9 blocks, pool holds 2
    io_expect_die("sample larger than the KV pool", run_bad, &b, "--kv-cache-bytes", (const char *)NULL);
}

// The bf16 switches (weights_bf16 = 1: bf16 weights; 2: a bf16 KV cache; 3: both) against the fp32 default.
static void test_bf16(tiny_model *t, const char *name, int which) {
    const int lens[] = {12, 20};
    rollout_prompt pr[2];
    int32_t **ids = make_prompts(pr, 2, lens, t->cfg.vocab_size, 8);
    rollout_config rc;
    rollout_config_default(&rc);
    rc.sampling.temperature = 0.f;
    rc.max_new_tokens = 16;
    rc.ignore_eos = 1;
    rc.kv_cache_bytes = 16 << 20;
    rollout_engine *e32 = rollout_engine_new(&t->m, &rc);
    rc.weights_bf16 = which & 1;
    rc.kv_cache_dtype = which & 2 ? KV_BF16 : KV_F32;
    rollout_engine *e16 = rollout_engine_new(&t->m, &rc);
    const char *what = which == 1 ? "bf16 weights" : which == 2 ? "bf16 KV cache" : "bf16 weights + KV cache";
    rollout_result a, b;
    rollout_generate(e32, pr, 2, &a);
    rollout_generate(e16, pr, 2, &b);
    // drift of the bf16 path's log-probs along the fp32 path's tokens is what a trainer would see; here we
    // compare per position while the greedy paths agree
    double md = 0;
    int64_t n = 0, agree = 0;
    for (int i = 0; i < 2; i++)
        for (int64_t k = 0; k < a.samples[i].len; k++) {
            if (a.samples[i].ids[k] != b.samples[i].ids[k]) break;
            md = fmax(md, fabs((double)a.samples[i].logprobs[k] - b.samples[i].logprobs[k]));
            n++;
            agree++;
        }
    printf("%s: %s: greedy agrees on %lld/%d leading tokens, max |logp drift| %.3g\n", name, what, (long long)agree, 32, md);
    // bf16 keeps 8 bits of mantissa: a drift of order 1e-2 is expected, 0.1 would mean a bug
    TL_CHECK(n > 0 && md > 0 && md < 0.1, "%s: %s: log-prob drift small but not zero (%.3g)", name, what, md);
    rollout_result_free(&a);
    rollout_result_free(&b);
    rollout_engine_free(e32);
    rollout_engine_free(e16);
    for (int p = 0; p < 2; p++) free(ids[p]);
    free(ids);
}

// Sliding layers' KV: blocks before the window are recycled, and that changes nothing but memory.
// (a) a growing context: the sliding pool's peak stays at one window while the full pool's grows with the
// context; (b) n samples of shared prompts, with and without recycling, and with recycling under a budget
// that forces preemption: bitwise identical samples.
static void test_window_memory(tiny_model *t, backend_ctx *be, const char *name) {
    decoder_model *m = &t->m;
    const int V = t->cfg.vocab_size, W = t->cfg.sliding_window, bs = 4;
    rollout_config rc;
    rollout_config_default(&rc);
    rc.block_size = bs;
    rc.sampling.temperature = 1.0f;
    rc.ignore_eos = 1;
    rc.seed = 11;
    rc.kv_cache_bytes = 16 << 20;
    const int wblocks = (W - 1 + bs - 1) / bs + 2;   // a window, plus a block edge while a step writes
    int peak_w[2] = {0, 0}, peak_f[2] = {0, 0};
    int64_t peak_b[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        const int lens[] = {6};
        rollout_prompt pr[1];
        int32_t **ids = make_prompts(pr, 1, lens, V, 21);
        rc.max_new_tokens = i == 0 ? 4 * W : 12 * W;
        rollout_engine *e = rollout_engine_new(m, &rc);
        rollout_result r;
        rollout_generate(e, pr, 1, &r);
        TL_CHECK(r.kv_window_blocks > 0 && r.kv_blocks > 0, "%s: two KV pools (full %d blocks, sliding %d)", name, r.kv_blocks,
                 r.kv_window_blocks);
        TL_CHECK(r.kv_bytes == rollout_engine_kv_bytes(e) &&
                     r.kv_bytes == (int64_t)r.kv_blocks * r.kv_block_bytes + (int64_t)r.kv_window_blocks * r.kv_window_block_bytes &&
                     r.kv_bytes <= rc.kv_cache_bytes,
                 "%s: KV accounting: %lld bytes = both pools, within the budget", name, (long long)r.kv_bytes);
        peak_w[i] = r.kv_window_blocks_peak;
        peak_f[i] = r.kv_blocks_peak;
        peak_b[i] = r.kv_bytes_peak;
        printf("%s: context %d (W=%d, block %d): KV peak %d full-layer blocks, %d sliding-layer blocks, %lld bytes\n", name,
               lens[0] + rc.max_new_tokens, W, bs, peak_f[i], peak_w[i], (long long)peak_b[i]);
        rollout_result_free(&r);
        rollout_engine_free(e);
        free(ids[0]);
        free(ids);
    }
    TL_CHECK(peak_w[0] <= wblocks && peak_w[1] == peak_w[0], "%s: sliding layers' KV stops growing past the window (%d, %d "
             "blocks, at most %d)", name, peak_w[0], peak_w[1], wblocks);
    TL_CHECK(peak_f[1] == (6 + 12 * W - 1 + bs - 1) / bs && peak_f[1] > 2 * peak_f[0],
             "%s: full layers' KV grows with the context (%d -> %d blocks)", name, peak_f[0], peak_f[1]);
    // (b) recycling changes no bit; nor does it with preemption
    const int lens[] = {3, 10, 25, 40, 7, 18};
    const int NP = 6, N = 3;
    rollout_prompt pr[6];
    int32_t **ids = make_prompts(pr, NP, lens, V, 31);
    rc.n = N;
    rc.max_new_tokens = 5 * W;
    rc.sampling.top_p = 0.9f;
    rollout_engine *e = rollout_engine_new(m, &rc);
    rollout_result a;
    rollout_generate(e, pr, NP, &a);
    rollout_engine_free(e);
    const int64_t full_bb = kv_cache_block_bytes(t->cfg.num_hidden_layers, t->cfg.num_key_value_heads, t->cfg.head_dim, bs, KV_F32);
    struct { const char *what; int pool, threads; int64_t kv; } var[] = {
        {"without recycling (one pool)", 0, 2, 16 << 20},
        {"recycling, 1 thread", 1, 1, 16 << 20},
        {"recycling under a budget forcing preemption", 1, 2, 40 * full_bb},
    };
    for (size_t vi = 0; vi < sizeof var / sizeof var[0]; vi++) {
        rollout_config rv = rc;
        rv.sliding_kv_pool = var[vi].pool;
        rv.kv_cache_bytes = var[vi].kv;
        backend_set_threads(be, var[vi].threads);
        rollout_engine *ev = rollout_engine_new(m, &rv);
        rollout_result b;
        rollout_generate(ev, pr, NP, &b);
        int same = b.n_samples == a.n_samples;
        for (int i = 0; same && i < b.n_samples; i++) same = same_sample(&a.samples[i], &b.samples[i]);
        TL_CHECK(same, "%s: identical samples %s", name, var[vi].what);
        printf("%s: %s: KV peak %lld bytes (with recycling %lld), preempted %lld, prefix hits %lld, cow %lld\n", name,
               var[vi].what, (long long)b.kv_bytes_peak, (long long)a.kv_bytes_peak, (long long)b.n_preempt,
               (long long)b.n_prefix_hits, (long long)b.n_cow);
        if (!var[vi].pool)
            TL_CHECK(b.kv_window_blocks == 0 && b.kv_bytes_peak > a.kv_bytes_peak,
                     "%s: recycling lowers the KV peak (%lld -> %lld bytes)", name, (long long)b.kv_bytes_peak,
                     (long long)a.kv_bytes_peak);
        if (var[vi].kv != 16 << 20) TL_CHECK(b.n_preempt > 0, "%s: the small budget preempted (%lld)", name, (long long)b.n_preempt);
        rollout_result_free(&b);
        rollout_engine_free(ev);
    }
    backend_set_threads(be, 2);
    TL_CHECK(a.n_prefix_hits > 0, "%s: prompts shared across samples (%lld hits)", name, (long long)a.n_prefix_hits);
    rollout_result_free(&a);
    for (int p = 0; p < NP; p++) free(ids[p]);
    free(ids);
}

// The decoder's windowed forward (the engine tests' reference) == the dense masked reference, past the window.
static void test_masked_reference(tiny_model *t, const char *name) {
    const int64_t T = 70, H = t->cfg.hidden_size;
    int32_t *toks = malloc((size_t)T * 4);
    for (int64_t i = 0; i < T; i++) toks[i] = (int32_t)((i * 37 + 5) % t->cfg.vocab_size);
    float *a = malloc((size_t)(T * H) * 4), *b = malloc((size_t)(T * H) * 4);
    ref_hidden(&t->m, toks, T, a);
    masked_hidden(&t->m, toks, T, b);
    char what[128];
    snprintf(what, sizeof what, "%s: decoder forward vs dense masked reference (T=%lld, W=%d)", name, (long long)T,
             t->cfg.sliding_window);
    // fp32 flash attention and BLAS products vs a double attention on the same pieces: 1e-5
    tl_check_close(what, a, b, T * H, 1e-5);
    printf("%s: rel err %.3g\n", what, tl_rel_err(a, b, T * H, NULL));
    free(toks); free(a); free(b);
}

// One tiny config per family (config.json as transformers writes it), with windows shorter than the sequences
// the engine tests generate (prompts up to 40, 20-60 new tokens).
static const struct { const char *name, *json; } FAMILIES[] = {
    {"qwen2 (q/k/v biases)", "{\"model_type\":\"qwen2\",\"vocab_size\":301,\"hidden_size\":64,\"intermediate_size\":96,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"max_position_embeddings\":256,"
     "\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"tie_word_embeddings\":true,\"use_sliding_window\":false,"
     "\"sliding_window\":32768,\"max_window_layers\":21}"},
    {"llama (llama3 RoPE, attention and MLP biases)", "{\"model_type\":\"llama\",\"vocab_size\":259,\"hidden_size\":64,"
     "\"intermediate_size\":112,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":1,\"head_dim\":32,"
     "\"max_position_embeddings\":256,\"rms_norm_eps\":1e-5,\"rope_theta\":500000.0,\"rope_scaling\":{\"factor\":32.0,"
     "\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,\"original_max_position_embeddings\":64,\"rope_type\":\"llama3\"},"
     "\"tie_word_embeddings\":false,\"attention_bias\":true,\"mlp_bias\":true}"},
    {"mistral (every layer sliding, W=13)", "{\"model_type\":\"mistral\",\"vocab_size\":233,\"hidden_size\":48,"
     "\"intermediate_size\":80,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":16,"
     "\"max_position_embeddings\":256,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,\"sliding_window\":13,"
     "\"tie_word_embeddings\":false}"},
    {"gemma3_text (5:1 sliding W=11, query_pre_attn_scalar, soft-cap)", "{\"model_type\":\"gemma3_text\",\"vocab_size\":271,"
     "\"hidden_size\":64,\"intermediate_size\":96,\"num_hidden_layers\":6,\"num_attention_heads\":4,\"num_key_value_heads\":1,"
     "\"head_dim\":16,\"max_position_embeddings\":256,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,"
     "\"rope_local_base_freq\":10000.0,\"sliding_window\":11,\"sliding_window_pattern\":6,\"query_pre_attn_scalar\":24,"
     "\"final_logit_softcapping\":5.0,\"hidden_activation\":\"gelu_pytorch_tanh\",\"tie_word_embeddings\":true}"},
};

int main(void) {
    backend_ctx be;
    backend_init(&be, 2);
    {
        tiny_model t;   // tied, GQA 2, D 16 (AVX-512 paged path)
        tiny_init(&t, &be, 300, 64, 128, 2, 4, 2, 16, 1, 256, 1);
        test_greedy_and_logits(&t, "tied gqa2 D16");
        test_logprobs(&t, "tied gqa2 D16", 1.0f, -1, 1.0f);
        test_logprobs(&t, "tied gqa2 D16", 0.7f, 20, 0.9f);
        test_determinism(&t, &be, "tied gqa2 D16", KV_F32);
        test_determinism(&t, &be, "tied gqa2 D16", KV_BF16);
        test_eos_and_max_pos(&t, "tied gqa2 D16");
        test_bad_prompts(&t);
        for (int which = 1; which <= 3; which++) test_bf16(&t, "tied gqa2 D16", which);
        tiny_free(&t);
    }
    const char *san = getenv("RLC_SAN");
    const int small = san && !strcmp(san, "1");
    {
        tiny_model t;   // Gemma 3's layer pattern (5 sliding : 1 full) with a window shorter than the sequences
        tiny_init_window(&t, &be, 300, 64, 128, 6, 4, 2, 16, 1, 256, 4, 11);
        test_masked_reference(&t, "sliding W=11 gqa2 D16");
        test_greedy_and_logits(&t, "sliding W=11 gqa2 D16");
        test_window_memory(&t, &be, "sliding W=11 gqa2 D16");
        if (!small) {
            test_logprobs(&t, "sliding W=11 gqa2 D16", 0.8f, -1, 1.0f);
            test_determinism(&t, &be, "sliding W=11 gqa2 D16", KV_F32);
        }
        tiny_free(&t);
    }
    for (size_t fi = 0; fi < sizeof FAMILIES / sizeof FAMILIES[0]; fi++) {
        tiny_model t;
        tiny_init_json(&t, &be, FAMILIES[fi].json, 10 + fi);
        if (has_sliding(&t.cfg)) test_masked_reference(&t, FAMILIES[fi].name);
        test_greedy_and_logits(&t, FAMILIES[fi].name);
        if (!small) test_logprobs(&t, FAMILIES[fi].name, 0.7f, -1, 1.0f);
        tiny_free(&t);
    }
    if (small) {   // sanitizer run: the first model covers every path
        printf("RLC_SAN=1: second model skipped\n");
        return tl_summary();
    }
    {
        tiny_model t;   // untied, GQA 4, D 32, 3 layers
        tiny_init(&t, &be, 517, 96, 160, 3, 8, 2, 32, 0, 200, 2);
        test_greedy_and_logits(&t, "untied gqa4 D32");
        test_logprobs(&t, "untied gqa4 D32", 0.6f, -1, 0.95f);
        test_determinism(&t, &be, "untied gqa4 D32", KV_F32);
        test_determinism(&t, &be, "untied gqa4 D32", KV_BF16);
        tiny_free(&t);
    }
    return tl_summary();
}
