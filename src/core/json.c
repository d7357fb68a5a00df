// json.c: strict JSON input (see json.h).
#include "core/json.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"

// line and column (1-based, in bytes) of text[off]
static void line_col(const char *text, size_t off, size_t *line, size_t *col) {
    size_t l = 1, c = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') { l++; c = 1; }
        else c++;
    }
    *line = l;
    *col = c;
}

static int fail_at(const char *text, size_t off, const char *path, char *err, size_t errlen, const char *why) {
    size_t l, c;
    line_col(text, off, &l, &c);
    snprintf(err, errlen, "%s:%zu:%zu: %s", path, l, c, why);
    return -1;
}

// Length of the UTF-8 sequence at s[i] (1..4), or 0 when it is not a valid, shortest-form scalar value.
static int utf8_len(const unsigned char *s, size_t n, size_t i) {
    const unsigned c = s[i];
    int len;
    uint32_t cp;
    if (c < 0x80) return 1;
    if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; }
    else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; }
    else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; }
    else return 0;
    if (i + (size_t)len > n) return 0;
    for (int k = 1; k < len; k++) {
        if ((s[i + k] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

const char *rlc_json_text_problem(const char *text, size_t len, size_t *off) {
    const unsigned char *s = (const unsigned char *)text;
    int in_str = 0;
    size_t i = 0;
    while (i < len) {
        const unsigned c = s[i];
        *off = i;
        if (c == 0) return "NUL byte in JSON text";
        if (c >= 0x80) {
            const int k = utf8_len(s, len, i);
            if (!k) return "invalid UTF-8 (JSON text must be UTF-8)";
            i += (size_t)k;
            continue;
        }
        if (!in_str) {
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') return "control byte outside a string";
            if (c == '"') in_str = 1;
            i++;
            continue;
        }
        if (c < 0x20) return "raw control byte in a string (JSON needs an escape such as \\n)";
        if (c == '"') in_str = 0;
        else if (c == '\\') {
            if (i + 6 <= len && s[i + 1] == 'u' && !memcmp(text + i + 2, "0000", 4)) return "\\u0000 (NUL) in a string";
            if (i + 1 < len && s[i + 1] != 0) {   // skip the escaped character (a NUL is caught above)
                i += 2;
                continue;
            }
        }
        i++;
    }
    return NULL;
}

int rlc_json_check_text(const char *text, size_t len, const char *path, char *err, size_t errlen) {
    size_t off = 0;
    const char *why = rlc_json_text_problem(text, len, &off);
    return why ? fail_at(text, off, path, err, errlen, why) : 0;
}

cJSON *rlc_json_parse_err(const char *text, size_t len, const char *path, char *err, size_t errlen) {
    if (rlc_json_check_text(text, len, path, err, errlen) != 0) return NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        const char *e = cJSON_GetErrorPtr();
        size_t off = e && e >= text && e <= text + len ? (size_t)(e - text) : 0;
        fail_at(text, off, path, err, errlen, len == 0 ? "empty file; expected a JSON value" : "invalid JSON");
        return NULL;
    }
    size_t off = (size_t)(end - text);
    while (off < len && (text[off] == ' ' || text[off] == '\t' || text[off] == '\n' || text[off] == '\r')) off++;
    if (off < len) {
        cJSON_Delete(root);
        fail_at(text, off, path, err, errlen, "text after the JSON value");
        return NULL;
    }
    rlc_json_mark_floats(root, text, len);
    return root;
}

cJSON *rlc_json_parse(const char *text, size_t len, const char *path) {
    char err[1024];
    cJSON *root = rlc_json_parse_err(text, len, path, err, sizeof err);
    if (!root) rlc_die("%s", err);
    return root;
}

cJSON *rlc_json_read_file(const char *path) {
    size_t len;
    char *text = rlc_read_file(path, &len);
    cJSON *root = rlc_json_parse(text, len, path);
    free(text);
    return root;
}

// The number tokens of the text come in the order of the tree's number nodes (pre-order; object keys are strings),
// so one cursor over the text pairs them: it skips strings (with their escapes) and stops at each number token.
typedef struct {
    const char *t;
    size_t len, pos;
} num_cursor;

static int next_number_is_float(num_cursor *c) {   // 1: the next number token has a fraction or an exponent
    while (c->pos < c->len) {
        const char ch = c->t[c->pos];
        if (ch == '"') {
            for (c->pos++; c->pos < c->len && c->t[c->pos] != '"'; c->pos++)
                if (c->t[c->pos] == '\\') c->pos++;
            c->pos++;
        } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
            int flt = 0;
            for (; c->pos < c->len; c->pos++) {
                const char d = c->t[c->pos];
                if (d == '.' || d == 'e' || d == 'E') flt = 1;
                else if (!(d == '-' || d == '+' || (d >= '0' && d <= '9'))) break;
            }
            return flt;
        } else c->pos++;
    }
    return 0;
}

static void mark_floats(cJSON *j, num_cursor *c) {
    for (; j; j = j->next) {
        if ((j->type & 0xFF) == cJSON_Number && next_number_is_float(c)) j->type |= RLC_JSON_FLOAT;
        if (j->child) mark_floats(j->child, c);
    }
}

void rlc_json_mark_floats(cJSON *root, const char *text, size_t len) {
    if (!root) return;
    num_cursor c = {text, len, 0};
    if ((root->type & 0xFF) == cJSON_Number && next_number_is_float(&c)) root->type |= RLC_JSON_FLOAT;
    if (root->child) mark_floats(root->child, &c);
}

// Numbers become raw text that reads back to the same double and mark: cJSON's own print keeps 15 digits where
// they compare equal within an epsilon (not exact), and prints a marked 2.0 as "2".
static void raw_numbers(cJSON *j) {
    for (; j; j = j->next) {
        const double d = j->valuedouble;
        const int flt = (j->type & RLC_JSON_FLOAT) != 0, integral = d == floor(d);
        if ((j->type & 0xFF) == cJSON_Number && isfinite(d) && (flt || !integral)) {
            char num[40];
            if (integral && fabs(d) < 1e16) snprintf(num, sizeof num, "%.1f", d);   // -0.0 keeps its sign, as repr
            else   // the fewest of 15-17 digits that read back exactly; '.' or an exponent, so it reads back marked
                for (int p = 15; p <= 17; p++) {
                    snprintf(num, sizeof num, "%.*g", p, d);
                    if (strtod(num, NULL) == d) break;
                }
            j->valuestring = rlc_strdup(num);   // freed by cJSON_Delete (cJSON's default hooks: malloc/free)
            j->type = cJSON_Raw;
        }
        if (j->child) raw_numbers(j->child);
    }
}

char *rlc_json_print(const cJSON *v) {
    cJSON *d = cJSON_Duplicate(v, 1);
    if (!d) rlc_die("out of memory printing JSON");
    if ((d->type & 0xFF) == cJSON_Number) raw_numbers(d);   // a lone number (next is NULL)
    else if (d->child) raw_numbers(d->child);
    char *s = cJSON_PrintUnformatted(d);
    cJSON_Delete(d);
    if (!s) rlc_die("out of memory printing JSON");
    char *r = rlc_strdup(s);
    cJSON_free(s);
    return r;
}
