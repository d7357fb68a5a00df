// ppo.c: one training step as verl's RayPPOTrainer.fit() body, one function per phase (see ppo.h). Each phase
// reads and fills the step batch (step_batch.h); the roles' passes run through their workers (worker.h).
#include "trainer/ppo.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "core/rng.h"
#include "rl/agg.h"
#include "rl/dapo.h"
#include "rollout/agent.h"
#include "rl/value_loss.h"
#include "trainer/run_state.h"

// ---------------------------------------------------------------------------------------------
// gen + reward: rollout the prompts, pack prompt ++ response, score the decoded responses

void ppo_rollout_config(const ppo_trainer *g, rollout_config *rc, int val) {
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
    if (kv_dtype_parse(c->actor_rollout_ref.rollout.kv_cache_dtype, &rc->kv_cache_dtype))   // choices checked on load
        rlc_die("config: actor_rollout_ref.rollout.kv_cache_dtype='%s', expected fp32 or bf16",
                c->actor_rollout_ref.rollout.kv_cache_dtype);
    if (c->actor_rollout_ref.rollout.max_num_seqs > 0) rc->max_num_seqs = (int)c->actor_rollout_ref.rollout.max_num_seqs;
    const rlc_tok_special *sp = rlc_tok_specials(g->tok);
    rc->stop_ids = sp->stop_ids;
    rc->n_stop_ids = sp->n_stop;
    rc->progress = isatty(2) && !g->prog.tty;   // the trainer's own progress line shows the generation phase
}

void ppo_generate(ppo_trainer *g, rollout_engine *re, const int64_t *rows, int n_prompts, const rlc_dataset *ds,
                  uint64_t stream_base, step_batch *sb, double *t_gen) {
    if (g->agent_loop == AGENT_TOOL) { ppo_generate_agent(g, re, rows, n_prompts, ds, stream_base, sb, t_gen); return; }
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
    const int B = n_prompts * n;
    CHECK_EQ(rr.n_samples, B, "rollout samples");
    int64_t T = 0, Tr = 1;
    for (int i = 0; i < B; i++) {
        const rollout_sample *s = &rr.samples[i];
        T += ps[s->prompt].len + s->len;
        if (s->len > Tr) Tr = s->len;
    }
    step_batch_alloc(sb, n_prompts, n, T, Tr);
    int64_t off = 0;
    for (int i = 0; i < B; i++) {
        const rollout_sample *s = &rr.samples[i];
        sb->ds_index[i] = rows[s->prompt];
        sb->finish[i] = s->finish;
        off = step_batch_put(sb, i, off, ps[s->prompt].ids, ps[s->prompt].len, s->ids, s->len, s->logprobs);
    }
    rollout_result_free(&rr);
    free(ps);
}

void ppo_score(ppo_trainer *g, const rlc_dataset *ds, step_batch *sb) {
    int B = sb->B;
    rlc_reward_request *req = rlc_calloc((size_t)B, sizeof *req);
    sb->res = rlc_calloc((size_t)B, sizeof *sb->res);
    char **texts = rlc_calloc((size_t)B, sizeof(char *));
    for (int i = 0; i < B; i++) {
        const rlc_prompt *pr = &ds->items[sb->ds_index[i]];
        texts[i] = rlc_tok_decode_str(g->tok, sb->tokens + sb->cu[i] + sb->plen[i], sb->rlen[i], 1);
        req[i].data_source = pr->data_source;
        req[i].response = texts[i];
        req[i].ground_truth = pr->ground_truth ? pr->ground_truth : "";
        req[i].extra_info = pr->extra_info_json;
    }
    // a trajectory the environment scored keeps that score (and pred); the others go through the reward function
    int nr = 0;
    int *idx = rlc_malloc(sizeof(int) * (size_t)(B > 0 ? B : 1));
    for (int i = 0; i < B; i++)
        if (!(sb->agent && sb->agent[i].has_score)) { req[nr] = req[i]; idx[nr++] = i; }
    rlc_reward_result *rr = rlc_calloc((size_t)(nr > 0 ? nr : 1), sizeof *rr);
    if (nr > 0) rlc_reward_compute(&g->reward, nr, req, rr);
    for (int k = 0; k < nr; k++) sb->res[idx[k]] = rr[k];
    for (int i = 0; sb->agent && i < B; i++)
        if (sb->agent[i].has_score) sb->res[i].score = sb->agent[i].score;
    free(rr);
    free(idx);
    sb->score = rlc_malloc(sizeof(float) * (size_t)B);
    for (int i = 0; i < B; i++) {
        sb->score[i] = (float)sb->res[i].score;
        free(texts[i]);
    }
    free(texts);
    free(req);
}

// ---------------------------------------------------------------------------------------------
// update_actor: the PPO policy loss of a micro-batch, in verl v1's padded micro-batch layout

typedef struct {
    const ppo_trainer *g;
    const step_batch *sb;
    rlc_actor_metrics *am;
    const float *is_w;            // (B, Tr) rollout IS weights (decoupled rollout correction) or NULL
} actor_ctx;

// bypass_mode skips the old_log_prob pass, where actor/entropy and the rollout-vs-training metrics come from; verl's
// actor reports them per micro-batch instead (Metric(MEAN)): actor/entropy (agg_loss of the micro-batch's entropy,
// without global batch info) when the update computes entropy, and the bypass_mode loss's rollout_corr/* metrics
// between the current log-probs and the rollout's (old holds the rollout's here). Arrays (nb, Tm).
static void bypass_micro_metrics(rlc_actor_metrics *am, const ppo_trainer *g, const float *lp, const float *rollout,
                                 const float *ent, const float *mask, int nb, int64_t Tm) {
    double msum = 0;
    for (int64_t i = 0; i < (int64_t)nb * Tm; i++) msum += mask[i] != 0;
    if (msum == 0) return;   // (verl raises on an empty micro-batch mask; rlc's responses have a token)
    if (ent) {
        rl_batch_info gbi = {1, 0, 0, g->cfg->actor_rollout_ref.actor.loss_scale_factor};
        if (!isfinite(gbi.loss_scale_factor)) gbi.loss_scale_factor = 0;
        rlc_actor_metrics_x(am, "actor/entropy", rl_agg_loss(ent, mask, nb, Tm, g->loss_cfg.agg, &gbi));
    }
    rl_rc_metrics *met = rlc_calloc(1, sizeof *met);
    rl_rollout_corr_bypass_metrics(met, lp, rollout, mask, nb, Tm, &g->loss_cfg.rc);
    for (int k = 0; k < met->n; k++) {
        char key[128];
        snprintf(key, sizeof key, "rollout_corr/%s", met->key[k]);
        rlc_actor_metrics_x(am, key, met->val[k]);
    }
    free(met);
    rlc_actor_metrics_x_done(am);
}

// The keys bypass_micro_metrics reports, registered in a fixed order (from the config alone, so every rank's list
// is the same): the metrics of a one-token micro-batch.
static void bypass_register_metrics(rlc_actor_metrics *am, const ppo_trainer *g) {
    if (g->want_entropy_update) rlc_actor_metrics_key(am, "actor/entropy");
    const float zero = 0.0f, one = 1.0f;
    rl_rc_metrics *met = rlc_calloc(1, sizeof *met);
    rl_rollout_corr_bypass_metrics(met, &zero, &zero, &one, 1, 1, &g->loss_cfg.rc);
    for (int k = 0; k < met->n; k++) {
        char key[128];
        snprintf(key, sizeof key, "rollout_corr/%s", met->key[k]);
        rlc_actor_metrics_key(am, key);
    }
    free(met);
}

static double actor_loss(void *user, const int *rows, double G, const engine_micro *mb) {
    actor_ctx *lc = user;
    const step_batch *sb = lc->sb;
    const ppo_trainer *g = lc->g;
    int nb = mb->n_seqs;
    int64_t Tm = 1;   // the micro-batch's widest response (verl v1 pads each micro-batch to it)
    for (int s = 0; s < nb; s++) {
        int i = rows[s];
        if (sb->rlen[i] > Tm) Tm = sb->rlen[i];
    }
    size_t n = (size_t)nb * (size_t)Tm;
    float *lp = rlc_calloc(n, sizeof(float)), *old = rlc_calloc(n, sizeof(float)), *adv = rlc_calloc(n, sizeof(float));
    float *mask = rlc_calloc(n, sizeof(float)), *dlp = rlc_calloc(n, sizeof(float));
    float *ref = sb->ref_lp ? rlc_calloc(n, sizeof(float)) : NULL;
    float *ent = mb->entropy ? rlc_calloc(n, sizeof(float)) : NULL;
    float *dent = mb->entropy ? rlc_calloc(n, sizeof(float)) : NULL;
    float *isw = lc->is_w ? rlc_calloc(n, sizeof(float)) : NULL;
    for (int s = 0; s < nb; s++) {
        int i = rows[s];
        int64_t base = mb->cu_seqlens[s] + sb->plen[i] - 1;   // local to the micro-batch
        for (int64_t k = 0; k < sb->rlen[i]; k++) {
            size_t o = (size_t)s * Tm + k, go = (size_t)i * sb->Tr + k;
            lp[o] = mb->logp[base + k];
            old[o] = sb->old_lp[go];
            adv[o] = sb->adv[go];
            mask[o] = sb->mask[go];
            if (ref) ref[o] = sb->ref_lp[go];
            if (ent) ent[o] = mb->entropy[base + k];
            if (isw) isw[o] = lc->is_w[go];
        }
    }
    rl_batch_info gbi = {1, mb->global_tokens, G, g->cfg->actor_rollout_ref.actor.loss_scale_factor};
    if (!isfinite(gbi.loss_scale_factor)) gbi.loss_scale_factor = 0;   // null: the micro-batch width
    rl_loss_out out;
    rl_ppo_loss(&out, dlp, dent, lp, old, g->loss_cfg.use_kl_loss ? ref : NULL, adv, ent, mask, isw, nb, Tm, &g->loss_cfg,
                &gbi);
    for (int s = 0; s < nb; s++) {
        int i = rows[s];
        int64_t base = mb->cu_seqlens[s] + sb->plen[i] - 1;
        for (int64_t k = 0; k < sb->rlen[i]; k++) {
            mb->dlogp[base + k] = dlp[(size_t)s * Tm + k];
            if (dent) mb->dentropy[base + k] = dent[(size_t)s * Tm + k];
        }
    }
    rlc_actor_metrics_micro(lc->am, out.pg_loss, out.entropy_loss, out.kl_loss, out.loss, out.pg.pg_clipfrac, out.pg.ppo_kl,
                            out.pg.pg_clipfrac_lower);
    if (g->cfg->algorithm.rollout_correction.bypass_mode) bypass_micro_metrics(lc->am, g, lp, old, ent, mask, nb, Tm);
    lc->am->present |= out.pg.present;
    free(lp); free(old); free(adv); free(mask); free(dlp); free(ref); free(ent); free(dent); free(isw);
    return out.loss;
}

// End of an actor mini-batch: W > 1 reduces this mini-batch's micro-batch metrics over all ranks first (losses:
// global shares, summed; the clip fractions and ppo_kl: the mean over every rank's micro-batches).
static void actor_minibatch_end(void *user, dist_ctx *d, double grad_norm) {
    rlc_actor_metrics *am = ((actor_ctx *)user)->am;
    if (d) {
        double red[8] = {am->pg_loss, am->entropy_loss, am->kl_loss, am->loss, am->clipfrac, am->ppo_kl, am->clipfrac_lower,
                         (double)am->n_micro};
        dist_allreduce_f64(d, red, 8, DIST_SUM, "all-reduce of the actor metrics");
        am->pg_loss = red[0]; am->entropy_loss = red[1]; am->kl_loss = red[2]; am->loss = red[3];
        am->clipfrac = red[4]; am->ppo_kl = red[5]; am->clipfrac_lower = red[6]; am->n_micro = (int64_t)red[7];
        if (am->n_x > 0) {   // the micro-batch means: sums and counts over every rank's micro-batches
            double x[RLC_ACTOR_MAX_X + 1];
            memcpy(x, am->x_mb, sizeof(double) * (size_t)am->n_x);
            x[am->n_x] = (double)am->x_n_micro;
            dist_allreduce_f64(d, x, am->n_x + 1, DIST_SUM, "all-reduce of the actor's micro-batch metrics");
            memcpy(am->x_mb, x, sizeof(double) * (size_t)am->n_x);
            am->x_n_micro = (int64_t)x[am->n_x];
        }
    }
    rlc_actor_metrics_minibatch(am, grad_norm);
}

// ---------------------------------------------------------------------------------------------
// update_critic: the clipped value loss of a micro-batch (spec verl-ppo.md §1.5), reduced as verl reduces it

typedef struct {
    double mb_vf_loss, mb_clipfrac, mb_vpred;  // this mini-batch's sums over its micro-batches
    int64_t mb_micro;
    double s_vf_loss, s_grad_norm;             // sums over mini-batches
    double s_clipfrac, s_vpred;                // sums over micro-batches
    int64_t n_micro, n_mini;
} critic_metrics;

typedef struct {
    const ppo_trainer *g;
    const step_batch *sb;
    critic_metrics *cm;
} critic_ctx;

static double critic_loss(void *user, const int *rows, double G, const engine_micro *mb) {
    critic_ctx *cc = user;
    const step_batch *sb = cc->sb;
    const __typeof__(cc->g->cfg->critic) *k = &cc->g->cfg->critic;
    int nb = mb->n_seqs;
    int64_t Tm = 1;
    for (int s = 0; s < nb; s++)
        if (sb->rlen[rows[s]] > Tm) Tm = sb->rlen[rows[s]];
    size_t n = (size_t)nb * (size_t)Tm;
    float *vp = rlc_calloc(n, sizeof(float)), *vo = rlc_calloc(n, sizeof(float)), *ret = rlc_calloc(n, sizeof(float));
    float *mask = rlc_calloc(n, sizeof(float)), *dv = rlc_calloc(n, sizeof(float));
    for (int s = 0; s < nb; s++) {
        int i = rows[s];
        int64_t base = mb->cu_seqlens[s] + sb->plen[i] - 1;   // the value of response token k sits before it
        for (int64_t k2 = 0; k2 < sb->rlen[i]; k2++) {
            size_t o = (size_t)s * Tm + k2, go = (size_t)i * sb->Tr + k2;
            vp[o] = mb->logp[base + k2];
            vo[o] = sb->values[go];
            ret[o] = sb->returns[go];
            mask[o] = sb->mask[go];
        }
    }
    rl_agg_mode agg;
    if (rl_agg_mode_parse(k->loss_agg_mode, &agg) != 0) rlc_die("config: critic.loss_agg_mode '%s' is unknown", k->loss_agg_mode);
    rl_batch_info gbi = {1, mb->global_tokens, G, k->loss_scale_factor};
    if (!isfinite(gbi.loss_scale_factor)) gbi.loss_scale_factor = 0;   // null: the micro-batch width
    rl_value_loss_out out;
    rl_value_loss(&out, dv, vp, vo, ret, mask, nb, Tm, k->cliprange_value, agg, &gbi);
    for (int s = 0; s < nb; s++) {
        int i = rows[s];
        int64_t base = mb->cu_seqlens[s] + sb->plen[i] - 1;
        for (int64_t k2 = 0; k2 < sb->rlen[i]; k2++) mb->dlogp[base + k2] = dv[(size_t)s * Tm + k2];
    }
    cc->cm->mb_vf_loss += out.vf_loss;
    cc->cm->mb_clipfrac += out.vf_clipfrac;
    cc->cm->mb_vpred += out.vpred_mean;
    cc->cm->mb_micro++;
    free(vp); free(vo); free(ret); free(mask); free(dv);
    return out.vf_loss;
}

// End of a critic mini-batch: W > 1 first sums its micro-batch metrics over the ranks (vf_loss: every rank's share
// of the globally normalised loss; clip fraction and vpred_mean: then the mean over every rank's micro-batches).
static void critic_minibatch_end(void *user, dist_ctx *d, double grad_norm) {
    critic_metrics *cm = ((critic_ctx *)user)->cm;
    if (d) {
        double red[4] = {cm->mb_vf_loss, cm->mb_clipfrac, cm->mb_vpred, (double)cm->mb_micro};
        dist_allreduce_f64(d, red, 4, DIST_SUM, "all-reduce of the critic metrics");
        cm->mb_vf_loss = red[0]; cm->mb_clipfrac = red[1]; cm->mb_vpred = red[2]; cm->mb_micro = (int64_t)red[3];
    }
    cm->s_vf_loss += cm->mb_vf_loss;
    cm->s_clipfrac += cm->mb_clipfrac;
    cm->s_vpred += cm->mb_vpred;
    cm->n_micro += cm->mb_micro;
    cm->mb_vf_loss = cm->mb_clipfrac = cm->mb_vpred = 0;
    cm->mb_micro = 0;
    cm->s_grad_norm += grad_norm;
    cm->n_mini++;
}

// critic/values/*, critic/vf_explained_var (verl compute_data_metrics with use_critic): over the valid tokens,
// 1 - Var(returns - values) / (Var(returns) + 1e-5) with unbiased variances.
static void critic_data_metrics(const step_batch *sb, rlc_metrics *m) {
    const size_t BT = (size_t)sb->B * (size_t)sb->Tr;
    double n = 0, sv = 0, mx = -INFINITY, mn = INFINITY, sr = 0, sd = 0;
    for (size_t i = 0; i < BT; i++)
        if (sb->mask[i] != 0) {
            double v = sb->values[i];
            n++;
            sv += v;
            if (v > mx) mx = v;
            if (v < mn) mn = v;
            sr += sb->returns[i];
            sd += (double)(sb->returns[i] - sb->values[i]);
        }
    if (n == 0) return;
    double mr = sr / n, md = sd / n, vr = 0, vd = 0;
    for (size_t i = 0; i < BT; i++)
        if (sb->mask[i] != 0) {
            double r = sb->returns[i] - mr, e = (double)(sb->returns[i] - sb->values[i]) - md;
            vr += r * r;
            vd += e * e;
        }
    vr = n > 1 ? vr / (n - 1) : NAN;
    vd = n > 1 ? vd / (n - 1) : NAN;
    rlc_metrics_set(m, "critic/values/mean", sv / n);
    rlc_metrics_set(m, "critic/values/max", mx);
    rlc_metrics_set(m, "critic/values/min", mn);
    rlc_metrics_set(m, "critic/vf_explained_var", 1.0 - vd / (vr + 1e-5));
}

// ---------------------------------------------------------------------------------------------
// data metrics (verl compute_data_metrics) and global_seqlen/* (log_seqlen_unbalance, one rank)

// part: the data-parallel ranks' balanced parts of the step batch, NULL: one rank.
static void data_metrics(const step_batch *sb, const rlc_partition *part, rlc_metrics *m) {
    int B = sb->B;
    int64_t Tr = sb->Tr;
    float *sc = rlc_malloc(sizeof(float) * (size_t)B), *rw = rlc_malloc(sizeof(float) * (size_t)B);
    for (int i = 0; i < B; i++) {
        double s = 0, r = 0;
        for (int64_t k = 0; k < Tr; k++) { s += sb->scores[(size_t)i * Tr + k]; r += sb->rewards[(size_t)i * Tr + k]; }
        sc[i] = (float)s;
        rw[i] = (float)r;
    }
    // v1 stores samples unpadded: clip ratios compare with the batch's widest response / prompt.
    rlc_data_metrics(m, sc, rw, sb->adv, sb->returns, sb->mask, sb->rlen, sb->plen, B, Tr, 0, 0);
    free(sc);
    free(rw);
    int64_t *len = rlc_malloc(sizeof(int64_t) * (size_t)B), *items = rlc_malloc(sizeof(int64_t) * (size_t)B);
    for (int i = 0; i < B; i++) { len[i] = sb->plen[i] + sb->rlen[i]; items[i] = i; }
    int64_t offs[2] = {0, B};
    rlc_partition one = {1, offs, items};   // one data-parallel rank: the balanced partition is the batch
    double u[6];
    rlc_seqlen_unbalance(u, len, B, part ? part : &one);
    static const char *names[6] = {"global_seqlen/min", "global_seqlen/max", "global_seqlen/minmax_diff",
                                   "global_seqlen/balanced_min", "global_seqlen/balanced_max", "global_seqlen/mean"};
    for (int j = 0; j < 6; j++) rlc_metrics_set(m, names[j], u[j]);
    free(len);
    free(items);
}

// RLC_GRPO_DUMP: one JSON file per step with what an independent reimplementation of the update needs
// (the sequences, prompt lengths, sequence scores and groups), for tests/py/grpo_ref.py.
static void dump_step(const ppo_trainer *g, const step_batch *sb) {
    rlc_strbuf b = {0};
    rlc_sb_printf(&b, "{\"step\": %lld, \"n\": %d, \"seqs\": [", (long long)(g->global_step + 1), sb->n);
    for (int i = 0; i < sb->B; i++) {
        rlc_sb_printf(&b, "%s{\"plen\": %lld, \"score\": %.9g, \"group\": %d, \"ids\": [", i ? ", " : "",
                      (long long)sb->plen[i], (double)sb->score[i], i / sb->n);
        for (int32_t t = sb->cu[i]; t < sb->cu[i + 1]; t++) rlc_sb_printf(&b, "%s%d", t > sb->cu[i] ? "," : "", sb->tokens[t]);
        rlc_sb_puts(&b, "]");
        if (sb->agent) {   // multi-turn: the response mask (1 on sampled tokens)
            rlc_sb_puts(&b, ", \"mask\": [");
            for (int64_t k = 0; k < sb->rlen[i]; k++) rlc_sb_printf(&b, "%s%d", k ? "," : "", sb->mask[(size_t)i * sb->Tr + k] != 0);
            rlc_sb_puts(&b, "]");
        }
        rlc_sb_puts(&b, "}");
    }
    rlc_sb_puts(&b, "]}\n");
    rlc_mkdirs(g->dump_dir);
    char name[64];
    snprintf(name, sizeof name, "step_%lld.json", (long long)(g->global_step + 1));
    char *path = rlc_path_join(g->dump_dir, name);
    if (rlc_write_file_atomic(path, b.s, b.n) != 0) rlc_die("%s: cannot write: %s", path, strerror(errno));
    free(path);
    rlc_sb_free(&b);
}

// RLC_GRPO_DUMP with dynamic sampling or the overlong penalty: each generated batch of a step (gen_<step>_<k>.json):
// its sequences with dataset row, response length, shaped score, the reward extras and the filter's keep per group,
// for tests/py/dapo_train_ref.py.
static void dump_gen_batch(const ppo_trainer *g, const step_batch *sb, int k, const uint8_t *keep) {
    rlc_strbuf b = {0};
    rlc_sb_printf(&b, "{\"step\": %lld, \"batch\": %d, \"n\": %d, \"keep\": [", (long long)(g->global_step + 1), k, sb->n);
    for (int gi = 0; gi < sb->n_prompts; gi++) rlc_sb_printf(&b, "%s%d", gi ? "," : "", keep[gi]);
    rlc_sb_puts(&b, "], \"seqs\": [");
    for (int i = 0; i < sb->B; i++) {
        rlc_sb_printf(&b, "%s{\"row\": %lld, \"plen\": %lld, \"rlen\": %lld, \"score\": %.9g, \"extra\": {", i ? ", " : "",
                      (long long)sb->ds_index[i], (long long)sb->plen[i], (long long)sb->rlen[i], (double)sb->score[i]);
        const rlc_reward_result *r = sb->res ? &sb->res[i] : NULL;
        for (int e = 0; r && e < r->n_extra; e++)
            rlc_sb_printf(&b, "%s\"%s\": %.17g", e ? ", " : "", r->extra_keys[e], r->extra_vals[e]);
        rlc_sb_puts(&b, "}, \"ids\": [");
        for (int32_t t = sb->cu[i]; t < sb->cu[i + 1]; t++) rlc_sb_printf(&b, "%s%d", t > sb->cu[i] ? "," : "", sb->tokens[t]);
        rlc_sb_puts(&b, "]}");
    }
    rlc_sb_puts(&b, "]}\n");
    rlc_mkdirs(g->dump_dir);
    char name[96];
    snprintf(name, sizeof name, "gen_%lld_%d.json", (long long)(g->global_step + 1), k);
    char *path = rlc_path_join(g->dump_dir, name);
    if (rlc_write_file_atomic(path, b.s, b.n) != 0) rlc_die("%s: cannot write: %s", path, strerror(errno));
    free(path);
    rlc_sb_free(&b);
}

static double mget(const rlc_metrics *m, const char *key) { return rlc_metrics_get(m, key, NULL); }
static void console_line(const ppo_trainer *g, const rlc_metrics *m);

// One step's metrics to every logger (verl's Tracking.log at global_step): metrics.jsonl (always), TensorBoard
// (trainer.logger), and the console line, which replaces the terminal's progress line.
void ppo_log_step(ppo_trainer *g, const rlc_metrics *m) {
    if (g->root) rlc_metrics_append_jsonl(m, g->metrics_path);
    if (g->tb) tb_write_metrics(g->tb, m, g->global_step);
    progress_clear(&g->prog);
    console_line(g, m);
    if (g->prog.tty) progress_step(&g->prog, g->global_step, 0, NULL, NULL);   // elsewhere the console line is the log
}

static void console_line(const ppo_trainer *g, const rlc_metrics *m) {
    const char *vkey = NULL;
    for (int64_t i = 0; i < m->n; i++)
        if (strncmp(m->keys[i], "val-core/", 9) == 0) { vkey = m->keys[i]; break; }
    fprintf(stdout, "step %lld/%lld", (long long)g->global_step, (long long)g->total_steps);
    int found;
    double sc = rlc_metrics_get(m, "critic/score/mean", &found);
    if (found)
        fprintf(stdout, " | score %.3f | len %.1f | pg %.4f | gn %.3f | lr %.3g | ent %.3f", sc, mget(m, "response_length/mean"),
                mget(m, "actor/pg_loss"), mget(m, "actor/grad_norm"), mget(m, "actor/lr"), mget(m, "actor/entropy"));
    if (found && g->loss_cfg.use_kl_loss) fprintf(stdout, " | kl %.4f", mget(m, "actor/kl_loss"));
    if (vkey) fprintf(stdout, " | %s %.3f", vkey, mget(m, vkey));
    if (found)
        fprintf(stdout, " | gen %.1fs upd %.1fs step %.1fs | %.0f tok/s", mget(m, "timing_s/gen"), mget(m, "timing_s/update_actor"),
                mget(m, "timing_s/step"), mget(m, "perf/throughput"));
    rlc_metrics_get(m, "timing_s/testing", &found);
    if (found) fprintf(stdout, " | testing %.1fs", mget(m, "timing_s/testing"));
    fputc('\n', stdout);
    fflush(stdout);
}

// ---------------------------------------------------------------------------------------------
// the phases of one step

enum { T_GEN, T_ENV, T_REWARD, T_OLD, T_REF, T_VALUES, T_ADV, T_CRITIC, T_UPDATE, T_SAVE, T_WEIGHTS, T_STEP, T_N };

typedef struct {
    step_batch sb;
    rlc_partition part;           // W > 1: balance_batch over the whole step batch (the log-prob passes' parts)
    int *my_rows, n_my;           // W > 1: this rank's part; NULL / 0: all rows
    float *is_w;                  // (B, Tr) rollout IS weights of the decoupled rollout correction, or NULL
    double tm[T_N];
    int have[T_N];
} step_state;

void ppo_epoch_order(const ppo_trainer *g, int64_t epoch, int64_t *perm) {
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

int64_t ppo_gen_batch_size(const rlc_train_config *c) {
    int64_t gbs;
    rlc_config_dapo(c, NULL, NULL, &gbs);
    return c->algorithm.filter_groups.enable ? gbs : c->data.train_batch_size;
}

// The data loader (drop_last): the next batch of gbs prompts in the epoch's order, advancing the position (an epoch
// boundary rolls over here, so a checkpoint taken at the end of an epoch resumes at the next one). NULL once
// trainer.total_epochs are done.
static const int64_t *next_gen_rows(ppo_trainer *g, int64_t gbs) {
    if (g->epoch >= g->cfg->trainer.total_epochs) return NULL;
    if (!g->perm) { g->perm = rlc_malloc(sizeof(int64_t) * (size_t)g->train.n); g->perm_epoch = -1; }
    if (g->perm_epoch != g->epoch) { ppo_epoch_order(g, g->epoch, g->perm); g->perm_epoch = g->epoch; }
    const int64_t *rows = g->perm + g->batch_in_epoch * gbs;
    if (++g->batch_in_epoch >= g->steps_per_epoch) { g->epoch++; g->batch_in_epoch = 0; }
    return rows;
}

// gen + reward, as the DAPO recipe's loop (spec verl-ppo.md §3.2): each data-loader batch is generated (W > 1: this
// rank's contiguous chunk), scored with the overlong penalty (reward_model.overlong_buffer) and gathered; with
// algorithm.filter_groups the groups whose metric is equal across the group are dropped and more batches generated
// until train_batch_size groups remain (the first ones are kept). Timers add over the batches. The sampling
// stream of a prompt is named by (step, batch of the step, dataset row), so a resumed run repeats the same samples.
// Returns 0 when the epochs ran out first.
static int phase_gen_reward(ppo_trainer *g, step_state *s, rlc_metrics *m) {
    const rlc_train_config *c = g->cfg;
    dapo_accumulator acc;
    dapo_overlong_cfg ov;
    rlc_config_dapo(c, &acc, &ov, NULL);
    const int64_t gbs = ppo_gen_batch_size(c);
    if (gbs % g->W != 0)
        rlc_die("config: data.gen_batch_size=%lld must be a multiple of the number of ranks %d", (long long)gbs, g->W);
    const char *metric = c->algorithm.filter_groups.metric;
    if (acc.enable && dapo_metric_kind_of(metric) == DAPO_METRIC_SEQ_FINAL_REWARD && g->step_cfg.use_kl_in_reward)
        rlc_die("config: algorithm.filter_groups.metric=seq_final_reward with algorithm.use_kl_in_reward=true is not "
                "supported (the filter runs before the log-prob passes); use seq_reward or a reward key");
    const int np = (int)(gbs / g->W);
    const int n = (int)c->actor_rollout_ref.rollout.n;
    if (g->W > 1) dist_reset_counters(g->d);
    step_batch *bs = NULL;
    uint8_t **keeps = NULL;
    int nb = 0, done = 0;
    int64_t num_gen = 0;
    while (!done) {
        const int64_t *rows = next_gen_rows(g, gbs);
        if (!rows) {
            fprintf(stdout, "rlc: trainer.total_epochs ran out after %d generated batches while collecting step %lld's "
                    "groups; that partial batch is dropped\n", nb, (long long)(g->global_step + 1));
            for (int k = 0; k < nb; k++) { step_batch_free(&bs[k]); free(keeps[k]); }
            free(bs);
            free(keeps);
            return 0;
        }
        bs = rlc_realloc(bs, sizeof *bs * (size_t)(nb + 1));
        keeps = rlc_realloc(keeps, sizeof *keeps * (size_t)(nb + 1));
        step_batch *sb = &bs[nb];
        progress_phase(&g->prog, g->global_step + 1, "generating");
        // the first batch keeps the stream names of a run without dynamic sampling
        uint64_t base = ((uint64_t)(g->global_step + 1) << 32) ^ ((uint64_t)nb << 48);
        double tg, env0 = g->env ? g->env->wait_s : 0;
        ppo_generate(g, g->rollout, rows + (size_t)g->R * np, np, &g->train, base, sb, &tg);
        s->tm[T_GEN] += tg;
        if (g->env) {   // timing_s/env: wall time in environment I/O (overlaps generation in the continuous engine)
            s->tm[T_ENV] += g->env->wait_s - env0;
            s->have[T_ENV] = 1;
        }
        double t = rlc_now();
        progress_phase(&g->prog, g->global_step + 1, "reward");
        ppo_score(g, &g->train, sb);
        if (ov.enable) {
            dapo_apply_overlong(sb->res, sb->rlen, sb->B, &ov);
            for (int i = 0; i < sb->B; i++) sb->score[i] = (float)sb->res[i].score;
        }
        double *mv = NULL;
        if (acc.enable) {   // the filter metric per response (token-level scores: the score on one position)
            mv = rlc_malloc(sizeof(double) * (size_t)gbs * (size_t)n);
            double *loc = g->W > 1 ? rlc_malloc(sizeof(double) * (size_t)sb->B) : mv;
            dapo_metric_values(loc, metric, sb->B, sb->res, sb->score, sb->score, 1);
            if (g->W > 1) {
                dist_allgather(g->d, loc, mv, sizeof(double) * (size_t)sb->B, "all-gather of the filter metric");
                free(loc);
            }
        }
        if (g->W > 1) {
            step_batch loc = *sb;
            step_batch_gather(g->d, &loc, sb);
            step_batch_free(&loc);
        }
        s->tm[T_REWARD] += rlc_now() - t;
        keeps[nb] = rlc_malloc((size_t)gbs);
        done = dapo_accumulator_add(&acc, keeps[nb], mv, gbs, &num_gen);
        if (g->dump_dir && g->root && (acc.enable || ov.enable)) dump_gen_batch(g, sb, nb, keeps[nb]);
        free(mv);
        nb++;
    }
    s->have[T_GEN] = s->have[T_REWARD] = 1;
    if (nb == 1 && !acc.enable) {
        s->sb = bs[0];
    } else {
        step_batch_take_groups(&s->sb, bs, keeps, nb);
        for (int k = 0; k < nb; k++) step_batch_free(&bs[k]);
    }
    for (int k = 0; k < nb; k++) free(keeps[k]);
    free(bs);
    free(keeps);
    if (acc.enable) {
        rlc_metrics_set(m, "train/num_gen_batches", (double)num_gen);
        // v1's names for the same events (spec verl-ppo.md §3.2): groups filtered out, kept groups past train_batch_size
        rlc_metrics_set(m, "training/filter_groups/evicted_samples", (double)acc.last_evicted);
        rlc_metrics_set(m, "training/filter_groups/discarded_surplus_samples", (double)acc.last_surplus);
    }
    return 1;
}

// After gen + reward: the rollout dump (tests' oracle) and, W > 1, verl's balance_batch over the ranks for the
// log-prob passes (every rank holds the whole step batch, in the one-process order).
static void phase_balance(ppo_trainer *g, step_state *s) {
    if (g->dump_dir && g->root) dump_step(g, &s->sb);
    if (g->W > 1) {
        const int B = s->sb.B;
        int *all = rlc_malloc(sizeof(int) * (size_t)B);
        for (int i = 0; i < B; i++) all[i] = i;
        step_batch_balance(&s->part, &s->sb, all, B, g->W);
        free(all);
        s->n_my = (int)(s->part.offsets[g->R + 1] - s->part.offsets[g->R]);
        s->my_rows = rlc_malloc(sizeof(int) * (size_t)s->n_my);
        for (int i = 0; i < s->n_my; i++) s->my_rows[i] = (int)s->part.items[s->part.offsets[g->R] + i];
    }
}

// old_log_prob: the actor's log-probs and entropy at the rollout temperature (W > 1: on the full rollout copy of
// the weights, this rank's part, then the rows are shared), with actor/entropy and the rollout-vs-actor metrics.
static void phase_old_log_prob(ppo_trainer *g, step_state *s, rlc_metrics *m) {
    const __typeof__(g->cfg->actor_rollout_ref) *ar = &g->cfg->actor_rollout_ref;
    step_batch *sb = &s->sb;
    const size_t BT = (size_t)sb->B * (size_t)sb->Tr;
    if (g->cfg->algorithm.rollout_correction.bypass_mode) {   // old log-probs := the rollout's: no pass (2 policies)
        sb->old_lp = rlc_malloc(sizeof(float) * BT);
        memcpy(sb->old_lp, sb->rollout_lp, sizeof(float) * BT);
        return;
    }
    double t = rlc_now();
    progress_phase(&g->prog, g->global_step + 1, "old_log_prob");
    sb->old_lp = rlc_calloc(BT, sizeof(float));
    sb->entropy = rlc_calloc(BT, sizeof(float));
    worker_mb_cfg mc = {ar->rollout.log_prob_use_dynamic_bsz, ar->rollout.log_prob_micro_batch_size_per_gpu,
                        ar->rollout.log_prob_max_token_len_per_gpu, "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu"};
    worker_infer_logprobs(&g->actor, sb, s->my_rows, s->n_my, &mc, sb->old_lp, sb->entropy);
    if (g->W > 1) { step_batch_share_rows(g->d, &s->part, sb, sb->old_lp); step_batch_share_rows(g->d, &s->part, sb, sb->entropy); }
    s->tm[T_OLD] = rlc_now() - t;
    s->have[T_OLD] = 1;
    // actor/entropy: agg_loss over the whole step batch with no global info (D = 1, N = sum of the mask)
    rl_batch_info gbi = {1, 0, 0, ar->actor.loss_scale_factor};
    if (!isfinite(gbi.loss_scale_factor)) gbi.loss_scale_factor = 0;
    rlc_metrics_set(m, "actor/entropy", rl_agg_loss(sb->entropy, sb->mask, sb->B, sb->Tr, g->loss_cfg.agg, &gbi));
    // rollout vs actor: the same weights and kernels, so these measure only the kernel paths' rounding.
    if (ar->rollout.calculate_log_probs) rlc_rollout_probs_metrics(m, sb->old_lp, sb->rollout_lp, sb->mask, (int64_t)BT);
}

// ref: the reference model's log-probs (W > 1: on its sharded weights, this rank's part, then shared).
static void phase_ref(ppo_trainer *g, step_state *s) {
    if (!g->have_ref) return;
    const __typeof__(g->cfg->actor_rollout_ref.ref) *rf = &g->cfg->actor_rollout_ref.ref;
    step_batch *sb = &s->sb;
    double t = rlc_now();
    progress_phase(&g->prog, g->global_step + 1, "ref");
    sb->ref_lp = rlc_calloc((size_t)sb->B * (size_t)sb->Tr, sizeof(float));
    worker_mb_cfg mc = {rf->log_prob_use_dynamic_bsz, rf->log_prob_micro_batch_size_per_gpu, rf->log_prob_max_token_len_per_gpu,
                        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu"};
    worker_infer_logprobs(&g->ref, sb, s->my_rows, s->n_my, &mc, sb->ref_lp, NULL);
    if (g->W > 1) step_batch_share_rows(g->d, &s->part, sb, sb->ref_lp);
    s->tm[T_REF] = rlc_now() - t;
    s->have[T_REF] = 1;
}

// values: the pre-update critic's values at the positions before each response token (no grad).
static void phase_values(ppo_trainer *g, step_state *s) {
    if (!g->have_critic) return;
    const __typeof__(g->cfg->critic) *k = &g->cfg->critic;
    step_batch *sb = &s->sb;
    double t = rlc_now();
    progress_phase(&g->prog, g->global_step + 1, "values");
    sb->values = rlc_calloc((size_t)sb->B * (size_t)sb->Tr, sizeof(float));
    worker_mb_cfg mc = {k->use_dynamic_bsz, k->forward_micro_batch_size_per_gpu, k->forward_max_token_len_per_gpu,
                        "critic.forward_max_token_len_per_gpu"};
    worker_infer_values(&g->critic, sb, s->my_rows, s->n_my, &mc, sb->values);   // W > 1: this rank's part, then shared
    if (g->W > 1) step_batch_share_rows(g->d, &s->part, sb, sb->values);
    s->tm[T_VALUES] = rlc_now() - t;
    s->have[T_VALUES] = 1;
}

// Rollout correction (spec verl-ppo.md §5), in the advantage stage: the off-policy diagnostics rollout_corr/* between
// the old and the rollout log-probs whenever the rollout returned them; in decoupled mode (not bypass_mode) the IS
// weights the policy loss multiplies by, and the rejection mask, which rewrites the response mask (and the packed
// loss mask, so the global token counts follow) before the advantages.
static void phase_rollout_corr(ppo_trainer *g, step_state *s, rlc_metrics *m) {
    const rlc_train_config *c = g->cfg;
    step_batch *sb = &s->sb;
    if (!c->actor_rollout_ref.rollout.calculate_log_probs) return;
    const int B = sb->B;
    const int64_t Tr = sb->Tr;
    const size_t BT = (size_t)B * (size_t)Tr;
    // bypass_mode: old == rollout, and verl computes nothing here; the actor reports these per micro-batch, between
    // the current log-probs and the rollout's (bypass_micro_metrics)
    if (c->algorithm.rollout_correction.bypass_mode) return;
    rlc_rollout_corr_metrics(m, sb->old_lp, sb->rollout_lp, sb->mask, B, Tr);
    const rl_rollout_corr_cfg *rc = &g->loss_cfg.rc;
    if (!rl_rollout_corr_active(rc)) return;
    float *m2 = rlc_malloc(sizeof(float) * BT);
    rl_rc_metrics *met = rlc_calloc(1, sizeof *met);
    if (rc->is != RL_RC_IS_NONE) s->is_w = rlc_malloc(sizeof(float) * BT);
    rl_rollout_corr(s->is_w, m2, met, sb->old_lp, sb->rollout_lp, sb->mask, B, Tr, rc);
    for (int k = 0; k < met->n; k++) {
        char key[128];
        snprintf(key, sizeof key, "rollout_corr/%s", met->key[k]);
        rlc_metrics_set(m, key, met->val[k]);
    }
    for (int i = 0; i < B; i++)
        if (memcmp(m2 + (size_t)i * Tr, sb->mask + (size_t)i * Tr, sizeof(float) * (size_t)sb->rlen[i]) != 0)
            step_batch_mask_response(sb, i, m2 + (size_t)i * Tr);
    free(met);
    free(m2);
}

// adv: token-level scores, in-reward KL (optional), then the advantage estimator over groups of n, or GAE over
// the critic's values. (W > 1: every
// rank holds the whole batch and computes the same advantages, no communication.)
static void phase_adv(ppo_trainer *g, step_state *s, rlc_metrics *m) {
    step_batch *sb = &s->sb;
    const int B = sb->B;
    const size_t BT = (size_t)B * (size_t)sb->Tr;
    double t = rlc_now();
    sb->scores = rlc_malloc(sizeof(float) * BT);
    sb->rewards = rlc_malloc(sizeof(float) * BT);
    sb->adv = rlc_malloc(sizeof(float) * BT);
    sb->returns = rlc_malloc(sizeof(float) * BT);
    int64_t *group = rlc_malloc(sizeof(int64_t) * (size_t)B);
    for (int i = 0; i < B; i++) group[i] = i / sb->n;
    rl_step_metrics sm;
    if (g->use_gae)
        rl_step_advantages_gae(sb->scores, sb->rewards, sb->adv, sb->returns, &sm, sb->score, sb->rlen, sb->mask, sb->old_lp,
                               sb->ref_lp, sb->values, B, sb->Tr, &g->step_cfg, g->cfg->algorithm.gamma, g->cfg->algorithm.lam,
                               &g->kl_ctrl);
    else
        rl_step_advantages(sb->scores, sb->rewards, sb->adv, sb->returns, &sm, sb->score, sb->rlen, group, sb->mask,
                           sb->old_lp, sb->ref_lp, B, sb->Tr, &g->step_cfg, &g->kl_ctrl);
    free(group);
    if (g->step_cfg.use_kl_in_reward) {
        rlc_metrics_set(m, "actor/reward_kl_penalty", sm.reward_kl_penalty);
        rlc_metrics_set(m, "actor/reward_kl_penalty_coeff", sm.reward_kl_penalty_coeff);
    }
    s->tm[T_ADV] = rlc_now() - t;
    s->have[T_ADV] = 1;
}

// update_critic: PPO epochs of the value loss over the critic's mini-batches (critic.*), its own AdamW and schedule.
static void phase_update_critic(ppo_trainer *g, step_state *s, rlc_metrics *m) {
    if (!g->have_critic) return;
    const __typeof__(g->cfg->critic) *k = &g->cfg->critic;
    double t = rlc_now();
    critic_metrics cm;
    memset(&cm, 0, sizeof cm);
    critic_ctx ctx = {g, &s->sb, &cm};
    worker_loss L = {critic_loss, critic_minibatch_end, &ctx};
    worker_update_cfg uc = {
        .mini_seqs = k->ppo_mini_batch_size * s->sb.n, .epochs = k->ppo_epochs, .shuffle = k->shuffle,
        .seed = k->data_loader_seed, .dynamic = k->use_dynamic_bsz, .micro_seqs = k->ppo_micro_batch_size_per_gpu,
        .max_tokens = k->ppo_max_token_len_per_gpu, .key = "critic.ppo_max_token_len_per_gpu", .want_entropy = 0,
        .phase = "update_critic", .prog = &g->prog, .step = g->global_step,
    };
    worker_update_result r = worker_update(&g->critic, &s->sb, &uc, &L);
    // verl: vf_loss and loss summed over a mini-batch's micro-batches, then the mean over mini-batches; clip
    // fraction and vpred_mean: the mean over all micro-batches; grad_norm: the mean over mini-batches
    if (cm.n_mini > 0) {
        rlc_metrics_set(m, "critic/vf_loss", cm.s_vf_loss / (double)cm.n_mini);
        rlc_metrics_set(m, "critic/loss", cm.s_vf_loss / (double)cm.n_mini);
        rlc_metrics_set(m, "critic/grad_norm", cm.s_grad_norm / (double)cm.n_mini);
    }
    if (cm.n_micro > 0) {
        rlc_metrics_set(m, "critic/vf_clipfrac", cm.s_clipfrac / (double)cm.n_micro);
        rlc_metrics_set(m, "critic/vpred_mean", cm.s_vpred / (double)cm.n_micro);
    }
    rlc_metrics_set(m, "critic/lr", r.lr);
    if (r.n_nonfinite) rlc_metrics_set(m, "critic/nonfinite_grad_steps", r.n_nonfinite);
    s->tm[T_CRITIC] = rlc_now() - t;
    s->have[T_CRITIC] = 1;
}

// update_actor: verl updates the actor once critic_warmup <= global_steps, its 1-based step (so critic_warmup = k
// gives k - 1 critic-only steps; 0 and 1 both none).
// W > 1 then all-gathers the updated shards into the rollout copy of the weights (here rather than in
// update_weights because save_checkpoint, between the two, writes them).
static void phase_update_actor(ppo_trainer *g, step_state *s, rlc_metrics *m) {
    const rlc_train_config *c = g->cfg;
    const __typeof__(c->actor_rollout_ref.actor) *ac = &c->actor_rollout_ref.actor;
    if (c->trainer.critic_warmup > g->global_step + 1) return;
    double t = rlc_now();
    rlc_actor_metrics am;
    rlc_actor_metrics_init(&am);
    if (c->algorithm.rollout_correction.bypass_mode) bypass_register_metrics(&am, g);
    actor_ctx ctx = {g, &s->sb, &am, s->is_w};
    worker_loss L = {actor_loss, actor_minibatch_end, &ctx};
    worker_update_cfg uc = {
        .mini_seqs = ac->ppo_mini_batch_size * s->sb.n,   // verl: ppo_mini_batch_size * rollout.n sequences
        .epochs = ac->ppo_epochs, .shuffle = ac->shuffle, .seed = ac->data_loader_seed,
        .dynamic = ac->use_dynamic_bsz, .micro_seqs = ac->ppo_micro_batch_size_per_gpu,
        .max_tokens = ac->ppo_max_token_len_per_gpu, .key = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
        .want_entropy = g->want_entropy_update, .phase = "update_actor", .prog = &g->prog, .step = g->global_step,
    };
    if (g->global_step + 1 == g->nan_lr_step) g->eng.sched.base_lr = NAN;   // tests: a non-finite update
    worker_update_result r = worker_update(&g->actor, &s->sb, &uc, &L);
    if (g->have_fs) {   // (LoRA: the adapters are replicated, every rank already holds the updated ones)
        double t0 = rlc_now();
        fsdp_gather_full(&g->fs, g->fs.p, g->params.data, -1);
        rlc_metrics_set(m, "timing_s/gather_weights", rlc_now() - t0);
    }
    rlc_actor_metrics_put(&am, m, g->want_entropy_update, g->loss_cfg.use_kl_loss, g->loss_cfg.kl_loss_coef, r.lr);
    if (r.n_nonfinite) rlc_metrics_set(m, "actor/nonfinite_grad_steps", r.n_nonfinite);
    s->tm[T_UPDATE] = rlc_now() - t;
    s->have[T_UPDATE] = 1;
}

// save_checkpoint (with the data loader's position, advanced by gen) and update_weights.
static void phase_save_and_sync(ppo_trainer *g, step_state *s) {
    const rlc_train_config *c = g->cfg;
    g->global_step++;
    int last = g->global_step >= g->total_steps;
    if (c->trainer.save_freq > 0 && (g->global_step % c->trainer.save_freq == 0 || last)) {
        double t = rlc_now();
        progress_phase(&g->prog, g->global_step, "save_checkpoint");
        run_state_save(g);
        s->tm[T_SAVE] = rlc_now() - t;
        s->have[T_SAVE] = 1;
    }
    // update_weights: the rollout engine reads the trainer's weights in place (nothing to copy) unless it decodes
    // from a bf16 copy.
    double t = rlc_now();
    rollout_engine_sync_weights(g->rollout);
    s->tm[T_WEIGHTS] = rlc_now() - t;
    s->have[T_WEIGHTS] = 1;
}

// timing_s/*, perf/*, memory, rank 0's view of the step's communication, data metrics.
static void step_metrics(ppo_trainer *g, step_state *s, rlc_metrics *m) {
    static const char *tnames[T_N] = {"gen", "env", "reward", "old_log_prob", "ref", "values", "adv", "update_critic",
                                      "update_actor", "save_checkpoint", "update_weights", "step"};
    const int W = g->W;
    const char *names[T_N];
    double secs[T_N];
    int nt = 0;
    for (int k = 0; k < T_N; k++)
        if (s->have[k]) { names[nt] = tnames[k]; secs[nt++] = s->tm[k]; }
    int64_t resp_tokens = 0;
    for (int i = 0; i < s->sb.B; i++) resp_tokens += s->sb.rlen[i];
    // one process = one "GPU" for perf/throughput (timings are rank 0's)
    rlc_timing_metrics(m, nt, names, secs, resp_tokens, s->sb.T, W);
    rlc_metrics_set(m, "actor/perf/cpu_memory_used_gb", (double)rlc_current_rss() / (double)(1 << 30));
    if (W > 1) {
        rlc_metrics_set(m, "dist/world_size", W);
        rlc_metrics_set(m, "dist/comm_bytes", (double)dist_bytes_total(g->d));
        rlc_metrics_set(m, "dist/allgather_bytes", (double)g->d->bytes[DIST_K_ALLGATHER]);
        rlc_metrics_set(m, "dist/reduce_scatter_bytes", (double)g->d->bytes[DIST_K_REDUCE_SCATTER]);
        rlc_metrics_set(m, "dist/comm_s", g->d->comm_seconds);
        rlc_metrics_set(m, "dist/comm_fraction", s->tm[T_STEP] > 0 ? g->d->comm_seconds / s->tm[T_STEP] : 0);
    }
    data_metrics(&s->sb, W > 1 ? &s->part : NULL, m);
    ppo_agent_metrics(&s->sb, m, "");
    if (g->have_critic) critic_data_metrics(&s->sb, m);
}

// One training step in verl's order: gen -> reward -> old_log_prob -> ref -> values -> adv -> update_critic ->
// update_actor -> save_checkpoint -> update_weights (the "step" timer); testing follows outside it (the caller).
int ppo_train_step(ppo_trainer *g, rlc_metrics *m) {
    step_state s;
    memset(&s, 0, sizeof s);
    double t_step0 = rlc_now();
    if (!phase_gen_reward(g, &s, m)) return 0;
    phase_balance(g, &s);
    phase_old_log_prob(g, &s, m);
    phase_ref(g, &s);
    phase_values(g, &s);
    phase_rollout_corr(g, &s, m);
    phase_adv(g, &s, m);
    phase_update_critic(g, &s, m);
    phase_update_actor(g, &s, m);
    phase_save_and_sync(g, &s);
    s.tm[T_STEP] = rlc_now() - t_step0;
    s.have[T_STEP] = 1;
    step_metrics(g, &s, m);
    if (g->W > 1) rlc_partition_free(&s.part);
    free(s.my_rows);
    free(s.is_w);
    step_batch_free(&s.sb);
    return 1;
}
