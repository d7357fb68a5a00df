// rope.c: rotary position embedding, half-split (rotate_half) convention (spec 1.4).
//
// inv_freq is computed the way torch 1.13 on CPU computes `1.0 / (base ** (arange(0, D, 2).float() / D))`:
// the exponent in float32, then torch's pow kernel, which is SLEEF's Sleef_powf8_u10 (AVX2 build, FMA
// double-float arithmetic), then a float32 reciprocal. glibc powf differs from it in 1 of 64 entries for
// D=128, theta=1e6. Below is a scalar transcription of SLEEF's powf_u10 (logkf / expkf) for the finite
// positive arguments used here. cos/sin are computed in double and rounded to float (correctly rounded;
// torch's SLEEF cosf/sinf differ from that by 1 ulp in a few percent of entries).
#include <float.h>
#include <math.h>

#include "core/common.h"
#include "kernels/kernels.h"

typedef struct { float x, y; } sl_f2;  // SLEEF double-float: value x + y

static inline int32_t sl_bits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }
static inline float sl_float(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
static inline sl_f2 sl_mk(float x, float y) { sl_f2 r = {x, y}; return r; }
static inline sl_f2 sl_normalize(sl_f2 t) { sl_f2 s; s.x = t.x + t.y; s.y = (t.x - s.x) + t.y; return s; }
static inline sl_f2 sl_scale(sl_f2 d, float s) { return sl_mk(d.x * s, d.y * s); }
static inline sl_f2 sl_add2_ff(float x, float y) {
    sl_f2 r; r.x = x + y; float v = r.x - x; r.y = (x - (r.x - v)) + (y - v); return r;
}
static inline sl_f2 sl_add2_f2f(sl_f2 x, float y) {
    sl_f2 r; r.x = x.x + y; float v = r.x - x.x;
    r.y = (x.x - (r.x - v)) + (y - v); r.y = r.y + x.y; return r;
}
static inline sl_f2 sl_add2_f2f2(sl_f2 x, sl_f2 y) {
    sl_f2 r; r.x = x.x + y.x; float v = r.x - x.x;
    r.y = (x.x - (r.x - v)) + (y.x - v); r.y = r.y + (x.y + y.y); return r;
}
static inline sl_f2 sl_add_f2f2(sl_f2 x, sl_f2 y) {
    sl_f2 r; r.x = x.x + y.x; r.y = (((x.x - r.x) + y.x) + x.y) + y.y; return r;
}
static inline sl_f2 sl_add_ff2(float x, sl_f2 y) {
    sl_f2 r; r.x = x + y.x; r.y = ((x - r.x) + y.x) + y.y; return r;
}
static inline sl_f2 sl_mul_f2f(sl_f2 x, float y) {
    sl_f2 r; r.x = x.x * y; r.y = fmaf(x.y, y, fmaf(x.x, y, -r.x)); return r;
}
static inline sl_f2 sl_mul_f2f2(sl_f2 x, sl_f2 y) {
    sl_f2 r; r.x = x.x * y.x; r.y = fmaf(x.x, y.y, fmaf(x.y, y.x, fmaf(x.x, y.x, -r.x))); return r;
}
static inline sl_f2 sl_squ(sl_f2 x) {
    sl_f2 r; r.x = x.x * x.x; r.y = fmaf(x.x + x.x, x.y, fmaf(x.x, x.x, -r.x)); return r;
}
static inline sl_f2 sl_div(sl_f2 n, sl_f2 d) {
    sl_f2 q; float t = 1.0f / d.x;
    q.x = n.x * t;
    float u = fmaf(t, n.x, -q.x);
    q.y = fmaf(-d.y, t, fmaf(-d.x, t, 1.0f));
    q.y = fmaf(q.x, q.y, fmaf(n.y, t, u));
    return q;
}
static inline int sl_ilogbk(float d) {
    int o = d < 5.421010862427522E-20f;
    if (o) d = 1.8446744073709552E19f * d;
    int q = (sl_bits(d) >> 23) & 0xff;
    return q - (o ? 64 + 0x7f : 0x7f);
}
static inline float sl_ldexp(float x, int32_t q) {  // vldexp_vf_vf_vi2
    int32_t m = q >> 31;
    m = (((m + q) >> 6) - m) << 4;
    q = q - (m << 2);
    m = m + 0x7f;
    m = m > 0 ? m : 0;
    m = m > 0xff ? 0xff : m;
    float u = sl_float((int32_t)((uint32_t)m << 23));
    x = x * u * u * u * u;
    u = sl_float((int32_t)((uint32_t)(q + 0x7f) << 23));
    return x * u;
}
static sl_f2 sl_logkf(float d) {
    int e = sl_ilogbk(d * (1.0f / 0.75f));
    float m = sl_ldexp(d, -e);
    sl_f2 x = sl_div(sl_add2_ff(-1.0f, m), sl_add2_ff(1.0f, m));
    sl_f2 x2 = sl_squ(x);
    float t = 0.240320354700088500976562f;
    t = fmaf(t, x2.x, 0.285112679004669189453125f);
    t = fmaf(t, x2.x, 0.400007992982864379882812f);
    sl_f2 c = sl_mk(0.66666662693023681640625f, 3.69183861259614332084311e-09f);
    return sl_add2_f2f2(sl_mul_f2f(sl_mk(0.69314718246459960938f, -1.904654323148236017e-09f), (float)e),
                        sl_add2_f2f2(sl_scale(x, 2.0f), sl_mul_f2f2(sl_mul_f2f2(x2, x), sl_add2_f2f2(sl_mul_f2f(x2, t), c))));
}
static float sl_expkf(sl_f2 d) {
    float u = (d.x + d.y) * 1.442695040888963407359924681001892137426645954152985934135449406931f;
    int32_t q = (int32_t)nearbyintf(u);
    sl_f2 s = sl_add2_f2f(d, (float)q * -0.693145751953125f);
    s = sl_add2_f2f(s, (float)q * -1.428606765330187045e-06f);
    s = sl_normalize(s);
    u = 0.00136324646882712841033936f;
    u = fmaf(u, s.x, 0.00836596917361021041870117f);
    u = fmaf(u, s.x, 0.0416710823774337768554688f);
    u = fmaf(u, s.x, 0.166665524244308471679688f);
    u = fmaf(u, s.x, 0.499999850988388061523438f);
    sl_f2 t = sl_add_f2f2(s, sl_mul_f2f(sl_squ(s), u));
    t = sl_add_ff2(1.0f, t);
    u = sl_ldexp(t.x + t.y, q);
    if (d.x < -104.0f) u = 0.0f;
    return u;
}
// SLEEF powf_u10 for finite x > 0 and finite y (all that RoPE needs).
static float sleef_powf_pos(float x, float y) {
    if (y == 0.0f || x == 1.0f) return 1.0f;
    float r = sl_expkf(sl_mul_f2f(sl_logkf(x), y));
    return isnan(r) ? INFINITY : r;
}

void rope_inv_freq(float *inv_freq, int head_dim, double theta) {
    float base = (float)theta;  // torch promotes the python scalar base to the float32 tensor dtype
    for (int i = 0; i < head_dim / 2; i++) {
        float ex = (float)(2 * i) / (float)head_dim;  // arange(0, D, 2).float() / D
        inv_freq[i] = 1.0f / sleef_powf_pos(base, ex); // 1.0 / base**ex == reciprocal() * 1.0
    }
}

// The scaled RoPE types, as transformers' modeling_rope_utils.py computes them in float32 tensors
// (shared/spec/models.md §3): python scalars meet float32 tensors as float32, `x / tensor` is
// reciprocal(tensor) * x (torch's __rtruediv__), the correction range of yarn is python (double) math.
void rope_inv_freq_params(float *inv_freq, int head_dim, const rope_params *rp) {
    const int half = head_dim / 2;
    rope_inv_freq(inv_freq, head_dim, rp->theta);
    switch (rp->type) {
    case ROPE_DEFAULT:
    case ROPE_DYNAMIC:   // NTK rescaling starts past max_position_embeddings, where rlc never runs
        return;
    case ROPE_LINEAR: {
        const float f = (float)rp->factor;
        for (int i = 0; i < half; i++) inv_freq[i] = inv_freq[i] / f;
        return;
    }
    case ROPE_LLAMA3: {
        const float f = (float)rp->factor, lo = (float)rp->low_freq_factor, hi = (float)rp->high_freq_factor;
        const float N = (float)rp->original_max_position_embeddings;
        const float low_wl = (float)(rp->original_max_position_embeddings / rp->low_freq_factor);
        const float high_wl = (float)(rp->original_max_position_embeddings / rp->high_freq_factor);
        const float two_pi = (float)(2.0 * M_PI), dlh = (float)(rp->high_freq_factor - rp->low_freq_factor);
        (void)hi;
        for (int i = 0; i < half; i++) {
            const float inv = inv_freq[i];
            const float wl = (1.0f / inv) * two_pi;
            const float inv_l = wl > low_wl ? inv / f : inv;
            const float s = ((1.0f / wl) * N - lo) / dlh;
            const float smooth = (1.0f - s) * inv_l / f + s * inv_l;
            const int medium = !(wl < high_wl) && !(wl > low_wl);
            inv_freq[i] = medium ? smooth : inv_l;
        }
        return;
    }
    case ROPE_YARN: {
        const double dim = head_dim, base = rp->theta, orig = rp->original_max_position_embeddings;
        double low = dim * log(orig / (rp->beta_fast * 2 * M_PI)) / (2 * log(base));
        double high = dim * log(orig / (rp->beta_slow * 2 * M_PI)) / (2 * log(base));
        if (rp->truncate) { low = floor(low); high = ceil(high); }
        if (low < 0) low = 0;
        if (high > dim - 1) high = dim - 1;
        if (low == high) high += 0.001;   // avoids a division by zero
        const float flo = (float)low, fden = (float)(high - low), f = (float)rp->factor;
        for (int i = 0; i < half; i++) {
            const float ex = (float)(2 * i) / (float)head_dim;
            const float pf = sleef_powf_pos((float)rp->theta, ex);   // pos_freqs
            const float extra = 1.0f / pf, inter = 1.0f / (f * pf);
            float ramp = ((float)i - flo) / fden;
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            const float w = 1.0f - ramp;   // inv_freq_extrapolation_factor
            inv_freq[i] = inter * (1.0f - w) + extra * w;
        }
        return;
    }
    }
}

static void table_fill(rope_table *rt, int max_pos, int head_dim, const float *inv_freq, float attention_factor) {
    int half = head_dim / 2;
    rt->max_pos = max_pos;
    rt->head_dim = head_dim;
    rt->cos = rlc_alloc((size_t)max_pos * (size_t)half * sizeof(float));
    rt->sin = rlc_alloc((size_t)max_pos * (size_t)half * sizeof(float));
#pragma omp parallel for schedule(static)
    for (int p = 0; p < max_pos; p++)
        for (int i = 0; i < half; i++) {
            float f = (float)p * inv_freq[i];
            float c = (float)cos((double)f), s = (float)sin((double)f);
            if (attention_factor != 1.0f) { c *= attention_factor; s *= attention_factor; }   // yarn
            rt->cos[(int64_t)p * half + i] = c;
            rt->sin[(int64_t)p * half + i] = s;
        }
}

static void table_check(int max_pos, int head_dim, double theta) {
    if (max_pos <= 0) rlc_die("rope: max_position_embeddings must be > 0 (got %d)", max_pos);
    if (head_dim <= 0 || head_dim % 2) rlc_die("rope: head_dim must be a positive even number (got %d)", head_dim);
    // the base becomes a float32 (torch's promotion): a double beyond FLT_MAX would not convert
    if (!(theta > 0 && theta <= FLT_MAX)) rlc_die("rope: rope_theta must be a positive float32 number (got %g)", theta);
}

void rope_table_init(rope_table *rt, int max_pos, int head_dim, double theta) {
    table_check(max_pos, head_dim, theta);
    float *inv_freq = rlc_malloc((size_t)(head_dim / 2) * sizeof(float));
    rope_inv_freq(inv_freq, head_dim, theta);
    table_fill(rt, max_pos, head_dim, inv_freq, 1.0f);
    free(inv_freq);
}

void rope_table_init_params(rope_table *rt, int max_pos, int head_dim, const rope_params *rp) {
    table_check(max_pos, head_dim, rp->theta);
    float *inv_freq = rlc_malloc((size_t)(head_dim / 2) * sizeof(float));
    rope_inv_freq_params(inv_freq, head_dim, rp);
    table_fill(rt, max_pos, head_dim, inv_freq, (float)rp->attention_factor);
    free(inv_freq);
}

void rope_table_free(rope_table *rt) {
    rlc_free(rt->cos);
    rlc_free(rt->sin);
    memset(rt, 0, sizeof *rt);
}

// x (T, n_heads, D) in place: x1' = x1*c - x2*s, x2' = x2*c + x1*s (x1 = x[:D/2], x2 = x[D/2:]).
void rope_forward(float *x, const int32_t *pos, const rope_table *rt, int64_t T, int64_t n_heads) {
    const int64_t D = rt->head_dim, half = D / 2;
#pragma omp parallel for schedule(static) if (T * n_heads * D >= KERNELS_PAR_MIN)
    for (int64_t t = 0; t < T; t++) {
        CHECK(pos[t] >= 0 && pos[t] < rt->max_pos, "rope: position %d of token %lld outside [0, %d)", (int)pos[t], (long long)t, rt->max_pos);
        const float *c = rt->cos + (int64_t)pos[t] * half, *s = rt->sin + (int64_t)pos[t] * half;
        for (int64_t h = 0; h < n_heads; h++) {
            float *x1 = x + (t * n_heads + h) * D, *x2 = x1 + half;
#pragma omp simd
            for (int64_t i = 0; i < half; i++) {
                float a = x1[i], b = x2[i];
                x1[i] = a * c[i] - b * s[i];
                x2[i] = b * c[i] + a * s[i];
            }
        }
    }
}

// The transpose rotation: dx1 = dy1*c + dy2*s, dx2 = dy2*c - dy1*s. In place on dx (T, n_heads, D).
void rope_backward(float *dx, const int32_t *pos, const rope_table *rt, int64_t T, int64_t n_heads) {
    const int64_t D = rt->head_dim, half = D / 2;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++) {
        CHECK(pos[t] >= 0 && pos[t] < rt->max_pos, "rope: position %d of token %lld outside [0, %d)", (int)pos[t], (long long)t, rt->max_pos);
        const float *c = rt->cos + (int64_t)pos[t] * half, *s = rt->sin + (int64_t)pos[t] * half;
        for (int64_t h = 0; h < n_heads; h++) {
            float *d1 = dx + (t * n_heads + h) * D, *d2 = d1 + half;
#pragma omp simd
            for (int64_t i = 0; i < half; i++) {
                float a = d1[i], b = d2[i];
                d1[i] = a * c[i] + b * s[i];
                d2[i] = b * c[i] - a * s[i];
            }
        }
    }
}
