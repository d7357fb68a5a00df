// engine.h: the training engine around the Qwen3 model (verl's BaseEngine, shared/spec/verl-grpo.md §9):
// micro-batched forward/backward with a loss callback and global loss normalisation, gradient clipping,
// AdamW and the LR schedule; an inference pass (log-probs + entropy, no grad); optimizer state files.
//
// A global batch is n_seqs packed sequences. It is split into micro-batches of whole, consecutive
// sequences: a fixed number of sequences each, or greedily up to a token budget. For every micro-batch
// the engine runs forward + log-prob head, calls the loss callback, which fills d(loss)/d(logp) (and
// d(loss)/d(entropy)) for that micro-batch's tokens, and runs the backward, accumulating (+=) into one
// gradient buffer. The callback is told the global token count (e.g. for token-mean over the global
// batch), so the update does not depend on the micro-batching up to float summation order.
//
// Target convention: targets[t] is the token whose log-prob is scored at position t, i.e. predicted
// from tokens[seq_start..t] (normally tokens[t+1]); -1 = nothing scored at t.
#pragma once
#include <stdint.h>

#include "model/decoder.h"
#include "trainer/lr_schedule.h"
#include "trainer/optim.h"

typedef struct {
    int n_seqs;
    const int32_t *cu_seqlens;   // (n_seqs+1) token offsets, cu[0] = 0, cu[n_seqs] = T
    const int32_t *tokens;       // (T)
    const int32_t *targets;      // (T) scored token at each position, -1 = none
    const float *loss_mask;      // (T) or NULL: weight of each position in the global token count;
                                 // NULL counts the positions with targets >= 0
} engine_batch;

// Micro-batching: micro_batch_seqs > 0 takes that many sequences per micro-batch; otherwise
// micro_batch_tokens > 0 packs consecutive sequences up to that many tokens (a sequence longer than the
// budget is an error); both 0: the whole batch is one micro-batch.
typedef struct {
    int micro_batch_seqs;
    int64_t micro_batch_tokens;
    // Optional explicit partition (takes precedence when n_parts > 0): micro-batch j is sequences
    // [starts[j], starts[j+1]); starts (n_parts+1), starts[0] = 0, strictly increasing, starts[n_parts] =
    // n_seqs. Used for verl's balanced dynamic batches (the caller orders the sequences so each part is
    // contiguous).
    const int *starts;
    int n_parts;
} engine_mb;

// What the loss callback sees for one micro-batch. Arrays are views into the global batch at
// tok_begin (tokens, targets, loss_mask) or engine buffers (logp, entropy, dlogp, dentropy), all (T).
typedef struct {
    int index, count;               // micro-batch index and number of micro-batches in this call
    int seq_begin, n_seqs;          // global sequences [seq_begin, seq_begin + n_seqs)
    int64_t tok_begin, T;           // global tokens [tok_begin, tok_begin + T)
    const int32_t *cu_seqlens;      // (n_seqs+1) offsets local to the micro-batch
    const int32_t *tokens;          // (T)
    const int32_t *targets;         // (T)
    const float *loss_mask;         // (T) or NULL
    const float *logp;              // (T) log p(targets[t]) at the engine's temperature (0 where target < 0)
    const float *entropy;           // (T) or NULL when entropy was not requested
    float *dlogp;                   // (T) zeroed: the callback writes d loss / d logp
    float *dentropy;                // (T) zeroed, or NULL when entropy was not requested
    double global_tokens;           // loss-mask sum over the global batch (all data-parallel ranks)
    int64_t global_seqs;            // sequences in the global batch
} engine_micro;

// Fills mb->dlogp (and mb->dentropy) and returns this micro-batch's share of the loss, normalised
// globally, so the shares add up to the global batch's loss.
typedef double (*engine_loss_fn)(void *user, const engine_micro *mb);

typedef struct {
    adamw_hparams adam;          // betas, eps, weight decay
    double lr;                   // base lr
    lr_sched_type lr_sched;
    int64_t warmup_steps;        // resolved (see lr_resolve_warmup)
    int64_t total_steps;         // scheduler horizon
    double min_lr;               // cosine min_lr_ratio / TorchTitan min_lr_factor
    double clip_grad;            // global-norm max; <= 0 disables clipping (the norm is still reported)
    ckpt_mode ckpt;              // activation checkpointing
    float temperature;           // logits / temperature in the log-prob head (1.0)
    int no_state;                // 1: no gradient or AdamW buffers (a data-parallel layer holds them, sharded);
                                 // only engine_forward_backward with model gradient hooks, never the optimizer
} engine_config;
void engine_config_default(engine_config *c);   // verl defaults: lr 1e-6, wd 0.01, clip 1.0, constant

typedef struct {
    engine_config cfg;
    decoder_model *model;          // not owned
    param_set grads;             // (numel) gradient accumulator, parameter layout
    adamw_state opt;             // m, v, step
    lr_schedule sched;           // scheduler state (step)
    decoder_acts *acts;            // saved activations for the largest micro-batch so far
    int64_t acts_T;
    int64_t buf_T;               // capacity of the per-token buffers below
    float *logp, *entropy;       // (buf_T)
    float *dlogp, *dentropy;     // (buf_T)
    int32_t *cu_local;           // (cu_cap) local cu_seqlens of a micro-batch
    int32_t *pos;                // (buf_T) positions of a micro-batch
    int cu_cap;
} engine;

void engine_init(engine *e, decoder_model *model, const engine_config *cfg);
void engine_free(engine *e);
// Allocate saved activations (and per-token buffers) for micro-batches of up to T tokens now; they
// otherwise grow on demand to the largest micro-batch seen.
void engine_reserve(engine *e, int64_t T);

// Sequence index where each micro-batch starts: starts (n_seqs+1) receives count+1 entries, the last
// = n_seqs. Returns the number of micro-batches. Dies with a clear message when a sequence exceeds
// the token budget.
int engine_split(const engine_batch *b, const engine_mb *mb, int *starts);
// Loss-mask sum of a batch (or the number of targets >= 0 when loss_mask is NULL).
double engine_batch_tokens(const engine_batch *b);

typedef struct {
    double loss;                 // sum of the callback's returns
    int n_micro;
    int64_t tokens;              // tokens run through the model
    double global_tokens;
    double seconds;
} engine_fb_stats;

void engine_zero_grad(engine *e);
// Forward + loss + backward over every micro-batch, accumulating into e->grads (call engine_zero_grad
// first for a fresh step). want_entropy: compute entropy and pass dentropy to the callback.
// global_tokens <= 0: use engine_batch_tokens(b) (pass the all-reduced count under data parallelism).
void engine_forward_backward(engine *e, const engine_batch *b, const engine_mb *mb, int want_entropy,
                             engine_loss_fn fn, void *user, double global_tokens, engine_fb_stats *st);

typedef struct {
    double grad_norm;            // pre-clip global norm
    int finite;                  // 0: non-finite norm, step skipped, gradients zeroed
    double lr;                   // lr of this step (the scheduler's current lr)
} engine_opt_result;
// Clip e->grads and take one AdamW step at the scheduler's current lr (skipped when non-finite). Clipping
// is fused into the AdamW pass (bitwise the same as scaling in place first), so e->grads keep their
// unclipped values afterwards; a non-finite norm zeroes them.
engine_opt_result engine_optimizer_step(engine *e);
// Advance the LR schedule; returns the new lr (verl's logged actor/lr).
double engine_lr_scheduler_step(engine *e);

typedef struct {
    engine_fb_stats fb;
    engine_opt_result opt;
    double opt_seconds;          // clip + AdamW (fb.seconds is forward + loss + backward)
} engine_step_stats;
// verl's train_batch: zero_grad -> forward_backward -> optimizer_step (the scheduler is stepped by the
// caller, once per training step).
void engine_train_batch(engine *e, const engine_batch *b, const engine_mb *mb, int want_entropy, engine_loss_fn fn,
                        void *user, double global_tokens, engine_step_stats *st);

// Inference pass: logp (T) and entropy (T, or NULL) of the whole batch, no gradients, micro-batched by
// a token budget (max_tokens <= 0: one pass).
void engine_infer(engine *e, const engine_batch *b, int64_t max_tokens, float *logp, float *entropy);
// The same with any micro-batching (engine_mb: fixed sequences, token budget or an explicit partition).
void engine_infer_mb(engine *e, const engine_batch *b, const engine_mb *mb, float *logp, float *entropy);

// Optimizer + scheduler state for resume (binary, magic + version, atomic).
void engine_save_state(const engine *e, const char *path);
void engine_load_state(engine *e, const char *path);
