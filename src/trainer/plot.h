// plot.h: training curves as a self-contained SVG (a grid of small line charts, one per metric), so a
// person can look at a run instead of reading metrics.jsonl.
#pragma once
#include <stdint.h>

typedef struct {
    const char *title;     // chart title, e.g. "critic/score/mean"
    const char *id;        // element id of the series in the SVG (letters, digits, '-', '_')
    int n;                 // points
    const double *x;       // (n) e.g. global step
    const double *y;       // (n) NaN = missing point (skipped)
} plot_series;

// Render `n_series` charts into an SVG document (malloc'd, NUL-terminated).
char *plot_svg(const char *title, const plot_series *series, int n_series);
// Render and write atomically to path; dies with the path on failure.
void plot_svg_write(const char *path, const char *title, const plot_series *series, int n_series);
// Read metrics.jsonl (one JSON object per line) and plot the given keys against `x_key` (e.g.
// "training/global_step"). Lines lacking a key leave a gap for that series.
void plot_metrics_file(const char *metrics_jsonl, const char *svg_path, const char *title, const char *x_key,
                       const char *const *keys, int n_keys);
