# dist_lib.sh: helpers shared by the data-parallel `rlc train` tests (tests/test_dist.sh, tests/test_ppo_dist.sh);
# sourced, not run. Expects RLC (the binary) and, for gtrain / gcheck, G (the fixture directory) to be set.
#   ok NAME / bad NAME          count a check (the scripts end with "$pass passed, $fail failed")
#   dl_need_mpi                 exits with a skip line when mpirun or an MPI build of $RLC is missing
#   dl_fixture DIR              gen-task data (8 train prompts, 2 val) + a trained tokenizer + DIR/config.json, a tiny
#                               random tied Qwen3 (vocab 320, hidden 32, 2 layers), initialised as DIR/m (seed 3)
#   gtrain NP RUN [overrides]   rlc train $G/base.yaml on NP ranks (1: no mpirun) into $G/RUN, log $G/RUN.log
#   gcheck NAME A B STEP FIRST  the runs $G/A and $G/B agree: the weights of global_step_STEP of each role in
#                               DL_ROLES (default "actor") to 1e-5 (max abs diff / max abs) and every metrics.jsonl
#                               value of the steps FIRST..STEP to 1e-4 relative (+1e-9 absolute; +1e-6 for the keys
#                               in DL_LOOSE, comma-separated); with DL_INIT (a safetensors file) the actor must also
#                               have moved from it by more than 1e-4.
pass=0; fail=0
ok() { echo "ok    $1"; pass=$((pass+1)); }
bad() { echo "FAIL  $1"; fail=$((fail+1)); }

dl_need_mpi() {
  if ! command -v mpirun >/dev/null; then echo "skip: mpirun not found"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
  if ! grep -q RLC_WITH_MPI <(strings "$RLC" 2>/dev/null) && ! nm "$RLC" 2>/dev/null | grep -q MPI_Init_thread; then
    echo "skip: $RLC built without MPI"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
  if [ "${RLC_SAN:-0}" = 1 ]; then
    # OpenMPI's own allocations are reported as leaks at exit; everything else of ASan/UBSan stays on.
    export ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
  fi
  export OMP_NUM_THREADS=1
}

dl_fixture() {
  local d=$1
  mkdir -p "$d"
  "$RLC" gen-task --out "$d/sft.jsonl" --n 200 --seed 1 --format sft >/dev/null &&
  "$RLC" gen-task --out "$d/train.jsonl" --n 8 --seed 2 >/dev/null &&
  "$RLC" gen-task --out "$d/val.jsonl" --n 2 --seed 3 >/dev/null &&
  "$RLC" train-tokenizer --data "$d/sft.jsonl" --fields prompt,response --out "$d/tok" --vocab-size 300 >/dev/null || bad "fixture data"
  cat >"$d/config.json" <<'JSON'
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 320, "hidden_size": 32,
 "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "head_dim": 8, "max_position_embeddings": 512, "rms_norm_eps": 1e-06, "rope_theta": 10000,
 "tie_word_embeddings": true, "bos_token_id": null, "eos_token_id": 302, "hidden_act": "silu",
 "attention_bias": false, "attention_dropout": 0.0, "use_sliding_window": false, "sliding_window": null,
 "max_window_layers": 2, "initializer_range": 0.5, "torch_dtype": "float32"}
JSON
  "$RLC" init --config "$d/config.json" --out "$d/m" --seed 3 --dtype f32 --tokenizer "$d/tok" >/dev/null || bad "fixture model"
}

# Skipped metrics: wall clock and memory (timing_s/, timing_per_token_ms/, perf/), rank 0's communication (dist/),
# global_seqlen/ (verl's per-rank partition sums: W-dependent by definition), the means over micro-batches, whose
# composition depends on W (actor/pg_clipfrac*, actor/ppo_kl, critic/vf_clipfrac, critic/vpred_mean), and the rollout
# vs actor kernel rounding (~1e-6 noise: training/rollout_probs_diff_*, rollout_corr/*).
dl_cmp_py='
import json, struct, sys, math, re
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8+n]); out = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        s, e = v["data_offsets"]; out[k] = struct.unpack("<%df" % ((e - s) // 4), b[8+n+s:8+n+e])
    return out
a_dir, b_dir, step, first = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
roles, init, loose = sys.argv[5].split(","), sys.argv[6], set(sys.argv[7].split(",")) - {""}
errs, moved = [], None
for role in roles:
    wa = load("%s/global_step_%d/%s/model.safetensors" % (a_dir, step, role))
    wb = load("%s/global_step_%d/%s/model.safetensors" % (b_dir, step, role))
    assert wa.keys() == wb.keys(), role
    den = max(max(abs(y) for y in wb[k]) for k in wb)
    errs.append(max(max(abs(x - y) for x, y in zip(wa[k], wb[k])) for k in wa) / den)
    if role == "actor" and init:
        wi = load(init)
        moved = max(max(abs(x - y) for x, y in zip(wi[k], wb[k])) for k in wb) / den
skip = re.compile(r"^(timing_s/|timing_per_token_ms/|perf/|actor/perf/|dist/|global_seqlen/|actor/pg_clipfrac|actor/ppo_kl|critic/vf_clipfrac|critic/vpred_mean|training/rollout_probs_diff_|rollout_corr/)")
def rows(d):
    return {int(o["training/global_step"]): o for o in map(json.loads, open(d + "/metrics.jsonl"))
            if first <= o["training/global_step"] <= step}
ma, mb = rows(a_dir), rows(b_dir)
bad = [] if sorted(ma) == sorted(mb) else ["steps %s vs %s" % (sorted(ma), sorted(mb))]
worst = 0.0; n = 0
for s in ma:
    x, y = ma[s], mb.get(s, {})
    ka = {k for k in x if not skip.match(k)}; kb = {k for k in y if not skip.match(k)}
    if ka != kb: bad.append("step %d keys differ: %s" % (s, sorted(ka ^ kb)))
    for k in ka & kb:
        u, v = x[k], y[k]; n += 1
        if not isinstance(u, (int, float)) or not isinstance(v, (int, float)) or math.isnan(u) or math.isnan(v):
            if repr(u) != repr(v): bad.append("step %d %s: %r vs %r" % (s, k, u, v))
            continue
        atol = 1e-6 if k in loose else 1e-9
        if abs(u - v) > 1e-4 * abs(v) + atol: bad.append("step %d %s: %.9g vs %.9g" % (s, k, u, v))
        if abs(v) > 1e-6: worst = max(worst, abs(u - v) / abs(v))
print("weights rel err %s%s; %d metric values of steps %s, worst rel diff %.3g%s" % (
      ", ".join("%s %.3g" % re for re in zip(roles, errs)), "" if moved is None else " (moved %.3g)" % moved, n,
      sorted(ma), worst, "; " + "; ".join(bad[:6]) if bad else ""))
sys.exit(0 if max(errs) <= 1e-5 and (moved is None or moved > 1e-4) and not bad and n > 0 else 1)'

gtrain() {   # gtrain NP RUN [overrides]
  local np=$1 run=$2; shift 2
  if [ "$np" = 1 ]; then timeout 300 "$RLC" train "$G/base.yaml" trainer.default_local_dir="$G/$run" "$@" >"$G/$run.log" 2>&1
  else timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$np" --mca btl self,vader "$RLC" train "$G/base.yaml" \
         trainer.default_local_dir="$G/$run" "$@" >"$G/$run.log" 2>&1; fi
}

gcheck() {   # gcheck NAME RUN_A RUN_B STEP FIRST_METRICS_STEP
  local r
  if r=$(/usr/bin/python3 -c "$dl_cmp_py" "$G/$2" "$G/$3" "$4" "$5" "${DL_ROLES:-actor}" "${DL_INIT:-}" "${DL_LOOSE:-}" 2>&1)
  then ok "$1 ($r)"
  else bad "$1: $r"; tail -5 "$G/$2.log"; fi
}
