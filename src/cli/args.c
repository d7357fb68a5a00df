// args.c: tiny option parser with clear errors for the subcommands.
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/common.h"

void cli_args_init(cli_args *a, int argc, char **argv) {
    a->argc = argc;
    a->argv = argv;
    a->used = rlc_calloc((size_t)argc + 1, 1);
    a->cmd = argv[0];
    a->used[0] = 1;
}
void cli_args_free(cli_args *a) { free(a->used); }

static int find(cli_args *a, const char *name, const char **val) {
    size_t n = strlen(name);
    for (int i = 1; i < a->argc; i++) {
        const char *s = a->argv[i];
        if (s[0] != '-' || s[1] != '-' || strncmp(s + 2, name, n) != 0) continue;
        if (s[2 + n] == '=') { a->used[i] = 1; *val = s + 3 + n; return 1; }
        if (s[2 + n] == 0) {
            a->used[i] = 1;
            if (val) {
                if (i + 1 >= a->argc) rlc_die("%s: option --%s needs a value", a->cmd, name);
                a->used[i + 1] = 1;
                *val = a->argv[i + 1];
            }
            return 1;
        }
    }
    return 0;
}

const char *cli_opt(cli_args *a, const char *name) {
    const char *v = NULL;
    return find(a, name, &v) ? v : NULL;
}
const char *cli_opt_req(cli_args *a, const char *name) {
    const char *v = cli_opt(a, name);
    if (!v) rlc_die("%s: missing required option --%s", a->cmd, name);
    return v;
}
int cli_flag(cli_args *a, const char *name) { return find(a, name, NULL); }

long long cli_int(cli_args *a, const char *name, long long def, long long lo, long long hi) {
    const char *v = cli_opt(a, name);
    if (!v) return def;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end) rlc_die("%s: --%s expects an integer, got '%s'", a->cmd, name, v);
    if (x < lo || x > hi) rlc_die("%s: --%s=%lld out of range [%lld, %lld]", a->cmd, name, x, lo, hi);
    return x;
}
double cli_double(cli_args *a, const char *name, double def, double lo, double hi) {
    const char *v = cli_opt(a, name);
    if (!v) return def;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x)) rlc_die("%s: --%s expects a number, got '%s'", a->cmd, name, v);
    if (x < lo || x > hi) rlc_die("%s: --%s=%g out of range [%g, %g]", a->cmd, name, x, lo, hi);
    return x;
}
void cli_check_unknown(cli_args *a, const char *usage) {
    for (int i = 1; i < a->argc; i++)
        if (!a->used[i]) rlc_die("%s: unknown argument '%s'; usage: %s", a->cmd, a->argv[i], usage);
}
