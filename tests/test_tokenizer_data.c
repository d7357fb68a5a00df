// test_tokenizer_data.c: the dataset loaders (src/data/dataset.c) on the Qwen3 tokenizer: raw GSM8K
// lines (verl's prompt and ground truth), verl rows, truncation / filter_overlong_prompts, malformed
// lines (error naming path:line), and the SFT text loader's loss masks. With ../shared/data present,
// the whole GSM8K test split is loaded and its prompt ids are checked against HF's tokenizer.
#include "data/dataset.h"
#include "test_tokenizer_util.h"

static rlc_tokenizer *TOK;
static char *DIR_;

typedef struct { const char *path; rlc_data_opts o; } load_arg;
static void do_load(void *p) {
    load_arg *a = p;
    rlc_dataset ds;
    rlc_dataset_load(&ds, a->path, TOK, &a->o);
    rlc_dataset_free(&ds);
}

static void test_ground_truth(void) {
    static const struct { const char *a, *want; } C[] = {
        {"so 3+4=7\n#### 72", "72"}, {"#### 1,234", "1234"}, {"#### -5", "-5"}, {"#### 3.50", "3.50"},
        {"x #### - 5\n#### 8", "8"}, {"no answer", NULL}, {"#### $5", NULL}, {"####72", NULL}, {"#### 72.", "72."},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        char *g = rlc_gsm8k_ground_truth(C[i].a);
        TL_CHECK((g == NULL && C[i].want == NULL) || (g && C[i].want && !strcmp(g, C[i].want)), "ground truth of %s: %s",
                 tt_show(C[i].a), g ? g : "(none)");
        free(g);
    }
}

static void test_gsm8k_lines(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/train.jsonl", DIR_);
    tt_write(path,
             "{\"question\": \"Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?\", \"answer\": \"Natalia sold 48/2 = <<48/2=24>>24 clips in May.\\n#### 72\"}\n"
             "\n"
             "{\"question\": \"Q2?\", \"answer\": \"#### 1,000\"}\n");
    rlc_dataset ds;
    rlc_dataset_load(&ds, path, TOK, NULL);
    TL_CHECK(ds.n == 2, "2 rows (blank line skipped)");
    rlc_prompt *p = &ds.items[0];
    const char *want_text = "<|im_start|>user\nNatalia sold clips to 48 of her friends in April, and then she sold half as many "
                            "clips in May. How many clips did Natalia sell altogether in April and May? Let's think step by step "
                            "and output the final answer after \"####\".<|im_end|>\n<|im_start|>assistant\n";
    TL_CHECK(!strcmp(p->prompt_text, want_text), "GSM8K prompt text: %s", tt_show(p->prompt_text));
    TL_CHECK(!strcmp(p->ground_truth, "72") && !strcmp(ds.items[1].ground_truth, "1000"), "ground truths");
    TL_CHECK(!strcmp(p->data_source, "openai/gsm8k"), "data_source");
    TL_CHECK(strstr(p->extra_info_json, "\"split\":\"train\"") && strstr(p->extra_info_json, "\"index\":0") &&
             strstr(ds.items[1].extra_info_json, "\"index\":1"), "extra_info %s", p->extra_info_json);
    TL_CHECK(p->line == 1 && ds.items[1].line == 3, "line numbers");
    rlc_ivec ids = {0};
    rlc_tok_encode(TOK, want_text, strlen(want_text), &ids);
    TL_CHECK(ids.n == p->n_ids && !memcmp(ids.v, p->ids, (size_t)ids.n * 4), "prompt ids = encode(prompt text), %lld ids",
             (long long)p->n_ids);
    TL_CHECK(p->ids[0] == 151644 && p->ids[p->n_ids - 1] == 198, "prompt starts <|im_start|>, ends \\n");
    rlc_iv_free(&ids);
    int64_t full = p->n_ids;
    rlc_dataset_free(&ds);

    // truncation and filtering
    rlc_data_opts o;
    rlc_data_opts_default(&o);
    o.max_prompt_length = 20;
    o.truncation = RLC_TRUNC_LEFT;
    rlc_dataset_load(&ds, path, TOK, &o);
    TL_CHECK(ds.items[0].n_ids == 20 && ds.items[0].n_ids_full == full && ds.items[0].ids[19] == 198 && ds.n_truncated >= 1,
             "left truncation keeps the last 20");
    rlc_dataset_free(&ds);
    o.truncation = RLC_TRUNC_RIGHT;
    rlc_dataset_load(&ds, path, TOK, &o);
    TL_CHECK(ds.items[0].n_ids == 20 && ds.items[0].ids[0] == 151644, "right truncation keeps the first 20");
    rlc_dataset_free(&ds);
    o.truncation = RLC_TRUNC_MIDDLE;
    rlc_dataset_load(&ds, path, TOK, &o);
    TL_CHECK(ds.items[0].n_ids == 20 && ds.items[0].ids[0] == 151644 && ds.items[0].ids[19] == 198, "middle truncation");
    rlc_dataset_free(&ds);
    o.filter_overlong_prompts = 1;
    o.max_prompt_length = 30;
    rlc_dataset_load(&ds, path, TOK, &o);
    TL_CHECK(ds.n == 1 && ds.n_filtered == 1 && !strcmp(ds.items[0].ground_truth, "1000"), "filter_overlong_prompts drops the long row");
    rlc_dataset_free(&ds);
    // truncation=error dies naming the row
    load_arg a = {path, o};
    a.o.filter_overlong_prompts = 0;
    a.o.truncation = RLC_TRUNC_ERROR;
    char msg[2048];
    int rc = tt_expect_die(do_load, &a, msg, sizeof msg);
    TL_CHECK(rc == 1 && strstr(msg, "train.jsonl:1:") && strstr(msg, "max_prompt_length=30"), "truncation=error: %s", msg);
}

static void test_verl_rows(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/rows.jsonl", DIR_);
    tt_write(path,
             "{\"data_source\": \"openai/gsm8k\", \"prompt\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", "
             "\"content\": \"2+2?\"}], \"ability\": \"math\", \"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"4\"}, "
             "\"extra_info\": {\"split\": \"test\", \"index\": 7}}\n"
             "{\"data_source\": \"x\", \"prompt\": [{\"role\": \"user\", \"content\": \"hi\"}], \"reward_model\": {\"ground_truth\": 12}}\n");
    rlc_data_opts o;
    rlc_data_opts_default(&o);
    o.enable_thinking = 0;
    rlc_dataset ds;
    rlc_dataset_load(&ds, path, TOK, &o);
    TL_CHECK(ds.n == 2, "2 verl rows");
    TL_CHECK(!strcmp(ds.items[0].prompt_text,
                     "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"),
             "verl row prompt with enable_thinking=false: %s", tt_show(ds.items[0].prompt_text));
    TL_CHECK(!strcmp(ds.items[0].ground_truth, "4") && !strcmp(ds.items[1].ground_truth, "12"), "ground truths (string, number)");
    TL_CHECK(!strcmp(ds.items[0].extra_info_json, "{\"split\":\"test\",\"index\":7}") && !strcmp(ds.items[1].extra_info_json, "{}"),
             "extra_info json");
    TL_CHECK(strstr(ds.items[0].messages_json, "\"Be brief.\"") != NULL, "messages json kept");
    rlc_dataset_free(&ds);

    // malformed lines name path:line
    static const char *BAD[][2] = {
        {"{\"question\": \"q\", \"answer\": \"#### 1\"}\n{oops\n", ":2: invalid JSON"},
        {"{\"question\": \"q\", \"answer\": \"no final\"}\n", ":1: GSM8K answer has no"},
        {"{\"prompt\": \"text\", \"data_source\": \"x\"}\n", ":1: \"prompt\" must be a list"},
        {"{\"prompt\": [{\"role\": \"user\", \"content\": \"x\"}]}\n", ":1: missing string \"data_source\""},
        // a message without content: the chat template's own error (jinja2's words), on the line's one error line
        {"{\"prompt\": [{\"role\": \"user\"}], \"data_source\": \"x\"}\n", "chat_template:20: 'dict object' has no attribute 'content'"},
        {"{\"text\": \"x\"}\n", ":1: expected a verl row"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        char bp[512], msg[2048];
        snprintf(bp, sizeof bp, "%s/bad%zu.jsonl", DIR_, i);
        tt_write(bp, BAD[i][0]);
        load_arg a = {bp, {0}};
        rlc_data_opts_default(&a.o);
        int rc = tt_expect_die(do_load, &a, msg, sizeof msg);
        TL_CHECK(rc == 1 && strstr(msg, BAD[i][1]) && strstr(msg, bp) && strchr(msg, '\n') == msg + strlen(msg) - 1,
                 "bad line %zu: one-line error containing '%s': %s", i, BAD[i][1], msg);
    }
}

static void test_sft_text(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/sft.jsonl", DIR_);
    tt_write(path,
             "{\"prompt\": \"2+2?\", \"response\": \"4\"}\n"
             "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"a\"}, {\"role\": "
             "\"assistant\", \"content\": \"<think>r</think>b\"}, {\"role\": \"user\", \"content\": \"c\"}, {\"role\": \"assistant\", "
             "\"content\": \"d\"}]}\n");
    rlc_sft_text s;
    rlc_sft_text_load(&s, path, TOK, 0, RLC_TRUNC_ERROR, -1);
    TL_CHECK(s.n == 2, "2 SFT examples");
    // prompt/response: mask = 1 exactly on the response ids and the eos
    rlc_sft_example *e = &s.items[0];
    rlc_strbuf pt = {0};
    rlc_chat_msg m = {"user", "2+2?", NULL};
    rlc_tok_chat_render(TOK, &m, 1, 1, -1, &pt);
    rlc_ivec pid = {0};
    rlc_tok_encode(TOK, pt.s, pt.n, &pid);
    int ok = e->n == pid.n + 2 && e->ids[pid.n] == 19 && e->ids[pid.n + 1] == 151645;
    for (int64_t i = 0; i < e->n; i++) ok &= e->loss_mask[i] == (i >= pid.n);
    TL_CHECK(ok, "prompt/response example: prompt mask 0, response '4' + <|im_end|> mask 1 (n=%lld)", (long long)e->n);
    // messages: the masked tokens decode to each assistant turn's rendered body
    e = &s.items[1];
    rlc_ivec sel = {0};
    rlc_strbuf all = {0};
    int runs = 0;
    for (int64_t i = 0; i < e->n; i++) {
        if (e->loss_mask[i]) rlc_iv_push(&sel, e->ids[i]);
        if (e->loss_mask[i] && (i == 0 || !e->loss_mask[i - 1])) runs++;
    }
    rlc_tok_decode(TOK, sel.v, sel.n, 0, &all);
    TL_CHECK(runs == 2 && !strcmp(all.s, "b<|im_end|><think>\n\n</think>\n\nd<|im_end|>"),
             "multi-turn mask covers the assistant turns (earlier reasoning stripped): %d runs, %s", runs, tt_show(all.s));
    rlc_sft_text_free(&s);
    rlc_sft_text_load(&s, path, TOK, 10, RLC_TRUNC_LEFT, -1);
    TL_CHECK(s.items[0].n == 10 && s.items[0].ids[9] == 151645 && s.n_truncated == 2, "SFT left truncation to 10");
    rlc_sft_text_free(&s);
    rlc_sb_free(&pt);
    rlc_sb_free(&all);
    rlc_iv_free(&pid);
    rlc_iv_free(&sel);
}

static void test_full_gsm8k(void) {
    const char *path = "../shared/data/gsm8k/test.jsonl";
    if (!rlc_file_exists(path)) { tl_skip("../shared/data/gsm8k absent: full-split load skipped"); return; }
    rlc_data_opts o;
    rlc_data_opts_default(&o);
    o.max_prompt_length = 1024;
    double t0 = rlc_now();
    rlc_dataset ds;
    rlc_dataset_load(&ds, path, TOK, &o);
    printf("loaded %lld GSM8K test prompts in %.0f ms (longest %lld tokens)\n", (long long)ds.n, (rlc_now() - t0) * 1e3,
           (long long)ds.max_len_seen);
    TL_CHECK(ds.n == 1319, "GSM8K test has 1319 rows (got %lld)", (long long)ds.n);
    tt_strs texts = {0};
    int gt_ok = 1;
    for (int64_t i = 0; i < ds.n; i++) {
        tt_push(&texts, ds.items[i].prompt_text, strlen(ds.items[i].prompt_text));
        gt_ok &= ds.items[i].ground_truth && ds.items[i].ground_truth[0] && !strchr(ds.items[i].ground_truth, ',');
    }
    TL_CHECK(gt_ok, "every row has a comma-free ground truth");
    rlc_ivec *want = tt_hf_encode(QWEN3_DIR "/tokenizer.json", &texts, 0, DIR_);
    TL_CHECK(want != NULL, "HF oracle ran");
    if (want) {
        int64_t bad = 0;
        for (int64_t i = 0; i < ds.n; i++)
            bad += want[i].n != ds.items[i].n_ids || memcmp(want[i].v, ds.items[i].ids, (size_t)want[i].n * 4);
        TL_CHECK(bad == 0, "all %lld prompt id lists identical to HF (%lld differ)", (long long)ds.n, (long long)bad);
    }
    tt_free_ids(want, texts.n);
    tt_free(&texts);
    rlc_dataset_free(&ds);
}

int main(void) {
    if (!rlc_file_exists(QWEN3_DIR "/tokenizer.json") || !tt_have_node()) {
        tl_skip("npm oracles not installed (tests/node/node_modules; run scripts/install-deps.sh)");
        return tl_summary();
    }
    TOK = rlc_tok_load(QWEN3_DIR, NULL);
    DIR_ = tl_tmpdir("tokdata");
    test_ground_truth();
    test_gsm8k_lines();
    test_verl_rows();
    test_sft_text();
    test_full_gsm8k();
    tl_system("rm -rf '%s'", DIR_);
    free(DIR_);
    rlc_tok_free(TOK);
    return tl_summary();
}
