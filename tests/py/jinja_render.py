"""jinja_render.py: renders templates with Python's jinja2 exactly as transformers' apply_chat_template does
(the oracle for rlc's C template engine).

Environment (transformers/utils/chat_template_utils.py _compile_jinja_template):
  ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                extensions=[AssistantTracker, jinja2.ext.loopcontrols])
  filters["tojson"] = json.dumps(x, ensure_ascii=False, indent, separators, sort_keys)
  globals raise_exception (TemplateError(message)) and strftime_now (datetime.now().strftime)

usage:
  jinja_render.py raw IN.jsonl OUT.jsonl
      each line {"template": str, "vars": {...}} -> {"text": str} or {"error": str}
  jinja_render.py chat TEMPLATE_FILE TOKENIZER_CONFIG IN.jsonl OUT.jsonl
      each line {"messages": [...], "tools": [...]?, "add_generation_prompt": bool?, "kwargs": {...}?}
      rendered as render(messages=, tools=, documents=None, add_generation_prompt=, **special_tokens, **kwargs)
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    # transformers' {% generation %} tag; without return_assistant_tokens_mask it renders its body
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def special_tokens(cfg):
    out = {}
    for k in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"):
        v = cfg.get(k)
        if isinstance(v, dict):
            v = v.get("content")
        if v is not None:
            out[k] = v
    return out


def chat_vars(line, specials):
    v = dict(specials)
    v.update(line.get("kwargs") or {})
    v["messages"] = line["messages"]
    v["tools"] = line.get("tools")
    v["documents"] = None
    v["add_generation_prompt"] = bool(line.get("add_generation_prompt", False))
    return v


def render(tmpl, v):
    try:
        return {"text": tmpl.render(**v)}
    except Exception as e:  # the message is what rlc must report
        return {"error": str(e), "type": type(e).__name__}


def main():
    mode = sys.argv[1]
    env = make_env()
    if mode == "raw":
        out = []
        for line in open(sys.argv[2], encoding="utf-8"):
            if not line.strip():
                continue
            r = json.loads(line)
            try:
                t = env.from_string(r["template"])
            except Exception as e:
                out.append({"error": str(e), "type": type(e).__name__})
                continue
            out.append(render(t, r.get("vars") or {}))
        with open(sys.argv[3], "w", encoding="utf-8") as f:
            for o in out:
                f.write(json.dumps(o, ensure_ascii=False) + "\n")
        return
    tmpl = env.from_string(open(sys.argv[2], encoding="utf-8").read())
    specials = special_tokens(json.load(open(sys.argv[3], encoding="utf-8")))
    lines = [json.loads(l) for l in open(sys.argv[4], encoding="utf-8") if l.strip()]
    if mode == "chat":
        with open(sys.argv[5], "w", encoding="utf-8") as f:
            for line in lines:
                f.write(json.dumps(render(tmpl, chat_vars(line, specials)), ensure_ascii=False) + "\n")
    else:
        raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
