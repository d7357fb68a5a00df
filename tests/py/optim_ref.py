#!/usr/bin/python3
"""PyTorch reference for tests/test_optim.c.

  optim_ref.py adamw DIR   DIR/spec.json + DIR/p0.bin + DIR/g{k}.bin (float32) ->
                           DIR/p.bin, DIR/m.bin, DIR/v.bin, DIR/out.json (grad norms, lrs, skipped)
     torch.optim.AdamW (single param group, every tensor of the layout a separate Parameter) +
     torch.nn.utils.clip_grad_norm_ + LambdaLR, with verl's non-finite rule (zero grads, skip step).
  optim_ref.py sched DIR   DIR/spec.json -> DIR/out.json: LambdaLR lrs for steps 0..n
     (lambdas as in transformers / verl / torchtitan sources, see shared/spec/verl-grpo.md §7).
"""
import json
import math
import os
import sys

import numpy as np
import torch


def constant_lambda(W):
    # transformers.optimization._get_constant_schedule_with_warmup_lr_lambda
    def f(current_step):
        if current_step < W:
            return float(current_step) / float(max(1.0, W))
        return 1.0
    return f


def cosine_lambda(W, S, min_lr_ratio, num_cycles=0.5, init_lr_ratio=0.0):
    # verl.utils.torch_functional.get_cosine_schedule_with_warmup (zero_indexed_step=True)
    coef = (1 - min_lr_ratio) * 0.5
    intercept = (1 + min_lr_ratio) * 0.5

    def f(current_step):
        if current_step < W:
            return init_lr_ratio + (1.0 - init_lr_ratio) * (float(current_step) / float(max(1, W)))
        progress = float(current_step - W) / float(max(1, S - W))
        x = math.cos(math.pi * float(num_cycles) * 2.0 * progress)
        return max(min_lr_ratio, x * coef + intercept)
    return f


def wsd_lambda(W, S, decay_type, min_lr_factor):
    # torchtitan.components.lr_scheduler.linear_warmup_stable_decay, decay_ratio None
    decay_steps = S - W
    stable_steps = S + 1 - W - decay_steps

    def f(current_step):
        warmup_stable_steps = W + stable_steps
        if current_step < W:
            current_step += 1
            return float(current_step / W)
        elif current_step < warmup_stable_steps:
            return 1.0
        current_step += 1
        progress = float(current_step - warmup_stable_steps) / decay_steps
        if decay_type == "linear":
            adj = 1 - progress
        elif decay_type == "sqrt":
            adj = 1 - math.sqrt(progress)
        else:
            adj = 0.5 * (1.0 + math.cos(math.pi * progress))
        return min_lr_factor + (1 - min_lr_factor) * adj
    return f


def make_lambda(s):
    t = s["type"]
    if t == "constant":
        return constant_lambda(s["warmup"])
    if t == "cosine":
        return cosine_lambda(s["warmup"], s["total"], s["min"])
    return wsd_lambda(s["warmup"], s["total"], {"linear": "linear", "sqrt": "sqrt", "wsd-cosine": "cosine"}[t], s["min"])


def load(path, n):
    a = np.fromfile(path, dtype=np.float32)
    assert a.size == n, (path, a.size, n)
    return torch.from_numpy(a.copy())


def run_adamw(d):
    spec = json.load(open(os.path.join(d, "spec.json")))
    n = spec["numel"]
    flat = load(os.path.join(d, "p0.bin"), n)
    params = [torch.nn.Parameter(flat[o:o + k].clone()) for o, k in spec["tensors"]]
    opt = torch.optim.AdamW(params, lr=spec["lr"], betas=(spec["beta1"], spec["beta2"]), eps=spec["eps"],
                            weight_decay=spec["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, make_lambda(spec["sched"]))
    norms, lrs, skipped = [], [], []
    for k in range(spec["steps"]):
        g = load(os.path.join(d, "g%d.bin" % k), n)
        for p, (o, c) in zip(params, spec["tensors"]):
            p.grad = g[o:o + c].clone()
        lrs.append(opt.param_groups[0]["lr"])
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm=spec["max_norm"])
        norms.append(float(norm) if math.isfinite(float(norm)) else None)  # JSON has no NaN
        if not torch.isfinite(norm):
            opt.zero_grad()           # verl: skip the step, zero the gradients
            skipped.append(1)
        else:
            opt.step()
            skipped.append(0)
        sched.step()
    cat = lambda ts: torch.cat([t.detach().reshape(-1) for t in ts]).numpy().astype(np.float32)
    cat(params).tofile(os.path.join(d, "p.bin"))
    cat([opt.state[p]["exp_avg"] for p in params]).tofile(os.path.join(d, "m.bin"))
    cat([opt.state[p]["exp_avg_sq"] for p in params]).tofile(os.path.join(d, "v.bin"))
    json.dump({"norms": norms, "lrs": lrs, "skipped": skipped}, open(os.path.join(d, "out.json"), "w"))


def run_sched(d):
    spec = json.load(open(os.path.join(d, "spec.json")))
    out = []
    for s in spec["cases"]:
        p = torch.nn.Parameter(torch.zeros(1))
        opt = torch.optim.SGD([p], lr=s["base_lr"])
        sched = torch.optim.lr_scheduler.LambdaLR(opt, make_lambda(s))
        lrs = []
        for _ in range(s["n"]):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        out.append(lrs)
    json.dump(out, open(os.path.join(d, "out.json"), "w"))


if __name__ == "__main__":
    torch.set_num_threads(1)
    {"adamw": run_adamw, "sched": run_sched}[sys.argv[1]](sys.argv[2])
