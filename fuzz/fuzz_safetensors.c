// fuzz_safetensors.c: a model.safetensors file: header length, JSON header, dtypes, shapes, offsets; every
// tensor that opens is converted to fp32 (bounded by the input's size).
#include <stdlib.h>

#include "fuzz_common.h"
#include "io/safetensors.h"

static void body(const uint8_t *data, size_t n) {
    const char *p = fuzz_file("model.safetensors", data, n);
    st_file f;
    char err[1024];
    if (st_file_open_err(&f, p, err, sizeof err) != 0) return;
    for (int i = 0; i < f.n_tensors; i++) {
        const st_tensor *t = &f.tensors[i];
        if (t->numel > (int64_t)1 << 20) continue;
        if (t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16 && t->dtype != ST_F64) continue;
        float *x = malloc((size_t)(t->numel ? t->numel : 1) * sizeof(float));
        st_tensor_to_f32(t, x, p);
        free(x);
    }
    st_file_close(&f);
}
FUZZ_TARGET(body)
