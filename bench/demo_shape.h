// demo_shape.h: the model that `rlc demo` trains (src/cli/cmd_demo.c: hidden 128, 4 layers, 4/2 heads of 32,
// MLP 384, tied embeddings, its 576-row padded vocabulary), written as a config.json the benchmarks and their
// PyTorch peers read (header-only: each bench is one translation unit).
#pragma once
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"

static const char demo_shape_json[] =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"bos_token_id\": null, \"eos_token_id\": 514, \"head_dim\": 32, \"hidden_act\": \"silu\", \"hidden_size\": 128, "
    "\"initializer_range\": 0.02, \"intermediate_size\": 384, \"max_position_embeddings\": 512, \"max_window_layers\": 4, "
    "\"model_type\": \"qwen3\", \"num_attention_heads\": 4, \"num_hidden_layers\": 4, \"num_key_value_heads\": 2, "
    "\"rms_norm_eps\": 1e-06, \"rope_scaling\": null, \"rope_theta\": 10000, \"sliding_window\": null, "
    "\"tie_word_embeddings\": true, \"torch_dtype\": \"float32\", \"use_cache\": true, \"use_sliding_window\": false, "
    "\"vocab_size\": 576}\n";

// Writes the demo's config.json to path (a mkstemps template ending in ".json", filled in); returns path.
static inline char *demo_shape_write(char *path) {
    int fd = mkstemps(path, 5);
    CHECK(fd >= 0, "mkstemps %s", path);
    close(fd);
    CHECK(rlc_write_file_atomic(path, demo_shape_json, strlen(demo_shape_json)) == 0, "write %s", path);
    return path;
}
