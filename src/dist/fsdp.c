// fsdp.c: sharded params/grads/AdamW state, per-block all-gather with prefetch, reduce-scatter, sharded step.
#include "dist/fsdp.h"

#include <string.h>

#include "core/common.h"

static int64_t block_numel(const fsdp_state *f, int b) { return f->pl->block_off[b + 1] - f->pl->block_off[b]; }

// This rank's element range of block b, relative to the block start: [lo, hi) (hi - lo may be < s_b).
static void own_range(const fsdp_state *f, int b, int64_t *lo, int64_t *hi) {
    int64_t s = f->shard_len[b], n = block_numel(f, b);
    int64_t a = (int64_t)f->d->rank * s, e = a + s;
    if (a > n) a = n;
    if (e > n) e = n;
    *lo = a;
    *hi = e;
}

// shard (shard_numel) <- this rank's pieces of full (numel), zero padded.
static void scatter_from_full(const fsdp_state *f, const float *full, float *shard) {
    memset(shard, 0, (size_t)f->shard_numel * sizeof(float));
    if (!full) return;
    for (int b = 0; b < f->nb; b++) {
        int64_t lo, hi;
        own_range(f, b, &lo, &hi);
        if (hi > lo) memcpy(shard + f->shard_off[b], full + f->pl->block_off[b] + lo, (size_t)(hi - lo) * sizeof(float));
    }
}

static void init_common(fsdp_state *f, dist_ctx *d, const param_layout *pl, const float *full, const adamw_hparams *h,
                        int frozen);

void fsdp_init(fsdp_state *f, dist_ctx *d, const param_layout *pl, const float *full, const adamw_hparams *h) {
    init_common(f, d, pl, full, h, 0);
}

void fsdp_init_frozen(fsdp_state *f, dist_ctx *d, const param_layout *pl, const float *full, const fsdp_state *slots_from) {
    adamw_hparams h;
    memset(&h, 0, sizeof h);
    init_common(f, d, pl, full, &h, slots_from ? 2 : 1);
    if (slots_from) {
        CHECK(slots_from->d == d && slots_from->slot_cap == f->slot_cap, "fsdp: borrowed slots of another layout");
        f->slot[0] = slots_from->slot[0];
        f->slot[1] = slots_from->slot[1];
    }
}

static void init_common(fsdp_state *f, dist_ctx *d, const param_layout *pl, const float *full, const adamw_hparams *h,
                        int frozen) {
    memset(f, 0, sizeof *f);
    f->d = d;
    f->pl = pl;
    f->nb = pl->n_blocks;
    f->h = *h;
    const int W = d->world;
    CHECK(W >= 1 && d->rank >= 0 && d->rank < W, "fsdp: rank %d of %d", d->rank, W);
    f->shard_len = rlc_malloc((size_t)f->nb * sizeof(int64_t));
    f->shard_off = rlc_malloc(((size_t)f->nb + 1) * sizeof(int64_t));
    int64_t off = 0, smax = 0;
    for (int b = 0; b < f->nb; b++) {
        int64_t n = pl->block_off[b + 1] - pl->block_off[b];
        int64_t s = (n + W - 1) / W;
        if (W > 1) s = (s + 15) / 16 * 16;   // pieces padded to 16 floats (64 B) so shards stay aligned
        else s = n;                          // one rank: the shard is the block, no padding
        f->shard_len[b] = s;
        f->shard_off[b] = off;
        off += s;
        if (s > smax) smax = s;
    }
    f->shard_off[f->nb] = off;
    f->shard_numel = off;
    size_t bytes = (size_t)(off > 0 ? off : 1) * sizeof(float);
    const int borrow = frozen == 2;   // the gather slots come from another state (fsdp_init_frozen)
    frozen = frozen != 0;
    f->frozen = frozen;
    f->slots_borrowed = borrow;
    f->p = rlc_alloc(bytes);
    f->g = frozen ? NULL : rlc_alloc_zero(bytes);
    f->m = frozen ? NULL : rlc_alloc_zero(bytes);
    f->v = frozen ? NULL : rlc_alloc_zero(bytes);
    scatter_from_full(f, full, f->p);
    f->slot_cap = W > 1 ? (int64_t)W * smax : 0;
    for (int i = 0; i < 2; i++) {
        f->slot[i] = W > 1 && !borrow ? rlc_alloc_zero((size_t)f->slot_cap * sizeof(float)) : NULL;
        f->slot_block[i] = -1;
    }
    f->pad = W > 1 && !frozen ? rlc_alloc_zero((size_t)f->slot_cap * sizeof(float)) : NULL;
    f->trace_cap = 4 * f->nb + 8;
    f->trace = rlc_malloc((size_t)f->trace_cap * sizeof(int));
    f->trace_cur = rlc_malloc((size_t)f->trace_cap * sizeof(int));
}

void fsdp_free(fsdp_state *f) {
    fsdp_invalidate(f);
    rlc_free(f->p); rlc_free(f->g); rlc_free(f->m); rlc_free(f->v);
    if (!f->slots_borrowed) { rlc_free(f->slot[0]); rlc_free(f->slot[1]); }
    rlc_free(f->pad);
    free(f->shard_len); free(f->shard_off); free(f->trace); free(f->trace_cur);
    memset(f, 0, sizeof *f);
}

static void start_gather(fsdp_state *f, int slot, int b) {
    CHECK(!f->slot_pending[slot], "fsdp: slot %d busy", slot);
    dist_iallgather_f32(f->d, f->p + f->shard_off[b], f->slot[slot], f->shard_len[b], DIST_K_ALLGATHER,
                        "all-gather of a parameter block", &f->slot_req[slot]);
    f->slot_block[slot] = b;
    f->slot_pending[slot] = 1;
    f->n_gathers++;
}

static void finish(fsdp_state *f, int slot) {
    if (!f->slot_pending[slot]) return;
    dist_wait(f->d, &f->slot_req[slot]);
    f->slot_pending[slot] = 0;
}

void fsdp_invalidate(fsdp_state *f) {
    for (int i = 0; i < 2; i++) {
        finish(f, i);
        f->slot_block[i] = -1;
    }
}

void fsdp_begin_pass(fsdp_state *f, int another_follows) {
    f->trace_cur_len = 0;
    f->wrap = another_follows;
}

void fsdp_end_pass(fsdp_state *f) {
    memcpy(f->trace, f->trace_cur, (size_t)f->trace_cur_len * sizeof(int));
    f->trace_len = f->trace_cur_len;
}

float *fsdp_get_block(void *ctx, int b) {
    fsdp_state *f = ctx;
    CHECK(b >= 0 && b < f->nb, "fsdp: block %d of %d", b, f->nb);
    if (f->d->world == 1) return f->p + f->shard_off[b];   // the shard is the whole block
    if (f->slot_block[f->cur] == b && !f->slot_pending[f->cur]) return f->slot[f->cur];   // repeated request
    int pos = f->trace_cur_len;
    if (f->trace_cur_len < f->trace_cap) f->trace_cur[f->trace_cur_len++] = b;
    int o = 1 - f->cur;
    if (f->slot_block[o] == b) {
        if (f->slot_pending[o]) f->n_prefetch_hits++;
        finish(f, o);
    } else {
        finish(f, o);                      // a mispredicted prefetch still has to complete on every rank
        start_gather(f, o, b);
        finish(f, o);
        f->n_sync_gathers++;
    }
    f->cur = o;
    // Prefetch the block the previous pass asked for next (every rank has the same trace).
    int nxt = -1;
    if (pos + 1 < f->trace_len && f->trace[pos] == b) nxt = f->trace[pos + 1];
    else if (f->wrap && pos + 1 == f->trace_len && f->trace[pos] == b) nxt = f->trace[0];
    if (nxt >= 0 && nxt != b && f->slot_block[1 - f->cur] != nxt) start_gather(f, 1 - f->cur, nxt);
    return f->slot[f->cur];
}

void fsdp_reduce_grads(fsdp_state *f, const float *full_grad) {
    CHECK(!f->frozen, "fsdp: gradient reduce on frozen (parameters-only) state");
    const int W = f->d->world;
    for (int b = 0; b < f->nb; b++) {
        int64_t n = block_numel(f, b), s = f->shard_len[b];
        const float *src = full_grad + f->pl->block_off[b];
        if (W == 1) { memcpy(f->g + f->shard_off[b], src, (size_t)n * sizeof(float)); continue; }
        // (W * s) padded send buffer: the block then zeros
        memcpy(f->pad, src, (size_t)n * sizeof(float));
        memset(f->pad + n, 0, (size_t)(W * s - n) * sizeof(float));
        dist_reduce_scatter_f32(f->d, f->pad, f->g + f->shard_off[b], s, "reduce-scatter of a gradient block");
    }
}

clip_result fsdp_optimizer_step(fsdp_state *f, double lr, double max_norm) {
    CHECK(!f->frozen, "fsdp: optimizer step on frozen (parameters-only) state");
    fsdp_invalidate(f);
    double ss = grad_sumsq(f->g, f->shard_numel);   // pad elements are 0
    dist_allreduce_f64(f->d, &ss, 1, DIST_SUM, "all-reduce of the gradient sum of squares");
    clip_result c = grad_clip_finish(ss, max_norm);
    grad_clip_apply(f->g, f->shard_numel, &c);
    if (c.finite) {
        f->opt_step++;
        adamw_update(f->p, f->g, f->m, f->v, f->shard_numel, &f->h, lr, f->opt_step);
    }
    return c;
}

void fsdp_gather_full(fsdp_state *f, const float *shard, float *full, int root) {
    const int W = f->d->world;
    fsdp_invalidate(f);
    for (int b = 0; b < f->nb; b++) {
        int64_t n = block_numel(f, b);
        if (W == 1) {
            if (full) memcpy(full + f->pl->block_off[b], shard + f->shard_off[b], (size_t)n * sizeof(float));
            continue;
        }
        dist_allgather_f32(f->d, shard + f->shard_off[b], f->slot[0], f->shard_len[b],
                           root < 0 ? "all-gather of a block to every rank" : "gather of a block to rank 0");
        if ((root < 0 || f->d->rank == root) && full) memcpy(full + f->pl->block_off[b], f->slot[0], (size_t)n * sizeof(float));
    }
}

void fsdp_save_optimizer(fsdp_state *f, const char *path, int64_t sched_step) {
    adamw_state st;
    int root = f->d->rank == 0;
    if (root) adamw_init(&st, f->pl, &f->h);
    fsdp_gather_full(f, f->m, root ? st.m.data : NULL, 0);
    fsdp_gather_full(f, f->v, root ? st.v.data : NULL, 0);
    if (root) {
        st.step = f->opt_step;
        int64_t extra[1] = {sched_step};
        adamw_save(&st, path, extra, 1);
        adamw_free(&st);
    }
    dist_barrier(f->d, "optimizer state save");
}

int64_t fsdp_load_optimizer(fsdp_state *f, const char *path) {
    adamw_state st;
    adamw_init(&st, f->pl, &f->h);   // transient full-layout m/v on every rank
    int64_t extra[1] = {0};
    int n = adamw_load(&st, path, extra, 1);
    if (n < 1) rlc_die("%s: optimizer state has no LR scheduler step", path);
    if (extra[0] < 0) rlc_die("%s: negative LR scheduler step %lld", path, (long long)extra[0]);
    scatter_from_full(f, st.m.data, f->m);
    scatter_from_full(f, st.v.data, f->v);
    f->opt_step = st.step;
    f->h = st.h;
    adamw_free(&st);
    return extra[0];
}

fsdp_memory fsdp_memory_report(const fsdp_state *f) {
    fsdp_memory r;
    r.shard_bytes = (f->frozen ? 1 : 4) * f->shard_numel * (int64_t)sizeof(float);
    r.slot_bytes = ((f->slots_borrowed ? 0 : 2) + (f->frozen ? 0 : 1)) * f->slot_cap * (int64_t)sizeof(float);
    r.full_grad_bytes = f->pl->numel * (int64_t)sizeof(float);
    r.unsharded_bytes = 4 * f->pl->numel * (int64_t)sizeof(float);
    return r;
}
