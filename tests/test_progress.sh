#!/usr/bin/env bash
# test_progress.sh: progress output respects where it goes. `rlc sft` on a pseudo-terminal (`script`) draws one
# line rewritten in place (\r ... erase-to-end) ending in the last step, with step, loss, tokens/s and the ETA;
# into a file it writes a plain line for the first step, every --log-every steps and the last, with no control
# characters. `rlc train` on a pseudo-terminal shows the phases of a step (generating, update_actor) on the
# progress line and keeps its one console line per step; into a file it writes exactly those console lines.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
RLC=$ROOT/${RLC_BUILD:-build}/rlc
pass=0; fail=0
ok() { pass=$((pass+1)); echo "ok $1"; }
bad() { fail=$((fail+1)); echo "FAIL: $1"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
# the lines as a terminal leaves them: the pty's \r\n ends, then what follows each line's last \r, no erase codes
screen() { sed -e 's/\r$//' -e 's/.*\r//' -e $'s/\033\\[K//g' "$1"; }
if [ ! -x "$RLC" ]; then echo "skip: $RLC missing (run make)"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlc-progress-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
G=$tmp
cat >"$G/config.json" <<'JSON'
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 320, "hidden_size": 32,
 "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "head_dim": 8, "max_position_embeddings": 512, "rms_norm_eps": 1e-06, "rope_theta": 10000,
 "tie_word_embeddings": true, "bos_token_id": null, "eos_token_id": 302, "hidden_act": "silu",
 "attention_bias": false, "attention_dropout": 0.0, "use_sliding_window": false, "sliding_window": null,
 "max_window_layers": 2, "initializer_range": 0.5, "torch_dtype": "float32"}
JSON
"$RLC" gen-task --out "$G/sft.jsonl" --n 200 --seed 1 --format sft >/dev/null &&
"$RLC" gen-task --out "$G/train.jsonl" --n 8 --seed 2 >/dev/null &&
"$RLC" train-tokenizer --data "$G/sft.jsonl" --fields prompt,response --out "$G/tok" --vocab-size 300 >/dev/null &&
"$RLC" init --config "$G/config.json" --out "$G/m" --seed 3 --dtype f32 --tokenizer "$G/tok" >/dev/null || bad "fixture"
# 25 steps of SFT on 8 sequences each
sft() { "$RLC" sft --model "$G/m" --data "$G/sft.jsonl" --out "$G/$1" --steps 25 --batch-size 8 --threads 1 "${@:2}"; }

# 1. not a terminal: lines for steps 1, 10, 20 and 25 (the last), plain text
sft out1 --log-every 10 >"$G/sft.log" 2>&1 || { bad "rlc sft into a file"; tail "$G/sft.log"; }
steps=$(grep -oE '^step [0-9]+/25' "$G/sft.log" | tr '\n' ' ')
check "sft into a file: a line at steps 1, 10, 20, 25 (got: $steps)" '[ "$steps" = "step 1/25 step 10/25 step 20/25 step 25/25 " ]'
check "sft into a file: no control characters" '! grep -q $'"'"'[\r\033]'"'"' "$G/sft.log"'
check "sft lines: loss, tokens/s, ETA" 'grep "^step 10/25" "$G/sft.log" | grep -q "^step 10/25 (40%) | loss [0-9.]* | [0-9]* tok/s | ETA [0-9]*:[0-9][0-9] | elapsed .*grad_norm .*epoch 0"'
check "sft: the summary line follows" 'grep -q "^rlc sft: 25 steps, loss" "$G/sft.log"'
sft out2 >"$G/sft_default.log" 2>&1
check "sft --log-every defaults to 10" '[ "$(grep -c "^step " "$G/sft_default.log")" = 4 ]'
err=$(sft out3 --log-every 0 2>&1 >/dev/null); rc=$?
check "--log-every 0: one-line error" '[ $rc = 1 ] && [[ "$err" == *log-every* ]] && [ "$(printf "%s\n" "$err" | wc -l)" = 1 ]'

# 2. a pseudo-terminal: one line redrawn in place, the last state left on screen
if ! command -v script >/dev/null; then
  echo "skip: script (util-linux) missing: no pseudo-terminal checks"
else
  script -qec "$(printf '%q ' "$RLC" sft --model "$G/m" --data "$G/sft.jsonl" --out "$G/out4" --steps 25 --batch-size 8 \
      --threads 1 --log-every 1)" /dev/null >"$G/tty.log" 2>&1 </dev/null
  tr -d '\r' <"$G/tty.log" >"$G/tty_nocr.log"
  check "sft on a terminal: the line is redrawn with \\r and erase-to-end" 'grep -q $'"'"'\r\033\[K\?step'"'"' "$G/tty.log" || grep -q $'"'"'\rstep'"'"' "$G/tty.log"'
  # lines as the terminal shows them: what remains after the last \r of each newline-terminated line
  shown=$(screen "$G/tty.log" | grep -c '^step ')
  check "sft on a terminal: one progress line stays on screen (got $shown), not one per step" '[ "$shown" = 1 ]'
  check "sft on a terminal: it shows the last step with loss, tok/s and elapsed time" \
    'screen "$G/tty.log" | grep "^step" | grep -q "step 25/25 (100%) | loss [0-9.]* | [0-9]* tok/s | elapsed"'
  check "sft on a terminal: the summary line follows on its own line" 'grep -q "^rlc sft: 25 steps" "$G/tty_nocr.log"'

  # under an MPI launcher (its ranks get a pseudo-terminal even when mpirun writes to a file): plain lines
  script -qec "OMPI_COMM_WORLD_SIZE=1 $(printf '%q ' "$RLC" sft --model "$G/m" --data "$G/sft.jsonl" --out "$G/out5" \
      --steps 25 --batch-size 8 --threads 1)" /dev/null >"$G/mpi.log" 2>&1 </dev/null
  check "sft under an MPI launcher: plain lines even on a terminal" \
    '[ "$(tr -d "\r" <"$G/mpi.log" | grep -c "^step ")" = 4 ] && ! grep -q $'"'"'\033'"'"' "$G/mpi.log"'
  # rlc train: phases on the progress line, console lines as before
  cat >"$G/grpo.yaml" <<Y
data: {train_files: $G/train.jsonl, train_batch_size: 4, max_prompt_length: 256, max_response_length: 16, seed: 1}
actor_rollout_ref:
  model: {path: $G/m}
  actor: {optim: {lr: 1.0e-3}, ppo_mini_batch_size: 4, ppo_micro_batch_size_per_gpu: 2}
  rollout: {n: 2}
custom_reward_function: {command: /usr/bin/python3 $ROOT/tests/py/grpo_reward.py}
trainer: {total_training_steps: 2, save_freq: -1, test_freq: -1, val_before_train: false, n_threads: 1}
Y
  script -qec "$(printf '%q ' "$RLC" train "$G/grpo.yaml" trainer.default_local_dir="$G/g1")" /dev/null >"$G/ttrain.log" 2>&1 </dev/null
  check "train on a terminal: the progress line names the phases" \
    'grep -q "step 1/2 (50%) generating" "$G/ttrain.log" && grep -q "step 2/2 (100%) update_actor 1/1" "$G/ttrain.log"'
  check "train on a terminal: one console line per step" '[ "$(screen "$G/ttrain.log" | grep -c "^step [12]/2 | score")" = 2 ]'
  "$RLC" train "$G/grpo.yaml" trainer.default_local_dir="$G/g2" >"$G/ftrain.log" 2>&1
  check "train into a file: the console lines only, no control characters" \
    '[ "$(grep -c "^step " "$G/ftrain.log")" = 2 ] && ! grep -q $'"'"'[\r\033]'"'"' "$G/ftrain.log"'
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
