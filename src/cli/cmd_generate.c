// cmd_generate.c: `rlc generate`: sample responses with the rollout engine (paged KV cache, prompt
// sharing, continuous batching).
//
// Input JSONL, one prompt per line: {"prompt": "text"} (encoded as is), {"messages": [{"role", "content"}, ...]}
// (the checkpoint's chat template with add_generation_prompt) or {"input_ids": [...]}. Output JSONL, one line
// per sample in prompt order: {"prompt_index", "sample_index", "text", "ids", "logprobs", "finish_reason"};
// text is the response decoded with skip_special_tokens (as verl's reward manager does), null without a
// tokenizer; logprobs are log_softmax(logits / T) of each token (T = 1 for greedy at temperature 0).
// Stop tokens: the config's eos ids plus the tokenizer's eos / generation_config eos ids. Line i's random
// streams are (seed, i, sample), so a prompt samples the same tokens whatever else is in the file.
// The whole input is validated before the weights are loaded; the output is written atomically.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cli/cli.h"
#include "core/atomic_writer.h"
#include "core/common.h"
#include "core/strbuf.h"
#include "data/dataset.h"
#include "data/jsonl.h"
#include "io/checkpoint.h"
#include "io/hf_cache.h"
#include "io/peft.h"
#include "model/decoder.h"
#include "rollout/engine.h"
#include "tokenizer/tokenizer.h"

static const char *USAGE =
    "rlc generate --model DIR|ORG/NAME --prompts IN.jsonl --out OUT.jsonl [--n N] [--temperature T] [--top-p P] [--top-k K] "
    "[--greedy] [--max-new-tokens M] [--seed S] [--kv-cache-bytes B] [--threads N] [--ignore-eos] [--no-prompt-sharing] "
    "[--bf16-weights] [--kv-cache-dtype fp32|bf16] [--max-num-seqs N] [--max-batched-tokens N] [--tokenizer DIR] "
    "[--chat-template auto|qwen3|plain|FILE.jinja] [--enable-thinking true|false] [--adapter DIR [--merge-adapter]] "
    "[--allow-nonfinite]";

typedef struct {
    int n;
    int32_t **ids;
    int64_t *len;
} prompt_set;

static void read_prompts(prompt_set *ps, const char *path, rlc_tokenizer *tok, const char *tok_dir, int enable_thinking,
                         const model_config *cfg) {
    memset(ps, 0, sizeof *ps);
    int cap = 0;
    rlc_strbuf sb = {0}, err = {0};
    rlc_jsonl r;
    rlc_jsonl_open(&r, path, "prompts");
    const cJSON *o;
    while ((o = rlc_jsonl_next(&r, "{\"prompt\": ...}, {\"messages\": [...]} or {\"input_ids\": [...]}"))) {
        const long line = (long)r.line;
        const cJSON *jp = cJSON_GetObjectItemCaseSensitive(o, "prompt");
        const cJSON *jm = cJSON_GetObjectItemCaseSensitive(o, "messages");
        const cJSON *ji = cJSON_GetObjectItemCaseSensitive(o, "input_ids");
        if (!!jp + !!jm + !!ji != 1)
            rlc_die("%s:%ld: a line needs exactly one of \"prompt\", \"messages\", \"input_ids\"", path, line);
        rlc_ivec iv = {0};
        if (ji) {
            rlc_jsonl_token_ids(&r, ji, "input_ids", cfg->vocab_size, &iv);
        } else {
            if (!tok)
                rlc_die("%s:%ld: \"%s\" needs a tokenizer, and %s has no tokenizer.json (pass --tokenizer DIR)", path, line,
                        jp ? "prompt" : "messages", tok_dir);
            if (jp) {
                if (!cJSON_IsString(jp)) rlc_die("%s:%ld: \"prompt\" must be a string", path, line);
                rlc_tok_encode_ex(tok, jp->valuestring, strlen(jp->valuestring), 1, &iv);
            } else {
                if (!cJSON_IsArray(jm)) rlc_die("%s:%ld: \"messages\" must be an array of {\"role\", \"content\"}", path, line);
                rlc_sb_clear(&sb);
                rlc_sb_clear(&err);
                // a line may carry "tools" and "chat_template_kwargs" too; the prompt ends with the generation prompt
                cJSON *kw = cJSON_CreateObject();
                if (enable_thinking >= 0) cJSON_AddBoolToObject(kw, "enable_thinking", enable_thinking);
                const int rc = rlc_tok_chat_render_line(tok, o, 1, kw, &sb, &err);
                cJSON_Delete(kw);
                if (rc != 0)
                    rlc_die("%s:%ld: messages: %s", path, line, err.s ? err.s : "malformed");
                rlc_tok_encode(tok, sb.s ? sb.s : "", sb.n, &iv);
            }
            char where[1100];
            rlc_format_short(where, sizeof where, "%s:%ld", path, line);
            rlc_check_vocab_ids(tok, iv.v, iv.n, cfg->vocab_size, where, jp ? "\"prompt\"" : "\"messages\"");
        }
        if (iv.n < 1) rlc_die("%s:%ld: the prompt is empty; a prompt needs at least one token", path, line);
        if (iv.n >= cfg->max_position_embeddings)
            rlc_die("%s:%ld: the prompt has %lld tokens, which leaves no room to generate under max_position_embeddings = %d",
                    path, line, (long long)iv.n, cfg->max_position_embeddings);
        if (ps->n == cap) {
            cap = cap ? 2 * cap : 64;
            ps->ids = rlc_realloc(ps->ids, (size_t)cap * sizeof(int32_t *));
            ps->len = rlc_realloc(ps->len, (size_t)cap * sizeof(int64_t));
        }
        ps->ids[ps->n] = iv.v;
        ps->len[ps->n] = iv.n;
        ps->n++;
    }
    rlc_jsonl_close(&r);
    rlc_sb_free(&sb);
    rlc_sb_free(&err);
    if (ps->n == 0) rlc_die("%s: no prompts (expected JSONL lines)", path);
}

static int64_t parse_bytes(const char *s) {
    char *endp;
    double v = strtod(s, &endp);
    double mul = 1;
    if (*endp == 'k' || *endp == 'K') mul = 1024.0, endp++;
    else if (*endp == 'm' || *endp == 'M') mul = 1024.0 * 1024, endp++;
    else if (*endp == 'g' || *endp == 'G') mul = 1024.0 * 1024 * 1024, endp++;
    if (*endp == 'i' || *endp == 'B') endp++;
    if (*endp == 'B') endp++;
    if (endp == s || *endp || !(v > 0) || v * mul > 9e18)
        rlc_die("generate: --kv-cache-bytes expects a positive byte count (e.g. 4000000000, 512M, 8G), got '%s'", s);
    return (int64_t)(v * mul);
}

int cmd_generate(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (cli_flag(&a, "help")) { printf("usage: %s\n", USAGE); cli_args_free(&a); return 0; }
    char *model_dir = hf_resolve_model(cli_opt_req(&a, "model"), "--model");   // a directory or a cached hub id
    const char *in_path = cli_opt_req(&a, "prompts");
    const char *out_path = cli_opt_req(&a, "out");
    rollout_config rc;
    rollout_config_default(&rc);
    rc.n = (int)cli_int(&a, "n", 1, 1, 1 << 20);
    rc.sampling.temperature = (float)cli_double(&a, "temperature", 1.0, 0.0, 1e6);
    rc.sampling.top_p = (float)cli_double(&a, "top-p", 1.0, 1e-9, 1.0);
    rc.sampling.top_k = (int)cli_int(&a, "top-k", -1, -1, INT32_MAX);
    rc.sampling.do_sample = !cli_flag(&a, "greedy");
    rc.max_new_tokens = (int)cli_int(&a, "max-new-tokens", 512, 1, 1 << 24);
    rc.seed = (uint64_t)cli_int(&a, "seed", 0, 0, INT64_MAX);
    const char *kvb = cli_opt(&a, "kv-cache-bytes");
    rc.kv_cache_bytes = kvb ? parse_bytes(kvb) : 0;
    int threads = (int)cli_int(&a, "threads", 0, 0, 4096);
    rc.ignore_eos = cli_flag(&a, "ignore-eos");
    rc.share_prompts = !cli_flag(&a, "no-prompt-sharing");
    rc.weights_bf16 = cli_flag(&a, "bf16-weights");
    const char *kvd = cli_opt(&a, "kv-cache-dtype");
    if (kvd && kv_dtype_parse(kvd, &rc.kv_cache_dtype))
        rlc_die("generate: --kv-cache-dtype expects fp32 or bf16, got '%s'", kvd);
    rc.max_num_seqs = (int)cli_int(&a, "max-num-seqs", 256, 1, 1 << 20);
    rc.max_batched_tokens = (int)cli_int(&a, "max-batched-tokens", rc.max_num_seqs > 2048 ? rc.max_num_seqs : 2048, 1, 1 << 24);
    const char *tok_opt = cli_opt(&a, "tokenizer");
    const char *chat = cli_opt(&a, "chat-template");
    const char *think = cli_opt(&a, "enable-thinking");
    const int allow_nonfinite = cli_flag(&a, "allow-nonfinite");   // load non-finite weights (forensics)
    const char *adapter = cli_opt(&a, "adapter");   // a PEFT LoRA folder: the unmerged side path, or merged weights
    rc.lora_merge = cli_flag(&a, "merge-adapter");
    if (rc.lora_merge && !adapter) rlc_die("generate: --merge-adapter needs --adapter DIR");
    cli_check_unknown(&a, USAGE);
    int enable_thinking = -1;
    if (think) {
        if (!strcmp(think, "true")) enable_thinking = 1;
        else if (!strcmp(think, "false")) enable_thinking = 0;
        else rlc_die("generate: --enable-thinking expects true or false, got '%s'", think);
    }
    rc.progress = 1;

    backend_ctx be;
    backend_init(&be, threads);
    model_config cfg;
    model_config_load(&cfg, model_dir);
    // tokenizer: --tokenizer, else the model directory if it has tokenizer.json
    const char *tok_dir = tok_opt ? tok_opt : model_dir;
    char *tj = rlc_path_join(tok_dir, "tokenizer.json");
    rlc_tokenizer *tok = NULL;
    if (tok_opt || rlc_file_exists(tj)) {   // an explicit --tokenizer must load (or die naming it)
        rlc_tok_opts to = {0};
        rlc_tok_opts_chat_template(&to, chat, "generate: --chat-template");
        tok = rlc_tok_load(tok_dir, &to);
    }
    free(tj);
    prompt_set ps;
    read_prompts(&ps, in_path, tok, tok_dir, enable_thinking, &cfg);   // validate before loading weights
    int32_t stops[16];
    int n_stops = 0;
    if (tok) {
        const rlc_tok_special *sp = rlc_tok_specials(tok);
        for (int i = 0; i < sp->n_stop && n_stops < 16; i++) stops[n_stops++] = sp->stop_ids[i];
    }
    rc.stop_ids = stops;
    rc.n_stop_ids = rc.ignore_eos ? 0 : n_stops;

    param_layout pl;
    param_set pset;
    double t0 = rlc_now();
    checkpoint_load_ex(model_dir, &cfg, &pl, &pset, allow_nonfinite);
    const double t_load = rlc_now() - t0;
    decoder_model m;
    decoder_model_init(&m, &pl, &pset, &be);
    lora_layout ll;
    param_set ad = {0};
    if (adapter) {
        peft_load(adapter, &cfg, &ll, &ad);
        decoder_set_lora(&m, &ll, ad.data, NULL);
    }
    rollout_engine *e = rollout_engine_new(&m, &rc);
    rollout_prompt *pr = rlc_calloc((size_t)ps.n, sizeof *pr);
    for (int i = 0; i < ps.n; i++) pr[i] = (rollout_prompt){ps.ids[i], ps.len[i], (uint64_t)i};
    rollout_result res;
    rollout_generate(e, pr, ps.n, &res);

    rlc_atomic_writer w;
    if (rlc_atomic_open(&w, out_path) != 0) rlc_die("%s: cannot create output file", out_path);
    rlc_strbuf line = {0}, txt = {0};
    for (int i = 0; i < res.n_samples; i++) {
        const rollout_sample *s = &res.samples[i];
        rlc_sb_clear(&line);
        rlc_sb_printf(&line, "{\"prompt_index\": %d, \"sample_index\": %d, \"text\": ", s->prompt, s->sample);
        if (tok) {   // streaming decode, token by token, as a server would emit it
            rlc_sb_clear(&txt);
            rlc_tok_stream st;
            rlc_tok_stream_init(&st, 1);
            for (int64_t k = 0; k < s->len; k++) rlc_tok_stream_push(&st, tok, s->ids[k], &txt);
            rlc_tok_stream_finish(&st, &txt);
            rlc_sb_json_str(&line, txt.s ? txt.s : "", txt.n);
        } else {
            rlc_sb_puts(&line, "null");
        }
        rlc_sb_puts(&line, ", \"ids\": [");
        for (int64_t k = 0; k < s->len; k++) rlc_sb_printf(&line, "%s%d", k ? ", " : "", s->ids[k]);
        rlc_sb_puts(&line, "], \"logprobs\": [");
        for (int64_t k = 0; k < s->len; k++)
            if (!isfinite(s->logprobs[k]) && !allow_nonfinite)
                rlc_die("generate: prompt %d (line %d of %s) sample %d token %lld has a non-finite log-prob (%g); the "
                        "model's outputs are not finite", s->prompt, s->prompt + 1, in_path, s->sample, (long long)k,
                        (double)s->logprobs[k]);
            else if (isfinite(s->logprobs[k])) rlc_sb_printf(&line, "%s%.9g", k ? ", " : "", s->logprobs[k]);
            else rlc_sb_printf(&line, "%snull", k ? ", " : "");
        rlc_sb_printf(&line, "], \"finish_reason\": \"%s\"}\n", rollout_finish_name(s->finish));
        rlc_atomic_write(&w, line.s, line.n);
    }
    if (rlc_atomic_commit(&w) != 0) rlc_die("%s: cannot write output file", out_path);
    fprintf(stderr,
            "rlc generate: %d prompts x %d samples, %lld tokens generated in %.2f s (%.1f tokens/s, %lld steps, peak %d sequences, "
            "%lld preemptions); prompt tokens %lld, computed %lld; KV cache %s %.2f GB, peak in use %.3f GB; load %.2f s; %s weights, "
            "BLAS %s, %d threads\n",
            ps.n, rc.n, (long long)res.gen_tokens, res.t_total, res.t_total > 0 ? (double)res.gen_tokens / res.t_total : 0.0,
            (long long)res.n_steps, res.max_running, (long long)res.n_preempt, (long long)res.prompt_tokens,
            (long long)res.computed_tokens, kv_dtype_name(rc.kv_cache_dtype), (double)res.kv_bytes / 1e9,
            (double)res.kv_bytes_peak / 1e9, t_load, rc.weights_bf16 ? "bf16" : "fp32", be.blas_core, be.n_threads);
    rlc_sb_free(&line);
    rlc_sb_free(&txt);
    rollout_result_free(&res);
    rollout_engine_free(e);
    free(pr);
    for (int i = 0; i < ps.n; i++) free(ps.ids[i]);
    free(ps.ids);
    free(ps.len);
    if (tok) rlc_tok_free(tok);
    decoder_model_free(&m);
    if (adapter) { param_set_free(&ad); lora_layout_free(&ll); }
    param_set_free(&pset);
    param_layout_free(&pl);
    free(model_dir);
    cli_args_free(&a);
    return 0;
}
