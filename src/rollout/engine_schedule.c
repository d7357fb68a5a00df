// engine_schedule.c: the rollout engine's scheduler: the KV blocks of sequences and shared prompt prefixes
// (allocation, copy-on-write, the sliding-window pool's recycling, peaks), preemption, and one step: pick every
// running sequence's pending tokens, admit waiting samples while the pools and the token budget allow, run the
// packed forward, publish finished prompt prefixes, then compute the logits and draw each sampling row's token.
#include <omp.h>

#include "core/common.h"
#include "kernels/kernels.h"
#include "rollout/engine_internal.h"

// Unref entries [from, n) of a table of pool p (entries before lo of POOL_WINDOW are recycled, -1).
static void unref_range(rollout_engine *e, int p, int32_t *bt, int from, int n) {
    for (int i = from; i < n; i++) {
        kv_cache_unref(&e->kv[p], bt[i]);
        bt[i] = -1;
    }
}

void eng_release_blocks(gen_state *g, seq_t *s) {
    rollout_engine *e = g->e;
    for (int p = 0; p < N_POOLS; p++)
        if (e->has_pool[p]) unref_range(e, p, s->bt[p], p == POOL_WINDOW ? s->lo : 0, s->n_bt);
    s->n_bt = 0;
    s->lo = 0;
}

// Sliding layers' blocks that fall wholly before the window of every later query of s (positions >= n_cached
// see keys > n_cached - W) go back to POOL_WINDOW.
static void recycle_window(gen_state *g, seq_t *s) {
    rollout_engine *e = g->e;
    if (!e->has_pool[POOL_WINDOW]) return;
    const int64_t first = s->n_cached - e->window + 1;   // the first key the next query sees
    const int lo = first > 0 ? (int)(first / e->kv[POOL_WINDOW].block_size) : 0;
    if (lo <= s->lo) return;
    CHECK(lo <= s->n_bt, "recycling block %d of %d", lo, s->n_bt);
    unref_range(e, POOL_WINDOW, s->bt[POOL_WINDOW], s->lo, lo);
    s->lo = lo;
}

// Free blocks in every pool (the smallest count): what the admission checks compare a need with.
static int pools_free(const rollout_engine *e) {
    int f = INT32_MAX;
    for (int p = 0; p < N_POOLS; p++)
        if (e->has_pool[p] && e->kv[p].n_free < f) f = e->kv[p].n_free;
    return f;
}
static int pools_min_blocks(const rollout_engine *e) {
    int f = INT32_MAX;
    for (int p = 0; p < N_POOLS; p++)
        if (e->has_pool[p] && e->kv[p].n_blocks < f) f = e->kv[p].n_blocks;
    return f;
}

// Bytes of the blocks in use, both pools.
int64_t eng_kv_bytes_used(const rollout_engine *e) {
    int64_t b = 0;
    for (int p = 0; p < N_POOLS; p++)
        if (e->has_pool[p]) b += (int64_t)(e->kv[p].n_blocks - e->kv[p].n_free) * e->kv[p].block_bytes;
    return b;
}

void eng_note_kv_peak(const rollout_engine *e, rollout_result *r) {
    const int used[N_POOLS] = {e->has_pool[POOL_FULL] ? e->kv[POOL_FULL].n_blocks - e->kv[POOL_FULL].n_free : 0,
                               e->has_pool[POOL_WINDOW] ? e->kv[POOL_WINDOW].n_blocks - e->kv[POOL_WINDOW].n_free : 0};
    if (used[POOL_FULL] > r->kv_blocks_peak) r->kv_blocks_peak = used[POOL_FULL];
    if (used[POOL_WINDOW] > r->kv_window_blocks_peak) r->kv_window_blocks_peak = used[POOL_WINDOW];
    const int64_t b = eng_kv_bytes_used(e);
    if (b > r->kv_bytes_peak) r->kv_bytes_peak = b;
}

// Make the blocks covering positions [t0, t1) exist and be private. 0 on success, -1 if the pool ran dry
// (progress made so far is kept).
static int ensure_blocks(gen_state *g, seq_t *s, int64_t t0, int64_t t1) {
    rollout_engine *e = g->e;
    const int bs = e->cfg.block_size;
    for (int64_t ib = t0 / bs; ib <= (t1 - 1) / bs; ib++) {
        if (ib >= s->n_bt) {   // a new logical block: one block in every pool, or none
            CHECK(ib == s->n_bt, "block table gap: block %lld, have %d", (long long)ib, s->n_bt);
            CHECK(ib < g->bt_stride, "block table overflow: %lld >= %lld", (long long)ib, (long long)g->bt_stride);
            if (pools_free(e) < 1) return -1;
            for (int p = 0; p < N_POOLS; p++)
                if (e->has_pool[p]) s->bt[p][ib] = kv_cache_alloc(&e->kv[p]);
            s->n_bt++;
        } else {
            CHECK(ib >= s->lo, "write at block %lld, recycled below %d", (long long)ib, s->lo);
            for (int p = 0; p < N_POOLS; p++) {
                if (!e->has_pool[p]) continue;
                int r = kv_cache_make_private(&e->kv[p], &s->bt[p][ib]);
                if (r < 0) return -1;
                if (r > 0) g->res->n_cow++;
            }
        }
    }
    return 0;
}

void eng_prefix_release(gen_state *g, prefix_t *px) {
    rollout_engine *e = g->e;
    for (int p = 0; p < N_POOLS; p++) {
        if (e->has_pool[p]) unref_range(e, p, px->blocks[p], p == POOL_WINDOW ? px->lo : 0, px->n_blocks);
        free(px->blocks[p]);
        px->blocks[p] = NULL;
    }
    free(px->hidden);
    px->hidden = NULL;
    px->n_blocks = 0;
    px->lo = 0;
    px->state = PFX_NONE;
}

// Drop one READY prefix (lowest prompt index). Returns 1 if one was dropped.
static int release_one_prefix(gen_state *g, int n_prompts) {
    for (int p = 0; p < n_prompts; p++)
        if (g->pfx[p].state == PFX_READY) { eng_prefix_release(g, &g->pfx[p]); return 1; }
    return 0;
}

// Free the KV blocks of one sample waiting for its environment (before preempting running ones): it
// recomputes its whole context when its observation arrives. Returns 1 if one was dropped.
static int drop_one_waiting_env(gen_state *g) {
    for (int si = 0; si < g->n_total && g->n_wait_env > 0; si++) {
        seq_t *s = &g->seqs[si];
        if (s->state != SEQ_WAIT_ENV || s->n_bt == 0) continue;
        eng_release_blocks(g, s);
        s->n_cached = 0;
        g->res->n_preempt++;
        return 1;
    }
    return 0;
}

static void preempt(gen_state *g, int si) {
    seq_t *s = &g->seqs[si];
    eng_release_blocks(g, s);
    s->n_cached = 0;
    s->state = SEQ_WAITING;
    prefix_t *px = &g->pfx[s->prompt];
    if (px->state == PFX_PREFILLING && px->leader == si) px->state = PFX_NONE;
    memmove(g->waiting + 1, g->waiting, (size_t)g->n_waiting * sizeof(int));
    g->waiting[0] = si;
    g->n_waiting++;
    g->res->n_preempt++;
}

static int is_stop(const rollout_engine *e, int32_t tok) {
    const model_config *c = e->m->cfg;
    if (!e->cfg.ignore_eos)
        for (int i = 0; i < c->n_eos_token_ids; i++)
            if (tok == c->eos_token_ids[i]) return 1;
    for (int i = 0; i < e->cfg.n_stop_ids; i++)
        if (tok == e->cfg.stop_ids[i]) return 1;
    return 0;
}

// One engine step. Returns the number of tokens that went through the forward.
int64_t eng_step(gen_state *g, int n_prompts, feed_t *feeds, int *joiners, int *row_seq) {
    rollout_engine *e = g->e;
    const rollout_config *cfg = &e->cfg;
    const int bs = cfg->block_size;
    int nfeed = 0, nj = 0, preempted = 0;
    int64_t T = 0;
    // 1. running sequences: 1 token each, plus prefill/recompute chunks from the remaining budget.
    int64_t extra = e->T_max - g->n_running;
    for (int ri = 0; ri < g->n_running; ri++) {
        const int si = g->running[ri];
        seq_t *s = &g->seqs[si];
        const int64_t pending = n_tok(s) - s->n_cached;
        CHECK(pending >= 1, "running sequence %d has nothing to feed", si);
        int64_t take = 1 + (pending - 1 < extra ? pending - 1 : extra);
        int self = 0;
        while (ensure_blocks(g, s, s->n_cached, s->n_cached + take) < 0) {
            if (release_one_prefix(g, n_prompts) || drop_one_waiting_env(g)) continue;
            const int victim = g->running[--g->n_running];
            preempt(g, victim);
            preempted = 1;
            if (victim == si) { self = 1; break; }
        }
        if (self) break;
        extra -= take - 1;
        feeds[nfeed++] = (feed_t){si, s->n_cached, s->n_cached + take, T};
        T += take;
    }
    // 2. admission (not in a step that had to preempt).
    for (int wi = 0; !preempted && wi < g->n_waiting && g->n_running < cfg->max_num_seqs;) {
        const int si = g->waiting[wi];
        seq_t *s = &g->seqs[si];
        prefix_t *px = cfg->share_prompts && cfg->n > 1 && !s->admitted_once ? &g->pfx[s->prompt] : NULL;
        if (px && px->state == PFX_PREFILLING) { wi++; continue; }
        // (the watermark and the needs in blocks: every pool allocates one block per logical block)
        int watermark = g->n_running < pools_min_blocks(e) / 8 ? g->n_running : pools_min_blocks(e) / 8;
        if (px && px->state == PFX_READY) {   // join: share the prompt's blocks, sample from its hidden
            if (g->n_running > 0 && pools_free(e) - 1 < watermark) break;
            for (int p = 0; p < N_POOLS; p++) {
                if (!e->has_pool[p]) continue;
                for (int i = 0; i < px->n_blocks; i++) {
                    s->bt[p][i] = px->blocks[p][i];
                    if (p == POOL_FULL || i >= px->lo) kv_cache_ref(&e->kv[p], px->blocks[p][i]);
                }
            }
            s->n_bt = px->n_blocks;
            s->lo = px->lo;
            s->n_cached = s->P;
            joiners[nj++] = si;
            g->res->n_prefix_hits++;
        } else {
            const int64_t budget = e->T_max - T;
            if (budget <= 0) break;
            const int64_t take = n_tok(s) < budget ? n_tok(s) : budget;
            const int64_t need = (take + bs - 1) / bs;
            if (g->n_running > 0 && pools_free(e) - need < watermark) break;
            while (pools_free(e) < need && (release_one_prefix(g, n_prompts) || drop_one_waiting_env(g))) {}
            if (pools_free(e) < need) break;
            CHECK(ensure_blocks(g, s, 0, take) == 0, "block allocation failed after the free check");
            feeds[nfeed++] = (feed_t){si, 0, take, T};
            T += take;
            if (px && px->state == PFX_NONE && g->pfx[s->prompt].unadmitted >= 2) {
                px->state = PFX_PREFILLING;
                px->leader = si;
            }
        }
        if (!s->admitted_once) { s->admitted_once = 1; g->pfx[s->prompt].unadmitted--; }
        s->state = SEQ_RUNNING;
        g->running[g->n_running++] = si;
        memmove(g->waiting + wi, g->waiting + wi + 1, (size_t)(g->n_waiting - wi - 1) * sizeof(int));
        g->n_waiting--;
    }
    if (nfeed == 0 && nj == 0) {
        // Nothing runnable: after a preemption (admission resumes next step), or with every block held by
        // prefixes (drop one and retry).
        CHECK(preempted || release_one_prefix(g, n_prompts) || drop_one_waiting_env(g) || g->n_waiting == 0,
              "rollout scheduler made no progress (running %d, waiting %d, free blocks %d of at least %d)", g->n_running,
              g->n_waiting, pools_free(e), pools_min_blocks(e));
        return 0;
    }
    // 3. the packed forward.
    for (int f = 0; f < nfeed; f++) {
        const seq_t *s = &g->seqs[feeds[f].seq];
        for (int64_t t = feeds[f].t0; t < feeds[f].t1; t++) {
            const int64_t i = feeds[f].off + (t - feeds[f].t0);
            e->tok[i] = tok_at(s, t);
            e->pos[i] = (int32_t)t;
            e->tok_seq[i] = feeds[f].seq;
        }
    }
    if (T > 0) {
        const kv_tables kt = {{g->bt_all[POOL_FULL], g->bt_all[POOL_WINDOW]}, g->bt_stride};
        eng_forward_tokens(e, T, &kt);
        eng_note_kv_peak(e, g->res);   // before this step's recycling
    }
    // 4. rows that sample: feeds that reached the end of their tokens, then joiners.
    const model_config *c = e->m->cfg;
    const int64_t H = c->hidden_size, V = c->vocab_size;
    eng_reserve_rows(e, nfeed + nj);
    int R = 0;
    for (int f = 0; f < nfeed; f++) {
        seq_t *s = &g->seqs[feeds[f].seq];
        s->n_cached = feeds[f].t1;
        recycle_window(g, s);
        if (feeds[f].t1 != n_tok(s)) continue;
        memcpy(e->xs + (int64_t)R * H, e->x + (feeds[f].off + feeds[f].t1 - feeds[f].t0 - 1) * H, (size_t)H * sizeof(float));
        row_seq[R++] = feeds[f].seq;
    }
    const int Rf = R;
    if (Rf > 0) {
        const float *fn = eng_block_base(e->m, e->m->pl->n_blocks - 1);
        rmsnorm_forward_off(e->hid, e->rstd, e->xs, fn, c->norm_plus_one ? 1.0f : 0.0f, Rf, H, c->rms_norm_eps);
    }
    for (int r = 0; r < Rf; r++) {   // a leader that finished the prompt publishes its prefix
        const int si = row_seq[r];
        seq_t *s = &g->seqs[si];
        prefix_t *px = &g->pfx[s->prompt];
        if (px->state != PFX_PREFILLING || px->leader != si) continue;
        px->n_blocks = (int)((s->P + bs - 1) / bs);
        px->lo = s->lo;
        for (int p = 0; p < N_POOLS; p++) {
            if (!e->has_pool[p]) continue;
            px->blocks[p] = rlc_malloc((size_t)px->n_blocks * sizeof(int32_t));
            for (int i = 0; i < px->n_blocks; i++) {
                px->blocks[p][i] = s->bt[p][i];
                if (p == POOL_FULL || i >= px->lo) kv_cache_ref(&e->kv[p], s->bt[p][i]);
            }
        }
        px->hidden = rlc_malloc((size_t)H * sizeof(float));
        memcpy(px->hidden, e->hid + (int64_t)r * H, (size_t)H * sizeof(float));
        px->state = PFX_READY;
    }
    for (int j = 0; j < nj; j++) {
        memcpy(e->hid + (int64_t)R * H, g->pfx[g->seqs[joiners[j]].prompt].hidden, (size_t)H * sizeof(float));
        row_seq[R++] = joiners[j];
    }
    // 5. logits and sampling (rows in parallel; each row's draw is a pure function of its sample).
    if (R > 0) {
        const int nth = omp_get_max_threads();   // the caller may have raised the thread count since
        if (nth > e->n_ws) {
            e->ws = rlc_realloc(e->ws, (size_t)nth * sizeof(sampler_ws));
            for (int i = e->n_ws; i < nth; i++) sampler_ws_init(&e->ws[i], V);
            e->n_ws = nth;
        }
        eng_logits_rows(e, R);
        if (cfg->on_logits)
            for (int r = 0; r < R; r++) {
                const seq_t *s = &g->seqs[row_seq[r]];
                cfg->on_logits(cfg->on_logits_ctx, s->prompt, s->sample, s->n_drawn, e->logits + (int64_t)r * V, V);
            }
        int32_t *new_tok = rlc_malloc((size_t)R * sizeof(int32_t));
        float *new_lp = rlc_malloc((size_t)R * sizeof(float));
#pragma omp parallel for schedule(static)
        for (int r = 0; r < R; r++) {
            const seq_t *s = &g->seqs[row_seq[r]];
            const int th = omp_get_thread_num();
            CHECK(th < e->n_ws, "thread %d without a sampler workspace", th);
            const double u = sampler_uniform(cfg->seed, s->rng_id, s->rng_sample, (uint64_t)(s->draw_base + s->n_drawn));
            new_tok[r] = sampler_sample(&cfg->sampling, e->logits + (int64_t)r * V, V, u, &new_lp[r], &e->ws[th]);
        }
        const double now = rlc_now() - g->t0;
        for (int r = 0; r < R; r++) {
            seq_t *s = &g->seqs[row_seq[r]];
            s->gen[s->n_gen] = new_tok[r];
            s->lp[s->n_gen] = new_lp[r];
            s->n_gen++;
            s->n_drawn++;
            if (s->n_drawn == 1) s->t_first = now;
            g->res->gen_tokens++;
            if (is_stop(e, new_tok[r])) s->finish = ROLLOUT_FINISH_STOP;
            else if (n_tok(s) >= s->max_total) s->finish = ROLLOUT_FINISH_LENGTH;
            if (s->finish && g->hooks) {   // a turn ended: the hook keeps the sample waiting, or ends it
                const int keep = g->hooks->turn_end(g->hooks->ctx, (rollout_turn_io *)g, s->prompt, s->sample, s->gen + s->turn0,
                                                    s->lp + s->turn0, s->n_gen - s->turn0, s->finish);
                if (keep && s->finish == ROLLOUT_FINISH_STOP) {
                    s->finish = ROLLOUT_FINISH_NONE;
                    s->state = SEQ_WAIT_ENV;
                    g->n_wait_env++;
                }
            }
            if (s->finish) {
                eng_release_blocks(g, s);
                s->state = SEQ_DONE;
                g->n_done++;
            }
        }
        free(new_tok);
        free(new_lp);
    }
    // Drop finished sequences from the running list (order kept) and prefixes nobody will join.
    int w = 0;
    for (int ri = 0; ri < g->n_running; ri++)
        if (g->seqs[g->running[ri]].state == SEQ_RUNNING) g->running[w++] = g->running[ri];
    g->n_running = w;
    for (int p = 0; p < n_prompts; p++)
        if (g->pfx[p].state == PFX_READY && g->pfx[p].unadmitted == 0) eng_prefix_release(g, &g->pfx[p]);
    return T;
}
