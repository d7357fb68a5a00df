// trainer_state.c: the trainer state and value-head optimizer files of a checkpoint (see trainer_state.h).
#include "trainer/trainer_state.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "trainer/optim.h"

static const char TRAINER_STATE_MAGIC[8] = {'R', 'L', 'C', 'G', 'R', 'P', 'O', '\x01'};
static const char VHEAD_OPT_MAGIC[8] = {'R', 'L', 'C', 'V', 'H', 'O', 'P', 'T'};

// Fixed-offset little-endian fields (the machines rlc builds for are little-endian: memcpy is the encoding).
static int64_t get_i64(const uint8_t *b, size_t off) { int64_t x; memcpy(&x, b + off, 8); return x; }
static uint32_t get_u32(const uint8_t *b, size_t off) { uint32_t x; memcpy(&x, b + off, 4); return x; }
static void put_i64(uint8_t *b, size_t off, int64_t x) { memcpy(b + off, &x, 8); }
static void put_u32(uint8_t *b, size_t off, uint32_t x) { memcpy(b + off, &x, 4); }

enum { TS_STEP = 16, TS_EPOCH = 24, TS_BATCH = 32, TS_KL = 40, TS_SEED = 48, TS_TRAIN_N = 56 };

void trainer_state_encode(const trainer_state *ts, uint8_t out[TRAINER_STATE_BYTES]) {
    memset(out, 0, TRAINER_STATE_BYTES);
    memcpy(out, TRAINER_STATE_MAGIC, 8);
    put_u32(out, 8, TRAINER_STATE_VERSION);
    put_i64(out, TS_STEP, ts->global_step);
    put_i64(out, TS_EPOCH, ts->epoch);
    put_i64(out, TS_BATCH, ts->batch_in_epoch);
    memcpy(out + TS_KL, &ts->kl_ctrl_value, 8);
    memcpy(out + TS_SEED, &ts->data_seed, 8);
    put_i64(out, TS_TRAIN_N, ts->train_n);
}

// An int64 field in [lo, hi], else one line naming the file and the field.
static int64_t ranged(const uint8_t *b, size_t off, const char *field, int64_t lo, int64_t hi, const char *path) {
    const int64_t x = get_i64(b, off);
    if (x < lo || x > hi)
        rlc_die("%s: corrupt trainer state: %s %lld is outside [%lld, %lld]", path, field, (long long)x, (long long)lo,
                (long long)hi);
    return x;
}

void trainer_state_parse(trainer_state *ts, const void *buf, size_t len, const char *path) {
    const uint8_t *b = buf;
    if (len != TRAINER_STATE_BYTES)
        rlc_die("%s: truncated or damaged trainer state (%zu bytes, expected %d)", path, len, TRAINER_STATE_BYTES);
    if (memcmp(b, TRAINER_STATE_MAGIC, 8) != 0) rlc_die("%s: not an rlc trainer state (bad magic)", path);
    const uint32_t ver = get_u32(b, 8);
    if (ver != TRAINER_STATE_VERSION) rlc_die("%s: trainer state version %u, this rlc reads %d", path, ver, TRAINER_STATE_VERSION);
    if (get_u32(b, 12) != 0) rlc_die("%s: corrupt trainer state: reserved bytes 12..15 are not zero", path);
    memset(ts, 0, sizeof *ts);
    ts->global_step = ranged(b, TS_STEP, "global_step", 0, ADAMW_MAX_STEP, path);
    ts->epoch = ranged(b, TS_EPOCH, "epoch", 0, ADAMW_MAX_STEP, path);
    ts->batch_in_epoch = ranged(b, TS_BATCH, "batch_in_epoch", 0, ADAMW_MAX_STEP, path);
    memcpy(&ts->kl_ctrl_value, b + TS_KL, 8);
    if (!isfinite(ts->kl_ctrl_value) || ts->kl_ctrl_value < 0)
        rlc_die("%s: corrupt trainer state: kl_coef %g, expected a finite value >= 0", path, ts->kl_ctrl_value);
    memcpy(&ts->data_seed, b + TS_SEED, 8);
    ts->train_n = ranged(b, TS_TRAIN_N, "train_n (prompts)", 1, INT64_MAX, path);
}

void trainer_state_save(const char *path, const trainer_state *ts) {
    uint8_t b[TRAINER_STATE_BYTES];
    trainer_state_encode(ts, b);
    if (rlc_write_file_atomic(path, b, sizeof b) != 0) rlc_die("%s: cannot write: %s", path, strerror(errno));
}

void trainer_state_load(trainer_state *ts, const char *path) {
    size_t len;
    char *buf = rlc_read_file(path, &len);
    trainer_state_parse(ts, buf, len, path);
    free(buf);
}

// ---- the value head's optimizer state ----

void vhead_opt_encode(int64_t n, int64_t step, const float *m, const float *v, uint8_t **out, size_t *len) {
    CHECK(n >= 1, "vhead_opt_encode: n=%lld", (long long)n);
    const size_t vb = rlc_mul_size((size_t)n, 2 * sizeof(float), "value-head optimizer state");
    *len = VHEAD_OPT_HEADER + vb;
    uint8_t *b = rlc_malloc(*len);
    memset(b, 0, VHEAD_OPT_HEADER);
    memcpy(b, VHEAD_OPT_MAGIC, 8);
    put_u32(b, 8, VHEAD_OPT_VERSION);
    put_i64(b, 16, n);
    put_i64(b, 24, step);
    memcpy(b + VHEAD_OPT_HEADER, m, sizeof(float) * (size_t)n);
    memcpy(b + VHEAD_OPT_HEADER + sizeof(float) * (size_t)n, v, sizeof(float) * (size_t)n);
    *out = b;
}

void vhead_opt_parse(vhead_opt_state *s, const void *buf, size_t len, const char *path) {
    const uint8_t *b = buf;
    memset(s, 0, sizeof *s);
    if (len < VHEAD_OPT_HEADER || memcmp(b, VHEAD_OPT_MAGIC, 8) != 0)
        rlc_die("%s: not an rlc value-head optimizer state (bad magic)", path);
    const uint32_t ver = get_u32(b, 8);
    if (ver != VHEAD_OPT_VERSION) rlc_die("%s: value-head optimizer state version %u, this rlc reads %d", path, ver, VHEAD_OPT_VERSION);
    if (get_u32(b, 12) != 0) rlc_die("%s: corrupt value-head optimizer state: reserved bytes 12..15 are not zero", path);
    const int64_t n = get_i64(b, 16), step = get_i64(b, 24);
    // n against the bytes present before any product: the file holds exactly m (n) and v (n) after the header
    const size_t have = (len - VHEAD_OPT_HEADER) / (2 * sizeof(float));
    if (n < 1 || (uint64_t)n > have || VHEAD_OPT_HEADER + (size_t)n * 2 * sizeof(float) != len)
        rlc_die("%s: corrupt value-head optimizer state: n %lld values do not fill its %zu bytes (expected 32 + 8n)", path,
                (long long)n, len);
    if (step < 0 || step > ADAMW_MAX_STEP)
        rlc_die("%s: corrupt value-head optimizer state: step %lld is outside [0, %lld]", path, (long long)step,
                (long long)ADAMW_MAX_STEP);
    s->n = n;
    s->step = step;
    s->m = rlc_malloc(sizeof(float) * (size_t)n);
    s->v = rlc_malloc(sizeof(float) * (size_t)n);
    memcpy(s->m, b + VHEAD_OPT_HEADER, sizeof(float) * (size_t)n);
    memcpy(s->v, b + VHEAD_OPT_HEADER + sizeof(float) * (size_t)n, sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(s->m[i]) || !isfinite(s->v[i]) || !(s->v[i] >= 0))
            rlc_die("%s: corrupt value-head optimizer state: moment %lld (m %g, v %g) is not finite or v < 0", path,
                    (long long)i, (double)s->m[i], (double)s->v[i]);
}

void vhead_opt_save(const char *path, int64_t n, int64_t step, const float *m, const float *v) {
    uint8_t *b;
    size_t len;
    vhead_opt_encode(n, step, m, v, &b, &len);
    if (rlc_write_file_atomic(path, b, len) != 0) rlc_die("%s: cannot write: %s", path, strerror(errno));
    free(b);
}

void vhead_opt_load(vhead_opt_state *s, const char *path) {
    size_t len;
    char *buf = rlc_read_file(path, &len);
    vhead_opt_parse(s, buf, len, path);
    free(buf);
}

void vhead_opt_free(vhead_opt_state *s) {
    free(s->m);
    free(s->v);
    memset(s, 0, sizeof *s);
}
