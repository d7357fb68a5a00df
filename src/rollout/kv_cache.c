// kv_cache.c: block pool with refcounts and copy-on-write (layout in kv_cache.h).
#include "rollout/kv_cache.h"

#include "core/common.h"

const char *kv_dtype_name(kv_dtype dt) { return dt == KV_BF16 ? "bf16" : "fp32"; }

int kv_dtype_parse(const char *s, kv_dtype *dt) {
    if (!strcmp(s, "fp32")) *dt = KV_F32;
    else if (!strcmp(s, "bf16")) *dt = KV_BF16;
    else return -1;
    return 0;
}

int64_t kv_cache_block_bytes(int n_layers, int n_kv_heads, int head_dim, int block_size, kv_dtype dt) {
    return (int64_t)n_layers * 2 * n_kv_heads * block_size * head_dim * (dt == KV_BF16 ? 2 : 4);
}

void kv_cache_init(kv_cache *kc, int n_layers, int n_kv_heads, int head_dim, int block_size, kv_dtype dt,
                   int64_t budget_bytes) {
    memset(kc, 0, sizeof *kc);
    CHECK(n_layers > 0 && n_kv_heads > 0 && head_dim > 0, "kv_cache_init: L=%d nkv=%d D=%d", n_layers, n_kv_heads, head_dim);
    CHECK(dt == KV_F32 || dt == KV_BF16, "kv_cache_init: dtype %d, expected KV_F32 (%d) or KV_BF16 (%d)", (int)dt, KV_F32,
          KV_BF16);
    if (block_size < 1 || block_size > 1024) rlc_die("kv cache: block_size=%d, expected 1..1024", block_size);
    int64_t bb = kv_cache_block_bytes(n_layers, n_kv_heads, head_dim, block_size, dt);
    int64_t nb = budget_bytes / bb;
    if (nb < 1)
        rlc_die("kv cache: budget of %lld bytes is below one block (%lld bytes = %d tokens x %d layers x %d kv heads x "
                "%d dims x k,v %s); raise the KV cache budget (--kv-cache-bytes)",
                (long long)budget_bytes, (long long)bb, block_size, n_layers, n_kv_heads, head_dim, kv_dtype_name(dt));
    if (nb > INT32_MAX / 2) nb = INT32_MAX / 2;
    kc->n_layers = n_layers;
    kc->n_kv_heads = n_kv_heads;
    kc->head_dim = head_dim;
    kc->block_size = block_size;
    kc->dtype = dt;
    kc->elem_bytes = dt == KV_BF16 ? 2 : 4;
    kc->layer_elems = (int64_t)2 * n_kv_heads * block_size * head_dim;
    kc->block_elems = (int64_t)n_layers * kc->layer_elems;
    kc->block_bytes = bb;
    kc->n_blocks = (int)nb;
    // Uninitialised on purpose: every slot is written before it is read; pages are touched on first use.
    kc->pool = rlc_alloc((size_t)nb * (size_t)bb);
    kc->refcount = rlc_calloc((size_t)nb, sizeof(int32_t));
    kc->free_list = rlc_malloc((size_t)nb * sizeof(int32_t));
    // Stack: block 0 is handed out first.
    for (int64_t i = 0; i < nb; i++) kc->free_list[i] = (int32_t)(nb - 1 - i);
    kc->n_free = (int)nb;
}

void kv_cache_free(kv_cache *kc) {
    rlc_free(kc->pool);
    free(kc->refcount);
    free(kc->free_list);
    memset(kc, 0, sizeof *kc);
}

int kv_cache_alloc(kv_cache *kc) {
    if (kc->n_free == 0) return -1;
    int b = kc->free_list[--kc->n_free];
    CHECK(kc->refcount[b] == 0, "free block %d has refcount %d", b, kc->refcount[b]);
    kc->refcount[b] = 1;
    return b;
}

void kv_cache_ref(kv_cache *kc, int b) {
    CHECK(b >= 0 && b < kc->n_blocks && kc->refcount[b] > 0, "ref of block %d (refcount %d)", b,
          b >= 0 && b < kc->n_blocks ? kc->refcount[b] : -1);
    kc->refcount[b]++;
}

void kv_cache_unref(kv_cache *kc, int b) {
    CHECK(b >= 0 && b < kc->n_blocks && kc->refcount[b] > 0, "unref of block %d (refcount %d)", b,
          b >= 0 && b < kc->n_blocks ? kc->refcount[b] : -1);
    if (--kc->refcount[b] == 0) {
        CHECK(kc->n_free < kc->n_blocks, "free list overflow");
        kc->free_list[kc->n_free++] = b;
    }
}

int kv_cache_make_private(kv_cache *kc, int32_t *b) {
    CHECK(*b >= 0 && *b < kc->n_blocks && kc->refcount[*b] > 0, "cow of block %d", *b);
    if (kc->refcount[*b] == 1) return 0;
    int nb = kv_cache_alloc(kc);
    if (nb < 0) return -1;
    memcpy(kc->pool + (int64_t)nb * kc->block_bytes, kc->pool + (int64_t)*b * kc->block_bytes, (size_t)kc->block_bytes);
    kv_cache_unref(kc, *b);
    *b = nb;
    kc->n_cow++;
    return 1;
}
