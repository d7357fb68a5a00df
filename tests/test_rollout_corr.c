// test_rollout_corr.c: verl's rollout correction (src/rl/rollout_corr.h) against an independent PyTorch reference
// (tests/py/rollout_corr_ref.py, float32 as verl) on fresh random log-probs with outliers, ragged masks and an
// empty row: IS weights per token and per sequence (TIS cap, IcePop band, batch normalisation), the rejection mask of
// every rollout_rs option (alone, combined, with shared and per-option thresholds), and every rollout_is_* /
// rollout_rs_* metric; what bypass_mode's actor reports per micro-batch (those plus the off-policy metrics between the
// current and the rollout log-probs), averaged over micro- and mini-batches as verl's actor averages them; plus the
// config parser's accepted forms. Bad values are one-line errors (tests/test_ppo.c runs them through the binary).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "rl/rollout_corr.h"
#include "testlib.h"
#include "rl_testutil.h"
#include "trainer/metrics.h"

static const char *sget(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_parse(void) {
    rl_rollout_corr_cfg c;
    rl_rollout_corr_parse(&c, "token", "2.0", NULL, NULL, 0);
    TL_CHECK(c.is == RL_RC_IS_TOKEN && c.is_upper == 2.0 && !c.is_icepop && c.n_rs == 0, "TIS token 2.0");
    rl_rollout_corr_parse(&c, "sequence", "0.5_3", NULL, NULL, 1);
    TL_CHECK(c.is == RL_RC_IS_SEQUENCE && c.is_icepop && c.is_lower == 0.5 && c.is_upper == 3.0 && c.is_batch_normalize,
             "IcePop 0.5_3 per sequence, normalised");
    rl_rollout_corr_parse(&c, NULL, "2.0", " token_k1 ,seq_max_k3,token_k1", "0.5_2, 0.1", 0);
    TL_CHECK(c.n_rs == 2 && c.rs[0] == RL_RS_TOKEN_K1 && c.rs[1] == RL_RS_SEQ_MAX_K3, "options in order, duplicates dropped");
    TL_CHECK(fabs(c.rs_lower[0] - log(0.5)) < 1e-12 && fabs(c.rs_upper[0] - log(2.0)) < 1e-12 && c.rs_upper[1] == 0.1,
             "k1 band in log space, k3 upper bound");
    rl_rollout_corr_parse(&c, NULL, NULL, "seq_mean_k1", "1.25", 0);
    TL_CHECK(fabs(c.rs_lower[0] - log(0.8)) < 1e-12 && fabs(c.rs_upper[0] - log(1.25)) < 1e-12, "k1 single bound u: [1/u, u]");
    TL_CHECK(!rl_rollout_corr_active(&(rl_rollout_corr_cfg){0}), "an empty config is inactive");
}

// One case: weights 1e-6 (elementwise float32 exp/min, identical formulas); the mask exactly; metrics 1e-5 relative
// (float32 reductions in torch vs double here).
static void run_case(const cJSON *cs, const float *train, const float *rollout, const float *mask, int64_t B, int64_t T,
                     int idx) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(cs, "cfg");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(c, "norm");
    rl_rollout_corr_cfg cfg;
    rl_rollout_corr_parse(&cfg, sget(c, "is"), sget(c, "is_thr"), sget(c, "rs"), sget(c, "rs_thr"), cJSON_IsNumber(nm) && nm->valueint);
    const int64_t n = B * T;
    float *w = rlc_calloc((size_t)n, sizeof(float)), *m2 = rlc_calloc((size_t)n, sizeof(float));
    rl_rc_metrics met = {0};
    rl_rollout_corr(cfg.is != RL_RC_IS_NONE ? w : NULL, m2, &met, train, rollout, mask, B, T, &cfg);
    char name[96];
    const cJSON *jw = cJSON_GetObjectItemCaseSensitive(cs, "w"), *jm = cJSON_GetObjectItemCaseSensitive(cs, "mask");
    if (jw) {
        float *want = rlc_malloc(sizeof(float) * (size_t)n);
        int64_t k = 0;
        for (const cJSON *x = jw->child; x && k < n; x = x->next) want[k++] = (float)x->valuedouble;
        snprintf(name, sizeof name, "case %d: IS weights", idx);
        tl_check_close(name, w, want, n, 1e-6);
        free(want);
    }
    if (jm) {
        int64_t k = 0, bad = 0;
        for (const cJSON *x = jm->child; x && k < n; x = x->next, k++) bad += m2[k] != (float)x->valuedouble;
        TL_CHECK(k == n && bad == 0, "case %d: rejection mask equals torch's (%lld of %lld differ)", idx, (long long)bad, (long long)n);
    } else {
        TL_CHECK(!memcmp(m2, mask, sizeof(float) * (size_t)n), "case %d: no rejection keeps the mask", idx);
    }
    const cJSON *jmet = cJSON_GetObjectItemCaseSensitive(cs, "metrics");
    int nwant = 0, nbad = 0;
    for (const cJSON *x = jmet->child; x; x = x->next) {
        nwant++;
        int found = -1;
        for (int k = 0; k < met.n; k++)
            if (!strcmp(met.key[k], x->string)) found = k;
        double want = x->valuedouble, got = found >= 0 ? met.val[found] : NAN;
        double tol = 1e-5 * fmax(fabs(want), 1e-3);   // near-zero metrics (a fraction of 0, a std of 0): absolute 1e-8
        if (!(found >= 0 && fabs(got - want) <= tol)) {
            nbad++;
            TL_CHECK(0, "case %d: rollout_corr/%s: rlc %.9g vs torch %.9g", idx, x->string, got, want);
        }
    }
    TL_CHECK(nbad == 0 && nwant == met.n, "case %d (%s%s%s): %d metrics equal torch's, rlc reports %d", idx,
             sget(c, "is") ? sget(c, "is") : "", sget(c, "rs") ? " rs " : "", sget(c, "rs") ? sget(c, "rs") : "", nwant, met.n);
    free(w);
    free(m2);
}

// bypass_mode's actor metrics: rl_rollout_corr_bypass_metrics per micro-batch (row ranges of the inputs as the
// current and rollout log-probs), reduced by the actor's accumulator (mean over a mini-batch's micro-batches, then
// over mini-batches), against the reference's. 1e-5 relative (float32 IS / rejection statistics in torch).
static void run_bypass(const cJSON *cs, const float *train, const float *rollout, const float *mask, int64_t T, int idx) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(cs, "cfg");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(c, "norm");
    rl_rollout_corr_cfg cfg;
    rl_rollout_corr_parse(&cfg, sget(c, "is"), sget(c, "is_thr"), sget(c, "rs"), sget(c, "rs_thr"), cJSON_IsNumber(nm) && nm->valueint);
    rlc_actor_metrics *am = rlc_calloc(1, sizeof *am);
    rlc_actor_metrics_init(am);
    rl_rc_metrics *met = rlc_calloc(1, sizeof *met);
    const float z = 0.0f, one = 1.0f;
    rl_rollout_corr_bypass_metrics(met, &z, &z, &one, 1, 1, &cfg);   // the key list, as the trainer registers it
    for (int k = 0; k < met->n; k++) rlc_actor_metrics_key(am, met->key[k]);
    for (const cJSON *mini = cJSON_GetObjectItemCaseSensitive(cs, "mini")->child; mini; mini = mini->next) {
        for (const cJSON *r = mini->child; r; r = r->next) {
            const int64_t lo = cJSON_GetArrayItem(r, 0)->valueint, hi = cJSON_GetArrayItem(r, 1)->valueint;
            met->n = 0;
            rl_rollout_corr_bypass_metrics(met, train + lo * T, rollout + lo * T, mask + lo * T, hi - lo, T, &cfg);
            for (int k = 0; k < met->n; k++) rlc_actor_metrics_x(am, met->key[k], met->val[k]);
            rlc_actor_metrics_x_done(am);
            rlc_actor_metrics_micro(am, 0, 0, 0, 0, 0, 0, 0);
        }
        rlc_actor_metrics_minibatch(am, 0.0);
    }
    rlc_metrics m;
    rlc_metrics_init(&m);
    rlc_actor_metrics_put(am, &m, 0, 0, 0, 0);
    int nwant = 0, nbad = 0;
    for (const cJSON *x = cJSON_GetObjectItemCaseSensitive(cs, "metrics")->child; x; x = x->next) {
        nwant++;
        int found = 0;
        double got = rlc_metrics_get(&m, x->string, &found), want = x->valuedouble;
        double tol = 1e-5 * fmax(fabs(want), 1e-3);
        if (!(found && fabs(got - want) <= tol)) {
            nbad++;
            TL_CHECK(0, "bypass case %d: %s: rlc %.9g vs torch %.9g", idx, x->string, got, want);
        }
    }
    TL_CHECK(nbad == 0 && nwant == am->n_x, "bypass case %d (%s%s%s): %d micro-batch means equal torch's, rlc reports %d",
             idx, sget(c, "is") ? sget(c, "is") : "off-policy only", sget(c, "rs") ? " rs " : "", sget(c, "rs") ? sget(c, "rs") : "",
             nwant, am->n_x);
    rlc_metrics_free(&m);
    free(met);
    free(am);
}

int main(void) {
    test_parse();
    if (!tl_have_torch()) {
        tl_skip("PyTorch (/usr/bin/python3 -c 'import torch') not available: the torch comparisons are skipped");
        return tl_summary();
    }
    char *dir = tl_tmpdir("rollout_corr");
    for (int seed = 11; seed <= 12; seed++) {
        int rc = tl_system("/usr/bin/python3 tests/py/rollout_corr_ref.py %s %d", dir, seed);
        TL_CHECK(rc == 0, "rollout_corr_ref.py exit %d", rc);
        if (rc != 0) break;
        int64_t n1, n2, n3;
        float *train = tu_load_f32(dir, "train", &n1), *rollout = tu_load_f32(dir, "rollout", &n2), *mask = tu_load_f32(dir, "mask", &n3);
        char path[4200];
        snprintf(path, sizeof path, "%s/cases.json", dir);
        size_t len;
        char *text = rlc_read_file(path, &len);
        cJSON *j = cJSON_Parse(text);
        const int64_t B = cJSON_GetObjectItemCaseSensitive(j, "B")->valueint, T = cJSON_GetObjectItemCaseSensitive(j, "T")->valueint;
        TL_CHECK(n1 == B * T && n2 == B * T && n3 == B * T, "inputs are (B, T)");
        int idx = 0;
        for (const cJSON *cs = cJSON_GetObjectItemCaseSensitive(j, "cases")->child; cs; cs = cs->next) run_case(cs, train, rollout, mask, B, T, idx++);
        idx = 0;
        for (const cJSON *cs = cJSON_GetObjectItemCaseSensitive(j, "bypass")->child; cs; cs = cs->next) run_bypass(cs, train, rollout, mask, T, idx++);
        cJSON_Delete(j);
        free(text);
        free(train); free(rollout); free(mask);
    }
    free(dir);
    return tl_summary();
}
