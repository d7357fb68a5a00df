// run_state.h: the trainer's checkpoints and resume (verl's _save_checkpoint / _load_checkpoint): a complete
// <run_dir>/global_step_N/ holds actor/ (HF weights in fp32, the tokenizer, optimizer.bin) and trainer_state.bin
// (step, data-loader position, KL controller, data seed), and with a critic critic/ (a transformers
// token-classification checkpoint: the backbone's tensors, score.weight (1, H), score.bias (1), config.json with
// *ForTokenClassification and num_labels 1; optimizer.bin and value_head_optimizer.bin); it appears under its final
// name only once complete.
// latest_checkpointed_iteration.txt names the newest; trainer.max_actor_ckpt_to_keep prunes older ones.
#pragma once
#include <stdint.h>

#include "trainer/ppo.h"

// <run_dir>/global_step_<step> (caller frees).
char *run_state_step_dir(const ppo_trainer *g, int64_t step);
// Save global_step_<g->global_step>. W > 1: every rank calls it (rank 0 writes; the others take part in
// gathering the optimizer state).
void run_state_save(ppo_trainer *g);
// Latest complete checkpoint step in the run dir, or -1.
int64_t run_state_latest(const ppo_trainer *g);
// Load a global_step_N directory: weights, optimizer state (W > 1: kept in g->resume_opt for the shards),
// trainer state. A damaged or mismatched file dies with one line.
void run_state_load(ppo_trainer *g, const char *dir);
// Keep only the metrics lines of steps <= last (a crash after logging a step that was never checkpointed would
// otherwise repeat it on resume); last = -1 empties the log.
void run_state_truncate_metrics(const ppo_trainer *g, int64_t last);

// The critic's model from dir: config.json, the backbone without any output embedding (a causal-LM checkpoint's
// untied lm_head is not loaded: critic_pl is laid out as tied, so no lm_head block exists) and score.weight /
// score.bias when present, else a fresh head (N(0, initializer_range), bias 0, seeded by the data seed). Fills
// g->critic_mcfg (the checkpoint's config), critic_pl, critic_params, vhead; rank 0 prints the critic's size line.
void run_state_load_critic_model(ppo_trainer *g, const char *dir);
// critic/value_head_optimizer.bin ("RLCVHOPT", version, n, step, then m (n) and v (n) as fp32) into h's moments;
// the file must hold h->n values at optimizer step want_step (the critic's optimizer.bin), else one error line.
void run_state_load_value_head_opt(const char *path, worker_head *h, int64_t want_step);
// W > 1, resuming: the critic's optimizer.bin into its shards and the value head's moments (after sharding).
void run_state_load_critic_optimizer_sharded(ppo_trainer *g);
// The frozen base of a LoRA actor straight from the checkpoint DIR into bf16 (round to nearest even: the values
// param_bf16_init gives), so the fp32 model never exists (peak: the bf16 copy). The checks of checkpoint_load.
void run_state_load_base_bf16(const char *dir, const param_layout *pl, param_bf16 *pb);
