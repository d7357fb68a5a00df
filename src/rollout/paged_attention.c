// paged_attention.c: GQA attention over the paged KV cache (see paged_attention.h).
//
// One arithmetic (written out above task_scalar) in three spellings: plain C for any block size and head dim,
// and, for block size 16, AVX-512 (D % 16 == 0) and AVX2+FMA (D % 8 == 0) tasks that give the same bits.
// Vector paths: per (token, kv head) and per block, the scores of the block's 16 keys come from the
// transposed key tile with 4 interleaved partial sums (no horizontal sums); an online softmax (running max m,
// sum l) rescales the (G, D) accumulator, which adds p_j * v_j rows. Query heads go in pairs, sharing each V
// (and with AVX-512 each K) load, and accumulator columns stay in registers over a block, so the loop streams
// the cache instead of waiting on one FMA chain per vector (a decode step over 64 sequences spent 18% here at
// ~15 GB/s before). While a head's K and V tiles are read, each of their cache lines prefetches the same line
// of the next tile the task will read (see task_simd). The plain C task is 5-10x slower: it is the definition
// and the fallback.
#include "rollout/paged_attention.h"

#include <math.h>
#include <omp.h>

#include "core/common.h"
#include "kernels/kernels.h"
#include "kernels/kmath.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#define PA_MAX_G 16    // query heads per kv head
#define PA_MAX_D 512   // head dim

void paged_kv_write(kv_cache *kc, int layer, const float *k, const float *v, const int32_t *block_tables,
                    int64_t bt_stride, const int32_t *tok_seq, const int32_t *pos, int64_t T) {
    const int nkv = kc->n_kv_heads, D = kc->head_dim, bs = kc->block_size;
#pragma omp parallel for schedule(static) if (T * nkv * D >= KERNELS_PAR_MIN)
    for (int64_t t = 0; t < T; t++) {
        const int32_t *bt = block_tables + (int64_t)tok_seq[t] * bt_stride;
        const int b = bt[pos[t] / bs], s = pos[t] % bs;
        CHECK(b >= 0 && b < kc->n_blocks && kc->refcount[b] == 1, "kv write at pos %d into block %d (refcount %d)", pos[t], b,
              b >= 0 && b < kc->n_blocks ? kc->refcount[b] : -1);
        for (int h = 0; h < nkv; h++) {
            const float *kh = k + t * (int64_t)nkv * D + (int64_t)h * D, *vh = v + t * (int64_t)nkv * D + (int64_t)h * D;
            const int64_t ko = (int64_t)h * D * bs + s, vo = (int64_t)h * bs * D + (int64_t)s * D;   // elements
            if (kc->dtype == KV_BF16) {   // rounded to nearest even once, here; every read widens exactly
                uint16_t *kd = (uint16_t *)kv_cache_k(kc, b, layer) + ko, *vd = (uint16_t *)kv_cache_v(kc, b, layer) + vo;
                for (int d = 0; d < D; d++) kd[(int64_t)d * bs] = bf16_from_f32(kh[d]);
                for (int d = 0; d < D; d++) vd[d] = bf16_from_f32(vh[d]);
            } else {
                float *kd = (float *)kv_cache_k(kc, b, layer) + ko, *vd = (float *)kv_cache_v(kc, b, layer) + vo;
                for (int d = 0; d < D; d++) kd[(int64_t)d * bs] = kh[d];
                memcpy(vd, vh, (size_t)D * sizeof(float));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The arithmetic, for one (token, kv head) and one block of nk <= bs keys (query heads h of the group):
//   s_j   = ((a_0 + a_1) + (a_2 + a_3)) * scale, a_i an FMA chain from 0 over d = i, i+4, ... of q_h[d] k_j[d]
//   mn    = max(m, max_j s_j);  corr = exp(m - mn);  p_j = exp(s_j - mn);  m = mn
//   l     = l * corr + sum16(p),  sum16 the tree (j, j+8), (j, j+4), (j, j+2), (j, j+1) over the block's 16
//           lanes (keys past nk are 0; a block of bs > 16 adds the trees of its 16-key chunks in order)
//   acc_d = acc_d * corr, then acc_d = fma(p_j, v_j[d], acc_d) for j in order;  out = acc * (1 / l)
// with exp = k_expf, and k, v the cache's elements widened to fp32 (exact, for a bf16 cache). task_scalar
// spells it in plain C; the AVX-512 and AVX2 tasks compute the same bits (for block size 16; tests check it
// bitwise on every build), so a row's result does not depend on the ISA among FMA machines, nor on the other
// tokens, the threads or the kv-head grouping.

static float sum16(const float *p) {   // p[16]: the lane tree of the vector paths
    float a[8], b[4];
    for (int i = 0; i < 8; i++) a[i] = p[i] + p[i + 8];
    for (int i = 0; i < 4; i++) b[i] = a[i] + a[i + 4];
    return (b[0] + b[2]) + (b[1] + b[3]);
}

// Portable task: kv head g of one token, any block size and head dim.
static void task_scalar(float *out_t, const float *q_t, const kv_cache *kc, int layer, const int32_t *bt, int k0,
                        int n_keys, int g, int G, int D, float scale) {
    const int bs = kc->block_size;
    float acc[PA_MAX_G * PA_MAX_D];   // (G, D)
    float a[4][1024], p[1024 + 16];   // (4, bs) partial score sums; (bs rounded up to 16) probabilities
    float m[PA_MAX_G], l[PA_MAX_G];
    for (int h = 0; h < G; h++) { m[h] = -INFINITY; l[h] = 0.f; }
    memset(acc, 0, (size_t)G * D * sizeof(float));
    const int nblk = (n_keys + bs - 1) / bs;
    for (int ib = k0 / bs; ib < nblk; ib++) {
        const int b = bt[ib];
        const void *kt = kv_cache_k(kc, b, layer), *vt = kv_cache_v(kc, b, layer);
        const int64_t ko = (int64_t)g * D * bs, vo = (int64_t)g * bs * D;   // head g: (D, bs) keys, (bs, D) values
        const int nk = n_keys - ib * bs < bs ? n_keys - ib * bs : bs;
        const int j0 = k0 > ib * bs ? k0 - ib * bs : 0;   // keys before j0 are outside the window
        for (int h = 0; h < G; h++) {
            const float *qh = q_t + (int64_t)(g * G + h) * D;
            for (int i = 0; i < 4; i++)
                for (int j = j0; j < nk; j++) a[i][j] = 0.f;
            for (int d = 0; d < D; d++) {   // chain d % 4, keys inner (vectorisable, K rows read in order)
                const float qd = qh[d];
                const int64_t kr = ko + (int64_t)d * bs;
                float *ai = a[d % 4];
                for (int j = j0; j < nk; j++) ai[j] = fmaf(qd, kv_cache_get(kc, kt, kr + j), ai[j]);
            }
            float mb = -INFINITY;
            for (int j = j0; j < nk; j++) {
                p[j] = ((a[0][j] + a[1][j]) + (a[2][j] + a[3][j])) * scale;
                if (p[j] > mb) mb = p[j];
            }
            const float mn = m[h] > mb ? m[h] : mb;
            const float corr = k_expf(m[h] - mn);
            const int nk16 = (nk + 15) / 16 * 16;
            for (int j = 0; j < j0; j++) p[j] = 0.f;
            for (int j = j0; j < nk; j++) p[j] = k_expf(p[j] - mn);
            for (int j = nk; j < nk16; j++) p[j] = 0.f;
            float ps = sum16(p);
            for (int c = 16; c < nk16; c += 16) ps += sum16(p + c);
            l[h] = l[h] * corr + ps;
            m[h] = mn;
            float *ah = acc + (int64_t)h * D;
            for (int d = 0; d < D; d++) ah[d] *= corr;
            for (int j = j0; j < nk; j++) {   // the same chain per d as the vector paths, d inner
                const float pj = p[j];
                const int64_t vr = vo + (int64_t)j * D;
                for (int d = 0; d < D; d++) ah[d] = fmaf(pj, kv_cache_get(kc, vt, vr + d), ah[d]);
            }
        }
    }
    for (int h = 0; h < G; h++) {
        const float inv = 1.0f / l[h];
        float *o = out_t + (int64_t)(g * G + h) * D;
        for (int d = 0; d < D; d++) o[d] = acc[(int64_t)h * D + d] * inv;
    }
}

// ---------------------------------------------------------------------------------------------
// Vector paths (block size 16): heads_block(NH, ...) runs query heads h0 .. h0+NH-1 (NH = 1 or 2, a constant)
// of one kv head against one block: scores, the online-softmax update and the p * V accumulation.

#if defined(__AVX512F__)
#define PA_SIMD 1
#define PA_SIMD_D 16   // head dims the vector path takes: multiples of this
// 16 cache elements from p + i (elements): fp32, or bf16 widened exactly (BF, a constant at every call site).
static inline __attribute__((always_inline)) __m512 kv_ld16(const void *p, int64_t i, int BF) {
    if (BF) return _mm512_castsi512_ps(_mm512_slli_epi32(
                   _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i))), 16));
    return _mm512_load_ps((const float *)p + i);
}

static inline float hsum16(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    __m128 d = _mm_add_ss(c, _mm_movehdup_ps(c));
    return _mm_cvtss_f32(d);
}

// Scores of one 16-key block for NH query heads: head h's 16 scores are one zmm, from the transposed key tile
// (no horizontal sums). Two heads run their 8 chains together (each K vector loaded once). pk: the next K tile,
// prefetched a line per line read (NULL: not).
static inline __attribute__((always_inline)) void block_scores(__m512 *s, int NH, const float *q0, const float *q1,
                                                                const void *kt, int D, float scale, int BF,
                                                                const char *pk) {
    __m512 a[2][4];
    for (int h = 0; h < NH; h++)
        for (int i = 0; i < 4; i++) a[h][i] = _mm512_setzero_ps();
    const float *qs[2] = {q0, q1};
    for (int d = 0; d < D; d += 4)
        for (int i = 0; i < 4; i++) {
            const __m512 kv = kv_ld16(kt, (int64_t)(d + i) * 16, BF);
            if (pk && (!BF || i % 2 == 0)) _mm_prefetch(pk + (int64_t)(d + i) * 16 * (BF ? 2 : 4), _MM_HINT_T0);
            for (int h = 0; h < NH; h++) a[h][i] = _mm512_fmadd_ps(_mm512_set1_ps(qs[h][d + i]), kv, a[h][i]);
        }
    for (int h = 0; h < NH; h++)
        s[h] = _mm512_mul_ps(_mm512_add_ps(_mm512_add_ps(a[h][0], a[h][1]), _mm512_add_ps(a[h][2], a[h][3])),
                             _mm512_set1_ps(scale));
}

// acc_h = acc_h * corr_h + sum_j p_h[j] v_j for NH heads. j runs outside and 128 columns of every head stay in
// registers (8 zmm per head), so the chains are independent and each V vector is loaded once for the NH heads.
// pv: the next V tile, prefetched as block_scores' pk (NULL: not).
static inline __attribute__((always_inline)) void block_pv(int NH, float *acc0, float *acc1, const float *p0,
                                                            const float *p1, float c0, float c1, const void *vt,
                                                            int j0, int nk, int D, int BF, const char *pv) {
    float *accs[2] = {acc0, acc1};
    const float *ps[2] = {p0, p1};
    const float cs[2] = {c0, c1};
    if (D % 128 == 0) {
        for (int d0 = 0; d0 < D; d0 += 128) {
            __m512 a[2][8];
            for (int h = 0; h < NH; h++)
                for (int u = 0; u < 8; u++)
                    a[h][u] = _mm512_mul_ps(_mm512_load_ps(accs[h] + d0 + 16 * u), _mm512_set1_ps(cs[h]));
            for (int j = j0; j < nk; j++) {
                __m512 pj[2];
                for (int h = 0; h < NH; h++) pj[h] = _mm512_set1_ps(ps[h][j]);
                for (int u = 0; u < 8; u++) {
                    const __m512 vv = kv_ld16(vt, (int64_t)j * D + d0 + 16 * u, BF);
                    if (pv && (!BF || u % 2 == 0))
                        _mm_prefetch(pv + ((int64_t)j * D + d0 + 16 * u) * (BF ? 2 : 4), _MM_HINT_T0);
                    for (int h = 0; h < NH; h++) a[h][u] = _mm512_fmadd_ps(pj[h], vv, a[h][u]);
                }
            }
            for (int h = 0; h < NH; h++)
                for (int u = 0; u < 8; u++) _mm512_store_ps(accs[h] + d0 + 16 * u, a[h][u]);
        }
        return;
    }
    for (int h = 0; h < NH; h++)
        for (int dv = 0; dv < D; dv += 16) {
            __m512 a = _mm512_mul_ps(_mm512_load_ps(accs[h] + dv), _mm512_set1_ps(cs[h]));
            for (int j = j0; j < nk; j++)
                a = _mm512_fmadd_ps(_mm512_set1_ps(ps[h][j]), kv_ld16(vt, (int64_t)j * D + dv, BF), a);
            _mm512_store_ps(accs[h] + dv, a);
        }
}

static inline __attribute__((always_inline)) void heads_block(int NH, int h0, float *acc, float *m, float *l,
                                                               const float *q_g, const void *kt, const void *vt,
                                                               int j0, int nk, int D, float scale, int BF,
                                                               const char *pk, const char *pv) {
    _Alignas(64) float pj[2][16];
    float corr[2] = {1.f, 1.f};
    const __mmask16 valid = (__mmask16)(((1u << nk) - 1u) & ~((1u << j0) - 1u));   // keys [j0, nk)
    __m512 s[2];
    block_scores(s, NH, q_g + (int64_t)h0 * D, q_g + (int64_t)(h0 + NH - 1) * D, kt, D, scale, BF, pk);
    for (int i = 0; i < NH; i++) {
        const int h = h0 + i;
        const __m512 si = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), valid, s[i]);
        const float mb = _mm512_reduce_max_ps(si);
        const float mn = m[h] > mb ? m[h] : mb;
        corr[i] = k_expf(m[h] - mn);
        _mm512_store_ps(pj[i], _mm512_sub_ps(si, _mm512_set1_ps(mn)));
#pragma omp simd
        for (int j = 0; j < 16; j++) pj[i][j] = k_expf(pj[i][j]);
        l[h] = l[h] * corr[i] + hsum16(_mm512_load_ps(pj[i]));
        m[h] = mn;
    }
    block_pv(NH, acc + (int64_t)h0 * D, acc + (int64_t)(h0 + NH - 1) * D, pj[0], pj[NH - 1], corr[0], corr[NH - 1],
             vt, j0, nk, D, BF, pv);
}

#elif defined(__AVX2__) && defined(__FMA__)
#define PA_SIMD 1
#define PA_SIMD_D 8
// AVX2 (16 ymm registers): a head's 16 scores are two ymm, 4 partial sums each, so heads take the scores one at
// a time; the p * V step shares each V load between two heads over 32-column strips (8 accumulators).

// 8 cache elements from p + i (elements): fp32, or bf16 widened exactly (BF, a constant at every call site).
static inline __attribute__((always_inline)) __m256 kv_ld8(const void *p, int64_t i, int BF) {
    if (BF) return _mm256_castsi256_ps(_mm256_slli_epi32(
                   _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i))), 16));
    return _mm256_load_ps((const float *)p + i);
}

// pk: the next K tile, prefetched a line per line read (NULL: not).
static inline __attribute__((always_inline)) void head_scores(__m256 *s0, __m256 *s1, const float *q, const void *kt,
                                                               int D, float scale, int BF, const char *pk) {
    __m256 a[2][4];
    for (int i = 0; i < 4; i++) a[0][i] = a[1][i] = _mm256_setzero_ps();
    for (int d = 0; d < D; d += 4)
        for (int i = 0; i < 4; i++) {
            const __m256 qd = _mm256_broadcast_ss(q + d + i);
            if (pk && (!BF || i % 2 == 0)) _mm_prefetch(pk + (int64_t)(d + i) * 16 * (BF ? 2 : 4), _MM_HINT_T0);
            a[0][i] = _mm256_fmadd_ps(qd, kv_ld8(kt, (int64_t)(d + i) * 16, BF), a[0][i]);
            a[1][i] = _mm256_fmadd_ps(qd, kv_ld8(kt, (int64_t)(d + i) * 16 + 8, BF), a[1][i]);
        }
    const __m256 sc = _mm256_set1_ps(scale);
    *s0 = _mm256_mul_ps(_mm256_add_ps(_mm256_add_ps(a[0][0], a[0][1]), _mm256_add_ps(a[0][2], a[0][3])), sc);
    *s1 = _mm256_mul_ps(_mm256_add_ps(_mm256_add_ps(a[1][0], a[1][1]), _mm256_add_ps(a[1][2], a[1][3])), sc);
}

static inline float hmax8(__m256 v) {
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a = _mm_max_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

static inline __attribute__((always_inline)) void block_pv(int NH, float *acc0, float *acc1, const float *p0,
                                                            const float *p1, float c0, float c1, const void *vt,
                                                            int j0, int nk, int D, int BF, const char *pv) {
    float *accs[2] = {acc0, acc1};
    const float *ps[2] = {p0, p1};
    const float cs[2] = {c0, c1};
    int d0 = 0;
    for (; d0 + 32 <= D; d0 += 32) {
        __m256 a[2][4];
        for (int h = 0; h < NH; h++)
            for (int u = 0; u < 4; u++) a[h][u] = _mm256_mul_ps(_mm256_load_ps(accs[h] + d0 + 8 * u), _mm256_set1_ps(cs[h]));
        for (int j = j0; j < nk; j++) {
            __m256 pj[2];
            for (int h = 0; h < NH; h++) pj[h] = _mm256_broadcast_ss(ps[h] + j);
            for (int u = 0; u < 4; u++) {
                const __m256 vv = kv_ld8(vt, (int64_t)j * D + d0 + 8 * u, BF);
                if (pv && u % (BF ? 4 : 2) == 0)
                    _mm_prefetch(pv + ((int64_t)j * D + d0 + 8 * u) * (BF ? 2 : 4), _MM_HINT_T0);
                for (int h = 0; h < NH; h++) a[h][u] = _mm256_fmadd_ps(pj[h], vv, a[h][u]);
            }
        }
        for (int h = 0; h < NH; h++)
            for (int u = 0; u < 4; u++) _mm256_store_ps(accs[h] + d0 + 8 * u, a[h][u]);
    }
    for (int h = 0; h < NH; h++)
        for (int dv = d0; dv < D; dv += 8) {
            __m256 a = _mm256_mul_ps(_mm256_load_ps(accs[h] + dv), _mm256_set1_ps(cs[h]));
            for (int j = j0; j < nk; j++)
                a = _mm256_fmadd_ps(_mm256_broadcast_ss(ps[h] + j), kv_ld8(vt, (int64_t)j * D + dv, BF), a);
            _mm256_store_ps(accs[h] + dv, a);
        }
}

static inline __attribute__((always_inline)) void heads_block(int NH, int h0, float *acc, float *m, float *l,
                                                               const float *q_g, const void *kt, const void *vt,
                                                               int j0, int nk, int D, float scale, int BF,
                                                               const char *pk, const char *pv) {
    _Alignas(32) float pj[2][16];
    float corr[2] = {1.f, 1.f};
    // keys [j0, nk) of the block are valid
    const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), nkv = _mm256_set1_ps((float)nk),
                 lo = _mm256_set1_ps((float)j0), lane8 = _mm256_add_ps(lane, _mm256_set1_ps(8.f));
    const __m256 ok0 = _mm256_and_ps(_mm256_cmp_ps(lane, nkv, _CMP_LT_OQ), _mm256_cmp_ps(lane, lo, _CMP_GE_OQ));
    const __m256 ok1 = _mm256_and_ps(_mm256_cmp_ps(lane8, nkv, _CMP_LT_OQ), _mm256_cmp_ps(lane8, lo, _CMP_GE_OQ));
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (int i = 0; i < NH; i++) {
        const int h = h0 + i;
        __m256 s0, s1;
        head_scores(&s0, &s1, q_g + (int64_t)h * D, kt, D, scale, BF, i == 0 ? pk : NULL);
        s0 = _mm256_blendv_ps(ninf, s0, ok0);
        s1 = _mm256_blendv_ps(ninf, s1, ok1);
        const float mb = hmax8(_mm256_max_ps(s0, s1));
        const float mn = m[h] > mb ? m[h] : mb;
        corr[i] = k_expf(m[h] - mn);
        const __m256 mv = _mm256_set1_ps(mn);
        _mm256_store_ps(pj[i], _mm256_sub_ps(s0, mv));
        _mm256_store_ps(pj[i] + 8, _mm256_sub_ps(s1, mv));
#pragma omp simd
        for (int j = 0; j < 16; j++) pj[i][j] = k_expf(pj[i][j]);
        // sum16: (j, j+8) is the two halves' sum, then the 128-bit tree of the AVX-512 hsum16
        const __m256 a = _mm256_add_ps(_mm256_load_ps(pj[i]), _mm256_load_ps(pj[i] + 8));
        __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
        __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
        l[h] = l[h] * corr[i] + _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
        m[h] = mn;
    }
    block_pv(NH, acc + (int64_t)h0 * D, acc + (int64_t)(h0 + NH - 1) * D, pj[0], pj[NH - 1], corr[0], corr[NH - 1],
             vt, j0, nk, D, BF, pv);
}
#endif

#ifdef PA_SIMD
// One task: kv heads [g0, g0 + ng) of one token, block_size 16. out_t/q_t point at the token's (nh*D) rows.
// Blocks run outside and heads inside, so a task reads each block's K and V of its heads as two runs of
// ng * 8 KiB (K of heads g0.. side by side, then V; 64 sequences x context 192 on Zen 4: 8-head tasks 73-99 ms
// per step for all layers, where one-head tasks took 110-126). The hardware prefetcher stops at every 4 KiB
// page, which is one bf16 tile (half an fp32 one), and the next block sits anywhere in the pool; so every line
// of a head's tiles prefetches the same line of the next head's (or the next block's first head's) tiles,
// spread over the reads instead of in a burst (`bench_paged_attention` on an Intel Xeon VM, alternated runs:
// 64 x 192 bf16 83-85 -> 64 ms, fp32 121-133 -> 113-115; 64 x 768 bf16 346-356 -> 246-291; batch 1 x 320 bf16
// 1.26-1.43 -> 0.92-0.99; a distance of 2 or 4 tiles, and a whole next block up front, were no better or slower).
// Query heads go in pairs (one left over when G is odd). Each head's arithmetic is the same for any ng.
static inline __attribute__((always_inline)) void task_simd(float *out_t, const float *q_t, const kv_cache *kc,
                                                             int layer, const int32_t *bt, int k0, int n_keys, int g0,
                                                             int ng, int G, int D, float scale, int BF) {
    _Alignas(64) float acc[PA_MAX_G * PA_MAX_D];   // (ng*G, D)
    float m[PA_MAX_G], l[PA_MAX_G];                 // (ng*G)
    for (int h = 0; h < ng * G; h++) { m[h] = -INFINITY; l[h] = 0.f; }
    memset(acc, 0, (size_t)ng * G * D * sizeof(float));
    const int nblk = (n_keys + 15) / 16;
    const int64_t eb = kc->elem_bytes, tile = (int64_t)D * 16 * eb;   // bytes of one head's K (or V) tile
    for (int ib = k0 / 16; ib < nblk; ib++) {
        const int b = bt[ib];
        const int nk = n_keys - ib * 16 < 16 ? n_keys - ib * 16 : 16;
        const int j0 = k0 > ib * 16 ? k0 - ib * 16 : 0;   // keys before j0 are outside the window
        for (int g = g0; g < g0 + ng; g++) {
            const void *kt = (const char *)kv_cache_k(kc, b, layer) + g * tile;   // (D, 16)
            const void *vt = (const char *)kv_cache_v(kc, b, layer) + g * tile;   // (16, D)
            // the tiles read next: head g + 1, or head g0 of the next block (the last block: this one's, harmless)
            const int gn = g + 1 < g0 + ng ? g + 1 : g0, bn = g + 1 < g0 + ng || ib + 1 == nblk ? b : bt[ib + 1];
            const char *pk = (const char *)kv_cache_k(kc, bn, layer) + gn * tile;
            const char *pv = (const char *)kv_cache_v(kc, bn, layer) + gn * tile;
            const float *q_g = q_t + (int64_t)g * G * D;
            const int o = (g - g0) * G;
            float *acc_g = acc + (int64_t)o * D;
            int h = 0;
            // the first head (pair) reads the whole tiles; it prefetches
            for (; h + 2 <= G; h += 2)
                heads_block(2, h, acc_g, m + o, l + o, q_g, kt, vt, j0, nk, D, scale, BF, h ? NULL : pk, h ? NULL : pv);
            if (h < G)
                heads_block(1, h, acc_g, m + o, l + o, q_g, kt, vt, j0, nk, D, scale, BF, h ? NULL : pk, h ? NULL : pv);
        }
    }
    for (int h = 0; h < ng * G; h++) {
        const float inv = 1.0f / l[h];
        float *o = out_t + (int64_t)(g0 * G + h) * D;
        for (int d = 0; d < D; d++) o[d] = acc[(int64_t)h * D + d] * inv;
    }
}
// The two element types, each compiled with its loads inlined.
static void task_simd_f32(float *out_t, const float *q_t, const kv_cache *kc, int layer, const int32_t *bt, int k0,
                          int n_keys, int g0, int ng, int G, int D, float scale) {
    task_simd(out_t, q_t, kc, layer, bt, k0, n_keys, g0, ng, G, D, scale, 0);
}
static void task_simd_bf16(float *out_t, const float *q_t, const kv_cache *kc, int layer, const int32_t *bt, int k0,
                           int n_keys, int g0, int ng, int G, int D, float scale) {
    task_simd(out_t, q_t, kc, layer, bt, k0, n_keys, g0, ng, G, D, scale, 1);
}
#endif

const char *paged_attention_isa(void) {
#if defined(__AVX512F__)
    return "avx512";
#elif defined(PA_SIMD)
    return "avx2";
#else
    return "scalar";
#endif
}

// Tasks (token, group of kv heads) as in paged_attention_forward; simd selects the vector task where the shape
// allows it.
// The first key position token t sees: pos - window + 1 on a sliding layer (window > 0), else 0.
static inline int first_key(int32_t pos, int window) { return window > 0 && pos >= window ? pos - window + 1 : 0; }

static void attention_tasks(float *out, const float *q, const kv_cache *kc, int layer, const int32_t *block_tables,
                            int64_t bt_stride, const int32_t *tok_seq, const int32_t *pos, int64_t T, int nh,
                            int window, float scale, int simd) {
    const int nkv = kc->n_kv_heads, D = kc->head_dim;
    CHECK(nh % nkv == 0 && nh / nkv <= PA_MAX_G && D <= PA_MAX_D && kc->block_size <= 1024,
          "paged attention: nh=%d nkv=%d D=%d block_size=%d unsupported", nh, nkv, D, kc->block_size);
    CHECK(window >= 0 && scale > 0.f, "paged attention: window=%d scale=%g", window, (double)scale);
    const int G = nh / nkv;
#ifdef PA_SIMD
    const int fast = simd && kc->block_size == 16 && D % PA_SIMD_D == 0;
#else
    (void)simd;
#endif
    // kv heads per task: as many as fit the accumulator (all 8 of Qwen3-0.6B), halved until there are 8 tasks
    // per thread (batch 1: one head per task). Results do not depend on it: each head's sum is the same.
    int hg = nkv;
    while (hg > 1 && (hg * G > PA_MAX_G || (int64_t)hg * G * D > (int64_t)PA_MAX_G * PA_MAX_D)) hg = (hg + 1) / 2;
    while (hg > 1 && T * ((nkv + hg - 1) / hg) < 8 * (int64_t)omp_get_max_threads()) hg = (hg + 1) / 2;
    const int per_t = (nkv + hg - 1) / hg;
    const int64_t n_tasks = T * per_t;
    // dynamic: tasks differ in length (context), and a task's result does not depend on its thread
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t task = 0; task < n_tasks; task++) {
        const int64_t t = task / per_t;
        const int g0 = (int)(task % per_t) * hg, ng = nkv - g0 < hg ? nkv - g0 : hg;
        const int32_t *bt = block_tables + (int64_t)tok_seq[t] * bt_stride;
        float *out_t = out + t * (int64_t)nh * D;
        const float *q_t = q + t * (int64_t)nh * D;
        const int k0 = first_key(pos[t], window);
        // blocks before k0's were recycled (or never read): the first one read must be held
        CHECK(bt[k0 / kc->block_size] >= 0 && bt[k0 / kc->block_size] < kc->n_blocks,
              "paged attention: token at pos %d reads block %d (table entry %d)", pos[t], bt[k0 / kc->block_size],
              k0 / kc->block_size);
#ifdef PA_SIMD
        if (fast) {
            (kc->dtype == KV_BF16 ? task_simd_bf16 : task_simd_f32)(out_t, q_t, kc, layer, bt, k0, pos[t] + 1, g0, ng, G,
                                                                    D, scale);
            continue;
        }
#endif
        for (int g = g0; g < g0 + ng; g++) task_scalar(out_t, q_t, kc, layer, bt, k0, pos[t] + 1, g, G, D, scale);
    }
}

void paged_attention_forward(float *out, const float *q, const kv_cache *kc, int layer, const int32_t *block_tables,
                             int64_t bt_stride, const int32_t *tok_seq, const int32_t *pos, int64_t T, int nh,
                             int window, float scale) {
    attention_tasks(out, q, kc, layer, block_tables, bt_stride, tok_seq, pos, T, nh, window, scale, 1);
}

void paged_attention_forward_scalar(float *out, const float *q, const kv_cache *kc, int layer,
                                    const int32_t *block_tables, int64_t bt_stride, const int32_t *tok_seq,
                                    const int32_t *pos, int64_t T, int nh, int window, float scale) {
    attention_tasks(out, q, kc, layer, block_tables, bt_stride, tok_seq, pos, T, nh, window, scale, 0);
}

void paged_attention_forward_ref(float *out, const float *q, const kv_cache *kc, int layer, const int32_t *block_tables,
                                 int64_t bt_stride, const int32_t *tok_seq, const int32_t *pos, int64_t T, int nh,
                                 int window, float scale_f) {
    const int nkv = kc->n_kv_heads, D = kc->head_dim, bs = kc->block_size, G = nh / nkv;
    const double scale = scale_f;
    for (int64_t t = 0; t < T; t++) {
        const int32_t *bt = block_tables + (int64_t)tok_seq[t] * bt_stride;
        const int n = pos[t] + 1, k0 = first_key(pos[t], window);
        double *sc = rlc_malloc((size_t)n * sizeof(double));
        for (int h = 0; h < nh; h++) {
            const int g = h / G;
            const float *qh = q + t * (int64_t)nh * D + (int64_t)h * D;
            double mx = -INFINITY;
            for (int p = k0; p < n; p++) {
                const void *kt = kv_cache_k(kc, bt[p / bs], layer);
                const int64_t ko = (int64_t)g * D * bs + p % bs;
                double s = 0;
                for (int d = 0; d < D; d++) s += (double)qh[d] * (double)kv_cache_get(kc, kt, ko + (int64_t)d * bs);
                sc[p] = s * scale;
                if (sc[p] > mx) mx = sc[p];
            }
            double sum = 0;
            for (int p = k0; p < n; p++) { sc[p] = exp(sc[p] - mx); sum += sc[p]; }
            float *o = out + t * (int64_t)nh * D + (int64_t)h * D;
            for (int d = 0; d < D; d++) {
                double a = 0;
                for (int p = k0; p < n; p++)
                    a += sc[p] * (double)kv_cache_get(kc, kv_cache_v(kc, bt[p / bs], layer),
                                                      (int64_t)g * bs * D + (int64_t)(p % bs) * D + d);
                o[d] = (float)(a / sum);
            }
        }
        free(sc);
    }
}
