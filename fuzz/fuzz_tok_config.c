// fuzz_tok_config.c: tokenizer_config.json (special tokens, add_bos/add_eos, tokenizer class) or
// generation_config.json (eos/bos/pad ids), chosen by the input's first byte, applied to a small tokenizer.
#include <stdlib.h>

#include "core/common.h"
#include "fuzz_common.h"
#include "tokenizer/tokenizer.h"

static const char TOK[] =
    "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"<s>\": 3, \"</s>\": 4}, \"merges\": [\"a b\"]},"
    " \"added_tokens\": [{\"id\": 5, \"content\": \"<|im_end|>\", \"special\": true}]}";

static void body(const uint8_t *data, size_t n) {
    if (n < 1) return;
    // one tokenizer for the whole run: applying a config restores what the last one changed, and a rejected
    // config would otherwise leak a whole tokenizer per input
    static rlc_tokenizer *t;
    if (!t) t = rlc_tok_from_json(TOK, sizeof TOK - 1, "tokenizer.json", NULL);
    const char *p = fuzz_file(data[0] & 1 ? "generation_config.json" : "tokenizer_config.json", data + 1, n - 1);
    size_t len;
    char *text = rlc_read_file(p, &len);
    if (data[0] & 1) rlc_tok_apply_config(t, NULL, NULL, text, p);
    else rlc_tok_apply_config(t, text, p, NULL, NULL);
    free(text);
}
FUZZ_TARGET(body)
