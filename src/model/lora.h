// lora.h: LoRA adapters (shared/spec/lora.md §2, §8): for each adapted projection of each layer,
//   y = x·Wᵀ (+ b) + s·(x·Aᵀ)·Bᵀ,   A (r, in), B (out, r),   s = alpha / r   (use_rslora: alpha / √r)
// with the base W frozen. The adapters of a model are ONE flat parameter set laid out by their own size table,
// a param_layout whose block l holds layer l's adapters in the order q,k,v,o,gate,up,down, each as A then B
// (row-major, exactly PEFT's tensors, so export is a straight copy). Tensor names are PEFT's
// ("base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight"). Because the layout is a param_layout,
// params, grads and AdamW moments are param_sets over it and the existing loops run over them unchanged:
//
//   lora_layout ll;  lora_layout_init(&ll, &cfg, &lc, NULL);         // size table; one-line errors
//   param_set ad, gad;  param_set_init(&ad, &ll.pl);  param_set_init(&gad, &ll.pl);
//   lora_init_weights(&ll, &ad, seed);                               // A ~ U(±1/√in), B = 0 (PEFT's default)
//   decoder_set_lora(&model, &ll, ad.data, gad.data);                // decoder.h: side path on, base frozen
//   (or engine_init(&e, &model, ...) after decoder_set_lora(&model, &ll, ad.data, NULL): the engine's gradients,
//    AdamW state and steps then run over the adapters; trainer/engine.h)
//   ... decoder_forward / decoder_logprob / decoder_backward: dA, dB land in gad; no base gradient ...
//   adamw_state st;  adamw_init(&st, &ll.pl, &h);  adamw_step(&st, &ad, &gad, lr);   // optim.h, unchanged
//   grad_clip_global(&gad, max_norm);                                // clipping over the adapter grads only
//   decoder_lora_enable(&model, 0);   // reference policy = the same model with adapters off (bitwise the base)
//   lora_trainable_count(&ll), lora_trainable_line(...)             // "trainable 20.2M / 596M (3.39%)"
//   peft_save / peft_load (io/peft.h)                                // PEFT's adapter folder
//
// Data-parallel: the adapter blocks are contiguous ranges (block l = layer l), so a sharded optimizer can step
// ranges of ll.pl exactly as of the model's layout; the adapters are small enough to all-reduce whole.
#pragma once
#include <stdint.h>

#include "model/config.h"
#include "model/params.h"

enum { LORA_Q = 0, LORA_K, LORA_V, LORA_O, LORA_GATE, LORA_UP, LORA_DOWN, LORA_NPROJ };
// "q_proj", ..., "down_proj" and the module path inside a layer ("self_attn.q_proj", ..., "mlp.down_proj")
extern const char *const LORA_PROJ_NAME[LORA_NPROJ];
extern const char *const LORA_PROJ_PATH[LORA_NPROJ];

#define LORA_MAX_NAMES 32
// Which modules a target_modules / exclude_modules value selects, with PEFT's rules (spec §2.5). Module names are
// the HF paths "model.layers.N.self_attn.q_proj" ... "model.layers.N.mlp.down_proj".
typedef struct {
    int set;                              // 0: none given (exclude: nothing; target: the default "all-linear")
    int is_regex;                         // 1: `regex` must match a whole module name (POSIX extended syntax)
    char regex[512];
    int n_names;                          // else a list: an entry matches a name equal to it or ending in "." + entry;
    char names[LORA_MAX_NAMES][96];       //   the single entry "all-linear" selects the 7 projections
} lora_match;
// A list from "a,b,c" (spaces trimmed). Returns -1 (err filled) for an empty entry or too many / too long ones.
int lora_match_list(lora_match *m, const char *csv, char *err, size_t errlen);
// A string as PEFT reads it: "all-linear", else a regex (checked to compile). Returns -1 with err filled.
int lora_match_string(lora_match *m, const char *s, char *err, size_t errlen);
// 1 if module `name` is selected.
int lora_match_module(const lora_match *m, const char *name);

typedef struct {
    int rank;              // r >= 1
    float alpha;           // > 0
    int use_rslora;        // s = alpha / √r instead of alpha / r
    lora_match target;     // unset: "all-linear"
    lora_match exclude;    // wins over target
} lora_config;
void lora_config_default(lora_config *lc);   // r 8, alpha 16, all-linear, no exclusions

// The keys named by validation errors (a config file's or a command line's spelling).
typedef struct {
    const char *rank, *alpha, *target;
} lora_keys;
extern const lora_keys LORA_KEYS_VERL;   // actor_rollout_ref.model.lora_rank / lora_alpha / target_modules

float lora_scale(int rank, float alpha, int use_rslora);   // alpha/r or alpha/√r, in fp32

typedef struct {
    param_layout pl;        // the adapters' size table: n_blocks = L (block l = layer l), PEFT tensor names
    int rank;
    float alpha;
    int use_rslora;
    float scale;            // s
    int L;
    int64_t in[LORA_NPROJ], out[LORA_NPROJ];   // each projection's (in, out) features
    int64_t *a_off;         // (L*LORA_NPROJ) absolute offset of A (r, in) in the flat set, -1: not adapted
    int64_t *b_off;         // (L*LORA_NPROJ) absolute offset of B (out, r), -1: not adapted
    unsigned proj_mask;     // bit p: projection p is adapted in at least one layer
    int64_t base_numel;     // parameters of the base model (for the trainable line)
} lora_layout;

// Resolve the targets of lc on cfg's layers and build the size table. Dies with one line naming the key in `keys`
// (NULL: LORA_KEYS_VERL): rank < 1, alpha <= 0 or non-finite, a scale that is not finite and non-zero, a target
// that matches no module.
void lora_layout_init(lora_layout *ll, const model_config *cfg, const lora_config *lc, const lora_keys *keys);
// Build the size table for an explicit per-layer set (adapted[l*LORA_NPROJ + p] != 0), as an adapter file gives it.
void lora_layout_init_mask(lora_layout *ll, const model_config *cfg, int rank, float alpha, int use_rslora,
                           const uint8_t *adapted);
void lora_layout_free(lora_layout *ll);
static inline int lora_adapted(const lora_layout *ll, int layer, int proj) { return ll->a_off[layer * LORA_NPROJ + proj] >= 0; }

// PEFT's default init with rlc's RNG: A ~ U(-1/√in, 1/√in) (kaiming_uniform with a = √5), B = 0. Each tensor draws
// from its own stream (seed, tensor index), so the result does not depend on the thread count.
void lora_init_weights(const lora_layout *ll, param_set *ad, uint64_t seed);
// Trainable parameters (= ll->pl.numel) and the start-up line "trainable 20.2M / 596M (3.39%)" into buf.
int64_t lora_trainable_count(const lora_layout *ll);
void lora_trainable_line(const lora_layout *ll, char *buf, size_t len);

// W' (out, in) += s·B·A for projection p of layer l (fp32): the merge of merge-lora and of lora.merge=true.
void lora_merge_into(const lora_layout *ll, const float *ad, int layer, int proj, float *w);
void lora_merge_into_ref(const lora_layout *ll, const float *ad, int layer, int proj, float *w);
// The base weight of projection p inside a layer_weights view (W (out, in)).
float *lora_base_weight(const layer_weights *lw, int proj);
