// fuzz_optim.c: the AdamW state file a resume reads (magic, version, sizes, step, hyper-parameters, the LR
// scheduler step, moments), for a tiny model's layout.
#include "fuzz_common.h"
#include "model/config.h"
#include "model/params.h"
#include "trainer/optim.h"

static const char CFG[] =
    "{\"model_type\": \"qwen3\", \"vocab_size\": 16, \"hidden_size\": 8, \"intermediate_size\": 8, \"num_hidden_layers\": 1,"
    " \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 4, \"max_position_embeddings\": 32}";

static void body(const uint8_t *data, size_t n) {
    static param_layout pl;
    static int made;
    if (!made) {
        model_config c;
        model_config_parse(&c, CFG, "fuzz config");
        param_layout_init(&pl, &c);
        made = 1;
    }
    const char *p = fuzz_file("optimizer.bin", data, n);
    adamw_hparams h = adamw_hparams_default();
    adamw_state st;
    adamw_init(&st, &pl, &h);
    adamw_load_resume(&st, p);
    adamw_free(&st);
}
FUZZ_TARGET(body)
