// test_optim.c: AdamW, gradient clipping, LR schedules and optimizer state files.
//  - fast kernels against their references (bitwise: same fp32 expression order) and across thread counts;
//  - 5 steps of AdamW + clip_grad_norm_ + LambdaLR against torch (tests/py/optim_ref.py), rel 1e-6;
//  - the non-finite-norm rule (skip the step, zero the grads);
//  - every schedule at every step against the spec formulas and torch's LambdaLR;
//  - save/load round trip and clear errors for bad state files.
#include <math.h>
#include <omp.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "model/params.h"
#include "testlib.h"
#include "trainer/lr_schedule.h"
#include "trainer/optim.h"

static void tiny_config(model_config *c) {
    memset(c, 0, sizeof *c);
    c->vocab_size = 37; c->hidden_size = 16; c->intermediate_size = 24; c->num_hidden_layers = 2;
    c->num_attention_heads = 2; c->num_key_value_heads = 1; c->head_dim = 8; c->max_position_embeddings = 64;
    c->rms_norm_eps = 1e-6f; c->rope_theta = 10000; c->tie_word_embeddings = 0;
    model_config_finalize(c);
}

static void write_floats(const char *dir, const char *name, const float *x, int64_t n) {
    char *p = rlc_path_join(dir, name);
    FILE *f = fopen(p, "wb");
    CHECK(f, "open %s", p);
    CHECK(fwrite(x, sizeof(float), (size_t)n, f) == (size_t)n, "write %s", p);
    fclose(f);
    free(p);
}
static int read_floats(const char *dir, const char *name, float *x, int64_t n) {
    char *p = rlc_path_join(dir, name);
    FILE *f = fopen(p, "rb");
    int ok = f && fread(x, sizeof(float), (size_t)n, f) == (size_t)n;
    if (f) fclose(f);
    free(p);
    return ok;
}
static cJSON *read_json(const char *dir, const char *name) {
    char *p = rlc_path_join(dir, name);
    if (!rlc_file_exists(p)) { free(p); return NULL; }
    char *s = rlc_read_file(p, NULL);
    cJSON *j = cJSON_Parse(s);
    free(s);
    free(p);
    return j;
}
static void write_text(const char *dir, const char *name, const char *text) {
    char *p = rlc_path_join(dir, name);
    CHECK(rlc_write_file_atomic(p, text, strlen(text)) == 0, "write %s", p);
    free(p);
}

// ---- kernels vs references ----
static void test_kernels(void) {
    tl_rng r;
    tl_rng_init(&r, 1);
    const int64_t n = getenv("RLC_SAN") && atoi(getenv("RLC_SAN")) ? 70001 : 300007;   // odd: remainder loops
    float *p = rlc_alloc(n * 4), *g = rlc_alloc(n * 4), *m = rlc_alloc(n * 4), *v = rlc_alloc(n * 4);
    float *p2 = rlc_alloc(n * 4), *m2 = rlc_alloc(n * 4), *v2 = rlc_alloc(n * 4);
    tl_fill_normal(&r, p, n, 1.0f);
    tl_fill_normal(&r, m, n, 0.01f);
    for (int64_t i = 0; i < n; i++) v[i] = tl_uniform(&r, 0.f, 1e-4f);
    memcpy(p2, p, n * 4); memcpy(m2, m, n * 4); memcpy(v2, v, n * 4);
    adamw_hparams h = {0.9, 0.95, 1e-8, 0.1};
    for (int t = 1; t <= 3; t++) {
        tl_fill_normal(&r, g, n, 0.05f);
        adamw_update(p, g, m, v, n, &h, 1e-3, t);
        adamw_update_ref(p2, g, m2, v2, n, &h, 1e-3, t);
    }
    // Same fp32 expression order in both: bitwise equal.
    TL_CHECK(!memcmp(p, p2, n * 4) && !memcmp(m, m2, n * 4) && !memcmp(v, v2, n * 4), "adamw_update == adamw_update_ref bitwise");

    // grad_sumsq: fast == ref bitwise, equal for 1 and 2 threads, and close to a long double sum.
    double s1 = grad_sumsq(g, n), s2 = grad_sumsq_ref(g, n);
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    double s3 = grad_sumsq(g, n);
    omp_set_num_threads(2);
    double s4 = grad_sumsq(g, n);
    omp_set_num_threads(nt);
    long double ld = 0;
    for (int64_t i = 0; i < n; i++) ld += (long double)g[i] * g[i];
    TL_CHECK(s1 == s2 && s1 == s3 && s1 == s4, "grad_sumsq deterministic: %.17g %.17g %.17g %.17g", s1, s2, s3, s4);
    // double accumulation of 3e5 terms: relative error ~1e-15
    TL_CHECK(fabs(s1 - (double)ld) <= 1e-12 * (double)ld, "grad_sumsq vs long double: %.17g vs %.17Lg", s1, ld);
    TL_CHECK(grad_sumsq(g, 0) == 0.0, "grad_sumsq of nothing is 0");

    // clip finish: coef formula and clamping, max_norm <= 0 disables
    clip_result c = grad_clip_finish(16.0, 1.0);
    TL_CHECK(c.finite && c.norm == 4.0 && c.coef == 1.0 / (4.0 + 1e-6), "clip coef = max_norm/(norm+1e-6)");
    c = grad_clip_finish(0.25, 1.0);
    TL_CHECK(c.finite && c.coef == 1.0, "clip coef clamped to 1");
    c = grad_clip_finish(16.0, 0.0);
    TL_CHECK(c.finite && c.coef == 1.0 && c.norm == 4.0, "max_norm 0 disables clipping");
    c = grad_clip_finish(INFINITY, 1.0);
    TL_CHECK(!c.finite, "inf norm is non-finite");
    c = grad_clip_finish(NAN, 1.0);
    TL_CHECK(!c.finite, "nan norm is non-finite");
    c = grad_clip_finish(1e78, 1.0);   // norm 1e39 overflows fp32 (torch's norm dtype)
    TL_CHECK(!c.finite, "norm beyond FLT_MAX is non-finite as in torch's fp32 norm");
    rlc_free(p); rlc_free(g); rlc_free(m); rlc_free(v); rlc_free(p2); rlc_free(m2); rlc_free(v2);
}

// ---- AdamW + clipping + schedule vs torch ----
typedef struct {
    double lr, b1, b2, eps, wd, max_norm, gstd;
    lr_sched_type sched;
    int64_t warmup, total;
    double min;
    int nan_step;   // step whose gradient gets a NaN (-1 none)
    int inf_step;
} adam_case;

static void test_adamw_vs_torch(int have_torch) {
    const adam_case cases[] = {
        {1e-3, 0.9, 0.999, 1e-8, 0.01, 1.0, 0.05, LR_CONSTANT, 0, 5, 0.0, -1, -1},   // verl defaults, clip active
        {3e-2, 0.9, 0.95, 1e-8, 0.1, 100.0, 0.02, LR_COSINE, 2, 5, 0.1, -1, -1},     // clip inactive, warmup+cosine
        {1e-5, 0.8, 0.99, 1e-6, 0.0, 0.5, 0.3, LR_WSD_LINEAR, 1, 5, 0.2, 2, -1},    // NaN grad at step 2
        {5e-4, 0.9, 0.999, 1e-8, 0.05, 1.0, 0.01, LR_CONSTANT, 3, 5, 0.0, -1, 1},   // inf grad at step 1, warmup
    };
    model_config cfg;
    tiny_config(&cfg);
    param_layout pl;
    param_layout_init(&pl, &cfg);
    const int steps = 5;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const adam_case *k = &cases[ci];
        char *dir = tl_tmpdir("optim");
        tl_rng r;
        tl_rng_init(&r, 100 + ci);
        param_set params, grads;
        param_set_init(&params, &pl);
        param_set_init(&grads, &pl);
        tl_fill_normal(&r, params.data, pl.numel, 0.5f);
        write_floats(dir, "p0.bin", params.data, pl.numel);
        adamw_hparams h = {k->b1, k->b2, k->eps, k->wd};
        adamw_state st;
        adamw_init(&st, &pl, &h);
        lr_schedule ls;
        lr_schedule_init(&ls, k->sched, k->lr, k->warmup, k->total, k->min);
        // the fused path (engine): clip coefficient applied inside the AdamW pass, grads left unscaled
        param_set params2, graw;
        param_set_init(&params2, &pl);
        param_set_init(&graw, &pl);
        memcpy(params2.data, params.data, pl.numel * 4);
        adamw_state st2;
        adamw_init(&st2, &pl, &h);
        double norms[8], lrs[8];
        int skipped[8];
        for (int s = 0; s < steps; s++) {
            tl_fill_normal(&r, grads.data, pl.numel, (float)k->gstd);
            if (s == k->nan_step) grads.data[pl.numel / 3] = NAN;
            if (s == k->inf_step) grads.data[7] = INFINITY;
            char name[32];
            snprintf(name, sizeof name, "g%d.bin", s);
            write_floats(dir, name, grads.data, pl.numel);
            lrs[s] = lr_schedule_current(&ls);
            memcpy(graw.data, grads.data, pl.numel * 4);
            clip_result c2 = grad_clip_finish(grad_sumsq(graw.data, pl.numel), k->max_norm);
            if (c2.finite) adamw_step_clipped(&st2, &params2, &graw, lrs[s], &c2);
            clip_result c = grad_clip_global(&grads, k->max_norm);
            norms[s] = c.norm;
            skipped[s] = !c.finite;
            if (c.finite) adamw_step(&st, &params, &grads, lrs[s]);
            else {
                int zero = 1;
                for (int64_t i = 0; i < pl.numel; i++) zero &= grads.data[i] == 0.0f;
                TL_CHECK(zero, "case %zu step %d: non-finite norm zeroes the gradients", ci, s);
            }
            lr_schedule_step(&ls);
        }
        TL_CHECK(!memcmp(params2.data, params.data, pl.numel * 4) && !memcmp(st2.m.data, st.m.data, pl.numel * 4) &&
                 !memcmp(st2.v.data, st.v.data, pl.numel * 4) && st2.step == st.step,
                 "case %zu: fused clip+AdamW == clip in place + AdamW, bitwise", ci);
        adamw_free(&st2);
        param_set_free(&params2);
        param_set_free(&graw);
        int expect_skips = (k->nan_step >= 0) + (k->inf_step >= 0);
        TL_CHECK(st.step == steps - expect_skips, "case %zu: optimizer step count %lld", ci, (long long)st.step);
        if (!have_torch) goto next;
        {
            char spec[4096];
            int o = snprintf(spec, sizeof spec,
                             "{\"numel\": %lld, \"lr\": %.17g, \"beta1\": %.17g, \"beta2\": %.17g, \"eps\": %.17g, "
                             "\"weight_decay\": %.17g, \"max_norm\": %.17g, \"steps\": %d, \"sched\": {\"type\": \"%s\", "
                             "\"warmup\": %lld, \"total\": %lld, \"min\": %.17g}, \"tensors\": [",
                             (long long)pl.numel, k->lr, k->b1, k->b2, k->eps, k->wd, k->max_norm, steps,
                             lr_sched_type_name(k->sched), (long long)k->warmup, (long long)k->total, k->min);
            for (int t = 0; t < pl.n_tensors; t++)
                o += snprintf(spec + o, sizeof spec - o, "%s[%lld, %lld]", t ? ", " : "", (long long)pl.tensors[t].offset,
                              (long long)pl.tensors[t].numel);
            snprintf(spec + o, sizeof spec - o, "]}");
            write_text(dir, "spec.json", spec);
            int rc = tl_system("/usr/bin/python3 tests/py/optim_ref.py adamw %s", dir);
            (void)rc;
            cJSON *out = read_json(dir, "out.json");
            TL_CHECK(out != NULL, "case %zu: torch reference produced out.json", ci);
            if (!out) goto next;
            float *want = rlc_alloc(pl.numel * 4);
            char nm[64];
            snprintf(nm, sizeof nm, "adamw case %zu params after %d steps", ci, steps);
            // 5 steps of fp32 elementwise math in the same order as torch: differences come only from
            // the clip coefficient (fp32 norm in torch vs double here), ~1e-7 relative.
            if (read_floats(dir, "p.bin", want, pl.numel)) tl_check_close(nm, params.data, want, pl.numel, 1e-6);
            snprintf(nm, sizeof nm, "adamw case %zu exp_avg", ci);
            if (read_floats(dir, "m.bin", want, pl.numel)) tl_check_close(nm, st.m.data, want, pl.numel, 1e-6);
            snprintf(nm, sizeof nm, "adamw case %zu exp_avg_sq", ci);
            if (read_floats(dir, "v.bin", want, pl.numel)) tl_check_close(nm, st.v.data, want, pl.numel, 1e-6);
            rlc_free(want);
            cJSON *jn = cJSON_GetObjectItem(out, "norms"), *jl = cJSON_GetObjectItem(out, "lrs"),
                  *js = cJSON_GetObjectItem(out, "skipped");
            for (int s = 0; s < steps; s++) {
                double tn = cJSON_GetArrayItem(jn, s)->valuedouble, tlr = cJSON_GetArrayItem(jl, s)->valuedouble;
                int ts = cJSON_GetArrayItem(js, s)->valueint;
                TL_CHECK(ts == skipped[s], "case %zu step %d: skipped %d, torch %d", ci, s, skipped[s], ts);
                if (!skipped[s]) // torch's norm is fp32: agreement to ~1e-7
                    TL_CHECK(fabs(norms[s] - tn) <= 1e-6 * fabs(tn), "case %zu step %d: grad norm %.9g, torch %.9g", ci, s, norms[s], tn);
                TL_CHECK(fabs(lrs[s] - tlr) <= 1e-15 * fabs(tlr), "case %zu step %d: lr %.17g, torch %.17g", ci, s, lrs[s], tlr);
            }
            cJSON_Delete(out);
        }
    next:
        tl_system("rm -rf %s", dir);
        free(dir);
        adamw_free(&st);
        param_set_free(&params);
        param_set_free(&grads);
    }
    param_layout_free(&pl);
}

// ---- schedules ----
static double spec_factor(lr_sched_type t, int64_t W, int64_t S, double mn, int64_t s) {
    // Written from shared/spec/verl-grpo.md §7, independently of lr_schedule.c.
    if (t == LR_CONSTANT) return s < W ? (double)s / (double)(W > 1 ? W : 1) : 1.0;
    if (t == LR_COSINE) {
        if (s < W) return (double)s / (double)(W > 1 ? W : 1);
        double p = (double)(s - W) / (double)(S - W > 1 ? S - W : 1);
        double f = cos(M_PI * 0.5 * 2 * p) * (1 - mn) / 2 + (1 + mn) / 2;
        return f > mn ? f : mn;
    }
    int64_t decay = S - W, stable = S + 1 - W - decay;
    if (s < W) return (double)(s + 1) / W;
    if (s < W + stable) return 1.0;
    double p = (double)(s + 1 - W - stable) / decay;
    double g = t == LR_WSD_LINEAR ? 1 - p : t == LR_WSD_SQRT ? 1 - sqrt(p) : 0.5 * (1 + cos(M_PI * p));
    return mn + (1 - mn) * g;
}

typedef struct { lr_sched_type t; double base; int64_t W, S; double mn; int n; } sched_case;

static void test_schedules(int have_torch) {
    const sched_case cases[] = {
        {LR_CONSTANT, 1e-6, 0, 20, 0, 25},   {LR_CONSTANT, 1e-3, 5, 20, 0, 25},  {LR_CONSTANT, 2e-5, 1, 3, 0, 6},
        {LR_COSINE, 1e-6, 0, 20, 0, 25},     {LR_COSINE, 1e-3, 4, 20, 0.1, 25}, {LR_COSINE, 5e-4, 3, 3, 0.0, 6},
        {LR_COSINE, 1e-4, 0, 1, 0.5, 4},     {LR_WSD_LINEAR, 1e-6, 0, 10000, 0, 40},
        {LR_WSD_LINEAR, 1e-3, 3, 12, 0.1, 16}, {LR_WSD_LINEAR, 1e-3, 0, 12, 1.0, 14},
        {LR_WSD_SQRT, 1e-3, 2, 10, 0.0, 12}, {LR_WSD_COSINE, 1e-3, 2, 10, 0.05, 12},
    };
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    int bad = 0;
    for (int ci = 0; ci < nc; ci++) {
        const sched_case *c = &cases[ci];
        lr_schedule ls;
        lr_schedule_init(&ls, c->t, c->base, c->W, c->S, c->mn);
        for (int s = 0; s < c->n; s++) {
            double want = c->base * spec_factor(c->t, c->W, c->S, c->mn, s);
            double got = lr_schedule_current(&ls);
            if (!(fabs(got - want) <= 1e-14 * c->base)) {
                if (bad++ < 5) fprintf(stderr, "sched case %d step %d: %.17g, spec %.17g\n", ci, s, got, want);
            }
            double next = lr_schedule_step(&ls);
            if (next != lr_schedule_lr_at(&ls, s + 1)) bad++;
        }
    }
    TL_CHECK(bad == 0, "schedules match the spec formulas at every step (%d mismatches)", bad);
    // hand values
    lr_schedule ls;
    lr_schedule_init(&ls, LR_COSINE, 1.0, 2, 10, 0.0);
    TL_CHECK(lr_schedule_lr_at(&ls, 0) == 0.0 && lr_schedule_lr_at(&ls, 1) == 0.5 && lr_schedule_lr_at(&ls, 2) == 1.0 &&
             fabs(lr_schedule_lr_at(&ls, 6) - 0.5) < 1e-15 && fabs(lr_schedule_lr_at(&ls, 10)) < 1e-15,
             "cosine W=2 S=10: 0, 0.5, 1, .., 0.5 at the middle, 0 at the end");
    lr_schedule_init(&ls, LR_WSD_LINEAR, 1.0, 0, 10000, 0.0);
    TL_CHECK(lr_schedule_lr_at(&ls, 0) == 1.0 && lr_schedule_lr_at(&ls, 1) == 1.0 - 1.0 / 10000 &&
             lr_schedule_lr_at(&ls, 100) == 1.0 - 100.0 / 10000,
             "torchtitan defaults: f(0)=1, f(s)=1-s/10000");
    TL_CHECK(lr_resolve_warmup(-1, 0.1, 105) == 10 && lr_resolve_warmup(0, 0.25, 10) == 2 &&
             lr_resolve_warmup(7, 0.5, 100) == 7 && lr_resolve_warmup(-1, 0.0, 100) == 0,
             "warmup: lr_warmup_steps <= 0 delegates to int(ratio * total)");
    TL_CHECK(lr_sched_type_parse("cosine") == LR_COSINE && lr_sched_type_parse("constant") == LR_CONSTANT &&
             lr_sched_type_parse("linear") == LR_WSD_LINEAR && lr_sched_type_parse("bogus") == -1, "schedule names");

    if (!have_torch) return;
    char *dir = tl_tmpdir("sched");
    char *spec = rlc_malloc(16384);
    int o = snprintf(spec, 16384, "{\"cases\": [");
    for (int ci = 0; ci < nc; ci++)
        o += snprintf(spec + o, 16384 - o, "%s{\"type\": \"%s\", \"base_lr\": %.17g, \"warmup\": %lld, \"total\": %lld, "
                      "\"min\": %.17g, \"n\": %d}", ci ? ", " : "", lr_sched_type_name(cases[ci].t), cases[ci].base,
                      (long long)cases[ci].W, (long long)cases[ci].S, cases[ci].mn, cases[ci].n);
    snprintf(spec + o, 16384 - o, "]}");
    write_text(dir, "spec.json", spec);
    free(spec);
    tl_system("/usr/bin/python3 tests/py/optim_ref.py sched %s", dir);
    cJSON *out = read_json(dir, "out.json");
    TL_CHECK(out != NULL, "torch LambdaLR reference ran");
    if (out) {
        int tbad = 0, total = 0;
        for (int ci = 0; ci < nc; ci++) {
            lr_schedule l2;
            lr_schedule_init(&l2, cases[ci].t, cases[ci].base, cases[ci].W, cases[ci].S, cases[ci].mn);
            cJSON *arr = cJSON_GetArrayItem(out, ci);
            for (int s = 0; s < cases[ci].n; s++, total++) {
                double want = cJSON_GetArrayItem(arr, s)->valuedouble, got = lr_schedule_lr_at(&l2, s);
                // same double formulas as the Python lambdas; allow 1 ulp-level slack for libm cos
                if (!(fabs(got - want) <= 1e-15 * cases[ci].base)) {
                    if (tbad++ < 5) fprintf(stderr, "LambdaLR case %d step %d: %.17g, torch %.17g\n", ci, s, got, want);
                }
            }
        }
        TL_CHECK(tbad == 0, "schedules match torch LambdaLR at every step (%d of %d differ)", tbad, total);
        cJSON_Delete(out);
    }
    tl_system("rm -rf %s", dir);
    free(dir);
}

// ---- state files ----
typedef struct { const param_layout *pl; const char *path; } load_job;
static int child_exit(void (*fn)(const load_job *), const load_job *arg) {
    fflush(stdout); fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        fn(arg);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void load_in_child(const load_job *j) {
    adamw_hparams h = adamw_hparams_default();
    adamw_state st;
    adamw_init(&st, j->pl, &h);
    int64_t ex[4];
    adamw_load(&st, j->path, ex, 4);
}

static void test_state_file(void) {
    model_config cfg;
    tiny_config(&cfg);
    param_layout pl;
    param_layout_init(&pl, &cfg);
    adamw_hparams h = {0.9, 0.95, 1e-7, 0.02};
    adamw_state a, b;
    adamw_init(&a, &pl, &h);
    tl_rng r;
    tl_rng_init(&r, 5);
    tl_fill_normal(&r, a.m.data, pl.numel, 1);
    tl_fill_normal(&r, a.v.data, pl.numel, 1);
    for (int64_t i = 0; i < pl.numel; i++) a.v.data[i] *= a.v.data[i];   // a second moment is >= 0
    a.step = 17;
    char *dir = tl_tmpdir("optstate");
    char *path = rlc_path_join(dir, "optim.bin");
    int64_t extra[2] = {42, -3};
    adamw_save(&a, path, extra, 2);
    adamw_hparams h0 = adamw_hparams_default();
    adamw_init(&b, &pl, &h0);
    int64_t got[4] = {0};
    int ne = adamw_load(&b, path, got, 4);
    TL_CHECK(ne == 2 && got[0] == 42 && got[1] == -3, "state file extras round trip");
    TL_CHECK(b.step == 17 && b.h.beta2 == 0.95 && b.h.eps == 1e-7 && b.h.weight_decay == 0.02, "state file step and hparams");
    TL_CHECK(!memcmp(a.m.data, b.m.data, pl.numel * 4) && !memcmp(a.v.data, b.v.data, pl.numel * 4), "state file moments bitwise");
    char *tmpname = rlc_path_join(dir, "optim.bin.tmp");
    TL_CHECK(!rlc_file_exists(tmpname), "no temp file left behind");
    free(tmpname);

    load_job job = {&pl, path};
    TL_CHECK(child_exit(load_in_child, &job) == 0, "loading a good state file succeeds");
    char *bad = rlc_path_join(dir, "bad.bin");
    char junk[512];
    memset(junk, 'x', sizeof junk - 1);
    junk[sizeof junk - 1] = 0;   // longer than the header: exercises the magic check
    write_text(dir, "bad.bin", junk);
    printf("(expected error follows)\n");
    job.path = bad;
    TL_CHECK(child_exit(load_in_child, &job) == 1, "bad magic: one-line error, exit 1");
    // truncated: header of the real file only
    size_t len;
    char *buf = rlc_read_file(path, &len);
    CHECK(rlc_write_file_atomic(bad, buf, len / 2) == 0, "write");
    printf("(expected error follows)\n");
    TL_CHECK(child_exit(load_in_child, &job) == 1, "truncated state: one-line error, exit 1");
    free(buf);
    // wrong model size
    model_config c2 = cfg;
    c2.vocab_size = 38;
    param_layout pl2;
    param_layout_init(&pl2, &c2);
    load_job job2 = {&pl2, path};
    printf("(expected error follows)\n");
    TL_CHECK(child_exit(load_in_child, &job2) == 1, "state for another model size: one-line error, exit 1");
    param_layout_free(&pl2);
    // values no save of a real run writes: a negative second moment, a NaN first moment, beta1 >= 1, step < 0
    for (int k = 0; k < 4; k++) {
        adamw_state c;
        adamw_init(&c, &pl, &h);
        memcpy(c.m.data, a.m.data, (size_t)pl.numel * 4);
        memcpy(c.v.data, a.v.data, (size_t)pl.numel * 4);
        if (k == 0) c.v.data[pl.numel / 2] = -1e-8f;
        if (k == 1) c.m.data[pl.numel - 1] = NAN;
        if (k == 2) c.h.beta1 = 1.0;
        if (k == 3) c.step = -1;
        adamw_save(&c, bad, extra, 2);
        adamw_free(&c);
        printf("(expected error follows)\n");
        TL_CHECK(child_exit(load_in_child, &job) == 1, "corrupt state %d (v < 0, m NaN, beta1 1, step -1): one-line error", k);
    }
    tl_system("rm -rf %s", dir);
    free(bad); free(path); free(dir);
    adamw_free(&a); adamw_free(&b);
    param_layout_free(&pl);
}

int main(void) {
    int have_torch = tl_have_torch();
    if (!have_torch) tl_skip("torch not importable under /usr/bin/python3: torch comparisons skipped");
    test_kernels();
    test_adamw_vs_torch(have_torch);
    test_schedules(have_torch);
    test_state_file();
    return tl_summary();
}
