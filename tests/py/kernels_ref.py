#!/usr/bin/python3
"""PyTorch reference for tests/test_kernels.c (Debian python3-torch, CPU, float32).

Usage: kernels_ref.py DIR. DIR/cases.txt has one case a line: `NAME OP key=value ...`. Inputs are raw
little-endian arrays DIR/NAME.TENSOR.f32 (float32) or .i32 (int32); shapes come from the keys. Outputs
(forward values and autograd gradients of loss = sum(dout * out)) are written as DIR/NAME.out.TENSOR.f32.
"""
import os
import sys

import numpy as np
import torch

torch.set_num_threads(1)
D = sys.argv[1]


def load(name, t, shape, dtype=np.float32):
    ext = "f32" if dtype == np.float32 else "i32"
    a = np.fromfile(os.path.join(D, f"{name}.{t}.{ext}"), dtype=dtype)
    return torch.from_numpy(a.reshape(shape).copy())


def save(name, t, x):
    x.detach().contiguous().to(torch.float32).numpy().tofile(os.path.join(D, f"{name}.out.{t}.f32"))


def grad_leaf(x):
    return x.clone().requires_grad_(True)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def run(name, op, kv):
    i = lambda k: int(kv[k])
    f = lambda k: float(kv[k])
    if op == "matmul":
        T, C, OC = i("T"), i("C"), i("OC")
        x, w = grad_leaf(load(name, "inp", (T, C))), grad_leaf(load(name, "w", (OC, C)))
        out = torch.nn.functional.linear(x, w)
        (out * load(name, "dout", (T, OC))).sum().backward()
        save(name, "out", out); save(name, "dinp", x.grad); save(name, "dw", w.grad)
    elif op == "rmsnorm":  # Qwen3RMSNorm in float32
        R, C, eps = i("rows"), i("C"), f("eps")
        x, w = grad_leaf(load(name, "inp", (R, C))), grad_leaf(load(name, "w", (C,)))
        var = x.pow(2).mean(-1, keepdim=True)
        out = w * (x * torch.rsqrt(var + eps))
        (out * load(name, "dout", (R, C))).sum().backward()
        save(name, "out", out); save(name, "dinp", x.grad); save(name, "dw", w.grad)
    elif op == "rope":  # Qwen3RotaryEmbedding (default rope) + apply_rotary_pos_emb, on (T, nh, D)
        T, nh, Dh, theta, maxp = i("T"), i("nh"), i("D"), f("theta"), i("max_pos")
        inv_freq = 1.0 / (theta ** (torch.arange(0, Dh, 2, dtype=torch.int64).float() / Dh))
        allpos = torch.arange(maxp, dtype=torch.int64)
        freqs = (inv_freq[:, None].float() @ allpos[None, :].float()).t()  # (max_pos, D/2), K=1 matmul
        save(name, "inv_freq", inv_freq); save(name, "cos", freqs.cos()); save(name, "sin", freqs.sin())
        pos = load(name, "pos", (T,), np.int32).long()
        fr = (inv_freq[None, :, None].float() @ pos[None, None, :].float()).transpose(1, 2)[0]  # (T, D/2)
        emb = torch.cat((fr, fr), dim=-1)
        cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
        x = grad_leaf(load(name, "x", (T, nh, Dh)))
        out = x * cos + rotate_half(x) * sin
        (out * load(name, "dout", (T, nh, Dh))).sum().backward()
        save(name, "out", out); save(name, "dx", x.grad)
    elif op == "rmsnorm1p":  # Gemma3RMSNorm: float32 x_hat * (1 + w)
        R, C, eps = i("rows"), i("C"), f("eps")
        x, w = grad_leaf(load(name, "inp", (R, C))), grad_leaf(load(name, "w", (C,)))
        out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)) * (1.0 + w.float())
        (out * load(name, "dout", (R, C))).sum().backward()
        save(name, "out", out); save(name, "dinp", x.grad); save(name, "dw", w.grad)
    elif op == "geglu":  # Gemma's MLP activation: gelu_pytorch_tanh(gate) * up
        n = i("n")
        g, u = grad_leaf(load(name, "gate", (n,))), grad_leaf(load(name, "up", (n,)))
        out = torch.nn.functional.gelu(g, approximate="tanh") * u
        (out * load(name, "dout", (n,))).sum().backward()
        save(name, "out", out); save(name, "dgate", g.grad); save(name, "dup", u.grad)
    elif op == "bias":  # nn.Linear's bias: out = x + b over rows
        T, OC = i("T"), i("OC")
        b = grad_leaf(load(name, "b", (OC,)))
        out = load(name, "x", (T, OC)) + b
        (out * load(name, "dout", (T, OC))).sum().backward()
        save(name, "out", out); save(name, "db", b.grad)
    elif op == "swiglu":
        n = i("n")
        g, u = grad_leaf(load(name, "gate", (n,))), grad_leaf(load(name, "up", (n,)))
        out = torch.nn.functional.silu(g) * u
        (out * load(name, "dout", (n,))).sum().backward()
        save(name, "out", out); save(name, "dgate", g.grad); save(name, "dup", u.grad)
    elif op == "embedding":
        T, V, H = i("T"), i("V"), i("H")
        tok = load(name, "tokens", (T,), np.int32).long()
        wte = grad_leaf(load(name, "wte", (V, H)))
        out = torch.nn.functional.embedding(tok, wte)
        (out * load(name, "dout", (T, H))).sum().backward()
        save(name, "out", out); save(name, "dwte", wte.grad)
    elif op == "head":  # verl: logits.div_(temperature); log_softmax gather; entropy_from_logits
        T, H, V, temp, ent = i("T"), i("H"), i("V"), f("temperature"), i("entropy")
        h, w = grad_leaf(load(name, "hidden", (T, H))), grad_leaf(load(name, "w", (V, H)))
        tg = load(name, "targets", (T,), np.int32).long()
        logits = h @ w.t()
        cap = float(kv.get("softcap", 0))
        if cap > 0:  # final-logit soft-capping (Gemma 2 style), before the temperature
            logits = cap * torch.tanh(logits / cap)
        logits = logits / temp
        lse = torch.logsumexp(logits, dim=-1)
        lp = torch.log_softmax(logits, dim=-1).gather(-1, tg.clamp(min=0)[:, None])[:, 0]
        lp = torch.where(tg >= 0, lp, torch.zeros_like(lp))
        pd = torch.softmax(logits, dim=-1)
        entropy = lse - (pd * logits).sum(-1)
        loss = (lp * load(name, "dlogp", (T,))).sum()
        if ent:
            loss = loss + (entropy * load(name, "dentropy", (T,))).sum()
        loss.backward()
        save(name, "logp", lp); save(name, "entropy", entropy); save(name, "lse", lse)
        save(name, "dhidden", h.grad); save(name, "dw", w.grad)
    else:
        raise SystemExit(f"kernels_ref.py: unknown op {op!r} in case {name}")


with open(os.path.join(D, "cases.txt")) as fh:
    for line in fh:
        parts = line.split()
        if parts:
            run(parts[0], parts[1], dict(p.split("=", 1) for p in parts[2:]))
