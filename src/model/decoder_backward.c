// decoder_backward.c: the decoder's loss-agnostic backward, seeded by d(logp) and d(entropy) through the head
// (decoder_backward) or by d(hidden) from a head the caller differentiates (decoder_backward_hidden). Below the
// head it walks the layers in reverse, recomputing what the checkpoint mode did not keep, and accumulates every
// weight gradient (+=) into the gradient set or the data-parallel layer's per-block buffers, and the LoRA side
// path's dA, dB where adapters are attached.
#include <string.h>

#include "core/common.h"
#include "model/decoder_internal.h"

// Given dy (T, out) of projection p: dB += s·dyᵀ·u; du = s·dy·B; dA += duᵀ·x; dx (T, in) += du·A. du: (T, r) scratch.
static void lora_bwd(const decoder_model *m, const layer_acts *la, float *du, int l, int p, float *dx, const float *dy,
                     const float *x, int64_t T) {
    if (!lora_active(m)) return;
    const lora_layout *ll = m->lora;
    const int64_t i = (int64_t)l * LORA_NPROJ + p;
    if (ll->a_off[i] < 0) return;
    const int64_t r = ll->rank, in = ll->in[p], out = ll->out[p];
    const float *u = la->lora_u + p * la->lora_ld, *A = m->lora_w + ll->a_off[i], *B = m->lora_w + ll->b_off[i];
    if (m->lora_grad) backend_sgemm(1, 0, out, r, T, ll->scale, dy, out, u, r, 1.f, m->lora_grad + ll->b_off[i], r);
    backend_sgemm(0, 0, T, r, out, ll->scale, dy, out, B, r, 0.f, du, r);
    if (m->lora_grad) backend_sgemm(1, 0, r, in, T, 1.f, du, r, x, in, 1.f, m->lora_grad + ll->a_off[i], in);
    backend_sgemm(0, 0, T, in, r, 1.f, du, r, A, in, 1.f, dx, in);
}

void decoder_backward(decoder_model *m, decoder_acts *a, const decoder_batch *b, const int32_t *targets, float temperature,
                    const float *dlogp, const float *dentropy, param_set *grads) {
    CHECK(a && a->have_forward && a->have_head && a->T == b->T,
          "decoder_backward needs decoder_forward and decoder_logprob with acts on the same batch first");
    CHECK(temperature == a->head_temperature, "temperature %g != forward's %g", temperature, a->head_temperature);
    const int frozen = m->base_frozen;
    CHECK(frozen || m->get_grad_block || (grads && grads->layout->numel == m->pl->numel), "grads layout: %lld != %lld elements",
          grads ? (long long)grads->layout->numel : -1LL, (long long)m->pl->numel);
    CHECK(a->lora_fwd == lora_active(m), "the LoRA side path was %s in the forward but is %s now", a->lora_fwd ? "on" : "off",
          lora_active(m) ? "on" : "off");
    dims d = dims_of(m->cfg);
    const int nb = m->pl->n_blocks, tied = m->cfg->tie_word_embeddings;
    const int64_t T = b->T, H = d.H;
    int np = 0;
    int *st = dec_split_plan(m, b, 1, &np);
    if (st) {
        const head_seed hs = {targets, temperature, dlogp, dentropy};
        dec_backward_split(m, a, b, st, np, grads, &hs);
        free(st);
        return;
    }

    // head, then the rest
    // a frozen base gets no gradient: only d(hidden) flows, through the base and the side path
    float *g_head = frozen ? NULL : tied ? grad_block(m, grads, 0) : grad_block(m, grads, nb - 1) + H;
    dec_head_bwd(m, a, g_head, dlogp, dentropy, targets, T, temperature);
    dec_backward_from_hidden(m, a, b, grads);
}

void decoder_backward_hidden(decoder_model *m, decoder_acts *a, const decoder_batch *b, const float *dhidden, param_set *grads) {
    CHECK(a && a->have_forward && a->T == b->T, "decoder_backward_hidden needs decoder_forward with acts on the same batch first");
    CHECK(m->base_frozen || m->get_grad_block || (grads && grads->layout->numel == m->pl->numel),
          "grads layout: %lld != %lld elements", grads ? (long long)grads->layout->numel : -1LL, (long long)m->pl->numel);
    CHECK(a->lora_fwd == lora_active(m), "the LoRA side path was %s in the forward but is %s now", a->lora_fwd ? "on" : "off",
          lora_active(m) ? "on" : "off");
    memcpy(a->dhid, dhidden, sizeof(float) * (size_t)(b->T * m->cfg->hidden_size));
    int np = 0;
    int *st = dec_split_plan(m, b, 1, &np);
    if (st) {
        dec_backward_split(m, a, b, st, np, grads, NULL);
        free(st);
        return;
    }
    dec_backward_from_hidden(m, a, b, grads);
}

// The backward below the output head, seeded by a->dhid (T, H) = d loss / d final-normed hidden.
void dec_backward_from_hidden(decoder_model *m, decoder_acts *a, const decoder_batch *b, param_set *grads) {
    dims d = dims_of(m->cfg);
    const int nb = m->pl->n_blocks;
    const int64_t T = b->T, H = d.H, I = d.I, QD = d.QD, KD = d.KD;
    const int nh = (int)d.nh, nkv = (int)d.nkv, D = (int)d.D;
    const int frozen = m->base_frozen;
    float *dx = a->dx, *dh = a->dh;
    rmsnorm_backward_off_set(dx, frozen ? NULL : grad_block(m, grads, nb - 1), a->dhid, a->x_final, final_norm_w(m), d.w_off, a->rstd_f,
                         T, H);
    if (!frozen) grad_done(m, nb - 1);

    layer_weights lw, gw;
    float *du = a->lora_fwd ? a->lora_mem + a->lora_numel - a->T_max * m->lora->rank : NULL;   // (T, r) side-path scratch
    for (int l = (int)d.L - 1; l >= 0; l--) {
        layer_view(m, l, &lw);
        if (frozen) memset(&gw, 0, sizeof gw);   // every base gradient pointer NULL: the kernels skip them
        else param_layer_view(m->pl, grad_block(m, grads, 1 + l), &gw);
        layer_acts *la = &a->la[l];
        if (a->mode != CKPT_NONE) {
            dec_layer_forward(m, l, &lw, la, NULL, b, a->mode == CKPT_FULL);
            if (!d.sandwich) dec_lora_fwd(m, la, l, LORA_DOWN, NULL, la->act, T);   // the recompute stopped before down's u
        }
        const rope_table *rt = decoder_rope(m, l);

        // MLP: x_out = x_mid + down(act(gate) * up) (sandwich: + post_ff_norm(down(...)))
        const float *dmo = dx;   // d loss / d down(act)
        if (d.sandwich) {
            if (a->mode != CKPT_NONE) {   // the recompute stopped at act: mlp_o and its rstd are needed here
                mm_fwd(la->mlp_o, 0.f, la->act, lw.w_down, T, I, H);
                dec_lora_fwd(m, la, l, LORA_DOWN, la->mlp_o, la->act, T);
                if (lw.b_down) bias_forward(la->mlp_o, lw.b_down, T, H);
                rmsnorm_forward_off(a->dh, la->rstd_mo, la->mlp_o, lw.post_ff_norm, d.w_off, T, H, d.eps);
            }
            rmsnorm_backward_off_set(a->dS, gw.post_ff_norm, dx, la->mlp_o, lw.post_ff_norm, d.w_off, la->rstd_mo, T, H);
            dmo = a->dS;
        }
        float *dact = a->dA, *dgate = a->dG, *dup = a->dU;
        mm_bwd_in(dact, 0.f, dmo, lw.w_down, T, I, H);
        lora_bwd(m, la, du, l, LORA_DOWN, dact, dmo, la->act, T);
        mm_bwd_w(gw.w_down, dmo, la->act, T, I, H);
        if (gw.b_down) bias_backward(gw.b_down, dmo, T, H);
        glu_backward_set(dgate, dup, dact, la->gate, la->up, T * I, m->cfg->hidden_act);
        if (gw.b_gate) {
            bias_backward(gw.b_gate, dgate, T, I);
            bias_backward(gw.b_up, dup, T, I);
        }
        mm_bwd_in(dh, 0.f, dgate, lw.w_gate, T, H, I);
        mm_bwd_in(dh, 1.f, dup, lw.w_up, T, H, I);
        lora_bwd(m, la, du, l, LORA_GATE, dh, dgate, la->h2, T);
        lora_bwd(m, la, du, l, LORA_UP, dh, dup, la->h2, T);
        mm_bwd_w(gw.w_gate, dgate, la->h2, T, H, I);
        mm_bwd_w(gw.w_up, dup, la->h2, T, H, I);
        if (d.sandwich) rmsnorm_backward_off(dx, gw.pre_ff_norm, dh, la->x_mid, lw.pre_ff_norm, d.w_off, la->rstd2, T, H);
        else rmsnorm_backward_off(dx, gw.post_norm, dh, la->x_mid, lw.post_norm, d.w_off, la->rstd2, T, H);

        // attention: x_mid = x_in + o_proj(attn(rope(qk_norm(q)), rope(qk_norm(k)), v)) (sandwich: post_attn_norm(o_proj))
        const float *dao = dx;   // d loss / d o_proj(attn)
        if (d.sandwich) {
            rmsnorm_backward_off_set(a->dS, gw.post_norm, dx, la->attn_o, lw.post_norm, d.w_off, la->rstd_ao, T, H);
            dao = a->dS;
        }
        float *dattn = a->dA;
        float *dq = a->dG, *dk = a->dG + T * QD, *dv = a->dG + T * (QD + KD);
        mm_bwd_in(dattn, 0.f, dao, lw.wo, T, QD, H);
        lora_bwd(m, la, du, l, LORA_O, dattn, dao, la->attn, T);
        mm_bwd_w(gw.wo, dao, la->attn, T, QD, H);
        if (gw.bo) bias_backward(gw.bo, dao, T, H);
        zero_par(a->dG, T * (QD + 2 * KD));
        attention_backward_sw(dq, dk, dv, dattn, la->attn, la->lse, la->q, la->k, la->v, b->cu_seqlens, b->n_seqs, nh, nkv, D,
                              m->cfg->attn_scale, decoder_layer_window(m->cfg, l));
        rope_backward(dq, b->pos, rt, T, nh);
        rope_backward(dk, b->pos, rt, T, nkv);
        float *dqp = dq, *dkp = dk;   // d loss / d q_proj(h1), k_proj(h1)
        if (d.qk_norm) {
            dqp = a->dU;
            dkp = a->dU + T * QD;
            rmsnorm_backward_off_set(dqp, gw.q_norm, dq, la->q_pre, lw.q_norm, d.w_off, la->rstd_q, T * nh, D);
            rmsnorm_backward_off_set(dkp, gw.k_norm, dk, la->k_pre, lw.k_norm, d.w_off, la->rstd_k, T * nkv, D);
        }
        if (gw.bq) {
            bias_backward(gw.bq, dqp, T, QD);
            bias_backward(gw.bk, dkp, T, KD);
            bias_backward(gw.bv, dv, T, KD);
        }
        mm_bwd_in(dh, 0.f, dqp, lw.wq, T, H, QD);
        mm_bwd_in(dh, 1.f, dkp, lw.wk, T, H, KD);
        mm_bwd_in(dh, 1.f, dv, lw.wv, T, H, KD);
        lora_bwd(m, la, du, l, LORA_Q, dh, dqp, la->h1, T);
        lora_bwd(m, la, du, l, LORA_K, dh, dkp, la->h1, T);
        lora_bwd(m, la, du, l, LORA_V, dh, dv, la->h1, T);
        mm_bwd_w(gw.wq, dqp, la->h1, T, H, QD);
        mm_bwd_w(gw.wk, dkp, la->h1, T, H, KD);
        mm_bwd_w(gw.wv, dv, la->h1, T, H, KD);
        rmsnorm_backward_off(dx, gw.in_norm, dh, la->x_in, lw.in_norm, d.w_off, la->rstd1, T, H);
        if (!frozen) grad_done(m, 1 + l);
    }
    if (frozen) return;   // the embedding is frozen too
    // x = embed_tokens[tokens] * embed_scale
    if (m->cfg->embed_scale != 1.0f) {
        const float sc = m->cfg->embed_scale;
#pragma omp parallel for schedule(static) if (T * H > (1 << 16))
        for (int64_t i = 0; i < T * H; i++) dx[i] *= sc;
    }
    embedding_backward(grad_block(m, grads, 0), dx, b->tokens, T, H);
    grad_done(m, 0);
}
