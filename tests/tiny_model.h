// tiny_model.h: the small Qwen3 model of test_sft and test_dist (2 layers, hidden 32, vocab 97), its
// weights drawn from a seed: norms 1 + N(0, 0.1), matrices N(0, 0.08). Header-only.
#pragma once
#include <stdio.h>

#include "model/config.h"
#include "model/params.h"
#include "testlib.h"

static const char *TINY_CFG_JSON =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"vocab_size\": 97, \"hidden_size\": 32,"
    " \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 16, \"max_position_embeddings\": 128, \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000,"
    " \"tie_word_embeddings\": %s, \"bos_token_id\": null, \"eos_token_id\": 1, \"use_sliding_window\": false,"
    " \"sliding_window\": null, \"max_window_layers\": 2, \"initializer_range\": 0.02, \"torch_dtype\": \"float32\"}";

// Parse the config (tied or untied head), lay out and allocate the parameters, and fill them from seed.
static inline void tiny_params_init(model_config *cfg, param_layout *pl, param_set *ps, int tied, uint64_t seed) {
    char js[2048];
    snprintf(js, sizeof js, TINY_CFG_JSON, tied ? "true" : "false");
    model_config_parse(cfg, js, "<test config>");
    param_layout_init(pl, cfg);
    param_set_init(ps, pl);
    tl_rng r;
    tl_rng_init(&r, seed);
    for (int i = 0; i < pl->n_tensors; i++) {
        const param_tensor *p = &pl->tensors[i];
        float *x = ps->data + p->offset;
        if (p->ndim == 1) for (int64_t j = 0; j < p->numel; j++) x[j] = 1.0f + tl_normal(&r, 0.1f);
        else tl_fill_normal(&r, x, p->numel, 0.08f);
    }
}
