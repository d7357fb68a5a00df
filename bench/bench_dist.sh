#!/usr/bin/env bash
# bench_dist.sh: data-parallel SFT step on this machine: 1 rank x 2 threads vs 2 ranks x 1 thread
# (mpirun, shared memory). Reports the median step time over the steps after the first, the bytes each rank
# received per step, and the fraction of the run spent inside collectives. Never pass/fail.
# Usage: bench/bench_dist.sh [CONFIG.json (examples/qwen3-tiny-config.json)] [STEPS (6)] [BATCH (8)] [MAXLEN (128)]
set -eu
cd "$(dirname "$0")/.."
B=${RLC_BUILD:-build}; RLC=$B/rlc
CFG=${1:-examples/qwen3-tiny-config.json}; STEPS=${2:-6}; BATCH=${3:-8}; MAXLEN=${4:-128}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlc-bench-dist-XXXXXX"); trap 'rm -rf "$tmp"' EXIT
"$RLC" init --config "$CFG" --out "$tmp/init" --dtype f32 >/dev/null
V=$(/usr/bin/python3 -c "import json;print(json.load(open('$CFG'))['vocab_size'])")
/usr/bin/python3 - "$tmp/data.jsonl" "$V" "$MAXLEN" "$((BATCH * STEPS))" <<'PY'
import json, random, sys
r = random.Random(1); V = int(sys.argv[2]); L = int(sys.argv[3])
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[4])):
        n = r.randint(L // 4, L); ids = [r.randrange(V) for _ in range(n)]
        f.write(json.dumps({"input_ids": ids, "loss_mask": [0] * (n // 4) + [1] * (n - n // 4)}) + "\n")
PY
args="--model $tmp/init --data $tmp/data.jsonl --steps $STEPS --batch-size $BATCH --micro-batch-size 2 --lr 1e-5 --seed 1 --no-shuffle"
med() { grep -E '^step ' | awk 'NR>1{for(i=1;i<=NF;i++) if($i=="tokens/s") print $(i+1)}' | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
echo "bench_dist: $CFG, $STEPS steps of $BATCH sequences (lengths $((MAXLEN/4))..$MAXLEN), micro-batches of 2 sequences"
OMP_NUM_THREADS=2 "$RLC" sft $args --threads 2 --out "$tmp/o1" >"$tmp/one.log" 2>&1
t1=$(med <"$tmp/one.log")
blas=$(grep -oE 'BLAS [A-Za-z0-9]+' "$tmp/one.log" | head -1)
OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to none "$RLC" sft $args --threads 1 --out "$tmp/o2" >"$tmp/two.log" 2>&1
t2=$(med <"$tmp/two.log")
rep=$(grep "rlc sft: 2 ranks" "$tmp/two.log")
mb=$(sed -E 's/.*received ([0-9.]+) MB.*/\1/' <<<"$rep")
frac=$(sed -E 's/.*collectives \(([0-9]+)%\).*/\1/' <<<"$rep")
rss1=$(grep -oE 'peak RSS [0-9.]+ GiB' "$tmp/one.log"); rss2=$(grep -oE 'peak RSS [0-9.]+ GiB' "$tmp/two.log")
echo "  1 rank  x 2 threads: median $t1 tokens/s ($blas), $rss1"
echo "  2 ranks x 1 thread : median $t2 tokens/s (global), $rss2 (rank 0); received $(awk -v a="$mb" -v s="$STEPS" 'BEGIN{printf "%.2f", a/s}') MB/step/rank, ${frac}% of the time in collectives"
echo "  ratio 2x1 / 1x2: $(awk -v a="$t2" -v b="$t1" 'BEGIN{printf "%.2f", a/b}')"
echo "  $rep"
