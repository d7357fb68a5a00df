// bpe_train.c: byte-level BPE training (see bpe_train.h).
//
// The corpus is pre-tokenized exactly as the tokenizer will (NFC, then the Qwen Split regex through the
// tokenizer's own splitter), words are counted, and merges are learned greedily: at each round the most
// frequent adjacent pair over all words (weighted by word count) becomes a new token. Ties go to the
// smaller (left id, right id) so training is deterministic. Rank = merge order, as tokenizer.json
// expects. The corpus of the demo is small (thousands of distinct words), so a full recount per merge
// is simple and fast enough.
#include "tokenizer/bpe_train.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/common.h"
#include "tokenizer/qwen3_chat_template.h"
#include "tokenizer/tok_internal.h"

// The Qwen2/Qwen3 pre-tokenizer regex (shared/spec/qwen3.md §4).
static const char *QWEN_SPLIT =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Added tokens: the Qwen3 chat special tokens rlc's chat template and rollout need.
static const struct { const char *content; int special; } ADDED[] = {
    {"<|endoftext|>", 1}, {"<|im_start|>", 1}, {"<|im_end|>", 1}, {"<think>", 0}, {"</think>", 0},
};
#define N_ADDED ((int)(sizeof ADDED / sizeof ADDED[0]))

// GPT-2 bytes_to_unicode: printable bytes map to themselves, the other 68 to U+0100 + k in order.
static void byte_chars(uint32_t bc[256]) {
    int k = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        bc[b] = printable ? (uint32_t)b : 256u + (uint32_t)k++;
    }
}

typedef struct {
    char *s;   // token string in byte-level characters (UTF-8)
} tokstr;

typedef struct {
    int32_t *sym;   // (n) current symbols of the word
    int n;
    int64_t count;
} word;

static char *concat(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *r = rlc_malloc(na + nb + 1);
    memcpy(r, a, na);
    memcpy(r + na, b, nb + 1);
    return r;
}

// Write a JSON document as out_dir/name atomically, then free it.
static void write_json(const char *out_dir, const char *name, cJSON *doc, int pretty) {
    char *text = pretty ? cJSON_Print(doc) : cJSON_PrintUnformatted(doc);
    char *p = rlc_path_join(out_dir, name);
    if (rlc_write_file_atomic(p, text, strlen(text)) != 0) rlc_die("%s: cannot write: %s", p, strerror(errno));
    free(p);
    free(text);
    cJSON_Delete(doc);
}

int bpe_train_write(const char *const *texts, int64_t n, const bpe_train_opts *o, const char *out_dir) {
    return bpe_train_write_added(texts, n, o, NULL, 0, out_dir);
}

int bpe_train_write_added(const char *const *texts, int64_t n, const bpe_train_opts *o, const char *const *added_tok, int n_added,
                          const char *out_dir) {
    if (o->vocab_size < 256) rlc_die("train-tokenizer: vocab size %d is below the 256 byte tokens", o->vocab_size);
    if (o->min_frequency < 1) rlc_die("train-tokenizer: min frequency must be >= 1");
    for (int i = 0; i < n_added; i++) {
        int dup = !added_tok[i][0];
        for (int k = 0; k < N_ADDED + i && !dup; k++) dup = !strcmp(added_tok[i], k < N_ADDED ? ADDED[k].content : added_tok[k - N_ADDED]);
        if (dup) rlc_die("train-tokenizer: added token '%s' is empty or given twice (the chat tokens are always added)", added_tok[i]);
    }
    uint32_t bc[256];
    byte_chars(bc);
    tok_pretok_step st;
    memset(&st, 0, sizeof st);
    tok_step_compile_regex(&st, QWEN_SPLIT, 0, "train-tokenizer Split regex");
    st.behavior = TOK_SPLIT_ISOLATED;

    // 1. count words
    tok_strmap wmap;
    tok_strmap_init(&wmap, 1 << 14);
    word *words = NULL;
    int64_t nw = 0, wcap = 0;
    tok_span *spans = NULL;
    int64_t scap = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *t = texts[i];
        char *nfc = (char *)utf8proc_NFC((const utf8proc_uint8_t *)t);
        if (!nfc) rlc_die("train-tokenizer: text %lld is not valid UTF-8", (long long)i);
        size_t len = strlen(nfc);
        int64_t ns = tok_split_apply(&st, nfc, len, &spans, &scap);
        for (int64_t k = 0; k < ns; k++) {
            const char *p = nfc + spans[k].s;
            size_t pl = (size_t)(spans[k].e - spans[k].s);
            if (pl == 0) continue;
            int32_t idx = tok_strmap_get(&wmap, p, pl);
            if (idx < 0) {
                if (nw == wcap) { wcap = wcap ? 2 * wcap : 1024; words = rlc_realloc(words, sizeof(word) * (size_t)wcap); }
                idx = (int32_t)nw;
                words[nw].n = (int)pl;
                words[nw].sym = rlc_malloc(sizeof(int32_t) * pl);
                for (size_t b = 0; b < pl; b++) words[nw].sym[b] = (unsigned char)p[b];   // id of byte b = b
                words[nw].count = 0;
                nw++;
                tok_strmap_put(&wmap, p, pl, idx);
            }
            words[idx].count++;
        }
        free(nfc);
    }
    free(spans);
    tok_strmap_free(&wmap);
    pcre2_match_data_free(st.md);
    pcre2_code_free(st.re);

    // 2. vocabulary starts with the 256 byte tokens
    int V = 256, cap = o->vocab_size;
    tokstr *vocab = rlc_calloc((size_t)cap, sizeof(tokstr));
    for (int b = 0; b < 256; b++) {
        char buf[8];
        utf8proc_ssize_t k = utf8proc_encode_char((utf8proc_int32_t)bc[b], (utf8proc_uint8_t *)buf);
        buf[k] = 0;
        vocab[b].s = rlc_strdup(buf);
    }
    int32_t *ml = rlc_malloc(sizeof(int32_t) * (size_t)cap), *mr = rlc_malloc(sizeof(int32_t) * (size_t)cap);
    int n_merges = 0;

    // 3. merges: pair counts in a hash table keyed by (a, b), recounted each round
    uint64_t hcap = 1 << 16;
    uint64_t *hkey = rlc_malloc(sizeof(uint64_t) * hcap);
    int64_t *hval = rlc_malloc(sizeof(int64_t) * hcap);
    while (V < cap) {
        uint64_t need = 1;
        for (int64_t w = 0; w < nw; w++) need += (uint64_t)words[w].n;
        while (hcap < 2 * need) {
            hcap *= 2;
            hkey = rlc_realloc(hkey, sizeof(uint64_t) * hcap);
            hval = rlc_realloc(hval, sizeof(int64_t) * hcap);
        }
        memset(hkey, 0, sizeof(uint64_t) * hcap);
        uint64_t best_key = 0;
        int64_t best = 0;
        for (int64_t w = 0; w < nw; w++) {
            for (int k = 0; k + 1 < words[w].n; k++) {
                uint64_t key = (((uint64_t)(uint32_t)words[w].sym[k] << 32) | (uint32_t)words[w].sym[k + 1]) + 1;
                uint64_t h = (key * 0x9E3779B97F4A7C15ull) & (hcap - 1);
                while (hkey[h] && hkey[h] != key) h = (h + 1) & (hcap - 1);
                if (!hkey[h]) { hkey[h] = key; hval[h] = 0; }
                hval[h] += words[w].count;
                if (hval[h] > best || (hval[h] == best && key < best_key)) { best = hval[h]; best_key = key; }
            }
        }
        if (best < o->min_frequency || best_key == 0) break;
        int32_t a = (int32_t)((best_key - 1) >> 32), b = (int32_t)((best_key - 1) & 0xffffffffu);
        // Two different merges can spell the same string ("a"+"bc", "ab"+"c"): they share one token.
        char *merged = concat(vocab[a].s, vocab[b].s);
        int32_t id = -1;
        for (int i = 256; i < V; i++)
            if (strcmp(vocab[i].s, merged) == 0) { id = i; break; }
        if (id < 0) { id = V++; vocab[id].s = merged; }
        else free(merged);
        ml[n_merges] = a;
        mr[n_merges] = b;
        n_merges++;
        for (int64_t w = 0; w < nw; w++) {   // apply the merge left to right, as BPE encoding will
            int32_t *s = words[w].sym;
            int m = 0;
            for (int k = 0; k < words[w].n; k++) {
                if (k + 1 < words[w].n && s[k] == a && s[k + 1] == b) { s[m++] = id; k++; }
                else s[m++] = s[k];
            }
            words[w].n = m;
        }
    }
    free(hkey);
    free(hval);

    // 4. tokenizer.json (the layout Qwen3's file has)
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    for (int i = 0; i < N_ADDED + n_added; i++) {
        const int sp = i < N_ADDED && ADDED[i].special;
        cJSON *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "id", V + i);
        cJSON_AddStringToObject(t, "content", i < N_ADDED ? ADDED[i].content : added_tok[i - N_ADDED]);
        cJSON_AddBoolToObject(t, "single_word", 0);
        cJSON_AddBoolToObject(t, "lstrip", 0);
        cJSON_AddBoolToObject(t, "rstrip", 0);
        cJSON_AddBoolToObject(t, "normalized", 0);
        cJSON_AddBoolToObject(t, "special", sp);
        cJSON_AddItemToArray(added, t);
    }
    cJSON *norm = cJSON_AddObjectToObject(root, "normalizer");
    cJSON_AddStringToObject(norm, "type", "NFC");
    cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "Sequence");
    cJSON *pres = cJSON_AddArrayToObject(pre, "pretokenizers");
    cJSON *split = cJSON_CreateObject();
    cJSON_AddStringToObject(split, "type", "Split");
    cJSON *pat = cJSON_AddObjectToObject(split, "pattern");
    cJSON_AddStringToObject(pat, "Regex", QWEN_SPLIT);
    cJSON_AddStringToObject(split, "behavior", "Isolated");
    cJSON_AddBoolToObject(split, "invert", 0);
    cJSON_AddItemToArray(pres, split);
    const char *bl_names[] = {"ByteLevel"};
    for (int k = 0; k < 3; k++) {   // the ByteLevel pre-tokenizer, post-processor and decoder
        cJSON *bl = cJSON_CreateObject();
        cJSON_AddStringToObject(bl, "type", bl_names[0]);
        cJSON_AddBoolToObject(bl, "add_prefix_space", 0);
        cJSON_AddBoolToObject(bl, "trim_offsets", 0);
        cJSON_AddBoolToObject(bl, "use_regex", 0);
        if (k == 0) cJSON_AddItemToArray(pres, bl);
        else cJSON_AddItemToObject(root, k == 1 ? "post_processor" : "decoder", bl);
    }
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddStringToObject(model, "continuing_subword_prefix", "");
    cJSON_AddStringToObject(model, "end_of_word_suffix", "");
    cJSON_AddBoolToObject(model, "fuse_unk", 0);
    cJSON_AddBoolToObject(model, "byte_fallback", 0);
    cJSON_AddBoolToObject(model, "ignore_merges", 0);
    cJSON *vj = cJSON_AddObjectToObject(model, "vocab");
    for (int i = 0; i < V; i++) cJSON_AddNumberToObject(vj, vocab[i].s, i);
    cJSON *mj = cJSON_AddArrayToObject(model, "merges");
    for (int i = 0; i < n_merges; i++) {
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateString(vocab[ml[i]].s));
        cJSON_AddItemToArray(pair, cJSON_CreateString(vocab[mr[i]].s));
        cJSON_AddItemToArray(mj, pair);
    }
    rlc_mkdirs(out_dir);
    write_json(out_dir, "tokenizer.json", root, 0);

    // 5. tokenizer_config.json: the fields Qwen3's has that rlc and transformers read.
    cJSON *tc = cJSON_CreateObject();
    cJSON_AddBoolToObject(tc, "add_bos_token", 0);
    cJSON_AddBoolToObject(tc, "add_prefix_space", 0);
    cJSON *dec = cJSON_AddObjectToObject(tc, "added_tokens_decoder");
    for (int i = 0; i < N_ADDED + n_added; i++) {
        char id[16];
        snprintf(id, sizeof id, "%d", V + i);
        cJSON *t = cJSON_AddObjectToObject(dec, id);
        cJSON_AddStringToObject(t, "content", i < N_ADDED ? ADDED[i].content : added_tok[i - N_ADDED]);
        cJSON_AddBoolToObject(t, "lstrip", 0);
        cJSON_AddBoolToObject(t, "normalized", 0);
        cJSON_AddBoolToObject(t, "rstrip", 0);
        cJSON_AddBoolToObject(t, "single_word", 0);
        cJSON_AddBoolToObject(t, "special", i < N_ADDED && ADDED[i].special);
    }
    cJSON_AddNullToObject(tc, "bos_token");
    cJSON_AddStringToObject(tc, "chat_template", RLC_QWEN3_CHAT_TEMPLATE);
    cJSON_AddBoolToObject(tc, "clean_up_tokenization_spaces", 0);
    cJSON_AddStringToObject(tc, "eos_token", "<|im_end|>");
    cJSON_AddStringToObject(tc, "errors", "replace");
    cJSON_AddNumberToObject(tc, "model_max_length", 131072);
    cJSON_AddStringToObject(tc, "pad_token", "<|endoftext|>");
    cJSON_AddBoolToObject(tc, "split_special_tokens", 0);
    cJSON_AddStringToObject(tc, "tokenizer_class", "Qwen2Tokenizer");
    cJSON_AddNullToObject(tc, "unk_token");
    write_json(out_dir, "tokenizer_config.json", tc, 1);

    // 6. generation_config.json: stop at <|im_end|> and <|endoftext|>, as Qwen3's does.
    cJSON *gc = cJSON_CreateObject();
    cJSON_AddNumberToObject(gc, "bos_token_id", V + 0);
    cJSON *eos = cJSON_AddArrayToObject(gc, "eos_token_id");
    cJSON_AddItemToArray(eos, cJSON_CreateNumber(V + 2));
    cJSON_AddItemToArray(eos, cJSON_CreateNumber(V + 0));
    cJSON_AddNumberToObject(gc, "pad_token_id", V + 0);
    cJSON_AddStringToObject(gc, "transformers_version", "4.51.0");
    write_json(out_dir, "generation_config.json", gc, 1);

    for (int i = 0; i < V; i++) free(vocab[i].s);
    free(vocab);
    free(ml);
    free(mr);
    for (int64_t w = 0; w < nw; w++) free(words[w].sym);
    free(words);
    return n_merges;
}
