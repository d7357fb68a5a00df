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

// All outputs optional. logp (T), entropy (T), lse (T).
static void head_forward(float *logp, float *entropy, float *lse, const float *hidden, const float *w,
                         const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature, float softcap) {
    head_check(targets, T, H, V, temperature, "logprob_head_forward");
    if (T == 0) return;
    const int64_t TC = min64(HEAD_TC, T), VC = head_vchunk(V), nvc = (V + VC - 1) / VC;
    const int nth = head_threads();
    const int want_a = entropy != NULL;
    float *scratch = rlc_alloc((size_t)nth * (size_t)TC * (size_t)VC * sizeof(float));  // per thread (TC, VC)
    float *st = rlc_alloc((size_t)TC * (size_t)nvc * 3 * sizeof(float));              // (TC, nvc, {m, s, a})
    float *zt = rlc_alloc((size_t)TC * sizeof(float));                                 // (TC) target logit
    for (int64_t t0 = 0; t0 < T; t0 += TC) {
        const int64_t tc = min64(TC, T - t0);
        const float *hc = hidden + t0 * H;  // (tc, H)
#pragma omp parallel num_threads(nth)
        {
            float *L = scratch + (size_t)omp_get_thread_num() * (size_t)TC * (size_t)VC;
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
                }
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
        }
    }
    rlc_free(zt);
    rlc_free(st);
    rlc_free(scratch);
}

void logprob_head_forward(float *logp, float *entropy, float *lse, const float *hidden, const float *w,
                          const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature) {
    head_forward(logp, entropy, lse, hidden, w, targets, T, H, V, temperature, 0.0f);
}

void logprob_head_forward_cap(float *logp, float *entropy, float *lse, const float *hidden, const float *w,
                              const int32_t *targets, int64_t T, int64_t H, int64_t V, float temperature, float softcap) {
    CHECK(softcap >= 0 && isfinite(softcap), "logprob_head_forward_cap: softcap=%g", (double)softcap);
    head_forward(logp, entropy, lse, hidden, w, targets, T, H, V, temperature, softcap);
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
            head_forward(NULL, ent, ls, hidden, w, NULL, T, H, V, temperature, softcap);
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

// logits (T, V) = hidden (T, H) @ w (V, H)^T
void logits_forward(float *logits, const float *hidden, const float *w, int64_t T, int64_t H, int64_t V) {
    backend_sgemm(0, 1, T, V, H, 1.0f, hidden, H, w, H, 0.0f, logits, V);
}

void logits_softcap(float *logits, int64_t n, float softcap) {
    if (softcap > 0) row_softcap(logits, n, softcap);
}
