// cmd_tokenize.c: `rlc tokenize`: encode text, render+encode chats, or decode ids, stdin -> JSONL.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/common.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "tokenizer/tokenizer.h"

static const char USAGE[] =
    "rlc tokenize --tokenizer DIR|tokenizer.json [--chat | --decode] [options] < input > output.jsonl\n"
    "  encode (default): each stdin line is text, or a JSON object {\"text\": ...}; writes {\"ids\": [...]}\n"
    "    --whole                 the whole of stdin is one text\n"
    "    --add-special-tokens    apply the post-processor template (e.g. a BOS)\n"
    "  --chat: each line is a JSON messages list or {\"messages\": [...], \"tools\": [...], \"add_generation_prompt\": B,\n"
    "          \"chat_template_kwargs\": {...}}, rendered as transformers' apply_chat_template; writes {\"text\", \"ids\"}\n"
    "          (the ids encode the text without special tokens: the template writes its own BOS)\n"
    "    --no-generation-prompt  add_generation_prompt=False (default True; a line's own value wins)\n"
    "    --enable-thinking B     pass enable_thinking=true|false to the template (default: not passed)\n"
    "    --chat-template T       auto (the checkpoint's template) | qwen3 | plain (contents joined by \\n) | FILE.jinja\n"
    "  --decode: each line is a JSON list of ids or {\"ids\": [...]}; writes {\"text\": ...}\n"
    "    --skip-special-tokens   drop special tokens (as decode(skip_special_tokens=True))";

static void write_ids(rlc_strbuf *o, const rlc_ivec *ids) {
    rlc_sb_puts(o, "\"ids\":[");
    for (int64_t i = 0; i < ids->n; i++) rlc_sb_printf(o, i ? ",%d" : "%d", ids->v[i]);
    rlc_sb_putc(o, ']');
}

int cmd_tokenize(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (cli_flag(&a, "help")) { printf("usage: %s\n", USAGE); cli_args_free(&a); return 0; }
    const char *dir = cli_opt_req(&a, "tokenizer");
    int chat = cli_flag(&a, "chat"), decode = cli_flag(&a, "decode"), whole = cli_flag(&a, "whole");
    int add_special = cli_flag(&a, "add-special-tokens"), skip = cli_flag(&a, "skip-special-tokens");
    int no_gen = cli_flag(&a, "no-generation-prompt");
    const char *think = cli_opt(&a, "enable-thinking");
    const char *mode = cli_opt(&a, "chat-template");
    cli_check_unknown(&a, USAGE);
    if (chat && decode) rlc_die("tokenize: --chat and --decode are exclusive; usage: %s", USAGE);
    int enable_thinking = -1;
    if (think) {
        if (!strcmp(think, "true")) enable_thinking = 1;
        else if (!strcmp(think, "false")) enable_thinking = 0;
        else rlc_die("tokenize: --enable-thinking expects true or false, got '%s'", think);
    }
    rlc_tok_opts opts = {0};
    rlc_tok_opts_chat_template(&opts, mode, "tokenize: --chat-template");
    cJSON *kwargs = cJSON_CreateObject();
    if (enable_thinking >= 0) cJSON_AddBoolToObject(kwargs, "enable_thinking", enable_thinking);
    rlc_tokenizer *t = rlc_tok_load(dir, &opts);

    rlc_strbuf in = {0}, out = {0}, txt = {0}, err = {0};
    rlc_ivec ids = {0};
    if (whole) {
        char buf[65536];
        size_t k;
        while ((k = fread(buf, 1, sizeof buf, stdin)) > 0) rlc_sb_append(&in, buf, k);
        if (chat || decode) rlc_die("tokenize: --whole applies to plain encoding only");
        rlc_tok_encode_ex(t, in.s ? in.s : "", in.n, add_special, &ids);
        rlc_sb_putc(&out, '{');
        write_ids(&out, &ids);
        rlc_sb_puts(&out, "}\n");
        fwrite(out.s, 1, out.n, stdout);
    } else {
        char *line = NULL;
        size_t cap = 0;
        ssize_t len;
        long long lineno = 0;
        while ((len = getline(&line, &cap, stdin)) >= 0) {
            lineno++;
            if (len > 0 && line[len - 1] == '\n') line[--len] = 0;
            if (len > 0 && line[len - 1] == '\r' && (chat || decode)) line[--len] = 0;
            rlc_sb_clear(&out);
            ids.n = 0;
            rlc_sb_clear(&txt);
            if (!decode && !chat && (len == 0 || line[0] != '{')) {
                rlc_tok_encode_ex(t, line, (size_t)len, add_special, &ids);
                rlc_sb_putc(&out, '{');
                write_ids(&out, &ids);
                rlc_sb_puts(&out, "}\n");
                fwrite(out.s, 1, out.n, stdout);
                continue;
            }
            char where[64], jerr[512];
            snprintf(where, sizeof where, "stdin:%lld", lineno);
            cJSON *j = rlc_json_parse_err(line, (size_t)len, where, jerr, sizeof jerr);
            if (!j) rlc_die("%s", jerr);
            if (decode) {
                const cJSON *arr = cJSON_IsArray(j) ? j : cJSON_GetObjectItemCaseSensitive(j, "ids"), *x;
                if (!cJSON_IsArray(arr)) rlc_die("stdin:%lld: expected a list of ids or {\"ids\": [...]}", lineno);
                cJSON_ArrayForEach(x, arr) {
                    if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > INT32_MAX ||
                        x->valuedouble != (double)(int64_t)x->valuedouble)
                        rlc_die("stdin:%lld: ids must be non-negative integers", lineno);
                    rlc_iv_push(&ids, (int32_t)x->valuedouble);
                }
                rlc_tok_decode(t, ids.v, ids.n, skip, &txt);
                rlc_sb_puts(&out, "{\"text\":");
                rlc_sb_json_str(&out, txt.s ? txt.s : "", txt.n);
                rlc_sb_puts(&out, "}\n");
            } else if (chat) {
                rlc_sb_clear(&err);
                if (rlc_tok_chat_render_line(t, j, !no_gen, kwargs, &txt, &err) != 0)
                    rlc_die("stdin:%lld: %s", lineno, err.s);
                rlc_tok_encode(t, txt.s ? txt.s : "", txt.n, &ids);
                rlc_sb_puts(&out, "{\"text\":");
                rlc_sb_json_str(&out, txt.s ? txt.s : "", txt.n);
                rlc_sb_putc(&out, ',');
                write_ids(&out, &ids);
                rlc_sb_puts(&out, "}\n");
            } else {
                const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "text");
                if (!cJSON_IsString(s)) rlc_die("stdin:%lld: expected {\"text\": string}", lineno);
                rlc_tok_encode_ex(t, s->valuestring, strlen(s->valuestring), add_special, &ids);
                rlc_sb_putc(&out, '{');
                write_ids(&out, &ids);
                rlc_sb_puts(&out, "}\n");
            }
            cJSON_Delete(j);
            fwrite(out.s, 1, out.n, stdout);
        }
        free(line);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) rlc_die("tokenize: error writing stdout");
    rlc_sb_free(&in);
    rlc_sb_free(&out);
    rlc_sb_free(&txt);
    rlc_sb_free(&err);
    rlc_iv_free(&ids);
    cJSON_Delete(kwargs);
    rlc_tok_free(t);
    cli_args_free(&a);
    return 0;
}
