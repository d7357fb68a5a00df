// config_parse.c: setting the trainer configuration's values: every key at its default, a YAML file or text
// (read strictly: one document, bounded nesting, no NUL byte, unknown keys rejected with the nearest valid one)
// and dotted command-line overrides. Each value is checked against its key's entry (type, range, choices,
// nullability) as it is set; errors are one line naming the file:line or the override and the key.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/common.h"
#include "trainer/config_internal.h"

// Where a value comes from, for the error messages.
typedef struct {
    const char *where;   // "file.yaml:12" or "override 'k=v'"
} ctx_t;

static int is_null_text(const char *v, int quoted) {
    return !quoted && (v[0] == 0 || !strcmp(v, "null") || !strcmp(v, "~") || !strcmp(v, "Null") || !strcmp(v, "NULL"));
}

static int parse_bool(const char *v, int *out) {
    if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE")) { *out = 1; return 0; }
    if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "FALSE")) { *out = 0; return 0; }
    return -1;
}
static int parse_int(const char *v, int64_t *out) {
    char buf[64];
    size_t k = 0;
    for (const char *p = v; *p; p++) {
        if (*p == '_') continue;
        if (k + 1 >= sizeof buf) return -1;
        buf[k++] = *p;
    }
    buf[k] = 0;
    if (!k) return -1;
    char *end;
    errno = 0;
    long long x = strtoll(buf, &end, 10);
    if (errno || *end) {
        // integral floats such as 1e6 or 2.0
        double d = strtod(buf, &end);
        if (*end || !isfinite(d) || d != floor(d) || fabs(d) > 9.2e18) return -1;
        x = (long long)d;
    }
    *out = x;
    return 0;
}
static int parse_float(const char *v, double *out) {
    char *end;
    errno = 0;
    if (!*v) return -1;
    double d = strtod(v, &end);
    if (*end || errno == ERANGE || !isfinite(d)) return -1;
    *out = d;
    return 0;
}

static const char *type_name(ctype t) {
    switch (t) {
    case CT_BOOL: return "a boolean (true/false)";
    case CT_INT: return "an integer";
    case CT_FLOAT: return "a number";
    case CT_STR: return "a string";
    case CT_STRLIST: return "a string or a list of strings";
    case CT_FLOAT2: return "a list of two numbers";
    case CT_STRORLIST: return "a string or a list of strings";
    }
    return "?";
}

static int in_choices(const char *choices, const char *v) {
    size_t n = strlen(v);
    for (const char *p = choices; *p;) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static void check_range(const ctx_t *cx, const cfg_entry *e, double x, const char *text) {
    if (e->lo <= e->hi && (x < e->lo || x > e->hi))
        rlc_die("%s: %s = %s is out of range [%.10g, %.10g]", cx->where, e->key, text, e->lo, e->hi);
}

static void strlist_free(rlc_strlist *l) {
    for (int64_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
    l->scalar = 0;
}

// A scalar view of a YAML node for setting.
typedef struct {
    const char *text;   // scalar text
    int quoted;
} scal;

static void set_scalar(rlc_train_config *c, const cfg_entry *e, const ctx_t *cx, scal s) {
    char *base = (char *)c + e->off;
    if (strstr(s.text, "${"))
        rlc_die("%s: %s: interpolation '%s' is not supported; write the value", cx->where, e->key, s.text);
    int isnull = is_null_text(s.text, s.quoted);
    if (isnull && e->type != CT_STRLIST && e->type != CT_STRORLIST) {
        if (!e->nullable) rlc_die("%s: %s must not be null; expected %s", cx->where, e->key, type_name(e->type));
        switch (e->type) {
        case CT_INT: *(int64_t *)base = RLC_CFG_NULL; return;
        case CT_FLOAT: *(double *)base = NAN; return;
        case CT_STR: free(*(char **)base); *(char **)base = NULL; return;
        case CT_BOOL: *(int *)base = RLC_CFG_NULL_BOOL; return;
        default: rlc_die("%s: %s must not be null", cx->where, e->key);
        }
    }
    switch (e->type) {
    case CT_BOOL: {
        int b;
        if (s.quoted || parse_bool(s.text, &b) != 0)
            rlc_die("%s: %s: expected %s, got '%s'", cx->where, e->key, type_name(e->type), s.text);
        *(int *)base = b;
        return;
    }
    case CT_INT: {
        int64_t x;
        if (s.quoted || parse_int(s.text, &x) != 0)
            rlc_die("%s: %s: expected %s, got '%s'", cx->where, e->key, type_name(e->type), s.text);
        check_range(cx, e, (double)x, s.text);
        *(int64_t *)base = x;
        return;
    }
    case CT_FLOAT: {
        double x;
        if (s.quoted || parse_float(s.text, &x) != 0)
            rlc_die("%s: %s: expected %s, got '%s'", cx->where, e->key, type_name(e->type), s.text);
        check_range(cx, e, x, s.text);
        *(double *)base = x;
        return;
    }
    case CT_STR:
        if (e->choices && !in_choices(e->choices, s.text))
            rlc_die("%s: %s: '%s' is not one of %s", cx->where, e->key, s.text, e->choices);
        free(*(char **)base);
        *(char **)base = rlc_strdup(s.text);
        return;
    case CT_STRLIST:
    case CT_STRORLIST: {
        rlc_strlist *l = (rlc_strlist *)base;
        strlist_free(l);
        if (isnull) return;
        l->scalar = e->type == CT_STRORLIST;
        if (e->choices && !in_choices(e->choices, s.text))
            rlc_die("%s: %s: '%s' is not one of %s", cx->where, e->key, s.text, e->choices);
        l->v = rlc_malloc(sizeof(char *));
        l->v[0] = rlc_strdup(s.text);
        l->n = 1;
        return;
    }
    case CT_FLOAT2:
        rlc_die("%s: %s: expected %s, got '%s'", cx->where, e->key, type_name(e->type), s.text);
    }
}

// Location string for a node.
static void where_of(char *buf, size_t n, const char *name, const yaml_node_t *node) {
    snprintf(buf, n, "%s:%lu", name, (unsigned long)node->start_mark.line + 1);
}

static void set_node(rlc_train_config *c, const cfg_entry *e, const char *name, yaml_document_t *doc,
                     yaml_node_t *node) {
    char where[1200];
    where_of(where, sizeof where, name, node);
    ctx_t cx = {where};
    if (node->type == YAML_SCALAR_NODE) {
        scal s = {(const char *)node->data.scalar.value, node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE};
        set_scalar(c, e, &cx, s);
        return;
    }
    if (node->type == YAML_MAPPING_NODE)
        rlc_die("%s: %s: expected %s, got a mapping", where, e->key, type_name(e->type));
    // sequence
    yaml_node_item_t *it = node->data.sequence.items.start, *end = node->data.sequence.items.top;
    int64_t n = end - it;
    for (yaml_node_item_t *p = it; p < end; p++) {
        yaml_node_t *x = yaml_document_get_node(doc, *p);
        if (x->type != YAML_SCALAR_NODE)
            rlc_die("%s: %s: expected %s, got a nested structure", where, e->key, type_name(e->type));
    }
    char *base = (char *)c + e->off;
    if (e->type == CT_STRLIST || e->type == CT_STRORLIST) {
        rlc_strlist *l = (rlc_strlist *)base;
        strlist_free(l);
        l->v = rlc_malloc((size_t)(n ? n : 1) * sizeof(char *));
        for (int64_t i = 0; i < n; i++) {
            yaml_node_t *x = yaml_document_get_node(doc, it[i]);
            const char *v = (const char *)x->data.scalar.value;
            if (e->choices && !in_choices(e->choices, v))
                rlc_die("%s: %s: '%s' is not one of %s", where, e->key, v, e->choices);
            l->v[i] = rlc_strdup(v);
        }
        l->n = n;
        return;
    }
    if (e->type == CT_FLOAT2) {
        if (n != 2) rlc_die("%s: %s: expected a list of two numbers, got %lld items", where, e->key, (long long)n);
        double *d = (double *)base;
        for (int i = 0; i < 2; i++) {
            yaml_node_t *x = yaml_document_get_node(doc, it[i]);
            const char *v = (const char *)x->data.scalar.value;
            if (parse_float(v, &d[i]) != 0) rlc_die("%s: %s[%d]: expected a number, got '%s'", where, e->key, i, v);
            check_range(&cx, e, d[i], v);
        }
        return;
    }
    rlc_die("%s: %s: expected %s, got a list", where, e->key, type_name(e->type));
}

static void walk_mapping(rlc_train_config *c, const char *name, yaml_document_t *doc, yaml_node_t *map,
                         const char *prefix) {
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key), *v = yaml_document_get_node(doc, p->value);
        char where[1200];
        where_of(where, sizeof where, name, k);
        if (k->type != YAML_SCALAR_NODE) rlc_die("%s: a config key must be a plain string", where);
        const char *ks = (const char *)k->data.scalar.value;
        size_t need = strlen(prefix) + strlen(ks) + 2;
        char *full = rlc_malloc(need);
        snprintf(full, need, "%s%s%s", prefix, *prefix ? "." : "", ks);
        const cfg_entry *e = cfg_find_key(full);
        if (e) set_node(c, e, name, doc, v);
        else if (cfg_is_section(full)) {
            if (v->type == YAML_MAPPING_NODE) walk_mapping(c, name, doc, v, full);
            else if (!(v->type == YAML_SCALAR_NODE && is_null_text((const char *)v->data.scalar.value, 0)))
                rlc_die("%s: '%s' is a section; expected a mapping of its keys", where, full);
        } else cfg_die_unknown(where, full);
        free(full);
    }
}

// The reader layer's strictness, checked on the event stream before the document is built: one document,
// nesting at most YAML_MAX_DEPTH deep (libyaml's loader is quadratic in the depth), and no NUL byte.
#define YAML_MAX_DEPTH 64
static void yaml_prescan(const char *text, size_t len, const char *name) {
    const char *nul = memchr(text, 0, len);
    if (nul) {
        size_t line = 1;
        for (const char *q = text; q < nul; q++) line += *q == '\n';
        rlc_die("%s:%zu: NUL byte in the YAML text (byte %zu)", name, line, (size_t)(nul - text));
    }
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) rlc_die("%s: cannot initialise the YAML parser", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int depth = 0, docs = 0, done = 0;
    while (!done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) break;   // the loader below reports the syntax error
        const yaml_mark_t m = ev.start_mark;
        switch (ev.type) {
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1)
                rlc_die("%s:%lu: a second YAML document ('---'); a config is one document", name, (unsigned long)m.line + 1);
            break;
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
            if (++depth > YAML_MAX_DEPTH)
                rlc_die("%s:%lu:%lu: YAML nesting deeper than %d levels", name, (unsigned long)m.line + 1,
                        (unsigned long)m.column + 1, YAML_MAX_DEPTH);
            break;
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT: depth--; break;
        case YAML_STREAM_END_EVENT: done = 1; break;
        default: break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
}

static void load_doc(yaml_document_t *doc, const char *text, size_t len, const char *name) {
    yaml_prescan(text, len, name);
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) rlc_die("%s: cannot initialise the YAML parser", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, doc)) {
        const yaml_mark_t *m = parser.problem ? &parser.problem_mark : &parser.context_mark;
        rlc_die("%s:%lu:%lu: YAML syntax error: %s%s%s", name, (unsigned long)m->line + 1, (unsigned long)m->column + 1,
                parser.problem ? parser.problem : "malformed document", parser.context ? " " : "",
                parser.context ? parser.context : "");
    }
    yaml_parser_delete(&parser);
}

static void load_yaml_len(rlc_train_config *c, const char *text, size_t len, const char *name) {
    yaml_document_t doc;
    load_doc(&doc, text, len, name);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root) {
        if (root->type == YAML_MAPPING_NODE) walk_mapping(c, name, &doc, root, "");
        else if (!(root->type == YAML_SCALAR_NODE && is_null_text((const char *)root->data.scalar.value, 0)))
            rlc_die("%s:%lu: the config must be a mapping of keys", name, (unsigned long)root->start_mark.line + 1);
    }
    yaml_document_delete(&doc);
}

void rlc_config_load_yaml_text(rlc_train_config *c, const char *text, const char *name) {
    load_yaml_len(c, text, strlen(text), name);
}

void rlc_config_load_yaml(rlc_train_config *c, const char *path) {
    size_t len;
    char *text = rlc_read_file(path, &len);
    load_yaml_len(c, text, len, path);
    free(text);
}

// Set one key from YAML value text; `where` names the source.
static void set_from_text(rlc_train_config *c, const cfg_entry *e, const char *value, const char *where) {
    yaml_document_t doc;
    load_doc(&doc, value, strlen(value), where);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        ctx_t cx = {where};
        set_scalar(c, e, &cx, (scal){"", 0});
    } else {
        // errors name the override, not a line
        if (root->type == YAML_SCALAR_NODE) {
            ctx_t cx = {where};
            set_scalar(c, e, &cx, (scal){(const char *)root->data.scalar.value,
                                         root->data.scalar.style != YAML_PLAIN_SCALAR_STYLE});
        } else {
            // reuse set_node with a name that reads well: "<where>:1"
            set_node(c, e, where, &doc, root);
        }
    }
    yaml_document_delete(&doc);
}

void rlc_config_override(rlc_train_config *c, const char *kv) {
    while (*kv == '+') kv++;   // Hydra's "+key=v" / "++key=v" spellings mean the same here
    const char *eq = strchr(kv, '=');
    size_t wn = strlen(kv) + 32;
    char *where = rlc_malloc(wn);
    snprintf(where, wn, "override '%s'", kv);
    if (!eq || eq == kv) rlc_die("%s: expected key=value", where);
    char *key = rlc_malloc((size_t)(eq - kv) + 1);
    memcpy(key, kv, (size_t)(eq - kv));
    key[eq - kv] = 0;
    const cfg_entry *e = cfg_find_key(key);
    if (!e) {
        if (cfg_is_section(key)) rlc_die("%s: '%s' is a section; override one of its keys", where, key);
        cfg_die_unknown(where, key);
    }
    set_from_text(c, e, eq + 1, where);
    free(key);
    free(where);
}

void rlc_config_init(rlc_train_config *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < cfg_n_keys; i++) {
        char where[256];
        snprintf(where, sizeof where, "default of %s", cfg_keys[i].key);
        set_from_text(c, &cfg_keys[i], cfg_keys[i].def, where);
    }
}

void rlc_config_free(rlc_train_config *c) {
    for (int i = 0; i < cfg_n_keys; i++) {
        char *base = (char *)c + cfg_keys[i].off;
        if (cfg_keys[i].type == CT_STR) { free(*(char **)base); *(char **)base = NULL; }
        if (cfg_keys[i].type == CT_STRLIST || cfg_keys[i].type == CT_STRORLIST) strlist_free((rlc_strlist *)base);
    }
}
