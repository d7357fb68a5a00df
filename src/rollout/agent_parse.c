// agent_parse.c: the text and token side of a tool round (see agent.h): Hermes call parsing, the answers rlc
// gives itself, truncation of tool texts, and observation tokens rendered by the chat template.
#include "rollout/agent.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/json.h"

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
    rlc_json_mark_floats(chk, b, n);   // arguments as Python's json.loads reads them: 2.0 a float
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

// The boundary: what the template writes after a turn's end token, which generation stops at (verl's Qwen boundary
// is the "\n" of "<|im_end|>\n"; Gemma's "<end_of_turn>\n" has one too, Llama 3's "<|eot_id|>" none). It is the
// rendering of a conversation ending in an assistant turn, after that token, when the token follows the turn's
// content directly; else nothing (a turn that stopped at another special token, such as Qwen's <|endoftext|>, or a
// turn cut by the length limit).
static int turn_boundary(rlc_tokenizer *tok, int32_t last_id, const cJSON *kw, rlc_strbuf *out, rlc_strbuf *err) {
    const char *end = rlc_tok_is_special(tok, last_id) ? rlc_tok_id_to_token(tok, last_id) : NULL;
    if (!end || !*end) return 0;
    static const char CONTENT[] = "continuous token synthetic assistant";
    cJSON *conv = synthetic_prefix(0);
    cJSON_AddItemToArray(conv, msg("assistant", CONTENT));
    rlc_strbuf r = {0};
    int rc = rlc_tok_chat_render_json(tok, conv, NULL, 0, kw, &r, err);
    const char *c = rc ? NULL : strstr(r.s ? r.s : "", CONTENT);
    if (c && !strncmp(c + strlen(CONTENT), end, strlen(end))) rlc_sb_puts(out, c + strlen(CONTENT) + strlen(end));
    cJSON_Delete(conv);
    rlc_sb_free(&r);
    return rc;
}

int agent_observation_ids(rlc_tokenizer *tok, int32_t last_id, const cJSON *msgs, int enable_thinking, rlc_ivec *out,
                          rlc_strbuf *err) {
    cJSON *kw = cJSON_CreateObject();
    if (enable_thinking >= 0) cJSON_AddBoolToObject(kw, "enable_thinking", enable_thinking);
    rlc_strbuf text = {0};
    int rc = turn_boundary(tok, last_id, kw, &text, err);
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


// ---- the prompt ----

int agent_prompt_ids(rlc_tokenizer *tok, const cJSON *messages, const cJSON *tools, const char *append, int enable_thinking,
                     rlc_ivec *out, rlc_strbuf *err) {
    if (!cJSON_IsArray(messages)) {
        rlc_sb_puts(err, "the prompt is not a list of messages");
        return -1;
    }
    cJSON *msgs = cJSON_Duplicate(messages, 1);
    int rc = 0;
    if (append) {   // TRL's reset(): the text goes at the end of the last user message
        cJSON *last = NULL;
        for (cJSON *m = msgs->child; m; m = m->next) {
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
            if (cJSON_IsString(role) && !strcmp(role->valuestring, "user")) last = m;
        }
        cJSON *ct = last ? cJSON_GetObjectItemCaseSensitive(last, "content") : NULL;
        if (!cJSON_IsString(ct)) {
            rlc_sb_puts(err, last ? "append_to_user: the last user message's content is not a string"
                                  : "append_to_user: the prompt has no user message");
            rc = -1;
        } else {
            rlc_strbuf c = {0};
            rlc_sb_puts(&c, ct->valuestring);
            rlc_sb_puts(&c, append);
            cJSON_ReplaceItemInObjectCaseSensitive(last, "content", cJSON_CreateString(c.s ? c.s : ""));
            rlc_sb_free(&c);
        }
    }
    cJSON *kw = cJSON_CreateObject();
    if (enable_thinking >= 0) cJSON_AddBoolToObject(kw, "enable_thinking", enable_thinking);
    rlc_strbuf text = {0};
    if (!rc) rc = rlc_tok_chat_render_json(tok, msgs, tools, 1, kw, &text, err);
    if (!rc) rlc_tok_encode(tok, text.s ? text.s : "", text.n, out);
    rlc_sb_free(&text);
    cJSON_Delete(kw);
    cJSON_Delete(msgs);
    return rc;
}

int agent_prompt_fit(rlc_ivec *ids, int64_t max_len, rlc_truncation mode, const char *what, rlc_strbuf *err) {
    if (max_len <= 0 || ids->n <= max_len) return 0;
    if (mode == RLC_TRUNC_ERROR) {
        rlc_sb_printf(err, "%s is %lld tokens, over data.max_prompt_length=%lld (data.truncation=error; left, right or "
                      "middle cut it)", what, (long long)ids->n, (long long)max_len);
        return -1;
    }
    ids->n = rlc_truncate_ids(ids->v, ids->n, max_len, mode, what);
    return 0;
}

int agent_started_prompt(rlc_tokenizer *tok, cJSON *reply, const cJSON *messages, const cJSON *hello_tools,
                         int enable_thinking, int64_t max_len, rlc_truncation mode, cJSON **tools, rlc_ivec *out,
                         rlc_strbuf *err) {
    *tools = NULL;
    cJSON *tl = cJSON_DetachItemFromObjectCaseSensitive(reply, "tools");
    const cJSON *au = cJSON_GetObjectItemCaseSensitive(reply, "append_to_user");
    if (cJSON_IsNull(tl)) {
        cJSON_Delete(tl);
        tl = NULL;
    }
    rlc_strbuf e = {0};
    if (tl && rlc_env_check_tools(tl, &e)) {
        rlc_sb_printf(err, "the \"started\" reply's %s", e.s ? e.s : "tools");
        rlc_sb_free(&e);
        cJSON_Delete(tl);
        return -1;
    }
    if (au && !cJSON_IsNull(au) && !cJSON_IsString(au)) {
        rlc_sb_puts(err, "the \"started\" reply's \"append_to_user\" is not a string");
        cJSON_Delete(tl);
        return -1;
    }
    const char *append = cJSON_IsString(au) ? au->valuestring : NULL;
    *tools = tl;
    if (!tl && !append) return 0;
    if (!messages) {
        rlc_sb_puts(err, "the \"started\" reply changes the prompt, but the row has no messages to render");
        return -1;
    }
    const int64_t n0 = out->n;
    if (agent_prompt_ids(tok, messages, tl ? tl : hello_tools, append, enable_thinking, out, &e)) {
        rlc_sb_printf(err, "rendering its prompt with the \"started\" reply's tools / append_to_user: %s", e.s ? e.s : "");
        rlc_sb_free(&e);
        return -1;
    }
    rlc_ivec own = {out->v + n0, out->n - n0, 0};
    if (agent_prompt_fit(&own, max_len, mode, "the prompt rendered with the \"started\" reply's tools / append_to_user", err))
        return -1;
    out->n = n0 + own.n;
    return 1;
}
