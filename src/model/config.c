// config.c: parse and write Hugging Face Qwen3 config.json (shared/spec/qwen3.md §1.6, §2).
//
// Required keys (they fix the maths): model_type == "qwen3", vocab_size, hidden_size, intermediate_size,
// num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, max_position_embeddings,
// rms_norm_eps, tie_word_embeddings, and rope_theta (top level or rope_parameters.rope_theta).
// Optional keys take Qwen3Config's defaults: bos/eos_token_id (absent or null -> -1),
// use_sliding_window (false), sliding_window (null), max_window_layers (= num_hidden_layers),
// initializer_range (0.02), torch_dtype or dtype ("float32"), hidden_act ("silu"), attention_bias (false),
// attention_dropout (0), rope_scaling (null). Unknown keys are ignored, as transformers does.
#include "model/config.h"

#include <cjson/cJSON.h>
#include <math.h>

#include "core/common.h"

static const cJSON *get(const cJSON *o, const char *key) {
    // cJSON_GetObjectItemCaseSensitive returns the first match; config.json keys are case-sensitive
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

static int is_null_or_absent(const cJSON *v) { return v == NULL || cJSON_IsNull(v); }

static int json_int(const cJSON *v, const char *path, const char *key, long long lo, long long hi) {
    if (!cJSON_IsNumber(v)) rlc_die("%s: key \"%s\" must be an integer", path, key);
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d)) rlc_die("%s: key \"%s\" must be an integer, got %.17g", path, key, d);
    if (d < (double)lo || d > (double)hi)
        rlc_die("%s: key \"%s\" = %.17g out of range [%lld, %lld]", path, key, d, lo, hi);
    return (int)d;
}

static int req_int(const cJSON *o, const char *path, const char *key, long long lo, long long hi) {
    const cJSON *v = get(o, key);
    if (!v) rlc_die("%s: missing required key \"%s\"", path, key);
    return json_int(v, path, key, lo, hi);
}

static double json_num(const cJSON *v, const char *path, const char *key) {
    if (!cJSON_IsNumber(v)) rlc_die("%s: key \"%s\" must be a number", path, key);
    if (!isfinite(v->valuedouble)) rlc_die("%s: key \"%s\" must be finite", path, key);
    return v->valuedouble;
}

static int json_bool(const cJSON *v, const char *path, const char *key) {
    if (!cJSON_IsBool(v)) rlc_die("%s: key \"%s\" must be true or false", path, key);
    return cJSON_IsTrue(v) ? 1 : 0;
}

// token id: integer in [0, V) or null/absent (-1)
static int token_id(const cJSON *v, const char *path, const char *key, int V) {
    if (is_null_or_absent(v)) return -1;
    if (!cJSON_IsNumber(v)) rlc_die("%s: key \"%s\" must be an integer token id or null", path, key);
    return json_int(v, path, key, 0, (long long)V - 1);
}

void model_config_parse(model_config *cfg, const char *json_text, const char *path) {
    memset(cfg, 0, sizeof *cfg);
    const char *endp = NULL;
    cJSON *root = cJSON_ParseWithOpts(json_text, &endp, 1);
    if (!root) {
        long off = endp ? (long)(endp - json_text) : -1;
        rlc_die("%s: invalid JSON near byte %ld", path, off);
    }
    if (!cJSON_IsObject(root)) rlc_die("%s: config must be a JSON object", path);

    const cJSON *mt = get(root, "model_type");
    if (!mt) rlc_die("%s: missing required key \"model_type\" (expected \"qwen3\")", path);
    if (!cJSON_IsString(mt)) rlc_die("%s: key \"model_type\" must be a string (expected \"qwen3\")", path);
    if (strcmp(mt->valuestring, "qwen3") != 0)
        rlc_die("%s: key \"model_type\" is \"%s\", expected \"qwen3\" (rlc implements dense Qwen3 only)", path,
                mt->valuestring);

    const long long BIG = 1ll << 30;
    cfg->vocab_size = req_int(root, path, "vocab_size", 1, BIG);
    cfg->hidden_size = req_int(root, path, "hidden_size", 1, BIG);
    cfg->intermediate_size = req_int(root, path, "intermediate_size", 1, BIG);
    cfg->num_hidden_layers = req_int(root, path, "num_hidden_layers", 1, 1 << 16);
    cfg->num_attention_heads = req_int(root, path, "num_attention_heads", 1, 1 << 16);
    cfg->num_key_value_heads = req_int(root, path, "num_key_value_heads", 1, 1 << 16);
    cfg->head_dim = req_int(root, path, "head_dim", 2, 1 << 16);
    cfg->max_position_embeddings = req_int(root, path, "max_position_embeddings", 1, BIG);
    if (cfg->num_attention_heads % cfg->num_key_value_heads != 0)
        rlc_die("%s: key \"num_key_value_heads\" = %d must divide num_attention_heads = %d", path,
                cfg->num_key_value_heads, cfg->num_attention_heads);
    if (cfg->head_dim % 2 != 0) rlc_die("%s: key \"head_dim\" = %d must be even (RoPE rotates halves)", path, cfg->head_dim);

    const cJSON *v = get(root, "rms_norm_eps");
    if (!v) rlc_die("%s: missing required key \"rms_norm_eps\"", path);
    double eps = json_num(v, path, "rms_norm_eps");
    if (!(eps > 0 && eps < 1)) rlc_die("%s: key \"rms_norm_eps\" = %g must be in (0, 1)", path, eps);
    cfg->rms_norm_eps = (float)eps;

    // rope: top-level rope_theta (transformers 4.5x) or rope_parameters.rope_theta (v5)
    const cJSON *rt = get(root, "rope_theta");
    const cJSON *rp = get(root, "rope_parameters");
    int have_theta = 0;
    double theta = 0;
    if (!is_null_or_absent(rp)) {
        if (!cJSON_IsObject(rp)) rlc_die("%s: key \"rope_parameters\" must be an object", path);
        const cJSON *ty = get(rp, "rope_type");
        if (ty && !(cJSON_IsString(ty) && strcmp(ty->valuestring, "default") == 0))
            rlc_die("%s: key \"rope_parameters.rope_type\" must be \"default\" (rlc implements plain RoPE only)", path);
        const cJSON *t2 = get(rp, "rope_theta");
        if (t2) { theta = json_num(t2, path, "rope_parameters.rope_theta"); have_theta = 1; }
    }
    if (!is_null_or_absent(rt)) {
        double t1 = json_num(rt, path, "rope_theta");
        if (have_theta && t1 != theta)
            rlc_die("%s: key \"rope_theta\" = %g disagrees with rope_parameters.rope_theta = %g", path, t1, theta);
        theta = t1;
        have_theta = 1;
    }
    if (!have_theta) rlc_die("%s: missing required key \"rope_theta\" (or rope_parameters.rope_theta)", path);
    if (!(theta > 1)) rlc_die("%s: key \"rope_theta\" = %g must be > 1", path, theta);
    cfg->rope_theta = theta;
    const cJSON *rs = get(root, "rope_scaling");
    if (!is_null_or_absent(rs)) {
        const cJSON *ty = cJSON_IsObject(rs) ? get(rs, "rope_type") : NULL;
        if (!ty) ty = cJSON_IsObject(rs) ? get(rs, "type") : NULL;
        if (!(ty && cJSON_IsString(ty) && strcmp(ty->valuestring, "default") == 0))
            rlc_die("%s: key \"rope_scaling\" must be null (rlc implements plain RoPE only)", path);
    }

    v = get(root, "tie_word_embeddings");
    if (!v) rlc_die("%s: missing required key \"tie_word_embeddings\"", path);
    cfg->tie_word_embeddings = json_bool(v, path, "tie_word_embeddings");

    cfg->bos_token_id = token_id(get(root, "bos_token_id"), path, "bos_token_id", cfg->vocab_size);
    cfg->eos_token_id = -1;
    v = get(root, "eos_token_id");
    if (cJSON_IsArray(v)) {
        int n = cJSON_GetArraySize(v);
        if (n > (int)(sizeof cfg->eos_token_ids / sizeof cfg->eos_token_ids[0]))
            rlc_die("%s: key \"eos_token_id\" lists %d ids, at most %d supported", path, n,
                    (int)(sizeof cfg->eos_token_ids / sizeof cfg->eos_token_ids[0]));
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            if (!cJSON_IsNumber(e)) rlc_die("%s: key \"eos_token_id\" must list integer token ids", path);
            cfg->eos_token_ids[cfg->n_eos_token_ids++] = json_int(e, path, "eos_token_id", 0, (long long)cfg->vocab_size - 1);
        }
        if (cfg->n_eos_token_ids) cfg->eos_token_id = cfg->eos_token_ids[0];
    } else {
        cfg->eos_token_id = token_id(v, path, "eos_token_id", cfg->vocab_size);
        if (cfg->eos_token_id >= 0) cfg->eos_token_ids[cfg->n_eos_token_ids++] = cfg->eos_token_id;
    }

    v = get(root, "use_sliding_window");
    cfg->use_sliding_window = is_null_or_absent(v) ? 0 : json_bool(v, path, "use_sliding_window");
    v = get(root, "sliding_window");
    cfg->sliding_window = is_null_or_absent(v) ? -1 : json_int(v, path, "sliding_window", 1, 1ll << 31 >> 1);
    v = get(root, "max_window_layers");
    cfg->max_window_layers = is_null_or_absent(v) ? cfg->num_hidden_layers : json_int(v, path, "max_window_layers", 0, 1 << 16);
    if (cfg->use_sliding_window && cfg->sliding_window > 0) {
        // Qwen3Config: layer i slides iff i >= max_window_layers. A window that covers every position,
        // or no sliding layer at all, is full attention.
        if (cfg->sliding_window < cfg->max_position_embeddings && cfg->max_window_layers < cfg->num_hidden_layers)
            rlc_die("%s: key \"use_sliding_window\" is true with sliding_window = %d < max_position_embeddings = %d "
                    "(rlc implements full attention only)", path, cfg->sliding_window, cfg->max_position_embeddings);
    }

    v = get(root, "initializer_range");
    cfg->initializer_range = 0.02f;
    if (!is_null_or_absent(v)) {
        double ir = json_num(v, path, "initializer_range");
        if (!(ir >= 0 && ir < 1e3)) rlc_die("%s: key \"initializer_range\" = %g must be >= 0", path, ir);
        cfg->initializer_range = (float)ir;
    }

    const char *dkey = "torch_dtype";
    v = get(root, dkey);
    if (is_null_or_absent(v)) { dkey = "dtype"; v = get(root, dkey); }
    snprintf(cfg->torch_dtype, sizeof cfg->torch_dtype, "float32");
    if (!is_null_or_absent(v)) {
        if (!cJSON_IsString(v)) rlc_die("%s: key \"%s\" must be a string", path, dkey);
        const char *s = v->valuestring;
        if (strcmp(s, "float32") && strcmp(s, "bfloat16") && strcmp(s, "float16") && strcmp(s, "float64"))
            rlc_die("%s: key \"%s\" is \"%s\", expected float32, bfloat16, float16 or float64", path, dkey, s);
        snprintf(cfg->torch_dtype, sizeof cfg->torch_dtype, "%s", s);
    }

    v = get(root, "hidden_act");
    if (!is_null_or_absent(v) && !(cJSON_IsString(v) && strcmp(v->valuestring, "silu") == 0))
        rlc_die("%s: key \"hidden_act\" must be \"silu\"", path);
    v = get(root, "attention_bias");
    if (!is_null_or_absent(v) && json_bool(v, path, "attention_bias"))
        rlc_die("%s: key \"attention_bias\" is true; rlc implements bias-free attention only", path);
    v = get(root, "attention_dropout");
    if (!is_null_or_absent(v) && json_num(v, path, "attention_dropout") != 0)
        rlc_die("%s: key \"attention_dropout\" must be 0 (rlc implements no dropout)", path);

    // architecture description: Qwen3's
    snprintf(cfg->model_type, sizeof cfg->model_type, "qwen3");
    cfg->qk_norm = 1;
    cfg->hidden_act = MLP_SILU;
    cfg->embed_scale = 1.0f;
    cfg->attn_scale = (float)(1.0 / sqrt((double)cfg->head_dim));
    cfg->rope = (rope_params){.type = ROPE_DEFAULT, .theta = theta, .factor = 1, .attention_factor = 1};
    cfg->rope_local = cfg->rope;
    memset(cfg->layer_types, LAYER_FULL, sizeof cfg->layer_types);

    cJSON_Delete(root);
}

void model_config_load(model_config *cfg, const char *path) {
    size_t n = strlen(path);
    char *file = (n > 5 && strcmp(path + n - 5, ".json") == 0) ? rlc_strdup(path) : rlc_path_join(path, "config.json");
    char *text = rlc_read_file(file, NULL);
    model_config_parse(cfg, text, file);
    free(text);
    free(file);
}

// shortest decimal that round-trips the float (or double); integral values print as integers, as HF does
static const char *fmt_num(char *buf, size_t n, double v, int is_float) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (is_float ? (float)back == (float)v : back == v) break;
    }
    if (v == floor(v) && fabs(v) < 1e15) snprintf(buf, n, "%.0f", v);
    return buf;
}

char *model_config_to_json(const model_config *c) {
    char buf[64];
    // keys in the order transformers writes them (sorted), as in the Qwen3-0.6B config.json
    cJSON *o = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("Qwen3ForCausalLM"));
    cJSON_AddFalseToObject(o, "attention_bias");
    cJSON_AddRawToObject(o, "attention_dropout", "0.0");
    if (c->bos_token_id >= 0) cJSON_AddNumberToObject(o, "bos_token_id", c->bos_token_id);
    else cJSON_AddNullToObject(o, "bos_token_id");
    if (c->n_eos_token_ids > 1) {
        cJSON *e = cJSON_AddArrayToObject(o, "eos_token_id");
        for (int i = 0; i < c->n_eos_token_ids; i++) cJSON_AddItemToArray(e, cJSON_CreateNumber(c->eos_token_ids[i]));
    } else if (c->eos_token_id >= 0) {
        cJSON_AddNumberToObject(o, "eos_token_id", c->eos_token_id);
    } else {
        cJSON_AddNullToObject(o, "eos_token_id");
    }
    cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddNumberToObject(o, "hidden_size", c->hidden_size);
    // floats print from their float value (1e-06, 0.02), not the double widening (9.99999997e-07)
    cJSON_AddRawToObject(o, "initializer_range", fmt_num(buf, sizeof buf, c->initializer_range, 1));
    cJSON_AddNumberToObject(o, "intermediate_size", c->intermediate_size);
    cJSON_AddNumberToObject(o, "max_position_embeddings", c->max_position_embeddings);
    cJSON_AddNumberToObject(o, "max_window_layers", c->max_window_layers);
    cJSON_AddStringToObject(o, "model_type", "qwen3");
    cJSON_AddNumberToObject(o, "num_attention_heads", c->num_attention_heads);
    cJSON_AddNumberToObject(o, "num_hidden_layers", c->num_hidden_layers);
    cJSON_AddNumberToObject(o, "num_key_value_heads", c->num_key_value_heads);
    cJSON_AddRawToObject(o, "rms_norm_eps", fmt_num(buf, sizeof buf, c->rms_norm_eps, 1));
    cJSON_AddNullToObject(o, "rope_scaling");
    cJSON_AddRawToObject(o, "rope_theta", fmt_num(buf, sizeof buf, c->rope_theta, 0));
    if (c->sliding_window > 0) cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
    else cJSON_AddNullToObject(o, "sliding_window");
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_word_embeddings ? 1 : 0);
    cJSON_AddStringToObject(o, "torch_dtype", c->torch_dtype[0] ? c->torch_dtype : "float32");
    cJSON_AddStringToObject(o, "transformers_version", "4.51.0");
    cJSON_AddTrueToObject(o, "use_cache");
    cJSON_AddBoolToObject(o, "use_sliding_window", c->use_sliding_window ? 1 : 0);
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab_size);

    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    CHECK(s != NULL, "cJSON_Print failed");
    size_t n = strlen(s);
    char *out = rlc_malloc(n + 2);
    memcpy(out, s, n);
    out[n] = '\n';
    out[n + 1] = 0;
    cJSON_free(s);
    return out;
}
