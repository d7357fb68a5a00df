#!/usr/bin/python3
"""A deterministic external reward for tests/test_grpo.c (JSONL over stdin/stdout, see src/reward/external.h):
score = fraction of the response's characters that are digits (varied across samples, so GRPO's advantages are
not all zero), extra metric "digits", pred = the last character. Mode "die": exit 3 at the first request."""
import json
import sys

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
for line in sys.stdin:
    req = json.loads(line)
    if mode == "die":
        sys.exit(3)
    r = req["response"]
    d = sum(ch.isdigit() for ch in r)
    print(json.dumps({"id": req["id"], "score": d / max(1, len(r)) + 0.1 * (len(r) % 3), "digits": d,
                      "pred": r[-1:]}), flush=True)
