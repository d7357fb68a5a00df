// kv_cache.h: the paged KV cache of the rollout engine: a pool of fixed-size blocks with refcounts.
//
// A block holds block_size token slots of keys and values for every layer and kv head:
//   block b: [layer l][k: kv head h][D][slot s]  then  [v: kv head h][slot s][D]   (floats)
// Keys are stored transposed, (D, block_size) per head, so the decode kernel computes the scores of all
// block_size keys as D vector FMAs with no horizontal sums; values are (block_size, D) rows.
// A sequence owns a block table (logical block i -> pool block). Blocks are shared by refcount (the n
// samples of one prompt share its prefilled blocks) and copied before a write when shared (copy-on-write).
// The pool is sized from a byte budget (like vLLM's gpu_memory_utilization); when it is exhausted the
// scheduler makes requests wait or preempts. Free blocks are handed out LIFO (deterministic).
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int n_layers, n_kv_heads, head_dim;   // L, nkv, D
    int block_size;                       // token slots per block
    int64_t block_floats;                 // L * 2 * nkv * block_size * D
    int64_t layer_floats;                 // 2 * nkv * block_size * D
    int n_blocks;                         // pool size
    float *pool;                          // (n_blocks, block_floats)
    int32_t *refcount;                    // (n_blocks)
    int32_t *free_list;                   // (n_blocks) stack of free block ids
    int n_free;
    int64_t n_cow;                        // copies made by kv_cache_make_private (stats)
} kv_cache;

// Bytes of one block for this shape.
int64_t kv_cache_block_bytes(int n_layers, int n_kv_heads, int head_dim, int block_size);
// Pool of floor(budget_bytes / block_bytes) blocks; dies with a clear message if that is 0.
void kv_cache_init(kv_cache *kc, int n_layers, int n_kv_heads, int head_dim, int block_size, int64_t budget_bytes);
void kv_cache_free(kv_cache *kc);

// A free block with refcount 1, or -1 if the pool is exhausted.
int kv_cache_alloc(kv_cache *kc);
void kv_cache_ref(kv_cache *kc, int b);
void kv_cache_unref(kv_cache *kc, int b);   // returns the block to the pool at refcount 0
// Copy-on-write: if *b is shared, replace it by a private copy (copying all layers) and return 1; if it
// is already private return 0; return -1 (and leave *b) if a copy is needed but the pool is empty.
int kv_cache_make_private(kv_cache *kc, int32_t *b);

// Base of keys (nkv, D, block_size) / values (nkv, block_size, D) of one layer in block b.
static inline float *kv_cache_k(const kv_cache *kc, int b, int layer) {
    return kc->pool + (int64_t)b * kc->block_floats + (int64_t)layer * kc->layer_floats;
}
static inline float *kv_cache_v(const kv_cache *kc, int b, int layer) {
    return kv_cache_k(kc, b, layer) + (int64_t)kc->n_kv_heads * kc->block_size * kc->head_dim;
}
