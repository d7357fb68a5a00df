// run_state.c: checkpoints (<run_dir>/global_step_N/{actor/ (HF + optimizer.bin), trainer_state.bin}, atomic by
// directory rename), resume, latest_checkpointed_iteration.txt and metrics truncation.
#include "trainer/run_state.h"
#include "trainer/finite.h"
#include "trainer/trainer_state.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "io/checkpoint.h"
#include "io/peft.h"
#include "io/safetensors.h"

#include <cjson/cJSON.h>

char *run_state_step_dir(const ppo_trainer *g, int64_t step) {
    char name[64];
    snprintf(name, sizeof name, "global_step_%lld", (long long)step);
    return rlc_path_join(g->run_dir, name);
}

static void rm_rf(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char *p = rlc_path_join(path, e->d_name);
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) rm_rf(p);
            else unlink(p);
            free(p);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

// ---- the critic's checkpoint ----

// critic/: model.safetensors (the backbone without an untied lm_head, score.weight, score.bias; fp32 so that a
// resumed run continues bit-identically), config.json as transformers' *ForTokenClassification with num_labels 1.
static void save_critic(ppo_trainer *g, const char *dir) {
    const param_layout *pl = &g->critic_pl;
    const int64_t H = g->vhead.H;
    // W > 1: the full weights gathered from the shards (every rank takes part; rank 0 writes)
    float *full = g->have_critic_fs ? rlc_alloc((size_t)pl->numel * sizeof(float)) : NULL;
    if (full) fsdp_gather_full(&g->critic_fs, g->critic_fs.p, full, 0);
    const float *wdata = full ? full : g->critic_params.data;
    rlc_mkdirs(dir);
    st_write_tensor *wt = rlc_calloc((size_t)pl->n_tensors + 2, sizeof(st_write_tensor));
    int n = 0;
    for (int i = 0; i < pl->n_tensors; i++) {
        const param_tensor *p = &pl->tensors[i];
        wt[n].name = p->name;
        wt[n].dtype = ST_F32;
        wt[n].ndim = p->ndim;
        for (int k = 0; k < p->ndim; k++) wt[n].shape[k] = p->shape[k];
        wt[n].f32 = wdata + p->offset;
        n++;
    }
    wt[n] = (st_write_tensor){.name = "score.weight", .dtype = ST_F32, .ndim = 2, .shape = {1, H}, .f32 = g->vhead.data};
    n++;
    wt[n] = (st_write_tensor){.name = "score.bias", .dtype = ST_F32, .ndim = 1, .shape = {1}, .f32 = g->vhead.data + H};
    n++;
    const char *meta[] = {"format", "pt"};
    char *path = rlc_path_join(dir, "model.safetensors");
    st_write(path, wt, n, meta, 1);
    free(path);
    free(wt);
    model_config mc = g->critic_mcfg;   // (pl->cfg is the head-less layout's: tied)
    snprintf(mc.torch_dtype, sizeof mc.torch_dtype, "float32");
    char *json = model_config_to_json(&mc);
    cJSON *o = cJSON_Parse(json);
    CHECK(o, "model_config_to_json produced invalid JSON");
    cJSON *ar = cJSON_GetObjectItemCaseSensitive(o, "architectures");
    const char *arch = cJSON_GetStringValue(cJSON_GetArrayItem(ar, 0));
    char cls[96];
    const char *suf = arch ? strstr(arch, "ForCausalLM") : NULL;
    snprintf(cls, sizeof cls, "%.*sForTokenClassification", suf ? (int)(suf - arch) : 5, suf ? arch : "Qwen3");
    cJSON_ReplaceItemInArray(ar, 0, cJSON_CreateString(cls));
    cJSON_AddNumberToObject(o, "num_labels", 1);
    cJSON *id2 = cJSON_AddObjectToObject(o, "id2label");
    cJSON_AddStringToObject(id2, "0", "LABEL_0");
    cJSON *l2i = cJSON_AddObjectToObject(o, "label2id");
    cJSON_AddNumberToObject(l2i, "LABEL_0", 0);
    cJSON_AddNumberToObject(o, "classifier_dropout", 0.0);
    char *text = cJSON_Print(o);
    path = rlc_path_join(dir, "config.json");
    if (rlc_write_file_atomic(path, text, strlen(text)) != 0) rlc_die("%s: cannot write: %s", path, strerror(errno));
    free(path);
    free(text);
    cJSON_Delete(o);
    free(json);
    const char *cp = g->cfg->critic.model.path ? g->cfg->critic.model.path : g->cfg->actor_rollout_ref.model.path;
    checkpoint_copy_tokenizer(cp, dir);
    path = rlc_path_join(dir, "optimizer.bin");
    // the backbone's moments and the schedule step (W > 1: full-layout m/v gathered from the shards, any W resumes it)
    if (g->have_critic_fs) fsdp_save_optimizer(&g->critic_fs, path, g->critic_eng.sched.step);
    else engine_save_state(&g->critic_eng, path);
    free(path);
    rlc_free(full);
    // the head's moments, at the backbone optimizer's step (trainer_state.h)
    const int64_t step = g->have_critic_fs ? g->critic_fs.opt_step : g->critic_eng.opt.step;
    path = rlc_path_join(dir, "value_head_optimizer.bin");
    vhead_opt_save(path, g->critic_head.n, step, g->critic_head.m, g->critic_head.v);
    free(path);
}

// The critic's weights from dir into the loaded (head-less) layout: every backbone tensor (a causal-LM checkpoint's
// untied lm_head.weight is skipped), score.* when present (*have_head = 1). Unexpected tensors die.
static void load_critic_weights(const char *dir, param_set *ps, value_head *vh, int *have_head) {
    const param_layout *pl = ps->layout;
    const int64_t H = pl->cfg.hidden_size;
    st_dir d;
    st_dir_open(&d, dir);
    for (int i = 0; i < d.n_tensors; i++) {
        const char *name = d.entries[i].t->name;
        if (param_layout_find(pl, name) >= 0 || !strcmp(name, "lm_head.weight") || !strcmp(name, "score.weight") ||
            !strcmp(name, "score.bias"))
            continue;
        rlc_die("%s: tensor '%s' is not a parameter of a %s value model (unexpected tensor)", d.files[d.entries[i].file].path,
                name, pl->cfg.model_type);
    }
    for (int i = 0; i < pl->n_tensors; i++) {
        const param_tensor *p = &pl->tensors[i];
        const char *path = NULL;
        const st_tensor *t = st_dir_find(&d, p->name, &path);
        if (!t) rlc_die("%s: tensor '%s' is missing from the value model's checkpoint", dir, p->name);
        if (t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16 && t->dtype != ST_F64)
            rlc_die("%s: tensor '%s' has dtype %s; expected F32, BF16 or F16", path, p->name, st_dtype_name(t->dtype));
        int same = t->ndim == p->ndim;
        for (int k = 0; same && k < p->ndim; k++) same = t->shape[k] == p->shape[k];
        if (!same) rlc_die("%s: tensor '%s' has the wrong shape for its config.json", path, p->name);
        st_tensor_to_f32(t, ps->data + p->offset, path);
    }
    const char *pw = NULL, *pb = NULL;
    const st_tensor *tw = st_dir_find(&d, "score.weight", &pw), *tb = st_dir_find(&d, "score.bias", &pb);
    *have_head = tw != NULL;
    if (tw || tb) {
        if (!tw || !tb) rlc_die("%s: the value head needs both score.weight and score.bias", dir);
        if (!(tw->ndim == 2 && tw->shape[0] == 1 && tw->shape[1] == H) && !(tw->ndim == 1 && tw->shape[0] == H))
            rlc_die("%s: score.weight must have shape [1, %lld] (num_labels 1)", pw, (long long)H);
        if (!(tb->ndim == 1 && tb->shape[0] == 1)) rlc_die("%s: score.bias must have shape [1] (num_labels 1)", pb);
        for (int k = 0; k < 2; k++) {
            const st_tensor *t = k ? tb : tw;
            if (t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16 && t->dtype != ST_F64)
                rlc_die("%s: tensor '%s' has dtype %s; expected F32, BF16 or F16", k ? pb : pw, k ? "score.bias" : "score.weight",
                        st_dtype_name(t->dtype));
        }
        st_tensor_to_f32(tw, vh->data, pw);
        st_tensor_to_f32(tb, vh->data + H, pb);
    }
    st_dir_close(&d);
}

void run_state_load_critic_model(ppo_trainer *g, const char *dir) {
    model_config_load(&g->critic_mcfg, dir);
    // The value model has no output embedding: its layout is built as a tied one, which holds no lm_head block, so
    // the params, gradients, AdamW moments and shards never carry the V x H untied head (critic_mcfg keeps the
    // checkpoint's own tie_word_embeddings for the saved config.json).
    model_config lc = g->critic_mcfg;
    lc.tie_word_embeddings = 1;
    param_layout_init(&g->critic_pl, &lc);
    param_set_init(&g->critic_params, &g->critic_pl);
    // a fresh head first (transformers' init for a missing score.*), replaced by the checkpoint's when it has one
    value_head_init(&g->vhead, g->critic_mcfg.hidden_size, g->critic_mcfg.initializer_range, g->data_seed);
    int have_head;
    load_critic_weights(dir, &g->critic_params, &g->vhead, &have_head);
    if (g->root) {
        const int64_t H = g->critic_mcfg.hidden_size, P = g->critic_pl.numel;
        fprintf(stdout, "rlc: critic: %lld backbone parameters + value head %lld (%s); no lm_head%s; params+grads+AdamW "
                "m,v %.3f MiB\n", (long long)P, (long long)(H + 1), have_head ? "from the checkpoint" : "fresh",
                g->critic_mcfg.tie_word_embeddings ? "" : " (the checkpoint's untied one is not loaded)",
                (double)(P + H + 1) * 16.0 / (1024.0 * 1024.0));
    }
}

static void load_critic_state(ppo_trainer *g, const char *dir) {
    int have_head;
    load_critic_weights(dir, &g->critic_params, &g->vhead, &have_head);
    if (!have_head) rlc_die("%s: the critic checkpoint has no score.weight / score.bias", dir);
    if (g->W > 1) {   // the optimizer states go into the shards once they exist (run_state_load_critic_optimizer_sharded)
        free(g->critic_resume_dir);
        g->critic_resume_dir = rlc_strdup(dir);
        return;
    }
    char *opt = rlc_path_join(dir, "optimizer.bin");
    engine_load_state(&g->critic_eng, opt);
    free(opt);
    char *path = rlc_path_join(dir, "value_head_optimizer.bin");
    run_state_load_value_head_opt(path, &g->critic_head, g->critic_eng.opt.step);
    free(path);
}

void run_state_load_critic_optimizer_sharded(ppo_trainer *g) {
    char *opt = rlc_path_join(g->critic_resume_dir, "optimizer.bin");
    g->critic_eng.sched.step = fsdp_load_optimizer(&g->critic_fs, opt);
    free(opt);
    char *path = rlc_path_join(g->critic_resume_dir, "value_head_optimizer.bin");
    run_state_load_value_head_opt(path, &g->critic_head, g->critic_fs.opt_step);
    free(path);
}

void run_state_load_value_head_opt(const char *path, worker_head *h, int64_t want_step) {
    vhead_opt_state s;
    vhead_opt_load(&s, path);   // format, ranges and finite moments checked
    if (s.n != h->n)
        rlc_die("%s: value-head optimizer state for %lld values, the critic's head has %lld (hidden_size + 1)", path,
                (long long)s.n, (long long)h->n);
    if (s.step != want_step)
        rlc_die("%s: value-head optimizer step %lld differs from the critic's optimizer.bin step %lld", path, (long long)s.step,
                (long long)want_step);
    memcpy(h->m, s.m, sizeof(float) * (size_t)s.n);
    memcpy(h->v, s.v, sizeof(float) * (size_t)s.n);
    vhead_opt_free(&s);
}

void run_state_load_base_bf16(const char *dir, const param_layout *pl, param_bf16 *pb) {
    char what[128];
    snprintf(what, sizeof what, "%s: the model's %lld bf16 parameters", dir, (long long)pl->numel);
    rlc_check_memory((double)pl->numel * sizeof(uint16_t), what);
    // the same name / dtype / shape checks as checkpoint_load, then a chunked conversion (no fp32 copy of a tensor)
    st_dir d;
    st_dir_open(&d, dir);
    for (int i = 0; i < d.n_tensors; i++) {
        const st_tensor *t = d.entries[i].t;
        if (param_layout_find(pl, t->name) >= 0 || (pl->cfg.tie_word_embeddings && !strcmp(t->name, "lm_head.weight"))) continue;
        rlc_die("%s: tensor '%s' is not a parameter of this %s config.json (unexpected tensor)", d.files[d.entries[i].file].path,
                t->name, pl->cfg.model_type);
    }
    memset(pb, 0, sizeof *pb);
    pb->pl = pl;
    pb->slot_block = -1;
    pb->w16 = rlc_alloc((size_t)pl->numel * sizeof(uint16_t));
    enum { CHUNK = 1 << 16 };
    float *tmp = rlc_malloc(sizeof(float) * CHUNK);
    for (int i = 0; i < pl->n_tensors; i++) {
        const param_tensor *p = &pl->tensors[i];
        const char *path = NULL;
        const st_tensor *t = st_dir_find(&d, p->name, &path);
        if (!t) rlc_die("%s: tensor '%s' is missing (expected from the %s config.json)", dir, p->name, pl->cfg.model_type);
        if (t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16 && t->dtype != ST_F64)
            rlc_die("%s: tensor '%s' has dtype %s; expected F32, BF16 or F16", path, p->name, st_dtype_name(t->dtype));
        int same = t->ndim == p->ndim;
        for (int k = 0; same && k < p->ndim; k++) same = t->shape[k] == p->shape[k];
        if (!same) rlc_die("%s: tensor '%s' does not have the shape config.json gives it", path, p->name);
        const int es = st_dtype_size(t->dtype);
        for (int64_t o = 0; o < p->numel; o += CHUNK) {
            const int64_t n = p->numel - o < CHUNK ? p->numel - o : CHUNK;
            st_convert_to_f32(t->dtype, (const char *)t->data + o * es, tmp, n);
            for (int64_t k = 0; k < n; k++) {
                if (!isfinite(tmp[k]))
                    rlc_die("%s: tensor '%s' element %lld is %g as fp32; a checkpoint must hold finite weights", path, p->name,
                            (long long)(o + k), (double)tmp[k]);
                pb->w16[p->offset + o + k] = st_f32_to_bf16(tmp[k]);   // round to nearest even, as param_bf16_init
            }
        }
        st_tensor_drop_pages(t);
    }
    free(tmp);
    st_dir_close(&d);
}

// Test hook (env RLC_TEST_NONFINITE_SHARD=N): before step N's save the last rank sets the first value of its piece of
// the first layer block in the actor's AdamW first moment to NaN: a fault only that rank's memory holds (W > 1: its
// shard), which the collective check must still catch.
static void inject_shard_nan(ppo_trainer *g) {
    const char *s = getenv("RLC_TEST_NONFINITE_SHARD");
    if (!s || !*s || atoll(s) != g->global_step || g->R != g->W - 1 || g->use_lora) return;
    const int b = g->pl.n_blocks > 2 ? 1 : 0;
    if (g->have_fs) {
        CHECK((int64_t)g->R * g->fs.shard_len[b] < g->pl.block_off[b + 1] - g->pl.block_off[b], "block %d has no element on rank %d", b, g->R);
        g->fs.m[g->fs.shard_off[b]] = NAN;
    } else {
        g->eng.opt.m.data[g->pl.block_off[b]] = NAN;
    }
    fprintf(stderr, "rlc: test: RLC_TEST_NONFINITE_SHARD=%lld: rank %d puts a NaN in its AdamW first-moment shard\n",
            (long long)g->global_step, g->R);
}

// Never a non-finite checkpoint (finite.h): every buffer the save writes, as each rank holds it (W > 1: the actor's
// and the critic's shards, the replicated LoRA adapters and value head), checked collectively before anything is
// written; the run stops naming the step and the tensor, and the last good checkpoint stays the latest.
static void check_finite_before_save(ppo_trainer *g) {
    finite_buf b[12];
    int n = 0;
    if (g->use_lora) {   // the adapters are what trains: they and their moments (replicated on every rank)
        b[n++] = (finite_buf){.what = "the LoRA adapters", .data = g->lora_ad.data, .pl = &g->ll.pl};
        b[n++] = (finite_buf){.what = "the AdamW first moment", .data = g->eng.opt.m.data, .pl = &g->ll.pl};
        b[n++] = (finite_buf){.what = "the AdamW second moment", .data = g->eng.opt.v.data, .pl = &g->ll.pl};
    } else if (g->have_fs) {   // each rank its own shards: no rank holds all of m and v
        b[n++] = (finite_buf){.what = "the weights", .data = g->fs.p, .pl = &g->pl, .shard_off = g->fs.shard_off};
        b[n++] = (finite_buf){.what = "the AdamW first moment", .data = g->fs.m, .pl = &g->pl, .shard_off = g->fs.shard_off};
        b[n++] = (finite_buf){.what = "the AdamW second moment", .data = g->fs.v, .pl = &g->pl, .shard_off = g->fs.shard_off};
    } else {
        b[n++] = (finite_buf){.what = "the weights", .data = g->params.data, .pl = &g->pl};
        b[n++] = (finite_buf){.what = "the AdamW first moment", .data = g->eng.opt.m.data, .pl = &g->pl};
        b[n++] = (finite_buf){.what = "the AdamW second moment", .data = g->eng.opt.v.data, .pl = &g->pl};
    }
    if (g->have_critic) {
        const fsdp_state *cf = g->have_critic_fs ? &g->critic_fs : NULL;
        const int64_t *so = cf ? cf->shard_off : NULL;
        b[n++] = (finite_buf){.what = "the critic's weights", .data = cf ? cf->p : g->critic_params.data, .pl = &g->critic_pl, .shard_off = so};
        b[n++] = (finite_buf){.what = "the critic's AdamW first moment", .data = cf ? cf->m : g->critic_eng.opt.m.data,
                              .pl = &g->critic_pl, .shard_off = so};
        b[n++] = (finite_buf){.what = "the critic's AdamW second moment", .data = cf ? cf->v : g->critic_eng.opt.v.data,
                              .pl = &g->critic_pl, .shard_off = so};
        const int64_t H = g->vhead.H;
        const float *const hb[3] = {g->vhead.data, g->critic_head.m, g->critic_head.v};
        static const char *const HW[3] = {"the critic's value head", "the value head's AdamW first moment",
                                          "the value head's AdamW second moment"};
        for (int k = 0; k < 3; k++) {
            b[n++] = (finite_buf){.what = HW[k], .data = hb[k], .name = "score.weight", .n = H};
            if (hb[k]) b[n++] = (finite_buf){.what = HW[k], .data = hb[k] + H, .name = "score.bias", .n = 1};
        }
    }
    finite_check_save(b, n, g->d, g->global_step);
}

void run_state_save(ppo_trainer *g) {
    inject_shard_nan(g);
    check_finite_before_save(g);   // every rank: a collective
    if (!g->root) {   // W > 1: rank 0 writes; the others take part in gathering the optimizer state
        if (g->have_fs) fsdp_save_optimizer(&g->fs, "", g->eng.sched.step);   // (LoRA: replicated, rank 0 has it all)
        if (g->have_critic) {   // the same collectives as save_critic on rank 0
            fsdp_gather_full(&g->critic_fs, g->critic_fs.p, NULL, 0);
            fsdp_save_optimizer(&g->critic_fs, "", g->critic_eng.sched.step);
        }
        dist_barrier(g->d, "checkpoint save");
        return;
    }
    char *final = run_state_step_dir(g, g->global_step);
    char tmpname[96];
    snprintf(tmpname, sizeof tmpname, ".tmp_global_step_%lld.%d", (long long)g->global_step, (int)getpid());
    char *tmp = rlc_path_join(g->run_dir, tmpname);
    rm_rf(tmp);
    rlc_mkdirs(tmp);
    char *actor = rlc_path_join(tmp, "actor");
    rlc_mkdirs(actor);
    if (g->use_lora) {   // PEFT's folder (F32: a resumed run continues bit-identically); the frozen base is not copied
        char *ld = rlc_path_join(actor, "lora_adapter");
        peft_save(ld, &g->ll, &g->lora_ad, g->cfg->actor_rollout_ref.model.path);
        free(ld);
    } else {   // fp32 so that a resumed run continues bit-identically; transformers and vLLM load it as-is.
        checkpoint_save(actor, &g->params, ST_F32);
    }
    checkpoint_copy_tokenizer(g->cfg->actor_rollout_ref.model.path, actor);
    if (g->crash_step == g->global_step) {   // tests: die as a SIGKILL would, with the save half written
        fprintf(stderr, "rlc: RLC_TEST_CRASH_IN_CHECKPOINT=%lld: killing the process midway through the save\n",
                (long long)g->crash_step);
        fflush(stderr);
        kill(getpid(), SIGKILL);
    }
    char *opt = rlc_path_join(actor, "optimizer.bin");
    if (g->have_fs) fsdp_save_optimizer(&g->fs, opt, g->eng.sched.step);   // full-layout m/v: any W resumes it
    else engine_save_state(&g->eng, opt);
    if (g->have_critic) {
        char *cdir = rlc_path_join(tmp, "critic");
        save_critic(g, cdir);
        free(cdir);
    }
    const trainer_state ts = {.global_step = g->global_step, .epoch = g->epoch, .batch_in_epoch = g->batch_in_epoch,
                              .kl_ctrl_value = g->kl_ctrl.value, .data_seed = g->data_seed, .train_n = g->train.n};
    char *tsp = rlc_path_join(tmp, "trainer_state.bin");
    trainer_state_save(tsp, &ts);
    rlc_fsync_dir(tmp);
    // The directory appears under its final name only once complete: a crash before this leaves at most a
    // .tmp_ directory, which resume ignores and the next save removes.
    if (rlc_file_exists(final)) rm_rf(final);
    if (rename(tmp, final) != 0) rlc_die("%s: cannot rename checkpoint into place: %s", final, strerror(errno));
    rlc_fsync_dir(g->run_dir);
    char txt[32];
    int len = snprintf(txt, sizeof txt, "%lld", (long long)g->global_step);
    char *latest = rlc_path_join(g->run_dir, "latest_checkpointed_iteration.txt");
    if (rlc_write_file_atomic(latest, txt, (size_t)len) != 0) rlc_die("%s: cannot write: %s", latest, strerror(errno));
    // Keep the newest max_actor_ckpt_to_keep.
    int64_t keep = g->cfg->trainer.max_actor_ckpt_to_keep;
    if (keep != RLC_CFG_NULL && keep > 0) {
        DIR *d = opendir(g->run_dir);
        int64_t *steps = NULL;
        int ns = 0, cap = 0;
        struct dirent *e;
        while (d && (e = readdir(d))) {
            long long s;
            char extra;
            if (sscanf(e->d_name, "global_step_%lld%c", &s, &extra) == 1) {
                if (ns == cap) { cap = cap ? 2 * cap : 16; steps = rlc_realloc(steps, sizeof(int64_t) * (size_t)cap); }
                steps[ns++] = s;
            }
        }
        if (d) closedir(d);
        for (int i = 0; i < ns; i++) {
            int newer = 0;
            for (int j = 0; j < ns; j++) newer += steps[j] > steps[i];
            if (newer >= keep) {
                char *p = run_state_step_dir(g, steps[i]);
                rm_rf(p);
                free(p);
            }
        }
        free(steps);
    }
    // Also drop stale temp dirs from crashed saves.
    DIR *d = opendir(g->run_dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, ".tmp_global_step_", 17) == 0) {
            char *p = rlc_path_join(g->run_dir, e->d_name);
            rm_rf(p);
            free(p);
        }
    }
    if (d) closedir(d);
    if (g->W > 1) dist_barrier(g->d, "checkpoint save");
    free(final); free(tmp); free(actor); free(opt); free(tsp); free(latest);
}

int64_t run_state_latest(const ppo_trainer *g) {
    int64_t best = -1;
    DIR *d = opendir(g->run_dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        long long s;
        char extra;
        if (sscanf(e->d_name, "global_step_%lld%c", &s, &extra) != 1) continue;
        char *dir = rlc_path_join(g->run_dir, e->d_name);
        char *tsp = rlc_path_join(dir, "trainer_state.bin");
        if (rlc_file_exists(tsp) && s > best) best = s;
        free(dir);
        free(tsp);
    }
    if (d) closedir(d);
    return best;
}

// actor/lora_adapter/ into the adapter set: the same modules and rank as the configured adapters (the optimizer
// state that follows is laid out over them), copied exactly (F32 as saved).
static void load_lora_adapter(ppo_trainer *g, const char *actor) {
    char *ld = rlc_path_join(actor, "lora_adapter");
    if (!rlc_file_exists(ld))
        rlc_die("%s: no lora_adapter/ in this checkpoint, but the config trains LoRA adapters (lora_rank > 0)", actor);
    lora_layout ll;
    param_set ad;
    peft_load(ld, &g->mcfg, &ll, &ad);
    if (ll.rank != g->ll.rank || ll.pl.numel != g->ll.pl.numel || memcmp(ll.a_off, g->ll.a_off, sizeof(int64_t) * (size_t)(ll.L * LORA_NPROJ)) ||
        memcmp(ll.b_off, g->ll.b_off, sizeof(int64_t) * (size_t)(ll.L * LORA_NPROJ)))
        rlc_die("%s: adapter of rank %d over %lld parameters, the configured adapters have rank %d over %lld (lora_rank, "
                "target_modules and exclude_modules must match the checkpoint)", ld, ll.rank, (long long)ll.pl.numel,
                g->ll.rank, (long long)g->ll.pl.numel);
    if (ll.scale != g->ll.scale)
        rlc_die("%s: adapter scale %g (lora_alpha %g%s), the configured adapters have %g", ld, (double)ll.scale, (double)ll.alpha,
                ll.use_rslora ? ", rsLoRA" : "", (double)g->ll.scale);
    memcpy(g->lora_ad.data, ad.data, sizeof(float) * (size_t)ll.pl.numel);
    param_set_free(&ad);
    lora_layout_free(&ll);
    free(ld);
}

void run_state_load(ppo_trainer *g, const char *dir) {
    char *tsp = rlc_path_join(dir, "trainer_state.bin");
    trainer_state ts;
    trainer_state_load(&ts, tsp);   // format and ranges checked; what follows checks it against this run
    if (ts.train_n != g->train.n)
        rlc_die("%s: checkpoint was trained on %lld prompts, the configured data has %lld", tsp, (long long)ts.train_n, (long long)g->train.n);
    // batch_in_epoch indexes the epoch's prompt order
    if (ts.batch_in_epoch >= g->steps_per_epoch)
        rlc_die("%s: corrupt trainer state: batch_in_epoch names batch %lld of %lld per epoch (this run's batches are 0..%lld)",
                tsp, (long long)ts.batch_in_epoch, (long long)g->steps_per_epoch, (long long)g->steps_per_epoch - 1);
    char *actor = rlc_path_join(dir, "actor");
    if (g->use_lora) load_lora_adapter(g, actor);
    else checkpoint_load_weights(actor, &g->params);
    char *opt = rlc_path_join(actor, "optimizer.bin");
    if (g->W > 1 && !g->use_lora) { free(g->resume_opt); g->resume_opt = rlc_strdup(opt); }   // loaded into the shards later
    else engine_load_state(&g->eng, opt);
    if (g->have_critic) {
        char *cdir = rlc_path_join(dir, "critic");
        if (!rlc_file_exists(cdir))
            rlc_die("%s: no critic/ in this checkpoint, but the config trains a critic (algorithm.adv_estimator=gae or "
                    "critic.enable=true)", dir);
        load_critic_state(g, cdir);
        free(cdir);
    }
    g->global_step = ts.global_step;
    g->epoch = ts.epoch;
    g->batch_in_epoch = ts.batch_in_epoch;
    g->kl_ctrl.value = ts.kl_ctrl_value;
    g->data_seed = ts.data_seed;
    free(tsp); free(actor); free(opt);
}

void run_state_truncate_metrics(const ppo_trainer *g, int64_t last) {
    if (!g->root || !rlc_file_exists(g->metrics_path)) return;
    size_t len;
    char *buf = rlc_read_file(g->metrics_path, &len);
    rlc_strbuf out = {0};
    char *p = buf;
    while (*p) {
        char *nl = strchr(p, '\n');
        size_t ll = nl ? (size_t)(nl - p + 1) : strlen(p);
        const char *k = strstr(p, "\"training/global_step\": ");
        long long s = k && (!nl || k < nl) ? atoll(k + 24) : -1;
        if (s >= 0 && s <= last) rlc_sb_append(&out, p, ll);
        p += ll;
    }
    if (rlc_write_file_atomic(g->metrics_path, out.s ? out.s : "", out.n) != 0)
        rlc_die("%s: cannot rewrite: %s", g->metrics_path, strerror(errno));
    rlc_sb_free(&out);
    free(buf);
}

