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

typedef struct {
    const param_layout *pl;
    const qwen3_config *cfg;     // == &pl->cfg
    param_set *params;           // weights (fp32 master copy)
    rope_table rope;             // cos/sin up to max positions used
    backend_ctx *be;
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

// Forward: hidden (T, H) = final-normed hidden states. Saves what the backward needs in `a` (a may be
// NULL for inference-only).
void qwen3_forward(qwen3_model *m, qwen3_acts *a, const qwen3_batch *b, float *hidden);
// Log-prob head over the forward's hidden: logp/entropy (T) of targets (T) at temperature (targets < 0 =
// none). entropy may be NULL. Never builds (T, V) logits.
void qwen3_logprob(qwen3_model *m, qwen3_acts *a, const qwen3_batch *b, const int32_t *targets, float temperature,
                   float *logp, float *entropy);
// Backward seeded by dlogp (T) and dentropy (T, or NULL): accumulates (+=) into grads (same layout as params).
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
