// paged_attention.h: attention of new query tokens over a paged KV cache (GQA), and the cache writes.
//
// Every query token t belongs to a sequence (row tok_seq[t] of block_tables) and sits at position pos[t];
// it attends to the keys at positions 0..pos[t] of that sequence (its own key included, so the caller
// writes the new tokens' k/v first), or on a sliding-window layer (window W > 0) to the W most recent ones,
// pos[t] - W < j <= pos[t] (HF masking_utils). A windowed task starts at the block of its first key and masks
// that block's earlier keys, so it reads at most ceil(W / block_size) + 1 blocks, and table entries of blocks
// wholly before the window are never read (the engine recycles them, marking them -1). The same kernel serves decode (one token per sequence) and prefill or
// recompute (many tokens of a sequence): each (token, kv head) runs a fixed loop over the sequence's blocks
// with an online softmax, so its result does not depend on the other tokens in the call, on the thread
// count, or on where the blocks live. OpenMP tasks are (token, group of kv heads), the group as large as
// still leaves 8 tasks per thread (dynamic schedule: a task's result does not depend on the thread that runs
// it, nor each head's on its group).
#pragma once
#include <stdint.h>

#include "rollout/kv_cache.h"

// Write k/v (T, nkv*D) of T new tokens at slot pos[t] of sequence tok_seq[t]. block_tables (rows, bt_stride):
// logical block i of a sequence -> pool block; the target blocks must exist and be private.
void paged_kv_write(kv_cache *kc, int layer, const float *k, const float *v, const int32_t *block_tables,
                    int64_t bt_stride, const int32_t *tok_seq, const int32_t *pos, int64_t T);

// out (T, nh*D) = softmax(q k^T * scale) v over the visible keys (window 0: positions 0..pos[t]; window W > 0:
// max(0, pos[t] - W + 1)..pos[t]); q (T, nh*D) after norm + RoPE; scale the model's (head_dim^-1/2, or
// query_pre_attn_scalar^-1/2). Query head h uses kv head h / (nh / nkv).
void paged_attention_forward(float *out, const float *q, const kv_cache *kc, int layer, const int32_t *block_tables,
                             int64_t bt_stride, const int32_t *tok_seq, const int32_t *pos, int64_t T, int nh,
                             int window, float scale);
// The same in plain C: the arithmetic definition of paged_attention_forward (bitwise equal to it). Tests only.
void paged_attention_forward_scalar(float *out, const float *q, const kv_cache *kc, int layer,
                                    const int32_t *block_tables, int64_t bt_stride, const int32_t *tok_seq,
                                    const int32_t *pos, int64_t T, int nh, int window, float scale);
// Reference: double-precision two-pass softmax per (token, head) over the same keys. Tests only.
void paged_attention_forward_ref(float *out, const float *q, const kv_cache *kc, int layer, const int32_t *block_tables,
                                 int64_t bt_stride, const int32_t *tok_seq, const int32_t *pos, int64_t T, int nh,
                                 int window, float scale);

// The task this build runs for block size 16: "avx512", "avx2" (x86-64-v3 without AVX-512) or "scalar".
const char *paged_attention_isa(void);
