#!/usr/bin/env bash
# rlc train-tokenizer: the tokenizer.json it writes loads in rlc and in Hugging Face's Rust tokenizer
# (npm `tokenizers`, the oracle) and both give the same ids on the corpus and on chat-formatted text; its
# tokenizer_config.json carries the Qwen3 chat template, which rlc recognises.
set -u
cd "$(dirname "$0")/.."
BUILD=${RLC_BUILD:-build}
pass=0; fail=0
check() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $1"; fi; }
d=$(mktemp -d "${TMPDIR:-/tmp}/rlc-bpe-XXXXXX")
"$BUILD/rlc" gen-task --out "$d/t.jsonl" --n 2000 --seed 5 --format sft >/dev/null
check "train-tokenizer runs" "'$BUILD/rlc' train-tokenizer --data '$d/t.jsonl' --fields prompt,response --out '$d/tok' --vocab-size 600 > '$d/log' 2>&1"
check "three files" "[ -s '$d/tok/tokenizer.json' ] && [ -s '$d/tok/tokenizer_config.json' ] && [ -s '$d/tok/generation_config.json' ]"
# deterministic: the same corpus gives the same file
"$BUILD/rlc" train-tokenizer --data "$d/t.jsonl" --fields prompt,response --out "$d/tok2" --vocab-size 600 >/dev/null 2>&1
check "deterministic" "cmp -s '$d/tok/tokenizer.json' '$d/tok2/tokenizer.json'"
# texts: the corpus lines plus chat-rendered ones with special tokens and odd whitespace
/usr/bin/python3 - "$d/t.jsonl" "$d/texts.jsonl" <<'PY'
import json, sys
out = open(sys.argv[2], "w")
for i, l in enumerate(open(sys.argv[1])):
    o = json.loads(l)
    out.write(json.dumps({"text": o["prompt"]}) + "\n")
    out.write(json.dumps({"text": o["response"]}) + "\n")
    if i < 50:
        out.write(json.dumps({"text": "<|im_start|>user\n" + o["prompt"] + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n" + o["response"] + "<|im_end|>"}) + "\n")
for s in ["  two  spaces\t\ttabs\r\nCRLF", "unicode: caf\u00e9 \u4e2d\u6587 \U0001F600", "", "12345 678", "'s 'LL 'Re"]:
    out.write(json.dumps({"text": s}) + "\n")
PY
"$BUILD/rlc" tokenize --tokenizer "$d/tok" < "$d/texts.jsonl" > "$d/rlc_ids.jsonl" 2>"$d/err"
check "rlc tokenize runs" "[ -s '$d/rlc_ids.jsonl' ]"
if [ -d tests/node/node_modules/tokenizers ]; then
  node tests/node/hf_tok.js encode "$d/tok/tokenizer.json" "$d/texts.jsonl" "$d/hf_ids.jsonl"
  n=$(wc -l < "$d/texts.jsonl")
  check "ids identical to HF tokenizers on $n texts" "cmp -s '$d/rlc_ids.jsonl' '$d/hf_ids.jsonl'"
else
  echo "SKIP: npm tokenizers not installed (scripts/install-deps.sh): HF comparison skipped"
fi
echo '{"messages": [{"role": "user", "content": "Tara has 3 cards."}]}' | "$BUILD/rlc" tokenize --tokenizer "$d/tok" --chat > "$d/chat.jsonl" 2>"$d/chat.err"
check "chat template recognised" "[ -s '$d/chat.jsonl' ]"
rm -rf "$d"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
