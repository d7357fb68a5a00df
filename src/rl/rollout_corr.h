// rollout_corr.h: verl's rollout correction (algorithm.rollout_correction; rollout_corr_helper.py, spec
// verl-ppo.md §5, verl-grpo.md §8): importance-sampling weights between the training policy and the rollout policy
// (rollout_is: per token or per sequence; rollout_is_threshold: a cap (TIS) or a "lo_hi" band outside which the
// weight is 0 (IcePop)), rejection of tokens or sequences whose divergence estimate leaves its threshold
// (rollout_rs: token_k1/k2/k3, seq_sum_*, seq_mean_*, seq_max_k2/k3, comma-separated, all must pass), and the
// rollout_corr/rollout_is_* / rollout_rs_* metrics. Pure functions of (train log-probs, rollout log-probs, mask).
//
// Estimators of log_ratio d = train - rollout (clamped to +-20): k1 = -d, k2 = d^2 / 2, k3 = exp(d) - 1 - d.
// k1 options take a ratio band "lo_hi" (one number u: [1/u, u]) compared in log space; the others one upper bound.
#pragma once
#include <stdint.h>

typedef enum { RL_RC_IS_NONE = 0, RL_RC_IS_TOKEN, RL_RC_IS_SEQUENCE } rl_rc_is;

typedef enum {
    RL_RS_TOKEN_K1 = 0, RL_RS_TOKEN_K2, RL_RS_TOKEN_K3,
    RL_RS_SEQ_SUM_K1, RL_RS_SEQ_SUM_K2, RL_RS_SEQ_SUM_K3,
    RL_RS_SEQ_MEAN_K1, RL_RS_SEQ_MEAN_K2, RL_RS_SEQ_MEAN_K3,
    RL_RS_SEQ_MAX_K2, RL_RS_SEQ_MAX_K3,
    RL_RS_N
} rl_rs_opt;

typedef struct {
    rl_rc_is is;                 // rollout_is: none | token | sequence
    double is_upper;             // TIS cap, or IcePop's upper bound
    double is_lower;             // IcePop's lower bound; 0 with TIS
    int is_icepop;               // 1: rollout_is_threshold was "lo_hi"
    int is_batch_normalize;      // rollout_is_batch_normalize: divide the weights by their mean
    int n_rs;                    // rejection options (0: none)
    rl_rs_opt rs[RL_RS_N];       // in the order given, duplicates dropped
    double rs_lower[RL_RS_N];    // k1: log(lower ratio); others unused
    double rs_upper[RL_RS_N];    // k1: log(upper ratio); others the upper bound of the statistic
} rl_rollout_corr_cfg;

// Parses the config strings (NULL = null); dies with one line naming the algorithm.rollout_correction key.
// is_threshold: "2.0" or "0.5_2.0"; rs: "token_k1,seq_mean_k3"; rs_threshold: one entry shared by all options or
// one per option ("0.5_2.0,0.01").
void rl_rollout_corr_parse(rl_rollout_corr_cfg *cfg, const char *rollout_is, const char *is_threshold, const char *rs,
                           const char *rs_threshold, int batch_normalize);
// 1 when the config computes IS weights or a rejection mask.
int rl_rollout_corr_active(const rl_rollout_corr_cfg *cfg);
const char *rl_rs_opt_name(rl_rs_opt o);

enum { RL_RC_MAX_METRICS = 256 };
typedef struct {
    int n;
    char key[RL_RC_MAX_METRICS][96];   // without the "rollout_corr/" prefix, e.g. "rollout_is_mean"
    double val[RL_RC_MAX_METRICS];
} rl_rc_metrics;

// All arrays (B, T). train_lp: the training policy's log-probs (old_log_prob; in bypass mode the current ones),
// rollout_lp: the sampler's, mask: the response mask (needs a nonzero entry: else dies, as verl raises).
// is_w (or NULL): the detached IS weights when cfg->is != none (0 on padding). mask_out: mask times the rejection
// keep mask (may alias mask). met (or NULL): the rollout_is_* / rollout_rs_* metrics (appended).
void rl_rollout_corr(float *is_w, float *mask_out, rl_rc_metrics *met, const float *train_lp, const float *rollout_lp,
                     const float *mask, int64_t B, int64_t T, const rl_rollout_corr_cfg *cfg);

// compute_offpolicy_metrics: training_ppl, training_log_ppl and, with rollout_lp (may be NULL), kl, k3_kl, rollout_ppl,
// rollout_log_ppl, log_ppl_diff, log_ppl_abs_diff, log_ppl_diff_max, log_ppl_diff_min, ppl_ratio, chi2_token,
// chi2_seq (appended without a prefix). Arrays (B, T); the mask needs a nonzero entry. Reductions in double.
void rl_rollout_corr_offpolicy(rl_rc_metrics *met, const float *train_lp, const float *rollout_lp, const float *mask,
                               int64_t B, int64_t T);
// What verl's bypass_mode policy loss reports for one micro-batch (compute_rollout_correction_and_rejection_mask
// between the current log-probs lp and the rollout's): the rollout_is_* / rollout_rs_* metrics of cfg (none when it
// is inactive), then the off-policy metrics (appended without a prefix). Arrays (B, T); the mask needs a nonzero
// entry.
void rl_rollout_corr_bypass_metrics(rl_rc_metrics *met, const float *lp, const float *rollout_lp, const float *mask,
                                    int64_t B, int64_t T, const rl_rollout_corr_cfg *cfg);
