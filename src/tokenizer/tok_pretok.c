// tok_pretok.c: the Split pre-tokenizer: Oniguruma patterns rewritten for PCRE2, and HF's split
// behaviours (tokenizers/src/normalizer.rs NormalizedString::split, utils/pattern.rs, onig find_iter).
//
// How patterns are rewritten (rlc_tok_rewrite_regex). HF compiles Split patterns with Oniguruma (Ruby
// syntax, UTF-8). PCRE2 shares that syntax for everything these tokenizers use, except for what the
// shorthand classes mean. With PCRE2_UCP, PCRE2's \s is \p{Xsp} (Z categories + \t\n\v\f\r), which
// lacks U+0085; Oniguruma's \s is the Unicode White_Space property. So, outside and inside [...]:
//   \s -> [\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]
//         (inside a class: the same list without the brackets)
//   \S -> the negated class (not supported inside a class: error)
//   \d -> \p{Nd}, \D -> \P{Nd}
//   \w -> [\p{L}\p{M}\p{Nd}\p{Pc}] (Oniguruma's Unicode word), \W -> its negation (not inside a class)
//   \h, \H (hex digit in Oniguruma, horizontal space in PCRE2) -> error: not supported.
// Everything else is passed through. (?i:...) is left to PCRE2's caseless matching in UTF mode, which
// applies Unicode simple case folding like Oniguruma (so 's' matches U+017F, 'k' matches U+212A).
#include <string.h>

#include "core/common.h"
#include "tokenizer/tok_internal.h"

#define WS_LIST "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
#define WORD_LIST "\\p{L}\\p{M}\\p{Nd}\\p{Pc}"

char *rlc_tok_rewrite_regex(const char *pat, const char *where) {
    rlc_strbuf b = {0};
    int in_class = 0;     // inside [...]
    int class_start = 0;  // just after '[' or '[^' (a ']' here is literal)
    size_t n = strlen(pat);
    for (size_t i = 0; i < n; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < n) {
            char d = pat[++i];
            class_start = 0;
            switch (d) {
            case 's': rlc_sb_puts(&b, in_class ? WS_LIST : "[" WS_LIST "]"); break;
            case 'S':
                if (in_class) rlc_die("%s: regex '%s': \\S inside a character class is not supported", where, pat);
                rlc_sb_puts(&b, "[^" WS_LIST "]");
                break;
            case 'd': rlc_sb_puts(&b, "\\p{Nd}"); break;
            case 'D': rlc_sb_puts(&b, "\\P{Nd}"); break;
            case 'w': rlc_sb_puts(&b, in_class ? WORD_LIST : "[" WORD_LIST "]"); break;
            case 'W':
                if (in_class) rlc_die("%s: regex '%s': \\W inside a character class is not supported", where, pat);
                rlc_sb_puts(&b, "[^" WORD_LIST "]");
                break;
            case 'h':
            case 'H': rlc_die("%s: regex '%s': Oniguruma's \\%c is not supported", where, pat, d);
            default:
                rlc_sb_putc(&b, '\\');
                rlc_sb_putc(&b, d);
            }
            continue;
        }
        if (in_class) {
            if (c == '[' && i + 1 < n && pat[i + 1] == ':') {   // POSIX [:name:]
                const char *e = strstr(pat + i + 2, ":]");
                if (!e) rlc_die("%s: regex '%s': unterminated [: :]", where, pat);
                rlc_sb_append(&b, pat + i, (size_t)(e + 2 - (pat + i)));
                i = (size_t)(e + 1 - pat);
                class_start = 0;
                continue;
            }
            if (c == '[' || (c == '&' && i + 1 < n && pat[i + 1] == '&'))
                rlc_die("%s: regex '%s': nested character classes / class intersection are not supported", where, pat);
            if (c == ']' && !class_start) in_class = 0;
            class_start = 0;
            rlc_sb_putc(&b, c);
            continue;
        }
        if (c == '[') {
            in_class = 1;
            class_start = 1;
            rlc_sb_putc(&b, c);
            if (i + 1 < n && pat[i + 1] == '^') { rlc_sb_putc(&b, '^'); i++; }
            continue;
        }
        rlc_sb_putc(&b, c);
    }
    if (in_class) rlc_die("%s: regex '%s': unterminated character class", where, pat);
    return rlc_sb_take(&b);
}

void tok_step_compile_regex(tok_pretok_step *st, const char *pat, int literal, const char *where) {
    int err;
    PCRE2_SIZE eoff;
    char *p0 = literal ? rlc_strdup(pat) : rlc_tok_rewrite_regex(pat, where), *p = p0;
    if (!literal) {   // the limits ride in the pattern, so every pcre2_match of it (any context) obeys them
        char lim[80];
        snprintf(lim, sizeof lim, "(*LIMIT_MATCH=%d)(*LIMIT_DEPTH=%d)", TOK_REGEX_MATCH_LIMIT, TOK_REGEX_DEPTH_LIMIT);
        p = rlc_malloc(strlen(lim) + strlen(p0) + 1);
        strcpy(p, lim);
        strcat(p, p0);
    }
    rlc_shorten_message(where, st->src, sizeof st->src);
    if (strlen(pat) < sizeof st->pat) strcpy(st->pat, pat);
    else snprintf(st->pat, sizeof st->pat, "%.70s...%s", pat, pat + strlen(pat) - 70);
    uint32_t flags = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    st->re = pcre2_compile((PCRE2_SPTR)p, PCRE2_ZERO_TERMINATED, flags, &err, &eoff, NULL);
    if (!st->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        rlc_die("%s: pre_tokenizer regex '%s' does not compile (as '%s' at offset %zu): %s", where, pat, p0,
                (size_t)eoff - (p != p0 ? strlen(p) - strlen(p0) : 0), (const char *)msg);
    }
    pcre2_jit_compile(st->re, PCRE2_JIT_COMPLETE);   // falls back to the interpreter if JIT is unavailable
    st->md = pcre2_match_data_create_from_pattern(st->re, NULL);
    if (p != p0) free(p);
    free(p0);
}

static void span_push(tok_span **out, int64_t *cap, int64_t *n, int64_t s, int64_t e) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *out = rlc_realloc(*out, (size_t)*cap * sizeof(tok_span));
    }
    (*out)[*n].s = s;
    (*out)[*n].e = e;
    (*n)++;
}

typedef struct { int64_t s, e; int m; } mspan;

int64_t tok_split_apply(const tok_pretok_step *st, const char *p, size_t n, tok_span **out, int64_t *cap) {
    int64_t cnt = 0;
    if (n == 0) return 0;
    // 1. the matches, as Oniguruma's find_iter yields them (an empty match right at the previous
    //    match's end is skipped by advancing one character)
    mspan *ms = NULL;
    int64_t nm = 0, mcap = 0;
    size_t last_end = 0;
    int have_last = 0;
    size_t last_match_end = 0;
    size_t prev = 0;
    // Backtracking budget over the whole piece: BASE + PER_BYTE x n steps (PCRE2's match-limit count). Each
    // search starts with a small limit and doubles it while the limit is hit, so the limit it succeeds with
    // bounds its cost within 2x; half of it is charged. A real pattern costs a few steps per byte; one with
    // nested quantifiers (a*a*b|a) costs steps quadratic in the piece and exhausts the budget early.
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    if (!mc) rlc_die("out of memory creating a regex match context");
    const uint64_t budget = (uint64_t)TOK_REGEX_BASE_STEPS + (uint64_t)TOK_REGEX_STEPS_PER_BYTE * n;
    uint64_t spent = 0;
    while (last_end <= n) {
        uint64_t lim = 64;
        int rc;
        for (;;) {
            pcre2_set_match_limit(mc, (uint32_t)lim);
            rc = pcre2_match(st->re, (PCRE2_SPTR)p, n, last_end, PCRE2_NO_UTF_CHECK, st->md, mc);
            const uint64_t left = spent < budget ? budget - spent : 0;
            if (rc != PCRE2_ERROR_MATCHLIMIT || lim >= left || lim >= TOK_REGEX_MATCH_LIMIT) break;
            lim = 2 * lim < left ? 2 * lim : left;
        }
        if (lim > 64) spent += lim / 2;
        if (rc < 0) {
            if (rc != PCRE2_ERROR_NOMATCH) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof msg);
                rlc_die("%s: pre_tokenizer regex '%s' failed on a %zu-byte piece of text: %s (the pattern backtracks "
                        "too much: budget %d + %d steps per byte, depth %d)", st->src, st->pat, n,
                        (const char *)msg, TOK_REGEX_BASE_STEPS, TOK_REGEX_STEPS_PER_BYTE, TOK_REGEX_DEPTH_LIMIT);
            }
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(st->md);
        size_t s = ov[0], e = ov[1];
        if (s == e && have_last && last_match_end == e) {
            if (last_end >= n) break;
            unsigned char c = (unsigned char)p[last_end];
            last_end += c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            continue;
        }
        last_end = e;
        last_match_end = e;
        have_last = 1;
        if (nm + 2 >= mcap) {
            mcap = mcap ? mcap * 2 : 64;
            ms = rlc_realloc(ms, (size_t)mcap * sizeof(mspan));
        }
        if (prev != s) ms[nm++] = (mspan){(int64_t)prev, (int64_t)s, 0};
        ms[nm++] = (mspan){(int64_t)s, (int64_t)e, 1};
        prev = e;
        if (s == e && e >= n) break;
    }
    pcre2_match_context_free(mc);
    if (prev != n) {
        if (nm + 1 >= mcap) {
            mcap = mcap ? mcap * 2 : 64;
            ms = rlc_realloc(ms, (size_t)mcap * sizeof(mspan));
        }
        ms[nm++] = (mspan){(int64_t)prev, (int64_t)n, 0};
    }
    if (st->invert)
        for (int64_t i = 0; i < nm; i++) ms[i].m = !ms[i].m;
    // 2. the behaviour (pieces flagged m=1 in `res` are removed)
    switch (st->behavior) {
    case TOK_SPLIT_ISOLATED:
        for (int64_t i = 0; i < nm; i++)
            if (ms[i].e > ms[i].s) span_push(out, cap, &cnt, ms[i].s, ms[i].e);
        break;
    case TOK_SPLIT_REMOVED:
        for (int64_t i = 0; i < nm; i++)
            if (!ms[i].m && ms[i].e > ms[i].s) span_push(out, cap, &cnt, ms[i].s, ms[i].e);
        break;
    case TOK_SPLIT_CONTIGUOUS:
    case TOK_SPLIT_MERGED_PREV: {
        // fold left: Contiguous merges runs of equal flags; MergedWithPrevious appends a match to the
        // piece before it (unless that piece was itself a match)
        mspan *acc = rlc_malloc((size_t)(nm + 1) * sizeof(mspan));
        int64_t na = 0;
        int prev_m = 0;
        for (int64_t i = 0; i < nm; i++) {
            int merge = st->behavior == TOK_SPLIT_CONTIGUOUS ? ms[i].m == prev_m : (ms[i].m && !prev_m);
            if (merge && na > 0) acc[na - 1].e = ms[i].e;
            else acc[na++] = ms[i];
            prev_m = ms[i].m;
        }
        for (int64_t i = 0; i < na; i++)
            if (acc[i].e > acc[i].s) span_push(out, cap, &cnt, acc[i].s, acc[i].e);
        free(acc);
        break;
    }
    case TOK_SPLIT_MERGED_NEXT: {
        mspan *acc = rlc_malloc((size_t)(nm + 1) * sizeof(mspan));
        int64_t na = 0;
        int prev_m = 0;
        for (int64_t i = nm - 1; i >= 0; i--) {
            if (ms[i].m && !prev_m && na > 0) acc[na - 1].s = ms[i].s;
            else acc[na++] = ms[i];
            prev_m = ms[i].m;
        }
        for (int64_t i = na - 1; i >= 0; i--)
            if (acc[i].e > acc[i].s) span_push(out, cap, &cnt, acc[i].s, acc[i].e);
        free(acc);
        break;
    }
    default: CHECK(0, "bad split behavior %d", st->behavior);
    }
    free(ms);
    return cnt;
}
