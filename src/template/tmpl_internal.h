// tmpl_internal.h: the template engine's values (Python objects as jinja2 sees them), arena, syntax tree
// and render context, shared by the lexer, parser, evaluator and builtins.
#pragma once
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/strbuf.h"
#include "template/template.h"

// ---- arena: every value and node lives in one; freed at once (no per-object ownership) ----
typedef struct tm_chunk {
    struct tm_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
} tm_chunk;
typedef struct {
    tm_chunk *head;
    tm_chunk *borrowed;   // a caller-owned first chunk (on its stack) that tm_arena_free leaves alone, or NULL
} tm_arena;
void *tm_alloc_slow(tm_arena *a, size_t n);  // a new chunk (n rounded to 16 already)
// The fast paths are inline: a render makes thousands of small values, each a call otherwise.
static inline void *tm_alloc_raw(tm_arena *a, size_t n) {   // not zeroed (strings), 16-byte aligned
    n = (n + 15) & ~(size_t)15;
    tm_chunk *c = a->head;
    if (__builtin_expect(c && c->used + n <= c->cap, 1)) {
        void *p = c->mem + c->used;
        c->used += n;
        return p;
    }
    return tm_alloc_slow(a, n);
}
static inline void *tm_alloc(tm_arena *a, size_t n) {       // zeroed (constant n: a few stores, no call)
    void *p = tm_alloc_raw(a, n);
    memset(p, 0, n);
    return p;
}
char *tm_strndup(tm_arena *a, const char *s, size_t n);
void tm_arena_free(tm_arena *a);

// Output appends, inline for the same reason (rlc_sb_* are out of line in core/strbuf.c); the buffer keeps
// strbuf's invariant (s[n] == 0).
static inline void tm_put(rlc_strbuf *o, const void *p, size_t n) {
    if (__builtin_expect(!o->s || o->n + n + 1 > o->cap, 0)) rlc_sb_reserve(o, n);
    if (n) memcpy(o->s + o->n, p, n);
    o->n += n;
    o->s[o->n] = 0;
}
static inline void tm_putc(rlc_strbuf *o, char ch) {
    if (__builtin_expect(!o->s || o->n + 2 > o->cap, 0)) rlc_sb_reserve(o, 1);
    o->s[o->n++] = ch;
    o->s[o->n] = 0;
}
static inline void tm_puts(rlc_strbuf *o, const char *s) { tm_put(o, s, strlen(s)); }

// ---- values ----
typedef enum {
    TV_UNDEF,   // jinja2 Undefined: prints "", is false, iterates empty; attributes/arithmetic raise
    TV_NONE,
    TV_BOOL,
    TV_INT,
    TV_FLOAT,
    TV_STR,
    TV_LIST,    // list or tuple (tl->tuple)
    TV_DICT,    // dict, or namespace() (td->ns)
    TV_FUNC,    // macro, bound method, global function, caller
    TV_LOOP,    // the `loop` object of a for loop
} tv_kind;

struct tv_list;
struct tv_dict;
struct tv_func;
struct tm_loop;
struct tm_undef_attr;
// 16 bytes, so that a value is passed and returned in two registers (the evaluator returns one per node)
typedef struct tv {
    uint64_t kind : 8;   // tv_kind
    uint64_t n : 56;     // TV_STR: byte length; TV_UNDEF: 1 for an attribute miss (u.miss), else 0
    union {
        int64_t i;   // TV_BOOL, TV_INT
        double f;
        const char *s;            // TV_STR (not NUL-terminated in general)
        struct tv_list *l;
        struct tv_dict *d;
        struct tv_func *fn;
        struct tm_loop *loop;
        const char *undef_name;   // TV_UNDEF with n == 0: the missing name (NUL-terminated) or NULL
        const struct tm_undef_attr *miss;   // TV_UNDEF with n == 1
    } u;
} tv;
_Static_assert(sizeof(tv) == 16, "tv must stay two machine words");
typedef struct tm_undef_attr {
    const char *name;    // the missing attribute (NUL-terminated)
    const char *owner;   // its owner's type repr ("'dict object'", "'None'")
} tm_undef_attr;

typedef struct tv_list {
    tv *v;        // (n)
    size_t n, cap;
    int tuple;
} tv_list;
typedef struct tv_dict {
    tv *k, *v;    // (n) keys, values, insertion order
    size_t n, cap;
    int ns;       // 1: a namespace() object (attribute assignment allowed)
} tv_dict;

struct tm_ctx;
struct tnode;
typedef struct {
    tv *pos; int npos;           // positional arguments
    const char **kwn; tv *kwv; int nkw;   // keyword arguments
} tm_args;
typedef tv (*tm_builtin_fn)(struct tm_ctx *c, tv self, tm_args *a);
typedef struct tv_func {
    const char *name;
    tm_builtin_fn fn;            // builtin or bound method (self is the bound object)
    tv self;
    struct tnode *macro;         // macro / caller body
    struct tm_scope *closure;    // scope the macro was defined in
} tv_func;

typedef struct tm_loop {
    tv_list *items;
    size_t index0;
    tv changed_last;     // loop.changed(): the arguments of its last call (kind TV_UNDEF before the first)
} tm_loop;

static inline tv tv_undef(const char *name) { tv v = {TV_UNDEF, 0, {.undef_name = name}}; return v; }
static inline tv tv_none(void) { tv v = {TV_NONE, 0, {0}}; return v; }
static inline tv tv_bool(int b) { tv v = {TV_BOOL, 0, {.i = b != 0}}; return v; }
static inline tv tv_int(int64_t i) { tv v = {TV_INT, 0, {.i = i}}; return v; }
static inline tv tv_float(double f) { tv v = {TV_FLOAT, 0, {.f = f}}; return v; }
static inline tv tv_str(const char *s, size_t n) { tv v = {TV_STR, n, {.s = s}}; return v; }
static inline tv tv_listv(tv_list *l) { tv v = {TV_LIST, 0, {.l = l}}; return v; }
static inline tv tv_dictv(tv_dict *d) { tv v = {TV_DICT, 0, {.d = d}}; return v; }

// Python truthiness (inline: every if, and, or and not asks)
static inline int tm_truthy(tv v) {
    switch (v.kind) {
    case TV_UNDEF: case TV_NONE: return 0;
    case TV_BOOL: case TV_INT: return v.u.i != 0;
    case TV_FLOAT: return v.u.f != 0;
    case TV_STR: return v.n != 0;
    case TV_LIST: return v.u.l->n != 0;
    case TV_DICT: return v.u.d->n != 0;
    default: return 1;
    }
}

// ---- syntax tree ----
typedef enum {
    // statements
    N_DATA, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_CALLBLOCK, N_FILTERBLOCK, N_BREAK,
    N_CONTINUE, N_BODY, N_WITH,
    // expressions
    N_CONST, N_NAME, N_GETATTR, N_GETITEM, N_SLICE, N_CALL, N_FILTER, N_TEST, N_BINOP, N_NEG, N_POS, N_AND,
    N_OR, N_NOT, N_COMPARE, N_CONCAT, N_COND, N_LIST, N_TUPLE, N_DICT, N_NSREF,
} tnode_type;

typedef enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW } tm_binop;
typedef enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN } tm_cmpop;

// The fields most nodes read come first, in one 64-byte line: type, line, operands, the literal and name.
typedef struct tnode {
    int type, line, op;          // op: tm_binop / test negation / N_GETATTR: the name is a dict method
    int nkids;
    struct tnode *a, *b;         // operands (see the parser for each type's use)
    tv lit;                             // N_CONST
    const char *str; size_t slen;       // N_DATA text, names (NUL-terminated)
    struct tnode **kids;                // (nkids) body / items / positional args / compare operands
    struct tnode *c;                    // third operand
    struct tnode **kids2; int nkids2;   // else body / dict values / keyword-argument values
    int nnames;
    const char **names;                 // (nnames) keyword-argument names / macro parameters / set targets
    int *ops;                           // N_COMPARE: (nkids) comparison operators
    tm_builtin_fn fn;                   // N_FILTER / N_TEST: the resolved builtin
} tnode;

// Names are interned per template: every variable name the template uses is one pointer, so scope lookups
// compare pointers; render() binds only the variables the template names.
enum { TM_SYM_LOOP, TM_SYM_CALLER, TM_SYM_RANGE, TM_SYM_DICT, TM_SYM_NAMESPACE, TM_SYM_RAISE, TM_SYM_STRFTIME, TM_SYM_N };
struct rlc_tmpl {
    tm_arena arena;
    tm_arena nodes;   // the syntax tree alone, dense in parse order (a render walks it: fewer cache lines)
    tnode *root;      // N_BODY
    char *name;
    const char **syms; int nsyms, capsyms;   // interned names
    int *symhash; int hmask;                 // (hmask + 1) open-addressing slots: index into syms, or -1
    const char *sym[TM_SYM_N];               // the names the engine itself binds
    int sym_used[TM_SYM_N];                  // ... and whether the template names them
    int64_t (*now)(void *arg);               // strftime_now's clock (NULL: time(NULL))
    void *now_arg;
};
const char *tm_intern(rlc_tmpl *t, const char *s);          // the template's pointer for s (added if new)
const char *tm_sym_find(const rlc_tmpl *t, const char *s);  // NULL if the template never names s

// ---- render context ----
typedef struct tm_scope {
    struct tm_scope *parent;
    const char **names;   // (n)
    tv *vals;             // (n)
    int n, cap;
} tm_scope;

typedef struct tm_ctx {
    tm_arena arena;         // values made while rendering
    rlc_strbuf *out;        // where output goes (swapped for captured blocks)
    rlc_strbuf *err;
    const char *tname;
    int line;               // line of the node being evaluated (error messages)
    int loop_ctl;           // 1 break, 2 continue (loopcontrols)
    int depth;              // macro recursion depth
    int64_t steps;          // statements and loop iterations run (a budget against runaway templates)
    jmp_buf jmp;
    tm_scope *globals;
    const rlc_tmpl *tmpl;
    rlc_strbuf scratch;     // reused by tojson for every call of a render (no regrowth); freed with the context
    int nlive;
    rlc_strbuf live[512];   // (nlive) capture buffers in use (freed if an error unwinds); last: not zeroed
} tm_ctx;

// Limits that keep a hostile or broken template from running away (jinja2 has none; chat templates are tiny).
#define TM_MAX_STEPS 50000000LL          // statements executed
#define TM_MAX_STRING ((size_t)64 << 20)  // bytes of one string and of the output

// Raise a render error ("NAME:LINE: msg") and unwind to rlc_tmpl_render.
__attribute__((noreturn, format(printf, 2, 3))) void tm_raise(tm_ctx *c, const char *fmt, ...);

// ---- values (tmpl_value.c) ----
tv_list *tm_list_new(tm_arena *a, size_t cap);
void tm_list_push(tm_arena *a, tv_list *l, tv v);
tv_dict *tm_dict_new(tm_arena *a, size_t cap);
void tm_dict_set(tm_arena *a, tv_dict *d, tv k, tv v);
tv *tm_dict_get(const tv_dict *d, const char *k, size_t n);   // string key lookup, NULL if absent
tv *tm_dict_getv(const tv_dict *d, tv k);
tv tm_from_cjson(tm_arena *a, const struct cJSON *j);
int tm_equal(tv a, tv b);
const char *tm_type_name(tv v);          // Python type name: "str", "dict", ...
void tm_to_str(tm_ctx *c, tv v, rlc_strbuf *o);    // Python str()
void tm_repr(tm_ctx *c, tv v, rlc_strbuf *o);      // Python repr()
tv tm_str_of(tm_ctx *c, tv v);                     // str() as a value (no copy for strings)
void tm_fmt_float(double f, char buf[40]);         // Python float repr
// json.dumps(v, ensure_ascii=False, indent, separators, sort_keys); indent NULL = compact single line
void tm_json_dump(tm_ctx *c, tv v, const char *indent, size_t indent_n, int has_indent, const char *item_sep,
                  const char *key_sep, int sort_keys, rlc_strbuf *o, int level);
int tm_compare(tm_ctx *c, tv a, tv b);   // <0, 0, >0 as Python ordering (raises on unorderable types)
int64_t tm_str_len_cp(const char *s, size_t n);   // code points
tv tm_iterate(tm_ctx *c, tv v);          // list of the items iteration yields (dict: keys; str: chars)
__attribute__((noreturn)) void tm_undef_fail(tm_ctx *c, tv u);     // raise the UndefinedError an Undefined carries

// ---- builtins (tmpl_builtins.c, tmpl_filters.c) ----
tm_builtin_fn tm_find_filter(const char *name);
// the tojson filter, and its dump appended to o (what {{ x|tojson }} writes, without the intermediate string)
tv tm_f_tojson(struct tm_ctx *c, tv x, tm_args *a);
void tm_tojson_into(struct tm_ctx *c, tv x, tm_args *a, rlc_strbuf *o);
tm_builtin_fn tm_find_test(const char *name);
tv tm_get_attr(tm_ctx *c, tv obj, const char *name, size_t n);   // obj.name (methods, then items)
int tm_is_dict_attr(const char *name, size_t n);   // a dict method's name (dict.name is then not an item)
tv tm_get_item(tm_ctx *c, tv obj, tv key);                       // obj[key] (items, then attributes)
void tm_install_globals(tm_ctx *c, tm_scope *s);
tv tm_call(tm_ctx *c, tv fn, tm_args *a);
tv tm_arg(tm_args *a, int pos, const char *name, tv dflt);       // Python-style parameter binding
tv tm_call_test(tm_ctx *c, tm_builtin_fn fn, tv x, tm_args *a);
// Python str semantics shared by methods and filters
tv tm_py_strip(tm_ctx *c, tv s, tv chars, int which);   // which: 1 lstrip, 2 rstrip, 3 strip
int tm_str_has_cp(tv set, int32_t cp);
tv tm_py_case(tm_ctx *c, tv s, int mode);               // 0 lower, 1 upper, 2 capitalize, 3 str.title
tv tm_py_split(tm_ctx *c, tv s, tv sep, int64_t maxsplit);
tv tm_py_replace(tm_ctx *c, tv s, tv old, tv new_, int64_t count);
tv tm_py_splitlines(tm_ctx *c, tv s);
tv tm_dict_items(tm_ctx *c, tv d);

// ---- scopes / evaluator (tmpl_eval.c) ----
void tm_scope_set(tm_ctx *c, tm_scope *s, const char *name, tv v);
tv tm_eval(tm_ctx *c, tm_scope *s, tnode *n);
tv tm_call_macro(tm_ctx *c, tv_func *f, tm_args *a, tnode *caller_body, tm_scope *caller_scope);

// ---- lexer + parser (tmpl_lex.c, tmpl_parse.c) ----
typedef enum {
    T_EOF, T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING, T_INT, T_FLOAT, T_OP,
} tm_tok_type;
typedef struct {
    int type, line;
    const char *s; size_t n;      // T_DATA/T_STRING: the text (decoded); T_NAME/T_OP: the source bytes
    int64_t i; double f;
} tm_tok;
// Tokenize; 0 on success, -1 with err set. Tokens and their strings live in the arena.
int tm_lex(tm_arena *a, const char *src, size_t n, const char *name, tm_tok **toks, int *ntoks, rlc_strbuf *err);
