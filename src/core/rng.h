// rng.h: a small counter-based random generator (Philox4x32-10, Salmon et al. 2011, as in
// Random123 / cuRAND / torch CUDA), so that any draw is a pure function of (key, counter) and a GPU
// backend or another thread can reproduce a stream exactly.
//
// A stream is named by (seed, a, b): key = f(seed, a), counter high 64 bits = b, counter low 64 bits =
// the draw index. For a fixed seed, distinct (a, b) give disjoint streams. Typical use: one stream per
// (step, sequence) or per (tensor, chunk), so results do not depend on the thread count.
// Word k of a stream is word k%4 of block k/4 = philox((k/4 as ctr[0..1], b), key).
// State lives in the struct (no process globals); copying the struct forks the stream.
#pragma once
#include <stdint.h>

#define RNG_BUF_WORDS 32   // blocks are computed 8 at a time (vectorised); the stream is the same as one at a time

typedef struct {
    uint32_t key[2];      // Philox key (from seed and a)
    uint32_t ctr[4];      // ctr[0..1] = block counter (low 64 bits), ctr[2..3] = b
    uint32_t buf[RNG_BUF_WORDS]; // outputs of the next RNG_BUF_WORDS/4 blocks, in counter order
    int pos;              // next unused word of buf (RNG_BUF_WORDS = empty)
} rng;

// The raw Philox4x32-10 bijection: out = philox(ctr, key).
void rng_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

void rng_init(rng *r, uint64_t seed);                          // == rng_stream(r, seed, 0, 0)
void rng_stream(rng *r, uint64_t seed, uint64_t a, uint64_t b); // independent stream (seed, a, b)
uint32_t rng_next_u32(rng *r);
uint64_t rng_next_u64(rng *r);
double rng_uniform(rng *r);                 // [0, 1), 53 random bits
float rng_uniformf(rng *r);                 // [0, 1), 24 random bits
uint64_t rng_below(rng *r, uint64_t n);     // uniform integer in [0, n), unbiased; n >= 1
double rng_normal(rng *r);                  // standard normal (256-layer ziggurat on 64-bit draws)
// x[i] = mean + std * rng_normal(r), for i < n (the same draws as n calls).
void rng_fill_normal(rng *r, float *x, int64_t n, float mean, float std);
