// grpo.c: the trainer's driver (verl's main_ppo + RayPPOTrainer: setup, resume, the epoch loop, validation,
// teardown); one step's phases are in ppo.c, the roles' passes in worker.c. See grpo.h and docs/grpo.md.
#include "trainer/grpo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "io/checkpoint.h"
#include "io/peft.h"
#include "trainer/plot.h"
#include "trainer/ppo.h"
#include "trainer/run_state.h"
#include "trainer/validate.h"

#define AR_LORA "actor_rollout_ref.model."

static void load_data(ppo_trainer *g, rlc_dataset *ds, const rlc_strlist *files, const char *what) {
    const rlc_train_config *c = g->cfg;
    if (files->n == 0) rlc_die("config: data.%s is empty: give a JSONL or Parquet file", what);
    if (files->n > 1) rlc_die("config: data.%s lists %lld files; rlc reads one JSONL or Parquet file per split", what, (long long)files->n);
    rlc_data_opts o;
    rlc_data_opts_default(&o);
    o.max_prompt_length = c->data.max_prompt_length;
    o.truncation = rlc_truncation_parse(c->data.truncation, "data.truncation");
    o.filter_overlong_prompts = c->data.filter_overlong_prompts;
    if (c->data.prompt_key) o.prompt_key = c->data.prompt_key;
    o.vocab_size = g->mcfg.vocab_size;   // each row's prompt ids checked against the model's vocabulary
    rlc_dataset_load(ds, files->v[0], g->tok, &o);
    if (ds->n == 0) rlc_die("%s: no prompts left after loading (data.%s)", files->v[0], what);
}

// ---------------------------------------------------------------------------------------------

// The critic (spec verl-ppo.md §1.2): the backbone of critic.model.path (default: the actor's checkpoint) and its
// value head (score.* when the checkpoint has them, else a fresh one: N(0, initializer_range), bias 0), with its own
// engine: AdamW, LR schedule and clipping from critic.optim.*.
static void critic_setup(ppo_trainer *g, int64_t horizon) {
    const rlc_train_config *c = g->cfg;
    const __typeof__(c->critic) *k = &c->critic;
    const char *path = k->model.path ? k->model.path : c->actor_rollout_ref.model.path;
    run_state_load_critic_model(g, path);
    decoder_model_init(&g->critic_model, &g->critic_pl, &g->critic_params, &g->be);
    engine_config ec;
    engine_config_default(&ec);
    ec.adam.beta1 = k->optim.betas[0];
    ec.adam.beta2 = k->optim.betas[1];
    ec.adam.eps = k->optim.eps;
    ec.adam.weight_decay = k->optim.weight_decay;
    ec.lr = k->optim.lr;
    ec.min_lr = k->optim.min_lr_ratio;
    int st = lr_sched_type_parse(k->optim.lr_scheduler_type);
    if (st < 0) rlc_die("config: critic.optim.lr_scheduler_type '%s' is not constant or cosine", k->optim.lr_scheduler_type);
    ec.lr_sched = (lr_sched_type)st;
    ec.clip_grad = k->optim.clip_grad;
    if (decoder_ckpt_parse(k->activation_checkpoint, &ec.ckpt) != 0)
        rlc_die("config: critic.activation_checkpoint '%s' is not none, selective or full", k->activation_checkpoint);
    ec.total_steps = horizon;
    ec.warmup_steps = lr_resolve_warmup(k->optim.lr_warmup_steps, k->optim.lr_warmup_steps_ratio, horizon);
    ec.no_state = g->W > 1;   // the gradient and the moments live in the fsdp shards (grpo_run_dist)
    engine_init(&g->critic_eng, &g->critic_model, &ec);
    const int64_t n = g->vhead.H + 1;
    g->critic_head = (worker_head){g->vhead.data, rlc_calloc((size_t)n, sizeof(float)), rlc_calloc((size_t)n, sizeof(float)),
                                   rlc_calloc((size_t)n, sizeof(float)), n};
    g->critic = (worker){"critic", &g->critic_model, &g->critic_eng, g->d, NULL, 0, &g->critic_head, 0};
}

// LoRA (docs/lora.md): the adapter set (a PEFT folder from lora_adapter_path, or PEFT's init from data.seed) is
// attached to the actor's model before its engine exists, so the engine's gradients and AdamW moments are the
// adapters'. The base is frozen; with base_dtype=bf16 it is kept once, in bf16 (the fp32 set is freed), and the
// decoder, the reference pass and the rollout engine all read that copy through get_block.
static void lora_setup(ppo_trainer *g) {
    const rlc_train_config *c = g->cfg;
    const __typeof__(c->actor_rollout_ref.model) *mc = &c->actor_rollout_ref.model;
    lora_config lc;
    int on = rlc_config_lora(c, &lc);
    if (!on && !mc->lora_adapter_path) return;
    g->use_lora = 1;
    if (mc->lora_adapter_path) {
        peft_load(mc->lora_adapter_path, &g->mcfg, &g->ll, &g->lora_ad);   // its r, alpha and modules win
    } else {
        lora_layout_init(&g->ll, &g->mcfg, &lc, NULL);
        param_set_init(&g->lora_ad, &g->ll.pl);
        lora_init_weights(&g->ll, &g->lora_ad, g->data_seed);
    }
    decoder_set_lora(&g->model, &g->ll, g->lora_ad.data, NULL);
    if (g->pb.w16) {   // (loaded in bf16 by grpo_setup) only get_block reads the base
        g->model.get_block = param_bf16_get_block;
        g->model.get_block_ctx = &g->pb;
    }
}

static void grpo_setup(ppo_trainer *g, const rlc_train_config *c, int val_only, dist_ctx *d) {
    memset(g, 0, sizeof *g);
    g->cfg = c;
    g->d = d && d->world > 1 ? d : NULL;
    g->W = g->d ? d->world : 1;
    g->R = g->d ? d->rank : 0;
    g->root = g->R == 0;
    backend_init(&g->be, (int)c->trainer.n_threads);
    const char *mp = c->actor_rollout_ref.model.path;
    if (!mp || !*mp) rlc_die("config: actor_rollout_ref.model.path is not set: give an HF checkpoint directory");
    g->tok = rlc_tok_load(mp, NULL);
    if (c->data.chat_template) rlc_tok_load_chat_template(g->tok, c->data.chat_template);
    lora_config lc0;
    const int lora_bf16 = (rlc_config_lora(c, &lc0) || c->actor_rollout_ref.model.lora_adapter_path) &&
                          (!c->actor_rollout_ref.model.base_dtype || !strcmp(c->actor_rollout_ref.model.base_dtype, "bf16"));
    if (lora_bf16) {   // a frozen bf16 base: loaded straight into bf16 (lora_setup attaches it)
        model_config_load(&g->mcfg, mp);
        param_layout_init(&g->pl, &g->mcfg);
        run_state_load_base_bf16(mp, &g->pl, &g->pb);
        g->params = (param_set){&g->pl, NULL};
        decoder_model_init(&g->model, &g->pl, NULL, &g->be);
    } else {
        checkpoint_load(mp, &g->mcfg, &g->pl, &g->params);
        decoder_model_init(&g->model, &g->pl, &g->params, &g->be);
    }
    if (!val_only) {
        load_data(g, &g->train, &c->data.train_files, "train_files");
        g->have_train = 1;
    }
    if (c->data.val_files.n > 0) {
        load_data(g, &g->val, &c->data.val_files, "val_files");
        g->have_val = 1;
    }
    if (val_only && !g->have_val) rlc_die("config: data.val_files is empty: validation needs a JSONL or Parquet file");
    rlc_config_loss_cfg(c, &g->loss_cfg);
    g->use_gae = !strcmp(c->algorithm.adv_estimator, "gae");
    if (!g->use_gae) rlc_config_adv_cfg(c, &g->step_cfg.adv);   // (gae runs on the critic's values: rl/gae.h)
    g->have_critic = !val_only && rlc_config_use_critic(c);
    g->step_cfg.use_kl_in_reward = c->algorithm.use_kl_in_reward;
    g->step_cfg.kl_penalty = rlc_config_kl_penalty(c);
    rlc_config_kl_ctrl(c, &g->kl_ctrl);
    g->temperature = (float)c->actor_rollout_ref.rollout.temperature;
    if (!(g->temperature > 0)) g->temperature = 1.0f;
    g->agent_loop = ppo_agent_loop(c, g->have_train ? &g->train : NULL, g->have_val ? &g->val : NULL);   // env: at the first tool generation
    g->want_entropy_update = c->actor_rollout_ref.actor.entropy_coeff != 0 || c->actor_rollout_ref.actor.calculate_entropy;
    char *rcmd = rlc_config_reward_command(c);
    rlc_reward_init(&g->reward, rcmd, c->custom_reward_function.timeout_s);
    free(rcmd);

    const char *dir = c->trainer.default_local_dir;
    g->run_dir = rlc_strdup(dir);
    rlc_mkdirs(g->run_dir);
    g->metrics_path = rlc_path_join(g->run_dir, val_only ? "eval_metrics.jsonl" : "metrics.jsonl");
    for (int64_t i = 0; i < c->trainer.logger.n && g->root && !g->tb; i++)
        if (!strcmp(c->trainer.logger.v[i], "tensorboard")) {
            char *tbd = tb_log_dir(c->trainer.project_name, c->trainer.experiment_name);
            g->tb = rlc_malloc(sizeof *g->tb);
            tb_writer_init(g->tb, tbd);
            fprintf(stdout, "rlc: tensorboard: %s\n", g->tb->path);
            free(tbd);
        }
    g->data_seed = c->data.seed == RLC_CFG_NULL ? 1 : (uint64_t)c->data.seed;
    const char *dd = getenv("RLC_GRPO_DUMP");
    g->dump_dir = dd && *dd ? dd : NULL;
    const char *cs = getenv("RLC_TEST_CRASH_IN_CHECKPOINT");
    g->crash_step = cs && *cs ? atoll(cs) : -1;
    g->nan_lr_step = getenv("RLC_TEST_NONFINITE_LR") ? atoll(getenv("RLC_TEST_NONFINITE_LR")) : -1;

    lora_setup(g);

    const __typeof__(c->actor_rollout_ref.actor) *ac = &c->actor_rollout_ref.actor;
    engine_config ec;
    engine_config_default(&ec);
    ec.adam.beta1 = ac->optim.betas[0];
    ec.adam.beta2 = ac->optim.betas[1];
    ec.adam.eps = ac->optim.eps;
    ec.adam.weight_decay = ac->optim.weight_decay;
    ec.lr = ac->optim.lr;
    const char *sname = rlc_config_lr_scheduler(c, &ec.min_lr);
    int st = lr_sched_type_parse(sname);
    if (st < 0) rlc_die("config: actor_rollout_ref.actor.optim.lr_scheduler_type '%s' is not constant or cosine", sname);
    ec.lr_sched = (lr_sched_type)st;
    ec.clip_grad = ac->optim.clip_grad;
    if (decoder_ckpt_parse(ac->activation_checkpoint, &ec.ckpt) != 0)
        rlc_die("config: actor_rollout_ref.actor.activation_checkpoint '%s' is not none, selective or full",
                ac->activation_checkpoint);
    ec.temperature = g->temperature;
    if (g->have_train) {
        const int64_t gbs = ppo_gen_batch_size(c);   // the data loader's batch (DAPO: data.gen_batch_size)
        if (gbs > g->train.n)
            rlc_die("config: data.%s=%lld exceeds the %lld training prompts",
                    gbs == c->data.train_batch_size ? "train_batch_size" : "gen_batch_size", (long long)gbs, (long long)g->train.n);
        g->steps_per_epoch = g->train.n / gbs;   // drop_last, as verl's dataloader
        // verl: total_training_steps = len(dataloader) * total_epochs unless trainer.total_training_steps is set
        g->total_steps = c->trainer.total_training_steps != RLC_CFG_NULL && c->trainer.total_training_steps > 0
                             ? c->trainer.total_training_steps
                             : g->steps_per_epoch * c->trainer.total_epochs;
        if (c->data.train_batch_size % ac->ppo_mini_batch_size != 0)
            rlc_die("config: data.train_batch_size=%lld must be a multiple of actor_rollout_ref.actor.ppo_mini_batch_size=%lld",
                    (long long)c->data.train_batch_size, (long long)ac->ppo_mini_batch_size);
        if (!ac->use_dynamic_bsz && ac->ppo_micro_batch_size_per_gpu == RLC_CFG_NULL)
            rlc_die("config: set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu, or use_dynamic_bsz=true");
        if (c->data.train_batch_size % g->W != 0)
            rlc_die("config: data.train_batch_size=%lld must be a multiple of the number of ranks %d",
                    (long long)c->data.train_batch_size, g->W);
        int64_t mini = ac->ppo_mini_batch_size * c->actor_rollout_ref.rollout.n;
        if (mini > c->data.train_batch_size * c->actor_rollout_ref.rollout.n) mini = c->data.train_batch_size * c->actor_rollout_ref.rollout.n;
        if (mini % g->W != 0)
            rlc_die("config: actor_rollout_ref.actor.ppo_mini_batch_size=%lld x rollout.n=%lld sequences must be a multiple of "
                    "the number of ranks %d", (long long)ac->ppo_mini_batch_size, (long long)c->actor_rollout_ref.rollout.n, g->W);
    }
    int64_t horizon = g->total_steps > 0 ? g->total_steps : 1;   // actor.optim.total_training_steps
    // TorchTitan's schedule runs over its own TrainingConfig.steps (10000): verl does not pass its total
    // into it, only the warmup derived from it (spec §7).
    ec.total_steps = !strcmp(c->model_engine, "torchtitan") ? 10000 : horizon;
    ec.warmup_steps = lr_resolve_warmup(ac->optim.lr_warmup_steps, ac->optim.lr_warmup_steps_ratio, horizon);
    // the gradient and the moments live in the fsdp shards (grpo_run_dist); LoRA's are replicated in the engine
    ec.no_state = g->W > 1 && !g->use_lora;
    engine_init(&g->eng, &g->model, &ec);

    g->have_ref = !val_only && (ac->use_kl_loss || c->algorithm.use_kl_in_reward);
    if (g->have_ref && !g->use_lora) {   // frozen copy of the initial weights
        param_set_init(&g->ref_params, &g->pl);
        memcpy(g->ref_params.data, g->params.data, sizeof(float) * (size_t)g->pl.numel);
        decoder_model_init(&g->ref_model, &g->pl, &g->ref_params, &g->be);
    }
    // the roles (W > 1: their sharded state is attached once it exists, in grpo_run_dist). With LoRA the reference
    // is the actor's own model with its adapters off: bitwise the frozen base, so step 0's KL is exactly 0.
    g->actor = (worker){"actor", &g->model, &g->eng, g->d, NULL, 0, NULL, 0};
    g->ref = g->use_lora ? (worker){"ref", &g->model, &g->eng, g->d, NULL, 0, NULL, 1}
                         : (worker){"ref", &g->ref_model, &g->eng, g->d, NULL, 0, NULL, 0};
    if (g->have_critic) critic_setup(g, horizon);
}

static void grpo_teardown(ppo_trainer *g) {
    ppo_agent_free(g);
    if (g->have_critic_fs) fsdp_free(&g->critic_fs);
    free(g->critic_resume_dir);
    if (g->have_critic) {
        engine_free(&g->critic_eng);
        decoder_model_free(&g->critic_model);
        param_set_free(&g->critic_params);
        param_layout_free(&g->critic_pl);
        value_head_free(&g->vhead);
        free(g->critic_head.g); free(g->critic_head.m); free(g->critic_head.v);
    }
    if (g->rollout) rollout_engine_free(g->rollout);
    if (g->have_fs) fsdp_free(&g->fs);
    if (g->have_ref_fs) fsdp_free(&g->ref_fs);
    free(g->resume_opt);
    if (g->have_ref && !g->use_lora) { decoder_model_free(&g->ref_model); param_set_free(&g->ref_params); }
    engine_free(&g->eng);
    decoder_model_free(&g->model);
    if (g->use_lora) {
        param_set_free(&g->lora_ad);
        lora_layout_free(&g->ll);
        if (g->pb.w16) param_bf16_free(&g->pb);
    }
    param_set_free(&g->params);
    param_layout_free(&g->pl);
    if (g->have_train) rlc_dataset_free(&g->train);
    if (g->have_val) rlc_dataset_free(&g->val);
    rlc_reward_free(&g->reward);
    rlc_tok_free(g->tok);
    free(g->run_dir);
    free(g->metrics_path);
    if (g->tb) { tb_writer_free(g->tb); free(g->tb); }
}

static void run_validation(ppo_trainer *g, rlc_metrics *m) {
    double t = rlc_now();
    validate_run(g, m);
    rlc_metrics_set(m, "timing_s/testing", rlc_now() - t);
}

int grpo_run(const rlc_train_config *c, int val_only) { return grpo_run_dist(c, val_only, NULL); }

int grpo_run_dist(const rlc_train_config *c, int val_only, dist_ctx *dc) {
    ppo_trainer g;
    grpo_setup(&g, c, val_only, dc);
    char *cfg_path = rlc_path_join(g.run_dir, val_only ? "eval_config.yaml" : "config.yaml");
    if (g.root) rlc_config_save(c, cfg_path);
    free(cfg_path);
    fprintf(stdout, "rlc: model %s: %lld parameters, %d layers; BLAS %s, %d threads\n", c->actor_rollout_ref.model.path,
            (long long)g.pl.numel, g.mcfg.num_hidden_layers, g.be.blas_core, g.be.n_threads);
    if (g.use_lora) {
        char line[160];
        lora_trainable_line(&g.ll, line, sizeof line);
        fprintf(stdout, "rlc: LoRA r %d alpha %g%s scale %g on %s: %s; frozen base %s; reference = adapters off\n", g.ll.rank,
                (double)g.ll.alpha, g.ll.use_rslora ? " (rsLoRA)" : "", (double)g.ll.scale,
                c->actor_rollout_ref.model.lora_adapter_path ? c->actor_rollout_ref.model.lora_adapter_path : "new adapters",
                line, g.pb.w16 ? "bf16" : "fp32");
    }
    rlc_metrics m;
    rlc_metrics_init(&m);

    if (val_only) {
        run_validation(&g, &m);   // W > 1: every rank validates the whole set (the same result); rank 0 writes
        if (g.root) rlc_metrics_append_jsonl(&m, g.metrics_path);
        if (g.tb) tb_write_metrics(g.tb, &m, g.global_step);
        char *line = rlc_metrics_to_json(&m);
        fprintf(stdout, "%s\n", line);
        free(line);
        rlc_metrics_free(&m);
        grpo_teardown(&g);
        return 0;
    }

    // resume (verl trainer.resume_mode): auto = the latest complete checkpoint in default_local_dir if any,
    // resume_path = trainer.resume_from_path (a global_step_N directory), disable = from scratch.
    const char *rm = c->trainer.resume_mode;
    int64_t resumed = -1;
    if (!strcmp(rm, "auto")) {
        int64_t s = run_state_latest(&g);
        if (s >= 0) {
            char *d = run_state_step_dir(&g, s);
            run_state_load(&g, d);
            free(d);
            resumed = s;
        }
    } else if (!strcmp(rm, "resume_path")) {
        if (!c->trainer.resume_from_path) rlc_die("config: trainer.resume_mode=resume_path needs trainer.resume_from_path");
        run_state_load(&g, c->trainer.resume_from_path);
        resumed = g.global_step;
    } else if (strcmp(rm, "disable") != 0) {
        rlc_die("config: trainer.resume_mode '%s' is not auto, disable or resume_path", rm);
    }
    if (resumed >= 0) {
        run_state_truncate_metrics(&g, resumed);
        fprintf(stdout, "rlc: resumed from global_step_%lld (epoch %lld, batch %lld)\n", (long long)resumed, (long long)g.epoch,
                (long long)g.batch_in_epoch);
    } else if (rlc_file_exists(g.metrics_path)) {
        run_state_truncate_metrics(&g, -1);   // a fresh run starts a fresh log
    }
    // TensorBoard's counterpart of the truncation: earlier event files' steps from here on are dropped
    if (g.tb) tb_write_session_start(g.tb, resumed >= 0 ? resumed + 1 : 0);

    if (g.W > 1 && g.use_lora) {   // replicated adapters + state; the frozen base whole on each rank (the rollout reads it)
        const double MiB = 1024.0 * 1024.0;
        const int64_t na = g.ll.pl.numel;
        fprintf(stdout,
                "rlc: dist: %d ranks; LoRA per rank: frozen base %.3f MiB (%s, whole: the rollout decodes from it), adapters "
                "%.3f MiB (params+grads+AdamW m,v, replicated; gradients all-reduced), no reference copy\n",
                g.W, (g.pb.w16 ? g.pl.numel * 2.0 : g.pl.numel * 4.0) / MiB, g.pb.w16 ? "bf16" : "fp32", na * 16.0 / MiB);
        if (g.have_critic) rlc_die("config: LoRA with a critic (algorithm.adv_estimator=gae) runs in one process for now");
        fflush(stdout);
    }
    if (g.W > 1 && !g.use_lora) {   // sharded state from the (loaded) full weights; g.params stays as the rollout copy
        fsdp_memory mr, rr = {0, 0, 0, 0};
        if (g.have_ref) {   // the reference weights sharded too (frozen state: params only), first, so that its
            // full copy is gone before the actor's shards exist (the peak at start)
            fsdp_init_frozen(&g.ref_fs, g.d, &g.pl, g.ref_params.data);
            g.have_ref_fs = 1;
            param_set_free(&g.ref_params);
            for (int b = 0; b < g.pl.n_blocks; b++) g.ref_model.block_w[b] = NULL;
            fsdp_attach(&g.ref_fs, &g.ref_model, 0);
        }
        fsdp_memory cm = {0, 0, 0, 0};
        if (g.have_critic) {   // the critic sharded as the actor (no full copy kept: it runs on gathered blocks)
            fsdp_init(&g.critic_fs, g.d, &g.critic_pl, g.critic_params.data, &g.critic_eng.cfg.adam);
            g.have_critic_fs = 1;
            param_set_free(&g.critic_params);
            for (int b = 0; b < g.critic_pl.n_blocks; b++) g.critic_model.block_w[b] = NULL;
            g.critic.fs = &g.critic_fs;
            g.critic.infer_sharded = 1;
            if (g.critic_resume_dir) run_state_load_critic_optimizer_sharded(&g);
            cm = fsdp_memory_report(&g.critic_fs);
        }
        fsdp_init(&g.fs, g.d, &g.pl, g.params.data, &g.eng.cfg.adam);
        g.have_fs = 1;
        g.actor.fs = &g.fs;   // updates on the shards; inference on the full rollout copy
        if (g.have_ref) { g.ref.fs = &g.ref_fs; g.ref.infer_sharded = 1; }
        // the ref pass and the update never overlap: the reference uses the actor's gather slots
        if (g.have_ref) {
            fsdp_share_slots(&g.ref_fs, &g.fs);
            rr = fsdp_memory_report(&g.ref_fs);
        }
        mr = fsdp_memory_report(&g.fs);
        if (g.resume_opt) g.eng.sched.step = fsdp_load_optimizer(&g.fs, g.resume_opt);
        const double MiB = 1024.0 * 1024.0;
        fprintf(stdout,
                "rlc: dist: %d ranks; per rank: sharded state %.3f MiB (params+grads+AdamW m,v; one process %.3f MiB), "
                "gather slots %.3f MiB, gradient staging %.3f MiB, rollout weights copy %.3f MiB, reference weights "
                "shard %.3f MiB + slots %.3f MiB (one process %.3f MiB)\n",
                g.W, mr.shard_bytes / MiB, mr.unsharded_bytes / MiB, mr.slot_bytes / MiB, mr.grad_stage_bytes / MiB,
                g.pl.numel * 4.0 / MiB, rr.shard_bytes / MiB, rr.slot_bytes / MiB, g.have_ref ? g.pl.numel * 4.0 / MiB : 0.0);
        if (g.have_critic)
            fprintf(stdout,
                    "rlc: dist: critic per rank: sharded state %.3f MiB (params+grads+AdamW m,v; one process %.3f MiB), gather "
                    "slots %.3f MiB, gradient staging %.3f MiB, value head %.3f MiB (replicated: weights, grad, m, v)\n",
                    cm.shard_bytes / MiB, cm.unsharded_bytes / MiB, cm.slot_bytes / MiB, cm.grad_stage_bytes / MiB,
                    g.critic_head.n * 16.0 / MiB);
        fflush(stdout);
    }
    progress_init(&g.prog, stdout, g.root ? -1 : 0, g.global_step, g.total_steps, 1);
    rollout_config rc;
    ppo_rollout_config(&g, &rc, 0);
    rc.lora_merge = g.use_lora && c->actor_rollout_ref.model.lora.merge;   // merged weights, refreshed by update_weights
    g.rollout = rollout_engine_new(&g.model, &rc);

    // val_before_train: at step 0 only (a resumed run does not validate again; see docs/grpo.md)
    if (c->trainer.val_before_train && g.have_val && g.global_step == 0) {
        run_validation(&g, &m);
        rlc_metrics_set(&m, "training/global_step", 0);
        ppo_log_step(&g, &m);
        rlc_metrics_clear(&m);
    }

    while (g.global_step < g.total_steps) {
        if (g.epoch >= c->trainer.total_epochs) {   // verl's fit loop ends with the epochs
            fprintf(stdout, "rlc: trainer.total_epochs=%lld done after %lld steps (total_training_steps %lld)\n",
                    (long long)c->trainer.total_epochs, (long long)g.global_step, (long long)g.total_steps);
            break;
        }
        int64_t epoch = g.epoch;
        rlc_metrics_set(&m, "training/global_step", (double)(g.global_step + 1));
        rlc_metrics_set(&m, "training/epoch", (double)epoch);
        if (!ppo_train_step(&g, &m)) break;
        int last = g.global_step >= g.total_steps;
        if (c->trainer.test_freq > 0 && g.have_val && (g.global_step % c->trainer.test_freq == 0 || last))
            run_validation(&g, &m);
        ppo_log_step(&g, &m);
        rlc_metrics_clear(&m);
    }
    progress_end(&g.prog);
    free(g.perm);
    rlc_metrics_free(&m);
    // The curves a person looks at.
    const char *keys[] = {"critic/score/mean", "val-core/openai/gsm8k/acc/mean@1", "response_length/mean", "actor/kl_loss",
                          "actor/entropy", "actor/grad_norm"};
    char *svg = rlc_path_join(g.run_dir, "curves.svg");
    if (g.root && rlc_file_exists(g.metrics_path)) plot_metrics_file(g.metrics_path, svg, "rlc GRPO", "training/global_step", keys, 6);
    fprintf(stdout, "rlc: done: %lld steps; metrics %s, curves %s\n", (long long)g.global_step, g.metrics_path, svg);
    free(svg);
    grpo_teardown(&g);
    return 0;
}
