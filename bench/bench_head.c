// bench_head.c: the fused log-prob head on the Qwen3-0.6B shape (H=1024, V=151936), T tokens.
// Reports forward and backward tokens/s and GFLOP/s (forward 2*T*H*V, backward 3x that, entropy
// gradient off), the OpenBLAS sgemm ceiling measured in the same run (a multi-threaded T x 16384 x H
// sgemm in the head's NT layout, timed right before each head call), the ratios, and peak RSS.
// Medians of --reps runs.
// Usage: bench_head [--T 4096] [--H 1024] [--V 151936] [--reps 3] [--threads N] [--forward-only]
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "core/common.h"
#include "kernels/kernels.h"
#include "bench_util.h"

// Process CPU seconds (all threads): under contention from other processes the CPU time a call
// consumes is a steadier measure of its cost than wall time.
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double minimum(const double *x, int n) {
    double m = x[0];
    for (int i = 1; i < n; i++) m = x[i] < m ? x[i] : m;
    return m;
}
static void fill(float *x, int64_t n, uint64_t seed, float scale) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = s + (uint64_t)i * 0xBF58476D1CE4E5B9ull;
        z ^= z >> 31; z *= 0x94D049BB133111EBull; z ^= z >> 29;
        x[i] = scale * ((float)(z >> 40) * (1.0f / 16777216.0f) - 0.5f);
    }
}

int main(int argc, char **argv) {
    backend_fix_blas_coretype(argc, argv);
    int64_t T = 4096, H = 1024, V = 151936;
    int reps = 3, threads = 0, fwd_only = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--T")) T = atoll(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--H")) H = atoll(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--V")) V = atoll(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--forward-only")) fwd_only = 1;
        else rlc_die("bench_head: unknown argument '%s' (expected --T, --H, --V, --reps, --threads, --forward-only)", argv[i]);
    }
    if (T <= 0 || H <= 0 || V <= 0 || reps <= 0 || reps > 50) rlc_die("bench_head: sizes and --reps must be positive");
    backend_ctx be;
    backend_init(&be, threads);
    printf("bench_head: T=%lld H=%lld V=%lld threads=%d blas_core=%s reps=%d\n", (long long)T, (long long)H, (long long)V,
           be.n_threads, be.blas_core, reps);
    float *hidden = rlc_alloc((size_t)(T * H) * sizeof(float));   // (T, H)
    float *w = rlc_alloc((size_t)(V * H) * sizeof(float));        // (V, H)
    float *dw = rlc_alloc_zero((size_t)(V * H) * sizeof(float));  // (V, H)
    float *dh = rlc_alloc_zero((size_t)(T * H) * sizeof(float));  // (T, H)
    float *logp = rlc_alloc((size_t)T * sizeof(float)), *ent = rlc_alloc((size_t)T * sizeof(float));
    float *lse = rlc_alloc((size_t)T * sizeof(float)), *dlogp = rlc_alloc((size_t)T * sizeof(float));
    int32_t *tg = rlc_alloc((size_t)T * sizeof(int32_t));
    fill(hidden, T * H, 1, 2.0f);
    fill(w, V * H, 2, 0.1f);
    for (int64_t t = 0; t < T; t++) { tg[t] = (int32_t)((t * 7919) % V); dlogp[t] = -1.0f / (float)T; }

    // The sgemm ceiling is measured right before each timed head call (this machine's cores are
    // shared, so paired measurements give the fairer ratio): a multi-threaded T x NC x H sgemm in the
    // head's NT layout, outside any parallel region.
    const int64_t NC = V < 16384 ? V : 16384;
    float *C = rlc_alloc((size_t)(T * NC) * sizeof(float));
    const double flop = 2.0 * (double)T * (double)H * (double)V, cflop = 2.0 * (double)T * (double)NC * (double)H;
    double tf[50], tb[50], cf[50], cb[50], rf[50], rb[50], qf[50], qb[50];
    backend_sgemm(0, 1, T, NC, H, 1.0f, hidden, H, w, H, 0.0f, C, NC);  // warm-up
    logprob_head_forward(logp, ent, lse, hidden, w, tg, T, H, V, 1.0f);
    for (int r = 0; r < reps; r++) {
        double c0 = cpu_now(), t0 = rlc_now();
        backend_sgemm(0, 1, T, NC, H, 1.0f, hidden, H, w, H, 0.0f, C, NC);
        double c1 = cpu_now(), t1 = rlc_now();
        logprob_head_forward(logp, ent, lse, hidden, w, tg, T, H, V, 1.0f);
        double c2 = cpu_now(), t2 = rlc_now();
        cf[r] = cflop / (t1 - t0) * 1e-9;
        tf[r] = t2 - t1;
        rf[r] = flop / tf[r] * 1e-9 / cf[r];
        qf[r] = (flop / (c2 - c1)) / (cflop / (c1 - c0));
        if (fwd_only) continue;
        c0 = cpu_now(); t0 = rlc_now();
        backend_sgemm(0, 1, T, NC, H, 1.0f, hidden, H, w, H, 0.0f, C, NC);
        c1 = cpu_now(); t1 = rlc_now();
        logprob_head_backward(dh, dw, dlogp, NULL, hidden, w, tg, lse, T, H, V, 1.0f);
        c2 = cpu_now(); t2 = rlc_now();
        cb[r] = cflop / (t1 - t0) * 1e-9;
        tb[r] = t2 - t1;
        rb[r] = 3 * flop / tb[r] * 1e-9 / cb[r];
        qb[r] = (3 * flop / (c2 - c1)) / (cflop / (c1 - c0));
    }
    rlc_free(C);
    double bf = minimum(tf, reps), bb = fwd_only ? 0 : minimum(tb, reps);
    double mtf = bench_median(tf, reps), mcf = bench_median(cf, reps), mrf = bench_median(rf, reps);
    printf("sgemm ceiling: %.1f GFLOP/s (median; multi-threaded %lldx%lldx%lld NT)\n", mcf, (long long)T, (long long)NC, (long long)H);
    printf("forward  (logp+entropy+lse): %.3f s  %.0f tokens/s  %.1f GFLOP/s  = %.1f%% of the sgemm ceiling (median of paired ratios)\n",
           mtf, (double)T / mtf, flop / mtf * 1e-9, 100 * mrf);
    if (!fwd_only) {
        double mtb = bench_median(tb, reps), mcb = bench_median(cb, reps), mrb = bench_median(rb, reps);
        printf("backward (dhidden+dw):       %.3f s  %.0f tokens/s  %.1f GFLOP/s  = %.1f%% of the sgemm ceiling (%.1f GFLOP/s; %.2f sgemm-equivalents)\n",
               mtb, (double)T / mtb, 3 * flop / mtb * 1e-9, 100 * mrb, mcb, 3 / mrb);
    }
    printf("cpu-time ratio to the sgemm (median): forward %.1f%%", 100 * bench_median(qf, reps));
    if (!fwd_only) printf(", backward %.1f%%", 100 * bench_median(qb, reps));
    printf("\n");
    printf("best runs: forward %.3f s (%.1f GFLOP/s)", bf, flop / bf * 1e-9);
    if (!fwd_only) printf(", backward %.3f s (%.1f GFLOP/s)", bb, 3 * flop / bb * 1e-9);
    printf("\n");
    printf("sample: logp[0]=%.6f entropy[0]=%.6f lse[0]=%.6f\n", logp[0], ent[0], lse[0]);
    printf("peak RSS: %.2f GiB (weights %.2f GiB, dw %.2f GiB)\n", (double)rlc_peak_rss() / (1 << 30),
           (double)(V * H * 4) / (1 << 30), (double)(V * H * 4) / (1 << 30));
    rlc_free(hidden); rlc_free(w); rlc_free(dw); rlc_free(dh); rlc_free(logp); rlc_free(ent); rlc_free(lse); rlc_free(dlogp); rlc_free(tg);
    return 0;
}
