// strbuf.h: a growable byte string (always NUL-terminated) and a growable int32 vector.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *s;        // (n + 1) bytes, s[n] == 0; NULL until the first append
    size_t n, cap;
} rlc_strbuf;

void rlc_sb_reserve(rlc_strbuf *b, size_t extra);           // room for `extra` more bytes
void rlc_sb_append(rlc_strbuf *b, const void *p, size_t n);
void rlc_sb_puts(rlc_strbuf *b, const char *s);
void rlc_sb_putc(rlc_strbuf *b, char c);
void rlc_sb_printf(rlc_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Append s as a JSON string literal (quotes included; control chars, '"' and '\' escaped; UTF-8 kept).
void rlc_sb_json_str(rlc_strbuf *b, const char *s, size_t n);
void rlc_sb_clear(rlc_strbuf *b);                            // n = 0, keeps the memory
char *rlc_sb_take(rlc_strbuf *b);                            // returns the malloc'd string (never NULL); b is reset
void rlc_sb_free(rlc_strbuf *b);

typedef struct {
    int32_t *v;     // (n)
    int64_t n, cap;
} rlc_ivec;

void rlc_iv_push(rlc_ivec *a, int32_t x);
void rlc_iv_append(rlc_ivec *a, const int32_t *x, int64_t n);
void rlc_iv_free(rlc_ivec *a);
