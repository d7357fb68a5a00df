// test_plot.c: the SVG training curves are a valid image holding the expected series.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "testlib.h"
#include "trainer/plot.h"

int main(void) {
    char *dir = tl_tmpdir("plot");
    char *metrics = rlc_path_join(dir, "metrics.jsonl");
    char *svg = rlc_path_join(dir, "curves.svg");
    FILE *f = fopen(metrics, "w");
    for (int s = 1; s <= 12; s++) {
        fprintf(f, "{\"training/global_step\": %d, \"critic/score/mean\": %.3f, \"response_length/mean\": %.1f, "
                   "\"actor/kl_loss\": %.5f, \"actor/entropy\": %.4f", s, 0.2 + 0.05 * s, 40.0 - s, 0.001 * s, 1.5 - 0.05 * s);
        if (s % 4 == 0) fprintf(f, ", \"val-core/synth/acc/mean@1\": %.3f", 0.3 + 0.04 * s);
        fprintf(f, "}\n");
    }
    fclose(f);
    const char *keys[] = {"critic/score/mean", "val-core/synth/acc/mean@1", "response_length/mean", "actor/kl_loss", "actor/entropy"};
    plot_metrics_file(metrics, svg, "test run", "training/global_step", keys, 5);
    TL_CHECK(rlc_file_exists(svg), "svg written");
    // Parse as XML and count the points of each series (python's xml parser is the independent check).
    int rc = tl_system("/usr/bin/python3 - '%s' <<'EOF'\n"
                       "import sys, xml.etree.ElementTree as ET\n"
                       "ns={'s':'http://www.w3.org/2000/svg'}\n"
                       "root=ET.parse(sys.argv[1]).getroot()\n"
                       "assert root.tag.endswith('svg'), root.tag\n"
                       "want={'critic_score_mean':12,'val-core_synth_acc_mean_1':3,'response_length_mean':12,'actor_kl_loss':12,'actor_entropy':12}\n"
                       "got={g.get('id'):int(g.get('data-points')) for g in root.iter('{http://www.w3.org/2000/svg}g') if g.get('class')=='series'}\n"
                       "assert got==want, got\n"
                       "pts=[len(p.get('points').split()) for g in root.iter('{http://www.w3.org/2000/svg}g') if g.get('id')=='critic_score_mean' for p in g.iter('{http://www.w3.org/2000/svg}polyline')]\n"
                       "assert pts==[12], pts\n"
                       "EOF", svg);
    TL_CHECK(rc == 0, "svg parses as XML with the expected series (rc=%d)", rc);
    // Render it, when a renderer is installed, to prove it is a valid image and not just valid XML.
    if (tl_system("command -v rsvg-convert >/dev/null 2>&1") == 0) {
        rc = tl_system("rsvg-convert -o '%s/curves.png' '%s' && head -c 8 '%s/curves.png' | od -An -tx1 | grep -q '89 50 4e 47'", dir, svg, dir);
        TL_CHECK(rc == 0, "rsvg-convert renders the svg to a PNG (rc=%d)", rc);
    } else {
        tl_skip("rsvg-convert not installed (apt-get install librsvg2-bin): rendering check skipped");
    }
    // A series that is all missing renders as an empty chart, not a crash.
    double x[3] = {1, 2, 3}, y[3] = {NAN, NAN, NAN};
    plot_series s = {"empty", "empty", 3, x, y};
    char *doc = plot_svg("t", &s, 1);
    TL_CHECK(strstr(doc, "data-points=\"0\"") != NULL, "empty series has zero points");
    free(doc);
    tl_system("rm -rf '%s'", dir);
    free(metrics); free(svg); free(dir);
    return tl_summary();
}
