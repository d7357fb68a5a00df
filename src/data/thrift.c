// thrift.c: the Thrift compact protocol reader (see thrift.h).
#include "data/thrift.h"

#include <string.h>

#include "core/common.h"

// Nesting deeper than this is not a Parquet footer; it bounds recursion on hostile input.
#define THRIFT_MAX_DEPTH 64

void rlc_thrift_init(rlc_thrift *t, const uint8_t *p, size_t n, const char *path, const char *what) {
    t->p = p;
    t->end = p + n;
    t->path = path;
    t->what = what;
    t->depth = 0;
}

void rlc_thrift_fail(const rlc_thrift *t, const char *msg) {
    rlc_die("%s: %s: %s (a corrupt or truncated Parquet file)", t->path, t->what, msg);
}

static uint8_t byte(rlc_thrift *t) {
    if (t->p >= t->end) rlc_thrift_fail(t, "unexpected end of data");
    return *t->p++;
}

static uint64_t varint(rlc_thrift *t) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        uint8_t b = byte(t);
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    rlc_thrift_fail(t, "varint longer than 10 bytes");
    return 0;
}

static int64_t zigzag(rlc_thrift *t) {
    uint64_t v = varint(t);
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

void rlc_thrift_struct_begin(rlc_thrift *t) {
    if (++t->depth > THRIFT_MAX_DEPTH) rlc_thrift_fail(t, "structs nested too deeply");
}

void rlc_thrift_struct_end(rlc_thrift *t) { t->depth--; }

int rlc_thrift_field(rlc_thrift *t, int *last_id, int *id, int *type) {
    uint8_t b = byte(t);
    if (b == 0) return 0;
    *type = b & 0x0f;
    int delta = b >> 4;
    if (delta) *id = *last_id + delta;
    else {
        int64_t v = zigzag(t);
        if (v < -32768 || v > 32767) rlc_thrift_fail(t, "field id out of range");
        *id = (int)v;
    }
    if (*type > RLC_THRIFT_STRUCT) rlc_thrift_fail(t, "unknown field type");
    *last_id = *id;
    return 1;
}

int32_t rlc_thrift_i32(rlc_thrift *t, int type) {
    int64_t v = rlc_thrift_i64(t, type);
    if (v < INT32_MIN || v > INT32_MAX) rlc_thrift_fail(t, "32-bit integer out of range");
    return (int32_t)v;
}

int64_t rlc_thrift_i64(rlc_thrift *t, int type) {
    if (type == RLC_THRIFT_BYTE) return (int8_t)byte(t);
    if (type == RLC_THRIFT_I16 || type == RLC_THRIFT_I32 || type == RLC_THRIFT_I64) return zigzag(t);
    rlc_thrift_fail(t, "expected an integer field");
    return 0;
}

int rlc_thrift_bool(rlc_thrift *t, int type) {
    if (type == RLC_THRIFT_TRUE) return 1;
    if (type == RLC_THRIFT_FALSE) return 0;
    rlc_thrift_fail(t, "expected a boolean field");
    return 0;
}

void rlc_thrift_binary(rlc_thrift *t, int type, const uint8_t **s, size_t *n) {
    if (type != RLC_THRIFT_BINARY) rlc_thrift_fail(t, "expected a string field");
    uint64_t len = varint(t);
    if (len > (uint64_t)(t->end - t->p)) rlc_thrift_fail(t, "string runs past the end of the data");
    *s = t->p;
    *n = (size_t)len;
    t->p += len;
}

int64_t rlc_thrift_list(rlc_thrift *t, int type, int *elem_type) {
    if (type != RLC_THRIFT_LIST && type != RLC_THRIFT_SET) rlc_thrift_fail(t, "expected a list field");
    uint8_t b = byte(t);
    uint64_t n = b >> 4;
    if (n == 15) n = varint(t);
    *elem_type = b & 0x0f;
    if (*elem_type == RLC_THRIFT_STOP || *elem_type > RLC_THRIFT_STRUCT) rlc_thrift_fail(t, "unknown list element type");
    // Every element takes at least one byte, so a count above the bytes left is corrupt (and never allocated).
    if (n > (uint64_t)(t->end - t->p)) rlc_thrift_fail(t, "list longer than the data left");
    return (int64_t)n;
}

void rlc_thrift_skip(rlc_thrift *t, int type) {
    switch (type) {
    case RLC_THRIFT_TRUE: case RLC_THRIFT_FALSE: return;
    case RLC_THRIFT_BYTE: byte(t); return;
    case RLC_THRIFT_I16: case RLC_THRIFT_I32: case RLC_THRIFT_I64: varint(t); return;
    case RLC_THRIFT_DOUBLE:
        if (t->end - t->p < 8) rlc_thrift_fail(t, "unexpected end of data");
        t->p += 8;
        return;
    case RLC_THRIFT_BINARY: {
        const uint8_t *s;
        size_t n;
        rlc_thrift_binary(t, type, &s, &n);
        return;
    }
    case RLC_THRIFT_LIST: case RLC_THRIFT_SET: {
        int et;
        int64_t n = rlc_thrift_list(t, type, &et);
        rlc_thrift_struct_begin(t);
        for (int64_t i = 0; i < n; i++) {
            if (et == RLC_THRIFT_TRUE || et == RLC_THRIFT_FALSE) byte(t);  // list booleans are one byte each
            else rlc_thrift_skip(t, et);
        }
        rlc_thrift_struct_end(t);
        return;
    }
    case RLC_THRIFT_MAP: {
        uint64_t n = varint(t);
        if (n == 0) return;
        uint8_t kv = byte(t);
        int kt = kv >> 4, vt = kv & 0x0f;
        if (kt == 0 || kt > RLC_THRIFT_STRUCT || vt == 0 || vt > RLC_THRIFT_STRUCT) rlc_thrift_fail(t, "unknown map types");
        if (n > (uint64_t)(t->end - t->p)) rlc_thrift_fail(t, "map longer than the data left");
        rlc_thrift_struct_begin(t);
        for (uint64_t i = 0; i < n; i++) {
            if (kt <= RLC_THRIFT_FALSE) byte(t); else rlc_thrift_skip(t, kt);
            if (vt <= RLC_THRIFT_FALSE) byte(t); else rlc_thrift_skip(t, vt);
        }
        rlc_thrift_struct_end(t);
        return;
    }
    case RLC_THRIFT_STRUCT: {
        rlc_thrift_struct_begin(t);
        int last = 0, id, ft;
        while (rlc_thrift_field(t, &last, &id, &ft)) rlc_thrift_skip(t, ft);
        rlc_thrift_struct_end(t);
        return;
    }
    default: rlc_thrift_fail(t, "unknown field type");
    }
}
