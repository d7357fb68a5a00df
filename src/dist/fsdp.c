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

// Gradient staging slot 0 holds the vocabulary-sized blocks: the embedding (the tied head starts its gradient at
// the beginning of the backward and the embedding backward ends it) and, untied, the last block (lm_head + final
// norm, complete before the layers start, so the two never accumulate at once).
static int grad_big_block(const fsdp_state *f, int b) {
    return b == 0 || (b == f->nb - 1 && !f->pl->cfg.tie_word_embeddings);
}

void fsdp_init(fsdp_state *f, dist_ctx *d, const param_layout *pl, const float *full, const adamw_hparams *h) {
    init_common(f, d, pl, full, h, 0);
}

void fsdp_init_frozen(fsdp_state *f, dist_ctx *d, const param_layout *pl, const float *full) {
    adamw_hparams h;
    memset(&h, 0, sizeof h);
    init_common(f, d, pl, full, &h, 1);
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
    f->frozen = frozen;
    f->p = rlc_alloc(bytes);
    f->g = frozen ? NULL : rlc_alloc_zero(bytes);
    f->m = frozen ? NULL : rlc_alloc_zero(bytes);
    f->v = frozen ? NULL : rlc_alloc_zero(bytes);
    scatter_from_full(f, full, f->p);
    f->slot_cap = W > 1 ? (int64_t)W * smax : 0;
    for (int i = 0; i < 2; i++) {
        // the actor's slots now; a frozen state's on first use (or never: fsdp_share_slots)
        f->slot[i] = W > 1 && !frozen ? rlc_alloc_zero((size_t)f->slot_cap * sizeof(float)) : NULL;
        f->slot_block[i] = -1;
    }
    for (int i = 0; i < 3; i++) {
        f->gblock[i] = f->grs_block[i] = -1;
        if (W == 1 || frozen) continue;
        int64_t s = 0;   // slot 0: the vocabulary-sized blocks; slots 1, 2: the largest other block
        for (int b = 0; b < f->nb; b++)
            if ((i == 0) == grad_big_block(f, b) && f->shard_len[b] > s) s = f->shard_len[b];
        f->gcap[i] = (int64_t)W * s;
        f->gbuf[i] = rlc_alloc_zero((size_t)(f->gcap[i] > 0 ? f->gcap[i] : 1) * sizeof(float));
        f->grecv[i] = rlc_alloc_zero((size_t)(s > 0 ? s : 1) * sizeof(float));
    }
    f->trace_cap = 4 * f->nb + 8;
    f->trace = rlc_malloc((size_t)f->trace_cap * sizeof(int));
    f->trace_cur = rlc_malloc((size_t)f->trace_cap * sizeof(int));
}

void fsdp_share_slots(fsdp_state *f, const fsdp_state *from) {
    CHECK(f->frozen && from->d == f->d && from->slot_cap == f->slot_cap, "fsdp: shared slots of another layout");
    fsdp_invalidate(f);
    if (!f->slots_borrowed) { rlc_free(f->slot[0]); rlc_free(f->slot[1]); }
    f->slot[0] = from->slot[0];
    f->slot[1] = from->slot[1];
    f->slots_borrowed = 1;
}

void fsdp_free(fsdp_state *f) {
    fsdp_invalidate(f);
    if (!f->frozen) fsdp_grad_flush(f);
    for (int i = 0; i < 3; i++) { rlc_free(f->gbuf[i]); rlc_free(f->grecv[i]); }
    rlc_free(f->p); rlc_free(f->g); rlc_free(f->m); rlc_free(f->v);
    if (!f->slots_borrowed) { rlc_free(f->slot[0]); rlc_free(f->slot[1]); }
    free(f->shard_len); free(f->shard_off); free(f->trace); free(f->trace_cur);
    memset(f, 0, sizeof *f);
}

static void progress(fsdp_state *f);

// Gather slot i, allocated on first use.
static float *slot_buf(fsdp_state *f, int i) {
    if (!f->slot[i]) {
        CHECK(!f->slots_borrowed, "fsdp: borrowed gather slot %d missing", i);
        f->slot[i] = rlc_alloc_zero((size_t)f->slot_cap * sizeof(float));
    }
    return f->slot[i];
}

static void start_gather(fsdp_state *f, int slot, int b) {
    CHECK(!f->slot_pending[slot], "fsdp: slot %d busy", slot);
    slot_buf(f, slot);
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
    progress(f);
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

// ---- gradients: per-block staging, nonblocking reduce-scatter, accumulation into the shard ----

// The reduce-scatter from slot i is complete: add its piece into the grad shard (in the fixed block order of the
// backward, so the sum is deterministic).
static void grad_finish(fsdp_state *f, int i, int wait) {
    if (f->grs_block[i] < 0) return;
    if (wait) dist_wait(f->d, &f->grs_req[i]);
    else if (!dist_test(f->d, &f->grs_req[i])) return;
    int b = f->grs_block[i];
    float *g = f->g + f->shard_off[b];
    const float *r = f->grecv[i];
    for (int64_t k = 0; k < f->shard_len[b]; k++) g[k] += r[k];
    f->grs_block[i] = -1;
}

// Nudge every transfer in flight (MPI only moves a large message inside MPI calls).
static void progress(fsdp_state *f) {
    for (int i = 0; i < 2; i++)
        if (f->slot_pending[i] && dist_test(f->d, &f->slot_req[i])) f->slot_pending[i] = 0;
    if (!f->frozen)
        for (int i = 0; i < 3; i++) grad_finish(f, i, 0);
}

float *fsdp_grad_block(void *ctx, int b) {
    fsdp_state *f = ctx;
    CHECK(!f->frozen, "fsdp: gradient of a frozen (parameters-only) state");
    CHECK(b >= 0 && b < f->nb, "fsdp: gradient block %d of %d", b, f->nb);
    if (f->d->world == 1) return f->g + f->shard_off[b];   // the shard is the block: accumulate in place
    for (int i = 0; i < 3; i++)
        if (f->gblock[i] == b) return f->gbuf[i];   // already accumulating in this pass
    progress(f);
    int i = 0;
    if (!grad_big_block(f, b)) {   // a rotating slot not accumulating; of two, the one whose reduce-scatter started first
        int c1 = f->gblock[1] < 0, c2 = f->gblock[2] < 0;
        CHECK(c1 || c2, "fsdp: gradient blocks %d and %d still accumulating when block %d starts", f->gblock[1],
              f->gblock[2], b);
        if (c1 && c2) i = f->grs_block[1] < 0 ? 1 : f->grs_block[2] < 0 ? 2 : f->grs_seq[1] < f->grs_seq[2] ? 1 : 2;
        else i = c1 ? 1 : 2;
    }
    CHECK(f->gblock[i] < 0, "fsdp: gradient staging slot %d busy with block %d when block %d starts", i, f->gblock[i], b);
    grad_finish(f, i, 1);
    int64_t n = (int64_t)f->d->world * f->shard_len[b];
    CHECK(n <= f->gcap[i], "fsdp: gradient block %d (%lld) exceeds staging slot %d (%lld)", b, (long long)n, i,
          (long long)f->gcap[i]);
    memset(f->gbuf[i], 0, (size_t)n * sizeof(float));   // the pad past the block's numel stays 0
    f->gblock[i] = b;
    return f->gbuf[i];
}

void fsdp_grad_done(void *ctx, int b) {
    fsdp_state *f = ctx;
    if (f->d->world == 1) return;
    int i = 0;
    while (i < 3 && f->gblock[i] != b) i++;
    CHECK(i < 3, "fsdp: gradient block %d done but not accumulating", b);
    CHECK(f->grs_block[i] < 0, "fsdp: staging slot %d still reducing block %d", i, f->grs_block[i]);
    dist_ireduce_scatter_f32(f->d, f->gbuf[i], f->grecv[i], f->shard_len[b], "reduce-scatter of a gradient block",
                             &f->grs_req[i]);
    f->grs_block[i] = b;
    f->grs_seq[i] = f->grs_count++;
    f->gblock[i] = -1;
}

void fsdp_grad_flush(fsdp_state *f) {
    CHECK(!f->frozen, "fsdp: gradient flush on frozen (parameters-only) state");
    for (int i = 0; i < 3; i++) {
        CHECK(f->gblock[i] < 0, "fsdp: gradient block %d never marked done", f->gblock[i]);
        grad_finish(f, i, 1);
    }
}

void fsdp_attach(fsdp_state *f, decoder_model *m, int grads) {
    m->get_block = fsdp_get_block;
    m->get_block_ctx = f;
    CHECK(!grads || !f->frozen, "fsdp: gradient hooks on a frozen state");
    m->get_grad_block = grads ? fsdp_grad_block : NULL;
    m->grad_block_done = grads ? fsdp_grad_done : NULL;
    m->grad_ctx = grads ? f : NULL;
}

void fsdp_detach(decoder_model *m) {
    m->get_block = NULL;
    m->get_block_ctx = NULL;
    m->get_grad_block = NULL;
    m->grad_block_done = NULL;
    m->grad_ctx = NULL;
}

clip_result fsdp_optimizer_step(fsdp_state *f, double lr, double max_norm) {
    CHECK(!f->frozen, "fsdp: optimizer step on frozen (parameters-only) state");
    fsdp_invalidate(f);
    fsdp_grad_flush(f);
    double ss = grad_sumsq(f->g, f->shard_numel);   // pad elements are 0
    dist_allreduce_f64(f->d, &ss, 1, DIST_SUM, "all-reduce of the gradient sum of squares");
    clip_result c = grad_clip_finish(ss, max_norm);
    grad_clip_apply(f->g, f->shard_numel, &c);
    if (c.finite) {
        f->opt_step++;
        adamw_update(f->p, f->g, f->m, f->v, f->shard_numel, &f->h, lr, f->opt_step);
    }
    memset(f->g, 0, (size_t)f->shard_numel * sizeof(float));   // consumed: the next step accumulates from 0
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
        dist_allgather_f32(f->d, shard + f->shard_off[b], slot_buf(f, 0), f->shard_len[b],
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
    const int64_t sched_step = adamw_load_resume(&st, path);
    scatter_from_full(f, st.m.data, f->m);
    scatter_from_full(f, st.v.data, f->v);
    f->opt_step = st.step;
    f->h = st.h;
    adamw_free(&st);
    return sched_step;
}

fsdp_memory fsdp_memory_report(const fsdp_state *f) {
    fsdp_memory r;
    r.shard_bytes = (f->frozen ? 1 : 4) * f->shard_numel * (int64_t)sizeof(float);
    r.slot_bytes = (f->slots_borrowed ? 0 : 2) * f->slot_cap * (int64_t)sizeof(float);
    r.grad_stage_bytes = 0;
    for (int i = 0; i < 3; i++)
        if (f->gbuf[i]) r.grad_stage_bytes += (f->gcap[i] + f->gcap[i] / f->d->world) * (int64_t)sizeof(float);
    r.unsharded_bytes = 4 * f->pl->numel * (int64_t)sizeof(float);
    return r;
}
