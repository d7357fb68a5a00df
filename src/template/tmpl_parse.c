// tmpl_parse.c: the statement half of the recursive-descent parser (if/for/set/macro/call/filter/with
// blocks, whitespace control already applied by the lexer), name interning, and rlc_tmpl_parse itself.
// Expressions are parsed in tmpl_parse_expr.c.
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "template/tmpl_parse.h"

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
    n->a = tm_parse_expr(P);
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
    n->a = tm_parse_target(P, 0);
    if (!is_name(P, "in")) unexpected(P, "'in'");
    P->pos++;
    // the iterable: no conditional expression at top level (its 'if' is the loop filter)
    n->b = tm_parse_or(P);
    if (is_op(P, ",")) perr(P, "an implicit tuple as the for-loop iterable is not supported");
    if (is_name(P, "if")) {
        P->pos++;
        n->c = tm_parse_expr(P);
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
    tnode *target = tm_parse_target(P, 1);
    if (is_op(P, "=")) {
        P->pos++;
        tnode *n = node(P, N_SET);
        n->line = line;
        n->a = target;
        n->b = tm_parse_expr(P);
        if (is_op(P, ",")) {   // set a, b = x, y
            nvec v = {0};
            nv_push(P, &v, n->b);
            while (is_op(P, ",")) {
                P->pos++;
                nv_push(P, &v, tm_parse_expr(P));
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
    if (is_op(P, "|")) n->c = tm_parse_filter(P, NULL, 0);
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
                nv_push(P, &dflt, tm_parse_expr(P));
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
        tnode *call = tm_parse_expr(P);
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
        n->c = tm_parse_filter(P, NULL, 1);
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
            nv_push(P, &tg, tm_parse_target(P, 0));
            expect_op(P, "=");
            nv_push(P, &vals, tm_parse_expr(P));
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

// Append text to a body: text right after text (data, `{{ "literal" }}`) becomes one node, written with
// one append at render time.
static void push_text(parser *P, nvec *body, const char *s, size_t n, int line) {
    tnode *last = body->n ? body->v[body->n - 1] : NULL;
    if (last && last->type == N_DATA) {
        char *m = tm_alloc_raw(P->a, last->slen + n + 1);
        memcpy(m, last->str, last->slen);
        memcpy(m + last->slen, s, n);
        m[last->slen + n] = 0;
        last->str = m;
        last->slen += n;
        return;
    }
    tnode *d = node(P, N_DATA);
    d->line = line;
    d->str = s;
    d->slen = n;
    nv_push(P, body, d);
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
            push_text(P, body, t->s, t->n, t->line);
            P->pos++;
        } else if (t->type == T_VAR_BEGIN) {
            tnode *n = node(P, N_OUTPUT);
            P->pos++;
            n->a = tm_parse_expr(P);
            if (cur(P)->type != T_VAR_END) unexpected(P, "end of print statement");
            P->pos++;
            if (n->a->type == N_CONST && n->a->lit.kind == TV_STR) push_text(P, body, n->a->lit.u.s, n->a->lit.n, n->line);
            else nv_push(P, body, n);
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

// length, first and last bytes mixed: names a template tells apart rarely share all three, and this costs
// a strlen and a multiply (the probe then compares the whole name)
static uint32_t sym_hash(const char *s) {
    size_t n = strlen(s);
    uint32_t x = (uint32_t)n * 0x9E3779B1u ^ (uint32_t)(unsigned char)s[0] << 8 ^ (uint32_t)(unsigned char)s[n ? n - 1 : 0];
    return (x * 0x85EBCA6Bu) ^ (x >> 13);
}

// Every render looks each of its variables up here: hashed once parsing is done, a linear scan before.
const char *tm_sym_find(const rlc_tmpl *t, const char *s) {
    if (t->symhash) {
        for (uint32_t h = sym_hash(s) & (uint32_t)t->hmask;; h = (h + 1) & (uint32_t)t->hmask) {
            int i = t->symhash[h];
            if (i < 0) return NULL;
            if (t->syms[i][0] == s[0] && !strcmp(t->syms[i], s)) return t->syms[i];
        }
    }
    for (int i = 0; i < t->nsyms; i++)
        if (t->syms[i][0] == s[0] && !strcmp(t->syms[i], s)) return t->syms[i];
    return NULL;
}

static void sym_index(rlc_tmpl *t) {   // at most half full: a miss ends at an empty slot soon
    int cap = 16;
    while (cap < 2 * t->nsyms) cap *= 2;
    t->symhash = tm_alloc_raw(&t->arena, (size_t)cap * sizeof *t->symhash);
    for (int i = 0; i < cap; i++) t->symhash[i] = -1;
    t->hmask = cap - 1;
    for (int i = 0; i < t->nsyms; i++) {
        uint32_t h = sym_hash(t->syms[i]) & (uint32_t)t->hmask;
        while (t->symhash[h] >= 0) h = (h + 1) & (uint32_t)t->hmask;
        t->symhash[h] = i;
    }
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
    sym_index(t);
    return t;
}

void rlc_tmpl_set_clock(rlc_tmpl *t, int64_t (*now)(void *arg), void *arg) {
    t->now = now;
    t->now_arg = arg;
}

void rlc_tmpl_free(rlc_tmpl *t) {
    if (!t) return;
    tm_arena_free(&t->arena);
    tm_arena_free(&t->nodes);
    free(t->name);
    free(t);
}
