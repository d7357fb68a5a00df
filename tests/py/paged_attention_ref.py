#!/usr/bin/python3
# paged_attention_ref.py DIR...: PyTorch oracle for tests/test_paged_attention.c, one case per directory.
# Reads DIR/meta.txt ("T nh nkv D window scale"), seq.i32 / pos.i32 (T), q.f32 (T, nh*D), k.f32 / v.f32
# (T, nkv*D). Query t sees key u iff seq[u] == seq[t] and pos[t] - window < pos[u] <= pos[t] (window 0: no
# lower bound), the sliding-window causal mask of transformers' masking_utils. Softmax attention in float64;
# writes out.f32 (T, nh*D) as float32.
import os
import sys

import numpy as np
import torch


def run(d):
    meta = open(os.path.join(d, "meta.txt")).read().split()
    T, nh, nkv, D, window = (int(x) for x in meta[:5])
    scale = float(meta[5])
    seq = torch.from_numpy(np.fromfile(os.path.join(d, "seq.i32"), dtype=np.int32).astype(np.int64))
    pos = torch.from_numpy(np.fromfile(os.path.join(d, "pos.i32"), dtype=np.int32).astype(np.int64))

    def load(name, w):
        a = np.fromfile(os.path.join(d, name), dtype=np.float32).reshape(T, w)
        return torch.from_numpy(a.astype(np.float64))

    q = load("q.f32", nh * D).view(T, nh, D).transpose(0, 1)
    k = load("k.f32", nkv * D).view(T, nkv, D).transpose(0, 1)
    v = load("v.f32", nkv * D).view(T, nkv, D).transpose(0, 1)
    mask = (seq[:, None] == seq[None, :]) & (pos[None, :] <= pos[:, None])   # (T, T) query x key
    if window > 0:
        mask &= pos[None, :] > pos[:, None] - window
    g = nh // nkv
    kk = k.repeat_interleave(g, dim=0)   # head h uses kv head h // g
    vv = v.repeat_interleave(g, dim=0)
    scores = (q @ kk.transpose(1, 2)) * scale
    scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ vv          # (nh, T, D)
    out.transpose(0, 1).reshape(T, nh * D).to(torch.float32).numpy().tofile(os.path.join(d, "out.f32"))


if __name__ == "__main__":
    for d in sys.argv[1:]:
        run(d)
