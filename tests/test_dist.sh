#!/usr/bin/env bash
# test_dist.sh: data parallel under mpirun -np 2 (skips without mpirun or in a build without MPI):
#  - build/tests/test_dist under 2 ranks (collectives, fsdp round trip, 2-rank SFT == 1-process to 1e-5,
#    cross-N optimizer resume);
#  - `mpirun -np 2 rlc sft` writes the same weights as `rlc sft` (1 process) to 1e-5;
#  - a rank that exits mid-step (RLC_TEST_DIE_AT_STEP) fails the job with a message, within a time limit.
set -u
cd "$(dirname "$0")/.."
B=${RLC_BUILD:-build}
RLC=$B/rlc
pass=0; fail=0
ok() { echo "ok    $1"; pass=$((pass+1)); }
bad() { echo "FAIL  $1"; fail=$((fail+1)); }
if ! command -v mpirun >/dev/null; then echo "skip: mpirun not found"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
if ! grep -q RLC_WITH_MPI <(strings "$RLC" 2>/dev/null) && ! nm "$RLC" 2>/dev/null | grep -q MPI_Init_thread; then
  echo "skip: $RLC built without MPI"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader"
if [ "${RLC_SAN:-0}" = 1 ]; then
  # OpenMPI's own allocations are reported as leaks at exit; everything else of ASan/UBSan stays on.
  export ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
fi
export OMP_NUM_THREADS=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlc-dist-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# 1. the unit test binary under 2 ranks (each rank prints its own summary)
timeout 120 $MPIRUN --output-filename "$tmp/unit" "$B/tests/test_dist" >"$tmp/unit.log" 2>&1
rc=$?
sum_p=0; sum_f=0
for f in $(find "$tmp/unit" -name 'stdout' 2>/dev/null); do
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$f" | tail -1)
  [ -n "$line" ] || { sum_f=$((sum_f+1)); continue; }
  sum_p=$((sum_p + $(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line")))
  sum_f=$((sum_f + $(sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$line")))
  grep -E '^  |FAIL|fail' "$f" | head -20
done
if [ $rc -eq 0 ] && [ $sum_f -eq 0 ] && [ $sum_p -gt 0 ]; then ok "test_dist under mpirun -np 2 ($sum_p checks over 2 ranks)"
else bad "test_dist under mpirun -np 2 (rc $rc, $sum_p passed, $sum_f failed)"; tail -30 "$tmp/unit.log"; find "$tmp/unit" -type f -exec tail -20 {} \;; fi

# 2. rlc sft: 1 process vs 2 ranks, same weights
cat >"$tmp/cfg.json" <<'JSON'
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 211, "hidden_size": 32,
 "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "head_dim": 16, "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000,
 "tie_word_embeddings": true, "bos_token_id": null, "eos_token_id": 1, "use_sliding_window": false,
 "sliding_window": null, "max_window_layers": 2, "initializer_range": 0.02, "torch_dtype": "float32"}
JSON
"$RLC" init --config "$tmp/cfg.json" --out "$tmp/init" --dtype f32 --seed 3 >/dev/null || bad "rlc init"
/usr/bin/python3 - "$tmp/data.jsonl" <<'PY'
import json, random, sys
r = random.Random(7)
with open(sys.argv[1], "w") as f:
    for i in range(32):
        n = r.randint(4, 60)
        ids = [r.randrange(211) for _ in range(n)]
        f.write(json.dumps({"input_ids": ids, "loss_mask": [0] * (n // 3) + [1] * (n - n // 3)}) + "\n")
PY
args="--model $tmp/init --data $tmp/data.jsonl --steps 3 --batch-size 8 --micro-batch-tokens 96 --lr 2e-3 --lr-scheduler cosine --warmup-steps 1 --seed 1 --threads 1"
timeout 60 "$RLC" sft $args --out "$tmp/one" >"$tmp/one.log" 2>&1 || { bad "rlc sft (1 process)"; tail "$tmp/one.log"; }
timeout 60 $MPIRUN "$RLC" sft $args --out "$tmp/two" >"$tmp/two.log" 2>&1 || { bad "mpirun -np 2 rlc sft"; tail "$tmp/two.log"; }
grep -q "2 ranks: received" "$tmp/two.log" && ok "mpirun -np 2 rlc sft ran on 2 ranks" || bad "2-rank report line missing"
grep "rlc sft: 2 ranks" "$tmp/two.log" | sed 's/^/      /'
cmp_py='
import json, struct, sys, math
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8+n]); out = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        s, e = v["data_offsets"]; out[k] = struct.unpack("<%df" % ((e - s) // 4), b[8+n+s:8+n+e])
    return out
a, b, i = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
assert a.keys() == b.keys()
num = max(max(abs(x - y) for x, y in zip(a[k], b[k])) for k in a)
den = max(max(abs(y) for y in b[k]) for k in b)
mv = max(max(abs(x - y) for x, y in zip(i[k], b[k])) for k in b) / den
print("rel err %.3g, moved %.3g" % (num / den, mv)); sys.exit(0 if num / den <= 1e-5 and mv > 1e-4 else 1)'
# 1e-5: the same fp32 math; the gradient sum over ranks and the norm summation order differ
if r=$(/usr/bin/python3 -c "$cmp_py" "$tmp/two/model.safetensors" "$tmp/one/model.safetensors" "$tmp/init/model.safetensors"); then
  ok "2-rank rlc sft weights == 1-process weights to 1e-5 ($r)"; else bad "2-rank vs 1-process weights: $r"; fi

# 3. 2-rank save -> 1-process resume, 1-process save -> 2-rank resume (CLI), vs a 3-step run
a2="--model $tmp/init --data $tmp/data.jsonl --batch-size 8 --micro-batch-tokens 96 --lr 2e-3 --seed 1 --threads 1"
timeout 60 "$RLC" sft $a2 --steps 3 --out "$tmp/c3" >/dev/null 2>&1
timeout 60 $MPIRUN "$RLC" sft $a2 --steps 2 --save-optimizer --out "$tmp/w2" >/dev/null 2>&1
a3="--data $tmp/data.jsonl --batch-size 8 --micro-batch-tokens 96 --lr 2e-3 --seed 1 --threads 1 --steps 3"
timeout 60 "$RLC" sft --model "$tmp/w2" $a3 --resume-optimizer "$tmp/w2/optimizer.bin" --out "$tmp/w2r1" >/dev/null 2>&1
timeout 60 "$RLC" sft $a2 --steps 2 --save-optimizer --out "$tmp/o2" >/dev/null 2>&1
timeout 60 $MPIRUN "$RLC" sft --model "$tmp/o2" $a3 --resume-optimizer "$tmp/o2/optimizer.bin" --out "$tmp/o2r2" >/dev/null 2>&1
for x in w2r1 o2r2; do
  if r=$(/usr/bin/python3 -c "$cmp_py" "$tmp/$x/model.safetensors" "$tmp/c3/model.safetensors" "$tmp/init/model.safetensors" 2>&1); then
    ok "resume $x (2->1 / 1->2 ranks) == 3-step run ($r)"; else bad "resume $x: $r"; fi
done

# 4. a rank dies mid-step: the job fails with a message, not a hang
start=$(date +%s)
RLC_TEST_DIE_AT_STEP=2 timeout 60 $MPIRUN "$RLC" sft $args --out "$tmp/die" >"$tmp/die.log" 2>&1
rc=$?; el=$(( $(date +%s) - start ))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "rank 1 exits mid-step 2" "$tmp/die.log"; then
  ok "a rank dying mid-step fails the job (rc $rc, ${el}s)"; grep -iE "exited|abort|error" "$tmp/die.log" | head -3 | sed 's/^/      /'
else bad "dying rank: rc $rc after ${el}s"; tail -20 "$tmp/die.log"; fi
# 5. the watchdog: a collective that never completes aborts with the rank and operation named
start=$(date +%s)
RLC_DIST_TIMEOUT_S=3 RLC_TEST_DIST_HANG=1 timeout 60 $MPIRUN "$B/tests/test_dist" >"$tmp/hang.log" 2>&1
rc=$?; el=$(( $(date +%s) - start ))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "did not complete within 3 s" "$tmp/hang.log"; then
  ok "watchdog aborts a hung collective (rc $rc, ${el}s)"; grep "did not complete" "$tmp/hang.log" | head -1 | sed 's/^/      /'
else bad "watchdog: rc $rc after ${el}s"; tail -20 "$tmp/hang.log"; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
