// validate.c: verl's _validate + process_validation_metrics (see validate.h).
#include "trainer/validate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "trainer/finite.h"

// The policy validation decodes from must be finite: a NaN weight would otherwise surface as the sampler's
// "logits are not finite" (greedy decoding included), naming neither the step nor the cause.
static void check_policy(const ppo_trainer *g) {
    char what[96];
    snprintf(what, sizeof what, "validation at step %lld: the weights are non-finite", (long long)g->global_step);
    static const char HINT[] = "the policy cannot be validated (lower the learning rate or check the data)";
    if (g->params.data) finite_check_params(g->params.data, &g->pl, what, HINT);   // (W > 1: every rank's rollout copy)
    if (g->use_lora) {
        snprintf(what, sizeof what, "validation at step %lld: the LoRA adapters are non-finite", (long long)g->global_step);
        finite_check_params(g->lora_ad.data, &g->ll.pl, what, HINT);
    }
}

// Every validation output must be finite, greedy or sampled: the rollout's log-probs of the response tokens, the
// reward's score and its extra values (an external reward may send 1e999). Non-finite values would otherwise
// reach the val-core / val-aux metrics as null. One line naming the row, the step and the value.
static void check_outputs(const ppo_trainer *g, const step_batch *sb) {
    const long long step = (long long)g->global_step;
    for (int i = 0; i < sb->B; i++) {
        const rlc_prompt *pr = &g->val.items[sb->ds_index[i]];
        const int sample = i % sb->n;
        for (int64_t k = 0; k < sb->rlen[i]; k++) {
            const float lp = sb->rollout_lp[(size_t)i * (size_t)sb->Tr + (size_t)k];
            if (!isfinite(lp))
                rlc_die("%s:%lld: validation at step %lld, sample %d: the log-prob of response token %lld is %g; the "
                        "model's logits are non-finite", g->val.path, (long long)pr->line, step, sample, (long long)k, (double)lp);
        }
        const rlc_reward_result *r = &sb->res[i];
        if (!isfinite(r->score))
            rlc_die("%s:%lld: validation at step %lld, sample %d: the reward's score is %g; validation needs finite rewards",
                    g->val.path, (long long)pr->line, step, sample, r->score);
        for (int e = 0; e < r->n_extra; e++)
            if (!isfinite(r->extra_vals[e]))
                rlc_die("%s:%lld: validation at step %lld, sample %d: the reward's \"%s\" is %g; validation needs finite "
                        "reward values", g->val.path, (long long)pr->line, step, sample, r->extra_keys[e], r->extra_vals[e]);
    }
}

// tool_agent rows of a validation batch (its env/<key>/mean is over their trajectories): the row's agent_name,
// else agent.default_agent_loop.
static int64_t tool_rows(const ppo_trainer *g, const int64_t *rows, int64_t cnt) {
    const char *def = g->cfg->actor_rollout_ref.rollout.agent.default_agent_loop;
    const int def_tool = def && !strcmp(def, "tool_agent");
    int64_t k = 0;
    for (int64_t i = 0; i < cnt; i++) {
        const int a = g->val.items[rows[i]].agent_name;
        k += a == RLC_AGENT_NAME_TOOL || (a == RLC_AGENT_NAME_NONE && def_tool);
    }
    return k;
}

// The environment's numbers over the whole validation set: each batch's env/<key>/mean (over its tool_agent
// trajectories) weighted by those trajectories, so the result is the mean over all of them (a trajectory that did
// not report a key counts 0, as in training).
typedef struct {
    char **keys;
    double *sums;
    int n;
    int64_t n_traj;
} env_acc;

static void env_acc_add(env_acc *a, const step_batch *sb, int64_t n_tool) {
    for (int e = 0; e < sb->n_env; e++) {
        int k = 0;
        while (k < a->n && strcmp(a->keys[k], sb->env_keys[e])) k++;
        if (k == a->n) {
            a->keys = rlc_realloc(a->keys, (size_t)(k + 1) * sizeof(char *));
            a->sums = rlc_realloc(a->sums, (size_t)(k + 1) * sizeof(double));
            a->keys[k] = rlc_strdup(sb->env_keys[e]);
            a->sums[k] = 0;
            a->n++;
        }
        a->sums[k] += sb->env_means[e] * (double)n_tool;
    }
    a->n_traj += n_tool;
}

void validate_run(ppo_trainer *g, rlc_metrics *m) {
    if (!g->have_val) return;
    check_policy(g);
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
    env_acc envm = {0};               // val-aux/env/<key>/mean
    for (int64_t start = 0; start < N; start += bs) {
        int64_t cnt = N - start < bs ? N - start : bs;
        for (int64_t i = 0; i < cnt; i++) rows[i] = start + i;
        step_batch sb;
        double tg;
        ppo_generate(g, re, rows, (int)cnt, &g->val, 0x56414cull << 40 /* "VAL": not a train stream */, &sb, &tg);
        ppo_score(g, &g->val, &sb);
        check_outputs(g, &sb);
        memcpy(res + (size_t)start * n, sb.res, sizeof *res * (size_t)sb.B);   // take ownership
        free(sb.res);
        sb.res = NULL;
        if (sb.agent) {
            if (!agent) agent = rlc_calloc((size_t)S, sizeof *agent);
            memcpy(agent + (size_t)start * n, sb.agent, sizeof *agent * (size_t)sb.B);
            env_acc_add(&envm, &sb, tool_rows(g, rows, cnt) * n);
        }
        step_batch_free(&sb);
    }
    if (agent) {
        step_batch all = {.B = (int)S, .agent = agent};
        ppo_agent_metrics(&all, m, "val-aux/");
        free(agent);
    }
    for (int k = 0; k < envm.n; k++) {
        char key[160];
        snprintf(key, sizeof key, "val-aux/env/%.100s/mean", envm.keys[k]);
        rlc_metrics_set(m, key, envm.n_traj > 0 ? envm.sums[k] / (double)envm.n_traj : 0.0);
        free(envm.keys[k]);
    }
    free(envm.keys);
    free(envm.sums);
    if (re == g->rollout) rollout_engine_set_sampling(re, train_rc.n, &train_rc.sampling);
    else rollout_engine_free(re);
    // Variables: "reward" (the score), then the reward's extra keys (e.g. "acc") in order of first appearance. A
    // sample without a key (scored by the environment, or by a reward that returns it for some rows only) has NaN
    // there: each key is reduced over the samples that have it (rlc_val_metrics).
    int nv = 1;
    const char **names = rlc_malloc(sizeof(char *));
    names[0] = "reward";
    for (int64_t j = 0; j < S; j++)
        for (int e = 0; e < res[j].n_extra; e++) {
            int v = 1;
            while (v < nv && strcmp(names[v], res[j].extra_keys[e])) v++;
            if (v < nv) continue;
            names = rlc_realloc(names, sizeof(char *) * (size_t)(nv + 1));
            names[nv++] = res[j].extra_keys[e];
        }
    double **vals = rlc_malloc(sizeof(double *) * (size_t)nv);
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
            vals[v][j] = NAN;   // finite when present (check_outputs)
            for (int e = 0; e < res[j].n_extra; e++)
                if (!strcmp(res[j].extra_keys[e], names[v])) { vals[v][j] = res[j].extra_vals[e]; break; }
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

