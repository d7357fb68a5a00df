// advantage.c: advantage estimators (see advantage.h).
#include "rl/advantage.h"

#include <math.h>
#include <string.h>

#include "core/common.h"

static const char *k_adv_names[] = {"grpo", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline",
                                    "grpo_vectorized", "rloo_vectorized", "opo", "gpg"};
#define N_ADV ((int)(sizeof k_adv_names / sizeof k_adv_names[0]))

int rl_adv_estimator_parse(const char *name, rl_adv_estimator *out) {
    for (int i = 0; i < N_ADV; i++)
        if (strcmp(name, k_adv_names[i]) == 0) { *out = (rl_adv_estimator)i; return 0; }
    return -1;
}
const char *rl_adv_estimator_name(rl_adv_estimator e) {
    CHECK(e >= 0 && (int)e < N_ADV, "bad estimator %d", (int)e);
    return k_adv_names[e];
}

// Group statistics in batch order: for each i, the group's count, mean (float) and unbiased std (float),
// computed in double and rounded like torch.mean/torch.std of a float32 stack.
typedef struct {
    int64_t n;
    float mean, std;   // torch.mean / torch.std of the group (double accumulation, rounded)
    float vmean, vstd; // verl.utils.groupwise.group_mean_std (float index_add_ in batch order, eps 0)
    double sum;        // sum of the group's scores (double)
    double lsum, lssum;// sum of lengths, sum of length*score (opo)
} grp_stat;

static int cmp_idx_group(const void *a, const void *b, void *ctx) {
    const int64_t *g = ctx;
    int64_t ia = *(const int64_t *)a, ib = *(const int64_t *)b;
    if (g[ia] != g[ib]) return g[ia] < g[ib] ? -1 : 1;
    return ia < ib ? -1 : (ia > ib);
}

static void group_stats(grp_stat *st, const float *s, const float *len, const int64_t *group, int64_t B) {
    int64_t *idx = rlc_malloc((size_t)(B ? B : 1) * sizeof(int64_t));
    for (int64_t i = 0; i < B; i++) idx[i] = i;
    qsort_r(idx, (size_t)B, sizeof(int64_t), cmp_idx_group, (void *)group);
    for (int64_t a = 0; a < B;) {
        int64_t e = a;
        while (e < B && group[idx[e]] == group[idx[a]]) e++;
        int64_t n = e - a;
        double sum = 0, ls = 0, lss = 0;
        float fsum = 0, fcnt = 0;
        for (int64_t k = a; k < e; k++) {
            sum += s[idx[k]];
            fsum += s[idx[k]];
            fcnt += 1.0f;
            ls += len[idx[k]];
            lss += (double)(len[idx[k]] * s[idx[k]]);
        }
        double mu = sum / (double)n;
        float fmu = (float)mu, fsd = 0;
        if (n > 1) {
            double v = 0;
            for (int64_t k = a; k < e; k++) { double d = s[idx[k]] - mu; v += d * d; }
            fsd = (float)sqrt(v / (double)(n - 1));
        }
        float vm = fsum / (fcnt < 1.0f ? 1.0f : fcnt), vnum = 0;
        for (int64_t k = a; k < e; k++) { float d = s[idx[k]] - vm; vnum += d * d; }
        float den = fcnt - 1.0f < 1.0f ? 1.0f : fcnt - 1.0f;
        float var = vnum / den;
        float vsd = sqrtf(var < 0 ? 0 : var);
        if (fcnt <= 1.0f) { vm = 0; vsd = 1; }
        for (int64_t k = a; k < e; k++) st[idx[k]] = (grp_stat){n, fmu, fsd, vm, vsd, sum, ls, lss};
        a = e;
    }
    free(idx);
}

void rl_masked_whiten(float *x, const float *mask, int64_t n) {
    double s = 0, c = 0;
    for (int64_t i = 0; i < n; i++)
        if (mask[i] != 0) { s += (double)x[i] * mask[i]; c += mask[i]; }
    if (c == 0) rlc_die("masked_whiten: the response mask has no valid token (advantage whitening needs at least 2)");
    if (c == 1) rlc_die("masked_whiten: the response mask has only one valid token (unbiased variance needs at least 2)");
    float mu = (float)(s / (c + 1e-8));
    double v = 0;
    for (int64_t i = 0; i < n; i++)
        if (mask[i] != 0) { double d = (double)(x[i] - mu); v += d * d * mask[i]; }
    double var = v / (c + 1e-8) * (c / (c - 1));
    float rs = (float)(1.0 / sqrt((double)(float)var + 1e-8));
    for (int64_t i = 0; i < n; i++) x[i] = (x[i] - mu) * rs;
}

void rl_compute_advantage(float *adv, float *returns, const float *token_rewards, const float *mask,
                          const int64_t *group, int64_t B, int64_t T, const rl_adv_cfg *cfg) {
    int64_t n = B * T;
    if (cfg->estimator == RL_ADV_REINFORCE_PLUS_PLUS) {
        float *ret = returns ? returns : rlc_malloc((size_t)n * sizeof(float));
        float g = (float)cfg->gamma;
        for (int64_t b = 0; b < B; b++) {
            float run = 0;
            for (int64_t t = T - 1; t >= 0; t--) {
                int64_t i = b * T + t;
                run = token_rewards[i] + g * run;
                ret[i] = run;
                run = run * mask[i];   // reset after EOS
            }
        }
        memcpy(adv, ret, (size_t)n * sizeof(float));
        rl_masked_whiten(adv, mask, n);
        for (int64_t i = 0; i < n; i++) adv[i] *= mask[i];
        if (!returns) free(ret);
        return;
    }
    float *s = rlc_malloc((size_t)(B ? B : 1) * sizeof(float));
    float *len = rlc_malloc((size_t)(B ? B : 1) * sizeof(float));
    int64_t nonzero = 0;
    for (int64_t b = 0; b < B; b++) {
        double acc = 0, l = 0;
        for (int64_t t = 0; t < T; t++) { acc += token_rewards[b * T + t]; l += mask[b * T + t]; }
        s[b] = (float)acc;
        len[b] = (float)l;
        nonzero += s[b] != 0;
    }
    grp_stat *st = rlc_malloc((size_t)(B ? B : 1) * sizeof(grp_stat));
    group_stats(st, s, len, group, B);
    float gpg_alpha = (float)B / (float)(nonzero > 1 ? nonzero : 1);
    float eps = (float)cfg->epsilon;
    for (int64_t b = 0; b < B; b++) {
        float a = s[b];
        int64_t gn = st[b].n;
        switch (cfg->estimator) {
        case RL_ADV_GRPO: {
            float mu = gn == 1 ? 0.0f : st[b].mean, sd = gn == 1 ? 1.0f : st[b].std;
            a = cfg->norm_adv_by_std_in_grpo ? (s[b] - mu) / (sd + eps) : s[b] - mu;
            break;
        }
        case RL_ADV_RLOO:
            if (gn > 1) {
                float fn = (float)gn, fn1 = (float)(gn - 1);
                a = (s[b] * fn) / fn1 - (st[b].mean * fn) / fn1;
            }
            break;
        case RL_ADV_REINFORCE_PLUS_PLUS_BASELINE: a = s[b] - (gn == 1 ? 0.0f : st[b].mean); break;
        case RL_ADV_GRPO_VECTORIZED: a = (s[b] - st[b].vmean) / (st[b].vstd + eps); break;
        case RL_ADV_RLOO_VECTORIZED: {
            double cc = (double)gn;
            a = gn > 1 ? (float)((cc * s[b] - st[b].sum) / (cc - 1 > 1 ? cc - 1 : 1)) : 0.0f;
            break;
        }
        case RL_ADV_OPO: a = gn == 1 ? s[b] : s[b] - (float)(st[b].lssum / st[b].lsum); break;
        case RL_ADV_GPG: a = gpg_alpha * (s[b] - (gn == 1 ? 0.0f : st[b].mean)) / 1.0f; break;
        default: CHECK(0, "estimator %d", (int)cfg->estimator);
        }
        for (int64_t t = 0; t < T; t++) adv[b * T + t] = a * mask[b * T + t];
    }
    if (cfg->estimator == RL_ADV_REINFORCE_PLUS_PLUS_BASELINE) {
        rl_masked_whiten(adv, mask, n);
        for (int64_t i = 0; i < n; i++) adv[i] *= mask[i];
    }
    if (returns) memcpy(returns, adv, (size_t)n * sizeof(float));
    free(s);
    free(len);
    free(st);
}
