// main.c: the rlc command-line entry point; dispatches to the subcommands in src/cli/cmd_*.c.
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include <cblas.h>
#ifdef RLC_WITH_MPI
#include <mpi.h>
#endif

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
    {"merge-lora", cmd_merge_lora, "merge a PEFT LoRA adapter into its base: a plain HF checkpoint"},
    {"env", cmd_env, "environments for multi-turn tool rollouts (rlc env calculator)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: rlc <command> [options]   (rlc <command> --help: its options; rlc --version: the build)\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof CMDS / sizeof CMDS[0]; i++)
        fprintf(f, "  %-16s %s\n", CMDS[i].name, CMDS[i].help);
}

// The version and what this binary was built with: the BLAS library and the kernel it runs (after the core-type
// fix above), MPI or not, the compiler, the target and the sanitizers.
static void version(void) {
    printf("rlc %s\n", RLC_VERSION);
    printf("BLAS: %s; kernel %s\n", openblas_get_config(), openblas_get_corename());
#ifdef RLC_WITH_MPI
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl) *nl = 0;
    printf("MPI: yes (%s; mpirun -np N rlc ...)\n", lib);
#else
    printf("MPI: no (built with MPI=0 or without mpicc)\n");
#endif
#if defined(__clang__)
    printf("compiler: clang %s", __clang_version__);
#else
    printf("compiler: gcc %s", __VERSION__);
#endif
#if defined(__AVX512F__)
    printf("; target AVX-512");
#elif defined(__AVX2__)
    printf("; target AVX2");
#else
    printf("; target x86-64");
#endif
#if defined(__SANITIZE_ADDRESS__)
    printf("; AddressSanitizer + UndefinedBehaviorSanitizer");
#endif
    printf("\n");
}

int main(int argc, char **argv) {
    backend_fix_blas_coretype(argc, argv);
    // Keep freed scratch buffers (up to 32 MiB each: attention and log-prob head chunks, per-step
    // batches) in the heap for reuse instead of unmapping them, so every step does not page-fault them
    // in again.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || (!strcmp(argv[1], "help") && argc < 3)) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version")) {
        version();
        return 0;
    }
    // `rlc help CMD` and -h / --help anywhere after a command print that command's usage.
    int want_help = 0;
    const char *name = argv[1];
    if (!strcmp(name, "help") && argc >= 3) { name = argv[2]; want_help = 1; }
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) want_help = 1;
    for (size_t i = 0; i < sizeof CMDS / sizeof CMDS[0]; i++) {
        if (strcmp(name, CMDS[i].name) != 0) continue;
        if (want_help) {
            char *hargv[] = {(char *)CMDS[i].name, (char *)"--help", NULL};
            return CMDS[i].fn(2, hargv);
        }
        return CMDS[i].fn(argc - 1, argv + 1);
    }
    argv[1] = (char *)name;
    fprintf(stderr, "rlc: error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
