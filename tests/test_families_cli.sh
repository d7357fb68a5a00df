#!/usr/bin/env bash
# test_families_cli.sh: every non-Qwen3 family through the binary on a tiny random checkpoint with a BPE
# tokenizer trained here: `rlc init` from the family's config.json, then `rlc sft`, `rlc train` (GRPO, one step),
# `rlc eval`, `rlc generate` and `rlc logprob`; and, where mpirun exists, `mpirun -np 2 rlc sft` == 1 process.
# The configs use each family's own config.json form: Qwen2 biases, Llama 3 RoPE scaling with MLP biases (not
# attention biases here: under llama3 RoPE most of a small head's channels barely rotate, so the k bias shifts
# every score of a query almost equally and its gradient nearly cancels; AdamW turns the rank-order rounding of
# that near-zero gradient into a weight difference of ~1e-4 between 1 and 2 ranks. test_families checks those
# biases against torch), Mistral's all-layer sliding window, Gemma 3's sandwich norms, GeGLU, local/global RoPE and sliding
# windows shorter than the sequences.
set -u
cd "$(dirname "$0")/.."
B=${RLC_BUILD:-build}
RLC=$B/rlc
pass=0; fail=0; skip=0
ok() { pass=$((pass+1)); echo "ok $1"; }
bad() { fail=$((fail+1)); echo "FAIL: $1"; }
if [ ! -x "$RLC" ]; then echo "skip: $RLC missing (run make)"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlc-famcli-XXXXXX"); [ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT; echo "tmp $tmp"

# data and a tokenizer (as test_dist.sh's GRPO fixture)
"$RLC" gen-task --out "$tmp/sft.jsonl" --n 200 --seed 1 --format sft >/dev/null &&
"$RLC" gen-task --out "$tmp/train.jsonl" --n 4 --seed 2 >/dev/null &&
"$RLC" gen-task --out "$tmp/val.jsonl" --n 2 --seed 3 >/dev/null &&
"$RLC" train-tokenizer --data "$tmp/sft.jsonl" --fields prompt,response --out "$tmp/tok" --vocab-size 300 >/dev/null ||
  { bad "fixture data and tokenizer"; echo "$pass passed, $fail failed"; exit 1; }
/usr/bin/python3 - "$tmp/ids.jsonl" <<'PY'
import json, random, sys
r = random.Random(7)
with open(sys.argv[1], "w") as f:
    for i in range(24):
        n = r.randint(4, 90)
        ids = [r.randrange(300) for _ in range(n)]
        f.write(json.dumps({"input_ids": ids, "loss_mask": [0] * (n // 3) + [1] * (n - n // 3)}) + "\n")
PY
printf '%s\n' '{"prompt": "Tom has 3 apples and buys 4 more. How many apples does he have?"}' \
  '{"input_ids": [5, 17, 42, 99, 7]}' > "$tmp/prompts.jsonl"

common='"vocab_size": 320, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "max_position_embeddings": 512,
 "rms_norm_eps": 1e-06, "bos_token_id": null, "eos_token_id": 302, "initializer_range": 0.3, "torch_dtype": "float32"'
declare -A CFG
CFG[qwen2]="{\"model_type\": \"qwen2\", $common, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,
 \"rope_theta\": 1000000.0, \"tie_word_embeddings\": true, \"use_sliding_window\": false, \"sliding_window\": 32768}"
CFG[llama]="{\"model_type\": \"llama\", $common, \"num_attention_heads\": 4, \"num_key_value_heads\": 1, \"head_dim\": 16,
 \"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0,
 \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}, \"attention_bias\": false, \"mlp_bias\": true,
 \"tie_word_embeddings\": false}"
CFG[mistral]="{\"model_type\": \"mistral\", $common, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,
 \"rope_theta\": 1000000.0, \"sliding_window\": 24, \"tie_word_embeddings\": false}"
CFG[gemma3_text]="{\"model_type\": \"gemma3_text\", $common, \"num_attention_heads\": 2, \"num_key_value_heads\": 1,
 \"head_dim\": 16, \"rope_theta\": 1000000.0, \"rope_local_base_freq\": 10000.0, \"sliding_window\": 24,
 \"sliding_window_pattern\": 2, \"query_pre_attn_scalar\": 16, \"hidden_activation\": \"gelu_pytorch_tanh\",
 \"tie_word_embeddings\": true}"

for fam in qwen2 llama mistral gemma3_text; do
  d="$tmp/$fam"; mkdir -p "$d"
  echo "${CFG[$fam]}" > "$d/config.json"
  if ! "$RLC" init --config "$d/config.json" --out "$d/m" --seed 3 --tokenizer "$tmp/tok" >"$d/init.log" 2>&1; then
    bad "$fam: rlc init"; cat "$d/init.log"; continue; fi
  grep -Eq "\"model_type\":[[:space:]]*\"$fam\"" "$d/m/config.json" && ok "$fam: rlc init writes a $fam config.json" || bad "$fam: init config"
  sargs="--data $tmp/ids.jsonl --steps 2 --batch-size 8 --micro-batch-tokens 128 --lr 2e-3 --seed 1 --threads 1"
  if timeout 120 "$RLC" sft --model "$d/m" $sargs --out "$d/sft" >"$d/sft.log" 2>&1; then ok "$fam: rlc sft"
  else bad "$fam: rlc sft"; tail -3 "$d/sft.log"; fi
  cat > "$d/grpo.yaml" <<Y
data: {train_files: $tmp/train.jsonl, val_files: $tmp/val.jsonl, train_batch_size: 2, max_prompt_length: 256,
       max_response_length: 40, seed: 1}
actor_rollout_ref:
  model: {path: $d/m}
  actor: {optim: {lr: 1.0e-3}, ppo_mini_batch_size: 2, ppo_micro_batch_size_per_gpu: 2, use_kl_loss: true, kl_loss_coef: 0.1}
  rollout: {n: 2, temperature: 0.8}
algorithm: {adv_estimator: grpo}
custom_reward_function: {command: /usr/bin/python3 tests/py/grpo_reward.py}
trainer: {total_training_steps: 1, test_freq: 1, save_freq: 1, val_before_train: false, n_threads: 1, default_local_dir: $d/run}
Y
  if timeout 300 "$RLC" train "$d/grpo.yaml" >"$d/train.log" 2>&1 && [ -f "$d/run/metrics.jsonl" ]; then ok "$fam: rlc train (GRPO, 1 step)"
  else bad "$fam: rlc train"; tail -3 "$d/train.log"; fi
  if timeout 120 "$RLC" eval "$d/grpo.yaml" >"$d/eval.log" 2>&1; then ok "$fam: rlc eval"
  else bad "$fam: rlc eval"; tail -3 "$d/eval.log"; fi
  if timeout 120 "$RLC" generate --model "$d/m" --prompts "$tmp/prompts.jsonl" --out "$d/gen.jsonl" --n 2 --max-new-tokens 30 \
       --seed 5 --chat-template plain --threads 1 >/dev/null 2>&1 && [ "$(wc -l < "$d/gen.jsonl")" -eq 4 ]; then
    ok "$fam: rlc generate (4 samples)"
  else bad "$fam: rlc generate"; fi
  head -3 "$tmp/ids.jsonl" | sed 's/, "loss_mask": \[[0-9, ]*\]//' > "$d/lp_in.jsonl"
  if timeout 60 "$RLC" logprob --model "$d/m" --data "$d/lp_in.jsonl" --out "$d/lp.jsonl" --threads 1 >/dev/null 2>&1 &&
     [ "$(grep -c '"logprobs"' "$d/lp.jsonl")" -eq 3 ]; then ok "$fam: rlc logprob"
  else bad "$fam: rlc logprob"; fi
  if command -v mpirun >/dev/null && "$RLC" --help 2>&1 | grep -q . && [ -f "$d/sft/model.safetensors" ]; then
    MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader"
    if timeout 120 $MPIRUN "$RLC" sft --model "$d/m" $sargs --out "$d/sft2" >"$d/sft2.log" 2>&1; then
      r=$(/usr/bin/python3 - "$d/sft2/model.safetensors" "$d/sft/model.safetensors" <<'PY'
import json, struct, sys
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8+n]); out = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        s, e = v["data_offsets"]
        dt = v["dtype"]
        if dt == "F32": out[k] = struct.unpack("<%df" % ((e - s) // 4), b[8+n+s:8+n+e])
        else: out[k] = [struct.unpack("<f", b"\0\0" + b[8+n+s+i:8+n+s+i+2])[0] for i in range(0, e - s, 2)]
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys()
num = max(max(abs(x - y) for x, y in zip(a[k], b[k])) for k in a)
den = max(max(abs(y) for y in b[k]) for k in b)
print("%.3g" % (num / den))
PY
)
      # the same fp32 maths; the gradient sum over ranks and the norm summation order differ
      if /usr/bin/python3 -c "import sys; sys.exit(0 if float('$r') <= 1e-5 else 1)" 2>/dev/null; then
        ok "$fam: mpirun -np 2 rlc sft == 1 process (rel err $r)"
      else bad "$fam: 2-rank sft vs 1 process: rel err $r"; fi
    else bad "$fam: mpirun -np 2 rlc sft"; tail -3 "$d/sft2.log"; fi
  else
    echo "skip: $fam data parallel (no mpirun or no sft output)"; skip=$((skip+1))
  fi
done
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
