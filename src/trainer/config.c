// config.c: schema-driven YAML config with dotted overrides (see config.h): loading a config from its sources,
// and the typed views the trainer reads (the policy loss, DAPO, advantages, KL, LR schedule, LoRA, reward).
// The key table is in config_keys.c, setting values in config_parse.c, the checks in config_validate.c and the
// YAML output in config_write.c.
#include "trainer/config.h"

#include <math.h>
#include <string.h>

#include "core/common.h"
#include "reward/reward.h"
#include "trainer/config_internal.h"

void rlc_config_from_args(rlc_train_config *c, const char *yaml_path, int n_overrides, char **overrides) {
    rlc_config_init(c);
    if (yaml_path) rlc_config_load_yaml(c, yaml_path);
    for (int i = 0; i < n_overrides; i++) rlc_config_override(c, overrides[i]);
    rlc_config_finalize(c);
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
