// dapo.c: DAPO's group filter, generation-batch accounting and overlong penalty (see dapo.h).
#include "rl/dapo.h"

#include <string.h>

#include "core/common.h"

dapo_metric_kind dapo_metric_kind_of(const char *name) {
    if (name && !strcmp(name, "seq_reward")) return DAPO_METRIC_SEQ_REWARD;
    if (name && !strcmp(name, "seq_final_reward")) return DAPO_METRIC_SEQ_FINAL_REWARD;
    return DAPO_METRIC_EXTRA;
}

// numpy/core/src/umath/loops_utils.h.src pairwise_sum: plain loop under 8, eight accumulators up to 128, halves
// (cut at a multiple of 8) above.
#define PW_BLOCKSIZE 128
#define NP_PAIRWISE(NAME, TYPE)                                                                         \
    TYPE NAME(const TYPE *a, int64_t n) {                                                               \
        if (n < 8) {                                                                                    \
            TYPE res = 0;                                                                               \
            for (int64_t i = 0; i < n; i++) res += a[i];                                                \
            return res;                                                                                 \
        }                                                                                               \
        if (n <= PW_BLOCKSIZE) {                                                                        \
            TYPE r[8];                                                                                  \
            for (int j = 0; j < 8; j++) r[j] = a[j];                                                    \
            int64_t i;                                                                                  \
            for (i = 8; i < n - (n % 8); i += 8)                                                        \
                for (int j = 0; j < 8; j++) r[j] += a[i + j];                                           \
            TYPE res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));               \
            for (; i < n; i++) res += a[i];                                                             \
            return res;                                                                                 \
        }                                                                                               \
        int64_t n2 = n / 2;                                                                             \
        n2 -= n2 % 8;                                                                                   \
        return NAME(a, n2) + NAME(a + n2, n - n2);                                                      \
    }
NP_PAIRWISE(dapo_np_sum64, double)
NP_PAIRWISE(dapo_np_sum32, float)

int dapo_group_keep(const double *vals, int64_t n, int f32) {
    if (n <= 1) return 1;
    if (f32) {
        float *v = rlc_malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++) v[i] = (float)vals[i];
        float mean = dapo_np_sum32(v, n) / (float)n;
        int diff = 0;
        for (int64_t i = 0; i < n; i++) diff |= v[i] != mean;
        free(v);
        return diff;
    }
    double mean = dapo_np_sum64(vals, n) / (double)n;
    int diff = 0;
    for (int64_t i = 0; i < n; i++) diff |= vals[i] != mean;
    return diff;
}

void dapo_accumulator_init(dapo_accumulator *a, int enable, const char *metric, int64_t train_batch_size, int64_t n,
                           int64_t max_num_gen_batches) {
    memset(a, 0, sizeof *a);
    CHECK(train_batch_size >= 1 && n >= 1, "train_batch_size %lld, n %lld", (long long)train_batch_size, (long long)n);
    a->enable = enable;
    a->train_batch_size = train_batch_size;
    a->n = n;
    a->max_num_gen_batches = max_num_gen_batches;
    a->metric_f32 = dapo_metric_kind_of(metric) != DAPO_METRIC_EXTRA;
}

int dapo_accumulator_add(dapo_accumulator *a, uint8_t *keep, const double *metric, int64_t n_groups,
                         int64_t *num_gen_batches_out) {
    a->num_gen_batches++;
    if (!a->enable) {   // the generated batch is the step's batch, as generated
        for (int64_t g = 0; g < n_groups; g++) keep[g] = 1;
        if (num_gen_batches_out) *num_gen_batches_out = a->num_gen_batches;
        a->num_gen_batches = a->kept = a->dropped = 0;
        return 1;
    }
    CHECK(metric != NULL, "the group filter needs the metric values");
    int64_t kept_now = 0;
    for (int64_t g = 0; g < n_groups; g++) {
        keep[g] = (uint8_t)dapo_group_keep(metric + g * a->n, a->n, a->metric_f32);
        kept_now += keep[g];
        a->dropped += !keep[g];
    }
    if (a->kept + kept_now < a->train_batch_size) {
        a->kept += kept_now;
        if (a->max_num_gen_batches <= 0 || a->num_gen_batches < a->max_num_gen_batches) return 0;
        rlc_die("algorithm.filter_groups: num_gen_batches=%lld >= max_num_gen_batches=%lld. Generated too many. Please "
                "check if your data are too difficult. You could also try set max_num_gen_batches=0 to enable endless "
                "trials.",
                (long long)a->num_gen_batches, (long long)a->max_num_gen_batches);
    }
    // batch[: train_batch_size * n]: the first train_batch_size groups of everything kept
    int64_t room = a->train_batch_size - a->kept, surplus = 0;
    for (int64_t g = 0; g < n_groups; g++)
        if (keep[g]) {
            if (room > 0) room--;
            else { keep[g] = 0; surplus++; }
        }
    a->last_evicted = a->dropped;
    a->last_surplus = surplus;
    if (num_gen_batches_out) *num_gen_batches_out = a->num_gen_batches;
    a->num_gen_batches = a->kept = a->dropped = 0;
    return 1;
}

float dapo_overlong_reward(int64_t valid_response_length, const dapo_overlong_cfg *c) {
    if (!c->enable) return 0.0f;
    CHECK(c->len > 0 && c->max_resp_len >= c->len, "overlong buffer %lld of max_resp_len %lld", (long long)c->len,
          (long long)c->max_resp_len);
    int64_t expected = c->max_resp_len - c->len;
    int64_t exceed = valid_response_length - expected;
    // torch: an int64 tensor / int -> float32, * penalty_factor (float32), min(., 0)
    float o = (float)(-exceed) / (float)c->len;
    o = o * (float)c->penalty_factor;
    return o < 0.0f ? o : 0.0f;
}

static void add_extra(rlc_reward_result *o, const char *key, double v) {
    for (int i = 0; i < o->n_extra; i++)
        if (!strcmp(o->extra_keys[i], key)) { o->extra_vals[i] = v; return; }
    o->extra_keys = rlc_realloc(o->extra_keys, (size_t)(o->n_extra + 1) * sizeof(char *));
    o->extra_vals = rlc_realloc(o->extra_vals, (size_t)(o->n_extra + 1) * sizeof(double));
    o->extra_keys[o->n_extra] = rlc_strdup(key);
    o->extra_vals[o->n_extra++] = v;
}

void dapo_apply_overlong(rlc_reward_result *res, const int64_t *resp_len, int64_t n, const dapo_overlong_cfg *c) {
    if (!c->enable) return;
    for (int64_t i = 0; i < n; i++) {
        float o = dapo_overlong_reward(resp_len[i], c);
        res[i].score = (double)((float)res[i].score + o);
        if (c->log) {
            add_extra(&res[i], "overlong_reward", (double)o);
            add_extra(&res[i], "overlong", o < 0.0f ? 1.0 : 0.0);
        }
    }
}

void dapo_metric_values(double *out, const char *name, int64_t n, const rlc_reward_result *res,
                        const float *token_scores, const float *token_rewards, int64_t T) {
    dapo_metric_kind k = dapo_metric_kind_of(name);
    for (int64_t i = 0; i < n; i++) {
        if (k != DAPO_METRIC_EXTRA) {
            const float *row = (k == DAPO_METRIC_SEQ_REWARD ? token_scores : token_rewards) + i * T;
            float s = 0;
            for (int64_t t = 0; t < T; t++) s += row[t];
            out[i] = s;
            continue;
        }
        int found = 0;
        for (int j = 0; j < res[i].n_extra && !found; j++)
            if (!strcmp(res[i].extra_keys[j], name)) { out[i] = res[i].extra_vals[j]; found = 1; }
        if (!found && !strcmp(name, "score")) { out[i] = res[i].score; found = 1; }
        if (!found)
            rlc_die("config: algorithm.filter_groups.metric: response %lld has no reward metric '%s' (use seq_reward, "
                    "seq_final_reward, or a key the reward function returns, e.g. acc)",
                    (long long)i, name);
    }
}
