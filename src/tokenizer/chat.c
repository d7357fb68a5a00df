// chat.c: the Qwen3 chat template rendered in C (the Jinja template with sha256 87a2728c..., see
// shared/spec/qwen3.md §5), and the plain fallback. Tools (the `tools` argument and assistant
// tool_calls) are not supported and are rejected; "tool" role messages are rendered.
#include <cjson/cJSON.h>
#include <string.h>

#include "core/common.h"
#include "tokenizer/tok_internal.h"

const char *rlc_tok_chat_kind(const rlc_tokenizer *t) {
    return t->chat_kind == 1 ? "qwen3" : t->chat_kind == 2 ? "plain" : NULL;
}

static int starts_with(const char *s, size_t n, const char *pre) {
    size_t k = strlen(pre);
    return n >= k && !memcmp(s, pre, k);
}
static int ends_with(const char *s, size_t n, const char *suf) {
    size_t k = strlen(suf);
    return n >= k && !memcmp(s + n - k, suf, k);
}
// Python str.lstrip('\n') / rstrip('\n') on [*s, *s + *n)
static void lstrip_nl(const char **s, size_t *n) {
    while (*n && **s == '\n') { (*s)++; (*n)--; }
}
static void rstrip_nl(const char **s, size_t *n) {
    (void)s;
    while (*n && (*s)[*n - 1] == '\n') (*n)--;
}
// last occurrence of needle in [s, s+n), or NULL
static const char *find_last(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    if (k > n) return NULL;
    for (size_t i = n - k + 1; i-- > 0;)
        if (!memcmp(s + i, needle, k)) return s + i;
    return NULL;
}
static const char *find_first(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    if (k > n) return NULL;
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(s + i, needle, k)) return s + i;
    return NULL;
}

static void render_qwen3(const rlc_chat_msg *m, int n, int add_gen, int enable_thinking, rlc_strbuf *o) {
    if (n == 0) rlc_die("chat template: no messages to render (the Qwen3 template reads messages[0])");
    if (!strcmp(m[0].role, "system")) {
        rlc_sb_puts(o, "<|im_start|>system\n");
        rlc_sb_puts(o, m[0].content);
        rlc_sb_puts(o, "<|im_end|>\n");
    }
    // last_query_index: the last user message that is not a wrapped tool response
    int last_query = n - 1, multi_step_tool = 1;
    for (int i = n - 1; i >= 0; i--) {
        size_t cl = strlen(m[i].content);
        if (multi_step_tool && !strcmp(m[i].role, "user") &&
            !(starts_with(m[i].content, cl, "<tool_response>") && ends_with(m[i].content, cl, "</tool_response>"))) {
            multi_step_tool = 0;
            last_query = i;
        }
    }
    for (int i = 0; i < n; i++) {
        const char *role = m[i].role;
        if (!strcmp(role, "user") || (!strcmp(role, "system") && i > 0)) {
            rlc_sb_puts(o, "<|im_start|>");
            rlc_sb_puts(o, role);
            rlc_sb_putc(o, '\n');
            rlc_sb_puts(o, m[i].content);
            rlc_sb_puts(o, "<|im_end|>\n");
        } else if (!strcmp(role, "assistant")) {
            const char *c = m[i].content, *r = "";
            size_t cn = strlen(c), rn = 0;
            if (m[i].reasoning_content) {
                r = m[i].reasoning_content;
                rn = strlen(r);
            } else {
                const char *close = find_first(c, cn, "</think>");
                if (close) {
                    // content = content.split('</think>')[-1].lstrip('\n')
                    const char *lastc = find_last(c, cn, "</think>");
                    const char *nc = lastc + 8;
                    size_t nn = cn - (size_t)(nc - c);
                    lstrip_nl(&nc, &nn);
                    // reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
                    const char *r0 = c;
                    size_t r0n = (size_t)(close - c);
                    rstrip_nl(&r0, &r0n);
                    const char *open = find_last(r0, r0n, "<think>");
                    if (open) {
                        r0n -= (size_t)(open + 7 - r0);
                        r0 = open + 7;
                    }
                    lstrip_nl(&r0, &r0n);
                    r = r0;
                    rn = r0n;
                    c = nc;
                    cn = nn;
                }
            }
            rlc_sb_puts(o, "<|im_start|>assistant\n");
            if (i > last_query && (i == n - 1 || rn > 0)) {
                const char *rs = r;
                size_t rsn = rn;
                lstrip_nl(&rs, &rsn);
                rstrip_nl(&rs, &rsn);
                const char *cs = c;
                size_t csn = cn;
                lstrip_nl(&cs, &csn);
                rlc_sb_puts(o, "<think>\n");
                rlc_sb_append(o, rs, rsn);
                rlc_sb_puts(o, "\n</think>\n\n");
                rlc_sb_append(o, cs, csn);
            } else {
                rlc_sb_append(o, c, cn);
            }
            rlc_sb_puts(o, "<|im_end|>\n");
        } else if (!strcmp(role, "tool")) {
            if (i == 0 || strcmp(m[i - 1].role, "tool")) rlc_sb_puts(o, "<|im_start|>user");
            rlc_sb_puts(o, "\n<tool_response>\n");
            rlc_sb_puts(o, m[i].content);
            rlc_sb_puts(o, "\n</tool_response>");
            if (i == n - 1 || strcmp(m[i + 1].role, "tool")) rlc_sb_puts(o, "<|im_end|>\n");
        }
        // the first system message was rendered above; other roles render nothing
    }
    if (add_gen) {
        rlc_sb_puts(o, "<|im_start|>assistant\n");
        if (enable_thinking == 0) rlc_sb_puts(o, "<think>\n\n</think>\n\n");
    }
}

static void render_plain(const rlc_chat_msg *m, int n, rlc_strbuf *o) {
    for (int i = 0; i < n; i++) {
        if (i) rlc_sb_putc(o, '\n');
        rlc_sb_puts(o, m[i].content);
    }
}

void rlc_tok_chat_render(const rlc_tokenizer *t, const rlc_chat_msg *msgs, int n, int add_generation_prompt,
                         int enable_thinking, rlc_strbuf *out) {
    for (int i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content) rlc_die("chat template: message %d needs a role and a content", i);
    switch (t->chat_kind) {
    case 1: render_qwen3(msgs, n, add_generation_prompt, enable_thinking, out); break;
    case 2: render_plain(msgs, n, out); break;
    default:
        if (!t->chat_template)
            rlc_die("%s: the tokenizer config has no chat_template; choose the plain fallback (chat template mode "
                    "'plain': rlc_tok_opts.chat_mode, CLI --chat-template plain) to render prompts without one",
                    t->name);
        rlc_die("%s: tokenizer_config.json chat_template (sha256 %s) is not one rlc can render (known: Qwen3 %s); "
                "use chat template mode 'qwen3' to force the Qwen3 renderer or 'plain' for the plain fallback "
                "(rlc_tok_opts.chat_mode, CLI --chat-template)",
                t->name, t->chat_sha, "87a2728c...");
    }
}

int rlc_tok_chat_render_cjson(const rlc_tokenizer *t, const struct cJSON *messages, int add_generation_prompt,
                              int enable_thinking, rlc_strbuf *out, rlc_strbuf *err) {
    if (!cJSON_IsArray(messages)) {
        rlc_sb_puts(err, "messages must be a list of {\"role\", \"content\"} objects");
        return -1;
    }
    int n = cJSON_GetArraySize(messages), i = 0;
    rlc_chat_msg *m = rlc_calloc((size_t)n + 1, sizeof *m);
    const cJSON *it;
    cJSON_ArrayForEach(it, messages) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(it, "role");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
        const cJSON *rc = cJSON_GetObjectItemCaseSensitive(it, "reasoning_content");
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(it, "tool_calls");
        if (!cJSON_IsString(r) || !cJSON_IsString(c)) {
            rlc_sb_printf(err, "message %d needs a string \"role\" and a string \"content\"", i);
            free(m);
            return -1;
        }
        if (tc && !cJSON_IsNull(tc) && !(cJSON_IsArray(tc) && cJSON_GetArraySize(tc) == 0)) {
            rlc_sb_printf(err, "message %d: tool_calls are not supported by rlc's chat renderer", i);
            free(m);
            return -1;
        }
        if (rc && !cJSON_IsNull(rc) && !cJSON_IsString(rc)) {
            rlc_sb_printf(err, "message %d: reasoning_content must be a string or null", i);
            free(m);
            return -1;
        }
        m[i].role = r->valuestring;
        m[i].content = c->valuestring;
        m[i].reasoning_content = cJSON_IsString(rc) ? rc->valuestring : NULL;
        i++;
    }
    rlc_tok_chat_render(t, m, n, add_generation_prompt, enable_thinking, out);
    free(m);
    return 0;
}
