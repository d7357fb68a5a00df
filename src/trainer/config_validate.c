// config_validate.c: the checks of a loaded trainer configuration as a whole, after every key is set: the batch
// sizes against each other, the critic's keys (nulls take the actor's values), the LoRA keys, the reward, agent
// and multi-turn settings and the policy loss, each failure one line naming the keys; derived defaults (the clip
// ratios, the checkpoint folder) are filled in here too.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "trainer/config_internal.h"

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
