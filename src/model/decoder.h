// decoder.h: the dense decoder (every family of model_config) over packed batches: forward, loss-agnostic backward,
// activation checkpointing, and the per-layer pieces the rollout engine composes with its KV cache.
#pragma once
#include <stdint.h>

#include "backend/backend.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/params.h"

typedef enum {
    CKPT_NONE = 0,       // keep every activation the backward needs
    CKPT_SELECTIVE = 1,  // keep each block's input plus attention output and lse; recompute the rest
    CKPT_FULL = 2,       // keep only each block's input; recompute the block in backward
} ckpt_mode;

typedef struct decoder_ws decoder_ws;   // inference scratch (opaque, grows on demand)

// Where the model reads a block's weights. By default block b lives at param_block(params, b); a
// data-parallel layer either repoints block_w[b] at a gathered copy, or sets get_block, which is called
// right before block b is used (forward, recompute and backward) and returns its base pointer.
typedef float *(*decoder_get_block_fn)(void *ctx, int block);
// Where the backward accumulates block b's gradient. By default into the `grads` set passed to decoder_backward.
// A data-parallel layer sets get_grad_block (base of a buffer with block b's layout; the backward adds to it)
// and grad_block_done (the backward will not touch block b's gradient again in this pass), so it can
// reduce-scatter each block as soon as it is complete and never hold a full-layout gradient. Order within one
// backward: the lm_head block (0 when tied, else L+1), the final norm block L+1 (done), layers L-1..0 (blocks
// L..1, each done after its own backward), the embedding block 0 (done last).
typedef float *(*decoder_grad_block_fn)(void *ctx, int block);
typedef void (*decoder_grad_done_fn)(void *ctx, int block);

typedef struct {
    const param_layout *pl;
    const model_config *cfg;     // == &pl->cfg
    param_set *params;           // weights (fp32 master copy)
    rope_table rope;             // cos/sin for positions 0..max_position_embeddings-1 (full-attention layers)
    rope_table rope_local;       // the sliding layers' table when their RoPE differs (has_rope_local)
    int has_rope_local;
    backend_ctx *be;
    float **block_w;             // (pl->n_blocks) base of each block's weights (layer l = block 1+l)
    decoder_get_block_fn get_block;  // NULL: use block_w
    void *get_block_ctx;
    decoder_grad_block_fn get_grad_block;  // NULL: accumulate into decoder_backward's grads
    decoder_grad_done_fn grad_block_done;  // may be NULL
    void *grad_ctx;
    decoder_ws *ws;                // scratch of the inference path and the per-layer pieces (not thread safe)
    // LoRA (decoder_set_lora): the rank-r side path y += s·(x·Aᵀ)·Bᵀ on the adapted projections, and a frozen base
    const lora_layout *lora;       // NULL: no adapters
    float *lora_w;                 // (lora->pl.numel) adapter weights (a trainer steps them in place)
    float *lora_grad;              // (lora->pl.numel) where the backward accumulates dA, dB (NULL: none)
    int lora_on;                   // 0: side path skipped (the reference policy: bitwise the base model)
    int base_frozen;               // 1: the backward computes no base-weight gradient (grads may be NULL)
} decoder_model;

// A packed batch: n_seqs sequences back to back, T tokens in all.
typedef struct {
    int64_t T;
    int n_seqs;
    const int32_t *tokens;       // (T)
    const int32_t *cu_seqlens;   // (n_seqs+1), cu[0] = 0, cu[n_seqs] = T
    int32_t *pos;                // (T) positions, restart at 0 per sequence (filled by decoder_batch_positions)
    int max_seqlen;
} decoder_batch;
void decoder_batch_positions(decoder_batch *b);   // fills pos and max_seqlen from cu_seqlens

void decoder_model_init(decoder_model *m, const param_layout *pl, param_set *params, backend_ctx *be);
void decoder_model_free(decoder_model *m);
// Attach adapters (ll, weights w, gradient buffer g or NULL) and freeze the base: the side path is on, the backward
// accumulates dA, dB into g and dx through the base, never dW of the base, its norms or the embedding.
// ll == NULL detaches them (full fine-tuning again).
void decoder_set_lora(decoder_model *m, const lora_layout *ll, float *w, float *g);
// Adapters on (the policy) or off (the reference: the base forward, bitwise). No effect without adapters.
void decoder_lora_enable(decoder_model *m, int on);

// Saved activations for one micro-batch of up to T_max tokens (opaque; size depends on ckpt mode).
typedef struct decoder_acts decoder_acts;
decoder_acts *decoder_acts_new(const model_config *cfg, int64_t T_max, ckpt_mode mode);
void decoder_acts_free(decoder_acts *a);
int64_t decoder_acts_bytes(const decoder_acts *a);   // bytes held, for the memory report
// The bytes decoder_acts_new(cfg, T_max, mode) would hold, without allocating (saved activations plus the
// backward's scratch; excludes the weights and gradients).
int64_t decoder_acts_bytes_for(const model_config *cfg, int64_t T_max, ckpt_mode mode);
// The same for acts used with adapters of rank lora_rank attached and on (0: none): plus what the acts allocate on
// first use then, the side path's saved u (T_max, r) per adapted projection and its backward scratch, and the frozen
// head's saved d logp / d hidden and d entropy / d hidden (T_max, H) each. decoder_acts_bytes reaches it after a
// forward with the side path on and a log-prob pass with entropy. Neither figure counts the sequence split's private
// gradients (a parameter set per extra thread, models without adapters only), which decoder_acts_bytes counts once
// a split backward has allocated them.
int64_t decoder_acts_bytes_for_lora(const model_config *cfg, int64_t T_max, ckpt_mode mode, int lora_rank);
const char *decoder_ckpt_name(ckpt_mode mode);            // "none" | "selective" | "full"
int decoder_ckpt_parse(const char *s, ckpt_mode *mode);  // 0 on success, -1 for an unknown name
// After decoder_backward: d loss / d hidden (T, H) of the final-normed hidden states (for tests).
const float *decoder_acts_dhidden(const decoder_acts *a);

// Forward: hidden (T, H) = final-normed hidden states (hidden may be NULL: the result is also kept in
// `a`, or in the model's scratch when a is NULL). Saves what the backward needs in `a` (a may be NULL for
// inference-only).
void decoder_forward(decoder_model *m, decoder_acts *a, const decoder_batch *b, float *hidden);
// Log-prob head over the last forward's hidden (kept in `a`, or in the model's scratch when a is NULL):
// logp/entropy (T) of targets (T) at temperature (targets < 0 = none). entropy may be NULL. Never
// builds (T, V) logits. With `a`, saves the head's lse for the backward.
void decoder_logprob(decoder_model *m, decoder_acts *a, const decoder_batch *b, const int32_t *targets, float temperature,
                   float *logp, float *entropy);
// Backward seeded by dlogp (T) and dentropy (T, or NULL): accumulates (+=) into grads (same layout as params),
// or through m->get_grad_block when set (grads may then be NULL).
void decoder_backward(decoder_model *m, decoder_acts *a, const decoder_batch *b, const int32_t *targets, float temperature,
                    const float *dlogp, const float *dentropy, param_set *grads);
// Backward seeded by dhidden (T, H) = d loss / d final-normed hidden, for a head the caller differentiates itself
// (the critic's value head): needs decoder_forward with acts on the same batch; accumulates like decoder_backward.
void decoder_backward_hidden(decoder_model *m, decoder_acts *a, const decoder_batch *b, const float *dhidden, param_set *grads);

// ---- per-layer pieces for the rollout engine (inference only, no saved state) ----
// The RoPE table of layer l (the sliding layers' own where it differs) and its sliding window (0: full attention).
const rope_table *decoder_rope(const decoder_model *m, int layer);
int decoder_layer_window(const model_config *c, int layer);
// x (T, H) is the residual stream. qkv: q (T, nh*D), k/v (T, nkv*D) after q/k norm and RoPE at pos (T).
void decoder_layer_qkv(const decoder_model *m, int layer, const float *x, const int32_t *pos, int64_t T,
                     float *q, float *k, float *v);
// x (T, H) += o_proj(attn); then x += mlp(post_norm(x)). attn (T, nh*D).
void decoder_layer_out(const decoder_model *m, int layer, float *x, const float *attn, int64_t T);
// hidden (T, H) = final_norm(x)
void decoder_final_norm(const decoder_model *m, float *hidden, const float *x, int64_t T);
// x (T, H) = embed_tokens[tokens (T)] * embed_scale
void decoder_embed(const decoder_model *m, float *x, const int32_t *tokens, int64_t T);
// The output matrix (V, H): lm_head, or embed_tokens when tied.
const float *decoder_lm_head(const decoder_model *m);
// logits (T, V) = hidden @ lm_head^T, soft-capped when the config says (no temperature). Small tests and generation only.
void decoder_logits(const decoder_model *m, float *logits, const float *hidden, int64_t T);
