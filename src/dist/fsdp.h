// fsdp.h: ZeRO-3 / FSDP-style sharded training state over the flat parameter blocks of model/params.h.
//
// Sharding: block b (n_b elements) is cut into W equal pieces of s_b = ceil(n_b / W) elements (the last
// rank's piece is zero-padded); rank r owns elements [r*s_b, (r+1)*s_b) of every block. A rank stores the
// concatenation of its pieces (shard_numel = sum_b s_b ~ numel / W) for the params, the gradient and
// AdamW's m and v. Pad elements are 0 in all four and stay 0 under AdamW.
//
// Forward/backward: the model's get_block hook (decoder_model.get_block) all-gathers a block into one of two
// gather slots (each W * max_b s_b floats) right before use; the block the model will ask for next is
// started (MPI_Iallgather) into the other slot while this one computes. The next block is predicted from
// the order of requests seen in the previous pass (fsdp_begin_pass / fsdp_end_pass bracket one
// forward+backward of a micro-batch), which is identical on every rank, so the collectives always match.
// The model only uses the pointer of its latest request, which the scheme relies on (decoder.c).
//
// Gradients: the model backward asks for each block's gradient buffer through its get_grad_block hook
// (fsdp_grad_block) and says when it is complete (fsdp_grad_done); the block is then reduce-scattered
// (MPI_Ireduce_scatter_block, overlapping the backward of the next blocks) and the result added into the grad
// shard. So no rank holds a full-layout gradient: only three staging buffers (one for the vocabulary-sized blocks:
// the embedding, whose gradient the tied head starts and the embedding backward finishes, and the untied lm_head
// block; two rotating for the layers, so one block's reduce-scatter overlaps the next block's backward). With
// K micro-batches this is K reduce-scatters per step (FSDP's choice too: memory over volume). The optimizer steps
// only the shard; the clip norm is the all-reduced sum of squares of the shards.
//
// Checkpoints: fsdp_gather_full assembles a full-layout buffer on rank 0 (HF export, optimizer state in
// optim.h's file format with full-layout m/v, so any W, and the non-distributed engine_load_state, can
// resume it); fsdp_load_optimizer reads that file on every rank and keeps its own shard.
#pragma once
#include <stdint.h>

#include "dist/dist.h"
#include "model/params.h"
#include "model/decoder.h"
#include "trainer/optim.h"

typedef struct {
    dist_ctx *d;                  // not owned
    const param_layout *pl;       // not owned
    int nb;                       // blocks
    int64_t *shard_len;           // (nb) s_b
    int64_t *shard_off;           // (nb+1) offsets of each block's piece in the shard buffers
    int64_t shard_numel;          // sum of s_b
    float *p;                     // (shard_numel) parameter shard (fp32 master)
    float *g;                     // (shard_numel) gradient shard (reduce-scattered)
    float *m, *v;                 // (shard_numel) AdamW moments
    int frozen;                   // 1: parameters only (g, m, v, pad NULL): a frozen model (GRPO's reference)
    int slots_borrowed;           // 1: slot[] belong to another state (fsdp_share_slots; not freed here)
    int64_t opt_step;             // AdamW steps taken
    adamw_hparams h;
    // gather slots
    int64_t slot_cap;             // W * max_b s_b
    float *slot[2];               // (slot_cap) gathered blocks
    int slot_block[2];            // block held (-1: none)
    dist_req slot_req[2];
    int slot_pending[2];
    int cur;                      // slot of the latest request
    // gradient staging: [0] block 0 (and the untied last block), [1], [2] the layers (rotating)
    float *gbuf[3];               // (W * s_b) a block's local gradient, zero padded
    float *grecv[3];              // (s_b) its reduce-scattered piece
    int64_t gcap[3];              // capacity of gbuf in floats
    int gblock[3];                // block accumulating in the slot (-1: none)
    int grs_block[3];             // block whose reduce-scatter is in flight from the slot (-1: none)
    int64_t grs_seq[3];           // start order of that reduce-scatter
    dist_req grs_req[3];
    int64_t grs_count;
    // access-order prediction
    int *trace, *trace_cur;       // (trace_cap) block requests of the last / current pass
    int trace_len, trace_cur_len, trace_cap;
    int wrap;                     // this pass is followed by another (fsdp_begin_pass)
    // counters
    int64_t n_gathers, n_prefetch_hits, n_sync_gathers;
} fsdp_state;

// Copy this rank's pieces of full (numel, or NULL: zeros) into a new state. d->world ranks.
void fsdp_init(fsdp_state *f, dist_ctx *d, const param_layout *pl, const float *full, const adamw_hparams *h);
// Parameters only, for a frozen model run through fsdp_get_block (no gradient, no optimizer state). Its gather
// slots are allocated on first use, unless fsdp_share_slots gives it another state's first.
void fsdp_init_frozen(fsdp_state *f, dist_ctx *d, const param_layout *pl, const float *full);
void fsdp_free(fsdp_state *f);
// Make frozen state f use `from`'s gather slots (same layout and ctx), freeing its own if any: the two states must
// then never be in use at once, and each is left invalidated (fsdp_invalidate) after its passes.
void fsdp_share_slots(fsdp_state *f, const fsdp_state *from);
// The decoder_model get_block hook (ctx = fsdp_state *).
float *fsdp_get_block(void *ctx, int block);
// another_follows: a pass with the same weights follows this one (the next micro-batch), so this pass's last
// request prefetches the next pass's first block (all ranks must pass the same value).
void fsdp_begin_pass(fsdp_state *f, int another_follows);
void fsdp_end_pass(fsdp_state *f);
// Complete any prefetch and forget the gathered blocks (after the parameters change).
void fsdp_invalidate(fsdp_state *f);
// The decoder_model get_grad_block / grad_block_done hooks (ctx = fsdp_state *, not frozen): block b's gradient
// is accumulated in a staging buffer; when done it is reduce-scattered (nonblocking) and added into f->g. With
// one rank the buffer is the shard itself.
float *fsdp_grad_block(void *ctx, int block);
void fsdp_grad_done(void *ctx, int block);
// Complete the gradient reduce-scatters in flight (fsdp_optimizer_step does).
void fsdp_grad_flush(fsdp_state *f);
// Point the model's weight hook (and, with grads = 1, its gradient hooks) at f; fsdp_detach undoes it.
void fsdp_attach(fsdp_state *f, decoder_model *m, int grads);
void fsdp_detach(decoder_model *m);
// Flush the gradient, global-norm clip of the grad shard (all-reduced sum of squares), then AdamW on the shard at
// lr (skipped when the norm is not finite); the grad shard is zeroed for the next accumulation. Invalidates the
// gathered blocks.
clip_result fsdp_optimizer_step(fsdp_state *f, double lr, double max_norm);
// Assemble the full layout of a shard buffer (shard_numel; f->p, f->m or f->v) on `root` into full (numel;
// only read on root, may be NULL elsewhere). root < 0: on every rank (the GRPO rollout copy). Collective.
void fsdp_gather_full(fsdp_state *f, const float *shard, float *full, int root);
// Optimizer state: full-layout m/v and the step, in adamw_save's format with extra = {sched_step}.
void fsdp_save_optimizer(fsdp_state *f, const char *path, int64_t sched_step);
// Returns the stored LR-scheduler step. Dies naming the file on a mismatch.
int64_t fsdp_load_optimizer(fsdp_state *f, const char *path);

typedef struct {
    int64_t shard_bytes;          // params + grads + m + v shards (frozen: params)
    int64_t slot_bytes;           // two gather slots (0 when borrowed)
    int64_t grad_stage_bytes;     // gradient staging and receive buffers (0 when frozen)
    int64_t unsharded_bytes;      // what 1 rank holds for params + grads + m + v (4 * numel * 4)
} fsdp_memory;
fsdp_memory fsdp_memory_report(const fsdp_state *f);
