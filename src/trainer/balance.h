// balance.h: verl's sequence-length balancing (verl/utils/seqlen_balancing.py, spec verl-grpo.md §10):
// Karmarkar-Karp largest differencing (the exact heap / tie-breaking order of verl's Python), balanced partitions,
// dynamic-batch-size micro-batches over the workload 24576*L + L^2, and the global_seqlen/* metrics.
#pragma once
#include <stdint.h>

typedef struct {
    int64_t k;          // parts
    int64_t *offsets;   // (k + 1): part j is items[offsets[j] .. offsets[j+1])
    int64_t *items;     // (n) item indices
} rlc_partition;

void rlc_partition_free(rlc_partition *p);

// calculate_workload: 24576*L + L^2 (int64).
int64_t rlc_seqlen_workload(int64_t seqlen);
// karmarkar_karp(values, k, equal_size): parts in verl's final state order, items in merge order.
// equal_size needs n % k == 0.
void rlc_karmarkar_karp(rlc_partition *out, const int64_t *values, int64_t n, int64_t k, int equal_size);
// get_seqlen_balanced_partitions: KK, then each part sorted ascending; n >= k and no empty part (CHECKed).
void rlc_balanced_partitions(rlc_partition *out, const int64_t *values, int64_t n, int64_t k, int equal_size);
// rearrange_micro_batches for one rank: seqlens (n) = prompt+response tokens per sequence (no padding);
// k = min(n, ceil(sum/max_token_len)), raised to min_num_micro_batch (> 0) and rounded up to a multiple of
// num_batches_divided_by (> 0); KK over the workloads (equal_size false); with `balance` (verl's
// use_dynamic_bsz_balance, default true) parts are ordered by (workload sum, first index) descending and
// interleaved small-large-small (parts[::2][::-1] + parts[1::2]). Dies naming the key when a sequence is longer
// than max_token_len (key_name, e.g. "actor_rollout_ref.actor.ppo_max_token_len_per_gpu").
void rlc_rearrange_micro_batches(rlc_partition *out, const int64_t *seqlens, int64_t n, int64_t max_token_len,
                                 int64_t min_num_micro_batch, int64_t num_batches_divided_by, int balance,
                                 const char *key_name);
// log_seqlen_unbalance: out[6] = {min, max, minmax_diff, balanced_min, balanced_max, mean} for
// global_seqlen/{min,max,minmax_diff,balanced_min,balanced_max,mean}.
void rlc_seqlen_unbalance(double out[6], const int64_t *seqlens, int64_t n, const rlc_partition *p);
