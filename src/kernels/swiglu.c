// swiglu.c: the gated MLP activations, SwiGLU (silu(gate) * up) and GeGLU (gelu_tanh(gate) * up, Gemma), and
// the residual add.
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "kernels/kernels.h"
#include "kernels/kmath.h"

// out (n) = silu(gate) * up, silu(g) = g / (1 + exp(-g)) (torch's formula)
void swiglu_forward(float *out, const float *gate, const float *up, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= KERNELS_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = (g / (1.0f + k_expf(-g))) * up[i];
    }
}

// dgate (n) += dout * up * sig * (1 + g * (1 - sig));  dup (n) += dout * silu(g)
void swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        float sig = 1.0f / (1.0f + k_expf(-g));
        if (dgate) dgate[i] += dout[i] * up[i] * (sig * (1.0f + g * (1.0f - sig)));
        if (dup) dup[i] += dout[i] * (g * sig);
    }
}

// swiglu_backward into zeroed dgate, dup (both given) without the zeroing pass: each element is written as
// 0 + its term, the very operation the accumulate does on a zeroed buffer (0 + -0 is +0, so the sign of a zero
// matches too). One pass over five streams instead of two zeroing passes and one over seven.
static void swiglu_backward_set(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= KERNELS_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        float sig = 1.0f / (1.0f + k_expf(-g));
        dgate[i] = 0.0f + dout[i] * up[i] * (sig * (1.0f + g * (1.0f - sig)));
        dup[i] = 0.0f + dout[i] * (g * sig);
    }
}

// out (n) = a + b; out may alias a
void residual_forward(float *out, const float *a, const float *b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= KERNELS_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

// gelu_tanh(g) = 0.5 g (1 + tanh(a)), a = sqrt(2/pi) (g + 0.044715 g^3), written as g * sigmoid(2a): the same
// value without the cancellation of 1 + tanh(a) for negative g.
#define GELU_K0 0.7978845608028654f   // sqrt(2/pi)
#define GELU_K1 0.044715f

// out (n) = gelu_tanh(gate) * up
void geglu_forward(float *out, const float *gate, const float *up, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= KERNELS_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        float a2 = 2.0f * GELU_K0 * (g + GELU_K1 * g * g * g);
        out[i] = (g / (1.0f + k_expf(-a2))) * up[i];
    }
}

// d gelu_tanh / dg = s + g * 2 s (1 - s) * a'(g), s = sigmoid(2a), a' = sqrt(2/pi) (1 + 3 * 0.044715 g^2)
// dgate (n) += dout * up * gelu'(g);  dup (n) += dout * gelu(g)
void geglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        float a2 = 2.0f * GELU_K0 * (g + GELU_K1 * g * g * g);
        float s = 1.0f / (1.0f + k_expf(-a2));
        float da = GELU_K0 * (1.0f + 3.0f * GELU_K1 * g * g);
        if (dgate) dgate[i] += dout[i] * up[i] * (s + g * (2.0f * s * (1.0f - s)) * da);
        if (dup) dup[i] += dout[i] * (g * s);
    }
}

// geglu_backward into zeroed dgate, dup without the zeroing pass (as swiglu_backward_set).
static void geglu_backward_set(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= KERNELS_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        float a2 = 2.0f * GELU_K0 * (g + GELU_K1 * g * g * g);
        float s = 1.0f / (1.0f + k_expf(-a2));
        float da = GELU_K0 * (1.0f + 3.0f * GELU_K1 * g * g);
        dgate[i] = 0.0f + dout[i] * up[i] * (s + g * (2.0f * s * (1.0f - s)) * da);
        dup[i] = 0.0f + dout[i] * (g * s);
    }
}

// Double-precision definitions, with tanh itself (tests only).
void geglu_forward_ref(float *out, const float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double g = gate[i], a = sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g);
        out[i] = (float)(0.5 * g * (1.0 + tanh(a)) * (double)up[i]);
    }
}

void geglu_backward_ref(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double g = gate[i], a = sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g), t = tanh(a);
        double dgelu = 0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * sqrt(2.0 / M_PI) * (1.0 + 3.0 * 0.044715 * g * g);
        if (dgate) dgate[i] += (float)((double)dout[i] * (double)up[i] * dgelu);
        if (dup) dup[i] += (float)((double)dout[i] * 0.5 * g * (1.0 + t));
    }
}

void swiglu_forward_ref(float *out, const float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double g = gate[i];
        out[i] = (float)(g / (1.0 + exp(-g)) * (double)up[i]);
    }
}

// The gated activation of the architecture: act (n) = f(gate) * up.
void glu_forward(float *out, const float *gate, const float *up, int64_t n, mlp_act act) {
    if (act == MLP_GELU_TANH) geglu_forward(out, gate, up, n);
    else swiglu_forward(out, gate, up, n);
}
void glu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n, mlp_act act) {
    if (act == MLP_GELU_TANH) geglu_backward(dgate, dup, dout, gate, up, n);
    else swiglu_backward(dgate, dup, dout, gate, up, n);
}
// dgate, dup (n) = the gradients (written): bitwise glu_backward_set_ref, one pass instead of three.
void glu_backward_set(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n, mlp_act act) {
    CHECK(dgate && dup, "glu_backward_set needs both outputs");
    if (act == MLP_GELU_TANH) geglu_backward_set(dgate, dup, dout, gate, up, n);
    else swiglu_backward_set(dgate, dup, dout, gate, up, n);
}
// The definition: zero both, then accumulate.
void glu_backward_set_ref(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n,
                          mlp_act act) {
    memset(dgate, 0, (size_t)n * sizeof(float));
    memset(dup, 0, (size_t)n * sizeof(float));
    glu_backward(dgate, dup, dout, gate, up, n, act);
}
