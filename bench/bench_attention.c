// bench_attention.c: flash attention forward/backward throughput on the Qwen3-0.6B attention shape
// (nh=16, nkv=8, D=128; 8 sequences of 512 tokens by default), against the OpenBLAS sgemm ceiling in the
// same run. Work counted as in FlashAttention: forward 4*nh*D*sum(len^2)/2 flops (the causal half of
// QK^T and PV), backward 2.5x that (5 block products instead of 2).
// Usage: bench_attention [n_seqs len nh nkv D reps threads]
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "core/common.h"
#include "kernels/kernels.h"
#include "bench_util.h"

// Process CPU seconds (all threads): on a shared machine, flops per CPU-second are steadier than wall time.
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static void fill(float *x, int64_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
        x[i] = (float)((double)((s * 2685821657736338717ull) >> 40) / 16777216.0 * 2.0 - 1.0);
    }
}

int main(int argc, char **argv) {
    backend_fix_blas_coretype(argc, argv);
    int n_seqs = argc > 1 ? atoi(argv[1]) : 8, len = argc > 2 ? atoi(argv[2]) : 512;
    int nh = argc > 3 ? atoi(argv[3]) : 16, nkv = argc > 4 ? atoi(argv[4]) : 8, D = argc > 5 ? atoi(argv[5]) : 128;
    int reps = argc > 6 ? atoi(argv[6]) : 7, threads = argc > 7 ? atoi(argv[7]) : 0;
    if (n_seqs < 1 || len < 1 || nh < 1 || nkv < 1 || nh % nkv || D < 1 || reps < 1)
        rlc_die("usage: bench_attention [n_seqs len nh nkv D reps threads] (nh a multiple of nkv)");
    backend_ctx be;
    backend_init(&be, threads);
    const int64_t T = (int64_t)n_seqs * len, nq = T * nh * D, nk = T * nkv * D;
    int32_t *cu = rlc_malloc((size_t)(n_seqs + 1) * sizeof(int32_t));
    for (int s = 0; s <= n_seqs; s++) cu[s] = s * len;
    float *q = rlc_alloc((size_t)nq * 4), *k = rlc_alloc((size_t)nk * 4), *v = rlc_alloc((size_t)nk * 4);
    float *out = rlc_alloc((size_t)nq * 4), *lse = rlc_alloc((size_t)(T * nh) * 4), *dout = rlc_alloc((size_t)nq * 4);
    float *dq = rlc_alloc_zero((size_t)nq * 4), *dk = rlc_alloc_zero((size_t)nk * 4), *dv = rlc_alloc_zero((size_t)nk * 4);
    fill(q, nq, 1); fill(k, nk, 2); fill(v, nk, 3); fill(dout, nq, 4);
    for (int64_t i = 0; i < nq; i++) q[i] *= 3.0f;   // scores with some spread
    const double fwd_flop = 4.0 * nh * D * ((double)len * len / 2) * n_seqs, bwd_flop = 2.5 * fwd_flop;

    // sgemm ceiling: 512 x 2048 x 1024 (the reference shape)
    const int64_t M = 512, N = 2048, K = 1024;
    float *A = rlc_alloc((size_t)(M * K) * 4), *B = rlc_alloc((size_t)(N * K) * 4), *C = rlc_alloc((size_t)(M * N) * 4);
    fill(A, M * K, 5); fill(B, N * K, 6);
    double *tf = malloc((size_t)reps * sizeof(double)), *tb = malloc((size_t)reps * sizeof(double)),
           *tg = malloc((size_t)reps * sizeof(double)), *cf = malloc((size_t)reps * sizeof(double)),
           *cb = malloc((size_t)reps * sizeof(double)), *cg = malloc((size_t)reps * sizeof(double));
    attention_forward(out, lse, q, k, v, cu, n_seqs, nh, nkv, D);                  // warm-up
    attention_backward(dq, dk, dv, dout, out, lse, q, k, v, cu, n_seqs, nh, nkv, D);
    backend_sgemm(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
    for (int r = 0; r < reps; r++) {
        double t0 = rlc_now(), u0 = cpu_now();
        attention_forward(out, lse, q, k, v, cu, n_seqs, nh, nkv, D);
        double t1 = rlc_now(), u1 = cpu_now();
        attention_backward(dq, dk, dv, dout, out, lse, q, k, v, cu, n_seqs, nh, nkv, D);
        double t2 = rlc_now(), u2 = cpu_now();
        backend_sgemm(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
        double t3 = rlc_now(), u3 = cpu_now();
        tf[r] = t1 - t0; tb[r] = t2 - t1; tg[r] = t3 - t2;
        cf[r] = u1 - u0; cb[r] = u2 - u1; cg[r] = u3 - u2;
    }
    double mf = bench_median(tf, reps), mb = bench_median(tb, reps), mg = bench_median(tg, reps);
    double gf = fwd_flop / mf * 1e-9, gb = bwd_flop / mb * 1e-9, gg = 2.0 * M * N * K / mg * 1e-9;
    printf("bench_attention: %d seqs x %d tokens, nh=%d nkv=%d D=%d, %d threads, OpenBLAS core %s, median of %d\n",
           n_seqs, len, nh, nkv, D, be.n_threads, be.blas_core, reps);
    printf("  forward : %8.2f ms  %7.1f GFLOP/s  (%.2f x sgemm ceiling)\n", mf * 1e3, gf, gf / gg);
    printf("  backward: %8.2f ms  %7.1f GFLOP/s  (%.2f x sgemm ceiling; 2.5x forward flops counted)\n", mb * 1e3, gb, gb / gg);
    printf("  sgemm 512x2048x1024: %.2f ms  %.1f GFLOP/s\n", mg * 1e3, gg);
    double pf = fwd_flop / bench_median(cf, reps) * 1e-9, pb = bwd_flop / bench_median(cb, reps) * 1e-9,
           pg = 2.0 * M * N * K / bench_median(cg, reps) * 1e-9;
    printf("  per CPU-second (steadier on a shared machine): forward %.1f, backward %.1f, sgemm %.1f GFLOP/s;"
           " ratios %.2f, %.2f\n", pf, pb, pg, pf / pg, pb / pg);
    printf("  peak RSS %.1f MiB\n", (double)rlc_peak_rss() / (1 << 20));
    double cs = 0;
    for (int64_t i = 0; i < nq; i++) cs += out[i];
    printf("  (checksum %.6g)\n", cs);
    rlc_free(q); rlc_free(k); rlc_free(v); rlc_free(out); rlc_free(lse); rlc_free(dout);
    rlc_free(dq); rlc_free(dk); rlc_free(dv); rlc_free(A); rlc_free(B); rlc_free(C);
    free(cu); free(tf); free(tb); free(tg); free(cf); free(cb); free(cg);
    return 0;
}
