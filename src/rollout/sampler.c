// sampler.c: greedy / temperature / top-k / top-p token selection (see sampler.h).
#include "rollout/sampler.h"

#include <math.h>

#include "core/common.h"
#include "core/rng.h"
#include "kernels/kmath.h"

void sampler_ws_init(sampler_ws *ws, int64_t V) {
    CHECK(V > 0, "sampler_ws_init: V=%lld", (long long)V);
    ws->V = V;
    ws->e = rlc_malloc((size_t)V * sizeof(float));
    ws->tmp = rlc_malloc((size_t)V * sizeof(float));
    ws->pairs = rlc_malloc((size_t)V * sizeof(*ws->pairs));
    ws->kept = rlc_malloc((size_t)V * sizeof(int32_t));
}

void sampler_ws_free(sampler_ws *ws) {
    free(ws->e);
    free(ws->tmp);
    free(ws->pairs);
    free(ws->kept);
    memset(ws, 0, sizeof *ws);
}

void sampler_params_check(const sampler_params *sp) {
    if (!(sp->temperature >= 0.f) || !isfinite(sp->temperature))
        rlc_die("sampling: temperature=%g, expected a finite value >= 0", (double)sp->temperature);
    if (!(sp->top_p > 0.f && sp->top_p <= 1.f)) rlc_die("sampling: top_p=%g, expected 0 < top_p <= 1", (double)sp->top_p);
}

int sampler_is_greedy(const sampler_params *sp) { return !sp->do_sample || sp->temperature == 0.f; }

double sampler_uniform(uint64_t seed, uint64_t prompt_id, uint64_t sample_idx, uint64_t step) {
    rng r;
    rng_stream(&r, seed, prompt_id, sample_idx);
    // Draw `step` of the stream (seed, prompt_id, sample_idx): Philox block `step`, first 64 bits.
    uint32_t ctr[4] = {(uint32_t)step, (uint32_t)(step >> 32), r.ctr[2], r.ctr[3]}, out[4];
    rng_philox4x32(ctr, r.key, out);
    uint64_t x = (uint64_t)out[0] | ((uint64_t)out[1] << 32);
    return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

static int64_t argmax(const float *x, int64_t V) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

// k-th largest value (1-based k) of a (n), reordering a. Iterative quickselect, median of three.
static float kth_largest(float *a, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1, want = k - 1;   // index in descending order
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        float x = a[lo], y = a[mid], z = a[hi];
        float piv = (x > y) ? ((y > z) ? y : (x > z ? z : x)) : ((x > z) ? x : (y > z ? z : y));
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] > piv) i++;
            while (a[j] < piv) j--;
            if (i <= j) { float t = a[i]; a[i] = a[j]; a[j] = t; i++; j--; }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else return a[want];
    }
    return a[want];
}

static int pair_cmp(const void *pa, const void *pb) {
    const struct sampler_pair *a = pa, *b = pb;
    if (a->e != b->e) return a->e > b->e ? -1 : 1;
    return a->i < b->i ? -1 : (a->i > b->i);
}

// Fill ws->e with exp((logits - mx) / T) (mx = the max logit) and the kept ids in sampling order: *kept =
// ws->kept[0..n), or NULL when the kept set is all of [0, V) in index order (no top-k, no top-p, no NaN logit:
// the common rollout setting, where building and walking an identity list was a third of the sampler's time);
// *mass = sum of e over the kept set (summed in that order), *sum_all = sum of e over all V.
static int64_t select_kept(const sampler_params *sp, const float *logits, int64_t V, float mx, sampler_ws *ws,
                           const int32_t **kept, double *mass, double *sum_all) {
    CHECK(ws->V >= V, "sampler workspace for V=%lld used with V=%lld", (long long)ws->V, (long long)V);
    const float T = sp->temperature;
    float *e = ws->e;
#pragma omp simd
    for (int64_t i = 0; i < V; i++) e[i] = k_expf((logits[i] - mx) / T);
    double sa = 0;
    for (int64_t i = 0; i < V; i++) sa += e[i];
    *sum_all = sa;
    *kept = ws->kept;
    const int all_k = !(sp->top_k > 0 && sp->top_k < V);
    // a NaN logit makes e and sa NaN; the general path below then leaves it out of the kept set
    if (all_k && sp->top_p >= 1.f && !isnan(sa)) {
        *kept = NULL;
        *mass = sa;   // the same terms in the same order as the kept-set sum below
        return V;
    }
    float thr = -INFINITY;
    if (sp->top_k > 0 && sp->top_k < V) {
        memcpy(ws->tmp, logits, (size_t)V * sizeof(float));
        thr = kth_largest(ws->tmp, V, sp->top_k);
    }
    int64_t n = 0;
    if (sp->top_p >= 1.f) {   // index order over the (top-k) kept set
        double s = 0;
        for (int64_t i = 0; i < V; i++)
            if (logits[i] >= thr) { ws->kept[n++] = (int32_t)i; s += ws->e[i]; }
        *mass = s;
        return n;
    }
    // top-p: total mass of the top-k set, then candidates above a threshold tau that is lowered until the
    // candidates hold at least top_p of the mass (then the top-p prefix lies among them).
    double tot = 0;
    for (int64_t i = 0; i < V; i++)
        if (logits[i] >= thr) tot += ws->e[i];
    const double need = (double)sp->top_p * tot;
    int64_t nc = 0;
    for (float tau = 1e-3f;; tau *= 1e-3f) {
        double cm = 0;
        nc = 0;
        const float t_eff = tau < 1e-30f ? 0.f : tau;
        for (int64_t i = 0; i < V; i++)
            if (logits[i] >= thr && ws->e[i] >= t_eff) {
                ws->pairs[nc].e = ws->e[i];
                ws->pairs[nc].i = (int32_t)i;
                nc++;
                cm += ws->e[i];
            }
        if (cm >= need || t_eff == 0.f) break;
    }
    qsort(ws->pairs, (size_t)nc, sizeof *ws->pairs, pair_cmp);
    double cum = 0;
    for (int64_t j = 0; j < nc; j++) {
        if (j > 0 && cum >= need) break;
        ws->kept[n++] = ws->pairs[j].i;
        cum += ws->pairs[j].e;
    }
    *mass = cum;
    return n;
}

// log_softmax(logits / T')[tok] over the full vocabulary: z_tok - max z - log sum exp(z - max z), mx = max z.
static float full_logprob(const float *logits, int64_t V, float mx, float T, int64_t tok, float *e) {
#pragma omp simd
    for (int64_t i = 0; i < V; i++) e[i] = k_expf((logits[i] - mx) / T);
    double s = 0;
    for (int64_t i = 0; i < V; i++) s += e[i];
    return (float)((double)((logits[tok] - mx) / T) - log(s));
}

// Dies when a logit is NaN or inf: a distribution cannot come from them, and a sample drawn from the finite
// rest would pass a broken model off as a working one.
static void check_logits(const float *logits, int64_t V) {
    float acc = 0.f;   // x - x is 0 for finite x, NaN otherwise: one vectorised pass
#pragma omp simd reduction(+ : acc)
    for (int64_t i = 0; i < V; i++) acc += logits[i] - logits[i];
    if (acc == 0.f) return;
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < V; i++)
        if (!isfinite(logits[i])) { bad++; if (first < 0) first = i; }
    rlc_die("sampling: %lld of the %lld logits are not finite (token %lld: %g); the model's weights or activations "
            "are non-finite", (long long)bad, (long long)V, (long long)first, (double)logits[first]);
}

int32_t sampler_sample(const sampler_params *sp, const float *logits, int64_t V, double u, float *logprob, sampler_ws *ws) {
    check_logits(logits, V);
    const int64_t am = argmax(logits, V);
    const float mx = logits[am];
    if (sampler_is_greedy(sp)) {
        if (logprob) *logprob = full_logprob(logits, V, mx, sp->temperature > 0.f ? sp->temperature : 1.f, am, ws->e);
        return (int32_t)am;
    }
    double mass, sum_all;
    const int32_t *kept;
    int64_t n = select_kept(sp, logits, V, mx, ws, &kept, &mass, &sum_all);
    CHECK(n > 0 && mass > 0, "sampler: empty kept set (n=%lld mass=%g)", (long long)n, mass);
    const double target = u * mass;
    double cum = 0;
    const float *e = ws->e;
    int64_t tok = kept ? kept[n - 1] : n - 1;
    if (kept) {
        for (int64_t j = 0; j < n; j++) {
            cum += e[kept[j]];
            if (cum > target) { tok = kept[j]; break; }
        }
    } else {
        for (int64_t j = 0; j < n; j++) {
            cum += e[j];
            if (cum > target) { tok = j; break; }
        }
    }
    if (logprob) *logprob = (float)((double)((logits[tok] - mx) / sp->temperature) - log(sum_all));
    return (int32_t)tok;
}

int64_t sampler_probs(const sampler_params *sp, const float *logits, int64_t V, double *probs, sampler_ws *ws) {
    memset(probs, 0, (size_t)V * sizeof(double));
    if (sampler_is_greedy(sp)) {
        probs[argmax(logits, V)] = 1.0;
        return 1;
    }
    double mass, sum_all;
    const int32_t *kept;
    int64_t n = select_kept(sp, logits, V, logits[argmax(logits, V)], ws, &kept, &mass, &sum_all);
    for (int64_t j = 0; j < n; j++) probs[kept ? kept[j] : j] = ws->e[kept ? kept[j] : j] / mass;
    return n;
}
