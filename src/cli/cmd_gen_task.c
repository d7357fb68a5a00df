// cmd_gen_task.c: `rlc gen-task`: write synthetic GSM8K-format problems as JSONL {"question","answer"}.
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/common.h"
#include "data/dataset.h"   // RLC_GSM8K_INSTRUCTION: the SFT prompt is the one verl builds
#include "data/synth.h"

static const char *USAGE =
    "rlc gen-task --out FILE.jsonl [--n N] [--seed S] [--offset K] [--min-steps A] [--max-steps B] "
    "[--max-operand M] [--no-mul-div] [--format gsm8k|sft] [--answer-only F]";

int cmd_gen_task(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (cli_flag(&a, "help")) { printf("usage: %s\n", USAGE); cli_args_free(&a); return 0; }
    const char *out = cli_opt_req(&a, "out");
    long long n = cli_int(&a, "n", 1000, 1, 100000000);
    long long seed = cli_int(&a, "seed", 1, 0, INT64_MAX);
    long long offset = cli_int(&a, "offset", 0, 0, INT64_MAX);
    synth_params p;
    synth_params_default(&p);
    p.min_steps = (int)cli_int(&a, "min-steps", p.min_steps, 1, 8);
    p.max_steps = (int)cli_int(&a, "max-steps", p.max_steps, 1, 8);
    p.max_operand = (int)cli_int(&a, "max-operand", p.max_operand, 2, 1000000);
    if (cli_flag(&a, "no-mul-div")) p.allow_mul_div = 0;
    const char *fmt = cli_opt(&a, "format");
    int sft = 0;
    if (fmt && !strcmp(fmt, "sft")) sft = 1;
    else if (fmt && strcmp(fmt, "gsm8k") != 0) rlc_die("gen-task: --format must be gsm8k or sft, got '%s'", fmt);
    // sft only: the fraction of responses written as the bare final line "#### N" (demonstrations that skip
    // the working; see docs/demo.md)
    const char *ao = cli_opt(&a, "answer-only");
    double answer_only = 0;
    if (ao) {
        char *end;
        answer_only = strtod(ao, &end);
        if (*end || end == ao || !(answer_only >= 0 && answer_only <= 1)) rlc_die("gen-task: --answer-only must be a number in [0, 1], got '%s'", ao);
        if (!sft) rlc_die("gen-task: --answer-only applies to --format sft only");
    }
    cli_check_unknown(&a, USAGE);
    if (p.max_steps < p.min_steps) rlc_die("gen-task: --max-steps (%d) must be >= --min-steps (%d)", p.max_steps, p.min_steps);
    char *tmp = rlc_malloc(strlen(out) + 8);
    sprintf(tmp, "%s.tmp", out);
    FILE *f = fopen(tmp, "w");
    if (!f) rlc_die("%s: cannot create: %s", tmp, strerror(errno));
    for (long long i = 0; i < n; i++) {
        synth_problem pr;
        synth_generate(&pr, &p, (uint64_t)seed, (uint64_t)(offset + i));
        cJSON *o = cJSON_CreateObject();
        if (sft) {   // {"prompt", "response"}: the GSM8K prompt verl builds, and the worked solution
            size_t ql = strlen(pr.question) + sizeof(RLC_GSM8K_INSTRUCTION) + 2;
            char *q = rlc_malloc(ql);
            snprintf(q, ql, "%s %s", pr.question, RLC_GSM8K_INSTRUCTION);
            cJSON_AddStringToObject(o, "prompt", q);
            if (synth_answer_only((uint64_t)seed, (uint64_t)(offset + i), answer_only)) {
                char fin[48];
                snprintf(fin, sizeof fin, "#### %lld", pr.result);
                cJSON_AddStringToObject(o, "response", fin);
            } else {
                cJSON_AddStringToObject(o, "response", pr.answer);
            }
            free(q);
        } else {
            cJSON_AddStringToObject(o, "question", pr.question);
            cJSON_AddStringToObject(o, "answer", pr.answer);
        }
        char *s = cJSON_PrintUnformatted(o);
        fputs(s, f);
        fputc('\n', f);
        free(s);
        cJSON_Delete(o);
        synth_problem_free(&pr);
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0) rlc_die("%s: write failed: %s", tmp, strerror(errno));
    if (rename(tmp, out) != 0) rlc_die("%s: cannot rename into place: %s", out, strerror(errno));
    free(tmp);
    cli_args_free(&a);
    return 0;
}
