// config.h: the Qwen3 model configuration (Hugging Face config.json), see shared/spec/qwen3.md §1-2.
#pragma once
#include <stdint.h>

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
} qwen3_config;

// Parse config.json text. `path` is only used in error messages. Dies with a one-line error naming
// the file and key for a wrong model_type, a missing or mistyped field, or out-of-range values.
void qwen3_config_parse(qwen3_config *cfg, const char *json_text, const char *path);
// Load DIR/config.json (or a path to a .json file).
void qwen3_config_load(qwen3_config *cfg, const char *path);
// Serialise to HF config.json text (malloc'd), loadable by transformers' Qwen3Config.
char *qwen3_config_to_json(const qwen3_config *cfg);
