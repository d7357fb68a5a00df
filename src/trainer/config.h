// config.h: the GRPO trainer configuration: verl's nested key names (ppo_trainer.yaml), defaults from
// shared/spec/verl-grpo.md §7, loaded from YAML (libyaml) and dotted command-line overrides
// (`actor_rollout_ref.rollout.n=8`). A typed schema table (key, type, default, range, choices, doc) drives
// parsing, validation, printing and saving. Errors are one line naming the file:line (or the override) and key;
// an unknown key suggests the nearest valid one.
#pragma once
#include <stdint.h>
#include <stdio.h>

#include "rl/advantage.h"
#include "rl/dapo.h"
#include "rl/kl.h"
#include "model/lora.h"
#include "rl/policy_loss.h"

// A nullable integer key holds RLC_CFG_NULL when it is null; a nullable float holds NAN; a nullable string NULL.
#define RLC_CFG_NULL INT64_MIN
// A nullable boolean holds RLC_CFG_NULL_BOOL when it is null.
#define RLC_CFG_NULL_BOOL (-1)

typedef struct {
    char **v;   // (n) owned strings
    int64_t n;
    int scalar; // given as one string, not a list (kept for the keys where PEFT reads the two differently)
} rlc_strlist;

typedef struct {
    char *model_engine;                       // dp (FSDP semantics) | torchtitan (verl's Hydra defaults choice)
    struct {
        rlc_strlist train_files, val_files;   // a string or a list of paths (parquet / jsonl)
        int64_t train_batch_size;             // prompts per step
        int64_t val_batch_size;               // nullable: whole val set
        int64_t val_max_samples;              // nullable: all validation rows
        int64_t max_prompt_length, max_response_length;
        int shuffle;
        int64_t seed;                         // nullable
        char *truncation;                     // error | left | right | middle
        int filter_overlong_prompts;
        char *prompt_key, *reward_fn_key;
        char *chat_template;                  // nullable: a Jinja file replacing the checkpoint's chat template
        int64_t gen_batch_size;               // nullable: prompts per generated batch (DAPO; null: train_batch_size)
    } data;
    struct {
        struct {
            char *path;                       // HF checkpoint directory (required to train)
            int use_remove_padding, enable_gradient_checkpointing;
            // LoRA (docs/lora.md); rlc_config_lora gives the typed view
            int64_t lora_rank;                // 0: full fine-tuning
            double lora_alpha;                // > 0 (16)
            rlc_strlist target_modules;       // "all-linear" (a string: regex or all-linear; a list: module names)
            rlc_strlist exclude_modules;      // none
            char *lora_adapter_path;          // nullable: a PEFT adapter folder to keep training
            struct { int merge; } lora;       // rollout from merged weights
            int use_shm;                      // accepted, no effect
            int use_rslora;                   // rlc: scale alpha/sqrt(r)
            char *base_dtype;                 // rlc: bf16 | fp32, the frozen base's storage with LoRA
        } model;
        struct {
            struct {
                double lr, weight_decay, betas[2], eps, clip_grad;
                int64_t lr_warmup_steps;      // <= 0: from lr_warmup_steps_ratio
                double lr_warmup_steps_ratio;
                char *lr_scheduler_type;      // constant | cosine
                double min_lr_ratio, num_cycles;
                char *decay_type;             // torchtitan engine: linear | sqrt | cosine
                double min_lr_factor;         // torchtitan engine floor
                int64_t total_training_steps; // -1: set at runtime
            } optim;
            int64_t ppo_mini_batch_size;
            int64_t ppo_micro_batch_size_per_gpu;   // nullable (required unless use_dynamic_bsz)
            int use_dynamic_bsz;
            int64_t ppo_max_token_len_per_gpu, ppo_epochs;
            int shuffle;
            int64_t data_loader_seed;
            double clip_ratio, clip_ratio_low, clip_ratio_high, clip_ratio_c;   // low/high: null -> clip_ratio
            char *loss_agg_mode;
            double loss_scale_factor;          // nullable
            double entropy_coeff;
            int calculate_entropy, use_kl_loss;
            double kl_loss_coef;
            char *kl_loss_type;
            struct {
                char *loss_mode;               // a name of rl_pg_losses (vanilla, gspo, ...)
                double clip_cov_ratio, clip_cov_lb, clip_cov_ub;   // clip_cov
                double kl_cov_ratio, ppo_kl_coef;                  // kl_cov
                double dro_beta;                                   // dro (nullable: NAN; must be > 0 for dro)
            } policy_loss;
            double tau_pos, tau_neg;           // sapo gate temperatures
            char *activation_checkpoint;       // none | selective | full
        } actor;
        struct {
            int64_t log_prob_micro_batch_size_per_gpu;   // nullable
            int64_t log_prob_max_token_len_per_gpu;
            int log_prob_use_dynamic_bsz;
        } ref;
        struct {
            int64_t n;
            double temperature, top_p;
            int64_t top_k;
            int do_sample, calculate_log_probs;
            int64_t log_prob_micro_batch_size_per_gpu;   // nullable
            int64_t log_prob_max_token_len_per_gpu;
            int log_prob_use_dynamic_bsz;
            int64_t kv_cache_bytes;            // KV-cache byte budget of the rollout engine
            char *kv_cache_dtype;              // fp32 | bf16
            int64_t max_num_seqs;              // sequences decoded concurrently
            int64_t seed;                      // sampling seed
            int layered_summon;                // accepted, no effect
            struct {
                int64_t n;
                double temperature, top_p;
                int64_t top_k;
                int do_sample;
            } val_kwargs;
            struct {                           // multi-turn tool rollouts (src/rollout/agent.h, docs/agents.md)
                int enable;                    // accepted (the row's agent picks the loop)
                int64_t max_assistant_turns, max_user_turns;   // nullable: no limit
                int64_t max_parallel_calls, max_tool_response_length;
                char *tool_response_truncate_side;             // left | right | middle
                char *format;                  // hermes
                char *tool_config_path, *function_tool_path, *interaction_config_path;   // verl's; rejected when set
                char *env_command;             // nullable: the environment process (docs/env-protocol.md)
                double env_timeout_s;
                int64_t env_max_inflight;      // 0: no cap
            } multi_turn;
            struct {
                int64_t num_workers;           // verl's; ignored
                char *default_agent_loop;      // single_turn_agent | tool_agent (rows without agent_name)
                char *agent_loop_config_path;  // verl's; rejected when set
            } agent;
        } rollout;
    } actor_rollout_ref;
    struct {
        char *adv_estimator;
        double gamma, lam;
        int norm_adv_by_std_in_grpo, use_kl_in_reward;
        char *kl_penalty;
        struct {
            char *type;                        // fixed | adaptive
            double kl_coef;
            int64_t horizon;
            double target_kl;
        } kl_ctrl;
        struct {
            int enable;                        // DAPO dynamic sampling
            char *metric;                      // nullable: acc | score | seq_reward | seq_final_reward | a reward key
            int64_t max_num_gen_batches;       // <= 0: unlimited
        } filter_groups;
        struct {
            char *rollout_is;                  // nullable: token | sequence (rollout IS weights)
            char *rollout_is_threshold;        // "2.0" (TIS cap) or "lo_hi" (IcePop band)
            int rollout_is_batch_normalize;
            char *rollout_rs;                  // nullable: comma-separated rejection options
            char *rollout_rs_threshold;        // nullable: one shared or one per option
            int bypass_mode;                   // old log-probs := rollout log-probs, loss_mode := bypass_mode
            char *loss_type;                   // ppo_clip | reinforce (bypass_mode)
        } rollout_correction;
    } algorithm;
    struct {
        int64_t total_epochs;
        int64_t total_training_steps;          // nullable: len(train) // train_batch_size * total_epochs
        int64_t test_freq, save_freq;
        int val_before_train, val_only;
        char *resume_mode;                     // auto | disable | resume_path
        char *resume_from_path;                // nullable
        char *default_local_dir;               // null -> checkpoints/<project_name>/<experiment_name>
        int64_t max_actor_ckpt_to_keep;        // nullable: keep all
        int64_t max_critic_ckpt_to_keep;       // nullable: max_actor_ckpt_to_keep (one directory holds both)
        rlc_strlist logger;                    // console | file | tensorboard
        char *project_name, *experiment_name;
        int64_t n_gpus_per_node, nnodes;
        int64_t n_threads;                     // 0: all cores
        int balance_batch;
        int64_t critic_warmup;
        int64_t log_val_generations;
    } trainer;
    struct {                                   // PPO's value model (verl's critic.*; spec verl-ppo.md §1.7)
        int enable;                            // RLC_CFG_NULL_BOOL: on iff algorithm.adv_estimator=gae
        struct {
            char *path;                        // nullable: the actor's checkpoint
            int use_remove_padding, enable_gradient_checkpointing;   // accepted as the actor's (critic.activation_checkpoint decides)
        } model;
        struct {
            double lr, weight_decay, betas[2], eps, clip_grad;
            int64_t lr_warmup_steps;           // <= 0: from lr_warmup_steps_ratio
            double lr_warmup_steps_ratio;
            char *lr_scheduler_type;           // constant | cosine
            double min_lr_ratio;
        } optim;
        int64_t ppo_mini_batch_size;           // nullable: the actor's (prompts; x rollout.n sequences)
        int64_t ppo_micro_batch_size_per_gpu;  // nullable (required unless use_dynamic_bsz)
        int64_t forward_micro_batch_size_per_gpu;   // nullable: ppo_micro_batch_size_per_gpu (values pass)
        int use_dynamic_bsz;                   // RLC_CFG_NULL_BOOL: the actor's
        int64_t ppo_max_token_len_per_gpu;
        int64_t forward_max_token_len_per_gpu; // nullable: ppo_max_token_len_per_gpu
        int64_t ppo_epochs;                    // nullable: the actor's
        int shuffle;                           // RLC_CFG_NULL_BOOL: the actor's
        int64_t data_loader_seed;
        double cliprange_value;
        char *loss_agg_mode;                   // nullable: the actor's
        double loss_scale_factor;              // nullable: the actor's
        double grad_clip;                      // verl's FSDP field, not read by its engine (optim.clip_grad is)
        char *activation_checkpoint;           // nullable: the actor's
    } critic;
    struct {
        char *path;                            // nullable: a .py file with a verl-style reward function
        char *name;                            // its function name (compute_score)
        char *python;                          // interpreter for `path`
        char *command;                         // nullable: external reward process (JSONL over stdin/stdout)
        double timeout_s;
    } custom_reward_function;
    struct {
        struct {
            int enable;                        // DAPO overlong reward shaping
            int64_t len;                       // buffer tokens before max_response_length
            double penalty_factor;             // penalty at max_response_length
            int log;                           // add overlong_reward / overlong to the reward metrics
        } overlong_buffer;
    } reward_model;
} rlc_train_config;

void rlc_config_init(rlc_train_config *c);   // every key at its default
void rlc_config_free(rlc_train_config *c);
// Merge a YAML file / text on top of the current values. `name` is used in errors ("name:line: ...").
void rlc_config_load_yaml(rlc_train_config *c, const char *path);
void rlc_config_load_yaml_text(rlc_train_config *c, const char *text, const char *name);
// One "dotted.key=value" override (value is a YAML scalar or flow list, e.g. "[0.9, 0.95]" or "null").
void rlc_config_override(rlc_train_config *c, const char *kv);
// Resolve derived values (clip_ratio_low/high, default_local_dir) and check cross-key constraints.
void rlc_config_finalize(rlc_train_config *c);
// The whole resolved config as YAML (nested, schema order); malloc'd. rlc_config_save writes it atomically.
char *rlc_config_to_yaml(const rlc_train_config *c);
void rlc_config_save(const rlc_train_config *c, const char *path);
// `rlc train CONFIG.yaml [key=value ...]`: argv[0] = config path (or NULL), the rest overrides; finalizes.
void rlc_config_from_args(rlc_train_config *c, const char *yaml_path, int n_overrides, char **overrides);
// Print the schema (key, type, default, range/choices, doc) for --help.
void rlc_config_print_schema(FILE *f);
// Nearest valid key to `key` (edit distance / suffix match), or NULL when nothing is close.
const char *rlc_config_suggest(const char *key);

// The LR schedule: "constant"/"cosine" (model_engine=dp, from optim.lr_scheduler_type) or the TorchTitan
// warmup-stable-decay "linear"/"sqrt"/"wsd-cosine" (model_engine=torchtitan, from optim.decay_type) -- the names
// lr_sched_type_parse (trainer/lr_schedule.h) takes -- and its floor (min_lr_ratio or min_lr_factor).
const char *rlc_config_lr_scheduler(const rlc_train_config *c, double *floor_out);

// The external reward command: custom_reward_function.command if set, else the Python adapter for
// custom_reward_function.path (rlc_reward_python_command), else NULL (built-in scorers). malloc'd.
char *rlc_config_reward_command(const rlc_train_config *c);

// The LoRA keys as a lora_config: returns 0 (out = defaults) when lora_rank is 0, else 1. Dies with one line naming
// the key for lora_alpha <= 0 or a malformed target_modules / exclude_modules (matching is checked against the
// model when the adapters are built: lora_layout_init with LORA_KEYS_VERL).
int rlc_config_lora(const rlc_train_config *c, lora_config *out);

// Typed views for the RL modules (call after finalize).
void rlc_config_loss_cfg(const rlc_train_config *c, rl_loss_cfg *out);
// DAPO: the dynamic-sampling accumulator for one step (algorithm.filter_groups, data.train_batch_size,
// rollout.n) and the overlong penalty (reward_model.overlong_buffer, max_resp_len = data.max_response_length).
// *gen_batch_size = data.gen_batch_size, or train_batch_size when null.
void rlc_config_dapo(const rlc_train_config *c, dapo_accumulator *acc, dapo_overlong_cfg *overlong,
                     int64_t *gen_batch_size);
void rlc_config_adv_cfg(const rlc_train_config *c, rl_adv_cfg *out);
rl_kl_type rlc_config_kl_penalty(const rlc_train_config *c);   // algorithm.kl_penalty
void rlc_config_kl_ctrl(const rlc_train_config *c, rl_kl_ctrl *out);
// verl's need_critic: critic.enable if set, else algorithm.adv_estimator == gae.
int rlc_config_use_critic(const rlc_train_config *c);
