// tmpl_eval.c: evaluates the syntax tree: expressions with Python's operator semantics, statements with
// jinja2's scoping (for bodies and macros get their own scope; if blocks do not), loopcontrols, and the
// render entry point (errors unwind here with longjmp and become one line).
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "template/tmpl_internal.h"

void tm_raise(tm_ctx *c, const char *fmt, ...) {
    rlc_sb_printf(c->err, "%s:%d: ", c->tname, c->line);
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tm_puts(c->err, buf);
    longjmp(c->jmp, 1);
}

// ---- scopes ----
static tm_scope *scope_new(tm_ctx *c, tm_scope *parent) {
    tm_scope *s = tm_alloc(&c->arena, sizeof *s);
    s->parent = parent;
    return s;
}
void tm_scope_set(tm_ctx *c, tm_scope *s, const char *name, tv v) {   // name: interned
    for (int i = 0; i < s->n; i++)
        if (s->names[i] == name) { s->vals[i] = v; return; }
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 8;
        const char **nn = tm_alloc_raw(&c->arena, (size_t)nc * sizeof *nn);   // only the first n are ever read
        tv *nv = tm_alloc_raw(&c->arena, (size_t)nc * sizeof *nv);
        if (s->n) {
            memcpy(nn, s->names, (size_t)s->n * sizeof *nn);
            memcpy(nv, s->vals, (size_t)s->n * sizeof *nv);
        }
        s->names = nn;
        s->vals = nv;
        s->cap = nc;
    }
    s->names[s->n] = name;
    s->vals[s->n++] = v;
}
static tv *scope_find(tm_scope *s, const char *name) {   // name: interned
    for (; s; s = s->parent)
        for (int i = s->n - 1; i >= 0; i--)
            if (s->names[i] == name) return &s->vals[i];
    return NULL;
}

// Leaves evaluated in place: a constant or a variable (most operands) costs no call and no indirect jump.
// Neither can fail, so the line for error messages stays the parent's.
static inline tv ev(tm_ctx *c, tm_scope *s, tnode *n) {
    if (n->type == N_CONST) return n->lit;
    if (n->type == N_NAME) {
        tv *v = scope_find(s, n->str);
        return v ? *v : tv_undef(n->str);
    }
    return tm_eval(c, s, n);
}

// ---- arithmetic ----
static int is_num(tv v) { return v.kind == TV_BOOL || v.kind == TV_INT || v.kind == TV_FLOAT; }
static double num_f(tv v) { return v.kind == TV_FLOAT ? v.u.f : (double)v.u.i; }
static const char *OPSYM[] = {"+", "-", "*", "/", "//", "%", "**"};

static tv concat_str(tm_ctx *c, tv a, tv b) {
    if (a.n + b.n > TM_MAX_STRING) tm_raise(c, "string longer than %zu bytes", TM_MAX_STRING);
    char *p = tm_alloc_raw(&c->arena, a.n + b.n + 1);
    memcpy(p, a.u.s, a.n);
    memcpy(p + a.n, b.u.s, b.n);
    return tv_str(p, a.n + b.n);
}

static tv binop(tm_ctx *c, int op, tv a, tv b) {
    if (a.kind == TV_UNDEF) tm_undef_fail(c, a);
    if (b.kind == TV_UNDEF) tm_undef_fail(c, b);
    if (is_num(a) && is_num(b)) {
        int ints = a.kind != TV_FLOAT && b.kind != TV_FLOAT;
        int64_t x = a.u.i, y = b.u.i, r;
        double fx = num_f(a), fy = num_f(b);
        switch (op) {
        case OP_ADD:
            if (ints) { if (__builtin_add_overflow(x, y, &r)) tm_raise(c, "integer overflow"); return tv_int(r); }
            return tv_float(fx + fy);
        case OP_SUB:
            if (ints) { if (__builtin_sub_overflow(x, y, &r)) tm_raise(c, "integer overflow"); return tv_int(r); }
            return tv_float(fx - fy);
        case OP_MUL:
            if (ints) { if (__builtin_mul_overflow(x, y, &r)) tm_raise(c, "integer overflow"); return tv_int(r); }
            return tv_float(fx * fy);
        case OP_DIV:
            if (fy == 0) tm_raise(c, "division by zero");
            return tv_float(fx / fy);
        case OP_FLOORDIV:
            if (ints) {
                if (y == 0) tm_raise(c, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) tm_raise(c, "integer overflow");
                int64_t q = x / y;
                if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
                return tv_int(q);
            }
            if (fy == 0) tm_raise(c, "float floor division by zero");
            return tv_float(floor(fx / fy));
        case OP_MOD:
            if (ints) {
                if (y == 0) tm_raise(c, "integer division or modulo by zero");
                if (y == -1) return tv_int(0);
                int64_t m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) m += y;
                return tv_int(m);
            } else {
                if (fy == 0) tm_raise(c, "float modulo");
                double m = fmod(fx, fy);
                if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
                return tv_float(m);
            }
        case OP_POW:
            if (ints && y >= 0) {
                int64_t acc = 1;
                for (int64_t k = 0; k < y; k++)
                    if (__builtin_mul_overflow(acc, x, &acc)) tm_raise(c, "integer overflow");
                return tv_int(acc);
            }
            return tv_float(pow(fx, fy));
        }
    }
    if (op == OP_ADD && a.kind == TV_STR && b.kind == TV_STR) return concat_str(c, a, b);
    if (op == OP_ADD && a.kind == TV_LIST && b.kind == TV_LIST) {
        tv_list *l = tm_list_new(&c->arena, a.u.l->n + b.u.l->n);
        for (size_t i = 0; i < a.u.l->n; i++) tm_list_push(&c->arena, l, a.u.l->v[i]);
        for (size_t i = 0; i < b.u.l->n; i++) tm_list_push(&c->arena, l, b.u.l->v[i]);
        l->tuple = a.u.l->tuple && b.u.l->tuple;
        if (a.u.l->tuple != b.u.l->tuple) tm_raise(c, "can only concatenate %s (not \"%s\") to %s", tm_type_name(a), tm_type_name(b), tm_type_name(a));
        return tv_listv(l);
    }
    if (op == OP_MUL && (a.kind == TV_STR || a.kind == TV_LIST) && (b.kind == TV_INT || b.kind == TV_BOOL)) {
        tv t = a; a = b; b = t;
    }
    if (op == OP_MUL && (a.kind == TV_INT || a.kind == TV_BOOL) && (b.kind == TV_STR || b.kind == TV_LIST)) {
        int64_t k = a.u.i < 0 ? 0 : a.u.i;
        size_t unit = b.kind == TV_STR ? b.n : b.u.l->n;
        if (unit && (uint64_t)k > TM_MAX_STRING / unit) tm_raise(c, "repetition result too large");
        if (b.kind == TV_STR) {
            char *p = tm_alloc(&c->arena, unit * (size_t)k + 1);
            for (int64_t i = 0; i < k; i++) memcpy(p + (size_t)i * unit, b.u.s, unit);
            return tv_str(p, unit * (size_t)k);
        }
        tv_list *l = tm_list_new(&c->arena, unit * (size_t)k);
        for (int64_t i = 0; i < k; i++)
            for (size_t j = 0; j < unit; j++) tm_list_push(&c->arena, l, b.u.l->v[j]);
        l->tuple = b.u.l->tuple;
        return tv_listv(l);
    }
    if (op == OP_ADD && a.kind == TV_STR) tm_raise(c, "can only concatenate str (not \"%s\") to str", tm_type_name(b));
    if (op == OP_MOD && a.kind == TV_STR) tm_raise(c, "printf-style string formatting ('%%' on a string) is not supported");
    tm_raise(c, "unsupported operand type(s) for %s: '%s' and '%s'", OPSYM[op], tm_type_name(a), tm_type_name(b));
}

static int contains(tm_ctx *c, tv item, tv cont) {
    switch (cont.kind) {
    case TV_STR:
        if (item.kind != TV_STR) tm_raise(c, "'in <string>' requires string as left operand, not %s", tm_type_name(item));
        if (item.n == 0) return 1;
        if (item.n > cont.n) return 0;
        for (size_t i = 0; i + item.n <= cont.n; i++)
            if (cont.u.s[i] == item.u.s[0] && !memcmp(cont.u.s + i, item.u.s, item.n)) return 1;
        return 0;
    case TV_LIST:
        for (size_t i = 0; i < cont.u.l->n; i++)
            if (tm_equal(cont.u.l->v[i], item)) return 1;
        return 0;
    case TV_DICT:
        if (cont.u.d->ns) break;
        if (item.kind == TV_STR) return tm_dict_get(cont.u.d, item.u.s, item.n) != NULL;   // a str equals str keys only
        return tm_dict_getv(cont.u.d, item) != NULL;
    case TV_UNDEF: return 0;
    default: break;
    }
    tm_raise(c, "argument of type '%s' is not iterable", tm_type_name(cont));
}

static int compare_op(tm_ctx *c, int op, tv a, tv b) {
    if (a.kind == TV_STR && b.kind == TV_STR && op <= CMP_NE)   // role == 'user': the common case, inline
        return (a.n == b.n && (a.n == 0 || (a.u.s[0] == b.u.s[0] && !memcmp(a.u.s, b.u.s, a.n)))) == (op == CMP_EQ);
    switch (op) {
    case CMP_EQ: return tm_equal(a, b);
    case CMP_NE: return !tm_equal(a, b);
    case CMP_IN: return contains(c, a, b);
    case CMP_NOTIN: return !contains(c, a, b);
    }
    if ((a.kind == TV_DICT || b.kind == TV_DICT || a.kind == TV_NONE || b.kind == TV_NONE || (a.kind == TV_STR) != (b.kind == TV_STR) ||
         (a.kind == TV_LIST) != (b.kind == TV_LIST)) && a.kind != TV_UNDEF && b.kind != TV_UNDEF) {
        static const char *S[] = {"", "", "<", "<=", ">", ">="};
        tm_raise(c, "'%s' not supported between instances of '%s' and '%s'", S[op], tm_type_name(a), tm_type_name(b));
    }
    int r = tm_compare(c, a, b);
    switch (op) {
    case CMP_LT: return r < 0;
    case CMP_LE: return r <= 0;
    case CMP_GT: return r > 0;
    default: return r >= 0;
    }
}

// Python slice indices for a sequence of length n
static void slice_indices(tm_ctx *c, tv *parts, int64_t n, int64_t *start, int64_t *stop, int64_t *step) {
    *step = 1;
    if (parts[2].kind != TV_NONE && parts[2].kind != TV_UNDEF) {
        if (parts[2].kind != TV_INT) tm_raise(c, "slice indices must be integers or None");
        *step = parts[2].u.i;
        if (*step == 0) tm_raise(c, "slice step cannot be zero");
    }
    int64_t lo = *step < 0 ? -1 : 0, hi = *step < 0 ? n - 1 : n;
    int64_t v[2];
    for (int k = 0; k < 2; k++) {
        tv p = parts[k];
        if (p.kind == TV_NONE || p.kind == TV_UNDEF) {
            v[k] = k == 0 ? (*step < 0 ? hi : lo) : (*step < 0 ? lo : hi);
            continue;
        }
        if (p.kind != TV_INT && p.kind != TV_BOOL) tm_raise(c, "slice indices must be integers or None");
        int64_t x = p.u.i;
        if (x < 0) { x += n; if (x < lo) x = lo; }
        else if (x > hi) x = hi;
        v[k] = x;
    }
    *start = v[0];
    *stop = v[1];
}

static tv do_slice(tm_ctx *c, tv obj, tv *parts) {
    int64_t start, stop, step;
    if (obj.kind == TV_LIST) {
        slice_indices(c, parts, (int64_t)obj.u.l->n, &start, &stop, &step);
        tv_list *l = tm_list_new(&c->arena, 0);
        l->tuple = obj.u.l->tuple;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) tm_list_push(&c->arena, l, obj.u.l->v[i]);
        return tv_listv(l);
    }
    if (obj.kind == TV_STR) {
        tv chars = tm_iterate(c, obj);
        tv_list *cl = chars.u.l;
        slice_indices(c, parts, (int64_t)cl->n, &start, &stop, &step);
        if (step == 1) {
            if (start >= stop) return tv_str("", 0);
            const char *b = cl->v[start].u.s, *e = cl->v[stop - 1].u.s + cl->v[stop - 1].n;
            return tv_str(b, (size_t)(e - b));
        }
        rlc_strbuf sb = {0};
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) tm_put(&sb, cl->v[i].u.s, cl->v[i].n);
        tv r = tv_str(tm_strndup(&c->arena, sb.s ? sb.s : "", sb.n), sb.n);
        rlc_sb_free(&sb);
        return r;
    }
    if (obj.kind == TV_UNDEF) tm_undef_fail(c, obj);
    tm_raise(c, "'%s' object is not subscriptable", tm_type_name(obj));
}

// ---- calls ----
static void eval_args(tm_ctx *c, tm_scope *s, tnode *n, tm_args *a, tv *first) {
    int extra = first ? 1 : 0;
    a->npos = n->nkids + extra;
    a->pos = NULL;   // no arguments (`x is defined`, `x|trim`): nothing allocated
    if (a->npos) a->pos = tm_alloc_raw(&c->arena, (size_t)a->npos * sizeof(tv));
    if (first) a->pos[0] = *first;
    for (int i = 0; i < n->nkids; i++) a->pos[i + extra] = ev(c, s, n->kids[i]);
    a->nkw = n->nkids2;
    a->kwn = n->names;
    a->kwv = NULL;
    if (a->nkw) a->kwv = tm_alloc_raw(&c->arena, (size_t)a->nkw * sizeof(tv));
    for (int i = 0; i < n->nkids2; i++) a->kwv[i] = tm_eval(c, s, n->kids2[i]);
}

static void exec_body(tm_ctx *c, tm_scope *s, tnode **kids, int n);
static tv add_chain(tm_ctx *c, tm_scope *s, tnode *n, rlc_strbuf *direct);

// Output captured into a temporary buffer (macro bodies, block sets, filter blocks). The buffer is a slot of
// the context, not a local of the capturing frame: an error unwinding past that frame still finds and frees it.
static rlc_strbuf *capture_begin(tm_ctx *c, rlc_strbuf **saved) {
    if (c->nlive == (int)(sizeof c->live / sizeof c->live[0])) tm_raise(c, "blocks and macro calls nested too deeply");
    rlc_strbuf *buf = &c->live[c->nlive++];
    memset(buf, 0, sizeof *buf);
    *saved = c->out;
    c->out = buf;
    return buf;
}
static tv capture_end(tm_ctx *c, rlc_strbuf *buf, rlc_strbuf *saved) {
    c->out = saved;
    tv r = tv_str(tm_strndup(&c->arena, buf->s ? buf->s : "", buf->n), buf->n);
    rlc_sb_free(buf);
    c->nlive--;
    return r;
}

tv tm_call_macro(tm_ctx *c, tv_func *f, tm_args *a, tnode *caller_sig, tm_scope *caller_scope) {
    tnode *m = f->macro;
    if (++c->depth > 200) tm_raise(c, "maximum recursion depth exceeded in macro '%s'", f->name);
    tm_scope *s = scope_new(c, f->closure);
    if (a->npos > m->nnames) tm_raise(c, "macro '%s' takes not more than %d argument(s)", f->name, m->nnames);
    for (int i = 0; i < m->nnames; i++) {
        tv v = tv_undef(m->names[i]);
        int set = 0;
        if (i < a->npos) { v = a->pos[i]; set = 1; }
        for (int k = 0; k < a->nkw; k++)
            if (!strcmp(a->kwn[k], m->names[i])) {
                if (set) tm_raise(c, "macro '%s' got multiple values for argument '%s'", f->name, m->names[i]);
                v = a->kwv[k];
                set = 1;
            }
        if (!set && m->kids2 && m->kids2[i]) v = tm_eval(c, s, m->kids2[i]);
        tm_scope_set(c, s, m->names[i], v);
    }
    for (int k = 0; k < a->nkw; k++) {
        int found = 0;
        for (int i = 0; i < m->nnames; i++) found |= !strcmp(a->kwn[k], m->names[i]);
        if (!found) tm_raise(c, "macro '%s' takes no keyword argument '%s'", f->name, a->kwn[k]);
    }
    if (caller_sig) {
        tv_func *cf = tm_alloc(&c->arena, sizeof *cf);
        cf->name = "caller";
        cf->macro = caller_sig;
        cf->closure = caller_scope;
        tv cv = {TV_FUNC, 0, {.fn = cf}};
        tm_scope_set(c, s, c->tmpl->sym[TM_SYM_CALLER], cv);
    }
    rlc_strbuf *saved, *buf = capture_begin(c, &saved);
    int line = c->line;
    exec_body(c, s, m->a->kids, m->a->nkids);
    c->loop_ctl = 0;
    c->line = line;
    c->depth--;
    return capture_end(c, buf, saved);
}

tv tm_call(tm_ctx *c, tv fn, tm_args *a) {
    if (fn.kind == TV_UNDEF) tm_undef_fail(c, fn);
    if (fn.kind != TV_FUNC) tm_raise(c, "'%s' object is not callable", tm_type_name(fn));
    if (fn.u.fn->macro) return tm_call_macro(c, fn.u.fn, a, NULL, NULL);
    return fn.u.fn->fn(c, fn.u.fn->self, a);
}

// apply a chain of N_FILTER nodes whose innermost input is `in` (filter blocks, block sets)
static tv apply_filters(tm_ctx *c, tm_scope *s, tnode *f, tv in) {
    tv v = f->a ? apply_filters(c, s, f->a, in) : in;
    tm_args a;
    eval_args(c, s, f, &a, NULL);
    c->line = f->line;
    return f->fn(c, v, &a);
}

// a + b + c + ...: left to right as Python folds it, but a run of strings is joined once (no intermediate
// strings), and written straight to `direct` when given (a {{ }} of the chain).
static tv add_chain(tm_ctx *c, tm_scope *s, tnode *n, rlc_strbuf *direct) {
    tnode *ops[64];
    int k = 0;
    tnode *x = n;
    while (x->type == N_BINOP && x->op == OP_ADD && k < 63) {
        ops[k++] = x->b;
        x = x->a;
    }
    ops[k++] = x;   // ops[k-1] is the leftmost operand
    tv acc = ev(c, s, ops[k - 1]);
    int i = k - 2;
    if (acc.kind == TV_STR) {
        tv part_small[64];
        int np = 0;
        size_t len = acc.n;
        part_small[np++] = acc;
        for (; i >= 0; i--) {
            tv b = ev(c, s, ops[i]);
            if (b.kind != TV_STR) {
                c->line = n->line;
                binop(c, OP_ADD, acc, b);   // str + non-str: raises as Python does
            }
            part_small[np++] = b;
            len += b.n;
            if (len > TM_MAX_STRING) tm_raise(c, "string longer than %zu bytes", TM_MAX_STRING);
        }
        if (direct) {
            for (int j = 0; j < np; j++) tm_put(direct, part_small[j].u.s, part_small[j].n);
            return tv_none();
        }
        char *p = tm_alloc_raw(&c->arena, len + 1), *q = p;
        for (int j = 0; j < np; j++) {
            if (part_small[j].n) memcpy(q, part_small[j].u.s, part_small[j].n);
            q += part_small[j].n;
        }
        *q = 0;
        return tv_str(p, len);
    }
    for (; i >= 0; i--) {
        tv b = ev(c, s, ops[i]);
        c->line = n->line;
        acc = binop(c, OP_ADD, acc, b);
    }
    if (direct) {
        if (acc.kind == TV_STR) tm_put(direct, acc.u.s, acc.n);
        else tm_to_str(c, acc, direct);
        return tv_none();
    }
    return acc;
}

// ---- expressions ----
// the cases with large locals live out of line, keeping tm_eval's frame small (it recurses for every node)
static __attribute__((noinline)) tv eval_n_slice(tm_ctx *c, tm_scope *s, tnode *n) {
        tv o = tm_eval(c, s, n->a), parts[3];
        for (int i = 0; i < 3; i++) parts[i] = n->kids[i] ? tm_eval(c, s, n->kids[i]) : tv_none();
        c->line = n->line;
        return do_slice(c, o, parts);
}
static __attribute__((noinline)) tv eval_n_call(tm_ctx *c, tm_scope *s, tnode *n) {
        tv fn = tm_eval(c, s, n->a);
        tm_args a;
        eval_args(c, s, n, &a, NULL);
        c->line = n->line;
        return tm_call(c, fn, &a);
}
static __attribute__((noinline)) tv eval_n_filter(tm_ctx *c, tm_scope *s, tnode *n) {
        tv v = ev(c, s, n->a);
        tm_args a;
        eval_args(c, s, n, &a, NULL);
        c->line = n->line;
        return n->fn(c, v, &a);
}
static __attribute__((noinline)) tv eval_n_test(tm_ctx *c, tm_scope *s, tnode *n) {
        tv v = ev(c, s, n->a);
        tm_args a;
        eval_args(c, s, n, &a, NULL);
        c->line = n->line;
        int r = tm_truthy(tm_call_test(c, n->fn, v, &a));
        return tv_bool(n->op ? !r : r);
}
static __attribute__((noinline)) tv eval_n_concat(tm_ctx *c, tm_scope *s, tnode *n) {   // str() of each part, joined in one arena string
        tv part_small[8], *part = n->nkids <= 8 ? part_small : tm_alloc_raw(&c->arena, (size_t)n->nkids * sizeof(tv));
        size_t len = 0;
        for (int i = 0; i < n->nkids; i++) {
            part[i] = tm_str_of(c, tm_eval(c, s, n->kids[i]));
            len += part[i].n;
            if (len > TM_MAX_STRING) tm_raise(c, "string longer than %zu bytes", TM_MAX_STRING);
        }
        char *p = tm_alloc_raw(&c->arena, len + 1), *q = p;
        for (int i = 0; i < n->nkids; i++) {
            if (part[i].n) memcpy(q, part[i].u.s, part[i].n);
            q += part[i].n;
        }
        *q = 0;
        return tv_str(p, len);
}
static __attribute__((noinline)) tv eval_n_list(tm_ctx *c, tm_scope *s, tnode *n) {
        tv_list *l = tm_list_new(&c->arena, (size_t)n->nkids);
        l->tuple = n->type == N_TUPLE;
        for (int i = 0; i < n->nkids; i++) tm_list_push(&c->arena, l, tm_eval(c, s, n->kids[i]));
        return tv_listv(l);
}
static __attribute__((noinline)) tv eval_n_dict(tm_ctx *c, tm_scope *s, tnode *n) {
        tv_dict *d = tm_dict_new(&c->arena, (size_t)n->nkids);
        for (int i = 0; i < n->nkids; i++) {
            tv k = tm_eval(c, s, n->kids[i]);
            if (k.kind == TV_LIST && !k.u.l->tuple) tm_raise(c, "unhashable type: 'list'");
            if (k.kind == TV_DICT) tm_raise(c, "unhashable type: 'dict'");
            tm_dict_set(&c->arena, d, k, tm_eval(c, s, n->kids2[i]));
        }
        return tv_dictv(d);
}

static __attribute__((noinline)) tv eval_n_unary(tm_ctx *c, tm_scope *s, tnode *n) {
        tv a = tm_eval(c, s, n->a);
        c->line = n->line;
        if (a.kind == TV_UNDEF) tm_undef_fail(c, a);
        if (a.kind == TV_FLOAT) return tv_float(n->type == N_NEG ? -a.u.f : a.u.f);
        if (a.kind == TV_INT || a.kind == TV_BOOL) {
            if (n->type == N_NEG && a.u.i == INT64_MIN) tm_raise(c, "integer overflow");
            return tv_int(n->type == N_NEG ? -a.u.i : a.u.i);
        }
        tm_raise(c, "bad operand type for unary %s: '%s'", n->type == N_NEG ? "-" : "+", tm_type_name(a));
}
static __attribute__((noinline)) tv eval_n_compare(tm_ctx *c, tm_scope *s, tnode *n) {
        tv a = ev(c, s, n->kids[0]);
        for (int i = 1; i < n->nkids; i++) {
            tv b = ev(c, s, n->kids[i]);
            c->line = n->line;
            if (!compare_op(c, n->ops[i - 1], a, b)) return tv_bool(0);
            a = b;
        }
        return tv_bool(1);
}
static __attribute__((noinline)) tv eval_n_binop(tm_ctx *c, tm_scope *s, tnode *n) {
        if (n->op == OP_ADD && n->a->type == N_BINOP && n->a->op == OP_ADD) return add_chain(c, s, n, NULL);
        tv a = ev(c, s, n->a), b = ev(c, s, n->b);
        c->line = n->line;
        return binop(c, n->op, a, b);
}
static __attribute__((noinline)) tv eval_n_getitem(tm_ctx *c, tm_scope *s, tnode *n) {
        tv o = ev(c, s, n->a), k = ev(c, s, n->b);
        c->line = n->line;
        return tm_get_item(c, o, k);
}

tv tm_eval(tm_ctx *c, tm_scope *s, tnode *n) {
    c->line = n->line;
    switch (n->type) {
    case N_CONST: return n->lit;
    case N_NAME: {
        tv *v = scope_find(s, n->str);
        return v ? *v : tv_undef(n->str);
    }
    case N_GETATTR: {
        tv o = ev(c, s, n->a);
        c->line = n->line;
        if (o.kind == TV_DICT && !n->op) {   // a name no dict method has (the parser's verdict): an item
            tv *v = tm_dict_get(o.u.d, n->str, n->slen);
            if (v) return *v;
        }
        return tm_get_attr(c, o, n->str, n->slen);
    }
    case N_GETITEM:
        if (n->b->type == N_CONST && n->b->lit.kind == TV_STR) {   // message['role']: a dict item at once
            tv o = ev(c, s, n->a);
            c->line = n->line;
            if (o.kind == TV_DICT && !o.u.d->ns) {
                tv *v = tm_dict_get(o.u.d, n->b->lit.u.s, n->b->lit.n);
                if (v) return *v;
            }
            return tm_get_item(c, o, n->b->lit);
        }
        return eval_n_getitem(c, s, n);
    case N_SLICE: return eval_n_slice(c, s, n);
    case N_CALL: return eval_n_call(c, s, n);
    case N_FILTER: return eval_n_filter(c, s, n);
    case N_TEST: return eval_n_test(c, s, n);
    case N_BINOP: return eval_n_binop(c, s, n);
    case N_NEG: case N_POS: return eval_n_unary(c, s, n);
    case N_AND: {
        tv a = ev(c, s, n->a);
        return tm_truthy(a) ? ev(c, s, n->b) : a;
    }
    case N_OR: {
        tv a = ev(c, s, n->a);
        return tm_truthy(a) ? a : ev(c, s, n->b);
    }
    case N_NOT: return tv_bool(!tm_truthy(ev(c, s, n->a)));
    case N_COMPARE: return eval_n_compare(c, s, n);
    case N_CONCAT: return eval_n_concat(c, s, n);
    case N_COND:
        if (tm_truthy(ev(c, s, n->a))) return ev(c, s, n->b);
        return n->c ? tm_eval(c, s, n->c) : tv_undef(NULL);
    case N_LIST: case N_TUPLE: return eval_n_list(c, s, n);
    case N_DICT: return eval_n_dict(c, s, n);
    default: tm_raise(c, "internal: unexpected node type %d in an expression", n->type);
    }
}

// ---- statements ----
static void assign(tm_ctx *c, tm_scope *s, tnode *target, tv v) {
    if (target->type == N_NAME) {
        tm_scope_set(c, s, target->str, v);
    } else if (target->type == N_NSREF) {
        tv *ns = scope_find(s, target->str);
        if (!ns || ns->kind != TV_DICT || !ns->u.d->ns) tm_raise(c, "cannot assign attribute on non-namespace object");
        tm_dict_set(&c->arena, ns->u.d, tv_str(target->b->str, target->b->slen), v);
    } else {   // tuple unpacking
        tv it = tm_iterate(c, v);
        if ((int)it.u.l->n != target->nkids)
            tm_raise(c, it.u.l->n > (size_t)target->nkids ? "too many values to unpack (expected %d)" : "not enough values to unpack (expected %d)", target->nkids);
        for (int i = 0; i < target->nkids; i++) assign(c, s, target->kids[i], it.u.l->v[i]);
    }
}

static tv capture(tm_ctx *c, tm_scope *s, tnode **kids, int n) {
    rlc_strbuf *saved, *buf = capture_begin(c, &saved);
    exec_body(c, s, kids, n);
    return capture_end(c, buf, saved);
}

static void exec_for(tm_ctx *c, tm_scope *s, tnode *n) {
    tv seq = tm_iterate(c, tm_eval(c, s, n->b));
    tm_scope *ls = scope_new(c, s);
    tv_list *items = seq.u.l;
    if (n->c) {   // loop filter: evaluated with the target bound, before `loop` exists
        tv_list *kept = tm_list_new(&c->arena, items->n);
        for (size_t i = 0; i < items->n; i++) {
            assign(c, ls, n->a, items->v[i]);
            if (tm_truthy(tm_eval(c, ls, n->c))) tm_list_push(&c->arena, kept, items->v[i]);
        }
        items = kept;
        ls = scope_new(c, s);
    }
    if (items->n == 0) {
        exec_body(c, s, n->kids2, n->nkids2);
        return;
    }
    tm_loop *lp = tm_alloc(&c->arena, sizeof *lp);
    lp->items = items;
    lp->changed_last = tv_undef(NULL);
    tv lv = {TV_LOOP, 0, {.loop = lp}};
    tm_scope_set(c, ls, c->tmpl->sym[TM_SYM_LOOP], lv);
    for (size_t i = 0; i < items->n; i++) {
        if (++c->steps > TM_MAX_STEPS) tm_raise(c, "the template ran more than %lld statements", TM_MAX_STEPS);
        lp->index0 = i;
        assign(c, ls, n->a, items->v[i]);
        exec_body(c, ls, n->kids, n->nkids);
        if (c->loop_ctl == 1) { c->loop_ctl = 0; break; }
        c->loop_ctl = 0;
    }
}

static void exec_node(tm_ctx *c, tm_scope *s, tnode *n) {
    c->line = n->line;
    if (++c->steps > TM_MAX_STEPS) tm_raise(c, "the template ran more than %lld statements", TM_MAX_STEPS);
    if (c->out->n > TM_MAX_STRING) tm_raise(c, "the output is longer than %zu bytes", TM_MAX_STRING);
    switch (n->type) {
    case N_DATA: tm_put(c->out, n->str, n->slen); return;
    case N_OUTPUT: {
        if (n->a->type == N_BINOP && n->a->op == OP_ADD) {
            add_chain(c, s, n->a, c->out);
            return;
        }
        if (n->a->type == N_FILTER && n->a->fn == tm_f_tojson) {   // {{ x|tojson }}: dumped straight into the output
            tnode *f = n->a;
            tv v = ev(c, s, f->a);
            tm_args a;
            eval_args(c, s, f, &a, NULL);
            c->line = f->line;
            tm_tojson_into(c, v, &a, c->out);
            return;
        }
        tv v = ev(c, s, n->a);
        if (v.kind == TV_STR) tm_put(c->out, v.u.s, v.n);
        else tm_to_str(c, v, c->out);
        return;
    }
    case N_IF:
        if (tm_truthy(ev(c, s, n->a))) exec_body(c, s, n->kids, n->nkids);
        else exec_body(c, s, n->kids2, n->nkids2);
        return;
    case N_FOR: exec_for(c, s, n); return;
    case N_SET: assign(c, s, n->a, ev(c, s, n->b)); return;
    case N_SETBLOCK: {
        tv v = capture(c, s, n->kids, n->nkids);
        if (n->c) v = apply_filters(c, s, n->c, v);
        assign(c, s, n->a, v);
        return;
    }
    case N_MACRO: {
        tv_func *f = tm_alloc(&c->arena, sizeof *f);
        f->name = n->str;
        f->macro = n;
        f->closure = s;
        tv v = {TV_FUNC, 0, {.fn = f}};
        tm_scope_set(c, s, n->str, v);
        return;
    }
    case N_CALLBLOCK: {
        tnode *call = n->a;
        tv fn = tm_eval(c, s, call->a);
        c->line = n->line;
        if (fn.kind != TV_FUNC || !fn.u.fn->macro) tm_raise(c, "{%% call %%} needs a macro to call");
        tm_args a;
        eval_args(c, s, call, &a, NULL);
        tv r = tm_call_macro(c, fn.u.fn, &a, n->b, s);
        tm_put(c->out, r.u.s, r.n);
        return;
    }
    case N_FILTERBLOCK: {
        tv v = apply_filters(c, s, n->c, capture(c, s, n->kids, n->nkids));
        tm_to_str(c, v, c->out);
        return;
    }
    case N_BREAK: c->loop_ctl = 1; return;
    case N_CONTINUE: c->loop_ctl = 2; return;
    case N_BODY: exec_body(c, s, n->kids, n->nkids); return;
    case N_WITH: {
        tm_scope *ws = scope_new(c, s);
        for (int i = 0; i < n->nkids2; i++) assign(c, ws, n->a->kids[i], tm_eval(c, s, n->kids2[i]));
        exec_body(c, ws, n->kids, n->nkids);
        return;
    }
    default: tm_raise(c, "internal: unexpected node type %d in a statement", n->type);
    }
}

static void exec_body(tm_ctx *c, tm_scope *s, tnode **kids, int n) {
    for (int i = 0; i < n && !c->loop_ctl; i++) exec_node(c, s, kids[i]);
}

int rlc_tmpl_render_vars(const rlc_tmpl *t, int nv, const char *const *names, const cJSON *const *values,
                         rlc_strbuf *out, rlc_strbuf *err) {
    tm_ctx ctx, *c = &ctx;   // on this frame: a render makes no heap allocation it can avoid
    memset(c, 0, offsetof(tm_ctx, live));
    // the first 16 KB of values live on this stack frame: most renders then make no heap chunk at all
    union { tm_chunk ch; unsigned char b[sizeof(tm_chunk) + 16384]; } first;
    first.ch.next = NULL;
    first.ch.used = 0;
    first.ch.cap = 16384;
    c->arena.head = c->arena.borrowed = &first.ch;
    c->out = out;
    c->err = err;
    c->tname = t->name;
    c->tmpl = t;
    c->line = 1;
    if (setjmp(c->jmp)) {
        for (int i = 0; i < c->nlive; i++) rlc_sb_free(&c->live[i]);   // captures in progress
        rlc_sb_free(&c->scratch);
        tm_arena_free(&c->arena);
        return -1;
    }
    c->globals = scope_new(c, NULL);
    tm_install_globals(c, c->globals);
    tm_scope *vs = scope_new(c, c->globals);
    for (int i = 0; i < nv; i++) {
        const char *sym = names[i] ? tm_sym_find(t, names[i]) : NULL;
        if (sym) tm_scope_set(c, vs, sym, tm_from_cjson(&c->arena, values[i]));   // unnamed variables are never read
    }
    tm_scope *root = scope_new(c, vs);
    exec_body(c, root, t->root->kids, t->root->nkids);
    c->loop_ctl = 0;
    rlc_sb_free(&c->scratch);
    tm_arena_free(&c->arena);
    return 0;
}

int rlc_tmpl_render(const rlc_tmpl *t, const cJSON *vars, rlc_strbuf *out, rlc_strbuf *err) {
    int n = 0;
    for (const cJSON *it = vars ? vars->child : NULL; it; it = it->next) n++;
    const char **names = rlc_malloc(((size_t)n + 1) * sizeof *names);
    const cJSON **values = rlc_malloc(((size_t)n + 1) * sizeof *values);
    n = 0;
    for (const cJSON *it = vars ? vars->child : NULL; it; it = it->next) {
        names[n] = it->string;
        values[n++] = it;
    }
    int rc = rlc_tmpl_render_vars(t, n, names, values, out, err);
    free(names);
    free(values);
    return rc;
}
