#!/usr/bin/python3
"""Independent reference for the GSM8K extraction (verl/utils/reward_score/gsm8k.py with the spec's last-300-
characters clip), on random strings: writes JSONL lines {"s", "strict", "flexible"} (null for no answer).
Usage: gsm8k_ref.py OUT SEED N"""
import json
import random
import re
import sys

out, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)


def extract(s, method):
    if len(s) > 300:
        s = s[-300:]
    if method == "strict":
        sols = re.findall("#### (\\-?[0-9\\.\\,]+)", s)
        return None if not sols else sols[-1].replace(",", "").replace("$", "")
    ans = re.findall("(\\-?[0-9\\.\\,]+)", s)
    final = None
    if ans:
        for final in reversed(ans):
            if final not in ["", "."]:
                break
    return final


pieces = ["#### ", "####", "# ", "-", ".", ",", "$", " ", "\n", "1", "7", "42", "3.5", "1,000", "é", "数", "x", "ab",
          "answer", "-.", "..", "#### -", "#### $"]
with open(out, "w") as f:
    for i in range(n):
        k = rng.randint(0, 40) if i % 10 else rng.randint(100, 400)
        s = "".join(rng.choice(pieces) for _ in range(k))
        f.write(json.dumps({"s": s, "strict": extract(s, "strict"), "flexible": extract(s, "flexible")}) + "\n")
