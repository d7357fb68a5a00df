// validate.c: verl's _validate + process_validation_metrics (see validate.h).
#include "trainer/validate.h"

#include <stdio.h>
#include <string.h>

#include "core/common.h"

void validate_run(ppo_trainer *g, rlc_metrics *m) {
    if (!g->have_val) return;
    rollout_config rc;
    ppo_rollout_config(g, &rc, 1);
    // The training engine, when there is one, validates too, with val_kwargs' n and sampling: its KV pool is
    // allocated and touched once per run (first-touch page faults cost ~3 s per GB on small VMs).
    rollout_engine *re = g->rollout ? g->rollout : rollout_engine_new(&g->model, &rc);
    const rollout_config train_rc = *rollout_engine_config(re);
    rollout_engine_set_sampling(re, rc.n, &rc.sampling);
    int64_t N = g->val.n, bs = g->cfg->data.val_batch_size;
    if (bs == RLC_CFG_NULL || bs <= 0 || bs > N) bs = N;
    int n = rc.n;
    int64_t S = N * n;   // samples, prompt-major
    rlc_reward_result *res = rlc_calloc((size_t)S, sizeof *res);
    int64_t *rows = rlc_malloc(sizeof(int64_t) * (size_t)bs);
    step_agent_stats *agent = NULL;   // (S) tool_agent trajectories: val-aux/num_turns
    for (int64_t start = 0; start < N; start += bs) {
        int64_t cnt = N - start < bs ? N - start : bs;
        for (int64_t i = 0; i < cnt; i++) rows[i] = start + i;
        step_batch sb;
        double tg;
        ppo_generate(g, re, rows, (int)cnt, &g->val, 0x56414cull << 40 /* "VAL": not a train stream */, &sb, &tg);
        ppo_score(g, &g->val, &sb);
        memcpy(res + (size_t)start * n, sb.res, sizeof *res * (size_t)sb.B);   // take ownership
        free(sb.res);
        sb.res = NULL;
        if (sb.agent) {
            if (!agent) agent = rlc_calloc((size_t)S, sizeof *agent);
            memcpy(agent + (size_t)start * n, sb.agent, sizeof *agent * (size_t)sb.B);
        }
        step_batch_free(&sb);
    }
    if (agent) {
        step_batch all = {.B = (int)S, .agent = agent};
        ppo_agent_metrics(&all, m, "val-aux/");
        free(agent);
    }
    if (re == g->rollout) rollout_engine_set_sampling(re, train_rc.n, &train_rc.sampling);
    else rollout_engine_free(re);
    // Variables: "reward" (the score), then the reward's extra keys (e.g. "acc") in the first sample's order.
    int nv = 1 + res[0].n_extra;
    const char **names = rlc_malloc(sizeof(char *) * (size_t)nv);
    double **vals = rlc_malloc(sizeof(double *) * (size_t)nv);
    names[0] = "reward";
    for (int v = 1; v < nv; v++) names[v] = res[0].extra_keys[v - 1];
    for (int v = 0; v < nv; v++) vals[v] = rlc_malloc(sizeof(double) * (size_t)S);
    const char **ds = rlc_malloc(sizeof(char *) * (size_t)S), **uid = rlc_malloc(sizeof(char *) * (size_t)S);
    const char **preds = rlc_malloc(sizeof(char *) * (size_t)S);
    char *uid_buf = rlc_malloc((size_t)S * 24);
    int have_pred = 1;
    for (int64_t j = 0; j < S; j++) {
        int64_t row = j / n;
        ds[j] = g->val.items[row].data_source;
        snprintf(uid_buf + j * 24, 24, "%lld", (long long)row);
        uid[j] = uid_buf + j * 24;
        vals[0][j] = res[j].score;
        for (int v = 1; v < nv; v++) {
            int found = 0;
            for (int e = 0; e < res[j].n_extra; e++)
                if (!strcmp(res[j].extra_keys[e], names[v])) { vals[v][j] = res[j].extra_vals[e]; found = 1; break; }
            if (!found)
                rlc_die("%s:%lld: the reward returned no '%s' for this validation sample, but did for the first one",
                        g->val.path, (long long)g->val.items[row].line, names[v]);
        }
        preds[j] = res[j].pred;
        if (!res[j].pred) have_pred = 0;
    }
    rlc_val_metrics(m, S, ds, uid, nv, names, (const double *const *)vals, have_pred ? preds : NULL, 42);
    for (int v = 0; v < nv; v++) free(vals[v]);
    free(vals); free(names); free(ds); free(uid); free(preds); free(uid_buf);
    for (int64_t j = 0; j < S; j++) rlc_reward_result_free(&res[j]);
    free(res);
    free(rows);
}

