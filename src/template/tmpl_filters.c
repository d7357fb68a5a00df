// tmpl_filters.c: jinja2's builtin filters that chat templates use, with jinja2 3.1's semantics (Undefined
// inputs behave as jinja2's default Undefined: "" as a string, empty as a sequence), and tojson as
// transformers overrides it: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/common.h"
#include "template/tmpl_internal.h"

static tv sb_val(tm_ctx *c, rlc_strbuf *sb) {
    tv r = tv_str(tm_strndup(&c->arena, sb->s ? sb->s : "", sb->n), sb->n);
    rlc_sb_free(sb);
    return r;
}
static int64_t want_int(tm_ctx *c, tv v, const char *what) {
    if (v.kind == TV_INT || v.kind == TV_BOOL) return v.u.i;
    tm_raise(c, "%s must be an integer, got %s", what, tm_type_name(v));
}

void tm_tojson_into(tm_ctx *c, tv x, tm_args *a, rlc_strbuf *o) {
    tv ea = tm_arg(a, 0, "ensure_ascii", tv_bool(0)), ind = tm_arg(a, 1, "indent", tv_none());
    tv sep = tm_arg(a, 2, "separators", tv_none()), sk = tm_arg(a, 3, "sort_keys", tv_bool(0));
    if (tm_truthy(ea)) tm_raise(c, "tojson(ensure_ascii=True) is not supported");
    const char *indent = "";
    size_t indent_n = 0;
    int has_indent = ind.kind != TV_NONE;
    if (ind.kind == TV_INT) {
        int64_t k = ind.u.i < 0 ? 0 : ind.u.i;
        if (k > 64) tm_raise(c, "tojson: indent %lld is too large", (long long)k);
        char *sp = tm_alloc(&c->arena, (size_t)k + 1);
        memset(sp, ' ', (size_t)k);
        indent = sp;
        indent_n = (size_t)k;
    } else if (ind.kind == TV_STR) {
        indent = ind.u.s;
        indent_n = ind.n;
    } else if (has_indent) {
        tm_raise(c, "tojson: indent must be an int or a str, not %s", tm_type_name(ind));
    }
    const char *item_sep = has_indent ? "," : ", ", *key_sep = ": ";
    if (sep.kind == TV_LIST) {
        if (sep.u.l->n != 2 || sep.u.l->v[0].kind != TV_STR || sep.u.l->v[1].kind != TV_STR)
            tm_raise(c, "tojson: separators must be a pair of strings");
        item_sep = tm_strndup(&c->arena, sep.u.l->v[0].u.s, sep.u.l->v[0].n);
        key_sep = tm_strndup(&c->arena, sep.u.l->v[1].u.s, sep.u.l->v[1].n);
    } else if (sep.kind != TV_NONE) {
        tm_raise(c, "tojson: separators must be a pair of strings");
    }
    tm_json_dump(c, x, indent, indent_n, has_indent, item_sep, key_sep, tm_truthy(sk), o, 0);
}
tv tm_f_tojson(tm_ctx *c, tv x, tm_args *a) {
    rlc_strbuf *sb = &c->scratch;
    rlc_sb_clear(sb);
    if (sb->cap < 8192) rlc_sb_reserve(sb, 8191);   // one allocation per render instead of a doubling series
    tm_tojson_into(c, x, a, sb);
    return tv_str(tm_strndup(&c->arena, sb->s ? sb->s : "", sb->n), sb->n);
}

static tv f_length(tm_ctx *c, tv x, tm_args *a) {
    (void)a;
    switch (x.kind) {
    case TV_UNDEF: return tv_int(0);
    case TV_STR: return tv_int(tm_str_len_cp(x.u.s, x.n));
    case TV_LIST: return tv_int((int64_t)x.u.l->n);
    case TV_DICT: if (!x.u.d->ns) return tv_int((int64_t)x.u.d->n); break;
    default: break;
    }
    tm_raise(c, "object of type '%s' has no len()", tm_type_name(x));
}
static tv f_trim(tm_ctx *c, tv x, tm_args *a) { return tm_py_strip(c, tm_str_of(c, x), tm_arg(a, 0, "chars", tv_none()), 3); }
static tv f_upper(tm_ctx *c, tv x, tm_args *a) { (void)a; return tm_py_case(c, tm_str_of(c, x), 1); }
static tv f_lower(tm_ctx *c, tv x, tm_args *a) { (void)a; return tm_py_case(c, tm_str_of(c, x), 0); }
static tv f_capitalize(tm_ctx *c, tv x, tm_args *a) { (void)a; return tm_py_case(c, tm_str_of(c, x), 2); }
static tv f_string(tm_ctx *c, tv x, tm_args *a) { (void)a; return tm_str_of(c, x); }
static tv f_safe(tm_ctx *c, tv x, tm_args *a) { (void)a; return tm_str_of(c, x); }

// jinja2's title: each piece after [-\s({\[<]+ becomes piece[0].upper() + piece[1:].lower()
static tv f_title(tm_ctx *c, tv x, tm_args *a) {
    (void)a;
    tv s = tm_str_of(c, x);
    rlc_strbuf sb = {0};
    size_t i = 0;
    while (i < s.n) {
        size_t st = i;
        while (i < s.n && strchr("-({[< \t\n\r\v\f", s.u.s[i]) && s.u.s[i]) i++;
        tm_put(&sb, s.u.s + st, i - st);
        st = i;
        while (i < s.n && !(strchr("-({[< \t\n\r\v\f", s.u.s[i]) && s.u.s[i])) i++;
        if (i > st) {
            size_t k = st + 1;
            while (k < i && ((unsigned char)s.u.s[k] & 0xC0) == 0x80) k++;
            tv u = tm_py_case(c, tv_str(s.u.s + st, k - st), 1), l = tm_py_case(c, tv_str(s.u.s + k, i - k), 0);
            tm_put(&sb, u.u.s, u.n);
            tm_put(&sb, l.u.s, l.n);
        }
    }
    return sb_val(c, &sb);
}

// str.center(width[, fillchar]) as Python pads: the odd space goes left when width is odd
static tv f_center(tm_ctx *c, tv x, tm_args *a) {
    tv s = tm_str_of(c, x);
    int64_t w = want_int(c, tm_arg(a, 0, "width", tv_int(80)), "center's width");
    int64_t len = tm_str_len_cp(s.u.s, s.n);
    if (w <= len) return s;
    if (w > 100000) tm_raise(c, "center: width %lld is too large", (long long)w);
    int64_t marg = w - len, left = marg / 2 + (marg & w & 1);
    rlc_strbuf sb = {0};
    for (int64_t i = 0; i < left; i++) tm_putc(&sb, ' ');
    tm_put(&sb, s.u.s, s.n);
    for (int64_t i = 0; i < marg - left; i++) tm_putc(&sb, ' ');
    return sb_val(c, &sb);
}

static tv f_replace(tm_ctx *c, tv x, tm_args *a) {
    tv cnt = tm_arg(a, 2, "count", tv_none());
    int64_t n = cnt.kind == TV_NONE ? -1 : want_int(c, cnt, "replace's count");
    tv old = tm_str_of(c, tm_arg(a, 0, "old", tv_undef("old"))), nw = tm_str_of(c, tm_arg(a, 1, "new", tv_undef("new")));
    return tm_py_replace(c, tm_str_of(c, x), old, nw, n);
}

static tv f_default(tm_ctx *c, tv x, tm_args *a) {
    (void)c;
    tv d = tm_arg(a, 0, "default_value", tv_str("", 0));
    int boolean = tm_truthy(tm_arg(a, 1, "boolean", tv_bool(0)));
    if (x.kind == TV_UNDEF || (boolean && !tm_truthy(x))) return d;
    return x;
}

static tv f_items(tm_ctx *c, tv x, tm_args *a) {
    (void)a;
    if (x.kind == TV_UNDEF) return tv_listv(tm_list_new(&c->arena, 0));
    if (x.kind != TV_DICT || x.u.d->ns) tm_raise(c, "Can only get item pairs from a mapping.");
    return tm_dict_items(c, x);
}
static tv f_list(tm_ctx *c, tv x, tm_args *a) {
    (void)a;
    tv it = tm_iterate(c, x);
    tv_list *l = tm_list_new(&c->arena, it.u.l->n);
    for (size_t i = 0; i < it.u.l->n; i++) tm_list_push(&c->arena, l, it.u.l->v[i]);
    return tv_listv(l);
}
static tv f_first(tm_ctx *c, tv x, tm_args *a) {
    (void)a;
    tv it = tm_iterate(c, x);
    return it.u.l->n ? it.u.l->v[0] : tv_undef("No first item, sequence was empty.");
}
static tv f_last(tm_ctx *c, tv x, tm_args *a) {
    (void)a;
    if (x.kind == TV_DICT) tm_raise(c, "'dict' object is not reversible");
    tv it = tm_iterate(c, x);
    return it.u.l->n ? it.u.l->v[it.u.l->n - 1] : tv_undef("No last item, sequence was empty.");
}
static tv f_reverse(tm_ctx *c, tv x, tm_args *a) {
    (void)a;
    tv it = tm_iterate(c, x);
    if (x.kind == TV_STR) {
        rlc_strbuf sb = {0};
        for (size_t i = it.u.l->n; i-- > 0;) tm_put(&sb, it.u.l->v[i].u.s, it.u.l->v[i].n);
        return sb_val(c, &sb);
    }
    tv_list *l = tm_list_new(&c->arena, it.u.l->n);
    for (size_t i = it.u.l->n; i-- > 0;) tm_list_push(&c->arena, l, it.u.l->v[i]);
    return tv_listv(l);
}

// attribute paths "a.b.0" as jinja2's make_attrgetter resolves them (items first)
static tv attr_path(tm_ctx *c, tv obj, tv attr) {
    if (attr.kind == TV_INT) return tm_get_item(c, obj, attr);
    if (attr.kind != TV_STR) tm_raise(c, "attribute must be a string or an integer");
    size_t i = 0;
    while (i <= attr.n) {
        size_t e = i;
        while (e < attr.n && attr.u.s[e] != '.') e++;
        const char *p = attr.u.s + i;
        size_t n = e - i;
        int digits = n > 0;
        for (size_t k = 0; k < n; k++) digits &= p[k] >= '0' && p[k] <= '9';
        tv key = digits ? tv_int(strtoll(tm_strndup(&c->arena, p, n), NULL, 10)) : tv_str(p, n);
        obj = tm_get_item(c, obj, key);
        i = e + 1;
    }
    return obj;
}

static tv f_join(tm_ctx *c, tv x, tm_args *a) {
    tv d = tm_str_of(c, tm_arg(a, 0, "d", tv_str("", 0))), attr = tm_arg(a, 1, "attribute", tv_none());
    tv it = tm_iterate(c, x);
    rlc_strbuf sb = {0};
    for (size_t i = 0; i < it.u.l->n; i++) {
        if (i) tm_put(&sb, d.u.s, d.n);
        tv v = it.u.l->v[i];
        if (attr.kind != TV_NONE) v = attr_path(c, v, attr);
        tm_to_str(c, v, &sb);
    }
    return sb_val(c, &sb);
}

// map(attribute='x', default=...) or map('filter', args...)
static tv f_map(tm_ctx *c, tv x, tm_args *a) {
    tv it = tm_iterate(c, x);
    tv_list *l = tm_list_new(&c->arena, it.u.l->n);
    tv attr = tm_arg(a, -1, "attribute", tv_undef(NULL));
    if (attr.kind != TV_UNDEF) {
        tv dflt = tm_arg(a, -1, "default", tv_undef(NULL));
        for (size_t i = 0; i < it.u.l->n; i++) {
            tv v = attr_path(c, it.u.l->v[i], attr);
            if (v.kind == TV_UNDEF && dflt.kind != TV_UNDEF) v = dflt;
            tm_list_push(&c->arena, l, v);
        }
        return tv_listv(l);
    }
    if (a->npos < 1 || a->pos[0].kind != TV_STR) tm_raise(c, "map requires a filter name or attribute=");
    tm_builtin_fn fn = tm_find_filter(tm_strndup(&c->arena, a->pos[0].u.s, a->pos[0].n));
    if (!fn) tm_raise(c, "No filter named '%.*s'.", (int)a->pos[0].n, a->pos[0].u.s);
    tm_args rest = {a->pos + 1, a->npos - 1, a->kwn, a->kwv, a->nkw};
    for (size_t i = 0; i < it.u.l->n; i++) tm_list_push(&c->arena, l, fn(c, it.u.l->v[i], &rest));
    return tv_listv(l);
}

// select/reject/selectattr/rejectattr
static tv select_common(tm_ctx *c, tv x, tm_args *a, int by_attr, int keep_if) {
    tv it = tm_iterate(c, x);
    int off = by_attr ? 1 : 0;
    tv attr = by_attr ? tm_arg(a, 0, NULL, tv_undef("attribute")) : tv_none();
    if (by_attr && attr.kind == TV_UNDEF) tm_raise(c, "Missing parameter for attribute name");
    tm_builtin_fn test = NULL;
    if (a->npos > off) {
        tv tn = a->pos[off];
        if (tn.kind != TV_STR) tm_raise(c, "the test name must be a string");
        test = tm_find_test(tm_strndup(&c->arena, tn.u.s, tn.n));
        if (!test) tm_raise(c, "No test named '%.*s'.", (int)tn.n, tn.u.s);
    }
    tm_args rest = {a->pos + off + 1, a->npos - off - 1 > 0 ? a->npos - off - 1 : 0, a->kwn, a->kwv, a->nkw};
    tv_list *l = tm_list_new(&c->arena, it.u.l->n);
    for (size_t i = 0; i < it.u.l->n; i++) {
        tv v = by_attr ? attr_path(c, it.u.l->v[i], attr) : it.u.l->v[i];
        int r = test ? tm_truthy(test(c, v, &rest)) : tm_truthy(v);
        if (r == keep_if) tm_list_push(&c->arena, l, it.u.l->v[i]);
    }
    return tv_listv(l);
}
static tv f_select(tm_ctx *c, tv x, tm_args *a) { return select_common(c, x, a, 0, 1); }
static tv f_reject(tm_ctx *c, tv x, tm_args *a) { return select_common(c, x, a, 0, 0); }
static tv f_selectattr(tm_ctx *c, tv x, tm_args *a) { return select_common(c, x, a, 1, 1); }
static tv f_rejectattr(tm_ctx *c, tv x, tm_args *a) { return select_common(c, x, a, 1, 0); }

static tv f_attr(tm_ctx *c, tv x, tm_args *a) {
    tv n = tm_arg(a, 0, "name", tv_undef("name"));
    if (n.kind != TV_STR) tm_raise(c, "attr: the name must be a string");
    return tm_get_attr(c, x, n.u.s, n.n);
}

// Python int(str) / float(str) parsing (surrounding whitespace and '_' between digits allowed)
static int parse_py_int(const char *s, size_t n, int64_t *out) {
    char buf[64];
    size_t k = 0, i = 0;
    while (i < n && strchr(" \t\n\r\v\f", s[i]) && s[i]) i++;
    while (n > i && strchr(" \t\n\r\v\f", s[n - 1]) && s[n - 1]) n--;
    if (i < n && (s[i] == '+' || s[i] == '-')) buf[k++] = s[i++];
    if (i == n) return -1;
    for (; i < n; i++) {
        if (s[i] == '_' && k && buf[k - 1] >= '0' && buf[k - 1] <= '9' && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9') continue;
        if (s[i] < '0' || s[i] > '9' || k >= sizeof buf - 1) return -1;
        buf[k++] = s[i];
    }
    buf[k] = 0;
    char *end;
    errno = 0;
    *out = strtoll(buf, &end, 10);
    return errno ? -1 : 0;
}
static int parse_py_float(const char *s, size_t n, double *out) {
    char buf[128];
    size_t i = 0;
    while (i < n && strchr(" \t\n\r\v\f", s[i]) && s[i]) i++;
    while (n > i && strchr(" \t\n\r\v\f", s[n - 1]) && s[n - 1]) n--;
    if (n - i == 0 || n - i >= sizeof buf) return -1;
    size_t k = 0;
    for (; i < n; i++)
        if (s[i] != '_') buf[k++] = s[i];
    buf[k] = 0;
    if (strchr(buf, 'x') || strchr(buf, 'X') || strchr(buf, 'p') || strchr(buf, 'P')) return -1;   // no C hex floats
    char *end;
    *out = strtod(buf, &end);
    return *end ? -1 : 0;
}

static tv f_int(tm_ctx *c, tv x, tm_args *a) {
    tv d = tm_arg(a, 0, "default", tv_int(0));
    int64_t base = want_int(c, tm_arg(a, 1, "base", tv_int(10)), "int's base");
    if (base != 10) tm_raise(c, "int: only base 10 is supported");
    int64_t i;
    double f;
    switch (x.kind) {
    case TV_INT: case TV_BOOL: return tv_int(x.u.i);
    case TV_FLOAT:
        if (isnan(x.u.f) || isinf(x.u.f) || fabs(x.u.f) >= 9.2e18) return d;
        return tv_int((int64_t)x.u.f);
    case TV_STR:
        if (!parse_py_int(x.u.s, x.n, &i)) return tv_int(i);
        if (!parse_py_float(x.u.s, x.n, &f) && !isnan(f) && !isinf(f) && fabs(f) < 9.2e18) return tv_int((int64_t)f);
        return d;
    default: return d;
    }
}
static tv f_float(tm_ctx *c, tv x, tm_args *a) {
    (void)c;
    tv d = tm_arg(a, 0, "default", tv_float(0.0));
    double f;
    switch (x.kind) {
    case TV_INT: case TV_BOOL: return tv_float((double)x.u.i);
    case TV_FLOAT: return x;
    case TV_STR: return parse_py_float(x.u.s, x.n, &f) ? d : tv_float(f);
    default: return d;
    }
}
static tv f_abs(tm_ctx *c, tv x, tm_args *a) {
    (void)a;
    if (x.kind == TV_INT || x.kind == TV_BOOL) return tv_int(x.u.i < 0 ? -x.u.i : x.u.i);
    if (x.kind == TV_FLOAT) return tv_float(fabs(x.u.f));
    tm_raise(c, "bad operand type for abs(): '%s'", tm_type_name(x));
}
static tv f_round(tm_ctx *c, tv x, tm_args *a) {
    int64_t prec = want_int(c, tm_arg(a, 0, "precision", tv_int(0)), "round's precision");
    tv m = tm_arg(a, 1, "method", tv_str("common", 6));
    if (x.kind != TV_INT && x.kind != TV_FLOAT && x.kind != TV_BOOL) tm_raise(c, "round needs a number");
    double v = x.kind == TV_FLOAT ? x.u.f : (double)x.u.i, p = pow(10.0, (double)prec);
    if (m.kind == TV_STR && m.n == 4 && !memcmp(m.u.s, "ceil", 4)) return tv_float(ceil(v * p) / p);
    if (m.kind == TV_STR && m.n == 5 && !memcmp(m.u.s, "floor", 5)) return tv_float(floor(v * p) / p);
    if (!(m.kind == TV_STR && m.n == 6 && !memcmp(m.u.s, "common", 6))) tm_raise(c, "method must be common, ceil or floor");
    // Python's round(): correctly rounded via the shortest repr, half to even
    char buf[64];
    snprintf(buf, sizeof buf, "%.*f", (int)(prec < 0 ? 0 : prec > 30 ? 30 : prec), v);
    if (prec < 0) return tv_float(nearbyint(v * p) / p);
    return tv_float(strtod(buf, NULL));
}

static tv f_indent(tm_ctx *c, tv x, tm_args *a) {
    tv w = tm_arg(a, 0, "width", tv_int(4));
    int first = tm_truthy(tm_arg(a, 1, "first", tv_bool(0))), blank = tm_truthy(tm_arg(a, 2, "blank", tv_bool(0)));
    tv ind;
    if (w.kind == TV_STR) ind = w;
    else {
        int64_t k = want_int(c, w, "indent's width");
        if (k < 0) k = 0;
        if (k > 256) tm_raise(c, "indent: width %lld is too large", (long long)k);
        char *sp = tm_alloc(&c->arena, (size_t)k + 1);
        memset(sp, ' ', (size_t)k);
        ind = tv_str(sp, (size_t)k);
    }
    tv s = tm_str_of(c, x);
    rlc_strbuf tmp = {0};
    tm_put(&tmp, s.u.s, s.n);
    tm_putc(&tmp, '\n');   // jinja2 appends a newline before splitlines()
    tv lines = tm_py_splitlines(c, sb_val(c, &tmp));
    rlc_strbuf sb = {0};
    tv_list *l = lines.u.l;
    if (first) tm_put(&sb, ind.u.s, ind.n);
    for (size_t i = 0; i < l->n; i++) {
        if (i) {
            tm_putc(&sb, '\n');
            if (blank || l->v[i].n) tm_put(&sb, ind.u.s, ind.n);
        }
        tm_put(&sb, l->v[i].u.s, l->v[i].n);
    }
    return sb_val(c, &sb);
}

static tv f_escape(tm_ctx *c, tv x, tm_args *a) {
    (void)a;
    tv s = tm_str_of(c, x);
    rlc_strbuf sb = {0};
    for (size_t i = 0; i < s.n; i++) {
        switch (s.u.s[i]) {
        case '&': tm_puts(&sb, "&amp;"); break;
        case '<': tm_puts(&sb, "&lt;"); break;
        case '>': tm_puts(&sb, "&gt;"); break;
        case '"': tm_puts(&sb, "&#34;"); break;
        case '\'': tm_puts(&sb, "&#39;"); break;
        default: tm_putc(&sb, s.u.s[i]);
        }
    }
    return sb_val(c, &sb);
}

// sort key: attribute and case folding for strings (case_sensitive=False lowercases)
static tv sort_key(tm_ctx *c, tv v, tv attr, int cs) {
    if (attr.kind != TV_NONE) v = attr_path(c, v, attr);
    if (!cs && v.kind == TV_STR) v = tm_py_case(c, v, 0);
    return v;
}
static void sort_list(tm_ctx *c, tv_list *l, tv *keys, int reverse) {
    // insertion sort (stable like Python's sorted; lists in templates are short)
    for (size_t i = 1; i < l->n; i++)
        for (size_t j = i; j > 0; j--) {
            int r = tm_compare(c, keys[j - 1], keys[j]);
            if (reverse ? r >= 0 : r <= 0) break;
            tv t = l->v[j]; l->v[j] = l->v[j - 1]; l->v[j - 1] = t;
            t = keys[j]; keys[j] = keys[j - 1]; keys[j - 1] = t;
        }
}
static tv f_sort(tm_ctx *c, tv x, tm_args *a) {
    int reverse = tm_truthy(tm_arg(a, 0, "reverse", tv_bool(0))), cs = tm_truthy(tm_arg(a, 1, "case_sensitive", tv_bool(0)));
    tv attr = tm_arg(a, 2, "attribute", tv_none());
    tv l = f_list(c, x, a);
    tv *keys = tm_alloc(&c->arena, (l.u.l->n + 1) * sizeof(tv));
    for (size_t i = 0; i < l.u.l->n; i++) keys[i] = sort_key(c, l.u.l->v[i], attr, cs);
    sort_list(c, l.u.l, keys, reverse);
    return l;
}
static tv f_dictsort(tm_ctx *c, tv x, tm_args *a) {
    int cs = tm_truthy(tm_arg(a, 0, "case_sensitive", tv_bool(0)));
    tv by = tm_arg(a, 1, "by", tv_str("key", 3));
    int reverse = tm_truthy(tm_arg(a, 2, "reverse", tv_bool(0)));
    int pos = by.kind == TV_STR && by.n == 5 && !memcmp(by.u.s, "value", 5);
    if (x.kind != TV_DICT) tm_raise(c, "dictsort needs a mapping");
    tv l = tm_dict_items(c, x);
    tv *keys = tm_alloc(&c->arena, (l.u.l->n + 1) * sizeof(tv));
    for (size_t i = 0; i < l.u.l->n; i++) keys[i] = sort_key(c, l.u.l->v[i].u.l->v[pos], tv_none(), cs);
    sort_list(c, l.u.l, keys, reverse);
    return l;
}
static tv minmax(tm_ctx *c, tv x, tm_args *a, int want_max) {
    int cs = tm_truthy(tm_arg(a, 0, "case_sensitive", tv_bool(0)));
    tv attr = tm_arg(a, 1, "attribute", tv_none());
    tv it = tm_iterate(c, x);
    if (!it.u.l->n) return tv_undef(want_max ? "No aggregated item, sequence was empty." : "No aggregated item, sequence was empty.");
    size_t best = 0;
    tv bk = sort_key(c, it.u.l->v[0], attr, cs);
    for (size_t i = 1; i < it.u.l->n; i++) {
        tv k = sort_key(c, it.u.l->v[i], attr, cs);
        int r = tm_compare(c, k, bk);
        if (want_max ? r > 0 : r < 0) { best = i; bk = k; }
    }
    return it.u.l->v[best];
}
static tv f_max(tm_ctx *c, tv x, tm_args *a) { return minmax(c, x, a, 1); }
static tv f_min(tm_ctx *c, tv x, tm_args *a) { return minmax(c, x, a, 0); }
static tv f_unique(tm_ctx *c, tv x, tm_args *a) {
    int cs = tm_truthy(tm_arg(a, 0, "case_sensitive", tv_bool(0)));
    tv attr = tm_arg(a, 1, "attribute", tv_none());
    tv it = tm_iterate(c, x);
    tv_list *l = tm_list_new(&c->arena, it.u.l->n), *seen = tm_list_new(&c->arena, it.u.l->n);
    for (size_t i = 0; i < it.u.l->n; i++) {
        tv k = sort_key(c, it.u.l->v[i], attr, cs);
        int dup = 0;
        for (size_t j = 0; j < seen->n && !dup; j++) dup = tm_equal(seen->v[j], k);
        if (dup) continue;
        tm_list_push(&c->arena, seen, k);
        tm_list_push(&c->arena, l, it.u.l->v[i]);
    }
    return tv_listv(l);
}
static tv f_sum(tm_ctx *c, tv x, tm_args *a) {
    tv attr = tm_arg(a, 0, "attribute", tv_none()), acc = tm_arg(a, 1, "start", tv_int(0));
    tv it = tm_iterate(c, x);
    for (size_t i = 0; i < it.u.l->n; i++) {
        tv v = attr.kind != TV_NONE ? attr_path(c, it.u.l->v[i], attr) : it.u.l->v[i];
        int fl = acc.kind == TV_FLOAT || v.kind == TV_FLOAT;
        if ((acc.kind != TV_INT && acc.kind != TV_FLOAT && acc.kind != TV_BOOL) || (v.kind != TV_INT && v.kind != TV_FLOAT && v.kind != TV_BOOL))
            tm_raise(c, "unsupported operand type(s) for +: '%s' and '%s'", tm_type_name(acc), tm_type_name(v));
        if (fl) acc = tv_float((acc.kind == TV_FLOAT ? acc.u.f : (double)acc.u.i) + (v.kind == TV_FLOAT ? v.u.f : (double)v.u.i));
        else acc = tv_int(acc.u.i + v.u.i);
    }
    return acc;
}
// len(re.findall(r"\w+", s)): \w is letters, numbers and '_' (what Python's str.isalnum() accepts)
static tv f_wordcount(tm_ctx *c, tv x, tm_args *a) {
    (void)a;
    tv s = tm_str_of(c, x);
    int64_t k = 0;
    int in = 0;
    for (size_t i = 0; i < s.n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t n = utf8proc_iterate((const utf8proc_uint8_t *)s.u.s + i, (utf8proc_ssize_t)(s.n - i), &cp);
        if (n <= 0) { cp = 0xFFFD; n = 1; }
        i += (size_t)n;
        utf8proc_category_t cat = utf8proc_category(cp);
        int w = cp == '_' || (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
                (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
        if (w && !in) k++;
        in = w;
    }
    return tv_int(k);
}
static tv f_batch(tm_ctx *c, tv x, tm_args *a) {
    int64_t n = want_int(c, tm_arg(a, 0, "linecount", tv_undef("linecount")), "batch's linecount");
    tv fill = tm_arg(a, 1, "fill_with", tv_none());
    if (n <= 0) tm_raise(c, "batch: linecount must be positive");
    tv it = tm_iterate(c, x);
    tv_list *out = tm_list_new(&c->arena, 4), *cur = NULL;
    for (size_t i = 0; i < it.u.l->n; i++) {
        if (!cur || (int64_t)cur->n == n) {
            cur = tm_list_new(&c->arena, (size_t)n);
            tm_list_push(&c->arena, out, tv_listv(cur));
        }
        tm_list_push(&c->arena, cur, it.u.l->v[i]);
    }
    if (cur && fill.kind != TV_NONE)
        while ((int64_t)cur->n < n) tm_list_push(&c->arena, cur, fill);
    return tv_listv(out);
}

static const struct { const char *name; tm_builtin_fn fn; } FILTERS[] = {
    {"tojson", tm_f_tojson}, {"length", f_length}, {"count", f_length}, {"trim", f_trim}, {"upper", f_upper},
    {"lower", f_lower}, {"capitalize", f_capitalize}, {"title", f_title}, {"string", f_string}, {"safe", f_safe},
    {"replace", f_replace}, {"default", f_default}, {"d", f_default}, {"items", f_items}, {"list", f_list},
    {"first", f_first}, {"last", f_last}, {"reverse", f_reverse}, {"join", f_join}, {"map", f_map},
    {"select", f_select}, {"reject", f_reject}, {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr},
    {"attr", f_attr}, {"int", f_int}, {"float", f_float}, {"abs", f_abs}, {"round", f_round}, {"indent", f_indent},
    {"escape", f_escape}, {"e", f_escape}, {"forceescape", f_escape}, {"sort", f_sort}, {"dictsort", f_dictsort},
    {"max", f_max}, {"min", f_min}, {"unique", f_unique}, {"sum", f_sum}, {"wordcount", f_wordcount},
    {"batch", f_batch}, {"center", f_center},
};

tm_builtin_fn tm_find_filter(const char *name) {
    for (size_t i = 0; i < sizeof FILTERS / sizeof *FILTERS; i++)
        if (!strcmp(FILTERS[i].name, name)) return FILTERS[i].fn;
    return NULL;
}
