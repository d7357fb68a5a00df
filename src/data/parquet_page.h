// parquet_page.h: one Parquet column chunk decoded into its levels and values: the page headers, the codecs
// (UNCOMPRESSED, SNAPPY, GZIP, ZSTD), data pages v1 and v2, dictionary pages, RLE/bit-packed levels, and the
// value encodings PLAIN, PLAIN_DICTIONARY/RLE_DICTIONARY, RLE (booleans), DELTA_BINARY_PACKED,
// DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY and BYTE_STREAM_SPLIT. Every length, count and offset is checked
// against the bytes present before it is used or allocated; a bad chunk dies naming the file and the column.
#pragma once
#include <stddef.h>
#include <stdint.h>

// Parquet's enums, as the format numbers them.
enum { RLC_PQ_BOOLEAN = 0, RLC_PQ_INT32, RLC_PQ_INT64, RLC_PQ_INT96, RLC_PQ_FLOAT, RLC_PQ_DOUBLE, RLC_PQ_BYTE_ARRAY,
       RLC_PQ_FIXED_LEN_BYTE_ARRAY };
enum { RLC_PQ_REQUIRED = 0, RLC_PQ_OPTIONAL = 1, RLC_PQ_REPEATED = 2 };

// A column's values: numbers (booleans as 0/1) or byte strings, each stored NUL-terminated in one arena.
typedef struct {
    double *num;        // (n) numeric columns
    int64_t *off;       // (n) byte-array columns: value i is arena + off[i], len[i] bytes, then a NUL
    int64_t *len;       // (n)
    uint8_t *arena;     // (arena_n)
    int64_t n, cap;
    size_t arena_n, arena_cap;
} rlc_pq_values;

// The metadata of one column chunk (ColumnMetaData) and the leaf it belongs to.
typedef struct {
    const char *file;       // for messages
    const char *column;     // dotted schema path, for messages
    int type;               // physical type
    int16_t max_def, max_rep;
    int codec;
    int64_t num_values;     // level entries in the chunk (values, nulls and empty lists)
    int64_t data_page_offset, dictionary_page_offset;  // -1: no dictionary page offset given
    int64_t total_compressed_size;
    int64_t total_uncompressed_size;   // a size hint for the values' arena (-1: unknown)
} rlc_pq_chunk;

// One decoded column chunk: a (rep, def) level pair per entry, a value per entry with def == max_def.
typedef struct {
    int16_t *def;           // (n_levels), NULL when max_def == 0 (every entry is a value)
    int16_t *rep;           // (n_levels), NULL when max_rep == 0
    int64_t n_levels;
    rlc_pq_values vals;     // (vals.n) the non-null values in order
} rlc_pq_column;

// Decode the chunk `m` of the Parquet file held in (file, file_n). Dies on anything malformed or unsupported.
void rlc_pq_column_read(rlc_pq_column *c, const uint8_t *file, size_t file_n, const rlc_pq_chunk *m);
void rlc_pq_column_free(rlc_pq_column *c);

// Names of the format's enums for messages ("SNAPPY", "DELTA_BYTE_ARRAY", "INT96", ...).
const char *rlc_pq_codec_name(int codec);
const char *rlc_pq_encoding_name(int enc);
const char *rlc_pq_type_name(int type);
