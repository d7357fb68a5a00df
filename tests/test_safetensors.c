// test_safetensors.c: safetensors read/write, dtype conversion, sharded directories, HF checkpoint
// load/save, malformed-file errors, `rlc init`; and interop with a PyTorch-side reader/writer
// (tests/py/st.py, tests/py/st_check.py), skipped when torch is absent.
#include <math.h>
#include <stdarg.h>

#include "core/common.h"
#include "core/rng.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io_testutil.h"
#include "testlib.h"

static char *tmp;
static int san;

static char *tpath(const char *name) { return rlc_path_join(tmp, name); }
static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static int same_f32(float a, float b) { return (isnan(a) && isnan(b)) || f2u(a) == f2u(b); }

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

// Checks on the torch side are batched: one python start runs many (tests/py/st_check.py batch).
static int have_torch;
static FILE *pyq;
static char *pyq_cmds;
static int pyq_n;
static char pyq_what[64][160];

static void pyq_add(const char *what, const char *fmt, ...) RLC_PRINTF(2, 3);
static void pyq_add(const char *what, const char *fmt, ...) {
    if (!pyq) {
        pyq_cmds = tpath("pyq.txt");
        pyq = fopen(pyq_cmds, "w");
        pyq_n = 0;
    }
    CHECK(pyq_n < 64, "too many queued torch checks");
    snprintf(pyq_what[pyq_n], sizeof pyq_what[0], "%s", what);
    fprintf(pyq, "t%d ", pyq_n++);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(pyq, fmt, ap);
    va_end(ap);
    fputc('\n', pyq);
}

// run the queued commands in one python start; returns the result lines, or NULL if python produced none
static char *pyq_exec(void) {
    fclose(pyq);
    pyq = NULL;
    char *out = tpath("pyq.out");
    unlink(out);
    tl_system("/usr/bin/python3 tests/py/st_check.py batch '%s' '%s' > /dev/null 2>&1", pyq_cmds, out);
    char *res = rlc_file_exists(out) ? rlc_read_file(out, NULL) : NULL;
    free(out);
    free(pyq_cmds);
    return res;
}

// one TL_CHECK per queued command; returns 1 if all passed
static int pyq_check(const char *res) {
    int all = 1;
    for (int i = 0; i < pyq_n; i++) {
        char tag[16];
        snprintf(tag, sizeof tag, "t%d ", i);
        const char *line = res;
        while (line && strncmp(line, tag, strlen(tag)) != 0) line = (line = strchr(line, '\n')) ? line + 1 : NULL;
        int ok = line && !strncmp(line + strlen(tag), "ok", 2);
        char msg[600] = "no result";
        if (line) { snprintf(msg, sizeof msg, "%s", line + strlen(tag)); char *nl = strchr(msg, '\n'); if (nl) *nl = 0; }
        TL_CHECK(ok, "torch: %s: %s", pyq_what[i], msg);
        if (ok) printf("ok torch: %s\n", pyq_what[i]);
        all &= ok;
    }
    return all;
}

static int pyq_run(void) {
    if (!pyq) return 1;
    char *res = pyq_exec();
    int all = pyq_check(res ? res : "");
    free(res);
    return all;
}

// ----------------------------------------------------------------------------------------------
static void test_scalar_conversions(void) {
    struct { uint16_t h; float f; } f16[] = {
        {0x0000, 0.0f}, {0x8000, -0.0f}, {0x3c00, 1.0f}, {0xc000, -2.0f}, {0x7bff, 65504.0f}, {0x0001, 0x1p-24f},
        {0x03ff, 1023 * 0x1p-24f}, {0x0400, 0x1p-14f}, {0x7c00, INFINITY}, {0xfc00, -INFINITY}, {0x3555, 0x1.554p-2f},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof f16 / sizeof f16[0]; i++) {
        ok &= same_f32(st_f16_to_f32(f16[i].h), f16[i].f);
        ok &= st_f32_to_f16(f16[i].f) == f16[i].h;
    }
    TL_CHECK(ok, "F16 exact values both ways");
    TL_CHECK(isnan(st_f16_to_f32(0x7e00)) && isnan(st_f16_to_f32(0xfc01)) && st_f32_to_f16(NAN) == 0x7e00, "F16 NaN");
    // rounding: ties to even, overflow, subnormal ties, underflow to zero
    TL_CHECK(st_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00 && st_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02, "F16 ties to even");
    TL_CHECK(st_f32_to_f16(65519.99f) == 0x7bff && st_f32_to_f16(65520.0f) == 0x7c00 && st_f32_to_f16(1e30f) == 0x7c00,
             "F16 overflow threshold 65520");
    TL_CHECK(st_f32_to_f16(0x1p-25f) == 0 && st_f32_to_f16(3 * 0x1p-25f) == 2 && st_f32_to_f16(0x1.8p-25f) == 1 &&
                 st_f32_to_f16(1e-30f) == 0 && st_f32_to_f16(-0x1p-26f) == 0x8000,
             "F16 subnormal rounding");
    TL_CHECK(st_f32_to_f16(2047 * 0x1p-25f) == 0x0400, "F16 subnormal rounds up into the smallest normal");
    TL_CHECK(st_bf16_to_f32(0x3f80) == 1.0f && st_bf16_to_f32(0xc0a0) == -5.0f && st_bf16_to_f32(0x0001) == u2f(0x00010000),
             "BF16 = bits << 16");
    TL_CHECK(st_f32_to_bf16(u2f(0x3f808000)) == 0x3f80 && st_f32_to_bf16(u2f(0x3f818000)) == 0x3f82 &&
                 st_f32_to_bf16(u2f(0x3f808001)) == 0x3f81 && st_f32_to_bf16(u2f(0x7f7fffff)) == 0x7f80 &&
                 st_f32_to_bf16(NAN) == 0x7fc0 && st_f32_to_bf16(-INFINITY) == 0xff80,
             "BF16 round to nearest even, overflow, NaN");
    // every F16 pattern survives F16 -> F32 -> F16 (NaNs stay NaN)
    int rt = 1;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = st_f16_to_f32((uint16_t)h);
        uint16_t back = st_f32_to_f16(f);
        rt &= isnan(f) ? (back & 0x7c00) == 0x7c00 && (back & 0x3ff) : back == h;
    }
    TL_CHECK(rt, "F16 -> F32 -> F16 is the identity on all 65536 patterns");
}

// ----------------------------------------------------------------------------------------------
// the source values rlc's writer converts (also read back by the torch side): edge cases + random bits
static float *make_src(int64_t *n_out) {
    int64_t cap = san ? 160000 : 300000, n = 0;
    float *v = rlc_malloc((size_t)cap * sizeof(float));
    const float edge[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, 65536.0f, -65520.0f, 0x1p-14f, 0x1p-24f,
                          0x1p-25f, 0x1.8p-25f, 0x1p-26f, 1e-40f, -1e-45f, 3.4028235e38f, -3.4028235e38f, INFINITY, -INFINITY,
                          NAN, -NAN, 0.1f, 1.0f / 3.0f, 3.14159265f, 1e10f, -7.75e-3f};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) v[n++] = edge[i];
    for (int k = 0; k < 4096; k++) v[n++] = (float)k * 0x1p-25f;                 // every F16 subnormal tie and neighbour
    for (int k = 0; k < 4096; k++) v[n++] = 1.0f + (float)k * 0x1p-13f * 0.5f;    // F16 ties above 1
    for (int k = 0; k < 2048; k++) v[n++] = u2f(0x3f800000u + ((uint32_t)k << 15)); // BF16 ties/odd-even
    rng r;
    rng_init(&r, 7);
    while (n < cap - 100000) v[n++] = u2f(rng_next_u32(&r));                       // any bit pattern
    while (n < cap) {                                                              // F16-range magnitudes
        int e = (int)rng_below(&r, 44) - 28;
        v[n++] = (float)((rng_uniform(&r) * 2 - 1) * ldexp(1.0, e));
    }
    *n_out = n;
    return v;
}

// generator: element i of the tensor is src[i] (ctx = src)
static void gen_src(void *ctx, const st_write_tensor *t, int64_t start, int64_t n, float *dst) {
    memcpy(dst, (const float *)ctx + start, (size_t)n * sizeof(float));
}

static void test_generator_write(const float *src, int64_t n) {
    // the same tensors produced by a generator in ST_FILL_CHUNK blocks give the same bytes
    int64_t big = (san ? 1 : 3) * ST_FILL_CHUNK + 12345;
    float *v = rlc_malloc((size_t)big * sizeof(float));
    for (int64_t i = 0; i < big; i++) v[i] = src[i % n];
    st_write_tensor a[] = {
        {.name = "v", .dtype = ST_BF16, .ndim = 1, .shape = {big}, .f32 = v},
        {.name = "w", .dtype = ST_F16, .ndim = 2, .shape = {3, big / 3}, .f32 = v},
        {.name = "x", .dtype = ST_F32, .ndim = 1, .shape = {big}, .f32 = v},
    };
    st_write_tensor b[3];
    memcpy(b, a, sizeof a);
    for (int i = 0; i < 3; i++) { b[i].f32 = NULL; b[i].fill = gen_src; b[i].ctx = v; }
    char *pa = tpath("gen_a.safetensors"), *pb = tpath("gen_b.safetensors");
    st_write(pa, a, 3, NULL, 0);
    st_write(pb, b, 3, NULL, 0);
    size_t la, lb;
    char *x = rlc_read_file(pa, &la), *y = rlc_read_file(pb, &lb);
    TL_CHECK(la == lb && !memcmp(x, y, la), "generator write == array write (%zu bytes)", la);
    free(x); free(y); free(pa); free(pb); free(v);
}

static void test_roundtrip_c(void) {
    int64_t n;
    float *src = make_src(&n);
    float cube[24];
    for (int i = 0; i < 24; i++) cube[i] = (float)i;
    float scalar = 3.5f;
    int32_t ints[3] = {-1, 0, 7};
    st_write_tensor w[] = {
        {.name = "src", .dtype = ST_F32, .ndim = 1, .shape = {n}, .f32 = src},
        {.name = "src_bf16", .dtype = ST_BF16, .ndim = 1, .shape = {n}, .f32 = src},
        {.name = "src_f16", .dtype = ST_F16, .ndim = 1, .shape = {n}, .f32 = src},
        {.name = "scalar", .dtype = ST_F32, .ndim = 0, .f32 = &scalar},
        {.name = "empty", .dtype = ST_BF16, .ndim = 2, .shape = {0, 4}, .f32 = NULL},
        {.name = "cube", .dtype = ST_F32, .ndim = 3, .shape = {2, 3, 4}, .f32 = cube},
        {.name = "ints", .dtype = ST_I32, .ndim = 1, .shape = {3}, .raw = ints},
    };
    char *path = tpath("c.safetensors");
    const char *meta[] = {"format", "pt"};
    st_write(path, w, 7, meta, 1);
    st_file f;
    st_file_open(&f, path);
    TL_CHECK(f.n_tensors == 7 && f.header_len % 8 == 0 && st_meta(&f, "format") && !strcmp(st_meta(&f, "format"), "pt"),
             "header: 7 tensors, N %% 8 == 0, __metadata__");
    const st_tensor *a = st_find(&f, "src"), *b = st_find(&f, "src_bf16"), *h = st_find(&f, "src_f16");
    TL_CHECK(a && b && h && a->dtype == ST_F32 && b->dtype == ST_BF16 && h->dtype == ST_F16 && b->numel == n, "find");
    float *got = rlc_malloc((size_t)n * sizeof(float));
    st_tensor_to_f32(a, got, path);
    int ok = 1;
    for (int64_t i = 0; i < n; i++) ok &= same_f32(got[i], src[i]);
    TL_CHECK(ok, "F32 round trip bit exact");
    st_tensor_to_f32(b, got, path);
    ok = 1;
    for (int64_t i = 0; i < n; i++) ok &= same_f32(got[i], st_bf16_to_f32(st_f32_to_bf16(src[i])));
    TL_CHECK(ok, "BF16 write/read == scalar conversion");
    st_tensor_to_f32(h, got, path);
    ok = 1;
    for (int64_t i = 0; i < n; i++) ok &= same_f32(got[i], st_f16_to_f32(st_f32_to_f16(src[i])));
    TL_CHECK(ok, "F16 write/read == scalar conversion");
    const st_tensor *s = st_find(&f, "scalar"), *e = st_find(&f, "empty"), *c = st_find(&f, "cube"), *in = st_find(&f, "ints");
    TL_CHECK(s && s->ndim == 0 && s->numel == 1 && e && e->numel == 0 && e->ndim == 2 && c && c->ndim == 3 && c->shape[2] == 4 &&
                 in && in->dtype == ST_I32 && !memcmp(in->data, ints, 12) && !st_find(&f, "nope"),
             "scalar, zero-size, 3-d and raw I32 tensors");
    float sv;
    st_tensor_to_f32(s, &sv, path);
    TL_CHECK(sv == 3.5f, "scalar value");
    st_file_close(&f);
    if (have_torch) {
        pyq_add("reads rlc's file; BF16/F16 rounding bit-equal to torch's", "read-c %s", path);
    } else {
        tl_skip("torch absent: rlc writer -> torch reader");
    }
    test_generator_write(src, n);
    free(got);
    free(src);
    free(path);
}

static void test_py_writer(int written) {
    if (!have_torch) { tl_skip("torch absent: torch writer -> rlc reader"); return; }
    char *path = tpath("py.safetensors");
    if (!written || !rlc_file_exists(path)) { free(path); return; }
    st_file f;
    st_file_open(&f, path);
    const char *pairs[] = {"all_f16", "all_bf16", "r_bf16", "r_f16", "r_f32", "r_f64"};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        char twin[64];
        snprintf(twin, sizeof twin, "%s_as_f32", pairs[i]);
        const st_tensor *x = st_find(&f, pairs[i]), *y = st_find(&f, twin);
        TL_CHECK(x && y && x->numel == y->numel && y->dtype == ST_F32, "%s present", pairs[i]);
        if (!x || !y || x->numel != y->numel) continue;
        float *gx = rlc_malloc((size_t)x->numel * 4), *gy = rlc_malloc((size_t)x->numel * 4);
        st_tensor_to_f32(x, gx, path);
        st_tensor_to_f32(y, gy, path);
        int64_t bad = -1;
        for (int64_t k = 0; k < x->numel && bad < 0; k++)
            if (!same_f32(gx[k], gy[k])) bad = k;
        TL_CHECK(bad < 0, "%s -> fp32 equals torch's .float() (first mismatch at %lld: %g vs %g)", pairs[i], (long long)bad,
                 bad >= 0 ? gx[bad] : 0.f, bad >= 0 ? gy[bad] : 0.f);
        free(gx);
        free(gy);
    }
    st_file_close(&f);
    free(path);
}

// ----------------------------------------------------------------------------------------------
// malformed files

// [u64 n][hdr][pad spaces to 8 unless pad < 0][data_len zero bytes]; n_override != UINT64_MAX replaces n
static void write_raw(const char *path, const char *hdr, uint64_t data_len, uint64_t n_override) {
    FILE *f = fopen(path, "wb");
    size_t hl = strlen(hdr), padded = (hl + 7) / 8 * 8;
    uint64_t n = n_override != UINT64_MAX ? n_override : padded;
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(n >> (8 * i));
    fwrite(b, 1, 8, f);
    fwrite(hdr, 1, hl, f);
    for (size_t i = hl; i < padded; i++) fputc(' ', f);
    for (uint64_t i = 0; i < data_len; i++) fputc(0, f);
    fclose(f);
}

static void open_child(void *arg) {
    st_file f;
    st_file_open(&f, (const char *)arg);
}

#define T1 "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}"

static void bad_file(const char *what, const char *hdr, uint64_t data_len, uint64_t n_override, const char *s1, const char *s2) {
    char *path = tpath("bad.safetensors");
    write_raw(path, hdr, data_len, n_override);
    io_expect_die(what, open_child, path, path, s1, s2, (const char *)NULL);
    free(path);
}

static void test_malformed(void) {
    // the spec's worked example is valid
    char *path = tpath("ok.safetensors");
    FILE *fp = fopen(path, "wb");
    const char *ex = "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}";
    unsigned char len[8] = {64, 0, 0, 0, 0, 0, 0, 0};
    fwrite(len, 1, 8, fp);
    fwrite(ex, 1, 64, fp);
    for (int i = 0; i < 24; i++) fputc(i, fp);
    fclose(fp);
    st_file f;
    char err[512];
    int rc = st_file_open_err(&f, path, err, sizeof err);
    TL_CHECK(rc == 0 && f.n_tensors == 1 && f.tensors[0].shape[2] == 3, "spec example parses: %s", rc ? err : "");
    if (rc == 0) st_file_close(&f);
    free(path);

    path = tpath("bad.safetensors");
    fp = fopen(path, "wb");
    fwrite("\x10\0\0", 1, 3, fp);
    fclose(fp);
    io_expect_die("truncated length", open_child, path, path, "too short", (const char *)NULL);
    free(path);
    bad_file("truncated data", T1, 20, UINT64_MAX, "tensor 'a'", "truncated");
    bad_file("header past end", T1, 24, 4096, "header length 4096", "past the end");
    bad_file("header > 1e8", T1, 24, 200000000, "header length 200000000", "limit");
    bad_file("invalid JSON", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}", 24, UINT64_MAX, "invalid JSON", NULL);
    bad_file("not an object", "[1,2,3]", 0, UINT64_MAX, "'{'", NULL);
    bad_file("entry not an object", "{\"a\":5}", 0, UINT64_MAX, "tensor 'a'", "object");
    bad_file("control byte in header", "{\"a\":{}}\x01", 0, UINT64_MAX, "control byte 0x01", NULL);
    bad_file("bad UTF-8", "{\"\xff\":{}}", 0, UINT64_MAX, "UTF-8", NULL);
    bad_file("unknown dtype", "{\"a\":{\"dtype\":\"F33\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, UINT64_MAX, "tensor 'a'",
             "unknown dtype \"F33\"");
    bad_file("missing dtype", "{\"a\":{\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, UINT64_MAX, "tensor 'a'", "dtype");
    bad_file("negative shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2,3],\"data_offsets\":[0,24]}}", 24, UINT64_MAX, "tensor 'a'",
             "shape");
    bad_file("fractional shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5,4],\"data_offsets\":[0,24]}}", 24, UINT64_MAX, "tensor 'a'",
             "shape");
    bad_file("shape/size mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,4],\"data_offsets\":[0,24]}}", 24, UINT64_MAX, "tensor 'a'",
             "need 32");
    bad_file("dtype/size mismatch", "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, UINT64_MAX,
             "tensor 'a'", "need 12");
    bad_file("offsets out of range", "{\"a\":{\"dtype\":\"F32\",\"shape\":[250],\"data_offsets\":[0,1000]}}", 24, UINT64_MAX,
             "tensor 'a'", "out of range");
    bad_file("end before begin", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 24, UINT64_MAX, "tensor 'a'",
             "end before begin");
    bad_file("offsets not a pair", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, UINT64_MAX, "tensor 'a'",
             "data_offsets");
    bad_file("overlap",
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},\"b\":{\"dtype\":\"F32\",\"shape\":[4],"
             "\"data_offsets\":[8,24]}}",
             24, UINT64_MAX, "tensor 'b'", "overlap tensor 'a'");
    bad_file("gap",
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],"
             "\"data_offsets\":[16,24]}}",
             24, UINT64_MAX, "tensor 'b'", "gap of 8 bytes");
    bad_file("gap at start", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16, UINT64_MAX, "tensor 'a'",
             "gap");
    bad_file("trailing bytes", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 16, UINT64_MAX, "trailing",
             "16 bytes");
    bad_file("duplicate key",
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
             "\"data_offsets\":[8,16]}}",
             16, UINT64_MAX, "tensor 'a'", "duplicate");
    bad_file("duplicate field", "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, UINT64_MAX,
             "tensor 'a'", "duplicate field");
    bad_file("metadata not strings", "{\"__metadata__\":{\"format\":1},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
             8, UINT64_MAX, "__metadata__", "string");
    char *missing = tpath("does-not-exist.safetensors");
    io_expect_die("missing file", open_child, missing, missing, "cannot open", (const char *)NULL);
    free(missing);
}

// ----------------------------------------------------------------------------------------------
// checkpoints

static char *tiny_config(const char *dirname, int tie) {
    char *dir = tpath(dirname);
    rlc_mkdirs(dir);
    char *p = rlc_path_join(dir, "config.json");
    char js[1024];
    snprintf(js, sizeof js,
             "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"vocab_size\":97,\"hidden_size\":16,"
             "\"intermediate_size\":40,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":8,"
             "\"max_position_embeddings\":512,\"rms_norm_eps\":1e-6,\"rope_theta\":10000,\"tie_word_embeddings\":%s,"
             "\"bos_token_id\":null,\"eos_token_id\":[1,2],\"initializer_range\":0.05,\"torch_dtype\":\"float32\"}",
             tie ? "true" : "false");
    write_text(p, js);
    free(p);
    return dir;
}

static void random_params(param_set *ps, uint64_t seed) {
    rng r;
    rng_init(&r, seed);
    rng_fill_normal(&r, ps->data, ps->layout->numel, 0.0f, 0.1f);
}

static int params_equal(const param_set *a, const param_set *b, int bf16) {
    for (int64_t i = 0; i < a->layout->numel; i++) {
        float want = bf16 ? st_bf16_to_f32(st_f32_to_bf16(a->data[i])) : a->data[i];
        if (f2u(b->data[i]) != f2u(want)) return 0;
    }
    return 1;
}

static const char *g_dir;
static void load_child(void *arg) {
    model_config c;
    param_layout pl;
    param_set ps;
    checkpoint_load((const char *)arg, &c, &pl, &ps);
}

// write DIR/model.safetensors from the layout of ps, editing one tensor (by name) or adding one
typedef struct { const char *name; st_dtype dtype; int64_t d0; const char *add; int drop; } edit_spec;
static void write_edited(const char *dir, const param_set *ps, edit_spec e) {
    const param_layout *pl = ps->layout;
    st_write_tensor *w = rlc_calloc((size_t)pl->n_tensors + 1, sizeof(st_write_tensor));
    int n = 0;
    static int32_t ibuf[97 * 16];
    for (int i = 0; i < pl->n_tensors; i++) {
        const param_tensor *p = &pl->tensors[i];
        if (e.drop && e.name && !strcmp(p->name, e.name)) continue;
        st_write_tensor *t = &w[n++];
        t->name = p->name;
        t->dtype = ST_BF16;
        t->ndim = p->ndim;
        t->shape[0] = p->shape[0];
        t->shape[1] = p->shape[1];
        t->f32 = ps->data + p->offset;
        if (e.name && !strcmp(p->name, e.name)) {
            if (e.dtype == ST_I32) { t->dtype = ST_I32; t->f32 = NULL; t->raw = ibuf; }
            if (e.d0) t->shape[0] = e.d0;
        }
    }
    if (e.add) {
        st_write_tensor *t = &w[n++];
        t->name = e.add;
        t->dtype = ST_BF16;
        t->ndim = 1;
        t->shape[0] = 16;
        t->f32 = ps->data;
    }
    char *path = rlc_path_join(dir, "model.safetensors");
    st_write(path, w, n, NULL, 0);
    free(path);
    free(w);
}

static void write_shards(const char *dir, const param_set *ps, const char *bad_map_name, const char *bad_map_file) {
    const param_layout *pl = ps->layout;
    int half = pl->n_tensors / 2;
    st_write_tensor *w = rlc_calloc((size_t)pl->n_tensors, sizeof(st_write_tensor));
    for (int i = 0; i < pl->n_tensors; i++) {
        const param_tensor *p = &pl->tensors[i];
        w[i] = (st_write_tensor){.name = p->name, .dtype = i % 3 ? ST_F32 : ST_BF16, .ndim = p->ndim,
                                 .shape = {p->shape[0], p->shape[1]}, .f32 = ps->data + p->offset};
    }
    const char *meta[] = {"format", "pt"};
    char *p1 = rlc_path_join(dir, "model-00001-of-00002.safetensors"), *p2 = rlc_path_join(dir, "model-00002-of-00002.safetensors");
    st_write(p1, w, half, meta, 1);
    st_write(p2, w + half, pl->n_tensors - half, meta, 1);
    size_t cap = 65536, len = 0;
    char *js = rlc_malloc(cap);
    len += (size_t)snprintf(js + len, cap - len, "{\"metadata\":{\"total_size\":0},\"weight_map\":{");
    for (int i = 0; i < pl->n_tensors; i++) {
        const char *file = i < half ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
        if (bad_map_name && !strcmp(bad_map_name, pl->tensors[i].name)) {
            if (!bad_map_file) continue;   // unmapped
            file = bad_map_file;
        }
        len += (size_t)snprintf(js + len, cap - len, "%s\"%s\":\"%s\"", len > 45 ? "," : "", pl->tensors[i].name, file);
    }
    snprintf(js + len, cap - len, "}}");
    char *ip = rlc_path_join(dir, "model.safetensors.index.json");
    write_text(ip, js);
    free(ip);
    free(js);
    free(p1);
    free(p2);
    free(w);
}

static void test_checkpoint(void) {
    for (int tie = 0; tie <= 1; tie++) {
        char *dir = tiny_config(tie ? "ck_tied" : "ck_untied", tie);
        model_config cfg;
        model_config_load(&cfg, dir);
        param_layout pl;
        param_set ps;
        param_layout_init(&pl, &cfg);
        param_set_init(&ps, &pl);
        random_params(&ps, 11 + (uint64_t)tie);
        for (int bf = 0; bf <= 1; bf++) {
            char name[64];
            snprintf(name, sizeof name, "out_%d_%d", tie, bf);
            char *out = tpath(name);
            checkpoint_save(out, &ps, bf ? ST_BF16 : ST_F32);
            model_config c2;
            param_layout pl2;
            param_set ps2;
            checkpoint_load(out, &c2, &pl2, &ps2);
            TL_CHECK(pl2.numel == pl.numel && c2.tie_word_embeddings == tie && c2.n_eos_token_ids == 2 && c2.bos_token_id == -1 &&
                         !strcmp(c2.torch_dtype, bf ? "bfloat16" : "float32"),
                     "reload config (tie %d, bf16 %d)", tie, bf);
            TL_CHECK(params_equal(&ps, &ps2, bf), "save/load round trip exact (tie %d, %s)", tie, bf ? "bf16 RNE" : "f32");
            st_file f;
            char *mp = rlc_path_join(out, "model.safetensors");
            st_file_open(&f, mp);
            TL_CHECK(f.n_tensors == pl.n_tensors && (st_find(&f, "lm_head.weight") != NULL) == !tie && st_meta(&f, "format") &&
                         f.header_len % 8 == 0,
                     "file: %d tensors, lm_head iff untied, format pt, padded header", f.n_tensors);
            st_file_close(&f);
            free(mp);
            if (have_torch) {
                char what[128];
                snprintf(what, sizeof what, "reads rlc's checkpoint with HF names and shapes (tie %d, bf16 %d)", tie, bf);
                pyq_add(what, "ckpt-names %s", out);
            }
            param_set_free(&ps2);
            param_layout_free(&pl2);
            free(out);
        }

        // sharded (mixed F32/BF16 shards), read through the index
        char *sh = tpath(tie ? "sh_tied" : "sh_untied");
        rlc_mkdirs(sh);
        char *cp = rlc_path_join(sh, "config.json"), *src_cfg = rlc_path_join(dir, "config.json");
        size_t cl;
        char *ctext = rlc_read_file(src_cfg, &cl);
        write_text(cp, ctext);
        write_shards(sh, &ps, NULL, NULL);
        {
            model_config c2;
            param_layout pl2;
            param_set ps2;
            checkpoint_load(sh, &c2, &pl2, &ps2);
            int ok = 1;
            for (int i = 0; i < pl.n_tensors; i++) {
                const param_tensor *p = &pl.tensors[i];
                for (int64_t k = 0; k < p->numel; k++) {
                    float want = i % 3 ? ps.data[p->offset + k] : st_bf16_to_f32(st_f32_to_bf16(ps.data[p->offset + k]));
                    ok &= f2u(ps2.data[p->offset + k]) == f2u(want);
                }
            }
            TL_CHECK(ok, "sharded checkpoint loads exactly (tie %d)", tie);
            param_set_free(&ps2);
            param_layout_free(&pl2);
        }
        if (!tie) {
            write_shards(sh, &ps, "model.norm.weight", NULL);
            io_expect_die("shard tensor not in weight_map", load_child, sh, "model.norm.weight", "not mapped", (const char *)NULL);
            write_shards(sh, &ps, "model.norm.weight", "model-00001-of-00002.safetensors");
            io_expect_die("weight_map names the wrong shard", load_child, sh, "model.norm.weight", "does not hold it",
                          (const char *)NULL);
            write_shards(sh, &ps, "model.norm.weight", "../x.safetensors");
            io_expect_die("weight_map path outside dir", load_child, sh, "model.norm.weight", "same directory", (const char *)NULL);
            write_shards(sh, &ps, "model.norm.weight", "model-00003-of-00002.safetensors");
            io_expect_die("weight_map names a missing shard", load_child, sh, "model-00003-of-00002.safetensors", "cannot open",
                          (const char *)NULL);
            char *ip = rlc_path_join(sh, "model.safetensors.index.json");
            write_text(ip, "{\"weight_map\": {\"a\": \"x.safetensors\",");
            io_expect_die("invalid index JSON", load_child, sh, "model.safetensors.index.json", "invalid JSON", (const char *)NULL);
            write_text(ip, "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\",\"a\":\"model-00001-of-00002.safetensors\"}}");
            io_expect_die("duplicate weight_map key", load_child, sh, "tensor 'a'", "duplicate", (const char *)NULL);
            free(ip);
        }
        free(ctext);
        free(cp);
        free(src_cfg);
        free(sh);

        // errors in a single-file checkpoint
        g_dir = dir;
        if (tie) {
            // a tied checkpoint that stores lm_head.weight (as Qwen3-0.6B does) loads; the copy is ignored
            write_edited(dir, &ps, (edit_spec){.add = "lm_head.weight"});
            model_config c2;
            param_layout pl2;
            param_set ps2;
            checkpoint_load(dir, &c2, &pl2, &ps2);
            TL_CHECK(params_equal(&ps, &ps2, 1) && param_lm_head(&ps2) == param_embed(&ps2), "tied: lm_head.weight present, ignored");
            param_set_free(&ps2);
            param_layout_free(&pl2);
        } else {
            write_edited(dir, &ps, (edit_spec){.name = "lm_head.weight", .drop = 1});
            io_expect_die("untied without lm_head", load_child, dir, "'lm_head.weight'", "missing", (const char *)NULL);
            write_edited(dir, &ps, (edit_spec){.name = "model.layers.1.mlp.up_proj.weight", .drop = 1});
            io_expect_die("missing tensor", load_child, dir, "'model.layers.1.mlp.up_proj.weight'", "missing", "[40, 16]",
                          (const char *)NULL);
            write_edited(dir, &ps, (edit_spec){.add = "model.layers.2.input_layernorm.weight"});
            io_expect_die("unexpected tensor", load_child, dir, "model.safetensors", "'model.layers.2.input_layernorm.weight'",
                          "unexpected", (const char *)NULL);
            write_edited(dir, &ps, (edit_spec){.name = "model.layers.0.self_attn.k_proj.weight", .d0 = 32});
            io_expect_die("wrong shape", load_child, dir, "model.safetensors", "'model.layers.0.self_attn.k_proj.weight'",
                          "[32, 16]; expected [16, 16]", (const char *)NULL);
            write_edited(dir, &ps, (edit_spec){.name = "model.embed_tokens.weight", .dtype = ST_I32});
            io_expect_die("wrong dtype", load_child, dir, "model.safetensors", "'model.embed_tokens.weight'", "dtype I32",
                          (const char *)NULL);
            char *empty = tpath("ck_empty");
            rlc_mkdirs(empty);
            char *cp2 = rlc_path_join(empty, "config.json"), *cs = rlc_path_join(dir, "config.json");
            char *txt = rlc_read_file(cs, NULL);
            write_text(cp2, txt);
            io_expect_die("no weights", load_child, empty, "no model.safetensors", (const char *)NULL);
            free(txt);
            free(cp2);
            free(cs);
            free(empty);
        }
        param_set_free(&ps);
        param_layout_free(&pl);
        free(dir);
    }

    // tokenizer files are copied when present
    char *src = tpath("tok_src"), *dst = tpath("tok_dst");
    rlc_mkdirs(src);
    char *a = rlc_path_join(src, "tokenizer.json"), *b = rlc_path_join(src, "merges.txt"), *c = rlc_path_join(src, "other.txt");
    write_text(a, "{\"x\": 1}");
    write_text(b, "a b\n");
    write_text(c, "no");
    int n = checkpoint_copy_tokenizer(src, dst);
    char *da = rlc_path_join(dst, "tokenizer.json"), *dc = rlc_path_join(dst, "other.txt");
    char *txt = rlc_file_exists(da) ? rlc_read_file(da, NULL) : NULL;
    TL_CHECK(n == 2 && txt && !strcmp(txt, "{\"x\": 1}") && !rlc_file_exists(dc), "checkpoint_copy_tokenizer copied %d", n);
    free(txt);
    free(a); free(b); free(c); free(da); free(dc); free(src); free(dst);
}

// ----------------------------------------------------------------------------------------------
// torch-side checkpoints read by rlc, and rlc's re-save compared by torch

static const struct { int tie, shards, lm_head; const char *dtype; } PYCK[] = {
    {1, 1, 1, "bf16"}, {0, 2, 0, "bf16"}, {0, 1, 0, "f16"}, {1, 3, 0, "f32"},
};
#define N_PYCK (sizeof PYCK / sizeof PYCK[0])

static void queue_py_writers(void) {
    char *path = tpath("py.safetensors");
    pyq_add("writes every F16/BF16 pattern", "write-py %s", path);
    free(path);
    for (size_t i = 0; i < N_PYCK; i++) {
        char name[64], what[128];
        snprintf(name, sizeof name, "pyck%zu", i);
        char *dir = tiny_config(name, PYCK[i].tie);
        char *ref = rlc_path_join(dir, "ref.safetensors.ref");
        snprintf(what, sizeof what, "writes a %s checkpoint (tie %d, %d shards, lm_head %d)", PYCK[i].dtype, PYCK[i].tie,
                 PYCK[i].shards, PYCK[i].lm_head);
        pyq_add(what, "ckpt-write %s %s %s %d %d", dir, ref, PYCK[i].dtype, PYCK[i].shards, PYCK[i].lm_head);
        free(ref);
        free(dir);
    }
}

static void test_ckpt_interop(int written) {
    if (!have_torch) { tl_skip("torch absent: torch checkpoint -> rlc -> torch"); return; }
    if (!written) return;
    for (size_t i = 0; i < N_PYCK; i++) {
        char name[64];
        snprintf(name, sizeof name, "pyck%zu", i);
        char *dir = tpath(name);
        char *ref = rlc_path_join(dir, "ref.safetensors.ref");
        model_config c;
        param_layout pl;
        param_set ps;
        checkpoint_load(dir, &c, &pl, &ps);
        // compare with the fp32 reference directly
        st_file rf;
        st_file_open(&rf, ref);
        int ok = rf.n_tensors == pl.n_tensors;
        float *buf = rlc_malloc((size_t)pl.numel * sizeof(float));
        for (int k = 0; k < pl.n_tensors && ok; k++) {
            const st_tensor *t = st_find(&rf, pl.tensors[k].name);
            ok &= t && t->numel == pl.tensors[k].numel;
            if (!ok) break;
            st_tensor_to_f32(t, buf, ref);
            ok &= !memcmp(buf, ps.data + pl.tensors[k].offset, (size_t)t->numel * 4);
        }
        TL_CHECK(ok, "rlc loads torch's %s checkpoint (tie %d, %d shards, lm_head %d) exactly", PYCK[i].dtype, PYCK[i].tie,
                 PYCK[i].shards, PYCK[i].lm_head);
        free(buf);
        st_file_close(&rf);
        char *out = rlc_path_join(dir, "resaved");
        checkpoint_save(out, &ps, ST_F32);
        char what[128];
        snprintf(what, sizeof what, "reads rlc's re-save of torch checkpoint %zu exactly", i);
        pyq_add(what, "ckpt-compare %s %s", out, ref);
        param_set_free(&ps);
        param_layout_free(&pl);
        free(out);
        free(ref);
        free(dir);
    }
}

// ----------------------------------------------------------------------------------------------
// rlc init

static int files_equal(const char *a, const char *b) {
    size_t la, lb;
    char *x = rlc_read_file(a, &la), *y = rlc_read_file(b, &lb);
    int eq = la == lb && !memcmp(x, y, la);
    free(x);
    free(y);
    return eq;
}

static void test_init_cli(void) {
    const char *bin = tl_rlc_bin();
    if (!rlc_file_exists(bin)) { tl_skip("%s not built", bin); return; }
    const char *cfg = "examples/qwen3-tiny-config.json";
    char *small = NULL;
    if (san) {   // sanitizer run: the tiny example with a 4096-token vocabulary (still > 1 fill block)
        small = tpath("init_small.json");
        char *txt = rlc_read_file(cfg, NULL);
        char *v = strstr(txt, "\"vocab_size\": 151936");
        CHECK(v != NULL, "tiny config has vocab_size 151936");
        memcpy(v, "\"vocab_size\":   4096", strlen("\"vocab_size\":   4096"));
        char *b = strstr(txt, "151643"), *e = strstr(txt, "151645");
        if (b) memcpy(b, "  null", 6);
        if (e) memcpy(e, "  null", 6);
        write_text(small, txt);
        free(txt);
        cfg = small;
    }
    char *d1 = tpath("init1"), *d2 = tpath("init2"), *d3 = tpath("init3"), *d4 = tpath("init4");
    int rc1 = tl_system("OMP_NUM_THREADS=1 %s init --config %s --out %s --seed 5 --dtype bf16 > /dev/null", bin, cfg, d1);
    int rc2 = tl_system("OMP_NUM_THREADS=2 %s init --config %s --out %s --seed 5 --dtype bf16 --threads 2 > /dev/null", bin, cfg, d2);
    int rc3 = tl_system("%s init --config %s --out %s --seed 6 --dtype bf16 > /dev/null", bin, cfg, d3);
    char *tok = tpath("init_tok");
    rlc_mkdirs(tok);
    char *tj = rlc_path_join(tok, "tokenizer.json");
    write_text(tj, "{}");
    int rc4 = tl_system("%s init --config %s --out %s --seed 5 --dtype f32 --tokenizer %s > /dev/null", bin, cfg, d4, tok);
    char *tj4 = rlc_path_join(d4, "tokenizer.json");
    TL_CHECK(rc4 == 0 && rlc_file_exists(tj4), "rlc init --tokenizer copies tokenizer.json");
    free(tj4);
    free(tj);
    free(tok);
    TL_CHECK(rc1 == 0 && rc2 == 0 && rc3 == 0 && rc4 == 0, "rlc init runs");
    char *m1 = rlc_path_join(d1, "model.safetensors"), *m2 = rlc_path_join(d2, "model.safetensors"),
         *m3 = rlc_path_join(d3, "model.safetensors"), *m4 = rlc_path_join(d4, "model.safetensors");
    if (rc1 == 0 && rc2 == 0 && rc3 == 0 && rc4 == 0) {
        TL_CHECK(files_equal(m1, m2), "same seed, 1 vs 2 threads: identical files");
        TL_CHECK(!files_equal(m1, m3), "different seed: different weights");
        // the f32 file rounds (RNE) to the bf16 one
        model_config c;
        param_layout p1, p4;
        param_set s1, s4;
        checkpoint_load(d1, &c, &p1, &s1);
        TL_CHECK(!strcmp(c.torch_dtype, "bfloat16") && c.tie_word_embeddings && p1.numel > 100000, "init config");
        checkpoint_load(d4, &c, &p4, &s4);
        TL_CHECK(params_equal(&s4, &s1, 1), "f32 init rounds to the bf16 init");
        // statistics: norms are ones, matrices ~ normal(0, 0.02)
        int ones = 1;
        double sum = 0, sq = 0;
        int64_t cnt = 0;
        for (int i = 0; i < p4.n_tensors; i++) {
            const param_tensor *t = &p4.tensors[i];
            const float *x = s4.data + t->offset;
            for (int64_t k = 0; k < t->numel; k++) {
                if (t->ndim == 1) ones &= x[k] == 1.0f;
                else { sum += x[k]; sq += (double)x[k] * x[k]; cnt++; }
            }
        }
        double mean = sum / (double)cnt, sd = sqrt(sq / (double)cnt - mean * mean);
        TL_CHECK(ones && fabs(mean) < 1e-4 && fabs(sd - 0.02) < 2e-4, "init stats: norms ones %d, mean %g, std %g", ones, mean, sd);
        param_set_free(&s1); param_layout_free(&p1);
        param_set_free(&s4); param_layout_free(&p4);
        if (have_torch) {
            pyq_add("checks rlc init (bf16): names, shapes, dtype, ones, normal(0, 0.02)", "ckpt-check %s bf16", d1);
            pyq_add("checks rlc init (f32)", "ckpt-check %s f32", d4);
        } else {
            tl_skip("torch absent: torch check of rlc init");
        }
    }
    // bad input: one line, exit 1 (leak checks off: the error path exits without freeing)
    char *bad = tpath("bad_config.json");
    write_text(bad, "{\"model_type\": \"phi3\", \"vocab_size\": 10}");
    char *log = tpath("init.log");
    int rc = tl_system("ASAN_OPTIONS=detect_leaks=0 %s init --config %s --out %s/x 2> %s", bin, bad, tmp, log);
    char *msg = rlc_read_file(log, NULL);
    TL_CHECK(rc == 1 && strstr(msg, "rlc: error: ") && strstr(msg, bad) && strstr(msg, "model_type") && strstr(msg, "phi3") &&
                 strstr(msg, "gemma3_text") && strchr(msg, '\n') == msg + strlen(msg) - 1,
             "rlc init with an unsupported model_type: exit %d, '%s'", rc, msg);
    free(msg);
    rc = tl_system("ASAN_OPTIONS=detect_leaks=0 %s init --config %s --out %s/x --dtype int4 2> %s", bin, cfg, tmp, log);
    msg = rlc_read_file(log, NULL);
    TL_CHECK(rc == 1 && strstr(msg, "--dtype"), "rlc init --dtype int4: exit %d, '%s'", rc, msg);
    free(msg);
    rc = tl_system("ASAN_OPTIONS=detect_leaks=0 %s init --out %s/x 2> %s", bin, tmp, log);
    msg = rlc_read_file(log, NULL);
    TL_CHECK(rc == 1 && strstr(msg, "--config"), "rlc init without --config: exit %d, '%s'", rc, msg);
    free(msg);
    free(log);
    free(bad);
    free(small);
    free(m1); free(m2); free(m3); free(m4);
    free(d1); free(d2); free(d3); free(d4);
}

int main(void) {
    san = getenv("RLC_SAN") && atoi(getenv("RLC_SAN"));
    tmp = tl_tmpdir("st");
    // torch-side writers first (one python start, which also tells whether torch is there), then rlc,
    // then the torch-side checks (one more start)
    int written = 0;
    have_torch = 1;
    queue_py_writers();
    char *res = pyq_exec();
    if (res) {
        written = pyq_check(res);
        free(res);
    } else {
        have_torch = tl_have_torch();
        TL_CHECK(!have_torch, "tests/py/st_check.py batch produced no results although torch imports");
        if (!have_torch) tl_skip("torch absent (/usr/bin/python3 -c 'import torch' fails): PyTorch interop checks");
    }
    test_scalar_conversions();
    test_roundtrip_c();
    test_py_writer(written);
    test_malformed();
    test_checkpoint();
    test_ckpt_interop(written);
    test_init_cli();
    pyq_run();
    if (!getenv("RLC_KEEP_TMP")) tl_system("rm -rf '%s'", tmp);
    free(tmp);
    return tl_summary();
}
