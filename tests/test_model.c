// test_model.c: the Qwen3 transformer (src/model/decoder*.c) against the PyTorch reference (tests/py/qwen3_ref.py,
// float64 autograd) at random small configs, plus internal consistency: packed == alone, the inference path
// == the training path, checkpoint modes none/selective/full give the same gradients, gradients accumulate,
// the rollout's per-layer pieces compose to the forward, and the `rlc logprob` CLI equals the API.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/common.h"
#include "io/checkpoint.h"
#include "model/decoder.h"
#include "model_case.h"
#include "testlib.h"

typedef struct {
    const char *name;
    int V, H, I, L, nh, nkv, D, tied;
    double theta;
    float temperature;
    int n_seqs;
    int lens[8];
} tcase;

// GQA ratios 1, 2, 4; head_dim 64 and 128; tied and untied; vocab sizes not multiples of the head's
// 4096-entry chunk (one case spans two chunks); lengths 1, 7, 64, 300; 3 to 8 sequences.
static const tcase CASES[] = {
    {"gqa1_d64_tied", 517, 64, 96, 2, 2, 2, 64, 1, 1e6, 1.0f, 4, {1, 7, 64, 300}},
    {"gqa2_d128_untied", 4133, 96, 160, 2, 4, 2, 128, 0, 1e6, 0.7f, 5, {7, 64, 1, 33, 12}},
    {"gqa4_d64_untied", 777, 80, 128, 2, 8, 2, 64, 0, 1e4, 1.3f, 6, {300, 7, 1, 64, 5, 9}},
    {"gqa2_d64_tied_8seq", 1001, 64, 112, 3, 4, 2, 64, 1, 1e6, 1.0f, 8, {1, 7, 20, 64, 3, 1, 40, 7}},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

static void make_config(model_config *c, const tcase *tc) {
    memset(c, 0, sizeof *c);
    c->vocab_size = tc->V;
    c->hidden_size = tc->H;
    c->intermediate_size = tc->I;
    c->num_hidden_layers = tc->L;
    c->num_attention_heads = tc->nh;
    c->num_key_value_heads = tc->nkv;
    c->head_dim = tc->D;
    c->max_position_embeddings = 512;
    c->rms_norm_eps = 1e-6f;
    c->rope_theta = tc->theta;
    c->tie_word_embeddings = tc->tied;
    c->bos_token_id = -1;
    c->eos_token_id = -1;
    c->n_eos_token_ids = 0;
    c->use_sliding_window = 0;
    c->sliding_window = -1;
    c->max_window_layers = tc->L;
    c->initializer_range = 0.02f;
    snprintf(c->torch_dtype, sizeof c->torch_dtype, "float32");
    model_config_finalize(c);
}

// The data-parallel seam: weights handed in block by block through get_block (here: a copy of the
// parameters, zeroed in the model's own buffer so any read that bypasses the seam shows).
typedef struct { param_set copy; int calls; } gathered;
static float *get_block_copy(void *ctx, int block) {
    gathered *g = ctx;
    g->calls++;
    return param_block(&g->copy, block);
}
static void check_block_seam(case_data *cd, decoder_model *m, run_out *o_none) {
    (void)o_none;
    // the seam keeps the batch whole (decoder_split.c): the reference is the whole path too
    run_out whole;
    const int rs = m->be->row_split;
    m->be->row_split = -1;
    run_model(cd, m, CKPT_FULL, 1, &whole);
    gathered g = {.calls = 0};
    param_set_init(&g.copy, &cd->pl);
    memcpy(g.copy.data, cd->ps.data, (size_t)cd->pl.numel * 4);
    memset(cd->ps.data, 0, (size_t)cd->pl.numel * 4);
    m->get_block = get_block_copy;
    m->get_block_ctx = &g;
    run_out o;
    run_model(cd, m, CKPT_FULL, 1, &o);
    char what[160];
    snprintf(what, sizeof what, "%s get_block seam: logp", cd->name);
    tl_check_close(what, o.logp, whole.logp, cd->T, 1e-6);
    snprintf(what, sizeof what, "%s get_block seam: grads", cd->name);
    tl_check_close(what, o.g.data, whole.g.data, cd->pl.numel, 1e-6);
    TL_CHECK(g.calls > 0, "get_block never called");
    m->be->row_split = rs;
    run_free(&o);
    run_free(&whole);
    m->get_block = NULL;
    m->get_block_ctx = NULL;
    memcpy(cd->ps.data, g.copy.data, (size_t)cd->pl.numel * 4);
    param_set_free(&g.copy);
}

// Modes none/selective/full, inference path, packed == alone, accumulation, rollout pieces.
static void check_internal(case_data *cd, decoder_model *m, run_out *o_none) {
    const int64_t T = cd->T, H = cd->cfg.hidden_size;
    const char *nm = cd->name;
    char what[160];
    check_modes_inference(cd, m, o_none);
    float *logp = malloc((size_t)T * 4), *hid = malloc((size_t)(T * H) * 4);   // (T), (T, H) scratch
    // each sequence alone == its slice of the packed batch (sgemm blocking may differ with T: 1e-5)
    float *alone_lp = malloc((size_t)T * 4), *alone_ent = malloc((size_t)T * 4);
    for (int s = 0; s < cd->b.n_seqs; s++) {
        int32_t s0 = cd->cu[s], len = cd->cu[s + 1] - s0;
        int32_t cu1[2] = {0, len};
        decoder_batch b1 = {.T = len, .n_seqs = 1, .tokens = cd->tokens + s0, .cu_seqlens = cu1, .pos = malloc((size_t)len * 4)};
        decoder_batch_positions(&b1);
        decoder_forward(m, NULL, &b1, NULL);
        decoder_logprob(m, NULL, &b1, cd->targets + s0, cd->temperature, alone_lp + s0, alone_ent + s0);
        free(b1.pos);
    }
    snprintf(what, sizeof what, "%s packed logp == alone", nm);
    tl_check_close(what, alone_lp, o_none->logp, T, 1e-5);
    snprintf(what, sizeof what, "%s packed entropy == alone", nm);
    tl_check_close(what, alone_ent, o_none->ent, T, 1e-5);
    // the rollout's per-layer pieces compose to the forward
    {
        const model_config *c = &cd->cfg;
        int64_t QD = (int64_t)c->num_attention_heads * c->head_dim, KD = (int64_t)c->num_key_value_heads * c->head_dim;
        float *x = malloc((size_t)(T * H) * 4), *q = malloc((size_t)(T * QD) * 4), *k = malloc((size_t)(T * KD) * 4);
        float *v = malloc((size_t)(T * KD) * 4), *att = malloc((size_t)(T * QD) * 4);
        float *lse = malloc((size_t)(T * c->num_attention_heads) * 4);
        decoder_embed(m, x, cd->tokens, T);
        for (int l = 0; l < c->num_hidden_layers; l++) {
            decoder_layer_qkv(m, l, x, cd->pos, T, q, k, v);
            attention_forward(att, lse, q, k, v, cd->cu, cd->b.n_seqs, c->num_attention_heads, c->num_key_value_heads, c->head_dim);
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
    }
    // backward accumulates: a second backward into the same grads doubles them
    {
        param_set g2;
        param_set_init(&g2, &cd->pl);
        decoder_acts *a = decoder_acts_new(&cd->cfg, T, CKPT_FULL);
        for (int rep = 0; rep < 2; rep++) {
            decoder_forward(m, a, &cd->b, NULL);
            decoder_logprob(m, a, &cd->b, cd->targets, cd->temperature, logp, NULL);
            decoder_backward(m, a, &cd->b, cd->targets, cd->temperature, cd->dlogp, cd->dent, &g2);
        }
        for (int64_t i = 0; i < cd->pl.numel; i++) g2.data[i] *= 0.5f;
        snprintf(what, sizeof what, "%s backward accumulates (+=)", nm);
        tl_check_close(what, g2.data, o_none->g.data, cd->pl.numel, 1e-6);
        decoder_acts_free(a);
        param_set_free(&g2);
    }
    free(logp); free(hid); free(alone_lp); free(alone_ent);
}

// acts memory per mode: none > selective > full, and the allocation matches the size query.
static void check_acts_bytes(void) {
    const tcase *tc = &CASES[1];
    model_config c;
    make_config(&c, tc);
    int64_t b[3];
    for (int mode = 0; mode < 3; mode++) {
        b[mode] = decoder_acts_bytes_for(&c, 1000, (ckpt_mode)mode);
        decoder_acts *a = decoder_acts_new(&c, 1000, (ckpt_mode)mode);
        TL_CHECK(decoder_acts_bytes(a) == b[mode], "acts bytes %s: %lld vs %lld", decoder_ckpt_name((ckpt_mode)mode),
                 (long long)decoder_acts_bytes(a), (long long)b[mode]);
        decoder_acts_free(a);
    }
    TL_CHECK(b[0] > b[1] && b[1] > b[2], "acts bytes none %lld > selective %lld > full %lld", (long long)b[0], (long long)b[1],
             (long long)b[2]);
}

// `rlc logprob` on case 0's checkpoint == the API, in input order, with a tight batch budget.
static void check_cli(case_data *cd, run_out *o) {
    if (!rlc_file_exists(tl_rlc_bin())) { tl_skip("cli: %s not built", tl_rlc_bin()); return; }
    char *in = rlc_path_join(cd->dir, "in.jsonl"), *out = rlc_path_join(cd->dir, "out.jsonl");
    FILE *f = fopen(in, "w");
    for (int s = 0; s < cd->b.n_seqs; s++) {
        fprintf(f, "{\"input_ids\": [");
        for (int32_t t = cd->cu[s]; t < cd->cu[s + 1]; t++) fprintf(f, "%s%d", t > cd->cu[s] ? ", " : "", cd->tokens[t]);
        fprintf(f, "]}\n");
    }
    fclose(f);
    int rc = tl_system("%s logprob --model %s --data %s --out %s --temperature %.9g --max-batch-tokens 80 --threads 2",
                       tl_rlc_bin(), cd->dir, in, out, cd->temperature);
    TL_CHECK(rc == 0, "rlc logprob exit %d", rc);
    if (rc != 0) { free(in); free(out); return; }
    char *text = rlc_read_file(out, NULL);
    // Parse lines {"logprobs": [...], "entropy": [...]} in order; compare to API values at t = 0..n-2.
    const char *s = text;
    int ok_lines = 0;
    double worst_lp = 0, worst_ent = 0, scale = 1e-30;
    for (int q = 0; q < cd->b.n_seqs; q++) {
        int32_t s0 = cd->cu[q], n = cd->cu[q + 1] - s0;
        const char *lp = strstr(s, "\"logprobs\""), *en = strstr(s, "\"entropy\"");
        const char *eol = strchr(s, '\n');
        if (!lp || !en || !eol || lp > eol || en > eol) break;
        lp = strchr(lp, '[') + 1;
        en = strchr(en, '[') + 1;
        int good = 1;
        for (int t = 0; t < n - 1; t++) {
            char *e1, *e2;
            double a = strtod(lp, &e1), b2 = strtod(en, &e2);
            if (e1 == lp || e2 == en) { good = 0; break; }
            lp = e1 + (*e1 == ',');
            en = e2 + (*e2 == ',');
            double wl = o->logp[s0 + t], we = o->ent[s0 + t];
            if (fabs(wl) > scale) scale = fabs(wl);
            if (fabs(a - wl) > worst_lp) worst_lp = fabs(a - wl);
            if (fabs(b2 - we) > worst_ent) worst_ent = fabs(b2 - we);
        }
        while (*lp == ' ') lp++;
        while (*en == ' ') en++;
        if (good && *lp == ']' && *en == ']') ok_lines++;
        s = eol + 1;
    }
    TL_CHECK(ok_lines == cd->b.n_seqs, "cli: %d of %d output lines well formed with n-1 values", ok_lines, cd->b.n_seqs);
    // printed with 9 significant digits; batching differs from the API's (budget 80 tokens): 1e-5
    TL_CHECK(worst_lp / scale <= 1e-5 && worst_ent / scale <= 1e-5, "cli vs api: logp err %.3g, entropy err %.3g (scale %.3g)",
             worst_lp, worst_ent, scale);
    free(text);
    // bad inputs: one clear line and exit 1
    struct { const char *content; const char *expect; } bad[] = {
        {"{\"input_ids\": [1, 2, 3]}\nnot json\n", ":2:"},
        {"{\"input_ids\": [1, 2, 99999999]}\n", "vocab"},
        {"{\"input_ids\": [1, 2]}\n\n{\"input_ids\": [1]}\n", ":2:"},
        {"{\"ids\": [1, 2]}\n", "input_ids"},
        {"{\"input_ids\": []}\n", ":1:"},
    };
    char *err = rlc_path_join(cd->dir, "err.txt");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        f = fopen(in, "w");
        fputs(bad[i].content, f);
        fclose(f);
        rc = tl_system("%s logprob --model %s --data %s --out %s 2>%s", tl_rlc_bin(), cd->dir, in, out, err);
        char *msg = rlc_read_file(err, NULL);
        TL_CHECK(rc == 1 && strstr(msg, "rlc: error:") && strstr(msg, bad[i].expect),
                 "cli bad input %zu: rc=%d, message '%s' should name '%s'", i, rc, msg, bad[i].expect);
        free(msg);
    }
    // longer than max_position_embeddings (512)
    f = fopen(in, "w");
    fprintf(f, "{\"input_ids\": [");
    for (int t = 0; t < 513; t++) fprintf(f, "%s%d", t ? "," : "", t % cd->cfg.vocab_size);
    fprintf(f, "]}\n");
    fclose(f);
    rc = tl_system("%s logprob --model %s --data %s --out %s 2>%s", tl_rlc_bin(), cd->dir, in, out, err);
    char *msg = rlc_read_file(err, NULL);
    TL_CHECK(rc == 1 && strstr(msg, "max_position_embeddings"), "cli too long: rc=%d '%s'", rc, msg);
    free(msg);
    free(err); free(in); free(out);
}

int main(void) {
    backend_ctx be;
    backend_init(&be, 2);
    int san = getenv("RLC_SAN") && !strcmp(getenv("RLC_SAN"), "1");
    int have_torch = tl_have_torch();
    char *root = tl_tmpdir("model");
    case_data cds[N_CASES];
    for (int i = 0; i < N_CASES; i++) {
        model_config cfg;
        make_config(&cfg, &CASES[i]);
        case_build(&cds[i], CASES[i].name, &cfg, CASES[i].temperature, CASES[i].n_seqs, CASES[i].lens, 1234 + (uint64_t)i);
        case_write(&cds[i], root, i);
    }
    if (have_torch) {
        char dirs[4096] = "";
        for (int i = 0; i < N_CASES; i++) {
            strcat(dirs, " ");
            strcat(dirs, cds[i].dir);
        }
        int rc = tl_system("/usr/bin/python3 tests/py/qwen3_ref.py case%s", dirs);
        TL_CHECK(rc == 0, "qwen3_ref.py exit %d", rc);
    } else {
        tl_skip("torch not available: reference comparisons skipped");
    }
    check_acts_bytes();
    for (int i = 0; i < N_CASES; i++) {
        case_data *cd = &cds[i];
        decoder_model m;
        decoder_model_init(&m, &cd->pl, &cd->ps, &be);
        run_out o;
        run_model(cd, &m, CKPT_NONE, 1, &o);
        if (have_torch) {
            run_out o2;
            run_model(cd, &m, CKPT_SELECTIVE, 0, &o2);
            compare_ref(cd, &m, &o, &o2);
            run_free(&o2);
        }
        if (!san || i == 0) check_internal(cd, &m, &o);
        if (i == 0) check_cli(cd, &o);
        if (i == 1) check_block_seam(cd, &m, &o);
        run_free(&o);
        decoder_model_free(&m);
    }
    for (int i = 0; i < N_CASES; i++) case_free(&cds[i]);
    tl_system("rm -rf %s", root);
    free(root);
    return tl_summary();
}
