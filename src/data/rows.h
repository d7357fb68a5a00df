// rows.h: the rows of a dataset file as JSON objects, from JSON Lines or, when the path ends in ".parquet",
// from a Parquet file (parquet.h), so every dataset reader takes both formats row for row. Messages name a
// row as "path:N": the 1-based line of a JSONL file, the 1-based row of a Parquet file.
#pragma once
#include <stdint.h>

#include <cjson/cJSON.h>

#include "data/jsonl.h"
#include "data/parquet.h"

typedef struct {
    const char *path;
    int is_parquet;
    rlc_jsonl jsonl;
    rlc_parquet pq;
    int64_t line;       // the line (JSONL) or row (Parquet) number of the row last returned
} rlc_rows;

// 1 if path names a Parquet file (its name ends in ".parquet").
int rlc_rows_is_parquet(const char *path);
// Dies "path: ..." when the file cannot be read (or is not Parquet, for a .parquet path).
void rlc_rows_open(rlc_rows *r, const char *path, const char *what);
// The next row (owned by r until the next call), or NULL at the end. `expected` describes a row for messages.
const cJSON *rlc_rows_next(rlc_rows *r, const char *expected);
void rlc_rows_close(rlc_rows *r);
// For a Parquet file, dies "path: no column ..." listing the file's columns unless one of `cols` (NULL-ended)
// is a top-level column; JSONL rows are checked one by one by their reader instead.
void rlc_rows_require_any(const rlc_rows *r, const char *const *cols, const char *expected);
