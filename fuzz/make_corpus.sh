#!/usr/bin/env bash
# make_corpus.sh: regenerate the checked-in seed corpus fuzz/corpus/<target>/ from valid files of each format
# (rlc's own writers, the example configs, the chat templates under tests/data, the npm Parquet writers).
# Needs build/rlc (make) and, for Parquet, node with tests/node's packages. Seeds are small on purpose: the
# fuzzer mutates them, and a short input runs many more executions per second.
set -euo pipefail
cd "$(dirname "$0")/.."
RLC=build/rlc
C=fuzz/corpus
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
rm -rf "$C"; mkdir -p "$C"/{safetensors,st_index,config,tokenizer,tok_config,yaml,jsonl,optim,chat_template,parquet,peft,env,trainer_state}

# config.json: every family's example, and the tiny configs of the tests
for f in examples/*config.json tests/data/templates/*.json; do
  case "$f" in *templates*) continue;; esac
  cp "$f" "$C/config/$(basename "$f")"
done
# a tiny model (bf16 and f32 shards), its index, and the tokenizer the BPE trainer writes
cat > "$tmp/tiny.json" <<'J'
{"model_type": "qwen3", "vocab_size": 16, "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
 "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4, "max_position_embeddings": 32,
 "rope_theta": 10000.0, "tie_word_embeddings": true, "eos_token_id": 1}
J
cp "$tmp/tiny.json" "$C/config/tiny.json"
$RLC init --config "$tmp/tiny.json" --out "$tmp/m16" --dtype bf16 >/dev/null
$RLC init --config "$tmp/tiny.json" --out "$tmp/m32" --dtype f32 >/dev/null
cp "$tmp/m16/model.safetensors" "$C/safetensors/tiny_bf16.safetensors"
cp "$tmp/m32/model.safetensors" "$C/safetensors/tiny_f32.safetensors"
printf '{"metadata": {"total_size": 10}, "weight_map": {"a": "model-00001-of-00001.safetensors", "b": "model-00001-of-00001.safetensors"}}' \
  > "$C/st_index/index.json"
$RLC gen-task --out "$tmp/sft.jsonl" --n 40 --seed 1 --format sft >/dev/null
$RLC train-tokenizer --data "$tmp/sft.jsonl" --fields prompt,response --out "$tmp/tok" --vocab-size 280 >/dev/null
cp "$tmp/tok/tokenizer.json" "$C/tokenizer/bpe_trained.json"
# hand-written tokenizers reaching the other components (Metaspace + byte fallback, normalizers, decoders)
cat > "$C/tokenizer/spm_style.json" <<'J'
{"version": "1.0", "added_tokens": [{"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true}],
 "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
 "pre_tokenizer": null, "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
 "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
 "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true, "vocab": {"<unk>": 0, "<s>": 1, "<0x41>": 2, "▁": 3, "a": 4, "b": 5, "ab": 6, "▁a": 7}, "merges": [["a", "b"], ["▁", "a"]]}}
J
cat > "$C/tokenizer/split_regex.json" <<'J'
{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, " ": 3}, "merges": ["a b"]}, "normalizer": {"type": "NFC"},
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+|\\p{L}+|\\p{N}{1,3}"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
 "decoder": {"type": "ByteLevel"}, "added_tokens": [{"id": 4, "content": "<|im_end|>", "special": true}]}
J
{ printf '\0'; cat "$tmp/tok/tokenizer_config.json"; } > "$C/tok_config/tokenizer_config.json"
{ printf '\1'; cat "$tmp/tok/generation_config.json"; } > "$C/tok_config/generation_config.json"
{ printf '\0'; printf '{"bos_token": "<s>", "eos_token": {"content": "</s>"}, "add_bos_token": true, "tokenizer_class": "LlamaTokenizerFast"}'; } > "$C/tok_config/llama_style.json"
# the trainer YAML: the examples, one with overrides
for f in examples/grpo_*.yaml; do cp "$f" "$C/yaml/$(basename "$f")"; done
{ cat examples/grpo_gsm8k_tpu_seed.yaml; printf '\n%%%%\nactor_rollout_ref.actor.optim.lr=3e-6\nactor_rollout_ref.actor.optim.betas=[0.9, 0.95]\ntrainer.save_freq=null\n'; } \
  > "$C/yaml/with_overrides.yaml"
# JSON Lines
head -3 "$tmp/sft.jsonl" > "$C/jsonl/sft.jsonl"
printf '{"input_ids": [1, 2, 3], "loss_mask": [0, 1, 1]}\n\n{"input_ids": [999]}\r\n' > "$C/jsonl/ids.jsonl"
# the AdamW state of fuzz_optim's tiny layout, written by rlc's own adamw_save
cat > "$tmp/opt.c" <<'CC'
#include "model/config.h"
#include "model/params.h"
#include "trainer/optim.h"
int main(int argc, char **argv) {
    model_config c;
    model_config_parse(&c, "{\"model_type\": \"qwen3\", \"vocab_size\": 16, \"hidden_size\": 8, \"intermediate_size\": 8,"
                           " \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 4,"
                           " \"max_position_embeddings\": 32}", "cfg");
    param_layout pl;
    param_layout_init(&pl, &c);
    adamw_hparams h = adamw_hparams_default();
    adamw_state st;
    adamw_init(&st, &pl, &h);
    for (int64_t i = 0; i < pl.numel; i++) { st.m.data[i] = 0.01f * (float)(i % 7); st.v.data[i] = 1e-4f * (float)(i % 5); }
    st.step = 12;
    const int64_t extra[1] = {12};
    adamw_save(&st, argv[1], extra, 1);
    return 0;
}
CC
cc -std=c11 -D_GNU_SOURCE -fopenmp -Isrc -I/usr/include/x86_64-linux-gnu/openblas-openmp "$tmp/opt.c" -o "$tmp/opt" build/librlc.a \
  -L/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas -lcjson -lyaml -lpcre2-8 -lutf8proc -lsnappy -lzstd -lz -lm -lpthread
"$tmp/opt" "$C/optim/optimizer.bin"
# the trainer's state files of a checkpoint (src/trainer/trainer_state.h): trainer_state.bin after step 12 of a run
# of 8 prompts, and a value head's optimizer state of 9 values (hidden 8 + bias) at step 12
python3 - "$C/trainer_state" <<'PY'
import struct, sys
d = sys.argv[1]
open(d + "/trainer_state.bin", "wb").write(b"RLCGRPO\x01" + struct.pack("<IIqqqdQq", 1, 0, 12, 3, 0, 0.001, 1, 8))
m = [0.001 * (i + 1) for i in range(9)]
v = [1e-6 * (i + 1) for i in range(9)]
open(d + "/value_head_optimizer.bin", "wb").write(b"RLCVHOPT" + struct.pack("<IIqq", 1, 0, 9, 12) + struct.pack("<9f", *m) + struct.pack("<9f", *v))
PY
# PEFT adapter folders for the tiny model above, as fuzz_peft's input: a 4-byte length, adapter_config.json,
# then adapter_model.safetensors (rank 2 on q_proj and v_proj; all-linear with rsLoRA on every projection)
python3 - "$C/peft" <<'PY'
import json, struct, sys
H, QD, KD, I = 8, 8, 4, 8
shapes = {"q_proj": ("self_attn", H, QD), "k_proj": ("self_attn", H, KD), "v_proj": ("self_attn", H, KD),
          "o_proj": ("self_attn", QD, H), "gate_proj": ("mlp", H, I), "up_proj": ("mlp", H, I), "down_proj": ("mlp", I, H)}
def pair(name, mods, extra):
    r = 2
    cfg = dict(peft_type="LORA", r=r, lora_alpha=16, target_modules=mods, lora_dropout=0.0, bias="none",
               task_type="CAUSAL_LM", base_model_name_or_path="tiny", **extra)
    tensors, off, blob = {}, 0, b""
    for m in (sorted(shapes) if mods == "all-linear" else mods):
        part, i, o = shapes[m]
        for ab, shape in (("lora_A", (r, i)), ("lora_B", (o, r))):
            n = shape[0] * shape[1]
            data = struct.pack("<%df" % n, *[((k * 7) % 11 - 5) / 16.0 for k in range(n)])
            tensors["base_model.model.model.layers.0.%s.%s.%s.weight" % (part, m, ab)] = \
                {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + len(data)]}
            blob += data; off += len(data)
    tensors["__metadata__"] = {"format": "pt"}
    hdr = json.dumps(tensors).encode()
    st = struct.pack("<Q", len(hdr)) + hdr + blob
    c = json.dumps(cfg, sort_keys=True).encode()
    open("%s/%s.bin" % (sys.argv[1], name), "wb").write(struct.pack("<I", len(c)) + c + st)
pair("qv", ["q_proj", "v_proj"], {})
pair("all_linear_rslora", "all-linear", {"use_rslora": True})
PY
# the environment protocol: a session of replies, and a model turn with Hermes tool calls (fuzz_env)
printf '%s\n' '{"type": "hello", "protocol": "rlc-env/1", "tools": [{"type": "function", "function": {"name": "calc", "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}}}}]}' \
  '{"type": "started", "traj": "t0"}' '{"type": "observation", "traj": "t0", "results": [{"content": "4", "is_error": false}], "done": false}' \
  '{"type": "finished", "traj": "t0", "score": 1.0}' '{"type": "error", "message": "bad request"}' > "$C/env/replies.jsonl"
printf '%s' '<think>use the tool</think>
<tool_call>
{"name": "calc", "arguments": {"expr": "2+2"}}
</tool_call>
<tool_call>
{"name": "calc", "arguments": "x"}
</tool_call>' > "$C/env/hermes_turn.txt"
# chat templates: the ones the tests render against transformers
for f in tests/data/templates/*.jinja; do cp "$f" "$C/chat_template/$(basename "$f")"; done
# Parquet: verl rows from two independent writers (v1 pages with dictionaries; v2 pages with DELTA encodings)
if command -v node >/dev/null && [ -f tests/node/node_modules/hyparquet-writer/package.json ]; then
  printf '%s\n' '{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "What is 2+3?"}], "ability": "math", "reward_model": {"style": "rule", "ground_truth": "5"}, "extra_info": {"split": "train", "index": 0, "tags": ["a", null], "score": 0.5, "ok": true}}' \
    '{"data_source": "x", "prompt": [], "ability": null, "reward_model": null, "extra_info": {"split": null, "index": 1, "tags": [], "score": null, "ok": false}}' > "$tmp/rows.jsonl"
  node tests/node/parquet_write.mjs "$tmp/rows.jsonl" "$C/parquet/arrow_v1.parquet" arrow codec=none pages=1 dict=1
  node tests/node/parquet_write.mjs "$tmp/rows.jsonl" "$C/parquet/hyparquet_v2.parquet" hyparquet codec=none delta=1
  node tests/node/parquet_write.mjs "$tmp/rows.jsonl" "$C/parquet/arrow_snappy.parquet" arrow codec=snappy pages=1 dict=0 || true
else
  echo "make_corpus.sh: node or the npm Parquet writers are absent: no Parquet seeds" >&2
fi
du -sh "$C"/*
