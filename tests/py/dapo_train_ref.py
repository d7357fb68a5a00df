#!/usr/bin/python3
"""Independent reference of DAPO's dynamic-sampling loop and overlong shaping (verl-recipe dapo_ray_trainer.py and
the dapo reward manager; shared/spec/verl-ppo.md §3) for tests/test_dapo_train.c.

usage: dapo_train_ref.py DUMP_DIR METRICS_JSONL TRAIN_BATCH_SIZE MAX_RESP_LEN BUF_LEN PENALTY
DUMP_DIR holds rlc's RLC_GRPO_DUMP files: gen_<step>_<k>.json (every generated batch: rows, response lengths, shaped
scores, the reward extras, rlc's keep) and step_<step>.json (the step's training batch). For every step this
recomputes the overlong reward of each response, which groups the filter keeps (np.std > 0 of "acc", then the first
train_batch_size groups of all kept), and checks that the training batch is exactly those groups' sequences in
order and that train/num_gen_batches is the number of generated batches. Prints one line per check, exits 1 on a
mismatch."""
import glob
import json
import os
import sys

import numpy as np
import torch

d, mpath = sys.argv[1], sys.argv[2]
tbs, L, buf, pf = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
metrics = {}
for line in open(mpath):
    o = json.loads(line)
    if "train/num_gen_batches" in o:
        metrics[int(o["training/global_step"])] = o
bad = 0
n_penalised = n_dropped = 0


def fail(msg):
    global bad
    bad += 1
    print("MISMATCH", msg)


steps = sorted({int(os.path.basename(p).split("_")[1]) for p in glob.glob(os.path.join(d, "gen_*_*.json"))})
if not steps:
    fail("no generated-batch dumps")
for s in steps:
    k = 0
    kept_seqs, kept_groups = [], 0
    while os.path.exists(os.path.join(d, "gen_%d_%d.json" % (s, k))):
        gb = json.load(open(os.path.join(d, "gen_%d_%d.json" % (s, k))))
        n, seqs = gb["n"], gb["seqs"]
        for q in seqs:   # overlong shaping in float32, as verl's reward tensor
            exceed = q["rlen"] - (L - buf)
            ov = min(-exceed / buf * pf, 0.0) if buf > 0 else 0.0
            n_penalised += ov < 0
            want = float(torch.tensor(q["extra"]["raw"], dtype=torch.float32) + torch.tensor(ov, dtype=torch.float32))
            if abs(want - q["score"]) > 1e-6 * max(1.0, abs(want)):
                fail("step %d batch %d row %d: score %r, want %r" % (s, k, q["row"], q["score"], want))
        for gi in range(len(seqs) // n):
            vals = np.array([q["extra"]["acc"] for q in seqs[gi * n:(gi + 1) * n]], dtype=np.float64)
            keep = bool(np.std(vals) > 0 or n == 1)
            n_dropped += not keep
            if keep and kept_groups < tbs:
                kept_groups += 1
                kept_seqs += seqs[gi * n:(gi + 1) * n]
            elif keep:
                keep = False   # truncated to the first train_batch_size groups
            if keep != bool(gb["keep"][gi]):
                fail("step %d batch %d group %d: rlc keep %d, reference %d" % (s, k, gi, gb["keep"][gi], keep))
        k += 1
    step = json.load(open(os.path.join(d, "step_%d.json" % s)))
    got = [(q["ids"], q["plen"], q["score"]) for q in step["seqs"]]
    want = [(q["ids"], q["plen"], q["score"]) for q in kept_seqs]
    if got != want:
        fail("step %d: training batch is not the kept groups (%d vs %d sequences)" % (s, len(got), len(want)))
    ngb = metrics.get(s, {}).get("train/num_gen_batches")
    if ngb != k:
        fail("step %d: train/num_gen_batches %r, generated %d" % (s, ngb, k))
    print("step %d: %d generated batches, %d groups kept, %d sequences" % (s, k, kept_groups, len(want)))
print("%d responses penalised as overlong, %d groups dropped by the filter" % (n_penalised, n_dropped))
if n_penalised == 0 or n_dropped == 0:
    fail("the run did not exercise both the penalty and the filter")
sys.exit(1 if bad else 0)
