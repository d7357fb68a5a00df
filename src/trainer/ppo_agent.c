// ppo_agent.c: the gen phase for tool_agent rows (docs/agents.md; spec agent-loop.md §6.6-6.8): each prompt
// re-rendered with the environment's tools, multi-turn trajectories from the agent driver inside the rollout
// engine, packed into the step batch with the response mask 1 on sampled tokens only (observation tokens take
// positions and get log-probs but carry no loss), their statistics for the reward (the environment's score) and
// the metrics.
#include <cjson/cJSON.h>
#include <string.h>

#include "core/common.h"
#include "core/json.h"
#include "rollout/agent.h"
#include "trainer/ppo.h"

static int default_agent(const rlc_train_config *c) {
    const char *name = c->actor_rollout_ref.rollout.agent.default_agent_loop;
    int a = agent_name_parse(name ? name : "single_turn_agent");
    if (a < 0) rlc_die("config: actor_rollout_ref.rollout.agent.default_agent_loop='%s', expected single_turn_agent or tool_agent", name);
    return a;
}

// A row's loop: its agent_name column, else agent.default_agent_loop.
static int row_agent(const rlc_prompt *pr, int def) {
    return pr->agent_name == RLC_AGENT_NAME_TOOL ? AGENT_TOOL : pr->agent_name == RLC_AGENT_NAME_SINGLE_TURN ? AGENT_SINGLE_TURN : def;
}

int ppo_agent_loop(const rlc_train_config *c, const rlc_dataset *train, const rlc_dataset *val) {
    const int def = default_agent(c);
    const int have_env = c->actor_rollout_ref.rollout.multi_turn.env_command != NULL;
    if (def == AGENT_TOOL && !have_env)
        rlc_die("config: actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent needs "
                "actor_rollout_ref.rollout.multi_turn.env_command (docs/agents.md)");
    if (def == AGENT_TOOL) return AGENT_TOOL;
    const rlc_dataset *ds[2] = {train, val};
    for (int d = 0; d < 2; d++)
        for (int64_t i = 0; ds[d] && i < ds[d]->n; i++)
            if (row_agent(&ds[d]->items[i], def) == AGENT_TOOL) {
                if (!have_env)
                    rlc_die("%s:%lld: agent_name tool_agent needs actor_rollout_ref.rollout.multi_turn.env_command "
                            "(docs/agents.md)", ds[d]->path, (long long)ds[d]->items[i].line);
                return AGENT_TOOL;   // some rows run the agent loop: the gen phase goes through the agent driver
            }
    return AGENT_SINGLE_TURN;
}

static void agent_cfg(const ppo_trainer *g, agent_config *ac) {
    const __typeof__(g->cfg->actor_rollout_ref.rollout.multi_turn) *mt = &g->cfg->actor_rollout_ref.rollout.multi_turn;
    agent_config_default(ac);
    ac->max_assistant_turns = mt->max_assistant_turns == RLC_CFG_NULL ? 0 : (int)mt->max_assistant_turns;
    ac->max_user_turns = mt->max_user_turns == RLC_CFG_NULL ? 0 : (int)mt->max_user_turns;
    ac->max_parallel_calls = (int)mt->max_parallel_calls;
    ac->max_tool_response_length = (int)mt->max_tool_response_length;
    ac->truncate_side = agent_truncate_side_parse(mt->tool_response_truncate_side);   // choices checked on load
    ac->response_length = (int)g->cfg->data.max_response_length;
}

// The environment process, started at the first tool_agent generation (its hello declares the tools).
static rlc_env *trainer_env(ppo_trainer *g) {
    if (g->env) return g->env;
    const __typeof__(g->cfg->actor_rollout_ref.rollout.multi_turn) *mt = &g->cfg->actor_rollout_ref.rollout.multi_turn;
    agent_config ac;
    agent_cfg(g, &ac);
    rlc_env_hello h = {"hermes", "template", ac.enable_thinking, ac.response_length, ac.max_parallel_calls,
                       ac.max_tool_response_length};
    g->env = rlc_calloc(1, sizeof *g->env);
    rlc_env_start(g->env, mt->env_command, mt->env_timeout_s, (int)mt->env_max_inflight, &h);
    return g->env;
}

void ppo_agent_free(ppo_trainer *g) {
    if (!g->env) return;
    rlc_env_stop(g->env);
    free(g->env);
    g->env = NULL;
}

// env/<key>/mean: each key's per-trajectory sum, averaged over the step's tool_agent trajectories (a trajectory
// that did not report the key counts 0), keys in order of first appearance.
static void env_means(step_batch *sb, const agent_traj *tr, const agent_prompt *ps, int B, int n) {
    int n_tool = 0;
    for (int i = 0; i < B; i++) {
        if (ps[i / n].agent != AGENT_TOOL) continue;
        n_tool++;
        for (int k = 0; k < tr[i].n_env_metrics; k++) {
            int e = 0;
            while (e < sb->n_env && strcmp(sb->env_keys[e], tr[i].env_metric_keys[k])) e++;
            if (e == sb->n_env) {
                sb->env_keys = rlc_realloc(sb->env_keys, (size_t)(e + 1) * sizeof(char *));
                sb->env_means = rlc_realloc(sb->env_means, (size_t)(e + 1) * sizeof(double));
                sb->env_keys[e] = rlc_strdup(tr[i].env_metric_keys[k]);
                sb->env_means[e] = 0;
                sb->n_env++;
            }
            sb->env_means[e] += tr[i].env_metric_sums[k];
        }
    }
    for (int e = 0; e < sb->n_env; e++) sb->env_means[e] /= n_tool;
}

void ppo_generate_agent(ppo_trainer *g, rollout_engine *re, const int64_t *rows, int n_prompts, const rlc_dataset *ds,
                        uint64_t stream_base, step_batch *sb, double *t_gen) {
    if (g->W > 1) rlc_die("config: multi-turn tool rollouts (agent.default_agent_loop=tool_agent) run in one process only");
    const int def = default_agent(g->cfg);
    int any_tool = 0;
    for (int p = 0; p < n_prompts; p++) any_tool |= row_agent(&ds->items[rows[p]], def) == AGENT_TOOL;
    rlc_env *env = any_tool ? trainer_env(g) : g->env;   // a batch of single-turn rows needs no environment
    const rollout_config *rc = rollout_engine_config(re);
    const int n = rc->n, B = n_prompts * n;
    const rlc_truncation trunc = rlc_truncation_parse(g->cfg->data.truncation, "data.truncation");
    agent_prompt *ps = rlc_calloc((size_t)n_prompts, sizeof *ps);
    rlc_ivec *ids = rlc_calloc((size_t)n_prompts, sizeof *ids);
    cJSON **msgs = rlc_calloc((size_t)n_prompts, sizeof *msgs), **extra = rlc_calloc((size_t)n_prompts, sizeof *extra);
    for (int p = 0; p < n_prompts; p++) {
        const rlc_prompt *pr = &ds->items[rows[p]];
        const char *ej = pr->extra_info_json ? pr->extra_info_json : "{}";
        msgs[p] = cJSON_Parse(pr->messages_json);
        extra[p] = cJSON_Parse(ej);
        rlc_json_mark_floats(msgs[p], pr->messages_json, strlen(pr->messages_json));   // as loaded: 2.0 a float
        rlc_json_mark_floats(extra[p], ej, strlen(ej));
        CHECK(msgs[p] && extra[p], "%s:%lld: stored messages / extra_info", ds->path, (long long)pr->line);
        const int agent = row_agent(pr, def);
        if (agent != AGENT_TOOL) {   // single_turn_agent: the loaded prompt, one turn, the environment never contacted
            ps[p] = (agent_prompt){pr->ids, pr->n_ids, stream_base + (uint64_t)rows[p], AGENT_SINGLE_TURN, pr->data_source,
                                   pr->ground_truth, extra[p], msgs[p]};
            continue;
        }
        // the rendered prompt with the environment's tools in the system turn (apply_chat_template(tools=...)); a
        // started reply may still give a trajectory its own (agent_rollout renders it then)
        rlc_strbuf err = {0};
        if (agent_prompt_ids(g->tok, msgs[p], env->tools, NULL, -1, &ids[p], &err) != 0)
            rlc_die("%s:%lld: chat template with the environment's tools: %s", ds->path, (long long)pr->line, err.s ? err.s : "");
        if (agent_prompt_fit(&ids[p], g->cfg->data.max_prompt_length, trunc, "the prompt with the environment's tools", &err))
            rlc_die("%s:%lld: %s", ds->path, (long long)pr->line, err.s);
        rlc_sb_free(&err);
        ps[p] = (agent_prompt){ids[p].v, ids[p].n, stream_base + (uint64_t)rows[p], AGENT_TOOL, pr->data_source,
                               pr->ground_truth, extra[p], msgs[p]};
    }
    agent_run run;
    memset(&run, 0, sizeof run);
    run.engine = re;
    run.tok = g->tok;
    run.env = env;
    agent_cfg(g, &run.cfg);
    run.n = n;
    run.seed = rc->seed;
    run.split = ds == &g->val ? "val" : "train";
    run.step = g->global_step + 1;
    run.max_prompt_length = g->cfg->data.max_prompt_length;
    run.truncation = trunc;
    agent_traj *tr = rlc_calloc((size_t)B, sizeof *tr);
    double t0 = rlc_now();
    agent_rollout(&run, ps, n_prompts, tr);
    *t_gen = rlc_now() - t0;
    int64_t T = 0, Tr = 1;
    for (int i = 0; i < B; i++) {
        T += tr[i].n_prompt + tr[i].len;
        if (tr[i].len > Tr) Tr = tr[i].len;
    }
    step_batch_alloc(sb, n_prompts, n, T, Tr);
    sb->agent = rlc_calloc((size_t)B, sizeof *sb->agent);
    float *m = rlc_malloc(sizeof(float) * (size_t)Tr);
    int64_t off = 0;
    for (int i = 0; i < B; i++) {
        const agent_traj *t = &tr[i];
        sb->ds_index[i] = rows[t->prompt];
        // the engine's finish of the last turn: length when the budget ended it, else stop
        sb->finish[i] = t->end == AGENT_END_LENGTH ? ROLLOUT_FINISH_LENGTH : ROLLOUT_FINISH_STOP;
        off = step_batch_put(sb, i, off, t->prompt_ids, t->n_prompt, t->ids, t->len, t->logprobs);
        for (int64_t k = 0; k < t->len; k++) m[k] = t->mask[k] ? 1.0f : 0.0f;
        step_batch_mask_response(sb, i, m);
        sb->agent[i] = (step_agent_stats){t->num_turns, t->tool_call_counts, t->tool_failures, t->invalid_blocks, (int)t->end,
                                          t->has_score, t->score, t->n_generated, t->env_wait_s};
    }
    free(m);
    env_means(sb, tr, ps, B, n);
    for (int i = 0; i < B; i++) agent_traj_free(&tr[i]);
    free(tr);
    for (int p = 0; p < n_prompts; p++) { rlc_iv_free(&ids[p]); cJSON_Delete(msgs[p]); cJSON_Delete(extra[p]); }
    free(ids);
    free(msgs);
    free(extra);
    free(ps);
}

// spec agent-loop.md §6.8: per-trajectory statistics of the step batch (prefix "" for training, "val-aux/" for
// num_turns in validation).
void ppo_agent_metrics(const step_batch *sb, rlc_metrics *m, const char *prefix) {
    if (!sb->agent || sb->B == 0) return;
    const int B = sb->B;
    double mn[3] = {1e300, 1e300, 1e300}, mx[3] = {-1e300, -1e300, -1e300}, sum[3] = {0, 0, 0};
    double calls = 0, fails = 0, invalid = 0, model_tokens = 0;
    int ends[AGENT_END_COUNT] = {0};
    for (int i = 0; i < B; i++) {
        const step_agent_stats *a = &sb->agent[i];
        double v[3] = {a->num_turns, a->tool_calls, a->env_wait_s};
        for (int k = 0; k < 3; k++) {
            if (v[k] < mn[k]) mn[k] = v[k];
            if (v[k] > mx[k]) mx[k] = v[k];
            sum[k] += v[k];
        }
        calls += a->tool_calls;
        fails += a->failures;
        invalid += a->invalid_blocks;
        model_tokens += (double)a->model_tokens;
        if (a->end >= 0 && a->end < AGENT_END_COUNT) ends[a->end]++;
    }
    static const char *names[3] = {"num_turns", "tool_call_counts", "agent_loop/tool_calls"};
    char key[128];
    for (int k = 0; k < 3; k++) {
        const char *pf = k == 0 ? prefix : "";
        if (k > 0 && prefix[0]) continue;   // validation reports num_turns only (verl's val-aux)
        snprintf(key, sizeof key, "%s%s/min", pf, names[k]); rlc_metrics_set(m, key, mn[k]);
        snprintf(key, sizeof key, "%s%s/max", pf, names[k]); rlc_metrics_set(m, key, mx[k]);
        snprintf(key, sizeof key, "%s%s/mean", pf, names[k]); rlc_metrics_set(m, key, sum[k] / B);
    }
    if (prefix[0]) return;
    rlc_metrics_set(m, "tools/call_frequency", calls / B);
    rlc_metrics_set(m, "tools/failure_frequency", calls > 0 ? fails / calls : 0.0);
    rlc_metrics_set(m, "multi_turn/invalid_tool_call_blocks", invalid / B);
    rlc_metrics_set(m, "response/model_tokens/mean", model_tokens / B);
    for (int e = 0; e < AGENT_END_COUNT; e++) {
        snprintf(key, sizeof key, "multi_turn/end_reason/%s", agent_end_name((agent_end)e));
        rlc_metrics_set(m, key, (double)ends[e] / B);
    }
    for (int e = 0; e < sb->n_env; e++) {
        snprintf(key, sizeof key, "env/%.100s/mean", sb->env_keys[e]);
        rlc_metrics_set(m, key, sb->env_means[e]);
    }
}
