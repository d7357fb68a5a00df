// bench_bandwidth.c: what this machine's memory does for a stream that only reads, against the copy probe that
// the batch-1 decode roofline is defined by. A decode step at batch 1 reads 2.4 GB of weights and writes almost
// nothing, so where a VM reads more slowly than it copies (bytes read + written), the copy roofline is out of
// reach for any read loop; this shows by how much.
// Reported, as medians of R passes (all threads): memcpy bandwidth (2 x bytes / time, as bench_generate's probe),
// and read-only passes over a 2.4 GB buffer (the 0.6B weights' size) with S = 1, 2, 4, 8 sequential streams per
// thread and a software prefetch 0, 1 or 4 KiB ahead. Never pass/fail.
// usage: bench_bandwidth [reps]
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "bench_util.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

// One read-only pass: each thread reads its n/nt floats as S equal sequential streams, interleaved one cache
// line at a time; pf > 0: a prefetch pf bytes ahead of each stream. Bytes per second.
static double read_pass(const float *a, size_t n, int S, int pf, double *sink) {
    const double t0 = rlc_now();
    double tot = 0;
#pragma omp parallel reduction(+ : tot)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const size_t per = n / (size_t)nt / (size_t)S / 16 * 16, base = per * (size_t)S * (size_t)t;
        float acc[16] = {0};
        for (size_t i = 0; i < per; i += 16)
            for (int s = 0; s < S; s++) {
                const float *p = a + base + (size_t)s * per + i;
                if (pf) __builtin_prefetch((const char *)p + pf, 0, 3);
#pragma omp simd
                for (int l = 0; l < 16; l++) acc[l] += p[l];
            }
        for (int l = 0; l < 16; l++) tot += acc[l];
    }
    const double dt = rlc_now() - t0;
    *sink += tot;
    return (double)(n / 16 * 16) * sizeof(float) / dt;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1 || reps > 64) reps = 5;
    const size_t n = (size_t)600 << 20, cn = (size_t)256 << 20;   // 2.4 GB of floats; 2 x 256 MiB to copy
    float *a = rlc_alloc(n * sizeof(float));
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = 1e-9f * (float)(i & 1023);
    char *x = rlc_alloc(cn), *y = rlc_alloc(cn);
    memset(x, 1, cn);
    memset(y, 2, cn);
    static const int Ss[] = {1, 2, 4, 8}, PFs[] = {0, 1024, 4096};
    double cp[64], rd[4][3][64], sink = 0;
    for (int r = 0; r < reps; r++) {   // configurations interleaved, so a slow phase of the VM hits all alike
        cp[r] = bench_copy_pass(y, x, cn);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++) rd[i][j][r] = read_pass(a, n, Ss[i], PFs[j], &sink);
    }
    printf("bench_bandwidth: %d threads, median of %d passes\n", omp_get_max_threads(), reps);
    const double c = bench_median(cp, reps);
    printf("memcpy (read + written bytes) %.1f GB/s\n", c / 1e9);
    double best = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) {
            const double b = bench_median(rd[i][j], reps);
            if (b > best) best = b;
            printf("read-only, %d stream(s)/thread, prefetch %4d B: %.1f GB/s (%.0f%% of memcpy)\n", Ss[i], PFs[j],
                   b / 1e9, 100 * b / c);
        }
    printf("best read-only %.1f GB/s = %.0f%% of memcpy; peak RSS %.1f MiB%s\n", best / 1e9, 100 * best / c,
           rlc_peak_rss() / 1048576.0, sink == 1.5 ? " " : "");
    rlc_free(a);
    rlc_free(x);
    rlc_free(y);
    return 0;
}
