#!/usr/bin/python3
"""A deterministic external reward for tests/test_dapo_train.c (JSONL over stdin/stdout, see src/reward/external.h).
acc = the response's length parity when the ground truth's last character is an even digit, else 0 (so about half
the groups have an equal metric and dynamic sampling drops them); score = acc + 0.01 * the number of digits in the
response; extra "raw" = score (the overlong-free value the reference checks the penalty against).
Mode "const": acc = 0 everywhere (every group is dropped)."""
import json
import sys

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
for line in sys.stdin:
    req = json.loads(line)
    r, gt = req["response"], req.get("ground_truth") or "0"
    even = gt[-1:].isdigit() and int(gt[-1]) % 2 == 0
    acc = float(len(r) % 2) if (even and mode != "const") else 0.0
    score = acc + 0.01 * sum(ch.isdigit() for ch in r)
    print(json.dumps({"id": req["id"], "score": score, "acc": acc, "raw": score}), flush=True)
