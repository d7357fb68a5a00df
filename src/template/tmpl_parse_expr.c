// tmpl_parse_expr.c: the expression half of the recursive-descent parser, with jinja2's operator
// precedence (or < and < not < comparisons < + - < ~ < * / // % < ** < unary - < filters/tests/postfix).
// Filters and tests are resolved here, so an unknown one is a parse error as in jinja2.
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "template/tmpl_parse.h"

static tnode *parse_unary(parser *P, int with_filter);

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
            nv_push(P, &kwv, tm_parse_expr(P));
        } else {
            if (kwn.n) perr(P, "invalid syntax for function call expression (positional argument after keyword)");
            nv_push(P, &pos, tm_parse_expr(P));
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
            tnode *e = tm_parse_expr(P);
            if (is_op(P, ",")) {
                nvec items = {0};
                nv_push(P, &items, e);
                while (is_op(P, ",")) {
                    P->pos++;
                    if (is_op(P, ")")) break;
                    nv_push(P, &items, tm_parse_expr(P));
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
                nv_push(P, &items, tm_parse_expr(P));
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
                nv_push(P, &ks, tm_parse_expr(P));
                expect_op(P, ":");
                nv_push(P, &vs, tm_parse_expr(P));
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
        parts[k] = tm_parse_expr(P);
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
                g->op = tm_is_dict_attr(t->s, t->n);   // else, on a dict, an item lookup at once
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

tnode *tm_parse_filter(parser *P, tnode *n, int start_inline) {
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
        if (is_op(P, "|")) n = tm_parse_filter(P, n, 0);
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
tnode *tm_parse_or(parser *P) {
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
tnode *tm_parse_expr(parser *P) {
    if (++P->depth > 200) perr(P, "expression nested too deeply");
    tnode *n = tm_parse_or(P);
    while (is_name(P, "if")) {
        tnode *c = node(P, N_COND);
        P->pos++;
        c->a = tm_parse_or(P);   // the condition
        c->b = n;             // value when true
        if (is_name(P, "else")) {
            P->pos++;
            c->c = tm_parse_expr(P);
        }
        n = c;
    }
    P->depth--;
    return n;
}

// assignment targets: name, (name, name), ns.attr
tnode *tm_parse_target(parser *P, int allow_nsref) {
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

