// tmpl_parse.c: recursive-descent parser for the jinja2 grammar chat templates use, with jinja2's operator
// precedence (or < and < not < comparisons < + - < ~ < * / // % < ** < unary - < filters/tests/postfix).
// Filters and tests are resolved here, so an unknown one is a parse error as in jinja2.
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "template/tmpl_internal.h"

typedef struct {
    tm_arena *a;
    rlc_tmpl *tmpl;
    tm_tok *t;
    int nt, pos;
    const char *name;
    rlc_strbuf *err;
    jmp_buf jmp;
    int depth;
} parser;

__attribute__((noreturn, format(printf, 2, 3))) static void perr(parser *P, const char *fmt, ...) {
    rlc_sb_printf(P->err, "%s:%d: ", P->name, P->t[P->pos].line);
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tm_puts(P->err, buf);
    longjmp(P->jmp, 1);
}

static tm_tok *cur(parser *P) { return &P->t[P->pos]; }
static int is_op(parser *P, const char *op) {
    tm_tok *t = cur(P);
    return t->type == T_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}
static int is_name(parser *P, const char *nm) {
    tm_tok *t = cur(P);
    return t->type == T_NAME && !strcmp(t->s, nm);
}
static int next_is_name(parser *P, const char *nm) {
    tm_tok *t = &P->t[P->pos + 1 < P->nt ? P->pos + 1 : P->pos];
    return t->type == T_NAME && !strcmp(t->s, nm);
}
static const char *tok_desc(tm_tok *t) {
    switch (t->type) {
    case T_EOF: return "end of template";
    case T_DATA: return "template data";
    case T_VAR_BEGIN: return "'{{'";
    case T_VAR_END: return "end of print statement";
    case T_BLOCK_BEGIN: return "'{%'";
    case T_BLOCK_END: return "end of statement block";
    case T_STRING: return "string";
    case T_INT: return "integer";
    case T_FLOAT: return "float";
    default: return NULL;
    }
}
__attribute__((noreturn)) static void unexpected(parser *P, const char *expected) {
    tm_tok *t = cur(P);
    const char *d = tok_desc(t);
    if (d) perr(P, "unexpected %s, expected %s", d, expected);
    perr(P, "unexpected '%.*s', expected %s", (int)t->n, t->s, expected);
}
static void expect_op(parser *P, const char *op) {
    if (!is_op(P, op)) {
        char buf[16];
        snprintf(buf, sizeof buf, "'%s'", op);
        unexpected(P, buf);
    }
    P->pos++;
}
static const char *expect_name(parser *P) {
    if (cur(P)->type != T_NAME) unexpected(P, "a name");
    return cur(P)->s;
}
static void expect_block_end(parser *P) {
    if (cur(P)->type != T_BLOCK_END) unexpected(P, "end of statement block");
    P->pos++;
}

static tnode *node(parser *P, int type) {
    tnode *n = tm_alloc(P->a, sizeof *n);
    n->type = type;
    n->line = cur(P)->line;
    return n;
}

// growable node arrays during parsing
typedef struct { tnode **v; int n, cap; } nvec;
static void nv_push(parser *P, nvec *v, tnode *x) {
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 8;
        tnode **nv = tm_alloc(P->a, (size_t)nc * sizeof *nv);
        if (v->n) memcpy(nv, v->v, (size_t)v->n * sizeof *nv);
        v->v = nv;
        v->cap = nc;
    }
    v->v[v->n++] = x;
}
typedef struct { const char **v; int n, cap; } svec;
static void sv_push(parser *P, svec *v, const char *x) {
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 8;
        const char **nv = tm_alloc(P->a, (size_t)nc * sizeof *nv);
        if (v->n) memcpy(nv, v->v, (size_t)v->n * sizeof *nv);
        v->v = nv;
        v->cap = nc;
    }
    v->v[v->n++] = x;
}

static tnode *parse_expr(parser *P);
static tnode *parse_unary(parser *P, int with_filter);
static tnode *parse_or(parser *P);

// call arguments: (a, b, k=v); the '(' is current
static void parse_args(parser *P, tnode *n) {
    expect_op(P, "(");
    nvec pos = {0}, kwv = {0};
    svec kwn = {0};
    while (!is_op(P, ")")) {
        if (pos.n || kwn.n) expect_op(P, ",");
        if (is_op(P, ")")) break;
        if (is_op(P, "*") || is_op(P, "**")) perr(P, "*args and **kwargs in calls are not supported");
        if (cur(P)->type == T_NAME && P->t[P->pos + 1].type == T_OP && P->t[P->pos + 1].n == 1 && P->t[P->pos + 1].s[0] == '=') {
            sv_push(P, &kwn, cur(P)->s);
            P->pos += 2;
            nv_push(P, &kwv, parse_expr(P));
        } else {
            if (kwn.n) perr(P, "invalid syntax for function call expression (positional argument after keyword)");
            nv_push(P, &pos, parse_expr(P));
        }
    }
    expect_op(P, ")");
    n->kids = pos.v;
    n->nkids = pos.n;
    n->kids2 = kwv.v;
    n->nkids2 = kwv.n;
    n->names = kwn.v;
    n->nnames = kwn.n;
}

static tnode *parse_primary(parser *P) {
    tm_tok *t = cur(P);
    tnode *n;
    if (++P->depth > 200) perr(P, "expression nested too deeply");
    switch (t->type) {
    case T_NAME:
        n = node(P, N_CONST);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True")) n->lit = tv_bool(1);
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False")) n->lit = tv_bool(0);
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) n->lit = tv_none();
        else {
            n->type = N_NAME;
            n->str = tm_intern(P->tmpl, t->s);
            n->slen = t->n;
        }
        P->pos++;
        break;
    case T_STRING: {
        n = node(P, N_CONST);
        // adjacent string literals concatenate
        rlc_strbuf sb = {0};
        while (cur(P)->type == T_STRING) {
            tm_put(&sb, cur(P)->s, cur(P)->n);
            P->pos++;
        }
        n->lit = tv_str(tm_strndup(P->a, sb.s ? sb.s : "", sb.n), sb.n);
        rlc_sb_free(&sb);
        break;
    }
    case T_INT: n = node(P, N_CONST); n->lit = tv_int(t->i); P->pos++; break;
    case T_FLOAT: n = node(P, N_CONST); n->lit = tv_float(t->f); P->pos++; break;
    case T_OP:
        if (is_op(P, "(")) {
            P->pos++;
            if (is_op(P, ")")) {   // empty tuple
                P->pos++;
                n = node(P, N_TUPLE);
                break;
            }
            tnode *e = parse_expr(P);
            if (is_op(P, ",")) {
                nvec items = {0};
                nv_push(P, &items, e);
                while (is_op(P, ",")) {
                    P->pos++;
                    if (is_op(P, ")")) break;
                    nv_push(P, &items, parse_expr(P));
                }
                n = node(P, N_TUPLE);
                n->kids = items.v;
                n->nkids = items.n;
            } else {
                n = e;
            }
            expect_op(P, ")");
            break;
        }
        if (is_op(P, "[")) {
            n = node(P, N_LIST);
            P->pos++;
            nvec items = {0};
            while (!is_op(P, "]")) {
                if (items.n) expect_op(P, ",");
                if (is_op(P, "]")) break;
                nv_push(P, &items, parse_expr(P));
            }
            P->pos++;
            n->kids = items.v;
            n->nkids = items.n;
            break;
        }
        if (is_op(P, "{")) {
            n = node(P, N_DICT);
            P->pos++;
            nvec ks = {0}, vs = {0};
            while (!is_op(P, "}")) {
                if (ks.n) expect_op(P, ",");
                if (is_op(P, "}")) break;
                nv_push(P, &ks, parse_expr(P));
                expect_op(P, ":");
                nv_push(P, &vs, parse_expr(P));
            }
            P->pos++;
            n->kids = ks.v;
            n->nkids = ks.n;
            n->kids2 = vs.v;
            n->nkids2 = vs.n;
            break;
        }
        unexpected(P, "an expression");
    default: unexpected(P, "an expression");
    }
    P->depth--;
    return n;
}

// x[...] after '[': an index or a slice
static tnode *parse_subscript(parser *P, tnode *obj) {
    tnode *n = node(P, N_GETITEM);
    expect_op(P, "[");
    tnode *parts[3] = {0};
    int k = 0, is_slice = 0;
    for (;;) {
        if (is_op(P, ":")) {
            is_slice = 1;
            if (++k > 2) perr(P, "a slice has at most three parts");
            P->pos++;
            continue;
        }
        if (is_op(P, "]")) break;
        if (parts[k]) unexpected(P, "']'");
        parts[k] = parse_expr(P);
        if (!is_slice && is_op(P, ",")) perr(P, "tuple subscripts are not supported");
    }
    P->pos++;
    n->a = obj;
    if (is_slice) {
        n->type = N_SLICE;
        n->kids = tm_alloc(P->a, 3 * sizeof(tnode *));
        for (int i = 0; i < 3; i++) n->kids[i] = parts[i];
        n->nkids = 3;
    } else {
        if (!parts[0]) perr(P, "expected an expression in the subscript");
        n->b = parts[0];
    }
    return n;
}

static tnode *parse_postfix(parser *P, tnode *n) {
    for (;;) {
        if (is_op(P, ".")) {
            P->pos++;
            tm_tok *t = cur(P);
            if (t->type == T_NAME) {
                tnode *g = node(P, N_GETATTR);
                g->a = n;
                g->str = t->s;
                g->slen = t->n;
                P->pos++;
                n = g;
            } else if (t->type == T_INT) {
                tnode *g = node(P, N_GETITEM);
                g->a = n;
                g->b = node(P, N_CONST);
                g->b->lit = tv_int(t->i);
                P->pos++;
                n = g;
            } else {
                unexpected(P, "a name after '.'");
            }
        } else if (is_op(P, "[")) {
            n = parse_subscript(P, n);
        } else if (is_op(P, "(")) {
            tnode *c = node(P, N_CALL);
            c->a = n;
            parse_args(P, c);
            n = c;
        } else {
            return n;
        }
    }
}

static tnode *parse_filter(parser *P, tnode *n, int start_inline) {
    while (start_inline || is_op(P, "|")) {
        if (!start_inline) P->pos++;
        start_inline = 0;
        tnode *f = node(P, N_FILTER);
        rlc_strbuf nm = {0};
        tm_puts(&nm, expect_name(P));
        P->pos++;
        while (is_op(P, ".")) {   // dotted filter names
            P->pos++;
            tm_putc(&nm, '.');
            tm_puts(&nm, expect_name(P));
            P->pos++;
        }
        f->str = tm_strndup(P->a, nm.s, nm.n);
        f->slen = nm.n;
        rlc_sb_free(&nm);
        f->fn = tm_find_filter(f->str);
        if (!f->fn) {
            P->pos--;
            perr(P, "No filter named '%s'.", f->str);
        }
        if (is_op(P, "(")) parse_args(P, f);
        f->a = n;
        n = f;
    }
    return n;
}

static tnode *parse_test(parser *P, tnode *n) {
    tnode *t = node(P, N_TEST);
    P->pos++;   // 'is'
    if (is_name(P, "not")) {
        t->op = 1;
        P->pos++;
    }
    const char *nm = expect_name(P);
    // `is none` / `is true`...: these names are also literals, still test names here
    t->str = nm;
    t->slen = strlen(nm);
    t->fn = tm_find_test(nm);
    if (!t->fn) perr(P, "No test named '%s'.", nm);
    P->pos++;
    while (is_op(P, ".")) perr(P, "dotted test names are not supported");
    tm_tok *c = cur(P);
    if (is_op(P, "(")) {
        parse_args(P, t);
    } else if ((c->type == T_NAME || c->type == T_STRING || c->type == T_INT || c->type == T_FLOAT || is_op(P, "[") ||
                is_op(P, "{")) &&
               !(c->type == T_NAME && (!strcmp(c->s, "else") || !strcmp(c->s, "or") || !strcmp(c->s, "and") ||
                                       !strcmp(c->s, "if") || !strcmp(c->s, "is") || !strcmp(c->s, "in") ||
                                       !strcmp(c->s, "not")))) {
        tnode *arg = parse_postfix(P, parse_primary(P));
        t->kids = tm_alloc(P->a, sizeof(tnode *));
        t->kids[0] = arg;
        t->nkids = 1;
    }
    t->a = n;
    return t;
}

static tnode *parse_filter_expr(parser *P, tnode *n) {
    for (;;) {
        if (is_op(P, "|")) n = parse_filter(P, n, 0);
        else if (is_name(P, "is")) n = parse_test(P, n);
        else if (is_op(P, "(")) {
            tnode *c = node(P, N_CALL);
            c->a = n;
            parse_args(P, c);
            n = c;
        } else return n;
    }
}

static tnode *parse_unary(parser *P, int with_filter) {
    tnode *n;
    if (++P->depth > 200) perr(P, "expression nested too deeply");
    if (is_op(P, "-") || is_op(P, "+")) {
        n = node(P, is_op(P, "-") ? N_NEG : N_POS);
        P->pos++;
        n->a = parse_unary(P, 0);
    } else {
        n = parse_postfix(P, parse_primary(P));
    }
    if (with_filter) n = parse_filter_expr(P, n);
    P->depth--;
    return n;
}

static tnode *binop(parser *P, int op, tnode *a, tnode *b) {
    tnode *n = node(P, N_BINOP);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}
static tnode *parse_pow(parser *P) {
    tnode *n = parse_unary(P, 1);
    while (is_op(P, "**")) {
        P->pos++;
        n = binop(P, OP_POW, n, parse_unary(P, 1));
    }
    return n;
}
static tnode *parse_math2(parser *P) {
    tnode *n = parse_pow(P);
    for (;;) {
        int op = is_op(P, "*") ? OP_MUL : is_op(P, "/") ? OP_DIV : is_op(P, "//") ? OP_FLOORDIV : is_op(P, "%") ? OP_MOD : -1;
        if (op < 0) return n;
        P->pos++;
        n = binop(P, op, n, parse_pow(P));
    }
}
static tnode *parse_concat(parser *P) {
    tnode *first = parse_math2(P);
    if (!is_op(P, "~")) return first;
    nvec v = {0};
    nv_push(P, &v, first);
    while (is_op(P, "~")) {
        P->pos++;
        nv_push(P, &v, parse_math2(P));
    }
    tnode *n = node(P, N_CONCAT);
    n->kids = v.v;
    n->nkids = v.n;
    return n;
}
static tnode *parse_math1(parser *P) {
    tnode *n = parse_concat(P);
    for (;;) {
        int op = is_op(P, "+") ? OP_ADD : is_op(P, "-") ? OP_SUB : -1;
        if (op < 0) return n;
        P->pos++;
        n = binop(P, op, n, parse_concat(P));
    }
}
static tnode *parse_compare(parser *P) {
    tnode *first = parse_math1(P);
    nvec v = {0};
    int ops[64], nops = 0;
    nv_push(P, &v, first);
    for (;;) {
        int op = is_op(P, "==") ? CMP_EQ : is_op(P, "!=") ? CMP_NE : is_op(P, "<") ? CMP_LT : is_op(P, "<=") ? CMP_LE
                 : is_op(P, ">") ? CMP_GT : is_op(P, ">=") ? CMP_GE : is_name(P, "in") ? CMP_IN
                 : (is_name(P, "not") && next_is_name(P, "in")) ? CMP_NOTIN : -1;
        if (op < 0) break;
        if (nops == 64) perr(P, "too many chained comparisons");
        P->pos += op == CMP_NOTIN ? 2 : 1;
        ops[nops++] = op;
        nv_push(P, &v, parse_math1(P));
    }
    if (!nops) return first;
    tnode *n = node(P, N_COMPARE);
    n->kids = v.v;
    n->nkids = v.n;
    n->ops = tm_alloc(P->a, (size_t)nops * sizeof(int));
    memcpy(n->ops, ops, (size_t)nops * sizeof(int));
    return n;
}
static tnode *parse_not(parser *P) {
    if (is_name(P, "not")) {
        tnode *n = node(P, N_NOT);
        P->pos++;
        if (++P->depth > 200) perr(P, "expression nested too deeply");
        n->a = parse_not(P);
        P->depth--;
        return n;
    }
    return parse_compare(P);
}
static tnode *parse_and(parser *P) {
    tnode *n = parse_not(P);
    while (is_name(P, "and")) {
        tnode *x = node(P, N_AND);
        P->pos++;
        x->a = n;
        x->b = parse_not(P);
        n = x;
    }
    return n;
}
static tnode *parse_or(parser *P) {
    tnode *n = parse_and(P);
    while (is_name(P, "or")) {
        tnode *x = node(P, N_OR);
        P->pos++;
        x->a = n;
        x->b = parse_and(P);
        n = x;
    }
    return n;
}
// condexpr: or ('if' or ('else' expr)?)?
static tnode *parse_expr(parser *P) {
    if (++P->depth > 200) perr(P, "expression nested too deeply");
    tnode *n = parse_or(P);
    while (is_name(P, "if")) {
        tnode *c = node(P, N_COND);
        P->pos++;
        c->a = parse_or(P);   // the condition
        c->b = n;             // value when true
        if (is_name(P, "else")) {
            P->pos++;
            c->c = parse_expr(P);
        }
        n = c;
    }
    P->depth--;
    return n;
}

// assignment targets: name, (name, name), ns.attr
static tnode *parse_target(parser *P, int allow_nsref) {
    tnode *first = NULL;
    nvec v = {0};
    int paren = 0;
    if (is_op(P, "(")) { paren = 1; P->pos++; }
    for (;;) {
        const char *nm = expect_name(P);
        tnode *n = node(P, N_NAME);
        n->str = nm = tm_intern(P->tmpl, nm);
        n->slen = strlen(nm);
        P->pos++;
        if (allow_nsref && is_op(P, ".")) {
            P->pos++;
            tnode *r = node(P, N_NSREF);
            r->str = nm;
            r->slen = strlen(nm);
            r->b = node(P, N_CONST);
            const char *attr = expect_name(P);
            r->b->str = attr;
            r->b->slen = strlen(attr);
            P->pos++;
            n = r;
        }
        if (!first) first = n;
        nv_push(P, &v, n);
        if (!is_op(P, ",")) break;
        P->pos++;
        if (cur(P)->type != T_NAME) break;
    }
    if (paren) expect_op(P, ")");
    if (v.n == 1 && !paren) return first;
    tnode *t = node(P, N_TUPLE);
    t->kids = v.v;
    t->nkids = v.n;
    return t;
}

// ---- statements ----
static void parse_body(parser *P, nvec *body, const char *const *ends, int nends, const char *stmt, int stmt_line);

static tnode *mk_body(parser *P, nvec *v, int line) {
    tnode *b = node(P, N_BODY);
    b->line = line;
    b->kids = v->v;
    b->nkids = v->n;
    return b;
}

static tnode *parse_if(parser *P, int line);
static tnode *parse_if_in(parser *P, int line) {
    tnode *n = node(P, N_IF);
    n->line = line;
    n->a = parse_expr(P);
    expect_block_end(P);
    static const char *const ENDS[] = {"elif", "else", "endif"};
    nvec body = {0}, els = {0};
    parse_body(P, &body, ENDS, 3, "if", line);
    n->kids = body.v;
    n->nkids = body.n;
    if (is_name(P, "elif")) {
        int l2 = cur(P)->line;
        P->pos++;
        nv_push(P, &els, parse_if(P, l2));   // consumes through endif
        n->kids2 = els.v;
        n->nkids2 = els.n;
        return n;
    }
    if (is_name(P, "else")) {
        P->pos++;
        expect_block_end(P);
        static const char *const END[] = {"endif"};
        parse_body(P, &els, END, 1, "if", line);
    }
    P->pos++;   // endif
    expect_block_end(P);
    n->kids2 = els.v;
    n->nkids2 = els.n;
    return n;
}

static tnode *parse_if(parser *P, int line) {
    if (++P->depth > 300) perr(P, "elif chain or blocks nested too deeply");
    tnode *n = parse_if_in(P, line);
    P->depth--;
    return n;
}

static tnode *parse_for(parser *P, int line) {
    tnode *n = node(P, N_FOR);
    n->line = line;
    n->a = parse_target(P, 0);
    if (!is_name(P, "in")) unexpected(P, "'in'");
    P->pos++;
    // the iterable: no conditional expression at top level (its 'if' is the loop filter)
    n->b = parse_or(P);
    if (is_op(P, ",")) perr(P, "an implicit tuple as the for-loop iterable is not supported");
    if (is_name(P, "if")) {
        P->pos++;
        n->c = parse_expr(P);
    }
    if (is_name(P, "recursive")) perr(P, "recursive for loops are not supported");
    expect_block_end(P);
    static const char *const ENDS[] = {"endfor", "else"};
    nvec body = {0}, els = {0};
    parse_body(P, &body, ENDS, 2, "for", line);
    if (is_name(P, "else")) {
        P->pos++;
        expect_block_end(P);
        static const char *const END[] = {"endfor"};
        parse_body(P, &els, END, 1, "for", line);
    }
    P->pos++;
    expect_block_end(P);
    n->kids = body.v;
    n->nkids = body.n;
    n->kids2 = els.v;
    n->nkids2 = els.n;
    return n;
}

static tnode *parse_set(parser *P, int line) {
    tnode *target = parse_target(P, 1);
    if (is_op(P, "=")) {
        P->pos++;
        tnode *n = node(P, N_SET);
        n->line = line;
        n->a = target;
        n->b = parse_expr(P);
        if (is_op(P, ",")) {   // set a, b = x, y
            nvec v = {0};
            nv_push(P, &v, n->b);
            while (is_op(P, ",")) {
                P->pos++;
                nv_push(P, &v, parse_expr(P));
            }
            tnode *t = node(P, N_TUPLE);
            t->kids = v.v;
            t->nkids = v.n;
            n->b = t;
        }
        expect_block_end(P);
        return n;
    }
    // block set: {% set x %}...{% endset %}, optionally with filters
    tnode *n = node(P, N_SETBLOCK);
    n->line = line;
    if (target->type != N_NAME && target->type != N_NSREF) perr(P, "a block set assigns one name");
    n->a = target;
    if (is_op(P, "|")) n->c = parse_filter(P, NULL, 0);
    expect_block_end(P);
    static const char *const END[] = {"endset"};
    nvec body = {0};
    parse_body(P, &body, END, 1, "set", line);
    P->pos++;
    expect_block_end(P);
    n->kids = body.v;
    n->nkids = body.n;
    return n;
}

// macro signature: (a, b=1, ...)
static void parse_signature(parser *P, tnode *n) {
    svec names = {0};
    nvec dflt = {0};
    if (is_op(P, "(")) {
        P->pos++;
        while (!is_op(P, ")")) {
            if (names.n) expect_op(P, ",");
            if (is_op(P, ")")) break;
            sv_push(P, &names, tm_intern(P->tmpl, expect_name(P)));
            P->pos++;
            if (is_op(P, "=")) {
                P->pos++;
                nv_push(P, &dflt, parse_expr(P));
            } else {
                if (dflt.n) perr(P, "non-default argument follows default argument");
                nv_push(P, &dflt, NULL);
            }
        }
        P->pos++;
    }
    n->names = names.v;
    n->nnames = names.n;
    n->kids2 = dflt.v;
    n->nkids2 = dflt.n;
}

static tnode *parse_stmt_in(parser *P) {
    int line = cur(P)->line;
    if (++P->depth > 200) perr(P, "blocks nested too deeply");
    P->pos++;   // {%
    const char *kw = expect_name(P);
    P->pos++;
    if (!strcmp(kw, "if")) return parse_if(P, line);
    if (!strcmp(kw, "for")) return parse_for(P, line);
    if (!strcmp(kw, "set")) return parse_set(P, line);
    if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        tnode *n = node(P, kw[0] == 'b' ? N_BREAK : N_CONTINUE);
        n->line = line;
        expect_block_end(P);
        return n;
    }
    if (!strcmp(kw, "macro")) {
        tnode *n = node(P, N_MACRO);
        n->line = line;
        n->str = tm_intern(P->tmpl, expect_name(P));
        n->slen = strlen(n->str);
        P->pos++;
        parse_signature(P, n);
        expect_block_end(P);
        static const char *const END[] = {"endmacro"};
        nvec body = {0};
        parse_body(P, &body, END, 1, "macro", line);
        P->pos++;
        if (cur(P)->type == T_NAME) P->pos++;   // {% endmacro name %}
        expect_block_end(P);
        n->a = mk_body(P, &body, line);
        return n;
    }
    if (!strcmp(kw, "call")) {
        tnode *n = node(P, N_CALLBLOCK);
        n->line = line;
        tnode *sig = node(P, N_MACRO);   // the caller's signature: {% call(x) m() %}
        sig->str = "caller";
        sig->slen = 6;
        if (is_op(P, "(")) parse_signature(P, sig);
        tnode *call = parse_expr(P);
        if (call->type != N_CALL) perr(P, "expected a macro call after 'call'");
        expect_block_end(P);
        static const char *const END[] = {"endcall"};
        nvec body = {0};
        parse_body(P, &body, END, 1, "call", line);
        P->pos++;
        expect_block_end(P);
        sig->a = mk_body(P, &body, line);
        n->a = call;
        n->b = sig;
        return n;
    }
    if (!strcmp(kw, "filter")) {
        tnode *n = node(P, N_FILTERBLOCK);
        n->line = line;
        n->c = parse_filter(P, NULL, 1);
        expect_block_end(P);
        static const char *const END[] = {"endfilter"};
        nvec body = {0};
        parse_body(P, &body, END, 1, "filter", line);
        P->pos++;
        expect_block_end(P);
        n->kids = body.v;
        n->nkids = body.n;
        return n;
    }
    if (!strcmp(kw, "block")) {   // a standalone template renders its blocks in place
        expect_name(P);
        P->pos++;
        if (is_name(P, "scoped") || is_name(P, "required")) perr(P, "block modifiers are not supported");
        expect_block_end(P);
        static const char *const END[] = {"endblock"};
        nvec body = {0};
        parse_body(P, &body, END, 1, "block", line);
        P->pos++;
        if (cur(P)->type == T_NAME) P->pos++;   // {% endblock name %}
        expect_block_end(P);
        return mk_body(P, &body, line);
    }
    if (!strcmp(kw, "generation")) {   // transformers' AssistantTracker tag: renders its body
        expect_block_end(P);
        static const char *const END[] = {"endgeneration"};
        nvec body = {0};
        parse_body(P, &body, END, 1, "generation", line);
        P->pos++;
        expect_block_end(P);
        return mk_body(P, &body, line);
    }
    if (!strcmp(kw, "with")) {
        tnode *n = node(P, N_WITH);
        n->line = line;
        nvec tg = {0}, vals = {0};
        while (cur(P)->type != T_BLOCK_END) {
            if (tg.n) expect_op(P, ",");
            nv_push(P, &tg, parse_target(P, 0));
            expect_op(P, "=");
            nv_push(P, &vals, parse_expr(P));
        }
        expect_block_end(P);
        static const char *const END[] = {"endwith"};
        nvec body = {0};
        parse_body(P, &body, END, 1, "with", line);
        P->pos++;
        expect_block_end(P);
        n->kids = body.v;
        n->nkids = body.n;
        n->kids2 = vals.v;
        n->nkids2 = vals.n;
        n->a = mk_body(P, &tg, line);
        return n;
    }
    P->pos--;
    perr(P, "the '%s' statement is not supported by rlc's chat-template engine", kw);
}

static tnode *parse_stmt(parser *P) {
    tnode *n = parse_stmt_in(P);
    P->depth--;
    return n;
}

// Parse nodes until a block whose keyword is one of ends (left current, at the keyword) or EOF.
static void parse_body(parser *P, nvec *body, const char *const *ends, int nends, const char *stmt, int stmt_line) {
    for (;;) {
        tm_tok *t = cur(P);
        if (t->type == T_EOF) {
            if (!nends) return;
            perr(P, "unexpected end of template: the '%s' block opened on line %d is not closed (expected '%s')", stmt,
                 stmt_line, ends[nends - 1]);
        }
        if (t->type == T_DATA) {
            tnode *n = node(P, N_DATA);
            n->str = t->s;
            n->slen = t->n;
            nv_push(P, body, n);
            P->pos++;
        } else if (t->type == T_VAR_BEGIN) {
            tnode *n = node(P, N_OUTPUT);
            P->pos++;
            n->a = parse_expr(P);
            if (cur(P)->type != T_VAR_END) unexpected(P, "end of print statement");
            P->pos++;
            nv_push(P, body, n);
        } else if (t->type == T_BLOCK_BEGIN) {
            tm_tok *k = &P->t[P->pos + 1];
            if (k->type == T_NAME)
                for (int i = 0; i < nends; i++)
                    if (!strcmp(k->s, ends[i])) {
                        P->pos++;
                        return;
                    }
            if (k->type == T_NAME && (!strncmp(k->s, "end", 3) || !strcmp(k->s, "elif") || !strcmp(k->s, "else"))) {
                P->pos++;
                if (nends) perr(P, "unexpected '%s' in the '%s' block opened on line %d (expected '%s')", k->s, stmt, stmt_line, ends[nends - 1]);
                perr(P, "unexpected '%s' outside any block", k->s);
            }
            nv_push(P, body, parse_stmt(P));
        } else {
            unexpected(P, "template data or a tag");
        }
    }
}

const char *tm_sym_find(const rlc_tmpl *t, const char *s) {
    for (int i = 0; i < t->nsyms; i++)
        if (t->syms[i][0] == s[0] && !strcmp(t->syms[i], s)) return t->syms[i];
    return NULL;
}

const char *tm_intern(rlc_tmpl *t, const char *s) {
    const char *f = tm_sym_find(t, s);
    if (f) {
        for (int i = 0; i < TM_SYM_N; i++) t->sym_used[i] |= f == t->sym[i];
        return f;
    }
    if (t->nsyms == t->capsyms) {
        int nc = t->capsyms ? t->capsyms * 2 : 64;
        const char **ns = tm_alloc(&t->arena, (size_t)nc * sizeof *ns);
        if (t->nsyms) memcpy(ns, t->syms, (size_t)t->nsyms * sizeof *ns);
        t->syms = ns;
        t->capsyms = nc;
    }
    return t->syms[t->nsyms++] = tm_strndup(&t->arena, s, strlen(s));
}

rlc_tmpl *rlc_tmpl_parse(const char *src, size_t n, const char *name, rlc_strbuf *err) {
    rlc_tmpl *t = rlc_calloc(1, sizeof *t);
    t->name = rlc_strdup(name ? name : "template");
    static const char *const BUILTIN[TM_SYM_N] = {"loop", "caller", "range", "dict", "namespace", "raise_exception", "strftime_now"};
    for (int i = 0; i < TM_SYM_N; i++) t->sym[i] = tm_intern(t, BUILTIN[i]);
    tm_tok *toks;
    int ntoks;
    if (tm_lex(&t->arena, src, n, t->name, &toks, &ntoks, err)) {
        rlc_tmpl_free(t);
        return NULL;
    }
    parser P = {.a = &t->arena, .tmpl = t, .t = toks, .nt = ntoks, .name = t->name, .err = err};
    if (setjmp(P.jmp)) {
        rlc_tmpl_free(t);
        return NULL;
    }
    nvec body = {0};
    parse_body(&P, &body, NULL, 0, NULL, 0);
    t->root = mk_body(&P, &body, 1);
    return t;
}

void rlc_tmpl_free(rlc_tmpl *t) {
    if (!t) return;
    tm_arena_free(&t->arena);
    free(t->name);
    free(t);
}
