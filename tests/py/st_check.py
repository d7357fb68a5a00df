"""st_check.py: the PyTorch side of tests/test_safetensors.c (uses st.py).

  st_check.py read-c FILE            check a file rlc wrote: src (F32) vs src_bf16/src_f16 (torch rounding, bitwise)
  st_check.py write-py FILE          write every F16/BF16 bit pattern + random tensors, each with an F32 twin
  st_check.py ckpt-check DIR DTYPE   check an rlc checkpoint: HF names/shapes from DIR/config.json, dtype, header
  st_check.py ckpt-write DIR REF DTYPE SHARDS LM_HEAD   write an HF checkpoint for DIR/config.json (+ REF fp32 copy)
  st_check.py ckpt-compare DIR REF   DIR's tensors (any float dtype) == REF's exactly (as fp32)
  st_check.py ckpt-names DIR         DIR/model.safetensors has exactly the HF names/shapes of DIR/config.json
  st_check.py batch CMDS OUT         run each line "TAG CMD ARGS..." of CMDS (one torch start for many checks);
                                     OUT gets "TAG ok" or "TAG FAIL message" per line
Exit status 0 = ok; a failure prints one line.
"""
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402


class CheckFailed(Exception):
    pass


def fail(msg):
    raise CheckFailed(msg)


def bits16(t):
    return t.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF


def same_bits(a, b):
    """a, b: float tensors of one dtype; NaNs compare equal to NaNs."""
    na, nb = torch.isnan(a.float()), torch.isnan(b.float())
    if not torch.equal(na, nb):
        return False
    if a.dtype in (torch.bfloat16, torch.float16):
        return torch.equal(bits16(a)[~na], bits16(b)[~nb])
    return torch.equal(a.view(torch.int32)[~na], b.view(torch.int32)[~nb])


def check_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        hdr = f.read(n)
    if n % 8 != 0:
        fail("%s: header length %d not a multiple of 8" % (path, n))
    if hdr.rstrip(b" ") != hdr[:len(hdr.rstrip(b" "))] or not hdr.rstrip(b" ").endswith(b"}"):
        fail("%s: header not space padded" % path)
    meta = json.loads(hdr).get("__metadata__")
    if meta != {"format": "pt"}:
        fail("%s: __metadata__ = %r" % (path, meta))


def read_c(path):
    check_header(path)
    t = st.read_safetensors(path)
    src = t["src"]
    if src.dtype != torch.float32:
        fail("src dtype")
    if not same_bits(t["src_bf16"], src.to(torch.bfloat16)):
        bad = (bits16(t["src_bf16"]) != bits16(src.to(torch.bfloat16))).nonzero()[:3].flatten().tolist()
        fail("BF16 rounding differs from torch at %s" % [(i, src[i].item()) for i in bad])
    if not same_bits(t["src_f16"], src.to(torch.float16)):
        bad = (bits16(t["src_f16"]) != bits16(src.to(torch.float16))).nonzero()[:3].flatten().tolist()
        fail("F16 rounding differs from torch at %s" % [(i, src[i].item(), hex(bits16(t['src_f16'])[i].item()),
                                                          hex(bits16(src.to(torch.float16))[i].item())) for i in bad])
    if t["scalar"].shape != () or t["scalar"].item() != 3.5:
        fail("scalar")
    if t["empty"].shape != (0, 4):
        fail("empty shape %s" % (t["empty"].shape,))
    if t["cube"].shape != (2, 3, 4) or not torch.equal(t["cube"], torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)):
        fail("cube")
    if t["ints"].dtype != torch.int32 or t["ints"].tolist() != [-1, 0, 7]:
        fail("ints")
    print("st_check: ok read-c %d values" % src.numel())


def write_py(path):
    g = torch.Generator().manual_seed(1234)
    pat = torch.arange(65536, dtype=torch.int32).to(torch.int16)   # wraps: every 16-bit pattern
    f16 = pat.view(torch.float16)
    b16 = pat.view(torch.bfloat16)
    r = torch.randn(1000, 37, generator=g) * 3
    d = {
        "all_f16": f16, "all_f16_as_f32": f16.float(),
        "all_bf16": b16, "all_bf16_as_f32": b16.float(),
        "r_bf16": r.to(torch.bfloat16), "r_bf16_as_f32": r.to(torch.bfloat16).float(),
        "r_f16": r.to(torch.float16), "r_f16_as_f32": r.to(torch.float16).float(),
        "r_f32": r, "r_f32_as_f32": r,
        "r_f64": r.double(), "r_f64_as_f32": r.double().float(),
    }
    st.write_safetensors(path, d)
    print("st_check: ok write-py")


def expected_params(cfg):
    V, H, I, L = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    nh, nkv, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    p = {"model.embed_tokens.weight": (V, H)}
    for l in range(L):
        pre = "model.layers.%d." % l
        p[pre + "input_layernorm.weight"] = (H,)
        p[pre + "self_attn.q_proj.weight"] = (nh * D, H)
        p[pre + "self_attn.k_proj.weight"] = (nkv * D, H)
        p[pre + "self_attn.v_proj.weight"] = (nkv * D, H)
        p[pre + "self_attn.o_proj.weight"] = (H, nh * D)
        p[pre + "self_attn.q_norm.weight"] = (D,)
        p[pre + "self_attn.k_norm.weight"] = (D,)
        p[pre + "post_attention_layernorm.weight"] = (H,)
        p[pre + "mlp.gate_proj.weight"] = (I, H)
        p[pre + "mlp.up_proj.weight"] = (I, H)
        p[pre + "mlp.down_proj.weight"] = (H, I)
    p["model.norm.weight"] = (H,)
    if not cfg["tie_word_embeddings"]:
        p["lm_head.weight"] = (V, H)
    return p


DT = {"bf16": torch.bfloat16, "f32": torch.float32, "f16": torch.float16}
TORCH_DTYPE = {"bf16": "bfloat16", "f32": "float32", "f16": "float16"}


def ckpt_check(d, dtype):
    cfg = json.load(open(os.path.join(d, "config.json")))
    for k in ("architectures", "model_type", "vocab_size", "hidden_size", "head_dim", "torch_dtype", "tie_word_embeddings"):
        if k not in cfg:
            fail("config.json lacks %s" % k)
    if cfg["architectures"] != ["Qwen3ForCausalLM"] or cfg["model_type"] != "qwen3":
        fail("architectures/model_type")
    if cfg["torch_dtype"] != TORCH_DTYPE[dtype]:
        fail("torch_dtype %s for %s" % (cfg["torch_dtype"], dtype))
    path = os.path.join(d, "model.safetensors")
    check_header(path)
    t = st.read_safetensors(path)
    want = expected_params(cfg)
    if set(t) != set(want):
        fail("names: extra %s missing %s" % (sorted(set(t) - set(want))[:3], sorted(set(want) - set(t))[:3]))
    for k, shp in want.items():
        if tuple(t[k].shape) != shp or t[k].dtype != DT[dtype]:
            fail("%s: %s %s, want %s %s" % (k, tuple(t[k].shape), t[k].dtype, shp, DT[dtype]))
        if k.endswith("norm.weight"):
            if not torch.all(t[k] == 1):
                fail("%s not ones" % k)
        else:
            x = t[k].float()
            std = cfg.get("initializer_range", 0.02)
            if x.numel() >= 1000 and (abs(x.mean().item()) > 5 * std / x.numel() ** 0.5 + 1e-6 or abs(x.std().item() / std - 1) > 0.1):
                fail("%s: mean %g std %g, want normal(0, %g)" % (k, x.mean().item(), x.std().item(), std))
    print("st_check: ok ckpt-check %d tensors" % len(t))


def ckpt_write(d, ref, dtype, shards, lm_head):
    cfg = json.load(open(os.path.join(d, "config.json")))
    g = torch.Generator().manual_seed(99)
    want = expected_params(cfg)
    if lm_head == "1" and "lm_head.weight" not in want:
        want["lm_head.weight"] = (cfg["vocab_size"], cfg["hidden_size"])   # tied, stored anyway (as Qwen3-0.6B)
    ts = {k: torch.randn(*s, generator=g) * (0.5 if len(s) == 1 else 0.05) + (1.0 if len(s) == 1 else 0.0)
          for k, s in want.items()}
    ts = {k: v.to(DT[dtype]) for k, v in ts.items()}
    if int(shards) > 1:
        st.write_sharded(d, ts, n_shards=int(shards))
    else:
        st.write_safetensors(os.path.join(d, "model.safetensors"), ts)
    st.write_safetensors(ref, {k: v.float() for k, v in ts.items() if k != "lm_head.weight" or not cfg["tie_word_embeddings"]})
    print("st_check: ok ckpt-write %d tensors" % len(ts))


def ckpt_compare(d, ref):
    a = st.read_model_dir(d)
    b = st.read_safetensors(ref)
    if set(a) != set(b):
        fail("names differ: %s vs %s" % (sorted(set(a) ^ set(b))[:4], ""))
    for k in b:
        if not torch.equal(a[k].float(), b[k]):
            fail("%s differs: max %g" % (k, (a[k].float() - b[k]).abs().max().item()))
    print("st_check: ok ckpt-compare %d tensors" % len(b))


def ckpt_names(d):
    path = os.path.join(d, "model.safetensors")
    check_header(path)
    t = st.read_safetensors(path)
    want = expected_params(json.load(open(os.path.join(d, "config.json"))))
    got = {k: tuple(v.shape) for k, v in t.items()}
    if got != want:
        fail("%s: names/shapes differ from config.json" % path)
    print("st_check: ok ckpt-names %d tensors" % len(t))


COMMANDS = {"read-c": read_c, "write-py": write_py, "ckpt-check": ckpt_check, "ckpt-write": ckpt_write,
            "ckpt-compare": ckpt_compare, "ckpt-names": ckpt_names}


def run(argv):
    if argv[0] not in COMMANDS:
        fail("unknown command " + argv[0])
    COMMANDS[argv[0]](*argv[1:])


def batch(cmds, out):
    res = []
    for line in open(cmds):
        parts = line.split()
        if not parts:
            continue
        try:
            run(parts[1:])
            res.append(parts[0] + " ok")
        except Exception as e:   # report every failure, keep going
            res.append("%s FAIL %s: %s" % (parts[0], type(e).__name__, str(e).replace("\n", " ")))
    with open(out, "w") as f:
        f.write("\n".join(res) + "\n")


if __name__ == "__main__":
    try:
        if sys.argv[1] == "batch":
            batch(sys.argv[2], sys.argv[3])
        else:
            run(sys.argv[1:])
    except CheckFailed as e:
        print("st_check: FAIL: %s" % e)
        sys.exit(1)
