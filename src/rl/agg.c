// agg.c: loss aggregation weights (see agg.h).
#include "rl/agg.h"

#include <string.h>

#include "core/common.h"

static const char *k_agg_names[] = {"token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean",
                                    "seq-mean-token-sum-norm"};

int rl_agg_mode_parse(const char *name, rl_agg_mode *out) {
    for (int i = 0; i < (int)(sizeof k_agg_names / sizeof k_agg_names[0]); i++)
        if (strcmp(name, k_agg_names[i]) == 0) { *out = (rl_agg_mode)i; return 0; }
    return -1;
}
const char *rl_agg_mode_name(rl_agg_mode mode) {
    CHECK(mode >= 0 && mode <= RL_AGG_SEQ_MEAN_TOKEN_SUM_NORM, "bad agg mode %d", (int)mode);
    return k_agg_names[mode];
}

double rl_masked_mean(const float *x, const float *mask, int64_t n) {
    double s = 0, c = 0;
    for (int64_t i = 0; i < n; i++)
        if (mask[i] != 0) { s += (double)x[i] * mask[i]; c += mask[i]; }
    return s / (c + 1e-8);
}

void rl_agg_row_scales(double *rs, const float *mask, int64_t B, int64_t T, rl_agg_mode mode, const rl_batch_info *gbi) {
    rl_batch_info none = {1, 0, 0, 0};
    if (!gbi) gbi = &none;
    double D = (double)gbi->dp_size;
    CHECK(gbi->dp_size >= 1, "dp_size %lld", (long long)gbi->dp_size);
    if (mode == RL_AGG_TOKEN_MEAN || mode == RL_AGG_TOKEN_SUM) {
        double scale = D;
        if (mode == RL_AGG_TOKEN_MEAN) {
            double N = gbi->batch_num_tokens;
            if (N <= 0) {
                CHECK(gbi->dp_size == 1, "token-mean: batch_num_tokens is required when dp_size > 1");
                N = 0;
                for (int64_t i = 0; i < B * T; i++) N += mask[i];
            }
            scale = N > 0 ? D / N : 0.0;   // no token anywhere: nothing to weight
        }
        for (int64_t b = 0; b < B; b++) rs[b] = scale;
        return;
    }
    double G = gbi->global_batch_size;
    if (G <= 0) {
        CHECK(gbi->dp_size == 1, "%s: global_batch_size is required when dp_size > 1", rl_agg_mode_name(mode));
        G = 0;
        for (int64_t b = 0; b < B; b++) {
            double s = 0;
            for (int64_t t = 0; t < T; t++) s += mask[b * T + t];
            G += s > 0;
        }
    }
    double lsf = 1.0;
    if (mode == RL_AGG_SEQ_MEAN_TOKEN_SUM_NORM) lsf = gbi->loss_scale_factor > 0 ? gbi->loss_scale_factor : (double)T;
    for (int64_t b = 0; b < B; b++) {
        const float *m = mask + b * T;
        double cnt = 0;
        for (int64_t t = 0; t < T; t++) cnt += m[t];
        double r = cnt > 0 && G > 0 ? D / G / lsf : 0.0;   // fully masked rows do not count (seq_mask)
        if (mode == RL_AGG_SEQ_MEAN_TOKEN_MEAN) r /= (cnt + 1e-8);
        rs[b] = r;
    }
}

void rl_agg_weights(float *w, const float *mask, int64_t B, int64_t T, rl_agg_mode mode, const rl_batch_info *gbi) {
    double *rs = rlc_malloc((size_t)(B ? B : 1) * sizeof(double));
    rl_agg_row_scales(rs, mask, B, T, mode, gbi);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            w[i] = mask[i] != 0 ? (float)(mask[i] * rs[b]) : 0.0f;
        }
    free(rs);
}

double rl_agg_loss(const float *L, const float *mask, int64_t B, int64_t T, rl_agg_mode mode, const rl_batch_info *gbi) {
    float *w = rlc_malloc((size_t)(B * T) * sizeof(float));
    rl_agg_weights(w, mask, B, T, mode, gbi);
    double s = 0;
    for (int64_t i = 0; i < B * T; i++)
        if (mask[i] != 0) s += (double)w[i] * L[i];
    free(w);
    return s;
}
