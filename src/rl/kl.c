// kl.c: KL estimators and controllers (see kl.h).
#include "rl/kl.h"

#include <math.h>
#include <string.h>

#include "core/common.h"

int rl_kl_type_parse(const char *name, rl_kl_type *out) {
    size_t n = strlen(name);
    int st = n > 0 && name[n - 1] == '+';
    size_t bn = st ? n - 1 : n;
    static const struct { const char *s; rl_kl_base b; } tab[] = {
        {"kl", RL_KL_K1}, {"k1", RL_KL_K1}, {"abs", RL_KL_ABS}, {"mse", RL_KL_K2},
        {"k2", RL_KL_K2}, {"low_var_kl", RL_KL_K3}, {"k3", RL_KL_K3}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strlen(tab[i].s) == bn && strncmp(name, tab[i].s, bn) == 0) {
            out->base = tab[i].b;
            out->straight_through = st;
            return 0;
        }
    return -1;
}

void rl_kl_penalty(float *kl, float *dkl, const float *lp, const float *ref, int64_t n, rl_kl_type type) {
    for (int64_t i = 0; i < n; i++) {
        float d = lp[i] - ref[i];
        float v, g;
        switch (type.base) {
        case RL_KL_K1: v = d; g = 1.0f; break;
        case RL_KL_ABS: v = fabsf(d); g = d > 0 ? 1.0f : (d < 0 ? -1.0f : 0.0f); break;
        case RL_KL_K2: v = 0.5f * (d * d); g = d; break;
        case RL_KL_K3: {
            float k = ref[i] - lp[i];
            float kc = k < -20.0f ? -20.0f : (k > 20.0f ? 20.0f : k);
            float r = expf(kc);
            float u = (r - kc) - 1.0f;
            v = u < -10.0f ? -10.0f : (u > 10.0f ? 10.0f : u);
            // dv/dlp = d/dk(exp(k) - k - 1) * dk/dlp = (r - 1) * (-1), through both clamps
            int pass = (k >= -20.0f && k <= 20.0f) && (u >= -10.0f && u <= 10.0f);
            g = pass ? -(r - 1.0f) : 0.0f;
            break;
        }
        default: CHECK(0, "bad kl base %d", (int)type.base); v = g = 0;
        }
        if (type.straight_through) g = d;   // 0.5 d^2 - sg(0.5 d^2) + sg(v)
        kl[i] = v;
        if (dkl) dkl[i] = g;
    }
}

void rl_kl_ctrl_init(rl_kl_ctrl *c, const char *type, double kl_coef, double target_kl, double horizon) {
    memset(c, 0, sizeof *c);
    c->value = kl_coef;
    c->target = target_kl;
    c->horizon = horizon;
    if (strcmp(type, "fixed") == 0) c->adaptive = 0;
    else if (strcmp(type, "adaptive") == 0) {
        if (!(horizon > 0)) rlc_die("algorithm.kl_ctrl.horizon: must be > 0 for the adaptive controller, got %g", horizon);
        c->adaptive = 1;
    } else rlc_die("algorithm.kl_ctrl.type: expected 'fixed' or 'adaptive', got '%s'", type);
}

void rl_kl_ctrl_update(rl_kl_ctrl *c, double current_kl, int64_t n_steps) {
    if (!c->adaptive) return;
    double e = current_kl / c->target - 1.0;
    if (e < -0.2) e = -0.2;
    if (e > 0.2) e = 0.2;
    c->value *= 1.0 + e * (double)n_steps / c->horizon;
}

double rl_apply_kl_penalty(float *token_rewards, const float *token_scores, const float *old_lp, const float *ref_lp,
                           const float *mask, int64_t B, int64_t T, rl_kl_type type, rl_kl_ctrl *ctrl,
                           double *beta_out) {
    float *kld = rlc_malloc((size_t)(B * T) * sizeof(float));
    rl_kl_penalty(kld, NULL, old_lp, ref_lp, B * T, type);
    double beta = ctrl->value;
    float fbeta = (float)beta;
    double sum_rows = 0;
    for (int64_t b = 0; b < B; b++) {
        double s = 0, c = 0;
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            float k = kld[i] * mask[i];
            token_rewards[i] = token_scores[i] - fbeta * k;
            s += (double)k * mask[i];
            c += mask[i];
        }
        sum_rows += s / (c + 1e-8);
    }
    free(kld);
    double current_kl = B > 0 ? sum_rows / (double)B : 0.0;
    rl_kl_ctrl_update(ctrl, current_kl, B);
    if (beta_out) *beta_out = beta;
    return current_kl;
}
