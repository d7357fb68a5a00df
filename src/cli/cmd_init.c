// cmd_init.c: `rlc init` writes a randomly initialised checkpoint of any decoder family (config.json +
// model.safetensors). Initialisation follows transformers' _init_weights: Linear and Embedding weights
// ~ normal(0, initializer_range), biases 0, RMSNorm weights 1 (Gemma's (1 + w) norms: 0). Draws come from Philox streams keyed by
// (seed, tensor index, chunk index), so the result does not depend on the thread count.
#include <omp.h>

#include "cli/cli.h"
#include "core/common.h"
#include "core/rng.h"
#include "io/checkpoint.h"

#define INIT_CHUNK ((int64_t)1 << 16)   // elements per RNG stream (divides ST_FILL_CHUNK)

static const char *USAGE =
    "rlc init --config CONFIG.json --out DIR [--seed N] [--dtype bf16|f32|f16] [--tokenizer SRC_DIR] [--threads N]";

typedef struct {
    const param_layout *pl;
    uint64_t seed;
    int n_threads;
} init_ctx;

// Elements [start, start + n) of tensor t (start is a multiple of ST_FILL_CHUNK, hence of INIT_CHUNK):
// chunk c of tensor i comes from stream (seed, i, c), whatever the thread count and write blocking.
static void init_fill(void *vctx, const st_write_tensor *t, int64_t start, int64_t n, float *dst) {
    const init_ctx *c = vctx;
    int ti = param_layout_find(c->pl, t->name);
    CHECK(ti >= 0 && start % INIT_CHUNK == 0, "tensor %s, start %lld", t->name, (long long)start);
    const param_tensor *p = &c->pl->tensors[ti];
    if (p->ndim == 1) {
        // biases 0 (nn.Linear under _init_weights); RMSNorm weights 1, or 0 where the norm is x_hat * (1 + w) (Gemma)
        const float v = strstr(t->name, ".bias") || c->pl->cfg.norm_plus_one ? 0.0f : 1.0f;
        for (int64_t j = 0; j < n; j++) dst[j] = v;
        return;
    }
    const float std = c->pl->cfg.initializer_range;   // Linear and Embedding weights
    const int64_t nc = (n + INIT_CHUNK - 1) / INIT_CHUNK;
#pragma omp parallel for schedule(static) num_threads(c->n_threads)
    for (int64_t k = 0; k < nc; k++) {
        int64_t off = k * INIT_CHUNK, m = n - off < INIT_CHUNK ? n - off : INIT_CHUNK;
        rng r;
        rng_stream(&r, c->seed, (uint64_t)ti, (uint64_t)((start + off) / INIT_CHUNK));
        rng_fill_normal(&r, dst + off, m, 0.0f, std);
    }
}

// Refuse up front a checkpoint the disk cannot hold, rather than writing until it is full.
static void init_check_disk(const char *out, const param_layout *pl, st_dtype dtype) {
    char *dir = rlc_strdup(out);   // the nearest existing ancestor holds the file system the file lands on
    while (!rlc_file_exists(dir)) {
        char *sl = strrchr(dir, '/');
        if (!sl) { strcpy(dir, "."); break; }
        if (sl == dir) { dir[1] = 0; break; }
        *sl = 0;
    }
    const double need = (double)pl->numel * (double)st_dtype_size(dtype) + 1e6;   // + header and config
    const int64_t have = rlc_disk_free(dir);
    if (have >= 0 && need > (double)have)
        rlc_die("init: %s needs %.0f bytes (%.1f GiB) for %lld parameters in %s; %s has %.1f GiB free", out, need,
                need / 1073741824.0, (long long)pl->numel, st_dtype_name(dtype), dir, (double)have / 1073741824.0);
    free(dir);
}

int cmd_init(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (cli_flag(&a, "help")) { printf("usage: %s\n", USAGE); cli_args_free(&a); return 0; }
    const char *config = cli_opt_req(&a, "config");
    const char *out = cli_opt_req(&a, "out");
    uint64_t seed = (uint64_t)cli_int(&a, "seed", 0, 0, INT64_MAX);
    const char *dtype_s = cli_opt(&a, "dtype");
    const char *tok = cli_opt(&a, "tokenizer");
    int n_threads = (int)cli_int(&a, "threads", 0, 0, 4096);
    cli_check_unknown(&a, USAGE);
    if (n_threads <= 0) n_threads = omp_get_max_threads();

    model_config cfg;
    model_config_load(&cfg, config);
    st_dtype dtype;
    if (!dtype_s) dtype = strcmp(cfg.torch_dtype, "float32") == 0 ? ST_F32 : ST_BF16;
    else if (!strcmp(dtype_s, "bf16") || !strcmp(dtype_s, "bfloat16")) dtype = ST_BF16;
    else if (!strcmp(dtype_s, "f32") || !strcmp(dtype_s, "fp32") || !strcmp(dtype_s, "float32")) dtype = ST_F32;
    else if (!strcmp(dtype_s, "f16") || !strcmp(dtype_s, "fp16") || !strcmp(dtype_s, "float16")) dtype = ST_F16;
    else rlc_die("init: --dtype must be bf16, f32 or f16, got '%s'", dtype_s);

    double t0 = rlc_now();
    param_layout pl;
    param_layout_init(&pl, &cfg);
    init_check_disk(out, &pl, dtype);
    // values are generated block by block while the file is written: no fp32 copy of the model
    init_ctx ctx = {.pl = &pl, .seed = seed, .n_threads = n_threads};
    checkpoint_save_generated(out, &pl, dtype, init_fill, &ctx);
    int ncopied = tok ? checkpoint_copy_tokenizer(tok, out) : 0;
    double t1 = rlc_now();
    printf("rlc init: wrote %s: %lld parameters in %d tensors, %s, seed %llu (%.2f s)", out, (long long)pl.numel,
           pl.n_tensors, st_dtype_name(dtype), (unsigned long long)seed, t1 - t0);
    if (tok) printf(", %d tokenizer files from %s", ncopied, tok);
    printf("\n");
    param_layout_free(&pl);
    cli_args_free(&a);
    return 0;
}
