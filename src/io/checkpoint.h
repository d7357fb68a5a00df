// checkpoint.h: Hugging Face model directories <-> param_set (src/model/params.h).
// A directory holds config.json and model.safetensors (or shards + model.safetensors.index.json);
// tensors are stored under HF names in F32, BF16 or F16 and are converted to fp32 on load.
#pragma once
#include "io/safetensors.h"
#include "model/config.h"
#include "model/params.h"

// Load DIR/config.json into *cfg, build *pl from it and fill a new *ps (free with param_set_free and
// param_layout_free). Every expected tensor must exist with the config's shape and a float dtype, and
// no other tensor may be present, except lm_head.weight with tie_word_embeddings (then ignored).
// A non-finite weight (after conversion to fp32) is an error naming the file and tensor.
void checkpoint_load(const char *dir, model_config *cfg, param_layout *pl, param_set *ps);
// Load the weights of DIR into an existing set (its layout gives the names and shapes to expect).
void checkpoint_load_weights(const char *dir, param_set *ps);
// The same with allow_nonfinite = 1: non-finite weights load with a warning naming the first (the CLI's
// --allow-nonfinite, for forensics on a broken checkpoint).
void checkpoint_load_ex(const char *dir, model_config *cfg, param_layout *pl, param_set *ps, int allow_nonfinite);
void checkpoint_load_weights_ex(const char *dir, param_set *ps, int allow_nonfinite);
// Write DIR/model.safetensors (dtype ST_F32, ST_BF16 (round-to-nearest-even) or ST_F16) and
// DIR/config.json (torch_dtype set to match), each atomically. DIR is created if needed.
// With tied embeddings no lm_head.weight is written.
void checkpoint_save(const char *dir, const param_set *ps, st_dtype dtype);
// The same file layout, with each tensor's values produced by fill(ctx, t, start, n, dst) while
// writing (t->name is the HF name; see st_fill_fn), so no fp32 copy of the model is held (rlc init).
void checkpoint_save_generated(const char *dir, const param_layout *pl, st_dtype dtype, st_fill_fn fill, void *ctx);
// Copy tokenizer.json, tokenizer_config.json, generation_config.json, vocab.json, merges.txt and
// special_tokens_map.json from src_dir to dst_dir when present (atomically). Returns how many it copied.
int checkpoint_copy_tokenizer(const char *src_dir, const char *dst_dir);
