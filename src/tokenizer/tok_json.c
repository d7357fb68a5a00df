// tok_json.c: loading tokenizer.json. cJSON takes ~300 ms on Qwen3's 11 MB file, almost all of it in
// model.vocab and model.merges, so those two are read by a small specialised scanner here, and cJSON
// only parses the rest of the document (with the two spans blanked out).
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>
#include <utf8proc.h>

#include "core/common.h"
#include "core/json.h"
#include "tokenizer/tok_internal.h"

// ---------------------------------------------------------------------------------------------
// hashing and the string map

uint64_t tok_hash(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, s, n);
    h = (h ^ v) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

void tok_strmap_init(tok_strmap *m, uint64_t expected) {
    memset(m, 0, sizeof *m);
    uint64_t cap = 64;
    while (cap * 3 < expected * 4) cap *= 2;
    m->cap = cap;
    m->slot = rlc_calloc(cap, sizeof(tok_strslot));
}
void tok_strmap_free(tok_strmap *m) {
    free(m->arena);
    free(m->slot);
    memset(m, 0, sizeof *m);
}
static void strmap_grow(tok_strmap *m) {
    uint64_t cap = m->cap * 2;
    tok_strslot *ns = rlc_calloc(cap, sizeof(tok_strslot));
    for (uint64_t i = 0; i < m->cap; i++) {
        if (!m->slot[i].key) continue;
        uint64_t h = m->slot[i].hash & (cap - 1);
        while (ns[h].key) h = (h + 1) & (cap - 1);
        ns[h] = m->slot[i];
    }
    free(m->slot);
    m->slot = ns;
    m->cap = cap;
}
// Arena layout per key: uint32 length, the bytes, NUL. Slots point at the bytes.
static inline int key_eq(const tok_strmap *m, const tok_strslot *sl, const char *key, size_t len) {
    const char *k = m->arena + sl->key - 1;
    uint32_t kl;
    memcpy(&kl, k - 4, 4);
    return kl == len && !memcmp(k, key, len);
}
static uint32_t strmap_put_h(tok_strmap *m, const char *key, size_t len, int32_t val, uint64_t hv);
uint32_t tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t val) {
    return strmap_put_h(m, key, len, val, tok_hash(key, len));
}
static uint32_t strmap_put_h(tok_strmap *m, const char *key, size_t len, int32_t val, uint64_t hv) {
    if ((m->count + 1) * 4 > m->cap * 3) strmap_grow(m);
    uint64_t h = hv & (m->cap - 1);
    while (m->slot[h].key) {
        tok_strslot *sl = &m->slot[h];
        if (sl->hash == hv) {
            if (key_eq(m, sl, key, len)) {
                sl->val = val;
                return sl->key - 1;
            }
            m->hash_collision = 1;
        }
        h = (h + 1) & (m->cap - 1);
    }
    if (m->arena_n + len + 5 > m->arena_cap) {
        size_t cap = m->arena_cap ? m->arena_cap : 4096;
        while (cap < m->arena_n + len + 5) cap *= 2;
        m->arena = rlc_realloc(m->arena, cap);
        m->arena_cap = cap;
    }
    CHECK(m->arena_n + len + 5 < UINT32_MAX, "string map arena over 4 GiB");
    uint32_t l32 = (uint32_t)len;
    memcpy(m->arena + m->arena_n, &l32, 4);
    uint32_t off = (uint32_t)m->arena_n + 4;
    memcpy(m->arena + off, key, len);
    m->arena[off + len] = 0;
    m->arena_n += len + 5;
    m->slot[h] = (tok_strslot){hv, off + 1, val};
    m->count++;
    return off;
}
int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len) {
    if (!m->cap) return -1;
    uint64_t hv = tok_hash(key, len), h = hv & (m->cap - 1);
    while (m->slot[h].key) {
        const tok_strslot *sl = &m->slot[h];
        if (sl->hash == hv && key_eq(m, sl, key, len)) return sl->val;
        h = (h + 1) & (m->cap - 1);
    }
    return -1;
}
int32_t tok_strmap_get_known_h(const tok_strmap *m, const char *key, size_t len, uint64_t hv) {
    if (m->hash_collision || !m->cap) return tok_strmap_get(m, key, len);
    uint64_t h = hv & (m->cap - 1);
    while (m->slot[h].key) {
        const tok_strslot *sl = &m->slot[h];
        if (sl->hash == hv) return sl->val;
        h = (h + 1) & (m->cap - 1);
    }
    return -1;
}
int32_t tok_strmap_get_known(const tok_strmap *m, const char *key, size_t len) {
    return tok_strmap_get_known_h(m, key, len, tok_hash(key, len));
}

// ---------------------------------------------------------------------------------------------
// the scanner (only what tokenizer.json needs: RFC 8259 JSON, strings unescaped into UTF-8)

typedef struct {
    const char *base, *end;
    const char *name;
} scan;

RLC_NORETURN static void scan_die(const scan *s, const char *p, const char *what) {
    rlc_die("%s: invalid JSON at byte %lld: %s", s->name, (long long)(p - s->base), what);
}
static inline char at(const scan *s, const char *p) { return p < s->end ? *p : 0; }
static const char *ws(const scan *s, const char *p) {
    while (p < s->end && (at(s, p) == ' ' || at(s, p) == '\n' || at(s, p) == '\r' || at(s, p) == '\t')) p++;
    return p;
}
static int hex4(const char *p, uint32_t *v) {
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        x <<= 4;
        if (c >= '0' && c <= '9') x |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') x |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') x |= (uint32_t)(c - 'A' + 10);
        else return 0;
    }
    *v = x;
    return 1;
}
static void put_utf8(rlc_strbuf *b, uint32_t c) {
    char u[4];
    int n = (int)utf8proc_encode_char((utf8proc_int32_t)c, (utf8proc_uint8_t *)u);
    rlc_sb_append(b, u, (size_t)n);
}
// p at '"'. Unescapes into out (cleared first) when out != NULL. Returns the position after the quote.
static const char *scan_str(const scan *s, const char *p, rlc_strbuf *out) {
    if (p >= s->end || at(s, p) != '"') scan_die(s, p, "expected a string");
    p++;
    if (out) { rlc_sb_clear(out); rlc_sb_reserve(out, 0); }
    for (;;) {
        const char *q = p;
        while (q < s->end && *q != '"' && *q != '\\') q++;
        if (q >= s->end) scan_die(s, p, "unterminated string");
        if (out) rlc_sb_append(out, p, (size_t)(q - p));
        if (*q == '"') return q + 1;
        // escape
        if (q + 1 >= s->end) scan_die(s, q, "unterminated escape");
        char c = q[1];
        p = q + 2;
        char lit = 0;
        switch (c) {
        case '"': lit = '"'; break;
        case '\\': lit = '\\'; break;
        case '/': lit = '/'; break;
        case 'b': lit = '\b'; break;
        case 'f': lit = '\f'; break;
        case 'n': lit = '\n'; break;
        case 'r': lit = '\r'; break;
        case 't': lit = '\t'; break;
        case 'u': {
            uint32_t v;
            if (s->end - p < 4 || !hex4(p, &v)) scan_die(s, q, "bad \\u escape");
            p += 4;
            if (v >= 0xD800 && v < 0xDC00) {
                uint32_t lo;
                if (s->end - p >= 6 && p[0] == '\\' && p[1] == 'u' && hex4(p + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                    v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                } else {
                    scan_die(s, q, "lone UTF-16 surrogate in \\u escape");
                }
            } else if (v >= 0xDC00 && v < 0xE000) {
                scan_die(s, q, "lone UTF-16 surrogate in \\u escape");
            }
            if (out) put_utf8(out, v);
            continue;
        }
        default: scan_die(s, q, "bad escape");
        }
        if (out) rlc_sb_putc(out, lit);
    }
}
static const char *scan_value(const scan *s, const char *p, int depth);
static const char *scan_container(const scan *s, const char *p, int depth) {
    char open = *p, close = open == '{' ? '}' : ']';
    if (depth > 200) scan_die(s, p, "nesting too deep");
    p = ws(s, p + 1);
    if (p < s->end && at(s, p) == close) return p + 1;
    for (;;) {
        if (open == '{') {
            p = scan_str(s, p, NULL);
            p = ws(s, p);
            if (p >= s->end || at(s, p) != ':') scan_die(s, p, "expected ':'");
            p = ws(s, p + 1);
        }
        p = scan_value(s, p, depth + 1);
        p = ws(s, p);
        if (p < s->end && at(s, p) == ',') { p = ws(s, p + 1); continue; }
        if (p < s->end && at(s, p) == close) return p + 1;
        scan_die(s, p, open == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}
static const char *scan_value(const scan *s, const char *p, int depth) {
    if (p >= s->end) scan_die(s, p, "unexpected end of input");
    switch (*p) {
    case '"': return scan_str(s, p, NULL);
    case '{':
    case '[': return scan_container(s, p, depth);
    default: {
        const char *q = p;
        while (q < s->end && (strchr("+-.0123456789eE", *q) || (*q >= 'a' && *q <= 'z'))) q++;
        if (q == p) scan_die(s, p, "unexpected character");
        return q;
    }
    }
}
static int64_t scan_int(const scan *s, const char **pp) {
    const char *p = *pp;
    int neg = 0;
    if (p < s->end && at(s, p) == '-') { neg = 1; p++; }
    if (p >= s->end || *p < '0' || *p > '9') scan_die(s, p, "expected an integer token id");
    int64_t v = 0;
    while (p < s->end && *p >= '0' && *p <= '9') {
        v = v * 10 + (*p - '0');
        if (v >= TOK_MAX_ID) scan_die(s, p, "token id out of range (expected below 2^30)");
        p++;
    }
    if (p < s->end && (at(s, p) == '.' || at(s, p) == 'e' || at(s, p) == 'E')) scan_die(s, p, "token id must be an integer");
    *pp = p;
    return neg ? -v : v;
}

static void merges_put(rlc_tokenizer *t, int32_t a, int32_t b, uint32_t rank, int32_t nw) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> 20 & (t->mcap - 1);
    while (t->mslot[h].key) {
        if (t->mslot[h].key == key + 1) break;   // duplicate pair: the later merge wins, as in HF's HashMap
        h = (h + 1) & (t->mcap - 1);
    }
    if (!t->mslot[h].key) t->mcount++;
    t->mslot[h] = (tok_merge){key + 1, rank, nw};
}

// Parses the vocab object at p; returns the position after it. `size_hint` = bytes left in the file.
// Parses the vocab object at p; returns the position after it. `size_hint` = bytes left in the file.
// Entries are inserted in batches of VB with their slots prefetched.
#define VB 64
static const char *parse_vocab(rlc_tokenizer *t, const scan *s, const char *p, size_t size_hint) {
    rlc_strbuf k = {0}, kb = {0};
    size_t off[VB], ln[VB];
    uint64_t hv[VB];
    int32_t id[VB];
    int nb = 0;
    p = ws(s, p);
    if (p >= s->end || at(s, p) != '{') scan_die(s, p, "model.vocab must be an object");
    // rough size estimate: vocab and merges share the rest of the file (a low guess grows; a table too large for the
    // caches makes every merge lookup at load slower)
    tok_strmap_init(&t->vocab, (uint64_t)(size_hint / 128 + 16));
    p = ws(s, p + 1);
    if (at(s, p) == '}') { rlc_sb_free(&k); return p + 1; }
    for (;;) {
        p = scan_str(s, p, &k);
        p = ws(s, p);
        if (at(s, p) != ':') scan_die(s, p, "expected ':' in model.vocab");
        p = ws(s, p + 1);
        int64_t v = scan_int(s, &p);
        if (v < 0) scan_die(s, p, "negative token id in model.vocab");
        if (v + 1 > t->n_ids) t->n_ids = v + 1;
        off[nb] = kb.n;
        ln[nb] = k.n;
        id[nb] = (int32_t)v;
        rlc_sb_append(&kb, k.s, k.n);
        p = ws(s, p);
        int last = at(s, p) != ',';
        if (++nb == VB || last) {
            for (int i = 0; i < nb; i++) {
                hv[i] = tok_hash(kb.s + off[i], ln[i]);
                __builtin_prefetch(tok_strmap_slot0(&t->vocab, hv[i]), 1);
            }
            for (int i = 0; i < nb; i++) strmap_put_h(&t->vocab, kb.s + off[i], ln[i], id[i], hv[i]);
            nb = 0;
            rlc_sb_clear(&kb);
        }
        if (at(s, p) == ',') { p = ws(s, p + 1); continue; }
        if (at(s, p) == '}') break;
        scan_die(s, p, "expected ',' or '}' in model.vocab");
    }
    rlc_sb_free(&k);
    rlc_sb_free(&kb);
    return p + 1;
}

static void merges_alloc(rlc_tokenizer *t, uint64_t cap) {
    t->mcap = cap;
    t->mcount = 0;
    t->mslot = rlc_calloc(t->mcap, sizeof(tok_merge));
}
static void merges_grow(rlc_tokenizer *t) {
    tok_merge *old = t->mslot;
    uint64_t oc = t->mcap;
    merges_alloc(t, oc * 2);
    for (uint64_t i = 0; i < oc; i++)
        if (old[i].key) merges_put(t, (int32_t)((old[i].key - 1) >> 32), (int32_t)(uint32_t)(old[i].key - 1), old[i].rank, old[i].nw);
    free(old);
}

// Parses the merges list at p; returns the position after it.
// Merges are resolved in batches: the strings of MB merges are parsed first, then the vocab slots of
// all their parts are prefetched, then looked up (the lookups are cache misses in a multi-MB table).
#define MB 64
typedef struct {
    rlc_strbuf buf;           // per merge: left bytes then right bytes (left+right = the merged token)
    size_t off[MB], ln[MB], rn[MB];
    uint64_t ha[MB], hb[MB], hab[MB];
    int64_t rank[MB];
    int n;
} merge_batch;

static void batch_flush(rlc_tokenizer *t, merge_batch *mb) {
    const char *base = mb->buf.s;
    for (int i = 0; i < mb->n; i++) {
        const char *x = base + mb->off[i];
        mb->ha[i] = tok_hash(x, mb->ln[i]);
        mb->hb[i] = tok_hash(x + mb->ln[i], mb->rn[i]);
        mb->hab[i] = tok_hash(x, mb->ln[i] + mb->rn[i]);
        __builtin_prefetch(tok_strmap_slot0(&t->vocab, mb->ha[i]));
        __builtin_prefetch(tok_strmap_slot0(&t->vocab, mb->hb[i]));
        __builtin_prefetch(tok_strmap_slot0(&t->vocab, mb->hab[i]));
    }
    if ((t->mcount + (uint64_t)mb->n + 1) * 2 > t->mcap) merges_grow(t);
    // the ids, then the merge table slots are prefetched before the inserts (both tables are many MB)
    int32_t ia[MB], ib[MB], iab[MB];
    for (int i = 0; i < mb->n; i++) {
        const char *x = base + mb->off[i];
        ia[i] = tok_strmap_get_known_h(&t->vocab, x, mb->ln[i], mb->ha[i]);
        ib[i] = tok_strmap_get_known_h(&t->vocab, x + mb->ln[i], mb->rn[i], mb->hb[i]);
        iab[i] = tok_strmap_get_known_h(&t->vocab, x, mb->ln[i] + mb->rn[i], mb->hab[i]);
        if (ia[i] < 0)
            rlc_die("%s: model.merges[%lld]: token '%.*s' is not in the vocab", t->name, (long long)mb->rank[i], (int)mb->ln[i], x);
        if (ib[i] < 0)
            rlc_die("%s: model.merges[%lld]: token '%.*s' is not in the vocab", t->name, (long long)mb->rank[i], (int)mb->rn[i],
                    x + mb->ln[i]);
        if (iab[i] < 0)
            rlc_die("%s: model.merges[%lld]: token '%.*s' is not in the vocab", t->name, (long long)mb->rank[i],
                    (int)(mb->ln[i] + mb->rn[i]), x);
        uint64_t key = (uint64_t)(uint32_t)ia[i] << 32 | (uint32_t)ib[i];
        __builtin_prefetch(&t->mslot[(key * 0x9E3779B97F4A7C15ull) >> 20 & (t->mcap - 1)], 1);
    }
    for (int i = 0; i < mb->n; i++) merges_put(t, ia[i], ib[i], (uint32_t)mb->rank[i], iab[i]);
    mb->n = 0;
    rlc_sb_clear(&mb->buf);
}

// Parses the merges list at p; returns the position after it.
static const char *parse_merges(rlc_tokenizer *t, const scan *s, const char *p) {
    rlc_strbuf a = {0}, b = {0};
    merge_batch *mb = rlc_calloc(1, sizeof *mb);
    p = ws(s, p);
    if (p >= s->end || at(s, p) != '[') scan_die(s, p, "model.merges must be an array");
    uint64_t cap = 1 << 16;   // merges usually number about the vocab size
    while (cap < t->vocab.count * 4) cap *= 2;   // merges number about the vocab: no regrowth at load
    merges_alloc(t, cap);
    p = ws(s, p + 1);
    int64_t rank = 0;
    if (at(s, p) == ']') goto done;
    for (;;) {
        if (rank >= UINT32_MAX) scan_die(s, p, "too many merges");
        const char *l, *r;
        size_t ln, rn;
        if (at(s, p) == '"') {   // "a b"
            p = scan_str(s, p, &a);
            if (a.n >= 8 && !memcmp(a.s, "#version", 8)) goto next;   // merges.txt header, skipped by HF too
            char *sp = memchr(a.s, ' ', a.n);
            if (!sp || memchr(sp + 1, ' ', a.n - (size_t)(sp + 1 - a.s)))
                rlc_die("%s: model.merges[%lld]: expected \"left right\" with exactly one space, got '%s'", t->name,
                        (long long)rank, a.s);
            l = a.s;
            ln = (size_t)(sp - a.s);
            r = sp + 1;
            rn = a.n - ln - 1;
        } else if (at(s, p) == '[') {   // ["a", "b"]
            p = ws(s, p + 1);
            p = scan_str(s, p, &a);
            p = ws(s, p);
            if (at(s, p) != ',') scan_die(s, p, "model.merges entries must be [left, right]");
            p = ws(s, p + 1);
            p = scan_str(s, p, &b);
            p = ws(s, p);
            if (at(s, p) != ']') scan_die(s, p, "model.merges entries must be [left, right]");
            p++;
            l = a.s;
            ln = a.n;
            r = b.s;
            rn = b.n;
        } else {
            scan_die(s, p, "model.merges entries must be strings \"a b\" or pairs [a, b]");
        }
        mb->off[mb->n] = mb->buf.n;
        mb->ln[mb->n] = ln;
        mb->rn[mb->n] = rn;
        mb->rank[mb->n] = rank;
        rlc_sb_append(&mb->buf, l, ln);
        rlc_sb_append(&mb->buf, r, rn);
        if (++mb->n == MB) batch_flush(t, mb);
        rank++;
    next:
        p = ws(s, p);
        if (at(s, p) == ',') { p = ws(s, p + 1); continue; }
        if (at(s, p) == ']') break;
        scan_die(s, p, "expected ',' or ']' in model.merges");
    }
done:
    batch_flush(t, mb);
    rlc_sb_free(&mb->buf);
    free(mb);
    rlc_sb_free(&a);
    rlc_sb_free(&b);
    return p + 1;
}

// ---------------------------------------------------------------------------------------------
// the rest of the document, via cJSON

static const char *jtype(const cJSON *o) {
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(ty) ? ty->valuestring : NULL;
}
static int jbool(const cJSON *o, const char *k, int def, const char *name, const char *where) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v)) return def;
    if (!cJSON_IsBool(v)) rlc_die("%s: %s.%s must be true or false", name, where, k);
    return cJSON_IsTrue(v);
}

static const char GPT2_PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static void load_pretok(rlc_tokenizer *t, const cJSON *n, int depth) {
    if (!n || cJSON_IsNull(n)) return;
    const char *ty = jtype(n);
    if (!ty) rlc_die("%s: pre_tokenizer has no \"type\"", t->name);
    if (t->byte_level) rlc_die("%s: pre_tokenizer: ByteLevel must be the last step (rlc does not support steps after it)", t->name);
    if (!strcmp(ty, "Sequence") && depth == 0) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(n, "pretokenizers"), *it;
        if (!cJSON_IsArray(arr)) rlc_die("%s: pre_tokenizer Sequence needs a \"pretokenizers\" list", t->name);
        cJSON_ArrayForEach(it, arr) load_pretok(t, it, depth + 1);
        return;
    }
    if (t->n_steps >= 8) rlc_die("%s: more than 8 pre-tokenizer steps", t->name);
    tok_pretok_step *st = &t->steps[t->n_steps];
    memset(st, 0, sizeof *st);
    if (!strcmp(ty, "Split")) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern");
        const cJSON *re = pat ? cJSON_GetObjectItemCaseSensitive(pat, "Regex") : NULL;
        const cJSON *lit = pat ? cJSON_GetObjectItemCaseSensitive(pat, "String") : NULL;
        if (cJSON_IsString(re)) tok_step_compile_regex(st, re->valuestring, 0, t->name);
        else if (cJSON_IsString(lit)) tok_step_compile_regex(st, lit->valuestring, 1, t->name);
        else rlc_die("%s: pre_tokenizer Split needs pattern {\"Regex\": ...} or {\"String\": ...}", t->name);
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(n, "behavior");
        const char *bs = cJSON_IsString(b) ? b->valuestring : "";
        if (!strcmp(bs, "Removed")) st->behavior = TOK_SPLIT_REMOVED;
        else if (!strcmp(bs, "Isolated")) st->behavior = TOK_SPLIT_ISOLATED;
        else if (!strcmp(bs, "MergedWithPrevious")) st->behavior = TOK_SPLIT_MERGED_PREV;
        else if (!strcmp(bs, "MergedWithNext")) st->behavior = TOK_SPLIT_MERGED_NEXT;
        else if (!strcmp(bs, "Contiguous")) st->behavior = TOK_SPLIT_CONTIGUOUS;
        else rlc_die("%s: pre_tokenizer Split: unknown behavior '%s'", t->name, bs);
        st->invert = jbool(n, "invert", 0, t->name, "pre_tokenizer Split");
        st->kind = TOK_PRE_SPLIT;
    } else if (!strcmp(ty, "Metaspace")) {
        // SentencePiece's space handling: ' ' -> replacement (U+2581), a prepended replacement by
        // prepend_scheme, and with split=true a new piece at every replacement char
        st->kind = TOK_PRE_METASPACE;
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(n, "replacement");
        size_t rl = cJSON_IsString(r) ? strlen(r->valuestring) : 0, i = 0;
        uint32_t cp;
        if (!rl || rl > 4 || !tok_utf8_next(r->valuestring, rl, &i, &cp) || i != rl)
            rlc_die("%s: pre_tokenizer Metaspace needs \"replacement\": one character", t->name);
        memcpy(st->repl, r->valuestring, rl + 1);
        st->repl_len = (int)rl;
        st->prepend = tok_metaspace_scheme(n, t->name, "pre_tokenizer Metaspace");
        st->split = jbool(n, "split", 1, t->name, "pre_tokenizer Metaspace");
        if (st->split) {
            tok_step_compile_regex(st, st->repl, 1, t->name);
            st->behavior = TOK_SPLIT_MERGED_NEXT;
        }
    } else if (!strcmp(ty, "ByteLevel")) {
        st->kind = TOK_PRE_BYTELEVEL;
        st->add_prefix_space = jbool(n, "add_prefix_space", 1, t->name, "pre_tokenizer ByteLevel");
        st->use_regex = jbool(n, "use_regex", 1, t->name, "pre_tokenizer ByteLevel");
        if (st->use_regex) tok_step_compile_regex(st, GPT2_PATTERN, 0, t->name);
        st->behavior = TOK_SPLIT_ISOLATED;
        t->byte_level = 1;
    } else {
        rlc_die("%s: unsupported pre_tokenizer type '%s' (rlc supports Split, ByteLevel, Metaspace and Sequence)", t->name, ty);
    }
    t->n_steps++;
}

static void load_post(rlc_tokenizer *t, const cJSON *n, int depth) {
    if (!n || cJSON_IsNull(n)) return;
    const char *ty = jtype(n);
    if (!ty) rlc_die("%s: post_processor has no \"type\"", t->name);
    if (!strcmp(ty, "ByteLevel")) return;   // affects offsets only
    if (!strcmp(ty, "Sequence") && depth == 0) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(n, "processors"), *it;
        if (!cJSON_IsArray(arr)) rlc_die("%s: post_processor Sequence needs a \"processors\" list", t->name);
        cJSON_ArrayForEach(it, arr) load_post(t, it, depth + 1);
        return;
    }
    if (!strcmp(ty, "TemplateProcessing")) {
        const cJSON *single = cJSON_GetObjectItemCaseSensitive(n, "single"), *it;
        const cJSON *spt = cJSON_GetObjectItemCaseSensitive(n, "special_tokens");
        if (!cJSON_IsArray(single)) rlc_die("%s: post_processor TemplateProcessing needs a \"single\" list", t->name);
        int seen_seq = 0;
        cJSON_ArrayForEach(it, single) {
            const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
            const cJSON *sq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
            if (sq) {
                if (seen_seq) rlc_die("%s: post_processor TemplateProcessing: more than one sequence in \"single\"", t->name);
                seen_seq = 1;
                continue;
            }
            const cJSON *sid = sp ? cJSON_GetObjectItemCaseSensitive(sp, "id") : NULL;
            if (!cJSON_IsString(sid)) rlc_die("%s: post_processor TemplateProcessing: bad \"single\" item", t->name);
            const cJSON *ent = spt ? cJSON_GetObjectItemCaseSensitive(spt, sid->valuestring) : NULL;
            const cJSON *ids = ent ? cJSON_GetObjectItemCaseSensitive(ent, "ids") : NULL, *x;
            if (!cJSON_IsArray(ids))
                rlc_die("%s: post_processor TemplateProcessing: special token '%s' missing from special_tokens", t->name,
                        sid->valuestring);
            cJSON_ArrayForEach(x, ids) {
                if (!cJSON_IsNumber(x)) rlc_die("%s: post_processor TemplateProcessing: non-integer id", t->name);
                int32_t *arr = seen_seq ? t->post_post : t->post_pre;
                int *cnt = seen_seq ? &t->n_post_post : &t->n_post_pre;
                if (*cnt >= 8) rlc_die("%s: post_processor TemplateProcessing: more than 8 special ids", t->name);
                arr[(*cnt)++] = (int32_t)x->valuedouble;
            }
        }
        return;
    }
    rlc_die("%s: unsupported post_processor type '%s' (rlc supports ByteLevel, TemplateProcessing and Sequence)", t->name, ty);
}

static void load_added(rlc_tokenizer *t, const cJSON *arr) {
    if (!arr || cJSON_IsNull(arr)) return;
    if (!cJSON_IsArray(arr)) rlc_die("%s: added_tokens must be a list", t->name);
    int n = cJSON_GetArraySize(arr), i = 0;
    t->added = rlc_calloc((size_t)n + 1, sizeof(tok_added));
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(c))
            rlc_die("%s: added_tokens[%d] needs an integer \"id\" and a string \"content\"", t->name, i);
        // ids index tables of n_ids = max id + 1 entries: below TOK_MAX_ID, so n_ids fits an int32
        if (!(id->valuedouble >= 0 && id->valuedouble < TOK_MAX_ID) || id->valuedouble != floor(id->valuedouble))
            rlc_die("%s: added_tokens[%d].id = %.17g; expected an integer in [0, %d)", t->name, i, id->valuedouble,
                    TOK_MAX_ID);
        tok_added *a = &t->added[i];
        a->id = (int32_t)id->valuedouble;
        a->content = rlc_strdup(c->valuestring);
        a->len = strlen(a->content);
        if (!a->len) rlc_die("%s: added_tokens[%d] has empty content", t->name, i);
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%d]", i);
        a->special = jbool(it, "special", 0, t->name, where);
        a->single_word = jbool(it, "single_word", 0, t->name, where);
        a->lstrip = jbool(it, "lstrip", 0, t->name, where);
        a->rstrip = jbool(it, "rstrip", 0, t->name, where);
        a->normalized = jbool(it, "normalized", !a->special, t->name, where);
        if (a->id + 1 > t->n_ids) t->n_ids = a->id + 1;
        i++;
    }
    t->n_added = i;
}

void tok_load_json(rlc_tokenizer *t, const char *json, size_t len) {
    // bytes first (UTF-8 keys, no NUL or \u0000, no raw control bytes), as every JSON reader checks them
    char err[1024];
    if (rlc_json_check_text(json, len, t->name, err, sizeof err) != 0) rlc_die("%s", err);
    scan s = {json, json + len, t->name};
    const char *p = ws(&s, json);
    if (p >= s.end || at(&s, p) != '{') scan_die(&s, p, "expected a JSON object");
    // One pass over the top level and the model object: vocab and merges are parsed where they are
    // found (merges after the vocab; if they come first they are parsed once the vocab is in).
    const char *vs = NULL, *ve = NULL, *gs = NULL, *ge = NULL, *pending_merges = NULL;
    rlc_strbuf k = {0};
    int have_model = 0;
    p = ws(&s, p + 1);
    while (p < s.end && at(&s, p) != '}') {
        p = scan_str(&s, p, &k);
        p = ws(&s, p);
        if (p >= s.end || at(&s, p) != ':') scan_die(&s, p, "expected ':'");
        p = ws(&s, p + 1);
        if (!strcmp(k.s, "model") && p < s.end && at(&s, p) == '{' && !have_model) {
            have_model = 1;
            p = ws(&s, p + 1);
            while (p < s.end && at(&s, p) != '}') {
                p = scan_str(&s, p, &k);
                p = ws(&s, p);
                if (p >= s.end || at(&s, p) != ':') scan_die(&s, p, "expected ':'");
                p = ws(&s, p + 1);
                const char *e;
                if (!strcmp(k.s, "vocab") && !vs) {
                    e = parse_vocab(t, &s, p, (size_t)(s.end - p));
                    vs = p; ve = e;
                    if (pending_merges) parse_merges(t, &s, pending_merges);
                } else if (!strcmp(k.s, "merges") && !gs) {
                    if (vs) e = parse_merges(t, &s, p);
                    else { pending_merges = p; e = scan_value(&s, p, 1); }
                    gs = p; ge = e;
                } else if (!strcmp(k.s, "type") && at(&s, p) == '"') {
                    rlc_strbuf ty = {0};
                    e = scan_str(&s, p, &ty);
                    if (strcmp(ty.s, "BPE")) rlc_die("%s: unsupported model type '%s' (rlc supports BPE)", t->name, ty.s);
                    rlc_sb_free(&ty);
                } else {
                    e = scan_value(&s, p, 1);
                }
                p = ws(&s, e);
                if (p < s.end && at(&s, p) == ',') p = ws(&s, p + 1);
                else if (p >= s.end || at(&s, p) != '}') scan_die(&s, p, "expected ',' or '}'");
            }
            if (p >= s.end) scan_die(&s, p, "unterminated model object");
            p = ws(&s, p + 1);
        } else {
            p = ws(&s, scan_value(&s, p, 1));
        }
        if (p < s.end && at(&s, p) == ',') p = ws(&s, p + 1);
        else if (p >= s.end || at(&s, p) != '}') scan_die(&s, p, "expected ',' or '}'");
    }
    rlc_sb_free(&k);
    if (p >= s.end) scan_die(&s, p, "unterminated object (expected '}')");
    if (ws(&s, p + 1) < s.end) scan_die(&s, ws(&s, p + 1), "text after the JSON object");
    if (!have_model) rlc_die("%s: no \"model\" object", t->name);
    if (!vs) rlc_die("%s: model has no \"vocab\"", t->name);
    // everything but vocab and merges goes to cJSON: a copy with those two spans replaced by {} / []
    rlc_strbuf rb = {0};
    const char *cut[2][2] = {{vs, ve}, {gs, ge}};
    if (gs && gs < vs) { cut[0][0] = gs; cut[0][1] = ge; cut[1][0] = vs; cut[1][1] = ve; }
    const char *q = json;
    for (int i = 0; i < 2; i++) {
        if (!cut[i][0]) continue;
        rlc_sb_append(&rb, q, (size_t)(cut[i][0] - q));
        rlc_sb_puts(&rb, *cut[i][0] == '{' ? "{}" : "[]");
        q = cut[i][1];
    }
    rlc_sb_append(&rb, q, (size_t)(json + len - q));
    char *rest = rb.s;
    len = rb.n;
    cJSON *root = rlc_json_parse(rest, len, t->name);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char *mty = jtype(model);
    if (mty && strcmp(mty, "BPE"))
        rlc_die("%s: unsupported model type '%s' (rlc supports BPE)", t->name, mty);
    if (!mty && !gs) rlc_die("%s: model has no \"type\" and no \"merges\"; only BPE is supported", t->name);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (x && !cJSON_IsNull(x) && !(cJSON_IsNumber(x) && x->valuedouble == 0))
        rlc_die("%s: model.dropout is not supported (BPE dropout makes encoding random)", t->name);
    t->byte_fallback = jbool(model, "byte_fallback", 0, t->name, "model");
    x = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix");
    if (x && !cJSON_IsNull(x) && !(cJSON_IsString(x) && !x->valuestring[0]))
        rlc_die("%s: model.continuing_subword_prefix is not supported", t->name);
    x = cJSON_GetObjectItemCaseSensitive(model, "end_of_word_suffix");
    if (x && !cJSON_IsNull(x) && !(cJSON_IsString(x) && !x->valuestring[0]))
        rlc_die("%s: model.end_of_word_suffix is not supported", t->name);
    t->ignore_merges = jbool(model, "ignore_merges", 0, t->name, "model");
    t->fuse_unk = jbool(model, "fuse_unk", 0, t->name, "model");

    if (!gs) merges_alloc(t, 64);
    t->unk_id = -1;
    x = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    if (cJSON_IsString(x)) {
        t->unk_id = tok_strmap_get(&t->vocab, x->valuestring, strlen(x->valuestring));
        if (t->unk_id < 0) rlc_die("%s: model.unk_token '%s' is not in the vocab", t->name, x->valuestring);
    }
    load_added(t, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"));
    tok_load_normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), 0);
    load_pretok(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), 0);
    load_post(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), 0);
    tok_load_decoder(t, cJSON_GetObjectItemCaseSensitive(root, "decoder"));
    cJSON_Delete(root);
    free(rest);
}
