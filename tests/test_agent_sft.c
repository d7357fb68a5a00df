// test_agent_sft.c: the SFT data of `rlc demo --tools` (rlc gen-task --format sft --tool-calls F, docs/demo.md):
//   - the rows mix the three kinds (bare answer, worked text, a calculator call), the same problems and final
//     answers as without --tool-calls, and each call's expression evaluates (rlc's calculator) to the answer;
//   - loaded as SFT text (rlc_sft_text_load, as `rlc sft` loads it) with the demo's tokenizer (`--fields text
//     --added-tokens` the tool markup), the trained tokens are exactly the assistant turns: the call turn through
//     its <|im_end|>, then the final answer with Qwen3's empty think block; the tool reply, the chat markup
//     between turns and the prompt carry loss mask 0. The expected turns are written out here by hand from the
//     row's fields (Qwen3's rendering of a Hermes call), not through the template engine;
//   - <tool_call>, </tool_call>, <tool_response>, </tool_response> are one token each.
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
