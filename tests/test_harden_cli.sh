#!/usr/bin/env bash
# test_harden_cli.sh: hostile inputs through the rlc binary. A checkpoint with one NaN weight is refused by
# `rlc logprob` and `rlc generate` naming the tensor; with --allow-nonfinite logprob writes null outputs and
# generate stops at the sampler's non-finite logits; `rlc init` refuses up front a model the disk cannot hold or
# that exceeds rlc's size limit; `rlc tokenize` stops a backtracking pre-tokenizer regex naming file and pattern; a
# dataset row, SFT text row or `rlc generate` prompt that renders to a token id past config.json's vocab_size is
# refused naming the file, line and key, while a tokenizer that merely defines such an id (Gemma 3's image token) is
# accepted.
set -u
cd "$(dirname "$0")/.."
B=${RLC_BUILD:-build}
RLC=$B/rlc
pass=0; fail=0
ok() { pass=$((pass+1)); echo "ok $1"; }
bad() { fail=$((fail+1)); echo "FAIL: $1"; }
if [ ! -x "$RLC" ]; then echo "skip: $RLC missing (run make)"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlc-hardcli-XXXXXX"); [ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT; echo "tmp $tmp"
# one error line containing $2 (and exit 1)
one_error() {   # what, needle, stderr file, exit code
  local n; n=$(grep -c . "$3")
  if [ "$4" -eq 1 ] && [ "$n" -eq 1 ] && grep -q '^rlc: error: ' "$3" && grep -qF -- "$2" "$3"; then ok "$1: $(cat "$3")"
  else bad "$1: exit $4, stderr: $(head -c 600 "$3")"; fi
}

cat > "$tmp/config.json" <<'J'
{"model_type": "qwen3", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 128, "rms_norm_eps": 1e-06,
 "rope_theta": 10000.0, "tie_word_embeddings": false, "bos_token_id": null, "eos_token_id": 1, "torch_dtype": "float32"}
J
"$RLC" init --config "$tmp/config.json" --out "$tmp/m" --seed 3 --dtype f32 >/dev/null 2>&1 || { bad "rlc init"; echo "$pass passed, $fail failed"; exit 1; }
# a NaN in one weight of model.layers.1.mlp.up_proj.weight
/usr/bin/python3 - "$tmp/m/model.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
off = 8 + n + h["model.layers.1.mlp.up_proj.weight"]["data_offsets"][0] + 4 * 7
b[off:off + 4] = struct.pack("<f", float("nan"))
open(p, "wb").write(bytes(b))
PY
printf '%s\n' '{"input_ids": [5, 17, 42, 9, 7]}' '{"input_ids": [3, 4]}' > "$tmp/ids.jsonl"
"$RLC" logprob --model "$tmp/m" --data "$tmp/ids.jsonl" --out "$tmp/lp.jsonl" --threads 1 >/dev/null 2>"$tmp/e1"
one_error "logprob refuses a NaN weight" "tensor 'model.layers.1.mlp.up_proj.weight' element 7 is nan" "$tmp/e1" $?
"$RLC" generate --model "$tmp/m" --prompts "$tmp/ids.jsonl" --out "$tmp/g.jsonl" --max-new-tokens 4 --threads 1 >/dev/null 2>"$tmp/e2"
one_error "generate refuses a NaN weight" "--allow-nonfinite" "$tmp/e2" $?
"$RLC" logprob --model "$tmp/m" --data "$tmp/ids.jsonl" --out "$tmp/lp.jsonl" --threads 1 --allow-nonfinite >/dev/null 2>"$tmp/e3"
rc=$?
[ $rc -eq 0 ] && grep -q '^rlc: warning: .*up_proj.weight' "$tmp/e3" && grep -q '"logprobs": \[null' "$tmp/lp.jsonl" &&
  ok "logprob --allow-nonfinite loads it with a warning and writes null outputs" || bad "logprob --allow-nonfinite: exit $rc $(cat "$tmp/e3")"
"$RLC" generate --model "$tmp/m" --prompts "$tmp/ids.jsonl" --out "$tmp/g.jsonl" --max-new-tokens 4 --threads 1 \
  --allow-nonfinite >/dev/null 2>"$tmp/e4"
rc=$?; grep -v '^rlc: warning:' "$tmp/e4" | grep -v '^\s*$' | grep -v 'rlc generate' > "$tmp/e4b" || true
one_error "generate --allow-nonfinite stops at non-finite logits" "logits are not finite" "$tmp/e4b" $rc
"$RLC" generate --model "$tmp/m" --prompts "$tmp/ids.jsonl" --out "$tmp/g.jsonl" --max-new-tokens 4 --threads 1 --greedy \
  --allow-nonfinite >/dev/null 2>"$tmp/e5"
rc=$?; grep -v '^rlc: warning:' "$tmp/e5" | grep -v 'rlc generate' > "$tmp/e5b" || true
one_error "greedy generate --allow-nonfinite stops at non-finite logits" "logits are not finite" "$tmp/e5b" $rc

# sizes: beyond 2^40 parameters, and a model larger than the free disk space (1.1 TB in bf16)
big() { printf '{"model_type": "qwen3", "vocab_size": %s, "hidden_size": %s, "intermediate_size": %s, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 8, "head_dim": 64, "tie_word_embeddings": true}' "$1" "$2" "$3" > "$tmp/big.json"; }
big 1073741824 1073741824 1073741824
timeout 60 "$RLC" init --config "$tmp/big.json" --out "$tmp/big" >/dev/null 2>"$tmp/e6"
one_error "init of vocab, hidden, intermediate 2^30" "limited to 2^40 parameters" "$tmp/e6" $?
big 67108864 8192 8192
timeout 60 "$RLC" init --config "$tmp/big.json" --out "$tmp/big" >/dev/null 2>"$tmp/e7"
rc=$?
free_gb=$(df -P -k "$tmp" | awk 'NR==2 {print int($4 / 1048576)}')
if [ "$free_gb" -lt 1000 ]; then
  one_error "init of a 1.1 TB model on a disk with ${free_gb} GiB free" "GiB free" "$tmp/e7" $rc
  [ ! -e "$tmp/big/model.safetensors" ] && ok "nothing is written" || bad "init wrote $(ls -la "$tmp/big")"
else echo "skip: the disk has more than 1000 GiB free"; fi

# a pre-tokenizer regex with nested quantifiers on a 4,000-character line
/usr/bin/python3 - "$tmp/tok" <<'PY'
import json, os, sys
os.makedirs(sys.argv[1], exist_ok=True)
t = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
     "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a*a*b|a"}, "behavior": "Isolated", "invert": False}}
json.dump(t, open(os.path.join(sys.argv[1], "tokenizer.json"), "w"))
PY
head -c 4000 /dev/zero | tr '\0' a > "$tmp/line.txt"
timeout 20 "$RLC" tokenize --tokenizer "$tmp/tok" < "$tmp/line.txt" >/dev/null 2>"$tmp/e8"
one_error "tokenize with a backtracking Split regex" "tok/tokenizer.json: pre_tokenizer regex 'a*a*b|a' failed" "$tmp/e8" $?

# a prompt token outside the model's vocabulary: the tokenizer has an added token past config.json's vocab_size
# (as Gemma 3's image token), and one row uses it. Refused when the data loads, naming the file, line and key; the
# same tokenizer on rows that never produce the id is accepted.
"$RLC" gen-task --out "$tmp/sft.jsonl" --n 40 --seed 1 --format sft >/dev/null &&
"$RLC" train-tokenizer --data "$tmp/sft.jsonl" --fields prompt,response --out "$tmp/vtok" --vocab-size 280 >/dev/null ||
  bad "fixture tokenizer"
V=$(/usr/bin/python3 - "$tmp/vtok/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ids = list(t["model"]["vocab"].values()) + [a["id"] for a in t.get("added_tokens", [])]
print(max(ids) + 1)
PY
)
sed "s/\"vocab_size\": 64/\"vocab_size\": $V/; s/\"eos_token_id\": 1/\"eos_token_id\": $((V - 1))/" "$tmp/config.json" > "$tmp/vconfig.json"
"$RLC" init --config "$tmp/vconfig.json" --out "$tmp/vm" --seed 3 --dtype f32 --tokenizer "$tmp/vtok" >/dev/null 2>&1 || bad "rlc init with the tokenizer"
/usr/bin/python3 - "$tmp/vm/tokenizer.json" "$V" <<'PY'
import json, sys
p, v = sys.argv[1], int(sys.argv[2])
t = json.load(open(p))
t["added_tokens"].append({"id": v + 3, "content": "<image_soft_token>", "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True})
json.dump(t, open(p, "w"), ensure_ascii=False)
PY
row() { printf '{"data_source": "t", "prompt": [{"role": "user", "content": "%s"}], "reward_model": {"ground_truth": "5"}}\n' "$1"; }
{ row "What is 2 + 3?"; row "What is <image_soft_token> + 3?"; row "What is 4 + 1?"; } > "$tmp/vbad.jsonl"
{ row "What is 2 + 3?"; row "What is 4 + 1?"; } > "$tmp/vok.jsonl"
cat > "$tmp/v.yaml" <<Y
data: {train_files: $tmp/vbad.jsonl, val_files: $tmp/vok.jsonl, train_batch_size: 2, max_prompt_length: 64, max_response_length: 4}
actor_rollout_ref:
  model: {path: $tmp/vm}
  actor: {optim: {lr: 1.0e-3}, ppo_mini_batch_size: 2, ppo_micro_batch_size_per_gpu: 2}
  rollout: {n: 2, temperature: 1.0}
algorithm: {adv_estimator: grpo}
custom_reward_function: {command: /usr/bin/python3 tests/py/grpo_reward.py}
trainer: {total_training_steps: 1, test_freq: -1, save_freq: -1, val_before_train: false, n_threads: 1, default_local_dir: $tmp/vrun}
Y
timeout 120 "$RLC" train "$tmp/v.yaml" >/dev/null 2>"$tmp/e9"
one_error "train: a row whose prompt renders to an id past vocab_size" \
  "vbad.jsonl:2: \"prompt\" renders to token id $((V + 3)) ('<image_soft_token>'), outside the model's vocabulary [0, $V) (the tokenizer has $((V + 4)) ids, more than config.json's vocab_size $V)" "$tmp/e9" $?
timeout 120 "$RLC" eval "$tmp/v.yaml" >"$tmp/eval.log" 2>&1 && grep -q 'val-core/' "$tmp/eval.log" &&
  ok "eval: the tokenizer's unused id past vocab_size is accepted (rows that never produce it validate)" ||
  bad "eval with an unused id past vocab_size: $(tail -3 "$tmp/eval.log")"
printf '%s\n' '{"prompt": "What is 2 + 3?"}' '{"prompt": "What is <image_soft_token>?"}' > "$tmp/vgen.jsonl"
timeout 60 "$RLC" generate --model "$tmp/vm" --prompts "$tmp/vgen.jsonl" --out "$tmp/vgen_out.jsonl" --max-new-tokens 2 \
  --threads 1 >/dev/null 2>"$tmp/e10"
one_error "generate: a prompt line rendering to an id past vocab_size" "vgen.jsonl:2: \"prompt\" renders to token id $((V + 3))" "$tmp/e10" $?
head -1 "$tmp/vgen.jsonl" > "$tmp/vgen1.jsonl"
timeout 60 "$RLC" generate --model "$tmp/vm" --prompts "$tmp/vgen1.jsonl" --out "$tmp/vgen_out.jsonl" --max-new-tokens 2 \
  --threads 1 >/dev/null 2>"$tmp/e11" && ok "generate: the unused id past vocab_size is accepted" || bad "generate: $(cat "$tmp/e11")"
# SFT text rows ({"prompt", "response"}): the conversation as rendered for training
printf '%s\n' '{"prompt": "What is 2 + 3?", "response": "5"}' '{"prompt": "What is 4 + 1?", "response": "<image_soft_token>"}' \
  > "$tmp/vsft.jsonl"
timeout 60 "$RLC" sft --model "$tmp/vm" --data "$tmp/vsft.jsonl" --out "$tmp/vsft_out" --steps 1 --batch-size 2 --threads 1 \
  >/dev/null 2>"$tmp/e12"
one_error "sft: a text row rendering to an id past vocab_size" "vsft.jsonl:2: its response renders to token id $((V + 3))" "$tmp/e12" $?
head -1 "$tmp/vsft.jsonl" > "$tmp/vsft1.jsonl"
timeout 60 "$RLC" sft --model "$tmp/vm" --data "$tmp/vsft1.jsonl" --out "$tmp/vsft_out" --steps 1 --batch-size 1 --threads 1 \
  >/dev/null 2>"$tmp/e13" && ok "sft: the unused id past vocab_size is accepted" || bad "sft: $(tail -3 "$tmp/e13")"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
