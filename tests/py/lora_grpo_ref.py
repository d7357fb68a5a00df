#!/usr/bin/python3
"""PyTorch oracle of one rlc GRPO step with LoRA adapters (src/trainer/grpo.c with lora_rank > 0), for
tests/test_lora_train.c.

  lora_grpo_ref.py DIR   reads DIR/model/{config.json, model.safetensors} (the base), DIR/adapter/ (the PEFT
                         adapter the step starts from), DIR/step_1.json (the rollouts rlc dumped with RLC_GRPO_DUMP)
                         and DIR/plan.json (hyper-parameters; base_bf16: round the frozen base to bf16, as rlc stores
                         it); writes DIR/ref.json (the step's actor metrics) and DIR/ref_params.bin (float32: every
                         adapter tensor after the step in rlc's order: layer, then q,k,v,o,gate,up,down, A then B).

Independent of rlc's code: PEFT's LoRA (y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ, W frozen, A and B trained) as modules around the
reference Qwen3's projections; the reference policy is the same model with the adapters switched off (verl's
ref_in_actor); the GRPO step as tests/py/grpo_ref.py (shared/spec/verl-grpo.md), with only A and B in AdamW and in
clip_grad_norm_.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpo_ref as G  # noqa: E402
import lora_ref as LR  # noqa: E402
import qwen3_ref as Q  # noqa: E402


class LoraLinear(torch.nn.Module):
    """base(x) + s·(x·Aᵀ)·Bᵀ; `on` is shared by every adapter of the model (the reference switches it off)."""

    def __init__(self, base, A, B, s, switch):
        super().__init__()
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.A = torch.nn.Parameter(A.clone().float())
        self.B = torch.nn.Parameter(B.clone().float())
        self.s = s
        self.switch = switch

    def forward(self, x):
        y = self.base(x)
        if self.switch["on"]:
            y = y + self.s * ((x @ self.A.t()) @ self.B.t())
        return y


def main(d):
    torch.set_num_threads(2)
    plan = json.load(open(os.path.join(d, "plan.json")))
    dump = json.load(open(os.path.join(d, "step_1.json")))
    cfg = Q.load_config(os.path.join(d, "model", "config.json"))
    sd = Q.load_safetensors(os.path.join(d, "model", "model.safetensors"))
    if plan.get("base_bf16"):   # rlc keeps the frozen base in bf16 (round to nearest even), widened to fp32 for use
        sd = {k: v.to(torch.bfloat16).to(torch.float32) for k, v in sd.items()}
    model = Q.Qwen3(cfg, torch.float32).load_hf(sd)
    for p in model.parameters():
        p.requires_grad_(False)
    _, s, mods = LR.load_adapter(os.path.join(d, "adapter"))
    switch = {"on": True}
    adapters = []   # rlc's order: layer, projection, A then B
    for li, layer in enumerate(model.model.layers):
        for path in LR.PROJ:
            name = f"model.layers.{li}.{path}"
            if name not in mods:
                continue
            parent, attr = path.split(".")
            owner = getattr(layer, parent)
            m = LoraLinear(getattr(owner, attr), mods[name]["A"], mods[name]["B"], s, switch)
            setattr(owner, attr, m)
            adapters += [m.A, m.B]
    seqs = dump["seqs"]
    n = dump["n"]
    B = len(seqs)
    temp = plan["temperature"]
    with torch.no_grad():
        old = [lp.clone() for lp, _ in G.logprobs(model, seqs, temp)]
        switch["on"] = False
        ref = [lp.clone() for lp, _ in G.logprobs(model, seqs, temp)]
        switch["on"] = True
    score = torch.tensor([q["score"] for q in seqs], dtype=torch.float32)
    adv_seq = torch.zeros(B)
    for g in range(B // n):
        x = score[g * n : (g + 1) * n]
        mu, sd_ = (x.mean(), x.std()) if n > 1 else (torch.tensor(0.0), torch.tensor(1.0))
        adv_seq[g * n : (g + 1) * n] = (x - mu) / (sd_ + 1e-6)
    opt = torch.optim.AdamW(adapters, lr=plan["lr"], betas=(plan["beta1"], plan["beta2"]), eps=plan["eps"],
                            weight_decay=plan["weight_decay"])
    lo, hi, c = plan["clip_ratio_low"], plan["clip_ratio_high"], plan["clip_ratio_c"]
    mini = plan["ppo_mini_batch_size"] * n
    micro = plan["micro_batch_size"]
    res = {"pg_loss": [], "kl_loss": [], "entropy_loss": [], "loss": [], "grad_norm": []}
    for m0 in range(0, B, mini):
        rows = list(range(m0, m0 + mini))
        N = float(sum(len(seqs[i]["ids"]) - seqs[i]["plen"] for i in rows))
        opt.zero_grad()
        tot = {"pg_loss": 0.0, "kl_loss": 0.0, "entropy_loss": 0.0, "loss": 0.0}
        for u0 in range(0, mini, micro):
            mrows = rows[u0 : u0 + micro]
            out = G.logprobs(model, [seqs[i] for i in mrows], temp)
            T = max(1, max(o[0].shape[0] for o in out))
            lp = torch.stack([torch.cat([o[0], torch.zeros(T - o[0].shape[0])]) for o in out])
            ent = torch.stack([torch.cat([o[1], torch.zeros(T - o[1].shape[0])]) for o in out])
            m = G.pad([torch.ones(o[0].shape[0]) for o in out], T)
            o_lp = G.pad([old[i] for i in mrows], T)
            r_lp = G.pad([ref[i] for i in mrows], T)
            A = adv_seq[mrows][:, None] * m
            ratio = torch.exp(torch.clamp(lp - o_lp, min=-20.0, max=20.0))
            L1 = -A * ratio
            L2 = -A * torch.clamp(ratio, 1 - lo, 1 + hi)
            Lc = torch.maximum(L1, L2)
            L = torch.where(A < 0, torch.min(-A * c, Lc), Lc)
            pg = (L * m).sum() / N
            el = (ent * m).sum() / N
            k = torch.clamp(r_lp - lp, min=-20, max=20)
            kl = (torch.clamp(torch.exp(k) - k - 1, min=-10, max=10) * m).sum() / N
            loss = pg - plan["entropy_coeff"] * el + plan["kl_loss_coef"] * kl
            loss.backward()
            tot["pg_loss"] += float(pg); tot["kl_loss"] += float(kl); tot["entropy_loss"] += float(el)
            tot["loss"] += float(loss)
        norm = torch.nn.utils.clip_grad_norm_(adapters, max_norm=plan["clip_grad"])
        opt.step()
        for key in tot:
            res[key].append(tot[key])
        res["grad_norm"].append(float(norm))
    json.dump({k: sum(v) / len(v) for k, v in res.items()}, open(os.path.join(d, "ref.json"), "w"))
    torch.cat([p.detach().reshape(-1) for p in adapters]).numpy().tofile(os.path.join(d, "ref_params.bin"))


if __name__ == "__main__":
    main(sys.argv[1])
