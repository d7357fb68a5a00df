// parquet.h: Apache Parquet files read as rows of JSON values, the form a JSONL line takes, so a dataset can
// come from either. rlc reads the format itself (Debian packages no C reader): the footer (FileMetaData, Thrift
// compact protocol, thrift.h), row groups and column chunks (parquet_page.h), and the columns' definition and
// repetition levels assembled into nested values:
//   BOOLEAN -> true/false; INT32, INT64, FLOAT, DOUBLE -> numbers (DECIMAL scaled); BYTE_ARRAY -> strings
//   (JSON-annotated ones parsed as JSON); a group -> an object; a LIST group or a repeated field -> an array;
//   a MAP group -> an object keyed by the map's keys; a null (or absent optional) value -> null.
// So verl's rows (prompt: list<struct<content, role>>, reward_model: struct<...>, extra_info: struct<...>)
// read back as the JSON objects verl wrote. Anything malformed, truncated or unsupported dies with one line
// naming the file, the column and what was expected.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "data/parquet_page.h"

// One schema element, in the schema tree of the file.
typedef struct {
    char *name;
    char *path;             // dotted path from the root ("prompt.list.element.content"), for messages
    int type;               // physical type of a leaf; -1 for a group
    int repetition;         // RLC_PQ_REQUIRED / OPTIONAL / REPEATED
    int is_list, is_map;    // LIST / MAP annotations (converted or logical type)
    int is_string, is_json; // UTF8/STRING/ENUM, JSON annotations of a BYTE_ARRAY leaf
    int32_t scale;          // DECIMAL scale (0: not a decimal)
    int16_t def, rep;       // definition / repetition level of this node (non-required / repeated ancestors, itself included)
    int *children;          // (n_children) node indices
    int n_children;
    int leaf;               // leaf (column) index, -1 for a group
    int leaf_begin, leaf_end;   // the leaves under this node: [leaf_begin, leaf_end)
    int list_elem;          // a LIST group: the node read per element (its repeated child or that child's field); -1 otherwise
} rlc_pq_node;

typedef struct {
    rlc_pq_chunk *chunks;   // (n_leaves) one per leaf column
    int64_t num_rows;
} rlc_pq_row_group;

typedef struct {
    char *path;
    uint8_t *data;          // (size) the whole file
    size_t size;
    rlc_pq_node *nodes;     // (n_nodes) nodes[0] is the root
    int n_nodes;
    int *leaf_node;         // (n_leaves) node of each leaf column
    int n_leaves;
    rlc_pq_row_group *groups;   // (n_groups)
    int n_groups;
    int64_t num_rows;
    // iteration
    rlc_pq_column *cols;    // (n_leaves) the current row group's decoded columns
    int64_t *lev_pos, *val_pos;   // (n_leaves) assembly cursors into cols
    int group;              // current row group, -1 before the first
    int64_t group_row;      // rows of the current group returned
    int64_t row;            // rows returned so far (the 1-based number of the last one)
    cJSON *obj;             // the row last returned; freed by the next call and by close
} rlc_parquet;

// Open a Parquet file and read its footer and schema. Dies "path: ..." if it is not a readable Parquet file.
void rlc_parquet_open(rlc_parquet *pq, const char *path);
// The next row as a JSON object (owned by pq, valid until the next call), or NULL after the last row. Its strings
// point into the reader's buffers (cJSON string references): read or duplicate the row, do not keep parts of it.
const cJSON *rlc_parquet_next(rlc_parquet *pq);
void rlc_parquet_close(rlc_parquet *pq);
// 1 if the file has a top-level column `name`.
int rlc_parquet_has_column(const rlc_parquet *pq, const char *name);
// The top-level column names, comma-separated, for messages (malloc'd).
char *rlc_parquet_column_list(const rlc_parquet *pq);
