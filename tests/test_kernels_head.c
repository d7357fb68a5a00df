// test_kernels_head.c: the frozen log-prob head (logprob_head_forward_frozen / logprob_head_backward_frozen), the
// head LoRA trains through: its forward saves g = d logp / d hidden and ge = d entropy / d hidden per token, and its
// backward is dhidden += dlogp g + dentropy ge, with no pass over the vocabulary.
// On fresh random inputs, with temperature != 1, soft-capping on and off, targets < 0, odd T/H/V (several token and
// vocabulary chunks, partial last ones), 1 and 2 threads:
//   - logp, entropy and lse bitwise those of logprob_head_forward_cap (the same sweep and statistics);
//   - g and ge against the float64 _ref, and against PyTorch autograd in float64 (tests/py/head_frozen_ref.py);
//   - the resulting dhidden (accumulated onto random contents) against logprob_head_backward_cap, which computes
//     the same gradient by recomputing the logits, and the backward against its _ref;
//   - bitwise the same on a second run with the same thread count.
// Tolerances (relative, max|got-want| / max|want|):
//   TOL_G 1e-5    g, ge vs float64 (ref, torch): fp32 sums over the vocabulary of exp-weighted rows of w, rescaled
//                 as the running max moves, merged over threads; each term O(|w|), no cancellation beyond the
//                 target row's c_y w_y - E[c w] (the same in the recomputing backward).
//   TOL_DH 1e-5   dhidden vs logprob_head_backward_cap: both fp32 over the same terms in a different order.
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "kernels/kernels.h"
#include "testlib.h"

#define TOL_G 1e-5
#define TOL_DH 1e-5

static int g_san;

static float *zeros(int64_t n) { return rlc_calloc((size_t)(n ? n : 1), sizeof(float)); }
static float *dup(const float *x, int64_t n) {
    float *y = rlc_malloc((size_t)(n ? n : 1) * sizeof(float));
    memcpy(y, x, (size_t)n * sizeof(float));
    return y;
}
static int bit_equal(const float *a, const float *b, int64_t n) { return memcmp(a, b, (size_t)n * sizeof(float)) == 0; }

// targets (T): random in [0, V), every 7th -1, and both ends of the vocabulary
static int32_t *make_targets(tl_rng *r, int64_t T, int64_t V) {
    int32_t *tg = rlc_malloc((size_t)T * sizeof(int32_t));
    for (int64_t t = 0; t < T; t++) tg[t] = (int32_t)((int64_t)(tl_uniform(r, 0, 1) * (float)V) % V);
    for (int64_t t = 2; t < T; t += 7) tg[t] = -1;
    tg[0] = (int32_t)V - 1;
    if (T > 1) tg[1] = 0;
    return tg;
}

static void write_raw(const char *dir, const char *cs, const char *t, const char *ext, const void *x, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s.%s", dir, cs, t, ext);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(x, 1, bytes, f) == bytes && fclose(f) == 0, "cannot write %s", path);
}

typedef struct { const char *name; int64_t T, H, V; float temp, cap; int ent, torch; } hcase;
typedef struct { char name[64]; int64_t T, H; float *g, *ge; } pending;

// One configuration at the current thread count nth.
static void run_case(const hcase *c, int nth, tl_rng *r, const char *dir, FILE *cases, pending *pd) {
    const int64_t T = c->T, H = c->H, V = c->V;
    char nm[200];
    float *h = tl_alloc_normal(r, T * H, 1), *w = tl_alloc_normal(r, V * H, 0.4f);
    float *dlogp = tl_alloc_normal(r, T, 1), *dent = c->ent ? tl_alloc_normal(r, T, 1) : NULL;
    int32_t *tg = make_targets(r, T, V);
    float *lp = zeros(T), *en = c->ent ? zeros(T) : NULL, *ls = zeros(T), *g = zeros(T * H), *ge = c->ent ? zeros(T * H) : NULL;
    float *lpc = zeros(T), *enc = c->ent ? zeros(T) : NULL, *lsc = zeros(T);
    logprob_head_forward_frozen(lp, en, ls, g, ge, h, w, tg, T, H, V, c->temp, c->cap);
    logprob_head_forward_cap(lpc, enc, lsc, h, w, tg, T, H, V, c->temp, c->cap);
    TL_CHECK(bit_equal(lp, lpc, T) && bit_equal(ls, lsc, T) && (!en || bit_equal(en, enc, T)),
             "%s (%d threads): logp, entropy, lse bitwise logprob_head_forward_cap's", c->name, nth);
    int zero_rows = 1;
    for (int64_t t = 0; t < T; t++)
        if (tg[t] < 0)
            for (int64_t k = 0; k < H; k++) zero_rows &= g[t * H + k] == 0.0f;
    TL_CHECK(zero_rows, "%s (%d threads): g = 0 where the target is < 0", c->name, nth);
    // vs the float64 reference
    float *gr = zeros(T * H), *ger = c->ent ? zeros(T * H) : NULL, *lpr = zeros(T), *enr = zeros(T), *lsr = zeros(T);
    logprob_head_forward_frozen_ref(lpr, enr, lsr, gr, ger, h, w, tg, T, H, V, c->temp, c->cap);
    snprintf(nm, sizeof nm, "%s (%d threads) g vs ref", c->name, nth);
    tl_check_close(nm, g, gr, T * H, TOL_G);
    if (ge) {
        snprintf(nm, sizeof nm, "%s (%d threads) ge vs ref", c->name, nth);
        tl_check_close(nm, ge, ger, T * H, TOL_G);
    }
    // the same run again: bitwise
    float *g2 = zeros(T * H), *ge2 = c->ent ? zeros(T * H) : NULL;
    logprob_head_forward_frozen(NULL, NULL, NULL, g2, ge2, h, w, tg, T, H, V, c->temp, c->cap);
    TL_CHECK(bit_equal(g, g2, T * H) && (!ge || bit_equal(ge, ge2, T * H)), "%s (%d threads): deterministic g, ge", c->name, nth);
    // dhidden through the saved gradients vs the recomputing backward (no dw), both accumulating onto random contents
    float *dh0 = tl_alloc_normal(r, T * H, 1);
    float *dh = dup(dh0, T * H), *dhc = dup(dh0, T * H), *dhr = dup(dh0, T * H);
    logprob_head_backward_frozen(dh, dlogp, dent, g, ge, T, H);
    logprob_head_backward_cap(dhc, NULL, dlogp, dent, en, h, w, tg, ls, T, H, V, c->temp, c->cap);
    logprob_head_backward_frozen_ref(dhr, dlogp, dent, g, ge, T, H);
    // compare the increments (the random contents would hide errors of the head's part)
    for (int64_t i = 0; i < T * H; i++) { dh[i] -= dh0[i]; dhc[i] -= dh0[i]; dhr[i] -= dh0[i]; }
    snprintf(nm, sizeof nm, "%s (%d threads) dhidden vs logprob_head_backward_cap", c->name, nth);
    tl_check_close(nm, dh, dhc, T * H, TOL_DH);
    snprintf(nm, sizeof nm, "%s (%d threads) backward_frozen vs ref", c->name, nth);
    tl_check_close(nm, dh, dhr, T * H, 1e-6);   // one fp32 multiply-add per element vs double: rounding only
    if (c->torch && cases) {
        snprintf(pd->name, sizeof pd->name, "%s_t%d", c->name, nth);
        fprintf(cases, "%s T=%lld H=%lld V=%lld temperature=%.9g softcap=%.9g\n", pd->name, (long long)T, (long long)H,
                (long long)V, (double)c->temp, (double)c->cap);
        write_raw(dir, pd->name, "hidden", "f32", h, (size_t)(T * H) * 4);
        write_raw(dir, pd->name, "w", "f32", w, (size_t)(V * H) * 4);
        write_raw(dir, pd->name, "targets", "i32", tg, (size_t)T * 4);
        pd->T = T;
        pd->H = H;
        pd->g = dup(g, T * H);
        pd->ge = ge ? dup(ge, T * H) : NULL;
    }
    free(h); free(w); free(dlogp); free(dent); free(tg); free(lp); free(en); free(ls); free(g); free(ge); free(lpc); free(enc);
    free(lsc); free(gr); free(ger); free(lpr); free(enr); free(lsr); free(g2); free(ge2); free(dh0); free(dh); free(dhc); free(dhr);
}

// A backward with neither seed leaves dhidden alone; T = 0 is a no-op.
static void test_edges(tl_rng *r) {
    const int64_t T = 3, H = 5, V = 7;
    float *h = tl_alloc_normal(r, T * H, 1), *w = tl_alloc_normal(r, V * H, 0.4f), *g = zeros(T * H);
    int32_t tg[3] = {6, -1, 0};
    logprob_head_forward_frozen(NULL, NULL, NULL, g, NULL, h, w, tg, 0, H, V, 1.0f, 0.0f);
    float *d = dup(h, T * H);
    logprob_head_backward_frozen(d, NULL, NULL, g, NULL, T, H);
    TL_CHECK(bit_equal(d, h, T * H), "backward_frozen without seeds leaves dhidden unchanged");
    free(h); free(w); free(g); free(d);
}

int main(void) {
    const char *san = getenv("RLC_SAN");
    g_san = san && strcmp(san, "1") == 0;
    tl_rng r;
    tl_rng_init(&r, 20261207);
    // T 1100: two token chunks (1024 + 76); V 8525: four vocabulary chunks, the last partial; H odd
    const hcase cases[] = {
        {"chunks_t07_ent", g_san ? 130 : 1100, g_san ? 9 : 33, 8525, 0.7f, 0.0f, 1, 0},
        {"cap5_t07_ent", g_san ? 60 : 300, 17, 4133, 0.7f, 5.0f, 1, 1},
        {"cap30_t13", 70, 31, 3001, 1.3f, 30.0f, 0, 1},
        {"plain_t1", g_san ? 40 : 130, 32, 5003, 1.0f, 0.0f, 0, 1},
        {"plain_t06_ent", 90, 19, 5003, 0.6f, 0.0f, 1, 1},
        {"tiny", 1, 8, 5, 1.0f, 0.0f, 1, 1},
    };
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    const int have_torch = tl_have_torch();
    if (!have_torch) tl_skip("PyTorch comparisons: /usr/bin/python3 cannot import torch");
    char *dir = have_torch ? tl_tmpdir("head_frozen") : NULL;
    FILE *cf = NULL;
    if (dir) {
        char *p = rlc_path_join(dir, "cases.txt");
        cf = fopen(p, "w");
        CHECK(cf, "cannot create %s", p);
        free(p);
    }
    pending *pd = rlc_calloc((size_t)(2 * nc), sizeof(pending));
    const int nth0 = omp_get_max_threads();
    int np = 0;
    for (int th = 1; th <= 2; th++) {
        omp_set_num_threads(th);
        for (int i = 0; i < nc; i++) {
            run_case(&cases[i], th, &r, dir, cf, &pd[np]);
            if (pd[np].g) np++;
        }
    }
    omp_set_num_threads(nth0);
    test_edges(&r);
    if (cf) {
        fclose(cf);
        int rc = tl_system("/usr/bin/python3 tests/py/head_frozen_ref.py %s", dir);
        TL_CHECK(rc == 0, "tests/py/head_frozen_ref.py exited with %d", rc);
        for (int i = 0; rc == 0 && i < np; i++) {
            const char *what[2] = {"g", "ge"};
            float *got[2] = {pd[i].g, pd[i].ge};
            for (int k = 0; k < 2; k++) {
                if (!got[k]) continue;
                char path[4096], nm[160];
                snprintf(path, sizeof path, "%s/%s.out.%s.f32", dir, pd[i].name, what[k]);
                size_t len = 0;
                float *want = (float *)rlc_read_file(path, &len);
                TL_CHECK(len == (size_t)(pd[i].T * pd[i].H) * 4, "%s: %zu bytes", path, len);
                snprintf(nm, sizeof nm, "%s %s vs torch (float64)", pd[i].name, what[k]);
                if (len == (size_t)(pd[i].T * pd[i].H) * 4) tl_check_close(nm, got[k], want, pd[i].T * pd[i].H, TOL_G);
                free(want);
            }
        }
        if (!getenv("RLC_KEEP")) tl_system("rm -rf %s", dir);
    }
    for (int i = 0; i < np; i++) { free(pd[i].g); free(pd[i].ge); }
    free(pd);
    free(dir);
    return tl_summary();
}
