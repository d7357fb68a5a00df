#!/usr/bin/env bash
# test_readme.sh: README's quick start works as written. Its code block is read from README.md and each command
# line is run from the repository root, unchanged: the demo line with the quick demo mode (DEMO_ARGS, which `make
# demo` passes to `rlc demo`: a shortened pipeline into a temporary directory), the test line only checked for
# presence and as a dry run (running the suite from inside the suite would recurse).
set -u
cd "$(dirname "$0")/.."
pass=0; fail=0
ok() { pass=$((pass+1)); echo "ok $1"; }
bad() { fail=$((fail+1)); echo "FAIL: $1"; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlc-readme-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# the first ```sh block after "## Quick start"
awk '/^## Quick start/{q=1} q && /^```sh/{on=1; next} on && /^```/{exit} on' README.md >"$tmp/block"
sed -e 's/[[:space:]]*#.*$//' -e '/^[[:space:]]*$/d' "$tmp/block" >"$tmp/cmds"
n=$(wc -l <"$tmp/cmds")
[ "$n" -ge 2 ] && ok "README's quick start has $n commands" || bad "README's quick start: $n commands found"
grep -q 'make -j2 demo' "$tmp/cmds" && ok "the demo command is there" || bad "no 'make -j2 demo' in the quick start"
grep -q 'make -j2 test' "$tmp/cmds" && ok "the test command is there" || bad "no 'make -j2 test' in the quick start"
grep -q '"N passed, N failed"' "$tmp/block" && ok "it names the test summary line" || bad "the quick start does not name the summary line"
# The build the suite runs on (SAN=1 under the sanitizer run); npm packages are already there or not needed here.
export SAN=${RLC_SAN:-0} RLC_SKIP_NPM=1
export DEMO_ARGS="--quick --threads 1 --sft-problems 64 --grpo-steps 1 --out $tmp/demo"
while IFS= read -r cmd; do
  case "$cmd" in
    *"make -j2 test"*)
      # as written, minus the suite itself: the same line with make's dry run
      dry=${cmd/make -j2 test/make -n test}
      if bash -c "$dry" >"$tmp/test.log" 2>&1 && grep -q 'tests/run.sh' "$tmp/test.log"; then ok "\`$cmd\` (dry run: runs tests/run.sh)"
      else bad "\`$cmd\` (dry run)"; tail -5 "$tmp/test.log"; fi ;;
    *)
      if timeout 900 bash -c "$cmd" >"$tmp/cmd.log" 2>&1; then ok "\`$cmd\`"; else bad "\`$cmd\`"; tail -20 "$tmp/cmd.log"; fi ;;
  esac
done <"$tmp/cmds"
# what the quick start promises of the demo: checkpoints, metrics, curves, the summary
r=$tmp/demo
[ -s "$r/sft/model.safetensors" ] && [ -s "$r/grpo/global_step_1/actor/model.safetensors" ] && ok "HF checkpoints" ||
  bad "demo checkpoints missing"
[ -s "$r/grpo/metrics.jsonl" ] && [ -s "$r/grpo/curves.svg" ] && ok "metrics.jsonl and curves.svg" || bad "demo metrics/curves missing"
grep -q '"acc_grpo"' "$r/summary.json" 2>/dev/null && ok "summary.json" || bad "demo summary.json missing"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
