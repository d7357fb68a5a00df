// decoder.c: the dense decoder over packed batches (shared/spec/qwen3.md §1, models.md §4), composed from the
// kernels of kernels.h. Family differences come from the architecture description in model_config: biases of
// the q/k/v/o and MLP products, q/k norms, (1 + w) norms, Gemma 3's sandwich norms, SwiGLU or GeGLU, the
// embedding and attention scales, a RoPE table per layer kind, sliding-window layers and final-logit
// soft-capping. The layer:
//   h1 = norm_in(x);  q, k, v = h1 W^T (+ b);  q, k = rope(qk_norm(q, k));  a = attn(q, k, v)
//   pre-norm (Qwen, Llama, Mistral): x_mid = x + (a Wo^T (+ bo));             h2 = norm_post_attn(x_mid)
//   sandwich (Gemma 3):              x_mid = x + norm_post_attn(a Wo^T (+ bo)); h2 = norm_pre_ff(x_mid)
//   m = act(h2 Wg^T (+ bg)) * (h2 Wu^T (+ bu)) Wd^T (+ bd);  x_out = x_mid + m  (sandwich: + norm_post_ff(m))
// It has forward, a loss-agnostic backward seeded by d(logp) and d(entropy), and activation
// checkpointing (none / selective / full). Matrix products go straight to backend_sgemm where an
// accumulating product (beta = 1) saves a pass over memory (residual adds, summed input gradients).
// This file holds the model, the forward and the per-layer pieces; decoder_internal.h names the others.
#include "model/decoder.h"

#include <math.h>
#include <string.h>

#include "core/common.h"
#include "model/decoder_internal.h"

// ---- model ------------------------------------------------------------------------------------------------

void decoder_batch_positions(decoder_batch *b) {
    CHECK(b->n_seqs >= 1, "n_seqs=%d", b->n_seqs);
    CHECK(b->cu_seqlens[0] == 0, "cu_seqlens[0]=%d", b->cu_seqlens[0]);
    CHECK_EQ(b->cu_seqlens[b->n_seqs], b->T, "cu_seqlens[n_seqs] vs T");
    int mx = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        int32_t s0 = b->cu_seqlens[s], s1 = b->cu_seqlens[s + 1];
        CHECK(s1 >= s0, "cu_seqlens not monotonic at %d: %d > %d", s, s0, s1);
        for (int32_t t = s0; t < s1; t++) b->pos[t] = t - s0;
        if (s1 - s0 > mx) mx = s1 - s0;
    }
    b->max_seqlen = mx;
}

void decoder_model_init(decoder_model *m, const param_layout *pl, param_set *params, backend_ctx *be) {
    memset(m, 0, sizeof *m);
    m->pl = pl;
    m->cfg = &pl->cfg;
    m->params = params;
    m->be = be;
    const model_config *c = m->cfg;
    CHECK(c->head_dim % 2 == 0, "head_dim=%d must be even for RoPE", c->head_dim);
    CHECK(c->num_key_value_heads >= 1 && c->num_attention_heads % c->num_key_value_heads == 0, "nh=%d nkv=%d",
          c->num_attention_heads, c->num_key_value_heads);
    rope_table_init_params(&m->rope, c->max_position_embeddings, c->head_dim, &c->rope);
    // a second table only where sliding layers use another RoPE (Gemma 3's local base)
    m->has_rope_local = memcmp(&c->rope, &c->rope_local, sizeof c->rope) != 0;
    if (m->has_rope_local) rope_table_init_params(&m->rope_local, c->max_position_embeddings, c->head_dim, &c->rope_local);
    m->block_w = rlc_calloc((size_t)pl->n_blocks, sizeof(float *));
    if (params)
        for (int b = 0; b < pl->n_blocks; b++) m->block_w[b] = param_block(params, b);
    m->ws = rlc_calloc(1, sizeof *m->ws);
}

void decoder_model_free(decoder_model *m) {
    rope_table_free(&m->rope);
    if (m->has_rope_local) rope_table_free(&m->rope_local);
    free(m->block_w);
    if (m->ws) { rlc_free(m->ws->mem); rlc_free(m->ws->lora_u); }
    free(m->ws);
    memset(m, 0, sizeof *m);
}

void decoder_set_lora(decoder_model *m, const lora_layout *ll, float *w, float *g) {
    if (ll) {
        CHECK(ll->L == m->cfg->num_hidden_layers && ll->pl.cfg.hidden_size == m->cfg->hidden_size &&
                  ll->pl.cfg.intermediate_size == m->cfg->intermediate_size,
              "adapters built for another model (%d layers)", ll->L);
        CHECK(w, "adapter weights");
    }
    m->lora = ll;
    m->lora_w = ll ? w : NULL;
    m->lora_grad = ll ? g : NULL;
    m->lora_on = ll != NULL;
    m->base_frozen = ll != NULL;
}

void decoder_lora_enable(decoder_model *m, int on) { m->lora_on = m->lora && on; }

// y (T, out) += s·(x·Aᵀ)·Bᵀ for projection p of layer l, keeping u (T, r) = x·Aᵀ in la (y NULL: only u).
// Nothing where the side path is off or p is not adapted in layer l.
void dec_lora_fwd(const decoder_model *m, const layer_acts *la, int l, int p, float *y, const float *x, int64_t T) {
    if (!lora_active(m)) return;
    const lora_layout *ll = m->lora;
    const int64_t i = (int64_t)l * LORA_NPROJ + p;
    if (ll->a_off[i] < 0) return;
    const int64_t r = ll->rank, in = ll->in[p], out = ll->out[p];
    float *u = la->lora_u + p * la->lora_ld;
    backend_sgemm(0, 1, T, r, in, 1.f, x, in, m->lora_w + ll->a_off[i], in, 0.f, u, r);             // u (T, r) = x·Aᵀ
    if (y) backend_sgemm(0, 1, T, out, r, ll->scale, u, r, m->lora_w + ll->b_off[i], r, 1.f, y, out);   // y += s·u·Bᵀ
}

const float *decoder_lm_head(const decoder_model *m) {
    if (m->cfg->tie_word_embeddings) return block_ptr(m, 0);
    return block_ptr(m, m->pl->n_blocks - 1) + m->cfg->hidden_size;
}

const rope_table *decoder_rope(const decoder_model *m, int layer) {
    return m->has_rope_local && m->cfg->layer_types[layer] == LAYER_SLIDING ? &m->rope_local : &m->rope;
}
int decoder_layer_window(const model_config *c, int layer) {
    return c->layer_types[layer] == LAYER_SLIDING ? c->sliding_window : 0;
}

// h1, q_pre/k_pre (with q/k norms), q/k (normed + RoPE), v of layer l from la->x_in.
static void layer_qkv(const decoder_model *m, int l, const layer_weights *lw, layer_acts *la, const int32_t *pos, int64_t T) {
    dims d = dims_of(m->cfg);
    const rope_table *rt = decoder_rope(m, l);
    rmsnorm_forward_off(la->h1, la->rstd1, la->x_in, lw->in_norm, d.w_off, T, d.H, d.eps);
    float *qp = d.qk_norm ? la->q_pre : la->q, *kp = d.qk_norm ? la->k_pre : la->k;
    mm_fwd(qp, 0.f, la->h1, lw->wq, T, d.H, d.QD);
    mm_fwd(kp, 0.f, la->h1, lw->wk, T, d.H, d.KD);
    mm_fwd(la->v, 0.f, la->h1, lw->wv, T, d.H, d.KD);
    dec_lora_fwd(m, la, l, LORA_Q, qp, la->h1, T);
    dec_lora_fwd(m, la, l, LORA_K, kp, la->h1, T);
    dec_lora_fwd(m, la, l, LORA_V, la->v, la->h1, T);
    if (lw->bq) {
        bias_forward(qp, lw->bq, T, d.QD);
        bias_forward(kp, lw->bk, T, d.KD);
        bias_forward(la->v, lw->bv, T, d.KD);
    }
    if (d.qk_norm) {
        rmsnorm_forward_off(la->q, la->rstd_q, la->q_pre, lw->q_norm, d.w_off, T * d.nh, d.D, d.eps);
        rmsnorm_forward_off(la->k, la->rstd_k, la->k_pre, lw->k_norm, d.w_off, T * d.nkv, d.D, d.eps);
    }
    rope_forward(la->q, pos, rt, T, d.nh);
    rope_forward(la->k, pos, rt, T, d.nkv);
}

// x_mid = x_in + o_proj(attn) (sandwich: + post_attn_norm(o_proj(attn))); h2 = the pre-MLP norm of x_mid;
// act = glu(gate, up); x_out = x_mid + down(act) (sandwich: + post_ff_norm(down(act))). x_out NULL: stop after
// act, as the backward's recompute needs. x_mid/x_out may alias x_in.
static void layer_out(const decoder_model *m, int l, const layer_weights *lw, layer_acts *la, float *x_out, int64_t T) {
    dims d = dims_of(m->cfg);
    if (d.sandwich) {
        mm_fwd(la->attn_o, 0.f, la->attn, lw->wo, T, d.QD, d.H);
        dec_lora_fwd(m, la, l, LORA_O, la->attn_o, la->attn, T);
        if (lw->bo) bias_forward(la->attn_o, lw->bo, T, d.H);
        rmsnorm_forward_off(la->h2, la->rstd_ao, la->attn_o, lw->post_norm, d.w_off, T, d.H, d.eps);   // h2: scratch here
        residual_forward(la->x_mid, la->x_in, la->h2, T * d.H);
        rmsnorm_forward_off(la->h2, la->rstd2, la->x_mid, lw->pre_ff_norm, d.w_off, T, d.H, d.eps);
    } else {
        copy_par(la->x_mid, la->x_in, T * d.H);
        mm_fwd(la->x_mid, 1.f, la->attn, lw->wo, T, d.QD, d.H);
        dec_lora_fwd(m, la, l, LORA_O, la->x_mid, la->attn, T);
        if (lw->bo) bias_forward(la->x_mid, lw->bo, T, d.H);
        rmsnorm_forward_off(la->h2, la->rstd2, la->x_mid, lw->post_norm, d.w_off, T, d.H, d.eps);
    }
    mm_fwd(la->gate, 0.f, la->h2, lw->w_gate, T, d.H, d.I);
    mm_fwd(la->up, 0.f, la->h2, lw->w_up, T, d.H, d.I);
    dec_lora_fwd(m, la, l, LORA_GATE, la->gate, la->h2, T);
    dec_lora_fwd(m, la, l, LORA_UP, la->up, la->h2, T);
    if (lw->b_gate) {
        bias_forward(la->gate, lw->b_gate, T, d.I);
        bias_forward(la->up, lw->b_up, T, d.I);
    }
    glu_forward(la->act, la->gate, la->up, T * d.I, m->cfg->hidden_act);
    if (!x_out) return;
    if (d.sandwich) {
        mm_fwd(la->mlp_o, 0.f, la->act, lw->w_down, T, d.I, d.H);
        dec_lora_fwd(m, la, l, LORA_DOWN, la->mlp_o, la->act, T);
        if (lw->b_down) bias_forward(la->mlp_o, lw->b_down, T, d.H);
        float *tmp = x_out == la->x_mid ? la->attn_o : x_out;   // attn_o is spent when the stream is updated in place
        rmsnorm_forward_off(tmp, la->rstd_mo, la->mlp_o, lw->post_ff_norm, d.w_off, T, d.H, d.eps);
        residual_forward(x_out, tmp, la->x_mid, T * d.H);
    } else {
        copy_par(x_out, la->x_mid, T * d.H);
        mm_fwd(x_out, 1.f, la->act, lw->w_down, T, d.I, d.H);
        dec_lora_fwd(m, la, l, LORA_DOWN, x_out, la->act, T);
        if (lw->b_down) bias_forward(x_out, lw->b_down, T, d.H);
    }
}

static void layer_attention(const decoder_model *m, int l, layer_acts *la, const decoder_batch *b) {
    dims d = dims_of(m->cfg);
    attention_forward_sw(la->attn, la->lse, la->q, la->k, la->v, b->cu_seqlens, b->n_seqs, (int)d.nh, (int)d.nkv, (int)d.D,
                         m->cfg->attn_scale, decoder_layer_window(m->cfg, l));
}

void dec_layer_forward(const decoder_model *m, int l, const layer_weights *lw, layer_acts *la, float *x_out,
                          const decoder_batch *b, int do_attn) {
    layer_qkv(m, l, lw, la, b->pos, b->T);
    if (do_attn) layer_attention(m, l, la, b);
    layer_out(m, l, lw, la, x_out, b->T);
}

// x (T, H) = embed_tokens[tokens] * embed_scale
void dec_embed(const decoder_model *m, float *x, const int32_t *tokens, int64_t T) {
    const int64_t H = m->cfg->hidden_size;
    embedding_forward(x, tokens, embed_w(m), T, H);
    const float sc = m->cfg->embed_scale;
    if (sc != 1.0f) {
#pragma omp parallel for schedule(static) if (T * H > (1 << 16))
        for (int64_t i = 0; i < T * H; i++) x[i] *= sc;
    }
}

static void check_batch(const decoder_model *m, const decoder_batch *b) {
    CHECK(b->T >= 1, "empty batch (T=%lld)", (long long)b->T);
    CHECK(b->max_seqlen >= 1 && b->max_seqlen <= m->rope.max_pos, "max_seqlen=%d (call decoder_batch_positions; limit %d)",
          b->max_seqlen, m->rope.max_pos);
    CHECK_EQ(b->cu_seqlens[b->n_seqs], b->T, "cu_seqlens[n_seqs] vs T");
    const int V = m->cfg->vocab_size;
    for (int64_t t = 0; t < b->T; t++)
        CHECK(b->tokens[t] >= 0 && b->tokens[t] < V, "token %d at %lld outside vocab [0, %d)", b->tokens[t], (long long)t, V);
}

void decoder_forward(decoder_model *m, decoder_acts *a, const decoder_batch *b, float *hidden) {
    check_batch(m, b);
    dims d = dims_of(m->cfg);
    const int64_t T = b->T;
    layer_weights lw;
    float *hid;
    int np = 0;
    int *st = dec_split_plan(m, b, 0, &np);
    if (a) {
        CHECK(T <= a->T_max, "batch of %lld tokens > acts T_max %lld", (long long)T, (long long)a->T_max);
        CHECK(a->cfg.hidden_size == d.H && a->cfg.num_hidden_layers == d.L, "acts built for another config");
        a->have_forward = a->have_head = a->have_g = a->have_ge = 0;
        dec_acts_lora(m, a);
        if (st) dec_forward_split(m, a, b, st, np);
        else {
            dec_embed(m, a->la[0].x_in, b->tokens, T);
            for (int l = 0; l < d.L; l++) {
                layer_view(m, l, &lw);
                float *x_out = l + 1 < d.L ? a->la[l + 1].x_in : a->x_final;
                dec_layer_forward(m, l, &lw, &a->la[l], x_out, b, 1);
            }
            rmsnorm_forward_off(a->hidden, a->rstd_f, a->x_final, final_norm_w(m), d.w_off, T, d.H, d.eps);
        }
        a->T = T;
        a->have_forward = 1;
        hid = a->hidden;
    } else {
        dec_ws_reserve(m, T);
        dec_ws_lora(m, T);
        decoder_ws *ws = m->ws;
        if (st) dec_forward_split(m, NULL, b, st, np);
        else {
            layer_acts la = ws->la;
            la.x_in = la.x_mid = ws->x;
            la.attn = ws->attn;
            la.lse = ws->lse;
            dec_embed(m, ws->x, b->tokens, T);
            for (int l = 0; l < d.L; l++) {
                layer_view(m, l, &lw);
                dec_layer_forward(m, l, &lw, &la, ws->x, b, 1);
            }
            rmsnorm_forward_off(ws->hidden, ws->rstd_f, ws->x, final_norm_w(m), d.w_off, T, d.H, d.eps);
        }
        ws->hidden_T = T;
        hid = ws->hidden;
    }
    free(st);
    if (hidden) copy_par(hidden, hid, T * d.H);
}

// ---- per-layer pieces for the rollout engine ------------------------------------------------------------------

void decoder_layer_qkv(const decoder_model *m, int layer, const float *x, const int32_t *pos, int64_t T, float *q, float *k,
                     float *v) {
    CHECK(layer >= 0 && layer < m->cfg->num_hidden_layers, "layer %d", layer);
    for (int64_t t = 0; t < T; t++) CHECK(pos[t] >= 0 && pos[t] < m->rope.max_pos, "pos[%lld]=%d", (long long)t, pos[t]);
    dec_ws_reserve(m, T);
    dec_ws_lora(m, T);
    layer_weights lw;
    layer_view(m, layer, &lw);
    layer_acts la = m->ws->la;
    la.x_in = (float *)x;   // read only
    la.q = q;
    la.k = k;
    la.v = v;
    layer_qkv(m, layer, &lw, &la, pos, T);
}

void decoder_layer_out(const decoder_model *m, int layer, float *x, const float *attn, int64_t T) {
    CHECK(layer >= 0 && layer < m->cfg->num_hidden_layers, "layer %d", layer);
    dec_ws_reserve(m, T);
    dec_ws_lora(m, T);
    layer_weights lw;
    layer_view(m, layer, &lw);
    layer_acts la = m->ws->la;
    la.x_in = la.x_mid = x;
    la.attn = (float *)attn;   // read only
    layer_out(m, layer, &lw, &la, x, T);
}

void decoder_final_norm(const decoder_model *m, float *hidden, const float *x, int64_t T) {
    dec_ws_reserve(m, T);
    rmsnorm_forward_off(hidden, m->ws->rstd_f, x, final_norm_w(m), m->cfg->norm_plus_one ? 1.0f : 0.0f, T,
                        m->cfg->hidden_size, m->cfg->rms_norm_eps);
}

void decoder_embed(const decoder_model *m, float *x, const int32_t *tokens, int64_t T) {
    for (int64_t t = 0; t < T; t++)
        CHECK(tokens[t] >= 0 && tokens[t] < m->cfg->vocab_size, "token %d at %lld outside vocab", tokens[t], (long long)t);
    dec_embed(m, x, tokens, T);
}

void decoder_logits(const decoder_model *m, float *logits, const float *hidden, int64_t T) {
    logits_forward(logits, hidden, decoder_lm_head(m), T, m->cfg->hidden_size, m->cfg->vocab_size);
    logits_softcap(logits, T * m->cfg->vocab_size, m->cfg->final_logit_softcapping);
}
