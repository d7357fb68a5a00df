// tmpl_value.c: template values with Python semantics: the arena, lists and dicts, truthiness, equality
// and ordering, str() and repr(), float repr, and json.dumps as transformers' tojson calls it.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/common.h"
#include "core/json.h"
#include "template/tmpl_internal.h"

void *tm_alloc_slow(tm_arena *a, size_t n) {
    tm_chunk *c = a->head;
    size_t cap = c ? (c->cap < ((size_t)1 << 20) ? c->cap * 2 : c->cap) : 16384;   // 16 KB, doubling to 1 MB
    if (cap < n) cap = n;
    c = rlc_malloc(sizeof *c + cap);
    c->cap = cap;
    c->used = n;
    c->next = a->head;
    a->head = c;
    return c->mem;
}
char *tm_strndup(tm_arena *a, const char *s, size_t n) {
    char *p = tm_alloc_raw(a, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}
void tm_arena_free(tm_arena *a) {
    tm_chunk *c = a->head;
    while (c) {
        tm_chunk *nx = c->next;
        if (c != a->borrowed) free(c);
        c = nx;
    }
    a->head = NULL;
}

tv_list *tm_list_new(tm_arena *a, size_t cap) {
    tv_list *l = tm_alloc(a, sizeof *l);
    if (cap) l->v = tm_alloc_raw(a, cap * sizeof(tv));   // only the first n are ever read
    l->cap = cap;
    return l;
}
void tm_list_push(tm_arena *a, tv_list *l, tv v) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 8;
        tv *nv = tm_alloc_raw(a, nc * sizeof(tv));
        if (l->n) memcpy(nv, l->v, l->n * sizeof(tv));
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = v;
}
tv_dict *tm_dict_new(tm_arena *a, size_t cap) {
    tv_dict *d = tm_alloc(a, sizeof *d);
    if (cap) {
        d->k = tm_alloc_raw(a, 2 * cap * sizeof(tv));   // only the first n are ever read
        d->v = d->k + cap;
    }
    d->cap = cap;
    return d;
}
tv *tm_dict_getv(const tv_dict *d, tv k) {
    for (size_t i = 0; i < d->n; i++)
        if (tm_equal(d->k[i], k)) return &d->v[i];
    return NULL;
}
tv *tm_dict_get(const tv_dict *d, const char *k, size_t n) {
    // the first byte is compared inline: most keys differ there, sparing a memcmp call per key
    for (size_t i = 0; i < d->n; i++) {
        const tv *e = &d->k[i];
        if (e->kind == TV_STR && e->n == n && (n == 0 || (e->u.s[0] == k[0] && !memcmp(e->u.s + 1, k + 1, n - 1))))
            return &d->v[i];
    }
    return NULL;
}
void tm_dict_set(tm_arena *a, tv_dict *d, tv k, tv v) {
    tv *e = tm_dict_getv(d, k);
    if (e) { *e = v; return; }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 8;
        tv *nk = tm_alloc_raw(a, 2 * nc * sizeof(tv)), *nv = nk + nc;
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(tv));
            memcpy(nv, d->v, d->n * sizeof(tv));
        }
        d->k = nk;
        d->v = nv;
        d->cap = nc;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

// A JSON scalar as a value (1), or 0 for an array or object. Inline: most values of a conversation are
// strings, converted without a call.
static inline int cjson_scalar(const cJSON *j, tv *out) {
    switch (j->type & 0xFF) {   // the type bits, read directly: this runs for every value of every render
    case cJSON_String: case cJSON_Raw: *out = tv_str(j->valuestring, strlen(j->valuestring)); return 1;
    case cJSON_NULL: *out = tv_none(); return 1;
    case cJSON_True: *out = tv_bool(1); return 1;
    case cJSON_False: *out = tv_bool(0); return 1;
    case cJSON_Number: {
        double d = j->valuedouble;
        *out = !(j->type & RLC_JSON_FLOAT) && d == floor(d) && fabs(d) < 9007199254740992.0 ? tv_int((int64_t)d)
                                                                                            : tv_float(d);
        return 1;
    }
    case cJSON_Array: case cJSON_Object: return 0;
    default: *out = tv_none(); return 1;
    }
}

tv tm_from_cjson(tm_arena *a, const cJSON *j) {
    tv r;
    if (!j) return tv_none();
    if (cjson_scalar(j, &r)) return r;
    size_t n = 0;
    const cJSON *it;
    for (it = j->child; it; it = it->next) n++;
    if ((j->type & 0xFF) == cJSON_Array) {   // the arrays are filled right away: allocated unzeroed
        tv_list *l = tm_alloc(a, sizeof *l);
        l->v = tm_alloc_raw(a, n * sizeof(tv));
        l->cap = n;
        for (it = j->child; it; it = it->next)
            if (!cjson_scalar(it, &l->v[l->n++])) l->v[l->n - 1] = tm_from_cjson(a, it);
        return tv_listv(l);
    }
    tv_dict *d = tm_alloc(a, sizeof *d);
    d->k = tm_alloc_raw(a, 2 * n * sizeof(tv));
    d->v = d->k + n;
    d->cap = n;
    for (it = j->child; it; it = it->next) {
        size_t kn = strlen(it->string);
        tv v;
        if (!cjson_scalar(it, &v)) v = tm_from_cjson(a, it);
        tv *dup = d->n ? tm_dict_get(d, it->string, kn) : NULL;
        if (dup) *dup = v;   // a repeated key: the last wins, as json.loads does
        else {
            d->k[d->n] = tv_str(it->string, kn);
            d->v[d->n++] = v;
        }
    }
    return tv_dictv(d);
}

static int is_num(tv v) { return v.kind == TV_BOOL || v.kind == TV_INT || v.kind == TV_FLOAT; }
static double num_f(tv v) { return v.kind == TV_FLOAT ? v.u.f : (double)v.u.i; }

int tm_equal(tv a, tv b) {
    if (is_num(a) && is_num(b)) {
        if (a.kind != TV_FLOAT && b.kind != TV_FLOAT) return a.u.i == b.u.i;
        return num_f(a) == num_f(b);
    }
    if (a.kind != b.kind) return 0;
    switch (a.kind) {
    case TV_UNDEF: case TV_NONE: return 1;
    case TV_STR: return a.n == b.n && !memcmp(a.u.s, b.u.s, a.n);
    case TV_LIST:
        if (a.u.l->n != b.u.l->n || a.u.l->tuple != b.u.l->tuple) return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!tm_equal(a.u.l->v[i], b.u.l->v[i])) return 0;
        return 1;
    case TV_DICT:
        if (a.u.d->ns || b.u.d->ns) return a.u.d == b.u.d;
        if (a.u.d->n != b.u.d->n) return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            tv *o = tm_dict_getv(b.u.d, a.u.d->k[i]);
            if (!o || !tm_equal(a.u.d->v[i], *o)) return 0;
        }
        return 1;
    case TV_FUNC: return a.u.fn == b.u.fn;
    case TV_LOOP: return a.u.loop == b.u.loop;
    }
    return 0;
}

const char *tm_type_name(tv v) {
    switch (v.kind) {
    case TV_UNDEF: return "Undefined";
    case TV_NONE: return "NoneType";
    case TV_BOOL: return "bool";
    case TV_INT: return "int";
    case TV_FLOAT: return "float";
    case TV_STR: return "str";
    case TV_LIST: return v.u.l->tuple ? "tuple" : "list";
    case TV_DICT: return v.u.d->ns ? "Namespace" : "dict";
    case TV_FUNC: return v.u.fn->macro ? "Macro" : "builtin_function_or_method";
    case TV_LOOP: return "LoopContext";
    }
    return "object";
}

int tm_compare(tm_ctx *c, tv a, tv b) {
    if (a.kind == TV_UNDEF) tm_undef_fail(c, a);
    if (b.kind == TV_UNDEF) tm_undef_fail(c, b);
    if (is_num(a) && is_num(b)) {
        if (a.kind != TV_FLOAT && b.kind != TV_FLOAT) return (a.u.i > b.u.i) - (a.u.i < b.u.i);
        double x = num_f(a), y = num_f(b);
        return (x > y) - (x < y);
    }
    if (a.kind == TV_STR && b.kind == TV_STR) {   // code-point order == UTF-8 byte order
        size_t n = a.n < b.n ? a.n : b.n;
        int r = memcmp(a.u.s, b.u.s, n);
        if (r) return r < 0 ? -1 : 1;
        return (a.n > b.n) - (a.n < b.n);
    }
    if (a.kind == TV_LIST && b.kind == TV_LIST) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (tm_equal(a.u.l->v[i], b.u.l->v[i])) continue;
            return tm_compare(c, a.u.l->v[i], b.u.l->v[i]);
        }
        return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
    }
    tm_raise(c, "'<' not supported between instances of '%s' and '%s'", tm_type_name(a), tm_type_name(b));
}

int64_t tm_str_len_cp(const char *s, size_t n) {
    int64_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

// The shortest decimal M * 10^e (1 <= M < 10^15) that reads back as f, as M's digits and the decimal
// exponent of its first digit; 0 if none has 15 digits or fewer (or 10^e would not be an exact double).
// Fewest digits first: for d digits, M is the integer nearest |f| scaled to d digits, the closest of them
// to f. M and 10^|e| are exact doubles, so M * 10^e and M / 10^-e are correctly rounded, as strtod reads
// the decimal; with M < 10^15 < 2^50 no other d-digit integer can read back as f.
static int short_decimal(double f, char digits[32], int *nd, int *exp) {
    static const double P10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                   1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    double a = fabs(f);
    if (!(a >= 1e-300 && a < 1e300)) return 0;
    int e10 = (int)floor(log10(a));   // may be one off next to a power of ten: one digit count more is tried
    for (int d = 0; d <= 15; d++) {
        int sc = d - 1 - e10;   // a * 10^sc has about d digits before the point
        if (sc > 22 || sc < -22) return 0;
        double m = nearbyint(sc >= 0 ? a * P10[sc] : a / P10[-sc]);
        if (m >= 1e15) return 0;
        if (m < 1 || (sc >= 0 ? m / P10[sc] : m * P10[-sc]) != a) continue;
        char tmp[24], *q = tmp + sizeof tmp;
        uint64_t u = (uint64_t)m;
        do { *--q = (char)('0' + u % 10); u /= 10; } while (u);
        int len = (int)(tmp + sizeof tmp - q);
        memcpy(digits, q, (size_t)len);
        *nd = len;
        *exp = len - 1 - sc;
        return 1;
    }
    return 0;
}

// Python float repr: the shortest string that round-trips, fixed notation for 1e-4 <= |x| < 1e16
void tm_fmt_float(double f, char buf[40]) {
    if (isnan(f)) { strcpy(buf, "nan"); return; }
    if (isinf(f)) { strcpy(buf, f < 0 ? "-inf" : "inf"); return; }
    char digits[32];
    int nd = 0, neg = signbit(f) != 0, exp;
    if (!short_decimal(f, digits, &nd, &exp)) {
        char tmp[40];
        int prec;
        // the 15-digit rounding, trailing zeros dropped, is the shortest form when it round-trips (every
        // decimal of <= 15 digits survives the trip through a double); else 16 or 17 digits
        for (prec = fabs(f) < 2.2250738585072014e-308 ? 1 : 15; prec <= 17; prec++) {   // subnormals: fewer digits
            snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
            if (strtod(tmp, NULL) == f) break;
        }
        // tmp = d.ddddde[+-]XX ; digits and exponent
        const char *p = tmp + (tmp[0] == '-');
        for (; *p && *p != 'e'; p++)
            if (*p >= '0' && *p <= '9') digits[nd++] = *p;
        exp = atoi(p + 1);
    }
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char *o = buf;
    if (neg) *o++ = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -exp - 1; i++) *o++ = '0';
            for (int i = 0; i < nd; i++) *o++ = digits[i];
        } else {
            for (int i = 0; i <= exp; i++) *o++ = i < nd ? digits[i] : '0';
            *o++ = '.';
            if (nd > exp + 1) for (int i = exp + 1; i < nd; i++) *o++ = digits[i];
            else *o++ = '0';
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++) *o++ = digits[i];
        }
        sprintf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

static void put_int(rlc_strbuf *o, int64_t i) {
    char buf[24], *p = buf + sizeof buf;
    uint64_t u = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;
    do { *--p = (char)('0' + u % 10); u /= 10; } while (u);
    if (i < 0) *--p = '-';
    tm_put(o, p, (size_t)(buf + sizeof buf - p));
}

// Python str.isprintable() for one code point
static int cp_printable(int32_t cp) {
    if (cp == ' ') return 1;
    utf8proc_category_t k = utf8proc_category(cp);
    return !(k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CS ||
             k == UTF8PROC_CATEGORY_CO || k == UTF8PROC_CATEGORY_CN || k == UTF8PROC_CATEGORY_ZL ||
             k == UTF8PROC_CATEGORY_ZP || k == UTF8PROC_CATEGORY_ZS);
}

static void repr_str(const char *s, size_t n, rlc_strbuf *o) {
    char q = '\'';
    if (memchr(s, '\'', n) && !memchr(s, '"', n)) q = '"';
    tm_putc(o, q);
    size_t i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) { cp = (unsigned char)s[i]; k = 1; }
        if (cp == q || cp == '\\') { tm_putc(o, '\\'); tm_putc(o, (char)cp); }
        else if (cp == '\t') tm_puts(o, "\\t");
        else if (cp == '\n') tm_puts(o, "\\n");
        else if (cp == '\r') tm_puts(o, "\\r");
        else if (cp < 0x80 && (cp < 0x20 || cp == 0x7f)) rlc_sb_printf(o, "\\x%02x", cp);
        else if (cp >= 0x80 && !cp_printable(cp)) {
            if (cp < 0x100) rlc_sb_printf(o, "\\x%02x", cp);
            else if (cp < 0x10000) rlc_sb_printf(o, "\\u%04x", cp);
            else rlc_sb_printf(o, "\\U%08x", cp);
        } else tm_put(o, s + i, (size_t)k);
        i += (size_t)k;
    }
    tm_putc(o, q);
}

static void repr_depth(tm_ctx *c, tv v, rlc_strbuf *o, int depth);
void tm_repr(tm_ctx *c, tv v, rlc_strbuf *o) { repr_depth(c, v, o, 0); }

static void repr_depth(tm_ctx *c, tv v, rlc_strbuf *o, int depth) {
    if (depth > 200) tm_raise(c, "value nested too deeply to print (a namespace that contains itself?)");
    switch (v.kind) {
    case TV_STR: repr_str(v.u.s, v.n, o); return;
    case TV_LIST: {
        tv_list *l = v.u.l;
        tm_putc(o, l->tuple ? '(' : '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i) tm_puts(o, ", ");
            repr_depth(c, l->v[i], o, depth + 1);
        }
        if (l->tuple && l->n == 1) tm_putc(o, ',');
        tm_putc(o, l->tuple ? ')' : ']');
        return;
    }
    case TV_DICT: {
        tv_dict *d = v.u.d;
        if (d->ns) tm_puts(o, "<Namespace ");
        tm_putc(o, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i) tm_puts(o, ", ");
            repr_depth(c, d->k[i], o, depth + 1);
            tm_puts(o, ": ");
            repr_depth(c, d->v[i], o, depth + 1);
        }
        tm_putc(o, '}');
        if (d->ns) tm_putc(o, '>');
        return;
    }
    case TV_UNDEF: tm_puts(o, "Undefined"); return;
    default: tm_to_str(c, v, o);
    }
}

void tm_to_str(tm_ctx *c, tv v, rlc_strbuf *o) {
    char buf[40];
    switch (v.kind) {
    case TV_UNDEF: return;
    case TV_NONE: tm_puts(o, "None"); return;
    case TV_BOOL: tm_puts(o, v.u.i ? "True" : "False"); return;
    case TV_INT: put_int(o, v.u.i); return;
    case TV_FLOAT: tm_fmt_float(v.u.f, buf); tm_puts(o, buf); return;
    case TV_STR: tm_put(o, v.u.s, v.n); return;
    case TV_LIST: case TV_DICT: tm_repr(c, v, o); return;
    case TV_FUNC: rlc_sb_printf(o, "<%s %s>", v.u.fn->macro ? "Macro" : "built-in function", v.u.fn->name); return;
    case TV_LOOP: tm_puts(o, "<LoopContext>"); return;
    }
}

tv tm_str_of(tm_ctx *c, tv v) {
    if (v.kind == TV_STR) return v;
    rlc_strbuf sb = {0};
    tm_to_str(c, v, &sb);
    tv r = tv_str(tm_strndup(&c->arena, sb.s ? sb.s : "", sb.n), sb.n);
    rlc_sb_free(&sb);
    return r;
}

// The bytes of an 8-byte word (little-endian load) that json.dumps escapes: control characters, '"' and '\\'
// each mark their byte's top bit. The borrows of the subtractions can only mark a byte above a real one, so
// the lowest mark is exact.
static inline uint64_t json_word_hits(uint64_t x) {
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    return (((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b)) & high;
}
static inline int json_byte_escaped(unsigned char ch) { return ch < 0x20 || ch == '"' || ch == '\\'; }

// the index of the first byte of s[i..n) that needs an escape, or n
static inline size_t json_next_escape(const char *s, size_t i, size_t n) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; i + 8 <= n; i += 8) {   // 8 bytes at a time
        uint64_t w;
        memcpy(&w, s + i, 8);
        uint64_t h = json_word_hits(w);
        if (h) return i + (size_t)(__builtin_ctzll(h) >> 3);
    }
#endif
    while (i < n && !json_byte_escaped((unsigned char)s[i])) i++;
    return i;
}

// json.dumps string (ensure_ascii=False): escapes " \ and control characters only
static void json_str(const char *s, size_t n, rlc_strbuf *o) {
    if (!o->s || o->n + n + 3 > o->cap) rlc_sb_reserve(o, n + 2);   // the call only when it must grow
    tm_putc(o, '"');
    size_t run = 0;
    for (size_t i = json_next_escape(s, 0, n); i < n; i = json_next_escape(s, i + 1, n)) {
        unsigned char ch = (unsigned char)s[i];
        tm_put(o, s + run, i - run);
        run = i + 1;
        switch (ch) {
        case '"': tm_put(o, "\\\"", 2); break;
        case '\\': tm_put(o, "\\\\", 2); break;
        case '\n': tm_put(o, "\\n", 2); break;
        case '\r': tm_put(o, "\\r", 2); break;
        case '\t': tm_put(o, "\\t", 2); break;
        case '\b': tm_put(o, "\\b", 2); break;
        case '\f': tm_put(o, "\\f", 2); break;
        default: {
            static const char HEX[] = "0123456789abcdef";
            const char e[6] = {'\\', 'u', '0', '0', HEX[ch >> 4], HEX[ch & 15]};
            tm_put(o, e, 6);
        }
        }
    }
    tm_put(o, s + run, n - run);
    tm_putc(o, '"');
}

// json.dumps' layout, fixed for one call: separators with their lengths, and "\n" + indent * level for the
// levels up to NL_LEVELS in one string (a newline is then one append).
enum { NL_LEVELS = 16 };
typedef struct {
    tm_ctx *c;
    rlc_strbuf *o;
    int has_indent, sort_keys;
    const char *indent, *item_sep, *key_sep;
    size_t indent_n, item_n, key_n;
    const char *nl;   // "\n" + indent * NL_LEVELS
} json_fmt;

static void json_newline(const json_fmt *f, int level) {
    if (level <= NL_LEVELS) {
        tm_put(f->o, f->nl, 1 + (size_t)level * f->indent_n);
        return;
    }
    tm_putc(f->o, '\n');
    for (int i = 0; i < level; i++) tm_put(f->o, f->indent, f->indent_n);
}

static void json_dump(const json_fmt *f, tv v, int level) {
    tm_ctx *c = f->c;
    rlc_strbuf *o = f->o;
    char buf[40];
    if (level > 500) tm_raise(c, "tojson: value nested too deeply");
    switch (v.kind) {
    case TV_NONE: tm_put(o, "null", 4); return;
    case TV_BOOL: if (v.u.i) tm_put(o, "true", 4); else tm_put(o, "false", 5); return;
    case TV_INT: put_int(o, v.u.i); return;
    case TV_FLOAT:
        if (isnan(v.u.f)) tm_puts(o, "NaN");
        else if (isinf(v.u.f)) tm_puts(o, v.u.f < 0 ? "-Infinity" : "Infinity");
        else { tm_fmt_float(v.u.f, buf); tm_puts(o, buf); }
        return;
    case TV_STR: json_str(v.u.s, v.n, o); return;
    case TV_LIST: {
        tv_list *l = v.u.l;
        if (!l->n) { tm_put(o, "[]", 2); return; }
        tm_putc(o, '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i) tm_put(o, f->item_sep, f->item_n);
            if (f->has_indent) json_newline(f, level + 1);
            json_dump(f, l->v[i], level + 1);
        }
        if (f->has_indent) json_newline(f, level);
        tm_putc(o, ']');
        return;
    }
    case TV_DICT: {
        tv_dict *d = v.u.d;
        if (d->ns) break;
        if (!d->n) { tm_put(o, "{}", 2); return; }
        size_t ord_small[16], *ord = d->n <= 16 ? ord_small : tm_alloc_raw(&c->arena, d->n * sizeof *ord);
        for (size_t i = 0; i < d->n; i++) ord[i] = i;
        if (f->sort_keys)   // insertion sort: dicts in templates are small; stable like sorted()
            for (size_t i = 1; i < d->n; i++)
                for (size_t j = i; j > 0 && tm_compare(c, d->k[ord[j - 1]], d->k[ord[j]]) > 0; j--) {
                    size_t t = ord[j]; ord[j] = ord[j - 1]; ord[j - 1] = t;
                }
        tm_putc(o, '{');
        for (size_t ii = 0; ii < d->n; ii++) {
            size_t i = ord[ii];
            if (ii) tm_put(o, f->item_sep, f->item_n);
            if (f->has_indent) json_newline(f, level + 1);
            tv k = d->k[i];
            if (k.kind == TV_STR) json_str(k.u.s, k.n, o);
            else if (k.kind == TV_NONE) tm_puts(o, "\"null\"");
            else if (k.kind == TV_BOOL) tm_puts(o, k.u.i ? "\"true\"" : "\"false\"");
            else if (k.kind == TV_INT) rlc_sb_printf(o, "\"%lld\"", (long long)k.u.i);
            else if (k.kind == TV_FLOAT) { tm_fmt_float(k.u.f, buf); rlc_sb_printf(o, "\"%s\"", buf); }
            else tm_raise(c, "keys must be str, int, float, bool or None, not %s", tm_type_name(k));
            tm_put(o, f->key_sep, f->key_n);
            json_dump(f, d->v[i], level + 1);
        }
        if (f->has_indent) json_newline(f, level);
        tm_putc(o, '}');
        return;
    }
    default: break;
    }
    tm_raise(c, "Object of type %s is not JSON serializable", tm_type_name(v));
}

void tm_json_dump(tm_ctx *c, tv v, const char *indent, size_t indent_n, int has_indent, const char *item_sep,
                  const char *key_sep, int sort_keys, rlc_strbuf *o, int level) {
    json_fmt f = {.c = c, .o = o, .has_indent = has_indent, .sort_keys = sort_keys, .indent = indent, .item_sep = item_sep,
                  .key_sep = key_sep, .indent_n = indent_n, .item_n = strlen(item_sep), .key_n = strlen(key_sep)};
    if (has_indent) {
        char *nl = tm_alloc_raw(&c->arena, 1 + NL_LEVELS * indent_n);
        nl[0] = '\n';
        for (int i = 0; i < NL_LEVELS; i++) memcpy(nl + 1 + (size_t)i * indent_n, indent, indent_n);
        f.nl = nl;
    }
    json_dump(&f, v, level);
}

tv tm_iterate(tm_ctx *c, tv v) {
    switch (v.kind) {
    case TV_LIST: return v;
    case TV_UNDEF: return tv_listv(tm_list_new(&c->arena, 0));
    case TV_DICT: {
        if (v.u.d->ns) break;
        tv_list *l = tm_list_new(&c->arena, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) tm_list_push(&c->arena, l, v.u.d->k[i]);
        return tv_listv(l);
    }
    case TV_STR: {
        tv_list *l = tm_list_new(&c->arena, v.n);
        size_t i = 0;
        while (i < v.n) {
            size_t k = 1;
            while (i + k < v.n && ((unsigned char)v.u.s[i + k] & 0xC0) == 0x80) k++;
            tm_list_push(&c->arena, l, tv_str(v.u.s + i, k));
            i += k;
        }
        return tv_listv(l);
    }
    default: break;
    }
    tm_raise(c, "'%s' object is not iterable", tm_type_name(v));
}

void tm_undef_fail(tm_ctx *c, tv u) {
    if (u.n) tm_raise(c, "%s has no attribute '%s'", u.u.miss->owner, u.u.miss->name);
    if (u.u.undef_name) tm_raise(c, "'%s' is undefined", u.u.undef_name);
    tm_raise(c, "value is undefined");
}
