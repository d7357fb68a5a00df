// engine_generate.c: a whole generation: the checks of the prompts against the positions and the KV pools, the
// samples' state, the loop of scheduler steps with multi-turn hooks (observations resumed or turns ended between
// steps) and the progress line, the result handed back, and the rollout-vs-actor probability metrics.
#include <math.h>
#include <stdio.h>

#include "core/common.h"
#include "rollout/engine_internal.h"

static seq_t *waiting_seq(gen_state *g, int prompt, int sample) {
    const int n = g->e->cfg.n;
    CHECK(prompt >= 0 && sample >= 0 && sample < n && (int64_t)prompt * n + sample < g->n_total, "sample %d of prompt %d", sample,
          prompt);
    seq_t *s = &g->seqs[prompt * n + sample];
    CHECK(s->state == SEQ_WAIT_ENV, "sample %d of prompt %d is not waiting for an observation (state %d)", sample, prompt, s->state);
    return s;
}

void rollout_turn_resume(rollout_turn_io *io, int prompt, int sample, const int32_t *ids, int64_t n) {
    gen_state *g = (gen_state *)io;
    seq_t *s = waiting_seq(g, prompt, sample);
    CHECK(n >= 1 && n_tok(s) + n < s->max_total, "observation of %lld tokens for a sample at %lld of %lld tokens", (long long)n,
          (long long)n_tok(s), (long long)s->max_total);
    for (int64_t i = 0; i < n; i++) {
        CHECK(ids[i] >= 0 && ids[i] < g->e->m->cfg->vocab_size, "observation token %d outside the vocabulary", ids[i]);
        s->gen[s->n_gen + i] = ids[i];
        s->lp[s->n_gen + i] = 0.0f;
    }
    s->n_gen += n;
    s->turn0 = s->n_gen;
    g->n_wait_env--;
    const int si = (int)(s - g->seqs);
    if (s->n_bt == 0) {   // its blocks were dropped: recompute the whole context through admission
        s->state = SEQ_WAITING;
        g->waiting[g->n_waiting++] = si;
    } else {              // its KV is kept: the observation (and the last sampled token) is prefilled as a chunk
        s->state = SEQ_RUNNING;
        g->resumed[g->n_resumed++] = si;
    }
}

void rollout_turn_end(rollout_turn_io *io, int prompt, int sample) {
    gen_state *g = (gen_state *)io;
    seq_t *s = waiting_seq(g, prompt, sample);
    s->finish = ROLLOUT_FINISH_STOP;
    eng_release_blocks(g, s);
    s->state = SEQ_DONE;
    g->n_wait_env--;
    g->n_done++;
}

void rollout_generate(rollout_engine *e, const rollout_prompt *prompts, int n_prompts, rollout_result *out) {
    rollout_generate_turns(e, prompts, NULL, n_prompts, NULL, out);
}

void rollout_generate_streams(rollout_engine *e, const rollout_prompt *prompts, const rollout_stream *streams, int n_prompts,
                              rollout_result *out) {
    rollout_generate_turns(e, prompts, streams, n_prompts, NULL, out);
}

void rollout_generate_turns(rollout_engine *e, const rollout_prompt *prompts, const rollout_stream *streams, int n_prompts,
                            const rollout_turn_hooks *hooks, rollout_result *out) {
    const rollout_config *cfg = &e->cfg;
    const model_config *c = e->m->cfg;
    memset(out, 0, sizeof *out);
    CHECK(n_prompts >= 0, "n_prompts=%d", n_prompts);
    const int bs = cfg->block_size;
    const int64_t max_pos = c->max_position_embeddings;
    int64_t max_blocks = 1;
    for (int p = 0; p < n_prompts; p++) {
        const rollout_prompt *pr = &prompts[p];
        if (pr->len <= 0) rlc_die("rollout: prompt %d is empty (a prompt needs at least one token)", p);
        if (pr->len >= max_pos)
            rlc_die("rollout: prompt %d has %lld tokens, which leaves no room to generate under max_position_embeddings=%lld",
                    p, (long long)pr->len, (long long)max_pos);
        for (int64_t t = 0; t < pr->len; t++)
            if (pr->ids[t] < 0 || pr->ids[t] >= c->vocab_size)
                rlc_die("rollout: prompt %d of the batch, token %lld has id %d, outside the model's vocabulary [0, %d) (has "
                        "the tokenizer more tokens than config.json's vocab_size?)", p, (long long)t, pr->ids[t], c->vocab_size);
        const rollout_stream st = streams ? streams[p] : (rollout_stream){0, 0, 0};
        if (st.max_new_tokens < 0 || st.max_new_tokens > cfg->max_new_tokens || st.sample_base < 0 || st.draw_base < 0)
            rlc_die("rollout: prompt %d has max_new_tokens=%d (expected 0..%d), sample_base=%d, draw_base=%lld (expected >= 0)",
                    p, st.max_new_tokens, cfg->max_new_tokens, st.sample_base, (long long)st.draw_base);
        const int64_t cap = st.max_new_tokens ? st.max_new_tokens : cfg->max_new_tokens;
        int64_t total = pr->len + cap < max_pos ? pr->len + cap : max_pos;
        int64_t need = (total - 1 + bs - 1) / bs;   // the last token is never fed
        for (int pl = 0; pl < N_POOLS; pl++) {
            if (!e->has_pool[pl]) continue;
            // a sliding layer holds at most its window and one step's chunk: keys n_cached - W + 1 ..
            // n_cached + take - 1, take <= max_batched_tokens
            const int64_t wneed = (e->window + e->T_max - 2) / bs + 2;
            const int64_t np = pl == POOL_WINDOW && wneed < need ? wneed : need;
            const kv_cache *kc = &e->kv[pl];
            if (np > kc->n_blocks)
                rlc_die("rollout: prompt %d (%lld tokens + max_new_tokens %d) needs %lld KV blocks (%lld bytes) but the KV "
                        "cache %sholds %d blocks (%lld bytes); raise --kv-cache-bytes or lower --max-new-tokens",
                        p, (long long)pr->len, cfg->max_new_tokens, (long long)np, (long long)(np * kc->block_bytes),
                        pl == POOL_WINDOW ? "of the sliding-window layers " : e->has_pool[POOL_WINDOW] ? "of the full-attention layers " : "",
                        kc->n_blocks, (long long)((int64_t)kc->n_blocks * kc->block_bytes));
        }
        if (need > max_blocks) max_blocks = need;
    }
    gen_state g = {0};
    g.e = e;
    g.prompts = prompts;
    g.res = out;
    g.t0 = rlc_now();
    const int n = cfg->n;
    g.n_total = n_prompts * n;
    g.seqs = rlc_calloc((size_t)g.n_total + 1, sizeof(seq_t));
    g.pfx = rlc_calloc((size_t)n_prompts + 1, sizeof(prefix_t));
    g.bt_stride = max_blocks;
    for (int p = 0; p < N_POOLS; p++) g.bt_all[p] = rlc_calloc((size_t)(g.n_total * max_blocks) + 1, sizeof(int32_t));
    g.running = rlc_malloc(((size_t)g.n_total + 1) * sizeof(int));
    g.hooks = hooks;
    g.resumed = rlc_malloc(((size_t)g.n_total + 1) * sizeof(int));
    g.waiting = rlc_malloc(((size_t)g.n_total + 1) * sizeof(int));
    for (int p = 0; p < n_prompts; p++) {
        g.pfx[p].unadmitted = n;
        out->prompt_tokens += prompts[p].len * n;
        for (int j = 0; j < n; j++) {
            const int si = p * n + j;
            seq_t *s = &g.seqs[si];
            s->prompt = p;
            s->sample = j;
            s->rng_id = prompts[p].id;
            const rollout_stream st = streams ? streams[p] : (rollout_stream){0, 0, 0};
            s->rng_sample = (uint64_t)st.sample_base + (uint64_t)j;
            s->draw_base = st.draw_base;
            const int64_t cap = st.max_new_tokens ? st.max_new_tokens : cfg->max_new_tokens;
            s->pids = prompts[p].ids;
            s->P = prompts[p].len;
            s->max_total = s->P + cap < max_pos ? s->P + cap : max_pos;
            s->gen = rlc_malloc((size_t)cap * sizeof(int32_t));
            s->lp = rlc_malloc((size_t)cap * sizeof(float));
            for (int pl = 0; pl < N_POOLS; pl++) s->bt[pl] = g.bt_all[pl] + (int64_t)si * max_blocks;
            g.waiting[g.n_waiting++] = si;
        }
    }
    feed_t *feeds = rlc_malloc(((size_t)g.n_total + 1) * sizeof(feed_t));
    int *joiners = rlc_malloc(((size_t)g.n_total + 1) * sizeof(int));
    int *row_seq = rlc_malloc(((size_t)g.n_total + 1) * sizeof(int));
    double t_last = g.t0;
    int64_t gen_last = 0;
    while (g.n_done < g.n_total) {
        if (hooks && g.n_wait_env > 0) {
            // observations that arrived; wait for one when nothing else can run
            const int idle = g.n_running == 0 && g.n_waiting == 0 && g.n_resumed == 0;
            const int before = g.n_wait_env;
            hooks->poll(hooks->ctx, (rollout_turn_io *)&g, idle);
            CHECK(!idle || g.n_wait_env < before, "the turn hook's blocking poll delivered nothing (%d samples waiting)", before);
            if (g.n_done == g.n_total) break;
        }
        // resumed samples rejoin the running list while max_num_seqs allows (the rest wait their turn)
        int k = 0;
        while (k < g.n_resumed && g.n_running < cfg->max_num_seqs) g.running[g.n_running++] = g.resumed[k++];
        memmove(g.resumed, g.resumed + k, (size_t)(g.n_resumed - k) * sizeof(int));
        g.n_resumed -= k;
        if (g.n_running == 0 && g.n_waiting == 0) continue;
        out->computed_tokens += eng_step(&g, n_prompts, feeds, joiners, row_seq);
        out->n_steps++;
        if (g.n_running > out->max_running) out->max_running = g.n_running;
        eng_note_kv_peak(e, out);
        const double now = rlc_now();
        if (cfg->progress && (now - t_last >= cfg->progress_interval_s || g.n_done == g.n_total)) {
            fprintf(stderr, "rollout: step %lld  %.1f tok/s  running %d  waiting %d  done %d/%d  kv %.3f/%.3f GB  preempted %lld\n",
                    (long long)out->n_steps, (double)(out->gen_tokens - gen_last) / (now - t_last + 1e-9), g.n_running,
                    g.n_waiting, g.n_done, g.n_total, (double)eng_kv_bytes_used(e) / 1e9, (double)rollout_engine_kv_bytes(e) / 1e9,
                    (long long)out->n_preempt);
            t_last = now;
            gen_last = out->gen_tokens;
        }
    }
    for (int p = 0; p < n_prompts; p++)
        if (g.pfx[p].state == PFX_READY) eng_prefix_release(&g, &g.pfx[p]);
    for (int p = 0; p < N_POOLS; p++)
        if (e->has_pool[p])
            CHECK(e->kv[p].n_free == e->kv[p].n_blocks, "KV blocks leaked: %d of %d free in pool %d after generation",
                  e->kv[p].n_free, e->kv[p].n_blocks, p);
    out->t_total = rlc_now() - g.t0;
    out->n_samples = g.n_total;
    out->samples = rlc_calloc((size_t)g.n_total + 1, sizeof(rollout_sample));
    for (int si = 0; si < g.n_total; si++) {
        seq_t *s = &g.seqs[si];
        rollout_sample *o = &out->samples[si];
        o->prompt = s->prompt;
        o->sample = s->sample;
        o->len = s->n_gen;
        o->ids = s->gen;
        o->logprobs = s->lp;
        o->finish = s->finish;
        o->t_first = s->t_first;
    }
    if (e->has_pool[POOL_FULL]) {
        out->kv_blocks = e->kv[POOL_FULL].n_blocks;
        out->kv_block_bytes = e->kv[POOL_FULL].block_bytes;
    }
    if (e->has_pool[POOL_WINDOW]) {
        out->kv_window_blocks = e->kv[POOL_WINDOW].n_blocks;
        out->kv_window_block_bytes = e->kv[POOL_WINDOW].block_bytes;
    }
    out->kv_bytes = rollout_engine_kv_bytes(e);
    free(feeds);
    free(joiners);
    free(row_seq);
    free(g.seqs);
    free(g.pfx);
    for (int p = 0; p < N_POOLS; p++) free(g.bt_all[p]);
    free(g.running);
    free(g.resumed);
    free(g.waiting);
}

void rollout_result_free(rollout_result *r) {
    for (int i = 0; i < r->n_samples; i++) {
        free(r->samples[i].ids);
        free(r->samples[i].logprobs);
    }
    free(r->samples);
    memset(r, 0, sizeof *r);
}

void rollout_probs_diff_compute(rollout_probs_diff *o, const float *la, const float *lr, int64_t n) {
    memset(o, 0, sizeof *o);
    o->n = n;
    if (n <= 0) { o->diff_max = o->diff_mean = o->diff_std = o->pearson = NAN; return; }
    double sa = 0, sr = 0, sd = 0;
    for (int64_t i = 0; i < n; i++) {
        double pa = exp((double)la[i]), pr = exp((double)lr[i]), d = fabs(pa - pr);
        sa += pa;
        sr += pr;
        sd += d;
        if (d > o->diff_max) o->diff_max = d;
    }
    const double ma = sa / n, mr = sr / n, md = sd / n;
    double vd = 0, caa = 0, crr = 0, car = 0;
    for (int64_t i = 0; i < n; i++) {
        double pa = exp((double)la[i]) - ma, pr = exp((double)lr[i]) - mr, d = fabs(exp((double)la[i]) - exp((double)lr[i])) - md;
        vd += d * d;
        caa += pa * pa;
        crr += pr * pr;
        car += pa * pr;
    }
    o->diff_mean = md;
    o->diff_std = n > 1 ? sqrt(vd / (double)(n - 1)) : NAN;
    double r = car / sqrt(caa * crr);
    o->pearson = r > 1 ? 1 : r < -1 ? -1 : r;
}
