// kv_cache.h: the paged KV cache of the rollout engine: a pool of fixed-size blocks with refcounts.
//
// A block holds block_size token slots of keys and values for every layer and kv head:
//   block b: [layer l][k: kv head h][D][slot s]  then  [v: kv head h][slot s][D]   (elements of dtype)
// Keys are stored transposed, (D, block_size) per head, so the decode kernel computes the scores of all
// block_size keys as D vector FMAs with no horizontal sums; values are (block_size, D) rows.
// Elements are fp32 (the default: attention then sees exactly the trainer's k/v) or bf16 (half the bytes to
// stream per decode step and twice the tokens per budget; k/v rounded to nearest even when written, so
// log-probs drift from the trainer's). The kernels widen bf16 to fp32 exactly and do the same arithmetic.
// A sequence owns a block table (logical block i -> pool block). Blocks are shared by refcount (the n
// samples of one prompt share its prefilled blocks) and copied before a write when shared (copy-on-write).
// The pool is sized from a byte budget (like vLLM's gpu_memory_utilization); when it is exhausted the
// scheduler makes requests wait or preempts. Free blocks are handed out LIFO (deterministic).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/bf16.h"

typedef enum { KV_F32 = 0, KV_BF16 = 1 } kv_dtype;
const char *kv_dtype_name(kv_dtype dt);            // "fp32" | "bf16"
int kv_dtype_parse(const char *s, kv_dtype *dt);   // 0, or -1 if s is neither name

typedef struct {
    int n_layers, n_kv_heads, head_dim;   // L, nkv, D
    int block_size;                       // token slots per block
    kv_dtype dtype;                       // element type of the pool
    int elem_bytes;                       // 4 (fp32) | 2 (bf16)
    int64_t block_elems;                  // L * 2 * nkv * block_size * D
    int64_t layer_elems;                  // 2 * nkv * block_size * D
    int64_t block_bytes;                  // block_elems * elem_bytes
    int n_blocks;                         // pool size
    char *pool;                           // (n_blocks, block_elems) elements of dtype
    int32_t *refcount;                    // (n_blocks)
    int32_t *free_list;                   // (n_blocks) stack of free block ids
    int n_free;
    int64_t n_cow;                        // copies made by kv_cache_make_private (stats)
} kv_cache;

// Bytes of one block for this shape and element type.
int64_t kv_cache_block_bytes(int n_layers, int n_kv_heads, int head_dim, int block_size, kv_dtype dt);
// Pool of floor(budget_bytes / block_bytes) blocks; dies with a clear message if that is 0.
void kv_cache_init(kv_cache *kc, int n_layers, int n_kv_heads, int head_dim, int block_size, kv_dtype dt,
                   int64_t budget_bytes);
void kv_cache_free(kv_cache *kc);

// A free block with refcount 1, or -1 if the pool is exhausted.
int kv_cache_alloc(kv_cache *kc);
void kv_cache_ref(kv_cache *kc, int b);
void kv_cache_unref(kv_cache *kc, int b);   // returns the block to the pool at refcount 0
// Copy-on-write: if *b is shared, replace it by a private copy (copying all layers) and return 1; if it
// is already private return 0; return -1 (and leave *b) if a copy is needed but the pool is empty.
int kv_cache_make_private(kv_cache *kc, int32_t *b);

// Base of keys (nkv, D, block_size) / values (nkv, block_size, D) of one layer in block b: float * for fp32
// pools, uint16_t * (bf16) for bf16 ones.
static inline void *kv_cache_k(const kv_cache *kc, int b, int layer) {
    return kc->pool + ((int64_t)b * kc->block_elems + (int64_t)layer * kc->layer_elems) * kc->elem_bytes;
}
static inline void *kv_cache_v(const kv_cache *kc, int b, int layer) {
    return (char *)kv_cache_k(kc, b, layer) + (int64_t)kc->n_kv_heads * kc->block_size * kc->head_dim * kc->elem_bytes;
}
// Element i of a run that starts at p (from kv_cache_k / kv_cache_v), as fp32 (exact).
static inline float kv_cache_get(const kv_cache *kc, const void *p, int64_t i) {
    return kc->dtype == KV_BF16 ? bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
