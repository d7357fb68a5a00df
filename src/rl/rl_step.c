// rl_step.c: rewards -> (in-reward KL) -> advantages (see rl_step.h).
#include "rl/rl_step.h"

#include <math.h>
#include <string.h>

#include "core/common.h"
#include "rl/gae.h"

// assemble_rm_scores and apply_kl_penalty: token_scores and token_rewards (B, T).
static void step_rewards(float *token_scores, float *token_rewards, rl_step_metrics *met, const float *score,
                         const int64_t *resp_len, const float *mask, const float *old_lp, const float *ref_lp, int64_t B,
                         int64_t T, const rl_step_cfg *cfg, rl_kl_ctrl *ctrl) {
    // assemble_rm_scores: the score at the last valid response token (Python index -1 for an empty response)
    memset(token_scores, 0, (size_t)(B * T) * sizeof(float));
    for (int64_t b = 0; b < B; b++) {
        CHECK(resp_len[b] >= 0 && resp_len[b] <= T, "response length %lld, width %lld", (long long)resp_len[b], (long long)T);
        if (T > 0) token_scores[b * T + (resp_len[b] > 0 ? resp_len[b] - 1 : T - 1)] = score[b];
    }
    if (met) { met->reward_kl_penalty = NAN; met->reward_kl_penalty_coeff = NAN; }
    if (cfg->use_kl_in_reward) {
        CHECK(old_lp && ref_lp && ctrl, "use_kl_in_reward needs old/ref log-probs and a KL controller");
        double beta;
        double cur = rl_apply_kl_penalty(token_rewards, token_scores, old_lp, ref_lp, mask, B, T, cfg->kl_penalty, ctrl, &beta);
        if (met) { met->reward_kl_penalty = cur; met->reward_kl_penalty_coeff = beta; }
    } else memcpy(token_rewards, token_scores, (size_t)(B * T) * sizeof(float));
}

void rl_step_advantages(float *token_scores, float *token_rewards, float *adv, float *returns, rl_step_metrics *met,
                        const float *score, const int64_t *resp_len, const int64_t *group, const float *mask,
                        const float *old_lp, const float *ref_lp, int64_t B, int64_t T, const rl_step_cfg *cfg,
                        rl_kl_ctrl *ctrl) {
    step_rewards(token_scores, token_rewards, met, score, resp_len, mask, old_lp, ref_lp, B, T, cfg, ctrl);
    rl_compute_advantage(adv, returns, token_rewards, mask, group, B, T, &cfg->adv);
}

void rl_step_advantages_gae(float *token_scores, float *token_rewards, float *adv, float *returns, rl_step_metrics *met,
                            const float *score, const int64_t *resp_len, const float *mask, const float *old_lp,
                            const float *ref_lp, const float *values, int64_t B, int64_t T, const rl_step_cfg *cfg,
                            double gamma, double lam, rl_kl_ctrl *ctrl) {
    step_rewards(token_scores, token_rewards, met, score, resp_len, mask, old_lp, ref_lp, B, T, cfg, ctrl);
    rl_gae(adv, returns, token_rewards, values, mask, B, T, gamma, lam);
}
