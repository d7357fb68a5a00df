// rowgemm.c: batch-invariant x @ w^T for the rollout engine (see rowgemm.h for the invariance argument).
#include "rollout/rowgemm.h"

#include <omp.h>

#include "core/common.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

#define RW_MAX 8   // weight rows per register tile
#define RT_MAX 6   // tokens per register tile

// Activations per token chunk: 128K floats (512 KiB) stay in L2 while a thread sweeps its weight rows.
static int64_t token_chunk(int64_t C) {
    int64_t tc = (int64_t)(128 * 1024) / (C > 0 ? C : 1);
    tc = tc / RT_MAX * RT_MAX;
    return tc < RT_MAX ? RT_MAX : tc;
}

#ifdef __AVX512F__
// Fixed pairwise lane reduction: (i, i+8), then (i, i+4), (i, i+2), (0, 1).
static inline float hsum16(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    __m128 d = _mm_add_ss(c, _mm_movehdup_ps(c));
    return _mm_cvtss_f32(d);
}
static inline __m512 load_w_f32(const float *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
static inline __m512 load_w_bf16(const uint16_t *p, __mmask16 m) {
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// One register tile: out[j, i] (=|+=) sum_c w[i, c] * x[j, c] for i < RW, j < RT. RW, RT are constants
// at every call site, so acc lives in registers.
#define DEFINE_TILE(NAME, WT, LOADW)                                                                          \
    static inline __attribute__((always_inline)) void NAME(const int RW, const int RT, const WT *w,          \
                                                           const float *x, int64_t C, float *out,            \
                                                           int64_t ldo, int accumulate) {                    \
        __m512 acc[RW_MAX][RT_MAX];                                                                           \
        for (int i = 0; i < RW; i++)                                                                          \
            for (int j = 0; j < RT; j++) acc[i][j] = _mm512_setzero_ps();                                     \
        int64_t c = 0;                                                                                        \
        for (; c + 16 <= C; c += 16) {                                                                        \
            __m512 xv[RT_MAX];                                                                                \
            for (int j = 0; j < RT; j++) xv[j] = _mm512_loadu_ps(x + j * C + c);                              \
            for (int i = 0; i < RW; i++) {                                                                    \
                __m512 wv = LOADW(w + i * C + c, (__mmask16)0xFFFF);                                          \
                for (int j = 0; j < RT; j++) acc[i][j] = _mm512_fmadd_ps(wv, xv[j], acc[i][j]);               \
            }                                                                                                 \
        }                                                                                                     \
        if (c < C) {                                                                                          \
            __mmask16 m = (__mmask16)((1u << (C - c)) - 1u);                                                  \
            __m512 xv[RT_MAX];                                                                                \
            for (int j = 0; j < RT; j++) xv[j] = _mm512_maskz_loadu_ps(m, x + j * C + c);                     \
            for (int i = 0; i < RW; i++) {                                                                    \
                __m512 wv = LOADW(w + i * C + c, m);                                                          \
                for (int j = 0; j < RT; j++) acc[i][j] = _mm512_fmadd_ps(wv, xv[j], acc[i][j]);               \
            }                                                                                                 \
        }                                                                                                     \
        for (int j = 0; j < RT; j++)                                                                          \
            for (int i = 0; i < RW; i++) {                                                                    \
                float s = hsum16(acc[i][j]);                                                                  \
                float *o = out + j * ldo + i;                                                                 \
                *o = accumulate ? *o + s : s;                                                                 \
            }                                                                                                 \
    }
DEFINE_TILE(tile_f32, float, load_w_f32)
DEFINE_TILE(tile_bf16, uint16_t, load_w_bf16)

// Hand-unrolled hot tiles: named accumulators stay in registers (GCC keeps a stack copy of the array
// version). The per-element arithmetic is exactly the generic tile's: acc = fma(w, x, acc) over c in
// order from zero, the masked tail, then hsum16; so which tile computes an element does not matter.
static inline void put1(float *o, int accumulate, __m512 v) {
    float s = hsum16(v);
    *o = accumulate ? *o + s : s;
}
#define Z _mm512_setzero_ps()
#define FMA(a, w, x) a = _mm512_fmadd_ps(w, x, a)
// 4 weight rows x 6 tokens
#define K46_ROW(i, LOADW, m)                                                                          \
    do {                                                                                              \
        const __m512 wv = LOADW(w + (i) * C + c, m);                                                  \
        FMA(a##i##0, wv, x0); FMA(a##i##1, wv, x1); FMA(a##i##2, wv, x2);                             \
        FMA(a##i##3, wv, x3); FMA(a##i##4, wv, x4); FMA(a##i##5, wv, x5);                             \
    } while (0)
#define K46_PUT(i)                                                                                    \
    put1(out + 0 * ldo + i, accumulate, a##i##0); put1(out + 1 * ldo + i, accumulate, a##i##1);       \
    put1(out + 2 * ldo + i, accumulate, a##i##2); put1(out + 3 * ldo + i, accumulate, a##i##3);       \
    put1(out + 4 * ldo + i, accumulate, a##i##4); put1(out + 5 * ldo + i, accumulate, a##i##5)
#define DEFINE_K46(NAME, WT, LOADW)                                                                   \
    static void NAME(const WT *w, const float *x, int64_t C, float *out, int64_t ldo, int accumulate) { \
        __m512 a00 = Z, a01 = Z, a02 = Z, a03 = Z, a04 = Z, a05 = Z, a10 = Z, a11 = Z, a12 = Z, a13 = Z, \
               a14 = Z, a15 = Z, a20 = Z, a21 = Z, a22 = Z, a23 = Z, a24 = Z, a25 = Z, a30 = Z, a31 = Z, \
               a32 = Z, a33 = Z, a34 = Z, a35 = Z;                                                    \
        int64_t c = 0;                                                                                \
        for (; c + 16 <= C; c += 16) {                                                                \
            const __m512 x0 = _mm512_loadu_ps(x + c), x1 = _mm512_loadu_ps(x + C + c),                \
                         x2 = _mm512_loadu_ps(x + 2 * C + c), x3 = _mm512_loadu_ps(x + 3 * C + c),    \
                         x4 = _mm512_loadu_ps(x + 4 * C + c), x5 = _mm512_loadu_ps(x + 5 * C + c);    \
            K46_ROW(0, LOADW, (__mmask16)0xFFFF); K46_ROW(1, LOADW, (__mmask16)0xFFFF);               \
            K46_ROW(2, LOADW, (__mmask16)0xFFFF); K46_ROW(3, LOADW, (__mmask16)0xFFFF);               \
        }                                                                                             \
        if (c < C) {                                                                                  \
            const __mmask16 m = (__mmask16)((1u << (C - c)) - 1u);                                    \
            const __m512 x0 = _mm512_maskz_loadu_ps(m, x + c), x1 = _mm512_maskz_loadu_ps(m, x + C + c), \
                         x2 = _mm512_maskz_loadu_ps(m, x + 2 * C + c), x3 = _mm512_maskz_loadu_ps(m, x + 3 * C + c), \
                         x4 = _mm512_maskz_loadu_ps(m, x + 4 * C + c), x5 = _mm512_maskz_loadu_ps(m, x + 5 * C + c); \
            K46_ROW(0, LOADW, m); K46_ROW(1, LOADW, m); K46_ROW(2, LOADW, m); K46_ROW(3, LOADW, m);   \
        }                                                                                             \
        K46_PUT(0); K46_PUT(1); K46_PUT(2); K46_PUT(3);                                               \
    }
DEFINE_K46(k46_f32, float, load_w_f32)
DEFINE_K46(k46_bf16, uint16_t, load_w_bf16)

// 8 weight rows x 1 or 2 tokens (decode), with a prefetch of the next tile's rows
#define K8_ROW(i, LOADW, m, PF)                                                                       \
    do {                                                                                              \
        const __m512 wv = LOADW(w + (i) * C + c, m);                                                  \
        if (PF) _mm_prefetch((const char *)(w + (8 + (i)) * C + c), _MM_HINT_T0);                     \
        FMA(a##i##0, wv, x0);                                                                         \
        if (RT2) FMA(a##i##1, wv, x1);                                                                \
    } while (0)
#define K8_ALL(LOADW, m, PF)                                                                          \
    K8_ROW(0, LOADW, m, PF); K8_ROW(1, LOADW, m, PF); K8_ROW(2, LOADW, m, PF); K8_ROW(3, LOADW, m, PF); \
    K8_ROW(4, LOADW, m, PF); K8_ROW(5, LOADW, m, PF); K8_ROW(6, LOADW, m, PF); K8_ROW(7, LOADW, m, PF)
#define K8_PUT(i)                                                                                     \
    put1(out + i, accumulate, a##i##0);                                                               \
    if (RT2) put1(out + ldo + i, accumulate, a##i##1)
#define DEFINE_K8(NAME, WT, LOADW, RT2_)                                                              \
    static void NAME(const WT *w, const float *x, int64_t C, float *out, int64_t ldo, int accumulate) { \
        enum { RT2 = RT2_ };                                                                          \
        __m512 a00 = Z, a10 = Z, a20 = Z, a30 = Z, a40 = Z, a50 = Z, a60 = Z, a70 = Z;                \
        __m512 a01 = Z, a11 = Z, a21 = Z, a31 = Z, a41 = Z, a51 = Z, a61 = Z, a71 = Z;                \
        int64_t c = 0;                                                                                \
        for (; c + 16 <= C; c += 16) {                                                                \
            const __m512 x0 = _mm512_loadu_ps(x + c), x1 = RT2 ? _mm512_loadu_ps(x + C + c) : Z;      \
            K8_ALL(LOADW, (__mmask16)0xFFFF, 1);                                                      \
        }                                                                                             \
        if (c < C) {                                                                                  \
            const __mmask16 m = (__mmask16)((1u << (C - c)) - 1u);                                    \
            const __m512 x0 = _mm512_maskz_loadu_ps(m, x + c), x1 = RT2 ? _mm512_maskz_loadu_ps(m, x + C + c) : Z; \
            K8_ALL(LOADW, m, 0);                                                                      \
        }                                                                                             \
        K8_PUT(0); K8_PUT(1); K8_PUT(2); K8_PUT(3); K8_PUT(4); K8_PUT(5); K8_PUT(6); K8_PUT(7);       \
    }
DEFINE_K8(k81_f32, float, load_w_f32, 0)
DEFINE_K8(k82_f32, float, load_w_f32, 1)
DEFINE_K8(k81_bf16, uint16_t, load_w_bf16, 0)
DEFINE_K8(k82_bf16, uint16_t, load_w_bf16, 1)
#define HAVE_FAST_TILES 1

#else  // portable fallback with the same lane structure (batch invariant as well)
static inline float wval_f32(const float *p) { return *p; }
static inline float wval_bf16(const uint16_t *p) {
    uint32_t u = (uint32_t)*p << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
#define DEFINE_TILE(NAME, WT, WVAL)                                                                           \
    static void NAME(const int RW, const int RT, const WT *w, const float *x, int64_t C, float *out,         \
                     int64_t ldo, int accumulate) {                                                           \
        for (int i = 0; i < RW; i++)                                                                          \
            for (int j = 0; j < RT; j++) {                                                                    \
                float l[16] = {0};                                                                            \
                for (int64_t c = 0; c < C; c++) l[c % 16] = fmaf(WVAL(w + i * C + c), x[j * C + c], l[c % 16]); \
                float a[8], b[4];                                                                             \
                for (int k = 0; k < 8; k++) a[k] = l[k] + l[k + 8];                                           \
                for (int k = 0; k < 4; k++) b[k] = a[k] + a[k + 4];                                           \
                float s = (b[0] + b[2]) + (b[1] + b[3]);                                                      \
                float *o = out + j * ldo + i;                                                                 \
                *o = accumulate ? *o + s : s;                                                                 \
            }                                                                                                 \
    }
DEFINE_TILE(tile_f32, float, wval_f32)
DEFINE_TILE(tile_bf16, uint16_t, wval_bf16)
#endif

// Dispatch a (rw, rt) tile to a constant-shaped instantiation.
#define DISPATCH(TILE, RWC, rw, rt, w, x, C, out, ldo, acc)                                 \
    do {                                                                                   \
        if (rw == RWC) {                                                                   \
            switch (rt) {                                                                  \
            case 1: TILE(RWC, 1, w, x, C, out, ldo, acc); break;                           \
            case 2: TILE(RWC, 2, w, x, C, out, ldo, acc); break;                           \
            case 3: TILE(RWC, 3, w, x, C, out, ldo, acc); break;                           \
            case 4: TILE(RWC, 4, w, x, C, out, ldo, acc); break;                           \
            case 5: TILE(RWC, 5, w, x, C, out, ldo, acc); break;                           \
            default: TILE(RWC, 6, w, x, C, out, ldo, acc); break;                          \
            }                                                                              \
        } else {                                                                           \
            for (int i_ = 0; i_ < rw; i_++)                                                \
                switch (rt) {                                                              \
                case 1: TILE(1, 1, w + i_ * C, x, C, out + i_, ldo, acc); break;           \
                case 2: TILE(1, 2, w + i_ * C, x, C, out + i_, ldo, acc); break;           \
                case 3: TILE(1, 3, w + i_ * C, x, C, out + i_, ldo, acc); break;           \
                case 4: TILE(1, 4, w + i_ * C, x, C, out + i_, ldo, acc); break;           \
                case 5: TILE(1, 5, w + i_ * C, x, C, out + i_, ldo, acc); break;           \
                default: TILE(1, 6, w + i_ * C, x, C, out + i_, ldo, acc); break;          \
                }                                                                          \
        }                                                                                  \
    } while (0)

#ifdef HAVE_FAST_TILES
// 1 if a hand-unrolled tile handled (rw, rt)
#define FAST_TILES(K46, K81, K82, rw, rt, w, x, C, out, ldo, acc)                                     \
    ((rw) == 4 && (rt) == 6 ? (K46(w, x, C, out, ldo, acc), 1)                                        \
     : (rw) == 8 && (rt) == 1 ? (K81(w, x, C, out, ldo, acc), 1)                                      \
     : (rw) == 8 && (rt) == 2 ? (K82(w, x, C, out, ldo, acc), 1) : 0)
#else
#define FAST_TILES(K46, K81, K82, rw, rt, w, x, C, out, ldo, acc) 0
#endif

#define DEFINE_GEMM(NAME, WT, TILE, K46, K81, K82)                                                            \
    void NAME(float *out, int64_t ldo, const float *x, const WT *w, int64_t T, int64_t C, int64_t OC,          \
              int accumulate) {                                                                                \
        CHECK(T >= 0 && C > 0 && OC > 0 && ldo >= OC, #NAME ": T=%lld C=%lld OC=%lld ldo=%lld", (long long)T,  \
              (long long)C, (long long)OC, (long long)ldo);                                                    \
        const int64_t tc = token_chunk(C);                                                                     \
        for (int64_t t0 = 0; t0 < T; t0 += tc) {                                                               \
            const int64_t nt = T - t0 < tc ? T - t0 : tc;                                                      \
            /* few tokens: 8 weight rows per tile (more streams in flight); else 4 x 6 (compute bound) */      \
            const int RW = nt <= 2 ? 8 : 4;                                                                    \
            const int64_t n_ot = (OC + RW - 1) / RW;                                                           \
            const float *xc = x + t0 * C;                                                                      \
            float *oc = out + t0 * ldo;                                                                        \
            /* dynamic: a tile's result does not depend on the thread that computes it, and a shared or  */ \
            /* busy machine does not stall the step on one descheduled thread                            */ \
            _Pragma("omp parallel for schedule(dynamic, 8)") for (int64_t ot = 0; ot < n_ot; ot++) {           \
                const int64_t o0 = ot * RW;                                                                    \
                const int rw = (int)(OC - o0 < RW ? OC - o0 : RW);                                             \
                const WT *wt = w + o0 * C;                                                                     \
                for (int64_t j = 0; j < nt; j += RT_MAX) {                                                     \
                    const int rt = (int)(nt - j < RT_MAX ? nt - j : RT_MAX);                                   \
                    if (FAST_TILES(K46, K81, K82, rw, rt, wt, xc + j * C, C, oc + j * ldo + o0, ldo, accumulate)) {} \
                    else if (RW == 8) DISPATCH(TILE, 8, rw, rt, wt, xc + j * C, C, oc + j * ldo + o0, ldo, accumulate); \
                    else DISPATCH(TILE, 4, rw, rt, wt, xc + j * C, C, oc + j * ldo + o0, ldo, accumulate);     \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
    }
DEFINE_GEMM(rowgemm_forward, float, tile_f32, k46_f32, k81_f32, k82_f32)
DEFINE_GEMM(rowgemm_forward_bf16, uint16_t, tile_bf16, k46_bf16, k81_bf16, k82_bf16)

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
