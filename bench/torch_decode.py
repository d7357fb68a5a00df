#!/usr/bin/python3
"""KV-cache greedy decode of a randomly initialised Qwen3, Llama 3.2 or Gemma 3 in PyTorch (fp32, CPU): the peer
of bench_generate.c. Same math as HF (RMSNorm, q/k norm where the family has it, RoPE rotate_half, GQA,
SwiGLU or Gemma's GeGLU with its four norms per layer and sliding-window layers reading the last W keys of
the cache), with a preallocated KV cache per layer; prefill of the prompt, then one token per step for the
whole batch.

usage: torch_decode.py --batch B --prompt-len P --new N [--threads T]
                       [--shape 0.6b|qwen3-0.6b|llama-3.2-1b|gemma-3-1b|tiny]
prints one JSON line: {"batch", "prompt_len", "new", "ttft_s", "decode_tok_s", "threads"}
"""
import argparse
import json
import math
import time

import torch

QWEN3_06B = dict(V=151936, H=1024, I=3072, L=28, nh=16, nkv=8, D=128, theta=1e6, eps=1e-6)
SHAPES = {
    "0.6b": QWEN3_06B,
    "qwen3-0.6b": QWEN3_06B,
    # Llama-3.2-1B: no q/k norms (its llama3 RoPE scaling changes inv_freq only, not the cost)
    "llama-3.2-1b": dict(V=128256, H=2048, I=8192, L=16, nh=32, nkv=8, D=64, theta=5e5, eps=1e-5, qk_norm=False),
    # Gemma-3-1b: sandwich norms, GeGLU, 5 sliding layers (W = 512) per full one
    "gemma-3-1b": dict(V=262144, H=1152, I=6912, L=26, nh=4, nkv=1, D=256, theta=1e6, eps=1e-6, gemma=True, W=512),
    "tiny": dict(V=1000, H=64, I=128, L=2, nh=4, nkv=2, D=16, theta=1e6, eps=1e-6),
}


def rms(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shape", default="0.6b")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    s = SHAPES[a.shape]
    V, H, I, L, nh, nkv, D = s["V"], s["H"], s["I"], s["L"], s["nh"], s["nkv"], s["D"]
    eps, G = s["eps"], nh // nkv
    qk_norm, gemma, W = s.get("qk_norm", True), s.get("gemma", False), s.get("W", 0)
    scale = math.sqrt(H) if gemma else 1.0   # Gemma's embedding scale
    assert a.prompt_len <= W or W == 0, "the prefill mask below is causal only"
    std = 0.02
    with torch.no_grad():
        emb = torch.empty(V, H).uniform_(-std * 1.732, std * 1.732)
        layers = []
        for _ in range(L):
            layers.append(dict(
                wq=torch.empty(nh * D, H).uniform_(-std * 1.732, std * 1.732),
                wk=torch.empty(nkv * D, H).uniform_(-std * 1.732, std * 1.732),
                wv=torch.empty(nkv * D, H).uniform_(-std * 1.732, std * 1.732),
                wo=torch.empty(H, nh * D).uniform_(-std * 1.732, std * 1.732),
                wg=torch.empty(I, H).uniform_(-std * 1.732, std * 1.732),
                wu=torch.empty(I, H).uniform_(-std * 1.732, std * 1.732),
                wd=torch.empty(H, I).uniform_(-std * 1.732, std * 1.732),
                n1=torch.ones(H), n2=torch.ones(H), qn=torch.ones(D), kn=torch.ones(D),
                n3=torch.ones(H), n4=torch.ones(H)))
        fnorm = torch.ones(H)
        B, P, N = a.batch, a.prompt_len, a.new
        maxT = P + N
        inv = 1.0 / (s["theta"] ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
        t = torch.arange(maxT, dtype=torch.float32)
        fr = torch.outer(t, inv)
        e = torch.cat([fr, fr], -1)
        cos_all, sin_all = e.cos(), e.sin()
        kc = [torch.zeros(B, nkv, maxT, D) for _ in range(L)]
        vc = [torch.zeros(B, nkv, maxT, D) for _ in range(L)]

        def rot(x, cos, sin):
            x1, x2 = x[..., : D // 2], x[..., D // 2:]
            return x * cos + torch.cat([-x2, x1], -1) * sin

        def forward(tok, p0):
            T = tok.shape[1]
            x = emb[tok] * scale
            cos, sin = cos_all[p0:p0 + T], sin_all[p0:p0 + T]
            for li, w in enumerate(layers):
                h = rms(x, w["n1"], eps)
                q = (h @ w["wq"].T).view(B, T, nh, D)
                k = (h @ w["wk"].T).view(B, T, nkv, D)
                if qk_norm:
                    q, k = rms(q, w["qn"], eps), rms(k, w["kn"], eps)
                q, k = q.transpose(1, 2), k.transpose(1, 2)
                v = (h @ w["wv"].T).view(B, T, nkv, D).transpose(1, 2)
                q, k = rot(q, cos, sin), rot(k, cos, sin)
                kc[li][:, :, p0:p0 + T] = k
                vc[li][:, :, p0:p0 + T] = v
                # Gemma's sliding layers (5 of every 6) read the last W keys (HF's sliding-window cache)
                lo = max(0, p0 + T - W) if gemma and (li + 1) % 6 != 0 and T == 1 else 0
                ka = kc[li][:, :, lo:p0 + T].repeat_interleave(G, dim=1)
                va = vc[li][:, :, lo:p0 + T].repeat_interleave(G, dim=1)
                sc = (q @ ka.transpose(-1, -2)) / math.sqrt(D)
                if T > 1:
                    mask = torch.full((T, p0 + T), float("-inf")).triu(p0 + 1)
                    sc = sc + mask
                o = (sc.softmax(-1) @ va).transpose(1, 2).reshape(B, T, nh * D)
                if gemma:
                    x = x + rms(o @ w["wo"].T, w["n2"], eps)
                    h2 = rms(x, w["n3"], eps)
                    g = torch.nn.functional.gelu(h2 @ w["wg"].T, approximate="tanh")
                    x = x + rms((g * (h2 @ w["wu"].T)) @ w["wd"].T, w["n4"], eps)
                    continue
                x = x + o @ w["wo"].T
                h2 = rms(x, w["n2"], eps)
                x = x + (torch.nn.functional.silu(h2 @ w["wg"].T) * (h2 @ w["wu"].T)) @ w["wd"].T
            return rms(x[:, -1], fnorm, eps) @ emb.T

        prompt = torch.randint(0, V, (B, P))
        t0 = time.time()
        nxt = forward(prompt, 0).argmax(-1)
        ttft = time.time() - t0
        t1 = time.time()
        for i in range(N - 1):
            nxt = forward(nxt.view(B, 1), P + i).argmax(-1)
        dt = time.time() - t1
    print(json.dumps(dict(batch=B, prompt_len=P, new=N, ttft_s=ttft, decode_tok_s=B * (N - 1) / dt, threads=a.threads)))


if __name__ == "__main__":
    main()
