// agent.c: the multi-turn drivers (see agent.h): turn-synchronous over a generator, and continuous inside the
// rollout engine (rollout_generate_turns), both over the environment process.
#include "rollout/agent.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"

static cJSON *msg(const char *role, const char *content) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    return m;
}

// ---- the driver ----

void agent_traj_free(agent_traj *t) {
    free(t->prompt_ids);
    free(t->ids);
    free(t->mask);
    free(t->logprobs);
    free(t->tool_rewards);
    free(t->pred);
    for (int i = 0; i < t->n_env_metrics; i++) free(t->env_metric_keys[i]);
    free(t->env_metric_keys);
    free(t->env_metric_sums);
    memset(t, 0, sizeof *t);
}

void agent_engine_generator(void *ctx, int n, const agent_gen_req *req, agent_gen_out *out) {
    agent_engine_gen *g = ctx;
    rollout_engine *e = g->engine;
    const rollout_config *cfg = rollout_engine_config(e);
    const int n0 = cfg->n;
    const sampler_params sp = cfg->sampling;
    // A first round of whole groups (samples 0..n0-1 of one prompt, nothing generated yet) keeps the engine's
    // prompt sharing; anything else runs as one-sample prompts with their own stream identity.
    int grouped = n0 > 1 && n % n0 == 0;
    for (int i = 0; i < n && grouped; i++) {
        const agent_gen_req *r = &req[i], *r0 = &req[i - i % n0];
        grouped = r->draw_base == 0 && r->sample == i % n0 && r->ids == r0->ids && r->len == r0->len &&
                  r->id == r0->id && r->max_new == r0->max_new;
    }
    const int k = grouped ? n0 : 1;
    const int np = n / k;
    rollout_prompt *pr = rlc_calloc((size_t)np + 1, sizeof *pr);
    rollout_stream *st = rlc_calloc((size_t)np + 1, sizeof *st);
    for (int p = 0; p < np; p++) {
        const agent_gen_req *r = &req[p * k];
        pr[p] = (rollout_prompt){r->ids, r->len, r->id};
        st[p] = (rollout_stream){r->max_new, grouped ? 0 : r->sample, r->draw_base};
    }
    if (k != n0) rollout_engine_set_sampling(e, k, &sp);
    rollout_result res;
    rollout_generate_streams(e, pr, st, np, &res);
    if (k != n0) rollout_engine_set_sampling(e, n0, &sp);
    CHECK(res.n_samples == n, "engine returned %d samples for %d requests", res.n_samples, n);
    g->computed_tokens += res.computed_tokens;
    g->gen_tokens += res.gen_tokens;
    for (int i = 0; i < n; i++) {
        rollout_sample *s = &res.samples[i];
        out[i] = (agent_gen_out){s->ids, s->logprobs, s->len, s->finish};
        s->ids = NULL;
        s->logprobs = NULL;
    }
    rollout_result_free(&res);
    free(pr);
    free(st);
}

typedef struct {
    agent_traj *t;
    const agent_prompt *p;
    int live, started;
    char traj[96];
    cJSON *tools;                 // the started reply's tools for this trajectory (owned), or NULL: the hello's
    rlc_ivec own;                 // its own prompt, rendered after started when it declared tools / append_to_user
    const int32_t *pids;          // (plen) the prompt it runs from: the row's, its own, or sample 0's when equal to
    int64_t plen;                 //   its own (so that samples with one prompt keep sharing its prefill)
    int eng_prompt, eng_sample;   // its (prompt, sample) in the continuous engine
    int64_t cap;                  // allocated response entries
    int32_t *ctx;                 // (n_prompt + len) context for the next turn
    // the current round
    agent_parsed parsed;
    int n_kept;                   // calls kept (first max_parallel_calls)
    char **local;                 // (n_kept) local answer or NULL (call goes to the env)
    int n_env;                    // calls sent to the env
    int sent_step;
    char *step_req;
} traj_state;

static void resp_push(traj_state *s, const int32_t *ids, const float *lp, int64_t n, uint8_t m) {
    agent_traj *t = s->t;
    if (t->len + n > s->cap) {
        s->cap = (t->len + n) * 2 + 64;
        t->ids = rlc_realloc(t->ids, (size_t)s->cap * sizeof(int32_t));
        t->mask = rlc_realloc(t->mask, (size_t)s->cap);
        t->logprobs = rlc_realloc(t->logprobs, (size_t)s->cap * sizeof(float));
    }
    for (int64_t i = 0; i < n; i++) {
        t->ids[t->len + i] = ids[i];
        t->mask[t->len + i] = m;
        t->logprobs[t->len + i] = lp ? lp[i] : 0.0f;
    }
    t->len += n;
}

static uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void env_metric_add(agent_traj *t, const char *key, double v) {
    for (int i = 0; i < t->n_env_metrics; i++)
        if (!strcmp(t->env_metric_keys[i], key)) {
            t->env_metric_sums[i] += v;
            return;
        }
    t->env_metric_keys = rlc_realloc(t->env_metric_keys, (size_t)(t->n_env_metrics + 1) * sizeof(char *));
    t->env_metric_sums = rlc_realloc(t->env_metric_sums, (size_t)(t->n_env_metrics + 1) * sizeof(double));
    t->env_metric_keys[t->n_env_metrics] = rlc_strdup(key);
    t->env_metric_sums[t->n_env_metrics++] = v;
}

static void end_traj(traj_state *s, agent_end e) {
    s->t->end = e;
    s->live = 0;
}

static void round_clear(traj_state *s) {
    agent_parsed_free(&s->parsed);
    for (int i = 0; i < s->n_kept; i++) free(s->local[i]);
    free(s->local);
    s->local = NULL;
    s->n_kept = s->n_env = s->sent_step = 0;
    free(s->step_req);
    s->step_req = NULL;
}

// Run one batch of requests through the environment and return the replies (caller frees).
static cJSON **exchange(rlc_env *env, traj_state **st, int n, const char *const *req, const char *expect, double *wait) {
    const char **traj = rlc_malloc((size_t)n * sizeof *traj + 1);
    const char **exp = rlc_malloc((size_t)n * sizeof *exp + 1);
    for (int i = 0; i < n; i++) {
        traj[i] = st[i]->traj;
        exp[i] = expect;
    }
    cJSON **rep = rlc_calloc((size_t)n + 1, sizeof *rep);
    rlc_env_exchange(env, n, req, traj, exp, rep, wait);
    free(traj);
    free(exp);
    return rep;
}

static RLC_NORETURN void die_traj(const traj_state *s, const rlc_env *env, const char *what) {
    rlc_die("environment '%s': trajectory '%s': %s", env ? env->command : "?", s->traj, what);
}

// The step's observation -> the messages to append (tool results in call order, then the env's messages).
// Returns the list, or NULL when the env ended the trajectory (done) or had nothing to say (observe: all).
static cJSON *observation_msgs(traj_state *s, const cJSON *rep, const agent_run *run, int *n_fail, int *ended) {
    *ended = 0;
    const cJSON *done = rep ? cJSON_GetObjectItemCaseSensitive(rep, "done") : NULL;
    if (done && !cJSON_IsBool(done) && !cJSON_IsNull(done)) die_traj(s, run->env, "the observation's \"done\" is not a boolean");
    if (cJSON_IsTrue(done)) {
        *ended = 1;
        return NULL;
    }
    const cJSON *results = rep ? cJSON_GetObjectItemCaseSensitive(rep, "results") : NULL;
    const cJSON *umsgs = rep ? cJSON_GetObjectItemCaseSensitive(rep, "messages") : NULL;
    if (results && !cJSON_IsArray(results) && !cJSON_IsNull(results)) die_traj(s, run->env, "the observation's \"results\" is not a list");
    if (umsgs && !cJSON_IsArray(umsgs) && !cJSON_IsNull(umsgs)) die_traj(s, run->env, "the observation's \"messages\" is not a list");
    if (s->n_env > 0 && cJSON_GetArraySize(results) != s->n_env) {
        char m[160];
        snprintf(m, sizeof m, "the observation has %d results for %d tool calls", cJSON_GetArraySize(results), s->n_env);
        die_traj(s, run->env, m);
    }
    if (s->n_env == 0 && cJSON_GetArraySize(results) > 0) die_traj(s, run->env, "the observation has results but no tool call was sent");
    const cJSON **by_call = rlc_calloc((size_t)s->n_kept + 1, sizeof *by_call);
    for (const cJSON *r = results ? results->child : NULL; r; r = r->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(r, "id");
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(r, "content");
        if (!cJSON_IsObject(r) || !cJSON_IsString(id)) die_traj(s, run->env, "a result is not an object with a string \"id\"");
        int k = -1;
        for (int i = 0; i < s->n_kept; i++) {
            char cid[48];
            snprintf(cid, sizeof cid, "call_%d_%d", s->t->assistant_turns, i);
            if (!s->local[i] && !strcmp(cid, id->valuestring)) k = i;
        }
        if (k < 0 || by_call[k]) {
            char m[200];
            snprintf(m, sizeof m, "result id '%.80s' %s", id->valuestring, k < 0 ? "matches no tool call of the step" : "is repeated");
            die_traj(s, run->env, m);
        }
        if (!cJSON_IsString(ct)) {
            char m[200];
            snprintf(m, sizeof m, "result '%.80s' has no string \"content\"", id->valuestring);
            die_traj(s, run->env, m);
        }
        const cJSON *ie = cJSON_GetObjectItemCaseSensitive(r, "is_error");
        if (ie && !cJSON_IsBool(ie) && !cJSON_IsNull(ie)) die_traj(s, run->env, "a result's \"is_error\" is not a boolean");
        *n_fail += cJSON_IsTrue(ie);
        by_call[k] = r;
    }
    cJSON *out = cJSON_CreateArray();
    for (int i = 0; i < s->n_kept; i++) {
        const char *text = s->local[i] ? s->local[i] : cJSON_GetObjectItemCaseSensitive(by_call[i], "content")->valuestring;
        char *tr = agent_truncate(text, run->cfg.max_tool_response_length, run->cfg.truncate_side);
        cJSON_AddItemToArray(out, msg("tool", tr));
        free(tr);
    }
    free(by_call);
    for (const cJSON *m = umsgs ? umsgs->child : NULL; m; m = m->next) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsString(role) || (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "system")) ||
            !cJSON_IsString(ct))
            die_traj(s, run->env, "an observation message is not {\"role\": \"user\" | \"system\", \"content\": <string>}");
        cJSON_AddItemToArray(out, msg(role->valuestring, ct->valuestring));
    }
    if (cJSON_GetArraySize(out) == 0) {
        cJSON_Delete(out);
        return NULL;
    }
    return out;
}

// A turn's tokens arrived: append them (mask 1), check the limits in verl's order before parsing, parse, answer
// what rlc answers itself, and build the step request when the environment has to see the turn. Returns 0 if
// the trajectory ended, 1 if it goes on (s->sent_step: wait for the env's observation; else answered locally).
static int turn_done(agent_run *run, traj_state *s, const int32_t *ids, const float *lp, int64_t n, int finish) {
    const agent_config *c = &run->cfg;
    agent_traj *t = s->t;
    CHECK(n >= 1, "a turn of %lld tokens", (long long)n);
    resp_push(s, ids, lp, n, 1);
    t->n_generated += n;
    t->assistant_turns++;
    if (finish == ROLLOUT_FINISH_LENGTH || t->len >= c->response_length) end_traj(s, AGENT_END_LENGTH);
    else if (s->p->agent != AGENT_TOOL) end_traj(s, AGENT_END_NO_TOOL_CALL);
    else if (c->max_assistant_turns && t->assistant_turns >= c->max_assistant_turns) end_traj(s, AGENT_END_MAX_ASSISTANT_TURNS);
    else if (c->max_user_turns && t->user_turns >= c->max_user_turns) end_traj(s, AGENT_END_MAX_USER_TURNS);
    if (!s->live) return 0;
    const cJSON *tools = s->tools ? s->tools : run->env->tools;
    rlc_strbuf text = {0};
    rlc_tok_decode(run->tok, ids, n, 0, &text);
    agent_parse_hermes(text.s ? text.s : "", &s->parsed);
    t->invalid_blocks += s->parsed.n_invalid;
    s->n_kept = s->parsed.n_calls < c->max_parallel_calls ? s->parsed.n_calls : c->max_parallel_calls;
    s->local = rlc_calloc((size_t)s->n_kept + 1, sizeof *s->local);
    rlc_strbuf calls = {0}, rej = {0};
    for (int i = 0; i < s->n_kept; i++) {
        const agent_call *cl = &s->parsed.calls[i];
        s->local[i] = agent_local_answer(cl, tools);
        rlc_strbuf *w = s->local[i] ? &rej : &calls;
        rlc_sb_puts(w, w->n ? ",{\"id\":" : "{\"id\":");
        rlc_sb_printf(w, "\"call_%d_%d\",\"name\":", t->assistant_turns, i);
        rlc_sb_json_str(w, cl->name, strlen(cl->name));
        if (s->local[i]) {
            rlc_sb_puts(w, ",\"error\":");
            rlc_sb_json_str(w, s->local[i], strlen(s->local[i]));
            t->tool_failures++;
        } else {
            char *a = cJSON_PrintUnformatted(cl->arguments);
            rlc_sb_printf(w, ",\"arguments\":%s", a);
            free(a);
            s->n_env++;
        }
        rlc_sb_putc(w, '}');
    }
    const int observe_all = run->env->observe == RLC_ENV_OBSERVE_ALL;
    if (s->n_kept == 0 && !observe_all) end_traj(s, AGENT_END_NO_TOOL_CALL);
    else if (s->n_env > 0 || observe_all) {
        rlc_strbuf r = {0};
        rlc_sb_puts(&r, "{\"type\":\"step\",\"traj\":");
        rlc_sb_json_str(&r, s->traj, strlen(s->traj));
        rlc_sb_printf(&r, ",\"turn\":%d,\"finish\":\"%s\",\"text\":", t->assistant_turns, rollout_finish_name(finish));
        rlc_sb_json_str(&r, text.s ? text.s : "", text.n);
        rlc_sb_puts(&r, ",\"content\":");
        rlc_sb_json_str(&r, s->parsed.content, strlen(s->parsed.content));
        rlc_sb_printf(&r, ",\"tool_calls\":[%s],\"rejected\":[%s]}", calls.s ? calls.s : "", rej.s ? rej.s : "");
        s->step_req = rlc_sb_take(&r);
        s->sent_step = 1;
    }
    rlc_sb_free(&calls);
    rlc_sb_free(&rej);
    rlc_sb_free(&text);
    return s->live;
}

// The observation (the env's reply r, or NULL when rlc answered every call itself): the trajectory ends (returns
// 0) or its observation tokens go into x, already appended to the response with mask 0 (returns 1).
static int observe(agent_run *run, traj_state *s, const cJSON *r, double wait, rlc_ivec *x) {
    const agent_config *c = &run->cfg;
    agent_traj *t = s->t;
    t->env_wait_s += wait;
    int n_fail = 0, ended = 0;
    cJSON *obs = observation_msgs(s, r, run, &n_fail, &ended);
    const cJSON *rw = r ? cJSON_GetObjectItemCaseSensitive(r, "reward") : NULL;
    if (rw && !cJSON_IsNull(rw) && !(cJSON_IsNumber(rw) && isfinite(rw->valuedouble)))
        die_traj(s, run->env, "the observation's \"reward\" is not a finite number");
    const cJSON *mt = r ? cJSON_GetObjectItemCaseSensitive(r, "metrics") : NULL;   // counted whatever happens next
    if (mt && !cJSON_IsNull(mt)) {
        if (!cJSON_IsObject(mt)) die_traj(s, run->env, "the observation's \"metrics\" is not an object");
        for (const cJSON *e = mt->child; e; e = e->next) {
            if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble)) {
                char m[200];
                snprintf(m, sizeof m, "the observation's metric '%.80s' is not a finite number", e->string);
                die_traj(s, run->env, m);
            }
            env_metric_add(t, e->string, e->valuedouble);
        }
    }
    x->n = 0;
    if (ended) end_traj(s, AGENT_END_ENV_DONE);
    else if (!obs) end_traj(s, AGENT_END_NO_TOOL_CALL);
    else {
        rlc_strbuf err = {0};
        if (agent_observation_ids(run->tok, t->ids[t->len - 1], obs, c->enable_thinking, x, &err)) die_traj(s, run->env, err.s);
        rlc_sb_free(&err);
        // the budget rule: an observation that does not fit leaves the trajectory on its assistant turn
        if (t->len + x->n >= c->response_length) end_traj(s, AGENT_END_BUDGET);
        else {
            resp_push(s, x->v, NULL, x->n, 0);
            t->user_turns++;
            t->tool_call_counts += s->n_kept;
            t->tool_failures += n_fail;
            if (cJSON_IsNumber(rw)) {
                t->tool_rewards = rlc_realloc(t->tool_rewards, (size_t)(t->n_tool_rewards + 1) * sizeof(double));
                t->tool_rewards[t->n_tool_rewards++] = rw->valuedouble;
            }
        }
    }
    cJSON_Delete(obs);
    round_clear(s);
    return s->live;
}

// A started reply may give the trajectory its own tools (verl's per-row tools_kwargs / tool selection) and text
// for the end of the last user message (TRL's reset()): its prompt is then rendered here, from the row's messages,
// before anything of it is computed. Otherwise it keeps the row's prompt (rendered with the hello's tools).
static void started_prompt(agent_run *run, traj_state *s, cJSON *rep) {
    rlc_strbuf err = {0};
    const int rc = agent_started_prompt(run->tok, rep, s->p->messages, run->env->tools, run->cfg.enable_thinking,
                                        run->max_prompt_length, run->truncation, &s->tools, &s->own, &err);
    if (rc < 0) die_traj(s, run->env, err.s ? err.s : "the \"started\" reply");
    rlc_sb_free(&err);
    if (rc == 0) return;
    s->pids = s->own.v;
    s->plen = s->own.n;
}

// The start batch: one start per tool_agent trajectory.
static void start_all(agent_run *run, traj_state *st, int N, traj_state **batch, char **reqs) {
    int nb = 0;
    for (int i = 0; i < N; i++) {
        traj_state *s = &st[i];
        if (s->p->agent != AGENT_TOOL) continue;
        rlc_strbuf b = {0};
        const uint64_t seed = mix64(mix64(mix64(run->seed) ^ (uint64_t)run->step) ^ s->p->id) ^ (uint64_t)s->t->sample;
        const char *split = run->split ? run->split : "train";
        rlc_sb_puts(&b, "{\"type\":\"start\",\"traj\":");
        rlc_sb_json_str(&b, s->traj, strlen(s->traj));
        rlc_sb_puts(&b, ",\"split\":");
        rlc_sb_json_str(&b, split, strlen(split));
        rlc_sb_printf(&b, ",\"step\":%lld,\"index\":%llu,\"sample\":%d,\"seed\":%llu,\"agent_name\":\"tool_agent\",\"data_source\":",
                      (long long)run->step, (unsigned long long)s->p->id, s->t->sample,
                      (unsigned long long)(seed & ((1ull << 53) - 1)));
        const char *ds = s->p->data_source ? s->p->data_source : "", *gt = s->p->ground_truth ? s->p->ground_truth : "";
        rlc_sb_json_str(&b, ds, strlen(ds));
        rlc_sb_puts(&b, ",\"ground_truth\":");
        rlc_sb_json_str(&b, gt, strlen(gt));
        char *ei = s->p->extra_info ? cJSON_PrintUnformatted(s->p->extra_info) : NULL;
        char *ms = s->p->messages ? cJSON_PrintUnformatted(s->p->messages) : NULL;
        rlc_sb_printf(&b, ",\"extra_info\":%s,\"messages\":%s}", ei ? ei : "{}", ms ? ms : "[]");
        free(ei);
        free(ms);
        reqs[nb] = rlc_sb_take(&b);
        batch[nb++] = s;
        s->started = 1;
    }
    if (!nb) return;
    cJSON **rep = exchange(run->env, batch, nb, (const char *const *)reqs, "started", NULL);
    for (int i = 0; i < nb; i++) {
        started_prompt(run, batch[i], rep[i]);
        cJSON_Delete(rep[i]);
        free(reqs[i]);
    }
    free(rep);
}

// The finish batch: once per started trajectory, whatever ended it; the env's score and pred.
static void finish_all(agent_run *run, traj_state *st, int N, traj_state **batch, char **reqs) {
    int nb = 0;
    for (int i = 0; i < N; i++) {
        traj_state *s = &st[i];
        agent_traj *t = s->t;
        t->num_turns = t->user_turns + t->assistant_turns + 1;
        if (!s->started) continue;
        rlc_strbuf b = {0};
        rlc_sb_puts(&b, "{\"type\":\"finish\",\"traj\":");
        rlc_sb_json_str(&b, s->traj, strlen(s->traj));
        rlc_sb_printf(&b, ",\"reason\":\"%s\",\"num_turns\":%d,\"tool_call_counts\":%d,\"response\":", agent_end_name(t->end),
                      t->num_turns, t->tool_call_counts);
        char *resp = rlc_tok_decode_str(run->tok, t->ids, t->len, 1);
        rlc_sb_json_str(&b, resp, strlen(resp));
        free(resp);
        rlc_sb_putc(&b, '}');
        reqs[nb] = rlc_sb_take(&b);
        batch[nb++] = s;
    }
    if (!nb) return;
    cJSON **rep = exchange(run->env, batch, nb, (const char *const *)reqs, "finished", NULL);
    for (int i = 0; i < nb; i++) {
        agent_traj *t = batch[i]->t;
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(rep[i], "score");
        if (sc && !cJSON_IsNull(sc) && !(cJSON_IsNumber(sc) && isfinite(sc->valuedouble)))
            die_traj(batch[i], run->env, "the \"finished\" reply's \"score\" is neither a finite number nor null");
        if (cJSON_IsNumber(sc)) {
            t->has_score = 1;
            t->score = sc->valuedouble;
        }
        const cJSON *pd = cJSON_GetObjectItemCaseSensitive(rep[i], "pred");
        if (cJSON_IsString(pd)) t->pred = rlc_strdup(pd->valuestring);
        for (const cJSON *e = rep[i]->child; e; e = e->next)   // numeric extras, as an external reward's
            if (cJSON_IsNumber(e) && isfinite(e->valuedouble) && strcmp(e->string, "score") && strcmp(e->string, "traj") &&
                strcmp(e->string, "type"))
                env_metric_add(t, e->string, e->valuedouble);
        cJSON_Delete(rep[i]);
        free(reqs[i]);
    }
    free(rep);
}

// Turn-synchronous: one turn for every live trajectory per round, then the round's steps in one batch.
static void run_rounds(agent_run *run, traj_state *st, int N, traj_state **batch) {
    const agent_config *c = &run->cfg;
    agent_gen_req *greq = rlc_calloc((size_t)N + 1, sizeof *greq);
    agent_gen_out *gout = rlc_calloc((size_t)N + 1, sizeof *gout);
    for (;;) {
        int nb = 0;
        for (int i = 0; i < N; i++) {
            traj_state *s = &st[i];
            if (!s->live) continue;
            agent_traj *t = s->t;
            s->ctx = rlc_realloc(s->ctx, (size_t)(t->n_prompt + t->len) * sizeof(int32_t) + 1);
            memcpy(s->ctx, t->prompt_ids, (size_t)t->n_prompt * sizeof(int32_t));
            if (t->len) memcpy(s->ctx + t->n_prompt, t->ids, (size_t)t->len * sizeof(int32_t));
            // round 1 passes the prompt itself (one pointer for a group's samples), so whole groups keep the engine's prompt
            // sharing
            greq[nb] = (agent_gen_req){t->len ? s->ctx : s->pids, t->n_prompt + t->len, s->p->id, t->sample, t->n_generated,
                                       (int)(c->response_length - t->len)};
            run->computed_prompt_tokens += t->n_prompt + t->len;
            batch[nb++] = s;
        }
        if (!nb) break;
        run->rounds++;
        memset(gout, 0, (size_t)nb * sizeof *gout);
        run->generate(run->generate_ctx, nb, greq, gout);
        int n_step = 0;
        for (int b = 0; b < nb; b++) {
            CHECK(gout[b].len >= 1 && gout[b].len <= greq[b].max_new, "generator returned %lld tokens (cap %d)", (long long)gout[b].len,
                  greq[b].max_new);
            turn_done(run, batch[b], gout[b].ids, gout[b].logprobs, gout[b].len, gout[b].finish);
            free(gout[b].ids);
            free(gout[b].logprobs);
            n_step += batch[b]->live && batch[b]->sent_step;
        }
        cJSON **rep = NULL;
        double *wait = rlc_calloc((size_t)n_step + 1, sizeof *wait);
        traj_state **sb = rlc_calloc((size_t)n_step + 1, sizeof *sb);
        const char **sr = rlc_calloc((size_t)n_step + 1, sizeof *sr);
        int k = 0;
        for (int b = 0; b < nb; b++)
            if (batch[b]->live && batch[b]->sent_step) {
                sb[k] = batch[b];
                sr[k++] = batch[b]->step_req;
            }
        if (n_step) rep = exchange(run->env, sb, n_step, sr, "observation", wait);
        k = 0;
        rlc_ivec x = {0};
        for (int b = 0; b < nb; b++) {
            traj_state *s = batch[b];
            if (!s->live) {
                round_clear(s);
                continue;
            }
            const int sent = s->sent_step;
            observe(run, s, sent ? rep[k] : NULL, sent ? wait[k] : 0.0, &x);
            k += sent;
        }
        rlc_iv_free(&x);
        for (int i = 0; i < n_step; i++) cJSON_Delete(rep[i]);
        free(rep);
        free(wait);
        free(sb);
        free(sr);
    }
    free(greq);
    free(gout);
}

// Continuous: the engine's turn hooks. A turn that needs the env sends its step at once and leaves the schedule
// with its KV kept; the observation is handed back to the engine as soon as its reply arrives.
typedef struct {
    agent_run *run;
    traj_state *st;
    int n;                       // samples per prompt
    int *local, n_local;         // trajectories answered locally, to resume at the next poll
} cont_ctx;

static int cont_turn_end(void *ctx, rollout_turn_io *io, int prompt, int sample, const int32_t *ids, const float *lp, int64_t n,
                         int finish) {
    (void)io;
    cont_ctx *cc = ctx;
    const int i = prompt * cc->n + sample;
    traj_state *s = &cc->st[i];
    if (!turn_done(cc->run, s, ids, lp, n, finish)) {
        round_clear(s);
        return 0;
    }
    if (s->sent_step) rlc_env_send(cc->run->env, s->step_req, s->traj, "observation", i);
    else cc->local[cc->n_local++] = i;
    return 1;
}

static void cont_deliver(cont_ctx *cc, rollout_turn_io *io, int i, const cJSON *r, double wait) {
    traj_state *s = &cc->st[i];
    rlc_ivec x = {0};
    if (observe(cc->run, s, r, wait, &x)) rollout_turn_resume(io, s->eng_prompt, s->eng_sample, x.v, x.n);
    else rollout_turn_end(io, s->eng_prompt, s->eng_sample);
    rlc_iv_free(&x);
}

static void cont_poll(void *ctx, rollout_turn_io *io, int block) {
    cont_ctx *cc = ctx;
    int delivered = 0;
    for (int k = 0; k < cc->n_local; k++, delivered++) cont_deliver(cc, io, cc->local[k], NULL, 0.0);
    cc->n_local = 0;
    const double t0 = rlc_now();
    for (;;) {
        int64_t tag;
        double wait = 0;
        cJSON *r = rlc_env_pending(cc->run->env) ? rlc_env_recv(cc->run->env, block && !delivered, &tag, &wait) : NULL;
        if (!r) break;
        cont_deliver(cc, io, (int)tag, r, wait);
        cJSON_Delete(r);
        delivered++;
    }
    cc->run->env->wait_s += rlc_now() - t0;
}

static void run_continuous(agent_run *run, traj_state *st, int N) {
    rollout_engine *e = run->engine;
    const int n0 = rollout_engine_config(e)->n;
    const sampler_params sp = rollout_engine_config(e)->sampling;
    CHECK(n0 == run->n, "engine n=%d, agent n=%d", n0, run->n);
    if (run->cfg.response_length > rollout_engine_config(e)->max_new_tokens)
        rlc_die("response_length %d exceeds the rollout engine's max_new_tokens %d", run->cfg.response_length,
                rollout_engine_config(e)->max_new_tokens);
    // The n samples of a prompt share its prefill when they run from one prompt. When a started reply gave some
    // sample a prompt of its own, every trajectory runs as a one-sample prompt that keeps the stream identity
    // (id, sample) of its place, so its tokens are the same either way (the engine is batch-invariant).
    int grouped = 1;
    for (int i = 0; i < N; i++) grouped &= st[i].pids == st[i - i % n0].pids;
    const int k = grouped ? n0 : 1, np = N / k;
    rollout_prompt *pr = rlc_calloc((size_t)np + 1, sizeof *pr);
    rollout_stream *ss = rlc_calloc((size_t)np + 1, sizeof *ss);
    for (int q = 0; q < np; q++) {
        const traj_state *s = &st[q * k];
        pr[q] = (rollout_prompt){s->pids, s->plen, s->p->id};
        ss[q] = (rollout_stream){run->cfg.response_length, grouped ? 0 : s->t->sample, 0};
    }
    for (int i = 0; i < N; i++) {
        st[i].eng_prompt = i / k;
        st[i].eng_sample = i % k;
    }
    cont_ctx cc = {run, st, k, rlc_calloc((size_t)N + 1, sizeof(int)), 0};
    const rollout_turn_hooks hooks = {cont_turn_end, cont_poll, &cc};
    rollout_result res;
    if (k != n0) rollout_engine_set_sampling(e, k, &sp);
    rollout_generate_turns(e, pr, ss, np, &hooks, &res);
    if (k != n0) rollout_engine_set_sampling(e, n0, &sp);
    // the engine's response is the one the agent recorded: sampled turns and observation tokens, in order
    for (int i = 0; i < N; i++) {
        const agent_traj *t = st[i].t;
        const rollout_sample *o = &res.samples[i];
        CHECK(o->len == t->len && !memcmp(o->ids, t->ids, (size_t)t->len * sizeof(int32_t)),
              "trajectory %d: engine response (%lld tokens) differs from the agent's (%lld)", i, (long long)o->len, (long long)t->len);
    }
    run->rounds = res.n_steps;
    run->n_preempt = res.n_preempt;
    run->computed_prompt_tokens = res.computed_tokens;
    rollout_result_free(&res);
    free(cc.local);
    free(pr);
    free(ss);
}

void agent_rollout(agent_run *run, const agent_prompt *prompts, int n_prompts, agent_traj *out) {
    const agent_config *c = &run->cfg;
    CHECK(run->n >= 1 && c->response_length >= 1 && c->max_parallel_calls >= 1, "n=%d response_length=%d max_parallel_calls=%d",
          run->n, c->response_length, c->max_parallel_calls);
    const int N = n_prompts * run->n;
    traj_state *st = rlc_calloc((size_t)N + 1, sizeof *st);
    traj_state **batch = rlc_calloc((size_t)N + 1, sizeof *batch);
    char **reqs = rlc_calloc((size_t)N + 1, sizeof *reqs);
    int n_tool = 0;
    for (int p = 0; p < n_prompts; p++)
        for (int j = 0; j < run->n; j++) {
            traj_state *s = &st[p * run->n + j];
            agent_traj *t = &out[p * run->n + j];
            memset(t, 0, sizeof *t);
            s->t = t;
            s->p = &prompts[p];
            s->live = 1;
            t->prompt = p;
            t->sample = j;
            s->pids = prompts[p].ids;
            s->plen = prompts[p].len;
            snprintf(s->traj, sizeof s->traj, "%s:%lld:%llu:%d", run->split ? run->split : "train", (long long)run->step,
                     (unsigned long long)prompts[p].id, j);
            if (prompts[p].agent == AGENT_TOOL) n_tool++;
        }
    if (n_tool && !run->env)
        rlc_die("%d rows use the tool_agent loop but no environment is configured (multi_turn.env_command)", n_tool / run->n);
    start_all(run, st, N, batch, reqs);
    for (int i = 0; i < N; i++) {
        traj_state *s = &st[i], *s0 = &st[i - i % run->n];
        // a sample whose prompt equals sample 0's runs from sample 0's, so the group still shares its prefill
        if (s != s0 && s->pids != s0->pids && s->plen == s0->plen && !memcmp(s->pids, s0->pids, (size_t)s->plen * sizeof(int32_t)))
            s->pids = s0->pids;
        s->t->n_prompt = s->plen;
        s->t->prompt_ids = rlc_malloc((size_t)s->plen * sizeof(int32_t) + 1);
        memcpy(s->t->prompt_ids, s->pids, (size_t)s->plen * sizeof(int32_t));
    }
    if (run->engine) run_continuous(run, st, N);
    else run_rounds(run, st, N, batch);
    finish_all(run, st, N, batch, reqs);
    for (int i = 0; i < N; i++) {
        free(st[i].ctx);
        rlc_iv_free(&st[i].own);
        cJSON_Delete(st[i].tools);
    }
    free(reqs);
    free(batch);
    free(st);
}
