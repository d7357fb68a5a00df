// testlib.h: a tiny test harness. Each test binary ends with tl_summary(), which prints
// "N passed, N failed" (the line tests/run.sh and CI read) and returns the exit code.
#pragma once
#include <math.h>
#include <stdint.h>
#include <stdio.h>

extern int tl_passed, tl_failed, tl_skipped;

// Record one check. `what` names it; on failure prints file:line and the message.
#define TL_CHECK(cond, ...) tl_check_((cond), __FILE__, __LINE__, __VA_ARGS__)
void tl_check_(int ok, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void tl_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Max relative error of got vs want over n elements: max|g-w| / max(max|w|, tiny). This is the
// "relative error" the standards ask for: normalised by the tensor's scale, so tiny elements near zero
// do not blow it up. Also reports the worst index.
double tl_rel_err(const float *got, const float *want, int64_t n, int64_t *worst);
// Check rel err <= tol, printing name, err, worst element (index, got, want) on failure.
int tl_check_close(const char *name, const float *got, const float *want, int64_t n, double tol);

// Deterministic RNG for tests (xorshift64*): uniform in [lo, hi) and normal(0, std).
typedef struct { uint64_t s; } tl_rng;
void tl_rng_init(tl_rng *r, uint64_t seed);
float tl_uniform(tl_rng *r, float lo, float hi);
float tl_normal(tl_rng *r, float std);
void tl_fill_normal(tl_rng *r, float *x, int64_t n, float std);
// A fresh rlc_alloc'd (n) buffer filled by tl_fill_normal; free with rlc_free.
float *tl_alloc_normal(tl_rng *r, int64_t n, float std);

// Run a shell command; returns its exit status (or -1). Output goes to ours.
int tl_system(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// 1 if Debian's torch imports under /usr/bin/python3 (tests that need it skip otherwise).
int tl_have_torch(void);
// A fresh temporary directory (mkdtemp under $TMPDIR or /tmp); malloc'd path.
char *tl_tmpdir(const char *tag);
// Path of the rlc binary under test ($RLC_BUILD/rlc, default build/rlc).
const char *tl_rlc_bin(void);
// Path of the repository root (the cwd when run from tests/run.sh).
int tl_summary(void);
