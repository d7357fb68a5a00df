// rl_step.h: the driver-side part of one GRPO/PPO step between reward and update, in verl's order
// (ray_trainer: assemble_rm_scores -> apply_kl_penalty (if use_kl_in_reward) -> compute_advantage).
#pragma once
#include <stdint.h>

#include "rl/advantage.h"
#include "rl/kl.h"

typedef struct {
    rl_adv_cfg adv;
    int use_kl_in_reward;      // algorithm.use_kl_in_reward
    rl_kl_type kl_penalty;     // algorithm.kl_penalty
} rl_step_cfg;

typedef struct {
    double reward_kl_penalty;        // actor/reward_kl_penalty (only with use_kl_in_reward)
    double reward_kl_penalty_coeff;  // actor/reward_kl_penalty_coeff
} rl_step_metrics;

// score (B): the reward of each sequence; resp_len (B); group (B): prompt ids; mask (B, T) response mask;
// old_lp / ref_lp (B, T): needed only with use_kl_in_reward (else may be NULL); ctrl: the KL controller (updated).
// Outputs (B, T): token_scores, token_rewards (= scores - beta*kl), adv, returns.
void rl_step_advantages(float *token_scores, float *token_rewards, float *adv, float *returns, rl_step_metrics *met,
                        const float *score, const int64_t *resp_len, const int64_t *group, const float *mask,
                        const float *old_lp, const float *ref_lp, int64_t B, int64_t T, const rl_step_cfg *cfg,
                        rl_kl_ctrl *ctrl);
// PPO with a critic (algorithm.adv_estimator=gae): the same token scores and rewards, then GAE with whitening over
// the critic's values (B, T) (rl/gae.h); cfg->adv is not used.
void rl_step_advantages_gae(float *token_scores, float *token_rewards, float *adv, float *returns, rl_step_metrics *met,
                            const float *score, const int64_t *resp_len, const float *mask, const float *old_lp,
                            const float *ref_lp, const float *values, int64_t B, int64_t T, const rl_step_cfg *cfg,
                            double gamma, double lam, rl_kl_ctrl *ctrl);
