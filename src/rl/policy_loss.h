// policy_loss.h: verl's PPO policy loss `vanilla` (dual-clip) and the per-micro-batch actor loss
// (verl/workers/utils/losses.py::ppo_loss): pg_loss - entropy_coeff*entropy + kl_loss_coef*kl, each aggregated
// with the actor's loss_agg_mode and the global batch info. Every function returns the loss value and
// accumulates (+=) its exact per-token derivative, matching torch autograd (clamp passes the gradient at its
// bounds; torch.maximum/minimum split it in half on ties; where() routes it to the chosen branch).
#pragma once
#include <stdint.h>

#include "rl/agg.h"
#include "rl/kl.h"

typedef struct {
    double clip_ratio_low;    // eps_lo (actor.clip_ratio_low, defaults to clip_ratio)
    double clip_ratio_high;   // eps_hi
    double clip_ratio_c;      // dual-clip constant c > 1
} rl_clip;

typedef struct {
    double pg_clipfrac;        // masked_mean(L2 > L1)
    double ppo_kl;             // masked_mean(-clamp(lp - old, -20, 20))
    double pg_clipfrac_lower;  // masked_mean((Lc > L3) * (A < 0))
} rl_pg_metrics;

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

// The actor loss settings (from the actor config).
typedef struct {
    rl_clip clip;
    rl_agg_mode agg;
    double entropy_coeff;     // entropy bonus (0: no entropy term)
    int use_kl_loss;
    double kl_loss_coef;
    rl_kl_type kl_loss_type;
} rl_loss_cfg;

typedef struct {
    double loss;          // the total: pg_loss - entropy_coeff*entropy_loss + kl_loss_coef*kl_loss
    double pg_loss;
    double entropy_loss;  // agg(entropy) (0 when no entropy given)
    double kl_loss;       // agg(kl(lp, ref)) (0 without use_kl_loss)
    rl_pg_metrics pg;
} rl_loss_out;

// One micro-batch of verl's ppo_loss. Arrays (B, T): lp current log-probs, old old_log_probs, ref ref log-probs
// (required iff use_kl_loss), adv advantages, entropy (NULL: no entropy term), mask response mask, is_w (NULL).
// Accumulates dlp += d loss / d lp and, if dent and entropy are non-NULL, dent += d loss / d entropy.
void rl_ppo_loss(rl_loss_out *out, float *dlp, float *dent, const float *lp, const float *old, const float *ref,
                 const float *adv, const float *entropy, const float *mask, const float *is_w, int64_t B, int64_t T,
                 const rl_loss_cfg *cfg, const rl_batch_info *gbi);
