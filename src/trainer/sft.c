// sft.c: SFT data (JSONL), cross-entropy token-mean over the global batch, the SFT training loop.
#include "trainer/sft.h"

#include <math.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "core/rng.h"
#include "data/jsonl.h"

// ---- dataset ----

void sft_dataset_init(sft_dataset *d) {
    memset(d, 0, sizeof *d);
    d->off = rlc_malloc(sizeof(int64_t));
    d->off[0] = 0;
}

void sft_dataset_free(sft_dataset *d) {
    free(d->off);
    free(d->ids);
    free(d->mask);
    memset(d, 0, sizeof *d);
}

void sft_dataset_add(sft_dataset *d, const int32_t *ids, const uint8_t *mask, int64_t len, int vocab_size, const char *where) {
    if (len < 1) rlc_die("%s: empty sequence", where);
    if (len > INT32_MAX - d->T) rlc_die("%s: dataset exceeds %d tokens", where, INT32_MAX);
    for (int64_t t = 0; t < len; t++) {
        if (vocab_size > 0 && (ids[t] < 0 || ids[t] >= vocab_size))
            rlc_die("%s: input_ids[%lld] = %d is outside the vocabulary [0, %d)", where, (long long)t, ids[t], vocab_size);
        if (mask[t] > 1) rlc_die("%s: loss_mask[%lld] = %d, expected 0 or 1", where, (long long)t, mask[t]);
    }
    if (d->n + 1 >= d->cap_n) {
        d->cap_n = d->cap_n ? 2 * d->cap_n : 64;
        d->off = rlc_realloc(d->off, ((size_t)d->cap_n + 1) * sizeof(int64_t));
    }
    if (d->T + len > d->cap_T) {
        int64_t c = d->cap_T ? 2 * d->cap_T : 4096;
        while (c < d->T + len) c *= 2;
        d->ids = rlc_realloc(d->ids, (size_t)c * sizeof(int32_t));
        d->mask = rlc_realloc(d->mask, (size_t)c);
        d->cap_T = c;
    }
    memcpy(d->ids + d->T, ids, (size_t)len * sizeof(int32_t));
    memcpy(d->mask + d->T, mask, (size_t)len);
    for (int64_t t = 1; t < len; t++) d->n_targets += mask[t];
    d->T += len;
    d->n++;
    d->off[d->n] = d->T;
}

static int json_int(const cJSON *x, int64_t *v) {
    if (cJSON_IsBool(x)) { *v = cJSON_IsTrue(x); return 1; }
    if (!cJSON_IsNumber(x)) return 0;
    double f = x->valuedouble;
    if (!(f == floor(f)) || fabs(f) > 9.0e15) return 0;
    *v = (int64_t)f;
    return 1;
}

void sft_dataset_load_jsonl(sft_dataset *d, const char *path, int vocab_size, int64_t max_len) {
    rlc_ivec ids = {0};
    uint8_t *mask = NULL;
    size_t cap = 0;
    char where[1200];
    rlc_jsonl r;
    rlc_jsonl_open(&r, path, "SFT data");
    const cJSON *j;
    while ((j = rlc_jsonl_next(&r, "{\"input_ids\": [...], \"loss_mask\": [...]}"))) {
        snprintf(where, sizeof where, "%s:%lld", path, (long long)r.line);
        const cJSON *ji = cJSON_GetObjectItemCaseSensitive(j, "input_ids");
        const cJSON *jm = cJSON_GetObjectItemCaseSensitive(j, "loss_mask");
        if (!ji) rlc_die("%s: missing key \"input_ids\"", where);
        if (!jm) rlc_die("%s: missing key \"loss_mask\"", where);
        if (!cJSON_IsArray(jm)) rlc_die("%s: \"loss_mask\" must be an array of 0/1", where);
        ids.n = 0;
        rlc_jsonl_token_ids(&r, ji, "input_ids", vocab_size, &ids);
        const int ni = (int)ids.n, nm = cJSON_GetArraySize(jm);
        if (ni != nm) rlc_die("%s: input_ids has %d tokens but loss_mask has %d", where, ni, nm);
        if (ni == 0) rlc_die("%s: empty input_ids", where);
        if (max_len > 0 && ni > max_len)
            rlc_die("%s: sequence of %d tokens exceeds the model's max_position_embeddings %lld", where, ni, (long long)max_len);
        if ((size_t)ni > cap) {
            cap = (size_t)ni;
            mask = rlc_realloc(mask, cap);
        }
        int t = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, jm) {
            int64_t v;
            if (!json_int(x, &v) || (v != 0 && v != 1)) rlc_die("%s: loss_mask[%d] must be 0 or 1", where, t);
            mask[t++] = (uint8_t)v;
        }
        sft_dataset_add(d, ids.v, mask, ni, vocab_size, where);
    }
    rlc_jsonl_close(&r);
    rlc_iv_free(&ids);
    free(mask);
    if (d->n == 0) rlc_die("%s: no sequences", path);
}

// ---- loss ----

double sft_loss(void *user, const engine_micro *mb) {
    (void)user;
    const double N = mb->global_tokens;
    if (N <= 0 || !mb->loss_mask) return 0.0;
    const float g = (float)(-1.0 / N);
    double s = 0;
    for (int64_t t = 0; t < mb->T; t++) {
        float w = mb->loss_mask[t];
        if (w == 0.0f) continue;
        s += (double)w * (double)mb->logp[t];
        mb->dlogp[t] = g * w;
    }
    return -s / N;
}

// ---- loop ----

void sft_config_default(sft_config *c) {
    memset(c, 0, sizeof *c);
    c->steps = 0;
    c->epochs = 1;
    c->batch_size = 8;
    c->lr = 1e-5;
    c->adam = adamw_hparams_default();
    c->clip_grad = 1.0;
    c->warmup_steps = 0;
    c->warmup_ratio = 0.0;
    c->lr_sched = LR_CONSTANT;
    c->min_lr = 0.0;
    c->seed = 0;
    c->shuffle = 1;
    c->ckpt = CKPT_NONE;
}

void sft_epoch_order(int *perm, int n, uint64_t seed, int epoch, int shuffle) {
    for (int i = 0; i < n; i++) perm[i] = i;
    if (!shuffle) return;
    rng r;
    rng_stream(&r, seed, 0x5f7u /* "sft" shuffle stream */, (uint64_t)epoch);
    for (int i = n - 1; i > 0; i--) {   // Fisher-Yates
        int j = (int)rng_below(&r, (uint64_t)i + 1);
        int t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
}

engine_batch sft_pack(sft_pack_buf *p, const sft_dataset *d, const int *seqs, int n, int64_t *n_targets) {
    int64_t T = 0;
    for (int i = 0; i < n; i++) T += d->off[seqs[i] + 1] - d->off[seqs[i]];
    if (T > p->cap_T) {
        p->cap_T = T;
        p->tokens = rlc_realloc(p->tokens, (size_t)T * sizeof(int32_t));
        p->targets = rlc_realloc(p->targets, (size_t)T * sizeof(int32_t));
        p->loss_mask = rlc_realloc(p->loss_mask, (size_t)T * sizeof(float));
    }
    if (n > p->cap_seqs || !p->cu) {
        p->cap_seqs = n;
        p->cu = rlc_realloc(p->cu, ((size_t)n + 1) * sizeof(int32_t));
    }
    int64_t o = 0, ntgt = 0;
    p->cu[0] = 0;
    for (int i = 0; i < n; i++) {
        const int64_t s0 = d->off[seqs[i]], len = d->off[seqs[i] + 1] - s0;
        for (int64_t t = 0; t < len; t++) {
            const int scored = t + 1 < len && d->mask[s0 + t + 1];
            p->tokens[o + t] = d->ids[s0 + t];
            p->targets[o + t] = scored ? d->ids[s0 + t + 1] : -1;
            p->loss_mask[o + t] = scored ? 1.0f : 0.0f;
            ntgt += scored;
        }
        o += len;
        p->cu[i + 1] = (int32_t)o;
    }
    if (n_targets) *n_targets = ntgt;
    return (engine_batch){.n_seqs = n, .cu_seqlens = p->cu, .tokens = p->tokens, .targets = p->targets,
                          .loss_mask = p->loss_mask};
}

void sft_pack_free(sft_pack_buf *p) {
    free(p->tokens); free(p->targets); free(p->loss_mask); free(p->cu);
    memset(p, 0, sizeof *p);
}

int64_t sft_prepare(const decoder_model *m, const sft_dataset *d, const sft_config *c, engine_config *ec_out) {
    if (c->batch_size < 1) rlc_die("sft: batch size %d must be >= 1", c->batch_size);
    if (d->n < c->batch_size)
        rlc_die("sft: the dataset has %d sequences, fewer than the batch size %d", d->n, c->batch_size);
    if (c->epochs < 1 && c->steps <= 0) rlc_die("sft: epochs %d must be >= 1", c->epochs);
    const int B = c->batch_size;
    const int64_t per_epoch = d->n / B;
    const int64_t total = c->steps > 0 ? c->steps : (int64_t)c->epochs * per_epoch;
    const int64_t max_pos = m->cfg->max_position_embeddings;
    for (int s = 0; s < d->n; s++) {
        int64_t len = d->off[s + 1] - d->off[s];
        if (len > max_pos) rlc_die("sft: sequence %d has %lld tokens, more than max_position_embeddings %lld", s,
                                   (long long)len, (long long)max_pos);
        if (c->micro_batch_tokens > 0 && c->micro_batch_seqs <= 0 && len > c->micro_batch_tokens)
            rlc_die("sft: sequence %d has %lld tokens, more than the micro-batch token budget %lld", s, (long long)len,
                    (long long)c->micro_batch_tokens);
    }

    engine_config ec;
    engine_config_default(&ec);
    ec.adam = c->adam;
    ec.lr = c->lr;
    ec.lr_sched = c->lr_sched;
    ec.warmup_steps = lr_resolve_warmup(c->warmup_steps, c->warmup_ratio, total);
    ec.total_steps = total;
    ec.min_lr = c->min_lr;
    ec.clip_grad = c->clip_grad;
    ec.ckpt = c->ckpt;
    ec.temperature = 1.0f;
    *ec_out = ec;
    return total;
}

void sft_train(decoder_model *m, const sft_dataset *d, const sft_config *c, sft_summary *out, engine *engine_out) {
    engine_config ec;
    const int64_t total = sft_prepare(m, d, c, &ec);
    const int B = c->batch_size;
    const int64_t per_epoch = d->n / B;
    engine local, *e = engine_out ? engine_out : &local;
    engine_init(e, m, &ec);
    if (c->log)
        fprintf(c->log, "sft: %lld steps (%lld per epoch of %d sequences, batch %d), lr %g %s, warmup %lld steps\n",
                (long long)total, (long long)per_epoch, d->n, B, c->lr, lr_sched_type_name(c->lr_sched),
                (long long)ec.warmup_steps);
    engine_mb mb = {.micro_batch_seqs = c->micro_batch_seqs, .micro_batch_tokens = c->micro_batch_tokens};

    int *perm = rlc_malloc((size_t)d->n * sizeof(int));
    int *seqs = rlc_malloc((size_t)B * sizeof(int));
    sft_pack_buf pk = {0};
    sft_summary sum;
    memset(&sum, 0, sizeof sum);
    double t_start = rlc_now();
    int cur_epoch = -1;
    for (int64_t step = 0; step < total; step++) {
        int epoch = (int)(step / per_epoch);
        int64_t j = step % per_epoch;
        if (epoch != cur_epoch) { sft_epoch_order(perm, d->n, c->seed, epoch, c->shuffle); cur_epoch = epoch; }
        for (int i = 0; i < B; i++) seqs[i] = perm[j * B + i];
        engine_batch b = sft_pack(&pk, d, seqs, B, NULL);
        engine_step_stats st;
        double t0 = rlc_now();
        engine_train_batch(e, &b, &mb, 0, sft_loss, NULL, 0, &st);
        double dt = rlc_now() - t0;
        if (st.fb.global_tokens <= 0) rlc_warn("sft step %lld: the batch has no target tokens (loss_mask all 0)", (long long)step + 1);
        engine_lr_scheduler_step(e);

        sft_step_info info = {
            .step = step + 1, .total_steps = total, .epoch = epoch, .loss = st.fb.loss, .grad_norm = st.opt.grad_norm,
            .skipped = !st.opt.finite, .lr = st.opt.lr, .tokens = st.fb.tokens, .target_tokens = (int64_t)st.fb.global_tokens,
            .n_micro = st.fb.n_micro, .seconds = dt, .tokens_per_s = dt > 0 ? (double)st.fb.tokens / dt : 0,
            .seqs = seqs, .n_seqs = B,
        };
        if (c->log)
            fprintf(c->log, "step %lld/%lld epoch %d loss %.6f grad_norm %.6f lr %.6g tokens %lld micro %d tokens/s %.1f%s\n",
                    (long long)info.step, (long long)total, epoch, info.loss, info.grad_norm, info.lr,
                    (long long)info.tokens, info.n_micro, info.tokens_per_s, info.skipped ? " (skipped: non-finite grad norm)" : "");
        if (c->log) fflush(c->log);
        if (c->on_step) c->on_step(c->user, &info);
        if (step == 0) sum.first_loss = info.loss;
        sum.last_loss = info.loss;
        sum.tokens += info.tokens;
        sum.skipped += info.skipped;
        sum.steps++;
    }
    sum.seconds = rlc_now() - t_start;
    if (out) *out = sum;
    free(perm); free(seqs);
    sft_pack_free(&pk);
    if (!engine_out) engine_free(e);
}
