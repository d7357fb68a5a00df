// cmd_demo.c: `rlc demo`: the embedded end-to-end demo. It runs, as ordinary rlc subcommands a user
// could type (each is echoed): generate a synthetic GSM8K-format task, train a byte-level BPE tokenizer,
// init a small Qwen3, SFT on demonstrations (worked solutions, most of them reduced to the bare final
// answer, see docs/demo.md), evaluate, GRPO on problems without solutions (rewarded
// only by the final answer, by the built-in GSM8K scorer), evaluate again, and summarise with a plot.
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/common.h"
#include "tokenizer/tokenizer.h"
#include "trainer/plot.h"

static const char *USAGE =
    "rlc demo [--out DIR] [--seed S] [--quick] [--threads N] [--sft-epochs E] [--grpo-steps N] [--sft-problems N]\n"
    "         [--min-steps A] [--max-steps B] [--max-operand M] [--answer-only F] [--algo grpo|ppo]";

typedef struct {
    const char *out;
    char self[4096];
    int threads;
    double t_start;
    FILE *log;
} demo;

// Run `rlc <args...>` (NULL-terminated), echoing the command; dies if it fails.
static double run_rlc(demo *d, const char *stage, ...) {
    const char *argv[64];
    int n = 0;
    argv[n++] = d->self;
    va_list ap;
    va_start(ap, stage);
    const char *s;
    while ((s = va_arg(ap, const char *)) && n < 63) argv[n++] = s;
    va_end(ap);
    argv[n] = NULL;
    printf("\n== %s\n$ rlc", stage);
    for (int i = 1; i < n; i++) printf(" %s", argv[i]);
    printf("\n");
    fflush(stdout);
    double t0 = rlc_now();
    pid_t pid = fork();
    if (pid < 0) rlc_die("demo: fork failed: %s", strerror(errno));
    if (pid == 0) {
        execv(d->self, (char *const *)argv);
        fprintf(stderr, "rlc: error: demo: cannot run %s: %s\n", d->self, strerror(errno));
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) < 0) rlc_die("demo: waitpid failed: %s", strerror(errno));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rlc_die("demo: stage '%s' failed (status %d); see the output above", stage, st);
    double dt = rlc_now() - t0;
    printf("   (%s: %.1f s)\n", stage, dt);
    if (d->log) fprintf(d->log, "%s\t%.2f\n", stage, dt);
    return dt;
}

static char *pj(const char *a, const char *b) { return rlc_path_join(a, b); }

// The value of the first "val-core/..." key in the last line of an eval_metrics.jsonl.
static double read_val(const char *path, char *key_out, size_t key_cap) {
    size_t len;
    char *buf = rlc_read_file(path, &len);
    char *last = buf, *p = buf;
    while ((p = strchr(p, '\n')) && p[1]) last = ++p;
    cJSON *o = cJSON_Parse(last);
    double v = NAN;
    if (o)
        for (cJSON *it = o->child; it; it = it->next)
            if (!strncmp(it->string, "val-core/", 9) && cJSON_IsNumber(it)) {
                v = it->valuedouble;
                if (key_out) snprintf(key_out, key_cap, "%s", it->string);
                break;
            }
    cJSON_Delete(o);
    free(buf);
    if (!isfinite(v)) rlc_die("%s: no val-core metric found", path);
    return v;
}

int cmd_demo(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (cli_flag(&a, "help")) { printf("usage: %s\n", USAGE); cli_args_free(&a); return 0; }
    demo d = {0};
    d.out = cli_opt(&a, "out");
    if (!d.out) d.out = "runs/demo";
    long long seed = cli_int(&a, "seed", 1, 0, 1000000);
    int quick = cli_flag(&a, "quick");
    d.threads = (int)cli_int(&a, "threads", 0, 0, 1024);
    long long sft_epochs = cli_int(&a, "sft-epochs", quick ? 1 : 2, 1, 1000);
    long long grpo_steps = cli_int(&a, "grpo-steps", quick ? 2 : 40, 1, 100000);
    long long n_sft = cli_int(&a, "sft-problems", quick ? 256 : 24000, 16, 10000000);
    // Fraction of SFT demonstrations that give only the final answer (docs/demo.md: what GRPO improves on).
    const char *ao = cli_opt(&a, "answer-only");
    if (!ao) ao = "0.7";
    // Task difficulty (see docs/demo.md for why these defaults).
    char mins[16], maxs[16], maxo[16];
    snprintf(mins, sizeof mins, "%lld", cli_int(&a, "min-steps", 2, 1, 8));
    snprintf(maxs, sizeof maxs, "%lld", cli_int(&a, "max-steps", 3, 1, 8));
    snprintf(maxo, sizeof maxo, "%lld", cli_int(&a, "max-operand", 10, 2, 1000000));
    // --algo ppo: the RL stage is PPO with a critic (algorithm.adv_estimator=gae) instead of GRPO
    const char *algo = cli_opt(&a, "algo");
    if (!algo) algo = "grpo";
    if (strcmp(algo, "grpo") != 0 && strcmp(algo, "ppo") != 0) rlc_die("demo: --algo '%s': expected grpo or ppo", algo);
    const int ppo = !strcmp(algo, "ppo");
    const char *ALGO = ppo ? "PPO" : "GRPO";
    cli_check_unknown(&a, USAGE);
    ssize_t k = readlink("/proc/self/exe", d.self, sizeof d.self - 1);
    if (k <= 0) rlc_die("demo: cannot find the rlc binary (/proc/self/exe)");
    d.self[k] = 0;
    rlc_mkdirs(d.out);
    char *logp = pj(d.out, "timings.tsv");
    d.log = fopen(logp, "w");
    d.t_start = rlc_now();
    char seed_s[32], seed2[32], seed3[32], thr[16], nsft[32], ngrpo[32], ep[16], steps[32];
    snprintf(seed_s, sizeof seed_s, "%lld", seed);
    snprintf(seed2, sizeof seed2, "%lld", seed * 1000 + 2);   // disjoint problem sets: SFT, GRPO, held-out
    snprintf(seed3, sizeof seed3, "%lld", seed * 1000 + 3);
    snprintf(thr, sizeof thr, "%d", d.threads);
    snprintf(nsft, sizeof nsft, "%lld", n_sft);
    snprintf(ngrpo, sizeof ngrpo, "%lld", quick ? 64LL : 4096LL);
    snprintf(ep, sizeof ep, "%lld", sft_epochs);
    snprintf(steps, sizeof steps, "%lld", grpo_steps);
    const char *n_val = quick ? "32" : "200";

    char *data = pj(d.out, "data"), *sft_data = pj(data, "sft.jsonl"), *grpo_data = pj(data, "grpo_train.jsonl");
    char *val_data = pj(data, "heldout.jsonl"), *tokdir = pj(d.out, "tokenizer"), *init = pj(d.out, "init");
    char *sftdir = pj(d.out, "sft"), *grpodir = pj(d.out, "grpo"), *cfgp = pj(d.out, "model_config.json");
    rlc_mkdirs(data);
    printf("rlc demo: a small Qwen3 learns multi-step arithmetic word problems (GSM8K format): SFT, then %s.\n"
           "run directory: %s\n", ALGO, d.out);
    // 1. data: worked solutions for SFT; questions only for GRPO (the answer field is only the ground truth)
    run_rlc(&d, "generate SFT data", "gen-task", "--out", sft_data, "--n", nsft, "--seed", seed_s, "--format", "sft", "--answer-only", ao, "--min-steps", mins, "--max-steps", maxs, "--max-operand", maxo, NULL);
    run_rlc(&d, "generate GRPO prompts", "gen-task", "--out", grpo_data, "--n", ngrpo, "--seed", seed2, "--min-steps", mins, "--max-steps", maxs, "--max-operand", maxo, NULL);
    run_rlc(&d, "generate held-out set", "gen-task", "--out", val_data, "--n", n_val, "--seed", seed3, "--min-steps", mins, "--max-steps", maxs, "--max-operand", maxo, NULL);
    // 2. tokenizer
    run_rlc(&d, "train tokenizer", "train-tokenizer", "--data", sft_data, "--fields", "prompt,response", "--out", tokdir,
            "--vocab-size", "512", NULL);
    // 3. model config sized to the tokenizer; init
    rlc_tokenizer *tok = rlc_tok_load(tokdir, NULL);
    int64_t V = rlc_tok_vocab_size(tok);
    rlc_tok_free(tok);
    int64_t Vp = (V + 63) / 64 * 64;   // padded like Qwen's embedding (rows without a token)
    char cfg[2048];
    int cl = snprintf(cfg, sizeof cfg,
                      "{\n  \"architectures\": [\"Qwen3ForCausalLM\"],\n  \"attention_bias\": false,\n  \"attention_dropout\": 0.0,\n"
                      "  \"bos_token_id\": null,\n  \"eos_token_id\": %lld,\n  \"head_dim\": 32,\n  \"hidden_act\": \"silu\",\n"
                      "  \"hidden_size\": 128,\n  \"initializer_range\": 0.02,\n  \"intermediate_size\": 384,\n"
                      "  \"max_position_embeddings\": 512,\n  \"max_window_layers\": 4,\n  \"model_type\": \"qwen3\",\n"
                      "  \"num_attention_heads\": 4,\n  \"num_hidden_layers\": 4,\n  \"num_key_value_heads\": 2,\n"
                      "  \"rms_norm_eps\": 1e-06,\n  \"rope_scaling\": null,\n  \"rope_theta\": 10000,\n  \"sliding_window\": null,\n"
                      "  \"tie_word_embeddings\": true,\n  \"torch_dtype\": \"float32\",\n  \"transformers_version\": \"4.51.0\",\n"
                      "  \"use_cache\": true,\n  \"use_sliding_window\": false,\n  \"vocab_size\": %lld\n}\n",
                      (long long)(V - 3), (long long)Vp);   // <|im_end|> is the third-from-last added token
    if (rlc_write_file_atomic(cfgp, cfg, (size_t)cl) != 0) rlc_die("%s: cannot write: %s", cfgp, strerror(errno));
    run_rlc(&d, "init model", "init", "--config", cfgp, "--out", init, "--seed", seed_s, "--dtype", "f32", NULL);
    char *tj = pj(tokdir, "tokenizer.json"), *tc = pj(tokdir, "tokenizer_config.json"), *gc = pj(tokdir, "generation_config.json");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' '%s' '%s'/", tj, tc, gc, init);
    if (system(cmd) != 0) rlc_die("demo: copying the tokenizer into %s failed", init);
    // 4. SFT on worked solutions
    run_rlc(&d, "SFT", "sft", "--model", init, "--data", sft_data, "--out", sftdir, "--epochs", ep, "--batch-size", "32",
            "--lr", "3e-3", "--lr-scheduler", "cosine", "--warmup-steps", "20", "--weight-decay", "0.01", "--seed", seed_s,
            "--threads", thr, "--log-every", "100", NULL);
    // 5. evaluate the SFT checkpoint, 6. GRPO from it, 7. evaluate again
    char mp[4200], vf[4200], tf[4200], dl[4200], dl2[4200], dl3[4200], st[64], th[64];
    snprintf(mp, sizeof mp, "actor_rollout_ref.model.path=%s", sftdir);
    snprintf(vf, sizeof vf, "data.val_files=%s", val_data);
    snprintf(tf, sizeof tf, "data.train_files=%s", grpo_data);
    char *eval_sft = pj(d.out, "eval_sft"), *eval_grpo = pj(d.out, "eval_grpo");
    snprintf(dl, sizeof dl, "trainer.default_local_dir=%s", eval_sft);
    snprintf(dl2, sizeof dl2, "trainer.default_local_dir=%s", grpodir);
    snprintf(dl3, sizeof dl3, "trainer.default_local_dir=%s", eval_grpo);
    snprintf(st, sizeof st, "trainer.total_training_steps=%s", steps);
    snprintf(th, sizeof th, "trainer.n_threads=%d", d.threads);
    // the repository's config, else the installed one (make install: <prefix>/bin/rlc, <prefix>/share/rlc/examples)
    char yaml[4200] = "examples/demo/grpo_synth.yaml";
    if (!rlc_file_exists(yaml)) {
        char bindir[4096];
        snprintf(bindir, sizeof bindir, "%s", d.self);
        char *sl = strrchr(bindir, '/');
        if (sl) *sl = 0;
        snprintf(yaml, sizeof yaml, "%s/../share/rlc/examples/demo/grpo_synth.yaml", bindir);
        if (!rlc_file_exists(yaml))
            rlc_die("demo: examples/demo/grpo_synth.yaml not found: run the demo from the repository root, or install "
                    "rlc with make install");
    }
    run_rlc(&d, "evaluate SFT checkpoint", "eval", yaml, mp, vf, tf, dl, th, NULL);
    // --quick: a GRPO batch of 16 prompts x 4 samples instead of 64 x 8 (the pipeline, not the result)
    const char *q1 = quick ? "data.train_batch_size=16" : NULL, *q2 = "actor_rollout_ref.actor.ppo_mini_batch_size=16";
    const char *q3 = "actor_rollout_ref.rollout.n=4", *q4 = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64";
    // PPO: the same actor settings plus a critic from the SFT checkpoint with a fresh value head, at 10x the actor's lr
    // as verl's recipes (the GRPO values of these keys are the defaults)
    const char *p1 = ppo ? "algorithm.adv_estimator=gae" : "algorithm.adv_estimator=grpo";
    const char *p2 = ppo ? "critic.ppo_micro_batch_size_per_gpu=64" : "critic.ppo_micro_batch_size_per_gpu=null";
    const char *p3 = ppo ? "critic.optim.lr=1e-3" : "critic.optim.lr=1e-5";
    double t_grpo = run_rlc(&d, ALGO, "train", yaml, mp, vf, tf, dl2, st, th, "trainer.resume_mode=disable", p1, p2, p3, q1,
                            q2, q3, q4, NULL);
    char last[4300];
    snprintf(last, sizeof last, "actor_rollout_ref.model.path=%s/global_step_%s/actor", grpodir, steps);
    run_rlc(&d, ppo ? "evaluate PPO checkpoint" : "evaluate GRPO checkpoint", "eval", yaml, last, vf, tf, dl3, th, NULL);

    // summary
    char key[256];
    char *e1 = pj(eval_sft, "eval_metrics.jsonl"), *e2 = pj(eval_grpo, "eval_metrics.jsonl");
    double acc_sft = read_val(e1, key, sizeof key), acc_grpo = read_val(e2, NULL, 0);
    char *metrics = pj(grpodir, "metrics.jsonl");
    printf("\n== summary (%s)\n", d.out);
    printf("held-out greedy accuracy (%s, %s problems):\n  after SFT : %.1f%%\n  after %-4s: %.1f%%  (%+.1f points)\n", key,
           n_val, 100 * acc_sft, ALGO, 100 * acc_grpo, 100 * (acc_grpo - acc_sft));
    printf("%s reward (critic/score/mean) by step:", ALGO);
    FILE *mf = fopen(metrics, "r");
    char *line = NULL;
    size_t lc = 0;
    int i = 0, n_ev = 0;
    double ev_first = 0, ev_last = 0;   // PPO: critic/vf_explained_var of the first and the last step
    while (mf && getline(&line, &lc, mf) > 0) {
        cJSON *o = cJSON_Parse(line);
        cJSON *s = o ? cJSON_GetObjectItemCaseSensitive(o, "critic/score/mean") : NULL;
        if (cJSON_IsNumber(s)) printf("%s%.2f", i++ % 10 ? " " : "\n  ", s->valuedouble);
        cJSON *ev = o ? cJSON_GetObjectItemCaseSensitive(o, "critic/vf_explained_var") : NULL;
        if (cJSON_IsNumber(ev)) { ev_first = n_ev++ ? ev_first : ev->valuedouble; ev_last = ev->valuedouble; }
        cJSON_Delete(o);
    }
    free(line);
    if (mf) fclose(mf);
    double total = rlc_now() - d.t_start;
    if (n_ev) printf("\ncritic/vf_explained_var: %.3f at the first step, %.3f at the last", ev_first, ev_last);
    printf("\n%s: %.1f s for %s steps; whole demo: %.1f s\n", ALGO, t_grpo, steps, total);
    printf("curves: %s/curves.svg   checkpoints (HF format): %s, %s/global_step_*/actor\n", grpodir, sftdir, grpodir);
    if (d.log) {
        fprintf(d.log, "total\t%.2f\n", total);
        fclose(d.log);
    }
    char *res = pj(d.out, "summary.json");
    char sj[1024];
    int sl = snprintf(sj, sizeof sj,
                      "{\"seed\": %lld, \"acc_sft\": %.6f, \"acc_grpo\": %.6f, \"delta_points\": %.3f, \"grpo_steps\": %lld, "
                      "\"seconds_total\": %.1f, \"metric\": \"%s\", \"heldout_problems\": %s, \"algo\": \"%s\"}\n",
                      seed, acc_sft, acc_grpo, 100 * (acc_grpo - acc_sft), grpo_steps, total, key, n_val, algo);
    rlc_write_file_atomic(res, sj, (size_t)sl);
    free(res); free(e1); free(e2); free(metrics); free(eval_sft); free(eval_grpo); free(tj); free(tc); free(gc);
    free(data); free(sft_data); free(grpo_data); free(val_data); free(tokdir); free(init); free(sftdir); free(grpodir);
    free(cfgp); free(logp);
    cli_args_free(&a);
    return 0;
}
