// template.h: a Jinja2 template engine for chat templates, rendering byte for byte as Python's jinja2 does
// when transformers' apply_chat_template drives it: ImmutableSandboxedEnvironment(trim_blocks=True,
// lstrip_blocks=True, extensions=[loopcontrols]), its tojson (json.dumps, ensure_ascii=False), and the
// globals raise_exception and strftime_now. See docs/chat_template.md for the supported subset.
//
// Errors never exit: parse and render return NULL / -1 with one line in `err` naming the template, its
// line and the problem ("NAME:LINE: ..."). A construct outside the subset is such an error.
// A parsed template is read-only: one template may be rendered from several threads at once.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/strbuf.h"

struct cJSON;
typedef struct rlc_tmpl rlc_tmpl;

// Parse template source (src[0..n)); `name` appears in error messages. NULL on error (err set).
rlc_tmpl *rlc_tmpl_parse(const char *src, size_t n, const char *name, rlc_strbuf *err);
void rlc_tmpl_free(rlc_tmpl *t);
// The clock strftime_now reads (seconds since the epoch, shown in local time); now NULL: the system clock.
// Set it before rendering, not during (a template is read-only while it renders). Tests inject days with it.
void rlc_tmpl_set_clock(rlc_tmpl *t, int64_t (*now)(void *arg), void *arg);

// Render with the variables of `vars` (a cJSON object, or NULL) on top of the globals (range, namespace,
// dict, raise_exception, strftime_now). Appends to out; on error returns -1 and err holds one line
// (out then holds a partial rendering). JSON numbers that are integers become Python ints, others floats.
int rlc_tmpl_render(const rlc_tmpl *t, const struct cJSON *vars, rlc_strbuf *out, rlc_strbuf *err);
// The same with the variables as parallel arrays (n names and JSON values; a later name replaces an
// earlier one), which spares building a JSON object per render.
int rlc_tmpl_render_vars(const rlc_tmpl *t, int n, const char *const *names, const struct cJSON *const *values,
                         rlc_strbuf *out, rlc_strbuf *err);
