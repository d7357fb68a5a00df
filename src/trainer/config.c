// config.c: schema-driven YAML config with dotted overrides (see config.h).
#include "trainer/config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <yaml.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "reward/reward.h"

// CT_STRORLIST: like CT_STRLIST, but whether a string or a list was given is kept (PEFT reads them differently)
typedef enum { CT_BOOL, CT_INT, CT_FLOAT, CT_STR, CT_STRLIST, CT_FLOAT2, CT_STRORLIST } ctype;

typedef struct {
    const char *key;      // dotted verl name
    ctype type;
    size_t off;           // offset in rlc_train_config
    const char *def;      // default as YAML text
    double lo, hi;        // inclusive range for numbers (lo > hi: unchecked)
    int nullable;
    const char *choices;  // "a|b|c" for enumerated strings (NULL: any)
    const char *doc;
} cfg_entry;

#define O(f) offsetof(rlc_train_config, f)
#define BIG 9.2e18
#define AR "actor_rollout_ref."
static const char k_agg_choices[] = "token-mean|token-sum|seq-mean-token-sum|seq-mean-token-mean|seq-mean-token-sum-norm";
static const char k_kl_choices[] = "kl|k1|abs|mse|k2|low_var_kl|k3|kl+|k1+|abs+|mse+|k2+|low_var_kl+|k3+";

static const cfg_entry k_schema[] = {
    {"model_engine", CT_STR, O(model_engine), "dp", 1, 0, 0, "dp|torchtitan", "engine semantics (LR schedule): dp = verl FSDP, torchtitan = TorchTitan WSD"},
    {"data.train_files", CT_STRLIST, O(data.train_files), "[]", 1, 0, 0, NULL, "training data files (verl parquet or JSONL rows)"},
    {"data.val_files", CT_STRLIST, O(data.val_files), "[]", 1, 0, 0, NULL, "validation data files"},
    {"data.train_batch_size", CT_INT, O(data.train_batch_size), "1024", 1, 1e9, 0, NULL, "prompts per training step"},
    {"data.val_batch_size", CT_INT, O(data.val_batch_size), "null", 1, 1e9, 1, NULL, "validation prompts per batch (null: all)"},
    {"data.val_max_samples", CT_INT, O(data.val_max_samples), "null", 1, 1e12, 1, NULL, "use only the first N validation rows (null: all)"},
    {"data.max_prompt_length", CT_INT, O(data.max_prompt_length), "512", 1, 1048576, 0, NULL, "max prompt tokens (left pad)"},
    {"data.max_response_length", CT_INT, O(data.max_response_length), "512", 1, 1048576, 0, NULL, "max generated tokens"},
    {"data.shuffle", CT_BOOL, O(data.shuffle), "true", 1, 0, 0, NULL, "shuffle the training prompts each epoch"},
    {"data.seed", CT_INT, O(data.seed), "null", 0, 4294967295.0, 1, NULL, "shuffle seed (null: unseeded in verl; 0 here)"},
    {"data.truncation", CT_STR, O(data.truncation), "error", 1, 0, 0, "error|left|right|middle", "what to do with prompts over max_prompt_length"},
    {"data.filter_overlong_prompts", CT_BOOL, O(data.filter_overlong_prompts), "false", 1, 0, 0, NULL, "drop prompts over max_prompt_length"},
    {"data.prompt_key", CT_STR, O(data.prompt_key), "prompt", 1, 0, 0, NULL, "row field holding the chat messages"},
    {"data.chat_template", CT_STR, O(data.chat_template), "null", 1, 0, 1, NULL, "Jinja chat template file replacing the checkpoint's (null: the checkpoint's own)"},
    {"data.reward_fn_key", CT_STR, O(data.reward_fn_key), "data_source", 1, 0, 0, NULL, "row field selecting the reward function"},
    {"data.gen_batch_size", CT_INT, O(data.gen_batch_size), "null", 1, 1e9, 1, NULL, "prompts per generated batch with algorithm.filter_groups (null: train_batch_size)"},

    {AR "model.path", CT_STR, O(actor_rollout_ref.model.path), "null", 1, 0, 1, NULL, "HF checkpoint directory of the policy, or a hub id (ORG/NAME) in the local HF cache"},
    {AR "model.use_remove_padding", CT_BOOL, O(actor_rollout_ref.model.use_remove_padding), "true", 1, 0, 0, NULL, "sequence packing (always on in rlc)"},
    {AR "model.enable_gradient_checkpointing", CT_BOOL, O(actor_rollout_ref.model.enable_gradient_checkpointing), "true", 1, 0, 0, NULL, "recompute activations in backward"},
    // LoRA (docs/lora.md): verl's keys, plus use_rslora and base_dtype (rlc's own)
    {AR "model.lora_rank", CT_INT, O(actor_rollout_ref.model.lora_rank), "0", 0, 65536, 0, NULL, "LoRA rank r (0: full fine-tuning)"},
    {AR "model.lora_alpha", CT_FLOAT, O(actor_rollout_ref.model.lora_alpha), "16", 1, 0, 0, NULL, "LoRA alpha: the side path is scaled by alpha/r (> 0)"},
    {AR "model.target_modules", CT_STRORLIST, O(actor_rollout_ref.model.target_modules), "all-linear", 1, 0, 1, NULL, "adapted modules: all-linear, a list of names (q_proj, ...; exact or suffix match) or a regex fullmatched on model.layers.N.self_attn.q_proj-style names"},
    {AR "model.exclude_modules", CT_STRORLIST, O(actor_rollout_ref.model.exclude_modules), "null", 1, 0, 1, NULL, "modules never adapted (same forms as target_modules)"},
    {AR "model.lora_adapter_path", CT_STR, O(actor_rollout_ref.model.lora_adapter_path), "null", 1, 0, 1, NULL, "PEFT adapter folder to load and keep training (its r, alpha and modules win)"},
    {AR "model.lora.merge", CT_BOOL, O(actor_rollout_ref.model.lora.merge), "false", 1, 0, 0, NULL, "rollout decodes from merged weights W + s*B*A (a second weight buffer) instead of the unmerged side path"},
    {AR "model.use_shm", CT_BOOL, O(actor_rollout_ref.model.use_shm), "false", 1, 0, 0, NULL, "accepted for verl command lines; no effect in rlc"},
    {AR "model.use_rslora", CT_BOOL, O(actor_rollout_ref.model.use_rslora), "false", 1, 0, 0, NULL, "rsLoRA scale alpha/sqrt(r) (rlc's own key)"},
    {AR "model.base_dtype", CT_STR, O(actor_rollout_ref.model.base_dtype), "bf16", 1, 0, 0, "bf16|fp32", "storage of the frozen base with LoRA (rlc's own key)"},
    {AR "rollout.layered_summon", CT_BOOL, O(actor_rollout_ref.rollout.layered_summon), "false", 1, 0, 0, NULL, "accepted for verl command lines; no effect in rlc"},

    {AR "actor.optim.lr", CT_FLOAT, O(actor_rollout_ref.actor.optim.lr), "1e-6", 0, 1, 0, NULL, "AdamW learning rate"},
    {AR "actor.optim.weight_decay", CT_FLOAT, O(actor_rollout_ref.actor.optim.weight_decay), "0.01", 0, 10, 0, NULL, "AdamW decoupled weight decay"},
    {AR "actor.optim.betas", CT_FLOAT2, O(actor_rollout_ref.actor.optim.betas), "[0.9, 0.999]", 0, 0.999999999, 0, NULL, "AdamW betas [b1, b2]"},
    {AR "actor.optim.eps", CT_FLOAT, O(actor_rollout_ref.actor.optim.eps), "1e-8", 1e-30, 1, 0, NULL, "AdamW epsilon"},
    {AR "actor.optim.clip_grad", CT_FLOAT, O(actor_rollout_ref.actor.optim.clip_grad), "1.0", 0, 1e30, 0, NULL, "global grad-norm clip"},
    {AR "actor.optim.lr_warmup_steps", CT_INT, O(actor_rollout_ref.actor.optim.lr_warmup_steps), "-1", -1, 1e9, 0, NULL, "warmup steps (<= 0: from lr_warmup_steps_ratio)"},
    {AR "actor.optim.lr_warmup_steps_ratio", CT_FLOAT, O(actor_rollout_ref.actor.optim.lr_warmup_steps_ratio), "0.0", 0, 1, 0, NULL, "warmup steps as a fraction of total_training_steps"},
    {AR "actor.optim.lr_scheduler_type", CT_STR, O(actor_rollout_ref.actor.optim.lr_scheduler_type), "constant", 1, 0, 0, "constant|cosine", "LR schedule after warmup"},
    {AR "actor.optim.min_lr_ratio", CT_FLOAT, O(actor_rollout_ref.actor.optim.min_lr_ratio), "0.0", 0, 1, 0, NULL, "cosine floor as a fraction of lr"},
    {AR "actor.optim.num_cycles", CT_FLOAT, O(actor_rollout_ref.actor.optim.num_cycles), "0.5", 0, 1e6, 0, NULL, "cosine cycles"},
    {AR "actor.optim.decay_type", CT_STR, O(actor_rollout_ref.actor.optim.decay_type), "linear", 1, 0, 0, "linear|sqrt|cosine", "TorchTitan decay shape (model_engine=torchtitan)"},
    {AR "actor.optim.min_lr_factor", CT_FLOAT, O(actor_rollout_ref.actor.optim.min_lr_factor), "0.0", 0, 1, 0, NULL, "TorchTitan LR floor factor (1.0: constant)"},
    {AR "actor.optim.total_training_steps", CT_INT, O(actor_rollout_ref.actor.optim.total_training_steps), "-1", -1, 1e12, 0, NULL, "set at runtime from trainer.total_training_steps"},
    {AR "actor.ppo_mini_batch_size", CT_INT, O(actor_rollout_ref.actor.ppo_mini_batch_size), "256", 1, 1e9, 0, NULL, "prompts per optimizer step (x rollout.n sequences)"},
    {AR "actor.ppo_micro_batch_size_per_gpu", CT_INT, O(actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu), "null", 1, 1e9, 1, NULL, "sequences per micro-batch (required unless use_dynamic_bsz)"},
    {AR "actor.use_dynamic_bsz", CT_BOOL, O(actor_rollout_ref.actor.use_dynamic_bsz), "false", 1, 0, 0, NULL, "micro-batches by token budget (Karmarkar-Karp balanced)"},
    {AR "actor.ppo_max_token_len_per_gpu", CT_INT, O(actor_rollout_ref.actor.ppo_max_token_len_per_gpu), "16384", 1, 1e12, 0, NULL, "token budget per micro-batch"},
    {AR "actor.ppo_epochs", CT_INT, O(actor_rollout_ref.actor.ppo_epochs), "1", 1, 1e6, 0, NULL, "passes over each step's batch"},
    {AR "actor.shuffle", CT_BOOL, O(actor_rollout_ref.actor.shuffle), "false", 1, 0, 0, NULL, "shuffle sequences into mini-batches"},
    {AR "actor.data_loader_seed", CT_INT, O(actor_rollout_ref.actor.data_loader_seed), "42", 0, 4294967295.0, 0, NULL, "mini-batch shuffle seed"},
    {AR "actor.clip_ratio", CT_FLOAT, O(actor_rollout_ref.actor.clip_ratio), "0.2", 0, 1, 0, NULL, "PPO clip epsilon"},
    {AR "actor.clip_ratio_low", CT_FLOAT, O(actor_rollout_ref.actor.clip_ratio_low), "null", 0, 100, 1, NULL, "lower clip epsilon (null: clip_ratio; > 1: no lower bound, as cispo's 10)"},
    {AR "actor.clip_ratio_high", CT_FLOAT, O(actor_rollout_ref.actor.clip_ratio_high), "null", 0, 100, 1, NULL, "upper clip epsilon (null: clip_ratio)"},
    {AR "actor.clip_ratio_c", CT_FLOAT, O(actor_rollout_ref.actor.clip_ratio_c), "3.0", 1.0000001, 1e6, 0, NULL, "dual-clip constant (> 1)"},
    {AR "actor.loss_agg_mode", CT_STR, O(actor_rollout_ref.actor.loss_agg_mode), "token-mean", 1, 0, 0, k_agg_choices, "loss aggregation"},
    {AR "actor.loss_scale_factor", CT_FLOAT, O(actor_rollout_ref.actor.loss_scale_factor), "null", 1e-30, 1e30, 1, NULL, "seq-mean-token-sum-norm divisor (null: response width)"},
    {AR "actor.entropy_coeff", CT_FLOAT, O(actor_rollout_ref.actor.entropy_coeff), "0", -1e6, 1e6, 0, NULL, "entropy bonus coefficient"},
    {AR "actor.calculate_entropy", CT_BOOL, O(actor_rollout_ref.actor.calculate_entropy), "false", 1, 0, 0, NULL, "compute entropy in the update even without a bonus"},
    {AR "actor.use_kl_loss", CT_BOOL, O(actor_rollout_ref.actor.use_kl_loss), "false", 1, 0, 0, NULL, "add kl_loss_coef * KL(policy, ref) to the loss"},
    {AR "actor.kl_loss_coef", CT_FLOAT, O(actor_rollout_ref.actor.kl_loss_coef), "0.001", 0, 1e6, 0, NULL, "KL loss coefficient"},
    {AR "actor.kl_loss_type", CT_STR, O(actor_rollout_ref.actor.kl_loss_type), "low_var_kl", 1, 0, 0, k_kl_choices, "KL estimator of the loss"},
    {AR "actor.policy_loss.loss_mode", CT_STR, O(actor_rollout_ref.actor.policy_loss.loss_mode), "vanilla", 1, 0, 0, "vanilla|gspo|sapo|gpg|clip_cov|kl_cov|geo_mean|dro|cispo|dppo_tv|dppo_kl|bypass_mode", "policy loss (verl's registry; docs/algorithms.md)"},
    {AR "actor.policy_loss.clip_cov_ratio", CT_FLOAT, O(actor_rollout_ref.actor.policy_loss.clip_cov_ratio), "0.0002", 1e-12, 1, 0, NULL, "clip_cov: fraction of tokens whose gradient is dropped"},
    {AR "actor.policy_loss.clip_cov_lb", CT_FLOAT, O(actor_rollout_ref.actor.policy_loss.clip_cov_lb), "1.0", -1e30, 1e30, 0, NULL, "clip_cov: covariance lower bound of the candidates"},
    {AR "actor.policy_loss.clip_cov_ub", CT_FLOAT, O(actor_rollout_ref.actor.policy_loss.clip_cov_ub), "5.0", -1e30, 1e30, 0, NULL, "clip_cov: covariance upper bound of the candidates"},
    {AR "actor.policy_loss.kl_cov_ratio", CT_FLOAT, O(actor_rollout_ref.actor.policy_loss.kl_cov_ratio), "0.0002", 1e-12, 1, 0, NULL, "kl_cov: fraction of tokens given the KL penalty"},
    {AR "actor.policy_loss.ppo_kl_coef", CT_FLOAT, O(actor_rollout_ref.actor.policy_loss.ppo_kl_coef), "0.1", 0, 1e6, 0, NULL, "kl_cov: coefficient of |lp - old| on the selected tokens"},
    {AR "actor.policy_loss.dro_beta", CT_FLOAT, O(actor_rollout_ref.actor.policy_loss.dro_beta), "null", 1e-30, 1e30, 1, NULL, "dro: quadratic penalty beta (required for dro)"},
    {AR "actor.tau_pos", CT_FLOAT, O(actor_rollout_ref.actor.tau_pos), "1.0", 1e-12, 1e6, 0, NULL, "sapo: gate temperature for positive advantages"},
    {AR "actor.tau_neg", CT_FLOAT, O(actor_rollout_ref.actor.tau_neg), "1.05", 1e-12, 1e6, 0, NULL, "sapo: gate temperature for negative advantages"},
    {AR "actor.activation_checkpoint", CT_STR, O(actor_rollout_ref.actor.activation_checkpoint), "selective", 1, 0, 0, "none|selective|full", "activation checkpointing"},

    {AR "ref.log_prob_micro_batch_size_per_gpu", CT_INT, O(actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu), "null", 1, 1e9, 1, NULL, "sequences per ref log-prob micro-batch"},
    {AR "ref.log_prob_max_token_len_per_gpu", CT_INT, O(actor_rollout_ref.ref.log_prob_max_token_len_per_gpu), "16384", 1, 1e12, 0, NULL, "token budget per ref log-prob micro-batch"},
    {AR "ref.log_prob_use_dynamic_bsz", CT_BOOL, O(actor_rollout_ref.ref.log_prob_use_dynamic_bsz), "false", 1, 0, 0, NULL, "ref log-prob micro-batches by token budget"},

    {AR "rollout.n", CT_INT, O(actor_rollout_ref.rollout.n), "1", 1, 65536, 0, NULL, "samples per prompt (> 1 for GRPO)"},
    {AR "rollout.temperature", CT_FLOAT, O(actor_rollout_ref.rollout.temperature), "1.0", 0, 1e6, 0, NULL, "sampling temperature (also divides logits in log-probs)"},
    {AR "rollout.top_p", CT_FLOAT, O(actor_rollout_ref.rollout.top_p), "1.0", 1e-9, 1, 0, NULL, "nucleus sampling"},
    {AR "rollout.top_k", CT_INT, O(actor_rollout_ref.rollout.top_k), "-1", -1, 1e9, 0, NULL, "top-k sampling (-1 or 0: off)"},
    {AR "rollout.do_sample", CT_BOOL, O(actor_rollout_ref.rollout.do_sample), "true", 1, 0, 0, NULL, "sample (false: greedy)"},
    {AR "rollout.calculate_log_probs", CT_BOOL, O(actor_rollout_ref.rollout.calculate_log_probs), "true", 1, 0, 0, NULL, "return rollout log-probs (rollout-vs-actor metrics)"},
    {AR "rollout.log_prob_micro_batch_size_per_gpu", CT_INT, O(actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu), "null", 1, 1e9, 1, NULL, "sequences per old-log-prob micro-batch"},
    {AR "rollout.log_prob_max_token_len_per_gpu", CT_INT, O(actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu), "16384", 1, 1e12, 0, NULL, "token budget per old-log-prob micro-batch"},
    {AR "rollout.log_prob_use_dynamic_bsz", CT_BOOL, O(actor_rollout_ref.rollout.log_prob_use_dynamic_bsz), "false", 1, 0, 0, NULL, "old-log-prob micro-batches by token budget"},
    {AR "rollout.kv_cache_bytes", CT_INT, O(actor_rollout_ref.rollout.kv_cache_bytes), "2147483648", 1048576, 1.2e18, 0, NULL, "KV-cache byte budget of the rollout engine (rlc)"},
    {AR "rollout.kv_cache_dtype", CT_STR, O(actor_rollout_ref.rollout.kv_cache_dtype), "fp32", 1, 0, 0, "fp32|bf16", "KV-cache element type (rlc): bf16 halves the bytes, rollout log-probs drift"},
    {AR "rollout.max_num_seqs", CT_INT, O(actor_rollout_ref.rollout.max_num_seqs), "256", 1, 1e9, 0, NULL, "sequences decoded concurrently (rlc)"},
    {AR "rollout.seed", CT_INT, O(actor_rollout_ref.rollout.seed), "0", 0, BIG, 0, NULL, "sampling seed (rlc)"},
    {AR "rollout.val_kwargs.n", CT_INT, O(actor_rollout_ref.rollout.val_kwargs.n), "1", 1, 65536, 0, NULL, "validation samples per prompt"},
    {AR "rollout.val_kwargs.temperature", CT_FLOAT, O(actor_rollout_ref.rollout.val_kwargs.temperature), "0", 0, 1e6, 0, NULL, "validation temperature"},
    {AR "rollout.val_kwargs.top_p", CT_FLOAT, O(actor_rollout_ref.rollout.val_kwargs.top_p), "1.0", 1e-9, 1, 0, NULL, "validation top_p"},
    {AR "rollout.val_kwargs.top_k", CT_INT, O(actor_rollout_ref.rollout.val_kwargs.top_k), "-1", -1, 1e9, 0, NULL, "validation top_k"},
    {AR "rollout.val_kwargs.do_sample", CT_BOOL, O(actor_rollout_ref.rollout.val_kwargs.do_sample), "false", 1, 0, 0, NULL, "validation sampling (false: greedy)"},
    {AR "rollout.multi_turn.enable", CT_BOOL, O(actor_rollout_ref.rollout.multi_turn.enable), "false", 1, 0, 0, NULL, "multi-turn tool rollouts (accepted; each row's agent_name or agent.default_agent_loop picks the loop)"},
    {AR "rollout.multi_turn.max_assistant_turns", CT_INT, O(actor_rollout_ref.rollout.multi_turn.max_assistant_turns), "null", 1, 1e9, 1, NULL, "end a trajectory after this many assistant turns (null: no limit)"},
    {AR "rollout.multi_turn.max_user_turns", CT_INT, O(actor_rollout_ref.rollout.multi_turn.max_user_turns), "null", 1, 1e9, 1, NULL, "end a trajectory after this many tool/user rounds (null: no limit)"},
    {AR "rollout.multi_turn.max_parallel_calls", CT_INT, O(actor_rollout_ref.rollout.multi_turn.max_parallel_calls), "1", 1, 1e6, 0, NULL, "tool calls executed per assistant turn (later ones are ignored)"},
    {AR "rollout.multi_turn.max_tool_response_length", CT_INT, O(actor_rollout_ref.rollout.multi_turn.max_tool_response_length), "256", 1, 1e9, 0, NULL, "code points of a tool's text before truncation"},
    {AR "rollout.multi_turn.tool_response_truncate_side", CT_STR, O(actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side), "middle", 1, 0, 0, "left|right|middle", "what a truncated tool text keeps: left = the tail, right = the head, middle = both ends"},
    {AR "rollout.multi_turn.format", CT_STR, O(actor_rollout_ref.rollout.multi_turn.format), "hermes", 1, 0, 0, "hermes", "tool-call format (<tool_call>{json}</tool_call>)"},
    {AR "rollout.multi_turn.tool_config_path", CT_STR, O(actor_rollout_ref.rollout.multi_turn.tool_config_path), "null", 1, 0, 1, NULL, "verl's tool classes: not used (tools come from the environment process)"},
    {AR "rollout.multi_turn.function_tool_path", CT_STR, O(actor_rollout_ref.rollout.multi_turn.function_tool_path), "null", 1, 0, 1, NULL, "verl's function tools: not used (tools come from the environment process)"},
    {AR "rollout.multi_turn.interaction_config_path", CT_STR, O(actor_rollout_ref.rollout.multi_turn.interaction_config_path), "null", 1, 0, 1, NULL, "verl's interactions: not used (an environment with observe: all answers turns without calls)"},
    {AR "rollout.multi_turn.env_command", CT_STR, O(actor_rollout_ref.rollout.multi_turn.env_command), "null", 1, 0, 1, NULL, "shell command of the environment process (docs/env-protocol.md); required by tool_agent rows"},
    {AR "rollout.multi_turn.env_timeout_s", CT_FLOAT, O(actor_rollout_ref.rollout.multi_turn.env_timeout_s), "120", 1e-3, 1e9, 0, NULL, "seconds without any reply from the environment before a fatal error"},
    {AR "rollout.multi_turn.env_max_inflight", CT_INT, O(actor_rollout_ref.rollout.multi_turn.env_max_inflight), "0", 0, 1e9, 0, NULL, "requests outstanding at the environment at most (0: no cap; the env's hello may lower it)"},
    {AR "rollout.agent.num_workers", CT_INT, O(actor_rollout_ref.rollout.agent.num_workers), "8", 1, 1e9, 0, NULL, "verl's agent worker count (ignored: one process runs every trajectory)"},
    {AR "rollout.agent.default_agent_loop", CT_STR, O(actor_rollout_ref.rollout.agent.default_agent_loop), "single_turn_agent", 1, 0, 0, "single_turn_agent|tool_agent", "the loop of rows without an agent_name"},
    {AR "rollout.agent.agent_loop_config_path", CT_STR, O(actor_rollout_ref.rollout.agent.agent_loop_config_path), "null", 1, 0, 1, NULL, "verl's extra agent loops: not supported"},

    {"algorithm.adv_estimator", CT_STR, O(algorithm.adv_estimator), "grpo", 1, 0, 0, "gae|grpo|rloo|reinforce_plus_plus|reinforce_plus_plus_baseline|grpo_vectorized|rloo_vectorized|opo|gpg", "advantage estimator (gae: PPO with a critic)"},
    {"algorithm.gamma", CT_FLOAT, O(algorithm.gamma), "1.0", 0, 1, 0, NULL, "discount (gae, reinforce_plus_plus)"},
    {"algorithm.lam", CT_FLOAT, O(algorithm.lam), "1.0", 0, 1, 0, NULL, "GAE lambda"},
    {"algorithm.norm_adv_by_std_in_grpo", CT_BOOL, O(algorithm.norm_adv_by_std_in_grpo), "true", 1, 0, 0, NULL, "divide GRPO advantages by the group std (false: Dr.GRPO)"},
    {"algorithm.use_kl_in_reward", CT_BOOL, O(algorithm.use_kl_in_reward), "false", 1, 0, 0, NULL, "subtract beta*KL(old, ref) from token rewards"},
    {"algorithm.kl_penalty", CT_STR, O(algorithm.kl_penalty), "kl", 1, 0, 0, k_kl_choices, "KL estimator of the in-reward penalty"},
    {"algorithm.kl_ctrl.type", CT_STR, O(algorithm.kl_ctrl.type), "fixed", 1, 0, 0, "fixed|adaptive", "in-reward KL controller"},
    {"algorithm.kl_ctrl.kl_coef", CT_FLOAT, O(algorithm.kl_ctrl.kl_coef), "0.001", 0, 1e6, 0, NULL, "initial beta"},
    {"algorithm.kl_ctrl.horizon", CT_INT, O(algorithm.kl_ctrl.horizon), "10000", 1, 1e12, 0, NULL, "adaptive controller horizon"},
    {"algorithm.kl_ctrl.target_kl", CT_FLOAT, O(algorithm.kl_ctrl.target_kl), "0.1", 1e-30, 1e6, 0, NULL, "adaptive controller target"},
    {"algorithm.filter_groups.enable", CT_BOOL, O(algorithm.filter_groups.enable), "false", 1, 0, 0, NULL, "DAPO dynamic sampling: drop groups whose metric is equal across the group"},
    {"algorithm.filter_groups.metric", CT_STR, O(algorithm.filter_groups.metric), "null", 1, 0, 1, NULL, "filter metric: acc | score | seq_reward | seq_final_reward | a reward key"},
    {"algorithm.filter_groups.max_num_gen_batches", CT_INT, O(algorithm.filter_groups.max_num_gen_batches), "0", 0, 1e12, 0, NULL, "generated batches per step before giving up (0: unlimited)"},
    {"algorithm.rollout_correction.rollout_is", CT_STR, O(algorithm.rollout_correction.rollout_is), "null", 1, 0, 1, "token|sequence", "rollout IS weights per token or sequence (null: none)"},
    {"algorithm.rollout_correction.rollout_is_threshold", CT_STR, O(algorithm.rollout_correction.rollout_is_threshold), "2.0", 1, 0, 0, NULL, "IS weight cap (TIS), or 'lower_upper': weights outside are 0 (IcePop)"},
    {"algorithm.rollout_correction.rollout_is_batch_normalize", CT_BOOL, O(algorithm.rollout_correction.rollout_is_batch_normalize), "false", 1, 0, 0, NULL, "divide the IS weights by their mean"},
    {"algorithm.rollout_correction.rollout_rs", CT_STR, O(algorithm.rollout_correction.rollout_rs), "null", 1, 0, 1, NULL, "rejection: comma-separated token_k1|k2|k3, seq_sum_k*, seq_mean_k*, seq_max_k2|k3 (null: none)"},
    {"algorithm.rollout_correction.rollout_rs_threshold", CT_STR, O(algorithm.rollout_correction.rollout_rs_threshold), "null", 1, 0, 1, NULL, "rejection thresholds: one shared or one per option; k1: 'lower_upper' ratio band"},
    {"algorithm.rollout_correction.bypass_mode", CT_BOOL, O(algorithm.rollout_correction.bypass_mode), "false", 1, 0, 0, NULL, "old log-probs := the rollout's (no old_log_prob pass); the actor loss becomes bypass_mode"},
    {"algorithm.rollout_correction.loss_type", CT_STR, O(algorithm.rollout_correction.loss_type), "ppo_clip", 1, 0, 0, "ppo_clip|reinforce", "bypass_mode: the loss on rollout log-probs"},

    {"trainer.total_epochs", CT_INT, O(trainer.total_epochs), "30", 1, 1e9, 0, NULL, "epochs over the training data"},
    {"trainer.total_training_steps", CT_INT, O(trainer.total_training_steps), "null", 1, 1e12, 1, NULL, "steps (null: len(train)//train_batch_size*total_epochs)"},
    {"trainer.test_freq", CT_INT, O(trainer.test_freq), "-1", -1, 1e12, 0, NULL, "validate every N steps (-1: never)"},
    {"trainer.save_freq", CT_INT, O(trainer.save_freq), "-1", -1, 1e12, 0, NULL, "checkpoint every N steps (-1: never)"},
    {"trainer.val_before_train", CT_BOOL, O(trainer.val_before_train), "true", 1, 0, 0, NULL, "validate before the first step"},
    {"trainer.val_only", CT_BOOL, O(trainer.val_only), "false", 1, 0, 0, NULL, "validate and exit"},
    {"trainer.resume_mode", CT_STR, O(trainer.resume_mode), "auto", 1, 0, 0, "auto|disable|resume_path", "resume from the latest checkpoint"},
    {"trainer.resume_from_path", CT_STR, O(trainer.resume_from_path), "null", 1, 0, 1, NULL, "checkpoint dir for resume_mode=resume_path"},
    {"trainer.default_local_dir", CT_STR, O(trainer.default_local_dir), "null", 1, 0, 1, NULL, "run directory (null: checkpoints/<project>/<experiment>)"},
    {"trainer.max_actor_ckpt_to_keep", CT_INT, O(trainer.max_actor_ckpt_to_keep), "null", 1, 1e9, 1, NULL, "keep the newest N checkpoints (null: all)"},
    {"trainer.max_critic_ckpt_to_keep", CT_INT, O(trainer.max_critic_ckpt_to_keep), "null", 1, 1e9, 1, NULL, "kept with the actor's: global_step_N holds both (null: max_actor_ckpt_to_keep)"},
    {"trainer.logger", CT_STRLIST, O(trainer.logger), "[console]", 1, 0, 0, "console|file|tensorboard", "loggers (metrics JSONL is always written; tensorboard: event files in $TENSORBOARD_DIR or tensorboard_log/<project_name>/<experiment_name>)"},
    {"trainer.project_name", CT_STR, O(trainer.project_name), "verl_examples", 1, 0, 0, NULL, "project name"},
    {"trainer.experiment_name", CT_STR, O(trainer.experiment_name), "gsm8k", 1, 0, 0, NULL, "experiment name"},
    {"trainer.n_gpus_per_node", CT_INT, O(trainer.n_gpus_per_node), "1", 1, 1e6, 0, NULL, "devices per node (perf/throughput divisor)"},
    {"trainer.nnodes", CT_INT, O(trainer.nnodes), "1", 1, 1e6, 0, NULL, "nodes"},
    {"trainer.n_threads", CT_INT, O(trainer.n_threads), "0", 0, 65536, 0, NULL, "CPU threads (0: all cores) (rlc)"},
    {"trainer.balance_batch", CT_BOOL, O(trainer.balance_batch), "true", 1, 0, 0, NULL, "balance sequence lengths across DP ranks"},
    {"trainer.critic_warmup", CT_INT, O(trainer.critic_warmup), "0", 0, 1e12, 0, NULL, "steps before the actor is updated"},
    {"trainer.log_val_generations", CT_INT, O(trainer.log_val_generations), "0", 0, 1e9, 0, NULL, "validation samples to print"},

    {"critic.enable", CT_BOOL, O(critic.enable), "null", 1, 0, 1, NULL, "train a value model (null: iff algorithm.adv_estimator=gae)"},
    {"critic.model.path", CT_STR, O(critic.model.path), "null", 1, 0, 1, NULL, "HF checkpoint of the value model's backbone (null: the actor's)"},
    {"critic.model.use_remove_padding", CT_BOOL, O(critic.model.use_remove_padding), "true", 1, 0, 0, NULL, "sequence packing (always on in rlc)"},
    {"critic.model.enable_gradient_checkpointing", CT_BOOL, O(critic.model.enable_gradient_checkpointing), "true", 1, 0, 0, NULL, "recompute activations in backward (rlc: critic.activation_checkpoint)"},
    {"critic.optim.lr", CT_FLOAT, O(critic.optim.lr), "1e-5", 0, 1, 0, NULL, "critic AdamW learning rate"},
    {"critic.optim.weight_decay", CT_FLOAT, O(critic.optim.weight_decay), "0.01", 0, 10, 0, NULL, "critic AdamW decoupled weight decay"},
    {"critic.optim.betas", CT_FLOAT2, O(critic.optim.betas), "[0.9, 0.999]", 0, 0.999999999, 0, NULL, "critic AdamW betas [b1, b2]"},
    {"critic.optim.eps", CT_FLOAT, O(critic.optim.eps), "1e-8", 1e-30, 1, 0, NULL, "critic AdamW epsilon"},
    {"critic.optim.clip_grad", CT_FLOAT, O(critic.optim.clip_grad), "1.0", 0, 1e30, 0, NULL, "critic global grad-norm clip (value head included)"},
    {"critic.optim.lr_warmup_steps", CT_INT, O(critic.optim.lr_warmup_steps), "-1", -1, 1e9, 0, NULL, "critic warmup steps (<= 0: from lr_warmup_steps_ratio)"},
    {"critic.optim.lr_warmup_steps_ratio", CT_FLOAT, O(critic.optim.lr_warmup_steps_ratio), "0.0", 0, 1, 0, NULL, "critic warmup as a fraction of total_training_steps"},
    {"critic.optim.lr_scheduler_type", CT_STR, O(critic.optim.lr_scheduler_type), "constant", 1, 0, 0, "constant|cosine", "critic LR schedule after warmup"},
    {"critic.optim.min_lr_ratio", CT_FLOAT, O(critic.optim.min_lr_ratio), "0.0", 0, 1, 0, NULL, "critic cosine floor as a fraction of lr"},
    {"critic.ppo_mini_batch_size", CT_INT, O(critic.ppo_mini_batch_size), "null", 1, 1e9, 1, NULL, "prompts per critic optimizer step (null: the actor's)"},
    {"critic.ppo_micro_batch_size_per_gpu", CT_INT, O(critic.ppo_micro_batch_size_per_gpu), "null", 1, 1e9, 1, NULL, "sequences per critic micro-batch (required unless use_dynamic_bsz)"},
    {"critic.forward_micro_batch_size_per_gpu", CT_INT, O(critic.forward_micro_batch_size_per_gpu), "null", 1, 1e9, 1, NULL, "sequences per values micro-batch (null: ppo_micro_batch_size_per_gpu)"},
    {"critic.use_dynamic_bsz", CT_BOOL, O(critic.use_dynamic_bsz), "null", 1, 0, 1, NULL, "critic micro-batches by token budget (null: the actor's)"},
    {"critic.ppo_max_token_len_per_gpu", CT_INT, O(critic.ppo_max_token_len_per_gpu), "32768", 1, 1e12, 0, NULL, "token budget per critic micro-batch"},
    {"critic.forward_max_token_len_per_gpu", CT_INT, O(critic.forward_max_token_len_per_gpu), "null", 1, 1e12, 1, NULL, "token budget per values micro-batch (null: ppo_max_token_len_per_gpu)"},
    {"critic.ppo_epochs", CT_INT, O(critic.ppo_epochs), "null", 1, 1e6, 1, NULL, "critic passes over each step's batch (null: the actor's)"},
    {"critic.shuffle", CT_BOOL, O(critic.shuffle), "null", 1, 0, 1, NULL, "shuffle sequences into critic mini-batches (null: the actor's)"},
    {"critic.data_loader_seed", CT_INT, O(critic.data_loader_seed), "42", 0, 4294967295.0, 0, NULL, "critic mini-batch shuffle seed"},
    {"critic.cliprange_value", CT_FLOAT, O(critic.cliprange_value), "0.5", 0, 1e30, 0, NULL, "value clip range around the pre-update values"},
    {"critic.loss_agg_mode", CT_STR, O(critic.loss_agg_mode), "null", 1, 0, 1, k_agg_choices, "value loss aggregation (null: the actor's)"},
    {"critic.loss_scale_factor", CT_FLOAT, O(critic.loss_scale_factor), "null", 1e-30, 1e30, 1, NULL, "seq-mean-token-sum-norm divisor (null: the actor's)"},
    {"critic.grad_clip", CT_FLOAT, O(critic.grad_clip), "1.0", 0, 1e30, 0, NULL, "verl's FSDP critic field; its engine clips with optim.clip_grad, and so does rlc"},
    {"critic.activation_checkpoint", CT_STR, O(critic.activation_checkpoint), "null", 1, 0, 1, "none|selective|full", "critic activation checkpointing (null: the actor's)"},

    {"custom_reward_function.path", CT_STR, O(custom_reward_function.path), "null", 1, 0, 1, NULL, "Python file with a verl-style reward function"},
    {"custom_reward_function.name", CT_STR, O(custom_reward_function.name), "compute_score", 1, 0, 0, NULL, "function in custom_reward_function.path"},
    {"custom_reward_function.python", CT_STR, O(custom_reward_function.python), "python3", 1, 0, 0, NULL, "interpreter that runs custom_reward_function.path (rlc)"},
    {"custom_reward_function.command", CT_STR, O(custom_reward_function.command), "null", 1, 0, 1, NULL, "external reward process speaking JSONL on stdin/stdout (rlc)"},
    {"custom_reward_function.timeout_s", CT_FLOAT, O(custom_reward_function.timeout_s), "60", 0.001, 1e9, 0, NULL, "seconds to wait for each reward reply (rlc)"},

    {"reward_model.overlong_buffer.enable", CT_BOOL, O(reward_model.overlong_buffer.enable), "false", 1, 0, 0, NULL, "DAPO overlong reward shaping"},
    {"reward_model.overlong_buffer.len", CT_INT, O(reward_model.overlong_buffer.len), "0", 0, 1048576, 0, NULL, "tokens before max_response_length where the penalty starts"},
    {"reward_model.overlong_buffer.penalty_factor", CT_FLOAT, O(reward_model.overlong_buffer.penalty_factor), "0.0", 0, 1e6, 0, NULL, "penalty reached at max_response_length"},
    {"reward_model.overlong_buffer.log", CT_BOOL, O(reward_model.overlong_buffer.log), "false", 1, 0, 0, NULL, "report overlong_reward / overlong with the reward metrics"},
};
#define N_SCHEMA ((int)(sizeof k_schema / sizeof k_schema[0]))

// ---------------------------------------------------------------------------------------------------
// Nearest key.
static int edit_distance(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    int *row = rlc_malloc((nb + 1) * sizeof(int));
    for (size_t j = 0; j <= nb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    int d = row[nb];
    free(row);
    return d;
}

const char *rlc_config_suggest(const char *key) {
    size_t kn = strlen(key);
    // A bare suffix ("rollout.n", "lr") of exactly one key.
    const char *suffix_hit = NULL;
    int suffix_count = 0;
    for (int i = 0; i < N_SCHEMA; i++) {
        size_t n = strlen(k_schema[i].key);
        if (n > kn && k_schema[i].key[n - kn - 1] == '.' && strcmp(k_schema[i].key + n - kn, key) == 0) {
            suffix_hit = k_schema[i].key;
            suffix_count++;
        }
    }
    if (suffix_count == 1) return suffix_hit;
    int best = 1 << 30;
    const char *bk = NULL;
    for (int i = 0; i < N_SCHEMA; i++) {
        int d = edit_distance(key, k_schema[i].key);
        if (d < best) { best = d; bk = k_schema[i].key; }
    }
    // Also compare the last component within the same section.
    const char *dot = strrchr(key, '.');
    if (dot) {
        size_t sec = (size_t)(dot - key) + 1;
        for (int i = 0; i < N_SCHEMA; i++) {
            const char *k = k_schema[i].key;
            if (strncmp(k, key, sec) != 0 || strchr(k + sec, '.')) continue;
            int d = edit_distance(dot + 1, k + sec);
            if (d < best) { best = d; bk = k; }
        }
    }
    int limit = (int)(kn / 3) + 2;
    return best <= limit ? bk : suffix_hit;
}

// ---------------------------------------------------------------------------------------------------
// Setting values.
typedef struct {
    const char *where;   // "file.yaml:12" or "override 'k=v'"
} ctx_t;

static const cfg_entry *find_key(const char *key) {
    for (int i = 0; i < N_SCHEMA; i++)
        if (strcmp(k_schema[i].key, key) == 0) return &k_schema[i];
    return NULL;
}
static int is_section(const char *prefix) {   // some key starts with "prefix."
    size_t n = strlen(prefix);
    for (int i = 0; i < N_SCHEMA; i++)
        if (strncmp(k_schema[i].key, prefix, n) == 0 && k_schema[i].key[n] == '.') return 1;
    return 0;
}

RLC_NORETURN static void die_unknown(const char *where, const char *key) {
    const char *s = rlc_config_suggest(key);
    if (s) rlc_die("%s: unknown config key '%s' (did you mean '%s'?)", where, key, s);
    rlc_die("%s: unknown config key '%s' (no close match among the config keys)", where, key);
}

static int is_null_text(const char *v, int quoted) {
    return !quoted && (v[0] == 0 || !strcmp(v, "null") || !strcmp(v, "~") || !strcmp(v, "Null") || !strcmp(v, "NULL"));
}

static int parse_bool(const char *v, int *out) {
    if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE")) { *out = 1; return 0; }
    if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "FALSE")) { *out = 0; return 0; }
    return -1;
}
static int parse_int(const char *v, int64_t *out) {
    char buf[64];
    size_t k = 0;
    for (const char *p = v; *p; p++) {
        if (*p == '_') continue;
        if (k + 1 >= sizeof buf) return -1;
        buf[k++] = *p;
    }
    buf[k] = 0;
    if (!k) return -1;
    char *end;
    errno = 0;
    long long x = strtoll(buf, &end, 10);
    if (errno || *end) {
        // integral floats such as 1e6 or 2.0
        double d = strtod(buf, &end);
        if (*end || !isfinite(d) || d != floor(d) || fabs(d) > 9.2e18) return -1;
        x = (long long)d;
    }
    *out = x;
    return 0;
}
static int parse_float(const char *v, double *out) {
    char *end;
    errno = 0;
    if (!*v) return -1;
    double d = strtod(v, &end);
    if (*end || errno == ERANGE || !isfinite(d)) return -1;
    *out = d;
    return 0;
}

static const char *type_name(ctype t) {
    switch (t) {
    case CT_BOOL: return "a boolean (true/false)";
    case CT_INT: return "an integer";
    case CT_FLOAT: return "a number";
    case CT_STR: return "a string";
    case CT_STRLIST: return "a string or a list of strings";
    case CT_FLOAT2: return "a list of two numbers";
    case CT_STRORLIST: return "a string or a list of strings";
    }
    return "?";
}

static int in_choices(const char *choices, const char *v) {
    size_t n = strlen(v);
    for (const char *p = choices; *p;) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static void check_range(const ctx_t *cx, const cfg_entry *e, double x, const char *text) {
    if (e->lo <= e->hi && (x < e->lo || x > e->hi))
        rlc_die("%s: %s = %s is out of range [%.10g, %.10g]", cx->where, e->key, text, e->lo, e->hi);
}

static void strlist_free(rlc_strlist *l) {
    for (int64_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
    l->scalar = 0;
}

// A scalar view of a YAML node for setting.
typedef struct {
    const char *text;   // scalar text
    int quoted;
} scal;

static void set_scalar(rlc_train_config *c, const cfg_entry *e, const ctx_t *cx, scal s) {
    char *base = (char *)c + e->off;
    if (strstr(s.text, "${"))
        rlc_die("%s: %s: interpolation '%s' is not supported; write the value", cx->where, e->key, s.text);
    int isnull = is_null_text(s.text, s.quoted);
    if (isnull && e->type != CT_STRLIST && e->type != CT_STRORLIST) {
        if (!e->nullable) rlc_die("%s: %s must not be null; expected %s", cx->where, e->key, type_name(e->type));
        switch (e->type) {
        case CT_INT: *(int64_t *)base = RLC_CFG_NULL; return;
        case CT_FLOAT: *(double *)base = NAN; return;
        case CT_STR: free(*(char **)base); *(char **)base = NULL; return;
        case CT_BOOL: *(int *)base = RLC_CFG_NULL_BOOL; return;
        default: rlc_die("%s: %s must not be null", cx->where, e->key);
        }
    }
    switch (e->type) {
    case CT_BOOL: {
        int b;
        if (s.quoted || parse_bool(s.text, &b) != 0)
            rlc_die("%s: %s: expected %s, got '%s'", cx->where, e->key, type_name(e->type), s.text);
        *(int *)base = b;
        return;
    }
    case CT_INT: {
        int64_t x;
        if (s.quoted || parse_int(s.text, &x) != 0)
            rlc_die("%s: %s: expected %s, got '%s'", cx->where, e->key, type_name(e->type), s.text);
        check_range(cx, e, (double)x, s.text);
        *(int64_t *)base = x;
        return;
    }
    case CT_FLOAT: {
        double x;
        if (s.quoted || parse_float(s.text, &x) != 0)
            rlc_die("%s: %s: expected %s, got '%s'", cx->where, e->key, type_name(e->type), s.text);
        check_range(cx, e, x, s.text);
        *(double *)base = x;
        return;
    }
    case CT_STR:
        if (e->choices && !in_choices(e->choices, s.text))
            rlc_die("%s: %s: '%s' is not one of %s", cx->where, e->key, s.text, e->choices);
        free(*(char **)base);
        *(char **)base = rlc_strdup(s.text);
        return;
    case CT_STRLIST:
    case CT_STRORLIST: {
        rlc_strlist *l = (rlc_strlist *)base;
        strlist_free(l);
        if (isnull) return;
        l->scalar = e->type == CT_STRORLIST;
        if (e->choices && !in_choices(e->choices, s.text))
            rlc_die("%s: %s: '%s' is not one of %s", cx->where, e->key, s.text, e->choices);
        l->v = rlc_malloc(sizeof(char *));
        l->v[0] = rlc_strdup(s.text);
        l->n = 1;
        return;
    }
    case CT_FLOAT2:
        rlc_die("%s: %s: expected %s, got '%s'", cx->where, e->key, type_name(e->type), s.text);
    }
}

// Location string for a node.
static void where_of(char *buf, size_t n, const char *name, const yaml_node_t *node) {
    snprintf(buf, n, "%s:%lu", name, (unsigned long)node->start_mark.line + 1);
}

static void set_node(rlc_train_config *c, const cfg_entry *e, const char *name, yaml_document_t *doc,
                     yaml_node_t *node) {
    char where[1200];
    where_of(where, sizeof where, name, node);
    ctx_t cx = {where};
    if (node->type == YAML_SCALAR_NODE) {
        scal s = {(const char *)node->data.scalar.value, node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE};
        set_scalar(c, e, &cx, s);
        return;
    }
    if (node->type == YAML_MAPPING_NODE)
        rlc_die("%s: %s: expected %s, got a mapping", where, e->key, type_name(e->type));
    // sequence
    yaml_node_item_t *it = node->data.sequence.items.start, *end = node->data.sequence.items.top;
    int64_t n = end - it;
    for (yaml_node_item_t *p = it; p < end; p++) {
        yaml_node_t *x = yaml_document_get_node(doc, *p);
        if (x->type != YAML_SCALAR_NODE)
            rlc_die("%s: %s: expected %s, got a nested structure", where, e->key, type_name(e->type));
    }
    char *base = (char *)c + e->off;
    if (e->type == CT_STRLIST || e->type == CT_STRORLIST) {
        rlc_strlist *l = (rlc_strlist *)base;
        strlist_free(l);
        l->v = rlc_malloc((size_t)(n ? n : 1) * sizeof(char *));
        for (int64_t i = 0; i < n; i++) {
            yaml_node_t *x = yaml_document_get_node(doc, it[i]);
            const char *v = (const char *)x->data.scalar.value;
            if (e->choices && !in_choices(e->choices, v))
                rlc_die("%s: %s: '%s' is not one of %s", where, e->key, v, e->choices);
            l->v[i] = rlc_strdup(v);
        }
        l->n = n;
        return;
    }
    if (e->type == CT_FLOAT2) {
        if (n != 2) rlc_die("%s: %s: expected a list of two numbers, got %lld items", where, e->key, (long long)n);
        double *d = (double *)base;
        for (int i = 0; i < 2; i++) {
            yaml_node_t *x = yaml_document_get_node(doc, it[i]);
            const char *v = (const char *)x->data.scalar.value;
            if (parse_float(v, &d[i]) != 0) rlc_die("%s: %s[%d]: expected a number, got '%s'", where, e->key, i, v);
            check_range(&cx, e, d[i], v);
        }
        return;
    }
    rlc_die("%s: %s: expected %s, got a list", where, e->key, type_name(e->type));
}

static void walk_mapping(rlc_train_config *c, const char *name, yaml_document_t *doc, yaml_node_t *map,
                         const char *prefix) {
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key), *v = yaml_document_get_node(doc, p->value);
        char where[1200];
        where_of(where, sizeof where, name, k);
        if (k->type != YAML_SCALAR_NODE) rlc_die("%s: a config key must be a plain string", where);
        const char *ks = (const char *)k->data.scalar.value;
        size_t need = strlen(prefix) + strlen(ks) + 2;
        char *full = rlc_malloc(need);
        snprintf(full, need, "%s%s%s", prefix, *prefix ? "." : "", ks);
        const cfg_entry *e = find_key(full);
        if (e) set_node(c, e, name, doc, v);
        else if (is_section(full)) {
            if (v->type == YAML_MAPPING_NODE) walk_mapping(c, name, doc, v, full);
            else if (!(v->type == YAML_SCALAR_NODE && is_null_text((const char *)v->data.scalar.value, 0)))
                rlc_die("%s: '%s' is a section; expected a mapping of its keys", where, full);
        } else die_unknown(where, full);
        free(full);
    }
}

// The reader layer's strictness, checked on the event stream before the document is built: one document,
// nesting at most YAML_MAX_DEPTH deep (libyaml's loader is quadratic in the depth), and no NUL byte.
#define YAML_MAX_DEPTH 64
static void yaml_prescan(const char *text, size_t len, const char *name) {
    const char *nul = memchr(text, 0, len);
    if (nul) {
        size_t line = 1;
        for (const char *q = text; q < nul; q++) line += *q == '\n';
        rlc_die("%s:%zu: NUL byte in the YAML text (byte %zu)", name, line, (size_t)(nul - text));
    }
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) rlc_die("%s: cannot initialise the YAML parser", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int depth = 0, docs = 0, done = 0;
    while (!done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) break;   // the loader below reports the syntax error
        const yaml_mark_t m = ev.start_mark;
        switch (ev.type) {
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1)
                rlc_die("%s:%lu: a second YAML document ('---'); a config is one document", name, (unsigned long)m.line + 1);
            break;
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
            if (++depth > YAML_MAX_DEPTH)
                rlc_die("%s:%lu:%lu: YAML nesting deeper than %d levels", name, (unsigned long)m.line + 1,
                        (unsigned long)m.column + 1, YAML_MAX_DEPTH);
            break;
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT: depth--; break;
        case YAML_STREAM_END_EVENT: done = 1; break;
        default: break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
}

static void load_doc(yaml_document_t *doc, const char *text, size_t len, const char *name) {
    yaml_prescan(text, len, name);
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) rlc_die("%s: cannot initialise the YAML parser", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, doc)) {
        const yaml_mark_t *m = parser.problem ? &parser.problem_mark : &parser.context_mark;
        rlc_die("%s:%lu:%lu: YAML syntax error: %s%s%s", name, (unsigned long)m->line + 1, (unsigned long)m->column + 1,
                parser.problem ? parser.problem : "malformed document", parser.context ? " " : "",
                parser.context ? parser.context : "");
    }
    yaml_parser_delete(&parser);
}

static void load_yaml_len(rlc_train_config *c, const char *text, size_t len, const char *name) {
    yaml_document_t doc;
    load_doc(&doc, text, len, name);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root) {
        if (root->type == YAML_MAPPING_NODE) walk_mapping(c, name, &doc, root, "");
        else if (!(root->type == YAML_SCALAR_NODE && is_null_text((const char *)root->data.scalar.value, 0)))
            rlc_die("%s:%lu: the config must be a mapping of keys", name, (unsigned long)root->start_mark.line + 1);
    }
    yaml_document_delete(&doc);
}

void rlc_config_load_yaml_text(rlc_train_config *c, const char *text, const char *name) {
    load_yaml_len(c, text, strlen(text), name);
}

void rlc_config_load_yaml(rlc_train_config *c, const char *path) {
    size_t len;
    char *text = rlc_read_file(path, &len);
    load_yaml_len(c, text, len, path);
    free(text);
}

// Set one key from YAML value text; `where` names the source.
static void set_from_text(rlc_train_config *c, const cfg_entry *e, const char *value, const char *where) {
    yaml_document_t doc;
    load_doc(&doc, value, strlen(value), where);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        ctx_t cx = {where};
        set_scalar(c, e, &cx, (scal){"", 0});
    } else {
        // errors name the override, not a line
        if (root->type == YAML_SCALAR_NODE) {
            ctx_t cx = {where};
            set_scalar(c, e, &cx, (scal){(const char *)root->data.scalar.value,
                                         root->data.scalar.style != YAML_PLAIN_SCALAR_STYLE});
        } else {
            // reuse set_node with a name that reads well: "<where>:1"
            set_node(c, e, where, &doc, root);
        }
    }
    yaml_document_delete(&doc);
}

void rlc_config_override(rlc_train_config *c, const char *kv) {
    while (*kv == '+') kv++;   // Hydra's "+key=v" / "++key=v" spellings mean the same here
    const char *eq = strchr(kv, '=');
    size_t wn = strlen(kv) + 32;
    char *where = rlc_malloc(wn);
    snprintf(where, wn, "override '%s'", kv);
    if (!eq || eq == kv) rlc_die("%s: expected key=value", where);
    char *key = rlc_malloc((size_t)(eq - kv) + 1);
    memcpy(key, kv, (size_t)(eq - kv));
    key[eq - kv] = 0;
    const cfg_entry *e = find_key(key);
    if (!e) {
        if (is_section(key)) rlc_die("%s: '%s' is a section; override one of its keys", where, key);
        die_unknown(where, key);
    }
    set_from_text(c, e, eq + 1, where);
    free(key);
    free(where);
}

void rlc_config_init(rlc_train_config *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < N_SCHEMA; i++) {
        char where[256];
        snprintf(where, sizeof where, "default of %s", k_schema[i].key);
        set_from_text(c, &k_schema[i], k_schema[i].def, where);
    }
}

void rlc_config_free(rlc_train_config *c) {
    for (int i = 0; i < N_SCHEMA; i++) {
        char *base = (char *)c + k_schema[i].off;
        if (k_schema[i].type == CT_STR) { free(*(char **)base); *(char **)base = NULL; }
        if (k_schema[i].type == CT_STRLIST || k_schema[i].type == CT_STRORLIST) strlist_free((rlc_strlist *)base);
    }
}

// The LoRA keys as a lora_config (model/lora.h); 0 when lora_rank is 0 (full fine-tuning). Dies naming the key.
int rlc_config_lora(const rlc_train_config *c, lora_config *out) {
    const __typeof__(c->actor_rollout_ref.model) *m = &c->actor_rollout_ref.model;
    lora_config_default(out);
    if (m->lora_rank == 0) return 0;
    out->rank = (int)m->lora_rank;
    out->alpha = (float)m->lora_alpha;
    out->use_rslora = m->use_rslora;
    if (!(m->lora_alpha > 0) || !isfinite(out->alpha))
        rlc_die("config: " AR "model.lora_alpha = %g: expected a number > 0", m->lora_alpha);
    const rlc_strlist *lists[2] = {&m->target_modules, &m->exclude_modules};
    lora_match *dst[2] = {&out->target, &out->exclude};
    const char *keys[2] = {AR "model.target_modules", AR "model.exclude_modules"};
    char err[256];
    for (int k = 0; k < 2; k++) {
        const rlc_strlist *l = lists[k];
        if (l->n == 0) continue;
        int rc = 0;
        if (l->scalar && l->n == 1) rc = lora_match_string(dst[k], l->v[0], err, sizeof err);
        else {
            memset(dst[k], 0, sizeof *dst[k]);
            dst[k]->set = 1;
            if (l->n > LORA_MAX_NAMES) rlc_die("config: %s: more than %d module names", keys[k], LORA_MAX_NAMES);
            for (int64_t i = 0; i < l->n; i++) {
                if (!l->v[i][0] || strlen(l->v[i]) >= sizeof dst[k]->names[0])
                    rlc_die("config: %s: entry %lld: expected a module name of 1..%zu characters", keys[k], (long long)i,
                            sizeof dst[k]->names[0] - 1);
                snprintf(dst[k]->names[dst[k]->n_names++], sizeof dst[k]->names[0], "%s", l->v[i]);
            }
        }
        if (rc != 0) rlc_die("config: %s: %s", keys[k], err);
    }
    return 1;
}

void rlc_config_finalize(rlc_train_config *c) {
    __typeof__(c->actor_rollout_ref.actor) *a = &c->actor_rollout_ref.actor;
    lora_config lc;
    // validates the LoRA keys now (the model's module names are checked when the adapters are built)
    rlc_config_lora(c, &lc);
    const char *bd = c->actor_rollout_ref.model.base_dtype;
    if (bd && strcmp(bd, "bf16") != 0 && strcmp(bd, "fp32") != 0)
        rlc_die("config: " AR "model.base_dtype = '%s': expected bf16 or fp32", bd);
    if (isnan(a->clip_ratio_low)) a->clip_ratio_low = a->clip_ratio;
    if (isnan(a->clip_ratio_high)) a->clip_ratio_high = a->clip_ratio;
    if (!c->trainer.default_local_dir) {
        size_t n = strlen(c->trainer.project_name) + strlen(c->trainer.experiment_name) + 16;
        c->trainer.default_local_dir = rlc_malloc(n);
        snprintf(c->trainer.default_local_dir, n, "checkpoints/%s/%s", c->trainer.project_name, c->trainer.experiment_name);
    }
    int64_t tb = c->data.train_batch_size, mb = a->ppo_mini_batch_size, n = c->actor_rollout_ref.rollout.n;
    if (mb > tb)
        rlc_die("config: actor_rollout_ref.actor.ppo_mini_batch_size (%lld) must be <= data.train_batch_size (%lld)",
                (long long)mb, (long long)tb);
    if (tb % mb != 0)
        rlc_die("config: data.train_batch_size (%lld) must be divisible by actor_rollout_ref.actor.ppo_mini_batch_size (%lld)",
                (long long)tb, (long long)mb);
    if (!a->use_dynamic_bsz) {
        if (a->ppo_micro_batch_size_per_gpu == RLC_CFG_NULL)
            rlc_die("config: actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu must be set unless "
                    "actor_rollout_ref.actor.use_dynamic_bsz=true");
        if ((mb * n) % a->ppo_micro_batch_size_per_gpu != 0)
            rlc_die("config: ppo_mini_batch_size * rollout.n (%lld) must be divisible by "
                    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (%lld)",
                    (long long)(mb * n), (long long)a->ppo_micro_batch_size_per_gpu);
    } else {
        int64_t L = c->data.max_prompt_length + c->data.max_response_length;
        if (a->ppo_max_token_len_per_gpu < L)
            rlc_die("config: actor_rollout_ref.actor.ppo_max_token_len_per_gpu (%lld) must be >= "
                    "data.max_prompt_length + data.max_response_length (%lld)",
                    (long long)a->ppo_max_token_len_per_gpu, (long long)L);
    }
    {   // critic.* (verl-ppo.md §1.7): nulls take the actor's values; gae needs the critic
        __typeof__(c->critic) *k = &c->critic;
        if (!strcmp(c->algorithm.adv_estimator, "gae") && k->enable == 0)
            rlc_die("config: algorithm.adv_estimator=gae needs a value model, but critic.enable=false: set critic.enable=true "
                    "or choose an estimator without a critic (grpo, rloo, ...)");
        if (k->ppo_mini_batch_size == RLC_CFG_NULL) k->ppo_mini_batch_size = a->ppo_mini_batch_size;
        if (k->use_dynamic_bsz == RLC_CFG_NULL_BOOL) k->use_dynamic_bsz = a->use_dynamic_bsz;
        if (k->shuffle == RLC_CFG_NULL_BOOL) k->shuffle = a->shuffle;
        if (k->ppo_epochs == RLC_CFG_NULL) k->ppo_epochs = a->ppo_epochs;
        if (k->forward_micro_batch_size_per_gpu == RLC_CFG_NULL) k->forward_micro_batch_size_per_gpu = k->ppo_micro_batch_size_per_gpu;
        if (k->forward_max_token_len_per_gpu == RLC_CFG_NULL) k->forward_max_token_len_per_gpu = k->ppo_max_token_len_per_gpu;
        if (!k->loss_agg_mode) k->loss_agg_mode = rlc_strdup(a->loss_agg_mode);
        if (isnan(k->loss_scale_factor)) k->loss_scale_factor = a->loss_scale_factor;
        if (!k->activation_checkpoint) k->activation_checkpoint = rlc_strdup(a->activation_checkpoint);
        if (c->trainer.max_critic_ckpt_to_keep == RLC_CFG_NULL) c->trainer.max_critic_ckpt_to_keep = c->trainer.max_actor_ckpt_to_keep;
        if (rlc_config_use_critic(c)) {
            int64_t cmb = k->ppo_mini_batch_size;
            if (cmb > tb || tb % cmb != 0)
                rlc_die("config: data.train_batch_size (%lld) must be a multiple of critic.ppo_mini_batch_size (%lld)", (long long)tb,
                        (long long)cmb);
            if (!k->use_dynamic_bsz) {
                if (k->ppo_micro_batch_size_per_gpu == RLC_CFG_NULL)
                    rlc_die("config: critic.ppo_micro_batch_size_per_gpu must be set unless critic.use_dynamic_bsz=true");
                if ((cmb * n) % k->ppo_micro_batch_size_per_gpu != 0)
                    rlc_die("config: critic.ppo_mini_batch_size * rollout.n (%lld) must be divisible by "
                            "critic.ppo_micro_batch_size_per_gpu (%lld)", (long long)(cmb * n), (long long)k->ppo_micro_batch_size_per_gpu);
            } else {
                int64_t L = c->data.max_prompt_length + c->data.max_response_length;
                if (k->ppo_max_token_len_per_gpu < L || k->forward_max_token_len_per_gpu < L)
                    rlc_die("config: critic.ppo_max_token_len_per_gpu (%lld) and forward_max_token_len_per_gpu (%lld) must be >= "
                            "data.max_prompt_length + data.max_response_length (%lld)", (long long)k->ppo_max_token_len_per_gpu,
                            (long long)k->forward_max_token_len_per_gpu, (long long)L);
            }
        }
    }
    if (c->custom_reward_function.command && c->custom_reward_function.path)
        rlc_die("config: set custom_reward_function.command or custom_reward_function.path, not both");
    if (!strcmp(c->trainer.resume_mode, "resume_path") && !c->trainer.resume_from_path)
        rlc_die("config: trainer.resume_mode=resume_path needs trainer.resume_from_path");
    if (a->use_kl_loss && c->algorithm.use_kl_in_reward)
        rlc_warn("NOTICE: both actor_rollout_ref.actor.use_kl_loss and algorithm.use_kl_in_reward are enabled");
    if (!strcmp(c->algorithm.adv_estimator, "grpo") && n == 1)
        rlc_warn("algorithm.adv_estimator=grpo with actor_rollout_ref.rollout.n=1: every group is a singleton");
    const __typeof__(c->actor_rollout_ref.rollout.multi_turn) *mt = &c->actor_rollout_ref.rollout.multi_turn;
    if (mt->tool_config_path)
        rlc_die("config: actor_rollout_ref.rollout.multi_turn.tool_config_path is set, but tools come from the environment "
                "process in rlc: set multi_turn.env_command (docs/env-protocol.md)");
    if (mt->function_tool_path)
        rlc_die("config: actor_rollout_ref.rollout.multi_turn.function_tool_path is set, but tools come from the environment "
                "process in rlc: set multi_turn.env_command (docs/env-protocol.md)");
    if (mt->interaction_config_path)
        rlc_die("config: actor_rollout_ref.rollout.multi_turn.interaction_config_path is set, but rlc has no interactions: an "
                "environment with \"observe\": \"all\" answers turns without calls (docs/env-protocol.md)");
    if (c->actor_rollout_ref.rollout.agent.agent_loop_config_path)
        rlc_die("config: actor_rollout_ref.rollout.agent.agent_loop_config_path is set, but rlc has only single_turn_agent and "
                "tool_agent");
    if (!strcmp(c->actor_rollout_ref.rollout.agent.default_agent_loop, "tool_agent") && !mt->env_command)
        rlc_die("config: actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent needs "
                "actor_rollout_ref.rollout.multi_turn.env_command");
    if (c->actor_rollout_ref.rollout.val_kwargs.n > 1 && !c->actor_rollout_ref.rollout.val_kwargs.do_sample)
        rlc_warn("rollout.val_kwargs.n > 1 with do_sample=false repeats the same greedy answer");
    // policy loss parameters and DAPO (one line naming the key each)
    rl_loss_cfg loss;
    rlc_config_loss_cfg(c, &loss);
    rl_loss_cfg_check(&loss);
    if ((c->algorithm.rollout_correction.bypass_mode || rl_rollout_corr_active(&loss.rc)) &&
        !c->actor_rollout_ref.rollout.calculate_log_probs)
        rlc_die("config: algorithm.rollout_correction (%s) needs the rollout's log-probs: set "
                "actor_rollout_ref.rollout.calculate_log_probs=true",
                c->algorithm.rollout_correction.bypass_mode ? "bypass_mode" : "rollout_is / rollout_rs");
    if (c->algorithm.filter_groups.enable && !c->algorithm.filter_groups.metric)
        rlc_die("config: algorithm.filter_groups.metric must be set when algorithm.filter_groups.enable=true "
                "(acc, score, seq_reward, seq_final_reward or a reward key)");
    const __typeof__(c->reward_model.overlong_buffer) *ob = &c->reward_model.overlong_buffer;
    if (ob->enable && !(ob->len > 0 && ob->len <= c->data.max_response_length))
        rlc_die("config: reward_model.overlong_buffer.len: must be in [1, data.max_response_length=%lld] when "
                "enabled, got %lld", (long long)c->data.max_response_length, (long long)ob->len);
}

void rlc_config_from_args(rlc_train_config *c, const char *yaml_path, int n_overrides, char **overrides) {
    rlc_config_init(c);
    if (yaml_path) rlc_config_load_yaml(c, yaml_path);
    for (int i = 0; i < n_overrides; i++) rlc_config_override(c, overrides[i]);
    rlc_config_finalize(c);
}

// ---------------------------------------------------------------------------------------------------
// Printing.
static void put_float(rlc_strbuf *b, double x) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.15g", x);
    if (strtod(buf, NULL) != x) snprintf(buf, sizeof buf, "%.17g", x);
    // Make it read back as a float in YAML 1.1 readers too (PyYAML wants a dot in 1e-06 -> 1.0e-06).
    if (!strchr(buf, '.') && !strchr(buf, 'n') && !strchr(buf, 'i')) {
        char *e = strchr(buf, 'e');
        if (e) {
            char tail[32];
            snprintf(tail, sizeof tail, "%s", e);
            snprintf(e, sizeof buf - (size_t)(e - buf), ".0%s", tail);
        } else strcat(buf, ".0");
    }
    rlc_sb_puts(b, buf);
}
static void put_str(rlc_strbuf *b, const char *s) { rlc_sb_json_str(b, s, strlen(s)); }

static void put_value(rlc_strbuf *b, const rlc_train_config *c, const cfg_entry *e) {
    const char *base = (const char *)c + e->off;
    switch (e->type) {
    case CT_BOOL: rlc_sb_puts(b, *(const int *)base == RLC_CFG_NULL_BOOL ? "null" : *(const int *)base ? "true" : "false"); break;
    case CT_INT: {
        int64_t x = *(const int64_t *)base;
        if (x == RLC_CFG_NULL) rlc_sb_puts(b, "null");
        else rlc_sb_printf(b, "%lld", (long long)x);
        break;
    }
    case CT_FLOAT: {
        double x = *(const double *)base;
        if (isnan(x)) rlc_sb_puts(b, "null");
        else put_float(b, x);
        break;
    }
    case CT_STR: {
        const char *s = *(char *const *)base;
        if (!s) rlc_sb_puts(b, "null");
        else put_str(b, s);
        break;
    }
    case CT_STRLIST:
    case CT_STRORLIST: {
        const rlc_strlist *l = (const rlc_strlist *)base;
        if (l->scalar && l->n == 1) {
            put_str(b, l->v[0]);
            break;
        }
        rlc_sb_putc(b, '[');
        for (int64_t i = 0; i < l->n; i++) {
            if (i) rlc_sb_puts(b, ", ");
            put_str(b, l->v[i]);
        }
        rlc_sb_putc(b, ']');
        break;
    }
    case CT_FLOAT2: {
        const double *d = (const double *)base;
        rlc_sb_putc(b, '[');
        put_float(b, d[0]);
        rlc_sb_puts(b, ", ");
        put_float(b, d[1]);
        rlc_sb_putc(b, ']');
        break;
    }
    }
}

char *rlc_config_to_yaml(const rlc_train_config *c) {
    rlc_strbuf b = {0};
    rlc_sb_puts(&b, "# rlc resolved config (verl key names)\n");
    const char *prev = "";
    for (int i = 0; i < N_SCHEMA; i++) {
        const char *k = k_schema[i].key;
        // common prefix of whole components with the previous key
        size_t common = 0;
        for (size_t j = 0; prev[j] && k[j] && prev[j] == k[j]; j++)
            if (k[j] == '.') common = j + 1;
        int depth = 0;
        for (size_t j = 0; j < common; j++) depth += k[j] == '.';
        const char *p = k + common;
        for (;;) {
            const char *dot = strchr(p, '.');
            for (int d = 0; d < depth; d++) rlc_sb_puts(&b, "  ");
            if (!dot) {
                rlc_sb_printf(&b, "%s: ", p);
                put_value(&b, c, &k_schema[i]);
                rlc_sb_putc(&b, '\n');
                break;
            }
            rlc_sb_append(&b, p, (size_t)(dot - p));
            rlc_sb_puts(&b, ":\n");
            depth++;
            p = dot + 1;
        }
        prev = k;
    }
    return rlc_sb_take(&b);
}

void rlc_config_save(const rlc_train_config *c, const char *path) {
    char *y = rlc_config_to_yaml(c);
    if (rlc_write_file_atomic(path, y, strlen(y)) != 0) rlc_die("%s: cannot write the config: %s", path, strerror(errno));
    free(y);
}

void rlc_config_print_schema(FILE *f) {
    static const char *const tn[] = {"bool", "int", "float", "str", "list[str]", "[float, float]", "str or list[str]"};
    _Static_assert(sizeof tn / sizeof *tn == CT_STRORLIST + 1, "one name per ctype");
    for (int i = 0; i < N_SCHEMA; i++) {
        const cfg_entry *e = &k_schema[i];
        fprintf(f, "%-62s %-10s default %s", e->key, tn[e->type], e->def);
        if (e->choices) fprintf(f, "  {%s}", e->choices);
        else if (e->lo <= e->hi && (e->type == CT_INT || e->type == CT_FLOAT || e->type == CT_FLOAT2))
            fprintf(f, "  [%.10g, %.10g]", e->lo, e->hi);
        fprintf(f, "  %s\n", e->doc);
    }
}

// ---------------------------------------------------------------------------------------------------
// Typed views.
static rl_kl_type kl_of(const char *s, const char *key) {
    rl_kl_type t;
    if (rl_kl_type_parse(s, &t) != 0) rlc_die("config: %s: unknown KL type '%s'", key, s);
    return t;
}

void rlc_config_loss_cfg(const rlc_train_config *c, rl_loss_cfg *out) {
    const __typeof__(c->actor_rollout_ref.actor) *a = &c->actor_rollout_ref.actor;
    memset(out, 0, sizeof *out);
    out->clip.clip_ratio_low = isnan(a->clip_ratio_low) ? a->clip_ratio : a->clip_ratio_low;
    out->clip.clip_ratio_high = isnan(a->clip_ratio_high) ? a->clip_ratio : a->clip_ratio_high;
    out->clip.clip_ratio_c = a->clip_ratio_c;
    if (rl_agg_mode_parse(a->loss_agg_mode, &out->agg) != 0)
        rlc_die("config: actor_rollout_ref.actor.loss_agg_mode: unknown mode '%s'", a->loss_agg_mode);
    out->entropy_coeff = a->entropy_coeff;
    out->use_kl_loss = a->use_kl_loss;
    out->kl_loss_coef = a->kl_loss_coef;
    out->kl_loss_type = kl_of(a->kl_loss_type, "actor_rollout_ref.actor.kl_loss_type");
    out->mode = rl_pg_mode_from_name(a->policy_loss.loss_mode, "actor_rollout_ref.actor.policy_loss.loss_mode");
    out->tau_pos = a->tau_pos;
    out->tau_neg = a->tau_neg;
    out->clip_cov_ratio = a->policy_loss.clip_cov_ratio;
    out->clip_cov_lb = a->policy_loss.clip_cov_lb;
    out->clip_cov_ub = a->policy_loss.clip_cov_ub;
    out->kl_cov_ratio = a->policy_loss.kl_cov_ratio;
    out->ppo_kl_coef = a->policy_loss.ppo_kl_coef;
    out->dro_beta = a->policy_loss.dro_beta;
    out->seed = (uint64_t)a->data_loader_seed;
    const __typeof__(c->algorithm.rollout_correction) *rc = &c->algorithm.rollout_correction;
    rl_rollout_corr_parse(&out->rc, rc->rollout_is, rc->rollout_is_threshold, rc->rollout_rs, rc->rollout_rs_threshold,
                          rc->rollout_is_batch_normalize);
    if (rc->bypass_mode) out->mode = RL_PG_BYPASS_MODE;   // apply_bypass_mode: the loss on the rollout's log-probs
    out->rc_loss_type = !strcmp(c->algorithm.rollout_correction.loss_type, "reinforce") ? RL_RC_REINFORCE : RL_RC_PPO_CLIP;
}

void rlc_config_dapo(const rlc_train_config *c, dapo_accumulator *acc, dapo_overlong_cfg *overlong,
                     int64_t *gen_batch_size) {
    const __typeof__(c->algorithm.filter_groups) *f = &c->algorithm.filter_groups;
    if (acc)
        dapo_accumulator_init(acc, f->enable, f->metric, c->data.train_batch_size, c->actor_rollout_ref.rollout.n,
                              f->max_num_gen_batches);
    if (overlong) {
        const __typeof__(c->reward_model.overlong_buffer) *ob = &c->reward_model.overlong_buffer;
        *overlong = (dapo_overlong_cfg){ob->enable, ob->len, ob->penalty_factor, c->data.max_response_length, ob->log};
    }
    if (gen_batch_size)
        *gen_batch_size = c->data.gen_batch_size == RLC_CFG_NULL ? c->data.train_batch_size : c->data.gen_batch_size;
}

void rlc_config_adv_cfg(const rlc_train_config *c, rl_adv_cfg *out) {
    memset(out, 0, sizeof *out);
    if (rl_adv_estimator_parse(c->algorithm.adv_estimator, &out->estimator) != 0)
        rlc_die("config: algorithm.adv_estimator: '%s' is not supported", c->algorithm.adv_estimator);
    out->norm_adv_by_std_in_grpo = c->algorithm.norm_adv_by_std_in_grpo;
    out->gamma = c->algorithm.gamma;
    out->epsilon = 1e-6;
}

int rlc_config_use_critic(const rlc_train_config *c) {
    return c->critic.enable == RLC_CFG_NULL_BOOL ? !strcmp(c->algorithm.adv_estimator, "gae") : c->critic.enable;
}

const char *rlc_config_lr_scheduler(const rlc_train_config *c, double *floor_out) {
    const __typeof__(c->actor_rollout_ref.actor.optim) *o = &c->actor_rollout_ref.actor.optim;
    if (!strcmp(c->model_engine, "torchtitan")) {
        if (floor_out) *floor_out = o->min_lr_factor;
        if (!strcmp(o->decay_type, "linear")) return "linear";
        if (!strcmp(o->decay_type, "sqrt")) return "sqrt";
        return "wsd-cosine";
    }
    if (floor_out) *floor_out = o->min_lr_ratio;
    return o->lr_scheduler_type;
}

char *rlc_config_reward_command(const rlc_train_config *c) {
    if (c->custom_reward_function.command) return rlc_strdup(c->custom_reward_function.command);
    if (c->custom_reward_function.path) {
        if (!rlc_file_exists(c->custom_reward_function.path))
            rlc_die("config: custom_reward_function.path: %s: no such file", c->custom_reward_function.path);
        return rlc_reward_python_command(c->custom_reward_function.python, c->custom_reward_function.path,
                                         c->custom_reward_function.name);
    }
    return NULL;
}

rl_kl_type rlc_config_kl_penalty(const rlc_train_config *c) { return kl_of(c->algorithm.kl_penalty, "algorithm.kl_penalty"); }

void rlc_config_kl_ctrl(const rlc_train_config *c, rl_kl_ctrl *out) {
    rl_kl_ctrl_init(out, c->algorithm.kl_ctrl.type, c->algorithm.kl_ctrl.kl_coef, c->algorithm.kl_ctrl.target_kl,
                    (double)c->algorithm.kl_ctrl.horizon);
}
