"""lora_ref.py: a PyTorch reference for LoRA (PEFT's math, shared/spec/lora.md §2-3), independent of the C code.
The adapted model is the base with each adapted weight replaced by the merged W + s·B·A (float64), run through
families_ref's decoder; dA and dB follow from the merged weight's gradient G by the chain rule: dB = s·G·Aᵀ,
dA = s·Bᵀ·G. The adapter folder is read and written with PEFT's names and adapter_config.json fields.

    lora_ref.py case DIR           DIR holds config.json, model.safetensors, adapter/ and case.json (tokens, targets,
                                   cu_seqlens, dlogp, dentropy, temperature, lora_names, check {r, alpha, rslora}):
                                   writes DIR/out.bin (float32): logp (T), entropy (T), then each gradient of
                                   lora_names for loss = sum(dlogp*logp + dentropy*entropy); checks adapter/ as
                                   `check` does
    lora_ref.py check ADAPTER R ALPHA RSLORA   checks an adapter folder as PEFT reads it; prints "ok <n tensors>"
    lora_ref.py write ADAPTER CONFIG.json R ALPHA SEED   writes a PEFT adapter (q/v/down in every layer) with random A, B
    lora_ref.py merge BASE ADAPTER OUT   writes OUT/model.safetensors = the merged weights (float32, PEFT's merge)
    lora_ref.py batch FILE         runs the commands of FILE (one per line, arguments as above) in one process
"""
import json
import math
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families_ref as F  # noqa: E402
import qwen3_ref as Q  # noqa: E402

PROJ = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
        "mlp.down_proj"]
KEY = re.compile(r"^base_model\.model\.(model\.layers\.\d+\.(?:self_attn|mlp)\.[a-z_]+)\.lora_([AB])(?:\.[^.]+)?\.weight$")


def load_adapter(d):
    with open(os.path.join(d, "adapter_config.json")) as f:
        ac = json.load(f)
    sd = Q.load_safetensors(os.path.join(d, "adapter_model.safetensors"))
    r, alpha = ac["r"], ac["lora_alpha"]
    s = alpha / math.sqrt(r) if ac.get("use_rslora") else alpha / r
    mods = {}
    for k, v in sd.items():
        m = KEY.match(k)
        assert m, f"not a PEFT LoRA key: {k}"
        mods.setdefault(m.group(1), {})[m.group(2)] = v
    return ac, s, mods


def merged_state(base_sd, s, mods, dtype):
    sd = {k: v.to(dtype) for k, v in base_sd.items()}
    for mod, ab in mods.items():
        w = mod + ".weight"
        sd[w] = sd[w] + s * (ab["B"].to(dtype) @ ab["A"].to(dtype))
    return sd


def run_case(d):
    dtype = torch.float64
    with open(os.path.join(d, "config.json")) as f:
        cfg = F.resolve(json.load(f))
    with open(os.path.join(d, "case.json")) as f:
        case = json.load(f)
    ac, s, mods = load_adapter(os.path.join(d, "adapter"))
    model = F.Decoder(cfg, dtype).load_hf(merged_state(Q.load_model_dir(d), s, mods, dtype))
    ids = torch.tensor(case["tokens"], dtype=torch.int64)
    tgt = torch.tensor(case["targets"], dtype=torch.int64)
    dlogp = torch.tensor(case["dlogp"], dtype=dtype)
    dent = torch.tensor(case["dentropy"], dtype=dtype)
    h = model.hidden(ids, case["cu_seqlens"])
    logp, ent = Q.logprob_entropy(model.logits(h), tgt, float(case["temperature"]))
    params = dict(model.named_parameters())
    loss = (dlogp * logp).sum() + (dent * ent).sum()
    mlist = list(mods)
    grads = torch.autograd.grad(loss, [params[m + ".weight"] for m in mlist])
    gby = dict(zip(mlist, grads))
    parts = [logp.detach(), ent.detach()]
    for name in case["lora_names"]:
        m = KEY.match(name)
        mod, which = m.group(1), m.group(2)
        G, A, B = gby[mod], mods[mod]["A"].to(dtype), mods[mod]["B"].to(dtype)
        parts.append(s * (G @ A.T) if which == "B" else s * (B.T @ G))
    torch.cat([p.reshape(-1).to(torch.float32) for p in parts]).numpy().tofile(os.path.join(d, "out.bin"))
    c = case["check"]   # the adapter folder as PEFT reads it
    check(os.path.join(d, "adapter"), c["r"], c["alpha"], c["rslora"], quiet=True)


def check(d, r, alpha, rslora, quiet=False):
    ac, s, mods = load_adapter(d)
    assert ac["peft_type"] == "LORA" and ac["r"] == r and ac["lora_alpha"] == alpha, ac
    assert ac["use_rslora"] == rslora and ac["bias"] == "none" and not ac["use_dora"] and ac["modules_to_save"] is None, ac
    assert ac["task_type"] == "CAUSAL_LM" and ac["lora_dropout"] == 0.0 and ac["fan_in_fan_out"] is False, ac
    with open(os.path.join(d, "adapter_model.safetensors"), "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        hdr = json.loads(f.read(n))
    assert hdr.pop("__metadata__") == {"format": "pt"}
    for k, v in hdr.items():
        assert v["dtype"] == "F32", k
    for mod, ab in mods.items():
        assert set(ab) == {"A", "B"}, mod
        assert ab["A"].shape[0] == r and ab["B"].shape[1] == r, mod
        short = mod.split(".")[-1]
        assert short in ac["target_modules"] or mod in ac["target_modules"], (mod, ac["target_modules"])
    if not quiet:
        print(f"ok {2 * len(mods)}")


def write(d, cfg_path, r, alpha, seed):
    with open(cfg_path) as f:
        c = F.resolve(json.load(f))
    g = torch.Generator().manual_seed(seed)
    H, I, D = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    QD, KD = c["num_attention_heads"] * D, c["num_key_value_heads"] * D
    dims = {"self_attn.q_proj": (H, QD), "self_attn.v_proj": (H, KD), "mlp.down_proj": (I, H)}
    sd = {}
    for l in range(c["num_hidden_layers"]):
        for p, (i, o) in dims.items():
            base = f"base_model.model.model.layers.{l}.{p}"
            sd[base + ".lora_A.weight"] = (torch.rand(r, i, generator=g) * 2 - 1) / math.sqrt(i)
            sd[base + ".lora_B.weight"] = torch.randn(o, r, generator=g) * 0.1
    os.makedirs(d, exist_ok=True)
    F.write_st(os.path.join(d, "adapter_model.safetensors"), sd)
    ac = {"peft_type": "LORA", "r": r, "lora_alpha": alpha, "target_modules": ["q_proj", "v_proj", "down_proj"],
          "bias": "none", "use_rslora": False, "task_type": "CAUSAL_LM", "lora_dropout": 0.0, "fan_in_fan_out": False,
          "modules_to_save": None, "use_dora": False, "inference_mode": True, "peft_version": "0.17.0"}
    with open(os.path.join(d, "adapter_config.json"), "w") as f:
        json.dump(ac, f, indent=2, sort_keys=True)
    for k in sorted(sd):
        print(f"{k} {sd[k].double().sum().item():.9e}")


def merge(base, adapter, out):
    ac, s, mods = load_adapter(adapter)
    sd = merged_state(Q.load_model_dir(base), s, mods, torch.float32)   # PEFT's CPU merge: fp32
    os.makedirs(out, exist_ok=True)
    F.write_st(os.path.join(out, "model.safetensors"), sd)


def main(argv):
    torch.set_num_threads(2)
    if len(argv) == 3 and argv[1] == "batch":   # one command per line (the forms above): one torch start-up for all
        with open(argv[2]) as f:
            for line in f:
                if line.strip() and main([argv[0]] + line.split()) != 0:
                    return 1
        return 0
    if len(argv) >= 3 and argv[1] == "case":
        for d in argv[2:]:
            run_case(d)
    elif len(argv) == 6 and argv[1] == "check":
        check(argv[2], int(argv[3]), float(argv[4]), argv[5] == "1")
    elif len(argv) == 7 and argv[1] == "write":
        write(argv[2], argv[3], int(argv[4]), float(argv[5]), int(argv[6]))
    elif len(argv) == 5 and argv[1] == "merge":
        merge(argv[2], argv[3], argv[4])
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
