// chat_render.js: renders chat templates with @huggingface/jinja (the oracle for rlc's C renderer).
// usage: node chat_render.js TOKENIZER_CONFIG_JSON IN.jsonl OUT.jsonl
// Each input line: {"messages": [...], "add_generation_prompt": bool, "enable_thinking": bool (optional)}.
// Output lines: {"text": rendered} (or {"error": message}). Rendering follows transformers'
// apply_chat_template: the template gets messages, add_generation_prompt, the special tokens and the
// extra kwargs (enable_thinking only when given).
"use strict";
const fs = require("fs");
const { Template, Environment } = require("@huggingface/jinja");

// @huggingface/jinja 0.5.13 implements str.strip/lstrip/rstrip as JS trim*(), ignoring the `chars`
// argument (and trimming U+FEFF, which JS counts as whitespace). transformers renders with Python's
// jinja2, where these are Python's str methods: `'  x'.lstrip('\n')` keeps the spaces. The Qwen3
// template calls lstrip('\n') / rstrip('\n') / strip('\n'), so patch the three to Python semantics.
(function patchPythonStrip() {
  const env = new Environment();
  env.set("__probe", "x");
  const sv = env.lookupVariable("__probe");
  const proto = Object.getPrototypeOf(sv);
  const desc = Object.getOwnPropertyDescriptor(proto, "builtins");
  const FunctionValue = desc.get.call(sv).get("strip").constructor;
  const StringValue = sv.constructor;
  const WS = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000";
  const cps = (s) => Array.from(s);
  function pyStrip(s, chars, left, right) {
    const set = new Set(cps(chars === undefined ? WS : chars));
    let a = cps(s), i = 0, j = a.length;
    if (left) while (i < j && set.has(a[i])) i++;
    if (right) while (j > i && set.has(a[j - 1])) j--;
    return a.slice(i, j).join("");
  }
  Object.defineProperty(proto, "builtins", {
    configurable: true,
    get() {
      const m = desc.get.call(this);
      if (!m.__py) {
        const self = this;
        const mk = (l, r) => new FunctionValue((args) => {
          const c = args && args.length && args[0] && args[0].type === "StringValue" ? args[0].value : undefined;
          return new StringValue(pyStrip(self.value, c, l, r));
        });
        m.set("strip", mk(true, true));
        m.set("lstrip", mk(true, false));
        m.set("rstrip", mk(false, true));
        m.__py = true;
      }
      return m;
    },
  });
})();

const [cfgPath, inPath, outPath] = process.argv.slice(2);
const cfg = JSON.parse(fs.readFileSync(cfgPath, "utf8"));
const tmpl = new Template(cfg.chat_template);
const tokStr = (v) => (v && typeof v === "object" ? v.content : v);
const out = [];
for (const line of fs.readFileSync(inPath, "utf8").split("\n")) {
  if (!line) continue;
  const r = JSON.parse(line);
  const ctx = {
    messages: r.messages,
    add_generation_prompt: !!r.add_generation_prompt,
    bos_token: tokStr(cfg.bos_token) || "",
    eos_token: tokStr(cfg.eos_token) || "",
    pad_token: tokStr(cfg.pad_token) || "",
  };
  if (r.enable_thinking !== undefined && r.enable_thinking !== null) ctx.enable_thinking = r.enable_thinking;
  try {
    out.push(JSON.stringify({ text: tmpl.render(ctx) }));
  } catch (e) {
    out.push(JSON.stringify({ error: String(e) }));
  }
}
fs.writeFileSync(outPath, out.join("\n") + "\n");
