// test_agent_sft.c: the SFT data of `rlc demo --tools` (rlc gen-task --format sft --tool-calls F, docs/demo.md):
//   - the rows mix the three kinds (bare answer, worked text, a calculator call), the same problems and final
//     answers as without --tool-calls, and each call's expression evaluates (rlc's calculator) to the answer;
//   - loaded as SFT text (rlc_sft_text_load, as `rlc sft` loads it) with the demo's tokenizer (`--fields text
//     --added-tokens` the tool markup), the trained tokens are exactly the assistant turns: the call turn through
//     its <|im_end|>, then the final answer with Qwen3's empty think block; the tool reply, the chat markup
//     between turns and the prompt carry loss mask 0. The expected turns are written out here by hand from the
//     row's fields (Qwen3's rendering of a Hermes call), not through the template engine;
//   - <tool_call>, </tool_call>, <tool_response>, </tool_response> are one token each;
//   - with the demo's tokenizer (train-tokenizer --added-tokens as a JSON list: the markup and the fixed text of
//     Qwen3's tools block, written out here from the template), each fixed text is one token, the block decodes back
//     to the same text, and the trained tokens decode to the same text as with the markup-only tokenizer.
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "data/dataset.h"
#include "rollout/env_calculator.h"
#include "testlib.h"
#include "tokenizer/tokenizer.h"

static const char *MARKUP[4] = {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"};
// The fixed text of Qwen3's tools block, before the first tool's schema and after the last (written out from the
// template): `rlc demo --tools` makes each one added token.
static const char *BLOCK[2] = {
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function "
    "signatures within <tools></tools> XML tags:\n<tools>",
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"};

// The trained spans of one conversation, written out from its messages: each assistant turn's text through
// <|im_end|> (a call turn: content, then the Hermes block; the last turn: Qwen3's empty think block first).
static int expected_spans(const cJSON *msgs, rlc_strbuf *out, int *n_calls) {
    int n = cJSON_GetArraySize(msgs), k = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *m = cJSON_GetArrayItem(msgs, i);
        if (strcmp(cJSON_GetObjectItem(m, "role")->valuestring, "assistant")) continue;
        const char *c = cJSON_GetObjectItem(m, "content")->valuestring;
        rlc_strbuf *s = &out[k++];
        if (i == n - 1) rlc_sb_puts(s, "<think>\n\n</think>\n\n");
        rlc_sb_puts(s, c);
        const cJSON *tc = cJSON_GetObjectItem(m, "tool_calls");
        for (const cJSON *t = tc ? tc->child : NULL; t; t = t->next) {
            const cJSON *f = cJSON_GetObjectItem(t, "function");
            const char *name = cJSON_GetObjectItem(f, "name")->valuestring;
            const char *expr = cJSON_GetObjectItem(cJSON_GetObjectItem(f, "arguments"), "expression")->valuestring;
            rlc_sb_printf(s, "\n<tool_call>\n{\"name\": \"%s\", \"arguments\": {\"expression\": \"%s\"}}\n</tool_call>", name, expr);
            (*n_calls)++;
        }
        rlc_sb_puts(s, "<|im_end|>");
    }
    return k;
}

int main(void) {
    const char *rlc = tl_rlc_bin();
    char *F = tl_tmpdir("agsft");
    const int N = 60;
    int rc = tl_system("%s gen-task --out %s/t.jsonl --n %d --seed 11 --format sft --answer-only 0.3 --tool-calls 0.6 >/dev/null && "
                       "%s gen-task --out %s/p.jsonl --n %d --seed 11 --format sft --answer-only 0.3 >/dev/null && "
                       "%s train-tokenizer --data %s/t.jsonl --fields text --out %s/tok --vocab-size 400 "
                       "--added-tokens '<tool_call>,</tool_call>,<tool_response>,</tool_response>' >/dev/null",
                       rlc, F, N, rlc, F, N, rlc, F, F);
    TL_CHECK(rc == 0, "gen-task --tool-calls and train-tokenizer --added-tokens (rc %d)", rc);
    // the demo's tokenizer: the markup and the block's fixed text as a JSON list (they hold commas and newlines)
    cJSON *al = cJSON_CreateArray();
    for (int i = 0; i < 4; i++) cJSON_AddItemToArray(al, cJSON_CreateString(MARKUP[i]));
    for (int i = 0; i < 2; i++) cJSON_AddItemToArray(al, cJSON_CreateString(BLOCK[i]));
    char *alj = cJSON_PrintUnformatted(al);
    cJSON_Delete(al);
    rc = rc ? rc : tl_system("%s train-tokenizer --data %s/t.jsonl --fields text --out %s/tok2 --vocab-size 400 --added-tokens '%s' >/dev/null",
                             rlc, F, F, alj);
    free(alj);
    TL_CHECK(rc == 0, "train-tokenizer --added-tokens as a JSON list (rc %d)", rc);
    {
        int bad = tl_system("%s train-tokenizer --data %s/t.jsonl --fields text --out %s/tok3 --added-tokens '[1]' 2>%s/e3", rlc, F, F, F);
        char *e3 = rlc_path_join(F, "e3");
        char *es = rlc_file_exists(e3) ? rlc_read_file(e3, NULL) : NULL;
        TL_CHECK(bad != 0 && es && strstr(es, "--added-tokens: not a JSON list of non-empty strings") && strchr(es, '\n') == es + strlen(es) - 1,
                 "--added-tokens '[1]': one error line (rc %d: %s)", bad, es ? es : "");
        free(es);
        free(e3);
    }
    if (rc != 0) return tl_summary();
    char *tp = rlc_path_join(F, "t.jsonl"), *pp = rlc_path_join(F, "p.jsonl"), *tk = rlc_path_join(F, "tok");
    rlc_tokenizer *tok = rlc_tok_load(tk, NULL);
    for (int i = 0; i < 4; i++) {
        rlc_ivec ids = {0};
        rlc_tok_encode(tok, MARKUP[i], strlen(MARKUP[i]), &ids);
        TL_CHECK(ids.n == 1 && ids.v[0] == rlc_tok_token_to_id(tok, MARKUP[i]), "%s is one added token (%lld ids)", MARKUP[i],
                 (long long)ids.n);
        rlc_iv_free(&ids);
    }
    // the demo's tokenizer: each fixed text of the block is one token, and a row's system turn (the whole block)
    // encodes to those two tokens around its schema, decoding back to the same text; the masks below hold with it
    char *tk2 = rlc_path_join(F, "tok2");
    rlc_tokenizer *tok2 = rlc_tok_load(tk2, NULL);
    for (int i = 0; i < 2; i++) {
        rlc_ivec ids = {0};
        rlc_tok_encode(tok2, BLOCK[i], strlen(BLOCK[i]), &ids);
        TL_CHECK(ids.n == 1 && ids.v[0] == rlc_tok_token_to_id(tok2, BLOCK[i]), "the block's fixed text %d is one added token (%lld ids)",
                 i, (long long)ids.n);
        rlc_iv_free(&ids);
    }
    {
        char *row = rlc_read_file(tp, NULL);
        *strchr(row, '\n') = 0;
        cJSON *r1 = cJSON_Parse(row);
        const char *blk = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(r1, "messages"), 0), "content")->valuestring;
        rlc_ivec a = {0}, b = {0};
        rlc_tok_encode(tok, blk, strlen(blk), &a);
        rlc_tok_encode(tok2, blk, strlen(blk), &b);
        char *back = rlc_tok_decode_str(tok2, b.v, b.n, 0);
        TL_CHECK(b.n >= 3 && b.v[0] == rlc_tok_token_to_id(tok2, BLOCK[0]) && b.v[b.n - 1] == rlc_tok_token_to_id(tok2, BLOCK[1]) &&
                 !strcmp(back, blk), "the tools block: fixed text, schema, fixed text; decodes to the same text");
        printf("tools block: %lld tokens with the markup tokens only, %lld with the block's fixed text as two more\n", (long long)a.n,
               (long long)b.n);
        free(back);
        rlc_iv_free(&a);
        rlc_iv_free(&b);
        cJSON_Delete(r1);
        free(row);
    }
    rlc_sft_text txt2;
    rlc_sft_text_load(&txt2, tp, tok2, 0, RLC_TRUNC_ERROR, -1);
    rlc_sft_text txt;
    rlc_sft_text_load(&txt, tp, tok, 0, RLC_TRUNC_ERROR, -1);   // as `rlc sft` loads it
    TL_CHECK(txt.n == N, "%lld SFT examples", (long long)txt.n);
    // the rows, and the same problems without --tool-calls
    char *ts = rlc_read_file(tp, NULL), *ps = rlc_read_file(pp, NULL);
    char *tsv = NULL, *psv = NULL;
    int kinds[3] = {0, 0, 0}, bad_rows = 0, bad_masks = 0, bad_obs = 0, bad_calc = 0, calls = 0;
    char *tl = strtok_r(ts, "\n", &tsv), *pl = strtok_r(ps, "\n", &psv);
    for (int r = 0; r < N && tl && pl; r++, tl = strtok_r(NULL, "\n", &tsv), pl = strtok_r(NULL, "\n", &psv)) {
        cJSON *t = cJSON_Parse(tl), *p = cJSON_Parse(pl);
        const cJSON *msgs = cJSON_GetObjectItem(t, "messages");
        const int nm = cJSON_GetArraySize(msgs);
        const char *resp = cJSON_GetObjectItem(p, "response")->valuestring, *q = cJSON_GetObjectItem(p, "prompt")->valuestring;
        const char *last = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, nm - 1), "content")->valuestring;
        // same question; same final line; the kind
        bad_rows += strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 1), "content")->valuestring, q) != 0;
        bad_rows += strcmp(strstr(resp, "#### "), strstr(last, "#### ")) != 0;
        if (nm == 3) kinds[strncmp(last, "#### ", 5) ? 1 : 0]++;
        else if (nm == 5) {
            kinds[2]++;
            const cJSON *f = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 2), "tool_calls"), 0), "function");
            const char *expr = cJSON_GetObjectItem(cJSON_GetObjectItem(f, "arguments"), "expression")->valuestring;
            rlc_strbuf v = {0};
            const char *obs = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 3), "content")->valuestring;
            bad_calc += rlc_calc_eval(expr, &v) != 0 || strcmp(v.s, obs) || strcmp(obs, strstr(last, "#### ") + 5);
            rlc_sb_free(&v);
        } else bad_rows++;
        // the trained spans
        rlc_strbuf want[2] = {{0}, {0}};
        int nw = expected_spans(msgs, want, &calls);
        const rlc_sft_example *ex = &txt.items[r];
        int k = 0;
        for (int64_t i = 0; i < ex->n;) {
            int64_t j = i;
            while (j < ex->n && ex->loss_mask[j] == ex->loss_mask[i]) j++;
            char *s = rlc_tok_decode_str(tok, ex->ids + i, j - i, 0);
            if (ex->loss_mask[i]) {
                if (k >= nw || strcmp(s, want[k].s)) {
                    if (bad_masks++ == 0) printf("row %d: trained span %d '%s', expected '%s'\n", r + 1, k, s, k < nw ? want[k].s : "(none)");
                }
                k++;
            } else if (nm == 5 && k == 1) {   // between the call turn and the answer: the tool turn, untrained
                const char *obs = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 3), "content")->valuestring;
                rlc_strbuf w = {0};
                rlc_sb_printf(&w, "\n<|im_start|>user\n<tool_response>\n%s\n</tool_response><|im_end|>\n<|im_start|>assistant\n", obs);
                if (strcmp(s, w.s) && bad_obs++ == 0) printf("row %d: untrained tool turn '%s'\n", r + 1, s);
                rlc_sb_free(&w);
            }
            free(s);
            i = j;
        }
        bad_masks += k != nw;
        for (int i = 0; i < 2; i++) rlc_sb_free(&want[i]);
        cJSON_Delete(t);
        cJSON_Delete(p);
    }
    // with the block's fixed text as tokens: the same trained text (each loss-mask-1 run decodes the same)
    int bad2 = txt2.n != txt.n;
    for (int64_t r = 0; r < txt.n && !bad2; r++) {
        rlc_strbuf s1 = {0}, s2 = {0};
        const rlc_sft_example *e1 = &txt.items[r], *e2 = &txt2.items[r];
        for (int64_t i = 0; i < e1->n; i++)
            if (e1->loss_mask[i]) rlc_tok_decode(tok, e1->ids + i, 1, 0, &s1);
        for (int64_t i = 0; i < e2->n; i++)
            if (e2->loss_mask[i]) rlc_tok_decode(tok2, e2->ids + i, 1, 0, &s2);
        bad2 = s1.n != s2.n || (s1.n && memcmp(s1.s, s2.s, s1.n));
        rlc_sb_free(&s1);
        rlc_sb_free(&s2);
    }
    TL_CHECK(!bad2, "with the block's fixed text as added tokens, the trained tokens decode to the same text");
    rlc_sft_text_free(&txt2);
    rlc_tok_free(tok2);
    free(tk2);
    printf("%d rows: %d bare answers, %d worked in text, %d calculator calls\n", N, kinds[0], kinds[1], kinds[2]);
    TL_CHECK(kinds[0] > 0 && kinds[1] > 0 && kinds[2] > 0 && kinds[0] + kinds[1] + kinds[2] == N, "all three kinds of row");
    TL_CHECK(calls == kinds[2], "one call per calculator row (%d)", calls);
    TL_CHECK(bad_rows == 0, "the same questions and final answers as without --tool-calls (%d rows differ)", bad_rows);
    TL_CHECK(bad_calc == 0, "each call's expression evaluates to the tool reply and the final answer (%d rows)", bad_calc);
    TL_CHECK(bad_masks == 0, "loss mask 1 on exactly the assistant turns (%d rows differ)", bad_masks);
    TL_CHECK(bad_obs == 0, "the tool turn between them has loss mask 0 (%d rows differ)", bad_obs);
    rlc_sft_text_free(&txt);
    rlc_tok_free(tok);
    free(ts); free(ps); free(tp); free(pp); free(tk);
    if (tl_failed == 0) tl_system("rm -rf %s", F);
    else printf("fixture kept in %s\n", F);
    free(F);
    return tl_summary();
}
