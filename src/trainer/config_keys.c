// config_keys.c: the trainer configuration's key table: every verl key rlc reads, with its type, place in
// rlc_train_config, default, range, choices and description. Parsing, validation, printing and saving are all
// driven by it. Also here: looking a key up, the nearest key for a misspelt one, and the printed table.
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "trainer/config_internal.h"

#define O(f) offsetof(rlc_train_config, f)
#define BIG 9.2e18
static const char k_agg_choices[] = "token-mean|token-sum|seq-mean-token-sum|seq-mean-token-mean|seq-mean-token-sum-norm";
static const char k_kl_choices[] = "kl|k1|abs|mse|k2|low_var_kl|k3|kl+|k1+|abs+|mse+|k2+|low_var_kl+|k3+";

const cfg_entry cfg_keys[] = {
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
const int cfg_n_keys = (int)(sizeof cfg_keys / sizeof cfg_keys[0]);

const cfg_entry *cfg_find_key(const char *key) {
    for (int i = 0; i < cfg_n_keys; i++)
        if (strcmp(cfg_keys[i].key, key) == 0) return &cfg_keys[i];
    return NULL;
}
int cfg_is_section(const char *prefix) {   // some key starts with "prefix."
    size_t n = strlen(prefix);
    for (int i = 0; i < cfg_n_keys; i++)
        if (strncmp(cfg_keys[i].key, prefix, n) == 0 && cfg_keys[i].key[n] == '.') return 1;
    return 0;
}

RLC_NORETURN void cfg_die_unknown(const char *where, const char *key) {
    const char *s = rlc_config_suggest(key);
    if (s) rlc_die("%s: unknown config key '%s' (did you mean '%s'?)", where, key, s);
    rlc_die("%s: unknown config key '%s' (no close match among the config keys)", where, key);
}

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
    for (int i = 0; i < cfg_n_keys; i++) {
        size_t n = strlen(cfg_keys[i].key);
        if (n > kn && cfg_keys[i].key[n - kn - 1] == '.' && strcmp(cfg_keys[i].key + n - kn, key) == 0) {
            suffix_hit = cfg_keys[i].key;
            suffix_count++;
        }
    }
    if (suffix_count == 1) return suffix_hit;
    int best = 1 << 30;
    const char *bk = NULL;
    for (int i = 0; i < cfg_n_keys; i++) {
        int d = edit_distance(key, cfg_keys[i].key);
        if (d < best) { best = d; bk = cfg_keys[i].key; }
    }
    // Also compare the last component within the same section.
    const char *dot = strrchr(key, '.');
    if (dot) {
        size_t sec = (size_t)(dot - key) + 1;
        for (int i = 0; i < cfg_n_keys; i++) {
            const char *k = cfg_keys[i].key;
            if (strncmp(k, key, sec) != 0 || strchr(k + sec, '.')) continue;
            int d = edit_distance(dot + 1, k + sec);
            if (d < best) { best = d; bk = k; }
        }
    }
    int limit = (int)(kn / 3) + 2;
    return best <= limit ? bk : suffix_hit;
}

void rlc_config_print_schema(FILE *f) {
    static const char *const tn[] = {"bool", "int", "float", "str", "list[str]", "[float, float]", "str or list[str]"};
    _Static_assert(sizeof tn / sizeof *tn == CT_STRORLIST + 1, "one name per ctype");
    for (int i = 0; i < cfg_n_keys; i++) {
        const cfg_entry *e = &cfg_keys[i];
        fprintf(f, "%-62s %-10s default %s", e->key, tn[e->type], e->def);
        if (e->choices) fprintf(f, "  {%s}", e->choices);
        else if (e->lo <= e->hi && (e->type == CT_INT || e->type == CT_FLOAT || e->type == CT_FLOAT2))
            fprintf(f, "  [%.10g, %.10g]", e->lo, e->hi);
        fprintf(f, "  %s\n", e->doc);
    }
}
