// config.h: the model configuration (Hugging Face config.json) and the architecture description derived
// from it. Family differences (qwen3, qwen2, llama, mistral, gemma3_text) are data in this struct, never a
// copy of the model: see shared/spec/qwen3.md §1-2 and shared/spec/models.md §1-4.
#pragma once
#include <stdint.h>

// RoPE inverse-frequency rules (transformers' modeling_rope_utils.py).
// ROPE_DYNAMIC (NTK) rescales only past max_position_embeddings, which rlc never reaches, so its inv_freq is
// the default one for every position rlc runs.
typedef enum { ROPE_DEFAULT = 0, ROPE_LINEAR, ROPE_DYNAMIC, ROPE_LLAMA3, ROPE_YARN } rope_kind;

typedef struct {
    rope_kind type;
    double theta;                          // base
    double factor;                         // linear / dynamic / llama3 / yarn (1 when unused)
    double low_freq_factor;                // llama3
    double high_freq_factor;               // llama3
    int original_max_position_embeddings;  // llama3 / yarn (0 when unused)
    int orig_explicit;                     // yarn: original_max_position_embeddings came from the config
    double beta_fast, beta_slow;           // yarn (32, 1)
    double mscale, mscale_all_dim;         // yarn (0 when absent)
    int truncate;                          // yarn (1)
    double attention_factor;               // yarn: scales cos and sin; 1 for every other type
} rope_params;

typedef enum { MLP_SILU = 0, MLP_GELU_TANH = 1 } mlp_act;   // SwiGLU or GeGLU (gelu tanh approximation)
typedef enum { LAYER_FULL = 0, LAYER_SLIDING = 1 } layer_kind;
#define MODEL_MAX_LAYERS 512

typedef struct {
    int vocab_size;               // V
    int hidden_size;              // H
    int intermediate_size;        // I
    int num_hidden_layers;        // L
    int num_attention_heads;      // nh
    int num_key_value_heads;      // nkv (nh % nkv == 0)
    int head_dim;                 // D (from config, not H/nh)
    int max_position_embeddings;
    float rms_norm_eps;
    double rope_theta;            // top-level rope_theta or rope_parameters.rope_theta
    int tie_word_embeddings;      // 1: lm_head is embed_tokens
    int bos_token_id;             // -1 if null/absent
    int eos_token_id;             // first eos id; -1 if null/absent
    int eos_token_ids[8];         // all eos ids (config may give a list)
    int n_eos_token_ids;
    int use_sliding_window;       // must be false for dense full attention
    int sliding_window;           // -1 if null
    int max_window_layers;
    float initializer_range;
    char torch_dtype[16];         // "bfloat16", "float32", ... (written back on save)

    // architecture description (defaults reproduce Qwen3)
    char model_type[24];          // "qwen3" | "qwen2" | "llama" | "mistral" | "gemma3_text"
    int qkv_bias;                 // q/k/v projections carry biases (Qwen2; Llama attention_bias)
    int o_bias;                   // o_proj carries a bias (Llama attention_bias)
    int mlp_bias;                 // gate/up/down carry biases (Llama mlp_bias)
    int qk_norm;                  // per-head RMSNorm over D on q and k before RoPE (Qwen3, Gemma 3)
    int norm_plus_one;            // every RMSNorm is fp32 x_hat * (1 + w) (Gemma) instead of x_hat * w
    int sandwich_norm;            // 4 norms per layer: input, post_attention, pre_feedforward, post_feedforward (Gemma 3)
    mlp_act hidden_act;           // SwiGLU or GeGLU
    float embed_scale;            // embeddings are multiplied by this (1, or sqrt(H) rounded as the spec says)
    float attn_scale;             // softmax scale: head_dim^-1/2 or query_pre_attn_scalar^-1/2
    float final_logit_softcapping;  // 0: none; else logits = cap * tanh(logits / cap)
    rope_params rope;             // full-attention layers
    rope_params rope_local;       // sliding layers (Gemma 3: default, rope_local_base_freq); == rope otherwise
    // layer_types[l]: LAYER_SLIDING layers attend to keys j with i - sliding_window < j <= i (sliding_window > 0).
    uint8_t layer_types[MODEL_MAX_LAYERS];
    // config.json values kept for writing the file back (the fields above already hold their effect)
    double query_pre_attn_scalar;  // Gemma 3 (0 when absent: the scale is head_dim^-1/2)
    int sliding_window_pattern;    // Gemma 3 (4.50-4.52 form of layer_types)
} model_config;

// The model_types rlc implements, for error messages: "qwen3, qwen2, llama, mistral, gemma3_text".
extern const char *const MODEL_TYPES_SUPPORTED;
// 1 if `model_type` is one of them.
int model_type_supported(const char *model_type);

// Fill the architecture description from the fields, the way parsing does: model_type ("" = "qwen3") fixes
// the family knobs (q/k norm, (1+w) norms, sandwich norms, GeGLU, Qwen2's q/k/v biases) and embed_scale (1;
// Gemma: sqrt(H) rounded to torch_dtype); a zero attn_scale becomes head_dim^-1/2 (or query_pre_attn_scalar^-1/2); a rope with theta 0 becomes the default rope at rope_theta, rope_local with theta 0 a copy of
// rope (Gemma 3: the default rope at 10000). Fields the config sets (attention_bias/mlp_bias of Llama and
// Gemma, layer_types, sliding_window, soft-capping) are kept. Code that builds a model_config by hand sets
// the sizes, rope_theta, rms_norm_eps and what it wants to differ, then calls this.
void model_config_finalize(model_config *cfg);

// Parse config.json text. `path` is only used in error messages. Dies with a one-line error naming
// the file and key for a wrong model_type, a missing or mistyped field, or out-of-range values.
void model_config_parse(model_config *cfg, const char *json_text, const char *path);
// Load DIR/config.json (or a path to a .json file).
void model_config_load(model_config *cfg, const char *path);
// Serialise to HF config.json text (malloc'd) in the transformers 4.5x form of cfg's model_type (rope_theta +
// rope_scaling), which transformers v5 also reads.
char *model_config_to_json(const model_config *cfg);
