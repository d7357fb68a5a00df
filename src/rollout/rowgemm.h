// rowgemm.h: the rollout engine's dense products, out (T, OC) = x (T, C) @ w^T with w (OC, C) as stored
// (HF [out, in], no packing, so the trainer's fp32 weights are read in place and weight sync is free).
//
// Batch invariance: every output element is one fixed sum: 16 lanes, lane l an FMA chain from 0 over the
// columns c = l, l+16, ... (zero terms pad C to a multiple of 16), then the lanes added as the tree
// (l, l+8), (l, l+4), (l, l+2), (l, l+1) (then out + sum when accumulating). It does not depend on T, on
// which other rows are in the batch, on the tile or column block that computes it, nor on the thread count.
// So a sequence's logits are bitwise the same whether it is decoded alone or among 63 others, and a prefill
// and a decode of the same token give the same bits. (OpenBLAS sgemm gives no such guarantee.)
//
// Speed: one AVX-512 register holds the 16 lanes of one (token, row) pair, so weight rows are read in memory
// order with no packing. T <= 2: two rows half a slab apart at a time (each thread streams its weights as two
// sequential streams, at about 0.9 of the machine's read bandwidth). T > 2: 4-row x 6-token register tiles
// over 1024-column blocks (24 FMAs per 10 loads, the token tile held in L1; 60-70% of the FMA peak of two Zen 5
// cores, 1.7-1.9x OpenBLAS sgemm on the same product).
#pragma once
#include <stdint.h>

// out (T, ldo) [columns 0..OC-1] (= or +=, accumulate 0/1) x (T, C) @ w^T, w (OC, C) fp32.
void rowgemm_forward(float *out, int64_t ldo, const float *x, const float *w, int64_t T, int64_t C, int64_t OC,
                     int accumulate);
// Several products of the same x (T, C) in one parallel region (q/k/v, gate/up): out_j (T, ldo_j) [columns
// 0..OC_j-1] (= or +=) x @ w_j^T + bias_j, w_j (OC_j, C). Each output's bits are those of rowgemm_forward alone.
// A bias is added to the product's sum before it is stored or accumulated, out = out + (sum + bias[o]), the
// order of torch's x + linear(h) in fp32.
//
// An output may carry a LoRA side path (lora_a != NULL): after its product is stored or accumulated,
// out += (s·(x·Aᵀ))·Bᵀ, A (r, C), B (OC, r) fp32, both products rowgemm sums (u = x·Aᵀ a sum over C, rounded,
// times s, rounded; then a sum over r added to out). So the result is bitwise that of the separate calls
//   rowgemm_forward(out, x, w); rowgemm_forward(u, x, A); u *= s; rowgemm_forward(out, u, B, accumulate = 1)
// (rowgemm_forward_lora_scalar), and rows stay batch invariant. The rank-r u (T, r) of every such output is
// computed first, split over the threads, then each slab adds its rows' side term right after its product,
// all in the one parallel region of the base product.
#define ROWGEMM_MAX_OUTS 4
typedef struct {
    float *out;           // (T, ldo)
    int64_t ldo;
    const float *w;       // (OC, C) fp32, for rowgemm_forward_multi
    const uint16_t *w16;  // (OC, C) bf16, for rowgemm_forward_multi_bf16
    const float *bias;    // (OC) fp32, or NULL: none
    int64_t OC;
    const float *lora_a;  // (lora_r, C) fp32 LoRA A, or NULL: no side path
    const float *lora_b;  // (OC, lora_r) fp32 LoRA B
    int64_t lora_r;       // rank r >= 1
    float lora_s;         // scale s
} rowgemm_out;
void rowgemm_forward_multi(const rowgemm_out *outs, int n, const float *x, int64_t T, int64_t C, int accumulate);
void rowgemm_forward_multi_bf16(const rowgemm_out *outs, int n, const float *x, int64_t T, int64_t C, int accumulate);
// Same, weights stored as bf16 (OC, C) (upper 16 bits of fp32); activations and sums stay fp32.
void rowgemm_forward_bf16(float *out, int64_t ldo, const float *x, const uint16_t *w, int64_t T, int64_t C, int64_t OC,
                          int accumulate);
// The same sum in plain scalar C (fmaf), bias (OC) or NULL: the arithmetic definition of rowgemm_forward and of
// a rowgemm_out with a bias. Tests only.
void rowgemm_forward_scalar(float *out, int64_t ldo, const float *x, const float *w, const float *bias, int64_t T,
                            int64_t C, int64_t OC, int accumulate);
// Reference: double-precision dot products plus bias (or NULL). Tests only.
void rowgemm_forward_ref(float *out, int64_t ldo, const float *x, const float *w, const float *bias, int64_t T,
                         int64_t C, int64_t OC, int accumulate);
// An output with a LoRA side path (o->lora_a set; o->w fp32), as its arithmetic is defined: the scalar product,
// then u (T, r) = x·Aᵀ (scalar), u *= s, out += u·Bᵀ (scalar). Tests only.
void rowgemm_forward_lora_scalar(const rowgemm_out *o, const float *x, int64_t T, int64_t C, int accumulate);
// Reference in double: out (=, +=) x·wᵀ + bias + s·(x·Aᵀ)·Bᵀ, rounded once. Tests only.
void rowgemm_forward_lora_ref(const rowgemm_out *o, const float *x, int64_t T, int64_t C, int accumulate);

// The kernel this build runs: "avx512", "avx2" (x86-64-v3 without AVX-512) or "scalar" (the definition above).
const char *rowgemm_isa(void);

// fp32 -> bf16 round-to-nearest-even (NaN kept quiet), n elements; parallel.
void rowgemm_to_bf16(uint16_t *dst, const float *src, int64_t n);
