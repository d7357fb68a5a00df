// engine.c: the rollout engine's set-up (see engine.h): its configuration, the KV pools, the step buffers, the
// weights it decodes from (in place, a bf16 copy, merged LoRA weights or the frozen bf16 base) and their refresh.
// The packed forward is in engine_forward.c, the scheduler in engine_schedule.c, a generation in engine_generate.c.
#include "rollout/engine.h"

#include <omp.h>
#include <stddef.h>
#include <stdio.h>

#include "core/bf16.h"
#include "core/common.h"
#include "rollout/engine_internal.h"
#include "rollout/kv_cache.h"
#include "rollout/rowgemm.h"

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

float *eng_block_base(const decoder_model *m, int b) {
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
        const float *src = eng_block_base(m, b);
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
