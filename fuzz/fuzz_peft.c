// fuzz_peft.c: a PEFT LoRA adapter folder (adapter_config.json + adapter_model.safetensors) read for a tiny
// Qwen3 model. The input is both files: a 4-byte little-endian length, that many bytes of adapter_config.json,
// then adapter_model.safetensors (fuzz/make_corpus.sh writes valid pairs as seeds).
#include <string.h>

#include "fuzz_common.h"
#include "io/peft.h"
#include "model/config.h"

static const char CFG[] =
    "{\"model_type\": \"qwen3\", \"vocab_size\": 16, \"hidden_size\": 8, \"intermediate_size\": 8, \"num_hidden_layers\": 1,"
    " \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 4, \"max_position_embeddings\": 32}";

static void body(const uint8_t *data, size_t n) {
    static model_config cfg;
    static int made;
    if (!made) {
        model_config_parse(&cfg, CFG, "fuzz config");
        made = 1;
    }
    if (n < 4) return;
    const size_t cl = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
    if (cl > n - 4) return;
    const char *cp = fuzz_file("adapter_config.json", data + 4, cl);
    fuzz_file("adapter_model.safetensors", data + 4 + cl, n - 4 - cl);
    // both files live in the harness's scratch directory: that directory is the adapter folder
    char dir[4096];
    const char *slash = strrchr(cp, '/');
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - cp), cp);
    lora_layout ll;
    param_set ad;
    peft_load(dir, &cfg, &ll, &ad);
    param_set_free(&ad);
    lora_layout_free(&ll);
}
FUZZ_TARGET(body)
