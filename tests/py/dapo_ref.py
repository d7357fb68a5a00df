#!/usr/bin/python3
"""Reference for tests/test_dapo.c: DAPO's dynamic sampling and overlong reward as the verl recipe computes them
(numpy's np.std over each group's metric values, the generation loop of dapo_ray_trainer.py, the dapo reward
manager's overlong penalty on torch tensors), written from shared/spec/verl-ppo.md §3.
Usage: dapo_ref.py OUTDIR SEED. Writes OUTDIR/keep.txt, OUTDIR/loop.txt and OUTDIR/overlong.txt (formats below)."""
import os
import random
import sys

import numpy as np
import torch

out, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)


def group_values(n, f32):
    kind = rng.randrange(6)
    if kind == 0:   # all equal: values whose numpy mean may round away from them (0.1 * 3)
        v = [rng.choice([0.1, 1.0 / 3, 0.7, 0.2, 1.0, 0.0, -1.0, rng.uniform(-2, 2)])] * n
    elif kind == 1:   # 0/1 accuracies
        v = [float(rng.random() < 0.5) for _ in range(n)]
    elif kind == 2:   # +-1 scores, mostly equal
        v = [1.0] * n
        if rng.random() < 0.5:
            v[rng.randrange(n)] = -1.0
    elif kind == 3:   # rewards with a small overlong penalty on one response
        v = [1.0] * n
        v[rng.randrange(n)] = 1.0 - rng.choice([1e-7, 1e-3, 0.5])
    else:
        v = [rng.uniform(-1, 1) for _ in range(n)]
    if f32:
        v = [float(np.float32(x)) for x in v]
    return v


def keep_of(vals, f32):
    arr = [np.float32(x) for x in vals] if f32 else vals
    return int(np.std(arr) > 0 or len(vals) == 1)


# keep.txt: "f32 n v_1 .. v_n keep" per line
with open(os.path.join(out, "keep.txt"), "w") as f:
    for n in [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 64, 100, 128, 129, 200, 257, 1000]:
        for f32 in (0, 1):
            for _ in range(30):
                v = group_values(n, f32)
                f.write("%d %d %s %d\n" % (f32, n, " ".join(repr(x) for x in v), keep_of(v, f32)))

# loop.txt: scenarios of the recipe's generation loop.
#   "S train_batch_size n max_num_gen_batches groups_per_gen_batch f32"
#   "B v_1 .. v_{groups*n}"            one generated batch (metric per response, groups contiguous)
#   "O more k g_1..g_k" | "O ready num_gen_batches k g_1..g_k" | "O error num_gen_batches"
with open(os.path.join(out, "loop.txt"), "w") as f:
    for sc in range(40):
        tbs, n = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4])
        mx = rng.choice([0, 1, 2, 3, 10])
        G = rng.choice([tbs, 2 * tbs, 3 * tbs, tbs + 1])
        f32 = rng.randrange(2)
        f.write("S %d %d %d %d %d\n" % (tbs, n, mx, G, f32))
        batch, num_prompt, num_gen = [], 0, 0
        for step_batches in range(12):
            vals = []
            for g in range(G):
                p_equal = rng.choice([0.2, 0.6, 0.95])
                if rng.random() < p_equal:
                    vals += [rng.choice([0.0, 1.0, 0.1])] * n
                else:
                    vals += group_values(n, f32)
            if f32:
                vals = [float(np.float32(x)) for x in vals]
            f.write("B %s\n" % " ".join(repr(x) for x in vals))
            num_gen += 1
            kept = [g for g in range(G) if keep_of(vals[g * n:(g + 1) * n], f32)]
            num_prompt += len(kept)
            batch += [(step_batches, g) for g in kept]
            if num_prompt < tbs:
                if mx <= 0 or num_gen < mx:
                    f.write("O more %d %s\n" % (len(kept), " ".join(map(str, kept))))
                    continue
                f.write("O error %d\n" % num_gen)
                break
            batch = batch[:tbs]
            mine = [g for (b, g) in batch if b == step_batches]
            f.write("O ready %d %d %s\n" % (num_gen, len(mine), " ".join(map(str, mine))))
            batch, num_prompt, num_gen = [], 0, 0

# overlong.txt: "valid_len max_resp_len buffer_len penalty_factor score overlong reward" per line, the dapo reward
# manager's arithmetic on torch tensors (int64 length; the reward lands in a float32 tensor).
with open(os.path.join(out, "overlong.txt"), "w") as f:
    for _ in range(400):
        mx = rng.choice([16, 512, 1000, 20480])
        buf = rng.choice([1, 3, mx // 4, mx // 2, mx]) or 1
        factor = rng.choice([1.0, 0.5, 0.3, 2.0, 0.0])
        L = rng.choice([0, 1, mx - buf, mx - buf + 1, mx, rng.randrange(0, mx + 1)])
        score = rng.choice([0.0, 1.0, -1.0, rng.uniform(-1, 1)])
        valid_response_length = torch.tensor(L, dtype=torch.int64)
        expected_len = mx - buf
        exceed_len = valid_response_length - expected_len
        overlong_reward = min(-exceed_len / buf * factor, 0)
        reward = score
        reward += overlong_reward
        stored = torch.zeros(1, dtype=torch.float32)
        stored[0] = reward
        f.write("%d %d %d %r %r %r %r\n" % (L, mx, buf, factor, score, float(overlong_reward), float(stored[0])))
