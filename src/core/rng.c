// rng.c: Philox4x32-10 counter-based generator with uniform and normal draws.
#include "core/rng.h"

#include "core/rng_ziggurat.h"

#include <math.h>
#include <string.h>

#define PHILOX_M0 0xD2511F53ull
#define PHILOX_M1 0xCD9E8D57ull
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void rng_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

// SplitMix64 finaliser: a bijection on 64-bit words, used only to spread (seed, a) into the key.
static uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void rng_stream(rng *r, uint64_t seed, uint64_t a, uint64_t b) {
    memset(r, 0, sizeof *r);
    // for a fixed seed, a -> key is a bijection; b goes into the counter unchanged
    uint64_t k = mix64(seed) ^ mix64(a ^ 0x5851F42D4C957F2Dull);
    r->key[0] = (uint32_t)k;
    r->key[1] = (uint32_t)(k >> 32);
    r->ctr[2] = (uint32_t)b;
    r->ctr[3] = (uint32_t)(b >> 32);
    r->pos = RNG_BUF_WORDS;
}

void rng_init(rng *r, uint64_t seed) { rng_stream(r, seed, 0, 0); }

// RNG_BUF_WORDS/4 consecutive blocks in structure-of-arrays form so the compiler vectorises the rounds.
static void refill(rng *r) {
    enum { NB = RNG_BUF_WORDS / 4 };
    uint64_t c0[NB], c1[NB], c2[NB], c3[NB];   // 32-bit words held in 64-bit lanes (vectorises as vpmuludq/vpmullq)
    for (int j = 0; j < NB; j++) {
        uint64_t c = ((uint64_t)r->ctr[1] << 32 | r->ctr[0]) + (uint64_t)j;
        c0[j] = (uint32_t)c; c1[j] = c >> 32; c2[j] = r->ctr[2]; c3[j] = r->ctr[3];
    }
    uint64_t k0 = r->key[0], k1 = r->key[1];
    for (int round = 0; round < 10; round++) {
        for (int j = 0; j < NB; j++) {
            uint64_t p0 = PHILOX_M0 * c0[j], p1 = PHILOX_M1 * c2[j];
            uint64_t n0 = (p1 >> 32) ^ c1[j] ^ k0, n2 = (p0 >> 32) ^ c3[j] ^ k1;
            c1[j] = p1 & 0xffffffffu;
            c3[j] = p0 & 0xffffffffu;
            c0[j] = n0;
            c2[j] = n2;
        }
        k0 = (uint32_t)(k0 + PHILOX_W0);
        k1 = (uint32_t)(k1 + PHILOX_W1);
    }
    for (int j = 0; j < NB; j++) {
        r->buf[4 * j] = (uint32_t)c0[j]; r->buf[4 * j + 1] = (uint32_t)c1[j];
        r->buf[4 * j + 2] = (uint32_t)c2[j]; r->buf[4 * j + 3] = (uint32_t)c3[j];
    }
    uint64_t c = ((uint64_t)r->ctr[1] << 32 | r->ctr[0]) + NB;
    r->ctr[0] = (uint32_t)c;
    r->ctr[1] = (uint32_t)(c >> 32);
    r->pos = 0;
}

uint32_t rng_next_u32(rng *r) {
    if (r->pos >= RNG_BUF_WORDS) refill(r);
    return r->buf[r->pos++];
}

uint64_t rng_next_u64(rng *r) {
    if (r->pos + 2 > RNG_BUF_WORDS) {   // straddles a refill: word by word
        uint64_t lo = rng_next_u32(r);
        return lo | ((uint64_t)rng_next_u32(r) << 32);
    }
    uint64_t v = (uint64_t)r->buf[r->pos] | ((uint64_t)r->buf[r->pos + 1] << 32);
    r->pos += 2;
    return v;
}

double rng_uniform(rng *r) { return (double)(rng_next_u64(r) >> 11) * (1.0 / 9007199254740992.0); }
float rng_uniformf(rng *r) { return (float)(rng_next_u32(r) >> 8) * (1.0f / 16777216.0f); }

uint64_t rng_below(rng *r, uint64_t n) {
    if (n <= 1) return 0;
    // Lemire's nearly-divisionless method with rejection: exact uniformity.
    uint64_t x = rng_next_u64(r);
    __uint128_t m = (__uint128_t)x * n;
    uint64_t l = (uint64_t)m;
    if (l < n) {
        uint64_t t = -n % n;
        while (l < t) {
            x = rng_next_u64(r);
            m = (__uint128_t)x * n;
            l = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

// Ziggurat with 256 layers on one 64-bit draw: 8 bits pick the layer, 1 bit the sign, 52 bits the
// abscissa; about 99% of draws take the fast path. Layer 0 is the base strip with the tail beyond
// ZIG_R (sampled by Marsaglia's exponential method), layer 1 the top cap.
#define ZIG_R 3.6541528853610088
#define ZIG_INV_R 0.27366123732975828

static double open_uniform(rng *r) { return ((double)(rng_next_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0); }  // (0, 1]

// The rare branches (about 1% of draws): the wedge of layer idx, or the tail beyond ZIG_R (idx 0).
// Returns 1 and sets *out when the draw is accepted; 0 means draw again.
__attribute__((noinline)) static int zig_slow(rng *r, int idx, int neg, double x, double *out) {
    if (idx == 0) {
        for (;;) {
            double xx = -ZIG_INV_R * log(open_uniform(r));
            double yy = -log(open_uniform(r));
            if (yy + yy > xx * xx) { *out = neg ? -(ZIG_R + xx) : ZIG_R + xx; return 1; }
        }
    }
    if ((ZIG_F[idx - 1] - ZIG_F[idx]) * rng_uniform(r) + ZIG_F[idx] < exp(-0.5 * x * x)) { *out = neg ? -x : x; return 1; }
    return 0;
}

static inline double zig_normal(rng *r) {
    for (;;) {
        uint64_t u = rng_next_u64(r);
        int idx = (int)(u & 0xff);
        u >>= 8;
        int neg = (int)(u & 1);
        uint64_t a = (u >> 1) & 0x000fffffffffffffull;
        double x = (double)a * ZIG_W[idx];
        if (a < ZIG_K[idx]) return neg ? -x : x;
        double out;
        if (zig_slow(r, idx, neg, x, &out)) return out;
    }
}

double rng_normal(rng *r) { return zig_normal(r); }

void rng_fill_normal(rng *r, float *x, int64_t n, float mean, float std) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)(mean + std * zig_normal(r));
}
