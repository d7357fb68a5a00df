// tok_normalize.c: tokenizer.json normalizers (HF tokenizers/src/normalizers): the Unicode forms
// (NFC, NFD, NFKC, NFKD), Replace (String or Regex pattern), Prepend, Strip, and Sequence of those.
// SentencePiece-converted files use Replace(" " -> "▁") and, in the "legacy" form, Prepend("▁").
#include <cjson/cJSON.h>
#include <string.h>
#include <utf8proc.h>

#include "core/common.h"
#include "tokenizer/tok_internal.h"

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}
static int jbool_def(const cJSON *o, const char *k, int def, const char *name, const char *where) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v)) return def;
    if (!cJSON_IsBool(v)) rlc_die("%s: %s.%s must be true or false", name, where, k);
    return cJSON_IsTrue(v);
}

void tok_load_normalizer(rlc_tokenizer *t, const cJSON *n, int depth) {
    if (!n || cJSON_IsNull(n)) return;
    const cJSON *tyj = cJSON_GetObjectItemCaseSensitive(n, "type");
    const char *ty = cJSON_IsString(tyj) ? tyj->valuestring : NULL;
    if (!ty) rlc_die("%s: normalizer has no \"type\"", t->name);
    if (!strcmp(ty, "Sequence") && depth == 0) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(n, "normalizers"), *it;
        if (!cJSON_IsArray(arr)) rlc_die("%s: normalizer Sequence needs a \"normalizers\" list", t->name);
        cJSON_ArrayForEach(it, arr) tok_load_normalizer(t, it, depth + 1);
        return;
    }
    if (t->n_norm >= 8) rlc_die("%s: more than 8 normalizers", t->name);
    tok_norm_step *st = &t->norm[t->n_norm];
    memset(st, 0, sizeof *st);
    if (!strcmp(ty, "NFC")) st->kind = TOK_NORM_NFC;
    else if (!strcmp(ty, "NFD")) st->kind = TOK_NORM_NFD;
    else if (!strcmp(ty, "NFKC")) st->kind = TOK_NORM_NFKC;
    else if (!strcmp(ty, "NFKD")) st->kind = TOK_NORM_NFKD;
    else if (!strcmp(ty, "Replace")) {
        st->kind = TOK_NORM_REPLACE;
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern");
        const char *lit = pat ? jstr(pat, "String") : NULL, *re = pat ? jstr(pat, "Regex") : NULL;
        const char *content = jstr(n, "content");
        if ((!lit && !re) || !content)
            rlc_die("%s: normalizer Replace needs \"pattern\": {\"String\"|\"Regex\": ...} and a string \"content\"", t->name);
        if (lit) {
            if (!lit[0]) rlc_die("%s: normalizer Replace: empty String pattern", t->name);
            st->pat = rlc_strdup(lit);
            st->pat_len = strlen(lit);
        } else {
            tok_pretok_step tmp = {0};
            tok_step_compile_regex(&tmp, re, 0, t->name);
            st->re = tmp.re;
            st->md = tmp.md;
        }
        st->content = rlc_strdup(content);
        st->content_len = strlen(content);
    } else if (!strcmp(ty, "Prepend")) {
        st->kind = TOK_NORM_PREPEND;
        const char *pre = jstr(n, "prepend");
        if (!pre) rlc_die("%s: normalizer Prepend needs a string \"prepend\"", t->name);
        st->content = rlc_strdup(pre);
        st->content_len = strlen(pre);
    } else if (!strcmp(ty, "Strip")) {
        st->kind = TOK_NORM_STRIP;
        st->left = jbool_def(n, "strip_left", 0, t->name, "normalizer Strip");
        st->right = jbool_def(n, "strip_right", 0, t->name, "normalizer Strip");
    } else {
        rlc_die("%s: unsupported normalizer type '%s' (rlc supports NFC, NFD, NFKC, NFKD, Replace, Prepend, Strip and "
                "Sequence)", t->name, ty);
    }
    t->n_norm++;
}

void tok_norm_free(rlc_tokenizer *t) {
    for (int i = 0; i < t->n_norm; i++) {
        tok_norm_step *st = &t->norm[i];
        free(st->pat);
        free(st->content);
        if (st->md) pcre2_match_data_free(st->md);
        if (st->re) pcre2_code_free(st->re);
    }
    t->n_norm = 0;
}

// One step from `in` into `out` (both cleared by the caller as needed; out starts empty).
static void norm_step(const tok_norm_step *st, const char *p, size_t n, rlc_strbuf *out) {
    switch (st->kind) {
    case TOK_NORM_NFC:
    case TOK_NORM_NFD:
    case TOK_NORM_NFKC:
    case TOK_NORM_NFKD: {
        utf8proc_option_t o = UTF8PROC_STABLE;
        if (st->kind == TOK_NORM_NFC) o |= UTF8PROC_COMPOSE;
        if (st->kind == TOK_NORM_NFD) o |= UTF8PROC_DECOMPOSE;
        if (st->kind == TOK_NORM_NFKC) o |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
        if (st->kind == TOK_NORM_NFKD) o |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
        // NFC fast path: text made only of code points below U+0300 (no byte >= 0xCC) is already NFC
        if (st->kind == TOK_NORM_NFC) {
            size_t i = 0;
            while (i < n && (unsigned char)p[i] < 0xCC) i++;
            if (i == n) { rlc_sb_append(out, p, n); return; }
        }
        utf8proc_uint8_t *dst = NULL;
        utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)p, (utf8proc_ssize_t)n, &dst, o);
        if (r < 0) rlc_die("normalizer failed: %s", utf8proc_errmsg(r));
        rlc_sb_append(out, dst, (size_t)r);
        free(dst);
        return;
    }
    case TOK_NORM_REPLACE: {
        size_t i = 0;
        if (st->pat) {   // non-overlapping occurrences, left to right
            while (i < n) {
                const char *q = n - i >= st->pat_len ? memmem(p + i, n - i, st->pat, st->pat_len) : NULL;
                if (!q) break;
                rlc_sb_append(out, p + i, (size_t)(q - (p + i)));
                rlc_sb_append(out, st->content, st->content_len);
                i = (size_t)(q - p) + st->pat_len;
            }
        } else {   // regex matches (empty matches replace nothing)
            while (i < n) {
                int rc = pcre2_match(st->re, (PCRE2_SPTR)p, n, i, PCRE2_NO_UTF_CHECK, st->md, NULL);
                if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {   // e.g. the compiled-in backtracking limits: never a silent stop
                    PCRE2_UCHAR msg[256];
                    pcre2_get_error_message(rc, msg, sizeof msg);
                    rlc_die("normalizer Replace regex failed on a %zu-byte text: %s (limits %d steps, depth %d)", n,
                            (const char *)msg, TOK_REGEX_MATCH_LIMIT, TOK_REGEX_DEPTH_LIMIT);
                }
                if (rc < 0) break;
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(st->md);
                size_t s = ov[0], e = ov[1];
                if (e == s) {   // an empty match: step over one char
                    if (s >= n) break;
                    unsigned char c = (unsigned char)p[s];
                    size_t k = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
                    if (s + k > n) k = n - s;
                    rlc_sb_append(out, p + i, s + k - i);
                    i = s + k;
                    continue;
                }
                rlc_sb_append(out, p + i, s - i);
                rlc_sb_append(out, st->content, st->content_len);
                i = e;
            }
        }
        if (i < n) rlc_sb_append(out, p + i, n - i);
        return;
    }
    case TOK_NORM_PREPEND:
        if (n) rlc_sb_append(out, st->content, st->content_len);   // nothing on an empty string
        rlc_sb_append(out, p, n);
        return;
    case TOK_NORM_STRIP: {
        size_t s = 0, e = n;
        if (st->left)
            while (s < e) {
                size_t j = s;
                uint32_t cp;
                tok_utf8_next(p, e, &j, &cp);
                if (!tok_is_white_space(cp)) break;
                s = j;
            }
        if (st->right)
            while (e > s) {
                size_t k = e - 1;
                while (k > s && ((unsigned char)p[k] & 0xC0) == 0x80) k--;
                size_t j = k;
                uint32_t cp;
                tok_utf8_next(p, e, &j, &cp);
                if (!tok_is_white_space(cp)) break;
                e = k;
            }
        rlc_sb_append(out, p + s, e - s);
        return;
    }
    default: CHECK(0, "bad normalizer kind %d", st->kind);
    }
}

void tok_normalize(rlc_tokenizer *t, const char *p, size_t n, rlc_strbuf *out) {
    rlc_sb_clear(out);
    if (t->n_norm == 0 || n == 0) { rlc_sb_append(out, p, n); rlc_sb_reserve(out, 0); return; }
    if (t->n_norm == 1) { norm_step(&t->norm[0], p, n, out); rlc_sb_reserve(out, 0); return; }
    rlc_strbuf *a = &t->sc_na, *b = &t->sc_nb;
    rlc_sb_clear(a);
    rlc_sb_append(a, p, n);
    for (int k = 0; k < t->n_norm; k++) {
        rlc_sb_clear(b);
        norm_step(&t->norm[k], a->s, a->n, b);
        rlc_sb_reserve(b, 0);
        rlc_strbuf *tmp = a;
        a = b;
        b = tmp;
    }
    rlc_sb_append(out, a->s, a->n);
    rlc_sb_reserve(out, 0);
}
