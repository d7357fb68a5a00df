#!/usr/bin/python3
"""Independent PyTorch reference for tests/test_rl.c: verl's advantage estimators, vanilla PPO loss, KL
penalties, agg_loss modes and in-reward KL, written from the spec (shared/spec/verl-grpo.md) with torch
autograd for the gradients. Usage: rl_ref.py OUTDIR SEED. Writes every input and output as raw float64
files OUTDIR/<name>.f64 (inputs are float32 values, so the C side gets them exactly)."""
import os
import sys
from collections import defaultdict

import torch

out, seed = sys.argv[1], int(sys.argv[2])
torch.manual_seed(seed)
g = torch.Generator().manual_seed(seed)


def put(name, t):
    t = torch.as_tensor(t).detach().to(torch.float64).contiguous().reshape(-1)
    with open(os.path.join(out, name + ".f64"), "wb") as f:
        f.write(t.numpy().tobytes())


def masked_sum(x, m, axis=None):
    v = torch.where(m.bool(), x, torch.zeros_like(x)) * m
    return v.sum() if axis is None else v.sum(axis)


def masked_mean(x, m, axis=None):
    return masked_sum(x, m, axis) / ((m.sum() if axis is None else m.sum(axis)) + 1e-8)


def masked_whiten(x, m):
    mu = masked_mean(x, m)
    var = masked_mean((x - mu) ** 2, m)
    n = m.sum()
    assert n > 1
    var = var * (n / (n - 1))
    return (x - mu) * torch.rsqrt(var + 1e-8)


def prefix_mask(lengths, T):
    return (torch.arange(T)[None, :] < torch.as_tensor(lengths)[:, None]).float()


# ---------------- advantages ----------------
def grpo(tlr, m, idx, norm, eps=1e-6):
    s = tlr.sum(-1)
    d = defaultdict(list)
    for i in range(len(s)):
        d[idx[i]].append(s[i])
    mu, sd = {}, {}
    for k, v in d.items():
        if len(v) == 1:
            mu[k], sd[k] = torch.tensor(0.0), torch.tensor(1.0)
        else:
            st = torch.stack(v)
            mu[k], sd[k] = torch.mean(st), torch.std(st)
    s = s.clone()
    for i in range(len(s)):
        s[i] = (s[i] - mu[idx[i]]) / (sd[idx[i]] + eps) if norm else s[i] - mu[idx[i]]
    return s[:, None] * m


def rloo(tlr, m, idx):
    s = tlr.sum(-1)
    d = defaultdict(list)
    for i in range(len(s)):
        d[idx[i]].append(s[i])
    mu = {k: (torch.tensor(0.0) if len(v) == 1 else torch.mean(torch.stack(v))) for k, v in d.items()}
    s = s.clone()
    for i in range(len(s)):
        n = len(d[idx[i]])
        if n > 1:
            s[i] = s[i] * n / (n - 1) - mu[idx[i]] * n / (n - 1)
    return s[:, None] * m


def rpp(tlr, m, gamma):
    ret = torch.zeros_like(tlr)
    run = 0
    for t in reversed(range(tlr.shape[1])):
        run = tlr[:, t] + gamma * run
        ret[:, t] = run
        run = run * m[:, t]
    return masked_whiten(ret, m) * m, ret


def rppb(tlr, m, idx):
    T = tlr.shape[-1]
    s = tlr.sum(-1)
    d = defaultdict(list)
    for i in range(len(s)):
        d[idx[i]].append(s[i])
    mu = {k: (torch.tensor(0.0) if len(v) == 1 else torch.mean(torch.stack(v))) for k, v in d.items()}
    s = s.clone()
    for i in range(len(s)):
        s[i] = s[i] - mu[idx[i]]
    s = s[:, None].tile([1, T]) * m
    return masked_whiten(s, m) * m


def group_mean_std(scores, gidx):      # verl.utils.groupwise.group_mean_std with eps=0
    G = int(gidx.max()) + 1
    ones = torch.ones_like(scores)
    count = torch.zeros(G).index_add_(0, gidx, ones)
    s1 = torch.zeros(G).index_add_(0, gidx, scores)
    mean = s1 / count.clamp_min(1.0)
    c = scores - mean[gidx]
    var = torch.zeros(G).index_add_(0, gidx, c * c) / (count - 1.0).clamp_min(1.0)
    std = torch.sqrt(torch.clamp(var, min=0.0))
    single = count <= 1.0
    mean[single] = 0.0
    std[single] = 1.0
    return mean, std


def dense_ids(idx):
    u = sorted(set(idx))
    return torch.tensor([u.index(x) for x in idx])


def grpo_vec(tlr, m, idx, eps=1e-6):
    s = tlr.sum(-1)
    gi = dense_ids(idx)
    mu, sd = group_mean_std(s, gi)
    return ((s - mu[gi]) / (sd[gi] + eps))[:, None] * m


def rloo_vec(tlr, m, idx):
    s = tlr.sum(-1)
    inv = dense_ids(idx)
    c = torch.bincount(inv)[inv].to(s.dtype)
    adv = ((c * s - torch.bincount(inv, weights=s)[inv]) / (c - 1).clamp_min(1)) * (c > 1)
    return adv[:, None] * m


def opo(tlr, m, idx):
    L = m.sum(-1)
    s = tlr.sum(-1)
    d, dl = defaultdict(list), defaultdict(list)
    for i in range(len(s)):
        d[idx[i]].append(s[i]); dl[idx[i]].append(L[i])
    bsl = {}
    for k in d:
        bsl[k] = torch.tensor(0.0) if len(d[k]) == 1 else (torch.stack(dl[k]) * torch.stack(d[k])).sum() / torch.stack(dl[k]).sum()
    s = s.clone()
    for i in range(len(s)):
        s[i] = s[i] - bsl[idx[i]]
    return s[:, None] * m


def gpg(tlr, m, idx):
    s = tlr.sum(-1)
    B = s.shape[0]
    alpha = B / torch.count_nonzero(s).clamp(min=1)
    d = defaultdict(list)
    for i in range(B):
        d[idx[i]].append(s[i])
    mu = {k: (torch.tensor(0.0) if len(v) == 1 else torch.mean(torch.stack(v))) for k, v in d.items()}
    s = s.clone()
    for i in range(B):
        s[i] = alpha * (s[i] - mu[idx[i]]) / 1.0
    return s[:, None] * m


B, T = 24, 16
groups = [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4 + [4] * 4 + [5] + [6] * 3
groups = [x * 7 + 3 for x in groups]          # arbitrary ids
perm = torch.randperm(B, generator=g).tolist()
idx = [groups[p] for p in perm]
lengths = torch.randint(1, T + 1, (B,), generator=g)
m = prefix_mask(lengths, T)
score = torch.randn(B, generator=g)
score[torch.tensor([i for i in range(B) if idx[i] == 6 * 7 + 3])] = 0.75   # all-equal group
score[torch.randint(0, B, (5,), generator=g)] = 1.0                        # some 0/1 scores
tlr = torch.zeros(B, T)
tlr[torch.arange(B), lengths - 1] = score
put("adv_mask", m); put("adv_group", torch.tensor(idx, dtype=torch.float64)); put("adv_tlr", tlr)
put("adv_grpo", grpo(tlr, m, idx, True)); put("adv_drgrpo", grpo(tlr, m, idx, False))
put("adv_rloo", rloo(tlr, m, idx)); put("adv_rppb", rppb(tlr, m, idx))
put("adv_grpo_vec", grpo_vec(tlr, m, idx)); put("adv_rloo_vec", rloo_vec(tlr, m, idx))
put("adv_opo", opo(tlr, m, idx)); put("adv_gpg", gpg(tlr, m, idx))
dense = (torch.randn(B, T, generator=g) * m).float()
put("adv_dense", dense)
a, r = rpp(dense, m, 0.95)
put("adv_rpp", a); put("ret_rpp", r)

# ---------------- KL ----------------
n = 256
lp = torch.randn(n, generator=g) * 2 - 1
ref = lp + torch.randn(n, generator=g) * 1.5
ref[:4] = lp[:4] + torch.tensor([25.0, -25.0, 3.0, 0.0])   # clamp +/-20, v>10 region, zero diff
put("kl_lp", lp); put("kl_ref", ref)
KL_NAMES = ["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "k1+", "abs+", "k2+", "low_var_kl+", "k3+"]


def kl_forward(lp, ref, t):
    if t in ("kl", "k1"):
        return lp - ref
    if t == "abs":
        return (lp - ref).abs()
    if t in ("mse", "k2"):
        return 0.5 * (lp - ref).square()
    if t in ("low_var_kl", "k3"):
        k = torch.clamp(ref - lp, min=-20, max=20)
        return torch.clamp(torch.exp(k) - k - 1, min=-10, max=10)
    raise NotImplementedError(t)


def kl_penalty(lp, ref, t):
    base = t[:-1] if t.endswith("+") else t
    f = kl_forward(lp, ref, base)
    if not t.endswith("+") or t in ("mse", "k2"):
        return f
    b = 0.5 * (lp - ref).square()
    return b - b.detach() + f.detach()


for i, t in enumerate(KL_NAMES):
    x = lp.clone().requires_grad_(True)
    v = kl_penalty(x, ref, t)
    v.sum().backward()
    put(f"kl_val_{i}", v); put(f"kl_grad_{i}", x.grad)

# ---------------- policy loss + agg ----------------
MODES = ["token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]


def agg_loss(L, m, mode, D=1, N=None, G=None, lsf=None):
    if mode == "token-mean":
        if N is None:
            N = m.sum()
        return masked_sum(L, m) / N * D
    if mode == "token-sum":
        return masked_sum(L, m) * D
    if mode in ("seq-mean-token-sum", "seq-mean-token-sum-norm"):
        q = torch.sum(L * m, dim=-1)
        sm = (torch.sum(m, dim=-1) > 0).float()
        if G is None:
            G = sm.sum()
        loss = masked_sum(q, sm) / G * D
        if mode == "seq-mean-token-sum-norm":
            loss = loss / (m.shape[-1] if lsf is None else lsf)
        return loss
    if mode == "seq-mean-token-mean":
        c = torch.sum(m, dim=-1)
        q = torch.sum(L * m, dim=-1) / (c + 1e-8)
        sm = (c > 0).float()
        if G is None:
            G = sm.sum()
        return masked_sum(q, sm) / G * D
    raise ValueError(mode)


def vanilla(old, lp, A, m, mode, lo, hi, c, isw, gbi):
    d = torch.clamp(lp - old, min=-20.0, max=20.0)
    r = torch.exp(d)
    ppo_kl = masked_mean(-d, m)
    L1 = -A * r
    L2 = -A * torch.clamp(r, 1 - lo, 1 + hi)
    Lc = torch.maximum(L1, L2)
    clipfrac = masked_mean(torch.gt(L2, L1).float(), m)
    L3 = -A * c
    Lc2 = torch.min(L3, Lc)
    lower = masked_mean(torch.gt(Lc, L3) * (A < 0).float(), m)
    L = torch.where(A < 0, Lc2, Lc)
    if isw is not None:
        L = L * isw
    return agg_loss(L, m, mode, **gbi), clipfrac, ppo_kl, lower


B, T = 6, 20
lengths = torch.tensor([20, 7, 0, 13, 1, 18])
m = prefix_mask(lengths, T)
lp = -torch.rand(B, T, generator=g) * 3
old = lp + torch.randn(B, T, generator=g) * 0.8
old[0, :3] = lp[0, :3] + torch.tensor([-21.0, 21.0, -1.5])     # clamp at +/-20, dual-clip region
A = torch.randn(B, T, generator=g)
A[1] = -0.7                                                     # a constant negative row, like GRPO
ent = torch.rand(B, T, generator=g) * 2
ref = lp + torch.randn(B, T, generator=g) * 0.5
isw = torch.rand(B, T, generator=g) + 0.5
for name, tns in [("pl_lp", lp), ("pl_old", old), ("pl_adv", A), ("pl_mask", m), ("pl_ent", ent),
                  ("pl_ref", ref), ("pl_isw", isw)]:
    put(name, tns)
lo, hi, c = 0.2, 0.28, 3.0
ent_coef, kl_coef = 0.01, 0.1
configs = [dict(D=2, N=float(m.sum()) * 1.7, G=10.0, lsf=None), dict(D=1, N=None, G=None, lsf=37.0)]
for ci, gbi in enumerate(configs):
    for mi, mode in enumerate(MODES):
        for wi, w in enumerate([None, isw]):
            x = lp.clone().requires_grad_(True)
            e = ent.clone().requires_grad_(True)
            pg, cf, pk, cl = vanilla(old, x, A, m, mode, lo, hi, c, w, gbi)
            el = agg_loss(e, m, mode, **gbi)
            kl = agg_loss(kl_penalty(x, ref, "low_var_kl"), m, mode, **gbi)
            total = pg - ent_coef * el + kl_coef * kl
            total.backward()
            tag = f"{ci}_{mi}_{wi}"
            put(f"pl_out_{tag}", torch.tensor([total.item(), pg.item(), el.item(), kl.item(), cf.item(), pk.item(),
                                               cl.item()]))
            put(f"pl_glp_{tag}", x.grad); put(f"pl_gent_{tag}", e.grad)

# ---------------- in-reward KL with the adaptive controller ----------------
B, T = 5, 9
m = prefix_mask(torch.tensor([9, 4, 1, 6, 8]), T)
scores = torch.zeros(B, T)
scores[torch.arange(B), torch.tensor([8, 3, 0, 5, 7])] = torch.rand(B, generator=g)
oldl = -torch.rand(B, T, generator=g) * 2
refl = oldl + torch.randn(B, T, generator=g) * 0.3
put("ik_mask", m); put("ik_scores", scores); put("ik_old", oldl); put("ik_ref", refl)
value, target, horizon = 0.05, 0.01, 100.0
kld = kl_penalty(oldl, refl, "kl") * m
rewards = scores - value * kld
cur = torch.mean(masked_mean(kld, m, axis=-1)).item()
import numpy as np
err = np.clip(cur / target - 1, -0.2, 0.2)
newv = value * (1 + err * B / horizon)
put("ik_rewards", rewards); put("ik_out", torch.tensor([cur, value, newv]))
print("ok")
