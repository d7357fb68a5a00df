// gae.h: verl's compute_gae_advantage_return (core_algos.py; spec verl-ppo.md §1.4): generalised advantage
// estimation over token-level rewards and the critic's values, then batch-global advantage whitening.
#pragma once
#include <stdint.h>

// rewards, values, mask (B, T) -> adv (B, T) = masked_whiten(gae, mask) over the whole batch, returns (B, T) =
// gae + values (un-whitened gae). Backwards per row, in float32 like verl:
//   delta = r[t] + gamma*nextvalue - V[t];  g = delta + gamma*lam*lastgae;
//   where mask[t]: nextvalue = V[t], lastgae = g  (mask-0 positions pass both through);  gae[t] = lastgae.
// Whitening needs at least 2 masked tokens: dies (one line) otherwise, like verl's ValueError.
void rl_gae(float *adv, float *returns, const float *rewards, const float *values, const float *mask, int64_t B, int64_t T,
            double gamma, double lam);
