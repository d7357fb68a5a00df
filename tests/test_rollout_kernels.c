// test_rollout_kernels.c: the rollout engine's pieces (rowgemm and paged attention have their own tests): the
// KV block pool (refcounts, copy-on-write, exhaustion) and the sampler (greedy, log-probs, top-k/top-p mass,
// chi-square of sampled frequencies, counter-based RNG).
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "kernels/kernels.h"
#include "rollout/kv_cache.h"
#include "rollout/sampler.h"
#include "testlib.h"

static void test_kv_cache(kv_dtype dt) {
    kv_cache kc;
    const int eb = dt == KV_BF16 ? 2 : 4;
    const int64_t bb = kv_cache_block_bytes(2, 2, 16, 16, dt);
    TL_CHECK(bb == 2 * 2 * 2 * 16 * 16 * eb, "%s block bytes %lld", kv_dtype_name(dt), (long long)bb);
    kv_cache_init(&kc, 2, 2, 16, 16, dt, 3 * bb + bb / 2);
    TL_CHECK(kc.n_blocks == 3, "pool of 3.5 blocks' bytes holds 3 blocks (%d)", kc.n_blocks);
    int a = kv_cache_alloc(&kc), b = kv_cache_alloc(&kc), c = kv_cache_alloc(&kc);
    TL_CHECK(a >= 0 && b >= 0 && c >= 0 && kv_cache_alloc(&kc) == -1 && kc.n_free == 0, "exhaustion returns -1");
    unsigned char *ka = kv_cache_k(&kc, a, 1);
    TL_CHECK(kv_cache_v(&kc, a, 1) == ka + 2 * 16 * 16 * eb && ka == (unsigned char *)kv_cache_k(&kc, a, 0) + bb / 2,
             "%s layout: V after the layer's K, layers one after the other", kv_dtype_name(dt));
    for (int i = 0; i < 2 * 16 * 16 * eb; i++) ka[i] = (unsigned char)(i * 7);
    kv_cache_ref(&kc, a);   // shared by two sequences
    int32_t x = a;
    TL_CHECK(kv_cache_make_private(&kc, &x) == -1 && x == a, "cow with an empty pool fails and keeps the block");
    kv_cache_unref(&kc, c);
    TL_CHECK(kc.n_free == 1, "unref frees");
    TL_CHECK(kv_cache_make_private(&kc, &x) == 1 && x == c && kc.refcount[a] == 1 && kc.refcount[c] == 1, "cow copies");
    TL_CHECK(!memcmp(kv_cache_k(&kc, c, 1), ka, (size_t)(2 * 16 * 16 * eb)), "%s cow copy has the data", kv_dtype_name(dt));
    TL_CHECK(kv_cache_make_private(&kc, &x) == 0, "private block is not copied");
    kv_cache_unref(&kc, a); kv_cache_unref(&kc, b); kv_cache_unref(&kc, c);
    TL_CHECK(kc.n_free == 3, "all blocks back");
    kv_cache_free(&kc);
    kv_dtype p;
    TL_CHECK(kv_dtype_parse(kv_dtype_name(dt), &p) == 0 && p == dt && kv_dtype_parse("fp16", &p) == -1,
             "kv dtype names parse (%s; fp16 rejected)", kv_dtype_name(dt));
}

// Brute-force processed distribution (double): temperature, top-k (ties kept), top-p (sorted prefix).
static void probs_brute(const float *logits, int V, float T, int top_k, float top_p, double *p) {
    double mx = -INFINITY;
    for (int i = 0; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
    int *order = malloc((size_t)V * sizeof(int));
    for (int i = 0; i < V; i++) order[i] = i;
    for (int i = 0; i < V; i++)   // selection sort by logit desc, id asc
        for (int j = i + 1; j < V; j++)
            if (logits[order[j]] > logits[order[i]] || (logits[order[j]] == logits[order[i]] && order[j] < order[i])) {
                int t = order[i]; order[i] = order[j]; order[j] = t;
            }
    char *keep = calloc((size_t)V, 1);
    float thr = top_k > 0 && top_k < V ? logits[order[top_k - 1]] : -INFINITY;
    double tot = 0;
    for (int i = 0; i < V; i++)
        if (logits[i] >= thr) { keep[i] = 1; tot += exp((logits[i] - mx) / T); }
    if (top_p < 1.f) {
        double cum = 0;
        int first = 1;
        for (int j = 0; j < V; j++) {
            int i = order[j];
            if (!keep[i]) continue;
            if (!first && cum >= top_p * tot) keep[i] = 0;
            else cum += exp((logits[i] - mx) / T);
            first = 0;
        }
    }
    double s = 0;
    for (int i = 0; i < V; i++) s += keep[i] ? exp((logits[i] - mx) / T) : 0;
    for (int i = 0; i < V; i++) p[i] = keep[i] ? exp((logits[i] - mx) / T) / s : 0;
    free(order); free(keep);
}

// Chi-square statistic upper bound for df degrees of freedom at p ~ 1e-4 (Wilson-Hilferty).
static double chi2_crit(int df) {
    const double z = 3.72;   // one-sided 1e-4
    double a = 2.0 / (9.0 * df);
    return df * pow(1 - a + z * sqrt(a), 3);
}

static void test_sampler(void) {
    tl_rng r;
    tl_rng_init(&r, 9);
    const int V = 12;
    float logits[12];
    for (int i = 0; i < V; i++) logits[i] = tl_normal(&r, 1.5f);
    logits[7] = logits[3];   // a tie
    sampler_ws ws;
    sampler_ws_init(&ws, V);
    double *p = malloc(V * sizeof(double)), *pb = malloc(V * sizeof(double));
    struct { float T; int k; float top_p; } sc[] = {{1.f, -1, 1.f}, {0.7f, 5, 1.f}, {1.3f, -1, 0.8f}, {1.f, 4, 0.6f},
                                                    {0.5f, 1, 1.f}, {1.f, -1, 0.05f}, {2.f, 11, 0.95f}};
    for (size_t si = 0; si < sizeof sc / sizeof sc[0]; si++) {
        sampler_params sp = {sc[si].T, sc[si].k, sc[si].top_p, 1};
        int64_t nk = sampler_probs(&sp, logits, V, p, &ws);
        probs_brute(logits, V, sc[si].T, sc[si].k, sc[si].top_p, pb);
        double md = 0, tot = 0;
        int nb = 0;
        for (int i = 0; i < V; i++) { md = fmax(md, fabs(p[i] - pb[i])); tot += p[i]; nb += pb[i] > 0; }
        TL_CHECK(md < 1e-6 && nk == nb && fabs(tot - 1) < 1e-9, "processed probs T=%g k=%d p=%g: max diff %g, kept %lld vs %d",
                 (double)sc[si].T, sc[si].k, (double)sc[si].top_p, md, (long long)nk, nb);
        // chi-square of sampled frequencies against the processed distribution
        const int N = 40000;
        int cnt[12] = {0};
        for (int n = 0; n < N; n++) cnt[sampler_sample(&sp, logits, V, sampler_uniform(1234, si, 0, (uint64_t)n), NULL, &ws)]++;
        double chi = 0;
        int df = -1, outside = 0;
        for (int i = 0; i < V; i++) {
            if (pb[i] == 0) { outside += cnt[i]; continue; }
            double ex = N * pb[i];
            chi += (cnt[i] - ex) * (cnt[i] - ex) / ex;
            df++;
        }
        TL_CHECK(outside == 0, "no samples outside the kept set (%d)", outside);
        TL_CHECK(df == 0 || chi < chi2_crit(df), "chi-square T=%g k=%d p=%g: %.2f (df %d, crit %.2f)", (double)sc[si].T, sc[si].k,
                 (double)sc[si].top_p, chi, df, df > 0 ? chi2_crit(df) : 0.0);
        // the returned log-prob: full-vocab log_softmax(logits / T)
        float lp;
        int32_t tok = sampler_sample(&sp, logits, V, 0.37, &lp, &ws);
        double mx = -INFINITY, s = 0;
        for (int i = 0; i < V; i++) mx = fmax(mx, logits[i] / (double)sc[si].T);
        for (int i = 0; i < V; i++) s += exp(logits[i] / (double)sc[si].T - mx);
        double want = logits[tok] / (double)sc[si].T - mx - log(s);
        TL_CHECK(fabs(lp - want) < 1e-5, "log-prob %g vs %g (T=%g)", (double)lp, want, (double)sc[si].T);
    }
    // greedy: argmax, lowest id on ties; temperature 0 reports the T=1 log-prob
    float lg[5] = {0.5f, 2.f, -1.f, 2.f, 1.f};
    sampler_params g0 = {0.f, -1, 1.f, 1};
    float lp;
    int32_t t0 = sampler_sample(&g0, lg, 5, 0.99, &lp, &ws);
    double s = 0;
    for (int i = 0; i < 5; i++) s += exp(lg[i] - 2.0);
    TL_CHECK(t0 == 1 && fabs(lp - (0 - log(s))) < 1e-6, "greedy argmax %d, lp %g", t0, (double)lp);
    sampler_params g1 = {0.5f, -1, 1.f, 0};   // do_sample false at T=0.5: argmax, log-prob at 0.5
    t0 = sampler_sample(&g1, lg, 5, 0.5, &lp, &ws);
    s = 0;
    for (int i = 0; i < 5; i++) s += exp((lg[i] - 2.0) / 0.5);
    TL_CHECK(t0 == 1 && fabs(lp - (0 - log(s))) < 1e-6, "do_sample=0 argmax %d, lp %g", t0, (double)lp);
    // large vocabulary with top-p (exercises the candidate threshold path) against brute force
    const int VL = 3000;
    float *ll = malloc(VL * 4);
    for (int i = 0; i < VL; i++) ll[i] = tl_normal(&r, 0.3f);   // flat: top-p keeps many tokens
    sampler_ws wl;
    sampler_ws_init(&wl, VL);
    double *pl = malloc(VL * 8), *plb = malloc(VL * 8);
    sampler_params spl = {1.f, -1, 0.9f, 1};
    int64_t nkl = sampler_probs(&spl, ll, VL, pl, &wl);
    probs_brute(ll, VL, 1.f, -1, 0.9f, plb);
    double md = 0;
    int nbl = 0;
    for (int i = 0; i < VL; i++) { md = fmax(md, fabs(pl[i] - plb[i])); nbl += plb[i] > 0; }
    TL_CHECK(md < 1e-9 && nkl == nbl && nkl > 1000, "top-p on a flat 3000-vocab: kept %lld vs %d, max diff %g", (long long)nkl, nbl, md);
    sampler_ws_free(&wl);
    free(ll); free(pl); free(plb);
    // counter-based RNG: pure function, distinct streams
    TL_CHECK(sampler_uniform(1, 2, 3, 4) == sampler_uniform(1, 2, 3, 4), "uniform is a pure function");
    TL_CHECK(sampler_uniform(1, 2, 3, 4) != sampler_uniform(1, 2, 4, 4) && sampler_uniform(1, 2, 3, 4) != sampler_uniform(1, 3, 3, 4) &&
                 sampler_uniform(1, 2, 3, 4) != sampler_uniform(2, 2, 3, 4) && sampler_uniform(1, 2, 3, 4) != sampler_uniform(1, 2, 3, 5),
             "streams differ by seed, prompt, sample and step");
    double mean = 0;
    for (int i = 0; i < 10000; i++) mean += sampler_uniform(7, 0, 0, (uint64_t)i);
    mean /= 10000;
    TL_CHECK(fabs(mean - 0.5) < 0.02, "uniform mean %g", mean);
    sampler_ws_free(&ws);
    free(p); free(pb);
}

int main(void) {
    test_kv_cache(KV_F32);
    test_kv_cache(KV_BF16);
    test_sampler();
    return tl_summary();
}
