// tokenizer.c: load, the encode pipeline (added tokens -> normalizer -> pre-tokenizer -> BPE ->
// post-processor), decode (whole and streaming), vocabulary and the special-token configuration.
// The pipeline follows HF tokenizers' TokenizerImpl::encode_single_sequence and
// AddedVocabulary::extract_and_normalize.
#include <cjson/cJSON.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>

#include "core/common.h"
#include "core/sha256.h"
#include "tokenizer/tok_internal.h"

// ---------------------------------------------------------------------------------------------
// UTF-8

// Decodes one sequence at p[*i]. Returns 1 (valid, *cp set), 0 (invalid: *i skips the maximal
// subpart, as Unicode §3.9 and Rust's from_utf8_lossy define it) or -1 (a valid prefix cut off by the
// end of the buffer; *i is left at the start of it).
static int utf8_step(const unsigned char *p, size_t n, size_t *i, uint32_t *cp) {
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
    int r = utf8_step((const unsigned char *)p, n, i, cp);
    if (r < 0) { *i = n; return 0; }
    return r;
}

static int utf8_valid(const char *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        if ((unsigned char)p[i] < 0x80) { i++; continue; }
        uint32_t cp;
        if (utf8_step((const unsigned char *)p, n, &i, &cp) != 1) return 0;
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

static void normalize(const rlc_tokenizer *t, const char *p, size_t n, rlc_strbuf *out);

static void finish_load(rlc_tokenizer *t) {
    bytes_to_unicode(t);
    if (t->n_ids > INT32_MAX) rlc_die("%s: token ids too large", t->name);
    t->id_tok = rlc_calloc((size_t)t->n_ids + 1, sizeof(char *));
    t->is_special = rlc_calloc((size_t)t->n_ids + 1, 1);
    for (uint64_t i = 0; i < t->vocab.cap; i++)
        if (t->vocab.slot[i].key) t->id_tok[t->vocab.slot[i].val] = t->vocab.arena + t->vocab.slot[i].key - 1;
    for (int i = 0; i < t->n_added; i++) {
        tok_added *a = &t->added[i];
        t->id_tok[a->id] = a->content;
        t->is_special[a->id] = (uint8_t)a->special;
        if (a->normalized) {
            rlc_strbuf b = {0};
            normalize(t, a->content, a->len, &b);
            a->norm_len = b.n;
            a->norm_content = rlc_sb_take(&b);
            if (!a->norm_len) rlc_die("%s: added token '%s' normalizes to an empty string", t->name, a->content);
            t->added_first_norm[(unsigned char)a->norm_content[0]] = 1;
            t->n_added_norm++;
        } else {
            t->added_first[(unsigned char)a->content[0]] = 1;
            t->n_added_raw++;
        }
    }
    for (int b = 0; b < 256; b++) {
        char u[4];
        int k = (int)utf8proc_encode_char((utf8proc_int32_t)t->byte_char[b], (utf8proc_uint8_t *)u);
        t->byte_id[b] = tok_strmap_get(&t->vocab, u, (size_t)k);
    }
    // decoded bytes of every id (the ByteLevel decoder maps each char back to its byte; a token with a
    // char outside the table is kept as its UTF-8, as HF's ByteLevel::decode_chain does)
    rlc_strbuf d = {0};
    t->dec_off = rlc_calloc((size_t)t->n_ids + 1, sizeof(uint32_t));
    t->dec_len = rlc_calloc((size_t)t->n_ids + 1, sizeof(uint32_t));
    for (int64_t id = 0; id < t->n_ids; id++) {
        const char *s = t->id_tok[id];
        if (!s) continue;
        size_t n = strlen(s), start = d.n;
        int ok = t->dec_bytelevel;
        if (ok) {
            size_t i = 0;
            while (i < n) {
                uint32_t cp;
                if (!tok_utf8_next(s, n, &i, &cp) || cp >= 512 || t->char_byte[cp] < 0) { ok = 0; break; }
                rlc_sb_putc(&d, (char)t->char_byte[cp]);
            }
        }
        if (!ok) {
            d.n = start;
            rlc_sb_append(&d, s, n);
        }
        CHECK(d.n < UINT32_MAX, "decode table over 4 GiB");
        t->dec_off[id] = (uint32_t)start;
        t->dec_len[id] = (uint32_t)(d.n - start);
    }
    t->dec_n = d.n;
    t->dec_bytes = rlc_sb_take(&d);
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
    char *tcj = rlc_file_exists(tc) ? rlc_read_file(tc, NULL) : NULL;
    char *gcj = rlc_file_exists(gc) ? rlc_read_file(gc, NULL) : NULL;
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
    free(t->is_special);
    tok_chat_free(t);
    tok_cache_free(&t->cache);
    rlc_sb_free(&t->sc_map);
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
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != (double)(int64_t)v->valuedouble)
        rlc_die("%s: %s must be a non-negative integer", file, key);
    return (int32_t)v->valuedouble;
    (void)n_ids;
}

void rlc_tok_apply_config(rlc_tokenizer *t, const char *tcj, const char *tcn, const char *gcj, const char *gcn) {
    t->sp.bos_id = t->sp.eos_id = t->sp.pad_id = -1;
    t->sp.n_stop = 0;
    int32_t gen_eos[16];
    int n_gen_eos = 0;
    int32_t gen_bos = -1, gen_pad = -1;
    if (gcj) {
        cJSON *g = cJSON_ParseWithOpts(gcj, NULL, 1);   // nothing after the object
        if (!g || !cJSON_IsObject(g)) rlc_die("%s: invalid JSON (expected an object)", gcn);
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
        cJSON *c = cJSON_ParseWithOpts(tcj, NULL, 1);
        if (!c || !cJSON_IsObject(c)) rlc_die("%s: invalid JSON (expected an object)", tcn);
        t->sp.eos_id = config_token(t, cJSON_GetObjectItemCaseSensitive(c, "eos_token"), tcn, "eos_token");
        t->sp.bos_id = config_token(t, cJSON_GetObjectItemCaseSensitive(c, "bos_token"), tcn, "bos_token");
        t->sp.pad_id = config_token(t, cJSON_GetObjectItemCaseSensitive(c, "pad_token"), tcn, "pad_token");
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(c, "add_bos_token");
        t->sp.add_bos = cJSON_IsTrue(x);
        x = cJSON_GetObjectItemCaseSensitive(c, "clean_up_tokenization_spaces");
        t->sp.clean_up_spaces = cJSON_IsTrue(x);
        tok_chat_apply_config(t, c, tcn);
        cJSON_Delete(c);
    }
    if (t->sp.eos_id < 0 && n_gen_eos) t->sp.eos_id = gen_eos[0];
    if (t->sp.bos_id < 0) t->sp.bos_id = gen_bos;
    if (t->sp.pad_id < 0) t->sp.pad_id = gen_pad;
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

static void normalize(const rlc_tokenizer *t, const char *p, size_t n, rlc_strbuf *out) {
    rlc_sb_clear(out);
    if (t->n_norm == 0 || n == 0) { rlc_sb_append(out, p, n); return; }
    // NFC fast path: text made only of code points below U+0300 (no byte >= 0xCC) is already NFC
    if (t->n_norm == 1 && t->norm[0] == TOK_NORM_NFC) {
        size_t i = 0;
        while (i < n && (unsigned char)p[i] < 0xCC) i++;
        if (i == n) { rlc_sb_append(out, p, n); return; }
    }
    rlc_strbuf tmp = {0};
    rlc_sb_append(&tmp, p, n);
    for (int k = 0; k < t->n_norm; k++) {
        utf8proc_option_t o = UTF8PROC_STABLE;
        switch (t->norm[k]) {
        case TOK_NORM_NFC: o |= UTF8PROC_COMPOSE; break;
        case TOK_NORM_NFD: o |= UTF8PROC_DECOMPOSE; break;
        case TOK_NORM_NFKC: o |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
        case TOK_NORM_NFKD: o |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
        }
        utf8proc_uint8_t *dst = NULL;
        utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)tmp.s, (utf8proc_ssize_t)tmp.n, &dst, o);
        if (r < 0) rlc_die("normalizer failed: %s", utf8proc_errmsg(r));
        rlc_sb_clear(&tmp);
        rlc_sb_append(&tmp, dst, (size_t)r);
        free(dst);
    }
    rlc_sb_append(out, tmp.s, tmp.n);
    rlc_sb_free(&tmp);
}

// Pre-tokenizer steps from `step` on, then BPE.
static void pretok(rlc_tokenizer *t, int step, const char *p, size_t n, rlc_ivec *out) {
    if (n == 0) return;
    if (step == t->n_steps) { tok_bpe_word(t, p, n, out); return; }
    const tok_pretok_step *st = &t->steps[step];
    if (st->kind == 1) {   // ByteLevel: optional prefix space and GPT-2 regex split; the byte map is in BPE
        if (st->add_prefix_space && p[0] != ' ') {
            // the prefixed copy must outlive the recursion (BPE scratch is separate)
            rlc_strbuf b = {0};
            rlc_sb_putc(&b, ' ');
            rlc_sb_append(&b, p, n);
            if (st->use_regex) {
                int64_t k = tok_split_apply(st, b.s, b.n, &t->sc_spans[step], &t->sc_spans_cap[step]);
                tok_span *sp = rlc_malloc((size_t)(k + 1) * sizeof(tok_span));
                memcpy(sp, t->sc_spans[step], (size_t)k * sizeof(tok_span));
                for (int64_t i = 0; i < k; i++) pretok(t, step + 1, b.s + sp[i].s, (size_t)(sp[i].e - sp[i].s), out);
                free(sp);
            } else {
                pretok(t, step + 1, b.s, b.n, out);
            }
            rlc_sb_free(&b);
            return;
        }
        if (!st->use_regex) { pretok(t, step + 1, p, n, out); return; }
    }
    int64_t k = tok_split_apply(st, p, n, &t->sc_spans[step], &t->sc_spans_cap[step]);
    for (int64_t i = 0; i < k; i++) {
        tok_span sp = t->sc_spans[step][i];   // copy: deeper steps use other scratch levels
        pretok(t, step + 1, p + sp.s, (size_t)(sp.e - sp.s), out);
    }
}

// Leftmost-longest matching of the added tokens of one kind (normalized=0 on raw text, =1 on
// normalized text), with single_word / lstrip / rstrip as HF's AddedVocabulary::find_matches.
// For each gap calls gap(), for each token pushes its id.
typedef void (*gap_fn)(rlc_tokenizer *t, const char *p, size_t n, rlc_ivec *out);

static void split_added(rlc_tokenizer *t, int norm, const char *p, size_t n, gap_fn gap, rlc_ivec *out) {
    const uint8_t *first = norm ? t->added_first_norm : t->added_first;
    if ((norm ? t->n_added_norm : t->n_added_raw) == 0) { gap(t, p, n, out); return; }
    size_t start_off = 0, i = 0;
    while (i < n) {
        if (!first[(unsigned char)p[i]]) { i++; continue; }
        int best = -1;
        size_t blen = 0;
        for (int k = 0; k < t->n_added; k++) {
            const tok_added *a = &t->added[k];
            if (a->normalized != norm) continue;
            const char *c = norm ? a->norm_content : a->content;
            size_t cl = norm ? a->norm_len : a->len;
            if (cl > blen && cl <= n - i && !memcmp(p + i, c, cl)) { best = k; blen = cl; }
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
        if (start_off < s) gap(t, p + start_off, s - start_off, out);
        rlc_iv_push(out, a->id);
        start_off = e;
    }
    if (start_off < n) gap(t, p + start_off, n - start_off, out);
}

static void gap_normalized(rlc_tokenizer *t, const char *p, size_t n, rlc_ivec *out) { pretok(t, 0, p, n, out); }

static void gap_raw(rlc_tokenizer *t, const char *p, size_t n, rlc_ivec *out) {
    if (t->n_norm == 0) { split_added(t, 1, p, n, gap_normalized, out); return; }
    rlc_strbuf nb = {0};
    normalize(t, p, n, &nb);
    split_added(t, 1, nb.s, nb.n, gap_normalized, out);
    rlc_sb_free(&nb);
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
    split_added(t, 0, p, len, gap_raw, out);
    rlc_sb_free(&fixed);
    if (add_special) rlc_iv_append(out, t->post_post, t->n_post_post);
}

void rlc_tok_encode(rlc_tokenizer *t, const char *text, size_t len, rlc_ivec *out) {
    rlc_tok_encode_ex(t, text, len, 0, out);
}

// ---------------------------------------------------------------------------------------------
// decode

// transformers' clean_up_tokenization (applied when tokenizer_config.json asks for it).
static void clean_up_spaces(rlc_strbuf *b, size_t start) {
    static const char *pat[][2] = {{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
                                   {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t k = 0; k < sizeof pat / sizeof pat[0]; k++) {
        const char *from = pat[k][0], *to = pat[k][1];
        size_t fl = strlen(from), tl = strlen(to), r = start, w = start;
        while (r < b->n) {
            if (r + fl <= b->n && !memcmp(b->s + r, from, fl)) {
                memmove(b->s + w, to, tl);
                w += tl;
                r += fl;
            } else {
                b->s[w++] = b->s[r++];
            }
        }
        b->n = w;
        b->s[w] = 0;
    }
}

void rlc_tok_decode(const rlc_tokenizer *t, const int32_t *ids, int64_t n, int skip_special, rlc_strbuf *out) {
    rlc_strbuf raw = {0};
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_ids || !t->id_tok[id]) continue;
        if (skip_special && t->is_special[id]) continue;
        if (!t->dec_bytelevel && k > 0) rlc_sb_putc(&raw, ' ');
        rlc_sb_append(&raw, t->dec_bytes + t->dec_off[id], t->dec_len[id]);
        k++;
    }
    size_t start = out->n;
    if (raw.n) utf8_lossy_append(out, raw.s, raw.n);
    else rlc_sb_reserve(out, 0);
    rlc_sb_free(&raw);
    if (t->sp.clean_up_spaces) clean_up_spaces(out, start);
}

char *rlc_tok_decode_str(const rlc_tokenizer *t, const int32_t *ids, int64_t n, int skip_special) {
    rlc_strbuf b = {0};
    rlc_tok_decode(t, ids, n, skip_special, &b);
    return rlc_sb_take(&b);
}

void rlc_tok_stream_init(rlc_tok_stream *s, int skip_special) {
    memset(s, 0, sizeof *s);
    s->skip_special = skip_special;
}

static size_t stream_feed(rlc_tok_stream *s, const char *p, size_t n, rlc_strbuf *out) {
    size_t before = out->n;
    // complete a pending sequence first, byte by byte
    size_t i = 0;
    while (s->npend > 0 && i < n) {
        s->pend[s->npend++] = (unsigned char)p[i++];
        size_t j = 0;
        uint32_t cp;
        int r = utf8_step(s->pend, (size_t)s->npend, &j, &cp);
        if (r == 1) { rlc_sb_append(out, s->pend, j); }
        else if (r == 0) { rlc_sb_append(out, "\xEF\xBF\xBD", 3); }
        else continue;   // still incomplete
        // bytes after the decoded / rejected prefix go back into the input
        size_t rest = (size_t)s->npend - j;
        i -= rest;
        s->npend = 0;
    }
    // the bulk: everything but a trailing incomplete sequence
    size_t run = i;
    while (i < n) {
        size_t k = i;
        uint32_t cp;
        int r = utf8_step((const unsigned char *)p, n, &i, &cp);
        if (r == 1) continue;
        rlc_sb_append(out, p + run, k - run);
        if (r == 0) {
            rlc_sb_append(out, "\xEF\xBF\xBD", 3);
            run = i;
        } else {   // cut off by the end of this token: keep it for the next one
            memcpy(s->pend, p + k, n - k);
            s->npend = (int)(n - k);
            run = i = n;
        }
    }
    if (run < n) rlc_sb_append(out, p + run, n - run);
    rlc_sb_reserve(out, 0);
    return out->n - before;
}

size_t rlc_tok_stream_push(rlc_tok_stream *s, const rlc_tokenizer *t, int32_t id, rlc_strbuf *out) {
    if (id < 0 || id >= t->n_ids || !t->id_tok[id]) return 0;
    if (s->skip_special && t->is_special[id]) return 0;
    size_t n = 0;
    if (!t->dec_bytelevel && s->n_tokens > 0) n += stream_feed(s, " ", 1, out);
    s->n_tokens++;
    return n + stream_feed(s, t->dec_bytes + t->dec_off[id], t->dec_len[id], out);
}

size_t rlc_tok_stream_finish(rlc_tok_stream *s, rlc_strbuf *out) {
    if (s->npend == 0) return 0;
    s->npend = 0;
    rlc_sb_append(out, "\xEF\xBF\xBD", 3);
    return 3;
}
