// tok_internal.h: the tokenizer's internal structures, shared by the src/tokenizer/*.c files only.
#pragma once
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "core/strbuf.h"
#include "tokenizer/tokenizer.h"

// ---- string -> int32 hash map over strings stored in an arena ----
typedef struct {
    uint64_t hash;        // tok_hash of the key
    uint32_t key;         // arena offset + 1 of the key bytes (0 = empty); a uint32 length precedes them
    int32_t val;
} tok_strslot;
typedef struct {
    char *arena;          // (arena_n) bytes: per key a uint32 length, the bytes, a NUL
    size_t arena_n, arena_cap;
    tok_strslot *slot;    // (cap)
    uint64_t cap, count;  // cap is a power of two; grown at 3/4 load
    int hash_collision;   // two different stored keys share a 64-bit hash (tok_strmap_get_known then compares bytes)
} tok_strmap;
void tok_strmap_init(tok_strmap *m, uint64_t expected);
void tok_strmap_free(tok_strmap *m);
// Insert or overwrite. Returns the arena offset of the stored key.
uint32_t tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t val);
int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len);   // -1 if absent
// Lookup for keys that are expected to be present (loading merges of a valid file): when no two stored
// keys share a 64-bit hash, a hash match identifies the key without reading it back. A key that is
// absent is still reported absent unless its hash collides with a stored key's (probability 2^-64).
int32_t tok_strmap_get_known(const tok_strmap *m, const char *key, size_t len);
uint64_t tok_hash(const void *p, size_t n);
// Hash-only lookup helpers (for batched, prefetched lookups while loading merges).
static inline const tok_strslot *tok_strmap_slot0(const tok_strmap *m, uint64_t hv) { return &m->slot[hv & (m->cap - 1)]; }
int32_t tok_strmap_get_known_h(const tok_strmap *m, const char *key, size_t len, uint64_t hv);

// ---- normalizer steps (applied in order; tok_normalize.c) ----
enum { TOK_NORM_NFC = 1, TOK_NORM_NFD, TOK_NORM_NFKC, TOK_NORM_NFKD, TOK_NORM_REPLACE, TOK_NORM_PREPEND, TOK_NORM_STRIP };
typedef struct {
    int kind;
    char *pat; size_t pat_len;       // Replace: the String pattern (NULL when `re` is set)
    pcre2_code *re;                  // Replace: a Regex pattern
    pcre2_match_data *md;
    char *content; size_t content_len;   // Replace: the replacement; Prepend: the prefix
    int left, right;                 // Strip: strip_left, strip_right
} tok_norm_step;

// ---- pre-tokenizer steps ----
enum { TOK_SPLIT_REMOVED, TOK_SPLIT_ISOLATED, TOK_SPLIT_MERGED_PREV, TOK_SPLIT_MERGED_NEXT, TOK_SPLIT_CONTIGUOUS };
enum { TOK_PRE_SPLIT = 0, TOK_PRE_BYTELEVEL = 1, TOK_PRE_METASPACE = 2 };
enum { TOK_PREPEND_NEVER = 0, TOK_PREPEND_FIRST, TOK_PREPEND_ALWAYS };
typedef struct {
    int kind;                  // TOK_PRE_*
    // Split (also used for ByteLevel use_regex with the GPT-2 pattern)
    pcre2_code *re;
    pcre2_match_data *md;
    int behavior, invert;
    // ByteLevel
    int add_prefix_space, use_regex;
    // Metaspace: ' ' -> repl (one char, UTF-8), prepend_scheme, split on repl (MergedWithNext, via re)
    char repl[5]; int repl_len;
    int prepend, split;
    // for errors: the tokenizer file and the pattern as written (shortened in the middle when long)
    char src[160], pat[160];
} tok_pretok_step;
// Token ids stay below 2^30 (config.json's vocab_size bound): max id + 1 fits an int32 with room to spare.
#define TOK_MAX_ID (1 << 30)
// Backtracking limits compiled into every regex (PCRE2 (*LIMIT_MATCH) / (*LIMIT_DEPTH)): a pattern with nested
// quantifiers on a long line fails with an error naming it instead of running for hours.
#define TOK_REGEX_MATCH_LIMIT 10000000
// Per search (tok_split_apply): a budget of BASE + PER_BYTE x the bytes left to search.
#define TOK_REGEX_BASE_STEPS 100000
#define TOK_REGEX_STEPS_PER_BYTE 16
#define TOK_REGEX_DEPTH_LIMIT 20000

// ---- decoder steps (tok_decode.c) ----
enum { TOK_DEC_REPLACE, TOK_DEC_BYTEFALLBACK, TOK_DEC_FUSE, TOK_DEC_STRIP, TOK_DEC_METASPACE, TOK_DEC_BYTELEVEL };
typedef struct {
    int kind;
    char *pat; size_t pat_len;           // Replace: String pattern; Metaspace: the replacement char
    char *content; size_t content_len;   // Replace: replacement
    char strip[5]; int strip_len;        // Strip: the content char (UTF-8)
    int start, stop;                     // Strip: chars to strip at the start / end of each token
    int prepend_never;                   // Metaspace: prepend_scheme == never (keeps the first token's space)
    int fused;                           // this step sees the one token a Fuse before it made
} tok_dec_step;

typedef struct {
    int32_t id;
    char *content;            // UTF-8
    size_t len;
    int special, single_word, lstrip, rstrip, normalized;
    char *norm_content;       // content after the normalizer (for normalized=1 tokens)
    size_t norm_len;
} tok_added;

typedef struct { int64_t s, e; } tok_span;

typedef struct {
    int32_t child, sibling;   // first child, next sibling (-1: none)
    int32_t term;             // index into added of the token ending here (-1: none)
    uint8_t byte;
} tok_trie_node;

typedef struct {
    uint64_t key;     // ((uint64)a << 32 | b) + 1; 0 = empty
    uint32_t rank;
    int32_t nw;       // id of the merged token
} tok_merge;

// ---- BPE word cache (bounded; cleared when full) ----
typedef struct {
    uint64_t *hash;           // (cap) 0 = empty
    uint32_t *key_off, *key_len, *val_off, *val_n;   // (cap)
    char *keys; size_t keys_n, keys_cap;
    int32_t *vals; size_t vals_n, vals_cap;
    uint64_t cap, count, max_count;
    uint64_t hits, misses;
} tok_cache;

struct rlc_tokenizer {
    char *name;                      // file path for error messages
    // model
    tok_strmap vocab;                // token string -> id (model vocab only)
    int64_t n_ids;                   // max id + 1 over vocab and added tokens
    const char **id_tok;             // (n_ids) token string or NULL (points into vocab arena / added)
    uint32_t *dec_off, *dec_len;     // (n_ids) decoded bytes of each id in dec_bytes
    char *dec_bytes; size_t dec_n;
    // merges: open addressing on (a << 32 | b) -> rank, new id
    tok_merge *mslot;                // (mcap) open addressing, one 16-byte slot per probe
    uint64_t mcap, mcount;
    int ignore_merges;
    int32_t unk_id;                  // -1: none
    int fuse_unk;
    int byte_fallback;               // an unknown char becomes its <0xNN> byte tokens
    int32_t fb_id[256];              // vocab id of "<0xNN>" (-1 if absent)
    // SentencePiece files feed whole segments to BPE (spaces became "▁"). A merge can only cross the
    // boundary before a "▁" if some vocab token has "▁" right after the char before it, so words are
    // cut before every other "▁" (tok_bpe_prepare): same ids, short words, word-cache hits.
    int32_t *char_id;                // (65536) vocab id of each BMP char as a one-char token, -1 if none
                                     // (non-byte-level models: the BPE's initial symbols); NULL for byte-level
    char wsplit[5]; int wsplit_len;  // the "▁" (normalizer Replace(" ") / Metaspace replacement); 0: off
    uint32_t wsplit_keep[64]; int n_wsplit_keep;   // chars that a vocab token has right before it
    int byte_level;                  // the pre-tokenizer maps bytes through bytes_to_unicode
    int32_t byte_id[256];            // vocab id of each byte's byte-level char (-1 if absent)
    uint32_t byte_char[256];         // bytes_to_unicode
    int16_t char_byte[512];          // inverse for code points < 512 (-1: none)
    // normalizer
    tok_norm_step norm[8]; int n_norm;
    // pre-tokenizer
    tok_pretok_step steps[8]; int n_steps;
    // added tokens
    tok_added *added; int n_added;
    // matcher per kind (0: normalized=0 tokens on raw text, 1: normalized=1 tokens on normalized text):
    // a byte trie of the contents (root[b]: the node after first byte b, -1 if none)
    tok_trie_node *trie[2]; int32_t trie_n[2], trie_cap[2];
    int32_t trie_root[2][256];
    int n_added_raw, n_added_norm;
    uint8_t *is_special;             // (n_ids)
    // post-processor (TemplateProcessing single): ids before / after the sequence
    int32_t post_pre[8]; int n_post_pre;
    int32_t post_post[8]; int n_post_post;
    int32_t post_pre0[8], post_post0[8]; int n_post_pre0, n_post_post0, post_saved;   // as tokenizer.json has them
    // decoder: steps [0, dec_pre) are per-token and stateless and already applied in the dec table
    tok_dec_step dsteps[8]; int n_dsteps;
    int dec_none;                    // no decoder: tokens joined with " "
    int dec_pre;
    // configs
    rlc_tok_special sp;
    rlc_tok_opts opts;
    struct tok_chat *chat;           // chat template (chat.c)
    // scratch
    tok_cache cache;
    rlc_strbuf sc_map;               // BPE: the word as byte-level chars (ignore_merges lookup)
    rlc_strbuf sc_seg;               // encode: the normalized segment
    rlc_strbuf sc_na, sc_nb;         // tok_normalize: the steps' ping-pong buffers
    tok_span *sc_spans[8]; int64_t sc_spans_cap[8];
    int32_t *sc_sym; int64_t sc_sym_cap;   // BPE scratch
};

// tok_json.c
void tok_load_json(rlc_tokenizer *t, const char *json, size_t len);
// tok_normalize.c
struct cJSON;
void tok_load_normalizer(rlc_tokenizer *t, const struct cJSON *n, int depth);
// out cleared first; uses the tokenizer's normalizer scratch (out must not be one of those buffers)
void tok_normalize(rlc_tokenizer *t, const char *p, size_t n, rlc_strbuf *out);
void tok_norm_free(rlc_tokenizer *t);
// tok_decode.c
void tok_load_decoder(rlc_tokenizer *t, const struct cJSON *n);
void tok_dec_table(rlc_tokenizer *t);   // fills dec_off/dec_len/dec_bytes (needs id_tok, byte tables)
void tok_dec_free(rlc_tokenizer *t);
int tok_metaspace_scheme(const struct cJSON *n, const char *name, const char *where);   // TOK_PREPEND_*
// tok_pretok.c
char *rlc_tok_rewrite_regex(const char *pat, const char *where);   // malloc'd PCRE2 pattern
void tok_step_compile_regex(tok_pretok_step *st, const char *pat, int literal, const char *where);
// Split [p, p+n) by the step's regex; writes spans (relative to p) into *out, returns the count.
int64_t tok_split_apply(const tok_pretok_step *st, const char *p, size_t n, tok_span **out, int64_t *cap);
// tok_bpe.c
void tok_bpe_word(rlc_tokenizer *t, const char *p, size_t n, rlc_ivec *out);
void tok_cache_init(tok_cache *c, int64_t capacity);
void tok_cache_free(tok_cache *c);
void tok_bpe_prepare(rlc_tokenizer *t);   // after the vocab, normalizer and pre-tokenizer are loaded
// chat.c: the chat template from tokenizer_config.json (cfg may be NULL), chat_template.jinja, the options
struct cJSON;
void tok_chat_apply_config(rlc_tokenizer *t, const struct cJSON *cfg, const char *cfg_name);
void tok_chat_load_dir(rlc_tokenizer *t, const char *dir);
void tok_chat_free(rlc_tokenizer *t);
// tokenizer.c
int tok_is_white_space(uint32_t c);
// One UTF-8 sequence at p[*i]: 1 valid (*cp set), 0 invalid (*i skips the maximal subpart), -1 a valid
// prefix cut off by the end (*i unchanged).
int tok_utf8_step(const unsigned char *p, size_t n, size_t *i, uint32_t *cp);
int tok_utf8_next(const char *p, size_t n, size_t *i, uint32_t *cp);   // 1 if valid sequence decoded
