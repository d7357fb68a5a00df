// rl_testutil.h: reading the float64 arrays the PyTorch references under tests/py/ write (DIR/NAME.f64, raw
// little-endian doubles), shared by the RL tests (test_rl.c, test_ppo.c, test_policy_losses.c, test_rollout_corr.c).
#pragma once
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"

// DIR/NAME.f64 as doubles (malloc'd); *n (may be NULL) = the element count. Dies if the file is missing.
static inline double *tu_load_f64(const char *dir, const char *name, int64_t *n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.f64", dir, name);
    size_t len;
    double *d = (double *)rlc_read_file(path, &len);
    if (n) *n = (int64_t)(len / 8);
    return d;
}

// The same as floats (malloc'd, at least one element).
static inline float *tu_load_f32(const char *dir, const char *name, int64_t *n) {
    int64_t k;
    double *d = tu_load_f64(dir, name, &k);
    float *f = rlc_malloc((size_t)(k ? k : 1) * sizeof(float));
    for (int64_t i = 0; i < k; i++) f[i] = (float)d[i];
    free(d);
    if (n) *n = k;
    return f;
}
