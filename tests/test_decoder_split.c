// test_decoder_split.c: the decoder's sequence split (decoder_split.c: a packed batch cut at sequence boundaries, one
// part per thread through every layer, private weight gradients summed in part order) against the kernel-threaded
// path of the same decoder, on every family's layer form (Qwen3 q/k norms, Qwen2 biases, Gemma 3 sandwich norms,
// GeGLU, sliding windows and soft-capping), each checkpoint mode, tied and untied heads: hidden states, log-probs,
// entropy, d(hidden) and every parameter gradient, the inference forward, the hidden-seeded backward, gradient
// accumulation over two calls, and bitwise repeatability of the split for a thread count. test_model and
// test_families hold the automatic choice (the split, wherever a case's batch allows it) to the PyTorch reference.
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/common.h"
#include "model/decoder.h"
#include "model_case.h"
#include "testlib.h"

typedef struct {
    const char *name;
    const char *json;
    float temperature;
    int n_seqs;
    int lens[10];
} scase;

static const scase CASES[] = {
    {"qwen3_demo_like", "{\"model_type\":\"qwen3\",\"vocab_size\":576,\"hidden_size\":128,\"intermediate_size\":384,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":32,"
     "\"max_position_embeddings\":512,\"rms_norm_eps\":1e-6,\"rope_theta\":10000,\"tie_word_embeddings\":true}",
     1.0f, 9, {40, 7, 92, 1, 60, 33, 75, 12, 50}},
    {"qwen2_bias_untied", "{\"model_type\":\"qwen2\",\"vocab_size\":517,\"hidden_size\":64,\"intermediate_size\":96,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"max_position_embeddings\":512,"
     "\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"tie_word_embeddings\":false}",
     0.7f, 5, {7, 64, 1, 33, 12}},
    {"gemma3_sandwich_window_cap", "{\"model_type\":\"gemma3_text\",\"vocab_size\":401,\"hidden_size\":64,"
     "\"intermediate_size\":96,\"num_hidden_layers\":3,\"num_attention_heads\":4,\"num_key_value_heads\":1,\"head_dim\":32,"
     "\"max_position_embeddings\":512,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"rope_local_base_freq\":10000.0,"
     "\"sliding_window\":37,\"sliding_window_pattern\":3,\"query_pre_attn_scalar\":24,\"final_logit_softcapping\":5.0,"
     "\"hidden_activation\":\"gelu_pytorch_tanh\",\"tie_word_embeddings\":true}",
     1.0f, 6, {90, 7, 1, 64, 5, 80}},
    {"llama_bias_mlp_untied", "{\"model_type\":\"llama\",\"vocab_size\":300,\"hidden_size\":48,\"intermediate_size\":64,"
     "\"num_hidden_layers\":2,\"num_attention_heads\":6,\"num_key_value_heads\":2,\"max_position_embeddings\":512,"
     "\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,\"tie_word_embeddings\":false,\"attention_bias\":true,\"mlp_bias\":true}",
     1.0f, 4, {20, 31, 2, 40}},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

// One training pass (forward, head, backward with the entropy seed) and one inference forward + head.
typedef struct {
    run_out o;
    float *logp_inf, *ent_inf;   // (T) the inference path's
} pass;

static void run_pass(case_data *cd, decoder_model *m, ckpt_mode mode, pass *p) {
    run_model(cd, m, mode, 1, &p->o);
    p->logp_inf = malloc((size_t)cd->T * 4);
    p->ent_inf = malloc((size_t)cd->T * 4);
    decoder_forward(m, NULL, &cd->b, NULL);
    decoder_logprob(m, NULL, &cd->b, cd->targets, cd->temperature, p->logp_inf, p->ent_inf);
}

static void pass_free(pass *p) {
    run_free(&p->o);
    free(p->logp_inf);
    free(p->ent_inf);
}

static int bitwise_eq(const float *a, const float *b, int64_t n) { return memcmp(a, b, (size_t)n * sizeof(float)) == 0; }

// Split against whole: the same arithmetic on other rows per sgemm call, so rounding differs a little. Forward values
// at 1e-5 (fp32 sums over <= 384 terms, a few layers deep), gradients at 1e-4 (sums over the batch's tokens in
// another grouping: parts first, then across parts).
static void compare(const char *nm, const char *what, case_data *cd, const pass *s, const pass *w) {
    const int64_t T = cd->T, H = cd->cfg.hidden_size;
    char lab[256];
    snprintf(lab, sizeof lab, "%s %s: hidden", nm, what);
    tl_check_close(lab, s->o.hidden, w->o.hidden, T * H, 1e-5);
    snprintf(lab, sizeof lab, "%s %s: logp", nm, what);
    tl_check_close(lab, s->o.logp, w->o.logp, T, 1e-5);
    snprintf(lab, sizeof lab, "%s %s: entropy", nm, what);
    tl_check_close(lab, s->o.ent, w->o.ent, T, 1e-5);
    snprintf(lab, sizeof lab, "%s %s: d(hidden)", nm, what);
    tl_check_close(lab, s->o.dhidden, w->o.dhidden, T * H, 1e-4);
    for (int i = 0; i < cd->pl.n_tensors; i++) {
        const param_tensor *t = &cd->pl.tensors[i];
        snprintf(lab, sizeof lab, "%s %s: grad %s", nm, what, t->name);
        tl_check_close(lab, s->o.g.data + t->offset, w->o.g.data + t->offset, t->numel, 1e-4);
    }
    snprintf(lab, sizeof lab, "%s %s: inference logp", nm, what);
    tl_check_close(lab, s->logp_inf, w->logp_inf, T, 1e-5);
    snprintf(lab, sizeof lab, "%s %s: inference entropy", nm, what);
    tl_check_close(lab, s->ent_inf, w->ent_inf, T, 1e-5);
}

// decoder_backward_hidden (the critic's seed) and accumulation: two backward calls add up, split or whole.
static void check_hidden_seed(case_data *cd, decoder_model *m, backend_ctx *be) {
    const int64_t T = cd->T, H = cd->cfg.hidden_size;
    tl_rng r;
    tl_rng_init(&r, 77);
    float *dh = tl_alloc_normal(&r, T * H, 1.0f);
    param_set g[2];
    for (int k = 0; k < 2; k++) {
        be->row_split = k == 0 ? 1 : -1;
        param_set_init(&g[k], &cd->pl);
        decoder_acts *a = decoder_acts_new(&cd->cfg, T, CKPT_SELECTIVE);
        for (int rep = 0; rep < 2; rep++) {   // accumulates: g = 2 x one backward
            decoder_forward(m, a, &cd->b, NULL);
            decoder_backward_hidden(m, a, &cd->b, dh, &g[k]);
        }
        decoder_acts_free(a);
    }
    char lab[256];
    snprintf(lab, sizeof lab, "%s: hidden-seeded backward, accumulated twice: split vs whole", cd->name);
    tl_check_close(lab, g[0].data, g[1].data, cd->pl.numel, 1e-4);
    param_set_free(&g[0]);
    param_set_free(&g[1]);
    rlc_free(dh);
}

int main(void) {
    if (omp_get_num_procs() < 2) printf("note: 1 core; the split still runs with 2 threads (oversubscribed)\n");
    backend_ctx be;
    backend_init(&be, 2);
    for (int i = 0; i < N_CASES; i++) {
        const scase *sc = &CASES[i];
        model_config cfg;
        model_config_parse(&cfg, sc->json, sc->name);
        case_data cd;
        case_build(&cd, sc->name, &cfg, sc->temperature, sc->n_seqs, sc->lens, 4321 + (uint64_t)i);
        decoder_model m;
        decoder_model_init(&m, &cd.pl, &cd.ps, &be);
        const ckpt_mode modes[3] = {CKPT_NONE, CKPT_SELECTIVE, CKPT_FULL};
        for (int mi = 0; mi < 3; mi++) {
            pass s, s2, w;
            be.row_split = 1;
            run_pass(&cd, &m, modes[mi], &s);
            run_pass(&cd, &m, modes[mi], &s2);
            be.row_split = -1;
            run_pass(&cd, &m, modes[mi], &w);
            char what[64];
            snprintf(what, sizeof what, "ckpt %s split vs whole", decoder_ckpt_name(modes[mi]));
            compare(sc->name, what, &cd, &s, &w);
            TL_CHECK(bitwise_eq(s.o.logp, s2.o.logp, cd.T) && bitwise_eq(s.o.g.data, s2.o.g.data, cd.pl.numel) &&
                         bitwise_eq(s.logp_inf, s2.logp_inf, cd.T),
                     "%s ckpt %s: the split repeats bitwise", sc->name, decoder_ckpt_name(modes[mi]));
            pass_free(&s);
            pass_free(&s2);
            pass_free(&w);
        }
        check_hidden_seed(&cd, &m, &be);
        decoder_model_free(&m);
        case_free(&cd);
    }
    // Fewer sequences than threads: the batch stays whole (nothing to split), same result as the whole path.
    {
        model_config cfg;
        model_config_parse(&cfg, CASES[0].json, "one sequence");
        case_data cd;
        const int lens[1] = {50};
        case_build(&cd, "one_sequence", &cfg, 1.0f, 1, lens, 99);
        decoder_model m;
        decoder_model_init(&m, &cd.pl, &cd.ps, &be);
        run_out o1, o2;
        be.row_split = 1;
        run_model(&cd, &m, CKPT_NONE, 1, &o1);
        be.row_split = -1;
        run_model(&cd, &m, CKPT_NONE, 1, &o2);
        TL_CHECK(bitwise_eq(o1.logp, o2.logp, cd.T) && bitwise_eq(o1.g.data, o2.g.data, cd.pl.numel),
                 "one sequence: the split leaves the batch whole");
        run_free(&o1);
        run_free(&o2);
        decoder_model_free(&m);
        case_free(&cd);
    }
    return tl_summary();
}
