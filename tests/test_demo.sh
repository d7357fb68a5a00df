#!/usr/bin/env bash
# The shortened demo (rlc demo --quick): every stage of the pipeline runs and leaves its outputs.
set -u
cd "$(dirname "$0")/.."
BUILD=${RLC_BUILD:-build}
pass=0; fail=0
check() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $1"; fi; }
out=$(mktemp -d "${TMPDIR:-/tmp}/rlc-demo-XXXXXX")
if "$BUILD/rlc" demo --quick --out "$out/run" > "$out/log" 2>&1; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: rlc demo --quick"; tail -30 "$out/log"; fi
r="$out/run"
check "summary.json" "[ -s '$r/summary.json' ] && grep -q acc_grpo '$r/summary.json'"
check "tokenizer files" "[ -s '$r/tokenizer/tokenizer.json' ] && [ -s '$r/tokenizer/tokenizer_config.json' ]"
check "HF checkpoints" "[ -s '$r/sft/model.safetensors' ] && [ -s '$r/sft/config.json' ] && [ -s '$r/grpo/global_step_2/actor/model.safetensors' ]"
check "metrics.jsonl has 2 steps" "[ \$(grep -c training/global_step '$r/grpo/metrics.jsonl') -eq 2 ]"
check "curves.svg is an SVG" "head -c 200 '$r/grpo/curves.svg' | grep -q '<svg'"
check "eval metrics" "grep -q 'val-core/' '$r/eval_sft/eval_metrics.jsonl' && grep -q 'val-core/' '$r/eval_grpo/eval_metrics.jsonl'"
check "summary printed" "grep -q 'after GRPO' '$out/log'"
rm -rf "$out"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
