// metrics.h: an ordered metrics dict with a JSONL writer, and verl's metric definitions
// (spec verl-grpo.md §8): reduce_metrics, compute_data_metrics, the rollout-vs-actor probability metrics
// (calculate_debug_metrics) and the validation metrics (process_validation_metrics: mean@N, std@N and the
// seeded bootstrap best@k / worst@k / maj@k, with val-core / val-aux naming).
#pragma once
#include <stdint.h>

typedef struct {
    char **keys;     // (n) in insertion order
    double *vals;    // (n); NaN is written as null
    int64_t n, cap;
} rlc_metrics;

void rlc_metrics_init(rlc_metrics *m);
void rlc_metrics_free(rlc_metrics *m);
void rlc_metrics_clear(rlc_metrics *m);
// Set key (replacing the value in place if present, else appending).
void rlc_metrics_set(rlc_metrics *m, const char *key, double v);
// Value or NAN; *found (may be NULL) tells whether the key exists.
double rlc_metrics_get(const rlc_metrics *m, const char *key, int *found);
// One JSON object line (no newline), keys in order; malloc'd.
char *rlc_metrics_to_json(const rlc_metrics *m);
// Append the JSON line + '\n' to path with one write(2) on an O_APPEND descriptor, then fsync. Dies on error.
void rlc_metrics_append_jsonl(const rlc_metrics *m, const char *path);

// verl reduce_metrics for a plain list: np.max if the name contains "max", np.min if "min", else np.mean.
double rlc_metric_reduce(const char *name, const double *vals, int64_t n);

// compute_data_metrics (GRPO: no critic). Per sequence b of B: score[b] = sum_t token_level_scores,
// reward[b] = sum_t token_level_rewards, resp_len[b] valid response tokens, prompt_len[b] prompt tokens.
// adv (B, T) / returns (B, T, may be NULL) over mask (B, T). resp_width / prompt_width: the width
// response_length/clip_ratio compares against (<= 0: the max in the batch, as verl v1 does).
// Sets critic/score/{mean,max,min}, critic/rewards/..., critic/advantages/..., critic/returns/...,
// response_length/{mean,max,min,clip_ratio}, response_length_non_aborted/{mean,max,min,clip_ratio},
// response/aborted_ratio, prompt_length/{mean,max,min,clip_ratio}.
void rlc_data_metrics(rlc_metrics *m, const float *score, const float *reward, const float *adv, const float *returns,
                      const float *mask, const int64_t *resp_len, const int64_t *prompt_len, int64_t B, int64_t T,
                      int64_t resp_width, int64_t prompt_width);

// calculate_debug_metrics over n tokens (flattened (B, T)): p_a = exp(actor_lp), p_r = exp(rollout_lp) where
// mask != 0. Sets training/rollout_probs_diff_valid, _max, _mean, _std (unbiased) and
// training/rollout_actor_probs_pearson_corr (NaN when undefined; valid 0 and NaNs without masked tokens).
void rlc_rollout_probs_metrics(rlc_metrics *m, const float *actor_lp, const float *rollout_lp, const float *mask,
                               int64_t n);

// rollout_corr_helper.compute_offpolicy_metrics with "rollout_corr/" names (B, T arrays; masked_mean per row
// uses the +1e-8 denominator): training_ppl, training_log_ppl, and with rollout log-probs (rollout_lp non-NULL)
// kl, k3_kl, rollout_ppl, rollout_log_ppl, log_ppl_diff, log_ppl_abs_diff, log_ppl_diff_max, log_ppl_diff_min,
// ppl_ratio, chi2_token, chi2_seq (log-ratios clamped to +-20 where verl clamps). Dies without a masked token.
void rlc_rollout_corr_metrics(rlc_metrics *m, const float *old_lp, const float *rollout_lp, const float *mask,
                              int64_t B, int64_t T);

// Validation metrics. n samples; data_source[i], uid[i]; n_vars numeric variables var_vals[v][i] named var_names[v]
// (verl's order: "reward" first, then reward_extra_info keys such as "acc"); preds[i] (or NULL: no maj@k) the
// answer strings voted on. Sets "val-core/<ds>/<var>/<metric>" for the core variable ("acc" if present, else
// "reward") and metrics mean/maj/best at the largest n, all others "val-aux/...". Bootstrap: 1000 draws with
// numpy's legacy RandomState seeded with `seed` (42), reproducing np.random.choice exactly.
void rlc_val_metrics(rlc_metrics *m, int64_t n, const char *const *data_source, const char *const *uid, int n_vars,
                     const char *const *var_names, const double *const *var_vals, const char *const *preds,
                     uint32_t seed);

// Timing and throughput (compute_timing_metrics + compute_throughout_metrics). names/secs: n timers in the order
// they should appear (gen, reward, old_log_prob, ref, adv, update_actor, update_weights, save_checkpoint, testing,
// step). Sets timing_s/<name> for each, timing_per_token_ms/<name> = s*1000/tokens for gen (response_tokens =
// sum of response lengths) and ref, values, adv, update_critic, update_actor (total_tokens = sum of
// prompt+response), and perf/total_num_tokens, perf/time_per_step (= the "step" timer),
// perf/throughput = total_tokens / (time_per_step * n_gpus).
void rlc_timing_metrics(rlc_metrics *m, int n, const char *const *names, const double *secs, int64_t response_tokens,
                        int64_t total_tokens, int64_t n_gpus);

// Actor update metrics, reduced as verl does: per mini-batch the micro-batch losses are summed (the loss of the
// global mini-batch) and the clip fractions / ppo_kl averaged; the step reports the mean over mini-batches.
enum { RLC_ACTOR_MAX_X = 260 };
typedef struct {
    // current mini-batch
    double pg_loss, entropy_loss, kl_loss, loss, clipfrac, ppo_kl, clipfrac_lower;
    int64_t n_micro;
    // sums over finished mini-batches
    double s_pg_loss, s_entropy_loss, s_kl_loss, s_loss, s_clipfrac, s_ppo_kl, s_clipfrac_lower, s_grad_norm;
    int64_t n_mini;
    unsigned present;    // RL_PGM_* bits (rl/policy_loss.h) of the pg metrics the loss mode reports (set by the caller)
    // Metrics averaged over micro-batches (verl's Metric(MEAN); bypass_mode's actor/entropy and rollout_corr/*): the
    // keys, registered once (rlc_actor_metrics_key) so every rank holds the same list; per mini-batch the mean over
    // its micro-batches, the step the mean over mini-batches.
    int n_x;
    char x_key[RLC_ACTOR_MAX_X][96];
    double x_mb[RLC_ACTOR_MAX_X];     // current mini-batch: sums over its micro-batches
    double x_s[RLC_ACTOR_MAX_X];      // sums over finished mini-batches of their means
    int64_t x_n_micro, x_n_mini;      // micro-batches that reported in the current mini-batch; mini-batches that did
} rlc_actor_metrics;
void rlc_actor_metrics_init(rlc_actor_metrics *a);
// One micro-batch's values: pg_loss, entropy_loss, kl_loss, total loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower
// (rl_loss_out's fields; see rl/policy_loss.h).
void rlc_actor_metrics_micro(rlc_actor_metrics *a, double pg_loss, double entropy_loss, double kl_loss, double loss,
                             double pg_clipfrac, double ppo_kl, double pg_clipfrac_lower);
// Registers a micro-batch-mean metric (full name, e.g. "rollout_corr/kl"); registering a key twice is a no-op.
void rlc_actor_metrics_key(rlc_actor_metrics *a, const char *key);
// One micro-batch's value of a registered key (dies on an unknown key). rlc_actor_metrics_x_done closes the
// micro-batch's values (counts it once).
void rlc_actor_metrics_x(rlc_actor_metrics *a, const char *key, double v);
void rlc_actor_metrics_x_done(rlc_actor_metrics *a);
// End of a mini-batch (after its optimizer step), with its pre-clip grad norm.
void rlc_actor_metrics_minibatch(rlc_actor_metrics *a, double grad_norm);
// Sets actor/pg_loss, [actor/pg_clipfrac, actor/ppo_kl, actor/pg_clipfrac_lower: those in a->present; a loss mode
// that reports none, gpg, logs none, as verl], [actor/entropy_loss],
// [actor/kl_loss, actor/kl_coef], actor/loss, actor/grad_norm, actor/lr, then the registered micro-batch means.
void rlc_actor_metrics_put(const rlc_actor_metrics *a, rlc_metrics *m, int has_entropy, int use_kl_loss,
                           double kl_loss_coef, double lr);

// numpy legacy RandomState(seed).choice(n_data, size=count, replace=True) (MT19937 + masked rejection).
void rlc_np_choice(int64_t *out, int64_t count, int64_t n_data, uint32_t seed);
