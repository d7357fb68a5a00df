#!/usr/bin/python3
"""PyTorch reference of one GRPO step's trainer phases for bench/bench_grpo.sh, on the rollouts rlc dumped
(RLC_GRPO_DUMP) and the same initial weights: old_log_prob and ref (no_grad), then update_actor (the loss of
tests/py/grpo_ref.py: vanilla PPO + low_var_kl KL loss, token-mean over the mini-batch; one sequence per
micro-batch, as bench/torch_train.py: the reference's dense (T x T) packed mask), clip_grad_norm_, AdamW.
fp32, eager. Prints one JSON line with the phase timings and peak RSS.

usage: torch_grpo.py MODEL_DIR STEP_JSON [--threads 2] [--temperature 1.0] [--kl-coef 0.001] [--mini 4]
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
import qwen3_ref as Q  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("step")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--kl-coef", type=float, default=0.001)
    ap.add_argument("--mini", type=int, default=4, help="ppo_mini_batch_size (prompts)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dump = json.load(open(a.step))
    seqs, n = dump["seqs"], dump["n"]
    cfg = Q.load_config(os.path.join(a.model, "config.json"))
    sd = Q.load_safetensors(os.path.join(a.model, "model.safetensors"))
    model = Q.Qwen3(cfg, torch.float32).load_hf(sd)
    ref_model = Q.Qwen3(cfg, torch.float32).load_hf(sd)
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
    score = torch.tensor([s["score"] for s in seqs], dtype=torch.float32)
    adv = torch.zeros(len(seqs))
    for g in range(len(seqs) // n):
        x = score[g * n:(g + 1) * n]
        adv[g * n:(g + 1) * n] = (x - x.mean()) / (x.std() + 1e-6) if n > 1 else x
    params = [p for p in model.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-6, weight_decay=0.01)
    t0 = time.time()
    mini = a.mini * n
    norms = []
    for m0 in range(0, len(seqs), mini):
        rows = list(range(m0, min(len(seqs), m0 + mini)))
        N = float(sum(len(seqs[i]["ids"]) - seqs[i]["plen"] for i in rows))
        opt.zero_grad()
        for i in rows:
            lp, _ = G.logprobs(model, [seqs[i]], a.temperature)[0]
            d = torch.clamp(lp - old[i], -20, 20)
            r = torch.exp(d)
            A = adv[i]
            L = torch.maximum(-A * r, -A * torch.clamp(r, 0.8, 1.2))
            if A < 0:
                L = torch.min(-A * 3.0, L)
            k = torch.clamp(ref[i] - lp, -20, 20)
            kl = torch.clamp(torch.exp(k) - k - 1, -10, 10)
            loss = (L.sum() + a.kl_coef * kl.sum()) / N
            loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(params, 1.0)))
        opt.step()
    out["update_actor"] = time.time() - t0
    tokens = sum(len(s["ids"]) for s in seqs)
    print(json.dumps({"timing_s": out, "tokens": tokens, "grad_norm": norms,
                      "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                      "threads": a.threads, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
