// dataset.h: prompt datasets for RL (GSM8K raw lines and verl-style rows), tokenized once at load,
// with verl's data.truncation and data.filter_overlong_prompts; and a text SFT loader.
//
// Line formats (JSONL, one object per line; blank lines skipped; anything else is an error naming
// path:line). A path ending in ".parquet" is read as Parquet (data/rows.h), each row the object a line
// would hold, and messages name path:row:
//   raw GSM8K   {"question": str, "answer": str}: as verl's examples/data_preprocess/gsm8k.py, the prompt
//               is one user message `question + " " + RLC_GSM8K_INSTRUCTION`, data_source "openai/gsm8k",
//               ground_truth = the number after "#### " in the answer with commas removed, extra_info
//               {"split", "index", "answer", "question"} (split = the file name without .jsonl).
//   verl row    {prompt_key: [{"role", "content"}, ...], "data_source": str, "reward_model":
//               {"ground_truth": ...}, "extra_info": {...}}; ground_truth may be a string or any JSON
//               value (kept as its JSON text); extra_info is optional ("{}"); an optional top-level
//               "agent_name" ("single_turn_agent" | "tool_agent") picks the row's rollout loop.
// The prompt text is apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
// enable_thinking as configured) and its ids are the encoding of that text (no special tokens added),
// as verl's RLHFDataset.
#pragma once
#include <stdint.h>

#include "tokenizer/tokenizer.h"

// The sentence verl appends to each GSM8K question.
#define RLC_GSM8K_INSTRUCTION "Let's think step by step and output the final answer after \"####\"."

typedef enum { RLC_TRUNC_ERROR = 0, RLC_TRUNC_LEFT, RLC_TRUNC_RIGHT, RLC_TRUNC_MIDDLE } rlc_truncation;
// "error" | "left" | "right" | "middle"; dies naming `what` otherwise.
rlc_truncation rlc_truncation_parse(const char *s, const char *what);

typedef struct {
    int64_t max_prompt_length;    // data.max_prompt_length (default 512)
    rlc_truncation truncation;    // data.truncation (default error)
    int filter_overlong_prompts;  // data.filter_overlong_prompts (default 0): drop rows longer than max
    int enable_thinking;          // data.apply_chat_template_kwargs.enable_thinking: -1 = not passed
    const char *prompt_key;       // data.prompt_key (default "prompt")
    int64_t max_samples;          // keep the first N rows (after filtering); -1 = all
    int64_t vocab_size;           // the model's config.json vocab_size: a row whose prompt ids reach it dies naming
                                  // the row (rlc_check_vocab_ids); 0 = unchecked
} rlc_data_opts;
void rlc_data_opts_default(rlc_data_opts *o);

typedef struct {
    int32_t *ids;              // (n_ids) prompt token ids after truncation
    int64_t n_ids;
    int64_t n_ids_full;        // length before truncation
    char *prompt_text;         // the rendered chat prompt (before truncation)
    char *messages_json;       // the prompt messages as a JSON list
    char *data_source;         // e.g. "openai/gsm8k"
    char *ground_truth;        // reward_model.ground_truth (string, or JSON text of a non-string); NULL if absent
    char *extra_info_json;     // extra_info as a JSON object text ("{}" if absent)
    int64_t line;              // 1-based line number in the file
    int agent_name;            // the row's agent_name column (verl): RLC_AGENT_NAME_NONE (absent or null: the
                               // config's agent.default_agent_loop), _SINGLE_TURN or _TOOL
} rlc_prompt;
enum { RLC_AGENT_NAME_NONE = -1, RLC_AGENT_NAME_SINGLE_TURN = 0, RLC_AGENT_NAME_TOOL = 1 };

typedef struct {
    rlc_prompt *items;         // (n)
    int64_t n;
    int64_t n_filtered;        // rows dropped by filter_overlong_prompts
    int64_t n_truncated;       // rows truncated (left/right/middle)
    int64_t max_len_seen;      // longest prompt before truncation
    char *path;
} rlc_dataset;

// Dies "<where>: <key> renders to token id I ('<token>'), outside the model's vocabulary [0, vocab_size) (...)" at
// the first of ids (n) at or past vocab_size: a tokenizer whose added tokens run past config.json's vocab_size. Only
// the ids a row actually produces are checked, never the tokenizer's table: Gemma 3's tokenizer defines an image
// token past vocab_size that text never produces.
void rlc_check_vocab_ids(const rlc_tokenizer *tok, const int32_t *ids, int64_t n, int64_t vocab_size, const char *where,
                         const char *key);

// Load and tokenize a JSONL or Parquet dataset. Dies with path:line on malformed lines, and (truncation=error)
// on a prompt longer than max_prompt_length, as verl does.
void rlc_dataset_load(rlc_dataset *ds, const char *path, rlc_tokenizer *tok, const rlc_data_opts *o);
void rlc_dataset_free(rlc_dataset *ds);

// verl's GSM8K ground truth: re.search(r"#### (\-?[0-9\.\,]+)", answer) -> group without commas.
// Returns a malloc'd string, or NULL when the answer has no match.
char *rlc_gsm8k_ground_truth(const char *answer);

// Truncate ids to max_len per verl's postprocess_data (left: keep the last max_len, right: the first,
// middle: first max_len/2 and last max_len - max_len/2). Returns the new length; dies for
// RLC_TRUNC_ERROR when n > max_len (`where` names the row).
int64_t rlc_truncate_ids(int32_t *ids, int64_t n, int64_t max_len, rlc_truncation mode, const char *where);

// ---- SFT text data ----
// Lines {"prompt": str, "response": str} (verl SFTDataset: prompt = chat template of one user message
// with add_generation_prompt=True, response = response + eos token, tokenized separately, loss on
// the response) or {"messages": [...]} (multi-turn: the conversation rendered by the checkpoint's chat
// template; loss on each assistant turn's tokens, from where messages[:i] with the generation prompt ends
// through the first eos token after its content: found for any template, see assistant_span in dataset.c).
// max_length > 0 truncates per `trunc` (error dies).
typedef struct {
    int32_t *ids;              // (n)
    uint8_t *loss_mask;        // (n) 1 = train on this token
    int64_t n;
    int64_t line;
} rlc_sft_example;
typedef struct {
    rlc_sft_example *items;    // (n)
    int64_t n;
    int64_t n_truncated;
} rlc_sft_text;
void rlc_sft_text_load(rlc_sft_text *s, const char *path, rlc_tokenizer *tok, int64_t max_length, rlc_truncation trunc,
                       int enable_thinking);
void rlc_sft_text_free(rlc_sft_text *s);
