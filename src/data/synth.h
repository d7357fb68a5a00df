// synth.h: a deterministic generator of GSM8K-format arithmetic word problems (the embedded demo's
// task). Each problem is a short story of `steps` operations on one quantity, with a worked solution
// in GSM8K's style (calculator annotations <<a+b=c>>) ending in "#### <answer>", so the built-in
// GSM8K scorer rewards it exactly as it rewards GSM8K.
#pragma once
#include <stdint.h>

typedef struct {
    int min_steps, max_steps;   // number of operations per problem (1..8)
    int max_operand;            // operands of + and - are in [1, max_operand]; * and / use small factors
    int allow_mul_div;          // include "times as many" and "shares equally" steps
} synth_params;

typedef struct {
    char *question;   // the problem text
    char *answer;     // worked solution ending in "#### N"
    char *expr;       // the whole computation as one expression, each earlier step in parentheses: "((4 + 8) * 3) / 2"
    char *expr_work;  // the worked solution with expressions in place of results, one line per step and no final
                      // line ("Adding 8 gives 4 + 8.\n..."): the text before a calculator call evaluates `expr`
    long long result; // N
    int steps;
} synth_problem;

void synth_params_default(synth_params *p);
// Problem `index` of the set named by `seed`: a pure function of (seed, index, params), so a train set,
// a held-out set (another seed) and any subset are reproducible independently of generation order.
void synth_generate(synth_problem *out, const synth_params *p, uint64_t seed, uint64_t index);
void synth_problem_free(synth_problem *pr);
// Whether SFT example `index` of set `seed` is written answer-only ("#### N", no worked steps), with
// probability `frac`: a stream of its own, so the problems are the same whatever `frac` is. Demonstrations
// that often skip the working are what the demo's GRPO stage has to improve on (docs/demo.md).
int synth_answer_only(uint64_t seed, uint64_t index, double frac);
// Whether worked SFT example `index` of set `seed` calls the calculator (a stream of its own again, so the
// problems and the answer-only choice are the same whatever `frac` is).
int synth_tool_call(uint64_t seed, uint64_t index, double frac);
