// bench_tensorboard: what the tensorboard logger adds to a training step. A GRPO step logs ~100 metrics
// (verl's names and lengths, with validation); the peer is the metrics.jsonl append every step already does
// (one write + fsync). Reports the median per-step time of each, the event bytes per step, and peak RSS.
// Usage: bench_tensorboard [--steps N] [--metrics M] [--dir DIR]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "core/common.h"
#include "trainer/metrics.h"
#include "trainer/tensorboard.h"

int main(int argc, char **argv) {
    int steps = 200, nm = 100;
    const char *dir = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--metrics")) nm = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
        else { fprintf(stderr, "usage: bench_tensorboard [--steps N] [--metrics M] [--dir DIR]\n"); return 2; }
    }
    if (steps < 1 || nm < 1) rlc_die("bench_tensorboard: --steps and --metrics must be >= 1");
    char tmpl[] = "/tmp/rlc-bench-tb-XXXXXX";
    if (!dir && !(dir = mkdtemp(tmpl))) rlc_die("bench_tensorboard: mkdtemp failed");
    static const char *stems[] = {"critic/score/", "critic/rewards/", "critic/advantages/", "response_length/",
                                  "actor/", "timing_s/", "timing_per_token_ms/", "perf/", "training/",
                                  "val-core/openai/gsm8k/acc/", "val-aux/openai/gsm8k/reward/"};
    rlc_metrics m;
    rlc_metrics_init(&m);
    for (int i = 0; i < nm; i++) {
        char k[128];
        snprintf(k, sizeof k, "%s%s_%d", stems[i % 11], i % 3 ? "mean" : "clip_ratio", i);
        rlc_metrics_set(&m, k, 0.001 * i - 0.05);
    }
    tb_writer w;
    tb_writer_init(&w, dir);
    char *jsonl = rlc_path_join(dir, "metrics.jsonl");
    double *t_tb = malloc(sizeof(double) * (size_t)steps), *t_js = malloc(sizeof(double) * (size_t)steps);
    int64_t bytes = 0;
    for (int s = 0; s < steps; s++) {
        for (int64_t i = 0; i < m.n; i++) m.vals[i] += 1e-3;
        double t0 = rlc_now();
        tb_write_metrics(&w, &m, s + 1);
        double t1 = rlc_now();
        rlc_metrics_append_jsonl(&m, jsonl);
        double t2 = rlc_now();
        t_tb[s] = t1 - t0;
        t_js[s] = t2 - t1;
        bytes = (int64_t)w.record.n;
    }
    tb_writer_free(&w);
    double mt = bench_median(t_tb, steps), mj = bench_median(t_js, steps);
    printf("bench_tensorboard: %d steps x %d metrics, %lld event bytes per step (%s)\n", steps, nm, (long long)bytes, dir);
    printf("  tensorboard event (encode + CRC-32C + write): %.1f us per step median\n", mt * 1e6);
    printf("  peer: metrics.jsonl append (write + fsync):    %.1f us per step median\n", mj * 1e6);
    printf("  ratio tensorboard / jsonl: %.3f; peak RSS %.1f MiB\n", mt / mj, rlc_peak_rss() / 1048576.0);
    free(t_tb); free(t_js); free(jsonl);
    rlc_metrics_free(&m);
    if (!strncmp(dir, "/tmp/rlc-bench-tb-", 18)) { char cmd[256]; snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir); if (system(cmd)) {} }
    return 0;
}
