// bench_util.h: helpers shared by the benchmarks (header-only: each bench is one translation unit).
#pragma once
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "core/common.h"

static int bench_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Median of v (n), reordering v; the mean of the middle two for even n.
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One read-only pass over a[0 .. n - n % 4096), all threads, 16-lane sums (AVX-512 when built with it): the
// bandwidth peer of anything that only streams memory. Returns the sum so callers can keep it live.
static inline double bench_read_pass(const float *a, size_t n) {
    double tot = 0;
#pragma omp parallel for schedule(static) reduction(+ : tot)
    for (size_t c = 0; c < n / 4096 * 4096; c += 4096) {
        float s[16] = {0};
        for (size_t i = c; i < c + 4096; i += 16)
#pragma omp simd
            for (int l = 0; l < 16; l++) s[l] += a[i + l];
        for (int l = 0; l < 16; l++) tot += s[l];
    }
    return tot;
}

// One memcpy of n bytes from src to dst, split over all threads: bytes read + written per second (2n / time),
// the copy probe the batch-1 decode roofline is defined by.
static inline double bench_copy_pass(char *dst, const char *src, size_t n) {
    const double t0 = rlc_now();
#pragma omp parallel
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const size_t c = n / (size_t)nt;
        memcpy(dst + (size_t)t * c, src + (size_t)t * c, c);
    }
    return 2.0 * (double)n / (rlc_now() - t0);
}
