// tmpl_builtins.c: attribute and item access as jinja2's sandbox does it (attributes first for `.`, items
// first for `[]`), the Python str/dict/list methods templates call, the `loop` object, the globals
// transformers provides (range, namespace, dict, raise_exception, strftime_now) and the tests.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "core/common.h"
#include "template/tmpl_internal.h"

tv tm_arg(tm_args *a, int pos, const char *name, tv dflt) {
    if (pos >= 0 && pos < a->npos) return a->pos[pos];
    if (name)
        for (int i = 0; i < a->nkw; i++)
            if (!strcmp(a->kwn[i], name)) return a->kwv[i];
    return dflt;
}

static tv undef_attr(tm_ctx *c, tv obj, const char *name, size_t n) {
    tm_undef_attr *m = tm_alloc(&c->arena, sizeof *m);
    m->name = tm_strndup(&c->arena, name, n);
    char *owner = tm_alloc(&c->arena, 48);
    if (obj.kind == TV_NONE) strcpy(owner, "'None'");
    else snprintf(owner, 48, "'%s object'", tm_type_name(obj));
    m->owner = owner;
    tv u = {TV_UNDEF, 1, {.miss = m}};
    return u;
}

static tv bound(tm_ctx *c, const char *name, tm_builtin_fn fn, tv self) {
    tv_func *f = tm_alloc(&c->arena, sizeof *f);
    f->name = name;
    f->fn = fn;
    f->self = self;
    tv v = {TV_FUNC, 0, {.fn = f}};
    return v;
}

static int name_is(const char *s, size_t n, const char *lit) { return lit[0] == s[0] && strlen(lit) == n && !memcmp(s, lit, n); }

// ---- code-point helpers ----
static size_t cp_next(const char *s, size_t n, size_t i, int32_t *cp) {
    if ((unsigned char)s[i] < 0x80) {   // ASCII: no decoder call
        *cp = (unsigned char)s[i];
        return 1;
    }
    utf8proc_int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
    if (k <= 0) { *cp = (unsigned char)s[i]; return 1; }
    *cp = c;
    return (size_t)k;
}
static void put_cp(rlc_strbuf *o, int32_t cp) {
    utf8proc_uint8_t b[4];
    utf8proc_ssize_t k = utf8proc_encode_char(cp, b);
    tm_put(o, b, (size_t)k);
}
// Python str.isspace() for one code point
static int py_space(int32_t cp) {
    return (cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}
static tv arena_str(tm_ctx *c, rlc_strbuf *sb) {
    tv r = tv_str(tm_strndup(&c->arena, sb->s ? sb->s : "", sb->n), sb->n);
    rlc_sb_free(sb);
    return r;
}
static tv need_str(tm_ctx *c, tv v, const char *what) {
    if (v.kind != TV_STR) tm_raise(c, "%s must be a str, not %s", what, tm_type_name(v));
    return v;
}

// Python str.strip(chars) family: which = 1 left, 2 right, 3 both
tv tm_py_strip(tm_ctx *c, tv s, tv chars, int which) {
    const char *p = s.u.s;
    size_t b = 0, e = s.n;
    int has = chars.kind == TV_STR;
    if (!has && chars.kind != TV_NONE && chars.kind != TV_UNDEF) tm_raise(c, "strip arg must be None or str");
#define IN_SET(cp) (has ? tm_str_has_cp(chars, cp) : py_space(cp))
    if (which & 1)
        while (b < e) {
            int32_t cp;
            size_t k = cp_next(p, e, b, &cp);
            if (!IN_SET(cp)) break;
            b += k;
        }
    if (which & 2)
        while (e > b) {
            size_t st = e - 1;
            while (st > b && ((unsigned char)p[st] & 0xC0) == 0x80) st--;
            int32_t cp;
            cp_next(p, e, st, &cp);
            if (!IN_SET(cp)) break;
            e = st;
        }
#undef IN_SET
    return tv_str(p + b, e - b);
}
int tm_str_has_cp(tv set, int32_t cp) {
    for (size_t i = 0; i < set.n;) {
        int32_t x;
        i += cp_next(set.u.s, set.n, i, &x);
        if (x == cp) return 1;
    }
    return 0;
}

// Python's full case mappings that are not one code point (SpecialCasing.txt, unconditional, Latin)
static const struct { int32_t cp; const char *upper, *title, *lower; } SPECIAL_CASE[] = {
    {0x00DF, "SS", "Ss", NULL},          {0x0149, "\u02BCN", "\u02BCN", NULL}, {0x01F0, "J\u030C", "J\u030C", NULL},
    {0xFB00, "FF", "Ff", NULL},          {0xFB01, "FI", "Fi", NULL},             {0xFB02, "FL", "Fl", NULL},
    {0xFB03, "FFI", "Ffi", NULL},        {0xFB04, "FFL", "Ffl", NULL},           {0xFB05, "ST", "St", NULL},
    {0xFB06, "ST", "St", NULL},          {0x0130, NULL, NULL, "i\u0307"},
};

tv tm_py_case(tm_ctx *c, tv s, int mode) {   // 0 lower, 1 upper, 2 capitalize, 3 str.title
    rlc_strbuf sb = {0};
    int prev_cased = 0, first = 1;
    for (size_t i = 0; i < s.n;) {
        int32_t cp;
        i += cp_next(s.u.s, s.n, i, &cp);
        int want_lower = mode == 0 || (mode == 2 && !first) || (mode == 3 && prev_cased);
        int want_title = (mode == 2 && first) || (mode == 3 && !prev_cased);
        int cased = utf8proc_tolower(cp) != cp || utf8proc_toupper(cp) != cp || utf8proc_totitle(cp) != cp ||
                    utf8proc_category(cp) == UTF8PROC_CATEGORY_LL || utf8proc_category(cp) == UTF8PROC_CATEGORY_LU ||
                    utf8proc_category(cp) == UTF8PROC_CATEGORY_LT;
        prev_cased = cased;
        first = 0;
        const char *sp = NULL;
        for (size_t k = 0; k < sizeof SPECIAL_CASE / sizeof *SPECIAL_CASE; k++)
            if (SPECIAL_CASE[k].cp == cp) sp = want_lower ? SPECIAL_CASE[k].lower : want_title ? SPECIAL_CASE[k].title : SPECIAL_CASE[k].upper;
        if (sp) { tm_puts(&sb, sp); continue; }
        put_cp(&sb, want_lower ? utf8proc_tolower(cp) : want_title ? utf8proc_totitle(cp) : utf8proc_toupper(cp));
    }
    return arena_str(c, &sb);
}

static const char *find_sub(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0) return h;
    if (nn > hn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && !memcmp(h + i, nd, nn)) return h + i;
    return NULL;
}

// str.split(sep=None, maxsplit=-1)
tv tm_py_split(tm_ctx *c, tv s, tv sep, int64_t maxsplit) {
    tv_list *l = tm_list_new(&c->arena, 4);
    if (sep.kind == TV_NONE || sep.kind == TV_UNDEF) {
        size_t i = 0;
        int64_t splits = 0;
        for (;;) {
            while (i < s.n) {   // skip whitespace
                int32_t cp;
                size_t k = cp_next(s.u.s, s.n, i, &cp);
                if (!py_space(cp)) break;
                i += k;
            }
            if (i >= s.n) break;
            if (maxsplit >= 0 && splits == maxsplit) {
                size_t e = s.n;   // rest, with trailing whitespace removed
                tv r = tm_py_strip(c, tv_str(s.u.s + i, e - i), tv_none(), 2);
                tm_list_push(&c->arena, l, r);
                break;
            }
            size_t st = i;
            while (i < s.n) {
                int32_t cp;
                size_t k = cp_next(s.u.s, s.n, i, &cp);
                if (py_space(cp)) break;
                i += k;
            }
            tm_list_push(&c->arena, l, tv_str(s.u.s + st, i - st));
            splits++;
        }
        return tv_listv(l);
    }
    need_str(c, sep, "the separator");
    if (sep.n == 0) tm_raise(c, "empty separator");
    size_t i = 0;
    int64_t splits = 0;
    for (;;) {
        const char *f = (maxsplit < 0 || splits < maxsplit) ? find_sub(s.u.s + i, s.n - i, sep.u.s, sep.n) : NULL;
        if (!f) {
            tm_list_push(&c->arena, l, tv_str(s.u.s + i, s.n - i));
            break;
        }
        tm_list_push(&c->arena, l, tv_str(s.u.s + i, (size_t)(f - (s.u.s + i))));
        i = (size_t)(f - s.u.s) + sep.n;
        splits++;
    }
    return tv_listv(l);
}

static tv m_strip(tm_ctx *c, tv self, tm_args *a) { return tm_py_strip(c, self, tm_arg(a, 0, "chars", tv_none()), 3); }
static tv m_lstrip(tm_ctx *c, tv self, tm_args *a) { return tm_py_strip(c, self, tm_arg(a, 0, "chars", tv_none()), 1); }
static tv m_rstrip(tm_ctx *c, tv self, tm_args *a) { return tm_py_strip(c, self, tm_arg(a, 0, "chars", tv_none()), 2); }
static tv m_upper(tm_ctx *c, tv self, tm_args *a) { (void)a; return tm_py_case(c, self, 1); }
static tv m_lower(tm_ctx *c, tv self, tm_args *a) { (void)a; return tm_py_case(c, self, 0); }
static tv m_capitalize(tm_ctx *c, tv self, tm_args *a) { (void)a; return tm_py_case(c, self, 2); }
static tv m_title(tm_ctx *c, tv self, tm_args *a) { (void)a; return tm_py_case(c, self, 3); }
static tv m_split(tm_ctx *c, tv self, tm_args *a) {
    tv ms = tm_arg(a, 1, "maxsplit", tv_int(-1));
    if (ms.kind != TV_INT) tm_raise(c, "maxsplit must be an int");
    return tm_py_split(c, self, tm_arg(a, 0, "sep", tv_none()), ms.u.i);
}
static tv m_rsplit(tm_ctx *c, tv self, tm_args *a) {
    tv ms = tm_arg(a, 1, "maxsplit", tv_int(-1));
    tv sep = tm_arg(a, 0, "sep", tv_none());
    if (ms.kind != TV_INT) tm_raise(c, "maxsplit must be an int");
    if (ms.u.i < 0) return tm_py_split(c, self, sep, -1);
    need_str(c, sep, "rsplit's separator (with maxsplit)");
    if (sep.n == 0) tm_raise(c, "empty separator");
    // split from the right: collect positions
    tv_list *parts = tm_list_new(&c->arena, 4);
    size_t e = self.n;
    int64_t k = 0;
    while (k < ms.u.i) {
        const char *hit = NULL;
        for (size_t i = e; i-- > 0;)
            if (i + sep.n <= e && !memcmp(self.u.s + i, sep.u.s, sep.n)) { hit = self.u.s + i; break; }
        if (!hit) break;
        tm_list_push(&c->arena, parts, tv_str(hit + sep.n, (size_t)(self.u.s + e - hit - sep.n)));
        e = (size_t)(hit - self.u.s);
        k++;
    }
    tm_list_push(&c->arena, parts, tv_str(self.u.s, e));
    tv_list *l = tm_list_new(&c->arena, parts->n);
    for (size_t i = parts->n; i-- > 0;) tm_list_push(&c->arena, l, parts->v[i]);
    return tv_listv(l);
}
static int affix(tm_ctx *c, tv self, tv x, int end) {
    if (x.kind == TV_LIST && x.u.l->tuple) {
        for (size_t i = 0; i < x.u.l->n; i++)
            if (affix(c, self, x.u.l->v[i], end)) return 1;
        return 0;
    }
    if (x.kind != TV_STR)
        tm_raise(c, "%s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith", tm_type_name(x));
    if (x.n > self.n) return 0;
    return !memcmp(self.u.s + (end ? self.n - x.n : 0), x.u.s, x.n);
}
static tv m_startswith(tm_ctx *c, tv self, tm_args *a) { return tv_bool(affix(c, self, tm_arg(a, 0, NULL, tv_undef("prefix")), 0)); }
static tv m_endswith(tm_ctx *c, tv self, tm_args *a) { return tv_bool(affix(c, self, tm_arg(a, 0, NULL, tv_undef("suffix")), 1)); }
tv tm_py_replace(tm_ctx *c, tv s, tv old, tv new_, int64_t count) {
    need_str(c, old, "replace's first argument");
    need_str(c, new_, "replace's second argument");
    rlc_strbuf sb = {0};
    size_t i = 0;
    int64_t done = 0;
    if (old.n == 0) {   // Python inserts `new` between every code point (and at both ends)
        while (count < 0 || done < count) {
            tm_put(&sb, new_.u.s, new_.n);
            done++;
            if (i >= s.n) break;
            int32_t cp;
            size_t k = cp_next(s.u.s, s.n, i, &cp);
            tm_put(&sb, s.u.s + i, k);
            i += k;
        }
        tm_put(&sb, s.u.s + i, s.n - i);
        return arena_str(c, &sb);
    }
    while (count < 0 || done < count) {
        const char *f = find_sub(s.u.s + i, s.n - i, old.u.s, old.n);
        if (!f) break;
        tm_put(&sb, s.u.s + i, (size_t)(f - s.u.s) - i);
        tm_put(&sb, new_.u.s, new_.n);
        i = (size_t)(f - s.u.s) + old.n;
        done++;
    }
    tm_put(&sb, s.u.s + i, s.n - i);
    return arena_str(c, &sb);
}
static tv m_replace(tm_ctx *c, tv self, tm_args *a) {
    tv n = tm_arg(a, 2, "count", tv_int(-1));
    if (n.kind != TV_INT) tm_raise(c, "replace's count must be an int");
    return tm_py_replace(c, self, tm_arg(a, 0, "old", tv_undef("old")), tm_arg(a, 1, "new", tv_undef("new")), n.u.i);
}
static tv m_find(tm_ctx *c, tv self, tm_args *a, int rev, int raise) {
    tv x = need_str(c, tm_arg(a, 0, NULL, tv_undef("sub")), "find's argument");
    const char *hit = NULL;
    if (!rev) hit = find_sub(self.u.s, self.n, x.u.s, x.n);
    else if (x.n <= self.n)
        for (size_t i = self.n - x.n + 1; i-- > 0;)
            if (!memcmp(self.u.s + i, x.u.s, x.n)) { hit = self.u.s + i; break; }
    if (!hit) {
        if (raise) tm_raise(c, "substring not found");
        return tv_int(-1);
    }
    return tv_int(tm_str_len_cp(self.u.s, (size_t)(hit - self.u.s)));
}
static tv m_findf(tm_ctx *c, tv self, tm_args *a) { return m_find(c, self, a, 0, 0); }
static tv m_rfind(tm_ctx *c, tv self, tm_args *a) { return m_find(c, self, a, 1, 0); }
static tv m_sindex(tm_ctx *c, tv self, tm_args *a) { return m_find(c, self, a, 0, 1); }
static tv m_scount(tm_ctx *c, tv self, tm_args *a) {
    tv x = need_str(c, tm_arg(a, 0, NULL, tv_undef("sub")), "count's argument");
    if (x.n == 0) return tv_int(tm_str_len_cp(self.u.s, self.n) + 1);
    int64_t k = 0;
    for (size_t i = 0; i + x.n <= self.n;) {
        if (!memcmp(self.u.s + i, x.u.s, x.n)) { k++; i += x.n; }
        else i++;
    }
    return tv_int(k);
}
static tv m_join(tm_ctx *c, tv self, tm_args *a) {
    tv it = tm_iterate(c, tm_arg(a, 0, NULL, tv_undef("iterable")));
    rlc_strbuf sb = {0};
    for (size_t i = 0; i < it.u.l->n; i++) {
        tv x = it.u.l->v[i];
        if (x.kind != TV_STR) {
            rlc_sb_free(&sb);
            tm_raise(c, "sequence item %zu: expected str instance, %s found", i, tm_type_name(x));
        }
        if (i) tm_put(&sb, self.u.s, self.n);
        tm_put(&sb, x.u.s, x.n);
    }
    return arena_str(c, &sb);
}
static tv m_splitlines(tm_ctx *c, tv self, tm_args *a) {
    int keep = tm_truthy(tm_arg(a, 0, "keepends", tv_bool(0)));
    tv_list *l = tm_list_new(&c->arena, 4);
    size_t st = 0, i = 0;
    while (i < self.n) {
        int32_t cp;
        size_t k = cp_next(self.u.s, self.n, i, &cp);
        int brk = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 ||
                  cp == 0x2028 || cp == 0x2029;
        if (brk) {
            size_t e = i + k;
            if (cp == '\r' && e < self.n && self.u.s[e] == '\n') e++;
            tm_list_push(&c->arena, l, tv_str(self.u.s + st, (keep ? e : i) - st));
            st = i = e;
        } else {
            i += k;
        }
    }
    if (st < self.n) tm_list_push(&c->arena, l, tv_str(self.u.s + st, self.n - st));
    return tv_listv(l);
}
tv tm_py_splitlines(tm_ctx *c, tv s) {
    tm_args a = {0};
    return m_splitlines(c, s, &a);
}
static tv m_isclass(tm_ctx *c, tv self, int kind) {
    (void)c;
    if (self.n == 0) return tv_bool(0);
    int any_cased = 0;
    for (size_t i = 0; i < self.n;) {
        int32_t cp;
        i += cp_next(self.u.s, self.n, i, &cp);
        utf8proc_category_t k = utf8proc_category(cp);
        int alpha = k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
        int digit = k == UTF8PROC_CATEGORY_ND;
        switch (kind) {
        case 0: if (!digit) return tv_bool(0); break;
        case 1: if (!alpha) return tv_bool(0); break;
        case 2: if (!py_space(cp)) return tv_bool(0); break;
        case 3: if (!alpha && !digit && k != UTF8PROC_CATEGORY_NL && k != UTF8PROC_CATEGORY_NO) return tv_bool(0); break;
        case 4: if (utf8proc_toupper(cp) != cp) return tv_bool(0); any_cased |= utf8proc_tolower(cp) != cp; break;
        case 5: if (utf8proc_tolower(cp) != cp) return tv_bool(0); any_cased |= utf8proc_toupper(cp) != cp; break;
        }
    }
    return tv_bool(kind >= 4 ? any_cased : 1);
}
static tv m_isdigit(tm_ctx *c, tv self, tm_args *a) { (void)a; return m_isclass(c, self, 0); }
static tv m_isalpha(tm_ctx *c, tv self, tm_args *a) { (void)a; return m_isclass(c, self, 1); }
static tv m_isspace(tm_ctx *c, tv self, tm_args *a) { (void)a; return m_isclass(c, self, 2); }
static tv m_isalnum(tm_ctx *c, tv self, tm_args *a) { (void)a; return m_isclass(c, self, 3); }
static tv m_isupper(tm_ctx *c, tv self, tm_args *a) { (void)a; return m_isclass(c, self, 4); }
static tv m_islower(tm_ctx *c, tv self, tm_args *a) { (void)a; return m_isclass(c, self, 5); }
// str.format with {} / {0} / {name} fields (no format specs)
static tv m_format(tm_ctx *c, tv self, tm_args *a) {
    rlc_strbuf sb = {0};
    int auto_i = 0;
    for (size_t i = 0; i < self.n; i++) {
        char ch = self.u.s[i];
        if ((ch == '{' || ch == '}') && i + 1 < self.n && self.u.s[i + 1] == ch) { tm_putc(&sb, ch); i++; continue; }
        if (ch == '}') { rlc_sb_free(&sb); tm_raise(c, "Single '}' encountered in format string"); }
        if (ch != '{') { tm_putc(&sb, ch); continue; }
        size_t e = i + 1;
        while (e < self.n && self.u.s[e] != '}') e++;
        if (e >= self.n) { rlc_sb_free(&sb); tm_raise(c, "Single '{' encountered in format string"); }
        const char *f = self.u.s + i + 1;
        size_t fn = e - i - 1;
        if (memchr(f, ':', fn) || memchr(f, '!', fn) || memchr(f, '.', fn) || memchr(f, '[', fn)) {
            rlc_sb_free(&sb);
            tm_raise(c, "str.format: format specs, conversions and field access are not supported");
        }
        tv v;
        if (fn == 0) v = tm_arg(a, auto_i++, NULL, tv_undef(NULL));
        else if (f[0] >= '0' && f[0] <= '9') v = tm_arg(a, atoi(f), NULL, tv_undef(NULL));
        else v = tm_arg(a, -1, tm_strndup(&c->arena, f, fn), tv_undef(NULL));
        if (v.kind == TV_UNDEF) { rlc_sb_free(&sb); tm_raise(c, "str.format: missing argument for field {%.*s}", (int)fn, f); }
        tm_to_str(c, v, &sb);
        i = e;
    }
    return arena_str(c, &sb);
}

static const struct { const char *name; tm_builtin_fn fn; } STR_METHODS[] = {
    {"strip", m_strip}, {"lstrip", m_lstrip}, {"rstrip", m_rstrip}, {"split", m_split}, {"rsplit", m_rsplit},
    {"startswith", m_startswith}, {"endswith", m_endswith}, {"upper", m_upper}, {"lower", m_lower},
    {"replace", m_replace}, {"title", m_title}, {"capitalize", m_capitalize}, {"find", m_findf}, {"rfind", m_rfind},
    {"index", m_sindex}, {"count", m_scount}, {"join", m_join}, {"splitlines", m_splitlines}, {"format", m_format},
    {"isdigit", m_isdigit}, {"isalpha", m_isalpha}, {"isspace", m_isspace}, {"isalnum", m_isalnum},
    {"isupper", m_isupper}, {"islower", m_islower},
};

// dict methods
static tv d_items(tm_ctx *c, tv self, tm_args *a) {
    (void)a;
    tv_dict *d = self.u.d;
    tv_list *l = tm_list_new(&c->arena, d->n);
    for (size_t i = 0; i < d->n; i++) {
        tv_list *p = tm_list_new(&c->arena, 2);
        p->tuple = 1;
        tm_list_push(&c->arena, p, d->k[i]);
        tm_list_push(&c->arena, p, d->v[i]);
        tm_list_push(&c->arena, l, tv_listv(p));
    }
    return tv_listv(l);
}
tv tm_dict_items(tm_ctx *c, tv d) { tm_args a = {0}; return d_items(c, d, &a); }
static tv d_keys(tm_ctx *c, tv self, tm_args *a) { (void)a; return tm_iterate(c, self); }
static tv d_values(tm_ctx *c, tv self, tm_args *a) {
    (void)a;
    tv_list *l = tm_list_new(&c->arena, self.u.d->n);
    for (size_t i = 0; i < self.u.d->n; i++) tm_list_push(&c->arena, l, self.u.d->v[i]);
    return tv_listv(l);
}
static tv d_get(tm_ctx *c, tv self, tm_args *a) {
    tv *v = tm_dict_getv(self.u.d, tm_arg(a, 0, NULL, tv_none()));
    (void)c;
    return v ? *v : tm_arg(a, 1, NULL, tv_none());
}
static tv d_copy(tm_ctx *c, tv self, tm_args *a) {
    (void)a;
    tv_dict *d = tm_dict_new(&c->arena, self.u.d->n);
    for (size_t i = 0; i < self.u.d->n; i++) tm_dict_set(&c->arena, d, self.u.d->k[i], self.u.d->v[i]);
    return tv_dictv(d);
}
static tv l_index(tm_ctx *c, tv self, tm_args *a) {
    tv x = tm_arg(a, 0, NULL, tv_undef("value"));
    for (size_t i = 0; i < self.u.l->n; i++)
        if (tm_equal(self.u.l->v[i], x)) return tv_int((int64_t)i);
    tm_raise(c, "value is not in list");
}
static tv l_count(tm_ctx *c, tv self, tm_args *a) {
    (void)c;
    tv x = tm_arg(a, 0, NULL, tv_undef("value"));
    int64_t k = 0;
    for (size_t i = 0; i < self.u.l->n; i++) k += tm_equal(self.u.l->v[i], x);
    return tv_int(k);
}

static tv loop_changed(tm_ctx *c, tv self, tm_args *a) {
    tv_list *l = tm_list_new(&c->arena, (size_t)a->npos);
    for (int i = 0; i < a->npos; i++) tm_list_push(&c->arena, l, a->pos[i]);
    tv now = tv_listv(l);
    tm_loop *lp = self.u.loop;
    if (lp->changed_last.kind != TV_UNDEF && tm_equal(lp->changed_last, now)) return tv_bool(0);
    lp->changed_last = now;
    return tv_bool(1);
}
static tv loop_cycle(tm_ctx *c, tv self, tm_args *a) {
    if (a->npos == 0) tm_raise(c, "no items for cycling given");
    return a->pos[self.u.loop->index0 % (size_t)a->npos];
}

static const char *const UNSAFE[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear",
                                     "update", "setdefault", "popitem", "add", "discard"};

// the dict methods (attributes looked up before keys): the safe ones and those the sandbox refuses
int tm_is_dict_attr(const char *s, size_t n) {
    switch (n) {
    case 3: return !memcmp(s, "get", 3) || !memcmp(s, "pop", 3);
    case 4: return !memcmp(s, "keys", 4) || !memcmp(s, "copy", 4);
    case 5: return !memcmp(s, "items", 5) || !memcmp(s, "clear", 5);
    case 6: return !memcmp(s, "values", 6) || !memcmp(s, "update", 6);
    case 7: return !memcmp(s, "popitem", 7);
    case 10: return !memcmp(s, "setdefault", 10);
    default: return 0;
    }
}

tv tm_get_attr(tm_ctx *c, tv obj, const char *name, size_t n) {
    switch (obj.kind) {
    case TV_UNDEF: tm_undef_fail(c, obj);
    case TV_DICT:
        if (obj.u.d->ns) {
            tv *v = tm_dict_get(obj.u.d, name, n);
            return v ? *v : undef_attr(c, obj, name, n);
        }
        if (tm_is_dict_attr(name, n)) {   // Python attributes come before items
            if (name_is(name, n, "items")) return bound(c, "items", d_items, obj);
            if (name_is(name, n, "keys")) return bound(c, "keys", d_keys, obj);
            if (name_is(name, n, "values")) return bound(c, "values", d_values, obj);
            if (name_is(name, n, "get")) return bound(c, "get", d_get, obj);
            if (name_is(name, n, "copy")) return bound(c, "copy", d_copy, obj);
            tm_raise(c, "access to attribute '%.*s' of 'dict' object is unsafe.", (int)n, name);
        }
        {
            tv *v = tm_dict_get(obj.u.d, name, n);
            return v ? *v : undef_attr(c, obj, name, n);
        }
    case TV_STR:
        for (size_t i = 0; i < sizeof STR_METHODS / sizeof *STR_METHODS; i++)
            if (name_is(name, n, STR_METHODS[i].name)) return bound(c, STR_METHODS[i].name, STR_METHODS[i].fn, obj);
        return undef_attr(c, obj, name, n);
    case TV_LIST:
        if (name_is(name, n, "index")) return bound(c, "index", l_index, obj);
        if (name_is(name, n, "count")) return bound(c, "count", l_count, obj);
        for (size_t i = 0; i < sizeof UNSAFE / sizeof *UNSAFE; i++)
            if (name_is(name, n, UNSAFE[i])) tm_raise(c, "access to attribute '%s' of '%s' object is unsafe.", UNSAFE[i], tm_type_name(obj));
        return undef_attr(c, obj, name, n);
    case TV_LOOP: {
        tm_loop *lp = obj.u.loop;
        int64_t i = (int64_t)lp->index0, len = (int64_t)lp->items->n;
        if (name_is(name, n, "index")) return tv_int(i + 1);
        if (name_is(name, n, "index0")) return tv_int(i);
        if (name_is(name, n, "revindex")) return tv_int(len - i);
        if (name_is(name, n, "revindex0")) return tv_int(len - i - 1);
        if (name_is(name, n, "first")) return tv_bool(i == 0);
        if (name_is(name, n, "last")) return tv_bool(i == len - 1);
        if (name_is(name, n, "length")) return tv_int(len);
        if (name_is(name, n, "depth")) return tv_int(1);
        if (name_is(name, n, "depth0")) return tv_int(0);
        if (name_is(name, n, "previtem")) return i > 0 ? lp->items->v[i - 1] : tv_undef("there is no previous item");
        if (name_is(name, n, "nextitem")) return i + 1 < len ? lp->items->v[i + 1] : tv_undef("there is no next item");
        if (name_is(name, n, "cycle")) return bound(c, "cycle", loop_cycle, obj);
        if (name_is(name, n, "changed")) return bound(c, "changed", loop_changed, obj);
        return undef_attr(c, obj, name, n);
    }
    default: return undef_attr(c, obj, name, n);
    }
}

tv tm_get_item(tm_ctx *c, tv obj, tv key) {
    switch (obj.kind) {
    case TV_UNDEF: tm_undef_fail(c, obj);
    case TV_LIST: case TV_STR:
        if (key.kind == TV_INT || key.kind == TV_BOOL) {
            int64_t i = key.u.i;
            if (obj.kind == TV_LIST) {
                int64_t n = (int64_t)obj.u.l->n;
                if (i < 0) i += n;
                if (i >= 0 && i < n) return obj.u.l->v[i];
            } else {
                tv chars = tm_iterate(c, obj);
                int64_t n = (int64_t)chars.u.l->n;
                if (i < 0) i += n;
                if (i >= 0 && i < n) return chars.u.l->v[i];
            }
            char *nm = tm_alloc(&c->arena, 24);
            snprintf(nm, 24, "%lld", (long long)key.u.i);
            tv u = undef_attr(c, obj, nm, strlen(nm));
            return u;
        }
        if (key.kind == TV_STR) return tm_get_attr(c, obj, key.u.s, key.n);
        return undef_attr(c, obj, "?", 1);
    case TV_DICT: {
        if (!obj.u.d->ns) {
            tv *v = key.kind == TV_STR ? tm_dict_get(obj.u.d, key.u.s, key.n) : tm_dict_getv(obj.u.d, key);
            if (v) return *v;
        }
        if (key.kind == TV_STR) return tm_get_attr(c, obj, key.u.s, key.n);
        tv s = tm_str_of(c, key);
        return undef_attr(c, obj, s.u.s, s.n);
    }
    case TV_LOOP:
        if (key.kind == TV_STR) return tm_get_attr(c, obj, key.u.s, key.n);
        return undef_attr(c, obj, "?", 1);
    default: {
        if (key.kind == TV_STR) return undef_attr(c, obj, key.u.s, key.n);
        tv s = tm_str_of(c, key);
        return undef_attr(c, obj, s.u.s, s.n);
    }
    }
}

// ---- globals ----
static tv g_range(tm_ctx *c, tv self, tm_args *a) {
    (void)self;
    int64_t start = 0, stop, step = 1;
    for (int i = 0; i < a->npos; i++)
        if (a->pos[i].kind != TV_INT && a->pos[i].kind != TV_BOOL)
            tm_raise(c, "'%s' object cannot be interpreted as an integer", tm_type_name(a->pos[i]));
    if (a->npos == 1) stop = a->pos[0].u.i;
    else if (a->npos == 2 || a->npos == 3) {
        start = a->pos[0].u.i;
        stop = a->pos[1].u.i;
        if (a->npos == 3) step = a->pos[2].u.i;
    } else tm_raise(c, "range expected 1 to 3 arguments, got %d", a->npos);
    if (step == 0) tm_raise(c, "range() arg 3 must not be zero");
    int64_t len = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0) : (start > stop ? (start - stop - step - 1) / -step : 0);
    if (len > 100000) tm_raise(c, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    tv_list *l = tm_list_new(&c->arena, (size_t)len);
    for (int64_t i = 0; i < len; i++) tm_list_push(&c->arena, l, tv_int(start + i * step));
    return tv_listv(l);
}
static tv g_dict(tm_ctx *c, tv self, tm_args *a) {
    (void)self;
    tv_dict *d = tm_dict_new(&c->arena, (size_t)a->nkw);
    if (a->npos > 1) tm_raise(c, "dict expected at most 1 argument, got %d", a->npos);
    if (a->npos == 1) {
        if (a->pos[0].kind != TV_DICT) tm_raise(c, "dict(): only a mapping argument is supported");
        for (size_t i = 0; i < a->pos[0].u.d->n; i++) tm_dict_set(&c->arena, d, a->pos[0].u.d->k[i], a->pos[0].u.d->v[i]);
    }
    for (int i = 0; i < a->nkw; i++) tm_dict_set(&c->arena, d, tv_str(a->kwn[i], strlen(a->kwn[i])), a->kwv[i]);
    return tv_dictv(d);
}
static tv g_namespace(tm_ctx *c, tv self, tm_args *a) {
    tv d = g_dict(c, self, a);
    d.u.d->ns = 1;
    return d;
}
static tv g_raise(tm_ctx *c, tv self, tm_args *a) {
    (void)self;
    tv m = tm_str_of(c, tm_arg(a, 0, "message", tv_str("", 0)));
    tm_raise(c, "%.*s", (int)m.n, m.u.s);
}
static tv g_strftime(tm_ctx *c, tv self, tm_args *a) {
    (void)self;
    tv f = tm_arg(a, 0, NULL, tv_undef("format"));
    if (f.kind != TV_STR) tm_raise(c, "strftime_now needs a format string");
    char *fmt = tm_strndup(&c->arena, f.u.s, f.n);
    time_t now = c->tmpl->now ? (time_t)c->tmpl->now(c->tmpl->now_arg) : time(NULL);
    struct tm tmv;
    localtime_r(&now, &tmv);
    char buf[512];
    size_t k = strftime(buf, sizeof buf, fmt, &tmv);
    return tv_str(tm_strndup(&c->arena, buf, k), k);
}

void tm_install_globals(tm_ctx *c, tm_scope *s) {   // only those the template names
    const rlc_tmpl *t = c->tmpl;
    static const struct { int sym; const char *name; tm_builtin_fn fn; } G[] = {
        {TM_SYM_RANGE, "range", g_range}, {TM_SYM_DICT, "dict", g_dict}, {TM_SYM_NAMESPACE, "namespace", g_namespace},
        {TM_SYM_RAISE, "raise_exception", g_raise}, {TM_SYM_STRFTIME, "strftime_now", g_strftime}};
    for (size_t i = 0; i < sizeof G / sizeof *G; i++)
        if (t->sym_used[G[i].sym]) tm_scope_set(c, s, t->sym[G[i].sym], bound(c, G[i].name, G[i].fn, tv_none()));
}

// ---- tests ----
static tv t_defined(tm_ctx *c, tv x, tm_args *a) { (void)c; (void)a; return tv_bool(x.kind != TV_UNDEF); }
static tv t_undefined(tm_ctx *c, tv x, tm_args *a) { (void)c; (void)a; return tv_bool(x.kind == TV_UNDEF); }
static tv t_none(tm_ctx *c, tv x, tm_args *a) { (void)c; (void)a; return tv_bool(x.kind == TV_NONE); }
static tv t_boolean(tm_ctx *c, tv x, tm_args *a) { (void)c; (void)a; return tv_bool(x.kind == TV_BOOL); }
static tv t_true(tm_ctx *c, tv x, tm_args *a) { (void)c; (void)a; return tv_bool(x.kind == TV_BOOL && x.u.i); }
static tv t_false(tm_ctx *c, tv x, tm_args *a) { (void)c; (void)a; return tv_bool(x.kind == TV_BOOL && !x.u.i); }
static tv t_integer(tm_ctx *c, tv x, tm_args *a) { (void)c; (void)a; return tv_bool(x.kind == TV_INT); }
static tv t_float(tm_ctx *c, tv x, tm_args *a) { (void)c; (void)a; return tv_bool(x.kind == TV_FLOAT); }
static tv t_number(tm_ctx *c, tv x, tm_args *a) { (void)c; (void)a; return tv_bool(x.kind == TV_INT || x.kind == TV_FLOAT || x.kind == TV_BOOL); }
static tv t_string(tm_ctx *c, tv x, tm_args *a) { (void)c; (void)a; return tv_bool(x.kind == TV_STR); }
static tv t_mapping(tm_ctx *c, tv x, tm_args *a) { (void)c; (void)a; return tv_bool(x.kind == TV_DICT && !x.u.d->ns); }
static tv t_iterable(tm_ctx *c, tv x, tm_args *a) {
    (void)c; (void)a;
    return tv_bool(x.kind == TV_STR || x.kind == TV_LIST || (x.kind == TV_DICT && !x.u.d->ns) || x.kind == TV_UNDEF);
}
static tv t_sequence(tm_ctx *c, tv x, tm_args *a) {
    (void)c; (void)a;
    return tv_bool(x.kind == TV_STR || x.kind == TV_LIST || (x.kind == TV_DICT && !x.u.d->ns));
}
static tv t_callable(tm_ctx *c, tv x, tm_args *a) { (void)c; (void)a; return tv_bool(x.kind == TV_FUNC || (x.kind == TV_DICT && x.u.d->ns == 0 && 0)); }
static tv t_escaped(tm_ctx *c, tv x, tm_args *a) { (void)c; (void)x; (void)a; return tv_bool(0); }
static int64_t need_int(tm_ctx *c, tv x, const char *what) {
    if (x.kind == TV_INT || x.kind == TV_BOOL) return x.u.i;
    if (x.kind == TV_UNDEF) tm_undef_fail(c, x);
    tm_raise(c, "%s needs an integer, got %s", what, tm_type_name(x));
}
static tv t_even(tm_ctx *c, tv x, tm_args *a) { (void)a; return tv_bool(need_int(c, x, "'even'") % 2 == 0); }
static tv t_odd(tm_ctx *c, tv x, tm_args *a) { (void)a; return tv_bool(need_int(c, x, "'odd'") % 2 != 0); }
static tv t_divisibleby(tm_ctx *c, tv x, tm_args *a) {
    int64_t d = need_int(c, tm_arg(a, 0, "num", tv_undef("num")), "'divisibleby'");
    if (d == 0) tm_raise(c, "integer division or modulo by zero");
    return tv_bool(need_int(c, x, "'divisibleby'") % d == 0);
}
static tv t_eq(tm_ctx *c, tv x, tm_args *a) { (void)c; return tv_bool(tm_equal(x, tm_arg(a, 0, "other", tv_undef("other")))); }
static tv t_ne(tm_ctx *c, tv x, tm_args *a) { (void)c; return tv_bool(!tm_equal(x, tm_arg(a, 0, "other", tv_undef("other")))); }
static tv t_lt(tm_ctx *c, tv x, tm_args *a) { return tv_bool(tm_compare(c, x, tm_arg(a, 0, "other", tv_undef("other"))) < 0); }
static tv t_le(tm_ctx *c, tv x, tm_args *a) { return tv_bool(tm_compare(c, x, tm_arg(a, 0, "other", tv_undef("other"))) <= 0); }
static tv t_gt(tm_ctx *c, tv x, tm_args *a) { return tv_bool(tm_compare(c, x, tm_arg(a, 0, "other", tv_undef("other"))) > 0); }
static tv t_ge(tm_ctx *c, tv x, tm_args *a) { return tv_bool(tm_compare(c, x, tm_arg(a, 0, "other", tv_undef("other"))) >= 0); }
static tv t_sameas(tm_ctx *c, tv x, tm_args *a) {
    (void)c;
    tv y = tm_arg(a, 0, "other", tv_undef("other"));
    if (x.kind != y.kind) return tv_bool(0);
    if (x.kind == TV_NONE || x.kind == TV_UNDEF) return tv_bool(x.kind == TV_NONE);
    if (x.kind == TV_BOOL) return tv_bool(x.u.i == y.u.i);
    if (x.kind == TV_LIST) return tv_bool(x.u.l == y.u.l);
    if (x.kind == TV_DICT) return tv_bool(x.u.d == y.u.d);
    return tv_bool(0);
}
static tv t_in(tm_ctx *c, tv x, tm_args *a) {
    tv seq = tm_arg(a, 0, "seq", tv_undef("seq"));
    if (seq.kind == TV_STR) {
        if (x.kind != TV_STR) tm_raise(c, "'in <string>' requires string as left operand, not %s", tm_type_name(x));
        return tv_bool(find_sub(seq.u.s, seq.n, x.u.s, x.n) != NULL);
    }
    if (seq.kind == TV_DICT) return tv_bool(tm_dict_getv(seq.u.d, x) != NULL);
    tv it = tm_iterate(c, seq);
    for (size_t i = 0; i < it.u.l->n; i++)
        if (tm_equal(it.u.l->v[i], x)) return tv_bool(1);
    return tv_bool(0);
}
static tv t_lower(tm_ctx *c, tv x, tm_args *a) {
    (void)a;
    tv s = tm_str_of(c, x);
    return tv_bool(tm_equal(tm_py_case(c, s, 0), s));
}
static tv t_upper(tm_ctx *c, tv x, tm_args *a) {
    (void)a;
    tv s = tm_str_of(c, x);
    return tv_bool(tm_equal(tm_py_case(c, s, 1), s));
}
static tv t_filter(tm_ctx *c, tv x, tm_args *a) {
    (void)c; (void)a;
    return tv_bool(x.kind == TV_STR && tm_find_filter(tm_strndup(&c->arena, x.u.s, x.n)) != NULL);
}
static tv t_test(tm_ctx *c, tv x, tm_args *a) {
    (void)c; (void)a;
    return tv_bool(x.kind == TV_STR && tm_find_test(tm_strndup(&c->arena, x.u.s, x.n)) != NULL);
}

static const struct { const char *name; tm_builtin_fn fn; } TESTS[] = {
    {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"boolean", t_boolean}, {"true", t_true},
    {"false", t_false}, {"integer", t_integer}, {"float", t_float}, {"number", t_number}, {"string", t_string},
    {"mapping", t_mapping}, {"iterable", t_iterable}, {"sequence", t_sequence}, {"callable", t_callable},
    {"escaped", t_escaped}, {"even", t_even}, {"odd", t_odd}, {"divisibleby", t_divisibleby}, {"eq", t_eq},
    {"equalto", t_eq}, {"==", t_eq}, {"ne", t_ne}, {"!=", t_ne}, {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt},
    {"le", t_le}, {"<=", t_le}, {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt}, {"ge", t_ge}, {">=", t_ge},
    {"sameas", t_sameas}, {"in", t_in}, {"lower", t_lower}, {"upper", t_upper}, {"filter", t_filter},
    {"test", t_test},
};

tm_builtin_fn tm_find_test(const char *name) {
    for (size_t i = 0; i < sizeof TESTS / sizeof *TESTS; i++)
        if (!strcmp(TESTS[i].name, name)) return TESTS[i].fn;
    return NULL;
}
tv tm_call_test(tm_ctx *c, tm_builtin_fn fn, tv x, tm_args *a) { return fn(c, x, a); }
