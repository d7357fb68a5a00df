// fuzz_jsonl.c: a JSON Lines dataset through the one JSONL reader: each line one object; "input_ids" and
// "loss_mask" arrays checked as token ids of a 1000-token vocabulary.
#include "data/jsonl.h"
#include "fuzz_common.h"

static void body(const uint8_t *data, size_t n) {
    const char *p = fuzz_file("data.jsonl", data, n);
    rlc_jsonl r;
    rlc_jsonl_open(&r, p, "data");
    r.blank_is_error = n & 1;
    const cJSON *o;
    while ((o = rlc_jsonl_next(&r, "{\"input_ids\": [...]}"))) {
        rlc_ivec ids = {0};
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "input_ids");
        if (a) rlc_jsonl_token_ids(&r, a, "input_ids", 1000, &ids);
        rlc_iv_free(&ids);
    }
    rlc_jsonl_close(&r);
}
FUZZ_TARGET(body)
