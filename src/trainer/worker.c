// worker.c: a role's inference and update passes, one code path with or without sharding (see worker.h).
#include "trainer/worker.h"

#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "model/value_head.h"
#include "trainer/config.h"

// 1-token padding pass of a rank with fewer micro-batches than another: nothing scored.
static const int32_t dummy_tok = 0, dummy_tgt = -1, dummy_cu[2] = {0, 1};
static const float dummy_mask = 0.0f;

// The starts (n+1) of the micro-batches of the packed rows p (rows already in micro-batch order when dynamic).
static int split_fixed(const packed_rows *p, int64_t micro_seqs, int64_t max_tokens, int *starts) {
    engine_mb mb = {0, 0, NULL, 0};
    if (micro_seqs != RLC_CFG_NULL && micro_seqs > 0) mb.micro_batch_seqs = (int)micro_seqs;
    else mb.micro_batch_tokens = max_tokens > 0 ? max_tokens : 0;
    engine_batch b = {p->n, p->cu, p->tokens, p->targets, p->loss_mask};
    return engine_split(&b, &mb, starts);
}

// Micro-batch [s0, s1) of p as an engine batch; cu_mb (s1-s0+1) receives its local offsets.
static engine_batch micro_of(const packed_rows *p, int s0, int s1, int32_t *cu_mb) {
    int32_t base = p->cu[s0];
    for (int q = s0; q <= s1; q++) cu_mb[q - s0] = p->cu[q] - base;
    engine_batch mb = {s1 - s0, cu_mb, p->tokens + base, p->targets + base, p->loss_mask + base};
    return mb;
}

// The decoder batch of an engine batch, positions in pos (T).
static decoder_batch decoder_batch_of(const engine_batch *b, int32_t *pos) {
    decoder_batch qb;
    memset(&qb, 0, sizeof qb);
    qb.T = b->cu_seqlens[b->n_seqs];
    qb.n_seqs = b->n_seqs;
    qb.tokens = b->tokens;
    qb.cu_seqlens = b->cu_seqlens;
    qb.pos = pos;
    decoder_batch_positions(&qb);
    return qb;
}

// A value worker's inference pass: values (T) of the batch b.
static void value_pass(worker *w, const engine_batch *b, float *values) {
    const int64_t T = b->cu_seqlens[b->n_seqs], H = w->model->cfg->hidden_size;
    int32_t *pos = rlc_malloc(sizeof(int32_t) * (size_t)T);
    float *hidden = rlc_malloc(sizeof(float) * (size_t)(T * H));   // (T, H)
    decoder_batch qb = decoder_batch_of(b, pos);
    decoder_forward(w->model, NULL, &qb, hidden);
    value_head_forward(values, hidden, w->head->p, T, H);
    free(pos);
    free(hidden);
}

void worker_infer(worker *w, const step_batch *sb, int *rows, int n, const worker_mb_cfg *mc, packed_rows *p,
                  worker_infer_fn fn, void *user) {
    int *starts = rlc_malloc(sizeof(int) * (size_t)(n + 1));
    int nmb;
    if (mc->dynamic) {
        nmb = step_batch_micro_batches(sb, rows, n, mc->max_tokens, mc->key, starts);
        packed_rows_init(p, sb, rows, n);
    } else {
        packed_rows_init(p, sb, rows, n);
        nmb = split_fixed(p, mc->micro_seqs, mc->max_tokens, starts);
    }
    fsdp_state *fs = w->d && w->infer_sharded ? w->fs : NULL;
    int64_t K = nmb;
    if (fs) {
        fsdp_attach(fs, w->model, 0);   // the weights come from the shards (an update detaches its own hooks)
        dist_allreduce_i64(w->d, &K, 1, DIST_MAX, "all-reduce of the inference micro-batch count");
    }
    int32_t *cu_mb = rlc_malloc(sizeof(int32_t) * (size_t)(n + 1));
    float dummy_out[2];
    decoder_model *saved = w->eng->model;   // a borrowed engine runs this worker's model
    w->eng->model = w->model;
    const int lora_was_on = w->model->lora_on;
    if (w->adapters_off) decoder_lora_enable(w->model, 0);
    for (int64_t i = 0; i < K; i++) {
        if (fs) fsdp_begin_pass(fs, i + 1 < K);
        if (i < nmb) {
            engine_batch mb = micro_of(p, starts[i], starts[i + 1], cu_mb);
            fn(user, w->eng, &mb, p->cu[starts[i]]);
        } else {   // the same kind of pass as the real ones, so every rank issues the same block requests
            engine_batch mb = {1, dummy_cu, &dummy_tok, &dummy_tgt, &dummy_mask};
            engine_mb whole = {0, 0, NULL, 0};
            if (w->head) value_pass(w, &mb, dummy_out);
            else engine_infer_mb(w->eng, &mb, &whole, dummy_out, NULL);
        }
        if (fs) fsdp_end_pass(fs);
    }
    w->eng->model = saved;
    if (w->adapters_off) decoder_lora_enable(w->model, lora_was_on);
    if (fs) fsdp_invalidate(fs);
    free(cu_mb);
    free(starts);
}

typedef struct {
    float *lp, *ent;   // (T of the packed rows) outputs
} lp_out;

static void infer_lp(void *user, engine *e, const engine_batch *b, int64_t tok_off) {
    lp_out *o = user;
    engine_mb whole = {0, 0, NULL, 0};
    engine_infer_mb(e, b, &whole, o->lp + tok_off, o->ent ? o->ent + tok_off : NULL);
}

void worker_infer_logprobs(worker *w, const step_batch *sb, const int *sel, int nsel, const worker_mb_cfg *mc,
                           float *lp_padded, float *ent_padded) {
    int n = sel ? nsel : sb->B;
    int *rows = rlc_malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) rows[i] = sel ? sel[i] : i;
    int64_t T = 0;
    for (int s = 0; s < n; s++) T += sb->cu[rows[s] + 1] - sb->cu[rows[s]];
    lp_out o = {rlc_malloc(sizeof(float) * (size_t)(T > 0 ? T : 1)),
                ent_padded ? rlc_malloc(sizeof(float) * (size_t)(T > 0 ? T : 1)) : NULL};
    packed_rows p;
    worker_infer(w, sb, rows, n, mc, &p, infer_lp, &o);
    // restore_dynamic_batch: back to the step order
    for (int s = 0; s < n; s++) {
        int i = rows[s];
        int64_t base = p.cu[s] + sb->plen[i] - 1;
        for (int64_t k = 0; k < sb->Tr; k++) {
            int in = k < sb->rlen[i];
            lp_padded[(size_t)i * sb->Tr + k] = in ? o.lp[base + k] : 0.0f;
            if (o.ent) ent_padded[(size_t)i * sb->Tr + k] = in ? o.ent[base + k] : 0.0f;
        }
    }
    packed_rows_free(&p);
    free(o.lp); free(o.ent); free(rows);
}

typedef struct {
    worker *w;
    float *values;     // (T of the packed rows)
} values_out;

static void infer_values(void *user, engine *e, const engine_batch *b, int64_t tok_off) {
    (void)e;
    values_out *o = user;
    value_pass(o->w, b, o->values + tok_off);
}

void worker_infer_values(worker *w, const step_batch *sb, const int *sel, int nsel, const worker_mb_cfg *mc,
                         float *values_padded) {
    CHECK(w->head, "worker %s has no value head", w->name);
    int n = sel ? nsel : sb->B;
    int *rows = rlc_malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) rows[i] = sel ? sel[i] : i;
    int64_t T = 0;
    for (int s = 0; s < n; s++) T += sb->cu[rows[s] + 1] - sb->cu[rows[s]];
    values_out o = {w, rlc_malloc(sizeof(float) * (size_t)(T > 0 ? T : 1))};
    packed_rows p;
    worker_infer(w, sb, rows, n, mc, &p, infer_values, &o);
    for (int s = 0; s < n; s++) {   // verl: values[o-R-1 : o-1], the position before each response token
        int i = rows[s];
        int64_t base = p.cu[s] + sb->plen[i] - 1;
        for (int64_t k = 0; k < sb->Tr; k++) values_padded[(size_t)i * sb->Tr + k] = k < sb->rlen[i] ? o.values[base + k] : 0.0f;
    }
    packed_rows_free(&p);
    free(o.values); free(rows);
}

// A value worker's forward + loss + backward of one micro-batch: decoder -> value head -> the loss's d/d value ->
// the head's backward -> decoder_backward_hidden, accumulating into the engine's gradient and the head's.
static void value_forward_backward(worker *w, const engine_batch *b, engine_loss_fn fn, void *user, double global_tokens) {
    engine *e = w->eng;
    const int64_t T = b->cu_seqlens[b->n_seqs], H = e->model->cfg->hidden_size;
    engine_reserve(e, T);   // saved activations and the per-token buffers for T tokens
    float *hidden = rlc_malloc(sizeof(float) * (size_t)(T * H)), *dhid = rlc_calloc((size_t)(T * H), sizeof(float));
    decoder_batch qb = decoder_batch_of(b, e->pos);
    decoder_forward(e->model, e->acts, &qb, hidden);
    value_head_forward(e->logp, hidden, w->head->p, T, H);
    memset(e->dlogp, 0, sizeof(float) * (size_t)T);
    engine_micro m = {
        .index = 0, .count = 1, .seq_begin = 0, .n_seqs = b->n_seqs, .tok_begin = 0, .T = T,
        .cu_seqlens = b->cu_seqlens, .tokens = b->tokens, .targets = b->targets, .loss_mask = b->loss_mask,
        .logp = e->logp, .entropy = NULL, .dlogp = e->dlogp, .dentropy = NULL,
        .global_tokens = global_tokens > 0 ? global_tokens : engine_batch_tokens(b), .global_seqs = b->n_seqs,
    };
    fn(user, &m);
    value_head_backward(dhid, w->head->g, e->dlogp, hidden, w->head->p, T, H);
    decoder_backward_hidden(e->model, e->acts, &qb, dhid, &e->grads);
    free(hidden);
    free(dhid);
}

// One process's optimizer step of a value worker: one clip norm over the decoder's and the head's gradients,
// then AdamW on both with the same step number.
static engine_opt_result value_optimizer_step(worker *w) {
    engine *e = w->eng;
    worker_head *h = w->head;
    const int64_t n = e->grads.layout->numel;
    clip_result c = grad_clip_finish(grad_sumsq(e->grads.data, n) + grad_sumsq(h->g, h->n), e->cfg.clip_grad);
    engine_opt_result r = {c.norm, c.finite, lr_schedule_current(&e->sched)};
    if (c.finite) {
        adamw_step_clipped(&e->opt, e->model->params, &e->grads, r.lr, &c);
        adamw_update_scaled(h->p, h->g, h->m, h->v, h->n, &e->opt.h, r.lr, e->opt.step, (float)c.coef);
    } else {
        grad_clip_apply(e->grads.data, n, &c);
        grad_clip_apply(h->g, h->n, &c);
        rlc_warn("%s grad_norm is not finite (%g): optimizer step skipped, gradients zeroed", w->name, c.norm);
    }
    return r;
}

// The same under data parallelism: the head's gradient (replicated) is all-reduced, the clip norm covers the
// decoder's shards (all-reduced sum of squares) and the head; the shards are scaled in place by the clip coefficient
// (what fsdp_optimizer_step's own clipping does) and stepped unclipped, the head with the same step number.
static engine_opt_result value_optimizer_step_sharded(worker *w) {
    fsdp_state *fs = w->fs;
    worker_head *h = w->head;
    double *hg = rlc_malloc(sizeof(double) * (size_t)h->n);
    for (int64_t i = 0; i < h->n; i++) hg[i] = h->g[i];
    dist_allreduce_f64(w->d, hg, (int)h->n, DIST_SUM, "all-reduce of the value head's gradient");
    for (int64_t i = 0; i < h->n; i++) h->g[i] = (float)hg[i];
    free(hg);
    fsdp_invalidate(fs);
    fsdp_grad_flush(fs);
    double ss = grad_sumsq(fs->g, fs->shard_numel);   // pad elements are 0
    dist_allreduce_f64(w->d, &ss, 1, DIST_SUM, "all-reduce of the critic's gradient sum of squares");
    clip_result c = grad_clip_finish(ss + grad_sumsq(h->g, h->n), w->eng->cfg.clip_grad);
    engine_opt_result r = {c.norm, c.finite, lr_schedule_current(&w->eng->sched)};
    if (c.finite) {
        grad_clip_apply(fs->g, fs->shard_numel, &c);
        fsdp_optimizer_step(fs, r.lr, 0);   // (clipped above; 0 = no further clipping)
        adamw_update_scaled(h->p, h->g, h->m, h->v, h->n, &fs->h, r.lr, fs->opt_step, (float)c.coef);
    } else {
        memset(fs->g, 0, sizeof(float) * (size_t)fs->shard_numel);
        grad_clip_apply(h->g, h->n, &c);
        rlc_warn("%s grad_norm is not finite (%g): optimizer step skipped, gradients zeroed", w->name, c.norm);
    }
    return r;
}

void worker_epoch_order(int *order, int B, int shuffle, int64_t seed, int64_t step, int64_t ep) {
    for (int i = 0; i < B; i++) order[i] = i;
    if (!shuffle) return;
    rng r;
    rng_stream(&r, (uint64_t)seed, (uint64_t)step, (uint64_t)ep);
    for (int i = B - 1; i > 0; i--) {
        int j = (int)rng_below(&r, (uint64_t)(i + 1));
        int t = order[i]; order[i] = order[j]; order[j] = t;
    }
}

// engine_loss_fn adapter: the role's loss sees the micro-batch's step rows.
typedef struct {
    const worker_loss *L;
    const int *rows;
    double G;
} loss_adapter;

static double adapter_fn(void *user, const engine_micro *mb) {
    loss_adapter *a = user;
    return a->L->loss(a->L->user, a->rows + mb->seq_begin, a->G, mb);
}

static double zero_loss_fn(void *user, const engine_micro *mb) { (void)user; (void)mb; return 0.0; }

// Sum the engine's (replicated) gradient over the ranks, in float64 chunks: every rank gets the same sum, so the
// replicated AdamW steps stay identical.
static void allreduce_grads(worker *w) {
    enum { CHUNK = 1 << 20 };
    float *g = w->eng->grads.data;
    const int64_t n = w->eng->grads.layout->numel;
    double *buf = rlc_malloc(sizeof(double) * (size_t)(n < CHUNK ? (n > 0 ? n : 1) : CHUNK));
    for (int64_t o = 0; o < n; o += CHUNK) {
        const int c = (int)(n - o < CHUNK ? n - o : CHUNK);
        for (int i = 0; i < c; i++) buf[i] = g[o + i];
        dist_allreduce_f64(w->d, buf, c, DIST_SUM, "all-reduce of the adapters' gradient");
        for (int i = 0; i < c; i++) g[o + i] = (float)buf[i];
    }
    free(buf);
}

worker_update_result worker_update(worker *w, const step_batch *sb, const worker_update_cfg *uc, const worker_loss *L) {
    const int W = w->d ? w->d->world : 1, R = w->d ? w->d->rank : 0;
    fsdp_state *fs = w->d ? w->fs : NULL;
    // LoRA under data parallelism: the adapters, their gradient and AdamW state are replicated (small), the
    // gradient all-reduced before the step, so every rank takes the same step; the frozen base has no state to shard
    const int replicated = W > 1 && !fs && w->model->lora && !w->head;
    CHECK(W == 1 || fs || replicated, "worker %s: %d ranks without sharded state", w->name, W);
    int B = sb->B;
    int mini_seqs = (int)(uc->mini_seqs < B ? uc->mini_seqs : B);
    int n_mini = B / mini_seqs, nl = mini_seqs / W;
    CHECK(nl * W == mini_seqs, "worker %s: mini-batch of %d sequences over %d ranks", w->name, mini_seqs, W);
    int *order = rlc_malloc(sizeof(int) * (size_t)B), *rows = rlc_malloc(sizeof(int) * (size_t)mini_seqs);
    int *mine = rlc_malloc(sizeof(int) * (size_t)nl), *starts = rlc_malloc(sizeof(int) * (size_t)(nl + 1));
    int32_t *cu_mb = rlc_malloc(sizeof(int32_t) * (size_t)(nl + 1));
    engine_mb whole = {0, 0, NULL, 0};
    worker_update_result res = {0, 0};
    if (fs) fsdp_attach(fs, w->model, 1);   // the update runs on the shards (ZeRO-3)
    for (int64_t ep = 0; ep < uc->epochs; ep++) {
        worker_epoch_order(order, B, uc->shuffle, uc->seed, uc->step, ep);   // the same order for every rank count
        for (int mi = 0; mi < n_mini; mi++) {
            if (uc->prog && uc->prog->tty) {
                char ph[64];
                snprintf(ph, sizeof ph, "%s %lld/%lld", uc->phase, (long long)(ep * n_mini + mi + 1),
                         (long long)(uc->epochs * n_mini));
                progress_phase(uc->prog, uc->step + 1, ph);
            }
            memcpy(rows, order + (size_t)mi * mini_seqs, sizeof(int) * (size_t)mini_seqs);
            if (W > 1) {   // balance_batch: this rank's equal-size part of the mini-batch
                rlc_partition part;
                step_batch_balance(&part, sb, rows, mini_seqs, W);
                CHECK_EQ(part.offsets[R + 1] - part.offsets[R], nl, "balanced part size");
                for (int i = 0; i < nl; i++) mine[i] = rows[part.items[part.offsets[R] + i]];
                rlc_partition_free(&part);
            } else {
                memcpy(mine, rows, sizeof(int) * (size_t)nl);
            }
            int nmb;
            packed_rows p;
            if (uc->dynamic) {
                nmb = step_batch_micro_batches(sb, mine, nl, uc->max_tokens, uc->key, starts);
                packed_rows_init(&p, sb, mine, nl);
            } else {   // verl: consecutive chunks of ppo_micro_batch_size_per_gpu
                CHECK(uc->micro_seqs > 0, "worker %s: micro-batch size %lld", w->name, (long long)uc->micro_seqs);
                packed_rows_init(&p, sb, mine, nl);
                nmb = split_fixed(&p, uc->micro_seqs, 0, starts);
            }
            engine_batch eb = {nl, p.cu, p.tokens, p.targets, p.loss_mask};
            double N = engine_batch_tokens(&eb);
            int64_t K = nmb;
            if (W > 1) {
                dist_allreduce_f64(w->d, &N, 1, DIST_SUM, "all-reduce of the mini-batch loss-token count");
                // (replicated adapters: no per-pass collectives, so a rank runs only its own micro-batches)
                if (fs) dist_allreduce_i64(w->d, &K, 1, DIST_MAX, "all-reduce of the micro-batch count");
            }
            if (!fs) engine_zero_grad(w->eng);   // (sharded: fsdp_optimizer_step consumed the last grad shard)
            if (w->head) memset(w->head->g, 0, sizeof(float) * (size_t)w->head->n);
            for (int64_t i = 0; i < K; i++) {
                engine_fb_stats st;
                if (fs) fsdp_begin_pass(fs, i + 1 < K);
                if (i < nmb) {
                    engine_batch mb = micro_of(&p, starts[i], starts[i + 1], cu_mb);
                    loss_adapter a = {L, mine + starts[i], (double)mini_seqs};
                    if (w->head) value_forward_backward(w, &mb, adapter_fn, &a, N > 0 ? N : -1);
                    else engine_forward_backward(w->eng, &mb, &whole, uc->want_entropy, adapter_fn, &a, N > 0 ? N : -1, &st);
                } else {   // the same kind of pass as the real ones (the same block requests on every rank)
                    engine_batch mb = {1, dummy_cu, &dummy_tok, &dummy_tgt, &dummy_mask};
                    if (w->head) value_forward_backward(w, &mb, zero_loss_fn, NULL, N > 0 ? N : 1);
                    else engine_forward_backward(w->eng, &mb, &whole, uc->want_entropy, zero_loss_fn, NULL, N > 0 ? N : 1, &st);
                }
                if (fs) fsdp_end_pass(fs);
            }
            double norm;
            int finite;
            if (fs && w->head) {
                engine_opt_result r = value_optimizer_step_sharded(w);
                norm = r.grad_norm;
                finite = r.finite;
            } else if (fs) {
                clip_result cr = fsdp_optimizer_step(fs, lr_schedule_current(&w->eng->sched), w->eng->cfg.clip_grad);
                norm = cr.norm;
                finite = cr.finite;
            } else {
                if (replicated) allreduce_grads(w);
                engine_opt_result r = w->head ? value_optimizer_step(w) : engine_optimizer_step(w->eng);
                norm = r.grad_norm;
                finite = r.finite;
            }
            if (!finite) res.n_nonfinite++;
            if (L->minibatch_end) L->minibatch_end(L->user, W > 1 ? w->d : NULL, norm);
            packed_rows_free(&p);
        }
    }
    if (fs) fsdp_detach(w->model);
    res.lr = engine_lr_scheduler_step(w->eng);   // once per training step, after the last mini-batch
    free(order); free(rows); free(mine); free(starts); free(cu_mb);
    return res;
}
