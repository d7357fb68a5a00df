// thrift.h: a reader of the Thrift compact protocol, the encoding of Parquet's footer (FileMetaData) and
// page headers. Every read is bounds-checked against the buffer; a malformed or truncated message dies
// with one line naming the file and what was being read ("path: <what>: ...").
#pragma once
#include <stddef.h>
#include <stdint.h>

// Compact-protocol type ids of a field or list element.
enum {
    RLC_THRIFT_STOP = 0, RLC_THRIFT_TRUE = 1, RLC_THRIFT_FALSE = 2, RLC_THRIFT_BYTE = 3, RLC_THRIFT_I16 = 4,
    RLC_THRIFT_I32 = 5, RLC_THRIFT_I64 = 6, RLC_THRIFT_DOUBLE = 7, RLC_THRIFT_BINARY = 8, RLC_THRIFT_LIST = 9,
    RLC_THRIFT_SET = 10, RLC_THRIFT_MAP = 11, RLC_THRIFT_STRUCT = 12,
};

typedef struct {
    const uint8_t *p, *end;  // the unread bytes
    const char *path;        // file, for messages
    const char *what;        // what is being decoded, for messages ("the footer", "a page header")
    int depth;               // struct nesting, bounded so a hostile file cannot exhaust the stack
} rlc_thrift;

void rlc_thrift_init(rlc_thrift *t, const uint8_t *p, size_t n, const char *path, const char *what);
// Dies "path: what: msg".
void rlc_thrift_fail(const rlc_thrift *t, const char *msg);

// Struct fields. Call rlc_thrift_struct_begin, then rlc_thrift_field until it returns 0 (the STOP byte),
// then rlc_thrift_struct_end. `last_id` (start at 0) carries the previous field id for delta encoding.
void rlc_thrift_struct_begin(rlc_thrift *t);
void rlc_thrift_struct_end(rlc_thrift *t);
int rlc_thrift_field(rlc_thrift *t, int *last_id, int *id, int *type);

// Values of a field of type `type`; each dies if the field has another type.
int32_t rlc_thrift_i32(rlc_thrift *t, int type);      // BYTE, I16 or I32
int64_t rlc_thrift_i64(rlc_thrift *t, int type);      // BYTE, I16, I32 or I64
int rlc_thrift_bool(rlc_thrift *t, int type);         // a boolean field: its value is its TRUE/FALSE type
void rlc_thrift_binary(rlc_thrift *t, int type, const uint8_t **s, size_t *n);  // points into the buffer
// A list (or set) header: returns the element count (at most the bytes left) and sets *elem_type.
int64_t rlc_thrift_list(rlc_thrift *t, int type, int *elem_type);
// Skip a value of any type (nested containers included).
void rlc_thrift_skip(rlc_thrift *t, int type);
