// params.h: the decoder's parameters as flat contiguous buffers built from a size table. Which tensors a
// layer holds is data from the architecture description (biases, q/k norms, Gemma 3's extra norms).
//
// Blocks: block 0 = embedding (embed_tokens [V,H]); blocks 1..L = transformer layers; block L+1 =
// final norm [H] (+ lm_head [V,H] when untied). Every parameter-like set (params, grads, AdamW m and
// v) uses the same layout over ONE allocation, so the optimizer, grad-norm and checkpoints are single
// loops, and a data-parallel layer can shard or all-gather one block (a contiguous range) at a time.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "model/config.h"

enum {
    // tensor kinds inside a layer block, in storage order; those marked [opt] exist only when the
    // architecture description asks for them
    LW_IN_NORM = 0,   // input_layernorm.weight            (H)
    LW_Q,             // self_attn.q_proj.weight           (nh*D, H)
    LW_Q_BIAS,        // self_attn.q_proj.bias             (nh*D)   [opt: qkv_bias]
    LW_K,             // self_attn.k_proj.weight           (nkv*D, H)
    LW_K_BIAS,        // self_attn.k_proj.bias             (nkv*D)  [opt: qkv_bias]
    LW_V,             // self_attn.v_proj.weight           (nkv*D, H)
    LW_V_BIAS,        // self_attn.v_proj.bias             (nkv*D)  [opt: qkv_bias]
    LW_O,             // self_attn.o_proj.weight           (H, nh*D)
    LW_O_BIAS,        // self_attn.o_proj.bias             (H)      [opt: o_bias]
    LW_Q_NORM,        // self_attn.q_norm.weight           (D)      [opt: qk_norm]
    LW_K_NORM,        // self_attn.k_norm.weight           (D)      [opt: qk_norm]
    LW_POST_NORM,     // post_attention_layernorm.weight   (H)      pre-MLP norm; Gemma 3: on the attention output
    LW_PRE_FF_NORM,   // pre_feedforward_layernorm.weight  (H)      [opt: sandwich_norm] Gemma 3's pre-MLP norm
    LW_GATE,          // mlp.gate_proj.weight              (I, H)
    LW_GATE_BIAS,     // mlp.gate_proj.bias                (I)      [opt: mlp_bias]
    LW_UP,            // mlp.up_proj.weight                (I, H)
    LW_UP_BIAS,       // mlp.up_proj.bias                  (I)      [opt: mlp_bias]
    LW_DOWN,          // mlp.down_proj.weight              (H, I)
    LW_DOWN_BIAS,     // mlp.down_proj.bias                (H)      [opt: mlp_bias]
    LW_POST_FF_NORM,  // post_feedforward_layernorm.weight (H)      [opt: sandwich_norm] on the MLP output
    LW_COUNT
};

// Largest parameter count a layout accepts (4 TiB of fp32): far beyond any machine, and every offset
// and byte count below it fits int64_t / size_t.
#define PARAM_MAX_NUMEL ((int64_t)1 << 40)

typedef struct {
    char name[96];        // HF tensor name, e.g. "model.layers.3.self_attn.q_proj.weight"
    int ndim;             // 1 or 2
    int64_t shape[2];     // HF shape [out, in] (or [dim])
    int64_t numel;
    int64_t offset;       // element offset into the flat buffer (absolute, not block-relative)
    int block;            // which block this tensor lives in
    int decay;            // 1 if AdamW weight decay applies (verl/torch apply it to all params: 1)
} param_tensor;

typedef struct {
    model_config cfg;
    int n_blocks;            // L + 2
    int64_t *block_off;      // (n_blocks+1) element offsets; block b = [block_off[b], block_off[b+1])
    int n_tensors;
    param_tensor *tensors;   // (n_tensors) in storage order
    int64_t numel;           // total elements
    int64_t layer_off[LW_COUNT]; // offsets of each tensor kind relative to a layer block's start (-1: absent)
    int64_t layer_numel;     // elements in one layer block
} param_layout;

// One parameter-like set (params, grads, m, v): `data` is one aligned allocation of layout->numel floats.
typedef struct {
    const param_layout *layout;
    float *data;             // (numel)
} param_set;

void param_layout_init(param_layout *pl, const model_config *cfg);
void param_layout_free(param_layout *pl);
// Find a tensor by HF name; returns index or -1.
int param_layout_find(const param_layout *pl, const char *name);

void param_set_init(param_set *ps, const param_layout *pl);   // zeroed
void param_set_free(param_set *ps);

// Views into one layer's weights. The base pointer may be the flat buffer's block or a gathered copy
// of that block (data-parallel), so kernels never assume where a block lives.
typedef struct {
    float *in_norm;    // (H)
    float *wq;         // (nh*D, H)
    float *bq;         // (nh*D) or NULL
    float *wk;         // (nkv*D, H)
    float *bk;         // (nkv*D) or NULL
    float *wv;         // (nkv*D, H)
    float *bv;         // (nkv*D) or NULL
    float *wo;         // (H, nh*D)
    float *bo;         // (H) or NULL
    float *q_norm;     // (D) or NULL
    float *k_norm;     // (D) or NULL
    float *post_norm;  // (H)
    float *pre_ff_norm;  // (H) or NULL
    float *w_gate;     // (I, H)
    float *b_gate;     // (I) or NULL
    float *w_up;       // (I, H)
    float *b_up;       // (I) or NULL
    float *w_down;     // (H, I)
    float *b_down;     // (H) or NULL
    float *post_ff_norm; // (H) or NULL
} layer_weights;

// Pointers for layer l given the start of that layer's block (e.g. ps->data + block_off[1+l]).
void param_layer_view(const param_layout *pl, float *block_base, layer_weights *lw);
static inline float *param_block(const param_set *ps, int b) { return ps->data + ps->layout->block_off[b]; }
// A frozen parameter set stored in bf16 (round-to-nearest-even: lossless for a bf16 checkpoint), half the bytes of
// fp32, read by the decoder through decoder_model.get_block = param_bf16_get_block, which widens block b to fp32 right
// before use. The embedding block and the final-norm/lm_head block are widened once and kept (the forward, the head
// and its backward all read them); the layer blocks share one fp32 slot, so the fp32 resident part is those two
// blocks plus one layer. For a frozen base (LoRA): the fp32 set can be freed after param_bf16_init.
typedef struct {
    const param_layout *pl;
    uint16_t *w16;          // (numel) bf16, the parameter layout
    float *first, *last;    // block 0 and block n_blocks-1 widened (NULL until first use)
    float *slot;            // (largest layer block) the widened layer block
    int slot_block;         // the block held in slot (-1: none)
} param_bf16;
void param_bf16_init(param_bf16 *pb, const param_set *ps);
void param_bf16_free(param_bf16 *pb);
float *param_bf16_get_block(void *ctx, int block);   // a decoder_get_block_fn; ctx = param_bf16 *
int64_t param_bf16_bytes(const param_bf16 *pb);      // bytes held (bf16 copy plus the widened blocks so far)

// embed_tokens (V,H), final norm (H), lm_head (V,H; == embed when tied)
float *param_embed(const param_set *ps);
float *param_final_norm(const param_set *ps);
float *param_lm_head(const param_set *ps);
