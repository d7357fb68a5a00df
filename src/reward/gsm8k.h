// gsm8k.h: verl's GSM8K rule reward (verl/utils/reward_score/gsm8k.py, spec verl-grpo.md §6), exactly:
// only the last 300 characters (Unicode code points) are searched; strict = the last "#### (-?[0-9.,]+)"
// with ',' and '$' removed; flexible = the last "-?[0-9.,]+" that is not "" or "." (no comma stripping; if all
// are ".", the first match). The answer is compared to the ground truth as a string ("72." != "72").
#pragma once
#include <stddef.h>

typedef enum { GSM8K_STRICT = 0, GSM8K_FLEXIBLE = 1 } gsm8k_method;

// Extract the answer from a decoded response (UTF-8, n bytes). Returns a malloc'd string, or NULL for no answer.
char *gsm8k_extract(const char *s, size_t n, gsm8k_method method);
// compute_score: 0 for no answer, `score` if answer == ground_truth, else `format_score`.
double gsm8k_compute_score(const char *solution, const char *ground_truth, gsm8k_method method, double format_score,
                           double score);
