#!/usr/bin/python3
"""PyTorch reference of `rlc sft` / sft_train (src/trainer/sft.h), for tests/test_sft.c.

  sft_ref.py DIR    reads DIR/model/{config.json, model.safetensors}, DIR/data.jsonl and DIR/plan.json
                    ({"steps": [[seq indices of step 0], ...], "lr", "beta1", "beta2", "eps", "weight_decay",
                    "clip_grad", "sched": {type, warmup, total, min}}) and writes DIR/ref.json
                    ({"loss": [...], "grad_norm": [...], "lr": [...]}) and DIR/ref_params.bin (float32, all
                    parameters in named_parameters() order, flattened).

Each step: the batch's sequences packed back to back; targets[t] = ids[t+1] if loss_mask[t+1] else none;
loss = -sum(logp over targets) / N (token-mean over the global batch); backward; clip_grad_norm_;
torch.optim.AdamW; LambdaLR step (lambdas from tests/py/optim_ref.py).
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import optim_ref  # noqa: E402
import qwen3_ref as Q  # noqa: E402


def main(d):
    torch.set_num_threads(2)
    torch.manual_seed(0)
    plan = json.load(open(os.path.join(d, "plan.json")))
    cfg = Q.load_config(os.path.join(d, "model", "config.json"))
    sd = Q.load_safetensors(os.path.join(d, "model", "model.safetensors"))
    model = Q.Qwen3(cfg, torch.float32).load_hf(sd)
    rows = [json.loads(l) for l in open(os.path.join(d, "data.jsonl")) if l.strip()]
    params = [p for _, p in model.named_parameters()]
    opt = torch.optim.AdamW(params, lr=plan["lr"], betas=(plan["beta1"], plan["beta2"]), eps=plan["eps"],
                            weight_decay=plan["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, optim_ref.make_lambda(plan["sched"]))
    out = {"loss": [], "grad_norm": [], "lr": []}
    for seqs in plan["steps"]:
        ids, tgt, cu = [], [], [0]
        for s in seqs:
            x, m = rows[s]["input_ids"], rows[s]["loss_mask"]
            ids += x
            tgt += [x[t + 1] if m[t + 1] else -1 for t in range(len(x) - 1)] + [-1]
            cu.append(len(ids))
        ids_t = torch.tensor(ids, dtype=torch.int64)
        tgt_t = torch.tensor(tgt, dtype=torch.int64)
        N = int((tgt_t >= 0).sum())
        out["lr"].append(opt.param_groups[0]["lr"])
        opt.zero_grad()
        logits, _ = model(ids_t, cu)
        logp, _ = Q.logprob_entropy(logits, tgt_t, 1.0)
        loss = -(logp * (tgt_t >= 0).float()).sum() / N
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm=plan["clip_grad"])
        out["loss"].append(float(loss))
        out["grad_norm"].append(float(norm))
        opt.step()
        sched.step()
    json.dump(out, open(os.path.join(d, "ref.json"), "w"))
    torch.cat([p.detach().reshape(-1) for p in params]).numpy().tofile(os.path.join(d, "ref_params.bin"))


if __name__ == "__main__":
    main(sys.argv[1])
