// params.c: the size table that lays Qwen3's parameters out into blocks.
#include "model/params.h"

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
    t->numel = ndim == 2 ? d0 * d1 : d0;
    t->offset = *off;
    t->block = block;
    t->decay = 1;
    *off += t->numel;
}

void param_layout_init(param_layout *pl, const model_config *cfg) {
    memset(pl, 0, sizeof *pl);
    pl->cfg = *cfg;
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
        struct { int kind; const char *suffix; int ndim; int64_t d0, d1; } lt[LW_COUNT] = {
            {LW_IN_NORM, "input_layernorm.weight", 1, H, 0},
            {LW_Q, "self_attn.q_proj.weight", 2, QD, H},
            {LW_K, "self_attn.k_proj.weight", 2, KD, H},
            {LW_V, "self_attn.v_proj.weight", 2, KD, H},
            {LW_O, "self_attn.o_proj.weight", 2, H, QD},
            {LW_Q_NORM, "self_attn.q_norm.weight", 1, D, 0},
            {LW_K_NORM, "self_attn.k_norm.weight", 1, D, 0},
            {LW_POST_NORM, "post_attention_layernorm.weight", 1, H, 0},
            {LW_GATE, "mlp.gate_proj.weight", 2, I, H},
            {LW_UP, "mlp.up_proj.weight", 2, I, H},
            {LW_DOWN, "mlp.down_proj.weight", 2, H, I},
        };
        for (int k = 0; k < LW_COUNT; k++) {
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
    ps->layout = pl;
    ps->data = rlc_alloc_zero((size_t)pl->numel * sizeof(float));
}

void param_set_free(param_set *ps) {
    rlc_free(ps->data);
    ps->data = NULL;
}

void param_layer_view(const param_layout *pl, float *b, layer_weights *lw) {
    lw->in_norm = b + pl->layer_off[LW_IN_NORM];
    lw->wq = b + pl->layer_off[LW_Q];
    lw->wk = b + pl->layer_off[LW_K];
    lw->wv = b + pl->layer_off[LW_V];
    lw->wo = b + pl->layer_off[LW_O];
    lw->q_norm = b + pl->layer_off[LW_Q_NORM];
    lw->k_norm = b + pl->layer_off[LW_K_NORM];
    lw->post_norm = b + pl->layer_off[LW_POST_NORM];
    lw->w_gate = b + pl->layer_off[LW_GATE];
    lw->w_up = b + pl->layer_off[LW_UP];
    lw->w_down = b + pl->layer_off[LW_DOWN];
}

float *param_embed(const param_set *ps) { return ps->data; }
float *param_final_norm(const param_set *ps) { return param_block(ps, ps->layout->n_blocks - 1); }
float *param_lm_head(const param_set *ps) {
    if (ps->layout->cfg.tie_word_embeddings) return ps->data;
    return param_block(ps, ps->layout->n_blocks - 1) + ps->layout->cfg.hidden_size;
}
