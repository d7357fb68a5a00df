// tok_decode.c: the decoder chain (HF tokenizers/src/decoders: Replace, ByteFallback, Fuse, Strip,
// Metaspace, ByteLevel, Sequence) run as a stream, so that streaming decode and whole decode are the
// same code: rlc_tok_decode pushes every id and finishes.
//
// HF runs the chain over the list of token strings. Here tokens go through the steps one at a time:
//   - steps before any Fuse see whole tokens;
//   - Fuse joins everything into one token, so the steps after it see pieces of that one token and
//     hold back what a later piece could still change (a partial Replace pattern, trailing Strip chars);
//   - ByteFallback holds a run of <0xNN> tokens until a non-byte token (or the end) closes it: the run
//     becomes its UTF-8 text, or one U+FFFD per byte when it is not valid UTF-8 as a whole (decoders/
//     byte_fallback.rs);
//   - the end of the chain: with no decoder the tokens are joined with " " (HF's default), then bytes
//     that are not valid UTF-8 (only ByteLevel makes them) become U+FFFD per maximal subpart (Rust's
//     from_utf8_lossy; an incomplete sequence waits for the next token), then transformers'
//     clean_up_tokenization when tokenizer_config.json asks for it (a tail that the next token could
//     change is held back).
// Leading steps that are per-token and stateless (Replace, Strip, ByteLevel before any ByteFallback,
// Metaspace or Fuse) are applied once per vocab entry at load (the dec table).
#include <cjson/cJSON.h>
#include <string.h>
#include <utf8proc.h>

#include "core/common.h"
#include "tokenizer/tok_internal.h"

// ---------------------------------------------------------------------------------------------
// load

static int one_char(const char *s, char *dst5, int *len) {
    size_t n = strlen(s), i = 0;
    uint32_t cp;
    if (!n || !tok_utf8_next(s, n, &i, &cp) || i != n) return 0;
    memcpy(dst5, s, n);
    dst5[n] = 0;
    *len = (int)n;
    return 1;
}

static int dec_int(const cJSON *o, const char *k, const char *name, const char *where) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e6 || v->valuedouble != (double)(int)v->valuedouble)
        rlc_die("%s: %s needs a non-negative integer \"%s\"", name, where, k);
    return (int)v->valuedouble;
}

// Metaspace's prepend_scheme as HF deserializes it (pre-tokenizer and decoder alike): default "always";
// the older add_prefix_space key must agree with it.
int tok_metaspace_scheme(const cJSON *n, const char *name, const char *where) {
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(n, "prepend_scheme");
    const cJSON *aps = cJSON_GetObjectItemCaseSensitive(n, "add_prefix_space");
    int scheme = TOK_PREPEND_ALWAYS;
    if (ps && !cJSON_IsNull(ps)) {
        const char *s = cJSON_IsString(ps) ? ps->valuestring : "";
        if (!strcmp(s, "first")) scheme = TOK_PREPEND_FIRST;
        else if (!strcmp(s, "always")) scheme = TOK_PREPEND_ALWAYS;
        else if (!strcmp(s, "never")) scheme = TOK_PREPEND_NEVER;
        else rlc_die("%s: %s.prepend_scheme must be \"first\", \"always\" or \"never\"", name, where);
    }
    if (aps && !cJSON_IsNull(aps)) {
        if (!cJSON_IsBool(aps)) rlc_die("%s: %s.add_prefix_space must be true or false", name, where);
        if (cJSON_IsTrue(aps) != (scheme != TOK_PREPEND_NEVER))
            rlc_die("%s: %s: add_prefix_space does not match prepend_scheme", name, where);
    }
    return scheme;
}

static void load_step(rlc_tokenizer *t, const cJSON *n, int depth, int *fused, int *n_bf) {
    const cJSON *tyj = cJSON_GetObjectItemCaseSensitive(n, "type");
    const char *ty = cJSON_IsString(tyj) ? tyj->valuestring : NULL;
    if (!ty) rlc_die("%s: decoder has no \"type\"", t->name);
    if (!strcmp(ty, "Sequence") && depth == 0) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(n, "decoders"), *it;
        if (!cJSON_IsArray(arr)) rlc_die("%s: decoder Sequence needs a \"decoders\" list", t->name);
        cJSON_ArrayForEach(it, arr) load_step(t, it, depth + 1, fused, n_bf);
        return;
    }
    if (t->n_dsteps >= 8) rlc_die("%s: more than 8 decoder steps", t->name);
    if (t->n_dsteps > 0 && t->dsteps[t->n_dsteps - 1].kind == TOK_DEC_BYTELEVEL)
        rlc_die("%s: decoder '%s' after ByteLevel is not supported (ByteLevel must be the last decoder)", t->name, ty);
    tok_dec_step *st = &t->dsteps[t->n_dsteps];
    memset(st, 0, sizeof *st);
    st->fused = *fused;
    if (!strcmp(ty, "Replace")) {
        st->kind = TOK_DEC_REPLACE;
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern");
        const cJSON *lit = pat ? cJSON_GetObjectItemCaseSensitive(pat, "String") : NULL;
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(n, "content");
        if (pat && cJSON_GetObjectItemCaseSensitive(pat, "Regex"))
            rlc_die("%s: decoder Replace with a Regex pattern is not supported (only String patterns)", t->name);
        if (!cJSON_IsString(lit) || !lit->valuestring[0] || !cJSON_IsString(c))
            rlc_die("%s: decoder Replace needs \"pattern\": {\"String\": non-empty} and a string \"content\"", t->name);
        st->pat = rlc_strdup(lit->valuestring);
        st->pat_len = strlen(st->pat);
        st->content = rlc_strdup(c->valuestring);
        st->content_len = strlen(st->content);
    } else if (!strcmp(ty, "ByteFallback")) {
        if (*fused) rlc_die("%s: decoder ByteFallback after Fuse is not supported", t->name);
        if (++*n_bf > 1) rlc_die("%s: more than one ByteFallback decoder is not supported", t->name);
        st->kind = TOK_DEC_BYTEFALLBACK;
    } else if (!strcmp(ty, "Fuse")) {
        st->kind = TOK_DEC_FUSE;
        *fused = 1;
    } else if (!strcmp(ty, "Strip")) {
        st->kind = TOK_DEC_STRIP;
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(n, "content");
        if (!cJSON_IsString(c) || !one_char(c->valuestring, st->strip, &st->strip_len))
            rlc_die("%s: decoder Strip needs \"content\": one character", t->name);
        st->start = dec_int(n, "start", t->name, "decoder Strip");
        st->stop = dec_int(n, "stop", t->name, "decoder Strip");
    } else if (!strcmp(ty, "Metaspace")) {
        st->kind = TOK_DEC_METASPACE;
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(n, "replacement");
        char rep[5];
        int rl;
        if (!cJSON_IsString(r) || !one_char(r->valuestring, rep, &rl))
            rlc_die("%s: decoder Metaspace needs \"replacement\": one character", t->name);
        st->pat = rlc_strdup(rep);
        st->pat_len = (size_t)rl;
        st->prepend_never = tok_metaspace_scheme(n, t->name, "decoder Metaspace") == TOK_PREPEND_NEVER;
    } else if (!strcmp(ty, "ByteLevel")) {
        if (*fused) rlc_die("%s: decoder ByteLevel after Fuse is not supported", t->name);
        st->kind = TOK_DEC_BYTELEVEL;
    } else {
        rlc_die("%s: unsupported decoder type '%s' (rlc supports ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace "
                "and Sequence)", t->name, ty);
    }
    t->n_dsteps++;
}

void tok_load_decoder(rlc_tokenizer *t, const cJSON *n) {
    t->n_dsteps = 0;
    t->dec_none = !n || cJSON_IsNull(n);
    if (t->dec_none) return;
    int fused = 0, n_bf = 0;
    load_step(t, n, 0, &fused, &n_bf);
    t->dec_pre = 0;
    while (t->dec_pre < t->n_dsteps) {
        int k = t->dsteps[t->dec_pre].kind;
        if (k != TOK_DEC_REPLACE && k != TOK_DEC_STRIP && k != TOK_DEC_BYTELEVEL) break;
        t->dec_pre++;
    }
}

void tok_dec_free(rlc_tokenizer *t) {
    for (int i = 0; i < t->n_dsteps; i++) {
        free(t->dsteps[i].pat);
        free(t->dsteps[i].content);
    }
    t->n_dsteps = 0;
}

// ---------------------------------------------------------------------------------------------
// per-token steps

static void replace_all(const char *p, size_t n, const char *pat, size_t pl, const char *c, size_t cl, rlc_strbuf *out) {
    size_t i = 0;
    while (i < n) {
        const char *q = memchr(p + i, pat[0], n - i);   // memchr first: most tokens have no match
        if (q && pl > 1) q = (size_t)(p + n - q) >= pl ? memmem(q, (size_t)(p + n - q), pat, pl) : NULL;
        if (!q) break;
        rlc_sb_append(out, p + i, (size_t)(q - (p + i)));
        rlc_sb_append(out, c, cl);
        i = (size_t)(q - p) + pl;
    }
    rlc_sb_append(out, p + i, n - i);
}

// decoders/strip.rs on one whole token: up to `start` leading and `stop` trailing content chars.
static void strip_token(const tok_dec_step *st, const char *p, size_t n, rlc_strbuf *out) {
    size_t s = 0, e = n, cl = (size_t)st->strip_len;
    for (int i = 0; i < st->start && n - s >= cl && !memcmp(p + s, st->strip, cl); i++) s += cl;
    for (int i = 0; i < st->stop && e - s >= cl && !memcmp(p + e - cl, st->strip, cl); i++) e -= cl;
    rlc_sb_append(out, p + s, e - s);
}

// decoders ByteLevel on one token: each char back to its byte; a token with a char outside the
// table is kept as its UTF-8 (byte_level.rs decode_chain).
static void bytelevel_token(const rlc_tokenizer *t, const char *p, size_t n, rlc_strbuf *out) {
    size_t start = out->n, i = 0;
    while (i < n) {
        uint32_t cp;
        if (!tok_utf8_next(p, n, &i, &cp) || cp >= 512 || t->char_byte[cp] < 0) {
            out->n = start;
            rlc_sb_append(out, p, n);
            return;
        }
        rlc_sb_putc(out, (char)t->char_byte[cp]);
    }
}

// Metaspace decoder on one token: the replacement char becomes ' ', or nothing in the first token
// unless prepend_scheme is never (decoders on token 0 drop every replacement char, as HF does).
static void metaspace_token(const tok_dec_step *st, int first, const char *p, size_t n, rlc_strbuf *out) {
    if (first && !st->prepend_never) replace_all(p, n, st->pat, st->pat_len, "", 0, out);
    else replace_all(p, n, st->pat, st->pat_len, " ", 1, out);
}

void tok_dec_table(rlc_tokenizer *t) {
    rlc_strbuf d = {0}, a = {0}, b = {0};
    t->dec_off = rlc_calloc((size_t)t->n_ids + 1, sizeof(uint32_t));
    t->dec_len = rlc_calloc((size_t)t->n_ids + 1, sizeof(uint32_t));
    for (int64_t id = 0; id < t->n_ids; id++) {
        const char *s = t->id_tok[id];
        if (!s) continue;
        rlc_sb_clear(&a);
        rlc_sb_append(&a, s, strlen(s));
        for (int k = 0; k < t->dec_pre; k++) {
            const tok_dec_step *st = &t->dsteps[k];
            rlc_sb_clear(&b);
            if (st->kind == TOK_DEC_REPLACE) replace_all(a.s, a.n, st->pat, st->pat_len, st->content, st->content_len, &b);
            else if (st->kind == TOK_DEC_STRIP) strip_token(st, a.s, a.n, &b);
            else bytelevel_token(t, a.s, a.n, &b);
            rlc_sb_reserve(&b, 0);
            rlc_strbuf tmp = a;
            a = b;
            b = tmp;
        }
        CHECK(d.n + a.n < UINT32_MAX, "decode table over 4 GiB");
        t->dec_off[id] = (uint32_t)d.n;
        t->dec_len[id] = (uint32_t)a.n;
        rlc_sb_append(&d, a.s, a.n);
    }
    t->dec_n = d.n;
    t->dec_bytes = rlc_sb_take(&d);
    rlc_sb_free(&a);
    rlc_sb_free(&b);
}

// ---------------------------------------------------------------------------------------------
// the stream

// UTF-8 validation as Rust's from_utf8_lossy, across pieces. Returns through dst.
static void utf8_feed(rlc_tok_stream *s, const char *p, size_t n, rlc_strbuf *dst) {
    size_t i = 0;
    // complete a pending sequence first, byte by byte
    while (s->npend > 0 && i < n) {
        s->pend[s->npend++] = (unsigned char)p[i++];
        size_t j = 0;
        uint32_t cp;
        int r = tok_utf8_step(s->pend, (size_t)s->npend, &j, &cp);
        if (r == 1) rlc_sb_append(dst, s->pend, j);
        else if (r == 0) rlc_sb_append(dst, "\xEF\xBF\xBD", 3);
        else continue;   // still incomplete
        i -= (size_t)s->npend - j;   // bytes after the decoded / rejected prefix go back into the input
        s->npend = 0;
    }
    size_t run = i;
    while (i < n) {
        if ((unsigned char)p[i] < 0x80) { i++; continue; }
        size_t k = i;
        uint32_t cp;
        int r = tok_utf8_step((const unsigned char *)p, n, &i, &cp);
        if (r == 1) continue;
        rlc_sb_append(dst, p + run, k - run);
        if (r == 0) {
            rlc_sb_append(dst, "\xEF\xBF\xBD", 3);
            run = i;
        } else {   // cut off by the end of this piece: keep it for the next one
            memcpy(s->pend, p + k, n - k);
            s->npend = (int)(n - k);
            run = i = n;
        }
    }
    if (run < n) rlc_sb_append(dst, p + run, n - run);
}

// transformers' clean_up_tokenization: each replacement in turn over the whole string.
static void clean_up(rlc_strbuf *b, size_t start) {
    static const char *pat[][2] = {{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
                                   {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t k = 0; k < sizeof pat / sizeof pat[0]; k++) {
        const char *from = pat[k][0], *to = pat[k][1];
        size_t fl = strlen(from), tl = strlen(to), r = start, w = start;
        while (r < b->n) {
            if (r + fl <= b->n && !memcmp(b->s + r, from, fl)) {
                memmove(b->s + w, to, tl);
                w += tl;
                r += fl;
            } else {
                b->s[w++] = b->s[r++];
            }
        }
        b->n = w;
        b->s[w] = 0;
    }
}

// The end of the chain. Every pattern of clean_up starts with ' ' and is at most 4 bytes, and the
// replacements only delete spaces, so a prefix whose last 3 bytes hold no space cleans the same alone
// as followed by any text: that prefix is committed, the rest waits.
static void sink(rlc_tok_stream *s, const char *p, size_t n, int new_tok, rlc_strbuf *out) {
    const rlc_tokenizer *t = s->t;
    rlc_strbuf *dst = t->sp.clean_up_spaces ? &s->clean : out;
    if (t->dec_none && new_tok) {
        if (s->n_tokens > 0) utf8_feed(s, " ", 1, dst);
        s->n_tokens++;
    }
    utf8_feed(s, p, n, dst);
    if (!t->sp.clean_up_spaces) return;
    size_t c = s->clean.n;
    for (;;) {
        size_t lo = c >= 3 ? c - 3 : 0, j = lo;
        while (j < c && s->clean.s[j] != ' ') j++;
        if (j == c) break;
        c = j;
    }
    if (!c) return;
    size_t start = out->n;
    rlc_sb_append(out, s->clean.s, c);
    clean_up(out, start);
    memmove(s->clean.s, s->clean.s + c, s->clean.n - c);
    s->clean.n -= c;
    s->clean.s[s->clean.n] = 0;
}

static void emit(rlc_tok_stream *s, int k, const char *p, size_t n, int new_tok, rlc_strbuf *out);

// Closes a ByteFallback run: its UTF-8 text as one token, or one U+FFFD token per byte.
static void flush_bytes(rlc_tok_stream *s, int k, rlc_strbuf *out) {
    if (!s->bytes.n) return;
    rlc_strbuf run = s->bytes;
    memset(&s->bytes, 0, sizeof s->bytes);
    size_t i = 0;
    int valid = 1;
    while (i < run.n) {
        uint32_t cp;
        if (tok_utf8_step((const unsigned char *)run.s, run.n, &i, &cp) != 1) { valid = 0; break; }
    }
    if (valid) emit(s, k + 1, run.s, run.n, 1, out);
    else
        for (size_t b = 0; b < run.n; b++) emit(s, k + 1, "\xEF\xBF\xBD", 3, 1, out);
    rlc_sb_free(&run);
}

// "<0xNN>" -> the byte (decoders/byte_fallback.rs: 6 bytes, "<0x", two chars u8::from_str_radix takes, ">").
static int byte_token(const char *p, size_t n) {
    if (n != 6 || memcmp(p, "<0x", 3) || p[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) {
            if (i == 3 && c == '+') continue;   // Rust's from_str_radix accepts a leading '+'
            return -1;
        }
        v = v * 16 + d;
    }
    return v;
}

static void emit(rlc_tok_stream *s, int k, const char *p, size_t n, int new_tok, rlc_strbuf *out) {
    const rlc_tokenizer *t = s->t;
    if (k == t->n_dsteps) { sink(s, p, n, new_tok, out); return; }
    const tok_dec_step *st = &t->dsteps[k];
    rlc_strbuf b = {0};
    switch (st->kind) {
    case TOK_DEC_REPLACE:
        if (!st->fused) {
            replace_all(p, n, st->pat, st->pat_len, st->content, st->content_len, &b);
            emit(s, k + 1, b.s ? b.s : "", b.n, new_tok, out);
        } else {
            // Occurrences complete in the text so far are the ones the whole text has (an earlier,
            // still incomplete one would overlap them); a tail that may start one is held back.
            rlc_strbuf *h = &s->hold[k];
            rlc_sb_append(h, p, n);
            size_t i = 0;
            for (;;) {
                const char *q = h->n - i >= st->pat_len ? memmem(h->s + i, h->n - i, st->pat, st->pat_len) : NULL;
                if (!q) break;
                rlc_sb_append(&b, h->s + i, (size_t)(q - (h->s + i)));
                rlc_sb_append(&b, st->content, st->content_len);
                i = (size_t)(q - h->s) + st->pat_len;
            }
            size_t keep = st->pat_len - 1 < h->n - i ? st->pat_len - 1 : h->n - i;
            while (keep > 0 && memcmp(h->s + h->n - keep, st->pat, keep)) keep--;
            rlc_sb_append(&b, h->s + i, h->n - keep - i);
            memmove(h->s, h->s + h->n - keep, keep);
            h->n = keep;
            if (b.n) emit(s, k + 1, b.s, b.n, new_tok, out);
        }
        break;
    case TOK_DEC_BYTEFALLBACK: {
        int v = byte_token(p, n);
        if (v >= 0) { rlc_sb_putc(&s->bytes, (char)v); break; }
        flush_bytes(s, k, out);
        emit(s, k + 1, p, n, 1, out);
        break;
    }
    case TOK_DEC_FUSE:
        emit(s, k + 1, p, n, s->step_tokens[k]++ == 0, out);
        break;
    case TOK_DEC_STRIP:
        if (!st->fused) {
            strip_token(st, p, n, &b);
            emit(s, k + 1, b.s ? b.s : "", b.n, new_tok, out);
        } else {
            size_t cl = (size_t)st->strip_len, i = 0;
            while (s->strip_left[k] >= 0 && s->strip_left[k] < st->start && n - i >= cl && !memcmp(p + i, st->strip, cl)) {
                i += cl;
                s->strip_left[k]++;
            }
            if (i < n) s->strip_left[k] = -1;   // a non-content char: the start is done
            if (!st->stop) {
                if (i < n) emit(s, k + 1, p + i, n - i, new_tok, out);
                break;
            }
            // trailing content chars (at most `stop`) wait: the end of the text may strip them
            rlc_strbuf *h = &s->hold[k];
            rlc_sb_append(h, p + i, n - i);
            size_t e = h->n;
            for (int j = 0; j < st->stop && e >= cl && !memcmp(h->s + e - cl, st->strip, cl); j++) e -= cl;
            if (e) {
                emit(s, k + 1, h->s, e, new_tok, out);
                memmove(h->s, h->s + e, h->n - e);
                h->n -= e;
            }
        }
        break;
    case TOK_DEC_METASPACE: {
        int first = st->fused ? 1 : s->step_tokens[k]++ == 0;
        metaspace_token(st, first, p, n, &b);
        emit(s, k + 1, b.s ? b.s : "", b.n, new_tok, out);
        break;
    }
    case TOK_DEC_BYTELEVEL:
        bytelevel_token(t, p, n, &b);
        emit(s, k + 1, b.s ? b.s : "", b.n, new_tok, out);
        break;
    }
    rlc_sb_free(&b);
}

void rlc_tok_stream_init(rlc_tok_stream *s, int skip_special) {
    memset(s, 0, sizeof *s);
    s->skip_special = skip_special;
}

size_t rlc_tok_stream_push(rlc_tok_stream *s, const rlc_tokenizer *t, int32_t id, rlc_strbuf *out) {
    s->t = t;
    if (id < 0 || id >= t->n_ids || !t->id_tok[id]) return 0;
    if (s->skip_special && t->is_special[id]) return 0;
    size_t before = out->n;
    emit(s, t->dec_pre, t->dec_bytes + t->dec_off[id], t->dec_len[id], 1, out);
    rlc_sb_reserve(out, 0);
    return out->n - before;
}

size_t rlc_tok_stream_finish(rlc_tok_stream *s, rlc_strbuf *out) {
    size_t before = out->n;
    const rlc_tokenizer *t = s->t;
    if (t) {
        // close the steps in order, so that what one releases passes through the later ones
        for (int k = 0; k < t->n_dsteps; k++) {
            const tok_dec_step *st = &t->dsteps[k];
            if (st->kind == TOK_DEC_BYTEFALLBACK) flush_bytes(s, k, out);
            else if (st->kind == TOK_DEC_REPLACE && st->fused && s->hold[k].n) {
                rlc_strbuf h = s->hold[k];
                memset(&s->hold[k], 0, sizeof h);
                emit(s, k + 1, h.s, h.n, 0, out);
                rlc_sb_free(&h);
            } else if (st->kind == TOK_DEC_STRIP && st->fused) {
                s->hold[k].n = 0;   // the trailing content chars that the end strips
            }
        }
        if (s->npend) {
            s->npend = 0;
            rlc_strbuf *dst = t->sp.clean_up_spaces ? &s->clean : out;
            rlc_sb_append(dst, "\xEF\xBF\xBD", 3);
        }
        if (s->clean.n) {
            size_t start = out->n;
            rlc_sb_append(out, s->clean.s, s->clean.n);
            clean_up(out, start);
        }
    }
    rlc_sb_free(&s->bytes);
    rlc_sb_free(&s->clean);
    for (int k = 0; k < 8; k++) rlc_sb_free(&s->hold[k]);
    rlc_sb_reserve(out, 0);
    size_t n = out->n - before;
    int skip = s->skip_special;
    rlc_tok_stream_init(s, skip);
    return n;
}

void rlc_tok_decode(const rlc_tokenizer *t, const int32_t *ids, int64_t n, int skip_special, rlc_strbuf *out) {
    rlc_tok_stream s;
    rlc_tok_stream_init(&s, skip_special);
    s.t = t;
    for (int64_t i = 0; i < n; i++) rlc_tok_stream_push(&s, t, ids[i], out);
    rlc_tok_stream_finish(&s, out);
}

char *rlc_tok_decode_str(const rlc_tokenizer *t, const int32_t *ids, int64_t n, int skip_special) {
    rlc_strbuf b = {0};
    rlc_tok_decode(t, ids, n, skip_special, &b);
    return rlc_sb_take(&b);
}
