// finite.c: non-finite scans of parameter buffers (see finite.h).
#include "trainer/finite.h"

#include <math.h>

#include "core/common.h"

finite_report finite_scan_ref(const float *data, const param_layout *pl) {
    finite_report r = {-1, 0, 0.f};
    for (int i = 0; i < pl->n_tensors; i++) {
        const param_tensor *t = &pl->tensors[i];
        for (int64_t j = 0; j < t->numel; j++)
            if (!isfinite(data[t->offset + j])) {
                r.tensor = i;
                r.element = j;
                r.value = data[t->offset + j];
                return r;
            }
    }
    return r;
}

#define FINITE_CHUNK ((int64_t)1 << 16)

finite_report finite_scan(const float *data, const param_layout *pl) {
    // chunks flag any non-finite value (x - x is 0 exactly for finite x, NaN otherwise: one branch-free pass);
    // the lowest flagged chunk is then searched in order, so the result equals the reference's
    const int64_t n = pl->numel, nc = (n + FINITE_CHUNK - 1) / FINITE_CHUNK;
    int64_t first = nc;
#pragma omp parallel for schedule(static) reduction(min : first) if (nc > 16)
    for (int64_t c = 0; c < nc; c++) {
        const int64_t a = c * FINITE_CHUNK, b = a + FINITE_CHUNK < n ? a + FINITE_CHUNK : n;
        float acc = 0.f;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = a; i < b; i++) acc += data[i] - data[i];
        if (acc != 0.f || isnan(acc)) first = c < first ? c : first;
    }
    finite_report r = {-1, 0, 0.f};
    if (first == nc) return r;
    for (int64_t i = first * FINITE_CHUNK; i < n; i++) {
        if (isfinite(data[i])) continue;
        for (int k = 0; k < pl->n_tensors; k++) {
            const param_tensor *t = &pl->tensors[k];
            if (i >= t->offset && i < t->offset + t->numel) {
                r.tensor = k;
                r.element = i - t->offset;
                r.value = data[i];
                return r;
            }
        }
    }
    return r;
}

void finite_check_params(const float *data, const param_layout *pl, const char *what, const char *hint) {
    const finite_report r = finite_scan(data, pl);
    if (r.tensor < 0) return;
    rlc_die("%s: tensor '%s' element %lld is %g%s%s", what, pl->tensors[r.tensor].name, (long long)r.element,
            (double)r.value, hint && *hint ? "; " : "", hint ? hint : "");
}

void finite_check_save(const float *params, const float *m, const float *v, const param_layout *pl, int64_t step) {
    static const char HINT[] = "the checkpoint is not written and the last good one stays the latest (lower the "
                               "learning rate or check the data)";
    const float *buf[3] = {params, m, v};
    static const char *const NAMES[3] = {"the weights", "the AdamW first moment", "the AdamW second moment"};
    for (int i = 0; i < 3; i++) {
        if (!buf[i]) continue;
        char what[96];
        snprintf(what, sizeof what, "training step %lld: %s went non-finite", (long long)step, NAMES[i]);
        finite_check_params(buf[i], pl, what, HINT);
    }
}
