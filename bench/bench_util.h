// bench_util.h: helpers shared by the benchmarks (header-only: each bench is one translation unit).
#pragma once
#include <stdlib.h>

static int bench_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Median of v (n), reordering v; the mean of the middle two for even n.
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
