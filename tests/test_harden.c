// test_harden.c: regression cases for hostile inputs, one per failure class: resumed state with extreme
// values, absurd model sizes, token ids that overflow, RoPE bases beyond float32, regexes that backtrack
// without end, YAML nested without end, a second YAML document, NUL bytes and \u0000 escapes, invalid UTF-8,
// text after the JSON value, non-finite weights, and error messages whose reason must survive a long name.
// Each case runs in a forked child that must print exactly one line "rlc: error: ..." naming the file or key
// (io_expect_die), or load correctly. Also: the finite scan of full buffers and of FSDP shards against their plain
// references, the trainer's state files, and prompts that render to token ids past the model's vocabulary.
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/json.h"
#include "data/dataset.h"
#include "data/jsonl.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io_testutil.h"
#include "model/config.h"
#include "testlib.h"
#include "tiny_model.h"
#include "tokenizer/bpe_train.h"
#include "tokenizer/tokenizer.h"
#include "trainer/config.h"
#include "trainer/finite.h"
#include "trainer/lr_schedule.h"
#include "trainer/optim.h"
#include "trainer/trainer_state.h"

static char *DIR_;

static char *path_of(const char *name) { return rlc_path_join(DIR_, name); }
static char *put(const char *name, const void *data, size_t n) {
    char *p = path_of(name);
    if (rlc_write_file_atomic(p, data, n) != 0) { TL_CHECK(0, "cannot write %s", p); }
    return p;
}

// ---- core: message shortening and the strict JSON helper ----

static void die_long_name(void *arg) {
    rlc_die("%s: cannot open shard: No such file or directory", (const char *)arg);
}

static void test_messages(void) {
    char *name = rlc_malloc(100001);
    memset(name, 'a', 100000);
    name[100000] = 0;
    char out[1024];
    rlc_format_short(out, sizeof out, "index.json: shard '%s' is missing: the reason", name);
    TL_CHECK(strlen(out) < sizeof out && strstr(out, "is missing: the reason") && strstr(out, "bytes]"),
             "a 100,000-byte name is shortened in the middle, the reason kept: '%.200s'", out);
    io_expect_die("rlc_die with a 100,000-byte name", die_long_name, name, "bytes]", "No such file or directory",
                  (const char *)NULL);
    // a long message of many short words keeps its end
    rlc_strbuf b = {0};
    for (int i = 0; i < 2000; i++) rlc_sb_puts(&b, "word ");
    rlc_sb_puts(&b, "THE-END");
    rlc_shorten_message(b.s, out, sizeof out);
    TL_CHECK(strlen(out) < sizeof out && strstr(out, "THE-END"), "many words: the end survives");
    rlc_sb_free(&b);
    free(name);
}

static void test_json_helper(void) {
    static const struct { const char *text; size_t n; const char *want; } BAD[] = {
        {"{\"a\": 1}\0junk", 13, "NUL byte"},
        {"{\"a\": 1} x", 10, "text after the JSON value"},
        {"{\"a\": \"x\\u0000y\"}", 17, "\\u0000"},
        {"{\"a\": \"\xc3\x28\"}", 10, "invalid UTF-8"},
        {"{\"a\": \"x\ty\"}", 12, "raw control byte"},
        {"{\"a\": 1", 7, "invalid JSON"},
        {"", 0, "empty"},
    };
    char err[256];
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        cJSON *j = rlc_json_parse_err(BAD[i].text, BAD[i].n, "f.json", err, sizeof err);
        TL_CHECK(!j && strstr(err, BAD[i].want) && !strncmp(err, "f.json:1:", 9), "strict JSON case %zu: '%s'", i, err);
        cJSON_Delete(j);
    }
    static const char GOOD[] = "{\"a\": [1, 2.5e3, \"\\u00e9\\n\xc3\xa9\"], \"b\": null}\n  ";
    cJSON *j = rlc_json_parse_err(GOOD, sizeof GOOD - 1, "f.json", err, sizeof err);
    TL_CHECK(j && cJSON_GetArraySize(cJSON_GetObjectItem(j, "a")) == 3, "valid JSON with escapes and trailing space parses");
    cJSON_Delete(j);
}

// ---- finite scan ----

static void test_finite(void) {
    model_config cfg;
    param_layout pl;
    param_set ps;
    tiny_params_init(&cfg, &pl, &ps, 0, 3);
    finite_report r = finite_scan(ps.data, &pl), rr = finite_scan_ref(ps.data, &pl);
    TL_CHECK(r.tensor < 0 && rr.tensor < 0, "finite weights: no report");
    tl_rng g;
    tl_rng_init(&g, 11);
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    int agree = 1;
    for (int trial = 0; trial < 40; trial++) {
        const int64_t a = (int64_t)tl_uniform(&g, 0.f, (float)pl.numel) % pl.numel;
        const int64_t b = (int64_t)tl_uniform(&g, 0.f, (float)pl.numel) % pl.numel;
        ps.data[a] = bad[trial % 3];
        if (trial % 2) ps.data[b] = bad[(trial + 1) % 3];
        r = finite_scan(ps.data, &pl);
        rr = finite_scan_ref(ps.data, &pl);
        const int64_t first = a < b || !(trial % 2) ? a : b;
        const param_tensor *t = r.tensor >= 0 ? &pl.tensors[r.tensor] : NULL;
        agree &= r.tensor == rr.tensor && r.element == rr.element && t && t->offset + r.element == first;
        ps.data[a] = 0.5f;
        ps.data[b] = 0.5f;
    }
    TL_CHECK(agree, "finite_scan finds the first non-finite element, as finite_scan_ref does (40 random cases)");
    // FSDP shards in dist/fsdp.h's layout (block b cut into W pieces of ceil(n_b / W) rounded up to 16, zero padded):
    // each rank's scan reports the first bad value it holds, in full-layout terms, as the reference does, and the
    // lowest over the ranks is the full buffer's first (what the collective save guard relies on)
    const int nb = pl.n_blocks;
    int64_t *so = rlc_malloc(sizeof(int64_t) * (size_t)(nb + 1));
    for (int W = 2; W <= 3; W++) {
        int64_t off = 0;
        for (int b = 0; b < nb; b++) {
            const int64_t nbk = pl.block_off[b + 1] - pl.block_off[b];
            so[b] = off;
            off += ((nbk + W - 1) / W + 15) / 16 * 16;
        }
        so[nb] = off;
        float *sh = rlc_malloc(sizeof(float) * (size_t)off);
        int shard_agree = 1;
        for (int trial = 0; trial < 30; trial++) {
            int64_t pos[2];
            const int nbad = 1 + trial % 2;
            for (int k = 0; k < nbad; k++) {
                pos[k] = (int64_t)tl_uniform(&g, 0.f, (float)pl.numel) % pl.numel;
                ps.data[pos[k]] = bad[(trial + k) % 3];
            }
            int64_t lowest = -1;
            for (int rk = 0; rk < W; rk++) {
                int64_t want = -1;   // the lowest bad position rank rk owns
                for (int b = 0; b < nb; b++) {
                    const int64_t piece = so[b + 1] - so[b];
                    for (int64_t j = 0; j < piece; j++) {
                        const int64_t full = pl.block_off[b] + rk * piece + j;
                        sh[so[b] + j] = full < pl.block_off[b + 1] ? ps.data[full] : 0.f;
                        for (int k = 0; k < nbad; k++)
                            if (full < pl.block_off[b + 1] && full == pos[k] && (want < 0 || full < want)) want = full;
                    }
                }
                const finite_report fr = finite_scan_shard(sh, &pl, so, rk), rf = finite_scan_shard_ref(sh, &pl, so, rk);
                const int64_t got = fr.tensor >= 0 ? pl.tensors[fr.tensor].offset + fr.element : -1;
                shard_agree &= fr.tensor == rf.tensor && fr.element == rf.element && got == want;
                if (got >= 0 && (lowest < 0 || got < lowest)) lowest = got;
            }
            const int64_t first = nbad == 1 || pos[0] < pos[1] ? pos[0] : pos[1];
            shard_agree &= lowest == first;
            for (int k = 0; k < nbad; k++) ps.data[pos[k]] = 0.5f;
        }
        TL_CHECK(shard_agree, "W=%d: finite_scan_shard finds each rank's first non-finite element as the reference does, "
                 "and the lowest over the ranks is the full buffer's first (30 random cases)", W);
        free(sh);
    }
    free(so);
    ps.data[pl.tensors[3].offset + 5] = NAN;
    param_set_free(&ps);
    param_layout_free(&pl);
}

typedef struct { param_layout *pl; float *data, *m, *head; } finite_arg;
static void check_finite_child(void *p) {
    finite_arg *a = p;
    const finite_buf b[4] = {{.what = "the weights", .data = a->data, .pl = a->pl},
                             {.what = "the AdamW first moment", .data = a->m, .pl = a->pl},
                             {.what = "the critic's value head", .data = a->head, .name = "score.weight", .n = 4},
                             {.what = "the critic's value head", .data = a->head + 4, .name = "score.bias", .n = 1}};
    finite_check_save(b, 4, NULL, 7);
}
static void test_finite_die(void) {
    model_config cfg;
    param_layout pl;
    param_set ps;
    tiny_params_init(&cfg, &pl, &ps, 0, 3);
    float *m = rlc_calloc((size_t)pl.numel, sizeof(float));
    float head[5] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
    finite_arg a = {&pl, ps.data, m, head};
    char msg[512];
    TL_CHECK(io_run_child(check_finite_child, &a, msg, sizeof msg) == 0, "finite buffers pass the save guard: %s", msg);
    m[pl.tensors[2].offset + 1] = NAN;
    io_expect_die("a non-finite moment before a save", check_finite_child, &a, "training step 7", "the AdamW first moment",
                  pl.tensors[2].name, "element 1 is nan", (const char *)NULL);
    ps.data[pl.tensors[4].offset + 5] = INFINITY;   // the weights come first, whatever the moments hold
    io_expect_die("a non-finite weight before a save", check_finite_child, &a, "training step 7", pl.tensors[4].name,
                  "element 5 is inf", "last good one stays the latest", (const char *)NULL);
    ps.data[pl.tensors[4].offset + 5] = 0.f;
    m[pl.tensors[2].offset + 1] = 0.f;
    head[4] = -INFINITY;
    io_expect_die("a non-finite value-head bias before a save", check_finite_child, &a, "the critic's value head",
                  "tensor 'score.bias' element 0 is -inf", (const char *)NULL);
    free(m);
    param_set_free(&ps);
    param_layout_free(&pl);
}

// ---- the trainer's state files (trainer_state.h) ----

static void load_tstate(void *p) {
    trainer_state ts;
    trainer_state_load(&ts, p);
}
static void load_vhopt(void *p) {
    vhead_opt_state s;
    vhead_opt_load(&s, p);
    vhead_opt_free(&s);
}

// a copy of good (n bytes) with `len` bytes of val at off, written as name
static char *patched(const char *name, const void *good, size_t n, size_t off, const void *val, size_t len) {
    char *b = rlc_malloc(n);
    memcpy(b, good, n);
    memcpy(b + off, val, len);
    char *p = put(name, b, n);
    free(b);
    return p;
}

static void test_trainer_state(void) {
    const trainer_state ts = {.global_step = 12, .epoch = 3, .batch_in_epoch = 1, .kl_ctrl_value = 0.001, .data_seed = 77,
                              .train_n = 8};
    uint8_t good[TRAINER_STATE_BYTES];
    trainer_state_encode(&ts, good);
    char *gp = put("trainer_state.bin", good, sizeof good);
    trainer_state back;
    trainer_state_load(&back, gp);
    TL_CHECK(back.global_step == 12 && back.epoch == 3 && back.batch_in_epoch == 1 && back.kl_ctrl_value == 0.001 &&
                 back.data_seed == 77 && back.train_n == 8,
             "trainer state round trip");
    free(gp);
    const int64_t big = INT64_MAX, neg = -1, zero = 0;
    const double dnan = NAN, dneg = -1.0;
    const uint32_t two = 2, one = 1;
    static const char MAGIC_BAD[1] = {'X'};
    const struct { size_t off; const void *val; size_t len; const char *want; } CASES[] = {
        {16, &big, 8, "global_step 9223372036854775807 is outside [0, 1099511627776]"},
        {16, &neg, 8, "global_step -1 is outside"},
        {24, &neg, 8, "epoch -1 is outside"},
        {32, &neg, 8, "batch_in_epoch -1 is outside"},
        {40, &dnan, 8, "kl_coef nan, expected a finite value >= 0"},
        {40, &dneg, 8, "kl_coef -1"},
        {56, &zero, 8, "train_n (prompts) 0 is outside"},
        {8, &two, 4, "trainer state version 2"},
        {12, &one, 4, "reserved bytes 12..15 are not zero"},
        {0, MAGIC_BAD, 1, "not an rlc trainer state (bad magic)"},
    };
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        char name[40];
        snprintf(name, sizeof name, "tstate_%zu.bin", k);
        char *p = patched(name, good, sizeof good, CASES[k].off, CASES[k].val, CASES[k].len);
        io_expect_die(CASES[k].want, load_tstate, p, name, CASES[k].want, (const char *)NULL);
        free(p);
    }
    char *p = put("tstate_short.bin", good, 63);
    io_expect_die("a trainer state of 63 bytes", load_tstate, p, "tstate_short.bin", "63 bytes, expected 64", (const char *)NULL);
    free(p);

    // the value head's optimizer state: 9 values at step 12
    float m[9], v[9];
    for (int i = 0; i < 9; i++) { m[i] = 0.01f * (float)i; v[i] = 1e-4f * (float)i; }
    uint8_t *vg;
    size_t vn;
    vhead_opt_encode(9, 12, m, v, &vg, &vn);
    TL_CHECK(vn == 32 + 72, "value-head state of 9 values is %zu bytes", vn);
    p = put("vhopt.bin", vg, vn);
    char msg[512];
    TL_CHECK(io_run_child(load_vhopt, p, msg, sizeof msg) == 0, "the value-head state loads: %s", msg);
    free(p);
    const int64_t ten = 10, huge = (int64_t)1 << 62, step_big = ((int64_t)1 << 40) + 1;
    const float fnan = NAN, fneg = -1.f;
    const struct { size_t off; const void *val; size_t len; const char *want; } VCASES[] = {
        {16, &ten, 8, "n 10 values do not fill its 104 bytes"},
        {16, &huge, 8, "n 4611686018427387904 values do not fill"},
        {16, &zero, 8, "n 0 values"},
        {16, &neg, 8, "n -1 values"},
        {24, &neg, 8, "step -1 is outside"},
        {24, &step_big, 8, "step 1099511627777 is outside"},
        {32 + 4 * 3, &fnan, 4, "moment 3 (m nan"},
        {32 + 36 + 4 * 2, &fneg, 4, "moment 2 (m 0.02, v -1)"},
        {12, &one, 4, "reserved bytes 12..15 are not zero"},
        {8, &two, 4, "value-head optimizer state version 2"},
    };
    for (size_t k = 0; k < sizeof VCASES / sizeof VCASES[0]; k++) {
        char name[40];
        snprintf(name, sizeof name, "vhopt_%zu.bin", k);
        p = patched(name, vg, vn, VCASES[k].off, VCASES[k].val, VCASES[k].len);
        io_expect_die(VCASES[k].want, load_vhopt, p, name, VCASES[k].want, (const char *)NULL);
        free(p);
    }
    p = put("vhopt_short.bin", vg, 31);
    io_expect_die("a value-head state of 31 bytes", load_vhopt, p, "vhopt_short.bin", "bad magic", (const char *)NULL);
    free(p);
    p = put("vhopt_cut.bin", vg, vn - 1);
    io_expect_die("a value-head state one byte short", load_vhopt, p, "vhopt_cut.bin", "n 9 values do not fill its 103 bytes",
                  (const char *)NULL);
    free(p);
    free(vg);
}

// ---- a prompt that renders to a token id past the model's vocabulary ----

typedef struct { const char *path; rlc_tokenizer *tok; int64_t vocab; } ds_arg;
static void load_ds(void *p) {
    const ds_arg *a = p;
    rlc_data_opts o;
    rlc_data_opts_default(&o);
    o.vocab_size = a->vocab;
    rlc_dataset ds;
    rlc_dataset_load(&ds, a->path, a->tok, &o);
    rlc_dataset_free(&ds);
}

static void test_prompt_vocab(void) {
    char *td = path_of("tok_vocab");
    static const char *const TEXTS[] = {"What is 2 + 3? It is 5. What is 7 + 1? It is 8.", "user\n", "assistant\n",
                                        "<think>\n\n</think>\n\n"};
    const bpe_train_opts bo = {280, 1};
    bpe_train_write(TEXTS, 4, &bo, td);
    rlc_tokenizer *t0 = rlc_tok_load(td, NULL);
    const int64_t V = rlc_tok_vocab_size(t0);   // the model's vocab_size: every id the trained tokenizer has
    rlc_tok_free(t0);
    // an added token past it, as Gemma 3's image token sits at vocab_size
    char *tj = rlc_path_join(td, "tokenizer.json");
    size_t n;
    char *js = rlc_read_file(tj, &n);
    cJSON *j = cJSON_Parse(js);
    cJSON *img = cJSON_CreateObject();
    cJSON_AddNumberToObject(img, "id", (double)(V + 5));
    cJSON_AddStringToObject(img, "content", "<image_soft_token>");
    cJSON_AddBoolToObject(img, "single_word", 0);
    cJSON_AddBoolToObject(img, "lstrip", 0);
    cJSON_AddBoolToObject(img, "rstrip", 0);
    cJSON_AddBoolToObject(img, "normalized", 0);
    cJSON_AddBoolToObject(img, "special", 1);
    cJSON_AddItemToArray(cJSON_GetObjectItem(j, "added_tokens"), img);
    char *out = cJSON_Print(j);
    if (rlc_write_file_atomic(tj, out, strlen(out)) != 0) TL_CHECK(0, "cannot write %s", tj);
    free(out);
    cJSON_Delete(j);
    free(js);
    rlc_tokenizer *t = rlc_tok_load(td, NULL);
    TL_CHECK(rlc_tok_vocab_size(t) == V + 6, "the tokenizer has %lld ids (%lld + the image token)", (long long)rlc_tok_vocab_size(t),
             (long long)V);
    static const char R1[] = "{\"data_source\": \"t\", \"prompt\": [{\"role\": \"user\", \"content\": \"What is 2 + 3?\"}]}\n";
    static const char R2[] = "{\"data_source\": \"t\", \"prompt\": [{\"role\": \"user\", \"content\": \"What is <image_soft_token> + 1?\"}]}\n";
    static const char G2[] = "{\"question\": \"What is 7 <image_soft_token>?\", \"answer\": \"#### 8\"}\n";
    rlc_strbuf b = {0};
    rlc_sb_puts(&b, R1);
    rlc_sb_puts(&b, R2);
    rlc_sb_puts(&b, R1);
    char *bad = put("rows_image.jsonl", b.s, b.n);
    char want[200], why[200];
    snprintf(want, sizeof want, "rows_image.jsonl:2: \"prompt\" renders to token id %lld ('<image_soft_token>'), outside the "
             "model's vocabulary [0, %lld)", (long long)(V + 5), (long long)V);
    snprintf(why, sizeof why, "(the tokenizer has %lld ids, more than config.json's vocab_size %lld)", (long long)(V + 6), (long long)V);
    ds_arg a = {bad, t, V};
    io_expect_die("a row whose prompt renders to an id past vocab_size", load_ds, &a, want, why, (const char *)NULL);
    rlc_sb_clear(&b);
    rlc_sb_puts(&b, "{\"question\": \"What is 2 + 3?\", \"answer\": \"#### 5\"}\n");
    rlc_sb_puts(&b, G2);
    char *gbad = put("gsm8k_image.jsonl", b.s, b.n);
    a.path = gbad;
    io_expect_die("a GSM8K row whose question renders to an id past vocab_size", load_ds, &a,
                  "gsm8k_image.jsonl:2: \"question\" renders to token id", (const char *)NULL);
    // the same tokenizer on rows that never produce the id: accepted (an unused id past vocab_size is no error)
    rlc_sb_clear(&b);
    rlc_sb_puts(&b, R1);
    rlc_sb_puts(&b, R1);
    char *good = put("rows_text.jsonl", b.s, b.n);
    a.path = good;
    char msg[1024];
    TL_CHECK(io_run_child(load_ds, &a, msg, sizeof msg) == 0,
             "a tokenizer with an unused id past vocab_size (Gemma 3's image token) loads rows that never produce it: %s", msg);
    rlc_sb_free(&b);
    rlc_tok_free(t);
    free(bad); free(gbad); free(good); free(tj); free(td);
}

// ---- optimizer and scheduler state ----

static param_layout OPT_PL;
typedef struct { const char *path; int resume; } opt_arg;
static void load_opt(void *p) {
    const opt_arg *a = p;
    adamw_hparams h = adamw_hparams_default();
    adamw_state st;
    adamw_init(&st, &OPT_PL, &h);
    if (a->resume) adamw_load_resume(&st, a->path);
    else adamw_load(&st, a->path, NULL, 0);
}

// header field offsets of the optimizer state (magic 8, version 4, n_extra 4, numel 8, step 8, 4 doubles, extras)
enum { OFF_STEP = 24, OFF_EPS = 48, OFF_WD = 56, OFF_EXTRA0 = 64 };

static void test_optimizer_state(void) {
    model_config cfg;
    param_set ps;
    tiny_params_init(&cfg, &OPT_PL, &ps, 0, 5);
    adamw_hparams h = adamw_hparams_default();
    adamw_state st;
    adamw_init(&st, &OPT_PL, &h);
    char *good = path_of("optim.bin");
    const int64_t extra[1] = {4};
    adamw_save(&st, good, extra, 1);
    size_t n;
    char *bytes = rlc_read_file(good, &n);
    static const struct { int off; int is_double; double d; int64_t i; const char *want; } CASES[] = {
        {OFF_STEP, 0, 0, INT64_MAX, "step 9223372036854775807"},
        {OFF_EPS, 1, 0.0, 0, "eps 0"},
        {OFF_WD, 1, 1e300, 0, "weight_decay 1e+300"},
        {OFF_EXTRA0, 0, 0, INT64_MAX, "LR scheduler step 9223372036854775807"},
        {OFF_EXTRA0, 0, 0, -1, "LR scheduler step -1"},
    };
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        char *b = rlc_malloc(n);
        memcpy(b, bytes, n);
        if (CASES[k].is_double) memcpy(b + CASES[k].off, &CASES[k].d, 8);
        else memcpy(b + CASES[k].off, &CASES[k].i, 8);
        char name[32];
        snprintf(name, sizeof name, "optim_%zu.bin", k);
        char *p = put(name, b, n);
        opt_arg a = {p, 1};
        io_expect_die(CASES[k].want, load_opt, &a, name, CASES[k].want, (const char *)NULL);
        free(p);
        free(b);
    }
    opt_arg a = {good, 1};
    char msg[512];
    TL_CHECK(io_run_child(load_opt, &a, msg, sizeof msg) == 0, "the untouched state loads: %s", msg);
    free(bytes);
    free(good);
    adamw_free(&st);
    param_set_free(&ps);
}

static void sched_huge(void *p) {
    (void)p;
    lr_schedule ls;
    lr_schedule_init(&ls, LR_COSINE, 1e-3, 0, INT64_MAX, 0.0);
}

// ---- tokenizer ----

typedef struct { const char *json; size_t n; const char *text; } tok_arg;
static void tok_load_encode(void *p) {
    const tok_arg *a = p;
    rlc_tokenizer *t = rlc_tok_from_json(a->json, a->n, "bad/tokenizer.json", NULL);
    if (a->text) {
        rlc_ivec v = {0};
        rlc_tok_encode(t, a->text, strlen(a->text), &v);
        rlc_iv_free(&v);
    }
    rlc_tok_free(t);
}

#define TOK_HEAD "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2%s}, \"merges\": [\"a b\"]}"
static void tok_case(const char *what, const char *extra_vocab, const char *rest, const char *tail, size_t tail_n,
                     const char *text, const char *want) {
    char buf[8192];
    int k = snprintf(buf, sizeof buf, TOK_HEAD, extra_vocab);
    k += snprintf(buf + k, sizeof buf - (size_t)k, "%s}", rest);
    memcpy(buf + k, tail, tail_n);
    tok_arg a = {buf, (size_t)k + tail_n, text};
    io_expect_die(what, tok_load_encode, &a, "bad/tokenizer.json", want, (const char *)NULL);
}

typedef struct { const char *gen; } gencfg_arg;
static void tok_gen_config(void *p) {
    const gencfg_arg *a = p;
    static const char J[] = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": []}}";
    rlc_tokenizer *t = rlc_tok_from_json(J, sizeof J - 1, "tokenizer.json", NULL);
    rlc_tok_apply_config(t, NULL, NULL, a->gen, "generation_config.json");
    rlc_tok_free(t);
}

static void test_tokenizer(void) {
    tok_case("added token id 2^31-1", "", ", \"added_tokens\": [{\"id\": 2147483647, \"content\": \"<x>\"}]", "", 0, "ab",
             "added_tokens[0].id = 2147483647");
    tok_case("added token id 2^30", "", ", \"added_tokens\": [{\"id\": 1073741824, \"content\": \"<x>\"}]", "", 0, NULL,
             "added_tokens[0].id");
    tok_case("added token ids far beyond the vocab", "", ", \"added_tokens\": [{\"id\": 900000, \"content\": \"<x>\"}]",
             "", 0, NULL, "token ids reach 900000 but there are only 4 tokens");
    tok_case("a vocab id of 2^31", ", \"c\": 2147483648", "", "", 0, NULL, "token id out of range");
    tok_case("invalid UTF-8 in a vocab key", ", \"\xff\xfe\": 3", "", "", 0, NULL, "invalid UTF-8");
    tok_case("text after the closing brace", "", "", " {}", 3, NULL, "text after the JSON object");
    tok_case("a NUL byte then junk after the closing brace", "", "", "\0junk", 5, NULL, "NUL byte");
    tok_case("\\u0000 in a vocab key", ", \"x\\u0000y\": 3", "", "", 0, NULL, "\\u0000");
    // nested quantifiers on a long line: an error naming the file and the pattern, in well under a second
    char *line = rlc_malloc(4001);
    memset(line, 'a', 4000);
    line[4000] = 0;
    static const char *const PATS[2] = {"a*a*b|a", "\\\\s*\\\\s*x|\\\\s"};
    for (int i = 0; i < 2; i++) {
        char rest[256];
        snprintf(rest, sizeof rest, ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"%s\"}, "
                 "\"behavior\": \"Isolated\", \"invert\": false}", PATS[i]);
        if (i == 1) memset(line, ' ', 4000);
        double t0 = rlc_now();
        tok_case(i ? "regex \\s*\\s*x|\\s on 4,000 spaces" : "regex a*a*b|a on 4,000 characters", "", rest, "", 0, line,
                 i ? "pre_tokenizer regex '\\s*\\s*x|\\s'" : "pre_tokenizer regex 'a*a*b|a'");
        TL_CHECK(rlc_now() - t0 < 20, "the backtracking regex stops early (%.1f s)", rlc_now() - t0);
    }
    free(line);
    static const struct { const char *gen, *want; } GEN[] = {
        {"{\"eos_token_id\": 2147483648}", "eos_token_id"},
        {"{\"eos_token_id\": 9223372036854775808}", "eos_token_id"},
        {"{\"eos_token_id\": [1, 18446744073709551616]}", "eos_token_id[]"},
        {"{\"bos_token_id\": -1e300}", "bos_token_id"},
        {"{\"eos_token_id\": 1} junk", "text after the JSON value"},
    };
    for (size_t i = 0; i < sizeof GEN / sizeof GEN[0]; i++) {
        gencfg_arg a = {GEN[i].gen};
        io_expect_die(GEN[i].gen, tok_gen_config, &a, "generation_config.json", GEN[i].want, (const char *)NULL);
    }
}

// ---- model config: sizes, RoPE, strict JSON ----

static void load_cfg_file(void *p) {
    model_config c;
    model_config_load(&c, (const char *)p);
}
typedef struct { const char *json; int alloc; } cfg_arg;
static void parse_cfg_layout(void *p) {
    const cfg_arg *a = p;
    model_config c;
    model_config_parse(&c, a->json, "big/config.json");
    param_layout pl;
    param_layout_init(&pl, &c);
    if (a->alloc) {
        param_set ps;
        param_set_init(&ps, &pl);
    }
}

static void test_model_config(void) {
    char js[2048];
    snprintf(js, sizeof js, TINY_CFG_JSON, "false");
    // text after the object, and a NUL byte followed by junk, in the file
    const size_t n = strlen(js);
    char *buf = rlc_malloc(n + 8);
    memcpy(buf, js, n);
    memcpy(buf + n, "\0junk", 5);
    char *p = put("cfg_nul.json", buf, n + 5);
    io_expect_die("config.json: }\\0junk", load_cfg_file, p, "cfg_nul.json", "NUL byte", (const char *)NULL);
    free(p);
    memcpy(buf + n, " x", 2);
    p = put("cfg_trail.json", buf, n + 2);
    io_expect_die("config.json: text after the object", load_cfg_file, p, "cfg_trail.json", "text after the JSON value",
                  (const char *)NULL);
    free(p);
    free(buf);
    // RoPE base beyond float32
    char *q = strstr(js, "\"rope_theta\": 10000");
    char js2[2100];
    snprintf(js2, sizeof js2, "%.*s\"rope_theta\": 1e308%s", (int)(q - js), js, q + strlen("\"rope_theta\": 10000"));
    p = put("cfg_rope.json", js2, strlen(js2));
    io_expect_die("rope_theta 1e308", load_cfg_file, p, "cfg_rope.json", "rope_theta", "float32", (const char *)NULL);
    free(p);
    // eos ids beyond int32: a range error, never a cast
    static const char *const EOS[2] = {"2147483648", "9223372036854775808"};
    for (int i = 0; i < 2; i++) {
        char *e = strstr(js, "\"eos_token_id\": 1");
        char js3[2100];
        snprintf(js3, sizeof js3, "%.*s\"eos_token_id\": [%s]%s", (int)(e - js), js, EOS[i], e + strlen("\"eos_token_id\": 1"));
        p = put("cfg_eos.json", js3, strlen(js3));
        io_expect_die(i ? "config.json eos_token_id 2^63" : "config.json eos_token_id 2^31", load_cfg_file, p, "cfg_eos.json",
                      "eos_token_id", "out of range", (const char *)NULL);
        free(p);
    }
    // absurd sizes: refused at the layout (2^40 parameters), or up front for this machine's memory
    static const char BIG[] =
        "{\"model_type\": \"qwen3\", \"vocab_size\": %lld, \"hidden_size\": %lld, \"intermediate_size\": %lld, "
        "\"num_hidden_layers\": %d, \"num_attention_heads\": 8, \"num_key_value_heads\": 8, \"head_dim\": 64, "
        "\"tie_word_embeddings\": true}";
    char big[512];
    snprintf(big, sizeof big, BIG, 1ll << 30, 1ll << 30, 1ll << 30, 2);
    cfg_arg a = {big, 0};
    io_expect_die("vocab, hidden, intermediate 2^30", parse_cfg_layout, &a, "limited to 2^40 parameters", (const char *)NULL);
    snprintf(big, sizeof big, BIG, 151936ll, 1ll << 30, 1ll << 30, 512);
    io_expect_die("hidden and intermediate 2^30, 512 layers", parse_cfg_layout, &a, "limited to 2^40 parameters",
                  (const char *)NULL);
    snprintf(big, sizeof big, BIG, 1ll << 20, 1ll << 16, 1ll << 16, 64);   // ~1.2e12 bytes of fp32
    a.alloc = 1;
    const int64_t mem = rlc_mem_total();
    if (mem > 0 && mem < (int64_t)1 << 42)
        io_expect_die("a model larger than this machine's memory", parse_cfg_layout, &a, "of memory; this machine has",
                      (const char *)NULL);
    else tl_skip("memory refusal: this machine has more than 4 TiB");
}

// ---- safetensors: \u0000 in names, dtypes and shard names ----

static void open_st_dir(void *p) {
    st_dir d;
    st_dir_open(&d, (const char *)p);
}

static void put_st(const char *dir, const char *header) {
    char *d = path_of(dir);
    rlc_mkdirs(d);
    char *f = rlc_path_join(d, "model.safetensors");
    const uint64_t hn = strlen(header);
    char *b = rlc_malloc(8 + hn + 16);
    memcpy(b, &hn, 8);
    memcpy(b + 8, header, hn);
    memset(b + 8 + hn, 0, 16);
    rlc_write_file_atomic(f, b, 8 + hn + 16);
    free(b); free(f); free(d);
}

static void test_safetensors(void) {
    put_st("st_name", "{\"a\\u0000b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}");
    char *d = path_of("st_name");
    io_expect_die("\\u0000 in a tensor name", open_st_dir, d, "model.safetensors", "\\u0000", (const char *)NULL);
    free(d);
    put_st("st_dtype", "{\"a\": {\"dtype\": \"F32\\u0000\", \"shape\": [4], \"data_offsets\": [0, 16]}}");
    d = path_of("st_dtype");
    io_expect_die("\\u0000 in a dtype", open_st_dir, d, "model.safetensors", "\\u0000", (const char *)NULL);
    free(d);
    // an index naming a shard with \u0000, and one naming a 100,000-byte shard name
    d = path_of("st_index");
    rlc_mkdirs(d);
    char *ix = rlc_path_join(d, "model.safetensors.index.json");
    static const char IX[] = "{\"weight_map\": {\"a\": \"model\\u0000.safetensors\"}}";
    rlc_write_file_atomic(ix, IX, sizeof IX - 1);
    io_expect_die("\\u0000 in a shard name", open_st_dir, d, "model.safetensors.index.json", "\\u0000", (const char *)NULL);
    rlc_strbuf b = {0};
    rlc_sb_puts(&b, "{\"weight_map\": {\"a\": \"");
    for (int i = 0; i < 100000; i++) rlc_sb_putc(&b, 'x');
    rlc_sb_puts(&b, ".safetensors\"}}");
    rlc_write_file_atomic(ix, b.s, b.n);
    io_expect_die("a 100,000-byte shard name", open_st_dir, d, "bytes]", "safetensors: cannot open", (const char *)NULL);
    rlc_sb_free(&b);
    free(ix);
    free(d);
}

// ---- YAML and JSONL ----

static void load_yaml(void *p) {
    rlc_train_config c;
    rlc_config_init(&c);
    rlc_config_load_yaml(&c, (const char *)p);
}

static void read_jsonl(void *p) {
    rlc_jsonl r;
    rlc_jsonl_open(&r, (const char *)p, "prompts");
    while (rlc_jsonl_next(&r, "{\"prompt\": ...}")) {}
    rlc_jsonl_close(&r);
}

static void test_yaml_jsonl(void) {
    rlc_strbuf b = {0};
    rlc_sb_puts(&b, "trainer:\n  total_epochs: ");
    for (int i = 0; i < 100000; i++) rlc_sb_putc(&b, '[');
    char *p = put("deep.yaml", b.s, b.n);
    double t0 = rlc_now();
    io_expect_die("YAML nested 100,000 deep", load_yaml, p, "deep.yaml:2:", "nesting deeper than 64", (const char *)NULL);
    TL_CHECK(rlc_now() - t0 < 10, "the deep YAML is refused quickly (%.1f s)", rlc_now() - t0);
    free(p);
    rlc_sb_free(&b);
    static const char TWO[] = "trainer:\n  total_epochs: 1\n---\ntrainer: {total_epochs: [\n";
    p = put("two.yaml", TWO, sizeof TWO - 1);
    io_expect_die("a second YAML document", load_yaml, p, "two.yaml:3", "second YAML document", (const char *)NULL);
    free(p);
    static const char NUL[] = "trainer:\n  total_epochs: 1\n\0  bogus_key: 1\n";
    p = put("nul.yaml", NUL, sizeof NUL - 1);
    io_expect_die("a NUL byte in YAML", load_yaml, p, "nul.yaml:3", "NUL byte", (const char *)NULL);
    free(p);
    static const char JL[] = "{\"prompt\": \"ab\0cd\"}\n";
    p = put("nul.jsonl", JL, sizeof JL - 1);
    io_expect_die("a raw NUL in a JSONL prompt", read_jsonl, p, "nul.jsonl:1", "NUL byte at column 15", (const char *)NULL);
    free(p);
}

// ---- non-finite weights at load ----

typedef struct { const char *dir; int allow; } ck_arg;
static void load_ck(void *p) {
    const ck_arg *a = p;
    model_config c;
    param_layout pl;
    param_set ps;
    checkpoint_load_ex(a->dir, &c, &pl, &ps, a->allow);
    param_set_free(&ps);
    param_layout_free(&pl);
}

static void test_nonfinite_load(void) {
    model_config cfg;
    param_layout pl;
    param_set ps;
    tiny_params_init(&cfg, &pl, &ps, 0, 9);
    const param_tensor *t = &pl.tensors[5];
    // F32 NaN; F16 overflow to inf; an F64 source of 1e300 (finite as F64, inf as fp32)
    static const char *const DIRS[3] = {"ck_f32", "ck_f16", "ck_f64"};
    for (int k = 0; k < 3; k++) {
        char *d = path_of(DIRS[k]);
        const float keep = ps.data[t->offset + 3];
        ps.data[t->offset + 3] = k == 0 ? NAN : 1e6f;
        checkpoint_save(d, &ps, k == 1 ? ST_F16 : ST_F32);
        if (k == 2) {   // rewrite the weights with the one tensor as F64
            st_write_tensor *w = rlc_calloc((size_t)pl.n_tensors, sizeof *w);
            double *f64 = rlc_malloc((size_t)t->numel * sizeof(double));
            for (int64_t j = 0; j < t->numel; j++) f64[j] = ps.data[t->offset + j];
            f64[3] = 1e300;
            for (int i = 0; i < pl.n_tensors; i++) {
                const param_tensor *p = &pl.tensors[i];
                w[i] = (st_write_tensor){.name = p->name, .dtype = p == t ? ST_F64 : ST_F32, .ndim = p->ndim,
                                         .f32 = p == t ? NULL : ps.data + p->offset, .raw = p == t ? f64 : NULL};
                memcpy(w[i].shape, p->shape, sizeof p->shape);
            }
            char *f = rlc_path_join(d, "model.safetensors");
            st_write(f, w, pl.n_tensors, NULL, 0);
            free(f); free(f64); free(w);
        }
        ps.data[t->offset + 3] = keep;
        ck_arg a = {d, 0};
        char what[64];
        snprintf(what, sizeof what, "a non-finite weight (%s)", DIRS[k]);
        io_expect_die(what, load_ck, &a, "model.safetensors", t->name, "element 3", "--allow-nonfinite", (const char *)NULL);
        a.allow = 1;
        char msg[2048];
        const int rc = io_run_child(load_ck, &a, msg, sizeof msg);
        TL_CHECK(rc == 0 && strstr(msg, "rlc: warning:") && strstr(msg, t->name), "--allow-nonfinite loads %s with a warning: %s",
                 DIRS[k], msg);
        free(d);
    }
    param_set_free(&ps);
    param_layout_free(&pl);
}

int main(void) {
    DIR_ = tl_tmpdir("harden");
    test_messages();
    test_json_helper();
    test_finite_die();
    test_trainer_state();
    test_prompt_vocab();
    test_optimizer_state();
    io_expect_die("lr schedule of 2^63 steps", sched_huge, NULL, "total steps 9223372036854775807", (const char *)NULL);
    test_tokenizer();
    test_model_config();
    test_safetensors();
    test_yaml_jsonl();
    test_nonfinite_load();
    test_finite();   // last: its parallel scan starts OpenMP threads, which a forked child would wait for
    param_layout_free(&OPT_PL);
    if (!tl_failed) tl_system("rm -rf '%s'", DIR_);
    free(DIR_);
    return tl_summary();
}
