// rmsnorm.c: RMSNorm over rows (spec 1.2, fp32): out = (w_off + w) * (x * rstd), rstd = 1/sqrt(mean(x^2) + eps).
// w_off is 0 (Qwen, Llama: x_hat * w) or 1 (Gemma: x_hat * (1 + w), the weight stored as an offset). In fp32
// "cast, then multiply" (Llama) and "multiply, then cast" (Gemma) are the same arithmetic; (0 + w) is w exactly.
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "kernels/kernels.h"

// out (rows, C), rstd (rows) = RMSNorm(inp (rows, C)) * (w_off + w (C))
void rmsnorm_forward_off(float *out, float *rstd, const float *inp, const float *w, float w_off, int64_t rows, int64_t C,
                         float eps) {
    CHECK(C > 0 && rows >= 0, "rmsnorm_forward: rows=%lld C=%lld", (long long)rows, (long long)C);
#pragma omp parallel for schedule(static) if (rows * C >= KERNELS_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *x = inp + r * C;
        float *o = out + r * C;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int64_t c = 0; c < C; c++) ss += x[c] * x[c];
        float rs = 1.0f / sqrtf(ss / (float)C + eps);
#pragma omp simd
        for (int64_t c = 0; c < C; c++) o[c] = (w_off + w[c]) * (x[c] * rs);
        if (rstd) rstd[r] = rs;
    }
}

void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, int64_t rows, int64_t C, float eps) {
    rmsnorm_forward_off(out, rstd, inp, w, 0.0f, rows, C, eps);
}

void rmsnorm_forward_ref(float *out, float *rstd, const float *inp, const float *w, int64_t rows, int64_t C, float eps) {
    rmsnorm_forward_off_ref(out, rstd, inp, w, 0.0f, rows, C, eps);
}

void rmsnorm_forward_off_ref(float *out, float *rstd, const float *inp, const float *w, float w_off, int64_t rows,
                             int64_t C, float eps) {
    for (int64_t r = 0; r < rows; r++) {
        const float *x = inp + r * C;
        double ss = 0;
        for (int64_t c = 0; c < C; c++) ss += (double)x[c] * (double)x[c];
        double rs = 1.0 / sqrt(ss / (double)C + (double)eps);
        for (int64_t c = 0; c < C; c++) out[r * C + c] = (float)(((double)w_off + (double)w[c]) * ((double)x[c] * rs));
        if (rstd) rstd[r] = (float)rs;
    }
}

// Rows per dw partial. Partials are per fixed row chunk and summed in chunk order, so dw does not
// depend on the thread count.
#define RMS_ROW_CHUNK 64

// With xh = x*rstd and g = dout:  dinp += rstd * (w*g - xh * mean(w*g*xh));  dw += sum_rows g * xh.
// set: dinp is written as 0 + its term instead (bitwise the accumulate into a zeroed dinp, without the zeroing pass).
static void rms_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w, float w_off,
                         const float *rstd, int64_t rows, int64_t C, int set) {
    int64_t nchunk = (rows + RMS_ROW_CHUNK - 1) / RMS_ROW_CHUNK;
    float *part = dw && nchunk ? rlc_alloc_zero((size_t)nchunk * (size_t)C * sizeof(float)) : NULL;  // (nchunk, C)
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < nchunk; k++) {
        int64_t r0 = k * RMS_ROW_CHUNK, r1 = r0 + RMS_ROW_CHUNK < rows ? r0 + RMS_ROW_CHUNK : rows;
        float *pk = part ? part + k * C : NULL;
        for (int64_t r = r0; r < r1; r++) {
            const float *x = inp + r * C, *g = dout + r * C;
            float rs = rstd[r];
            if (dinp) {
                float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                for (int64_t c = 0; c < C; c++) dot += (w_off + w[c]) * g[c] * (x[c] * rs);
                float m = dot / (float)C;
                float *dx = dinp + r * C;
                if (set) {
#pragma omp simd
                    for (int64_t c = 0; c < C; c++) dx[c] = 0.0f + rs * ((w_off + w[c]) * g[c] - (x[c] * rs) * m);
                } else {
#pragma omp simd
                    for (int64_t c = 0; c < C; c++) dx[c] += rs * ((w_off + w[c]) * g[c] - (x[c] * rs) * m);
                }
            }
            if (pk) {
#pragma omp simd
                for (int64_t c = 0; c < C; c++) pk[c] += g[c] * (x[c] * rs);
            }
        }
    }
    if (part) {
#pragma omp parallel for schedule(static)
        for (int64_t c = 0; c < C; c++) {
            float s = 0.0f;
            for (int64_t k = 0; k < nchunk; k++) s += part[k * C + c];
            dw[c] += s;
        }
        rlc_free(part);
    }
}

void rmsnorm_backward_off(float *dinp, float *dw, const float *dout, const float *inp, const float *w, float w_off,
                          const float *rstd, int64_t rows, int64_t C) {
    rms_backward(dinp, dw, dout, inp, w, w_off, rstd, rows, C, 0);
}

void rmsnorm_backward_off_set(float *dinp, float *dw, const float *dout, const float *inp, const float *w, float w_off,
                              const float *rstd, int64_t rows, int64_t C) {
    CHECK(dinp, "rmsnorm_backward_off_set needs dinp");
    rms_backward(dinp, dw, dout, inp, w, w_off, rstd, rows, C, 1);
}

// The definition of the _set form: zero dinp, then accumulate.
void rmsnorm_backward_off_set_ref(float *dinp, float *dw, const float *dout, const float *inp, const float *w, float w_off,
                                  const float *rstd, int64_t rows, int64_t C) {
    memset(dinp, 0, (size_t)(rows * C) * sizeof(float));
    rmsnorm_backward_off(dinp, dw, dout, inp, w, w_off, rstd, rows, C);
}

void rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                      const float *rstd, int64_t rows, int64_t C) {
    rmsnorm_backward_off(dinp, dw, dout, inp, w, 0.0f, rstd, rows, C);
}

void rmsnorm_backward_ref(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                          const float *rstd, int64_t rows, int64_t C) {
    rmsnorm_backward_off_ref(dinp, dw, dout, inp, w, 0.0f, rstd, rows, C);
}

void rmsnorm_backward_off_ref(float *dinp, float *dw, const float *dout, const float *inp, const float *w, float w_off,
                              const float *rstd, int64_t rows, int64_t C) {
    double *dwacc = dw ? rlc_calloc((size_t)C, sizeof(double)) : NULL;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = inp + r * C, *g = dout + r * C;
        double rs = rstd[r], dot = 0;
        for (int64_t c = 0; c < C; c++) dot += ((double)w_off + w[c]) * g[c] * x[c] * rs;
        for (int64_t c = 0; c < C; c++) {
            double xh = (double)x[c] * rs;
            if (dinp) dinp[r * C + c] += (float)(rs * (((double)w_off + w[c]) * g[c] - xh * dot / (double)C));
            if (dwacc) dwacc[c] += (double)g[c] * xh;
        }
    }
    if (dwacc) {
        for (int64_t c = 0; c < C; c++) dw[c] += (float)dwacc[c];
        free(dwacc);
    }
}
