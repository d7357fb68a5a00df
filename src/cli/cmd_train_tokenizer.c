// cmd_train_tokenizer.c: `rlc train-tokenizer`: learn a byte-level BPE tokenizer from JSONL text.
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/common.h"
#include "data/dataset.h"
#include "data/jsonl.h"
#include "tokenizer/bpe_train.h"

static const char *USAGE =
    "rlc train-tokenizer --data FILE.jsonl --out DIR [--vocab-size N] [--min-frequency F] [--fields question,answer]\n"
    "                    [--added-tokens T1,T2,... | --added-tokens '[\"T1\", \"T2\", ...]']";

int cmd_train_tokenizer(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (cli_flag(&a, "help")) { printf("usage: %s\n", USAGE); cli_args_free(&a); return 0; }
    const char *data = cli_opt_req(&a, "data");
    const char *out = cli_opt_req(&a, "out");
    bpe_train_opts o = {(int)cli_int(&a, "vocab-size", 1024, 256, 1 << 20), (int)cli_int(&a, "min-frequency", 2, 1, 1 << 30)};
    const char *fields_opt = cli_opt(&a, "fields");
    char *fields = rlc_strdup(fields_opt ? fields_opt : "question,answer");
    // more added tokens after the chat ones (Qwen3's tool markup: <tool_call>,</tool_call>,<tool_response>,...)
    const char *added_opt = cli_opt(&a, "added-tokens");
    char *added_s = rlc_strdup(added_opt ? added_opt : "");
    const char *added[64];
    int n_added = 0;
    // a JSON list of strings for tokens holding commas or newlines (a chat template's fixed text)
    cJSON *added_json = added_s[0] == '[' ? cJSON_Parse(added_s) : NULL;
    if (added_s[0] == '[') {
        if (!cJSON_IsArray(added_json)) rlc_die("train-tokenizer: --added-tokens: not a JSON list of strings");
        for (const cJSON *t = added_json->child; t; t = t->next) {
            if (!cJSON_IsString(t) || !t->valuestring[0]) rlc_die("train-tokenizer: --added-tokens: not a JSON list of non-empty strings");
            if (n_added == 64) rlc_die("train-tokenizer: --added-tokens: at most 64 tokens");
            added[n_added++] = t->valuestring;
        }
    }
    for (char *sv = NULL, *tok = added_json ? NULL : strtok_r(added_s, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
        if (n_added == 64) rlc_die("train-tokenizer: --added-tokens: at most 64 tokens");
        added[n_added++] = tok;
    }
    cli_check_unknown(&a, USAGE);
    const char *names[16];
    int nf = 0;
    for (char *tok = strtok(fields, ","); tok && nf < 16; tok = strtok(NULL, ",")) names[nf++] = tok;
    char **texts = NULL;
    int64_t n = 0, cap = 0;
    rlc_jsonl r;
    rlc_jsonl_open(&r, data, "training text");
    const cJSON *o2;
    while ((o2 = rlc_jsonl_next(&r, "{\"<field>\": \"text\", ...}"))) {
        for (int k = 0; k < nf; k++) {
            cJSON *v = cJSON_GetObjectItemCaseSensitive(o2, names[k]);
            if (!v) continue;
            if (!cJSON_IsString(v)) rlc_die("%s:%lld: field \"%s\" is not a string", data, (long long)r.line, names[k]);
            if (n + 2 > cap) { cap = cap ? 2 * cap : 1024; texts = rlc_realloc(texts, sizeof(char *) * (size_t)cap); }
            texts[n++] = rlc_strdup(v->valuestring);
        }
    }
    rlc_jsonl_close(&r);
    if (n == 0) rlc_die("%s: no text in fields %s", data, fields_opt ? fields_opt : "question,answer");
    // The words the chat template and verl's GSM8K prompt add around every question.
    const char *extra[] = {"user\n", "assistant\n", "system\n", "\n\n", " " RLC_GSM8K_INSTRUCTION};
    for (int k = 0; k < 5; k++) {
        if (n + 1 > cap) { cap = 2 * cap + 8; texts = rlc_realloc(texts, sizeof(char *) * (size_t)cap); }
        texts[n++] = rlc_strdup(extra[k]);
    }
    double t0 = rlc_now();
    int merges = bpe_train_write_added((const char *const *)texts, n, &o, added, n_added, out);
    printf("rlc train-tokenizer: %d merges from %lld texts in %.2f s; wrote %s/tokenizer.json\n", merges, (long long)n,
           rlc_now() - t0, out);
    for (int64_t i = 0; i < n; i++) free(texts[i]);
    free(texts);
    free(fields);
    free(added_s);
    cJSON_Delete(added_json);
    cli_args_free(&a);
    return 0;
}
