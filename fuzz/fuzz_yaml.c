// fuzz_yaml.c: the trainer YAML (one document, nesting limit, keys, types, ranges) and, after a line "%%",
// dotted key=value overrides, one per line; then the config is finalized as `rlc train` does.
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "trainer/config.h"

static void body(const uint8_t *data, size_t n) {
    char *s = fuzz_cstr(data, n);
    char *ov = strstr(s, "\n%%\n");
    size_t yaml_n = ov ? (size_t)(ov - s) : n;
    const char *p = fuzz_file("train.yaml", data, yaml_n);
    rlc_train_config c;
    rlc_config_init(&c);
    rlc_config_load_yaml(&c, p);
    if (ov) {
        for (char *line = strtok(ov + 4, "\n"); line; line = strtok(NULL, "\n")) rlc_config_override(&c, line);
    }
    rlc_config_finalize(&c);
    rlc_config_free(&c);
    free(s);
}
FUZZ_TARGET(body)
