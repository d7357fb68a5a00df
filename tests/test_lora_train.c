// test_lora_train.c: `rlc train` with LoRA adapters (actor_rollout_ref.model.lora_rank > 0) end to end on a tiny
// random Qwen3 with a small BPE tokenizer (as tests/test_grpo.c):
//   - with fresh adapters (B = 0) the first step's actor/kl_loss is exactly 0 (the reference is the actor with its
//     adapters off), the start-up line counts the trainable parameters, the checkpoint holds PEFT's adapter folder
//     and no copy of the frozen base;
//   - one GRPO step from a non-zero adapter (lora_adapter_path) equals a PyTorch oracle of the same step
//     (tests/py/lora_grpo_ref.py on the rollouts rlc dumped): updated A and B, loss, kl_loss, grad_norm;
//   - micro-batch invariance: 1 x 8 and 4 x 2 micro-batches give the same adapters;
//   - 2 steps + resume + 2 steps = 4 steps: bitwise the same adapters and metrics;
//   - mpirun -np 2 equals one process (adapters 1e-5, metrics 1e-4);
//   - lora.merge=true trains through merged rollout weights with the same metrics as the side path.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "io/checkpoint.h"
#include "io/peft.h"
#include "testlib.h"

static char *F;          // fixture directory: tok/, m/ (initial model), train.jsonl, base.yaml
static const char *RLC;
static model_config MCFG;

#define LORA "actor_rollout_ref.model.lora_rank=4 actor_rollout_ref.model.lora_alpha=8 "

static int make_fixture(void) {
    F = tl_tmpdir("lora_train");
    int rc = tl_system("%s gen-task --out %s/sft.jsonl --n 200 --seed 1 --format sft >/dev/null && "
                       "%s gen-task --out %s/train.jsonl --n 4 --seed 2 >/dev/null && "
                       "%s train-tokenizer --data %s/sft.jsonl --fields prompt,response --out %s/tok --vocab-size 300 >/dev/null",
                       RLC, F, RLC, F, RLC, F, F);
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
    char *md = rlc_path_join(F, "m");
    param_layout pl;
    param_set ps;
    checkpoint_load(md, &MCFG, &pl, &ps);
    param_set_free(&ps);
    param_layout_free(&pl);
    free(md);
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "data:\n  train_files: %s/train.jsonl\n  train_batch_size: 2\n"
             "  max_prompt_length: 256\n  max_response_length: 12\n  seed: 1\n"
             "actor_rollout_ref:\n  model: {path: %s/m}\n  actor:\n    optim: {lr: 5.0e-3}\n"
             "    ppo_mini_batch_size: 1\n    ppo_micro_batch_size_per_gpu: 2\n    use_kl_loss: true\n"
             "    kl_loss_coef: 0.1\n    entropy_coeff: 0.01\n"
             "  rollout:\n    n: 4\n    temperature: 0.8\n"
             "algorithm: {adv_estimator: grpo}\n"
             "custom_reward_function: {command: /usr/bin/python3 tests/py/grpo_reward.py}\n"
             "trainer:\n  total_epochs: 2\n  test_freq: -1\n  save_freq: 2\n  val_before_train: false\n  n_threads: 1\n",
             F, F);
    char *yp = rlc_path_join(F, "base.yaml");
    CHECK(rlc_write_file_atomic(yp, yaml, strlen(yaml)) == 0, "write %s", yp);
    free(yp);
    return 1;
}

static int train(const char *env, const char *run, const char *overrides) {
    return tl_system("%s %s train %s/base.yaml trainer.default_local_dir=%s/%s %s > %s/%s.log 2>&1", env ? env : "", RLC, F, F,
                     run, overrides, F, run);
}

static char *fpath(const char *a, const char *b) {
    size_t n = strlen(F) + strlen(a) + strlen(b) + 4;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s%s", F, a, b);
    return p;
}

// The adapters of F/<run>/global_step_<step>/actor/lora_adapter (flat, rlc's layout), or NULL.
static float *adapters(const char *run, int step, int64_t *n) {
    char sub[128];
    snprintf(sub, sizeof sub, "/global_step_%d/actor/lora_adapter/adapter_model.safetensors", step);
    char *p = fpath(run, sub);
    int ok = rlc_file_exists(p);
    free(p);
    if (!ok) return NULL;
    snprintf(sub, sizeof sub, "/global_step_%d/actor/lora_adapter", step);
    p = fpath(run, sub);
    lora_layout ll;
    param_set ad;
    peft_load(p, &MCFG, &ll, &ad);
    free(p);
    float *w = malloc(sizeof(float) * (size_t)ll.pl.numel);
    memcpy(w, ad.data, sizeof(float) * (size_t)ll.pl.numel);
    *n = ll.pl.numel;
    param_set_free(&ad);
    lora_layout_free(&ll);
    return w;
}

static cJSON *metrics(const char *run) {
    char *p = fpath(run, "/metrics.jsonl");
    if (!rlc_file_exists(p)) { free(p); return NULL; }
    char *s = rlc_read_file(p, NULL);
    free(p);
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

static int timing_key(const char *k) {
    return !strncmp(k, "timing_s/", 9) || !strncmp(k, "timing_per_token_ms/", 20) || !strcmp(k, "perf/throughput") ||
           !strcmp(k, "perf/time_per_step") || !strncmp(k, "actor/perf/", 11) || !strncmp(k, "perf/max_memory", 15);
}

static int same_metrics(cJSON *a, cJSON *b, char *why, size_t cap) {
    int na = cJSON_GetArraySize(a), nb = cJSON_GetArraySize(b);
    if (na != nb) { snprintf(why, cap, "%d vs %d lines", na, nb); return 0; }
    for (int i = 0; i < na; i++) {
        cJSON *x = cJSON_GetArrayItem(a, i), *y = cJSON_GetArrayItem(b, i);
        for (cJSON *it = x->child; it; it = it->next) {
            if (timing_key(it->string)) continue;
            cJSON *o = cJSON_GetObjectItem(y, it->string);
            int eq = o && ((cJSON_IsNull(it) && cJSON_IsNull(o)) || (cJSON_IsNumber(it) && cJSON_IsNumber(o) && it->valuedouble == o->valuedouble));
            if (!eq) { snprintf(why, cap, "line %d: %s differs", i, it->string); return 0; }
        }
    }
    return 1;
}

static int file_contains(const char *path, const char *needle) {
    if (!rlc_file_exists(path)) return 0;
    char *s = rlc_read_file(path, NULL);
    int r = strstr(s, needle) != NULL;
    free(s);
    return r;
}

// ---------------------------------------------------------------------------------------------------

// Fresh adapters: B = 0, so the policy is the base and the reference (adapters off) equals it bitwise.
static void test_first_step(void) {
    // One mini-batch (the whole step): its KL is measured before any update (a second mini-batch would see moved B).
    // The ref pass uses the update's micro-batches: the same GEMM shapes, so the same rounding (with other shapes
    // BLAS may round rows differently and the KL is ~1e-9 instead of 0).
    int rc = train(NULL, "fresh", LORA "actor_rollout_ref.actor.ppo_mini_batch_size=2 trainer.total_training_steps=1 trainer.save_freq=1 "
                                       "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2");
    TL_CHECK(rc == 0, "rlc train with lora_rank=4 exits 0 (rc %d; see %s/fresh.log)", rc, F);
    if (rc) return;
    cJSON *m = metrics("fresh");
    double kl = mval(m, 0, "actor/kl_loss"), gn = mval(m, 0, "actor/grad_norm");
    TL_CHECK(kl == 0.0, "first step with B = 0: actor/kl_loss is exactly 0 (got %.9g)", kl);
    TL_CHECK(gn > 0 && isfinite(gn), "the adapters get a gradient (grad_norm %g)", gn);
    cJSON_Delete(m);
    char *log = fpath("fresh.log", "");
    // all-linear on 2 layers, r = 4: per layer q (32+32)*4 + k,v (32+16)*4 each + o (32+32)*4 + gate,up (32+64)*4 each +
    // down (64+32)*4 = 4*(64+48+48+64+96+96+96) = 2048; 2 layers = 4096
    TL_CHECK(file_contains(log, "trainable 4.1K /"), "the start-up line counts the trainable parameters (see %s)", log);
    free(log);
    char *cfgp = fpath("fresh", "/global_step_1/actor/lora_adapter/adapter_config.json");
    char *base = fpath("fresh", "/global_step_1/actor/model.safetensors");
    char *opt = fpath("fresh", "/global_step_1/actor/optimizer.bin");
    TL_CHECK(rlc_file_exists(cfgp) && file_contains(cfgp, "\"peft_type\": \"LORA\""), "the checkpoint holds PEFT's adapter folder");
    TL_CHECK(!rlc_file_exists(base), "the checkpoint holds no copy of the frozen base");
    TL_CHECK(rlc_file_exists(opt), "the checkpoint holds the adapters' optimizer state");
    free(cfgp); free(base); free(opt);
    int64_t n = 0;
    float *a = adapters("fresh", 1, &n);
    TL_CHECK(a && n == 4096, "the saved adapter set has 4096 values (%lld)", (long long)n);
    free(a);
}

static void test_oracle(int have_torch) {
    // start from the adapter the first test trained (B != 0): the step's KL and dA are non-zero
    char env[512], o[1024];
    snprintf(env, sizeof env, "RLC_GRPO_DUMP=%s/oracle", F);
    snprintf(o, sizeof o, LORA "actor_rollout_ref.model.lora_adapter_path=%s/fresh/global_step_1/actor/lora_adapter "
             "trainer.total_training_steps=1 trainer.save_freq=1", F);
    int rc = train(env, "oracle_run", o);
    TL_CHECK(rc == 0, "rlc train from lora_adapter_path exits 0 (rc %d; see %s/oracle_run.log)", rc, F);
    if (rc) return;
    if (!have_torch) { tl_skip("RLC_SAN=1 or torch not importable under /usr/bin/python3: LoRA GRPO oracle skipped"); return; }
    const char *plan =
        "{\"temperature\": 0.8, \"lr\": 5e-3, \"beta1\": 0.9, \"beta2\": 0.999, \"eps\": 1e-8, \"weight_decay\": 0.01,"
        " \"clip_grad\": 1.0, \"clip_ratio_low\": 0.2, \"clip_ratio_high\": 0.2, \"clip_ratio_c\": 3.0,"
        " \"entropy_coeff\": 0.01, \"kl_loss_coef\": 0.1, \"ppo_mini_batch_size\": 1, \"micro_batch_size\": 2,"
        " \"base_bf16\": true}";
    char *pp = fpath("oracle/plan.json", "");
    CHECK(rlc_write_file_atomic(pp, plan, strlen(plan)) == 0, "write plan");
    free(pp);
    tl_system("rm -rf %s/oracle/model %s/oracle/adapter && cp -r %s/m %s/oracle/model && "
              "cp -r %s/fresh/global_step_1/actor/lora_adapter %s/oracle/adapter && "
              "/usr/bin/python3 tests/py/lora_grpo_ref.py %s/oracle", F, F, F, F, F, F, F);
    char *rp = fpath("oracle/ref.json", "");
    cJSON *ref = NULL;
    if (rlc_file_exists(rp)) { char *s = rlc_read_file(rp, NULL); ref = cJSON_Parse(s); free(s); }
    free(rp);
    TL_CHECK(ref != NULL, "the PyTorch LoRA GRPO oracle ran");
    if (!ref) return;
    cJSON *m = metrics("oracle_run");
    static const char *keys[] = {"pg_loss", "kl_loss", "entropy_loss", "loss", "grad_norm"};
    for (int k = 0; k < 5; k++) {
        char key[64];
        snprintf(key, sizeof key, "actor/%s", keys[k]);
        double got = mval(m, 0, key), want = cJSON_GetObjectItem(ref, keys[k])->valuedouble;
        printf("%-20s rlc %.9g  torch %.9g\n", key, got, want);
        // fp32 on both sides, different summation orders (~1e-6 relative); the bar is 1e-4
        double scale = fabs(want) > 1e-3 ? fabs(want) : 1e-3;
        TL_CHECK(fabs(got - want) <= 1e-4 * scale, "%s: rlc %.9g vs torch %.9g", key, got, want);
    }
    TL_CHECK(mval(m, 0, "actor/kl_loss") > 0, "from a trained adapter the KL to the base is positive");
    cJSON_Delete(ref);
    cJSON_Delete(m);
    int64_t n = 0;
    float *got = adapters("oracle_run", 1, &n);
    char *bp = fpath("oracle/ref_params.bin", "");
    float *want = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    FILE *f = fopen(bp, "rb");
    int ok = got && f && fread(want, 4, (size_t)n, f) == (size_t)n;
    if (f) fclose(f);
    free(bp);
    TL_CHECK(ok, "updated adapters readable from both");
    // two AdamW steps on fp32 gradients summed in different orders: the bar is 1e-4
    if (ok) tl_check_close("A and B after one LoRA GRPO step vs torch", got, want, n, 1e-4);
    free(got); free(want);
}

static void test_microbatch_invariance(void) {
    const char *common = LORA "trainer.total_training_steps=1 trainer.save_freq=1 actor_rollout_ref.actor.ppo_mini_batch_size=2 "
                              "actor_rollout_ref.actor.optim.lr=1e-3";
    char o[1024];
    snprintf(o, sizeof o, "%s actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8", common);
    int r1 = train(NULL, "mb1x8", o);
    snprintf(o, sizeof o, "%s actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", common);
    int r2 = train(NULL, "mb4x2", o);
    TL_CHECK(r1 == 0 && r2 == 0, "micro-batching runs exit 0 (%d %d)", r1, r2);
    if (r1 || r2) return;
    int64_t n1 = 0, n2 = 0;
    float *w1 = adapters("mb1x8", 1, &n1), *w2 = adapters("mb4x2", 1, &n2);
    TL_CHECK(w1 && w2 && n1 == n2, "two adapter checkpoints");
    // the same global normalisation; only the fp32 gradient summation order differs
    if (w1 && w2) tl_check_close("adapters 4x2 vs 1x8", w2, w1, n1, 1e-5);
    free(w1); free(w2);
}

// 4 steps in one run = 2 steps, then resume_mode=auto for 2 more: the same adapters and metrics, bit for bit
static void test_resume(void) {
    int r1 = train(NULL, "full4", LORA "trainer.total_training_steps=4");
    int r2 = train(NULL, "part", LORA "trainer.total_training_steps=2");
    int r3 = train(NULL, "part", LORA "trainer.total_training_steps=4");
    TL_CHECK(r1 == 0 && r2 == 0 && r3 == 0, "uninterrupted and resumed runs exit 0 (%d %d %d)", r1, r2, r3);
    if (r1 || r2 || r3) return;
    char *log = fpath("part.log", "");
    TL_CHECK(file_contains(log, "resumed from global_step_2"), "the second part resumes from global_step_2");
    free(log);
    int64_t n1 = 0, n2 = 0;
    float *a = adapters("full4", 4, &n1), *b = adapters("part", 4, &n2);
    TL_CHECK(a && b && n1 == n2 && !memcmp(a, b, sizeof(float) * (size_t)n1), "resumed adapters equal the uninterrupted run's bitwise");
    free(a); free(b);
    char *oa = fpath("full4", "/global_step_4/actor/optimizer.bin"), *ob = fpath("part", "/global_step_4/actor/optimizer.bin");
    size_t la, lb;
    char *ba = rlc_read_file(oa, &la), *bb = rlc_read_file(ob, &lb);
    TL_CHECK(la == lb && !memcmp(ba, bb, la), "resumed optimizer state equals the uninterrupted run's bitwise");
    free(ba); free(bb); free(oa); free(ob);
    cJSON *x = metrics("full4"), *y = metrics("part");
    char why[256] = "";
    TL_CHECK(x && y && same_metrics(x, y, why, sizeof why), "metrics equal (%s)", why);
    cJSON_Delete(x); cJSON_Delete(y);
}

// lora.merge=true: the rollout decodes from W + s·B·A refreshed after each update; the trained policy is the same
static void test_merge(void) {
    int r1 = train(NULL, "merge", LORA "actor_rollout_ref.model.lora.merge=true actor_rollout_ref.model.base_dtype=fp32 "
                                       "trainer.total_training_steps=2 trainer.save_freq=-1");
    int r2 = train(NULL, "unmerged", LORA "actor_rollout_ref.model.base_dtype=fp32 trainer.total_training_steps=2 trainer.save_freq=-1");
    TL_CHECK(r1 == 0 && r2 == 0, "merged and unmerged rollout runs exit 0 (%d %d)", r1, r2);
    if (r1 || r2) return;
    cJSON *x = metrics("merge"), *y = metrics("unmerged");
    double d = mval(x, 1, "training/rollout_probs_diff_max");
    printf("lora.merge: step 2 rollout_probs_diff_max %.3g (unmerged %.3g)\n", d, mval(y, 1, "training/rollout_probs_diff_max"));
    // merged weights are rounded differently from the side path, but sample the trained policy: probabilities agree
    TL_CHECK(isnan(d) || d < 1e-3, "merged rollout follows the trained adapters (probs diff max %.3g)", d);
    TL_CHECK(mval(x, 1, "actor/kl_loss") > 0, "the second step's KL is positive (the adapters moved)");
    cJSON_Delete(x); cJSON_Delete(y);
}

// mpirun -np 2 = one process: adapters replicated, gradients all-reduced, each rank trains on half of each mini-batch
static void test_two_ranks(void) {
    if (tl_system("command -v mpirun >/dev/null 2>&1") != 0) { tl_skip("mpirun not found: 2-rank LoRA check skipped"); return; }
    if (tl_system("nm %s 2>/dev/null | grep -q MPI_Init_thread", RLC) != 0) { tl_skip("%s built without MPI: 2-rank check skipped", RLC); return; }
    const char *o = LORA "trainer.total_training_steps=2 trainer.save_freq=2 actor_rollout_ref.actor.optim.lr=1e-3";
    int r1 = train(NULL, "one", o);
    int r2 = tl_system("OMP_NUM_THREADS=1 timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader %s train "
                       "%s/base.yaml trainer.default_local_dir=%s/two %s > %s/two.log 2>&1", RLC, F, F, o, F);
    TL_CHECK(r1 == 0 && r2 == 0, "1-process and 2-rank LoRA runs exit 0 (%d %d; see %s/two.log)", r1, r2, F);
    if (r1 || r2) return;
    int64_t n1 = 0, n2 = 0;
    float *a = adapters("one", 2, &n1), *b = adapters("two", 2, &n2);
    TL_CHECK(a && b && n1 == n2, "two adapter checkpoints");
    // the same global normalisation; the gradient is summed in another order (lr 1e-3: see test_grpo.c)
    if (a && b) tl_check_close("adapters after 2 steps: 2 ranks vs 1 process", b, a, n1, 1e-5);
    free(a); free(b);
    cJSON *x = metrics("one"), *y = metrics("two");
    static const char *keys[] = {"actor/pg_loss", "actor/kl_loss", "actor/loss", "actor/grad_norm", "critic/score/mean"};
    for (int line = 0; line < 2; line++)
        for (int k = 0; k < 5; k++) {
            double u = mval(x, line, keys[k]), v = mval(y, line, keys[k]);
            double sc = fabs(u) > 1e-3 ? fabs(u) : 1e-3;
            // pg_loss (and the loss that holds it) is a token mean of -A·ratio with GRPO's advantages of unit std
            // summing to ~0: its error is that of the O(1) terms (the ratio's ~1e-7 from per-rank micro-batch
            // shapes), not a fraction of the small mean. Seen: 3.2e-7 on 1.2e-3 in the sanitizer build.
            if (k == 0 || k == 2) sc = fmax(sc, 0.1);
            TL_CHECK(fabs(u - v) <= 1e-4 * sc, "step %d %s: 1 process %.9g, 2 ranks %.9g", line + 1, keys[k], u, v);
        }
    cJSON_Delete(x); cJSON_Delete(y);
    char *log = fpath("two.log", "");
    TL_CHECK(file_contains(log, "LoRA per rank"), "the 2-rank run reports its per-rank memory");
    free(log);
}

static void test_errors(void) {
    int rc = tl_system("%s train %s/base.yaml trainer.default_local_dir=%s/err actor_rollout_ref.model.lora_rank=4 "
                       "actor_rollout_ref.model.target_modules=nothing_proj > %s/err.log 2>&1", RLC, F, F, F);
    char *log = fpath("err.log", "");
    TL_CHECK(rc != 0 && file_contains(log, "target_modules"), "a target matching no module is a one-line error naming the key");
    free(log);
    // the bf16 base loader's checks: a tensor whose shape is not the config's
    rc = tl_system("rm -rf %s/mbad && cp -r %s/m %s/mbad && sed -i -E 's/(\"intermediate_size\":[[:space:]]*)64/\\148/' %s/mbad/config.json && "
                   "%s train %s/base.yaml trainer.default_local_dir=%s/err3 actor_rollout_ref.model.lora_rank=4 "
                   "actor_rollout_ref.model.path=%s/mbad > %s/err3.log 2>&1", F, F, F, F, RLC, F, F, F, F);
    log = fpath("err3.log", "");
    TL_CHECK(rc != 0 && file_contains(log, "mlp.gate_proj.weight' does not have the shape"),
             "a base tensor of the wrong shape is a one-line error naming it (bf16 base load)");
    free(log);
    rc = tl_system("%s train %s/base.yaml trainer.default_local_dir=%s/err2 actor_rollout_ref.model.lora_rank=4 "
                   "actor_rollout_ref.model.base_dtype=fp16 > %s/err2.log 2>&1", RLC, F, F, F);
    log = fpath("err2.log", "");
    TL_CHECK(rc != 0 && file_contains(log, "base_dtype"), "base_dtype other than bf16/fp32 is an error naming the key");
    free(log);
}

int main(void) {
    RLC = tl_rlc_bin();
    if (!rlc_file_exists(RLC)) { tl_skip("%s not built", RLC); return tl_summary(); }
    if (!rlc_file_exists("/usr/bin/python3")) { tl_skip("/usr/bin/python3 missing (the tests' reward script)"); return tl_summary(); }
    if (!make_fixture()) { TL_CHECK(0, "fixture (gen-task, train-tokenizer, init) in %s", F); return tl_summary(); }
    // under the sanitizers (every rlc run several times slower) the PyTorch oracle is left out
    int san = getenv("RLC_SAN") && !strcmp(getenv("RLC_SAN"), "1");
    int have_torch = !san && tl_have_torch();
    test_first_step();
    test_oracle(have_torch);
    test_microbatch_invariance();
    test_resume();
    test_merge();
    test_two_ranks();
    test_errors();
    if (tl_failed == 0) tl_system("rm -rf %s", F);
    else printf("fixture and logs kept in %s\n", F);
    free(F);
    return tl_summary();
}
