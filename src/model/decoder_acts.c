// decoder_acts.c: where the decoder's buffers live and how big they are. The saved activations of a micro-batch
// (decoder_acts: each layer's own buffers or, under checkpointing, views of one shared scratch layer, plus the
// backward's scratch) are carved out of one allocation, laid out by the same walk that counts their bytes, so the
// size query and the allocation cannot disagree; the LoRA side path's and the frozen head's buffers, allocated on
// first use, are counted here too. The inference scratch (decoder_ws) grows on demand for the forward without
// saved state and the rollout engine's per-layer pieces.
#include <string.h>

#include "core/common.h"
#include "model/decoder_internal.h"

// Carve n floats (64-byte aligned) off *cur; with *cur == NULL only counts bytes.
static float *carve(char **cur, int64_t n, int64_t *bytes) {
    int64_t b = (n * (int64_t)sizeof(float) + 63) & ~(int64_t)63;
    *bytes += b;
    if (!*cur) return NULL;
    float *p = (float *)*cur;
    *cur += b;
    return p;
}

// Carve a layer's own buffers: the block input (own_x_in), attention output + lse (own_attn), and the rest.
static void carve_layer(layer_acts *la, char **cur, int64_t *bytes, const dims *d, int64_t T, int own_x_in, int own_attn,
                        int own_rest) {
    if (own_x_in) la->x_in = carve(cur, T * d->H, bytes);
    if (own_attn) {
        la->attn = carve(cur, T * d->QD, bytes);
        la->lse = carve(cur, T * d->nh, bytes);
    }
    if (!own_rest) return;
    la->h1 = carve(cur, T * d->H, bytes);
    la->rstd1 = carve(cur, T, bytes);
    if (d->qk_norm) {   // without q/k norms the projections land in q and k directly
        la->q_pre = carve(cur, T * d->QD, bytes);
        la->rstd_q = carve(cur, T * d->nh, bytes);
        la->k_pre = carve(cur, T * d->KD, bytes);
        la->rstd_k = carve(cur, T * d->nkv, bytes);
    }
    if (d->sandwich) {
        la->attn_o = carve(cur, T * d->H, bytes);
        la->rstd_ao = carve(cur, T, bytes);
        la->mlp_o = carve(cur, T * d->H, bytes);
        la->rstd_mo = carve(cur, T, bytes);
    }
    la->q = carve(cur, T * d->QD, bytes);
    la->k = carve(cur, T * d->KD, bytes);
    la->v = carve(cur, T * d->KD, bytes);
    la->x_mid = carve(cur, T * d->H, bytes);
    la->h2 = carve(cur, T * d->H, bytes);
    la->rstd2 = carve(cur, T, bytes);
    la->gate = carve(cur, T * d->I, bytes);
    la->up = carve(cur, T * d->I, bytes);
    la->act = carve(cur, T * d->I, bytes);
}

// Point every field of dst at the shared scratch layer sc, except its own x_in (and attn/lse if keep_attn).
static void share_scratch(layer_acts *dst, const layer_acts *sc, int keep_attn) {
    float *x_in = dst->x_in, *attn = dst->attn, *lse = dst->lse;
    *dst = *sc;
    dst->x_in = x_in;
    if (keep_attn) { dst->attn = attn; dst->lse = lse; }
}

// ---- the inference scratch -------------------------------------------------------------------------------

void dec_ws_reserve(const decoder_model *m, int64_t T) {
    decoder_ws *ws = m->ws;
    if (T <= ws->cap_T) return;
    dims d = dims_of(m->cfg);
    int64_t cap = max64(T, 2 * ws->cap_T);
    rlc_free(ws->mem);
    int64_t bytes = 0;
    char *cur = NULL;
    for (int pass = 0; pass < 2; pass++) {
        memset(&ws->la, 0, sizeof ws->la);
        carve_layer(&ws->la, &cur, &bytes, &d, cap, 0, 0, 1);
        ws->x = carve(&cur, cap * d.H, &bytes);
        ws->attn = carve(&cur, cap * d.QD, &bytes);
        ws->lse = carve(&cur, cap * d.nh, &bytes);
        ws->rstd_f = carve(&cur, cap, &bytes);
        ws->hidden = carve(&cur, cap * d.H, &bytes);
        if (pass == 0) { ws->mem = rlc_alloc((size_t)bytes); cur = ws->mem; bytes = 0; }
    }
    ws->cap_T = cap;
    ws->hidden_T = 0;
}

// The inference scratch's side-path buffers for T tokens.
void dec_ws_lora(const decoder_model *m, int64_t T) {
    decoder_ws *ws = m->ws;
    ws->la.lora_u = NULL;
    if (!lora_active(m)) return;
    int64_t need = T * m->lora->rank;
    if (need > ws->lora_cap) {
        rlc_free(ws->lora_u);
        ws->lora_cap = max64(need, 2 * ws->lora_cap);
        ws->lora_u = rlc_alloc((size_t)(LORA_NPROJ * ws->lora_cap) * sizeof(float));
    }
    ws->la.lora_u = ws->lora_u;
    ws->la.lora_ld = ws->lora_cap;
}

// ---- saved activations -------------------------------------------------------------------------------------

const char *decoder_ckpt_name(ckpt_mode mode) {
    return mode == CKPT_NONE ? "none" : mode == CKPT_SELECTIVE ? "selective" : mode == CKPT_FULL ? "full" : "?";
}
int decoder_ckpt_parse(const char *s, ckpt_mode *mode) {
    if (!strcmp(s, "none")) *mode = CKPT_NONE;
    else if (!strcmp(s, "selective")) *mode = CKPT_SELECTIVE;
    else if (!strcmp(s, "full")) *mode = CKPT_FULL;
    else return -1;
    return 0;
}

// Lay out (cur == NULL: count) every buffer of `a` for T_max tokens.
static int64_t acts_layout(decoder_acts *a, char *cur) {
    dims d = dims_of(&a->cfg);
    const int64_t T = a->T_max;
    int64_t bytes = 0;
    memset(&a->sc, 0, sizeof a->sc);
    if (a->mode != CKPT_NONE) carve_layer(&a->sc, &cur, &bytes, &d, T, 0, 1, 1);
    for (int64_t l = 0; l < d.L; l++) {
        layer_acts *la = &a->la[l];
        memset(la, 0, sizeof *la);
        if (a->mode == CKPT_NONE) carve_layer(la, &cur, &bytes, &d, T, 1, 1, 1);
        else {
            int keep_attn = a->mode == CKPT_SELECTIVE;
            carve_layer(la, &cur, &bytes, &d, T, 1, keep_attn, 0);
            share_scratch(la, &a->sc, keep_attn);
        }
    }
    a->x_final = carve(&cur, T * d.H, &bytes);
    a->rstd_f = carve(&cur, T, &bytes);
    a->hidden = carve(&cur, T * d.H, &bytes);
    a->head_lse = carve(&cur, T, &bytes);
    a->head_ent = carve(&cur, T, &bytes);
    a->dx = carve(&cur, T * d.H, &bytes);
    a->dh = carve(&cur, T * d.H, &bytes);
    a->dhid = carve(&cur, T * d.H, &bytes);
    a->dA = carve(&cur, T * max64(d.I, d.QD), &bytes);
    a->dG = carve(&cur, T * max64(d.I, d.QD + 2 * d.KD), &bytes);
    a->dU = carve(&cur, T * max64(d.I, d.QD + d.KD), &bytes);
    a->dS = d.sandwich ? carve(&cur, T * d.H, &bytes) : NULL;
    return bytes;
}

int64_t decoder_acts_bytes_for(const model_config *cfg, int64_t T_max, ckpt_mode mode) {
    decoder_acts a;
    memset(&a, 0, sizeof a);
    a.cfg = *cfg;
    a.T_max = T_max;
    a.mode = mode;
    a.la = rlc_calloc((size_t)cfg->num_hidden_layers, sizeof(layer_acts));
    int64_t bytes = acts_layout(&a, NULL) + (int64_t)sizeof a + (int64_t)cfg->num_hidden_layers * (int64_t)sizeof(layer_acts);
    free(a.la);
    return bytes;
}

// Floats of the side path's buffer for rank r: the saved u of every layer (mode none) or of the one layer the
// backward recomputes at a time, each (LORA_NPROJ, T_max*r), then du (T_max*r).
static int64_t acts_lora_numel(const model_config *cfg, int64_t T_max, ckpt_mode mode, int64_t r) {
    const int64_t nl = mode == CKPT_NONE ? cfg->num_hidden_layers : 1;
    return nl * (LORA_NPROJ * T_max * r) + T_max * r;
}

int64_t decoder_acts_bytes_for_lora(const model_config *cfg, int64_t T_max, ckpt_mode mode, int lora_rank) {
    CHECK(lora_rank >= 0, "lora_rank=%d", lora_rank);
    int64_t bytes = decoder_acts_bytes_for(cfg, T_max, mode);
    if (lora_rank == 0) return bytes;
    bytes += acts_lora_numel(cfg, T_max, mode, lora_rank) * (int64_t)sizeof(float);   // lora_mem (dec_acts_lora)
    bytes += 2 * T_max * (int64_t)cfg->hidden_size * (int64_t)sizeof(float);         // head_g, head_ge
    return bytes;
}

decoder_acts *decoder_acts_new(const model_config *cfg, int64_t T_max, ckpt_mode mode) {
    CHECK(T_max >= 1, "T_max=%lld", (long long)T_max);
    CHECK(mode == CKPT_NONE || mode == CKPT_SELECTIVE || mode == CKPT_FULL, "mode=%d", (int)mode);
    decoder_acts *a = rlc_calloc(1, sizeof *a);
    a->cfg = *cfg;
    a->T_max = T_max;
    a->mode = mode;
    a->la = rlc_calloc((size_t)cfg->num_hidden_layers, sizeof(layer_acts));
    int64_t bytes = acts_layout(a, NULL);
    a->mem = rlc_alloc((size_t)bytes);
    acts_layout(a, a->mem);
    a->bytes = bytes + (int64_t)sizeof *a + (int64_t)cfg->num_hidden_layers * (int64_t)sizeof(layer_acts);
    return a;
}

void decoder_acts_free(decoder_acts *a) {
    if (!a) return;
    rlc_free(a->mem);
    rlc_free(a->lora_mem);
    rlc_free(a->head_g);
    rlc_free(a->head_ge);
    for (int i = 0; i < a->split_n; i++) param_set_free(&a->split_g[i]);
    free(a->split_g);
    free(a->la);
    free(a);
}

int64_t decoder_acts_bytes(const decoder_acts *a) { return a->bytes; }
const float *decoder_acts_dhidden(const decoder_acts *a) { return a->dhid; }

// Point each layer's lora_u into a->lora_mem (grown for this rank) when the side path runs.
void dec_acts_lora(const decoder_model *m, decoder_acts *a) {
    a->lora_fwd = lora_active(m);
    if (!a->lora_fwd) return;
    const int64_t r = m->lora->rank, per = LORA_NPROJ * a->T_max * r;
    const int64_t need = acts_lora_numel(&a->cfg, a->T_max, a->mode, r);
    if (need > a->lora_numel) {
        rlc_free(a->lora_mem);
        a->bytes += (need - a->lora_numel) * (int64_t)sizeof(float);
        a->lora_mem = rlc_alloc((size_t)need * sizeof(float));
        a->lora_numel = need;
    }
    for (int l = 0; l < a->cfg.num_hidden_layers; l++) {
        a->la[l].lora_u = a->lora_mem + (a->mode == CKPT_NONE ? l : 0) * per;
        a->la[l].lora_ld = a->T_max * r;
    }
}

// Allocate (T_max, H) for *p on first use (the frozen head's saved gradients), counted in a->bytes.
float *dec_acts_head_buf(decoder_acts *a, float **p) {
    if (!*p) {
        const int64_t n = a->T_max * (int64_t)a->cfg.hidden_size;
        *p = rlc_alloc((size_t)n * sizeof(float));
        a->bytes += n * (int64_t)sizeof(float);
    }
    return *p;
}
