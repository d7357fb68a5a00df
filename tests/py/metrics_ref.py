#!/usr/bin/python3
"""Independent reference for tests/test_rl_metrics.c: numpy's seeded bootstrap + verl's validation metric
definitions, the rollout-vs-actor probability metrics (torch), and Karmarkar-Karp / rearrange_micro_batches
(heapq), written from shared/spec/verl-grpo.md §8, §10. Usage: metrics_ref.py OUT.json SEED"""
import heapq
import json
import random
import sys
from collections import defaultdict
from functools import partial

import numpy as np
import torch

out_path, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
out = {}

# ---- np.random.choice with the legacy seed
np.random.seed(42)
out["choice_7_3"] = np.random.choice(7, size=(1000, 3), replace=True).reshape(-1).tolist()
np.random.seed(42)
out["choice_5_5"] = np.random.choice(5, size=(1000, 5), replace=True).reshape(-1).tolist()


# ---- validation metrics
def bootstrap_metric(data, subset_size, reduce_fns, n_bootstrap=1000, seed=42):
    np.random.seed(seed)
    data_np = np.array(data, dtype=object)
    idxs = np.random.choice(len(data_np), size=(n_bootstrap, subset_size), replace=True)
    res = np.empty((len(reduce_fns), n_bootstrap), dtype=np.float64)
    for f, fn in enumerate(reduce_fns):
        for b in range(n_bootstrap):
            res[f, b] = fn(data_np[idxs[b]])
    return [(float(np.mean(res[f])), float(np.std(res[f]))) for f in range(len(reduce_fns))]


def calc_maj_val(data, vote_key, val_key):
    vote2vals = defaultdict(list)
    for d in data:
        vote2vals[d[vote_key]].append(d[val_key])
    vote2cnt = {k: len(v) for k, v in vote2vals.items()}
    maj = max(vote2cnt, key=vote2cnt.get)
    return vote2vals[maj][0]


def process(data_sources, uids, infos):
    d = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for i, ds in enumerate(data_sources):
        for k, v in infos.items():
            d[ds][uids[i]][k].append(v[i])
    res = {}
    for ds, u2v in d.items():
        ud = res.setdefault(ds, {})
        for uid, v2vals in u2v.items():
            preds = v2vals.get("pred")
            vd = ud.setdefault(uid, {})
            for var, vals in v2vals.items():
                if not vals or isinstance(vals[0], str):
                    continue
                n = len(vals)
                met = {f"mean@{n}": float(np.mean(vals))}
                if n > 1:
                    met[f"std@{n}"] = float(np.std(vals))
                    ns, k = [], 2
                    while k < n:
                        ns.append(k)
                        k *= 2
                    ns.append(n)
                    for k in ns:
                        (bm, bs), (wm, ws) = bootstrap_metric(vals, k, [np.max, np.min])
                        met[f"best@{k}/mean"], met[f"best@{k}/std"] = bm, bs
                        met[f"worst@{k}/mean"], met[f"worst@{k}/std"] = wm, ws
                        if preds is not None:
                            vote = [{"val": a, "pred": p} for a, p in zip(vals, preds)]
                            [(mm, ms)] = bootstrap_metric(vote, k, [partial(calc_maj_val, vote_key="pred", val_key="val")])
                            met[f"maj@{k}/mean"], met[f"maj@{k}/std"] = mm, ms
                vd[var] = met
    agg = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for ds, u2v in res.items():
        for uid, v2m in u2v.items():
            for var, met in v2m.items():
                for name, val in met.items():
                    agg[ds][var][name].append(val)
    final = []
    for ds, v2m in agg.items():
        core = "acc" if "acc" in v2m else "reward"
        for var, m2v in v2m.items():
            nmax = max(int(name.split("@")[-1].split("/")[0]) for name in m2v.keys())
            for name, vals in m2v.items():
                sec = "val-core" if (var == core and any(name.startswith(p) for p in ["mean", "maj", "best"])
                                     and f"@{nmax}" in name) else "val-aux"
                final.append([f"{sec}/{ds}/{var}/{name}", float(np.mean(vals))])
    return final


ds, uids, reward, acc, pred = [], [], [], [], []
for u in range(6):
    for j in range(5):
        ds.append("openai/gsm8k"); uids.append(f"g{u}")
        a = float(rng.random() < 0.5)
        acc.append(a); reward.append(a + rng.choice([0.0, 0.25]))
        pred.append(rng.choice(["1", "2", "3"]))
for u in range(4):
    ds.append("other/src"); uids.append(f"o{u}")
    a = float(rng.random() < 0.5)
    acc.append(a); reward.append(rng.random())
    pred.append("x")
order = list(range(len(ds)))
rng.shuffle(order)                         # samples arrive interleaved
ds = [ds[i] for i in order]; uids = [uids[i] for i in order]
reward = [reward[i] for i in order]; acc = [acc[i] for i in order]; pred = [pred[i] for i in order]
out["val_in"] = {"ds": ds, "uid": uids, "reward": reward, "acc": acc, "pred": pred}
out["val_out"] = process(ds, uids, {"reward": reward, "acc": acc, "pred": pred})
out["val_out_nopred"] = process(ds, uids, {"reward": reward})

# ---- rollout vs actor probabilities
g = torch.Generator().manual_seed(seed)
n = 300
a_lp = -torch.rand(n, generator=g) * 4
r_lp = a_lp + torch.randn(n, generator=g) * 0.1
mask = (torch.rand(n, generator=g) < 0.8).float()
pa, pr = torch.exp(a_lp), torch.exp(r_lp)
M = mask.bool()
d = torch.abs(pa - pr)[M]
out["probs_in"] = {"a": a_lp.tolist(), "r": r_lp.tolist(), "m": mask.tolist()}
out["probs_out"] = [d.max().item(), d.mean().item(), torch.std(d).item(),
                    torch.corrcoef(torch.stack([pa[M], pr[M]]))[0, 1].item()]


# ---- rollout_corr/* (compute_offpolicy_metrics)
def mmean(x, m, axis=None):
    v = torch.where(m.bool(), x, torch.zeros_like(x)) * m
    s = v.sum() if axis is None else v.sum(axis)
    return s / ((m.sum() if axis is None else m.sum(axis)) + 1e-8)


def msum(x, m, axis):
    return (torch.where(m.bool(), x, torch.zeros_like(x)) * m).sum(axis)


B, T = 6, 11
oldl = -torch.rand(B, T, generator=g) * 3
roll = oldl + torch.randn(B, T, generator=g) * 0.2
cm = (torch.arange(T)[None, :] < torch.tensor([11, 3, 7, 1, 11, 5])[:, None]).float()
mo, mr = mmean(oldl, cm, -1), mmean(roll, cm, -1)
lr = oldl - roll
d = mr - mo
rc = [torch.exp(-mo).mean(), (-mo).mean(), mmean(roll - oldl, cm), mmean(torch.exp(lr) - lr - 1, cm),
      torch.exp(-mr).mean(), (-mr).mean(), d.mean(), d.abs().mean(), d.max(), d.min(), torch.exp(d).mean(),
      mmean(torch.exp(torch.clamp(lr, -20, 20)).square(), cm) - 1.0,
      torch.exp(2.0 * torch.clamp(msum(lr, cm, -1), -20, 20)).mean() - 1.0]
out["corr_in"] = {"old": oldl.reshape(-1).tolist(), "roll": roll.reshape(-1).tolist(), "m": cm.reshape(-1).tolist()}
out["corr_out"] = [float(x) for x in rc]

# ---- Karmarkar-Karp (verl semantics), written with heapq
class KSet:
    def __init__(self):
        self.sum, self.items = 0, []

    def add(self, idx, val):
        self.items.append((idx, val)); self.sum += val

    def __lt__(self, o):
        if self.sum != o.sum:
            return self.sum < o.sum
        if len(self.items) != len(o.items):
            return len(self.items) < len(o.items)
        return self.items < o.items


class KState:
    def __init__(self, items, k):
        self.k = k
        self.sets = [KSet() for _ in range(k)]
        for i, (idx, v) in enumerate(items):
            self.sets[i].add(idx, v)
        self.sets = sorted(self.sets, reverse=True)

    def merge(self, o):
        for i in range(self.k):
            for idx, v in o.sets[self.k - 1 - i].items:
                self.sets[i].add(idx, v)
        self.sets = sorted(self.sets, reverse=True)

    def spread(self):
        return self.sets[0].sum - self.sets[-1].sum

    def __lt__(self, o):
        if self.spread() != o.spread():
            return self.spread() > o.spread()
        return self.sets[0] > o.sets[0]


def kk(vals, k, equal):
    s = sorted([(v, i) for i, v in enumerate(vals)])
    pq = []
    if equal:
        for off in range(0, len(s), k):
            heapq.heappush(pq, KState([(s[off + i][1], s[off + i][0]) for i in range(k)], k))
    else:
        for v, i in s:
            heapq.heappush(pq, KState([(i, v)], k))
    while len(pq) > 1:
        a = heapq.heappop(pq); b = heapq.heappop(pq)
        a.merge(b)
        heapq.heappush(pq, a)
    return [[idx for idx, _ in st.items] for st in pq[0].sets]


def workload(L):
    return 24576 * L + L * L


def rearrange(seqlens, max_tok):
    total = sum(seqlens)
    k = min(len(seqlens), -(total // -max_tok))
    w = [workload(L) for L in seqlens]
    parts = [sorted(p) for p in kk(w, k, False)]
    parts.sort(key=lambda p: (sum(w[i] for i in p), p[0] if p else 0), reverse=True)
    return parts[::2][::-1] + parts[1::2]


cases = []
for c in range(40):
    n = rng.randint(1, 60)
    if c % 4 == 0:
        seq = [rng.choice([10, 20, 30]) for _ in range(n)]   # many ties
    else:
        seq = [rng.randint(1, 1500) for _ in range(n)]
    k = rng.randint(1, n)
    ke = rng.choice([x for x in range(1, n + 1) if n % x == 0])
    mt = rng.randint(max(seq), max(seq) * 6)
    cases.append({"seq": seq, "k": k, "ke": ke, "max_tok": mt, "kk": kk(seq, k, False), "kk_eq": kk(seq, ke, True),
                  "kk_w": kk([workload(L) for L in seq], k, False), "micro": rearrange(seq, mt)})
out["balance"] = cases
json.dump(out, open(out_path, "w"))
