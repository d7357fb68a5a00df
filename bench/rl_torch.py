#!/usr/bin/python3
"""PyTorch peer for bench/bench_rl.c: verl's actor loss (vanilla PPO + entropy bonus + low_var_kl loss,
token-mean) forward + backward to the per-token log-prob / entropy gradients on a (B, T) batch.
Usage: rl_torch.py B T REPEATS -> prints the median seconds per call."""
import statistics
import sys
import time

import torch

B, T, R = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
g = torch.Generator().manual_seed(0)
lp0 = -torch.rand(B, T, generator=g) * 3
old = lp0 + torch.randn(B, T, generator=g) * 0.3
ref = lp0 + torch.randn(B, T, generator=g) * 0.3
A = torch.randn(B, T, generator=g)
ent0 = torch.rand(B, T, generator=g)
m = torch.ones(B, T)


def step():
    lp = lp0.clone().requires_grad_(True)
    ent = ent0.clone().requires_grad_(True)
    d = torch.clamp(lp - old, -20, 20)
    r = torch.exp(d)
    L1 = -A * r
    L2 = -A * torch.clamp(r, 0.8, 1.2)
    Lc = torch.maximum(L1, L2)
    L3 = -A * 3.0
    L = torch.where(A < 0, torch.min(L3, Lc), Lc)
    N = m.sum()
    pg = (L * m).sum() / N
    el = (ent * m).sum() / N
    k = torch.clamp(ref - lp, -20, 20)
    kl = torch.clamp(torch.exp(k) - k - 1, -10, 10)
    klv = (kl * m).sum() / N
    loss = pg - 0.01 * el + 0.001 * klv
    loss.backward()
    return lp.grad, ent.grad


step()
ts = []
for _ in range(R):
    t0 = time.perf_counter()
    step()
    ts.append(time.perf_counter() - t0)
print(statistics.median(ts))
