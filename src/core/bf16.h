// bf16.h: fp32 <-> bfloat16 conversions, one definition for checkpoints, bf16 weights and the bf16 KV cache.
#pragma once
#include <stdint.h>
#include <string.h>

// Exact: a bf16 is the top 16 bits of an fp32.
static inline float bf16_to_f32(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// Round to nearest even (overflow -> inf); NaN -> 0x7fc0, as c10::BFloat16.
static inline uint16_t bf16_from_f32(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}
