// tensorboard.c: TensorBoard event files (TFRecord framing, masked CRC-32C, the Event/Summary protobuf encoding
// written by hand). See tensorboard.h for the format.
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

#include "core/common.h"
#include "trainer/tensorboard.h"

// ---------------------------------------------------------------------------------------------
// CRC-32C

#define CRC32C_POLY 0x82F63B78u   // Castagnoli, reflected

uint32_t tb_crc32c_ref(const void *data, size_t n) {
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
    }
    return c ^ 0xFFFFFFFFu;
}

uint32_t tb_crc32c(const void *data, size_t n) {
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
#if defined(__SSE4_2__)
    // The crc32 instruction computes exactly this polynomial, 8 bytes at a time.
    uint64_t c64 = c;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = _mm_crc32_u64(c64, v);
    }
    c = (uint32_t)c64;
    for (; n > 0; n--, p++) c = _mm_crc32_u8(c, *p);
#else
    // 4 bits per lookup: T[i] is i's contribution after 4 shifts of the reflected polynomial.
    static const uint32_t T[16] = {0x00000000, 0x105ec76f, 0x20bd8ede, 0x30e349b1, 0x417b1dbc, 0x5125dad3,
                                   0x61c69362, 0x7198540d, 0x82f63b78, 0x92a8fc17, 0xa24bb5a6, 0xb21572c9,
                                   0xc38d26c4, 0xd3d3e1ab, 0xe330a81a, 0xf36e6f75};
    for (; n > 0; n--, p++) {
        c ^= *p;
        c = (c >> 4) ^ T[c & 15];
        c = (c >> 4) ^ T[c & 15];
    }
#endif
    return c ^ 0xFFFFFFFFu;
}

uint32_t tb_masked_crc32c(const void *data, size_t n) {
    uint32_t c = tb_crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void put_le32(rlc_strbuf *b, uint32_t x) {
    unsigned char s[4] = {(unsigned char)x, (unsigned char)(x >> 8), (unsigned char)(x >> 16), (unsigned char)(x >> 24)};
    rlc_sb_append(b, s, 4);
}

void tb_frame_record(rlc_strbuf *out, const void *data, size_t n) {
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    rlc_sb_append(out, len, 8);
    put_le32(out, tb_masked_crc32c(len, 8));
    rlc_sb_append(out, data, n);
    put_le32(out, tb_masked_crc32c(data, n));
}

// ---------------------------------------------------------------------------------------------
// protobuf wire format: a key is (field << 3) | wire type; 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.

static void pb_varint(rlc_strbuf *b, uint64_t v) {
    unsigned char s[10];
    int n = 0;
    do {
        s[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v) s[n] |= 0x80;
        n++;
    } while (v);
    rlc_sb_append(b, s, (size_t)n);
}
static void pb_key(rlc_strbuf *b, int field, int wire) { pb_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }
static void pb_bytes(rlc_strbuf *b, int field, const void *p, size_t n) {
    pb_key(b, field, 2);
    pb_varint(b, n);
    rlc_sb_append(b, p, n);
}
static void pb_double(rlc_strbuf *b, int field, double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    pb_key(b, field, 1);
    unsigned char s[8];
    for (int i = 0; i < 8; i++) s[i] = (unsigned char)(u >> (8 * i));
    rlc_sb_append(b, s, 8);
}
static void pb_float(rlc_strbuf *b, int field, float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    pb_key(b, field, 5);
    put_le32(b, u);
}

enum { EV_WALL_TIME = 1, EV_STEP = 2, EV_FILE_VERSION = 3, EV_SUMMARY = 5, EV_SESSION_LOG = 7, SUM_VALUE = 1, VAL_TAG = 1,
       VAL_SIMPLE = 2, SESSION_STATUS = 1, SESSION_START = 1 };

// ---------------------------------------------------------------------------------------------
// the writer

char *tb_log_dir(const char *project, const char *experiment) {
    const char *env = getenv("TENSORBOARD_DIR");
    if (env && *env) return rlc_strdup(env);
    char *a = rlc_path_join("tensorboard_log", project ? project : "");
    char *d = rlc_path_join(a, experiment ? experiment : "");
    free(a);
    return d;
}

static double wall_now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

static void write_all(tb_writer *w, const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = write(w->fd, p, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            rlc_die("%s: cannot write the TensorBoard event file: %s", w->path, strerror(errno));
        }
        p += k;
        n -= (size_t)k;
    }
}

// Frames w->event and writes it.
static void emit_event(tb_writer *w) {
    rlc_sb_clear(&w->record);
    tb_frame_record(&w->record, w->event.s, w->event.n);
    write_all(w, w->record.s, w->record.n);
}

void tb_writer_init(tb_writer *w, const char *dir) {
    memset(w, 0, sizeof *w);
    w->fd = -1;
    rlc_mkdirs(dir);
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    for (char *h = host; *h; h++)
        if (*h == '/') *h = '_';
    double now = wall_now();
    // torch's name, events.out.tfevents.<time>.<host>.<pid>.<n>; n counts up past a file this process made
    // in the same second (O_EXCL: never appends to another writer's file)
    for (int k = 0; k < 1000 && w->fd < 0; k++) {
        char name[512];
        snprintf(name, sizeof name, "events.out.tfevents.%010lld.%s.%d.%d", (long long)now, host, (int)getpid(), k);
        free(w->path);
        w->path = rlc_path_join(dir, name);
        w->fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
        if (w->fd < 0 && errno != EEXIST) rlc_die("%s: cannot create the TensorBoard event file: %s", w->path, strerror(errno));
    }
    if (w->fd < 0) rlc_die("%s: cannot create a new TensorBoard event file: every name is taken", dir);
    rlc_sb_clear(&w->event);
    pb_double(&w->event, EV_WALL_TIME, now);
    static const char version[] = "brain.Event:2";
    pb_bytes(&w->event, EV_FILE_VERSION, version, sizeof version - 1);
    emit_event(w);
}

void tb_writer_free(tb_writer *w) {
    if (w->fd >= 0 && close(w->fd) != 0) rlc_die("%s: cannot close the TensorBoard event file: %s", w->path, strerror(errno));
    w->fd = -1;
    free(w->path);
    w->path = NULL;
    rlc_sb_free(&w->event);
    rlc_sb_free(&w->summary);
    rlc_sb_free(&w->record);
}

static void put_step(rlc_strbuf *b, int64_t step) {
    if (step == 0) return;   // proto3 leaves a default value out, so the bytes are protobuf's own encoding
    pb_key(b, EV_STEP, 0);
    pb_varint(b, (uint64_t)step);   // int64: a negative step takes 10 bytes, as protobuf writes it
}

void tb_write_scalars(tb_writer *w, int64_t step, double wall_time, int64_t n, const char *const *tags,
                      const double *vals) {
    CHECK(w->fd >= 0, "tb_write_scalars on a closed writer");
    rlc_sb_clear(&w->summary);
    for (int64_t i = 0; i < n; i++) {
        // Value { tag = 1; simple_value = 2 }, nested in Summary.value = 1
        size_t tl = strlen(tags[i]);
        uint64_t vlen = 1 + 5 + tl + (tl >= 128 ? (tl >= 16384 ? 3 : 2) : 1);   // keys + float + tag bytes
        CHECK(tl < (1u << 21), "metric tag of %zu bytes", tl);
        pb_key(&w->summary, SUM_VALUE, 2);
        pb_varint(&w->summary, vlen);
        size_t before = w->summary.n;
        pb_bytes(&w->summary, VAL_TAG, tags[i], tl);
        pb_float(&w->summary, VAL_SIMPLE, (float)vals[i]);
        CHECK_EQ(w->summary.n - before, vlen, "encoded Summary.Value length");
    }
    rlc_sb_clear(&w->event);
    pb_double(&w->event, EV_WALL_TIME, wall_time);
    put_step(&w->event, step);
    pb_bytes(&w->event, EV_SUMMARY, w->summary.s ? w->summary.s : "", w->summary.n);
    emit_event(w);
}

void tb_write_session_start(tb_writer *w, int64_t step) {
    CHECK(w->fd >= 0, "tb_write_session_start on a closed writer");
    static const unsigned char start[2] = {SESSION_STATUS << 3 | 0, SESSION_START};   // SessionLog { status: START }
    rlc_sb_clear(&w->event);
    pb_double(&w->event, EV_WALL_TIME, wall_now());
    put_step(&w->event, step);
    pb_bytes(&w->event, EV_SESSION_LOG, start, sizeof start);
    emit_event(w);
}

void tb_write_metrics(tb_writer *w, const rlc_metrics *m, int64_t step) {
    tb_write_scalars(w, step, wall_now(), m->n, (const char *const *)m->keys, m->vals);
}
