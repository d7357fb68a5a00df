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
check "metrics.jsonl: validation before training, then 2 steps" "[ \$(grep -c 'critic/score/mean' '$r/grpo/metrics.jsonl') -eq 2 ] && head -1 '$r/grpo/metrics.jsonl' | grep -q 'val-core/.*\"training/global_step\": 0}'"
check "curves.svg is an SVG" "head -c 200 '$r/grpo/curves.svg' | grep -q '<svg'"
check "eval metrics" "grep -q 'val-core/' '$r/eval_sft/eval_metrics.jsonl' && grep -q 'val-core/' '$r/eval_grpo/eval_metrics.jsonl'"
check "summary printed" "grep -q 'after GRPO' '$out/log'"
# gen-task --answer-only: the same problems, a seeded fraction of responses reduced to "#### N"
"$BUILD/rlc" gen-task --out "$out/w.jsonl" --n 400 --seed 7 --format sft > /dev/null 2>&1
"$BUILD/rlc" gen-task --out "$out/a.jsonl" --n 400 --seed 7 --format sft --answer-only 0.7 > /dev/null 2>&1
check "answer-only keeps the prompts" "cmp -s <(cut -d'\"' -f4 '$out/w.jsonl') <(cut -d'\"' -f4 '$out/a.jsonl')"
check "answer-only fraction ~0.7 (400 draws: 0.6-0.8)" "n=\$(grep -c '\"response\":\"#### [0-9-]*\"}' '$out/a.jsonl'); [ \$n -ge 240 ] && [ \$n -le 320 ]"
check "answer-only answers equal the worked ones" "cmp -s <(sed 's/.*#### //' '$out/w.jsonl') <(sed 's/.*#### //' '$out/a.jsonl')"
check "answer-only 0 writes worked solutions" "\"$BUILD/rlc\" gen-task --out '$out/z.jsonl' --n 400 --seed 7 --format sft --answer-only 0 && cmp -s '$out/w.jsonl' '$out/z.jsonl'"
check "bad --answer-only is a one-line error" "! \"$BUILD/rlc\" gen-task --out '$out/b.jsonl' --format sft --answer-only 1.5 2> '$out/e' && grep -q 'answer-only must be a number in \[0, 1\]' '$out/e' && [ \$(wc -l < '$out/e') -eq 1 ]"
check "--answer-only needs --format sft" "! \"$BUILD/rlc\" gen-task --out '$out/b.jsonl' --answer-only 0.5 2> '$out/e' && grep -q 'format sft' '$out/e'"
rm -rf "$out"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
