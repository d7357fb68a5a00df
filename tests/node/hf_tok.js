// hf_tok.js: the Hugging Face Rust tokenizer (npm `tokenizers`) as a test/bench oracle for rlc.
// usage: node hf_tok.js encode TOKENIZER_JSON IN.jsonl OUT.jsonl   ({"text": s} lines -> {"ids": [...]} lines)
//        node hf_tok.js decode TOKENIZER_JSON IN.jsonl OUT.jsonl   ({"ids": [...], "skip": bool, "cleanup": bool}
//                                                                   -> {"text": s, "hex": UTF-8 hex}; cleanup applies transformers'
//                                                                   clean_up_tokenization to the text)
//        node hf_tok.js bench  TOKENIZER_JSON IN.jsonl REPS         (encode MB/s of the "text" fields; run with
//                                                                   RAYON_NUM_THREADS=1 for one thread)
// Input lines are encoded with encodeBatch (one call, no per-string promise overhead); ids are written
// in input order. addSpecialTokens is false unless the line has "special": true.
"use strict";
const fs = require("fs");
const { Tokenizer } = require("tokenizers");

function readJsonl(path) {
  return fs.readFileSync(path, "utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l));
}

// transformers' PreTrainedTokenizerBase.clean_up_tokenization (v4), applied when tokenizer_config.json sets
// clean_up_tokenization_spaces: each replacement over the whole string, in this order.
function cleanUp(s) {
  const pairs = [[" .", "."], [" ?", "?"], [" !", "!"], [" ,", ","], [" ' ", "'"], [" n't", "n't"], [" 'm", "'m"],
    [" 's", "'s"], [" 've", "'ve"], [" 're", "'re"]];
  for (const [a, b] of pairs) s = s.split(a).join(b);
  return s;
}

async function main() {
  const [mode, tokPath, inPath, outArg] = process.argv.slice(2);
  const t = Tokenizer.fromFile(tokPath);
  const rows = readJsonl(inPath);
  if (mode === "encode") {
    const out = [];
    const plain = rows.filter((r) => !r.special).map((r) => r.text);
    const spec = rows.filter((r) => r.special).map((r) => r.text);
    const ep = plain.length ? await t.encodeBatch(plain, { addSpecialTokens: false }) : [];
    const es = spec.length ? await t.encodeBatch(spec, { addSpecialTokens: true }) : [];
    let ip = 0, is = 0;
    for (const r of rows) {
      const e = r.special ? es[is++] : ep[ip++];
      out.push(JSON.stringify({ ids: Array.from(e.getIds()) }));
    }
    fs.writeFileSync(outArg, out.join("\n") + "\n");
  } else if (mode === "decode") {
    // decodeBatch per skip flag, results put back in input order
    const text = new Array(rows.length);
    for (const skip of [false, true]) {
      const idx = [];
      rows.forEach((r, i) => { if (!!r.skip === skip) idx.push(i); });
      if (!idx.length) continue;
      const dec = await t.decodeBatch(idx.map((i) => rows[i].ids), skip);
      idx.forEach((i, k) => { text[i] = rows[i].cleanup ? cleanUp(dec[k]) : dec[k]; });
    }
    // "hex": the UTF-8 bytes, for readers whose JSON strings stop at U+0000
    const line = (s) => JSON.stringify({ text: s, hex: Buffer.from(s, "utf8").toString("hex") });
    fs.writeFileSync(outArg, text.map(line).join("\n") + "\n");
  } else if (mode === "bench") {
    const texts = rows.map((r) => r.text);
    const bytes = texts.reduce((a, s) => a + Buffer.byteLength(s, "utf8"), 0);
    const reps = parseInt(outArg || "5", 10);
    const times = [], cpus = [];
    let ntok = 0;
    for (let i = 0; i < reps; i++) {
      const c0 = process.cpuUsage();
      const t0 = process.hrtime.bigint();
      const enc = await t.encodeBatch(texts, { addSpecialTokens: false });
      const t1 = process.hrtime.bigint();
      const c = process.cpuUsage(c0);   // the whole process: the encoding thread plus node's own
      times.push(Number(t1 - t0) / 1e9);
      cpus.push((c.user + c.system) / 1e6);
      ntok = enc.reduce((a, e) => a + e.getIds().length, 0);
    }
    const median = (v) => v.slice().sort((a, b) => a - b)[Math.floor(v.length / 2)];
    const med = median(times), cmed = median(cpus);
    console.log(JSON.stringify({ bytes, tokens: ntok, median_s: med, mb_per_s: bytes / 1e6 / med, cpu_median_s: cmed,
      cpu_mb_per_s: bytes / 1e6 / cmed }));
  } else {
    console.error("usage: node hf_tok.js encode|decode|bench TOKENIZER_JSON IN.jsonl OUT|REPS");
    process.exit(2);
  }
}
main().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
