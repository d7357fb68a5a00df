// test_policy_losses.c: every registered policy loss (loss, per-token gradient, metrics) against the independent
// PyTorch reference tests/py/policy_losses_ref.py on fresh random inputs (seed printed; RLC_TEST_SEED repeats one),
// over aggregation modes, global batch info, IS weights and edge cases (ratio = 1, all-equal groups, clipping on
// both sides, log-ratios past the +-20 clamp and gspo's cap, empty rows); plus the registry, the parameter errors
// and the cheap identities of the spec (on-policy gradient -A).
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/common.h"
#include "rl/policy_loss.h"
#include "testlib.h"
#include "rl_testutil.h"

enum { B = 6, T = 20, N = B * T };
static const char *g_dir;

static double *load64(const char *name, int64_t *n) { return tu_load_f64(g_dir, name, n); }
static void loadf(const char *name, float *out, int64_t want) {
    int64_t n;
    double *d = load64(name, &n);
    CHECK(n == want, "%s: %lld values, want %lld", name, (long long)n, (long long)want);
    for (int64_t i = 0; i < n; i++) out[i] = (float)d[i];
    free(d);
}

typedef struct { float lp[N], old[N], adv[N], mask[N], isw[N]; } inputs;

static void load_inputs(const char *kind, inputs *in) {
    char nm[64];
    snprintf(nm, sizeof nm, "%s_lp", kind); loadf(nm, in->lp, N);
    snprintf(nm, sizeof nm, "%s_old", kind); loadf(nm, in->old, N);
    snprintf(nm, sizeof nm, "%s_adv", kind); loadf(nm, in->adv, N);
    snprintf(nm, sizeof nm, "%s_mask", kind); loadf(nm, in->mask, N);
    snprintf(nm, sizeof nm, "%s_isw", kind); loadf(nm, in->isw, N);
}

// |got - want| / max(|want|, 1): the metrics are fractions and means of O(1) values.
static int check_metric(const char *name, double got, double want) {
    float g = (float)got, w = (float)want;
    double e = fabs(got - want) / (fabs(want) > 1 ? fabs(want) : 1);
    TL_CHECK(e <= 1e-5, "%s: got %.9g want %.9g", name, (double)g, (double)w);
    return e <= 1e-5;
}

static void run_manifest(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/manifest.txt", g_dir);
    char *text = rlc_read_file(path, NULL);
    const char *kinds[] = {"rand", "onpolicy", "flat", "rowadv", "extreme"};
    inputs ins[5];
    for (int k = 0; k < 5; k++) load_inputs(kinds[k], &ins[k]);
    int lines = 0, per_mode[RL_PG_N_MODES] = {0};
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[32], mode[32], kind[32], agg[64];
        int isw_on, gbi_i;
        double v[14];
        int got = sscanf(line, "%31s %31s %31s %63s %d %d %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf", name,
                         mode, kind, agg, &isw_on, &gbi_i, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7],
                         &v[8], &v[9], &v[10], &v[11], &v[12], &v[13]);
        CHECK(got == 20, "manifest line '%s'", line);
        rl_loss_cfg cfg;
        rl_loss_cfg_defaults(&cfg);
        CHECK(rl_pg_mode_parse(mode, &cfg.mode) == 0, "mode %s", mode);
        CHECK(rl_agg_mode_parse(agg, &cfg.agg) == 0, "agg %s", agg);
        cfg.clip = (rl_clip){v[0], v[1], v[2]};
        cfg.tau_pos = v[3]; cfg.tau_neg = v[4];
        cfg.clip_cov_ratio = v[5]; cfg.clip_cov_lb = v[6]; cfg.clip_cov_ub = v[7];
        cfg.kl_cov_ratio = v[8]; cfg.ppo_kl_coef = v[9]; cfg.dro_beta = v[10];
        cfg.rc.is = (rl_rc_is)(int)v[11]; cfg.rc.is_upper = v[12]; cfg.rc_loss_type = (rl_rc_loss)(int)v[13];
        cfg.seed = (uint64_t)lines;
        int k = 0;
        while (strcmp(kinds[k], kind)) k++;
        inputs *x = &ins[k];
        float msum = 0;
        for (int i = 0; i < N; i++) msum += x->mask[i];
        rl_batch_info gbis[3] = {{1, 0, 0, 0}, {2, msum * 1.7, 2.0 * B, 0}, {1, 0, 0, 37.0}};
        uint8_t sel[N];
        rl_pg_in in = {x->lp, x->old, x->adv, x->mask, isw_on ? x->isw : NULL, B, T, sel};
        float dlp[N];
        for (int i = 0; i < N; i++) dlp[i] = 0.25f;   // accumulates on top of what is there
        rl_pg_metrics met;
        double loss = rl_policy_loss(dlp, &met, &in, &cfg, &gbis[gbi_i]);
        for (int i = 0; i < N; i++) dlp[i] -= 0.25f;
        char nm[320], tag[200];
        snprintf(tag, sizeof tag, "%s %s/%s/%s isw=%d gbi=%d", name, mode, kind, agg, isw_on, gbi_i);
        snprintf(nm, sizeof nm, "%s_loss", name);
        double *wl = load64(nm, NULL);
        snprintf(nm, sizeof nm, "%s_grad", name);
        float wg[N];
        loadf(nm, wg, N);
        snprintf(nm, sizeof nm, "%s_met", name);
        double *wm = load64(nm, NULL);
        double want_loss = wl[0];
        if (cfg.mode == RL_PG_CLIP_COV) {
            // rlc draws its own random subset: it must be min(k, #candidates) of the candidates; the expected loss
            // and gradient follow from the reference's per-token contributions and undropped gradient.
            float cand[N], contrib[N], gfull[N], kk;
            snprintf(nm, sizeof nm, "%s_cand", name); loadf(nm, cand, N);
            snprintf(nm, sizeof nm, "%s_contrib", name); loadf(nm, contrib, N);
            snprintf(nm, sizeof nm, "%s_gradfull", name); loadf(nm, gfull, N);
            snprintf(nm, sizeof nm, "%s_k", name); loadf(nm, &kk, 1);
            int nc = 0, nd = 0, outside = 0;
            double el = 0, dm = 0, sm = 0;
            for (int i = 0; i < N; i++) {
                nc += cand[i] != 0;
                nd += sel[i];
                outside += sel[i] && cand[i] == 0;
                if (!sel[i]) el += contrib[i];
                wg[i] = sel[i] ? 0.0f : gfull[i];
                dm += sel[i] * x->mask[i];
                sm += x->mask[i];
            }
            int wantn = nc < (int)kk ? nc : (int)kk;
            TL_CHECK(outside == 0 && nd == wantn, "%s: %d dropped (%d outside the candidates), want %d of %d", tag, nd,
                     outside, wantn, nc);
            if (nc > (int)kk) { want_loss = el; wm[0] = dm / (sm + 1e-8); }
            else {   // torch's fp32 sum of terms of both signs: its rounding scales with the aggregate of |L| (wl[1])
                const double cscale = fabs(wl[0]) > wl[1] ? fabs(wl[0]) : wl[1];
                TL_CHECK(fabs(el - wl[0]) <= 1e-5 * (cscale > 1e-30 ? cscale : 1e-30),
                         "%s: contributions sum %.9g, loss %.9g (scale %.3g)", tag, el, wl[0], wl[1]);
            }
        }
        if (cfg.mode == RL_PG_KL_COV) {
            float ws[N];
            snprintf(nm, sizeof nm, "%s_sel", name); loadf(nm, ws, N);
            int same = 1;
            for (int i = 0; i < N; i++) same &= (ws[i] != 0) == (sel[i] != 0);
            TL_CHECK(same, "%s: the top-k covariance tokens", tag);
        }
        // fp32 loss: torch sums fp32 terms, rlc in double; positive and negative terms cancel, so the error is
        // relative to the same aggregation of |L| (wl[1]), the scale of the rounding.
        double lscale = fabs(want_loss) > wl[1] ? fabs(want_loss) : wl[1];
        TL_CHECK(fabs(loss - want_loss) <= 1e-5 * (lscale > 1e-30 ? lscale : 1e-30), "%s: loss %.9g want %.9g (scale %.3g)",
                 tag, loss, want_loss, wl[1]);
        // per-token gradient: elementwise fp32 formulas, relative to the largest entry.
        snprintf(nm, sizeof nm, "%s: dloss/dlp", tag);
        tl_check_close(nm, dlp, wg, N, 1e-4);
        const rl_pg_loss_def *def = &rl_pg_losses[cfg.mode];
        unsigned want_present = cfg.mode == RL_PG_BYPASS_MODE ? (cfg.rc_loss_type == RL_RC_PPO_CLIP ? RL_PGM_ALL
                                                                                                     : RL_PGM_PPO_KL)
                                                              : def->metrics;
        TL_CHECK(met.present == want_present, "%s: metrics present %u want %u", tag, met.present, want_present);
        double gotm[3] = {met.pg_clipfrac, met.ppo_kl, met.pg_clipfrac_lower};
        unsigned bit[3] = {RL_PGM_CLIPFRAC, RL_PGM_PPO_KL, RL_PGM_CLIPFRAC_LOWER};
        const char *mn[3] = {"pg_clipfrac", "ppo_kl", "pg_clipfrac_lower"};
        for (int j = 0; j < 3; j++) {
            TL_CHECK(!isnan(wm[j]) == !!(met.present & bit[j]), "%s: %s reported iff the reference has it", tag, mn[j]);
            if (!isnan(wm[j])) {
                snprintf(nm, sizeof nm, "%s: actor/%s", tag, mn[j]);
                check_metric(nm, gotm[j], wm[j]);
            }
        }
        free(wl);
        free(wm);
        per_mode[cfg.mode]++;
        lines++;
    }
    free(text);
    for (int m = 0; m < RL_PG_N_MODES; m++)
        TL_CHECK(per_mode[m] > 0, "the reference covers %s", rl_pg_losses[m].name);
    printf("%d reference cases\n", lines);
}

// On the first mini-batch (lp == old) every loss but geo_mean has gradient -A * (aggregation weight).
static void test_onpolicy_identity(void) {
    tl_rng r;
    tl_rng_init(&r, 7);
    float lp[N], adv[N], mask[N], w[N];
    for (int i = 0; i < N; i++) {
        lp[i] = -3 * tl_uniform(&r, 0, 1) - 0.01f;
        adv[i] = tl_normal(&r, 1);
        mask[i] = (i % T) < (i / T) * 3 + 2;
    }
    for (int m = 0; m < RL_PG_N_MODES; m++) {
        if (m == RL_PG_GEO_MEAN) continue;
        rl_loss_cfg cfg;
        rl_loss_cfg_defaults(&cfg);
        cfg.mode = (rl_pg_mode)m;
        cfg.dro_beta = 0.1;
        cfg.clip_cov_lb = 1e30; cfg.clip_cov_ub = 2e30;   // no covariance candidates: nothing dropped
        cfg.ppo_kl_coef = 0.5;                            // |d| = 0: the penalty adds 0 (abs' = 0 at 0)
        int forced = rl_pg_losses[m].forced_agg;
        rl_agg_weights(w, mask, B, T, forced >= 0 ? (rl_agg_mode)forced : cfg.agg, NULL);
        float want[N], dlp[N] = {0};
        for (int i = 0; i < N; i++) want[i] = -adv[i] * w[i];
        rl_pg_in in = {lp, lp, adv, mask, NULL, B, T, NULL};
        rl_policy_loss(dlp, NULL, &in, &cfg, NULL);
        char nm[96];
        snprintf(nm, sizeof nm, "%s: on-policy gradient = -A * agg weight", rl_pg_losses[m].name);
        tl_check_close(nm, dlp, want, N, 1e-6);
    }
}

static void test_registry_and_errors(void) {
    for (int m = 0; m < RL_PG_N_MODES; m++) {
        rl_pg_mode got;
        TL_CHECK(rl_pg_mode_parse(rl_pg_losses[m].name, &got) == 0 && got == (rl_pg_mode)m, "parse %s",
                 rl_pg_losses[m].name);
        TL_CHECK(strstr(rl_pg_mode_names(), rl_pg_losses[m].name) != NULL, "%s listed", rl_pg_losses[m].name);
    }
    rl_pg_mode x;
    TL_CHECK(rl_pg_mode_parse("ppo", &x) != 0, "unknown mode");
    TL_CHECK(rl_pg_losses[RL_PG_GSPO].forced_agg == RL_AGG_SEQ_MEAN_TOKEN_MEAN, "gspo forces seq-mean-token-mean");
    TL_CHECK(rl_pg_losses[RL_PG_SAPO].forced_agg == RL_AGG_SEQ_MEAN_TOKEN_MEAN, "sapo forces seq-mean-token-mean");
}

// With the global batch info (N tokens, G sequences of the mini-batch) the losses that aggregate per token or per
// sequence give the same summed loss and gradient whether the mini-batch is one micro-batch or four; geo_mean
// (its own per-micro-batch mean) and clip_cov/kl_cov (micro-batch covariance statistics) are micro-batch-local
// in verl too. Also: clip_cov's subset repeats for the same seed.
static void test_microbatch_invariance(void) {
    tl_rng r;
    tl_rng_init(&r, 11);
    float lp[N], old[N], adv[N], mask[N];
    double msum = 0;
    for (int i = 0; i < N; i++) {
        lp[i] = -3 * tl_uniform(&r, 0, 1) - 0.01f;
        old[i] = lp[i] + 0.6f * (tl_uniform(&r, 0, 1) - 0.5f);
        adv[i] = tl_normal(&r, 1);
        mask[i] = (i % T) < ((i / T) * 7) % T + 1;
        msum += mask[i];
    }
    for (int m = 0; m < RL_PG_N_MODES; m++) {
        if (m == RL_PG_GEO_MEAN || m == RL_PG_CLIP_COV || m == RL_PG_KL_COV) continue;
        for (int ag = 0; ag < 5; ag++) {
            rl_loss_cfg cfg;
            rl_loss_cfg_defaults(&cfg);
            cfg.mode = (rl_pg_mode)m;
            cfg.agg = (rl_agg_mode)ag;
            cfg.dro_beta = 0.1;
            cfg.rc_loss_type = RL_RC_REINFORCE;
            cfg.rc.is = RL_RC_IS_SEQUENCE;
            rl_batch_info gbi = {1, msum, (double)B, 64.0};
            float g1[N] = {0}, g4[N] = {0};
            rl_pg_in in = {lp, old, adv, mask, NULL, B, T, NULL};
            double full = rl_policy_loss(g1, NULL, &in, &cfg, &gbi), sum = 0;
            for (int b0 = 0; b0 < B; b0 += 2) {
                int64_t o = (int64_t)b0 * T;
                rl_pg_in part = {lp + o, old + o, adv + o, mask + o, NULL, 2, T, NULL};
                sum += rl_policy_loss(g4 + o, NULL, &part, &cfg, &gbi);
            }
            char nm[128];
            snprintf(nm, sizeof nm, "%s/%s: 4 micro-batches = 1", rl_pg_losses[m].name, rl_agg_mode_name((rl_agg_mode)ag));
            // the same per-token fp32 terms, summed in a different grouping (double)
            TL_CHECK(fabs(full - sum) <= 1e-6 * (fabs(full) > 1e-3 ? fabs(full) : 1e-3), "%s: loss %.9g vs %.9g", nm, full, sum);
            tl_check_close(nm, g4, g1, N, 1e-6);
        }
    }
    rl_loss_cfg cfg;
    rl_loss_cfg_defaults(&cfg);
    cfg.mode = RL_PG_CLIP_COV;
    cfg.clip_cov_lb = -10; cfg.clip_cov_ub = 10; cfg.clip_cov_ratio = 0.05;
    uint8_t s1[N], s2[N];
    rl_pg_in in = {lp, old, adv, mask, NULL, B, T, s1};
    rl_policy_loss(NULL, NULL, &in, &cfg, NULL);
    in.selected = s2;
    rl_policy_loss(NULL, NULL, &in, &cfg, NULL);
    int nsel = 0;
    for (int i = 0; i < N; i++) nsel += s1[i];
    TL_CHECK(!memcmp(s1, s2, N) && nsel == (int)(0.05 * msum), "clip_cov: same seed, same %d dropped tokens", nsel);
}

int main(int argc, char **argv) {
    (void)argc; (void)argv;
    test_registry_and_errors();
    test_onpolicy_identity();
    test_microbatch_invariance();
    if (!tl_have_torch()) {
        tl_skip("torch not importable under /usr/bin/python3: reference cases skipped");
        return tl_summary();
    }
    unsigned seed = getenv("RLC_TEST_SEED") ? (unsigned)strtoul(getenv("RLC_TEST_SEED"), NULL, 10)
                                            : (unsigned)time(NULL) % 100000u;
    printf("seed %u (RLC_TEST_SEED=%u repeats it)\n", seed, seed);
    char *dir = tl_tmpdir("policy_losses");
    g_dir = dir;
    if (tl_system("/usr/bin/python3 tests/py/policy_losses_ref.py %s %u >/dev/null", dir, seed) != 0) {
        TL_CHECK(0, "policy_losses_ref.py failed");
    } else {
        run_manifest();
    }
    tl_system("rm -rf %s", dir);
    free(dir);
    return tl_summary();
}
