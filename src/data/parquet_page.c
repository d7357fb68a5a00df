// parquet_page.c: a column chunk's pages decoded into levels and values (see parquet_page.h).
#include "data/parquet_page.h"

#include <snappy-c.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "core/common.h"
#include "data/thrift.h"

enum { CODEC_UNCOMPRESSED = 0, CODEC_SNAPPY = 1, CODEC_GZIP = 2, CODEC_ZSTD = 6 };
enum { ENC_PLAIN = 0, ENC_PLAIN_DICTIONARY = 2, ENC_RLE = 3, ENC_BIT_PACKED = 4, ENC_DELTA_BINARY_PACKED = 5,
       ENC_DELTA_LENGTH_BYTE_ARRAY = 6, ENC_DELTA_BYTE_ARRAY = 7, ENC_RLE_DICTIONARY = 8, ENC_BYTE_STREAM_SPLIT = 9 };
enum { PAGE_DATA = 0, PAGE_INDEX = 1, PAGE_DICTIONARY = 2, PAGE_DATA_V2 = 3 };

// A page holds at most this many bytes uncompressed: Parquet writers cut pages near 1 MiB, and the format's
// page sizes are i32. It bounds what a corrupt header can make us allocate.
#define PQ_MAX_PAGE ((int64_t)INT32_MAX)
#define PQ_MAX_PAGE_ENTRIES ((int64_t)1 << 24)

const char *rlc_pq_codec_name(int codec) {
    static const char *n[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
    return codec >= 0 && codec < 8 ? n[codec] : "an unknown codec";
}

const char *rlc_pq_encoding_name(int enc) {
    static const char *n[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED", "DELTA_BINARY_PACKED",
                              "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY", "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
    return enc >= 0 && enc < 10 ? n[enc] : "an unknown encoding";
}

const char *rlc_pq_type_name(int type) {
    static const char *n[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
    return type >= 0 && type < 8 ? n[type] : "an unknown type";
}

RLC_PRINTF(2, 3) RLC_NORETURN static void fail(const rlc_pq_chunk *m, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rlc_die("%s: column %s: %s", m->file, m->column, msg);
}

// ---- values ----

static void vals_reserve(const rlc_pq_chunk *m, rlc_pq_values *v, int64_t more, size_t more_bytes) {
    if (more < 0 || more > INT64_MAX / 2 - v->n) fail(m, "value count overflows");
    if (v->n + more > v->cap) {
        int64_t cap = v->cap ? v->cap : 256;
        while (cap < v->n + more) cap *= 2;
        if (m->type == RLC_PQ_BYTE_ARRAY) {
            v->off = rlc_realloc(v->off, (size_t)cap * sizeof(int64_t));
            v->len = rlc_realloc(v->len, (size_t)cap * sizeof(int64_t));
        } else {
            v->num = rlc_realloc(v->num, (size_t)cap * sizeof(double));
        }
        v->cap = cap;
    }
    if (more_bytes > SIZE_MAX / 4 - v->arena_n) fail(m, "byte-array data overflows");
    if (v->arena_n + more_bytes > v->arena_cap) {
        size_t cap = v->arena_cap ? v->arena_cap : 4096;
        while (cap < v->arena_n + more_bytes) cap *= 2;
        v->arena = rlc_realloc(v->arena, cap);
        v->arena_cap = cap;
    }
}

// Append a byte string: its bytes, the prefix of the previous value first (DELTA_BYTE_ARRAY), then a NUL.
static void vals_push_str(const rlc_pq_chunk *m, rlc_pq_values *v, int64_t prefix, const uint8_t *s, size_t n) {
    vals_reserve(m, v, 1, (size_t)prefix + n + 1);
    int64_t o = (int64_t)v->arena_n;
    if (prefix) memcpy(v->arena + o, v->arena + v->off[v->n - 1], (size_t)prefix);
    if (n) memcpy(v->arena + o + prefix, s, n);
    v->arena[o + prefix + (int64_t)n] = 0;
    v->off[v->n] = o;
    v->len[v->n] = prefix + (int64_t)n;
    v->arena_n += (size_t)prefix + n + 1;
    v->n++;
}

static void vals_free(rlc_pq_values *v) {
    free(v->num);
    free(v->off);
    free(v->len);
    free(v->arena);
    memset(v, 0, sizeof *v);
}

// ---- bit-level readers ----

typedef struct {
    const uint8_t *p;
    size_t n, pos;
} cursor;

static uint64_t cur_varint(const rlc_pq_chunk *m, cursor *c, const char *what) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (c->pos >= c->n) fail(m, "%s runs past the end of its page", what);
        uint8_t b = c->p[c->pos++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    fail(m, "%s: varint longer than 10 bytes", what);
}

static int64_t cur_zigzag(const rlc_pq_chunk *m, cursor *c, const char *what) {
    uint64_t v = cur_varint(m, c, what);
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

// w bits (w <= 64) at bit `bit` of p, least significant bit first; the caller has checked they are present.
static inline uint64_t bits_at(const uint8_t *p, uint64_t bit, int w) {
    if (w == 0) return 0;
    const uint8_t *b = p + (bit >> 3);
    int off = (int)(bit & 7), got = 0;
    uint64_t v = 0;
    while (got < w) {
        v |= (uint64_t)(*b++ >> off) << got;
        got += 8 - off;
        off = 0;
    }
    return w < 64 ? v & ((UINT64_C(1) << w) - 1) : v;
}

// The RLE/bit-packed hybrid: `count` values of bit width w (<= 32) into out.
static void rle_hybrid(const rlc_pq_chunk *m, cursor *c, int w, int64_t count, uint32_t *out, const char *what) {
    if (w < 0 || w > 32) fail(m, "%s: bit width %d (expected 0..32)", what, w);
    const int vbytes = (w + 7) / 8;
    int64_t i = 0;
    while (i < count) {
        uint64_t h = cur_varint(m, c, what);
        if (h & 1) {   // bit-packed: (h >> 1) groups of 8 values
            uint64_t groups = h >> 1;
            if (w && groups > (c->n - c->pos) / (uint64_t)w)
                fail(m, "%s: a bit-packed run of %llu groups runs past the end of its page", what, (unsigned long long)groups);
            uint64_t nv = groups > UINT64_MAX / 8 ? UINT64_MAX : groups * 8;
            int64_t take = (uint64_t)(count - i) < nv ? count - i : (int64_t)nv;
            const uint8_t *p = c->p + c->pos;
            for (int64_t k = 0; k < take; k++) out[i + k] = (uint32_t)bits_at(p, (uint64_t)k * (uint64_t)w, w);
            i += take;
            c->pos += (size_t)(groups * (uint64_t)w);
        } else {       // a run of one repeated value
            uint64_t run = h >> 1;
            if ((size_t)vbytes > c->n - c->pos) fail(m, "%s: an RLE run runs past the end of its page", what);
            uint32_t val = 0;
            for (int k = 0; k < vbytes; k++) val |= (uint32_t)c->p[c->pos + k] << (8 * k);
            c->pos += (size_t)vbytes;
            if (w < 32 && (val >> w)) fail(m, "%s: RLE value %u wider than %d bits", what, val, w);
            if (run == 0) fail(m, "%s: an RLE run of length 0", what);
            int64_t take = (uint64_t)(count - i) < run ? count - i : (int64_t)run;
            for (int64_t k = 0; k < take; k++) out[i + k] = val;
            i += take;
        }
    }
}

static int bit_width(int64_t max) {
    int w = 0;
    while (max >> w) w++;
    return w;
}

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

// Levels of one page into out (n entries, each checked <= max).
static void levels(const rlc_pq_chunk *m, cursor *c, int16_t max, int64_t n, int16_t *out, uint32_t *tmp,
                   const char *what) {
    rle_hybrid(m, c, bit_width(max), n, tmp, what);
    for (int64_t i = 0; i < n; i++) {
        if (tmp[i] > (uint32_t)max) fail(m, "%s: level %u above the maximum %d", what, tmp[i], max);
        out[i] = (int16_t)tmp[i];
    }
}

// DELTA_BINARY_PACKED: exactly `count` values into out (int64, wrapping as the format's arithmetic does).
static void delta_binary(const rlc_pq_chunk *m, cursor *c, int64_t count, int64_t *out) {
    const char *what = "DELTA_BINARY_PACKED data";
    uint64_t block = cur_varint(m, c, what), n_mini = cur_varint(m, c, what), total = cur_varint(m, c, what);
    int64_t first = cur_zigzag(m, c, what);
    if (block == 0 || block % 128 || block > (1u << 20) || n_mini == 0 || block % n_mini || (block / n_mini) % 32)
        fail(m, "%s: block size %llu with %llu miniblocks (expected a multiple of 128 split into multiples of 32)", what,
             (unsigned long long)block, (unsigned long long)n_mini);
    if (total != (uint64_t)count)
        fail(m, "%s: holds %llu values, expected %lld", what, (unsigned long long)total, (long long)count);
    if (count == 0) return;
    const uint64_t per = block / n_mini;
    uint64_t last = (uint64_t)first;
    out[0] = first;
    int64_t i = 1;
    while (i < count) {
        uint64_t min_delta = (uint64_t)cur_zigzag(m, c, what);
        if (n_mini > c->n - c->pos) fail(m, "%s: miniblock bit widths run past the end of the page", what);
        const uint8_t *widths = c->p + c->pos;
        c->pos += (size_t)n_mini;
        for (uint64_t mb = 0; mb < n_mini && i < count; mb++) {
            int w = widths[mb];
            if (w > 64) fail(m, "%s: miniblock bit width %d (expected <= 64)", what, w);
            uint64_t need = (uint64_t)(count - i) < per ? (uint64_t)(count - i) : per;
            uint64_t full = per * (uint64_t)w / 8, used = (need * (uint64_t)w + 7) / 8;
            if (used > c->n - c->pos) fail(m, "%s: a miniblock runs past the end of the page", what);
            const uint8_t *p = c->p + c->pos;
            for (uint64_t k = 0; k < need; k++) {
                last += min_delta + bits_at(p, k * (uint64_t)w, w);
                out[i++] = (int64_t)last;
            }
            c->pos += (size_t)(full <= c->n - c->pos ? full : used);   // the last miniblock may be unpadded
        }
    }
}

// ---- values of one page ----

static void plain_fixed(const rlc_pq_chunk *m, cursor *c, int64_t n, rlc_pq_values *v, int bss) {
    const int size = m->type == RLC_PQ_INT32 || m->type == RLC_PQ_FLOAT ? 4 : 8;
    if ((uint64_t)n > (c->n - c->pos) / (uint64_t)size)
        fail(m, "%lld %s values need %lld bytes, the page has %zu", (long long)n, rlc_pq_type_name(m->type),
             (long long)n * size, c->n - c->pos);
    vals_reserve(m, v, n, 0);
    const uint8_t *p = c->p + c->pos;
    for (int64_t i = 0; i < n; i++) {
        uint8_t b[8];
        if (bss)   // BYTE_STREAM_SPLIT: byte k of value i is at k*n + i
            for (int k = 0; k < size; k++) b[k] = p[(int64_t)k * n + i];
        else memcpy(b, p + i * size, (size_t)size);
        double x;
        switch (m->type) {
        case RLC_PQ_INT32: { int32_t y; memcpy(&y, b, 4); x = y; break; }
        case RLC_PQ_INT64: { int64_t y; memcpy(&y, b, 8); x = (double)y; break; }
        case RLC_PQ_FLOAT: { float y; memcpy(&y, b, 4); x = y; break; }
        default: { double y; memcpy(&y, b, 8); x = y; break; }
        }
        v->num[v->n++] = x;
    }
    c->pos += (size_t)(n * size);
}

static void plain(const rlc_pq_chunk *m, cursor *c, int64_t n, rlc_pq_values *v) {
    switch (m->type) {
    case RLC_PQ_BOOLEAN: {
        if ((uint64_t)n > (uint64_t)(c->n - c->pos) * 8) fail(m, "%lld booleans run past the end of the page", (long long)n);
        vals_reserve(m, v, n, 0);
        for (int64_t i = 0; i < n; i++) v->num[v->n++] = (c->p[c->pos + (size_t)(i >> 3)] >> (i & 7)) & 1;
        c->pos += (size_t)((n + 7) / 8);
        return;
    }
    case RLC_PQ_BYTE_ARRAY:
        for (int64_t i = 0; i < n; i++) {
            if (c->n - c->pos < 4) fail(m, "byte-array value %lld of %lld runs past the end of the page", (long long)i, (long long)n);
            uint32_t len = le32(c->p + c->pos);
            c->pos += 4;
            if (len > c->n - c->pos)
                fail(m, "byte-array value %lld of %lld bytes runs past the end of the page", (long long)i, (long long)len);
            vals_push_str(m, v, 0, c->p + c->pos, len);
            c->pos += len;
        }
        return;
    default: plain_fixed(m, c, n, v, 0); return;
    }
}

static void delta_lengths(const rlc_pq_chunk *m, cursor *c, int64_t n, const int64_t *prefix, rlc_pq_values *v) {
    int64_t *len = rlc_malloc((size_t)(n + 1) * sizeof(int64_t));
    delta_binary(m, c, n, len);
    for (int64_t i = 0; i < n; i++) {
        if (len[i] < 0 || (uint64_t)len[i] > c->n - c->pos) fail(m, "byte-array value %lld: length %lld runs past the end of the page", (long long)i, (long long)len[i]);
        int64_t pre = prefix ? prefix[i] : 0;
        if (pre < 0 || (pre && (v->n == 0 || pre > v->len[v->n - 1])))
            fail(m, "DELTA_BYTE_ARRAY value %lld: prefix length %lld longer than the previous value", (long long)i, (long long)pre);
        vals_push_str(m, v, pre, c->p + c->pos, (size_t)len[i]);
        c->pos += (size_t)len[i];
    }
    free(len);
}

// Append `n` values of a data page in encoding `enc` (dict: the chunk's dictionary, NULL if none).
static void page_values(const rlc_pq_chunk *m, cursor *c, int enc, int64_t n, const rlc_pq_values *dict, rlc_pq_values *v) {
    switch (enc) {
    case ENC_PLAIN: plain(m, c, n, v); return;
    case ENC_PLAIN_DICTIONARY: case ENC_RLE_DICTIONARY: {
        if (!dict) fail(m, "a %s data page without a dictionary page", rlc_pq_encoding_name(enc));
        if (n == 0) return;
        if (c->pos >= c->n) fail(m, "dictionary indices: missing bit width");
        int w = c->p[c->pos++];
        uint32_t *idx = rlc_malloc((size_t)n * sizeof(uint32_t));
        rle_hybrid(m, c, w, n, idx, "dictionary indices");
        if (m->type == RLC_PQ_BYTE_ARRAY) {
            for (int64_t i = 0; i < n; i++) {
                if (idx[i] >= (uint64_t)dict->n) fail(m, "dictionary index %u outside the dictionary of %lld values", idx[i], (long long)dict->n);
                vals_push_str(m, v, 0, dict->arena + dict->off[idx[i]], (size_t)dict->len[idx[i]]);
            }
        } else {
            vals_reserve(m, v, n, 0);
            for (int64_t i = 0; i < n; i++) {
                if (idx[i] >= (uint64_t)dict->n) fail(m, "dictionary index %u outside the dictionary of %lld values", idx[i], (long long)dict->n);
                v->num[v->n++] = dict->num[idx[i]];
            }
        }
        free(idx);
        return;
    }
    case ENC_RLE: {
        if (m->type != RLC_PQ_BOOLEAN) fail(m, "RLE values of type %s (expected BOOLEAN)", rlc_pq_type_name(m->type));
        if (c->n - c->pos < 4) fail(m, "RLE booleans: missing length");
        uint32_t len = le32(c->p + c->pos);
        c->pos += 4;
        if (len > c->n - c->pos) fail(m, "RLE booleans: length %u runs past the end of the page", len);
        cursor sub = {c->p + c->pos, len, 0};
        uint32_t *b = rlc_malloc((size_t)(n + 1) * sizeof(uint32_t));
        rle_hybrid(m, &sub, 1, n, b, "RLE booleans");
        vals_reserve(m, v, n, 0);
        for (int64_t i = 0; i < n; i++) v->num[v->n++] = b[i];
        free(b);
        c->pos += len;
        return;
    }
    case ENC_DELTA_BINARY_PACKED: {
        if (m->type != RLC_PQ_INT32 && m->type != RLC_PQ_INT64) fail(m, "DELTA_BINARY_PACKED values of type %s", rlc_pq_type_name(m->type));
        int64_t *x = rlc_malloc((size_t)(n + 1) * sizeof(int64_t));
        delta_binary(m, c, n, x);
        vals_reserve(m, v, n, 0);
        for (int64_t i = 0; i < n; i++) v->num[v->n++] = m->type == RLC_PQ_INT32 ? (double)(int32_t)x[i] : (double)x[i];
        free(x);
        return;
    }
    case ENC_DELTA_LENGTH_BYTE_ARRAY: case ENC_DELTA_BYTE_ARRAY: {
        if (m->type != RLC_PQ_BYTE_ARRAY) fail(m, "%s values of type %s", rlc_pq_encoding_name(enc), rlc_pq_type_name(m->type));
        int64_t *prefix = NULL;
        if (enc == ENC_DELTA_BYTE_ARRAY) {
            prefix = rlc_malloc((size_t)(n + 1) * sizeof(int64_t));
            delta_binary(m, c, n, prefix);
        }
        delta_lengths(m, c, n, prefix, v);
        free(prefix);
        return;
    }
    case ENC_BYTE_STREAM_SPLIT:
        if (m->type == RLC_PQ_BOOLEAN || m->type == RLC_PQ_BYTE_ARRAY)
            fail(m, "BYTE_STREAM_SPLIT values of type %s", rlc_pq_type_name(m->type));
        plain_fixed(m, c, n, v, 1);
        return;
    default:
        fail(m, "unsupported encoding %s (%d); rlc reads PLAIN, PLAIN_DICTIONARY, RLE_DICTIONARY, RLE, DELTA_BINARY_PACKED, "
             "DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY and BYTE_STREAM_SPLIT", rlc_pq_encoding_name(enc), enc);
    }
}

// ---- codecs ----

// Decompress src into a fresh buffer of exactly `want` bytes (plus a guard byte).
// Each codec's own bound is checked before the allocation, so a corrupt size never allocates more than the
// compressed bytes can produce.
static uint8_t *decompress(const rlc_pq_chunk *m, const uint8_t *src, size_t n, size_t want) {
    uint8_t *dst = NULL;
    switch (m->codec) {
    case CODEC_UNCOMPRESSED:
        if (n != want) fail(m, "an uncompressed page of %zu bytes declares %zu", n, want);
        dst = rlc_malloc(want + 1);
        memcpy(dst, src, n);
        return dst;
    case CODEC_SNAPPY: {
        size_t got = 0;
        if (snappy_uncompressed_length((const char *)src, n, &got) != SNAPPY_OK || got != want)
            fail(m, "corrupt SNAPPY page (expected %zu bytes uncompressed)", want);
        dst = rlc_malloc(want + 1);
        got = want;
        if (snappy_uncompress((const char *)src, n, (char *)dst, &got) != SNAPPY_OK || got != want)
            fail(m, "corrupt SNAPPY page (expected %zu bytes uncompressed)", want);
        return dst;
    }
    case CODEC_GZIP: {
        if (want / 1032 > n + 1) fail(m, "a GZIP page of %zu bytes cannot hold %zu (deflate's ratio is at most 1032)", n, want);
        dst = rlc_malloc(want + 1);
        z_stream z;
        memset(&z, 0, sizeof z);
        if (inflateInit2(&z, 15 + 32) != Z_OK) fail(m, "zlib initialisation failed");   // 32: gzip or zlib header
        z.next_in = (Bytef *)src;
        z.avail_in = (uInt)n;
        z.next_out = dst;
        z.avail_out = (uInt)want;
        int rc;
        // A GZIP page may hold several concatenated gzip members.
        while ((rc = inflate(&z, Z_FINISH)) == Z_STREAM_END && z.avail_in > 0 && z.avail_out > 0)
            if (inflateReset(&z) != Z_OK) break;
        size_t got = want - z.avail_out;
        inflateEnd(&z);
        if ((rc != Z_STREAM_END && rc != Z_BUF_ERROR) || got != want || (rc == Z_BUF_ERROR && z.avail_in))
            fail(m, "corrupt GZIP page (expected %zu bytes uncompressed, got %zu)", want, got);
        return dst;
    }
    case CODEC_ZSTD: {
        const unsigned long long fs = ZSTD_getFrameContentSize(src, n);
        if (fs == ZSTD_CONTENTSIZE_ERROR || (fs != ZSTD_CONTENTSIZE_UNKNOWN && fs != want))
            fail(m, "corrupt ZSTD page (expected %zu bytes uncompressed)", want);
        dst = rlc_malloc(want + 1);
        size_t got = ZSTD_decompress(dst, want, src, n);
        if (ZSTD_isError(got) || got != want)
            fail(m, "corrupt ZSTD page (expected %zu bytes uncompressed%s%s)", want, ZSTD_isError(got) ? ": " : "",
                 ZSTD_isError(got) ? ZSTD_getErrorName(got) : "");
        return dst;
    }
    default:
        fail(m, "unsupported compression %s (%d); rlc reads UNCOMPRESSED, SNAPPY, GZIP and ZSTD", rlc_pq_codec_name(m->codec),
             m->codec);
    }
}

// ---- page headers ----

typedef struct {
    int type;
    int64_t uncompressed, compressed;
    int64_t num_values, num_nulls, num_rows;
    int encoding, def_encoding, rep_encoding;
    int64_t def_len, rep_len;   // v2
    int is_compressed;          // v2 (default true)
    int have_sub;               // the header for `type` was present
} page_header;

static void read_sub(rlc_thrift *t, page_header *h, int which) {
    rlc_thrift_struct_begin(t);
    int last = 0, id, ft;
    while (rlc_thrift_field(t, &last, &id, &ft)) {
        if (which == PAGE_DATA) {
            if (id == 1) h->num_values = rlc_thrift_i32(t, ft);
            else if (id == 2) h->encoding = rlc_thrift_i32(t, ft);
            else if (id == 3) h->def_encoding = rlc_thrift_i32(t, ft);
            else if (id == 4) h->rep_encoding = rlc_thrift_i32(t, ft);
            else rlc_thrift_skip(t, ft);
        } else if (which == PAGE_DICTIONARY) {
            if (id == 1) h->num_values = rlc_thrift_i32(t, ft);
            else if (id == 2) h->encoding = rlc_thrift_i32(t, ft);
            else rlc_thrift_skip(t, ft);
        } else {
            if (id == 1) h->num_values = rlc_thrift_i32(t, ft);
            else if (id == 2) h->num_nulls = rlc_thrift_i32(t, ft);
            else if (id == 3) h->num_rows = rlc_thrift_i32(t, ft);
            else if (id == 4) h->encoding = rlc_thrift_i32(t, ft);
            else if (id == 5) h->def_len = rlc_thrift_i32(t, ft);
            else if (id == 6) h->rep_len = rlc_thrift_i32(t, ft);
            else if (id == 7) h->is_compressed = rlc_thrift_bool(t, ft);
            else rlc_thrift_skip(t, ft);
        }
    }
    rlc_thrift_struct_end(t);
    h->have_sub = 1;
}

static size_t read_header(const rlc_pq_chunk *m, const uint8_t *p, size_t n, page_header *h, int64_t offset) {
    char what[160];
    snprintf(what, sizeof what, "column %s: the page header at byte %lld", m->column, (long long)offset);
    rlc_thrift t;
    rlc_thrift_init(&t, p, n, m->file, what);
    memset(h, 0, sizeof *h);
    h->type = -1;
    h->uncompressed = h->compressed = -1;
    h->num_values = -1;
    h->is_compressed = 1;
    int want_sub = -1;
    rlc_thrift_struct_begin(&t);
    int last = 0, id, ft;
    while (rlc_thrift_field(&t, &last, &id, &ft)) {
        if (id == 1) { h->type = rlc_thrift_i32(&t, ft); want_sub = h->type; }
        else if (id == 2) h->uncompressed = rlc_thrift_i32(&t, ft);
        else if (id == 3) h->compressed = rlc_thrift_i32(&t, ft);
        else if ((id == 5 || id == 7 || id == 8) && ft == RLC_THRIFT_STRUCT) {
            int which = id == 5 ? PAGE_DATA : id == 7 ? PAGE_DICTIONARY : PAGE_DATA_V2;
            if (which != want_sub) { rlc_thrift_skip(&t, ft); continue; }   // the type field comes first (id 1)
            read_sub(&t, h, which);
        } else rlc_thrift_skip(&t, ft);
    }
    rlc_thrift_struct_end(&t);
    if (h->type < 0 || h->uncompressed < 0 || h->compressed < 0)
        fail(m, "the page header at byte %lld lacks its type or sizes (a corrupt file)", (long long)offset);
    if ((h->type == PAGE_DATA || h->type == PAGE_DICTIONARY || h->type == PAGE_DATA_V2) && (!h->have_sub || h->num_values < 0))
        fail(m, "the page header at byte %lld lacks its %s header (a corrupt file)", (long long)offset,
             h->type == PAGE_DICTIONARY ? "dictionary page" : "data page");
    return (size_t)(t.p - p);
}

// ---- the chunk ----

static void grow_levels(rlc_pq_column *c, int64_t *cap, int64_t more, const rlc_pq_chunk *m) {
    if (c->n_levels + more <= *cap) return;
    int64_t nc = *cap ? *cap : 1024;
    while (nc < c->n_levels + more) nc *= 2;
    if (m->max_def > 0) c->def = rlc_realloc(c->def, (size_t)nc * sizeof(int16_t));
    if (m->max_rep > 0) c->rep = rlc_realloc(c->rep, (size_t)nc * sizeof(int16_t));
    *cap = nc;
}

void rlc_pq_column_read(rlc_pq_column *c, const uint8_t *file, size_t file_n, const rlc_pq_chunk *m) {
    memset(c, 0, sizeof *c);
    if (m->type == RLC_PQ_INT96 || m->type == RLC_PQ_FIXED_LEN_BYTE_ARRAY || m->type < 0 || m->type > RLC_PQ_FIXED_LEN_BYTE_ARRAY)
        fail(m, "unsupported physical type %s (%d); rlc reads BOOLEAN, INT32, INT64, FLOAT, DOUBLE and BYTE_ARRAY",
             rlc_pq_type_name(m->type), m->type);
    int64_t start = m->data_page_offset;
    if (m->dictionary_page_offset > 0 && m->dictionary_page_offset < start) start = m->dictionary_page_offset;
    if (start < 4 || m->total_compressed_size < 0 || (uint64_t)start > file_n ||
        (uint64_t)m->total_compressed_size > file_n - (uint64_t)start)
        fail(m, "the column chunk (bytes %lld..+%lld) lies outside the file of %zu bytes (a truncated or corrupt file)",
             (long long)start, (long long)m->total_compressed_size, file_n);
    if (m->num_values < 0) fail(m, "negative value count %lld", (long long)m->num_values);
    const int64_t end = start + m->total_compressed_size;
    if (m->type == RLC_PQ_BYTE_ARRAY && m->total_uncompressed_size > 0) {
        // One arena for the chunk's strings, sized once from the metadata's hint (bounded by the file, as the
        // hint is only a hint): growing it by doubling would copy the strings over and over.
        const uint64_t hint = (uint64_t)m->total_uncompressed_size, cap = 4 * (uint64_t)file_n;
        vals_reserve(m, &c->vals, 0, (size_t)(hint < cap ? hint : cap));
    }
    rlc_pq_values dict = {0};
    int have_dict = 0;
    int64_t pos = start, cap = 0;
    uint32_t *tmp = NULL;
    int64_t tmp_cap = 0;
    while (c->n_levels < m->num_values) {
        if (pos >= end)
            fail(m, "the chunk's pages hold %lld values, its metadata says %lld (a truncated or corrupt file)",
                 (long long)c->n_levels, (long long)m->num_values);
        page_header h;
        pos += (int64_t)read_header(m, file + pos, (size_t)(end - pos), &h, pos);
        if (h.compressed > end - pos)
            fail(m, "the page at byte %lld (%lld bytes) runs past the end of its column chunk (a truncated or corrupt file)",
                 (long long)pos, (long long)h.compressed);
        if (h.uncompressed > PQ_MAX_PAGE) fail(m, "page of %lld bytes", (long long)h.uncompressed);
        const uint8_t *payload = file + pos;
        pos += h.compressed;
        if (h.type == PAGE_DICTIONARY) {
            if (have_dict) fail(m, "a second dictionary page");
            if (h.encoding != ENC_PLAIN && h.encoding != ENC_PLAIN_DICTIONARY)
                fail(m, "dictionary page in encoding %s (expected PLAIN)", rlc_pq_encoding_name(h.encoding));
            uint8_t *raw = decompress(m, payload, (size_t)h.compressed, (size_t)h.uncompressed);
            cursor cu = {raw, (size_t)h.uncompressed, 0};
            if (h.num_values > (int64_t)h.uncompressed * 8 + 8) fail(m, "dictionary of %lld values in %lld bytes", (long long)h.num_values, (long long)h.uncompressed);
            plain(m, &cu, h.num_values, &dict);
            free(raw);
            have_dict = 1;
            continue;
        }
        if (h.type != PAGE_DATA && h.type != PAGE_DATA_V2) continue;   // index pages and unknown kinds carry no rows
        const int64_t nv = h.num_values;
        // Levels may compress any count into a few bytes; writers cut pages far below this bound, which keeps
        // a corrupt count from allocating gigabytes.
        if (nv > PQ_MAX_PAGE_ENTRIES)
            fail(m, "a page of %lld entries (rlc reads pages of up to %lld)", (long long)nv, (long long)PQ_MAX_PAGE_ENTRIES);
        if (nv > m->num_values - c->n_levels)
            fail(m, "a page of %lld values overruns the chunk's %lld", (long long)nv, (long long)m->num_values);
        grow_levels(c, &cap, nv, m);
        if (nv > tmp_cap) { tmp_cap = nv; tmp = rlc_realloc(tmp, (size_t)(tmp_cap + 1) * sizeof(uint32_t)); }
        uint8_t *raw = NULL;
        cursor cu;
        if (h.type == PAGE_DATA) {
            raw = decompress(m, payload, (size_t)h.compressed, (size_t)h.uncompressed);
            cu = (cursor){raw, (size_t)h.uncompressed, 0};
            for (int pass = 0; pass < 2; pass++) {   // repetition levels, then definition levels
                const int16_t max = pass == 0 ? m->max_rep : m->max_def;
                if (max == 0) continue;
                const int enc = pass == 0 ? h.rep_encoding : h.def_encoding;
                const char *what = pass == 0 ? "repetition levels" : "definition levels";
                if (enc != ENC_RLE) fail(m, "%s in encoding %s (expected RLE)", what, rlc_pq_encoding_name(enc));
                if (cu.n - cu.pos < 4) fail(m, "%s: missing length", what);
                uint32_t len = le32(cu.p + cu.pos);
                cu.pos += 4;
                if (len > cu.n - cu.pos) fail(m, "%s: length %u runs past the end of the page", what, len);
                cursor lc = {cu.p + cu.pos, len, 0};
                if (nv > 0)   // no values: nothing to decode, and the level arrays may not exist yet
                    levels(m, &lc, max, nv, (pass == 0 ? c->rep : c->def) + c->n_levels, tmp, what);
                cu.pos += len;
            }
        } else {
            if (h.rep_len < 0 || h.def_len < 0 || h.rep_len > h.compressed - h.def_len || h.rep_len + h.def_len > h.uncompressed)
                fail(m, "data page v2 level lengths %lld + %lld exceed the page", (long long)h.rep_len, (long long)h.def_len);
            for (int pass = 0; pass < 2; pass++) {   // v2 levels are never compressed and carry no length prefix
                const int16_t max = pass == 0 ? m->max_rep : m->max_def;
                const int64_t len = pass == 0 ? h.rep_len : h.def_len;
                const uint8_t *lp = payload + (pass == 0 ? 0 : h.rep_len);
                if (max == 0 || nv == 0) continue;   // nothing to read (and the level arrays may not exist yet)
                cursor lc = {lp, (size_t)len, 0};
                levels(m, &lc, max, nv, (pass == 0 ? c->rep : c->def) + c->n_levels, tmp,
                       pass == 0 ? "repetition levels" : "definition levels");
            }
            const int64_t lv = h.rep_len + h.def_len;
            const size_t vin = (size_t)(h.compressed - lv), vout = (size_t)(h.uncompressed - lv);
            if (h.is_compressed && m->codec != CODEC_UNCOMPRESSED) {
                raw = decompress(m, payload + lv, vin, vout);
            } else {
                if (vin != vout) fail(m, "an uncompressed v2 page of %zu value bytes declares %zu", vin, vout);
                raw = rlc_malloc(vin + 1);
                memcpy(raw, payload + lv, vin);
            }
            cu = (cursor){raw, vout, 0};
        }
        int64_t n_vals = nv;
        if (m->max_def > 0) {
            n_vals = 0;
            for (int64_t i = 0; i < nv; i++) n_vals += c->def[c->n_levels + i] == m->max_def;
        }
        if (m->max_rep > 0 && c->n_levels == 0 && nv > 0 && c->rep[0] != 0)
            fail(m, "the first entry continues a list (repetition level %d, expected 0)", c->rep[0]);
        page_values(m, &cu, h.encoding, n_vals, have_dict ? &dict : NULL, &c->vals);
        free(raw);
        c->n_levels += nv;
    }
    free(tmp);
    vals_free(&dict);
}

void rlc_pq_column_free(rlc_pq_column *c) {
    free(c->def);
    free(c->rep);
    vals_free(&c->vals);
    memset(c, 0, sizeof *c);
}
