// lr_schedule.h: learning-rate schedules as multiplicative factors f(s) of the base lr, s = scheduler
// steps taken so far (0-indexed; torch LambdaLR semantics: the optimizer step k uses base_lr * f(k), and
// the lr verl logs after step k is base_lr * f(k+1)). Formulas: shared/spec/verl-grpo.md §7.
//   constant (verl FSDP, transformers get_constant_schedule_with_warmup):
//       f(s) = s / max(1, W) for s < W, else 1
//   cosine (verl FSDP get_cosine_schedule_with_warmup, zero_indexed_step, init_lr_ratio 0, num_cycles):
//       s < W: f = s / max(1, W); else p = (s - W) / max(1, S - W),
//       f = max(min_lr_ratio, cos(pi * num_cycles * 2 * p) * (1 - min)/2 + (1 + min)/2)
//   warmup-stable-decay (TorchTitan linear_warmup_stable_decay; decay linear / sqrt / cosine):
//       decay = S - W, stable = S + 1 - W - decay;  s < W: f = (s + 1) / W;  s < W + stable: f = 1;
//       else p = (s + 1 - W - stable) / decay, g = 1 - p | 1 - sqrt(p) | (1 + cos(pi p)) / 2,
//       f = min_lr_factor + (1 - min_lr_factor) * g
//   (TorchTitan's S is its own TrainingConfig.steps, default 10000, not verl's total_training_steps.)
#pragma once
#include <stdint.h>

typedef enum {
    LR_CONSTANT = 0,
    LR_COSINE,          // verl FSDP cosine
    LR_WSD_LINEAR,      // TorchTitan warmup-stable-decay, linear decay (verl's torchtitan default)
    LR_WSD_SQRT,
    LR_WSD_COSINE,
} lr_sched_type;

typedef struct {
    lr_sched_type type;
    double base_lr;
    int64_t warmup_steps;     // W (resolved, >= 0)
    int64_t total_steps;      // S
    double min_lr_ratio;      // cosine floor (verl FSDP), in [0, 1]
    double num_cycles;        // cosine: 0.5
    double min_lr_factor;     // WSD floor (TorchTitan), in [0, 1]
    int64_t step;             // scheduler steps taken (s)
} lr_schedule;

// verl's warmup rule: lr_warmup_steps <= 0 (verl's "None, 0 or negative") delegates to
// int(lr_warmup_steps_ratio * total_steps); otherwise lr_warmup_steps.
int64_t lr_resolve_warmup(int64_t lr_warmup_steps, double lr_warmup_steps_ratio, int64_t total_steps);
// Initialise at s = 0. Dies (rlc_die) on invalid settings (negative totals, ratios outside [0,1],
// TorchTitan warmup 0 is fine, TorchTitan decay steps 0 with s beyond warmup dies at that step).
void lr_schedule_init(lr_schedule *ls, lr_sched_type type, double base_lr, int64_t warmup_steps, int64_t total_steps,
                      double min_ratio_or_factor);
double lr_schedule_factor(const lr_schedule *ls, int64_t s);
double lr_schedule_lr_at(const lr_schedule *ls, int64_t s);   // base_lr * factor
double lr_schedule_current(const lr_schedule *ls);            // lr for the next optimizer step
// Advance one step; returns the new current lr (what verl logs as actor/lr).
double lr_schedule_step(lr_schedule *ls);
// "constant", "cosine", "linear"/"wsd-linear", "sqrt", "wsd-cosine"; returns -1 if unknown.
int lr_sched_type_parse(const char *s);
const char *lr_sched_type_name(lr_sched_type t);
