// agent_tiny_lm.h: the rollout engine's model in the agent tests: a tiny random Qwen3 (2 layers, hidden 32) with
// the real Qwen3 vocabulary, so the Qwen3 tokenizer decodes its tokens. Header-only.
#pragma once
#include <math.h>
#include <string.h>

#include "model/config.h"
#include "model/decoder.h"
#include "model/params.h"
#include "testlib.h"

typedef struct {
    model_config cfg;
    param_layout pl;
    param_set ps;
    decoder_model m;
} tiny_lm;

// A tiny random Qwen3 with the real vocabulary (so the Qwen3 tokenizer decodes its tokens): 2 layers, hidden 32.
static inline void tiny_lm_init(tiny_lm *t, backend_ctx *be) {
    memset(t, 0, sizeof *t);
    model_config_parse(&t->cfg,
                       "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"vocab_size\": 151936, \"hidden_size\": 32,"
                       " \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
                       " \"head_dim\": 16, \"max_position_embeddings\": 1024, \"rms_norm_eps\": 1e-6, \"rope_theta\": 1000000,"
                       " \"tie_word_embeddings\": true, \"bos_token_id\": null, \"eos_token_id\": 151645, \"torch_dtype\": \"float32\"}",
                       "tiny config.json");
    param_layout_init(&t->pl, &t->cfg);
    param_set_init(&t->ps, &t->pl);
    tl_rng r;
    tl_rng_init(&r, 5);
    for (int i = 0; i < t->pl.n_tensors; i++) {
        const param_tensor *pt = &t->pl.tensors[i];
        float *x = t->ps.data + pt->offset;
        if (pt->ndim == 1) for (int64_t j = 0; j < pt->numel; j++) x[j] = 1.0f + tl_normal(&r, 0.2f);
        else tl_fill_normal(&r, x, pt->numel, (strstr(pt->name, "embed") ? 2.0f : 0.7f) / sqrtf((float)pt->shape[1]));
    }
    decoder_model_init(&t->m, &t->pl, &t->ps, be);
}
