#!/usr/bin/env bash
# test_tensorboard.sh: `rlc train` with trainer.logger=['console','tensorboard'] writes one event file that an
# independent reader (tests/py/tb_events.py: protoc classes from TensorBoard's .proto files, its own CRC-32C)
# decodes into exactly metrics.jsonl: every metric of every line, at its training/global_step. The directory is
# $TENSORBOARD_DIR, else tensorboard_log/<project_name>/<experiment_name> (verl's); a resumed run's file starts
# with a SessionLog START at its first step, so TensorBoard's purge leaves what metrics.jsonl keeps; `rlc eval`
# logs step 0; an unknown logger is a one-line error listing the known ones.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
RLC=$ROOT/${RLC_BUILD:-build}/rlc
pass=0; fail=0
ok() { pass=$((pass+1)); echo "ok $1"; }
bad() { fail=$((fail+1)); echo "FAIL: $1"; }
if [ ! -x "$RLC" ]; then echo "skip: $RLC missing (run make)"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
/usr/bin/python3 tests/py/tb_events.py dump /dev/null >/dev/null 2>&1
if [ $? = 3 ]; then
  echo "skip: protoc or python3-protobuf missing (scripts/install-deps.sh installs them)"; echo "0 passed, 0 failed, 1 skipped"; exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlc-tb-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
G=$tmp
"$RLC" gen-task --out "$G/sft.jsonl" --n 200 --seed 1 --format sft >/dev/null &&
"$RLC" gen-task --out "$G/train.jsonl" --n 8 --seed 2 >/dev/null &&
"$RLC" gen-task --out "$G/val.jsonl" --n 2 --seed 3 >/dev/null &&
"$RLC" train-tokenizer --data "$G/sft.jsonl" --fields prompt,response --out "$G/tok" --vocab-size 300 >/dev/null || bad "fixture data"
cat >"$G/config.json" <<'JSON'
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 320, "hidden_size": 32,
 "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "head_dim": 8, "max_position_embeddings": 512, "rms_norm_eps": 1e-06, "rope_theta": 10000,
 "tie_word_embeddings": true, "bos_token_id": null, "eos_token_id": 302, "hidden_act": "silu",
 "attention_bias": false, "attention_dropout": 0.0, "use_sliding_window": false, "sliding_window": null,
 "max_window_layers": 2, "initializer_range": 0.5, "torch_dtype": "float32"}
JSON
"$RLC" init --config "$G/config.json" --out "$G/m" --seed 3 --dtype f32 --tokenizer "$G/tok" >/dev/null || bad "fixture model"
cat >"$G/base.yaml" <<Y
data: {train_files: $G/train.jsonl, val_files: $G/val.jsonl, train_batch_size: 4, max_prompt_length: 256,
       max_response_length: 24, seed: 1}
actor_rollout_ref:
  model: {path: $G/m}
  actor: {optim: {lr: 1.0e-3}, ppo_mini_batch_size: 4, ppo_micro_batch_size_per_gpu: 2, use_kl_loss: true}
  rollout: {n: 4, temperature: 0.8}
algorithm: {adv_estimator: grpo}
custom_reward_function: {command: /usr/bin/python3 $ROOT/tests/py/grpo_reward.py}
trainer: {total_epochs: 2, test_freq: 1, save_freq: 2, val_before_train: true, n_threads: 1,
          project_name: proj, experiment_name: exp1}
Y
# 1. TENSORBOARD_DIR, a 3-step run with validation at every step (steps 0..3: 4 lines)
if TENSORBOARD_DIR="$G/tb" timeout 300 "$RLC" train "$G/base.yaml" trainer.default_local_dir="$G/run" \
     trainer.total_training_steps=3 "trainer.logger=['console','tensorboard']" >"$G/train.log" 2>&1; then
  ok "rlc train with the tensorboard logger"
else bad "rlc train with the tensorboard logger"; tail -20 "$G/train.log"; fi
if r=$(/usr/bin/python3 tests/py/tb_events.py check "$G/tb" "$G/run/metrics.jsonl" 2>&1); then ok "$r"; else bad "$r"; fi
grep -q "rlc: tensorboard: $G/tb/events.out.tfevents" "$G/train.log" && ok "the event file is named in the log" ||
  bad "the event file is not named in the log"
[ "$(ls "$G/tb" | wc -l)" = 1 ] && ok "one event file" || bad "$(ls "$G/tb" | wc -l) event files in $G/tb"
# 1b. resumed from step 2 of that run, to step 4: metrics.jsonl keeps steps <= 2, then 3 and 4; the new event
#     file's SessionLog START at step 3 makes TensorBoard drop the first file's step 3, so the two files read
#     as metrics.jsonl does
if TENSORBOARD_DIR="$G/tb" timeout 300 "$RLC" train "$G/base.yaml" trainer.default_local_dir="$G/run" \
     trainer.total_training_steps=4 trainer.resume_mode=resume_path trainer.resume_from_path="$G/run/global_step_2" \
     "trainer.logger=['console','tensorboard']" >"$G/resume.log" 2>&1; then
  if r=$(/usr/bin/python3 tests/py/tb_events.py check "$G/tb" "$G/run/metrics.jsonl" 2>&1) && [[ "$r" == *"starts at steps [0, 3]"* ]]
  then ok "resumed: $r"; else bad "resumed: $r"; fi
else bad "rlc train resumed with the tensorboard logger"; tail -20 "$G/resume.log"; fi
# 2. the default directory, relative to the working directory: tensorboard_log/<project_name>/<experiment_name>
mkdir -p "$G/cwd"
if (cd "$G/cwd" && unset TENSORBOARD_DIR && timeout 300 "$RLC" train "$G/base.yaml" trainer.default_local_dir="$G/run2" \
      trainer.total_training_steps=1 trainer.val_before_train=false trainer.logger=tensorboard >"$G/train2.log" 2>&1); then
  if r=$(/usr/bin/python3 tests/py/tb_events.py check "$G/cwd/tensorboard_log/proj/exp1" "$G/run2/metrics.jsonl" 2>&1); then
    ok "default directory: $r"; else bad "default directory: $r"; fi
else bad "rlc train (logger tensorboard, default directory)"; tail -20 "$G/train2.log"; fi
# 3. rlc eval: the validation metrics at step 0
if TENSORBOARD_DIR="$G/tb_eval" timeout 300 "$RLC" eval "$G/base.yaml" trainer.default_local_dir="$G/ev" \
     "trainer.logger=[console, tensorboard]" >"$G/eval.log" 2>&1; then
  if r=$(/usr/bin/python3 tests/py/tb_events.py check "$G/tb_eval" "$G/ev/eval_metrics.jsonl" 2>&1); then ok "eval: $r"; else bad "eval: $r"; fi
else bad "rlc eval with the tensorboard logger"; tail -20 "$G/eval.log"; fi
# 4. an unknown logger: one line naming the key and the known loggers, before anything runs
err=$("$RLC" train "$G/base.yaml" trainer.default_local_dir="$G/run3" "trainer.logger=['console','wandb']" 2>&1 >/dev/null); rc=$?
if [ $rc = 1 ] && [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && [[ "$err" == *trainer.logger*wandb*console\|file\|tensorboard* ]]; then
  ok "unknown logger: $err"; else bad "unknown logger: rc $rc, '$err'"; fi
[ ! -e "$G/run3" ] && ok "nothing ran" || bad "the run directory was created"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
