// qwen3.h: the Qwen3 dense transformer over packed batches: forward, loss-agnostic backward,
// activation checkpointing, and the per-layer pieces the rollout engine composes with its KV cache.
#pragma once
#include <stdint.h>

#include "backend/backend.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "model/params.h"

typedef enum {
    CKPT_NONE = 0,       // keep every activation the backward needs
    CKPT_SELECTIVE = 1,  // keep each block's input plus attention output and lse; recompute the rest
    CKPT_FULL = 2,       // keep only each block's input; recompute the block in backward
} ckpt_mode;

typedef struct qwen3_ws qwen3_ws;   // inference scratch (opaque, grows on demand)

// Where the model reads a block's weights. By default block b lives at param_block(params, b); a
// data-parallel layer either repoints block_w[b] at a gathered copy, or sets get_block, which is called
// right before block b is used (forward, recompute and backward) and returns its base pointer.
typedef float *(*qwen3_get_block_fn)(void *ctx, int block);
// Where the backward accumulates block b's gradient. By default into the `grads` set passed to qwen3_backward.
// A data-parallel layer sets get_grad_block (base of a buffer with block b's layout; the backward adds to it)
// and grad_block_done (the backward will not touch block b's gradient again in this pass), so it can
// reduce-scatter each block as soon as it is complete and never hold a full-layout gradient. Order within one
// backward: the lm_head block (0 when tied, else L+1), the final norm block L+1 (done), layers L-1..0 (blocks
// L..1, each done after its own backward), the embedding block 0 (done last).
typedef float *(*qwen3_grad_block_fn)(void *ctx, int block);
typedef void (*qwen3_grad_done_fn)(void *ctx, int block);

typedef struct {
    const param_layout *pl;
    const qwen3_config *cfg;     // == &pl->cfg
    param_set *params;           // weights (fp32 master copy)
    rope_table rope;             // cos/sin for positions 0..max_position_embeddings-1
    backend_ctx *be;
    float **block_w;             // (pl->n_blocks) base of each block's weights (layer l = block 1+l)
    qwen3_get_block_fn get_block;  // NULL: use block_w
    void *get_block_ctx;
    qwen3_grad_block_fn get_grad_block;  // NULL: accumulate into qwen3_backward's grads
    qwen3_grad_done_fn grad_block_done;  // may be NULL
    void *grad_ctx;
    qwen3_ws *ws;                // scratch of the inference path and the per-layer pieces (not thread safe)
} qwen3_model;

// A packed batch: n_seqs sequences back to back, T tokens in all.
typedef struct {
    int64_t T;
    int n_seqs;
    const int32_t *tokens;       // (T)
    const int32_t *cu_seqlens;   // (n_seqs+1), cu[0] = 0, cu[n_seqs] = T
    int32_t *pos;                // (T) positions, restart at 0 per sequence (filled by qwen3_batch_positions)
    int max_seqlen;
} qwen3_batch;
void qwen3_batch_positions(qwen3_batch *b);   // fills pos and max_seqlen from cu_seqlens

void qwen3_model_init(qwen3_model *m, const param_layout *pl, param_set *params, backend_ctx *be);
void qwen3_model_free(qwen3_model *m);

// Saved activations for one micro-batch of up to T_max tokens (opaque; size depends on ckpt mode).
typedef struct qwen3_acts qwen3_acts;
qwen3_acts *qwen3_acts_new(const qwen3_config *cfg, int64_t T_max, ckpt_mode mode);
void qwen3_acts_free(qwen3_acts *a);
int64_t qwen3_acts_bytes(const qwen3_acts *a);   // bytes held, for the memory report
// The bytes qwen3_acts_new(cfg, T_max, mode) would hold, without allocating (saved activations plus the
// backward's scratch; excludes the weights and gradients).
int64_t qwen3_acts_bytes_for(const qwen3_config *cfg, int64_t T_max, ckpt_mode mode);
const char *qwen3_ckpt_name(ckpt_mode mode);            // "none" | "selective" | "full"
int qwen3_ckpt_parse(const char *s, ckpt_mode *mode);  // 0 on success, -1 for an unknown name
// After qwen3_backward: d loss / d hidden (T, H) of the final-normed hidden states (for tests).
const float *qwen3_acts_dhidden(const qwen3_acts *a);

// Forward: hidden (T, H) = final-normed hidden states (hidden may be NULL: the result is also kept in
// `a`, or in the model's scratch when a is NULL). Saves what the backward needs in `a` (a may be NULL for
// inference-only).
void qwen3_forward(qwen3_model *m, qwen3_acts *a, const qwen3_batch *b, float *hidden);
// Log-prob head over the last forward's hidden (kept in `a`, or in the model's scratch when a is NULL):
// logp/entropy (T) of targets (T) at temperature (targets < 0 = none). entropy may be NULL. Never
// builds (T, V) logits. With `a`, saves the head's lse for the backward.
void qwen3_logprob(qwen3_model *m, qwen3_acts *a, const qwen3_batch *b, const int32_t *targets, float temperature,
                   float *logp, float *entropy);
// Backward seeded by dlogp (T) and dentropy (T, or NULL): accumulates (+=) into grads (same layout as params),
// or through m->get_grad_block when set (grads may then be NULL).
void qwen3_backward(qwen3_model *m, qwen3_acts *a, const qwen3_batch *b, const int32_t *targets, float temperature,
                    const float *dlogp, const float *dentropy, param_set *grads);

// ---- per-layer pieces for the rollout engine (inference only, no saved state) ----
// x (T, H) is the residual stream. qkv: q (T, nh*D), k/v (T, nkv*D) after q/k norm and RoPE at pos (T).
void qwen3_layer_qkv(const qwen3_model *m, int layer, const float *x, const int32_t *pos, int64_t T,
                     float *q, float *k, float *v);
// x (T, H) += o_proj(attn); then x += mlp(post_norm(x)). attn (T, nh*D).
void qwen3_layer_out(const qwen3_model *m, int layer, float *x, const float *attn, int64_t T);
// hidden (T, H) = final_norm(x)
void qwen3_final_norm(const qwen3_model *m, float *hidden, const float *x, int64_t T);
// x (T, H) = embed_tokens[tokens (T)]
void qwen3_embed(const qwen3_model *m, float *x, const int32_t *tokens, int64_t T);
// The output matrix (V, H): lm_head, or embed_tokens when tied.
const float *qwen3_lm_head(const qwen3_model *m);
// logits (T, V) = hidden @ lm_head^T (no temperature). Small tests and generation only.
void qwen3_logits(const qwen3_model *m, float *logits, const float *hidden, int64_t T);
