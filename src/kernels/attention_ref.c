// attention_ref.c: the dense references of the packed attention (attention.c): double accumulation, one
// materialised (len x len) probability matrix per sequence and head, causal and sliding-window masks, any
// softmax scale. Tests only.
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "kernels/attention_check.h"
#include "kernels/kernels.h"

// ---- dense references ---------------------------------------------------------------------------------------
// Softmax probabilities P (len x len, row-major, zero above the diagonal) of query head h of the sequence
// starting at s0, in double. lse_out (len) may be NULL.
// A sliding window (window > 0) keeps keys j with i - window < j <= i (HF masking_utils); the rest of the row is 0.
static void ref_probs(double *P, double *lse_out, const float *q, const float *k, int64_t s0, int64_t len, int h,
                      int kvh, int nh, int nkv, int D, double scale, int window) {
    const int64_t ldq = (int64_t)nh * D, ldk = (int64_t)nkv * D;
    for (int64_t i = 0; i < len; i++) {
        const float *qi = q + (s0 + i) * ldq + (int64_t)h * D;
        const int64_t j0 = window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
        for (int64_t j = 0; j < j0; j++) P[i * len + j] = 0;
        double m = -INFINITY;
        for (int64_t j = j0; j <= i; j++) {
            const float *kj = k + (s0 + j) * ldk + (int64_t)kvh * D;
            double acc = 0;
            for (int d = 0; d < D; d++) acc += (double)qi[d] * kj[d];
            P[i * len + j] = acc * scale;
            if (P[i * len + j] > m) m = P[i * len + j];
        }
        double sum = 0;
        for (int64_t j = j0; j <= i; j++) { P[i * len + j] = exp(P[i * len + j] - m); sum += P[i * len + j]; }
        for (int64_t j = j0; j <= i; j++) P[i * len + j] /= sum;
        for (int64_t j = i + 1; j < len; j++) P[i * len + j] = 0;
        if (lse_out) lse_out[i] = m + log(sum);
    }
}

static int64_t max_seqlen(const int32_t *cu, int n_seqs) {
    int64_t m = 0;
    for (int s = 0; s < n_seqs; s++) if (cu[s + 1] - cu[s] > m) m = cu[s + 1] - cu[s];
    return m;
}

void attention_forward_ref(float *out, float *lse, const float *q, const float *k, const float *v,
                           const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int D) {
    attention_forward_sw_ref(out, lse, q, k, v, cu_seqlens, n_seqs, nh, nkv, D, 1.0f / sqrtf((float)D), 0);
}

void attention_forward_sw_ref(float *out, float *lse, const float *q, const float *k, const float *v,
                              const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int D, float scale, int window) {
    att_check(cu_seqlens, n_seqs, nh, nkv, D);
    const int g = nh / nkv;
    const int64_t ldq = (int64_t)nh * D, ldk = (int64_t)nkv * D, L = max_seqlen(cu_seqlens, n_seqs);
    if (L == 0) return;
#pragma omp parallel
    {
        double *P = rlc_malloc((size_t)(L * L) * sizeof(double));   // (len, len)
        double *ls = rlc_malloc((size_t)L * sizeof(double));        // (len)
        double *acc = rlc_malloc((size_t)D * sizeof(double));       // (D)
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < (int64_t)n_seqs * nh; task++) {
            const int s = (int)(task / nh), h = (int)(task % nh), kvh = h / g;
            const int64_t s0 = cu_seqlens[s], len = cu_seqlens[s + 1] - s0;
            ref_probs(P, ls, q, k, s0, len, h, kvh, nh, nkv, D, scale, window);
            for (int64_t i = 0; i < len; i++) {
                for (int d = 0; d < D; d++) acc[d] = 0;
                for (int64_t j = 0; j <= i; j++) {
                    const float *vj = v + (s0 + j) * ldk + (int64_t)kvh * D;
                    for (int d = 0; d < D; d++) acc[d] += P[i * len + j] * vj[d];
                }
                for (int d = 0; d < D; d++) out[(s0 + i) * ldq + (int64_t)h * D + d] = (float)acc[d];
                lse[(s0 + i) * nh + h] = (float)ls[i];
            }
        }
        free(P); free(ls); free(acc);
    }
}

// Recomputes the softmax in double from q and k (out and lse are not used: the oracle depends on the
// inputs only). Tasks are (sequence, kv head): each owns its dk/dv rows and the dq rows of its heads.
void attention_backward_ref(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                            const float *q, const float *k, const float *v,
                            const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int D) {
    attention_backward_sw_ref(dq, dk, dv, dout, out, lse, q, k, v, cu_seqlens, n_seqs, nh, nkv, D, 1.0f / sqrtf((float)D), 0);
}

void attention_backward_sw_ref(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                               const float *q, const float *k, const float *v, const int32_t *cu_seqlens, int n_seqs,
                               int nh, int nkv, int D, float scale_f, int window) {
    att_check(cu_seqlens, n_seqs, nh, nkv, D);
    const int g = nh / nkv;
    const int64_t ldq = (int64_t)nh * D, ldk = (int64_t)nkv * D, L = max_seqlen(cu_seqlens, n_seqs);
    const double scale = scale_f;
    if (L == 0) return;
#pragma omp parallel
    {
        double *P = rlc_malloc((size_t)(L * L) * sizeof(double));       // (len, len) P, then dS
        double *dK = rlc_malloc((size_t)(L * D) * sizeof(double));      // (len, D)
        double *dV = rlc_malloc((size_t)(L * D) * sizeof(double));      // (len, D)
        double *dQ = rlc_malloc((size_t)D * sizeof(double));            // (D)
        double *dP = rlc_malloc((size_t)L * sizeof(double));            // (len) one row of dP
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < (int64_t)n_seqs * nkv; task++) {
            const int s = (int)(task / nkv), kvh = (int)(task % nkv);
            const int64_t s0 = cu_seqlens[s], len = cu_seqlens[s + 1] - s0;
            memset(dK, 0, (size_t)(len * D) * sizeof(double));
            memset(dV, 0, (size_t)(len * D) * sizeof(double));
            for (int h = kvh * g; h < (kvh + 1) * g; h++) {
                ref_probs(P, NULL, q, k, s0, len, h, kvh, nh, nkv, D, scale_f, window);
                for (int64_t i = 0; i < len; i++) {
                    const float *doi = dout + (s0 + i) * ldq + (int64_t)h * D;
                    double di = 0;
                    for (int64_t j = 0; j <= i; j++) {
                        const float *vj = v + (s0 + j) * ldk + (int64_t)kvh * D;
                        double a = 0;
                        for (int d = 0; d < D; d++) {
                            a += (double)doi[d] * vj[d];
                            dV[j * D + d] += P[i * len + j] * doi[d];
                        }
                        dP[j] = a;
                        di += P[i * len + j] * a;
                    }
                    for (int d = 0; d < D; d++) dQ[d] = 0;
                    const float *qi = q + (s0 + i) * ldq + (int64_t)h * D;
                    for (int64_t j = 0; j <= i; j++) {
                        const double ds = P[i * len + j] * (dP[j] - di) * scale;
                        const float *kj = k + (s0 + j) * ldk + (int64_t)kvh * D;
                        for (int d = 0; d < D; d++) {
                            dQ[d] += ds * kj[d];
                            dK[j * D + d] += ds * qi[d];
                        }
                    }
                    for (int d = 0; d < D; d++) dq[(s0 + i) * ldq + (int64_t)h * D + d] += (float)dQ[d];
                }
            }
            for (int64_t j = 0; j < len; j++)
                for (int d = 0; d < D; d++) {
                    dk[(s0 + j) * ldk + (int64_t)kvh * D + d] += (float)dK[j * D + d];
                    dv[(s0 + j) * ldk + (int64_t)kvh * D + d] += (float)dV[j * D + d];
                }
        }
        free(P); free(dK); free(dV); free(dQ); free(dP);
    }
}
