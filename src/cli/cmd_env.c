// cmd_env.c: `rlc env NAME`: the environments that ship with rlc, as rlc-env/1 processes on stdin/stdout
// (docs/env-protocol.md). A trainer starts one with multi_turn.env_command="rlc env calculator".
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/common.h"
#include "rollout/env_calculator.h"

static const char USAGE[] =
    "usage: rlc env calculator [--tools calculator,calc_gsm8k_reward]\n"
    "  An rlc-env/1 environment on stdin/stdout (docs/env-protocol.md). Tools:\n"
    "    calculator          exact arithmetic on an expression (+ - * / ^, parentheses, decimals)\n"
    "    calc_gsm8k_reward   verl's GSM8K answer check against the trajectory's ground truth\n"
    "  --tools  comma-separated tools to declare (default: both)\n";

int cmd_env(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(USAGE, stdout);
            return 0;
        }
    if (argc < 2) {
        fputs(USAGE, stderr);
        return 1;
    }
    if (strcmp(argv[1], "calculator")) rlc_die("rlc env: unknown environment '%s', expected calculator", argv[1]);
    cli_args a;
    cli_args_init(&a, argc - 1, argv + 1);
    const char *tl = cli_opt(&a, "tools");
    cli_check_unknown(&a, USAGE);
    rlc_calc_tools tools = {1, 1};
    if (tl) {
        tools = (rlc_calc_tools){0, 0};
        char *c = rlc_strdup(tl);
        for (char *save = NULL, *t = strtok_r(c, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (!strcmp(t, "calculator")) tools.calculator = 1;
            else if (!strcmp(t, "calc_gsm8k_reward")) tools.gsm8k = 1;
            else rlc_die("rlc env calculator: --tools: unknown tool '%s', expected calculator or calc_gsm8k_reward", t);
        }
        free(c);
    }
    cli_args_free(&a);
    return rlc_env_calculator_run(stdin, stdout, &tools);
}
