"""chat_cases.py: seeded random conversations for a chat-template family, as apply_chat_template inputs.

usage: chat_cases.py FAMILY N SEED OUT.jsonl
Each line: {"messages": [...], "tools": [...]?, "add_generation_prompt": bool, "kwargs": {...}}.
Families: qwen3 qwen2.5 llama3.1 llama3.2 gemma3 mistral smollm2. Conversations follow what each template
supports (roles alternating where it requires, tool calls where it has them) and about 1 in 12 breaks a rule
the template enforces with raise_exception. Texts mix unicode, quotes, backslashes, control characters and
whitespace that trim/strip and tojson must handle. Floats are never integral (1.0): JSON numbers reach the
C renderer through cJSON, which does not keep the int/float distinction for them.
"""
import json
import random
import sys

WORDS = ["hello", "world", "Natalia", "sold", "clips", "48", "April", "May", "how", "many", "the", "a", "of",
         "é", "ü", "ß", "straße", "中文", "日本語", "😀", "🚀", "עברית", "مرحبا", "naïve", "Ωmega", "x²", "1/2",
         "'single'", '"double"', "back\\slash", "tab\there", "line\nbreak", "{{ not_a_var }}", "{% if %}",
         "<think>", "</think>", "<tool_call>", "</tool_response>", "[INST]", "<|im_end|>", "\u2028", "\x01ctl",
         "a\x7fb", "\r\n", "100%", "$5.00", "&amp;", "<b>", "null", "true", "{\"json\": 1}", "  ", "\u00a0nbsp"]


def text(r, lo=1, hi=12):
    s = " ".join(r.choice(WORDS) for _ in range(r.randint(lo, hi)))
    k = r.random()
    if k < 0.12:
        s = "  " + s + "\n\n"
    elif k < 0.2:
        s = "\n" + s + " \t"
    elif k < 0.24:
        s = ""
    return s


def number(r):
    k = r.random()
    if k < 0.4:
        return r.randint(-1000, 100000)
    if k < 0.8:
        return r.choice([2.5, -0.125, 3.14159, 1e-7, 6.02e23, 0.1, 1e22, 123.456])
    return r.choice([True, False, None])


def jvalue(r, depth=0):
    k = r.random()
    if depth > 2 or k < 0.4:
        return text(r, 1, 4)
    if k < 0.6:
        return number(r)
    if k < 0.8:
        return [jvalue(r, depth + 1) for _ in range(r.randint(0, 3))]
    return {r.choice(["city", "n", "ünit", "q\"uote", "k"]) + str(i): jvalue(r, depth + 1) for i in range(r.randint(0, 3))}


def tool_schema(r, i):
    props = {}
    for j in range(r.randint(0, 3)):
        key = "p%d_%s" % (j, r.choice(["city", "unit", "é"]))
        props[key] = {"type": r.choice(["string", "number", "boolean"]), "description": text(r, 1, 5)}
        if r.random() < 0.3:
            props[key]["enum"] = ["celsius", "fahrenheit"]
    fn = {"name": "tool_%d_%s" % (i, r.choice(["weather", "search", "calc"])), "description": text(r, 2, 8),
          "parameters": {"type": "object", "properties": props, "required": sorted(props)[:1]}}
    return {"type": "function", "function": fn}


def tool_call(r, tools, args_as_string=False, call_id=None):
    name = r.choice(tools)["function"]["name"] if tools else "tool_x"
    args = {"a%d" % i: jvalue(r) for i in range(r.randint(0, 3))}
    tc = {"type": "function", "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False) if args_as_string else args}}
    if call_id is not None:
        tc["id"] = call_id
    return tc


def call_id(r, bad=False):
    n = r.choice([3, 8, 10]) if bad else 9
    return "".join(r.choice("abcdefghijklmnopqrstuvwxyzABC0123456789") for _ in range(n))


def qwen(r, thinking):
    tools = [tool_schema(r, i) for i in range(r.randint(1, 3))] if r.random() < 0.35 else None
    msgs = []
    if r.random() < 0.5:
        msgs.append({"role": "system", "content": text(r)})
    for turn in range(r.randint(1, 4)):
        u = text(r)
        if r.random() < 0.08:
            u = "<tool_response>" + u + "</tool_response>"
        msgs.append({"role": "user", "content": u})
        if r.random() < 0.1:
            msgs.append({"role": "system", "content": text(r)})
        last = turn == 3 or r.random() < 0.3
        if last and r.random() < 0.5:
            break
        a = {"role": "assistant", "content": text(r)}
        if thinking:
            k = r.random()
            if k < 0.3:
                a["content"] = "<think>\n" + text(r) + "\n</think>\n\n" + a["content"]
            elif k < 0.45:
                a["reasoning_content"] = text(r)
            elif k < 0.5:
                a["reasoning_content"] = None
        if r.random() < 0.35:
            a["tool_calls"] = [tool_call(r, tools, r.random() < 0.3) for _ in range(r.randint(1, 2))]
            if r.random() < 0.3:
                a["content"] = ""
            msgs.append(a)
            for _ in range(r.randint(1, 2)):
                msgs.append({"role": "tool", "content": text(r)})
            if r.random() < 0.5:
                msgs.append({"role": "assistant", "content": text(r)})
        else:
            msgs.append(a)
    line = {"messages": msgs, "tools": tools, "add_generation_prompt": r.random() < 0.6}
    if thinking:
        k = r.random()
        line["kwargs"] = {} if k < 0.34 else {"enable_thinking": k < 0.67}
    return line


def llama(r, v31, version):
    kw = {}
    if version == "3.2" and r.random() < 0.05:
        pass   # date from strftime_now (today), as transformers renders it
    else:
        kw["date_string"] = r.choice(["26 Jul 2024", "07 Dec 2026", "01 Jan 2025"])
    if r.random() < 0.2:
        kw["tools_in_user_message"] = False
    tools = [tool_schema(r, i) for i in range(r.randint(1, 2))] if r.random() < 0.35 else None
    builtin = v31 and r.random() < 0.2
    if builtin:
        kw["builtin_tools"] = r.choice([["brave_search", "wolfram_alpha"], ["code_interpreter", "brave_search"]])
    msgs = []
    if r.random() < 0.5:
        msgs.append({"role": "system", "content": text(r)})
    for turn in range(r.randint(1, 4)):
        msgs.append({"role": "user", "content": text(r)})
        if r.random() < 0.25:
            break
        if r.random() < 0.35:
            n = 2 if r.random() < 0.1 else 1       # two calls raise
            calls = []
            for _ in range(n):
                tc = tool_call(r, tools)
                if builtin and r.random() < 0.5:
                    tc["function"]["name"] = kw["builtin_tools"][0]
                    tc["function"]["arguments"] = {"query": text(r, 1, 4)}
                calls.append(tc)
            msgs.append({"role": "assistant", "content": "", "tool_calls": calls})
            c = r.random()
            content = text(r) if c < 0.5 else ({"result": jvalue(r)} if c < 0.8 else [jvalue(r)])
            msgs.append({"role": r.choice(["tool", "ipython"]), "content": content})
        msgs.append({"role": "assistant", "content": text(r)})
    if tools is not None and r.random() < 0.03:
        msgs = [m for m in msgs if m["role"] == "system"]   # tools in the user message with no user message: raises
    return {"messages": msgs, "tools": tools, "add_generation_prompt": r.random() < 0.6, "kwargs": kw}


def gemma(r):
    msgs = []
    if r.random() < 0.5:
        c = text(r)
        msgs.append({"role": "system", "content": c if r.random() < 0.7 else [{"type": "text", "text": c}]})
    n = r.randint(1, 6)
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        if r.random() < 0.03:
            role = "assistant" if role == "user" else "user"   # breaks alternation: raises
        c = text(r)
        if r.random() < 0.2:
            c = [{"type": r.choice(["text", "image"]), "text": text(r)} for _ in range(r.randint(1, 3))]
        msgs.append({"role": role, "content": c})
    return {"messages": msgs, "add_generation_prompt": r.random() < 0.6}


def mistral(r):
    tools = [tool_schema(r, i) for i in range(r.randint(1, 3))] if r.random() < 0.35 else None
    msgs = []
    if r.random() < 0.4:
        msgs.append({"role": "system", "content": text(r)})
    for turn in range(r.randint(1, 4)):
        msgs.append({"role": "user", "content": text(r)})
        if r.random() < 0.03:
            msgs.append({"role": "user", "content": text(r)})   # two user turns in a row: raises
        if r.random() < 0.25:
            break
        if r.random() < 0.35:
            bad = r.random() < 0.04
            calls = [tool_call(r, tools, call_id=call_id(r, bad)) for _ in range(r.randint(1, 2))]
            msgs.append({"role": "assistant", "tool_calls": calls})
            for tc in calls:
                content = text(r) if r.random() < 0.7 else {"content": jvalue(r)}
                msgs.append({"role": "tool", "content": content, "tool_call_id": tc["id"]})
        msgs.append({"role": "assistant", "content": text(r)})
    return {"messages": msgs, "tools": tools, "add_generation_prompt": r.random() < 0.5}


def smollm(r):
    msgs = []
    if r.random() < 0.5:
        msgs.append({"role": "system", "content": text(r)})
    for i in range(r.randint(1, 6)):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": text(r)})
    return {"messages": msgs, "add_generation_prompt": r.random() < 0.6}


def main():
    fam, n, seed, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    r = random.Random(seed * 1000003 + sum(map(ord, fam)))
    gen = {"qwen3": lambda: qwen(r, True), "qwen2.5": lambda: qwen(r, False), "llama3.1": lambda: llama(r, True, "3.1"),
           "llama3.2": lambda: llama(r, False, "3.2"), "gemma3": lambda: gemma(r), "mistral": lambda: mistral(r),
           "smollm2": lambda: smollm(r)}[fam]
    with open(out, "w", encoding="utf-8") as f:
        for _ in range(n):
            line = gen()
            if line.get("tools") is None:
                line.pop("tools", None)
            f.write(json.dumps(line, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
