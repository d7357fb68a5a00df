// gae.c: GAE + whitening (see gae.h).
#include "rl/gae.h"

#include "rl/advantage.h"

void rl_gae(float *adv, float *returns, const float *rewards, const float *values, const float *mask, int64_t B, int64_t T,
            double gamma, double lam) {
    // verl multiplies fp32 tensors by Python floats: gamma, and gamma * lam formed in double first.
    const float g = (float)gamma, gl = (float)(gamma * lam);
    for (int64_t b = 0; b < B; b++) {
        float nextvalue = 0, lastgae = 0;
        for (int64_t t = T - 1; t >= 0; t--) {
            const int64_t i = b * T + t;
            float delta = rewards[i] + g * nextvalue - values[i];
            float gt = delta + gl * lastgae;
            if (mask[i] != 0) { nextvalue = values[i]; lastgae = gt; }
            adv[i] = lastgae;
        }
    }
    for (int64_t i = 0; i < B * T; i++) returns[i] = adv[i] + values[i];
    rl_masked_whiten(adv, mask, B * T);
}
