#!/usr/bin/python3
"""PyTorch oracle of one rlc GRPO step on multi-turn trajectories (tests/test_agent_train.c).

  agent_step_ref.py DIR    as grpo_ref.py (DIR/model, DIR/plan.json, DIR/step_1.json), where each dumped sequence
                           also carries "mask": the response mask, 1 on the model's sampled tokens and 0 on the
                           observation tokens the environment inserted (shared/spec/agent-loop.md §6.6).

Independent of rlc's RL code: the step of grpo_ref.py with the response mask M in place of all-ones: old and ref
log-probs over the whole sequence (observation tokens take positions); the policy loss, entropy and KL terms and
their token-mean denominators (the mini-batch's sum of M) over M = 1 only; the score on the last response token.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen3_ref as Q  # noqa: E402


def masked_mean(x, m):
    return (x * m).sum() / (m.sum() + 1e-8)


def logprobs(model, seqs, temperature):
    """Per sequence: (response log-probs (R), entropies (R)) with autograd."""
    ids, cu = [], [0]
    for s in seqs:
        ids += s["ids"]
        cu.append(len(ids))
    ids_t = torch.tensor(ids, dtype=torch.int64)
    tgt = torch.full((len(ids),), -1, dtype=torch.int64)
    tgt[:-1] = ids_t[1:]
    logits, _ = model(ids_t, cu)
    lp, ent = Q.logprob_entropy(logits, tgt, temperature)
    out = []
    for k, s in enumerate(seqs):
        a = cu[k] + s["plen"] - 1
        b = cu[k + 1] - 1
        out.append((lp[a:b], ent[a:b]))
    return out


def pad(rows, T):
    x = torch.zeros(len(rows), T)
    for i, r in enumerate(rows):
        x[i, : r.shape[0]] = r
    return x


def main(d):
    torch.set_num_threads(2)
    plan = json.load(open(os.path.join(d, "plan.json")))
    dump = json.load(open(os.path.join(d, "step_1.json")))
    cfg = Q.load_config(os.path.join(d, "model", "config.json"))
    sd = Q.load_safetensors(os.path.join(d, "model", "model.safetensors"))
    model = Q.Qwen3(cfg, torch.float32).load_hf(sd)
    ref_model = Q.Qwen3(cfg, torch.float32).load_hf(sd)
    seqs = dump["seqs"]
    n = dump["n"]
    B = len(seqs)
    temp = plan["temperature"]
    with torch.no_grad():
        old = [lp.clone() for lp, _ in logprobs(model, seqs, temp)]
        ref = [lp.clone() for lp, _ in logprobs(ref_model, seqs, temp)]
    # GRPO advantages
    score = torch.tensor([s["score"] for s in seqs], dtype=torch.float32)
    adv_seq = torch.zeros(B)
    for g in range(B // n):
        x = score[g * n : (g + 1) * n]
        if n == 1:
            mu, sd_ = torch.tensor(0.0), torch.tensor(1.0)
        else:
            mu, sd_ = x.mean(), x.std()
        adv_seq[g * n : (g + 1) * n] = (x - mu) / (sd_ + 1e-6) if plan["norm_adv_by_std"] else x - mu
    params = [p for _, p in model.named_parameters()]
    opt = torch.optim.AdamW(params, lr=plan["lr"], betas=(plan["beta1"], plan["beta2"]), eps=plan["eps"],
                            weight_decay=plan["weight_decay"])
    lo, hi, c = plan["clip_ratio_low"], plan["clip_ratio_high"], plan["clip_ratio_c"]
    mini = plan["ppo_mini_batch_size"] * n
    micro = plan["micro_batch_size"]
    res = {"pg_loss": [], "kl_loss": [], "entropy_loss": [], "loss": [], "grad_norm": [], "pg_clipfrac": [], "ppo_kl": []}
    for m0 in range(0, B, mini):
        rows = list(range(m0, m0 + mini))
        N = float(sum(sum(seqs[i]["mask"]) for i in rows))   # sampled response tokens of the mini-batch
        opt.zero_grad()
        tot = {"pg_loss": 0.0, "kl_loss": 0.0, "entropy_loss": 0.0, "loss": 0.0}
        cf, pk, nm = 0.0, 0.0, 0
        for u0 in range(0, mini, micro):
            mrows = rows[u0 : u0 + micro]
            out = logprobs(model, [seqs[i] for i in mrows], temp)
            T = max(1, max(o[0].shape[0] for o in out))
            lp = torch.stack([torch.cat([o[0], torch.zeros(T - o[0].shape[0])]) for o in out])
            ent = torch.stack([torch.cat([o[1], torch.zeros(T - o[1].shape[0])]) for o in out])
            m = pad([torch.tensor(seqs[i]["mask"], dtype=torch.float32) for i in mrows], T)
            o_lp = pad([old[i] for i in mrows], T)
            r_lp = pad([ref[i] for i in mrows], T)
            A = adv_seq[mrows][:, None] * m
            dlt = torch.clamp(lp - o_lp, min=-20.0, max=20.0)
            ratio = torch.exp(dlt)
            L1 = -A * ratio
            L2 = -A * torch.clamp(ratio, 1 - lo, 1 + hi)
            Lc = torch.maximum(L1, L2)
            L3 = -A * c
            L = torch.where(A < 0, torch.min(L3, Lc), Lc)
            pg = (L * m).sum() / N
            el = (ent * m).sum() / N
            k = torch.clamp(r_lp - lp, min=-20, max=20)
            kl = (torch.clamp(torch.exp(k) - k - 1, min=-10, max=10) * m).sum() / N
            loss = pg - plan["entropy_coeff"] * el + plan["kl_loss_coef"] * kl
            loss.backward()
            tot["pg_loss"] += float(pg); tot["kl_loss"] += float(kl); tot["entropy_loss"] += float(el)
            tot["loss"] += float(loss)
            cf += float(masked_mean(torch.gt(L2, L1).float(), m)); pk += float(masked_mean(-dlt, m)); nm += 1
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm=plan["clip_grad"])
        opt.step()
        for key in tot:
            res[key].append(tot[key])
        res["grad_norm"].append(float(norm))
        res["pg_clipfrac"].append(cf / nm)
        res["ppo_kl"].append(pk / nm)
    out = {k: sum(v) / len(v) for k, v in res.items()}
    json.dump(out, open(os.path.join(d, "ref.json"), "w"))
    torch.cat([p.detach().reshape(-1) for p in params]).numpy().tofile(os.path.join(d, "ref_params.bin"))


if __name__ == "__main__":
    main(sys.argv[1])
