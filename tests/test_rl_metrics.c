// test_rl_metrics.c: metrics helpers (ordered dict + JSONL, data metrics, rollout-vs-actor probability metrics,
// validation mean@N / best@k / maj@k with numpy's seeded bootstrap) and Karmarkar-Karp balancing /
// rearrange_micro_batches against the independent reference tests/py/metrics_ref.py.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "trainer/balance.h"
#include "rl/policy_loss.h"
#include "trainer/metrics.h"
#include "testlib.h"

static int close_to(double a, double b, double tol) { return fabs(a - b) <= tol * fmax(1.0, fabs(b)); }

static void test_dict_jsonl(void) {
    rlc_metrics m;
    rlc_metrics_init(&m);
    rlc_metrics_set(&m, "timing_s/gen", 1.5);
    rlc_metrics_set(&m, "actor/pg_loss", -0.125);
    rlc_metrics_set(&m, "training/global_step", 3);
    rlc_metrics_set(&m, "timing_s/gen", 2.25);   // replaced in place
    rlc_metrics_set(&m, "x/nan", NAN);
    char *j = rlc_metrics_to_json(&m);
    TL_CHECK(!strcmp(j, "{\"timing_s/gen\": 2.25, \"actor/pg_loss\": -0.125, \"training/global_step\": 3, \"x/nan\": null}"),
             "json line: %s", j);
    char *dir = tl_tmpdir("metrics");
    char *p = rlc_path_join(dir, "metrics.jsonl");
    rlc_metrics_append_jsonl(&m, p);
    rlc_metrics_set(&m, "training/global_step", 4);
    rlc_metrics_append_jsonl(&m, p);
    char *text = rlc_read_file(p, NULL);
    char *nl = strchr(text, '\n');
    TL_CHECK(nl && !strncmp(text, j, strlen(j)) && strstr(nl + 1, "\"training/global_step\": 4, \"x/nan\": null}\n"), "two JSONL lines");
    cJSON *c = cJSON_Parse(nl + 1);
    TL_CHECK(c && cJSON_GetObjectItem(c, "timing_s/gen")->valuedouble == 2.25, "parses as JSON");
    cJSON_Delete(c);
    double v[3] = {1, 5, 3};
    TL_CHECK(rlc_metric_reduce("perf/max_memory", v, 3) == 5 && rlc_metric_reduce("a/min", v, 3) == 1 &&
                 rlc_metric_reduce("actor/pg_loss", v, 3) == 3, "reduce_metrics");
    TL_CHECK(rlc_metrics_get(&m, "actor/pg_loss", NULL) == -0.125, "get");
    free(text); free(j); free(p);
    tl_system("rm -rf %s", dir);
    free(dir);
    rlc_metrics_free(&m);
}

static void test_data_metrics(void) {
    // 3 sequences, width 4: lengths 4, 2, 0 (aborted); prompts 5, 7, 7.
    float score[3] = {1, 0, 0.5f}, reward[3] = {0.9f, -0.1f, 0.5f};
    float mask[12] = {1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0};
    float adv[12] = {0.5f, 0.5f, 0.5f, 0.5f, -2, -2, 9, 9, 9, 9, 9, 9};
    int64_t rl[3] = {4, 2, 0}, pl[3] = {5, 7, 7};
    rlc_metrics m;
    rlc_metrics_init(&m);
    rlc_data_metrics(&m, score, reward, adv, adv, mask, rl, pl, 3, 4, 0, 0);
    struct { const char *k; double v; } want[] = {
        {"critic/score/mean", 0.5}, {"critic/score/max", 1}, {"critic/score/min", 0},
        {"critic/rewards/mean", 0.4}, {"critic/rewards/max", 0.9f}, {"critic/rewards/min", -0.1f},
        {"critic/advantages/mean", (4 * 0.5 - 4.0) / 6}, {"critic/advantages/max", 0.5}, {"critic/advantages/min", -2},
        {"response_length/mean", 2}, {"response_length/max", 4}, {"response_length/min", 0},
        {"response_length/clip_ratio", 1.0 / 3}, {"response_length_non_aborted/mean", 3},
        {"response_length_non_aborted/min", 2}, {"response/aborted_ratio", 1.0 / 3},
        {"prompt_length/mean", 19.0 / 3}, {"prompt_length/clip_ratio", 2.0 / 3}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int f;
        double g = rlc_metrics_get(&m, want[i].k, &f);
        TL_CHECK(f && close_to(g, want[i].v, 1e-6), "%s: got %g want %g", want[i].k, g, want[i].v);
    }
    TL_CHECK(!strcmp(m.keys[0], "critic/score/mean"), "verl's key order");
    rlc_metrics_free(&m);
}

static int64_t *ilist(cJSON *a, int64_t *n) {
    *n = cJSON_GetArraySize(a);
    int64_t *v = rlc_malloc((size_t)(*n ? *n : 1) * sizeof(int64_t));
    for (int64_t i = 0; i < *n; i++) v[i] = (int64_t)cJSON_GetArrayItem(a, (int)i)->valuedouble;
    return v;
}

// Compare a partition to a JSON list of lists.
static int same_parts(const rlc_partition *p, cJSON *want) {
    if (cJSON_GetArraySize(want) != p->k) return 0;
    for (int64_t j = 0; j < p->k; j++) {
        cJSON *w = cJSON_GetArrayItem(want, (int)j);
        if (cJSON_GetArraySize(w) != p->offsets[j + 1] - p->offsets[j]) return 0;
        for (int64_t t = p->offsets[j]; t < p->offsets[j + 1]; t++)
            if ((int64_t)cJSON_GetArrayItem(w, (int)(t - p->offsets[j]))->valuedouble != p->items[t]) return 0;
    }
    return 1;
}

static void test_with_oracle(cJSON *o) {
    // numpy's legacy np.random.choice
    const char *ck[2] = {"choice_7_3", "choice_5_5"};
    int64_t nd[2] = {7, 5};
    for (int c = 0; c < 2; c++) {
        int64_t n;
        int64_t *want = ilist(cJSON_GetObjectItem(o, ck[c]), &n);
        int64_t *got = rlc_malloc((size_t)n * sizeof(int64_t));
        rlc_np_choice(got, n, nd[c], 42);
        TL_CHECK(memcmp(got, want, (size_t)n * sizeof(int64_t)) == 0, "np.random.choice(%lld) with seed 42", (long long)nd[c]);
        free(got); free(want);
    }
    // validation metrics
    cJSON *vin = cJSON_GetObjectItem(o, "val_in");
    int64_t n = cJSON_GetArraySize(cJSON_GetObjectItem(vin, "ds"));
    const char **ds = rlc_malloc(n * sizeof(char *)), **uid = rlc_malloc(n * sizeof(char *)), **pred = rlc_malloc(n * sizeof(char *));
    double *rw = rlc_malloc(n * sizeof(double)), *acc = rlc_malloc(n * sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        ds[i] = cJSON_GetArrayItem(cJSON_GetObjectItem(vin, "ds"), (int)i)->valuestring;
        uid[i] = cJSON_GetArrayItem(cJSON_GetObjectItem(vin, "uid"), (int)i)->valuestring;
        pred[i] = cJSON_GetArrayItem(cJSON_GetObjectItem(vin, "pred"), (int)i)->valuestring;
        rw[i] = cJSON_GetArrayItem(cJSON_GetObjectItem(vin, "reward"), (int)i)->valuedouble;
        acc[i] = cJSON_GetArrayItem(cJSON_GetObjectItem(vin, "acc"), (int)i)->valuedouble;
    }
    for (int variant = 0; variant < 2; variant++) {
        rlc_metrics m;
        rlc_metrics_init(&m);
        const char *names[2] = {"reward", "acc"};
        const double *vals[2] = {rw, acc};
        rlc_val_metrics(&m, n, ds, uid, variant ? 1 : 2, names, vals, variant ? NULL : pred, 42);
        cJSON *want = cJSON_GetObjectItem(o, variant ? "val_out_nopred" : "val_out");
        int nw = cJSON_GetArraySize(want), ok = nw == m.n;
        for (int i = 0; ok && i < nw; i++) {
            cJSON *kv = cJSON_GetArrayItem(want, i);
            const char *k = cJSON_GetArrayItem(kv, 0)->valuestring;
            double v = cJSON_GetArrayItem(kv, 1)->valuedouble;
            if (strcmp(m.keys[i], k) || !close_to(m.vals[i], v, 1e-12)) {
                fprintf(stderr, "val metric %d: got %s=%.17g want %s=%.17g\n", i, m.keys[i], m.vals[i], k, v);
                ok = 0;
            }
        }
        TL_CHECK(ok, "validation metrics (%s maj@k): %lld keys vs %d, same order and values", variant ? "without" : "with",
                 (long long)m.n, nw);
        int f;
        rlc_metrics_get(&m, variant ? "val-core/openai/gsm8k/reward/mean@5" : "val-core/openai/gsm8k/acc/mean@5", &f);
        TL_CHECK(f, "val-core key present");
        rlc_metrics_free(&m);
    }
    free(ds); free(uid); free(pred); free(rw); free(acc);
    // rollout vs actor probabilities
    cJSON *pin = cJSON_GetObjectItem(o, "probs_in");
    int64_t pn = cJSON_GetArraySize(cJSON_GetObjectItem(pin, "a"));
    float *a = rlc_malloc(pn * sizeof(float)), *r = rlc_malloc(pn * sizeof(float)), *mk = rlc_malloc(pn * sizeof(float));
    for (int64_t i = 0; i < pn; i++) {
        a[i] = (float)cJSON_GetArrayItem(cJSON_GetObjectItem(pin, "a"), (int)i)->valuedouble;
        r[i] = (float)cJSON_GetArrayItem(cJSON_GetObjectItem(pin, "r"), (int)i)->valuedouble;
        mk[i] = (float)cJSON_GetArrayItem(cJSON_GetObjectItem(pin, "m"), (int)i)->valuedouble;
    }
    rlc_metrics m;
    rlc_metrics_init(&m);
    rlc_rollout_probs_metrics(&m, a, r, mk, pn);
    const char *pk[4] = {"training/rollout_probs_diff_max", "training/rollout_probs_diff_mean",
                         "training/rollout_probs_diff_std", "training/rollout_actor_probs_pearson_corr"};
    cJSON *pw = cJSON_GetObjectItem(o, "probs_out");
    for (int i = 0; i < 4; i++) {
        double g = rlc_metrics_get(&m, pk[i], NULL), w = cJSON_GetArrayItem(pw, i)->valuedouble;
        // torch reduces in fp32: 1e-5 relative
        TL_CHECK(fabs(g - w) <= 1e-5 * fabs(w) + 1e-7, "%s: got %.9g want %.9g", pk[i], g, w);
    }
    TL_CHECK(rlc_metrics_get(&m, "training/rollout_probs_diff_valid", NULL) == 1, "valid");
    float zero[3] = {0, 0, 0};
    rlc_metrics_clear(&m);
    rlc_rollout_probs_metrics(&m, a, r, zero, 3);
    TL_CHECK(rlc_metrics_get(&m, "training/rollout_probs_diff_valid", NULL) == 0 &&
                 isnan(rlc_metrics_get(&m, "training/rollout_probs_diff_mean", NULL)), "no valid token");
    rlc_metrics_free(&m);
    free(a); free(r); free(mk);
    // rollout_corr/*
    cJSON *ci = cJSON_GetObjectItem(o, "corr_in");
    float co[66], cr[66], cmk[66];
    for (int i = 0; i < 66; i++) {
        co[i] = (float)cJSON_GetArrayItem(cJSON_GetObjectItem(ci, "old"), i)->valuedouble;
        cr[i] = (float)cJSON_GetArrayItem(cJSON_GetObjectItem(ci, "roll"), i)->valuedouble;
        cmk[i] = (float)cJSON_GetArrayItem(cJSON_GetObjectItem(ci, "m"), i)->valuedouble;
    }
    rlc_metrics cm;
    rlc_metrics_init(&cm);
    rlc_rollout_corr_metrics(&cm, co, cr, cmk, 6, 11);
    static const char *ck2[13] = {"training_ppl", "training_log_ppl", "kl", "k3_kl", "rollout_ppl", "rollout_log_ppl",
                                  "log_ppl_diff", "log_ppl_abs_diff", "log_ppl_diff_max", "log_ppl_diff_min", "ppl_ratio",
                                  "chi2_token", "chi2_seq"};
    cJSON *cw = cJSON_GetObjectItem(o, "corr_out");
    int cok = cm.n == 13;
    for (int i = 0; cok && i < 13; i++) {
        char key[64];
        snprintf(key, sizeof key, "rollout_corr/%s", ck2[i]);
        double w = cJSON_GetArrayItem(cw, i)->valuedouble;
        // fp32 torch reductions vs double: 1e-5 of the scale (kl-type metrics are small differences)
        if (strcmp(cm.keys[i], key) || fabs(cm.vals[i] - w) > 1e-5 * fmax(1.0, fabs(w))) {
            fprintf(stderr, "%s: got %s=%.9g want %.9g\n", key, cm.keys[i], cm.vals[i], w);
            cok = 0;
        }
    }
    TL_CHECK(cok, "rollout_corr/* metrics match the torch reference");
    rlc_metrics_free(&cm);
    // Karmarkar-Karp and micro-batches
    cJSON *cases = cJSON_GetObjectItem(o, "balance");
    int nc = cJSON_GetArraySize(cases), bad = 0;
    for (int c = 0; c < nc; c++) {
        cJSON *cs = cJSON_GetArrayItem(cases, c);
        int64_t ns;
        int64_t *seq = ilist(cJSON_GetObjectItem(cs, "seq"), &ns);
        int64_t k = (int64_t)cJSON_GetObjectItem(cs, "k")->valuedouble, ke = (int64_t)cJSON_GetObjectItem(cs, "ke")->valuedouble;
        int64_t mt = (int64_t)cJSON_GetObjectItem(cs, "max_tok")->valuedouble;
        rlc_partition p;
        rlc_karmarkar_karp(&p, seq, ns, k, 0);
        if (!same_parts(&p, cJSON_GetObjectItem(cs, "kk"))) { bad++; fprintf(stderr, "kk case %d differs\n", c); }
        rlc_partition_free(&p);
        rlc_karmarkar_karp(&p, seq, ns, ke, 1);
        if (!same_parts(&p, cJSON_GetObjectItem(cs, "kk_eq"))) { bad++; fprintf(stderr, "kk equal_size case %d differs\n", c); }
        rlc_partition_free(&p);
        int64_t *w = rlc_malloc(ns * sizeof(int64_t));
        for (int64_t i = 0; i < ns; i++) w[i] = rlc_seqlen_workload(seq[i]);
        rlc_karmarkar_karp(&p, w, ns, k, 0);
        if (!same_parts(&p, cJSON_GetObjectItem(cs, "kk_w"))) { bad++; fprintf(stderr, "kk workload case %d differs\n", c); }
        rlc_partition_free(&p);
        rlc_rearrange_micro_batches(&p, seq, ns, mt, 0, 0, 1, "test.max_token_len");
        if (!same_parts(&p, cJSON_GetObjectItem(cs, "micro"))) { bad++; fprintf(stderr, "micro-batch case %d differs\n", c); }
        rlc_partition_free(&p);
        free(w);
        free(seq);
    }
    TL_CHECK(bad == 0 && nc == 40, "Karmarkar-Karp / rearrange_micro_batches identical to the reference on %d cases", nc);
}

static void test_balance_props(void) {
    int64_t seq[10] = {100, 3000, 250, 2500, 40, 900, 1200, 60, 700, 1800};
    rlc_partition p;
    rlc_balanced_partitions(&p, seq, 10, 2, 1);
    TL_CHECK(p.k == 2 && p.offsets[1] == 5 && p.offsets[2] == 10, "equal_size halves");
    for (int j = 0; j < 2; j++)
        for (int64_t t = p.offsets[j] + 1; t < p.offsets[j + 1]; t++) TL_CHECK(p.items[t - 1] < p.items[t], "sorted parts");
    double u[6];
    rlc_seqlen_unbalance(u, seq, 10, &p);
    TL_CHECK(u[0] == 4660 && u[1] == 5890 && u[2] == 1230 && u[5] == 5275 && u[3] + u[4] == 10550, "global_seqlen metrics");
    rlc_partition_free(&p);
    rlc_rearrange_micro_batches(&p, seq, 10, 4000, 0, 0, 1, "k");
    int64_t total = 0;
    for (int64_t j = 0; j < p.k; j++) total += p.offsets[j + 1] - p.offsets[j];
    TL_CHECK(p.k == 3 && total == 10, "ceil(10550/4000) = 3 micro-batches covering every sequence");
    rlc_partition_free(&p);
    rlc_rearrange_micro_batches(&p, seq, 10, 4000, 5, 2, 1, "k");
    TL_CHECK(p.k == 6, "min_num_micro_batch 5 rounded up to a multiple of 2");
    rlc_partition_free(&p);
}

static void test_timing_actor(void) {
    rlc_metrics m;
    rlc_metrics_init(&m);
    const char *names[4] = {"gen", "old_log_prob", "update_actor", "step"};
    double secs[4] = {2.0, 0.5, 1.0, 4.0};
    rlc_timing_metrics(&m, 4, names, secs, 1000, 3000, 2);
    TL_CHECK(rlc_metrics_get(&m, "timing_s/gen", NULL) == 2.0 && rlc_metrics_get(&m, "timing_per_token_ms/gen", NULL) == 2.0,
             "gen per-token over response tokens");
    int f;
    rlc_metrics_get(&m, "timing_per_token_ms/old_log_prob", &f);
    TL_CHECK(!f, "no per-token metric for old_log_prob");
    TL_CHECK(close_to(rlc_metrics_get(&m, "timing_per_token_ms/update_actor", NULL), 1000.0 / 3000, 1e-12), "update_actor");
    TL_CHECK(rlc_metrics_get(&m, "perf/throughput", NULL) == 3000.0 / (4.0 * 2) &&
                 rlc_metrics_get(&m, "perf/time_per_step", NULL) == 4.0, "throughput");
    rlc_metrics_clear(&m);
    rlc_actor_metrics a;
    rlc_actor_metrics_init(&a);
    // mini-batch 1: two micro-batches; mini-batch 2: one
    rlc_actor_metrics_micro(&a, 0.1, 1.0, 0.01, 0.2, 0.1, 0.001, 0.0);
    rlc_actor_metrics_micro(&a, 0.3, 2.0, 0.03, 0.4, 0.3, 0.003, 0.2);
    rlc_actor_metrics_minibatch(&a, 1.5);
    rlc_actor_metrics_micro(&a, -0.2, 1.0, 0.02, -0.1, 0.5, 0.002, 0.4);
    rlc_actor_metrics_minibatch(&a, 0.5);
    a.present = RL_PGM_ALL;
    rlc_actor_metrics_put(&a, &m, 1, 1, 0.001, 1e-6);
    TL_CHECK(close_to(rlc_metrics_get(&m, "actor/pg_loss", NULL), (0.4 - 0.2) / 2, 1e-12), "pg_loss: sum per mini-batch, mean");
    TL_CHECK(close_to(rlc_metrics_get(&m, "actor/pg_clipfrac", NULL), (0.2 + 0.5) / 2, 1e-12), "clipfrac: mean of means");
    TL_CHECK(close_to(rlc_metrics_get(&m, "actor/pg_clipfrac_lower", NULL), (0.1 + 0.4) / 2, 1e-12), "clipfrac_lower");
    TL_CHECK(close_to(rlc_metrics_get(&m, "actor/kl_loss", NULL), (0.04 + 0.02) / 2, 1e-12), "kl_loss");
    TL_CHECK(rlc_metrics_get(&m, "actor/grad_norm", NULL) == 1.0 && rlc_metrics_get(&m, "actor/lr", NULL) == 1e-6, "grad_norm, lr");
    // a loss mode reporting only ppo_kl (kl_cov, dro) logs only it; one reporting none (gpg) logs none of the three
    const unsigned pres[2] = {RL_PGM_PPO_KL, 0};
    for (int v = 0; v < 2; v++) {
        rlc_metrics_clear(&m);
        a.present = pres[v];
        rlc_actor_metrics_put(&a, &m, 0, 0, 0, 1e-6);
        int f1, f2, f3;
        rlc_metrics_get(&m, "actor/pg_clipfrac", &f1);
        rlc_metrics_get(&m, "actor/ppo_kl", &f2);
        rlc_metrics_get(&m, "actor/pg_clipfrac_lower", &f3);
        TL_CHECK(!f1 && !f3 && f2 == (v == 0), "present bits %u: pg metrics logged %d %d %d", pres[v], f1, f2, f3);
        rlc_metrics_get(&m, "actor/pg_loss", &f1);
        TL_CHECK(f1, "actor/pg_loss always logged");
    }
    rlc_metrics_free(&m);
}

int main(void) {
    test_dict_jsonl();
    test_timing_actor();
    test_data_metrics();
    test_balance_props();
    if (!tl_have_torch()) {
        tl_skip("torch not importable under /usr/bin/python3: oracle tests skipped");
        return tl_summary();
    }
    char *dir = tl_tmpdir("rlm");
    char *p = rlc_path_join(dir, "ref.json");
    if (tl_system("/usr/bin/python3 tests/py/metrics_ref.py %s 11", p) != 0) {
        TL_CHECK(0, "tests/py/metrics_ref.py failed");
        return tl_summary();
    }
    char *text = rlc_read_file(p, NULL);
    cJSON *o = cJSON_Parse(text);
    test_with_oracle(o);
    cJSON_Delete(o);
    free(text);
    tl_system("rm -rf %s", dir);
    free(p);
    free(dir);
    return tl_summary();
}
