// grpo.c: verl's PPO/GRPO loop (see grpo.h and docs/grpo.md).
//
// Layout of one step's data. B = n_prompts x n samples, prompt-major (sample i belongs to prompt i / n).
// Sequence i is prompt ++ response, packed back to back (cu (B+1)). Position t of sequence i scores
// token t+1: the response's k-th token is scored at packed position cu[i] + plen[i] - 1 + k. The RL
// modules work on padded (B, Tr) arrays with Tr = the longest response of the step; row i column k is
// that same token. Everything the step computes is a pure function of (config, weights, step), so a
// resumed run repeats an uninterrupted one bit for bit.
#include "trainer/grpo.h"
#include "trainer/finite.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
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
#include "dist/dist.h"
#include "dist/fsdp.h"
#include "io/checkpoint.h"
#include "model/decoder.h"
#include "reward/reward.h"
#include "rl/advantage.h"
#include "rl/agg.h"
#include "rl/kl.h"
#include "rl/policy_loss.h"
#include "rl/rl_step.h"
#include "rollout/engine.h"
#include "tokenizer/tokenizer.h"
#include "trainer/balance.h"
#include "trainer/engine.h"
#include "trainer/metrics.h"
#include "trainer/plot.h"
#include "trainer/progress.h"
#include "trainer/tensorboard.h"

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
    float *score;             // (B) sequence reward from the reward function
    rlc_reward_result *res;   // (B) reward results (score, extras, pred)
    float *scores;            // (B, Tr) token-level scores (the reward on the last response token)
    float *rewards;           // (B, Tr) token-level rewards (scores - beta * kl when KL is in the reward)
    float *adv, *returns;     // (B, Tr)
    int *finish;              // (B)
} step_batch;

static void step_batch_free(step_batch *s) {
    if (s->res)
        for (int i = 0; i < s->B; i++) rlc_reward_result_free(&s->res[i]);
    free(s->res);
    free(s->ds_index); free(s->plen); free(s->rlen); free(s->cu); free(s->tokens); free(s->targets);
    free(s->loss_mask); free(s->rollout_lp); free(s->old_lp); free(s->ref_lp); free(s->entropy); free(s->mask);
    free(s->score); free(s->scores); free(s->rewards); free(s->adv); free(s->returns); free(s->finish);
    memset(s, 0, sizeof *s);
}

// A step batch of n_prompts x n samples, T packed tokens and a longest response of Tr: the per-sample (B),
// packed (T) and response (B, Tr) arrays. sb->score comes with the rewards.
static void step_batch_alloc(step_batch *sb, int n_prompts, int n, int64_t T, int64_t Tr) {
    CHECK(T < INT32_MAX, "packed step batch of %lld tokens exceeds int32 offsets", (long long)T);
    memset(sb, 0, sizeof *sb);
    sb->n_prompts = n_prompts;
    sb->n = n;
    const int B = sb->B = n_prompts * n;
    sb->T = T;
    sb->Tr = Tr;
    sb->ds_index = rlc_malloc(sizeof(int64_t) * (size_t)B);
    sb->plen = rlc_malloc(sizeof(int64_t) * (size_t)B);
    sb->rlen = rlc_malloc(sizeof(int64_t) * (size_t)B);
    sb->finish = rlc_malloc(sizeof(int) * (size_t)B);
    sb->cu = rlc_malloc(sizeof(int32_t) * (size_t)(B + 1));
    sb->tokens = rlc_malloc(sizeof(int32_t) * (size_t)T);
    sb->targets = rlc_malloc(sizeof(int32_t) * (size_t)T);
    sb->loss_mask = rlc_calloc((size_t)T, sizeof(float));
    sb->rollout_lp = rlc_calloc((size_t)B * (size_t)Tr, sizeof(float));
    sb->mask = rlc_calloc((size_t)B * (size_t)Tr, sizeof(float));
}

// Sample i, packed at off: prompt ++ response tokens, targets and loss mask on the response-scoring positions
// (the last prompt token through the second-to-last response token), its rollout log-probs (rl) and response
// mask. Returns the offset after it.
static int64_t step_batch_put(step_batch *sb, int i, int64_t off, const int32_t *prompt, int64_t pl,
                              const int32_t *resp, int64_t rl, const float *lp) {
    sb->plen[i] = pl;
    sb->rlen[i] = rl;
    sb->cu[i] = (int32_t)off;
    memcpy(sb->tokens + off, prompt, sizeof(int32_t) * (size_t)pl);
    memcpy(sb->tokens + off + pl, resp, sizeof(int32_t) * (size_t)rl);
    for (int64_t t = 0; t < pl + rl; t++) {
        const int scored = t >= pl - 1 && t < pl + rl - 1;
        sb->targets[off + t] = scored ? sb->tokens[off + t + 1] : -1;
        sb->loss_mask[off + t] = scored ? 1.0f : 0.0f;
    }
    memcpy(sb->rollout_lp + (size_t)i * (size_t)sb->Tr, lp, sizeof(float) * (size_t)rl);
    for (int64_t k = 0; k < rl; k++) sb->mask[(size_t)i * (size_t)sb->Tr + k] = 1.0f;
    sb->cu[i + 1] = (int32_t)(off + pl + rl);
    return off + pl + rl;
}

// ---------------------------------------------------------------------------------------------
// the trainer

typedef struct {
    const rlc_train_config *cfg;
    backend_ctx be;
    rlc_tokenizer *tok;
    rlc_dataset train, val;
    int have_train, have_val;
    model_config mcfg;
    param_layout pl;
    param_set params, ref_params;
    decoder_model model, ref_model;
    int have_ref;
    engine eng;
    rollout_engine *rollout;
    rlc_reward_fn reward;
    rl_loss_cfg loss_cfg;
    rl_step_cfg step_cfg;         // advantage estimator + in-reward KL
    rl_kl_ctrl kl_ctrl;
    float temperature;            // rollout temperature, also used by the actor's log-prob passes
    int want_entropy_update;      // entropy computed in the update (entropy_coeff != 0 or calculate_entropy)
    int64_t steps_per_epoch, total_steps;
    int64_t global_step;          // steps completed
    int64_t epoch, batch_in_epoch;// data-loader position of the next step
    char *run_dir;
    char *metrics_path;
    uint64_t data_seed;
    const char *dump_dir;         // RLC_GRPO_DUMP: write each step's rollouts (tests' PyTorch oracle)
    int64_t crash_step;           // RLC_TEST_CRASH_IN_CHECKPOINT: SIGKILL midway through this step's save
    int64_t nan_lr_step;          // RLC_TEST_NONFINITE_LR: this step's update uses a NaN learning rate
    // data parallelism (docs/distributed.md); W = 1 runs the single-process code paths unchanged
    dist_ctx *d;                  // NULL with W = 1
    int W, R, root;               // world size, rank, rank == 0
    fsdp_state fs;                // W > 1: sharded params / grads / AdamW moments of the actor
    int have_fs;
    fsdp_state ref_fs;            // W > 1: sharded weights of the reference model (ref_params is freed)
    int have_ref_fs;
    char *resume_opt;             // W > 1: optimizer.bin to load into the shards once they exist
    tb_writer *tb;                // trainer.logger has tensorboard: the event file (rank 0), else NULL
    progress prog;                // the terminal's progress line through a step's phases
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
    if (files->n == 0) rlc_die("config: data.%s is empty: give a JSONL or Parquet file", what);
    if (files->n > 1) rlc_die("config: data.%s lists %lld files; rlc reads one JSONL or Parquet file per split", what, (long long)files->n);
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
    if (kv_dtype_parse(c->actor_rollout_ref.rollout.kv_cache_dtype, &rc->kv_cache_dtype))   // choices checked on load
        rlc_die("config: actor_rollout_ref.rollout.kv_cache_dtype='%s', expected fp32 or bf16",
                c->actor_rollout_ref.rollout.kv_cache_dtype);
    if (c->actor_rollout_ref.rollout.max_num_seqs > 0) rc->max_num_seqs = (int)c->actor_rollout_ref.rollout.max_num_seqs;
    const rlc_tok_special *sp = rlc_tok_specials(g->tok);
    rc->stop_ids = sp->stop_ids;
    rc->n_stop_ids = sp->n_stop;
    rc->progress = isatty(2) && !g->prog.tty;   // the trainer's own progress line shows the generation phase
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

// Decode responses (special tokens skipped, as verl's naive reward manager) and score them: sb->score (B)
// and sb->res (B), the full results (extras and pred) for the validation metrics.
static void score(grpo *g, const rlc_dataset *ds, step_batch *sb) {
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
    rlc_reward_compute(&g->reward, B, req, sb->res);
    sb->score = rlc_malloc(sizeof(float) * (size_t)B);
    for (int i = 0; i < B; i++) {
        sb->score[i] = (float)sb->res[i].score;
        free(texts[i]);
    }
    free(texts);
    free(req);
}

// ---------------------------------------------------------------------------------------------
// data parallelism: every rank generates and scores a contiguous chunk of the step's prompts, then the
// chunks are all-gathered so that every rank holds the whole step batch, in the 1-process order (the
// arrays are small next to the weights). Log-prob passes and the update then work on balanced parts.

// Variable-size all-gather: recv (returned, sum of the counts) = every rank's send (n bytes) in rank order.
static char *allgatherv(dist_ctx *d, const void *send, int64_t n, const char *what) {
    const int W = d->world;
    int64_t *cnt = rlc_malloc(sizeof(int64_t) * (size_t)W);
    dist_allgather(d, &n, cnt, sizeof n, what);
    int64_t mx = 1, tot = 0;
    for (int r = 0; r < W; r++) { if (cnt[r] > mx) mx = cnt[r]; tot += cnt[r]; }
    char *pad = rlc_calloc((size_t)mx, 1), *all = rlc_malloc((size_t)mx * (size_t)W), *out = rlc_malloc((size_t)(tot > 0 ? tot : 1));
    memcpy(pad, send, (size_t)n);
    dist_allgather(d, pad, all, (size_t)mx, what);
    int64_t off = 0;
    for (int r = 0; r < W; r++) { memcpy(out + off, all + (size_t)r * (size_t)mx, (size_t)cnt[r]); off += cnt[r]; }
    free(pad); free(all); free(cnt);
    return out;
}

typedef struct { int64_t ds_index, plen, rlen; int32_t finish; float score; } sample_hdr;

// loc: this rank's generated and scored chunk (prompt-major); out: the whole step batch on every rank,
// laid out as generate() lays out one process's batch.
static void gather_step_batch(dist_ctx *d, const step_batch *loc, step_batch *sb) {
    rlc_strbuf b = {0};
    int32_t nl = loc->B;
    rlc_sb_append(&b, (const char *)&nl, sizeof nl);
    for (int i = 0; i < loc->B; i++) {
        sample_hdr h = {loc->ds_index[i], loc->plen[i], loc->rlen[i], loc->finish[i], loc->score[i]};
        rlc_sb_append(&b, (const char *)&h, sizeof h);
        rlc_sb_append(&b, (const char *)(loc->tokens + loc->cu[i]), sizeof(int32_t) * (size_t)(h.plen + h.rlen));
        rlc_sb_append(&b, (const char *)(loc->rollout_lp + (size_t)i * loc->Tr), sizeof(float) * (size_t)h.rlen);
    }
    char *all = allgatherv(d, b.s, (int64_t)b.n, "all-gather of the rollout chunks");
    rlc_sb_free(&b);
    // pass 1: sizes
    const int W = d->world;
    int B = 0;
    int64_t T = 0, Tr = 1;
    const char *p = all;
    for (int r = 0; r < W; r++) {
        int32_t n;
        memcpy(&n, p, sizeof n);
        p += sizeof n;
        for (int i = 0; i < n; i++) {
            sample_hdr h;
            memcpy(&h, p, sizeof h);
            p += sizeof h + sizeof(int32_t) * (size_t)(h.plen + h.rlen) + sizeof(float) * (size_t)h.rlen;
            T += h.plen + h.rlen;
            if (h.rlen > Tr) Tr = h.rlen;
        }
        B += n;
    }
    CHECK(B % loc->n == 0, "gathered %d samples, not a multiple of n=%d", B, loc->n);
    step_batch_alloc(sb, B / loc->n, loc->n, T, Tr);
    sb->score = rlc_malloc(sizeof(float) * (size_t)B);
    // pass 2: the same packing as generate()
    p = all;
    int i = 0;
    int64_t off = 0;
    for (int r = 0; r < W; r++) {
        int32_t n;
        memcpy(&n, p, sizeof n);
        p += sizeof n;
        for (int q = 0; q < n; q++, i++) {
            sample_hdr h;
            memcpy(&h, p, sizeof h);
            p += sizeof h;
            sb->ds_index[i] = h.ds_index;
            sb->finish[i] = h.finish;
            sb->score[i] = h.score;
            const int32_t *tok = (const int32_t *)p;
            p += sizeof(int32_t) * (size_t)(h.plen + h.rlen);
            off = step_batch_put(sb, i, off, tok, h.plen, tok + h.plen, h.rlen, (const float *)p);
            p += sizeof(float) * (size_t)h.rlen;
        }
    }
    free(all);
}

// verl's balance_batch: Karmarkar-Karp over 24576*L + L^2 of the n sequences rows (n) into W equal-size parts.
static void balance_rows(rlc_partition *part, const step_batch *sb, const int *rows, int n, int W) {
    int64_t *wl = rlc_malloc(sizeof(int64_t) * (size_t)n);
    for (int s = 0; s < n; s++) wl[s] = rlc_seqlen_workload(sb->cu[rows[s] + 1] - sb->cu[rows[s]]);
    rlc_balanced_partitions(part, wl, n, W, 1);
    free(wl);
}

// A (B, Tr) array of which each rank computed the rows of its part (part over 0..B-1): after this every rank
// has all rows.
static void share_rows(dist_ctx *d, const rlc_partition *part, const step_batch *sb, float *padded) {
    const int W = d->world, R = d->rank;
    const int64_t Tr = sb->Tr, nl = part->offsets[R + 1] - part->offsets[R];
    float *mine = rlc_malloc(sizeof(float) * (size_t)(nl * Tr)), *all = rlc_malloc(sizeof(float) * (size_t)(W * nl * Tr));
    for (int64_t s = 0; s < nl; s++)
        memcpy(mine + s * Tr, padded + part->items[part->offsets[R] + s] * Tr, sizeof(float) * (size_t)Tr);
    dist_allgather(d, mine, all, sizeof(float) * (size_t)(nl * Tr), "all-gather of the log-prob rows");
    for (int r = 0; r < W; r++) {
        CHECK_EQ(part->offsets[r + 1] - part->offsets[r], nl, "balanced part size");
        for (int64_t s = 0; s < nl; s++)
            memcpy(padded + part->items[part->offsets[r] + s] * Tr, all + (r * nl + s) * Tr, sizeof(float) * (size_t)Tr);
    }
    free(mine);
    free(all);
}

// A packed batch of the step batch's sequences rows[0..n) in that order.
typedef struct {
    int n;
    int32_t *cu;        // (n+1)
    int32_t *tokens;    // (T)
    int32_t *targets;   // (T)
    float *loss_mask;   // (T)
} packed_rows;

static void pack_rows(packed_rows *p, const step_batch *sb, const int *rows, int n) {
    int64_t T = 0;
    for (int s = 0; s < n; s++) T += sb->cu[rows[s] + 1] - sb->cu[rows[s]];
    p->n = n;
    p->cu = rlc_malloc(sizeof(int32_t) * (size_t)(n + 1));
    p->tokens = rlc_malloc(sizeof(int32_t) * (size_t)(T > 0 ? T : 1));
    p->targets = rlc_malloc(sizeof(int32_t) * (size_t)(T > 0 ? T : 1));
    p->loss_mask = rlc_malloc(sizeof(float) * (size_t)(T > 0 ? T : 1));
    int64_t off = 0;
    for (int s = 0; s < n; s++) {
        int i = rows[s];
        int64_t len = sb->cu[i + 1] - sb->cu[i];
        p->cu[s] = (int32_t)off;
        memcpy(p->tokens + off, sb->tokens + sb->cu[i], sizeof(int32_t) * (size_t)len);
        memcpy(p->targets + off, sb->targets + sb->cu[i], sizeof(int32_t) * (size_t)len);
        memcpy(p->loss_mask + off, sb->loss_mask + sb->cu[i], sizeof(float) * (size_t)len);
        off += len;
    }
    p->cu[n] = (int32_t)off;
}
static void packed_rows_free(packed_rows *p) { free(p->cu); free(p->tokens); free(p->targets); free(p->loss_mask); }

// verl's dynamic batch size (rearrange_micro_batches: KK over 24576*L + L^2, parts ordered small-large-small):
// reorders rows[0..n) in place so that each part is contiguous and fills starts (n+1) with the part
// boundaries; returns the number of parts.
static int balanced_micro_batches(const step_batch *sb, int *rows, int n, int64_t max_tokens, const char *key, int *starts) {
    int64_t *len = rlc_malloc(sizeof(int64_t) * (size_t)n);
    for (int s = 0; s < n; s++) len[s] = sb->cu[rows[s] + 1] - sb->cu[rows[s]];
    rlc_partition part;
    rlc_rearrange_micro_batches(&part, len, n, max_tokens, 0, 1, 1, key);
    int *orig = rlc_malloc(sizeof(int) * (size_t)n);
    memcpy(orig, rows, sizeof(int) * (size_t)n);
    int k = (int)part.k;
    for (int j = 0; j <= k; j++) starts[j] = (int)part.offsets[j];
    for (int q = 0; q < n; q++) rows[q] = orig[part.items[q]];
    rlc_partition_free(&part);
    free(orig);
    free(len);
    return k;
}

// The log-prob passes (old_log_prob with the actor, ref with the reference model): micro-batched as
// verl's infer (log_prob_use_dynamic_bsz: balanced token-budget parts; else log_prob_micro_batch_size_per_gpu
// sequences; neither set: greedy consecutive sequences up to log_prob_max_token_len_per_gpu). Outputs are
// scattered back to the step order in the padded layout (B, Tr).
// sel (nsel) picks the rows to compute (a data-parallel rank's part), NULL: all B rows; only those rows of
// lp_padded / ent_padded are written.
static void infer_logprobs(engine *e, decoder_model *m, const step_batch *sb, const int *sel, int nsel, int dyn,
                           int64_t micro_seqs, int64_t max_tokens, const char *key, float *lp_padded, float *ent_padded) {
    int B = sel ? nsel : sb->B;
    int *rows = rlc_malloc(sizeof(int) * (size_t)(B > 0 ? B : 1)), *starts = rlc_malloc(sizeof(int) * (size_t)(B + 1));
    for (int i = 0; i < B; i++) rows[i] = sel ? sel[i] : i;
    engine_mb mb = {0, 0, NULL, 0};
    if (dyn) {
        mb.n_parts = balanced_micro_batches(sb, rows, B, max_tokens, key, starts);
        mb.starts = starts;
    } else if (micro_seqs != RLC_CFG_NULL && micro_seqs > 0) {
        mb.micro_batch_seqs = (int)micro_seqs;
    } else {
        mb.micro_batch_tokens = max_tokens > 0 ? max_tokens : 0;
    }
    packed_rows p;
    pack_rows(&p, sb, rows, B);
    engine_batch b = {B, p.cu, p.tokens, p.targets, p.loss_mask};
    int64_t T = p.cu[B];
    float *lp = rlc_malloc(sizeof(float) * (size_t)(T > 0 ? T : 1));
    float *ent = ent_padded ? rlc_malloc(sizeof(float) * (size_t)(T > 0 ? T : 1)) : NULL;
    // The reference model shares the actor's engine buffers (same shapes): only the weights differ.
    decoder_model *saved = e->model;
    e->model = m;
    engine_infer_mb(e, &b, &mb, lp, ent);
    e->model = saved;
    // restore_dynamic_batch: back to the step order
    for (int s = 0; s < B; s++) {
        int i = rows[s];
        int64_t base = p.cu[s] + sb->plen[i] - 1;
        for (int64_t k = 0; k < sb->Tr; k++) {
            int in = k < sb->rlen[i];
            lp_padded[(size_t)i * sb->Tr + k] = in ? lp[base + k] : 0.0f;
            if (ent) ent_padded[(size_t)i * sb->Tr + k] = in ? ent[base + k] : 0.0f;
        }
    }
    packed_rows_free(&p);
    free(lp); free(ent); free(rows); free(starts);
}

// The ref pass over W > 1 ranks with the reference weights sharded (ref_fs): this rank's rows sel (nsel),
// micro-batched as infer_logprobs does, one engine pass per micro-batch bracketed for the fsdp prefetch; the
// micro-batch count is all-reduced (max) and a rank with fewer runs 1-token passes, because every pass issues
// the per-block all-gathers. Only the rows sel of lp_padded are written.
static void infer_logprobs_sharded(grpo *g, fsdp_state *fs, decoder_model *m, const step_batch *sb, const int *sel, int nsel,
                                   int dyn, int64_t micro_seqs, int64_t max_tokens, const char *key, float *lp_padded) {
    engine *e = &g->eng;
    int n = nsel;
    int *rows = rlc_malloc(sizeof(int) * (size_t)(n > 0 ? n : 1)), *starts = rlc_malloc(sizeof(int) * (size_t)(n + 1));
    memcpy(rows, sel, sizeof(int) * (size_t)n);
    int nmb;
    packed_rows p;
    if (dyn) {
        nmb = balanced_micro_batches(sb, rows, n, max_tokens, key, starts);
        pack_rows(&p, sb, rows, n);
    } else {
        pack_rows(&p, sb, rows, n);
        engine_mb mb = {0, 0, NULL, 0};
        if (micro_seqs != RLC_CFG_NULL && micro_seqs > 0) mb.micro_batch_seqs = (int)micro_seqs;
        else mb.micro_batch_tokens = max_tokens > 0 ? max_tokens : 0;
        engine_batch b = {n, p.cu, p.tokens, p.targets, p.loss_mask};
        nmb = engine_split(&b, &mb, starts);
    }
    int64_t K = nmb;
    dist_allreduce_i64(g->d, &K, 1, DIST_MAX, "all-reduce of the ref micro-batch count");
    int64_t T = p.cu[n];
    float *lp = rlc_malloc(sizeof(float) * (size_t)(T > 0 ? T : 1));
    int32_t *cu_mb = rlc_malloc(sizeof(int32_t) * (size_t)(n + 1));
    const int32_t dummy_tok = 0, dummy_tgt = -1, dummy_cu[2] = {0, 1};
    const float dummy_mask = 0.0f;
    float dummy_lp;
    engine_mb whole = {0, 0, NULL, 0};
    decoder_model *saved = e->model;
    e->model = m;
    for (int64_t i = 0; i < K; i++) {
        fsdp_begin_pass(fs, i + 1 < K);
        if (i < nmb) {
            int s0 = starts[i], s1 = starts[i + 1];
            int32_t base = p.cu[s0];
            for (int q = s0; q <= s1; q++) cu_mb[q - s0] = p.cu[q] - base;
            engine_batch mb = {s1 - s0, cu_mb, p.tokens + base, p.targets + base, p.loss_mask + base};
            engine_infer_mb(e, &mb, &whole, lp + base, NULL);
        } else {
            engine_batch mb = {1, dummy_cu, &dummy_tok, &dummy_tgt, &dummy_mask};
            engine_infer_mb(e, &mb, &whole, &dummy_lp, NULL);
        }
        fsdp_end_pass(fs);
    }
    e->model = saved;
    fsdp_invalidate(fs);
    for (int s = 0; s < n; s++) {
        int i = rows[s];
        int64_t base = p.cu[s] + sb->plen[i] - 1;
        for (int64_t k = 0; k < sb->Tr; k++) lp_padded[(size_t)i * sb->Tr + k] = k < sb->rlen[i] ? lp[base + k] : 0.0f;
    }
    packed_rows_free(&p);
    free(lp); free(cu_mb); free(rows); free(starts);
}

// ---------------------------------------------------------------------------------------------
// update_actor: PPO epochs over mini-batches, micro-batches with gradient accumulation

typedef struct {
    grpo *g;
    const step_batch *sb;
    const int *rows;          // (mini-batch sequences) -> sample index in sb, in packed order
    double G;                 // sequences in the global mini-batch
    rlc_actor_metrics *am;
} loss_ctx;

static double grpo_loss_fn(void *user, const engine_micro *mb) {
    loss_ctx *lc = user;
    const step_batch *sb = lc->sb;
    const grpo *g = lc->g;
    int nb = mb->n_seqs;
    int64_t Tm = 1;   // the micro-batch's widest response (verl v1 pads each micro-batch to it)
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
    rl_ppo_loss(&out, dlp, dent, lp, old, g->loss_cfg.use_kl_loss ? ref : NULL, adv, ent, mask, NULL, nb, Tm, &g->loss_cfg,
                &gbi);
    for (int s = 0; s < nb; s++) {
        int i = lc->rows[mb->seq_begin + s];
        int64_t base = mb->cu_seqlens[s] + sb->plen[i] - 1;
        for (int64_t k = 0; k < sb->rlen[i]; k++) {
            mb->dlogp[base + k] = dlp[(size_t)s * Tm + k];
            if (dent) mb->dentropy[base + k] = dent[(size_t)s * Tm + k];
        }
    }
    rlc_actor_metrics_micro(lc->am, out.pg_loss, out.entropy_loss, out.kl_loss, out.loss, out.pg.pg_clipfrac, out.pg.ppo_kl,
                            out.pg.pg_clipfrac_lower);
    free(lp); free(old); free(adv); free(mask); free(dlp); free(ref); free(ent); free(dent);
    return out.loss;
}

// The order of the step's B sequences in PPO epoch ep, cut into mini-batches by both update paths: 0..B-1, or
// with shuffle (verl: the mini-batch DataLoader's shuffle, seeded by data_loader_seed) a Fisher-Yates shuffle on
// the Philox stream (seed, step, ep), so every rank count takes the same mini-batches.
static void ppo_epoch_order(int *order, int B, int shuffle, int64_t seed, int64_t step, int64_t ep) {
    for (int i = 0; i < B; i++) order[i] = i;
    if (!shuffle) return;
    rng r;
    rng_stream(&r, (uint64_t)seed, (uint64_t)step, (uint64_t)ep);
    for (int i = B - 1; i > 0; i--) {
        int j = (int)rng_below(&r, (uint64_t)(i + 1));
        int t = order[i]; order[i] = order[j]; order[j] = t;
    }
}

// The terminal's progress line during the update: which of the step's mini-batch updates is running.
static void update_phase(grpo *g, int64_t ep, int mi, int n_mini) {
    if (!g->prog.tty) return;
    char ph[64];
    snprintf(ph, sizeof ph, "update_actor %lld/%lld", (long long)(ep * n_mini + mi + 1),
             (long long)(g->cfg->actor_rollout_ref.actor.ppo_epochs * n_mini));
    progress_phase(&g->prog, g->global_step + 1, ph);
}

static void update_actor(grpo *g, const step_batch *sb, rlc_metrics *m) {
    const rlc_train_config *c = g->cfg;
    const __typeof__(c->actor_rollout_ref.actor) *ac = &c->actor_rollout_ref.actor;
    int n = sb->n, B = sb->B;
    int mini_seqs = (int)ac->ppo_mini_batch_size * n;   // verl: ppo_mini_batch_size * rollout.n sequences
    if (mini_seqs > B) mini_seqs = B;
    int n_mini = B / mini_seqs;
    int *order = rlc_malloc(sizeof(int) * (size_t)B), *rows = rlc_malloc(sizeof(int) * (size_t)mini_seqs);
    int *starts = rlc_malloc(sizeof(int) * (size_t)(mini_seqs + 1));
    rlc_actor_metrics am;
    rlc_actor_metrics_init(&am);
    int n_nonfinite = 0;
    for (int64_t ep = 0; ep < ac->ppo_epochs; ep++) {
        ppo_epoch_order(order, B, ac->shuffle, ac->data_loader_seed, g->global_step, ep);
        for (int mi = 0; mi < n_mini; mi++) {
            update_phase(g, ep, mi, n_mini);
            memcpy(rows, order + (size_t)mi * mini_seqs, sizeof(int) * (size_t)mini_seqs);
            engine_mb mbc = {0, 0, NULL, 0};
            if (ac->use_dynamic_bsz) {
                mbc.n_parts = balanced_micro_batches(sb, rows, mini_seqs, ac->ppo_max_token_len_per_gpu,
                                                     "actor_rollout_ref.actor.ppo_max_token_len_per_gpu", starts);
                mbc.starts = starts;
            } else {
                mbc.micro_batch_seqs = (int)ac->ppo_micro_batch_size_per_gpu;   // verl: consecutive chunks
            }
            packed_rows p;
            pack_rows(&p, sb, rows, mini_seqs);
            engine_batch eb = {mini_seqs, p.cu, p.tokens, p.targets, p.loss_mask};
            loss_ctx lc = {g, sb, rows, (double)mini_seqs, &am};
            engine_step_stats st;
            engine_train_batch(&g->eng, &eb, &mbc, g->want_entropy_update, grpo_loss_fn, &lc, 0, &st);
            rlc_actor_metrics_minibatch(&am, st.opt.grad_norm);
            if (!st.opt.finite) n_nonfinite++;
            packed_rows_free(&p);
        }
    }
    double lr = engine_lr_scheduler_step(&g->eng);   // once per training step, after the last mini-batch
    rlc_actor_metrics_put(&am, m, g->want_entropy_update, g->loss_cfg.use_kl_loss, g->loss_cfg.kl_loss_coef, lr);
    if (n_nonfinite) rlc_metrics_set(m, "actor/nonfinite_grad_steps", n_nonfinite);
    free(order); free(rows); free(starts);
}

// A padding pass of a rank with fewer micro-batches than another: nothing scored, zero gradient.
static double zero_loss_fn(void *user, const engine_micro *mb) { (void)user; (void)mb; return 0.0; }

// update_actor over W > 1 ranks: the same mini-batches as one process (the shuffled step order cut in
// mini_seqs), each balanced across the ranks by balance_batch (KK, equal size); each rank micro-batches its
// part; the loss-token count is all-reduced so the loss normalisation is the global one, the micro-batch
// count is all-reduced (max) and a rank with fewer runs 1-token padding passes (every pass issues the
// per-block all-gathers); gradients are reduce-scattered and the sharded AdamW steps with the global norm.
// W ranks give the weights of one process up to float summation order.
static void update_actor_dist(grpo *g, const step_batch *sb, rlc_metrics *m) {
    const rlc_train_config *c = g->cfg;
    const __typeof__(c->actor_rollout_ref.actor) *ac = &c->actor_rollout_ref.actor;
    dist_ctx *d = g->d;
    const int W = g->W, R = g->R;
    int n = sb->n, B = sb->B;
    int mini_seqs = (int)ac->ppo_mini_batch_size * n;
    if (mini_seqs > B) mini_seqs = B;
    int n_mini = B / mini_seqs, nl = mini_seqs / W;
    int *order = rlc_malloc(sizeof(int) * (size_t)B), *rows = rlc_malloc(sizeof(int) * (size_t)mini_seqs);
    int *mine = rlc_malloc(sizeof(int) * (size_t)nl), *starts = rlc_malloc(sizeof(int) * (size_t)(nl + 1));
    int32_t *cu_mb = rlc_malloc(sizeof(int32_t) * (size_t)(nl + 1));
    const int32_t dummy_tok = 0, dummy_tgt = -1, dummy_cu[2] = {0, 1};
    const float dummy_mask = 0.0f;
    engine_mb whole = {0, 0, NULL, 0};
    rlc_actor_metrics am;
    rlc_actor_metrics_init(&am);
    int n_nonfinite = 0;
    decoder_model *mod = &g->model;
    fsdp_attach(&g->fs, mod, 1);   // the update runs on the shards (ZeRO-3); the full copy is for rollout
    for (int64_t ep = 0; ep < ac->ppo_epochs; ep++) {
        ppo_epoch_order(order, B, ac->shuffle, ac->data_loader_seed, g->global_step, ep);   // the same order as one process
        for (int mi = 0; mi < n_mini; mi++) {
            update_phase(g, ep, mi, n_mini);
            memcpy(rows, order + (size_t)mi * mini_seqs, sizeof(int) * (size_t)mini_seqs);
            rlc_partition part;
            balance_rows(&part, sb, rows, mini_seqs, W);
            CHECK_EQ(part.offsets[R + 1] - part.offsets[R], nl, "balanced part size");
            for (int i = 0; i < nl; i++) mine[i] = rows[part.items[part.offsets[R] + i]];
            rlc_partition_free(&part);
            int nmb;
            if (ac->use_dynamic_bsz) {
                nmb = balanced_micro_batches(sb, mine, nl, ac->ppo_max_token_len_per_gpu,
                                             "actor_rollout_ref.actor.ppo_max_token_len_per_gpu", starts);
            } else {   // verl: consecutive chunks of ppo_micro_batch_size_per_gpu
                int mbs = (int)ac->ppo_micro_batch_size_per_gpu;
                CHECK(mbs > 0, "ppo_micro_batch_size_per_gpu %d", mbs);
                nmb = (nl + mbs - 1) / mbs;
                for (int j = 0; j <= nmb; j++) starts[j] = j * mbs < nl ? j * mbs : nl;
            }
            packed_rows p;
            pack_rows(&p, sb, mine, nl);
            engine_batch eb = {nl, p.cu, p.tokens, p.targets, p.loss_mask};
            double N = engine_batch_tokens(&eb);
            dist_allreduce_f64(d, &N, 1, DIST_SUM, "all-reduce of the mini-batch loss-token count");
            int64_t K = nmb;
            dist_allreduce_i64(d, &K, 1, DIST_MAX, "all-reduce of the micro-batch count");
            for (int64_t i = 0; i < K; i++) {   // (the grad shard is 0: fsdp_optimizer_step consumed the last one)
                engine_fb_stats st;
                fsdp_begin_pass(&g->fs, i + 1 < K);
                if (i < nmb) {
                    int s0 = starts[i], s1 = starts[i + 1];
                    int32_t base = p.cu[s0];
                    for (int q = s0; q <= s1; q++) cu_mb[q - s0] = p.cu[q] - base;
                    engine_batch mb = {s1 - s0, cu_mb, p.tokens + base, p.targets + base, p.loss_mask + base};
                    loss_ctx lc = {g, sb, mine + s0, (double)mini_seqs, &am};
                    engine_forward_backward(&g->eng, &mb, &whole, g->want_entropy_update, grpo_loss_fn, &lc, N > 0 ? N : -1, &st);
                } else {
                    engine_batch mb = {1, dummy_cu, &dummy_tok, &dummy_tgt, &dummy_mask};
                    engine_forward_backward(&g->eng, &mb, &whole, g->want_entropy_update, zero_loss_fn, NULL, N > 0 ? N : 1, &st);
                }
                fsdp_end_pass(&g->fs);
            }
            clip_result cr = fsdp_optimizer_step(&g->fs, lr_schedule_current(&g->eng.sched), g->eng.cfg.clip_grad);
            if (!cr.finite) n_nonfinite++;
            // this mini-batch's micro-batch metrics over all ranks (losses: global shares, summed; the clip
            // fractions and ppo_kl: the mean over every rank's micro-batches)
            double red[8] = {am.pg_loss, am.entropy_loss, am.kl_loss, am.loss, am.clipfrac, am.ppo_kl, am.clipfrac_lower,
                             (double)am.n_micro};
            dist_allreduce_f64(d, red, 8, DIST_SUM, "all-reduce of the actor metrics");
            am.pg_loss = red[0]; am.entropy_loss = red[1]; am.kl_loss = red[2]; am.loss = red[3];
            am.clipfrac = red[4]; am.ppo_kl = red[5]; am.clipfrac_lower = red[6]; am.n_micro = (int64_t)red[7];
            rlc_actor_metrics_minibatch(&am, cr.norm);
            packed_rows_free(&p);
        }
    }
    fsdp_detach(mod);
    // The rollout copy of the weights (and the HF checkpoint): every rank all-gathers the updated shards
    // (here rather than in update_weights because save_checkpoint, between the two, writes them).
    double t0 = rlc_now();
    fsdp_gather_full(&g->fs, g->fs.p, g->params.data, -1);
    rlc_metrics_set(m, "timing_s/gather_weights", rlc_now() - t0);
    double lr = engine_lr_scheduler_step(&g->eng);
    rlc_actor_metrics_put(&am, m, g->want_entropy_update, g->loss_cfg.use_kl_loss, g->loss_cfg.kl_loss_coef, lr);
    if (n_nonfinite) rlc_metrics_set(m, "actor/nonfinite_grad_steps", n_nonfinite);
    free(order); free(rows); free(mine); free(starts); free(cu_mb);
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

// ---------------------------------------------------------------------------------------------
// validation (verl _validate + process_validation_metrics): greedy by default; mean@n, and for n > 1
// std@n and the bootstrapped best@k / worst@k / maj@k

static void validate(grpo *g, rlc_metrics *m) {
    if (!g->have_val) return;
    rollout_config rc;
    rollout_cfg_from(g, &rc, 1);
    // The training engine, when there is one, validates too, with val_kwargs' n and sampling: its KV pool is
    // allocated and touched once per run (first-touch page faults cost ~3 s per GB on small VMs).
    rollout_engine *re = g->rollout ? g->rollout : rollout_engine_new(&g->model, &rc);
    const rollout_config train_rc = *rollout_engine_config(re);
    rollout_engine_set_sampling(re, rc.n, &rc.sampling);
    int64_t N = g->val.n, bs = g->cfg->data.val_batch_size;
    if (bs == RLC_CFG_NULL || bs <= 0 || bs > N) bs = N;
    int n = rc.n;
    int64_t S = N * n;   // samples, prompt-major
    rlc_reward_result *res = rlc_calloc((size_t)S, sizeof *res);
    int64_t *rows = rlc_malloc(sizeof(int64_t) * (size_t)bs);
    for (int64_t start = 0; start < N; start += bs) {
        int64_t cnt = N - start < bs ? N - start : bs;
        for (int64_t i = 0; i < cnt; i++) rows[i] = start + i;
        step_batch sb;
        double tg;
        generate(g, re, rows, (int)cnt, &g->val, 0x56414cull << 40 /* "VAL": not a train stream */, &sb, &tg);
        score(g, &g->val, &sb);
        memcpy(res + (size_t)start * n, sb.res, sizeof *res * (size_t)sb.B);   // take ownership
        free(sb.res);
        sb.res = NULL;
        step_batch_free(&sb);
    }
    if (re == g->rollout) rollout_engine_set_sampling(re, train_rc.n, &train_rc.sampling);
    else rollout_engine_free(re);
    // Variables: "reward" (the score), then the reward's extra keys (e.g. "acc") in the first sample's order.
    int nv = 1 + res[0].n_extra;
    const char **names = rlc_malloc(sizeof(char *) * (size_t)nv);
    double **vals = rlc_malloc(sizeof(double *) * (size_t)nv);
    names[0] = "reward";
    for (int v = 1; v < nv; v++) names[v] = res[0].extra_keys[v - 1];
    for (int v = 0; v < nv; v++) vals[v] = rlc_malloc(sizeof(double) * (size_t)S);
    const char **ds = rlc_malloc(sizeof(char *) * (size_t)S), **uid = rlc_malloc(sizeof(char *) * (size_t)S);
    const char **preds = rlc_malloc(sizeof(char *) * (size_t)S);
    char *uid_buf = rlc_malloc((size_t)S * 24);
    int have_pred = 1;
    for (int64_t j = 0; j < S; j++) {
        int64_t row = j / n;
        ds[j] = g->val.items[row].data_source;
        snprintf(uid_buf + j * 24, 24, "%lld", (long long)row);
        uid[j] = uid_buf + j * 24;
        vals[0][j] = res[j].score;
        for (int v = 1; v < nv; v++) {
            int found = 0;
            for (int e = 0; e < res[j].n_extra; e++)
                if (!strcmp(res[j].extra_keys[e], names[v])) { vals[v][j] = res[j].extra_vals[e]; found = 1; break; }
            if (!found)
                rlc_die("%s:%lld: the reward returned no '%s' for this validation sample, but did for the first one",
                        g->val.path, (long long)g->val.items[row].line, names[v]);
        }
        preds[j] = res[j].pred;
        if (!res[j].pred) have_pred = 0;
    }
    rlc_val_metrics(m, S, ds, uid, nv, names, (const double *const *)vals, have_pred ? preds : NULL, 42);
    for (int v = 0; v < nv; v++) free(vals[v]);
    free(vals); free(names); free(ds); free(uid); free(preds); free(uid_buf);
    for (int64_t j = 0; j < S; j++) rlc_reward_result_free(&res[j]);
    free(res);
    free(rows);
}

// RLC_GRPO_DUMP: one JSON file per step with what an independent reimplementation of the update needs
// (the sequences, prompt lengths, sequence scores and groups), for tests/py/grpo_ref.py.
static void dump_step(const grpo *g, const step_batch *sb) {
    rlc_strbuf b = {0};
    rlc_sb_printf(&b, "{\"step\": %lld, \"n\": %d, \"seqs\": [", (long long)(g->global_step + 1), sb->n);
    for (int i = 0; i < sb->B; i++) {
        rlc_sb_printf(&b, "%s{\"plen\": %lld, \"score\": %.9g, \"group\": %d, \"ids\": [", i ? ", " : "",
                      (long long)sb->plen[i], (double)sb->score[i], i / sb->n);
        for (int32_t t = sb->cu[i]; t < sb->cu[i + 1]; t++) rlc_sb_printf(&b, "%s%d", t > sb->cu[i] ? "," : "", sb->tokens[t]);
        rlc_sb_puts(&b, "]}");
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
    if (g->root)   // never a non-finite checkpoint: stop naming step and tensor; the last good one stays latest
        finite_check_save(g->params.data, g->W == 1 ? g->eng.opt.m.data : NULL, g->W == 1 ? g->eng.opt.v.data : NULL,
                          &g->pl, g->global_step);
    if (!g->root) {   // W > 1: rank 0 writes; the others take part in gathering the optimizer state
        fsdp_save_optimizer(&g->fs, "", g->eng.sched.step);
        dist_barrier(g->d, "checkpoint save");
        return;
    }
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
    if (g->crash_step == g->global_step) {   // tests: die as a SIGKILL would, with the save half written
        fprintf(stderr, "rlc: RLC_TEST_CRASH_IN_CHECKPOINT=%lld: killing the process midway through the save\n",
                (long long)g->crash_step);
        fflush(stderr);
        kill(getpid(), SIGKILL);
    }
    char *opt = rlc_path_join(actor, "optimizer.bin");
    if (g->W > 1) fsdp_save_optimizer(&g->fs, opt, g->eng.sched.step);   // full-layout m/v: any W resumes it
    else engine_save_state(&g->eng, opt);
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
    if (g->W > 1) dist_barrier(g->d, "checkpoint save");
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
    // values no save writes: a damaged file (batch_in_epoch indexes the epoch's prompt order)
    if (ts.global_step < 0 || ts.global_step > ADAMW_MAX_STEP || ts.epoch < 0 || ts.epoch > ADAMW_MAX_STEP ||
        ts.batch_in_epoch < 0 || ts.batch_in_epoch >= g->steps_per_epoch ||
        !isfinite(ts.kl_ctrl_value) || ts.kl_ctrl_value < 0)
        rlc_die("%s: corrupt trainer state (global_step %lld, epoch %lld, batch %lld of %lld per epoch, kl_coef %g)", tsp,
                (long long)ts.global_step, (long long)ts.epoch, (long long)ts.batch_in_epoch, (long long)g->steps_per_epoch,
                ts.kl_ctrl_value);
    char *actor = rlc_path_join(dir, "actor");
    checkpoint_load_weights(actor, &g->params);
    char *opt = rlc_path_join(actor, "optimizer.bin");
    if (g->W > 1) { free(g->resume_opt); g->resume_opt = rlc_strdup(opt); }   // loaded into the shards later
    else engine_load_state(&g->eng, opt);
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
    if (!g->root || !rlc_file_exists(g->metrics_path)) return;
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

static double mget(const rlc_metrics *m, const char *key) { return rlc_metrics_get(m, key, NULL); }
static void console_line(const grpo *g, const rlc_metrics *m);

// One step's metrics to every logger (verl's Tracking.log at global_step): metrics.jsonl (always), TensorBoard
// (trainer.logger), and the console line, which replaces the terminal's progress line.
static void log_step(grpo *g, const rlc_metrics *m) {
    if (g->root) rlc_metrics_append_jsonl(m, g->metrics_path);
    if (g->tb) tb_write_metrics(g->tb, m, g->global_step);
    progress_clear(&g->prog);
    console_line(g, m);
    if (g->prog.tty) progress_step(&g->prog, g->global_step, 0, NULL, NULL);   // elsewhere the console line is the log
}

static void console_line(const grpo *g, const rlc_metrics *m) {
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
// one training step, in verl's order: gen -> reward -> old_log_prob -> ref -> adv -> update_actor ->
// save_checkpoint -> update_weights (the "step" timer), then testing outside it (by the caller)

enum { T_GEN, T_REWARD, T_OLD, T_REF, T_ADV, T_UPDATE, T_SAVE, T_WEIGHTS, T_STEP, T_N };

static void train_step(grpo *g, const int64_t *rows, rlc_metrics *m) {
    const rlc_train_config *c = g->cfg;
    const __typeof__(c->actor_rollout_ref) *ar = &c->actor_rollout_ref;
    double tm[T_N] = {0}, t_step0 = rlc_now(), t;
    int have[T_N] = {0};
    step_batch sb;
    const int W = g->W;
    const int np = (int)c->data.train_batch_size / W;   // W > 1: this rank's contiguous chunk of prompts
    if (W > 1) dist_reset_counters(g->d);
    progress_phase(&g->prog, g->global_step + 1, "generating");
    generate(g, g->rollout, rows + (size_t)g->R * np, np, &g->train, (uint64_t)(g->global_step + 1) << 32, &sb,
             &tm[T_GEN]);
    have[T_GEN] = 1;

    t = rlc_now();
    progress_phase(&g->prog, g->global_step + 1, "reward");
    score(g, &g->train, &sb);   // W > 1: each rank scores its own samples
    if (W > 1) {
        step_batch loc = sb;
        gather_step_batch(g->d, &loc, &sb);
        step_batch_free(&loc);
    }
    tm[T_REWARD] = rlc_now() - t;
    have[T_REWARD] = 1;
    int B = sb.B;
    size_t BT = (size_t)B * (size_t)sb.Tr;
    if (g->dump_dir && g->root) dump_step(g, &sb);
    // W > 1: balance_batch over the whole step batch: rank R's part for the log-prob passes
    rlc_partition part = {0, NULL, NULL};
    int *my_rows = NULL, n_my = 0;
    if (W > 1) {
        int *all = rlc_malloc(sizeof(int) * (size_t)B);
        for (int i = 0; i < B; i++) all[i] = i;
        balance_rows(&part, &sb, all, B, W);
        free(all);
        n_my = (int)(part.offsets[g->R + 1] - part.offsets[g->R]);
        my_rows = rlc_malloc(sizeof(int) * (size_t)n_my);
        for (int i = 0; i < n_my; i++) my_rows[i] = (int)part.items[part.offsets[g->R] + i];
    }

    // old_log_prob: the actor's log-probs and entropy at the rollout temperature.
    t = rlc_now();
    progress_phase(&g->prog, g->global_step + 1, "old_log_prob");
    sb.old_lp = rlc_calloc(BT, sizeof(float));
    sb.entropy = rlc_calloc(BT, sizeof(float));
    // (W > 1: on the full rollout copy of the weights, no collectives inside; then the rows are shared)
    infer_logprobs(&g->eng, &g->model, &sb, my_rows, n_my, ar->rollout.log_prob_use_dynamic_bsz,
                   ar->rollout.log_prob_micro_batch_size_per_gpu, ar->rollout.log_prob_max_token_len_per_gpu,
                   "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu", sb.old_lp, sb.entropy);
    if (W > 1) { share_rows(g->d, &part, &sb, sb.old_lp); share_rows(g->d, &part, &sb, sb.entropy); }
    tm[T_OLD] = rlc_now() - t;
    have[T_OLD] = 1;
    {   // actor/entropy: agg_loss over the whole step batch with no global info (D = 1, N = sum of the mask)
        rl_batch_info gbi = {1, 0, 0, ar->actor.loss_scale_factor};
        if (!isfinite(gbi.loss_scale_factor)) gbi.loss_scale_factor = 0;
        rlc_metrics_set(m, "actor/entropy", rl_agg_loss(sb.entropy, sb.mask, B, sb.Tr, g->loss_cfg.agg, &gbi));
        // rollout vs actor: the same weights and kernels, so these measure only the kernel paths' rounding.
        if (ar->rollout.calculate_log_probs) rlc_rollout_probs_metrics(m, sb.old_lp, sb.rollout_lp, sb.mask, (int64_t)BT);
    }

    if (g->have_ref) {
        t = rlc_now();
        progress_phase(&g->prog, g->global_step + 1, "ref");
        sb.ref_lp = rlc_calloc(BT, sizeof(float));
        if (W > 1) {   // on the sharded reference weights
            infer_logprobs_sharded(g, &g->ref_fs, &g->ref_model, &sb, my_rows, n_my, ar->ref.log_prob_use_dynamic_bsz,
                                   ar->ref.log_prob_micro_batch_size_per_gpu, ar->ref.log_prob_max_token_len_per_gpu,
                                   "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", sb.ref_lp);
            share_rows(g->d, &part, &sb, sb.ref_lp);
        } else {
            infer_logprobs(&g->eng, &g->ref_model, &sb, NULL, 0, ar->ref.log_prob_use_dynamic_bsz,
                           ar->ref.log_prob_micro_batch_size_per_gpu, ar->ref.log_prob_max_token_len_per_gpu,
                           "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", sb.ref_lp, NULL);
        }
        tm[T_REF] = rlc_now() - t;
        have[T_REF] = 1;
    }

    // adv: token-level scores, in-reward KL (optional), then the advantage estimator over groups of n.
    // (W > 1: every rank holds the whole batch and computes the same advantages, no communication.)
    t = rlc_now();
    sb.scores = rlc_malloc(sizeof(float) * BT);
    sb.rewards = rlc_malloc(sizeof(float) * BT);
    sb.adv = rlc_malloc(sizeof(float) * BT);
    sb.returns = rlc_malloc(sizeof(float) * BT);
    int64_t *group = rlc_malloc(sizeof(int64_t) * (size_t)B);
    for (int i = 0; i < B; i++) group[i] = i / sb.n;
    rl_step_metrics sm;
    rl_step_advantages(sb.scores, sb.rewards, sb.adv, sb.returns, &sm, sb.score, sb.rlen, group, sb.mask, sb.old_lp, sb.ref_lp,
                       B, sb.Tr, &g->step_cfg, &g->kl_ctrl);
    free(group);
    if (g->step_cfg.use_kl_in_reward) {
        rlc_metrics_set(m, "actor/reward_kl_penalty", sm.reward_kl_penalty);
        rlc_metrics_set(m, "actor/reward_kl_penalty_coeff", sm.reward_kl_penalty_coeff);
    }
    tm[T_ADV] = rlc_now() - t;
    have[T_ADV] = 1;

    // verl: the actor is updated once critic_warmup <= global_step (no critic in GRPO: from the first step)
    if (c->trainer.critic_warmup <= g->global_step) {
        t = rlc_now();
        if (g->global_step + 1 == g->nan_lr_step) g->eng.sched.base_lr = NAN;
        if (W > 1) update_actor_dist(g, &sb, m);
        else update_actor(g, &sb, m);
        tm[T_UPDATE] = rlc_now() - t;
        have[T_UPDATE] = 1;
    }

    g->global_step++;
    // data-loader position of the next step (an epoch boundary rolls over here, so a checkpoint taken at
    // the end of an epoch resumes at the next epoch instead of stopping)
    g->batch_in_epoch++;
    if (g->batch_in_epoch >= g->steps_per_epoch) { g->epoch++; g->batch_in_epoch = 0; }

    int last = g->global_step >= g->total_steps;
    if (c->trainer.save_freq > 0 && (g->global_step % c->trainer.save_freq == 0 || last)) {
        t = rlc_now();
        progress_phase(&g->prog, g->global_step, "save_checkpoint");
        save_checkpoint(g);
        tm[T_SAVE] = rlc_now() - t;
        have[T_SAVE] = 1;
    }
    // update_weights: the rollout engine reads the trainer's weights in place (nothing to copy) unless it
    // decodes from a bf16 copy.
    t = rlc_now();
    rollout_engine_sync_weights(g->rollout);
    tm[T_WEIGHTS] = rlc_now() - t;
    have[T_WEIGHTS] = 1;
    tm[T_STEP] = rlc_now() - t_step0;
    have[T_STEP] = 1;

    static const char *tnames[T_N] = {"gen", "reward", "old_log_prob", "ref", "adv", "update_actor", "save_checkpoint",
                                      "update_weights", "step"};
    const char *names[T_N];
    double secs[T_N];
    int nt = 0;
    for (int k = 0; k < T_N; k++)
        if (have[k]) { names[nt] = tnames[k]; secs[nt++] = tm[k]; }
    int64_t resp_tokens = 0;
    for (int i = 0; i < B; i++) resp_tokens += sb.rlen[i];
    // one process = one "GPU" for perf/throughput (timings are rank 0's)
    rlc_timing_metrics(m, nt, names, secs, resp_tokens, sb.T, W);
    rlc_metrics_set(m, "actor/perf/cpu_memory_used_gb", (double)rlc_current_rss() / (double)(1 << 30));
    if (W > 1) {   // rank 0's view of this step's communication
        rlc_metrics_set(m, "dist/world_size", W);
        rlc_metrics_set(m, "dist/comm_bytes", (double)dist_bytes_total(g->d));
        rlc_metrics_set(m, "dist/allgather_bytes", (double)g->d->bytes[DIST_K_ALLGATHER]);
        rlc_metrics_set(m, "dist/reduce_scatter_bytes", (double)g->d->bytes[DIST_K_REDUCE_SCATTER]);
        rlc_metrics_set(m, "dist/comm_s", g->d->comm_seconds);
        rlc_metrics_set(m, "dist/comm_fraction", tm[T_STEP] > 0 ? g->d->comm_seconds / tm[T_STEP] : 0);
    }
    data_metrics(&sb, W > 1 ? &part : NULL, m);
    if (W > 1) rlc_partition_free(&part);
    free(my_rows);
    step_batch_free(&sb);
}

// ---------------------------------------------------------------------------------------------

static void grpo_setup(grpo *g, const rlc_train_config *c, int val_only, dist_ctx *d) {
    memset(g, 0, sizeof *g);
    g->cfg = c;
    g->d = d && d->world > 1 ? d : NULL;
    g->W = g->d ? d->world : 1;
    g->R = g->d ? d->rank : 0;
    g->root = g->R == 0;
    backend_init(&g->be, (int)c->trainer.n_threads);
    const char *mp = c->actor_rollout_ref.model.path;
    if (!mp || !*mp) rlc_die("config: actor_rollout_ref.model.path is not set: give an HF checkpoint directory");
    g->tok = rlc_tok_load(mp, NULL);
    if (c->data.chat_template) rlc_tok_load_chat_template(g->tok, c->data.chat_template);
    checkpoint_load(mp, &g->mcfg, &g->pl, &g->params);
    decoder_model_init(&g->model, &g->pl, &g->params, &g->be);
    if (!val_only) {
        load_data(g, &g->train, &c->data.train_files, "train_files");
        g->have_train = 1;
    }
    if (c->data.val_files.n > 0) {
        load_data(g, &g->val, &c->data.val_files, "val_files");
        g->have_val = 1;
    }
    if (val_only && !g->have_val) rlc_die("config: data.val_files is empty: validation needs a JSONL or Parquet file");
    rlc_config_loss_cfg(c, &g->loss_cfg);
    rlc_config_adv_cfg(c, &g->step_cfg.adv);
    g->step_cfg.use_kl_in_reward = c->algorithm.use_kl_in_reward;
    g->step_cfg.kl_penalty = rlc_config_kl_penalty(c);
    rlc_config_kl_ctrl(c, &g->kl_ctrl);
    g->temperature = (float)c->actor_rollout_ref.rollout.temperature;
    if (!(g->temperature > 0)) g->temperature = 1.0f;
    g->want_entropy_update = c->actor_rollout_ref.actor.entropy_coeff != 0 || c->actor_rollout_ref.actor.calculate_entropy;
    char *rcmd = rlc_config_reward_command(c);
    rlc_reward_init(&g->reward, rcmd, c->custom_reward_function.timeout_s);
    free(rcmd);

    const char *dir = c->trainer.default_local_dir;
    g->run_dir = rlc_strdup(dir);
    rlc_mkdirs(g->run_dir);
    g->metrics_path = rlc_path_join(g->run_dir, val_only ? "eval_metrics.jsonl" : "metrics.jsonl");
    for (int64_t i = 0; i < c->trainer.logger.n && g->root && !g->tb; i++)
        if (!strcmp(c->trainer.logger.v[i], "tensorboard")) {
            char *tbd = tb_log_dir(c->trainer.project_name, c->trainer.experiment_name);
            g->tb = rlc_malloc(sizeof *g->tb);
            tb_writer_init(g->tb, tbd);
            fprintf(stdout, "rlc: tensorboard: %s\n", g->tb->path);
            free(tbd);
        }
    g->data_seed = c->data.seed == RLC_CFG_NULL ? 1 : (uint64_t)c->data.seed;
    const char *dd = getenv("RLC_GRPO_DUMP");
    g->dump_dir = dd && *dd ? dd : NULL;
    const char *cs = getenv("RLC_TEST_CRASH_IN_CHECKPOINT");
    g->crash_step = cs && *cs ? atoll(cs) : -1;
    g->nan_lr_step = getenv("RLC_TEST_NONFINITE_LR") ? atoll(getenv("RLC_TEST_NONFINITE_LR")) : -1;

    const __typeof__(c->actor_rollout_ref.actor) *ac = &c->actor_rollout_ref.actor;
    engine_config ec;
    engine_config_default(&ec);
    ec.adam.beta1 = ac->optim.betas[0];
    ec.adam.beta2 = ac->optim.betas[1];
    ec.adam.eps = ac->optim.eps;
    ec.adam.weight_decay = ac->optim.weight_decay;
    ec.lr = ac->optim.lr;
    const char *sname = rlc_config_lr_scheduler(c, &ec.min_lr);
    int st = lr_sched_type_parse(sname);
    if (st < 0) rlc_die("config: actor_rollout_ref.actor.optim.lr_scheduler_type '%s' is not constant or cosine", sname);
    ec.lr_sched = (lr_sched_type)st;
    ec.clip_grad = ac->optim.clip_grad;
    if (decoder_ckpt_parse(ac->activation_checkpoint, &ec.ckpt) != 0)
        rlc_die("config: actor_rollout_ref.actor.activation_checkpoint '%s' is not none, selective or full",
                ac->activation_checkpoint);
    ec.temperature = g->temperature;
    if (g->have_train) {
        if (c->data.train_batch_size > g->train.n)
            rlc_die("config: data.train_batch_size=%lld exceeds the %lld training prompts", (long long)c->data.train_batch_size,
                    (long long)g->train.n);
        g->steps_per_epoch = g->train.n / c->data.train_batch_size;   // drop_last, as verl's dataloader
        // verl: total_training_steps = len(dataloader) * total_epochs unless trainer.total_training_steps is set
        g->total_steps = c->trainer.total_training_steps != RLC_CFG_NULL && c->trainer.total_training_steps > 0
                             ? c->trainer.total_training_steps
                             : g->steps_per_epoch * c->trainer.total_epochs;
        if (c->data.train_batch_size % ac->ppo_mini_batch_size != 0)
            rlc_die("config: data.train_batch_size=%lld must be a multiple of actor_rollout_ref.actor.ppo_mini_batch_size=%lld",
                    (long long)c->data.train_batch_size, (long long)ac->ppo_mini_batch_size);
        if (!ac->use_dynamic_bsz && ac->ppo_micro_batch_size_per_gpu == RLC_CFG_NULL)
            rlc_die("config: set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu, or use_dynamic_bsz=true");
        if (c->data.train_batch_size % g->W != 0)
            rlc_die("config: data.train_batch_size=%lld must be a multiple of the number of ranks %d",
                    (long long)c->data.train_batch_size, g->W);
        int64_t mini = ac->ppo_mini_batch_size * c->actor_rollout_ref.rollout.n;
        if (mini > c->data.train_batch_size * c->actor_rollout_ref.rollout.n) mini = c->data.train_batch_size * c->actor_rollout_ref.rollout.n;
        if (mini % g->W != 0)
            rlc_die("config: actor_rollout_ref.actor.ppo_mini_batch_size=%lld x rollout.n=%lld sequences must be a multiple of "
                    "the number of ranks %d", (long long)ac->ppo_mini_batch_size, (long long)c->actor_rollout_ref.rollout.n, g->W);
    }
    int64_t horizon = g->total_steps > 0 ? g->total_steps : 1;   // actor.optim.total_training_steps
    // TorchTitan's schedule runs over its own TrainingConfig.steps (10000): verl does not pass its total
    // into it, only the warmup derived from it (spec §7).
    ec.total_steps = !strcmp(c->model_engine, "torchtitan") ? 10000 : horizon;
    ec.warmup_steps = lr_resolve_warmup(ac->optim.lr_warmup_steps, ac->optim.lr_warmup_steps_ratio, horizon);
    ec.no_state = g->W > 1;   // the gradient and the moments live in the fsdp shards (grpo_run_dist)
    engine_init(&g->eng, &g->model, &ec);

    g->have_ref = !val_only && (ac->use_kl_loss || c->algorithm.use_kl_in_reward);
    if (g->have_ref) {   // frozen copy of the initial weights
        param_set_init(&g->ref_params, &g->pl);
        memcpy(g->ref_params.data, g->params.data, sizeof(float) * (size_t)g->pl.numel);
        decoder_model_init(&g->ref_model, &g->pl, &g->ref_params, &g->be);
    }
}

static void grpo_teardown(grpo *g) {
    if (g->rollout) rollout_engine_free(g->rollout);
    if (g->have_fs) fsdp_free(&g->fs);
    if (g->have_ref_fs) fsdp_free(&g->ref_fs);
    free(g->resume_opt);
    if (g->have_ref) { decoder_model_free(&g->ref_model); param_set_free(&g->ref_params); }
    engine_free(&g->eng);
    decoder_model_free(&g->model);
    param_set_free(&g->params);
    param_layout_free(&g->pl);
    if (g->have_train) rlc_dataset_free(&g->train);
    if (g->have_val) rlc_dataset_free(&g->val);
    rlc_reward_free(&g->reward);
    rlc_tok_free(g->tok);
    free(g->run_dir);
    free(g->metrics_path);
    if (g->tb) { tb_writer_free(g->tb); free(g->tb); }
}

static void run_validation(grpo *g, rlc_metrics *m) {
    double t = rlc_now();
    validate(g, m);
    rlc_metrics_set(m, "timing_s/testing", rlc_now() - t);
}

int grpo_run(const rlc_train_config *c, int val_only) { return grpo_run_dist(c, val_only, NULL); }

int grpo_run_dist(const rlc_train_config *c, int val_only, dist_ctx *dc) {
    grpo g;
    grpo_setup(&g, c, val_only, dc);
    char *cfg_path = rlc_path_join(g.run_dir, val_only ? "eval_config.yaml" : "config.yaml");
    if (g.root) rlc_config_save(c, cfg_path);
    free(cfg_path);
    fprintf(stdout, "rlc: model %s: %lld parameters, %d layers; BLAS %s, %d threads\n", c->actor_rollout_ref.model.path,
            (long long)g.pl.numel, g.mcfg.num_hidden_layers, g.be.blas_core, g.be.n_threads);
    rlc_metrics m;
    rlc_metrics_init(&m);

    if (val_only) {
        run_validation(&g, &m);   // W > 1: every rank validates the whole set (the same result); rank 0 writes
        if (g.root) rlc_metrics_append_jsonl(&m, g.metrics_path);
        if (g.tb) tb_write_metrics(g.tb, &m, g.global_step);
        char *line = rlc_metrics_to_json(&m);
        fprintf(stdout, "%s\n", line);
        free(line);
        rlc_metrics_free(&m);
        grpo_teardown(&g);
        return 0;
    }

    // resume (verl trainer.resume_mode): auto = the latest complete checkpoint in default_local_dir if any,
    // resume_path = trainer.resume_from_path (a global_step_N directory), disable = from scratch.
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
    } else if (strcmp(rm, "disable") != 0) {
        rlc_die("config: trainer.resume_mode '%s' is not auto, disable or resume_path", rm);
    }
    if (resumed >= 0) {
        truncate_metrics(&g, resumed);
        fprintf(stdout, "rlc: resumed from global_step_%lld (epoch %lld, batch %lld)\n", (long long)resumed, (long long)g.epoch,
                (long long)g.batch_in_epoch);
    } else if (rlc_file_exists(g.metrics_path)) {
        truncate_metrics(&g, -1);   // a fresh run starts a fresh log
    }
    // TensorBoard's counterpart of the truncation: earlier event files' steps from here on are dropped
    if (g.tb) tb_write_session_start(g.tb, resumed >= 0 ? resumed + 1 : 0);

    if (g.W > 1) {   // sharded state from the (loaded) full weights; g.params stays as the rollout copy
        fsdp_memory mr, rr = {0, 0, 0, 0};
        if (g.have_ref) {   // the reference weights sharded too (frozen state: params only), first, so that its
            // full copy is gone before the actor's shards exist (the peak at start)
            fsdp_init_frozen(&g.ref_fs, g.d, &g.pl, g.ref_params.data);
            g.have_ref_fs = 1;
            param_set_free(&g.ref_params);
            for (int b = 0; b < g.pl.n_blocks; b++) g.ref_model.block_w[b] = NULL;
            fsdp_attach(&g.ref_fs, &g.ref_model, 0);
        }
        fsdp_init(&g.fs, g.d, &g.pl, g.params.data, &g.eng.cfg.adam);
        g.have_fs = 1;
        // the ref pass and the update never overlap: the reference uses the actor's gather slots
        if (g.have_ref) {
            fsdp_share_slots(&g.ref_fs, &g.fs);
            rr = fsdp_memory_report(&g.ref_fs);
        }
        mr = fsdp_memory_report(&g.fs);
        if (g.resume_opt) g.eng.sched.step = fsdp_load_optimizer(&g.fs, g.resume_opt);
        const double MiB = 1024.0 * 1024.0;
        fprintf(stdout,
                "rlc: dist: %d ranks; per rank: sharded state %.3f MiB (params+grads+AdamW m,v; one process %.3f MiB), "
                "gather slots %.3f MiB, gradient staging %.3f MiB, rollout weights copy %.3f MiB, reference weights "
                "shard %.3f MiB + slots %.3f MiB (one process %.3f MiB)\n",
                g.W, mr.shard_bytes / MiB, mr.unsharded_bytes / MiB, mr.slot_bytes / MiB, mr.grad_stage_bytes / MiB,
                g.pl.numel * 4.0 / MiB, rr.shard_bytes / MiB, rr.slot_bytes / MiB, g.have_ref ? g.pl.numel * 4.0 / MiB : 0.0);
        fflush(stdout);
    }
    progress_init(&g.prog, stdout, g.root ? -1 : 0, g.global_step, g.total_steps, 1);
    rollout_config rc;
    rollout_cfg_from(&g, &rc, 0);
    g.rollout = rollout_engine_new(&g.model, &rc);

    // val_before_train: at step 0 only (a resumed run does not validate again; see docs/grpo.md)
    if (c->trainer.val_before_train && g.have_val && g.global_step == 0) {
        run_validation(&g, &m);
        rlc_metrics_set(&m, "training/global_step", 0);
        log_step(&g, &m);
        rlc_metrics_clear(&m);
    }

    int64_t *perm = rlc_malloc(sizeof(int64_t) * (size_t)g.train.n);
    int64_t perm_epoch = -1;
    int64_t B = c->data.train_batch_size;
    while (g.global_step < g.total_steps) {
        if (g.epoch >= c->trainer.total_epochs) {   // verl's fit loop ends with the epochs
            fprintf(stdout, "rlc: trainer.total_epochs=%lld done after %lld steps (total_training_steps %lld)\n",
                    (long long)c->trainer.total_epochs, (long long)g.global_step, (long long)g.total_steps);
            break;
        }
        if (perm_epoch != g.epoch) { epoch_order(&g, g.epoch, perm); perm_epoch = g.epoch; }
        int64_t epoch = g.epoch;
        rlc_metrics_set(&m, "training/global_step", (double)(g.global_step + 1));
        rlc_metrics_set(&m, "training/epoch", (double)epoch);
        train_step(&g, perm + g.batch_in_epoch * B, &m);
        int last = g.global_step >= g.total_steps;
        if (c->trainer.test_freq > 0 && g.have_val && (g.global_step % c->trainer.test_freq == 0 || last))
            run_validation(&g, &m);
        log_step(&g, &m);
        rlc_metrics_clear(&m);
    }
    progress_end(&g.prog);
    free(perm);
    rlc_metrics_free(&m);
    // The curves a person looks at.
    const char *keys[] = {"critic/score/mean", "val-core/openai/gsm8k/acc/mean@1", "response_length/mean", "actor/kl_loss",
                          "actor/entropy", "actor/grad_norm"};
    char *svg = rlc_path_join(g.run_dir, "curves.svg");
    if (g.root) plot_metrics_file(g.metrics_path, svg, "rlc GRPO", "training/global_step", keys, 6);
    fprintf(stdout, "rlc: done: %lld steps; metrics %s, curves %s\n", (long long)g.global_step, g.metrics_path, svg);
    free(svg);
    grpo_teardown(&g);
    return 0;
}
