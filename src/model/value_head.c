// value_head.c: the critic's Linear(hidden, 1) head, forward and backward (see value_head.h). Fast paths
// parallelise over rows (forward, dhidden) or columns (dw), each a fixed serial sum, so results do not depend on
// the thread count.
#include "model/value_head.h"

#include <string.h>

#include "core/common.h"
#include "core/rng.h"

void value_head_init(value_head *vh, int64_t H, double init_std, uint64_t seed) {
    vh->H = H;
    vh->data = rlc_calloc((size_t)(H + 1), sizeof(float));
    rng r;
    rng_stream(&r, seed, 0x53434f5245ull /* "SCORE" */, 0);
    rng_fill_normal(&r, vh->data, H, 0.0f, (float)init_std);
}

void value_head_free(value_head *vh) {
    free(vh->data);
    memset(vh, 0, sizeof *vh);
}

void value_head_forward_ref(float *values, const float *hidden, const float *wb, int64_t T, int64_t H) {
    for (int64_t t = 0; t < T; t++) {
        float s = 0;
        for (int64_t j = 0; j < H; j++) s += hidden[t * H + j] * wb[j];
        values[t] = s + wb[H];
    }
}

void value_head_forward(float *values, const float *hidden, const float *wb, int64_t T, int64_t H) {
#pragma omp parallel for schedule(static) if (T * H > (1 << 15))
    for (int64_t t = 0; t < T; t++) {
        const float *h = hidden + t * H;
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < H; j++) s += h[j] * wb[j];
        values[t] = s + wb[H];
    }
}

void value_head_backward_ref(float *dhidden, float *dwb, const float *dvalues, const float *hidden, const float *wb,
                             int64_t T, int64_t H) {
    for (int64_t t = 0; t < T; t++) {
        for (int64_t j = 0; j < H; j++) {
            dhidden[t * H + j] += dvalues[t] * wb[j];
            dwb[j] += dvalues[t] * hidden[t * H + j];
        }
        dwb[H] += dvalues[t];
    }
}

void value_head_backward(float *dhidden, float *dwb, const float *dvalues, const float *hidden, const float *wb, int64_t T,
                         int64_t H) {
#pragma omp parallel for schedule(static) if (T * H > (1 << 15))
    for (int64_t t = 0; t < T; t++) {
        const float dv = dvalues[t];
        float *dh = dhidden + t * H;
        for (int64_t j = 0; j < H; j++) dh[j] += dv * wb[j];
    }
#pragma omp parallel for schedule(static) if (T * H > (1 << 15))
    for (int64_t j = 0; j < H; j++) {
        float s = 0;
        for (int64_t t = 0; t < T; t++) s += dvalues[t] * hidden[t * H + j];
        dwb[j] += s;
    }
    float sb = 0;
    for (int64_t t = 0; t < T; t++) sb += dvalues[t];
    dwb[H] += sb;
}
