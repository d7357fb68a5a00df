// engine.c: micro-batched forward/backward with a loss callback, clipping, AdamW, LR schedule, inference.
#include "trainer/engine.h"

#include <math.h>

#include "core/common.h"

void engine_config_default(engine_config *c) {
    memset(c, 0, sizeof *c);
    c->adam = adamw_hparams_default();
    c->lr = 1e-6;
    c->lr_sched = LR_CONSTANT;
    c->warmup_steps = 0;
    c->total_steps = 0;
    c->min_lr = 0.0;
    c->clip_grad = 1.0;
    c->ckpt = CKPT_NONE;
    c->temperature = 1.0f;
}

void engine_init(engine *e, decoder_model *model, const engine_config *cfg) {
    memset(e, 0, sizeof *e);
    e->cfg = *cfg;
    e->model = model;
    if (!(cfg->temperature > 0) || !isfinite(cfg->temperature)) rlc_die("engine: temperature %g must be > 0", cfg->temperature);
    // with LoRA adapters on the model (decoder_set_lora) the trainable set is the adapters': gradients, moments and
    // the optimizer step run over their layout, and the backward accumulates dA, dB into e->grads
    const param_layout *tl = model->lora ? &model->lora->pl : model->pl;
    if (cfg->no_state) {   // never touch P-sized buffers a sharded run does not use (they would count in its peak)
        e->grads.layout = tl;
        e->grads.data = NULL;
    } else {
        param_set_init(&e->grads, tl);
        adamw_init(&e->opt, tl, &cfg->adam);
        if (model->lora) model->lora_grad = e->grads.data;
    }
    lr_schedule_init(&e->sched, cfg->lr_sched, cfg->lr, cfg->warmup_steps, cfg->total_steps, cfg->min_lr);
}

static void free_bufs(engine *e) {
    rlc_free(e->logp); rlc_free(e->entropy); rlc_free(e->dlogp); rlc_free(e->dentropy); rlc_free(e->pos);
    e->logp = e->entropy = e->dlogp = e->dentropy = NULL;
    e->pos = NULL;
    e->buf_T = 0;
}

void engine_free(engine *e) {
    if (e->acts) decoder_acts_free(e->acts);
    free_bufs(e);
    free(e->cu_local);
    param_set_free(&e->grads);
    adamw_free(&e->opt);
    memset(e, 0, sizeof *e);
}

static void ensure_bufs(engine *e, int64_t T, int n_seqs) {
    if (T > e->buf_T) {
        free_bufs(e);
        size_t n = (size_t)(T > 0 ? T : 1);
        e->logp = rlc_alloc(n * sizeof(float));
        e->entropy = rlc_alloc(n * sizeof(float));
        e->dlogp = rlc_alloc(n * sizeof(float));
        e->dentropy = rlc_alloc(n * sizeof(float));
        e->pos = rlc_alloc(n * sizeof(int32_t));
        e->buf_T = T;
    }
    if (n_seqs + 1 > e->cu_cap) {
        e->cu_cap = n_seqs + 1;
        e->cu_local = rlc_realloc(e->cu_local, (size_t)e->cu_cap * sizeof(int32_t));
    }
}

// Saved activations for T tokens. Outgrowing them reallocates every buffer (hundreds of MB at a GRPO micro-batch,
// all first-touched again), and RL micro-batches grow by a few tokens on most steps as responses lengthen, so a
// reallocation takes at least a quarter more: a few per run instead of one on most steps. Pages never written
// stay untouched, so the headroom costs address space, not memory.
static void ensure_acts(engine *e, int64_t T) {
    if (e->acts && T <= e->acts_T) return;
    if (e->acts) {
        decoder_acts_free(e->acts);
        if (T < e->acts_T + e->acts_T / 4) T = e->acts_T + e->acts_T / 4;
    }
    e->acts = decoder_acts_new(e->model->cfg, T, e->cfg.ckpt);
    e->acts_T = T;
}

void engine_reserve(engine *e, int64_t T) {
    ensure_bufs(e, T, 1);
    ensure_acts(e, T);
}

static void check_batch(const engine_batch *b) {
    CHECK(b->n_seqs >= 0 && b->cu_seqlens && b->cu_seqlens[0] == 0, "engine batch: n_seqs=%d, cu[0] must be 0", b->n_seqs);
    for (int s = 0; s < b->n_seqs; s++)
        CHECK(b->cu_seqlens[s + 1] > b->cu_seqlens[s], "engine batch: sequence %d is empty (cu %d -> %d)", s,
              b->cu_seqlens[s], b->cu_seqlens[s + 1]);
}

int engine_split(const engine_batch *b, const engine_mb *mb, int *starts) {
    check_batch(b);
    const int32_t *cu = b->cu_seqlens;
    int n = 0;
    if (b->n_seqs == 0) { starts[0] = 0; return 0; }
    if (mb->n_parts > 0) {
        CHECK(mb->starts && mb->starts[0] == 0 && mb->starts[mb->n_parts] == b->n_seqs,
              "engine_mb partition: %d parts must cover the %d sequences", mb->n_parts, b->n_seqs);
        for (int j = 0; j < mb->n_parts; j++) {
            CHECK(mb->starts[j + 1] > mb->starts[j], "engine_mb partition: part %d is empty", j);
            starts[j] = mb->starts[j];
        }
        n = mb->n_parts;
    } else if (mb->micro_batch_seqs > 0) {
        for (int s = 0; s < b->n_seqs; s += mb->micro_batch_seqs) starts[n++] = s;
    } else if (mb->micro_batch_tokens > 0) {
        int64_t budget = mb->micro_batch_tokens, used = 0;
        for (int s = 0; s < b->n_seqs; s++) {
            int64_t len = cu[s + 1] - cu[s];
            if (len > budget)
                rlc_die("sequence %d has %lld tokens, more than the micro-batch token budget %lld", s, (long long)len,
                        (long long)budget);
            if (n == 0 || used + len > budget) { starts[n++] = s; used = 0; }
            used += len;
        }
    } else {
        starts[n++] = 0;
    }
    starts[n] = b->n_seqs;
    return n;
}

double engine_batch_tokens(const engine_batch *b) {
    int64_t T = b->n_seqs ? b->cu_seqlens[b->n_seqs] : 0;
    double s = 0;
    if (b->loss_mask) for (int64_t t = 0; t < T; t++) s += b->loss_mask[t];
    else for (int64_t t = 0; t < T; t++) s += b->targets[t] >= 0;
    return s;
}

// The decoder_batch of micro-batch [s0, s1); local cu in e->cu_local, positions in e->pos.
static decoder_batch micro_batch(engine *e, const engine_batch *b, int s0, int s1) {
    const int32_t *cu = b->cu_seqlens;
    int64_t off = cu[s0], T = cu[s1] - cu[s0];
    ensure_bufs(e, T, s1 - s0);
    for (int s = s0; s <= s1; s++) e->cu_local[s - s0] = cu[s] - (int32_t)off;
    decoder_batch qb;
    memset(&qb, 0, sizeof qb);
    qb.T = T;
    qb.n_seqs = s1 - s0;
    qb.tokens = b->tokens + off;
    qb.cu_seqlens = e->cu_local;
    qb.pos = e->pos;
    decoder_batch_positions(&qb);
    return qb;
}

void engine_zero_grad(engine *e) {
    CHECK(e->grads.data, "engine_zero_grad on an engine without state (engine_config.no_state)");
    memset(e->grads.data, 0, (size_t)e->grads.layout->numel * sizeof(float));
}

void engine_forward_backward(engine *e, const engine_batch *b, const engine_mb *mb, int want_entropy,
                             engine_loss_fn fn, void *user, double global_tokens, engine_fb_stats *st) {
    double t0 = rlc_now();
    int *starts = rlc_malloc(((size_t)b->n_seqs + 1) * sizeof(int));
    int nmb = engine_split(b, mb, starts);
    if (global_tokens <= 0) global_tokens = engine_batch_tokens(b);
    engine_fb_stats s;
    memset(&s, 0, sizeof s);
    s.n_micro = nmb;
    s.global_tokens = global_tokens;
    // Activations for the largest micro-batch, allocated once for the whole call.
    int64_t maxT = 0;
    for (int i = 0; i < nmb; i++) {
        int64_t T = b->cu_seqlens[starts[i + 1]] - b->cu_seqlens[starts[i]];
        if (T > maxT) maxT = T;
    }
    if (nmb > 0) ensure_acts(e, maxT);
    for (int i = 0; i < nmb; i++) {
        int s0 = starts[i], s1 = starts[i + 1];
        decoder_batch qb = micro_batch(e, b, s0, s1);
        int64_t off = b->cu_seqlens[s0], T = qb.T;
        const int32_t *tgt = b->targets + off;
        float *ent = want_entropy ? e->entropy : NULL;
        decoder_forward(e->model, e->acts, &qb, NULL);
        decoder_logprob(e->model, e->acts, &qb, tgt, e->cfg.temperature, e->logp, ent);
        memset(e->dlogp, 0, (size_t)T * sizeof(float));
        if (want_entropy) memset(e->dentropy, 0, (size_t)T * sizeof(float));
        engine_micro m = {
            .index = i, .count = nmb, .seq_begin = s0, .n_seqs = s1 - s0, .tok_begin = off, .T = T,
            .cu_seqlens = e->cu_local, .tokens = qb.tokens, .targets = tgt,
            .loss_mask = b->loss_mask ? b->loss_mask + off : NULL,
            .logp = e->logp, .entropy = ent, .dlogp = e->dlogp, .dentropy = want_entropy ? e->dentropy : NULL,
            .global_tokens = global_tokens, .global_seqs = b->n_seqs,
        };
        s.loss += fn(user, &m);
        decoder_backward(e->model, e->acts, &qb, tgt, e->cfg.temperature, e->dlogp, want_entropy ? e->dentropy : NULL,
                       &e->grads);
        s.tokens += T;
    }
    free(starts);
    s.seconds = rlc_now() - t0;
    if (st) *st = s;
}

engine_opt_result engine_optimizer_step(engine *e) {
    CHECK(e->grads.data, "engine_optimizer_step on an engine without state (engine_config.no_state)");
    engine_opt_result r;
    const int64_t n = e->grads.layout->numel;
    clip_result c = grad_clip_finish(grad_sumsq(e->grads.data, n), e->cfg.clip_grad);
    r.grad_norm = c.norm;
    r.finite = c.finite;
    r.lr = lr_schedule_current(&e->sched);
    if (c.finite) {
        param_set ad = {e->grads.layout, e->model->lora_w};   // the adapters, when they are what trains
        adamw_step_clipped(&e->opt, e->model->lora ? &ad : e->model->params, &e->grads, r.lr, &c);   // clip fused into AdamW
    } else {
        grad_clip_apply(e->grads.data, n, &c);   // zero the gradients, as verl
        rlc_warn("grad_norm is not finite (%g): optimizer step skipped, gradients zeroed", c.norm);
    }
    return r;
}

double engine_lr_scheduler_step(engine *e) { return lr_schedule_step(&e->sched); }

void engine_train_batch(engine *e, const engine_batch *b, const engine_mb *mb, int want_entropy, engine_loss_fn fn,
                        void *user, double global_tokens, engine_step_stats *st) {
    engine_step_stats s;
    engine_zero_grad(e);
    engine_forward_backward(e, b, mb, want_entropy, fn, user, global_tokens, &s.fb);
    double t0 = rlc_now();
    s.opt = engine_optimizer_step(e);
    s.opt_seconds = rlc_now() - t0;
    if (st) *st = s;
}

void engine_infer(engine *e, const engine_batch *b, int64_t max_tokens, float *logp, float *entropy) {
    engine_mb mb = {.micro_batch_seqs = 0, .micro_batch_tokens = max_tokens > 0 ? max_tokens : 0};
    engine_infer_mb(e, b, &mb, logp, entropy);
}

void engine_infer_mb(engine *e, const engine_batch *b, const engine_mb *mb, float *logp, float *entropy) {
    int *starts = rlc_malloc(((size_t)b->n_seqs + 1) * sizeof(int));
    int nmb = engine_split(b, mb, starts);
    for (int i = 0; i < nmb; i++) {
        decoder_batch qb = micro_batch(e, b, starts[i], starts[i + 1]);
        int64_t off = b->cu_seqlens[starts[i]];
        decoder_forward(e->model, NULL, &qb, NULL);
        decoder_logprob(e->model, NULL, &qb, b->targets + off, e->cfg.temperature, logp + off, entropy ? entropy + off : NULL);
    }
    free(starts);
}

void engine_save_state(const engine *e, const char *path) {
    int64_t extra[1] = {e->sched.step};
    adamw_save(&e->opt, path, extra, 1);
}

void engine_load_state(engine *e, const char *path) {
    e->sched.step = adamw_load_resume(&e->opt, path);
}
