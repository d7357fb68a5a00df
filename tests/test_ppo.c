// test_ppo.c: the critic's pieces against the spec's test vectors (shared/spec/verl-ppo.md §1.4-1.5) and an
// independent PyTorch reference (tests/py/ppo_ref.py): GAE with whitening (gamma, lam = 1 and < 1), the clipped
// value loss and its gradient (clipping on both sides, exact bounds, the v == V_old tie, every aggregation mode with
// global batch info), the value head forward/backward (fast vs _ref vs torch), and the value head on the decoder:
// values and the gradients of every decoder tensor through decoder_backward_hidden against qwen3_ref.py in float64.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/common.h"
#include "io/checkpoint.h"
#include "model/decoder.h"
#include "model/value_head.h"
#include "rl/gae.h"
#include "rl/value_loss.h"
#include "testlib.h"

static const char *g_dir;

// DIR/name.f64 as floats; *n = element count.
static float *load_in(const char *dir, const char *name, int64_t *n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.f64", dir, name);
    size_t len;
    char *buf = rlc_read_file(path, &len);
    int64_t k = (int64_t)(len / 8);
    float *f = rlc_malloc((size_t)(k ? k : 1) * sizeof(float));
    for (int64_t i = 0; i < k; i++) { double d; memcpy(&d, buf + 8 * i, 8); f[i] = (float)d; }
    free(buf);
    if (n) *n = k;
    return f;
}
static float *load(const char *name, int64_t *n) { return load_in(g_dir, name, n); }

static void save_f64(const char *dir, const char *name, const float *x, int64_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.f64", dir, name);
    double *d = rlc_malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) d[i] = x[i];
    if (rlc_write_file_atomic(path, d, sizeof(double) * (size_t)n) != 0) rlc_die("%s: cannot write", path);
    free(d);
}

// The spec's vectors (float64 from the formulas; fp32 here: 1e-5).
static void test_spec_vectors(void) {
    const float r[8] = {0, 0, 0, 1, 0, 0, 0.5f, 0}, V[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, -0.5f, 0.25f, 0};
    const float m[8] = {1, 1, 1, 1, 1, 1, 1, 0};
    float adv[8], ret[8];
    rl_gae(adv, ret, r, V, m, 2, 4, 1.0, 1.0);
    const float want_ret11[8] = {1, 1, 1, 1, 0.5f, 0.5f, 0.5f, 0};
    const float want_adv11[8] = {0.811126f, 0.534156f, 0.257186f, -0.019784f, -1.681603f, 1.088096f, -0.989178f, -1.681603f};
    tl_check_close("spec GAE gamma=lam=1 returns", ret, want_ret11, 8, 1e-5);
    tl_check_close("spec GAE gamma=lam=1 whitened advantages (1e-5: 6 printed digits)", adv, want_adv11, 8, 1e-5);
    rl_gae(adv, ret, r, V, m, 2, 4, 0.99, 0.95);
    const float want_ret99[8] = {0.87329f, 0.918012f, 0.9603f, 1, 0.429159f, 0.482625f, 0.5f, 0};
    const float want_adv99[8] = {0.604024f, 0.44817f, 0.285454f, 0.115442f, -1.775957f, 1.194231f, -0.871364f, -1.576225f};
    tl_check_close("spec GAE gamma=0.99 lam=0.95 returns", ret, want_ret99, 8, 1e-5);
    tl_check_close("spec GAE gamma=0.99 lam=0.95 whitened advantages", adv, want_adv99, 8, 1e-5);
    // value loss: token-mean, N = 7, c = 0.5, returns of the gamma = lam = 1 row
    const float vp[8] = {0.9f, 0.2f, -0.5f, 0.4f, 0.5f, 0.0f, 0.25f, 7.0f};
    float dv[8];
    rl_value_loss_out o;
    rl_value_loss(&o, dv, vp, V, want_ret11, m, 2, 4, 0.5, RL_AGG_TOKEN_MEAN, NULL);
    TL_CHECK(fabs(o.vf_loss - 0.2658929) < 1e-6, "spec vf_loss %.7f, want 0.2658929", o.vf_loss);
    TL_CHECK(fabs(o.vf_clipfrac - 1.0 / 7.0) < 1e-6, "spec vf_clipfrac %.7f, want 1/7", o.vf_clipfrac);
    const float want_dv[8] = {0, -0.114286f, -0.214286f, -0.085714f, 0, -0.053571f, -0.035714f, 0};
    tl_check_close("spec d vf_loss / d vpreds (6 printed digits)", dv, want_dv, 8, 2e-5);
}

static void test_gae_torch(void) {
    const int64_t B = 6, T = 11;
    float *r = load("gae_r", NULL), *V = load("gae_V", NULL), *m = load("gae_m", NULL);
    float adv[66], ret[66];
    const char *tags[2] = {"11", "99"};
    const double gl[2][2] = {{1.0, 1.0}, {0.99, 0.95}};
    for (int k = 0; k < 2; k++) {
        char na[32], nr[32], msg[96];
        snprintf(na, sizeof na, "gae_adv_%s", tags[k]);
        snprintf(nr, sizeof nr, "gae_ret_%s", tags[k]);
        float *wa = load(na, NULL), *wr = load(nr, NULL);
        rl_gae(adv, ret, r, V, m, B, T, gl[k][0], gl[k][1]);
        // fp32 recurrences over 11 steps and a whitening, as torch does them in fp32: 1e-5
        snprintf(msg, sizeof msg, "GAE returns vs torch (gamma %g, lam %g)", gl[k][0], gl[k][1]);
        tl_check_close(msg, ret, wr, B * T, 1e-5);
        snprintf(msg, sizeof msg, "GAE whitened advantages vs torch (gamma %g, lam %g)", gl[k][0], gl[k][1]);
        tl_check_close(msg, adv, wa, B * T, 1e-5);
        free(wa); free(wr);
    }
    free(r); free(V); free(m);
}

static void test_value_loss_torch(void) {
    const int64_t B = 6, T = 11;
    float *v = load("vl_v", NULL), *Vo = load("vl_Vold", NULL), *R = load("vl_R", NULL), *m = load("vl_m", NULL);
    struct { const char *tag; rl_agg_mode mode; rl_batch_info gbi; } cases[] = {
        {"tm", RL_AGG_TOKEN_MEAN, {1, 0, 0, 0}}, {"tmg", RL_AGG_TOKEN_MEAN, {2, 57.0, 0, 0}},
        {"ts", RL_AGG_TOKEN_SUM, {1, 0, 0, 0}}, {"smts", RL_AGG_SEQ_MEAN_TOKEN_SUM, {1, 0, 8.0, 0}},
        {"smtm", RL_AGG_SEQ_MEAN_TOKEN_MEAN, {1, 0, 0, 0}},
    };
    float dv[66];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char n1[32], n2[32], msg[96];
        snprintf(n1, sizeof n1, "vl_%s_out", cases[k].tag);
        snprintf(n2, sizeof n2, "vl_%s_dv", cases[k].tag);
        float *wo = load(n1, NULL), *wd = load(n2, NULL);
        rl_value_loss_out o;
        rl_value_loss(&o, dv, v, Vo, R, m, B, T, 0.5, cases[k].mode, &cases[k].gbi);
        float got[3] = {(float)o.vf_loss, (float)o.vf_clipfrac, (float)o.vpred_mean};
        snprintf(msg, sizeof msg, "value loss %s: vf_loss, vf_clipfrac, vpred_mean vs torch", rl_agg_mode_name(cases[k].mode));
        tl_check_close(msg, got, wo, 3, 1e-5);   // fp32 elementwise, double sums: 1e-5
        snprintf(msg, sizeof msg, "value loss %s: d/d vpred vs torch autograd (ties, bounds)", rl_agg_mode_name(cases[k].mode));
        tl_check_close(msg, dv, wd, B * T, 1e-5);
        free(wo); free(wd);
    }
    free(v); free(Vo); free(R); free(m);
}

static void test_value_head(void) {
    const int64_t T = 13, H = 24;
    float *h = load("vh_h", NULL), *wb = load("vh_wb", NULL), *dvv = load("vh_dv", NULL);
    float *wv = load("vh_val", NULL), *wdh = load("vh_dh", NULL), *wdwb = load("vh_dwb", NULL);
    float val[13], val_ref[13], dh[13 * 24] = {0}, dh_ref[13 * 24] = {0}, dwb[25] = {0}, dwb_ref[25] = {0};
    value_head_forward(val, h, wb, T, H);
    value_head_forward_ref(val_ref, h, wb, T, H);
    tl_check_close("value head forward: fast vs _ref (fp32 dot order)", val, val_ref, T, 1e-6);
    tl_check_close("value head forward vs torch", val, wv, T, 1e-5);
    value_head_backward(dh, dwb, dvv, h, wb, T, H);
    value_head_backward_ref(dh_ref, dwb_ref, dvv, h, wb, T, H);
    tl_check_close("value head backward dhidden: fast vs _ref", dh, dh_ref, T * H, 1e-6);
    tl_check_close("value head backward dw, db: fast vs _ref (summation order)", dwb, dwb_ref, H + 1, 1e-5);
    tl_check_close("value head backward dhidden vs torch", dh, wdh, T * H, 1e-5);
    tl_check_close("value head backward dw, db vs torch", dwb, wdwb, H + 1, 1e-5);
    // backward accumulates
    value_head_backward(dh, dwb, dvv, h, wb, T, H);
    for (int64_t i = 0; i < H + 1; i++) dwb_ref[i] *= 2;
    tl_check_close("value head backward accumulates (+=)", dwb, dwb_ref, H + 1, 1e-5);
    free(h); free(wb); free(dvv); free(wv); free(wdh); free(wdwb);
}

// The value head on a tiny random model of each config: values and every gradient of sum(dv * values) through
// decoder_backward_hidden vs the float64 torch model.
static void test_critic_decoder(const char *tag, const char *config_json) {
    char *dir = tl_tmpdir(tag);
    char *cfgp = rlc_path_join(dir, "cfg.json");
    if (rlc_write_file_atomic(cfgp, config_json, strlen(config_json)) != 0) rlc_die("%s: cannot write", cfgp);
    char *mdir = rlc_path_join(dir, "m");
    int rc = tl_system("%s init --config %s --out %s --seed 5 --dtype f32 >/dev/null", tl_rlc_bin(), cfgp, mdir);
    TL_CHECK(rc == 0, "%s: rlc init exit %d", tag, rc);
    if (rc != 0) return;
    model_config mc;
    param_layout pl;
    param_set ps;
    checkpoint_load(mdir, &mc, &pl, &ps);
    backend_ctx be;
    backend_init(&be, 2);
    decoder_model dm;
    decoder_model_init(&dm, &pl, &ps, &be);
    const int n_seqs = 3;
    const int32_t cu[4] = {0, 7, 12, 21};
    const int64_t T = 21, H = mc.hidden_size;
    int32_t tokens[21], pos[21];
    tl_rng r;
    tl_rng_init(&r, 11);
    for (int64_t t = 0; t < T; t++) tokens[t] = (int32_t)(tl_uniform(&r, 0, 1) * (mc.vocab_size - 1));
    value_head vh;
    value_head_init(&vh, H, 0.5, 3);   // larger than 0.02 so the head's gradient path is well above rounding
    vh.data[H] = 0.25f;
    float *dv = tl_alloc_normal(&r, T, 1.0f);
    decoder_batch b = {T, n_seqs, tokens, cu, pos, 0};
    decoder_batch_positions(&b);
    decoder_acts *a = decoder_acts_new(&mc, T, CKPT_NONE);
    float *hidden = rlc_malloc(sizeof(float) * (size_t)(T * H)), *dh = rlc_calloc((size_t)(T * H), sizeof(float));
    float values[21], dwb[64] = {0};
    decoder_forward(&dm, a, &b, hidden);
    value_head_forward(values, hidden, vh.data, T, H);
    value_head_backward(dh, dwb, dv, hidden, vh.data, T, H);
    param_set grads;
    param_set_init(&grads, &pl);
    decoder_backward_hidden(&dm, a, &b, dh, &grads);
    float tf[21], cuf[4];
    for (int64_t t = 0; t < T; t++) tf[t] = (float)tokens[t];
    for (int i = 0; i <= n_seqs; i++) cuf[i] = (float)cu[i];
    save_f64(mdir, "tokens", tf, T);
    save_f64(mdir, "cu", cuf, n_seqs + 1);
    save_f64(mdir, "wb", vh.data, H + 1);
    save_f64(mdir, "dv", dv, T);
    rc = tl_system("/usr/bin/python3 tests/py/ppo_ref.py critic %s", mdir);
    TL_CHECK(rc == 0, "%s: ppo_ref.py critic exit %d", tag, rc);
    if (rc == 0) {
        char msg[160];
        float *wv = load_in(mdir, "values", NULL), *wwb = load_in(mdir, "wb_grad", NULL);
        snprintf(msg, sizeof msg, "%s: values vs torch float64 (fp32 forward)", tag);
        tl_check_close(msg, values, wv, T, 1e-5);
        snprintf(msg, sizeof msg, "%s: d/d score.weight, score.bias vs torch", tag);
        tl_check_close(msg, dwb, wwb, H + 1, 1e-4);
        double worst = 0;
        const char *worst_name = "";
        int n_cmp = 0;
        for (int k = 0; k < pl.n_tensors; k++) {
            const param_tensor *pt = &pl.tensors[k];
            char name[128], path[4096];
            snprintf(name, sizeof name, "grad.%s", pt->name);
            snprintf(path, sizeof path, "%s/%s.f64", mdir, name);
            if (!rlc_file_exists(path)) continue;   // (an untied lm_head gets no gradient from the value head)
            float *wg = load_in(mdir, name, NULL);
            double e = tl_rel_err(grads.data + pt->offset, wg, pt->numel, NULL);
            if (e > worst) { worst = e; worst_name = pt->name; }
            n_cmp++;
            free(wg);
        }
        // fp32 backward through every layer vs float64: gradients 1e-4
        TL_CHECK(n_cmp >= pl.n_tensors - 1 && worst < 1e-4, "%s: decoder gradients through the value head vs torch: %d "
                 "tensors, worst rel err %.3g (%s)", tag, n_cmp, worst, worst_name);
        printf("  %s: %d decoder tensors' gradients via decoder_backward_hidden, worst rel err %.3g\n", tag, n_cmp, worst);
        free(wv); free(wwb);
    }
    param_set_free(&grads);
    decoder_acts_free(a);
    free(hidden); free(dh); free(dv);
    value_head_free(&vh);
    decoder_model_free(&dm);
    param_set_free(&ps);
    param_layout_free(&pl);
    free(cfgp); free(mdir); free(dir);
}

int main(void) {
    test_spec_vectors();
    if (!tl_have_torch()) {
        tl_skip("PyTorch (/usr/bin/python3 -c 'import torch') not available: the torch comparisons are skipped");
        return tl_summary();
    }
    char *dir = tl_tmpdir("ppo_ref");
    g_dir = dir;
    int rc = tl_system("/usr/bin/python3 tests/py/ppo_ref.py %s 7", dir);
    TL_CHECK(rc == 0, "ppo_ref.py exit %d", rc);
    if (rc == 0) {
        test_gae_torch();
        test_value_loss_torch();
        test_value_head();
    }
    test_critic_decoder("qwen3_tied",
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"vocab_size\": 64, \"hidden_size\": 32,"
        " \"intermediate_size\": 48, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
        " \"head_dim\": 8, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000,"
        " \"tie_word_embeddings\": true, \"hidden_act\": \"silu\", \"attention_bias\": false, \"initializer_range\": 0.2,"
        " \"torch_dtype\": \"float32\"}");
    test_critic_decoder("qwen3_untied",
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"vocab_size\": 64, \"hidden_size\": 32,"
        " \"intermediate_size\": 48, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
        " \"head_dim\": 8, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000,"
        " \"tie_word_embeddings\": false, \"hidden_act\": \"silu\", \"attention_bias\": false, \"initializer_range\": 0.2,"
        " \"torch_dtype\": \"float32\"}");
    free(dir);
    return tl_summary();
}
