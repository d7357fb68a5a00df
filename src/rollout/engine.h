// engine.h: the rollout engine: batched sampling from the trainer's own weights with a paged KV cache,
// prompt sharing across the n samples of a prompt, continuous batching, and per-token log-probs.
//
// How a step works: the scheduler picks, for every running sequence, its pending tokens (1 when decoding,
// a chunk when prefilling or recomputing), and admits waiting samples while the KV pool and the per-step
// token budget allow. All picked tokens of all sequences go through ONE packed forward: embedding, per
// layer rmsnorm -> q/k/v (rowgemm over all tokens, so weights stream once per step) -> q/k norm + RoPE ->
// k/v written into the sequences' blocks -> paged attention over each sequence's own blocks -> o_proj,
// MLP; then the final norm and the logits only for the rows that sample.
//
// Exactness: prefill, decode and recompute run the same per-row arithmetic (rowgemm, paged attention,
// the shared rmsnorm/rope/swiglu kernels), so a sample's tokens and log-probs are bitwise independent of
// the batch it runs in, the thread count, KV pressure (waiting, preemption + recompute) and prompt sharing.
// The random draw for generated token k of sample j of prompt p is sampler_uniform(seed, id_p, j, k).
//
// Sliding-window layers (Gemma 3's local layers, Mistral's window) attend to the last W keys only; their k/v
// live in a second pool, and a sequence's blocks there go back to the pool as soon as they fall wholly before
// its window, so a rollout's KV memory grows with the full-attention layers only (docs/rollout.md).
//
// Memory: KV blocks are taken on demand. When the pool is empty, READY prompt prefixes are dropped first,
// then the most recently admitted sequence is preempted (its blocks freed; it later recomputes its prompt
// and generated tokens, bitwise identically). A sample whose prompt + max_new_tokens cannot fit in the
// whole pool is a clear error before anything runs.
#pragma once
#include <stdint.h>

#include "model/decoder.h"
#include "rollout/kv_cache.h"
#include "rollout/sampler.h"

enum { ROLLOUT_FINISH_NONE = 0, ROLLOUT_FINISH_STOP = 1, ROLLOUT_FINISH_LENGTH = 2 };
const char *rollout_finish_name(int finish);   // "stop" (eos / stop token) | "length" | "none"

typedef struct {
    int n;                       // samples per prompt (verl rollout.n)
    sampler_params sampling;     // temperature / top_k / top_p / do_sample
    int max_new_tokens;          // response length cap (verl rollout.response_length)
    uint64_t seed;
    int ignore_eos;              // 1: do not stop at the config's eos ids (benchmarks)
    const int32_t *stop_ids;     // extra stop token ids (n_stop_ids), kept in the output like eos
    int n_stop_ids;
    int64_t kv_cache_bytes;      // KV pool budget in bytes; 0 = 40% of MemAvailable
    int block_size;              // tokens per KV block (16)
    int max_num_seqs;            // sequences per step (256)
    int max_batched_tokens;      // tokens per step (2048); prefill chunks share it with decodes
    int share_prompts;           // 1: the n samples of a prompt share its prefill (copy-on-write)
    int weights_bf16;            // 1: decode from a bf16 copy of the weights (faster, log-probs drift)
    int lora_merge;              // with LoRA adapters on the model (decoder_set_lora): 1 = decode from merged weights
                                 // W + s·B·A (a second weight buffer, refreshed by rollout_engine_sync_weights); 0 = the
                                 // unmerged rank-r side path read from the model's adapter buffer (no copy, no sync)
    kv_dtype kv_cache_dtype;     // KV_F32 (default: the trainer's exact k/v) | KV_BF16 (half the bytes, drift)
    int sliding_kv_pool;         // 1 (default): sliding-window layers keep only their window's KV, in a pool of their
                                 // own whose blocks are recycled; 0: every layer in one pool (same outputs, more memory)
    int progress;                // 1: a progress line on stderr every progress_interval_s
    double progress_interval_s;
    // Optional observer (tests, diagnostics): called once per sampled token, in row order after the
    // step's logits (V) exist, before the token is drawn. step = index of the token being generated.
    void (*on_logits)(void *ctx, int prompt, int sample, int64_t step, const float *logits, int64_t V);
    void *on_logits_ctx;
} rollout_config;
void rollout_config_default(rollout_config *c);

// One prompt: token ids and the id that names its random streams (e.g. its dataset index), so that a
// prompt samples the same tokens whatever else is in the batch.
typedef struct {
    const int32_t *ids;          // (len)
    int64_t len;
    uint64_t id;
} rollout_prompt;

// Multi-turn continuation (src/rollout/agent.c): a trajectory's later turn is a prompt of its whole context
// with its own cap and the stream identity of its first turn, so that its k-th generated token (counted
// across turns) draws sampler_uniform(seed, id, sample_base + j, draw_base + k) whatever the batch.
typedef struct {
    int max_new_tokens;          // 0: cfg->max_new_tokens; else this prompt's cap (1..cfg->max_new_tokens)
    int sample_base;             // sample j draws as sample sample_base + j
    int64_t draw_base;           // tokens the stream generated before this prompt
} rollout_stream;

typedef struct {
    int prompt, sample;          // index into the prompts, and 0..n-1
    int64_t len;                 // generated tokens (stop token included)
    int32_t *ids;                // (len)
    float *logprobs;             // (len) log_softmax(logits / T)[token] over the full vocab (T=1 if greedy at 0)
    int finish;                  // ROLLOUT_FINISH_*
    double t_first;              // seconds from rollout_generate's start to this sample's first token
} rollout_sample;

typedef struct {
    int n_samples;               // n_prompts * n, prompt-major: samples[p * n + j]
    rollout_sample *samples;
    int64_t prompt_tokens;       // sum of prompt lengths x n (what separate prefills would compute)
    int64_t computed_tokens;     // tokens that went through the forward (prefill once per prompt + decode + recompute)
    int64_t gen_tokens;
    int64_t n_steps, n_preempt, n_cow, n_prefix_hits;
    int max_running;             // peak sequences in one step
    int kv_blocks, kv_blocks_peak;   // full-attention layers' pool: size and peak blocks in use (0 without such layers)
    int64_t kv_block_bytes;
    int kv_window_blocks, kv_window_blocks_peak;   // sliding-window layers' pool, likewise (0 without sliding layers)
    int64_t kv_window_block_bytes;
    int64_t kv_bytes, kv_bytes_peak;   // both pools: allocated, and peak in use (within a step, before recycling)
    double t_total;              // seconds
} rollout_result;
void rollout_result_free(rollout_result *r);

typedef struct rollout_engine rollout_engine;
// The engine reads the model's weights in place (m->block_w / get_block), so a trainer update is seen
// by the next rollout_generate without a copy; with weights_bf16 or lora_merge, call rollout_engine_sync_weights
// after each update. LoRA adapters attached to the model (and switched on) are applied as the side path
// y += s·(x·Aᵀ)·Bᵀ after each adapted product, read from the model's adapter buffer, so the sampling policy is the
// trained one (attach them with decoder_set_lora before rollout_engine_new). Allocates the KV pool (cfg->kv_cache_bytes) once.
rollout_engine *rollout_engine_new(decoder_model *m, const rollout_config *cfg);
void rollout_engine_free(rollout_engine *e);
void rollout_engine_sync_weights(rollout_engine *e);
const rollout_config *rollout_engine_config(const rollout_engine *e);
// Samples per prompt and sampling for the following rollout_generate calls (checked as in rollout_engine_new),
// so one engine, and its KV pool, serves both training rollouts and validation.
void rollout_engine_set_sampling(rollout_engine *e, int n, const sampler_params *sampling);
int64_t rollout_engine_kv_bytes(const rollout_engine *e);

// Generate cfg->n samples for each prompt. Dies with a one-line error for an empty prompt, a prompt with
// no room under max_position_embeddings, an out-of-vocabulary id, or a sample that cannot fit the KV pool.
void rollout_generate(rollout_engine *e, const rollout_prompt *prompts, int n_prompts, rollout_result *out);
// The same with a stream per prompt (streams[p] for prompts[p]); rollout_generate is streams = NULL (all zero).
void rollout_generate_streams(rollout_engine *e, const rollout_prompt *prompts, const rollout_stream *streams, int n_prompts,
                              rollout_result *out);

// Multi-turn samples (src/rollout/agent.c). With hooks, a sample whose turn ends calls turn_end with the turn's
// tokens (ids, log-probs; finish STOP or LENGTH). Returning 1 after a STOP keeps the sample: it leaves the schedule
// with its KV blocks kept, and the other samples go on decoding. Between steps, poll delivers what is ready:
// rollout_turn_resume appends the observation tokens (log-prob 0) to the sample's response; they are prefilled
// as one chunk together with the last sampled token, and decoding resumes, with nothing before them recomputed.
// rollout_turn_end ends a waiting sample. poll is called with block = 1 when nothing else can run; it must then
// deliver at least one. When the KV pool runs dry, waiting samples give up their blocks first (they then
// recompute their whole context when resumed, bitwise identically). The k-th generated token of a sample still
// draws sampler_uniform(seed, id, sample_base + j, draw_base + k): observation tokens take no draw. The
// result's samples hold the whole response (generated and observation tokens).
typedef struct rollout_turn_io rollout_turn_io;   // the running generation, as the hooks see it
typedef struct {
    int (*turn_end)(void *ctx, rollout_turn_io *io, int prompt, int sample, const int32_t *ids, const float *logprobs, int64_t n,
                    int finish);
    void (*poll)(void *ctx, rollout_turn_io *io, int block);
    void *ctx;
} rollout_turn_hooks;
void rollout_turn_resume(rollout_turn_io *io, int prompt, int sample, const int32_t *ids, int64_t n);
void rollout_turn_end(rollout_turn_io *io, int prompt, int sample);
// rollout_generate_streams with multi-turn hooks (NULL: single-turn).
void rollout_generate_turns(rollout_engine *e, const rollout_prompt *prompts, const rollout_stream *streams, int n_prompts,
                            const rollout_turn_hooks *hooks, rollout_result *out);

// verl's rollout-vs-actor metrics over n tokens (training/rollout_probs_diff_{max,mean,std} and
// rollout_actor_probs_pearson_corr): p = exp(logp); d = |p_actor - p_rollout|.
typedef struct { double diff_max, diff_mean, diff_std, pearson; int64_t n; } rollout_probs_diff;
void rollout_probs_diff_compute(rollout_probs_diff *out, const float *logp_actor, const float *logp_rollout, int64_t n);
