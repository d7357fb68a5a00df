// env_calculator.h: `rlc env calculator`, an rlc-env/1 environment (docs/env-protocol.md) in C with two tools:
//   calculator(expression)        exact rational arithmetic: + - * / ^ (or **), parentheses, unary signs, decimals;
//                                 the value as an integer, an exact decimal, or a reduced fraction "n/d"
//   calc_gsm8k_reward(answer)     verl's GSM8K tool: "Current parsed answer=<repr> reward=<1.0|0.0>", the answer
//                                 checked by GSM8K's flexible extraction against the trajectory's ground truth
// A bad expression (syntax, division by zero, a number past 64-bit fractions) is a tool error the model sees.
#pragma once
#include <stdio.h>

#include "core/strbuf.h"

// Evaluate expr exactly. Returns 0 with the value appended to out, or -1 with the error text appended.
int rlc_calc_eval(const char *expr, rlc_strbuf *out);

// The calculator tool's schema as the environment declares it in its hello (a JSON object text): what a
// tool_agent prompt renders in its system turn (`rlc gen-task --tool-calls` writes SFT data with it).
const char *rlc_calc_tool_schema(void);

typedef struct {
    int calculator;        // declare the calculator tool
    int gsm8k;             // declare calc_gsm8k_reward
} rlc_calc_tools;

// Serve requests from in until EOF, replies to out (one flushed line each). Returns the process exit status.
int rlc_env_calculator_run(FILE *in, FILE *out, const rlc_calc_tools *tools);
