// test_lora_api.c: the LoRA adapter set's size table and target resolution (PEFT's rules: all-linear, lists with
// suffix matching, regex fullmatch, exclusions), the scale, PEFT's init, the trainable count, the trainer's config
// keys (YAML and overrides; strings and lists kept apart), and the one-line errors of lora_layout_init, the config
// and peft_load (a base that does not match in shape or module, missing adapter_config fields, r inconsistent with
// the tensors, unsupported options, A without B).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "io/peft.h"
#include "io/safetensors.h"
#include "model/lora.h"
#include "trainer/config.h"
#include "io_testutil.h"
#include "testlib.h"

static const char *QWEN3_JSON =
    "{\"model_type\":\"qwen3\",\"vocab_size\":211,\"hidden_size\":64,\"intermediate_size\":96,"
    "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":16,\"max_position_embeddings\":256,"
    "\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"tie_word_embeddings\":true}";
static const char *LLAMA_JSON =
    "{\"model_type\":\"llama\",\"vocab_size\":49,\"hidden_size\":48,\"intermediate_size\":64,"
    "\"num_hidden_layers\":2,\"num_attention_heads\":6,\"num_key_value_heads\":2,\"max_position_embeddings\":256,"
    "\"rms_norm_eps\":1e-5,\"rope_theta\":100000.0,\"tie_word_embeddings\":true}";

// ---- targets, scale, init, counts --------------------------------------------------------------------------

static void test_targets(void) {
    model_config cfg;
    model_config_parse(&cfg, QWEN3_JSON, "qwen3");
    lora_config lc;
    lora_config_default(&lc);
    lc.rank = 32;
    lora_layout ll;
    lora_layout_init(&ll, &cfg, &lc, NULL);   // default: all-linear
    TL_CHECK(ll.proj_mask == 0x7f && ll.pl.n_tensors == 2 * 7 * 2, "all-linear: 7 projections x 2 layers (mask %x)", ll.proj_mask);
    const int64_t H = 64, I = 96, QD = 64, KD = 32;
    TL_CHECK(lora_trainable_count(&ll) == 2 * 32 * (2 * (H + QD) + 2 * (H + KD) + 3 * (H + I)), "trainable = r·L·Σ(in+out)");
    TL_CHECK(ll.scale == 0.5f, "scale alpha/r = 16/32");
    TL_CHECK(strcmp(ll.pl.tensors[0].name, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight") == 0 &&
                 ll.pl.tensors[0].shape[0] == 32 && ll.pl.tensors[0].shape[1] == H && ll.pl.tensors[1].shape[0] == QD &&
                 ll.pl.tensors[1].shape[1] == 32,
             "PEFT names and shapes: A (r, in), B (out, r)");
    param_set ad;
    param_set_init(&ad, &ll.pl);
    lora_init_weights(&ll, &ad, 5);
    float amax = 0;
    double bsum = 0;
    for (int i = 0; i < ll.pl.n_tensors; i++) {
        const param_tensor *t = &ll.pl.tensors[i];
        for (int64_t j = 0; j < t->numel; j++) {
            float v = ad.data[t->offset + j];
            if (strstr(t->name, "lora_A")) { float b = v * sqrtf((float)t->shape[1]); amax = fabsf(b) > amax ? fabsf(b) : amax; }
            else bsum += fabs(v);
        }
    }
    TL_CHECK(amax <= 1.0f && amax > 0.99f && bsum == 0, "init: A in ±1/√in (max %g of the bound), B = 0", amax);
    char line[128];
    lora_trainable_line(&ll, line, sizeof line);
    TL_CHECK(strncmp(line, "trainable ", 10) == 0 && strstr(line, "%)"), "trainable line: %s", line);
    param_set_free(&ad);
    lora_layout_free(&ll);
    lc.use_rslora = 1;
    lc.rank = 16;
    TL_CHECK(lora_scale(16, 16.0f, 1) == 4.0f, "rsLoRA scale alpha/sqrt(r)");
    char err[256];
    lora_match_list(&lc.target, "q_proj, v_proj", err, sizeof err);
    lora_match_string(&lc.exclude, "model\\.layers\\.0\\..*", err, sizeof err);
    lora_layout_init(&ll, &cfg, &lc, NULL);
    TL_CHECK(!lora_adapted(&ll, 0, LORA_Q) && lora_adapted(&ll, 1, LORA_Q) && lora_adapted(&ll, 1, LORA_V) &&
                 !lora_adapted(&ll, 1, LORA_K) && ll.pl.n_tensors == 4,
             "list targets with a regex exclusion");
    lora_layout_free(&ll);
    // a full module name in a list, and a regex
    lora_match_list(&lc.target, "model.layers.1.mlp.down_proj", err, sizeof err);
    memset(&lc.exclude, 0, sizeof lc.exclude);
    lora_layout_init(&ll, &cfg, &lc, NULL);
    TL_CHECK(ll.pl.n_tensors == 2 && lora_adapted(&ll, 1, LORA_DOWN), "a full module name selects one module");
    lora_layout_free(&ll);
    lora_match_string(&lc.target, ".*(q|k)_proj", err, sizeof err);
    lora_layout_init(&ll, &cfg, &lc, NULL);
    TL_CHECK(ll.pl.n_tensors == 8 && ll.proj_mask == 0x3, "regex fullmatch");
    lora_layout_free(&ll);
    TL_CHECK(lora_match_string(&lc.target, "(", err, sizeof err) == -1, "a bad regex is refused: %s", err);
    TL_CHECK(lora_match_list(&lc.target, "q_proj,,v_proj", err, sizeof err) == -1, "an empty list entry is refused");
}

static model_config ERR_CFG;
static lora_config ERR_LC;
static void init_err(void *arg) {
    (void)arg;
    lora_layout ll;
    lora_layout_init(&ll, &ERR_CFG, &ERR_LC, NULL);
}
static char ERR_DIR[4096];
static void load_err(void *arg) {
    (void)arg;
    lora_layout ll;
    param_set ad;
    peft_load(ERR_DIR, &ERR_CFG, &ll, &ad);
}

static void write_text(const char *dir, const char *name, const char *s) {
    char *p = rlc_path_join(dir, name);
    CHECK(rlc_write_file_atomic(p, s, strlen(s)) == 0, "write %s", p);
    free(p);
}

static void test_errors(const char *root) {
    model_config_parse(&ERR_CFG, QWEN3_JSON, "qwen3");
    char err[256];
    lora_config_default(&ERR_LC);
    ERR_LC.rank = 0;
    io_expect_die("rank 0", init_err, NULL, "actor_rollout_ref.model.lora_rank", ">= 1", NULL);
    lora_config_default(&ERR_LC);
    ERR_LC.alpha = 0;
    io_expect_die("alpha 0", init_err, NULL, "actor_rollout_ref.model.lora_alpha", "> 0", NULL);
    lora_config_default(&ERR_LC);
    lora_match_list(&ERR_LC.target, "q_proj,lm_head", err, sizeof err);
    io_expect_die("a target matching nothing", init_err, NULL, "target_modules", "'lm_head' matches no module", NULL);
    lora_match_string(&ERR_LC.target, "model\\.layers\\.7\\..*", err, sizeof err);
    io_expect_die("a regex matching nothing", init_err, NULL, "target_modules", "matches no module", NULL);
    lora_match_list(&ERR_LC.target, "q_proj", err, sizeof err);
    lora_match_list(&ERR_LC.exclude, "q_proj", err, sizeof err);
    io_expect_die("everything excluded", init_err, NULL, "target_modules", "no module is left", NULL);

    // adapter folders: a valid one, then broken copies
    lora_config_default(&ERR_LC);
    ERR_LC.rank = 4;
    lora_layout ll;
    lora_layout_init(&ll, &ERR_CFG, &ERR_LC, NULL);
    param_set ad;
    param_set_init(&ad, &ll.pl);
    lora_init_weights(&ll, &ad, 3);
    char *good = rlc_path_join(root, "good_adapter");
    peft_save(good, &ll, &ad, NULL);
    snprintf(ERR_DIR, sizeof ERR_DIR, "%s", good);
    char msg[512];
    TL_CHECK(io_run_child(load_err, NULL, msg, sizeof msg) == 0, "the valid adapter folder loads: %s", msg);
    // a base that does not match: another hidden size
    model_config other = ERR_CFG;
    model_config_parse(&ERR_CFG, LLAMA_JSON, "llama");
    io_expect_die("base shape mismatch", load_err, NULL, "adapter_model.safetensors", "expected shape", NULL);
    ERR_CFG = other;
    const char *cfg_tmpl = "{\"peft_type\": \"LORA\", \"r\": %s, \"lora_alpha\": 16, \"target_modules\": [\"q_proj\"]%s}";
    char *bad = rlc_path_join(root, "bad_adapter");
    rlc_mkdirs(bad);
    tl_system("cp %s/adapter_model.safetensors %s/", good, bad);
    snprintf(ERR_DIR, sizeof ERR_DIR, "%s", bad);
    char cj[512];
    snprintf(cj, sizeof cj, cfg_tmpl, "8", "");
    write_text(bad, "adapter_config.json", cj);
    io_expect_die("r inconsistent with the tensors", load_err, NULL, "rank 4", "r = 8", NULL);
    write_text(bad, "adapter_config.json", "{\"peft_type\": \"LORA\", \"lora_alpha\": 16, \"target_modules\": [\"q_proj\"]}");
    io_expect_die("missing r", load_err, NULL, "adapter_config.json", "missing field 'r'", NULL);
    write_text(bad, "adapter_config.json", "{\"r\": 4, \"lora_alpha\": 16, \"target_modules\": [\"q_proj\"]}");
    io_expect_die("missing peft_type", load_err, NULL, "adapter_config.json", "missing field 'peft_type'", NULL);
    write_text(bad, "adapter_config.json", "{\"peft_type\": \"LORA\", \"r\": 4, \"target_modules\": [\"q_proj\"]}");
    io_expect_die("missing lora_alpha", load_err, NULL, "adapter_config.json", "missing field 'lora_alpha'", NULL);
    write_text(bad, "adapter_config.json", "{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 16}");
    io_expect_die("missing target_modules", load_err, NULL, "adapter_config.json", "missing field 'target_modules'", NULL);
    snprintf(cj, sizeof cj, cfg_tmpl, "4", ", \"use_dora\": true");
    write_text(bad, "adapter_config.json", cj);
    io_expect_die("DoRA", load_err, NULL, "adapter_config.json", "'use_dora'", NULL);
    snprintf(cj, sizeof cj, cfg_tmpl, "4", ", \"modules_to_save\": [\"lm_head\"]");
    write_text(bad, "adapter_config.json", cj);
    io_expect_die("modules_to_save", load_err, NULL, "adapter_config.json", "'modules_to_save'", NULL);
    // a tensor naming a module the base does not have (layer 9 of 2)
    snprintf(cj, sizeof cj, cfg_tmpl, "4", "");
    write_text(bad, "adapter_config.json", cj);
    float a[4 * 64] = {0};
    st_write_tensor wt[1] = {{.name = "base_model.model.model.layers.9.self_attn.q_proj.lora_A.weight", .dtype = ST_F32, .ndim = 2,
                              .shape = {4, 64}, .f32 = a}};
    char *stp = rlc_path_join(bad, "adapter_model.safetensors");
    st_write(stp, wt, 1, NULL, 0);
    io_expect_die("target module mismatch", load_err, NULL, "layers.9", "not a LoRA A/B weight", NULL);
    wt[0].name = "base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight";
    st_write(stp, wt, 1, NULL, 0);
    io_expect_die("A without B", load_err, NULL, "has lora_A but no lora_B", NULL);
    free(stp);
    free(bad);
    free(good);
    param_set_free(&ad);
    lora_layout_free(&ll);
}

// ---- config keys --------------------------------------------------------------------------------------------

static const char *CFG_TEXT;
static void cfg_err(void *arg) {
    rlc_train_config c;
    rlc_config_init(&c);
    rlc_config_load_yaml_text(&c, CFG_TEXT, "lora.yaml");
    if (arg) rlc_config_override(&c, (const char *)arg);
    lora_config lc;
    if (rlc_config_lora(&c, &lc)) {
        model_config cfg;
        model_config_parse(&cfg, QWEN3_JSON, "qwen3");
        lora_layout ll;
        lora_layout_init(&ll, &cfg, &lc, NULL);
    }
}

static void test_config(void) {
    rlc_train_config c;
    rlc_config_init(&c);
    lora_config lc;
    TL_CHECK(rlc_config_lora(&c, &lc) == 0 && c.actor_rollout_ref.model.lora_alpha == 16 &&
                 strcmp(c.actor_rollout_ref.model.base_dtype, "bf16") == 0,
             "defaults: lora_rank 0 (full fine-tuning), alpha 16, base bf16");
    rlc_config_load_yaml_text(&c,
                              "actor_rollout_ref:\n  model:\n    lora_rank: 32\n    lora_alpha: 32\n    use_shm: true\n"
                              "    target_modules: [q_proj, v_proj]\n    exclude_modules: 'model\\.layers\\.0\\..*'\n"
                              "    use_rslora: true\n    lora:\n      merge: true\n  rollout:\n    layered_summon: true\n",
                              "lora.yaml");
    TL_CHECK(rlc_config_lora(&c, &lc) == 1 && lc.rank == 32 && lc.alpha == 32 && lc.use_rslora && !lc.target.is_regex &&
                 lc.target.n_names == 2 && lc.exclude.is_regex && c.actor_rollout_ref.model.lora.merge,
             "YAML: rank, alpha, a list of targets, a regex exclusion, rsLoRA, lora.merge, use_shm/layered_summon accepted");
    char *y = rlc_config_to_yaml(&c);
    rlc_train_config c2;
    rlc_config_init(&c2);
    rlc_config_load_yaml_text(&c2, y, "saved.yaml");
    lora_config lc2;
    rlc_config_lora(&c2, &lc2);
    TL_CHECK(lc2.rank == 32 && !lc2.target.is_regex && lc2.target.n_names == 2 && lc2.exclude.is_regex &&
                 strcmp(lc2.exclude.regex, lc.exclude.regex) == 0,
             "the saved config keeps a string a string and a list a list");
    free(y);
    rlc_config_override(&c2, "actor_rollout_ref.model.target_modules=all-linear");
    rlc_config_lora(&c2, &lc2);
    TL_CHECK(lc2.target.n_names == 1 && strcmp(lc2.target.names[0], "all-linear") == 0, "override target_modules=all-linear");
    rlc_config_free(&c2);
    rlc_config_free(&c);
    CFG_TEXT = "actor_rollout_ref:\n  model:\n    lora_rank: 8\n";
    io_expect_die("lora_rank < 0", cfg_err, "actor_rollout_ref.model.lora_rank=-1", "actor_rollout_ref.model.lora_rank", NULL);
    io_expect_die("lora_alpha 0", cfg_err, "actor_rollout_ref.model.lora_alpha=0", "actor_rollout_ref.model.lora_alpha", "> 0", NULL);
    io_expect_die("bad regex", cfg_err, "actor_rollout_ref.model.target_modules=(", "actor_rollout_ref.model.target_modules",
                  "not a valid regex", NULL);
    io_expect_die("target matching nothing", cfg_err, "actor_rollout_ref.model.target_modules=[lm_head]",
                  "actor_rollout_ref.model.target_modules", "matches no module", NULL);
    io_expect_die("base_dtype", cfg_err, "actor_rollout_ref.model.base_dtype=int4", "actor_rollout_ref.model.base_dtype", NULL);
}

int main(void) {
    char *root = tl_tmpdir("lora_api");
    test_targets();
    test_config();
    test_errors(root);
    tl_system("rm -rf %s", root);
    free(root);
    return tl_summary();
}
