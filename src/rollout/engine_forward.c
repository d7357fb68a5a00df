// engine_forward.c: the rollout engine's packed forward: every picked token of every sequence of a step through
// one forward (embedding, per layer the q/k/v products over all rows with rowgemm so the weights stream once per
// step, q/k norm and RoPE, k/v written into the sequences' blocks, paged attention, o_proj and the MLP), then the
// final norm and the logits of the rows that sample. Each row's arithmetic is the same whatever batch it is in.
#include "core/common.h"
#include "kernels/kernels.h"
#include "rollout/engine_internal.h"
#include "rollout/paged_attention.h"
#include "rollout/rowgemm.h"

// Projection `kind` (LW_Q ...) of layer l, block base `base` (fp32; NULL with base16): fp32 (master), or with the
// bf16 switch its bf16 copy at the same layout offset, or merged weights, or the frozen bf16 base itself. Its bias
// (OC) or NULL stays fp32 (added to the product's sum before the store or the residual add, as torch's linear).
// Adapted projections (LoRA on, not merged) carry the rank-r side path y += s·(x·Aᵀ)·Bᵀ, read from the model's
// adapter buffer and fused into the product's parallel region (rowgemm.h): rows stay batch invariant.
static rowgemm_out mm_out(const rollout_engine *e, float *out, int64_t ldo, const float *base, int l, int kind,
                          const float *bias, int64_t OC, int proj) {
    const decoder_model *m = e->m;
    const int64_t loff = m->pl->layer_off[kind], off = m->pl->block_off[1 + l] + loff;
    rowgemm_out o = {.out = out, .ldo = ldo, .bias = bias, .OC = OC};
    if (e->w16) o.w16 = e->w16 + off;
    else if (e->wm) o.w = e->wm + off;
    else if (e->base16) o.w16 = e->base16 + off;
    else o.w = base + loff;
    const lora_layout *ll = m->lora;
    if (ll && m->lora_on && !e->lora_merged && lora_adapted(ll, l, proj)) {
        const int64_t i = (int64_t)l * LORA_NPROJ + proj;
        o.lora_a = m->lora_w + ll->a_off[i];
        o.lora_b = m->lora_w + ll->b_off[i];
        o.lora_r = ll->rank;
        o.lora_s = ll->scale;
    }
    return o;
}
// The products of one input x (T, C), fused into one parallel region.
static void mm(const rollout_engine *e, const rowgemm_out *outs, int n, const float *x, int64_t T, int64_t C,
               int accumulate) {
    (void)e;   // mm_out chose the weights' storage
    if (outs[0].w16) rowgemm_forward_multi_bf16(outs, n, x, T, C, accumulate);
    else rowgemm_forward_multi(outs, n, x, T, C, accumulate);
}

// Layer l's attention for the step's T tokens: their k/v (T, nkv*D) into the layer's pool, then att (T, nh*D)
// over each token's visible keys (the model's window on sliding layers), q (T, nh*D) after norm + RoPE.
static void layer_attention(rollout_engine *e, int l, float *att, const float *q, const float *k, const float *v,
                            int64_t T, const kv_tables *kt) {
    const model_config *c = e->m->cfg;
    const int p = e->layer_pool[l], li = e->layer_slot[l];
    const int window = decoder_layer_window(c, l);
    paged_kv_write(&e->kv[p], li, k, v, kt->bt[p], kt->stride, e->tok_seq, e->pos, T);
    paged_attention_forward(att, q, &e->kv[p], li, kt->bt[p], kt->stride, e->tok_seq, e->pos, T, c->num_attention_heads,
                            window, c->attn_scale);
}

// Forward of e->tok/pos/tok_seq (T tokens): residual stream left in e->x (T, H); k/v written to the cache.
void eng_forward_tokens(rollout_engine *e, int64_t T, const kv_tables *kt) {
    const decoder_model *m = e->m;
    const model_config *c = m->cfg;
    const int64_t H = c->hidden_size, D = c->head_dim, nh = c->num_attention_heads, nkv = c->num_key_value_heads;
    const int64_t QD = nh * D, KD = nkv * D, I = c->intermediate_size;
    const float eps = c->rms_norm_eps, w_off = c->norm_plus_one ? 1.0f : 0.0f;
    CHECK(!e->base16 || (m->get_block == param_bf16_get_block && ((const param_bf16 *)m->get_block_ctx)->w16 == e->base16),
          "rollout: the model's bf16 base changed after rollout_engine_new");
    decoder_embed(m, e->x, e->tok, T);
    for (int l = 0; l < c->num_hidden_layers; l++) {
        float *base = e->base16 ? NULL : eng_block_base(m, 1 + l);
        const rope_table *rt = decoder_rope(m, l);
        layer_weights lw;
        if (e->base16) lw = e->lwv[l];
        else param_layer_view(m->pl, base, &lw);
        rmsnorm_forward_off(e->xn, e->rstd, e->x, lw.in_norm, w_off, T, H, eps);
        float *qp = c->qk_norm ? e->q : e->qn, *kp = c->qk_norm ? e->k : e->kn;   // without q/k norms: straight to RoPE
        const rowgemm_out qkv[3] = {mm_out(e, qp, QD, base, l, LW_Q, lw.bq, QD, LORA_Q),
                                    mm_out(e, kp, KD, base, l, LW_K, lw.bk, KD, LORA_K),
                                    mm_out(e, e->v, KD, base, l, LW_V, lw.bv, KD, LORA_V)};
        mm(e, qkv, 3, e->xn, T, H, 0);
        if (c->qk_norm) {
            rmsnorm_forward_off(e->qn, e->rstd, e->q, lw.q_norm, w_off, T * nh, D, eps);
            rmsnorm_forward_off(e->kn, e->rstd, e->k, lw.k_norm, w_off, T * nkv, D, eps);
        }
        rope_forward(e->qn, e->pos, rt, T, nh);
        rope_forward(e->kn, e->pos, rt, T, nkv);
        layer_attention(e, l, e->att, e->qn, e->kn, e->v, T, kt);
        if (c->sandwich_norm) {   // x += post_attn_norm(o_proj(attn)); xn = pre_ff_norm(x)
            const rowgemm_out o_proj = mm_out(e, e->xn, H, base, l, LW_O, lw.bo, H, LORA_O);
            mm(e, &o_proj, 1, e->att, T, QD, 0);
            rmsnorm_forward_off(e->xn, e->rstd, e->xn, lw.post_norm, w_off, T, H, eps);
            residual_forward(e->x, e->x, e->xn, T * H);
            rmsnorm_forward_off(e->xn, e->rstd, e->x, lw.pre_ff_norm, w_off, T, H, eps);
        } else {
            const rowgemm_out o_proj = mm_out(e, e->x, H, base, l, LW_O, lw.bo, H, LORA_O);
            mm(e, &o_proj, 1, e->att, T, QD, 1);   // x += o_proj(attn)
            rmsnorm_forward_off(e->xn, e->rstd, e->x, lw.post_norm, w_off, T, H, eps);
        }
        const rowgemm_out gate_up[2] = {mm_out(e, e->gate, I, base, l, LW_GATE, lw.b_gate, I, LORA_GATE),
                                        mm_out(e, e->up, I, base, l, LW_UP, lw.b_up, I, LORA_UP)};
        mm(e, gate_up, 2, e->xn, T, H, 0);
        glu_forward(e->act, e->gate, e->up, T * I, c->hidden_act);
        if (c->sandwich_norm) {   // x += post_ff_norm(down(act))
            const rowgemm_out down = mm_out(e, e->xn, H, base, l, LW_DOWN, lw.b_down, H, LORA_DOWN);
            mm(e, &down, 1, e->act, T, I, 0);
            rmsnorm_forward_off(e->xn, e->rstd, e->xn, lw.post_ff_norm, w_off, T, H, eps);
            residual_forward(e->x, e->x, e->xn, T * H);
        } else {
            const rowgemm_out down = mm_out(e, e->x, H, base, l, LW_DOWN, lw.b_down, H, LORA_DOWN);
            mm(e, &down, 1, e->act, T, I, 1);   // x += mlp
        }
    }
}

void eng_reserve_rows(rollout_engine *e, int64_t R) {
    if (R <= e->R_cap) return;
    const int64_t H = e->m->cfg->hidden_size, V = e->m->cfg->vocab_size;
    int64_t cap = e->R_cap ? e->R_cap : 8;
    while (cap < R) cap *= 2;
    rlc_free(e->xs);
    rlc_free(e->hid);
    rlc_free(e->logits);
    e->xs = rlc_alloc((size_t)(cap * H) * sizeof(float));
    e->hid = rlc_alloc((size_t)(cap * H) * sizeof(float));
    e->logits = rlc_alloc((size_t)(cap * V) * sizeof(float));
    e->R_cap = cap;
}

// logits (R, V) of hidden rows e->hid (R, H).
void eng_logits_rows(rollout_engine *e, int64_t R) {
    const model_config *c = e->m->cfg;
    const int64_t H = c->hidden_size, V = c->vocab_size;
    if (e->w16 || e->base16) {   // the bf16 copy, else the frozen bf16 base itself
        const param_layout *pl = e->m->pl;
        const int64_t off = c->tie_word_embeddings ? 0 : pl->block_off[pl->n_blocks - 1] + H;
        rowgemm_forward_bf16(e->logits, V, e->hid, (e->w16 ? e->w16 : e->base16) + off, R, H, V, 0);
    } else {
        rowgemm_forward(e->logits, V, e->hid, decoder_lm_head(e->m), R, H, V, 0);
    }
    logits_softcap(e->logits, R * V, c->final_logit_softcapping);
}
