// test_trainer_config.c: the trainer's YAML config: defaults, nested YAML + dotted overrides, round trip of the
// resolved YAML, and the one-line errors (unknown key with a suggestion, type, range, enum, YAML syntax), the
// policy-loss and DAPO keys.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/common.h"
#include "trainer/config.h"
#include "io_testutil.h"
#include "testlib.h"

// Run fn(arg) in a child: it must exit 1 with one line "rlc: error: ..." holding every needle.
static void expect_die(const char *what, void (*fn)(void *), const char *arg, const char *const *needles) {
    io_expect_die_list(what, fn, (void *)arg, needles);
}

static char *g_tmp;

static char *write_tmp(const char *name, const char *text) {
    char *p = rlc_path_join(g_tmp, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
    return p;
}

static void load_file(void *arg) {
    const char *path = arg;
    rlc_train_config c;
    rlc_config_init(&c);
    rlc_config_load_yaml(&c, path);
    rlc_config_finalize(&c);
    rlc_config_free(&c);
}
static void apply_override(void *arg) {
    const char *kv = arg;
    rlc_train_config c;
    rlc_config_init(&c);
    rlc_config_override(&c, kv);
    rlc_config_free(&c);
}
static void finalize_with(void *arg) {
    const char *kv = arg;
    rlc_train_config c;
    rlc_config_init(&c);
    rlc_config_override(&c, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8");
    rlc_config_override(&c, kv);
    rlc_config_finalize(&c);
    rlc_config_free(&c);
}

static void test_defaults(void) {
    rlc_train_config c;
    rlc_config_init(&c);
    TL_CHECK(c.data.train_batch_size == 1024, "data.train_batch_size default");
    TL_CHECK(c.data.max_prompt_length == 512 && c.data.max_response_length == 512, "lengths default");
    TL_CHECK(c.data.seed == RLC_CFG_NULL, "data.seed null");
    TL_CHECK(c.actor_rollout_ref.actor.optim.lr == 1e-6, "lr default");
    TL_CHECK(c.actor_rollout_ref.actor.optim.betas[0] == 0.9 && c.actor_rollout_ref.actor.optim.betas[1] == 0.999, "betas");
    TL_CHECK(c.actor_rollout_ref.actor.clip_ratio == 0.2 && isnan(c.actor_rollout_ref.actor.clip_ratio_low), "clip");
    TL_CHECK(c.actor_rollout_ref.actor.clip_ratio_c == 3.0, "clip_ratio_c");
    TL_CHECK(!strcmp(c.actor_rollout_ref.actor.loss_agg_mode, "token-mean"), "agg default");
    TL_CHECK(!strcmp(c.actor_rollout_ref.actor.kl_loss_type, "low_var_kl"), "kl_loss_type default");
    TL_CHECK(c.actor_rollout_ref.actor.kl_loss_coef == 0.001 && !c.actor_rollout_ref.actor.use_kl_loss, "kl loss");
    TL_CHECK(c.actor_rollout_ref.rollout.n == 1 && c.actor_rollout_ref.rollout.top_k == -1, "rollout");
    TL_CHECK(!strcmp(c.actor_rollout_ref.rollout.kv_cache_dtype, "fp32"), "kv_cache_dtype default fp32");
    TL_CHECK(c.actor_rollout_ref.rollout.val_kwargs.temperature == 0 && !c.actor_rollout_ref.rollout.val_kwargs.do_sample,
             "val_kwargs");
    TL_CHECK(!strcmp(c.algorithm.kl_penalty, "kl") && !strcmp(c.algorithm.kl_ctrl.type, "fixed"), "algorithm kl");
    TL_CHECK(c.algorithm.kl_ctrl.horizon == 10000 && c.algorithm.kl_ctrl.target_kl == 0.1, "kl_ctrl");
    TL_CHECK(c.trainer.total_epochs == 30 && c.trainer.test_freq == -1 && c.trainer.val_before_train, "trainer");
    TL_CHECK(c.trainer.logger.n == 1 && !strcmp(c.trainer.logger.v[0], "console"), "logger");
    rlc_config_free(&c);
}

static const char *k_yaml =
    "# a verl-style config\n"
    "data:\n"
    "  train_files: /data/gsm8k/train.parquet\n"
    "  val_files: [/data/gsm8k/test.parquet, /data/other.parquet]\n"
    "  train_batch_size: 32\n"
    "  max_response_length: 1_024\n"
    "actor_rollout_ref:\n"
    "  model:\n"
    "    path: /models/Qwen3-0.6B\n"
    "  actor:\n"
    "    optim:\n"
    "      lr: 1e-6\n"
    "      betas: [0.9, 0.95]\n"
    "    ppo_mini_batch_size: 16\n"
    "    ppo_micro_batch_size_per_gpu: 4\n"
    "    clip_ratio_high: 0.28\n"
    "    loss_agg_mode: seq-mean-token-sum-norm\n"
    "    use_kl_loss: true\n"
    "    kl_loss_type: k3+\n"
    "  rollout:\n"
    "    n: 8\n"
    "    val_kwargs:\n"
    "      n: 4\n"
    "      do_sample: True\n"
    "      temperature: 0.6\n"
    "algorithm:\n"
    "  adv_estimator: grpo\n"
    "  norm_adv_by_std_in_grpo: false\n"
    "  kl_ctrl:\n"
    "    type: adaptive\n"
    "trainer:\n"
    "  logger: ['console', 'file']\n"
    "  experiment_name: \"run 1\"\n"
    "  max_actor_ckpt_to_keep: ~\n";

static void test_yaml_and_overrides(void) {
    rlc_train_config c;
    rlc_config_init(&c);
    rlc_config_load_yaml_text(&c, k_yaml, "inline.yaml");
    char *ov[] = {"actor_rollout_ref.rollout.n=16", "data.train_batch_size=64", "trainer.save_freq=5",
                  "actor_rollout_ref.actor.optim.betas=[0.8, 0.9]", "trainer.total_training_steps=null",
                  "++actor_rollout_ref.model.path=/m/x"};
    for (int i = 0; i < 6; i++) rlc_config_override(&c, ov[i]);
    rlc_config_finalize(&c);
    TL_CHECK(c.data.train_files.n == 1 && !strcmp(c.data.train_files.v[0], "/data/gsm8k/train.parquet"), "train_files string");
    TL_CHECK(c.data.val_files.n == 2 && !strcmp(c.data.val_files.v[1], "/data/other.parquet"), "val_files list");
    TL_CHECK(c.data.train_batch_size == 64 && c.data.max_response_length == 1024, "data ints (override, underscore)");
    TL_CHECK(c.actor_rollout_ref.rollout.n == 16, "rollout.n override");
    TL_CHECK(c.actor_rollout_ref.actor.optim.betas[0] == 0.8 && c.actor_rollout_ref.actor.optim.betas[1] == 0.9, "betas override");
    TL_CHECK(c.actor_rollout_ref.actor.clip_ratio_low == 0.2 && c.actor_rollout_ref.actor.clip_ratio_high == 0.28,
             "clip_ratio_low resolved from clip_ratio");
    TL_CHECK(c.actor_rollout_ref.rollout.val_kwargs.n == 4 && c.actor_rollout_ref.rollout.val_kwargs.do_sample, "val_kwargs");
    TL_CHECK(!c.algorithm.norm_adv_by_std_in_grpo && !strcmp(c.algorithm.kl_ctrl.type, "adaptive"), "algorithm");
    TL_CHECK(c.trainer.logger.n == 2 && !strcmp(c.trainer.experiment_name, "run 1"), "trainer strings");
    TL_CHECK(c.trainer.max_actor_ckpt_to_keep == RLC_CFG_NULL && c.trainer.save_freq == 5, "null int / override");
    TL_CHECK(!strcmp(c.trainer.default_local_dir, "checkpoints/verl_examples/run 1"), "default_local_dir resolved: %s",
             c.trainer.default_local_dir);
    TL_CHECK(!strcmp(c.actor_rollout_ref.model.path, "/m/x"), "model.path override");
    rl_loss_cfg lc;
    rlc_config_loss_cfg(&c, &lc);
    TL_CHECK(lc.agg == RL_AGG_SEQ_MEAN_TOKEN_SUM_NORM && lc.use_kl_loss && lc.kl_loss_type.base == RL_KL_K3 &&
                 lc.kl_loss_type.straight_through && lc.clip.clip_ratio_high == 0.28,
             "typed loss view");
    rl_adv_cfg ac;
    rlc_config_adv_cfg(&c, &ac);
    TL_CHECK(ac.estimator == RL_ADV_GRPO && !ac.norm_adv_by_std_in_grpo && ac.epsilon == 1e-6, "typed adv view");

    // Round trip: the printed YAML loads back to the same printed YAML.
    char *y1 = rlc_config_to_yaml(&c);
    char *p = write_tmp("resolved.yaml", y1);
    rlc_train_config d;
    rlc_config_init(&d);
    rlc_config_load_yaml(&d, p);
    rlc_config_finalize(&d);
    char *y2 = rlc_config_to_yaml(&d);
    TL_CHECK(strcmp(y1, y2) == 0, "resolved YAML round trip");
    TL_CHECK(strstr(y1, "actor_rollout_ref:\n  model:\n    path: \"/m/x\"\n") != NULL, "nested output");
    TL_CHECK(strstr(y1, "    optim:\n      lr: 1.0e-06\n") != NULL, "float printed for YAML 1.1 readers");
    // Python's YAML reader agrees when available.
    if (tl_system("/usr/bin/python3 -c 'import yaml' 2>/dev/null") == 0) {
        int rc = tl_system("/usr/bin/python3 -c \"import yaml,sys; d=yaml.safe_load(open('%s')); "
                           "a=d['actor_rollout_ref']; sys.exit(0 if a['rollout']['n']==16 and a['actor']['optim']['lr']==1e-6 "
                           "and a['actor']['optim']['betas']==[0.8,0.9] and d['trainer']['max_actor_ckpt_to_keep'] is None else 1)\"",
                           p);
        TL_CHECK(rc == 0, "PyYAML reads the resolved config");
    } else tl_skip("python3-yaml absent: PyYAML cross-check skipped");
    char *saved = rlc_path_join(g_tmp, "saved.yaml");
    rlc_config_save(&c, saved);
    char *back = rlc_read_file(saved, NULL);
    TL_CHECK(strcmp(back, y1) == 0, "rlc_config_save writes the resolved YAML");
    free(back); free(saved);
    free(y1); free(y2); free(p);
    rlc_config_free(&d);
    rlc_config_free(&c);
}

static void test_suggest(void) {
    const char *s = rlc_config_suggest("actor_rollout_ref.rollout.nn");
    TL_CHECK(s && !strcmp(s, "actor_rollout_ref.rollout.n"), "suggest for rollout.nn: %s", s ? s : "(none)");
    s = rlc_config_suggest("rollout.temperature");
    TL_CHECK(s && !strcmp(s, "actor_rollout_ref.rollout.temperature"), "suggest for a bare suffix: %s", s ? s : "(none)");
    s = rlc_config_suggest("actor_rollout_ref.actor.kl_los_coef");
    TL_CHECK(s && !strcmp(s, "actor_rollout_ref.actor.kl_loss_coef"), "suggest kl_los_coef: %s", s ? s : "(none)");
    s = rlc_config_suggest("data.train_batchsize");
    TL_CHECK(s && !strcmp(s, "data.train_batch_size"), "suggest train_batchsize: %s", s ? s : "(none)");
}

static void test_errors(void) {
    char *p;
    p = write_tmp("typo.yaml", "data:\n  train_batch_size: 8\nactor_rollout_ref:\n  rollout:\n    nn: 8\n");
    expect_die("misspelled YAML key", load_file, p,
               (const char *[]){"typo.yaml:5", "unknown config key 'actor_rollout_ref.rollout.nn'",
                                "did you mean 'actor_rollout_ref.rollout.n'", NULL});
    free(p);
    expect_die("misspelled override", apply_override, "actor_rollout_ref.rollout.temprature=0.7",
               (const char *[]){"unknown config key", "did you mean 'actor_rollout_ref.rollout.temperature'", NULL});
    p = write_tmp("type.yaml", "data:\n  train_batch_size: eight\n");
    expect_die("wrong type in YAML", load_file, p,
               (const char *[]){"type.yaml:2", "data.train_batch_size", "expected an integer", "'eight'", NULL});
    free(p);
    p = write_tmp("quoted.yaml", "actor_rollout_ref:\n  actor:\n    use_kl_loss: \"true\"\n");
    expect_die("quoted bool", load_file, p, (const char *[]){"quoted.yaml:3", "use_kl_loss", "expected a boolean", NULL});
    free(p);
    expect_die("range", apply_override, "actor_rollout_ref.rollout.top_p=1.5",
               (const char *[]){"actor_rollout_ref.rollout.top_p", "out of range", NULL});
    expect_die("negative n", apply_override, "actor_rollout_ref.rollout.n=0",
               (const char *[]){"actor_rollout_ref.rollout.n", "out of range", NULL});
    expect_die("enum", apply_override, "actor_rollout_ref.actor.loss_agg_mode=seq-mean",
               (const char *[]){"loss_agg_mode", "'seq-mean' is not one of", NULL});
    expect_die("kv dtype enum", apply_override, "actor_rollout_ref.rollout.kv_cache_dtype=fp16",
               (const char *[]){"rollout.kv_cache_dtype", "'fp16' is not one of fp32|bf16", NULL});
    expect_die("kl enum", apply_override, "algorithm.kl_penalty=full", (const char *[]){"algorithm.kl_penalty", NULL});
    expect_die("clip_ratio_c <= 1", apply_override, "actor_rollout_ref.actor.clip_ratio_c=1.0",
               (const char *[]){"clip_ratio_c", "out of range", NULL});
    expect_die("float type", apply_override, "actor_rollout_ref.actor.optim.lr=fast",
               (const char *[]){"actor_rollout_ref.actor.optim.lr", "expected a number", NULL});
    expect_die("not null", apply_override, "data.train_batch_size=null",
               (const char *[]){"data.train_batch_size", "must not be null", NULL});
    expect_die("betas arity", apply_override, "actor_rollout_ref.actor.optim.betas=[0.9]",
               (const char *[]){"betas", "two numbers", NULL});
    expect_die("section override", apply_override, "actor_rollout_ref.rollout=3",
               (const char *[]){"is a section", NULL});
    expect_die("no '='", apply_override, "data.train_batch_size", (const char *[]){"expected key=value", NULL});
    p = write_tmp("syntax.yaml", "data:\n  train_batch_size: 8\n   max_prompt_length: 4\n");
    expect_die("YAML syntax error", load_file, p, (const char *[]){"syntax.yaml:3", "YAML syntax error", NULL});
    free(p);
    p = write_tmp("syntax2.yaml", "data: {train_batch_size: 8\n");
    expect_die("unclosed flow mapping", load_file, p, (const char *[]){"syntax2.yaml:", "YAML syntax error", NULL});
    free(p);
    p = write_tmp("interp.yaml", "trainer:\n  default_local_dir: ${trainer.project_name}/x\n");
    expect_die("interpolation", load_file, p, (const char *[]){"interp.yaml:2", "interpolation", NULL});
    free(p);
    p = write_tmp("section.yaml", "data: 5\n");
    expect_die("section as scalar", load_file, p, (const char *[]){"section.yaml:1", "is a section", NULL});
    free(p);
    p = write_tmp("mapping.yaml", "data:\n  train_batch_size:\n    a: 1\n");
    expect_die("mapping for a leaf", load_file, p, (const char *[]){"mapping.yaml:3", "got a mapping", NULL});
    free(p);
    expect_die("mini > train batch", finalize_with, "actor_rollout_ref.actor.ppo_mini_batch_size=2048",
               (const char *[]){"ppo_mini_batch_size", "data.train_batch_size", NULL});
    expect_die("micro batch required", apply_override, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=-3",
               (const char *[]){"out of range", NULL});
}

static void reward_cmd_of(void *arg) {
    const char *kv = arg;
    rlc_train_config c;
    rlc_config_init(&c);
    rlc_config_override(&c, kv);
    char *s = rlc_config_reward_command(&c);
    free(s);
    rlc_config_free(&c);
}

static void test_reward_keys(void) {
    rlc_train_config c;
    rlc_config_init(&c);
    char *s = rlc_config_reward_command(&c);
    TL_CHECK(s == NULL, "no external reward by default");
    rlc_config_override(&c, "custom_reward_function.path=tests/py/my_reward.py");
    s = rlc_config_reward_command(&c);
    TL_CHECK(s && strstr(s, "'tests/py/my_reward.py' 'compute_score'"), "python adapter command");
    free(s);
    rlc_config_override(&c, "custom_reward_function.path=null");
    rlc_config_override(&c, "custom_reward_function.command=./my_scorer --fast");
    s = rlc_config_reward_command(&c);
    TL_CHECK(s && !strcmp(s, "./my_scorer --fast"), "explicit command");
    free(s);
    rlc_config_free(&c);
    expect_die("missing reward file", reward_cmd_of, "custom_reward_function.path=/no/such/reward.py",
               (const char *[]){"custom_reward_function.path", "no such file", NULL});
}

static void test_examples(void) {
    const char *ex[] = {"examples/grpo_gsm8k_qwen3_0.6b.yaml", "examples/grpo_gsm8k_tpu_seed.yaml"};
    for (int i = 0; i < 2; i++) {
        if (!rlc_file_exists(ex[i])) { TL_CHECK(0, "%s missing", ex[i]); continue; }
        rlc_train_config c;
        rlc_config_init(&c);
        rlc_config_load_yaml(&c, ex[i]);
        rlc_config_override(&c, "actor_rollout_ref.model.path=/models/Qwen3-0.6B");
        rlc_config_finalize(&c);
        TL_CHECK(!strcmp(c.algorithm.adv_estimator, "grpo"), "%s: grpo", ex[i]);
        if (i == 1)
            TL_CHECK(c.data.train_batch_size == 32 && c.actor_rollout_ref.rollout.n == 8 &&
                         c.data.max_prompt_length == 512 && c.data.max_response_length == 1024,
                     "seed TPU run shape");
        rlc_config_free(&c);
    }
}

// Several ';'-separated overrides, then finalize (the cross-key checks).
static void finalize_with_list(void *arg) {
    char *list = rlc_strdup((const char *)arg), *save = NULL;
    rlc_train_config c;
    rlc_config_init(&c);
    rlc_config_override(&c, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8");
    rlc_config_override(&c, "actor_rollout_ref.rollout.n=2");   // no singleton-group warning before the error
    for (char *kv = strtok_r(list, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) rlc_config_override(&c, kv);
    rlc_config_finalize(&c);
    rlc_config_free(&c);
    free(list);
}

// The policy-loss keys, DAPO's keys, their defaults (verl's), typed views and one-line errors.
static void test_loss_and_dapo_keys(void) {
    rlc_train_config c;
    rlc_config_init(&c);
    rlc_config_override(&c, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8");
    rlc_config_finalize(&c);
    const __typeof__(c.actor_rollout_ref.actor) *a = &c.actor_rollout_ref.actor;
    TL_CHECK(!strcmp(a->policy_loss.loss_mode, "vanilla") && a->policy_loss.clip_cov_ratio == 2e-4 &&
                 a->policy_loss.clip_cov_lb == 1.0 && a->policy_loss.clip_cov_ub == 5.0 &&
                 a->policy_loss.kl_cov_ratio == 2e-4 && a->policy_loss.ppo_kl_coef == 0.1 &&
                 isnan(a->policy_loss.dro_beta) && a->tau_pos == 1.0 && a->tau_neg == 1.05,
             "policy-loss defaults");
    TL_CHECK(!c.algorithm.filter_groups.enable && !c.algorithm.filter_groups.metric &&
                 c.algorithm.filter_groups.max_num_gen_batches == 0 && c.data.gen_batch_size == RLC_CFG_NULL &&
                 !c.reward_model.overlong_buffer.enable && c.reward_model.overlong_buffer.len == 0 &&
                 c.reward_model.overlong_buffer.penalty_factor == 0.0,
             "DAPO defaults");
    dapo_accumulator acc;
    dapo_overlong_cfg ol;
    int64_t gbs = 0;
    rlc_config_dapo(&c, &acc, &ol, &gbs);
    TL_CHECK(gbs == c.data.train_batch_size && !acc.enable && !ol.enable && ol.max_resp_len == 512,
             "gen_batch_size null -> train_batch_size");
    rlc_config_free(&c);

    rlc_config_init(&c);
    rlc_config_load_yaml_text(&c,
                              "actor_rollout_ref:\n  actor:\n    ppo_micro_batch_size_per_gpu: 8\n    tau_pos: 2.0\n"
                              "    policy_loss:\n      loss_mode: sapo\n      kl_cov_ratio: 0.01\n"
                              "algorithm:\n  filter_groups:\n    enable: true\n    metric: acc\n    max_num_gen_batches: 3\n"
                              "data:\n  gen_batch_size: 3000\nreward_model:\n  overlong_buffer:\n    enable: true\n"
                              "    len: 128\n    penalty_factor: 0.5\n",
                              "sapo.yaml");
    rlc_config_finalize(&c);
    rl_loss_cfg lc;
    rlc_config_loss_cfg(&c, &lc);
    TL_CHECK(lc.mode == RL_PG_SAPO && lc.tau_pos == 2.0 && lc.tau_neg == 1.05 && lc.kl_cov_ratio == 0.01,
             "loss cfg view: sapo, tau_pos 2.0");
    rlc_config_dapo(&c, &acc, &ol, &gbs);
    TL_CHECK(acc.enable && acc.max_num_gen_batches == 3 && acc.train_batch_size == 1024 && gbs == 3000 &&
                 ol.enable && ol.len == 128 && ol.penalty_factor == 0.5,
             "DAPO view");
    char *y = rlc_config_to_yaml(&c);
    TL_CHECK(strstr(y, "  filter_groups:\n    enable: true\n    metric: \"acc\"\n") != NULL &&
                 strstr(y, "reward_model:\n  overlong_buffer:\n    enable: true\n") != NULL,
             "resolved YAML nests the new keys");
    rlc_train_config d;
    rlc_config_init(&d);
    rlc_config_load_yaml_text(&d, y, "resolved");
    rlc_config_finalize(&d);
    char *y2 = rlc_config_to_yaml(&d);
    TL_CHECK(!strcmp(y, y2), "resolved YAML round trip with the new keys");
    free(y); free(y2);
    rlc_config_free(&d);
    rlc_config_free(&c);

    expect_die("unknown loss mode", apply_override, "actor_rollout_ref.actor.policy_loss.loss_mode=ppo2",
               (const char *[]){"actor_rollout_ref.actor.policy_loss.loss_mode", "'ppo2'",
                                "vanilla|gspo|sapo|gpg|clip_cov|kl_cov|geo_mean|dro|cispo|dppo_tv|dppo_kl|bypass_mode", NULL});
    expect_die("dro without beta", finalize_with_list, "actor_rollout_ref.actor.policy_loss.loss_mode=dro",
               (const char *[]){"actor_rollout_ref.actor.policy_loss.dro_beta", "> 0", NULL});
    expect_die("dro beta <= 0", apply_override, "actor_rollout_ref.actor.policy_loss.dro_beta=0",
               (const char *[]){"dro_beta", "out of range", NULL});
    expect_die("clip_cov lb >= ub", finalize_with_list,
               "actor_rollout_ref.actor.policy_loss.loss_mode=clip_cov;actor_rollout_ref.actor.policy_loss.clip_cov_lb=6",
               (const char *[]){"clip_cov_lb", "clip_cov_ub", NULL});
    expect_die("clip_cov_ratio > 1", apply_override, "actor_rollout_ref.actor.policy_loss.clip_cov_ratio=1.5",
               (const char *[]){"clip_cov_ratio", "out of range", NULL});
    expect_die("kl_cov_ratio 0", apply_override, "actor_rollout_ref.actor.policy_loss.kl_cov_ratio=0",
               (const char *[]){"kl_cov_ratio", "out of range", NULL});
    expect_die("ppo_kl_coef < 0", apply_override, "actor_rollout_ref.actor.policy_loss.ppo_kl_coef=-1",
               (const char *[]){"ppo_kl_coef", "out of range", NULL});
    expect_die("tau_neg 0", apply_override, "actor_rollout_ref.actor.tau_neg=0",
               (const char *[]){"actor_rollout_ref.actor.tau_neg", "out of range", NULL});
    expect_die("rollout_is enum", apply_override, "algorithm.rollout_correction.rollout_is=geometric",
               (const char *[]){"algorithm.rollout_correction.rollout_is", "'geometric'", "token|sequence", NULL});
    expect_die("filter without metric", finalize_with_list, "algorithm.filter_groups.enable=true",
               (const char *[]){"algorithm.filter_groups.metric", "must be set", NULL});
    expect_die("max_num_gen_batches < 0", apply_override, "algorithm.filter_groups.max_num_gen_batches=-1",
               (const char *[]){"max_num_gen_batches", "out of range", NULL});
    expect_die("gen_batch_size 0", apply_override, "data.gen_batch_size=0",
               (const char *[]){"data.gen_batch_size", "out of range", NULL});
    expect_die("overlong len 0", finalize_with_list, "reward_model.overlong_buffer.enable=true",
               (const char *[]){"reward_model.overlong_buffer.len", "[1, data.max_response_length=512]", NULL});
    expect_die("overlong len > max_response_length", finalize_with_list,
               "reward_model.overlong_buffer.enable=true;reward_model.overlong_buffer.len=600",
               (const char *[]){"reward_model.overlong_buffer.len", "got 600", NULL});
    expect_die("penalty < 0", apply_override, "reward_model.overlong_buffer.penalty_factor=-0.5",
               (const char *[]){"penalty_factor", "out of range", NULL});

    // the DAPO and GSPO examples load and resolve to the recipes' values
    const char *ex[] = {"examples/dapo_gsm8k_qwen2.5_0.5b.yaml", "examples/gspo_gsm8k_qwen2.5_0.5b.yaml"};
    for (int i = 0; i < 2; i++) {
        if (!rlc_file_exists(ex[i])) { TL_CHECK(0, "%s missing", ex[i]); continue; }
        rlc_config_init(&c);
        rlc_config_load_yaml(&c, ex[i]);
        rlc_config_override(&c, "actor_rollout_ref.model.path=/models/Qwen2.5-0.5B");
        rlc_config_finalize(&c);
        rlc_config_loss_cfg(&c, &lc);
        if (i == 0) {
            rlc_config_dapo(&c, &acc, &ol, &gbs);
            TL_CHECK(lc.mode == RL_PG_VANILLA && lc.clip.clip_ratio_low == 0.2 && lc.clip.clip_ratio_high == 0.28 &&
                         acc.enable && acc.metric_f32 && acc.max_num_gen_batches == 10 && gbs == 96 &&
                         acc.train_batch_size == 32 && acc.n == 4 && ol.enable && ol.len == 128 &&
                         ol.penalty_factor == 1.0 && ol.max_resp_len == 512,
                     "%s: DAPO recipe values", ex[i]);
        } else {
            TL_CHECK(lc.mode == RL_PG_GSPO && lc.clip.clip_ratio_low == 3e-4 && lc.clip.clip_ratio_high == 4e-4 &&
                         lc.agg == RL_AGG_SEQ_MEAN_TOKEN_MEAN && !lc.use_kl_loss &&
                         c.actor_rollout_ref.rollout.n == 16,
                     "%s: GSPO values", ex[i]);
        }
        rlc_config_free(&c);
    }
}

int main(void) {
    g_tmp = tl_tmpdir("cfg");
    test_defaults();
    test_yaml_and_overrides();
    test_suggest();
    test_errors();
    test_examples();
    test_reward_keys();
    test_loss_and_dapo_keys();
    tl_system("rm -rf %s", g_tmp);
    free(g_tmp);
    return tl_summary();
}
