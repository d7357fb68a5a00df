#!/usr/bin/python3
"""PyTorch reference of one PPO step's trainer phases with a critic for bench/bench_ppo.sh, on the rollouts rlc dumped
(RLC_GRPO_DUMP) and the same initial weights: old_log_prob and ref (no_grad), values (the critic: the same backbone
and a Linear(H, 1) head, no_grad), GAE (gamma = lam = 1) with whitening, update_critic (the clipped value loss,
token-mean over the mini-batch, clip_grad_norm_, AdamW) and update_actor (vanilla PPO + low_var_kl KL loss, as
bench/torch_grpo.py); one sequence per micro-batch (the reference's dense packed mask). fp32, eager. Prints one JSON
line with the phase timings and peak RSS.

usage: torch_ppo.py MODEL_DIR STEP_JSON [--threads 2] [--temperature 1.0] [--kl-coef 0.001] [--mini 4]
"""
import argparse
import json
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "py"))
import grpo_ref as G  # noqa: E402
import ppo_step_ref as P  # noqa: E402
import qwen3_ref as Q  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("step")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--kl-coef", type=float, default=0.001)
    ap.add_argument("--mini", type=int, default=4, help="ppo_mini_batch_size of both models (prompts)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dump = json.load(open(a.step))
    seqs, n = dump["seqs"], dump["n"]
    cfg = Q.load_config(os.path.join(a.model, "config.json"))
    sd = Q.load_safetensors(os.path.join(a.model, "model.safetensors"))
    model = Q.Qwen3(cfg, torch.float32).load_hf(sd)
    ref_model = Q.Qwen3(cfg, torch.float32).load_hf(sd)
    H = cfg["hidden_size"]
    sd["score.weight"] = torch.randn(1, H) * cfg.get("initializer_range", 0.02)
    sd["score.bias"] = torch.zeros(1)
    critic = P.Critic(cfg, sd)
    del sd
    out = {}
    t0 = time.time()
    with torch.no_grad():
        old = [G.logprobs(model, [s], a.temperature)[0][0].clone() for s in seqs]
    out["old_log_prob"] = time.time() - t0
    t0 = time.time()
    with torch.no_grad():
        ref = [G.logprobs(ref_model, [s], a.temperature)[0][0].clone() for s in seqs]
    out["ref"] = time.time() - t0
    del ref_model   # its log-probs are all the step needs of it: the full 28-layer shape then fits in 24 GiB
    t0 = time.time()
    with torch.no_grad():
        vals = [critic.values([s])[0].clone() for s in seqs]
    out["values"] = time.time() - t0
    B = len(seqs)
    R = [len(s["ids"]) - s["plen"] for s in seqs]
    Tr = max(R)
    m_all = P.pad([torch.ones(r) for r in R], Tr)
    V = P.pad(vals, Tr)
    rewards = torch.zeros(B, Tr)
    for i, s in enumerate(seqs):
        rewards[i, R[i] - 1] = s["score"]
    nextv, last = torch.zeros(B), torch.zeros(B)
    gae = torch.zeros(B, Tr)
    for t in reversed(range(Tr)):   # gamma = lam = 1
        g = rewards[:, t] + nextv - V[:, t] + last
        nextv = V[:, t] * m_all[:, t] + (1 - m_all[:, t]) * nextv
        last = g * m_all[:, t] + (1 - m_all[:, t]) * last
        gae[:, t] = last
    returns = gae + V
    adv = P.masked_whiten(gae, m_all)
    mini = a.mini * n
    cparams = list(critic.parameters())
    copt = torch.optim.AdamW(cparams, lr=1e-5, weight_decay=0.01)
    t0 = time.time()
    cnorms = []
    for m0 in range(0, B, mini):
        rows = list(range(m0, min(B, m0 + mini)))
        N = float(sum(R[i] for i in rows))
        copt.zero_grad()
        for i in rows:
            v = critic.values([seqs[i]])[0]
            Vo, Rt = V[i, :R[i]], returns[i, :R[i]]
            vclip = torch.max(torch.min(v, Vo + 0.5), Vo - 0.5)
            loss = 0.5 * torch.max((v - Rt) ** 2, (vclip - Rt) ** 2).sum() / N
            loss.backward()
        cnorms.append(float(torch.nn.utils.clip_grad_norm_(cparams, 1.0)))
        copt.step()
    out["update_critic"] = time.time() - t0
    copt.zero_grad(set_to_none=True)   # the critic's gradients are not needed by the actor's update (memory only)
    params = [p for p in model.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-6, weight_decay=0.01)
    t0 = time.time()
    norms = []
    for m0 in range(0, B, mini):
        rows = list(range(m0, min(B, m0 + mini)))
        N = float(sum(R[i] for i in rows))
        opt.zero_grad()
        for i in rows:
            lp, _ = G.logprobs(model, [seqs[i]], a.temperature)[0]
            d = torch.clamp(lp - old[i], -20, 20)
            r = torch.exp(d)
            A = adv[i, :R[i]]
            L = torch.maximum(-A * r, -A * torch.clamp(r, 0.8, 1.2))
            L = torch.where(A < 0, torch.min(-A * 3.0, L), L)
            k = torch.clamp(ref[i] - lp, -20, 20)
            kl = torch.clamp(torch.exp(k) - k - 1, -10, 10)
            loss = (L.sum() + a.kl_coef * kl.sum()) / N
            loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(params, 1.0)))
        opt.step()
    out["update_actor"] = time.time() - t0
    tokens = sum(len(s["ids"]) for s in seqs)
    print(json.dumps({"timing_s": out, "tokens": tokens, "grad_norm": norms, "critic_grad_norm": cnorms,
                      "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                      "threads": a.threads, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
