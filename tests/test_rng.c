// test_rng.c: Philox4x32-10 known answers, stream independence, determinism, uniform/normal moments.
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "testlib.h"

static void kat(void) {
    // Random123 kat_vectors for philox4x32_10
    struct { uint32_t ctr[4], key[2], want[4]; } v[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}, {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        rng_philox4x32(v[i].ctr, v[i].key, out);
        TL_CHECK(!memcmp(out, v[i].want, sizeof out), "philox KAT %d: got %08x %08x %08x %08x", i, out[0], out[1], out[2], out[3]);
    }
    // the buffered (vectorised) stream equals the scalar bijection, block by block, across a refill boundary
    rng r;
    rng_stream(&r, 42, 7, 0x123456789ull);
    int ok = 1;
    for (uint64_t blk = 0; blk < 40; blk++) {
        uint32_t c[4] = {(uint32_t)blk, 0, 0x23456789u, 0x1u}, out[4];
        rng_philox4x32(c, r.key, out);
        for (int w = 0; w < 4; w++) ok &= rng_next_u32(&r) == out[w];
    }
    TL_CHECK(ok, "stream word k == philox(block k/4)[k%%4]");
}

static void moments(void) {
    rng r;
    rng_init(&r, 1);
    const int n = getenv("RLC_SAN") && atoi(getenv("RLC_SAN")) ? 200000 : 2000000;
    double s = 0, s2 = 0, s3 = 0, s4 = 0, us = 0, us2 = 0;
    int64_t tail = 0, bad_u = 0;
    for (int i = 0; i < n; i++) {
        double x = rng_normal(&r);
        s += x; s2 += x * x; s3 += x * x * x; s4 += x * x * x * x;
        if (fabs(x) > 3.6541528853610088) tail++;
        double u = rng_uniform(&r);
        bad_u += !(u >= 0 && u < 1);
        us += u; us2 += u * u;
    }
    TL_CHECK(bad_u == 0, "%lld uniforms outside [0, 1)", (long long)bad_u);
    double m = s / n, var = s2 / n - m * m, skew = s3 / n, kurt = s4 / n;
    // standard errors at n=2e6: mean 7e-4, var 1e-3, skew 1.7e-3, kurt 5e-3; allow ~5 sigma (x3 for SAN sizes)
    double k = n < 1000000 ? 3.2 : 1.0;
    TL_CHECK(fabs(m) < 4e-3 * k && fabs(var - 1) < 5e-3 * k && fabs(skew) < 9e-3 * k && fabs(kurt - 3) < 2.5e-2 * k,
             "normal moments: mean %g var %g skew %g kurt %g", m, var, skew, kurt);
    // P(|x| > r) = 2 * (1 - Phi(3.6541528853610088)) = 2.5806e-4: checks the tail branch of the ziggurat
    double want = 2.5806e-4 * n, sd = sqrt(want);
    TL_CHECK(fabs((double)tail - want) < 5 * sd, "tail count %lld want %.0f", (long long)tail, want);
    double um = us / n, uv = us2 / n - um * um;
    TL_CHECK(fabs(um - 0.5) < 1e-3 * k && fabs(uv - 1.0 / 12) < 1e-3 * k, "uniform mean %g var %g", um, uv);
    printf("ok normal: mean %.2e var %.5f skew %.2e kurt %.4f tail %lld\n", m, var, skew, kurt, (long long)tail);
}

static void streams(void) {
    rng a, b, c;
    rng_stream(&a, 5, 1, 2);
    rng_stream(&b, 5, 1, 2);
    rng_stream(&c, 5, 2, 1);
    int same = 1, diff = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = rng_next_u64(&a), y = rng_next_u64(&b), z = rng_next_u64(&c);
        same &= x == y;
        diff += x == z;
    }
    TL_CHECK(same, "same (seed, a, b) => same stream");
    TL_CHECK(diff == 0, "different (a, b) => different stream");
    rng d, e;
    rng_init(&d, 9);
    rng_stream(&e, 9, 0, 0);
    TL_CHECK(rng_next_u64(&d) == rng_next_u64(&e), "rng_init(seed) == rng_stream(seed, 0, 0)");
    // correlation between neighbouring streams (a, a+1) and (b, b+1)
    double sxy = 0, sxz = 0;
    rng s0, s1, s2;
    rng_stream(&s0, 3, 10, 10);
    rng_stream(&s1, 3, 11, 10);
    rng_stream(&s2, 3, 10, 11);
    const int n = 100000;
    for (int i = 0; i < n; i++) {
        double x = rng_uniform(&s0) - 0.5, y = rng_uniform(&s1) - 0.5, z = rng_uniform(&s2) - 0.5;
        sxy += x * y; sxz += x * z;
    }
    // corr sd ~ 1/sqrt(n) = 3e-3; var(u) = 1/12
    TL_CHECK(fabs(sxy / n * 12) < 0.015 && fabs(sxz / n * 12) < 0.015, "neighbour stream corr %g %g", sxy / n * 12, sxz / n * 12);
    // fill == repeated rng_normal; copying the struct forks the stream
    rng f, g;
    rng_stream(&f, 77, 3, 4);
    g = f;
    float buf[1000];
    rng_fill_normal(&f, buf, 1000, 0.5f, 2.0f);
    int eq = 1;
    for (int i = 0; i < 1000; i++) eq &= buf[i] == (float)(0.5f + 2.0f * rng_normal(&g));
    TL_CHECK(eq, "rng_fill_normal == n x rng_normal");
    // rng_below: range and rough uniformity
    int cnt[7] = {0};
    for (int i = 0; i < 70000; i++) {
        uint64_t v = rng_below(&f, 7);
        if (v < 7) cnt[v]++;
        else { TL_CHECK(0, "rng_below out of range"); break; }
    }
    int okb = 1;
    for (int i = 0; i < 7; i++) okb &= abs(cnt[i] - 10000) < 600;
    TL_CHECK(okb, "rng_below(7) counts %d %d %d %d %d %d %d", cnt[0], cnt[1], cnt[2], cnt[3], cnt[4], cnt[5], cnt[6]);
    TL_CHECK(rng_below(&f, 1) == 0, "rng_below(1) == 0");
}

int main(void) {
    kat();
    streams();
    moments();
    return tl_summary();
}
