// worker.h: one role of the trainer (verl's actor / reference / critic worker): a model, the engine that runs it
// and, under data parallelism, its sharded state. Inference (log-probs and entropy per response token) and the
// PPO update (epochs over mini-batches, micro-batches with gradient accumulation, clip + AdamW) run through one
// path whether sharded or not: with W > 1 ranks each mini-batch is balanced across the ranks, the loss-token
// count and the micro-batch count are all-reduced (a rank with fewer micro-batches runs 1-token padding passes,
// because every pass issues the per-block all-gathers), gradients are reduce-scattered and the sharded AdamW
// steps with the global norm; with one process the same loop calls the engine's own optimizer.
#pragma once
#include <stdint.h>

#include "dist/dist.h"
#include "dist/fsdp.h"
#include "model/decoder.h"
#include "trainer/engine.h"
#include "trainer/progress.h"
#include "trainer/step_batch.h"

// The scalar head of a value worker (the critic's Linear(hidden, 1), model/value_head.h): weights, gradient and
// AdamW moments, stepped with the decoder's under one global clip norm (the engine's hyperparameters and step).
typedef struct {
    float *p, *g, *m, *v;      // (n)
    int64_t n;                 // H + 1
} worker_head;

typedef struct {
    const char *name;          // "actor", "ref", "critic"
    decoder_model *model;      // not owned: the model the passes run
    engine *eng;               // not owned: buffers, LR schedule and (one process) gradient + AdamW state; the
                               // reference borrows the actor's (same shapes, only the weights differ)
    dist_ctx *d;               // NULL: one process
    fsdp_state *fs;            // not owned; NULL: one process. W > 1: the sharded weights (+ grads and moments)
    int infer_sharded;         // W > 1: 1 = inference gathers the blocks from fs; 0 = model holds full weights (the
                               // actor's rollout copy), so inference runs on this rank's rows with no collectives
    worker_head *head;         // NULL: a log-prob worker (actor, reference); else a value worker (the critic), whose
                               // passes produce one value per token and take d loss / d value (one process only)
    int adapters_off;          // 1: inference runs the model with its LoRA adapters switched off (the reference
                               // policy of a LoRA actor: the same model and weights, no copy)
} worker;

// verl's micro-batching of an inference pass: use_dynamic_bsz (balanced token-budget parts), else
// micro_batch_size_per_gpu sequences, neither: greedy consecutive sequences up to max_token_len_per_gpu.
typedef struct {
    int dynamic;
    int64_t micro_seqs;        // RLC_CFG_NULL or <= 0: unset
    int64_t max_tokens;
    const char *key;           // config key of max_tokens (messages)
} worker_mb_cfg;

// Log-probs (and entropy when ent_padded) of the rows sel (nsel; NULL: all B) at the engine's temperature, in the
// padded layout (B, Tr); only those rows are written.
void worker_infer_logprobs(worker *w, const step_batch *sb, const int *sel, int nsel, const worker_mb_cfg *mc,
                           float *lp_padded, float *ent_padded);

// A value worker's values (the head over the final-normed hidden states) at the same positions as the log-probs
// (the token before each response token), in the padded layout (B, Tr); only the rows sel (NULL: all) are written.
void worker_infer_values(worker *w, const step_batch *sb, const int *sel, int nsel, const worker_mb_cfg *mc,
                         float *values_padded);

// The generic inference loop: rows (n) are reordered in place into micro-batch order and packed into p; fn runs
// once per micro-batch (b: that micro-batch, tok_off: its first token in p) and writes its outputs.
typedef void (*worker_infer_fn)(void *user, engine *e, const engine_batch *b, int64_t tok_off);
void worker_infer(worker *w, const step_batch *sb, int *rows, int n, const worker_mb_cfg *mc, packed_rows *p,
                  worker_infer_fn fn, void *user);

typedef struct {
    int64_t mini_seqs;         // sequences per mini-batch (ppo_mini_batch_size x rollout.n, at most B)
    int64_t epochs;            // ppo_epochs
    int shuffle;               // shuffle the step's sequences each epoch (seeded by seed, step, epoch)
    int64_t seed;              // data_loader_seed
    int dynamic;               // use_dynamic_bsz: balanced parts of max_tokens
    int64_t micro_seqs;        // ppo_micro_batch_size_per_gpu (without dynamic)
    int64_t max_tokens;        // ppo_max_token_len_per_gpu
    const char *key;           // config key of max_tokens (messages)
    int want_entropy;          // entropy computed in the update pass
    const char *phase;         // progress line label, e.g. "update_actor"
    progress *prog;            // NULL: none
    int64_t step;              // steps completed before this one (the epoch order; the progress line shows step + 1)
} worker_update_cfg;

// The role's loss: fills mb->dlogp / mb->dentropy for a micro-batch whose sequences are the step rows rows[0..
// mb->n_seqs) and returns its share of the loss (a value worker: mb->logp holds the values and mb->dlogp takes
// d loss / d value); G = sequences in the global mini-batch. minibatch_end: after each
// optimizer step, with its pre-clip norm; d != NULL: reduce the micro-batch metrics over the ranks first.
typedef struct {
    double (*loss)(void *user, const int *rows, double G, const engine_micro *mb);
    void (*minibatch_end)(void *user, dist_ctx *d, double grad_norm);
    void *user;
} worker_loss;

typedef struct {
    double lr;                 // the lr after the step's scheduler step (verl's logged */lr)
    int n_nonfinite;           // optimizer steps skipped for a non-finite gradient norm
} worker_update_result;

// The PPO update of one step: ppo_epochs over mini-batches of the step's sequences (in order, or shuffled),
// each one optimizer step; the LR scheduler steps once at the end. W ranks give one process's weights up to float
// summation order.
worker_update_result worker_update(worker *w, const step_batch *sb, const worker_update_cfg *uc, const worker_loss *L);

// The order of the step's B sequences in PPO epoch ep, cut into mini-batches: 0..B-1, or with shuffle (verl: the
// mini-batch DataLoader's shuffle, seeded by data_loader_seed) a Fisher-Yates shuffle on the Philox stream (seed,
// step, ep), so every rank count takes the same mini-batches.
void worker_epoch_order(int *order, int B, int shuffle, int64_t seed, int64_t step, int64_t ep);
