// main.c: the rlc command-line entry point; dispatches to the subcommands in src/cli/cmd_*.c.
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "cli/cli.h"
#include "core/common.h"

static const struct { const char *name; rlc_cmd_fn fn; const char *help; } CMDS[] = {
    {"init", cmd_init, "write a randomly initialised checkpoint (qwen3, qwen2, llama, mistral, gemma3_text)"},
    {"logprob", cmd_logprob, "per-token log-probs and entropy of sequences"},
    {"sft", cmd_sft, "supervised fine-tuning on marked tokens"},
    {"tokenize", cmd_tokenize, "encode/decode text with a tokenizer.json"},
    {"generate", cmd_generate, "sample responses (paged KV cache, continuous batching)"},
    {"train", cmd_train, "GRPO/PPO training from a verl-style YAML config"},
    {"eval", cmd_eval, "validation metrics of a checkpoint"},
    {"demo", cmd_demo, "embedded end-to-end demo: SFT then GRPO on a synthetic task"},
    {"gen-task", cmd_gen_task, "generate synthetic GSM8K-format word problems"},
    {"train-tokenizer", cmd_train_tokenizer, "train a byte-level BPE tokenizer.json"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: rlc <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof CMDS / sizeof CMDS[0]; i++)
        fprintf(f, "  %-16s %s\n", CMDS[i].name, CMDS[i].help);
}

int main(int argc, char **argv) {
    backend_fix_blas_coretype(argc, argv);
    // Keep freed scratch buffers (up to 32 MiB each: attention and log-prob head chunks, per-step
    // batches) in the heap for reuse instead of unmapping them, so every step does not page-fault them
    // in again.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof CMDS / sizeof CMDS[0]; i++) {
        if (strcmp(argv[1], CMDS[i].name) != 0) continue;
        return CMDS[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "rlc: error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
