// decoder_split.c: the sequence split of small models. A packed batch is cut at sequence boundaries into one
// part per thread and each part runs through every layer inside one parallel region (forward and backward),
// with private weight gradients added in part order, so results depend on the thread count only. The plan
// decides when the batch stays whole; decoder.c, decoder_head.c and decoder_backward.c call in here.
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/common.h"
#include "model/decoder_internal.h"

// ---- sequence split (small models) -----------------------------------------------------------------------
// At a small model's shapes (hidden 128-256) each kernel or sgemm over a packed batch is some tens of
// microseconds of work, and threading each one on its own (a fork/join per kernel, OpenBLAS's hand-off per
// sgemm) costs about as much as the work. Every piece of a layer is local to a token row (norms, products,
// RoPE, activations) or to a sequence (attention), so the batch is cut instead at sequence boundaries into one
// contiguous part per thread, and each thread runs its part through every layer: one parallel region per
// forward, head or backward, the kernels inside on the calling thread (their own parallel regions are nested,
// hence one thread; OpenBLAS runs single-threaded inside a parallel region). Weight gradients of part k > 0
// go to a private buffer, added to the caller's in part order after the region. Parts depend on the batch and
// the thread count only, so results do too (as the threaded kernels' do), never on timing.

#define SPLIT_MAX_PARAMS ((int64_t)16 << 20)   // automatic split up to 16M parameters (a private gradient per thread)
#define SPLIT_MAX_IMBALANCE 1.5                // ... and only where no part exceeds 1.5x an even share of tokens

// Part boundaries st (n_parts + 1 sequence indices, st[0] = 0, st[n_parts] = n_seqs): each boundary the sequence
// start closest to an even share of tokens, at least one sequence a part. NULL where the batch stays whole:
// one thread, already inside a parallel region, fewer sequences than threads, adapters attached (on or off: the
// side path shares its buffers, and a reference pass with the adapters off stays bitwise the policy's at B = 0)
// or a data-parallel seam (callbacks that must run on the calling thread), a large model, or a lopsided split.
int *dec_split_plan(const decoder_model *m, const decoder_batch *b, int for_backward, int *n_parts) {
    const int mode = m->be ? m->be->row_split : 0;
    const int nth = omp_get_max_threads();
    if (mode < 0 || nth < 2 || omp_in_parallel() || b->n_seqs < nth) return NULL;
    if (m->lora || m->get_block || (for_backward && (m->base_frozen || m->get_grad_block || m->grad_block_done)))
        return NULL;
    if (mode == 0 && m->pl->numel > SPLIT_MAX_PARAMS) return NULL;
    const int32_t *cu = b->cu_seqlens;
    int *st = rlc_malloc(((size_t)nth + 1) * sizeof(int));
    st[0] = 0;
    int64_t worst = 0;
    for (int k = 1; k < nth; k++) {
        const double target = (double)b->T * k / nth;
        int s = st[k - 1] + 1;
        const int smax = b->n_seqs - (nth - k);
        while (s < smax && fabs(cu[s + 1] - target) <= fabs(cu[s] - target)) s++;
        st[k] = s;
    }
    st[nth] = b->n_seqs;
    for (int k = 0; k < nth; k++) worst = max64(worst, cu[st[k + 1]] - cu[st[k]]);
    if (mode == 0 && (double)worst > SPLIT_MAX_IMBALANCE * (double)b->T / nth) {
        free(st);
        return NULL;
    }
    *n_parts = nth;
    return st;
}

// Part k of batch b: its sequences, with cu_seqlens rebased into cu_buf (n_seqs + n_parts + 1 entries, shared
// by the parts: part k's at st[k] + k).
static decoder_batch part_batch(const decoder_batch *b, const int *st, int k, int32_t *cu_buf) {
    const int s0 = st[k], s1 = st[k + 1];
    const int32_t r0 = b->cu_seqlens[s0];
    int32_t *cu = cu_buf + s0 + k;
    for (int s = s0; s <= s1; s++) cu[s - s0] = b->cu_seqlens[s] - r0;
    decoder_batch pb = {.T = b->cu_seqlens[s1] - r0, .n_seqs = s1 - s0, .tokens = b->tokens + r0, .cu_seqlens = cu,
                        .pos = b->pos + r0, .max_seqlen = b->max_seqlen};
    return pb;
}

// dst = the rows from r0 on of every per-token buffer of src (all are row-major over tokens).
static void layer_rows(layer_acts *dst, const layer_acts *src, const dims *d, int64_t r0) {
#define ROWS(f, w) dst->f = src->f ? src->f + r0 * (w) : NULL
    ROWS(x_in, d->H); ROWS(h1, d->H); ROWS(rstd1, 1); ROWS(q_pre, d->QD); ROWS(rstd_q, d->nh); ROWS(k_pre, d->KD);
    ROWS(rstd_k, d->nkv); ROWS(q, d->QD); ROWS(k, d->KD); ROWS(v, d->KD); ROWS(attn, d->QD); ROWS(lse, d->nh);
    ROWS(x_mid, d->H); ROWS(h2, d->H); ROWS(rstd2, 1); ROWS(gate, d->I); ROWS(up, d->I); ROWS(act, d->I);
    ROWS(attn_o, d->H); ROWS(rstd_ao, 1); ROWS(mlp_o, d->H); ROWS(rstd_mo, 1);
#undef ROWS
    dst->lora_u = NULL;   // the split never runs the side path
    dst->lora_ld = 0;
}

// dst = the view of a from row r0 on; la (L) receives the layers' views.
static void acts_rows(decoder_acts *dst, const decoder_acts *a, layer_acts *la, int64_t r0) {
    const dims d = dims_of(&a->cfg);
    *dst = *a;
    dst->la = la;
    for (int64_t l = 0; l < d.L; l++) layer_rows(&la[l], &a->la[l], &d, r0);
    layer_rows(&dst->sc, &a->sc, &d, r0);
    dst->x_final = a->x_final + r0 * d.H;
    dst->rstd_f = a->rstd_f + r0;
    dst->hidden = a->hidden + r0 * d.H;
    dst->head_lse = a->head_lse + r0;
    dst->head_ent = a->head_ent + r0;
    dst->head_g = a->head_g ? a->head_g + r0 * d.H : NULL;
    dst->head_ge = a->head_ge ? a->head_ge + r0 * d.H : NULL;
    dst->dx = a->dx + r0 * d.H;
    dst->dh = a->dh + r0 * d.H;
    dst->dhid = a->dhid + r0 * d.H;
    dst->dA = a->dA + r0 * max64(d.I, d.QD);
    dst->dG = a->dG + r0 * max64(d.I, d.QD + 2 * d.KD);
    dst->dU = a->dU + r0 * max64(d.I, d.QD + d.KD);
    dst->dS = a->dS ? a->dS + r0 * d.H : NULL;
    dst->lora_fwd = 0;
}

// The forward of decoder_forward, part by part: saved activations in a, or the inference scratch (a NULL).
void dec_forward_split(const decoder_model *m, decoder_acts *a, const decoder_batch *b, const int *st, int np) {
    const dims d = dims_of(m->cfg);
    int32_t *cu_buf = rlc_malloc(((size_t)b->n_seqs + (size_t)np + 1) * sizeof(int32_t));
#pragma omp parallel for schedule(static, 1) num_threads(np)
    for (int k = 0; k < np; k++) {
        const decoder_batch pb = part_batch(b, st, k, cu_buf);
        const int64_t r0 = b->cu_seqlens[st[k]];
        layer_weights lw;
        if (a) {
            decoder_acts al;
            layer_acts *la = rlc_malloc((size_t)d.L * sizeof(layer_acts));
            acts_rows(&al, a, la, r0);
            dec_embed(m, la[0].x_in, pb.tokens, pb.T);
            for (int l = 0; l < d.L; l++) {
                layer_view(m, l, &lw);
                dec_layer_forward(m, l, &lw, &la[l], l + 1 < d.L ? la[l + 1].x_in : al.x_final, &pb, 1);
            }
            rmsnorm_forward_off(al.hidden, al.rstd_f, al.x_final, final_norm_w(m), d.w_off, pb.T, d.H, d.eps);
            free(la);
        } else {
            decoder_ws *ws = m->ws;
            layer_acts whole = ws->la, la;
            whole.x_in = whole.x_mid = ws->x;
            whole.attn = ws->attn;
            whole.lse = ws->lse;
            layer_rows(&la, &whole, &d, r0);
            dec_embed(m, la.x_in, pb.tokens, pb.T);
            for (int l = 0; l < d.L; l++) {
                layer_view(m, l, &lw);
                dec_layer_forward(m, l, &lw, &la, la.x_in, &pb, 1);
            }
            rmsnorm_forward_off(ws->hidden + r0 * d.H, ws->rstd_f + r0, la.x_in, final_norm_w(m), d.w_off, pb.T, d.H, d.eps);
        }
    }
    free(cu_buf);
}

// The backward, part by part (see "sequence split"): from the head (hs) or from a->dhid already seeded (hs NULL).
// Part 0 accumulates into grads, part k > 0 into a->split_g[k - 1], zeroed here and added to grads afterwards.
void dec_backward_split(decoder_model *m, decoder_acts *a, const decoder_batch *b, const int *st, int np,
                           param_set *grads, const head_seed *hs) {
    const dims d = dims_of(m->cfg);
    const int nb = m->pl->n_blocks, tied = m->cfg->tie_word_embeddings;
    const int64_t numel = m->pl->numel;
    if (a->split_n < np - 1) {
        a->split_g = rlc_realloc(a->split_g, (size_t)(np - 1) * sizeof(param_set));
        for (int i = a->split_n; i < np - 1; i++) param_set_init(&a->split_g[i], m->pl);
        a->bytes += (int64_t)(np - 1 - a->split_n) * numel * (int64_t)sizeof(float);
        a->split_n = np - 1;
    }
    int32_t *cu_buf = rlc_malloc(((size_t)b->n_seqs + (size_t)np + 1) * sizeof(int32_t));
#pragma omp parallel for schedule(static, 1) num_threads(np)
    for (int k = 0; k < np; k++) {
        param_set *g = k == 0 ? grads : &a->split_g[k - 1];
        if (k > 0) memset(g->data, 0, (size_t)numel * sizeof(float));
        const decoder_batch pb = part_batch(b, st, k, cu_buf);
        const int64_t r0 = b->cu_seqlens[st[k]];
        decoder_acts al;
        layer_acts *la = rlc_malloc((size_t)d.L * sizeof(layer_acts));
        acts_rows(&al, a, la, r0);
        if (hs) {
            float *g_head = m->base_frozen ? NULL : tied ? param_block(g, 0) : param_block(g, nb - 1) + d.H;
            dec_head_bwd(m, &al, g_head, hs->dlogp + r0, hs->dentropy ? hs->dentropy + r0 : NULL, hs->targets + r0, pb.T,
                     hs->temperature);
        }
        dec_backward_from_hidden(m, &al, &pb, g);
        free(la);
    }
    free(cu_buf);
    // grads += the other parts' gradients, in part order
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < numel; i++) {
        float s = a->split_g[0].data[i];
        for (int k = 1; k < np - 1; k++) s += a->split_g[k].data[i];
        grads->data[i] += s;
    }
}
