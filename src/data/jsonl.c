// jsonl.c: JSON Lines input (see jsonl.h).
#include "data/jsonl.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "core/json.h"

void rlc_jsonl_open(rlc_jsonl *r, const char *path, const char *what) {
    memset(r, 0, sizeof *r);
    r->path = path;
    r->f = fopen(path, "rb");
    if (!r->f) rlc_die("%s: cannot open %s: %s", path, what, strerror(errno));
}

static int blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

static const char *json_type_name(const cJSON *x) {
    if (cJSON_IsArray(x)) return "an array";
    if (cJSON_IsString(x)) return "a string";
    if (cJSON_IsNumber(x)) return "a number";
    if (cJSON_IsBool(x)) return "a boolean";
    if (cJSON_IsNull(x)) return "null";
    return "another JSON value";
}

const cJSON *rlc_jsonl_next(rlc_jsonl *r, const char *expected) {
    cJSON_Delete(r->obj);
    r->obj = NULL;
    ssize_t len;
    while ((len = getline(&r->buf, &r->cap, r->f)) >= 0) {
        r->line++;
        if (blank(r->buf, (size_t)len)) {
            if (!r->blank_is_error) continue;
            rlc_die("%s:%lld: empty line; expected %s", r->path, (long long)r->line, expected);
        }
        const char *end = NULL;
        r->obj = cJSON_ParseWithLengthOpts(r->buf, (size_t)len, &end, 0);
        if (!r->obj) rlc_die("%s:%lld: invalid JSON; expected %s", r->path, (long long)r->line, expected);
        if (!blank(end, (size_t)(r->buf + len - end))) {
            while (*end == ' ' || *end == '\t' || *end == '\r') end++;
            rlc_die("%s:%lld: text after the JSON object at column %lld; expected one object %s per line", r->path,
                    (long long)r->line, (long long)(end - r->buf) + 1, expected);
        }
        const char *nul = memchr(r->buf, 0, (size_t)len);   // inside a string: cJSON ends the string there, silently
        if (nul)
            rlc_die("%s:%lld: NUL byte at column %lld; expected %s", r->path, (long long)r->line,
                    (long long)(nul - r->buf) + 1, expected);
        rlc_json_mark_floats(r->obj, r->buf, (size_t)(end - r->buf));
        if (!cJSON_IsObject(r->obj))
            rlc_die("%s:%lld: expected a JSON object %s, got %s", r->path, (long long)r->line, expected,
                    json_type_name(r->obj));
        return r->obj;
    }
    if (ferror(r->f)) rlc_die("%s: read error after line %lld: %s", r->path, (long long)r->line, strerror(errno));
    return NULL;
}

void rlc_jsonl_close(rlc_jsonl *r) {
    cJSON_Delete(r->obj);
    free(r->buf);
    if (r->f) fclose(r->f);
    memset(r, 0, sizeof *r);
}

void rlc_jsonl_token_ids(const rlc_jsonl *r, const cJSON *arr, const char *key, int64_t vocab, rlc_ivec *out) {
    if (!cJSON_IsArray(arr)) rlc_die("%s:%lld: \"%s\" must be an array of token ids", r->path, (long long)r->line, key);
    const double lim = vocab > 0 ? (double)vocab : 2147483648.0;
    int k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        const double v = cJSON_IsNumber(e) ? e->valuedouble : NAN;
        if (!(v == floor(v)))
            rlc_die("%s:%lld: %s[%d] is not an integer token id", r->path, (long long)r->line, key, k);
        if (v < 0 || v >= lim)
            rlc_die("%s:%lld: %s[%d] = %.0f is outside the vocabulary [0, %.0f)", r->path, (long long)r->line, key, k, v,
                    lim);
        rlc_iv_push(out, (int32_t)v);
        k++;
    }
}
