// pg_losses.c: verl's registered policy losses (core_algos.py), each as its per-token loss L and exact per-token
// derivative dL = dL/dlp (torch autograd's tie rules), then aggregated with agg weights w: pg_loss = sum w*L and
// dlp += w*dL. geo_mean aggregates per sequence by itself. Formulas: shared/spec/verl-ppo.md §2.
#include "rl/pg_losses.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"

static inline float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }
static inline float signf(float x) { return x > 0 ? 1.0f : (x < 0 ? -1.0f : 0.0f); }

// One micro-batch's aggregation: per-row agg scales rs, so w[b,t] = mask*rs[b]; the loss and dlp are accumulated
// token by token (pg_loss = sum w*L, dlp += w*dL, both times the IS weight), or, for the losses that revisit tokens
// after a first pass (clip_cov, kl_cov), from per-token buffers at tok_finish. Plus verl's masked_mean sums of the
// three metrics.
typedef struct {
    const rl_pg_in *in;
    float *dlp;
    double *rs;                 // (B) row scales of the aggregation
    float *L, *dL;              // (B, T) buffered loss and d/dlp, or NULL (accumulated directly)
    double loss;
    double s_clip, s_low, s_kl, s_m;
} tok;

static void tok_init(tok *k, float *dlp, const rl_pg_in *in, rl_agg_mode mode, const rl_batch_info *gbi, int buffered) {
    memset(k, 0, sizeof *k);
    k->in = in;
    k->dlp = dlp;
    k->rs = rlc_malloc((size_t)(in->B ? in->B : 1) * sizeof(double));
    rl_agg_row_scales(k->rs, in->mask, in->B, in->T, mode, gbi);
    if (buffered) {
        size_t n = (size_t)(in->B * in->T);
        k->L = rlc_calloc(n ? n : 1, sizeof(float));
        k->dL = rlc_calloc(n ? n : 1, sizeof(float));
    }
}

// Token i (row b, mask != 0): its loss and derivative before the IS weight.
static inline void tok_put(tok *k, int64_t b, int64_t i, float L, float dL) {
    const rl_pg_in *in = k->in;
    if (k->L) { k->L[i] = L; k->dL[i] = dL; return; }
    if (in->is_w) { L *= in->is_w[i]; dL *= in->is_w[i]; }
    float w = (float)(in->mask[i] * k->rs[b]);
    k->loss += (double)w * L;
    if (k->dlp) k->dlp[i] += w * dL;
}

// One token's metric flags, weighted by its mask value (masked_mean = sum(x*m) / (sum(m) + 1e-8)).
static inline void tok_metrics(tok *k, float m, double clip, double low, double kl) {
    k->s_clip += clip * m;
    k->s_low += low * m;
    k->s_kl += kl * m;
    k->s_m += m;
}

// The aggregated loss (flushing the buffers if any); fills the metrics that `present` names and frees.
static double tok_finish(tok *k, rl_pg_metrics *met, unsigned present) {
    const rl_pg_in *in = k->in;
    if (k->L) {
        float *L = k->L, *dL = k->dL;
        k->L = k->dL = NULL;
        for (int64_t b = 0; b < in->B; b++)
            for (int64_t t = 0; t < in->T; t++) {
                int64_t i = b * in->T + t;
                if (in->mask[i] != 0) tok_put(k, b, i, L[i], dL[i]);
            }
        free(L);
        free(dL);
    }
    if (met) {
        double den = k->s_m + 1e-8;
        met->present = present;
        met->pg_clipfrac = (present & RL_PGM_CLIPFRAC) ? k->s_clip / den : 0.0;
        met->ppo_kl = (present & RL_PGM_PPO_KL) ? k->s_kl / den : 0.0;
        met->pg_clipfrac_lower = (present & RL_PGM_CLIPFRAC_LOWER) ? k->s_low / den : 0.0;
    }
    free(k->rs);
    return k->loss;
}

// The first stage of PPO's clipped loss, max(-A r, -A clamp(r, lo, hi)), with its derivative w.r.t. r (gradient
// gLc arriving at the max): torch.maximum splits a tie in half, clamp passes the gradient on [lo, hi].
static inline float ppo_clip_grad_r(float *Lc, int *clip, float A, float r, float lo, float hi, float gLc) {
    float L1 = -A * r, L2 = -A * clampf(r, lo, hi);
    *Lc = L1 > L2 ? L1 : L2;
    *clip = L2 > L1;
    float gL1 = L1 > L2 ? gLc : (L1 == L2 ? 0.5f * gLc : 0.0f);
    float gL2 = L2 > L1 ? gLc : (L1 == L2 ? 0.5f * gLc : 0.0f);
    return gL1 * (-A) + ((r >= lo && r <= hi) ? gL2 * (-A) : 0.0f);
}

// Loop over the valid tokens of the micro-batch: row b, flat index i, mask value m.
#define FOR_TOKENS(in)                                                   \
    for (int64_t b = 0; b < (in)->B; b++)                                \
        for (int64_t i = b * (in)->T, i_end = i + (in)->T; i < i_end; i++) \
            for (float m = (in)->mask[i]; m != 0; m = 0)

// --------------------------------------------------------------------------------------------------------------
// vanilla (dual-clip PPO): one token's value (times the IS weight w), d/dlp and the two clip flags.
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

void rl_vanilla_tokens(float *L, float *dL, uint8_t *clip, uint8_t *clip_lower, const float *lp, const float *old,
                       const float *adv, const float *is_w, int64_t n, const rl_clip *cfg) {
    if (!(cfg->clip_ratio_c > 1.0))
        rlc_die("actor.clip_ratio_c: the dual-clip constant must be > 1.0, got %g", cfg->clip_ratio_c);
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

double rl_pg_vanilla(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                     const rl_batch_info *gbi) {
    if (!(cfg->clip.clip_ratio_c > 1.0))
        rlc_die("actor.clip_ratio_c: the dual-clip constant must be > 1.0, got %g", cfg->clip.clip_ratio_c);
    const float lo = (float)(1.0 - cfg->clip.clip_ratio_low), hi = (float)(1.0 + cfg->clip.clip_ratio_high);
    const float c = (float)cfg->clip.clip_ratio_c;
    tok k;
    tok_init(&k, dlp, in, mode, gbi, 0);
    FOR_TOKENS(in) {
        float L, dL;
        int cl, cll;
        vanilla_one(&L, &dL, &cl, &cll, in->lp[i], in->old[i], in->adv[i], 1.0f, lo, hi, c);
        tok_put(&k, b, i, L, dL);
        tok_metrics(&k, m, cl, cll, -(double)clampf(in->lp[i] - in->old[i], -20.0f, 20.0f));
    }
    return tok_finish(&k, met, RL_PGM_ALL);
}

// gspo: the sequence log-ratio S = sum(d*m)/max(sum m, 1) on every token, gradient only through the token's own lp
// (lp - sg(lp) + sg(S)), capped at 10 before exp; PPO clip on the sequence ratio.
double rl_pg_gspo(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                  const rl_batch_info *gbi) {
    const float lo = (float)(1.0 - cfg->clip.clip_ratio_low), hi = (float)(1.0 + cfg->clip.clip_ratio_high);
    tok k;
    tok_init(&k, dlp, in, mode, gbi, 0);
    for (int64_t b = 0; b < in->B; b++) {
        const int64_t o = b * in->T;
        double sd = 0, sm = 0;
        for (int64_t t = 0; t < in->T; t++) {
            float m = in->mask[o + t];
            if (m != 0) { sd += (double)(in->lp[o + t] - in->old[o + t]) * m; sm += m; }
        }
        float S = (float)(sd / (sm > 1.0 ? sm : 1.0));
        float s = expf(S < 10.0f ? S : 10.0f);
        float ds = S <= 10.0f ? s : 0.0f;   // clamp(max=10) passes the gradient at 10
        for (int64_t i = o; i < o + in->T; i++) {
            float m = in->mask[i];
            if (m == 0) continue;
            float Lc;
            int cl;
            float gr = ppo_clip_grad_r(&Lc, &cl, in->adv[i], s, lo, hi, 1.0f);
            tok_put(&k, b, i, Lc, gr * ds);
            tok_metrics(&k, m, cl, 0, -(double)(in->lp[i] - in->old[i]));
        }
    }
    return tok_finish(&k, met, RL_PGM_ALL);
}

// sapo: a soft gate sigmoid(tau (r - 1)) * 4 / tau instead of clipping; tau = tau_pos for A > 0, else tau_neg.
double rl_pg_sapo(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                  const rl_batch_info *gbi) {
    tok k;
    tok_init(&k, dlp, in, mode, gbi, 0);
    FOR_TOKENS(in) {
        float A = in->adv[i], x = in->lp[i] - in->old[i];
        float d = clampf(x, -20.0f, 20.0f), r = expf(d);
        float tau = (float)(A > 0 ? cfg->tau_pos : cfg->tau_neg);
        float sg = 1.0f / (1.0f + expf(-tau * (r - 1.0f)));
        float g = -A * (4.0f / tau) * (sg * (1.0f - sg)) * tau * r;
        tok_put(&k, b, i, -(sg * (4.0f / tau)) * A, (x >= -20.0f && x <= 20.0f) ? g : 0.0f);
        tok_metrics(&k, m, 0, 0, -(double)d);
    }
    return tok_finish(&k, met, RL_PGM_ALL);
}

// gpg: plain policy gradient -lp*A; verl returns no metrics for it.
double rl_pg_gpg(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                 const rl_batch_info *gbi) {
    (void)cfg;
    tok k;
    tok_init(&k, dlp, in, mode, gbi, 0);
    FOR_TOKENS(in) {
        (void)m;
        tok_put(&k, b, i, -in->lp[i] * in->adv[i], -in->adv[i]);
    }
    return tok_finish(&k, met, 0);
}

// splitmix64: the stream clip_cov draws its subset from.
static uint64_t mix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t hash_floats(uint64_t h, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, 4);
        h = (h ^ u) * 0x100000001B3ull;
    }
    return h;
}

// clip_cov: PPO's first-stage clip (no dual clip, no +-20 clamp); of the unclipped tokens whose covariance
// (A - mean A)(lp - mean lp) lies in (lb, ub), a random subset of max(int(ratio * sum m), 1) gets no gradient.
// verl draws it with torch.randperm; rlc draws it from cfg->seed hashed with the micro-batch (deterministic).
double rl_pg_clip_cov(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                      const rl_batch_info *gbi) {
    const int64_t n = in->B * in->T;
    const float lo = (float)(1.0 - cfg->clip.clip_ratio_low), hi = (float)(1.0 + cfg->clip.clip_ratio_high);
    tok k;
    tok_init(&k, dlp, in, mode, gbi, 1);
    double sa = 0, sl = 0, sm = 0;
    FOR_TOKENS(in) { sa += (double)in->adv[i] * m; sl += (double)in->lp[i] * m; sm += m; (void)b; }
    const float mA = (float)(sa / (sm + 1e-8)), mL = (float)(sl / (sm + 1e-8));
    int64_t *cand = rlc_malloc((size_t)(n ? n : 1) * sizeof(int64_t)), nc = 0;
    uint8_t *drop = rlc_calloc((size_t)(n ? n : 1), 1);
    FOR_TOKENS(in) {
        (void)b; (void)m;
        float r = expf(in->lp[i] - in->old[i]);
        int cl;
        k.dL[i] = ppo_clip_grad_r(&k.L[i], &cl, in->adv[i], r, lo, hi, 1.0f) * r;
        float cov = (in->adv[i] - mA) * (in->lp[i] - mL);
        if (!cl && cov > (float)cfg->clip_cov_lb && cov < (float)cfg->clip_cov_ub) cand[nc++] = i;
    }
    int64_t want = (int64_t)(cfg->clip_cov_ratio * sm);
    if (want < 1) want = 1;
    if (want > nc) want = nc;
    uint64_t st = hash_floats(hash_floats(hash_floats(cfg->seed ^ 0xC0FFEEull, in->lp, n), in->old, n), in->adv, n);
    for (int64_t j = 0; j < want; j++) {   // partial Fisher-Yates: a uniform subset of size `want`
        int64_t r = j + (int64_t)(mix64(&st) % (uint64_t)(nc - j));
        int64_t tmp = cand[j]; cand[j] = cand[r]; cand[r] = tmp;
        drop[cand[j]] = 1;
    }
    if (in->selected) memcpy(in->selected, drop, (size_t)n);
    FOR_TOKENS(in) {
        (void)b;
        if (drop[i]) { k.L[i] = 0.0f; k.dL[i] = 0.0f; }
        tok_metrics(&k, m, drop[i], 0, -(double)(in->lp[i] - in->old[i]));
    }
    free(cand);
    free(drop);
    return tok_finish(&k, met, RL_PGM_CLIPFRAC | RL_PGM_PPO_KL);
}

typedef struct { float cov; int64_t idx; } cov_item;
static int cov_desc(const void *a, const void *b) {   // larger cov first, ties by lower index
    const cov_item *x = a, *y = b;
    if (x->cov != y->cov) return x->cov > y->cov ? -1 : 1;
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

// kl_cov: unclipped -A r; the top max(1, int(N * kl_cov_ratio)) valid tokens by (A - mean A)(lp - mean lp) (plain
// means over the valid tokens) add ppo_kl_coef * |lp - old|.
double rl_pg_kl_cov(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                    const rl_batch_info *gbi) {
    const int64_t n = in->B * in->T;
    const float coef = (float)cfg->ppo_kl_coef;
    tok k;
    tok_init(&k, dlp, in, mode, gbi, 1);
    cov_item *it = rlc_malloc((size_t)(n ? n : 1) * sizeof(cov_item));
    int64_t nv = 0;
    double sa = 0, sl = 0;
    if (in->selected) memset(in->selected, 0, (size_t)n);
    FOR_TOKENS(in) {
        (void)b;
        float d = in->lp[i] - in->old[i], r = expf(d);
        k.L[i] = -in->adv[i] * r;
        k.dL[i] = -in->adv[i] * r;
        tok_metrics(&k, m, 0, 0, fabs((double)d));
        if (m > 0) { sa += in->adv[i]; sl += in->lp[i]; it[nv++].idx = i; }
    }
    if (nv > 0) {
        const float mA = (float)(sa / (double)nv), mL = (float)(sl / (double)nv);
        for (int64_t j = 0; j < nv; j++) {
            int64_t i = it[j].idx;
            it[j].cov = (in->adv[i] - mA) * (in->lp[i] - mL);
        }
        qsort(it, (size_t)nv, sizeof *it, cov_desc);
        int64_t top = (int64_t)((double)nv * cfg->kl_cov_ratio);
        if (top < 1) top = 1;
        for (int64_t j = 0; j < top; j++) {
            int64_t i = it[j].idx;
            float d = in->lp[i] - in->old[i];
            k.L[i] = -in->adv[i] * expf(d) + coef * fabsf(d);
            k.dL[i] += coef * signf(d);
            if (in->selected) in->selected[i] = 1;
        }
    }
    free(it);
    return tok_finish(&k, met, RL_PGM_PPO_KL);
}

// geo_mean (GMPO): per sequence -mean_m(A) * exp(mean_m(d')), d' capped on the log ratio on the advantage's side;
// pg_loss = the plain mean over the micro-batch's rows (loss_agg_mode and the global batch info are not used).
double rl_pg_geo_mean(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                      const rl_batch_info *gbi) {
    (void)mode; (void)gbi;
    const float elo = (float)cfg->clip.clip_ratio_low, ehi = (float)cfg->clip.clip_ratio_high;
    double loss = 0, s_hi = 0, s_lo = 0, s_kl = 0, s_m = 0;
    for (int64_t b = 0; b < in->B; b++) {
        const int64_t o = b * in->T;
        double sd = 0, sm = 0, sa = 0, slw = 0;
        for (int64_t i = o; i < o + in->T; i++) {
            float m = in->mask[i];
            if (m == 0) continue;
            float A = in->adv[i], d = in->lp[i] - in->old[i];
            float dp = A > 0 ? (d < ehi ? d : ehi) : (A < 0 ? (d > -elo ? d : -elo) : 0.0f);
            sd += (double)dp * m; sm += m; sa += (double)A * m;
            if (in->is_w) slw += (double)logf(in->is_w[i] + 1e-10f) * m;
            int clipped = d != clampf(d, -elo, ehi);
            s_hi += (double)(clipped && A > 0) * m;
            s_lo += (double)(clipped && A < 0) * m;
            s_kl += -(double)d * m;
            s_m += m;
        }
        const double den = sm + 1e-8;
        float r = expf((float)(sd / den)), Ah = (float)(sa / den);
        float sw = in->is_w ? expf((float)(slw / den)) : 1.0f;
        loss += (double)(-Ah * r * sw);
        if (!dlp) continue;
        float g = (float)(-(double)Ah * r * sw / (double)in->B / den);
        for (int64_t i = o; i < o + in->T; i++) {
            float m = in->mask[i];
            if (m == 0) continue;
            float A = in->adv[i], d = in->lp[i] - in->old[i];
            int follows = A > 0 ? d <= ehi : (A < 0 ? d >= -elo : 0);   // torch.min tie: 1/2 + 1/2 inside the band
            if (follows) dlp[i] += g * m;
        }
    }
    if (met) {
        met->present = RL_PGM_ALL;
        met->pg_clipfrac = s_hi / (s_m + 1e-8);
        met->pg_clipfrac_lower = s_lo / (s_m + 1e-8);
        met->ppo_kl = s_kl / (s_m + 1e-8);
    }
    return in->B > 0 ? loss / (double)in->B : 0.0;
}

// dro: -(lp*A - beta/2 * (lp - old)^2).
double rl_pg_dro(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                 const rl_batch_info *gbi) {
    const float beta = (float)cfg->dro_beta;
    tok k;
    tok_init(&k, dlp, in, mode, gbi, 0);
    FOR_TOKENS(in) {
        float A = in->adv[i], d = in->lp[i] - in->old[i];
        tok_put(&k, b, i, -(in->lp[i] * A - 0.5f * beta * (d * d)), -A + beta * d);
        tok_metrics(&k, m, 0, 0, -(double)d);
    }
    return tok_finish(&k, met, RL_PGM_PPO_KL);
}

// cispo: -sg(clamp(r, 1-eps_lo, 1+eps_hi)) * A * lp: the clipped ratio weights a plain policy gradient.
double rl_pg_cispo(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                   const rl_batch_info *gbi) {
    const float lo = (float)(1.0 - cfg->clip.clip_ratio_low), hi = (float)(1.0 + cfg->clip.clip_ratio_high);
    tok k;
    tok_init(&k, dlp, in, mode, gbi, 0);
    FOR_TOKENS(in) {
        float A = in->adv[i], d = clampf(in->lp[i] - in->old[i], -20.0f, 20.0f), r = expf(d);
        float c = clampf(r, lo, hi);
        tok_put(&k, b, i, -c * A * in->lp[i], -c * A);
        tok_metrics(&k, m, r != c, 0, -(double)d);
    }
    return tok_finish(&k, met, RL_PGM_ALL);
}

// dppo_tv / dppo_kl: -A * sg(min(r, C)) * lp on the tokens whose divergence from the old policy (total variation
// p - p_old, or the binary KL) stays inside the advantage's side of the trust region.
static double dppo(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                   const rl_batch_info *gbi, int kl) {
    const float elo = (float)cfg->clip.clip_ratio_low, ehi = (float)cfg->clip.clip_ratio_high;
    const float C = (float)cfg->clip.clip_ratio_c;
    tok k;
    tok_init(&k, dlp, in, mode, gbi, 0);
    FOR_TOKENS(in) {
        float A = in->adv[i], lp = in->lp[i], old = in->old[i];
        float d = clampf(lp - old, -20.0f, 20.0f), r = expf(d);
        float w = r < C ? r : C;
        float p = expf(lp), po = expf(old);
        int valid;
        if (!kl) {
            valid = A > 0 ? (p - po <= ehi) : (p - po >= -elo);
        } else {
            float bkl = po * (old - lp) + (1.0f - po) * logf((1.0f - po + 1e-8f) / (1.0f - p + 1e-8f));
            valid = A > 0 ? (bkl <= ehi || p <= po) : (bkl <= elo || p >= po);
        }
        tok_put(&k, b, i, -A * w * lp * (float)valid, -A * w * (float)valid);
        tok_metrics(&k, m, 1 - valid, (r > C) && valid, -(double)d);
    }
    return tok_finish(&k, met, RL_PGM_ALL);
}
double rl_pg_dppo_tv(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                     const rl_batch_info *gbi) {
    return dppo(dlp, met, in, cfg, mode, gbi, 0);
}
double rl_pg_dppo_kl(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                     const rl_batch_info *gbi) {
    return dppo(dlp, met, in, cfg, mode, gbi, 1);
}

// bypass_mode: old holds the rollout's log-probs. The rollout correction (rl/rollout_corr.h) between the current
// log-probs and the rollout's (detached) gives the IS weights w and the rejection mask; rejected tokens leave the
// loss. ppo_clip: vanilla on that mask without IS weights (the ratio already is one); reinforce: -A * lp * w
// (rollout_is null: w = 1).
double rl_pg_bypass_mode(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg,
                         rl_agg_mode mode, const rl_batch_info *gbi) {
    rl_pg_in v = *in;
    v.is_w = NULL;
    const size_t n = (size_t)(in->B * in->T);
    float *w = NULL, *m2 = NULL;
    double msum = 0;
    for (size_t i = 0; i < n; i++) msum += in->mask[i] != 0;
    if (rl_rollout_corr_active(&cfg->rc) && msum > 0) {
        m2 = rlc_malloc(sizeof(float) * n);
        if (cfg->rc.is != RL_RC_IS_NONE && cfg->rc_loss_type == RL_RC_REINFORCE) w = rlc_malloc(sizeof(float) * n);
        rl_rollout_corr(w, m2, NULL, in->lp, in->old, in->mask, in->B, in->T, &cfg->rc);
        v.mask = m2;
    }
    double loss;
    if (cfg->rc_loss_type == RL_RC_PPO_CLIP) {
        loss = rl_pg_vanilla(dlp, met, &v, cfg, mode, gbi);
    } else {
        tok k;
        tok_init(&k, dlp, &v, mode, gbi, 0);
        for (int64_t b = 0; b < in->B; b++)
            for (int64_t i = b * in->T; i < (b + 1) * in->T; i++) {
                const float m = v.mask[i];
                if (m == 0) continue;
                const float wi = w ? w[i] : 1.0f;
                tok_put(&k, b, i, -in->adv[i] * in->lp[i] * wi, -in->adv[i] * wi);
                tok_metrics(&k, m, 0, 0, (double)(in->old[i] - in->lp[i]));
            }
        loss = tok_finish(&k, met, RL_PGM_PPO_KL);
    }
    free(w);
    free(m2);
    return loss;
}
