// dist_sft.h: data-parallel SFT over dist/fsdp (the first user of the sharded state; docs/distributed.md).
//
// Every rank loads the same dataset and visits it in sft_train's seeded order (trainer/sft.h). Each global
// batch of B sequences (B a multiple of the world size W) is split across ranks by verl's balance_batch:
// Karmarkar-Karp over the workload 24576*L + L^2 with equal_size (B/W sequences per rank; one rank keeps the
// batch order). The loss is the token-mean over the global batch (the target count is all-reduced), so W ranks
// give the weights of one rank up to float summation order. Each rank micro-batches its part as sft_train does;
// the micro-batch count is all-reduced (max) and a rank with fewer runs empty 1-token passes (zero gradient) so
// the per-block all-gathers match. With world 1 this is sft_train's update (up to the norm's summation order).
#pragma once
#include <stdint.h>

#include "dist/dist.h"
#include "dist/fsdp.h"
#include "trainer/sft.h"

typedef struct {
    const char *resume_optimizer;   // optimizer.bin to resume from (any world size), or NULL
    const char *save_optimizer;     // path for the optimizer state at the end, or NULL
    int die_at_step;                // test hook (env RLC_TEST_DIE_AT_STEP): rank die_rank _exit(3)s mid-step
    int die_rank;
} dist_sft_opts;

typedef struct {
    int64_t comm_bytes;             // bytes received from peers over the run (all collectives)
    int64_t allgather_bytes, reduce_scatter_bytes;
    double comm_seconds;            // time inside collectives
    fsdp_memory mem;
    int64_t prefetch_hits, sync_gathers;
} dist_sft_report;

// Train on every rank of d. m->params (full, the same on every rank) is the starting point; it is freed
// during training (state lives in the shards) and, on rank 0 only, holds the final weights on return
// (other ranks: m->params->data == NULL). c->log is used on rank 0 only.
void dist_sft_train(dist_ctx *d, decoder_model *m, const sft_dataset *ds, const sft_config *c, const dist_sft_opts *o,
                    sft_summary *out, dist_sft_report *rep);
