// decoder_internal.h: the decoder's internal structures (a layer's activations, the inference scratch, the saved
// activations) and the helpers its files share, for src/model/decoder*.c only. decoder.c holds the model and the
// forward, decoder_acts.c the buffers' layout and sizes, decoder_head.c the log-prob head, decoder_backward.c the
// backward and decoder_split.c the sequence split of small models.
#pragma once
#include <stdint.h>

#include "core/common.h"
#include "model/decoder.h"

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

static inline dims dims_of(const model_config *c) {
    dims d;
    d.V = c->vocab_size; d.H = c->hidden_size; d.I = c->intermediate_size; d.L = c->num_hidden_layers;
    d.nh = c->num_attention_heads; d.nkv = c->num_key_value_heads; d.D = c->head_dim;
    d.QD = d.nh * d.D; d.KD = d.nkv * d.D; d.eps = c->rms_norm_eps;
    d.w_off = c->norm_plus_one ? 1.0f : 0.0f;
    d.qk_norm = c->qk_norm; d.sandwich = c->sandwich_norm;
    return d;
}

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// ---- parallel element-wise helpers and the products --------------------------------------------------------

static inline void copy_par(float *dst, const float *src, int64_t n) {
    if (dst == src) return;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; i++) dst[i] = src[i];
}

static inline void zero_par(float *dst, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; i++) dst[i] = 0.f;
}

// out (T, OC) (+)= inp (T, C) @ w^T, w (OC, C)
static inline void mm_fwd(float *out, float beta, const float *inp, const float *w, int64_t T, int64_t C, int64_t OC) {
    backend_sgemm(0, 1, T, OC, C, 1.f, inp, C, w, C, beta, out, OC);
}
// dinp (T, C) (+)= dout (T, OC) @ w (OC, C)
static inline void mm_bwd_in(float *dinp, float beta, const float *dout, const float *w, int64_t T, int64_t C, int64_t OC) {
    backend_sgemm(0, 0, T, C, OC, 1.f, dout, OC, w, C, beta, dinp, C);
}
// dw (OC, C) += dout^T (OC, T) @ inp (T, C); dw NULL (a frozen base): nothing
static inline void mm_bwd_w(float *dw, const float *dout, const float *inp, int64_t T, int64_t C, int64_t OC) {
    if (!dw) return;
    backend_sgemm(1, 0, OC, C, T, 1.f, dout, OC, inp, C, 1.f, dw, C);
}

// ---- the inference scratch and the saved activations -------------------------------------------------------

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

// ---- weights and gradients of a block -----------------------------------------------------------------------

static inline float *block_ptr(const decoder_model *m, int b) {
    float *p = m->get_block ? m->get_block(m->get_block_ctx, b) : m->block_w[b];
    CHECK(p, "no weights for block %d (set decoder_model.block_w or get_block)", b);
    return p;
}
static inline void layer_view(const decoder_model *m, int l, layer_weights *lw) { param_layer_view(m->pl, block_ptr(m, 1 + l), lw); }
static inline const float *embed_w(const decoder_model *m) { return block_ptr(m, 0); }
static inline const float *final_norm_w(const decoder_model *m) { return block_ptr(m, m->pl->n_blocks - 1); }
// The gradient buffer of block b (decoder_model.get_grad_block, or the grads set).
static inline float *grad_block(const decoder_model *m, param_set *grads, int b) {
    float *p = m->get_grad_block ? m->get_grad_block(m->grad_ctx, b) : param_block(grads, b);
    CHECK(p, "no gradient buffer for block %d", b);
    return p;
}
static inline void grad_done(const decoder_model *m, int b) {
    if (m->grad_block_done) m->grad_block_done(m->grad_ctx, b);
}

static inline int lora_active(const decoder_model *m) { return m->lora && m->lora_on; }

// The head's seed of the backward: d loss / d logp and d entropy at the given targets and temperature.
typedef struct {
    const int32_t *targets;
    float temperature;
    const float *dlogp, *dentropy;   // (T), (T) or NULL
} head_seed;

// ---- decoder_acts.c ---------------------------------------------------------------------------------------------
// The inference scratch for T tokens (grown, never shrunk).
void dec_ws_reserve(const decoder_model *m, int64_t T);
// The inference scratch's side-path buffers for T tokens.
void dec_ws_lora(const decoder_model *m, int64_t T);
// Point each layer's lora_u into a->lora_mem (grown for this rank) when the side path runs.
void dec_acts_lora(const decoder_model *m, decoder_acts *a);
// Allocate (T_max, H) for *p on first use (the frozen head's saved gradients), counted in a->bytes.
float *dec_acts_head_buf(decoder_acts *a, float **p);

// ---- decoder.c ----------------------------------------------------------------------------------------------------
// y (T, out) += s·(x·Aᵀ)·Bᵀ for projection p of layer l, keeping u (T, r) = x·Aᵀ in la (y NULL: only u).
void dec_lora_fwd(const decoder_model *m, const layer_acts *la, int l, int p, float *y, const float *x, int64_t T);
// Layer l over batch b from la->x_in into x_out (NULL: stop after the MLP's act); do_attn 0 keeps la's attention.
void dec_layer_forward(const decoder_model *m, int l, const layer_weights *lw, layer_acts *la, float *x_out,
                       const decoder_batch *b, int do_attn);
// x (T, H) = embed_tokens[tokens] * embed_scale
void dec_embed(const decoder_model *m, float *x, const int32_t *tokens, int64_t T);

// ---- decoder_head.c -----------------------------------------------------------------------------------------------
// The head's backward over a's T rows: d(hidden) into a->dhid, d(lm_head) into g_head (NULL: frozen).
void dec_head_bwd(const decoder_model *m, decoder_acts *a, float *g_head, const float *dlogp, const float *dentropy,
                  const int32_t *targets, int64_t T, float temperature);

// ---- decoder_backward.c -------------------------------------------------------------------------------------------
// The backward below the output head, seeded by a->dhid (T, H) = d loss / d final-normed hidden.
void dec_backward_from_hidden(decoder_model *m, decoder_acts *a, const decoder_batch *b, param_set *grads);

// ---- decoder_split.c ----------------------------------------------------------------------------------------------
// Part boundaries (n_parts + 1 sequence indices) of batch b, or NULL where the batch stays whole.
int *dec_split_plan(const decoder_model *m, const decoder_batch *b, int for_backward, int *n_parts);
// The forward of decoder_forward, part by part: saved activations in a, or the inference scratch (a NULL).
void dec_forward_split(const decoder_model *m, decoder_acts *a, const decoder_batch *b, const int *st, int np);
// The backward, part by part: from the head (hs) or from a->dhid already seeded (hs NULL).
void dec_backward_split(decoder_model *m, decoder_acts *a, const decoder_batch *b, const int *st, int np,
                        param_set *grads, const head_seed *hs);
