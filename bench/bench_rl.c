// bench_rl.c: throughput of the RL core: the actor loss with its per-token gradients (rl_ppo_loss: vanilla PPO +
// entropy bonus + low_var_kl loss, token-mean) against PyTorch autograd on the same shape in the same run, and
// Karmarkar-Karp balancing. Medians of several runs; never pass/fail.
// Usage: build/bench/bench_rl [B T]   (default 256 x 1024)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "rl/policy_loss.h"
#include "trainer/balance.h"
#include "bench_util.h"

#define R 7


int main(int argc, char **argv) {
    int64_t B = argc > 2 ? atoll(argv[1]) : 256, T = argc > 2 ? atoll(argv[2]) : 1024, n = B * T;
    float *lp = rlc_alloc(n * 4), *old = rlc_alloc(n * 4), *ref = rlc_alloc(n * 4), *adv = rlc_alloc(n * 4);
    float *ent = rlc_alloc(n * 4), *mask = rlc_alloc(n * 4), *g = rlc_alloc(n * 4), *ge = rlc_alloc(n * 4);
    uint64_t s = 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        float u = (float)((s >> 40) * (1.0 / 16777216.0));
        lp[i] = -3 * u;
        old[i] = lp[i] + 0.3f * (u - 0.5f);
        ref[i] = lp[i] - 0.2f * (u - 0.4f);
        adv[i] = 2 * u - 1;
        ent[i] = u;
        mask[i] = 1;
    }
    rl_loss_cfg cfg;
    rl_loss_cfg_defaults(&cfg);   // vanilla, token-mean, clip 0.2/0.2/3.0
    cfg.entropy_coeff = 0.01;
    cfg.use_kl_loss = 1;
    cfg.kl_loss_type = (rl_kl_type){RL_KL_K3, 0};
    rl_loss_out o;
    double t[R];
    for (int r = 0; r < R; r++) {
        memset(g, 0, n * 4);
        memset(ge, 0, n * 4);
        double t0 = rlc_now();
        rl_ppo_loss(&o, g, ge, lp, old, ref, adv, ent, mask, NULL, B, T, &cfg, NULL);
        t[r] = rlc_now() - t0;
    }
    double ours = bench_median(t, R);
    printf("rl_ppo_loss + per-token grads, %lld x %lld tokens: median %.2f ms, %.1f Mtok/s\n", (long long)B, (long long)T,
           ours * 1e3, (double)n / ours / 1e6);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 bench/rl_torch.py %lld %lld %d 1 2>/dev/null", (long long)B, (long long)T, R);
    FILE *p = popen(cmd, "r");
    double tt = 0;
    if (p && fscanf(p, "%lf", &tt) == 1 && tt > 0)
        printf("PyTorch autograd (1 thread), same loss: median %.2f ms -> rlc is %.2fx\n", tt * 1e3, tt / ours);
    else printf("PyTorch peer unavailable\n");
    if (p) pclose(p);
    // Karmarkar-Karp: DP balancing of 8192 sequences over 64 ranks, micro-batches of 2048 sequences.
    int64_t m = 8192, *w = rlc_malloc(m * 8);
    for (int64_t i = 0; i < m; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = 100 + (int64_t)((s >> 33) % 1400);
    }
    for (int r = 0; r < R; r++) {
        rlc_partition q;
        double t0 = rlc_now();
        rlc_balanced_partitions(&q, w, m, 64, 1);
        t[r] = rlc_now() - t0;
        rlc_partition_free(&q);
    }
    printf("Karmarkar-Karp 8192 items -> 64 equal parts: median %.2f ms\n", bench_median(t, R) * 1e3);
    for (int r = 0; r < R; r++) {
        rlc_partition q;
        double t0 = rlc_now();
        rlc_rearrange_micro_batches(&q, w, 2048, 16384, 0, 0, 1, "bench");
        t[r] = rlc_now() - t0;
        rlc_partition_free(&q);
    }
    printf("rearrange_micro_batches 2048 sequences, 16384-token budget: median %.2f ms\n", bench_median(t, R) * 1e3);
    printf("peak RSS %.1f MiB\n", (double)rlc_peak_rss() / (1 << 20));
    free(w);
    rlc_free(lp); rlc_free(old); rlc_free(ref); rlc_free(adv); rlc_free(ent); rlc_free(mask); rlc_free(g); rlc_free(ge);
    return 0;
}
