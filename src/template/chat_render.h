// chat_render.h: one chat rendered as transformers' apply_chat_template(..., tokenize=False) renders it: the
// template's render() gets the special tokens (bos_token, eos_token, ...), the template kwargs, then
// messages, tools (None when not given), documents=None and add_generation_prompt.
#pragma once
#include "core/strbuf.h"
#include "template/template.h"

struct cJSON;
// specials: a JSON object of special-token strings (or NULL); messages: a JSON list of objects with a string
// "role"; tools: a JSON list or NULL; kwargs: a JSON object or NULL. Appends to out; returns 0, or -1 with
// one line in err.
int rlc_chat_render(const rlc_tmpl *t, const struct cJSON *specials, const struct cJSON *messages,
                    const struct cJSON *tools, int add_generation_prompt, const struct cJSON *kwargs, rlc_strbuf *out,
                    rlc_strbuf *err);
// The checks rlc_chat_render makes on messages, tools and kwargs: 0, or -1 with one line in err.
int rlc_chat_check_inputs(const struct cJSON *messages, const struct cJSON *tools, const struct cJSON *kwargs,
                          rlc_strbuf *err);
