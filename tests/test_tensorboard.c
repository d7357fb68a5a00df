// test_tensorboard: the event-file writer. CRC-32C (the fast path against the bitwise reference and RFC 3720's
// vectors), TFRecord framing, and files written through the API decoded by an independent reader
// (tests/py/tb_events.py: its own bitwise CRC-32C and protoc-generated classes from TensorBoard's .proto files):
// every step and value, NaN and +-inf, negative and 2^40 steps, tags past 127 bytes, an event with no values,
// SessionLog START events.
// The trainer's files against metrics.jsonl are checked by tests/test_tensorboard.sh.
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "testlib.h"
#include "trainer/tensorboard.h"

static void test_crc(void) {
    // RFC 3720 (iSCSI) B.4 and the common check value
    unsigned char buf[32];
    TL_CHECK(tb_crc32c("123456789", 9) == 0xE3069283u, "crc32c(123456789) = %08x", tb_crc32c("123456789", 9));
    TL_CHECK(tb_crc32c_ref("123456789", 9) == 0xE3069283u, "ref crc32c(123456789)");
    memset(buf, 0, 32);
    TL_CHECK(tb_crc32c(buf, 32) == 0x8A9136AAu, "crc32c(32 zeros) = %08x", tb_crc32c(buf, 32));
    memset(buf, 0xff, 32);
    TL_CHECK(tb_crc32c(buf, 32) == 0x62A8AB43u, "crc32c(32 x ff) = %08x", tb_crc32c(buf, 32));
    for (int i = 0; i < 32; i++) buf[i] = (unsigned char)i;
    TL_CHECK(tb_crc32c(buf, 32) == 0x46DD794Eu, "crc32c(0..31) = %08x", tb_crc32c(buf, 32));
    TL_CHECK(tb_crc32c("", 0) == 0, "crc32c of nothing");
    // fast == reference on random data, every length 0..600 at every alignment 0..7
    tl_rng r;
    tl_rng_init(&r, 11);
    unsigned char *d = malloc(640);
    for (int i = 0; i < 640; i++) d[i] = (unsigned char)(tl_uniform(&r, 0, 256));
    int bad = 0;
    for (size_t n = 0; n <= 600; n++)
        for (size_t a = 0; a < 8; a++) bad += tb_crc32c(d + a, n) != tb_crc32c_ref(d + a, n);
    TL_CHECK(bad == 0, "fast crc32c differs from the reference in %d of 4808 cases", bad);
    free(d);
    // masking: ((c >> 15) | (c << 17)) + 0xa282ead8
    uint32_t c = 0xE3069283u, m = ((c >> 15) | (c << 17)) + 0xa282ead8u;
    TL_CHECK(tb_masked_crc32c("123456789", 9) == m, "masked crc32c");
}

static uint32_t le32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

static void test_frame(void) {
    rlc_strbuf b = {0};
    tb_frame_record(&b, "hello", 5);
    const unsigned char *p = (const unsigned char *)b.s;
    TL_CHECK(b.n == 8 + 4 + 5 + 4, "record of 5 bytes is %zu bytes", b.n);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)p[i] << (8 * i);
    TL_CHECK(n == 5, "length field %llu", (unsigned long long)n);
    TL_CHECK(le32(p + 8) == tb_masked_crc32c(p, 8), "length CRC");
    TL_CHECK(!memcmp(p + 12, "hello", 5), "payload");
    TL_CHECK(le32(p + 17) == tb_masked_crc32c("hello", 5), "payload CRC");
    rlc_sb_free(&b);
}

static int have_decoder(void) {
    return tl_system("/usr/bin/python3 -c 'import google.protobuf' 2>/dev/null && command -v protoc >/dev/null") == 0;
}

static void test_files(const char *tmp) {
    char *dir = rlc_path_join(tmp, "run");
    tb_writer w, w2;
    tb_writer_init(&w, dir);
    tb_writer_init(&w2, dir);   // a second writer in the same second gets its own file
    TL_CHECK(strcmp(w.path, w2.path) != 0, "two writers, two files: %s", w.path);
    TL_CHECK(strstr(w.path, "/events.out.tfevents.") != NULL, "event file name %s", w.path);
    tb_writer_free(&w2);
    char longtag[301];
    for (int i = 0; i < 300; i++) longtag[i] = (char)('a' + i % 26);
    longtag[300] = 0;
    const char *tags0[] = {"critic/score/mean", "val-core/openai/gsm8k/acc/mean@1", longtag, "nan", "inf", "-inf", "big"};
    double vals0[] = {0.375, -3.25e-7, 12345.678, NAN, INFINITY, -INFINITY, 1e30};
    tb_write_session_start(&w, 0);
    tb_write_scalars(&w, 0, 1.7e9, 7, tags0, vals0);
    tb_write_scalars(&w, 5, 1.7e9 + 1, 0, NULL, NULL);
    const char *tags1[] = {"x"};
    double vals1[] = {0.1};
    tb_write_scalars(&w, (int64_t)1 << 40, 1.7e9 + 2, 1, tags1, vals1);
    tb_write_scalars(&w, -3, 1.7e9 + 3, 1, tags1, vals1);
    tb_write_session_start(&w, 6);
    rlc_metrics m;
    rlc_metrics_init(&m);
    rlc_metrics_set(&m, "actor/pg_loss", -0.0123);
    rlc_metrics_set(&m, "training/global_step", 7);
    tb_write_metrics(&w, &m, 7);
    rlc_metrics_free(&m);
    char *path = rlc_strdup(w.path);
    tb_writer_free(&w);
    // the description of what was written, for the decoder (null: non-finite)
    rlc_strbuf js = {0};
    rlc_sb_printf(&js, "[{\"session_start\": 0}, {\"step\": 0, \"values\": {\"critic/score/mean\": 0.375, \"val-core/openai/gsm8k/acc/mean@1\": "
                       "-3.25e-7, \"%s\": 12345.678, \"nan\": null, \"inf\": null, \"-inf\": null, \"big\": 1e30}}, "
                       "{\"step\": 5, \"values\": {}}, {\"step\": %lld, \"values\": {\"x\": 0.1}}, "
                       "{\"step\": -3, \"values\": {\"x\": 0.1}}, {\"session_start\": 6}, "
                       "{\"step\": 7, \"values\": {\"actor/pg_loss\": -0.0123, \"training/global_step\": 7}}]",
                  longtag, (long long)1 << 40);
    char *spec = rlc_path_join(tmp, "expect.json");
    rlc_write_file_atomic(spec, js.s, js.n);
    if (!have_decoder()) {
        tl_skip("protoc or python3-protobuf missing (scripts/install-deps.sh installs them): events not decoded");
    } else {
        int rc = tl_system("/usr/bin/python3 tests/py/tb_events.py expect '%s' '%s'", path, spec);
        TL_CHECK(rc == 0, "the decoded events equal what was written (rc %d)", rc);
    }
    // verl's directory choice
    unsetenv("TENSORBOARD_DIR");
    char *d1 = tb_log_dir("proj", "exp");
    TL_CHECK(!strcmp(d1, "tensorboard_log/proj/exp"), "default dir %s", d1);
    setenv("TENSORBOARD_DIR", "/x/tb", 1);
    char *d2 = tb_log_dir("proj", "exp");
    TL_CHECK(!strcmp(d2, "/x/tb"), "TENSORBOARD_DIR %s", d2);
    unsetenv("TENSORBOARD_DIR");
    free(d1); free(d2); free(spec); free(path); free(dir);
    rlc_sb_free(&js);
}

int main(void) {
    test_crc();
    test_frame();
    char *tmp = tl_tmpdir("tensorboard");
    test_files(tmp);
    tl_system("rm -rf '%s'", tmp);
    free(tmp);
    return tl_summary();
}
