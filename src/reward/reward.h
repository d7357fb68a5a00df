// reward.h: reward dispatch by data_source (verl's default_compute_score + custom_reward_function).
// With an external command every sample goes to it (as a verl custom reward function replaces the default);
// otherwise the built-in scorer for the sample's data_source is used: "openai/gsm8k" -> GSM8K strict
// (format_score 0, score 1). Like verl's naive reward manager, a numeric score is also reported as the extra
// metric "acc". The built-in GSM8K result also carries pred = the strict answer ("" if none) for maj@k.
#pragma once
#include <stdint.h>

#include "reward/external.h"

typedef struct {
    int has_ext;
    rlc_reward_ext ext;
} rlc_reward_fn;

// command: NULL for the built-in scorers only.
void rlc_reward_init(rlc_reward_fn *r, const char *command, double timeout_s);
// The command that serves a verl-style Python reward function over the JSONL protocol: `python` runs an embedded
// adapter that loads `path` (a .py file) and calls `name`(data_source, solution_str, ground_truth, extra_info)
// for each request; a float result is the score, a dict gives "score" plus numeric extras (and "pred").
// Returns a malloc'd shell command (arguments single-quoted).
char *rlc_reward_python_command(const char *python, const char *path, const char *name);
void rlc_reward_free(rlc_reward_fn *r);
// 1 if data_source has a built-in scorer.
int rlc_reward_has_builtin(const char *data_source);
// Score n samples (out[i] must be freed with rlc_reward_result_free). Dies naming the sample for a data_source
// without a scorer.
void rlc_reward_compute(rlc_reward_fn *r, int64_t n, const rlc_reward_request *req, rlc_reward_result *out);

// assemble_rm_scores: token_scores (B, T) = 0 except score[b] at index resp_len[b] - 1 (verl's Python index:
// an empty response, length 0, puts it at T - 1).
void rlc_reward_token_scores(float *token_scores, const float *score, const int64_t *resp_len, int64_t B, int64_t T);
