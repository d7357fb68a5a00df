// tokenizer.h: Hugging Face tokenizer.json (model BPE) in C, id-for-id identical to the HF Rust
// `tokenizers` library, plus the chat template and the special-token configuration of a checkpoint.
// Spec: shared/spec/qwen3.md §4-6, shared/spec/models.md §5 (SentencePiece-style files, special ids).
//
// Supported tokenizer.json features (anything else is a one-line error naming the feature):
//   normalizer     null | NFC | NFD | NFKC | NFKD | Replace (String or Regex) | Prepend | Strip | Sequence
//   pre_tokenizer  null | Split (Regex or String pattern; behaviors Removed, Isolated, MergedWithPrevious,
//                  MergedWithNext, Contiguous; invert) | ByteLevel (add_prefix_space, use_regex) |
//                  Metaspace (replacement, prepend_scheme first/always/never, split) | Sequence;
//                  ByteLevel must be the last step.
//   model          BPE: vocab, merges as "a b" strings or [a, b] pairs, ignore_merges, unk_token/fuse_unk,
//                  byte_fallback (<0xNN> tokens). Not supported: dropout > 0, continuing_subword_prefix,
//                  end_of_word_suffix.
//   post_processor null | ByteLevel | TemplateProcessing (single sequence) | Sequence of those.
//   decoder        null | ByteLevel | Replace (String) | ByteFallback | Fuse | Strip | Metaspace | Sequence
//                  (ByteLevel last; ByteFallback before any Fuse).
//   added_tokens   matched before normalization (normalized=false) or after it (normalized=true),
//                  leftmost-longest, with single_word, lstrip, rstrip; special ones can be skipped on decode.
//
// Regex semantics: HF compiles Split patterns with Oniguruma. rlc compiles them with PCRE2 (UTF + UCP,
// JIT) after rewriting the Oniguruma meanings that differ (see tok_pretok.c, rlc_tok_rewrite_regex):
//   \s -> Unicode White_Space (U+0009-000D, 0020, 0085, 00A0, 1680, 2000-200A, 2028, 2029, 202F, 205F,
//         3000; not U+FEFF/180E/200B), \S its complement, \d -> \p{Nd}, \w -> [\p{L}\p{M}\p{Nd}\p{Pc}].
//   (?i:...) keeps PCRE2's Unicode caseless matching, which uses Unicode simple case folding
//   (so `s` also matches U+017F, `k` U+212A), the same as Oniguruma.
//
// Thread safety: a tokenizer owns a word cache and scratch buffers, so rlc_tok_encode must not be
// called on one tokenizer from two threads at once. Decoding (rlc_tok_decode, streams) is read-only.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/strbuf.h"

typedef struct rlc_tokenizer rlc_tokenizer;

// How chat messages are rendered (see the chat template section below).
typedef enum {
    RLC_CHAT_AUTO = 0,   // the checkpoint's template (chat_template.jinja, else tokenizer_config.json chat_template)
    RLC_CHAT_QWEN3,      // the Qwen3 template whatever the config says
    RLC_CHAT_PLAIN,      // documented plain fallback: message contents joined by "\n"; no role markers,
                         // and add_generation_prompt adds nothing. For base models without a template.
} rlc_chat_mode;
// "auto" | "qwen3" | "plain" -> mode; dies naming `what` for anything else.
rlc_chat_mode rlc_chat_mode_parse(const char *s, const char *what);

typedef struct {
    rlc_chat_mode chat_mode;
    const char *chat_template_file;   // a Jinja file that replaces the checkpoint's template (NULL: none)
    int64_t cache_capacity;   // word-cache entries (0: default 65536; -1: no cache)
    int bpe_ref;              // 1: use the O(n^2) reference merge loop (tests), no cache
} rlc_tok_opts;

// Load a tokenizer. `path` is a checkpoint directory (tokenizer.json, plus tokenizer_config.json and
// generation_config.json when present) or a path to a tokenizer.json file. opts may be NULL.
// Dies with one line naming the file and the problem on bad input.
rlc_tokenizer *rlc_tok_load(const char *path, const rlc_tok_opts *opts);
// Build from tokenizer.json text (`name` is used in error messages), no config files.
rlc_tokenizer *rlc_tok_from_json(const char *json, size_t len, const char *name, const rlc_tok_opts *opts);
// Apply tokenizer_config.json / generation_config.json text (either may be NULL) to a loaded tokenizer.
void rlc_tok_apply_config(rlc_tokenizer *t, const char *tok_config_json, const char *tok_config_name,
                          const char *gen_config_json, const char *gen_config_name);
void rlc_tok_free(rlc_tokenizer *t);

// Encode UTF-8 text (len bytes; invalid UTF-8 is first replaced by U+FFFD per maximal subpart) and
// append the ids to out. This is HF `encode(text, add_special_tokens=False)`; with add_special=1
// the post-processor's template (e.g. a BOS) is applied too.
void rlc_tok_encode(rlc_tokenizer *t, const char *text, size_t len, rlc_ivec *out);
void rlc_tok_encode_ex(rlc_tokenizer *t, const char *text, size_t len, int add_special, rlc_ivec *out);

// The two ways a prompt becomes ids, as transformers does them (spec models.md §5.4):
//   - a chat prompt already rendered by the checkpoint's template: rlc_tok_encode_chat, which is
//     apply_chat_template(tokenize=True), i.e. encode(rendered, add_special_tokens=False). Templates
//     that need a BOS (Llama 3.x, Gemma 3, Mistral) write it as text (`{{ bos_token }}`), so adding
//     the post-processor's BOS as well would give two ([128000, 128000, ...] for Llama 3.x).
//   - plain text (a base model's prompt, an SFT document): rlc_tok_encode_text, which is
//     tokenizer(text) with add_special_tokens=True: the post-processor's template (e.g. Gemma's <bos>,
//     Llama 3.1's <|begin_of_text|>, Mistral's <s>; Qwen adds nothing).
// Both append to out.
void rlc_tok_encode_chat(rlc_tokenizer *t, const char *rendered, size_t len, rlc_ivec *out);
void rlc_tok_encode_text(rlc_tokenizer *t, const char *text, size_t len, rlc_ivec *out);
// The ids the post-processor puts before / after the text (add_special_tokens=True). Returns the
// count before; *pre / *post may be NULL.
int rlc_tok_special_template(const rlc_tokenizer *t, const int32_t **pre, int *n_pre, const int32_t **post, int *n_post);

// Decode ids to UTF-8 as HF `decode(ids, skip_special_tokens)`: ids without a token are dropped and
// invalid UTF-8 becomes U+FFFD (Rust from_utf8_lossy). Appends to out.
void rlc_tok_decode(const rlc_tokenizer *t, const int32_t *ids, int64_t n, int skip_special, rlc_strbuf *out);
// Convenience: malloc'd NUL-terminated string.
char *rlc_tok_decode_str(const rlc_tokenizer *t, const int32_t *ids, int64_t n, int skip_special);

// Streaming decode for generation: feed ids one at a time; each call appends the text that is now
// final. Text a later token could still change is held back: an incomplete UTF-8 sequence, a run of
// byte-fallback <0xNN> tokens (until a non-byte token closes it), a tail a Strip/Replace after Fuse or
// clean_up_tokenization_spaces may still rewrite. The concatenation of all pushes and the final
// finish equals rlc_tok_decode of the same ids (which is implemented as exactly that).
// finish releases the stream's buffers and resets it for reuse.
typedef struct {
    int skip_special;
    const struct rlc_tokenizer *t;   // set by push
    int64_t n_tokens;                // tokens that reached the end of the chain (no-decoder " " join)
    int64_t step_tokens[8];          // tokens seen by each decoder step (Fuse, Metaspace's first token)
    int strip_left[8];               // Strip after Fuse: content chars stripped at the start (-1: done)
    rlc_strbuf bytes;                // ByteFallback: the open run of <0xNN> bytes
    rlc_strbuf hold[8];              // Replace / Strip after Fuse: the held-back tail
    unsigned char pend[8];           // bytes of an incomplete UTF-8 sequence
    int npend;
    rlc_strbuf clean;                // clean_up_tokenization_spaces: the held-back tail
} rlc_tok_stream;
void rlc_tok_stream_init(rlc_tok_stream *s, int skip_special);
// Returns the number of bytes appended.
size_t rlc_tok_stream_push(rlc_tok_stream *s, const rlc_tokenizer *t, int32_t id, rlc_strbuf *out);
size_t rlc_tok_stream_finish(rlc_tok_stream *s, rlc_strbuf *out);

// Vocabulary.
int64_t rlc_tok_vocab_size(const rlc_tokenizer *t);     // max id + 1 over vocab and added tokens
int32_t rlc_tok_token_to_id(const rlc_tokenizer *t, const char *token);   // -1 if absent
const char *rlc_tok_id_to_token(const rlc_tokenizer *t, int32_t id);      // NULL if no token
int rlc_tok_is_special(const rlc_tokenizer *t, int32_t id);               // added token with special=true

// Special ids from the configs (-1 when unset), as transformers (v4) reads them:
//   bos/eos/pad   tokenizer_config.json bos_token / eos_token / pad_token (a string or {"content": ...});
//                 generation_config.json bos_token_id / eos_token_id (first of a list) / pad_token_id fill
//                 what the tokenizer config leaves unset.
//   pad           with neither, pad falls back as generate() does: generation_config's first eos id, else the
//                 tokenizer's eos (pad_fallback = 1 then). Llama 3.x has no pad and gets 128001.
//   stop_ids      the tokenizer's eos plus every generation_config.json eos_token_id (a number or a list:
//                 Llama 3.1/3.2 [128001, 128008, 128009], Qwen2.5 [151645, 151643], Gemma 3 [1, 106]),
//                 deduplicated: generation stops at any of them.
//   BOS           added by the post-processor (rlc_tok_encode_text; see rlc_tok_special_template), never by
//                 rlc_tok_encode_chat. For tokenizer_class LlamaTokenizer(Fast) / GemmaTokenizer(Fast) /
//                 CodeLlamaTokenizer(Fast), transformers rebuilds the post-processor from the config's
//                 add_bos_token (default true) and add_eos_token (default false), and so does rlc.
typedef struct {
    int32_t bos_id, eos_id, pad_id;
    int32_t stop_ids[16];             // eos_id plus generation_config.json eos_token_id(s), deduplicated
    int n_stop;
    int add_bos;                      // tokenizer_config.json add_bos_token
    int clean_up_spaces;              // tokenizer_config.json clean_up_tokenization_spaces
    int pad_fallback;                 // pad_id is an eos id (no pad configured)
    int bos_added;                    // the post-processor puts bos_id first (encode_text adds a BOS)
} rlc_tok_special;
const rlc_tok_special *rlc_tok_specials(const rlc_tokenizer *t);
int rlc_tok_is_stop(const rlc_tokenizer *t, int32_t id);

// ---- chat template ----
// Chats render as transformers' apply_chat_template(messages, tools=, add_generation_prompt=, tokenize=False,
// **kwargs) does: the template (a Jinja file, see rlc_tok_opts and src/template/template.h) gets messages,
// tools (None when not given), documents=None, add_generation_prompt, the special tokens of
// tokenizer_config.json (bos_token, eos_token, unk_token, pad_token, ...) and the kwargs (enable_thinking,
// date_string, ...). Encode the result with rlc_tok_encode (no special tokens: a template writes its own BOS).
// docs/chat_template.md lists the supported Jinja subset.

// --chat-template VALUE: auto | qwen3 | plain, or a path to a Jinja template file (checked to exist).
void rlc_tok_opts_chat_template(rlc_tok_opts *o, const char *value, const char *what);
// Replace the template after loading: source text (origin names it in errors), or a file (dies on a
// template that does not parse, with one line naming the file and line).
void rlc_tok_set_chat_template(rlc_tokenizer *t, const char *src, size_t n, const char *origin);
void rlc_tok_load_chat_template(rlc_tokenizer *t, const char *path);
// The clock strftime_now reads in this tokenizer's templates (NULL: the system clock); see rlc_tmpl_set_clock.
void rlc_tok_set_chat_clock(rlc_tokenizer *t, int64_t (*now)(void *arg), void *arg);

struct cJSON;
// Render. messages: a JSON list of {"role": ..., "content": ..., "tool_calls": ..., "reasoning_content": ...};
// tools: a JSON list of tool schemas or NULL; kwargs: a JSON object of template kwargs or NULL. Appends to
// out and returns 0; on an error (bad messages, no template, a template error, raise_exception) returns -1
// with one line in err (the template's name, line and message).
int rlc_tok_chat_render_json(const rlc_tokenizer *t, const struct cJSON *messages, const struct cJSON *tools,
                             int add_generation_prompt, const struct cJSON *kwargs, rlc_strbuf *out, rlc_strbuf *err);
// One input line: a messages list, or {"messages": [...], "tools": [...], "add_generation_prompt": bool,
// "chat_template_kwargs": {...}}; the line's values replace add_generation_prompt and extend kwargs.
int rlc_tok_chat_render_line(const rlc_tokenizer *t, const struct cJSON *line, int add_generation_prompt,
                             const struct cJSON *kwargs, rlc_strbuf *out, rlc_strbuf *err);
// Shorthands for the data paths (datasets, SFT): enable_thinking -1 = not passed, 0 = false, 1 = true; and
// date_string = RLC_CHAT_DATE_STRING always, so that a dataset renders the same on every day (transformers
// passes no date, and Llama 3.x's templates then print today's). It is the date those templates fall back to.
#define RLC_CHAT_DATE_STRING "26 Jul 2024"
int rlc_tok_chat_render_cjson(const rlc_tokenizer *t, const struct cJSON *messages, int add_generation_prompt,
                              int enable_thinking, rlc_strbuf *out, rlc_strbuf *err);
typedef struct {
    const char *role;                // "system" | "user" | "assistant" | "tool"
    const char *content;
    const char *reasoning_content;   // NULL: not given
} rlc_chat_msg;
// Dies with one line on an error.
void rlc_tok_chat_render(const rlc_tokenizer *t, const rlc_chat_msg *msgs, int n, int add_generation_prompt,
                         int enable_thinking, rlc_strbuf *out);
// "qwen3" (the Qwen3 template, by sha256), "template" (another Jinja template), "plain", or NULL (none).
const char *rlc_tok_chat_kind(const rlc_tokenizer *t);
