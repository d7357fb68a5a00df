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
# gen-task --tool-calls: tool_agent conversations (tools block, calculator calls), the same problems and answers
"$BUILD/rlc" gen-task --out "$out/t.jsonl" --n 400 --seed 7 --format sft --answer-only 0.7 --tool-calls 1 > /dev/null 2>&1
check "tool-calls: one conversation per problem, with the tools block" "[ \$(grep -c '\"role\":\"system\",\"content\":\"# Tools' '$out/t.jsonl') -eq 400 ]"
check "tool-calls: the worked solutions call the calculator, the others answer (answer-only 0.7)" \
  "[ \$(grep -c '\"name\":\"calculator\"' '$out/t.jsonl') -eq \$((400 - \$(grep -c '\"response\":\"#### [0-9-]*\"}' '$out/a.jsonl'))) ]"
check "tool-calls: the same final answers" "cmp -s <(sed 's/.*#### \([0-9-]*\).*/\1/' '$out/a.jsonl') <(sed 's/.*#### \([0-9-]*\).*/\1/' '$out/t.jsonl')"
"$BUILD/rlc" gen-task --out "$out/t5.jsonl" --n 400 --seed 7 --format sft --tool-calls 0.5 > /dev/null 2>&1
check "tool-calls 0.5: about half the worked solutions call (400 draws: 0.4-0.6)" "n=\$(grep -c '\"name\":\"calculator\"' '$out/t5.jsonl'); [ \$n -ge 160 ] && [ \$n -le 240 ]"
check "bad --tool-calls is a one-line error" "! \"$BUILD/rlc\" gen-task --out '$out/b.jsonl' --format sft --tool-calls 2 2> '$out/e' && grep -q 'tool-calls must be a number in \[0, 1\]' '$out/e' && [ \$(wc -l < '$out/e') -eq 1 ]"
check "--tool-calls needs --format sft" "! \"$BUILD/rlc\" gen-task --out '$out/b.jsonl' --tool-calls 0.5 2> '$out/e' && grep -q 'format sft' '$out/e'"
check "train-tokenizer: a repeated added token is a one-line error" "! \"$BUILD/rlc\" train-tokenizer --data '$out/t.jsonl' --fields text --out '$out/tk' --vocab-size 300 --added-tokens '<tool_call>,<|im_end|>' 2> '$out/e' && grep -q \"added token '<|im_end|>' is empty or given twice\" '$out/e' && [ \$(wc -l < '$out/e') -eq 1 ]"
# rlc demo --tools --quick: the pipeline with the calculator environment (no accuracy threshold)
if "$BUILD/rlc" demo --tools --quick --out "$out/tools" > "$out/tlog" 2>&1; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: rlc demo --tools --quick"; tail -30 "$out/tlog"; fi
t="$out/tools"
check "tools: the tokenizer has the tool markup as added tokens" "grep -q '\"content\":\"<tool_call>\"' '$t/tokenizer/tokenizer.json' && grep -q '\"content\":\"</tool_response>\"' '$t/tokenizer/tokenizer.json'"
check "tools: an SFT prompt tokenizes exactly as the trainer's tool_agent prompt" "/usr/bin/python3 tests/py/agent_demo_prompt.py '$BUILD/rlc' '$t'"
check "tools: GRPO ran 2 steps through the agent loop (tool_call_counts/*, num_turns/*)" \
  "[ \$(grep -c 'tool_call_counts/mean' '$t/grpo/metrics.jsonl') -eq 2 ] && [ \$(grep -c '\"num_turns/mean\"' '$t/grpo/metrics.jsonl') -eq 2 ] && grep -q 'tool_call_counts/max' '$t/grpo/metrics.jsonl'"
check "tools: evaluations ran the agent loop (val-aux/num_turns/*)" "grep -q 'val-aux/num_turns/mean' '$t/eval_sft/eval_metrics.jsonl' && grep -q 'val-aux/num_turns/mean' '$t/eval_grpo/eval_metrics.jsonl'"
# The quick SFT (8 steps) is too short for the model to write a call of its own, so rollouts of the quick run make
# none; the demonstrations call the calculator, and the rollouts ran with it (its I/O time, end reasons logged)
check "tools: the SFT demonstrations call the calculator (answer-only 0.7: about 0.3 of 256)" \
  "n=\$(grep -c '\"name\":\"calculator\"' '$t/data/sft.jsonl'); [ \$n -ge 50 ] && [ \$n -le 110 ]"
check "tools: the GRPO rollouts ran in the calculator environment (timing_s/env, multi_turn/end_reason/*)" \
  "[ \$(grep -c '\"timing_s/env\"' '$t/grpo/metrics.jsonl') -eq 2 ] && grep -q 'multi_turn/end_reason/no_tool_call' '$t/grpo/metrics.jsonl'"
check "tools: summary" "grep -q '\"tools\": true' '$t/summary.json' && grep -q 'tool calls per trajectory' '$out/tlog'"
rm -rf "$out"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
