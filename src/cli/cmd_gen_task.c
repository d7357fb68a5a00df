// cmd_gen_task.c: `rlc gen-task`: write synthetic GSM8K-format problems as JSONL {"question","answer"}.
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/common.h"
#include "data/dataset.h"   // RLC_GSM8K_INSTRUCTION: the SFT prompt is the one verl builds
#include "data/synth.h"
#include "rollout/env_calculator.h"
#include "template/chat_render.h"
#include "tokenizer/qwen3_chat_template.h"

static const char *USAGE =
    "rlc gen-task --out FILE.jsonl [--n N] [--seed S] [--offset K] [--min-steps A] [--max-steps B] "
    "[--max-operand M] [--no-mul-div] [--format gsm8k|sft] [--answer-only F]\n"
    "             [--tool-calls F]";

// The system turn of a tool_agent prompt with the calculator: the Qwen3 chat template's tools block, as the
// trainer renders a prompt with the environment's tools (apply_chat_template(tools=[calculator])). A system
// message with this content renders to the same text, so an SFT conversation starting with it is tokenized
// exactly as the prompts of `rlc env calculator --tools calculator` rollouts.
static char *tools_system_text(void) {
    rlc_strbuf err = {0}, out = {0};
    rlc_tmpl *t = rlc_tmpl_parse(RLC_QWEN3_CHAT_TEMPLATE, strlen(RLC_QWEN3_CHAT_TEMPLATE), "qwen3 chat template", &err);
    CHECK(t, "the built-in Qwen3 chat template: %s", err.s);
    cJSON *msgs = cJSON_Parse("[{\"role\": \"user\", \"content\": \"\"}]"), *tools = cJSON_CreateArray();
    cJSON_AddItemToArray(tools, cJSON_Parse(rlc_calc_tool_schema()));
    CHECK(rlc_chat_render(t, NULL, msgs, tools, 0, NULL, &out, &err) == 0, "rendering the tools block: %s", err.s);
    static const char HEAD[] = "<|im_start|>system\n", END[] = "<|im_end|>\n<|im_start|>user\n";
    const char *e = strstr(out.s, END);
    CHECK(!strncmp(out.s, HEAD, strlen(HEAD)) && e, "the tools block is not a system turn: %.80s", out.s);
    const size_t n = (size_t)(e - out.s) - strlen(HEAD);
    char *r = rlc_malloc(n + 1);
    memcpy(r, out.s + strlen(HEAD), n);
    r[n] = 0;
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
    rlc_tmpl_free(t);
    rlc_sb_free(&out);
    rlc_sb_free(&err);
    return r;
}

static cJSON *add_msg(cJSON *msgs, const char *role, const char *content, rlc_strbuf *text) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    cJSON_AddItemToArray(msgs, m);
    if (text->n) rlc_sb_putc(text, '\n');
    rlc_sb_puts(text, content);
    return m;
}

// One SFT conversation of the tool format: {"messages": [system (the tools block), user, assistant...], "text"}.
// A tool-call solution is the worked solution with expressions in place of results, one calculator call on the
// whole expression, the tool's reply, and the final line; the others are a single assistant turn. "text" holds
// the words of the conversation without the chat markup (what `rlc train-tokenizer --fields text` learns from).
static void tool_row(cJSON *o, const char *sys, const char *prompt, const synth_problem *pr, int answer_only, int call) {
    cJSON *msgs = cJSON_AddArrayToObject(o, "messages");
    rlc_strbuf text = {0}, fin = {0};
    rlc_sb_printf(&fin, "#### %lld", pr->result);
    add_msg(msgs, "system", sys, &text);
    add_msg(msgs, "user", prompt, &text);
    if (answer_only) {
        add_msg(msgs, "assistant", fin.s, &text);
    } else if (!call) {
        add_msg(msgs, "assistant", pr->answer, &text);
    } else {
        cJSON *a = add_msg(msgs, "assistant", pr->expr_work, &text);
        cJSON *calls = cJSON_AddArrayToObject(a, "tool_calls"), *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "type", "function");
        cJSON *f = cJSON_AddObjectToObject(c, "function");
        cJSON_AddStringToObject(f, "name", "calculator");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(f, "arguments"), "expression", pr->expr);
        cJSON_AddItemToArray(calls, c);
        rlc_sb_printf(&text, "\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"%s\"}}", pr->expr);
        rlc_strbuf v = {0};
        CHECK(rlc_calc_eval(pr->expr, &v) == 0 && atoll(v.s) == pr->result, "calculator(%s) = %s, expected %lld", pr->expr,
              v.s, pr->result);
        add_msg(msgs, "tool", v.s, &text);
        add_msg(msgs, "assistant", fin.s, &text);
        rlc_sb_free(&v);
    }
    cJSON_AddStringToObject(o, "text", text.s);
    rlc_sb_free(&text);
    rlc_sb_free(&fin);
}

int cmd_gen_task(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (cli_flag(&a, "help")) { printf("usage: %s\n", USAGE); cli_args_free(&a); return 0; }
    const char *out = cli_opt_req(&a, "out");
    long long n = cli_int(&a, "n", 1000, 1, 100000000);
    long long seed = cli_int(&a, "seed", 1, 0, INT64_MAX);
    long long offset = cli_int(&a, "offset", 0, 0, INT64_MAX);
    synth_params p;
    synth_params_default(&p);
    p.min_steps = (int)cli_int(&a, "min-steps", p.min_steps, 1, 8);
    p.max_steps = (int)cli_int(&a, "max-steps", p.max_steps, 1, 8);
    p.max_operand = (int)cli_int(&a, "max-operand", p.max_operand, 2, 1000000);
    if (cli_flag(&a, "no-mul-div")) p.allow_mul_div = 0;
    const char *fmt = cli_opt(&a, "format");
    int sft = 0;
    if (fmt && !strcmp(fmt, "sft")) sft = 1;
    else if (fmt && strcmp(fmt, "gsm8k") != 0) rlc_die("gen-task: --format must be gsm8k or sft, got '%s'", fmt);
    // sft only: the fraction of responses written as the bare final line "#### N" (demonstrations that skip
    // the working; see docs/demo.md)
    const char *ao = cli_opt(&a, "answer-only");
    double answer_only = 0;
    if (ao) {
        char *end;
        answer_only = strtod(ao, &end);
        if (*end || end == ao || !(answer_only >= 0 && answer_only <= 1)) rlc_die("gen-task: --answer-only must be a number in [0, 1], got '%s'", ao);
        if (!sft) rlc_die("gen-task: --answer-only applies to --format sft only");
    }
    // sft only: conversations for a tool_agent policy with the calculator (docs/demo.md, "--tools"): every prompt
    // has the tools block, and this fraction of the worked solutions calls the calculator
    const char *tc = cli_opt(&a, "tool-calls");
    double tool_calls = 0;
    if (tc) {
        char *end;
        tool_calls = strtod(tc, &end);
        if (*end || end == tc || !(tool_calls >= 0 && tool_calls <= 1)) rlc_die("gen-task: --tool-calls must be a number in [0, 1], got '%s'", tc);
        if (!sft) rlc_die("gen-task: --tool-calls applies to --format sft only");
    }
    char *sys = tc ? tools_system_text() : NULL;
    cli_check_unknown(&a, USAGE);
    if (p.max_steps < p.min_steps) rlc_die("gen-task: --max-steps (%d) must be >= --min-steps (%d)", p.max_steps, p.min_steps);
    char *tmp = rlc_malloc(strlen(out) + 8);
    sprintf(tmp, "%s.tmp", out);
    FILE *f = fopen(tmp, "w");
    if (!f) rlc_die("%s: cannot create: %s", tmp, strerror(errno));
    for (long long i = 0; i < n; i++) {
        synth_problem pr;
        synth_generate(&pr, &p, (uint64_t)seed, (uint64_t)(offset + i));
        cJSON *o = cJSON_CreateObject();
        if (sft) {   // {"prompt", "response"}: the GSM8K prompt verl builds, and the worked solution
            size_t ql = strlen(pr.question) + sizeof(RLC_GSM8K_INSTRUCTION) + 2;
            char *q = rlc_malloc(ql);
            snprintf(q, ql, "%s %s", pr.question, RLC_GSM8K_INSTRUCTION);
            const int bare = synth_answer_only((uint64_t)seed, (uint64_t)(offset + i), answer_only);
            if (sys) {   // {"messages", "text"}: the tool_agent conversation
                tool_row(o, sys, q, &pr, bare, synth_tool_call((uint64_t)seed, (uint64_t)(offset + i), tool_calls));
            } else if (bare) {
                char fin[48];
                snprintf(fin, sizeof fin, "#### %lld", pr.result);
                cJSON_AddStringToObject(o, "prompt", q);
                cJSON_AddStringToObject(o, "response", fin);
            } else {
                cJSON_AddStringToObject(o, "prompt", q);
                cJSON_AddStringToObject(o, "response", pr.answer);
            }
            free(q);
        } else {
            cJSON_AddStringToObject(o, "question", pr.question);
            cJSON_AddStringToObject(o, "answer", pr.answer);
        }
        char *s = cJSON_PrintUnformatted(o);
        fputs(s, f);
        fputc('\n', f);
        free(s);
        cJSON_Delete(o);
        synth_problem_free(&pr);
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0) rlc_die("%s: write failed: %s", tmp, strerror(errno));
    if (rename(tmp, out) != 0) rlc_die("%s: cannot rename into place: %s", out, strerror(errno));
    free(tmp);
    free(sys);
    cli_args_free(&a);
    return 0;
}
