#!/usr/bin/env bash
# test_ppo_dist.sh: PPO with a critic under mpirun -np 2 (skips without mpirun or in a build without MPI):
#  - 2 ranks == 1 process after 2 steps: the actor's and the critic's weights to 1e-5, every metric to 1e-4 (the
#    critic's backbone sharded as the actor's, its value head replicated with an all-reduced gradient);
#  - a 2-rank checkpoint with a critic resumed by 1 process, and a 1-process one by 2 ranks, == the uninterrupted run
#    it came from;
#  - the per-rank critic state is ~1/2 of one process's;
#  - an untied model (actor with its lm_head, critic without): 2 ranks == 1 process, a 2-rank resume is bit-identical,
#    a 2-rank checkpoint resumed by 1 process == the uninterrupted run;
#  - bypass_mode's per-micro-batch actor metrics reduced over 2 ranks.
set -u
cd "$(dirname "$0")/.."
B=${RLC_BUILD:-build}
RLC=$B/rlc
. tests/dist_lib.sh
dl_need_mpi
G=$(mktemp -d "${TMPDIR:-/tmp}/rlc-ppo-dist-XXXXXX")
trap 'rm -rf "$G"' EXIT
dl_fixture "$G"
# lr 1e-3 for both models and responses of varied length (max 48): as tests/test_dist.sh explains, at larger lr AdamW
# turns fp32 summation-order noise on near-zero gradients into weight differences above 1e-5.
cat >"$G/base.yaml" <<Y
data:
  train_files: $G/train.jsonl
  val_files: $G/val.jsonl
  train_batch_size: 4
  max_prompt_length: 256
  max_response_length: 48
  seed: 1
actor_rollout_ref:
  model: {path: $G/m}
  actor:
    optim: {lr: 1.0e-3}
    ppo_mini_batch_size: 4
    ppo_micro_batch_size_per_gpu: 2
    use_kl_loss: true
    kl_loss_coef: 0.1
  rollout:
    n: 4
    temperature: 0.8
critic:
  optim: {lr: 1.0e-3}
  ppo_mini_batch_size: 2
  ppo_micro_batch_size_per_gpu: 2
algorithm: {adv_estimator: gae, gamma: 0.99, lam: 0.95}
custom_reward_function: {command: /usr/bin/python3 tests/py/grpo_reward.py}
trainer:
  total_epochs: 2
  test_freq: -1
  save_freq: 2
  val_before_train: false
  n_threads: 1
Y
# both models' weights; whitened GAE advantages have unit scale: their mean, and pg_loss at ratio 1 (= -mean;
# actor/loss too while the KL is ~0), are cancellations to ~1e-8, compared at 1e-6 absolute (fp32 rounding of
# unit-scale values summed in another order)
DL_ROLES=actor,critic
DL_LOOSE=critic/advantages/mean,actor/pg_loss,actor/loss
gtrain 1 one trainer.total_training_steps=2 || { bad "rlc train with a critic (1 process)"; tail "$G/one.log"; }
gtrain 2 two trainer.total_training_steps=2 || { bad "mpirun -np 2 rlc train with a critic"; tail "$G/two.log"; }
gcheck "2-rank PPO with a critic == 1 process after 2 steps: weights to 1e-5, metrics to 1e-4" two one 2 1
# verl's dynamic batches for the critic's values pass and update (uneven micro-batch counts across the ranks: padding
# passes of the value path)
dyn="trainer.total_training_steps=2 critic.use_dynamic_bsz=true critic.ppo_max_token_len_per_gpu=320
 critic.forward_max_token_len_per_gpu=320"
gtrain 1 dyn1 $dyn && gtrain 2 dyn2 $dyn || bad "rlc train with a critic on dynamic batches"
gcheck "2-rank PPO == 1 process, the critic on dynamic batches" dyn2 dyn1 2 1
line=$(grep "rlc: dist: critic per rank" "$G/two.log")
if r=$(/usr/bin/python3 -c '
import re, sys
m = re.search(r"sharded state ([0-9.]+) MiB \(params\+grads\+AdamW m,v; one process ([0-9.]+) MiB\)", sys.argv[1])
s, u = float(m.group(1)), float(m.group(2))
print("%.3f MiB x 2 ranks / %.3f MiB = %.3f" % (s, u, 2 * s / u)); sys.exit(0 if 0.95 < 2 * s / u < 1.1 else 1)' "$line" 2>&1)
then ok "per-rank critic state is ~1/2 of one process's ($r)"; else bad "per-rank critic state: $r ($line)"; fi
# cross-N resume with a critic: 2 steps + resume under the other rank count + 2 (an epoch boundary in between). Each
# is compared with the straight run of its checkpoint's rank count at step 3, weights and metrics: step 3 samples from
# the very same weights. Step 4 samples from weights the two rank counts updated with different rounding (~1e-6), which
# can flip a sampled token and fork the runs, so it is only run.
gtrain 1 c4 trainer.total_training_steps=4 trainer.save_freq=1 || bad "4 PPO steps"
gtrain 2 c4two trainer.total_training_steps=4 trainer.save_freq=1 || bad "4 PPO steps on 2 ranks"
cp -r "$G/two" "$G/r21" && cp -r "$G/one" "$G/r12"
gtrain 1 r21 trainer.total_training_steps=4 trainer.save_freq=1 && grep -q "resumed from global_step_2" "$G/r21.log" || { bad "1 process resuming the 2-rank checkpoint with a critic"; tail "$G/r21.log"; }
gtrain 2 r12 trainer.total_training_steps=4 trainer.save_freq=1 && grep -q "resumed from global_step_2" "$G/r12.log" || { bad "2 ranks resuming the 1-process checkpoint with a critic"; tail "$G/r12.log"; }
gcheck "2-rank checkpoint with a critic resumed by 1 process == uninterrupted (step 3)" r21 c4two 3 3
gcheck "1-process checkpoint with a critic resumed by 2 ranks == uninterrupted (step 3)" r12 c4 3 3
# An untied model (its own lm_head): the actor's lm_head block is sharded with the rest, the critic from the same
# checkpoint is built without it. 2 ranks == 1 process; a 2-rank run resumed on 2 ranks == the uninterrupted one, bit
# for bit (both models' weights and optimizer states).
sed 's/"tie_word_embeddings": true/"tie_word_embeddings": false/' "$G/config.json" > "$G/config_untied.json"
"$RLC" init --config "$G/config_untied.json" --out "$G/mu" --seed 4 --dtype f32 --tokenizer "$G/tok" >/dev/null || bad "fixture untied model"
if grep -q '"lm_head.weight"' <(head -c 65536 "$G/mu/model.safetensors"); then ok "the untied fixture has lm_head.weight"
else bad "the untied fixture has no lm_head.weight"; fi
u="actor_rollout_ref.model.path=$G/mu"
gtrain 1 u1 $u trainer.total_training_steps=2 && gtrain 2 u2 $u trainer.total_training_steps=2 || {
  bad "PPO with an untied actor and critic (1 process / 2 ranks)"; tail "$G/u2.log"; }
gcheck "untied: 2-rank PPO with a critic == 1 process after 2 steps" u2 u1 2 1
gtrain 2 ur $u trainer.total_training_steps=1 trainer.save_freq=1 &&
gtrain 2 ur $u trainer.total_training_steps=2 trainer.save_freq=1 && grep -q "resumed from global_step_1" "$G/ur.log" || {
  bad "untied: 2 ranks, 1 step, then resumed to 2"; tail "$G/ur.log"; }
same=1
for f in actor/model.safetensors actor/optimizer.bin critic/model.safetensors critic/optimizer.bin critic/value_head_optimizer.bin; do
  cmp -s "$G/u2/global_step_2/$f" "$G/ur/global_step_2/$f" || { same=0; echo "  differs: $f"; }
done
[ $same = 1 ] && ok "untied: a 2-rank resume is bit-identical to the uninterrupted 2-rank run" || bad "untied: 2-rank resume differs"
# and across rank counts: the 2-rank checkpoint resumed by 1 process == the uninterrupted 2-rank run at step 3
gtrain 2 u3two $u trainer.total_training_steps=3 || bad "untied: 3 steps on 2 ranks"
cp -r "$G/u2" "$G/ur21"
gtrain 1 ur21 $u trainer.total_training_steps=3 && grep -q "resumed from global_step_2" "$G/ur21.log" || {
  bad "untied: 1 process resuming the 2-rank checkpoint"; tail "$G/ur21.log"; }
gcheck "untied: 2-rank checkpoint resumed by 1 process == uninterrupted (step 3)" ur21 u3two 3 3
if grep -q '"lm_head.weight"' <(head -c 65536 "$G/u2/global_step_2/actor/model.safetensors") &&
   ! grep -q '"lm_head.weight"' <(head -c 65536 "$G/u2/global_step_2/critic/model.safetensors"); then
  ok "untied: the saved actor has its lm_head, the critic none"
else bad "untied: lm_head in the saved actor / critic"; fi
# bypass_mode on 2 ranks: the actor's micro-batch metrics (actor/entropy, rollout_corr/*) are reduced over both ranks
gtrain 2 byp trainer.total_training_steps=1 trainer.save_freq=-1 algorithm.rollout_correction.bypass_mode=true \
  algorithm.rollout_correction.rollout_is=token actor_rollout_ref.actor.calculate_entropy=true || { bad "bypass_mode on 2 ranks"; tail "$G/byp.log"; }
if r=$(/usr/bin/python3 -c '
import json, math, sys
o = json.loads(open(sys.argv[1]).read().splitlines()[-1])
ks = ["actor/entropy", "rollout_corr/kl", "rollout_corr/rollout_is_mean", "rollout_corr/training_ppl"]
v = [o.get(k, float("nan")) for k in ks]
print(", ".join("%s %.6g" % kv for kv in zip(ks, v)))
sys.exit(0 if all(isinstance(x, float) and math.isfinite(x) for x in v) and abs(v[2] - 1) < 0.1 and v[0] > 0 else 1)' "$G/byp/metrics.jsonl" 2>&1)
then ok "bypass_mode on 2 ranks reports the actor's micro-batch metrics ($r)"; else bad "bypass_mode on 2 ranks: $r"; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
