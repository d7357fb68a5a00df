// agent.c: multi-turn tool rollouts (see agent.h): parsing, local answers, truncation, observation tokens, and
// the turn-synchronous driver over the rollout engine and the environment process.
#include "rollout/agent.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"

static const char *END_NAMES[AGENT_END_COUNT] = {"no_tool_call", "env_done", "length", "budget", "max_assistant_turns",
                                                 "max_user_turns"};
const char *agent_end_name(agent_end e) { return e >= 0 && e < AGENT_END_COUNT ? END_NAMES[e] : "?"; }

int agent_truncate_side_parse(const char *s) {
    return !strcmp(s, "left") ? AGENT_TRUNC_LEFT : !strcmp(s, "right") ? AGENT_TRUNC_RIGHT : !strcmp(s, "middle") ? AGENT_TRUNC_MIDDLE : -1;
}

int agent_name_parse(const char *s) {
    return !strcmp(s, "single_turn_agent") ? AGENT_SINGLE_TURN : !strcmp(s, "tool_agent") ? AGENT_TOOL : -1;
}

void agent_config_default(agent_config *c) {
    memset(c, 0, sizeof *c);
    c->max_parallel_calls = 1;
    c->max_tool_response_length = 256;
    c->truncate_side = AGENT_TRUNC_MIDDLE;
    c->enable_thinking = -1;
    c->response_length = 512;
}

// ---- parsing ----

// The last member named key (Python's json.loads keeps the last of duplicate keys), or NULL.
static cJSON *last_member(const cJSON *o, const char *key) {
    cJSON *r = NULL;
    for (cJSON *c = o->child; c; c = c->next)
        if (c->string && !strcmp(c->string, key)) r = c;
    return r;
}

static int is_json_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// One block body -> a call, or 0 when it is not {"name": <string>, "arguments": <any>}.
static int parse_body(const char *b, size_t n, agent_call *call) {
    while (n && is_json_ws(*b)) b++, n--;
    while (n && is_json_ws(b[n - 1])) n--;
    if (!n || memchr(b, 0, n)) return 0;
    const char *stop = NULL;
    cJSON *chk = cJSON_ParseWithLengthOpts(b, n, &stop, 0);
    if (!chk || (size_t)(stop - b) != n) {   // one JSON value and nothing after it
        cJSON_Delete(chk);
        return 0;
    }
    cJSON *name = cJSON_IsObject(chk) ? last_member(chk, "name") : NULL;
    cJSON *args = cJSON_IsObject(chk) ? last_member(chk, "arguments") : NULL;
    if (!cJSON_IsString(name) || !args) {
        cJSON_Delete(chk);
        return 0;
    }
    call->name = rlc_strdup(name->valuestring);
    call->arguments = cJSON_Duplicate(args, 1);
    cJSON_Delete(chk);
    return 1;
}

void agent_parse_hermes(const char *text, agent_parsed *out) {
    static const char OPEN[] = "<tool_call>", CLOSE[] = "</tool_call>";
    memset(out, 0, sizeof *out);
    rlc_strbuf content = {0};
    rlc_sb_puts(&content, "");
    // verl: no calls unless both tags occur; then re.findall(r"<tool_call>(.*?)</tool_call>", text, re.DOTALL)
    if (!strstr(text, OPEN) || !strstr(text, CLOSE)) {
        rlc_sb_puts(&content, text);
        out->content = rlc_sb_take(&content);
        return;
    }
    int cap = 0;
    const char *pos = text;
    for (;;) {
        const char *o = strstr(pos, OPEN);
        const char *c = o ? strstr(o + sizeof OPEN - 1, CLOSE) : NULL;
        if (!c) break;
        rlc_sb_append(&content, pos, (size_t)(o - pos));
        const char *body = o + sizeof OPEN - 1;
        agent_call call = {0};
        if (parse_body(body, (size_t)(c - body), &call)) {
            if (out->n_calls == cap) {
                cap = cap ? cap * 2 : 4;
                out->calls = rlc_realloc(out->calls, (size_t)cap * sizeof *out->calls);
            }
            out->calls[out->n_calls++] = call;
        } else out->n_invalid++;
        pos = c + sizeof CLOSE - 1;
    }
    rlc_sb_puts(&content, pos);
    out->content = rlc_sb_take(&content);
}

void agent_parsed_free(agent_parsed *p) {
    for (int i = 0; i < p->n_calls; i++) {
        free(p->calls[i].name);
        cJSON_Delete(p->calls[i].arguments);
    }
    free(p->calls);
    free(p->content);
    memset(p, 0, sizeof *p);
}

// Decode one UTF-8 code point at s (n bytes left); returns its length (1 for an invalid byte, value 0xFFFD).
static int utf8_cp(const unsigned char *s, size_t n, uint32_t *cp) {
    if (s[0] < 0x80) return *cp = s[0], 1;
    int len = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || (size_t)len > n) return *cp = 0xFFFD, 1;
    uint32_t v = s[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return *cp = 0xFFFD, 1;
        v = (v << 6) | (s[i] & 0x3F);
    }
    return *cp = v, len;
}

void agent_py_repr(rlc_strbuf *out, const char *s) {
    // Python: single quotes unless the text has ' and no "
    const char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
    rlc_sb_putc(out, q);
    const size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        const int k = utf8_cp((const unsigned char *)s + i, n - i, &cp);
        if (cp == (uint32_t)q || cp == '\\') rlc_sb_printf(out, "\\%c", (char)cp);
        else if (cp == '\n') rlc_sb_puts(out, "\\n");
        else if (cp == '\r') rlc_sb_puts(out, "\\r");
        else if (cp == '\t') rlc_sb_puts(out, "\\t");
        else if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0) || cp == 0xAD) rlc_sb_printf(out, "\\x%02x", cp);
        else if (cp == 0x2028 || cp == 0x2029 || (cp >= 0xD800 && cp < 0xE000)) rlc_sb_printf(out, "\\u%04x", cp);
        else rlc_sb_append(out, s + i, (size_t)k);
        i += (size_t)k;
    }
    rlc_sb_putc(out, q);
}

char *agent_local_answer(const agent_call *call, const cJSON *tools) {
    int known = 0;
    for (const cJSON *t = tools ? tools->child : NULL; t; t = t->next) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name");
        known |= cJSON_IsString(nm) && !strcmp(nm->valuestring, call->name);
    }
    rlc_strbuf b = {0};
    if (!known) {
        rlc_sb_puts(&b, "Unknown function ");
        agent_py_repr(&b, call->name);
        rlc_sb_puts(&b, ". Available tools: [");
        int i = 0;
        for (const cJSON *t = tools ? tools->child : NULL; t; t = t->next) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name");
            if (!cJSON_IsString(nm)) continue;
            if (i++) rlc_sb_puts(&b, ", ");
            agent_py_repr(&b, nm->valuestring);
        }
        rlc_sb_puts(&b, "]");
        return rlc_sb_take(&b);
    }
    if (!cJSON_IsObject(call->arguments)) {
        rlc_sb_puts(&b, "Error executing tool ");
        agent_py_repr(&b, call->name);
        rlc_sb_puts(&b, ": arguments must be a JSON object");
        return rlc_sb_take(&b);
    }
    return NULL;
}

// Byte offset of code point k (0..n_cp) in s.
static size_t cp_offset(const char *s, size_t n, int64_t k) {
    size_t i = 0;
    for (int64_t c = 0; c < k && i < n; c++) {
        uint32_t cp;
        i += (size_t)utf8_cp((const unsigned char *)s + i, n - i, &cp);
    }
    return i;
}

char *agent_truncate(const char *text, int L, int side) {
    const size_t n = strlen(text);
    int64_t ncp = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)utf8_cp((const unsigned char *)text + i, n - i, &cp);
        ncp++;
    }
    if (ncp <= L) return rlc_strdup(text);
    rlc_strbuf b = {0};
    // Python slices: text[-0:] is the whole text, as verl's code gives for L (or L // 2) = 0
    const int64_t h = L / 2;
    if (side == AGENT_TRUNC_LEFT) {
        rlc_sb_puts(&b, "(truncated)...");
        rlc_sb_puts(&b, text + (L ? cp_offset(text, n, ncp - L) : 0));
    } else if (side == AGENT_TRUNC_RIGHT) {
        rlc_sb_append(&b, text, cp_offset(text, n, L));
        rlc_sb_puts(&b, "...(truncated)");
    } else {
        rlc_sb_append(&b, text, cp_offset(text, n, h));
        rlc_sb_puts(&b, "...(truncated)...");
        rlc_sb_puts(&b, text + (h ? cp_offset(text, n, ncp - h) : 0));
    }
    return rlc_sb_take(&b);
}

// ---- observation tokens ----

static cJSON *msg(const char *role, const char *content) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    return m;
}

// verl's synthetic prefix (continuous_token.py): system, user and, for a tool group, an assistant turn with
// one call per tool message and a non-empty reasoning_content (which keeps Qwen3's think block in both
// renderings, so the prefix renders the same with and without the group after it).
static cJSON *synthetic_prefix(int n_tool) {
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, msg("system", "continuous token synthetic system"));
    cJSON_AddItemToArray(a, msg("user", "continuous token synthetic user"));
    if (n_tool > 0) {
        cJSON *as = msg("assistant", "");
        cJSON_AddStringToObject(as, "reasoning_content", "reasoning");
        cJSON *calls = cJSON_AddArrayToObject(as, "tool_calls");
        for (int i = 0; i < n_tool; i++) {
            cJSON *c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "type", "function");
            cJSON *f = cJSON_AddObjectToObject(c, "function");
            cJSON_AddStringToObject(f, "name", "tool");
            cJSON_AddObjectToObject(f, "arguments");
            cJSON_AddItemToArray(calls, c);
        }
        cJSON_AddItemToArray(a, as);
    }
    return a;
}

// render(base ‖ group, agp) minus render(base, agp0): appended to out. -1 with err if not a prefix.
static int render_delta(rlc_tokenizer *tok, cJSON *base, const cJSON *group, int agp0, int agp, const cJSON *kw,
                        rlc_strbuf *out, rlc_strbuf *err) {
    rlc_strbuf a = {0}, b = {0};
    int rc = rlc_tok_chat_render_json(tok, base, NULL, agp0, kw, &a, err);
    cJSON *all = cJSON_Duplicate(base, 1);
    for (const cJSON *m = group ? group->child : NULL; m; m = m->next) cJSON_AddItemToArray(all, cJSON_Duplicate(m, 1));
    if (!rc) rc = rlc_tok_chat_render_json(tok, all, NULL, agp, kw, &b, err);
    if (!rc && (b.n < a.n || memcmp(a.s ? a.s : "", b.s ? b.s : "", a.n))) {
        rlc_sb_puts(err, "the chat template does not render the observation as an append-only suffix of the conversation");
        rc = -1;
    }
    if (!rc) rlc_sb_append(out, b.s + a.n, b.n - a.n);
    cJSON_Delete(all);
    rlc_sb_free(&a);
    rlc_sb_free(&b);
    return rc;
}

int agent_observation_ids(rlc_tokenizer *tok, int32_t last_id, const cJSON *msgs, int enable_thinking, rlc_ivec *out,
                          rlc_strbuf *err) {
    cJSON *kw = cJSON_CreateObject();
    if (enable_thinking >= 0) cJSON_AddBoolToObject(kw, "enable_thinking", enable_thinking);
    rlc_strbuf text = {0};
    int rc = 0;
    // verl's Qwen boundary: the template writes "<|im_end|>\n" after a turn, generation stops at <|im_end|>
    const int32_t im_end = rlc_tok_token_to_id(tok, "<|im_end|>");
    if (im_end >= 0 && last_id == im_end) rlc_sb_puts(&text, "\n");
    const cJSON *m = msgs ? msgs->child : NULL;
    cJSON *last_group = NULL, *last_base = NULL;
    while (m && !rc) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const int is_tool = cJSON_IsString(role) && !strcmp(role->valuestring, "tool");
        cJSON *group = cJSON_CreateArray();
        int k = 0;
        do {
            cJSON_AddItemToArray(group, cJSON_Duplicate(m, 1));
            m = m->next;
            k++;
        } while (is_tool && m && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "role")) &&
                 !strcmp(cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring, "tool"));
        cJSON *base = synthetic_prefix(is_tool ? k : 0);
        rc = render_delta(tok, base, group, 0, 0, kw, &text, err);
        cJSON_Delete(last_group);
        cJSON_Delete(last_base);
        last_group = group;
        last_base = base;
    }
    // the generation prompt: render(all, True) - render(all, False)
    if (!rc && last_group) {
        cJSON *all = cJSON_Duplicate(last_base, 1);
        for (const cJSON *g = last_group->child; g; g = g->next) cJSON_AddItemToArray(all, cJSON_Duplicate(g, 1));
        rc = render_delta(tok, all, NULL, 0, 1, kw, &text, err);
        cJSON_Delete(all);
    }
    cJSON_Delete(last_group);
    cJSON_Delete(last_base);
    cJSON_Delete(kw);
    if (!rc) rlc_tok_encode(tok, text.s ? text.s : "", text.n, out);
    rlc_sb_free(&text);
    return rc;
}

// ---- the driver ----

void agent_traj_free(agent_traj *t) {
    free(t->prompt_ids);
    free(t->ids);
    free(t->mask);
    free(t->logprobs);
    free(t->tool_rewards);
    free(t->pred);
    memset(t, 0, sizeof *t);
}

void agent_engine_generator(void *engine, int n, const agent_gen_req *req, agent_gen_out *out) {
    rollout_engine *e = engine;
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
    int64_t cap;                  // allocated response entries
    int32_t *ctx;                 // (n_prompt + len) context for the next turn
    // the current round
    agent_gen_out gen;
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

static void end_traj(traj_state *s, agent_end e) {
    s->t->end = e;
    s->live = 0;
}

static void round_clear(traj_state *s) {
    free(s->gen.ids);
    free(s->gen.logprobs);
    memset(&s->gen, 0, sizeof s->gen);
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

void agent_rollout(agent_run *run, const agent_prompt *prompts, int n_prompts, agent_traj *out) {
    const agent_config *c = &run->cfg;
    CHECK(run->n >= 1 && c->response_length >= 1 && c->max_parallel_calls >= 1, "n=%d response_length=%d max_parallel_calls=%d",
          run->n, c->response_length, c->max_parallel_calls);
    const int N = n_prompts * run->n;
    traj_state *st = rlc_calloc((size_t)N + 1, sizeof *st);
    traj_state **batch = rlc_calloc((size_t)N + 1, sizeof *batch);
    char **reqs = rlc_calloc((size_t)N + 1, sizeof *reqs);
    const cJSON *tools = run->env ? run->env->tools : NULL;
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
            t->n_prompt = prompts[p].len;
            t->prompt_ids = rlc_malloc((size_t)prompts[p].len * sizeof(int32_t) + 1);
            memcpy(t->prompt_ids, prompts[p].ids, (size_t)prompts[p].len * sizeof(int32_t));
            snprintf(s->traj, sizeof s->traj, "%s:%lld:%llu:%d", run->split ? run->split : "train", (long long)run->step,
                     (unsigned long long)prompts[p].id, j);
            if (prompts[p].agent == AGENT_TOOL) n_tool++;
        }
    if (n_tool && !run->env)
        rlc_die("%d rows use the tool_agent loop but no environment is configured (multi_turn.env_command)", n_tool / run->n);

    // start
    int nb = 0;
    for (int i = 0; i < N; i++) {
        traj_state *s = &st[i];
        if (s->p->agent != AGENT_TOOL) continue;
        rlc_strbuf b = {0};
        const uint64_t seed = mix64(mix64(mix64(run->seed) ^ (uint64_t)run->step) ^ s->p->id) ^ (uint64_t)s->t->sample;
        rlc_sb_puts(&b, "{\"type\":\"start\",\"traj\":");
        rlc_sb_json_str(&b, s->traj, strlen(s->traj));
        rlc_sb_puts(&b, ",\"split\":");
        rlc_sb_json_str(&b, run->split ? run->split : "train", strlen(run->split ? run->split : "train"));
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
    if (nb) {
        cJSON **rep = exchange(run->env, batch, nb, (const char *const *)reqs, "started", NULL);
        for (int i = 0; i < nb; i++) {
            if (cJSON_GetObjectItemCaseSensitive(rep[i], "tools") || cJSON_GetObjectItemCaseSensitive(rep[i], "append_to_user"))
                die_traj(batch[i], run->env,
                         "\"started\" carries per-trajectory \"tools\" / \"append_to_user\", which rlc does not support: "
                         "declare the tools in the hello and put the prompt text in the data");
            cJSON_Delete(rep[i]);
            free(reqs[i]);
        }
        free(rep);
    }

    agent_gen_req *greq = rlc_calloc((size_t)N + 1, sizeof *greq);
    agent_gen_out *gout = rlc_calloc((size_t)N + 1, sizeof *gout);
    for (;;) {
        // 1. one assistant turn for every live trajectory, in (prompt, sample) order
        nb = 0;
        for (int i = 0; i < N; i++) {
            traj_state *s = &st[i];
            if (!s->live) continue;
            agent_traj *t = s->t;
            s->ctx = rlc_realloc(s->ctx, (size_t)(t->n_prompt + t->len) * sizeof(int32_t) + 1);
            memcpy(s->ctx, t->prompt_ids, (size_t)t->n_prompt * sizeof(int32_t));
            if (t->len) memcpy(s->ctx + t->n_prompt, t->ids, (size_t)t->len * sizeof(int32_t));
            // round 1 passes the prompt itself, so whole groups keep the engine's prompt sharing
            greq[nb] = (agent_gen_req){t->len ? s->ctx : s->p->ids, t->n_prompt + t->len, s->p->id, t->sample,
                                       t->n_generated, (int)(c->response_length - t->len)};
            run->computed_prompt_tokens += t->n_prompt + t->len;
            batch[nb++] = s;
        }
        if (!nb) break;
        run->rounds++;
        memset(gout, 0, (size_t)nb * sizeof *gout);
        run->generate(run->generate_ctx, nb, greq, gout);
        // 2. append, check the limits (verl's order, before parsing), parse, answer locally, build the steps
        int n_step = 0;
        for (int b = 0; b < nb; b++) {
            traj_state *s = batch[b];
            agent_traj *t = s->t;
            s->gen = gout[b];
            CHECK(s->gen.len >= 1 && s->gen.len <= greq[b].max_new, "generator returned %lld tokens (cap %d)",
                  (long long)s->gen.len, greq[b].max_new);
            resp_push(s, s->gen.ids, s->gen.logprobs, s->gen.len, 1);
            t->n_generated += s->gen.len;
            t->assistant_turns++;
            if (s->gen.finish == ROLLOUT_FINISH_LENGTH || t->len >= c->response_length) end_traj(s, AGENT_END_LENGTH);
            else if (s->p->agent != AGENT_TOOL) end_traj(s, AGENT_END_NO_TOOL_CALL);
            else if (c->max_assistant_turns && t->assistant_turns >= c->max_assistant_turns) end_traj(s, AGENT_END_MAX_ASSISTANT_TURNS);
            else if (c->max_user_turns && t->user_turns >= c->max_user_turns) end_traj(s, AGENT_END_MAX_USER_TURNS);
            if (!s->live) continue;
            rlc_strbuf text = {0};
            rlc_tok_decode(run->tok, s->gen.ids, s->gen.len, 0, &text);
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
            if (s->n_kept == 0 && run->env->observe != RLC_ENV_OBSERVE_ALL) end_traj(s, AGENT_END_NO_TOOL_CALL);
            else if (s->n_env > 0 || run->env->observe == RLC_ENV_OBSERVE_ALL) {
                rlc_strbuf r = {0};
                rlc_sb_puts(&r, "{\"type\":\"step\",\"traj\":");
                rlc_sb_json_str(&r, s->traj, strlen(s->traj));
                rlc_sb_printf(&r, ",\"turn\":%d,\"finish\":\"%s\",\"text\":", t->assistant_turns, rollout_finish_name(s->gen.finish));
                rlc_sb_json_str(&r, text.s ? text.s : "", text.n);
                rlc_sb_puts(&r, ",\"content\":");
                rlc_sb_json_str(&r, s->parsed.content, strlen(s->parsed.content));
                rlc_sb_printf(&r, ",\"tool_calls\":[%s],\"rejected\":[%s]}", calls.s ? calls.s : "", rej.s ? rej.s : "");
                s->step_req = rlc_sb_take(&r);
                s->sent_step = 1;
                n_step++;
            }
            rlc_sb_free(&calls);
            rlc_sb_free(&rej);
            rlc_sb_free(&text);
        }
        // 3. all steps of the round at once; replies in any order
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
        // 4. observations: append (mask 0) unless they would not fit
        k = 0;
        for (int b = 0; b < nb; b++) {
            traj_state *s = batch[b];
            agent_traj *t = s->t;
            if (!s->live) {
                round_clear(s);
                continue;
            }
            const cJSON *r = NULL;
            if (s->sent_step) {
                r = rep[k];
                t->env_wait_s += wait[k];
                k++;
            }
            int n_fail = 0, ended = 0;
            cJSON *obs = observation_msgs(s, r, run, &n_fail, &ended);
            const cJSON *rw = r ? cJSON_GetObjectItemCaseSensitive(r, "reward") : NULL;
            if (rw && !cJSON_IsNull(rw) && !(cJSON_IsNumber(rw) && isfinite(rw->valuedouble)))
                die_traj(s, run->env, "the observation's \"reward\" is not a finite number");
            if (ended) end_traj(s, AGENT_END_ENV_DONE);
            else if (!obs) end_traj(s, AGENT_END_NO_TOOL_CALL);
            else {
                rlc_ivec x = {0};
                rlc_strbuf err = {0};
                if (agent_observation_ids(run->tok, t->ids[t->len - 1], obs, c->enable_thinking, &x, &err))
                    die_traj(s, run->env, err.s);
                if (t->len + x.n >= c->response_length) end_traj(s, AGENT_END_BUDGET);
                else {
                    resp_push(s, x.v, NULL, x.n, 0);
                    t->user_turns++;
                    t->tool_call_counts += s->n_kept;
                    t->tool_failures += n_fail;
                    if (cJSON_IsNumber(rw)) {
                        t->tool_rewards = rlc_realloc(t->tool_rewards, (size_t)(t->n_tool_rewards + 1) * sizeof(double));
                        t->tool_rewards[t->n_tool_rewards++] = rw->valuedouble;
                    }
                }
                rlc_iv_free(&x);
                rlc_sb_free(&err);
            }
            cJSON_Delete(obs);
            round_clear(s);
        }
        for (int i = 0; i < n_step; i++) cJSON_Delete(rep[i]);
        free(rep);
        free(wait);
        free(sb);
        free(sr);
    }

    // finish, once per started trajectory
    nb = 0;
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
    if (nb) {
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
            cJSON_Delete(rep[i]);
            free(reqs[i]);
        }
        free(rep);
    }
    for (int i = 0; i < N; i++) free(st[i].ctx);
    free(greq);
    free(gout);
    free(reqs);
    free(batch);
    free(st);
}
