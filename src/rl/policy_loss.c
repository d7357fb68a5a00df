// policy_loss.c: the policy-loss registry, its parameter checks, the vanilla per-token math and verl's
// per-micro-batch actor loss (see policy_loss.h). The loss bodies are in pg_losses.c.
#include "rl/policy_loss.h"

#include <math.h>
#include <string.h>

#include "core/common.h"
#include "rl/pg_losses.h"

#define PL "actor_rollout_ref.actor.policy_loss."
#define CLIP_KEYS "actor.clip_ratio_low, actor.clip_ratio_high"

const rl_pg_loss_def rl_pg_losses[RL_PG_N_MODES] = {
    [RL_PG_VANILLA] = {"vanilla", rl_pg_vanilla, -1, 0, RL_PGM_ALL, CLIP_KEYS ", actor.clip_ratio_c"},
    [RL_PG_GSPO] = {"gspo", rl_pg_gspo, RL_AGG_SEQ_MEAN_TOKEN_MEAN, 0, RL_PGM_ALL, CLIP_KEYS},
    [RL_PG_SAPO] = {"sapo", rl_pg_sapo, RL_AGG_SEQ_MEAN_TOKEN_MEAN, 0, RL_PGM_ALL, "actor.tau_pos, actor.tau_neg"},
    [RL_PG_GPG] = {"gpg", rl_pg_gpg, -1, 0, 0, "(none)"},
    [RL_PG_CLIP_COV] = {"clip_cov", rl_pg_clip_cov, -1, 0, RL_PGM_CLIPFRAC | RL_PGM_PPO_KL,
                        CLIP_KEYS ", policy_loss.clip_cov_ratio, policy_loss.clip_cov_lb, policy_loss.clip_cov_ub"},
    [RL_PG_KL_COV] = {"kl_cov", rl_pg_kl_cov, -1, 0, RL_PGM_PPO_KL, "policy_loss.kl_cov_ratio, policy_loss.ppo_kl_coef"},
    [RL_PG_GEO_MEAN] = {"geo_mean", rl_pg_geo_mean, -1, 1, RL_PGM_ALL, CLIP_KEYS " (bounds on the log ratio)"},
    [RL_PG_DRO] = {"dro", rl_pg_dro, -1, 0, RL_PGM_PPO_KL, "policy_loss.dro_beta"},
    [RL_PG_CISPO] = {"cispo", rl_pg_cispo, -1, 0, RL_PGM_ALL, CLIP_KEYS},
    [RL_PG_DPPO_TV] = {"dppo_tv", rl_pg_dppo_tv, -1, 0, RL_PGM_ALL, CLIP_KEYS " (divergence bounds), actor.clip_ratio_c (IS cap)"},
    [RL_PG_DPPO_KL] = {"dppo_kl", rl_pg_dppo_kl, -1, 0, RL_PGM_ALL, CLIP_KEYS " (divergence bounds), actor.clip_ratio_c (IS cap)"},
    [RL_PG_BYPASS_MODE] = {"bypass_mode", rl_pg_bypass_mode, -1, 0, RL_PGM_ALL,
                           "algorithm.rollout_correction.{loss_type, rollout_is, rollout_is_threshold}"},
};

int rl_pg_mode_parse(const char *name, rl_pg_mode *out) {
    for (int i = 0; i < RL_PG_N_MODES; i++)
        if (name && !strcmp(name, rl_pg_losses[i].name)) { *out = (rl_pg_mode)i; return 0; }
    return -1;
}

const char *rl_pg_mode_names(void) {
    static const char names[] =
        "vanilla|gspo|sapo|gpg|clip_cov|kl_cov|geo_mean|dro|cispo|dppo_tv|dppo_kl|bypass_mode";
    return names;
}

rl_pg_mode rl_pg_mode_from_name(const char *name, const char *key) {
    rl_pg_mode m;
    if (rl_pg_mode_parse(name, &m) != 0)
        rlc_die("config: %s: unknown policy loss '%s' (registered: %s)", key, name ? name : "(null)",
                rl_pg_mode_names());
    return m;
}

void rl_loss_cfg_defaults(rl_loss_cfg *c) {
    memset(c, 0, sizeof *c);
    c->clip = (rl_clip){0.2, 0.2, 3.0};
    c->agg = RL_AGG_TOKEN_MEAN;
    c->kl_loss_coef = 0.001;
    c->kl_loss_type = (rl_kl_type){RL_KL_K3, 0};
    c->mode = RL_PG_VANILLA;
    c->tau_pos = 1.0;
    c->tau_neg = 1.05;
    c->clip_cov_ratio = 2e-4;
    c->clip_cov_lb = 1.0;
    c->clip_cov_ub = 5.0;
    c->kl_cov_ratio = 2e-4;
    c->ppo_kl_coef = 0.1;
    c->dro_beta = NAN;
    c->seed = 0;
    memset(&c->rc, 0, sizeof c->rc);
    c->rc.is_upper = 2.0;
    c->rc_loss_type = RL_RC_PPO_CLIP;
}

static void check_clip(const rl_clip *cfg) {
    if (!(cfg->clip_ratio_c > 1.0))
        rlc_die("actor.clip_ratio_c: the dual-clip constant must be > 1.0, got %g", cfg->clip_ratio_c);
}

void rl_loss_cfg_check(const rl_loss_cfg *c) {
    const char *name = (c->mode >= 0 && c->mode < RL_PG_N_MODES) ? rl_pg_losses[c->mode].name : NULL;
    CHECK(name != NULL, "bad policy loss mode %d", (int)c->mode);
    if (!(c->clip.clip_ratio_low >= 0) || !(c->clip.clip_ratio_high >= 0))
        rlc_die("config: actor_rollout_ref.actor.clip_ratio_low/high: must be >= 0, got %g / %g",
                c->clip.clip_ratio_low, c->clip.clip_ratio_high);
    switch (c->mode) {
    case RL_PG_VANILLA: check_clip(&c->clip); break;
    case RL_PG_SAPO:
        if (!(c->tau_pos > 0)) rlc_die("config: actor_rollout_ref.actor.tau_pos: sapo needs > 0, got %g", c->tau_pos);
        if (!(c->tau_neg > 0)) rlc_die("config: actor_rollout_ref.actor.tau_neg: sapo needs > 0, got %g", c->tau_neg);
        break;
    case RL_PG_CLIP_COV:
        if (!(c->clip_cov_ratio > 0 && c->clip_cov_ratio <= 1))
            rlc_die("config: " PL "clip_cov_ratio: clip_cov needs a fraction in (0, 1], got %g", c->clip_cov_ratio);
        if (!(c->clip_cov_lb < c->clip_cov_ub))
            rlc_die("config: " PL "clip_cov_lb (%g) must be < " PL "clip_cov_ub (%g)", c->clip_cov_lb, c->clip_cov_ub);
        break;
    case RL_PG_KL_COV:
        if (!(c->kl_cov_ratio > 0 && c->kl_cov_ratio <= 1))
            rlc_die("config: " PL "kl_cov_ratio: kl_cov needs a fraction in (0, 1], got %g", c->kl_cov_ratio);
        if (!(c->ppo_kl_coef >= 0))
            rlc_die("config: " PL "ppo_kl_coef: kl_cov needs >= 0, got %g", c->ppo_kl_coef);
        break;
    case RL_PG_DRO:
        if (isnan(c->dro_beta)) rlc_die("config: " PL "dro_beta: dro needs a value > 0 (it is null)");
        if (!(c->dro_beta > 0)) rlc_die("config: " PL "dro_beta: dro needs a value > 0, got %g", c->dro_beta);
        break;
    case RL_PG_DPPO_TV:
    case RL_PG_DPPO_KL:
        if (!(c->clip.clip_ratio_c > 0))
            rlc_die("config: actor_rollout_ref.actor.clip_ratio_c: %s needs an IS cap > 0, got %g", name,
                    c->clip.clip_ratio_c);
        break;
    case RL_PG_BYPASS_MODE:
        if (c->rc_loss_type == RL_RC_PPO_CLIP) check_clip(&c->clip);
        if (c->rc.is != RL_RC_IS_NONE && !(c->rc.is_upper > 0))
            rlc_die("config: algorithm.rollout_correction.rollout_is_threshold: must be > 0, got %g", c->rc.is_upper);
        break;
    default: break;
    }
}

double rl_policy_loss_vanilla(float *dlp, rl_pg_metrics *met, const float *lp, const float *old, const float *adv,
                              const float *mask, const float *is_w, int64_t B, int64_t T, const rl_clip *cfg,
                              rl_agg_mode mode, const rl_batch_info *gbi) {
    rl_loss_cfg c;
    rl_loss_cfg_defaults(&c);
    c.clip = *cfg;
    c.agg = mode;
    rl_pg_in in = {lp, old, adv, mask, is_w, B, T, NULL};
    rl_pg_metrics m;
    double loss = rl_pg_vanilla(dlp, &m, &in, &c, mode, gbi);
    if (met) *met = m;
    return loss;
}

double rl_policy_loss(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg,
                      const rl_batch_info *gbi) {
    rl_loss_cfg_check(cfg);
    const rl_pg_loss_def *def = &rl_pg_losses[cfg->mode];
    rl_agg_mode mode = def->forced_agg >= 0 ? (rl_agg_mode)def->forced_agg : cfg->agg;
    rl_pg_metrics m;
    memset(&m, 0, sizeof m);
    double loss = def->fn(dlp, &m, in, cfg, mode, gbi);
    if (met) *met = m;
    return loss;
}

void rl_ppo_loss(rl_loss_out *out, float *dlp, float *dent, const float *lp, const float *old, const float *ref,
                 const float *adv, const float *entropy, const float *mask, const float *is_w, int64_t B, int64_t T,
                 const rl_loss_cfg *cfg, const rl_batch_info *gbi) {
    memset(out, 0, sizeof *out);
    if (cfg->use_kl_loss) CHECK(ref != NULL, "use_kl_loss needs the reference log-probs");
    rl_pg_in in = {lp, old, adv, mask, is_w, B, T, NULL};
    out->pg_loss = rl_policy_loss(dlp, &out->pg, &in, cfg, gbi);
    if (entropy || cfg->use_kl_loss) {
        // entropy and KL terms: actor.loss_agg_mode for every loss mode (verl's ppo_loss)
        double *rs = rlc_malloc((size_t)(B ? B : 1) * sizeof(double));
        rl_agg_row_scales(rs, mask, B, T, cfg->agg, gbi);
        const float fent = (float)(-cfg->entropy_coeff), fkl = (float)cfg->kl_loss_coef;
        double e = 0, k = 0;
        for (int64_t b = 0; b < B; b++) {
            double row_e = 0, row_k = 0;
            for (int64_t t = 0; t < T; t++) {
                int64_t i = b * T + t;
                float m = mask[i];
                if (m == 0) continue;
                float w = (float)(m * rs[b]);
                if (entropy) {
                    row_e += (double)w * entropy[i];
                    if (dent) dent[i] += fent * w;
                }
                if (cfg->use_kl_loss) {
                    float kv, kg;
                    rl_kl_penalty(&kv, &kg, lp + i, ref + i, 1, cfg->kl_loss_type);
                    row_k += (double)w * kv;
                    if (dlp) dlp[i] += fkl * w * kg;
                }
            }
            e += row_e;
            k += row_k;
        }
        free(rs);
        out->entropy_loss = entropy ? e : 0.0;
        out->kl_loss = cfg->use_kl_loss ? k : 0.0;
    }
    out->loss = out->pg_loss - (entropy ? cfg->entropy_coeff * out->entropy_loss : 0.0) +
                (cfg->use_kl_loss ? cfg->kl_loss_coef * out->kl_loss : 0.0);
}
