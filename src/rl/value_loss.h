// value_loss.h: verl's clipped value loss (compute_value_loss, core_algos.py; spec verl-ppo.md §1.5) and its
// gradient with respect to the critic's predictions:
//   vclip = clamp(v, V_old - c, V_old + c);  l1 = (v - R)^2;  l2 = (vclip - R)^2;  L = max(l1, l2)
//   vf_loss = 0.5 * agg_loss(L, mask, loss_agg_mode, global batch info)
//   vf_clipfrac = masked_mean(l2 > l1, mask);  vpred_mean = masked_mean(v, mask)
// The gradient follows torch autograd: clamp (verl's clip_by_value = max(min(v, hi), lo)) passes 1 inside, 1/2 at
// a bound, 0 outside; the binary max gives 1/2 to each side on a tie (v = V_old: the first mini-batch).
#pragma once
#include <stdint.h>

#include "rl/agg.h"

typedef struct {
    double vf_loss;       // this micro-batch's share of the mini-batch loss (global normalisation)
    double vf_clipfrac;
    double vpred_mean;
} rl_value_loss_out;

// vpred, values (V_old), returns, mask (B, T); dv (B, T) receives d vf_loss / d vpred (0 where mask == 0).
// cliprange = critic.cliprange_value. gbi as for the policy loss (agg.h); NULL: the micro-batch alone, D = 1.
void rl_value_loss(rl_value_loss_out *out, float *dv, const float *vpred, const float *values, const float *returns,
                   const float *mask, int64_t B, int64_t T, double cliprange, rl_agg_mode mode, const rl_batch_info *gbi);
