// rowgemm.h: the rollout engine's dense products, out (T, OC) = x (T, C) @ w^T with w (OC, C) as stored
// (HF [out, in], no packing, so the trainer's fp32 weights are read in place and weight sync is free).
//
// Batch invariance: every output element is one fixed sum: FMA chains acc = fma(w[o, c], x[t, c], acc) from 0
// over consecutive blocks of 128 columns, the block sums added in order (then out + sum when accumulating).
// It does not depend on T, on which other rows are in the batch, on the tile that computes it, nor on the
// thread count. So a sequence's logits are bitwise the same whether
// it is decoded alone or among 63 others, and a prefill and a decode of the same token give the same bits.
// (OpenBLAS sgemm gives no such guarantee.)
//
// Speed: a thread transposes KC columns of a slab of 32 weight rows into an L1 panel and runs a register
// tile of 12 tokens x 32 rows over it (AVX-512: one broadcast, two FMAs per token and column); weights are
// read from memory once per 96 tokens, and the in-register transpose costs 1/4 shuffle per weight, well
// under memory bandwidth at batch 1.
#pragma once
#include <stdint.h>

// out (T, ldo) [columns 0..OC-1] (= or +=, accumulate 0/1) x (T, C) @ w^T, w (OC, C) fp32.
void rowgemm_forward(float *out, int64_t ldo, const float *x, const float *w, int64_t T, int64_t C, int64_t OC,
                     int accumulate);
// Several products of the same x (T, C) in one parallel region (q/k/v, gate/up): out_j (T, ldo_j) [columns
// 0..OC_j-1] (= or +=) x @ w_j^T, w_j (OC_j, C). Each output's bits are those of rowgemm_forward alone.
#define ROWGEMM_MAX_OUTS 4
typedef struct {
    float *out;           // (T, ldo)
    int64_t ldo;
    const float *w;       // (OC, C) fp32, for rowgemm_forward_multi
    const uint16_t *w16;  // (OC, C) bf16, for rowgemm_forward_multi_bf16
    int64_t OC;
} rowgemm_out;
void rowgemm_forward_multi(const rowgemm_out *outs, int n, const float *x, int64_t T, int64_t C, int accumulate);
void rowgemm_forward_multi_bf16(const rowgemm_out *outs, int n, const float *x, int64_t T, int64_t C, int accumulate);
// Same, weights stored as bf16 (OC, C) (upper 16 bits of fp32); activations and sums stay fp32.
void rowgemm_forward_bf16(float *out, int64_t ldo, const float *x, const uint16_t *w, int64_t T, int64_t C, int64_t OC,
                          int accumulate);
// The same sum in plain scalar C (fmaf): the arithmetic definition of rowgemm_forward. Tests only.
void rowgemm_forward_scalar(float *out, int64_t ldo, const float *x, const float *w, int64_t T, int64_t C, int64_t OC,
                            int accumulate);
// Reference: double-precision dot products. Tests only.
void rowgemm_forward_ref(float *out, int64_t ldo, const float *x, const float *w, int64_t T, int64_t C, int64_t OC,
                         int accumulate);

// fp32 -> bf16 round-to-nearest-even (NaN kept quiet), n elements; parallel.
void rowgemm_to_bf16(uint16_t *dst, const float *src, int64_t n);
