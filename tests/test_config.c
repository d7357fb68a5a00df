// test_config.c: config.json parsing for every family (Qwen3 fields and variants; the Qwen2.5, Llama 3.2,
// SmolLM2, Gemma 3 and Mistral checkpoints' own files, v4 and v5 forms), RoPE inverse frequencies against the
// spec's test vectors (llama3, yarn), the one-line errors, and the to_json round trip per family.
#include <math.h>

#include "core/common.h"
#include "io_testutil.h"
#include "kernels/kernels.h"
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
    TL_CHECK(e.use_sliding_window && e.sliding_window == 4096 && e.layer_types[27] == LAYER_FULL, "sliding window on no layer accepted");
    // Qwen3's architecture description
    TL_CHECK(!strcmp(c.model_type, "qwen3") && c.qk_norm && !c.qkv_bias && !c.o_bias && !c.mlp_bias && !c.norm_plus_one &&
                 !c.sandwich_norm && c.hidden_act == MLP_SILU && c.embed_scale == 1.0f &&
                 c.attn_scale == (float)(1.0 / sqrt(128.0)) && c.rope.type == ROPE_DEFAULT && c.rope.theta == 1e6 &&
                 !memcmp(&c.rope, &c.rope_local, sizeof c.rope) && c.final_logit_softcapping == 0,
             "qwen3 architecture description");
    // a hand-built config finalized == the parsed one
    model_config h;
    memset(&h, 0, sizeof h);
    h.vocab_size = 151936; h.hidden_size = 1024; h.intermediate_size = 3072; h.num_hidden_layers = 28;
    h.num_attention_heads = 16; h.num_key_value_heads = 8; h.head_dim = 128; h.max_position_embeddings = 40960;
    h.rms_norm_eps = 1e-6f; h.rope_theta = 1e6; h.tie_word_embeddings = 1; h.bos_token_id = 151643; h.eos_token_id = 151645;
    h.eos_token_ids[0] = 151645; h.n_eos_token_ids = 1; h.sliding_window = -1; h.max_window_layers = 28;
    h.initializer_range = 0.02f; h.sliding_window_pattern = 6;
    snprintf(h.torch_dtype, sizeof h.torch_dtype, "bfloat16");
    model_config_finalize(&h);
    TL_CHECK(!memcmp(&h, &c, sizeof c), "model_config_finalize of a hand-built Qwen3-0.6B == the parsed config");
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
    // use_sliding_window: layers i >= max_window_layers slide (Qwen3Config)
    const char *t = edit_in(edit_in(edit("use_sliding_window", "\"use_sliding_window\":true"), "sliding_window",
                                    "\"sliding_window\":4096"), "max_window_layers", "\"max_window_layers\":20");
    model_config_parse(&c, t, "swa");
    TL_CHECK(c.sliding_window == 4096 && c.layer_types[19] == LAYER_FULL && c.layer_types[20] == LAYER_SLIDING &&
                 c.layer_types[27] == LAYER_SLIDING, "qwen3 sliding layers from max_window_layers");
    // bos/eos ids outside the vocabulary do not change the maths: a warning, and they load
    model_config_parse(&c, edit("eos_token_id", "\"eos_token_id\":200000"), "eos-oov");
    TL_CHECK(c.eos_token_id == 200000, "eos outside the vocabulary loads");
    // absent keys take Qwen3Config's defaults, as transformers does
    model_config_parse(&c, edit("head_dim", ""), "nohd");
    TL_CHECK(c.head_dim == 128, "qwen3 head_dim default %d", c.head_dim);
    model_config_parse(&c, edit("rope_theta", ""), "notheta");
    TL_CHECK(c.rope_theta == 10000 && c.rope.theta == 10000, "qwen3 rope_theta default");
    model_config_parse(&c, edit("tie_word_embeddings", ""), "notie");
    TL_CHECK(c.tie_word_embeddings == 0, "qwen3 tie default");
    // attention_bias: q, k, v and o carry biases
    model_config_parse(&c, edit("attention_bias", "\"attention_bias\":true"), "bias");
    TL_CHECK(c.qkv_bias && c.o_bias && !c.mlp_bias, "qwen3 attention_bias");
    // rope_scaling yarn (v4 "type" key)
    model_config_parse(&c, edit("rope_scaling", "\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4}"), "yarn");
    TL_CHECK(c.rope.type == ROPE_YARN && c.rope.factor == 4 && c.rope.original_max_position_embeddings == 40960 &&
                 fabs(c.rope.attention_factor - (0.1 * log(4.0) + 1)) < 1e-12, "qwen3 yarn rope_scaling");
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
    a.qkv_bias = a.o_bias = 1;
    snprintf(a.torch_dtype, sizeof a.torch_dtype, "float32");
    char *js = model_config_to_json(&a);
    model_config b;
    model_config_parse(&b, js, "roundtrip");
    TL_CHECK(!memcmp(&a, &b, sizeof a), "to_json -> parse round trip");
    TL_CHECK(strstr(js, "\"rms_norm_eps\":\t1e-05") && strstr(js, "\"initializer_range\":\t0.0173") &&
                 strstr(js, "\"architectures\":\t[\"Qwen3ForCausalLM\"]") && strstr(js, "\"model_type\":\t\"qwen3\""),
             "to_json numbers and names: %s", js);
    TL_CHECK(strstr(js, "\"attention_bias\":\ttrue") != NULL, "to_json attention_bias");
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
    expect_err("unsupported model_type", edit("model_type", "\"model_type\":\"phi3\""), "\"phi3\"", MODEL_TYPES_SUPPORTED);
    expect_err("missing model_type", edit("model_type", ""), "missing", "\"model_type\"");
    expect_err("string hidden_size", edit("hidden_size", "\"hidden_size\":\"1024\""), "\"hidden_size\"", "integer");
    expect_err("fractional layers", edit("num_hidden_layers", "\"num_hidden_layers\":2.5"), "\"num_hidden_layers\"", "integer");
    expect_err("zero vocab", edit("vocab_size", "\"vocab_size\":0"), "\"vocab_size\"", "out of range");
    expect_err("nh % nkv", edit("num_key_value_heads", "\"num_key_value_heads\":5"), "\"num_key_value_heads\"", "divide");
    expect_err("odd head_dim", edit("head_dim", "\"head_dim\":127"), "\"head_dim\"", "even");
    expect_err("bool as int", edit("tie_word_embeddings", "\"tie_word_embeddings\":1"), "\"tie_word_embeddings\"", "true or false");
    expect_err("eps <= 0", edit("rms_norm_eps", "\"rms_norm_eps\":0"), "\"rms_norm_eps\"", "(0, 1)");
    expect_err("eos list of strings", edit("eos_token_id", "\"eos_token_id\":[\"a\"]"), "\"eos_token_id\"", "integer");
    // RoPE: a type or a parameter that changes the maths and rlc does not implement, named with its value
    expect_err("rope type longrope", edit("rope_scaling", "\"rope_scaling\":{\"rope_type\":\"longrope\",\"factor\":4}"),
               "\"rope_scaling.rope_type\"", "longrope");
    expect_err("rope v5 type", edit("rope_theta", "\"rope_parameters\":{\"rope_theta\":1e6,\"rope_type\":\"su\"}"),
               "\"rope_parameters.rope_type\"", "\"su\"");
    expect_err("rope llama3 without factor", edit("rope_theta", "\"rope_parameters\":{\"rope_theta\":1e6,\"rope_type\":\"llama3\"}"),
               "\"rope_parameters.factor\"", "missing");
    expect_err("rope llama3 without low_freq_factor",
               edit("rope_scaling", "\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,\"high_freq_factor\":4}"),
               "\"rope_scaling.low_freq_factor\"", "missing");
    expect_err("rope factor < 1", edit("rope_scaling", "\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":0.5}"),
               "\"rope_scaling.factor\"", "0.5");
    expect_err("rope scaling not an object", edit("rope_scaling", "\"rope_scaling\":7"), "\"rope_scaling\"", "object");
    expect_err("partial rotary", edit("rope_scaling", "\"rope_scaling\":null,\"partial_rotary_factor\":0.75"),
               "\"partial_rotary_factor\"", "0.75");
    expect_err("dropout", edit("attention_dropout", "\"attention_dropout\":0.1"), "\"attention_dropout\"", "0.1");
    expect_err("bidirectional", edit("attention_dropout", "\"use_bidirectional_attention\":true"), "\"use_bidirectional_attention\"",
               "causal");
    expect_err("hidden_act", edit("hidden_act", "\"hidden_act\":\"gelu\""), "\"hidden_act\"", "silu");
    expect_err("layer_types length", edit_in(edit("use_sliding_window", "\"use_sliding_window\":true"), "sliding_window",
                                             "\"sliding_window\":64,\"layer_types\":[\"full_attention\"]"),
               "\"layer_types\"", "28");
    expect_err("layer_types value", edit_in(edit_in(edit("use_sliding_window", "\"use_sliding_window\":true"), "sliding_window",
                                                    "\"sliding_window\":64,\"layer_types\":[\"local\"]"),
                                            "num_hidden_layers", "\"num_hidden_layers\":1"),
               "\"layer_types[0]\"", "sliding_attention");
    expect_err("dtype", edit("torch_dtype", "\"torch_dtype\":\"int8\""), "\"torch_dtype\"", "int8");
    expect_err("invalid JSON", "{\"model_type\": \"qwen3\",", "invalid JSON", NULL);
    expect_err("not an object", "[1, 2]", "JSON object", NULL);
    expect_err("gemma sliding layers without a window",
               "{\"model_type\":\"gemma3_text\",\"num_hidden_layers\":2,\"sliding_window\":null}", "\"sliding_window\"", "null");
}

// The small RL models' own config.json files (examples/), their architecture descriptions, and the to_json
// round trip of each.
static void families(void) {
    model_config c;
    model_config_load(&c, "examples/qwen2.5-0.5b-instruct-config.json");
    TL_CHECK(!strcmp(c.model_type, "qwen2") && c.qkv_bias && !c.o_bias && !c.mlp_bias && !c.qk_norm && c.head_dim == 64 &&
                 c.tie_word_embeddings && c.layer_types[23] == LAYER_FULL && c.rope.theta == 1e6 && c.sliding_window == 32768,
             "Qwen2.5-0.5B-Instruct: q/k/v biases, no q/k norm, full attention (use_sliding_window false)");
    model_config_load(&c, "examples/llama-3.2-1b-instruct-config.json");
    TL_CHECK(!strcmp(c.model_type, "llama") && !c.qkv_bias && !c.o_bias && !c.mlp_bias && !c.qk_norm && c.head_dim == 64 &&
                 c.rope.type == ROPE_LLAMA3 && c.rope.factor == 32 && c.rope.low_freq_factor == 1 && c.rope.high_freq_factor == 4 &&
                 c.rope.original_max_position_embeddings == 8192 && c.rope.theta == 5e5 && c.n_eos_token_ids == 3 &&
                 c.eos_token_ids[2] == 128009 && c.rms_norm_eps == 1e-5f,
             "Llama-3.2-1B-Instruct: llama3 RoPE, three eos ids");
    model_config_load(&c, "examples/smollm2-360m-instruct-config.json");
    TL_CHECK(!strcmp(c.model_type, "llama") && c.head_dim == 64 && c.num_key_value_heads == 5 && c.rope.type == ROPE_DEFAULT &&
                 c.rope.theta == 1e5, "SmolLM2-360M-Instruct: Llama with default RoPE");
    model_config_load(&c, "examples/gemma-3-1b-it-config.json");
    int full = 0;
    for (int l = 0; l < c.num_hidden_layers; l++) full += c.layer_types[l] == LAYER_FULL;
    TL_CHECK(!strcmp(c.model_type, "gemma3_text") && c.qk_norm && c.norm_plus_one && c.sandwich_norm &&
                 c.hidden_act == MLP_GELU_TANH && c.embed_scale == 34.0f && c.attn_scale == 1.0f / 16 && c.rope.theta == 1e6 &&
                 c.rope_local.theta == 1e4 && c.rope_local.type == ROPE_DEFAULT && c.sliding_window == 512 && full == 4 &&
                 c.layer_types[5] == LAYER_FULL && c.layer_types[23] == LAYER_FULL && c.layer_types[25] == LAYER_SLIDING &&
                 c.final_logit_softcapping == 0 && c.tie_word_embeddings,
             "Gemma-3-1b-it: sandwich (1+w) norms, GeGLU, sqrt(1152) rounded to bf16 = 34, local/global RoPE, 5 of 6 sliding");
    // Gemma 3 270m's v5-era file: explicit layer_types; sqrt(640) in bf16 = 25.25, in float32 25.298
    const char *g270 = "{\"model_type\":\"gemma3_text\",\"hidden_size\":640,\"intermediate_size\":2048,\"num_hidden_layers\":18,"
                       "\"num_attention_heads\":4,\"num_key_value_heads\":1,\"head_dim\":256,\"vocab_size\":262144,"
                       "\"max_position_embeddings\":32768,\"sliding_window\":512,\"torch_dtype\":\"bfloat16\",\"layer_types\":["
                       "\"sliding_attention\",\"sliding_attention\",\"sliding_attention\",\"sliding_attention\",\"sliding_attention\","
                       "\"full_attention\",\"sliding_attention\",\"sliding_attention\",\"sliding_attention\",\"sliding_attention\","
                       "\"sliding_attention\",\"full_attention\",\"sliding_attention\",\"sliding_attention\",\"sliding_attention\","
                       "\"sliding_attention\",\"sliding_attention\",\"full_attention\"],\"rope_parameters\":{\"full_attention\":"
                       "{\"rope_type\":\"linear\",\"factor\":8.0,\"rope_theta\":1000000.0},\"sliding_attention\":{\"rope_type\":"
                       "\"default\",\"rope_theta\":10000.0}}}";
    model_config_parse(&c, g270, "gemma-3-270m");
    TL_CHECK(c.embed_scale == 25.25f && c.layer_types[17] == LAYER_FULL && c.layer_types[16] == LAYER_SLIDING &&
                 c.rope.type == ROPE_LINEAR && c.rope.factor == 8 && c.rope_local.type == ROPE_DEFAULT &&
                 c.rope_local.theta == 1e4 && c.tie_word_embeddings && c.query_pre_attn_scalar == 256,
             "Gemma 3 v5 form: nested rope_parameters, layer_types, bf16-rounded embed scale %.9g", c.embed_scale);
    const char *g32 = "{\"model_type\":\"gemma3_text\",\"hidden_size\":640,\"num_attention_heads\":4,\"torch_dtype\":\"float32\"}";
    model_config_parse(&c, g32, "gemma-f32");
    TL_CHECK(c.embed_scale == (float)sqrt(640.0), "Gemma 3 float32 embed scale %.9g", c.embed_scale);
    // Mistral: a sliding_window applies to every layer; null (v0.3) to none
    model_config_parse(&c, "{\"model_type\":\"mistral\",\"hidden_size\":256,\"num_attention_heads\":8,\"num_key_value_heads\":2,"
                           "\"num_hidden_layers\":3,\"sliding_window\":4096}", "mistral-v0.1");
    TL_CHECK(c.head_dim == 32 && c.layer_types[0] == LAYER_SLIDING && c.layer_types[2] == LAYER_SLIDING, "Mistral v0.1 window");
    model_config_parse(&c, "{\"model_type\":\"mistral\",\"hidden_size\":256,\"num_attention_heads\":8,\"num_hidden_layers\":3,"
                           "\"sliding_window\":null}", "mistral-v0.3");
    TL_CHECK(c.layer_types[0] == LAYER_FULL && c.num_key_value_heads == 8, "Mistral v0.3 no window");
    // Qwen2 with use_sliding_window: layers i >= max_window_layers slide
    model_config_parse(&c, "{\"model_type\":\"qwen2\",\"hidden_size\":64,\"num_attention_heads\":4,\"num_key_value_heads\":4,\"num_hidden_layers\":4,"
                           "\"use_sliding_window\":true,\"sliding_window\":100,\"max_window_layers\":2}", "qwen2-swa");
    TL_CHECK(c.layer_types[1] == LAYER_FULL && c.layer_types[2] == LAYER_SLIDING && c.sliding_window == 100, "Qwen2 window layers");

    // to_json -> parse round trip for every family
    const char *files[] = {"examples/qwen2.5-0.5b-instruct-config.json", "examples/llama-3.2-1b-instruct-config.json",
                           "examples/smollm2-360m-instruct-config.json", "examples/gemma-3-1b-it-config.json",
                           "examples/qwen3-0.6b-config.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        model_config a, b;
        model_config_load(&a, files[i]);
        char *js = model_config_to_json(&a);
        model_config_parse(&b, js, files[i]);
        // max_window_layers and sliding_window_pattern are carried only by the families that have them
        b.max_window_layers = a.max_window_layers;
        b.sliding_window_pattern = a.sliding_window_pattern;
        TL_CHECK(!memcmp(&a, &b, sizeof a), "to_json -> parse round trip: %s", files[i]);
        free(js);
    }
    model_config a, b;
    model_config_parse(&a, g270, "gemma-3-270m");
    char *js = model_config_to_json(&a);
    model_config_parse(&b, js, "g270 round trip");
    b.sliding_window_pattern = a.sliding_window_pattern;
    TL_CHECK(!memcmp(&a, &b, sizeof a), "to_json -> parse round trip: Gemma 3 with layer_types and linear global RoPE");
    free(js);
}

// shared/spec/models.md §3.1 and §3.2 test vectors.
static void rope_vectors(void) {
    model_config c;
    model_config_load(&c, "examples/llama-3.2-1b-instruct-config.json");
    float inv[128], def[128];
    rope_inv_freq_params(inv, 64, &c.rope);
    rope_inv_freq(def, 64, 5e5);
    const struct { int i; double def, out; } v[] = {
        {0, 1.000000000e+00, 1.000000000e+00},       {14, 3.211446106e-03, 3.211446106e-03},
        {15, 2.131119603e-03, 1.290548011e-03},      {16, 1.414213446e-03, 4.295567051e-04},
        {17, 9.384738514e-04, 9.708286234e-05},      {18, 6.227724371e-04, 1.946163866e-05},
        {31, 3.013858077e-06, 9.418306490e-08}};
    double worst = 0;
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        worst = fmax(worst, fabs(def[v[k].i] - v[k].def) / v[k].def);
        worst = fmax(worst, fabs(inv[v[k].i] - v[k].out) / v[k].out);
    }
    // the vectors are float32 values printed to 10 digits: 1e-6 is a few ulp
    TL_CHECK(worst <= 1e-6, "llama3 inv_freq vs the spec's Llama-3.2-1B vectors: max rel err %.3g", worst);
    int nh = 0, nm = 0, nl = 0;
    for (int i = 0; i < 32; i++) {
        if (inv[i] == def[i]) nh++;
        else if (inv[i] == def[i] / 32.0f) nl++;
        else nm++;
    }
    TL_CHECK(nh == 15 && nm == 3 && nl == 14, "llama3 bands of Llama-3.2-1B: %d high %d medium %d low (want 15/3/14)", nh, nm, nl);
    // Llama-3.1-8B: D 128, factor 8 -> 29 / 6 / 29
    rope_params r8 = c.rope;
    r8.factor = 8;
    rope_inv_freq_params(inv, 128, &r8);
    rope_inv_freq(def, 128, 5e5);
    nh = nm = nl = 0;
    for (int i = 0; i < 64; i++) {
        if (inv[i] == def[i]) nh++;
        else if (inv[i] == def[i] / 8.0f) nl++;
        else nm++;
    }
    TL_CHECK(nh == 29 && nm == 6 && nl == 29, "llama3 bands of Llama-3.1-8B: %d/%d/%d (want 29/6/29)", nh, nm, nl);
    // yarn: D 128, theta 1e6, factor 4, original 32768 (max_position 131072): correction range [23, 40],
    // attention_factor 0.1 ln 4 + 1 = 1.138629
    model_config_parse(&c, edit_in(edit_in(edit(
        "rope_scaling", "\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0,\"original_max_position_embeddings\":32768}"),
        "max_position_embeddings", "\"max_position_embeddings\":131072"), "rope_theta", "\"rope_theta\":1000000"), "yarn");
    TL_CHECK(c.rope.factor == 4 && fabs(c.rope.attention_factor - 1.138629) < 1e-6, "yarn factor %g attention_factor %.7f",
             c.rope.factor, c.rope.attention_factor);
    rope_inv_freq_params(inv, 128, &c.rope);
    rope_inv_freq(def, 128, 1e6);
    int extra = 1, inter = 1, blend = 1;
    for (int i = 0; i < 64; i++) {
        if (i <= 23) extra &= inv[i] == def[i];                          // ramp 0: pure extrapolation
        else if (i >= 40) inter &= fabsf(inv[i] - def[i] / 4) <= 1e-6f * def[i];   // ramp 1: 1/(factor theta^(2i/D))
        else blend &= inv[i] < def[i] && inv[i] > def[i] / 4;
    }
    TL_CHECK(extra && inter && blend, "yarn inv_freq: correction range [23, 40] (extrapolated %d, interpolated %d, blended %d)",
             extra, inter, blend);
    // the table's cos/sin carry attention_factor
    rope_table rt;
    rope_table_init_params(&rt, 4, 128, &c.rope);
    TL_CHECK(fabsf(rt.cos[0] - 1.138629f) < 1e-6f, "yarn cos(0) = attention_factor: %.7f", rt.cos[0]);
    rope_table_free(&rt);
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
    families();
    rope_vectors();
    // model_config_load on a directory reads DIR/config.json; a missing file names the path
    char *empty = rlc_path_join(tmp, "empty");
    rlc_mkdirs(empty);
    io_expect_die("missing config.json", load_dir_child, empty, empty, "config.json", "cannot open", (const char *)NULL);
    free(empty);
    tl_system("rm -rf '%s'", tmp);
    free(tmp);
    return tl_summary();
}
