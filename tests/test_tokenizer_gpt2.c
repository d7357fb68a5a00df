// test_tokenizer_gpt2.c: generality of the tokenizer.json loader. The test builds small byte-level BPE
// tokenizers itself (vocab = the 256 byte symbols + the first 3,000 Qwen3 merges, re-numbered) in
// the layouts other checkpoints use, and requires ids identical to HF's Rust tokenizer:
//   gpt2     ByteLevel(use_regex: GPT-2 pattern), merges as "a b" strings
//   roberta  NFC + ByteLevel(add_prefix_space), added tokens with lstrip / rstrip / single_word /
//            normalized flags, TemplateProcessing <s> A </s> (checked with add_special_tokens too)
//   llama3   Sequence[Split(String "\n\n", MergedWithPrevious), Split(Llama-3 regex), ByteLevel(no regex)],
//            merges as [a, b] pairs, ignore_merges
//   removed  Split(\s+, Removed) + Split(\p{N}+, Contiguous, invert) + ByteLevel
// It also checks that unsupported features are one-line errors naming them.
#include "test_tokenizer_util.h"

static char *DIR_;
static uint32_t BYTE_CHAR[256];

static void b2u(void) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        BYTE_CHAR[b] = keep ? (uint32_t)b : (uint32_t)(256 + n++);
    }
}

// vocab (cJSON object) and merges (two forms) from the first n Qwen3 merges
static cJSON *VOCAB;
static cJSON *MERGES_STR, *MERGES_PAIR;
static int N_VOCAB;

static void build_base(int n_merges) {
    size_t len;
    char *txt = rlc_read_file(QWEN3_DIR "/tokenizer.json", &len);
    cJSON *root = cJSON_ParseWithLength(txt, len);
    free(txt);
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "model"), "merges");
    VOCAB = cJSON_CreateObject();
    MERGES_STR = cJSON_CreateArray();
    MERGES_PAIR = cJSON_CreateArray();
    for (int b = 0; b < 256; b++) {
        rlc_strbuf s = {0};
        tt_put_cp(&s, BYTE_CHAR[b]);
        cJSON_AddNumberToObject(VOCAB, s.s, b);
        rlc_sb_free(&s);
    }
    N_VOCAB = 256;
    const cJSON *m;
    int k = 0;
    cJSON_ArrayForEach(m, merges) {
        if (k++ >= n_merges) break;
        const char *a = cJSON_GetArrayItem(m, 0)->valuestring, *b = cJSON_GetArrayItem(m, 1)->valuestring;
        CHECK(cJSON_GetObjectItemCaseSensitive(VOCAB, a) && cJSON_GetObjectItemCaseSensitive(VOCAB, b), "merge parts known");
        rlc_strbuf s = {0};
        rlc_sb_puts(&s, a);
        rlc_sb_putc(&s, ' ');
        rlc_sb_puts(&s, b);
        cJSON_AddItemToArray(MERGES_STR, cJSON_CreateString(s.s));
        cJSON *pr = cJSON_CreateArray();
        cJSON_AddItemToArray(pr, cJSON_CreateString(a));
        cJSON_AddItemToArray(pr, cJSON_CreateString(b));
        cJSON_AddItemToArray(MERGES_PAIR, pr);
        rlc_sb_clear(&s);
        rlc_sb_puts(&s, a);
        rlc_sb_puts(&s, b);
        if (!cJSON_GetObjectItemCaseSensitive(VOCAB, s.s)) cJSON_AddNumberToObject(VOCAB, s.s, N_VOCAB++);
        rlc_sb_free(&s);
    }
    cJSON_Delete(root);
}

static cJSON *added(int id, const char *content, int special, int lstrip, int rstrip, int single_word, int normalized) {
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "id", id);
    cJSON_AddStringToObject(a, "content", content);
    cJSON_AddBoolToObject(a, "single_word", single_word);
    cJSON_AddBoolToObject(a, "lstrip", lstrip);
    cJSON_AddBoolToObject(a, "rstrip", rstrip);
    cJSON_AddBoolToObject(a, "normalized", normalized);
    cJSON_AddBoolToObject(a, "special", special);
    return a;
}
static cJSON *bytelevel(int prefix, int regex) {
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "ByteLevel");
    cJSON_AddBoolToObject(b, "add_prefix_space", prefix);
    cJSON_AddBoolToObject(b, "trim_offsets", 1);
    cJSON_AddBoolToObject(b, "use_regex", regex);
    return b;
}
static cJSON *split(const char *kind, const char *pat, const char *behavior, int invert) {
    cJSON *s = cJSON_CreateObject(), *p = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "type", "Split");
    cJSON_AddStringToObject(p, kind, pat);
    cJSON_AddItemToObject(s, "pattern", p);
    cJSON_AddStringToObject(s, "behavior", behavior);
    cJSON_AddBoolToObject(s, "invert", invert);
    return s;
}
static cJSON *seq(const char *key, cJSON *a, cJSON *b, cJSON *c) {
    cJSON *s = cJSON_CreateObject(), *l = cJSON_CreateArray();
    cJSON_AddStringToObject(s, "type", "Sequence");
    cJSON_AddItemToArray(l, a);
    if (b) cJSON_AddItemToArray(l, b);
    if (c) cJSON_AddItemToArray(l, c);
    cJSON_AddItemToObject(s, key, l);
    return s;
}

// Assemble and write a tokenizer.json; returns its path (malloc'd).
static char *write_tok(const char *name, cJSON *norm, cJSON *pre, cJSON *post, cJSON *added_list, int pair_merges,
                       int ignore_merges) {
    cJSON *r = cJSON_CreateObject(), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "version", "1.0");
    cJSON_AddNullToObject(r, "truncation");
    cJSON_AddNullToObject(r, "padding");
    cJSON_AddItemToObject(r, "added_tokens", added_list ? added_list : cJSON_CreateArray());
    cJSON_AddItemToObject(r, "normalizer", norm ? norm : cJSON_CreateNull());
    cJSON_AddItemToObject(r, "pre_tokenizer", pre);
    cJSON_AddItemToObject(r, "post_processor", post ? post : bytelevel(0, 0));
    cJSON_AddItemToObject(r, "decoder", bytelevel(1, 1));
    cJSON_AddStringToObject(m, "type", "BPE");
    cJSON_AddNullToObject(m, "dropout");
    cJSON_AddNullToObject(m, "unk_token");
    cJSON_AddNullToObject(m, "continuing_subword_prefix");
    cJSON_AddNullToObject(m, "end_of_word_suffix");
    cJSON_AddBoolToObject(m, "fuse_unk", 0);
    cJSON_AddBoolToObject(m, "byte_fallback", 0);
    cJSON_AddBoolToObject(m, "ignore_merges", ignore_merges);
    cJSON_AddItemToObject(m, "vocab", cJSON_Duplicate(VOCAB, 1));
    cJSON_AddItemToObject(m, "merges", cJSON_Duplicate(pair_merges ? MERGES_PAIR : MERGES_STR, 1));
    cJSON_AddItemToObject(r, "model", m);
    char *txt = cJSON_Print(r);   // formatted, as HF writes it
    char *path = rlc_malloc(strlen(DIR_) + strlen(name) + 32);
    sprintf(path, "%s/%s.json", DIR_, name);
    tt_write(path, txt);
    cJSON_free(txt);
    cJSON_Delete(r);
    return path;
}

// roundtrip: also check encode(decode(ids)) == ids (only for lossless pipelines: no prefix space,
// nothing removed).
static void check_variant(const char *name, const char *path, const tt_strs *texts, int add_special, int roundtrip) {
    double t0 = rlc_now();
    rlc_tokenizer *t = rlc_tok_load(path, NULL);
    rlc_ivec *want = tt_hf_encode(path, texts, add_special, DIR_);
    printf("%s: oracle %.1f s\n", name, rlc_now() - t0);
    TL_CHECK(want != NULL, "%s: HF oracle ran", name);
    if (want) {
        int64_t bad = tt_compare_encode(t, texts, want, add_special, name);
        TL_CHECK(bad == 0, "%s%s: ids identical to HF on %lld strings (%lld differ)", name, add_special ? " +special" : "",
                 (long long)texts->n, (long long)bad);
        // decode(encode(x)) round trip through this tokenizer's vocabulary (no specials)
        if (roundtrip) {
            int64_t rt = 0;
            for (int64_t i = 0; i < texts->n && i < 500; i++) {
                char *d = rlc_tok_decode_str(t, want[i].v, want[i].n, 0);
                rlc_ivec again = {0};
                rlc_tok_encode(t, d, strlen(d), &again);
                rt += again.n != want[i].n || memcmp(again.v, want[i].v, (size_t)again.n * 4);
                rlc_iv_free(&again);
                free(d);
            }
            TL_CHECK(rt == 0, "%s: encode(decode(ids)) == ids on 500 strings (%lld differ)", name, (long long)rt);
        }
    }
    tt_free_ids(want, texts->n);
    rlc_tok_free(t);
}

static void test_errors(void) {
    static const char *const CASES[][2] = {
        {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", "unsupported model type 'WordPiece'"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [], \"continuing_subword_prefix\": \"##\"}}",
         "continuing_subword_prefix"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [], \"dropout\": 0.1}}", "dropout"},
        {"{\"normalizer\": {\"type\": \"Lowercase\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
         "unsupported normalizer type 'Lowercase'"},
        {"{\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
         "unsupported pre_tokenizer type 'BertPreTokenizer'"},
        {"{\"decoder\": {\"type\": \"WordPiece\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
         "unsupported decoder type 'WordPiece'"},
        {"{\"post_processor\": {\"type\": \"RobertaProcessing\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
         "unsupported post_processor type 'RobertaProcessing'"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}", "token 'b' is not in the vocab"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a a a\"]}}", "exactly one space"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0,}, \"merges\": []}}", "invalid JSON at byte"},
        {"{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"[\\\\S]\"}, \"behavior\": \"Isolated\"}, \"model\": "
         "{\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}", "\\S inside a character class is not supported"},
        {"{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, \"behavior\": \"Isolated\"}, \"model\": "
         "{\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}", "does not compile"},
    };
    tt_check_bad_files(CASES, (int)(sizeof CASES / sizeof CASES[0]));
}

static void test_pattern_rewrite(void) {
    extern char *rlc_tok_rewrite_regex(const char *pat, const char *where);
    char *r = rlc_tok_rewrite_regex("\\s+(?!\\S)|[^\\s\\p{L}]\\d\\w", "t");
    TL_CHECK(strstr(r, "\\x{85}") && strstr(r, "[^\\t-\\r") && strstr(r, "\\p{Nd}") && !strstr(r, "\\s") && !strstr(r, "\\S"),
             "\\s/\\S/\\d/\\w rewritten: %s", r);
    free(r);
}

int main(void) {
    if (!rlc_file_exists(QWEN3_DIR "/tokenizer.json") || !tt_have_node()) {
        tl_skip("npm oracles not installed (tests/node/node_modules; run scripts/install-deps.sh)");
        test_errors();
        return tl_summary();
    }
    DIR_ = tl_tmpdir("tokgpt2");
    b2u();
    double t0 = rlc_now();
    build_base(3000);
    printf("base %.1f s\n", rlc_now() - t0);
    test_errors();
    printf("errors %.1f s\n", rlc_now() - t0);
    test_pattern_rewrite();

    tt_strs texts = {0};
    int nhard = getenv("RLC_SAN") && atoi(getenv("RLC_SAN")) ? 600 : 2500;
    tt_hard_strings(&texts, nhard, 99);
    // strings around the extra added tokens
    static const char *AP[] = {"<mask>", " <mask>", "<mask> ", "  <mask>  ", "x<mask>y", "[SW]", " [SW] ", "a[SW]b", "_[SW]",
                               "[SW]_", "\xC3\xA9[SW]", "<rs>", "<rs>   z", "<rs>\n\n", "caf\xC3\xA9", "cafe\xCC\x81", " cafe\xCC\x81s",
                               "<s>", "</s>", "<|endoftext|>", " ", "word", "\n", "12"};
    tl_rng r;
    tl_rng_init(&r, 5);
    rlc_strbuf b = {0};
    for (int i = 0; i < 600; i++) {
        rlc_sb_clear(&b);
        int k = 1 + tt_rand(&r, 6);
        for (int j = 0; j < k; j++) rlc_sb_puts(&b, AP[tt_rand(&r, (int)(sizeof AP / sizeof AP[0]))]);
        tt_push(&texts, b.s, b.n);
    }
    rlc_sb_free(&b);

    int id = N_VOCAB;
    // gpt2
    cJSON *al = cJSON_CreateArray();
    cJSON_AddItemToArray(al, added(id, "<|endoftext|>", 1, 0, 0, 0, 0));
    char *p = write_tok("gpt2", NULL, bytelevel(0, 1), NULL, al, 0, 0);
    check_variant("gpt2", p, &texts, 0, 1);
    free(p);
    // roberta-like
    al = cJSON_CreateArray();
    cJSON_AddItemToArray(al, added(id, "<s>", 1, 0, 0, 0, 0));
    cJSON_AddItemToArray(al, added(id + 1, "</s>", 1, 0, 0, 0, 0));
    cJSON_AddItemToArray(al, added(id + 2, "<mask>", 1, 1, 0, 0, 0));
    cJSON_AddItemToArray(al, added(id + 3, "[SW]", 0, 0, 0, 1, 0));
    cJSON_AddItemToArray(al, added(id + 4, "<rs>", 0, 0, 1, 0, 0));
    cJSON_AddItemToArray(al, added(id + 5, "caf\xC3\xA9", 0, 0, 0, 0, 1));
    cJSON *nfc = cJSON_CreateObject();
    cJSON_AddStringToObject(nfc, "type", "NFC");
    cJSON *post = cJSON_Parse("{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, "
                              "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 0}}], "
                              "\"pair\": [{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"B\", \"type_id\": 1}}], "
                              "\"special_tokens\": {}}");
    cJSON *spt = cJSON_GetObjectItemCaseSensitive(post, "special_tokens");
    char buf[256];
    snprintf(buf, sizeof buf, "{\"id\": \"<s>\", \"ids\": [%d], \"tokens\": [\"<s>\"]}", id);
    cJSON_AddItemToObject(spt, "<s>", cJSON_Parse(buf));
    snprintf(buf, sizeof buf, "{\"id\": \"</s>\", \"ids\": [%d], \"tokens\": [\"</s>\"]}", id + 1);
    cJSON_AddItemToObject(spt, "</s>", cJSON_Parse(buf));
    p = write_tok("roberta", nfc, bytelevel(1, 1), post, al, 0, 0);
    check_variant("roberta", p, &texts, 0, 0);
    check_variant("roberta", p, &texts, 1, 0);
    free(p);
    // llama3-like
    const char *L3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    al = cJSON_CreateArray();
    cJSON_AddItemToArray(al, added(id, "<|begin_of_text|>", 1, 0, 0, 0, 0));
    p = write_tok("llama3", NULL, seq("pretokenizers", split("String", "\n\n", "MergedWithPrevious", 0), split("Regex", L3, "Isolated", 0), bytelevel(0, 0)),
                  NULL, al, 1, 1);
    check_variant("llama3", p, &texts, 0, 1);
    free(p);
    // removed / contiguous / merged-with-next behaviours
    p = write_tok("removed", NULL, seq("pretokenizers", split("Regex", "\\s+", "Removed", 0), split("Regex", "\\p{N}+", "Contiguous", 1), bytelevel(0, 0)),
                  NULL, NULL, 0, 0);
    check_variant("removed", p, &texts, 0, 0);
    free(p);
    p = write_tok("mergednext", NULL, seq("pretokenizers", split("Regex", "[.!?]", "MergedWithNext", 0), split("String", " ", "Isolated", 1), bytelevel(0, 0)),
                  NULL, NULL, 0, 0);
    check_variant("mergednext", p, &texts, 0, 1);
    free(p);

    cJSON_Delete(VOCAB);
    cJSON_Delete(MERGES_STR);
    cJSON_Delete(MERGES_PAIR);
    tt_free(&texts);
    tl_system("rm -rf '%s'", DIR_);
    free(DIR_);
    return tl_summary();
}
