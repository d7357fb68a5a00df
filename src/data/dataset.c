// dataset.c: JSONL prompt datasets (raw GSM8K, verl rows) and the text SFT loader. See dataset.h.
#include "data/dataset.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "data/jsonl.h"
#include "data/rows.h"

rlc_truncation rlc_truncation_parse(const char *s, const char *what) {
    if (!s || !strcmp(s, "error")) return RLC_TRUNC_ERROR;
    if (!strcmp(s, "left")) return RLC_TRUNC_LEFT;
    if (!strcmp(s, "right")) return RLC_TRUNC_RIGHT;
    if (!strcmp(s, "middle")) return RLC_TRUNC_MIDDLE;
    rlc_die("%s: truncation must be error, left, right or middle, got '%s'", what, s);
}

void rlc_data_opts_default(rlc_data_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_prompt_length = 512;
    o->truncation = RLC_TRUNC_ERROR;
    o->enable_thinking = -1;
    o->prompt_key = "prompt";
    o->max_samples = -1;
}

char *rlc_gsm8k_ground_truth(const char *answer) {
    // first "#### " followed by at least one of [-]?[0-9.,]
    for (const char *p = strstr(answer, "#### "); p; p = strstr(p + 1, "#### ")) {
        const char *q = p + 5, *st = q;
        if (*q == '-') q++;
        const char *d = q;
        while ((*q >= '0' && *q <= '9') || *q == '.' || *q == ',') q++;
        if (q == d) continue;   // "-" alone or nothing: no match here
        rlc_strbuf b = {0};
        for (const char *c = st; c < q; c++)
            if (*c != ',') rlc_sb_putc(&b, *c);
        return rlc_sb_take(&b);
    }
    return NULL;
}

int64_t rlc_truncate_ids(int32_t *ids, int64_t n, int64_t max_len, rlc_truncation mode, const char *where) {
    if (n <= max_len) return n;
    switch (mode) {
    case RLC_TRUNC_LEFT: memmove(ids, ids + (n - max_len), (size_t)max_len * sizeof(int32_t)); return max_len;
    case RLC_TRUNC_RIGHT: return max_len;
    case RLC_TRUNC_MIDDLE: {
        int64_t l = max_len / 2, r = max_len - l;
        memmove(ids + l, ids + (n - r), (size_t)r * sizeof(int32_t));
        return max_len;
    }
    default:
        rlc_die("%s: prompt is %lld tokens, longer than data.max_prompt_length=%lld (data.truncation=error; set "
                "truncation to left/right/middle or filter_overlong_prompts=true)",
                where, (long long)n, (long long)max_len);
    }
}

void rlc_check_vocab_ids(const rlc_tokenizer *tok, const int32_t *ids, int64_t n, int64_t vocab_size, const char *where,
                         const char *key) {
    if (vocab_size <= 0) return;
    for (int64_t k = 0; k < n; k++) {
        if (ids[k] >= 0 && ids[k] < vocab_size) continue;
        const char *piece = tok ? rlc_tok_id_to_token(tok, ids[k]) : NULL;
        const int64_t tv = tok ? rlc_tok_vocab_size(tok) : 0;
        char why[160];
        if (tv > vocab_size)
            snprintf(why, sizeof why, "the tokenizer has %lld ids, more than config.json's vocab_size %lld", (long long)tv,
                     (long long)vocab_size);
        else
            snprintf(why, sizeof why, "config.json's vocab_size is %lld", (long long)vocab_size);
        rlc_die("%s: %s renders to token id %d ('%s'), outside the model's vocabulary [0, %lld) (%s)", where, key, ids[k],
                piece ? piece : "?", (long long)vocab_size, why);
    }
}

static char *json_text(const cJSON *v) { return rlc_json_print(v); }   // floats stay floats (2.0)

static char *file_stem(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    char *s = rlc_strdup(b);
    char *dot = strrchr(s, '.');
    if (dot && dot != s) *dot = 0;
    return s;
}

static void prompt_free(rlc_prompt *p) {
    free(p->ids);
    free(p->prompt_text);
    free(p->messages_json);
    free(p->data_source);
    free(p->ground_truth);
    free(p->extra_info_json);
}

void rlc_dataset_load(rlc_dataset *ds, const char *path, rlc_tokenizer *tok, const rlc_data_opts *opts) {
    rlc_data_opts def;
    if (!opts) { rlc_data_opts_default(&def); opts = &def; }
    if (opts->max_prompt_length < 1) rlc_die("%s: data.max_prompt_length must be >= 1", path);
    memset(ds, 0, sizeof *ds);
    ds->path = rlc_strdup(path);
    rlc_rows r;
    rlc_rows_open(&r, path, "dataset");
    const char *pkey = opts->prompt_key ? opts->prompt_key : "prompt";
    const char *const want[] = {pkey, "question", NULL};
    rlc_rows_require_any(&r, want, "verl rows (chat messages) or GSM8K rows (\"question\", \"answer\")");
    char *stem = file_stem(path);
    int64_t row = 0, cap_items = 0;
    rlc_strbuf text = {0}, err = {0};
    rlc_ivec ids = {0};
    const cJSON *j;
    while (!(opts->max_samples >= 0 && ds->n >= opts->max_samples) &&
           (j = rlc_rows_next(&r, "{\"prompt\": [...], ...} (a verl row) or {\"question\", \"answer\"} (GSM8K)"))) {
        const int64_t lineno = r.line;
        rlc_prompt p = {0};
        p.line = lineno;
        p.agent_name = RLC_AGENT_NAME_NONE;
        cJSON *msgs = NULL;   // owned copy when built here
        const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(j, pkey);
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(j, "question"), *a = cJSON_GetObjectItemCaseSensitive(j, "answer");
        if (!prompt && q) {   // raw GSM8K
            if (!cJSON_IsString(q) || !cJSON_IsString(a))
                rlc_die("%s:%lld: a GSM8K line needs string \"question\" and \"answer\"", path, (long long)lineno);
            p.ground_truth = rlc_gsm8k_ground_truth(a->valuestring);
            if (!p.ground_truth)
                rlc_die("%s:%lld: GSM8K answer has no \"#### <number>\" final answer", path, (long long)lineno);
            rlc_strbuf c = {0};
            rlc_sb_puts(&c, q->valuestring);
            rlc_sb_puts(&c, " " RLC_GSM8K_INSTRUCTION);
            msgs = cJSON_CreateArray();
            cJSON *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", "user");
            cJSON_AddStringToObject(m, "content", c.s);
            cJSON_AddItemToArray(msgs, m);
            rlc_sb_free(&c);
            p.data_source = rlc_strdup("openai/gsm8k");
            cJSON *ex = cJSON_CreateObject();
            cJSON_AddStringToObject(ex, "split", stem);
            cJSON_AddNumberToObject(ex, "index", (double)row);
            cJSON_AddStringToObject(ex, "answer", a->valuestring);
            cJSON_AddStringToObject(ex, "question", q->valuestring);
            p.extra_info_json = json_text(ex);
            cJSON_Delete(ex);
        } else if (prompt) {   // verl row
            if (!cJSON_IsArray(prompt))
                rlc_die("%s:%lld: \"%s\" must be a list of chat messages", path, (long long)lineno, pkey);
            const cJSON *dsrc = cJSON_GetObjectItemCaseSensitive(j, "data_source");
            if (!cJSON_IsString(dsrc)) rlc_die("%s:%lld: missing string \"data_source\"", path, (long long)lineno);
            p.data_source = rlc_strdup(dsrc->valuestring);
            const cJSON *rm = cJSON_GetObjectItemCaseSensitive(j, "reward_model");
            if (rm && !cJSON_IsNull(rm)) {
                if (!cJSON_IsObject(rm)) rlc_die("%s:%lld: \"reward_model\" must be an object", path, (long long)lineno);
                const cJSON *gt = cJSON_GetObjectItemCaseSensitive(rm, "ground_truth");
                if (cJSON_IsString(gt)) p.ground_truth = rlc_strdup(gt->valuestring);
                else if (gt && !cJSON_IsNull(gt)) p.ground_truth = json_text(gt);
            }
            const cJSON *ex = cJSON_GetObjectItemCaseSensitive(j, "extra_info");
            if (ex && !cJSON_IsNull(ex) && !cJSON_IsObject(ex))
                rlc_die("%s:%lld: \"extra_info\" must be an object", path, (long long)lineno);
            p.extra_info_json = ex && cJSON_IsObject(ex) ? json_text(ex) : rlc_strdup("{}");
            const cJSON *an = cJSON_GetObjectItemCaseSensitive(j, "agent_name");   // verl's per-row agent loop
            if (cJSON_IsString(an) && !strcmp(an->valuestring, "single_turn_agent")) p.agent_name = RLC_AGENT_NAME_SINGLE_TURN;
            else if (cJSON_IsString(an) && !strcmp(an->valuestring, "tool_agent")) p.agent_name = RLC_AGENT_NAME_TOOL;
            else if (an && !cJSON_IsNull(an))
                rlc_die("%s:%lld: \"agent_name\" must be \"single_turn_agent\" or \"tool_agent\"", path, (long long)lineno);
        } else {
            rlc_die("%s:%lld: expected a verl row with \"%s\" (chat messages) or a GSM8K line with \"question\"/\"answer\"",
                    path, (long long)lineno, pkey);
        }
        const cJSON *use = msgs ? msgs : prompt;
        p.messages_json = json_text(use);
        rlc_sb_clear(&text);
        rlc_sb_clear(&err);
        if (rlc_tok_chat_render_cjson(tok, use, 1, opts->enable_thinking, &text, &err) != 0)
            rlc_die("%s:%lld: %s", path, (long long)lineno, err.s);
        p.prompt_text = rlc_strdup(text.s ? text.s : "");
        ids.n = 0;
        rlc_tok_encode(tok, p.prompt_text, text.n, &ids);
        p.n_ids_full = ids.n;
        if (ids.n > ds->max_len_seen) ds->max_len_seen = ids.n;
        if (msgs) cJSON_Delete(msgs);
        row++;
        if (opts->filter_overlong_prompts && ids.n > opts->max_prompt_length) {
            ds->n_filtered++;
            prompt_free(&p);
            continue;
        }
        char where[512];
        snprintf(where, sizeof where, "%s:%lld", path, (long long)lineno);
        p.n_ids = rlc_truncate_ids(ids.v, ids.n, opts->max_prompt_length, opts->truncation, where);
        // the ids the model will see (after truncation): an added token past vocab_size is this row's error here,
        // not the rollout's later
        char key[160];
        snprintf(key, sizeof key, "\"%.120s\"", msgs ? "question" : pkey);
        rlc_check_vocab_ids(tok, ids.v, p.n_ids, opts->vocab_size, where, key);
        if (p.n_ids < ids.n) ds->n_truncated++;
        p.ids = rlc_malloc((size_t)(p.n_ids + 1) * sizeof(int32_t));
        memcpy(p.ids, ids.v, (size_t)p.n_ids * sizeof(int32_t));
        if (ds->n == cap_items) {
            cap_items = cap_items ? cap_items * 2 : 256;
            ds->items = rlc_realloc(ds->items, (size_t)cap_items * sizeof(rlc_prompt));
        }
        ds->items[ds->n++] = p;
    }
    rlc_rows_close(&r);
    free(stem);
    rlc_sb_free(&text);
    rlc_sb_free(&err);
    rlc_iv_free(&ids);
    if (ds->n == 0) rlc_die("%s: no rows (after filter_overlong_prompts: %lld dropped)", path, (long long)ds->n_filtered);
}

void rlc_dataset_free(rlc_dataset *ds) {
    for (int64_t i = 0; i < ds->n; i++) prompt_free(&ds->items[i]);
    free(ds->items);
    free(ds->path);
    memset(ds, 0, sizeof *ds);
}

// ---------------------------------------------------------------------------------------------
// SFT text

static void push_seg(rlc_tokenizer *tok, const char *s, size_t n, uint8_t m, rlc_ivec *ids, rlc_strbuf *mask) {
    int64_t before = ids->n;
    rlc_tok_encode(tok, s, n, ids);
    for (int64_t i = before; i < ids->n; i++) rlc_sb_putc(mask, (char)m);
}

// messages[:n] (references, nothing copied); with `repl` in place of message `at` when at >= 0
static cJSON *messages_prefix(const cJSON *msgs, int n, int at, cJSON *repl) {
    cJSON *sub = cJSON_CreateArray();
    int k = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        if (k == n) break;
        if (k == at) cJSON_AddItemToArray(sub, repl);
        else cJSON_AddItemReferenceToArray(sub, (cJSON *)m);
        k++;
    }
    return sub;
}

// Where assistant message `i` is in `full` (the whole conversation rendered without a generation prompt),
// for any template: it starts where messages[:i] rendered with add_generation_prompt=True ends (which
// must be a prefix of the whole), and ends after the first eos_token that follows its content (found by
// rendering the conversation with a marker appended to that content), or at the content's end.
static void assistant_span(rlc_tokenizer *tok, const cJSON *msgs, int i, int enable_thinking, const rlc_strbuf *full,
                           const char *path, int64_t lineno, size_t *start, size_t *end) {
    static const char MARK[] = "\x02rlc:turn-end\x03";   // no whitespace: |trim and strip() keep it
    rlc_strbuf r = {0}, err = {0};
    cJSON *sub = messages_prefix(msgs, i, -1, NULL);
    if (rlc_tok_chat_render_cjson(tok, sub, 1, enable_thinking, &r, &err) != 0)
        rlc_die("%s:%lld: messages[:%d]: %s", path, (long long)lineno, i, err.s);
    cJSON_Delete(sub);
    if (r.n > full->n || memcmp(r.s ? r.s : "", full->s, r.n))
        rlc_die("%s:%lld: the chat template renders the turns before assistant message %d differently once the "
                "conversation goes on, so its tokens cannot be found for the loss mask", path, (long long)lineno, i);
    *start = r.n;
    const cJSON *m = cJSON_GetArrayItem(msgs, i), *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!cJSON_IsString(c)) rlc_die("%s:%lld: assistant message %d needs a string \"content\"", path, (long long)lineno, i);
    cJSON *marked = cJSON_Duplicate(m, 1);
    rlc_strbuf mc = {0};
    rlc_sb_puts(&mc, c->valuestring);
    rlc_sb_puts(&mc, MARK);
    cJSON_ReplaceItemInObjectCaseSensitive(marked, "content", cJSON_CreateString(mc.s));
    sub = messages_prefix(msgs, cJSON_GetArraySize(msgs), i, marked);
    rlc_sb_clear(&r);
    if (rlc_tok_chat_render_cjson(tok, sub, 0, enable_thinking, &r, &err) != 0)
        rlc_die("%s:%lld: %s", path, (long long)lineno, err.s);
    cJSON_Delete(sub);
    const char *hit = r.s ? strstr(r.s, MARK) : NULL;
    size_t ce = hit ? (size_t)(hit - r.s) : 0;
    if (!hit || ce < *start || ce > full->n || memcmp(r.s, full->s, ce))
        rlc_die("%s:%lld: the chat template does not render assistant message %d's content as given, so its tokens "
                "cannot be found for the loss mask", path, (long long)lineno, i);
    *end = ce;
    const rlc_tok_special *sp = rlc_tok_specials(tok);
    const char *eos = sp->eos_id >= 0 ? rlc_tok_id_to_token(tok, sp->eos_id) : NULL;
    const char *e = eos && *eos ? strstr(full->s + ce, eos) : NULL;
    if (e) *end = (size_t)(e - full->s) + strlen(eos);
    rlc_sb_free(&mc);
    rlc_sb_free(&r);
    rlc_sb_free(&err);
}

void rlc_sft_text_load(rlc_sft_text *s, const char *path, rlc_tokenizer *tok, int64_t max_length, rlc_truncation trunc,
                       int enable_thinking) {
    memset(s, 0, sizeof *s);
    rlc_rows r;
    rlc_rows_open(&r, path, "SFT data");
    const char *const want[] = {"prompt", "messages", NULL};
    rlc_rows_require_any(&r, want, "SFT rows ({\"prompt\", \"response\"} or {\"messages\": [...]})");
    const rlc_tok_special *sp = rlc_tok_specials(tok);
    int64_t cap_items = 0;
    rlc_strbuf text = {0}, err = {0}, mask = {0};
    rlc_ivec ids = {0};
    const cJSON *j;
    while ((j = rlc_rows_next(&r, "{\"prompt\", \"response\"} or {\"messages\": [...]}"))) {
        const int64_t lineno = r.line;
        ids.n = 0;
        rlc_sb_clear(&mask);
        rlc_sb_clear(&text);
        rlc_sb_clear(&err);
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(j, "prompt"), *rs = cJSON_GetObjectItemCaseSensitive(j, "response");
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages");
        if (pr || rs) {
            if (!cJSON_IsString(pr) || !cJSON_IsString(rs))
                rlc_die("%s:%lld: \"prompt\" and \"response\" must both be strings", path, (long long)lineno);
            if (sp->eos_id < 0) rlc_die("%s: the tokenizer has no eos token (tokenizer_config.json eos_token)", path);
            rlc_chat_msg m = {"user", pr->valuestring, NULL};
            rlc_tok_chat_render(tok, &m, 1, 1, enable_thinking, &text);
            push_seg(tok, text.s, text.n, 0, &ids, &mask);
            push_seg(tok, rs->valuestring, strlen(rs->valuestring), 1, &ids, &mask);
            rlc_iv_push(&ids, sp->eos_id);
            rlc_sb_putc(&mask, 1);
        } else if (msgs) {
            if (rlc_tok_chat_render_cjson(tok, msgs, 0, enable_thinking, &text, &err) != 0)
                rlc_die("%s:%lld: %s", path, (long long)lineno, err.s);
            size_t pos = 0;
            int found = 0, i = 0;
            const cJSON *m;
            cJSON_ArrayForEach(m, msgs) {
                const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
                if (cJSON_IsString(role) && !strcmp(role->valuestring, "assistant")) {
                    size_t a, b;
                    assistant_span(tok, msgs, i, enable_thinking, &text, path, lineno, &a, &b);
                    if (a < pos)
                        rlc_die("%s:%lld: assistant message %d starts before the previous turn ends in the rendered "
                                "conversation", path, (long long)lineno, i);
                    push_seg(tok, text.s + pos, a - pos, 0, &ids, &mask);
                    push_seg(tok, text.s + a, b - a, 1, &ids, &mask);
                    pos = b;
                    found++;
                }
                i++;
            }
            if (pos < text.n) push_seg(tok, text.s + pos, text.n - pos, 0, &ids, &mask);
            if (!found)
                rlc_die("%s:%lld: no assistant message to train on (multi-turn SFT trains on the assistant turns)", path,
                        (long long)lineno);
        } else {
            rlc_die("%s:%lld: expected {\"prompt\", \"response\"} or {\"messages\": [...]}", path, (long long)lineno);
        }
        int64_t n = ids.n;
        if (max_length > 0 && n > max_length) {
            if (trunc == RLC_TRUNC_ERROR)
                rlc_die("%s:%lld: example is %lld tokens, longer than max_length=%lld (truncation=error)", path,
                        (long long)lineno, (long long)n, (long long)max_length);
            if (trunc == RLC_TRUNC_MIDDLE) rlc_die("%s: SFT truncation must be error, left or right", path);
            if (trunc == RLC_TRUNC_LEFT) {
                memmove(ids.v, ids.v + (n - max_length), (size_t)max_length * sizeof(int32_t));
                memmove(mask.s, mask.s + (n - max_length), (size_t)max_length);
            }
            n = max_length;
            s->n_truncated++;
        }
        rlc_sft_example ex = {0};
        ex.n = n;
        ex.line = lineno;
        ex.ids = rlc_malloc((size_t)(n + 1) * sizeof(int32_t));
        ex.loss_mask = rlc_malloc((size_t)n + 1);
        memcpy(ex.ids, ids.v, (size_t)n * sizeof(int32_t));
        memcpy(ex.loss_mask, mask.s, (size_t)n);
        if (s->n == cap_items) {
            cap_items = cap_items ? cap_items * 2 : 256;
            s->items = rlc_realloc(s->items, (size_t)cap_items * sizeof(rlc_sft_example));
        }
        s->items[s->n++] = ex;
    }
    rlc_rows_close(&r);
    rlc_sb_free(&text);
    rlc_sb_free(&err);
    rlc_sb_free(&mask);
    rlc_iv_free(&ids);
    if (s->n == 0) rlc_die("%s: no SFT examples", path);
}

void rlc_sft_text_free(rlc_sft_text *s) {
    for (int64_t i = 0; i < s->n; i++) {
        free(s->items[i].ids);
        free(s->items[i].loss_mask);
    }
    free(s->items);
    memset(s, 0, sizeof *s);
}
