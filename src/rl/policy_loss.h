// policy_loss.h: verl's registered policy losses (core_algos.py POLICY_LOSS_REGISTRY, selected by
// actor.policy_loss.loss_mode) and the per-micro-batch actor loss (verl/workers/utils/losses.py::ppo_loss):
// pg_loss - entropy_coeff*entropy + kl_loss_coef*kl, each aggregated with the actor's loss_agg_mode and the global
// batch info. Every function returns the loss value and accumulates (+=) its exact per-token derivative, matching
// torch autograd (clamp passes the gradient at its bounds; torch.maximum/minimum split it in half on ties; where()
// routes it to the chosen branch; abs has derivative sign(x), 0 at 0).
//
// One table (rl_pg_losses) maps each mode name to its function, its aggregation rule (gspo and sapo always
// aggregate seq-mean-token-mean; geo_mean takes its own per-sequence mean) and the metrics it reports.
#pragma once
#include <stdint.h>

#include "rl/agg.h"
#include "rl/kl.h"
#include "rl/rollout_corr.h"

typedef struct {
    double clip_ratio_low;    // eps_lo (actor.clip_ratio_low, defaults to clip_ratio)
    double clip_ratio_high;   // eps_hi
    double clip_ratio_c;      // dual-clip constant c > 1 (dppo: the IS-weight cap)
} rl_clip;

// Which of verl's three pg metrics a loss reports (gpg reports none; kl_cov and dro only ppo_kl).
enum { RL_PGM_CLIPFRAC = 1, RL_PGM_PPO_KL = 2, RL_PGM_CLIPFRAC_LOWER = 4, RL_PGM_ALL = 7 };

typedef struct {
    double pg_clipfrac;        // actor/pg_clipfrac (vanilla: masked_mean(L2 > L1); meaning varies per loss)
    double ppo_kl;             // actor/ppo_kl (vanilla: masked_mean(-clamp(lp - old, -20, 20)))
    double pg_clipfrac_lower;  // actor/pg_clipfrac_lower (vanilla: masked_mean((Lc > L3) * (A < 0)))
    unsigned present;          // RL_PGM_* bits: the metrics this loss mode reports
} rl_pg_metrics;

typedef enum {
    RL_PG_VANILLA = 0,
    RL_PG_GSPO,
    RL_PG_SAPO,
    RL_PG_GPG,
    RL_PG_CLIP_COV,
    RL_PG_KL_COV,
    RL_PG_GEO_MEAN,
    RL_PG_DRO,
    RL_PG_CISPO,
    RL_PG_DPPO_TV,
    RL_PG_DPPO_KL,
    RL_PG_BYPASS_MODE,
    RL_PG_N_MODES
} rl_pg_mode;

// bypass_mode's rollout correction (algorithm.rollout_correction, verl's RolloutCorrectionConfig): old log-probs
// are the rollout's; the IS weights and the rejection mask of rl/rollout_corr.h are taken between the current
// log-probs and the rollout's (detached).
typedef enum { RL_RC_PPO_CLIP = 0, RL_RC_REINFORCE } rl_rc_loss;

// The actor loss settings (from the actor config). The first six fields are the vanilla loss's; the rest default
// to zero = vanilla (rl_loss_cfg_defaults fills verl's defaults for every mode).
typedef struct {
    rl_clip clip;
    rl_agg_mode agg;
    double entropy_coeff;     // entropy bonus (0: no entropy term)
    int use_kl_loss;
    double kl_loss_coef;
    rl_kl_type kl_loss_type;
    rl_pg_mode mode;          // actor.policy_loss.loss_mode
    double tau_pos, tau_neg;  // sapo: actor.tau_pos / tau_neg (1.0 / 1.05)
    double clip_cov_ratio, clip_cov_lb, clip_cov_ub;   // clip_cov: actor.policy_loss.* (2e-4 / 1.0 / 5.0)
    double kl_cov_ratio, ppo_kl_coef;                  // kl_cov: actor.policy_loss.* (2e-4 / 0.1)
    double dro_beta;          // dro: actor.policy_loss.dro_beta (> 0; NaN = null)
    uint64_t seed;            // clip_cov's random subset: hashed with the micro-batch's values (deterministic)
    rl_rollout_corr_cfg rc;   // bypass_mode: algorithm.rollout_correction's IS weights (reinforce) and rejection
    rl_rc_loss rc_loss_type;  // bypass_mode: algorithm.rollout_correction.loss_type
} rl_loss_cfg;

// verl's defaults for every field (vanilla, token-mean, clip 0.2/0.2/3.0, no entropy, no KL loss).
void rl_loss_cfg_defaults(rl_loss_cfg *cfg);
// Dies with one line naming the config key when a parameter of cfg->mode is out of range.
void rl_loss_cfg_check(const rl_loss_cfg *cfg);

// One micro-batch's inputs, all (B, T) except as noted.
typedef struct {
    const float *lp;     // current log-probs
    const float *old;    // old log-probs (bypass_mode: the rollout's)
    const float *adv;    // advantages
    const float *mask;   // response mask
    const float *is_w;   // rollout IS weights or NULL (every mode but geo_mean/bypass_mode multiplies by them)
    int64_t B, T;
    uint8_t *selected;   // NULL, or (B, T) out: clip_cov's dropped / kl_cov's penalised tokens (for tests)
} rl_pg_in;

// A loss over one micro-batch: returns pg_loss and accumulates dlp += d(pg_loss)/d(lp) (dlp may be NULL).
// mode is the aggregation to use (already forced for gspo/sapo); gbi the global batch info (may be NULL).
typedef double (*rl_pg_fn)(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg,
                           rl_agg_mode mode, const rl_batch_info *gbi);

typedef struct {
    const char *name;        // verl's registry name
    rl_pg_fn fn;
    int forced_agg;          // -1: actor.loss_agg_mode; else the rl_agg_mode always used
    int own_agg;             // 1: ignores loss_agg_mode and the global batch info (geo_mean)
    unsigned metrics;        // RL_PGM_* reported
    const char *keys;        // the config keys it reads (docs)
} rl_pg_loss_def;

extern const rl_pg_loss_def rl_pg_losses[RL_PG_N_MODES];
// name -> mode; -1 for an unknown name.
int rl_pg_mode_parse(const char *name, rl_pg_mode *out);
// Like rl_pg_mode_parse but dies naming `key` and listing the registered names.
rl_pg_mode rl_pg_mode_from_name(const char *name, const char *key);
// "vanilla|gspo|..." (static storage).
const char *rl_pg_mode_names(void);

// Per-token vanilla loss L[i] and dL[i] = dL[i]/dlp[i] (either output may be NULL) for n tokens (no mask, no
// aggregation). is_w: rollout IS weights or NULL. Flags for the clip metrics: clip[i] = (L2 > L1),
// clip_lower[i] = (Lc > L3)*(A<0) (NULL to skip). Dies if clip_ratio_c <= 1.
void rl_vanilla_tokens(float *L, float *dL, uint8_t *clip, uint8_t *clip_lower, const float *lp, const float *old,
                       const float *adv, const float *is_w, int64_t n, const rl_clip *cfg);

// compute_policy_loss_vanilla on a micro-batch (all arrays (B, T)): returns pg_loss; dlp += d(pg_loss)/d(lp)
// (dlp may be NULL); *met filled if non-NULL.
double rl_policy_loss_vanilla(float *dlp, rl_pg_metrics *met, const float *lp, const float *old, const float *adv,
                              const float *mask, const float *is_w, int64_t B, int64_t T, const rl_clip *cfg,
                              rl_agg_mode mode, const rl_batch_info *gbi);

// The policy loss cfg->mode on a micro-batch, with its aggregation rule: returns pg_loss, dlp += d/dlp.
double rl_policy_loss(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg,
                      const rl_batch_info *gbi);

typedef struct {
    double loss;          // the total: pg_loss - entropy_coeff*entropy_loss + kl_loss_coef*kl_loss
    double pg_loss;
    double entropy_loss;  // agg(entropy) (0 when no entropy given)
    double kl_loss;       // agg(kl(lp, ref)) (0 without use_kl_loss)
    rl_pg_metrics pg;
} rl_loss_out;

// One micro-batch of verl's ppo_loss with the policy loss cfg->mode. Arrays (B, T): lp current log-probs, old
// old_log_probs, ref ref log-probs (required iff use_kl_loss), adv advantages, entropy (NULL: no entropy term),
// mask response mask, is_w (NULL). Accumulates dlp += d loss / d lp and, if dent and entropy are non-NULL,
// dent += d loss / d entropy. Entropy and KL terms use actor.loss_agg_mode for every mode (as verl's ppo_loss).
void rl_ppo_loss(rl_loss_out *out, float *dlp, float *dent, const float *lp, const float *old, const float *ref,
                 const float *adv, const float *entropy, const float *mask, const float *is_w, int64_t B, int64_t T,
                 const rl_loss_cfg *cfg, const rl_batch_info *gbi);
