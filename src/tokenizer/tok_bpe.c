// tok_bpe.c: the BPE model on one pre-tokenized word (byte-level symbols, or chars with unk_token /
// fuse_unk / byte_fallback as HF's BPE::merge_word): a merge loop over a binary min-heap keyed on (merge rank, symbol position), O(n log n) per word and the same merge order as HF's word.rs
// merge_all (lowest rank first, leftmost on ties, stale heap entries skipped), plus a bounded word
// cache owned by the tokenizer.
#include <string.h>
#include <utf8proc.h>

#include "core/common.h"
#include "tokenizer/tok_internal.h"

#define CACHE_MAX_KEY 64   // words longer than this (bytes) are not cached

void tok_cache_init(tok_cache *c, int64_t capacity) {
    memset(c, 0, sizeof *c);
    if (capacity < 0) return;   // disabled
    if (capacity == 0) capacity = 65536;
    c->max_count = (uint64_t)capacity;
    c->cap = 64;
    while (c->cap < c->max_count * 2) c->cap *= 2;
    c->hash = rlc_calloc(c->cap, sizeof(uint64_t));
    c->key_off = rlc_malloc(c->cap * sizeof(uint32_t));
    c->key_len = rlc_malloc(c->cap * sizeof(uint32_t));
    c->val_off = rlc_malloc(c->cap * sizeof(uint32_t));
    c->val_n = rlc_malloc(c->cap * sizeof(uint32_t));
}
void tok_cache_free(tok_cache *c) {
    free(c->hash);
    free(c->key_off);
    free(c->key_len);
    free(c->val_off);
    free(c->val_n);
    free(c->keys);
    free(c->vals);
    memset(c, 0, sizeof *c);
}
static void cache_clear(tok_cache *c) {
    memset(c->hash, 0, c->cap * sizeof(uint64_t));
    c->count = 0;
    c->keys_n = 0;
    c->vals_n = 0;
}
// Returns the slot of the key, or the empty slot where it would go (*found = 0).
static uint64_t cache_slot(const tok_cache *c, uint64_t h, const char *p, size_t n, int *found) {
    uint64_t i = h & (c->cap - 1);
    while (c->hash[i]) {
        if (c->hash[i] == h && c->key_len[i] == n && !memcmp(c->keys + c->key_off[i], p, n)) {
            *found = 1;
            return i;
        }
        i = (i + 1) & (c->cap - 1);
    }
    *found = 0;
    return i;
}
static void cache_put(tok_cache *c, uint64_t h, const char *p, size_t n, const int32_t *ids, int64_t m) {
    if (c->count >= c->max_count) cache_clear(c);
    int found;
    uint64_t i = cache_slot(c, h, p, n, &found);
    if (found) return;
    if (c->keys_n + n > c->keys_cap) {
        size_t cap = c->keys_cap ? c->keys_cap : 1 << 16;
        while (cap < c->keys_n + n) cap *= 2;
        c->keys = rlc_realloc(c->keys, cap);
        c->keys_cap = cap;
    }
    if (c->vals_n + (size_t)m > c->vals_cap) {
        size_t cap = c->vals_cap ? c->vals_cap : 1 << 14;
        while (cap < c->vals_n + (size_t)m) cap *= 2;
        c->vals = rlc_realloc(c->vals, cap * sizeof(int32_t));
        c->vals_cap = cap;
    }
    memcpy(c->keys + c->keys_n, p, n);
    if (m) memcpy(c->vals + c->vals_n, ids, (size_t)m * sizeof(int32_t));   // m = 0: vals may still be NULL
    c->hash[i] = h;
    c->key_off[i] = (uint32_t)c->keys_n;
    c->key_len[i] = (uint32_t)n;
    c->val_off[i] = (uint32_t)c->vals_n;
    c->val_n[i] = (uint32_t)m;
    c->keys_n += n;
    c->vals_n += (size_t)m;
    c->count++;
}

static inline int merge_find(const rlc_tokenizer *t, int32_t a, int32_t b, uint32_t *rank, int32_t *nw) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> 20 & (t->mcap - 1);
    for (;;) {
        const tok_merge *m = &t->mslot[h];
        if (!m->key) return 0;
        if (m->key == key + 1) {
            *rank = m->rank;
            *nw = m->nw;
            return 1;
        }
        h = (h + 1) & (t->mcap - 1);
    }
}

static inline void heap_push(uint64_t *hp, int64_t *hn, uint64_t v) {
    int64_t i = (*hn)++;
    while (i > 0) {
        int64_t par = (i - 1) >> 1;
        if (hp[par] <= v) break;
        hp[i] = hp[par];
        i = par;
    }
    hp[i] = v;
}
static inline uint64_t heap_pop(uint64_t *hp, int64_t *hn) {
    uint64_t top = hp[0], v = hp[--(*hn)];
    int64_t n = *hn, i = 0;
    for (;;) {
        int64_t l = 2 * i + 1;
        if (l >= n) break;
        int64_t r = l + 1, m = (r < n && hp[r] < hp[l]) ? r : l;
        if (hp[m] >= v) break;
        hp[i] = hp[m];
        i = m;
    }
    if (n > 0) hp[i] = v;
    return top;
}

// Appends the symbol for one input character (bytes [p, p+n), or a byte-level byte) honouring
// unk_token / fuse_unk like HF's BPE::merge_word. *unk_pending: an unk symbol not yet emitted.
static void add_sym(const rlc_tokenizer *t, int32_t id, int32_t *sym, int64_t *ns, int *unk_pending) {
    if (id >= 0) {
        if (*unk_pending) { sym[(*ns)++] = t->unk_id; *unk_pending = 0; }
        sym[(*ns)++] = id;
        return;
    }
    if (t->unk_id < 0) return;   // no unk token: the character is dropped, as in HF
    if (*unk_pending && !t->fuse_unk) sym[(*ns)++] = t->unk_id;
    *unk_pending = 1;
}

// Reference merge loop (O(n^2)): repeatedly merge the adjacent pair with the lowest rank, leftmost on
// ties, until none is in the merges. Same result as the heap loop; used by tests (opts.bpe_ref).
static void merge_ref(const rlc_tokenizer *t, int32_t *sym, int64_t *ns) {
    for (;;) {
        int64_t best = -1;
        uint32_t br = UINT32_MAX;
        int32_t bn = -1;
        for (int64_t i = 0; i + 1 < *ns; i++) {
            uint32_t r;
            int32_t nw;
            if (merge_find(t, sym[i], sym[i + 1], &r, &nw) && r < br) { br = r; best = i; bn = nw; }
        }
        if (best < 0) return;
        sym[best] = bn;
        memmove(sym + best + 1, sym + best + 2, (size_t)(*ns - best - 2) * sizeof(int32_t));
        (*ns)--;
    }
}

static void bpe_word(rlc_tokenizer *t, const char *p, size_t n, rlc_ivec *out) {
    if (n == 0) return;
    tok_cache *c = &t->cache;
    uint64_t h = 0;
    int use_cache = c->cap && n <= CACHE_MAX_KEY;
    if (use_cache) {
        h = tok_hash(p, n) | 1;
        int found;
        uint64_t i = cache_slot(c, h, p, n, &found);
        if (found) {
            c->hits++;
            if (c->val_n[i]) rlc_iv_append(out, c->vals + c->val_off[i], c->val_n[i]);
            return;
        }
        c->misses++;
    }
    // the word as the model sees it (byte-level chars), needed for ignore_merges
    if (t->ignore_merges) {
        int32_t id;
        if (t->byte_level) {
            rlc_strbuf *m = &t->sc_map;
            rlc_sb_clear(m);
            for (size_t i = 0; i < n; i++) {
                char u[4];
                int k = (int)utf8proc_encode_char((utf8proc_int32_t)t->byte_char[(unsigned char)p[i]], (utf8proc_uint8_t *)u);
                rlc_sb_append(m, u, (size_t)k);
            }
            id = tok_strmap_get(&t->vocab, m->s, m->n);
        } else {
            id = tok_strmap_get(&t->vocab, p, n);
        }
        if (id >= 0) {
            rlc_iv_push(out, id);
            if (use_cache) cache_put(c, h, p, n, &id, 1);
            return;
        }
    }
    // scratch: sym, prev, next (n each) and the heap (3n entries)
    int64_t need = (int64_t)n * 3 + 8 + (int64_t)n * 6 + 8;
    if (t->sc_sym_cap < need) {
        free(t->sc_sym);
        t->sc_sym_cap = need * 2;
        t->sc_sym = rlc_malloc((size_t)t->sc_sym_cap * sizeof(int32_t));
    }
    int32_t *sym = t->sc_sym, *prv = sym + n + 1, *nxt = prv + n + 1;
    uint64_t *hp = (uint64_t *)(void *)(((uintptr_t)(nxt + n + 1) + 7) & ~(uintptr_t)7);
    int64_t ns = 0;
    int unk = 0;
    if (t->byte_level) {
        for (size_t i = 0; i < n; i++) add_sym(t, t->byte_id[(unsigned char)p[i]], sym, &ns, &unk);
    } else {
        size_t i = 0;
        while (i < n) {
            unsigned char b = (unsigned char)p[i];
            size_t k = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
            if (i + k > n) k = n - i;
            int32_t id;
            if (k <= 3 && t->char_id) {   // a BMP char: the table (valid UTF-8 here)
                uint32_t cp = k == 1 ? b : k == 2 ? (uint32_t)(b & 0x1F) << 6 | (p[i + 1] & 0x3F)
                                                  : (uint32_t)(b & 0x0F) << 12 | (uint32_t)(p[i + 1] & 0x3F) << 6 | (p[i + 2] & 0x3F);
                id = t->char_id[cp];
            } else {
                id = tok_strmap_get(&t->vocab, p + i, k);
            }
            if (id < 0 && t->byte_fallback) {
                // <0xNN> per UTF-8 byte when all exist (HF pushes them without flushing a pending unk)
                size_t j = 0;
                while (j < k && t->fb_id[(unsigned char)p[i + j]] >= 0) j++;
                if (j == k) {
                    for (j = 0; j < k; j++) sym[ns++] = t->fb_id[(unsigned char)p[i + j]];
                    i += k;
                    continue;
                }
            }
            add_sym(t, id, sym, &ns, &unk);
            i += k;
        }
    }
    if (unk) sym[ns++] = t->unk_id;
    if (t->opts.bpe_ref) {
        merge_ref(t, sym, &ns);
        rlc_iv_append(out, sym, ns);
        return;
    }
    // merge loop
    int64_t hn = 0;
    for (int64_t i = 0; i < ns; i++) {
        prv[i] = (int32_t)(i - 1);
        nxt[i] = i + 1 < ns ? (int32_t)(i + 1) : -1;
    }
    for (int64_t i = 0; i + 1 < ns; i++) {
        uint32_t r;
        int32_t nw;
        if (merge_find(t, sym[i], sym[i + 1], &r, &nw)) heap_push(hp, &hn, (uint64_t)r << 32 | (uint64_t)i);
    }
    while (hn > 0) {
        uint64_t top = heap_pop(hp, &hn);
        int32_t pos = (int32_t)(top & 0xffffffffu);
        uint32_t rank = (uint32_t)(top >> 32);
        if (sym[pos] < 0) continue;      // merged away
        int32_t nx = nxt[pos];
        if (nx < 0) continue;
        uint32_t r;
        int32_t nw;
        if (!merge_find(t, sym[pos], sym[nx], &r, &nw) || r != rank) continue;   // stale entry
        sym[pos] = nw;
        sym[nx] = -1;
        nxt[pos] = nxt[nx];
        if (nxt[nx] >= 0) prv[nxt[nx]] = pos;
        if (prv[pos] >= 0 && merge_find(t, sym[prv[pos]], nw, &r, &nw))
            heap_push(hp, &hn, (uint64_t)r << 32 | (uint64_t)(uint32_t)prv[pos]);
        nw = sym[pos];
        if (nxt[pos] >= 0 && merge_find(t, nw, sym[nxt[pos]], &r, &nw))
            heap_push(hp, &hn, (uint64_t)r << 32 | (uint64_t)(uint32_t)pos);
    }
    int64_t start = out->n;
    for (int64_t i = 0; i < ns; i++)
        if (sym[i] >= 0) rlc_iv_push(out, sym[i]);
    if (use_cache) cache_put(c, h, p, n, out->v ? out->v + start : NULL, out->n - start);   // a word of no tokens
}

void tok_bpe_prepare(rlc_tokenizer *t) {
    if (!t->byte_level) {
        t->char_id = rlc_malloc(65536 * sizeof(int32_t));
        memset(t->char_id, 0xff, 65536 * sizeof(int32_t));
        for (size_t off = 0; off < t->vocab.arena_n;) {   // the arena in order: per key a uint32 length, bytes, NUL
            uint32_t len;
            memcpy(&len, t->vocab.arena + off, 4);
            const char *s = t->vocab.arena + off + 4;
            off += (size_t)len + 5;
            size_t j = 0;
            uint32_t cp;
            if (len && len <= 3 && tok_utf8_next(s, len, &j, &cp) && j == len && cp < 65536)
                t->char_id[cp] = tok_strmap_get(&t->vocab, s, len);   // the map's id (the last of duplicates)
        }
    }
    t->wsplit_len = 0;
    // only where merges alone decide (ignore_merges looks the whole word up) and unk runs cannot fuse
    // across a cut (byte fallback covers every byte, or no fuse_unk)
    int all_fb = t->byte_fallback;
    for (int b = 0; b < 256 && all_fb; b++) all_fb = t->fb_id[b] >= 0;
    if (t->ignore_merges || t->byte_level || (t->unk_id >= 0 && t->fuse_unk && !all_fb)) return;
    const char *x = NULL;
    for (int i = 0; i < t->n_norm && !x; i++)
        if (t->norm[i].kind == TOK_NORM_REPLACE && t->norm[i].pat && !strcmp(t->norm[i].pat, " ")) x = t->norm[i].content;
    for (int i = 0; i < t->n_steps && !x; i++)
        if (t->steps[i].kind == TOK_PRE_METASPACE) x = t->steps[i].repl;
    size_t xl = x ? strlen(x) : 0;
    if (!xl || xl > 4) return;
    int nk = 0;
    for (size_t off = 0; off < t->vocab.arena_n;) {   // the arena in order: per key a uint32 length, bytes, NUL
        uint32_t len;
        memcpy(&len, t->vocab.arena + off, 4);
        const char *s = t->vocab.arena + off + 4;
        off += (size_t)len + 5;
        if (len <= xl) continue;
        for (const char *q = s + 1; (q = memchr(q, x[0], (size_t)(s + len - q))) != NULL; q++) {
            if ((size_t)(s + len - q) < xl || memcmp(q, x, xl)) continue;
            size_t k = (size_t)(q - s) - 1;   // the char before it
            while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
            size_t j = k;
            uint32_t cp;
            if (!tok_utf8_next(s, (size_t)(q - s), &j, &cp)) return;
            int seen = 0;
            for (int m = 0; m < nk; m++) seen |= t->wsplit_keep[m] == cp;
            if (seen) continue;
            if (nk == 64) return;   // too many: no cutting
            t->wsplit_keep[nk++] = cp;
        }
    }
    memcpy(t->wsplit, x, xl);
    t->wsplit_len = (int)xl;
    t->n_wsplit_keep = nk;
}

void tok_bpe_word(rlc_tokenizer *t, const char *p, size_t n, rlc_ivec *out) {
    if (!t->wsplit_len) { bpe_word(t, p, n, out); return; }
    const size_t xl = (size_t)t->wsplit_len;
    size_t start = 0, i = 0;
    while (i < n) {
        const char *q = memmem(p + i, n - i, t->wsplit, xl);
        if (!q) break;
        size_t at = (size_t)(q - p);
        if (at > start) {
            size_t k = at - 1;
            while (k > start && ((unsigned char)p[k] & 0xC0) == 0x80) k--;
            size_t j = k;
            uint32_t cp = 0;
            tok_utf8_next(p, at, &j, &cp);
            int keep = 0;
            for (int m = 0; m < t->n_wsplit_keep; m++) keep |= t->wsplit_keep[m] == cp;
            if (!keep) {
                bpe_word(t, p + start, at - start, out);
                start = at;
            }
        }
        i = at + xl;
    }
    bpe_word(t, p + start, n - start, out);
}
