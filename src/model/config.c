// config.c: parse and write Hugging Face config.json for the decoder families qwen3, qwen2, llama, mistral and
// gemma3_text (shared/spec/qwen3.md §1.6, §2; shared/spec/models.md §2-4), in the transformers 4.5x form
// (rope_theta + rope_scaling, sliding_window_pattern) and the v5 form (rope_parameters, nested per layer type
// for Gemma 3; layer_types).
//
// Absent keys take the family's config-class defaults (models.md §2.1), as transformers does. Keys that do not
// change the maths (bos/eos ids, initializer_range, pretraining_tp, ...) never fail the load: a bos/eos id
// outside the vocabulary is a warning. A key that changes the maths with a value rlc does not implement (an
// unknown RoPE type, dropout, bidirectional attention, partial rotary) is a one-line error naming key and value.
#include "model/config.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>

#include "core/bf16.h"
#include "core/common.h"
#include "core/json.h"
#include "io/safetensors.h"

const char *const MODEL_TYPES_SUPPORTED = "qwen3, qwen2, llama, mistral, gemma3_text";

int model_type_supported(const char *mt) {
    return !strcmp(mt, "qwen3") || !strcmp(mt, "qwen2") || !strcmp(mt, "llama") || !strcmp(mt, "mistral") ||
           !strcmp(mt, "gemma3_text");
}

static int is_gemma(const model_config *c) { return strcmp(c->model_type, "gemma3_text") == 0; }

static const cJSON *get(const cJSON *o, const char *key) {
    // config.json keys are case-sensitive
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

// integer key with a class default when absent or null
static int opt_int(const cJSON *o, const char *path, const char *key, long long lo, long long hi, int dflt) {
    const cJSON *v = get(o, key);
    return is_null_or_absent(v) ? dflt : json_int(v, path, key, lo, hi);
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

static int opt_bool(const cJSON *o, const char *path, const char *key, int dflt) {
    const cJSON *v = get(o, key);
    return is_null_or_absent(v) ? dflt : json_bool(v, path, key);
}

// A token id does not change the maths: any integer loads; one outside [0, V) is a warning (tiny test
// checkpoints carry such ids, and transformers loads them). null/absent -> -1.
static int token_id(const cJSON *v, const char *path, const char *key, int V) {
    if (is_null_or_absent(v)) return -1;
    int id = json_int(v, path, key, -1, 1ll << 31 >> 1);
    if (id >= V) rlc_warn("%s: key \"%s\" = %d is outside the vocabulary [0, %d); it is kept but can never be generated", path, key, id, V);
    return id;
}

// ---- RoPE ------------------------------------------------------------------------------------------------------
static const char *rope_name(rope_kind k) {
    switch (k) {
    case ROPE_DEFAULT: return "default";
    case ROPE_LINEAR: return "linear";
    case ROPE_DYNAMIC: return "dynamic";
    case ROPE_LLAMA3: return "llama3";
    case ROPE_YARN: return "yarn";
    }
    return "?";
}

// Read one rope dict (v4 rope_scaling or v5 rope_parameters, `key` names it in errors) into rp. theta is
// the base already resolved (the dict's own rope_theta wins when present).
static void parse_rope_dict(rope_params *rp, const cJSON *d, const char *path, const char *key, double theta, int max_pos) {
    char k[160];
    memset(rp, 0, sizeof *rp);
    rp->type = ROPE_DEFAULT;
    rp->theta = theta;
    rp->factor = 1;
    rp->attention_factor = 1;
    if (is_null_or_absent(d)) return;
    if (!cJSON_IsObject(d)) rlc_die("%s: key \"%s\" must be an object or null", path, key);
    const cJSON *ty = get(d, "rope_type");
    const char *tkey = "rope_type";
    if (is_null_or_absent(ty)) { ty = get(d, "type"); tkey = "type"; }
    snprintf(k, sizeof k, "%s.%s", key, tkey);
    const char *t = "default";
    if (!is_null_or_absent(ty)) {
        if (!cJSON_IsString(ty)) rlc_die("%s: key \"%s\" must be a string", path, k);
        t = ty->valuestring;
    }
    if (!strcmp(t, "default")) rp->type = ROPE_DEFAULT;
    else if (!strcmp(t, "linear")) rp->type = ROPE_LINEAR;
    else if (!strcmp(t, "dynamic")) rp->type = ROPE_DYNAMIC;
    else if (!strcmp(t, "llama3")) rp->type = ROPE_LLAMA3;
    else if (!strcmp(t, "yarn")) rp->type = ROPE_YARN;
    else rlc_die("%s: key \"%s\" is \"%s\"; rlc implements default, linear, dynamic, llama3 and yarn", path, k, t);
    const cJSON *v = get(d, "rope_theta");
    if (!is_null_or_absent(v)) {
        snprintf(k, sizeof k, "%s.rope_theta", key);
        rp->theta = json_num(v, path, k);
    }
    const cJSON *pr = get(d, "partial_rotary_factor");
    if (!is_null_or_absent(pr) && json_num(pr, path, "partial_rotary_factor") != 1.0)
        rlc_die("%s: key \"%s.partial_rotary_factor\" = %g; rlc rotates the whole head (1.0 only)", path, key, pr->valuedouble);
    if (rp->type == ROPE_DEFAULT) return;
    v = get(d, "factor");
    snprintf(k, sizeof k, "%s.factor", key);
    if (is_null_or_absent(v)) rlc_die("%s: missing key \"%s\" (rope type %s needs it)", path, k, t);
    rp->factor = json_num(v, path, k);
    if (!(rp->factor >= 1.0)) rlc_die("%s: key \"%s\" = %g must be >= 1", path, k, rp->factor);
    v = get(d, "original_max_position_embeddings");
    snprintf(k, sizeof k, "%s.original_max_position_embeddings", key);
    if (!is_null_or_absent(v)) {
        rp->original_max_position_embeddings = json_int(v, path, k, 1, 1ll << 30);
        rp->orig_explicit = 1;
    } else {
        rp->original_max_position_embeddings = max_pos;   // v5 standardisation
    }
    if (rp->type == ROPE_LLAMA3) {
        const char *need[2] = {"low_freq_factor", "high_freq_factor"};
        double *dst[2] = {&rp->low_freq_factor, &rp->high_freq_factor};
        for (int i = 0; i < 2; i++) {
            snprintf(k, sizeof k, "%s.%s", key, need[i]);
            v = get(d, need[i]);
            if (is_null_or_absent(v)) rlc_die("%s: missing key \"%s\" (rope type llama3 needs it)", path, k);
            *dst[i] = json_num(v, path, k);
            if (!(*dst[i] > 0)) rlc_die("%s: key \"%s\" = %g must be > 0", path, k, *dst[i]);
        }
        if (!(rp->high_freq_factor > rp->low_freq_factor))
            rlc_die("%s: key \"%s.high_freq_factor\" = %g must be > low_freq_factor = %g", path, key, rp->high_freq_factor,
                    rp->low_freq_factor);
    }
    if (rp->type == ROPE_YARN) {
        rp->beta_fast = 32;
        rp->beta_slow = 1;
        rp->truncate = 1;
        struct { const char *n; double *dst; } opt[] = {{"beta_fast", &rp->beta_fast}, {"beta_slow", &rp->beta_slow},
                                                        {"mscale", &rp->mscale}, {"mscale_all_dim", &rp->mscale_all_dim}};
        for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) {
            v = get(d, opt[i].n);
            snprintf(k, sizeof k, "%s.%s", key, opt[i].n);
            if (!is_null_or_absent(v)) *opt[i].dst = json_num(v, path, k);
        }
        snprintf(k, sizeof k, "%s.truncate", key);
        rp->truncate = opt_bool(d, path, "truncate", 1);
        v = get(d, "attention_factor");
        snprintf(k, sizeof k, "%s.attention_factor", key);
        rp->attention_factor = 0;   // 0: derived from factor (model_config_finalize)
        if (!is_null_or_absent(v)) {
            rp->attention_factor = json_num(v, path, k);
            if (!(rp->attention_factor > 0)) rlc_die("%s: key \"%s\" = %g must be > 0", path, k, rp->attention_factor);
        }
        // transformers' _compute_yarn_parameters: an explicit original context sets factor = max_pos / orig
        if (rp->orig_explicit) rp->factor = (double)max_pos / (double)rp->original_max_position_embeddings;
        if (!(rp->beta_fast > rp->beta_slow && rp->beta_slow > 0))
            rlc_die("%s: key \"%s.beta_fast\" = %g must be > beta_slow = %g > 0", path, key, rp->beta_fast, rp->beta_slow);
    }
}

// yarn's get_mscale
static double yarn_mscale(double s, double m) { return s <= 1 ? 1.0 : 0.1 * m * log(s) + 1.0; }

static void rope_finalize(rope_params *rp, double theta) {
    if (rp->theta == 0) {
        memset(rp, 0, sizeof *rp);
        rp->type = ROPE_DEFAULT;
        rp->theta = theta;
    }
    if (rp->factor == 0) rp->factor = 1;
    if (rp->type == ROPE_YARN) {
        if (rp->beta_fast == 0) rp->beta_fast = 32;
        if (rp->beta_slow == 0) rp->beta_slow = 1;
        if (rp->attention_factor == 0) {
            if (rp->mscale != 0 && rp->mscale_all_dim != 0)
                rp->attention_factor = yarn_mscale(rp->factor, rp->mscale) / yarn_mscale(rp->factor, rp->mscale_all_dim);
            else
                rp->attention_factor = yarn_mscale(rp->factor, 1.0);
        }
    }
    if (rp->attention_factor == 0) rp->attention_factor = 1;
}

void model_config_finalize(model_config *c) {
    if (!c->model_type[0]) snprintf(c->model_type, sizeof c->model_type, "qwen3");
    CHECK(model_type_supported(c->model_type), "model_type \"%s\" (supported: %s)", c->model_type, MODEL_TYPES_SUPPORTED);
    CHECK(c->num_hidden_layers >= 1 && c->num_hidden_layers <= MODEL_MAX_LAYERS, "num_hidden_layers=%d (at most %d)",
          c->num_hidden_layers, MODEL_MAX_LAYERS);
    if (!c->torch_dtype[0]) snprintf(c->torch_dtype, sizeof c->torch_dtype, "float32");
    if (!strcmp(c->model_type, "qwen3")) {
        c->qk_norm = 1;   // q/k/v/o biases follow attention_bias (kept)
        c->mlp_bias = 0;
    } else if (!strcmp(c->model_type, "qwen2")) {
        c->qkv_bias = 1;  // hard-coded in Qwen2Attention; o_proj has none
        c->o_bias = 0;
        c->mlp_bias = 0;
        c->qk_norm = 0;
    } else if (!strcmp(c->model_type, "llama")) {
        c->qk_norm = 0;   // attention_bias (q/k/v/o) and mlp_bias kept
        c->o_bias = c->qkv_bias;
    } else if (!strcmp(c->model_type, "mistral")) {
        c->qkv_bias = c->o_bias = c->mlp_bias = 0;
        c->qk_norm = 0;
    }
    if (is_gemma(c)) {
        c->qk_norm = 1;
        c->norm_plus_one = 1;
        c->sandwich_norm = 1;
        c->hidden_act = MLP_GELU_TANH;
        c->o_bias = c->qkv_bias;
        c->mlp_bias = 0;
        // torch.tensor(H**0.5) (float32) .to(embed_tokens.dtype): rounded to the dtype of the checkpoint, as
        // transformers runs it; derived on every call, so a config whose torch_dtype changes (a checkpoint
        // saved in another dtype) gets the scale transformers would use with that file
        float s = (float)sqrt((double)c->hidden_size);
        if (!strcmp(c->torch_dtype, "bfloat16")) s = bf16_to_f32(bf16_from_f32(s));
        else if (!strcmp(c->torch_dtype, "float16")) s = st_f16_to_f32(st_f32_to_f16(s));   // RNE, as a cast
        c->embed_scale = s;
        if (c->attn_scale == 0 && c->query_pre_attn_scalar > 0) c->attn_scale = (float)(1.0 / sqrt(c->query_pre_attn_scalar));
    } else {
        c->norm_plus_one = 0;
        c->sandwich_norm = 0;
        c->hidden_act = MLP_SILU;
    }
    if (!is_gemma(c)) c->embed_scale = 1.0f;
    if (c->attn_scale == 0) c->attn_scale = (float)(1.0 / sqrt((double)c->head_dim));
    if (c->rope_theta == 0) c->rope_theta = c->rope.theta != 0 ? c->rope.theta : 10000.0;
    rope_finalize(&c->rope, c->rope_theta);
    if (c->rope_local.theta == 0) {
        if (is_gemma(c)) {
            memset(&c->rope_local, 0, sizeof c->rope_local);
            c->rope_local.theta = 10000.0;   // rope_local_base_freq
        } else {
            c->rope_local = c->rope;
        }
    }
    rope_finalize(&c->rope_local, c->rope_theta);
    int any_sliding = 0;
    for (int l = 0; l < c->num_hidden_layers; l++) any_sliding |= c->layer_types[l] == LAYER_SLIDING;
    CHECK(!any_sliding || c->sliding_window > 0, "sliding layers need sliding_window > 0 (got %d)", c->sliding_window);
}

// ---- parsing -----------------------------------------------------------------------------------------------------
// Class defaults of one family (models.md §2.1; Qwen3Config for qwen3).
typedef struct {
    int V, H, I, L, nh, nkv, max_pos, tie;
    double eps, theta;
    int sliding_window;
} family_defaults;

static family_defaults defaults_of(const char *mt) {
    if (!strcmp(mt, "qwen2")) return (family_defaults){151936, 4096, 22016, 32, 32, 32, 32768, 0, 1e-6, 10000, 4096};
    if (!strcmp(mt, "llama")) return (family_defaults){32000, 4096, 11008, 32, 32, 0, 2048, 0, 1e-6, 10000, -1};
    if (!strcmp(mt, "mistral")) return (family_defaults){32000, 4096, 14336, 32, 32, 8, 131072, 0, 1e-6, 10000, 4096};
    if (!strcmp(mt, "gemma3_text")) return (family_defaults){262208, 2304, 9216, 26, 8, 4, 131072, 1, 1e-6, 1e6, 4096};
    return (family_defaults){151936, 4096, 22016, 32, 32, 32, 32768, 0, 1e-6, 10000, 4096};   // Qwen3Config
}

// v5 rope_parameters keyed by layer type ({"full_attention": {...}, "sliding_attention": {...}})?
static int rope_by_layer_type(const cJSON *rp) {
    return cJSON_IsObject(rp) && (get(rp, "full_attention") || get(rp, "sliding_attention"));
}

static void parse_layer_types(model_config *c, const cJSON *root, const char *path) {
    const int L = c->num_hidden_layers;
    memset(c->layer_types, LAYER_FULL, sizeof c->layer_types);
    const cJSON *lt = get(root, "layer_types");
    const char *mt = c->model_type;
    const int qwen = !strcmp(mt, "qwen2") || !strcmp(mt, "qwen3");
    if (qwen && !c->use_sliding_window) return;   // sliding_window is None: every layer is full attention
    if (!is_null_or_absent(lt) && strcmp(mt, "mistral") != 0 && strcmp(mt, "llama") != 0) {
        if (!cJSON_IsArray(lt)) rlc_die("%s: key \"layer_types\" must be a list", path);
        if (cJSON_GetArraySize(lt) != L)
            rlc_die("%s: key \"layer_types\" lists %d layer types; num_hidden_layers is %d", path, cJSON_GetArraySize(lt), L);
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, lt) {
            if (cJSON_IsString(e) && !strcmp(e->valuestring, "full_attention")) c->layer_types[i] = LAYER_FULL;
            else if (cJSON_IsString(e) && !strcmp(e->valuestring, "sliding_attention")) c->layer_types[i] = LAYER_SLIDING;
            else rlc_die("%s: key \"layer_types[%d]\" must be \"full_attention\" or \"sliding_attention\"", path, i);
            i++;
        }
        if (strcmp(mt, "gemma3_text") != 0 && c->sliding_window <= 0)
            for (int l = 0; l < L; l++) c->layer_types[l] = LAYER_FULL;   // no window: every layer is full attention
        return;
    }
    if (!strcmp(mt, "gemma3_text")) {
        for (int l = 0; l < L; l++) c->layer_types[l] = (l + 1) % c->sliding_window_pattern ? LAYER_SLIDING : LAYER_FULL;
    } else if (!strcmp(mt, "mistral")) {
        if (c->sliding_window > 0) memset(c->layer_types, LAYER_SLIDING, (size_t)L);   // every layer when set
    } else if (strcmp(mt, "llama") != 0) {
        // Qwen2Config / Qwen3Config: layer i slides iff use_sliding_window and i >= max_window_layers (v5: the
        // window is None unless use_sliding_window)
        if (c->use_sliding_window && c->sliding_window > 0)
            for (int l = c->max_window_layers; l < L; l++) c->layer_types[l] = LAYER_SLIDING;
    }
}

void model_config_parse(model_config *cfg, const char *json_text, const char *path) {
    memset(cfg, 0, sizeof *cfg);
    cJSON *root = rlc_json_parse(json_text, strlen(json_text), path);
    if (!cJSON_IsObject(root)) rlc_die("%s: config must be a JSON object", path);

    const cJSON *mt = get(root, "model_type");
    if (!mt) rlc_die("%s: missing required key \"model_type\" (supported: %s)", path, MODEL_TYPES_SUPPORTED);
    if (!cJSON_IsString(mt)) rlc_die("%s: key \"model_type\" must be a string (supported: %s)", path, MODEL_TYPES_SUPPORTED);
    if (!model_type_supported(mt->valuestring))
        rlc_die("%s: key \"model_type\" is \"%s\"; rlc supports %s", path, mt->valuestring, MODEL_TYPES_SUPPORTED);
    snprintf(cfg->model_type, sizeof cfg->model_type, "%s", mt->valuestring);
    const int gemma = is_gemma(cfg);
    const family_defaults fd = defaults_of(cfg->model_type);

    const long long BIG = 1ll << 30;
    cfg->vocab_size = opt_int(root, path, "vocab_size", 1, BIG, fd.V);
    cfg->hidden_size = opt_int(root, path, "hidden_size", 1, BIG, fd.H);
    cfg->intermediate_size = opt_int(root, path, "intermediate_size", 1, BIG, fd.I);
    cfg->num_hidden_layers = opt_int(root, path, "num_hidden_layers", 1, MODEL_MAX_LAYERS, fd.L);
    cfg->num_attention_heads = opt_int(root, path, "num_attention_heads", 1, 1 << 16, fd.nh);
    cfg->num_key_value_heads = opt_int(root, path, "num_key_value_heads", 1, 1 << 16, fd.nkv ? fd.nkv : cfg->num_attention_heads);
    // head_dim: explicit, else the class default (Gemma 3: 256, Qwen3: 128), else H / nh
    const cJSON *hd = get(root, "head_dim");
    if (is_null_or_absent(hd)) {
        if (gemma) cfg->head_dim = 256;
        else if (!strcmp(cfg->model_type, "qwen3")) cfg->head_dim = 128;   // Qwen3Config's default
        else {
            if (cfg->hidden_size % cfg->num_attention_heads != 0)
                rlc_die("%s: key \"hidden_size\" = %d is not a multiple of num_attention_heads = %d (and head_dim is absent)",
                        path, cfg->hidden_size, cfg->num_attention_heads);
            cfg->head_dim = cfg->hidden_size / cfg->num_attention_heads;
        }
    } else {
        cfg->head_dim = json_int(hd, path, "head_dim", 2, 1 << 16);
    }
    cfg->max_position_embeddings = opt_int(root, path, "max_position_embeddings", 1, BIG, fd.max_pos);
    if (cfg->num_attention_heads % cfg->num_key_value_heads != 0)
        rlc_die("%s: key \"num_key_value_heads\" = %d must divide num_attention_heads = %d", path,
                cfg->num_key_value_heads, cfg->num_attention_heads);
    if (cfg->head_dim % 2 != 0) rlc_die("%s: key \"head_dim\" = %d must be even (RoPE rotates halves)", path, cfg->head_dim);

    const cJSON *v = get(root, "rms_norm_eps");
    double eps = fd.eps;
    if (!is_null_or_absent(v)) eps = json_num(v, path, "rms_norm_eps");
    if (!(eps > 0 && eps < 1)) rlc_die("%s: key \"rms_norm_eps\" = %g must be in (0, 1)", path, eps);
    cfg->rms_norm_eps = (float)eps;

    // ---- RoPE: rope_parameters (v5; per layer type for Gemma 3), else rope_scaling + rope_theta (4.5x)
    const cJSON *rt = get(root, "rope_theta");
    const cJSON *rpar = get(root, "rope_parameters");
    const cJSON *rs = get(root, "rope_scaling");
    double theta = fd.theta;
    if (!is_null_or_absent(rt)) theta = json_num(rt, path, "rope_theta");
    const cJSON *pr = get(root, "partial_rotary_factor");
    if (!is_null_or_absent(pr) && json_num(pr, path, "partial_rotary_factor") != 1.0)
        rlc_die("%s: key \"partial_rotary_factor\" = %g; rlc rotates the whole head (1.0 only)", path, pr->valuedouble);
    double local_theta = 10000.0;
    v = get(root, "rope_local_base_freq");
    if (!is_null_or_absent(v)) local_theta = json_num(v, path, "rope_local_base_freq");
    const int maxp = cfg->max_position_embeddings;
    if (!is_null_or_absent(rpar)) {
        if (!cJSON_IsObject(rpar)) rlc_die("%s: key \"rope_parameters\" must be an object", path);
        if (rope_by_layer_type(rpar)) {
            const cJSON *fa = get(rpar, "full_attention"), *sa = get(rpar, "sliding_attention");
            parse_rope_dict(&cfg->rope, fa, path, "rope_parameters.full_attention", theta, maxp);
            if (is_null_or_absent(sa)) cfg->rope_local = cfg->rope;
            else parse_rope_dict(&cfg->rope_local, sa, path, "rope_parameters.sliding_attention", local_theta, maxp);
            if (!gemma && memcmp(&cfg->rope, &cfg->rope_local, sizeof cfg->rope) != 0)
                rlc_die("%s: key \"rope_parameters\" gives per-layer-type RoPE, which %s does not use", path, cfg->model_type);
        } else {
            parse_rope_dict(&cfg->rope, rpar, path, "rope_parameters", theta, maxp);
            if (!is_null_or_absent(rt) && cfg->rope.theta != json_num(rt, path, "rope_theta") && get(rpar, "rope_theta"))
                rlc_die("%s: key \"rope_theta\" = %g disagrees with rope_parameters.rope_theta = %g", path, rt->valuedouble,
                        cfg->rope.theta);
            cfg->rope_local = cfg->rope;
            if (gemma) parse_rope_dict(&cfg->rope_local, NULL, path, "rope_local_base_freq", local_theta, maxp);
        }
    } else {
        parse_rope_dict(&cfg->rope, rs, path, "rope_scaling", theta, maxp);
        cfg->rope_local = cfg->rope;
        if (gemma) parse_rope_dict(&cfg->rope_local, NULL, path, "rope_local_base_freq", local_theta, maxp);   // scaling: global only
    }
    const rope_params *rchk[2] = {&cfg->rope, &cfg->rope_local};
    for (int i = 0; i < 2; i++)
        // the base is used as a float32 (as torch does): beyond FLT_MAX it is inf
        if (!(rchk[i]->theta > 1 && rchk[i]->theta <= FLT_MAX))
            rlc_die("%s: key \"%s\" = %g must be in (1, %g] (a float32 base)", path,
                    i == 0 ? "rope_theta" : "rope_local_base_freq", rchk[i]->theta, (double)FLT_MAX);
    cfg->rope_theta = cfg->rope.theta;

    cfg->tie_word_embeddings = opt_bool(root, path, "tie_word_embeddings", fd.tie);

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
            cfg->eos_token_ids[cfg->n_eos_token_ids++] = token_id(e, path, "eos_token_id", cfg->vocab_size);
        }
        if (cfg->n_eos_token_ids) cfg->eos_token_id = cfg->eos_token_ids[0];
    } else {
        cfg->eos_token_id = token_id(v, path, "eos_token_id", cfg->vocab_size);
        if (cfg->eos_token_id >= 0) cfg->eos_token_ids[cfg->n_eos_token_ids++] = cfg->eos_token_id;
    }

    // ---- sliding windows
    cfg->use_sliding_window = opt_bool(root, path, "use_sliding_window", 0);
    v = get(root, "sliding_window");
    cfg->sliding_window = is_null_or_absent(v) ? -1 : json_int(v, path, "sliding_window", 1, 1ll << 31 >> 1);
    if (!get(root, "sliding_window") && fd.sliding_window > 0 && (gemma || !strcmp(cfg->model_type, "mistral")))
        cfg->sliding_window = fd.sliding_window;   // the class default applies only when the key is absent
    cfg->max_window_layers = opt_int(root, path, "max_window_layers", 0, 1 << 16,
                                     28);   // Qwen2Config and Qwen3Config default
    cfg->sliding_window_pattern = opt_int(root, path, "sliding_window_pattern", 1, 1 << 16, 6);
    parse_layer_types(cfg, root, path);
    for (int l = 0; l < cfg->num_hidden_layers; l++)
        if (cfg->layer_types[l] == LAYER_SLIDING && cfg->sliding_window <= 0)
            rlc_die("%s: key \"sliding_window\" is null but layer %d is a sliding_attention layer", path, l);

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

    // ---- activation, biases, scales
    const char *akey = gemma ? "hidden_activation" : "hidden_act";
    v = get(root, akey);
    if (gemma && is_null_or_absent(v)) { akey = "hidden_act"; v = get(root, akey); }
    const char *want = gemma ? "gelu_pytorch_tanh" : "silu";
    if (!is_null_or_absent(v)) {
        if (!cJSON_IsString(v)) rlc_die("%s: key \"%s\" must be a string", path, akey);
        if (strcmp(v->valuestring, want) != 0 && !(gemma && !strcmp(v->valuestring, "gelu_tanh")))
            rlc_die("%s: key \"%s\" is \"%s\"; rlc implements \"%s\" for %s", path, akey, v->valuestring, want, cfg->model_type);
    }
    if (strcmp(cfg->model_type, "qwen2") != 0 && strcmp(cfg->model_type, "mistral") != 0) {
        cfg->qkv_bias = cfg->o_bias = opt_bool(root, path, "attention_bias", 0);   // q, k, v and o alike
    }
    if (!strcmp(cfg->model_type, "llama")) cfg->mlp_bias = opt_bool(root, path, "mlp_bias", 0);
    v = get(root, "attention_dropout");
    if (!is_null_or_absent(v) && json_num(v, path, "attention_dropout") != 0)
        rlc_die("%s: key \"attention_dropout\" = %g; rlc implements no dropout (0 only)", path, v->valuedouble);
    if (opt_bool(root, path, "use_bidirectional_attention", 0))
        rlc_die("%s: key \"use_bidirectional_attention\" is true; rlc implements causal decoders only", path);
    if (gemma) {
        v = get(root, "query_pre_attn_scalar");
        cfg->query_pre_attn_scalar = is_null_or_absent(v) ? 256 : json_num(v, path, "query_pre_attn_scalar");
        if (!(cfg->query_pre_attn_scalar > 0))
            rlc_die("%s: key \"query_pre_attn_scalar\" = %g must be > 0", path, cfg->query_pre_attn_scalar);
        // attn_logit_softcapping is not passed to attention by Gemma3Attention: ignored, as transformers does
    }
    v = get(root, "final_logit_softcapping");
    if (!is_null_or_absent(v)) {
        double cap = json_num(v, path, "final_logit_softcapping");
        if (!(cap > 0)) rlc_die("%s: key \"final_logit_softcapping\" = %g must be > 0 or null", path, cap);
        cfg->final_logit_softcapping = (float)cap;
    }

    cJSON_Delete(root);
    model_config_finalize(cfg);
}

void model_config_load(model_config *cfg, const char *path) {
    size_t n = strlen(path);
    char *file = (n > 5 && strcmp(path + n - 5, ".json") == 0) ? rlc_strdup(path) : rlc_path_join(path, "config.json");
    size_t len;
    char *text = rlc_read_file(file, &len);
    char err[1024];   // the whole file: a NUL byte would end the text model_config_parse sees
    if (rlc_json_check_text(text, len, file, err, sizeof err) != 0) rlc_die("%s", err);
    model_config_parse(cfg, text, file);
    free(text);
    free(file);
}

// ---- writing -----------------------------------------------------------------------------------------------------
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

// v4 rope_scaling dict of rp (NULL for default)
static void add_rope_scaling(cJSON *o, const rope_params *rp) {
    char buf[64];
    if (rp->type == ROPE_DEFAULT) { cJSON_AddNullToObject(o, "rope_scaling"); return; }
    cJSON *d = cJSON_AddObjectToObject(o, "rope_scaling");
    if (rp->type == ROPE_YARN) {
        if (rp->attention_factor != yarn_mscale(rp->factor, 1.0) || (rp->mscale && rp->mscale_all_dim))
            cJSON_AddRawToObject(d, "attention_factor", fmt_num(buf, sizeof buf, rp->attention_factor, 0));
        cJSON_AddRawToObject(d, "beta_fast", fmt_num(buf, sizeof buf, rp->beta_fast, 0));
        cJSON_AddRawToObject(d, "beta_slow", fmt_num(buf, sizeof buf, rp->beta_slow, 0));
    }
    cJSON_AddRawToObject(d, "factor", fmt_num(buf, sizeof buf, rp->factor, 0));
    if (rp->type == ROPE_LLAMA3) {
        cJSON_AddRawToObject(d, "high_freq_factor", fmt_num(buf, sizeof buf, rp->high_freq_factor, 0));
        cJSON_AddRawToObject(d, "low_freq_factor", fmt_num(buf, sizeof buf, rp->low_freq_factor, 0));
    }
    if (rp->type == ROPE_LLAMA3 || (rp->type == ROPE_YARN && rp->orig_explicit))
        cJSON_AddNumberToObject(d, "original_max_position_embeddings", rp->original_max_position_embeddings);
    cJSON_AddStringToObject(d, "rope_type", rope_name(rp->type));
    if (rp->type == ROPE_YARN && !rp->truncate) cJSON_AddFalseToObject(d, "truncate");
}

char *model_config_to_json(const model_config *c) {
    char buf[64];
    const char *mt = c->model_type[0] ? c->model_type : "qwen3";
    const int gemma = !strcmp(mt, "gemma3_text"), llama = !strcmp(mt, "llama"), qwen2 = !strcmp(mt, "qwen2");
    const int mistral = !strcmp(mt, "mistral");
    const char *arch = gemma ? "Gemma3ForCausalLM" : llama ? "LlamaForCausalLM" : qwen2 ? "Qwen2ForCausalLM"
                     : mistral ? "MistralForCausalLM" : "Qwen3ForCausalLM";
    // keys sorted, as transformers writes them
    cJSON *o = cJSON_CreateObject();
    cJSON *ar = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(ar, cJSON_CreateString(arch));
    if (!qwen2 && !mistral) cJSON_AddBoolToObject(o, "attention_bias", c->qkv_bias ? 1 : 0);
    cJSON_AddRawToObject(o, "attention_dropout", "0.0");
    if (gemma) cJSON_AddNullToObject(o, "attn_logit_softcapping");
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
    if (c->final_logit_softcapping > 0)
        cJSON_AddRawToObject(o, "final_logit_softcapping", fmt_num(buf, sizeof buf, c->final_logit_softcapping, 1));
    else if (gemma) cJSON_AddNullToObject(o, "final_logit_softcapping");
    cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
    cJSON_AddStringToObject(o, "hidden_act", gemma ? "gelu_pytorch_tanh" : "silu");
    if (gemma) cJSON_AddStringToObject(o, "hidden_activation", "gelu_pytorch_tanh");
    cJSON_AddNumberToObject(o, "hidden_size", c->hidden_size);
    // floats print from their float value (1e-06, 0.02), not the double widening (9.99999997e-07)
    cJSON_AddRawToObject(o, "initializer_range", fmt_num(buf, sizeof buf, c->initializer_range, 1));
    cJSON_AddNumberToObject(o, "intermediate_size", c->intermediate_size);
    int any_sliding = 0;
    for (int l = 0; l < c->num_hidden_layers; l++) any_sliding |= c->layer_types[l] == LAYER_SLIDING;
    if (gemma || (!llama && !mistral && any_sliding)) {
        cJSON *lt = cJSON_AddArrayToObject(o, "layer_types");
        for (int l = 0; l < c->num_hidden_layers; l++)
            cJSON_AddItemToArray(lt, cJSON_CreateString(c->layer_types[l] == LAYER_SLIDING ? "sliding_attention" : "full_attention"));
    }
    cJSON_AddNumberToObject(o, "max_position_embeddings", c->max_position_embeddings);
    if (!llama && !gemma && !mistral) cJSON_AddNumberToObject(o, "max_window_layers", c->max_window_layers);
    if (llama) cJSON_AddBoolToObject(o, "mlp_bias", c->mlp_bias ? 1 : 0);
    cJSON_AddStringToObject(o, "model_type", mt);
    cJSON_AddNumberToObject(o, "num_attention_heads", c->num_attention_heads);
    cJSON_AddNumberToObject(o, "num_hidden_layers", c->num_hidden_layers);
    cJSON_AddNumberToObject(o, "num_key_value_heads", c->num_key_value_heads);
    if (gemma) cJSON_AddRawToObject(o, "query_pre_attn_scalar", fmt_num(buf, sizeof buf, c->query_pre_attn_scalar, 0));
    cJSON_AddRawToObject(o, "rms_norm_eps", fmt_num(buf, sizeof buf, c->rms_norm_eps, 1));
    if (gemma) cJSON_AddRawToObject(o, "rope_local_base_freq", fmt_num(buf, sizeof buf, c->rope_local.theta, 0));
    add_rope_scaling(o, &c->rope);
    cJSON_AddRawToObject(o, "rope_theta", fmt_num(buf, sizeof buf, c->rope.theta, 0));
    if (c->sliding_window > 0) cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
    else cJSON_AddNullToObject(o, "sliding_window");
    if (gemma) cJSON_AddNumberToObject(o, "sliding_window_pattern", c->sliding_window_pattern ? c->sliding_window_pattern : 6);
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_word_embeddings ? 1 : 0);
    cJSON_AddStringToObject(o, "torch_dtype", c->torch_dtype[0] ? c->torch_dtype : "float32");
    cJSON_AddStringToObject(o, "transformers_version", "4.53.0");
    cJSON_AddTrueToObject(o, "use_cache");
    if (!llama && !gemma && !mistral) cJSON_AddBoolToObject(o, "use_sliding_window", c->use_sliding_window ? 1 : 0);
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
