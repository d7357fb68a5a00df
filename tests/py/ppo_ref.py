#!/usr/bin/python3
"""Independent PyTorch reference for tests/test_ppo.c: verl's GAE + masked whitening, the clipped value loss with
torch autograd for its gradient, and the critic's value head on the Qwen3 decoder (tests/py/qwen3_ref.py), written
from the spec (shared/spec/verl-ppo.md §1.3-1.5).

    ppo_ref.py OUTDIR SEED        the math cases: inputs and outputs as raw float64 files OUTDIR/<name>.f64
                                  (inputs are float32 values, so the C side gets them exactly)
    ppo_ref.py critic CASE_DIR    CASE_DIR/{config.json, model.safetensors, tokens.f64, cu.f64, wb.f64, dv.f64} ->
                                  values.f64 (T), the gradients of sum(dv * values) w.r.t. the head (wb_grad.f64)
                                  and every decoder tensor (grad.<name>.f64)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def put(d, name, t):
    t = torch.as_tensor(t).detach().to(torch.float64).contiguous().reshape(-1)
    with open(os.path.join(d, name + ".f64"), "wb") as f:
        f.write(t.numpy().tobytes())


def get(d, name):
    import numpy as np
    return torch.from_numpy(np.fromfile(os.path.join(d, name + ".f64"), dtype=np.float64).copy())


def masked_sum(x, m):
    return (torch.where(m.bool(), x, torch.zeros_like(x)) * m).sum()


def masked_mean(x, m):
    return masked_sum(x, m) / (m.sum() + 1e-8)


def masked_whiten(x, m):
    mu = masked_mean(x, m)
    var = masked_mean((x - mu) ** 2, m)
    n = m.sum()
    assert n > 1
    var = var * (n / (n - 1))
    return (x - mu) * torch.rsqrt(var + 1e-8)


def gae(r, V, m, gamma, lam):
    """verl core_algos.compute_gae_advantage_return, float32."""
    B, T = r.shape
    nextvalues = torch.zeros(B)
    lastgaelam = torch.zeros(B)
    out = []
    for t in reversed(range(T)):
        delta = r[:, t] + gamma * nextvalues - V[:, t]
        lastgaelam_ = delta + gamma * lam * lastgaelam
        nextvalues = V[:, t] * m[:, t] + (1 - m[:, t]) * nextvalues
        lastgaelam = lastgaelam_ * m[:, t] + (1 - m[:, t]) * lastgaelam
        out.append(lastgaelam)
    adv = torch.stack(out[::-1], dim=1)
    ret = adv + V
    return masked_whiten(adv, m), ret


def agg_loss(L, m, mode, D=1, N=None, G=None):
    if mode == "token-mean":
        if N is None:
            N = m.sum()
        return masked_sum(L, m) / N * D
    if mode == "token-sum":
        return masked_sum(L, m) * D
    if mode == "seq-mean-token-sum":
        q = torch.sum(L * m, dim=-1)
        sm = (torch.sum(m, dim=-1) > 0).float()
        return masked_sum(q, sm) / (sm.sum() if G is None else G) * D
    if mode == "seq-mean-token-mean":
        c = torch.sum(m, dim=-1)
        q = torch.sum(L * m, dim=-1) / (c + 1e-8)
        sm = (c > 0).float()
        return masked_sum(q, sm) / (sm.sum() if G is None else G) * D
    raise ValueError(mode)


def value_loss(v, V_old, R, m, c, mode, **gbi):
    """verl compute_value_loss; clip_by_value = max(min(x, hi), lo)."""
    vclip = torch.max(torch.min(v, V_old + c), V_old - c)
    l1 = (v - R) ** 2
    l2 = (vclip - R) ** 2
    L = torch.max(l1, l2)
    return 0.5 * agg_loss(L, m, mode, **gbi), masked_mean(torch.gt(l2, l1).float(), m), masked_mean(v, m)


def math_cases(out, seed):
    torch.manual_seed(seed)
    B, T = 6, 11
    lens = torch.tensor([11, 7, 1, 4, 9, 2])
    m = (torch.arange(T)[None, :] < lens[:, None]).float()
    m[4, 3] = 0.0   # a hole: GAE passes values through mask-0 positions
    r = torch.zeros(B, T)
    for b in range(B):
        r[b, lens[b] - 1] = torch.randn(()).item()
    r += 0.1 * torch.randn(B, T) * m   # in-reward KL makes every token carry a reward
    V = torch.randn(B, T)
    put(out, "gae_r", r); put(out, "gae_V", V); put(out, "gae_m", m)
    for tag, gamma, lam in (("11", 1.0, 1.0), ("99", 0.99, 0.95)):
        a, ret = gae(r, V, m, gamma, lam)
        put(out, "gae_adv_" + tag, a); put(out, "gae_ret_" + tag, ret)
    # value loss: v near V_old (clipping on both sides, exact bounds, ties where v == V_old)
    c = 0.5
    V_old = torch.randn(B, T)
    R = torch.randn(B, T)
    v = V_old + 1.2 * torch.randn(B, T)
    v[0, :3] = V_old[0, :3]              # tie l1 == l2
    v[1, 0] = V_old[1, 0] + c            # exactly at the upper bound
    v[1, 1] = V_old[1, 1] - c            # exactly at the lower bound
    put(out, "vl_v", v); put(out, "vl_Vold", V_old); put(out, "vl_R", R); put(out, "vl_m", m)
    cases = [("tm", "token-mean", {}), ("tmg", "token-mean", {"D": 2, "N": 57.0}), ("ts", "token-sum", {}),
             ("smts", "seq-mean-token-sum", {"G": 8.0}), ("smtm", "seq-mean-token-mean", {})]
    for tag, mode, gbi in cases:
        vv = v.clone().requires_grad_(True)
        loss, cf, vm = value_loss(vv, V_old, R, m, c, mode, **gbi)
        loss.backward()
        put(out, "vl_%s_out" % tag, torch.stack([loss.detach(), cf, vm.detach()]))
        put(out, "vl_%s_dv" % tag, vv.grad)
    # the value head alone
    Tn, H = 13, 24
    h = torch.randn(Tn, H)
    wb = torch.randn(H + 1) * 0.3
    dv = torch.randn(Tn)
    hh = h.clone().requires_grad_(True)
    ww = wb.clone().requires_grad_(True)
    val = hh @ ww[:H] + ww[H]
    (val * dv).sum().backward()
    put(out, "vh_h", h); put(out, "vh_wb", wb); put(out, "vh_dv", dv)
    put(out, "vh_val", val); put(out, "vh_dh", hh.grad); put(out, "vh_dwb", ww.grad)


def critic_case(d):
    import qwen3_ref as Q
    cfg = Q.load_config(os.path.join(d, "config.json"))
    sd = Q.load_model_dir(d)
    model = Q.Qwen3(cfg, dtype=torch.float64)
    model.load_hf({k: v.to(torch.float64) for k, v in sd.items()})
    tokens = get(d, "tokens").long()
    cu = get(d, "cu").long()
    wb = get(d, "wb").requires_grad_(True)
    dv = get(d, "dv")
    H = cfg["hidden_size"]
    _, hidden = model(tokens, cu)
    values = hidden @ wb[:H] + wb[H]
    (values * dv).sum().backward()
    put(d, "values", values)
    put(d, "wb_grad", wb.grad)
    for name, p in model.named_parameters():
        if p.grad is not None:
            put(d, "grad." + name, p.grad)


if __name__ == "__main__":
    if sys.argv[1] == "critic":
        critic_case(sys.argv[2])
    else:
        math_cases(sys.argv[1], int(sys.argv[2]))
