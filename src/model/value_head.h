// value_head.h: the critic's scalar head (transformers' *ForTokenClassification with num_labels = 1, as verl's
// value model; spec verl-ppo.md §1.2): value[t] = w . h[t] + b over the decoder's final-normed hidden states h,
// Linear(hidden, 1) with a bias. Saved as score.weight (1, H) and score.bias (1).
#pragma once
#include <stdint.h>

typedef struct {
    int64_t H;
    float *data;   // (H+1) weight (H) then bias (1): one flat buffer for AdamW and clipping
} value_head;

// A fresh head as transformers initialises one: weight ~ N(0, init_std) (initializer_range) from rlc's seeded RNG,
// bias 0.
void value_head_init(value_head *vh, int64_t H, double init_std, uint64_t seed);
void value_head_free(value_head *vh);

// values (T) = hidden (T, H) . wb[0..H) + wb[H]
void value_head_forward(float *values, const float *hidden, const float *wb, int64_t T, int64_t H);
void value_head_forward_ref(float *values, const float *hidden, const float *wb, int64_t T, int64_t H);
// Accumulates (+=): dhidden (T, H) += dvalues[t] * w; dwb[0..H) += sum_t dvalues[t] * hidden[t]; dwb[H] += sum_t
// dvalues[t]. dvalues (T), hidden (T, H).
void value_head_backward(float *dhidden, float *dwb, const float *dvalues, const float *hidden, const float *wb, int64_t T,
                         int64_t H);
void value_head_backward_ref(float *dhidden, float *dwb, const float *dvalues, const float *hidden, const float *wb,
                             int64_t T, int64_t H);
