// engine_internal.h: the rollout engine's internal structures (a sample's sequence, a shared prompt prefix, the
// engine, one generation's state) and the functions its files share, for src/rollout/engine*.c only. engine.c
// sets the engine up, engine_forward.c runs the packed forward and the logits, engine_schedule.c the KV blocks and
// one scheduler step, engine_generate.c a whole generation.
#pragma once
#include <stdint.h>

#include "core/common.h"
#include "rollout/engine.h"
#include "rollout/kv_cache.h"
#include "rollout/sampler.h"

// SEQ_WAIT_ENV: a multi-turn sample between turns, out of the schedule, its KV blocks kept (unless dropped).
enum { SEQ_WAITING = 0, SEQ_RUNNING = 1, SEQ_DONE = 2, SEQ_WAIT_ENV = 3 };
// The two KV pools: the full-attention layers' (a sequence keeps all its blocks) and the sliding layers'
// (a sequence keeps the blocks of its window; earlier ones go back to the pool). See docs/rollout.md.
enum { POOL_FULL = 0, POOL_WINDOW = 1, N_POOLS = 2 };
enum { PFX_NONE = 0, PFX_PREFILLING = 1, PFX_READY = 2 };

typedef struct {
    int prompt, sample;
    uint64_t rng_id;
    uint64_t rng_sample;     // sample index of the random stream (prompt's sample_base + sample)
    int64_t draw_base;       // draw index of the first generated token (prompt's draw_base)
    const int32_t *pids;     // (P) prompt ids
    int64_t P;
    int32_t *gen;            // (max_new) response ids: generated, and (multi-turn) observation tokens
    float *lp;               // (max_new) their log-probs (0 for observation tokens)
    int64_t n_gen;           // response tokens
    int64_t n_drawn;         // generated tokens (the draw index; n_gen less observation tokens)
    int64_t turn0;           // gen index where the current turn began
    int64_t max_total;       // min(P + max_new, max_position_embeddings)
    int32_t *bt[N_POOLS];    // (bt_stride) block tables: logical block i -> block of that pool
    int n_bt;                // logical blocks allocated (both tables)
    int lo;                  // bt[POOL_WINDOW][0..lo-1] were recycled (-1): wholly before the window
    int64_t n_cached;        // tokens whose k/v are in the cache
    int state, admitted_once, finish;
    double t_first;
} seq_t;

typedef struct {
    int state;               // PFX_*
    int leader;              // seq index while PREFILLING
    int32_t *blocks[N_POOLS];   // (ceil(P / bs)) while READY; POOL_WINDOW entries before lo are -1
    int n_blocks, lo;
    float *hidden;           // (H) final-normed hidden of the last prompt token while READY
    int unadmitted;          // samples of this prompt never admitted yet
} prefix_t;

struct rollout_engine {
    decoder_model *m;
    rollout_config cfg;
    kv_cache kv[N_POOLS];    // kv[p] exists iff has_pool[p]
    int has_pool[N_POOLS];
    int window;              // W of the sliding layers whose KV is recycled (POOL_WINDOW), else 0
    int16_t layer_pool[MODEL_MAX_LAYERS], layer_slot[MODEL_MAX_LAYERS];   // layer l -> pool, layer index in it
    uint16_t *w16;           // (numel) bf16 copy in the parameter layout, or NULL
    float *wm;               // (numel) fp32 merged copy W + s·B·A (lora_merge without weights_bf16), or NULL
    int lora_merged;         // the adapters live in w16 / wm (lora_merge): no side path
    const uint16_t *base16;  // (numel) the model's frozen bf16 base (param_bf16, LoRA), read in place, or NULL
    layer_weights *lwv;      // (L) with base16: each layer's norms and biases (fp32, widened once); matrices NULL
    float *vec;              // the storage of lwv's vectors
    int64_t T_max;           // tokens per step
    float *x, *xn, *q, *k, *v, *qn, *kn, *att, *gate, *up, *act, *rstd;   // (T_max, ...) step buffers
    int32_t *tok, *pos, *tok_seq;                                         // (T_max)
    int64_t R_cap;           // rows allocated in xs / hid / logits
    float *xs, *hid, *logits;   // (R_cap, H), (R_cap, H), (R_cap, V)
    int n_ws;
    sampler_ws *ws;          // (n_ws) one per thread
};

// The step's block tables: bt[p] (rows = sequences, stride) for pool p.
typedef struct {
    const int32_t *bt[N_POOLS];
    int64_t stride;
} kv_tables;

typedef struct {
    rollout_engine *e;
    const rollout_prompt *prompts;
    int n_total;
    seq_t *seqs;
    prefix_t *pfx;
    int32_t *bt_all[N_POOLS];   // (n_total, bt_stride) per pool
    int64_t bt_stride;
    int *running, n_running; // seq ids in admission order
    int *waiting, n_waiting; // seq ids in queue order
    int n_done;
    const rollout_turn_hooks *hooks;   // multi-turn (NULL: a stop ends the sample)
    int *resumed, n_resumed; // seq ids whose observation arrived with their KV kept: they rejoin the running list
    int n_wait_env;          // samples in SEQ_WAIT_ENV
    rollout_result *res;
    double t0;
} gen_state;

static inline int64_t n_tok(const seq_t *s) { return s->P + s->n_gen; }
static inline int32_t tok_at(const seq_t *s, int64_t t) { return t < s->P ? s->pids[t] : s->gen[t - s->P]; }

typedef struct { int seq; int64_t t0, t1, off; } feed_t;

// ---- engine.c -------------------------------------------------------------------------------------------------
// The base of block b of the model's weights (block_w or get_block).
float *eng_block_base(const decoder_model *m, int b);

// ---- engine_forward.c -----------------------------------------------------------------------------------------
// Forward of e->tok/pos/tok_seq (T tokens): residual stream left in e->x (T, H); k/v written to the cache.
void eng_forward_tokens(rollout_engine *e, int64_t T, const kv_tables *kt);
// Room for R sampling rows in e->xs, e->hid and e->logits.
void eng_reserve_rows(rollout_engine *e, int64_t R);
// logits (R, V) of hidden rows e->hid (R, H).
void eng_logits_rows(rollout_engine *e, int64_t R);

// ---- engine_schedule.c ----------------------------------------------------------------------------------------
// Give back every KV block of s (its table is empty afterwards).
void eng_release_blocks(gen_state *g, seq_t *s);
// Bytes of the blocks in use, both pools.
int64_t eng_kv_bytes_used(const rollout_engine *e);
// Raise r's peaks of blocks and bytes in use to the pools' current use.
void eng_note_kv_peak(const rollout_engine *e, rollout_result *r);
// Give back a prompt prefix's blocks and hidden state (PFX_NONE afterwards).
void eng_prefix_release(gen_state *g, prefix_t *px);
// One engine step. Returns the number of tokens that went through the forward.
int64_t eng_step(gen_state *g, int n_prompts, feed_t *feeds, int *joiners, int *row_seq);
