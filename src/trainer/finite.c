// finite.c: non-finite scans of parameter buffers and their FSDP shards, and the trainer's collective guard
// before a save (see finite.h).
#include "trainer/finite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/common.h"

// The tensor holding full-layout element i (-1: none; layouts may leave gaps between tensors).
static int tensor_of(const param_layout *pl, int64_t i) {
    for (int k = 0; k < pl->n_tensors; k++)
        if (i >= pl->tensors[k].offset && i < pl->tensors[k].offset + pl->tensors[k].numel) return k;
    return -1;
}

static finite_report report_at(const param_layout *pl, int64_t i, float value) {
    const int k = tensor_of(pl, i);
    finite_report r = {-1, 0, 0.f};
    if (k < 0) return r;
    r.tensor = k;
    r.element = i - pl->tensors[k].offset;
    r.value = value;
    return r;
}

finite_report finite_scan_ref(const float *data, const param_layout *pl) {
    finite_report r = {-1, 0, 0.f};
    for (int i = 0; i < pl->n_tensors; i++) {
        const param_tensor *t = &pl->tensors[i];
        for (int64_t j = 0; j < t->numel; j++)
            if (!isfinite(data[t->offset + j])) {
                r.tensor = i;
                r.element = j;
                r.value = data[t->offset + j];
                return r;
            }
    }
    return r;
}

#define FINITE_CHUNK ((int64_t)1 << 16)

// The first chunk of x (n) holding a non-finite value, or the chunk count when there is none. Chunks are flagged in
// parallel (x - x is 0 exactly for finite x, NaN otherwise: one branch-free pass); the lowest flagged one wins, so
// the answer is independent of the thread count.
static int64_t first_bad_chunk(const float *x, int64_t n) {
    const int64_t nc = (n + FINITE_CHUNK - 1) / FINITE_CHUNK;
    int64_t first = nc;
#pragma omp parallel for schedule(static) reduction(min : first) if (nc > 16)
    for (int64_t c = 0; c < nc; c++) {
        const int64_t a = c * FINITE_CHUNK, b = a + FINITE_CHUNK < n ? a + FINITE_CHUNK : n;
        float acc = 0.f;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = a; i < b; i++) acc += x[i] - x[i];
        if (acc != 0.f || isnan(acc)) first = c < first ? c : first;
    }
    return first;
}

finite_report finite_scan(const float *data, const param_layout *pl) {
    // the lowest flagged chunk is searched in order, so the result equals the reference's
    const int64_t n = pl->numel, first = first_bad_chunk(data, n);
    finite_report r = {-1, 0, 0.f};
    for (int64_t i = first * FINITE_CHUNK; i < n; i++) {
        if (isfinite(data[i])) continue;
        r = report_at(pl, i, data[i]);
        if (r.tensor >= 0) return r;
    }
    return r;
}

// Full-layout index of shard element i of rank `rank`, or -1 for a padding element past its block's end.
static int64_t shard_to_full(const param_layout *pl, const int64_t *shard_off, int rank, int64_t i) {
    int b = 0;
    while (b + 1 < pl->n_blocks && shard_off[b + 1] <= i) b++;
    const int64_t piece = shard_off[b + 1] - shard_off[b];
    const int64_t full = pl->block_off[b] + (int64_t)rank * piece + (i - shard_off[b]);
    return full < pl->block_off[b + 1] ? full : -1;
}

finite_report finite_scan_shard_ref(const float *shard, const param_layout *pl, const int64_t *shard_off, int rank) {
    finite_report r = {-1, 0, 0.f};
    for (int b = 0; b < pl->n_blocks; b++) {
        const int64_t piece = shard_off[b + 1] - shard_off[b];
        for (int64_t j = 0; j < piece; j++) {
            const int64_t full = pl->block_off[b] + (int64_t)rank * piece + j;
            if (full >= pl->block_off[b + 1]) break;   // zero padding of the last rank's piece
            const float x = shard[shard_off[b] + j];
            if (isfinite(x)) continue;
            r = report_at(pl, full, x);
            if (r.tensor >= 0) return r;
        }
    }
    return r;
}

finite_report finite_scan_shard(const float *shard, const param_layout *pl, const int64_t *shard_off, int rank) {
    const int64_t n = shard_off[pl->n_blocks], first = first_bad_chunk(shard, n);
    finite_report r = {-1, 0, 0.f};
    for (int64_t i = first * FINITE_CHUNK; i < n; i++) {
        if (isfinite(shard[i])) continue;
        const int64_t full = shard_to_full(pl, shard_off, rank, i);
        if (full < 0) continue;
        r = report_at(pl, full, shard[i]);
        if (r.tensor >= 0) return r;
    }
    return r;
}

void finite_check_params(const float *data, const param_layout *pl, const char *what, const char *hint) {
    const finite_report r = finite_scan(data, pl);
    if (r.tensor < 0) return;
    rlc_die("%s: tensor '%s' element %lld is %g%s%s", what, pl->tensors[r.tensor].name, (long long)r.element,
            (double)r.value, hint && *hint ? "; " : "", hint ? hint : "");
}

// What one rank found: the first bad value over the buffers it holds (buf = the buffer count when none), with its
// full-layout (or vector) index, so that the ranks' answers order as one process's scan would.
typedef struct {
    int64_t buf, index;
    double value;
} bad_value;

void finite_check_save(const finite_buf *bufs, int n, dist_ctx *d, int64_t step) {
    bad_value mine = {n, 0, 0.0};
    for (int i = 0; i < n && mine.buf == n; i++) {
        const finite_buf *b = &bufs[i];
        if (!b->data) continue;
        if (!b->pl) {
            for (int64_t j = 0; j < b->n; j++)
                if (!isfinite(b->data[j])) { mine = (bad_value){i, j, b->data[j]}; break; }
            continue;
        }
        const finite_report r = b->shard_off ? finite_scan_shard(b->data, b->pl, b->shard_off, d ? d->rank : 0)
                                             : finite_scan(b->data, b->pl);
        if (r.tensor >= 0) mine = (bad_value){i, b->pl->tensors[r.tensor].offset + r.element, r.value};
    }
    bad_value first = mine;
    const int W = d ? d->world : 1;
    if (W > 1) {   // every rank learns every rank's answer, so all take the same decision
        bad_value *all = rlc_malloc(sizeof(bad_value) * (size_t)W);
        dist_allgather(d, &mine, all, sizeof mine, "the non-finite check before a checkpoint");
        for (int r = 0; r < W; r++)
            if (all[r].buf < first.buf || (all[r].buf == first.buf && all[r].index < first.index)) first = all[r];
        free(all);
    }
    if (first.buf == n) return;
    const finite_buf *b = &bufs[first.buf];
    const char *tname = b->name;
    int64_t el = first.index;
    if (b->pl) {
        const int k = tensor_of(b->pl, first.index);
        tname = b->pl->tensors[k].name;
        el = first.index - b->pl->tensors[k].offset;
    }
#define SAVE_FMT "training step %lld: %s went non-finite: tensor '%s' element %lld is %g; the checkpoint is not written " \
                 "and the last good one stays the latest (lower the learning rate or check the data)"
    if (W == 1) rlc_die(SAVE_FMT, (long long)step, b->what, tname, (long long)el, first.value);
    if (d->rank == 0) rlc_log_line("error", SAVE_FMT, (long long)step, b->what, tname, (long long)el, first.value);
#undef SAVE_FMT
    fflush(stdout);
    fflush(stderr);
    // the line is out before any rank leaves: mpirun ends the job at the first rank that exits
    dist_barrier(d, "the non-finite check before a checkpoint");
    exit(1);
}
