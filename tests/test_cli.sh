#!/usr/bin/env bash
# test_cli.sh: every subcommand listed by `rlc --help` answers `--help` (also `rlc help CMD`, and -h after other
# arguments) with its usage line on stdout and exit status 0 (no required option is demanded first); `rlc --version`
# names the build; unknown commands are one-line errors.
set -u
cd "$(dirname "$0")/.."
RLC=${RLC_BUILD:-build}/rlc
pass=0; fail=0
ok() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $1"; fi; }
if [ ! -x "$RLC" ]; then echo "skip: $RLC missing (run make)"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
cmds=$("$RLC" --help | awk '/^commands:/{on=1; next} on && NF {print $1}')
ok "rlc --help lists the commands" '[ $(echo "$cmds" | wc -w) -ge 10 ]'
for c in $cmds; do
  out=$("$RLC" "$c" --help 2>/dev/null); rc=$?
  ok "rlc $c --help: exit 0 and a usage line on stdout" '[ $rc -eq 0 ] && [[ "$out" == usage:\ rlc\ $c* ]]'
done
for c in $cmds; do
  a=$("$RLC" help "$c" 2>/dev/null); b=$("$RLC" "$c" some-arg -h 2>/dev/null); rc=$?
  ok "rlc help $c and rlc $c ... -h print the same usage" '[ $rc -eq 0 ] && [ -n "$a" ] && [ "$a" = "$b" ]'
done
v=$("$RLC" --version); rc=$?
ok "rlc --version: version, BLAS kernel, MPI or not" '[ $rc -eq 0 ] && [[ "$v" == rlc\ [0-9]* ]] && grep -q "^BLAS: .*kernel " <<<"$v" && grep -qE "^MPI: (yes|no)" <<<"$v"'
err=$("$RLC" no-such-command 2>&1); rc=$?
ok "unknown command: one-line error, exit non-zero" '[ $rc -ne 0 ] && [ $(echo "$err" | wc -l) -ge 1 ] && [[ "$err" == *no-such-command* ]]'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
