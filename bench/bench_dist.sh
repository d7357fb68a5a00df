#!/usr/bin/env bash
# bench_dist.sh: data-parallel SFT step on this machine: 1 rank x 2 threads vs 2 ranks x 1 thread
# (mpirun, shared memory). Reports the median step time over the steps after the first, the bytes each rank
# received per step, and the fraction of the run spent inside collectives. Never pass/fail.
# Usage: bench/bench_dist.sh [CONFIG.json (examples/qwen3-tiny-config.json)] [STEPS (6)] [BATCH (8)] [MAXLEN (128)]
#        bench/bench_dist.sh grpo [CONFIG.json] [STEPS] [PROMPTS] [N] [RESPONSE]   (GRPO phases, see below)
set -eu
cd "$(dirname "$0")/.."
B=${RLC_BUILD:-build}; RLC=$B/rlc
if [ "${1:-}" = grpo ]; then
  # GRPO (`rlc train`) per phase: bench/bench_dist.sh grpo [CONFIG.json] [STEPS (4)] [PROMPTS/step (4)] [N (4)] [RESPONSE (32)]
  # A random model of CONFIG's shape with a 300-token BPE tokenizer (the vocabulary stays CONFIG's), gen-task
  # prompts, use_kl_loss (so the ref pass runs), one mini-batch, micro-batches of 4. Reports the median over the
  # steps after the first of each phase's seconds (timing_s/*, rank 0), and for 2 ranks rank 0's bytes received
  # per step and the fraction of the step inside collectives (dist/* metrics). gather_weights (2 ranks only; part of
# update_actor): the all-gather of the updated shards into every rank's rollout copy.
  CFG=${2:-examples/qwen3-tiny-config.json}; STEPS=${3:-4}; NP=${4:-4}; N=${5:-4}; RESP=${6:-32}
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlc-bench-dist-XXXXXX"); trap 'rm -rf "$tmp"' EXIT
  "$RLC" gen-task --out "$tmp/sft.jsonl" --n 200 --seed 1 --format sft >/dev/null
  "$RLC" gen-task --out "$tmp/train.jsonl" --n $((NP * STEPS)) --seed 2 >/dev/null
  "$RLC" train-tokenizer --data "$tmp/sft.jsonl" --fields prompt,response --out "$tmp/tok" --vocab-size 300 >/dev/null
  "$RLC" init --config "$CFG" --out "$tmp/m" --dtype f32 --seed 3 --tokenizer "$tmp/tok" >/dev/null
  cat >"$tmp/g.yaml" <<Y
data: {train_files: $tmp/train.jsonl, train_batch_size: $NP, max_prompt_length: 256, max_response_length: $RESP, seed: 1}
actor_rollout_ref:
  model: {path: $tmp/m}
  actor: {optim: {lr: 1.0e-5}, ppo_mini_batch_size: $NP, ppo_micro_batch_size_per_gpu: 4, use_kl_loss: true, kl_loss_coef: 0.01}
  rollout: {n: $N, temperature: 1.0, log_prob_micro_batch_size_per_gpu: 4}
  ref: {log_prob_micro_batch_size_per_gpu: 4}
algorithm: {adv_estimator: grpo}
custom_reward_function: {command: /usr/bin/python3 tests/py/grpo_reward.py}
trainer: {total_epochs: 1, save_freq: -1, test_freq: -1, val_before_train: false}
Y
  echo "bench_dist grpo: $CFG, $STEPS steps of $NP prompts x $N samples, responses <= $RESP tokens"
  OMP_NUM_THREADS=2 "$RLC" train "$tmp/g.yaml" trainer.default_local_dir="$tmp/r1" trainer.n_threads=2 >"$tmp/one.log" 2>&1
  OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to none "$RLC" train "$tmp/g.yaml" \
    trainer.default_local_dir="$tmp/r2" trainer.n_threads=1 >"$tmp/two.log" 2>&1
  grep "rlc: dist:" "$tmp/two.log" | sed 's/^/  /'
  /usr/bin/python3 - "$tmp/r1/metrics.jsonl" "$tmp/r2/metrics.jsonl" <<'PY'
import json, statistics, sys
def med(rows, k): v = [r[k] for r in rows[1:] if k in r] or [r[k] for r in rows if k in r]; return statistics.median(v) if v else float("nan")
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
ph = ["gen", "reward", "old_log_prob", "ref", "adv", "update_actor", "gather_weights", "step"]
print("  phase (median s)  " + " ".join("%12s" % p for p in ph))
print("  1 rank  x 2 thr   " + " ".join("%12.3f" % med(a, "timing_s/" + p) for p in ph))
print("  2 ranks x 1 thr   " + " ".join("%12.3f" % med(b, "timing_s/" + p) for p in ph))
print("  tokens/step %d; step ratio 1x2 / 2x1 = %.2f (>1: 2 ranks faster)" % (med(a, "perf/total_num_tokens"), med(a, "timing_s/step") / med(b, "timing_s/step")))
print("  2 ranks: received %.2f MB/step/rank (parameter all-gathers %.2f, gradient reduce-scatters %.2f), %.0f%% of the step in collectives"
      % (med(b, "dist/comm_bytes") / 1e6, med(b, "dist/allgather_bytes") / 1e6, med(b, "dist/reduce_scatter_bytes") / 1e6, 100 * med(b, "dist/comm_fraction")))
PY
  exit 0
fi
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
