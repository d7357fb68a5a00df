"""st.py: pure python + torch safetensors reader/writer (the safetensors package is not installable here).

    import sys; sys.path.insert(0, "tests/py"); import st
    tensors = st.read_safetensors("model.safetensors")            # dict name -> torch.Tensor
    st.write_safetensors("out.safetensors", tensors, dtype=torch.bfloat16)
    st.read_model_dir("DIR")                                       # single file or sharded index
    st.write_sharded("DIR", tensors, n_shards=2)

Follows the format exactly (shared/spec/qwen3.md §3): u64 little-endian header length N, N bytes of JSON
(padded with spaces to a multiple of 8), then the data buffer; tensors tile the buffer contiguously.
read_safetensors checks offsets, sizes and contiguous tiling and raises ValueError (the C reader,
src/io/safetensors.c, is the complete validator). Dtypes: BOOL U8 I8 I16 I32 I64 F16 BF16 F32 F64
(torch 1.13 has no U16/U32/U64/F8 types).
"""
import json
import os
import struct

import torch

DTYPES = {
    "BOOL": (torch.bool, 1), "U8": (torch.uint8, 1), "I8": (torch.int8, 1), "I16": (torch.int16, 2),
    "F16": (torch.float16, 2), "BF16": (torch.bfloat16, 2), "I32": (torch.int32, 4), "F32": (torch.float32, 4),
    "F64": (torch.float64, 8), "I64": (torch.int64, 8),
}
NAME_OF = {v[0]: k for k, v in DTYPES.items()}
MAX_HEADER = 100_000_000


def _no_dup_pairs(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError("duplicate key %r" % k)
        d[k] = v
    return d


def read_header(path):
    """Returns (header dict, data offset, file size)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if size < 8:
            raise ValueError("%s: too short" % path)
        (n,) = struct.unpack("<Q", f.read(8))
        if n > MAX_HEADER or n > size - 8:
            raise ValueError("%s: header length %d invalid" % (path, n))
        hdr = json.loads(f.read(n).decode("utf-8"), object_pairs_hook=_no_dup_pairs)
    return hdr, 8 + n, size


def read_safetensors(path, with_metadata=False):
    hdr, base, size = read_header(path)
    meta = hdr.pop("__metadata__", None)
    out, spans = {}, []
    with open(path, "rb") as f:
        blob = f.read()
    for name, info in hdr.items():
        dt, width = DTYPES[info["dtype"]]
        shape = [int(s) for s in info["shape"]]
        b, e = info["data_offsets"]
        n = 1
        for s in shape:
            n *= s
        if e - b != n * width or base + e > size:
            raise ValueError("%s: tensor %s: bad data_offsets" % (path, name))
        spans.append((b, e))
        buf = bytearray(blob[base + b:base + e])
        if n == 0:
            t = torch.zeros(shape, dtype=dt)
        else:
            t = torch.frombuffer(buf, dtype=dt).reshape(shape).clone()
        out[name] = t
    pos = 0
    for b, e in sorted(spans):
        if b != pos:
            raise ValueError("%s: offsets not contiguous" % path)
        pos = e
    if pos != size - base:
        raise ValueError("%s: data buffer length mismatch" % path)
    return (out, meta) if with_metadata else out


def _bytes_of(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16 or t.dtype == torch.float16:
        return t.view(torch.int16).numpy().tobytes()
    if t.dtype == torch.bool:
        return t.to(torch.uint8).numpy().tobytes()
    return t.numpy().tobytes()


def write_safetensors(path, tensors, dtype=None, metadata=None):
    """tensors: dict name -> tensor (written in dict order). dtype: convert floating tensors to it."""
    if metadata is None:
        metadata = {"format": "pt"}
    hdr, blobs, off = {}, [], 0
    if metadata:
        hdr["__metadata__"] = dict(metadata)
    for name, t in tensors.items():
        t = t.detach().cpu()
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        b = _bytes_of(t)
        hdr[name] = {"dtype": NAME_OF[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(hdr, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def write_sharded(dirpath, tensors, n_shards=2, dtype=None):
    """HF-style shards model-0000K-of-0000N.safetensors + model.safetensors.index.json."""
    names = list(tensors)
    per = (len(names) + n_shards - 1) // n_shards
    weight_map, total = {}, 0
    for k in range(n_shards):
        fn = "model-%05d-of-%05d.safetensors" % (k + 1, n_shards)
        part = {n: tensors[n] for n in names[k * per:(k + 1) * per]}
        write_safetensors(os.path.join(dirpath, fn), part, dtype=dtype)
        for n, t in part.items():
            weight_map[n] = fn
            total += t.numel() * (t.element_size() if dtype is None else torch.tensor([], dtype=dtype).element_size())
    with open(os.path.join(dirpath, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def read_model_dir(dirpath):
    """All tensors of an HF model directory (single file preferred, as transformers does)."""
    single = os.path.join(dirpath, "model.safetensors")
    if os.path.exists(single):
        return read_safetensors(single)
    with open(os.path.join(dirpath, "model.safetensors.index.json")) as f:
        wm = json.load(f)["weight_map"]
    out = {}
    for fn in sorted(set(wm.values())):
        out.update(read_safetensors(os.path.join(dirpath, fn)))
    return out
