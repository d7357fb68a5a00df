#!/usr/bin/env bash
# test_harden_nan.sh: non-finite training state and validation outputs never pass silently.
#  - A GRPO run whose weights go non-finite on purpose (RLC_TEST_NONFINITE_LR=3 makes step 3's update use a NaN
#    learning rate) stops with one error naming the step and the tensor, writes no checkpoint of that step, and
#    leaves the last good checkpoint (step 2) as latest; resuming from it still works. A trainer state whose step
#    is 2^63-1 is refused on resume.
#  - A NaN only one rank holds (RLC_TEST_NONFINITE_SHARD=3: the last rank's AdamW first-moment shard) stops the save
#    the same way: in one process, and under `mpirun -np 2` (sharded state: the check is collective), where the NaN
#    is in rank 1's shard only.
#  - Greedy validation of weights that went non-finite is an error naming the step and the tensor; a reward that
#    returns a non-finite extra value is an error naming the validation row, the step and the key.
set -u
cd "$(dirname "$0")/.."
B=${RLC_BUILD:-build}
RLC=$B/rlc
pass=0; fail=0
ok() { pass=$((pass+1)); echo "ok $1"; }
bad() { fail=$((fail+1)); echo "FAIL: $1"; }
if [ ! -x "$RLC" ]; then echo "skip: $RLC missing (run make)"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlc-nan-XXXXXX"); [ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT; echo "tmp $tmp"
skip=0

"$RLC" gen-task --out "$tmp/sft.jsonl" --n 100 --seed 1 --format sft >/dev/null &&
"$RLC" gen-task --out "$tmp/train.jsonl" --n 8 --seed 2 >/dev/null &&
"$RLC" train-tokenizer --data "$tmp/sft.jsonl" --fields prompt,response --out "$tmp/tok" --vocab-size 300 >/dev/null ||
  { bad "fixture data and tokenizer"; echo "$pass passed, $fail failed"; exit 1; }
cat > "$tmp/config.json" <<'J'
{"model_type": "qwen3", "vocab_size": 320, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 512, "rms_norm_eps": 1e-06,
 "rope_theta": 10000.0, "tie_word_embeddings": true, "bos_token_id": null, "eos_token_id": 302, "torch_dtype": "float32"}
J
"$RLC" init --config "$tmp/config.json" --out "$tmp/m" --seed 3 --tokenizer "$tmp/tok" >/dev/null 2>&1 ||
  { bad "rlc init"; echo "$pass passed, $fail failed"; exit 1; }
run="$tmp/run"
cat > "$tmp/grpo.yaml" <<Y
data: {train_files: $tmp/train.jsonl, train_batch_size: 2, max_prompt_length: 256, max_response_length: 16, seed: 1}
actor_rollout_ref:
  model: {path: $tmp/m}
  actor: {optim: {lr: 1.0e-3}, ppo_mini_batch_size: 2, ppo_micro_batch_size_per_gpu: 2}
  rollout: {n: 2, temperature: 1.0}
algorithm: {adv_estimator: grpo}
custom_reward_function: {command: /usr/bin/python3 tests/py/grpo_reward.py}
trainer: {total_training_steps: 4, test_freq: -1, save_freq: 1, val_before_train: false, n_threads: 1, default_local_dir: $run}
Y
# stopped(what, err file, rc, run dir, regex): exit 1, one error line matching regex, latest stays 2, no step-3 checkpoint
stopped() {
  local err; err=$(grep '^rlc: error:' "$2")
  [ "$3" -eq 1 ] && [ "$(grep -c '^rlc: error:' "$2")" -eq 1 ] && echo "$err" | grep -q "$5" &&
    ok "$1: exit 1, one error line: $err" || bad "$1: exit $3, stderr: $(grep -v '^rlc: test:' "$2" | tail -4)"
  [ "$(cat "$4/latest_checkpointed_iteration.txt" 2>/dev/null)" = "2" ] && [ -d "$4/global_step_2/actor" ] &&
    [ ! -e "$4/global_step_3" ] && ! ls -a "$4" | grep -q '^\.tmp_' &&
    ok "$1: global_step_2 stays the latest, no step-3 checkpoint or temp directory" ||
    bad "$1: latest '$(cat "$4/latest_checkpointed_iteration.txt" 2>/dev/null)', run dir: $(ls -a "$4")"
}

RLC_TEST_NONFINITE_LR=3 timeout 300 "$RLC" train "$tmp/grpo.yaml" >"$tmp/train.log" 2>"$tmp/train.err"
stopped "weights NaN at step 3" "$tmp/train.err" $? "$run" \
  "training step 3: the weights went non-finite: tensor 'model\.[a-z_.0-9]*' element [0-9]* is -\?nan"
# the kept checkpoint is finite: it loads (a non-finite weight would be a load error) and the run resumes from it
timeout 300 "$RLC" train "$tmp/grpo.yaml" >"$tmp/resume.log" 2>&1 &&
  [ "$(cat "$run/latest_checkpointed_iteration.txt")" = "4" ] && ok "resuming from the last good checkpoint finishes the run" ||
  { bad "resume"; tail -3 "$tmp/resume.log"; }
# a resumed trainer state with global_step = INT64_MAX is refused, naming the file and the field
/usr/bin/python3 -c "
import struct, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[16:24] = struct.pack('<q', 2**63 - 1); open(p, 'wb').write(bytes(b))
" "$run/global_step_4/trainer_state.bin"
timeout 120 "$RLC" train "$tmp/grpo.yaml" trainer.total_training_steps=6 >/dev/null 2>"$tmp/bad_state.err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l < "$tmp/bad_state.err")" -eq 1 ] &&
  grep -q 'trainer_state.bin: corrupt trainer state: global_step 9223372036854775807 is outside' "$tmp/bad_state.err" &&
  ok "a trainer state with global_step 2^63-1 is refused: $(cat "$tmp/bad_state.err")" || bad "bad trainer state: exit $rc $(head -c 400 "$tmp/bad_state.err")"

# a NaN in the AdamW first moment only (one process: the whole moment is this rank's)
RLC_TEST_NONFINITE_SHARD=3 timeout 300 "$RLC" train "$tmp/grpo.yaml" trainer.default_local_dir="$tmp/run1" \
  >"$tmp/shard1.log" 2>"$tmp/shard1.err"
stopped "AdamW moment NaN at step 3 (1 process)" "$tmp/shard1.err" $? "$tmp/run1" \
  "training step 3: the AdamW first moment went non-finite: tensor 'model\.layers\.0\.[a-z_.0-9]*' element 0 is nan"

# the same under mpirun -np 2: the NaN is in rank 1's shard only (rank 0's memory never holds it)
if ! command -v mpirun >/dev/null; then echo "skip: mpirun not found"; skip=$((skip+1))
elif ! nm "$RLC" 2>/dev/null | grep -q MPI_Init_thread; then echo "skip: $RLC built without MPI"; skip=$((skip+1))
else
  [ "${RLC_SAN:-0}" = 1 ] && export ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
  RLC_TEST_NONFINITE_SHARD=3 OMP_NUM_THREADS=1 timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader \
    -x RLC_TEST_NONFINITE_SHARD "$RLC" train "$tmp/grpo.yaml" trainer.default_local_dir="$tmp/run2" >"$tmp/shard2.log" 2>"$tmp/shard2.err"
  rc=$?
  grep -q '^rlc: test: .*rank 1 puts a NaN' "$tmp/shard2.err" && ! grep -q '^rlc: test: .*rank 0 puts' "$tmp/shard2.err" &&
    ok "mpirun -np 2: only rank 1's shard gets the NaN" || bad "mpirun -np 2: injection: $(grep 'rlc: test' "$tmp/shard2.err")"
  [ $rc -ne 0 ] && rc=1
  stopped "AdamW moment NaN in rank 1's shard at step 3 (mpirun -np 2)" "$tmp/shard2.err" $rc "$tmp/run2" \
    "training step 3: the AdamW first moment went non-finite: tensor 'model\.layers\.0\.[a-z_.0-9]*' element [0-9]* is nan"
fi

# greedy validation after the weights went non-finite (no save in between): an error naming the step and the tensor
head -2 "$tmp/train.jsonl" > "$tmp/val.jsonl"
RLC_TEST_NONFINITE_LR=2 timeout 300 "$RLC" train "$tmp/grpo.yaml" data.val_files="$tmp/val.jsonl" trainer.test_freq=1 \
  trainer.save_freq=-1 trainer.default_local_dir="$tmp/run3" >/dev/null 2>"$tmp/val.err"
rc=$?
[ $rc -eq 1 ] && [ "$(grep -c '^rlc: error:' "$tmp/val.err")" -eq 1 ] &&
  grep -q "^rlc: error: validation at step 2: the weights are non-finite: tensor 'model\.[a-z_.0-9]*' element [0-9]* is -\?nan" "$tmp/val.err" &&
  ok "greedy validation of non-finite weights: $(cat "$tmp/val.err")" || bad "validation of NaN weights: exit $rc $(tail -3 "$tmp/val.err")"
# a reward whose extra value is 1e999 (inf once parsed): validation names the row, the step and the key
cat > "$tmp/inf_reward.py" <<'P'
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    print('{"id": %d, "score": 0.5, "acc": 1e999}' % req["id"], flush=True)
P
timeout 120 "$RLC" eval "$tmp/grpo.yaml" data.val_files="$tmp/val.jsonl" trainer.default_local_dir="$tmp/run4" \
  custom_reward_function.command="/usr/bin/python3 $tmp/inf_reward.py" >/dev/null 2>"$tmp/inf.err"
rc=$?
[ $rc -eq 1 ] && [ "$(grep -c '^rlc: error:' "$tmp/inf.err")" -eq 1 ] &&
  grep -qF 'val.jsonl:1: validation at step 0, sample 0: the reward'"'"'s "acc" is inf' "$tmp/inf.err" &&
  ok "a non-finite reward value in validation: $(cat "$tmp/inf.err")" || bad "non-finite validation reward: exit $rc $(tail -3 "$tmp/inf.err")"
if [ $skip -gt 0 ]; then echo "$pass passed, $fail failed, $skip skipped"; else echo "$pass passed, $fail failed"; fi
[ $fail -eq 0 ]
