#include "testlib.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"

int tl_passed, tl_failed, tl_skipped;

void tl_check_(int ok, const char *file, int line, const char *fmt, ...) {
    if (ok) { tl_passed++; return; }
    tl_failed++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void tl_skip(const char *fmt, ...) {
    tl_skipped++;
    va_list ap;
    va_start(ap, fmt);
    printf("SKIP: ");
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
}

double tl_rel_err(const float *got, const float *want, int64_t n, int64_t *worst) {
    double scale = 0, maxd = 0;
    int64_t wi = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = fabs((double)want[i]);
        if (a > scale) scale = a;
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= maxd)) { maxd = d; wi = i; }   // also catches NaN
    }
    if (worst) *worst = wi;
    if (scale < 1e-30) scale = 1e-30;
    return maxd / scale;
}

int tl_check_close(const char *name, const float *got, const float *want, int64_t n, double tol) {
    int64_t wi = 0;
    double e = tl_rel_err(got, want, n, &wi);
    int ok = e <= tol;
    if (ok) tl_passed++;
    else {
        tl_failed++;
        fprintf(stderr, "FAIL %s: rel err %.3g > %.1g; worst at [%lld]: got %.9g want %.9g\n", name, e, tol,
                (long long)wi, n ? got[wi] : 0.f, n ? want[wi] : 0.f);
    }
    return ok;
}

void tl_rng_init(tl_rng *r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull; if (!r->s) r->s = 1; }
static uint64_t next(tl_rng *r) {
    r->s ^= r->s >> 12; r->s ^= r->s << 25; r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}
float tl_uniform(tl_rng *r, float lo, float hi) { return lo + (hi - lo) * (float)((next(r) >> 40) * (1.0 / 16777216.0)); }
float tl_normal(tl_rng *r, float std) {
    double u1 = ((next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = ((next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    return (float)(std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
void tl_fill_normal(tl_rng *r, float *x, int64_t n, float std) { for (int64_t i = 0; i < n; i++) x[i] = tl_normal(r, std); }
float *tl_alloc_normal(tl_rng *r, int64_t n, float std) {
    float *x = rlc_alloc((size_t)n * sizeof(float));
    tl_fill_normal(r, x, n, std);
    return x;
}

int tl_system(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    fflush(stdout); fflush(stderr);
    int rc = system(cmd);
    if (rc == -1) return -1;
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

int tl_have_torch(void) {
    static int have = -1;
    if (have < 0) have = system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
    return have;
}

char *tl_tmpdir(const char *tag) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    char *p = malloc(strlen(base) + strlen(tag) + 32);
    sprintf(p, "%s/rlc-%s-XXXXXX", base, tag);
    if (!mkdtemp(p)) { perror("mkdtemp"); exit(2); }
    return p;
}

const char *tl_rlc_bin(void) {
    static char path[4096];
    if (!path[0]) {
        const char *b = getenv("RLC_BUILD");
        snprintf(path, sizeof path, "%s/rlc", b && *b ? b : "build");
    }
    return path;
}

int tl_summary(void) {
    printf("%d passed, %d failed", tl_passed, tl_failed);
    if (tl_skipped) printf(", %d skipped", tl_skipped);
    printf("\n");
    return tl_failed ? 1 : 0;
}
