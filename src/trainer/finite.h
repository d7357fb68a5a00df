// finite.h: non-finite checks over parameter-layout buffers (weights, optimizer moments). A NaN or inf
// must never reach a checkpoint: the trainer checks before each save and stops naming the step and the
// first bad tensor, so the last good checkpoint stays the latest; loads check the same way.
#pragma once
#include <stdint.h>

#include "dist/dist.h"
#include "model/params.h"

typedef struct {
    int tensor;       // index into the layout's tensors, -1 when every value is finite
    int64_t element;  // first bad element within that tensor
    float value;      // its value (nan, inf or -inf)
} finite_report;

// The first non-finite value of data (the layout's numel floats) in tensor order. Deterministic and
// independent of the thread count (the scan is parallel; the lowest bad index wins).
finite_report finite_scan(const float *data, const param_layout *pl);
finite_report finite_scan_ref(const float *data, const param_layout *pl);
// Dies "<what>: tensor '<name>' element <i> is <value>; <hint>" at the first non-finite value; returns
// otherwise. what names the buffer and when ("step 12: weights after the optimizer step").
void finite_check_params(const float *data, const param_layout *pl, const char *what, const char *hint);
// The first non-finite value of rank `rank`'s FSDP shard of a layout buffer (dist/fsdp.h: block b's piece of
// shard_off[b+1] - shard_off[b] elements at shard_off[b] holds block elements [rank * piece, (rank+1) * piece);
// zero padding past the block's end). Reported as finite_scan would report it in the full layout: the
// shard's first bad element is its lowest full-layout index, since pieces are in block order.
finite_report finite_scan_shard(const float *shard, const param_layout *pl, const int64_t *shard_off, int rank);
finite_report finite_scan_shard_ref(const float *shard, const param_layout *pl, const int64_t *shard_off, int rank);

// One buffer the save guard checks: a parameter-layout buffer (pl set: whole, or this rank's FSDP shard of it when
// shard_off is set), or a plain vector of n values named `name` (pl NULL: the value head's score.weight).
typedef struct {
    const char *what;             // the buffer in the message: "the weights", "the AdamW first moment"
    const float *data;            // (pl->numel) | (this rank's shard_numel) | (n)
    const param_layout *pl;
    const int64_t *shard_off;     // (n_blocks+1) fsdp_state.shard_off; NULL: data is the full layout
    const char *name;             // pl NULL: the tensor's name
    int64_t n;                    // pl NULL: its values
} finite_buf;

// The trainer's guard before writing the checkpoint of `step`: every value of bufs (n) must be finite, else it
// stops naming the step, the buffer, and the first bad tensor and element (bufs in order, then layout order), so
// the checkpoint is not written and the last good one stays the latest. With d (W > 1 ranks) the check is
// collective and every rank must call it: each rank scans what it holds (its shards, and its copy of replicated
// buffers), the ranks agree on the first bad value over all of them (an all-gather), rank 0 prints the one error
// line and every rank exits 1; a NaN only rank 1's shard holds stops the save as well as one on rank 0.
void finite_check_save(const finite_buf *bufs, int n, dist_ctx *d, int64_t step);
