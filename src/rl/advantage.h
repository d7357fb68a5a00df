// advantage.h: verl's outcome advantage estimators (core_algos.py, spec verl-grpo.md §1).
// Rewards are token-level (B, T) (the score sits at the last valid response token); groups are the prompt
// uids as integers (the n rollouts of one prompt share an id; any int64 values, any order).
#pragma once
#include <stdint.h>

typedef enum {
    RL_ADV_GRPO = 0,                    // (s - mean_g) / (std_g + 1e-6), or s - mean_g (Dr.GRPO)
    RL_ADV_RLOO,                        // s*n/(n-1) - mean_g*n/(n-1); singleton: s
    RL_ADV_REINFORCE_PLUS_PLUS,         // discounted returns (reset after mask==0), masked_whiten over the batch
    RL_ADV_REINFORCE_PLUS_PLUS_BASELINE,// (s - mean_g) broadcast, masked_whiten over the batch
    RL_ADV_GRPO_VECTORIZED,             // grpo via group sums (always std-normalised when dispatched by name)
    RL_ADV_RLOO_VECTORIZED,             // (c*s - sum_g)/max(c-1,1) * [c>1]: singletons get 0
    RL_ADV_OPO,                         // s - sum_g(L*s)/sum_g(L), L = response length; singleton baseline 0
    RL_ADV_GPG,                         // B/max(1, #nonzero s) * (s - mean_g)
} rl_adv_estimator;

// Returns 0, or -1 for a name not implemented here (verl's gae, remax, grpo_passk, gdpo, optimal_token_baseline
// ... are not).
int rl_adv_estimator_parse(const char *name, rl_adv_estimator *out);
const char *rl_adv_estimator_name(rl_adv_estimator e);

typedef struct {
    rl_adv_estimator estimator;
    int norm_adv_by_std_in_grpo;   // grpo only (algorithm.norm_adv_by_std_in_grpo)
    double gamma;                  // reinforce_plus_plus only (algorithm.gamma)
    double epsilon;                // 1e-6 (verl's default)
} rl_adv_cfg;

// adv (B, T) and returns (B, T) (returns may be NULL; for the outcome estimators verl returns adv itself,
// except reinforce_plus_plus which returns the discounted returns). token_rewards/mask (B, T), group (B).
// masked_whiten needs at least 2 masked tokens: dies (one line) otherwise, like verl's ValueError.
void rl_compute_advantage(float *adv, float *returns, const float *token_rewards, const float *mask,
                          const int64_t *group, int64_t B, int64_t T, const rl_adv_cfg *cfg);

// verl_F.masked_whiten(x, m) in place over n elements (shift_mean=True): (x - mu) * rsqrt(var_unbiased + 1e-8).
void rl_masked_whiten(float *x, const float *mask, int64_t n);
