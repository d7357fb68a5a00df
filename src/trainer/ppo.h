// ppo.h: the trainer's state shared by its role files (the driver grpo.c, the step ppo.c, validate.c,
// run_state.c). One step is verl's RayPPOTrainer.fit() body, one function per phase:
// gen -> reward -> old_log_prob -> ref -> values -> adv -> update_critic -> update_actor -> save_checkpoint ->
// update_weights (values and update_critic with a critic).
// Everything the step computes is a pure function of (config, weights, step), so a resumed run repeats an
// uninterrupted one bit for bit. Semantics: shared/spec/verl-grpo.md; differences: docs/grpo.md.
#pragma once
#include <stdint.h>

#include "backend/backend.h"
#include "data/dataset.h"
#include "dist/dist.h"
#include "dist/fsdp.h"
#include "model/decoder.h"
#include "model/value_head.h"
#include "reward/reward.h"
#include "rl/policy_loss.h"
#include "rl/rl_step.h"
#include "rollout/engine.h"
#include "rollout/env.h"
#include "tokenizer/tokenizer.h"
#include "trainer/config.h"
#include "trainer/engine.h"
#include "trainer/metrics.h"
#include "trainer/progress.h"
#include "trainer/step_batch.h"
#include "trainer/tensorboard.h"
#include "trainer/worker.h"

typedef struct {
    const rlc_train_config *cfg;
    backend_ctx be;
    rlc_tokenizer *tok;
    rlc_dataset train, val;
    int have_train, have_val;
    model_config mcfg;
    param_layout pl;
    param_set params, ref_params;
    decoder_model model, ref_model;
    int have_ref;                 // with LoRA: ref = the actor's model with its adapters off (no ref_params)
    // LoRA (docs/lora.md): the actor trains the adapter set; the base is frozen (bf16 in pb, or fp32 in params)
    int use_lora;
    lora_layout ll;               // the adapters' size table
    param_set lora_ad;            // (ll.pl.numel) the adapters, stepped by eng
    param_bf16 pb;                // base_dtype=bf16: the frozen base (params freed); the rollout reads it too
    engine eng;                   // the actor's engine (the reference borrows its buffers)
    worker actor, ref, critic;    // the roles (ref: when have_ref; critic: when have_critic)
    // the critic (verl's value model, spec verl-ppo.md §1): its own decoder, head, engine and AdamW
    int have_critic;
    int use_gae;                  // algorithm.adv_estimator=gae: advantages from the critic's values
    model_config critic_mcfg;
    param_layout critic_pl;
    param_set critic_params;
    decoder_model critic_model;
    engine critic_eng;
    value_head vhead;             // score.weight, score.bias
    worker_head critic_head;      // vhead's data + its gradient and AdamW moments (replicated on every rank)
    fsdp_state critic_fs;         // W > 1: the critic's sharded params / grads / AdamW moments (critic_params freed)
    int have_critic_fs;
    char *critic_resume_dir;      // W > 1: the critic/ checkpoint whose optimizer state goes into the shards
    rollout_engine *rollout;
    rlc_reward_fn reward;
    rl_loss_cfg loss_cfg;
    rl_step_cfg step_cfg;         // advantage estimator + in-reward KL
    rl_kl_ctrl kl_ctrl;
    float temperature;            // rollout temperature, also used by the actor's log-prob passes
    int want_entropy_update;      // entropy computed in the update (entropy_coeff != 0 or calculate_entropy)
    int64_t steps_per_epoch, total_steps;
    int64_t global_step;          // steps completed
    int64_t epoch, batch_in_epoch;// data-loader position of the next generated batch (batches of ppo_gen_batch_size)
    int64_t *perm, perm_epoch;    // the data loader's prompt order of epoch perm_epoch (lazily built; freed by the driver)
    char *run_dir;
    char *metrics_path;
    uint64_t data_seed;
    const char *dump_dir;         // RLC_GRPO_DUMP: write each step's rollouts (tests' PyTorch oracle)
    int64_t crash_step;           // RLC_TEST_CRASH_IN_CHECKPOINT: SIGKILL midway through this step's save
    int64_t nan_lr_step;          // RLC_TEST_NONFINITE_LR: this step's update uses a NaN learning rate
    // data parallelism (docs/distributed.md); W = 1 runs the single-process code paths unchanged
    dist_ctx *d;                  // NULL with W = 1
    int W, R, root;               // world size, rank, rank == 0
    fsdp_state fs;                // W > 1: sharded params / grads / AdamW moments of the actor
    int have_fs;
    fsdp_state ref_fs;            // W > 1: sharded weights of the reference model (ref_params is freed)
    int have_ref_fs;
    char *resume_opt;             // W > 1: optimizer.bin to load into the shards once they exist
    tb_writer *tb;                // trainer.logger has tensorboard: the event file (rank 0), else NULL
    progress prog;                // the terminal's progress line through a step's phases
    int agent_loop;               // AGENT_SINGLE_TURN | AGENT_TOOL (agent.default_agent_loop; ppo_agent_loop)
    rlc_env *env;                 // tool_agent: the environment process (started at the first generation)
} ppo_trainer;

// The rollout configuration of training (val = 0) or validation (val = 1, val_kwargs).
void ppo_rollout_config(const ppo_trainer *g, rollout_config *rc, int val);
// gen: roll out the prompts rows (n_prompts) of ds with re and pack prompt ++ response into sb; the sampling
// stream of a prompt is stream_base + its dataset row. *t_gen: the generation's seconds.
void ppo_generate(ppo_trainer *g, rollout_engine *re, const int64_t *rows, int n_prompts, const rlc_dataset *ds,
                  uint64_t stream_base, step_batch *sb, double *t_gen);
// Multi-turn tool rollouts (ppo_agent.c): the trainer's loop from the config and the rows' agent_name (dies when tool_agent has no
// env_command); ppo_generate's path for tool_agent (the response mask 1 on sampled tokens only, sb->agent filled);
// the per-trajectory metrics (prefix "" in training, "val-aux/" in validation); stopping the environment.
int ppo_agent_loop(const rlc_train_config *c, const rlc_dataset *train, const rlc_dataset *val);
void ppo_generate_agent(ppo_trainer *g, rollout_engine *re, const int64_t *rows, int n_prompts, const rlc_dataset *ds,
                        uint64_t stream_base, step_batch *sb, double *t_gen);
void ppo_agent_metrics(const step_batch *sb, rlc_metrics *m, const char *prefix);
void ppo_agent_free(ppo_trainer *g);
// reward: decode the responses (special tokens skipped, as verl's naive reward manager) and score them: sb->score
// (B) and sb->res (B), the full results (extras and pred) for the validation metrics.
void ppo_score(ppo_trainer *g, const rlc_dataset *ds, step_batch *sb);
// Prompt order of one epoch: a seeded Fisher-Yates shuffle (data.shuffle) or the file order.
void ppo_epoch_order(const ppo_trainer *g, int64_t epoch, int64_t *perm);
// Prompts per data-loader batch: data.gen_batch_size (null: train_batch_size) with algorithm.filter_groups, else
// data.train_batch_size (verl's main trainer ignores gen_batch_size). steps_per_epoch counts these batches.
int64_t ppo_gen_batch_size(const rlc_train_config *c);
// One training step (W > 1: each rank generates its chunk of every generated batch), metrics into m. The step pulls
// the data loader's batches itself: one, or with DAPO's dynamic sampling as many as it takes to keep
// train_batch_size groups. Returns 0 (no step taken) when trainer.total_epochs ran out while collecting them.
int ppo_train_step(ppo_trainer *g, rlc_metrics *m);
// One step's metrics to every logger: metrics.jsonl, TensorBoard, the console line.
void ppo_log_step(ppo_trainer *g, const rlc_metrics *m);
