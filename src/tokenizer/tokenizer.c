// tokenizer.c: load, the encode pipeline (added tokens -> normalizer -> pre-tokenizer -> BPE ->
// post-processor), decode (whole and streaming), vocabulary and the special-token configuration.
// The pipeline follows HF tokenizers' TokenizerImpl::encode_single_sequence and
// AddedVocabulary::extract_and_normalize.
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>

#include "core/common.h"
#include "core/json.h"
#include "core/sha256.h"
#include "tokenizer/tok_internal.h"

// ---------------------------------------------------------------------------------------------
// UTF-8

// Decodes one sequence at p[*i]. Returns 1 (valid, *cp set), 0 (invalid: *i skips the maximal
// subpart, as Unicode §3.9 and Rust's from_utf8_lossy define it) or -1 (a valid prefix cut off by the
// end of the buffer; *i is left at the start of it).
int tok_utf8_step(const unsigned char *p, size_t n, size_t *i, uint32_t *cp) {
    size_t k = *i;
    unsigned char b = p[k];
    if (b < 0x80) { *cp = b; *i = k + 1; return 1; }
    int need;
    unsigned char lo = 0x80, hi = 0xBF;
    uint32_t c;
    if (b >= 0xC2 && b <= 0xDF) { need = 1; c = b & 0x1F; }
    else if (b == 0xE0) { need = 2; c = b & 0x0F; lo = 0xA0; }
    else if (b >= 0xE1 && b <= 0xEC) { need = 2; c = b & 0x0F; }
    else if (b == 0xED) { need = 2; c = b & 0x0F; hi = 0x9F; }
    else if (b >= 0xEE && b <= 0xEF) { need = 2; c = b & 0x0F; }
    else if (b == 0xF0) { need = 3; c = b & 0x07; lo = 0x90; }
    else if (b >= 0xF1 && b <= 0xF3) { need = 3; c = b & 0x07; }
    else if (b == 0xF4) { need = 3; c = b & 0x07; hi = 0x8F; }
    else { *i = k + 1; return 0; }
    size_t j = k + 1;
    for (int m = 0; m < need; m++, j++) {
        if (j >= n) return -1;
        unsigned char x = p[j];
        if (x < lo || x > hi) { *i = j; return 0; }
        lo = 0x80;
        hi = 0xBF;
        c = c << 6 | (x & 0x3F);
    }
    *cp = c;
    *i = j;
    return 1;
}

int tok_utf8_next(const char *p, size_t n, size_t *i, uint32_t *cp) {
    int r = tok_utf8_step((const unsigned char *)p, n, i, cp);
    if (r < 0) { *i = n; return 0; }
    return r;
}

static int utf8_valid(const char *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        if ((unsigned char)p[i] < 0x80) { i++; continue; }
        uint32_t cp;
        if (tok_utf8_step((const unsigned char *)p, n, &i, &cp) != 1) return 0;
    }
    return 1;
}

// Appends p[0..n) to out with each invalid sequence replaced by U+FFFD.
static void utf8_lossy_append(rlc_strbuf *out, const char *p, size_t n) {
    size_t i = 0, run = 0;
    while (i < n) {
        size_t k = i;
        uint32_t cp;
        int r = tok_utf8_next(p, n, &i, &cp);
        if (r == 1) continue;
        rlc_sb_append(out, p + run, k - run);
        rlc_sb_append(out, "\xEF\xBF\xBD", 3);
        run = i;
    }
    rlc_sb_append(out, p + run, n - run);
}

int tok_is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
// Rust regex's \w (Unicode word): letters, marks, decimal digits, letter numbers, connector punctuation.
static int is_word_char(uint32_t c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC: return 1;
    default: return 0;
    }
}
// The code point that ends at p[n] (n > 0, valid UTF-8).
static uint32_t last_cp(const char *p, size_t n) {
    size_t k = n - 1;
    while (k > 0 && ((unsigned char)p[k] & 0xC0) == 0x80) k--;
    size_t i = k;
    uint32_t cp = 0;
    tok_utf8_next(p, n, &i, &cp);
    return cp;
}

// ---------------------------------------------------------------------------------------------
// load

static void bytes_to_unicode(rlc_tokenizer *t) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        t->byte_char[b] = keep ? (uint32_t)b : (uint32_t)(256 + n++);
    }
    for (int c = 0; c < 512; c++) t->char_byte[c] = -1;
    for (int b = 0; b < 256; b++) t->char_byte[t->byte_char[b]] = (int16_t)b;
}

// The added-token matcher of one kind: a byte trie of the contents (a later duplicate content wins).
static int32_t trie_new(rlc_tokenizer *t, int kind, uint8_t byte) {
    if (t->trie_n[kind] == t->trie_cap[kind]) {
        t->trie_cap[kind] = t->trie_cap[kind] ? 2 * t->trie_cap[kind] : 256;
        t->trie[kind] = rlc_realloc(t->trie[kind], (size_t)t->trie_cap[kind] * sizeof(tok_trie_node));
    }
    t->trie[kind][t->trie_n[kind]] = (tok_trie_node){-1, -1, -1, byte};
    return t->trie_n[kind]++;
}
static void added_index(rlc_tokenizer *t, int kind, const char *c, size_t len, int idx) {
    int32_t *slot = &t->trie_root[kind][(unsigned char)c[0]];
    if (*slot < 0) *slot = trie_new(t, kind, (uint8_t)c[0]);
    int32_t node = *slot;
    for (size_t i = 1; i < len; i++) {
        uint8_t b = (uint8_t)c[i];
        int32_t ch = t->trie[kind][node].child;
        while (ch >= 0 && t->trie[kind][ch].byte != b) ch = t->trie[kind][ch].sibling;
        if (ch < 0) {
            ch = trie_new(t, kind, b);
            t->trie[kind][ch].sibling = t->trie[kind][node].child;
            t->trie[kind][node].child = ch;
        }
        node = ch;
    }
    t->trie[kind][node].term = idx;
}

static void finish_load(rlc_tokenizer *t) {
    bytes_to_unicode(t);
    if (t->n_ids > TOK_MAX_ID) rlc_die("%s: token ids too large", t->name);
    // id tables hold n_ids entries: ids far beyond the number of tokens are a damaged file, not a reason to
    // allocate gigabytes
    const int64_t n_tok = (int64_t)t->vocab.count + t->n_added;
    if (t->n_ids > 4 * n_tok + 65536)
        rlc_die("%s: token ids reach %lld but there are only %lld tokens (vocab + added_tokens); expected ids "
                "close to 0..%lld", t->name, (long long)t->n_ids - 1, (long long)n_tok, (long long)n_tok - 1);
    t->id_tok = rlc_calloc((size_t)t->n_ids + 1, sizeof(char *));
    t->is_special = rlc_calloc((size_t)t->n_ids + 1, 1);
    for (uint64_t i = 0; i < t->vocab.cap; i++)
        if (t->vocab.slot[i].key) t->id_tok[t->vocab.slot[i].val] = t->vocab.arena + t->vocab.slot[i].key - 1;
    memset(t->trie_root, 0xff, sizeof t->trie_root);
    for (int i = 0; i < t->n_added; i++) {
        tok_added *a = &t->added[i];
        t->id_tok[a->id] = a->content;
        t->is_special[a->id] = (uint8_t)a->special;
        if (a->normalized) {
            rlc_strbuf b = {0};
            tok_normalize(t, a->content, a->len, &b);
            a->norm_len = b.n;
            a->norm_content = rlc_sb_take(&b);
            if (!a->norm_len) rlc_die("%s: added token '%s' normalizes to an empty string", t->name, a->content);
            added_index(t, 1, a->norm_content, a->norm_len, i);
            t->n_added_norm++;
            // HF keeps the normalized content as the token's string (id_to_token, decode), and decode's
            // skip_special_tokens tests that string against the special tokens' contents
            t->id_tok[a->id] = a->norm_content;
            int sp = 0;
            for (int k = 0; k < t->n_added && !sp; k++)
                sp = t->added[k].special && !strcmp(t->added[k].content, a->norm_content);
            t->is_special[a->id] = (uint8_t)sp;
        } else {
            added_index(t, 0, a->content, a->len, i);
            t->n_added_raw++;
        }
    }
    for (int b = 0; b < 256; b++) {
        char u[8];
        int k = (int)utf8proc_encode_char((utf8proc_int32_t)t->byte_char[b], (utf8proc_uint8_t *)u);
        t->byte_id[b] = tok_strmap_get(&t->vocab, u, (size_t)k);
        snprintf(u, sizeof u, "<0x%02X>", b);
        t->fb_id[b] = tok_strmap_get(&t->vocab, u, 6);
    }
    tok_dec_table(t);
    tok_bpe_prepare(t);
    t->sp.bos_id = t->sp.eos_id = t->sp.pad_id = -1;
    tok_cache_init(&t->cache, t->opts.bpe_ref ? -1 : t->opts.cache_capacity);
}

rlc_tokenizer *rlc_tok_from_json(const char *json, size_t len, const char *name, const rlc_tok_opts *opts) {
    rlc_tokenizer *t = rlc_calloc(1, sizeof *t);
    t->name = rlc_strdup(name);
    if (opts) t->opts = *opts;
    tok_load_json(t, json, len);
    finish_load(t);
    return t;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

rlc_tokenizer *rlc_tok_load(const char *path, const rlc_tok_opts *opts) {
    char *dir, *tj;
    if (is_dir(path)) {
        dir = rlc_strdup(path);
        tj = rlc_path_join(path, "tokenizer.json");
        if (!rlc_file_exists(tj)) rlc_die("%s: no tokenizer.json in this directory", path);
    } else {
        if (!rlc_file_exists(path)) rlc_die("%s: no such tokenizer file or directory", path);
        tj = rlc_strdup(path);
        dir = rlc_strdup(path);
        char *sl = strrchr(dir, '/');
        if (sl) *sl = 0;
        else strcpy(dir, ".");
    }
    // mmap: no copy of the 11 MB file
    int fd = open(tj, O_RDONLY);
    if (fd < 0) rlc_die("%s: cannot open: %s", tj, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) rlc_die("%s: cannot stat: %s", tj, strerror(errno));
    size_t len = (size_t)st.st_size;
    if (len == 0) rlc_die("%s: empty file", tj);
    char *json = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (json == MAP_FAILED) rlc_die("%s: cannot map: %s", tj, strerror(errno));
    rlc_tokenizer *t = rlc_tok_from_json(json, len, tj, opts);
    munmap(json, len);
    char *tc = rlc_path_join(dir, "tokenizer_config.json"), *gc = rlc_path_join(dir, "generation_config.json");
    size_t tcl = 0, gcl = 0;
    char *tcj = rlc_file_exists(tc) ? rlc_read_file(tc, &tcl) : NULL;
    char *gcj = rlc_file_exists(gc) ? rlc_read_file(gc, &gcl) : NULL;
    char err[1024];   // a NUL byte would end the text early: checked on the whole file
    if (tcj && rlc_json_check_text(tcj, tcl, tc, err, sizeof err) != 0) rlc_die("%s", err);
    if (gcj && rlc_json_check_text(gcj, gcl, gc, err, sizeof err) != 0) rlc_die("%s", err);
    rlc_tok_apply_config(t, tcj, tc, gcj, gc);
    tok_chat_load_dir(t, dir);
    free(tcj);
    free(gcj);
    free(tc);
    free(gc);
    free(tj);
    free(dir);
    return t;
}

void rlc_tok_free(rlc_tokenizer *t) {
    if (!t) return;
    tok_strmap_free(&t->vocab);
    free(t->id_tok);
    free(t->dec_off);
    free(t->dec_len);
    free(t->dec_bytes);
    free(t->mslot);
    for (int i = 0; i < t->n_steps; i++) {
        if (t->steps[i].md) pcre2_match_data_free(t->steps[i].md);
        if (t->steps[i].re) pcre2_code_free(t->steps[i].re);
    }
    for (int i = 0; i < t->n_added; i++) {
        free(t->added[i].content);
        free(t->added[i].norm_content);
    }
    free(t->added);
    for (int k = 0; k < 2; k++) free(t->trie[k]);
    free(t->char_id);
    tok_norm_free(t);
    tok_dec_free(t);
    free(t->is_special);
    tok_chat_free(t);
    tok_cache_free(&t->cache);
    rlc_sb_free(&t->sc_map);
    rlc_sb_free(&t->sc_seg);
    rlc_sb_free(&t->sc_na);
    rlc_sb_free(&t->sc_nb);
    for (int i = 0; i < 8; i++) free(t->sc_spans[i]);
    free(t->sc_sym);
    free(t->name);
    free(t);
}

// ---------------------------------------------------------------------------------------------
// configs

// A token given as "text" or {"content": "text"} (or null) -> id; dies if it is not a token.
static int32_t config_token(const rlc_tokenizer *t, const cJSON *v, const char *file, const char *key) {
    if (!v || cJSON_IsNull(v)) return -1;
    const char *s = NULL;
    if (cJSON_IsString(v)) s = v->valuestring;
    else if (cJSON_IsObject(v)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (cJSON_IsString(c)) s = c->valuestring;
    }
    if (!s) rlc_die("%s: %s must be a token string, {\"content\": ...} or null", file, key);
    int32_t id = rlc_tok_token_to_id(t, s);
    if (id < 0) rlc_die("%s: %s '%s' is not a token of the tokenizer", file, key, s);
    return id;
}
static void add_stop(rlc_tokenizer *t, int32_t id) {
    if (id < 0) return;
    for (int i = 0; i < t->sp.n_stop; i++)
        if (t->sp.stop_ids[i] == id) return;
    if (t->sp.n_stop == 16) rlc_die("tokenizer: more than 16 distinct stop token ids (eos_token and eos_token_id)");
    t->sp.stop_ids[t->sp.n_stop++] = id;
}
static int32_t config_id(const cJSON *v, const char *file, const char *key, int64_t n_ids) {
    if (!v || cJSON_IsNull(v)) return -1;
    // range first: casting 2^63 to an integer is undefined
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble < TOK_MAX_ID) || v->valuedouble != floor(v->valuedouble))
        rlc_die("%s: key \"%s\" must be an integer token id in [0, %d)", file, key, TOK_MAX_ID);
    return (int32_t)v->valuedouble;
    (void)n_ids;
}

void rlc_tok_apply_config(rlc_tokenizer *t, const char *tcj, const char *tcn, const char *gcj, const char *gcn) {
    t->sp.bos_id = t->sp.eos_id = t->sp.pad_id = -1;
    t->sp.n_stop = 0;
    int32_t gen_eos[16];
    int n_gen_eos = 0;
    int32_t gen_bos = -1, gen_pad = -1;
    int rebuild_post = 0, want_bos = 0, want_eos = 0;
    // the tokenizer.json post-processor, restored first so that applying configs twice is the same as once
    if (!t->post_saved) {
        memcpy(t->post_pre0, t->post_pre, sizeof t->post_pre);
        memcpy(t->post_post0, t->post_post, sizeof t->post_post);
        t->n_post_pre0 = t->n_post_pre;
        t->n_post_post0 = t->n_post_post;
        t->post_saved = 1;
    }
    memcpy(t->post_pre, t->post_pre0, sizeof t->post_pre);
    memcpy(t->post_post, t->post_post0, sizeof t->post_post);
    t->n_post_pre = t->n_post_pre0;
    t->n_post_post = t->n_post_post0;
    if (gcj) {
        cJSON *g = rlc_json_parse(gcj, strlen(gcj), gcn);
        if (!cJSON_IsObject(g)) rlc_die("%s: invalid JSON (expected an object)", gcn);
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(g, "eos_token_id"), *it;
        if (cJSON_IsArray(e)) {
            if (cJSON_GetArraySize(e) > 16) rlc_die("%s: eos_token_id lists %d ids, at most 16 are supported", gcn, cJSON_GetArraySize(e));
            cJSON_ArrayForEach(it, e) gen_eos[n_gen_eos++] = config_id(it, gcn, "eos_token_id[]", t->n_ids);
        } else if (e && !cJSON_IsNull(e)) {
            gen_eos[n_gen_eos++] = config_id(e, gcn, "eos_token_id", t->n_ids);
        }
        gen_bos = config_id(cJSON_GetObjectItemCaseSensitive(g, "bos_token_id"), gcn, "bos_token_id", t->n_ids);
        gen_pad = config_id(cJSON_GetObjectItemCaseSensitive(g, "pad_token_id"), gcn, "pad_token_id", t->n_ids);
        cJSON_Delete(g);
    }
    if (!tcj) tok_chat_apply_config(t, NULL, NULL);
    if (tcj) {
        cJSON *c = rlc_json_parse(tcj, strlen(tcj), tcn);
        if (!cJSON_IsObject(c)) rlc_die("%s: invalid JSON (expected an object)", tcn);
        t->sp.eos_id = config_token(t, cJSON_GetObjectItemCaseSensitive(c, "eos_token"), tcn, "eos_token");
        t->sp.bos_id = config_token(t, cJSON_GetObjectItemCaseSensitive(c, "bos_token"), tcn, "bos_token");
        t->sp.pad_id = config_token(t, cJSON_GetObjectItemCaseSensitive(c, "pad_token"), tcn, "pad_token");
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(c, "add_bos_token");
        t->sp.add_bos = cJSON_IsTrue(x);
        x = cJSON_GetObjectItemCaseSensitive(c, "tokenizer_class");
        if (cJSON_IsString(x)) {
            static const char *const SPM_CLASSES[] = {"LlamaTokenizer", "LlamaTokenizerFast", "GemmaTokenizer",
                                                      "GemmaTokenizerFast", "CodeLlamaTokenizer", "CodeLlamaTokenizerFast"};
            for (size_t i = 0; i < sizeof SPM_CLASSES / sizeof SPM_CLASSES[0]; i++)
                if (!strcmp(x->valuestring, SPM_CLASSES[i])) rebuild_post = 1;
        }
        if (rebuild_post) {
            const cJSON *ab = cJSON_GetObjectItemCaseSensitive(c, "add_bos_token");
            const cJSON *ae = cJSON_GetObjectItemCaseSensitive(c, "add_eos_token");
            if ((ab && !cJSON_IsBool(ab) && !cJSON_IsNull(ab)) || (ae && !cJSON_IsBool(ae) && !cJSON_IsNull(ae)))
                rlc_die("%s: add_bos_token / add_eos_token must be true or false", tcn);
            want_bos = !ab || cJSON_IsNull(ab) || cJSON_IsTrue(ab);
            want_eos = cJSON_IsTrue(ae);
        }
        x = cJSON_GetObjectItemCaseSensitive(c, "clean_up_tokenization_spaces");
        t->sp.clean_up_spaces = cJSON_IsTrue(x);
        tok_chat_apply_config(t, c, tcn);
        cJSON_Delete(c);
    }
    if (t->sp.eos_id < 0 && n_gen_eos) t->sp.eos_id = gen_eos[0];
    if (t->sp.bos_id < 0) t->sp.bos_id = gen_bos;
    if (t->sp.pad_id < 0) t->sp.pad_id = gen_pad;
    t->sp.pad_fallback = 0;
    if (t->sp.pad_id < 0) {   // generate(): "Setting pad_token_id to eos_token_id"
        t->sp.pad_id = n_gen_eos ? gen_eos[0] : t->sp.eos_id;
        t->sp.pad_fallback = t->sp.pad_id >= 0;
    }
    if (rebuild_post) {   // LlamaTokenizerFast.update_post_processor: "<bos>:0 $A:0 <eos>:0" by the flags
        if (want_bos && t->sp.bos_id < 0) rlc_die("%s: add_bos_token is true but there is no bos_token", tcn);
        if (want_eos && t->sp.eos_id < 0) rlc_die("%s: add_eos_token is true but there is no eos_token", tcn);
        t->n_post_pre = t->n_post_post = 0;
        if (want_bos) t->post_pre[t->n_post_pre++] = t->sp.bos_id;
        if (want_eos) t->post_post[t->n_post_post++] = t->sp.eos_id;
    }
    t->sp.bos_added = t->sp.bos_id >= 0 && t->n_post_pre > 0 && t->post_pre[0] == t->sp.bos_id;
    add_stop(t, t->sp.eos_id);
    for (int i = 0; i < n_gen_eos; i++) add_stop(t, gen_eos[i]);
    for (int i = 0; i < t->sp.n_stop; i++)
        if (t->sp.stop_ids[i] >= t->n_ids)
            rlc_die("%s: eos token id %d is outside the tokenizer's %lld ids", gcn ? gcn : tcn, t->sp.stop_ids[i],
                    (long long)t->n_ids);
}

const rlc_tok_special *rlc_tok_specials(const rlc_tokenizer *t) { return &t->sp; }
int rlc_tok_is_stop(const rlc_tokenizer *t, int32_t id) {
    for (int i = 0; i < t->sp.n_stop; i++)
        if (t->sp.stop_ids[i] == id) return 1;
    return 0;
}

// ---------------------------------------------------------------------------------------------
// vocabulary

int64_t rlc_tok_vocab_size(const rlc_tokenizer *t) { return t->n_ids; }
int32_t rlc_tok_token_to_id(const rlc_tokenizer *t, const char *token) {
    for (int i = 0; i < t->n_added; i++)
        if (!strcmp(t->added[i].content, token)) return t->added[i].id;
    return tok_strmap_get(&t->vocab, token, strlen(token));
}
const char *rlc_tok_id_to_token(const rlc_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_ids ? t->id_tok[id] : NULL;
}
int rlc_tok_is_special(const rlc_tokenizer *t, int32_t id) { return id >= 0 && id < t->n_ids && t->is_special[id]; }

// ---------------------------------------------------------------------------------------------
// encode

// Pre-tokenizer steps from `step` on, then BPE. `origin`: the piece starts at byte 0 of the original
// text (Metaspace's prepend_scheme "first" prepends only there, HF's offsets_original().0 == 0).
static void pretok(rlc_tokenizer *t, int step, const char *p, size_t n, int origin, rlc_ivec *out) {
    if (n == 0) return;
    if (step == t->n_steps) { tok_bpe_word(t, p, n, out); return; }
    const tok_pretok_step *st = &t->steps[step];
    if (st->kind == TOK_PRE_METASPACE) {
        // ' ' -> replacement, the prepend scheme, then (split) a piece before each replacement char
        rlc_strbuf b = {0};
        size_t i = 0;
        int starts_with = n >= (size_t)st->repl_len && !memcmp(p, st->repl, (size_t)st->repl_len);
        if (p[0] == ' ') starts_with = 1;
        if (!starts_with && (st->prepend == TOK_PREPEND_ALWAYS || (st->prepend == TOK_PREPEND_FIRST && origin)))
            rlc_sb_append(&b, st->repl, (size_t)st->repl_len);
        while (i < n) {
            const char *q = memchr(p + i, ' ', n - i);
            size_t e = q ? (size_t)(q - p) : n;
            rlc_sb_append(&b, p + i, e - i);
            if (!q) break;
            rlc_sb_append(&b, st->repl, (size_t)st->repl_len);
            i = e + 1;
        }
        if (!st->split) {
            pretok(t, step + 1, b.s, b.n, origin, out);
        } else {
            int64_t k = tok_split_apply(st, b.s, b.n, &t->sc_spans[step], &t->sc_spans_cap[step]);
            tok_span *sp = rlc_malloc((size_t)(k + 1) * sizeof(tok_span));
            memcpy(sp, t->sc_spans[step], (size_t)k * sizeof(tok_span));
            for (int64_t j = 0; j < k; j++)
                pretok(t, step + 1, b.s + sp[j].s, (size_t)(sp[j].e - sp[j].s), origin && sp[j].s == 0, out);
            free(sp);
        }
        rlc_sb_free(&b);
        return;
    }
    if (st->kind == TOK_PRE_BYTELEVEL) {   // optional prefix space and GPT-2 regex split; the byte map is in BPE
        if (st->add_prefix_space && p[0] != ' ') {
            // the prefixed copy must outlive the recursion (BPE scratch is separate)
            rlc_strbuf b = {0};
            rlc_sb_putc(&b, ' ');
            rlc_sb_append(&b, p, n);
            if (st->use_regex) {
                int64_t k = tok_split_apply(st, b.s, b.n, &t->sc_spans[step], &t->sc_spans_cap[step]);
                tok_span *sp = rlc_malloc((size_t)(k + 1) * sizeof(tok_span));
                memcpy(sp, t->sc_spans[step], (size_t)k * sizeof(tok_span));
                for (int64_t i = 0; i < k; i++)
                    pretok(t, step + 1, b.s + sp[i].s, (size_t)(sp[i].e - sp[i].s), origin && sp[i].s == 0, out);
                free(sp);
            } else {
                pretok(t, step + 1, b.s, b.n, origin, out);
            }
            rlc_sb_free(&b);
            return;
        }
        if (!st->use_regex) { pretok(t, step + 1, p, n, origin, out); return; }
    }
    int64_t k = tok_split_apply(st, p, n, &t->sc_spans[step], &t->sc_spans_cap[step]);
    for (int64_t i = 0; i < k; i++) {
        tok_span sp = t->sc_spans[step][i];   // copy: deeper steps use other scratch levels
        pretok(t, step + 1, p + sp.s, (size_t)(sp.e - sp.s), origin && sp.s == 0, out);
    }
}

// Leftmost-longest matching of the added tokens of one kind (normalized=0 on raw text, =1 on
// normalized text), with single_word / lstrip / rstrip as HF's AddedVocabulary::find_matches.
// For each gap calls gap(), for each token pushes its id.
typedef void (*gap_fn)(rlc_tokenizer *t, const char *p, size_t n, int origin, rlc_ivec *out);

static void split_added(rlc_tokenizer *t, int norm, const char *p, size_t n, int origin, gap_fn gap, rlc_ivec *out) {
    if ((norm ? t->n_added_norm : t->n_added_raw) == 0) { gap(t, p, n, origin, out); return; }
    const int32_t *root = t->trie_root[norm];
    const tok_trie_node *tr = t->trie[norm];
    size_t start_off = 0, i = 0;
    while (i < n) {
        int32_t node = root[(unsigned char)p[i]];
        if (node < 0) { i++; continue; }
        int best = tr[node].term;   // the longest token starting at i
        size_t blen = 1, q = i + 1;
        while (q < n) {
            int32_t ch = tr[node].child;
            while (ch >= 0 && tr[ch].byte != (uint8_t)p[q]) ch = tr[ch].sibling;
            if (ch < 0) break;
            node = ch;
            q++;
            if (tr[node].term >= 0) { best = tr[node].term; blen = q - i; }
        }
        if (best < 0) { i++; continue; }
        const tok_added *a = &t->added[best];
        size_t s = i, e = i + blen;
        i = e;   // the matcher resumes after this match, whether or not it is kept
        if (a->single_word) {
            int start_space = s == 0 || !is_word_char(last_cp(p, s));
            int stop_space = 1;
            if (e < n) {
                size_t j = e;
                uint32_t cp;
                tok_utf8_next(p, n, &j, &cp);
                stop_space = !is_word_char(cp);
            }
            if (!start_space || !stop_space) continue;
        }
        if (a->lstrip) {
            size_t ns = s;
            while (ns > 0) {
                size_t k = ns - 1;
                while (k > 0 && ((unsigned char)p[k] & 0xC0) == 0x80) k--;
                size_t j = k;
                uint32_t cp;
                tok_utf8_next(p, n, &j, &cp);
                if (!tok_is_white_space(cp)) break;
                ns = k;
            }
            s = ns > start_off ? ns : start_off;
        }
        if (a->rstrip) {
            while (e < n) {
                size_t j = e;
                uint32_t cp;
                tok_utf8_next(p, n, &j, &cp);
                if (!tok_is_white_space(cp)) break;
                e = j;
            }
            i = e > i ? e : i;
        }
        if (start_off < s) gap(t, p + start_off, s - start_off, origin && start_off == 0, out);
        rlc_iv_push(out, a->id);
        start_off = e;
    }
    if (start_off < n) gap(t, p + start_off, n - start_off, origin && start_off == 0, out);
}

static void gap_normalized(rlc_tokenizer *t, const char *p, size_t n, int origin, rlc_ivec *out) {
    pretok(t, 0, p, n, origin, out);
}

static void gap_raw(rlc_tokenizer *t, const char *p, size_t n, int origin, rlc_ivec *out) {
    if (t->n_norm == 0) { split_added(t, 1, p, n, origin, gap_normalized, out); return; }
    rlc_strbuf *nb = &t->sc_seg;   // nothing below normalizes again, so one scratch buffer serves
    tok_normalize(t, p, n, nb);
    split_added(t, 1, nb->s, nb->n, origin, gap_normalized, out);
}

void rlc_tok_encode_ex(rlc_tokenizer *t, const char *text, size_t len, int add_special, rlc_ivec *out) {
    if (add_special) rlc_iv_append(out, t->post_pre, t->n_post_pre);
    const char *p = text;
    rlc_strbuf fixed = {0};
    if (!utf8_valid(text, len)) {
        utf8_lossy_append(&fixed, text, len);
        p = fixed.s;
        len = fixed.n;
    }
    split_added(t, 0, p, len, 1, gap_raw, out);
    rlc_sb_free(&fixed);
    if (add_special) rlc_iv_append(out, t->post_post, t->n_post_post);
}

void rlc_tok_encode(rlc_tokenizer *t, const char *text, size_t len, rlc_ivec *out) {
    rlc_tok_encode_ex(t, text, len, 0, out);
}

void rlc_tok_encode_chat(rlc_tokenizer *t, const char *rendered, size_t len, rlc_ivec *out) {
    rlc_tok_encode_ex(t, rendered, len, 0, out);
}
void rlc_tok_encode_text(rlc_tokenizer *t, const char *text, size_t len, rlc_ivec *out) {
    rlc_tok_encode_ex(t, text, len, 1, out);
}
int rlc_tok_special_template(const rlc_tokenizer *t, const int32_t **pre, int *n_pre, const int32_t **post, int *n_post) {
    if (pre) *pre = t->post_pre;
    if (n_pre) *n_pre = t->n_post_pre;
    if (post) *post = t->post_post;
    if (n_post) *n_post = t->n_post_post;
    return t->n_post_pre;
}
