// metrics.c: ordered metrics, JSONL, and verl's metric definitions (see metrics.h).
#include "trainer/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "rl/policy_loss.h"

void rlc_metrics_init(rlc_metrics *m) { memset(m, 0, sizeof *m); }
void rlc_metrics_clear(rlc_metrics *m) {
    for (int64_t i = 0; i < m->n; i++) free(m->keys[i]);
    m->n = 0;
}
void rlc_metrics_free(rlc_metrics *m) {
    rlc_metrics_clear(m);
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}
void rlc_metrics_set(rlc_metrics *m, const char *key, double v) {
    for (int64_t i = 0; i < m->n; i++)
        if (!strcmp(m->keys[i], key)) { m->vals[i] = v; return; }
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 32;
        m->keys = rlc_realloc(m->keys, (size_t)m->cap * sizeof(char *));
        m->vals = rlc_realloc(m->vals, (size_t)m->cap * sizeof(double));
    }
    m->keys[m->n] = rlc_strdup(key);
    m->vals[m->n++] = v;
}
double rlc_metrics_get(const rlc_metrics *m, const char *key, int *found) {
    for (int64_t i = 0; i < m->n; i++)
        if (!strcmp(m->keys[i], key)) { if (found) *found = 1; return m->vals[i]; }
    if (found) *found = 0;
    return NAN;
}

static void put_num(rlc_strbuf *b, double x) {
    if (!isfinite(x)) { rlc_sb_puts(b, "null"); return; }
    if (x == floor(x) && fabs(x) < 9e15) { rlc_sb_printf(b, "%.0f", x); return; }
    char buf[40];
    snprintf(buf, sizeof buf, "%.15g", x);
    if (strtod(buf, NULL) != x) snprintf(buf, sizeof buf, "%.17g", x);
    rlc_sb_puts(b, buf);
}

char *rlc_metrics_to_json(const rlc_metrics *m) {
    rlc_strbuf b = {0};
    rlc_sb_putc(&b, '{');
    for (int64_t i = 0; i < m->n; i++) {
        if (i) rlc_sb_puts(&b, ", ");
        rlc_sb_json_str(&b, m->keys[i], strlen(m->keys[i]));
        rlc_sb_puts(&b, ": ");
        put_num(&b, m->vals[i]);
    }
    rlc_sb_putc(&b, '}');
    return rlc_sb_take(&b);
}

void rlc_metrics_append_jsonl(const rlc_metrics *m, const char *path) {
    char *j = rlc_metrics_to_json(m);
    size_t n = strlen(j);
    j = rlc_realloc(j, n + 2);
    j[n++] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) rlc_die("%s: cannot open the metrics log: %s", path, strerror(errno));
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, j + off, n - off);
        if (w < 0) {
            if (errno == EINTR) continue;
            rlc_die("%s: cannot append metrics: %s", path, strerror(errno));
        }
        off += (size_t)w;
    }
    if (fsync(fd) != 0) rlc_die("%s: fsync failed: %s", path, strerror(errno));
    close(fd);
    free(j);
}

double rlc_metric_reduce(const char *name, const double *v, int64_t n) {
    if (n <= 0) return NAN;
    double r = v[0];
    if (strstr(name, "max")) { for (int64_t i = 1; i < n; i++) if (v[i] > r) r = v[i]; return r; }
    if (strstr(name, "min")) { for (int64_t i = 1; i < n; i++) if (v[i] < r) r = v[i]; return r; }
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    return s / (double)n;
}

// ---------------------------------------------------------------------------------------------------
typedef struct { double sum, mx, mn; int64_t n; } stat3;
static void st_add(stat3 *s, double x) {
    if (s->n == 0 || x > s->mx) s->mx = x;
    if (s->n == 0 || x < s->mn) s->mn = x;
    s->sum += x;
    s->n++;
}
static void st_put(rlc_metrics *m, const char *prefix, const stat3 *s) {
    char k[256];
    snprintf(k, sizeof k, "%s/mean", prefix);
    rlc_metrics_set(m, k, s->n ? s->sum / (double)s->n : NAN);
    snprintf(k, sizeof k, "%s/max", prefix);
    rlc_metrics_set(m, k, s->n ? s->mx : NAN);
    snprintf(k, sizeof k, "%s/min", prefix);
    rlc_metrics_set(m, k, s->n ? s->mn : NAN);
}

void rlc_data_metrics(rlc_metrics *m, const float *score, const float *reward, const float *adv, const float *returns,
                      const float *mask, const int64_t *resp_len, const int64_t *prompt_len, int64_t B, int64_t T,
                      int64_t resp_width, int64_t prompt_width) {
    stat3 sc = {0}, rw = {0}, ad = {0}, rt = {0}, rl = {0}, rln = {0}, pl = {0};
    int64_t rw_max = 0, pw_max = 0;
    for (int64_t b = 0; b < B; b++) {
        if (resp_len[b] > rw_max) rw_max = resp_len[b];
        if (prompt_len[b] > pw_max) pw_max = prompt_len[b];
    }
    if (resp_width <= 0) resp_width = rw_max;
    if (prompt_width <= 0) prompt_width = pw_max;
    int64_t clip = 0, clip_na = 0, aborted = 0, pclip = 0;
    for (int64_t b = 0; b < B; b++) {
        int na = resp_len[b] > 0;
        if (na) { st_add(&sc, score[b]); st_add(&rw, reward[b]); st_add(&rln, (double)resp_len[b]); }
        else aborted++;
        st_add(&rl, (double)resp_len[b]);
        st_add(&pl, (double)prompt_len[b]);
        clip += resp_len[b] == resp_width;
        clip_na += na && resp_len[b] == resp_width;
        pclip += prompt_len[b] == prompt_width;
        for (int64_t t = 0; t < T; t++)
            if (mask[b * T + t] != 0) {
                st_add(&ad, adv[b * T + t]);
                if (returns) st_add(&rt, returns[b * T + t]);
            }
    }
    st_put(m, "critic/score", &sc);
    st_put(m, "critic/rewards", &rw);
    st_put(m, "critic/advantages", &ad);
    if (returns) st_put(m, "critic/returns", &rt);
    st_put(m, "response_length", &rl);
    rlc_metrics_set(m, "response_length/clip_ratio", B ? (double)clip / (double)B : NAN);
    st_put(m, "response_length_non_aborted", &rln);
    rlc_metrics_set(m, "response_length_non_aborted/clip_ratio", rln.n ? (double)clip_na / (double)rln.n : NAN);
    rlc_metrics_set(m, "response/aborted_ratio", B ? (double)aborted / (double)B : NAN);
    st_put(m, "prompt_length", &pl);
    rlc_metrics_set(m, "prompt_length/clip_ratio", B ? (double)pclip / (double)B : NAN);
}

void rlc_rollout_probs_metrics(rlc_metrics *m, const float *actor_lp, const float *rollout_lp, const float *mask,
                               int64_t n) {
    int64_t c = 0;
    double mx = 0, s = 0, sa = 0, sr = 0;
    for (int64_t i = 0; i < n; i++)
        if (mask[i] != 0) {
            double pa = expf(actor_lp[i]), pr = expf(rollout_lp[i]);
            double d = fabs((double)((float)pa - (float)pr));
            if (c == 0 || d > mx) mx = d;
            s += d;
            sa += (float)pa;
            sr += (float)pr;
            c++;
        }
    if (c == 0) {
        rlc_metrics_set(m, "training/rollout_probs_diff_valid", 0);
        rlc_metrics_set(m, "training/rollout_probs_diff_max", NAN);
        rlc_metrics_set(m, "training/rollout_probs_diff_mean", NAN);
        rlc_metrics_set(m, "training/rollout_probs_diff_std", NAN);
        rlc_metrics_set(m, "training/rollout_actor_probs_pearson_corr", NAN);
        return;
    }
    double mean = s / (double)c, ma = sa / (double)c, mr = sr / (double)c;
    double v = 0, cab = 0, va = 0, vr = 0;
    for (int64_t i = 0; i < n; i++)
        if (mask[i] != 0) {
            float pa = expf(actor_lp[i]), pr = expf(rollout_lp[i]);
            double d = fabs((double)(pa - pr)) - mean;
            v += d * d;
            double xa = pa - ma, xr = pr - mr;
            cab += xa * xr;
            va += xa * xa;
            vr += xr * xr;
        }
    double corr = cab / sqrt(va * vr);
    if (corr > 1) corr = 1;
    if (corr < -1) corr = -1;
    rlc_metrics_set(m, "training/rollout_probs_diff_valid", 1);
    rlc_metrics_set(m, "training/rollout_probs_diff_max", mx);
    rlc_metrics_set(m, "training/rollout_probs_diff_mean", mean);
    rlc_metrics_set(m, "training/rollout_probs_diff_std", c > 1 ? sqrt(v / (double)(c - 1)) : NAN);
    rlc_metrics_set(m, "training/rollout_actor_probs_pearson_corr", corr);
}

void rlc_rollout_corr_metrics(rlc_metrics *m, const float *old_lp, const float *rollout_lp, const float *mask,
                              int64_t B, int64_t T) {
    rl_rc_metrics *met = rlc_calloc(1, sizeof *met);
    rl_rollout_corr_offpolicy(met, old_lp, rollout_lp, mask, B, T);
    for (int k = 0; k < met->n; k++) {
        char key[128];
        snprintf(key, sizeof key, "rollout_corr/%s", met->key[k]);
        rlc_metrics_set(m, key, met->val[k]);
    }
    free(met);
}

// ---------------------------------------------------------------------------------------------------
// numpy legacy RandomState: MT19937 (init_genrand) + masked rejection for bounded integers.
typedef struct { uint32_t mt[624]; int pos; } mt19937;
static void mt_seed(mt19937 *s, uint32_t seed) {
    s->mt[0] = seed;
    for (int i = 1; i < 624; i++) s->mt[i] = 1812433253u * (s->mt[i - 1] ^ (s->mt[i - 1] >> 30)) + (uint32_t)i;
    s->pos = 624;
}
static uint32_t mt_next(mt19937 *s) {
    if (s->pos >= 624) {
        for (int i = 0; i < 624; i++) {
            uint32_t y = (s->mt[i] & 0x80000000u) | (s->mt[(i + 1) % 624] & 0x7fffffffu);
            s->mt[i] = s->mt[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        s->pos = 0;
    }
    uint32_t y = s->mt[s->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

void rlc_np_choice(int64_t *out, int64_t count, int64_t n_data, uint32_t seed) {
    CHECK(n_data >= 1 && n_data <= 0xFFFFFFFFLL, "n_data %lld", (long long)n_data);
    mt19937 s;
    mt_seed(&s, seed);
    uint32_t rng = (uint32_t)(n_data - 1);
    if (rng == 0) { for (int64_t i = 0; i < count; i++) out[i] = 0; return; }
    uint32_t mask = rng;
    mask |= mask >> 1; mask |= mask >> 2; mask |= mask >> 4; mask |= mask >> 8; mask |= mask >> 16;
    for (int64_t i = 0; i < count; i++) {
        uint32_t v;
        if (rng == 0xFFFFFFFFu) v = mt_next(&s);
        else while ((v = (mt_next(&s) & mask)) > rng) {}
        out[i] = v;
    }
}

// ---------------------------------------------------------------------------------------------------
// Validation metrics.
#define N_BOOT 1000

// An ordered list of (name, values over uids) for one (data_source, var).
typedef struct { char *name; double *v; int64_t n, cap; } mlist;
typedef struct { mlist *l; int64_t n, cap; } mdict;

static void md_add(mdict *d, const char *name, double v) {
    mlist *e = NULL;
    for (int64_t i = 0; i < d->n; i++)
        if (!strcmp(d->l[i].name, name)) { e = &d->l[i]; break; }
    if (!e) {
        if (d->n == d->cap) { d->cap = d->cap ? 2 * d->cap : 16; d->l = rlc_realloc(d->l, (size_t)d->cap * sizeof(mlist)); }
        e = &d->l[d->n++];
        memset(e, 0, sizeof *e);
        e->name = rlc_strdup(name);
    }
    if (e->n == e->cap) { e->cap = e->cap ? 2 * e->cap : 8; e->v = rlc_realloc(e->v, (size_t)e->cap * sizeof(double)); }
    e->v[e->n++] = v;
}

static void mean_std(const double *x, int64_t n, double *mean, double *std) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    double mu = s / (double)n, v = 0;
    for (int64_t i = 0; i < n; i++) v += (x[i] - mu) * (x[i] - mu);
    *mean = mu;
    *std = sqrt(v / (double)n);
}

// Index of the first occurrence of each string, in order; returns count of distinct values.
static int64_t first_index_of(const char *const *keys, const int64_t *members, int64_t n, int64_t *first) {
    int64_t nd = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = 0;
        for (; j < nd; j++)
            if (!strcmp(keys[members[first[j]]], keys[members[i]])) break;
        if (j == nd) first[nd++] = i;
    }
    return nd;
}

// A NaN in var_vals is a sample without that variable (a reward extra key some samples lack): each variable is
// reduced over the samples that have it, and "acc" is a data source's core variable when some sample of it has acc.
void rlc_val_metrics(rlc_metrics *m, int64_t n, const char *const *data_source, const char *const *uid, int n_vars,
                     const char *const *var_names, const double *const *var_vals, const char *const *preds,
                     uint32_t seed) {
    if (n <= 0) return;
    // data sources in first-appearance order
    int64_t *all = rlc_malloc((size_t)n * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) all[i] = i;
    int64_t *ds_first = rlc_malloc((size_t)n * sizeof(int64_t));
    int64_t nds = first_index_of(data_source, all, n, ds_first);
    int64_t *members = rlc_malloc((size_t)n * sizeof(int64_t));
    int64_t *umem = rlc_malloc((size_t)n * sizeof(int64_t)), *vmem = rlc_malloc((size_t)n * sizeof(int64_t));
    int64_t *ufirst = rlc_malloc((size_t)n * sizeof(int64_t));
    double *vals = rlc_malloc((size_t)n * sizeof(double));
    double *res_best = rlc_malloc(N_BOOT * sizeof(double)), *res_worst = rlc_malloc(N_BOOT * sizeof(double));
    double *res_maj = rlc_malloc(N_BOOT * sizeof(double));
    int64_t *vfirst = rlc_malloc((size_t)n * sizeof(int64_t)), *vcnt = rlc_malloc((size_t)n * sizeof(int64_t));
    const char **sub = rlc_malloc((size_t)n * sizeof(char *));
    for (int64_t d = 0; d < nds; d++) {
        const char *ds = data_source[ds_first[d]];
        int64_t nm = 0;
        for (int64_t i = 0; i < n; i++)
            if (!strcmp(data_source[i], ds)) members[nm++] = i;
        int64_t nu = first_index_of(uid, members, nm, ufirst);
        mdict *dicts = rlc_calloc((size_t)n_vars, sizeof(mdict));
        for (int64_t u = 0; u < nu; u++) {
            const char *uu = uid[members[ufirst[u]]];
            int64_t ku = 0;
            for (int64_t i = 0; i < nm; i++)
                if (!strcmp(uid[members[i]], uu)) umem[ku++] = members[i];
            for (int v = 0; v < n_vars; v++) {
                mdict *dd = &dicts[v];
                int64_t k = 0;
                for (int64_t i = 0; i < ku; i++)
                    if (!isnan(var_vals[v][umem[i]])) vmem[k++] = umem[i];
                if (k == 0) continue;
                for (int64_t i = 0; i < k; i++) vals[i] = var_vals[v][vmem[i]];
                char name[64];
                double mu, sd;
                mean_std(vals, k, &mu, &sd);
                snprintf(name, sizeof name, "mean@%lld", (long long)k);
                md_add(dd, name, mu);
                if (k <= 1) continue;
                snprintf(name, sizeof name, "std@%lld", (long long)k);
                md_add(dd, name, sd);
                for (int64_t sz = 2;; sz *= 2) {
                    int64_t ss = sz < k ? sz : k;
                    int64_t *idx = rlc_malloc((size_t)(N_BOOT * ss) * sizeof(int64_t));
                    rlc_np_choice(idx, N_BOOT * ss, k, seed);
                    for (int b = 0; b < N_BOOT; b++) {
                        double mx = vals[idx[b * ss]], mn = mx;
                        for (int64_t t = 1; t < ss; t++) {
                            double x = vals[idx[b * ss + t]];
                            if (x > mx) mx = x;
                            if (x < mn) mn = x;
                        }
                        res_best[b] = mx;
                        res_worst[b] = mn;
                        if (preds) {
                            // calc_maj_val: votes in first-seen order; the first most common; its first value
                            for (int64_t t = 0; t < ss; t++) sub[t] = preds[vmem[idx[b * ss + t]]];
                            int64_t nv = 0;
                            for (int64_t t = 0; t < ss; t++) {
                                int64_t j = 0;
                                for (; j < nv; j++)
                                    if (!strcmp(sub[vfirst[j]], sub[t])) break;
                                if (j == nv) { vfirst[nv] = t; vcnt[nv++] = 1; }
                                else vcnt[j]++;
                            }
                            int64_t best = 0;
                            for (int64_t j = 1; j < nv; j++)
                                if (vcnt[j] > vcnt[best]) best = j;
                            res_maj[b] = vals[idx[b * ss + vfirst[best]]];
                        }
                    }
                    free(idx);
                    double bm, bs, wm, ws;
                    mean_std(res_best, N_BOOT, &bm, &bs);
                    mean_std(res_worst, N_BOOT, &wm, &ws);
                    snprintf(name, sizeof name, "best@%lld/mean", (long long)ss); md_add(dd, name, bm);
                    snprintf(name, sizeof name, "best@%lld/std", (long long)ss); md_add(dd, name, bs);
                    snprintf(name, sizeof name, "worst@%lld/mean", (long long)ss); md_add(dd, name, wm);
                    snprintf(name, sizeof name, "worst@%lld/std", (long long)ss); md_add(dd, name, ws);
                    if (preds) {
                        double jm, js;
                        mean_std(res_maj, N_BOOT, &jm, &js);
                        snprintf(name, sizeof name, "maj@%lld/mean", (long long)ss); md_add(dd, name, jm);
                        snprintf(name, sizeof name, "maj@%lld/std", (long long)ss); md_add(dd, name, js);
                    }
                    if (ss == k) break;
                }
            }
        }
        int core = -1;
        for (int v = 0; v < n_vars; v++)
            if (!strcmp(var_names[v], "acc") && dicts[v].n > 0) core = v;
        if (core < 0)
            for (int v = 0; v < n_vars; v++)
                if (!strcmp(var_names[v], "reward")) core = v;
        for (int v = 0; v < n_vars; v++) {
            mdict *dd = &dicts[v];
            int64_t nmax = 0;
            for (int64_t i = 0; i < dd->n; i++) {
                const char *at = strchr(dd->l[i].name, '@');
                int64_t x = at ? strtoll(at + 1, NULL, 10) : 0;
                if (x > nmax) nmax = x;
            }
            char tag[32];
            snprintf(tag, sizeof tag, "@%lld", (long long)nmax);
            for (int64_t i = 0; i < dd->n; i++) {
                const char *mn = dd->l[i].name;
                double s = 0;
                for (int64_t j = 0; j < dd->l[i].n; j++) s += dd->l[i].v[j];
                int is_core = v == core && (!strncmp(mn, "mean", 4) || !strncmp(mn, "maj", 3) || !strncmp(mn, "best", 4)) &&
                              strstr(mn, tag) != NULL;
                size_t kl = strlen(ds) + strlen(var_names[v]) + strlen(mn) + 16;
                char *key = rlc_malloc(kl);
                snprintf(key, kl, "%s/%s/%s/%s", is_core ? "val-core" : "val-aux", ds, var_names[v], mn);
                rlc_metrics_set(m, key, s / (double)dd->l[i].n);
                free(key);
                free(dd->l[i].name);
                free(dd->l[i].v);
            }
            free(dd->l);
        }
        free(dicts);
    }
    free(all); free(ds_first); free(members); free(umem); free(vmem); free(ufirst); free(vals);
    free(res_best); free(res_worst); free(res_maj); free(vfirst); free(vcnt); free(sub);
}

// ---------------------------------------------------------------------------------------------------
void rlc_timing_metrics(rlc_metrics *m, int n, const char *const *names, const double *secs, int64_t response_tokens,
                        int64_t total_tokens, int64_t n_gpus) {
    static const char *per_total[] = {"ref", "values", "adv", "update_critic", "update_actor"};
    char k[256];
    double step = NAN;
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "timing_s/%s", names[i]);
        rlc_metrics_set(m, k, secs[i]);
        if (!strcmp(names[i], "step")) step = secs[i];
    }
    for (int i = 0; i < n; i++) {
        int64_t tok = -1;
        if (!strcmp(names[i], "gen")) tok = response_tokens;
        for (int j = 0; j < 5; j++)
            if (!strcmp(names[i], per_total[j])) tok = total_tokens;
        if (tok < 0) continue;
        snprintf(k, sizeof k, "timing_per_token_ms/%s", names[i]);
        rlc_metrics_set(m, k, tok > 0 ? secs[i] * 1000.0 / (double)tok : NAN);
    }
    rlc_metrics_set(m, "perf/total_num_tokens", (double)total_tokens);
    rlc_metrics_set(m, "perf/time_per_step", step);
    rlc_metrics_set(m, "perf/throughput", (double)total_tokens / (step * (double)n_gpus));
}

void rlc_actor_metrics_init(rlc_actor_metrics *a) { memset(a, 0, sizeof *a); }

void rlc_actor_metrics_micro(rlc_actor_metrics *a, double pg_loss, double entropy_loss, double kl_loss, double loss,
                             double pg_clipfrac, double ppo_kl, double pg_clipfrac_lower) {
    a->pg_loss += pg_loss;
    a->entropy_loss += entropy_loss;
    a->kl_loss += kl_loss;
    a->loss += loss;
    a->clipfrac += pg_clipfrac;
    a->ppo_kl += ppo_kl;
    a->clipfrac_lower += pg_clipfrac_lower;
    a->n_micro++;
}

void rlc_actor_metrics_key(rlc_actor_metrics *a, const char *key) {
    for (int k = 0; k < a->n_x; k++)
        if (!strcmp(a->x_key[k], key)) return;
    CHECK(a->n_x < RLC_ACTOR_MAX_X && strlen(key) < sizeof a->x_key[0], "actor metric '%s': too many or too long", key);
    snprintf(a->x_key[a->n_x++], sizeof a->x_key[0], "%s", key);
}

void rlc_actor_metrics_x(rlc_actor_metrics *a, const char *key, double v) {
    for (int k = 0; k < a->n_x; k++)
        if (!strcmp(a->x_key[k], key)) {
            a->x_mb[k] += v;
            return;
        }
    CHECK(0, "actor metric '%s' was not registered", key);
}

void rlc_actor_metrics_x_done(rlc_actor_metrics *a) { a->x_n_micro++; }

void rlc_actor_metrics_minibatch(rlc_actor_metrics *a, double grad_norm) {
    CHECK(a->n_micro > 0, "a mini-batch without micro-batches");
    if (a->x_n_micro > 0) {
        for (int k = 0; k < a->n_x; k++) a->x_s[k] += a->x_mb[k] / (double)a->x_n_micro;
        a->x_n_mini++;
    }
    for (int k = 0; k < a->n_x; k++) a->x_mb[k] = 0;
    a->x_n_micro = 0;
    double nm = (double)a->n_micro;
    a->s_pg_loss += a->pg_loss;
    a->s_entropy_loss += a->entropy_loss;
    a->s_kl_loss += a->kl_loss;
    a->s_loss += a->loss;
    a->s_clipfrac += a->clipfrac / nm;
    a->s_ppo_kl += a->ppo_kl / nm;
    a->s_clipfrac_lower += a->clipfrac_lower / nm;
    a->s_grad_norm += grad_norm;
    a->n_mini++;
    a->pg_loss = a->entropy_loss = a->kl_loss = a->loss = a->clipfrac = a->ppo_kl = a->clipfrac_lower = 0;
    a->n_micro = 0;
}

void rlc_actor_metrics_put(const rlc_actor_metrics *a, rlc_metrics *m, int has_entropy, int use_kl_loss,
                           double kl_loss_coef, double lr) {
    double k = a->n_mini ? (double)a->n_mini : NAN;
    rlc_metrics_set(m, "actor/pg_loss", a->s_pg_loss / k);
    if (a->present & RL_PGM_CLIPFRAC) rlc_metrics_set(m, "actor/pg_clipfrac", a->s_clipfrac / k);
    if (a->present & RL_PGM_PPO_KL) rlc_metrics_set(m, "actor/ppo_kl", a->s_ppo_kl / k);
    if (a->present & RL_PGM_CLIPFRAC_LOWER) rlc_metrics_set(m, "actor/pg_clipfrac_lower", a->s_clipfrac_lower / k);
    if (has_entropy) rlc_metrics_set(m, "actor/entropy_loss", a->s_entropy_loss / k);
    if (use_kl_loss) {
        rlc_metrics_set(m, "actor/kl_loss", a->s_kl_loss / k);
        rlc_metrics_set(m, "actor/kl_coef", kl_loss_coef);
    }
    rlc_metrics_set(m, "actor/loss", a->s_loss / k);
    rlc_metrics_set(m, "actor/grad_norm", a->s_grad_norm / k);
    rlc_metrics_set(m, "actor/lr", lr);
    if (a->x_n_mini > 0)
        for (int j = 0; j < a->n_x; j++) rlc_metrics_set(m, a->x_key[j], a->x_s[j] / (double)a->x_n_mini);
}
