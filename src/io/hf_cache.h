// hf_cache.h: a model path as transformers resolves it with HF_HUB_OFFLINE=1. A directory is used as it is;
// otherwise a hub id ("ORG/NAME", "NAME", optionally "@REVISION") names a snapshot in the local Hugging Face
// cache, the layout huggingface_hub writes:
//   <cache>/models--ORG--NAME/refs/<revision>      the commit hash the revision points at (default "main")
//   <cache>/models--ORG--NAME/snapshots/<commit>/  the files of that commit
// <cache> is $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub,
// else ~/.cache/huggingface/hub. A 40-hex revision names a snapshot directly. rlc never downloads: a model not in
// the cache is an error naming the path tried and the `huggingface-cli download` command to run.
#pragma once

// The cache directory the environment selects (malloc'd).
char *hf_cache_dir(void);

// 1 if s is a valid hub repo id ("NAME" or "ORG/NAME" of [A-Za-z0-9_.-], no "--" or "..", no leading or
// trailing '-' or '.', at most 96 characters), with an optional "@REVISION" suffix; 0 otherwise.
int hf_is_repo_id(const char *s);

// The directory to load the model `path` from (malloc'd): path itself if it is a directory (or does not look
// like a hub id, so the loader's own error names it), else the cached snapshot. Dies with one line naming the
// path tried and the download command when the id is not in the cache, or its ref or snapshot is damaged.
// what names the option or key in errors (e.g. "--model", "actor_rollout_ref.model.path").
char *hf_resolve_model(const char *path, const char *what);
