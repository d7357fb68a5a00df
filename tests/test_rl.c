// test_rl.c: advantages, vanilla PPO loss (+ per-token gradients), KL penalties, agg modes and in-reward KL
// against the independent PyTorch reference tests/py/rl_ref.py, plus micro-batch invariance.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "rl/advantage.h"
#include "rl/agg.h"
#include "rl/kl.h"
#include "rl/policy_loss.h"
#include "rl/rl_step.h"
#include "testlib.h"
#include "rl_testutil.h"

static const char *g_dir;

static float *load(const char *name, int64_t *n) { return tu_load_f32(g_dir, name, n); }
static double *load64(const char *name) { return tu_load_f64(g_dir, name, NULL); }

static void test_advantages(void) {
    const int64_t B = 24, T = 16;
    float *mask = load("adv_mask", NULL), *tlr = load("adv_tlr", NULL), *gf = load("adv_group", NULL);
    int64_t group[24];
    for (int i = 0; i < B; i++) group[i] = (int64_t)gf[i];
    float *adv = rlc_malloc(B * T * sizeof(float)), *ret = rlc_malloc(B * T * sizeof(float));
    struct { const char *name; rl_adv_estimator e; int norm; const char *want; } cases[] = {
        {"grpo", RL_ADV_GRPO, 1, "adv_grpo"},
        {"grpo (Dr.GRPO, no std)", RL_ADV_GRPO, 0, "adv_drgrpo"},
        {"rloo", RL_ADV_RLOO, 1, "adv_rloo"},
        {"reinforce_plus_plus_baseline", RL_ADV_REINFORCE_PLUS_PLUS_BASELINE, 1, "adv_rppb"},
        {"grpo_vectorized", RL_ADV_GRPO_VECTORIZED, 1, "adv_grpo_vec"},
        {"rloo_vectorized (singletons get 0)", RL_ADV_RLOO_VECTORIZED, 1, "adv_rloo_vec"},
        {"opo", RL_ADV_OPO, 1, "adv_opo"},
        {"gpg", RL_ADV_GPG, 1, "adv_gpg"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rl_adv_cfg cfg = {cases[c].e, cases[c].norm, 1.0, 1e-6};
        rl_compute_advantage(adv, ret, tlr, mask, group, B, T, &cfg);
        float *want = load(cases[c].want, NULL);
        // float32 group statistics; torch accumulates slightly differently: a few ulps.
        tl_check_close(cases[c].name, adv, want, B * T, 1e-6);
        tl_check_close("returns == advantages", ret, want, B * T, 1e-6);
        free(want);
    }
    // Edge cases by construction: the singleton group (id 38) gets s/(1+1e-6), the all-equal group (45) 0.
    rl_adv_cfg cfg = {RL_ADV_GRPO, 1, 1.0, 1e-6};
    rl_compute_advantage(adv, NULL, tlr, mask, group, B, T, &cfg);
    for (int b = 0; b < B; b++) {
        float s = 0;
        for (int t = 0; t < T; t++) s += tlr[b * T + t];
        if (group[b] == 38) TL_CHECK(fabsf(adv[b * T] - s / (1.0f + 1e-6f)) <= 1e-6f, "singleton group A = s/(1+eps)");
        if (group[b] == 45) TL_CHECK(adv[b * T] == 0.0f, "all-equal group A = 0 exactly (got %g)", adv[b * T]);
    }
    float *dense = load("adv_dense", NULL), *want = load("adv_rpp", NULL), *wret = load("ret_rpp", NULL);
    rl_adv_cfg rcfg = {RL_ADV_REINFORCE_PLUS_PLUS, 1, 0.95, 1e-6};
    rl_compute_advantage(adv, ret, dense, mask, group, B, T, &rcfg);
    tl_check_close("reinforce_plus_plus advantages", adv, want, B * T, 1e-5);   // whitening over the batch
    tl_check_close("reinforce_plus_plus returns", ret, wret, B * T, 1e-6);
    rl_adv_estimator e;
    TL_CHECK(rl_adv_estimator_parse("grpo", &e) == 0 && e == RL_ADV_GRPO, "parse grpo");
    TL_CHECK(rl_adv_estimator_parse("gae", &e) != 0, "gae is not provided");
    free(dense); free(want); free(wret); free(mask); free(tlr); free(gf); free(adv); free(ret);
}

static const char *k_kl_names[] = {"kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "k1+", "abs+", "k2+",
                                   "low_var_kl+", "k3+"};

static void test_kl(void) {
    int64_t n;
    float *lp = load("kl_lp", &n), *ref = load("kl_ref", NULL);
    float *v = rlc_malloc(n * sizeof(float)), *gr = rlc_malloc(n * sizeof(float));
    for (int i = 0; i < 12; i++) {
        rl_kl_type t;
        TL_CHECK(rl_kl_type_parse(k_kl_names[i], &t) == 0, "parse %s", k_kl_names[i]);
        rl_kl_penalty(v, gr, lp, ref, n, t);
        char nm[64], fn[64];
        snprintf(fn, sizeof fn, "kl_val_%d", i);
        float *wv = load(fn, NULL);
        snprintf(fn, sizeof fn, "kl_grad_%d", i);
        float *wg = load(fn, NULL);
        snprintf(nm, sizeof nm, "kl %s value", k_kl_names[i]);
        tl_check_close(nm, v, wv, n, 1e-6);        // elementwise fp32 (expf vs torch exp: 1 ulp)
        snprintf(nm, sizeof nm, "kl %s grad", k_kl_names[i]);
        tl_check_close(nm, gr, wg, n, 1e-6);
        free(wv); free(wg);
    }
    rl_kl_type t;
    TL_CHECK(rl_kl_type_parse("full", &t) != 0, "'full' is rejected");
    TL_CHECK(rl_kl_type_parse("k4", &t) != 0, "'k4' is rejected");
    free(lp); free(ref); free(v); free(gr);
}

static void test_policy_loss(void) {
    const int64_t B = 6, T = 20, n = B * T;
    float *lp = load("pl_lp", NULL), *old = load("pl_old", NULL), *adv = load("pl_adv", NULL);
    float *mask = load("pl_mask", NULL), *ent = load("pl_ent", NULL), *ref = load("pl_ref", NULL);
    float *isw = load("pl_isw", NULL);
    float *glp = rlc_malloc(n * sizeof(float)), *gent = rlc_malloc(n * sizeof(float));
    float msum = 0;
    for (int64_t i = 0; i < n; i++) msum += mask[i];
    rl_batch_info gbis[2] = {{2, msum * 1.7, 10.0, 0}, {1, 0, 0, 37.0}};
    for (int ci = 0; ci < 2; ci++)
        for (int mi = 0; mi < 5; mi++)
            for (int wi = 0; wi < 2; wi++) {
                rl_loss_cfg cfg;
                rl_loss_cfg_defaults(&cfg);
                cfg.clip = (rl_clip){0.2, 0.28, 3.0};
                cfg.agg = (rl_agg_mode)mi;
                cfg.entropy_coeff = 0.01;
                cfg.use_kl_loss = 1;
                cfg.kl_loss_coef = 0.1;
                cfg.kl_loss_type = (rl_kl_type){RL_KL_K3, 0};
                memset(glp, 0, n * sizeof(float));
                memset(gent, 0, n * sizeof(float));
                rl_loss_out o;
                rl_ppo_loss(&o, glp, gent, lp, old, ref, adv, ent, mask, wi ? isw : NULL, B, T, &cfg, &gbis[ci]);
                char tag[64], fn[128], nm[160];
                snprintf(tag, sizeof tag, "%d_%d_%d", ci, mi, wi);
                snprintf(fn, sizeof fn, "pl_out_%s", tag);
                double *w = load64(fn);
                const char *mn = rl_agg_mode_name((rl_agg_mode)mi);
                double got[7] = {o.loss, o.pg_loss, o.entropy_loss, o.kl_loss, o.pg.pg_clipfrac, o.pg.ppo_kl,
                                 o.pg.pg_clipfrac_lower};
                const char *what[7] = {"loss", "pg_loss", "entropy_loss", "kl_loss", "pg_clipfrac", "ppo_kl",
                                       "pg_clipfrac_lower"};
                for (int k = 0; k < 7; k++) {
                    // scalar reductions in fp32 (torch) vs double (here): 1e-5 relative
                    double tol = 1e-5 * fmax(1.0, fabs(w[k]));
                    TL_CHECK(fabs(got[k] - w[k]) <= tol, "%s %s gbi%d isw%d: got %.9g want %.9g", mn, what[k], ci, wi,
                             got[k], w[k]);
                }
                free(w);
                snprintf(fn, sizeof fn, "pl_glp_%s", tag);
                float *wg = load(fn, NULL);
                snprintf(nm, sizeof nm, "d loss/d logp [%s gbi%d isw%d]", mn, ci, wi);
                tl_check_close(nm, glp, wg, n, 1e-5);   // per-token fp32 chain; weights rounded to fp32
                free(wg);
                snprintf(fn, sizeof fn, "pl_gent_%s", tag);
                wg = load(fn, NULL);
                snprintf(nm, sizeof nm, "d loss/d entropy [%s gbi%d isw%d]", mn, ci, wi);
                tl_check_close(nm, gent, wg, n, 1e-6);
                free(wg);
            }
    free(lp); free(old); free(adv); free(mask); free(ent); free(ref); free(isw); free(glp); free(gent);
}

static void test_in_reward_kl(void) {
    const int64_t B = 5, T = 9;
    float *m = load("ik_mask", NULL), *sc = load("ik_scores", NULL), *old = load("ik_old", NULL);
    float *ref = load("ik_ref", NULL), *wr = load("ik_rewards", NULL);
    double *wo = load64("ik_out");
    float rw[45];
    rl_kl_ctrl c;
    rl_kl_ctrl_init(&c, "adaptive", 0.05, 0.01, 100.0);
    rl_kl_type t = {RL_KL_K1, 0};
    double beta;
    double cur = rl_apply_kl_penalty(rw, sc, old, ref, m, B, T, t, &c, &beta);
    tl_check_close("in-reward KL token rewards", rw, wr, B * T, 1e-6);
    TL_CHECK(fabs(cur - wo[0]) <= 1e-6 * fmax(1, fabs(wo[0])), "current_kl %.9g vs %.9g", cur, wo[0]);
    TL_CHECK(beta == wo[1], "beta before update");
    TL_CHECK(fabs(c.value - wo[2]) <= 1e-9, "adaptive kl_ctrl value %.12g vs %.12g", c.value, wo[2]);
    rl_kl_ctrl f;
    rl_kl_ctrl_init(&f, "fixed", 0.05, 0.01, 100.0);
    rl_kl_ctrl_update(&f, 123.0, 5);
    TL_CHECK(f.value == 0.05, "fixed controller does not move");
    // The same through rl_step_advantages (scores placed at the last valid token, then GRPO).
    float score[5], ts[45], tr[45], adv[45], ret[45];
    int64_t len[5], grp[5] = {1, 1, 2, 2, 2};
    for (int b = 0; b < 5; b++) {
        len[b] = 0;
        score[b] = 0;
        for (int t2 = 0; t2 < 9; t2++) {
            if (m[b * 9 + t2] != 0) len[b] = t2 + 1;
            score[b] += sc[b * 9 + t2];
        }
    }
    rl_kl_ctrl_init(&c, "adaptive", 0.05, 0.01, 100.0);
    rl_step_cfg scfg = {{RL_ADV_GRPO, 1, 1.0, 1e-6}, 1, {RL_KL_K1, 0}};
    rl_step_metrics sm;
    rl_step_advantages(ts, tr, adv, ret, &sm, score, len, grp, m, old, ref, B, T, &scfg, &c);
    tl_check_close("rl_step: token scores", ts, sc, B * T, 0);
    tl_check_close("rl_step: token rewards", tr, wr, B * T, 1e-6);
    float want_adv[45];
    rl_adv_cfg acfg = {RL_ADV_GRPO, 1, 1.0, 1e-6};
    rl_compute_advantage(want_adv, NULL, wr, m, grp, B, T, &acfg);
    tl_check_close("rl_step: advantages", adv, want_adv, B * T, 1e-6);
    TL_CHECK(fabs(sm.reward_kl_penalty - wo[0]) <= 1e-6 && sm.reward_kl_penalty_coeff == 0.05, "rl_step metrics");
    free(m); free(sc); free(old); free(ref); free(wr); free(wo);
}

// The gradient summed over micro-batches equals the full mini-batch's, for every agg mode, given the global
// batch info of the mini-batch (random data; no oracle needed).
static void test_microbatch_invariance(void) {
    const int64_t B = 8, T = 12, n = B * T;
    tl_rng r;
    tl_rng_init(&r, 7);
    float lp[96], old[96], adv[96], mask[96], ent[96], ref[96];
    for (int64_t b = 0; b < B; b++) {
        int64_t len = b == 3 ? 0 : 1 + (int64_t)tl_uniform(&r, 0, (float)T);
        if (len > T) len = T;
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            lp[i] = -tl_uniform(&r, 0, 3);
            old[i] = lp[i] + tl_normal(&r, 0.5f);
            ref[i] = lp[i] + tl_normal(&r, 0.3f);
            adv[i] = tl_normal(&r, 1.0f);
            ent[i] = tl_uniform(&r, 0, 2);
            mask[i] = t < len ? 1.0f : 0.0f;
        }
    }
    double N = 0, G = 0;
    for (int64_t b = 0; b < B; b++) {
        double s = 0;
        for (int64_t t = 0; t < T; t++) s += mask[b * T + t];
        N += s;
        G += 1;   // verl's G = ppo_mini_batch_size * n counts every sequence
    }
    for (int mi = 0; mi < 5; mi++) {
        rl_batch_info gbi = {1, N, G, mi == RL_AGG_SEQ_MEAN_TOKEN_SUM_NORM ? 64.0 : 0};
        rl_loss_cfg cfg;
        rl_loss_cfg_defaults(&cfg);
        cfg.agg = (rl_agg_mode)mi;
        cfg.entropy_coeff = 0.01;
        cfg.use_kl_loss = 1;
        cfg.kl_loss_type = (rl_kl_type){RL_KL_K3, 0};
        float g1[96] = {0}, e1[96] = {0}, g4[96] = {0}, e4[96] = {0};
        rl_loss_out o;
        rl_ppo_loss(&o, g1, e1, lp, old, ref, adv, ent, mask, NULL, B, T, &cfg, &gbi);
        double full = o.loss, sum = 0;
        for (int64_t b0 = 0; b0 < B; b0 += 2) {   // 4 micro-batches of 2 sequences
            int64_t off = b0 * T;
            rl_ppo_loss(&o, g4 + off, e4 + off, lp + off, old + off, ref + off, adv + off, ent + off, mask + off,
                        NULL, 2, T, &cfg, &gbi);
            sum += o.loss;
        }
        char nm[96];
        snprintf(nm, sizeof nm, "micro-batch invariance grad [%s]", rl_agg_mode_name((rl_agg_mode)mi));
        tl_check_close(nm, g4, g1, n, 1e-6);
        snprintf(nm, sizeof nm, "micro-batch invariance d/dentropy [%s]", rl_agg_mode_name((rl_agg_mode)mi));
        tl_check_close(nm, e4, e1, n, 1e-6);
        TL_CHECK(fabs(sum - full) <= 1e-6 * fmax(1, fabs(full)), "micro-batch loss sum %.9g vs %.9g", sum, full);
    }
    rl_agg_mode m;
    TL_CHECK(rl_agg_mode_parse("seq-mean-token-sum-norm", &m) == 0 && m == RL_AGG_SEQ_MEAN_TOKEN_SUM_NORM, "parse");
    TL_CHECK(rl_agg_mode_parse("seq-mean", &m) != 0, "unknown mode rejected");
}

int main(void) {
    test_microbatch_invariance();
    if (!tl_have_torch()) {
        tl_skip("torch not importable under /usr/bin/python3: oracle tests skipped");
        return tl_summary();
    }
    char *dir = tl_tmpdir("rl");
    g_dir = dir;
    if (tl_system("/usr/bin/python3 tests/py/rl_ref.py %s 1234 >/dev/null", dir) != 0) {
        TL_CHECK(0, "tests/py/rl_ref.py failed");
        return tl_summary();
    }
    test_advantages();
    test_kl();
    test_policy_loss();
    test_in_reward_kl();
    tl_system("rm -rf %s", dir);
    free(dir);
    return tl_summary();
}
