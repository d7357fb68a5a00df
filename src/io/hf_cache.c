// hf_cache.c: hub ids resolved in the local Hugging Face cache, as huggingface_hub's snapshot_download does with
// local_files_only (what transformers' from_pretrained falls back to under HF_HUB_OFFLINE=1).
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "io/hf_cache.h"

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

// huggingface_hub expands "~" in the environment's paths (os.path.expanduser).
static char *expand_home(const char *p) {
    if (p[0] != '~' || (p[1] != 0 && p[1] != '/')) return rlc_strdup(p);
    const char *home = getenv("HOME");
    if (!home || !*home) rlc_die("hf cache: '%s' starts with ~ but HOME is not set", p);
    return rlc_path_join(home, p[1] ? p + 2 : "");
}

char *hf_cache_dir(void) {
    const char *v;
    if ((v = getenv("HF_HUB_CACHE")) && *v) return expand_home(v);
    if ((v = getenv("HUGGINGFACE_HUB_CACHE")) && *v) return expand_home(v);
    char *home;
    if ((v = getenv("HF_HOME")) && *v) {
        home = expand_home(v);
    } else {
        char *xdg = (v = getenv("XDG_CACHE_HOME")) && *v ? expand_home(v) : expand_home("~/.cache");
        home = rlc_path_join(xdg, "huggingface");
        free(xdg);
    }
    char *hub = rlc_path_join(home, "hub");
    free(home);
    return hub;
}

static int name_char(char ch) { return isalnum((unsigned char)ch) || ch == '_' || ch == '-' || ch == '.'; }

// One part of a repo id: [A-Za-z0-9_.-]+, not starting or ending with '-' or '.' (the regex's \b).
static int valid_part(const char *s, size_t n) {
    if (n == 0 || s[0] == '-' || s[0] == '.' || s[n - 1] == '-' || s[n - 1] == '.') return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_char(s[i])) return 0;
    return 1;
}

// huggingface_hub's validate_repo_id over ASCII, on the n bytes of s.
static int valid_repo_id(const char *s, size_t n) {
    if (n == 0 || n > 96) return 0;
    const char *slash = memchr(s, '/', n);
    if (slash) {
        size_t a = (size_t)(slash - s);
        if (!valid_part(s, a) || !valid_part(slash + 1, n - a - 1)) return 0;
    } else if (!valid_part(s, n)) {
        return 0;
    }
    for (size_t i = 0; i + 1 < n; i++)
        if ((s[i] == '-' && s[i + 1] == '-') || (s[i] == '.' && s[i + 1] == '.')) return 0;
    if (n >= 4 && !memcmp(s + n - 4, ".git", 4)) return 0;
    return 1;
}

// A revision is a branch, tag or commit: path components of [A-Za-z0-9_.-] (refs/pr/1), none "." or "..".
static int valid_revision(const char *r) {
    if (!*r || *r == '/') return 0;
    for (const char *p = r; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) return 0;
        for (size_t i = 0; i < n; i++)
            if (!name_char(p[i])) return 0;
        if (!e) break;
        p = e + 1;
    }
    return 1;
}

int hf_is_repo_id(const char *s) {
    const char *at = strchr(s, '@');
    if (!at) return valid_repo_id(s, strlen(s));
    return valid_repo_id(s, (size_t)(at - s)) && valid_revision(at + 1);
}

static int is_commit_hash(const char *r) {
    size_t n = strlen(r);
    if (n != 40) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)r[i]) || isupper((unsigned char)r[i])) return 0;
    return 1;
}

// The suggestion every "not in the cache" error ends with.
static void download_hint(rlc_strbuf *b, const char *id, const char *rev) {
    rlc_sb_printf(b, "rlc does not download; fetch it with `huggingface-cli download %s", id);
    if (rev) rlc_sb_printf(b, " --revision %s", rev);
    rlc_sb_printf(b, "` (or give a checkpoint directory)");
}

RLC_NORETURN static void not_cached(const char *what, const char *path, const char *id, const char *rev,
                                    const char *tried, const char *why) {
    rlc_strbuf b = {0};
    rlc_sb_printf(&b, "%s: '%s' is not a directory and not in the Hugging Face cache: %s %s; ", what, path, tried, why);
    download_hint(&b, id, rev);
    rlc_die("%s", b.s);
}

char *hf_resolve_model(const char *path, const char *what) {
    if (!path || !*path || is_dir(path) || !hf_is_repo_id(path)) return rlc_strdup(path ? path : "");
    char *id = rlc_strdup(path);
    char *rev = strchr(id, '@');
    if (rev) *rev++ = 0;
    const char *revision = rev ? rev : "main";
    char *cache = hf_cache_dir();
    // models--ORG--NAME
    rlc_strbuf folder = {0};
    rlc_sb_printf(&folder, "models--");
    for (const char *p = id; *p; p++) {
        if (*p == '/') rlc_sb_printf(&folder, "--");
        else rlc_sb_append(&folder, p, 1);
    }
    char *repo = rlc_path_join(cache, folder.s);
    rlc_sb_free(&folder);
    if (!is_dir(repo)) not_cached(what, path, id, rev, repo, "does not exist");

    // refs/<revision> holds the commit; a commit hash may also name its snapshot directly.
    char *refs = rlc_path_join(repo, "refs");
    char *ref_path = rlc_path_join(refs, revision);
    free(refs);
    char *commit = NULL;
    if (rlc_file_exists(ref_path) && !is_dir(ref_path)) {
        size_t len;
        commit = rlc_read_file(ref_path, &len);
        if (strlen(commit) != len) rlc_die("%s: expected a commit hash, got a NUL byte", ref_path);
        while (len > 0 && isspace((unsigned char)commit[len - 1])) commit[--len] = 0;
        if (len == 0 || strchr(commit, '/') || !valid_revision(commit))
            rlc_die("%s: expected a commit hash (the snapshot name), got '%s'", ref_path, commit);
    } else if (is_commit_hash(revision)) {
        commit = rlc_strdup(revision);
    } else {
        not_cached(what, path, id, rev, ref_path, "does not exist");
    }
    char *snaps = rlc_path_join(repo, "snapshots");
    char *snap = rlc_path_join(snaps, commit);
    free(snaps);
    if (!is_dir(snap)) {
        rlc_strbuf why = {0};
        if (is_commit_hash(revision) && !rlc_file_exists(ref_path)) rlc_sb_printf(&why, "does not exist");
        else rlc_sb_printf(&why, "does not exist (%s points at it)", ref_path);
        not_cached(what, path, id, rev, snap, why.s);
    }
    // transformers would stop at the first file it needs; naming the snapshot is more useful than "no config.json".
    char *cfg = rlc_path_join(snap, "config.json");
    if (!rlc_file_exists(cfg)) {
        rlc_strbuf b = {0};
        rlc_sb_printf(&b, "%s: '%s' resolves to the cached snapshot %s, which has no config.json (an incomplete "
                          "download?); ", what, path, snap);
        download_hint(&b, id, rev);
        rlc_die("%s", b.s);
    }
    free(cfg);
    free(commit);
    free(ref_path);
    free(repo);
    free(cache);
    free(id);
    return snap;
}
