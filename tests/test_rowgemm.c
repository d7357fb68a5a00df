// test_rowgemm.c: the rollout engine's batch-invariant products (rowgemm.h): against double-precision dot
// products, bitwise against the scalar definition, row results independent of batch and threads, bf16 weights,
// fused products, and the LoRA side path fused into a product. The Makefile also builds this test against rowgemm compiled for other ISAs
// (test_rowgemm_avx2, test_rowgemm_scalar), so the AVX2 kernel and the portable fallback are checked on an
// AVX-512 machine too; RLC_EXPECT_ISA names the kernel such a build must run.
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "rollout/rowgemm.h"
#include "testlib.h"

static void test_rowgemm(void) {
    tl_rng r;
    tl_rng_init(&r, 11);
    // shapes with C tails (C % 16 != 0), OC tails (OC % 32, % 8 != 0), T tails (T % 6 != 0), T chunks (> 24),
    // column blocks (C > 1024, with a tail), the padded-token path (C % 256 == 0, T >= 3)
    const int64_t shapes[][3] = {{1, 64, 40}, {5, 100, 37}, {13, 1024, 129}, {2, 17, 3}, {300, 520, 70}, {64, 256, 256},
                                 {97, 300, 33}, {25, 3072, 48}, {7, 2100, 40}, {2, 2100, 9}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t T = shapes[si][0], C = shapes[si][1], OC = shapes[si][2];
        float *x = tl_alloc_normal(&r, T * C, 1.f), *w = tl_alloc_normal(&r, OC * C, 1.f / sqrtf((float)C));
        float *o = rlc_alloc((size_t)(T * OC) * 4), *o_ref = rlc_alloc((size_t)(T * OC) * 4);
        rowgemm_forward(o, OC, x, w, T, C, OC, 0);
        rowgemm_forward_ref(o_ref, OC, x, w, NULL, T, C, OC, 0);
        char name[96];
        snprintf(name, sizeof name, "rowgemm T=%lld C=%lld OC=%lld", (long long)T, (long long)C, (long long)OC);
        // fp32 dot products of length C vs double: rel err ~ sqrt(C) * 2^-24 scaled; 1e-5 leaves margin
        tl_check_close(name, o, o_ref, T * OC, 1e-5);
        // the vector path computes exactly the scalar fmaf chain that defines the arithmetic
        float *o_sc = rlc_alloc((size_t)(T * OC) * 4);
        rowgemm_forward_scalar(o_sc, OC, x, w, NULL, T, C, OC, 0);
        snprintf(name, sizeof name, "rowgemm == scalar fmaf chain bitwise T=%lld C=%lld OC=%lld", (long long)T, (long long)C, (long long)OC);
        TL_CHECK(!memcmp(o, o_sc, (size_t)(T * OC) * 4), "%s", name);
        for (int64_t i = 0; i < T * OC; i++) o[i] = o_sc[i] = 0.25f;
        rowgemm_forward(o, OC, x, w, T, C, OC, 1);
        rowgemm_forward_scalar(o_sc, OC, x, w, NULL, T, C, OC, 1);
        TL_CHECK(!memcmp(o, o_sc, (size_t)(T * OC) * 4), "rowgemm accumulate == scalar chain bitwise (T=%lld)", (long long)T);
        rlc_free(o_sc);
        // accumulate: out += x w^T
        for (int64_t i = 0; i < T * OC; i++) o[i] = o_ref[i] = 0.5f;
        rowgemm_forward(o, OC, x, w, T, C, OC, 1);
        rowgemm_forward_ref(o_ref, OC, x, w, NULL, T, C, OC, 1);
        snprintf(name, sizeof name, "rowgemm accumulate T=%lld C=%lld", (long long)T, (long long)C);
        tl_check_close(name, o, o_ref, T * OC, 1e-5);
        // batch invariance: each row alone gives the same bits as inside the batch, with 1 or 2 threads
        rowgemm_forward(o, OC, x, w, T, C, OC, 0);
        float *row = rlc_alloc((size_t)OC * 4);
        int same = 1;
        const int nth = omp_get_max_threads();
        for (int64_t t = 0; t < T; t += (T > 20 ? 7 : 1)) {
            omp_set_num_threads(1 + (int)(t % 3));   // 3 threads on 2 cores: ranges get stolen
            rowgemm_forward(row, OC, x + t * C, w, 1, C, OC, 0);
            if (memcmp(row, o + t * OC, (size_t)OC * 4)) same = 0;
            if (T >= 3 && t + 3 <= T) {   // a sub-batch of 3 starting at t
                float *o3 = rlc_alloc((size_t)(3 * OC) * 4);
                rowgemm_forward(o3, OC, x + t * C, w, 3, C, OC, 0);
                if (memcmp(o3, o + t * OC, (size_t)(3 * OC) * 4)) same = 0;
                rlc_free(o3);
            }
        }
        omp_set_num_threads(nth);
        TL_CHECK(same, "rowgemm rows bitwise independent of batch and threads (T=%lld C=%lld OC=%lld)", (long long)T,
                 (long long)C, (long long)OC);
        // bf16 weights == fp32 kernel on the bf16-rounded weights
        uint16_t *w16 = rlc_alloc((size_t)(OC * C) * 2);
        rowgemm_to_bf16(w16, w, OC * C);
        float *wr = rlc_alloc((size_t)(OC * C) * 4);
        for (int64_t i = 0; i < OC * C; i++) {
            uint32_t u = (uint32_t)w16[i] << 16;
            memcpy(&wr[i], &u, 4);
        }
        rowgemm_forward_bf16(o, OC, x, w16, T, C, OC, 0);
        rowgemm_forward(o_ref, OC, x, wr, T, C, OC, 0);
        TL_CHECK(!memcmp(o, o_ref, (size_t)(T * OC) * 4), "rowgemm bf16 == fp32 kernel on rounded weights (T=%lld)", (long long)T);
        // fused products (q/k/v style): three outputs of the same x in one call == three single calls, bitwise;
        // fp32, then bf16 accumulating on top. Out j sits at columns o0 + 2j of a (T, OC + 8) buffer (own offset).
        if (OC >= 6) {
            const int64_t oc[3] = {OC / 3, OC / 3 + 1, OC - 2 * (OC / 3) - 1}, ld = OC + 8;
            const size_t nb = (size_t)(T * ld) * 4;
            float *f = rlc_alloc_zero(nb), *g = rlc_alloc_zero(nb);
            for (int bf = 0; bf <= 1; bf++) {
                rowgemm_out outs[3];
                for (int j = 0, o0 = 0; j < 3; o0 += (int)oc[j], j++) {
                    outs[j] = (rowgemm_out){.out = f + o0 + j * 2, .ldo = ld, .OC = oc[j]};
                    if (bf) {
                        outs[j].w16 = w16 + o0 * C;
                        rowgemm_forward_bf16(g + o0 + j * 2, ld, x, w16 + o0 * C, T, C, oc[j], 1);
                    } else {
                        outs[j].w = w + o0 * C;
                        rowgemm_forward(g + o0 + j * 2, ld, x, w + o0 * C, T, C, oc[j], 0);
                    }
                }
                if (bf) rowgemm_forward_multi_bf16(outs, 3, x, T, C, 1);
                else rowgemm_forward_multi(outs, 3, x, T, C, 0);
                TL_CHECK(!memcmp(f, g, nb), "rowgemm_forward_multi%s == single products bitwise (T=%lld C=%lld OC=%lld)",
                         bf ? "_bf16 accumulate" : "", (long long)T, (long long)C, (long long)OC);
            }
            rlc_free(f); rlc_free(g);
        }
        // biases (Qwen2's q/k/v, Llama's attention_bias / mlp_bias): sum + bias, then stored or accumulated,
        // in every path (fp32 and bf16 weights, = and +=), bitwise the scalar definition with the same bias
        float *bias = tl_alloc_normal(&r, OC, 1.f);
        float *o_b = rlc_alloc((size_t)(T * OC) * 4);
        for (int acc = 0; acc <= 1; acc++) {
            for (int64_t i = 0; i < T * OC; i++) o[i] = o_b[i] = o_ref[i] = acc ? 0.375f : 0.f;
            const rowgemm_out ob = {.out = o, .ldo = OC, .w = w, .bias = bias, .OC = OC};
            rowgemm_forward_multi(&ob, 1, x, T, C, acc);
            rowgemm_forward_scalar(o_b, OC, x, w, bias, T, C, OC, acc);
            rowgemm_forward_ref(o_ref, OC, x, w, bias, T, C, OC, acc);
            TL_CHECK(!memcmp(o, o_b, (size_t)(T * OC) * 4), "rowgemm bias%s == scalar chain + bias bitwise (T=%lld C=%lld OC=%lld)",
                     acc ? " accumulate" : "", (long long)T, (long long)C, (long long)OC);
            snprintf(name, sizeof name, "rowgemm bias%s vs double T=%lld C=%lld OC=%lld", acc ? " accumulate" : "",
                     (long long)T, (long long)C, (long long)OC);
            // the same fp32 dot products as above plus one rounded add: 1e-5 as above
            tl_check_close(name, o, o_ref, T * OC, 1e-5);
            for (int64_t i = 0; i < T * OC; i++) o[i] = o_b[i] = acc ? 0.375f : 0.f;
            const rowgemm_out ob16 = {.out = o, .ldo = OC, .w16 = w16, .bias = bias, .OC = OC};
            const rowgemm_out or32 = {.out = o_b, .ldo = OC, .w = wr, .bias = bias, .OC = OC};
            rowgemm_forward_multi_bf16(&ob16, 1, x, T, C, acc);
            rowgemm_forward_multi(&or32, 1, x, T, C, acc);
            TL_CHECK(!memcmp(o, o_b, (size_t)(T * OC) * 4), "rowgemm bf16 bias%s == fp32 kernel on rounded weights (T=%lld)",
                     acc ? " accumulate" : "", (long long)T);
        }
        // a row alone with its bias == its row in the batch (the bias does not break batch invariance)
        {
            const rowgemm_out ob = {.out = o, .ldo = OC, .w = w, .bias = bias, .OC = OC};
            rowgemm_forward_multi(&ob, 1, x, T, C, 0);
            const int64_t t = T - 1;
            const rowgemm_out o1 = {.out = o_b, .ldo = OC, .w = w, .bias = bias, .OC = OC};
            rowgemm_forward_multi(&o1, 1, x + t * C, 1, C, 0);
            TL_CHECK(!memcmp(o_b, o + t * OC, (size_t)OC * 4), "rowgemm bias: last row alone == in the batch (T=%lld)", (long long)T);
        }
        // fused products where only some outputs carry a bias == the single products
        if (OC >= 6) {
            const int64_t oc[3] = {OC / 3, OC / 3 + 1, OC - 2 * (OC / 3) - 1}, ld = OC + 8;
            const size_t nb = (size_t)(T * ld) * 4;
            float *f = rlc_alloc_zero(nb), *g = rlc_alloc_zero(nb);
            rowgemm_out outs[3];
            for (int j = 0, o0 = 0; j < 3; o0 += (int)oc[j], j++) {
                outs[j] = (rowgemm_out){.out = f + o0, .ldo = ld, .w = w + o0 * C, .bias = j == 1 ? NULL : bias + o0, .OC = oc[j]};
                rowgemm_out one = outs[j];
                one.out = g + o0;
                rowgemm_forward_multi(&one, 1, x, T, C, 0);
            }
            rowgemm_forward_multi(outs, 3, x, T, C, 0);
            TL_CHECK(!memcmp(f, g, nb), "rowgemm_forward_multi with biases on outputs 0 and 2 == single products (T=%lld)", (long long)T);
            rlc_free(f); rlc_free(g);
        }
        rlc_free(bias); rlc_free(o_b);
        rlc_free(w16); rlc_free(wr); rlc_free(row);
        rlc_free(x); rlc_free(w); rlc_free(o); rlc_free(o_ref);
    }
    // bf16 rounding: round to nearest even
    float vals[3] = {1.0f, 1.00390625f /* 1 + 2^-8: tie -> even (1.0) */, 1.01171875f /* 1 + 3*2^-8: tie -> 1 + 2^-6 */};
    uint16_t h[3];
    rowgemm_to_bf16(h, vals, 3);
    TL_CHECK(h[0] == 0x3F80 && h[1] == 0x3F80 && h[2] == 0x3F82, "bf16 RNE: %04x %04x %04x", h[0], h[1], h[2]);
}

// The LoRA side path inside the product (rowgemm_out.lora_a/lora_b): bitwise its definition (scalar product, then
// u = x·Aᵀ, u *= s, out += u·Bᵀ) and the same sequence of separate rowgemm calls; against double at 1e-5; bf16
// base weights; fused outputs with and without a side path; rows independent of batch and threads.
static void test_rowgemm_lora(void) {
    tl_rng r;
    tl_rng_init(&r, 23);
    // (T, C, OC, rank): batch 1 and 2 (the paired-row path), T tails and chunks, C and OC tails, r not a
    // multiple of 16 or of the 8-row units, the padded-token path (C % 256 == 0, T >= 3), a rank of 256
    const int64_t shapes[][4] = {{1, 64, 40, 8}, {2, 100, 37, 5}, {5, 256, 70, 32}, {13, 1024, 129, 16}, {30, 300, 33, 3},
                                 {64, 256, 96, 32}, {3, 2100, 9, 12}, {7, 512, 50, 256}};
    const float s = 0.6875f;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t T = shapes[si][0], C = shapes[si][1], OC = shapes[si][2], R = shapes[si][3];
        float *x = tl_alloc_normal(&r, T * C, 1.f), *w = tl_alloc_normal(&r, OC * C, 1.f / sqrtf((float)C));
        float *A = tl_alloc_normal(&r, R * C, 1.f / sqrtf((float)C)), *B = tl_alloc_normal(&r, OC * R, 0.5f);
        float *bias = tl_alloc_normal(&r, OC, 1.f);
        const size_t nb = (size_t)(T * OC) * 4;
        float *o = rlc_alloc(nb), *o_def = rlc_alloc(nb), *o_sep = rlc_alloc(nb), *o_ref = rlc_alloc(nb);
        float *u = rlc_alloc((size_t)(T * R) * 4);
        char name[128];
        for (int acc = 0; acc <= 1; acc++)
            for (int hb = 0; hb <= 1; hb++) {
                for (int64_t i = 0; i < T * OC; i++) o[i] = o_def[i] = o_sep[i] = o_ref[i] = acc ? 0.375f : 0.f;
                rowgemm_out q = {.out = o, .ldo = OC, .w = w, .bias = hb ? bias : NULL, .OC = OC,
                                 .lora_a = A, .lora_b = B, .lora_r = R, .lora_s = s};
                rowgemm_forward_multi(&q, 1, x, T, C, acc);
                rowgemm_out qd = q;
                qd.out = o_def;
                rowgemm_forward_lora_scalar(&qd, x, T, C, acc);
                TL_CHECK(!memcmp(o, o_def, nb), "rowgemm LoRA%s%s == its scalar definition bitwise (T=%lld C=%lld OC=%lld r=%lld)",
                         acc ? " accumulate" : "", hb ? " bias" : "", (long long)T, (long long)C, (long long)OC, (long long)R);
                // the separate calls the side path replaces
                rowgemm_out qs = {.out = o_sep, .ldo = OC, .w = w, .bias = hb ? bias : NULL, .OC = OC};
                rowgemm_forward_multi(&qs, 1, x, T, C, acc);
                rowgemm_forward(u, R, x, A, T, C, R, 0);
                for (int64_t i = 0; i < T * R; i++) u[i] *= s;
                rowgemm_forward(o_sep, OC, u, B, T, R, OC, 1);
                TL_CHECK(!memcmp(o, o_sep, nb), "rowgemm LoRA%s%s == separate base, x·Aᵀ, ·s, ·Bᵀ calls bitwise (T=%lld r=%lld)",
                         acc ? " accumulate" : "", hb ? " bias" : "", (long long)T, (long long)R);
                rowgemm_out qr = q;
                qr.out = o_ref;
                rowgemm_forward_lora_ref(&qr, x, T, C, acc);
                snprintf(name, sizeof name, "rowgemm LoRA%s%s vs double T=%lld C=%lld OC=%lld r=%lld", acc ? " accumulate" : "",
                         hb ? " bias" : "", (long long)T, (long long)C, (long long)OC, (long long)R);
                // fp32 dot products over C and over r plus three rounded adds/multiplies: 1e-5 as for rowgemm
                tl_check_close(name, o, o_ref, T * OC, 1e-5);
            }
        // bf16 base weights with the side path == fp32 base of the rounded weights, bitwise
        uint16_t *w16 = rlc_alloc((size_t)(OC * C) * 2);
        rowgemm_to_bf16(w16, w, OC * C);
        float *wr = rlc_alloc((size_t)(OC * C) * 4);
        for (int64_t i = 0; i < OC * C; i++) {
            uint32_t b = (uint32_t)w16[i] << 16;
            memcpy(&wr[i], &b, 4);
        }
        {
            const rowgemm_out q16 = {.out = o, .ldo = OC, .w16 = w16, .bias = bias, .OC = OC, .lora_a = A, .lora_b = B, .lora_r = R, .lora_s = s};
            const rowgemm_out q32 = {.out = o_def, .ldo = OC, .w = wr, .bias = bias, .OC = OC, .lora_a = A, .lora_b = B, .lora_r = R, .lora_s = s};
            rowgemm_forward_multi_bf16(&q16, 1, x, T, C, 0);
            rowgemm_forward_lora_scalar(&q32, x, T, C, 0);
            TL_CHECK(!memcmp(o, o_def, nb), "rowgemm LoRA on bf16 weights == scalar definition on the rounded weights (T=%lld r=%lld)",
                     (long long)T, (long long)R);
        }
        // three fused outputs, side paths on outputs 0 and 2 (ranks R and 1 + R/2), bf16 and fp32, == single calls
        if (OC >= 6) {
            const int64_t oc[3] = {OC / 3, OC / 3 + 1, OC - 2 * (OC / 3) - 1}, ld = OC + 8, r2 = 1 + R / 2;
            const size_t nf = (size_t)(T * ld) * 4;
            float *f = rlc_alloc_zero(nf), *g = rlc_alloc_zero(nf);
            for (int bf = 0; bf <= 1; bf++) {
                rowgemm_out outs[3];
                for (int j = 0, o0 = 0; j < 3; o0 += (int)oc[j], j++) {
                    outs[j] = (rowgemm_out){.out = f + o0 + j * 2, .ldo = ld, .OC = oc[j]};
                    if (bf) outs[j].w16 = w16 + o0 * C;
                    else outs[j].w = w + o0 * C;
                    if (j != 1) {
                        outs[j].lora_a = A;
                        outs[j].lora_b = B + o0 * R;   // (oc_j, r_j) rows of B, r_j <= R
                        outs[j].lora_r = j == 0 ? R : r2;
                        outs[j].lora_s = j == 0 ? s : 2.5f;
                    }
                    rowgemm_out one = outs[j];
                    one.out = g + o0 + j * 2;
                    if (bf) rowgemm_forward_multi_bf16(&one, 1, x, T, C, 1);
                    else rowgemm_forward_multi(&one, 1, x, T, C, 0);
                }
                if (bf) rowgemm_forward_multi_bf16(outs, 3, x, T, C, 1);
                else rowgemm_forward_multi(outs, 3, x, T, C, 0);
                TL_CHECK(!memcmp(f, g, nf), "rowgemm_forward_multi%s with side paths on outputs 0 and 2 == single products (T=%lld r=%lld)",
                         bf ? "_bf16 accumulate" : "", (long long)T, (long long)R);
            }
            rlc_free(f); rlc_free(g);
        }
        // batch invariance: a row alone (1, 2 or 3 threads) and a sub-batch of 3 == its rows in the batch
        {
            const rowgemm_out q = {.out = o, .ldo = OC, .w = w, .bias = bias, .OC = OC, .lora_a = A, .lora_b = B, .lora_r = R, .lora_s = s};
            rowgemm_forward_multi(&q, 1, x, T, C, 0);
            const int nth = omp_get_max_threads();
            int same = 1;
            for (int64_t t = 0; t < T; t += (T > 20 ? 7 : 1)) {
                omp_set_num_threads(1 + (int)(t % 3));
                rowgemm_out q1 = q;
                q1.out = o_def;
                rowgemm_forward_multi(&q1, 1, x + t * C, 1, C, 0);
                if (memcmp(o_def, o + t * OC, (size_t)OC * 4)) same = 0;
                if (t + 3 <= T) {
                    rowgemm_forward_multi(&q1, 1, x + t * C, 3, C, 0);
                    if (memcmp(o_def, o + t * OC, (size_t)(3 * OC) * 4)) same = 0;
                }
            }
            omp_set_num_threads(nth);
            TL_CHECK(same, "rowgemm LoRA rows bitwise independent of batch and threads (T=%lld C=%lld OC=%lld r=%lld)", (long long)T,
                     (long long)C, (long long)OC, (long long)R);
        }
        rlc_free(w16); rlc_free(wr); rlc_free(u);
        rlc_free(x); rlc_free(w); rlc_free(A); rlc_free(B); rlc_free(bias);
        rlc_free(o); rlc_free(o_def); rlc_free(o_sep); rlc_free(o_ref);
    }
}

int main(void) {
    const char *isa = rowgemm_isa();
    printf("rowgemm kernel: %s\n", isa);
#ifdef RLC_EXPECT_ISA
    TL_CHECK(!strcmp(isa, RLC_EXPECT_ISA), "rowgemm built for %s runs the %s kernel", RLC_EXPECT_ISA, isa);
    if (!strcmp(RLC_EXPECT_ISA, "avx2") && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
        tl_skip("this CPU has no AVX2+FMA: the avx2 kernel is not run");
        return tl_summary();
    }
#endif
    test_rowgemm();
    test_rowgemm_lora();
    return tl_summary();
}
