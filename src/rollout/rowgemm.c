// rowgemm.c: batch-invariant x @ w^T for the rollout engine (see rowgemm.h for the invariance argument).
//
// Each output out[t, o] is one fixed sum: 16 lanes, lane l an FMA chain from 0 over the columns c = l, l+16,
// l+32, ... (C padded with zero terms to a multiple of 16), then the lanes added as a fixed tree: l + (l+8),
// then + (l+4), + (l+2), + (l+1). Lane chains of length C/16 keep the rounding error near that of a short
// sum. The vector paths compute exactly that: an AVX-512 register (or two AVX2 ones) holds the 16 lanes of one
// (token, row) pair, and a register tile of R weight rows x NT tokens loads each 16-column vector of a weight
// row once and FMAs it against NT token vectors. Weight rows are read in memory order (at batch 1 two long
// sequential streams per thread, what the hardware prefetcher follows best), nothing is packed or transposed,
// and the arithmetic is the same whatever T, the tile or the thread.
#include "rollout/rowgemm.h"

#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf16.h"
#include "core/common.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#define LANES 16  // lanes per output: one AVX-512 vector, two AVX2 ones
#define SLAB 32   // weight rows per scheduling unit: (32, C) stays in L2 while every token tile passes over it
#define RMAX 4    // weight rows per register tile at most (2 at T <= 2; TR above)
#define KC 1024   // columns per block when T > 2: the (TT, KC) token tile (<= 24 KiB) and TR weight rows fit in L1
#define PF_BF16 4096  // bytes: software prefetch distance of the bf16 weight streams at T <= 2
#define TCH 24    // tokens whose lane accumulators wait in part between column blocks: (TCH, SLAB, 16) = 48 KiB

static inline float wval_f32(const float *p) { return *p; }
static inline float wval_bf16(const uint16_t *p) { return bf16_to_f32(*p); }

// The lane tree, shared by the scalar definition and (in vector form) the fast path.
static inline float lane_tree(float L[LANES]) {
    for (int h = LANES / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) L[l] = L[l] + L[l + h];
    return L[0];
}

// Scalar definition for one slab: the portable path, and the arithmetic the vector path reproduces.
#define DEFINE_SLAB_SCALAR(NAME, WT, WVAL)                                                                 \
    static void NAME(float *out, int64_t ldo, const float *x, int64_t ldx, const WT *w, int64_t T, int64_t C, \
                     int rw, const float *bias, int accumulate) {                                          \
        for (int64_t t = 0; t < T; t++)                                                                    \
            for (int r = 0; r < rw; r++) {                                                                 \
                float L[LANES] = {0};                                                                      \
                for (int64_t c0 = 0; c0 < C; c0 += LANES)                                                  \
                    for (int l = 0; l < LANES; l++) {                                                      \
                        const int64_t c = c0 + l;                                                          \
                        const float wv = c < C ? WVAL(w + r * C + c) : 0.0f, xv = c < C ? x[t * ldx + c] : 0.0f; \
                        L[l] = fmaf(wv, xv, L[l]);                                                         \
                    }                                                                                      \
                float sum = lane_tree(L);                                                                  \
                if (bias) sum += bias[r];                                                                  \
                float *o = out + t * ldo + r;                                                              \
                *o = accumulate ? *o + sum : sum;                                                          \
            }                                                                                              \
    }
DEFINE_SLAB_SCALAR(slab_scalar_f32, float, wval_f32)
#if !defined(__AVX512F__) && !(defined(__AVX2__) && defined(__FMA__))
DEFINE_SLAB_SCALAR(slab_scalar_bf16, uint16_t, wval_bf16)
#endif

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
// lane_tree from (l, l+4) on, over the 8 lanes a = lanes 0-7 + lanes 8-15 (the (l, l+8) step, done by the caller).
static inline float hsum_tree8(__m256 a) {
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}
#endif

#ifdef __AVX512F__
#define ROWGEMM_ISA "avx512"
#define TR 4   // weight rows per register tile when T > 2
#define TT 6   // tokens per register tile when T > 2: TR*TT accumulators + TR weight vectors + 1 <= 32 zmm
static inline __m512 ld16_f32(const float *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
static inline __m512 ld16_bf16(const uint16_t *p, __mmask16 m) {
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// lane_tree on a vector: (l, l+8), (l, l+4), (l, l+2), (l, l+1).
static inline float hsum_tree(__m512 v) {
    return hsum_tree8(_mm256_add_ps(_mm512_castps512_ps256(v),
                                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

// lane_tree of four vectors at once: [tree(a), tree(b), tree(c), tree(d)]. Each add takes the same two operands
// as the scalar tree's (IEEE addition is commutative), so the sums are bitwise equal to hsum_tree's; it costs
// 15 instructions for four outputs where four hsum_trees cost ~32, and the 4 outputs leave in one store.
static inline __m128 hsum_tree_x4(__m512 a, __m512 b, __m512 c, __m512 d) {
    // (l, l+8): 128-bit quarters q0 q1 of each vector + q2 q3; ab = [a8 | b8], cd = [c8 | d8]
    const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
    // (l, l+4): quarter k of s holds the 4 lanes of output k
    const __m512 s = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
    // (l, l+2), then (l, l+1), inside each quarter: element 0 of quarter k is output k
    const __m512 s2 = _mm512_add_ps(s, _mm512_shuffle_ps(s, s, _MM_SHUFFLE(1, 0, 3, 2)));
    const __m512 s3 = _mm512_add_ps(s2, _mm512_shuffle_ps(s2, s2, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castps512_ps128(_mm512_maskz_compress_ps(0x1111, s3));
}

// Columns [c0, c1) of the lane sums for rows wr[0..R-1] x tokens x (NT, ldx) (rows >= rw repeat a valid row;
// their results are dropped). The lane accumulators start at 0 (first) or from part, and end in out[t*ldo + r]
// (= or +=, after the lane tree; last) or back in part (NT, SLAB, LANES) [rows 0..R-1]: storing and reloading a
// lane chain is exact, so column blocks do not change the sum. Tile row r's output is column r * os (os = 1,
// or half a slab for the batch-1 pair). R and NT are constants at every call site, so the tile stays in
// registers.
#define DEFINE_TILE(NAME, WT, LD)                                                                              \
    static inline __attribute__((always_inline)) void NAME(                                                    \
        const int R, const int NT, float *out, int64_t ldo, const float *restrict x, int64_t ldx, int64_t c0,  \
        int64_t c1, const WT *const *wr, int rw, const float *bias, int accumulate, float *part, int first,   \
        int last, int os) {                                                                                    \
        __m512 acc[RMAX][TT];                                                                                  \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                                    \
            _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++)                                               \
                acc[r][t] = first ? _mm512_setzero_ps() : _mm512_load_ps(part + (t * SLAB + r) * LANES);       \
        int64_t c = c0;                                                                                        \
        /* unrolled 4x: fp32 at batch 1 streams 0.92-0.97 of a read loop over the same bytes, 0.82-0.86 rolled */ \
        _Pragma("GCC unroll 4") for (; c + LANES <= c1; c += LANES) {                                         \
            __m512 wv[RMAX];                                                                                   \
            /* bf16 at batch 1: 4 KiB software prefetch ahead of both streams (+5% on the 1.2 GB sweep; fp32 -4%) */ \
            if (R == 2 && sizeof(WT) == 2) {                                                                   \
                _mm_prefetch((const char *)(wr[0] + c) + PF_BF16, _MM_HINT_T0);                                \
                _mm_prefetch((const char *)(wr[1] + c) + PF_BF16, _MM_HINT_T0);                                \
            }                                                                                                  \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) wv[r] = LD(wr[r] + c, 0xFFFF);                 \
            _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {                                             \
                __m512 xv = _mm512_loadu_ps(x + t * ldx + c);                                                  \
                /* one load per token vector: GCC otherwise folds it into all R FMAs (28 loads per 24 FMAs, */ \
                /* load-bound; with this, 10 per 24: T = 64, C = 1024 goes from 270 to 350 GFLOP/s)          */ \
                __asm__("" : "+v"(xv));                                                                        \
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                            \
                    acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);                                         \
            }                                                                                                  \
        }                                                                                                      \
        if (c < c1) { /* masked tail (last block only): zero terms, as in the scalar definition */             \
            const __mmask16 m = (__mmask16)((1u << (c1 - c)) - 1u);                                            \
            __m512 wv[RMAX];                                                                                   \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) wv[r] = LD(wr[r] + c, m);                      \
            _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {                                             \
                const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * ldx + c);                                   \
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                            \
                    acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);                                         \
            }                                                                                                  \
        }                                                                                                      \
        /* the T > 2 tile: a token's 4 rows are adjacent outputs (% R: R == 2 tiles compile this unused) */  \
        if (last && R == 4 && os == 1) {                                                                       \
            const __mmask8 m = (__mmask8)((1u << rw) - 1u);                                                    \
            _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {                                             \
                float *o = out + t * ldo;                                                                      \
                __m128 s = hsum_tree_x4(acc[0][t], acc[1 % R][t], acc[2 % R][t], acc[3 % R][t]);               \
                if (bias) s = _mm_add_ps(s, _mm_maskz_loadu_ps(m, bias));                                      \
                if (accumulate) s = _mm_add_ps(_mm_maskz_loadu_ps(m, o), s);                                   \
                _mm_mask_storeu_ps(o, m, s);                                                                   \
            }                                                                                                  \
            return;                                                                                            \
        }                                                                                                      \
        _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++)                                                   \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                              \
                if (!last) {                                                                                   \
                    _mm512_store_ps(part + (t * SLAB + r) * LANES, acc[r][t]);                                 \
                } else if (r < rw) {                                                                           \
                    float *o = out + t * ldo + r * os;                                                         \
                    float s = hsum_tree(acc[r][t]);                                                            \
                    if (bias) s += bias[r * os];                                                               \
                    *o = accumulate ? *o + s : s;                                                              \
                }                                                                                              \
            }                                                                                                  \
    }
DEFINE_TILE(tile_f32, float, ld16_f32)
DEFINE_TILE(tile_bf16, uint16_t, ld16_bf16)
// The T > 2 tile for nt (1..TT) tokens; R and NT are compile-time constants in each case.
#define TILE_NT(TILE, nt, ...)                                                                                 \
    switch (nt) {                                                                                              \
    case 1: TILE(4, 1, __VA_ARGS__); break;                                                                    \
    case 2: TILE(4, 2, __VA_ARGS__); break;                                                                    \
    case 3: TILE(4, 3, __VA_ARGS__); break;                                                                    \
    case 4: TILE(4, 4, __VA_ARGS__); break;                                                                    \
    case 5: TILE(4, 5, __VA_ARGS__); break;                                                                    \
    default: TILE(4, 6, __VA_ARGS__); break;                                                                   \
    }

#elif defined(__AVX2__) && defined(__FMA__)
// AVX2 + FMA (x86-64-v3 CPUs without AVX-512): the 16 lanes of a (token, row) pair are two 8-float registers,
// lanes 0-7 and 8-15, with the same FMA chains; the tree's (l, l+8) step adds the two. Same tiles as above, but
// 16 ymm registers hold 2-row x 3-token tiles for T > 2 (12 accumulators, 2 weight halves, 1 token half).
#define ROWGEMM_ISA "avx2"
#define TR 2
#define TT 3
static inline __m256 ld8_f32(const float *p) { return _mm256_loadu_ps(p); }
static inline __m256 ld8_bf16(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

// The AVX-512 tile's contract (above), on register pairs.
#define DEFINE_TILE(NAME, WT, LD)                                                                              \
    static inline __attribute__((always_inline)) void NAME(                                                    \
        const int R, const int NT, float *out, int64_t ldo, const float *restrict x, int64_t ldx, int64_t c0,  \
        int64_t c1, const WT *const *wr, int rw, const float *bias, int accumulate, float *part, int first,   \
        int last, int os) {                                                                                    \
        __m256 acc[RMAX][TT][2];                                                                               \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                                    \
            _Pragma("GCC unroll 3") for (int t = 0; t < NT; t++)                                               \
                for (int h = 0; h < 2; h++)                                                                    \
                    acc[r][t][h] = first ? _mm256_setzero_ps()                                                 \
                                         : _mm256_load_ps(part + (t * SLAB + r) * LANES + 8 * h);              \
        int64_t c = c0;                                                                                        \
        _Pragma("GCC unroll 2") for (; c + LANES <= c1; c += LANES) {                                          \
            if (R == 2 && sizeof(WT) == 2) {                                                                   \
                _mm_prefetch((const char *)(wr[0] + c) + PF_BF16, _MM_HINT_T0);                                \
                _mm_prefetch((const char *)(wr[1] + c) + PF_BF16, _MM_HINT_T0);                                \
            }                                                                                                  \
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {                                              \
                __m256 wv[RMAX];                                                                               \
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) wv[r] = LD(wr[r] + c + 8 * h);             \
                _Pragma("GCC unroll 3") for (int t = 0; t < NT; t++) {                                         \
                    __m256 xv = _mm256_loadu_ps(x + t * ldx + c + 8 * h);                                      \
                    __asm__("" : "+x"(xv)); /* one load per token vector, not one per FMA */                   \
                    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                        \
                        acc[r][t][h] = _mm256_fmadd_ps(wv[r], xv, acc[r][t][h]);                               \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
        if (c < c1) { /* tail (last block only): zero-padded copies, the zero terms of the scalar definition */\
            const int n = (int)(c1 - c);                                                                       \
            _Alignas(32) WT wb[RMAX][LANES];                                                                   \
            _Alignas(32) float xb[TT][LANES];                                                                  \
            for (int r = 0; r < R; r++) {                                                                      \
                memset(wb[r], 0, sizeof wb[r]);                                                                \
                memcpy(wb[r], wr[r] + c, (size_t)n * sizeof(WT));                                              \
            }                                                                                                  \
            for (int t = 0; t < NT; t++) {                                                                     \
                memset(xb[t], 0, sizeof xb[t]);                                                                \
                memcpy(xb[t], x + t * ldx + c, (size_t)n * sizeof(float));                                     \
            }                                                                                                  \
            for (int h = 0; h < 2; h++) {                                                                      \
                __m256 wv[RMAX];                                                                               \
                for (int r = 0; r < R; r++) wv[r] = LD(wb[r] + 8 * h);                                         \
                for (int t = 0; t < NT; t++) {                                                                 \
                    const __m256 xv = _mm256_load_ps(xb[t] + 8 * h);                                           \
                    for (int r = 0; r < R; r++) acc[r][t][h] = _mm256_fmadd_ps(wv[r], xv, acc[r][t][h]);       \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
        _Pragma("GCC unroll 3") for (int t = 0; t < NT; t++)                                                   \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                              \
                if (!last) {                                                                                   \
                    _mm256_store_ps(part + (t * SLAB + r) * LANES, acc[r][t][0]);                              \
                    _mm256_store_ps(part + (t * SLAB + r) * LANES + 8, acc[r][t][1]);                          \
                } else if (r < rw) {                                                                           \
                    float *o = out + t * ldo + r * os;                                                         \
                    float s = hsum_tree8(_mm256_add_ps(acc[r][t][0], acc[r][t][1]));                           \
                    if (bias) s += bias[r * os];                                                               \
                    *o = accumulate ? *o + s : s;                                                              \
                }                                                                                              \
            }                                                                                                  \
    }
DEFINE_TILE(tile_f32, float, ld8_f32)
DEFINE_TILE(tile_bf16, uint16_t, ld8_bf16)
#define TILE_NT(TILE, nt, ...)                                                                                 \
    switch (nt) {                                                                                              \
    case 1: TILE(2, 1, __VA_ARGS__); break;                                                                    \
    case 2: TILE(2, 2, __VA_ARGS__); break;                                                                    \
    default: TILE(2, 3, __VA_ARGS__); break;                                                                   \
    }
#endif

#ifdef ROWGEMM_ISA

// One slab (rw <= SLAB rows of w) against all T tokens. T <= 2: rows r and r + ceil(rw/2) together over all
// columns, so each thread reads its weights as two sequential streams half a slab apart and runs two
// independent lane chains (one FMA chain alone is 4 cycles per 64 bytes). On the 2.4 GB decode sweep (Zen 5),
// 8-row tiles (8 page-sized streams per thread) streamed 59-63 GB/s where one row at a time streamed 67-73,
// and the pair adds 2-4% to that. Larger T: TR-row x TT-token tiles (AVX-512: 4 x 6, 24 FMAs per 10 loads) over
// column blocks of KC, so the (TT, KC) token tile stays in L1 for all of the slab's row groups, with the lane
// accumulators of TCH tokens parked in part between blocks.
#define DEFINE_SLAB(NAME, WT, TILE)                                                                         \
    static void NAME(float *out, int64_t ldo, const float *x, int64_t ldx, const WT *w, int64_t T, int64_t C, \
                     int rw, const float *bias, int accumulate) {                                           \
        _Alignas(64) float part[TCH * SLAB * LANES];                                                        \
        if (T <= 2) {                                                                                       \
            const int hf = (rw + 1) / 2;                                                                    \
            for (int r0 = 0; r0 < hf; r0++) {                                                               \
                const int two = r0 + hf < rw;   /* else the second stream repeats the first; dropped */     \
                const WT *wr[RMAX] = {w + (int64_t)r0 * C, w + (int64_t)(two ? r0 + hf : r0) * C};          \
                const float *b = bias ? bias + r0 : NULL;                                                   \
                if (T == 1) TILE(2, 1, out + r0, ldo, x, ldx, 0, C, wr, 1 + two, b, accumulate, part, 1, 1, hf); \
                else TILE(2, 2, out + r0, ldo, x, ldx, 0, C, wr, 1 + two, b, accumulate, part, 1, 1, hf);   \
            }                                                                                               \
            return;                                                                                         \
        }                                                                                                   \
        for (int64_t t00 = 0; t00 < T; t00 += TCH) {                                                        \
            const int64_t t01 = T - t00 < TCH ? T : t00 + TCH;                                              \
            for (int64_t c0 = 0; c0 < C; c0 += KC) {                                                        \
                const int64_t c1 = C - c0 < KC ? C : c0 + KC;                                               \
                const int first = c0 == 0, last = c1 == C;                                                  \
                for (int64_t t0 = t00; t0 < t01; t0 += TT) {                                                \
                    const int nt = (int)(t01 - t0 < TT ? t01 - t0 : TT);                                    \
                    for (int r0 = 0; r0 < rw; r0 += TR) {                                                   \
                        const int gw = rw - r0 < TR ? rw - r0 : TR;                                         \
                        const WT *wr[RMAX];                                                                 \
                        for (int r = 0; r < RMAX; r++) wr[r] = w + (int64_t)(r0 + (r < gw ? r : 0)) * C;    \
                        float *o = out + t0 * ldo + r0, *pt = part + ((t0 - t00) * SLAB + r0) * LANES;      \
                        const float *xt = x + t0 * ldx;                                                     \
                        const float *b = bias ? bias + r0 : NULL;                                           \
                        TILE_NT(TILE, nt, o, ldo, xt, ldx, c0, c1, wr, gw, b, accumulate, pt, first, last, 1); \
                    }                                                                                       \
                }                                                                                           \
            }                                                                                               \
        }                                                                                                   \
    }
DEFINE_SLAB(slab_f32, float, tile_f32)
DEFINE_SLAB(slab_bf16, uint16_t, tile_bf16)
#else
#define ROWGEMM_ISA "scalar"
#define slab_f32 slab_scalar_f32
#define slab_bf16 slab_scalar_bf16
#endif

// Work split of one parallel region over n independent units (slabs). Thread t owns the contiguous range
// [t*n/nt, (t+1)*n/nt) and takes it front to back one unit at a time, so at batch 1 its weights are one
// sequential stream. A thread whose range is empty takes the back half of the fullest other range and goes on
// front to back there. The tail then costs about one unit (a 32-row slab, ~4 us at batch 1) where dynamic
// chunks of 1/8 of a thread's share cost half a chunk on average, at ~200 products per decode step; and a
// descheduled thread still loses its work to the other. A unit's result does not depend on who computes it.
typedef struct {
    _Alignas(64) _Atomic uint64_t lohi;   // lo | hi << 32: the owner's remaining units [lo, hi)
} split_range;

static void split_init(split_range *rg, int nt, int64_t n) {
    for (int t = 0; t < nt; t++)
        atomic_init(&rg[t].lohi, (uint64_t)(n * t / nt) | (uint64_t)(n * (t + 1) / nt) << 32);
}

// The next unit for thread t, or -1 when all are taken.
static int64_t split_next(split_range *rg, int nt, int t) {
    uint64_t v = atomic_load_explicit(&rg[t].lohi, memory_order_relaxed);
    for (;;) {
        const uint32_t lo = (uint32_t)v, hi = (uint32_t)(v >> 32);
        if (lo >= hi) break;
        if (atomic_compare_exchange_weak_explicit(&rg[t].lohi, &v, v + 1, memory_order_relaxed, memory_order_relaxed))
            return lo;
    }
    for (;;) {
        int best = -1;
        uint32_t best_n = 0;
        for (int u = 0; u < nt; u++) {
            const uint64_t w = atomic_load_explicit(&rg[u].lohi, memory_order_relaxed);
            const uint32_t lo = (uint32_t)w, hi = (uint32_t)(w >> 32);
            if (hi > lo && hi - lo > best_n) { best = u; best_n = hi - lo; }
        }
        if (best < 0) return -1;
        uint64_t w = atomic_load_explicit(&rg[best].lohi, memory_order_relaxed);
        const uint32_t lo = (uint32_t)w, hi = (uint32_t)(w >> 32);
        if (lo >= hi) continue;
        const uint32_t mid = lo + (hi - lo) / 2;   // the victim keeps [lo, mid), the thief gets [mid, hi)
        if (!atomic_compare_exchange_strong_explicit(&rg[best].lohi, &w, (uint64_t)lo | (uint64_t)mid << 32,
                                                     memory_order_relaxed, memory_order_relaxed))
            continue;
        // only the owner writes an empty range; others just read it, so a plain store publishes the new one
        atomic_store_explicit(&rg[t].lohi, (uint64_t)(mid + 1) | (uint64_t)hi << 32, memory_order_relaxed);
        return mid;
    }
}

// The slab's rows of B (rw x r, 4 KiB at rank 32) are requested before its product: read cold after the product
// they stall on memory latency, a few hundred ns per slab, which cost the 8-sequence decode of Qwen3-0.6B ~3%
// of its speed; prefetched, they arrive while the slab's (rw, C) weights stream.
static inline void lora_b_prefetch(const float *p, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(p + i, 0, 3);
}

// Rows of A per unit of the side path's first phase: u (T, r) of each LoRA output splits into r / LORA_ROWS units.
#define LORA_ROWS 8

// All slabs of all outputs form one index space, so fused products (q/k/v, gate/up) share one parallel region
// and one tail, split by split_next. Outputs with a LoRA side path first get their u = s·(x·Aᵀ) (T, r), units of
// LORA_ROWS rows of A dealt round-robin before a barrier; then the slab that computes rows [o0, o0 + rw) adds
// u·B[o0 .. o0+rw)ᵀ to them right after its product, so no other thread ever touches those rows in between.
#define DEFINE_GEMM(NAME, MULTI, WT, WF, SLABFN)                                                               \
    void MULTI(const rowgemm_out *outs, int n, const float *x, int64_t T, int64_t C, int accumulate) {         \
        CHECK(n >= 1 && n <= ROWGEMM_MAX_OUTS && T >= 0 && C > 0, #MULTI ": n=%d T=%lld C=%lld", n,            \
              (long long)T, (long long)C);                                                                     \
        int64_t first[ROWGEMM_MAX_OUTS + 1] = {0}, ufirst[ROWGEMM_MAX_OUTS + 1] = {0};                         \
        int64_t uoff[ROWGEMM_MAX_OUTS] = {0}, un = 0;                                                          \
        for (int j = 0; j < n; j++) {                                                                          \
            CHECK(outs[j].OC > 0 && outs[j].ldo >= outs[j].OC && outs[j].WF, #MULTI ": out %d OC=%lld ldo=%lld", \
                  j, (long long)outs[j].OC, (long long)outs[j].ldo);                                           \
            first[j + 1] = first[j] + (outs[j].OC + SLAB - 1) / SLAB;                                          \
            const int64_t r = outs[j].lora_a ? outs[j].lora_r : 0;                                             \
            CHECK(!outs[j].lora_a || (r >= 1 && outs[j].lora_b), #MULTI ": out %d LoRA r=%lld B=%p", j,         \
                  (long long)r, (const void *)outs[j].lora_b);                                                 \
            ufirst[j + 1] = ufirst[j] + (r + LORA_ROWS - 1) / LORA_ROWS;                                       \
            uoff[j] = un;                                                                                      \
            un += T * r;                                                                                       \
        }                                                                                                      \
        if (T == 0) return;                                                                                    \
        /* Token rows a multiple of 1 KiB apart map to a few L1 sets, which the 6-token tile then thrashes  */ \
        /* (C = 1024, T = 64: -15%), so for T >= 3 such tokens are copied to rows one cache line longer.    */ \
        const float *xp = x;                                                                                   \
        int64_t ldx = C;                                                                                       \
        float *xbuf = NULL;                                                                                    \
        if (T >= 3 && C % 256 == 0) {                                                                          \
            ldx = C + 16;                                                                                      \
            xbuf = rlc_alloc((size_t)(T * ldx) * sizeof(float));                                               \
            for (int64_t t = 0; t < T; t++) memcpy(xbuf + t * ldx, x + t * C, (size_t)C * sizeof(float));      \
            xp = xbuf;                                                                                         \
        }                                                                                                      \
        float *u = un ? rlc_alloc((size_t)un * sizeof(float)) : NULL; /* (T, r_j) per LoRA output at uoff */  \
        const int nt = omp_get_max_threads();                                                                  \
        split_range *rg = aligned_alloc(64, (size_t)nt * sizeof(split_range));                                 \
        CHECK(rg && first[n] < ((int64_t)1 << 31), #MULTI ": %d work ranges over %lld slabs", nt,             \
              (long long)first[n]);                                                                            \
        split_init(rg, nt, first[n]);                                                                          \
        _Pragma("omp parallel num_threads(nt)") {                                                              \
            const int th = omp_get_thread_num(), nth = omp_get_num_threads();                                  \
            if (un) {                                                                                          \
                for (int64_t s = th; s < ufirst[n]; s += nth) {                                                \
                    int j = 0;                                                                                 \
                    while (s >= ufirst[j + 1]) j++;                                                            \
                    const rowgemm_out *q = &outs[j];                                                           \
                    const int64_t r = q->lora_r, k0 = (s - ufirst[j]) * LORA_ROWS;                             \
                    const int rw = (int)(r - k0 < LORA_ROWS ? r - k0 : LORA_ROWS);                             \
                    float *uj = u + uoff[j];                                                                   \
                    slab_f32(uj + k0, r, xp, ldx, q->lora_a + k0 * C, T, C, rw, NULL, 0);                      \
                    for (int64_t t = 0; t < T; t++)                                                            \
                        for (int k = 0; k < rw; k++) uj[t * r + k0 + k] *= q->lora_s;                          \
                }                                                                                              \
                _Pragma("omp barrier")                                                                         \
            }                                                                                                  \
            for (int64_t s; (s = split_next(rg, nt, th)) >= 0;) {                                              \
                int j = 0;                                                                                     \
                while (s >= first[j + 1]) j++;                                                                 \
                const rowgemm_out *q = &outs[j];                                                               \
                const int64_t o0 = (s - first[j]) * SLAB;                                                      \
                const int rw = (int)(q->OC - o0 < SLAB ? q->OC - o0 : SLAB);                                   \
                if (q->lora_a) lora_b_prefetch(q->lora_b + o0 * q->lora_r, (int64_t)rw * q->lora_r);            \
                SLABFN(q->out + o0, q->ldo, xp, ldx, q->WF + o0 * C, T, C, rw, q->bias ? q->bias + o0 : NULL,  \
                       accumulate);                                                                            \
                if (q->lora_a)                                                                                 \
                    slab_f32(q->out + o0, q->ldo, u + uoff[j], q->lora_r, q->lora_b + o0 * q->lora_r, T,       \
                             q->lora_r, rw, NULL, 1);                                                          \
            }                                                                                                  \
        }                                                                                                      \
        free(rg);                                                                                              \
        rlc_free(u);                                                                                           \
        rlc_free(xbuf);                                                                                        \
    }                                                                                                          \
    void NAME(float *out, int64_t ldo, const float *x, const WT *w, int64_t T, int64_t C, int64_t OC,          \
              int accumulate) {                                                                                \
        rowgemm_out o = {.out = out, .ldo = ldo, .OC = OC};                                                    \
        o.WF = w;                                                                                              \
        MULTI(&o, 1, x, T, C, accumulate);                                                                     \
    }
DEFINE_GEMM(rowgemm_forward, rowgemm_forward_multi, float, w, slab_f32)
DEFINE_GEMM(rowgemm_forward_bf16, rowgemm_forward_multi_bf16, uint16_t, w16, slab_bf16)

void rowgemm_forward_scalar(float *out, int64_t ldo, const float *x, const float *w, const float *bias, int64_t T,
                            int64_t C, int64_t OC, int accumulate) {
    for (int64_t o0 = 0; o0 < OC; o0 += SLAB)
        slab_scalar_f32(out + o0, ldo, x, C, w + o0 * C, T, C, (int)(OC - o0 < SLAB ? OC - o0 : SLAB),
                        bias ? bias + o0 : NULL, accumulate);
}

void rowgemm_forward_ref(float *out, int64_t ldo, const float *x, const float *w, const float *bias, int64_t T,
                         int64_t C, int64_t OC, int accumulate) {
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < OC; o++) {
            double s = 0;
            for (int64_t c = 0; c < C; c++) s += (double)x[t * C + c] * (double)w[o * C + c];
            if (bias) s += bias[o];
            float *p = out + t * ldo + o;
            *p = accumulate ? (float)((double)*p + s) : (float)s;
        }
}

void rowgemm_forward_lora_scalar(const rowgemm_out *o, const float *x, int64_t T, int64_t C, int accumulate) {
    CHECK(o->w && o->lora_a && o->lora_b && o->lora_r >= 1, "rowgemm_forward_lora_scalar: fp32 weights and A, B");
    const int64_t r = o->lora_r;
    rowgemm_forward_scalar(o->out, o->ldo, x, o->w, o->bias, T, C, o->OC, accumulate);
    float *u = rlc_alloc((size_t)(T * r) * sizeof(float));   // (T, r)
    rowgemm_forward_scalar(u, r, x, o->lora_a, NULL, T, C, r, 0);
    for (int64_t i = 0; i < T * r; i++) u[i] *= o->lora_s;
    rowgemm_forward_scalar(o->out, o->ldo, u, o->lora_b, NULL, T, r, o->OC, 1);
    rlc_free(u);
}

void rowgemm_forward_lora_ref(const rowgemm_out *o, const float *x, int64_t T, int64_t C, int accumulate) {
    CHECK(o->w && o->lora_a && o->lora_b && o->lora_r >= 1, "rowgemm_forward_lora_ref: fp32 weights and A, B");
    const int64_t r = o->lora_r;
    double *u = rlc_malloc((size_t)r * sizeof(double));   // (r) one token's x·Aᵀ
    for (int64_t t = 0; t < T; t++) {
        for (int64_t k = 0; k < r; k++) {
            double acc = 0;
            for (int64_t c = 0; c < C; c++) acc += (double)x[t * C + c] * (double)o->lora_a[k * C + c];
            u[k] = acc * (double)o->lora_s;
        }
        for (int64_t j = 0; j < o->OC; j++) {
            double acc = o->bias ? (double)o->bias[j] : 0.0;
            for (int64_t c = 0; c < C; c++) acc += (double)x[t * C + c] * (double)o->w[j * C + c];
            for (int64_t k = 0; k < r; k++) acc += u[k] * (double)o->lora_b[j * r + k];
            float *p = o->out + t * o->ldo + j;
            *p = accumulate ? (float)((double)*p + acc) : (float)acc;
        }
    }
    free(u);
}

const char *rowgemm_isa(void) { return ROWGEMM_ISA; }

void rowgemm_to_bf16(uint16_t *dst, const float *src, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) dst[i] = bf16_from_f32(src[i]);
}
