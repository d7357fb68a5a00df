#!/usr/bin/env bash
# Runs every test binary in $RLC_BUILD/tests and every tests/test_*.sh, each with a time limit, and
# sums their "N passed, N failed" lines. The final line is the total, for CI to read.
# Usage: tests/run.sh [name-filter]
set -u
BUILD=${RLC_BUILD:-build}
export RLC_BUILD=$BUILD
cd "$(dirname "$0")/.."
filter=${1:-}
tp=0; tf=0; ts=0; bad=()
logdir=$(mktemp -d "${TMPDIR:-/tmp}/rlc-tests-XXXXXX")
for t in "$BUILD"/tests/test_* tests/test_*.sh; do
  [ -e "$t" ] || continue
  case "$t" in *.d|*.o) continue;; esac
  name=$(basename "$t")
  [ -n "$filter" ] && [[ "$name" != *"$filter"* ]] && continue
  start=$(date +%s.%N)
  if [[ "$t" == *.sh ]]; then timeout 1800 bash "$t" >"$logdir/$name.log" 2>&1; rc=$?
  else timeout 1800 "$t" >"$logdir/$name.log" 2>&1; rc=$?; fi
  dur=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$logdir/$name.log" | tail -1)
  p=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line"); f=$(sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$line")
  s=$(grep -oE '[0-9]+ skipped' <<<"$line" | grep -oE '^[0-9]+'); s=${s:-0}
  if [ -z "$line" ]; then p=0; f=1; fi
  if [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then f=1; fi
  tp=$((tp + p)); tf=$((tf + f)); ts=$((ts + s))
  if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
    bad+=("$name"); echo "FAIL  $name (${dur}s, rc=$rc): ${line:-no summary line}"
    sed 's/^/    | /' "$logdir/$name.log" | grep -v '^    | ok' | tail -40
  else
    echo "ok    $name (${dur}s): $line"
  fi
done
rm -rf "$logdir"
[ ${#bad[@]} -gt 0 ] && echo "failed: ${bad[*]}"
echo "$tp passed, $tf failed, $ts skipped"
[ "$tf" -eq 0 ]
