// test_harden.c: regression cases for hostile inputs, one per failure class: resumed state with extreme
// values, absurd model sizes, token ids that overflow, RoPE bases beyond float32, regexes that backtrack
// without end, YAML nested without end, a second YAML document, NUL bytes and \u0000 escapes, invalid UTF-8,
// text after the JSON value, non-finite weights, and error messages whose reason must survive a long name.
// Each case runs in a forked child that must print exactly one line "rlc: error: ..." naming the file or key
// (io_expect_die), or load correctly. Also: the finite scan against its plain reference.
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/json.h"
#include "data/jsonl.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io_testutil.h"
#include "model/config.h"
#include "testlib.h"
#include "tiny_model.h"
#include "tokenizer/tokenizer.h"
#include "trainer/config.h"
#include "trainer/finite.h"
#include "trainer/lr_schedule.h"
#include "trainer/optim.h"

static char *DIR_;

static char *path_of(const char *name) { return rlc_path_join(DIR_, name); }
static char *put(const char *name, const void *data, size_t n) {
    char *p = path_of(name);
    if (rlc_write_file_atomic(p, data, n) != 0) { TL_CHECK(0, "cannot write %s", p); }
    return p;
}

// ---- core: message shortening and the strict JSON helper ----

static void die_long_name(void *arg) {
    rlc_die("%s: cannot open shard: No such file or directory", (const char *)arg);
}

static void test_messages(void) {
    char *name = rlc_malloc(100001);
    memset(name, 'a', 100000);
    name[100000] = 0;
    char out[1024];
    rlc_format_short(out, sizeof out, "index.json: shard '%s' is missing: the reason", name);
    TL_CHECK(strlen(out) < sizeof out && strstr(out, "is missing: the reason") && strstr(out, "bytes]"),
             "a 100,000-byte name is shortened in the middle, the reason kept: '%.200s'", out);
    io_expect_die("rlc_die with a 100,000-byte name", die_long_name, name, "bytes]", "No such file or directory",
                  (const char *)NULL);
    // a long message of many short words keeps its end
    rlc_strbuf b = {0};
    for (int i = 0; i < 2000; i++) rlc_sb_puts(&b, "word ");
    rlc_sb_puts(&b, "THE-END");
    rlc_shorten_message(b.s, out, sizeof out);
    TL_CHECK(strlen(out) < sizeof out && strstr(out, "THE-END"), "many words: the end survives");
    rlc_sb_free(&b);
    free(name);
}

static void test_json_helper(void) {
    static const struct { const char *text; size_t n; const char *want; } BAD[] = {
        {"{\"a\": 1}\0junk", 13, "NUL byte"},
        {"{\"a\": 1} x", 10, "text after the JSON value"},
        {"{\"a\": \"x\\u0000y\"}", 17, "\\u0000"},
        {"{\"a\": \"\xc3\x28\"}", 10, "invalid UTF-8"},
        {"{\"a\": \"x\ty\"}", 12, "raw control byte"},
        {"{\"a\": 1", 7, "invalid JSON"},
        {"", 0, "empty"},
    };
    char err[256];
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        cJSON *j = rlc_json_parse_err(BAD[i].text, BAD[i].n, "f.json", err, sizeof err);
        TL_CHECK(!j && strstr(err, BAD[i].want) && !strncmp(err, "f.json:1:", 9), "strict JSON case %zu: '%s'", i, err);
        cJSON_Delete(j);
    }
    static const char GOOD[] = "{\"a\": [1, 2.5e3, \"\\u00e9\\n\xc3\xa9\"], \"b\": null}\n  ";
    cJSON *j = rlc_json_parse_err(GOOD, sizeof GOOD - 1, "f.json", err, sizeof err);
    TL_CHECK(j && cJSON_GetArraySize(cJSON_GetObjectItem(j, "a")) == 3, "valid JSON with escapes and trailing space parses");
    cJSON_Delete(j);
}

// ---- finite scan ----

static void test_finite(void) {
    model_config cfg;
    param_layout pl;
    param_set ps;
    tiny_params_init(&cfg, &pl, &ps, 0, 3);
    finite_report r = finite_scan(ps.data, &pl), rr = finite_scan_ref(ps.data, &pl);
    TL_CHECK(r.tensor < 0 && rr.tensor < 0, "finite weights: no report");
    tl_rng g;
    tl_rng_init(&g, 11);
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    int agree = 1;
    for (int trial = 0; trial < 40; trial++) {
        const int64_t a = (int64_t)tl_uniform(&g, 0.f, (float)pl.numel) % pl.numel;
        const int64_t b = (int64_t)tl_uniform(&g, 0.f, (float)pl.numel) % pl.numel;
        ps.data[a] = bad[trial % 3];
        if (trial % 2) ps.data[b] = bad[(trial + 1) % 3];
        r = finite_scan(ps.data, &pl);
        rr = finite_scan_ref(ps.data, &pl);
        const int64_t first = a < b || !(trial % 2) ? a : b;
        const param_tensor *t = r.tensor >= 0 ? &pl.tensors[r.tensor] : NULL;
        agree &= r.tensor == rr.tensor && r.element == rr.element && t && t->offset + r.element == first;
        ps.data[a] = 0.5f;
        ps.data[b] = 0.5f;
    }
    TL_CHECK(agree, "finite_scan finds the first non-finite element, as finite_scan_ref does (40 random cases)");
    ps.data[pl.tensors[3].offset + 5] = NAN;
    param_set_free(&ps);
    param_layout_free(&pl);
}

typedef struct { param_layout *pl; float *data; } finite_arg;
static void check_finite_child(void *p) {
    finite_arg *a = p;
    finite_check_save(a->data, NULL, NULL, a->pl, 7);
}
static void test_finite_die(void) {
    model_config cfg;
    param_layout pl;
    param_set ps;
    tiny_params_init(&cfg, &pl, &ps, 0, 3);
    ps.data[pl.tensors[4].offset + 5] = INFINITY;
    finite_arg a = {&pl, ps.data};
    io_expect_die("a non-finite weight before a save", check_finite_child, &a, "training step 7", pl.tensors[4].name,
                  "element 5 is inf", "last good one stays the latest", (const char *)NULL);
    param_set_free(&ps);
    param_layout_free(&pl);
}

// ---- optimizer and scheduler state ----

static param_layout OPT_PL;
typedef struct { const char *path; int resume; } opt_arg;
static void load_opt(void *p) {
    const opt_arg *a = p;
    adamw_hparams h = adamw_hparams_default();
    adamw_state st;
    adamw_init(&st, &OPT_PL, &h);
    if (a->resume) adamw_load_resume(&st, a->path);
    else adamw_load(&st, a->path, NULL, 0);
}

// header field offsets of the optimizer state (magic 8, version 4, n_extra 4, numel 8, step 8, 4 doubles, extras)
enum { OFF_STEP = 24, OFF_EPS = 48, OFF_WD = 56, OFF_EXTRA0 = 64 };

static void test_optimizer_state(void) {
    model_config cfg;
    param_set ps;
    tiny_params_init(&cfg, &OPT_PL, &ps, 0, 5);
    adamw_hparams h = adamw_hparams_default();
    adamw_state st;
    adamw_init(&st, &OPT_PL, &h);
    char *good = path_of("optim.bin");
    const int64_t extra[1] = {4};
    adamw_save(&st, good, extra, 1);
    size_t n;
    char *bytes = rlc_read_file(good, &n);
    static const struct { int off; int is_double; double d; int64_t i; const char *want; } CASES[] = {
        {OFF_STEP, 0, 0, INT64_MAX, "step 9223372036854775807"},
        {OFF_EPS, 1, 0.0, 0, "eps 0"},
        {OFF_WD, 1, 1e300, 0, "weight_decay 1e+300"},
        {OFF_EXTRA0, 0, 0, INT64_MAX, "LR scheduler step 9223372036854775807"},
        {OFF_EXTRA0, 0, 0, -1, "LR scheduler step -1"},
    };
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        char *b = rlc_malloc(n);
        memcpy(b, bytes, n);
        if (CASES[k].is_double) memcpy(b + CASES[k].off, &CASES[k].d, 8);
        else memcpy(b + CASES[k].off, &CASES[k].i, 8);
        char name[32];
        snprintf(name, sizeof name, "optim_%zu.bin", k);
        char *p = put(name, b, n);
        opt_arg a = {p, 1};
        io_expect_die(CASES[k].want, load_opt, &a, name, CASES[k].want, (const char *)NULL);
        free(p);
        free(b);
    }
    opt_arg a = {good, 1};
    char msg[512];
    TL_CHECK(io_run_child(load_opt, &a, msg, sizeof msg) == 0, "the untouched state loads: %s", msg);
    free(bytes);
    free(good);
    adamw_free(&st);
    param_set_free(&ps);
}

static void sched_huge(void *p) {
    (void)p;
    lr_schedule ls;
    lr_schedule_init(&ls, LR_COSINE, 1e-3, 0, INT64_MAX, 0.0);
}

// ---- tokenizer ----

typedef struct { const char *json; size_t n; const char *text; } tok_arg;
static void tok_load_encode(void *p) {
    const tok_arg *a = p;
    rlc_tokenizer *t = rlc_tok_from_json(a->json, a->n, "bad/tokenizer.json", NULL);
    if (a->text) {
        rlc_ivec v = {0};
        rlc_tok_encode(t, a->text, strlen(a->text), &v);
        rlc_iv_free(&v);
    }
    rlc_tok_free(t);
}

#define TOK_HEAD "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2%s}, \"merges\": [\"a b\"]}"
static void tok_case(const char *what, const char *extra_vocab, const char *rest, const char *tail, size_t tail_n,
                     const char *text, const char *want) {
    char buf[8192];
    int k = snprintf(buf, sizeof buf, TOK_HEAD, extra_vocab);
    k += snprintf(buf + k, sizeof buf - (size_t)k, "%s}", rest);
    memcpy(buf + k, tail, tail_n);
    tok_arg a = {buf, (size_t)k + tail_n, text};
    io_expect_die(what, tok_load_encode, &a, "bad/tokenizer.json", want, (const char *)NULL);
}

typedef struct { const char *gen; } gencfg_arg;
static void tok_gen_config(void *p) {
    const gencfg_arg *a = p;
    static const char J[] = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": []}}";
    rlc_tokenizer *t = rlc_tok_from_json(J, sizeof J - 1, "tokenizer.json", NULL);
    rlc_tok_apply_config(t, NULL, NULL, a->gen, "generation_config.json");
    rlc_tok_free(t);
}

static void test_tokenizer(void) {
    tok_case("added token id 2^31-1", "", ", \"added_tokens\": [{\"id\": 2147483647, \"content\": \"<x>\"}]", "", 0, "ab",
             "added_tokens[0].id = 2147483647");
    tok_case("added token id 2^30", "", ", \"added_tokens\": [{\"id\": 1073741824, \"content\": \"<x>\"}]", "", 0, NULL,
             "added_tokens[0].id");
    tok_case("added token ids far beyond the vocab", "", ", \"added_tokens\": [{\"id\": 900000, \"content\": \"<x>\"}]",
             "", 0, NULL, "token ids reach 900000 but there are only 4 tokens");
    tok_case("a vocab id of 2^31", ", \"c\": 2147483648", "", "", 0, NULL, "token id out of range");
    tok_case("invalid UTF-8 in a vocab key", ", \"\xff\xfe\": 3", "", "", 0, NULL, "invalid UTF-8");
    tok_case("text after the closing brace", "", "", " {}", 3, NULL, "text after the JSON object");
    tok_case("a NUL byte then junk after the closing brace", "", "", "\0junk", 5, NULL, "NUL byte");
    tok_case("\\u0000 in a vocab key", ", \"x\\u0000y\": 3", "", "", 0, NULL, "\\u0000");
    // nested quantifiers on a long line: an error naming the file and the pattern, in well under a second
    char *line = rlc_malloc(4001);
    memset(line, 'a', 4000);
    line[4000] = 0;
    static const char *const PATS[2] = {"a*a*b|a", "\\\\s*\\\\s*x|\\\\s"};
    for (int i = 0; i < 2; i++) {
        char rest[256];
        snprintf(rest, sizeof rest, ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"%s\"}, "
                 "\"behavior\": \"Isolated\", \"invert\": false}", PATS[i]);
        if (i == 1) memset(line, ' ', 4000);
        double t0 = rlc_now();
        tok_case(i ? "regex \\s*\\s*x|\\s on 4,000 spaces" : "regex a*a*b|a on 4,000 characters", "", rest, "", 0, line,
                 i ? "pre_tokenizer regex '\\s*\\s*x|\\s'" : "pre_tokenizer regex 'a*a*b|a'");
        TL_CHECK(rlc_now() - t0 < 20, "the backtracking regex stops early (%.1f s)", rlc_now() - t0);
    }
    free(line);
    static const struct { const char *gen, *want; } GEN[] = {
        {"{\"eos_token_id\": 2147483648}", "eos_token_id"},
        {"{\"eos_token_id\": 9223372036854775808}", "eos_token_id"},
        {"{\"eos_token_id\": [1, 18446744073709551616]}", "eos_token_id[]"},
        {"{\"bos_token_id\": -1e300}", "bos_token_id"},
        {"{\"eos_token_id\": 1} junk", "text after the JSON value"},
    };
    for (size_t i = 0; i < sizeof GEN / sizeof GEN[0]; i++) {
        gencfg_arg a = {GEN[i].gen};
        io_expect_die(GEN[i].gen, tok_gen_config, &a, "generation_config.json", GEN[i].want, (const char *)NULL);
    }
}

// ---- model config: sizes, RoPE, strict JSON ----

static void load_cfg_file(void *p) {
    model_config c;
    model_config_load(&c, (const char *)p);
}
typedef struct { const char *json; int alloc; } cfg_arg;
static void parse_cfg_layout(void *p) {
    const cfg_arg *a = p;
    model_config c;
    model_config_parse(&c, a->json, "big/config.json");
    param_layout pl;
    param_layout_init(&pl, &c);
    if (a->alloc) {
        param_set ps;
        param_set_init(&ps, &pl);
    }
}

static void test_model_config(void) {
    char js[2048];
    snprintf(js, sizeof js, TINY_CFG_JSON, "false");
    // text after the object, and a NUL byte followed by junk, in the file
    const size_t n = strlen(js);
    char *buf = rlc_malloc(n + 8);
    memcpy(buf, js, n);
    memcpy(buf + n, "\0junk", 5);
    char *p = put("cfg_nul.json", buf, n + 5);
    io_expect_die("config.json: }\\0junk", load_cfg_file, p, "cfg_nul.json", "NUL byte", (const char *)NULL);
    free(p);
    memcpy(buf + n, " x", 2);
    p = put("cfg_trail.json", buf, n + 2);
    io_expect_die("config.json: text after the object", load_cfg_file, p, "cfg_trail.json", "text after the JSON value",
                  (const char *)NULL);
    free(p);
    free(buf);
    // RoPE base beyond float32
    char *q = strstr(js, "\"rope_theta\": 10000");
    char js2[2100];
    snprintf(js2, sizeof js2, "%.*s\"rope_theta\": 1e308%s", (int)(q - js), js, q + strlen("\"rope_theta\": 10000"));
    p = put("cfg_rope.json", js2, strlen(js2));
    io_expect_die("rope_theta 1e308", load_cfg_file, p, "cfg_rope.json", "rope_theta", "float32", (const char *)NULL);
    free(p);
    // eos ids beyond int32: a range error, never a cast
    static const char *const EOS[2] = {"2147483648", "9223372036854775808"};
    for (int i = 0; i < 2; i++) {
        char *e = strstr(js, "\"eos_token_id\": 1");
        char js3[2100];
        snprintf(js3, sizeof js3, "%.*s\"eos_token_id\": [%s]%s", (int)(e - js), js, EOS[i], e + strlen("\"eos_token_id\": 1"));
        p = put("cfg_eos.json", js3, strlen(js3));
        io_expect_die(i ? "config.json eos_token_id 2^63" : "config.json eos_token_id 2^31", load_cfg_file, p, "cfg_eos.json",
                      "eos_token_id", "out of range", (const char *)NULL);
        free(p);
    }
    // absurd sizes: refused at the layout (2^40 parameters), or up front for this machine's memory
    static const char BIG[] =
        "{\"model_type\": \"qwen3\", \"vocab_size\": %lld, \"hidden_size\": %lld, \"intermediate_size\": %lld, "
        "\"num_hidden_layers\": %d, \"num_attention_heads\": 8, \"num_key_value_heads\": 8, \"head_dim\": 64, "
        "\"tie_word_embeddings\": true}";
    char big[512];
    snprintf(big, sizeof big, BIG, 1ll << 30, 1ll << 30, 1ll << 30, 2);
    cfg_arg a = {big, 0};
    io_expect_die("vocab, hidden, intermediate 2^30", parse_cfg_layout, &a, "limited to 2^40 parameters", (const char *)NULL);
    snprintf(big, sizeof big, BIG, 151936ll, 1ll << 30, 1ll << 30, 512);
    io_expect_die("hidden and intermediate 2^30, 512 layers", parse_cfg_layout, &a, "limited to 2^40 parameters",
                  (const char *)NULL);
    snprintf(big, sizeof big, BIG, 1ll << 20, 1ll << 16, 1ll << 16, 64);   // ~1.2e12 bytes of fp32
    a.alloc = 1;
    const int64_t mem = rlc_mem_total();
    if (mem > 0 && mem < (int64_t)1 << 42)
        io_expect_die("a model larger than this machine's memory", parse_cfg_layout, &a, "of memory; this machine has",
                      (const char *)NULL);
    else tl_skip("memory refusal: this machine has more than 4 TiB");
}

// ---- safetensors: \u0000 in names, dtypes and shard names ----

static void open_st_dir(void *p) {
    st_dir d;
    st_dir_open(&d, (const char *)p);
}

static void put_st(const char *dir, const char *header) {
    char *d = path_of(dir);
    rlc_mkdirs(d);
    char *f = rlc_path_join(d, "model.safetensors");
    const uint64_t hn = strlen(header);
    char *b = rlc_malloc(8 + hn + 16);
    memcpy(b, &hn, 8);
    memcpy(b + 8, header, hn);
    memset(b + 8 + hn, 0, 16);
    rlc_write_file_atomic(f, b, 8 + hn + 16);
    free(b); free(f); free(d);
}

static void test_safetensors(void) {
    put_st("st_name", "{\"a\\u0000b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}");
    char *d = path_of("st_name");
    io_expect_die("\\u0000 in a tensor name", open_st_dir, d, "model.safetensors", "\\u0000", (const char *)NULL);
    free(d);
    put_st("st_dtype", "{\"a\": {\"dtype\": \"F32\\u0000\", \"shape\": [4], \"data_offsets\": [0, 16]}}");
    d = path_of("st_dtype");
    io_expect_die("\\u0000 in a dtype", open_st_dir, d, "model.safetensors", "\\u0000", (const char *)NULL);
    free(d);
    // an index naming a shard with \u0000, and one naming a 100,000-byte shard name
    d = path_of("st_index");
    rlc_mkdirs(d);
    char *ix = rlc_path_join(d, "model.safetensors.index.json");
    static const char IX[] = "{\"weight_map\": {\"a\": \"model\\u0000.safetensors\"}}";
    rlc_write_file_atomic(ix, IX, sizeof IX - 1);
    io_expect_die("\\u0000 in a shard name", open_st_dir, d, "model.safetensors.index.json", "\\u0000", (const char *)NULL);
    rlc_strbuf b = {0};
    rlc_sb_puts(&b, "{\"weight_map\": {\"a\": \"");
    for (int i = 0; i < 100000; i++) rlc_sb_putc(&b, 'x');
    rlc_sb_puts(&b, ".safetensors\"}}");
    rlc_write_file_atomic(ix, b.s, b.n);
    io_expect_die("a 100,000-byte shard name", open_st_dir, d, "bytes]", "safetensors: cannot open", (const char *)NULL);
    rlc_sb_free(&b);
    free(ix);
    free(d);
}

// ---- YAML and JSONL ----

static void load_yaml(void *p) {
    rlc_train_config c;
    rlc_config_init(&c);
    rlc_config_load_yaml(&c, (const char *)p);
}

static void read_jsonl(void *p) {
    rlc_jsonl r;
    rlc_jsonl_open(&r, (const char *)p, "prompts");
    while (rlc_jsonl_next(&r, "{\"prompt\": ...}")) {}
    rlc_jsonl_close(&r);
}

static void test_yaml_jsonl(void) {
    rlc_strbuf b = {0};
    rlc_sb_puts(&b, "trainer:\n  total_epochs: ");
    for (int i = 0; i < 100000; i++) rlc_sb_putc(&b, '[');
    char *p = put("deep.yaml", b.s, b.n);
    double t0 = rlc_now();
    io_expect_die("YAML nested 100,000 deep", load_yaml, p, "deep.yaml:2:", "nesting deeper than 64", (const char *)NULL);
    TL_CHECK(rlc_now() - t0 < 10, "the deep YAML is refused quickly (%.1f s)", rlc_now() - t0);
    free(p);
    rlc_sb_free(&b);
    static const char TWO[] = "trainer:\n  total_epochs: 1\n---\ntrainer: {total_epochs: [\n";
    p = put("two.yaml", TWO, sizeof TWO - 1);
    io_expect_die("a second YAML document", load_yaml, p, "two.yaml:3", "second YAML document", (const char *)NULL);
    free(p);
    static const char NUL[] = "trainer:\n  total_epochs: 1\n\0  bogus_key: 1\n";
    p = put("nul.yaml", NUL, sizeof NUL - 1);
    io_expect_die("a NUL byte in YAML", load_yaml, p, "nul.yaml:3", "NUL byte", (const char *)NULL);
    free(p);
    static const char JL[] = "{\"prompt\": \"ab\0cd\"}\n";
    p = put("nul.jsonl", JL, sizeof JL - 1);
    io_expect_die("a raw NUL in a JSONL prompt", read_jsonl, p, "nul.jsonl:1", "NUL byte at column 15", (const char *)NULL);
    free(p);
}

// ---- non-finite weights at load ----

typedef struct { const char *dir; int allow; } ck_arg;
static void load_ck(void *p) {
    const ck_arg *a = p;
    model_config c;
    param_layout pl;
    param_set ps;
    checkpoint_load_ex(a->dir, &c, &pl, &ps, a->allow);
    param_set_free(&ps);
    param_layout_free(&pl);
}

static void test_nonfinite_load(void) {
    model_config cfg;
    param_layout pl;
    param_set ps;
    tiny_params_init(&cfg, &pl, &ps, 0, 9);
    const param_tensor *t = &pl.tensors[5];
    // F32 NaN; F16 overflow to inf; an F64 source of 1e300 (finite as F64, inf as fp32)
    static const char *const DIRS[3] = {"ck_f32", "ck_f16", "ck_f64"};
    for (int k = 0; k < 3; k++) {
        char *d = path_of(DIRS[k]);
        const float keep = ps.data[t->offset + 3];
        ps.data[t->offset + 3] = k == 0 ? NAN : 1e6f;
        checkpoint_save(d, &ps, k == 1 ? ST_F16 : ST_F32);
        if (k == 2) {   // rewrite the weights with the one tensor as F64
            st_write_tensor *w = rlc_calloc((size_t)pl.n_tensors, sizeof *w);
            double *f64 = rlc_malloc((size_t)t->numel * sizeof(double));
            for (int64_t j = 0; j < t->numel; j++) f64[j] = ps.data[t->offset + j];
            f64[3] = 1e300;
            for (int i = 0; i < pl.n_tensors; i++) {
                const param_tensor *p = &pl.tensors[i];
                w[i] = (st_write_tensor){.name = p->name, .dtype = p == t ? ST_F64 : ST_F32, .ndim = p->ndim,
                                         .f32 = p == t ? NULL : ps.data + p->offset, .raw = p == t ? f64 : NULL};
                memcpy(w[i].shape, p->shape, sizeof p->shape);
            }
            char *f = rlc_path_join(d, "model.safetensors");
            st_write(f, w, pl.n_tensors, NULL, 0);
            free(f); free(f64); free(w);
        }
        ps.data[t->offset + 3] = keep;
        ck_arg a = {d, 0};
        char what[64];
        snprintf(what, sizeof what, "a non-finite weight (%s)", DIRS[k]);
        io_expect_die(what, load_ck, &a, "model.safetensors", t->name, "element 3", "--allow-nonfinite", (const char *)NULL);
        a.allow = 1;
        char msg[2048];
        const int rc = io_run_child(load_ck, &a, msg, sizeof msg);
        TL_CHECK(rc == 0 && strstr(msg, "rlc: warning:") && strstr(msg, t->name), "--allow-nonfinite loads %s with a warning: %s",
                 DIRS[k], msg);
        free(d);
    }
    param_set_free(&ps);
    param_layout_free(&pl);
}

int main(void) {
    DIR_ = tl_tmpdir("harden");
    test_messages();
    test_json_helper();
    test_finite_die();
    test_optimizer_state();
    io_expect_die("lr schedule of 2^63 steps", sched_huge, NULL, "total steps 9223372036854775807", (const char *)NULL);
    test_tokenizer();
    test_model_config();
    test_safetensors();
    test_yaml_jsonl();
    test_nonfinite_load();
    test_finite();   // last: its parallel scan starts OpenMP threads, which a forked child would wait for
    param_layout_free(&OPT_PL);
    if (!tl_failed) tl_system("rm -rf '%s'", DIR_);
    free(DIR_);
    return tl_summary();
}
