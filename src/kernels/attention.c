// attention.c: packed, causal (within each sequence), GQA attention, forward and backward.
//
// attention_forward / attention_backward are flash-attention-2 style. The g = nh/nkv query heads that share
// a kv head are stacked into one block (rows r = i*g + j for token t0+i, head h0+j), so each block product
// has g times more rows. Queries and keys are blocked (powers of two chosen per sequence length); the
// forward keeps an online softmax (running max m, running sum l) and saves lse = m + log(l); the backward
// recomputes P = exp(S - lse) block by block with Di = rowsum(dO * out). Only key blocks of the query's own
// sequence at or before the causal diagonal are visited. Nothing is O(T^2): the scratch per thread is a few
// (block x D) and (block x block) tiles (plus, in the one-pass backward, one sequence's (len*g, D) copies).
//
// Score tiles are kept transposed, ST (keys x query rows): the softmax then runs down columns, 16 query rows
// per AVX-512 vector with no horizontal reductions, and every block product has a row-major right operand.
// The block products are an AVX-512 register-tiled kernel (6 x 64 tiles, operands read in place: no
// packing); without AVX-512 they go through backend_sgemm. In blocks that straddle the causal diagonal the
// kernel skips the register tiles (and the parts of the sums) that the mask zeroes.
//
// Determinism: every output element is owned by one task (a sequence x kv head [x block]), and a task runs
// its block loop in a fixed order on one thread. So results do not depend on which thread runs which task,
// nor on the thread count; tasks are handed out dynamically (longest first) for load balance, which is safe
// for exactly that reason. The backward path (one pass vs two passes, see attention_backward) is chosen from
// the shapes only, never from the thread count.
//
// The dense oracles (attention_forward_ref / attention_backward_ref and their _sw forms) are in attention_ref.c.
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/common.h"
#include "kernels/attention_check.h"
#include "kernels/kmath.h"

#if defined(__AVX512F__) && !defined(RLC_ATT_NO_SIMD)
#define ATT_SIMD 1
#define ATT_AVX2 0
#include <immintrin.h>
#elif defined(__AVX2__) && defined(__FMA__) && !defined(RLC_ATT_NO_SIMD)
#define ATT_SIMD 0
#define ATT_AVX2 1
#include <immintrin.h>
#else
#define ATT_SIMD 0
#define ATT_AVX2 0
#endif

// Largest query / key block (tokens of one sequence). Per sequence: min(max, next_pow2(len)).
#ifndef ATT_BQ_MAX
#define ATT_BQ_MAX 64
#endif
#ifndef ATT_BK_MAX
#define ATT_BK_MAX 64
#endif

// "No window": larger than any key offset, small enough that lim - ATT_NO_WINDOW stays inside int32.
#define ATT_NO_WINDOW (1 << 30)
static int64_t win_of(int window) { return window > 0 ? window : ATT_NO_WINDOW; }
// First key of the key-block grid (blocks of Bk from s0) that query t0 can see with window win.
static int64_t first_key_block(int64_t s0, int64_t t0, int64_t win, int Bk) {
    int64_t lo = t0 - win + 1;
    if (lo <= s0) return s0;
    return s0 + ((lo - s0) / Bk) * Bk;
}

static int pow2_ceil(int n) {
    int p = 1;
    while (p < n) p <<= 1;
    return p;
}
static int blk_q(int len) { int p = pow2_ceil(len); return p < ATT_BQ_MAX ? p : ATT_BQ_MAX; }
static int blk_k(int len) { int p = pow2_ceil(len); return p < ATT_BK_MAX ? p : ATT_BK_MAX; }

// ---- block products -------------------------------------------------------------------------------------------
// Causal structure of a (key block, query block) pair, for skipping work that the mask zeroes: key c (local to
// the key block) is visible to stacked query row r iff c <= lim0 + rq[r] (lim0 = t0 - k0, rq[r] = r / g).
enum { CZ_KEYS_X_Q = 1,   // C rows = keys, C columns = query rows (ST, dPT): skip fully masked tiles
       CZ_Q_SUM_KEYS,     // C rows = query rows, sum over keys (O += P V, dQ += dS K): stop at the last visible key
       CZ_KEYS_SUM_Q };   // C rows = keys, sum over query rows (dV, dK): start at the first row that sees the tile
typedef struct {
    int mode;
    int64_t lim0;
    const int32_t *rq;
} att_causal;

// The kk range [*k0, *k1) of register tile rows r0..r0+R-1, columns c0..c0+w-1 that can be nonzero.
static inline void causal_range(const att_causal *cz, int64_t r0, int R, int64_t c0, int64_t w, int64_t K,
                                int64_t *k0, int64_t *k1) {
    if (cz->mode == CZ_KEYS_X_Q) {
        if (r0 > cz->lim0 + cz->rq[c0 + w - 1]) *k1 = 0;     // every key of the tile is after every query
    } else if (cz->mode == CZ_Q_SUM_KEYS) {
        int64_t last = cz->lim0 + cz->rq[r0 + R - 1] + 1;    // keys visible to the tile's last row
        if (last < *k1) *k1 = last;
    } else {
        int64_t lo = 0, hi = K;                               // first query row r with lim0 + rq[r] >= r0
        while (lo < hi) {
            int64_t mid = (lo + hi) / 2;
            if (cz->lim0 + cz->rq[mid] >= r0) hi = mid; else lo = mid + 1;
        }
        *k0 = lo;
    }
}

// C (M, N) = alpha * A B, or C += alpha * A B when acc. A(r, kk) = A[r*ars + kk*aks] (row-major when aks == 1,
// transposed when ars == 1); B (K, N) row-major with row stride ldb; C row stride ldc.
#if ATT_SIMD
static inline __mmask16 tail_mask(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u); }

#define MK_R 6    // rows per register tile
#define MK_NV 4   // 16-float vectors per register tile row (64 columns): 24 accumulators
// Accumulators are named variables (not an array) so that GCC keeps all 24 in registers; the R/NV tests
// fold away in each instantiation. The last vector of a row is loaded/stored under the tail mask lm.
static inline __attribute__((always_inline)) void mk_tile(const int R, const int NV, int64_t K, const float *A,
                                                          int64_t ars, int64_t aks, const float *B, int64_t ldb,
                                                          float *C, int64_t ldc, float alpha, int acc, __mmask16 lm) {
    const __m512 z = _mm512_setzero_ps();
    __m512 c00 = z, c01 = z, c02 = z, c03 = z, c10 = z, c11 = z, c12 = z, c13 = z, c20 = z, c21 = z, c22 = z, c23 = z;
    __m512 c30 = z, c31 = z, c32 = z, c33 = z, c40 = z, c41 = z, c42 = z, c43 = z, c50 = z, c51 = z, c52 = z, c53 = z;
    const __mmask16 m0 = NV == 1 ? lm : 0xFFFF, m1 = NV == 2 ? lm : 0xFFFF, m2 = NV == 3 ? lm : 0xFFFF, m3 = lm;
    for (int64_t kk = 0; kk < K; kk++) {
        const float *b = B + kk * ldb, *a = A + kk * aks;
        __m512 b0 = z, b1 = z, b2 = z, b3 = z;
        b0 = _mm512_maskz_loadu_ps(m0, b);
        if (NV > 1) b1 = _mm512_maskz_loadu_ps(m1, b + 16);
        if (NV > 2) b2 = _mm512_maskz_loadu_ps(m2, b + 32);
        if (NV > 3) b3 = _mm512_maskz_loadu_ps(m3, b + 48);
#define MK_FMA(r)                                                       \
        if (R > r) {                                                    \
            const __m512 av = _mm512_set1_ps(a[r * ars]);               \
            c##r##0 = _mm512_fmadd_ps(av, b0, c##r##0);                 \
            if (NV > 1) c##r##1 = _mm512_fmadd_ps(av, b1, c##r##1);     \
            if (NV > 2) c##r##2 = _mm512_fmadd_ps(av, b2, c##r##2);     \
            if (NV > 3) c##r##3 = _mm512_fmadd_ps(av, b3, c##r##3);     \
        }
        MK_FMA(0) MK_FMA(1) MK_FMA(2) MK_FMA(3) MK_FMA(4) MK_FMA(5)
#undef MK_FMA
    }
    const __m512 va = _mm512_set1_ps(alpha);
#define MK_ST1(r, v, mk)                                                                                       \
    do {                                                                                                       \
        float *p = C + r * ldc + 16 * v;                                                                       \
        _mm512_mask_storeu_ps(p, mk, acc ? _mm512_fmadd_ps(c##r##v, va, _mm512_maskz_loadu_ps(mk, p))        \
                                         : _mm512_mul_ps(c##r##v, va));                                        \
    } while (0)
#define MK_ST(r)                                 \
    if (R > r) {                                 \
        MK_ST1(r, 0, m0);                        \
        if (NV > 1) MK_ST1(r, 1, m1);            \
        if (NV > 2) MK_ST1(r, 2, m2);            \
        if (NV > 3) MK_ST1(r, 3, m3);            \
    }
    MK_ST(0) MK_ST(1) MK_ST(2) MK_ST(3) MK_ST(4) MK_ST(5)
#undef MK_ST
#undef MK_ST1
}
typedef void (*mk_fn)(int64_t, const float *, int64_t, int64_t, const float *, int64_t, float *, int64_t, float, int,
                      __mmask16);
#define MK_DEF(R, NV)                                                                                          \
    static void mk_##R##_##NV(int64_t K, const float *A, int64_t ars, int64_t aks, const float *B, int64_t ldb, \
                              float *C, int64_t ldc, float alpha, int acc, __mmask16 lm) {                     \
        mk_tile(R, NV, K, A, ars, aks, B, ldb, C, ldc, alpha, acc, lm);                                        \
    }
#define MK_ROW(R) MK_DEF(R, 1) MK_DEF(R, 2) MK_DEF(R, 3) MK_DEF(R, 4)
MK_ROW(1) MK_ROW(2) MK_ROW(3) MK_ROW(4) MK_ROW(5) MK_ROW(6)
#define MK_ENT(R) {mk_##R##_1, mk_##R##_2, mk_##R##_3, mk_##R##_4}
static const mk_fn MK_TABLE[MK_R][MK_NV] = {MK_ENT(1), MK_ENT(2), MK_ENT(3), MK_ENT(4), MK_ENT(5), MK_ENT(6)};

static void gemm_blk(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t ars, int64_t aks,
                     const float *B, int64_t ldb, int acc, float *C, int64_t ldc, const att_causal *cz) {
    if (M <= 0 || N <= 0) return;
    CHECK(!cz || cz->mode == CZ_KEYS_X_Q || acc, "gemm_blk: causal mode %d needs accumulation", cz ? cz->mode : 0);
    // Column panels of 64 outer (the K x 64 panel of B stays in L1/L2), register tiles of 6 rows inner.
    for (int64_t c0 = 0; c0 < N; c0 += 16 * MK_NV) {
        const int64_t w = N - c0 < 16 * MK_NV ? N - c0 : 16 * MK_NV;
        const int nv = (int)((w + 15) / 16);
        const __mmask16 lm = tail_mask(w - 16 * (nv - 1));
        for (int64_t r0 = 0; r0 < M; r0 += MK_R) {
            const int R = (int)(M - r0 < MK_R ? M - r0 : MK_R);
            int64_t k0 = 0, k1 = K;
            if (cz) causal_range(cz, r0, R, c0, w, K, &k0, &k1);
            if (k1 <= k0) continue;
            MK_TABLE[R - 1][nv - 1](k1 - k0, A + r0 * ars + k0 * aks, ars, aks, B + k0 * ldb + c0, ldb, C + r0 * ldc + c0,
                                    ldc, alpha, acc, lm);
        }
    }
}
#elif ATT_AVX2
// The same register tiles in 8-float AVX2 vectors (Zen 2/3, Haswell..Ice Lake clients): 6 rows x 2 vectors (16
// columns), 12 accumulators of the 16 ymm registers. A block product is some thousands of flops, where an
// sgemm call's set-up costs as much as the product; this also keeps the causal tile skipping. The last vector
// of a row is loaded/stored under the lane mask lm.
static inline __m256i tail_mask8(int64_t n) {   // lanes [0, min(n, 8))
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? n : 8)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#define MK_R 6    // rows per register tile
#define MK_NV 2   // 8-float vectors per register tile row (16 columns)
static inline __attribute__((always_inline)) void mk_tile(const int R, const int NV, int64_t K, const float *A,
                                                          int64_t ars, int64_t aks, const float *B, int64_t ldb,
                                                          float *C, int64_t ldc, float alpha, int acc, __m256i lm) {
    const __m256 z = _mm256_setzero_ps();
    __m256 c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z, c41 = z, c50 = z, c51 = z;
    const __m256i m0 = NV == 1 ? lm : _mm256_set1_epi32(-1), m1 = lm;
    for (int64_t kk = 0; kk < K; kk++) {
        const float *b = B + kk * ldb, *a = A + kk * aks;
        const __m256 b0 = NV == 1 ? _mm256_maskload_ps(b, m0) : _mm256_loadu_ps(b);
        const __m256 b1 = NV > 1 ? _mm256_maskload_ps(b + 8, m1) : z;
#define MK_FMA(r)                                                       \
        if (R > r) {                                                    \
            const __m256 av = _mm256_broadcast_ss(a + r * ars);         \
            c##r##0 = _mm256_fmadd_ps(av, b0, c##r##0);                 \
            if (NV > 1) c##r##1 = _mm256_fmadd_ps(av, b1, c##r##1);     \
        }
        MK_FMA(0) MK_FMA(1) MK_FMA(2) MK_FMA(3) MK_FMA(4) MK_FMA(5)
#undef MK_FMA
    }
    const __m256 va = _mm256_set1_ps(alpha);
#define MK_ST1(r, v, mk)                                                                                         \
    do {                                                                                                         \
        float *p = C + r * ldc + 8 * v;                                                                          \
        _mm256_maskstore_ps(p, mk, acc ? _mm256_fmadd_ps(c##r##v, va, _mm256_maskload_ps(p, mk))               \
                                       : _mm256_mul_ps(c##r##v, va));                                            \
    } while (0)
#define MK_ST(r)                                 \
    if (R > r) {                                 \
        MK_ST1(r, 0, m0);                        \
        if (NV > 1) MK_ST1(r, 1, m1);            \
    }
    MK_ST(0) MK_ST(1) MK_ST(2) MK_ST(3) MK_ST(4) MK_ST(5)
#undef MK_ST
#undef MK_ST1
}
typedef void (*mk_fn)(int64_t, const float *, int64_t, int64_t, const float *, int64_t, float *, int64_t, float, int,
                      __m256i);
#define MK_DEF(R, NV)                                                                                          \
    static void mk_##R##_##NV(int64_t K, const float *A, int64_t ars, int64_t aks, const float *B, int64_t ldb, \
                              float *C, int64_t ldc, float alpha, int acc, __m256i lm) {                       \
        mk_tile(R, NV, K, A, ars, aks, B, ldb, C, ldc, alpha, acc, lm);                                        \
    }
#define MK_ROW(R) MK_DEF(R, 1) MK_DEF(R, 2)
MK_ROW(1) MK_ROW(2) MK_ROW(3) MK_ROW(4) MK_ROW(5) MK_ROW(6)
#define MK_ENT(R) {mk_##R##_1, mk_##R##_2}
static const mk_fn MK_TABLE[MK_R][MK_NV] = {MK_ENT(1), MK_ENT(2), MK_ENT(3), MK_ENT(4), MK_ENT(5), MK_ENT(6)};

static void gemm_blk(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t ars, int64_t aks,
                     const float *B, int64_t ldb, int acc, float *C, int64_t ldc, const att_causal *cz) {
    if (M <= 0 || N <= 0) return;
    CHECK(!cz || cz->mode == CZ_KEYS_X_Q || acc, "gemm_blk: causal mode %d needs accumulation", cz ? cz->mode : 0);
    // Column panels of 16 outer (the K x 16 panel of B stays in L1), register tiles of 6 rows inner.
    for (int64_t c0 = 0; c0 < N; c0 += 8 * MK_NV) {
        const int64_t w = N - c0 < 8 * MK_NV ? N - c0 : 8 * MK_NV;
        const int nv = (int)((w + 7) / 8);
        const __m256i lm = tail_mask8(w - 8 * (nv - 1));
        for (int64_t r0 = 0; r0 < M; r0 += MK_R) {
            const int R = (int)(M - r0 < MK_R ? M - r0 : MK_R);
            int64_t k0 = 0, k1 = K;
            if (cz) causal_range(cz, r0, R, c0, w, K, &k0, &k1);
            if (k1 <= k0) continue;
            MK_TABLE[R - 1][nv - 1](k1 - k0, A + r0 * ars + k0 * aks, ars, aks, B + k0 * ldb + c0, ldb, C + r0 * ldc + c0,
                                    ldc, alpha, acc, lm);
        }
    }
}
#else
static void gemm_blk(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t ars, int64_t aks,
                     const float *B, int64_t ldb, int acc, float *C, int64_t ldc, const att_causal *cz) {
    (void)cz;   // dense: the skipped parts are masked or zero anyway
    if (M <= 0 || N <= 0) return;
    if (aks == 1 && (ars >= K || M == 1))
        backend_sgemm(0, 0, M, N, K, alpha, A, M == 1 ? (K > 1 ? K : 1) : ars, B, ldb, acc ? 1.0f : 0.0f, C, ldc);
    else {
        CHECK(ars == 1 && (aks >= M || K == 1), "gemm_blk: A strides ars=%lld aks=%lld M=%lld K=%lld", (long long)ars,
              (long long)aks, (long long)M, (long long)K);
        backend_sgemm(1, 0, M, N, K, alpha, A, K == 1 ? (M > 1 ? M : 1) : aks, B, ldb, acc ? 1.0f : 0.0f, C, ldc);
    }
}
#endif

// ---- row and column helpers -----------------------------------------------------------------------------------
#if ATT_SIMD
// exp(x) for x <= 88: range reduction x = n ln2 + r, |r| <= ln2/2, degree-7 Taylor (truncation < 1e-8
// relative), then scalef by 2^n. Inputs below -150 (and NaN) give exactly 0.
static inline __m512 v_exp(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-150.f));   // max(NaN, -150) = -150
    x = _mm512_min_ps(x, _mm512_set1_ps(88.f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.f / 5040.f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 720.f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 120.f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24.f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6.f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
    return _mm512_scalef_ps(p, n);
}
static void row_scale(float *x, int n, float a) {
    __m512 va = _mm512_set1_ps(a);
    for (int c = 0; c < n; c += 16) {
        __mmask16 mk = tail_mask(n - c);
        _mm512_mask_storeu_ps(x + c, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + c), va));
    }
}
static float row_dot(const float *a, const float *b, int n) {
    __m512 acc = _mm512_setzero_ps();
    for (int c = 0; c < n; c += 16) {
        __mmask16 mk = tail_mask(n - c);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, a + c), _mm512_maskz_loadu_ps(mk, b + c), acc);
    }
    return _mm512_reduce_add_ps(acc);
}
static void row_add(float *y, const float *x, int n) {
    for (int c = 0; c < n; c += 16) {
        __mmask16 mk = tail_mask(n - c);
        _mm512_mask_storeu_ps(y + c, mk, _mm512_add_ps(_mm512_maskz_loadu_ps(mk, y + c), _mm512_maskz_loadu_ps(mk, x + c)));
    }
}
// y[c] = x[c] * a
static void row_copy_scaled(float *y, const float *x, int n, float a) {
    __m512 va = _mm512_set1_ps(a);
    for (int c = 0; c < n; c += 16) {
        __mmask16 mk = tail_mask(n - c);
        _mm512_mask_storeu_ps(y + c, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + c), va));
    }
}

// Column ops on a transposed score tile ST (nk keys x M query rows, row stride ld). Query row r sees key
// column... key c of the tile iff c <= lim0 + rq[r] (lim0 = t0 - k0, rq[r] = r / g: the causal mask).
//
// With a sliding window of win keys, key c is also required to satisfy c > lim - win (llo = lim - win); without
// one, win is ATT_NO_WINDOW, far above any offset, so the bound always holds.
#define VIS(lm, lim, llo, c) \
    _mm512_mask_cmplt_epi32_mask(_mm512_mask_cmpge_epi32_mask((lm), (lim), _mm512_set1_epi32(c)), (llo), _mm512_set1_epi32(c))
// Forward online-softmax step: m, l (M) running max and sum; al (M) gets the factor exp(m_old - m_new) that
// rescales the output rows; ST becomes P = exp(S - m_new), 0 where masked.
static void cols_softmax_step(float *ST, int nk, int64_t M, int64_t ld, int64_t lim0, int64_t win, const int32_t *rq,
                              float *m, float *l, float *al) {
    for (int64_t r0 = 0; r0 < M; r0 += 16) {
        const __mmask16 lm = tail_mask(M - r0);
        const __m512i lim = _mm512_add_epi32(_mm512_set1_epi32((int)lim0), _mm512_maskz_loadu_epi32(lm, rq + r0));
        const __m512i llo = _mm512_sub_epi32(lim, _mm512_set1_epi32((int)win));
        __m512 mb = _mm512_set1_ps(-INFINITY);
        for (int c = 0; c < nk; c++) {
            __mmask16 ok = VIS(lm, lim, llo, c);
            mb = _mm512_mask_max_ps(mb, ok, mb, _mm512_maskz_loadu_ps(ok, ST + c * ld + r0));
        }
        const __m512 mo = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), lm, m + r0);
        const __m512 mn = _mm512_max_ps(mo, mb);
        const __m512 a = v_exp(_mm512_sub_ps(mo, mn));   // exp(-inf) = 0 on the first block
        __m512 sum = _mm512_setzero_ps();
        for (int c = 0; c < nk; c++) {
            __mmask16 ok = VIS(lm, lim, llo, c);
            float *p = ST + c * ld + r0;
            __m512 e = _mm512_maskz_mov_ps(ok, v_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(ok, p), mn)));
            sum = _mm512_add_ps(sum, e);
            _mm512_mask_storeu_ps(p, lm, e);
        }
        _mm512_mask_storeu_ps(l + r0, lm, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lm, l + r0), a, sum));
        _mm512_mask_storeu_ps(m + r0, lm, mn);
        _mm512_mask_storeu_ps(al + r0, lm, a);
    }
}
// Backward: ST becomes P = exp(S - lse), 0 where masked.
static void cols_probs(float *ST, int nk, int64_t M, int64_t ld, int64_t lim0, int64_t win, const int32_t *rq,
                       const float *lse) {
    for (int64_t r0 = 0; r0 < M; r0 += 16) {
        const __mmask16 lm = tail_mask(M - r0);
        const __m512i lim = _mm512_add_epi32(_mm512_set1_epi32((int)lim0), _mm512_maskz_loadu_epi32(lm, rq + r0));
        const __m512i llo = _mm512_sub_epi32(lim, _mm512_set1_epi32((int)win));
        const __m512 ls = _mm512_maskz_loadu_ps(lm, lse + r0);
        for (int c = 0; c < nk; c++) {
            __mmask16 ok = VIS(lm, lim, llo, c);
            float *p = ST + c * ld + r0;
            _mm512_mask_storeu_ps(p, lm, _mm512_maskz_mov_ps(ok, v_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(ok, p), ls))));
        }
    }
}
// dST = PT * (dPT - Di[r])
// (dPT may hold stale values in the causally skipped tiles: those entries are set to 0.)
static void cols_ds(float *dPT, const float *PT, int nk, int64_t M, int64_t ld, int64_t lim0, int64_t win,
                    const int32_t *rq, const float *Di) {
    for (int64_t r0 = 0; r0 < M; r0 += 16) {
        const __mmask16 lm = tail_mask(M - r0);
        const __m512i lim = _mm512_add_epi32(_mm512_set1_epi32((int)lim0), _mm512_maskz_loadu_epi32(lm, rq + r0));
        const __m512i llo = _mm512_sub_epi32(lim, _mm512_set1_epi32((int)win));
        const __m512 di = _mm512_maskz_loadu_ps(lm, Di + r0);
        for (int c = 0; c < nk; c++) {
            __mmask16 ok = VIS(lm, lim, llo, c);
            float *d = dPT + c * ld + r0;
            __m512 x = _mm512_sub_ps(_mm512_maskz_loadu_ps(ok, d), di);
            _mm512_mask_storeu_ps(d, lm, _mm512_maskz_mul_ps(ok, _mm512_maskz_loadu_ps(ok, PT + c * ld + r0), x));
        }
    }
}
#else
// Portable forms (AVX2 and older): loops over contiguous query rows with `#pragma omp simd`, which the compiler
// vectorises, the exponential included (kmath.h's k_expf_le88; glibc's expf only vectorises under -ffast-math).
// Score tiles are column-major in the query rows, so the row loop is the inner one; the visibility test is int32
// arithmetic like the AVX-512 form's (lim - win stays inside int32, see ATT_NO_WINDOW).
static void row_scale(float *x, int n, float a) {
#pragma omp simd
    for (int c = 0; c < n; c++) x[c] *= a;
}
static float row_dot(const float *a, const float *b, int n) {
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int c = 0; c < n; c++) s += a[c] * b[c];
    return s;
}
static void row_add(float *y, const float *x, int n) {
#pragma omp simd
    for (int c = 0; c < n; c++) y[c] += x[c];
}
static void row_copy_scaled(float *y, const float *x, int n, float a) {
#pragma omp simd
    for (int c = 0; c < n; c++) y[c] = x[c] * a;
}
// Key c of the tile is visible to query row r iff lim - win < c <= lim, lim = lim0 + rq[r].
#define COL_VIS(c, lim, win) ((c) <= (lim) && (c) > (lim) - (win))
// Forward online-softmax step: m, l (M) running max and sum; al (M) gets the factor exp(m_old - m_new) that
// rescales the output rows; ST becomes P = exp(S - m_new), 0 where masked. al holds the block's max first.
static void cols_softmax_step(float *ST, int nk, int64_t M, int64_t ld, int64_t lim0, int64_t win, const int32_t *rq,
                              float *m, float *l, float *al) {
    const int32_t l0 = (int32_t)lim0, w = (int32_t)win;
#pragma omp simd
    for (int64_t r = 0; r < M; r++) al[r] = -INFINITY;
    for (int c = 0; c < nk; c++) {
        const float *s = ST + c * ld;
#pragma omp simd
        for (int64_t r = 0; r < M; r++) {
            const int32_t lim = l0 + rq[r];
            const float x = COL_VIS(c, lim, w) ? s[r] : -INFINITY;
            al[r] = x > al[r] ? x : al[r];
        }
    }
#pragma omp simd
    for (int64_t r = 0; r < M; r++) {
        const float mn = al[r] > m[r] ? al[r] : m[r];
        const float a = mn == -INFINITY ? 0.0f : k_expf_le88(m[r] - mn);   // a row with no visible key yet stays empty
        l[r] *= a;
        m[r] = mn;
        al[r] = a;
    }
    for (int c = 0; c < nk; c++) {
        float *s = ST + c * ld;
#pragma omp simd
        for (int64_t r = 0; r < M; r++) {
            const int32_t lim = l0 + rq[r];
            const float e = COL_VIS(c, lim, w) ? k_expf_le88(s[r] - m[r]) : 0.0f;
            s[r] = e;
            l[r] += e;
        }
    }
}
// Backward: ST becomes P = exp(S - lse), 0 where masked.
static void cols_probs(float *ST, int nk, int64_t M, int64_t ld, int64_t lim0, int64_t win, const int32_t *rq,
                       const float *lse) {
    const int32_t l0 = (int32_t)lim0, w = (int32_t)win;
    for (int c = 0; c < nk; c++) {
        float *s = ST + c * ld;
#pragma omp simd
        for (int64_t r = 0; r < M; r++) {
            const int32_t lim = l0 + rq[r];
            s[r] = COL_VIS(c, lim, w) ? k_expf_le88(s[r] - lse[r]) : 0.0f;
        }
    }
}
// dST = PT * (dPT - Di[r]) (stale values in causally skipped tiles become 0)
static void cols_ds(float *dPT, const float *PT, int nk, int64_t M, int64_t ld, int64_t lim0, int64_t win,
                    const int32_t *rq, const float *Di) {
    const int32_t l0 = (int32_t)lim0, w = (int32_t)win;
    for (int c = 0; c < nk; c++) {
        float *d = dPT + c * ld;
        const float *p = PT + c * ld;
#pragma omp simd
        for (int64_t r = 0; r < M; r++) {
            const int32_t lim = l0 + rq[r];
            d[r] = COL_VIS(c, lim, w) ? p[r] * (d[r] - Di[r]) : 0.0f;
        }
    }
}
#undef COL_VIS
#endif

// dst[d*ldd + r] = src[r*D + d] for r < rows, d < D.
#if ATT_SIMD
// 16 x 16 tiles transposed in registers (unpack, shuffle, two 128-bit-lane shuffles); tails masked.
static void transpose_rows(float *dst, int64_t ldd, const float *src, int64_t rows, int D) {
    for (int64_t r0 = 0; r0 < rows; r0 += 16) {
        const int nr = (int)(rows - r0 < 16 ? rows - r0 : 16);
        for (int d0 = 0; d0 < D; d0 += 16) {
            const int nd = D - d0 < 16 ? D - d0 : 16;
            const __mmask16 md = tail_mask(nd);
            __m512 r[16], t[16];
            for (int i = 0; i < 16; i++)
                r[i] = i < nr ? _mm512_maskz_loadu_ps(md, src + (r0 + i) * D + d0) : _mm512_setzero_ps();
            for (int i = 0; i < 16; i += 2) {
                t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
                t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int i = 0; i < 16; i += 4) {
                r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
                r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
                r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
                r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
            }
            for (int i = 0; i < 4; i++) {
                t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
                t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
                t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
                t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
            }
            for (int i = 0; i < 8; i++) {
                r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
                r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
            }
            const __mmask16 mr = tail_mask(nr);
            for (int i = 0; i < nd; i++) _mm512_mask_storeu_ps(dst + (int64_t)(d0 + i) * ldd + r0, mr, r[i]);
        }
    }
}
#else
static void transpose_rows(float *dst, int64_t ldd, const float *src, int64_t rows, int D) {
    for (int64_t r0 = 0; r0 < rows; r0 += 16) {      // 16-row strips: 16 source rows stay in L1
        const int64_t nr = rows - r0 < 16 ? rows - r0 : 16;
        for (int d = 0; d < D; d++)
            for (int64_t r = 0; r < nr; r++) dst[d * ldd + r0 + r] = src[(r0 + r) * D + d];
    }
}
#endif

// ---- task lists ---------------------------------------------------------------------------------------------
// A task is (sequence, kv head, block index); cost estimates order them longest first.
typedef struct {
    int32_t s, kvh, b;
    int64_t cost;
} att_task;

static int task_cmp(const void *pa, const void *pb) {
    const att_task *a = pa, *b = pb;
    if (a->cost != b->cost) return a->cost > b->cost ? -1 : 1;
    if (a->s != b->s) return a->s < b->s ? -1 : 1;
    if (a->b != b->b) return a->b < b->b ? -1 : 1;
    return a->kvh < b->kvh ? -1 : (a->kvh > b->kvh);
}

// kind 'q': one task per query block (cost = rows x visible keys); 'k': one per key block
// (cost = rows x visible queries); 's': one per sequence (cost = len^2).
static att_task *make_tasks(const int32_t *cu, int n_seqs, int nkv, char kind, int64_t *n_out) {
    int64_t n = 0;
    for (int s = 0; s < n_seqs; s++) {
        int len = cu[s + 1] - cu[s];
        if (len <= 0) continue;
        int B = kind == 'q' ? blk_q(len) : blk_k(len);
        n += kind == 's' ? nkv : (int64_t)((len + B - 1) / B) * nkv;
    }
    att_task *t = rlc_malloc((size_t)(n > 0 ? n : 1) * sizeof *t);
    int64_t i = 0;
    for (int s = 0; s < n_seqs; s++) {
        int len = cu[s + 1] - cu[s];
        if (len <= 0) continue;
        int B = kind == 'q' ? blk_q(len) : blk_k(len);
        int nb = kind == 's' ? 1 : (len + B - 1) / B;
        for (int b = 0; b < nb; b++) {
            int64_t lo = (int64_t)b * B, hi = lo + B < len ? lo + B : len;
            int64_t cost = kind == 's' ? (int64_t)len * len : kind == 'q' ? (hi - lo) * hi : (hi - lo) * (len - lo);
            for (int h = 0; h < nkv; h++) t[i++] = (att_task){s, h, b, cost};
        }
    }
    qsort(t, (size_t)n, sizeof *t, task_cmp);
    *n_out = n;
    return t;
}

// rq[r] = r / g for r < n: the token offset of stacked row r.
static int32_t *make_rq(int64_t n, int g) {
    int32_t *rq = rlc_alloc((size_t)n * sizeof(int32_t));
    for (int64_t r = 0; r < n; r++) rq[r] = (int32_t)(r / g);
    return rq;
}

// ---- forward ------------------------------------------------------------------------------------------------
void attention_forward_sw(float *out, float *lse, const float *q, const float *k, const float *v,
                          const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int D, float scale, int window) {
    att_check(cu_seqlens, n_seqs, nh, nkv, D);
    const int g = nh / nkv;
    const int64_t ldq = (int64_t)nh * D, ldk = (int64_t)nkv * D;   // row strides of q/out and k/v
    const int64_t win = win_of(window);
    int64_t n_tasks = 0;
    att_task *tasks = make_tasks(cu_seqlens, n_seqs, nkv, 'q', &n_tasks);
    const int64_t Mmax = (int64_t)ATT_BQ_MAX * g;
#pragma omp parallel
    {
        float *QT = rlc_alloc((size_t)(Mmax * D) * sizeof(float));          // (D, M) scaled queries, transposed
        float *O = rlc_alloc((size_t)(Mmax * D) * sizeof(float));           // (M, D) unnormalised output
        float *ST = rlc_alloc((size_t)(Mmax * ATT_BK_MAX) * sizeof(float)); // (nk, M) scores, then P
        float *mrow = rlc_alloc((size_t)Mmax * sizeof(float));              // (M) running max
        float *lrow = rlc_alloc((size_t)Mmax * sizeof(float));              // (M) running sum
        float *al = rlc_alloc((size_t)Mmax * sizeof(float));                // (M) rescale factors
        int32_t *rq = make_rq(Mmax, g);                                     // (M) row -> token offset
#pragma omp for schedule(dynamic, 1)
        for (int64_t ti = 0; ti < n_tasks; ti++) {
            const int s = tasks[ti].s, kvh = tasks[ti].kvh, h0 = kvh * g;
            const int64_t s0 = cu_seqlens[s], len = cu_seqlens[s + 1] - s0;
            const int Bq = blk_q((int)len), Bk = blk_k((int)len);
            const int64_t t0 = s0 + (int64_t)tasks[ti].b * Bq;                 // first query token
            const int nq = (int)(s0 + len - t0 < Bq ? s0 + len - t0 : Bq);
            const int64_t M = (int64_t)nq * g;
            for (int i = 0; i < nq; i++)                                       // O as a staging buffer
                for (int j = 0; j < g; j++)
                    row_copy_scaled(O + ((int64_t)i * g + j) * D, q + (t0 + i) * ldq + (int64_t)(h0 + j) * D, D, scale);
            transpose_rows(QT, M, O, M, D);
            memset(O, 0, (size_t)(M * D) * sizeof(float));
            for (int64_t r = 0; r < M; r++) { mrow[r] = -INFINITY; lrow[r] = 0; }
            const int64_t kend = t0 + nq;                                      // keys [s0, kend) are visible
            for (int64_t k0 = first_key_block(s0, t0, win, Bk); k0 < kend; k0 += Bk) {
                const int nk = (int)(kend - k0 < Bk ? kend - k0 : Bk);
                const float *Kb = k + k0 * ldk + (int64_t)kvh * D, *Vb = v + k0 * ldk + (int64_t)kvh * D;
                const att_causal cs = {CZ_KEYS_X_Q, t0 - k0, rq}, cp = {CZ_Q_SUM_KEYS, t0 - k0, rq};
                const int diag = k0 + nk - 1 > t0;                             // some keys are masked
                gemm_blk(nk, M, D, 1.0f, Kb, ldk, 1, QT, M, 0, ST, M, diag ? &cs : NULL);   // ST (nk, M) = K QsT
                cols_softmax_step(ST, nk, M, M, t0 - k0, win, rq, mrow, lrow, al);
                for (int64_t r = 0; r < M; r++)
                    if (al[r] != 1.0f) row_scale(O + r * D, D, al[r]);
                gemm_blk(M, D, nk, 1.0f, ST, 1, M, Vb, ldk, 1, O, D, diag ? &cp : NULL);    // O (M, D) += P V
            }
            for (int i = 0; i < nq; i++)
                for (int j = 0; j < g; j++) {
                    const int64_t r = (int64_t)i * g + j;
                    row_copy_scaled(out + (t0 + i) * ldq + (int64_t)(h0 + j) * D, O + r * D, D, 1.0f / lrow[r]);
                    lse[(t0 + i) * nh + h0 + j] = mrow[r] + logf(lrow[r]);
                }
        }
        rlc_free(QT); rlc_free(O); rlc_free(ST); rlc_free(mrow); rlc_free(lrow); rlc_free(al); rlc_free(rq);
    }
    free(tasks);
}

// ---- backward -----------------------------------------------------------------------------------------------
// Copies of nq query tokens (from t0) of the group of kv head kvh, rows r = i*g + j (head h0+j):
// Qs (rows, D) = scale*q and QsT (D, ldT) its transpose; dO (rows, D) and dOT (D, ldT); lse_r, Di (rows) with
// Di = rowsum(dO * out).
typedef struct {
    float *Qs, *QsT, *dO, *dOT, *lse, *Di;
    int64_t ldT;
} bwd_rows;

static void bwd_load(const bwd_rows *b, const float *q, const float *dout, const float *out, const float *lse,
                     int64_t t0, int nq, int h0, int g, int nh, int D, float scale) {
    const int64_t ldq = (int64_t)nh * D, ldT = b->ldT;
    for (int i = 0; i < nq; i++)
        for (int j = 0; j < g; j++) {
            const int64_t r = (int64_t)i * g + j, src = (t0 + i) * ldq + (int64_t)(h0 + j) * D;
            row_copy_scaled(b->Qs + r * D, q + src, D, scale);
            memcpy(b->dO + r * D, dout + src, (size_t)D * sizeof(float));
            b->lse[r] = lse[(t0 + i) * nh + h0 + j];
            b->Di[r] = row_dot(dout + src, out + src, D);
        }
    transpose_rows(b->QsT, ldT, b->Qs, (int64_t)nq * g, D);
    transpose_rows(b->dOT, ldT, b->dO, (int64_t)nq * g, D);
}

// One (query block, key block) pair: query rows r0 .. r0+M-1 of the copies in b (tokens from t0), keys
// k0 .. k0+nk-1 (Kb, Vb: row stride ldk). dK, dV (nk, D) += (if non-NULL); dQ (M, D) += (if non-NULL).
// ST, dPT: (nk, M) scratch.
static void bwd_pair(float *dQ, float *dK, float *dV, const bwd_rows *b, int64_t r0, int64_t M, const int32_t *rq,
                     const float *Kb, const float *Vb, int64_t ldk, int64_t t0, int64_t k0, int nk, int D, float scale,
                     int64_t win, float *ST, float *dPT) {
    const float *Qs = b->Qs + r0 * D, *QsT = b->QsT + r0, *dO = b->dO + r0 * D, *dOT = b->dOT + r0;
    const int64_t lim0 = t0 - k0;
    const int diag = k0 + nk - 1 > t0;                                    // some keys are masked
    const att_causal c1 = {CZ_KEYS_X_Q, lim0, rq}, c2 = {CZ_Q_SUM_KEYS, lim0, rq}, c3 = {CZ_KEYS_SUM_Q, lim0, rq};
    const att_causal *kq = diag ? &c1 : NULL, *qk = diag ? &c2 : NULL, *kk = diag ? &c3 : NULL;
    gemm_blk(nk, M, D, 1.0f, Kb, ldk, 1, QsT, b->ldT, 0, ST, M, kq);       // ST (nk, M) = K QsT
    cols_probs(ST, nk, M, M, lim0, win, rq, b->lse + r0);                      // P = exp(S - lse), causal
    if (dV) gemm_blk(nk, D, M, 1.0f, ST, M, 1, dO, D, 1, dV, D, kk);       // dV += P^T dO
    gemm_blk(nk, M, D, 1.0f, Vb, ldk, 1, dOT, b->ldT, 0, dPT, M, kq);      // dPT (nk, M) = V dO^T
    cols_ds(dPT, ST, nk, M, M, lim0, win, rq, b->Di + r0);                     // dS = P (dP - Di), causal
    if (dK) gemm_blk(nk, D, M, 1.0f, dPT, M, 1, Qs, D, 1, dK, D, kk);      // dK += dS^T (scale Q)
    if (dQ) gemm_blk(M, D, nk, scale, dPT, 1, M, Kb, ldk, 1, dQ, D, qk);   // dQ += scale dS K
}

// One pass per (sequence, kv head): FA2's key-block outer loop, with dQ kept for the whole sequence in
// the task's buffer. 5 block products per pair. Scratch O(len*g*D) per thread.
static void bwd_one_pass(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                         const float *q, const float *k, const float *v, const int32_t *cu, int n_seqs, int nh,
                         int nkv, int D, float scale, int64_t win) {
    const int g = nh / nkv;
    const int64_t ldq = (int64_t)nh * D, ldk = (int64_t)nkv * D;
    int64_t maxlen = 0, n_tasks = 0;
    for (int s = 0; s < n_seqs; s++) if (cu[s + 1] - cu[s] > maxlen) maxlen = cu[s + 1] - cu[s];
    att_task *tasks = make_tasks(cu, n_seqs, nkv, 's', &n_tasks);
#pragma omp parallel
    {
        const int64_t R = maxlen * g;                                            // rows of one sequence's group
        const size_t rd = (size_t)(R * D) * sizeof(float);
        bwd_rows b = {rlc_alloc(rd), rlc_alloc(rd), rlc_alloc(rd), rlc_alloc(rd),    // (R, D), (D, R) x2
                      rlc_alloc((size_t)R * sizeof(float)), rlc_alloc((size_t)R * sizeof(float)), 0};
        float *dQ = rlc_alloc(rd);                                               // (R, D)
        float *dK = rlc_alloc((size_t)ATT_BK_MAX * D * sizeof(float));           // (Bk, D)
        float *dV = rlc_alloc((size_t)ATT_BK_MAX * D * sizeof(float));           // (Bk, D)
        float *ST = rlc_alloc((size_t)ATT_BQ_MAX * g * ATT_BK_MAX * sizeof(float));   // (Bk, M)
        float *dPT = rlc_alloc((size_t)ATT_BQ_MAX * g * ATT_BK_MAX * sizeof(float));  // (Bk, M)
        int32_t *rq = make_rq((int64_t)ATT_BQ_MAX * g, g);
#pragma omp for schedule(dynamic, 1)
        for (int64_t ti = 0; ti < n_tasks; ti++) {
            const int s = tasks[ti].s, kvh = tasks[ti].kvh, h0 = kvh * g;
            const int64_t s0 = cu[s], len = cu[s + 1] - s0, send = s0 + len;
            const int Bq = blk_q((int)len), Bk = blk_k((int)len);
            b.ldT = len * g;
            bwd_load(&b, q, dout, out, lse, s0, (int)len, h0, g, nh, D, scale);
            memset(dQ, 0, (size_t)(len * g * D) * sizeof(float));
            for (int64_t k0 = s0; k0 < send; k0 += Bk) {
                const int nk = (int)(send - k0 < Bk ? send - k0 : Bk);
                memset(dK, 0, (size_t)nk * D * sizeof(float));
                memset(dV, 0, (size_t)nk * D * sizeof(float));
                const float *Kb = k + k0 * ldk + (int64_t)kvh * D, *Vb = v + k0 * ldk + (int64_t)kvh * D;
                // from the query block that contains key k0 (earlier queries cannot see it) to the last query
                // whose window reaches the block
                const int64_t tend = k0 + nk - 1 + win < send ? k0 + nk - 1 + win : send;
                for (int64_t t0 = s0 + ((k0 - s0) / Bq) * Bq; t0 < tend; t0 += Bq) {
                    const int64_t nq = send - t0 < Bq ? send - t0 : Bq, r0 = (t0 - s0) * g;
                    bwd_pair(dQ + r0 * D, dK, dV, &b, r0, nq * g, rq, Kb, Vb, ldk, t0, k0, nk, D, scale, win, ST, dPT);
                }
                for (int c = 0; c < nk; c++) {
                    row_add(dk + (k0 + c) * ldk + (int64_t)kvh * D, dK + (int64_t)c * D, D);
                    row_add(dv + (k0 + c) * ldk + (int64_t)kvh * D, dV + (int64_t)c * D, D);
                }
            }
            for (int64_t i = 0; i < len; i++)
                for (int j = 0; j < g; j++)
                    row_add(dq + (s0 + i) * ldq + (int64_t)(h0 + j) * D, dQ + (i * g + j) * D, D);
        }
        rlc_free(b.Qs); rlc_free(b.QsT); rlc_free(b.dO); rlc_free(b.dOT); rlc_free(b.lse); rlc_free(b.Di);
        rlc_free(dQ); rlc_free(dK); rlc_free(dV); rlc_free(ST); rlc_free(dPT); rlc_free(rq);
    }
    free(tasks);
}

// Two passes: (A) per (sequence, kv head, key block): dK, dV over the query blocks that see it;
// (B) per (sequence, kv head, query block): dQ over its visible key blocks. 7 block products per pair
// instead of 5, but block-level parallelism for few long sequences and few kv heads.
static void bwd_two_pass(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                         const float *q, const float *k, const float *v, const int32_t *cu, int n_seqs, int nh,
                         int nkv, int D, float scale, int64_t win) {
    const int g = nh / nkv;
    const int64_t ldq = (int64_t)nh * D, ldk = (int64_t)nkv * D;
    const int64_t Mmax = (int64_t)ATT_BQ_MAX * g;
    int64_t nA = 0, nB = 0;
    att_task *tA = make_tasks(cu, n_seqs, nkv, 'k', &nA);
    att_task *tB = make_tasks(cu, n_seqs, nkv, 'q', &nB);
#pragma omp parallel
    {
        const size_t md = (size_t)(Mmax * D) * sizeof(float);
        bwd_rows b = {rlc_alloc(md), rlc_alloc(md), rlc_alloc(md), rlc_alloc(md),    // (M, D), (D, M) x2
                      rlc_alloc((size_t)Mmax * sizeof(float)), rlc_alloc((size_t)Mmax * sizeof(float)), 0};
        float *dQ = rlc_alloc(md);                                               // (M, D)
        float *dK = rlc_alloc((size_t)ATT_BK_MAX * D * sizeof(float));           // (Bk, D)
        float *dV = rlc_alloc((size_t)ATT_BK_MAX * D * sizeof(float));           // (Bk, D)
        float *ST = rlc_alloc((size_t)(Mmax * ATT_BK_MAX) * sizeof(float));      // (Bk, M)
        float *dPT = rlc_alloc((size_t)(Mmax * ATT_BK_MAX) * sizeof(float));     // (Bk, M)
        int32_t *rq = make_rq(Mmax, g);
#pragma omp for schedule(dynamic, 1)
        for (int64_t ti = 0; ti < nA; ti++) {
            const int s = tA[ti].s, kvh = tA[ti].kvh, h0 = kvh * g;
            const int64_t s0 = cu[s], len = cu[s + 1] - s0, send = s0 + len;
            const int Bq = blk_q((int)len), Bk = blk_k((int)len);
            const int64_t k0 = s0 + (int64_t)tA[ti].b * Bk;
            const int nk = (int)(send - k0 < Bk ? send - k0 : Bk);
            memset(dK, 0, (size_t)nk * D * sizeof(float));
            memset(dV, 0, (size_t)nk * D * sizeof(float));
            const float *Kb = k + k0 * ldk + (int64_t)kvh * D, *Vb = v + k0 * ldk + (int64_t)kvh * D;
            const int64_t tend = k0 + nk - 1 + win < send ? k0 + nk - 1 + win : send;
            for (int64_t t0 = s0 + ((k0 - s0) / Bq) * Bq; t0 < tend; t0 += Bq) {
                const int nq = (int)(send - t0 < Bq ? send - t0 : Bq);
                b.ldT = (int64_t)nq * g;
                bwd_load(&b, q, dout, out, lse, t0, nq, h0, g, nh, D, scale);
                bwd_pair(NULL, dK, dV, &b, 0, (int64_t)nq * g, rq, Kb, Vb, ldk, t0, k0, nk, D, scale, win, ST, dPT);
            }
            for (int c = 0; c < nk; c++) {
                row_add(dk + (k0 + c) * ldk + (int64_t)kvh * D, dK + (int64_t)c * D, D);
                row_add(dv + (k0 + c) * ldk + (int64_t)kvh * D, dV + (int64_t)c * D, D);
            }
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t ti = 0; ti < nB; ti++) {
            const int s = tB[ti].s, kvh = tB[ti].kvh, h0 = kvh * g;
            const int64_t s0 = cu[s], len = cu[s + 1] - s0, send = s0 + len;
            const int Bq = blk_q((int)len), Bk = blk_k((int)len);
            const int64_t t0 = s0 + (int64_t)tB[ti].b * Bq;
            const int nq = (int)(send - t0 < Bq ? send - t0 : Bq);
            const int64_t M = (int64_t)nq * g;
            b.ldT = M;
            bwd_load(&b, q, dout, out, lse, t0, nq, h0, g, nh, D, scale);
            memset(dQ, 0, (size_t)(M * D) * sizeof(float));
            for (int64_t k0 = first_key_block(s0, t0, win, Bk); k0 < t0 + nq; k0 += Bk) {
                const int nk = (int)(t0 + nq - k0 < Bk ? t0 + nq - k0 : Bk);
                bwd_pair(dQ, NULL, NULL, &b, 0, M, rq, k + k0 * ldk + (int64_t)kvh * D, v + k0 * ldk + (int64_t)kvh * D,
                         ldk, t0, k0, nk, D, scale, win, ST, dPT);
            }
            for (int i = 0; i < nq; i++)
                for (int j = 0; j < g; j++)
                    row_add(dq + (t0 + i) * ldq + (int64_t)(h0 + j) * D, dQ + ((int64_t)i * g + j) * D, D);
        }
        rlc_free(b.Qs); rlc_free(b.QsT); rlc_free(b.dO); rlc_free(b.dOT); rlc_free(b.lse); rlc_free(b.Di);
        rlc_free(dQ); rlc_free(dK); rlc_free(dV); rlc_free(ST); rlc_free(dPT); rlc_free(rq);
    }
    free(tA);
    free(tB);
}

void attention_backward_sw(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                           const float *q, const float *k, const float *v, const int32_t *cu_seqlens, int n_seqs, int nh,
                           int nkv, int D, float scale, int window) {
    att_check(cu_seqlens, n_seqs, nh, nkv, D);
    const int64_t win = win_of(window);
    // One pass (fewer flops) when there are enough balanced (sequence, kv head) tasks to keep threads busy:
    // the largest task is at most 1/8 of the work. Decided from the shapes only, so the result does not
    // depend on the thread count. Both paths sum every output in the same order.
    int64_t total = 0, maxc = 0;
    for (int s = 0; s < n_seqs; s++) {
        int64_t len = cu_seqlens[s + 1] - cu_seqlens[s], c = len * len;
        total += c * nkv;
        if (c > maxc) maxc = c;
    }
    if (total == 0) return;
    if (maxc * 8 <= total)
        bwd_one_pass(dq, dk, dv, dout, out, lse, q, k, v, cu_seqlens, n_seqs, nh, nkv, D, scale, win);
    else
        bwd_two_pass(dq, dk, dv, dout, out, lse, q, k, v, cu_seqlens, n_seqs, nh, nkv, D, scale, win);
}

void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                       const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int D) {
    attention_forward_sw(out, lse, q, k, v, cu_seqlens, n_seqs, nh, nkv, D, 1.0f / sqrtf((float)D), 0);
}

void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                        const float *q, const float *k, const float *v,
                        const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int D) {
    attention_backward_sw(dq, dk, dv, dout, out, lse, q, k, v, cu_seqlens, n_seqs, nh, nkv, D, 1.0f / sqrtf((float)D), 0);
}
