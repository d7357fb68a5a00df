// tmpl_lex.c: the jinja2 lexer with transformers' settings. Newlines (\r\n, \r) become \n and one trailing
// newline is dropped (keep_trailing_newline=False); `{%- -%}` strip whitespace beside a tag;
// trim_blocks drops the first newline after a block or comment tag; lstrip_blocks drops the spaces and
// tabs between a line's start and a block or comment tag (not `{{`), unless the tag opens with `{%+`.
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "template/tmpl_internal.h"

typedef struct {
    tm_arena *a;
    const char *src;   // normalized source
    size_t n, pos;
    int line;
    const char *name;
    rlc_strbuf *err;
    tm_tok *toks;
    int ntoks, cap;
    int failed;
} lexer;

static int lex_fail(lexer *L, const char *fmt, ...) {
    if (L->failed) return -1;
    L->failed = 1;
    rlc_sb_printf(L->err, "%s:%d: ", L->name, L->line);
    va_list ap;
    va_start(ap, fmt);
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tm_puts(L->err, buf);
    return -1;
}

static tm_tok *push(lexer *L, int type, const char *s, size_t n) {
    if (L->ntoks == L->cap) {
        int nc = L->cap ? L->cap * 2 : 256;
        tm_tok *t = tm_alloc(L->a, (size_t)nc * sizeof *t);
        if (L->ntoks) memcpy(t, L->toks, (size_t)L->ntoks * sizeof *t);
        L->toks = t;
        L->cap = nc;
    }
    tm_tok *t = &L->toks[L->ntoks++];
    memset(t, 0, sizeof *t);
    t->type = type;
    t->line = L->line;
    t->s = s;
    t->n = n;
    return t;
}

// Python's str.isspace() for the ASCII range (what \s and str.strip() match in template text)
static int is_ws(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

static int count_nl(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

// Text before a tag at `tag` (the '{'), with the tag's strip sign applied. line_starting: the previous
// token ended a line (or this is the template's start).
static void push_data(lexer *L, size_t from, size_t to, char sign, int lstrip_ok, int line_starting) {
    const char *s = L->src + from;
    size_t n = to - from;
    int line0 = L->line;
    if (sign == '-') {
        while (n && is_ws((unsigned char)s[n - 1])) n--;
    } else if (sign != '+' && lstrip_ok) {
        size_t l = n;
        while (l && s[l - 1] != '\n') l--;
        if (l > 0 || line_starting) {
            size_t k = l;
            while (k < n && is_ws((unsigned char)s[k]) && s[k] != '\n') k++;
            if (k == n) n = l;
        }
    }
    if (n) push(L, T_DATA, s, n);
    L->line = line0 + count_nl(L->src + from, to - from);
}

// A string literal's body as Python decodes it (unicode-escape after backslashreplace).
static int decode_string(lexer *L, const char *s, size_t n, char **out, size_t *out_n) {
    char *o = tm_alloc(L->a, n + 1), *p = o;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 == n) { *p++ = s[i]; continue; }
        char e = s[++i];
        uint32_t cp = 0;
        int hex = 0;
        switch (e) {
        case '\n': continue;
        case '\\': *p++ = '\\'; continue;
        case '\'': *p++ = '\''; continue;
        case '"': *p++ = '"'; continue;
        case 'a': *p++ = '\a'; continue;
        case 'b': *p++ = '\b'; continue;
        case 'f': *p++ = '\f'; continue;
        case 'n': *p++ = '\n'; continue;
        case 'r': *p++ = '\r'; continue;
        case 't': *p++ = '\t'; continue;
        case 'v': *p++ = '\v'; continue;
        case 'x': hex = 2; break;
        case 'u': hex = 4; break;
        case 'U': hex = 8; break;
        case 'N': return lex_fail(L, "string escape \\N{...} is not supported");
        default:
            if (e >= '0' && e <= '7') {
                int k = 0;
                while (k < 3 && i < n && s[i] >= '0' && s[i] <= '7') cp = cp * 8 + (uint32_t)(s[i++] - '0'), k++;
                i--;
                hex = -1;
            } else {
                *p++ = '\\';
                *p++ = e;
                continue;
            }
        }
        if (hex > 0) {
            for (int k = 0; k < hex; k++) {
                char h = i + 1 < n ? s[i + 1] : 0;
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0) return lex_fail(L, "truncated \\%c escape in a string literal", e);
                cp = cp * 16 + (uint32_t)d;
                i++;
            }
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return lex_fail(L, "string escape U+%X is not a Unicode scalar value", cp);
        if (cp < 0x80) *p++ = (char)cp;
        else if (cp < 0x800) { *p++ = (char)(0xC0 | cp >> 6); *p++ = (char)(0x80 | (cp & 63)); }
        else if (cp < 0x10000) { *p++ = (char)(0xE0 | cp >> 12); *p++ = (char)(0x80 | (cp >> 6 & 63)); *p++ = (char)(0x80 | (cp & 63)); }
        else { *p++ = (char)(0xF0 | cp >> 18); *p++ = (char)(0x80 | (cp >> 12 & 63)); *p++ = (char)(0x80 | (cp >> 6 & 63)); *p++ = (char)(0x80 | (cp & 63)); }
    }
    *p = 0;
    *out = o;
    *out_n = (size_t)(p - o);
    return 0;
}

static int starts(const lexer *L, size_t at, const char *s) {
    size_t k = strlen(s);
    return at + k <= L->n && !memcmp(L->src + at, s, k);
}

// Tokens inside {{ }} or {% %} up to the end tag. Returns 0, or -1 on error. *line_starting is set from
// whether the end-tag match ended with a newline.
static int lex_tag(lexer *L, int block, int *line_starting) {
    char bal[64];
    int nb = 0;
    const char close = block ? '%' : '}';
    for (;;) {
        size_t p = L->pos;
        // end tag (only when brackets are balanced)
        if (nb == 0) {
            int minus = p + 2 < L->n && L->src[p] == '-' && L->src[p + 1] == close && L->src[p + 2] == '}';
            int plus = block && starts(L, p, "+%}");
            int plain = p + 1 < L->n && L->src[p] == close && L->src[p + 1] == '}';
            if (minus || plus || plain) {
                push(L, block ? T_BLOCK_END : T_VAR_END, L->src + p, 2);
                size_t q = p + (minus || plus ? 3 : 2);
                size_t e = q;
                if (minus) while (e < L->n && is_ws((unsigned char)L->src[e])) e++;
                else if (plain && block && e < L->n && L->src[e] == '\n') e++;
                L->line += count_nl(L->src + q, e - q);
                *line_starting = e > p && L->src[e - 1] == '\n';
                L->pos = e;
                return 0;
            }
        }
        if (p >= L->n) return lex_fail(L, "unexpected end of template, expected '%s'", block ? "%}" : "}}");
        unsigned char ch = (unsigned char)L->src[p];
        if (is_ws(ch)) {
            if (ch == '\n') L->line++;
            L->pos++;
            continue;
        }
        if (ch == '_' || ((ch | 32) >= 'a' && (ch | 32) <= 'z')) {
            size_t e = p;
            while (e < L->n && (L->src[e] == '_' || ((L->src[e] | 32) >= 'a' && (L->src[e] | 32) <= 'z') ||
                                (L->src[e] >= '0' && L->src[e] <= '9')))
                e++;
            push(L, T_NAME, tm_strndup(L->a, L->src + p, e - p), e - p);
            L->pos = e;
            continue;
        }
        if (ch >= '0' && ch <= '9') {
            size_t e = p;
            int is_float = 0;
            while (e < L->n && ((L->src[e] >= '0' && L->src[e] <= '9') || L->src[e] == '_')) e++;
            if (e + 1 < L->n && L->src[e] == '.' && L->src[e + 1] >= '0' && L->src[e + 1] <= '9') {
                is_float = 1;
                e++;
                while (e < L->n && ((L->src[e] >= '0' && L->src[e] <= '9') || L->src[e] == '_')) e++;
            }
            if (e < L->n && (L->src[e] | 32) == 'e') {
                size_t f = e + 1;
                if (f < L->n && (L->src[f] == '+' || L->src[f] == '-')) f++;
                if (f < L->n && L->src[f] >= '0' && L->src[f] <= '9') {
                    is_float = 1;
                    e = f;
                    while (e < L->n && L->src[e] >= '0' && L->src[e] <= '9') e++;
                }
            }
            char buf[128];
            size_t k = 0;
            for (size_t i = p; i < e && k < sizeof buf - 1; i++)
                if (L->src[i] != '_') buf[k++] = L->src[i];
            buf[k] = 0;
            tm_tok *t = push(L, is_float ? T_FLOAT : T_INT, L->src + p, e - p);
            if (is_float) t->f = strtod(buf, NULL);
            else {
                char *end;
                errno = 0;
                t->i = strtoll(buf, &end, 10);
                if (errno) return lex_fail(L, "integer literal %s does not fit in 64 bits", buf);
            }
            L->pos = e;
            continue;
        }
        if (ch == '\'' || ch == '"') {
            size_t e = p + 1;
            while (e < L->n && L->src[e] != (char)ch) e += L->src[e] == '\\' ? 2 : 1;
            if (e >= L->n) return lex_fail(L, "unterminated string literal");
            char *s = NULL;
            size_t sn = 0;
            if (decode_string(L, L->src + p + 1, e - p - 1, &s, &sn)) return -1;
            push(L, T_STRING, s, sn);
            L->line += count_nl(L->src + p, e - p);
            L->pos = e + 1;
            continue;
        }
        static const char *const OPS2[] = {"//", "**", "==", "!=", ">=", "<="};
        int k = 0;
        for (int i = 0; i < 6; i++)
            if (starts(L, p, OPS2[i])) k = 2;
        if (!k) {
            if (!strchr("+-/*%~[](){}><=.:|,;", ch)) return lex_fail(L, "unexpected character '%c' in a tag", ch);
            k = 1;
            if (ch == '(' || ch == '[' || ch == '{') {
                if (nb == (int)sizeof bal) return lex_fail(L, "brackets nested too deeply");
                bal[nb++] = ch == '(' ? ')' : ch == '[' ? ']' : '}';
            } else if (ch == ')' || ch == ']' || ch == '}') {
                if (!nb) return lex_fail(L, "unexpected '%c'", ch);
                if (bal[nb - 1] != (char)ch) return lex_fail(L, "unexpected '%c', expected '%c'", ch, bal[nb - 1]);
                nb--;
            }
        }
        push(L, T_OP, L->src + p, (size_t)k);
        L->pos = p + (size_t)k;
    }
}

// {% raw %}: if a raw tag starts at `at` ("{%"), returns the position after its end tag, else 0.
static size_t raw_tag(const lexer *L, size_t at, const char *word, int *strip_after, char *sign) {
    size_t p = at + 2;
    *sign = 0;
    if (p < L->n && (L->src[p] == '-' || L->src[p] == '+')) *sign = L->src[p++];
    while (p < L->n && is_ws((unsigned char)L->src[p])) p++;
    size_t k = strlen(word);
    if (!starts(L, p, word)) return 0;
    p += k;
    while (p < L->n && is_ws((unsigned char)L->src[p])) p++;
    *strip_after = 0;
    if (starts(L, p, "-%}")) { *strip_after = 1; return p + 3; }
    if (starts(L, p, "+%}")) return p + 3;
    if (starts(L, p, "%}")) { *strip_after = 2; return p + 2; }
    return 0;
}

int tm_lex(tm_arena *a, const char *src0, size_t n0, const char *name, tm_tok **toks, int *ntoks, rlc_strbuf *err) {
    // newline normalization and the dropped trailing newline
    char *src = tm_alloc(a, n0 + 1);
    size_t n = 0;
    for (size_t i = 0; i < n0; i++) {
        if (src0[i] == '\r') {
            src[n++] = '\n';
            if (i + 1 < n0 && src0[i + 1] == '\n') i++;
        } else {
            src[n++] = src0[i];
        }
    }
    if (n && src[n - 1] == '\n') n--;
    src[n] = 0;
    lexer L = {.a = a, .src = src, .n = n, .line = 1, .name = name, .err = err};
    int line_starting = 1;
    while (L.pos < L.n) {
        // next tag start
        size_t t = L.pos;
        const char *hit = NULL;
        while (t + 1 < L.n) {
            hit = memchr(L.src + t, '{', L.n - t - 1);
            if (!hit) break;
            t = (size_t)(hit - L.src);
            char c2 = L.src[t + 1];
            if (c2 == '%' || c2 == '{' || c2 == '#') break;
            t++;
            hit = NULL;
        }
        if (!hit) {
            push_data(&L, L.pos, L.n, 0, 0, 0);
            L.pos = L.n;
            break;
        }
        char kind = L.src[t + 1];
        char sign = t + 2 < L.n && (L.src[t + 2] == '-' || L.src[t + 2] == '+') ? L.src[t + 2] : 0;
        if (kind == '%') {
            int strip_after;
            char rsign;
            size_t after = raw_tag(&L, t, "raw", &strip_after, &rsign);
            if (after) {
                push_data(&L, L.pos, t, rsign, 1, line_starting);
                L.line += count_nl(L.src + t, after - t);
                size_t body = after;
                if (strip_after == 1) while (body < L.n && is_ws((unsigned char)L.src[body])) body++;
                L.line += count_nl(L.src + after, body - after);
                // find {% endraw %}
                size_t q = body, end = 0;
                for (; q + 1 < L.n; q++) {
                    if (L.src[q] == '{' && L.src[q + 1] == '%' && (end = raw_tag(&L, q, "endraw", &strip_after, &rsign)))
                        break;
                }
                if (!end) { L.pos = body; return lex_fail(&L, "missing end of raw directive"), -1; }
                push_data(&L, body, q, rsign, 1, 0);
                L.line += count_nl(L.src + q, end - q);
                if (strip_after == 1) while (end < L.n && is_ws((unsigned char)L.src[end])) { L.line += L.src[end] == '\n'; end++; }
                else if (strip_after == 2 && end < L.n && L.src[end] == '\n') { L.line++; end++; }
                line_starting = L.src[end - 1] == '\n';
                L.pos = end;
                continue;
            }
        }
        push_data(&L, L.pos, t, sign, kind != '{', line_starting);
        size_t body = t + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            const char *e = NULL;
            for (size_t q = body; q + 1 < L.n; q++)
                if (L.src[q] == '#' && L.src[q + 1] == '}') { e = L.src + q; break; }
            if (!e) return lex_fail(&L, "missing end of comment tag");
            size_t q = (size_t)(e - L.src), end = q + 2;
            char esign = q > body ? L.src[q - 1] : 0;
            if (esign == '-') while (end < L.n && is_ws((unsigned char)L.src[end])) end++;
            else if (esign != '+' && end < L.n && L.src[end] == '\n') end++;
            L.line += count_nl(L.src + t, end - t);
            line_starting = L.src[end - 1] == '\n';
            L.pos = end;
            continue;
        }
        push(&L, kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, L.src + t, 2);
        L.pos = body;
        if (lex_tag(&L, kind == '%', &line_starting)) return -1;
    }
    if (L.failed) return -1;
    push(&L, T_EOF, "", 0);
    *toks = L.toks;
    *ntoks = L.ntoks;
    return 0;
}
