// config_write.c: the trainer configuration as YAML text, in the key table's order and nesting, every value
// written so that it reads back to the same value (numbers round-trip, floats keep a dot for YAML 1.1 readers,
// strings quoted), and saved atomically.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "trainer/config_internal.h"

static void put_float(rlc_strbuf *b, double x) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.15g", x);
    if (strtod(buf, NULL) != x) snprintf(buf, sizeof buf, "%.17g", x);
    // Make it read back as a float in YAML 1.1 readers too (PyYAML wants a dot in 1e-06 -> 1.0e-06).
    if (!strchr(buf, '.') && !strchr(buf, 'n') && !strchr(buf, 'i')) {
        char *e = strchr(buf, 'e');
        if (e) {
            char tail[32];
            snprintf(tail, sizeof tail, "%s", e);
            snprintf(e, sizeof buf - (size_t)(e - buf), ".0%s", tail);
        } else strcat(buf, ".0");
    }
    rlc_sb_puts(b, buf);
}
static void put_str(rlc_strbuf *b, const char *s) { rlc_sb_json_str(b, s, strlen(s)); }

static void put_value(rlc_strbuf *b, const rlc_train_config *c, const cfg_entry *e) {
    const char *base = (const char *)c + e->off;
    switch (e->type) {
    case CT_BOOL: rlc_sb_puts(b, *(const int *)base == RLC_CFG_NULL_BOOL ? "null" : *(const int *)base ? "true" : "false"); break;
    case CT_INT: {
        int64_t x = *(const int64_t *)base;
        if (x == RLC_CFG_NULL) rlc_sb_puts(b, "null");
        else rlc_sb_printf(b, "%lld", (long long)x);
        break;
    }
    case CT_FLOAT: {
        double x = *(const double *)base;
        if (isnan(x)) rlc_sb_puts(b, "null");
        else put_float(b, x);
        break;
    }
    case CT_STR: {
        const char *s = *(char *const *)base;
        if (!s) rlc_sb_puts(b, "null");
        else put_str(b, s);
        break;
    }
    case CT_STRLIST:
    case CT_STRORLIST: {
        const rlc_strlist *l = (const rlc_strlist *)base;
        if (l->scalar && l->n == 1) {
            put_str(b, l->v[0]);
            break;
        }
        rlc_sb_putc(b, '[');
        for (int64_t i = 0; i < l->n; i++) {
            if (i) rlc_sb_puts(b, ", ");
            put_str(b, l->v[i]);
        }
        rlc_sb_putc(b, ']');
        break;
    }
    case CT_FLOAT2: {
        const double *d = (const double *)base;
        rlc_sb_putc(b, '[');
        put_float(b, d[0]);
        rlc_sb_puts(b, ", ");
        put_float(b, d[1]);
        rlc_sb_putc(b, ']');
        break;
    }
    }
}

char *rlc_config_to_yaml(const rlc_train_config *c) {
    rlc_strbuf b = {0};
    rlc_sb_puts(&b, "# rlc resolved config (verl key names)\n");
    const char *prev = "";
    for (int i = 0; i < cfg_n_keys; i++) {
        const char *k = cfg_keys[i].key;
        // common prefix of whole components with the previous key
        size_t common = 0;
        for (size_t j = 0; prev[j] && k[j] && prev[j] == k[j]; j++)
            if (k[j] == '.') common = j + 1;
        int depth = 0;
        for (size_t j = 0; j < common; j++) depth += k[j] == '.';
        const char *p = k + common;
        for (;;) {
            const char *dot = strchr(p, '.');
            for (int d = 0; d < depth; d++) rlc_sb_puts(&b, "  ");
            if (!dot) {
                rlc_sb_printf(&b, "%s: ", p);
                put_value(&b, c, &cfg_keys[i]);
                rlc_sb_putc(&b, '\n');
                break;
            }
            rlc_sb_append(&b, p, (size_t)(dot - p));
            rlc_sb_puts(&b, ":\n");
            depth++;
            p = dot + 1;
        }
        prev = k;
    }
    return rlc_sb_take(&b);
}

void rlc_config_save(const rlc_train_config *c, const char *path) {
    char *y = rlc_config_to_yaml(c);
    if (rlc_write_file_atomic(path, y, strlen(y)) != 0) rlc_die("%s: cannot write the config: %s", path, strerror(errno));
    free(y);
}
