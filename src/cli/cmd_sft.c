// cmd_sft.c: `rlc sft` supervised fine-tuning on marked tokens (src/trainer/sft.h), writes an HF checkpoint, or with
// --lora-rank trains only LoRA adapters on the frozen base and writes PEFT's adapter folder.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "cli/cli.h"
#include "core/common.h"
#include "io/checkpoint.h"
#include "io/hf_cache.h"
#include "io/peft.h"
#include "model/decoder.h"
#include "data/dataset.h"
#include "data/rows.h"
#include "tokenizer/tokenizer.h"
#include "trainer/progress.h"
#include "trainer/sft.h"
#include "dist/dist_sft.h"

// Text lines ({"prompt", "response"} or {"messages"}) are tokenized with the model's tokenizer and
// chat template (data/dataset.h: the loss covers the response); id lines load as they are.
static void load_sft_data(sft_dataset *d, const char *path, const char *model_dir, const model_config *cfg,
                          const char *chat_template) {
    FILE *f = fopen(path, "r");
    if (!f) rlc_die("%s: cannot open", path);
    char head[4096];
    size_t n = fread(head, 1, sizeof head - 1, f);
    head[n] = 0;
    fclose(f);
    // A .parquet file holds text rows (verl's SFT parquet: prompt/response columns, or messages).
    if (!rlc_rows_is_parquet(path) && (strstr(head, "\"input_ids\"") || (!strstr(head, "\"prompt\"") && !strstr(head, "\"messages\"")))) {
        sft_dataset_load_jsonl(d, path, cfg->vocab_size, cfg->max_position_embeddings);
        return;
    }
    rlc_tok_opts to = {0};
    rlc_tok_opts_chat_template(&to, chat_template, "sft: --chat-template");
    rlc_tokenizer *tok = rlc_tok_load(model_dir, &to);
    rlc_sft_text txt;
    rlc_sft_text_load(&txt, path, tok, cfg->max_position_embeddings, RLC_TRUNC_ERROR, -1);
    for (int64_t i = 0; i < txt.n; i++) {
        char where[1024];
        rlc_format_short(where, sizeof where, "%s:%lld", path, (long long)txt.items[i].line);
        const char *key = "its text";   // the trained tokens (loss mask 1) are the response / assistant turns
        for (int64_t t = 0; t < txt.items[i].n; t++)
            if (txt.items[i].ids[t] >= cfg->vocab_size) { key = txt.items[i].loss_mask[t] ? "its response" : "its prompt"; break; }
        rlc_check_vocab_ids(tok, txt.items[i].ids, txt.items[i].n, cfg->vocab_size, where, key);
        sft_dataset_add(d, txt.items[i].ids, txt.items[i].loss_mask, txt.items[i].n, cfg->vocab_size, where);
    }
    rlc_sft_text_free(&txt);
    rlc_tok_free(tok);
}

// Each step drives the progress display: one updating line on a terminal, a line every --log-every steps elsewhere.
static void on_sft_step(void *user, const sft_step_info *s) {
    progress *p = user;
    if (p->total == 0) {   // the first step of the run (a resumed run starts past 1): rates and ETA count from here
        p->total = s->total_steps;
        p->first_step = p->step = s->step - 1;
    }
    char f[64], x[160];
    snprintf(f, sizeof f, "loss %.6f", s->loss);
    snprintf(x, sizeof x, "grad_norm %.4g | lr %.4g | epoch %d%s", s->grad_norm, s->lr, s->epoch,
             s->skipped ? " | skipped: non-finite grad norm" : "");
    progress_step(p, s->step, s->tokens, f, x);
}

static const char *USAGE =
    "rlc sft --model DIR|ORG/NAME --data IN.jsonl --out DIR [--steps N] [--epochs E] [--batch-size B]\n"
    "        [--micro-batch-tokens K | --micro-batch-size M] [--lr X] [--weight-decay W] [--clip-grad C]\n"
    "        [--beta1 B1] [--beta2 B2] [--eps E] [--warmup-steps S] [--warmup-ratio R]\n"
    "        [--lr-scheduler constant|cosine|linear] [--min-lr-ratio F] [--seed S] [--no-shuffle] [--threads N]\n"
    "        [--log-every N]   (a terminal shows one updating progress line; elsewhere a line every N steps, 10)\n"
    "        [--activation-checkpoint none|selective|full] [--save-dtype f32|bf16|f16] [--save-optimizer]\n"
    "        [--resume-optimizer OPT.bin] [--chat-template auto|qwen3|plain|FILE.jinja]\n"
    "        [--lora-rank R [--lora-alpha A] [--target-modules M] [--exclude-modules M] [--use-rslora] [--adapter DIR]\n"
    "         [--base-dtype bf16|fp32]]\n"
    "        (mpirun -np N rlc sft ...: data parallel, see docs/distributed.md)\n"
    "  IN.jsonl lines: {\"input_ids\": [...], \"loss_mask\": [...]} of equal length; loss_mask[t] = 1 trains\n"
    "  the model to predict input_ids[t] from input_ids[0..t-1] (loss_mask[0] is ignored).\n"
    "  Text lines {\"prompt\": ..., \"response\": ...} or {\"messages\": [...]} are tokenized with the model's\n"
    "  tokenizer and chat template (--chat-template replaces the checkpoint's); the loss then covers the\n"
    "  response (assistant) tokens.\n"
    "  Loss: cross-entropy, token-mean over each global batch of B sequences (shuffled per epoch by --seed).\n"
    "  LoRA (--lora-rank R > 0): only rank-R adapters train (alpha 16 by default); --target-modules is all-linear\n"
    "  (default), a comma list of module names (q_proj,v_proj; or full names), or a regex (any of *()[]|?+^$\\)\n"
    "  fullmatched on names like model.layers.0.self_attn.q_proj; --adapter DIR continues a PEFT adapter. The frozen\n"
    "  base is kept in bf16 (--base-dtype, default bf16: lossless for a bf16 checkpoint), widened per block. --out\n"
    "  then receives the PEFT adapter folder (adapter_config.json, adapter_model.safetensors).";

// A --target-modules / --exclude-modules value: all-linear, a regex (it holds a regex operator), or a comma list.
static void lora_match_arg(lora_match *m, const char *opt, const char *v) {
    char err[256];
    int rc = strcmp(v, "all-linear") == 0 || strpbrk(v, "*()[]|?+^$\\") ? lora_match_string(m, v, err, sizeof err)
                                                                          : lora_match_list(m, v, err, sizeof err);
    if (rc != 0) rlc_die("sft: --%s: %s", opt, err);
}

int cmd_sft(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (cli_flag(&a, "help")) { printf("usage: %s\n", USAGE); cli_args_free(&a); return 0; }
    char *model_dir = hf_resolve_model(cli_opt_req(&a, "model"), "--model");   // a directory or a cached hub id
    const char *data = cli_opt_req(&a, "data");
    const char *out = cli_opt_req(&a, "out");
    sft_config c;
    sft_config_default(&c);
    c.steps = cli_int(&a, "steps", 0, 0, INT64_MAX);
    c.epochs = (int)cli_int(&a, "epochs", 1, 1, 1000000);
    c.batch_size = (int)cli_int(&a, "batch-size", c.batch_size, 1, 1 << 24);
    c.micro_batch_tokens = cli_int(&a, "micro-batch-tokens", 0, 0, INT32_MAX);
    c.micro_batch_seqs = (int)cli_int(&a, "micro-batch-size", 0, 0, 1 << 24);
    if (c.micro_batch_tokens > 0 && c.micro_batch_seqs > 0)
        rlc_die("sft: give --micro-batch-tokens or --micro-batch-size, not both");
    c.lr = cli_double(&a, "lr", c.lr, 0.0, 10.0);
    c.adam.weight_decay = cli_double(&a, "weight-decay", c.adam.weight_decay, 0.0, 10.0);
    c.adam.beta1 = cli_double(&a, "beta1", c.adam.beta1, 0.0, 0.999999999);
    c.adam.beta2 = cli_double(&a, "beta2", c.adam.beta2, 0.0, 0.999999999);
    c.adam.eps = cli_double(&a, "eps", c.adam.eps, 0.0, 1.0);
    c.clip_grad = cli_double(&a, "clip-grad", c.clip_grad, -1.0, 1e30);
    c.warmup_steps = cli_int(&a, "warmup-steps", -1, -1, INT64_MAX);
    c.warmup_ratio = cli_double(&a, "warmup-ratio", 0.0, 0.0, 1.0);
    c.min_lr = cli_double(&a, "min-lr-ratio", 0.0, 0.0, 1.0);
    const char *sched = cli_opt(&a, "lr-scheduler");
    if (sched) {
        int t = lr_sched_type_parse(sched);
        if (t < 0 || t == LR_WSD_SQRT || t == LR_WSD_COSINE)
            rlc_die("sft: --lr-scheduler must be constant, cosine or linear, got '%s'", sched);
        c.lr_sched = (lr_sched_type)t;
    }
    c.seed = (uint64_t)cli_int(&a, "seed", 0, 0, INT64_MAX);
    if (cli_flag(&a, "no-shuffle")) c.shuffle = 0;
    int threads = (int)cli_int(&a, "threads", 0, 0, 4096);
    const char *ck = cli_opt(&a, "activation-checkpoint");
    if (ck && decoder_ckpt_parse(ck, &c.ckpt) != 0)
        rlc_die("sft: --activation-checkpoint must be none, selective or full, got '%s'", ck);
    const char *dt = cli_opt(&a, "save-dtype");
    st_dtype save_dtype = ST_F32;
    if (dt) {
        if (!strcmp(dt, "f32") || !strcmp(dt, "fp32") || !strcmp(dt, "float32")) save_dtype = ST_F32;
        else if (!strcmp(dt, "bf16") || !strcmp(dt, "bfloat16")) save_dtype = ST_BF16;
        else if (!strcmp(dt, "f16") || !strcmp(dt, "fp16") || !strcmp(dt, "float16")) save_dtype = ST_F16;
        else rlc_die("sft: --save-dtype must be f32, bf16 or f16, got '%s'", dt);
    }
    int save_opt = cli_flag(&a, "save-optimizer");
    const char *resume_opt = cli_opt(&a, "resume-optimizer");
    int64_t log_every = cli_int(&a, "log-every", 10, 1, INT64_MAX);
    const char *chat_template = cli_opt(&a, "chat-template");
    lora_config lc;
    lora_config_default(&lc);
    lc.rank = (int)cli_int(&a, "lora-rank", 0, 0, 65536);
    lc.alpha = (float)cli_double(&a, "lora-alpha", 16.0, -1e30, 1e30);
    const char *tm = cli_opt(&a, "target-modules"), *em = cli_opt(&a, "exclude-modules");
    if (tm) lora_match_arg(&lc.target, "target-modules", tm);
    if (em) lora_match_arg(&lc.exclude, "exclude-modules", em);
    lc.use_rslora = cli_flag(&a, "use-rslora");
    const char *adapter_in = cli_opt(&a, "adapter");
    const char *base_dt = cli_opt(&a, "base-dtype");
    if (base_dt && strcmp(base_dt, "bf16") != 0 && strcmp(base_dt, "fp32") != 0)
        rlc_die("sft: --base-dtype must be bf16 or fp32, got '%s'", base_dt);
    const int base_bf16 = !base_dt || strcmp(base_dt, "bf16") == 0;
    const int use_lora = lc.rank > 0 || adapter_in;
    if (!use_lora && (tm || em || lc.use_rslora || base_dt))
        rlc_die("sft: --target-modules, --exclude-modules, --use-rslora and --base-dtype need --lora-rank");
    cli_check_unknown(&a, USAGE);

    dist_ctx dd;   // world 1 unless launched by mpirun (data-parallel SFT, src/dist/dist_sft.h)
    dist_init(&dd, NULL, NULL);
    const int use_dist = dd.world > 1 || resume_opt;
    if (use_lora && use_dist) rlc_die("sft: LoRA (--lora-rank / --adapter) runs in one process without --resume-optimizer");
    const int root = dd.rank == 0;
    if (!root) { FILE *nul = fopen("/dev/null", "w"); if (nul) { fflush(stdout); dup2(fileno(nul), 1); fclose(nul); } }
    backend_ctx be;
    backend_init(&be, threads);
    double t0 = rlc_now();
    model_config cfg;
    param_layout pl;
    param_set ps;
    checkpoint_load(model_dir, &cfg, &pl, &ps);
    decoder_model m;
    decoder_model_init(&m, &pl, &ps, &be);
    lora_layout ll;
    param_set ad = {0};
    param_bf16 pb = {0};
    if (use_lora) {   // the adapters train; the base stays as loaded
        static const lora_keys keys = {"--lora-rank", "--lora-alpha", "--target-modules"};
        if (adapter_in) peft_load(adapter_in, &cfg, &ll, &ad);
        else {
            lora_layout_init(&ll, &cfg, &lc, &keys);
            param_set_init(&ad, &ll.pl);
            lora_init_weights(&ll, &ad, c.seed);
        }
        decoder_set_lora(&m, &ll, ad.data, NULL);
        if (base_bf16) {   // the frozen base in bf16, widened per block where used; the fp32 copy goes
            param_bf16_init(&pb, &ps);
            param_set_free(&ps);
            m.get_block = param_bf16_get_block;
            m.get_block_ctx = &pb;
        }
        char line[160];
        lora_trainable_line(&ll, line, sizeof line);
        printf("rlc sft: LoRA r %d alpha %g%s scale %g: %s; frozen base %s\n", ll.rank, (double)ll.alpha,
               ll.use_rslora ? " (rsLoRA)" : "", (double)ll.scale, line, base_bf16 ? "bf16" : "fp32");
    }
    sft_dataset d;
    sft_dataset_init(&d);
    load_sft_data(&d, data, model_dir, &cfg, chat_template);
    printf("rlc sft: %s: %d sequences, %lld tokens, %lld targets; model %s (%lld params); threads %d, BLAS %s, "
           "checkpointing %s\n", data, d.n, (long long)d.T, (long long)d.n_targets, model_dir, (long long)pl.numel,
           be.n_threads, be.blas_core, decoder_ckpt_name(c.ckpt));
    printf("rlc sft: weight_decay %g, clip_grad %g, micro-batches of %s %lld, load %.2f s\n",
           c.adam.weight_decay, c.clip_grad, c.micro_batch_seqs > 0 ? "seqs" : "tokens",
           (long long)(c.micro_batch_seqs > 0 ? c.micro_batch_seqs : c.micro_batch_tokens), rlc_now() - t0);
    progress prog;
    progress_init(&prog, stdout, -1, 0, 0, log_every);
    c.on_step = on_sft_step;
    c.user = &prog;
    sft_summary s;
    engine e;
    char *opt_path = rlc_path_join(out, "optimizer.bin");
    if (use_dist) {
        dist_sft_opts o = {.resume_optimizer = resume_opt, .save_optimizer = save_opt ? opt_path : NULL};
        const char *die = getenv("RLC_TEST_DIE_AT_STEP");   // test hook: a rank dies mid-step
        o.die_at_step = die ? atoi(die) : 0;
        o.die_rank = dd.world > 1 ? 1 : 0;
        dist_sft_report rep;
        if (root && save_opt) rlc_mkdirs(out);   // optimizer.bin is written before the checkpoint
        dist_sft_train(&dd, &m, &d, &c, &o, &s, &rep);
        printf("rlc sft: %d ranks: received %.3f MB per rank (all-gather %.3f, reduce-scatter %.3f), %.2f s in collectives "
               "(%.0f%%); sharded state %.2f MiB/rank vs %.2f MiB unsharded, gather slots %.2f MiB, gradient staging %.2f MiB; "
               "prefetch hits %lld, sync gathers %lld\n", dd.world, rep.comm_bytes / 1e6, rep.allgather_bytes / 1e6,
               rep.reduce_scatter_bytes / 1e6, rep.comm_seconds, s.seconds > 0 ? 100 * rep.comm_seconds / s.seconds : 0,
               rep.mem.shard_bytes / 1048576.0, rep.mem.unsharded_bytes / 1048576.0, rep.mem.slot_bytes / 1048576.0,
               rep.mem.grad_stage_bytes / 1048576.0, (long long)rep.prefetch_hits, (long long)rep.sync_gathers);
        memset(&e, 0, sizeof e);
    } else {
        sft_train(&m, &d, &c, &s, &e);
    }
    progress_end(&prog);
    double t1 = rlc_now();
    int ncopied = 0;
    if (root && use_lora) {
        peft_save(out, &ll, &ad, cli_opt(&a, "model"));
    } else if (root) {
        checkpoint_save(out, &ps, save_dtype);
        ncopied = checkpoint_copy_tokenizer(model_dir, out);
    }
    if (save_opt && !use_dist) {   // (the data-parallel path wrote it already, full layout, rank 0)
        char *p = rlc_path_join(out, "optimizer.bin");
        engine_save_state(&e, p);
        free(p);
    }
    printf("rlc sft: %lld steps, loss %.6f -> %.6f, %.1f tokens/s, %lld skipped; wrote %s (%s%s, %d tokenizer files) in "
           "%.2f s; peak RSS %.2f GiB\n", (long long)s.steps, s.first_loss, s.last_loss,
           s.seconds > 0 ? (double)s.tokens / s.seconds : 0.0, (long long)s.skipped, out, use_lora ? "PEFT adapter, F32" : st_dtype_name(save_dtype),
           save_opt ? ", optimizer.bin" : "", ncopied, rlc_now() - t1, (double)rlc_peak_rss() / (1 << 30));
    if (!use_dist) engine_free(&e);
    free(opt_path);
    sft_dataset_free(&d);
    decoder_model_free(&m);
    if (use_lora) { param_set_free(&ad); lora_layout_free(&ll); }
    if (pb.w16) param_bf16_free(&pb);
    param_set_free(&ps);
    param_layout_free(&pl);
    free(model_dir);
    cli_args_free(&a);
    dist_finalize(&dd);
    return 0;
}
