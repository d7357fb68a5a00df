// test_families.c: every decoder family (qwen3, qwen2, llama, mistral, gemma3_text) at random small configs
// against the PyTorch reference written from the spec (tests/py/families_ref.py, float64 autograd): logits,
// log-probs, entropy and every parameter gradient (biases, q/k norms, Gemma's four norms included). Then, per
// family: checkpoint modes agree, the inference path and the rollout's per-layer pieces equal the training
// forward, greedy rollout decode equals an uncached decode token for token (within the window, and far past a
// window of 8 for the sliding families), and checkpoints cross between rlc and a torch-side reader/writer with
// the HF names. Errors: a bias tensor missing or extra, a wrong shape.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/common.h"
#include "io/checkpoint.h"
#include "io_testutil.h"
#include "model/decoder.h"
#include "rollout/engine.h"
#include "model_case.h"
#include "testlib.h"

typedef struct {
    const char *name;
    const char *json;        // config.json (the sizes are small; the rest is the family's own form)
    float temperature;
    int n_seqs;
    int lens[8];
} fcase;

// GQA 1..4, tied and untied, odd vocabularies, lengths 1..300, 3..8 sequences, temperatures 1 and 0.7; every
// RoPE type, sliding windows shorter than the sequences (crossing the 64-token blocks), v4 and v5 config forms.
static const fcase CASES[] = {
    {"qwen2_bias_tied", "{\"model_type\":\"qwen2\",\"vocab_size\":517,\"hidden_size\":64,\"intermediate_size\":96,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"max_position_embeddings\":512,"
     "\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"rope_scaling\":null,\"tie_word_embeddings\":true,"
     "\"use_sliding_window\":false,\"sliding_window\":32768,\"max_window_layers\":21}",
     0.7f, 4, {1, 7, 64, 300}},
    {"llama3_rope_biases_untied", "{\"model_type\":\"llama\",\"vocab_size\":1001,\"hidden_size\":64,\"intermediate_size\":112,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":1,\"head_dim\":32,"
     "\"max_position_embeddings\":512,\"rms_norm_eps\":1e-5,\"rope_theta\":500000.0,\"rope_scaling\":{\"factor\":32.0,"
     "\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,\"original_max_position_embeddings\":64,\"rope_type\":\"llama3\"},"
     "\"tie_word_embeddings\":false,\"attention_bias\":true,\"mlp_bias\":true,\"pretraining_tp\":1}",
     1.0f, 5, {33, 1, 130, 7, 64}},
    {"mistral_sliding_v5_linear", "{\"model_type\":\"mistral\",\"vocab_size\":333,\"hidden_size\":48,\"intermediate_size\":80,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":6,\"num_key_value_heads\":2,\"head_dim\":16,"
     "\"max_position_embeddings\":1024,\"rms_norm_eps\":1e-5,\"rope_parameters\":{\"rope_type\":\"linear\",\"factor\":2.0,"
     "\"rope_theta\":10000.0},\"sliding_window\":40,\"tie_word_embeddings\":false}",
     0.7f, 3, {300, 5, 77}},
    {"gemma3_sandwich_window_cap", "{\"model_type\":\"gemma3_text\",\"vocab_size\":401,\"hidden_size\":64,"
     "\"intermediate_size\":96,\"num_hidden_layers\":3,\"num_attention_heads\":4,\"num_key_value_heads\":1,\"head_dim\":32,"
     "\"max_position_embeddings\":512,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"rope_local_base_freq\":10000.0,"
     "\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":4.0},\"sliding_window\":37,\"sliding_window_pattern\":3,"
     "\"query_pre_attn_scalar\":24,\"final_logit_softcapping\":5.0,\"attn_logit_softcapping\":null,"
     "\"hidden_activation\":\"gelu_pytorch_tanh\",\"tie_word_embeddings\":true,\"bos_token_id\":2,\"eos_token_id\":[1,106]}",
     1.0f, 6, {300, 7, 1, 64, 5, 90}},
    {"gemma3_v5_layer_types_untied", "{\"model_type\":\"gemma3_text\",\"vocab_size\":257,\"hidden_size\":48,"
     "\"intermediate_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":2,\"head_dim\":16,"
     "\"max_position_embeddings\":512,\"rms_norm_eps\":1e-6,\"layer_types\":[\"full_attention\",\"sliding_attention\"],"
     "\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"default\",\"rope_theta\":1000000.0},"
     "\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":10000.0}},\"sliding_window\":20,"
     "\"query_pre_attn_scalar\":16,\"tie_word_embeddings\":false}",
     0.7f, 3, {100, 19, 45}},
    {"qwen3_yarn_sliding_bias", "{\"model_type\":\"qwen3\",\"vocab_size\":211,\"hidden_size\":64,\"intermediate_size\":96,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":8,\"num_key_value_heads\":2,\"head_dim\":16,"
     "\"max_position_embeddings\":512,\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"rope_scaling\":{\"type\":\"yarn\","
     "\"factor\":4.0,\"original_max_position_embeddings\":128},\"tie_word_embeddings\":false,\"attention_bias\":true,"
     "\"use_sliding_window\":true,\"sliding_window\":50,\"max_window_layers\":1}",
     1.0f, 8, {1, 7, 20, 64, 3, 1, 140, 7}},
    {"llama_smollm2_dynamic", "{\"model_type\":\"llama\",\"vocab_size\":49,\"hidden_size\":48,\"intermediate_size\":64,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":6,\"num_key_value_heads\":2,\"max_position_embeddings\":512,"
     "\"rms_norm_eps\":1e-5,\"rope_theta\":100000.0,\"rope_scaling\":{\"rope_type\":\"dynamic\",\"factor\":2.0},"
     "\"tie_word_embeddings\":true,\"rope_interleaved\":false,\"is_llama_config\":true,\"bos_token_id\":1,\"eos_token_id\":2}",
     0.7f, 3, {2, 200, 31}},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

// Checkpoint modes, the inference path, and the rollout's per-layer pieces against the training forward.
static void check_internal(case_data *cd, decoder_model *m, run_out *o_none) {
    const int64_t T = cd->T, H = cd->cfg.hidden_size;
    const model_config *c = &cd->cfg;
    const char *nm = cd->name;
    char what[200];
    check_modes_inference(cd, m, o_none);
    float *hid = malloc((size_t)(T * H) * 4);   // (T, H)
    const int64_t QD = (int64_t)c->num_attention_heads * c->head_dim, KD = (int64_t)c->num_key_value_heads * c->head_dim;
    float *x = malloc((size_t)(T * H) * 4), *q = malloc((size_t)(T * QD) * 4), *k = malloc((size_t)(T * KD) * 4);
    float *v = malloc((size_t)(T * KD) * 4), *att = malloc((size_t)(T * QD) * 4);
    float *lse = malloc((size_t)(T * c->num_attention_heads) * 4);
    decoder_embed(m, x, cd->tokens, T);
    for (int l = 0; l < c->num_hidden_layers; l++) {
        decoder_layer_qkv(m, l, x, cd->pos, T, q, k, v);
        attention_forward_sw(att, lse, q, k, v, cd->cu, cd->b.n_seqs, c->num_attention_heads, c->num_key_value_heads,
                             c->head_dim, c->attn_scale, decoder_layer_window(c, l));
        decoder_layer_out(m, l, x, att, T);
    }
    decoder_final_norm(m, hid, x, T);
    // the pieces run the batch whole: against the forward with the sequence split off (decoder_split.c)
    float *whole = malloc((size_t)(T * H) * 4);
    const int rs = m->be->row_split;
    m->be->row_split = -1;
    decoder_forward(m, NULL, &cd->b, whole);
    m->be->row_split = rs;
    snprintf(what, sizeof what, "%s layer pieces == forward", nm);
    tl_check_close(what, hid, whole, T * H, 1e-6);
    free(whole);
    free(x); free(q); free(k); free(v); free(att); free(lse);
    free(hid);
}

// Greedy rollout (paged KV cache, decode one token at a time) == an uncached greedy decode that re-runs the
// whole prefix through decoder_forward for every token. Prompt + generation stay within the sliding window,
// which the decode's paged attention does not apply.
// Greedy decode of two prompts (p0 and 2 tokens, new_tokens each) by the rollout engine (block_size-token KV
// blocks) against an uncached decode (the packed forward on the whole sequence at every step); returns the
// engine's result for the caller's KV checks (free it).
static void check_decode(case_data *cd, decoder_model *m, int p0, int new_tokens, int block_size, rollout_result *out) {
    const model_config *c = &cd->cfg;
    const int P[2] = {p0, 2};
    rollout_config rc;
    rollout_config_default(&rc);
    if (block_size > 0) rc.block_size = block_size;
    rc.n = 1;
    rc.sampling.temperature = 0.0f;
    rc.max_new_tokens = new_tokens;
    rc.ignore_eos = 1;
    rc.kv_cache_bytes = 8 << 20;
    rollout_engine *e = rollout_engine_new(m, &rc);
    rollout_prompt pr[2];
    int32_t *ids[2];
    for (int i = 0; i < 2; i++) {
        ids[i] = malloc((size_t)P[i] * 4);
        for (int t = 0; t < P[i]; t++) ids[i][t] = cd->tokens[(t * 7 + i) % cd->T];
        pr[i] = (rollout_prompt){.ids = ids[i], .len = P[i], .id = (uint64_t)i};
    }
    rollout_result res;
    rollout_generate(e, pr, 2, &res);
    int same = 1;
    double worst_lp = 0;
    for (int i = 0; i < 2; i++) {
        const rollout_sample *s = &res.samples[i];
        int64_t n = P[i] + s->len;
        int32_t *seq = malloc((size_t)n * 4), *pos = malloc((size_t)n * 4);
        memcpy(seq, ids[i], (size_t)P[i] * 4);
        float *logits = malloc((size_t)c->vocab_size * 4), *hid = malloc((size_t)n * c->hidden_size * 4);
        for (int64_t t = P[i]; t < n && same; t++) {
            int32_t cu[2] = {0, (int32_t)t};
            decoder_batch b = {.T = t, .n_seqs = 1, .tokens = seq, .cu_seqlens = cu, .pos = pos};
            decoder_batch_positions(&b);
            decoder_forward(m, NULL, &b, hid);
            decoder_logits(m, logits, hid + (t - 1) * c->hidden_size, 1);
            int best = 0;
            double mx = logits[0];
            for (int j = 1; j < c->vocab_size; j++) if (logits[j] > mx) { mx = logits[j]; best = j; }
            double se = 0;
            for (int j = 0; j < c->vocab_size; j++) se += exp(logits[j] - mx);
            double lp = logits[best] - mx - log(se);
            if (best != s->ids[t - P[i]]) same = 0;
            else if (fabs(lp - s->logprobs[t - P[i]]) > worst_lp) worst_lp = fabs(lp - s->logprobs[t - P[i]]);
            seq[t] = best;
        }
        free(seq); free(pos); free(logits); free(hid);
    }
    TL_CHECK(same, "%s: greedy rollout decode == uncached decode, token for token", cd->name);
    // the engine's decode arithmetic (rowgemm, paged attention) differs from the packed forward by rounding
    TL_CHECK(worst_lp <= 1e-4, "%s: greedy decode log-probs vs uncached: max abs err %.3g", cd->name, worst_lp);
    printf("  %s: greedy decode of %d + %d tokens == uncached decode (log-prob err %.2g)\n", cd->name, P[0], new_tokens,
           worst_lp);
    if (out) *out = res;
    else rollout_result_free(&res);
    rollout_engine_free(e);
    free(ids[0]); free(ids[1]);
}

// The decode check within the case's window (every sequence shorter than it, at most 64 tokens).
static void check_decode_in_window(case_data *cd, decoder_model *m) {
    const model_config *c = &cd->cfg;
    int max_len = c->sliding_window > 0 ? c->sliding_window : 64;
    for (int l = 0; l < c->num_hidden_layers; l++)
        if (c->layer_types[l] == LAYER_FULL && c->sliding_window <= 0) max_len = 64;
    if (max_len > 64) max_len = 64;
    const int p0 = max_len / 3 > 0 ? max_len / 3 : 1;
    check_decode(cd, m, p0, max_len - p0, 0, NULL);
}

// Decode far past a small window (W = 8, 4-token KV blocks): the prompt is longer than the window, the
// sequences grow to 6x it, so a sliding layer's paged attention reads only its last W keys while its older
// blocks are recycled. Against the uncached forward, whose attention masks the window (the packed flash kernel,
// itself checked against torch above). Gemma 3's sliding/global mix, Mistral's all-sliding layers, Qwen2's
// max_window_layers.
static const struct {
    const char *name, *json;
} PAST_WINDOW[] = {
    {"gemma3_decode_past_window", "{\"model_type\":\"gemma3_text\",\"vocab_size\":301,\"hidden_size\":64,"
     "\"intermediate_size\":96,\"num_hidden_layers\":3,\"num_attention_heads\":4,\"num_key_value_heads\":1,\"head_dim\":16,"
     "\"max_position_embeddings\":512,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"rope_local_base_freq\":10000.0,"
     "\"sliding_window\":8,\"sliding_window_pattern\":3,\"query_pre_attn_scalar\":16,\"final_logit_softcapping\":5.0,"
     "\"hidden_activation\":\"gelu_pytorch_tanh\",\"tie_word_embeddings\":true}"},
    {"mistral_decode_past_window", "{\"model_type\":\"mistral\",\"vocab_size\":257,\"hidden_size\":48,\"intermediate_size\":80,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":6,\"num_key_value_heads\":2,\"head_dim\":16,"
     "\"max_position_embeddings\":512,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,\"sliding_window\":8,"
     "\"tie_word_embeddings\":false}"},
    {"qwen2_decode_past_window", "{\"model_type\":\"qwen2\",\"vocab_size\":263,\"hidden_size\":64,\"intermediate_size\":96,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"max_position_embeddings\":512,"
     "\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"tie_word_embeddings\":true,\"use_sliding_window\":true,"
     "\"sliding_window\":8,\"max_window_layers\":1}"},
};

static void check_decode_past_window(backend_ctx *be) {
    for (size_t k = 0; k < sizeof PAST_WINDOW / sizeof PAST_WINDOW[0]; k++) {
        model_config cfg;
        model_config_parse(&cfg, PAST_WINDOW[k].json, PAST_WINDOW[k].name);
        int n_win = 0;
        for (int l = 0; l < cfg.num_hidden_layers; l++) n_win += decoder_layer_window(&cfg, l) == 8;
        TL_CHECK(n_win > 0, "%s: some layers slide with W = 8", PAST_WINDOW[k].name);
        static const int lens[1] = {4};
        case_data cd;
        case_build(&cd, PAST_WINDOW[k].name, &cfg, 1.0f, 1, lens, 2000 + (uint64_t)k);
        decoder_model m;
        decoder_model_init(&m, &cd.pl, &cd.ps, be);
        const int p0 = 13, new_tokens = 40, bs = 4;   // sequences of 53 and 42 tokens
        rollout_result res;
        check_decode(&cd, &m, p0, new_tokens, bs, &res);
        // without recycling the sliding layers would hold every block of both sequences
        const int all_blocks = (p0 + new_tokens + bs - 1) / bs + (2 + new_tokens + bs - 1) / bs;
        TL_CHECK(res.kv_window_blocks_peak > 0 && res.kv_window_blocks_peak < all_blocks,
                 "%s: the sliding layers' KV blocks are recycled past the window (peak %d of %d)", cd.name,
                 res.kv_window_blocks_peak, all_blocks);
        rollout_result_free(&res);
        decoder_model_free(&m);
        case_free(&cd);
    }
}

// ---- checkpoints across rlc and a torch reader/writer ----------------------------------------------------------
static const char *g_dir;
static void load_child(void *arg) {
    (void)arg;
    model_config c;
    param_layout pl;
    param_set ps;
    checkpoint_load(g_dir, &c, &pl, &ps);
}

static void write_file(const char *dir, const char *name, const char *text) {
    char *p = rlc_path_join(dir, name);
    CHECK(rlc_write_file_atomic(p, text, strlen(text)) == 0, "write %s", p);
    free(p);
}

// torch writes an HF-named checkpoint, rlc loads it (per-tensor sums agree), writes it back, torch reads that;
// then the load errors: an extra bias, a missing bias, a wrong shape.
static void check_crossing(const char *root) {
    const fcase *fc = &CASES[0];   // qwen2: q/k/v biases
    char *dir = rlc_path_join(root, "torch_written"), *cfgp = rlc_path_join(root, "qwen2_config.json");
    char *d2 = rlc_path_join(root, "rlc_rewritten");
    write_file(root, "qwen2_config.json", fc->json);
    char *sums = rlc_path_join(root, "sums.txt");
    int rc = tl_system("/usr/bin/python3 tests/py/families_ref.py write %s %s 7 > %s", dir, cfgp, sums);
    TL_CHECK(rc == 0, "families_ref.py write exited %d", rc);
    if (rc == 0) {
        model_config c;
        param_layout pl;
        param_set ps;
        checkpoint_load(dir, &c, &pl, &ps);
        char *text = rlc_read_file(sums, NULL);
        int checked = 0, bad = 0;
        for (char *tok = strtok(text, " \n"); tok; tok = strtok(NULL, " \n")) {
            char *eq = strchr(tok, '=');
            if (!eq) continue;
            *eq = 0;
            int i = param_layout_find(&pl, tok);
            if (i < 0) { bad++; continue; }
            double s = 0, want = strtod(eq + 1, NULL);
            for (int64_t j = 0; j < pl.tensors[i].numel; j++) s += ps.data[pl.tensors[i].offset + j];
            if (fabs(s - want) > 1e-5 * (1 + fabs(want))) bad++;
            checked++;
        }
        TL_CHECK(bad == 0 && checked == pl.n_tensors, "torch-written qwen2 checkpoint: %d tensors checked of %d, %d differ",
                 checked, pl.n_tensors, bad);
        checkpoint_save(d2, &ps, ST_BF16);
        rc = tl_system("/usr/bin/python3 tests/py/families_ref.py check %s > /dev/null", d2);
        TL_CHECK(rc == 0, "families_ref.py check of an rlc-written qwen2 checkpoint exited %d", rc);
        free(text);
        param_set_free(&ps);
        param_layout_free(&pl);

        // the same tensors under a llama config (no biases): the biases are extra
        char js[4096];
        snprintf(js, sizeof js, "%s", fc->json);
        char *mt = strstr(js, "\"qwen2\"");
        memcpy(mt, "\"llama\"", 7);
        write_file(dir, "config.json", js);
        g_dir = dir;
        io_expect_die("bias present, config asks for none", load_child, NULL, "_proj.bias", "unexpected",
                      "llama", (const char *)NULL);
        // a llama config asking for attention and MLP biases: o_proj's is missing
        char js2[4096];
        snprintf(js2, sizeof js2, "%.*s,\"attention_bias\":true}", (int)strlen(js) - 1, js);
        write_file(dir, "config.json", js2);
        io_expect_die("bias missing", load_child, NULL, "self_attn.o_proj.bias", "missing", (const char *)NULL);
        // a wrong shape: the config says intermediate_size 80
        snprintf(js, sizeof js, "%s", fc->json);
        char *is = strstr(js, "\"intermediate_size\":96");
        memcpy(is, "\"intermediate_size\":80", 22);
        write_file(dir, "config.json", js);
        io_expect_die("wrong shape", load_child, NULL, "mlp.", "shape", "[80, 64]", (const char *)NULL);
    }
    free(dir); free(cfgp); free(d2); free(sums);
}

int main(void) {
    backend_ctx be;
    backend_init(&be, 2);
    if (!tl_have_torch()) tl_skip("the torch comparisons: torch not importable by /usr/bin/python3");
    char *root = tl_tmpdir("families");
    case_data cds[N_CASES];
    for (int i = 0; i < N_CASES; i++) {
        model_config cfg;
        model_config_parse(&cfg, CASES[i].json, CASES[i].name);
        case_build(&cds[i], CASES[i].name, &cfg, CASES[i].temperature, CASES[i].n_seqs, CASES[i].lens, 1000 + (uint64_t)i);
        case_write(&cds[i], root, i);
    }
    int have_torch = tl_have_torch();
    if (have_torch) {
        char cmd[8192];
        int n = snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/py/families_ref.py case");
        for (int i = 0; i < N_CASES; i++) n += snprintf(cmd + n, sizeof cmd - (size_t)n, " %s", cds[i].dir);
        int rc = tl_system("%s", cmd);
        TL_CHECK(rc == 0, "tests/py/families_ref.py exited %d", rc);
    }
    for (int i = 0; i < N_CASES; i++) {
        case_data *cd = &cds[i];
        decoder_model m;
        decoder_model_init(&m, &cd->pl, &cd->ps, &be);
        run_out o, o_noent;
        run_model(cd, &m, CKPT_NONE, 1, &o);
        run_model(cd, &m, CKPT_NONE, 0, &o_noent);
        if (have_torch) compare_ref(cd, &m, &o, &o_noent);
        check_internal(cd, &m, &o);
        check_decode_in_window(cd, &m);
        run_free(&o);
        run_free(&o_noent);
        decoder_model_free(&m);
    }
    check_decode_past_window(&be);
    if (have_torch) check_crossing(root);
    else tl_skip("checkpoint crossing with torch: torch not importable");
    for (int i = 0; i < N_CASES; i++) case_free(&cds[i]);
    tl_system("rm -rf %s", root);
    free(root);
    return tl_summary();
}
