#!/usr/bin/python3
"""PyTorch oracle of one rlc PPO step with a critic (algorithm.adv_estimator=gae), for tests/test_ppo.c.

  ppo_step_ref.py make_critic MODEL_DIR OUT_DIR   a value model to start from: MODEL_DIR's tensors + score.weight
                                                  (1, H) ~ N(0, 0.3) and score.bias (1) = 0.1 (seed 5), config.json
                                                  as *ForTokenClassification with num_labels 1, the tokenizer files
  ppo_step_ref.py DIR                             the oracle: reads DIR/model (the actor's initial weights),
                                                  DIR/critic (the critic's), DIR/step_1.json (rlc's rollouts,
                                                  RLC_GRPO_DUMP), DIR/plan.json, and rlc's checkpoint DIR/run/global_step_1;
                                                  writes DIR/ref.json (metrics + the weight comparisons)

Written from shared/spec/verl-ppo.md §1 and verl-grpo.md, independent of rlc's RL code. The step: old_log_prob and
ref log-probs; the critic's values at the token before each response token (final-normed hidden . w + b); token
scores (the score on the last response token), rewards = scores - beta * (old - ref) (use_kl_in_reward, kl);
GAE (gamma, lam) with batch-global whitening, returns = gae + values; update_critic: per mini-batch of consecutive
sequences zero_grad, per micro-batch the clipped value loss 0.5 * token-mean over the mini-batch's tokens, backward,
clip_grad_norm_ over the whole critic, AdamW; update_actor: verl's vanilla loss on the GAE advantages - entropy_coeff *
entropy + kl_loss_coef * low_var_kl, token-mean over the mini-batch, clip, AdamW.

The checkpoint reader is the torch side of the critic's format: it takes rlc's critic/ as transformers'
token-classification layout (model.* backbone, score.weight [1, H], score.bias [1], num_labels 1) and compares it with
the oracle's updated critic.
"""
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen3_ref as Q  # noqa: E402
import st  # noqa: E402


def masked_mean(x, m):
    return (x * m).sum() / (m.sum() + 1e-8)


def masked_whiten(x, m):
    mu = masked_mean(x, m)
    var = masked_mean((x - mu) ** 2, m)
    n = m.sum()
    var = var * (n / (n - 1))
    return (x - mu) * torch.rsqrt(var + 1e-8)


def pack(seqs):
    ids, cu = [], [0]
    for s in seqs:
        ids += s["ids"]
        cu.append(len(ids))
    return torch.tensor(ids, dtype=torch.int64), cu


def logprobs(model, seqs, temperature):
    ids, cu = pack(seqs)
    tgt = torch.full((len(ids),), -1, dtype=torch.int64)
    tgt[:-1] = ids[1:]
    logits, _ = model(ids, cu)
    lp, ent = Q.logprob_entropy(logits, tgt, temperature)
    return [(lp[cu[k] + s["plen"] - 1 : cu[k + 1] - 1], ent[cu[k] + s["plen"] - 1 : cu[k + 1] - 1]) for k, s in enumerate(seqs)]


class Critic(torch.nn.Module):
    """transformers' *ForTokenClassification with num_labels 1: the backbone, then score = Linear(H, 1) with bias."""

    def __init__(self, cfg, sd):
        super().__init__()
        self.model = Q.Qwen3(cfg, torch.float32)
        full = dict(sd)
        for name, p in self.model.named_parameters():   # an untied lm_head is not part of the value model
            if name not in full and name == "lm_head.weight":
                full[name] = torch.zeros_like(p)
        self.model.load_hf(full)
        H = cfg["hidden_size"]
        self.score = torch.nn.Linear(H, 1, bias=True)
        with torch.no_grad():
            self.score.weight.copy_(sd["score.weight"].reshape(1, H))
            self.score.bias.copy_(sd["score.bias"].reshape(1))

    def values(self, seqs):
        ids, cu = pack(seqs)
        _, hidden = self.model(ids, cu)
        v = self.score(hidden)[:, 0]
        return [v[cu[k] + s["plen"] - 1 : cu[k + 1] - 1] for k, s in enumerate(seqs)]


def pad(rows, T):
    x = torch.zeros(len(rows), T)
    for i, r in enumerate(rows):
        x[i, : r.shape[0]] = r
    return x


def make_critic(model_dir, out):
    os.makedirs(out, exist_ok=True)
    sd = st.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    g = torch.Generator().manual_seed(5)
    H = cfg["hidden_size"]
    sd["score.weight"] = torch.randn(1, H, generator=g) * 0.3
    sd["score.bias"] = torch.full((1,), 0.1)
    st.write_safetensors(os.path.join(out, "model.safetensors"), sd, dtype=torch.float32)
    cfg["architectures"] = [cfg["architectures"][0].replace("ForCausalLM", "ForTokenClassification")]
    cfg["num_labels"] = 1
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
    for f in os.listdir(model_dir):
        if f.startswith("tokenizer") or f in ("vocab.json", "merges.txt", "special_tokens_map.json"):
            shutil.copy(os.path.join(model_dir, f), os.path.join(out, f))


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def main(d):
    torch.set_num_threads(2)
    plan = json.load(open(os.path.join(d, "plan.json")))
    dump = json.load(open(os.path.join(d, "step_1.json")))
    cfg = Q.load_config(os.path.join(d, "model", "config.json"))
    sd = Q.load_safetensors(os.path.join(d, "model", "model.safetensors"))
    actor = Q.Qwen3(cfg, torch.float32).load_hf(sd)
    ref_model = Q.Qwen3(cfg, torch.float32).load_hf(sd)
    csd = Q.load_safetensors(os.path.join(d, "critic", "model.safetensors"))
    critic = Critic(cfg, csd)
    seqs, n = dump["seqs"], dump["n"]
    B = len(seqs)
    temp = plan["temperature"]
    R = [len(s["ids"]) - s["plen"] for s in seqs]
    Tr = max(R)
    m_all = pad([torch.ones(r) for r in R], Tr)
    with torch.no_grad():
        old = [lp.clone() for lp, _ in logprobs(actor, seqs, temp)]
        ref = [lp.clone() for lp, _ in logprobs(ref_model, seqs, temp)]
        vals = [v.clone() for v in critic.values(seqs)]
    V = pad(vals, Tr)
    scores = torch.zeros(B, Tr)
    for i, s in enumerate(seqs):
        scores[i, R[i] - 1] = s["score"]
    rewards = scores - plan["kl_coef"] * (pad(old, Tr) - pad(ref, Tr)) * m_all
    # GAE (float32 like verl), whitening over every valid token of the batch
    gamma, lam = plan["gamma"], plan["lam"]
    nextv, last = torch.zeros(B), torch.zeros(B)
    gae = torch.zeros(B, Tr)
    for t in reversed(range(Tr)):
        delta = rewards[:, t] + gamma * nextv - V[:, t]
        g = delta + gamma * lam * last
        nextv = V[:, t] * m_all[:, t] + (1 - m_all[:, t]) * nextv
        last = g * m_all[:, t] + (1 - m_all[:, t]) * last
        gae[:, t] = last
    returns = gae + V
    adv = masked_whiten(gae, m_all)
    res = {}
    # update_critic
    cparams = list(critic.parameters())
    copt = torch.optim.AdamW(cparams, lr=plan["critic_lr"], betas=(plan["beta1"], plan["beta2"]), eps=plan["eps"],
                             weight_decay=plan["weight_decay"])
    cmini, cmicro, c = plan["critic_mini"] * n, plan["critic_micro"], plan["cliprange_value"]
    vf, gn, cf, vm = [], [], [], []
    for m0 in range(0, B, cmini):
        rows = list(range(m0, m0 + cmini))
        N = float(sum(R[i] for i in rows))
        copt.zero_grad()
        tot = 0.0
        for u0 in range(0, cmini, cmicro):
            mr = rows[u0 : u0 + cmicro]
            T = max(R[i] for i in mr)
            v = pad(critic.values([seqs[i] for i in mr]), T)
            m = m_all[mr, :T]
            Vo, Rt = V[mr, :T], returns[mr, :T]
            vclip = torch.max(torch.min(v, Vo + c), Vo - c)
            l1, l2 = (v - Rt) ** 2, (vclip - Rt) ** 2
            loss = 0.5 * (torch.max(l1, l2) * m).sum() / N
            loss.backward()
            tot += float(loss)
            cf.append(float(masked_mean(torch.gt(l2, l1).float(), m)))
            vm.append(float(masked_mean(v, m)))
        gn.append(float(torch.nn.utils.clip_grad_norm_(cparams, max_norm=plan["critic_clip_grad"])))
        copt.step()
        vf.append(tot)
    res["critic/vf_loss"] = sum(vf) / len(vf)
    res["critic/grad_norm"] = sum(gn) / len(gn)
    res["critic/vf_clipfrac"] = sum(cf) / len(cf)
    res["critic/vpred_mean"] = sum(vm) / len(vm)
    res["critic/values/mean"] = float(V[m_all > 0].mean())
    res["critic/returns/mean"] = float(returns[m_all > 0].mean())
    # update_actor
    params = [p for _, p in actor.named_parameters()]
    opt = torch.optim.AdamW(params, lr=plan["lr"], betas=(plan["beta1"], plan["beta2"]), eps=plan["eps"],
                            weight_decay=plan["weight_decay"])
    lo = hi = plan["clip_ratio"]
    mini, micro = plan["ppo_mini_batch_size"] * n, plan["micro_batch_size"]
    pgs, gns = [], []
    for m0 in range(0, B, mini):
        rows = list(range(m0, m0 + mini))
        N = float(sum(R[i] for i in rows))
        opt.zero_grad()
        tot = 0.0
        for u0 in range(0, mini, micro):
            mr = rows[u0 : u0 + micro]
            out = logprobs(actor, [seqs[i] for i in mr], temp)
            T = max(R[i] for i in mr)
            lp = pad([o[0] for o in out], T)
            ent = pad([o[1] for o in out], T)
            m = m_all[mr, :T]
            A = adv[mr, :T]
            dlt = torch.clamp(lp - pad([old[i] for i in mr], T), min=-20.0, max=20.0)
            ratio = torch.exp(dlt)
            L1 = -A * ratio
            L2 = -A * torch.clamp(ratio, 1 - lo, 1 + hi)
            Lc = torch.maximum(L1, L2)
            L = torch.where(A < 0, torch.min(-A * plan["clip_ratio_c"], Lc), Lc)
            pg = (L * m).sum() / N
            el = (ent * m).sum() / N
            k = torch.clamp(pad([ref[i] for i in mr], T) - lp, min=-20, max=20)
            kl = (torch.clamp(torch.exp(k) - k - 1, min=-10, max=10) * m).sum() / N
            loss = pg - plan["entropy_coeff"] * el + plan["kl_loss_coef"] * kl
            loss.backward()
            tot += float(pg)
        gns.append(float(torch.nn.utils.clip_grad_norm_(params, max_norm=plan["clip_grad"])))
        opt.step()
        pgs.append(tot)
    res["actor/pg_loss"] = sum(pgs) / len(pgs)
    res["actor/grad_norm"] = sum(gns) / len(gns)
    # rlc's checkpoint of this step, read as transformers reads a token-classification model
    run = os.path.join(d, "run", "global_step_1")
    ccfg = json.load(open(os.path.join(run, "critic", "config.json")))
    res["critic_arch"] = ccfg["architectures"][0]
    res["critic_num_labels"] = ccfg.get("num_labels", len(ccfg.get("id2label", {})))
    got = Q.load_safetensors(os.path.join(run, "critic", "model.safetensors"))
    want = {k: v.detach() for k, v in critic.model.named_parameters() if k != "lm_head.weight"}
    want["score.weight"] = critic.score.weight.detach()
    want["score.bias"] = critic.score.bias.detach()
    res["critic_names_match"] = sorted(got) == sorted(want)
    res["critic_score_shapes"] = [list(got["score.weight"].shape), list(got["score.bias"].shape)]
    res["critic_weights_rel"] = max(rel(got[k], want[k]) for k in got)
    res["critic_update_rel"] = rel(torch.cat([(got[k] - csd[k].reshape(got[k].shape)).reshape(-1) for k in sorted(got)]),
                                   torch.cat([(want[k] - csd[k].reshape(want[k].shape)).reshape(-1) for k in sorted(got)]))
    ga = Q.load_safetensors(os.path.join(run, "actor", "model.safetensors"))
    asd = dict(actor.named_parameters())
    res["actor_weights_rel"] = max(rel(ga[k], asd[k].detach()) for k in asd)
    json.dump(res, open(os.path.join(d, "ref.json"), "w"), indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "make_critic":
        make_critic(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1])
