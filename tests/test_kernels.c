// test_kernels.c: every layer kernel except attention (tests/test_attention.c), forward and backward:
// fast vs its _ref oracle on fresh random inputs, both vs PyTorch autograd (tests/py/kernels_ref.py,
// Debian python3-torch, float32), finite differences in double precision on a few scalars of each
// backward, RoPE tables vs torch, determinism across runs and thread counts.
//
// Tolerances are relative errors max|got-want| / max|want| (tl_check_close):
//   TOL_FWD 1e-5  fp32 forward vs double ref / torch fp32: rounding of short fp32 sums (K <= ~100).
//   TOL_GRAD 1e-4 fp32 gradients: longer reductions (over tokens / vocab) with cancellation.
//   TOL_FD 1e-4   fp32 analytical gradient vs a central difference of the double-precision layer.
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "kernels/kernels.h"
#include "kernels/kmath.h"
#include "testlib.h"

#define TOL_FWD 1e-5
#define TOL_GRAD 1e-4
#define TOL_FD 1e-4

static int g_san;  // RLC_SAN=1: sanitizer build, smaller sizes

static float *randn(tl_rng *r, int64_t n, float std) {
    float *x = rlc_malloc((size_t)(n ? n : 1) * sizeof(float));
    tl_fill_normal(r, x, n, std);
    return x;
}
static float *zeros(int64_t n) { return rlc_calloc((size_t)(n ? n : 1), sizeof(float)); }
static float *dup(const float *x, int64_t n) {
    float *y = rlc_malloc((size_t)(n ? n : 1) * sizeof(float));
    memcpy(y, x, (size_t)n * sizeof(float));
    return y;
}
static int bit_equal(const float *a, const float *b, int64_t n) { return memcmp(a, b, (size_t)n * sizeof(float)) == 0; }
// a (n) += b
static void add_to(float *a, const float *b, int64_t n) { for (int64_t i = 0; i < n; i++) a[i] += b[i]; }

// ---- PyTorch oracle: inputs are written as raw files, one python run computes every case ---------------
typedef struct { char name[160]; float *got; int64_t n; double tol; } pending;
typedef struct {
    int on;          // torch available
    char *dir;
    FILE *cases;
    pending *p;
    int np, cap;
} oracle;

static void or_init(oracle *o) {
    memset(o, 0, sizeof *o);
    o->on = tl_have_torch();
    if (!o->on) { tl_skip("PyTorch comparisons: /usr/bin/python3 cannot import torch"); return; }
    o->dir = tl_tmpdir("kernels");
    char *p = rlc_path_join(o->dir, "cases.txt");
    o->cases = fopen(p, "w");
    CHECK(o->cases, "cannot create %s", p);
    free(p);
}
static void or_file(oracle *o, const char *cs, const char *t, const char *ext, const void *x, size_t bytes) {
    if (!o->on) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s.%s", o->dir, cs, t, ext);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(x, 1, bytes, f) == bytes && fclose(f) == 0, "cannot write %s", path);
}
static void or_f32(oracle *o, const char *cs, const char *t, const float *x, int64_t n) { or_file(o, cs, t, "f32", x, (size_t)n * 4); }
static void or_i32(oracle *o, const char *cs, const char *t, const int32_t *x, int64_t n) { or_file(o, cs, t, "i32", x, (size_t)n * 4); }
static void or_case(oracle *o, const char *fmt, ...) {
    if (!o->on) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(o->cases, fmt, ap);
    va_end(ap);
    fputc('\n', o->cases);
}
// Compare got (copied now) with torch's output cs.out.t after the python run.
static void or_expect(oracle *o, const char *cs, const char *t, const float *got, int64_t n, double tol) {
    if (!o->on) return;
    if (o->np == o->cap) { o->cap = o->cap ? 2 * o->cap : 64; o->p = rlc_realloc(o->p, (size_t)o->cap * sizeof(pending)); }
    pending *p = &o->p[o->np++];
    snprintf(p->name, sizeof p->name, "%s.%s", cs, t);
    p->got = dup(got, n);
    p->n = n;
    p->tol = tol;
}
static void or_run(oracle *o) {
    if (!o->on) return;
    fclose(o->cases);
    int rc = tl_system("/usr/bin/python3 tests/py/kernels_ref.py %s", o->dir);
    TL_CHECK(rc == 0, "tests/py/kernels_ref.py exited with %d", rc);
    for (int i = 0; i < o->np; i++) {
        pending *p = &o->p[i];
        char path[4096], cs[160];
        snprintf(cs, sizeof cs, "%s", p->name);
        char *dot = strchr(cs, '.');
        *dot = 0;
        snprintf(path, sizeof path, "%s/%s.out.%s.f32", o->dir, cs, dot + 1);
        size_t len = 0;
        float *want = NULL;
        if (rc == 0 && rlc_file_exists(path)) want = (float *)rlc_read_file(path, &len);
        if (!want || len != (size_t)p->n * 4) {
            TL_CHECK(0, "torch output %s missing or of wrong size (%zu bytes, want %lld)", path, len, (long long)p->n * 4);
        } else {
            char nm[200];
            snprintf(nm, sizeof nm, "torch %s", p->name);
            tl_check_close(nm, p->got, want, p->n, p->tol);
        }
        free(want);
        free(p->got);
    }
    free(o->p);
    tl_system("rm -rf %s", o->dir);
    free(o->dir);
}

// ---- finite differences in double ----------------------------------------------------------------------
// loss(ctx) in double over double copies of the inputs; x is the double array to perturb, g (n) the
// fp32 analytical gradient of that input. Checks a few spread-out indices.
typedef double (*loss_fn)(void *ctx);
static void fd_check(const char *what, loss_fn loss, void *ctx, double *x, const float *g, int64_t n, tl_rng *r) {
    double scale = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)g[i]));
    if (scale < 1e-30) scale = 1e-30;
    double worst = 0;
    int64_t wi = 0;
    double wfd = 0;
    for (int k = 0; k < 5; k++) {
        int64_t i = k == 0 ? 0 : k == 1 ? n - 1 : (int64_t)(tl_uniform(r, 0, 1) * (float)n) % n;
        double x0 = x[i], h = 1e-4 * fmax(1.0, fabs(x0));
        x[i] = x0 + h; double lp = loss(ctx);
        x[i] = x0 - h; double lm = loss(ctx);
        x[i] = x0;
        double fd = (lp - lm) / (2 * h), e = fabs(fd - (double)g[i]) / scale;
        if (e > worst) { worst = e; wi = i; wfd = fd; }
    }
    TL_CHECK(worst <= TOL_FD, "finite difference %s: rel err %.3g at [%lld]: analytical %.9g, fd %.9g", what, worst,
             (long long)wi, (double)g[wi], wfd);
}
static double *to_d(const float *x, int64_t n) {
    double *d = rlc_malloc((size_t)(n ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

// ---- matmul -------------------------------------------------------------------------------------------
typedef struct { double *x, *w, *dout; int64_t T, C, OC; } mm_ctx;
static double mm_loss(void *p) {
    mm_ctx *c = p;
    double L = 0;
    for (int64_t t = 0; t < c->T; t++)
        for (int64_t o = 0; o < c->OC; o++) {
            double a = 0;
            for (int64_t k = 0; k < c->C; k++) a += c->x[t * c->C + k] * c->w[o * c->C + k];
            L += c->dout[t * c->OC + o] * a;
        }
    return L;
}
static void test_matmul(oracle *o, tl_rng *r) {
    const int64_t T = 37, C = 70, OC = 53;
    float *x = randn(r, T * C, 1), *w = randn(r, OC * C, 0.2f), *dout = randn(r, T * OC, 1);
    float *out = zeros(T * OC), *outr = zeros(T * OC);
    matmul_forward(out, x, w, T, C, OC);
    matmul_forward_ref(outr, x, w, T, C, OC);
    tl_check_close("matmul fwd vs ref", out, outr, T * OC, TOL_FWD);
    // backward accumulates: start from random contents
    float *dx0 = randn(r, T * C, 1), *dw0 = randn(r, OC * C, 1);
    float *dx = dup(dx0, T * C), *dw = dup(dw0, OC * C), *dxr = zeros(T * C), *dwr = zeros(OC * C);
    matmul_backward(dx, dw, dout, x, w, T, C, OC);
    matmul_backward_ref(dxr, dwr, dout, x, w, T, C, OC);
    float *dxe = dup(dx0, T * C), *dwe = dup(dw0, OC * C);
    add_to(dxe, dxr, T * C); add_to(dwe, dwr, OC * C);
    tl_check_close("matmul dinp (+=) vs ref", dx, dxe, T * C, TOL_GRAD);
    tl_check_close("matmul dw (+=) vs ref", dw, dwe, OC * C, TOL_GRAD);
    float *dxf = zeros(T * C), *dwf = zeros(OC * C);
    matmul_backward(dxf, NULL, dout, x, w, T, C, OC);
    matmul_backward(NULL, dwf, dout, x, w, T, C, OC);
    tl_check_close("matmul dinp alone", dxf, dxr, T * C, TOL_GRAD);
    tl_check_close("matmul dw alone", dwf, dwr, OC * C, TOL_GRAD);
    or_case(o, "mm matmul T=%lld C=%lld OC=%lld", (long long)T, (long long)C, (long long)OC);
    or_f32(o, "mm", "inp", x, T * C); or_f32(o, "mm", "w", w, OC * C); or_f32(o, "mm", "dout", dout, T * OC);
    or_expect(o, "mm", "out", out, T * OC, TOL_FWD);
    or_expect(o, "mm", "dinp", dxf, T * C, TOL_GRAD);
    or_expect(o, "mm", "dw", dwf, OC * C, TOL_GRAD);
    mm_ctx c = {to_d(x, T * C), to_d(w, OC * C), to_d(dout, T * OC), T, C, OC};
    fd_check("matmul dinp", mm_loss, &c, c.x, dxf, T * C, r);
    fd_check("matmul dw", mm_loss, &c, c.w, dwf, OC * C, r);
    free(c.x); free(c.w); free(c.dout);
    free(x); free(w); free(dout); free(out); free(outr); free(dx0); free(dw0); free(dx); free(dw);
    free(dxr); free(dwr); free(dxe); free(dwe); free(dxf); free(dwf);
}

// ---- embedding ----------------------------------------------------------------------------------------
typedef struct { double *wte, *dout; const int32_t *tok; int64_t T, H; } emb_ctx;
static double emb_loss(void *p) {
    emb_ctx *c = p;
    double L = 0;
    for (int64_t t = 0; t < c->T; t++)
        for (int64_t h = 0; h < c->H; h++) L += c->dout[t * c->H + h] * c->wte[(int64_t)c->tok[t] * c->H + h];
    return L;
}
static void test_embedding(oracle *o, tl_rng *r) {
    const int64_t T = 300, V = 50, H = 70;  // H not a multiple of the 64-column block
    int32_t *tok = rlc_malloc((size_t)T * sizeof(int32_t));
    for (int64_t t = 0; t < T; t++) tok[t] = (int32_t)(tl_uniform(r, 0, 1) * (float)V) % (int32_t)V;
    tok[0] = 0; tok[1] = (int32_t)V - 1; tok[2] = 7; tok[3] = 7;
    float *wte = randn(r, V * H, 1), *dout = randn(r, T * H, 1), *out = zeros(T * H);
    embedding_forward(out, tok, wte, T, H);
    int ok = 1;
    for (int64_t t = 0; t < T; t++) ok &= bit_equal(out + t * H, wte + (int64_t)tok[t] * H, H);
    TL_CHECK(ok, "embedding forward copies rows exactly");
    float *d0 = randn(r, V * H, 1), *dw = dup(d0, V * H);
    embedding_backward(dw, dout, tok, T, H);
    float *want = zeros(V * H);  // double-accumulated scatter
    {
        double *acc = calloc((size_t)(V * H), sizeof(double));
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) acc[(int64_t)tok[t] * H + h] += dout[t * H + h];
        for (int64_t i = 0; i < V * H; i++) want[i] = (float)((double)d0[i] + acc[i]);
        free(acc);
    }
    tl_check_close("embedding dwte (+=) vs double scatter", dw, want, V * H, TOL_GRAD);
    int nth = omp_get_max_threads();
    float *a = zeros(V * H), *b = zeros(V * H);
    omp_set_num_threads(1);
    embedding_backward(a, dout, tok, T, H);
    omp_set_num_threads(nth > 1 ? nth : 2);
    embedding_backward(b, dout, tok, T, H);
    omp_set_num_threads(nth);
    TL_CHECK(bit_equal(a, b, V * H), "embedding backward is bit-identical for 1 and %d threads", nth > 1 ? nth : 2);
    or_case(o, "emb embedding T=%lld V=%lld H=%lld", (long long)T, (long long)V, (long long)H);
    or_i32(o, "emb", "tokens", tok, T); or_f32(o, "emb", "wte", wte, V * H); or_f32(o, "emb", "dout", dout, T * H);
    or_expect(o, "emb", "out", out, T * H, 0.0);
    or_expect(o, "emb", "dwte", a, V * H, TOL_GRAD);
    emb_ctx c = {to_d(wte, V * H), to_d(dout, T * H), tok, T, H};
    fd_check("embedding dwte", emb_loss, &c, c.wte, a, V * H, r);
    free(c.wte); free(c.dout);
    free(tok); free(wte); free(dout); free(out); free(d0); free(dw); free(want); free(a); free(b);
}

// ---- RMSNorm ------------------------------------------------------------------------------------------
typedef struct { double *x, *w, *dout; int64_t R, C; double eps; } rms_ctx;
static double rms_loss(void *p) {
    rms_ctx *c = p;
    double L = 0;
    for (int64_t r = 0; r < c->R; r++) {
        double ss = 0;
        for (int64_t k = 0; k < c->C; k++) ss += c->x[r * c->C + k] * c->x[r * c->C + k];
        double rs = 1.0 / sqrt(ss / (double)c->C + c->eps);
        for (int64_t k = 0; k < c->C; k++) L += c->dout[r * c->C + k] * c->w[k] * c->x[r * c->C + k] * rs;
    }
    return L;
}
static void test_rmsnorm_one(oracle *o, tl_rng *r, const char *cs, int64_t R, int64_t C) {
    const float eps = 1e-6f;
    float *x = randn(r, R * C, 1.5f), *w = randn(r, C, 1), *dout = randn(r, R * C, 1);
    for (int64_t k = 0; k < C; k++) w[k] += 1.0f;  // around the ones init
    float *out = zeros(R * C), *rs = zeros(R), *outr = zeros(R * C), *rsr = zeros(R);
    rmsnorm_forward(out, rs, x, w, R, C, eps);
    rmsnorm_forward_ref(outr, rsr, x, w, R, C, eps);
    char nm[128];
    snprintf(nm, sizeof nm, "%s fwd vs ref", cs); tl_check_close(nm, out, outr, R * C, TOL_FWD);
    snprintf(nm, sizeof nm, "%s rstd vs ref", cs); tl_check_close(nm, rs, rsr, R, TOL_FWD);
    float *dx0 = randn(r, R * C, 1), *dw0 = randn(r, C, 1);
    float *dx = dup(dx0, R * C), *dw = dup(dw0, C), *dxr = dup(dx0, R * C), *dwr = dup(dw0, C);
    rmsnorm_backward(dx, dw, dout, x, w, rs, R, C);
    rmsnorm_backward_ref(dxr, dwr, dout, x, w, rsr, R, C);
    snprintf(nm, sizeof nm, "%s dinp (+=) vs ref", cs); tl_check_close(nm, dx, dxr, R * C, TOL_GRAD);
    snprintf(nm, sizeof nm, "%s dw (+=) vs ref", cs); tl_check_close(nm, dw, dwr, C, TOL_GRAD);
    float *dxf = zeros(R * C), *dwf = zeros(C);
    rmsnorm_backward(dxf, dwf, dout, x, w, rs, R, C);
    int nth = omp_get_max_threads();
    float *dw1 = zeros(C), *dx1 = zeros(R * C);
    omp_set_num_threads(1);
    rmsnorm_backward(dx1, dw1, dout, x, w, rs, R, C);
    omp_set_num_threads(nth);
    TL_CHECK(bit_equal(dw1, dwf, C) && bit_equal(dx1, dxf, R * C), "%s backward bit-identical for 1 and %d threads", cs, nth);
    or_case(o, "%s rmsnorm rows=%lld C=%lld eps=%.9g", cs, (long long)R, (long long)C, (double)eps);
    or_f32(o, cs, "inp", x, R * C); or_f32(o, cs, "w", w, C); or_f32(o, cs, "dout", dout, R * C);
    or_expect(o, cs, "out", out, R * C, TOL_FWD);
    or_expect(o, cs, "dinp", dxf, R * C, TOL_GRAD);
    or_expect(o, cs, "dw", dwf, C, TOL_GRAD);
    rms_ctx c = {to_d(x, R * C), to_d(w, C), to_d(dout, R * C), R, C, eps};
    snprintf(nm, sizeof nm, "%s dinp", cs); fd_check(nm, rms_loss, &c, c.x, dxf, R * C, r);
    snprintf(nm, sizeof nm, "%s dw", cs); fd_check(nm, rms_loss, &c, c.w, dwf, C, r);
    free(c.x); free(c.w); free(c.dout);
    free(x); free(w); free(dout); free(out); free(rs); free(outr); free(rsr); free(dx0); free(dw0); free(dx); free(dw);
    free(dxr); free(dwr); free(dxf); free(dwf); free(dw1); free(dx1);
}

// ---- RoPE ---------------------------------------------------------------------------------------------
typedef struct { double *x, *dout, *cs, *sn; const int32_t *pos; int64_t T, nh, D; } rope_ctx;
static double rope_loss(void *p) {
    rope_ctx *c = p;
    int64_t half = c->D / 2;
    double L = 0;
    for (int64_t t = 0; t < c->T; t++)
        for (int64_t h = 0; h < c->nh; h++)
            for (int64_t i = 0; i < half; i++) {
                int64_t b = (t * c->nh + h) * c->D;
                double co = c->cs[(int64_t)c->pos[t] * half + i], si = c->sn[(int64_t)c->pos[t] * half + i];
                double a = c->x[b + i], bb = c->x[b + i + half];
                L += c->dout[b + i] * (a * co - bb * si) + c->dout[b + i + half] * (bb * co + a * si);
            }
    return L;
}
static void test_rope(oracle *o, tl_rng *r) {
    // tables: the Qwen3 shape (D=128, theta=1e6) and a second one
    const int maxp = g_san ? 1024 : 4096;
    rope_table big;
    rope_table_init(&big, maxp, 128, 1e6);
    float inv[64];
    rope_inv_freq(inv, 128, 1e6);
    or_case(o, "ropebig rope T=1 nh=1 D=128 theta=1000000 max_pos=%d", maxp);
    int32_t p0 = 0;
    float x1[128] = {0}, d1[128] = {0};
    or_i32(o, "ropebig", "pos", &p0, 1); or_f32(o, "ropebig", "x", x1, 128); or_f32(o, "ropebig", "dout", d1, 128);
    or_expect(o, "ropebig", "inv_freq", inv, 64, 0.0);  // bit-exact: same float32 pow as torch's SLEEF
    // cos/sin: correctly rounded here, SLEEF u10 in torch: at most 1 ulp (<= 6e-8 for |values| <= 1)
    or_expect(o, "ropebig", "cos", big.cos, (int64_t)maxp * 64, 1.2e-7);
    or_expect(o, "ropebig", "sin", big.sin, (int64_t)maxp * 64, 1.2e-7);
    rope_table_free(&big);

    const int64_t T = 50, nh = 3, D = 64;
    const int mp = 300;
    rope_table rt;
    rope_table_init(&rt, mp, (int)D, 10000.0);
    int32_t *pos = rlc_malloc((size_t)T * sizeof(int32_t));
    for (int64_t t = 0; t < T; t++) pos[t] = t < 20 ? (int32_t)t : (int32_t)(tl_uniform(r, 0, 1) * (float)mp) % mp;
    pos[T - 1] = mp - 1;
    float *x = randn(r, T * nh * D, 1), *dout = randn(r, T * nh * D, 1);
    float *y = dup(x, T * nh * D), *dx = dup(dout, T * nh * D);
    rope_forward(y, pos, &rt, T, nh);
    rope_backward(dx, pos, &rt, T, nh);
    // backward is the transpose: <dout, R x> == <R^T dout, x>
    double l1 = 0, l2 = 0, sc = 0;
    for (int64_t i = 0; i < T * nh * D; i++) { l1 += (double)dout[i] * y[i]; l2 += (double)dx[i] * x[i]; sc += fabs((double)dout[i] * y[i]); }
    TL_CHECK(fabs(l1 - l2) <= 1e-6 * sc, "rope backward is the transpose of forward: %.9g vs %.9g", l1, l2);
    float *back = dup(y, T * nh * D);
    rope_backward(back, pos, &rt, T, nh);  // R^T R = I
    tl_check_close("rope backward(forward(x)) == x", back, x, T * nh * D, TOL_FWD);
    or_case(o, "rope rope T=%lld nh=%lld D=%lld theta=10000 max_pos=%d", (long long)T, (long long)nh, (long long)D, mp);
    or_i32(o, "rope", "pos", pos, T); or_f32(o, "rope", "x", x, T * nh * D); or_f32(o, "rope", "dout", dout, T * nh * D);
    or_expect(o, "rope", "out", y, T * nh * D, TOL_FWD);
    or_expect(o, "rope", "dx", dx, T * nh * D, TOL_FWD);
    float inv64[32];
    rope_inv_freq(inv64, (int)D, 10000.0);
    or_expect(o, "rope", "inv_freq", inv64, D / 2, 0.0);
    rope_ctx c = {to_d(x, T * nh * D), to_d(dout, T * nh * D), to_d(rt.cos, (int64_t)mp * D / 2), to_d(rt.sin, (int64_t)mp * D / 2), pos, T, nh, D};
    fd_check("rope dx", rope_loss, &c, c.x, dx, T * nh * D, r);
    free(c.x); free(c.dout); free(c.cs); free(c.sn);
    rope_table_free(&rt);
    free(pos); free(x); free(dout); free(y); free(dx); free(back);
}

// ---- SwiGLU and residual ------------------------------------------------------------------------------
typedef struct { double *g, *u, *dout; int64_t n; } sw_ctx;
static double sw_loss(void *p) {
    sw_ctx *c = p;
    double L = 0;
    for (int64_t i = 0; i < c->n; i++) L += c->dout[i] * c->g[i] / (1 + exp(-c->g[i])) * c->u[i];
    return L;
}
static void test_swiglu(oracle *o, tl_rng *r) {
    const int64_t n = 10007;
    float *g = randn(r, n, 3), *u = randn(r, n, 1), *dout = randn(r, n, 1);
    g[0] = -100.0f; g[1] = 100.0f; g[2] = 0.0f; g[3] = -20.0f;  // saturated ends
    float *out = zeros(n), *want = zeros(n);
    swiglu_forward(out, g, u, n);
    for (int64_t i = 0; i < n; i++) want[i] = (float)((double)g[i] / (1 + exp(-(double)g[i])) * u[i]);
    tl_check_close("swiglu fwd vs double", out, want, n, TOL_FWD);
    float *dg0 = randn(r, n, 1), *du0 = randn(r, n, 1), *dg = dup(dg0, n), *du = dup(du0, n);
    swiglu_backward(dg, du, dout, g, u, n);
    float *dge = zeros(n), *due = zeros(n);
    for (int64_t i = 0; i < n; i++) {
        double gg = g[i], s = 1 / (1 + exp(-gg));
        dge[i] = (float)(dg0[i] + (double)dout[i] * u[i] * s * (1 + gg * (1 - s)));
        due[i] = (float)(du0[i] + (double)dout[i] * gg * s);
    }
    tl_check_close("swiglu dgate (+=) vs double", dg, dge, n, TOL_GRAD);
    tl_check_close("swiglu dup (+=) vs double", du, due, n, TOL_GRAD);
    float *dgf = zeros(n), *duf = zeros(n);
    swiglu_backward(dgf, duf, dout, g, u, n);
    or_case(o, "sw swiglu n=%lld", (long long)n);
    or_f32(o, "sw", "gate", g, n); or_f32(o, "sw", "up", u, n); or_f32(o, "sw", "dout", dout, n);
    or_expect(o, "sw", "out", out, n, TOL_FWD);
    or_expect(o, "sw", "dgate", dgf, n, TOL_GRAD);
    or_expect(o, "sw", "dup", duf, n, TOL_GRAD);
    sw_ctx c = {to_d(g, n), to_d(u, n), to_d(dout, n), n};
    fd_check("swiglu dgate", sw_loss, &c, c.g, dgf, n, r);
    fd_check("swiglu dup", sw_loss, &c, c.u, duf, n, r);
    free(c.g); free(c.u); free(c.dout);
    // residual (exact), including out aliasing a
    float *a = dup(u, n), *s = zeros(n);
    residual_forward(s, u, dout, n);
    residual_forward(a, a, dout, n);
    int ok = 1;
    for (int64_t i = 0; i < n; i++) ok &= s[i] == u[i] + dout[i] && a[i] == s[i];
    TL_CHECK(ok, "residual_forward out = a + b (also aliased)");
    free(a); free(s);
    free(g); free(u); free(dout); free(out); free(want); free(dg0); free(du0); free(dg); free(du); free(dge); free(due);
    free(dgf); free(duf);
}

// ---- log-prob head ------------------------------------------------------------------------------------
typedef struct { double *h, *w; const int32_t *tg; const float *dlogp, *dent; int64_t T, H, V; double temp; } head_ctx;
static double head_loss(void *p) {
    head_ctx *c = p;
    double L = 0;
    double *z = rlc_malloc((size_t)c->V * sizeof(double));
    for (int64_t t = 0; t < c->T; t++) {
        double m = -INFINITY;
        for (int64_t v = 0; v < c->V; v++) {
            double a = 0;
            for (int64_t k = 0; k < c->H; k++) a += c->h[t * c->H + k] * c->w[v * c->H + k];
            z[v] = a / c->temp;
            m = fmax(m, z[v]);
        }
        double s = 0, ez = 0;
        for (int64_t v = 0; v < c->V; v++) { double e = exp(z[v] - m); s += e; ez += e * z[v]; }
        double lse = m + log(s);
        ez /= s;
        if (c->tg[t] >= 0) L += (double)c->dlogp[t] * (z[c->tg[t]] - lse);
        if (c->dent) L += (double)c->dent[t] * (lse - ez);
    }
    free(z);
    return L;
}

// targets (T): random in [0, V), some -1, and the ends of the vocabulary
static int32_t *make_targets(tl_rng *r, int64_t T, int64_t V) {
    int32_t *tg = rlc_malloc((size_t)T * sizeof(int32_t));
    for (int64_t t = 0; t < T; t++) tg[t] = (int32_t)((int64_t)(tl_uniform(r, 0, 1) * (float)V) % V);
    for (int64_t t = 3; t < T; t += 11) tg[t] = -1;
    tg[0] = (int32_t)V - 1;
    if (T > 1) tg[1] = 0;
    if (T > 2) tg[2] = -1;
    return tg;
}

// One configuration: fast vs ref for forward and both backward entry points; optionally vs torch.
static void head_case(oracle *o, tl_rng *r, const char *cs, int64_t T, int64_t H, int64_t V, float temp, int ent, int torch) {
    float *h = randn(r, T * H, 1), *w = randn(r, V * H, 0.3f), *dlogp = randn(r, T, 1), *dent = ent ? randn(r, T, 1) : NULL;
    int32_t *tg = make_targets(r, T, V);
    float *lp = zeros(T), *en = zeros(T), *ls = zeros(T), *lpr = zeros(T), *enr = zeros(T), *lsr = zeros(T);
    logprob_head_forward(lp, en, ls, h, w, tg, T, H, V, temp);
    logprob_head_forward_ref(lpr, enr, lsr, h, w, tg, T, H, V, temp);
    char nm[160];
    int ok = 1;
    for (int64_t t = 0; t < T; t++) ok &= tg[t] >= 0 || lp[t] == 0.0f;
    TL_CHECK(ok, "%s: targets < 0 give logp 0", cs);
    snprintf(nm, sizeof nm, "%s logp vs ref", cs); tl_check_close(nm, lp, lpr, T, TOL_FWD);
    snprintf(nm, sizeof nm, "%s entropy vs ref", cs); tl_check_close(nm, en, enr, T, TOL_FWD);
    snprintf(nm, sizeof nm, "%s lse vs ref", cs); tl_check_close(nm, ls, lsr, T, TOL_FWD);
    float *lp2 = zeros(T);  // entropy/lse outputs optional
    logprob_head_forward(lp2, NULL, NULL, h, w, tg, T, H, V, temp);
    TL_CHECK(bit_equal(lp, lp2, T), "%s: logp identical with entropy/lse off", cs);
    // backward: accumulate onto random contents
    float *dh0 = randn(r, T * H, 1), *dw0 = randn(r, V * H, 1);
    float *dh = dup(dh0, T * H), *dw = dup(dw0, V * H), *dhr = dup(dh0, T * H), *dwr = dup(dw0, V * H);
    logprob_head_backward(dh, dw, dlogp, dent, h, w, tg, ls, T, H, V, temp);
    logprob_head_backward_ref(dhr, dwr, dlogp, dent, h, w, tg, lsr, T, H, V, temp);
    snprintf(nm, sizeof nm, "%s dhidden (+=) vs ref", cs); tl_check_close(nm, dh, dhr, T * H, TOL_GRAD);
    snprintf(nm, sizeof nm, "%s dw (+=) vs ref", cs); tl_check_close(nm, dw, dwr, V * H, TOL_GRAD);
    float *dhf = zeros(T * H), *dwf = zeros(V * H), *dhe = zeros(T * H), *dwe = zeros(V * H);
    logprob_head_backward(dhf, dwf, dlogp, dent, h, w, tg, ls, T, H, V, temp);
    logprob_head_backward_ent(dhe, dwe, dlogp, dent, en, h, w, tg, ls, T, H, V, temp);
    snprintf(nm, sizeof nm, "%s backward_ent dhidden vs backward", cs); tl_check_close(nm, dhe, dhf, T * H, TOL_GRAD);
    snprintf(nm, sizeof nm, "%s backward_ent dw vs backward", cs); tl_check_close(nm, dwe, dwf, V * H, TOL_GRAD);
    float *dh2 = zeros(T * H), *dw2 = zeros(V * H);
    logprob_head_backward(dh2, dw2, dlogp, dent, h, w, tg, ls, T, H, V, temp);
    TL_CHECK(bit_equal(dh2, dhf, T * H) && bit_equal(dw2, dwf, V * H), "%s: backward is deterministic", cs);
    if (torch) {
        or_case(o, "%s head T=%lld H=%lld V=%lld temperature=%.9g entropy=%d", cs, (long long)T, (long long)H, (long long)V, (double)temp, ent);
        or_f32(o, cs, "hidden", h, T * H); or_f32(o, cs, "w", w, V * H); or_i32(o, cs, "targets", tg, T);
        or_f32(o, cs, "dlogp", dlogp, T);
        if (ent) or_f32(o, cs, "dentropy", dent, T);
        or_expect(o, cs, "logp", lp, T, TOL_FWD);
        or_expect(o, cs, "entropy", en, T, TOL_FWD);
        or_expect(o, cs, "lse", ls, T, TOL_FWD);
        or_expect(o, cs, "dhidden", dhf, T * H, TOL_GRAD);
        or_expect(o, cs, "dw", dwf, V * H, TOL_GRAD);
    }
    free(h); free(w); free(dlogp); free(dent); free(tg); free(lp); free(en); free(ls); free(lpr); free(enr); free(lsr); free(lp2);
    free(dh0); free(dw0); free(dh); free(dw); free(dhr); free(dwr); free(dhf); free(dwf); free(dhe); free(dwe); free(dh2); free(dw2);
}

static void test_head(oracle *o, tl_rng *r) {
    // V = 8525: four vocabulary chunks of 2132, the last one 2129 wide; T = 1100 tokens: three forward
    // token chunks (512) and two backward ones (1024), the last ones partial
    const int64_t V = 8525, T = 1100, H = g_san ? 8 : 32;
    for (int ent = 0; ent <= 1; ent++)
        for (int ti = 0; ti < 2; ti++) {
            char cs[64];
            snprintf(cs, sizeof cs, "head_e%d_t%d", ent, ti);
            // the multi-chunk token count for (entropy on, temperature 0.7) and (off, 1); in the
            // sanitizer build for the first only. Fewer tokens for the other two keep the test short.
            int64_t tn = ent == ti ? (!g_san || ent ? T : 130) : (g_san ? 130 : 300);
            head_case(o, r, cs, tn, H, V, ti ? 0.7f : 1.0f, ent, 0);
        }
    // vs torch: smaller, still two vocabulary chunks
    head_case(o, r, "headt_e1", 70, 32, 5003, 0.7f, 1, 1);
    head_case(o, r, "headt_e0", 70, 32, 5003, 1.0f, 0, 1);
    // a single token and a tiny vocabulary
    head_case(o, r, "head_tiny", 1, 8, 5, 1.0f, 1, 0);

    // forward does not depend on the thread count
    {
        const int64_t t2 = 100, h2 = 32, v2 = 9000;
        float *h = randn(r, t2 * h2, 1), *w = randn(r, v2 * h2, 0.3f);
        int32_t *tg = make_targets(r, t2, v2);
        float *a = zeros(3 * t2), *b = zeros(3 * t2);
        int nth = omp_get_max_threads();
        omp_set_num_threads(1);
        logprob_head_forward(a, a + t2, a + 2 * t2, h, w, tg, t2, h2, v2, 0.7f);
        omp_set_num_threads(nth > 1 ? nth : 2);
        logprob_head_forward(b, b + t2, b + 2 * t2, h, w, tg, t2, h2, v2, 0.7f);
        omp_set_num_threads(nth);
        TL_CHECK(bit_equal(a, b, 3 * t2), "head forward bit-identical for 1 and %d threads", nth > 1 ? nth : 2);
        free(h); free(w); free(tg); free(a); free(b);
    }
    // finite differences in double, entropy on, temperature 0.7, two vocab chunks
    {
        const int64_t t3 = 4, h3 = 6, v3 = 4100;
        float *h = randn(r, t3 * h3, 1), *w = randn(r, v3 * h3, 0.5f), *dlogp = randn(r, t3, 1), *dent = randn(r, t3, 1);
        int32_t *tg = make_targets(r, t3, v3);
        tg[3] = 4097;
        float *lp = zeros(t3), *en = zeros(t3), *ls = zeros(t3), *dh = zeros(t3 * h3), *dw = zeros(v3 * h3);
        logprob_head_forward(lp, en, ls, h, w, tg, t3, h3, v3, 0.7f);
        logprob_head_backward(dh, dw, dlogp, dent, h, w, tg, ls, t3, h3, v3, 0.7f);
        head_ctx c = {to_d(h, t3 * h3), to_d(w, v3 * h3), tg, dlogp, dent, t3, h3, v3, 0.7f};
        fd_check("head dhidden", head_loss, &c, c.h, dh, t3 * h3, r);
        // dw rows of the targets carry the largest gradients: check those explicitly too
        double scale = 0;
        for (int64_t i = 0; i < v3 * h3; i++) scale = fmax(scale, fabs((double)dw[i]));
        double worst = 0;
        for (int64_t t = 0; t < t3; t++) {
            if (tg[t] < 0) continue;
            int64_t i = (int64_t)tg[t] * h3 + t % h3;
            double x0 = c.w[i], hh = 1e-4;
            c.w[i] = x0 + hh; double lpp = head_loss(&c);
            c.w[i] = x0 - hh; double lmm = head_loss(&c);
            c.w[i] = x0;
            worst = fmax(worst, fabs((lpp - lmm) / (2 * hh) - dw[i]) / scale);
        }
        TL_CHECK(worst <= TOL_FD, "finite difference head dw at target rows: rel err %.3g", worst);
        fd_check("head dw", head_loss, &c, c.w, dw, v3 * h3, r);
        free(c.h); free(c.w);
        free(h); free(w); free(dlogp); free(dent); free(tg); free(lp); free(en); free(ls); free(dh); free(dw);
    }
    // logits_forward against the matmul reference
    {
        const int64_t t4 = 9, h4 = 40, v4 = 777;
        float *h = randn(r, t4 * h4, 1), *w = randn(r, v4 * h4, 0.3f), *lg = zeros(t4 * v4), *lr = zeros(t4 * v4);
        logits_forward(lg, h, w, t4, h4, v4);
        matmul_forward_ref(lr, h, w, t4, h4, v4);
        tl_check_close("logits_forward vs ref", lg, lr, t4 * v4, TOL_FWD);
        free(h); free(w); free(lg); free(lr);
    }
}

// ---- the vectorisable exp of kmath.h ----------------------------------------------------------------------
static void test_kexp(void) {
    double worst = 0, worst2 = 0;
    float wx = 0;
    for (int i = 0; i <= 2000000; i++) {
        float x = -87.3f + (88.7f + 87.3f) * (float)i / 2000000.0f;
        double want = exp((double)x), e = fabs((double)k_expf(x) - want) / want;
        if (e > worst) { worst = e; wx = x; }
        if (x <= 1.0f) worst2 = fmax(worst2, fabs((double)k_expf_le88(x) - want) / want);
    }
    // 1.5e-7 = 2.5 ulp of 2^-24 (measured 1.4 ulp): Cody-Waite reduction plus a degree-6 polynomial
    TL_CHECK(worst <= 1.5e-7, "k_expf max rel err %.3g at x=%.9g", worst, (double)wx);
    TL_CHECK(worst2 <= 1.5e-7, "k_expf_le88 max rel err %.3g", worst2);
    TL_CHECK(k_expf(-100.0f) == 0.0f && k_expf_le88(-100.0f) == 0.0f && k_expf_le88(-INFINITY) == 0.0f, "exp underflow to 0");
    TL_CHECK(isinf(k_expf(100.0f)) && isnan(k_expf(NAN)) && k_expf(0.0f) == 1.0f, "k_expf: inf, nan, exp(0) = 1");
}

// ---- the other families' kernels: (1 + w) RMSNorm, GeGLU, biases ------------------------------------------
static void test_families_kernels(oracle *o, tl_rng *r) {
    char nm[128];
    {   // Gemma's x_hat * (1 + w): weights around 0 (stored as an offset)
        const int64_t R = g_san ? 70 : 200, C = 96;
        const float eps = 1e-6f;
        float *x = randn(r, R * C, 1.5f), *w = randn(r, C, 0.3f), *dout = randn(r, R * C, 1);
        float *out = zeros(R * C), *rs = zeros(R), *outr = zeros(R * C), *rsr = zeros(R);
        rmsnorm_forward_off(out, rs, x, w, 1.0f, R, C, eps);
        rmsnorm_forward_off_ref(outr, rsr, x, w, 1.0f, R, C, eps);
        tl_check_close("rmsnorm (1+w) fwd vs ref", out, outr, R * C, TOL_FWD);
        float *dx0 = randn(r, R * C, 1), *dw0 = randn(r, C, 1);
        float *dx = dup(dx0, R * C), *dw = dup(dw0, C), *dxr = dup(dx0, R * C), *dwr = dup(dw0, C);
        rmsnorm_backward_off(dx, dw, dout, x, w, 1.0f, rs, R, C);
        rmsnorm_backward_off_ref(dxr, dwr, dout, x, w, 1.0f, rsr, R, C);
        tl_check_close("rmsnorm (1+w) dinp (+=) vs ref", dx, dxr, R * C, TOL_GRAD);
        tl_check_close("rmsnorm (1+w) dw (+=) vs ref", dw, dwr, C, TOL_GRAD);
        // w_off 0 is the plain norm, bit for bit
        float *o0 = zeros(R * C), *o1 = zeros(R * C);
        rmsnorm_forward_off(o0, NULL, x, w, 0.0f, R, C, eps);
        rmsnorm_forward(o1, NULL, x, w, R, C, eps);
        TL_CHECK(bit_equal(o0, o1, R * C), "rmsnorm_forward_off(w_off 0) == rmsnorm_forward bitwise");
        float *dxf = zeros(R * C), *dwf = zeros(C);
        rmsnorm_backward_off(dxf, dwf, dout, x, w, 1.0f, rs, R, C);
        or_case(o, "rms1p rmsnorm1p rows=%lld C=%lld eps=%.9g", (long long)R, (long long)C, (double)eps);
        or_f32(o, "rms1p", "inp", x, R * C); or_f32(o, "rms1p", "w", w, C); or_f32(o, "rms1p", "dout", dout, R * C);
        or_expect(o, "rms1p", "out", out, R * C, TOL_FWD);
        or_expect(o, "rms1p", "dinp", dxf, R * C, TOL_GRAD);
        or_expect(o, "rms1p", "dw", dwf, C, TOL_GRAD);
        free(x); free(w); free(dout); free(out); free(rs); free(outr); free(rsr); free(dx0); free(dw0); free(dx); free(dw);
        free(dxr); free(dwr); free(o0); free(o1); free(dxf); free(dwf);
    }
    {   // GeGLU, including the saturated ends
        const int64_t n = 10007;
        float *g = randn(r, n, 3), *u = randn(r, n, 1), *dout = randn(r, n, 1);
        g[0] = -100.0f; g[1] = 100.0f; g[2] = 0.0f; g[3] = -20.0f; g[4] = -4.0f;
        float *out = zeros(n), *want = zeros(n);
        geglu_forward(out, g, u, n);
        geglu_forward_ref(want, g, u, n);
        tl_check_close("geglu fwd vs ref", out, want, n, TOL_FWD);
        float *dg0 = randn(r, n, 1), *du0 = randn(r, n, 1), *dg = dup(dg0, n), *du = dup(du0, n), *dgr = dup(dg0, n), *dur = dup(du0, n);
        geglu_backward(dg, du, dout, g, u, n);
        geglu_backward_ref(dgr, dur, dout, g, u, n);
        tl_check_close("geglu dgate (+=) vs ref", dg, dgr, n, TOL_GRAD);
        tl_check_close("geglu dup (+=) vs ref", du, dur, n, TOL_GRAD);
        float *dgf = zeros(n), *duf = zeros(n);
        geglu_backward(dgf, duf, dout, g, u, n);
        or_case(o, "gg geglu n=%lld", (long long)n);
        or_f32(o, "gg", "gate", g, n); or_f32(o, "gg", "up", u, n); or_f32(o, "gg", "dout", dout, n);
        or_expect(o, "gg", "out", out, n, TOL_FWD);
        or_expect(o, "gg", "dgate", dgf, n, TOL_GRAD);
        or_expect(o, "gg", "dup", duf, n, TOL_GRAD);
        free(g); free(u); free(dout); free(out); free(want); free(dg0); free(du0); free(dg); free(du); free(dgr); free(dur);
        free(dgf); free(duf);
    }
    {   // biases: out += b on every row; db += column sums, the same for 1 and 2 threads
        const int64_t T = 333, OC = 70;
        float *x = randn(r, T * OC, 1), *b = randn(r, OC, 1), *dout = randn(r, T * OC, 1);
        float *out = dup(x, T * OC);
        bias_forward(out, b, T, OC);
        int ok = 1;
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < OC; c++) ok &= out[t * OC + c] == x[t * OC + c] + b[c];
        TL_CHECK(ok, "bias_forward out = x + b (exact)");
        float *db0 = randn(r, OC, 1), *db = dup(db0, OC), *dbr = dup(db0, OC);
        bias_backward(db, dout, T, OC);
        bias_backward_ref(dbr, dout, T, OC);
        tl_check_close("bias db (+=) vs ref", db, dbr, OC, TOL_GRAD);
        float *d1 = zeros(OC), *d2 = zeros(OC);
        int nth = omp_get_max_threads();
        bias_backward(d2, dout, T, OC);
        omp_set_num_threads(1);
        bias_backward(d1, dout, T, OC);
        omp_set_num_threads(nth);
        TL_CHECK(bit_equal(d1, d2, OC), "bias_backward bit-identical for 1 and %d threads", nth);
        or_case(o, "bias bias T=%lld OC=%lld", (long long)T, (long long)OC);
        or_f32(o, "bias", "x", x, T * OC); or_f32(o, "bias", "b", b, OC); or_f32(o, "bias", "dout", dout, T * OC);
        or_expect(o, "bias", "out", out, T * OC, TOL_FWD);
        or_expect(o, "bias", "db", d2, OC, TOL_GRAD);
        free(x); free(b); free(dout); free(out); free(db0); free(db); free(dbr); free(d1); free(d2);
    }
    {   // final-logit soft-capping inside the streamed head (cap 5 squeezes logits of a few units hard)
        const int64_t T = g_san ? 60 : 300, H = 32, V = 4133;
        const float temp = 0.7f, cap = 5.0f;
        float *h = randn(r, T * H, 1), *w = randn(r, V * H, 0.5f), *dlogp = randn(r, T, 1), *dent = randn(r, T, 1);
        int32_t *tg = make_targets(r, T, V);
        float *lp = zeros(T), *en = zeros(T), *ls = zeros(T), *lpr = zeros(T), *enr = zeros(T), *lsr = zeros(T);
        logprob_head_forward_cap(lp, en, ls, h, w, tg, T, H, V, temp, cap);
        logprob_head_forward_cap_ref(lpr, enr, lsr, h, w, tg, T, H, V, temp, cap);
        tl_check_close("head softcap logp vs ref", lp, lpr, T, TOL_FWD);
        tl_check_close("head softcap entropy vs ref", en, enr, T, TOL_FWD);
        tl_check_close("head softcap lse vs ref", ls, lsr, T, TOL_FWD);
        for (int ent = 0; ent <= 1; ent++) {
            float *dh = zeros(T * H), *dw = zeros(V * H), *dhr = zeros(T * H), *dwr = zeros(V * H);
            logprob_head_backward_cap(dh, dw, dlogp, ent ? dent : NULL, ent ? en : NULL, h, w, tg, ls, T, H, V, temp, cap);
            logprob_head_backward_cap_ref(dhr, dwr, dlogp, ent ? dent : NULL, h, w, tg, lsr, T, H, V, temp, cap);
            snprintf(nm, sizeof nm, "head softcap dhidden vs ref (entropy %d)", ent);
            tl_check_close(nm, dh, dhr, T * H, TOL_GRAD);
            snprintf(nm, sizeof nm, "head softcap dw vs ref (entropy %d)", ent);
            tl_check_close(nm, dw, dwr, V * H, TOL_GRAD);
            if (ent) {
                or_case(o, "hcap head T=%lld H=%lld V=%lld temperature=%.9g entropy=1 softcap=%.9g", (long long)T, (long long)H,
                        (long long)V, (double)temp, (double)cap);
                or_f32(o, "hcap", "hidden", h, T * H); or_f32(o, "hcap", "w", w, V * H); or_i32(o, "hcap", "targets", tg, T);
                or_f32(o, "hcap", "dlogp", dlogp, T); or_f32(o, "hcap", "dentropy", dent, T);
                or_expect(o, "hcap", "logp", lp, T, TOL_FWD);
                or_expect(o, "hcap", "entropy", en, T, TOL_FWD);
                or_expect(o, "hcap", "dhidden", dh, T * H, TOL_GRAD);
                or_expect(o, "hcap", "dw", dw, V * H, TOL_GRAD);
            }
            free(dh); free(dw); free(dhr); free(dwr);
        }
        // cap 0 is the plain head, bit for bit
        float *lp0 = zeros(T), *lp1 = zeros(T);
        logprob_head_forward_cap(lp0, NULL, NULL, h, w, tg, T, H, V, temp, 0.0f);
        logprob_head_forward(lp1, NULL, NULL, h, w, tg, T, H, V, temp);
        TL_CHECK(bit_equal(lp0, lp1, T), "logprob_head_forward_cap(cap 0) == logprob_head_forward bitwise");
        free(h); free(w); free(dlogp); free(dent); free(tg); free(lp); free(en); free(ls); free(lpr); free(enr); free(lsr);
        free(lp0); free(lp1);
    }
}

int main(void) {
    const char *san = getenv("RLC_SAN");
    g_san = san && strcmp(san, "1") == 0;
    tl_rng r;
    tl_rng_init(&r, 20261202);
    oracle o;
    or_init(&o);
    double t0 = rlc_now();
    test_kexp();
    test_matmul(&o, &r);
    test_embedding(&o, &r);
    test_rmsnorm_one(&o, &r, "rms_small", 33, 96);
    test_rmsnorm_one(&o, &r, "rms_qk", g_san ? 130 : 300, 128);  // several 64-row dw chunks, the last partial
    test_rope(&o, &r);
    test_swiglu(&o, &r);
    test_head(&o, &r);
    test_families_kernels(&o, &r);
    double t1 = rlc_now();
    or_run(&o);
    printf("kernels: %.1f s in C, %.1f s in the torch reference\n", t1 - t0, rlc_now() - t1);
    return tl_summary();
}
