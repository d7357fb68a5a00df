// parquet.c: the footer, the schema tree, and rows assembled from a row group's columns (see parquet.h).
#include "data/parquet.h"

#include <string.h>

#include "core/common.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "data/thrift.h"

// Schema nesting deeper than this is no dataset; the bound keeps the recursive assembly's stack small.
#define PQ_MAX_DEPTH 32

enum { CONV_UTF8 = 0, CONV_MAP = 1, CONV_MAP_KEY_VALUE = 2, CONV_LIST = 3, CONV_ENUM = 4, CONV_DECIMAL = 5, CONV_JSON = 19 };
enum { LOGICAL_STRING = 1, LOGICAL_MAP = 2, LOGICAL_LIST = 3, LOGICAL_ENUM = 4, LOGICAL_DECIMAL = 5, LOGICAL_JSON = 12 };

// ---- footer ----

typedef struct {
    const uint8_t *name;
    size_t name_n;
    int type, type_length, repetition, num_children, converted, logical;
    int32_t scale;
} schema_elem;

static void read_logical(rlc_thrift *t, schema_elem *e) {
    rlc_thrift_struct_begin(t);
    int last = 0, id, ft;
    while (rlc_thrift_field(t, &last, &id, &ft)) {
        e->logical = id;   // a union: the one field present names the logical type
        if (id == LOGICAL_DECIMAL && ft == RLC_THRIFT_STRUCT) {
            rlc_thrift_struct_begin(t);
            int l2 = 0, id2, ft2;
            while (rlc_thrift_field(t, &l2, &id2, &ft2)) {
                if (id2 == 1) e->scale = rlc_thrift_i32(t, ft2);
                else rlc_thrift_skip(t, ft2);
            }
            rlc_thrift_struct_end(t);
        } else rlc_thrift_skip(t, ft);
    }
    rlc_thrift_struct_end(t);
}

static void read_schema_elem(rlc_thrift *t, schema_elem *e) {
    memset(e, 0, sizeof *e);
    e->type = e->repetition = e->converted = -1;
    e->num_children = -1;
    rlc_thrift_struct_begin(t);
    int last = 0, id, ft;
    while (rlc_thrift_field(t, &last, &id, &ft)) {
        switch (id) {
        case 1: e->type = rlc_thrift_i32(t, ft); break;
        case 2: e->type_length = rlc_thrift_i32(t, ft); break;
        case 3: e->repetition = rlc_thrift_i32(t, ft); break;
        case 4: rlc_thrift_binary(t, ft, &e->name, &e->name_n); break;
        case 5: e->num_children = rlc_thrift_i32(t, ft); break;
        case 6: e->converted = rlc_thrift_i32(t, ft); break;
        case 7: e->scale = rlc_thrift_i32(t, ft); break;
        case 10:
            if (ft == RLC_THRIFT_STRUCT) read_logical(t, e);
            else rlc_thrift_skip(t, ft);
            break;
        default: rlc_thrift_skip(t, ft);
        }
    }
    rlc_thrift_struct_end(t);
}

typedef struct {
    int type, codec;
    int64_t num_values, data_page_offset, dictionary_page_offset, total_compressed_size, total_uncompressed_size;
    rlc_strbuf path;        // path_in_schema joined with '.'
    int external;           // ColumnChunk.file_path set: the data lives in another file
} chunk_meta;

static void read_column_meta(rlc_thrift *t, chunk_meta *c) {
    rlc_thrift_struct_begin(t);
    int last = 0, id, ft;
    while (rlc_thrift_field(t, &last, &id, &ft)) {
        switch (id) {
        case 1: c->type = rlc_thrift_i32(t, ft); break;
        case 3: {
            int et;
            int64_t n = rlc_thrift_list(t, ft, &et);
            for (int64_t i = 0; i < n; i++) {
                const uint8_t *s;
                size_t len;
                rlc_thrift_binary(t, et, &s, &len);
                if (i) rlc_sb_putc(&c->path, '.');
                rlc_sb_append(&c->path, s, len);
            }
            break;
        }
        case 4: c->codec = rlc_thrift_i32(t, ft); break;
        case 5: c->num_values = rlc_thrift_i64(t, ft); break;
        case 6: c->total_uncompressed_size = rlc_thrift_i64(t, ft); break;
        case 7: c->total_compressed_size = rlc_thrift_i64(t, ft); break;
        case 9: c->data_page_offset = rlc_thrift_i64(t, ft); break;
        case 11: c->dictionary_page_offset = rlc_thrift_i64(t, ft); break;
        default: rlc_thrift_skip(t, ft);
        }
    }
    rlc_thrift_struct_end(t);
}

static void read_column_chunk(rlc_thrift *t, chunk_meta *c) {
    memset(c, 0, sizeof *c);
    c->type = c->codec = -1;
    c->num_values = c->data_page_offset = c->total_compressed_size = -1;
    c->dictionary_page_offset = c->total_uncompressed_size = -1;
    int have_meta = 0;
    rlc_thrift_struct_begin(t);
    int last = 0, id, ft;
    while (rlc_thrift_field(t, &last, &id, &ft)) {
        if (id == 1 && ft == RLC_THRIFT_BINARY) { c->external = 1; rlc_thrift_skip(t, ft); }
        else if (id == 3 && ft == RLC_THRIFT_STRUCT && !have_meta) { read_column_meta(t, c); have_meta = 1; }
        else rlc_thrift_skip(t, ft);
    }
    rlc_thrift_struct_end(t);
    if (!have_meta) rlc_thrift_fail(t, "a column chunk without its metadata (ColumnMetaData)");
}

// ---- schema tree ----

static int name_is(const rlc_pq_node *n, const char *s) { return !strcmp(n->name, s); }

static int build_node(rlc_parquet *pq, const schema_elem *el, int n_el, int *next, int parent, int depth) {
    if (*next >= n_el)
        rlc_die("%s: the schema's groups claim more children than the footer's %d schema elements", pq->path, n_el);
    const int i = (*next)++;
    rlc_pq_node *n = &pq->nodes[i];
    const schema_elem *e = &el[i];
    if (depth > PQ_MAX_DEPTH) rlc_die("%s: the schema nests deeper than %d levels", pq->path, PQ_MAX_DEPTH);
    n->name = rlc_malloc(e->name_n + 1);
    if (e->name_n) memcpy(n->name, e->name, e->name_n);
    n->name[e->name_n] = 0;
    if (parent <= 0) n->path = rlc_strdup(parent < 0 ? "" : n->name);
    else {
        const char *pp = pq->nodes[parent].path;
        n->path = rlc_malloc(strlen(pp) + strlen(n->name) + 2);
        sprintf(n->path, "%s.%s", pp, n->name);
    }
    n->leaf = -1;
    n->type = -1;
    if (parent >= 0) {
        if (e->repetition < 0 || e->repetition > RLC_PQ_REPEATED)
            rlc_die("%s: column %s: repetition type %d (expected REQUIRED, OPTIONAL or REPEATED)", pq->path, n->path, e->repetition);
        n->repetition = e->repetition;
        n->def = (int16_t)(pq->nodes[parent].def + (e->repetition != RLC_PQ_REQUIRED));
        n->rep = (int16_t)(pq->nodes[parent].rep + (e->repetition == RLC_PQ_REPEATED));
    }
    n->is_list = e->converted == CONV_LIST || e->logical == LOGICAL_LIST;
    n->is_map = e->converted == CONV_MAP || e->converted == CONV_MAP_KEY_VALUE || e->logical == LOGICAL_MAP;
    n->is_string = e->converted == CONV_UTF8 || e->converted == CONV_ENUM || e->logical == LOGICAL_STRING || e->logical == LOGICAL_ENUM;
    n->is_json = e->converted == CONV_JSON || e->logical == LOGICAL_JSON;
    if (e->converted == CONV_DECIMAL || e->logical == LOGICAL_DECIMAL) n->scale = e->scale;
    n->leaf_begin = pq->n_leaves;
    if (e->num_children > 0) {
        if (e->num_children > n_el - *next)
            rlc_die("%s: the schema's group %s claims %d children, the footer lists %d more elements", pq->path,
                    parent < 0 ? "(root)" : n->path, e->num_children, n_el - *next);
        n->children = rlc_malloc((size_t)e->num_children * sizeof(int));
        n->n_children = e->num_children;
        for (int k = 0; k < e->num_children; k++) {
            int c = build_node(pq, el, n_el, next, i, depth + 1);
            pq->nodes[i].children[k] = c;   // pq->nodes is not reallocated; n stays valid too
        }
    } else {
        if (parent < 0) rlc_die("%s: the schema has no columns", pq->path);
        if (e->type < 0) rlc_die("%s: column %s: a group with no fields", pq->path, n->path);
        n->type = e->type;
        if (n->type == RLC_PQ_BYTE_ARRAY && (e->converted == CONV_DECIMAL || e->logical == LOGICAL_DECIMAL))
            rlc_die("%s: column %s: a DECIMAL stored as BYTE_ARRAY; rlc reads DECIMAL columns stored as INT32 or INT64",
                    pq->path, n->path);
        n->leaf = pq->n_leaves++;
    }
    n->leaf_end = pq->n_leaves;
    return i;
}

// ---- open ----

static void parse_footer(rlc_parquet *pq, const uint8_t *p, size_t n) {
    rlc_thrift t;
    rlc_thrift_init(&t, p, n, pq->path, "the footer (FileMetaData)");
    schema_elem *el = NULL;
    int n_el = -1;
    chunk_meta *cm = NULL;   // (n_groups x per-group columns)
    int64_t *cm_count = NULL, n_rg = -1, num_rows = -1;
    int64_t *rg_rows = NULL;
    rlc_thrift_struct_begin(&t);
    int last = 0, id, ft;
    while (rlc_thrift_field(&t, &last, &id, &ft)) {
        if (id == 2 && n_el < 0) {
            int et;
            int64_t k = rlc_thrift_list(&t, ft, &et);
            if (et != RLC_THRIFT_STRUCT) rlc_thrift_fail(&t, "schema is not a list of structs");
            if (k > 100000) rlc_thrift_fail(&t, "more than 100000 schema elements");
            n_el = (int)k;
            el = rlc_calloc((size_t)n_el + 1, sizeof *el);
            for (int i = 0; i < n_el; i++) read_schema_elem(&t, &el[i]);
        } else if (id == 3) {
            num_rows = rlc_thrift_i64(&t, ft);
        } else if (id == 4 && n_rg < 0) {
            int et;
            n_rg = rlc_thrift_list(&t, ft, &et);
            if (et != RLC_THRIFT_STRUCT) rlc_thrift_fail(&t, "row_groups is not a list of structs");
            cm_count = rlc_calloc((size_t)n_rg + 1, sizeof(int64_t));
            rg_rows = rlc_calloc((size_t)n_rg + 1, sizeof(int64_t));
            int64_t cm_n = 0, cm_cap = 0;
            for (int64_t g = 0; g < n_rg; g++) {
                rg_rows[g] = -1;
                rlc_thrift_struct_begin(&t);
                int l2 = 0, id2, ft2, have_cols = 0;
                while (rlc_thrift_field(&t, &l2, &id2, &ft2)) {
                    if (id2 == 1 && !have_cols) {
                        int et2;
                        int64_t nc = rlc_thrift_list(&t, ft2, &et2);
                        if (et2 != RLC_THRIFT_STRUCT) rlc_thrift_fail(&t, "columns is not a list of structs");
                        if (cm_n + nc > cm_cap) {
                            cm_cap = (cm_n + nc) * 2;
                            cm = rlc_realloc(cm, (size_t)cm_cap * sizeof *cm);
                        }
                        for (int64_t c = 0; c < nc; c++) read_column_chunk(&t, &cm[cm_n++]);
                        cm_count[g] = nc;
                        have_cols = 1;
                    } else if (id2 == 3) {
                        rg_rows[g] = rlc_thrift_i64(&t, ft2);
                    } else rlc_thrift_skip(&t, ft2);
                }
                rlc_thrift_struct_end(&t);
                if (!have_cols || rg_rows[g] < 0) rlc_thrift_fail(&t, "a row group lacks its columns or row count");
            }
        } else rlc_thrift_skip(&t, ft);
    }
    rlc_thrift_struct_end(&t);
    if (n_el < 1) rlc_thrift_fail(&t, "no schema");
    if (n_rg < 0 || num_rows < 0) rlc_thrift_fail(&t, "no row groups or row count");

    pq->nodes = rlc_calloc((size_t)n_el, sizeof(rlc_pq_node));
    pq->n_nodes = n_el;
    int next = 0;
    build_node(pq, el, n_el, &next, -1, 0);
    if (next != n_el) rlc_die("%s: the schema lists %d elements, its tree holds %d", pq->path, n_el, next);
    pq->leaf_node = rlc_malloc((size_t)pq->n_leaves * sizeof(int));
    for (int i = 0; i < n_el; i++) {
        rlc_pq_node *nd = &pq->nodes[i];
        if (nd->leaf >= 0) pq->leaf_node[nd->leaf] = i;
        nd->list_elem = -1;
        if (nd->is_list && nd->n_children == 1 && pq->nodes[nd->children[0]].repetition == RLC_PQ_REPEATED) {
            // The element per the format's LIST rules: a repeated group of one field is a 3-level list (its
            // field is the element) unless it is named "array" or "<list>_tuple" (old 2-level lists).
            const int r = nd->children[0];
            const rlc_pq_node *rn = &pq->nodes[r];
            nd->list_elem = r;
            if (rn->leaf < 0 && rn->n_children == 1 && !name_is(rn, "array")) {
                const size_t ln = strlen(nd->name);
                if (!(strlen(rn->name) == ln + 6 && !strncmp(rn->name, nd->name, ln) && !strcmp(rn->name + ln, "_tuple")))
                    nd->list_elem = rn->children[0];
            }
        }
    }

    pq->groups = rlc_calloc((size_t)n_rg + 1, sizeof(rlc_pq_row_group));
    pq->n_groups = (int)n_rg;
    int64_t at = 0, total = 0;
    for (int64_t g = 0; g < n_rg; g++) {
        if (cm_count[g] != pq->n_leaves)
            rlc_die("%s: row group %lld has %lld column chunks, the schema %d columns", pq->path, (long long)g,
                    (long long)cm_count[g], pq->n_leaves);
        rlc_pq_row_group *rg = &pq->groups[g];
        rg->num_rows = rg_rows[g];
        rg->chunks = rlc_calloc((size_t)pq->n_leaves + 1, sizeof(rlc_pq_chunk));
        for (int c = 0; c < pq->n_leaves; c++) {
            chunk_meta *m = &cm[at + c];
            const rlc_pq_node *leaf = &pq->nodes[pq->leaf_node[c]];
            if (m->external)
                rlc_die("%s: column %s: the data lives in another file (ColumnChunk.file_path); rlc reads single-file Parquet",
                        pq->path, leaf->path);
            if (m->type != leaf->type || !m->path.s || strcmp(m->path.s, leaf->path))
                rlc_die("%s: row group %lld: column chunk %d is %s of type %s, the schema says %s of type %s", pq->path,
                        (long long)g, c, m->path.s ? m->path.s : "(unnamed)", rlc_pq_type_name(m->type), leaf->path,
                        rlc_pq_type_name(leaf->type));
            if (m->data_page_offset < 0 || m->total_compressed_size < 0 || m->num_values < 0 || m->codec < 0)
                rlc_die("%s: column %s: row group %lld lacks the chunk's offsets, size, codec or value count", pq->path,
                        leaf->path, (long long)g);
            rlc_pq_chunk *k = &rg->chunks[c];
            k->file = pq->path;
            k->column = leaf->path;
            k->type = leaf->type;
            k->max_def = leaf->def;
            k->max_rep = leaf->rep;
            k->codec = m->codec;
            k->num_values = m->num_values;
            k->data_page_offset = m->data_page_offset;
            k->dictionary_page_offset = m->dictionary_page_offset;
            k->total_compressed_size = m->total_compressed_size;
            k->total_uncompressed_size = m->total_uncompressed_size;
        }
        if (rg->num_rows > INT64_MAX - total) rlc_die("%s: row counts overflow", pq->path);
        total += rg->num_rows;
        at += cm_count[g];
    }
    if (total != num_rows)
        rlc_die("%s: the row groups hold %lld rows, the footer says %lld", pq->path, (long long)total, (long long)num_rows);
    pq->num_rows = num_rows;
    for (int64_t i = 0; i < at; i++) rlc_sb_free(&cm[i].path);
    free(cm);
    free(cm_count);
    free(rg_rows);
    free(el);
}

void rlc_parquet_open(rlc_parquet *pq, const char *path) {
    memset(pq, 0, sizeof *pq);
    pq->path = rlc_strdup(path);
    pq->data = (uint8_t *)rlc_read_file(path, &pq->size);
    const uint8_t *d = pq->data;
    const size_t n = pq->size;
    if (n < 12 || memcmp(d, "PAR1", 4) || memcmp(d + n - 4, "PAR1", 4)) {
        if (n >= 4 && !memcmp(d + n - 4, "PARE", 4))
            rlc_die("%s: an encrypted Parquet file (footer magic PARE); rlc reads unencrypted files", path);
        rlc_die("%s: not a Parquet file, or a truncated one (%zu bytes; expected \"PAR1\" at the start and the end)", path, n);
    }
    const uint32_t flen = (uint32_t)d[n - 8] | (uint32_t)d[n - 7] << 8 | (uint32_t)d[n - 6] << 16 | (uint32_t)d[n - 5] << 24;
    if ((uint64_t)flen > n - 12)
        rlc_die("%s: bad footer: its length %u exceeds the %zu bytes before it (a truncated or corrupt file)", path, flen, n - 12);
    parse_footer(pq, d + n - 8 - flen, flen);
    pq->cols = rlc_calloc((size_t)pq->n_leaves + 1, sizeof(rlc_pq_column));
    pq->lev_pos = rlc_calloc((size_t)pq->n_leaves + 1, sizeof(int64_t));
    pq->val_pos = rlc_calloc((size_t)pq->n_leaves + 1, sizeof(int64_t));
    pq->group = -1;
}

int rlc_parquet_has_column(const rlc_parquet *pq, const char *name) {
    const rlc_pq_node *root = &pq->nodes[0];
    for (int k = 0; k < root->n_children; k++)
        if (name_is(&pq->nodes[root->children[k]], name)) return 1;
    return 0;
}

char *rlc_parquet_column_list(const rlc_parquet *pq) {
    rlc_strbuf b = {0};
    const rlc_pq_node *root = &pq->nodes[0];
    for (int k = 0; k < root->n_children; k++) {
        if (k) rlc_sb_puts(&b, ", ");
        rlc_sb_puts(&b, pq->nodes[root->children[k]].name);
    }
    return rlc_sb_take(&b);
}

// ---- assembly ----

RLC_PRINTF(3, 4) RLC_NORETURN static void bad_levels(const rlc_parquet *pq, const rlc_pq_node *n, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rlc_die("%s: column %s: row %lld: %s (a corrupt file)", pq->path, n->path, (long long)pq->row + 1, msg);
}

// The definition level of the next entry of leaf column `leaf`.
static int16_t peek_def(const rlc_parquet *pq, const rlc_pq_node *n, int leaf) {
    const rlc_pq_column *c = &pq->cols[leaf];
    if (pq->lev_pos[leaf] >= c->n_levels) bad_levels(pq, n, "the column ends before the row group's %lld rows",
                                                     (long long)pq->groups[pq->group].num_rows);
    return c->def ? c->def[pq->lev_pos[leaf]] : 0;
}

// Consume one entry of every leaf under n, where n is null or an empty list.
static void skip_absent(rlc_parquet *pq, const rlc_pq_node *n) {
    for (int l = n->leaf_begin; l < n->leaf_end; l++)
        if (peek_def(pq, n, l) >= n->def) bad_levels(pq, n, "its columns disagree on whether it is present");
    for (int l = n->leaf_begin; l < n->leaf_end; l++) pq->lev_pos[l]++;
}

static cJSON *read_field(rlc_parquet *pq, const rlc_pq_node *n);

static cJSON *leaf_value(rlc_parquet *pq, const rlc_pq_node *n) {
    const int l = n->leaf;
    const rlc_pq_column *c = &pq->cols[l];
    if (peek_def(pq, n, l) != pq->groups[pq->group].chunks[l].max_def) bad_levels(pq, n, "a required value is missing");
    if (pq->val_pos[l] >= c->vals.n) bad_levels(pq, n, "more entries than values");
    const int64_t v = pq->val_pos[l]++;
    pq->lev_pos[l]++;
    cJSON *out;
    switch (n->type) {
    case RLC_PQ_BOOLEAN: out = cJSON_CreateBool(c->vals.num[v] != 0); break;
    case RLC_PQ_BYTE_ARRAY: {
        const char *s = (const char *)c->vals.arena + c->vals.off[v];
        if (n->is_json) {
            char err[256];
            out = rlc_json_parse_err(s, (size_t)c->vals.len[v], "value", err, sizeof err);
            if (!out) bad_levels(pq, n, "a JSON-annotated value is not valid JSON");
        } else out = cJSON_CreateStringReference(s);   // the arena outlives the row (see rlc_parquet_next)
        break;
    }
    default: {
        double x = c->vals.num[v];
        for (int32_t k = 0; k < n->scale && k < 64; k++) x /= 10;   // DECIMAL(precision, scale)
        out = cJSON_CreateNumber(x);
        if (out && (n->type == RLC_PQ_FLOAT || n->type == RLC_PQ_DOUBLE)) out->type |= RLC_JSON_FLOAT;   // Python: a float
    }
    }
    if (!out) rlc_die("out of memory building a Parquet row");
    return out;
}

// One instance of n (n is present at this position).
static cJSON *read_instance(rlc_parquet *pq, const rlc_pq_node *n);

// The instances of the repeated node r as an array; `elem` is the node decoded per instance (r itself, or
// for a standard 3-level LIST the element under r, read as a field so that null elements stay null).
static cJSON *read_repeated(rlc_parquet *pq, const rlc_pq_node *r, const rlc_pq_node *elem) {
    cJSON *arr = cJSON_CreateArray();
    if (peek_def(pq, r, r->leaf_begin) < r->def) {   // an empty list
        skip_absent(pq, r);
        return arr;
    }
    for (;;) {
        cJSON_AddItemToArray(arr, elem == r ? read_instance(pq, r) : read_field(pq, elem));
        const int l = r->leaf_begin;
        const rlc_pq_column *c = &pq->cols[l];
        if (pq->lev_pos[l] >= c->n_levels || c->rep[pq->lev_pos[l]] != r->rep) break;   // the list ends here
    }
    return arr;
}

static cJSON *read_instance(rlc_parquet *pq, const rlc_pq_node *n) {
    if (n->leaf >= 0) return leaf_value(pq, n);
    if ((n->is_list || n->is_map) && n->n_children == 1 && pq->nodes[n->children[0]].repetition == RLC_PQ_REPEATED) {
        const rlc_pq_node *r = &pq->nodes[n->children[0]];
        if (n->is_map && r->leaf < 0 && r->n_children >= 1) {   // MAP: repeated key_value {key, value}
            cJSON *arr = read_repeated(pq, r, r), *obj = cJSON_CreateObject();
            const rlc_pq_node *kn = &pq->nodes[r->children[0]];
            const rlc_pq_node *vn = r->n_children > 1 ? &pq->nodes[r->children[1]] : NULL;
            cJSON *e;
            cJSON_ArrayForEach(e, arr) {
                cJSON *k = cJSON_GetObjectItemCaseSensitive(e, kn->name);
                cJSON *v = vn ? cJSON_DetachItemFromObjectCaseSensitive(e, vn->name) : cJSON_CreateNull();
                char num[64];
                const char *key = cJSON_IsString(k) ? k->valuestring : NULL;
                if (!key && cJSON_IsNumber(k)) { snprintf(num, sizeof num, "%.17g", k->valuedouble); key = num; }
                if (!key) bad_levels(pq, kn, "a map key that is not a string or a number");
                cJSON_AddItemToObject(obj, key, v);
            }
            cJSON_Delete(arr);
            return obj;
        }
        if (n->is_list) return read_repeated(pq, r, &pq->nodes[n->list_elem]);
    }
    cJSON *obj = cJSON_CreateObject();
    for (int k = 0; k < n->n_children; k++) {
        const rlc_pq_node *ch = &pq->nodes[n->children[k]];
        cJSON_AddItemToObject(obj, ch->name, read_field(pq, ch));
    }
    return obj;
}

// The value of field n at this position: null, an array (a repeated field), or one instance.
static cJSON *read_field(rlc_parquet *pq, const rlc_pq_node *n) {
    if (n->repetition == RLC_PQ_REPEATED) return read_repeated(pq, n, n);
    if (n->repetition == RLC_PQ_OPTIONAL && peek_def(pq, n, n->leaf_begin) < n->def) {
        skip_absent(pq, n);
        return cJSON_CreateNull();
    }
    return read_instance(pq, n);
}

static void load_group(rlc_parquet *pq, int g) {
    for (int l = 0; l < pq->n_leaves; l++) {
        rlc_pq_column_free(&pq->cols[l]);
        rlc_pq_column_read(&pq->cols[l], pq->data, pq->size, &pq->groups[g].chunks[l]);
        pq->lev_pos[l] = pq->val_pos[l] = 0;
    }
    pq->group = g;
    pq->group_row = 0;
}

// After a row group's last row every column must be used up exactly.
static void check_group_end(rlc_parquet *pq) {
    for (int l = 0; l < pq->n_leaves; l++) {
        const rlc_pq_node *n = &pq->nodes[pq->leaf_node[l]];
        if (pq->lev_pos[l] != pq->cols[l].n_levels || pq->val_pos[l] != pq->cols[l].vals.n)
            rlc_die("%s: column %s: row group %d holds more entries than its %lld rows (a corrupt file)", pq->path, n->path,
                    pq->group, (long long)pq->groups[pq->group].num_rows);
    }
}

const cJSON *rlc_parquet_next(rlc_parquet *pq) {
    cJSON_Delete(pq->obj);
    pq->obj = NULL;
    while (pq->group < 0 || pq->group_row >= pq->groups[pq->group].num_rows) {
        if (pq->group >= 0) check_group_end(pq);
        if (pq->group + 1 >= pq->n_groups) return NULL;
        load_group(pq, pq->group + 1);
    }
    const rlc_pq_node *root = &pq->nodes[0];
    for (int l = 0; l < pq->n_leaves; l++) {   // every column starts a new record here
        const rlc_pq_column *c = &pq->cols[l];
        if (c->rep && pq->lev_pos[l] < c->n_levels && c->rep[pq->lev_pos[l]] != 0)
            bad_levels(pq, &pq->nodes[pq->leaf_node[l]], "a row does not start at repetition level 0");
    }
    pq->obj = cJSON_CreateObject();
    for (int k = 0; k < root->n_children; k++) {
        const rlc_pq_node *ch = &pq->nodes[root->children[k]];
        cJSON_AddItemToObject(pq->obj, ch->name, read_field(pq, ch));
    }
    pq->group_row++;
    pq->row++;
    return pq->obj;
}

void rlc_parquet_close(rlc_parquet *pq) {
    cJSON_Delete(pq->obj);
    for (int l = 0; l < pq->n_leaves && pq->cols; l++) rlc_pq_column_free(&pq->cols[l]);
    for (int i = 0; i < pq->n_nodes; i++) {
        free(pq->nodes[i].name);
        free(pq->nodes[i].path);
        free(pq->nodes[i].children);
    }
    for (int g = 0; g < pq->n_groups; g++) free(pq->groups[g].chunks);
    free(pq->groups);
    free(pq->nodes);
    free(pq->leaf_node);
    free(pq->cols);
    free(pq->lev_pos);
    free(pq->val_pos);
    free(pq->data);
    free(pq->path);
    memset(pq, 0, sizeof *pq);
}
