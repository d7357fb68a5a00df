#!/usr/bin/env python3
"""scripted_env.py: the rlc-env/1 test environment of tests/test_agent.c.

One tool, `echo` (result: "echo " + the JSON of its arguments). A call's arguments script the environment's
behaviour for that step, so a test drives every path from the model's text:
  {"do": "done"}       reply done: true             {"do": "fail"}        is_error: true
  {"do": "user"}       add a user message           {"do": "reward"}      step reward 0.5
  {"do": "big"}        a 1000-character result      {"do": "crash"}       exit 3
  {"do": "hang"}       never answer                 {"do": "badline"}     a line that is not JSON
  {"do": "wrongid"}    result id call_9_9           {"do": "missing"}     no results
  {"do": "nonstring"}  content 5                    {"do": "error"}       a type "error" message
  {"do": "wrongtype"}  answer with "finished"       {"do": "unknowntraj"} answer for another trajectory
Options: --seed S shuffles the replies of whatever requests are pending and delays each by 0..5 ms;
--observe-all declares observe: all (a turn without calls gets a user message until turn 3, then nothing);
--max-inflight K declares it and reports an error if more than K requests are ever outstanding;
--protocol P answers the hello with protocol P.
--started MODE gives each trajectory's started reply a prompt of its own:
  same      every sample of row I: tools [echo, shout] and append_to_user " (row I)"
  sample    sample J: append_to_user " (sample J)"; odd samples only the tool shout (a call to echo is unknown)
  badtools  tools {} (a protocol error)          badappend  append_to_user 5 (a protocol error)
finish: score = 1.0 if the ground truth occurs in the response, 0.0 otherwise, null for ground truth "none".
"""
import json
import os
import random
import select
import sys
import time

args = sys.argv[1:]
opt = {"seed": None, "observe": "tool_calls", "max_inflight": 0, "protocol": "rlc-env/1", "started": None}
i = 0
while i < len(args):
    a = args[i]
    if a == "--seed": opt["seed"] = int(args[i + 1]); i += 2
    elif a == "--observe-all": opt["observe"] = "all"; i += 1
    elif a == "--max-inflight": opt["max_inflight"] = int(args[i + 1]); i += 2
    elif a == "--protocol": opt["protocol"] = args[i + 1]; i += 2
    elif a == "--started": opt["started"] = args[i + 1]; i += 2
    else: sys.exit("scripted_env: unknown option " + a)
rng = random.Random(opt["seed"] or 0)
truths = {}
stdin = sys.stdin.buffer


def send(obj):
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


ECHO = {"type": "function", "function": {"name": "echo", "description": "Echo the arguments.",
        "parameters": {"type": "object", "properties": {"x": {"type": "string"}}, "required": []}}}
SHOUT = {"type": "function", "function": {"name": "shout", "description": "Shout the text.",
         "parameters": {"type": "object", "properties": {"x": {"type": "string"}, "volume": {"type": "number", "default": 1.0}},
                        "required": ["x"]}}}


def answer(req):
    t = req["type"]
    if t == "hello":
        return {"type": "hello", "protocol": opt["protocol"], "observe": opt["observe"], "max_inflight": opt["max_inflight"],
                "tools": [ECHO]}
    traj = req["traj"]
    if t == "start":
        truths[traj] = req["ground_truth"]
        rep = {"type": "started", "traj": traj}
        mode, j = opt["started"], req["sample"]
        if mode == "same":
            rep["tools"] = [ECHO, SHOUT]
            rep["append_to_user"] = " (row %d)" % req["index"]
        elif mode == "sample":
            rep["append_to_user"] = " (sample %d)" % j
            if j % 2:
                rep["tools"] = [SHOUT]
        elif mode == "badtools":
            rep["tools"] = {}
        elif mode == "badappend":
            rep["append_to_user"] = 5
        return rep
    if t == "finish":
        gt = truths.pop(traj)
        return {"type": "finished", "traj": traj, "score": None if gt == "none" else (1.0 if gt in req["response"] else 0.0)}
    assert t == "step", t
    calls = req["tool_calls"]
    rep = {"type": "observation", "traj": traj, "results": []}
    if not calls:   # observe: all, a turn without calls
        if req["turn"] < 3:
            rep["messages"] = [{"role": "user", "content": "continue %d" % req["turn"]}]
        return rep
    for c in calls:
        a = c["arguments"]
        do = a.get("do") if isinstance(a, dict) else None
        content = "echo " + json.dumps(a, ensure_ascii=False)
        res = {"id": c["id"], "content": content}
        if do == "done": rep["done"] = True
        elif do == "fail": res["is_error"] = True
        elif do == "user": rep["messages"] = [{"role": "user", "content": "a hint"}]
        elif do == "reward": rep["reward"] = 0.5
        elif do == "big": res["content"] = "".join(chr(ord("a") + k % 26) for k in range(1000))
        elif do == "crash": sys.exit(3)
        elif do == "hang": time.sleep(3600)
        elif do == "badline": return "not json"
        elif do == "wrongid": res["id"] = "call_9_9"
        elif do == "missing": rep["results"] = []; return rep
        elif do == "nonstring": res["content"] = 5
        elif do == "error": return {"type": "error", "traj": traj, "message": "scripted failure"}
        elif do == "wrongtype": return {"type": "finished", "traj": traj, "score": None}
        elif do == "unknowntraj": rep["traj"] = "nope"
        rep["results"].append(res)
    return rep


buf = b""
pending = []
eof = False
while not eof or pending:
    # read whatever is available (block only when nothing is pending)
    r, _, _ = select.select([stdin], [], [], 0 if pending else None)
    if r:
        chunk = os.read(stdin.fileno(), 1 << 16)
        if not chunk:
            eof = True
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            pending.append(json.loads(line))
        if opt["max_inflight"] and len(pending) > opt["max_inflight"]:
            send({"type": "error", "traj": None, "message": "%d requests outstanding" % len(pending)})
            sys.exit(1)
        if not eof:
            continue   # gather what else is already there
    if opt["seed"] is not None:
        rng.shuffle(pending)
    for req in pending:
        if opt["seed"] is not None:
            time.sleep(rng.random() * 0.005)
        rep = answer(req)
        if isinstance(rep, str):
            sys.stdout.write(rep + "\n")
            sys.stdout.flush()
        else:
            send(rep)
    pending = []
