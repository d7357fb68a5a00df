// logprob_head.c: the fused log-prob / entropy head over the vocabulary, and full logits.
//
// z = (hidden @ w^T) / temperature, or with final-logit soft-capping (Gemma 2 style, cap > 0)
// z = cap * tanh((hidden @ w^T) / cap) / temperature, applied to each block of logits as it streams. Forward streams over token chunks (HEAD_TC rows) and vocabulary
// chunks (about HEAD_VC entries): one single-threaded sgemm per (token chunk, vocab chunk) block inside an
// OpenMP loop over vocab chunks, then per row an online log-sum-exp (max, sum e^(z-m), and
// sum e^(z-m)(z-m) for the entropy). Block statistics are merged per row in vocab-chunk order, so the
// result does not depend on the thread count. Scratch: n_threads x HEAD_TC x VC floats (about 9 MB a
// thread; 13 MB in the backward), independent of T and V; the (T, V) logits never exist.
// Chunk sizes (profiled with perf on the 0.6B head): sgemm repacks the w chunk on every call, so
// each token chunk costs one packing pass over all of w (about 8% of the sgemm time at 512 tokens,
// 4% at 1024); the per-row statistics cost about 1.5%.
//
// Backward recomputes each block's logits, forms G = dloss/dlogits in place, and issues two more
// sgemms per block: dw[chunk] += G^T hidden[chunk] (each vocab chunk is owned by one thread, and its
// rows accumulate token chunks in order), and a per-thread partial dhidden[chunk] += G w[chunk],
// summed over threads in thread order after each token chunk (deterministic for a fixed thread count).
//
// A frozen head (LoRA: no dW) needs no backward sweep: d logp / d hidden does not depend on the loss, so its forward
// (logprob_head_forward_frozen) also sums, per thread and row, the probability-weighted rows of w of the vocabulary
// chunks it sweeps (one more sgemm per block, rescaled when the row's running max moves), merges the threads' sums
// in thread order and saves g (T, H) (and the entropy's ge); the backward is dhidden += dlogp g (+ dentropy ge).
#include <math.h>
#include <omp.h>

#include "backend/backend.h"
#include "core/common.h"
#include "kernels/kernels.h"
#include "kernels/kmath.h"

#ifndef HEAD_TC
#define HEAD_TC 1024   // tokens per chunk, forward (each token chunk repacks all of w in sgemm)
#endif
#ifndef HEAD_TC_BWD
#define HEAD_TC_BWD 1024  // tokens per chunk, backward (fewer passes over dw)
#endif
#ifndef HEAD_VC
#define HEAD_VC 2048   // target vocabulary entries per chunk
#endif

// Vocabulary chunk width: about HEAD_VC, with the chunk count rounded to a multiple of 8 once there
// are 8 or more, so that the chunks are nearly equal and split evenly over 2, 4 or 8 threads (a
// static schedule over 37 full chunks and a 448-wide tail would leave a thread idle). It depends on
// V only, so the forward stays independent of the thread count. Width in [~1500, ~3100].
static int64_t head_vchunk(int64_t V) {
    int64_t n = (V + HEAD_VC / 2) / HEAD_VC;
    if (n >= 8) n = (n + 4) / 8 * 8;
    if (n < 1) n = 1;
    return (V + n - 1) / n;
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Threads of the head's parallel regions, which size the per-thread scratch: one when called inside a parallel
// region (the decoder's sequence split runs one head per thread), where a nested region gets one thread.
static int head_threads(void) { return omp_in_parallel() ? 1 : omp_get_max_threads(); }

static void head_check(const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature, const char *who) {
    CHECK(T >= 0 && H > 0 && V > 0, "%s: T=%lld H=%lld V=%lld", who, (long long)T, (long long)H, (long long)V);
    CHECK(temperature > 0.0f && isfinite(temperature), "%s: temperature must be positive and finite, got %g", who, (double)temperature);
    if (targets)
        for (int64_t t = 0; t < T; t++)
            CHECK(targets[t] < V, "%s: target id %d of token %lld is >= vocab size %lld", who, (int)targets[t], (long long)t, (long long)V);
}

// Per-row statistics of one block row z (n): scales by 1/temperature in place, returns the max m,
// s = sum e^(z-m) and a = sum e^(z-m) (z-m) (a only when want_a).
static inline void row_stats(float *z, int64_t n, float temperature, int want_a, float *m_out, float *s_out, float *a_out) {
    float m = -INFINITY;
    if (temperature != 1.0f) {
#pragma omp simd reduction(max : m)
        for (int64_t j = 0; j < n; j++) { z[j] = z[j] / temperature; m = z[j] > m ? z[j] : m; }
    } else {
#pragma omp simd reduction(max : m)
        for (int64_t j = 0; j < n; j++) m = z[j] > m ? z[j] : m;
    }
    float s = 0.0f, a = 0.0f;
    if (want_a) {
#pragma omp simd reduction(+ : s, a)
        for (int64_t j = 0; j < n; j++) { float d = z[j] - m, e = k_expf_le88(d); s += e; a += e * d; }
    } else {
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < n; j++) s += k_expf_le88(z[j] - m);
    }
    *m_out = m; *s_out = s; *a_out = a;
}

// z (n) = cap * tanh(z / cap) in place (cap > 0)
static void row_softcap(float *z, int64_t n, float cap) {
    const float ic = 1.0f / cap;
    for (int64_t j = 0; j < n; j++) z[j] = cap * tanhf(z[j] * ic);
}

// Frozen head (g != NULL): the running max M of row r over the vocabulary chunks a thread has seen so far moved
// to m (m > M): rescale the thread's sums of that row, acc1 = sum e^(z-M) c w and acc2 = sum e^(z-M)(z-M) c w,
// to the new max (as flash attention rescales its P·V accumulator).
static inline void acc_rescale(float *a1, float *a2, int64_t H, float M, float m) {
    const float d = m - M, sc = expf(-d);
    if (a2) {
#pragma omp simd
        for (int64_t h = 0; h < H; h++) { a2[h] = sc * (a2[h] - d * a1[h]); a1[h] = sc * a1[h]; }
    } else {
#pragma omp simd
        for (int64_t h = 0; h < H; h++) a1[h] = sc * a1[h];
    }
}

// Row r of a token chunk, after the forward's sweep: merge the threads' sums (acc: per thread (nr*TC, H) at
// stride acc_stride, acc1 rows then acc2 rows of tc each; runm: per thread (TC) running max, -inf where a thread
// saw no chunk) to the row's max m, in thread order, and finish
//   g  (H) = d logp / d hidden    = (c_y w_y - sum_v p_v c_v w_v) / temperature     (0 without a target: wy NULL)
//   ge (H) = d entropy / d hidden = -sum_v p_v (z_v - E z) c_v w_v / temperature      (may be NULL)
// with p_v = e^(z_v - m) / s and E z - m = a / s (s, a: the row's merged statistics relative to m).
static void head_grad_row(float *g, float *ge, const float *acc, const float *runm, int nth, int64_t acc_stride,
                          int64_t TC, int64_t tc, int64_t r, int64_t H, float m, double s, double a, const float *wy,
                          float zy, float kc, float temperature) {
    memset(g, 0, (size_t)H * sizeof(float));   // out1 = sum e^(z-m) c w, accumulated here first
    if (ge) memset(ge, 0, (size_t)H * sizeof(float));   // out2 = sum e^(z-m) (z-m) c w
    for (int th = 0; th < nth; th++) {
        const float Mt = runm[(size_t)th * (size_t)TC + (size_t)r];
        if (Mt == -INFINITY) continue;
        const float d = m - Mt, sc = expf(-d);   // d >= 0: the thread's max to the row's
        const float *a1 = acc + (size_t)th * (size_t)acc_stride + (size_t)(r * H), *a2 = a1 + tc * H;
        if (ge) {
#pragma omp simd
            for (int64_t h = 0; h < H; h++) { g[h] += sc * a1[h]; ge[h] += sc * (a2[h] - d * a1[h]); }
        } else {
#pragma omp simd
            for (int64_t h = 0; h < H; h++) g[h] += sc * a1[h];
        }
    }
    const float is = (float)(1.0 / s), it = 1.0f / temperature, ezm = (float)(a / s);
    if (ge)
        for (int64_t h = 0; h < H; h++) ge[h] = -(ge[h] - ezm * g[h]) * is * it;
    if (wy) {
        const float cy = kc > 0 ? 1.0f - (zy * kc) * (zy * kc) : 1.0f;
        for (int64_t h = 0; h < H; h++) g[h] = (cy * wy[h] - g[h] * is) * it;
    } else {
        memset(g, 0, (size_t)H * sizeof(float));
    }
}

// All outputs optional. logp (T), entropy (T), lse (T); g (T, H) and ge (T, H) the frozen head's per-token
// gradients (logprob_head_forward_frozen), ge only with g.
static void head_forward(float *logp, float *entropy, float *lse, float *g, float *ge, const float *hidden, const float *w,
                         const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature, float softcap) {
    head_check(targets, T, H, V, temperature, "logprob_head_forward");
    if (T == 0) return;
    const int64_t TC = min64(HEAD_TC, T), VC = head_vchunk(V), nvc = (V + VC - 1) / VC;
    const int nth = head_threads();
    const int want_a = entropy != NULL || ge != NULL;
    // frozen head: nr = rows of the stacked block [P; Q] (P = e^(z-M) c, Q = P (z-M)) and of the sums [acc1; acc2]
    const int64_t nr = g ? (ge ? 2 : 1) : 0;
    const float kc = softcap > 0 ? temperature / softcap : 0.0f;   // tanh of a capped logit = z * kc
    float *scratch = rlc_alloc((size_t)nth * (size_t)TC * (size_t)VC * (size_t)(nr > 1 ? 2 : 1) * sizeof(float));  // per thread (TC, VC), (2*TC, VC) with ge
    float *st = rlc_alloc((size_t)TC * (size_t)nvc * 3 * sizeof(float));              // (TC, nvc, {m, s, a})
    float *zt = rlc_alloc((size_t)TC * sizeof(float));                                 // (TC) target logit
    float *acc = nr ? rlc_alloc((size_t)nth * (size_t)(nr * TC) * (size_t)H * sizeof(float)) : NULL;  // per thread (nr*TC, H)
    float *runm = nr ? rlc_alloc((size_t)nth * (size_t)TC * sizeof(float)) : NULL;                  // per thread (TC) running max
    for (int64_t t0 = 0; t0 < T; t0 += TC) {
        const int64_t tc = min64(TC, T - t0);
        const float *hc = hidden + t0 * H;  // (tc, H)
#pragma omp parallel num_threads(nth)
        {
            const int tid = omp_get_thread_num();
            float *L = scratch + (size_t)tid * (size_t)TC * (size_t)VC * (size_t)(nr > 1 ? 2 : 1);
            float *A = nr ? acc + (size_t)tid * (size_t)(nr * TC) * (size_t)H : NULL;   // (nr*tc, H): acc1 rows, then acc2 rows
            float *M = nr ? runm + (size_t)tid * (size_t)TC : NULL;                     // (tc)
            if (nr) {
                memset(A, 0, (size_t)(nr * tc * H) * sizeof(float));
                for (int64_t r = 0; r < tc; r++) M[r] = -INFINITY;
            }
#pragma omp for schedule(static)
            for (int64_t k = 0; k < nvc; k++) {
                const int64_t v0 = k * VC, vc = min64(VC, V - v0);
                backend_sgemm(0, 1, tc, vc, H, 1.0f, hc, H, w + v0 * H, H, 0.0f, L, vc);  // L (tc, vc)
                for (int64_t r = 0; r < tc; r++) {
                    float *z = L + r * vc;
                    float *o = st + (r * nvc + k) * 3;
                    if (softcap > 0) row_softcap(z, vc, softcap);
                    row_stats(z, vc, temperature, want_a, &o[0], &o[1], &o[2]);
                    int32_t tg = targets ? targets[t0 + r] : -1;
                    if (tg >= v0 && tg < v0 + vc) zt[r] = z[tg - v0];
                    if (!nr) continue;
                    // z (vc) -> P = e^(z - M) c in place (c = d capped / d logit = 1 - tanh^2, 1 without a cap), and
                    // Q = P (z - M) in row r of the block below (rows tc..2tc-1 of [P; Q])
                    if (o[0] > M[r]) {
                        if (M[r] > -INFINITY) acc_rescale(A + r * H, nr > 1 ? A + (tc + r) * H : NULL, H, M[r], o[0]);
                        M[r] = o[0];
                    }
                    const float mr = M[r];
                    float *q = nr > 1 ? L + (tc + r) * vc : NULL;
                    if (softcap > 0) {
                        for (int64_t j = 0; j < vc; j++) {
                            const float th = z[j] * kc, p = k_expf_le88(z[j] - mr) * (1.0f - th * th);
                            if (q) q[j] = p * (z[j] - mr);
                            z[j] = p;
                        }
                    } else if (q) {
#pragma omp simd
                        for (int64_t j = 0; j < vc; j++) { const float d = z[j] - mr, p = k_expf_le88(d); q[j] = p * d; z[j] = p; }
                    } else {
#pragma omp simd
                        for (int64_t j = 0; j < vc; j++) z[j] = k_expf_le88(z[j] - mr);
                    }
                }
                // [acc1; acc2] (nr*tc, H) += [P; Q] (nr*tc, vc) @ w[chunk] (vc, H)
                if (nr) backend_sgemm(0, 0, nr * tc, H, vc, 1.0f, L, vc, w + v0 * H, H, 1.0f, A, H);
            }
        }
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < tc; r++) {
            const float *o = st + r * nvc * 3;
            double m = -INFINITY, s = 0, a = 0;
            for (int64_t k = 0; k < nvc; k++) m = o[k * 3] > m ? o[k * 3] : m;
            for (int64_t k = 0; k < nvc; k++) {
                double mk = o[k * 3], sc = exp(mk - m);
                s += sc * o[k * 3 + 1];
                a += sc * (o[k * 3 + 2] + (mk - m) * o[k * 3 + 1]);
            }
            double ls = m + log(s);
            const int64_t t = t0 + r;
            if (lse) lse[t] = (float)ls;
            if (entropy) entropy[t] = (float)(log(s) - a / s);
            if (logp) logp[t] = targets && targets[t] >= 0 ? (float)((double)zt[r] - ls) : 0.0f;
            if (nr) head_grad_row(g + t * H, ge ? ge + t * H : NULL, acc, runm, nth, nr * TC * H, TC, tc, r, H, (float)m, s, a,
                                  targets && targets[t] >= 0 ? w + (int64_t)targets[t] * H : NULL, zt[r], kc, temperature);
        }
    }
    rlc_free(runm);
    rlc_free(acc);
    rlc_free(zt);
    rlc_free(st);
    rlc_free(scratch);
}

void logprob_head_forward(float *logp, float *entropy, float *lse, const float *hidden, const float *w,
                          const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature) {
    head_forward(logp, entropy, lse, NULL, NULL, hidden, w, targets, T, H, V, temperature, 0.0f);
}

void logprob_head_forward_cap(float *logp, float *entropy, float *lse, const float *hidden, const float *w,
                              const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature, float softcap) {
    CHECK(softcap >= 0 && isfinite(softcap), "logprob_head_forward_cap: softcap=%g", (double)softcap);
    head_forward(logp, entropy, lse, NULL, NULL, hidden, w, targets, T, H, V, temperature, softcap);
}

static void head_backward(float *dhidden, float *dw, const float *dlogp, const float *dentropy, const float *entropy,
                          const float *hidden, const float *w, const int32_t *targets, const float *lse,
                          int64_t T, int64_t H, int64_t V, float temperature, float softcap) {
    head_check(targets, T, H, V, temperature, "logprob_head_backward");
    if (T == 0 || (!dhidden && !dw)) return;
    CHECK(lse != NULL, "logprob_head_backward needs the lse saved by the forward");
    int need_ent = 0;
    if (dentropy)
        for (int64_t t = 0; t < T && !need_ent; t++) need_ent = dentropy[t] != 0.0f;
    // E[z] per row for the entropy gradient: lse - entropy. Without the forward's entropy this costs
    // one more pass (a forward sgemm) over the vocabulary.
    float *ez = NULL;
    if (need_ent) {
        ez = rlc_alloc((size_t)T * sizeof(float));
        if (entropy) {
            for (int64_t t = 0; t < T; t++) ez[t] = lse[t] - entropy[t];
        } else {
            float *ent = rlc_alloc((size_t)T * sizeof(float)), *ls = rlc_alloc((size_t)T * sizeof(float));
            head_forward(NULL, ent, ls, NULL, NULL, hidden, w, NULL, T, H, V, temperature, softcap);
            for (int64_t t = 0; t < T; t++) ez[t] = ls[t] - ent[t];
            rlc_free(ls);
            rlc_free(ent);
        }
    }
    const int64_t TC = min64(HEAD_TC_BWD, T), VC = head_vchunk(V), nvc = (V + VC - 1) / VC;
    const float it = 1.0f / temperature;
    const int nth = head_threads();
    float *scratch = rlc_alloc((size_t)nth * (size_t)TC * (size_t)VC * sizeof(float));          // per thread (TC, VC)
    float *dhp = dhidden ? rlc_alloc((size_t)nth * (size_t)TC * (size_t)H * sizeof(float)) : NULL;  // per thread (TC, H)
    for (int64_t t0 = 0; t0 < T; t0 += TC) {
        const int64_t tc = min64(TC, T - t0);
        const float *hc = hidden + t0 * H;  // (tc, H)
#pragma omp parallel num_threads(nth)
        {
            const int tid = omp_get_thread_num();
            float *L = scratch + (size_t)tid * (size_t)TC * (size_t)VC;
            float *dh = dhp ? dhp + (size_t)tid * (size_t)TC * (size_t)H : NULL;
            if (dh) memset(dh, 0, (size_t)tc * (size_t)H * sizeof(float));
#pragma omp for schedule(static)
            for (int64_t k = 0; k < nvc; k++) {
                const int64_t v0 = k * VC, vc = min64(VC, V - v0);
                const float *wc = w + v0 * H;  // (vc, H)
                backend_sgemm(0, 1, tc, vc, H, 1.0f, hc, H, wc, H, 0.0f, L, vc);  // L (tc, vc) raw logits
                for (int64_t r = 0; r < tc; r++) {
                    const int64_t t = t0 + r;
                    float *g = L + r * vc;
                    const int32_t tg = targets ? targets[t] : -1;
                    const float gl = dlogp && tg >= 0 ? dlogp[t] : 0.0f;
                    const float ge = need_ent ? dentropy[t] : 0.0f, ls = lse[t], e = ez ? ez[t] : 0.0f;
                    // dz_j = gl (1[j=tg] - p_j) - ge p_j (z_j - E z);  dlogit_j = dz_j / temperature.
                    // Scaling by it = 1/temperature (exact for temperature 1; within 1 ulp of the
                    // forward's division otherwise, far below the gradient's own rounding).
                    if (softcap > 0) {
                        // z_j = cap tanh(l_j / cap) / temperature: dlogit_j = dz_j / temperature * (1 - tanh^2)
                        const float ic = 1.0f / softcap;
                        float dtg = 0.0f;
                        if (tg >= v0 && tg < v0 + vc) {
                            const float tt = tanhf(g[tg - v0] * ic);
                            dtg = gl * it * (1.0f - tt * tt);
                        }
                        for (int64_t j = 0; j < vc; j++) {
                            const float tt = tanhf(g[j] * ic), z = softcap * tt * it, p = k_expf_le88(z - ls);
                            g[j] = (-gl * p - ge * (p * (z - e))) * it * (1.0f - tt * tt);
                        }
                        if (tg >= v0 && tg < v0 + vc) g[tg - v0] += dtg;
                        continue;
                    }
                    if (ge != 0.0f) {
#pragma omp simd
                        for (int64_t j = 0; j < vc; j++) {
                            float z = g[j] * it, p = k_expf_le88(z - ls);
                            g[j] = (-gl * p - ge * (p * (z - e))) * it;
                        }
                    } else {
                        const float glit = -gl * it;
#pragma omp simd
                        for (int64_t j = 0; j < vc; j++) g[j] = glit * k_expf_le88(g[j] * it - ls);
                    }
                    if (tg >= v0 && tg < v0 + vc) g[tg - v0] += gl * it;
                }
                if (dh) backend_sgemm(0, 0, tc, H, vc, 1.0f, L, vc, wc, H, 1.0f, dh, H);                  // (tc, H) += G @ wc
                if (dw) backend_sgemm(1, 0, vc, H, tc, 1.0f, L, vc, hc, H, 1.0f, dw + v0 * H, H);        // (vc, H) += G^T @ hc
            }
        }
        if (dhidden) {
            float *dst = dhidden + t0 * H;
            const int64_t n = tc * H;
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < n; i++) {
                float s = 0.0f;
                for (int th = 0; th < nth; th++) s += dhp[(size_t)th * (size_t)TC * (size_t)H + (size_t)i];
                dst[i] += s;
            }
        }
    }
    rlc_free(dhp);
    rlc_free(scratch);
    rlc_free(ez);
}

void logprob_head_backward(float *dhidden, float *dw, const float *dlogp, const float *dentropy,
                           const float *hidden, const float *w, const int32_t *targets, const float *lse,
                           int64_t T, int64_t H, int64_t V, float temperature) {
    head_backward(dhidden, dw, dlogp, dentropy, NULL, hidden, w, targets, lse, T, H, V, temperature, 0.0f);
}

void logprob_head_backward_ent(float *dhidden, float *dw, const float *dlogp, const float *dentropy, const float *entropy,
                               const float *hidden, const float *w, const int32_t *targets, const float *lse,
                               int64_t T, int64_t H, int64_t V, float temperature) {
    head_backward(dhidden, dw, dlogp, dentropy, entropy, hidden, w, targets, lse, T, H, V, temperature, 0.0f);
}

void logprob_head_backward_cap(float *dhidden, float *dw, const float *dlogp, const float *dentropy, const float *entropy,
                               const float *hidden, const float *w, const int32_t *targets, const float *lse,
                               int64_t T, int64_t H, int64_t V, float temperature, float softcap) {
    CHECK(softcap >= 0 && isfinite(softcap), "logprob_head_backward_cap: softcap=%g", (double)softcap);
    head_backward(dhidden, dw, dlogp, dentropy, entropy, hidden, w, targets, lse, T, H, V, temperature, softcap);
}

// ---- frozen head: per-token gradients saved by the forward ------------------------------------------------

void logprob_head_forward_frozen(float *logp, float *entropy, float *lse, float *g, float *ge, const float *hidden,
                                 const float *w, const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature,
                                 float softcap) {
    CHECK(softcap >= 0 && isfinite(softcap), "logprob_head_forward_frozen: softcap=%g", (double)softcap);
    CHECK(g != NULL, "logprob_head_forward_frozen needs g (T, H)");
    head_forward(logp, entropy, lse, g, ge, hidden, w, targets, T, H, V, temperature, softcap);
}

void logprob_head_backward_frozen(float *dhidden, const float *dlogp, const float *dentropy, const float *g, const float *ge,
                                  int64_t T, int64_t H) {
    CHECK(T >= 0 && H > 0, "logprob_head_backward_frozen: T=%lld H=%lld", (long long)T, (long long)H);
    CHECK(!dentropy || ge, "logprob_head_backward_frozen: dentropy needs ge from the forward");
    if (!dlogp && !dentropy) return;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++) {
        float *d = dhidden + t * H;
        const float *gt = g + t * H;
        const float a = dlogp ? dlogp[t] : 0.0f;
        if (dentropy) {
            const float b = dentropy[t], *et = ge + t * H;
#pragma omp simd
            for (int64_t h = 0; h < H; h++) d[h] += a * gt[h] + b * et[h];
        } else {
#pragma omp simd
            for (int64_t h = 0; h < H; h++) d[h] += a * gt[h];
        }
    }
}

// ---- references: full logits in double ----------------------------------------------------------------

// z (T, V) in double = (hidden @ w^T) / temperature, soft-capped first when softcap > 0
static double *ref_logits(const float *hidden, const float *w, int64_t T, int64_t H, int64_t V, float temperature,
                          float softcap) {
    double *z = rlc_malloc((size_t)T * (size_t)V * sizeof(double));
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++)
        for (int64_t v = 0; v < V; v++) {
            double acc = 0;
            for (int64_t h = 0; h < H; h++) acc += (double)hidden[t * H + h] * (double)w[v * H + h];
            if (softcap > 0) acc = (double)softcap * tanh(acc / (double)softcap);
            z[t * V + v] = acc / (double)temperature;
        }
    return z;
}

// Per row: lse and E[z] of the softmax of z (V).
static void ref_row(const double *z, int64_t V, double *lse, double *ez) {
    double m = -INFINITY;
    for (int64_t v = 0; v < V; v++) m = z[v] > m ? z[v] : m;
    double s = 0, a = 0;
    for (int64_t v = 0; v < V; v++) { double e = exp(z[v] - m); s += e; a += e * z[v]; }
    *lse = m + log(s);
    *ez = a / s;
}

void logprob_head_forward_ref(float *logp, float *entropy, float *lse, const float *hidden, const float *w,
                              const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature) {
    logprob_head_forward_cap_ref(logp, entropy, lse, hidden, w, targets, T, H, V, temperature, 0.0f);
}

void logprob_head_forward_cap_ref(float *logp, float *entropy, float *lse, const float *hidden, const float *w,
                                  const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature, float softcap) {
    head_check(targets, T, H, V, temperature, "logprob_head_forward_ref");
    double *z = ref_logits(hidden, w, T, H, V, temperature, softcap);
    for (int64_t t = 0; t < T; t++) {
        double ls, ez;
        ref_row(z + t * V, V, &ls, &ez);
        if (lse) lse[t] = (float)ls;
        if (entropy) entropy[t] = (float)(ls - ez);
        if (logp) logp[t] = targets && targets[t] >= 0 ? (float)(z[t * V + targets[t]] - ls) : 0.0f;
    }
    free(z);
}

void logprob_head_backward_ref(float *dhidden, float *dw, const float *dlogp, const float *dentropy,
                               const float *hidden, const float *w, const int32_t *targets, const float *lse,
                               int64_t T, int64_t H, int64_t V, float temperature) {
    logprob_head_backward_cap_ref(dhidden, dw, dlogp, dentropy, hidden, w, targets, lse, T, H, V, temperature, 0.0f);
}

void logprob_head_backward_cap_ref(float *dhidden, float *dw, const float *dlogp, const float *dentropy,
                                   const float *hidden, const float *w, const int32_t *targets, const float *lse,
                                   int64_t T, int64_t H, int64_t V, float temperature, float softcap) {
    head_check(targets, T, H, V, temperature, "logprob_head_backward_ref");
    double *z = ref_logits(hidden, w, T, H, V, temperature, softcap);  // becomes dloss/dlogits in place
    for (int64_t t = 0; t < T; t++) {
        double *zr = z + t * V, ls, ez;
        ref_row(zr, V, &ls, &ez);
        (void)lse;  // the reference recomputes lse in double
        const int32_t tg = targets ? targets[t] : -1;
        const double gl = dlogp && tg >= 0 ? dlogp[t] : 0.0, ge = dentropy ? dentropy[t] : 0.0;
        for (int64_t v = 0; v < V; v++) {
            double p = exp(zr[v] - ls);
            double chain = 1.0;   // d(capped)/d(logit) = 1 - tanh^2, tanh = z * temperature / cap
            if (softcap > 0) { double th = zr[v] * (double)temperature / (double)softcap; chain = 1.0 - th * th; }
            zr[v] = (gl * ((v == tg) - p) - ge * p * (zr[v] - ez)) / (double)temperature * chain;
        }
    }
#pragma omp parallel
    {
        double *acc = rlc_malloc((size_t)H * sizeof(double));  // (H) one output row in double
        if (dhidden) {
#pragma omp for schedule(static)
            for (int64_t t = 0; t < T; t++) {
                for (int64_t h = 0; h < H; h++) acc[h] = 0;
                for (int64_t v = 0; v < V; v++) {
                    double d = z[t * V + v];
                    for (int64_t h = 0; h < H; h++) acc[h] += d * (double)w[v * H + h];
                }
                for (int64_t h = 0; h < H; h++) dhidden[t * H + h] += (float)acc[h];
            }
        }
        if (dw) {
#pragma omp for schedule(static)
            for (int64_t v = 0; v < V; v++) {
                for (int64_t h = 0; h < H; h++) acc[h] = 0;
                for (int64_t t = 0; t < T; t++) {
                    double d = z[t * V + v];
                    for (int64_t h = 0; h < H; h++) acc[h] += d * (double)hidden[t * H + h];
                }
                for (int64_t h = 0; h < H; h++) dw[v * H + h] += (float)acc[h];
            }
        }
        free(acc);
    }
    free(z);
}

void logprob_head_forward_frozen_ref(float *logp, float *entropy, float *lse, float *g, float *ge, const float *hidden,
                                     const float *w, const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature,
                                     float softcap) {
    CHECK(g != NULL, "logprob_head_forward_frozen_ref needs g (T, H)");
    logprob_head_forward_cap_ref(logp, entropy, lse, hidden, w, targets, T, H, V, temperature, softcap);
    double *z = ref_logits(hidden, w, T, H, V, temperature, softcap);
#pragma omp parallel
    {
        double *a1 = rlc_malloc((size_t)H * sizeof(double)), *a2 = rlc_malloc((size_t)H * sizeof(double));  // (H) each
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            const double *zr = z + t * V;
            double ls, ez;
            ref_row(zr, V, &ls, &ez);
            for (int64_t h = 0; h < H; h++) a1[h] = a2[h] = 0;
            for (int64_t v = 0; v < V; v++) {
                // p_v c_v and p_v (z_v - E z) c_v, c_v = d capped / d logit = 1 - tanh^2
                double c = 1.0;
                if (softcap > 0) { double th = zr[v] * (double)temperature / (double)softcap; c = 1.0 - th * th; }
                const double pc = exp(zr[v] - ls) * c, qc = pc * (zr[v] - ez);
                for (int64_t h = 0; h < H; h++) { a1[h] += pc * (double)w[v * H + h]; a2[h] += qc * (double)w[v * H + h]; }
            }
            const int32_t tg = targets ? targets[t] : -1;
            double cy = 1.0;
            if (tg >= 0 && softcap > 0) { double th = zr[tg] * (double)temperature / (double)softcap; cy = 1.0 - th * th; }
            for (int64_t h = 0; h < H; h++) {
                g[t * H + h] = tg >= 0 ? (float)((cy * (double)w[(int64_t)tg * H + h] - a1[h]) / (double)temperature) : 0.0f;
                if (ge) ge[t * H + h] = (float)(-a2[h] / (double)temperature);
            }
        }
        free(a1);
        free(a2);
    }
    free(z);
}

void logprob_head_backward_frozen_ref(float *dhidden, const float *dlogp, const float *dentropy, const float *g, const float *ge,
                                      int64_t T, int64_t H) {
    CHECK(!dentropy || ge, "logprob_head_backward_frozen_ref: dentropy needs ge from the forward");
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            double d = 0;
            if (dlogp) d += (double)dlogp[t] * (double)g[t * H + h];
            if (dentropy) d += (double)dentropy[t] * (double)ge[t * H + h];
            dhidden[t * H + h] += (float)d;
        }
}

// logits (T, V) = hidden (T, H) @ w (V, H)^T
void logits_forward(float *logits, const float *hidden, const float *w, int64_t T, int64_t H, int64_t V) {
    backend_sgemm(0, 1, T, V, H, 1.0f, hidden, H, w, H, 0.0f, logits, V);
}

void logits_softcap(float *logits, int64_t n, float softcap) {
    if (softcap > 0) row_softcap(logits, n, softcap);
}
