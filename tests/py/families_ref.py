"""families_ref.py: a PyTorch reference of every decoder family rlc implements (qwen3, qwen2, llama, mistral,
gemma3_text), written from shared/spec/models.md §2-4 and qwen3.md §1 in transformers' terms, independent of
the C code: its own config.json resolution (class defaults, rope_scaling / rope_parameters, layer types), the
RoPE init functions of modeling_rope_utils.py (default, linear, dynamic, llama3, yarn) in float32, biases,
q/k norms, Gemma's (1 + w) RMSNorm, sandwich norms, GeGLU (gelu tanh), embedding scale, query_pre_attn_scalar,
sliding-window masks (masking_utils: j > i - W) and final-logit soft-capping. Eager attention over packed
batches (block-diagonal masks), float64 by default.

Importable:
    import families_ref as F
    cfg = F.resolve(json.load(open("DIR/config.json")))
    model = F.Decoder(cfg, torch.float64).load_hf(qwen3_ref.load_model_dir("DIR"))
    logits, hidden = model(input_ids, cu_seqlens)

As a script (tests/test_families.c):
    families_ref.py case CASE_DIR...      writes CASE_DIR/out.bin as qwen3_ref.py does (see run_case())
    families_ref.py rope CONFIG.json      prints the full-attention layers' inv_freq, one per line
    families_ref.py check DIR             loads an rlc checkpoint with the HF names; prints "ok <n tensors>"
    families_ref.py write DIR CONFIG.json SEED   writes a random HF-named checkpoint (model.safetensors) for rlc to read
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen3_ref as Q  # noqa: E402  (safetensors reading, log-prob/entropy)

# ---- config resolution (models.md §2) --------------------------------------------------------------------------
DEFAULTS = {
    "qwen3": dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32, num_attention_heads=32,
                  num_key_value_heads=32, max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=10000.0,
                  tie_word_embeddings=False, sliding_window=4096, max_window_layers=28, head_dim=128),
    "qwen2": dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32, num_attention_heads=32,
                  num_key_value_heads=32, max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=10000.0,
                  tie_word_embeddings=False, sliding_window=4096, max_window_layers=28),
    "llama": dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                  num_key_value_heads=None, max_position_embeddings=2048, rms_norm_eps=1e-6, rope_theta=10000.0,
                  tie_word_embeddings=False, attention_bias=False, mlp_bias=False),
    "mistral": dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                    num_key_value_heads=8, max_position_embeddings=131072, rms_norm_eps=1e-6, rope_theta=10000.0,
                    tie_word_embeddings=False, sliding_window=4096),
    "gemma3_text": dict(vocab_size=262208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
                        num_key_value_heads=4, head_dim=256, max_position_embeddings=131072, rms_norm_eps=1e-6,
                        rope_theta=1e6, rope_local_base_freq=10000.0, tie_word_embeddings=True, sliding_window=4096,
                        sliding_window_pattern=6, query_pre_attn_scalar=256, final_logit_softcapping=None,
                        attention_bias=False),
}


def resolve(raw):
    """A dict with every field the model needs, as the transformers config classes resolve config.json."""
    mt = raw["model_type"]
    c = dict(DEFAULTS[mt])
    c.update({k: v for k, v in raw.items() if v is not None or k in ("sliding_window", "final_logit_softcapping")})
    if c.get("num_key_value_heads") is None:
        c["num_key_value_heads"] = c["num_attention_heads"]
    if c.get("head_dim") is None:
        c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]
    L = c["num_hidden_layers"]
    # RoPE per layer type: v5 rope_parameters (maybe nested), else rope_scaling + rope_theta (+ Gemma's local base)
    rp = raw.get("rope_parameters")
    if isinstance(rp, dict) and ("full_attention" in rp or "sliding_attention" in rp):
        full = dict(rp.get("full_attention") or {})
        slide = dict(rp.get("sliding_attention") or full)
    elif isinstance(rp, dict):
        full = dict(rp)
        slide = {"rope_type": "default", "rope_theta": c.get("rope_local_base_freq", 10000.0)} if mt == "gemma3_text" else full
    else:
        full = dict(raw.get("rope_scaling") or {})
        full.setdefault("rope_theta", c["rope_theta"])
        slide = {"rope_type": "default", "rope_theta": c.get("rope_local_base_freq", 10000.0)} if mt == "gemma3_text" else full
    for d in (full, slide):
        if "type" in d and "rope_type" not in d:
            d["rope_type"] = d["type"]
        d.setdefault("rope_type", "default")
        d.setdefault("rope_theta", c["rope_theta"])
    c["_rope"] = {"full_attention": full, "sliding_attention": slide}
    # layer types
    sw = c.get("sliding_window")
    if mt in ("qwen2", "qwen3"):
        sw = sw if raw.get("use_sliding_window", False) else None
        if sw is None:
            types = ["full_attention"] * L
        elif raw.get("layer_types"):
            types = list(raw["layer_types"])
        else:
            types = ["sliding_attention" if i >= c["max_window_layers"] else "full_attention" for i in range(L)]
    elif mt == "mistral":
        types = ["sliding_attention" if sw is not None else "full_attention"] * L
    elif mt == "llama":
        sw, types = None, ["full_attention"] * L
    else:
        types = raw.get("layer_types") or [
            "sliding_attention" if (i + 1) % c["sliding_window_pattern"] else "full_attention" for i in range(L)]
    c["_layer_types"] = types
    c["_window"] = sw
    c["_qkv_bias"] = {"qwen2": True, "mistral": False}.get(mt, bool(c.get("attention_bias", False)))
    c["_o_bias"] = {"qwen2": False, "mistral": False}.get(mt, bool(c.get("attention_bias", False)))
    c["_mlp_bias"] = bool(c.get("mlp_bias", False)) if mt == "llama" else False
    c["_qk_norm"] = mt in ("qwen3", "gemma3_text")
    c["_gemma"] = mt == "gemma3_text"
    return c


# ---- RoPE (models.md §3; modeling_rope_utils.py) ------------------------------------------------------------------
def inv_freq_and_scaling(rp, dim, max_pos):
    base = float(rp["rope_theta"])
    t = rp["rope_type"]
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if t == "default":
        return inv, 1.0
    if t == "linear":
        return inv / rp["factor"], 1.0
    if t == "dynamic":
        # at init transformers computes it for seq_len = max_position_embeddings: the default frequencies
        seq_len = max_pos
        b2 = base * ((rp["factor"] * seq_len / max_pos) - (rp["factor"] - 1)) ** (dim / (dim - 2))
        return 1.0 / (b2 ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)), 1.0
    if t == "llama3":
        factor, lo, hi = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"]
        N = rp.get("original_max_position_embeddings", max_pos)
        low_wl, high_wl = N / lo, N / hi
        wavelen = 2 * math.pi / inv
        inv_l = torch.where(wavelen > low_wl, inv / factor, inv)
        smooth = (N / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
        medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
        return torch.where(medium, smoothed, inv_l), 1.0
    if t == "yarn":
        factor = rp["factor"]
        if "original_max_position_embeddings" in rp:
            orig = rp["original_max_position_embeddings"]
            factor = max_pos / orig
        else:
            orig = max_pos

        def get_mscale(s, m=1.0):
            return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0

        af = rp.get("attention_factor")
        if af is None:
            ms, msa = rp.get("mscale"), rp.get("mscale_all_dim")
            af = get_mscale(factor, ms) / get_mscale(factor, msa) if (ms and msa) else get_mscale(factor)
        bf, bs = rp.get("beta_fast", 32), rp.get("beta_slow", 1)

        def corr(r):
            return (dim * math.log(orig / (r * 2 * math.pi))) / (2 * math.log(base))

        low, high = corr(bf), corr(bs)
        if rp.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)
        extra = 1.0 / pos_freqs
        inter = 1.0 / (factor * pos_freqs)
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        ext_w = 1 - ramp
        return inter * (1 - ext_w) + extra * ext_w, af
    raise ValueError(f"rope type {t}")


def cos_sin(pos, rp, dim, max_pos, dtype):
    inv, scaling = inv_freq_and_scaling(rp, dim, max_pos)
    freq = pos.float()[:, None] * inv[None, :]
    emb = torch.cat([freq, freq], dim=-1)
    return (emb.cos() * scaling).to(dtype), (emb.sin() * scaling).to(dtype)


# ---- model (models.md §4) ----------------------------------------------------------------------------------------
class RMSNorm(nn.Module):
    """Llama/Qwen: normalise in fp32, cast, then * w. Gemma: fp32 x_hat * (1 + w), then cast (w stored as offset)."""

    def __init__(self, dim, eps, dtype, gemma):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim, dtype=dtype) if gemma else torch.ones(dim, dtype=dtype))
        self.eps, self.gemma = eps, gemma

    def forward(self, x):
        xf = x if x.dtype == torch.float64 else x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.gemma:
            return (y * (1.0 + self.weight.to(y.dtype))).to(x.dtype)
        return self.weight * y.to(x.dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Attention(nn.Module):
    def __init__(self, c, dtype):
        super().__init__()
        H, D = c["hidden_size"], c["head_dim"]
        self.nh, self.nkv, self.D = c["num_attention_heads"], c["num_key_value_heads"], D
        self.q_proj = nn.Linear(H, self.nh * D, bias=c["_qkv_bias"], dtype=dtype)
        self.k_proj = nn.Linear(H, self.nkv * D, bias=c["_qkv_bias"], dtype=dtype)
        self.v_proj = nn.Linear(H, self.nkv * D, bias=c["_qkv_bias"], dtype=dtype)
        self.o_proj = nn.Linear(self.nh * D, H, bias=c["_o_bias"], dtype=dtype)
        self.qk_norm = c["_qk_norm"]
        if self.qk_norm:
            self.q_norm = RMSNorm(D, c["rms_norm_eps"], dtype, c["_gemma"])
            self.k_norm = RMSNorm(D, c["rms_norm_eps"], dtype, c["_gemma"])
        self.scaling = c["query_pre_attn_scalar"] ** -0.5 if c["_gemma"] else D ** -0.5

    def forward(self, h, cos, sin, mask):
        T = h.shape[0]
        q = self.q_proj(h).view(T, self.nh, self.D)
        k = self.k_proj(h).view(T, self.nkv, self.D)
        v = self.v_proj(h).view(T, self.nkv, self.D).transpose(0, 1)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(0, 1), k.transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        g = self.nh // self.nkv
        k = k.repeat_interleave(g, dim=0)
        v = v.repeat_interleave(g, dim=0)
        s = torch.matmul(q, k.transpose(1, 2)) * self.scaling + mask
        sm = torch.float64 if q.dtype == torch.float64 else torch.float32
        p = torch.softmax(s, dim=-1, dtype=sm).to(q.dtype)
        return self.o_proj(torch.matmul(p, v).transpose(0, 1).reshape(T, self.nh * self.D))


class MLP(nn.Module):
    def __init__(self, c, dtype):
        super().__init__()
        H, I, b = c["hidden_size"], c["intermediate_size"], c["_mlp_bias"]
        self.gate_proj = nn.Linear(H, I, bias=b, dtype=dtype)
        self.up_proj = nn.Linear(H, I, bias=b, dtype=dtype)
        self.down_proj = nn.Linear(I, H, bias=b, dtype=dtype)
        self.gemma = c["_gemma"]

    def forward(self, x):
        g = self.gate_proj(x)
        a = torch.nn.functional.gelu(g, approximate="tanh") if self.gemma else torch.nn.functional.silu(g)
        return self.down_proj(a * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c, dtype):
        super().__init__()
        H, eps, gm = c["hidden_size"], c["rms_norm_eps"], c["_gemma"]
        self.gemma = gm
        self.input_layernorm = RMSNorm(H, eps, dtype, gm)
        self.self_attn = Attention(c, dtype)
        self.post_attention_layernorm = RMSNorm(H, eps, dtype, gm)
        if gm:
            self.pre_feedforward_layernorm = RMSNorm(H, eps, dtype, gm)
            self.post_feedforward_layernorm = RMSNorm(H, eps, dtype, gm)
        self.mlp = MLP(c, dtype)

    def forward(self, x, cos, sin, mask):
        if self.gemma:
            x = x + self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), cos, sin, mask))
            return x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, c, dtype):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"], dtype=dtype)
        self.layers = nn.ModuleList([Layer(c, dtype) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"], dtype, c["_gemma"])


class Decoder(nn.Module):
    def __init__(self, c, dtype=torch.float64):
        super().__init__()
        self.c, self.dtype = c, dtype
        self.model = Body(c, dtype)
        self.tied = bool(c["tie_word_embeddings"])
        if not self.tied:
            self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False, dtype=dtype)

    def lm_weight(self):
        return self.model.embed_tokens.weight if self.tied else self.lm_head.weight

    def load_hf(self, sd):
        params = dict(self.named_parameters())
        for name in sd:
            if name not in params and not (name == "lm_head.weight" and self.tied):
                raise KeyError(f"unexpected tensor {name}")
        with torch.no_grad():
            for name, p in params.items():
                if name not in sd:
                    raise KeyError(f"missing tensor {name}")
                if tuple(sd[name].shape) != tuple(p.shape):
                    raise ValueError(f"{name}: shape {tuple(sd[name].shape)} != {tuple(p.shape)}")
                p.copy_(sd[name].to(self.dtype))
        return self

    def embed_scale(self):
        if not self.c["_gemma"]:
            return None
        # torch.tensor(H**0.5) (float32) .to(weight dtype): rounded to the checkpoint's dtype when it runs in it
        dt = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(self.c.get("torch_dtype") or "float32", torch.float32)
        return float(torch.tensor(self.c["hidden_size"] ** 0.5).to(dt).float())

    def masks_pos(self, cu_seqlens, T):
        cu = [int(x) for x in cu_seqlens]
        seq = torch.empty(T, dtype=torch.int64)
        pos = torch.empty(T, dtype=torch.int64)
        for s in range(len(cu) - 1):
            seq[cu[s]:cu[s + 1]] = s
            pos[cu[s]:cu[s + 1]] = torch.arange(cu[s + 1] - cu[s])
        idx = torch.arange(T)
        causal = (seq[:, None] == seq[None, :]) & (idx[None, :] <= idx[:, None])
        out = {}
        for kind in ("full_attention", "sliding_attention"):
            ok = causal
            if kind == "sliding_attention" and self.c["_window"] is not None:
                ok = causal & (idx[None, :] > idx[:, None] - self.c["_window"])
            m = torch.zeros(T, T, dtype=self.dtype)
            m.masked_fill_(~ok, torch.finfo(self.dtype).min)
            out[kind] = m
        return out, pos

    def hidden(self, input_ids, cu_seqlens):
        T = input_ids.shape[0]
        masks, pos = self.masks_pos(cu_seqlens, T)
        D, mp = self.c["head_dim"], self.c["max_position_embeddings"]
        cs = {k: cos_sin(pos, self.c["_rope"][k], D, mp, self.dtype) for k in ("full_attention", "sliding_attention")}
        x = self.model.embed_tokens(input_ids)
        es = self.embed_scale()
        if es is not None:
            x = x * es
        for layer, kind in zip(self.model.layers, self.c["_layer_types"]):
            x = layer(x, cs[kind][0], cs[kind][1], masks[kind])
        return self.model.norm(x)

    def logits(self, h):
        z = h @ self.lm_weight().t()
        cap = self.c.get("final_logit_softcapping")
        if cap:
            z = cap * torch.tanh(z / cap)
        return z

    def forward(self, input_ids, cu_seqlens):
        h = self.hidden(input_ids, cu_seqlens)
        return self.logits(h), h


# ---- drivers ---------------------------------------------------------------------------------------------------------
def run_case(case_dir, dtype):
    """out.bin (float32): logits (T,V), logp (T), entropy (T); then for loss = sum(dlogp*logp + dentropy*entropy):
    dhidden (T,H) and each gradient of case.json "grad_names"; then the same for loss = sum(dlogp*logp)."""
    with open(os.path.join(case_dir, "config.json")) as f:
        cfg = resolve(json.load(f))
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    model = Decoder(cfg, dtype).load_hf(Q.load_model_dir(case_dir))
    ids = torch.tensor(case["tokens"], dtype=torch.int64)
    tgt = torch.tensor(case["targets"], dtype=torch.int64)
    dlogp = torch.tensor(case["dlogp"], dtype=dtype)
    dent = torch.tensor(case["dentropy"], dtype=dtype)
    h = model.hidden(ids, case["cu_seqlens"])
    logits = model.logits(h)
    logp, ent = Q.logprob_entropy(logits, tgt, float(case["temperature"]))
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
    torch.cat([p.reshape(-1).to(torch.float32) for p in parts]).numpy().tofile(os.path.join(case_dir, "out.bin"))


def write_st(path, tensors):
    """A float32 safetensors file (names sorted, as safetensors.torch.save_file writes them)."""
    header, off, blobs = {}, 0, []
    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.float32).contiguous()
        b = t.numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main(argv):
    torch.set_num_threads(2)
    if len(argv) >= 3 and argv[1] == "case":
        for d in argv[2:]:
            run_case(d, torch.float64)
        return 0
    if len(argv) == 3 and argv[1] == "rope":
        with open(argv[2]) as f:
            c = resolve(json.load(f))
        inv, sc = inv_freq_and_scaling(c["_rope"]["full_attention"], c["head_dim"], c["max_position_embeddings"])
        print(f"attention_scaling {sc:.9g}")
        for x in inv.tolist():
            print(f"{x:.9e}")
        return 0
    if len(argv) == 3 and argv[1] == "check":
        with open(os.path.join(argv[2], "config.json")) as f:
            c = resolve(json.load(f))
        sd = Q.load_model_dir(argv[2])
        m = Decoder(c, torch.float32).load_hf(sd)
        print(f"ok {len(dict(m.named_parameters()))}")
        return 0
    if len(argv) == 5 and argv[1] == "write":
        with open(argv[3]) as f:
            c = resolve(json.load(f))
        torch.manual_seed(int(argv[4]))
        m = Decoder(c, torch.float32)
        sd = {}
        for n, p in m.named_parameters():
            sd[n] = torch.randn(p.shape) * 0.1
        os.makedirs(argv[2], exist_ok=True)
        write_st(os.path.join(argv[2], "model.safetensors"), sd)
        with open(os.path.join(argv[2], "config.json"), "w") as f:
            with open(argv[3]) as g:
                f.write(g.read())
        # the sum of every tensor, for the C side to compare with what it loaded
        print(" ".join(f"{n}={float(t.double().sum()):.9g}" for n, t in sorted(sd.items())))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
