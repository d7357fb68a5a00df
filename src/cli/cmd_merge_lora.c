// cmd_merge_lora.c: `rlc merge-lora`: a PEFT LoRA adapter merged into its base, written as a plain HF checkpoint.
//
// Every adapted weight becomes W' = W + s·B·A, computed in fp32 (a bf16 base is widened first, as PEFT's CPU merge
// does), then stored in the output dtype (bf16 round-to-nearest-even, or f32). Every other tensor is copied under
// its HF name; config.json is the base's (torch_dtype set to the output dtype), and the tokenizer and generation
// config files are copied, so the folder loads in transformers and vLLM like the base.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cli/cli.h"
#include "core/common.h"
#include "io/checkpoint.h"
#include "io/hf_cache.h"
#include "io/peft.h"

static const char *USAGE = "rlc merge-lora --model BASE --adapter DIR --out DIR [--dtype bf16|f32] [--threads N]";

int cmd_merge_lora(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (cli_flag(&a, "help")) { printf("usage: %s\n", USAGE); cli_args_free(&a); return 0; }
    char *model_dir = hf_resolve_model(cli_opt_req(&a, "model"), "--model");
    const char *adapter = cli_opt_req(&a, "adapter");
    const char *out = cli_opt_req(&a, "out");
    const char *dt = cli_opt(&a, "dtype");
    int threads = (int)cli_int(&a, "threads", 0, 0, 4096);
    cli_check_unknown(&a, USAGE);
    backend_ctx be;
    backend_init(&be, threads);

    model_config cfg;
    param_layout pl;
    param_set ps;
    checkpoint_load(model_dir, &cfg, &pl, &ps);
    st_dtype dtype = strcmp(cfg.torch_dtype, "float32") == 0 ? ST_F32 : ST_BF16;   // default: the base's own
    if (dt) {
        if (strcmp(dt, "bf16") == 0 || strcmp(dt, "bfloat16") == 0) dtype = ST_BF16;
        else if (strcmp(dt, "f32") == 0 || strcmp(dt, "fp32") == 0 || strcmp(dt, "float32") == 0) dtype = ST_F32;
        else rlc_die("merge-lora: --dtype expects bf16 or f32, got '%s'", dt);
    }
    lora_layout ll;
    param_set ad;
    peft_load(adapter, &cfg, &ll, &ad);
    int merged = 0;
    for (int l = 0; l < ll.L; l++) {
        layer_weights lw;
        param_layer_view(&pl, param_block(&ps, 1 + l), &lw);
        for (int p = 0; p < LORA_NPROJ; p++) {
            if (!lora_adapted(&ll, l, p)) continue;
            lora_merge_into(&ll, ad.data, l, p, lora_base_weight(&lw, p));
            merged++;
        }
    }
    checkpoint_save(out, &ps, dtype);
    int copied = checkpoint_copy_tokenizer(model_dir, out);
    fprintf(stderr, "rlc merge-lora: %d modules merged (r %d, scale %g), %s weights in %s, %d tokenizer/generation files copied\n",
            merged, ll.rank, (double)ll.scale, dtype == ST_F32 ? "f32" : "bf16", out, copied);
    param_set_free(&ad);
    lora_layout_free(&ll);
    param_set_free(&ps);
    param_layout_free(&pl);
    free(model_dir);
    cli_args_free(&a);
    return 0;
}
