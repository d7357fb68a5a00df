#!/usr/bin/env bash
# bench_lora_grpo.sh: one whole GRPO step with LoRA on a Qwen3-4B-shaped model (random bf16 weights from `rlc init`,
# a small BPE tokenizer from `rlc gen-task` + `rlc train-tokenizer`, so the prompts use a few hundred of the 151936
# ids): 2 prompts x n=2, 64 response tokens, rank 32 on all-linear targets, KL loss against the reference (the
# actor with its adapters off), frozen bf16 base. Reports rlc's per-phase timings and the peak RSS (target: <= 14
# GiB on a 24 GiB machine); full fine-tuning of the shape (16 bytes per parameter, ~60 GiB) does not fit, so there is
# no in-run peer. Never pass/fail. Needs ~8 GiB of disk for the checkpoint (kept in WORKDIR for reruns).
# usage: bench/bench_lora_grpo.sh [WORKDIR]   LAYERS=N (default 36) shrinks the depth; THREADS (default 2);
#        CKPT=none|selective|full (default full) the update's activation checkpointing
set -eu
cd "$(dirname "$0")/.."
RLC=${RLC_BUILD:-build}/rlc
[ -x "$RLC" ] || { echo "bench_lora_grpo: missing $RLC"; exit 1; }
W=${1:-$(mktemp -d "${TMPDIR:-/tmp}/rlc-bench-lora-grpo-XXXXXX")}
THREADS=${THREADS:-2}
LAYERS=${LAYERS:-36}
CKPT=${CKPT:-full}   # activation checkpointing of the update (verl's enable_gradient_checkpointing)
mkdir -p "$W"
if [ ! -f "$W/tok/tokenizer.json" ]; then
  "$RLC" gen-task --out "$W/sft.jsonl" --n 200 --seed 1 --format sft >/dev/null
  "$RLC" train-tokenizer --data "$W/sft.jsonl" --fields prompt,response --out "$W/tok" --vocab-size 300 >/dev/null
fi
"$RLC" gen-task --out "$W/train.jsonl" --n 2 --seed 2 >/dev/null
M="$W/model-L$LAYERS"
if [ ! -f "$M/model.safetensors" ]; then   # Qwen3-4B's config.json (tied embeddings), depth LAYERS
  cat > "$W/config-L$LAYERS.json" <<J
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 2560,
 "intermediate_size": 9728, "num_hidden_layers": $LAYERS, "num_attention_heads": 32, "num_key_value_heads": 8,
 "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
 "tie_word_embeddings": true, "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu",
 "attention_bias": false, "attention_dropout": 0.0, "use_sliding_window": false, "sliding_window": null,
 "max_window_layers": $LAYERS, "initializer_range": 0.02, "torch_dtype": "bfloat16"}
J
  "$RLC" init --config "$W/config-L$LAYERS.json" --out "$M" --seed 3 --dtype bf16 --tokenizer "$W/tok" >/dev/null
fi
rm -rf "$W/run"
/usr/bin/time -v "$RLC" train \
  data.train_files="$W/train.jsonl" data.train_batch_size=2 data.max_prompt_length=256 data.max_response_length=64 \
  actor_rollout_ref.model.path="$M" actor_rollout_ref.model.lora_rank=32 actor_rollout_ref.model.lora_alpha=32 \
  actor_rollout_ref.rollout.n=2 actor_rollout_ref.rollout.kv_cache_bytes=268435456 \
  actor_rollout_ref.actor.ppo_mini_batch_size=2 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 \
  actor_rollout_ref.actor.use_kl_loss=true actor_rollout_ref.actor.kl_loss_coef=0.001 \
  actor_rollout_ref.actor.activation_checkpoint="$CKPT" \
  custom_reward_function.command="/usr/bin/python3 tests/py/grpo_reward.py" \
  trainer.total_training_steps=1 trainer.save_freq=-1 trainer.test_freq=-1 trainer.val_before_train=false \
  trainer.resume_mode=disable trainer.n_threads="$THREADS" trainer.default_local_dir="$W/run" > "$W/rlc.log" 2> "$W/rlc.time" || {
    cat "$W/rlc.log" "$W/rlc.time"; exit 1; }
grep -E "^rlc: (model|LoRA)" "$W/rlc.log" || true
RSS=$(awk '/Maximum resident set size/ {printf "%.2f", $6/1048576}' "$W/rlc.time")
/usr/bin/python3 - "$W/run/metrics.jsonl" "$RSS" "$LAYERS" <<'PY'
import json, sys
m = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print(f"Qwen3-4B shape, {sys.argv[3]} layers, LoRA r 32 all-linear, bf16 base: {m['perf/total_num_tokens']:.0f} tokens, "
      f"step {m['timing_s/step']:.1f} s, peak RSS {sys.argv[2]} GiB (target <= 14)")
for k in ["gen", "reward", "old_log_prob", "ref", "adv", "update_actor", "update_weights", "step"]:
    print(f"  timing_s/{k:<14} {m.get('timing_s/' + k, float('nan')):9.3f}")
print(f"  actor/kl_loss {m['actor/kl_loss']:.3g}  actor/grad_norm {m['actor/grad_norm']:.6g}  response_length/mean {m['response_length/mean']:.1f}")
PY
[ -z "${1:-}" ] && rm -rf "$W"
exit 0
