// run_state.c: checkpoints (<run_dir>/global_step_N/{actor/ (HF + optimizer.bin), trainer_state.bin}, atomic by
// directory rename), resume, latest_checkpointed_iteration.txt and metrics truncation.
#include "trainer/run_state.h"

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

static const char *TRAINER_STATE_MAGIC = "RLCGRPO\x01";
enum { TRAINER_STATE_VERSION = 1 };

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

typedef struct {
    char magic[8];
    uint32_t version, pad;
    int64_t global_step, epoch, batch_in_epoch;
    double kl_ctrl_value;
    uint64_t data_seed;
    int64_t train_n;
} trainer_state;

void run_state_save(ppo_trainer *g) {
    if (!g->root) {   // W > 1: rank 0 writes; the others take part in gathering the optimizer state
        fsdp_save_optimizer(&g->fs, "", g->eng.sched.step);
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
    // fp32 so that a resumed run continues bit-identically; transformers and vLLM load it as-is.
    checkpoint_save(actor, &g->params, ST_F32);
    checkpoint_copy_tokenizer(g->cfg->actor_rollout_ref.model.path, actor);
    if (g->crash_step == g->global_step) {   // tests: die as a SIGKILL would, with the save half written
        fprintf(stderr, "rlc: RLC_TEST_CRASH_IN_CHECKPOINT=%lld: killing the process midway through the save\n",
                (long long)g->crash_step);
        fflush(stderr);
        kill(getpid(), SIGKILL);
    }
    char *opt = rlc_path_join(actor, "optimizer.bin");
    if (g->W > 1) fsdp_save_optimizer(&g->fs, opt, g->eng.sched.step);   // full-layout m/v: any W resumes it
    else engine_save_state(&g->eng, opt);
    trainer_state ts;
    memset(&ts, 0, sizeof ts);
    memcpy(ts.magic, TRAINER_STATE_MAGIC, 8);
    ts.version = TRAINER_STATE_VERSION;
    ts.global_step = g->global_step;
    ts.epoch = g->epoch;
    ts.batch_in_epoch = g->batch_in_epoch;
    ts.kl_ctrl_value = g->kl_ctrl.value;
    ts.data_seed = g->data_seed;
    ts.train_n = g->train.n;
    char *tsp = rlc_path_join(tmp, "trainer_state.bin");
    if (rlc_write_file_atomic(tsp, &ts, sizeof ts) != 0) rlc_die("%s: cannot write: %s", tsp, strerror(errno));
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

void run_state_load(ppo_trainer *g, const char *dir) {
    char *tsp = rlc_path_join(dir, "trainer_state.bin");
    size_t len;
    char *buf = rlc_read_file(tsp, &len);
    trainer_state ts;
    if (len != sizeof ts) rlc_die("%s: truncated trainer state (%zu bytes, expected %zu)", tsp, len, sizeof ts);
    memcpy(&ts, buf, sizeof ts);
    free(buf);
    if (memcmp(ts.magic, TRAINER_STATE_MAGIC, 8) != 0) rlc_die("%s: not an rlc trainer state (bad magic)", tsp);
    if (ts.version != TRAINER_STATE_VERSION) rlc_die("%s: trainer state version %u, this rlc reads %d", tsp, ts.version, TRAINER_STATE_VERSION);
    if (ts.train_n != g->train.n)
        rlc_die("%s: checkpoint was trained on %lld prompts, the configured data has %lld", tsp, (long long)ts.train_n, (long long)g->train.n);
    // values no save writes: a damaged file (batch_in_epoch indexes the epoch's prompt order)
    if (ts.global_step < 0 || ts.epoch < 0 || ts.batch_in_epoch < 0 || ts.batch_in_epoch >= g->steps_per_epoch ||
        !isfinite(ts.kl_ctrl_value) || ts.kl_ctrl_value < 0)
        rlc_die("%s: corrupt trainer state (global_step %lld, epoch %lld, batch %lld of %lld per epoch, kl_coef %g)", tsp,
                (long long)ts.global_step, (long long)ts.epoch, (long long)ts.batch_in_epoch, (long long)g->steps_per_epoch,
                ts.kl_ctrl_value);
    char *actor = rlc_path_join(dir, "actor");
    checkpoint_load_weights(actor, &g->params);
    char *opt = rlc_path_join(actor, "optimizer.bin");
    if (g->W > 1) { free(g->resume_opt); g->resume_opt = rlc_strdup(opt); }   // loaded into the shards later
    else engine_load_state(&g->eng, opt);
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

