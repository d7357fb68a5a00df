// fuzz_config.c: a model's config.json (every family's keys, RoPE dicts, layer types, ids), then the parameter
// layout it implies (sizes only: nothing of the model's size is allocated).
#include "fuzz_common.h"
#include "model/config.h"
#include "model/params.h"

static void body(const uint8_t *data, size_t n) {
    const char *p = fuzz_file("config.json", data, n);
    model_config c;
    model_config_load(&c, p);
    param_layout pl;
    param_layout_init(&pl, &c);
    param_layout_free(&pl);
}
FUZZ_TARGET(body)
