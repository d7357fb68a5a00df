// strbuf.c: growable strings and int vectors.
#include "core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"

void rlc_sb_reserve(rlc_strbuf *b, size_t extra) {
    if (b->s && b->n + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + extra + 1) cap *= 2;
    b->s = rlc_realloc(b->s, cap);
    b->cap = cap;
    b->s[b->n] = 0;
}
void rlc_sb_append(rlc_strbuf *b, const void *p, size_t n) {
    rlc_sb_reserve(b, n);
    if (n) memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
}
void rlc_sb_puts(rlc_strbuf *b, const char *s) { rlc_sb_append(b, s, strlen(s)); }
void rlc_sb_putc(rlc_strbuf *b, char c) {
    rlc_sb_reserve(b, 1);
    b->s[b->n++] = c;
    b->s[b->n] = 0;
}
void rlc_sb_printf(rlc_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    CHECK(k >= 0, "vsnprintf failed for format '%s'", fmt);
    rlc_sb_reserve(b, (size_t)k);
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}
void rlc_sb_json_str(rlc_strbuf *b, const char *s, size_t n) {
    rlc_sb_reserve(b, n + 2);
    rlc_sb_putc(b, '"');
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && (unsigned char)s[j] >= 0x20 && s[j] != '"' && s[j] != '\\') j++;
        rlc_sb_append(b, s + i, j - i);
        if (j >= n) break;
        unsigned char c = (unsigned char)s[j];
        switch (c) {
        case '"': rlc_sb_puts(b, "\\\""); break;
        case '\\': rlc_sb_puts(b, "\\\\"); break;
        case '\n': rlc_sb_puts(b, "\\n"); break;
        case '\r': rlc_sb_puts(b, "\\r"); break;
        case '\t': rlc_sb_puts(b, "\\t"); break;
        case '\b': rlc_sb_puts(b, "\\b"); break;
        case '\f': rlc_sb_puts(b, "\\f"); break;
        default: rlc_sb_printf(b, "\\u%04x", c); break;
        }
        i = j + 1;
    }
    rlc_sb_putc(b, '"');
}
void rlc_sb_clear(rlc_strbuf *b) {
    b->n = 0;
    if (b->s) b->s[0] = 0;
}
char *rlc_sb_take(rlc_strbuf *b) {
    if (!b->s) rlc_sb_reserve(b, 0);
    char *s = b->s;
    b->s = NULL;
    b->n = b->cap = 0;
    return s;
}
void rlc_sb_free(rlc_strbuf *b) {
    free(b->s);
    b->s = NULL;
    b->n = b->cap = 0;
}

void rlc_iv_push(rlc_ivec *a, int32_t x) {
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 16;
        a->v = rlc_realloc(a->v, (size_t)a->cap * sizeof(int32_t));
    }
    a->v[a->n++] = x;
}
void rlc_iv_append(rlc_ivec *a, const int32_t *x, int64_t n) {
    if (a->n + n > a->cap) {
        int64_t cap = a->cap ? a->cap : 16;
        while (cap < a->n + n) cap *= 2;
        a->v = rlc_realloc(a->v, (size_t)cap * sizeof(int32_t));
        a->cap = cap;
    }
    if (n) memcpy(a->v + a->n, x, (size_t)n * sizeof(int32_t));
    a->n += n;
}
void rlc_iv_free(rlc_ivec *a) {
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}
