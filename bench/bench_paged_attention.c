// bench_paged_attention.c: decode attention over the paged KV cache (paged_attention_forward) on the
// Qwen3-0.6B shape (nh=16, nkv=8, D=128, block size 16, 28 layers): one decode token for each of S sequences
// of context L, their blocks scattered over the pool as continuous batching leaves them. Decode attention only
// streams K and V, so the peer is a read-only pass over as many bytes in the same run (the bandwidth ceiling);
// reported for an fp32 and a bf16 cache in the same run: time per decode step (all layers), GB/s of K/V read,
// the ratio to that pass, the bf16 cache's speedup, peak RSS.
// Usage: bench_paged_attention [S L reps threads]   (defaults 64 192 7 0 = all)
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/common.h"
#include "rollout/kv_cache.h"
#include "rollout/paged_attention.h"
#include "bench_util.h"

int main(int argc, char **argv) {
    const int S = argc > 1 ? atoi(argv[1]) : 64, L = argc > 2 ? atoi(argv[2]) : 192;
    const int reps = argc > 3 ? atoi(argv[3]) : 7, threads = argc > 4 ? atoi(argv[4]) : 0;
    CHECK(S >= 1 && L >= 1 && reps >= 1, "usage: bench_paged_attention [S L reps threads] (got S=%d L=%d reps=%d)", S, L, reps);
    const int nl = 28, nh = 16, nkv = 8, D = 128, bs = 16;
    backend_ctx be;
    backend_init(&be, threads);
    const int nbs = (L + bs - 1) / bs;   // blocks per sequence
    printf("bench_paged_attention: %d sequences x context %d, Qwen3-0.6B attention (nh=%d nkv=%d D=%d, bs=%d, %d layers), "
           "%s task, %d threads, median of %d\n", S, L, nh, nkv, D, bs, nl, paged_attention_isa(), be.n_threads, reps);
    double t_dt[2] = {0, 0};
    for (int dti = 0; dti < 2; dti++) {
        const kv_dtype dt = dti ? KV_BF16 : KV_F32;
        kv_cache kc;
        kv_cache_init(&kc, nl, nkv, D, bs, dt, kv_cache_block_bytes(nl, nkv, D, bs, dt) * (int64_t)S * nbs);
        // random K/V everywhere; block tables a fixed shuffle of the pool (xorshift Fisher-Yates)
        uint64_t rs = 0x9E3779B97F4A7C15ull;
        const int64_t pool_n = (int64_t)kc.n_blocks * kc.block_elems;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < pool_n; i++) {
            const float f = (float)((int64_t)((uint64_t)i * 2654435761u % 2001) - 1000) * 1e-3f;
            if (dt == KV_BF16) ((uint16_t *)kc.pool)[i] = bf16_from_f32(f);
            else ((float *)kc.pool)[i] = f;
        }
        int32_t *perm = rlc_malloc((size_t)kc.n_blocks * sizeof(int32_t));
        for (int i = 0; i < kc.n_blocks; i++) perm[i] = i;
        for (int i = kc.n_blocks - 1; i > 0; i--) {
            rs ^= rs >> 12; rs ^= rs << 25; rs ^= rs >> 27;
            const int j = (int)((rs * 2685821657736338717ull) % (uint64_t)(i + 1));
            const int32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
        }
        int32_t *ts = rlc_malloc((size_t)S * sizeof(int32_t)), *pos = rlc_malloc((size_t)S * sizeof(int32_t));
        for (int s = 0; s < S; s++) { ts[s] = s; pos[s] = L - 1; }
        float *q = rlc_alloc((size_t)S * nh * D * sizeof(float)), *o = rlc_alloc((size_t)S * nh * D * sizeof(float));
        for (int64_t i = 0; i < (int64_t)S * nh * D; i++) q[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
        const double kv_bytes = (double)S * L * nl * 2.0 * nkv * D * kc.elem_bytes;
        double *tp = rlc_malloc((size_t)reps * sizeof(double)), *tr = rlc_malloc((size_t)reps * sizeof(double));
        double keep = 0;
        for (int r = 0; r < reps + 1; r++) {   // the first round warms up (page tables, caches)
            double t0 = rlc_now();
            for (int l = 0; l < nl; l++) paged_attention_forward(o, q, &kc, l, perm, nbs, ts, pos, S, nh, 0, 1.0f / sqrtf((float)D));
            const double ta = rlc_now() - t0;
            keep += o[0];
            t0 = rlc_now();
            keep += bench_read_pass((const float *)kc.pool, (size_t)(kv_bytes / sizeof(float)));
            const double tb = rlc_now() - t0;
            if (r > 0) { tp[r - 1] = ta; tr[r - 1] = tb; }
        }
        const double ta = bench_median(tp, reps), tb = bench_median(tr, reps);
        t_dt[dti] = ta;
        printf("%s cache: decode step attention %.2f ms: K/V %.2f GB at %.1f GB/s; read-only pass over as many bytes "
               "%.1f GB/s; ratio %.2f%s\n", kv_dtype_name(dt), ta * 1e3, kv_bytes * 1e-9, kv_bytes / ta * 1e-9,
               kv_bytes / tb * 1e-9, tb / ta, keep == 1234.5 ? " " : "");
        rlc_free(q); rlc_free(o); free(perm); free(ts); free(pos); free(tp); free(tr);
        kv_cache_free(&kc);
    }
    printf("bf16 cache / fp32 cache: %.2fx faster; peak RSS %.2f GB\n", t_dt[0] / t_dt[1], rlc_peak_rss() / 1e9);
    return 0;
}
