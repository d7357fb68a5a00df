// fuzz_tokenizer.c: tokenizer.json (vocab and merges scanner, added tokens, normalizers, pre-tokenizers and
// their regexes, post-processor, decoders), then an encode and decode of a fixed text.
#include <string.h>

#include "fuzz_common.h"
#include "tokenizer/tokenizer.h"

static void body(const uint8_t *data, size_t n) {
    rlc_tokenizer *t = rlc_tok_from_json((const char *)data, n, "tokenizer.json", NULL);
    static const char TEXT[] = "Hello world, it's 42 \xc3\xa9t\xc3\xa9s!\n  <|im_end|> ab";
    rlc_ivec ids = {0};
    rlc_tok_encode(t, TEXT, sizeof TEXT - 1, &ids);
    rlc_strbuf out = {0};
    rlc_tok_decode(t, ids.v, ids.n, 0, &out);
    rlc_sb_free(&out);
    rlc_iv_free(&ids);
    rlc_tok_free(t);
}
FUZZ_TARGET(body)
