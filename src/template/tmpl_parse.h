// tmpl_parse.h: the parser's state and token helpers, shared by the expression parser (tmpl_parse_expr.c)
// and the statement parser (tmpl_parse.c). Private to the template engine.
#pragma once
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

__attribute__((noreturn, format(printf, 2, 3))) static inline void perr(parser *P, const char *fmt, ...) {
    rlc_sb_printf(P->err, "%s:%d: ", P->name, P->t[P->pos].line);
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tm_puts(P->err, buf);
    longjmp(P->jmp, 1);
}

static inline tm_tok *cur(parser *P) { return &P->t[P->pos]; }
static inline int is_op(parser *P, const char *op) {
    tm_tok *t = cur(P);
    return t->type == T_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}
static inline int is_name(parser *P, const char *nm) {
    tm_tok *t = cur(P);
    return t->type == T_NAME && !strcmp(t->s, nm);
}
static inline int next_is_name(parser *P, const char *nm) {
    tm_tok *t = &P->t[P->pos + 1 < P->nt ? P->pos + 1 : P->pos];
    return t->type == T_NAME && !strcmp(t->s, nm);
}
static inline const char *tok_desc(tm_tok *t) {
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
__attribute__((noreturn)) static inline void unexpected(parser *P, const char *expected) {
    tm_tok *t = cur(P);
    const char *d = tok_desc(t);
    if (d) perr(P, "unexpected %s, expected %s", d, expected);
    perr(P, "unexpected '%.*s', expected %s", (int)t->n, t->s, expected);
}
static inline void expect_op(parser *P, const char *op) {
    if (!is_op(P, op)) {
        char buf[16];
        snprintf(buf, sizeof buf, "'%s'", op);
        unexpected(P, buf);
    }
    P->pos++;
}
static inline const char *expect_name(parser *P) {
    if (cur(P)->type != T_NAME) unexpected(P, "a name");
    return cur(P)->s;
}
static inline void expect_block_end(parser *P) {
    if (cur(P)->type != T_BLOCK_END) unexpected(P, "end of statement block");
    P->pos++;
}

static inline tnode *node(parser *P, int type) {
    tnode *n = tm_alloc(&P->tmpl->nodes, sizeof *n);
    n->type = type;
    n->line = cur(P)->line;
    return n;
}

// growable node arrays during parsing
typedef struct { tnode **v; int n, cap; } nvec;
static inline void nv_push(parser *P, nvec *v, tnode *x) {
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
static inline void sv_push(parser *P, svec *v, const char *x) {
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 8;
        const char **nv = tm_alloc(P->a, (size_t)nc * sizeof *nv);
        if (v->n) memcpy(nv, v->v, (size_t)v->n * sizeof *nv);
        v->v = nv;
        v->cap = nc;
    }
    v->v[v->n++] = x;
}

// ---- expressions (tmpl_parse_expr.c) ----
tnode *tm_parse_expr(parser *P);     // condexpr: or ('if' or ('else' expr)?)?
tnode *tm_parse_or(parser *P);       // an expression without the ternary (for-loop iterables)
// a chain of filters applied to n: '| f(args) | g' with the '|' current, or (start_inline: {% filter %}
// blocks) with the first filter's name current
tnode *tm_parse_filter(parser *P, tnode *n, int start_inline);
tnode *tm_parse_target(parser *P, int allow_nsref);   // assignment targets: name, (name, name), ns.attr
