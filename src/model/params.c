// params.c: the size table that lays the decoder's parameters out into blocks, with HF tensor names.
#include "model/params.h"

#include "core/bf16.h"
#include "core/common.h"

static void add_tensor(param_layout *pl, int *cap, int block, const char *name, int ndim, int64_t d0, int64_t d1, int64_t *off) {
    if (pl->n_tensors == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        pl->tensors = rlc_realloc(pl->tensors, (size_t)*cap * sizeof(param_tensor));
    }
    param_tensor *t = &pl->tensors[pl->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = ndim == 2 ? d1 : 0;
    // checked: config.json bounds each size to 2^30, so products and the running offset could overflow
    int64_t numel = d0, end;
    if ((ndim == 2 && __builtin_mul_overflow(d0, d1, &numel)) || __builtin_add_overflow(*off, numel, &end) ||
        end > PARAM_MAX_NUMEL)
        rlc_die("config: the model has more than %lld parameters at tensor %s (%lld x %lld); rlc models are "
                "limited to 2^40 parameters", (long long)PARAM_MAX_NUMEL, name, (long long)d0, (long long)(ndim == 2 ? d1 : 1));
    t->numel = numel;
    t->offset = *off;
    t->block = block;
    t->decay = 1;
    *off = end;
}

void param_layout_init(param_layout *pl, const model_config *cfg) {
    memset(pl, 0, sizeof *pl);
    pl->cfg = *cfg;
    model_config_finalize(&pl->cfg);   // idempotent: a parsed config is already final
    const int64_t V = cfg->vocab_size, H = cfg->hidden_size, I = cfg->intermediate_size, L = cfg->num_hidden_layers;
    const int64_t D = cfg->head_dim, QD = (int64_t)cfg->num_attention_heads * D, KD = (int64_t)cfg->num_key_value_heads * D;
    pl->n_blocks = (int)L + 2;
    pl->block_off = rlc_calloc((size_t)pl->n_blocks + 1, sizeof(int64_t));
    int cap = 0;
    int64_t off = 0;
    char name[96];
    pl->block_off[0] = off;
    add_tensor(pl, &cap, 0, "model.embed_tokens.weight", 2, V, H, &off);
    for (int l = 0; l < L; l++) {
        int b = 1 + l;
        pl->block_off[b] = off;
        int64_t start = off;
        const int qkvb = cfg->qkv_bias, ob = cfg->o_bias, mb = cfg->mlp_bias, qkn = cfg->qk_norm, sw = cfg->sandwich_norm;
        struct { int kind; const char *suffix; int ndim; int64_t d0, d1; int on; } lt[LW_COUNT] = {
            {LW_IN_NORM, "input_layernorm.weight", 1, H, 0, 1},
            {LW_Q, "self_attn.q_proj.weight", 2, QD, H, 1},
            {LW_Q_BIAS, "self_attn.q_proj.bias", 1, QD, 0, qkvb},
            {LW_K, "self_attn.k_proj.weight", 2, KD, H, 1},
            {LW_K_BIAS, "self_attn.k_proj.bias", 1, KD, 0, qkvb},
            {LW_V, "self_attn.v_proj.weight", 2, KD, H, 1},
            {LW_V_BIAS, "self_attn.v_proj.bias", 1, KD, 0, qkvb},
            {LW_O, "self_attn.o_proj.weight", 2, H, QD, 1},
            {LW_O_BIAS, "self_attn.o_proj.bias", 1, H, 0, ob},
            {LW_Q_NORM, "self_attn.q_norm.weight", 1, D, 0, qkn},
            {LW_K_NORM, "self_attn.k_norm.weight", 1, D, 0, qkn},
            {LW_POST_NORM, "post_attention_layernorm.weight", 1, H, 0, 1},
            {LW_PRE_FF_NORM, "pre_feedforward_layernorm.weight", 1, H, 0, sw},
            {LW_GATE, "mlp.gate_proj.weight", 2, I, H, 1},
            {LW_GATE_BIAS, "mlp.gate_proj.bias", 1, I, 0, mb},
            {LW_UP, "mlp.up_proj.weight", 2, I, H, 1},
            {LW_UP_BIAS, "mlp.up_proj.bias", 1, I, 0, mb},
            {LW_DOWN, "mlp.down_proj.weight", 2, H, I, 1},
            {LW_DOWN_BIAS, "mlp.down_proj.bias", 1, H, 0, mb},
            {LW_POST_FF_NORM, "post_feedforward_layernorm.weight", 1, H, 0, sw},
        };
        for (int k = 0; k < LW_COUNT; k++) {
            CHECK(lt[k].kind == k, "size table out of order at %d", k);
            if (l == 0) pl->layer_off[k] = -1;
            if (!lt[k].on) continue;
            snprintf(name, sizeof name, "model.layers.%d.%s", l, lt[k].suffix);
            if (l == 0) pl->layer_off[lt[k].kind] = off - start;
            add_tensor(pl, &cap, b, name, lt[k].ndim, lt[k].d0, lt[k].d1, &off);
        }
        if (l == 0) pl->layer_numel = off - start;
    }
    int bf = (int)L + 1;
    pl->block_off[bf] = off;
    add_tensor(pl, &cap, bf, "model.norm.weight", 1, H, 0, &off);
    if (!cfg->tie_word_embeddings) add_tensor(pl, &cap, bf, "lm_head.weight", 2, V, H, &off);
    pl->block_off[pl->n_blocks] = off;
    pl->numel = off;
}

void param_layout_free(param_layout *pl) {
    free(pl->block_off);
    free(pl->tensors);
    memset(pl, 0, sizeof *pl);
}

int param_layout_find(const param_layout *pl, const char *name) {
    for (int i = 0; i < pl->n_tensors; i++)
        if (strcmp(pl->tensors[i].name, name) == 0) return i;
    return -1;
}

void param_set_init(param_set *ps, const param_layout *pl) {
    char what[96];
    snprintf(what, sizeof what, "the model's %lld fp32 parameters", (long long)pl->numel);
    rlc_check_memory((double)pl->numel * sizeof(float), what);   // refused up front, not an allocation failure later
    ps->layout = pl;
    ps->data = rlc_alloc_zero((size_t)pl->numel * sizeof(float));
}

void param_set_free(param_set *ps) {
    rlc_free(ps->data);
    ps->data = NULL;
}

static float *at(const param_layout *pl, float *b, int kind) { return pl->layer_off[kind] < 0 ? NULL : b + pl->layer_off[kind]; }

void param_layer_view(const param_layout *pl, float *b, layer_weights *lw) {
    lw->in_norm = at(pl, b, LW_IN_NORM);
    lw->wq = at(pl, b, LW_Q);
    lw->bq = at(pl, b, LW_Q_BIAS);
    lw->wk = at(pl, b, LW_K);
    lw->bk = at(pl, b, LW_K_BIAS);
    lw->wv = at(pl, b, LW_V);
    lw->bv = at(pl, b, LW_V_BIAS);
    lw->wo = at(pl, b, LW_O);
    lw->bo = at(pl, b, LW_O_BIAS);
    lw->q_norm = at(pl, b, LW_Q_NORM);
    lw->k_norm = at(pl, b, LW_K_NORM);
    lw->post_norm = at(pl, b, LW_POST_NORM);
    lw->pre_ff_norm = at(pl, b, LW_PRE_FF_NORM);
    lw->w_gate = at(pl, b, LW_GATE);
    lw->b_gate = at(pl, b, LW_GATE_BIAS);
    lw->w_up = at(pl, b, LW_UP);
    lw->b_up = at(pl, b, LW_UP_BIAS);
    lw->w_down = at(pl, b, LW_DOWN);
    lw->b_down = at(pl, b, LW_DOWN_BIAS);
    lw->post_ff_norm = at(pl, b, LW_POST_FF_NORM);
}

float *param_embed(const param_set *ps) { return ps->data; }
float *param_final_norm(const param_set *ps) { return param_block(ps, ps->layout->n_blocks - 1); }
float *param_lm_head(const param_set *ps) {
    if (ps->layout->cfg.tie_word_embeddings) return ps->data;
    return param_block(ps, ps->layout->n_blocks - 1) + ps->layout->cfg.hidden_size;
}

// ---- bf16 frozen copy ----------------------------------------------------------------------------------------

void param_bf16_init(param_bf16 *pb, const param_set *ps) {
    memset(pb, 0, sizeof *pb);
    pb->pl = ps->layout;
    const int64_t n = ps->layout->numel;
    pb->w16 = rlc_alloc((size_t)n * sizeof(uint16_t));
    const float *src = ps->data;
    uint16_t *dst = pb->w16;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; i++) dst[i] = bf16_from_f32(src[i]);
    pb->slot_block = -1;
}

void param_bf16_free(param_bf16 *pb) {
    rlc_free(pb->w16);
    rlc_free(pb->first);
    rlc_free(pb->last);
    rlc_free(pb->slot);
    memset(pb, 0, sizeof *pb);
}

static void widen(float *dst, const uint16_t *src, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_f32(src[i]);
}

float *param_bf16_get_block(void *ctx, int b) {
    param_bf16 *pb = ctx;
    const param_layout *pl = pb->pl;
    CHECK(b >= 0 && b < pl->n_blocks, "block %d of %d", b, pl->n_blocks);
    const int64_t off = pl->block_off[b], n = pl->block_off[b + 1] - off;
    if (b == 0 || b == pl->n_blocks - 1) {
        float **p = b == 0 ? &pb->first : &pb->last;
        if (!*p) {
            *p = rlc_alloc((size_t)(n ? n : 1) * sizeof(float));
            widen(*p, pb->w16 + off, n);
        }
        return *p;
    }
    if (pb->slot_block != b) {
        if (!pb->slot) pb->slot = rlc_alloc((size_t)(pl->layer_numel ? pl->layer_numel : 1) * sizeof(float));
        CHECK(n <= pl->layer_numel, "layer block %d: %lld > %lld elements", b, (long long)n, (long long)pl->layer_numel);
        widen(pb->slot, pb->w16 + off, n);
        pb->slot_block = b;
    }
    return pb->slot;
}

int64_t param_bf16_bytes(const param_bf16 *pb) {
    const param_layout *pl = pb->pl;
    int64_t b = pl->numel * (int64_t)sizeof(uint16_t);
    if (pb->first) b += (pl->block_off[1] - pl->block_off[0]) * (int64_t)sizeof(float);
    if (pb->last) b += (pl->block_off[pl->n_blocks] - pl->block_off[pl->n_blocks - 1]) * (int64_t)sizeof(float);
    if (pb->slot) b += pl->layer_numel * (int64_t)sizeof(float);
    return b;
}
