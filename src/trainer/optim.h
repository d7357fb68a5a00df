// optim.h: AdamW with torch semantics and global-norm gradient clipping as torch's clip_grad_norm_,
// over the flat parameter-like buffers of src/model/params.h (params, grads, m, v share one layout).
//
// AdamW (torch.optim.AdamW, t = step count starting at 1, all element math in fp32):
//   p <- p * (1 - lr*wd);  m <- b1*m + (1-b1)*g;  v <- b2*v + (1-b2)*g*g;
//   p <- p - (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// One fused pass per element. The kernels take raw pointers over a range of n elements so a
// data-parallel layer can step only its shard (pointers offset into the full buffers, or a shard's own
// moment buffers). Elementwise, so the result does not depend on the thread count.
//
// Clipping (torch.nn.utils.clip_grad_norm_ / verl): total = sqrt(sum of g^2 over all grads);
// coef = max_norm / (total + 1e-6), clamped to <= 1; g *= coef. The norm is accumulated in double over
// fixed-size chunks whose partial sums are added in order, so it does not depend on the thread count.
// Split into grad_sumsq (partial, all-reducible) + grad_clip_finish so a data-parallel layer can
// all-reduce the partial sums before finishing. A non-finite norm (or one that overflows fp32, as
// torch's fp32 norm would) skips the optimizer step and zeroes the gradients, as verl does.
#pragma once
#include <stdint.h>
#include <stdio.h>

#include "model/params.h"

typedef struct {
    double beta1, beta2;     // torch defaults 0.9, 0.999
    double eps;              // 1e-8
    double weight_decay;     // decoupled; verl default 0.01 (applied to every parameter)
} adamw_hparams;
adamw_hparams adamw_hparams_default(void);   // 0.9, 0.999, 1e-8, 0.01

// One AdamW update of n elements at step t (>= 1) with learning rate lr. p, m, v (n) updated in place.
void adamw_update(float *p, const float *g, float *m, float *v, int64_t n, const adamw_hparams *h, double lr, int64_t t);
void adamw_update_ref(float *p, const float *g, float *m, float *v, int64_t n, const adamw_hparams *h, double lr, int64_t t);
// The same step on gradients g * gscale (fp32 product, exactly what clipping in place and then stepping
// computes), without writing the scaled gradients back: clip + AdamW in one pass over the buffers.
void adamw_update_scaled(float *p, const float *g, float *m, float *v, int64_t n, const adamw_hparams *h, double lr,
                         int64_t t, float gscale);

typedef struct {
    double norm;     // pre-clip global norm (as torch returns and verl logs as grad_norm)
    double coef;     // scale applied to the gradients (1 when not clipped, 0 when zeroed)
    int finite;      // 0: non-finite norm, gradients zeroed, the caller must skip the step
} clip_result;

// Optimizer state: fp32 moments in the parameter layout plus the step count. Saved/restored for resume.
// A step count no run reaches (2^40): larger ones in a resumed state are corruption, and step + 1 never overflows.
#define ADAMW_MAX_STEP ((int64_t)1 << 40)

typedef struct {
    adamw_hparams h;
    const param_layout *pl;
    param_set m;             // first moment  (numel)
    param_set v;             // second moment (numel)
    int64_t step;            // optimizer steps taken (the next step uses t = step + 1)
} adamw_state;
void adamw_init(adamw_state *st, const param_layout *pl, const adamw_hparams *h);   // zero moments, step 0
void adamw_free(adamw_state *st);
// Full step over all elements: step++, then adamw_update with t = step.
void adamw_step(adamw_state *st, param_set *params, const param_set *grads, double lr);
// Range form for sharded stepping: updates elements [begin, end) with step number t (the caller
// advances st->step once per global step).
void adamw_step_range(adamw_state *st, param_set *params, const param_set *grads, double lr, int64_t t,
                      int64_t begin, int64_t end);
// Clip + step fused: the step on grads * clip coefficient (c->finite must be 1); grads stay unscaled.
void adamw_step_clipped(adamw_state *st, param_set *params, const param_set *grads, double lr, const clip_result *c);

// ---- clipping ----
// Sum of squares of g (n) in double, deterministic for any thread count.
double grad_sumsq(const float *g, int64_t n);
double grad_sumsq_ref(const float *g, int64_t n);
// From the (all-reduced) total sum of squares: the norm, coefficient and finiteness. max_norm <= 0
// disables clipping (coef 1) but still reports the norm and non-finiteness.
clip_result grad_clip_finish(double sumsq, double max_norm);
// Apply a clip_result to a range of gradients: g *= coef (torch multiplies even when coef is 1, a no-op),
// or zero them when the norm was not finite.
void grad_clip_apply(float *g, int64_t n, const clip_result *c);
// Convenience for one process: norm over all grads, clip in place. Returns the result.
clip_result grad_clip_global(param_set *grads, double max_norm);

// ---- state save/load (binary: magic "RLCADAMW", version, numel, step, hparams, m, v; atomic write) ----
// `extra` (n_extra int64 values, e.g. the LR scheduler step) travels in the header for the caller.
void adamw_save(const adamw_state *st, const char *path, const int64_t *extra, int n_extra);
// Dies with a one-line error naming the file on a wrong magic/version/size. Returns the number of
// extra values stored (up to max_extra are copied into extra).
int adamw_load(adamw_state *st, const char *path, int64_t *extra, int max_extra);
// A trainer's state: saved with the LR scheduler step as its one extra value. Returns that step (>= 0).
int64_t adamw_load_resume(adamw_state *st, const char *path);
