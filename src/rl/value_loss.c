// value_loss.c: the clipped value loss and its gradient (see value_loss.h).
#include "rl/value_loss.h"

#include "core/common.h"

void rl_value_loss(rl_value_loss_out *out, float *dv, const float *vpred, const float *values, const float *returns,
                   const float *mask, int64_t B, int64_t T, double cliprange, rl_agg_mode mode, const rl_batch_info *gbi) {
    const int64_t n = B * T;
    float *L = rlc_malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    float *gt = rlc_malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    float *w = rlc_malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    const float c = (float)cliprange;   // verl: values -/+ cliprange_value, fp32 tensor ops
    for (int64_t i = 0; i < n; i++) {
        const float v = vpred[i], R = returns[i], lo = values[i] - c, hi = values[i] + c;
        const float mn = v < hi ? v : hi;   // torch.min(v, hi)
        const float vc = mn > lo ? mn : lo; // torch.max(., lo)
        const float d1 = v - R, d2 = vc - R;
        const float l1 = d1 * d1, l2 = d2 * d2;
        L[i] = l1 > l2 ? l1 : l2;
        gt[i] = l2 > l1 ? 1.0f : 0.0f;
        // dL/dv: torch.max routes to the larger, half each on a tie; d vclip / dv through min then max
        const float dmin = v < hi ? 1.0f : (v == hi ? 0.5f : 0.0f);
        const float dmax = mn > lo ? 1.0f : (mn == lo ? 0.5f : 0.0f);
        const float g1 = 2.0f * d1, g2 = 2.0f * d2 * dmin * dmax;
        dv[i] = l1 > l2 ? g1 : (l2 > l1 ? g2 : 0.5f * g1 + 0.5f * g2);
    }
    rl_agg_weights(w, mask, B, T, mode, gbi);
    for (int64_t i = 0; i < n; i++) dv[i] = mask[i] != 0 ? 0.5f * w[i] * dv[i] : 0.0f;
    out->vf_loss = 0.5 * rl_agg_loss(L, mask, B, T, mode, gbi);
    out->vf_clipfrac = rl_masked_mean(gt, mask, n);
    out->vpred_mean = rl_masked_mean(vpred, mask, n);
    free(L); free(gt); free(w);
}
