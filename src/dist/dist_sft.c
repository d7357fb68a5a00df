// dist_sft.c: data-parallel SFT: balanced split of each global batch, FSDP state, equal micro-batch counts.
#include "dist/dist_sft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "trainer/balance.h"

void dist_sft_train(dist_ctx *d, decoder_model *m, const sft_dataset *ds, const sft_config *c, const dist_sft_opts *o,
                    sft_summary *out, dist_sft_report *rep) {
    const int W = d->world, R = d->rank;
    const int root = R == 0;
    if (c->batch_size % W != 0 && c->batch_size >= 1)
        rlc_die("sft: --batch-size %d must be a multiple of the number of ranks %d", c->batch_size, W);
    engine_config ec;
    const int64_t total = sft_prepare(m, ds, c, &ec);
    const int B = c->batch_size, Bl = B / W;
    const int64_t per_epoch = ds->n / B;
    engine e;
    ec.no_state = 1;   // params, gradient and moments live in the fsdp shards; the engine only runs forward/backward
    engine_init(&e, m, &ec);

    const param_layout *pl = m->pl;
    param_set *ps = m->params;
    CHECK(ps && ps->data, "dist_sft_train needs the starting weights in m->params");
    fsdp_state fs;
    fsdp_init(&fs, d, pl, ps->data, &c->adam);
    param_set_free(ps);   // the shards hold the state from here on
    for (int b = 0; b < pl->n_blocks; b++) m->block_w[b] = NULL;
    fsdp_attach(&fs, m, 1);   // weights gathered per block, gradients reduce-scattered per block

    int64_t start = 0;
    if (o && o->resume_optimizer) {
        start = fsdp_load_optimizer(&fs, o->resume_optimizer);
        e.sched.step = start;
        if (start > total)
            rlc_die("%s: the optimizer state is at step %lld, beyond --steps %lld", o->resume_optimizer, (long long)start,
                    (long long)total);
    }
    FILE *log = root ? c->log : NULL;
    if (log)
        fprintf(log, "sft: %lld steps (%lld per epoch of %d sequences, batch %d over %d rank%s), lr %g %s, warmup %lld steps%s\n",
                (long long)total, (long long)per_epoch, ds->n, B, W, W > 1 ? "s" : "", c->lr,
                lr_sched_type_name(c->lr_sched), (long long)ec.warmup_steps, start ? ", resumed" : "");
    if (log && start) fprintf(log, "sft: resumed at step %lld from %s\n", (long long)start, o->resume_optimizer);
    engine_mb mb = {.micro_batch_seqs = c->micro_batch_seqs, .micro_batch_tokens = c->micro_batch_tokens};
    engine_mb whole;
    memset(&whole, 0, sizeof whole);

    int *perm = rlc_malloc((size_t)ds->n * sizeof(int));
    int *seqs = rlc_malloc((size_t)B * sizeof(int));
    int *mine = rlc_malloc((size_t)Bl * sizeof(int));
    int64_t *wl = rlc_malloc((size_t)B * sizeof(int64_t));
    int32_t *cu_mb = rlc_malloc(((size_t)Bl + 1) * sizeof(int32_t));
    int *starts = rlc_malloc(((size_t)Bl + 1) * sizeof(int));
    sft_pack_buf pk = {0};
    const int32_t dummy_tok = 0, dummy_tgt = -1, dummy_cu[2] = {0, 1};
    const float dummy_mask = 0.0f;
    sft_summary sum;
    memset(&sum, 0, sizeof sum);
    dist_reset_counters(d);
    double t_start = rlc_now();
    int cur_epoch = -1;
    for (int64_t step = start; step < total; step++) {
        int epoch = (int)(step / per_epoch);
        int64_t j = step % per_epoch;
        if (epoch != cur_epoch) { sft_epoch_order(perm, ds->n, c->seed, epoch, c->shuffle); cur_epoch = epoch; }
        for (int i = 0; i < B; i++) seqs[i] = perm[j * B + i];
        // This rank's sequences: balance_batch (KK, equal_size) over the global batch; 1 rank keeps the order.
        if (W == 1) {
            for (int i = 0; i < B; i++) mine[i] = seqs[i];
        } else {
            for (int i = 0; i < B; i++) wl[i] = rlc_seqlen_workload(ds->off[seqs[i] + 1] - ds->off[seqs[i]]);
            rlc_partition part;
            rlc_balanced_partitions(&part, wl, B, W, 1);
            CHECK_EQ(part.offsets[R + 1] - part.offsets[R], Bl, "balanced part size");
            for (int i = 0; i < Bl; i++) mine[i] = seqs[part.items[part.offsets[R] + i]];
            rlc_partition_free(&part);
        }
        int64_t ntgt = 0;
        engine_batch lb = sft_pack(&pk, ds, mine, Bl, &ntgt);
        const int32_t *cu = lb.cu_seqlens;
        int nmb = engine_split(&lb, &mb, starts);
        // global target count (token-mean exactness) and micro-batch count, in one all-reduce each
        double N = (double)ntgt;
        dist_allreduce_f64(d, &N, 1, DIST_SUM, "all-reduce of the global token count");
        int64_t K = nmb;
        dist_allreduce_i64(d, &K, 1, DIST_MAX, "all-reduce of the micro-batch count");

        double t0 = rlc_now();
        double loss = 0;
        int64_t ntok = 0;
        for (int64_t i = 0; i < K; i++) {
            engine_fb_stats st;
            fsdp_begin_pass(&fs, i + 1 < K);
            if (i < nmb) {
                int s0 = starts[i], s1 = starts[i + 1];
                int32_t base = cu[s0];
                for (int s = s0; s <= s1; s++) cu_mb[s - s0] = cu[s] - base;
                engine_batch sb = {.n_seqs = s1 - s0, .cu_seqlens = cu_mb, .tokens = lb.tokens + base,
                                   .targets = lb.targets + base, .loss_mask = lb.loss_mask + base};
                engine_forward_backward(&e, &sb, &whole, 0, sft_loss, NULL, N > 0 ? N : -1, &st);
                loss += st.loss;
                ntok += st.tokens;
            } else {   // padding pass: 1 token, nothing scored, zero gradient, same collectives
                engine_batch sb = {.n_seqs = 1, .cu_seqlens = dummy_cu, .tokens = &dummy_tok, .targets = &dummy_tgt,
                                   .loss_mask = &dummy_mask};
                engine_forward_backward(&e, &sb, &whole, 0, sft_loss, NULL, N > 0 ? N : 1, &st);
            }
            fsdp_end_pass(&fs);
            if (o && o->die_at_step == step + 1 && R == o->die_rank) {
                fprintf(stderr, "rlc: test: rank %d exits mid-step %lld (RLC_TEST_DIE_AT_STEP)\n", R, (long long)step + 1);
                fflush(stderr);
                _exit(3);
            }
        }
        double lr = lr_schedule_current(&e.sched);
        clip_result cr = fsdp_optimizer_step(&fs, lr, c->clip_grad);
        if (!cr.finite && root) rlc_warn("grad_norm is not finite (%g): optimizer step skipped, gradients zeroed", cr.norm);
        engine_lr_scheduler_step(&e);
        double red[2] = {loss, (double)ntok};
        dist_allreduce_f64(d, red, 2, DIST_SUM, "all-reduce of the step metrics");
        double dt = rlc_now() - t0;
        if (N <= 0 && root) rlc_warn("sft step %lld: the batch has no target tokens (loss_mask all 0)", (long long)step + 1);

        sft_step_info info = {
            .step = step + 1, .total_steps = total, .epoch = epoch, .loss = red[0], .grad_norm = cr.norm,
            .skipped = !cr.finite, .lr = lr, .tokens = (int64_t)red[1], .target_tokens = (int64_t)N,
            .n_micro = (int)K, .seconds = dt, .tokens_per_s = dt > 0 ? red[1] / dt : 0, .seqs = seqs, .n_seqs = B,
        };
        if (log) {
            fprintf(log, "step %lld/%lld epoch %d loss %.6f grad_norm %.6f lr %.6g tokens %lld micro %d tokens/s %.1f%s\n",
                    (long long)info.step, (long long)total, epoch, info.loss, info.grad_norm, info.lr,
                    (long long)info.tokens, info.n_micro, info.tokens_per_s,
                    info.skipped ? " (skipped: non-finite grad norm)" : "");
            fflush(log);
        }
        if (c->on_step) c->on_step(c->user, &info);
        if (step == start) sum.first_loss = info.loss;
        sum.last_loss = info.loss;
        sum.tokens += info.tokens;
        sum.skipped += info.skipped;
        sum.steps++;
    }
    sum.seconds = rlc_now() - t_start;
    if (rep) {
        memset(rep, 0, sizeof *rep);
        rep->comm_bytes = dist_bytes_total(d);
        rep->allgather_bytes = d->bytes[DIST_K_ALLGATHER];
        rep->reduce_scatter_bytes = d->bytes[DIST_K_REDUCE_SCATTER];
        rep->comm_seconds = d->comm_seconds;
        rep->mem = fsdp_memory_report(&fs);
        rep->prefetch_hits = fs.n_prefetch_hits;
        rep->sync_gathers = fs.n_sync_gathers;
    }
    if (o && o->save_optimizer) fsdp_save_optimizer(&fs, o->save_optimizer, e.sched.step);
    // final weights on rank 0
    if (root) param_set_init(ps, pl);
    fsdp_gather_full(&fs, fs.p, root ? ps->data : NULL, 0);
    fsdp_detach(m);
    for (int b = 0; b < pl->n_blocks; b++) m->block_w[b] = root ? param_block(ps, b) : NULL;
    if (out) *out = sum;
    fsdp_free(&fs);
    engine_free(&e);
    free(perm); free(seqs); free(mine); free(wl); free(cu_mb); free(starts);
    sft_pack_free(&pk);
}
