// agg.h: verl's loss aggregation (core_algos.py::agg_loss) with global normalisation, as per-token weights.
// Every loss matrix L (B, T) under a response mask m (B, T) is reduced to a scalar loss = sum_bt w[b,t]*L[b,t];
// w is also d(loss)/d(L[b,t]), so a loss and its gradient come from the same weights. With the global batch
// info (N = tokens in the global mini-batch, G = sequences in it, D = DP size) the summed gradient of all
// micro-batches of a mini-batch does not depend on how it was split (spec verl-grpo.md §4).
#pragma once
#include <stdint.h>

typedef enum {
    RL_AGG_TOKEN_MEAN = 0,          // sum(L*m) / N * D
    RL_AGG_TOKEN_SUM,               // sum(L*m) * D
    RL_AGG_SEQ_MEAN_TOKEN_SUM,      // sum_b [sum_t m>0] sum_t L*m / G * D
    RL_AGG_SEQ_MEAN_TOKEN_MEAN,     // sum_b [sum_t m>0] (sum_t L*m / (sum_t m + 1e-8)) / G * D
    RL_AGG_SEQ_MEAN_TOKEN_SUM_NORM, // seq-mean-token-sum / loss_scale_factor (default: T, the width)
} rl_agg_mode;

// "token-mean", ... -> mode. Returns 0, or -1 for an unknown name.
int rl_agg_mode_parse(const char *name, rl_agg_mode *out);
const char *rl_agg_mode_name(rl_agg_mode mode);

// Global batch info (verl's config.global_batch_info). A field <= 0 means "not given" (verl's None): N and G
// then default to the local micro-batch's counts (only allowed with dp_size == 1, as in verl).
typedef struct {
    int64_t dp_size;           // D >= 1
    double batch_num_tokens;   // N: sum of the loss mask over the whole global mini-batch (all ranks)
    double global_batch_size;  // G: sequences in the global mini-batch (ppo_mini_batch_size * rollout.n)
    double loss_scale_factor;  // seq-mean-token-sum-norm divisor; <= 0: T (mask width of this micro-batch)
} rl_batch_info;

// Fill w (B, T) with d(agg_loss)/d(L): zero where mask == 0. gbi may be NULL (all "not given", D = 1).
void rl_agg_weights(float *w, const float *mask, int64_t B, int64_t T, rl_agg_mode mode, const rl_batch_info *gbi);
// The same weights as per-row factors: w[b,t] = (float)(mask[b,t] * rs[b]) where mask != 0. rs (B).
void rl_agg_row_scales(double *rs, const float *mask, int64_t B, int64_t T, rl_agg_mode mode, const rl_batch_info *gbi);
// The aggregated loss of L (B, T): sum of w*L over mask != 0 (NaN-safe like verl's masked_sum), in double.
double rl_agg_loss(const float *L, const float *mask, int64_t B, int64_t T, rl_agg_mode mode, const rl_batch_info *gbi);

// verl_F.masked_mean(x, m) = sum(x*m) / (sum(m) + 1e-8) over all n elements (double accumulation).
double rl_masked_mean(const float *x, const float *mask, int64_t n);
