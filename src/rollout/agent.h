// agent.h: multi-turn tool rollouts as verl's ToolAgentLoop builds them (spec agent-loop.md §1.3-1.7, §6.5):
// Hermes <tool_call> parsing, the calls rlc answers itself, tool-text truncation, observation tokens rendered
// by the chat template (render-and-diff, as verl's Continuous Token builder), the multi_turn.* limits, the
// response budget rule (a trajectory always ends on an assistant turn) and end reasons.
//
// The driver (agent_rollout) runs in one of two modes. Continuous (agent_run.engine): inside the rollout
// engine, a trajectory whose turn needs the environment keeps its KV cache and leaves the schedule while the
// others decode; its observation tokens are prefilled as a chunk when the reply arrives. Turn-synchronous (the
// reference; agent_run.generate): every round generates one assistant turn for each live trajectory from its
// whole context P‖R, then sends all environment steps of the round at once and waits for their replies. A trajectory's k-th generated token (k counted across its turns) draws
// sampler_uniform(seed, prompt id, sample, k), and the engine is bitwise batch-invariant, so its tokens depend
// only on the seed, the data and the environment's replies: never on timing, batching or reply order.
#pragma once
#include <stdint.h>

#include "core/strbuf.h"
#include "rollout/engine.h"
#include "data/dataset.h"
#include "rollout/env.h"
#include "tokenizer/tokenizer.h"

struct cJSON;

enum { AGENT_TRUNC_LEFT = 0, AGENT_TRUNC_RIGHT = 1, AGENT_TRUNC_MIDDLE = 2 };
// "left" | "right" | "middle" -> AGENT_TRUNC_*; -1 for anything else.
int agent_truncate_side_parse(const char *s);

// Why a trajectory ended (spec §6.4 finish.reason).
typedef enum {
    AGENT_END_NO_TOOL_CALL = 0,     // an assistant turn without a call for the environment
    AGENT_END_ENV_DONE,             // the environment answered a step with done: true
    AGENT_END_LENGTH,               // the turn hit the response budget
    AGENT_END_BUDGET,               // the observation would not fit: dropped, the trajectory ends on its assistant turn
    AGENT_END_MAX_ASSISTANT_TURNS,
    AGENT_END_MAX_USER_TURNS,
    AGENT_END_COUNT
} agent_end;
const char *agent_end_name(agent_end e);   // "no_tool_call" | "env_done" | "length" | "budget" | ...

// verl's actor_rollout_ref.rollout.multi_turn.* (0 = no limit for the turn caps).
typedef struct {
    int max_assistant_turns;
    int max_user_turns;
    int max_parallel_calls;           // calls executed per assistant turn (1)
    int max_tool_response_length;     // code points of a tool's text (256)
    int truncate_side;                // AGENT_TRUNC_* (middle)
    int enable_thinking;              // -1: not passed to the template, 0, 1
    int response_length;              // response tokens per trajectory, tool turns included
} agent_config;
void agent_config_default(agent_config *c);

// ---- Hermes tool-call parsing (verl HermesToolParser, spec §3.6, §6.5.2) ----
typedef struct {
    char *name;
    struct cJSON *arguments;          // the parsed value (any JSON type)
} agent_call;
typedef struct {
    agent_call *calls;                // (n_calls) valid blocks, in text order
    int n_calls;
    int n_invalid;                    // blocks dropped: not JSON, not an object, no string name, no arguments
    char *content;                    // the text without the matched <tool_call>...</tool_call> blocks
} agent_parsed;
// text: one assistant turn decoded with special tokens kept.
void agent_parse_hermes(const char *text, agent_parsed *out);
void agent_parsed_free(agent_parsed *p);

// verl's local answers (spec §6.5.3): a malloc'd error text if rlc answers the call itself (unknown name, or
// arguments not a JSON object), else NULL. tools: the environment's tool list.
char *agent_local_answer(const agent_call *call, const struct cJSON *tools);

// Truncate to L code points as verl does (spec §1.7): left keeps the tail, right the head, middle both halves.
// Returns a malloc'd string.
char *agent_truncate(const char *text, int L, int side);

// Python repr() of a str (the quoting verl's error texts show): appended to out.
void agent_py_repr(rlc_strbuf *out, const char *s);

// ---- observation tokens (spec §1.4, §6.5.1) ----
// msgs: a JSON list of {"role": "tool" | "user" | "system", "content": string}, in order. Appends to out the ids
// that follow an assistant turn ending in last_id: the boundary (what the template writes after the turn's end
// token, when the turn stopped there: "\n" after Qwen's <|im_end|>), then per run of tool messages / per user or system message the
// template's rendering diffed against verl's synthetic prefix, then the generation prompt. Returns 0, or -1 with
// one line in err (template error, or a template that is not prefix-preserving for these messages).
int agent_observation_ids(rlc_tokenizer *tok, int32_t last_id, const struct cJSON *msgs, int enable_thinking,
                          rlc_ivec *out, rlc_strbuf *err);

// ---- the prompt (spec §6.5 step 1) ----
// A tool_agent trajectory's prompt: messages (a JSON list) with append (NULL: none) added to the end of the last
// user message's content (TRL's reset() text, the started reply's append_to_user), rendered by the chat template
// with tools (NULL or [] renders none) and the generation prompt, then encoded; appended to out. Returns 0, or -1
// with one line in err (no user message with string content to append to, or a template error).
int agent_prompt_ids(rlc_tokenizer *tok, const struct cJSON *messages, const struct cJSON *tools, const char *append,
                     int enable_thinking, rlc_ivec *out, rlc_strbuf *err);
// A rendered prompt over max_len (> 0) tokens, cut per data.truncation (left keeps the end, the generation prompt
// with it); with RLC_TRUNC_ERROR returns -1 with one line in err naming `what`. Returns 0 otherwise.
int agent_prompt_fit(rlc_ivec *ids, int64_t max_len, rlc_truncation mode, const char *what, rlc_strbuf *err);
// A "started" reply's prompt (docs/env-protocol.md): its "tools" (null: the hello's) are checked and detached
// into *tools (the caller owns them; NULL when absent), and with "tools" or "append_to_user" the trajectory's
// prompt is the row's messages rendered again with them, then fit to max_len per `mode`. Returns 1 with the
// prompt's ids appended to out, 0 when the trajectory keeps the row's prompt, or -1 with one line in err.
int agent_started_prompt(rlc_tokenizer *tok, struct cJSON *reply, const struct cJSON *messages,
                         const struct cJSON *hello_tools, int enable_thinking, int64_t max_len, rlc_truncation mode,
                         struct cJSON **tools, rlc_ivec *out, rlc_strbuf *err);

// ---- the driver ----
enum { AGENT_SINGLE_TURN = 0, AGENT_TOOL = 1 };
// "single_turn_agent" | "tool_agent" -> AGENT_*; -1 for anything else.
int agent_name_parse(const char *s);

typedef struct {
    const int32_t *ids;               // (len) the rendered prompt (the hello's tools block included for tool_agent rows);
                                      //   a started reply with tools / append_to_user re-renders it from messages
    int64_t len;
    uint64_t id;                      // names its random streams (the dataset index)
    int agent;                        // AGENT_SINGLE_TURN | AGENT_TOOL
    const char *data_source;          // sent to the environment in start (may be NULL)
    const char *ground_truth;         // likewise
    const struct cJSON *extra_info;   // the row's extra_info object (or NULL)
    const struct cJSON *messages;     // the row's prompt messages (or NULL)
} agent_prompt;

typedef struct {
    int prompt, sample;
    int32_t *prompt_ids;              // (n_prompt) copy of the prompt
    int64_t n_prompt;
    int32_t *ids;                     // (len) response: assistant turns and observation turns, in order
    uint8_t *mask;                    // (len) 1 on sampled tokens, 0 on inserted ones
    float *logprobs;                  // (len) rollout log-probs on sampled tokens, 0.0 elsewhere
    int64_t len;
    int64_t n_generated;              // mask-1 tokens
    agent_end end;
    int assistant_turns, user_turns, num_turns;   // num_turns = user_turns + assistant_turns + 1 (verl)
    int tool_call_counts;             // answered calls (environment + local)
    int tool_failures;                // local errors + results with is_error
    int invalid_blocks;               // <tool_call> blocks that did not parse
    double *tool_rewards;             // (n_tool_rewards) observation.reward values
    int n_tool_rewards;
    int has_score;                    // the environment's finished.score was a number
    double score;
    char *pred;                       // finished.pred, or NULL
    double env_wait_s;                // seconds this trajectory waited for its step replies
    char **env_metric_keys;           // (n_env_metrics) the environment's numbers: observation "metrics" entries and
    double *env_metric_sums;          // (n_env_metrics) numeric keys of "finished" (not score), summed per key
    int n_env_metrics;                //   over the trajectory (the trainer's env/<key>/mean)
} agent_traj;
void agent_traj_free(agent_traj *t);

// One generation request: continue the stream (id, sample) whose first draw_base tokens are already generated,
// from the context ids, for at most max_new tokens.
typedef struct {
    const int32_t *ids;               // (len)
    int64_t len;
    uint64_t id;
    int sample;
    int64_t draw_base;
    int max_new;
} agent_gen_req;
typedef struct {
    int32_t *ids;                     // (len) malloc'd; the driver takes them
    float *logprobs;                  // (len) malloc'd
    int64_t len;
    int finish;                       // ROLLOUT_FINISH_*
} agent_gen_out;
// The model behind the driver: generates one turn for each request. agent_engine_generator drives a
// rollout_engine (ctx: an agent_engine_gen; the engine's n is set to 1 for the call and restored); tests may
// script one.
typedef void (*agent_generate_fn)(void *ctx, int n, const agent_gen_req *req, agent_gen_out *out);
typedef struct {
    rollout_engine *engine;
    int64_t computed_tokens;          // out: tokens through the engine's forward, summed over the calls
    int64_t gen_tokens;               // out: tokens generated
} agent_engine_gen;
void agent_engine_generator(void *ctx, int n, const agent_gen_req *req, agent_gen_out *out);

typedef struct {
    rollout_engine *engine;           // continuous mode (engine's n = n, max_new_tokens >= response_length); or NULL:
    agent_generate_fn generate;       // turn-synchronous mode over this generator
    void *generate_ctx;
    rlc_tokenizer *tok;
    rlc_env *env;                     // NULL when no row is a tool_agent row
    agent_config cfg;
    int n;                            // samples per prompt
    uint64_t seed;                    // the trainer seed (the env's per-trajectory seed derives from it)
    const char *split;                // "train" | "val" (trajectory ids)
    int64_t step;
    int64_t max_prompt_length;        // > 0: a prompt rendered after a started reply must fit (data.max_prompt_length)
    rlc_truncation truncation;        // ... or is cut so (data.truncation)
    int64_t computed_prompt_tokens;   // out: turn-synchronous: context tokens passed to the generator over all rounds;
                                      //      continuous: tokens through the engine's forward
    int64_t rounds;                   // out: generation rounds (continuous: engine steps)
    int64_t n_preempt;                // out: continuous: samples preempted or dropped while waiting (recomputed)
} agent_run;

// Run n trajectories for each prompt; out[p * n + j]. Dies with one line naming the trajectory on an
// environment protocol error (env.h).
void agent_rollout(agent_run *run, const agent_prompt *prompts, int n_prompts, agent_traj *out);
