// rollout_corr.c: rollout IS weights, rejection masks and their metrics (see rollout_corr.h). Per-element values are
// float32 as verl's tensors; reductions accumulate in double; comparisons with a threshold use the threshold as a
// float32 (torch compares a float32 tensor with a Python float in float32).
#include "rl/rollout_corr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"

#define RC "algorithm.rollout_correction."

static const char *RS_NAMES[RL_RS_N] = {"token_k1",    "token_k2",    "token_k3",    "seq_sum_k1",
                                        "seq_sum_k2",  "seq_sum_k3",  "seq_mean_k1", "seq_mean_k2",
                                        "seq_mean_k3", "seq_max_k2",  "seq_max_k3"};

const char *rl_rs_opt_name(rl_rs_opt o) { return (unsigned)o < RL_RS_N ? RS_NAMES[o] : "?"; }

static int is_k1(rl_rs_opt o) { return o == RL_RS_TOKEN_K1 || o == RL_RS_SEQ_SUM_K1 || o == RL_RS_SEQ_MEAN_K1; }
static int is_token_level(rl_rs_opt o) { return o <= RL_RS_TOKEN_K3; }

// s[0..n) trimmed of blanks as a number (Python float()); 0 when it is not one.
static int parse_num(const char *s, size_t n, double *out) {
    while (n > 0 && (*s == ' ' || *s == '\t')) { s++; n--; }
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    if (n == 0 || n >= 64) return 0;
    char buf[64];
    memcpy(buf, s, n);
    buf[n] = 0;
    char *end;
    double v = strtod(buf, &end);
    if (*end != 0 || isnan(v)) return 0;
    *out = v;
    return 1;
}

// "lo_hi" (has_lower = 1) or "hi"; dies naming key with what was given.
static void parse_band(const char *key, const char *spec, size_t n, double *lo, double *hi, int *has_lower) {
    const char *us = memchr(spec, '_', n);
    if (us) {
        if (!parse_num(spec, (size_t)(us - spec), lo) || !parse_num(us + 1, n - (size_t)(us - spec) - 1, hi))
            rlc_die("config: %s: '%.*s' is not a number or a 'lower_upper' pair of numbers", key, (int)n, spec);
        *has_lower = 1;
    } else {
        if (!parse_num(spec, n, hi)) rlc_die("config: %s: '%.*s' is not a number or a 'lower_upper' pair of numbers", key, (int)n, spec);
        *has_lower = 0;
    }
}

void rl_rollout_corr_parse(rl_rollout_corr_cfg *cfg, const char *rollout_is, const char *is_threshold, const char *rs,
                           const char *rs_threshold, int batch_normalize) {
    memset(cfg, 0, sizeof *cfg);
    cfg->is_batch_normalize = batch_normalize;
    if (rollout_is) {
        if (!strcmp(rollout_is, "token")) cfg->is = RL_RC_IS_TOKEN;
        else if (!strcmp(rollout_is, "sequence")) cfg->is = RL_RC_IS_SEQUENCE;
        else rlc_die("config: " RC "rollout_is: '%s', expected token, sequence or null", rollout_is);
        if (!is_threshold) rlc_die("config: " RC "rollout_is_threshold: rollout_is=%s needs a threshold (a cap, or 'lower_upper')", rollout_is);
        int has_lower;
        double lo = 0, hi = 0;
        parse_band(RC "rollout_is_threshold", is_threshold, strlen(is_threshold), &lo, &hi, &has_lower);
        if (!(hi > 0)) rlc_die("config: " RC "rollout_is_threshold: the upper bound must be > 0, got %g", hi);
        if (has_lower && !(lo > 0)) rlc_die("config: " RC "rollout_is_threshold: the lower bound must be > 0, got %g", lo);
        if (has_lower && lo > hi) rlc_die("config: " RC "rollout_is_threshold: lower bound %g > upper bound %g", lo, hi);
        cfg->is_upper = hi;
        cfg->is_lower = has_lower ? lo : 0;
        cfg->is_icepop = has_lower;
    }
    if (!rs) return;
    // the options, in order, without duplicates
    const char *p = rs;
    while (*p) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        while (n > 0 && (*p == ' ' || *p == '\t')) { p++; n--; }
        size_t m = n;
        while (m > 0 && (p[m - 1] == ' ' || p[m - 1] == '\t')) m--;
        if (m > 0) {
            int found = -1;
            for (int k = 0; k < RL_RS_N; k++)
                if (strlen(RS_NAMES[k]) == m && !strncmp(RS_NAMES[k], p, m)) found = k;
            if (found < 0)
                rlc_die("config: " RC "rollout_rs: unknown option '%.*s'; expected a comma-separated list of token_k1, token_k2, "
                        "token_k3, seq_sum_k1, seq_sum_k2, seq_sum_k3, seq_mean_k1, seq_mean_k2, seq_mean_k3, seq_max_k2, "
                        "seq_max_k3", (int)m, p);
            int dup = 0;
            for (int k = 0; k < cfg->n_rs; k++) dup |= cfg->rs[k] == (rl_rs_opt)found;
            if (!dup) cfg->rs[cfg->n_rs++] = (rl_rs_opt)found;
        }
        p += n;
        if (*p == ',') p++;
    }
    if (cfg->n_rs == 0) rlc_die("config: " RC "rollout_rs: '%s' names no option", rs);
    if (!rs_threshold) rlc_die("config: " RC "rollout_rs_threshold: rollout_rs=%s needs a threshold", rs);
    // one entry shared by every option, or one per option
    const char *spec[RL_RS_N];
    size_t slen[RL_RS_N];
    int ns = 0;
    p = rs_threshold;
    while (*p) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        int blank = 1;
        for (size_t k = 0; k < n; k++) blank &= p[k] == ' ' || p[k] == '\t';
        if (!blank) {
            if (ns == RL_RS_N) rlc_die("config: " RC "rollout_rs_threshold: more entries than rollout_rs options");
            spec[ns] = p;
            slen[ns++] = n;
        }
        p += n;
        if (*p == ',') p++;
    }
    if (ns != 1 && ns != cfg->n_rs)
        rlc_die("config: " RC "rollout_rs_threshold: %d entries for %d rollout_rs options; give one shared threshold or one "
                "per option", ns, cfg->n_rs);
    for (int k = 0; k < cfg->n_rs; k++) {
        const char *s = spec[ns == 1 ? 0 : k];
        size_t n = slen[ns == 1 ? 0 : k];
        int has_lower;
        double lo = 0, hi = 0;
        parse_band(RC "rollout_rs_threshold", s, n, &lo, &hi, &has_lower);
        const char *name = RS_NAMES[cfg->rs[k]];
        if (is_k1(cfg->rs[k])) {
            if (!has_lower) lo = 1.0 / hi;
            if (!(lo > 0 && hi > 0)) rlc_die("config: " RC "rollout_rs_threshold: %s needs positive ratio bounds, got '%.*s'", name, (int)n, s);
            cfg->rs_lower[k] = log(lo);
            cfg->rs_upper[k] = log(hi);
        } else {
            if (has_lower)
                rlc_die("config: " RC "rollout_rs_threshold: %s takes one upper bound, not a 'lower_upper' pair ('%.*s')", name, (int)n, s);
            if (!(hi > 0)) rlc_die("config: " RC "rollout_rs_threshold: %s needs a bound > 0, got %g", name, hi);
            cfg->rs_upper[k] = hi;
        }
    }
}

int rl_rollout_corr_active(const rl_rollout_corr_cfg *cfg) { return cfg->is != RL_RC_IS_NONE || cfg->n_rs > 0; }

static void put(rl_rc_metrics *met, const char *key, double v) {
    if (!met) return;
    CHECK(met->n < RL_RC_MAX_METRICS, "rollout correction metrics overflow");
    snprintf(met->key[met->n], sizeof met->key[0], "%s", key);
    met->val[met->n++] = v;
}

static void putp(rl_rc_metrics *met, const char *prefix, const char *suffix, double v) {
    char k[96];
    snprintf(k, sizeof k, "%s_%s", prefix, suffix);
    put(met, k, v);
}

static float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

// verl_F.masked_mean over the whole batch: sum(x*m) / (sum(m) + 1e-8).
static double mmean(const float *x, const float *m, int64_t n) {
    double s = 0, c = 0;
    for (int64_t i = 0; i < n; i++) { s += (double)(x[i] * m[i]); c += m[i]; }
    return s / (c + 1e-8);
}

// The same per row (B): out[b] as float32, as torch keeps it.
static void row_mmean(float *out, const float *x, const float *m, int64_t B, int64_t T) {
    for (int64_t b = 0; b < B; b++) {
        double s = 0, c = 0;
        for (int64_t t = 0; t < T; t++) { s += (double)(x[b * T + t] * m[b * T + t]); c += m[b * T + t]; }
        out[b] = (float)(s / (c + 1e-8));
    }
}

// mean, unbiased std (0 for one value), max, min of v[0..n) (n >= 1).
static void stats(const float *v, int64_t n, double *mean, double *sd, double *mx, double *mn) {
    double s = 0, a = v[0], b = v[0];
    for (int64_t i = 0; i < n; i++) { s += v[i]; if (v[i] > a) a = v[i]; if (v[i] < b) b = v[i]; }
    double mu = s / (double)n, q = 0;
    for (int64_t i = 0; i < n; i++) q += ((double)v[i] - mu) * ((double)v[i] - mu);
    *mean = mu;
    *sd = n > 1 ? sqrt(q / (double)(n - 1)) : 0.0;
    *mx = a;
    *mn = b;
}

// The masked std of x clamped to [lo, hi], sqrt(E[c^2] - E[c]^2) (compute_is_metrics / compute_rs_metrics). verl
// evaluates it in float32, where the difference cancels to rounding noise when the values barely vary; here the
// squares and sums are double.
static double clamped_std(const float *x, const float *m, int64_t n, double msum, float lo, float hi) {
    if (!(msum > 1)) return 0.0;
    double s = 0, q = 0, c = 0;
    for (int64_t i = 0; i < n; i++) {
        const double v = clampf(x[i], lo, hi);
        s += v * m[i];
        q += v * v * m[i];
        c += m[i];
    }
    const double mu = s / (c + 1e-8), var = q / (c + 1e-8) - mu * mu;
    return sqrt(var > 0 ? var : 0.0);
}

// compute_rollout_correction_weights + compute_is_metrics.
static void is_weights(float *w, rl_rc_metrics *met, const float *lr, const float *mask, int64_t B, int64_t T, double msum,
                       const rl_rollout_corr_cfg *cfg, float *raw, float *tmp, float *rowv) {
    const int64_t n = B * T;
    const float up = (float)cfg->is_upper, lo_cut = (float)cfg->is_lower;
    const float lo = cfg->is_icepop ? lo_cut : (float)(1.0 / cfg->is_upper);   // the metrics' lower bound
    // per-sequence log-ratio sums (sequence level): masked_sum in float32
    if (cfg->is == RL_RC_IS_SEQUENCE)
        for (int64_t b = 0; b < B; b++) {
            double s = 0;
            for (int64_t t = 0; t < T; t++) s += (double)(lr[b * T + t] * mask[b * T + t]);
            rowv[b] = (float)s;
        }
    for (int64_t i = 0; i < n; i++) {
        const float d = cfg->is == RL_RC_IS_TOKEN ? lr[i] : rowv[i / T];
        raw[i] = expf(clampf(d, -20.0f, 20.0f)) * mask[i];
        if (!cfg->is_icepop) w[i] = raw[i] < up ? raw[i] : up;
        else w[i] = raw[i] >= lo_cut && raw[i] <= up ? raw[i] : 0.0f;
    }
    if (met) {
        const float lu = logf(up), ll = logf(lo);
        if (cfg->is == RL_RC_IS_SEQUENCE) {
            double lmax = rowv[0], lmin = rowv[0], fh = 0, fl = 0;
            for (int64_t b = 0; b < B; b++) {
                if (rowv[b] > lmax) lmax = rowv[b];
                if (rowv[b] < lmin) lmin = rowv[b];
                fh += rowv[b] > lu;
                fl += rowv[b] < ll;
            }
            put(met, "rollout_is_max", expf(clampf((float)lmax, -INFINITY, 20.0f)));
            put(met, "rollout_is_min", expf((float)lmin));
            put(met, "rollout_is_mean", mmean(w, mask, n));
            put(met, "rollout_is_ratio_fraction_high", fh / (double)B);
            put(met, "rollout_is_ratio_fraction_low", fl / (double)B);
        } else {
            double mx = -INFINITY, mn = INFINITY;
            for (int64_t i = 0; i < n; i++) {
                tmp[i] = raw[i] > up;
                if (mask[i] != 0) { if (w[i] > mx) mx = w[i]; if (w[i] < mn) mn = w[i]; }
            }
            put(met, "rollout_is_mean", mmean(w, mask, n));
            put(met, "rollout_is_ratio_fraction_high", mmean(tmp, mask, n));
            for (int64_t i = 0; i < n; i++) tmp[i] = raw[i] < lo;
            put(met, "rollout_is_ratio_fraction_low", mmean(tmp, mask, n));
            put(met, "rollout_is_max", mx);
            put(met, "rollout_is_min", mn);
        }
        put(met, "rollout_is_std", clamped_std(w, mask, n, msum, 0.0f, up));
        // ESS = 1 / E[(w / E[w])^2] over the clamped weights
        for (int64_t i = 0; i < n; i++) tmp[i] = clampf(w[i], 0.0f, up);
        const float mu = (float)mmean(tmp, mask, n);
        for (int64_t i = 0; i < n; i++) { const float z = tmp[i] / (mu + 1e-8f); tmp[i] = z * z; }
        put(met, "rollout_is_eff_sample_size", 1.0 / mmean(tmp, mask, n));
        row_mmean(rowv, w, mask, B, T);
        double sm, ssd, smx, smn, dev = 0;
        stats(rowv, B, &sm, &ssd, &smx, &smn);
        for (int64_t b = 0; b < B; b++) dev = fabs(rowv[b] - 1.0f) > dev ? fabs(rowv[b] - 1.0f) : dev;
        put(met, "rollout_is_seq_mean", sm);
        put(met, "rollout_is_seq_std", ssd);
        put(met, "rollout_is_seq_max", smx);
        put(met, "rollout_is_seq_min", smn);
        put(met, "rollout_is_seq_max_deviation", dev);
        row_mmean(rowv, raw, mask, B, T);   // the untruncated per-sequence means: a truncated one never exceeds the cap
        double fh = 0, fl = 0;
        for (int64_t b = 0; b < B; b++) { fh += rowv[b] > up; fl += rowv[b] < lo; }
        put(met, "rollout_is_seq_fraction_high", fh / (double)B);
        put(met, "rollout_is_seq_fraction_low", fl / (double)B);
        if (cfg->is_icepop) {
            for (int64_t i = 0; i < n; i++) tmp[i] = raw[i] < lo_cut || raw[i] > up;
            put(met, "rollout_is_oob_ratio", mmean(tmp, mask, n));
        }
    }
    if (cfg->is_batch_normalize) {   // divide by the mean weight (token level) or the mean sequence weight
        double mean;
        if (cfg->is == RL_RC_IS_TOKEN) {
            mean = (float)mmean(w, mask, n);
        } else {
            row_mmean(rowv, w, mask, B, T);
            double s = 0, c = 0;
            for (int64_t b = 0; b < B; b++) {
                double rs = 0;
                for (int64_t t = 0; t < T; t++) rs += mask[b * T + t];
                if (rs > 0) { s += rowv[b]; c += 1; }
            }
            mean = (float)(s / (c > 1e-8 ? c : 1e-8));
        }
        if (mean > 1e-8) {
            for (int64_t i = 0; i < n; i++) w[i] = w[i] / (float)mean;
            put(met, "rollout_is_batch_norm_factor", mean);
        } else {
            put(met, "rollout_is_batch_norm_factor", 1.0);
        }
    }
}

// compute_rs_metrics for one option: stat (n) per token (a sequence option's broadcast), seqv (B) per sequence.
static void rs_metrics(rl_rc_metrics *met, const char *prefix, const float *stat, const float *seqv, const float *mask,
                       const uint8_t *valid, int64_t B, int64_t T, double msum, int token_level, float up, float lo,
                       int apply_lower, float *tmp, float *vv) {
    const int64_t n = B * T;
    int64_t nv = 0;
    for (int64_t b = 0; b < B; b++)
        if (valid[b]) vv[nv++] = seqv[b];
    putp(met, prefix, "mean", mmean(stat, mask, n));
    double mx = -INFINITY, mn = INFINITY;
    if (!token_level && nv > 0) {
        for (int64_t k = 0; k < nv; k++) { if (vv[k] > mx) mx = vv[k]; if (vv[k] < mn) mn = vv[k]; }
    } else {
        for (int64_t i = 0; i < n; i++)
            if (mask[i] != 0) { if (stat[i] > mx) mx = stat[i]; if (stat[i] < mn) mn = stat[i]; }
    }
    putp(met, prefix, "max", mx);
    putp(met, prefix, "min", mn);
    double fh = 0, fl = 0;
    if (!token_level && nv > 0) {
        for (int64_t k = 0; k < nv; k++) { fh += vv[k] > up; fl += vv[k] < lo; }
        fh /= (double)nv;
        fl = apply_lower ? fl / (double)nv : 0.0;
    } else {
        for (int64_t i = 0; i < n; i++) tmp[i] = stat[i] > up;
        fh = mmean(tmp, mask, n);
        for (int64_t i = 0; i < n; i++) tmp[i] = stat[i] < lo;
        fl = apply_lower ? mmean(tmp, mask, n) : 0.0;
    }
    putp(met, prefix, "fraction_high", fh);
    putp(met, prefix, "fraction_low", fl);
    putp(met, prefix, "std", clamped_std(stat, mask, n, msum, apply_lower ? lo : 0.0f, up));
    if (nv > 0) {
        double sm, ssd, smx, smn, dev = 0, sh = 0, sl = 0;
        stats(vv, nv, &sm, &ssd, &smx, &smn);
        for (int64_t k = 0; k < nv; k++) {
            dev = fabsf(vv[k]) > dev ? fabsf(vv[k]) : dev;
            sh += vv[k] > up;
            sl += vv[k] < lo;
        }
        putp(met, prefix, "seq_mean", sm);
        putp(met, prefix, "seq_std", ssd);
        putp(met, prefix, "seq_max", smx);
        putp(met, prefix, "seq_min", smn);
        putp(met, prefix, "seq_max_deviation", dev);
        putp(met, prefix, "seq_fraction_high", sh / (double)nv);
        if (apply_lower) putp(met, prefix, "seq_fraction_low", sl / (double)nv);
    } else {
        static const char *z[] = {"seq_mean", "seq_std", "seq_max", "seq_min", "seq_max_deviation", "seq_fraction_high",
                                  "seq_fraction_low"};
        for (int k = 0; k < 7; k++) putp(met, prefix, z[k], 0.0);
    }
}

// compute_rollout_rejection_mask: keep (n) *= each option's keep mask.
static void rejection(float *combined, rl_rc_metrics *met, const float *lr, const float *mask, int64_t B, int64_t T,
                      double msum, const rl_rollout_corr_cfg *cfg, float *stat, float *tmp, float *seqv, float *vv,
                      float *keep, uint8_t *valid) {
    const int64_t n = B * T;
    for (int64_t b = 0; b < B; b++) {
        double rs = 0;
        for (int64_t t = 0; t < T; t++) rs += mask[b * T + t];
        valid[b] = rs > 0;
    }
    for (int64_t i = 0; i < n; i++) combined[i] = 1.0f;
    for (int k = 0; k < cfg->n_rs; k++) {
        const rl_rs_opt o = cfg->rs[k];
        const int est = o == RL_RS_SEQ_MAX_K2 ? 2 : o == RL_RS_SEQ_MAX_K3 ? 3 : (int)(o % 3) + 1;   // k1, k2 or k3
        const int k1 = is_k1(o), tok = is_token_level(o);
        const float up = (float)cfg->rs_upper[k], lo = k1 ? (float)cfg->rs_lower[k] : 0.0f;
        for (int64_t i = 0; i < n; i++) {   // the token estimator of d = train - rollout
            const float d = clampf(lr[i], -20.0f, 20.0f);
            tmp[i] = est == 1 ? -d : est == 2 ? 0.5f * (d * d) : (expf(d) - 1.0f) - d;
        }
        if (tok) {
            memcpy(stat, tmp, sizeof(float) * (size_t)n);
            row_mmean(seqv, stat, mask, B, T);
        } else {
            for (int64_t b = 0; b < B; b++) {
                double s = 0, c = 0, mx = -INFINITY;
                for (int64_t t = 0; t < T; t++) {
                    const int64_t i = b * T + t;
                    s += (double)(tmp[i] * mask[i]);
                    c += mask[i];
                    if (mask[i] != 0 && tmp[i] > mx) mx = tmp[i];
                }
                if (o == RL_RS_SEQ_MAX_K2 || o == RL_RS_SEQ_MAX_K3) seqv[b] = mx == -INFINITY ? 0.0f : (float)mx;
                else if (o <= RL_RS_SEQ_SUM_K3) seqv[b] = (float)s;
                else seqv[b] = (float)((float)s / (float)(c + 1e-8));
                for (int64_t t = 0; t < T; t++) stat[b * T + t] = seqv[b];
            }
        }
        for (int64_t i = 0; i < n; i++) {
            const float v = stat[i];
            keep[i] = (k1 ? (v >= lo && v <= up) : (v <= up)) ? 1.0f : 0.0f;
        }
        char prefix[48];
        snprintf(prefix, sizeof prefix, "rollout_rs_%s", RS_NAMES[o]);
        if (met) {
            rs_metrics(met, prefix, stat, seqv, mask, valid, B, T, msum, tok, up, lo, k1, tmp, vv);
            for (int64_t i = 0; i < n; i++) tmp[i] = 1.0f - keep[i];
            putp(met, prefix, "masked_fraction", mmean(tmp, mask, n));
            double nvalid = 0, nrej = 0;
            for (int64_t b = 0; b < B; b++) {
                if (!valid[b]) continue;
                nvalid++;
                int rej = 0;
                for (int64_t t = 0; t < T; t++) rej |= keep[b * T + t] == 0 && mask[b * T + t] != 0;
                nrej += rej;
            }
            putp(met, prefix, "seq_masked_fraction", nvalid > 0 ? nrej / nvalid : 0.0);
        }
        for (int64_t i = 0; i < n; i++) combined[i] *= keep[i];
    }
    if (met) {
        for (int64_t i = 0; i < n; i++) tmp[i] = 1.0f - combined[i];
        put(met, "rollout_rs_masked_fraction", mmean(tmp, mask, n));
        double nrej = 0;
        for (int64_t b = 0; b < B; b++) {
            int rej = 0;
            for (int64_t t = 0; t < T; t++) rej |= !(combined[b * T + t] > 0.5f) && mask[b * T + t] != 0;
            nrej += rej;
        }
        put(met, "rollout_rs_seq_masked_fraction", nrej / (double)B);
    }
}

void rl_rollout_corr(float *is_w, float *mask_out, rl_rc_metrics *met, const float *train_lp, const float *rollout_lp,
                     const float *mask, int64_t B, int64_t T, const rl_rollout_corr_cfg *cfg) {
    const int64_t n = B * T;
    double msum = 0;
    for (int64_t i = 0; i < n; i++) msum += mask[i] != 0;
    CHECK(B > 0 && msum > 0, "rollout correction needs at least one response token (B=%lld)", (long long)B);
    const size_t nb = (size_t)(n > 0 ? n : 1), bb = (size_t)B;
    float *lr = rlc_malloc(sizeof(float) * nb), *tmp = rlc_malloc(sizeof(float) * nb), *a = rlc_malloc(sizeof(float) * nb);
    float *keep = rlc_malloc(sizeof(float) * nb), *comb = rlc_malloc(sizeof(float) * nb);
    float *rowv = rlc_malloc(sizeof(float) * bb), *vv = rlc_malloc(sizeof(float) * bb);
    uint8_t *valid = rlc_malloc(bb);
    for (int64_t i = 0; i < n; i++) lr[i] = train_lp[i] - rollout_lp[i];
    if (cfg->is != RL_RC_IS_NONE) {
        float *w = is_w ? is_w : rlc_malloc(sizeof(float) * nb);
        is_weights(w, met, lr, mask, B, T, msum, cfg, a, tmp, rowv);
        if (!is_w) free(w);
    }
    if (cfg->n_rs > 0) {
        rejection(comb, met, lr, mask, B, T, msum, cfg, a, tmp, rowv, vv, keep, valid);
        for (int64_t i = 0; i < n; i++) mask_out[i] = mask[i] * comb[i];
    } else if (mask_out != mask) {
        memcpy(mask_out, mask, sizeof(float) * (size_t)n);
    }
    free(lr); free(tmp); free(a); free(keep); free(comb); free(rowv); free(vv); free(valid);
}

static double clampd(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

void rl_rollout_corr_offpolicy(rl_rc_metrics *met, const float *train_lp, const float *rollout_lp, const float *mask,
                               int64_t B, int64_t T) {
    double any = 0;
    for (int64_t i = 0; i < B * T; i++) any += mask[i] != 0;
    CHECK(any > 0, "rollout_corr metrics need at least one valid token");
    double tppl = 0, tlog = 0, rppl = 0, rlog = 0, d_mean = 0, d_abs = 0, d_max = -INFINITY, d_min = INFINITY;
    double ratio = 0, chi2s = 0, kl = 0, k3 = 0, chi2t = 0, msum = 0;
    for (int64_t b = 0; b < B; b++) {
        double so = 0, sr = 0, c = 0, lr_sum = 0;
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            if (mask[i] == 0) continue;
            double w = mask[i];
            so += (double)train_lp[i] * w;
            c += w;
            if (rollout_lp) {
                sr += (double)rollout_lp[i] * w;
                double lr = (double)train_lp[i] - (double)rollout_lp[i];
                kl += -lr * w;
                k3 += (exp(lr) - lr - 1.0) * w;
                double rho = exp(clampd(lr, -20, 20));
                chi2t += rho * rho * w;
                lr_sum += lr * w;
            }
            msum += w;
        }
        // per sequence: the masked mean log-prob (a row with no token counts as 0, as verl's masked_mean)
        double mo = so / (c + 1e-8);
        tppl += exp(-mo);
        tlog += -mo;
        if (rollout_lp) {
            double mr = sr / (c + 1e-8);
            rppl += exp(-mr);
            rlog += -mr;
            double d = mr - mo;
            d_mean += d;
            d_abs += fabs(d);
            if (d > d_max) d_max = d;
            if (d < d_min) d_min = d;
            ratio += exp(d);
            chi2s += exp(2.0 * clampd(lr_sum, -20, 20));
        }
    }
    double fb = (double)B;
    put(met, "training_ppl", tppl / fb);
    put(met, "training_log_ppl", tlog / fb);
    if (!rollout_lp) return;
    put(met, "kl", kl / (msum + 1e-8));
    put(met, "k3_kl", k3 / (msum + 1e-8));
    put(met, "rollout_ppl", rppl / fb);
    put(met, "rollout_log_ppl", rlog / fb);
    put(met, "log_ppl_diff", d_mean / fb);
    put(met, "log_ppl_abs_diff", d_abs / fb);
    put(met, "log_ppl_diff_max", d_max);
    put(met, "log_ppl_diff_min", d_min);
    put(met, "ppl_ratio", ratio / fb);
    put(met, "chi2_token", chi2t / (msum + 1e-8) - 1.0);
    put(met, "chi2_seq", chi2s / fb - 1.0);
}

void rl_rollout_corr_bypass_metrics(rl_rc_metrics *met, const float *lp, const float *rollout_lp, const float *mask,
                                    int64_t B, int64_t T, const rl_rollout_corr_cfg *cfg) {
    if (rl_rollout_corr_active(cfg)) {
        float *m2 = rlc_malloc(sizeof(float) * (size_t)(B * T > 0 ? B * T : 1));
        rl_rollout_corr(NULL, m2, met, lp, rollout_lp, mask, B, T, cfg);
        free(m2);
    }
    rl_rollout_corr_offpolicy(met, lp, rollout_lp, mask, B, T);
}
