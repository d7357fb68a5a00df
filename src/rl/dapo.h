// dapo.h: DAPO's pure parts (verl-recipe dapo/dapo_ray_trainer.py and the `dapo` reward manager;
// shared/spec/verl-ppo.md §3): dynamic sampling (drop the groups whose filter metric is the same for every
// response, generate more batches until train_batch_size groups remain) and the overlong reward penalty.
//
// The trainer drives a dapo_accumulator: for each generated batch of gen_batch_size prompts (groups of n
// contiguous responses) it passes the per-response filter metric; the accumulator says which groups join the
// step's batch and whether the batch is complete, and dies with the recipe's error when max_num_gen_batches
// batches did not yield enough groups.
#pragma once
#include <stdint.h>

#include "reward/external.h"

// The filter metric of each response (algorithm.filter_groups.metric): seq_reward = sum of token_level_scores,
// seq_final_reward = sum of token_level_rewards (float32 sums, as verl's torch tensors), anything else is a key
// of the reward's extra info (acc, score, ...; float64 Python values in verl).
typedef enum { DAPO_METRIC_SEQ_REWARD = 0, DAPO_METRIC_SEQ_FINAL_REWARD, DAPO_METRIC_EXTRA } dapo_metric_kind;
dapo_metric_kind dapo_metric_kind_of(const char *name);

// numpy's float64 / float32 sum of x[0..n) (pairwise summation, numpy's block of 8 and PW_BLOCKSIZE 128): the
// group mean np.std compares against.
double dapo_np_sum64(const double *x, int64_t n);
float dapo_np_sum32(const float *x, int64_t n);

// verl's keep rule for one group of n metric values: np.std(vals) > 0 or n == 1. np.std > 0 exactly when some
// value differs from numpy's mean (sum / n), so a group of equal values whose mean rounds away from them (three
// 0.1s) is kept, as in verl. f32: the values are float32 (seq_reward, seq_final_reward) and so is numpy's mean.
int dapo_group_keep(const double *vals, int64_t n, int f32);

typedef struct {
    int enable;                   // algorithm.filter_groups.enable (off: every batch is a step's batch)
    int64_t train_batch_size;     // data.train_batch_size: groups per step
    int64_t n;                    // actor_rollout_ref.rollout.n: responses per group
    int64_t max_num_gen_batches;  // algorithm.filter_groups.max_num_gen_batches (<= 0: unlimited)
    int metric_f32;               // the metric is float32 (seq_reward, seq_final_reward)
    int64_t num_gen_batches;      // batches generated for the step being collected
    int64_t kept;                 // groups collected for it
    int64_t dropped;              // groups filtered out for it
    int64_t last_evicted;         // the completed step's filtered groups (training/filter_groups/evicted_samples)
    int64_t last_surplus;         // its kept groups cut by the truncation (training/filter_groups/discarded_surplus_samples)
} dapo_accumulator;

void dapo_accumulator_init(dapo_accumulator *a, int enable, const char *metric, int64_t train_batch_size, int64_t n,
                           int64_t max_num_gen_batches);

// One generated batch of n_groups groups; metric (n_groups * n) the filter metric per response, groups contiguous
// (NULL when the filter is off). keep (n_groups) out: 1 for each group that joins the step's batch, in order (the
// filter, then the recipe's truncation to the first train_batch_size groups). Returns 1 when the step's batch is
// complete: *num_gen_batches_out (the metric train/num_gen_batches) is set and the accumulator starts the next step.
// Returns 0 to generate another batch. Dies with the recipe's message when the limit is exhausted.
int dapo_accumulator_add(dapo_accumulator *a, uint8_t *keep, const double *metric, int64_t n_groups,
                         int64_t *num_gen_batches_out);

// The overlong reward (reward_model.overlong_buffer): 0 up to max_resp_len - buffer_len response tokens, then
// linear down to -penalty_factor at max_resp_len: min(-(len - (max_resp_len - buffer_len)) / buffer_len *
// penalty_factor, 0), in float32 as verl's tensors.
typedef struct {
    int enable;
    int64_t len;                  // buffer length (> 0)
    double penalty_factor;        // >= 0
    int64_t max_resp_len;         // data.max_response_length
    int log;                      // add overlong_reward / overlong to the reward's extra info
} dapo_overlong_cfg;
float dapo_overlong_reward(int64_t valid_response_length, const dapo_overlong_cfg *c);

// Shape n rewards in place: res[i].score += dapo_overlong_reward(resp_len[i]) (float32 sum, as verl's tensor); the
// extra metrics (acc) keep the unpenalised score. With c->log: extras overlong_reward and overlong (0/1) added.
void dapo_apply_overlong(rlc_reward_result *res, const int64_t *resp_len, int64_t n, const dapo_overlong_cfg *c);

// The filter metric of n responses into out (n): seq_reward / seq_final_reward as float32 row sums of
// token_scores / token_rewards (B = n, T), otherwise the reward extra `name` (a missing "score" extra is the
// response's score). Dies naming algorithm.filter_groups.metric when a response lacks the key.
void dapo_metric_values(double *out, const char *name, int64_t n, const rlc_reward_result *res,
                        const float *token_scores, const float *token_rewards, int64_t T);
