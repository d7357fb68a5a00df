#!/usr/bin/python3
"""A user reward process for tests/test_reward.c: reads JSONL requests on stdin, answers JSONL on stdout.
Usage: reward_server.py MODE [N]. Modes: ok (score 1 if the ground truth occurs in the response; extra metric
"len"), die N (exit 3 after N replies), hang (never answers), malformed (answers a non-JSON line), noscore
(answers without "score"), wrongid (answers with a wrong id)."""
import json
import sys
import time

mode = sys.argv[1]
limit = int(sys.argv[2]) if len(sys.argv) > 2 else 0
done = 0
for line in sys.stdin:
    req = json.loads(line)
    if mode == "die" and done >= limit:
        sys.exit(3)
    if mode == "hang":
        time.sleep(3600)
    if mode == "malformed":
        print("this is not json", flush=True)
        continue
    if mode == "noscore":
        print(json.dumps({"value": 1.0}), flush=True)
        continue
    rid = req["id"] + (1 if mode == "wrongid" else 0)
    resp = req["response"]
    score = 1.0 if req["ground_truth"] and req["ground_truth"] in resp else 0.0
    out = {"id": rid, "score": score, "len": len(resp), "pred": resp[-3:], "tag": "ignored"}
    if req["extra_info"].get("bonus"):
        out["score"] += req["extra_info"]["bonus"]
    print(json.dumps(out), flush=True)
    done += 1
