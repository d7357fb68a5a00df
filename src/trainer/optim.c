// optim.c: fused AdamW (torch semantics), deterministic global grad norm, clipping, state files.
#include "trainer/optim.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <omp.h>

#include "core/atomic_writer.h"
#include "core/common.h"

adamw_hparams adamw_hparams_default(void) {
    adamw_hparams h = {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
    return h;
}

// The scalars exactly as torch forms them: Python doubles, cast to the fp32 tensor dtype when they
// meet a tensor (mul_, add_(alpha), addcmul_(value), div_, add_, addcdiv_(value)).
typedef struct {
    float decay, b1, omb1, b2, omb2, bc2_sqrt, eps, neg_step_size;
} adamw_scalars;

static adamw_scalars adamw_scalars_for(const adamw_hparams *h, double lr, int64_t t) {
    CHECK(t >= 1, "AdamW step number t=%lld must be >= 1", (long long)t);
    adamw_scalars s;
    s.decay = (float)(1.0 - lr * h->weight_decay);
    s.b1 = (float)h->beta1;
    s.omb1 = (float)(1.0 - h->beta1);
    s.b2 = (float)h->beta2;
    s.omb2 = (float)(1.0 - h->beta2);
    double bc1 = 1.0 - pow(h->beta1, (double)t);
    double bc2 = 1.0 - pow(h->beta2, (double)t);
    s.bc2_sqrt = (float)sqrt(bc2);
    s.eps = (float)h->eps;
    s.neg_step_size = (float)(-(lr / bc1));
    return s;
}

void adamw_update_ref(float *p, const float *g, float *m, float *v, int64_t n, const adamw_hparams *h, double lr, int64_t t) {
    adamw_scalars s = adamw_scalars_for(h, lr, t);
    for (int64_t i = 0; i < n; i++) {
        float pi = p[i] * s.decay;                       // param.mul_(1 - lr*wd)
        float mi = m[i] * s.b1;                          // exp_avg.mul_(beta1).add_(grad, alpha=1-beta1)
        mi = mi + s.omb1 * g[i];
        float vi = v[i] * s.b2;                          // exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1-beta2)
        vi = vi + s.omb2 * g[i] * g[i];
        float denom = sqrtf(vi) / s.bc2_sqrt;            // (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
        denom = denom + s.eps;
        p[i] = pi + s.neg_step_size * mi / denom;        // param.addcdiv_(exp_avg, denom, value=-step_size)
        m[i] = mi;
        v[i] = vi;
    }
}

void adamw_update_scaled(float *p, const float *g, float *m, float *v, int64_t n, const adamw_hparams *h, double lr,
                         int64_t t, float gscale) {
    const adamw_scalars s = adamw_scalars_for(h, lr, t);
    // Same expression order as the reference (no FP contraction in ISO C mode), so results are
    // bitwise equal to adamw_update_ref (on g * gscale); the loop vectorises and splits statically.
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] * gscale;   // x * 1.0f == x exactly
        float pi = p[i] * s.decay;
        float mi = m[i] * s.b1 + s.omb1 * gi;
        float vi = v[i] * s.b2 + s.omb2 * gi * gi;
        float denom = sqrtf(vi) / s.bc2_sqrt + s.eps;
        p[i] = pi + s.neg_step_size * mi / denom;
        m[i] = mi;
        v[i] = vi;
    }
}

void adamw_update(float *p, const float *g, float *m, float *v, int64_t n, const adamw_hparams *h, double lr, int64_t t) {
    adamw_update_scaled(p, g, m, v, n, h, lr, t, 1.0f);
}

void adamw_init(adamw_state *st, const param_layout *pl, const adamw_hparams *h) {
    memset(st, 0, sizeof *st);
    st->h = *h;
    st->pl = pl;
    param_set_init(&st->m, pl);
    param_set_init(&st->v, pl);
    st->step = 0;
}

void adamw_free(adamw_state *st) {
    param_set_free(&st->m);
    param_set_free(&st->v);
    memset(st, 0, sizeof *st);
}

void adamw_step_range(adamw_state *st, param_set *params, const param_set *grads, double lr, int64_t t,
                      int64_t begin, int64_t end) {
    CHECK(params->layout->numel == st->pl->numel && grads->layout->numel == st->pl->numel,
          "AdamW: params (%lld) / grads (%lld) / state (%lld) sizes differ", (long long)params->layout->numel,
          (long long)grads->layout->numel, (long long)st->pl->numel);
    CHECK(0 <= begin && begin <= end && end <= st->pl->numel, "AdamW range [%lld, %lld) outside [0, %lld)",
          (long long)begin, (long long)end, (long long)st->pl->numel);
    adamw_update(params->data + begin, grads->data + begin, st->m.data + begin, st->v.data + begin, end - begin,
                 &st->h, lr, t);
}

void adamw_step_clipped(adamw_state *st, param_set *params, const param_set *grads, double lr, const clip_result *c) {
    CHECK(c->finite, "adamw_step_clipped with a non-finite gradient norm");
    CHECK(params->layout->numel == st->pl->numel && grads->layout->numel == st->pl->numel, "AdamW: size mismatch");
    st->step++;
    adamw_update_scaled(params->data, grads->data, st->m.data, st->v.data, st->pl->numel, &st->h, lr, st->step,
                        (float)c->coef);
}

void adamw_step(adamw_state *st, param_set *params, const param_set *grads, double lr) {
    st->step++;
    adamw_step_range(st, params, grads, lr, st->step, 0, st->pl->numel);
}

// ---- gradient norm ----

// Fixed chunk size: the partial sums (one per chunk, summed in chunk order) are independent of the
// thread count. Inside a chunk the double accumulation uses 8 interleaved lanes (vectorisable) that
// are combined in a fixed order.
#define SUMSQ_CHUNK ((int64_t)1 << 16)

static double sumsq_chunk(const float *g, int64_t n) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += (double)g[i + k] * (double)g[i + k];
    for (; i < n; i++) acc[i & 7] += (double)g[i] * (double)g[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static double sumsq_impl(const float *g, int64_t n, int parallel) {
    if (n <= 0) return 0.0;
    int64_t nchunks = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    double *part = rlc_malloc((size_t)nchunks * sizeof(double));
#pragma omp parallel for schedule(static) if (parallel && nchunks > 1)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t b = c * SUMSQ_CHUNK, e = b + SUMSQ_CHUNK < n ? b + SUMSQ_CHUNK : n;
        part[c] = sumsq_chunk(g + b, e - b);
    }
    double s = 0;
    for (int64_t c = 0; c < nchunks; c++) s += part[c];
    free(part);
    return s;
}

double grad_sumsq(const float *g, int64_t n) { return sumsq_impl(g, n, 1); }
double grad_sumsq_ref(const float *g, int64_t n) { return sumsq_impl(g, n, 0); }

clip_result grad_clip_finish(double sumsq, double max_norm) {
    clip_result c;
    c.norm = sqrt(sumsq);
    // torch computes the norm in fp32: a norm beyond FLT_MAX is inf there, so treat it as non-finite.
    c.finite = isfinite(c.norm) && c.norm <= (double)FLT_MAX;
    if (!c.finite) { c.coef = 0.0; return c; }
    c.coef = 1.0;
    if (max_norm > 0) {
        double coef = max_norm / (c.norm + 1e-6);
        c.coef = coef < 1.0 ? coef : 1.0;
    }
    return c;
}

void grad_clip_apply(float *g, int64_t n, const clip_result *c) {
    if (!c->finite) {
#pragma omp parallel for schedule(static) if (n > 65536)
        for (int64_t i = 0; i < n; i++) g[i] = 0.0f;
        return;
    }
    if (c->coef == 1.0) return;   // g * 1.0f == g exactly
    const float coef = (float)c->coef;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) g[i] *= coef;
}

clip_result grad_clip_global(param_set *grads, double max_norm) {
    int64_t n = grads->layout->numel;
    clip_result c = grad_clip_finish(grad_sumsq(grads->data, n), max_norm);
    grad_clip_apply(grads->data, n, &c);
    return c;
}

// ---- state file ----

#define ADAMW_MAGIC "RLCADAMW"
#define ADAMW_VERSION 1
#define ADAMW_MAX_EXTRA 16
#define ADAMW_MAX_WEIGHT_DECAY 100.0

typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t n_extra;
    int64_t numel;
    int64_t step;
    double beta1, beta2, eps, weight_decay;
    int64_t extra[ADAMW_MAX_EXTRA];
} adamw_file_header;

void adamw_save(const adamw_state *st, const char *path, const int64_t *extra, int n_extra) {
    CHECK(n_extra >= 0 && n_extra <= ADAMW_MAX_EXTRA, "adamw_save: n_extra=%d > %d", n_extra, ADAMW_MAX_EXTRA);
    adamw_file_header hd;
    memset(&hd, 0, sizeof hd);
    memcpy(hd.magic, ADAMW_MAGIC, 8);
    hd.version = ADAMW_VERSION;
    hd.n_extra = (uint32_t)n_extra;
    hd.numel = st->pl->numel;
    hd.step = st->step;
    hd.beta1 = st->h.beta1;
    hd.beta2 = st->h.beta2;
    hd.eps = st->h.eps;
    hd.weight_decay = st->h.weight_decay;
    for (int i = 0; i < n_extra; i++) hd.extra[i] = extra[i];
    rlc_atomic_writer w;
    if (rlc_atomic_open(&w, path) != 0) rlc_die("%s: cannot write optimizer state: %s", path, strerror(errno));
    rlc_atomic_write(&w, &hd, sizeof hd);
    rlc_atomic_write(&w, st->m.data, (size_t)st->pl->numel * sizeof(float));
    rlc_atomic_write(&w, st->v.data, (size_t)st->pl->numel * sizeof(float));
    if (rlc_atomic_commit(&w) != 0) rlc_die("%s: cannot write optimizer state: %s", path, strerror(errno));
}

int64_t adamw_load_resume(adamw_state *st, const char *path) {
    int64_t extra[1] = {0};
    const int n = adamw_load(st, path, extra, 1);
    if (n < 1) rlc_die("%s: optimizer state has no LR scheduler step", path);
    if (extra[0] < 0 || extra[0] > ADAMW_MAX_STEP)
        rlc_die("%s: corrupt optimizer state header: LR scheduler step %lld (expected 0..%lld)", path,
                (long long)extra[0], (long long)ADAMW_MAX_STEP);
    return extra[0];
}

int adamw_load(adamw_state *st, const char *path, int64_t *extra, int max_extra) {
    FILE *f = fopen(path, "rb");
    if (!f) rlc_die("%s: cannot open optimizer state: %s", path, strerror(errno));
    adamw_file_header hd;
    if (fread(&hd, sizeof hd, 1, f) != 1) rlc_die("%s: truncated optimizer state (no header)", path);
    if (memcmp(hd.magic, ADAMW_MAGIC, 8) != 0) rlc_die("%s: not an rlc optimizer state file (bad magic)", path);
    if (hd.version != ADAMW_VERSION)
        rlc_die("%s: optimizer state version %u, expected %d", path, hd.version, ADAMW_VERSION);
    if (hd.numel != st->pl->numel)
        rlc_die("%s: optimizer state has %lld elements, the model has %lld", path, (long long)hd.numel,
                (long long)st->pl->numel);
    if (hd.n_extra > ADAMW_MAX_EXTRA) rlc_die("%s: corrupt optimizer state header (n_extra %u)", path, hd.n_extra);
    size_t n = (size_t)hd.numel;
    if (fread(st->m.data, sizeof(float), n, f) != n || fread(st->v.data, sizeof(float), n, f) != n)
        rlc_die("%s: truncated optimizer state (expected %lld moments)", path, (long long)hd.numel);
    char c;
    if (fread(&c, 1, 1, f) != 0) rlc_die("%s: trailing bytes after the optimizer state", path);
    fclose(f);
    // values a save never writes, or that make the next step non-finite: refused rather than trained on
    if (hd.step < 0 || hd.step > ADAMW_MAX_STEP)
        rlc_die("%s: corrupt optimizer state header: step %lld (expected 0..%lld)", path, (long long)hd.step,
                (long long)ADAMW_MAX_STEP);
    if (!(hd.beta1 >= 0 && hd.beta1 < 1 && hd.beta2 >= 0 && hd.beta2 < 1))
        rlc_die("%s: corrupt optimizer state header: betas (%g, %g) (expected each in [0, 1))", path, hd.beta1, hd.beta2);
    // eps 0 divides 0 by 0 where v is 0; eps must survive the fp32 cast
    if (!(hd.eps >= 1e-30 && hd.eps <= 1))
        rlc_die("%s: corrupt optimizer state header: eps %g (expected 1e-30..1)", path, hd.eps);
    // decay multiplies each weight by 1 - lr*wd every step: beyond this range it flips sign or overflows
    if (!(hd.weight_decay >= 0 && hd.weight_decay <= ADAMW_MAX_WEIGHT_DECAY))
        rlc_die("%s: corrupt optimizer state header: weight_decay %g (expected 0..%g)", path, hd.weight_decay,
                (double)ADAMW_MAX_WEIGHT_DECAY);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(st->m.data[i]) || !(st->v.data[i] >= 0) || !isfinite(st->v.data[i]))
            rlc_die("%s: corrupt optimizer state: element %zu has m = %g, v = %g (expected finite, v >= 0)", path, i,
                    st->m.data[i], st->v.data[i]);
    st->step = hd.step;
    st->h.beta1 = hd.beta1;
    st->h.beta2 = hd.beta2;
    st->h.eps = hd.eps;
    st->h.weight_decay = hd.weight_decay;
    int k = (int)hd.n_extra;
    for (int i = 0; i < k && i < max_extra; i++) extra[i] = hd.extra[i];
    return k;
}
