// plot.c: SVG line charts of training metrics.
#include "trainer/plot.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "data/jsonl.h"

static void sb_escaped(rlc_strbuf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': rlc_sb_printf(b, "&lt;"); break;
        case '>': rlc_sb_printf(b, "&gt;"); break;
        case '&': rlc_sb_printf(b, "&amp;"); break;
        case '"': rlc_sb_printf(b, "&quot;"); break;
        default: rlc_sb_printf(b, "%c", *s);
        }
    }
}

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about n ticks over span.
static double nice_step(double span, int n) {
    if (!(span > 0)) return 1;
    double raw = span / n, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static const char *COLORS[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

char *plot_svg(const char *title, const plot_series *series, int n_series) {
    const int cols = n_series < 3 ? (n_series < 1 ? 1 : n_series) : 3;
    const int rows = (n_series + cols - 1) / cols;
    const double cw = 360, ch = 240, top = 40;       // chart cell size, title band
    const double ml = 58, mr = 14, mt = 30, mb = 36;  // margins inside a cell
    rlc_strbuf b = {0};
    double W = cols * cw, Hh = top + (rows > 0 ? rows : 1) * ch;
    rlc_sb_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    rlc_sb_printf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                  "font-family=\"DejaVu Sans, Arial, sans-serif\">\n", W, Hh, W, Hh);
    rlc_sb_printf(&b, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"%.0f\" y=\"26\" font-size=\"18\" "
                  "text-anchor=\"middle\">", W / 2);
    sb_escaped(&b, title ? title : "");
    rlc_sb_printf(&b, "</text>\n");
    for (int i = 0; i < n_series; i++) {
        const plot_series *s = &series[i];
        double ox = (i % cols) * cw, oy = top + (i / cols) * ch;
        double px0 = ox + ml, px1 = ox + cw - mr, py0 = oy + mt, py1 = oy + ch - mb;
        double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
        int npts = 0;
        for (int k = 0; k < s->n; k++) {
            if (!isfinite(s->x[k]) || !isfinite(s->y[k])) continue;
            npts++;
            if (s->x[k] < xmin) xmin = s->x[k];
            if (s->x[k] > xmax) xmax = s->x[k];
            if (s->y[k] < ymin) ymin = s->y[k];
            if (s->y[k] > ymax) ymax = s->y[k];
        }
        if (npts == 0) { xmin = 0; xmax = 1; ymin = 0; ymax = 1; }
        if (xmax - xmin < 1e-12) { xmin -= 0.5; xmax += 0.5; }
        if (ymax - ymin < 1e-12) { double d = fabs(ymax) > 1e-6 ? fabs(ymax) * 0.1 : 0.5; ymin -= d; ymax += d; }
        double pad = 0.05 * (ymax - ymin);
        ymin -= pad; ymax += pad;
        const char *color = COLORS[i % (int)(sizeof COLORS / sizeof COLORS[0])];
        rlc_sb_printf(&b, "<g class=\"chart\" id=\"chart-%s\">\n", s->id);
        rlc_sb_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" stroke=\"#999\"/>\n",
                  px0, py0, px1 - px0, py1 - py0);
        rlc_sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\">", (px0 + px1) / 2, oy + 20);
        sb_escaped(&b, s->title);
        rlc_sb_printf(&b, "</text>\n");
        // y ticks and grid
        double ys = nice_step(ymax - ymin, 4);
        for (double t = ceil(ymin / ys) * ys; t <= ymax + 1e-12; t += ys) {
            double py = py1 - (t - ymin) / (ymax - ymin) * (py1 - py0);
            rlc_sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%.4g</text>\n",
                      px0, py, px1, py, px0 - 4, py + 3, fabs(t) < ys * 1e-9 ? 0.0 : t);
        }
        double xs = nice_step(xmax - xmin, 5);
        for (double t = ceil(xmin / xs) * xs; t <= xmax + 1e-12; t += xs) {
            double px = px0 + (t - xmin) / (xmax - xmin) * (px1 - px0);
            rlc_sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">%.4g</text>\n", px, py1 + 14, t);
        }
        rlc_sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">step</text>\n", (px0 + px1) / 2, py1 + 28);
        // the series: one polyline per run of consecutive finite points
        rlc_sb_printf(&b, "<g class=\"series\" id=\"%s\" data-points=\"%d\">\n", s->id, npts);
        int open = 0;
        for (int k = 0; k < s->n; k++) {
            int ok = isfinite(s->x[k]) && isfinite(s->y[k]);
            if (!ok) { if (open) rlc_sb_printf(&b, "\"/>\n"); open = 0; continue; }
            double px = px0 + (s->x[k] - xmin) / (xmax - xmin) * (px1 - px0);
            double py = py1 - (s->y[k] - ymin) / (ymax - ymin) * (py1 - py0);
            if (!open) rlc_sb_printf(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
            rlc_sb_printf(&b, "%s%.1f,%.1f", open ? " " : "", px, py);
            open = 1;
        }
        if (open) rlc_sb_printf(&b, "\"/>\n");
        for (int k = 0; k < s->n; k++) {  // markers make single points visible
            if (!isfinite(s->x[k]) || !isfinite(s->y[k])) continue;
            double px = px0 + (s->x[k] - xmin) / (xmax - xmin) * (px1 - px0);
            double py = py1 - (s->y[k] - ymin) / (ymax - ymin) * (py1 - py0);
            rlc_sb_printf(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", px, py, color);
        }
        rlc_sb_printf(&b, "</g>\n</g>\n");
    }
    rlc_sb_printf(&b, "</svg>\n");
    return b.s;
}

void plot_svg_write(const char *path, const char *title, const plot_series *series, int n_series) {
    char *svg = plot_svg(title, series, n_series);
    if (rlc_write_file_atomic(path, svg, strlen(svg)) != 0) rlc_die("%s: cannot write plot: %s", path, strerror(errno));
    free(svg);
}

void plot_metrics_file(const char *metrics_jsonl, const char *svg_path, const char *title, const char *x_key,
                       const char *const *keys, int n_keys) {
    rlc_jsonl r;
    rlc_jsonl_open(&r, metrics_jsonl, "metrics");
    size_t cap = 64, n = 0, K = (size_t)n_keys;
    double *xs = rlc_malloc(sizeof(double) * cap);
    double *rows = rlc_malloc(sizeof(double) * cap * K);   // (n, n_keys), row per line
    const cJSON *o;
    while ((o = rlc_jsonl_next(&r, "{\"<metric>\": value, ...}"))) {
        if (n == cap) {
            cap *= 2;
            xs = rlc_realloc(xs, sizeof(double) * cap);
            rows = rlc_realloc(rows, sizeof(double) * cap * K);
        }
        cJSON *xv = cJSON_GetObjectItemCaseSensitive(o, x_key);
        xs[n] = cJSON_IsNumber(xv) ? xv->valuedouble : (double)n;
        for (size_t k = 0; k < K; k++) {
            cJSON *v = cJSON_GetObjectItemCaseSensitive(o, keys[k]);
            rows[n * K + k] = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        }
        n++;
    }
    rlc_jsonl_close(&r);
    double *ys = rlc_malloc(sizeof(double) * (n ? n : 1) * K);   // (n_keys, n)
    for (size_t k = 0; k < K; k++)
        for (size_t i = 0; i < n; i++) ys[k * n + i] = rows[i * K + k];
    plot_series *ser = rlc_calloc(K, sizeof(plot_series));
    char **ids = rlc_calloc(K, sizeof(char *));
    for (size_t k = 0; k < K; k++) {
        ids[k] = rlc_strdup(keys[k]);
        for (char *c = ids[k]; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_')) *c = '_';
        ser[k] = (plot_series){keys[k], ids[k], (int)n, xs, ys + k * n};
    }
    plot_svg_write(svg_path, title, ser, n_keys);
    for (size_t k = 0; k < K; k++) free(ids[k]);
    free(ids);
    free(ser);
    free(xs);
    free(ys);
    free(rows);
}
