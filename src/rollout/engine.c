// engine.c: scheduler, packed forward over the paged KV cache, sampling (see engine.h).
#include "rollout/engine.h"

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdio.h>

#include "core/bf16.h"
#include "core/common.h"
#include "kernels/kernels.h"
#include "rollout/kv_cache.h"
#include "rollout/paged_attention.h"
#include "rollout/rowgemm.h"

// SEQ_WAIT_ENV: a multi-turn sample between turns, out of the schedule, its KV blocks kept (unless dropped).
enum { SEQ_WAITING = 0, SEQ_RUNNING = 1, SEQ_DONE = 2, SEQ_WAIT_ENV = 3 };
// The two KV pools: the full-attention layers' (a sequence keeps all its blocks) and the sliding layers'
// (a sequence keeps the blocks of its window; earlier ones go back to the pool). See docs/rollout.md.
enum { POOL_FULL = 0, POOL_WINDOW = 1, N_POOLS = 2 };
enum { PFX_NONE = 0, PFX_PREFILLING = 1, PFX_READY = 2 };

typedef struct {
    int prompt, sample;
    uint64_t rng_id;
    uint64_t rng_sample;     // sample index of the random stream (prompt's sample_base + sample)
    int64_t draw_base;       // draw index of the first generated token (prompt's draw_base)
    const int32_t *pids;     // (P) prompt ids
    int64_t P;
    int32_t *gen;            // (max_new) response ids: generated, and (multi-turn) observation tokens
    float *lp;               // (max_new) their log-probs (0 for observation tokens)
    int64_t n_gen;           // response tokens
    int64_t n_drawn;         // generated tokens (the draw index; n_gen less observation tokens)
    int64_t turn0;           // gen index where the current turn began
    int64_t max_total;       // min(P + max_new, max_position_embeddings)
    int32_t *bt[N_POOLS];    // (bt_stride) block tables: logical block i -> block of that pool
    int n_bt;                // logical blocks allocated (both tables)
    int lo;                  // bt[POOL_WINDOW][0..lo-1] were recycled (-1): wholly before the window
    int64_t n_cached;        // tokens whose k/v are in the cache
    int state, admitted_once, finish;
    double t_first;
} seq_t;

typedef struct {
    int state;               // PFX_*
    int leader;              // seq index while PREFILLING
    int32_t *blocks[N_POOLS];   // (ceil(P / bs)) while READY; POOL_WINDOW entries before lo are -1
    int n_blocks, lo;
    float *hidden;           // (H) final-normed hidden of the last prompt token while READY
    int unadmitted;          // samples of this prompt never admitted yet
} prefix_t;

struct rollout_engine {
    decoder_model *m;
    rollout_config cfg;
    kv_cache kv[N_POOLS];    // kv[p] exists iff has_pool[p]
    int has_pool[N_POOLS];
    int window;              // W of the sliding layers whose KV is recycled (POOL_WINDOW), else 0
    int16_t layer_pool[MODEL_MAX_LAYERS], layer_slot[MODEL_MAX_LAYERS];   // layer l -> pool, layer index in it
    uint16_t *w16;           // (numel) bf16 copy in the parameter layout, or NULL
    float *wm;               // (numel) fp32 merged copy W + s·B·A (lora_merge without weights_bf16), or NULL
    int lora_merged;         // the adapters live in w16 / wm (lora_merge): no side path
    const uint16_t *base16;  // (numel) the model's frozen bf16 base (param_bf16, LoRA), read in place, or NULL
    layer_weights *lwv;      // (L) with base16: each layer's norms and biases (fp32, widened once); matrices NULL
    float *vec;              // the storage of lwv's vectors
    int64_t T_max;           // tokens per step
    float *x, *xn, *q, *k, *v, *qn, *kn, *att, *gate, *up, *act, *rstd;   // (T_max, ...) step buffers
    int32_t *tok, *pos, *tok_seq;                                         // (T_max)
    int64_t R_cap;           // rows allocated in xs / hid / logits
    float *xs, *hid, *logits;   // (R_cap, H), (R_cap, H), (R_cap, V)
    int n_ws;
    sampler_ws *ws;          // (n_ws) one per thread
};

const char *rollout_finish_name(int f) {
    return f == ROLLOUT_FINISH_STOP ? "stop" : f == ROLLOUT_FINISH_LENGTH ? "length" : "none";
}

void rollout_config_default(rollout_config *c) {
    memset(c, 0, sizeof *c);
    c->n = 1;
    c->sampling.temperature = 1.0f;
    c->sampling.top_k = -1;
    c->sampling.top_p = 1.0f;
    c->sampling.do_sample = 1;
    c->max_new_tokens = 512;
    c->seed = 0;
    c->kv_cache_bytes = 0;
    c->block_size = 16;
    c->max_num_seqs = 256;
    c->max_batched_tokens = 2048;
    c->share_prompts = 1;
    c->kv_cache_dtype = KV_F32;
    c->sliding_kv_pool = 1;
    c->progress_interval_s = 5.0;
}

static int64_t mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    fclose(f);
    return (int64_t)kb * 1024;
}

// The KV pools. Layers whose attention window can exclude a key (LAYER_SLIDING with 0 < W <
// max_position_embeddings) keep their k/v in POOL_WINDOW, the others in POOL_FULL; both pools have the same
// block size, so logical block i of a sequence is block bt[p][i] of pool p. The budget splits so that neither
// pool holds fewer tokens than one shared pool would have: POOL_WINDOW gets what its sequences can use at most
// (max_num_seqs windows, each ceil((W-1)/bs) + 2 blocks with a step's chunk edge, plus one step's tokens),
// capped at its layers' share of the budget, and POOL_FULL the rest.
static void kv_pools_init(rollout_engine *e, int64_t budget) {
    const model_config *c = e->m->cfg;
    const rollout_config *cfg = &e->cfg;
    const int L = c->num_hidden_layers, bs = cfg->block_size;
    CHECK(L >= 1 && L <= MODEL_MAX_LAYERS, "rollout: %d layers", L);
    int W = 0, n[N_POOLS] = {0, 0};
    for (int l = 0; l < L; l++) {
        const int w = decoder_layer_window(c, l);
        const int p = cfg->sliding_kv_pool && w > 0 && w < c->max_position_embeddings ? POOL_WINDOW : POOL_FULL;
        if (p == POOL_WINDOW && w > W) W = w;   // recycling keeps the widest window
        e->layer_pool[l] = (int16_t)p;
        e->layer_slot[l] = (int16_t)n[p]++;
    }
    e->window = W;
    int64_t bytes[N_POOLS] = {budget, 0};
    if (n[POOL_FULL] == 0) {
        bytes[POOL_FULL] = 0;
        bytes[POOL_WINDOW] = budget;
    } else if (n[POOL_WINDOW] > 0) {
        if (bs < 1 || bs > 1024) rlc_die("kv cache: block_size=%d, expected 1..1024", bs);
        const int64_t bw = kv_cache_block_bytes(n[POOL_WINDOW], c->num_key_value_heads, c->head_dim, bs, cfg->kv_cache_dtype);
        const int64_t use = ((int64_t)cfg->max_num_seqs * ((W - 1 + bs - 1) / bs + 2) + (e->T_max + bs - 1) / bs) * bw;
        const int64_t share = (int64_t)((double)budget * n[POOL_WINDOW] / L);
        bytes[POOL_WINDOW] = use < share ? use : share;
        bytes[POOL_FULL] = budget - bytes[POOL_WINDOW];
    }
    for (int p = 0; p < N_POOLS; p++) {
        e->has_pool[p] = n[p] > 0;
        if (e->has_pool[p])
            kv_cache_init(&e->kv[p], n[p], c->num_key_value_heads, c->head_dim, bs, cfg->kv_cache_dtype, bytes[p]);
    }
}

// The frozen base of a LoRA model kept in bf16 (param_bf16_get_block) is read in place: its projections by the bf16
// rowgemm kernels (bitwise the fp32 kernels on the widened values), its few vectors widened once here. Without
// this, every layer of every decode step would be widened to fp32 first.
static const size_t LW_FIELD[LW_COUNT] = {
    offsetof(layer_weights, in_norm),   offsetof(layer_weights, wq),        offsetof(layer_weights, bq),
    offsetof(layer_weights, wk),        offsetof(layer_weights, bk),        offsetof(layer_weights, wv),
    offsetof(layer_weights, bv),        offsetof(layer_weights, wo),        offsetof(layer_weights, bo),
    offsetof(layer_weights, q_norm),    offsetof(layer_weights, k_norm),    offsetof(layer_weights, post_norm),
    offsetof(layer_weights, pre_ff_norm), offsetof(layer_weights, w_gate),  offsetof(layer_weights, b_gate),
    offsetof(layer_weights, w_up),      offsetof(layer_weights, b_up),      offsetof(layer_weights, w_down),
    offsetof(layer_weights, b_down),    offsetof(layer_weights, post_ff_norm)};

static void base16_init(rollout_engine *e) {
    const decoder_model *m = e->m;
    if (m->get_block != param_bf16_get_block) return;
    const param_bf16 *pb = m->get_block_ctx;
    const param_layout *pl = m->pl;
    CHECK(pb && pb->pl == pl && pb->w16, "rollout: the bf16 base is built on another layout");
    const int L = m->cfg->num_hidden_layers;
    int64_t n = 0;
    for (int i = 0; i < pl->n_tensors; i++)
        if (pl->tensors[i].block >= 1 && pl->tensors[i].block <= L && pl->tensors[i].ndim == 1) n += pl->tensors[i].numel;
    e->base16 = pb->w16;
    e->lwv = rlc_calloc((size_t)L, sizeof(layer_weights));
    e->vec = rlc_alloc((size_t)(n ? n : 1) * sizeof(float));
    int64_t at = 0;
    for (int i = 0; i < pl->n_tensors; i++) {
        const param_tensor *t = &pl->tensors[i];
        if (t->block < 1 || t->block > L || t->ndim != 1) continue;
        const int64_t rel = t->offset - pl->block_off[t->block];
        int k = 0;
        while (k < LW_COUNT && pl->layer_off[k] != rel) k++;
        CHECK(k < LW_COUNT, "rollout: tensor %s at no layer offset", t->name);
        for (int64_t j = 0; j < t->numel; j++) e->vec[at + j] = bf16_to_f32(pb->w16[t->offset + j]);
        *(float **)((char *)&e->lwv[t->block - 1] + LW_FIELD[k]) = e->vec + at;
        at += t->numel;
    }
}

static float *block_base(const decoder_model *m, int b) {
    float *p = m->get_block ? m->get_block(m->get_block_ctx, b) : m->block_w[b];
    CHECK(p, "rollout: no weights for block %d (set decoder_model.block_w or get_block)", b);
    return p;
}

// The checks of rollout_engine_new and rollout_engine_set_sampling on n and the sampling parameters.
static void check_sampling(int n, const sampler_params *sampling) {
    if (n < 1) rlc_die("rollout: n=%d, expected >= 1", n);
    sampler_params_check(sampling);
}

rollout_engine *rollout_engine_new(decoder_model *m, const rollout_config *cfg) {
    const model_config *c = m->cfg;
    check_sampling(cfg->n, &cfg->sampling);
    if (cfg->max_new_tokens < 1) rlc_die("rollout: max_new_tokens=%d, expected >= 1", cfg->max_new_tokens);
    if (cfg->max_num_seqs < 1) rlc_die("rollout: max_num_seqs=%d, expected >= 1", cfg->max_num_seqs);
    if (cfg->max_batched_tokens < cfg->max_num_seqs)
        rlc_die("rollout: max_batched_tokens=%d must be >= max_num_seqs=%d", cfg->max_batched_tokens, cfg->max_num_seqs);
    if (cfg->kv_cache_bytes < 0) rlc_die("rollout: kv_cache_bytes=%lld, expected >= 0", (long long)cfg->kv_cache_bytes);
    rollout_engine *e = rlc_calloc(1, sizeof *e);
    e->m = m;
    e->cfg = *cfg;
    int64_t budget = cfg->kv_cache_bytes;
    if (budget == 0) {
        budget = mem_available() / 10 * 4;
        if (budget <= 0) budget = (int64_t)1 << 30;
    }
    const int64_t H = c->hidden_size, QD = (int64_t)c->num_attention_heads * c->head_dim,
                  KD = (int64_t)c->num_key_value_heads * c->head_dim, I = c->intermediate_size, T = cfg->max_batched_tokens;
    e->T_max = T;
    kv_pools_init(e, budget);
    e->x = rlc_alloc((size_t)(T * H) * sizeof(float));
    e->xn = rlc_alloc((size_t)(T * H) * sizeof(float));
    e->q = rlc_alloc((size_t)(T * QD) * sizeof(float));
    e->qn = rlc_alloc((size_t)(T * QD) * sizeof(float));
    e->att = rlc_alloc((size_t)(T * QD) * sizeof(float));
    e->k = rlc_alloc((size_t)(T * KD) * sizeof(float));
    e->kn = rlc_alloc((size_t)(T * KD) * sizeof(float));
    e->v = rlc_alloc((size_t)(T * KD) * sizeof(float));
    e->gate = rlc_alloc((size_t)(T * I) * sizeof(float));
    e->up = rlc_alloc((size_t)(T * I) * sizeof(float));
    e->act = rlc_alloc((size_t)(T * I) * sizeof(float));
    e->rstd = rlc_alloc((size_t)(T * c->num_attention_heads) * sizeof(float));
    e->tok = rlc_malloc((size_t)T * sizeof(int32_t));
    e->pos = rlc_malloc((size_t)T * sizeof(int32_t));
    e->tok_seq = rlc_malloc((size_t)T * sizeof(int32_t));
    e->n_ws = omp_get_max_threads();
    e->ws = rlc_calloc((size_t)e->n_ws, sizeof(sampler_ws));
    for (int i = 0; i < e->n_ws; i++) sampler_ws_init(&e->ws[i], c->vocab_size);
    e->lora_merged = m->lora && cfg->lora_merge;
    base16_init(e);
    // a bf16 copy of a bf16 base would be the base itself: without merged weights the base serves as it is
    if (cfg->weights_bf16 && (!e->base16 || e->lora_merged)) e->w16 = rlc_alloc((size_t)m->pl->numel * sizeof(uint16_t));
    else if (e->lora_merged && !cfg->weights_bf16) e->wm = rlc_alloc((size_t)m->pl->numel * sizeof(float));
    rollout_engine_sync_weights(e);
    return e;
}

void rollout_engine_sync_weights(rollout_engine *e) {
    if (!e->w16 && !e->wm) return;
    const decoder_model *m = e->m;
    const param_layout *pl = m->pl;
    float *tmp = NULL;   // one layer block, merged, before its bf16 rounding
    for (int b = 0; b < pl->n_blocks; b++) {
        const int64_t off = pl->block_off[b], n = pl->block_off[b + 1] - off;
        const float *src = block_base(m, b);
        if (e->lora_merged && b >= 1 && b <= m->cfg->num_hidden_layers) {   // layer l = b - 1: W + s·B·A, in fp32
            float *dst = e->wm ? e->wm + off : (tmp = tmp ? tmp : rlc_alloc((size_t)pl->layer_numel * sizeof(float)));
            memcpy(dst, src, (size_t)n * sizeof(float));
            layer_weights lw;
            param_layer_view(pl, dst, &lw);
            if (m->lora_on)
                for (int p = 0; p < LORA_NPROJ; p++) lora_merge_into(m->lora, m->lora_w, b - 1, p, lora_base_weight(&lw, p));
            src = dst;
        }
        if (e->w16) rowgemm_to_bf16(e->w16 + off, src, n);
        else if (src != e->wm + off) memcpy(e->wm + off, src, (size_t)n * sizeof(float));
    }
    rlc_free(tmp);
}

void rollout_engine_free(rollout_engine *e) {
    if (!e) return;
    for (int p = 0; p < N_POOLS; p++)
        if (e->has_pool[p]) kv_cache_free(&e->kv[p]);
    rlc_free(e->w16);
    rlc_free(e->wm);
    rlc_free(e->vec);
    free(e->lwv);
    float *bufs[] = {e->x, e->xn, e->q, e->qn, e->att, e->k, e->kn, e->v, e->gate, e->up, e->act, e->rstd, e->xs, e->hid, e->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) rlc_free(bufs[i]);
    free(e->tok);
    free(e->pos);
    free(e->tok_seq);
    for (int i = 0; i < e->n_ws; i++) sampler_ws_free(&e->ws[i]);
    free(e->ws);
    free(e);
}

const rollout_config *rollout_engine_config(const rollout_engine *e) { return &e->cfg; }

void rollout_engine_set_sampling(rollout_engine *e, int n, const sampler_params *sampling) {
    check_sampling(n, sampling);
    e->cfg.n = n;
    e->cfg.sampling = *sampling;
}
int64_t rollout_engine_kv_bytes(const rollout_engine *e) {
    int64_t b = 0;
    for (int p = 0; p < N_POOLS; p++)
        if (e->has_pool[p]) b += (int64_t)e->kv[p].n_blocks * e->kv[p].block_bytes;
    return b;
}

// ---- the packed forward ------------------------------------------------------------------------------------

// Projection `kind` (LW_Q ...) of layer l, block base `base` (fp32; NULL with base16): fp32 (master), or with the
// bf16 switch its bf16 copy at the same layout offset, or merged weights, or the frozen bf16 base itself. Its bias
// (OC) or NULL stays fp32 (added to the product's sum before the store or the residual add, as torch's linear).
// Adapted projections (LoRA on, not merged) carry the rank-r side path y += s·(x·Aᵀ)·Bᵀ, read from the model's
// adapter buffer and fused into the product's parallel region (rowgemm.h): rows stay batch invariant.
static rowgemm_out mm_out(const rollout_engine *e, float *out, int64_t ldo, const float *base, int l, int kind,
                          const float *bias, int64_t OC, int proj) {
    const decoder_model *m = e->m;
    const int64_t loff = m->pl->layer_off[kind], off = m->pl->block_off[1 + l] + loff;
    rowgemm_out o = {.out = out, .ldo = ldo, .bias = bias, .OC = OC};
    if (e->w16) o.w16 = e->w16 + off;
    else if (e->wm) o.w = e->wm + off;
    else if (e->base16) o.w16 = e->base16 + off;
    else o.w = base + loff;
    const lora_layout *ll = m->lora;
    if (ll && m->lora_on && !e->lora_merged && lora_adapted(ll, l, proj)) {
        const int64_t i = (int64_t)l * LORA_NPROJ + proj;
        o.lora_a = m->lora_w + ll->a_off[i];
        o.lora_b = m->lora_w + ll->b_off[i];
        o.lora_r = ll->rank;
        o.lora_s = ll->scale;
    }
    return o;
}
// The products of one input x (T, C), fused into one parallel region.
static void mm(const rollout_engine *e, const rowgemm_out *outs, int n, const float *x, int64_t T, int64_t C,
               int accumulate) {
    (void)e;   // mm_out chose the weights' storage
    if (outs[0].w16) rowgemm_forward_multi_bf16(outs, n, x, T, C, accumulate);
    else rowgemm_forward_multi(outs, n, x, T, C, accumulate);
}

// The step's block tables: bt[p] (rows = sequences, stride) for pool p.
typedef struct {
    const int32_t *bt[N_POOLS];
    int64_t stride;
} kv_tables;

// Layer l's attention for the step's T tokens: their k/v (T, nkv*D) into the layer's pool, then att (T, nh*D)
// over each token's visible keys (the model's window on sliding layers), q (T, nh*D) after norm + RoPE.
static void layer_attention(rollout_engine *e, int l, float *att, const float *q, const float *k, const float *v,
                            int64_t T, const kv_tables *kt) {
    const model_config *c = e->m->cfg;
    const int p = e->layer_pool[l], li = e->layer_slot[l];
    const int window = decoder_layer_window(c, l);
    paged_kv_write(&e->kv[p], li, k, v, kt->bt[p], kt->stride, e->tok_seq, e->pos, T);
    paged_attention_forward(att, q, &e->kv[p], li, kt->bt[p], kt->stride, e->tok_seq, e->pos, T, c->num_attention_heads,
                            window, c->attn_scale);
}

// Forward of e->tok/pos/tok_seq (T tokens): residual stream left in e->x (T, H); k/v written to the cache.
static void forward_tokens(rollout_engine *e, int64_t T, const kv_tables *kt) {
    const decoder_model *m = e->m;
    const model_config *c = m->cfg;
    const int64_t H = c->hidden_size, D = c->head_dim, nh = c->num_attention_heads, nkv = c->num_key_value_heads;
    const int64_t QD = nh * D, KD = nkv * D, I = c->intermediate_size;
    const float eps = c->rms_norm_eps, w_off = c->norm_plus_one ? 1.0f : 0.0f;
    CHECK(!e->base16 || (m->get_block == param_bf16_get_block && ((const param_bf16 *)m->get_block_ctx)->w16 == e->base16),
          "rollout: the model's bf16 base changed after rollout_engine_new");
    decoder_embed(m, e->x, e->tok, T);
    for (int l = 0; l < c->num_hidden_layers; l++) {
        float *base = e->base16 ? NULL : block_base(m, 1 + l);
        const rope_table *rt = decoder_rope(m, l);
        layer_weights lw;
        if (e->base16) lw = e->lwv[l];
        else param_layer_view(m->pl, base, &lw);
        rmsnorm_forward_off(e->xn, e->rstd, e->x, lw.in_norm, w_off, T, H, eps);
        float *qp = c->qk_norm ? e->q : e->qn, *kp = c->qk_norm ? e->k : e->kn;   // without q/k norms: straight to RoPE
        const rowgemm_out qkv[3] = {mm_out(e, qp, QD, base, l, LW_Q, lw.bq, QD, LORA_Q),
                                    mm_out(e, kp, KD, base, l, LW_K, lw.bk, KD, LORA_K),
                                    mm_out(e, e->v, KD, base, l, LW_V, lw.bv, KD, LORA_V)};
        mm(e, qkv, 3, e->xn, T, H, 0);
        if (c->qk_norm) {
            rmsnorm_forward_off(e->qn, e->rstd, e->q, lw.q_norm, w_off, T * nh, D, eps);
            rmsnorm_forward_off(e->kn, e->rstd, e->k, lw.k_norm, w_off, T * nkv, D, eps);
        }
        rope_forward(e->qn, e->pos, rt, T, nh);
        rope_forward(e->kn, e->pos, rt, T, nkv);
        layer_attention(e, l, e->att, e->qn, e->kn, e->v, T, kt);
        if (c->sandwich_norm) {   // x += post_attn_norm(o_proj(attn)); xn = pre_ff_norm(x)
            const rowgemm_out o_proj = mm_out(e, e->xn, H, base, l, LW_O, lw.bo, H, LORA_O);
            mm(e, &o_proj, 1, e->att, T, QD, 0);
            rmsnorm_forward_off(e->xn, e->rstd, e->xn, lw.post_norm, w_off, T, H, eps);
            residual_forward(e->x, e->x, e->xn, T * H);
            rmsnorm_forward_off(e->xn, e->rstd, e->x, lw.pre_ff_norm, w_off, T, H, eps);
        } else {
            const rowgemm_out o_proj = mm_out(e, e->x, H, base, l, LW_O, lw.bo, H, LORA_O);
            mm(e, &o_proj, 1, e->att, T, QD, 1);   // x += o_proj(attn)
            rmsnorm_forward_off(e->xn, e->rstd, e->x, lw.post_norm, w_off, T, H, eps);
        }
        const rowgemm_out gate_up[2] = {mm_out(e, e->gate, I, base, l, LW_GATE, lw.b_gate, I, LORA_GATE),
                                        mm_out(e, e->up, I, base, l, LW_UP, lw.b_up, I, LORA_UP)};
        mm(e, gate_up, 2, e->xn, T, H, 0);
        glu_forward(e->act, e->gate, e->up, T * I, c->hidden_act);
        if (c->sandwich_norm) {   // x += post_ff_norm(down(act))
            const rowgemm_out down = mm_out(e, e->xn, H, base, l, LW_DOWN, lw.b_down, H, LORA_DOWN);
            mm(e, &down, 1, e->act, T, I, 0);
            rmsnorm_forward_off(e->xn, e->rstd, e->xn, lw.post_ff_norm, w_off, T, H, eps);
            residual_forward(e->x, e->x, e->xn, T * H);
        } else {
            const rowgemm_out down = mm_out(e, e->x, H, base, l, LW_DOWN, lw.b_down, H, LORA_DOWN);
            mm(e, &down, 1, e->act, T, I, 1);   // x += mlp
        }
    }
}

static void reserve_rows(rollout_engine *e, int64_t R) {
    if (R <= e->R_cap) return;
    const int64_t H = e->m->cfg->hidden_size, V = e->m->cfg->vocab_size;
    int64_t cap = e->R_cap ? e->R_cap : 8;
    while (cap < R) cap *= 2;
    rlc_free(e->xs);
    rlc_free(e->hid);
    rlc_free(e->logits);
    e->xs = rlc_alloc((size_t)(cap * H) * sizeof(float));
    e->hid = rlc_alloc((size_t)(cap * H) * sizeof(float));
    e->logits = rlc_alloc((size_t)(cap * V) * sizeof(float));
    e->R_cap = cap;
}

// logits (R, V) of hidden rows e->hid (R, H).
static void logits_rows(rollout_engine *e, int64_t R) {
    const model_config *c = e->m->cfg;
    const int64_t H = c->hidden_size, V = c->vocab_size;
    if (e->w16 || e->base16) {   // the bf16 copy, else the frozen bf16 base itself
        const param_layout *pl = e->m->pl;
        const int64_t off = c->tie_word_embeddings ? 0 : pl->block_off[pl->n_blocks - 1] + H;
        rowgemm_forward_bf16(e->logits, V, e->hid, (e->w16 ? e->w16 : e->base16) + off, R, H, V, 0);
    } else {
        rowgemm_forward(e->logits, V, e->hid, decoder_lm_head(e->m), R, H, V, 0);
    }
    logits_softcap(e->logits, R * V, c->final_logit_softcapping);
}

// ---- scheduling -----------------------------------------------------------------------------------------

typedef struct {
    rollout_engine *e;
    const rollout_prompt *prompts;
    int n_total;
    seq_t *seqs;
    prefix_t *pfx;
    int32_t *bt_all[N_POOLS];   // (n_total, bt_stride) per pool
    int64_t bt_stride;
    int *running, n_running; // seq ids in admission order
    int *waiting, n_waiting; // seq ids in queue order
    int n_done;
    const rollout_turn_hooks *hooks;   // multi-turn (NULL: a stop ends the sample)
    int *resumed, n_resumed; // seq ids whose observation arrived with their KV kept: they rejoin the running list
    int n_wait_env;          // samples in SEQ_WAIT_ENV
    rollout_result *res;
    double t0;
} gen_state;

static int64_t n_tok(const seq_t *s) { return s->P + s->n_gen; }
static int32_t tok_at(const seq_t *s, int64_t t) { return t < s->P ? s->pids[t] : s->gen[t - s->P]; }

// Unref entries [from, n) of a table of pool p (entries before lo of POOL_WINDOW are recycled, -1).
static void unref_range(rollout_engine *e, int p, int32_t *bt, int from, int n) {
    for (int i = from; i < n; i++) {
        kv_cache_unref(&e->kv[p], bt[i]);
        bt[i] = -1;
    }
}

static void release_blocks(gen_state *g, seq_t *s) {
    rollout_engine *e = g->e;
    for (int p = 0; p < N_POOLS; p++)
        if (e->has_pool[p]) unref_range(e, p, s->bt[p], p == POOL_WINDOW ? s->lo : 0, s->n_bt);
    s->n_bt = 0;
    s->lo = 0;
}

// Sliding layers' blocks that fall wholly before the window of every later query of s (positions >= n_cached
// see keys > n_cached - W) go back to POOL_WINDOW.
static void recycle_window(gen_state *g, seq_t *s) {
    rollout_engine *e = g->e;
    if (!e->has_pool[POOL_WINDOW]) return;
    const int64_t first = s->n_cached - e->window + 1;   // the first key the next query sees
    const int lo = first > 0 ? (int)(first / e->kv[POOL_WINDOW].block_size) : 0;
    if (lo <= s->lo) return;
    CHECK(lo <= s->n_bt, "recycling block %d of %d", lo, s->n_bt);
    unref_range(e, POOL_WINDOW, s->bt[POOL_WINDOW], s->lo, lo);
    s->lo = lo;
}

// Free blocks in every pool (the smallest count): what the admission checks compare a need with.
static int pools_free(const rollout_engine *e) {
    int f = INT32_MAX;
    for (int p = 0; p < N_POOLS; p++)
        if (e->has_pool[p] && e->kv[p].n_free < f) f = e->kv[p].n_free;
    return f;
}
static int pools_min_blocks(const rollout_engine *e) {
    int f = INT32_MAX;
    for (int p = 0; p < N_POOLS; p++)
        if (e->has_pool[p] && e->kv[p].n_blocks < f) f = e->kv[p].n_blocks;
    return f;
}

// Bytes of the blocks in use, both pools.
static int64_t kv_bytes_used(const rollout_engine *e) {
    int64_t b = 0;
    for (int p = 0; p < N_POOLS; p++)
        if (e->has_pool[p]) b += (int64_t)(e->kv[p].n_blocks - e->kv[p].n_free) * e->kv[p].block_bytes;
    return b;
}

static void note_kv_peak(const rollout_engine *e, rollout_result *r) {
    const int used[N_POOLS] = {e->has_pool[POOL_FULL] ? e->kv[POOL_FULL].n_blocks - e->kv[POOL_FULL].n_free : 0,
                               e->has_pool[POOL_WINDOW] ? e->kv[POOL_WINDOW].n_blocks - e->kv[POOL_WINDOW].n_free : 0};
    if (used[POOL_FULL] > r->kv_blocks_peak) r->kv_blocks_peak = used[POOL_FULL];
    if (used[POOL_WINDOW] > r->kv_window_blocks_peak) r->kv_window_blocks_peak = used[POOL_WINDOW];
    const int64_t b = kv_bytes_used(e);
    if (b > r->kv_bytes_peak) r->kv_bytes_peak = b;
}

// Make the blocks covering positions [t0, t1) exist and be private. 0 on success, -1 if the pool ran dry
// (progress made so far is kept).
static int ensure_blocks(gen_state *g, seq_t *s, int64_t t0, int64_t t1) {
    rollout_engine *e = g->e;
    const int bs = e->cfg.block_size;
    for (int64_t ib = t0 / bs; ib <= (t1 - 1) / bs; ib++) {
        if (ib >= s->n_bt) {   // a new logical block: one block in every pool, or none
            CHECK(ib == s->n_bt, "block table gap: block %lld, have %d", (long long)ib, s->n_bt);
            CHECK(ib < g->bt_stride, "block table overflow: %lld >= %lld", (long long)ib, (long long)g->bt_stride);
            if (pools_free(e) < 1) return -1;
            for (int p = 0; p < N_POOLS; p++)
                if (e->has_pool[p]) s->bt[p][ib] = kv_cache_alloc(&e->kv[p]);
            s->n_bt++;
        } else {
            CHECK(ib >= s->lo, "write at block %lld, recycled below %d", (long long)ib, s->lo);
            for (int p = 0; p < N_POOLS; p++) {
                if (!e->has_pool[p]) continue;
                int r = kv_cache_make_private(&e->kv[p], &s->bt[p][ib]);
                if (r < 0) return -1;
                if (r > 0) g->res->n_cow++;
            }
        }
    }
    return 0;
}

static void prefix_release(gen_state *g, prefix_t *px) {
    rollout_engine *e = g->e;
    for (int p = 0; p < N_POOLS; p++) {
        if (e->has_pool[p]) unref_range(e, p, px->blocks[p], p == POOL_WINDOW ? px->lo : 0, px->n_blocks);
        free(px->blocks[p]);
        px->blocks[p] = NULL;
    }
    free(px->hidden);
    px->hidden = NULL;
    px->n_blocks = 0;
    px->lo = 0;
    px->state = PFX_NONE;
}

// Drop one READY prefix (lowest prompt index). Returns 1 if one was dropped.
static int release_one_prefix(gen_state *g, int n_prompts) {
    for (int p = 0; p < n_prompts; p++)
        if (g->pfx[p].state == PFX_READY) { prefix_release(g, &g->pfx[p]); return 1; }
    return 0;
}

// Free the KV blocks of one sample waiting for its environment (before preempting running ones): it
// recomputes its whole context when its observation arrives. Returns 1 if one was dropped.
static int drop_one_waiting_env(gen_state *g) {
    for (int si = 0; si < g->n_total && g->n_wait_env > 0; si++) {
        seq_t *s = &g->seqs[si];
        if (s->state != SEQ_WAIT_ENV || s->n_bt == 0) continue;
        release_blocks(g, s);
        s->n_cached = 0;
        g->res->n_preempt++;
        return 1;
    }
    return 0;
}

static void preempt(gen_state *g, int si) {
    seq_t *s = &g->seqs[si];
    release_blocks(g, s);
    s->n_cached = 0;
    s->state = SEQ_WAITING;
    prefix_t *px = &g->pfx[s->prompt];
    if (px->state == PFX_PREFILLING && px->leader == si) px->state = PFX_NONE;
    memmove(g->waiting + 1, g->waiting, (size_t)g->n_waiting * sizeof(int));
    g->waiting[0] = si;
    g->n_waiting++;
    g->res->n_preempt++;
}

static int is_stop(const rollout_engine *e, int32_t tok) {
    const model_config *c = e->m->cfg;
    if (!e->cfg.ignore_eos)
        for (int i = 0; i < c->n_eos_token_ids; i++)
            if (tok == c->eos_token_ids[i]) return 1;
    for (int i = 0; i < e->cfg.n_stop_ids; i++)
        if (tok == e->cfg.stop_ids[i]) return 1;
    return 0;
}

typedef struct { int seq; int64_t t0, t1, off; } feed_t;

// One engine step. Returns the number of tokens that went through the forward.
static int64_t step(gen_state *g, int n_prompts, feed_t *feeds, int *joiners, int *row_seq) {
    rollout_engine *e = g->e;
    const rollout_config *cfg = &e->cfg;
    const int bs = cfg->block_size;
    int nfeed = 0, nj = 0, preempted = 0;
    int64_t T = 0;
    // 1. running sequences: 1 token each, plus prefill/recompute chunks from the remaining budget.
    int64_t extra = e->T_max - g->n_running;
    for (int ri = 0; ri < g->n_running; ri++) {
        const int si = g->running[ri];
        seq_t *s = &g->seqs[si];
        const int64_t pending = n_tok(s) - s->n_cached;
        CHECK(pending >= 1, "running sequence %d has nothing to feed", si);
        int64_t take = 1 + (pending - 1 < extra ? pending - 1 : extra);
        int self = 0;
        while (ensure_blocks(g, s, s->n_cached, s->n_cached + take) < 0) {
            if (release_one_prefix(g, n_prompts) || drop_one_waiting_env(g)) continue;
            const int victim = g->running[--g->n_running];
            preempt(g, victim);
            preempted = 1;
            if (victim == si) { self = 1; break; }
        }
        if (self) break;
        extra -= take - 1;
        feeds[nfeed++] = (feed_t){si, s->n_cached, s->n_cached + take, T};
        T += take;
    }
    // 2. admission (not in a step that had to preempt).
    for (int wi = 0; !preempted && wi < g->n_waiting && g->n_running < cfg->max_num_seqs;) {
        const int si = g->waiting[wi];
        seq_t *s = &g->seqs[si];
        prefix_t *px = cfg->share_prompts && cfg->n > 1 && !s->admitted_once ? &g->pfx[s->prompt] : NULL;
        if (px && px->state == PFX_PREFILLING) { wi++; continue; }
        // (the watermark and the needs in blocks: every pool allocates one block per logical block)
        int watermark = g->n_running < pools_min_blocks(e) / 8 ? g->n_running : pools_min_blocks(e) / 8;
        if (px && px->state == PFX_READY) {   // join: share the prompt's blocks, sample from its hidden
            if (g->n_running > 0 && pools_free(e) - 1 < watermark) break;
            for (int p = 0; p < N_POOLS; p++) {
                if (!e->has_pool[p]) continue;
                for (int i = 0; i < px->n_blocks; i++) {
                    s->bt[p][i] = px->blocks[p][i];
                    if (p == POOL_FULL || i >= px->lo) kv_cache_ref(&e->kv[p], px->blocks[p][i]);
                }
            }
            s->n_bt = px->n_blocks;
            s->lo = px->lo;
            s->n_cached = s->P;
            joiners[nj++] = si;
            g->res->n_prefix_hits++;
        } else {
            const int64_t budget = e->T_max - T;
            if (budget <= 0) break;
            const int64_t take = n_tok(s) < budget ? n_tok(s) : budget;
            const int64_t need = (take + bs - 1) / bs;
            if (g->n_running > 0 && pools_free(e) - need < watermark) break;
            while (pools_free(e) < need && (release_one_prefix(g, n_prompts) || drop_one_waiting_env(g))) {}
            if (pools_free(e) < need) break;
            CHECK(ensure_blocks(g, s, 0, take) == 0, "block allocation failed after the free check");
            feeds[nfeed++] = (feed_t){si, 0, take, T};
            T += take;
            if (px && px->state == PFX_NONE && g->pfx[s->prompt].unadmitted >= 2) {
                px->state = PFX_PREFILLING;
                px->leader = si;
            }
        }
        if (!s->admitted_once) { s->admitted_once = 1; g->pfx[s->prompt].unadmitted--; }
        s->state = SEQ_RUNNING;
        g->running[g->n_running++] = si;
        memmove(g->waiting + wi, g->waiting + wi + 1, (size_t)(g->n_waiting - wi - 1) * sizeof(int));
        g->n_waiting--;
    }
    if (nfeed == 0 && nj == 0) {
        // Nothing runnable: after a preemption (admission resumes next step), or with every block held by
        // prefixes (drop one and retry).
        CHECK(preempted || release_one_prefix(g, n_prompts) || drop_one_waiting_env(g) || g->n_waiting == 0,
              "rollout scheduler made no progress (running %d, waiting %d, free blocks %d of at least %d)", g->n_running,
              g->n_waiting, pools_free(e), pools_min_blocks(e));
        return 0;
    }
    // 3. the packed forward.
    for (int f = 0; f < nfeed; f++) {
        const seq_t *s = &g->seqs[feeds[f].seq];
        for (int64_t t = feeds[f].t0; t < feeds[f].t1; t++) {
            const int64_t i = feeds[f].off + (t - feeds[f].t0);
            e->tok[i] = tok_at(s, t);
            e->pos[i] = (int32_t)t;
            e->tok_seq[i] = feeds[f].seq;
        }
    }
    if (T > 0) {
        const kv_tables kt = {{g->bt_all[POOL_FULL], g->bt_all[POOL_WINDOW]}, g->bt_stride};
        forward_tokens(e, T, &kt);
        note_kv_peak(e, g->res);   // before this step's recycling
    }
    // 4. rows that sample: feeds that reached the end of their tokens, then joiners.
    const model_config *c = e->m->cfg;
    const int64_t H = c->hidden_size, V = c->vocab_size;
    reserve_rows(e, nfeed + nj);
    int R = 0;
    for (int f = 0; f < nfeed; f++) {
        seq_t *s = &g->seqs[feeds[f].seq];
        s->n_cached = feeds[f].t1;
        recycle_window(g, s);
        if (feeds[f].t1 != n_tok(s)) continue;
        memcpy(e->xs + (int64_t)R * H, e->x + (feeds[f].off + feeds[f].t1 - feeds[f].t0 - 1) * H, (size_t)H * sizeof(float));
        row_seq[R++] = feeds[f].seq;
    }
    const int Rf = R;
    if (Rf > 0) {
        const float *fn = block_base(e->m, e->m->pl->n_blocks - 1);
        rmsnorm_forward_off(e->hid, e->rstd, e->xs, fn, c->norm_plus_one ? 1.0f : 0.0f, Rf, H, c->rms_norm_eps);
    }
    for (int r = 0; r < Rf; r++) {   // a leader that finished the prompt publishes its prefix
        const int si = row_seq[r];
        seq_t *s = &g->seqs[si];
        prefix_t *px = &g->pfx[s->prompt];
        if (px->state != PFX_PREFILLING || px->leader != si) continue;
        px->n_blocks = (int)((s->P + bs - 1) / bs);
        px->lo = s->lo;
        for (int p = 0; p < N_POOLS; p++) {
            if (!e->has_pool[p]) continue;
            px->blocks[p] = rlc_malloc((size_t)px->n_blocks * sizeof(int32_t));
            for (int i = 0; i < px->n_blocks; i++) {
                px->blocks[p][i] = s->bt[p][i];
                if (p == POOL_FULL || i >= px->lo) kv_cache_ref(&e->kv[p], s->bt[p][i]);
            }
        }
        px->hidden = rlc_malloc((size_t)H * sizeof(float));
        memcpy(px->hidden, e->hid + (int64_t)r * H, (size_t)H * sizeof(float));
        px->state = PFX_READY;
    }
    for (int j = 0; j < nj; j++) {
        memcpy(e->hid + (int64_t)R * H, g->pfx[g->seqs[joiners[j]].prompt].hidden, (size_t)H * sizeof(float));
        row_seq[R++] = joiners[j];
    }
    // 5. logits and sampling (rows in parallel; each row's draw is a pure function of its sample).
    if (R > 0) {
        const int nth = omp_get_max_threads();   // the caller may have raised the thread count since
        if (nth > e->n_ws) {
            e->ws = rlc_realloc(e->ws, (size_t)nth * sizeof(sampler_ws));
            for (int i = e->n_ws; i < nth; i++) sampler_ws_init(&e->ws[i], V);
            e->n_ws = nth;
        }
        logits_rows(e, R);
        if (cfg->on_logits)
            for (int r = 0; r < R; r++) {
                const seq_t *s = &g->seqs[row_seq[r]];
                cfg->on_logits(cfg->on_logits_ctx, s->prompt, s->sample, s->n_drawn, e->logits + (int64_t)r * V, V);
            }
        int32_t *new_tok = rlc_malloc((size_t)R * sizeof(int32_t));
        float *new_lp = rlc_malloc((size_t)R * sizeof(float));
#pragma omp parallel for schedule(static)
        for (int r = 0; r < R; r++) {
            const seq_t *s = &g->seqs[row_seq[r]];
            const int th = omp_get_thread_num();
            CHECK(th < e->n_ws, "thread %d without a sampler workspace", th);
            const double u = sampler_uniform(cfg->seed, s->rng_id, s->rng_sample, (uint64_t)(s->draw_base + s->n_drawn));
            new_tok[r] = sampler_sample(&cfg->sampling, e->logits + (int64_t)r * V, V, u, &new_lp[r], &e->ws[th]);
        }
        const double now = rlc_now() - g->t0;
        for (int r = 0; r < R; r++) {
            seq_t *s = &g->seqs[row_seq[r]];
            s->gen[s->n_gen] = new_tok[r];
            s->lp[s->n_gen] = new_lp[r];
            s->n_gen++;
            s->n_drawn++;
            if (s->n_drawn == 1) s->t_first = now;
            g->res->gen_tokens++;
            if (is_stop(e, new_tok[r])) s->finish = ROLLOUT_FINISH_STOP;
            else if (n_tok(s) >= s->max_total) s->finish = ROLLOUT_FINISH_LENGTH;
            if (s->finish && g->hooks) {   // a turn ended: the hook keeps the sample waiting, or ends it
                const int keep = g->hooks->turn_end(g->hooks->ctx, (rollout_turn_io *)g, s->prompt, s->sample, s->gen + s->turn0,
                                                    s->lp + s->turn0, s->n_gen - s->turn0, s->finish);
                if (keep && s->finish == ROLLOUT_FINISH_STOP) {
                    s->finish = ROLLOUT_FINISH_NONE;
                    s->state = SEQ_WAIT_ENV;
                    g->n_wait_env++;
                }
            }
            if (s->finish) {
                release_blocks(g, s);
                s->state = SEQ_DONE;
                g->n_done++;
            }
        }
        free(new_tok);
        free(new_lp);
    }
    // Drop finished sequences from the running list (order kept) and prefixes nobody will join.
    int w = 0;
    for (int ri = 0; ri < g->n_running; ri++)
        if (g->seqs[g->running[ri]].state == SEQ_RUNNING) g->running[w++] = g->running[ri];
    g->n_running = w;
    for (int p = 0; p < n_prompts; p++)
        if (g->pfx[p].state == PFX_READY && g->pfx[p].unadmitted == 0) prefix_release(g, &g->pfx[p]);
    return T;
}

static seq_t *waiting_seq(gen_state *g, int prompt, int sample) {
    const int n = g->e->cfg.n;
    CHECK(prompt >= 0 && sample >= 0 && sample < n && (int64_t)prompt * n + sample < g->n_total, "sample %d of prompt %d", sample,
          prompt);
    seq_t *s = &g->seqs[prompt * n + sample];
    CHECK(s->state == SEQ_WAIT_ENV, "sample %d of prompt %d is not waiting for an observation (state %d)", sample, prompt, s->state);
    return s;
}

void rollout_turn_resume(rollout_turn_io *io, int prompt, int sample, const int32_t *ids, int64_t n) {
    gen_state *g = (gen_state *)io;
    seq_t *s = waiting_seq(g, prompt, sample);
    CHECK(n >= 1 && n_tok(s) + n < s->max_total, "observation of %lld tokens for a sample at %lld of %lld tokens", (long long)n,
          (long long)n_tok(s), (long long)s->max_total);
    for (int64_t i = 0; i < n; i++) {
        CHECK(ids[i] >= 0 && ids[i] < g->e->m->cfg->vocab_size, "observation token %d outside the vocabulary", ids[i]);
        s->gen[s->n_gen + i] = ids[i];
        s->lp[s->n_gen + i] = 0.0f;
    }
    s->n_gen += n;
    s->turn0 = s->n_gen;
    g->n_wait_env--;
    const int si = (int)(s - g->seqs);
    if (s->n_bt == 0) {   // its blocks were dropped: recompute the whole context through admission
        s->state = SEQ_WAITING;
        g->waiting[g->n_waiting++] = si;
    } else {              // its KV is kept: the observation (and the last sampled token) is prefilled as a chunk
        s->state = SEQ_RUNNING;
        g->resumed[g->n_resumed++] = si;
    }
}

void rollout_turn_end(rollout_turn_io *io, int prompt, int sample) {
    gen_state *g = (gen_state *)io;
    seq_t *s = waiting_seq(g, prompt, sample);
    s->finish = ROLLOUT_FINISH_STOP;
    release_blocks(g, s);
    s->state = SEQ_DONE;
    g->n_wait_env--;
    g->n_done++;
}

void rollout_generate(rollout_engine *e, const rollout_prompt *prompts, int n_prompts, rollout_result *out) {
    rollout_generate_turns(e, prompts, NULL, n_prompts, NULL, out);
}

void rollout_generate_streams(rollout_engine *e, const rollout_prompt *prompts, const rollout_stream *streams, int n_prompts,
                              rollout_result *out) {
    rollout_generate_turns(e, prompts, streams, n_prompts, NULL, out);
}

void rollout_generate_turns(rollout_engine *e, const rollout_prompt *prompts, const rollout_stream *streams, int n_prompts,
                            const rollout_turn_hooks *hooks, rollout_result *out) {
    const rollout_config *cfg = &e->cfg;
    const model_config *c = e->m->cfg;
    memset(out, 0, sizeof *out);
    CHECK(n_prompts >= 0, "n_prompts=%d", n_prompts);
    const int bs = cfg->block_size;
    const int64_t max_pos = c->max_position_embeddings;
    int64_t max_blocks = 1;
    for (int p = 0; p < n_prompts; p++) {
        const rollout_prompt *pr = &prompts[p];
        if (pr->len <= 0) rlc_die("rollout: prompt %d is empty (a prompt needs at least one token)", p);
        if (pr->len >= max_pos)
            rlc_die("rollout: prompt %d has %lld tokens, which leaves no room to generate under max_position_embeddings=%lld",
                    p, (long long)pr->len, (long long)max_pos);
        for (int64_t t = 0; t < pr->len; t++)
            if (pr->ids[t] < 0 || pr->ids[t] >= c->vocab_size)
                rlc_die("rollout: prompt %d of the batch, token %lld has id %d, outside the model's vocabulary [0, %d) (has "
                        "the tokenizer more tokens than config.json's vocab_size?)", p, (long long)t, pr->ids[t], c->vocab_size);
        const rollout_stream st = streams ? streams[p] : (rollout_stream){0, 0, 0};
        if (st.max_new_tokens < 0 || st.max_new_tokens > cfg->max_new_tokens || st.sample_base < 0 || st.draw_base < 0)
            rlc_die("rollout: prompt %d has max_new_tokens=%d (expected 0..%d), sample_base=%d, draw_base=%lld (expected >= 0)",
                    p, st.max_new_tokens, cfg->max_new_tokens, st.sample_base, (long long)st.draw_base);
        const int64_t cap = st.max_new_tokens ? st.max_new_tokens : cfg->max_new_tokens;
        int64_t total = pr->len + cap < max_pos ? pr->len + cap : max_pos;
        int64_t need = (total - 1 + bs - 1) / bs;   // the last token is never fed
        for (int pl = 0; pl < N_POOLS; pl++) {
            if (!e->has_pool[pl]) continue;
            // a sliding layer holds at most its window and one step's chunk: keys n_cached - W + 1 ..
            // n_cached + take - 1, take <= max_batched_tokens
            const int64_t wneed = (e->window + e->T_max - 2) / bs + 2;
            const int64_t np = pl == POOL_WINDOW && wneed < need ? wneed : need;
            const kv_cache *kc = &e->kv[pl];
            if (np > kc->n_blocks)
                rlc_die("rollout: prompt %d (%lld tokens + max_new_tokens %d) needs %lld KV blocks (%lld bytes) but the KV "
                        "cache %sholds %d blocks (%lld bytes); raise --kv-cache-bytes or lower --max-new-tokens",
                        p, (long long)pr->len, cfg->max_new_tokens, (long long)np, (long long)(np * kc->block_bytes),
                        pl == POOL_WINDOW ? "of the sliding-window layers " : e->has_pool[POOL_WINDOW] ? "of the full-attention layers " : "",
                        kc->n_blocks, (long long)((int64_t)kc->n_blocks * kc->block_bytes));
        }
        if (need > max_blocks) max_blocks = need;
    }
    gen_state g = {0};
    g.e = e;
    g.prompts = prompts;
    g.res = out;
    g.t0 = rlc_now();
    const int n = cfg->n;
    g.n_total = n_prompts * n;
    g.seqs = rlc_calloc((size_t)g.n_total + 1, sizeof(seq_t));
    g.pfx = rlc_calloc((size_t)n_prompts + 1, sizeof(prefix_t));
    g.bt_stride = max_blocks;
    for (int p = 0; p < N_POOLS; p++) g.bt_all[p] = rlc_calloc((size_t)(g.n_total * max_blocks) + 1, sizeof(int32_t));
    g.running = rlc_malloc(((size_t)g.n_total + 1) * sizeof(int));
    g.hooks = hooks;
    g.resumed = rlc_malloc(((size_t)g.n_total + 1) * sizeof(int));
    g.waiting = rlc_malloc(((size_t)g.n_total + 1) * sizeof(int));
    for (int p = 0; p < n_prompts; p++) {
        g.pfx[p].unadmitted = n;
        out->prompt_tokens += prompts[p].len * n;
        for (int j = 0; j < n; j++) {
            const int si = p * n + j;
            seq_t *s = &g.seqs[si];
            s->prompt = p;
            s->sample = j;
            s->rng_id = prompts[p].id;
            const rollout_stream st = streams ? streams[p] : (rollout_stream){0, 0, 0};
            s->rng_sample = (uint64_t)st.sample_base + (uint64_t)j;
            s->draw_base = st.draw_base;
            const int64_t cap = st.max_new_tokens ? st.max_new_tokens : cfg->max_new_tokens;
            s->pids = prompts[p].ids;
            s->P = prompts[p].len;
            s->max_total = s->P + cap < max_pos ? s->P + cap : max_pos;
            s->gen = rlc_malloc((size_t)cap * sizeof(int32_t));
            s->lp = rlc_malloc((size_t)cap * sizeof(float));
            for (int pl = 0; pl < N_POOLS; pl++) s->bt[pl] = g.bt_all[pl] + (int64_t)si * max_blocks;
            g.waiting[g.n_waiting++] = si;
        }
    }
    feed_t *feeds = rlc_malloc(((size_t)g.n_total + 1) * sizeof(feed_t));
    int *joiners = rlc_malloc(((size_t)g.n_total + 1) * sizeof(int));
    int *row_seq = rlc_malloc(((size_t)g.n_total + 1) * sizeof(int));
    double t_last = g.t0;
    int64_t gen_last = 0;
    while (g.n_done < g.n_total) {
        if (hooks && g.n_wait_env > 0) {
            // observations that arrived; wait for one when nothing else can run
            const int idle = g.n_running == 0 && g.n_waiting == 0 && g.n_resumed == 0;
            const int before = g.n_wait_env;
            hooks->poll(hooks->ctx, (rollout_turn_io *)&g, idle);
            CHECK(!idle || g.n_wait_env < before, "the turn hook's blocking poll delivered nothing (%d samples waiting)", before);
            if (g.n_done == g.n_total) break;
        }
        // resumed samples rejoin the running list while max_num_seqs allows (the rest wait their turn)
        int k = 0;
        while (k < g.n_resumed && g.n_running < cfg->max_num_seqs) g.running[g.n_running++] = g.resumed[k++];
        memmove(g.resumed, g.resumed + k, (size_t)(g.n_resumed - k) * sizeof(int));
        g.n_resumed -= k;
        if (g.n_running == 0 && g.n_waiting == 0) continue;
        out->computed_tokens += step(&g, n_prompts, feeds, joiners, row_seq);
        out->n_steps++;
        if (g.n_running > out->max_running) out->max_running = g.n_running;
        note_kv_peak(e, out);
        const double now = rlc_now();
        if (cfg->progress && (now - t_last >= cfg->progress_interval_s || g.n_done == g.n_total)) {
            fprintf(stderr, "rollout: step %lld  %.1f tok/s  running %d  waiting %d  done %d/%d  kv %.3f/%.3f GB  preempted %lld\n",
                    (long long)out->n_steps, (double)(out->gen_tokens - gen_last) / (now - t_last + 1e-9), g.n_running,
                    g.n_waiting, g.n_done, g.n_total, (double)kv_bytes_used(e) / 1e9, (double)rollout_engine_kv_bytes(e) / 1e9,
                    (long long)out->n_preempt);
            t_last = now;
            gen_last = out->gen_tokens;
        }
    }
    for (int p = 0; p < n_prompts; p++)
        if (g.pfx[p].state == PFX_READY) prefix_release(&g, &g.pfx[p]);
    for (int p = 0; p < N_POOLS; p++)
        if (e->has_pool[p])
            CHECK(e->kv[p].n_free == e->kv[p].n_blocks, "KV blocks leaked: %d of %d free in pool %d after generation",
                  e->kv[p].n_free, e->kv[p].n_blocks, p);
    out->t_total = rlc_now() - g.t0;
    out->n_samples = g.n_total;
    out->samples = rlc_calloc((size_t)g.n_total + 1, sizeof(rollout_sample));
    for (int si = 0; si < g.n_total; si++) {
        seq_t *s = &g.seqs[si];
        rollout_sample *o = &out->samples[si];
        o->prompt = s->prompt;
        o->sample = s->sample;
        o->len = s->n_gen;
        o->ids = s->gen;
        o->logprobs = s->lp;
        o->finish = s->finish;
        o->t_first = s->t_first;
    }
    if (e->has_pool[POOL_FULL]) {
        out->kv_blocks = e->kv[POOL_FULL].n_blocks;
        out->kv_block_bytes = e->kv[POOL_FULL].block_bytes;
    }
    if (e->has_pool[POOL_WINDOW]) {
        out->kv_window_blocks = e->kv[POOL_WINDOW].n_blocks;
        out->kv_window_block_bytes = e->kv[POOL_WINDOW].block_bytes;
    }
    out->kv_bytes = rollout_engine_kv_bytes(e);
    free(feeds);
    free(joiners);
    free(row_seq);
    free(g.seqs);
    free(g.pfx);
    for (int p = 0; p < N_POOLS; p++) free(g.bt_all[p]);
    free(g.running);
    free(g.resumed);
    free(g.waiting);
}

void rollout_result_free(rollout_result *r) {
    for (int i = 0; i < r->n_samples; i++) {
        free(r->samples[i].ids);
        free(r->samples[i].logprobs);
    }
    free(r->samples);
    memset(r, 0, sizeof *r);
}

void rollout_probs_diff_compute(rollout_probs_diff *o, const float *la, const float *lr, int64_t n) {
    memset(o, 0, sizeof *o);
    o->n = n;
    if (n <= 0) { o->diff_max = o->diff_mean = o->diff_std = o->pearson = NAN; return; }
    double sa = 0, sr = 0, sd = 0;
    for (int64_t i = 0; i < n; i++) {
        double pa = exp((double)la[i]), pr = exp((double)lr[i]), d = fabs(pa - pr);
        sa += pa;
        sr += pr;
        sd += d;
        if (d > o->diff_max) o->diff_max = d;
    }
    const double ma = sa / n, mr = sr / n, md = sd / n;
    double vd = 0, caa = 0, crr = 0, car = 0;
    for (int64_t i = 0; i < n; i++) {
        double pa = exp((double)la[i]) - ma, pr = exp((double)lr[i]) - mr, d = fabs(exp((double)la[i]) - exp((double)lr[i])) - md;
        vd += d * d;
        caa += pa * pa;
        crr += pr * pr;
        car += pa * pr;
    }
    o->diff_mean = md;
    o->diff_std = n > 1 ? sqrt(vd / (double)(n - 1)) : NAN;
    double r = car / sqrt(caa * crr);
    o->pearson = r > 1 ? 1 : r < -1 ? -1 : r;
}
