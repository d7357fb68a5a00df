// peft.c: PEFT's adapter folder, read and written (shared/spec/lora.md §3.2-3.4).
#include "io/peft.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "io/safetensors.h"

#define PEFT_CONFIG "adapter_config.json"
#define PEFT_WEIGHTS "adapter_model.safetensors"

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

void peft_save(const char *dir, const lora_layout *ll, const param_set *ad, const char *base_name) {
    CHECK(ad->layout == &ll->pl, "adapter set built on another layout");
    rlc_mkdirs(dir);
    // weights: every tensor of the size table, in storage order, F32 (the training precision)
    st_write_tensor *wt = rlc_calloc((size_t)(ll->pl.n_tensors ? ll->pl.n_tensors : 1), sizeof *wt);
    for (int i = 0; i < ll->pl.n_tensors; i++) {
        const param_tensor *t = &ll->pl.tensors[i];
        wt[i].name = t->name;
        wt[i].dtype = ST_F32;
        wt[i].ndim = 2;
        wt[i].shape[0] = t->shape[0];
        wt[i].shape[1] = t->shape[1];
        wt[i].f32 = ad->data + t->offset;
    }
    const char *meta[] = {"format", "pt"};
    char *wpath = rlc_path_join(dir, PEFT_WEIGHTS);
    st_write(wpath, wt, ll->pl.n_tensors, meta, 1);
    free(wpath);
    free(wt);

    // target_modules: the short names when a projection is adapted in every layer, else the full module names of the
    // adapted ones (PEFT matches a list entry by equality or name suffix, so both select exactly what was trained)
    int n_t = 0;
    char **names = rlc_calloc((size_t)ll->L * LORA_NPROJ + 1, sizeof(char *));
    for (int p = 0; p < LORA_NPROJ; p++) {
        int every = 1;
        for (int l = 0; l < ll->L; l++) every &= lora_adapted(ll, l, p);
        if (every) { names[n_t++] = rlc_strdup(LORA_PROJ_NAME[p]); continue; }
        for (int l = 0; l < ll->L; l++) {
            if (!lora_adapted(ll, l, p)) continue;
            char b[128];
            snprintf(b, sizeof b, "model.layers.%d.%s", l, LORA_PROJ_PATH[p]);
            names[n_t++] = rlc_strdup(b);
        }
    }
    qsort(names, (size_t)n_t, sizeof *names, cmp_str);
    rlc_strbuf sb = {0};
    char alpha[64];
    if (ll->alpha == floorf(ll->alpha) && fabsf(ll->alpha) < 1e9f) snprintf(alpha, sizeof alpha, "%lld", (long long)ll->alpha);
    else snprintf(alpha, sizeof alpha, "%.9g", (double)ll->alpha);
    rlc_sb_puts(&sb, "{\n  \"alpha_pattern\": {},\n  \"auto_mapping\": null,\n  \"base_model_name_or_path\": ");
    if (base_name) rlc_sb_json_str(&sb, base_name, strlen(base_name));
    else rlc_sb_puts(&sb, "null");
    rlc_sb_printf(&sb,
                  ",\n  \"bias\": \"none\",\n  \"exclude_modules\": null,\n  \"fan_in_fan_out\": false,\n  \"inference_mode\": true,\n"
                  "  \"init_lora_weights\": true,\n  \"layers_pattern\": null,\n  \"layers_to_transform\": null,\n"
                  "  \"lora_alpha\": %s,\n  \"lora_bias\": false,\n  \"lora_dropout\": 0.0,\n  \"modules_to_save\": null,\n"
                  "  \"peft_type\": \"LORA\",\n  \"r\": %d,\n  \"rank_pattern\": {},\n  \"revision\": null,\n  \"target_modules\": [",
                  alpha, ll->rank);
    for (int i = 0; i < n_t; i++) {
        rlc_sb_puts(&sb, i ? ",\n    " : "\n    ");
        rlc_sb_json_str(&sb, names[i], strlen(names[i]));
        free(names[i]);
    }
    free(names);
    rlc_sb_printf(&sb, "\n  ],\n  \"task_type\": \"CAUSAL_LM\",\n  \"use_dora\": false,\n  \"use_rslora\": %s\n}\n",
                  ll->use_rslora ? "true" : "false");
    char *cpath = rlc_path_join(dir, PEFT_CONFIG);
    if (rlc_write_file_atomic(cpath, sb.s, sb.n) != 0) rlc_die("%s: cannot write the adapter config", cpath);
    free(cpath);
    free(sb.s);
}

// ---- reading ------------------------------------------------------------------------------------------------

static const cJSON *field(const cJSON *root, const char *key) { return cJSON_GetObjectItemCaseSensitive(root, key); }

static int is_empty(const cJSON *v) {   // null, absent, false, {} or []
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return 1;
    if ((cJSON_IsArray(v) || cJSON_IsObject(v)) && !v->child) return 1;
    return 0;
}

static void check_config(const char *path, const cJSON *root, int *r, float *alpha, int *rslora) {
    if (!cJSON_IsObject(root)) rlc_die("%s: expected a JSON object", path);
    const cJSON *pt = field(root, "peft_type");
    if (!pt) rlc_die("%s: missing field 'peft_type' (expected \"LORA\")", path);
    if (!cJSON_IsString(pt) || strcmp(pt->valuestring, "LORA") != 0) rlc_die("%s: 'peft_type': expected \"LORA\"", path);
    const cJSON *rv = field(root, "r");
    if (!rv) rlc_die("%s: missing field 'r' (the LoRA rank)", path);
    if (!cJSON_IsNumber(rv) || rv->valuedouble != floor(rv->valuedouble) || rv->valuedouble < 1 || rv->valuedouble > 65536)
        rlc_die("%s: 'r': expected an integer in [1, 65536]", path);
    *r = (int)rv->valuedouble;
    const cJSON *av = field(root, "lora_alpha");
    if (!av) rlc_die("%s: missing field 'lora_alpha'", path);
    if (!cJSON_IsNumber(av) || !(av->valuedouble > 0) || !isfinite((float)av->valuedouble))
        rlc_die("%s: 'lora_alpha': expected a finite number > 0", path);
    *alpha = (float)av->valuedouble;
    const cJSON *tm = field(root, "target_modules");
    if (!tm) rlc_die("%s: missing field 'target_modules'", path);
    if (!cJSON_IsString(tm) && !cJSON_IsArray(tm)) rlc_die("%s: 'target_modules': expected a string or a list of strings", path);
    const cJSON *rs = field(root, "use_rslora");
    if (rs && !cJSON_IsBool(rs) && !cJSON_IsNull(rs)) rlc_die("%s: 'use_rslora': expected true or false", path);
    *rslora = rs && cJSON_IsTrue(rs);
    const cJSON *bias = field(root, "bias");
    if (bias && !cJSON_IsNull(bias) && (!cJSON_IsString(bias) || strcmp(bias->valuestring, "none") != 0))
        rlc_die("%s: 'bias': rlc supports only \"none\" (trainable base biases are not implemented)", path);
    static const char *const unsupported[] = {"use_dora", "modules_to_save", "lora_bias", "fan_in_fan_out", "rank_pattern",
                                              "alpha_pattern", "layer_replication", "target_parameters"};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++)
        if (!is_empty(field(root, unsupported[i])))
            rlc_die("%s: '%s' is set, which rlc does not implement (expected null, false or empty)", path, unsupported[i]);
    const cJSON *dr = field(root, "lora_dropout");
    if (dr && !cJSON_IsNull(dr) && !cJSON_IsNumber(dr)) rlc_die("%s: 'lora_dropout': expected a number", path);
}

// "base_model.model.model.layers.N.<path>.lora_A[.name].weight" -> layer, projection, 0 (A) / 1 (B); -1: not one.
static int parse_name(const char *name, int L, int *layer, int *proj, int *ab) {
    const char *pre = "base_model.model.";
    if (strncmp(name, pre, strlen(pre)) == 0) name += strlen(pre);
    const char *lp = "model.layers.";
    if (strncmp(name, lp, strlen(lp)) != 0) return -1;
    const char *s = name + strlen(lp);
    if (*s < '0' || *s > '9') return -1;
    char *end;
    long l = strtol(s, &end, 10);
    if (*end != '.' || l < 0 || l >= L || (s[0] == '0' && end - s > 1)) return -1;
    s = end + 1;
    for (int p = 0; p < LORA_NPROJ; p++) {
        size_t k = strlen(LORA_PROJ_PATH[p]);
        if (strncmp(s, LORA_PROJ_PATH[p], k) != 0 || strncmp(s + k, ".lora_", 6) != 0) continue;
        const char *t = s + k + 6;
        if ((*t != 'A' && *t != 'B') || t[1] != '.') return -1;
        const char *rest = t + 2;
        const char *dot = strchr(rest, '.');
        if (!(strcmp(rest, "weight") == 0 || (dot && dot > rest && strcmp(dot, ".weight") == 0))) return -1;
        *layer = (int)l;
        *proj = p;
        *ab = *t == 'B';
        return 0;
    }
    return -1;
}

void peft_load(const char *dir, const model_config *cfg, lora_layout *ll, param_set *ad) {
    char *cpath = rlc_path_join(dir, PEFT_CONFIG), *wpath = rlc_path_join(dir, PEFT_WEIGHTS);
    if (!rlc_file_exists(cpath)) rlc_die("%s: missing (a PEFT adapter folder holds " PEFT_CONFIG " and " PEFT_WEIGHTS ")", cpath);
    if (!rlc_file_exists(wpath)) {
        char *bin = rlc_path_join(dir, "adapter_model.bin");
        if (rlc_file_exists(bin)) rlc_die("%s: pickle weights are not supported; save the adapter with safetensors", bin);
        rlc_die("%s: missing (the adapter's weights)", wpath);
    }
    size_t len = 0;
    char *text = rlc_read_file(cpath, &len);
    cJSON *root = rlc_json_parse(text, len, cpath);   // strict: UTF-8, no NUL, nothing after the value
    int r = 0, rslora = 0;
    float alpha = 0;
    check_config(cpath, root, &r, &alpha, &rslora);
    cJSON_Delete(root);
    free(text);

    st_file f;
    st_file_open(&f, wpath);
    const int L = cfg->num_hidden_layers;
    int64_t in[LORA_NPROJ], out[LORA_NPROJ];
    {   // the projections' shapes from a throwaway table
        lora_layout tmp;
        uint8_t one[LORA_NPROJ * MODEL_MAX_LAYERS] = {0};
        one[0] = 1;
        lora_layout_init_mask(&tmp, cfg, 1, 1.0f, 0, one);
        memcpy(in, tmp.in, sizeof in);
        memcpy(out, tmp.out, sizeof out);
        lora_layout_free(&tmp);
    }
    int *which = rlc_calloc((size_t)L * LORA_NPROJ * 2, sizeof(int));   // tensor index + 1 per (layer, proj, A/B)
    int n_lora = 0;
    for (int i = 0; i < f.n_tensors; i++) {
        const st_tensor *t = &f.tensors[i];
        int l, p, ab;
        if (parse_name(t->name, L, &l, &p, &ab) != 0)
            rlc_die("%s: tensor '%s' is not a LoRA A/B weight of a projection of this %d-layer %s model", wpath, t->name, L,
                    cfg->model_type);
        int64_t want0 = ab ? out[p] : r, want1 = ab ? r : in[p];
        if (t->ndim != 2 || t->shape[0] != want0 || t->shape[1] != want1) {
            if (t->ndim == 2 && (ab ? t->shape[1] : t->shape[0]) != r && (ab ? t->shape[0] == out[p] : t->shape[1] == in[p]))
                rlc_die("%s: tensor '%s' has rank %lld but adapter_config.json says r = %d", wpath, t->name,
                        (long long)(ab ? t->shape[1] : t->shape[0]), r);
            rlc_die("%s: tensor '%s': expected shape [%lld, %lld] for the base model (%s), got %s%lld%s%lld%s", wpath, t->name,
                    (long long)want0, (long long)want1, cfg->model_type, t->ndim >= 1 ? "[" : "scalar", t->ndim >= 1 ? (long long)t->shape[0] : 0,
                    t->ndim >= 2 ? ", " : "", t->ndim >= 2 ? (long long)t->shape[1] : 0, t->ndim > 2 ? ", ...]" : t->ndim >= 1 ? "]" : "");
        }
        int *slot = &which[(l * LORA_NPROJ + p) * 2 + ab];
        if (*slot) rlc_die("%s: tensors '%s' and '%s' are the same weight", wpath, f.tensors[*slot - 1].name, t->name);
        if (t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16)
            rlc_die("%s: tensor '%s': expected dtype F32, BF16 or F16, got %s", wpath, t->name, st_dtype_name(t->dtype));
        *slot = i + 1;
        n_lora++;
    }
    if (n_lora == 0) rlc_die("%s: holds no LoRA tensor", wpath);
    uint8_t *mask = rlc_calloc((size_t)L * LORA_NPROJ, 1);
    for (int l = 0; l < L; l++)
        for (int p = 0; p < LORA_NPROJ; p++) {
            int a = which[(l * LORA_NPROJ + p) * 2], b = which[(l * LORA_NPROJ + p) * 2 + 1];
            if (!a != !b)
                rlc_die("%s: model.layers.%d.%s has lora_%c but no lora_%c", wpath, l, LORA_PROJ_PATH[p], a ? 'A' : 'B', a ? 'B' : 'A');
            mask[l * LORA_NPROJ + p] = a != 0;
        }
    float s = lora_scale(r, alpha, rslora);
    if (!isfinite(s) || s == 0.0f) rlc_die("%s: the scale lora_alpha/r = %g/%d is not a finite non-zero fp32 number", cpath, (double)alpha, r);
    lora_layout_init_mask(ll, cfg, r, alpha, rslora, mask);
    param_set_init(ad, &ll->pl);
    for (int l = 0; l < L; l++)
        for (int p = 0; p < LORA_NPROJ; p++) {
            if (!mask[l * LORA_NPROJ + p]) continue;
            for (int ab = 0; ab < 2; ab++) {
                const st_tensor *t = &f.tensors[which[(l * LORA_NPROJ + p) * 2 + ab] - 1];
                float *dst = ad->data + (ab ? ll->b_off : ll->a_off)[l * LORA_NPROJ + p];
                st_tensor_to_f32(t, dst, wpath);
                for (int64_t j = 0; j < t->numel; j++)
                    if (!isfinite(dst[j])) rlc_die("%s: tensor '%s' holds a non-finite value at element %lld", wpath, t->name, (long long)j);
            }
        }
    free(mask);
    free(which);
    st_file_close(&f);
    free(cpath);
    free(wpath);
}
