// embedding.c: token embedding lookup and its deterministic scatter-add backward.
#include "core/common.h"
#include "kernels/kernels.h"

// out (T, H) = wte (V, H) [tokens (T)]
void embedding_forward(float *out, const int32_t *tokens, const float *wte, int64_t T, int64_t H) {
#pragma omp parallel for schedule(static) if (T * H >= KERNELS_PAR_MIN)
    for (int64_t t = 0; t < T; t++) {
        CHECK(tokens[t] >= 0, "embedding_forward: token %lld has negative id %d", (long long)t, (int)tokens[t]);
        memcpy(out + t * H, wte + (int64_t)tokens[t] * H, (size_t)H * sizeof(float));
    }
}

// dwte (V, H) += scatter of dout (T, H) rows by tokens (T).
// Parallel over fixed blocks of H columns; every element accumulates its rows in token order, so the
// result is bit-identical for any thread count and needs no atomics.
#define EMB_COL_BLOCK 64
void embedding_backward(float *dwte, const float *dout, const int32_t *tokens, int64_t T, int64_t H) {
    for (int64_t t = 0; t < T; t++)
        CHECK(tokens[t] >= 0, "embedding_backward: token %lld has negative id %d", (long long)t, (int)tokens[t]);
    int64_t nblk = (H + EMB_COL_BLOCK - 1) / EMB_COL_BLOCK;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nblk; b++) {
        int64_t c0 = b * EMB_COL_BLOCK, c1 = c0 + EMB_COL_BLOCK < H ? c0 + EMB_COL_BLOCK : H;
        for (int64_t t = 0; t < T; t++) {
            float *dst = dwte + (int64_t)tokens[t] * H;
            const float *src = dout + t * H;
#pragma omp simd
            for (int64_t c = c0; c < c1; c++) dst[c] += src[c];
        }
    }
}
