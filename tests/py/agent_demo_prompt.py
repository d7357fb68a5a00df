#!/usr/bin/python3
"""rlc demo --tools: an SFT conversation's prompt (a system message holding the tools block, then the question)
renders and tokenizes exactly as the trainer's tool_agent prompt for that question (the user message rendered with
the calculator environment's tools, apply_chat_template(tools=[...])). Usage: agent_demo_prompt.py RLC RUN_DIR.
Checks the first 20 rows of RUN_DIR/data/sft.jsonl with RUN_DIR/tokenizer; exit status 0 when all are equal."""
import json
import subprocess
import sys

rlc, run = sys.argv[1], sys.argv[2]
hello = subprocess.run([rlc, "env", "calculator", "--tools", "calculator"], input='{"type":"hello","protocol":"rlc-env/1"}\n',
                       capture_output=True, text=True, check=True)
tools = json.loads(hello.stdout.splitlines()[0])["tools"]
with open(run + "/data/sft.jsonl") as f:
    rows = [json.loads(line) for line, _ in zip(f, range(20))]
req = []
for r in rows:
    m = r["messages"]
    assert m[0]["role"] == "system" and m[1]["role"] == "user", m[:2]
    req.append(json.dumps({"messages": m[:2], "add_generation_prompt": True}))
    req.append(json.dumps({"messages": [m[1]], "tools": tools, "add_generation_prompt": True}))
out = subprocess.run([rlc, "tokenize", "--tokenizer", run + "/tokenizer", "--chat"], input="\n".join(req) + "\n",
                     capture_output=True, text=True, check=True)
res = [json.loads(line) for line in out.stdout.splitlines()]
bad = [i for i in range(len(rows)) if res[2 * i]["ids"] != res[2 * i + 1]["ids"] or res[2 * i]["text"] != res[2 * i + 1]["text"]]
print("%d rows: SFT prompt == tool_agent prompt in %d (%d tokens in the first)" % (len(rows), len(rows) - len(bad), len(res[0]["ids"])))
sys.exit(1 if bad else 0)
