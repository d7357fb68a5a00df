// policy_loss.c: vanilla PPO loss with exact per-token derivatives (see policy_loss.h).
#include "rl/policy_loss.h"

#include <math.h>
#include <string.h>

#include "core/common.h"

static inline float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

// One token of the vanilla loss: value (times is_w), d/dlp, and the two clip flags.
static inline void vanilla_one(float *Lout, float *dLout, int *clip, int *clip_lower, float lpv, float oldv, float A,
                               float w, float lo, float hi, float c) {
    float x = lpv - oldv;
    float d = clampf(x, -20.0f, 20.0f);
    float r = expf(d);
    float L1 = -A * r;
    float rc = clampf(r, lo, hi);
    float L2 = -A * rc;
    float Lc = L1 > L2 ? L1 : L2;   // torch.maximum (no NaNs here)
    float L3 = -A * c;
    int neg = A < 0;
    float Lf = neg ? (L3 < Lc ? L3 : Lc) : Lc;
    *Lout = Lf * w;
    *clip = L2 > L1;
    *clip_lower = (Lc > L3) && neg;
    // backward of: where(A<0, min(L3, Lc), Lc) * w
    float gLc = w;
    if (neg) gLc = Lc < L3 ? w : (Lc == L3 ? 0.5f * w : 0.0f);
    float gL1 = L1 > L2 ? gLc : (L1 == L2 ? 0.5f * gLc : 0.0f);
    float gL2 = L2 > L1 ? gLc : (L1 == L2 ? 0.5f * gLc : 0.0f);
    float gr = gL1 * (-A) + ((r >= lo && r <= hi) ? gL2 * (-A) : 0.0f);
    float gd = gr * r;
    *dLout = (x >= -20.0f && x <= 20.0f) ? gd : 0.0f;
}

static void check_clip(const rl_clip *cfg) {
    if (!(cfg->clip_ratio_c > 1.0))
        rlc_die("actor.clip_ratio_c: the dual-clip constant must be > 1.0, got %g", cfg->clip_ratio_c);
}

void rl_vanilla_tokens(float *L, float *dL, uint8_t *clip, uint8_t *clip_lower, const float *lp, const float *old,
                       const float *adv, const float *is_w, int64_t n, const rl_clip *cfg) {
    check_clip(cfg);
    const float lo = (float)(1.0 - cfg->clip_ratio_low), hi = (float)(1.0 + cfg->clip_ratio_high);
    const float c = (float)cfg->clip_ratio_c;
    for (int64_t i = 0; i < n; i++) {
        float Lv, dv;
        int cl, cll;
        vanilla_one(&Lv, &dv, &cl, &cll, lp[i], old[i], adv[i], is_w ? is_w[i] : 1.0f, lo, hi, c);
        if (L) L[i] = Lv;
        if (dL) dL[i] = dv;
        if (clip) clip[i] = (uint8_t)cl;
        if (clip_lower) clip_lower[i] = (uint8_t)cll;
    }
}

// The fused micro-batch loss: one pass over the tokens for the policy, entropy and KL terms.
static void fused_loss(rl_loss_out *out, float *dlp, float *dent, const float *lp, const float *old, const float *ref,
                       const float *adv, const float *entropy, const float *mask, const float *is_w, int64_t B,
                       int64_t T, const rl_clip *clipc, rl_agg_mode mode, const rl_batch_info *gbi,
                       double entropy_coeff, int use_kl, double kl_coef, rl_kl_type kl_type) {
    check_clip(clipc);
    const float lo = (float)(1.0 - clipc->clip_ratio_low), hi = (float)(1.0 + clipc->clip_ratio_high);
    const float c = (float)clipc->clip_ratio_c;
    const float fent = (float)(-entropy_coeff), fkl = (float)kl_coef;
    double *rs = rlc_malloc((size_t)(B ? B : 1) * sizeof(double));
    rl_agg_row_scales(rs, mask, B, T, mode, gbi);
    double loss = 0, s_clip = 0, s_low = 0, s_kl = 0, s_m = 0, e = 0, k = 0;
    for (int64_t b = 0; b < B; b++) {
        double r = rs[b];
        double row_loss = 0, row_e = 0, row_k = 0;
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            float m = mask[i];
            if (m == 0) continue;
            float w = (float)(m * r);
            float Lv, dv;
            int cl, cll;
            vanilla_one(&Lv, &dv, &cl, &cll, lp[i], old[i], adv[i], is_w ? is_w[i] : 1.0f, lo, hi, c);
            row_loss += (double)w * Lv;
            float g = w * dv;
            s_clip += cl * (double)m;
            s_low += cll * (double)m;
            float x = lp[i] - old[i];
            s_kl += -(double)clampf(x, -20.0f, 20.0f) * m;
            s_m += m;
            if (entropy) {
                row_e += (double)w * entropy[i];
                if (dent) dent[i] += fent * w;
            }
            if (use_kl) {
                float kv, kg;
                rl_kl_penalty(&kv, &kg, lp + i, ref + i, 1, kl_type);
                row_k += (double)w * kv;
                g += fkl * w * kg;
            }
            if (dlp) dlp[i] += g;
        }
        loss += row_loss;
        e += row_e;
        k += row_k;
    }
    free(rs);
    out->pg_loss = loss;
    out->pg.pg_clipfrac = s_clip / (s_m + 1e-8);
    out->pg.pg_clipfrac_lower = s_low / (s_m + 1e-8);
    out->pg.ppo_kl = s_kl / (s_m + 1e-8);
    out->entropy_loss = entropy ? e : 0.0;
    out->kl_loss = use_kl ? k : 0.0;
    out->loss = out->pg_loss - (entropy ? entropy_coeff * e : 0.0) + (use_kl ? kl_coef * k : 0.0);
}

double rl_policy_loss_vanilla(float *dlp, rl_pg_metrics *met, const float *lp, const float *old, const float *adv,
                              const float *mask, const float *is_w, int64_t B, int64_t T, const rl_clip *cfg,
                              rl_agg_mode mode, const rl_batch_info *gbi) {
    rl_loss_out o;
    memset(&o, 0, sizeof o);
    fused_loss(&o, dlp, NULL, lp, old, NULL, adv, NULL, mask, is_w, B, T, cfg, mode, gbi, 0.0, 0, 0.0,
               (rl_kl_type){RL_KL_K1, 0});
    if (met) *met = o.pg;
    return o.pg_loss;
}

void rl_ppo_loss(rl_loss_out *out, float *dlp, float *dent, const float *lp, const float *old, const float *ref,
                 const float *adv, const float *entropy, const float *mask, const float *is_w, int64_t B, int64_t T,
                 const rl_loss_cfg *cfg, const rl_batch_info *gbi) {
    memset(out, 0, sizeof *out);
    if (cfg->use_kl_loss) CHECK(ref != NULL, "use_kl_loss needs the reference log-probs");
    fused_loss(out, dlp, dent, lp, old, ref, adv, entropy, mask, is_w, B, T, &cfg->clip, cfg->agg, gbi,
               cfg->entropy_coeff, cfg->use_kl_loss, cfg->kl_loss_coef, cfg->kl_loss_type);
}
