// fuzz_chat_template.c: the Jinja chat-template engine (lexer, parser, evaluator, filters) rendering a fixed
// conversation with tools, as a tokenizer_config.json's chat_template is rendered.
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "fuzz_common.h"
#include "template/chat_render.h"
#include "template/template.h"

static void body(const uint8_t *data, size_t n) {
    static cJSON *msgs, *tools, *kw;
    if (!msgs) {
        msgs = cJSON_Parse("[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"2+2?\"},"
                           " {\"role\": \"assistant\", \"content\": \"<think>\\nadd\\n</think>\\n\\n4\", \"tool_calls\": [{\"type\":"
                           " \"function\", \"function\": {\"name\": \"calc\", \"arguments\": {\"x\": [1, 2.5, null]}}}]},"
                           " {\"role\": \"tool\", \"content\": \"4\"}, {\"role\": \"user\", \"content\": \"\\u00e9\"}]");
        tools = cJSON_Parse("[{\"type\": \"function\", \"function\": {\"name\": \"calc\", \"parameters\": {}}}]");
        kw = cJSON_Parse("{\"enable_thinking\": false, \"eos_token\": \"<|im_end|>\"}");
    }
    rlc_strbuf out = {0}, err = {0};
    rlc_tmpl *t = rlc_tmpl_parse((const char *)data, n, "chat_template.jinja", &err);
    if (t) {
        rlc_chat_render(t, NULL, msgs, tools, 1, kw, &out, &err);
        rlc_tmpl_free(t);
    }
    rlc_sb_free(&out);
    rlc_sb_free(&err);
}
FUZZ_TARGET(body)
