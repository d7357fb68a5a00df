// swiglu.c: SwiGLU gate (silu(gate) * up) and the residual add.
#include <math.h>

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

// out (n) = a + b; out may alias a
void residual_forward(float *out, const float *a, const float *b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= KERNELS_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}
