#!/usr/bin/env bash
# run.sh SECONDS TARGET...: run each libFuzzer target (build-fuzz/<target>, from `make fuzz`) for SECONDS, in
# sessions of FUZZ_CHUNK_SECONDS (default 10), on a working copy of its checked-in corpus (fuzz/corpus/<target
# without fuzz_>/, never modified here), then print one line per target: executions, executions per second,
# coverage (edges) and features. Exits 1 when any target found a crash, a sanitizer report, a leak of the
# harness's own making or a timeout; the input is kept in build-fuzz/findings/<target>/ (minimize it with
# `build-fuzz/<target> -minimize_crash=1 -runs=10000 FILE`).
set -u
cd "$(dirname "$0")/.."
secs=${1:?usage: fuzz/run.sh SECONDS TARGET...}; shift
# leaks: a rejected input leaves what the reader allocated (rlc_die never frees), so LeakSanitizer is off
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
chunk=${FUZZ_CHUNK_SECONDS:-10}
status=0
summary=""
for t in "$@"; do
  bin=build-fuzz/$t
  [ -x "$bin" ] || { echo "fuzz/run.sh: $bin missing (make fuzz)"; exit 1; }
  work=build-fuzz/corpus/$t find=build-fuzz/findings/$t
  rm -rf "$work"; mkdir -p "$work" "$find"
  seeds=fuzz/corpus/${t#fuzz_}; [ -d "$seeds" ] || seeds=""
  log=build-fuzz/$t.log
  : >"$log"
  # Sessions of at most $chunk seconds, each a fresh process on the growing working corpus: rejected inputs leak
  # (above), so one process's RSS grows with its executions, and a fast machine passed the 4 GiB limit within
  # 30 s. Per session the limit still catches an input that allocates too much by itself.
  left=$secs rc=0 execs=0
  while [ "$left" -gt 0 ] && [ $rc -eq 0 ]; do
    s=$(( left < chunk ? left : chunk ))
    "$bin" -max_total_time="$s" -timeout=20 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$find/" "$work" $seeds >>"$log" 2>&1
    rc=$?
    n=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
    execs=$(( execs + ${n:-0} ))
    left=$(( left - s ))
  done
  eps=$(( execs / secs ))
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)
  line=$(printf '%-20s rc %d  execs %-9s exec/s %-7s %s' "$t" "$rc" "${execs:-?}" "${eps:-?}" "${cov:-cov: ?}")
  echo "$line"
  summary="$summary$line"$'\n'
  if [ $rc -ne 0 ]; then status=1; grep -m3 -E 'ERROR|SUMMARY|Test unit written' "$log"; fi
done
echo "== fuzz summary (${secs} s per target)"
printf '%s' "$summary"
exit $status
