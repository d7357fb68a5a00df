// bpe_train.h: train a byte-level BPE tokenizer in the Qwen2/Qwen3 tokenizer.json format (NFC, the
// Qwen Split regex, ByteLevel, BPE with [a, b] merges, the Qwen3 chat special tokens), and write it as
// a checkpoint's tokenizer files: tokenizer.json, tokenizer_config.json (with the Qwen3 chat
// template) and generation_config.json. The result loads in rlc (rlc_tok_load) and in transformers.
#pragma once
#include <stdint.h>

typedef struct {
    int vocab_size;        // target size of the BPE vocabulary (256 byte tokens + merges), >= 256
    int min_frequency;     // a pair must occur at least this often to be merged (>= 1)
} bpe_train_opts;

// Train on n texts and write the three files into out_dir (created if needed). Deterministic: ties in
// pair counts are broken by the smaller (left id, right id). Returns the number of merges learned.
int bpe_train_write(const char *const *texts, int64_t n, const bpe_train_opts *o, const char *out_dir);
// The same with n_added more added tokens (not special) after the chat ones: e.g. Qwen3's <tool_call> markup, so
// that a tool call tokenizes as it does for Qwen3. An empty or repeated one (a chat token included) is an error.
int bpe_train_write_added(const char *const *texts, int64_t n, const bpe_train_opts *o, const char *const *added, int n_added,
                          const char *out_dir);
