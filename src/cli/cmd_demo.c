// cmd_demo.c: `rlc demo`: the embedded end-to-end demo. It runs, as ordinary rlc subcommands a user
// could type (each is echoed): generate a synthetic GSM8K-format task, train a byte-level BPE tokenizer,
// init a small Qwen3, SFT on demonstrations (worked solutions, most of them reduced to the bare final
// answer, see docs/demo.md), evaluate, GRPO on problems without solutions (rewarded
// only by the final answer, by the built-in GSM8K scorer), evaluate again, and summarise with a plot.
// --tools: the same pipeline for a tool_agent policy with `rlc env calculator` (docs/demo.md, "--tools"): the
// worked demonstrations call the calculator in the Hermes format, the prompts carry the tools block, and the
// rollouts, evaluations and GRPO run the agent loop; the reward still reads only the final answer.
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
#include "core/strbuf.h"
#include "tokenizer/tokenizer.h"
#include "trainer/plot.h"

static const char *USAGE =
    "rlc demo [--out DIR] [--seed S] [--quick] [--threads N] [--sft-epochs E] [--grpo-steps N] [--sft-problems N]\n"
    "         [--min-steps A] [--max-steps B] [--max-operand M] [--answer-only F] [--algo grpo|ppo]\n"
    "         [--tools] [--tool-calls F]";

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

typedef struct { char s[32]; } numtext;
static numtext json_num(double v) {
    numtext t;
    if (isfinite(v)) snprintf(t.s, sizeof t.s, "%.4f", v);
    else snprintf(t.s, sizeof t.s, "null");
    return t;
}

// The number `key` in the last line of a JSONL metrics file, or NAN.
static double read_last_key(const char *path, const char *key) {
    size_t len;
    char *buf = rlc_read_file(path, &len);
    char *last = buf, *p = buf;
    while ((p = strchr(p, '\n')) && p[1]) last = ++p;
    cJSON *o = cJSON_Parse(last);
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    double r = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    cJSON_Delete(o);
    free(buf);
    return r;
}

// --tools: the tokenizer's added tokens, as a JSON list for train-tokenizer: Qwen3's tool markup, and the fixed text
// of the template's tools block (the text before the first tool's schema and after the last), read from the first
// SFT row's system turn, which gen-task wrote as the template renders it. Each is then one token, so the block
// costs its schema's tokens plus two, and the prompt text stays exactly the template's.
static char *tools_added_tokens(const char *sft_data) {
    FILE *f = fopen(sft_data, "rb");
    if (!f) rlc_die("%s: cannot open: %s", sft_data, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    fclose(f);
    cJSON *row = n > 0 ? cJSON_Parse(line) : NULL;
    free(line);
    const cJSON *m0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(row, "messages"), 0);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m0, "content");
    const char *s = cJSON_IsString(c) ? c->valuestring : "";
    const char *first = strstr(s, "\n{"), *last = NULL;
    for (const char *p = s; (p = strstr(p, "\n</tools>")); p++) last = p;
    if (!first || !last || last < first) rlc_die("%s:1: the system turn has no tools block (gen-task --tool-calls)", sft_data);
    cJSON *l = cJSON_CreateArray();
    static const char *MARKUP[4] = {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"};
    for (int i = 0; i < 4; i++) cJSON_AddItemToArray(l, cJSON_CreateString(MARKUP[i]));
    char *pre = rlc_strdup(s);
    pre[first - s] = 0;
    cJSON_AddItemToArray(l, cJSON_CreateString(pre));
    cJSON_AddItemToArray(l, cJSON_CreateString(last));
    char *out = cJSON_PrintUnformatted(l);
    free(pre);
    cJSON_Delete(l);
    cJSON_Delete(row);
    return out;
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
    // --tools: the fraction of worked demonstrations that call the calculator (the others work it out in text)
    const int tools = cli_flag(&a, "tools");
    const char *tcalls = cli_opt(&a, "tool-calls");
    if (tcalls && !tools) rlc_die("demo: --tool-calls applies to --tools only");
    if (!tcalls) tcalls = "1";
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
           "%srun directory: %s\n", ALGO, tools ? "It may call a calculator tool (rlc env calculator) in its answers.\n" : "",
           d.out);
    // 1. data: worked solutions for SFT; questions only for GRPO (the answer field is only the ground truth)
    // (--tools: conversations with the tools block in the system turn; the tokenizer learns from their "text")
    run_rlc(&d, "generate SFT data", "gen-task", "--out", sft_data, "--n", nsft, "--seed", seed_s, "--format", "sft", "--answer-only", ao, "--min-steps", mins, "--max-steps", maxs, "--max-operand", maxo,
            tools ? "--tool-calls" : NULL, tcalls, NULL);
    run_rlc(&d, "generate GRPO prompts", "gen-task", "--out", grpo_data, "--n", ngrpo, "--seed", seed2, "--min-steps", mins, "--max-steps", maxs, "--max-operand", maxo, NULL);
    run_rlc(&d, "generate held-out set", "gen-task", "--out", val_data, "--n", n_val, "--seed", seed3, "--min-steps", mins, "--max-steps", maxs, "--max-operand", maxo, NULL);
    // 2. tokenizer
    // --tools: Qwen3's tool markup as added tokens, as in Qwen3's tokenizer (a call is one <tool_call> token, and
    // the template's tool turn tokenizes as it does for Qwen3), and the tools block's fixed text (tools_added_tokens)
    char *added = tools ? tools_added_tokens(sft_data) : NULL;
    run_rlc(&d, "train tokenizer", "train-tokenizer", "--data", sft_data, "--fields", tools ? "text" : "prompt,response", "--out", tokdir,
            "--vocab-size", "512", tools ? "--added-tokens" : NULL, added, NULL);
    free(added);
    // 3. model config sized to the tokenizer; init
    rlc_tokenizer *tok = rlc_tok_load(tokdir, NULL);
    int64_t V = rlc_tok_vocab_size(tok);
    const int64_t eos = rlc_tok_token_to_id(tok, "<|im_end|>");
    rlc_tok_free(tok);
    if (eos < 0) rlc_die("%s: the trained tokenizer has no <|im_end|>", tokdir);
    int64_t Vp = (V + 63) / 64 * 64;   // padded like Qwen's embedding (rows without a token)
    char cfg[2048];
    int cl = snprintf(cfg, sizeof cfg,
                      "{\n  \"architectures\": [\"Qwen3ForCausalLM\"],\n  \"attention_bias\": false,\n  \"attention_dropout\": 0.0,\n"
                      "  \"bos_token_id\": null,\n  \"eos_token_id\": %lld,\n  \"head_dim\": 32,\n  \"hidden_act\": \"silu\",\n"
                      "  \"hidden_size\": 128,\n  \"initializer_range\": 0.02,\n  \"intermediate_size\": 384,\n"
                      "  \"max_position_embeddings\": %d,\n  \"max_window_layers\": 4,\n  \"model_type\": \"qwen3\",\n"
                      "  \"num_attention_heads\": 4,\n  \"num_hidden_layers\": 4,\n  \"num_key_value_heads\": 2,\n"
                      "  \"rms_norm_eps\": 1e-06,\n  \"rope_scaling\": null,\n  \"rope_theta\": 10000,\n  \"sliding_window\": null,\n"
                      "  \"tie_word_embeddings\": true,\n  \"torch_dtype\": \"float32\",\n  \"transformers_version\": \"4.51.0\",\n"
                      "  \"use_cache\": true,\n  \"use_sliding_window\": false,\n  \"vocab_size\": %lld\n}\n",
                      (long long)eos, tools ? 1024 : 512, (long long)Vp);   // --tools: the tools block makes prompts longer
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
    // --tools: every prompt is a tool_agent row with rlc's calculator environment; the prompts carry the tools
    // block, and a response holds the tool round (observation tokens count against the response length)
    char envc[4400];
    snprintf(envc, sizeof envc, "actor_rollout_ref.rollout.multi_turn.env_command=%s env calculator --tools calculator", d.self);
    if (tools && strpbrk(d.self, " \t'\"\\$`"))
        rlc_die("demo: --tools: the rlc binary's path '%s' would need shell quoting in env_command; run it from a plain path", d.self);
    const char *t1 = tools ? "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent" : NULL;
    const char *t2 = "actor_rollout_ref.rollout.multi_turn.enable=true", *t3 = envc;
    const char *t4 = "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3";
    const char *t5 = "data.max_prompt_length=384", *t6 = "data.max_response_length=160";
    run_rlc(&d, "evaluate SFT checkpoint", "eval", yaml, mp, vf, tf, dl, th, t1, t2, t3, t4, t5, t6, NULL);
    // --quick: a GRPO batch of 16 prompts x 4 samples instead of 64 x 8 (the pipeline, not the result)
    const char *q1 = quick ? "data.train_batch_size=16" : NULL, *q2 = "actor_rollout_ref.actor.ppo_mini_batch_size=16";
    const char *q3 = "actor_rollout_ref.rollout.n=4", *q4 = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64";
    // the overrides end at the first NULL: the tool keys (absent without --tools), then the --quick ones
    const char *ov[12] = {0};
    int nov = 0;
    if (tools) { ov[nov++] = t1; ov[nov++] = t2; ov[nov++] = t3; ov[nov++] = t4; ov[nov++] = t5; ov[nov++] = t6; }
    if (quick) { ov[nov++] = q1; ov[nov++] = q2; ov[nov++] = q3; ov[nov++] = q4; }
    // PPO: the same actor settings plus a critic from the SFT checkpoint with a fresh value head, at 10x the actor's lr
    // as verl's recipes (the GRPO values of these keys are the defaults)
    const char *p1 = ppo ? "algorithm.adv_estimator=gae" : "algorithm.adv_estimator=grpo";
    const char *p2 = ppo ? "critic.ppo_micro_batch_size_per_gpu=64" : "critic.ppo_micro_batch_size_per_gpu=null";
    const char *p3 = ppo ? "critic.optim.lr=1e-3" : "critic.optim.lr=1e-5";
    double t_grpo = run_rlc(&d, ALGO, "train", yaml, mp, vf, tf, dl2, st, th, "trainer.resume_mode=disable", p1, p2, p3, ov[0],
                            ov[1], ov[2], ov[3], ov[4], ov[5], ov[6], ov[7], ov[8], ov[9], NULL);
    char last[4300];
    snprintf(last, sizeof last, "actor_rollout_ref.model.path=%s/global_step_%s/actor", grpodir, steps);
    run_rlc(&d, ppo ? "evaluate PPO checkpoint" : "evaluate GRPO checkpoint", "eval", yaml, last, vf, tf, dl3, th, t1, t2, t3, t4,
            t5, t6, NULL);

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
    int i = 0, n_ev = 0, n_tc = 0;
    double ev_first = 0, ev_last = 0;   // PPO: critic/vf_explained_var of the first and the last step
    double tc_first = NAN, tc_last = NAN;   // --tools: tool_call_counts/mean of the first and the last step
    rlc_strbuf tcs = {0};
    while (mf && getline(&line, &lc, mf) > 0) {
        cJSON *o = cJSON_Parse(line);
        cJSON *s = o ? cJSON_GetObjectItemCaseSensitive(o, "critic/score/mean") : NULL;
        if (cJSON_IsNumber(s)) printf("%s%.2f", i++ % 10 ? " " : "\n  ", s->valuedouble);
        cJSON *ev = o ? cJSON_GetObjectItemCaseSensitive(o, "critic/vf_explained_var") : NULL;
        if (cJSON_IsNumber(ev)) { ev_first = n_ev++ ? ev_first : ev->valuedouble; ev_last = ev->valuedouble; }
        cJSON *tcm = o ? cJSON_GetObjectItemCaseSensitive(o, "tool_call_counts/mean") : NULL;
        if (cJSON_IsNumber(tcm)) {
            rlc_sb_printf(&tcs, "%s%.2f", n_tc % 10 ? " " : "\n  ", tcm->valuedouble);
            tc_first = n_tc++ ? tc_first : tcm->valuedouble;
            tc_last = tcm->valuedouble;
        }
        cJSON_Delete(o);
    }
    free(line);
    if (mf) fclose(mf);
    double total = rlc_now() - d.t_start;
    if (n_ev) printf("\ncritic/vf_explained_var: %.3f at the first step, %.3f at the last", ev_first, ev_last);
    // --tools: calls per trajectory in the rollouts; on the held-out set, verl's num_turns (2: a direct answer, 4:
    // one tool round)
    double nt_sft = tools ? read_last_key(e1, "val-aux/num_turns/mean") : NAN, nt_grpo = tools ? read_last_key(e2, "val-aux/num_turns/mean") : NAN;
    if (tools) {
        printf("\ntool calls per trajectory (tool_call_counts/mean) by step:%s", tcs.s ? tcs.s : " none");
        printf("\nheld-out num_turns (val-aux/num_turns/mean; 2 = direct answer, 4 = one tool round): %.2f after SFT, "
               "%.2f after %s", nt_sft, nt_grpo, ALGO);
    }
    rlc_sb_free(&tcs);
    printf("\n%s: %.1f s for %s steps; whole demo: %.1f s\n", ALGO, t_grpo, steps, total);
    printf("curves: %s/curves.svg   checkpoints (HF format): %s, %s/global_step_*/actor\n", grpodir, sftdir, grpodir);
    if (d.log) {
        fprintf(d.log, "total\t%.2f\n", total);
        fclose(d.log);
    }
    char *res = pj(d.out, "summary.json");
    char sj[1024], tj2[512] = "";
    if (tools)   // JSON has no NaN: a missing metric is null
        snprintf(tj2, sizeof tj2, ", \"tools\": true, \"tool_calls_first_step\": %s, \"tool_calls_last_step\": %s, "
                 "\"heldout_num_turns_sft\": %s, \"heldout_num_turns_grpo\": %s", json_num(tc_first).s, json_num(tc_last).s,
                 json_num(nt_sft).s, json_num(nt_grpo).s);
    int sl = snprintf(sj, sizeof sj,
                      "{\"seed\": %lld, \"acc_sft\": %.6f, \"acc_grpo\": %.6f, \"delta_points\": %.3f, \"grpo_steps\": %lld, "
                      "\"seconds_total\": %.1f, \"metric\": \"%s\", \"heldout_problems\": %s, \"algo\": \"%s\"%s}\n",
                      seed, acc_sft, acc_grpo, 100 * (acc_grpo - acc_sft), grpo_steps, total, key, n_val, algo, tj2);
    rlc_write_file_atomic(res, sj, (size_t)sl);
    free(res); free(e1); free(e2); free(metrics); free(eval_sft); free(eval_grpo); free(tj); free(tc); free(gc);
    free(data); free(sft_data); free(grpo_data); free(val_data); free(tokdir); free(init); free(sftdir); free(grpodir);
    free(cfgp); free(logp);
    cli_args_free(&a);
    return 0;
}
