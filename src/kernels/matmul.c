// matmul.c: linear layers through the backend sgemm seam, plus a plain double-accumulating reference.
#include <omp.h>

#include "backend/backend.h"
#include "core/common.h"
#include "kernels/kernels.h"

// out (T, OC) = inp (T, C) @ w^T, w (OC, C)
void matmul_forward(float *out, const float *inp, const float *w, int64_t T, int64_t C, int64_t OC) {
    CHECK(T >= 0 && C > 0 && OC > 0, "matmul_forward: T=%lld C=%lld OC=%lld", (long long)T, (long long)C, (long long)OC);
    backend_sgemm(0, 1, T, OC, C, 1.0f, inp, C, w, C, 0.0f, out, OC);
}

void matmul_forward_ref(float *out, const float *inp, const float *w, int64_t T, int64_t C, int64_t OC) {
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < OC; o++) {
            double acc = 0;
            for (int64_t c = 0; c < C; c++) acc += (double)inp[t * C + c] * (double)w[o * C + c];
            out[t * OC + o] = (float)acc;
        }
}

// dinp (T, C) += dout (T, OC) @ w (OC, C);  dw (OC, C) += dout^T @ inp (T, C)
void matmul_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                     int64_t T, int64_t C, int64_t OC) {
    if (dinp) backend_sgemm(0, 0, T, C, OC, 1.0f, dout, OC, w, C, 1.0f, dinp, C);
    if (dw && T > 0) backend_sgemm(1, 0, OC, C, T, 1.0f, dout, OC, inp, C, 1.0f, dw, C);
}

void matmul_backward_ref(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                         int64_t T, int64_t C, int64_t OC) {
#pragma omp parallel
    {
        double *acc = rlc_malloc((size_t)C * sizeof(double));  // (C) one output row in double
        if (dinp) {
#pragma omp for schedule(static)
            for (int64_t t = 0; t < T; t++) {
                for (int64_t c = 0; c < C; c++) acc[c] = 0;
                for (int64_t o = 0; o < OC; o++) {
                    double d = dout[t * OC + o];
                    for (int64_t c = 0; c < C; c++) acc[c] += d * (double)w[o * C + c];
                }
                for (int64_t c = 0; c < C; c++) dinp[t * C + c] += (float)acc[c];
            }
        }
        if (dw) {
#pragma omp for schedule(static)
            for (int64_t o = 0; o < OC; o++) {
                for (int64_t c = 0; c < C; c++) acc[c] = 0;
                for (int64_t t = 0; t < T; t++) {
                    double d = dout[t * OC + o];
                    for (int64_t c = 0; c < C; c++) acc[c] += d * (double)inp[t * C + c];
                }
                for (int64_t c = 0; c < C; c++) dw[o * C + c] += (float)acc[c];
            }
        }
        free(acc);
    }
}

// out (T, OC) += b (OC) on every row
void bias_forward(float *out, const float *b, int64_t T, int64_t OC) {
#pragma omp parallel for schedule(static) if (T * OC >= KERNELS_PAR_MIN)
    for (int64_t t = 0; t < T; t++) {
        float *o = out + t * OC;
#pragma omp simd
        for (int64_t c = 0; c < OC; c++) o[c] += b[c];
    }
}

// Rows per partial sum of the bias gradient: partials over fixed row chunks, summed in chunk order, so db does
// not depend on the thread count.
#define BIAS_ROW_CHUNK 64

// db (OC) += column sums of dout (T, OC)
void bias_backward(float *db, const float *dout, int64_t T, int64_t OC) {
    const int64_t nchunk = (T + BIAS_ROW_CHUNK - 1) / BIAS_ROW_CHUNK;
    if (nchunk == 0) return;
    float *part = rlc_alloc_zero((size_t)nchunk * (size_t)OC * sizeof(float));   // (nchunk, OC)
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < nchunk; k++) {
        const int64_t r1 = (k + 1) * BIAS_ROW_CHUNK < T ? (k + 1) * BIAS_ROW_CHUNK : T;
        float *pk = part + k * OC;
        for (int64_t t = k * BIAS_ROW_CHUNK; t < r1; t++) {
            const float *g = dout + t * OC;
#pragma omp simd
            for (int64_t c = 0; c < OC; c++) pk[c] += g[c];
        }
    }
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < OC; c++) {
        float s = 0.0f;
        for (int64_t k = 0; k < nchunk; k++) s += part[k * OC + c];
        db[c] += s;
    }
    rlc_free(part);
}

void bias_backward_ref(float *db, const float *dout, int64_t T, int64_t OC) {
    for (int64_t c = 0; c < OC; c++) {
        double s = 0;
        for (int64_t t = 0; t < T; t++) s += dout[t * OC + c];
        db[c] += (float)s;
    }
}
