// test_config.c: Qwen3 config.json parsing (all fields, variants) and its one-line errors; to_json round trip.
#include <math.h>

#include "core/common.h"
#include "io_testutil.h"
#include "model/config.h"
#include "testlib.h"

static char *tmp;

static const char *BASE =
    "{\"architectures\":[\"Qwen3ForCausalLM\"],\"attention_bias\":false,\"attention_dropout\":0.0,\"bos_token_id\":151643,"
    "\"eos_token_id\":151645,\"head_dim\":128,\"hidden_act\":\"silu\",\"hidden_size\":1024,\"initializer_range\":0.02,"
    "\"intermediate_size\":3072,\"max_position_embeddings\":40960,\"max_window_layers\":28,\"model_type\":\"qwen3\","
    "\"num_attention_heads\":16,\"num_hidden_layers\":28,\"num_key_value_heads\":8,\"rms_norm_eps\":1e-06,"
    "\"rope_scaling\":null,\"rope_theta\":1000000,\"sliding_window\":null,\"tie_word_embeddings\":true,"
    "\"torch_dtype\":\"bfloat16\",\"transformers_version\":\"4.51.0\",\"use_cache\":true,\"use_sliding_window\":false,"
    "\"vocab_size\":151936}";

// src with `"key":old` replaced by `repl` (repl "" deletes the pair, with its comma)
static char *edit_in(const char *BASE, const char *key, const char *repl) {
    static char bufs[2][4096];
    static int which;
    char *buf = bufs[which ^= 1];
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(BASE, pat);
    if (!p) { snprintf(buf, 4096, "%s", BASE); return buf; }
    const char *q = p + strlen(pat);
    int depth = 0;
    while (*q && !(depth == 0 && (*q == ',' || *q == '}'))) { if (*q == '[' || *q == '{') depth++; if (*q == ']' || *q == '}') depth--; q++; }
    size_t pre = (size_t)(p - BASE);
    if (!*repl) {   // delete the pair and one adjacent comma
        if (*q == ',') q++;
        else if (pre && BASE[pre - 1] == ',') pre--;
        snprintf(buf, 4096, "%.*s%s", (int)pre, BASE, q);
    } else {
        snprintf(buf, 4096, "%.*s%s%s", (int)pre, BASE, repl, q);
    }
    return buf;
}
static char *edit(const char *key, const char *repl) { return edit_in(BASE, key, repl); }

static const char *g_text, *g_path;
static void parse_child(void *arg) {
    model_config c;
    model_config_parse(&c, g_text, g_path);
}
static void expect_err(const char *what, const char *text, const char *s1, const char *s2) {
    g_text = text;
    g_path = "/x/config.json";
    io_expect_die(what, parse_child, NULL, "/x/config.json", s1, s2, (const char *)NULL);
}

static void good(void) {
    model_config c;
    model_config_parse(&c, BASE, "base");
    TL_CHECK(c.vocab_size == 151936 && c.hidden_size == 1024 && c.intermediate_size == 3072 && c.num_hidden_layers == 28 &&
                 c.num_attention_heads == 16 && c.num_key_value_heads == 8 && c.head_dim == 128 &&
                 c.max_position_embeddings == 40960 && c.rms_norm_eps == 1e-6f && c.rope_theta == 1e6 && c.tie_word_embeddings == 1 &&
                 c.bos_token_id == 151643 && c.eos_token_id == 151645 && c.n_eos_token_ids == 1 && c.use_sliding_window == 0 &&
                 c.sliding_window == -1 && c.max_window_layers == 28 && c.initializer_range == 0.02f && !strcmp(c.torch_dtype, "bfloat16"),
             "0.6B config fields");
    model_config e;
    model_config_load(&e, "examples/qwen3-0.6b-config.json");
    TL_CHECK(!memcmp(&c, &e, sizeof c), "examples/qwen3-0.6b-config.json == spec config");
    // a directory argument reads DIR/config.json
    char *p = rlc_path_join(tmp, "config.json");
    FILE *f = fopen(p, "w");
    fputs(BASE, f);
    fclose(f);
    model_config_load(&e, tmp);
    TL_CHECK(!memcmp(&c, &e, sizeof c), "model_config_load(DIR)");
    free(p);
    // max_window_layers >= num_hidden_layers: no layer slides, so a small window is still full attention
    model_config_parse(&e, edit_in(edit_in(edit("use_sliding_window", "\"use_sliding_window\":true"), "sliding_window",
                                           "\"sliding_window\":4096"), "max_window_layers", "\"max_window_layers\":28"), "mwl");
    TL_CHECK(e.use_sliding_window && e.sliding_window == 4096, "sliding window on no layer accepted");
}

static void variants(void) {
    model_config c;
    // rope_parameters (transformers v5), no top-level rope_theta
    model_config_parse(&c, edit("rope_theta", "\"rope_parameters\":{\"rope_theta\":5000000,\"rope_type\":\"default\"}"), "v5");
    TL_CHECK(c.rope_theta == 5e6, "rope_parameters.rope_theta: %g", c.rope_theta);
    // eos as a list, null bos
    model_config_parse(&c, edit("eos_token_id", "\"eos_token_id\":[151645,151643]"), "eos");
    TL_CHECK(c.eos_token_id == 151645 && c.n_eos_token_ids == 2 && c.eos_token_ids[1] == 151643, "eos list");
    model_config_parse(&c, edit("bos_token_id", "\"bos_token_id\":null"), "bos");
    TL_CHECK(c.bos_token_id == -1, "null bos");
    model_config_parse(&c, edit("eos_token_id", ""), "noeos");
    TL_CHECK(c.eos_token_id == -1 && c.n_eos_token_ids == 0, "absent eos");
    // sliding window on, but the window covers max_position_embeddings: full attention
    const char *t = edit_in(edit("use_sliding_window", "\"use_sliding_window\":true"), "sliding_window", "\"sliding_window\":40960");
    model_config_parse(&c, t, "swa");
    TL_CHECK(c.use_sliding_window == 1 && c.sliding_window == 40960, "sliding window >= max positions accepted");
    // transformers v5 writes "dtype"
    model_config_parse(&c, edit("torch_dtype", "\"dtype\":\"float32\""), "dtype");
    TL_CHECK(!strcmp(c.torch_dtype, "float32"), "dtype key");
    // optional keys absent take defaults
    model_config_parse(&c, edit("initializer_range", ""), "noinit");
    TL_CHECK(c.initializer_range == 0.02f, "initializer_range default");

    // to_json round trip (list eos, null bos, f32 dtype)
    model_config a;
    model_config_parse(&a, edit("eos_token_id", "\"eos_token_id\":[151645,151643]"), "a");
    a.bos_token_id = -1;
    a.rms_norm_eps = 1e-5f;
    a.initializer_range = 0.0173f;
    a.rope_theta = 12345.678;
    a.rope.theta = a.rope_local.theta = a.rope_theta;
    snprintf(a.torch_dtype, sizeof a.torch_dtype, "float32");
    char *js = model_config_to_json(&a);
    model_config b;
    model_config_parse(&b, js, "roundtrip");
    TL_CHECK(!memcmp(&a, &b, sizeof a), "to_json -> parse round trip");
    TL_CHECK(strstr(js, "\"rms_norm_eps\":\t1e-05") && strstr(js, "\"initializer_range\":\t0.0173") &&
                 strstr(js, "\"architectures\":\t[\"Qwen3ForCausalLM\"]") && strstr(js, "\"model_type\":\t\"qwen3\""),
             "to_json numbers and names: %s", js);
    if (tl_system("/usr/bin/python3 -c 'import json' 2>/dev/null") == 0) {
        // every Qwen3Config argument is present with a JSON type its constructor accepts
        char *p = rlc_path_join(tmp, "config.json");
        FILE *f = fopen(p, "w");
        fputs(js, f);
        fclose(f);
        int rc = tl_system(
            "/usr/bin/python3 -c \"import json,sys; c=json.load(open('%s'));"
            "keys='architectures attention_bias attention_dropout bos_token_id eos_token_id head_dim hidden_act hidden_size "
            "initializer_range intermediate_size max_position_embeddings max_window_layers model_type num_attention_heads "
            "num_hidden_layers num_key_value_heads rms_norm_eps rope_scaling rope_theta sliding_window tie_word_embeddings "
            "torch_dtype use_cache use_sliding_window vocab_size'.split(); m=[k for k in keys if k not in c];"
            "ints=[k for k in ('head_dim','hidden_size','intermediate_size','num_hidden_layers','vocab_size') if type(c[k]) is not int];"
            "sys.exit(1 if m or ints or c['eos_token_id']!=[151645,151643] or c['bos_token_id'] is not None else 0)\"", p);
        TL_CHECK(rc == 0, "python json.load of to_json output has all Qwen3Config keys");
        free(p);
    } else {
        tl_skip("/usr/bin/python3 absent: json key check");
    }
    free(js);
}

static void errors(void) {
    expect_err("wrong model_type", edit("model_type", "\"model_type\":\"llama\""), "\"model_type\"", "llama");
    expect_err("missing model_type", edit("model_type", ""), "missing", "\"model_type\"");
    expect_err("missing hidden_size", edit("hidden_size", ""), "missing", "\"hidden_size\"");
    expect_err("missing head_dim", edit("head_dim", ""), "missing", "\"head_dim\"");
    expect_err("missing rope_theta", edit("rope_theta", ""), "missing", "\"rope_theta\"");
    expect_err("missing tie", edit("tie_word_embeddings", ""), "missing", "\"tie_word_embeddings\"");
    expect_err("string hidden_size", edit("hidden_size", "\"hidden_size\":\"1024\""), "\"hidden_size\"", "integer");
    expect_err("fractional layers", edit("num_hidden_layers", "\"num_hidden_layers\":2.5"), "\"num_hidden_layers\"", "integer");
    expect_err("zero vocab", edit("vocab_size", "\"vocab_size\":0"), "\"vocab_size\"", "out of range");
    expect_err("nh % nkv", edit("num_key_value_heads", "\"num_key_value_heads\":5"), "\"num_key_value_heads\"", "divide");
    expect_err("odd head_dim", edit("head_dim", "\"head_dim\":127"), "\"head_dim\"", "even");
    expect_err("bool as int", edit("tie_word_embeddings", "\"tie_word_embeddings\":1"), "\"tie_word_embeddings\"", "true or false");
    expect_err("eps <= 0", edit("rms_norm_eps", "\"rms_norm_eps\":0"), "\"rms_norm_eps\"", "(0, 1)");
    expect_err("eos out of vocab", edit("eos_token_id", "\"eos_token_id\":200000"), "\"eos_token_id\"", "out of range");
    expect_err("eos list of strings", edit("eos_token_id", "\"eos_token_id\":[\"a\"]"), "\"eos_token_id\"", "integer");
    expect_err("sliding window", edit_in(edit_in(edit("use_sliding_window", "\"use_sliding_window\":true"), "sliding_window",
                                                 "\"sliding_window\":4096"), "max_window_layers", "\"max_window_layers\":20"),
               "\"use_sliding_window\"", "full attention");
    expect_err("rope scaling", edit("rope_scaling", "\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4}"), "\"rope_scaling\"", "RoPE");
    expect_err("rope_type", edit("rope_theta", "\"rope_parameters\":{\"rope_theta\":1e6,\"rope_type\":\"llama3\"}"), "rope_type", "default");
    expect_err("attention bias", edit("attention_bias", "\"attention_bias\":true"), "\"attention_bias\"", "bias");
    expect_err("hidden_act", edit("hidden_act", "\"hidden_act\":\"gelu\""), "\"hidden_act\"", "silu");
    expect_err("dtype", edit("torch_dtype", "\"torch_dtype\":\"int8\""), "\"torch_dtype\"", "int8");
    expect_err("invalid JSON", "{\"model_type\": \"qwen3\",", "invalid JSON", NULL);
    expect_err("not an object", "[1, 2]", "JSON object", NULL);
}

static void load_dir_child(void *arg) {
    model_config c;
    model_config_load(&c, (const char *)arg);
}

int main(void) {
    tmp = tl_tmpdir("config");
    good();
    variants();
    errors();
    // model_config_load on a directory reads DIR/config.json; a missing file names the path
    char *empty = rlc_path_join(tmp, "empty");
    rlc_mkdirs(empty);
    io_expect_die("missing config.json", load_dir_child, empty, empty, "config.json", "cannot open", (const char *)NULL);
    free(empty);
    tl_system("rm -rf '%s'", tmp);
    free(tmp);
    return tl_summary();
}
