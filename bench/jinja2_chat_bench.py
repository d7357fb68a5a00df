"""jinja2_chat_bench.py: the Python jinja2 peer of bench_template: conversations per second rendering a chat
template exactly as transformers' apply_chat_template does (tests/py/jinja_render.py's environment).

usage: /usr/bin/python3 bench/jinja2_chat_bench.py TEMPLATE_FILE SPECIAL_TOKENS_JSON IN.jsonl SECONDS REPS
Prints one line per repetition, "conversations/s: X" (each repetition renders the lines for about SECONDS
of this thread's CPU time).
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "py"))
from jinja_render import chat_vars, make_env, special_tokens  # noqa: E402


def main():
    tpath, spath, inp, secs, reps = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
    tmpl = make_env().from_string(open(tpath, encoding="utf-8").read())
    specials = special_tokens(json.load(open(spath, encoding="utf-8")))
    vs = [chat_vars(json.loads(l), specials) for l in open(inp, encoding="utf-8") if l.strip()]
    for _ in range(reps):
        n, t0 = 0, time.thread_time()   # CPU time, as bench_template counts its own
        while True:
            for v in vs:
                tmpl.render(**v)
            n += len(vs)
            if time.thread_time() - t0 >= secs:
                break
        print("conversations/s: %.1f" % (n / (time.thread_time() - t0)), flush=True)


if __name__ == "__main__":
    main()
