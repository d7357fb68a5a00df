// chat_render.c: the render() call of transformers' apply_chat_template, on the template engine. The
// variables are passed by reference (cJSON reference items): nothing of the conversation is copied.
#include <cjson/cJSON.h>
#include <string.h>

#include "template/chat_render.h"

int rlc_chat_check_inputs(const cJSON *messages, const cJSON *tools, const cJSON *kwargs, rlc_strbuf *err) {
    if (!cJSON_IsArray(messages)) {
        rlc_sb_puts(err, "messages must be a list of {\"role\", \"content\"} objects");
        return -1;
    }
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, messages) {
        if (!cJSON_IsObject(m) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "role"))) {
            rlc_sb_printf(err, "message %d must be an object with a string \"role\"", i);
            return -1;
        }
        i++;
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
    if (rlc_chat_check_inputs(messages, tools, kwargs, err)) return -1;
    cJSON *vars = cJSON_CreateObject();
    const cJSON *it;
    // later keys replace earlier ones, as in render(messages=..., **special_tokens, **kwargs)
    const cJSON *layers[2] = {specials, kwargs && cJSON_IsObject(kwargs) ? kwargs : NULL};
    for (int l = 0; l < 2; l++)
        if (layers[l])
            cJSON_ArrayForEach(it, layers[l]) {
                if (!it->string) continue;
                cJSON_DeleteItemFromObjectCaseSensitive(vars, it->string);
                cJSON_AddItemReferenceToObject(vars, it->string, (cJSON *)it);
            }
    static const char *const OWN[] = {"messages", "tools", "documents", "add_generation_prompt"};
    for (size_t k = 0; k < sizeof OWN / sizeof *OWN; k++) cJSON_DeleteItemFromObjectCaseSensitive(vars, OWN[k]);
    cJSON_AddItemReferenceToObject(vars, "messages", (cJSON *)messages);
    if (tools && !cJSON_IsNull(tools)) cJSON_AddItemReferenceToObject(vars, "tools", (cJSON *)tools);
    else cJSON_AddNullToObject(vars, "tools");
    cJSON_AddNullToObject(vars, "documents");
    cJSON_AddBoolToObject(vars, "add_generation_prompt", add_generation_prompt != 0);
    int rc = rlc_tmpl_render(t, vars, out, err);
    cJSON_Delete(vars);
    return rc;
}
