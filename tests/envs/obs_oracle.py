#!/usr/bin/env python3
"""obs_oracle.py: observation text as transformers renders it (the oracle of tests/test_agent.c).

usage: obs_oracle.py TOKENIZER_CONFIG_JSON IN.jsonl OUT.jsonl
Each input line {"boundary": bool, "groups": [[msg, ...], ...], "enable_thinking": bool | null}: the text verl's
Continuous Token builder appends after an assistant turn: "\n" if boundary, then per group
render(prefix + group) - render(prefix) with the synthetic prefix (system, user, and for a group of tool
messages an assistant turn with reasoning_content and one call per tool message), then the generation prompt
render(all, True) - render(all, False). Rendering: Python jinja2 as transformers' apply_chat_template sets it up
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, tojson = json.dumps(ensure_ascii=False)).
A line {"prompt": [msg, ...], "tools": [...] | null, "append": str | null, "enable_thinking": ...} is a trajectory's
prompt instead: append added to the end of the last user message (TRL's reset() text), then render(prompt, tools,
add_generation_prompt=True). Output lines {"text": ...}.
"""
import json
import sys

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


cfg = json.load(open(sys.argv[1], encoding="utf-8"))
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
tmpl = env.from_string(cfg["chat_template"])


def render(msgs, agp, et, tools=None):
    kw = {} if et is None else {"enable_thinking": et}
    return tmpl.render(messages=msgs, tools=tools, documents=None, add_generation_prompt=agp,
                       bos_token=None, eos_token=cfg.get("eos_token"), **kw)


def prefix(group):
    p = [{"role": "system", "content": "continuous token synthetic system"},
         {"role": "user", "content": "continuous token synthetic user"}]
    if group[0]["role"] == "tool":
        p.append({"role": "assistant", "content": "", "reasoning_content": "reasoning",
                  "tool_calls": [{"type": "function", "function": {"name": "tool", "arguments": {}}} for _ in group]})
    return p


out = open(sys.argv[3], "w", encoding="utf-8")
for line in open(sys.argv[2], encoding="utf-8"):
    r = json.loads(line)
    et = r.get("enable_thinking")
    if "prompt" in r:
        msgs = r["prompt"]
        if r.get("append") is not None:
            last = [m for m in msgs if m["role"] == "user"][-1]
            last["content"] += r["append"]
        out.write(json.dumps({"text": render(msgs, True, et, r.get("tools"))}, ensure_ascii=False) + "\n")
        continue
    text = "\n" if r["boundary"] else ""
    for g in r["groups"]:
        p = prefix(g)
        a, b = render(p, False, et), render(p + g, False, et)
        assert b.startswith(a)
        text += b[len(a):]
    full = prefix(r["groups"][-1]) + r["groups"][-1]
    a, b = render(full, False, et), render(full, True, et)
    assert b.startswith(a)
    text += b[len(a):]
    out.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
