#!/bin/bash
# compare_demo.sh REF_RLC NEW_RLC [WORKDIR [SFT_CKPT]]: do two rlc binaries compute the same numbers? Runs, with each
# binary and the same seed and thread count, the shortened demo (`rlc demo --quick`), 4 SFT steps at the demo's full
# batch and arguments, and two GRPO steps at the demo's full batch (64 prompts x 8 samples) from SFT_CKPT (default: the
# quick demo's SFT checkpoint, which scores 0 and so sends no policy gradient: pass a full demo's sft/ folder);
# then compares every checkpoint and optimizer/trainer state with cmp, and every metrics file with its timing keys
# (timing_s/*, timing_per_token_ms/*, */perf/*, seconds_total) removed. Run from the repository root (the demo reads
# examples/). Prints one line per compared file and exits 1 on any difference.
set -u
REF=$(readlink -f "$1"); NEW=$(readlink -f "$2"); W=${3:-/tmp/rlc_compare_demo}; CKPT=${4:-$W/ref/sft}
THR=${THREADS:-2}
rm -rf "$W"; mkdir -p "$W"
run() {   # run TAG BIN
    local tag=$1 bin=$2 o=$W/$1
    "$bin" demo --quick --seed 1 --threads "$THR" --out "$o" > "$W/$tag.demo.log" 2>&1 || { echo "demo failed: $bin"; exit 1; }
    "$bin" sft --model "$W/ref/init" --data "$W/ref/data/sft.jsonl" --out "$o/sft_full" --steps 4 --batch-size 32 --lr 3e-3 \
        --lr-scheduler cosine --warmup-steps 2 --weight-decay 0.01 --seed 1 --threads "$THR" --log-every 1 \
        > "$W/$tag.sft.log" 2>&1 || { echo "sft failed: $bin"; exit 1; }
    "$bin" train examples/demo/grpo_synth.yaml actor_rollout_ref.model.path="$CKPT" data.val_files="$W/ref/data/heldout.jsonl" \
        data.train_files="$W/ref/data/grpo_train.jsonl" trainer.default_local_dir="$o/grpo_full" trainer.total_training_steps=2 \
        trainer.n_threads="$THR" trainer.resume_mode=disable trainer.val_before_train=false \
        > "$W/$tag.grpo.log" 2>&1 || { echo "grpo failed: $bin"; exit 1; }
}
run ref "$REF"
run new "$NEW"
strip_json() {   # a metrics JSON Lines file without its timing keys
    /usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    print(json.dumps({k: v for k, v in d.items() if not (k.startswith("timing") or "perf/" in k or k == "seconds_total")}, sort_keys=True))
' "$1"
}
fail=0; n=0
cd "$W/ref" || exit 1
while IFS= read -r f; do
    n=$((n + 1))
    case "$f" in
    *.jsonl|*summary.json)
        if cmp -s <(strip_json "$W/ref/$f") <(strip_json "$W/new/$f"); then echo "same  $f (timing keys removed)"
        else echo "DIFF  $f"; fail=1; fi ;;
    *)
        if cmp -s "$W/ref/$f" "$W/new/$f"; then echo "same  $f"; else echo "DIFF  $f"; fail=1; fi ;;
    esac
done < <(find . -type f \( -name '*.safetensors' -o -name 'optimizer.bin' -o -name 'trainer_state.bin' -o -name '*.jsonl' \
              -o -name 'summary.json' -o -name 'tokenizer.json' \) -not -path './data/*' | sort)
# the SFT logs' loss and grad_norm columns (the rest is timing)
if cmp -s <(grep -o 'loss [^|]*|\|grad_norm [^|]*|' "$W/ref.sft.log") <(grep -o 'loss [^|]*|\|grad_norm [^|]*|' "$W/new.sft.log"); then
    echo "same  SFT log loss/grad_norm"
else echo "DIFF  SFT log loss/grad_norm"; fail=1; fi
echo "$n files compared: $([ $fail = 0 ] && echo all identical || echo DIFFERENCES)"
exit $fail
