// step_batch.c: the step batch, its packing, balanced parts and micro-batches, and its data-parallel gather.
#include "trainer/step_batch.h"

#include <string.h>

#include "core/common.h"
#include "core/strbuf.h"

void step_batch_free(step_batch *s) {
    if (s->res)
        for (int i = 0; i < s->B; i++) rlc_reward_result_free(&s->res[i]);
    free(s->res);
    free(s->ds_index); free(s->plen); free(s->rlen); free(s->cu); free(s->tokens); free(s->targets);
    free(s->loss_mask); free(s->rollout_lp); free(s->old_lp); free(s->ref_lp); free(s->entropy); free(s->values); free(s->mask);
    free(s->score); free(s->scores); free(s->rewards); free(s->adv); free(s->returns); free(s->finish);
    free(s->agent);
    for (int i = 0; i < s->n_env; i++) free(s->env_keys[i]);
    free(s->env_keys);
    free(s->env_means);
    memset(s, 0, sizeof *s);
}

void step_batch_alloc(step_batch *sb, int n_prompts, int n, int64_t T, int64_t Tr) {
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

int64_t step_batch_put(step_batch *sb, int i, int64_t off, const int32_t *prompt, int64_t pl, const int32_t *resp,
                       int64_t rl, const float *lp) {
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

void step_batch_take_groups(step_batch *out, step_batch *src, uint8_t *const *keep, int nsrc) {
    CHECK(nsrc >= 1, "no generated batch");
    const int n = src[0].n;
    int ng = 0, have_res = 1;
    int64_t T = 0, Tr = 1;
    for (int k = 0; k < nsrc; k++) {
        CHECK_EQ(src[k].n, n, "samples per group");
        have_res &= src[k].res != NULL;
        for (int i = 0; i < src[k].B; i++) {
            if (!keep[k][i / n]) continue;
            T += src[k].plen[i] + src[k].rlen[i];
            if (src[k].rlen[i] > Tr) Tr = src[k].rlen[i];
        }
        for (int gi = 0; gi < src[k].n_prompts; gi++) ng += keep[k][gi] != 0;
    }
    step_batch_alloc(out, ng, n, T, Tr);
    out->score = rlc_malloc(sizeof(float) * (size_t)(out->B > 0 ? out->B : 1));
    if (have_res) out->res = rlc_calloc((size_t)(out->B > 0 ? out->B : 1), sizeof *out->res);
    if (src[0].agent) out->agent = rlc_calloc((size_t)(out->B > 0 ? out->B : 1), sizeof *out->agent);
    int j = 0;
    int64_t off = 0;
    for (int k = 0; k < nsrc; k++) {
        step_batch *s = &src[k];
        for (int i = 0; i < s->B; i++) {
            if (!keep[k][i / n]) continue;
            const int32_t *seq = s->tokens + s->cu[i];
            out->ds_index[j] = s->ds_index[i];
            out->finish[j] = s->finish[i];
            out->score[j] = s->score[i];
            if (have_res) { out->res[j] = s->res[i]; memset(&s->res[i], 0, sizeof s->res[i]); }
            off = step_batch_put(out, j, off, seq, s->plen[i], seq + s->plen[i], s->rlen[i], s->rollout_lp + (size_t)i * s->Tr);
            if (out->agent) {   // the response mask of a multi-turn trajectory (1 on sampled tokens only)
                out->agent[j] = s->agent[i];
                step_batch_mask_response(out, j, s->mask + (size_t)i * s->Tr);
            }
            j++;
        }
    }
}

void step_batch_mask_response(step_batch *sb, int i, const float *m) {
    float *row = sb->mask + (size_t)i * (size_t)sb->Tr;
    float *lm = sb->loss_mask + sb->cu[i] + sb->plen[i] - 1;   // the position predicting response token k is lm[k]
    for (int64_t k = 0; k < sb->rlen[i]; k++) row[k] = lm[k] = m[k];
}

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

void step_batch_gather(dist_ctx *d, const step_batch *loc, step_batch *sb) {
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
    // pass 2: the same packing as one process's generation
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

void step_batch_balance(rlc_partition *part, const step_batch *sb, const int *rows, int n, int W) {
    int64_t *wl = rlc_malloc(sizeof(int64_t) * (size_t)n);
    for (int s = 0; s < n; s++) wl[s] = rlc_seqlen_workload(sb->cu[rows[s] + 1] - sb->cu[rows[s]]);
    rlc_balanced_partitions(part, wl, n, W, 1);
    free(wl);
}

void step_batch_share_rows(dist_ctx *d, const rlc_partition *part, const step_batch *sb, float *padded) {
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

void packed_rows_init(packed_rows *p, const step_batch *sb, const int *rows, int n) {
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
void packed_rows_free(packed_rows *p) { free(p->cu); free(p->tokens); free(p->targets); free(p->loss_mask); }

int step_batch_micro_batches(const step_batch *sb, int *rows, int n, int64_t max_tokens, const char *key, int *starts) {
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

