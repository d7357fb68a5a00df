// chat.c: chat rendering as transformers' apply_chat_template(..., tokenize=False) does it: the checkpoint's
// own Jinja template (tokenizer_config.json chat_template, a string or a list of {name, template} with
// "default"; chat_template.jinja beside it wins), or one given with --chat-template FILE, rendered by the
// template engine (src/template) with messages, tools, documents=None, add_generation_prompt, the special
// tokens (bos_token, eos_token, unk_token, pad_token, ...) and the template kwargs.
#include <cjson/cJSON.h>
#include <string.h>

#include "core/common.h"
#include "core/sha256.h"
#include "template/chat_render.h"
#include "template/template.h"
#include "tokenizer/qwen3_chat_template.h"
#include "tokenizer/tok_internal.h"

struct tok_chat {
    rlc_tmpl *tmpl;        // compiled template (NULL: none, plain mode, or it did not parse)
    char *parse_err;       // the template's parse error, reported when a chat is rendered
    char *origin;          // where the template came from (messages)
    char sha[65];          // sha256 of the template source
    int plain;             // documented plain fallback: contents joined by "\n"
    cJSON *specials;       // {"bos_token": ..., ...}: the special tokens transformers passes to the template
    int64_t (*now)(void *arg);   // strftime_now's clock for every template set (NULL: the system clock)
    void *now_arg;
};

static const char QWEN3_TEMPLATE_SHA[] = "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5";

rlc_chat_mode rlc_chat_mode_parse(const char *s, const char *what) {
    if (!s || !strcmp(s, "auto")) return RLC_CHAT_AUTO;
    if (!strcmp(s, "qwen3")) return RLC_CHAT_QWEN3;
    if (!strcmp(s, "plain")) return RLC_CHAT_PLAIN;
    rlc_die("%s: chat template mode must be auto, qwen3 or plain, got '%s'", what, s);
}

void rlc_tok_opts_chat_template(rlc_tok_opts *o, const char *value, const char *what) {
    o->chat_template_file = NULL;
    if (!value || !strcmp(value, "auto") || !strcmp(value, "qwen3") || !strcmp(value, "plain")) {
        o->chat_mode = rlc_chat_mode_parse(value, what);
        return;
    }
    if (!rlc_file_exists(value))
        rlc_die("%s: '%s' is neither a chat template file nor one of auto, qwen3, plain", what, value);
    o->chat_mode = RLC_CHAT_AUTO;
    o->chat_template_file = value;
}

static struct tok_chat *chat_of(rlc_tokenizer *t) {
    if (!t->chat) t->chat = rlc_calloc(1, sizeof *t->chat);
    return t->chat;
}

static void chat_clear_template(struct tok_chat *c) {
    rlc_tmpl_free(c->tmpl);
    c->tmpl = NULL;
    free(c->parse_err);
    c->parse_err = NULL;
    free(c->origin);
    c->origin = NULL;
    c->sha[0] = 0;
    c->plain = 0;
}

void tok_chat_free(rlc_tokenizer *t) {
    if (!t->chat) return;
    chat_clear_template(t->chat);
    cJSON_Delete(t->chat->specials);
    free(t->chat);
    t->chat = NULL;
}

// Compile `src` as the chat template; a parse error is kept and reported when a chat is rendered, so a
// checkpoint with a broken template still loads for plain encoding (as transformers compiles lazily).
static void chat_set_source(struct tok_chat *c, const char *src, size_t n, const char *origin) {
    chat_clear_template(c);
    c->origin = rlc_strdup(origin);
    rlc_sha256_hex(src, n, c->sha);
    rlc_strbuf err = {0};
    c->tmpl = rlc_tmpl_parse(src, n, origin, &err);
    if (!c->tmpl) c->parse_err = rlc_sb_take(&err);
    else rlc_tmpl_set_clock(c->tmpl, c->now, c->now_arg);
    rlc_sb_free(&err);
}

void rlc_tok_set_chat_template(rlc_tokenizer *t, const char *src, size_t n, const char *origin) {
    chat_set_source(chat_of(t), src, n, origin);
}

void rlc_tok_set_chat_clock(rlc_tokenizer *t, int64_t (*now)(void *arg), void *arg) {
    struct tok_chat *c = chat_of(t);
    c->now = now;
    c->now_arg = arg;
    if (c->tmpl) rlc_tmpl_set_clock(c->tmpl, now, arg);
}

void rlc_tok_load_chat_template(rlc_tokenizer *t, const char *path) {
    size_t n;
    char *src = rlc_read_file(path, &n);
    chat_set_source(chat_of(t), src, n, path);
    free(src);
    if (t->chat->parse_err) rlc_die("%s", t->chat->parse_err);
}

// The template per the options (a file or a forced mode), once the config has been read.
static int chat_apply_opts(rlc_tokenizer *t) {
    struct tok_chat *c = chat_of(t);
    if (t->opts.chat_template_file) {
        rlc_tok_load_chat_template(t, t->opts.chat_template_file);
        return 1;
    }
    if (t->opts.chat_mode == RLC_CHAT_QWEN3) {
        chat_set_source(c, RLC_QWEN3_CHAT_TEMPLATE, strlen(RLC_QWEN3_CHAT_TEMPLATE), "the Qwen3 chat template");
        return 1;
    }
    if (t->opts.chat_mode == RLC_CHAT_PLAIN) {
        chat_clear_template(c);
        c->plain = 1;
        return 1;
    }
    return 0;
}

void tok_chat_apply_config(rlc_tokenizer *t, const cJSON *cfg, const char *cfg_name) {
    struct tok_chat *c = chat_of(t);
    chat_clear_template(c);
    cJSON_Delete(c->specials);
    c->specials = cJSON_CreateObject();
    if (cfg) {
        // special tokens as transformers' special_tokens_map (strings or {"content": ...}; null = absent)
        static const char *const KEYS[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};
        for (size_t i = 0; i < sizeof KEYS / sizeof *KEYS; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, KEYS[i]);
            if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
            if (cJSON_IsString(v)) cJSON_AddStringToObject(c->specials, KEYS[i], v->valuestring);
        }
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
        char origin[4200];
        snprintf(origin, sizeof origin, "%s chat_template", cfg_name);
        if (cJSON_IsString(x)) {
            chat_set_source(c, x->valuestring, strlen(x->valuestring), origin);
        } else if (cJSON_IsArray(x)) {   // [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
            const cJSON *it, *def = NULL;
            cJSON_ArrayForEach(it, x) {
                const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
                const cJSON *tp = cJSON_GetObjectItemCaseSensitive(it, "template");
                if (!cJSON_IsObject(it) || !cJSON_IsString(nm) || !cJSON_IsString(tp))
                    rlc_die("%s: chat_template list entries must be {\"name\": string, \"template\": string}", cfg_name);
                if (!strcmp(nm->valuestring, "default")) def = tp;
            }
            if (def) {
                snprintf(origin, sizeof origin, "%s chat_template 'default'", cfg_name);
                chat_set_source(c, def->valuestring, strlen(def->valuestring), origin);
            }
        } else if (x && !cJSON_IsNull(x)) {
            rlc_die("%s: chat_template must be a string or a list of {name, template}", cfg_name);
        }
    }
    chat_apply_opts(t);
}

void tok_chat_load_dir(rlc_tokenizer *t, const char *dir) {
    if (t->opts.chat_template_file || t->opts.chat_mode != RLC_CHAT_AUTO) return;
    char *p = rlc_path_join(dir, "chat_template.jinja");
    if (rlc_file_exists(p)) {   // transformers: chat_template.jinja takes precedence over the config's
        size_t n;
        char *src = rlc_read_file(p, &n);
        chat_set_source(chat_of(t), src, n, p);
        free(src);
    }
    free(p);
}

const char *rlc_tok_chat_kind(const rlc_tokenizer *t) {
    const struct tok_chat *c = t->chat;
    if (!c) return NULL;
    if (c->plain) return "plain";
    if (!c->tmpl) return NULL;
    return !strcmp(c->sha, QWEN3_TEMPLATE_SHA) ? "qwen3" : "template";
}

int rlc_tok_chat_render_json(const rlc_tokenizer *t, const cJSON *messages, const cJSON *tools,
                             int add_generation_prompt, const cJSON *kwargs, rlc_strbuf *out, rlc_strbuf *err) {
    const struct tok_chat *c = t->chat;
    if (rlc_chat_check_inputs(messages, tools, kwargs, err)) return -1;
    if (c && c->plain) {
        int i = 0;
        const cJSON *m;
        cJSON_ArrayForEach(m, messages) {
            const cJSON *ct = cJSON_GetObjectItemCaseSensitive(m, "content");
            if (!cJSON_IsString(ct)) {
                rlc_sb_printf(err, "message %d: the plain chat format needs a string \"content\"", i);
                return -1;
            }
            if (i++) rlc_sb_putc(out, '\n');
            rlc_sb_puts(out, ct->valuestring);
        }
        return 0;
    }
    if (!c || (!c->tmpl && !c->parse_err)) {
        rlc_sb_printf(err, "%s: the tokenizer has no chat template (tokenizer_config.json chat_template or chat_template.jinja); "
                      "give one with --chat-template FILE (config: data.chat_template), or --chat-template plain to join "
                      "the message contents", t->name);
        return -1;
    }
    if (c->parse_err) {
        rlc_sb_puts(err, c->parse_err);
        return -1;
    }
    return rlc_chat_render(c->tmpl, c->specials, messages, tools, add_generation_prompt, kwargs, out, err);
}

int rlc_tok_chat_render_line(const rlc_tokenizer *t, const cJSON *line, int add_generation_prompt,
                             const cJSON *kwargs, rlc_strbuf *out, rlc_strbuf *err) {
    const cJSON *msgs = line, *tools = NULL, *lk = NULL;
    if (cJSON_IsObject(line)) {
        msgs = cJSON_GetObjectItemCaseSensitive(line, "messages");
        tools = cJSON_GetObjectItemCaseSensitive(line, "tools");
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(line, "add_generation_prompt");
        if (g && !cJSON_IsBool(g)) {
            rlc_sb_puts(err, "\"add_generation_prompt\" must be true or false");
            return -1;
        }
        if (g) add_generation_prompt = cJSON_IsTrue(g);
        lk = cJSON_GetObjectItemCaseSensitive(line, "chat_template_kwargs");
        if (lk && !cJSON_IsNull(lk) && !cJSON_IsObject(lk)) {
            rlc_sb_puts(err, "\"chat_template_kwargs\" must be an object");
            return -1;
        }
    }
    // the line's kwargs over the caller's defaults
    cJSON *k = cJSON_CreateObject();
    const cJSON *layers[2] = {kwargs, lk}, *it;
    for (int l = 0; l < 2; l++)
        if (cJSON_IsObject(layers[l]))
            cJSON_ArrayForEach(it, layers[l]) {
                cJSON_DeleteItemFromObjectCaseSensitive(k, it->string);
                cJSON_AddItemReferenceToObject(k, it->string, (cJSON *)it);
            }
    int rc = rlc_tok_chat_render_json(t, msgs, tools, add_generation_prompt, k, out, err);
    cJSON_Delete(k);
    return rc;
}

// The data paths' kwargs: enable_thinking when given, and date_string pinned, so that a template that prints
// the date (Llama 3.x: strftime_now unless date_string is passed) renders a dataset the same on every day.
static cJSON *data_kwargs(int enable_thinking) {
    cJSON *k = cJSON_CreateObject();
    if (enable_thinking >= 0) cJSON_AddBoolToObject(k, "enable_thinking", enable_thinking != 0);
    cJSON_AddStringToObject(k, "date_string", RLC_CHAT_DATE_STRING);
    return k;
}

int rlc_tok_chat_render_cjson(const rlc_tokenizer *t, const cJSON *messages, int add_generation_prompt,
                              int enable_thinking, rlc_strbuf *out, rlc_strbuf *err) {
    cJSON *k = data_kwargs(enable_thinking);
    int rc = rlc_tok_chat_render_json(t, messages, NULL, add_generation_prompt, k, out, err);
    cJSON_Delete(k);
    return rc;
}

void rlc_tok_chat_render(const rlc_tokenizer *t, const rlc_chat_msg *msgs, int n, int add_generation_prompt,
                         int enable_thinking, rlc_strbuf *out) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) rlc_die("chat template: message %d needs a role and a content", i);
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", msgs[i].role);
        cJSON_AddStringToObject(m, "content", msgs[i].content);
        if (msgs[i].reasoning_content) cJSON_AddStringToObject(m, "reasoning_content", msgs[i].reasoning_content);
        cJSON_AddItemToArray(arr, m);
    }
    rlc_strbuf err = {0};
    int rc = rlc_tok_chat_render_cjson(t, arr, add_generation_prompt, enable_thinking, out, &err);
    cJSON_Delete(arr);
    if (rc) rlc_die("chat template: %s", err.s);
    rlc_sb_free(&err);
}
