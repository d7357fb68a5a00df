// kl.h: verl's KL estimators (core_algos.py::kl_penalty), as a loss term and in the reward, and the
// fixed/adaptive KL controllers (spec verl-grpo.md §3).
#pragma once
#include <stdint.h>

typedef enum { RL_KL_K1 = 0, RL_KL_ABS, RL_KL_K2, RL_KL_K3 } rl_kl_base;
typedef struct {
    rl_kl_base base;
    int straight_through;   // trailing '+': value of base, gradient of k2 = (lp - ref)
} rl_kl_type;

// "kl"/"k1", "abs", "mse"/"k2", "low_var_kl"/"k3", each optionally with a trailing '+'.
// Returns 0, or -1 for an unknown name ("full" is unknown: verl raises NotImplementedError).
int rl_kl_type_parse(const char *name, rl_kl_type *out);

// Per element: kl[i] = estimator(lp[i], ref[i]); dkl[i] = d kl / d lp (may be NULL). n elements.
//   k1 lp-ref (grad 1); abs |lp-ref| (grad sign, 0 at 0); k2 0.5(lp-ref)^2 (grad lp-ref);
//   k3 k=clamp(ref-lp,-20,20), v=exp(k)-k-1, clamp(v,-10,10) (torch clamp subgradients: pass at the bounds).
void rl_kl_penalty(float *kl, float *dkl, const float *lp, const float *ref, int64_t n, rl_kl_type type);

// algorithm.kl_ctrl: fixed (no-op update) or adaptive (Ziegler et al.).
typedef struct {
    int adaptive;
    double value;    // current coefficient beta
    double target;   // target_kl
    double horizon;
} rl_kl_ctrl;
// type "fixed" or "adaptive"; dies naming algorithm.kl_ctrl.type otherwise (and for horizon <= 0 when adaptive).
void rl_kl_ctrl_init(rl_kl_ctrl *c, const char *type, double kl_coef, double target_kl, double horizon);
// value *= 1 + clip(current_kl/target - 1, -0.2, 0.2) * n_steps / horizon   (adaptive only)
void rl_kl_ctrl_update(rl_kl_ctrl *c, double current_kl, int64_t n_steps);

// ray_trainer.apply_kl_penalty: kld = kl(old, ref) * m; rewards = scores - beta * kld (beta = value before the
// update); current_kl = mean_b(masked_mean(kld, m, axis=-1)); ctrl updated with n_steps = B.
// All (B, T). Returns current_kl (metric actor/reward_kl_penalty); *beta_out = beta (..._coeff) if non-NULL.
double rl_apply_kl_penalty(float *token_rewards, const float *token_scores, const float *old_lp, const float *ref_lp,
                           const float *mask, int64_t B, int64_t T, rl_kl_type type, rl_kl_ctrl *ctrl,
                           double *beta_out);
