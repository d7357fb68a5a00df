// grpo.h: the PPO/GRPO training loop (verl's main_ppo with the v1 sync trainer), in verl's step order
// and with its metric names: gen -> reward -> old_log_prob -> ref -> adv -> update_actor ->
// save_checkpoint -> update_weights, then testing. Rollout and training share one process, one copy
// of the weights and one set of kernels. Semantics: shared/spec/verl-grpo.md; deliberate differences
// are listed in docs/grpo.md.
#pragma once
#include "trainer/config.h"

// Run training (val_only=0) or validation only (val_only=1, `rlc eval`) with a finalized config.
// Returns 0 on success; bad input dies with a one-line error.
int grpo_run(const rlc_train_config *cfg, int val_only);
