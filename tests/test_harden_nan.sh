#!/usr/bin/env bash
# test_harden_nan.sh: a GRPO run whose weights go non-finite on purpose (RLC_TEST_NONFINITE_LR=3 makes step 3's
# update use a NaN learning rate) stops with one error naming the step and the tensor, writes no checkpoint of
# that step, and leaves the last good checkpoint (step 2) as latest; resuming from it still works. A trainer
# state whose step is 2^63-1 is refused on resume.
set -u
cd "$(dirname "$0")/.."
B=${RLC_BUILD:-build}
RLC=$B/rlc
pass=0; fail=0
ok() { pass=$((pass+1)); echo "ok $1"; }
bad() { fail=$((fail+1)); echo "FAIL: $1"; }
if [ ! -x "$RLC" ]; then echo "skip: $RLC missing (run make)"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlc-nan-XXXXXX"); [ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT; echo "tmp $tmp"

"$RLC" gen-task --out "$tmp/sft.jsonl" --n 100 --seed 1 --format sft >/dev/null &&
"$RLC" gen-task --out "$tmp/train.jsonl" --n 8 --seed 2 >/dev/null &&
"$RLC" train-tokenizer --data "$tmp/sft.jsonl" --fields prompt,response --out "$tmp/tok" --vocab-size 300 >/dev/null ||
  { bad "fixture data and tokenizer"; # a resumed trainer state with global_step = INT64_MAX is refused, naming the file
/usr/bin/python3 -c "
import struct, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[16:24] = struct.pack('<q', 2**63 - 1); open(p, 'wb').write(bytes(b))
" "$run/global_step_4/trainer_state.bin"
timeout 120 "$RLC" train "$tmp/grpo.yaml" trainer.total_training_steps=6 >/dev/null 2>"$tmp/bad_state.err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l < "$tmp/bad_state.err")" -eq 1 ] && grep -q 'trainer_state.bin: corrupt trainer state (global_step 9223372036854775807' "$tmp/bad_state.err" &&
  ok "a trainer state with global_step 2^63-1 is refused: $(cat "$tmp/bad_state.err")" || bad "bad trainer state: exit $rc $(head -c 400 "$tmp/bad_state.err")"
echo "$pass passed, $fail failed"; exit 1; }
cat > "$tmp/config.json" <<'J'
{"model_type": "qwen3", "vocab_size": 320, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 512, "rms_norm_eps": 1e-06,
 "rope_theta": 10000.0, "tie_word_embeddings": true, "bos_token_id": null, "eos_token_id": 302, "torch_dtype": "float32"}
J
"$RLC" init --config "$tmp/config.json" --out "$tmp/m" --seed 3 --tokenizer "$tmp/tok" >/dev/null 2>&1 ||
  { bad "rlc init"; # a resumed trainer state with global_step = INT64_MAX is refused, naming the file
/usr/bin/python3 -c "
import struct, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[16:24] = struct.pack('<q', 2**63 - 1); open(p, 'wb').write(bytes(b))
" "$run/global_step_4/trainer_state.bin"
timeout 120 "$RLC" train "$tmp/grpo.yaml" trainer.total_training_steps=6 >/dev/null 2>"$tmp/bad_state.err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l < "$tmp/bad_state.err")" -eq 1 ] && grep -q 'trainer_state.bin: corrupt trainer state (global_step 9223372036854775807' "$tmp/bad_state.err" &&
  ok "a trainer state with global_step 2^63-1 is refused: $(cat "$tmp/bad_state.err")" || bad "bad trainer state: exit $rc $(head -c 400 "$tmp/bad_state.err")"
echo "$pass passed, $fail failed"; exit 1; }
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
RLC_TEST_NONFINITE_LR=3 timeout 300 "$RLC" train "$tmp/grpo.yaml" >"$tmp/train.log" 2>"$tmp/train.err"
rc=$?
err=$(grep '^rlc: error:' "$tmp/train.err")
[ $rc -eq 1 ] && ok "the run stops with exit 1 when the weights go non-finite" || { bad "exit $rc (expected 1)"; tail -3 "$tmp/train.err"; }
[ "$(grep -c '^rlc: error:' "$tmp/train.err")" -eq 1 ] && ok "one error line: $err" || bad "error lines: $(cat "$tmp/train.err" | tail -3)"
echo "$err" | grep -q "training step 3: the weights went non-finite: tensor 'model\.[a-z_.0-9]*' element [0-9]* is -\?nan" &&
  ok "the error names the step and the tensor" || bad "error text: $err"
[ "$(cat "$run/latest_checkpointed_iteration.txt" 2>/dev/null)" = "2" ] && ok "latest_checkpointed_iteration.txt stays 2" ||
  bad "latest is '$(cat "$run/latest_checkpointed_iteration.txt" 2>/dev/null)'"
[ -d "$run/global_step_2/actor" ] && [ ! -e "$run/global_step_3" ] && ! ls -a "$run" | grep -q '^\.tmp_' &&
  ok "global_step_2 is kept, no step-3 checkpoint or temp directory is written" || bad "run dir: $(ls -a "$run")"
# the kept checkpoint is finite: it loads (a non-finite weight would be a load error) and the run resumes from it
timeout 300 "$RLC" train "$tmp/grpo.yaml" >"$tmp/resume.log" 2>&1 &&
  [ "$(cat "$run/latest_checkpointed_iteration.txt")" = "4" ] && ok "resuming from the last good checkpoint finishes the run" ||
  { bad "resume"; tail -3 "$tmp/resume.log"; }
# a resumed trainer state with global_step = INT64_MAX is refused, naming the file
/usr/bin/python3 -c "
import struct, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[16:24] = struct.pack('<q', 2**63 - 1); open(p, 'wb').write(bytes(b))
" "$run/global_step_4/trainer_state.bin"
timeout 120 "$RLC" train "$tmp/grpo.yaml" trainer.total_training_steps=6 >/dev/null 2>"$tmp/bad_state.err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l < "$tmp/bad_state.err")" -eq 1 ] && grep -q 'trainer_state.bin: corrupt trainer state (global_step 9223372036854775807' "$tmp/bad_state.err" &&
  ok "a trainer state with global_step 2^63-1 is refused: $(cat "$tmp/bad_state.err")" || bad "bad trainer state: exit $rc $(head -c 400 "$tmp/bad_state.err")"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
