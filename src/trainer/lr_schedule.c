// lr_schedule.c: verl FSDP constant/cosine and TorchTitan warmup-stable-decay schedules.
#include "trainer/lr_schedule.h"

#include <math.h>

#include "core/common.h"

#define LR_MAX_STEP ((int64_t)1 << 40)   // as ADAMW_MAX_STEP: beyond any run

int64_t lr_resolve_warmup(int64_t lr_warmup_steps, double ratio, int64_t total_steps) {
    if (lr_warmup_steps > 0) return lr_warmup_steps;
    if (!(ratio >= 0.0 && ratio <= 1.0)) rlc_die("lr_warmup_steps_ratio=%g must be in [0, 1]", ratio);
    return (int64_t)(ratio * (double)total_steps);   // Python int() truncation
}

void lr_schedule_init(lr_schedule *ls, lr_sched_type type, double base_lr, int64_t warmup_steps, int64_t total_steps,
                      double min_ratio_or_factor) {
    memset(ls, 0, sizeof *ls);
    if (warmup_steps < 0) rlc_die("lr schedule: warmup steps %lld must be >= 0", (long long)warmup_steps);
    if (total_steps < 0) rlc_die("lr schedule: total steps %lld must be >= 0", (long long)total_steps);
    if (warmup_steps > LR_MAX_STEP || total_steps > LR_MAX_STEP)
        rlc_die("lr schedule: warmup steps %lld / total steps %lld must be at most %lld", (long long)warmup_steps,
                (long long)total_steps, (long long)LR_MAX_STEP);
    if (!(min_ratio_or_factor >= 0.0 && min_ratio_or_factor <= 1.0))
        rlc_die("lr schedule: min_lr_ratio / min_lr_factor %g must be in [0, 1]", min_ratio_or_factor);
    if (!(base_lr >= 0.0) || !isfinite(base_lr)) rlc_die("lr schedule: lr %g must be a finite number >= 0", base_lr);
    ls->type = type;
    ls->base_lr = base_lr;
    ls->warmup_steps = warmup_steps;
    ls->total_steps = total_steps;
    ls->num_cycles = 0.5;
    if (type == LR_COSINE) ls->min_lr_ratio = min_ratio_or_factor;
    else if (type != LR_CONSTANT) ls->min_lr_factor = min_ratio_or_factor;
    if (type >= LR_WSD_LINEAR && warmup_steps > total_steps)
        rlc_die("lr schedule: warmup steps %lld exceed total steps %lld", (long long)warmup_steps,
                (long long)total_steps);
}

static double imax1(int64_t x) { return (double)(x > 1 ? x : 1); }

double lr_schedule_factor(const lr_schedule *ls, int64_t s) {
    // s comes from a validated resume (<= 2^40) plus steps taken: s + 1 and S - W never overflow
    CHECK(s >= 0 && s <= 2 * LR_MAX_STEP, "lr schedule step %lld out of range", (long long)s);
    const int64_t W = ls->warmup_steps, S = ls->total_steps;
    switch (ls->type) {
    case LR_CONSTANT:
        if (s < W) return (double)s / imax1(W);
        return 1.0;
    case LR_COSINE: {
        const double mn = ls->min_lr_ratio;
        const double coef = (1.0 - mn) * 0.5, intercept = (1.0 + mn) * 0.5;
        if (s < W) return 0.0 + (1.0 - 0.0) * ((double)s / imax1(W));
        double progress = (double)(s - W) / imax1(S - W);
        double x = cos(M_PI * ls->num_cycles * 2.0 * progress);
        double f = x * coef + intercept;
        return f > mn ? f : mn;
    }
    case LR_WSD_LINEAR:
    case LR_WSD_SQRT:
    case LR_WSD_COSINE: {
        const int64_t decay = S - W;
        const int64_t stable = S + 1 - W - decay;
        if (s < W) return (double)(s + 1) / (double)W;
        if (s < W + stable) return 1.0;
        if (decay == 0) rlc_die("lr schedule: TorchTitan decay has 0 steps (warmup %lld == total %lld)",
                                (long long)W, (long long)S);
        double p = (double)(s + 1 - (W + stable)) / (double)decay;
        double g;
        if (ls->type == LR_WSD_LINEAR) g = 1.0 - p;
        else if (ls->type == LR_WSD_SQRT) g = 1.0 - sqrt(p);
        else g = 0.5 * (1.0 + cos(M_PI * p));
        return ls->min_lr_factor + (1.0 - ls->min_lr_factor) * g;
    }
    }
    CHECK(0, "unknown lr schedule type %d", (int)ls->type);
    return 0;
}

double lr_schedule_lr_at(const lr_schedule *ls, int64_t s) { return ls->base_lr * lr_schedule_factor(ls, s); }
double lr_schedule_current(const lr_schedule *ls) { return lr_schedule_lr_at(ls, ls->step); }
double lr_schedule_step(lr_schedule *ls) {
    ls->step++;
    return lr_schedule_current(ls);
}

int lr_sched_type_parse(const char *s) {
    if (!strcmp(s, "constant")) return LR_CONSTANT;
    if (!strcmp(s, "cosine")) return LR_COSINE;
    if (!strcmp(s, "linear") || !strcmp(s, "wsd-linear")) return LR_WSD_LINEAR;
    if (!strcmp(s, "sqrt") || !strcmp(s, "wsd-sqrt")) return LR_WSD_SQRT;
    if (!strcmp(s, "wsd-cosine")) return LR_WSD_COSINE;
    return -1;
}

const char *lr_sched_type_name(lr_sched_type t) {
    switch (t) {
    case LR_CONSTANT: return "constant";
    case LR_COSINE: return "cosine";
    case LR_WSD_LINEAR: return "linear";
    case LR_WSD_SQRT: return "sqrt";
    case LR_WSD_COSINE: return "wsd-cosine";
    }
    return "?";
}
