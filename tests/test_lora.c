// test_lora.c: LoRA adapters on the decoder (model/lora.h, decoder_set_lora) and PEFT's adapter folder (io/peft.h).
// Against a PyTorch reference (tests/py/lora_ref.py: the base with W + s·B·A merged, float64) on random non-zero A
// and B: log-probs and entropy at 1e-4 (fp32 forward against float64), dA and dB at 1e-4 (fp32 gradients through a
// few layers), over every target choice (all-linear, a list, a regex with exclusions), with and without rsLoRA, on
// Qwen3, Llama (biases), Qwen2 (q/k/v biases) and Gemma 3 (sandwich norms). Bitwise: B = 0 and adapters off give
// the base model's log-probs; a bf16 base widened per block gives the fp32 model of the rounded values. Checkpointed
// backward equals the plain one. PEFT folder: a torch-side reader checks rlc's folder; a torch-written adapter loads
// in rlc; a write/read round trip is bitwise. The rollout side path and merged decoding against the trainer's
// forward; rlc merge-lora against torch's merge; logprob/generate --adapter; LoRA SFT. (test_lora_api.c: targets,
// config keys and one-line errors.)
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "io/checkpoint.h"
#include "io/peft.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "model/decoder.h"
#include "model/lora.h"
#include "rollout/engine.h"
#include "trainer/sft.h"
#include "testlib.h"

typedef struct {
    const char *name;
    const char *json;
    float temperature;
    int n_seqs;
    int lens[4];
    int rank;
    float alpha;
    int rslora;
    const char *target;   // "all-linear", "a,b" (a list) or "re:REGEX"
    const char *exclude;  // NULL, a list, or "re:REGEX"
} lcase;

static const lcase CASES[] = {
    {"qwen3_all_linear", "{\"model_type\":\"qwen3\",\"vocab_size\":211,\"hidden_size\":64,\"intermediate_size\":96,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":16,\"max_position_embeddings\":256,"
     "\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"tie_word_embeddings\":true}",
     1.0f, 3, {17, 5, 40}, 4, 16.0f, 0, "all-linear", NULL},
    {"qwen3_regex_exclude_rslora", "{\"model_type\":\"qwen3\",\"vocab_size\":151,\"hidden_size\":48,\"intermediate_size\":80,"
     "\"num_hidden_layers\":3,\"num_attention_heads\":6,\"num_key_value_heads\":2,\"head_dim\":8,\"max_position_embeddings\":256,"
     "\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"tie_word_embeddings\":false}",
     0.7f, 2, {33, 9}, 2, 8.0f, 1, "re:model\\.layers\\.[12]\\..*", "o_proj,model.layers.2.mlp.up_proj"},
    {"llama_biases_list_rslora", "{\"model_type\":\"llama\",\"vocab_size\":301,\"hidden_size\":64,\"intermediate_size\":112,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":1,\"head_dim\":32,\"max_position_embeddings\":256,"
     "\"rms_norm_eps\":1e-5,\"rope_theta\":500000.0,\"tie_word_embeddings\":false,\"attention_bias\":true,\"mlp_bias\":true}",
     1.0f, 3, {7, 30, 1}, 3, 6.0f, 1, "q_proj,v_proj,down_proj,o_proj", NULL},
    {"llama_all_linear", "{\"model_type\":\"llama\",\"vocab_size\":49,\"hidden_size\":48,\"intermediate_size\":64,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":6,\"num_key_value_heads\":2,\"max_position_embeddings\":256,"
     "\"rms_norm_eps\":1e-5,\"rope_theta\":100000.0,\"tie_word_embeddings\":true}",
     0.7f, 2, {20, 31}, 8, 16.0f, 0, "all-linear", NULL},
    {"qwen2_bias_gate_up", "{\"model_type\":\"qwen2\",\"vocab_size\":117,\"hidden_size\":32,\"intermediate_size\":64,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"max_position_embeddings\":256,"
     "\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"tie_word_embeddings\":true}",
     1.0f, 2, {12, 25}, 5, 10.0f, 0, "gate_proj,up_proj,k_proj", NULL},
    {"gemma3_sandwich", "{\"model_type\":\"gemma3_text\",\"vocab_size\":201,\"hidden_size\":64,\"intermediate_size\":96,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":1,\"head_dim\":32,\"max_position_embeddings\":256,"
     "\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"rope_local_base_freq\":10000.0,\"sliding_window\":16,"
     "\"sliding_window_pattern\":2,\"query_pre_attn_scalar\":24,\"final_logit_softcapping\":5.0,"
     "\"hidden_activation\":\"gelu_pytorch_tanh\",\"tie_word_embeddings\":true}",
     1.0f, 2, {40, 9}, 4, 8.0f, 0, "all-linear", "re:.*\\.k_proj"},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

typedef struct {
    const lcase *lc;
    model_config cfg;
    param_layout pl;
    param_set ps;
    lora_layout ll;
    param_set ad;
    int64_t T;
    int32_t *tokens, *cu, *pos, *targets;
    float *dlogp, *dent;
    decoder_batch b;
    char *dir;
} case_data;

static void parse_match(lora_match *m, const char *s) {
    char err[256];
    int rc = strncmp(s, "re:", 3) == 0 ? lora_match_string(m, s + 3, err, sizeof err)
             : strcmp(s, "all-linear") == 0 ? lora_match_string(m, s, err, sizeof err) : lora_match_list(m, s, err, sizeof err);
    CHECK(rc == 0, "%s: %s", s, err);
}

// Base weights as test_families draws them (activations O(1)); A as PEFT inits it, B ~ N(0, 0.3): a clearly non-zero delta.
static void case_build(case_data *cd, const lcase *lc, uint64_t seed) {
    memset(cd, 0, sizeof *cd);
    cd->lc = lc;
    tl_rng r;
    tl_rng_init(&r, seed);
    model_config_parse(&cd->cfg, lc->json, lc->name);
    param_layout_init(&cd->pl, &cd->cfg);
    param_set_init(&cd->ps, &cd->pl);
    const int plus_one = cd->cfg.norm_plus_one;
    for (int i = 0; i < cd->pl.n_tensors; i++) {
        const param_tensor *t = &cd->pl.tensors[i];
        float *p = cd->ps.data + t->offset;
        if (strstr(t->name, ".bias")) tl_fill_normal(&r, p, t->numel, 0.2f);
        else if (t->ndim == 1) for (int64_t j = 0; j < t->numel; j++) p[j] = (plus_one ? 0.0f : 1.0f) + tl_normal(&r, 0.2f);
        else if (strstr(t->name, "embed_tokens")) tl_fill_normal(&r, p, t->numel, (plus_one ? 0.3f : 2.0f) / sqrtf((float)t->shape[1]));
        else tl_fill_normal(&r, p, t->numel, (strstr(t->name, "lm_head") ? 2.0f : 0.7f) / sqrtf((float)t->shape[1]));
    }
    lora_config lcfg;
    lora_config_default(&lcfg);
    lcfg.rank = lc->rank;
    lcfg.alpha = lc->alpha;
    lcfg.use_rslora = lc->rslora;
    parse_match(&lcfg.target, lc->target);
    if (lc->exclude) parse_match(&lcfg.exclude, lc->exclude);
    lora_layout_init(&cd->ll, &cd->cfg, &lcfg, NULL);
    param_set_init(&cd->ad, &cd->ll.pl);
    lora_init_weights(&cd->ll, &cd->ad, seed);
    for (int i = 0; i < cd->ll.pl.n_tensors; i++) {
        const param_tensor *t = &cd->ll.pl.tensors[i];
        if (strstr(t->name, "lora_B")) tl_fill_normal(&r, cd->ad.data + t->offset, t->numel, 0.3f);
    }
    int64_t T = 0;
    for (int s = 0; s < lc->n_seqs; s++) T += lc->lens[s];
    cd->T = T;
    cd->tokens = malloc((size_t)T * 4); cd->pos = malloc((size_t)T * 4); cd->targets = malloc((size_t)T * 4);
    cd->cu = malloc((size_t)(lc->n_seqs + 1) * 4);
    cd->dlogp = malloc((size_t)T * 4); cd->dent = malloc((size_t)T * 4);
    cd->cu[0] = 0;
    for (int s = 0; s < lc->n_seqs; s++) cd->cu[s + 1] = cd->cu[s] + lc->lens[s];
    const int V = cd->cfg.vocab_size;
    for (int64_t t = 0; t < T; t++) {
        cd->tokens[t] = (int32_t)(tl_uniform(&r, 0, 1) * V) % V;
        cd->dlogp[t] = tl_normal(&r, 1.0f);
        cd->dent[t] = tl_normal(&r, 1.0f);
    }
    for (int s = 0; s < lc->n_seqs; s++)
        for (int32_t t = cd->cu[s]; t < cd->cu[s + 1]; t++) cd->targets[t] = t + 1 < cd->cu[s + 1] ? cd->tokens[t + 1] : -1;
    cd->b = (decoder_batch){.T = T, .n_seqs = lc->n_seqs, .tokens = cd->tokens, .cu_seqlens = cd->cu, .pos = cd->pos};
    decoder_batch_positions(&cd->b);
}

static void case_free(case_data *cd) {
    free(cd->tokens); free(cd->pos); free(cd->targets); free(cd->cu); free(cd->dlogp); free(cd->dent);
    param_set_free(&cd->ad);
    lora_layout_free(&cd->ll);
    param_set_free(&cd->ps);
    param_layout_free(&cd->pl);
    free(cd->dir);
}

static void json_ints(FILE *f, const char *key, const int32_t *x, int64_t n) {
    fprintf(f, "\"%s\": [", key);
    for (int64_t i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", x[i]);
    fprintf(f, "]");
}
static void json_floats(FILE *f, const char *key, const float *x, int64_t n) {
    fprintf(f, "\"%s\": [", key);
    for (int64_t i = 0; i < n; i++) fprintf(f, "%s%.9g", i ? "," : "", x[i]);
    fprintf(f, "]");
}

static void case_write(case_data *cd, const char *root, int idx) {
    char sub[64];
    snprintf(sub, sizeof sub, "case%d", idx);
    cd->dir = rlc_path_join(root, sub);
    checkpoint_save(cd->dir, &cd->ps, ST_F32);
    char *ad = rlc_path_join(cd->dir, "adapter");
    peft_save(ad, &cd->ll, &cd->ad, "tiny-base");
    free(ad);
    char *p = rlc_path_join(cd->dir, "case.json");
    FILE *f = fopen(p, "w");
    CHECK(f, "open %s", p);
    fprintf(f, "{");
    json_ints(f, "tokens", cd->tokens, cd->T); fprintf(f, ",\n");
    json_ints(f, "targets", cd->targets, cd->T); fprintf(f, ",\n");
    json_ints(f, "cu_seqlens", cd->cu, cd->lc->n_seqs + 1); fprintf(f, ",\n");
    json_floats(f, "dlogp", cd->dlogp, cd->T); fprintf(f, ",\n");
    json_floats(f, "dentropy", cd->dent, cd->T); fprintf(f, ",\n");
    fprintf(f, "\"temperature\": %.9g,\n\"check\": {\"r\": %d, \"alpha\": %.9g, \"rslora\": %s},\n\"lora_names\": [",
            cd->lc->temperature, cd->ll.rank, (double)cd->ll.alpha, cd->ll.use_rslora ? "true" : "false");
    for (int i = 0; i < cd->ll.pl.n_tensors; i++) fprintf(f, "%s\"%s\"", i ? "," : "", cd->ll.pl.tensors[i].name);
    fprintf(f, "]}\n");
    fclose(f);
    free(p);
}

typedef struct {
    float *logp, *ent;
    param_set g;   // adapter gradients
} run_out;

// Forward, log-probs and (when ad != NULL) the backward on the adapters; base frozen, no base gradient buffer.
static void run(case_data *cd, float *ad, int lora_on, ckpt_mode mode, run_out *o) {
    // the whole batch at once, as a model with adapters attached runs it: the bitwise checks compare with the base
    backend_ctx be = {.n_threads = 0, .row_split = -1};
    decoder_model m;
    decoder_model_init(&m, &cd->pl, &cd->ps, &be);
    param_set_init(&o->g, &cd->ll.pl);
    if (ad) {
        decoder_set_lora(&m, &cd->ll, ad, o->g.data);
        decoder_lora_enable(&m, lora_on);
    }
    o->logp = malloc((size_t)cd->T * 4);
    o->ent = malloc((size_t)cd->T * 4);
    decoder_acts *a = decoder_acts_new(&cd->cfg, cd->T, mode);
    decoder_forward(&m, a, &cd->b, NULL);
    decoder_logprob(&m, a, &cd->b, cd->targets, cd->lc->temperature, o->logp, o->ent);
    if (ad) decoder_backward(&m, a, &cd->b, cd->targets, cd->lc->temperature, cd->dlogp, cd->dent, NULL);
    decoder_acts_free(a);
    decoder_model_free(&m);
}
static void run_free(run_out *o) {
    free(o->logp);
    free(o->ent);
    param_set_free(&o->g);
}

static int bitwise(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

static void check_case(case_data *cd, int have_torch) {
    const char *nm = cd->lc->name;
    char what[160];
    run_out base, on, off, zero, ck;
    run(cd, NULL, 0, CKPT_NONE, &base);
    run(cd, cd->ad.data, 1, CKPT_NONE, &on);
    run(cd, cd->ad.data, 0, CKPT_NONE, &off);
    // adapters off = the reference policy: bitwise the base model
    TL_CHECK(bitwise(off.logp, base.logp, cd->T) && bitwise(off.ent, base.ent, cd->T), "%s: adapters off == base bitwise", nm);
    // B = 0 (PEFT's init): bitwise the base model; and the adapters do change the model when B != 0
    param_set z;
    param_set_init(&z, &cd->ll.pl);
    lora_init_weights(&cd->ll, &z, 99);
    run(cd, z.data, 1, CKPT_NONE, &zero);
    TL_CHECK(bitwise(zero.logp, base.logp, cd->T) && bitwise(zero.ent, base.ent, cd->T), "%s: B = 0 == base bitwise", nm);
    // at B = 0 only dB is non-zero (dA = s·Bᵀ·G = 0)
    double sa = 0, sb = 0;
    for (int i = 0; i < cd->ll.pl.n_tensors; i++) {
        const param_tensor *t = &cd->ll.pl.tensors[i];
        double *acc = strstr(t->name, "lora_A") ? &sa : &sb;
        for (int64_t j = 0; j < t->numel; j++) *acc += fabs(zero.g.data[t->offset + j]);
    }
    TL_CHECK(sa == 0 && sb > 0, "%s: at B = 0, dA = 0 (%g) and dB != 0 (%g)", nm, sa, sb);
    TL_CHECK(tl_rel_err(on.logp, base.logp, cd->T, NULL) > 1e-3, "%s: the adapters change the log-probs", nm);
    // checkpointed backward recomputes the side path: equal to the plain one (same kernels, same order)
    for (int mode = CKPT_SELECTIVE; mode <= CKPT_FULL; mode++) {
        run(cd, cd->ad.data, 1, (ckpt_mode)mode, &ck);
        snprintf(what, sizeof what, "%s ckpt %s dA/dB", nm, decoder_ckpt_name((ckpt_mode)mode));
        tl_check_close(what, ck.g.data, on.g.data, cd->ll.pl.numel, 1e-6);
        run_free(&ck);
    }
    if (have_torch) {
        char *p = rlc_path_join(cd->dir, "out.bin");
        size_t len = 0;
        float *ref = rlc_file_exists(p) ? (float *)rlc_read_file(p, &len) : NULL;
        TL_CHECK(ref && len == (size_t)(2 * cd->T + cd->ll.pl.numel) * 4, "%s: torch output present (%zu bytes)", nm, len);
        if (ref && len == (size_t)(2 * cd->T + cd->ll.pl.numel) * 4) {
            snprintf(what, sizeof what, "%s logp vs torch", nm);
            tl_check_close(what, on.logp, ref, cd->T, 1e-4);   // fp32 forward vs float64
            snprintf(what, sizeof what, "%s entropy vs torch", nm);
            tl_check_close(what, on.ent, ref + cd->T, cd->T, 1e-4);
            int bad = 0;
            for (int i = 0; i < cd->ll.pl.n_tensors; i++) {   // per tensor: each gradient on its own scale
                const param_tensor *t = &cd->ll.pl.tensors[i];
                snprintf(what, sizeof what, "%s %s grad vs torch", nm, t->name);
                bad += !tl_check_close(what, on.g.data + t->offset, ref + 2 * cd->T + t->offset, t->numel, 1e-4);
            }
            (void)bad;
        }
        free(ref);
        free(p);
        // (the torch side also checked rlc's adapter folder as PEFT reads it: names, shapes, dtype, config fields)
    }
    // PEFT round trip: the same layout and bitwise the same weights
    char *ad = rlc_path_join(cd->dir, "adapter");
    lora_layout ll2;
    param_set ad2;
    peft_load(ad, &cd->cfg, &ll2, &ad2);
    int same = ll2.pl.numel == cd->ll.pl.numel && ll2.rank == cd->ll.rank && ll2.scale == cd->ll.scale && ll2.use_rslora == cd->ll.use_rslora;
    for (int i = 0; same && i < cd->ll.L * LORA_NPROJ; i++) same = ll2.a_off[i] == cd->ll.a_off[i] && ll2.b_off[i] == cd->ll.b_off[i];
    TL_CHECK(same && bitwise(ad2.data, cd->ad.data, cd->ll.pl.numel), "%s: PEFT folder round trip is bitwise", nm);
    param_set_free(&ad2);
    lora_layout_free(&ll2);
    free(ad);
    param_set_free(&z);
    run_free(&base); run_free(&on); run_free(&off); run_free(&zero);
}

// A bf16 frozen base widened per block (param_bf16) computes exactly what the fp32 model holding the same bf16-rounded
// values computes: log-probs, entropy and dA/dB bitwise, in every checkpointing mode, with half the base's bytes.
static void test_bf16_base(case_data *cd) {
    const char *nm = cd->lc->name;
    param_set r;
    param_set_init(&r, &cd->pl);
    for (int64_t i = 0; i < cd->pl.numel; i++) r.data[i] = st_bf16_to_f32(st_f32_to_bf16(cd->ps.data[i]));
    param_bf16 pb;
    param_bf16_init(&pb, &cd->ps);
    for (int mode = CKPT_NONE; mode <= CKPT_FULL; mode++) {
        run_out o[2];
        for (int k = 0; k < 2; k++) {
            decoder_model m;
            decoder_model_init(&m, &cd->pl, k ? NULL : &r, NULL);
            if (k) { m.get_block = param_bf16_get_block; m.get_block_ctx = &pb; }
            param_set_init(&o[k].g, &cd->ll.pl);
            decoder_set_lora(&m, &cd->ll, cd->ad.data, o[k].g.data);
            o[k].logp = malloc((size_t)cd->T * 4);
            o[k].ent = malloc((size_t)cd->T * 4);
            decoder_acts *a = decoder_acts_new(&cd->cfg, cd->T, (ckpt_mode)mode);
            decoder_forward(&m, a, &cd->b, NULL);
            decoder_logprob(&m, a, &cd->b, cd->targets, cd->lc->temperature, o[k].logp, o[k].ent);
            decoder_backward(&m, a, &cd->b, cd->targets, cd->lc->temperature, cd->dlogp, cd->dent, NULL);
            // the size query counts what the acts allocated on first use: the side path's u, du, the head's g, ge
            const int64_t want = decoder_acts_bytes_for_lora(&cd->cfg, cd->T, (ckpt_mode)mode, cd->ll.rank);
            if (k == 0)
                TL_CHECK(decoder_acts_bytes(a) == want && want > decoder_acts_bytes_for(&cd->cfg, cd->T, (ckpt_mode)mode),
                         "%s: acts bytes with adapters (ckpt %s): %lld held, %lld from the size query", nm,
                         decoder_ckpt_name((ckpt_mode)mode), (long long)decoder_acts_bytes(a), (long long)want);
            decoder_acts_free(a);
            decoder_model_free(&m);
        }
        TL_CHECK(bitwise(o[0].logp, o[1].logp, cd->T) && bitwise(o[0].ent, o[1].ent, cd->T) &&
                     bitwise(o[0].g.data, o[1].g.data, cd->ll.pl.numel),
                 "%s: bf16 base widened per block == fp32 model of the rounded values, bitwise (ckpt %s)", nm,
                 decoder_ckpt_name((ckpt_mode)mode));
        run_free(&o[0]);
        run_free(&o[1]);
    }
    // bf16 everywhere + fp32 of the embedding block, the final block and one layer (tiny models: about the fp32 size;
    // Qwen3-0.6B: 0.79 of it, Qwen3-4B with its untied head: 0.72)
    const param_layout *pl = &cd->pl;
    const int64_t want = pl->numel * 2 + 4 * (pl->block_off[1] + (pl->numel - pl->block_off[pl->n_blocks - 1]) + pl->layer_numel);
    TL_CHECK(param_bf16_bytes(&pb) == want, "%s: the bf16 base holds %lld bytes (bf16 + 3 widened blocks = %lld)", nm,
             (long long)param_bf16_bytes(&pb), (long long)want);
    param_bf16_free(&pb);
    param_set_free(&r);
}

// The frozen head's update path (the forward saves d logp / d hidden and d entropy / d hidden; the backward applies
// them) equals the recomputing head backward seeding decoder_backward_hidden (the path a trained head takes): dA and
// dB at 1e-5 (the same fp32 terms summed in another order in the head, then the same layers), in every checkpointing
// mode; with the entropy computed and its gradient on, without either, and with an entropy gradient the forward
// saved nothing for (it goes through the recomputing backward).
static void test_head_paths(case_data *cd) {
    const char *nm = cd->lc->name;
    const float temp = cd->lc->temperature, cap = cd->cfg.final_logit_softcapping;
    const int64_t T = cd->T, H = cd->cfg.hidden_size, V = cd->cfg.vocab_size;
    static const char *VAR[3] = {"no entropy", "entropy + its gradient", "entropy gradient without the forward's entropy"};
    float *lp = malloc((size_t)T * 4), *en = malloc((size_t)T * 4), *ls = malloc((size_t)T * 4);
    float *hid = malloc((size_t)(T * H) * 4), *dh = malloc((size_t)(T * H) * 4);
    for (int mode = CKPT_NONE; mode <= CKPT_FULL; mode++)
        for (int v = 0; v < 3; v++) {
            const int fwd_ent = v == 1;
            const float *dent = v ? cd->dent : NULL;
            param_set g[2];
            for (int k = 0; k < 2; k++) {
                decoder_model m;
                decoder_model_init(&m, &cd->pl, &cd->ps, NULL);
                param_set_init(&g[k], &cd->ll.pl);
                decoder_set_lora(&m, &cd->ll, cd->ad.data, g[k].data);
                decoder_acts *a = decoder_acts_new(&cd->cfg, T, (ckpt_mode)mode);
                decoder_forward(&m, a, &cd->b, hid);
                if (k == 0) {   // the frozen head's path
                    decoder_logprob(&m, a, &cd->b, cd->targets, temp, lp, fwd_ent ? en : NULL);
                    decoder_backward(&m, a, &cd->b, cd->targets, temp, cd->dlogp, dent, NULL);
                } else {        // the recomputing head backward, then the layers from d(hidden)
                    logprob_head_forward_cap(lp, fwd_ent ? en : NULL, ls, hid, decoder_lm_head(&m), cd->targets, T, H, V, temp, cap);
                    memset(dh, 0, (size_t)(T * H) * 4);
                    logprob_head_backward_cap(dh, NULL, cd->dlogp, dent, fwd_ent ? en : NULL, hid, decoder_lm_head(&m), cd->targets,
                                              ls, T, H, V, temp, cap);
                    decoder_backward_hidden(&m, a, &cd->b, dh, NULL);
                }
                decoder_acts_free(a);
                decoder_model_free(&m);
            }
            char what[200];
            snprintf(what, sizeof what, "%s ckpt %s, %s: dA/dB of the frozen head's path vs the recomputing one", nm,
                     decoder_ckpt_name((ckpt_mode)mode), VAR[v]);
            tl_check_close(what, g[0].data, g[1].data, cd->ll.pl.numel, 1e-5);
            param_set_free(&g[0]);
            param_set_free(&g[1]);
        }
    free(lp); free(en); free(ls); free(hid); free(dh);
}

static void write_text(const char *dir, const char *name, const char *s) {
    char *p = rlc_path_join(dir, name);
    CHECK(rlc_write_file_atomic(p, s, strlen(s)) == 0, "write %s", p);
    free(p);
}

static void test_torch_written(const char *root) {
    char *dir = rlc_path_join(root, "torch_adapter"), *cfgp = rlc_path_join(root, "tw_config.json"),
         *sums = rlc_path_join(root, "tw_sums.txt");
    char *acfg = rlc_path_join(dir, "adapter_config.json");
    int rc = rlc_file_exists(acfg) ? 0 : 1;   // written by the torch batch in main
    free(acfg);
    TL_CHECK(rc == 0, "torch writes a PEFT adapter");
    if (rc == 0) {
        model_config cfg;
        model_config_parse(&cfg, CASES[2].json, "llama");
        lora_layout ll;
        param_set ad;
        peft_load(dir, &cfg, &ll, &ad);
        TL_CHECK(ll.rank == 4 && ll.alpha == 8.0f && ll.proj_mask == ((1u << LORA_Q) | (1u << LORA_V) | (1u << LORA_DOWN)),
                 "torch adapter: r 4, alpha 8, q/v/down");
        FILE *f = fopen(sums, "r");
        char name[256];
        double want;
        int checked = 0, badn = 0;
        while (f && fscanf(f, "%255s %lf", name, &want) == 2) {
            int i = param_layout_find(&ll.pl, name);
            if (i < 0) { badn++; continue; }
            double s = 0;
            for (int64_t j = 0; j < ll.pl.tensors[i].numel; j++) s += ad.data[ll.pl.tensors[i].offset + j];
            if (fabs(s - want) > 1e-5 * (1 + fabs(want))) badn++;
            checked++;
        }
        if (f) fclose(f);
        TL_CHECK(badn == 0 && checked == ll.pl.n_tensors, "torch adapter: %d tensors checked of %d, %d differ", checked, ll.pl.n_tensors, badn);
        param_set_free(&ad);
        lora_layout_free(&ll);
    }
    free(dir); free(cfgp); free(sums);
}

// The rollout engine with the unmerged side path samples the trained policy: its log-probs of the sampled tokens equal
// the trainer's forward with adapters (1e-4: rowgemm and OpenBLAS sum in different orders); lora.merge=true decodes
// from W + s·B·A with the same result (1e-4); adapters off equals a model without adapters, bitwise.
// ps: the fp32 base, or pb: a bf16 base the engine reads in place (param_bf16); w16: rollout_config.weights_bf16;
// only: -1 both prompts, else that prompt alone.
static void rollout_run_base(case_data *cd, param_set *ps, param_bf16 *pb, int w16, float *ad, int on, int merge, int only,
                             rollout_result *res) {
    decoder_model m;
    decoder_model_init(&m, &cd->pl, pb ? NULL : ps, NULL);
    if (pb) { m.get_block = param_bf16_get_block; m.get_block_ctx = pb; }
    if (ad) {
        decoder_set_lora(&m, &cd->ll, ad, NULL);
        decoder_lora_enable(&m, on);
    }
    rollout_config rc;
    rollout_config_default(&rc);
    rc.n = 2;
    rc.sampling.temperature = 1.0f;
    rc.sampling.do_sample = 1;
    rc.max_new_tokens = 12;
    rc.seed = 7;
    rc.ignore_eos = 1;
    rc.kv_cache_bytes = 16 << 20;
    rc.lora_merge = merge;
    rc.weights_bf16 = w16;
    rollout_engine *e = rollout_engine_new(&m, &rc);
    static const int32_t p0[] = {3, 9, 27, 81, 5}, p1[] = {100, 7};
    rollout_prompt pr[2] = {{p0, 5, 0}, {p1, 2, 1}};
    if (only >= 0) rollout_generate(e, pr + only, 1, res);
    else rollout_generate(e, pr, 2, res);
    rollout_engine_free(e);
    decoder_model_free(&m);
}
static void rollout_run(case_data *cd, float *ad, int on, int merge, rollout_result *res) {
    rollout_run_base(cd, &cd->ps, NULL, 0, ad, on, merge, -1, res);
}

// n samples of a and b (from sample a0, b0 on) hold the same tokens and log-probs, bitwise.
static int same_samples(const rollout_result *a, int a0, const rollout_result *b, int b0, int n) {
    int same = 1;
    for (int i = 0; i < n; i++) {
        const rollout_sample *x = &a->samples[a0 + i], *y = &b->samples[b0 + i];
        same &= x->len == y->len && memcmp(x->ids, y->ids, (size_t)x->len * 4) == 0 && bitwise(x->logprobs, y->logprobs, x->len);
    }
    return same;
}

// A frozen bf16 base (param_bf16) is read by the engine in place: what it samples, and the log-probs, are bitwise those
// of the fp32 model holding the rounded values, with the side path, with adapters off, with merged weights and with
// weights_bf16; a prompt decoded alone samples bitwise what it samples next to another (the fused side path keeps
// rows batch invariant).
static void test_rollout_bf16_base(void) {
    case_data cd;
    case_build(&cd, &CASES[2], 78);   // llama with biases, rsLoRA, q/v/o/down adapted
    param_set r;
    param_set_init(&r, &cd.pl);
    for (int64_t i = 0; i < cd.pl.numel; i++) r.data[i] = st_bf16_to_f32(st_f32_to_bf16(cd.ps.data[i]));
    param_bf16 pb;
    param_bf16_init(&pb, &cd.ps);
    static const char *what[4] = {"side path", "adapters off", "merged", "side path, weights_bf16"};
    for (int k = 0; k < 4; k++) {
        const int on = k != 1, merge = k == 2, w16 = k == 3;
        rollout_result a, b;
        rollout_run_base(&cd, &r, NULL, w16, cd.ad.data, on, merge, -1, &a);
        rollout_run_base(&cd, NULL, &pb, w16, cd.ad.data, on, merge, -1, &b);
        TL_CHECK(a.n_samples == b.n_samples && same_samples(&a, 0, &b, 0, a.n_samples),
                 "rollout, %s: bf16 base read in place == fp32 model of the rounded values, bitwise", what[k]);
        if (k == 0) {
            rollout_result one;
            rollout_run_base(&cd, NULL, &pb, 0, cd.ad.data, 1, 0, 1, &one);   // prompt 1 alone: its 2 samples
            TL_CHECK(same_samples(&one, 0, &b, 2, 2), "rollout, side path on a bf16 base: a prompt alone == next to another, bitwise");
            rollout_result_free(&one);
        }
        rollout_result_free(&a);
        rollout_result_free(&b);
    }
    param_bf16_free(&pb);
    param_set_free(&r);
    case_free(&cd);
}

static void test_rollout(void) {
    case_data cd;
    case_build(&cd, &CASES[2], 77);   // llama with biases, rsLoRA, q/v/o/down adapted
    rollout_result on, merged, off, plain;
    rollout_run(&cd, cd.ad.data, 1, 0, &on);
    rollout_run(&cd, cd.ad.data, 1, 1, &merged);
    rollout_run(&cd, cd.ad.data, 0, 0, &off);
    rollout_run(&cd, NULL, 0, 0, &plain);
    int same_off = 1;
    for (int i = 0; i < plain.n_samples; i++)
        same_off &= off.samples[i].len == plain.samples[i].len &&
                    memcmp(off.samples[i].ids, plain.samples[i].ids, (size_t)plain.samples[i].len * 4) == 0 &&
                    bitwise(off.samples[i].logprobs, plain.samples[i].logprobs, plain.samples[i].len);
    TL_CHECK(same_off, "rollout: adapters off == no adapters, bitwise");
    decoder_model m;
    decoder_model_init(&m, &cd.pl, &cd.ps, NULL);
    decoder_set_lora(&m, &cd.ll, cd.ad.data, NULL);
    int differs = 0;
    for (int i = 0; i < on.n_samples; i++) {
        const rollout_sample *sm = &on.samples[i];
        const int32_t *pp = sm->prompt == 0 ? (const int32_t[]){3, 9, 27, 81, 5} : (const int32_t[]){100, 7};
        const int64_t P = sm->prompt == 0 ? 5 : 2, T = P + sm->len;
        int32_t *tok = malloc((size_t)T * 4), *tgt = malloc((size_t)T * 4), *pos = malloc((size_t)T * 4), cu[2] = {0, (int32_t)T};
        memcpy(tok, pp, (size_t)P * 4);
        memcpy(tok + P, sm->ids, (size_t)sm->len * 4);
        for (int64_t t = 0; t < T; t++) tgt[t] = t + 1 < T ? tok[t + 1] : -1;
        decoder_batch b = {.T = T, .n_seqs = 1, .tokens = tok, .cu_seqlens = cu, .pos = pos};
        decoder_batch_positions(&b);
        float *lp = malloc((size_t)T * 4);
        decoder_forward(&m, NULL, &b, NULL);
        decoder_logprob(&m, NULL, &b, tgt, 1.0f, lp, NULL);
        char what[96];
        snprintf(what, sizeof what, "rollout sample %d log-probs vs the trainer's forward", i);
        tl_check_close(what, sm->logprobs, lp + P - 1, sm->len, 1e-4);
        const rollout_sample *mg = &merged.samples[i];
        if (mg->len == sm->len && memcmp(mg->ids, sm->ids, (size_t)sm->len * 4) == 0) {
            snprintf(what, sizeof what, "rollout sample %d: merged weights vs side path", i);
            tl_check_close(what, mg->logprobs, sm->logprobs, sm->len, 1e-4);
        } else {
            TL_CHECK(0, "rollout sample %d: merged weights sample other tokens than the side path", i);
        }
        differs |= memcmp(sm->ids, plain.samples[i].ids, (size_t)sm->len * 4) != 0;
        free(tok); free(tgt); free(pos); free(lp);
    }
    TL_CHECK(differs, "rollout: the adapters change what is sampled");
    decoder_model_free(&m);
    rollout_result_free(&on); rollout_result_free(&merged); rollout_result_free(&off); rollout_result_free(&plain);
    case_free(&cd);
}

// ---- the CLI: merge-lora against torch's merge, logprob and generate with --adapter --------------------------

static void test_cli(case_data *cd, const run_out *on, const char *root) {
    const char *rlc = tl_rlc_bin();
    if (!rlc_file_exists(rlc)) { tl_skip("CLI: %s not built", rlc); return; }
    write_text(cd->dir, "generation_config.json", "{\"eos_token_id\": 1}\n");   // copied as it is
    char *ad = rlc_path_join(cd->dir, "adapter"), *mf = rlc_path_join(root, "merged_f32"), *mb = rlc_path_join(root, "merged_bf16"),
         *tm = rlc_path_join(root, "merged_torch");
    int rc = tl_system("%s merge-lora --model %s --adapter %s --out %s --dtype f32 2>/dev/null", rlc, cd->dir, ad, mf);
    TL_CHECK(rc == 0, "rlc merge-lora --dtype f32");
    rc |= tl_system("%s merge-lora --model %s --adapter %s --out %s --dtype bf16 2>/dev/null", rlc, cd->dir, ad, mb);
    TL_CHECK(rc == 0, "rlc merge-lora --dtype bf16");
    char *tj = rlc_path_join(mf, "generation_config.json");
    TL_CHECK(rlc_file_exists(tj), "merge-lora copies the tokenizer and generation config files");
    free(tj);
    char *tms = rlc_path_join(tm, "model.safetensors");
    const int have_tm = rlc_file_exists(tms);   // written by the torch batch in main
    free(tms);
    if (rc == 0 && have_tm) {
        tl_system("cp %s/config.json %s/", cd->dir, tm);
        model_config c1, c2, c3;
        param_layout p1, p2, p3;
        param_set s1, s2, s3;
        checkpoint_load(mf, &c1, &p1, &s1);
        checkpoint_load(tm, &c2, &p2, &s2);
        checkpoint_load(mb, &c3, &p3, &s3);
        int bad = 0;
        for (int i = 0; i < p1.n_tensors; i++) {   // fp32 merge: equal to torch's up to summation order
            const param_tensor *t = &p1.tensors[i];
            char what[160];
            snprintf(what, sizeof what, "merge-lora %s vs torch merge", t->name);
            bad += !tl_check_close(what, s1.data + t->offset, s2.data + t->offset, t->numel, 1e-6);
        }
        TL_CHECK(bad == 0, "merge-lora f32 equals torch's merge tensor by tensor (%d tensors)", p1.n_tensors);
        int exact = 1;   // the bf16 file is the f32 merge rounded to nearest even
        for (int64_t j = 0; j < p1.numel; j++) exact &= s3.data[j] == st_bf16_to_f32(st_f32_to_bf16(s1.data[j]));
        TL_CHECK(exact && strcmp(c3.torch_dtype, "bfloat16") == 0, "merge-lora bf16 = the fp32 merge rounded (RNE), torch_dtype bfloat16");
        // the merged checkpoint's log-probs equal the adapter's (fp32 rounding of W + s·B·A only)
        decoder_model m;
        decoder_model_init(&m, &p1, &s1, NULL);
        float *lp = malloc((size_t)cd->T * 4);
        decoder_forward(&m, NULL, &cd->b, NULL);
        decoder_logprob(&m, NULL, &cd->b, cd->targets, cd->lc->temperature, lp, NULL);
        tl_check_close("merged checkpoint log-probs vs the unmerged adapter", lp, on->logp, cd->T, 1e-5);
        free(lp);
        decoder_model_free(&m);
        param_set_free(&s1); param_set_free(&s2); param_set_free(&s3);
        param_layout_free(&p1); param_layout_free(&p2); param_layout_free(&p3);
    }
    // rlc logprob --adapter: one line per sequence, the same numbers as the decoder with adapters
    char *in = rlc_path_join(root, "seqs.jsonl"), *outp = rlc_path_join(root, "lp.jsonl");
    FILE *f = fopen(in, "w");
    for (int s = 0; s < cd->lc->n_seqs; s++) {
        fprintf(f, "{\"input_ids\": [");
        for (int32_t t = cd->cu[s]; t < cd->cu[s + 1]; t++) fprintf(f, "%s%d", t > cd->cu[s] ? "," : "", cd->tokens[t]);
        fprintf(f, "]}\n");
    }
    fclose(f);
    rc = tl_system("%s logprob --model %s --adapter %s --data %s --out %s --temperature %g 2>/dev/null", rlc, cd->dir, ad, in, outp,
                   (double)cd->lc->temperature);
    TL_CHECK(rc == 0, "rlc logprob --adapter");
    if (rc == 0) {
        size_t len;
        char *txt = rlc_read_file(outp, &len);
        float *got = calloc((size_t)cd->T, 4), *want = calloc((size_t)cd->T, 4);
        int64_t n = 0;
        char *line = txt;
        for (int s = 0; s < cd->lc->n_seqs && line; s++) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = 0;
            cJSON *o = cJSON_Parse(line);
            const cJSON *lpa = o ? cJSON_GetObjectItem(o, "logprobs") : NULL, *x;
            int64_t k = 0;
            cJSON_ArrayForEach(x, lpa) {
                got[n] = (float)x->valuedouble;
                want[n++] = on->logp[cd->cu[s] + k++];
            }
            cJSON_Delete(o);
            line = nl ? nl + 1 : NULL;
        }
        TL_CHECK(n == cd->T - cd->lc->n_seqs, "logprob --adapter: %lld values", (long long)n);
        tl_check_close("rlc logprob --adapter vs the decoder with adapters", got, want, n, 1e-6);   // same kernels; %.9g text
        free(got); free(want); free(txt);
    }
    rc = tl_system("%s generate --model %s --adapter %s --prompts %s --out %s --max-new-tokens 4 --ignore-eos --kv-cache-bytes 16777216 2>/dev/null", rlc,
                   cd->dir, ad, in, outp);
    TL_CHECK(rc == 0, "rlc generate --adapter");
    rc = tl_system("%s generate --model %s --adapter %s --merge-adapter --prompts %s --out %s --max-new-tokens 4 --ignore-eos --kv-cache-bytes 16777216 2>/dev/null",
                   rlc, cd->dir, ad, in, outp);
    TL_CHECK(rc == 0, "rlc generate --adapter --merge-adapter");
    rc = tl_system("%s logprob --model %s --adapter %s/nope --data %s --out %s 2>&1 | grep -q 'adapter_config.json: missing'", rlc,
                   cd->dir, ad, in, outp);
    TL_CHECK(rc == 0, "rlc logprob with a missing adapter folder: one-line error");
    free(in); free(outp); free(ad); free(mf); free(mb); free(tm);
}

// ---- SFT on the adapters: the engine's gradients and AdamW run over the adapter set; the base never changes ----

static void test_sft(case_data *cd, const char *root) {
    param_set base0;
    param_set_init(&base0, &cd->pl);
    memcpy(base0.data, cd->ps.data, (size_t)cd->pl.numel * 4);
    param_set ad;
    param_set_init(&ad, &cd->ll.pl);
    lora_init_weights(&cd->ll, &ad, 5);   // B = 0: training starts at the base model
    decoder_model m;
    decoder_model_init(&m, &cd->pl, &cd->ps, NULL);
    decoder_set_lora(&m, &cd->ll, ad.data, NULL);
    sft_dataset d;
    sft_dataset_init(&d);
    uint8_t *mask = malloc((size_t)cd->T);
    for (int s = 0; s < cd->lc->n_seqs; s++) {
        const int64_t n = cd->cu[s + 1] - cd->cu[s];
        for (int64_t t = 0; t < n; t++) mask[t] = t >= n / 2;
        sft_dataset_add(&d, cd->tokens + cd->cu[s], mask, n, cd->cfg.vocab_size, "test");
    }
    sft_config c;
    sft_config_default(&c);
    c.batch_size = d.n;
    c.steps = 8;
    c.lr = 3e-3;
    c.shuffle = 0;
    sft_summary sum;
    engine e;
    sft_train(&m, &d, &c, &sum, &e);
    TL_CHECK(e.grads.layout == &cd->ll.pl && e.opt.pl == &cd->ll.pl, "SFT with LoRA: gradients and AdamW over the adapter layout");
    TL_CHECK(bitwise(cd->ps.data, base0.data, cd->pl.numel), "SFT with LoRA: the frozen base is unchanged, bitwise");
    TL_CHECK(sum.last_loss < sum.first_loss - 0.05, "SFT with LoRA: loss %.4f -> %.4f", sum.first_loss, sum.last_loss);
    double bsum = 0;
    for (int64_t i = 0; i < cd->ll.pl.numel; i++) bsum += fabs(ad.data[i]);
    TL_CHECK(bsum > 0, "SFT with LoRA: the adapters moved");
    engine_free(&e);
    // the CLI: rlc sft --lora-rank writes a PEFT folder that logprob --adapter reads
    const char *rlc = tl_rlc_bin();
    if (rlc_file_exists(rlc)) {
        char *data = rlc_path_join(root, "sft.jsonl"), *out = rlc_path_join(root, "sft_adapter");
        FILE *f = fopen(data, "w");
        for (int s = 0; s < d.n; s++) {
            fprintf(f, "{\"input_ids\": [");
            for (int64_t t = d.off[s]; t < d.off[s + 1]; t++) fprintf(f, "%s%d", t > d.off[s] ? "," : "", d.ids[t]);
            fprintf(f, "], \"loss_mask\": [");
            for (int64_t t = d.off[s]; t < d.off[s + 1]; t++) fprintf(f, "%s%d", t > d.off[s] ? "," : "", d.mask[t]);
            fprintf(f, "]}\n");
        }
        fclose(f);
        int rc = tl_system("%s sft --model %s --data %s --out %s --lora-rank 4 --lora-alpha 8 --target-modules q_proj,v_proj "
                           "--steps 3 --batch-size %d --lr 1e-3 --threads 1 > /dev/null 2>&1", rlc, cd->dir, data, out, d.n);
        TL_CHECK(rc == 0, "rlc sft --lora-rank");
        if (rc == 0) {
            lora_layout ll;
            param_set a2;
            peft_load(out, &cd->cfg, &ll, &a2);
            TL_CHECK(ll.rank == 4 && ll.alpha == 8 && ll.proj_mask == ((1u << LORA_Q) | (1u << LORA_V)),
                     "rlc sft --lora-rank writes the PEFT folder (r 4, alpha 8, q/v)");
            param_set_free(&a2);
            lora_layout_free(&ll);
        }
        rc = tl_system("%s sft --model %s --data %s --out %s --lora-rank 2 --base-dtype fp32 --steps 1 --batch-size %d --threads 1 "
                       "2>/dev/null | grep -q 'frozen base fp32'", rlc, cd->dir, data, out, d.n);
        TL_CHECK(rc == 0, "rlc sft --lora-rank --base-dtype fp32");
        rc = tl_system("%s sft --model %s --data %s --out %s --lora-rank 4 --target-modules lm_head --steps 1 --batch-size %d "
                       "2>&1 | grep -q -- \"--target-modules: 'lm_head' matches no module\"", rlc, cd->dir, data, out, d.n);
        TL_CHECK(rc == 0, "rlc sft --target-modules lm_head: one-line error naming the option");
        free(data);
        free(out);
    }
    free(mask);
    sft_dataset_free(&d);
    decoder_model_free(&m);
    param_set_free(&ad);
    memcpy(cd->ps.data, base0.data, (size_t)cd->pl.numel * 4);
    param_set_free(&base0);
}

int main(void) {
    int have_torch = tl_have_torch();
    if (!have_torch) tl_skip("the torch comparisons: torch not importable by /usr/bin/python3");
    char *root = tl_tmpdir("lora");
    case_data cds[N_CASES];
    for (int i = 0; i < N_CASES; i++) {
        case_build(&cds[i], &CASES[i], 100 + (uint64_t)i);
        case_write(&cds[i], root, i);
    }
    if (have_torch) {   // every torch job in one process (its start-up dominates on a loaded machine)
        char *jobs = rlc_path_join(root, "torch_jobs.txt");
        FILE *f = fopen(jobs, "w");
        CHECK(f, "open %s", jobs);
        fprintf(f, "case");
        for (int i = 0; i < N_CASES; i++) fprintf(f, " %s", cds[i].dir);
        write_text(root, "tw_config.json", CASES[2].json);
        fprintf(f, "\nwrite %s/torch_adapter %s/tw_config.json 4 8 11\n", root, root);        // test_torch_written
        fprintf(f, "merge %s %s/adapter %s/merged_torch\n", cds[2].dir, cds[2].dir, root);      // test_cli
        fclose(f);
        int rc = tl_system("/usr/bin/python3 tests/py/lora_ref.py batch %s > %s/tw_sums.txt", jobs, root);
        TL_CHECK(rc == 0, "torch reference ran and its reader accepts every adapter folder rlc wrote (rc %d)", rc);
        free(jobs);
    }
    for (int i = 0; i < N_CASES; i++) {
        check_case(&cds[i], have_torch);
        test_head_paths(&cds[i]);
        if (i == 0 || i == 1 || i == 5) test_bf16_base(&cds[i]);
        if (i == 2) {   // llama with biases and an untied head
            run_out on;
            run(&cds[i], cds[i].ad.data, 1, CKPT_NONE, &on);
            test_cli(&cds[i], &on, root);
            test_sft(&cds[i], root);
            run_free(&on);
        }
        case_free(&cds[i]);
    }
    test_rollout();
    test_rollout_bf16_base();
    if (have_torch) test_torch_written(root);
    else tl_skip("torch-written adapter: torch not importable");
    if (!getenv("RLC_KEEP")) tl_system("rm -rf %s", root);
    free(root);
    return tl_summary();
}
