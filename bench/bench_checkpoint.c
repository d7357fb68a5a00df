// bench_checkpoint.c: time and peak RSS of checkpoint save/load on a Qwen3 shape (default: the 0.6B
// config). Not a test. Usage: build/bench/bench_checkpoint [CONFIG.json] [runs] [bf16|f32]
// Prints medians over runs of: random init (rng_fill_normal, 1 thread), save, load.
#include <omp.h>
#include <unistd.h>

#include "core/common.h"
#include "core/rng.h"
#include "io/checkpoint.h"
#include "bench_util.h"


int main(int argc, char **argv) {
    const char *cfgp = argc > 1 ? argv[1] : "examples/qwen3-0.6b-config.json";
    int runs = argc > 2 ? atoi(argv[2]) : 3;
    st_dtype dt = argc > 3 && !strcmp(argv[3], "f32") ? ST_F32 : ST_BF16;
    if (runs < 1 || runs > 20) runs = 3;
    model_config cfg;
    model_config_load(&cfg, cfgp);
    param_layout pl;
    param_set ps;
    param_layout_init(&pl, &cfg);
    param_set_init(&ps, &pl);
    const char *base = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/rlc-bench-ckpt-%d", base, (int)getpid());
    double t_init[20], t_save[20], t_load[20];
    for (int r = 0; r < runs; r++) {
        double t0 = rlc_now();
        rng g;
        rng_init(&g, (uint64_t)r);
        rng_fill_normal(&g, ps.data, pl.numel, 0.0f, cfg.initializer_range);
        double t1 = rlc_now();
        checkpoint_save(dir, &ps, dt);
        double t2 = rlc_now();
        param_set_free(&ps);   // load into a fresh set, as a trainer start would
        model_config c2;
        param_layout pl2;
        checkpoint_load(dir, &c2, &pl2, &ps);
        double t3 = rlc_now();
        param_layout_free(&pl2);
        ps.layout = &pl;
        t_init[r] = t1 - t0; t_save[r] = t2 - t1; t_load[r] = t3 - t2;
    }
    qsort(t_init, (size_t)runs, sizeof(double), bench_cmp_double);
    qsort(t_save, (size_t)runs, sizeof(double), bench_cmp_double);
    qsort(t_load, (size_t)runs, sizeof(double), bench_cmp_double);
    char *mp = rlc_path_join(dir, "model.safetensors");
    size_t fsize = 0;
    FILE *f = fopen(mp, "rb");
    if (f) { fseek(f, 0, SEEK_END); fsize = (size_t)ftell(f); fclose(f); }
    double gb = (double)fsize / 1e9;
    printf("bench_checkpoint %s: %lld params, %s file %.3f GB, %d runs (medians), %d threads\n", cfgp, (long long)pl.numel,
           st_dtype_name(dt), gb, runs, omp_get_max_threads());
    printf("  normal init (1 thread): %.2f s = %.1f Mnormal/s\n", t_init[runs / 2], (double)pl.numel / t_init[runs / 2] / 1e6);
    printf("  save: %.2f s = %.2f GB/s\n", t_save[runs / 2], gb / t_save[runs / 2]);
    printf("  load: %.2f s = %.2f GB/s; peak RSS %.2f GB (fp32 params %.2f GB)\n", t_load[runs / 2], gb / t_load[runs / 2],
           (double)rlc_peak_rss() / 1e9, (double)pl.numel * 4 / 1e9);
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    free(mp);
    param_set_free(&ps);
    param_layout_free(&pl);
    return 0;
}
