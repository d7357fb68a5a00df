// grpo.h: the PPO/GRPO training loop (verl's main_ppo with the v1 sync trainer), in verl's step order
// and with its metric names: gen -> reward -> old_log_prob -> ref -> adv -> update_actor ->
// save_checkpoint -> update_weights, then testing. Rollout and training share one process, one copy
// of the weights and one set of kernels. Semantics: shared/spec/verl-grpo.md; deliberate differences
// are listed in docs/grpo.md.
#pragma once
#include "dist/dist.h"
#include "trainer/config.h"

// Run training (val_only=0) or validation only (val_only=1, `rlc eval`) with a finalized config.
// Returns 0 on success; bad input dies with a one-line error.
int grpo_run(const rlc_train_config *cfg, int val_only);
// The same over the data-parallel ranks of d (every rank calls it; NULL or world 1: grpo_run). The step's
// prompts are split in contiguous chunks (train_batch_size a multiple of the world size), the batch is
// all-gathered, the log-prob passes and the update run on balanced parts with sharded actor state
// (dist/fsdp.h); rank 0 alone writes metrics, plots and checkpoints. See docs/distributed.md.
int grpo_run_dist(const rlc_train_config *c, int val_only, dist_ctx *d);
