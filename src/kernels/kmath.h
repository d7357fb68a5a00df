// kmath.h: small vectorisable math helpers shared by the kernels (internal to src/kernels/).
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

// a*b + c: one fused multiply-add where the target has FMA (-march=native here), else two roundings.
// The Makefile's -std=c11 implies -ffp-contract=off, so plain a*b+c is never fused implicitly.
#ifdef __FMA__
#define K_FMA(a, b, c) fmaf((a), (b), (c))
#else
#define K_FMA(a, b, c) ((a) * (b) + (c))
#endif

// exp(x) in float, max error about 2 ulp over the normal range, written with plain arithmetic and
// integer bit tricks so that `#pragma omp simd` loops vectorise it (glibc's expf only vectorises
// under -ffast-math). Cody-Waite reduction x = n ln2 + r, a degree-6 polynomial for e^r (Cephes
// coefficients), then scaling by 2^n through the exponent bits. Returns 0 below -87.33654 (where
// the result would be subnormal) and +inf above 88.72283; NaN in gives NaN out.
static inline float k_expf(float x) {
    union { float f; int32_t i; } t, sc;
    float xc = x < -87.33654f ? -87.33654f : x;
    xc = xc > 88.72283f ? 88.72283f : xc;
    t.f = K_FMA(xc, 1.44269504088896341f, 12582912.0f);  // 1.5 * 2^23: rounds to the nearest integer
    float n = t.f - 12582912.0f;
    int32_t ni = t.i - 0x4B400000;
    float r = K_FMA(n, -0.693359375f, xc);
    r = K_FMA(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = K_FMA(p, r, 1.3981999507e-3f);
    p = K_FMA(p, r, 8.3334519073e-3f);
    p = K_FMA(p, r, 4.1665795894e-2f);
    p = K_FMA(p, r, 1.6666665459e-1f);
    p = K_FMA(p, r, 5.0000001201e-1f);
    float y = K_FMA(p * r, r, r) + 1.0f;
    // 2^n for n in [-126, 128]: split n = n1 + n2 so both halves stay normal.
    int32_t n1 = ni >> 1, n2 = ni - n1;
    sc.i = (int32_t)((uint32_t)(n1 + 127) << 23);  // unsigned shift: defined for NaN garbage too
    y = y * sc.f;
    sc.i = (int32_t)((uint32_t)(n2 + 127) << 23);
    y = y * sc.f;
    y = x < -87.33654f ? 0.0f : y;
    y = x > 88.72283f ? INFINITY : y;
    return x != x ? x : y;
}

// exp(x) for x <= 88 that is finite or -inf (no NaN or overflow handling): the hot loops of the
// log-prob head, where x = z - max or z - lse <= ~0. Same reduction and polynomial as k_expf, one
// scaling step (n <= 127), 0 below -87.33654 (where e^x would be subnormal).
static inline float k_expf_le88(float x) {
    union { float f; int32_t i; } t, sc;
    float xc = x < -87.33654f ? -87.33654f : x;
    t.f = K_FMA(xc, 1.44269504088896341f, 12582912.0f);
    float n = t.f - 12582912.0f;
    int32_t ni = t.i - 0x4B400000;
    float r = K_FMA(n, -0.693359375f, xc);
    r = K_FMA(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = K_FMA(p, r, 1.3981999507e-3f);
    p = K_FMA(p, r, 8.3334519073e-3f);
    p = K_FMA(p, r, 4.1665795894e-2f);
    p = K_FMA(p, r, 1.6666665459e-1f);
    p = K_FMA(p, r, 5.0000001201e-1f);
    float y = K_FMA(p * r, r, r) + 1.0f;
    sc.i = (int32_t)((uint32_t)(ni + 127) << 23);
    y = y * sc.f;
    return x < -87.33654f ? 0.0f : y;
}
