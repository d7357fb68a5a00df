// test_dapo_train.c: DAPO in `rlc train` end to end on a tiny random Qwen3 (the fixture of test_grpo.c) with a
// reward whose "acc" is equal across about half the groups (tests/py/dapo_train_reward.py):
//   - dynamic sampling (algorithm.filter_groups, data.gen_batch_size) and the overlong penalty over 3 steps equal an
//     independent reference of the recipe's loop (tests/py/dapo_train_ref.py) on the batches rlc dumped: the shaped
//     scores, which groups are kept, the training batch and train/num_gen_batches;
//   - a run with resume in the middle repeats an uninterrupted one bit for bit (weights and metrics);
//   - an exhausted max_num_gen_batches is the recipe's error; epochs running out mid-collection end the run cleanly;
//   - without filter_groups no train/num_gen_batches is logged and data.gen_batch_size is ignored.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "io/checkpoint.h"
#include "testlib.h"

static char *F;
static const char *RLC;

static int make_fixture(void) {
    F = tl_tmpdir("dapotr");
    int rc = tl_system("%s gen-task --out %s/sft.jsonl --n 200 --seed 1 --format sft >/dev/null && "
                       "%s gen-task --out %s/train.jsonl --n 16 --seed 2 >/dev/null && "
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
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "data:\n  train_files: %s/train.jsonl\n  train_batch_size: 2\n  gen_batch_size: 2\n"
             "  max_prompt_length: 256\n  max_response_length: 12\n  seed: 1\n"
             "actor_rollout_ref:\n  model: {path: %s/m}\n  actor:\n    optim: {lr: 5.0e-3}\n"
             "    ppo_mini_batch_size: 1\n    ppo_micro_batch_size_per_gpu: 2\n    clip_ratio_low: 0.2\n    clip_ratio_high: 0.28\n"
             "  rollout:\n    n: 4\n    temperature: 1.0\n"
             "algorithm:\n  adv_estimator: grpo\n  filter_groups: {enable: true, metric: acc, max_num_gen_batches: 0}\n"
             "reward_model:\n  overlong_buffer: {enable: true, len: 4, penalty_factor: 0.5, log: true}\n"
             "custom_reward_function: {command: /usr/bin/python3 tests/py/dapo_train_reward.py}\n"
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

static int file_contains(const char *run, const char *needle) {
    char *p = fpath(run, ".log");
    int r = 0;
    if (rlc_file_exists(p)) {
        char *s = rlc_read_file(p, NULL);
        r = strstr(s, needle) != NULL;
        free(s);
    }
    free(p);
    return r;
}

// The whole of F/<run>/metrics.jsonl without the timing / memory keys, one line per step (for exact comparison).
static char *metrics_no_timing(const char *run, int *lines) {
    char *p = fpath(run, "/metrics.jsonl");
    *lines = 0;
    if (!rlc_file_exists(p)) { free(p); return NULL; }
    char *s = rlc_read_file(p, NULL);
    free(p);
    size_t cap = strlen(s) + 1, n = 0;
    char *out = calloc(cap, 1);
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        if (!o) continue;
        for (cJSON *it = o->child; it;) {
            cJSON *nx = it->next;
            if (!strncmp(it->string, "timing", 6) || !strncmp(it->string, "perf/", 5) || !strncmp(it->string, "actor/perf/", 11))
                cJSON_DeleteItemFromObject(o, it->string);
            it = nx;
        }
        char *t = cJSON_PrintUnformatted(o);
        size_t k = strlen(t);
        if (n + k + 2 > cap) { cap = 2 * (n + k + 2); out = realloc(out, cap); }
        memcpy(out + n, t, k);
        n += k;
        out[n++] = '\n';
        out[n] = 0;
        free(t);
        cJSON_Delete(o);
        (*lines)++;
    }
    free(s);
    return out;
}

static int same_file(const char *a, const char *b) {
    if (!rlc_file_exists(a) || !rlc_file_exists(b)) return 0;
    size_t na, nb;
    char *x = rlc_read_file(a, &na), *y = rlc_read_file(b, &nb);
    int eq = na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return eq;
}

static void test_reference(int have_torch) {
    char env[512];
    snprintf(env, sizeof env, "RLC_GRPO_DUMP=%s/dump", F);
    int rc = train(env, "ref_run", "trainer.total_training_steps=3");
    TL_CHECK(rc == 0, "rlc train (3 DAPO steps, dumping its batches) exits 0 (rc %d; see %s/ref_run.log)", rc, F);
    if (rc != 0) return;
    int lines = 0;
    char *m = metrics_no_timing("ref_run", &lines);
    TL_CHECK(m && lines == 3 && strstr(m, "\"train/num_gen_batches\""), "3 metric lines with train/num_gen_batches");
    TL_CHECK(m && !strstr(m, "\"actor/pg_clipfrac\":null"), "actor pg metrics logged for vanilla");
    free(m);
    if (!have_torch) { tl_skip("torch/numpy not importable under /usr/bin/python3: DAPO loop reference skipped"); return; }
    rc = tl_system("/usr/bin/python3 tests/py/dapo_train_ref.py %s/dump %s/ref_run/metrics.jsonl 2 12 4 0.5 > %s/ref.log 2>&1",
                   F, F, F);
    tl_system("cat %s/ref.log", F);
    TL_CHECK(rc == 0, "the training batches, kept groups, overlong scores and num_gen_batches equal the reference (rc %d)", rc);
    char *p = fpath("dump/gen_1_0.json", "");
    TL_CHECK(rlc_file_exists(p), "generated batches dumped");
    free(p);
}

static void test_resume(void) {
    int ra = train(NULL, "full", "trainer.total_training_steps=4");
    int rb1 = train(NULL, "split", "trainer.total_training_steps=2");
    int rb2 = train(NULL, "split", "trainer.total_training_steps=4");
    TL_CHECK(ra == 0 && rb1 == 0 && rb2 == 0, "4 DAPO steps, then 2 + resume + 2 exit 0 (%d %d %d)", ra, rb1, rb2);
    TL_CHECK(file_contains("split", "resumed from global_step_2"), "the second run resumed");
    char *wa = fpath("full", "/global_step_4/actor/model.safetensors"), *wb = fpath("split", "/global_step_4/actor/model.safetensors");
    TL_CHECK(same_file(wa, wb), "resumed weights bit-identical at step 4");
    free(wa);
    free(wb);
    int la, lb;
    char *ma = metrics_no_timing("full", &la), *mb = metrics_no_timing("split", &lb);
    TL_CHECK(ma && mb && la == 4 && lb == 4 && !strcmp(ma, mb), "resumed metrics identical except timing (%d, %d lines)", la, lb);
    free(ma);
    free(mb);
}

static void test_limits(void) {
    // every group equal: max_num_gen_batches=2 is exhausted at the second batch, with the recipe's message
    int rc = train(NULL, "exhaust", "'custom_reward_function.command=/usr/bin/python3 tests/py/dapo_train_reward.py const' "
                   "algorithm.filter_groups.max_num_gen_batches=2");
    TL_CHECK(rc != 0 && file_contains("exhaust", "num_gen_batches=2 >= max_num_gen_batches=2. Generated too many"),
             "exhausted max_num_gen_batches is the recipe's error (rc %d)", rc);
    // unlimited: the epochs run out while collecting; the run ends cleanly without a step
    rc = train(NULL, "epochs", "'custom_reward_function.command=/usr/bin/python3 tests/py/dapo_train_reward.py const' "
               "trainer.total_epochs=1");
    int lines = 0;
    char *m = metrics_no_timing("epochs", &lines);
    TL_CHECK(rc == 0 && file_contains("epochs", "trainer.total_epochs ran out after 8 generated batches") && lines == 0,
             "epochs running out mid-collection end the run (rc %d, %d metric lines)", rc, lines);
    free(m);
    // filter off: gen_batch_size ignored (verl's main trainer), no num_gen_batches, one batch per step
    rc = train(NULL, "off", "algorithm.filter_groups.enable=false data.gen_batch_size=4 trainer.total_training_steps=1");
    m = metrics_no_timing("off", &lines);
    TL_CHECK(rc == 0 && lines == 1 && m && !strstr(m, "num_gen_batches") && strstr(m, "\"training/global_step\":1"),
             "without filter_groups: one step, no train/num_gen_batches (rc %d)", rc);
    free(m);
}

int main(void) {
    RLC = tl_rlc_bin();
    if (!rlc_file_exists(RLC)) { tl_skip("%s not built", RLC); return tl_summary(); }
    if (!rlc_file_exists("/usr/bin/python3")) { tl_skip("/usr/bin/python3 missing (the tests' reward script)"); return tl_summary(); }
    if (!make_fixture()) { TL_CHECK(0, "fixture (gen-task, train-tokenizer, init) in %s", F); return tl_summary(); }
    int san = getenv("RLC_SAN") && !strcmp(getenv("RLC_SAN"), "1");
    test_reference(!san && tl_have_torch());
    test_resume();
    test_limits();
    if (tl_failed == 0) tl_system("rm -rf %s", F);
    else printf("fixture and logs kept in %s\n", F);
    free(F);
    return tl_summary();
}
