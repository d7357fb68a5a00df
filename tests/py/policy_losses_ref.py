#!/usr/bin/python3
"""Independent PyTorch reference for tests/test_policy_losses.c: every policy loss in verl's registry
(shared/spec/verl-ppo.md §2, verl-grpo.md §2/§4), written from the spec with torch autograd for the gradients.
Usage: policy_losses_ref.py OUTDIR SEED. Writes inputs and outputs as raw float64 files OUTDIR/<name>.f64 (inputs
are float32 values, so the C side gets them exactly) and OUTDIR/manifest.txt, one line per check:
  name mode inputs agg isw gbi eps_lo eps_hi c tau_pos tau_neg cc_ratio cc_lb cc_ub kl_ratio kl_coef dro_beta
  rc_is rc_thr rc_loss
Outputs per check: <name>_loss (2: the loss, and the same aggregation of |L|, the scale of its fp32 rounding), <name>_grad (B*T), <name>_met (3: clipfrac, ppo_kl, clipfrac_lower; NaN when
the mode does not report it). clip_cov (random subset) also writes <name>_cand (candidate mask), <name>_k and the
per-token loss contributions <name>_contrib so the C side can check its own subset."""
import math
import os
import sys

import torch

out, seed = sys.argv[1], int(sys.argv[2])
g = torch.Generator().manual_seed(seed)
NAN = float("nan")


def put(name, t):
    t = torch.as_tensor(t).detach().to(torch.float64).contiguous().reshape(-1)
    with open(os.path.join(out, name + ".f64"), "wb") as f:
        f.write(t.numpy().tobytes())


def u(*shape):
    return torch.rand(*shape, generator=g)


def mmean(x, m):
    return (x * m).sum() / (m.sum() + 1e-8)


def agg(L, m, mode, D=1, N=None, G=None, lsf=None):
    L = torch.where(m > 0, L, torch.zeros_like(L))
    if mode == "token-mean":
        N = m.sum() if N is None else N
        return (L * m).sum() / N * D
    if mode == "token-sum":
        return (L * m).sum() * D
    cnt = m.sum(-1)
    has = (cnt > 0).float()
    G = has.sum() if G is None else G
    if mode == "seq-mean-token-mean":
        q = (L * m).sum(-1) / (cnt + 1e-8)
    else:
        q = (L * m).sum(-1)
    loss = (q * has).sum() / G * D
    if mode == "seq-mean-token-sum-norm":
        loss = loss / (m.shape[-1] if lsf is None else lsf)
    return loss


# --- the losses: each returns (per-token loss matrix or a scalar, metrics [clipfrac, ppo_kl, lower]) -------------
def l_vanilla(lp, old, A, m, p):
    d = (lp - old).clamp(-20, 20)
    r = d.exp()
    L1, L2 = -A * r, -A * r.clamp(1 - p["lo"], 1 + p["hi"])
    Lc = torch.maximum(L1, L2)
    L3 = -A * p["c"]
    L = torch.where(A < 0, torch.min(L3, Lc), Lc)
    return L, [mmean((L2 > L1).float(), m), mmean(-d, m), mmean((Lc > L3).float() * (A < 0).float(), m)]


def l_gspo(lp, old, A, m, p):
    d = lp - old
    S = (d * m).sum(-1) / m.sum(-1).clamp(min=1)
    x = (lp - lp.detach() + S.detach().unsqueeze(-1)).clamp(max=10.0)
    s = x.exp()
    L1, L2 = -A * s, -A * s.clamp(1 - p["lo"], 1 + p["hi"])
    return torch.maximum(L1, L2), [mmean((L2 > L1).float(), m), mmean(-d, m), torch.tensor(0.0)]


def l_sapo(lp, old, A, m, p):
    d = (lp - old).clamp(-20, 20)
    r = d.exp()
    tau = torch.where(A > 0, torch.full_like(A, p["tau_pos"]), torch.full_like(A, p["tau_neg"]))
    gate = torch.sigmoid(tau * (r - 1)) * 4 / tau
    return -gate * A, [torch.tensor(0.0), mmean(-d, m), torch.tensor(0.0)]


def l_gpg(lp, old, A, m, p):
    return -lp * A, [NAN, NAN, NAN]


def l_clip_cov(lp, old, A, m, p, drop=None):
    d = lp - old
    r = d.exp()
    L1, L2 = -A * r, -A * r.clamp(1 - p["lo"], 1 + p["hi"])
    cov = (A - mmean(A, m)) * (lp.detach() - mmean(lp.detach(), m))
    cov = torch.where((m == 0) | (L2 > L1), torch.full_like(cov, -math.inf), cov)
    cand = (cov > p["cc_lb"]) & (cov < p["cc_ub"]) & (m > 0)
    k = max(int(p["cc_ratio"] * m.sum().item()), 1)
    if drop is None:   # the caller checks a random subset; here every candidate when they fit in k
        drop = cand.clone() if cand.sum() <= k else None
    corr = torch.ones_like(A) if drop is None else 1.0 - drop.float()
    L = torch.maximum(L1, L2) * corr
    return L, [mmean((corr == 0).float(), m), mmean(-d, m), NAN], cand, k


def l_kl_cov(lp, old, A, m, p):
    d = lp - old
    r = d.exp()
    L = -A * r
    Lkl = -A * r + p["kl_coef"] * d.abs()
    valid = (m > 0).reshape(-1)
    idx = torch.nonzero(valid).reshape(-1)
    a, l = A.reshape(-1)[idx], lp.detach().reshape(-1)[idx]
    sel = torch.zeros(A.numel(), dtype=torch.bool)
    if len(idx) > 0:
        cov = (a - a.mean()) * (l - l.mean())
        k = max(1, int(len(idx) * p["kl_ratio"]))
        # stable order: larger cov first, lower index on ties
        order = sorted(range(len(idx)), key=lambda j: (-cov[j].item(), j))[:k]
        sel[idx[order]] = True
    sel = sel.reshape(A.shape)
    return torch.where(sel, Lkl, L), [NAN, mmean(d.abs(), m), NAN], sel


def l_geo_mean(lp, old, A, m, p, isw=None):
    d = lp - old
    dc = d.clamp(-p["lo"], p["hi"])
    s = torch.sign(A)
    dm = s * torch.min(s * d, s * dc)
    ms = m.sum(-1)
    ratio = torch.exp((dm * m).sum(-1) / (ms + 1e-8))
    Ah = (A * m).sum(-1) / (ms + 1e-8)
    L = -Ah * ratio
    if isw is not None:
        L = L * torch.exp((torch.log(isw + 1e-10) * m).sum(-1) / (ms + 1e-8))
    clipped = (d != dc).float()
    return L, [mmean(clipped * (A > 0).float(), m), mmean(-d, m), mmean(clipped * (A < 0).float(), m)]


def l_dro(lp, old, A, m, p):
    d = lp - old
    return -(lp * A - 0.5 * p["dro_beta"] * d ** 2), [NAN, mmean(-d, m), NAN]


def l_cispo(lp, old, A, m, p):
    d = (lp - old).clamp(-20, 20)
    r = d.exp()
    rc = r.clamp(1 - p["lo"], 1 + p["hi"])
    return -rc.detach() * A * lp, [mmean((r != rc).float(), m), mmean(-d, m), torch.tensor(0.0)]


def l_dppo(lp, old, A, m, p, kl):
    d = (lp - old).clamp(-20, 20)
    r = d.exp()
    w = torch.clamp(r, max=p["c"]).detach()
    pr, po = lp.detach().exp(), old.exp()
    if not kl:
        valid = torch.where(A > 0, pr - po <= p["hi"], pr - po >= -p["lo"])
    else:
        bkl = po * (old - lp.detach()) + (1 - po) * torch.log((1 - po + 1e-8) / (1 - pr + 1e-8))
        valid = torch.where(A > 0, (bkl <= p["hi"]) | (pr <= po), (bkl <= p["lo"]) | (pr >= po))
    v = valid.float()
    return -A * w * lp * v, [mmean(1 - v, m), mmean(-d, m), mmean((r > p["c"]).float() * v, m)]


def l_bypass(lp, old, A, m, p):
    if p["rc_loss"] == 0:
        return l_vanilla(lp, old, A, m, p)
    delta = (lp - old).detach()
    if p["rc_is"] == 1:
        w = torch.clamp(delta.clamp(-20, 20).exp(), max=p["rc_thr"])
    elif p["rc_is"] == 2:
        w = torch.clamp(((delta * m).sum(-1, keepdim=True)).clamp(-20, 20).exp(), max=p["rc_thr"]).expand_as(lp)
    else:
        w = torch.ones_like(lp)
    return -A * lp * w, [NAN, mmean(old - lp, m), NAN]


FORCED = {"gspo": "seq-mean-token-mean", "sapo": "seq-mean-token-mean"}


def run(name, mode, inp, aggm, isw_on, gbi_i, p):
    lp0, old, A, m, isw = inp["lp"], inp["old"], inp["adv"], inp["mask"], inp["isw"]
    B, T = lp0.shape
    lp = lp0.clone().requires_grad_(True)
    gbis = [dict(), dict(D=2, N=float(m.sum()) * 1.7, G=2.0 * B, lsf=None), dict(D=1, N=None, G=None, lsf=37.0)]
    gb = gbis[gbi_i]
    w = isw if isw_on else None
    extra = {}
    if mode == "geo_mean":
        Lrow, met = l_geo_mean(lp, old, A, m, p, w)
        loss = Lrow.mean()   # torch.mean over every row of the micro-batch
        scale = Lrow.detach().abs().mean()
    else:
        if mode == "clip_cov":
            L, met, cand, k = l_clip_cov(lp, old, A, m, p)
            extra["cand"], extra["k"] = cand.float(), torch.tensor([float(k)])
        elif mode == "kl_cov":
            L, met, sel = l_kl_cov(lp, old, A, m, p)
            extra["sel"] = sel.float()
        elif mode in ("dppo_tv", "dppo_kl"):
            L, met = l_dppo(lp, old, A, m, p, mode == "dppo_kl")
        else:
            L, met = {"vanilla": l_vanilla, "gspo": l_gspo, "sapo": l_sapo, "gpg": l_gpg, "dro": l_dro,
                      "cispo": l_cispo, "bypass_mode": l_bypass}[mode](lp, old, A, m, p)
        if w is not None and mode != "bypass_mode":
            L = L * w
        loss = agg(L, m, FORCED.get(mode, aggm), **gb)
        scale = agg(L.detach().abs(), m, FORCED.get(mode, aggm), **gb)
        if mode == "clip_cov":   # per-token contributions, for the C side's own random subset
            Lfull, _, _, _ = l_clip_cov(lp.detach(), old, A, m, dict(p, cc_ratio=1.0, cc_lb=1e30, cc_ub=1e30))
            if w is not None:
                Lfull = Lfull * w
            contrib = torch.zeros(B * T)
            for j in range(B * T):
                e = torch.zeros(B * T)
                e[j] = 1
                contrib[j] = agg(Lfull * e.reshape(B, T), m, aggm, **gb)
            extra["contrib"] = contrib
            lpf = lp0.clone().requires_grad_(True)
            Lf, _, _, _ = l_clip_cov(lpf, old, A, m, dict(p, cc_ratio=1.0, cc_lb=1e30, cc_ub=1e30))
            agg(Lf * (w if w is not None else 1.0), m, aggm, **gb).backward()
            extra["gradfull"] = lpf.grad
    loss.backward()
    put(name + "_loss", torch.tensor([loss.item(), scale.item()]))
    put(name + "_grad", lp.grad)
    put(name + "_met", torch.tensor([float(x) for x in met]))
    for k_, v in extra.items():
        put(name + "_" + k_, v)


def make_inputs(kind, B=6, T=20):
    lens = [T, 13, 0, 7, T - 1, 1][:B]
    m = torch.zeros(B, T)
    for b, n in enumerate(lens):
        m[b, :n] = 1
    lp = -3 * u(B, T) - 0.01
    if kind == "onpolicy":
        old = lp.clone()
    else:
        old = lp + 0.6 * (u(B, T) - 0.5)
    A = torch.randn(B, T, generator=g)
    if kind == "flat":   # GRPO groups whose rewards are all equal: zero advantage on whole rows
        A[0] = 0
        A[3] = 0
    if kind == "rowadv":   # one advantage per sequence, as outcome estimators give
        A = torch.randn(B, 1, generator=g).expand(B, T).clone()
    if kind == "extreme":   # log-ratios past the +-20 clamp and the gspo cap of 10, ties on the clip bounds
        old[0, :5] = lp[0, :5] - 25.0
        lp[0, 5:10] = old[0, 5:10] - 25.0
        old[1, :] = lp[1, :] - 12.0
        old[4, 0] = lp[4, 0] - math.log1p(0.2)
    isw = 0.5 + u(B, T)
    # masked positions get junk that must not leak into anything
    lp = torch.where(m > 0, lp, torch.full_like(lp, -7.5))
    return dict(lp=lp.float(), old=old.float(), adv=A.float(), mask=m, isw=isw.float())


base = dict(lo=0.2, hi=0.28, c=3.0, tau_pos=1.0, tau_neg=1.05, cc_ratio=2e-4, cc_lb=1.0, cc_ub=5.0, kl_ratio=2e-4,
            kl_coef=0.1, dro_beta=0.05, rc_is=0, rc_thr=2.0, rc_loss=0)
per_mode = {
    "vanilla": [{}], "gspo": [dict(lo=3e-4, hi=4e-4), {}], "sapo": [{}, dict(tau_pos=2.0, tau_neg=0.5)],
    "gpg": [{}], "clip_cov": [dict(cc_ratio=0.5, cc_lb=0.05, cc_ub=5.0), dict(cc_ratio=2e-4, cc_lb=-0.5, cc_ub=0.5)],
    "kl_cov": [{}, dict(kl_ratio=0.2, kl_coef=1.0)], "geo_mean": [dict(lo=0.1, hi=0.15), dict(lo=0.4, hi=0.4)],
    "dro": [{}], "cispo": [dict(lo=10.0, hi=0.2), {}], "dppo_tv": [dict(lo=0.15, hi=0.15, c=10000.0), dict(lo=0.05, hi=0.1)],
    "dppo_kl": [dict(lo=0.05, hi=0.05), dict(lo=0.02, hi=0.08, c=1.5)],
    "bypass_mode": [{}, dict(rc_loss=1), dict(rc_loss=1, rc_is=1, rc_thr=1.1), dict(rc_loss=1, rc_is=2, rc_thr=2.0)],
}
kinds = ["rand", "onpolicy", "flat", "rowadv", "extreme"]
inputs = {k: make_inputs(k) for k in kinds}
for k, inp in inputs.items():
    for f, v in inp.items():
        put(k + "_" + f, v)
aggs = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm", "token-sum", "seq-mean-token-sum"]
lines = []
n = 0
for mode, plist in per_mode.items():
    for pi, over in enumerate(plist):
        p = dict(base, **over)
        for ki, kind in enumerate(kinds):
            for ai, aggm in enumerate(aggs):
                if ai >= 3 and ki != 0:
                    continue   # the rarer aggregations on one input set
                for isw_on in (0, 1):
                    if mode == "bypass_mode" and isw_on:
                        continue
                    gbi_i = (ki + ai + isw_on) % 3
                    if aggm == "token-mean" and gbi_i == 2:
                        gbi_i = 0
                    name = "c%d" % n
                    n += 1
                    run(name, mode, inputs[kind], aggm, isw_on, gbi_i, p)
                    vals = [p[x] for x in ("lo", "hi", "c", "tau_pos", "tau_neg", "cc_ratio", "cc_lb", "cc_ub",
                                           "kl_ratio", "kl_coef", "dro_beta", "rc_is", "rc_thr", "rc_loss")]
                    lines.append(" ".join([name, mode, kind, aggm, str(isw_on), str(gbi_i)] + [repr(float(v)) for v in vals]))
with open(os.path.join(out, "manifest.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")
