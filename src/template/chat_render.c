// chat_render.c: the render() call of transformers' apply_chat_template, on the template engine. The
// variables are passed as pointers into the caller's JSON: nothing of the conversation is copied first.
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "template/chat_render.h"

int rlc_chat_check_inputs(const cJSON *messages, const cJSON *tools, const cJSON *kwargs, rlc_strbuf *err) {
    if (!cJSON_IsArray(messages)) {
        rlc_sb_puts(err, "messages must be a list of {\"role\", \"content\"} objects");
        return -1;
    }
    int i = 0;
    for (const cJSON *m = messages->child; m; m = m->next, i++) {
        const cJSON *r = NULL;
        if ((m->type & 0xFF) == cJSON_Object)
            for (r = m->child; r && (r->string[0] != 'r' || strcmp(r->string, "role")); r = r->next) {}
        if (!r || (r->type & 0xFF) != cJSON_String) {
            rlc_sb_printf(err, "message %d must be an object with a string \"role\"", i);
            return -1;
        }
    }
    if (tools && !cJSON_IsNull(tools) && !cJSON_IsArray(tools)) {
        rlc_sb_puts(err, "tools must be a list of JSON schemas");
        return -1;
    }
    if (kwargs && !cJSON_IsNull(kwargs) && !cJSON_IsObject(kwargs)) {
        rlc_sb_puts(err, "template kwargs must be a JSON object");
        return -1;
    }
    return 0;
}

int rlc_chat_render(const rlc_tmpl *t, const cJSON *specials, const cJSON *messages, const cJSON *tools,
                    int add_generation_prompt, const cJSON *kwargs, rlc_strbuf *out, rlc_strbuf *err) {
    static const cJSON J_NULL = {.type = cJSON_NULL}, J_TRUE = {.type = cJSON_True}, J_FALSE = {.type = cJSON_False};
    if (rlc_chat_check_inputs(messages, tools, kwargs, err)) return -1;
    // render(**special_tokens, **kwargs, messages=, tools=, documents=None, add_generation_prompt=): a later
    // name replaces an earlier one
    enum { SMALL = 48 };
    const char *names_small[SMALL], **names = names_small;
    const cJSON *vals_small[SMALL], **vals = vals_small;
    int n = 4, k = 0;
    const cJSON *it;
    const cJSON *layers[2] = {specials, cJSON_IsObject(kwargs) ? kwargs : NULL};
    for (int l = 0; l < 2; l++)
        for (it = layers[l] ? layers[l]->child : NULL; it; it = it->next) n++;
    if (n > SMALL) {
        names = malloc((size_t)n * sizeof *names);
        vals = malloc((size_t)n * sizeof *vals);
        if (!names || !vals) {
            free(names);
            free(vals);
            rlc_sb_puts(err, "out of memory");
            return -1;
        }
    }
    for (int l = 0; l < 2; l++)
        for (it = layers[l] ? layers[l]->child : NULL; it; it = it->next)
            if (it->string) { names[k] = it->string; vals[k++] = it; }
    names[k] = "messages"; vals[k++] = messages;
    names[k] = "tools"; vals[k++] = tools && !cJSON_IsNull(tools) ? tools : &J_NULL;
    names[k] = "documents"; vals[k++] = &J_NULL;
    names[k] = "add_generation_prompt"; vals[k++] = add_generation_prompt ? &J_TRUE : &J_FALSE;
    int rc = rlc_tmpl_render_vars(t, k, names, vals, out, err);
    if (names != names_small) {
        free(names);
        free(vals);
    }
    return rc;
}
