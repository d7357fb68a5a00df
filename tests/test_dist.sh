#!/usr/bin/env bash
# test_dist.sh: data parallel under mpirun -np 2 (skips without mpirun or in a build without MPI):
#  - build/tests/test_dist under 2 ranks (collectives, fsdp round trip, 2-rank SFT == 1-process to 1e-5,
#    cross-N optimizer resume);
#  - `mpirun -np 2 rlc sft` writes the same weights as `rlc sft` (1 process) to 1e-5;
#  - a rank that exits mid-step (RLC_TEST_DIE_AT_STEP) fails the job with a message, within a time limit;
#  - `mpirun -np 2 rlc train` (GRPO) == 1 process after 2 steps (weights 1e-5, metrics 1e-4), also with several
#    mini-batches and dynamic batches; cross-N resume 2 -> 1 and 1 -> 2 ranks == an uninterrupted run; the
#    per-rank sharded state ~1/2; a train_batch_size that the world size does not divide is a one-line error.
set -u
cd "$(dirname "$0")/.."
B=${RLC_BUILD:-build}
RLC=$B/rlc
. tests/dist_lib.sh
dl_need_mpi
MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader"
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
# 6. GRPO (`rlc train`): 1 process vs 2 ranks, and cross-N resume (fixture as tests/test_grpo.c: gen-task +
#    train-tokenizer + a tiny random Qwen3; 8 prompts, 4 per step, n = 4)
G="$tmp/grpo"
dl_fixture "$G"
cat >"$G/base.yaml" <<Y
data:
  train_files: $G/train.jsonl
  val_files: $G/val.jsonl
  train_batch_size: 4
  max_prompt_length: 256
  # 48, not shorter: at 12 every response is truncated at the same length, so the GRPO loss is an exact
  # cancellation of zero-mean advantages and Adam turns summation-order rounding of its near-zero gradients
  # into weight differences above 1e-5 (measured on AMD Zen 5: 1 process with micro-batches of 4 instead
  # of 2 differed from itself by 1.2e-5; 2 ranks by 3.9e-5). With 48, eos ends responses at varied lengths.
  max_response_length: 48
  seed: 1
actor_rollout_ref:
  model: {path: $G/m}
  actor:
    # lr 1e-3: 2 ranks and 1 process sum the gradient in different orders, and AdamW (eps 1e-8) turns a
    # gradient at fp32's noise floor into a step of a good fraction of lr. Measured on Intel Xeon (SkylakeX
    # sgemm): the worst element, embedding row 162 column 17, has a gradient of -4.2e-9 (1e-6 of a typical
    # element: terms of zero-mean GRPO advantages that almost cancel); 2 ranks get -4.29e-9,
    # 1 process -4.17e-9 (micro-batches of 1 instead of 2: -4.21e-9), so its step differs by ~2.8% while every
    # other weight agrees to 2e-7. That error is proportional to lr: 1.18e-5 at 5e-3 (over the 1e-5 bar),
    # 4.7e-6 at 2e-3, 2.4e-6 at 1e-3. At 1e-3 the bar checks the distributed math, not Adam's amplification.
    optim: {lr: 1.0e-3}
    ppo_mini_batch_size: 4
    ppo_micro_batch_size_per_gpu: 2
    use_kl_loss: true
    kl_loss_coef: 0.1
    entropy_coeff: 0.01
  rollout:
    n: 4
    temperature: 0.8
algorithm: {adv_estimator: grpo}
custom_reward_function: {command: /usr/bin/python3 tests/py/grpo_reward.py}
trainer:
  total_epochs: 2
  test_freq: 2
  save_freq: 2
  val_before_train: false
  n_threads: 1
Y
# the actor's weights (and that they moved from the initial ones) and the metrics, as tests/dist_lib.sh describes
DL_INIT="$G/m/model.safetensors"
two="trainer.total_training_steps=2"
gtrain 1 one $two || { bad "rlc train (1 process)"; tail "$G/one.log"; }
gtrain 2 two $two || { bad "mpirun -np 2 rlc train"; tail "$G/two.log"; }
gcheck "2-rank GRPO == 1 process after 2 steps: weights to 1e-5, metrics to 1e-4" two one 2 1
# several mini-batches per step (2 AdamW steps per step), verl's dynamic batches for the update and both
# log-prob passes (lr 1e-3 as above: at 5e-3 with 4 AdamW steps, 1 process's own micro-batching noise on the
# near-zero gradients of rare tokens is ~1e-5)
dyn="trainer.total_training_steps=2 actor_rollout_ref.actor.ppo_mini_batch_size=2
 actor_rollout_ref.actor.use_dynamic_bsz=true actor_rollout_ref.actor.ppo_max_token_len_per_gpu=400
 actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=400
 actor_rollout_ref.ref.log_prob_use_dynamic_bsz=true actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=400"
gtrain 1 dyn1 $dyn && gtrain 2 dyn2 $dyn || bad "rlc train with 2 mini-batches and dynamic batches"
gcheck "2-rank GRPO == 1 process, 2 mini-batches per step + dynamic batches" dyn2 dyn1 2 1
# sharded state per rank ~ 1/2 of one process's params+grads+m+v
line=$(grep "rlc: dist: 2 ranks" "$G/two.log")
echo "      ${line#rlc: dist: }"
if /usr/bin/python3 -c '
import re, sys
s = sys.argv[1]; a = float(re.search(r"sharded state ([0-9.]+) MiB", s).group(1)); b = float(re.search(r"one process ([0-9.]+) MiB", s).group(1))
c = float(re.search(r"reference weights shard ([0-9.]+) MiB", s).group(1)); d = float(re.search(r"MiB \(one process ([0-9.]+) MiB\)$", s).group(1))
print("      actor: sharded %.3f MiB x 2 ranks / %.3f MiB = %.3f; reference: %.3f MiB x 2 / %.3f MiB = %.3f" % (a, b, 2 * a / b, c, d, 2 * c / d))
sys.exit(0 if 1.0 <= 2 * a / b <= 1.1 and 1.0 <= 2 * c / d <= 1.1 else 1)' "$line"
then ok "per-rank sharded GRPO state (actor params+grads+m+v, reference weights) is ~1/2 of one process's"
else bad "per-rank sharded state: '$line'"; fi
grep -q "training/global_step" "$G/two/metrics.jsonl" && [ "$(grep -c . "$G/two/metrics.jsonl")" = 2 ] &&
  [ "$(grep -c '^step ' "$G/two.log")" = 2 ] &&
  ok "2 ranks: one metrics.jsonl of 2 lines and one console line per step (rank 0 alone writes)" ||
  bad "2 ranks: metrics lines $(grep -c . "$G/two/metrics.jsonl"), console step lines $(grep -c '^step ' "$G/two.log")"
# cross-N resume: the step-2 checkpoint of 2 ranks continued by 1 process, and the reverse, vs 4 steps uninterrupted
four="trainer.total_training_steps=4"
gtrain 1 c4 $four || bad "rlc train 4 steps"
cp -r "$G/two" "$G/r21" && cp -r "$G/one" "$G/r12"
gtrain 1 r21 $four && grep -q "resumed from global_step_2" "$G/r21.log" || { bad "1 process resuming the 2-rank checkpoint"; tail "$G/r21.log"; }
gtrain 2 r12 $four && grep -q "resumed from global_step_2" "$G/r12.log" || { bad "2 ranks resuming the 1-process checkpoint"; tail "$G/r12.log"; }
gcheck "2-rank checkpoint resumed by 1 process == uninterrupted (steps 3-4)" r21 c4 4 3
gcheck "1-process checkpoint resumed by 2 ranks == uninterrupted (steps 3-4)" r12 c4 4 3
# a bad world size for the batch: one clear line
gtrain 2 badws data.train_batch_size=3 actor_rollout_ref.actor.ppo_mini_batch_size=3
if grep -q "data.train_batch_size=3 must be a multiple of the number of ranks 2" "$G/badws.log"; then
  ok "train_batch_size not divisible by the world size: one-line error"; else bad "world-size check"; tail -3 "$G/badws.log"; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
