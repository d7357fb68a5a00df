#!/usr/bin/python3
# attention_ref.py DIR...: PyTorch oracle for tests/test_attention.c, one case per directory.
# Reads DIR/meta.txt ("T nh nkv D n_seqs [scale window]"; window > 0: query i sees keys i - window < j <= i), cu.i32 (n_seqs+1), q.f32 (T, nh*D), k.f32 / v.f32 (T, nkv*D),
# dout.f32 (T, nh*D). Computes softmax attention with a block-diagonal causal mask in float64 and its
# autograd gradients; writes out.f32 (T, nh*D), lse.f32 (T, nh), dq.f32, dk.f32, dv.f32 (float32).
import os
import sys

import numpy as np
import torch


def run(d):
    meta = open(os.path.join(d, "meta.txt")).read().split()
    T, nh, nkv, D, n = (int(x) for x in meta[:5])
    scale = float(meta[5]) if len(meta) > 5 else D ** -0.5
    window = int(meta[6]) if len(meta) > 6 else 0
    cu = np.fromfile(os.path.join(d, "cu.i32"), dtype=np.int32)
    assert cu.shape[0] == n + 1 and cu[0] == 0 and cu[-1] == T

    def load(name, w):
        a = np.fromfile(os.path.join(d, name), dtype=np.float32).reshape(T, w)
        return torch.from_numpy(a.astype(np.float64))

    q = load("q.f32", nh * D).view(T, nh, D).transpose(0, 1).contiguous().requires_grad_(True)
    k = load("k.f32", nkv * D).view(T, nkv, D).transpose(0, 1).contiguous().requires_grad_(True)
    v = load("v.f32", nkv * D).view(T, nkv, D).transpose(0, 1).contiguous().requires_grad_(True)
    dout = load("dout.f32", nh * D).view(T, nh, D).transpose(0, 1)
    seq = torch.zeros(T, dtype=torch.long)
    for s in range(n):
        seq[cu[s]:cu[s + 1]] = s
    pos = torch.arange(T)
    mask = (seq[:, None] == seq[None, :]) & (pos[None, :] <= pos[:, None])   # (T, T) query x key
    if window > 0:
        mask &= pos[None, :] > pos[:, None] - window
    g = nh // nkv
    kk = k.repeat_interleave(g, dim=0)   # head h uses kv head h // g
    vv = v.repeat_interleave(g, dim=0)
    scores = (q @ kk.transpose(1, 2)) * scale
    scores = scores.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)            # (nh, T)
    p = torch.softmax(scores, dim=-1)
    out = p @ vv                                      # (nh, T, D)
    out.backward(dout)

    def save(name, t):
        t.detach().to(torch.float32).numpy().tofile(os.path.join(d, name))

    save("out.f32", out.transpose(0, 1).reshape(T, nh * D))
    save("lse.f32", lse.transpose(0, 1).reshape(T, nh))
    save("dq.f32", q.grad.transpose(0, 1).reshape(T, nh * D))
    save("dk.f32", k.grad.transpose(0, 1).reshape(T, nkv * D))
    save("dv.f32", v.grad.transpose(0, 1).reshape(T, nkv * D))


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        run(arg)
