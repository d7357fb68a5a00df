// test_ppo.c: the critic's pieces against the spec's test vectors (shared/spec/verl-ppo.md §1.4-1.5) and an
// independent PyTorch reference (tests/py/ppo_ref.py): GAE with whitening (gamma, lam = 1 and < 1), the clipped
// value loss and its gradient (clipping on both sides, exact bounds, the v == V_old tie, every aggregation mode with
// global batch info), the value head forward/backward (fast vs _ref vs torch), and the value head on the decoder:
// values and the gradients of every decoder tensor through decoder_backward_hidden against qwen3_ref.py in float64.
// End to end (`rlc train` with algorithm.adv_estimator=gae on a tiny random Qwen3, as tests/test_grpo.c):
//   - one full PPO step (critic and actor, KL in the reward and as a loss) equals a PyTorch oracle of the same step
//     (tests/py/ppo_step_ref.py): both models' updated weights, the losses, grad norms and metrics, and the critic
//     checkpoint read on the torch side with token-classification names;
//   - micro-batch invariance of the critic update; 4 steps = 2 steps + resume + 2 steps with a critic, bitwise;
//   - trainer.critic_warmup with verl's 1-based step count;
//   - a critic from a checkpoint with an untied lm_head is built without it (size line, saved checkpoint, resume);
//   - rollout correction in the trainer (decoupled IS + rejection metrics, bypass_mode, one-line errors);
//   - gae with critic.enable=false is a one-line error.
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
#include "io/safetensors.h"
#include "testlib.h"
#include "rl_testutil.h"

#include <cjson/cJSON.h>

static const char *g_dir;

static float *load(const char *name, int64_t *n) { return tu_load_f32(g_dir, name, n); }

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
        float *wv = tu_load_f32(mdir, "values", NULL), *wwb = tu_load_f32(mdir, "wb_grad", NULL);
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
            float *wg = tu_load_f32(mdir, name, NULL);
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

// ---------------------------------------------------------------------------------------------------
// end to end

static char *F;          // fixture: tok/, m/ (initial model), critic/ (initial value model), train.jsonl, val.jsonl, base.yaml
static const char *RLC;

static int make_fixture(void) {
    F = tl_tmpdir("ppo");
    int rc = tl_system("%s gen-task --out %s/sft.jsonl --n 200 --seed 1 --format sft >/dev/null && "
                       "%s gen-task --out %s/train.jsonl --n 4 --seed 2 >/dev/null && "
                       "%s gen-task --out %s/val.jsonl --n 2 --seed 3 >/dev/null && "
                       "%s train-tokenizer --data %s/sft.jsonl --fields prompt,response --out %s/tok --vocab-size 300 >/dev/null",
                       RLC, F, RLC, F, RLC, F, RLC, F, F);
    if (rc != 0) return 0;
    char *cj = rlc_path_join(F, "config.json");
    const char *cfg =
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"vocab_size\": 320, \"hidden_size\": 32,\n"
        " \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,\n"
        " \"head_dim\": 8, \"max_position_embeddings\": 512, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000,\n"
        " \"tie_word_embeddings\": true, \"bos_token_id\": null, \"eos_token_id\": 302, \"hidden_act\": \"silu\",\n"
        " \"attention_bias\": false, \"attention_dropout\": 0.0, \"use_sliding_window\": false, \"sliding_window\": null,\n"
        " \"max_window_layers\": 2, \"initializer_range\": 0.5, \"torch_dtype\": \"float32\"}\n";
    CHECK(rlc_write_file_atomic(cj, cfg, strlen(cfg)) == 0, "write %s", cj);
    rc = tl_system("%s init --config %s --out %s/m --seed 3 --dtype f32 --tokenizer %s/tok >/dev/null", RLC, cj, F, F);
    free(cj);
    if (rc != 0) return 0;
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "data:\n  train_files: %s/train.jsonl\n  val_files: %s/val.jsonl\n  train_batch_size: 2\n"
             "  max_prompt_length: 256\n  max_response_length: 24\n  seed: 1\n"
             "actor_rollout_ref:\n  model: {path: %s/m}\n  actor:\n    optim: {lr: 5.0e-3}\n"
             "    ppo_mini_batch_size: 1\n    ppo_micro_batch_size_per_gpu: 2\n    use_kl_loss: true\n"
             "    kl_loss_coef: 0.1\n    entropy_coeff: 0.01\n"
             "  rollout:\n    n: 4\n    temperature: 0.8\n"
             "algorithm: {adv_estimator: gae, gamma: 0.99, lam: 0.95, use_kl_in_reward: true, kl_ctrl: {kl_coef: 0.05}}\n"
             "critic:\n  ppo_mini_batch_size: 1\n  ppo_micro_batch_size_per_gpu: 2\n  optim: {lr: 5.0e-3}\n"
             "custom_reward_function: {command: /usr/bin/python3 tests/py/grpo_reward.py}\n"
             "trainer:\n  total_epochs: 2\n  test_freq: -1\n  save_freq: 2\n  val_before_train: false\n  n_threads: 1\n",
             F, F, F);
    char *yp = rlc_path_join(F, "base.yaml");
    CHECK(rlc_write_file_atomic(yp, yaml, strlen(yaml)) == 0, "write %s", yp);
    free(yp);
    return 1;
}

static int train(const char *env, const char *run, const char *overrides) {
    return tl_system("%s %s train %s/base.yaml trainer.default_local_dir=%s/%s %s > %s/%s.log 2>&1", env ? env : "", RLC, F, F,
                     run, overrides, F, run);
}

// Every tensor of F/<rel> (a safetensors file) as fp32, in header order, or NULL.
static float *st_all(const char *rel, int64_t *n) {
    char *p = rlc_path_join(F, rel);
    if (!rlc_file_exists(p)) { free(p); return NULL; }
    st_file f;
    st_file_open(&f, p);
    int64_t tot = 0;
    for (int i = 0; i < f.n_tensors; i++) tot += f.tensors[i].numel;
    float *x = rlc_malloc(sizeof(float) * (size_t)(tot ? tot : 1));
    int64_t off = 0;
    for (int i = 0; i < f.n_tensors; i++) { st_tensor_to_f32(&f.tensors[i], x + off, p); off += f.tensors[i].numel; }
    st_file_close(&f);
    free(p);
    *n = tot;
    return x;
}

static cJSON *metrics(const char *run) {
    char *p = rlc_path_join(F, run);
    char *q = rlc_path_join(p, "metrics.jsonl");
    free(p);
    if (!rlc_file_exists(q)) { free(q); return NULL; }
    char *s = rlc_read_file(q, NULL);
    free(q);
    cJSON *arr = cJSON_CreateArray();
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        if (o) cJSON_AddItemToArray(arr, o);
    }
    free(s);
    return arr;
}

static double mval(cJSON *arr, int line, const char *key) {
    cJSON *o = cJSON_GetArrayItem(arr, line);
    cJSON *v = o ? cJSON_GetObjectItem(o, key) : NULL;
    return v && cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void test_ppo_oracle(void) {
    int rc = tl_system("mkdir -p %s/oracle && /usr/bin/python3 tests/py/ppo_step_ref.py make_critic %s/m %s/critic", F, F, F);
    TL_CHECK(rc == 0, "ppo_step_ref.py make_critic exit %d", rc);
    if (rc != 0) return;
    char env[512];
    snprintf(env, sizeof env, "RLC_GRPO_DUMP=%s/oracle", F);
    char ov[1024];
    snprintf(ov, sizeof ov, "trainer.total_training_steps=1 trainer.save_freq=1 critic.model.path=%s/critic", F);
    rc = train(env, "oracle/run", ov);
    TL_CHECK(rc == 0, "rlc train (1 PPO step with a critic) exits 0 (rc %d; see %s/oracle/run.log)", rc, F);
    if (rc != 0) return;
    const char *plan =
        "{\"temperature\": 0.8, \"lr\": 5e-3, \"critic_lr\": 5e-3, \"beta1\": 0.9, \"beta2\": 0.999, \"eps\": 1e-8,"
        " \"weight_decay\": 0.01, \"clip_grad\": 1.0, \"critic_clip_grad\": 1.0, \"clip_ratio\": 0.2, \"clip_ratio_c\": 3.0,"
        " \"entropy_coeff\": 0.01, \"kl_loss_coef\": 0.1, \"kl_coef\": 0.05, \"gamma\": 0.99, \"lam\": 0.95,"
        " \"cliprange_value\": 0.5, \"ppo_mini_batch_size\": 1, \"micro_batch_size\": 2, \"critic_mini\": 1,"
        " \"critic_micro\": 2}";
    char *pp = rlc_path_join(F, "oracle/plan.json");
    CHECK(rlc_write_file_atomic(pp, plan, strlen(plan)) == 0, "write plan");
    free(pp);
    rc = tl_system("rm -rf %s/oracle/model %s/oracle/critic && cp -r %s/m %s/oracle/model && cp -r %s/critic %s/oracle/critic && "
                   "/usr/bin/python3 tests/py/ppo_step_ref.py %s/oracle", F, F, F, F, F, F, F);
    TL_CHECK(rc == 0, "the PyTorch PPO oracle ran (exit %d)", rc);
    char *rp = rlc_path_join(F, "oracle/ref.json");
    cJSON *ref = NULL;
    if (rc == 0 && rlc_file_exists(rp)) { char *t = rlc_read_file(rp, NULL); ref = cJSON_Parse(t); free(t); }
    free(rp);
    cJSON *m = metrics("oracle/run");
    if (!ref || !m) { cJSON_Delete(ref); cJSON_Delete(m); TL_CHECK(0, "oracle output and metrics"); return; }
    static const char *keys[] = {"critic/vf_loss", "critic/grad_norm", "critic/vpred_mean", "critic/values/mean",
                                 "critic/returns/mean", "actor/pg_loss", "actor/grad_norm"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        double got = mval(m, 0, keys[k]), want = cJSON_GetObjectItem(ref, keys[k])->valuedouble;
        printf("  %-22s rlc %.9g  torch %.9g\n", keys[k], got, want);
        // fp32 on both sides with different summation orders (~1e-6 relative); the bar is 1e-4. pg_loss
        // of whitened advantages at ratio 1 is a cancellation near 0: compared against the scale 1e-3.
        double scale = fabs(want) > 1e-3 ? fabs(want) : 1e-3;
        TL_CHECK(fabs(got - want) <= 1e-4 * scale, "%s: rlc %.9g vs torch %.9g", keys[k], got, want);
    }
    double cf = mval(m, 0, "critic/vf_clipfrac"), cft = cJSON_GetObjectItem(ref, "critic/vf_clipfrac")->valuedouble;
    // a count fraction: equal counts; torch's masked_mean divides in fp32, rlc's in double (1e-7 relative)
    TL_CHECK(fabs(cf - cft) <= 1e-6 * fabs(cft), "critic/vf_clipfrac: rlc %.9g vs torch %.9g (a count fraction)", cf, cft);
    const char *arch = cJSON_GetStringValue(cJSON_GetObjectItem(ref, "critic_arch"));
    TL_CHECK(arch && !strcmp(arch, "Qwen3ForTokenClassification"), "critic config.json architectures: %s", arch ? arch : "?");
    TL_CHECK(cJSON_GetObjectItem(ref, "critic_num_labels")->valueint == 1, "critic config.json num_labels 1");
    TL_CHECK(cJSON_IsTrue(cJSON_GetObjectItem(ref, "critic_names_match")),
             "critic checkpoint tensors have the token-classification names (model.*, score.weight, score.bias)");
    char *shp = cJSON_PrintUnformatted(cJSON_GetObjectItem(ref, "critic_score_shapes"));
    TL_CHECK(!strcmp(shp, "[[1,32],[1]]"), "score.weight [1, H], score.bias [1]: %s", shp);
    free(shp);
    double cw = cJSON_GetObjectItem(ref, "critic_weights_rel")->valuedouble, cu = cJSON_GetObjectItem(ref, "critic_update_rel")->valuedouble;
    double aw = cJSON_GetObjectItem(ref, "actor_weights_rel")->valuedouble;
    printf("  weights vs torch: critic %.3g (its update %.3g), actor %.3g\n", cw, cu, aw);
    // two AdamW steps per model (one per mini-batch) on fp32 gradients: the bar is 1e-4
    TL_CHECK(cw <= 1e-4, "critic weights after one PPO step vs torch: rel err %.3g", cw);
    TL_CHECK(aw <= 1e-4, "actor weights after one PPO step vs torch: rel err %.3g", aw);
    cJSON_Delete(ref);
    cJSON_Delete(m);
}

// The critic's update does not depend on its micro-batching: 1 x 8, 4 x 2 and balanced dynamic batches.
static void test_critic_microbatch_invariance(void) {
    const char *runs[3] = {"mb8", "mb2", "mbdyn"};
    const char *ov[3] = {"critic.ppo_mini_batch_size=2 critic.ppo_micro_batch_size_per_gpu=8",
                         "critic.ppo_mini_batch_size=2 critic.ppo_micro_batch_size_per_gpu=2",
                         "critic.ppo_mini_batch_size=2 critic.use_dynamic_bsz=true critic.ppo_max_token_len_per_gpu=400"};
    float *w[3] = {NULL, NULL, NULL};
    double vf[3] = {0, 0, 0};
    int64_t n = 0;
    for (int k = 0; k < 3; k++) {
        char o[512];
        snprintf(o, sizeof o, "trainer.total_training_steps=1 trainer.save_freq=1 %s", ov[k]);
        int rc = train(NULL, runs[k], o);
        TL_CHECK(rc == 0, "rlc train %s exits 0 (rc %d)", runs[k], rc);
        char rel[128];
        snprintf(rel, sizeof rel, "%s/global_step_1/critic/model.safetensors", runs[k]);
        w[k] = st_all(rel, &n);
        cJSON *m = metrics(runs[k]);
        vf[k] = m ? mval(m, 0, "critic/vf_loss") : NAN;
        cJSON_Delete(m);
    }
    if (w[0] && w[1] && w[2]) {
        // one AdamW step on gradients summed in different orders: fp32 noise, 1e-5 of the weights
        tl_check_close("critic weights: 4 micro-batches of 2 vs 1 of 8", w[1], w[0], n, 1e-5);
        tl_check_close("critic weights: dynamic batches vs 1 of 8", w[2], w[0], n, 1e-5);
        TL_CHECK(fabs(vf[1] - vf[0]) <= 1e-5 * fabs(vf[0]) && fabs(vf[2] - vf[0]) <= 1e-5 * fabs(vf[0]),
                 "critic/vf_loss invariant to micro-batching: %.9g %.9g %.9g", vf[0], vf[1], vf[2]);
    }
    for (int k = 0; k < 3; k++) free(w[k]);
}

// 4 steps straight = 2 steps, then a resumed run to 4 (an epoch boundary in between): bitwise the same weights of
// both models, optimizer states and metrics.
static void test_resume(void) {
    int rc = train(NULL, "straight", "trainer.total_training_steps=4");
    TL_CHECK(rc == 0, "4 PPO steps (rc %d)", rc);
    rc = train(NULL, "resumed", "trainer.total_training_steps=2");
    TL_CHECK(rc == 0, "2 PPO steps (rc %d)", rc);
    rc = train(NULL, "resumed", "trainer.total_training_steps=4");
    TL_CHECK(rc == 0, "resumed to 4 steps (rc %d)", rc);
    char *log = rlc_path_join(F, "resumed.log");
    char *t = rlc_file_exists(log) ? rlc_read_file(log, NULL) : NULL;
    TL_CHECK(t && strstr(t, "resumed from global_step_2"), "the second run resumed from global_step_2");
    free(t);
    free(log);
    static const char *files[] = {"critic/model.safetensors", "critic/optimizer.bin", "critic/value_head_optimizer.bin",
                                  "actor/model.safetensors", "actor/optimizer.bin"};
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char a[256], b[256];
        snprintf(a, sizeof a, "straight/global_step_4/%s", files[k]);
        snprintf(b, sizeof b, "resumed/global_step_4/%s", files[k]);
        char *pa = rlc_path_join(F, a), *pb = rlc_path_join(F, b);
        size_t la = 0, lb = 0;
        char *x = rlc_file_exists(pa) ? rlc_read_file(pa, &la) : NULL, *y = rlc_file_exists(pb) ? rlc_read_file(pb, &lb) : NULL;
        TL_CHECK(x && y && la == lb && !memcmp(x, y, la), "resume with a critic is bit-identical: %s", files[k]);
        free(x); free(y); free(pa); free(pb);
    }
    cJSON *ma = metrics("straight"), *mb = metrics("resumed");
    int same = ma && mb && cJSON_GetArraySize(ma) == 4 && cJSON_GetArraySize(mb) == 4;
    static const char *keys[] = {"critic/vf_loss", "critic/vf_explained_var", "critic/values/mean", "critic/grad_norm",
                                 "actor/pg_loss", "critic/score/mean"};
    for (int l = 0; same && l < 4; l++)
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) same &= mval(ma, l, keys[k]) == mval(mb, l, keys[k]);
    TL_CHECK(same, "resumed metrics equal the straight run's, bitwise");
    cJSON_Delete(ma);
    cJSON_Delete(mb);
}

// trainer.critic_warmup counts verl's 1-based steps: k gives k - 1 critic-only steps (1: none).
static void test_critic_warmup(void) {
    int rc1 = train(NULL, "warm1", "trainer.total_training_steps=2 trainer.save_freq=-1 trainer.critic_warmup=1");
    int rc2 = train(NULL, "warm2", "trainer.total_training_steps=2 trainer.save_freq=-1 trainer.critic_warmup=2");
    TL_CHECK(rc1 == 0 && rc2 == 0, "critic_warmup runs (rc %d, %d)", rc1, rc2);
    cJSON *a = metrics("warm1"), *b = metrics("warm2");
    TL_CHECK(a && b && !isnan(mval(a, 0, "actor/grad_norm")) && !isnan(mval(a, 1, "actor/grad_norm")),
             "critic_warmup=1: the actor is updated from the first step");
    TL_CHECK(a && b && isnan(mval(b, 0, "actor/grad_norm")) && !isnan(mval(b, 0, "critic/grad_norm")) &&
             !isnan(mval(b, 1, "actor/grad_norm")), "critic_warmup=2: one critic-only step, then the actor");
    cJSON_Delete(a);
    cJSON_Delete(b);
}

// A critic from a checkpoint with an untied lm_head (critic.model.path): the value model is built without it, so
// its parameter count (the size line) is the checkpoint's minus V x H, the saved critic has no lm_head.weight and
// keeps the checkpoint's config, and a resumed run repeats a straight one bitwise.
static void test_critic_untied(void) {
    char *cj = rlc_path_join(F, "config_untied.json");
    char *src = rlc_path_join(F, "config.json");
    char *t = rlc_read_file(src, NULL);
    char *p = strstr(t, "\"tie_word_embeddings\": true");
    TL_CHECK(p != NULL, "fixture config is tied");
    if (!p) { free(t); free(src); free(cj); return; }
    char *u = rlc_malloc(strlen(t) + 8);
    snprintf(u, strlen(t) + 8, "%.*s\"tie_word_embeddings\": false%s", (int)(p - t), t, p + strlen("\"tie_word_embeddings\": true"));
    CHECK(rlc_write_file_atomic(cj, u, strlen(u)) == 0, "write %s", cj);
    int rc = tl_system("%s init --config %s --out %s/mu --seed 4 --dtype f32 --tokenizer %s/tok >/dev/null", RLC, cj, F, F);
    TL_CHECK(rc == 0, "init an untied model (rc %d)", rc);
    free(t); free(u); free(src); free(cj);
    if (rc != 0) return;
    // the checkpoint's parameters without its lm_head
    char *mp = rlc_path_join(F, "mu/model.safetensors");
    st_file f;
    st_file_open(&f, mp);
    int64_t backbone = 0, head = 0;
    for (int i = 0; i < f.n_tensors; i++) {
        if (!strcmp(f.tensors[i].name, "lm_head.weight")) head = f.tensors[i].numel;
        else backbone += f.tensors[i].numel;
    }
    st_file_close(&f);
    free(mp);
    TL_CHECK(head == 320 * 32, "the untied checkpoint has lm_head.weight [V, H] (%lld)", (long long)head);
    char ov[1024];
    snprintf(ov, sizeof ov, "critic.model.path=%s/mu trainer.total_training_steps=2 trainer.save_freq=1", F);
    rc = train(NULL, "untied", ov);
    TL_CHECK(rc == 0, "PPO with a critic from an untied checkpoint (rc %d)", rc);
    char *log = rlc_path_join(F, "untied.log");
    t = rlc_file_exists(log) ? rlc_read_file(log, NULL) : NULL;
    char want[160];
    snprintf(want, sizeof want, "rlc: critic: %lld backbone parameters + value head 33 (fresh); no lm_head (the checkpoint's "
             "untied one is not loaded); params+grads+AdamW m,v %.3f MiB", (long long)backbone,
             (double)(backbone + 33) * 16.0 / (1024.0 * 1024.0));
    TL_CHECK(t && strstr(t, want), "the critic's size line counts no lm_head: want '%s'", want);
    free(t);
    free(log);
    char *cp = rlc_path_join(F, "untied/global_step_2/critic/model.safetensors");
    int has_lm = -1, has_score = 0;
    if (rlc_file_exists(cp)) {
        st_file_open(&f, cp);
        has_lm = 0;
        for (int i = 0; i < f.n_tensors; i++) {
            has_lm |= !strcmp(f.tensors[i].name, "lm_head.weight");
            has_score += !strcmp(f.tensors[i].name, "score.weight") || !strcmp(f.tensors[i].name, "score.bias");
        }
        st_file_close(&f);
    }
    TL_CHECK(has_lm == 0 && has_score == 2, "the saved critic has score.weight/bias and no lm_head.weight (%d, %d)", has_lm, has_score);
    free(cp);
    char *cc = rlc_path_join(F, "untied/global_step_2/critic/config.json");
    t = rlc_file_exists(cc) ? rlc_read_file(cc, NULL) : NULL;
    cJSON *o = t ? cJSON_Parse(t) : NULL;
    TL_CHECK(o && cJSON_IsFalse(cJSON_GetObjectItem(o, "tie_word_embeddings")), "the critic's config.json keeps tie_word_embeddings false");
    cJSON_Delete(o);
    free(t);
    free(cc);
    // resume: 1 step, then to 2, equals the straight run bitwise
    snprintf(ov, sizeof ov, "critic.model.path=%s/mu trainer.total_training_steps=1 trainer.save_freq=1", F);
    rc = train(NULL, "untied_r", ov);
    snprintf(ov, sizeof ov, "critic.model.path=%s/mu trainer.total_training_steps=2 trainer.save_freq=1", F);
    rc |= train(NULL, "untied_r", ov);
    TL_CHECK(rc == 0, "untied critic: 1 step, then resumed to 2 (rc %d)", rc);
    static const char *files[] = {"critic/model.safetensors", "critic/optimizer.bin", "critic/value_head_optimizer.bin",
                                  "actor/model.safetensors"};
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char a[256], b[256];
        snprintf(a, sizeof a, "untied/global_step_2/%s", files[k]);
        snprintf(b, sizeof b, "untied_r/global_step_2/%s", files[k]);
        char *pa = rlc_path_join(F, a), *pb = rlc_path_join(F, b);
        size_t la = 0, lb = 0;
        char *x = rlc_file_exists(pa) ? rlc_read_file(pa, &la) : NULL, *y = rlc_file_exists(pb) ? rlc_read_file(pb, &lb) : NULL;
        TL_CHECK(x && y && la == lb && !memcmp(x, y, la), "untied critic: resume is bit-identical: %s", files[k]);
        free(x); free(y); free(pa); free(pb);
    }
}

// Rollout correction in the trainer: decoupled IS weights + rejection (the rollout_corr/* metrics; rlc's sampler and
// trainer agree, so the weights are 1 up to rounding and nothing is rejected), bypass_mode (no old_log_prob pass),
// and one-line errors for bad values.
static void test_rollout_correction(void) {
    int rc = train(NULL, "rcorr", "trainer.total_training_steps=1 trainer.save_freq=-1 algorithm.rollout_correction.rollout_is=token "
                   "algorithm.rollout_correction.rollout_rs=token_k1,seq_mean_k3 algorithm.rollout_correction.rollout_rs_threshold=2,0.01");
    TL_CHECK(rc == 0, "PPO with decoupled rollout correction (rc %d)", rc);
    cJSON *a = metrics("rcorr");
    double ism = a ? mval(a, 0, "rollout_corr/rollout_is_mean") : NAN, rsf = a ? mval(a, 0, "rollout_corr/rollout_rs_masked_fraction") : NAN;
    double kl = a ? mval(a, 0, "rollout_corr/kl") : NAN, k1 = a ? mval(a, 0, "rollout_corr/rollout_rs_token_k1_mean") : NAN;
    TL_CHECK(fabs(ism - 1.0) < 1e-4 && rsf == 0.0 && fabs(kl) < 1e-4 && fabs(k1) < 1e-4,
             "rollout_corr/*: IS mean %.9g ~ 1, rejected %.3g = 0, kl %.3g ~ 0, token_k1 mean %.3g ~ 0", ism, rsf, kl, k1);
    cJSON_Delete(a);
    rc = train(NULL, "bypass", "trainer.total_training_steps=1 trainer.save_freq=-1 algorithm.rollout_correction.bypass_mode=true "
               "algorithm.rollout_correction.loss_type=reinforce algorithm.rollout_correction.rollout_is=sequence");
    TL_CHECK(rc == 0, "PPO with bypass_mode (rc %d)", rc);
    a = metrics("bypass");
    TL_CHECK(a && isnan(mval(a, 0, "timing_s/old_log_prob")) && isfinite(mval(a, 0, "actor/pg_loss")) &&
             isfinite(mval(a, 0, "actor/entropy")) && isfinite(mval(a, 0, "rollout_corr/rollout_is_seq_mean")) &&
             isfinite(mval(a, 0, "rollout_corr/chi2_seq")),
             "bypass_mode: no old_log_prob pass, a finite actor loss; actor/entropy and rollout_corr/* from the update");
    cJSON_Delete(a);
    // One mini-batch of one micro-batch: the update's forward runs on the rollout's weights, so bypass_mode's
    // actor/entropy and rollout_corr/* equal what the decoupled step measures in its old_log_prob pass (token-mean
    // over the same tokens; 1e-5: the training and inference forwards round differently).
    const char *one = "trainer.total_training_steps=1 trainer.save_freq=-1 actor_rollout_ref.actor.ppo_mini_batch_size=2 "
                      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8";
    char ov[512];
    snprintf(ov, sizeof ov, "%s algorithm.rollout_correction.bypass_mode=true", one);
    rc = train(NULL, "bypass1", ov) | train(NULL, "decoupled1", one);
    TL_CHECK(rc == 0, "bypass_mode and decoupled with one micro-batch (rc %d)", rc);
    a = metrics("bypass1");
    cJSON *b = metrics("decoupled1");
    static const char *same[] = {"actor/entropy", "rollout_corr/training_ppl", "rollout_corr/rollout_ppl",
                                 "rollout_corr/training_log_ppl", "rollout_corr/ppl_ratio"};
    for (size_t k = 0; k < sizeof same / sizeof same[0]; k++) {
        double x = a ? mval(a, 0, same[k]) : NAN, y = b ? mval(b, 0, same[k]) : NAN;
        TL_CHECK(fabs(x - y) <= 1e-5 * fabs(y), "bypass_mode %s %.9g == decoupled %.9g", same[k], x, y);
    }
    double kb = a ? mval(a, 0, "rollout_corr/kl") : NAN;
    TL_CHECK(fabs(kb) < 1e-5, "bypass_mode rollout_corr/kl %.3g ~ 0 on the rollout's weights", kb);
    cJSON_Delete(a);
    cJSON_Delete(b);
    // without an entropy term (entropy_coeff 0, calculate_entropy false) bypass_mode reports no actor/entropy
    snprintf(ov, sizeof ov, "%s algorithm.rollout_correction.bypass_mode=true actor_rollout_ref.actor.entropy_coeff=0", one);
    rc = train(NULL, "bypass0", ov);
    a = metrics("bypass0");
    TL_CHECK(rc == 0 && a && isnan(mval(a, 0, "actor/entropy")) && isnan(mval(a, 0, "actor/entropy_loss")) &&
             isfinite(mval(a, 0, "rollout_corr/kl")), "bypass_mode without entropy: no actor/entropy (rc %d)", rc);
    cJSON_Delete(a);
    static const char *bad[][2] = {
        {"algorithm.rollout_correction.rollout_rs=token_k4 algorithm.rollout_correction.rollout_rs_threshold=2", "unknown option 'token_k4'"},
        {"algorithm.rollout_correction.rollout_rs=token_k2 algorithm.rollout_correction.rollout_rs_threshold=0.5_2", "takes one upper bound"},
        {"algorithm.rollout_correction.rollout_rs=token_k2", "rollout_rs_threshold"},
        {"algorithm.rollout_correction.rollout_is=token algorithm.rollout_correction.rollout_is_threshold=3_2", "lower bound 3 > upper bound 2"},
        {"algorithm.rollout_correction.rollout_rs=token_k1,token_k2,token_k3 algorithm.rollout_correction.rollout_rs_threshold=2,0.1", "2 entries for 3"},
        {"algorithm.rollout_correction.bypass_mode=true actor_rollout_ref.rollout.calculate_log_probs=false", "calculate_log_probs=true"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        rc = train(NULL, "err_rc", bad[k][0]);
        char *log = rlc_path_join(F, "err_rc.log");
        char *t = rlc_file_exists(log) ? rlc_read_file(log, NULL) : NULL;
        int lines = 0;   // the lines other than warnings (the fixture config warns that both KL terms are on)
        for (char *q = t; q && *q; q = strchr(q, '\n') ? strchr(q, '\n') + 1 : q + strlen(q))
            lines += strncmp(q, "rlc: warning:", 13) != 0;
        TL_CHECK(rc != 0 && t && strstr(t, bad[k][1]) && lines == 1, "%s: one error line (rc %d): %s", bad[k][0], rc, t ? t : "");
        free(t);
        free(log);
    }
}

static void test_errors(void) {
    int rc = train(NULL, "err_gae", "critic.enable=false");
    char *log = rlc_path_join(F, "err_gae.log");
    char *t = rlc_file_exists(log) ? rlc_read_file(log, NULL) : NULL;
    int lines = 0;
    for (char *q = t; q && *q; q++) lines += *q == '\n';
    TL_CHECK(rc != 0 && t && strstr(t, "critic.enable=false") && lines == 1,
             "gae with critic.enable=false: one error line (rc %d): %s", rc, t ? t : "");
    free(t);
    free(log);
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
    if (!getenv("RLC_SAN")) {   // end to end: seconds of training each, skipped in the sanitizer run
        RLC = tl_rlc_bin();
        TL_CHECK(make_fixture(), "fixture (gen-task, train-tokenizer, init)");
        if (F) {
            test_errors();
            test_critic_warmup();
            test_ppo_oracle();
            test_critic_microbatch_invariance();
            test_resume();
            test_critic_untied();
            test_rollout_correction();
        }
    }
    return tl_summary();
}
