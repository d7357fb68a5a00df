// fuzz_env.c: what an environment process and the model hand the agent loop: the environment's reply lines
// (rlc-env/1, one JSON object per line) and the model's text with Hermes <tool_call> blocks, parsed as the
// agent loop parses them, then truncated as tool responses are.
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/strbuf.h"
#include "fuzz_common.h"
#include "rollout/agent.h"
#include "rollout/env.h"

static void body(const uint8_t *data, size_t n) {
    const char *p = (const char *)data, *end = p + n;
    while (p < end) {   // each line as a reply from the environment
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
        rlc_strbuf err = {0};
        cJSON *j = rlc_env_parse_line(p, ll, &err);
        cJSON_Delete(j);
        free(err.s);
        p += ll + (nl != NULL);
    }
    char *text = fuzz_cstr(data, n);   // the whole input as a model turn
    agent_parsed parsed;
    agent_parse_hermes(text, &parsed);
    agent_parsed_free(&parsed);
    for (int side = 0; side < 3; side++) free(agent_truncate(text, 7, side));
    free(text);
}
FUZZ_TARGET(body)
