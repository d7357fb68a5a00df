// bench_rowgemm.c: the rollout engine's batch-invariant rowgemm on the Qwen3-0.6B decode shapes, against
// OpenBLAS sgemm on the same product (x @ w^T, NT layout) in the same run, and, at T = 1, against the
// memory-bandwidth ceiling (weight bytes / measured copy bandwidth). Medians of R repetitions; weights
// larger than the caches (each product sweeps a fresh 64 MiB+ weight set) so batch 1 is memory-bound as in
// a real decode step. Last, batch-1 decode sweeps (every product of one 0.6B decode step over a 2.4 GB fp32 and
// a 1.2 GB bf16 weight set) against a plain read loop over the same bytes.
// Usage: bench_rowgemm [reps threads] [--sweep]   (--sweep: only the decode sweeps)
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/common.h"
#include "core/hugepage.h"
#include "rollout/rowgemm.h"
#include "bench_util.h"

static void fill(float *x, int64_t n, uint64_t seed) {
#pragma omp parallel for schedule(static)
    for (int64_t c0 = 0; c0 < n; c0 += 65536) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull + (uint64_t)c0 + 1;
        for (int64_t i = c0; i < n && i < c0 + 65536; i++) {
            s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
            x[i] = (float)((double)((s * 2685821657736338717ull) >> 40) / 16777216.0 * 2.0 - 1.0) * 0.03f;
        }
    }
}

// Batch-1 decode sweep: every product of a 0.6B decode step at T = 1 (28 x fused q/k/v, o, fused gate/up, down,
// then the lm head) over one weight set (2.38 GB fp32, or 1.19 GB bf16), against a plain read loop over the same
// bytes, alternated per repetition (the peer a read-only decode can at best match).
static void decode_sweep(int bf16, int reps) {
    const int64_t H = 1024, I = 3072, QD = 2048, KD = 1024, V = 151936, L = 28;
    const int64_t wn = L * (QD * H + 2 * KD * H + H * QD + 3 * I * H) + V * H;
    const size_t wb = (size_t)wn * (bf16 ? 2 : 4);
    float *w = rlc_alloc_huge(wb), *x = rlc_alloc((size_t)I * 4), *o = rlc_alloc((size_t)(V + 2 * I) * 4);
    if (bf16) {
        float *tmp = rlc_alloc((size_t)1 << 24);
        for (int64_t i = 0; i < wn; i += 1 << 22) {
            const int64_t n = wn - i < (1 << 22) ? wn - i : (1 << 22);
            fill(tmp, n, 77 + (uint64_t)i);
            rowgemm_to_bf16((uint16_t *)w + i, tmp, n);
        }
        rlc_free(tmp);
    } else {
        fill(w, wn, 77);
    }
    fill(x, I, 78);
    // one product (or fused set) of the step: j outputs of the same C, weights from the running offset
    const uint16_t *w16 = (const uint16_t *)w;
    double *tr = malloc((size_t)reps * sizeof(double)), *tl = malloc((size_t)reps * sizeof(double)), sink = 0;
    for (int r = -1; r < reps; r++) {
        double t0 = rlc_now();
        int64_t off = 0;   // elements into the weight set
#define SWEEP_OUT(o_, oc_) (rowgemm_out){.out = (o_), .ldo = (oc_), .OC = (oc_), .w = bf16 ? NULL : w + off, \
                                         .w16 = bf16 ? w16 + off : NULL}
#define SWEEP_RUN(outs_, n_, C_, acc_)                                                                        \
        (bf16 ? rowgemm_forward_multi_bf16 : rowgemm_forward_multi)((outs_), (n_), x, 1, (C_), (acc_))
        for (int l = 0; l < L; l++) {
            rowgemm_out qkv[3];
            qkv[0] = SWEEP_OUT(o, QD); off += QD * H;
            qkv[1] = SWEEP_OUT(o + QD, KD); off += KD * H;
            qkv[2] = SWEEP_OUT(o + QD + KD, KD); off += KD * H;
            SWEEP_RUN(qkv, 3, H, 0);
            rowgemm_out op = SWEEP_OUT(o, H); off += H * QD;
            SWEEP_RUN(&op, 1, QD, 1);
            rowgemm_out gu[2];
            gu[0] = SWEEP_OUT(o, I); off += I * H;
            gu[1] = SWEEP_OUT(o + I, I); off += I * H;
            SWEEP_RUN(gu, 2, H, 0);
            rowgemm_out dn = SWEEP_OUT(o, H); off += H * I;
            SWEEP_RUN(&dn, 1, I, 1);
        }
        rowgemm_out hd = SWEEP_OUT(o, V);
        SWEEP_RUN(&hd, 1, H, 0);
#undef SWEEP_OUT
#undef SWEEP_RUN
        const double t1 = rlc_now(), tot = bench_read_pass(w, wb / 4);
        sink += tot + o[0];
        if (r >= 0) { tr[r] = t1 - t0; tl[r] = rlc_now() - t1; }
    }
    const double mr = bench_median(tr, reps), ml = bench_median(tl, reps);
    const double gs = (double)wb / mr, gr = (double)(wb / 4 / 4096 * 4096) * 4 / ml;
    printf("  batch-1 decode sweep, %s weights (all products of a step, %.2f GB): %.1f GB/s = %.1f steps/s; read loop "
           "over the same bytes %.1f GB/s; sweep / read loop %.2f\n", bf16 ? "bf16" : "fp32", wb * 1e-9, gs * 1e-9,
           1 / mr, gr * 1e-9, gs / gr);
    if (sink == 1.5) printf(" ");   // keeps the sums live
    free(tr); free(tl);
    rlc_free(w); rlc_free(x); rlc_free(o);
}

int main(int argc, char **argv) {
    backend_fix_blas_coretype(argc, argv);
    const int sweep_only = argc > 1 && !strcmp(argv[argc - 1], "--sweep");
    if (sweep_only) argc--;
    int reps = argc > 1 ? atoi(argv[1]) : 7, threads = argc > 2 ? atoi(argv[2]) : 0;
    if (reps < 1) rlc_die("usage: bench_rowgemm [reps threads] [--sweep]");
    backend_ctx be;
    backend_init(&be, threads);
    // copy bandwidth: read + write of 512 MiB
    const int64_t nb = (int64_t)128 << 20;
    float *ba = rlc_alloc((size_t)nb * 4), *bb = rlc_alloc((size_t)nb * 4);
    fill(ba, nb, 9);
    memset(bb, 0, (size_t)nb * 4);
    double *tb = malloc((size_t)reps * sizeof(double));
    for (int r = 0; r < reps; r++) {
        double t0 = rlc_now();
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < nb; i += 16384) memcpy(bb + i, ba + i, 16384 * 4);
        tb[r] = rlc_now() - t0;
    }
    const double bw = 2.0 * nb * 4 / bench_median(tb, reps);
    rlc_free(ba); rlc_free(bb);
    printf("bench_rowgemm: rowgemm kernel %s, %d threads, OpenBLAS core %s, median of %d; copy bandwidth %.1f GB/s\n",
           rowgemm_isa(), be.n_threads, be.blas_core, reps, bw * 1e-9);
    // (C, OC) of a Qwen3-0.6B layer: q, k/v, o, gate/up, down; and a 16384-row slice of the lm head
    const int64_t shapes[][2] = {{1024, 2048}, {1024, 1024}, {2048, 1024}, {1024, 3072}, {3072, 1024}, {1024, 16384}};
    const char *names[] = {"q_proj", "k+v_proj", "o_proj", "gate/up", "down", "lm_head/16k"};
    const int Ts[] = {1, 8, 64};
    const size_t n_shapes = sweep_only ? 0 : sizeof shapes / sizeof shapes[0];
    printf("  %-12s %5s %5s %4s | %9s %8s | %9s %8s | %s\n", "product", "C", "OC", "T", "rowgemm ms", "GFLOP/s", "sgemm ms",
           "GFLOP/s", "ratio (T=1: GB/s, % of bandwidth)");
    double tot_rg[3] = {0}, tot_sg[3] = {0}, tot_fl[3] = {0};
    for (size_t si = 0; si < n_shapes; si++) {
        const int64_t C = shapes[si][0], OC = shapes[si][1];
        // enough weight copies that each repetition reads ~96 MiB not in cache
        const int64_t wn = C * OC, ncopy = (int64_t)(96 << 20) / (wn * 4) + 1;
        float *w = rlc_alloc((size_t)(wn * ncopy) * 4), *x = rlc_alloc((size_t)(64 * C) * 4),
              *o = rlc_alloc((size_t)(64 * OC) * 4);
        fill(w, wn * ncopy, 1 + si);
        fill(x, 64 * C, 100 + si);
        for (int ti = 0; ti < 3; ti++) {
            const int64_t T = Ts[ti];
            double *tr = malloc((size_t)reps * sizeof(double)), *ts = malloc((size_t)reps * sizeof(double));
            for (int r = -1; r < reps; r++) {
                double t0 = rlc_now();
                for (int64_t k = 0; k < ncopy; k++) rowgemm_forward(o, OC, x, w + k * wn, T, C, OC, 0);
                double t1 = rlc_now();
                for (int64_t k = 0; k < ncopy; k++)
                    backend_sgemm(0, 1, T, OC, C, 1.0f, x, C, w + k * wn, C, 0.0f, o, OC);
                double t2 = rlc_now();
                if (r >= 0) { tr[r] = (t1 - t0) / ncopy; ts[r] = (t2 - t1) / ncopy; }
            }
            const double mr = bench_median(tr, reps), ms = bench_median(ts, reps), fl = 2.0 * T * C * OC;
            tot_rg[ti] += mr; tot_sg[ti] += ms; tot_fl[ti] += fl;
            printf("  %-12s %5lld %5lld %4lld | %9.3f %8.1f | %9.3f %8.1f | %.2f", names[si], (long long)C, (long long)OC,
                   (long long)T, mr * 1e3, fl / mr * 1e-9, ms * 1e3, fl / ms * 1e-9, ms / mr);
            if (T == 1) printf("  (%.1f GB/s, %.0f%%)", wn * 4 / mr * 1e-9, 100 * wn * 4 / mr / bw);
            printf("\n");
            free(tr); free(ts);
        }
        rlc_free(w); rlc_free(x); rlc_free(o);
    }
    for (int ti = 0; ti < (n_shapes ? 3 : 0); ti++)
        printf("  all shapes, T=%2d: rowgemm %.1f GFLOP/s, sgemm %.1f GFLOP/s, rowgemm/sgemm %.2f\n", Ts[ti],
               tot_fl[ti] / tot_rg[ti] * 1e-9, tot_fl[ti] / tot_sg[ti] * 1e-9, tot_sg[ti] / tot_rg[ti]);
    decode_sweep(0, reps);
    decode_sweep(1, reps);
    printf("  peak RSS %.1f MiB\n", (double)rlc_peak_rss() / (1 << 20));
    free(tb);
    return 0;
}
