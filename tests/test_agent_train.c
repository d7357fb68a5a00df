// test_agent_train.c: multi-turn tool trajectories in `rlc train` (docs/agents.md) on a tiny random Qwen3 edited to
// end its turns often, with an environment that answers every turn (tests/py/agent_train_env.py):
//   - one GRPO step (KL loss, entropy bonus, 2 mini-batches x 2 micro-batches) on trajectories whose responses hold
//     observation tokens equals a PyTorch oracle that masks the same positions (tests/py/agent_step_ref.py): the
//     losses, grad norm and updated weights; the environment's score and the reward function both feed it;
//   - the multi-turn metrics are logged, env/<key>/mean among them; tool_agent without an environment is a one-line error;
//   - per-row agent choice: a batch whose rows name single_turn_agent or tool_agent in their agent_name column, in
//     training and validation: single-turn rows are one sampled turn without the tools block, tool rows run the loop;
//   - validation: val-aux/env/<key>/mean, and reward extra keys reduced over the samples that have them (the
//     environment scores some validation trajectories itself, the reward function the others);
//   - data.truncation on prompts rendered with the environment's tools (error: one line; left: cut to the cap);
//   - rlc_val_metrics with missing values (NaN) against values worked out by hand;
//   - examples/*tool*.yaml run 2 steps and a validation with `rlc train` (tiny model and data substituted).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "io/checkpoint.h"
#include "testlib.h"
#include "trainer/metrics.h"

static char *F;
static const char *RLC;

static int make_fixture(void) {
    F = tl_tmpdir("agtr");
    int rc = tl_system("%s gen-task --out %s/sft.jsonl --n 200 --seed 1 --format sft >/dev/null && "
                       "%s gen-task --out %s/train.jsonl --n 4 --seed 2 >/dev/null && "
                       "%s train-tokenizer --data %s/sft.jsonl --fields prompt,response --out %s/tok --vocab-size 300 >/dev/null",
                       RLC, F, RLC, F, RLC, F, F);
    if (rc != 0) return 0;
    char *cj = rlc_path_join(F, "config.json");
    const char *cfg =
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"vocab_size\": 320, \"hidden_size\": 32,\n"
        " \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,\n"
        " \"head_dim\": 8, \"max_position_embeddings\": 2048, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000,\n"
        " \"tie_word_embeddings\": true, \"bos_token_id\": null, \"eos_token_id\": 302, \"hidden_act\": \"silu\",\n"
        " \"attention_bias\": false, \"attention_dropout\": 0.0, \"use_sliding_window\": false, \"sliding_window\": null,\n"
        " \"max_window_layers\": 2, \"initializer_range\": 0.5, \"torch_dtype\": \"float32\"}\n";
    CHECK(rlc_write_file_atomic(cj, cfg, strlen(cfg)) == 0, "write %s", cj);
    rc = tl_system("%s init --config %s --out %s/m --seed 3 --dtype f32 --tokenizer %s/tok >/dev/null", RLC, cj, F, F);
    free(cj);
    if (rc != 0) return 0;
    // A model that often ends its turn: the final norm favours one channel and <|im_end|>'s (tied) embedding points
    // along it, so about half the positions predict <|im_end|> (a random model would run every turn to the budget).
    rc = tl_system("/usr/bin/python3 -c \"import sys; sys.path.insert(0, 'tests/py'); import st, torch; "
                   "p = '%s/m/model.safetensors'; t = st.read_safetensors(p); "
                   "w = torch.full_like(t['model.norm.weight'], 0.3); w[0] = 1.0; t['model.norm.weight'] = w; "
                   "e = t['model.embed_tokens.weight'].clone(); e[302] = 0; e[302, 0] = 8.0; t['model.embed_tokens.weight'] = e; "
                   "st.write_safetensors(p, t)\"", F);
    if (rc != 0) return 0;
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "data:\n  train_files: %s/train.jsonl\n  train_batch_size: 2\n"
             "  max_prompt_length: 1024\n  max_response_length: 96\n  seed: 1\n"
             "actor_rollout_ref:\n  model: {path: %s/m}\n  actor:\n    optim: {lr: 5.0e-3}\n"
             "    ppo_mini_batch_size: 1\n    ppo_micro_batch_size_per_gpu: 2\n    use_kl_loss: true\n"
             "    kl_loss_coef: 0.1\n    entropy_coeff: 0.01\n"
             "  rollout:\n    n: 4\n    temperature: 0.8\n"
             "    multi_turn: {enable: true, max_assistant_turns: 5, env_command: /usr/bin/python3 tests/py/agent_train_env.py}\n"
             "    agent: {default_agent_loop: tool_agent}\n"
             "algorithm: {adv_estimator: grpo}\n"
             "custom_reward_function: {command: /usr/bin/python3 tests/py/grpo_reward.py}\n"
             "trainer:\n  total_epochs: 1\n  test_freq: -1\n  save_freq: 1\n  val_before_train: false\n  n_threads: 1\n",
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

// The value of key on line `line` (0-based) of F/<run>/metrics.jsonl, or NaN.
static double mval_line(const char *run, int line, const char *key) {
    char *p = fpath(run, "/metrics.jsonl");
    double v = NAN;
    if (rlc_file_exists(p)) {
        char *s = rlc_read_file(p, NULL), *l = s;
        for (int i = 0; i < line && l; i++) { l = strchr(l, '\n'); if (l) l++; }
        cJSON *o = l ? cJSON_ParseWithOpts(l, NULL, 0) : NULL;
        cJSON *x = o ? cJSON_GetObjectItem(o, key) : NULL;
        if (x && cJSON_IsNumber(x)) v = x->valuedouble;
        cJSON_Delete(o);
        free(s);
    }
    free(p);
    return v;
}

static double mval(const char *run, const char *key) { return mval_line(run, 0, key); }

static void test_oracle(int have_torch) {
    char env[512];
    snprintf(env, sizeof env, "RLC_GRPO_DUMP=%s/oracle", F);
    int rc = train(env, "oracle_run", "trainer.total_training_steps=1");
    TL_CHECK(rc == 0, "rlc train (1 multi-turn GRPO step, dumping its batch) exits 0 (rc %d; see %s/oracle_run.log)", rc, F);
    if (rc != 0) return;
    // the batch has observation tokens (mask 0) and several turns
    char *dp = fpath("oracle/step_1.json", "");
    char *s = rlc_read_file(dp, NULL);
    free(dp);
    cJSON *d = cJSON_Parse(s);
    free(s);
    int n0 = 0, n1 = 0;
    cJSON *seqs = d ? cJSON_GetObjectItem(d, "seqs") : NULL;
    for (cJSON *q = seqs ? seqs->child : NULL; q; q = q->next)
        for (cJSON *v = cJSON_GetObjectItem(q, "mask")->child; v; v = v->next) { n0 += v->valueint == 0; n1 += v->valueint == 1; }
    cJSON_Delete(d);
    printf("response tokens: %d sampled (mask 1), %d inserted by the environment (mask 0)\n", n1, n0);
    TL_CHECK(n0 > 0 && n1 > 0, "the step batch mixes sampled and observation tokens (%d, %d)", n1, n0);
    double nt = mval("oracle_run", "num_turns/mean"), mt = mval("oracle_run", "response/model_tokens/mean");
    double rl = mval("oracle_run", "response_length/mean");
    printf("num_turns/mean %g, response/model_tokens/mean %g, response_length/mean %g\n", nt, mt, rl);
    TL_CHECK(nt > 2 && mt < rl, "num_turns/mean %g > 2, model tokens %g < response length %g", nt, mt, rl);
    const char *keys[] = {"num_turns/min", "num_turns/max", "tool_call_counts/mean", "agent_loop/tool_calls/mean",
                          "tools/call_frequency", "tools/failure_frequency", "multi_turn/end_reason/env_done",
                          "multi_turn/invalid_tool_call_blocks", "timing_s/env"};
    for (int k = 0; k < 9; k++) TL_CHECK(isfinite(mval("oracle_run", keys[k])), "metric %s logged", keys[k]);
    // env/<key>/mean: the environment's finished "turns" is num_turns, its observations report steps = 1 each
    double et = mval("oracle_run", "env/turns/mean"), es = mval("oracle_run", "env/steps/mean");
    TL_CHECK(fabs(et - nt) < 1e-9, "env/turns/mean %g equals num_turns/mean %g (every row is a tool row)", et, nt);
    TL_CHECK(es >= 1 && es <= 5, "env/steps/mean %g: 1..5 step replies per trajectory (max_assistant_turns 5)", es);
    if (!have_torch) { tl_skip("torch not importable under /usr/bin/python3: multi-turn PyTorch oracle skipped"); return; }
    char plan[1024];
    snprintf(plan, sizeof plan,
             "{\"temperature\": 0.8, \"lr\": 5e-3, \"beta1\": 0.9, \"beta2\": 0.999, \"eps\": 1e-8, \"weight_decay\": 0.01,"
             " \"clip_grad\": 1.0, \"clip_ratio_low\": 0.2, \"clip_ratio_high\": 0.2, \"clip_ratio_c\": 3.0,"
             " \"entropy_coeff\": 0.01, \"kl_loss_coef\": 0.1, \"ppo_mini_batch_size\": 1, \"micro_batch_size\": 2,"
             " \"norm_adv_by_std\": true}");
    char *pp = fpath("oracle/plan.json", "");
    CHECK(rlc_write_file_atomic(pp, plan, strlen(plan)) == 0, "write plan");
    free(pp);
    tl_system("rm -rf %s/oracle/model && cp -r %s/m %s/oracle/model && /usr/bin/python3 tests/py/agent_step_ref.py %s/oracle", F, F,
              F, F);
    char *rp = fpath("oracle/ref.json", "");
    cJSON *ref = NULL;
    if (rlc_file_exists(rp)) { char *t = rlc_read_file(rp, NULL); ref = cJSON_Parse(t); free(t); }
    free(rp);
    TL_CHECK(ref != NULL, "the PyTorch multi-turn oracle ran");
    if (!ref) return;
    static const char *names[] = {"pg_loss", "kl_loss", "entropy_loss", "loss", "grad_norm"};
    for (int k = 0; k < 5; k++) {
        char key[64];
        snprintf(key, sizeof key, "actor/%s", names[k]);
        double got = mval("oracle_run", key), want = cJSON_GetObjectItem(ref, names[k])->valuedouble;
        printf("%-20s rlc %.9g  torch %.9g\n", key, got, want);
        // fp32 on both sides, different summation orders (~1e-6 relative): the 1e-4 bar, on a 1e-3 floor
        double tol = 1e-4 * (fabs(want) > 1e-3 ? fabs(want) : 1e-3);
        TL_CHECK(fabs(got - want) <= tol, "%s: rlc %.9g vs torch %.9g (tolerance %.3g)", key, got, want, tol);
    }
    cJSON_Delete(ref);
    char *wp = fpath("oracle_run", "/global_step_1/actor");
    model_config cfg;
    param_layout pl;
    param_set ps;
    checkpoint_load(wp, &cfg, &pl, &ps);
    free(wp);
    char *bp = fpath("oracle/ref_params.bin", "");
    float *want = malloc(sizeof(float) * (size_t)pl.numel);
    FILE *f = fopen(bp, "rb");
    int ok = f && fread(want, 4, (size_t)pl.numel, f) == (size_t)pl.numel;
    if (f) fclose(f);
    free(bp);
    TL_CHECK(ok, "oracle weights readable");
    // two AdamW steps of fp32 gradients: the 1e-4 bar
    if (ok) tl_check_close("weights after one multi-turn GRPO step vs torch", ps.data, want, pl.numel, 1e-4);
    free(want);
    param_set_free(&ps);
    param_layout_free(&pl);
}

// The shipped tool configs run with `rlc train` for 2 steps (validation at step 2) on the tiny model and its data:
// the GSM8K calculator tool (`rlc env calculator`) and the sandboxed-Python math tool.
static void test_examples(void) {
    static const char *ex[2] = {"grpo_gsm8k_tool_qwen3_0.6b", "grpo_math_python_tool_qwen3_0.6b"};
    for (int k = 0; k < 2; k++) {
        char env_cmd[512] = "";
        if (k == 0)
            snprintf(env_cmd, sizeof env_cmd, "'actor_rollout_ref.rollout.multi_turn.env_command=%s env calculator --tools calc_gsm8k_reward'",
                     RLC);
        int rc = tl_system("%s train examples/%s.yaml actor_rollout_ref.model.path=%s/m data.train_files=%s/train.jsonl "
                           "data.val_files=%s/train.jsonl data.train_batch_size=2 data.max_response_length=48 "
                           "actor_rollout_ref.actor.ppo_mini_batch_size=2 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 "
                           "actor_rollout_ref.rollout.n=2 trainer.total_training_steps=2 trainer.save_freq=-1 trainer.test_freq=2 "
                           "trainer.val_before_train=false trainer.n_threads=1 trainer.default_local_dir=%s/ex%d %s > %s/ex%d.log 2>&1",
                           RLC, ex[k], F, F, F, F, k, env_cmd, F, k);
        char run[16];
        snprintf(run, sizeof run, "ex%d", k);
        double st = mval_line(run, 1, "training/global_step"), nt = mval_line(run, 1, "val-aux/num_turns/mean");
        TL_CHECK(rc == 0 && st == 2 && isfinite(nt), "examples/%s.yaml: 2 steps and a validation with rlc train (rc %d, step %g, "
                 "val-aux/num_turns/mean %g; see %s/ex%d.log)", ex[k], rc, st, nt, F, k);
    }
}

// Per-row agent choice (verl's agent_name column over agent.default_agent_loop): 4 rows, two naming tool_agent and two
// single_turn_agent, one step of all 4 prompts x 4 samples plus a validation before it.
static void test_per_row(void) {
    rlc_strbuf b = {0};
    for (int r = 0; r < 4; r++)
        rlc_sb_printf(&b, "{\"prompt\": [{\"role\": \"user\", \"content\": \"What is %d plus %d?\"}], \"data_source\": "
                      "\"openai/gsm8k\", \"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"%d\"}, \"agent_name\": \"%s\"}\n",
                      r, r + 2, 2 * r + 2, r % 2 ? "tool_agent" : "single_turn_agent");
    char *dp = fpath("mixed.jsonl", "");
    CHECK(rlc_write_file_atomic(dp, b.s, b.n) == 0, "write %s", dp);
    rlc_sb_free(&b);
    char ov[2048], env[512];
    snprintf(ov, sizeof ov, "data.train_files=%s data.val_files=%s data.train_batch_size=4 trainer.total_training_steps=1 "
             "trainer.val_before_train=true actor_rollout_ref.rollout.agent.default_agent_loop=single_turn_agent", dp, dp);
    snprintf(env, sizeof env, "RLC_GRPO_DUMP=%s/mixed_dump", F);
    int rc = train(env, "mixed", ov);
    TL_CHECK(rc == 0, "rlc train on rows with agent_name (default single_turn_agent) exits 0 (rc %d; see %s/mixed.log)", rc, F);
    free(dp);
    if (rc != 0) return;
    // training: single-turn samples have all-1 masks and the shorter prompt (no tools block); tool samples the longer
    // prompt and observation tokens (the environment observes every turn and answers turns 1 and 2 with a user message)
    char *jp = fpath("mixed_dump/step_1.json", "");
    char *s = rlc_read_file(jp, NULL);
    free(jp);
    cJSON *d = cJSON_Parse(s);
    free(s);
    int n_single = 0, n_tool = 0, bad = 0;
    long long pl_single = -1, pl_tool = -1;
    cJSON *seqs = d ? cJSON_GetObjectItem(d, "seqs") : NULL;
    for (cJSON *q = seqs ? seqs->child : NULL; q; q = q->next) {
        int zeros = 0;
        for (cJSON *v = cJSON_GetObjectItem(q, "mask")->child; v; v = v->next) zeros += v->valueint == 0;
        long long pl = (long long)cJSON_GetObjectItem(q, "plen")->valuedouble;
        // a tool row's prompt holds the tools block, hundreds of tokens more than a single-turn row's
        if (pl < 100) { n_single++; bad += zeros != 0 || (pl_single >= 0 && pl > pl_single + 2); if (pl_single < 0) pl_single = pl; }
        else { n_tool++; pl_tool = pl; }
    }
    cJSON_Delete(d);
    printf("mixed batch: %d single-turn samples (prompt ~%lld tokens), %d tool samples (prompt ~%lld tokens)\n", n_single, pl_single,
           n_tool, pl_tool);
    TL_CHECK(n_single == 8 && n_tool == 8 && !bad, "8 single-turn samples with all-1 masks and 8 tool samples (%d, %d, bad %d)",
             n_single, n_tool, bad);
    // the metrics count single-turn rows as verl does (num_turns 2, end no_tool_call); env/* covers the tool rows only
    double nt = mval_line("mixed", 1, "num_turns/mean"), mn = mval_line("mixed", 1, "num_turns/min");
    double mx = mval_line("mixed", 1, "num_turns/max"), ntc = mval_line("mixed", 1, "multi_turn/end_reason/no_tool_call");
    double et = mval_line("mixed", 1, "env/turns/mean");
    printf("num_turns min %g mean %g max %g, end_reason/no_tool_call %g, env/turns/mean %g\n", mn, nt, mx, ntc, et);
    TL_CHECK(mn == 2 && mx >= 4 && ntc == 0.5, "training: single-turn rows 2 turns, tool rows more (min %g max %g, no_tool_call %g)",
             mn, mx, ntc);
    TL_CHECK(fabs(et - (2 * nt - 2)) < 1e-9, "env/turns/mean %g is the tool rows' mean num_turns (2 * %g - 2)", et, nt);
    double vmn = mval_line("mixed", 0, "val-aux/num_turns/min"), vmx = mval_line("mixed", 0, "val-aux/num_turns/max");
    TL_CHECK(vmn == 2 && vmx >= 4, "validation: the same per-row loops (val-aux/num_turns min %g, max %g)", vmn, vmx);
    // validation where the environment scores some tool trajectories itself (no "digits") and the reward function the
    // others (with "digits"): each reward variable is reduced over the samples that have it, and the environment's
    // numbers are reported as val-aux/env/<key>/mean over the validation set's tool trajectories
    snprintf(ov, sizeof ov, "data.train_files=%s/mixed.jsonl data.val_files=%s/mixed.jsonl data.train_batch_size=4 "
             "trainer.total_training_steps=1 trainer.val_before_train=true data.val_batch_size=3 "
             "actor_rollout_ref.rollout.agent.default_agent_loop=single_turn_agent "
             "'actor_rollout_ref.rollout.multi_turn.env_command=/usr/bin/python3 tests/py/agent_train_env.py --score-val' "
             "actor_rollout_ref.rollout.val_kwargs.n=2 actor_rollout_ref.rollout.val_kwargs.do_sample=true", F, F);
    rc = train(NULL, "mixedval", ov);
    TL_CHECK(rc == 0, "validation with environment-scored and reward-scored samples in one data source exits 0 (rc %d; see "
             "%s/mixedval.log)", rc, F);
    double vnt = mval_line("mixedval", 0, "val-aux/num_turns/mean"), vet = mval_line("mixedval", 0, "val-aux/env/turns/mean");
    double ves = mval_line("mixedval", 0, "val-aux/env/steps/mean");
    double vdg = mval_line("mixedval", 0, "val-aux/openai/gsm8k/digits/mean@2");
    double vdg1 = mval_line("mixedval", 0, "val-aux/openai/gsm8k/digits/mean@1");
    double vrw = mval_line("mixedval", 0, "val-aux/openai/gsm8k/reward/mean@2");
    double vac = mval_line("mixedval", 0, "val-core/openai/gsm8k/acc/mean@2");
    printf("validation: num_turns/mean %g, env/turns/mean %g, env/steps/mean %g, digits/mean@2 %g, digits/mean@1 %g, "
           "reward/mean@2 %g\n", vnt, vet, ves, vdg, vdg1, vrw);
    // 2 of the 4 rows are tool rows and single-turn rows have num_turns 2: the tool rows' mean is 2 * mean - 2,
    // over batches of 3 and 1 rows (the per-batch means weighted by their tool trajectories)
    TL_CHECK(fabs(vet - (2 * vnt - 2)) < 1e-9, "val-aux/env/turns/mean %g is the tool rows' mean num_turns (2 * %g - 2)", vet, vnt);
    TL_CHECK(ves >= 1 && ves <= 5, "val-aux/env/steps/mean %g: 1..5 step replies per trajectory", ves);
    // single-turn rows: both samples have digits (mean@2); tool rows: only the odd sample does (mean@1)
    TL_CHECK(isfinite(vdg) && isfinite(vdg1) && isfinite(vrw) && isfinite(vac), "digits and acc reduced over the samples that "
             "have them (mean@2 for single-turn rows, mean@1 for tool rows; acc the core variable), reward over all");
    // agent_name other than the two loops: a one-line error naming the row
    char *bp = fpath("badagent.jsonl", "");
    const char *bl = "{\"prompt\": [{\"role\": \"user\", \"content\": \"hi\"}], \"data_source\": \"openai/gsm8k\", \"agent_name\": \"react\"}\n";
    CHECK(rlc_write_file_atomic(bp, bl, strlen(bl)) == 0, "write %s", bp);
    snprintf(ov, sizeof ov, "data.train_files=%s trainer.total_training_steps=1", bp);
    rc = train(NULL, "badagent", ov);
    TL_CHECK(rc != 0 && file_contains("badagent", "badagent.jsonl:1: \"agent_name\" must be"), "unknown agent_name: error naming the row (rc %d)", rc);
    free(bp);
}

// rlc_val_metrics: a NaN is a sample without that variable. Two rows of 2 samples; "acc" only on row 0's first
// sample: acc/mean@1 over row 0 alone is the core metric (the data source has acc), reward over all 4 samples.
static void test_val_missing(void) {
    const char *ds[4] = {"d", "d", "d", "d"}, *uid[4] = {"0", "0", "1", "1"}, *names[2] = {"reward", "acc"};
    const double rw[4] = {1, 0, 1, 1}, acc[4] = {1, NAN, NAN, NAN};
    const double *vals[2] = {rw, acc};
    rlc_metrics m;
    rlc_metrics_init(&m);
    rlc_val_metrics(&m, 4, ds, uid, 2, names, vals, NULL, 42);
    int f1 = 0, f2 = 0, f3 = 0, f4 = 0;
    double a1 = rlc_metrics_get(&m, "val-core/d/acc/mean@1", &f1), r2 = rlc_metrics_get(&m, "val-aux/d/reward/mean@2", &f2);
    double s2 = rlc_metrics_get(&m, "val-aux/d/reward/std@2", &f3);
    rlc_metrics_get(&m, "val-aux/d/acc/mean@2", &f4);
    // reward: row 0 mean 0.5 (std 0.5), row 1 mean 1 (std 0); averaged over the rows
    TL_CHECK(f1 && a1 == 1.0 && f2 && r2 == 0.75 && f3 && s2 == 0.25 && !f4,
             "missing values: acc/mean@1 %g (core), reward/mean@2 %g, reward/std@2 %g, no acc/mean@2", a1, r2, s2);
    rlc_metrics_free(&m);
}

static void test_errors(void) {
    int rc = train(NULL, "noenv", "'actor_rollout_ref.rollout.multi_turn.env_command=null' trainer.total_training_steps=1");
    TL_CHECK(rc != 0 && file_contains("noenv", "default_agent_loop=tool_agent needs"), "tool_agent without env_command: error (rc %d)", rc);
}

// data.truncation on prompts rendered with the environment's tools block: a cap just under the shortest of them
// (the rows themselves fit) stops the run with truncation=error, and with left cuts every one to the cap.
static void test_truncation(void) {
    const double lo = mval("oracle_run", "prompt_length/min");
    if (!isfinite(lo)) return;   // the oracle run failed (reported there)
    char ov[256];
    snprintf(ov, sizeof ov, "data.max_prompt_length=%d trainer.total_training_steps=1 trainer.save_freq=-1", (int)lo - 1);
    int rc = train(NULL, "trunc_err", ov);
    TL_CHECK(rc != 0 && file_contains("trunc_err", "the prompt with the environment's tools is") &&
                 file_contains("trunc_err", "(data.truncation=error"),
             "a tools prompt over data.max_prompt_length=%d with truncation=error: one error line (rc %d)", (int)lo - 1, rc);
    snprintf(ov, sizeof ov, "data.max_prompt_length=%d data.truncation=left trainer.total_training_steps=1 trainer.save_freq=-1",
             (int)lo - 1);
    rc = train(NULL, "trunc_left", ov);
    const double mx = mval("trunc_left", "prompt_length/max"), mn = mval("trunc_left", "prompt_length/min");
    TL_CHECK(rc == 0 && mx == lo - 1 && mn == lo - 1, "truncation=left: one step with every tools prompt cut to %d tokens "
             "(rc %d, prompt_length min %g max %g)", (int)lo - 1, rc, mn, mx);
}

int main(void) {
    RLC = tl_rlc_bin();
    if (!rlc_file_exists(RLC)) { tl_skip("%s not built", RLC); return tl_summary(); }
    if (!rlc_file_exists("/usr/bin/python3")) { tl_skip("/usr/bin/python3 missing (the test's environment)"); return tl_summary(); }
    if (!tl_have_torch()) { tl_skip("torch not importable: the fixture's weight edit needs it"); return tl_summary(); }
    if (!make_fixture()) { TL_CHECK(0, "fixture (gen-task, train-tokenizer, init, weight edit) in %s", F); return tl_summary(); }
    int san = getenv("RLC_SAN") && !strcmp(getenv("RLC_SAN"), "1");
    test_oracle(!san);
    test_examples();
    test_per_row();
    test_val_missing();
    test_errors();
    test_truncation();
    if (tl_failed == 0) tl_system("rm -rf %s", F);
    else printf("fixture and logs kept in %s\n", F);
    free(F);
    return tl_summary();
}
