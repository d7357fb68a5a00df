// test_hf_cache: hub ids resolved in a fake Hugging Face cache tree (refs and snapshots as huggingface_hub
// writes them): the cache directory each environment selects, repo-id validation, refs/main with several
// snapshots, explicit revisions, a missing model and damaged trees (one error line naming the path tried and the
// download command), and `rlc logprob --model ORG/NAME` loading a checkpoint from the cache.
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/common.h"
#include "io/hf_cache.h"
#include "io_testutil.h"
#include "testlib.h"
#include "tiny_model.h"

static const char *HASH_A = "0123456789abcdef0123456789abcdef01234567";
static const char *HASH_B = "fedcba9876543210fedcba9876543210fedcba98";

static void put(const char *dir, const char *name, const char *text) {
    rlc_mkdirs(dir);
    char *p = rlc_path_join(dir, name);
    if (rlc_write_file_atomic(p, text, strlen(text)) != 0) { TL_CHECK(0, "cannot write %s", p); }
    free(p);
}

static char *fmt(const char *f, const char *a, const char *b) {
    char buf[4096];
    snprintf(buf, sizeof buf, f, a, b);
    return rlc_strdup(buf);
}

static void set_env(const char *hub, const char *hf_home, const char *xdg, const char *home) {
    unsetenv("HUGGINGFACE_HUB_CACHE");
    if (hub) setenv("HF_HUB_CACHE", hub, 1); else unsetenv("HF_HUB_CACHE");
    if (hf_home) setenv("HF_HOME", hf_home, 1); else unsetenv("HF_HOME");
    if (xdg) setenv("XDG_CACHE_HOME", xdg, 1); else unsetenv("XDG_CACHE_HOME");
    if (home) setenv("HOME", home, 1); else unsetenv("HOME");
}

static void check_dir(const char *what, const char *want) {
    char *got = hf_cache_dir();
    TL_CHECK(!strcmp(got, want), "%s: cache dir '%s', want '%s'", what, got, want);
    free(got);
}

static void test_cache_dir(void) {
    set_env("/c/hub", "/h", "/x", "/home/u");
    check_dir("HF_HUB_CACHE first", "/c/hub");
    set_env(NULL, "/h", "/x", "/home/u");
    setenv("HUGGINGFACE_HUB_CACHE", "/legacy", 1);
    check_dir("HUGGINGFACE_HUB_CACHE", "/legacy");
    set_env(NULL, "/h", "/x", "/home/u");
    check_dir("HF_HOME/hub", "/h/hub");
    set_env(NULL, NULL, "/x", "/home/u");
    check_dir("XDG_CACHE_HOME/huggingface/hub", "/x/huggingface/hub");
    set_env(NULL, NULL, NULL, "/home/u");
    check_dir("~/.cache/huggingface/hub", "/home/u/.cache/huggingface/hub");
    set_env(NULL, "~/hf", NULL, "/home/u");
    check_dir("HF_HOME with ~", "/home/u/hf/hub");
    set_env("", "", "", "/home/u");   // empty variables count as unset
    check_dir("empty variables", "/home/u/.cache/huggingface/hub");
}

static void test_repo_ids(void) {
    static const struct { const char *s; int ok; } cases[] = {
        {"Qwen/Qwen3-0.6B", 1}, {"gpt2", 1}, {"org_1/name.v2", 1}, {"Qwen/Qwen3-0.6B@main", 1},
        {"Qwen/Qwen3-0.6B@refs/pr/1", 1}, {"a/b@0123456789abcdef0123456789abcdef01234567", 1},
        {"", 0}, {"/abs/path", 0}, {"./rel", 0}, {"a/b/c", 0}, {"runs/demo/sft", 0}, {"a--b/c", 0}, {"a/b..c", 0},
        {"-a/b", 0}, {"a/b-", 0}, {".hidden", 0}, {"a/b.git", 0}, {"a b/c", 0}, {"a/b@", 0}, {"a/b@../x", 0},
        {"a/b@x//y", 0}, {"~/model", 0}, {"org/", 0}, {"/name", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        TL_CHECK(hf_is_repo_id(cases[i].s) == cases[i].ok, "hf_is_repo_id('%s') = %d, want %d", cases[i].s,
                 hf_is_repo_id(cases[i].s), cases[i].ok);
    char longid[128];
    memset(longid, 'a', 97);
    longid[97] = 0;
    TL_CHECK(!hf_is_repo_id(longid), "a 97-character id is not a repo id");
    longid[96] = 0;
    TL_CHECK(hf_is_repo_id(longid), "a 96-character id is a repo id");
}

typedef struct { const char *path; } resolve_arg;
static void resolve_child(void *p) {
    resolve_arg *a = p;
    char *r = hf_resolve_model(a->path, "--model");
    printf("resolved to %s\n", r);
    free(r);
}

static void expect_resolves(const char *id, const char *want) {
    char *got = hf_resolve_model(id, "--model");
    TL_CHECK(!strcmp(got, want), "'%s' resolves to '%s', want '%s'", id, got, want);
    free(got);
}

static void test_tree(const char *hub) {
    set_env(hub, NULL, NULL, "/nonexistent-home");
    // Org/Model: refs/main -> A; snapshots A and B (an older revision); refs/v1 -> B (with a trailing newline)
    char *repo = fmt("%s/%s", hub, "models--Org--Model");
    char *snap_a = fmt("%s/snapshots/%s", repo, HASH_A), *snap_b = fmt("%s/snapshots/%s", repo, HASH_B);
    char *refs = rlc_path_join(repo, "refs");
    put(refs, "main", HASH_A);
    put(refs, "v1", HASH_B);
    char buf[256];
    snprintf(buf, sizeof buf, "%s\n", HASH_B);
    put(refs, "v1", buf);
    put(snap_a, "config.json", "{}");
    put(snap_b, "config.json", "{}");
    expect_resolves("Org/Model", snap_a);                      // refs/main picks one of several snapshots
    expect_resolves("Org/Model@main", snap_a);
    expect_resolves("Org/Model@v1", snap_b);                   // a tag, its ref ending in a newline
    char *at_b = fmt("Org/Model@%s", HASH_B, "");
    expect_resolves(at_b, snap_b);                              // a commit hash names its snapshot directly
    // revision refs/pr/1 (a pull request): huggingface_hub stores its ref at refs/<revision> = refs/refs/pr/1
    char *pr = rlc_path_join(refs, "refs/pr");
    put(pr, "1", HASH_B);
    expect_resolves("Org/Model@refs/pr/1", snap_b);
    // a model without an organisation: models--gpt2
    char *gpt2 = fmt("%s/models--gpt2/snapshots/%s", hub, HASH_A);
    put(gpt2, "config.json", "{}");
    char *gpt2_refs = fmt("%s/models--gpt2/refs", hub, "");
    put(gpt2_refs, "main", HASH_A);
    expect_resolves("gpt2", gpt2);
    // a directory is used as it is, even when it looks like a hub id; other paths pass through unchanged
    char *cwd_dir = fmt("%s/Org", hub, "");
    rlc_mkdirs(cwd_dir);
    expect_resolves(hub, hub);
    expect_resolves("/no/such/dir/x", "/no/such/dir/x");
    expect_resolves("runs/demo/sft", "runs/demo/sft");

    // errors: one line naming what was tried and the download command
    resolve_arg a = {"Org/Missing"};
    char *missing = fmt("%s/%s", hub, "models--Org--Missing");
    io_expect_die("missing model", resolve_child, &a, "--model", "'Org/Missing'", missing,
                  "huggingface-cli download Org/Missing`", "does not download", (const char *)NULL);
    resolve_arg a2 = {"Org/Model@v2"};
    char *ref_v2 = fmt("%s/refs/%s", repo, "v2");
    io_expect_die("missing revision", resolve_child, &a2, ref_v2, "huggingface-cli download Org/Model --revision v2",
                  (const char *)NULL);
    // a commit hash with no snapshot
    resolve_arg a3 = {"Org/Model@1111111111111111111111111111111111111111"};
    io_expect_die("missing commit", resolve_child, &a3, "snapshots/1111111111111111111111111111111111111111",
                  "does not exist", (const char *)NULL);
    // refs/main missing although snapshots exist: huggingface_hub does not guess a snapshot either
    char *repo2 = fmt("%s/%s", hub, "models--Org--NoRef");
    char *snap2 = fmt("%s/snapshots/%s", repo2, HASH_A);
    put(snap2, "config.json", "{}");
    resolve_arg a4 = {"Org/NoRef"};
    char *ref2 = fmt("%s/refs/%s", repo2, "main");
    io_expect_die("no refs/main", resolve_child, &a4, ref2, "huggingface-cli download Org/NoRef", (const char *)NULL);
    // refs/main pointing at a snapshot that is gone
    char *repo3 = fmt("%s/%s", hub, "models--Org--Stale");
    char *refs3 = rlc_path_join(repo3, "refs");
    put(refs3, "main", HASH_B);
    char *snap3 = fmt("%s/snapshots/%s", repo3, HASH_A);
    put(snap3, "config.json", "{}");
    resolve_arg a5 = {"Org/Stale"};
    io_expect_die("stale ref", resolve_child, &a5, HASH_B, "refs/main points at it", "huggingface-cli download Org/Stale",
                  (const char *)NULL);
    // a ref that tries to leave the snapshots directory
    char *repo4 = fmt("%s/%s", hub, "models--Org--Evil");
    char *refs4 = rlc_path_join(repo4, "refs");
    put(refs4, "main", "../../../etc");
    resolve_arg a6 = {"Org/Evil"};
    io_expect_die("bad ref", resolve_child, &a6, "refs/main", "expected a commit hash", (const char *)NULL);
    put(refs4, "main", "");
    io_expect_die("empty ref", resolve_child, &a6, "refs/main", "expected a commit hash", (const char *)NULL);
    // a snapshot without config.json (an interrupted download)
    char *repo5 = fmt("%s/%s", hub, "models--Org--Partial");
    char *refs5 = rlc_path_join(repo5, "refs");
    put(refs5, "main", HASH_A);
    char *snap5 = fmt("%s/snapshots/%s", repo5, HASH_A);
    put(snap5, "model.safetensors", "x");
    resolve_arg a7 = {"Org/Partial"};
    io_expect_die("no config.json", resolve_child, &a7, snap5, "no config.json", "huggingface-cli download Org/Partial",
                  (const char *)NULL);
    free(repo); free(snap_a); free(snap_b); free(refs); free(at_b); free(pr); free(gpt2); free(gpt2_refs); free(cwd_dir);
    free(missing); free(ref_v2); free(repo2); free(snap2); free(ref2); free(repo3); free(refs3); free(snap3);
    free(repo4); free(refs4); free(repo5); free(refs5); free(snap5);
}

// The binary loads a checkpoint through the cache: `rlc init` writes it into a snapshot, `rlc logprob --model
// Org/Tiny` scores a sequence from it and equals the same run on the directory.
static void test_cli(const char *hub, const char *tmp) {
    const char *rlc = tl_rlc_bin();
    if (!rlc_file_exists(rlc)) { tl_skip("%s not built", rlc); return; }
    char js[2048];
    snprintf(js, sizeof js, TINY_CFG_JSON, "true");
    put(tmp, "tiny.json", js);
    put(tmp, "seq.jsonl", "{\"input_ids\": [3, 5, 7, 11, 13, 17]}\n");
    char *snap = fmt("%s/models--Org--Tiny/snapshots/%s", hub, HASH_A);
    char *refs = fmt("%s/models--Org--Tiny/refs", hub, "");
    put(refs, "main", HASH_A);
    int rc = tl_system("'%s' init --config '%s/tiny.json' --out '%s' --seed 3 >/dev/null", rlc, tmp, snap);
    TL_CHECK(rc == 0, "rlc init into the snapshot: rc %d", rc);
    rc = tl_system("HF_HUB_CACHE='%s' '%s' logprob --model Org/Tiny --data '%s/seq.jsonl' --out '%s/a.jsonl' --threads 1 "
                   ">/dev/null", hub, rlc, tmp, tmp);
    TL_CHECK(rc == 0, "rlc logprob --model Org/Tiny: rc %d", rc);
    rc = tl_system("'%s' logprob --model '%s' --data '%s/seq.jsonl' --out '%s/b.jsonl' --threads 1 >/dev/null", rlc, snap,
                   tmp, tmp);
    TL_CHECK(rc == 0, "rlc logprob --model SNAPSHOT: rc %d", rc);
    rc = tl_system("cmp -s '%s/a.jsonl' '%s/b.jsonl'", tmp, tmp);
    TL_CHECK(rc == 0, "log-probs through the cache equal those from the snapshot directory");
    rc = tl_system("HF_HUB_CACHE='%s' '%s' logprob --model Org/Absent --data '%s/seq.jsonl' --out '%s/c.jsonl' 2>'%s/err' "
                   ">/dev/null; test $? = 1 && grep -q 'huggingface-cli download Org/Absent' '%s/err' && "
                   "test $(wc -l < '%s/err') = 1", hub, rlc, tmp, tmp, tmp, tmp, tmp);
    TL_CHECK(rc == 0, "rlc logprob --model Org/Absent: exit 1 with one line naming the download command");
    free(snap);
    free(refs);
}

int main(void) {
    test_cache_dir();
    test_repo_ids();
    char *tmp = tl_tmpdir("hf_cache");
    char *hub = rlc_path_join(tmp, "hub");
    test_tree(hub);
    test_cli(hub, tmp);
    tl_system("rm -rf '%s'", tmp);
    free(hub);
    free(tmp);
    return tl_summary();
}
