// fma_peak.h: the machine's fp32 register peak, measured: every thread runs independent chains of vector FMAs
// (AVX-512 when built with it, else AVX2+FMA) that never touch memory, so the rate is the FMA units' throughput
// times the vector width. Benchmarks report achieved GFLOP/s against it (header-only: each bench is one
// translation unit).
#pragma once
#include <immintrin.h>
#include <omp.h>

#include "core/common.h"

#if defined(__AVX512F__)
typedef __m512 fma_vec;
#define FMA_SET1 _mm512_set1_ps
#define FMA_FMADD _mm512_fmadd_ps
#define FMA_LANES 16
#define FMA_SUM(v) _mm512_reduce_add_ps(v)
#define FMA_ADD _mm512_add_ps
#else
typedef __m256 fma_vec;
#define FMA_SET1 _mm256_set1_ps
#define FMA_FMADD _mm256_fmadd_ps
#define FMA_LANES 8
#define FMA_ADD _mm256_add_ps
static inline float fma_sum8(__m256 v) {
    float t[8];
    _mm256_storeu_ps(t, v);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#define FMA_SUM(v) fma_sum8(v)
#endif

// 12 independent accumulators: enough to cover the FMA latency (4-5 cycles) on 2 FMA ports.
#define FMA_CHAINS 12

// GFLOP/s of `threads` threads (2 flops per lane per FMA), the median of 5 runs of `iters` FMA rounds.
static inline double fma_peak_gflops(int threads, long iters) {
    double t[5];
    volatile float sink = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = rlc_now();
#pragma omp parallel num_threads(threads)
        {
            fma_vec acc[FMA_CHAINS];
            for (int c = 0; c < FMA_CHAINS; c++) acc[c] = FMA_SET1(0.001f * (float)(c + omp_get_thread_num()));
            const fma_vec m = FMA_SET1(0.999999f), a = FMA_SET1(1e-7f);
            for (long i = 0; i < iters; i++)
                for (int c = 0; c < FMA_CHAINS; c++) acc[c] = FMA_FMADD(acc[c], m, a);
            fma_vec s = acc[0];
            for (int c = 1; c < FMA_CHAINS; c++) s = FMA_ADD(s, acc[c]);
            const float f = FMA_SUM(s);
#pragma omp atomic
            sink += f;
        }
        t[r] = rlc_now() - t0;
    }
    (void)sink;
    for (int i = 1; i < 5; i++)   // median of 5 (insertion sort)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) { double x = t[j]; t[j] = t[j - 1]; t[j - 1] = x; }
    return 2.0 * FMA_LANES * FMA_CHAINS * (double)iters * threads / t[2] / 1e9;
}
