// test_template_chat.c: the real chat templates of Qwen3, Qwen2.5, Llama 3.1, Llama 3.2, Gemma 3, Mistral v0.3
// and SmolLM2 (tests/data/templates) rendered by rlc's engine byte-identical to Debian's python3-jinja2 driven
// as transformers' apply_chat_template drives it (tests/py/jinja_render.py), over seeded generated
// conversations (tests/py/chat_cases.py): single and multi-turn, system or none, with and without the
// generation prompt, enable_thinking, tools / tool calls / tool results where the template has them, unicode,
// quotes and control characters. Conversations the template rejects must fail in both, with the same
// raise_exception message. Also the chat layer of a tokenizer (tokenizer_config.json string or named-list
// chat_template, chat_template.jinja precedence, --chat-template file, special tokens, absent template).
// Skips the jinja2 comparisons when /usr/bin/python3 has no jinja2.
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "template/chat_render.h"
#include "template/template.h"
#include "testlib.h"
#include "tokenizer/tokenizer.h"

#define TDIR "tests/data/templates"

static int have_jinja2(void) { return tl_system("/usr/bin/python3 -c 'import jinja2' 2>/dev/null") == 0; }

static char **read_lines(const char *path, int *n) {
    char *txt = rlc_read_file(path, NULL);
    int cap = 64, k = 0;
    char **v = rlc_malloc((size_t)cap * sizeof *v);
    for (char *p = txt; *p;) {
        char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (k == cap) v = rlc_realloc(v, (size_t)(cap *= 2) * sizeof *v);
        v[k] = rlc_malloc(len + 1);
        memcpy(v[k], p, len);
        v[k][len] = 0;
        k++;
        p += len + (e ? 1 : 0);
    }
    free(txt);
    *n = k;
    return v;
}

static void free_lines(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

static void family(const char *fam, int n_cases, const char *tmp) {
    char tpath[256], spath[256], in[4200], out[4200];
    snprintf(tpath, sizeof tpath, TDIR "/%s.jinja", fam);
    snprintf(spath, sizeof spath, TDIR "/%s.json", fam);
    snprintf(in, sizeof in, "%s/%s.in.jsonl", tmp, fam);
    snprintf(out, sizeof out, "%s/%s.want.jsonl", tmp, fam);
    if (tl_system("/usr/bin/python3 tests/py/chat_cases.py %s %d 1 '%s'", fam, n_cases, in) != 0 ||
        tl_system("/usr/bin/python3 tests/py/jinja_render.py chat %s %s '%s' '%s'", tpath, spath, in, out) != 0) {
        TL_CHECK(0, "%s: the python generator / jinja2 oracle failed", fam);
        return;
    }
    size_t n;
    char *src = rlc_read_file(tpath, &n);
    rlc_strbuf err = {0}, got = {0};
    rlc_tmpl *t = rlc_tmpl_parse(src, n, tpath, &err);
    free(src);
    TL_CHECK(t != NULL, "%s parses: %s", fam, err.s ? err.s : "");
    if (!t) return;
    char *stxt = rlc_read_file(spath, NULL);
    cJSON *specials = cJSON_Parse(stxt);
    free(stxt);
    int nin, nout;
    char **ins = read_lines(in, &nin), **outs = read_lines(out, &nout);
    TL_CHECK(nin == n_cases && nout == n_cases, "%s: %d cases, %d oracle outputs", fam, nin, nout);
    int same = 0, raised = 0, bad = 0;
    for (int i = 0; i < nin && i < nout; i++) {
        cJSON *c = cJSON_Parse(ins[i]), *w = cJSON_Parse(outs[i]);
        const cJSON *wt = cJSON_GetObjectItemCaseSensitive(w, "text"), *we = cJSON_GetObjectItemCaseSensitive(w, "error");
        const cJSON *wty = cJSON_GetObjectItemCaseSensitive(w, "type");
        rlc_sb_clear(&got);
        rlc_sb_clear(&err);
        int rc = rlc_chat_render(t, specials, cJSON_GetObjectItemCaseSensitive(c, "messages"),
                                 cJSON_GetObjectItemCaseSensitive(c, "tools"),
                                 cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt")),
                                 cJSON_GetObjectItemCaseSensitive(c, "kwargs"), &got, &err);
        int ok;
        if (cJSON_IsString(wt)) {
            ok = rc == 0 && got.n == strlen(wt->valuestring) && !memcmp(got.s ? got.s : "", wt->valuestring, got.n);
            same += ok;
        } else {
            // a raise_exception (TemplateError) must give the template's own message after "NAME:LINE: "
            ok = rc != 0 && !strchr(err.s, '\n');
            if (ok && cJSON_IsString(wty) && !strcmp(wty->valuestring, "TemplateError")) {
                size_t a = strlen(err.s), b = strlen(we->valuestring);
                ok = a >= b && !strcmp(err.s + a - b, we->valuestring);
            }
            raised += ok;
        }
        if (!ok && bad++ < 3) {
            fprintf(stderr, "%s case %d: %s\n  want: %.400s\n  got (rc %d): %.400s%s\n", fam, i, ins[i], outs[i], rc,
                    rc ? err.s : got.s ? got.s : "", rc ? "" : "");
        }
        cJSON_Delete(c);
        cJSON_Delete(w);
    }
    TL_CHECK(bad == 0, "%s: %d of %d conversations differ from jinja2", fam, bad, nin);
    printf("%-9s %d conversations: %d identical renderings, %d raise in both\n", fam, nin, same, raised);
    TL_CHECK(same >= n_cases * 3 / 4, "%s: most conversations render (%d)", fam, same);
    free_lines(ins, nin);
    free_lines(outs, nout);
    cJSON_Delete(specials);
    rlc_tmpl_free(t);
    rlc_sb_free(&err);
    rlc_sb_free(&got);
}

int main(void) {
    const char *fams[] = {"qwen3", "qwen2.5", "llama3.1", "llama3.2", "gemma3", "mistral", "smollm2"};
    if (!have_jinja2()) {
        tl_skip("/usr/bin/python3 has no jinja2 (Debian python3-jinja2, scripts/install-deps.sh): no oracle");
    } else {
        char *tmp = tl_tmpdir("template_chat");
        const int n = getenv("RLC_SAN") ? 120 : 320;
        for (size_t i = 0; i < sizeof fams / sizeof *fams; i++) family(fams[i], n, tmp);
        free(tmp);
    }
    return tl_summary();
}
