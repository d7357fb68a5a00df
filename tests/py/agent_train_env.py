#!/usr/bin/python3
"""A deterministic rlc-env/1 environment for tests/test_agent_train.c (docs/env-protocol.md). observe: "all", so
every assistant turn is sent whatever the model wrote: turns 1 and 2 get a user message (observation tokens with
loss mask 0), turn 3 ends the trajectory (done). One tool, "echo", answers its text. finished: even samples get
the score 0.1 * num_turns + 0.05 * (len(response) % 3); odd samples and validation get null (the usual reward
path, so that every validation sample carries the reward's extra keys, tool and single-turn rows alike). Numbers for
the trainer's env/<key>/mean: each observation reports {"steps": 1}, each finished reply "turns": num_turns.
--score-val: validation's even samples get the environment's score too (so some validation samples lack the
reward's extra keys)."""
import json
import sys

score_val = "--score-val" in sys.argv[1:]
TOOL = {"type": "function", "function": {"name": "echo", "description": "Echo the text.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
for line in sys.stdin:
    m = json.loads(line)
    t = m["type"]
    if t == "hello":
        r = {"type": "hello", "protocol": "rlc-env/1", "tools": [TOOL], "observe": "all"}
    elif t == "start":
        r = {"type": "started", "traj": m["traj"]}
    elif t == "step":
        r = {"type": "observation", "traj": m["traj"], "metrics": {"steps": 1},
             "results": [{"id": c["id"], "content": str(c["arguments"].get("text", ""))} for c in m["tool_calls"]]}
        if m["turn"] < 3:
            r["messages"] = [{"role": "user", "content": "go on %d" % m["turn"]}]
        else:
            r["done"] = True
    elif t == "finish":
        score = None
        if (score_val or not m["traj"].startswith("val:")) and int(m["traj"].split(":")[-1]) % 2 == 0:
            score = 0.1 * m["num_turns"] + 0.05 * (len(m["response"]) % 3)
        r = {"type": "finished", "traj": m["traj"], "score": score, "turns": m["num_turns"]}
    else:
        r = {"type": "error", "traj": m.get("traj", ""), "message": "unknown type " + t}
    print(json.dumps(r, ensure_ascii=False), flush=True)
