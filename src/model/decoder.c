// decoder.c: the dense decoder over packed batches (shared/spec/qwen3.md §1, models.md §4), composed from the
// kernels of kernels.h. Family differences come from the architecture description in model_config: biases of
// the q/k/v/o and MLP products, q/k norms, (1 + w) norms, Gemma 3's sandwich norms, SwiGLU or GeGLU, the
// embedding and attention scales, a RoPE table per layer kind, sliding-window layers and final-logit
// soft-capping. The layer:
//   h1 = norm_in(x);  q, k, v = h1 W^T (+ b);  q, k = rope(qk_norm(q, k));  a = attn(q, k, v)
//   pre-norm (Qwen, Llama, Mistral): x_mid = x + (a Wo^T (+ bo));             h2 = norm_post_attn(x_mid)
//   sandwich (Gemma 3):              x_mid = x + norm_post_attn(a Wo^T (+ bo)); h2 = norm_pre_ff(x_mid)
//   m = act(h2 Wg^T (+ bg)) * (h2 Wu^T (+ bu)) Wd^T (+ bd);  x_out = x_mid + m  (sandwich: + norm_post_ff(m))
// It has forward, a loss-agnostic backward seeded by d(logp) and d(entropy), and activation
// checkpointing (none / selective / full). Matrix products go straight to backend_sgemm where an
// accumulating product (beta = 1) saves a pass over memory (residual adds, summed input gradients).
#include "model/decoder.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/common.h"

// One layer's activations. In mode none every field is the layer's own; in selective/full the fields not
// kept point into one shared scratch layer and are recomputed in the backward.
typedef struct {
    float *x_in;    // (T, H) block input (residual stream)
    float *h1;      // (T, H) input_layernorm(x_in)
    float *rstd1;   // (T)
    float *q_pre;   // (T, nh*D) q_proj(h1), before q_norm
    float *rstd_q;  // (T*nh)
    float *k_pre;   // (T, nkv*D) k_proj(h1), before k_norm
    float *rstd_k;  // (T*nkv)
    float *q;       // (T, nh*D) after q_norm and RoPE
    float *k;       // (T, nkv*D) after k_norm and RoPE
    float *v;       // (T, nkv*D)
    float *attn;    // (T, nh*D) attention output
    float *lse;     // (T, nh) attention log-sum-exp
    float *x_mid;   // (T, H) x_in + o_proj(attn)
    float *h2;      // (T, H) post_attention_layernorm(x_mid)
    float *rstd2;   // (T)
    float *gate;    // (T, I)
    float *up;      // (T, I)
    float *act;     // (T, I) act(gate) * up
    // sandwich norms only (NULL otherwise)
    float *attn_o;  // (T, H) o_proj(attn), the input of post_attention_layernorm
    float *rstd_ao; // (T)
    float *mlp_o;   // (T, H) down(act), the input of post_feedforward_layernorm
    float *rstd_mo; // (T)
    // LoRA only (NULL otherwise): u of projection p at lora_u + p * lora_ld, (T, r) = x·Aᵀ, kept for dA and dB
    float *lora_u;  // (LORA_NPROJ, lora_ld)
    int64_t lora_ld;
} layer_acts;

typedef struct {
    int64_t V, H, I, L, nh, nkv, D, QD, KD;
    float eps;
    float w_off;     // 1 for (1 + w) norms, else 0
    int qk_norm, sandwich;
} dims;

static dims dims_of(const model_config *c) {
    dims d;
    d.V = c->vocab_size; d.H = c->hidden_size; d.I = c->intermediate_size; d.L = c->num_hidden_layers;
    d.nh = c->num_attention_heads; d.nkv = c->num_key_value_heads; d.D = c->head_dim;
    d.QD = d.nh * d.D; d.KD = d.nkv * d.D; d.eps = c->rms_norm_eps;
    d.w_off = c->norm_plus_one ? 1.0f : 0.0f;
    d.qk_norm = c->qk_norm; d.sandwich = c->sandwich_norm;
    return d;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

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

// ---- parallel element-wise helpers -------------------------------------------------------------------

static void copy_par(float *dst, const float *src, int64_t n) {
    if (dst == src) return;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; i++) dst[i] = src[i];
}

static void zero_par(float *dst, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; i++) dst[i] = 0.f;
}

// out (T, OC) (+)= inp (T, C) @ w^T, w (OC, C)
static void mm_fwd(float *out, float beta, const float *inp, const float *w, int64_t T, int64_t C, int64_t OC) {
    backend_sgemm(0, 1, T, OC, C, 1.f, inp, C, w, C, beta, out, OC);
}
// dinp (T, C) (+)= dout (T, OC) @ w (OC, C)
static void mm_bwd_in(float *dinp, float beta, const float *dout, const float *w, int64_t T, int64_t C, int64_t OC) {
    backend_sgemm(0, 0, T, C, OC, 1.f, dout, OC, w, C, beta, dinp, C);
}
// dw (OC, C) += dout^T (OC, T) @ inp (T, C); dw NULL (a frozen base): nothing
static void mm_bwd_w(float *dw, const float *dout, const float *inp, int64_t T, int64_t C, int64_t OC) {
    if (!dw) return;
    backend_sgemm(1, 0, OC, C, T, 1.f, dout, OC, inp, C, 1.f, dw, C);
}

// ---- the inference scratch -------------------------------------------------------------------------------

struct decoder_ws {
    int64_t cap_T;
    char *mem;
    layer_acts la;     // own everything except x_in (the residual stream is ws->x) and attn
    float *x;          // (T, H) residual stream, updated in place
    float *attn;       // (T, nh*D)
    float *lse;        // (T, nh)
    float *rstd_f;     // (T)
    float *hidden;     // (T, H) final-normed hidden of the last inference forward
    int64_t hidden_T;  // tokens in `hidden`
    float *lora_u;     // (LORA_NPROJ, lora_cap) LoRA side-path scratch
    int64_t lora_cap;  // floats per projection
};

static void ws_reserve(const decoder_model *m, int64_t T) {
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

// ---- saved activations -------------------------------------------------------------------------------------

struct decoder_acts {
    model_config cfg;
    int64_t T_max;
    ckpt_mode mode;
    char *mem;
    int64_t bytes;
    layer_acts *la;     // (L)
    layer_acts sc;      // shared scratch layer (selective/full)
    float *x_final;     // (T, H) output of the last block
    float *rstd_f;      // (T)
    float *hidden;      // (T, H) final_norm(x_final)
    float *head_lse;    // (T) log-prob head lse
    float *head_ent;    // (T) entropy of the forward (spares the backward a pass over the vocabulary)
    // frozen head (base_frozen: LoRA): the loss-agnostic per-token gradients the forward saves, so that the backward
    // makes no pass over the vocabulary (logprob_head_forward_frozen). Each allocated (T_max rows) on first use.
    float *head_g;      // (T_max, H) d logp / d hidden
    float *head_ge;     // (T_max, H) d entropy / d hidden: only once a forward computed the entropy
    int have_g, have_ge;
    // backward scratch
    float *dx;          // (T, H) gradient of the residual stream
    float *dh;          // (T, H) gradient of a normed block input
    float *dhid;        // (T, H) gradient of hidden
    float *dA;          // (T, max(I, nh*D)): d(act), then d(attn)
    float *dG;          // (T, max(I, nh*D + 2*nkv*D)): d(gate), then dq | dk | dv
    float *dU;          // (T, max(I, nh*D + nkv*D)): d(up), then dq_pre | dk_pre
    float *dS;          // (T, H) gradient of a sandwich norm's input (sandwich norms only)
    float *lora_mem;    // LoRA: (n, LORA_NPROJ, T_max*r) saved u (n = L in mode none, else 1), then du (T_max*r)
    int64_t lora_numel; // floats in lora_mem
    int lora_fwd;       // the last forward ran the side path
    int64_t T;          // tokens of the last forward
    int have_forward, have_head, have_ent;
    float head_temperature;
    param_set *split_g; // (split_n) the sequence split's private gradients of parts 1.. (allocated on first use)
    int split_n;
};

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

// ---- model ------------------------------------------------------------------------------------------------

void decoder_batch_positions(decoder_batch *b) {
    CHECK(b->n_seqs >= 1, "n_seqs=%d", b->n_seqs);
    CHECK(b->cu_seqlens[0] == 0, "cu_seqlens[0]=%d", b->cu_seqlens[0]);
    CHECK_EQ(b->cu_seqlens[b->n_seqs], b->T, "cu_seqlens[n_seqs] vs T");
    int mx = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        int32_t s0 = b->cu_seqlens[s], s1 = b->cu_seqlens[s + 1];
        CHECK(s1 >= s0, "cu_seqlens not monotonic at %d: %d > %d", s, s0, s1);
        for (int32_t t = s0; t < s1; t++) b->pos[t] = t - s0;
        if (s1 - s0 > mx) mx = s1 - s0;
    }
    b->max_seqlen = mx;
}

void decoder_model_init(decoder_model *m, const param_layout *pl, param_set *params, backend_ctx *be) {
    memset(m, 0, sizeof *m);
    m->pl = pl;
    m->cfg = &pl->cfg;
    m->params = params;
    m->be = be;
    const model_config *c = m->cfg;
    CHECK(c->head_dim % 2 == 0, "head_dim=%d must be even for RoPE", c->head_dim);
    CHECK(c->num_key_value_heads >= 1 && c->num_attention_heads % c->num_key_value_heads == 0, "nh=%d nkv=%d",
          c->num_attention_heads, c->num_key_value_heads);
    rope_table_init_params(&m->rope, c->max_position_embeddings, c->head_dim, &c->rope);
    // a second table only where sliding layers use another RoPE (Gemma 3's local base)
    m->has_rope_local = memcmp(&c->rope, &c->rope_local, sizeof c->rope) != 0;
    if (m->has_rope_local) rope_table_init_params(&m->rope_local, c->max_position_embeddings, c->head_dim, &c->rope_local);
    m->block_w = rlc_calloc((size_t)pl->n_blocks, sizeof(float *));
    if (params)
        for (int b = 0; b < pl->n_blocks; b++) m->block_w[b] = param_block(params, b);
    m->ws = rlc_calloc(1, sizeof *m->ws);
}

void decoder_model_free(decoder_model *m) {
    rope_table_free(&m->rope);
    if (m->has_rope_local) rope_table_free(&m->rope_local);
    free(m->block_w);
    if (m->ws) { rlc_free(m->ws->mem); rlc_free(m->ws->lora_u); }
    free(m->ws);
    memset(m, 0, sizeof *m);
}

void decoder_set_lora(decoder_model *m, const lora_layout *ll, float *w, float *g) {
    if (ll) {
        CHECK(ll->L == m->cfg->num_hidden_layers && ll->pl.cfg.hidden_size == m->cfg->hidden_size &&
                  ll->pl.cfg.intermediate_size == m->cfg->intermediate_size,
              "adapters built for another model (%d layers)", ll->L);
        CHECK(w, "adapter weights");
    }
    m->lora = ll;
    m->lora_w = ll ? w : NULL;
    m->lora_grad = ll ? g : NULL;
    m->lora_on = ll != NULL;
    m->base_frozen = ll != NULL;
}

void decoder_lora_enable(decoder_model *m, int on) { m->lora_on = m->lora && on; }

static int lora_active(const decoder_model *m) { return m->lora && m->lora_on; }

// The inference scratch's side-path buffers for T tokens.
static void ws_lora(const decoder_model *m, int64_t T) {
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

// Point each layer's lora_u into a->lora_mem (grown for this rank) when the side path runs.
static void acts_lora(const decoder_model *m, decoder_acts *a) {
    a->lora_fwd = lora_active(m);
    if (!a->lora_fwd) return;
    const int64_t r = m->lora->rank, per = LORA_NPROJ * a->T_max * r, nl = a->mode == CKPT_NONE ? a->cfg.num_hidden_layers : 1;
    const int64_t need = nl * per + a->T_max * r;
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

// y (T, out) += s·(x·Aᵀ)·Bᵀ for projection p of layer l, keeping u (T, r) = x·Aᵀ in la (y NULL: only u).
// Nothing where the side path is off or p is not adapted in layer l.
static void lora_fwd(const decoder_model *m, const layer_acts *la, int l, int p, float *y, const float *x, int64_t T) {
    if (!lora_active(m)) return;
    const lora_layout *ll = m->lora;
    const int64_t i = (int64_t)l * LORA_NPROJ + p;
    if (ll->a_off[i] < 0) return;
    const int64_t r = ll->rank, in = ll->in[p], out = ll->out[p];
    float *u = la->lora_u + p * la->lora_ld;
    backend_sgemm(0, 1, T, r, in, 1.f, x, in, m->lora_w + ll->a_off[i], in, 0.f, u, r);             // u (T, r) = x·Aᵀ
    if (y) backend_sgemm(0, 1, T, out, r, ll->scale, u, r, m->lora_w + ll->b_off[i], r, 1.f, y, out);   // y += s·u·Bᵀ
}

// Given dy (T, out) of projection p: dB += s·dyᵀ·u; du = s·dy·B; dA += duᵀ·x; dx (T, in) += du·A. du: (T, r) scratch.
static void lora_bwd(const decoder_model *m, const layer_acts *la, float *du, int l, int p, float *dx, const float *dy,
                     const float *x, int64_t T) {
    if (!lora_active(m)) return;
    const lora_layout *ll = m->lora;
    const int64_t i = (int64_t)l * LORA_NPROJ + p;
    if (ll->a_off[i] < 0) return;
    const int64_t r = ll->rank, in = ll->in[p], out = ll->out[p];
    const float *u = la->lora_u + p * la->lora_ld, *A = m->lora_w + ll->a_off[i], *B = m->lora_w + ll->b_off[i];
    if (m->lora_grad) backend_sgemm(1, 0, out, r, T, ll->scale, dy, out, u, r, 1.f, m->lora_grad + ll->b_off[i], r);
    backend_sgemm(0, 0, T, r, out, ll->scale, dy, out, B, r, 0.f, du, r);
    if (m->lora_grad) backend_sgemm(1, 0, r, in, T, 1.f, du, r, x, in, 1.f, m->lora_grad + ll->a_off[i], in);
    backend_sgemm(0, 0, T, in, r, 1.f, du, r, A, in, 1.f, dx, in);
}

static float *block_ptr(const decoder_model *m, int b) {
    float *p = m->get_block ? m->get_block(m->get_block_ctx, b) : m->block_w[b];
    CHECK(p, "no weights for block %d (set decoder_model.block_w or get_block)", b);
    return p;
}
static void layer_view(const decoder_model *m, int l, layer_weights *lw) { param_layer_view(m->pl, block_ptr(m, 1 + l), lw); }
static const float *embed_w(const decoder_model *m) { return block_ptr(m, 0); }
static const float *final_norm_w(const decoder_model *m) { return block_ptr(m, m->pl->n_blocks - 1); }
// The gradient buffer of block b (decoder_model.get_grad_block, or the grads set).
static float *grad_block(const decoder_model *m, param_set *grads, int b) {
    float *p = m->get_grad_block ? m->get_grad_block(m->grad_ctx, b) : param_block(grads, b);
    CHECK(p, "no gradient buffer for block %d", b);
    return p;
}
static void grad_done(const decoder_model *m, int b) {
    if (m->grad_block_done) m->grad_block_done(m->grad_ctx, b);
}
const float *decoder_lm_head(const decoder_model *m) {
    if (m->cfg->tie_word_embeddings) return block_ptr(m, 0);
    return block_ptr(m, m->pl->n_blocks - 1) + m->cfg->hidden_size;
}

const rope_table *decoder_rope(const decoder_model *m, int layer) {
    return m->has_rope_local && m->cfg->layer_types[layer] == LAYER_SLIDING ? &m->rope_local : &m->rope;
}
int decoder_layer_window(const model_config *c, int layer) {
    return c->layer_types[layer] == LAYER_SLIDING ? c->sliding_window : 0;
}

// h1, q_pre/k_pre (with q/k norms), q/k (normed + RoPE), v of layer l from la->x_in.
static void layer_qkv(const decoder_model *m, int l, const layer_weights *lw, layer_acts *la, const int32_t *pos, int64_t T) {
    dims d = dims_of(m->cfg);
    const rope_table *rt = decoder_rope(m, l);
    rmsnorm_forward_off(la->h1, la->rstd1, la->x_in, lw->in_norm, d.w_off, T, d.H, d.eps);
    float *qp = d.qk_norm ? la->q_pre : la->q, *kp = d.qk_norm ? la->k_pre : la->k;
    mm_fwd(qp, 0.f, la->h1, lw->wq, T, d.H, d.QD);
    mm_fwd(kp, 0.f, la->h1, lw->wk, T, d.H, d.KD);
    mm_fwd(la->v, 0.f, la->h1, lw->wv, T, d.H, d.KD);
    lora_fwd(m, la, l, LORA_Q, qp, la->h1, T);
    lora_fwd(m, la, l, LORA_K, kp, la->h1, T);
    lora_fwd(m, la, l, LORA_V, la->v, la->h1, T);
    if (lw->bq) {
        bias_forward(qp, lw->bq, T, d.QD);
        bias_forward(kp, lw->bk, T, d.KD);
        bias_forward(la->v, lw->bv, T, d.KD);
    }
    if (d.qk_norm) {
        rmsnorm_forward_off(la->q, la->rstd_q, la->q_pre, lw->q_norm, d.w_off, T * d.nh, d.D, d.eps);
        rmsnorm_forward_off(la->k, la->rstd_k, la->k_pre, lw->k_norm, d.w_off, T * d.nkv, d.D, d.eps);
    }
    rope_forward(la->q, pos, rt, T, d.nh);
    rope_forward(la->k, pos, rt, T, d.nkv);
}

// x_mid = x_in + o_proj(attn) (sandwich: + post_attn_norm(o_proj(attn))); h2 = the pre-MLP norm of x_mid;
// act = glu(gate, up); x_out = x_mid + down(act) (sandwich: + post_ff_norm(down(act))). x_out NULL: stop after
// act, as the backward's recompute needs. x_mid/x_out may alias x_in.
static void layer_out(const decoder_model *m, int l, const layer_weights *lw, layer_acts *la, float *x_out, int64_t T) {
    dims d = dims_of(m->cfg);
    if (d.sandwich) {
        mm_fwd(la->attn_o, 0.f, la->attn, lw->wo, T, d.QD, d.H);
        lora_fwd(m, la, l, LORA_O, la->attn_o, la->attn, T);
        if (lw->bo) bias_forward(la->attn_o, lw->bo, T, d.H);
        rmsnorm_forward_off(la->h2, la->rstd_ao, la->attn_o, lw->post_norm, d.w_off, T, d.H, d.eps);   // h2: scratch here
        residual_forward(la->x_mid, la->x_in, la->h2, T * d.H);
        rmsnorm_forward_off(la->h2, la->rstd2, la->x_mid, lw->pre_ff_norm, d.w_off, T, d.H, d.eps);
    } else {
        copy_par(la->x_mid, la->x_in, T * d.H);
        mm_fwd(la->x_mid, 1.f, la->attn, lw->wo, T, d.QD, d.H);
        lora_fwd(m, la, l, LORA_O, la->x_mid, la->attn, T);
        if (lw->bo) bias_forward(la->x_mid, lw->bo, T, d.H);
        rmsnorm_forward_off(la->h2, la->rstd2, la->x_mid, lw->post_norm, d.w_off, T, d.H, d.eps);
    }
    mm_fwd(la->gate, 0.f, la->h2, lw->w_gate, T, d.H, d.I);
    mm_fwd(la->up, 0.f, la->h2, lw->w_up, T, d.H, d.I);
    lora_fwd(m, la, l, LORA_GATE, la->gate, la->h2, T);
    lora_fwd(m, la, l, LORA_UP, la->up, la->h2, T);
    if (lw->b_gate) {
        bias_forward(la->gate, lw->b_gate, T, d.I);
        bias_forward(la->up, lw->b_up, T, d.I);
    }
    glu_forward(la->act, la->gate, la->up, T * d.I, m->cfg->hidden_act);
    if (!x_out) return;
    if (d.sandwich) {
        mm_fwd(la->mlp_o, 0.f, la->act, lw->w_down, T, d.I, d.H);
        lora_fwd(m, la, l, LORA_DOWN, la->mlp_o, la->act, T);
        if (lw->b_down) bias_forward(la->mlp_o, lw->b_down, T, d.H);
        float *tmp = x_out == la->x_mid ? la->attn_o : x_out;   // attn_o is spent when the stream is updated in place
        rmsnorm_forward_off(tmp, la->rstd_mo, la->mlp_o, lw->post_ff_norm, d.w_off, T, d.H, d.eps);
        residual_forward(x_out, tmp, la->x_mid, T * d.H);
    } else {
        copy_par(x_out, la->x_mid, T * d.H);
        mm_fwd(x_out, 1.f, la->act, lw->w_down, T, d.I, d.H);
        lora_fwd(m, la, l, LORA_DOWN, x_out, la->act, T);
        if (lw->b_down) bias_forward(x_out, lw->b_down, T, d.H);
    }
}

static void layer_attention(const decoder_model *m, int l, layer_acts *la, const decoder_batch *b) {
    dims d = dims_of(m->cfg);
    attention_forward_sw(la->attn, la->lse, la->q, la->k, la->v, b->cu_seqlens, b->n_seqs, (int)d.nh, (int)d.nkv, (int)d.D,
                         m->cfg->attn_scale, decoder_layer_window(m->cfg, l));
}

static void layer_forward(const decoder_model *m, int l, const layer_weights *lw, layer_acts *la, float *x_out,
                          const decoder_batch *b, int do_attn) {
    layer_qkv(m, l, lw, la, b->pos, b->T);
    if (do_attn) layer_attention(m, l, la, b);
    layer_out(m, l, lw, la, x_out, b->T);
}

// x (T, H) = embed_tokens[tokens] * embed_scale
static void embed(const decoder_model *m, float *x, const int32_t *tokens, int64_t T) {
    const int64_t H = m->cfg->hidden_size;
    embedding_forward(x, tokens, embed_w(m), T, H);
    const float sc = m->cfg->embed_scale;
    if (sc != 1.0f) {
#pragma omp parallel for schedule(static) if (T * H > (1 << 16))
        for (int64_t i = 0; i < T * H; i++) x[i] *= sc;
    }
}

static void check_batch(const decoder_model *m, const decoder_batch *b) {
    CHECK(b->T >= 1, "empty batch (T=%lld)", (long long)b->T);
    CHECK(b->max_seqlen >= 1 && b->max_seqlen <= m->rope.max_pos, "max_seqlen=%d (call decoder_batch_positions; limit %d)",
          b->max_seqlen, m->rope.max_pos);
    CHECK_EQ(b->cu_seqlens[b->n_seqs], b->T, "cu_seqlens[n_seqs] vs T");
    const int V = m->cfg->vocab_size;
    for (int64_t t = 0; t < b->T; t++)
        CHECK(b->tokens[t] >= 0 && b->tokens[t] < V, "token %d at %lld outside vocab [0, %d)", b->tokens[t], (long long)t, V);
}


// ---- sequence split (small models) -----------------------------------------------------------------------
// At a small model's shapes (hidden 128-256) each kernel or sgemm over a packed batch is some tens of
// microseconds of work, and threading each one on its own (a fork/join per kernel, OpenBLAS's hand-off per
// sgemm) costs about as much as the work. Every piece of a layer is local to a token row (norms, products,
// RoPE, activations) or to a sequence (attention), so the batch is cut instead at sequence boundaries into one
// contiguous part per thread, and each thread runs its part through every layer: one parallel region per
// forward, head or backward, the kernels inside on the calling thread (their own parallel regions are nested,
// hence one thread; OpenBLAS runs single-threaded inside a parallel region). Weight gradients of part k > 0
// go to a private buffer, added to the caller's in part order after the region. Parts depend on the batch and
// the thread count only, so results do too (as the threaded kernels' do), never on timing.

#define SPLIT_MAX_PARAMS ((int64_t)16 << 20)   // automatic split up to 16M parameters (a private gradient per thread)
#define SPLIT_MAX_IMBALANCE 1.5                // ... and only where no part exceeds 1.5x an even share of tokens

// Part boundaries st (n_parts + 1 sequence indices, st[0] = 0, st[n_parts] = n_seqs): each boundary the sequence
// start closest to an even share of tokens, at least one sequence a part. NULL where the batch stays whole:
// one thread, already inside a parallel region, fewer sequences than threads, adapters attached (on or off: the
// side path shares its buffers, and a reference pass with the adapters off stays bitwise the policy's at B = 0)
// or a data-parallel seam (callbacks that must run on the calling thread), a large model, or a lopsided split.
static int *split_plan(const decoder_model *m, const decoder_batch *b, int for_backward, int *n_parts) {
    const int mode = m->be ? m->be->row_split : 0;
    const int nth = omp_get_max_threads();
    if (mode < 0 || nth < 2 || omp_in_parallel() || b->n_seqs < nth) return NULL;
    if (m->lora || m->get_block || (for_backward && (m->base_frozen || m->get_grad_block || m->grad_block_done)))
        return NULL;
    if (mode == 0 && m->pl->numel > SPLIT_MAX_PARAMS) return NULL;
    const int32_t *cu = b->cu_seqlens;
    int *st = rlc_malloc(((size_t)nth + 1) * sizeof(int));
    st[0] = 0;
    int64_t worst = 0;
    for (int k = 1; k < nth; k++) {
        const double target = (double)b->T * k / nth;
        int s = st[k - 1] + 1;
        const int smax = b->n_seqs - (nth - k);
        while (s < smax && fabs(cu[s + 1] - target) <= fabs(cu[s] - target)) s++;
        st[k] = s;
    }
    st[nth] = b->n_seqs;
    for (int k = 0; k < nth; k++) worst = max64(worst, cu[st[k + 1]] - cu[st[k]]);
    if (mode == 0 && (double)worst > SPLIT_MAX_IMBALANCE * (double)b->T / nth) {
        free(st);
        return NULL;
    }
    *n_parts = nth;
    return st;
}

// Part k of batch b: its sequences, with cu_seqlens rebased into cu_buf (n_seqs + n_parts + 1 entries, shared
// by the parts: part k's at st[k] + k).
static decoder_batch part_batch(const decoder_batch *b, const int *st, int k, int32_t *cu_buf) {
    const int s0 = st[k], s1 = st[k + 1];
    const int32_t r0 = b->cu_seqlens[s0];
    int32_t *cu = cu_buf + s0 + k;
    for (int s = s0; s <= s1; s++) cu[s - s0] = b->cu_seqlens[s] - r0;
    decoder_batch pb = {.T = b->cu_seqlens[s1] - r0, .n_seqs = s1 - s0, .tokens = b->tokens + r0, .cu_seqlens = cu,
                        .pos = b->pos + r0, .max_seqlen = b->max_seqlen};
    return pb;
}

// dst = the rows from r0 on of every per-token buffer of src (all are row-major over tokens).
static void layer_rows(layer_acts *dst, const layer_acts *src, const dims *d, int64_t r0) {
#define ROWS(f, w) dst->f = src->f ? src->f + r0 * (w) : NULL
    ROWS(x_in, d->H); ROWS(h1, d->H); ROWS(rstd1, 1); ROWS(q_pre, d->QD); ROWS(rstd_q, d->nh); ROWS(k_pre, d->KD);
    ROWS(rstd_k, d->nkv); ROWS(q, d->QD); ROWS(k, d->KD); ROWS(v, d->KD); ROWS(attn, d->QD); ROWS(lse, d->nh);
    ROWS(x_mid, d->H); ROWS(h2, d->H); ROWS(rstd2, 1); ROWS(gate, d->I); ROWS(up, d->I); ROWS(act, d->I);
    ROWS(attn_o, d->H); ROWS(rstd_ao, 1); ROWS(mlp_o, d->H); ROWS(rstd_mo, 1);
#undef ROWS
    dst->lora_u = NULL;   // the split never runs the side path
    dst->lora_ld = 0;
}

// dst = the view of a from row r0 on; la (L) receives the layers' views.
static void acts_rows(decoder_acts *dst, const decoder_acts *a, layer_acts *la, int64_t r0) {
    const dims d = dims_of(&a->cfg);
    *dst = *a;
    dst->la = la;
    for (int64_t l = 0; l < d.L; l++) layer_rows(&la[l], &a->la[l], &d, r0);
    layer_rows(&dst->sc, &a->sc, &d, r0);
    dst->x_final = a->x_final + r0 * d.H;
    dst->rstd_f = a->rstd_f + r0;
    dst->hidden = a->hidden + r0 * d.H;
    dst->head_lse = a->head_lse + r0;
    dst->head_ent = a->head_ent + r0;
    dst->head_g = a->head_g ? a->head_g + r0 * d.H : NULL;
    dst->head_ge = a->head_ge ? a->head_ge + r0 * d.H : NULL;
    dst->dx = a->dx + r0 * d.H;
    dst->dh = a->dh + r0 * d.H;
    dst->dhid = a->dhid + r0 * d.H;
    dst->dA = a->dA + r0 * max64(d.I, d.QD);
    dst->dG = a->dG + r0 * max64(d.I, d.QD + 2 * d.KD);
    dst->dU = a->dU + r0 * max64(d.I, d.QD + d.KD);
    dst->dS = a->dS ? a->dS + r0 * d.H : NULL;
    dst->lora_fwd = 0;
}

// The forward of decoder_forward, part by part: saved activations in a, or the inference scratch (a NULL).
static void forward_split(const decoder_model *m, decoder_acts *a, const decoder_batch *b, const int *st, int np) {
    const dims d = dims_of(m->cfg);
    int32_t *cu_buf = rlc_malloc(((size_t)b->n_seqs + (size_t)np + 1) * sizeof(int32_t));
#pragma omp parallel for schedule(static, 1) num_threads(np)
    for (int k = 0; k < np; k++) {
        const decoder_batch pb = part_batch(b, st, k, cu_buf);
        const int64_t r0 = b->cu_seqlens[st[k]];
        layer_weights lw;
        if (a) {
            decoder_acts al;
            layer_acts *la = rlc_malloc((size_t)d.L * sizeof(layer_acts));
            acts_rows(&al, a, la, r0);
            embed(m, la[0].x_in, pb.tokens, pb.T);
            for (int l = 0; l < d.L; l++) {
                layer_view(m, l, &lw);
                layer_forward(m, l, &lw, &la[l], l + 1 < d.L ? la[l + 1].x_in : al.x_final, &pb, 1);
            }
            rmsnorm_forward_off(al.hidden, al.rstd_f, al.x_final, final_norm_w(m), d.w_off, pb.T, d.H, d.eps);
            free(la);
        } else {
            decoder_ws *ws = m->ws;
            layer_acts whole = ws->la, la;
            whole.x_in = whole.x_mid = ws->x;
            whole.attn = ws->attn;
            whole.lse = ws->lse;
            layer_rows(&la, &whole, &d, r0);
            embed(m, la.x_in, pb.tokens, pb.T);
            for (int l = 0; l < d.L; l++) {
                layer_view(m, l, &lw);
                layer_forward(m, l, &lw, &la, la.x_in, &pb, 1);
            }
            rmsnorm_forward_off(ws->hidden + r0 * d.H, ws->rstd_f + r0, la.x_in, final_norm_w(m), d.w_off, pb.T, d.H, d.eps);
        }
    }
    free(cu_buf);
}

void decoder_forward(decoder_model *m, decoder_acts *a, const decoder_batch *b, float *hidden) {
    check_batch(m, b);
    dims d = dims_of(m->cfg);
    const int64_t T = b->T;
    layer_weights lw;
    float *hid;
    int np = 0;
    int *st = split_plan(m, b, 0, &np);
    if (a) {
        CHECK(T <= a->T_max, "batch of %lld tokens > acts T_max %lld", (long long)T, (long long)a->T_max);
        CHECK(a->cfg.hidden_size == d.H && a->cfg.num_hidden_layers == d.L, "acts built for another config");
        a->have_forward = a->have_head = a->have_g = a->have_ge = 0;
        acts_lora(m, a);
        if (st) forward_split(m, a, b, st, np);
        else {
            embed(m, a->la[0].x_in, b->tokens, T);
            for (int l = 0; l < d.L; l++) {
                layer_view(m, l, &lw);
                float *x_out = l + 1 < d.L ? a->la[l + 1].x_in : a->x_final;
                layer_forward(m, l, &lw, &a->la[l], x_out, b, 1);
            }
            rmsnorm_forward_off(a->hidden, a->rstd_f, a->x_final, final_norm_w(m), d.w_off, T, d.H, d.eps);
        }
        a->T = T;
        a->have_forward = 1;
        hid = a->hidden;
    } else {
        ws_reserve(m, T);
        ws_lora(m, T);
        decoder_ws *ws = m->ws;
        if (st) forward_split(m, NULL, b, st, np);
        else {
            layer_acts la = ws->la;
            la.x_in = la.x_mid = ws->x;
            la.attn = ws->attn;
            la.lse = ws->lse;
            embed(m, ws->x, b->tokens, T);
            for (int l = 0; l < d.L; l++) {
                layer_view(m, l, &lw);
                layer_forward(m, l, &lw, &la, ws->x, b, 1);
            }
            rmsnorm_forward_off(ws->hidden, ws->rstd_f, ws->x, final_norm_w(m), d.w_off, T, d.H, d.eps);
        }
        ws->hidden_T = T;
        hid = ws->hidden;
    }
    free(st);
    if (hidden) copy_par(hidden, hid, T * d.H);
}

// Allocate (T_max, H) for *p on first use (the frozen head's saved gradients), counted in a->bytes.
static float *acts_head_buf(decoder_acts *a, float **p) {
    if (!*p) {
        const int64_t n = a->T_max * (int64_t)a->cfg.hidden_size;
        *p = rlc_alloc((size_t)n * sizeof(float));
        a->bytes += n * (int64_t)sizeof(float);
    }
    return *p;
}

// The head's forward over T rows: the frozen head's (saving g, ge) when g is given, else the plain one.
static void head_fwd(const decoder_model *m, float *logp, float *entropy, float *lse, float *g, float *ge, const float *hid,
                     const int32_t *targets, int64_t T, float temperature) {
    const dims d = dims_of(m->cfg);
    if (g)
        logprob_head_forward_frozen(logp, entropy, lse, g, ge, hid, decoder_lm_head(m), targets, T, d.H, d.V, temperature,
                                    m->cfg->final_logit_softcapping);
    else
        logprob_head_forward_cap(logp, entropy, lse, hid, decoder_lm_head(m), targets, T, d.H, d.V, temperature,
                                 m->cfg->final_logit_softcapping);
}

// The head's backward over a's T rows: d(hidden) into a->dhid (zeroed here), d(lm_head) into g_head (NULL: frozen).
// A frozen head whose forward saved g applies it; an entropy gradient the forward saved no ge for goes through
// the recomputing backward (dlogp's part stays with g). A trained head always takes the recomputing backward.
static void head_bwd(const decoder_model *m, decoder_acts *a, float *g_head, const float *dlogp, const float *dentropy,
                     const int32_t *targets, int64_t T, float temperature) {
    const dims d = dims_of(m->cfg);
    zero_par(a->dhid, T * d.H);
    if (!g_head && a->have_g) {
        int ent = 0;
        if (dentropy && !a->have_ge)
            for (int64_t t = 0; t < T && !ent; t++) ent = dentropy[t] != 0.0f;
        logprob_head_backward_frozen(a->dhid, dlogp, a->have_ge ? dentropy : NULL, a->head_g, a->have_ge ? a->head_ge : NULL,
                                     T, d.H);
        if (ent)
            logprob_head_backward_cap(a->dhid, NULL, NULL, dentropy, a->have_ent ? a->head_ent : NULL, a->hidden,
                                      decoder_lm_head(m), targets, a->head_lse, T, d.H, d.V, temperature,
                                      m->cfg->final_logit_softcapping);
        return;
    }
    logprob_head_backward_cap(a->dhid, g_head, dlogp, dentropy, a->have_ent ? a->head_ent : NULL, a->hidden, decoder_lm_head(m),
                              targets, a->head_lse, T, d.H, d.V, temperature, m->cfg->final_logit_softcapping);
}

void decoder_logprob(decoder_model *m, decoder_acts *a, const decoder_batch *b, const int32_t *targets, float temperature,
                   float *logp, float *entropy) {
    dims d = dims_of(m->cfg);
    CHECK(temperature > 0 && isfinite(temperature), "temperature=%g", temperature);
    const float *hid;
    float *lse = NULL;
    if (a) {
        CHECK(a->have_forward && a->T == b->T, "decoder_logprob needs decoder_forward on the same batch first");
        hid = a->hidden;
        lse = a->head_lse;
    } else {
        CHECK(m->ws->hidden_T == b->T, "decoder_logprob needs decoder_forward(m, NULL, ...) on the same batch first");
        hid = m->ws->hidden;
    }
    for (int64_t t = 0; t < b->T; t++)
        CHECK(targets[t] < d.V, "target %d at %lld outside vocab [0, %lld)", targets[t], (long long)t, (long long)d.V);
    // A training forward (acts) of a frozen head also saves d logp / d hidden (and d entropy / d hidden when the
    // entropy is computed): the backward is then one multiply-add per token. Inference (a NULL) pays nothing.
    float *g = NULL, *ge = NULL;
    if (a && m->base_frozen) {
        g = acts_head_buf(a, &a->head_g);
        ge = entropy ? acts_head_buf(a, &a->head_ge) : NULL;
    }
    int np = 0;
    int *st = split_plan(m, b, 0, &np);
    if (st) {   // one head call per part, each on its own thread
#pragma omp parallel for schedule(static, 1) num_threads(np)
        for (int k = 0; k < np; k++) {
            const int64_t r0 = b->cu_seqlens[st[k]], n = b->cu_seqlens[st[k + 1]] - r0;
            head_fwd(m, logp + r0, entropy ? entropy + r0 : NULL, lse ? lse + r0 : NULL, g ? g + r0 * d.H : NULL,
                     ge ? ge + r0 * d.H : NULL, hid + r0 * d.H, targets + r0, n, temperature);
        }
        free(st);
    } else {
        head_fwd(m, logp, entropy, lse, g, ge, hid, targets, b->T, temperature);
    }
    if (a) {
        a->have_g = g != NULL;
        a->have_ge = ge != NULL;
        a->have_head = 1;
        a->have_ent = entropy != NULL;
        if (entropy) copy_par(a->head_ent, entropy, b->T);
        a->head_temperature = temperature;
    }
}

static void backward_from_hidden(decoder_model *m, decoder_acts *a, const decoder_batch *b, param_set *grads);

// The head's seed of the backward: d loss / d logp and d entropy at the given targets and temperature.
typedef struct {
    const int32_t *targets;
    float temperature;
    const float *dlogp, *dentropy;   // (T), (T) or NULL
} head_seed;

// The backward, part by part (see "sequence split"): from the head (hs) or from a->dhid already seeded (hs NULL).
// Part 0 accumulates into grads, part k > 0 into a->split_g[k - 1], zeroed here and added to grads afterwards.
static void backward_split(decoder_model *m, decoder_acts *a, const decoder_batch *b, const int *st, int np,
                           param_set *grads, const head_seed *hs) {
    const dims d = dims_of(m->cfg);
    const int nb = m->pl->n_blocks, tied = m->cfg->tie_word_embeddings;
    const int64_t numel = m->pl->numel;
    if (a->split_n < np - 1) {
        a->split_g = rlc_realloc(a->split_g, (size_t)(np - 1) * sizeof(param_set));
        for (int i = a->split_n; i < np - 1; i++) param_set_init(&a->split_g[i], m->pl);
        a->bytes += (int64_t)(np - 1 - a->split_n) * numel * (int64_t)sizeof(float);
        a->split_n = np - 1;
    }
    int32_t *cu_buf = rlc_malloc(((size_t)b->n_seqs + (size_t)np + 1) * sizeof(int32_t));
#pragma omp parallel for schedule(static, 1) num_threads(np)
    for (int k = 0; k < np; k++) {
        param_set *g = k == 0 ? grads : &a->split_g[k - 1];
        if (k > 0) memset(g->data, 0, (size_t)numel * sizeof(float));
        const decoder_batch pb = part_batch(b, st, k, cu_buf);
        const int64_t r0 = b->cu_seqlens[st[k]];
        decoder_acts al;
        layer_acts *la = rlc_malloc((size_t)d.L * sizeof(layer_acts));
        acts_rows(&al, a, la, r0);
        if (hs) {
            float *g_head = m->base_frozen ? NULL : tied ? param_block(g, 0) : param_block(g, nb - 1) + d.H;
            head_bwd(m, &al, g_head, hs->dlogp + r0, hs->dentropy ? hs->dentropy + r0 : NULL, hs->targets + r0, pb.T,
                     hs->temperature);
        }
        backward_from_hidden(m, &al, &pb, g);
        free(la);
    }
    free(cu_buf);
    // grads += the other parts' gradients, in part order
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < numel; i++) {
        float s = a->split_g[0].data[i];
        for (int k = 1; k < np - 1; k++) s += a->split_g[k].data[i];
        grads->data[i] += s;
    }
}

void decoder_backward(decoder_model *m, decoder_acts *a, const decoder_batch *b, const int32_t *targets, float temperature,
                    const float *dlogp, const float *dentropy, param_set *grads) {
    CHECK(a && a->have_forward && a->have_head && a->T == b->T,
          "decoder_backward needs decoder_forward and decoder_logprob with acts on the same batch first");
    CHECK(temperature == a->head_temperature, "temperature %g != forward's %g", temperature, a->head_temperature);
    const int frozen = m->base_frozen;
    CHECK(frozen || m->get_grad_block || (grads && grads->layout->numel == m->pl->numel), "grads layout: %lld != %lld elements",
          grads ? (long long)grads->layout->numel : -1LL, (long long)m->pl->numel);
    CHECK(a->lora_fwd == lora_active(m), "the LoRA side path was %s in the forward but is %s now", a->lora_fwd ? "on" : "off",
          lora_active(m) ? "on" : "off");
    dims d = dims_of(m->cfg);
    const int nb = m->pl->n_blocks, tied = m->cfg->tie_word_embeddings;
    const int64_t T = b->T, H = d.H;
    int np = 0;
    int *st = split_plan(m, b, 1, &np);
    if (st) {
        const head_seed hs = {targets, temperature, dlogp, dentropy};
        backward_split(m, a, b, st, np, grads, &hs);
        free(st);
        return;
    }

    // head, then the rest
    // a frozen base gets no gradient: only d(hidden) flows, through the base and the side path
    float *g_head = frozen ? NULL : tied ? grad_block(m, grads, 0) : grad_block(m, grads, nb - 1) + H;
    head_bwd(m, a, g_head, dlogp, dentropy, targets, T, temperature);
    backward_from_hidden(m, a, b, grads);
}

void decoder_backward_hidden(decoder_model *m, decoder_acts *a, const decoder_batch *b, const float *dhidden, param_set *grads) {
    CHECK(a && a->have_forward && a->T == b->T, "decoder_backward_hidden needs decoder_forward with acts on the same batch first");
    CHECK(m->base_frozen || m->get_grad_block || (grads && grads->layout->numel == m->pl->numel),
          "grads layout: %lld != %lld elements", grads ? (long long)grads->layout->numel : -1LL, (long long)m->pl->numel);
    CHECK(a->lora_fwd == lora_active(m), "the LoRA side path was %s in the forward but is %s now", a->lora_fwd ? "on" : "off",
          lora_active(m) ? "on" : "off");
    memcpy(a->dhid, dhidden, sizeof(float) * (size_t)(b->T * m->cfg->hidden_size));
    int np = 0;
    int *st = split_plan(m, b, 1, &np);
    if (st) {
        backward_split(m, a, b, st, np, grads, NULL);
        free(st);
        return;
    }
    backward_from_hidden(m, a, b, grads);
}

// The backward below the output head, seeded by a->dhid (T, H) = d loss / d final-normed hidden.
static void backward_from_hidden(decoder_model *m, decoder_acts *a, const decoder_batch *b, param_set *grads) {
    dims d = dims_of(m->cfg);
    const int nb = m->pl->n_blocks;
    const int64_t T = b->T, H = d.H, I = d.I, QD = d.QD, KD = d.KD;
    const int nh = (int)d.nh, nkv = (int)d.nkv, D = (int)d.D;
    const int frozen = m->base_frozen;
    float *dx = a->dx, *dh = a->dh;
    rmsnorm_backward_off_set(dx, frozen ? NULL : grad_block(m, grads, nb - 1), a->dhid, a->x_final, final_norm_w(m), d.w_off, a->rstd_f,
                         T, H);
    if (!frozen) grad_done(m, nb - 1);

    layer_weights lw, gw;
    float *du = a->lora_fwd ? a->lora_mem + a->lora_numel - a->T_max * m->lora->rank : NULL;   // (T, r) side-path scratch
    for (int l = (int)d.L - 1; l >= 0; l--) {
        layer_view(m, l, &lw);
        if (frozen) memset(&gw, 0, sizeof gw);   // every base gradient pointer NULL: the kernels skip them
        else param_layer_view(m->pl, grad_block(m, grads, 1 + l), &gw);
        layer_acts *la = &a->la[l];
        if (a->mode != CKPT_NONE) {
            layer_forward(m, l, &lw, la, NULL, b, a->mode == CKPT_FULL);
            if (!d.sandwich) lora_fwd(m, la, l, LORA_DOWN, NULL, la->act, T);   // the recompute stopped before down's u
        }
        const rope_table *rt = decoder_rope(m, l);

        // MLP: x_out = x_mid + down(act(gate) * up) (sandwich: + post_ff_norm(down(...)))
        const float *dmo = dx;   // d loss / d down(act)
        if (d.sandwich) {
            if (a->mode != CKPT_NONE) {   // the recompute stopped at act: mlp_o and its rstd are needed here
                mm_fwd(la->mlp_o, 0.f, la->act, lw.w_down, T, I, H);
                lora_fwd(m, la, l, LORA_DOWN, la->mlp_o, la->act, T);
                if (lw.b_down) bias_forward(la->mlp_o, lw.b_down, T, H);
                rmsnorm_forward_off(a->dh, la->rstd_mo, la->mlp_o, lw.post_ff_norm, d.w_off, T, H, d.eps);
            }
            rmsnorm_backward_off_set(a->dS, gw.post_ff_norm, dx, la->mlp_o, lw.post_ff_norm, d.w_off, la->rstd_mo, T, H);
            dmo = a->dS;
        }
        float *dact = a->dA, *dgate = a->dG, *dup = a->dU;
        mm_bwd_in(dact, 0.f, dmo, lw.w_down, T, I, H);
        lora_bwd(m, la, du, l, LORA_DOWN, dact, dmo, la->act, T);
        mm_bwd_w(gw.w_down, dmo, la->act, T, I, H);
        if (gw.b_down) bias_backward(gw.b_down, dmo, T, H);
        glu_backward_set(dgate, dup, dact, la->gate, la->up, T * I, m->cfg->hidden_act);
        if (gw.b_gate) {
            bias_backward(gw.b_gate, dgate, T, I);
            bias_backward(gw.b_up, dup, T, I);
        }
        mm_bwd_in(dh, 0.f, dgate, lw.w_gate, T, H, I);
        mm_bwd_in(dh, 1.f, dup, lw.w_up, T, H, I);
        lora_bwd(m, la, du, l, LORA_GATE, dh, dgate, la->h2, T);
        lora_bwd(m, la, du, l, LORA_UP, dh, dup, la->h2, T);
        mm_bwd_w(gw.w_gate, dgate, la->h2, T, H, I);
        mm_bwd_w(gw.w_up, dup, la->h2, T, H, I);
        if (d.sandwich) rmsnorm_backward_off(dx, gw.pre_ff_norm, dh, la->x_mid, lw.pre_ff_norm, d.w_off, la->rstd2, T, H);
        else rmsnorm_backward_off(dx, gw.post_norm, dh, la->x_mid, lw.post_norm, d.w_off, la->rstd2, T, H);

        // attention: x_mid = x_in + o_proj(attn(rope(qk_norm(q)), rope(qk_norm(k)), v)) (sandwich: post_attn_norm(o_proj))
        const float *dao = dx;   // d loss / d o_proj(attn)
        if (d.sandwich) {
            rmsnorm_backward_off_set(a->dS, gw.post_norm, dx, la->attn_o, lw.post_norm, d.w_off, la->rstd_ao, T, H);
            dao = a->dS;
        }
        float *dattn = a->dA;
        float *dq = a->dG, *dk = a->dG + T * QD, *dv = a->dG + T * (QD + KD);
        mm_bwd_in(dattn, 0.f, dao, lw.wo, T, QD, H);
        lora_bwd(m, la, du, l, LORA_O, dattn, dao, la->attn, T);
        mm_bwd_w(gw.wo, dao, la->attn, T, QD, H);
        if (gw.bo) bias_backward(gw.bo, dao, T, H);
        zero_par(a->dG, T * (QD + 2 * KD));
        attention_backward_sw(dq, dk, dv, dattn, la->attn, la->lse, la->q, la->k, la->v, b->cu_seqlens, b->n_seqs, nh, nkv, D,
                              m->cfg->attn_scale, decoder_layer_window(m->cfg, l));
        rope_backward(dq, b->pos, rt, T, nh);
        rope_backward(dk, b->pos, rt, T, nkv);
        float *dqp = dq, *dkp = dk;   // d loss / d q_proj(h1), k_proj(h1)
        if (d.qk_norm) {
            dqp = a->dU;
            dkp = a->dU + T * QD;
            rmsnorm_backward_off_set(dqp, gw.q_norm, dq, la->q_pre, lw.q_norm, d.w_off, la->rstd_q, T * nh, D);
            rmsnorm_backward_off_set(dkp, gw.k_norm, dk, la->k_pre, lw.k_norm, d.w_off, la->rstd_k, T * nkv, D);
        }
        if (gw.bq) {
            bias_backward(gw.bq, dqp, T, QD);
            bias_backward(gw.bk, dkp, T, KD);
            bias_backward(gw.bv, dv, T, KD);
        }
        mm_bwd_in(dh, 0.f, dqp, lw.wq, T, H, QD);
        mm_bwd_in(dh, 1.f, dkp, lw.wk, T, H, KD);
        mm_bwd_in(dh, 1.f, dv, lw.wv, T, H, KD);
        lora_bwd(m, la, du, l, LORA_Q, dh, dqp, la->h1, T);
        lora_bwd(m, la, du, l, LORA_K, dh, dkp, la->h1, T);
        lora_bwd(m, la, du, l, LORA_V, dh, dv, la->h1, T);
        mm_bwd_w(gw.wq, dqp, la->h1, T, H, QD);
        mm_bwd_w(gw.wk, dkp, la->h1, T, H, KD);
        mm_bwd_w(gw.wv, dv, la->h1, T, H, KD);
        rmsnorm_backward_off(dx, gw.in_norm, dh, la->x_in, lw.in_norm, d.w_off, la->rstd1, T, H);
        if (!frozen) grad_done(m, 1 + l);
    }
    if (frozen) return;   // the embedding is frozen too
    // x = embed_tokens[tokens] * embed_scale
    if (m->cfg->embed_scale != 1.0f) {
        const float sc = m->cfg->embed_scale;
#pragma omp parallel for schedule(static) if (T * H > (1 << 16))
        for (int64_t i = 0; i < T * H; i++) dx[i] *= sc;
    }
    embedding_backward(grad_block(m, grads, 0), dx, b->tokens, T, H);
    grad_done(m, 0);
}

// ---- per-layer pieces for the rollout engine ------------------------------------------------------------------

void decoder_layer_qkv(const decoder_model *m, int layer, const float *x, const int32_t *pos, int64_t T, float *q, float *k,
                     float *v) {
    CHECK(layer >= 0 && layer < m->cfg->num_hidden_layers, "layer %d", layer);
    for (int64_t t = 0; t < T; t++) CHECK(pos[t] >= 0 && pos[t] < m->rope.max_pos, "pos[%lld]=%d", (long long)t, pos[t]);
    ws_reserve(m, T);
    ws_lora(m, T);
    layer_weights lw;
    layer_view(m, layer, &lw);
    layer_acts la = m->ws->la;
    la.x_in = (float *)x;   // read only
    la.q = q;
    la.k = k;
    la.v = v;
    layer_qkv(m, layer, &lw, &la, pos, T);
}

void decoder_layer_out(const decoder_model *m, int layer, float *x, const float *attn, int64_t T) {
    CHECK(layer >= 0 && layer < m->cfg->num_hidden_layers, "layer %d", layer);
    ws_reserve(m, T);
    ws_lora(m, T);
    layer_weights lw;
    layer_view(m, layer, &lw);
    layer_acts la = m->ws->la;
    la.x_in = la.x_mid = x;
    la.attn = (float *)attn;   // read only
    layer_out(m, layer, &lw, &la, x, T);
}

void decoder_final_norm(const decoder_model *m, float *hidden, const float *x, int64_t T) {
    ws_reserve(m, T);
    rmsnorm_forward_off(hidden, m->ws->rstd_f, x, final_norm_w(m), m->cfg->norm_plus_one ? 1.0f : 0.0f, T,
                        m->cfg->hidden_size, m->cfg->rms_norm_eps);
}

void decoder_embed(const decoder_model *m, float *x, const int32_t *tokens, int64_t T) {
    for (int64_t t = 0; t < T; t++)
        CHECK(tokens[t] >= 0 && tokens[t] < m->cfg->vocab_size, "token %d at %lld outside vocab", tokens[t], (long long)t);
    embed(m, x, tokens, T);
}

void decoder_logits(const decoder_model *m, float *logits, const float *hidden, int64_t T) {
    logits_forward(logits, hidden, decoder_lm_head(m), T, m->cfg->hidden_size, m->cfg->vocab_size);
    logits_softcap(logits, T * m->cfg->vocab_size, m->cfg->final_logit_softcapping);
}
