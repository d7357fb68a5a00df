// kernels.h: the layer kernels of the decoder (every family of model_config), forward/backward pairs.
//
// Conventions (llm.c style):
// - X_forward(out, saved..., in..., weights..., dims) and X_backward(din, dw, dout, saved/in..., dims).
// - Outputs first. Backward ACCUMULATES (+=) into din and dw, so micro-batches and residual branches
//   add up without extra buffers; callers zero gradient buffers when starting fresh.
// - Each kernel has a plain reference X_forward_ref / X_backward_ref with the same signature: it is
//   the test oracle and is never used on a hot path.
// - Tokens are a packed stream of T tokens = many sequences back to back, described by cu_seqlens
//   (n_seqs+1 start offsets, cu[0]=0, cu[n]=T). Positions restart at 0 in each sequence.
// - Element counts and offsets are int64_t. Row-major everywhere; weights are HF [out, in].
#pragma once

// Element count below which the small row-wise kernels run on the calling thread: a fork/join of the team costs
// about what 16K simple element operations do, and at decode (1 token) every layer runs several such kernels.
// Results do not depend on it (rows and elements are computed the same way on any thread).
#define KERNELS_PAR_MIN 16384
#include <stdint.h>

#include "model/config.h"

// ---- matmul: out (T, OC) = inp (T, C) @ w^T, w (OC, C) -----------------------------------------------
void matmul_forward(float *out, const float *inp, const float *w, int64_t T, int64_t C, int64_t OC);
void matmul_forward_ref(float *out, const float *inp, const float *w, int64_t T, int64_t C, int64_t OC);
// dinp (T, C) += dout @ w;  dw (OC, C) += dout^T @ inp. Either may be NULL to skip it.
void matmul_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                     int64_t T, int64_t C, int64_t OC);
void matmul_backward_ref(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                         int64_t T, int64_t C, int64_t OC);

// ---- embedding: out (T, H) = wte[tokens] --------------------------------------------------------------
void embedding_forward(float *out, const int32_t *tokens, const float *wte, int64_t T, int64_t H);
// dwte (V, H) += scatter-add of dout rows. Deterministic (no atomics; independent of thread count).
void embedding_backward(float *dwte, const float *dout, const int32_t *tokens, int64_t T, int64_t H);

// ---- RMSNorm over rows of width C: out = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps) --------------------
// Also used for the per-head q/k norms: rows = T*n_heads, C = head_dim. rstd: (rows), saved for backward.
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, int64_t rows, int64_t C, float eps);
void rmsnorm_forward_ref(float *out, float *rstd, const float *inp, const float *w, int64_t rows, int64_t C, float eps);
// dinp (rows, C) += ..., dw (C) += ... (dw reduction deterministic for a fixed thread count)
void rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                      const float *rstd, int64_t rows, int64_t C);
void rmsnorm_backward_ref(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                          const float *rstd, int64_t rows, int64_t C);
// The same with the weight (w_off + w): w_off 1 is Gemma's x_hat * (1 + w) in fp32 (the weight stored as an
// offset from 1); w_off 0 is the plain norm above.
void rmsnorm_forward_off(float *out, float *rstd, const float *inp, const float *w, float w_off, int64_t rows, int64_t C,
                         float eps);
void rmsnorm_forward_off_ref(float *out, float *rstd, const float *inp, const float *w, float w_off, int64_t rows,
                             int64_t C, float eps);
void rmsnorm_backward_off(float *dinp, float *dw, const float *dout, const float *inp, const float *w, float w_off,
                          const float *rstd, int64_t rows, int64_t C);
void rmsnorm_backward_off_ref(float *dinp, float *dw, const float *dout, const float *inp, const float *w, float w_off,
                              const float *rstd, int64_t rows, int64_t C);
// dinp (rows, C) = (written, not accumulated) the gradient rmsnorm_backward_off adds, dw (C) += as there: bitwise
// zeroing dinp and then rmsnorm_backward_off (the _ref), without the zeroing pass.
void rmsnorm_backward_off_set(float *dinp, float *dw, const float *dout, const float *inp, const float *w, float w_off,
                              const float *rstd, int64_t rows, int64_t C);
void rmsnorm_backward_off_set_ref(float *dinp, float *dw, const float *dout, const float *inp, const float *w, float w_off,
                                  const float *rstd, int64_t rows, int64_t C);

// ---- RoPE, half-split (rotate_half), theta from the config ------------------------------------------------
// A table of cos/sin for positions 0..max_pos-1, each row D/2 wide (emb = [f, f] so half suffices),
// computed as transformers does in float32: inv_freq[i] = 1/(theta^(2i/D)), freq = p*inv_freq.
typedef struct {
    int max_pos;
    int head_dim;     // D
    float *cos;       // (max_pos, D/2)
    float *sin;       // (max_pos, D/2)
} rope_table;
void rope_table_init(rope_table *rt, int max_pos, int head_dim, double theta);
void rope_table_free(rope_table *rt);
// inv_freq (head_dim/2) exactly as torch 1.13 (CPU) computes it in float32; used by rope_table_init.
void rope_inv_freq(float *inv_freq, int head_dim, double theta);
// inv_freq (head_dim/2) of a RoPE type (default, linear, dynamic, llama3, yarn), in transformers' float32 order.
void rope_inv_freq_params(float *inv_freq, int head_dim, const rope_params *rp);
// A table from rope_params: its inv_freq, with cos and sin multiplied by rp->attention_factor (yarn).
void rope_table_init_params(rope_table *rt, int max_pos, int head_dim, const rope_params *rp);
// x (T, n_heads, D) rotated in place by pos (T).
void rope_forward(float *x, const int32_t *pos, const rope_table *rt, int64_t T, int64_t n_heads);
// dx (T, n_heads, D): in place, the gradient through the rotation (its transpose).
void rope_backward(float *dx, const int32_t *pos, const rope_table *rt, int64_t T, int64_t n_heads);

// ---- SwiGLU: out = silu(gate) * up, elementwise over n ------------------------------------------------------
void swiglu_forward(float *out, const float *gate, const float *up, int64_t n);
void swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n);
void swiglu_forward_ref(float *out, const float *gate, const float *up, int64_t n);
// ---- GeGLU (Gemma): out = gelu_tanh(gate) * up, gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) --
void geglu_forward(float *out, const float *gate, const float *up, int64_t n);
void geglu_forward_ref(float *out, const float *gate, const float *up, int64_t n);
// dgate, dup (n) +=
void geglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n);
void geglu_backward_ref(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n);
// The architecture's gated activation (SwiGLU or GeGLU), forward and backward (+=).
void glu_forward(float *out, const float *gate, const float *up, int64_t n, mlp_act act);
void glu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n, mlp_act act);
// dgate, dup (n) = (written, not accumulated) the gradients glu_backward adds: bitwise zeroing both and then
// glu_backward (the _ref), in one pass.
void glu_backward_set(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n, mlp_act act);
void glu_backward_set_ref(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n,
                          mlp_act act);

// ---- linear-layer biases: out (T, OC) += b (OC); db (OC) += column sums of dout (T, OC) ---------------------
void bias_forward(float *out, const float *b, int64_t T, int64_t OC);
// deterministic for any thread count (fixed row chunks summed in order)
void bias_backward(float *db, const float *dout, int64_t T, int64_t OC);
void bias_backward_ref(float *db, const float *dout, int64_t T, int64_t OC);

// ---- residual add: out = a + b (out may alias a) ----------------------------------------------------------
void residual_forward(float *out, const float *a, const float *b, int64_t n);

// ---- attention: packed, causal within each sequence, GQA ----------------------------------------------------
// q (T, nh*D), k/v (T, nkv*D) after q/k norm and RoPE; out (T, nh*D); lse (T, nh) = per-row
// log-sum-exp of the scaled scores (natural log), saved for the backward. Query head h uses kv head
// h / (nh/nkv). Scale = D^-0.5.
// attention_forward is flash-attention-2 style: blocked over queries and keys with an online softmax,
// visiting only the key blocks a query block can see (same sequence, causal); no T x T buffer.
void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                       const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int D);
// Dense reference: materialises each sequence's (len x len) score matrix. Tests only.
void attention_forward_ref(float *out, float *lse, const float *q, const float *k, const float *v,
                           const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int D);
// dq (T, nh*D), dk/dv (T, nkv*D) +=. Recomputes scores blockwise from q, k and lse; no T x T buffer.
void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                        const float *q, const float *k, const float *v,
                        const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int D);
void attention_backward_ref(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                            const float *q, const float *k, const float *v,
                            const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int D);
// The same with the softmax scale given (Gemma 3: query_pre_attn_scalar^-1/2) and a sliding window: with
// window > 0 query i sees keys j with i - window < j <= i of its own sequence (HF masking_utils), and a query
// block visits only the key blocks that reach into its window; window 0 is plain causal attention.
void attention_forward_sw(float *out, float *lse, const float *q, const float *k, const float *v,
                          const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int D, float scale, int window);
void attention_forward_sw_ref(float *out, float *lse, const float *q, const float *k, const float *v,
                              const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int D, float scale, int window);
void attention_backward_sw(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                           const float *q, const float *k, const float *v, const int32_t *cu_seqlens, int n_seqs, int nh,
                           int nkv, int D, float scale, int window);
void attention_backward_sw_ref(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                               const float *q, const float *k, const float *v, const int32_t *cu_seqlens, int n_seqs,
                               int nh, int nkv, int D, float scale, int window);

// ---- fused log-prob / entropy head ----------------------------------------------------------------------
// z = (hidden @ w^T) / temperature over the vocabulary, streamed in chunks of tokens and of the
// vocabulary with an online log-sum-exp: the (T, V) logits never exist.
// logp (T) = z[target] - lse;  entropy (T) = lse - sum_j p_j z_j (may be NULL);  lse (T) saved for
// backward (may be NULL in inference). target < 0 means "no target": logp = 0 for that row.
void logprob_head_forward(float *logp, float *entropy, float *lse, const float *hidden, const float *w,
                          const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature);
void logprob_head_forward_ref(float *logp, float *entropy, float *lse, const float *hidden, const float *w,
                              const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature);
// Seeded by dlogp (T) = d loss / d logp and dentropy (T) = d loss / d entropy (NULL = zero).
// dhidden (T, H) +=, dw (V, H) += ; recomputes logits chunk by chunk from the saved lse.
void logprob_head_backward(float *dhidden, float *dw, const float *dlogp, const float *dentropy,
                           const float *hidden, const float *w, const int32_t *targets, const float *lse,
                           int64_t T, int64_t H, int64_t V, float temperature);
void logprob_head_backward_ref(float *dhidden, float *dw, const float *dlogp, const float *dentropy,
                               const float *hidden, const float *w, const int32_t *targets, const float *lse,
                               int64_t T, int64_t H, int64_t V, float temperature);
// As logprob_head_backward, given the forward's entropy (T): then the entropy gradient (which needs
// E[z] = lse - entropy per row) costs no extra pass over the vocabulary. logprob_head_backward
// recomputes E[z] with one forward pass when some dentropy is non-zero; entropy may be NULL here too.
void logprob_head_backward_ent(float *dhidden, float *dw, const float *dlogp, const float *dentropy, const float *entropy,
                               const float *hidden, const float *w, const int32_t *targets, const float *lse,
                               int64_t T, int64_t H, int64_t V, float temperature);
// With final-logit soft-capping: z = cap * tanh((hidden @ w^T) / cap) / temperature (softcap 0: none), inside the
// streamed log-sum-exp; the backward (entropy may be NULL) chains through the tanh.
void logprob_head_forward_cap(float *logp, float *entropy, float *lse, const float *hidden, const float *w,
                              const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature, float softcap);
void logprob_head_forward_cap_ref(float *logp, float *entropy, float *lse, const float *hidden, const float *w,
                                  const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature, float softcap);
void logprob_head_backward_cap(float *dhidden, float *dw, const float *dlogp, const float *dentropy, const float *entropy,
                               const float *hidden, const float *w, const int32_t *targets, const float *lse,
                               int64_t T, int64_t H, int64_t V, float temperature, float softcap);
void logprob_head_backward_cap_ref(float *dhidden, float *dw, const float *dlogp, const float *dentropy,
                                   const float *hidden, const float *w, const int32_t *targets, const float *lse,
                                   int64_t T, int64_t H, int64_t V, float temperature, float softcap);
// The frozen head (no dW: LoRA's lm_head): d logp_t / d hidden_t does not depend on the loss, so the training
// forward saves it and the backward needs no pass over the vocabulary. As logprob_head_forward_cap (same logp,
// entropy, lse), and in the same sweep, with an online rescale when a row's running max moves:
//   g (T, H)  = d logp_t / d hidden_t    = (c_y w[y_t] - sum_v p_tv c_v w[v]) / temperature   (0 where target < 0)
//   ge (T, H) = d entropy_t / d hidden_t = -sum_v p_tv (z_tv - E z_t) c_v w[v] / temperature   (NULL: not computed)
// c_v = 1 - tanh^2 of the soft-cap (1 without). Costs one (T, V, H) product for g, a second for ge, next to the
// forward's one; fp32 sums, merged across threads in thread order (deterministic for a fixed thread count).
void logprob_head_forward_frozen(float *logp, float *entropy, float *lse, float *g, float *ge, const float *hidden,
                                 const float *w, const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature,
                                 float softcap);
void logprob_head_forward_frozen_ref(float *logp, float *entropy, float *lse, float *g, float *ge, const float *hidden,
                                     const float *w, const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature,
                                     float softcap);
// dhidden (T, H) += dlogp_t g_t + dentropy_t ge_t (dlogp or dentropy NULL = zero; dentropy needs ge).
void logprob_head_backward_frozen(float *dhidden, const float *dlogp, const float *dentropy, const float *g, const float *ge,
                                  int64_t T, int64_t H);
void logprob_head_backward_frozen_ref(float *dhidden, const float *dlogp, const float *dentropy, const float *g, const float *ge,
                                      int64_t T, int64_t H);
// logits (T, V) = cap * tanh(logits / cap) in place (softcap > 0; 0 leaves them).
void logits_softcap(float *logits, int64_t n, float softcap);
// Full logits (T, V) = hidden @ w^T (no temperature). For small tests and generation only.
void logits_forward(float *logits, const float *hidden, const float *w, int64_t T, int64_t H, int64_t V);
