// cmd_train.c: `rlc train CONFIG.yaml [key=value ...]` and `rlc eval CONFIG.yaml [key=value ...]`.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/common.h"
#include "dist/dist.h"
#include "io/hf_cache.h"
#include "trainer/config.h"
#include "trainer/grpo.h"

static int run(int argc, char **argv, int val_only) {
    const char *name = val_only ? "eval" : "train";
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: rlc %s [CONFIG.yaml] [dotted.key=value ...]\n\nconfig keys (verl names):\n", name);
        rlc_config_print_schema(stdout);
        return 0;
    }
    const char *yaml = NULL;
    int first = 1;
    if (argc >= 2 && !strchr(argv[1], '=')) { yaml = argv[1]; first = 2; }
    for (int i = first; i < argc; i++)
        if (!strchr(argv[i], '=') || argv[i][0] == '-')
            rlc_die("%s: expected dotted.key=value overrides after the config file, got '%s'", name, argv[i]);
    dist_ctx dd;   // world 1 unless launched by mpirun (data-parallel GRPO, docs/distributed.md)
    dist_init(&dd, NULL, NULL);
    if (dd.rank != 0) {   // rank 0 alone prints
        FILE *nul = fopen("/dev/null", "w");
        if (nul) { fflush(stdout); dup2(fileno(nul), 1); fclose(nul); }
    }
    rlc_train_config c;   // rlc_config_from_args initialises it
    rlc_config_from_args(&c, yaml, argc - first, argv + first);
    if (c.actor_rollout_ref.model.path) {   // a checkpoint directory, or a hub id in the local HF cache
        char *p = hf_resolve_model(c.actor_rollout_ref.model.path, "actor_rollout_ref.model.path");
        free(c.actor_rollout_ref.model.path);
        c.actor_rollout_ref.model.path = p;
    }
    if (val_only) c.trainer.val_only = 1;
    int rc = grpo_run_dist(&c, val_only || c.trainer.val_only, &dd);
    rlc_config_free(&c);
    dist_finalize(&dd);
    return rc;
}

int cmd_train(int argc, char **argv) { return run(argc, argv, 0); }
int cmd_eval(int argc, char **argv) { return run(argc, argv, 1); }
