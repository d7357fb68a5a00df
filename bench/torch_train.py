#!/usr/bin/python3
"""PyTorch reference training step for bench/bench_train.c: the decoder of any family (tests/py/families_ref.py,
fp32, eager) on SEQS random sequences of LEN tokens; forward + backward (next-token cross-entropy, token-mean) with one
sequence per micro-batch (gradient accumulation: the packed reference's dense (T x T) mask over 8 x 512
tokens would not fit in memory), clip_grad_norm_(1.0), AdamW. Prints one JSON line.

usage: torch_train.py CONFIG.json [--seqs 8] [--len 512] [--steps 2] [--warmup 0] [--threads 2]
"""
import argparse
import json
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "py"))
import families_ref as F  # noqa: E402
import qwen3_ref as Q  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--seqs", type=int, default=8)
    ap.add_argument("--len", type=int, default=512)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = F.resolve(json.load(open(a.config)))
    model = F.Decoder(cfg, torch.float32)
    params = [p for p in model.parameters()]
    n_params = sum(p.numel() for p in params)
    opt = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.01)
    V = cfg["vocab_size"]
    ids = torch.randint(0, V, (a.seqs, a.len))
    T = a.seqs * a.len
    times = []
    for it in range(a.warmup + a.steps):
        t0 = time.time()
        opt.zero_grad()
        n_tgt = a.seqs * (a.len - 1)
        for s in range(a.seqs):
            x = ids[s]
            logits, _ = model(x, [0, a.len])
            logp = torch.log_softmax(logits[:-1], dim=-1).gather(1, x[1:, None])[:, 0]
            loss = -logp.sum() / n_tgt
            loss.backward()
            del logits, logp, loss
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        dt = time.time() - t0
        if it >= a.warmup:
            times.append(dt)
        print(f"torch step {it}: {dt:.2f} s ({T / dt:.1f} tokens/s)", file=sys.stderr, flush=True)
    times.sort()
    med = times[len(times) // 2] if len(times) % 2 else 0.5 * (times[len(times) // 2 - 1] + times[len(times) // 2])
    print(json.dumps({"params": n_params, "tokens": T, "step_s": times, "median_s": med, "tokens_per_s": T / med,
                      "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                      "threads": a.threads, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
