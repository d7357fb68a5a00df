#!/usr/bin/python3
"""PyTorch reference for the frozen log-prob head's saved gradients (tests/test_kernels_head.c).

Usage: head_frozen_ref.py DIR. DIR/cases.txt has one case a line: `NAME T=.. H=.. V=.. temperature=.. softcap=..`.
Inputs: DIR/NAME.hidden.f32 (T, H), DIR/NAME.w.f32 (V, H), DIR/NAME.targets.i32 (T). In float64, by autograd:
g = d sum_t logp_t / d hidden (row t is d logp_t / d hidden_t, as logp_t depends on hidden_t only; 0 where the
target is < 0) and ge = d sum_t entropy_t / d hidden, written as DIR/NAME.out.g.f32 and DIR/NAME.out.ge.f32.
The logits follow verl: soft-cap (Gemma 2 style, before the temperature), then logits / temperature.
"""
import os
import sys

import numpy as np
import torch

torch.set_num_threads(1)
D = sys.argv[1]


def load(name, t, shape, dtype):
    ext = "f32" if dtype == np.float32 else "i32"
    a = np.fromfile(os.path.join(D, f"{name}.{t}.{ext}"), dtype=dtype)
    return torch.from_numpy(a.reshape(shape).copy())


def save(name, t, x):
    x.detach().contiguous().to(torch.float32).numpy().tofile(os.path.join(D, f"{name}.out.{t}.f32"))


def run(name, kv):
    T, H, V = int(kv["T"]), int(kv["H"]), int(kv["V"])
    temp, cap = float(kv["temperature"]), float(kv["softcap"])
    w = load(name, "w", (V, H), np.float32).double()
    tg = load(name, "targets", (T,), np.int32).long()
    outs = {}
    for what in ("g", "ge"):
        h = load(name, "hidden", (T, H), np.float32).double().requires_grad_(True)
        logits = h @ w.t()
        if cap > 0:
            logits = cap * torch.tanh(logits / cap)
        logits = logits / temp
        logp = torch.log_softmax(logits, dim=-1)
        if what == "g":
            y = logp.gather(-1, tg.clamp(min=0)[:, None])[:, 0]
            y = torch.where(tg >= 0, y, torch.zeros_like(y))
        else:
            y = -(logp.exp() * logp).sum(-1)
        (gr,) = torch.autograd.grad(y.sum(), h)
        outs[what] = gr
    save(name, "g", outs["g"])
    save(name, "ge", outs["ge"])


with open(os.path.join(D, "cases.txt")) as fh:
    for line in fh:
        parts = line.split()
        if parts:
            run(parts[0], dict(p.split("=", 1) for p in parts[1:]))
