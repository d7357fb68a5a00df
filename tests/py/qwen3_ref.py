"""qwen3_ref.py: a PyTorch reference of the Qwen3 dense model (shared/spec/qwen3.md §1), eager attention.

Importable:
    import qwen3_ref as Q
    cfg = Q.load_config("DIR/config.json")            # or a plain dict with the HF keys
    sd  = Q.load_model_dir("DIR")                     # {name: fp32 tensor}, single file or sharded
    model = Q.Qwen3(cfg, dtype=torch.float32); model.load_hf(sd)
    logits, hidden = model(input_ids, cu_seqlens)     # packed batch: (T,), cu (n+1,) -> (T,V), (T,H)
    logp, ent = Q.logprob_entropy(logits, targets, temperature)

Parameter names are the Hugging Face ones (model.embed_tokens.weight, model.layers.N...., lm_head.weight
when untied), so model.named_parameters() lines up with a checkpoint. A packed batch attends through a
block-diagonal causal mask; positions restart at 0 in each sequence.

As a script (used by tests/test_model.c):
    qwen3_ref.py case CASE_DIR [--dtype float64|float32]
reads CASE_DIR/{config.json, model.safetensors, case.json} and writes CASE_DIR/out.bin (float32, see run_case()).
"""
import json
import os
import struct
import sys

import torch
import torch.nn as nn


# ---- safetensors ---------------------------------------------------------------------------------------
def load_safetensors(path):
    """{name: float32 tensor} of a .safetensors file (F32, BF16, F16, F64), read tensor by tensor straight
    into torch storage (peak memory ~ the fp32 weights; tests/py/st.py is the validating reader)."""
    out = {}
    sizes = {"F32": (torch.float32, 4), "F64": (torch.float64, 8), "F16": (torch.float16, 2), "BF16": (torch.int16, 2)}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
        base = 8 + n
        for name, info in header.items():
            if name == "__metadata__":
                continue
            dt = info["dtype"]
            if dt not in sizes:
                raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
            tdt, size = sizes[dt]
            b, e = info["data_offsets"]
            numel = (e - b) // size
            t = torch.empty(numel, dtype=tdt)
            f.seek(base + b)
            if numel:
                f.readinto(t.numpy().view("uint8"))   # read straight into the tensor: no extra copy
            if dt == "BF16":
                t = (t.to(torch.int32) << 16).view(torch.float32)
            elif dt != "F32":
                t = t.float()
            out[name] = t.reshape(info["shape"])
    return out


def load_model_dir(path):
    """All tensors of an HF model directory: model.safetensors, or the shards of model.safetensors.index.json."""
    single = os.path.join(path, "model.safetensors")
    if os.path.exists(single):
        return load_safetensors(single)
    with open(os.path.join(path, "model.safetensors.index.json")) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    out = {}
    for fn in shards:
        out.update(load_safetensors(os.path.join(path, fn)))
    return out


def load_config(path):
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    if "rope_theta" not in cfg and isinstance(cfg.get("rope_parameters"), dict):
        cfg["rope_theta"] = cfg["rope_parameters"]["rope_theta"]
    return cfg


# ---- model -----------------------------------------------------------------------------------------------
class RMSNorm(nn.Module):
    def __init__(self, dim, eps, dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))
        self.eps = eps

    def forward(self, x):
        xf = x if x.dtype == torch.float64 else x.float()
        var = xf.pow(2).mean(-1, keepdim=True)
        y = xf * torch.rsqrt(var + self.eps)
        return self.weight * y.to(x.dtype)   # cast first, then the weight (spec §1.2)


def rope_cos_sin(pos, D, theta, dtype):
    """cos/sin (T, D) as transformers computes them in float32, then cast to dtype."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    freq = pos.float()[:, None] * inv_freq[None, :]
    emb = torch.cat([freq, freq], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        H, D = cfg["hidden_size"], cfg["head_dim"]
        self.nh, self.nkv, self.D = cfg["num_attention_heads"], cfg["num_key_value_heads"], D
        self.q_proj = nn.Linear(H, self.nh * D, bias=False, dtype=dtype)
        self.k_proj = nn.Linear(H, self.nkv * D, bias=False, dtype=dtype)
        self.v_proj = nn.Linear(H, self.nkv * D, bias=False, dtype=dtype)
        self.o_proj = nn.Linear(self.nh * D, H, bias=False, dtype=dtype)
        self.q_norm = RMSNorm(D, cfg["rms_norm_eps"], dtype)
        self.k_norm = RMSNorm(D, cfg["rms_norm_eps"], dtype)

    def forward(self, h, cos, sin, mask):
        T = h.shape[0]
        q = self.q_norm(self.q_proj(h).view(T, self.nh, self.D)).transpose(0, 1)    # (nh, T, D)
        k = self.k_norm(self.k_proj(h).view(T, self.nkv, self.D)).transpose(0, 1)   # (nkv, T, D)
        v = self.v_proj(h).view(T, self.nkv, self.D).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        g = self.nh // self.nkv
        k = k.repeat_interleave(g, dim=0)   # query head h uses kv head h // g
        v = v.repeat_interleave(g, dim=0)
        s = torch.matmul(q, k.transpose(1, 2)) * (self.D ** -0.5) + mask
        sm_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        p = torch.softmax(s, dim=-1, dtype=sm_dtype).to(q.dtype)
        o = torch.matmul(p, v).transpose(0, 1).reshape(T, self.nh * self.D)
        return self.o_proj(o)


class MLP(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        H, I = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(H, I, bias=False, dtype=dtype)
        self.up_proj = nn.Linear(H, I, bias=False, dtype=dtype)
        self.down_proj = nn.Linear(I, H, bias=False, dtype=dtype)

    def forward(self, x):
        return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"], dtype)
        self.self_attn = Attention(cfg, dtype)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"], dtype)
        self.mlp = MLP(cfg, dtype)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"], dtype=dtype)
        self.layers = nn.ModuleList([Layer(cfg, dtype) for _ in range(cfg["num_hidden_layers"])])
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"], dtype)


class Qwen3(nn.Module):
    """Qwen3ForCausalLM over packed batches; parameter names as in HF checkpoints."""

    def __init__(self, cfg, dtype=torch.float32):
        super().__init__()
        self.cfg = dict(cfg)
        self.dtype = dtype
        self.model = Body(cfg, dtype)
        self.tied = bool(cfg.get("tie_word_embeddings", False))
        if not self.tied:
            self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False, dtype=dtype)

    def lm_weight(self):
        return self.model.embed_tokens.weight if self.tied else self.lm_head.weight

    def load_hf(self, sd):
        """Copy HF-named tensors in; lm_head.weight is ignored when tied. Every parameter must be present."""
        params = dict(self.named_parameters())
        with torch.no_grad():
            for name, p in params.items():
                if name not in sd:
                    raise KeyError(f"missing tensor {name}")
                if tuple(sd[name].shape) != tuple(p.shape):
                    raise ValueError(f"{name}: shape {tuple(sd[name].shape)} != {tuple(p.shape)}")
                p.copy_(sd[name].to(self.dtype))
        return self

    @staticmethod
    def packed_mask_pos(cu_seqlens, T, dtype):
        cu = [int(c) for c in cu_seqlens]
        seq = torch.empty(T, dtype=torch.int64)
        pos = torch.empty(T, dtype=torch.int64)
        for s in range(len(cu) - 1):
            seq[cu[s] : cu[s + 1]] = s
            pos[cu[s] : cu[s + 1]] = torch.arange(cu[s + 1] - cu[s])
        idx = torch.arange(T)
        ok = (seq[:, None] == seq[None, :]) & (idx[None, :] <= idx[:, None])
        mask = torch.zeros(T, T, dtype=dtype)
        mask.masked_fill_(~ok, torch.finfo(dtype).min)
        return mask, pos

    def hidden(self, input_ids, cu_seqlens):
        """Final-normed hidden states (T, H) of a packed batch."""
        T = input_ids.shape[0]
        mask, pos = self.packed_mask_pos(cu_seqlens, T, self.dtype)
        cos, sin = rope_cos_sin(pos, self.cfg["head_dim"], float(self.cfg["rope_theta"]), self.dtype)
        x = self.model.embed_tokens(input_ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        return self.model.norm(x)

    def forward(self, input_ids, cu_seqlens):
        h = self.hidden(input_ids, cu_seqlens)
        return h @ self.lm_weight().t(), h


def logprob_entropy(logits, targets, temperature=1.0):
    """logp (T) of targets (T; < 0 = none -> 0) and entropy (T) of softmax(logits / temperature)."""
    z = logits / temperature
    lsm = torch.log_softmax(z, dim=-1)
    tgt = targets.clamp(min=0)
    logp = lsm.gather(1, tgt[:, None])[:, 0] * (targets >= 0).to(z.dtype)
    ent = -(lsm.exp() * lsm).sum(-1)
    return logp, ent


# ---- the test driver -------------------------------------------------------------------------------------
def run_case(case_dir, dtype):
    """out.bin (float32, in order): logits (T,V), logp (T), entropy (T), then for loss = sum(dlogp*logp +
    dentropy*entropy): dhidden (T,H) and the gradient of every tensor listed in case.json "grad_names" (flat);
    then the same two for loss = sum(dlogp*logp) (entropy off)."""
    cfg = load_config(os.path.join(case_dir, "config.json"))
    sd = load_model_dir(case_dir)
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    model = Qwen3(cfg, dtype).load_hf(sd)
    ids = torch.tensor(case["tokens"], dtype=torch.int64)
    tgt = torch.tensor(case["targets"], dtype=torch.int64)
    dlogp = torch.tensor(case["dlogp"], dtype=dtype)
    dent = torch.tensor(case["dentropy"], dtype=dtype)
    h = model.hidden(ids, case["cu_seqlens"])
    logits = h @ model.lm_weight().t()
    logp, ent = logprob_entropy(logits, tgt, float(case["temperature"]))
    params = dict(model.named_parameters())
    names = ["model.embed_tokens.weight" if (n == "lm_head.weight" and model.tied) else n for n in case["grad_names"]]
    uniq = list(dict.fromkeys(names))
    parts = [logits.detach(), logp.detach(), ent.detach()]
    loss_lp = (dlogp * logp).sum()
    for i, loss in enumerate([loss_lp + (dent * ent).sum(), loss_lp]):
        grads = torch.autograd.grad(loss, [h] + [params[n] for n in uniq], retain_graph=(i == 0))
        by_name = dict(zip(uniq, grads[1:]))
        parts.append(grads[0])
        parts += [by_name[n] for n in names]
    blob = torch.cat([p.reshape(-1).to(torch.float32) for p in parts])
    blob.numpy().tofile(os.path.join(case_dir, "out.bin"))


def main(argv):
    if len(argv) >= 3 and argv[1] == "case":
        dtype = torch.float64
        if "--dtype" in argv:
            dtype = {"float64": torch.float64, "float32": torch.float32}[argv[argv.index("--dtype") + 1]]
        torch.set_num_threads(2)
        for d in argv[2:]:
            if d.startswith("--") or d in ("float64", "float32"):
                continue
            run_case(d, dtype)
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
