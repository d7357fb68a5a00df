// test_paged_attention.c: decode attention over the paged KV cache: against the double-precision reference
// and the packed (flash) attention_forward, bitwise against the plain C definition, rows independent of the
// other tokens and of the thread count. The Makefile also builds this test against paged_attention compiled
// for other ISAs (test_paged_attention_avx2, test_paged_attention_scalar), so every build checks the AVX2 task
// and the portable one too; RLC_EXPECT_ISA names the task such a build must run.
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "kernels/kernels.h"
#include "rollout/kv_cache.h"
#include "rollout/paged_attention.h"
#include "testlib.h"

// Build a cache holding n_seqs sequences of given lengths with random k/v written through paged_kv_write,
// in shuffled (non-contiguous) blocks. Returns the block table (n_seqs, stride).
static int32_t *fill_cache(kv_cache *kc, tl_rng *r, int n_seqs, const int *lens, int64_t *stride_out, float **k_out,
                           float **v_out, int32_t **tok_seq_out, int32_t **pos_out, int64_t *T_out, int layer) {
    const int bs = kc->block_size, nkv = kc->n_kv_heads, D = kc->head_dim;
    int64_t stride = 1, T = 0;
    for (int s = 0; s < n_seqs; s++) {
        int64_t nb = (lens[s] + bs - 1) / bs;
        if (nb > stride) stride = nb;
        T += lens[s];
    }
    int32_t *bt = calloc((size_t)(n_seqs * stride), 4);
    // take blocks in a scrambled order: allocate all, then hand out from the end
    for (int s = 0; s < n_seqs; s++)
        for (int64_t i = 0; i < (lens[s] + bs - 1) / bs; i++) bt[s * stride + i] = kv_cache_alloc(kc);
    for (int s = 0; s + 1 < n_seqs; s += 2)   // swap whole tables of neighbours' first blocks for scatter
        if (bt[s * stride] >= 0 && bt[(s + 1) * stride] >= 0) { int32_t t = bt[s * stride]; bt[s * stride] = bt[(s + 1) * stride]; bt[(s + 1) * stride] = t; }
    float *k = tl_alloc_normal(r, T * nkv * D, 1.f), *v = tl_alloc_normal(r, T * nkv * D, 1.f);
    int32_t *ts = malloc((size_t)T * 4), *pos = malloc((size_t)T * 4);
    int64_t t = 0;
    for (int s = 0; s < n_seqs; s++)
        for (int p = 0; p < lens[s]; p++, t++) { ts[t] = s; pos[t] = p; }
    paged_kv_write(kc, layer, k, v, bt, stride, ts, pos, T);
    *stride_out = stride; *k_out = k; *v_out = v; *tok_seq_out = ts; *pos_out = pos; *T_out = T;
    return bt;
}

static void test_paged_attention(void) {
    tl_rng r;
    tl_rng_init(&r, 5);
    // vector paths: head pairs (G = 2, 4, 8), a leftover head (G = 1, 5), register-resident rows (AVX-512:
    // D % 128 == 0: 128, 256; AVX2: 32-column strips) and the per-vector loop (D = 16, 24, 48, 64; D = 8 and 24
    // are AVX2's, plain C under AVX-512), tasks of several kv heads (the full call) and of one (the
    // batch-invariance calls), groups capped by the accumulator (G = 8: 2 of 4 kv heads); plain C only (block
    // sizes 5 and 32: one block of two 16-key sums)
    struct { int nh, nkv, D, bs; } cfgs[] = {{4, 2, 64, 16},  {8, 8, 16, 16}, {8, 2, 128, 16}, {16, 8, 128, 16},
                                             {10, 2, 128, 16}, {3, 1, 256, 16}, {6, 3, 32, 16}, {32, 4, 64, 16},
                                             {4, 2, 24, 16},  {2, 1, 8, 16},  {6, 2, 48, 16}, {6, 3, 24, 5},
                                             {4, 2, 32, 32}};
    for (size_t ci = 0; ci < 2 * sizeof cfgs / sizeof cfgs[0]; ci++) {   // each shape with an fp32, then a bf16 cache
        const size_t cj = ci % (sizeof cfgs / sizeof cfgs[0]);
        const int nh = cfgs[cj].nh, nkv = cfgs[cj].nkv, D = cfgs[cj].D, bs = cfgs[cj].bs;
        const kv_dtype dt = ci < sizeof cfgs / sizeof cfgs[0] ? KV_F32 : KV_BF16;
        const char *dn = kv_dtype_name(dt);
        kv_cache kc;
        kv_cache_init(&kc, 2, nkv, D, bs, dt, kv_cache_block_bytes(2, nkv, D, bs, dt) * 64);
        const int lens[] = {1, 17, 40, 16, 3};
        const int n_seqs = 5;
        int64_t stride, T;
        float *k, *v;
        int32_t *ts, *pos;
        int32_t *bt = fill_cache(&kc, &r, n_seqs, lens, &stride, &k, &v, &ts, &pos, &T, 1);
        float *q = tl_alloc_normal(&r, T * nh * D, 1.f);
        float *o = rlc_alloc((size_t)(T * nh * D) * 4), *o_ref = rlc_alloc((size_t)(T * nh * D) * 4);
        paged_attention_forward(o, q, &kc, 1, bt, stride, ts, pos, T, nh);
        paged_attention_forward_ref(o_ref, q, &kc, 1, bt, stride, ts, pos, T, nh);
        char name[96];
        snprintf(name, sizeof name, "paged attention (%s cache) vs ref nh=%d nkv=%d D=%d bs=%d", dn, nh, nkv, D, bs);
        // fp32 online softmax vs double two-pass over the same (cached) k/v: rel 1e-5
        tl_check_close(name, o, o_ref, T * nh * D, 1e-5);
        // a bf16 cache holds k/v rounded to nearest even: the flash reference below gets those values
        if (dt == KV_BF16)
            for (int64_t i = 0; i < T * nkv * D; i++) { k[i] = bf16_to_f32(bf16_from_f32(k[i])); v[i] = bf16_to_f32(bf16_from_f32(v[i])); }
        // vs the packed (flash) attention_forward of kernels.h on the same q/k/v: causal prefill
        int32_t cu[6] = {0};
        for (int s = 0; s < n_seqs; s++) cu[s + 1] = cu[s] + lens[s];
        float *o_fl = rlc_alloc((size_t)(T * nh * D) * 4), *lse = rlc_alloc((size_t)(T * nh) * 4);
        attention_forward(o_fl, lse, q, k, v, cu, n_seqs, nh, nkv, D);
        snprintf(name, sizeof name, "paged attention (%s cache) vs attention_forward nh=%d D=%d", dn, nh, D);
        tl_check_close(name, o, o_fl, T * nh * D, 1e-5);
        // the vector task computes the definition's bits
        float *o_sc = rlc_alloc((size_t)(T * nh * D) * 4);
        paged_attention_forward_scalar(o_sc, q, &kc, 1, bt, stride, ts, pos, T, nh);
        TL_CHECK(!memcmp(o, o_sc, (size_t)(T * nh * D) * 4), "paged attention (%s, %s cache) bitwise == the plain C "
                 "definition nh=%d nkv=%d D=%d bs=%d", paged_attention_isa(), dn, nh, nkv, D, bs);
        // and so does one thread
        const int nt = omp_get_max_threads();
        omp_set_num_threads(1);
        paged_attention_forward(o_sc, q, &kc, 1, bt, stride, ts, pos, T, nh);
        omp_set_num_threads(nt);
        TL_CHECK(!memcmp(o, o_sc, (size_t)(T * nh * D) * 4), "paged attention (%s cache): 1 thread == %d threads (D=%d)", dn,
                 nt, D);
        rlc_free(o_sc);
        // batch invariance: decode of each sequence's last token alone == its row in the full call
        int same = 1;
        float *o1 = rlc_alloc((size_t)(nh * D) * 4);
        for (int64_t t = 0; t < T; t++) {
            paged_attention_forward(o1, q + t * nh * D, &kc, 1, bt, stride, ts + t, pos + t, 1, nh);
            if (memcmp(o1, o + t * nh * D, (size_t)(nh * D) * 4)) same = 0;
        }
        TL_CHECK(same, "paged attention (%s cache) rows bitwise independent of the other tokens (D=%d)", dn, D);
        rlc_free(o1); rlc_free(o_fl); rlc_free(lse);
        rlc_free(q); rlc_free(o); rlc_free(o_ref); rlc_free(k); rlc_free(v);
        free(bt); free(ts); free(pos);
        kv_cache_free(&kc);
    }
}

int main(void) {
    const char *isa = paged_attention_isa();
    printf("paged attention task: %s\n", isa);
#ifdef RLC_EXPECT_ISA
    TL_CHECK(!strcmp(isa, RLC_EXPECT_ISA), "paged attention built for %s runs the %s task", RLC_EXPECT_ISA, isa);
    if (!strcmp(RLC_EXPECT_ISA, "avx2") && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
        tl_skip("this CPU has no AVX2+FMA: the avx2 task is not run");
        return tl_summary();
    }
#endif
    test_paged_attention();
    return tl_summary();
}
