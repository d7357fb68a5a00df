"""torch_logprob.py: the PyTorch peer of bench_logprob (run by it, same weights and tokens).

Usage: torch_logprob.py MODEL_DIR TOKENS.json RLC_OUT.bin REPS THREADS
TOKENS.json = {"seqs": [[ids...], ...]}; RLC_OUT.bin = rlc's logp then entropy (float32, per sequence the
n-1 scored positions, concatenated). Prints one line per quantity, "key value", for the C side to parse.
Forward in float32 with the eager reference of tests/py/families_ref.py (every family), one sequence at a time
(a packed block-diagonal mask over all 4096 tokens would cost torch T x T x heads memory).
"""
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
    model_dir, tok_path, rlc_out, reps, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    cfg = F.resolve(json.load(open(os.path.join(model_dir, "config.json"))))
    model = F.Decoder(cfg, torch.float32).load_hf(Q.load_model_dir(model_dir))
    model.eval()
    seqs = json.load(open(tok_path))["seqs"]
    n_tok = sum(len(s) for s in seqs)
    times = []
    for _ in range(reps):
        lps, ents = [], []
        t0 = time.time()
        with torch.no_grad():
            for s in seqs:
                ids = torch.tensor(s, dtype=torch.int64)
                logits, _ = model(ids, [0, len(s)])
                lp, ent = Q.logprob_entropy(logits[:-1], ids[1:], 1.0)
                lps.append(lp)
                ents.append(ent)
        times.append(time.time() - t0)
    times.sort()
    t = times[len(times) // 2]
    print(f"torch_seconds {t:.3f}")
    print(f"torch_tokens_per_s {n_tok / t:.3f}")
    info = [w.split("=", 1)[1].rstrip(",") for w in torch.__config__.show().split() if w.startswith("BLAS_INFO=")]
    lib = os.path.realpath("/lib/x86_64-linux-gnu/libblas.so.3")
    print(f"torch_blas {info[0] if info else 'unknown'} ({lib}) OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')} "
          f"threads {torch.get_num_threads()}")
    ours = torch.from_numpy(__import__("numpy").fromfile(rlc_out, dtype="float32"))
    ref = torch.cat(lps + ents)
    err = (ours - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
    print(f"torch_max_rel_err {err:.3g}")
    print(f"torch_peak_rss_bytes {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}")


if __name__ == "__main__":
    main()
