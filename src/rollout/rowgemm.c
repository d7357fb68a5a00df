// rowgemm.c: batch-invariant x @ w^T for the rollout engine (see rowgemm.h for the invariance argument).
//
// Each output out[t, o] is a fixed two-level sum over c: an FMA chain acc = fma(w[o, c], x[t, c], acc) from
// 0 over each block of KC columns, and the block sums added in order (then out + sum when accumulating).
// Two levels keep the rounding error near that of a KC-long chain instead of a C-long one. The fast path
// computes exactly that: a thread takes a slab of SLAB weight rows, transposes KC columns of it at a time
// into a (KC, SLAB) panel in L1, and runs a register tile of RT tokens x SLAB rows over the panel (one
// broadcast of x[t, c], two FMAs against the panel row c), adding each block's sums into the chunk's
// partials. So the arithmetic is the same whatever T, the tile, the chunk or the thread.
#include "rollout/rowgemm.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/common.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

#define SLAB 32   // weight rows per panel: two AVX-512 vectors of output channels
#define KC 128    // reduction columns per panel: (KC, SLAB) fp32 = 16 KiB, stays in L1 with the x tile
#define RT 12     // tokens per register tile: 2*RT accumulators + 2 panel vectors + 1 broadcast <= 32 zmm
#define TCH 96    // tokens per chunk: its partial sums (TCH, SLAB) live on the thread's stack

// Scalar chain for one slab: the portable path, and the arithmetic definition the vector path reproduces.
#define DEFINE_SLAB_SCALAR(NAME, WT, WVAL)                                                                 \
    static void NAME(float *out, int64_t ldo, const float *x, const WT *w, int64_t T, int64_t C, int rw,   \
                     int accumulate) {                                                                     \
        for (int64_t t = 0; t < T; t++)                                                                    \
            for (int r = 0; r < rw; r++) {                                                                 \
                float sum = 0.0f;                                                                          \
                for (int64_t c0 = 0; c0 < C; c0 += KC) {                                                   \
                    float acc = 0.0f;                                                                      \
                    for (int64_t c = c0; c < C && c < c0 + KC; c++)                                        \
                        acc = fmaf(WVAL(w + r * C + c), x[t * C + c], acc);                                \
                    sum = c0 == 0 ? acc : sum + acc;                                                       \
                }                                                                                          \
                float *o = out + t * ldo + r;                                                              \
                *o = accumulate ? *o + sum : sum;                                                          \
            }                                                                                              \
    }
static inline float wval_f32(const float *p) { return *p; }
static inline float wval_bf16(const uint16_t *p) {
    uint32_t u = (uint32_t)*p << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
DEFINE_SLAB_SCALAR(slab_scalar_f32, float, wval_f32)
#ifndef __AVX512F__
DEFINE_SLAB_SCALAR(slab_scalar_bf16, uint16_t, wval_bf16)
#endif

#ifdef __AVX512F__
static inline __m512 ld16_f32(const float *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
static inline __m512 ld16_bf16(const uint16_t *p, __mmask16 m) {
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// In-register 16x16 transpose: r[i] = row i in, column i out.
static inline void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int k = 0; k < 8; k++) {
        t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 4; k++) {
        const __m512d a = _mm512_castps_pd(t[4 * k]), b = _mm512_castps_pd(t[4 * k + 1]);
        const __m512d c = _mm512_castps_pd(t[4 * k + 2]), d = _mm512_castps_pd(t[4 * k + 3]);
        r[4 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int k = 0; k < 4; k++) {
        t[k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88);
        t[4 + k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xdd);
        t[8 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
        t[12 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xdd);
    }
    for (int k = 0; k < 8; k++) {
        r[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);
        r[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xdd);
    }
}

// panel[c][r] = w[r][c0 + c] for r < rw (0 for rw <= r < SLAB), c < nc; w (rw, C) rows of the slab.
#define DEFINE_PACK(NAME, WT, LD)                                                                          \
    static void NAME(float *restrict panel, const WT *w, int64_t C, int rw, int64_t c0, int nc) {         \
        for (int cc = 0; cc < nc; cc += 16) {                                                              \
            const int nv = nc - cc < 16 ? nc - cc : 16;                                                    \
            const __mmask16 m = (__mmask16)(nv == 16 ? 0xFFFFu : (1u << nv) - 1u);                          \
            for (int h = 0; h < SLAB / 16; h++) {                                                          \
                __m512 r[16];                                                                              \
                for (int i = 0; i < 16; i++) {                                                             \
                    const int row = h * 16 + i;                                                            \
                    if (row < rw) {                                                                        \
                        const WT *p = w + (int64_t)row * C + c0 + cc;                                      \
                        _mm_prefetch((const char *)(p + KC), _MM_HINT_T0);                                 \
                        r[i] = LD(p, m);                                                                   \
                    } else {                                                                               \
                        r[i] = _mm512_setzero_ps();                                                        \
                    }                                                                                      \
                }                                                                                          \
                transpose16(r);                                                                            \
                for (int i = 0; i < nv; i++) _mm512_store_ps(panel + (cc + i) * SLAB + h * 16, r[i]);      \
            }                                                                                              \
        }                                                                                                  \
    }
DEFINE_PACK(pack_f32, float, ld16_f32)
DEFINE_PACK(pack_bf16, uint16_t, ld16_bf16)

// part (nt, SLAB) = (first) or += (later blocks) the FMA chain from 0 over the panel's nc columns, x (nt, ldx).
// NT is a constant at every call site, so the accumulators stay in registers.
static inline __attribute__((always_inline)) void tile(const int NT, float *restrict part, const float *restrict panel,
                                                       int nc, const float *restrict x, int64_t ldx, int first) {
    __m512 a0[RT], a1[RT];
#pragma GCC unroll 12
    for (int j = 0; j < NT; j++) a0[j] = a1[j] = _mm512_setzero_ps();
    for (int c = 0; c < nc; c++) {
        const __m512 p0 = _mm512_load_ps(panel + c * SLAB), p1 = _mm512_load_ps(panel + c * SLAB + 16);
#pragma GCC unroll 12
        for (int j = 0; j < NT; j++) {
            const __m512 xb = _mm512_set1_ps(x[j * ldx + c]);
            a0[j] = _mm512_fmadd_ps(p0, xb, a0[j]);
            a1[j] = _mm512_fmadd_ps(p1, xb, a1[j]);
        }
    }
#pragma GCC unroll 12
    for (int j = 0; j < NT; j++) {
        if (!first) {
            a0[j] = _mm512_add_ps(_mm512_load_ps(part + j * SLAB), a0[j]);
            a1[j] = _mm512_add_ps(_mm512_load_ps(part + j * SLAB + 16), a1[j]);
        }
        _mm512_store_ps(part + j * SLAB, a0[j]);
        _mm512_store_ps(part + j * SLAB + 16, a1[j]);
    }
}

static void tile_any(int nt, float *part, const float *panel, int nc, const float *x, int64_t ldx, int first) {
    switch (nt) {
    case 1: tile(1, part, panel, nc, x, ldx, first); break;
    case 2: tile(2, part, panel, nc, x, ldx, first); break;
    case 3: tile(3, part, panel, nc, x, ldx, first); break;
    case 4: tile(4, part, panel, nc, x, ldx, first); break;
    case 5: tile(5, part, panel, nc, x, ldx, first); break;
    case 6: tile(6, part, panel, nc, x, ldx, first); break;
    case 7: tile(7, part, panel, nc, x, ldx, first); break;
    case 8: tile(8, part, panel, nc, x, ldx, first); break;
    case 9: tile(9, part, panel, nc, x, ldx, first); break;
    case 10: tile(10, part, panel, nc, x, ldx, first); break;
    case 11: tile(11, part, panel, nc, x, ldx, first); break;
    default: tile(12, part, panel, nc, x, ldx, first); break;
    }
}

// One slab (rw <= SLAB rows of w) against all T tokens.
#define DEFINE_SLAB(NAME, WT, PACK)                                                                        \
    static void NAME(float *out, int64_t ldo, const float *x, const WT *w, int64_t T, int64_t C, int rw,   \
                     int accumulate) {                                                                     \
        _Alignas(64) float panel[KC * SLAB];                                                               \
        _Alignas(64) float part[TCH * SLAB];                                                               \
        const __mmask16 m0 = (__mmask16)(rw >= 16 ? 0xFFFFu : (1u << rw) - 1u);                            \
        const __mmask16 m1 = (__mmask16)(rw >= 32 ? 0xFFFFu : rw <= 16 ? 0u : (1u << (rw - 16)) - 1u);     \
        for (int64_t t0 = 0; t0 < T; t0 += TCH) {                                                          \
            const int64_t ntc = T - t0 < TCH ? T - t0 : TCH;                                               \
            for (int64_t c0 = 0; c0 < C; c0 += KC) {                                                       \
                const int nc = (int)(C - c0 < KC ? C - c0 : KC);                                           \
                PACK(panel, w, C, rw, c0, nc);                                                             \
                for (int64_t j = 0; j < ntc; j += RT)                                                      \
                    tile_any((int)(ntc - j < RT ? ntc - j : RT), part + j * SLAB, panel, nc,               \
                             x + (t0 + j) * C + c0, C, c0 == 0);                                           \
            }                                                                                              \
            for (int64_t j = 0; j < ntc; j++) {                                                            \
                float *o = out + (t0 + j) * ldo;                                                           \
                __m512 s0 = _mm512_load_ps(part + j * SLAB), s1 = _mm512_load_ps(part + j * SLAB + 16);    \
                if (accumulate) {                                                                          \
                    s0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, o), s0);                                  \
                    s1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, o + 16), s1);                             \
                }                                                                                          \
                _mm512_mask_storeu_ps(o, m0, s0);                                                          \
                _mm512_mask_storeu_ps(o + 16, m1, s1);                                                     \
            }                                                                                              \
        }                                                                                                  \
    }
DEFINE_SLAB(slab_f32, float, pack_f32)
DEFINE_SLAB(slab_bf16, uint16_t, pack_bf16)
#else
#define slab_f32 slab_scalar_f32
#define slab_bf16 slab_scalar_bf16
#endif

#define DEFINE_GEMM(NAME, WT, SLABFN)                                                                         \
    void NAME(float *out, int64_t ldo, const float *x, const WT *w, int64_t T, int64_t C, int64_t OC,          \
              int accumulate) {                                                                                \
        CHECK(T >= 0 && C > 0 && OC > 0 && ldo >= OC, #NAME ": T=%lld C=%lld OC=%lld ldo=%lld", (long long)T,  \
              (long long)C, (long long)OC, (long long)ldo);                                                    \
        if (T == 0) return;                                                                                    \
        const int64_t n_slab = (OC + SLAB - 1) / SLAB;                                                         \
        /* dynamic: a slab's result does not depend on the thread that computes it, and a shared or busy */  \
        /* machine does not stall the step on one descheduled thread                                    */  \
        _Pragma("omp parallel for schedule(dynamic, 1)") for (int64_t s = 0; s < n_slab; s++) {                \
            const int64_t o0 = s * SLAB;                                                                       \
            const int rw = (int)(OC - o0 < SLAB ? OC - o0 : SLAB);                                             \
            SLABFN(out + o0, ldo, x, w + o0 * C, T, C, rw, accumulate);                                        \
        }                                                                                                      \
    }
DEFINE_GEMM(rowgemm_forward, float, slab_f32)
DEFINE_GEMM(rowgemm_forward_bf16, uint16_t, slab_bf16)

void rowgemm_forward_scalar(float *out, int64_t ldo, const float *x, const float *w, int64_t T, int64_t C, int64_t OC,
                            int accumulate) {
    for (int64_t o0 = 0; o0 < OC; o0 += SLAB)
        slab_scalar_f32(out + o0, ldo, x, w + o0 * C, T, C, (int)(OC - o0 < SLAB ? OC - o0 : SLAB), accumulate);
}

void rowgemm_forward_ref(float *out, int64_t ldo, const float *x, const float *w, int64_t T, int64_t C, int64_t OC,
                         int accumulate) {
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < OC; o++) {
            double s = 0;
            for (int64_t c = 0; c < C; c++) s += (double)x[t * C + c] * (double)w[o * C + c];
            float *p = out + t * ldo + o;
            *p = accumulate ? (float)((double)*p + s) : (float)s;
        }
}

void rowgemm_to_bf16(uint16_t *dst, const float *src, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], 4);
        if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) dst[i] = (uint16_t)((u >> 16) | 0x40);  // quiet NaN
        else dst[i] = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    }
}
