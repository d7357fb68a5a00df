// test_jsonl.c: the JSON Lines reader behind every JSONL input (src/data/jsonl.h): line numbers, blank and
// CRLF lines, and the one-line errors for broken JSON, non-objects, trailing text, NUL bytes, empty lines
// where they are refused, and token id arrays.
#include <string.h>

#include "core/common.h"
#include "data/jsonl.h"
#include "io_testutil.h"
#include "testlib.h"

static char *DIR_;

static char *put(const char *name, const char *text, size_t n) {
    char *p = rlc_path_join(DIR_, name);
    FILE *f = fopen(p, "wb");
    CHECK(f && fwrite(text, 1, n, f) == n && fclose(f) == 0, "write %s", p);
    return p;
}

typedef struct { const char *path; int blank_is_error; int64_t vocab; } read_arg;
static void read_all(void *arg) {
    const read_arg *a = arg;
    rlc_jsonl r;
    rlc_jsonl_open(&r, a->path, "test data");
    r.blank_is_error = a->blank_is_error;
    const cJSON *o;
    while ((o = rlc_jsonl_next(&r, "{\"ids\": [...]}"))) {
        rlc_ivec v = {0};
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, "ids");
        if (ids) rlc_jsonl_token_ids(&r, ids, "ids", a->vocab, &v);
        rlc_iv_free(&v);
    }
    rlc_jsonl_close(&r);
}

static void test_good(void) {
    static const char TEXT[] = "{\"ids\": [1, 2]}\n\n  \t\r\n{\"ids\": [3]}\r\n{\"x\": \"a\\u0000b\"}   \n{\"ids\": []}";
    char *p = put("good.jsonl", TEXT, sizeof TEXT - 1);
    rlc_jsonl r;
    rlc_jsonl_open(&r, p, "test data");
    int64_t lines[8], n = 0;
    rlc_ivec all = {0};
    const cJSON *o;
    while ((o = rlc_jsonl_next(&r, "{...}")) && n < 8) {
        lines[n++] = r.line;
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, "ids");
        if (ids) rlc_jsonl_token_ids(&r, ids, "ids", 10, &all);
    }
    rlc_jsonl_close(&r);
    TL_CHECK(n == 4 && lines[0] == 1 && lines[1] == 4 && lines[2] == 5 && lines[3] == 6,
             "objects on lines 1, 4, 5, 6 (blank and CRLF lines, no final newline): got %lld objects", (long long)n);
    TL_CHECK(all.n == 3 && all.v[0] == 1 && all.v[1] == 2 && all.v[2] == 3, "token ids in order");
    rlc_iv_free(&all);
    free(p);
}

static void bad(const char *what, const char *text, size_t n, int blank_is_error, const char *want1, const char *want2) {
    char *p = put("bad.jsonl", text, n);
    read_arg a = {p, blank_is_error, 10};
    io_expect_die(what, read_all, &a, want1, want2, (const char *)NULL);
    free(p);
}

int main(void) {
    DIR_ = tl_tmpdir("jsonl");
    test_good();
#define BAD(what, lit, blank, w1, w2) bad(what, lit, sizeof lit - 1, blank, w1, w2)
    BAD("broken JSON", "{\"ids\": [1]}\n{\"ids\": [\n", 0, "bad.jsonl:2: invalid JSON", "expected {\"ids\": [...]}");
    BAD("an array line", "[1, 2]\n", 0, "bad.jsonl:1: expected a JSON object", "got an array");
    BAD("a string line", "\n\"a\"\n", 0, "bad.jsonl:2: expected a JSON object", "got a string");
    BAD("two objects on a line", "{\"ids\": [1]} {\"ids\": [2]}\n", 0, "bad.jsonl:1: text after the JSON object at column 14",
        "one object");
    BAD("a NUL after the object", "{\"ids\": [1]}\0{\"ids\": [2]}\n", 0, "bad.jsonl:1: text after the JSON object at column 13", "");
    BAD("an empty line where refused", "{\"ids\": [1]}\n\n{\"ids\": [2]}\n", 1, "bad.jsonl:2: empty line", "expected");
    BAD("id not an integer", "{\"ids\": [1, 2.5]}\n", 0, "bad.jsonl:1: ids[1] is not an integer token id", "");
    BAD("id a string", "{\"ids\": [\"3\"]}\n", 0, "bad.jsonl:1: ids[0] is not an integer token id", "");
    BAD("id a boolean", "{\"ids\": [true]}\n", 0, "ids[0] is not an integer token id", "");
    BAD("id negative", "{\"ids\": [-1]}\n", 0, "ids[0] = -1 is outside the vocabulary [0, 10)", "");
    BAD("id at the vocab size", "{\"ids\": [0, 10]}\n", 0, "ids[1] = 10 is outside the vocabulary [0, 10)", "");
    BAD("id huge", "{\"ids\": [1e300]}\n", 0, "ids[0] = 1", "is outside the vocabulary");
    BAD("ids not an array", "{\"ids\": 3}\n", 0, "bad.jsonl:1: \"ids\" must be an array of token ids", "");
    char *missing = rlc_path_join(DIR_, "missing.jsonl");
    read_arg a = {missing, 0, 10};
    io_expect_die("missing file", read_all, &a, "missing.jsonl: cannot open test data", (const char *)NULL);
    free(missing);
    if (!tl_failed) tl_system("rm -rf '%s'", DIR_);
    free(DIR_);
    return tl_summary();
}
