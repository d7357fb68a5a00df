// grpo.c: verl's PPO/GRPO loop (see grpo.h and docs/grpo.md).
//
// Layout of one step's data. B = n_prompts x n samples, prompt-major (sample i belongs to prompt i / n).
// Sequence i is prompt ++ response, packed back to back (cu (B+1)). Position t of sequence i scores
// token t+1: the response's k-th token is scored at packed position cu[i] + plen[i] - 1 + k. The RL
// modules work on padded (B, Tr) arrays with Tr = the longest response of the step; row i column k is
// that same token. Everything the step computes is a pure function of (config, weights, step), so a
// resumed run repeats an uninterrupted one bit for bit.
#include "trainer/grpo.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/common.h"
#include "core/rng.h"
#include "core/strbuf.h"
#include "data/dataset.h"
#include "io/checkpoint.h"
#include "model/qwen3.h"
#include "reward/reward.h"
#include "rl/advantage.h"
#include "rl/agg.h"
#include "rl/kl.h"
#include "rl/policy_loss.h"
#include "rollout/engine.h"
#include "tokenizer/tokenizer.h"
#include "trainer/engine.h"
#include "trainer/plot.h"

// ---------------------------------------------------------------------------------------------
// metrics: an ordered (key, value) list written as one JSON line per step

typedef struct { char key[120]; double v; } metric_kv;
typedef struct { metric_kv *kv; int n, cap; } metrics;

static void mset(metrics *m, const char *key, double v) {
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->kv[i].key, key) == 0) { m->kv[i].v = v; return; }
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 128;
        m->kv = rlc_realloc(m->kv, (size_t)m->cap * sizeof(metric_kv));
    }
    snprintf(m->kv[m->n].key, sizeof m->kv[m->n].key, "%s", key);
    m->kv[m->n++].v = v;
}
static double mget(const metrics *m, const char *key, double def) {
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->kv[i].key, key) == 0) return m->kv[i].v;
    return def;
}
static void msetf(metrics *m, double v, const char *fmt, const char *a) {
    char k[120];
    snprintf(k, sizeof k, fmt, a);
    mset(m, k, v);
}
// mean/max/min of x (n) under "<prefix>/mean" etc.
static void mstats(metrics *m, const char *prefix, const double *x, int64_t n) {
    double s = 0, mx = -INFINITY, mn = INFINITY;
    for (int64_t i = 0; i < n; i++) {
        s += x[i];
        if (x[i] > mx) mx = x[i];
        if (x[i] < mn) mn = x[i];
    }
    if (n == 0) s = mx = mn = NAN;
    msetf(m, n ? s / (double)n : NAN, "%s/mean", prefix);
    msetf(m, mx, "%s/max", prefix);
    msetf(m, mn, "%s/min", prefix);
}
static char *metrics_json(const metrics *m) {
    rlc_strbuf b = {0};
    rlc_sb_putc(&b, '{');
    for (int i = 0; i < m->n; i++) {
        if (i) rlc_sb_puts(&b, ", ");
        rlc_sb_json_str(&b, m->kv[i].key, strlen(m->kv[i].key));
        if (isfinite(m->kv[i].v)) rlc_sb_printf(&b, ": %.17g", m->kv[i].v);
        else rlc_sb_puts(&b, ": null");   // JSON has no NaN
    }
    rlc_sb_putc(&b, '}');
    return rlc_sb_take(&b);
}

// ---------------------------------------------------------------------------------------------
// one step's batch

typedef struct {
    int n_prompts, n, B;
    int64_t *ds_index;        // (B) dataset row of each sample's prompt
    int64_t *plen, *rlen;     // (B)
    int32_t *cu;              // (B+1)
    int64_t T;                // packed tokens
    int32_t *tokens;          // (T)
    int32_t *targets;         // (T) scored token at each position, -1 = none
    float *loss_mask;         // (T) 1 on response-scoring positions
    int64_t Tr;               // longest response
    float *rollout_lp;        // (B, Tr) log-probs returned by the rollout
    float *old_lp;            // (B, Tr) actor log-probs before the update (old_log_prob)
    float *ref_lp;            // (B, Tr) reference log-probs (NULL without a reference)
    float *entropy;           // (B, Tr) actor entropy from the old_log_prob pass
    float *mask;              // (B, Tr) response mask
    float *scores;            // (B, Tr) token-level scores (the reward on the last response token)
    float *rewards;           // (B, Tr) token-level rewards (scores - beta * kl when KL is in the reward)
    float *adv, *returns;     // (B, Tr)
    double *seq_score;        // (B)
    int *finish;              // (B)
} step_batch;

static void step_batch_free(step_batch *s) {
    free(s->ds_index); free(s->plen); free(s->rlen); free(s->cu); free(s->tokens); free(s->targets);
    free(s->loss_mask); free(s->rollout_lp); free(s->old_lp); free(s->ref_lp); free(s->entropy); free(s->mask);
    free(s->scores); free(s->rewards); free(s->adv); free(s->returns); free(s->seq_score); free(s->finish);
    memset(s, 0, sizeof *s);
}

// ---------------------------------------------------------------------------------------------
// the trainer

typedef struct {
    const rlc_train_config *cfg;
    backend_ctx be;
    rlc_tokenizer *tok;
    rlc_dataset train, val;
    int have_train, have_val;
    qwen3_config mcfg;
    param_layout pl;
    param_set params, ref_params;
    qwen3_model model, ref_model;
    int have_ref;
    engine eng;
    rollout_engine *rollout;
    rlc_reward_fn reward;
    rl_loss_cfg loss_cfg;
    rl_adv_cfg adv_cfg;
    rl_kl_type kl_in_reward;
    rl_kl_ctrl kl_ctrl;
    float temperature;            // rollout temperature, also used by the actor's log-prob passes
    int want_entropy_update;      // entropy computed in the update (entropy_coeff != 0 or calculate_entropy)
    int64_t steps_per_epoch, total_steps;
    int64_t global_step;          // steps completed
    int64_t epoch, batch_in_epoch;// data-loader position of the next step
    char *run_dir;
    char *metrics_path;
    uint64_t data_seed;
} grpo;

static const char *TRAINER_STATE_MAGIC = "RLCGRPO\x01";
enum { TRAINER_STATE_VERSION = 1 };

// Prompt order of one epoch: a seeded Fisher-Yates shuffle (data.shuffle) or the file order.
static void epoch_order(const grpo *g, int64_t epoch, int64_t *perm) {
    int64_t n = g->train.n;
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    if (!g->cfg->data.shuffle) return;
    rng r;
    rng_stream(&r, g->data_seed, 0x4550434855ull /* "EPOCH" */, (uint64_t)epoch);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)rng_below(&r, (uint64_t)(i + 1));
        int64_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
}

static void load_data(grpo *g, rlc_dataset *ds, const rlc_strlist *files, const char *what) {
    const rlc_train_config *c = g->cfg;
    if (files->n == 0) rlc_die("config: data.%s is empty: give a JSONL file", what);
    if (files->n > 1) rlc_die("config: data.%s lists %lld files; rlc reads one JSONL file per split", what, (long long)files->n);
    rlc_data_opts o;
    rlc_data_opts_default(&o);
    o.max_prompt_length = c->data.max_prompt_length;
    o.truncation = rlc_truncation_parse(c->data.truncation, "data.truncation");
    o.filter_overlong_prompts = c->data.filter_overlong_prompts;
    if (c->data.prompt_key) o.prompt_key = c->data.prompt_key;
    rlc_dataset_load(ds, files->v[0], g->tok, &o);
    if (ds->n == 0) rlc_die("%s: no prompts left after loading (data.%s)", files->v[0], what);
}

static void rollout_cfg_from(const grpo *g, rollout_config *rc, int val) {
    const rlc_train_config *c = g->cfg;
    rollout_config_default(rc);
    if (val) {
        rc->n = (int)c->actor_rollout_ref.rollout.val_kwargs.n;
        rc->sampling.temperature = (float)c->actor_rollout_ref.rollout.val_kwargs.temperature;
        rc->sampling.top_p = (float)c->actor_rollout_ref.rollout.val_kwargs.top_p;
        rc->sampling.top_k = (int)c->actor_rollout_ref.rollout.val_kwargs.top_k;
        rc->sampling.do_sample = c->actor_rollout_ref.rollout.val_kwargs.do_sample;
    } else {
        rc->n = (int)c->actor_rollout_ref.rollout.n;
        rc->sampling.temperature = (float)c->actor_rollout_ref.rollout.temperature;
        rc->sampling.top_p = (float)c->actor_rollout_ref.rollout.top_p;
        rc->sampling.top_k = (int)c->actor_rollout_ref.rollout.top_k;
        rc->sampling.do_sample = c->actor_rollout_ref.rollout.do_sample;
    }
    rc->max_new_tokens = (int)c->data.max_response_length;
    rc->seed = (uint64_t)c->actor_rollout_ref.rollout.seed;
    rc->kv_cache_bytes = c->actor_rollout_ref.rollout.kv_cache_bytes;
    if (c->actor_rollout_ref.rollout.max_num_seqs > 0) rc->max_num_seqs = (int)c->actor_rollout_ref.rollout.max_num_seqs;
    const rlc_tok_special *sp = rlc_tok_specials(g->tok);
    rc->stop_ids = sp->stop_ids;
    rc->n_stop_ids = sp->n_stop;
    rc->progress = isatty(2);
}

// ---------------------------------------------------------------------------------------------
// gen + reward: rollout the prompts, pack prompt ++ response, score the decoded responses

static void generate(grpo *g, rollout_engine *re, const int64_t *rows, int n_prompts, const rlc_dataset *ds,
                     uint64_t stream_base, step_batch *sb, double *t_gen) {
    const rollout_config *rc = rollout_engine_config(re);
    int n = rc->n;
    rollout_prompt *ps = rlc_calloc((size_t)n_prompts, sizeof *ps);
    for (int p = 0; p < n_prompts; p++) {
        const rlc_prompt *pr = &ds->items[rows[p]];
        ps[p].ids = pr->ids;
        ps[p].len = pr->n_ids;
        // The sampling stream of a prompt is named by (step, dataset row): independent of batch
        // composition, and different at every step.
        ps[p].id = stream_base + (uint64_t)rows[p];
    }
    double t0 = rlc_now();
    rollout_result rr;
    rollout_generate(re, ps, n_prompts, &rr);
    *t_gen = rlc_now() - t0;
    memset(sb, 0, sizeof *sb);
    sb->n_prompts = n_prompts;
    sb->n = n;
    sb->B = n_prompts * n;
    int B = sb->B;
    CHECK_EQ(rr.n_samples, B, "rollout samples");
    sb->ds_index = rlc_malloc(sizeof(int64_t) * (size_t)B);
    sb->plen = rlc_malloc(sizeof(int64_t) * (size_t)B);
    sb->rlen = rlc_malloc(sizeof(int64_t) * (size_t)B);
    sb->finish = rlc_malloc(sizeof(int) * (size_t)B);
    sb->cu = rlc_malloc(sizeof(int32_t) * (size_t)(B + 1));
    int64_t T = 0, Tr = 0;
    for (int i = 0; i < B; i++) {
        const rollout_sample *s = &rr.samples[i];
        sb->ds_index[i] = rows[s->prompt];
        sb->plen[i] = ps[s->prompt].len;
        sb->rlen[i] = s->len;
        sb->finish[i] = s->finish;
        T += sb->plen[i] + sb->rlen[i];
        if (s->len > Tr) Tr = s->len;
    }
    if (Tr == 0) Tr = 1;
    CHECK(T < INT32_MAX, "packed step batch of %lld tokens exceeds int32 offsets", (long long)T);
    sb->T = T;
    sb->Tr = Tr;
    sb->tokens = rlc_malloc(sizeof(int32_t) * (size_t)T);
    sb->targets = rlc_malloc(sizeof(int32_t) * (size_t)T);
    sb->loss_mask = rlc_calloc((size_t)T, sizeof(float));
    size_t BT = (size_t)B * (size_t)Tr;
    sb->rollout_lp = rlc_calloc(BT, sizeof(float));
    sb->mask = rlc_calloc(BT, sizeof(float));
    int64_t off = 0;
    for (int i = 0; i < B; i++) {
        const rollout_sample *s = &rr.samples[i];
        sb->cu[i] = (int32_t)off;
        int64_t pl = sb->plen[i], rl = sb->rlen[i];
        memcpy(sb->tokens + off, ps[s->prompt].ids, sizeof(int32_t) * (size_t)pl);
        memcpy(sb->tokens + off + pl, s->ids, sizeof(int32_t) * (size_t)rl);
        for (int64_t t = 0; t < pl + rl; t++) {
            int scored = t >= pl - 1 && t < pl + rl - 1;
            sb->targets[off + t] = scored ? sb->tokens[off + t + 1] : -1;
            sb->loss_mask[off + t] = scored ? 1.0f : 0.0f;
        }
        for (int64_t k = 0; k < rl; k++) {
            sb->rollout_lp[(size_t)i * Tr + k] = s->logprobs[k];
            sb->mask[(size_t)i * Tr + k] = 1.0f;
        }
        off += pl + rl;
    }
    sb->cu[B] = (int32_t)off;
    rollout_result_free(&rr);
    free(ps);
}

// Decode responses (special tokens skipped, as verl's naive reward manager) and score them.
static void score(grpo *g, const rlc_dataset *ds, step_batch *sb, double *acc_out) {
    int B = sb->B;
    rlc_reward_request *req = rlc_calloc((size_t)B, sizeof *req);
    rlc_reward_result *res = rlc_calloc((size_t)B, sizeof *res);
    char **texts = rlc_calloc((size_t)B, sizeof(char *));
    for (int i = 0; i < B; i++) {
        const rlc_prompt *pr = &ds->items[sb->ds_index[i]];
        texts[i] = rlc_tok_decode_str(g->tok, sb->tokens + sb->cu[i] + sb->plen[i], sb->rlen[i], 1);
        req[i].data_source = pr->data_source;
        req[i].response = texts[i];
        req[i].ground_truth = pr->ground_truth ? pr->ground_truth : "";
        req[i].extra_info = pr->extra_info_json;
    }
    rlc_reward_compute(&g->reward, B, req, res);
    size_t BT = (size_t)B * (size_t)sb->Tr;
    sb->seq_score = rlc_malloc(sizeof(double) * (size_t)B);
    sb->scores = rlc_calloc(BT, sizeof(float));
    for (int i = 0; i < B; i++) {
        sb->seq_score[i] = res[i].score;
        if (acc_out) acc_out[i] = res[i].score;
        // verl puts the sequence reward on the last valid response token.
        if (sb->rlen[i] > 0) sb->scores[(size_t)i * sb->Tr + sb->rlen[i] - 1] = (float)res[i].score;
        rlc_reward_result_free(&res[i]);
        free(texts[i]);
    }
    free(texts);
    free(req);
    free(res);
}

// Gather packed per-position values (T) into the padded response layout (B, Tr).
static void gather_response(const step_batch *sb, const float *packed, float *padded) {
    for (int i = 0; i < sb->B; i++) {
        int64_t base = sb->cu[i] + sb->plen[i] - 1;
        float *row = padded + (size_t)i * sb->Tr;
        for (int64_t k = 0; k < sb->Tr; k++) row[k] = k < sb->rlen[i] ? packed[base + k] : 0.0f;
    }
}

static void infer_logprobs(engine *e, qwen3_model *m, const step_batch *sb, int64_t max_tokens, float *lp_padded,
                           float *ent_padded) {
    engine_batch b = {sb->B, sb->cu, sb->tokens, sb->targets, sb->loss_mask};
    float *lp = rlc_malloc(sizeof(float) * (size_t)sb->T);
    float *ent = ent_padded ? rlc_malloc(sizeof(float) * (size_t)sb->T) : NULL;
    // The reference model shares the actor's engine buffers (same shapes): only the weights differ.
    qwen3_model *saved = e->model;
    e->model = m;
    engine_infer(e, &b, max_tokens, lp, ent);
    e->model = saved;
    gather_response(sb, lp, lp_padded);
    if (ent) gather_response(sb, ent, ent_padded);
    free(lp);
    free(ent);
}

// ---------------------------------------------------------------------------------------------
// update_actor: PPO epochs over mini-batches, micro-batches with gradient accumulation

typedef struct {
    grpo *g;
    const step_batch *sb;
    const int *rows;          // (mini-batch sequences) -> sample index in sb
    double G;                 // sequences in the global mini-batch
    // metric accumulators over this mini-batch
    double pg_loss, kl_loss, ent_loss, loss;
    double clipfrac, clipfrac_lower, ppo_kl;
    int n_micro;
} loss_ctx;

static double grpo_loss_fn(void *user, const engine_micro *mb) {
    loss_ctx *lc = user;
    const step_batch *sb = lc->sb;
    const grpo *g = lc->g;
    int nb = mb->n_seqs;
    int64_t Tm = 1;
    for (int s = 0; s < nb; s++) {
        int i = lc->rows[mb->seq_begin + s];
        if (sb->rlen[i] > Tm) Tm = sb->rlen[i];
    }
    size_t n = (size_t)nb * (size_t)Tm;
    float *lp = rlc_calloc(n, sizeof(float)), *old = rlc_calloc(n, sizeof(float)), *adv = rlc_calloc(n, sizeof(float));
    float *mask = rlc_calloc(n, sizeof(float)), *dlp = rlc_calloc(n, sizeof(float));
    float *ref = sb->ref_lp ? rlc_calloc(n, sizeof(float)) : NULL;
    float *ent = mb->entropy ? rlc_calloc(n, sizeof(float)) : NULL;
    float *dent = mb->entropy ? rlc_calloc(n, sizeof(float)) : NULL;
    for (int s = 0; s < nb; s++) {
        int i = lc->rows[mb->seq_begin + s];
        int64_t base = mb->cu_seqlens[s] + sb->plen[i] - 1;   // local to the micro-batch
        for (int64_t k = 0; k < sb->rlen[i]; k++) {
            size_t o = (size_t)s * Tm + k, go = (size_t)i * sb->Tr + k;
            lp[o] = mb->logp[base + k];
            old[o] = sb->old_lp[go];
            adv[o] = sb->adv[go];
            mask[o] = sb->mask[go];
            if (ref) ref[o] = sb->ref_lp[go];
            if (ent) ent[o] = mb->entropy[base + k];
        }
    }
    rl_batch_info gbi = {1, mb->global_tokens, lc->G, g->cfg->actor_rollout_ref.actor.loss_scale_factor};
    if (!isfinite(gbi.loss_scale_factor)) gbi.loss_scale_factor = 0;   // null: the micro-batch width
    rl_loss_out out;
    rl_ppo_loss(&out, dlp, dent, lp, old, ref, adv, ent, mask, NULL, nb, Tm, &g->loss_cfg, &gbi);
    for (int s = 0; s < nb; s++) {
        int i = lc->rows[mb->seq_begin + s];
        int64_t base = mb->cu_seqlens[s] + sb->plen[i] - 1;
        for (int64_t k = 0; k < sb->rlen[i]; k++) {
            mb->dlogp[base + k] = dlp[(size_t)s * Tm + k];
            if (dent) mb->dentropy[base + k] = dent[(size_t)s * Tm + k];
        }
    }
    lc->pg_loss += out.pg_loss;
    lc->kl_loss += out.kl_loss;
    lc->ent_loss += out.entropy_loss;
    lc->loss += out.loss;
    lc->clipfrac += out.pg.pg_clipfrac;
    lc->clipfrac_lower += out.pg.pg_clipfrac_lower;
    lc->ppo_kl += out.pg.ppo_kl;
    lc->n_micro++;
    free(lp); free(old); free(adv); free(mask); free(dlp); free(ref); free(ent); free(dent);
    return out.loss;
}

static void update_actor(grpo *g, const step_batch *sb, metrics *m) {
    const rlc_train_config *c = g->cfg;
    int n = sb->n, B = sb->B;
    int mini_seqs = (int)c->actor_rollout_ref.actor.ppo_mini_batch_size * n;
    if (mini_seqs > B) mini_seqs = B;
    int n_mini = B / mini_seqs;
    int *order = rlc_malloc(sizeof(int) * (size_t)B);
    int32_t *cu = rlc_malloc(sizeof(int32_t) * (size_t)(mini_seqs + 1));
    int32_t *tok = rlc_malloc(sizeof(int32_t) * (size_t)sb->T), *tgt = rlc_malloc(sizeof(int32_t) * (size_t)sb->T);
    float *lm = rlc_malloc(sizeof(float) * (size_t)sb->T);
    engine_mb mbc = {0, 0};
    if (c->actor_rollout_ref.actor.use_dynamic_bsz) mbc.micro_batch_tokens = c->actor_rollout_ref.actor.ppo_max_token_len_per_gpu;
    else mbc.micro_batch_seqs = (int)c->actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu;
    double s_pg = 0, s_kl = 0, s_ent = 0, s_loss = 0, s_cf = 0, s_cfl = 0, s_pkl = 0, s_gn = 0;
    int n_updates = 0, n_nonfinite = 0;
    for (int64_t ep = 0; ep < c->actor_rollout_ref.actor.ppo_epochs; ep++) {
        for (int i = 0; i < B; i++) order[i] = i;
        if (c->actor_rollout_ref.actor.shuffle) {   // verl: DataLoader(shuffle) seeded by data_loader_seed
            rng r;
            rng_stream(&r, (uint64_t)c->actor_rollout_ref.actor.data_loader_seed, (uint64_t)g->global_step, (uint64_t)ep);
            for (int i = B - 1; i > 0; i--) {
                int j = (int)rng_below(&r, (uint64_t)(i + 1));
                int t = order[i]; order[i] = order[j]; order[j] = t;
            }
        }
        for (int mi = 0; mi < n_mini; mi++) {
            const int *rows = order + (size_t)mi * mini_seqs;
            int64_t off = 0;
            for (int s = 0; s < mini_seqs; s++) {
                int i = rows[s];
                int64_t len = sb->cu[i + 1] - sb->cu[i];
                cu[s] = (int32_t)off;
                memcpy(tok + off, sb->tokens + sb->cu[i], sizeof(int32_t) * (size_t)len);
                memcpy(tgt + off, sb->targets + sb->cu[i], sizeof(int32_t) * (size_t)len);
                memcpy(lm + off, sb->loss_mask + sb->cu[i], sizeof(float) * (size_t)len);
                off += len;
            }
            cu[mini_seqs] = (int32_t)off;
            engine_batch eb = {mini_seqs, cu, tok, tgt, lm};
            loss_ctx lc = {g, sb, rows, (double)mini_seqs, 0, 0, 0, 0, 0, 0, 0, 0};
            engine_step_stats st;
            engine_train_batch(&g->eng, &eb, &mbc, g->want_entropy_update, grpo_loss_fn, &lc, 0, &st);
            s_pg += lc.pg_loss;
            s_kl += lc.kl_loss;
            s_ent += lc.ent_loss;
            s_loss += lc.loss;
            if (lc.n_micro) {
                s_cf += lc.clipfrac / lc.n_micro;
                s_cfl += lc.clipfrac_lower / lc.n_micro;
                s_pkl += lc.ppo_kl / lc.n_micro;
            }
            s_gn += st.opt.grad_norm;
            if (!st.opt.finite) n_nonfinite++;
            n_updates++;
        }
    }
    double lr = engine_lr_scheduler_step(&g->eng);   // once per training step, after the last mini-batch
    double k = n_updates ? (double)n_updates : 1;
    mset(m, "actor/pg_loss", s_pg / k);
    mset(m, "actor/pg_clipfrac", s_cf / k);
    mset(m, "actor/ppo_kl", s_pkl / k);
    mset(m, "actor/pg_clipfrac_lower", s_cfl / k);
    if (g->want_entropy_update) mset(m, "actor/entropy_loss", s_ent / k);
    if (g->loss_cfg.use_kl_loss) {
        mset(m, "actor/kl_loss", s_kl / k);
        mset(m, "actor/kl_coef", g->loss_cfg.kl_loss_coef);
    }
    mset(m, "actor/loss", s_loss / k);
    mset(m, "actor/grad_norm", s_gn / k);
    mset(m, "actor/lr", lr);
    if (n_nonfinite) mset(m, "actor/nonfinite_grad_steps", n_nonfinite);
    free(order); free(cu); free(tok); free(tgt); free(lm);
}

// ---------------------------------------------------------------------------------------------
// data metrics (verl compute_data_metrics)

static void data_metrics(const grpo *g, const step_batch *sb, metrics *m) {
    int B = sb->B;
    int64_t Tr = sb->Tr;
    double *x = rlc_malloc(sizeof(double) * (size_t)(B > 0 ? B : 1) * (size_t)Tr);
    int nb = 0;
    for (int i = 0; i < B; i++)
        if (sb->rlen[i] > 0) x[nb++] = sb->seq_score[i];
    mstats(m, "critic/score", x, nb);
    nb = 0;
    for (int i = 0; i < B; i++) {
        if (sb->rlen[i] == 0) continue;
        double s = 0;
        for (int64_t k = 0; k < Tr; k++) s += sb->rewards[(size_t)i * Tr + k];
        x[nb++] = s;
    }
    mstats(m, "critic/rewards", x, nb);
    int64_t nt = 0;
    for (size_t j = 0; j < (size_t)B * Tr; j++)
        if (sb->mask[j] > 0) x[nt++] = sb->adv[j];
    mstats(m, "critic/advantages", x, nt);
    nt = 0;
    for (size_t j = 0; j < (size_t)B * Tr; j++)
        if (sb->mask[j] > 0) x[nt++] = sb->returns[j];
    mstats(m, "critic/returns", x, nt);
    // Lengths. clip_ratio compares with the batch's widest response/prompt, as verl's v1 trainer
    // (which stores samples unpadded) does.
    int64_t pmax = 0;
    for (int i = 0; i < B; i++) { x[i] = (double)sb->rlen[i]; }
    mstats(m, "response_length", x, B);
    double clip = 0;
    for (int i = 0; i < B; i++) clip += sb->rlen[i] == Tr;
    mset(m, "response_length/clip_ratio", B ? clip / B : 0);
    for (int i = 0; i < B; i++) { x[i] = (double)sb->plen[i]; if (sb->plen[i] > pmax) pmax = sb->plen[i]; }
    mstats(m, "prompt_length", x, B);
    clip = 0;
    for (int i = 0; i < B; i++) clip += sb->plen[i] == pmax;
    mset(m, "prompt_length/clip_ratio", B ? clip / B : 0);
    int aborted = 0;
    for (int i = 0; i < B; i++) aborted += sb->rlen[i] == 0;
    mset(m, "response/aborted_ratio", B ? (double)aborted / B : 0);
    free(x);
    (void)g;
}

// ---------------------------------------------------------------------------------------------
// validation (verl _validate): greedy by default, val-core/<data_source>/acc/mean@n

static void validate(grpo *g, metrics *m) {
    if (!g->have_val) return;
    rollout_config rc;
    rollout_cfg_from(g, &rc, 1);
    rollout_engine *re = rollout_engine_new(&g->model, &rc);
    int64_t N = g->val.n, bs = g->cfg->data.val_batch_size;
    if (bs == RLC_CFG_NULL || bs <= 0 || bs > N) bs = N;
    int n = rc.n;
    double *acc = rlc_malloc(sizeof(double) * (size_t)N * (size_t)n);
    int64_t *rows = rlc_malloc(sizeof(int64_t) * (size_t)bs);
    double t_gen_total = 0;
    for (int64_t start = 0; start < N; start += bs) {
        int64_t cnt = N - start < bs ? N - start : bs;
        for (int64_t i = 0; i < cnt; i++) rows[i] = start + i;
        step_batch sb;
        double tg;
        generate(g, re, rows, (int)cnt, &g->val, 0x56414cull << 40 /* "VAL": not a train stream */, &sb, &tg);
        t_gen_total += tg;
        score(g, &g->val, &sb, acc + (size_t)start * n);
        step_batch_free(&sb);
    }
    rollout_engine_free(re);
    // Per data source: mean over prompts of the mean over their n samples (mean@n).
    for (int64_t i = 0; i < N; i++) {
        const char *ds = g->val.items[i].data_source;
        int seen = 0;
        for (int64_t j = 0; j < i; j++)
            if (strcmp(g->val.items[j].data_source, ds) == 0) { seen = 1; break; }
        if (seen) continue;
        double s = 0, s2 = 0;
        int64_t cnt = 0;
        for (int64_t j = i; j < N; j++) {
            if (strcmp(g->val.items[j].data_source, ds) != 0) continue;
            double pm = 0;
            for (int k = 0; k < n; k++) pm += acc[(size_t)j * n + k];
            pm /= n;
            s += pm;
            double sd = 0;   // std@n over the n samples of this prompt (n > 1)
            for (int k = 0; k < n; k++) sd += (acc[(size_t)j * n + k] - pm) * (acc[(size_t)j * n + k] - pm);
            s2 += n > 1 ? sqrt(sd / (n - 1)) : 0;
            cnt++;
        }
        char key[160];
        snprintf(key, sizeof key, "val-core/%s/acc/mean@%d", ds, n);
        mset(m, key, s / (double)cnt);
        snprintf(key, sizeof key, "val-aux/%s/reward/mean@%d", ds, n);
        mset(m, key, s / (double)cnt);
        if (n > 1) {
            snprintf(key, sizeof key, "val-aux/%s/acc/std@%d", ds, n);
            mset(m, key, s2 / (double)cnt);
        }
    }
    mset(m, "val/timing_s/gen", t_gen_total);
    free(acc);
    free(rows);
}

// ---------------------------------------------------------------------------------------------
// checkpoints: <run_dir>/global_step_N/{actor/ (HF), trainer_state.bin}; atomic by directory rename

static char *step_dir(const grpo *g, int64_t step) {
    char name[64];
    snprintf(name, sizeof name, "global_step_%lld", (long long)step);
    return rlc_path_join(g->run_dir, name);
}

static void rm_rf(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char *p = rlc_path_join(path, e->d_name);
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) rm_rf(p);
            else unlink(p);
            free(p);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

typedef struct {
    char magic[8];
    uint32_t version, pad;
    int64_t global_step, epoch, batch_in_epoch;
    double kl_ctrl_value;
    uint64_t data_seed;
    int64_t train_n;
} trainer_state;

static void save_checkpoint(grpo *g) {
    char *final = step_dir(g, g->global_step);
    char tmpname[96];
    snprintf(tmpname, sizeof tmpname, ".tmp_global_step_%lld.%d", (long long)g->global_step, (int)getpid());
    char *tmp = rlc_path_join(g->run_dir, tmpname);
    rm_rf(tmp);
    rlc_mkdirs(tmp);
    char *actor = rlc_path_join(tmp, "actor");
    rlc_mkdirs(actor);
    // fp32 so that a resumed run continues bit-identically; transformers and vLLM load it as-is.
    checkpoint_save(actor, &g->params, ST_F32);
    checkpoint_copy_tokenizer(g->cfg->actor_rollout_ref.model.path, actor);
    char *opt = rlc_path_join(actor, "optimizer.bin");
    engine_save_state(&g->eng, opt);
    trainer_state ts;
    memset(&ts, 0, sizeof ts);
    memcpy(ts.magic, TRAINER_STATE_MAGIC, 8);
    ts.version = TRAINER_STATE_VERSION;
    ts.global_step = g->global_step;
    ts.epoch = g->epoch;
    ts.batch_in_epoch = g->batch_in_epoch;
    ts.kl_ctrl_value = g->kl_ctrl.value;
    ts.data_seed = g->data_seed;
    ts.train_n = g->train.n;
    char *tsp = rlc_path_join(tmp, "trainer_state.bin");
    if (rlc_write_file_atomic(tsp, &ts, sizeof ts) != 0) rlc_die("%s: cannot write: %s", tsp, strerror(errno));
    rlc_fsync_dir(tmp);
    // The directory appears under its final name only once complete: a crash before this leaves at most a
    // .tmp_ directory, which resume ignores and the next save removes.
    if (rlc_file_exists(final)) rm_rf(final);
    if (rename(tmp, final) != 0) rlc_die("%s: cannot rename checkpoint into place: %s", final, strerror(errno));
    rlc_fsync_dir(g->run_dir);
    char txt[32];
    int len = snprintf(txt, sizeof txt, "%lld", (long long)g->global_step);
    char *latest = rlc_path_join(g->run_dir, "latest_checkpointed_iteration.txt");
    if (rlc_write_file_atomic(latest, txt, (size_t)len) != 0) rlc_die("%s: cannot write: %s", latest, strerror(errno));
    // Keep the newest max_actor_ckpt_to_keep.
    int64_t keep = g->cfg->trainer.max_actor_ckpt_to_keep;
    if (keep != RLC_CFG_NULL && keep > 0) {
        DIR *d = opendir(g->run_dir);
        int64_t *steps = NULL;
        int ns = 0, cap = 0;
        struct dirent *e;
        while (d && (e = readdir(d))) {
            long long s;
            char extra;
            if (sscanf(e->d_name, "global_step_%lld%c", &s, &extra) == 1) {
                if (ns == cap) { cap = cap ? 2 * cap : 16; steps = rlc_realloc(steps, sizeof(int64_t) * (size_t)cap); }
                steps[ns++] = s;
            }
        }
        if (d) closedir(d);
        for (int i = 0; i < ns; i++) {
            int newer = 0;
            for (int j = 0; j < ns; j++) newer += steps[j] > steps[i];
            if (newer >= keep) {
                char *p = step_dir(g, steps[i]);
                rm_rf(p);
                free(p);
            }
        }
        free(steps);
    }
    // Also drop stale temp dirs from crashed saves.
    DIR *d = opendir(g->run_dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, ".tmp_global_step_", 17) == 0) {
            char *p = rlc_path_join(g->run_dir, e->d_name);
            rm_rf(p);
            free(p);
        }
    }
    if (d) closedir(d);
    free(final); free(tmp); free(actor); free(opt); free(tsp); free(latest);
}

// Latest complete checkpoint step in the run dir, or -1.
static int64_t find_latest_checkpoint(const grpo *g) {
    int64_t best = -1;
    DIR *d = opendir(g->run_dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        long long s;
        char extra;
        if (sscanf(e->d_name, "global_step_%lld%c", &s, &extra) != 1) continue;
        char *dir = rlc_path_join(g->run_dir, e->d_name);
        char *tsp = rlc_path_join(dir, "trainer_state.bin");
        if (rlc_file_exists(tsp) && s > best) best = s;
        free(dir);
        free(tsp);
    }
    if (d) closedir(d);
    return best;
}

static void load_checkpoint(grpo *g, const char *dir) {
    char *tsp = rlc_path_join(dir, "trainer_state.bin");
    size_t len;
    char *buf = rlc_read_file(tsp, &len);
    trainer_state ts;
    if (len != sizeof ts) rlc_die("%s: truncated trainer state (%zu bytes, expected %zu)", tsp, len, sizeof ts);
    memcpy(&ts, buf, sizeof ts);
    free(buf);
    if (memcmp(ts.magic, TRAINER_STATE_MAGIC, 8) != 0) rlc_die("%s: not an rlc trainer state (bad magic)", tsp);
    if (ts.version != TRAINER_STATE_VERSION) rlc_die("%s: trainer state version %u, this rlc reads %d", tsp, ts.version, TRAINER_STATE_VERSION);
    if (ts.train_n != g->train.n)
        rlc_die("%s: checkpoint was trained on %lld prompts, the configured data has %lld", tsp, (long long)ts.train_n, (long long)g->train.n);
    char *actor = rlc_path_join(dir, "actor");
    checkpoint_load_weights(actor, &g->params);
    char *opt = rlc_path_join(actor, "optimizer.bin");
    engine_load_state(&g->eng, opt);
    g->global_step = ts.global_step;
    g->epoch = ts.epoch;
    g->batch_in_epoch = ts.batch_in_epoch;
    g->kl_ctrl.value = ts.kl_ctrl_value;
    g->data_seed = ts.data_seed;
    free(tsp); free(actor); free(opt);
}

// Keep only metrics lines of steps <= last (a crash after logging a step that was never checkpointed
// would otherwise repeat it on resume).
static void truncate_metrics(const grpo *g, int64_t last) {
    if (!rlc_file_exists(g->metrics_path)) return;
    size_t len;
    char *buf = rlc_read_file(g->metrics_path, &len);
    rlc_strbuf out = {0};
    char *p = buf;
    while (*p) {
        char *nl = strchr(p, '\n');
        size_t ll = nl ? (size_t)(nl - p + 1) : strlen(p);
        const char *k = strstr(p, "\"training/global_step\": ");
        long long s = k && (!nl || k < nl) ? atoll(k + 24) : -1;
        if (s >= 0 && s <= last) rlc_sb_append(&out, p, ll);
        p += ll;
    }
    if (rlc_write_file_atomic(g->metrics_path, out.s ? out.s : "", out.n) != 0)
        rlc_die("%s: cannot rewrite: %s", g->metrics_path, strerror(errno));
    rlc_sb_free(&out);
    free(buf);
}

static void append_metrics(const grpo *g, const metrics *m) {
    char *line = metrics_json(m);
    FILE *f = fopen(g->metrics_path, "a");
    if (!f) rlc_die("%s: cannot open for append: %s", g->metrics_path, strerror(errno));
    fputs(line, f);
    fputc('\n', f);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) rlc_die("%s: write failed: %s", g->metrics_path, strerror(errno));
    fclose(f);
    free(line);
}

static void console_line(const grpo *g, const metrics *m) {
    char vkey[160] = "";
    for (int i = 0; i < m->n; i++)
        if (strncmp(m->kv[i].key, "val-core/", 9) == 0) { snprintf(vkey, sizeof vkey, "%s", m->kv[i].key); break; }
    fprintf(stdout, "step %lld/%lld | score %.3f | len %.1f | pg %.4f | gn %.3f | lr %.3g | ent %.3f",
            (long long)g->global_step, (long long)g->total_steps, mget(m, "critic/score/mean", NAN),
            mget(m, "response_length/mean", NAN), mget(m, "actor/pg_loss", NAN), mget(m, "actor/grad_norm", NAN),
            mget(m, "actor/lr", NAN), mget(m, "actor/entropy", NAN));
    if (g->loss_cfg.use_kl_loss) fprintf(stdout, " | kl %.4f", mget(m, "actor/kl_loss", NAN));
    if (vkey[0]) fprintf(stdout, " | %s %.3f", vkey, mget(m, vkey, NAN));
    fprintf(stdout, " | gen %.1fs upd %.1fs step %.1fs | %.0f tok/s\n", mget(m, "timing_s/gen", 0), mget(m, "timing_s/update_actor", 0),
            mget(m, "timing_s/step", 0), mget(m, "perf/throughput", 0));
    fflush(stdout);
}

// ---------------------------------------------------------------------------------------------
// one training step

static void train_step(grpo *g, const int64_t *rows, metrics *m) {
    const rlc_train_config *c = g->cfg;
    double t_step0 = rlc_now(), t;
    step_batch sb;
    double t_gen;
    generate(g, g->rollout, rows, (int)c->data.train_batch_size, &g->train,
             (uint64_t)(g->global_step + 1) << 32, &sb, &t_gen);
    mset(m, "timing_s/gen", t_gen);
    int B = sb.B;
    size_t BT = (size_t)B * (size_t)sb.Tr;

    t = rlc_now();
    score(g, &g->train, &sb, NULL);
    mset(m, "timing_s/reward", rlc_now() - t);

    // old_log_prob: the actor's log-probs and entropy at the rollout temperature.
    t = rlc_now();
    sb.old_lp = rlc_calloc(BT, sizeof(float));
    sb.entropy = rlc_calloc(BT, sizeof(float));
    int64_t infer_tokens = c->actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu;
    infer_logprobs(&g->eng, &g->model, &sb, infer_tokens, sb.old_lp, sb.entropy);
    mset(m, "timing_s/old_log_prob", rlc_now() - t);
    {   // actor/entropy: agg_loss over the whole step batch with no global info
        int64_t nseq = 0;
        double ntok = 0;
        for (int i = 0; i < B; i++) { nseq += sb.rlen[i] > 0; ntok += (double)sb.rlen[i]; }
        rl_batch_info gbi = {1, ntok, (double)nseq, c->actor_rollout_ref.actor.loss_scale_factor};
        if (!isfinite(gbi.loss_scale_factor)) gbi.loss_scale_factor = 0;
        mset(m, "actor/entropy", rl_agg_loss(sb.entropy, sb.mask, B, sb.Tr, g->loss_cfg.agg, &gbi));
        // rollout vs actor: the same weights and kernels, so these measure only the kernel paths' rounding.
        float *a = rlc_malloc(sizeof(float) * BT), *r = rlc_malloc(sizeof(float) * BT);
        int64_t nn = 0;
        for (size_t j = 0; j < BT; j++)
            if (sb.mask[j] > 0) { a[nn] = sb.old_lp[j]; r[nn] = sb.rollout_lp[j]; nn++; }
        rollout_probs_diff d;
        rollout_probs_diff_compute(&d, a, r, nn);
        mset(m, "training/rollout_probs_diff_valid", nn > 0);
        mset(m, "training/rollout_probs_diff_max", d.diff_max);
        mset(m, "training/rollout_probs_diff_mean", d.diff_mean);
        mset(m, "training/rollout_probs_diff_std", d.diff_std);
        mset(m, "training/rollout_actor_probs_pearson_corr", d.pearson);
        free(a);
        free(r);
    }

    int64_t tot_tokens = sb.T;   // prompt + response tokens of the step
    if (g->have_ref) {
        t = rlc_now();
        sb.ref_lp = rlc_calloc(BT, sizeof(float));
        infer_logprobs(&g->eng, &g->ref_model, &sb, c->actor_rollout_ref.ref.log_prob_max_token_len_per_gpu, sb.ref_lp, NULL);
        double dt = rlc_now() - t;
        mset(m, "timing_s/ref", dt);
        mset(m, "timing_per_token_ms/ref", dt * 1000.0 / (double)tot_tokens);
    }

    // adv: in-reward KL (optional), then the advantage estimator over groups of n.
    t = rlc_now();
    sb.rewards = rlc_malloc(sizeof(float) * BT);
    if (c->algorithm.use_kl_in_reward) {
        double beta;
        double kl = rl_apply_kl_penalty(sb.rewards, sb.scores, sb.old_lp, sb.ref_lp, sb.mask, B, sb.Tr, g->kl_in_reward,
                                        &g->kl_ctrl, &beta);
        mset(m, "actor/reward_kl_penalty", kl);
        mset(m, "actor/reward_kl_penalty_coeff", beta);
    } else {
        memcpy(sb.rewards, sb.scores, sizeof(float) * BT);
    }
    sb.adv = rlc_malloc(sizeof(float) * BT);
    sb.returns = rlc_malloc(sizeof(float) * BT);
    int64_t *group = rlc_malloc(sizeof(int64_t) * (size_t)B);
    for (int i = 0; i < B; i++) group[i] = i / sb.n;
    rl_compute_advantage(sb.adv, sb.returns, sb.rewards, sb.mask, group, B, sb.Tr, &g->adv_cfg);
    free(group);
    double dt = rlc_now() - t;
    mset(m, "timing_s/adv", dt);
    mset(m, "timing_per_token_ms/adv", dt * 1000.0 / (double)tot_tokens);

    t = rlc_now();
    if (g->global_step + 1 > c->trainer.critic_warmup || c->trainer.critic_warmup <= 0) update_actor(g, &sb, m);
    dt = rlc_now() - t;
    mset(m, "timing_s/update_actor", dt);
    mset(m, "timing_per_token_ms/update_actor", dt * 1000.0 / (double)tot_tokens);

    g->global_step++;
    // data-loader position of the next step (an epoch boundary rolls over here, so a checkpoint taken at
    // the end of an epoch resumes at the next epoch instead of stopping)
    g->batch_in_epoch++;
    if (g->batch_in_epoch >= g->steps_per_epoch) { g->epoch++; g->batch_in_epoch = 0; }

    int last = g->global_step >= g->total_steps;
    if (c->trainer.save_freq > 0 && (g->global_step % c->trainer.save_freq == 0 || last)) {
        t = rlc_now();
        save_checkpoint(g);
        mset(m, "timing_s/save_checkpoint", rlc_now() - t);
    }
    // update_weights: the rollout engine reads the trainer's weights in place (nothing to copy) unless it
    // decodes from a bf16 copy.
    t = rlc_now();
    rollout_engine_sync_weights(g->rollout);
    mset(m, "timing_s/update_weights", rlc_now() - t);
    double t_step = rlc_now() - t_step0;
    mset(m, "timing_s/step", t_step);
    double gen_tokens = 0;
    for (int i = 0; i < B; i++) gen_tokens += (double)sb.rlen[i];
    mset(m, "timing_per_token_ms/gen", gen_tokens > 0 ? t_gen * 1000.0 / gen_tokens : 0);
    mset(m, "perf/total_num_tokens", (double)tot_tokens);
    mset(m, "perf/time_per_step", t_step);
    mset(m, "perf/throughput", (double)tot_tokens / t_step);   // one process = one "GPU"
    mset(m, "perf/cpu_memory_used_gb", (double)rlc_current_rss() / (1 << 30));
    data_metrics(g, &sb, m);
    step_batch_free(&sb);
}

// ---------------------------------------------------------------------------------------------

static void grpo_setup(grpo *g, const rlc_train_config *c, int val_only) {
    memset(g, 0, sizeof *g);
    g->cfg = c;
    backend_init(&g->be, (int)c->trainer.n_threads);
    const char *mp = c->actor_rollout_ref.model.path;
    if (!mp || !*mp) rlc_die("config: actor_rollout_ref.model.path is not set: give an HF checkpoint directory");
    g->tok = rlc_tok_load(mp, NULL);
    checkpoint_load(mp, &g->mcfg, &g->pl, &g->params);
    qwen3_model_init(&g->model, &g->pl, &g->params, &g->be);
    if (!val_only) {
        load_data(g, &g->train, &c->data.train_files, "train_files");
        g->have_train = 1;
    }
    if (c->data.val_files.n > 0) {
        load_data(g, &g->val, &c->data.val_files, "val_files");
        g->have_val = 1;
    }
    if (val_only && !g->have_val) rlc_die("config: data.val_files is empty: validation needs a JSONL file");
    rlc_config_loss_cfg(c, &g->loss_cfg);
    rlc_config_adv_cfg(c, &g->adv_cfg);
    g->kl_in_reward = rlc_config_kl_penalty(c);
    rlc_config_kl_ctrl(c, &g->kl_ctrl);
    g->temperature = (float)c->actor_rollout_ref.rollout.temperature;
    if (!(g->temperature > 0)) g->temperature = 1.0f;
    g->want_entropy_update = c->actor_rollout_ref.actor.entropy_coeff != 0 || c->actor_rollout_ref.actor.calculate_entropy;
    rlc_reward_init(&g->reward, c->custom_reward_function.command, c->custom_reward_function.timeout_s);

    const char *dir = c->trainer.default_local_dir;
    g->run_dir = rlc_strdup(dir);
    rlc_mkdirs(g->run_dir);
    g->metrics_path = rlc_path_join(g->run_dir, val_only ? "eval_metrics.jsonl" : "metrics.jsonl");
    g->data_seed = c->data.seed == RLC_CFG_NULL ? 1 : (uint64_t)c->data.seed;

    engine_config ec;
    engine_config_default(&ec);
    ec.adam.beta1 = c->actor_rollout_ref.actor.optim.betas[0];
    ec.adam.beta2 = c->actor_rollout_ref.actor.optim.betas[1];
    ec.adam.eps = c->actor_rollout_ref.actor.optim.eps;
    ec.adam.weight_decay = c->actor_rollout_ref.actor.optim.weight_decay;
    ec.lr = c->actor_rollout_ref.actor.optim.lr;
    int st = lr_sched_type_parse(c->actor_rollout_ref.actor.optim.lr_scheduler_type);
    if (st < 0) rlc_die("config: actor_rollout_ref.actor.optim.lr_scheduler_type '%s' is not constant or cosine",
                        c->actor_rollout_ref.actor.optim.lr_scheduler_type);
    ec.lr_sched = (lr_sched_type)st;
    ec.clip_grad = c->actor_rollout_ref.actor.optim.clip_grad;
    ec.min_lr = c->actor_rollout_ref.actor.optim.min_lr_ratio;
    if (qwen3_ckpt_parse(c->actor_rollout_ref.actor.activation_checkpoint, &ec.ckpt) != 0)
        rlc_die("config: actor_rollout_ref.actor.activation_checkpoint '%s' is not none, selective or full",
                c->actor_rollout_ref.actor.activation_checkpoint);
    ec.temperature = g->temperature;
    if (g->have_train) {
        if (c->data.train_batch_size > g->train.n)
            rlc_die("config: data.train_batch_size=%lld exceeds the %lld training prompts", (long long)c->data.train_batch_size,
                    (long long)g->train.n);
        g->steps_per_epoch = g->train.n / c->data.train_batch_size;   // drop_last, as verl's dataloader
        g->total_steps = c->trainer.total_training_steps != RLC_CFG_NULL && c->trainer.total_training_steps > 0
                             ? c->trainer.total_training_steps
                             : g->steps_per_epoch * c->trainer.total_epochs;
        if (c->data.train_batch_size % c->actor_rollout_ref.actor.ppo_mini_batch_size != 0)
            rlc_die("config: data.train_batch_size=%lld must be a multiple of actor_rollout_ref.actor.ppo_mini_batch_size=%lld",
                    (long long)c->data.train_batch_size, (long long)c->actor_rollout_ref.actor.ppo_mini_batch_size);
        if (!c->actor_rollout_ref.actor.use_dynamic_bsz && c->actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == RLC_CFG_NULL)
            rlc_die("config: set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu, or use_dynamic_bsz=true");
    }
    ec.total_steps = g->total_steps > 0 ? g->total_steps : 1;
    ec.warmup_steps = lr_resolve_warmup(c->actor_rollout_ref.actor.optim.lr_warmup_steps,
                                        c->actor_rollout_ref.actor.optim.lr_warmup_steps_ratio, ec.total_steps);
    engine_init(&g->eng, &g->model, &ec);

    g->have_ref = !val_only && (c->actor_rollout_ref.actor.use_kl_loss || c->algorithm.use_kl_in_reward);
    if (g->have_ref) {   // frozen copy of the initial weights
        param_set_init(&g->ref_params, &g->pl);
        memcpy(g->ref_params.data, g->params.data, sizeof(float) * (size_t)g->pl.numel);
        qwen3_model_init(&g->ref_model, &g->pl, &g->ref_params, &g->be);
    }
}

static void grpo_teardown(grpo *g) {
    if (g->rollout) rollout_engine_free(g->rollout);
    if (g->have_ref) { qwen3_model_free(&g->ref_model); param_set_free(&g->ref_params); }
    engine_free(&g->eng);
    qwen3_model_free(&g->model);
    param_set_free(&g->params);
    param_layout_free(&g->pl);
    if (g->have_train) rlc_dataset_free(&g->train);
    if (g->have_val) rlc_dataset_free(&g->val);
    rlc_reward_free(&g->reward);
    rlc_tok_free(g->tok);
    free(g->run_dir);
    free(g->metrics_path);
}

int grpo_run(const rlc_train_config *c, int val_only) {
    grpo g;
    grpo_setup(&g, c, val_only);
    char *cfg_path = rlc_path_join(g.run_dir, val_only ? "eval_config.yaml" : "config.yaml");
    rlc_config_save(c, cfg_path);
    free(cfg_path);
    fprintf(stdout, "rlc: model %s: %lld parameters, %d layers; BLAS %s, %d threads\n", c->actor_rollout_ref.model.path,
            (long long)g.pl.numel, g.mcfg.num_hidden_layers, g.be.blas_core, g.be.n_threads);

    if (val_only) {
        metrics m = {0};
        double t = rlc_now();
        validate(&g, &m);
        mset(&m, "timing_s/testing", rlc_now() - t);
        append_metrics(&g, &m);
        char *line = metrics_json(&m);
        fprintf(stdout, "%s\n", line);
        free(line);
        free(m.kv);
        grpo_teardown(&g);
        return 0;
    }

    // resume
    const char *rm = c->trainer.resume_mode;
    int64_t resumed = -1;
    if (!strcmp(rm, "auto")) {
        int64_t s = find_latest_checkpoint(&g);
        if (s >= 0) {
            char *d = step_dir(&g, s);
            load_checkpoint(&g, d);
            free(d);
            resumed = s;
        }
    } else if (!strcmp(rm, "resume_path")) {
        if (!c->trainer.resume_from_path) rlc_die("config: trainer.resume_mode=resume_path needs trainer.resume_from_path");
        load_checkpoint(&g, c->trainer.resume_from_path);
        resumed = g.global_step;
    }
    if (resumed >= 0) {
        truncate_metrics(&g, resumed);
        fprintf(stdout, "rlc: resumed from global_step_%lld (epoch %lld, batch %lld)\n", (long long)resumed, (long long)g.epoch,
                (long long)g.batch_in_epoch);
    } else if (rlc_file_exists(g.metrics_path)) {
        truncate_metrics(&g, -1);   // a fresh run starts a fresh log
    }

    rollout_config rc;
    rollout_cfg_from(&g, &rc, 0);
    g.rollout = rollout_engine_new(&g.model, &rc);

    if (c->trainer.val_before_train && g.have_val && g.global_step == 0) {
        metrics m = {0};
        double t = rlc_now();
        validate(&g, &m);
        mset(&m, "timing_s/testing", rlc_now() - t);
        mset(&m, "training/global_step", 0);
        append_metrics(&g, &m);
        console_line(&g, &m);
        free(m.kv);
    }

    int64_t *perm = rlc_malloc(sizeof(int64_t) * (size_t)g.train.n);
    int64_t perm_epoch = -1;
    int64_t B = c->data.train_batch_size;
    while (g.global_step < g.total_steps) {
        if (perm_epoch != g.epoch) { epoch_order(&g, g.epoch, perm); perm_epoch = g.epoch; }
        metrics m = {0};
        int64_t epoch = g.epoch;
        train_step(&g, perm + g.batch_in_epoch * B, &m);
        int last = g.global_step >= g.total_steps;
        if (c->trainer.test_freq > 0 && g.have_val && (g.global_step % c->trainer.test_freq == 0 || last)) {
            double t = rlc_now();
            validate(&g, &m);
            mset(&m, "timing_s/testing", rlc_now() - t);
        }
        mset(&m, "training/global_step", (double)g.global_step);
        mset(&m, "training/epoch", (double)epoch);
        append_metrics(&g, &m);
        console_line(&g, &m);
        free(m.kv);
    }
    free(perm);
    // The curves a person looks at.
    const char *keys[] = {"critic/score/mean", "val-core/openai/gsm8k/acc/mean@1", "response_length/mean", "actor/kl_loss",
                          "actor/entropy", "actor/grad_norm"};
    char *svg = rlc_path_join(g.run_dir, "curves.svg");
    plot_metrics_file(g.metrics_path, svg, "rlc GRPO", "training/global_step", keys, 6);
    fprintf(stdout, "rlc: done: %lld steps; metrics %s, curves %s\n", (long long)g.global_step, g.metrics_path, svg);
    free(svg);
    grpo_teardown(&g);
    return 0;
}
