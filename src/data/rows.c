// rows.c: dataset rows from JSONL or Parquet (see rows.h).
#include "data/rows.h"

#include <string.h>

#include "core/common.h"

int rlc_rows_is_parquet(const char *path) {
    size_t n = strlen(path);
    return n >= 8 && !strcmp(path + n - 8, ".parquet");
}

void rlc_rows_open(rlc_rows *r, const char *path, const char *what) {
    memset(r, 0, sizeof *r);
    r->path = path;
    r->is_parquet = rlc_rows_is_parquet(path);
    if (r->is_parquet) rlc_parquet_open(&r->pq, path);
    else rlc_jsonl_open(&r->jsonl, path, what);
}

const cJSON *rlc_rows_next(rlc_rows *r, const char *expected) {
    const cJSON *j;
    if (r->is_parquet) {
        j = rlc_parquet_next(&r->pq);
        r->line = r->pq.row;
    } else {
        j = rlc_jsonl_next(&r->jsonl, expected);
        r->line = r->jsonl.line;
    }
    return j;
}

void rlc_rows_close(rlc_rows *r) {
    if (r->is_parquet) rlc_parquet_close(&r->pq);
    else rlc_jsonl_close(&r->jsonl);
    memset(r, 0, sizeof *r);
}

void rlc_rows_require_any(const rlc_rows *r, const char *const *cols, const char *expected) {
    if (!r->is_parquet) return;
    for (const char *const *c = cols; *c; c++)
        if (rlc_parquet_has_column(&r->pq, *c)) return;
    char *have = rlc_parquet_column_list(&r->pq);
    rlc_die("%s: no column %s; expected %s (the file's columns: %s)", r->path, cols[0] ? cols[0] : "", expected, have);
}
