// test_kernels_fused.c: the fused element-wise kernels (GLU and RMSNorm backward writing their input gradient)
// against their _ref definitions, bitwise (each is the same
// arithmetic per element, in one pass instead of several), and against a double-precision formula.
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "kernels/kernels.h"
#include "testlib.h"

// Bitwise equal (memcmp: the sign of a zero counts too).
static void check_same(const char *what, const float *got, const float *want, int64_t n) {
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (memcmp(&got[i], &want[i], sizeof(float))) bad = i;
    TL_CHECK(bad < 0, "%s: element %lld differs: %.9g vs %.9g", what, (long long)bad, bad >= 0 ? got[bad] : 0.0,
             bad >= 0 ? want[bad] : 0.0);
}

// glu_backward_set vs glu_backward_set_ref (zero, then glu_backward): bitwise, on buffers that held garbage,
// with signed zeros, saturated gates and zero upstream gradients mixed in; vs the double-precision derivative
// at fp32-gradient tolerance (1e-5: one product of a few roundings per element).
static void test_glu_set(tl_rng *r, int64_t n, mlp_act act) {
    const char *name = act == MLP_GELU_TANH ? "geglu" : "swiglu";
    float *g = tl_alloc_normal(r, n, 3), *u = tl_alloc_normal(r, n, 1), *dout = tl_alloc_normal(r, n, 1);
    if (n > 8) {
        g[0] = -100.0f; g[1] = 100.0f; g[2] = 0.0f; g[3] = -0.0f; g[4] = -20.0f;
        dout[5] = 0.0f; dout[6] = -0.0f; u[7] = -0.0f; u[8] = 0.0f;   // products that are zeros of either sign
    }
    float *dg = tl_alloc_normal(r, n, 5), *du = tl_alloc_normal(r, n, 5);   // garbage: the fused kernel writes
    float *dgr = tl_alloc_normal(r, n, 5), *dur = tl_alloc_normal(r, n, 5);
    glu_backward_set(dg, du, dout, g, u, n, act);
    glu_backward_set_ref(dgr, dur, dout, g, u, n, act);
    char what[96];
    snprintf(what, sizeof what, "%s dgate set vs ref n=%lld", name, (long long)n);
    check_same(what, dg, dgr, n);
    snprintf(what, sizeof what, "%s dup set vs ref n=%lld", name, (long long)n);
    check_same(what, du, dur, n);
    float *dge = rlc_alloc((size_t)n * sizeof(float)), *due = rlc_alloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        double x = g[i], f, df;
        if (act == MLP_GELU_TANH) {
            double a = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x), t = tanh(a);
            f = 0.5 * x * (1 + t);
            df = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * sqrt(2.0 / M_PI) * (1 + 3 * 0.044715 * x * x);
        } else {
            double s = 1 / (1 + exp(-x));
            f = x * s;
            df = s * (1 + x * (1 - s));
        }
        dge[i] = (float)((double)dout[i] * u[i] * df);
        due[i] = (float)((double)dout[i] * f);
    }
    snprintf(what, sizeof what, "%s dgate set vs double", name);
    tl_check_close(what, dg, dge, n, 1e-5);
    snprintf(what, sizeof what, "%s dup set vs double", name);
    tl_check_close(what, du, due, n, 1e-5);
    rlc_free(g); rlc_free(u); rlc_free(dout); rlc_free(dg); rlc_free(du); rlc_free(dgr); rlc_free(dur);
    rlc_free(dge); rlc_free(due);
}

// rmsnorm_backward_off_set vs its _ref (zero dinp, then rmsnorm_backward_off): dinp bitwise over garbage, dw (+=)
// bitwise (the same partial sums in the same order); both norms (w_off 0 and 1). Then dinp vs the double-precision
// reference kernel at gradient tolerance (1e-4: a row reduction of C products in fp32).
static void test_rms_set(tl_rng *r, int64_t rows, int64_t C, float w_off) {
    const int64_t n = rows * C;
    float *x = tl_alloc_normal(r, n, 1), *g = tl_alloc_normal(r, n, 1), *w = tl_alloc_normal(r, C, 1);
    if (n > 2) { g[0] = 0.0f; g[1] = -0.0f; }
    float *rstd = rlc_alloc((size_t)rows * sizeof(float)), *y = rlc_alloc((size_t)n * sizeof(float));
    rmsnorm_forward_off(y, rstd, x, w, w_off, rows, C, 1e-6f);
    float *dx = tl_alloc_normal(r, n, 3), *dxr = tl_alloc_normal(r, n, 3), *dxd = rlc_alloc_zero((size_t)n * sizeof(float));
    float *dw = tl_alloc_normal(r, C, 1), *dwr = rlc_alloc((size_t)C * sizeof(float));
    memcpy(dwr, dw, (size_t)C * sizeof(float));
    rmsnorm_backward_off_set(dx, dw, g, x, w, w_off, rstd, rows, C);
    rmsnorm_backward_off_set_ref(dxr, dwr, g, x, w, w_off, rstd, rows, C);
    char what[96];
    snprintf(what, sizeof what, "rmsnorm dinp set vs ref rows=%lld C=%lld off=%g", (long long)rows, (long long)C, w_off);
    check_same(what, dx, dxr, n);
    snprintf(what, sizeof what, "rmsnorm dw set vs ref rows=%lld C=%lld off=%g", (long long)rows, (long long)C, w_off);
    check_same(what, dw, dwr, C);
    rmsnorm_backward_off_ref(dxd, NULL, g, x, w, w_off, rstd, rows, C);
    snprintf(what, sizeof what, "rmsnorm dinp set vs double rows=%lld C=%lld", (long long)rows, (long long)C);
    tl_check_close(what, dx, dxd, n, 1e-4);
    rlc_free(x); rlc_free(g); rlc_free(w); rlc_free(rstd); rlc_free(y); rlc_free(dx); rlc_free(dxr); rlc_free(dxd);
    rlc_free(dw); rlc_free(dwr);
}

int main(void) {
    const int san = getenv("RLC_SAN") != NULL;
    tl_rng r;
    tl_rng_init(&r, 20261207);
    // below and above the kernels' threading threshold, odd sizes for the vector tails
    const int64_t sizes[] = {1, 7, 1003, san ? 20011 : 200003};
    for (int i = 0; i < 4; i++) {
        test_glu_set(&r, sizes[i], MLP_SILU);
        test_glu_set(&r, sizes[i], MLP_GELU_TANH);
    }
    // the decoder's shapes: hidden rows (C 128) and per-head q/k rows (C 32), thread-split and not
    const int64_t rws[] = {1, 65, 3001, san ? 1201 : 24001};
    for (int i = 0; i < 4; i++) {
        test_rms_set(&r, rws[i], 128, 0.0f);
        test_rms_set(&r, rws[i], 32, 1.0f);
    }
    return tl_summary();
}
