// test_tokenizer.c: the Qwen3 tokenizer against Hugging Face's Rust tokenizer (npm `tokenizers`) and
// the chat template against @huggingface/jinja rendering the real template:
//   - ids identical on every GSM8K train+test question and answer and on >= 5,000 hard strings;
//   - decode(encode(x)) == NFC(x) (== x for NFC text), decode identical to HF's on random ids with and
//     without skip_special_tokens, and streaming decode == whole decode;
//   - chat rendering byte-identical to the Jinja oracle (single/multi-turn, thinking on/off/unset).
// Skips with a message when the npm oracles (scripts/install-deps.sh) or ../shared/data are absent.
#include <utf8proc.h>

#include "test_tokenizer_util.h"

static void add_gsm8k(tt_strs *v, const char *path) {
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

static void test_known_vectors(rlc_tokenizer *t) {
    const char *q = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How "
                    "many clips did Natalia sell altogether in April and May?";
    static const int32_t want[] = {45, 4212, 685, 6088, 26111, 311, 220, 19, 23, 315, 1059, 4780, 304, 5813, 11, 323, 1221, 1340, 6088, 4279,
                                   438, 1657, 26111, 304, 3217, 13, 2585, 1657, 26111, 1521, 41601, 685, 4559, 30055, 304, 5813, 323, 3217, 30};
    rlc_ivec ids = {0};
    rlc_tok_encode(t, q, strlen(q), &ids);
    TL_CHECK(ids.n == 39 && !memcmp(ids.v, want, sizeof want), "spec §6 GSM8K vector (got %lld ids)", (long long)ids.n);
    // chat render of it, thinking default / disabled (spec §6: 47 and 51 ids)
    rlc_chat_msg m = {"user", q, NULL};
    rlc_strbuf s = {0};
    rlc_tok_chat_render(t, &m, 1, 1, -1, &s);
    ids.n = 0;
    rlc_tok_encode(t, s.s, s.n, &ids);
    TL_CHECK(ids.n == 47 && ids.v[0] == 151644 && ids.v[1] == 872 && ids.v[42] == 151645 && ids.v[46] == 198, "chat ids (47)");
    rlc_sb_clear(&s);
    rlc_tok_chat_render(t, &m, 1, 1, 0, &s);
    ids.n = 0;
    rlc_tok_encode(t, s.s, s.n, &ids);
    TL_CHECK(ids.n == 51 && ids.v[47] == 151667 && ids.v[48] == 271 && ids.v[49] == 151668 && ids.v[50] == 271, "no-think chat ids (51)");
    // single tokens from the spec
    static const struct { const char *s; int32_t id; } one[] = {{"\n", 198}, {"\n\n", 271}, {" ", 220}, {"  ", 256}, {"user", 872},
                                                                 {"assistant", 77091}, {"system", 8948}, {"####", 820}};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        ids.n = 0;
        rlc_tok_encode(t, one[i].s, strlen(one[i].s), &ids);
        TL_CHECK(ids.n == 1 && ids.v[0] == one[i].id, "%s -> %d", tt_show(one[i].s), one[i].id);
    }
    const rlc_tok_special *sp = rlc_tok_specials(t);
    TL_CHECK(sp->eos_id == 151645 && sp->pad_id == 151643 && sp->bos_id == -1, "eos/pad/bos from tokenizer_config.json");
    TL_CHECK(rlc_tok_is_stop(t, 151645), "<|im_end|> stops generation");
    {   // the official checkpoint also ships generation_config.json: eos ids [151645, 151643]
        rlc_tokenizer *t2 = rlc_tok_load(QWEN3_DIR "/tokenizer.json", NULL);
        char *tc = rlc_read_file(QWEN3_DIR "/tokenizer_config.json", NULL);
        rlc_tok_apply_config(t2, tc, "tokenizer_config.json", "{\"bos_token_id\": 151643, \"eos_token_id\": [151645, 151643], "
                             "\"pad_token_id\": 151643}", "generation_config.json");
        const rlc_tok_special *s2 = rlc_tok_specials(t2);
        TL_CHECK(s2->n_stop == 2 && s2->stop_ids[0] == 151645 && s2->stop_ids[1] == 151643 && s2->eos_id == 151645 &&
                 s2->bos_id == 151643 && s2->pad_id == 151643, "generation_config.json stop ids");
        TL_CHECK(!strcmp(rlc_tok_chat_kind(t2), "qwen3"), "template recognised after apply_config");
        free(tc);
        rlc_tok_free(t2);
    }
    TL_CHECK(rlc_tok_vocab_size(t) == 151669, "vocab size 151669 (got %lld)", (long long)rlc_tok_vocab_size(t));
    TL_CHECK(rlc_tok_id_to_token(t, 151700) == NULL && !strcmp(rlc_tok_id_to_token(t, 151667), "<think>"), "id_to_token");
    TL_CHECK(rlc_tok_is_special(t, 151645) && !rlc_tok_is_special(t, 151667), "special flags");
    TL_CHECK(rlc_tok_chat_kind(t) && !strcmp(rlc_tok_chat_kind(t), "qwen3"), "Qwen3 template recognised by sha256");
    // skip_special drops <|im_end|> but keeps <think>
    int32_t d[] = {151644, 872, 198, 151667, 271, 151668, 151645};
    char *a = rlc_tok_decode_str(t, d, 7, 0), *b = rlc_tok_decode_str(t, d, 7, 1);
    TL_CHECK(!strcmp(a, "<|im_start|>user\n<think>\n\n</think><|im_end|>"), "decode with specials: %s", tt_show(a));
    TL_CHECK(!strcmp(b, "user\n<think>\n\n</think>"), "decode skipping specials: %s", tt_show(b));
    free(a);
    free(b);
    // invalid UTF-8 input is encoded as if each maximal invalid subpart were U+FFFD
    rlc_ivec x = {0}, y = {0};
    rlc_tok_encode(t, "a\xff\xe2\x82" "b\xc0", 7, &x);
    rlc_tok_encode(t, "a\xEF\xBF\xBD\xEF\xBF\xBD" "b\xEF\xBF\xBD", 12, &y);
    TL_CHECK(x.n == y.n && !memcmp(x.v, y.v, (size_t)x.n * 4), "invalid UTF-8 -> U+FFFD before encoding");
    rlc_iv_free(&x);
    rlc_iv_free(&y);
    rlc_sb_free(&s);
    rlc_iv_free(&ids);
}

// Random id sequences that cut UTF-8 sequences, include special / added tokens and ids without a token.
static void random_ids(tl_rng *r, rlc_tokenizer *t, const tt_strs *texts, rlc_ivec *out) {
    out->n = 0;
    int mode = tt_rand(r, 3);
    if (mode == 0) {   // the encoding of a text, cut at random points
        const char *s = texts->s[tt_rand(r, (int)texts->n)];
        rlc_tok_encode(t, s, strlen(s), out);
        if (out->n > 2) {
            int64_t a = tt_rand(r, (int)out->n), b = a + tt_rand(r, (int)(out->n - a)) + 1;
            memmove(out->v, out->v + a, (size_t)(b - a) * sizeof(int32_t));
            out->n = b - a;
        }
    } else {
        int n = 1 + tt_rand(r, 20);
        for (int i = 0; i < n; i++) {
            int k = tt_rand(r, 10);
            int32_t id = k < 6 ? tt_rand(r, 151643) : k < 9 ? 151643 + tt_rand(r, 26) : 151669 + tt_rand(r, 267);
            if (mode == 2 && k < 6) id = 100000 + tt_rand(r, 51643);   // many multi-byte pieces up there
            rlc_iv_push(out, id);
        }
    }
}

static void test_decode_vs_hf(rlc_tokenizer *t, const tt_strs *texts, const char *dir) {
    tl_rng r;
    tl_rng_init(&r, 7);
    int n = getenv("RLC_SAN") && atoi(getenv("RLC_SAN")) ? 500 : 2000;
    rlc_ivec *seqs = rlc_calloc((size_t)n, sizeof(rlc_ivec));
    int *skip = rlc_calloc((size_t)n, sizeof(int));
    rlc_strbuf b = {0};
    for (int i = 0; i < n; i++) {
        do random_ids(&r, t, texts, &seqs[i]); while (seqs[i].n == 0);
        skip[i] = tt_rand(&r, 2);
        rlc_sb_puts(&b, "{\"ids\":[");
        for (int64_t k = 0; k < seqs[i].n; k++) rlc_sb_printf(&b, k ? ",%d" : "%d", seqs[i].v[k]);
        rlc_sb_printf(&b, "],\"skip\":%s}\n", skip[i] ? "true" : "false");
    }
    char in[512], out[512];
    snprintf(in, sizeof in, "%s/dec_in.jsonl", dir);
    snprintf(out, sizeof out, "%s/dec_out.jsonl", dir);
    FILE *f = fopen(in, "wb");
    fwrite(b.s, 1, b.n, f);
    fclose(f);
    char *abs = realpath(QWEN3_DIR "/tokenizer.json", NULL);
    int rc = tl_system("cd tests/node && RAYON_NUM_THREADS=1 node hf_tok.js decode '%s' '%s' '%s'", abs, in, out);
    free(abs);
    TL_CHECK(rc == 0, "HF decode oracle ran");
    int64_t bad = 0, bad_stream = 0;
    if (rc == 0) {
        char *txt = rlc_read_file(out, NULL);
        int i = 0;
        rlc_strbuf got = {0}, st = {0};
        for (char *line = strtok(txt, "\n"); line && i < n; line = strtok(NULL, "\n"), i++) {
            cJSON *j = cJSON_Parse(line);
            const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, "text");
            rlc_sb_clear(&got);
            rlc_tok_decode(t, seqs[i].v, seqs[i].n, skip[i], &got);
            if (!cJSON_IsString(w) || strcmp(got.s, w->valuestring)) {
                if (bad < 5) printf("  decode mismatch: rlc %s vs HF %s\n", tt_show(got.s), cJSON_IsString(w) ? tt_show(w->valuestring) : "?");
                bad++;
            }
            // streaming, one id at a time
            rlc_tok_stream s;
            rlc_tok_stream_init(&s, skip[i]);
            rlc_sb_clear(&st);
            for (int64_t k = 0; k < seqs[i].n; k++) rlc_tok_stream_push(&s, t, seqs[i].v[k], &st);
            rlc_tok_stream_finish(&s, &st);
            rlc_sb_reserve(&st, 0);
            if (strcmp(st.s, got.s)) {
                if (bad_stream < 5) printf("  stream mismatch: %s vs %s\n", tt_show(st.s), tt_show(got.s));
                bad_stream++;
            }
            cJSON_Delete(j);
        }
        TL_CHECK(i == n, "decode oracle lines %d of %d", i, n);
        free(txt);
        rlc_sb_free(&got);
        rlc_sb_free(&st);
    }
    TL_CHECK(bad == 0, "decode identical to HF on %d random id sequences (%lld differ)", n, (long long)bad);
    TL_CHECK(bad_stream == 0, "streaming decode == decode on %d sequences (%lld differ)", n, (long long)bad_stream);
    for (int i = 0; i < n; i++) rlc_iv_free(&seqs[i]);
    free(seqs);
    free(skip);
    rlc_sb_free(&b);
}

static void test_roundtrip(rlc_tokenizer *t, const tt_strs *texts) {
    int64_t bad = 0, nfc_same = 0;
    rlc_ivec ids = {0};
    for (int64_t i = 0; i < texts->n; i++) {
        const char *s = texts->s[i];
        ids.n = 0;
        rlc_tok_encode(t, s, strlen(s), &ids);
        char *d = rlc_tok_decode_str(t, ids.v, ids.n, 0);
        char *nfc = (char *)utf8proc_NFC((const utf8proc_uint8_t *)s);
        if (!strcmp(nfc, s)) nfc_same++;
        if (strcmp(d, nfc)) {
            if (bad < 5) printf("  roundtrip: %s -> %s\n", tt_show(s), tt_show(d));
            bad++;
        }
        free(d);
        free(nfc);
    }
    TL_CHECK(bad == 0, "decode(encode(x)) == NFC(x) on %lld strings (%lld already NFC, so == x); %lld differ",
             (long long)texts->n, (long long)nfc_same, (long long)bad);
    rlc_iv_free(&ids);
}

// ---- chat template vs @huggingface/jinja ----
typedef struct { const char *role, *content, *reasoning; } cmsg;

static void conv_json(rlc_strbuf *b, const cmsg *m, int n, int add_gen, int think) {
    rlc_sb_puts(b, "{\"messages\":[");
    for (int i = 0; i < n; i++) {
        rlc_sb_puts(b, i ? ",{\"role\":" : "{\"role\":");
        rlc_sb_json_str(b, m[i].role, strlen(m[i].role));
        rlc_sb_puts(b, ",\"content\":");
        rlc_sb_json_str(b, m[i].content, strlen(m[i].content));
        if (m[i].reasoning) {
            rlc_sb_puts(b, ",\"reasoning_content\":");
            rlc_sb_json_str(b, m[i].reasoning, strlen(m[i].reasoning));
        }
        rlc_sb_putc(b, '}');
    }
    rlc_sb_printf(b, "],\"add_generation_prompt\":%s", add_gen ? "true" : "false");
    if (think >= 0) rlc_sb_printf(b, ",\"enable_thinking\":%s", think ? "true" : "false");
    rlc_sb_puts(b, "}\n");
}

static void test_chat(rlc_tokenizer *t, const tt_strs *texts, const char *dir) {
    tl_rng r;
    tl_rng_init(&r, 11);
    static const char *AS[] = {"The answer is 4.", "<think>\nLet me think.\n</think>\n\nThe answer is 4.",
                               "<think>r1</think>ans", "\n\n<think>\n\nx\n\n</think>\n\n\nA\n", "</think>only close",
                               "a</think>b</think>c", "<think>a<think>b</think>c", "", "\nlead"};
    static const char *US[] = {"What is 2+2?", "<tool_response>\nok\n</tool_response>", "<tool_response>x", "hi\n", ""};
    static const char *RS[] = {NULL, NULL, NULL, "", "reason", "\nr\n"};
    enum { NCONV = 400 };
    cmsg conv[NCONV][8];
    int nm[NCONV], gen[NCONV], think[NCONV];
    rlc_strbuf b = {0};
    for (int c = 0; c < NCONV; c++) {
        int n = 1 + tt_rand(&r, 7), k = 0;
        if (tt_rand(&r, 2)) conv[c][k++] = (cmsg){"system", tt_rand(&r, 2) ? "You are helpful." : texts->s[tt_rand(&r, (int)texts->n)], NULL};
        for (; k < n; k++) {
            int role = tt_rand(&r, 10);
            const char *txt = tt_rand(&r, 3) ? NULL : texts->s[tt_rand(&r, (int)texts->n)];
            if (role < 4) conv[c][k] = (cmsg){"user", txt ? txt : US[tt_rand(&r, 5)], NULL};
            else if (role < 8) conv[c][k] = (cmsg){"assistant", txt ? txt : AS[tt_rand(&r, 9)], RS[tt_rand(&r, 6)]};
            else if (role < 9) conv[c][k] = (cmsg){"tool", txt ? txt : "{\"r\": 1}", NULL};
            else conv[c][k] = (cmsg){"system", "mid system", NULL};
        }
        if (c < 40) { conv[c][0] = (cmsg){"user", texts->s[c], NULL}; n = 1; }   // plenty of single-turn cases
        nm[c] = n;
        gen[c] = tt_rand(&r, 4) != 0;
        think[c] = tt_rand(&r, 3) - 1;
        conv_json(&b, conv[c], n, gen[c], think[c]);
    }
    char in[512], out[512];
    snprintf(in, sizeof in, "%s/chat_in.jsonl", dir);
    snprintf(out, sizeof out, "%s/chat_out.jsonl", dir);
    FILE *f = fopen(in, "wb");
    fwrite(b.s, 1, b.n, f);
    fclose(f);
    int rc = tl_system("cd tests/node && node chat_render.js '../../%s/tokenizer_config.json' '%s' '%s'", QWEN3_DIR, in, out);
    TL_CHECK(rc == 0, "jinja oracle ran");
    if (rc != 0) { rlc_sb_free(&b); return; }
    char *txt = rlc_read_file(out, NULL);
    int c = 0, bad = 0, multi = 0, nothink = 0;
    rlc_strbuf got = {0};
    tt_strs rendered = {0};
    for (char *line = strtok(txt, "\n"); line && c < NCONV; line = strtok(NULL, "\n"), c++) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, "text");
        rlc_chat_msg m[8];
        for (int i = 0; i < nm[c]; i++) m[i] = (rlc_chat_msg){conv[c][i].role, conv[c][i].content, conv[c][i].reasoning};
        rlc_sb_clear(&got);
        rlc_tok_chat_render(t, m, nm[c], gen[c], think[c], &got);
        rlc_sb_reserve(&got, 0);
        if (!cJSON_IsString(w) || strcmp(got.s, w->valuestring)) {
            if (bad < 3) {
                size_t d = 0;
                const char *ws = cJSON_IsString(w) ? w->valuestring : "";
                while (got.s[d] && got.s[d] == ws[d]) d++;
                size_t from = d > 40 ? d - 40 : 0;
                printf("  chat mismatch in conversation %d at byte %zu:\n    rlc: %s\n", c, d, tt_show(got.s + from));
                printf("    jinja: %s\n", cJSON_IsString(w) ? tt_show(ws + (from < strlen(ws) ? from : 0)) : line);
            }
            bad++;
        } else {
            tt_push(&rendered, got.s, got.n);
        }
        multi += nm[c] > 2;
        nothink += think[c] == 0;
        cJSON_Delete(j);
    }
    TL_CHECK(c == NCONV && bad == 0, "chat rendering byte-identical to @huggingface/jinja on %d conversations (%d multi-turn, "
             "%d with enable_thinking=false); %d differ", c, multi, nothink, bad);
    free(txt);
    // the rendered prompts tokenize as HF does
    rlc_ivec *want = tt_hf_encode(QWEN3_DIR "/tokenizer.json", &rendered, 0, dir);
    TL_CHECK(want != NULL, "HF oracle ran on rendered chats");
    if (want) {
        int64_t e = tt_compare_encode(t, &rendered, want, 0, "chat");
        TL_CHECK(e == 0, "rendered chat ids identical to HF on %lld prompts (%lld differ)", (long long)rendered.n, (long long)e);
    }
    tt_free_ids(want, rendered.n);
    tt_free(&rendered);
    rlc_sb_free(&got);
    rlc_sb_free(&b);
}

// The heap merge loop against the O(n^2) reference loop (opts.bpe_ref), also on long single words.
static void test_bpe_ref(rlc_tokenizer *t, const tt_strs *hard) {
    rlc_tok_opts o = {.bpe_ref = 1};
    rlc_tokenizer *ref = rlc_tok_load(QWEN3_DIR, &o);
    tt_strs s = {0};
    for (int64_t i = 0; i < hard->n; i++) tt_push(&s, hard->s[i], strlen(hard->s[i]));
    tl_rng r;
    tl_rng_init(&r, 3);
    rlc_strbuf b = {0};
    int nlong = getenv("RLC_SAN") && atoi(getenv("RLC_SAN")) ? 6 : 24;
    for (int i = 0; i < nlong; i++) {   // long words: letters only, so the regex keeps each as one piece
        rlc_sb_clear(&b);
        int n = 200 + tt_rand(&r, 1300), alpha = i % 3;
        for (int k = 0; k < n; k++) {
            if (alpha == 0) rlc_sb_putc(&b, (char)("etaoinshrdlu"[tt_rand(&r, 12)]));
            else if (alpha == 1) tt_put_cp(&b, 0x4E00 + (uint32_t)tt_rand(&r, 200));
            else rlc_sb_putc(&b, (char)(tt_rand(&r, 2) ? 'a' : 'b'));
        }
        tt_push(&s, b.s, b.n);
    }
    rlc_sb_free(&b);
    int64_t bad = 0;
    rlc_ivec x = {0}, y = {0};
    for (int64_t i = 0; i < s.n; i++) {
        x.n = y.n = 0;
        rlc_tok_encode(t, s.s[i], strlen(s.s[i]), &x);
        rlc_tok_encode(ref, s.s[i], strlen(s.s[i]), &y);
        bad += x.n != y.n || memcmp(x.v, y.v, (size_t)x.n * 4);
    }
    TL_CHECK(bad == 0, "heap BPE == reference BPE on %lld strings incl. %d long words (%lld differ)", (long long)s.n, nlong,
             (long long)bad);
    rlc_iv_free(&x);
    rlc_iv_free(&y);
    tt_free(&s);
    rlc_tok_free(ref);
}

int main(void) {
    if (!rlc_file_exists(QWEN3_DIR "/tokenizer.json") || !tt_have_node()) {
        tl_skip("npm oracles not installed (tests/node/node_modules; run scripts/install-deps.sh)");
        return tl_summary();
    }
    double t0 = rlc_now();
    rlc_tokenizer *t = rlc_tok_load(QWEN3_DIR, NULL);
    printf("loaded Qwen3 tokenizer.json in %.0f ms\n", (rlc_now() - t0) * 1e3);
    test_known_vectors(t);
    char *dir = tl_tmpdir("tok");

    int san = getenv("RLC_SAN") && atoi(getenv("RLC_SAN"));   // sanitizer run: smaller sizes
    tt_strs hard = {0};
    tt_hard_strings(&hard, san ? 2000 : 6000, 1234);
    rlc_ivec *want = tt_hf_encode(QWEN3_DIR "/tokenizer.json", &hard, 0, dir);
    TL_CHECK(want != NULL, "HF oracle ran");
    if (want) {
        int64_t bad = tt_compare_encode(t, &hard, want, 0, "hard");
        TL_CHECK(bad == 0, "ids identical to HF on %lld hard strings (%lld differ)", (long long)hard.n, (long long)bad);
    }
    tt_free_ids(want, hard.n);
    printf("hard strings done at %.1f s\n", rlc_now() - t0);

    tt_strs gsm = {0};
    const char *tr = "../shared/data/gsm8k/train.jsonl", *te = "../shared/data/gsm8k/test.jsonl";
    if (rlc_file_exists(tr) && rlc_file_exists(te)) {
        if (!san) add_gsm8k(&gsm, tr);   // the sanitizer run checks the test split only
        add_gsm8k(&gsm, te);
        want = tt_hf_encode(QWEN3_DIR "/tokenizer.json", &gsm, 0, dir);
        TL_CHECK(want != NULL, "HF oracle ran on GSM8K");
        if (want) {
            int64_t bad = tt_compare_encode(t, &gsm, want, 0, "gsm8k");
            TL_CHECK(bad == 0, "ids identical to HF on all %lld GSM8K %s questions and answers (%lld differ)",
                     (long long)gsm.n, san ? "test" : "train+test", (long long)bad);
        }
        tt_free_ids(want, gsm.n);
        test_roundtrip(t, &gsm);
        printf("gsm8k done at %.1f s\n", rlc_now() - t0);
    } else {
        tl_skip("../shared/data/gsm8k absent: GSM8K comparison skipped");
    }
    test_roundtrip(t, &hard);
    printf("%s done at %.1f s\n", "test_roundtrip", rlc_now() - t0);
    test_bpe_ref(t, &hard);
    printf("%s done at %.1f s\n", "test_bpe_ref", rlc_now() - t0);
    test_decode_vs_hf(t, &hard, dir);
    printf("%s done at %.1f s\n", "test_decode_vs_hf", rlc_now() - t0);
    test_chat(t, &hard, dir);
    printf("%s done at %.1f s\n", "test_chat", rlc_now() - t0);

    tl_system("rm -rf '%s'", dir);
    free(dir);
    tt_free(&hard);
    tt_free(&gsm);
    rlc_tok_free(t);
    return tl_summary();
}
