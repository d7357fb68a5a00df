#!/usr/bin/env python3
"""Independent reference of verl's rollout correction (trainer/ppo/rollout_corr_helper.py; spec verl-ppo.md §5) in
torch float32, for tests/test_rollout_corr.c: IS weights (token / sequence, TIS cap or IcePop band, batch
normalisation), the rejection mask of the rollout_rs options and every rollout_is_* / rollout_rs_* metric; and what
bypass_mode's actor reports (those plus the off-policy metrics per micro-batch, averaged as verl's actor does).

usage: rollout_corr_ref.py OUT_DIR SEED
Writes OUT_DIR/{train,rollout,mask}.f64 (B, T) inputs, and OUT_DIR/cases.json: per case its config and the
expected weights / mask (as lists) and metrics; under "bypass" per config the expected micro-batch means."""
import json
import math
import sys

import torch

SAFETY = 20.0
OPTS = ["token_k1", "token_k2", "token_k3", "seq_sum_k1", "seq_sum_k2", "seq_sum_k3", "seq_mean_k1", "seq_mean_k2",
        "seq_mean_k3", "seq_max_k2", "seq_max_k3"]


def mmean(x, m, axis=None):
    if axis is None:
        return (x * m).sum() / (m.sum() + 1e-8)
    return (x * m).sum(axis) / (m.sum(axis) + 1e-8)


def cstd(c, m):
    """sqrt(E[c^2] - E[c]^2) over the mask, in float64: in float32 (verl) the difference is rounding noise when the
    values barely vary."""
    c, m = c.double(), m.double()
    mu = mmean(c, m)
    return torch.sqrt(torch.clamp(mmean(c.square(), m) - mu.square(), min=0.0)).item()


def msum(x, m, axis):
    return (x * m).sum(axis)


def is_weights(lr, mask, level, thr, normalize):
    if "_" in thr:
        lo, hi = (float(v) for v in thr.split("_", 1))
        icepop = True
    else:
        hi, lo, icepop = float(thr), None, False
    if level == "token":
        lrm = lr
        raw = torch.exp(torch.clamp(lr, -SAFETY, SAFETY))
    else:
        lrm = msum(lr, mask, -1).unsqueeze(-1)
        raw = torch.exp(torch.clamp(lrm, -SAFETY, SAFETY)).expand_as(lr)
    raw = raw * mask
    if icepop:
        w = torch.where((raw >= lo) & (raw <= hi), raw, torch.zeros_like(raw))
    else:
        w = raw.clamp(max=hi)
    lo_m = lo if icepop else 1.0 / hi
    met = {}
    if level == "sequence":
        met["rollout_is_max"] = torch.exp(torch.clamp(lrm.max(), max=SAFETY)).item()
        met["rollout_is_min"] = torch.exp(lrm.min()).item()
        met["rollout_is_mean"] = mmean(w, mask).item()
        met["rollout_is_ratio_fraction_high"] = (lrm > torch.log(torch.tensor(hi))).float().mean().item()
        met["rollout_is_ratio_fraction_low"] = (lrm < torch.log(torch.tensor(lo_m))).float().mean().item()
    else:
        met["rollout_is_mean"] = mmean(w, mask).item()
        met["rollout_is_ratio_fraction_high"] = mmean((raw > hi).float(), mask).item()
        met["rollout_is_ratio_fraction_low"] = mmean((raw < lo_m).float(), mask).item()
        mb = mask.bool()
        met["rollout_is_max"] = w.masked_fill(~mb, float("-inf")).max().item()
        met["rollout_is_min"] = w.masked_fill(~mb, float("inf")).min().item()
    wc = w.clamp(min=0.0, max=hi)
    if mask.sum() > 1:
        met["rollout_is_std"] = cstd(wc, mask)
    else:
        met["rollout_is_std"] = 0.0
    met["rollout_is_eff_sample_size"] = 1.0 / mmean((wc / (mmean(wc, mask) + 1e-8)).square(), mask).item()
    s = mmean(w, mask, -1)
    met["rollout_is_seq_mean"] = s.mean().item()
    met["rollout_is_seq_std"] = s.std().item() if s.numel() > 1 else 0.0
    met["rollout_is_seq_max"] = s.max().item()
    met["rollout_is_seq_min"] = s.min().item()
    met["rollout_is_seq_max_deviation"] = (s - 1.0).abs().max().item()
    rs = mmean(raw, mask, -1)
    met["rollout_is_seq_fraction_high"] = (rs > hi).float().mean().item()
    met["rollout_is_seq_fraction_low"] = (rs < lo_m).float().mean().item()
    if icepop:
        met["rollout_is_oob_ratio"] = mmean(((raw < lo) | (raw > hi)).float(), mask).item()
    if normalize:
        if level == "token":
            mean = mmean(w, mask)
        else:
            sw = mmean(w, mask, -1)
            sm = (mask.sum(-1) > 0).float()
            mean = (sw * sm).sum() / sm.sum().clamp_min(1e-8)
        if mean > 1e-8:
            w = w / mean
            met["rollout_is_batch_norm_factor"] = mean.item()
        else:
            met["rollout_is_batch_norm_factor"] = 1.0
    return w, met


def rs_mask(lr, mask, rs, thr):
    opts = []
    for o in rs.split(","):
        o = o.strip()
        if o and o not in opts:
            opts.append(o)
    specs = [p.strip() for p in thr.split(",") if p.strip()]
    if len(specs) == 1:
        specs = specs * len(opts)
    d = torch.clamp(lr, -SAFETY, SAFETY)
    est = {1: -d, 2: 0.5 * d ** 2, 3: torch.exp(d) - 1.0 - d}
    mb = mask.bool()
    valid = mask.sum(-1) > 0
    comb = torch.ones_like(mask)
    met = {}
    for o, sp in zip(opts, specs):
        k = int(o[-1])
        k1 = k == 1
        if k1:
            lo_s, hi_s = sp.split("_", 1) if "_" in sp else (str(1.0 / float(sp)), sp)
            lo, hi = math.log(float(lo_s)), math.log(float(hi_s))
        else:
            lo, hi = 0.0, float(sp)
        t = est[k]
        if o.startswith("token"):
            stat, seq, level = t, None, "token"
        else:
            if o.startswith("seq_sum"):
                seq = msum(t, mask, -1)
            elif o.startswith("seq_mean"):
                seq = mmean(t, mask, -1)
            else:
                mx = t.masked_fill(~mb, float("-inf")).max(-1).values
                seq = torch.where(mx == float("-inf"), torch.zeros_like(mx), mx)
            stat, level = seq.unsqueeze(-1).expand_as(mask), "sequence"
        keep = ((stat >= lo) & (stat <= hi)) if k1 else (stat <= hi)
        keepf = keep.float()
        comb = comb * keepf
        p = "rollout_rs_" + o
        sv = seq if seq is not None else mmean(stat, mask, -1)
        svv = sv[valid]
        met[p + "_mean"] = mmean(stat, mask).item()
        if level == "sequence" and svv.numel() > 0:
            met[p + "_max"], met[p + "_min"] = svv.max().item(), svv.min().item()
            met[p + "_fraction_high"] = (svv > hi).float().mean().item()
            met[p + "_fraction_low"] = (svv < lo).float().mean().item() if k1 else 0.0
        else:
            met[p + "_max"] = stat.masked_fill(~mb, float("-inf")).max().item()
            met[p + "_min"] = stat.masked_fill(~mb, float("inf")).min().item()
            met[p + "_fraction_high"] = mmean((stat > hi).float(), mask).item()
            met[p + "_fraction_low"] = mmean((stat < lo).float(), mask).item() if k1 else 0.0
        if mask.sum() > 1:
            met[p + "_std"] = cstd(stat.clamp(min=lo if k1 else 0.0, max=hi), mask)
        else:
            met[p + "_std"] = 0.0
        if svv.numel() > 0:
            met[p + "_seq_mean"] = svv.mean().item()
            met[p + "_seq_std"] = svv.std().item() if svv.numel() > 1 else 0.0
            met[p + "_seq_max"], met[p + "_seq_min"] = svv.max().item(), svv.min().item()
            met[p + "_seq_max_deviation"] = svv.abs().max().item()
            met[p + "_seq_fraction_high"] = (svv > hi).float().mean().item()
            if k1:
                met[p + "_seq_fraction_low"] = (svv < lo).float().mean().item()
        met[p + "_masked_fraction"] = mmean(1 - keepf, mask).item()
        seq_keep = (~((~keep) & mb)).all(-1).float()
        vf = valid.float()
        met[p + "_seq_masked_fraction"] = (((1 - seq_keep) * vf).sum() / vf.sum()).item() if vf.sum() > 0 else 0.0
    met["rollout_rs_masked_fraction"] = mmean(1 - comb, mask).item()
    fk = (comb > 0.5) & mb
    met["rollout_rs_seq_masked_fraction"] = ((~fk) & mb).any(-1).float().mean().item()
    return mask * comb, met


def offpolicy(train, rollout, mask):
    """compute_offpolicy_metrics (training vs rollout log-probs), in float64 on the float32 inputs: rlc reduces in
    double, and kl / k3_kl / chi2 are small differences that float32 sums would blur."""
    train, rollout, mask = train.double(), rollout.double(), mask.double()
    met = {}
    mt = mmean(train, mask, -1)
    met["training_ppl"] = torch.exp(-mt).mean().item()
    met["training_log_ppl"] = (-mt).mean().item()
    met["kl"] = mmean(rollout - train, mask).item()
    lr = train - rollout
    met["k3_kl"] = mmean(torch.exp(lr) - lr - 1, mask).item()
    mr = mmean(rollout, mask, -1)
    met["rollout_ppl"] = torch.exp(-mr).mean().item()
    met["rollout_log_ppl"] = (-mr).mean().item()
    d = mr - mt
    met["log_ppl_diff"] = d.mean().item()
    met["log_ppl_abs_diff"] = d.abs().mean().item()
    met["log_ppl_diff_max"] = d.max().item()
    met["log_ppl_diff_min"] = d.min().item()
    met["ppl_ratio"] = torch.exp(d).mean().item()
    rho = torch.exp(torch.clamp(lr, -SAFETY, SAFETY))
    met["chi2_token"] = (mmean(rho.square(), mask) - 1.0).item()
    ls = msum(lr, mask, -1)
    met["chi2_seq"] = (torch.exp(2.0 * torch.clamp(ls, -SAFETY, SAFETY)).mean() - 1.0).item()
    return met


def case_metrics(c, train, rollout, mask):
    """The IS / rejection weights, mask and metrics of config c between train and rollout log-probs."""
    lr = train - rollout
    r = {"cfg": c, "metrics": {}}
    if c.get("is"):
        w, met = is_weights(lr, mask, c["is"], c["is_thr"], c.get("norm", 0))
        r["w"] = w.reshape(-1).tolist()
        r["metrics"].update(met)
    if c.get("rs"):
        m2, met = rs_mask(lr, mask, c["rs"], c["rs_thr"])
        r["mask"] = m2.reshape(-1).tolist()
        r["metrics"].update(met)
    return r


# bypass_mode's loss reports, per micro-batch, the IS / rejection metrics and the off-policy metrics between the
# current and the rollout log-probs; the actor averages them (Metric(MEAN)) over each mini-batch's micro-batches,
# then over mini-batches. The rows are cut into these mini-batches of micro-batches (row ranges).
BYPASS_MINI = [[(0, 4), (4, 8)], [(8, 10), (10, 12)]]
BYPASS_CASES = [
    {},
    {"is": "sequence", "is_thr": "2.0"},
    {"is": "token", "is_thr": "0.5_2.0", "norm": 1, "rs": "token_k1,seq_mean_k3", "rs_thr": "2,0.01"},
]


def bypass_case(c, train, rollout, mask):
    sums, n_mini = {}, 0
    for mini in BYPASS_MINI:
        acc = {}
        for lo, hi in mini:
            r = case_metrics(c, train[lo:hi], rollout[lo:hi], mask[lo:hi])
            met = dict(r["metrics"])
            met.update(offpolicy(train[lo:hi], rollout[lo:hi], mask[lo:hi]))
            for k, v in met.items():
                acc[k] = acc.get(k, 0.0) + v / len(mini)
        for k, v in acc.items():
            sums[k] = sums.get(k, 0.0) + v
        n_mini += 1
    return {"cfg": c, "mini": BYPASS_MINI, "metrics": {k: v / n_mini for k, v in sums.items()}}


CASES = [
    {"is": "token", "is_thr": "2.0"},
    {"is": "sequence", "is_thr": "2.0", "norm": 1},
    {"is": "token", "is_thr": "0.5_2.0", "norm": 1},
    {"is": "sequence", "is_thr": "0.2_5"},
    {"rs": "token_k1", "rs_thr": "0.8_1.25"},
    {"rs": "token_k2,token_k3", "rs_thr": "0.02"},
    {"rs": "seq_sum_k1,seq_sum_k2,seq_sum_k3", "rs_thr": "0.5_2,0.3,0.3"},
    {"rs": "seq_mean_k1,seq_mean_k2,seq_mean_k3", "rs_thr": "0.95_1.05,0.002,0.002"},
    {"rs": "seq_max_k2, seq_max_k3", "rs_thr": "0.05"},
    {"is": "token", "is_thr": "2", "rs": "token_k1,seq_mean_k3,token_k1", "rs_thr": "2,0.01"},
    {"rs": "seq_mean_k1", "rs_thr": "1.02"},
]


def main():
    out, seed = sys.argv[1], int(sys.argv[2])
    g = torch.Generator().manual_seed(seed)
    B, T = 12, 40
    rollout = -torch.rand(B, T, generator=g) * 3.0
    noise = torch.randn(B, T, generator=g) * 0.15
    spikes = (torch.rand(B, T, generator=g) < 0.03).float() * (torch.randn(B, T, generator=g) * 3.0)
    train = (rollout + noise + spikes).float()
    lens = torch.randint(1, T + 1, (B,), generator=g)
    lens[3] = 0   # a row with no response token
    lens[5] = T
    mask = (torch.arange(T).unsqueeze(0) < lens.unsqueeze(1)).float()
    # padding as the trainer lays it out: 0 log-probs
    train, rollout = train * mask, rollout * mask
    for name, x in (("train", train), ("rollout", rollout), ("mask", mask)):
        x.double().numpy().tofile(f"{out}/{name}.f64")
    res = [case_metrics(c, train, rollout, mask) for c in CASES]
    byp = [bypass_case(c, train, rollout, mask) for c in BYPASS_CASES]
    with open(f"{out}/cases.json", "w") as f:
        json.dump({"B": B, "T": T, "cases": res, "bypass": byp}, f)


if __name__ == "__main__":
    main()
