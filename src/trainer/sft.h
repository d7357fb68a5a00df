// sft.h: supervised fine-tuning, the first user of the training engine (src/trainer/engine.h).
//
// Data: sequences of token ids with a loss mask aligned to the ids. mask[t] = 1 means token t is a
// target: the model is trained to predict ids[t] from ids[0..t-1] (scored at position t-1). mask[0] has
// no predicting position and is ignored. JSONL input: one object per line,
//   {"input_ids": [int, ...], "loss_mask": [0|1, ...]}   (same length >= 1; blank lines skipped)
//
// Loss: cross-entropy token-mean over the global batch: loss = -sum_{t: mask[t]=1} log p(ids[t]) / N,
// N = number of target tokens in the global batch, exactly invariant to micro-batching up to float
// summation order. Each epoch visits the sequences in a seeded shuffled order (Philox stream
// (seed, epoch)), batch_size sequences per step; an incomplete last batch is dropped (verl's SFT
// DataLoader drop_last). --steps beyond one epoch continue into the next epochs.
#pragma once
#include <stdint.h>
#include <stdio.h>

#include "model/decoder.h"
#include "trainer/engine.h"

typedef struct {
    int n;                  // sequences
    int64_t T;              // tokens in all
    int64_t *off;           // (n+1) start of each sequence in ids/mask
    int32_t *ids;           // (T)
    uint8_t *mask;          // (T) 1 = token is a target
    int64_t n_targets;      // sum of mask over positions > 0 of each sequence
    int cap_n;
    int64_t cap_T;
} sft_dataset;

void sft_dataset_init(sft_dataset *d);
void sft_dataset_free(sft_dataset *d);
// Append one sequence (len >= 1). Dies if an id is outside [0, vocab_size) (vocab_size > 0) or a mask
// value is not 0/1; `where` (e.g. "file:line") prefixes the message.
void sft_dataset_add(sft_dataset *d, const int32_t *ids, const uint8_t *mask, int64_t len, int vocab_size, const char *where);
// Load JSONL. Errors name path:line: invalid JSON, missing/mistyped keys, non-integer or out-of-range
// ids, mask values other than 0/1, length mismatch, sequences longer than max_len (> 0).
void sft_dataset_load_jsonl(sft_dataset *d, const char *path, int vocab_size, int64_t max_len);

typedef struct {
    int64_t step;           // 1-based
    int64_t total_steps;
    int epoch;
    double loss;            // token-mean cross-entropy of the step's batch (before the update)
    double grad_norm;       // pre-clip
    int skipped;            // non-finite grad norm: update skipped
    double lr;              // lr used by this step's update
    int64_t tokens;         // tokens run through the model
    int64_t target_tokens;  // N
    int n_micro;
    double seconds;
    double tokens_per_s;
    const int *seqs;        // (n_seqs) dataset indices of the step's batch
    int n_seqs;
} sft_step_info;

typedef struct {
    int64_t steps;              // > 0: number of optimizer steps; 0: epochs * (n / batch_size)
    int epochs;                 // 1
    int batch_size;             // sequences per step (global batch), 8
    int64_t micro_batch_tokens; // token budget per micro-batch (0: see micro_batch_seqs)
    int micro_batch_seqs;       // sequences per micro-batch (0 with tokens 0: whole batch at once)
    double lr;                  // 1e-5
    adamw_hparams adam;         // betas (0.9, 0.999), eps 1e-8, weight_decay 0.01
    double clip_grad;           // 1.0 (<= 0: no clipping)
    int64_t warmup_steps;       // <= 0: int(warmup_ratio * total)
    double warmup_ratio;        // 0
    lr_sched_type lr_sched;     // constant
    double min_lr;              // cosine min_lr_ratio / linear min_lr_factor
    uint64_t seed;              // shuffle seed, 0
    int shuffle;                // 1
    ckpt_mode ckpt;             // CKPT_NONE
    FILE *log;                  // per-step line (NULL: quiet)
    void (*on_step)(void *user, const sft_step_info *info);   // optional
    void *user;
} sft_config;
void sft_config_default(sft_config *c);

typedef struct {
    int64_t steps;
    double first_loss, last_loss;
    double seconds;
    int64_t tokens;
    int64_t skipped;
} sft_summary;

// Validate the data against the config (batch size, lengths vs max positions and the micro-batch budget),
// fill the engine config from it, and return the total number of steps. Shared by sft_train and the
// data-parallel SFT.
int64_t sft_prepare(const decoder_model *m, const sft_dataset *d, const sft_config *c, engine_config *ec);
// Train m's parameters in place. Optional engine_out: if non-NULL the engine (optimizer state) is
// left initialised there for the caller to save/free (engine_free); otherwise it is freed.
void sft_train(decoder_model *m, const sft_dataset *d, const sft_config *c, sft_summary *out, engine *engine_out);

// The order in which epoch `epoch` visits the n sequences: 0..n-1, or with shuffle a Fisher-Yates shuffle
// on the Philox stream (seed, "sft", epoch). sft_train and the data-parallel SFT share it, so every rank
// count sees the same batches.
void sft_epoch_order(int *perm, int n, uint64_t seed, int epoch, int shuffle);

// The SFT loss, an engine loss callback (user unused): token-mean cross-entropy over the global batch,
// -sum(w * logp) / N, seeding dlogp = -w/N at the scored positions (N = mb->global_tokens).
double sft_loss(void *user, const engine_micro *mb);

// Buffers of a packed batch, grown as needed and reused across steps.
typedef struct {
    int32_t *tokens;    // (cap_T)
    int32_t *targets;   // (cap_T) ids[t+1] where mask[t+1] (scored at position t), else -1
    float *loss_mask;   // (cap_T) 1 where targets[t] >= 0
    int32_t *cu;        // (cap_seqs + 1) cumulative sequence lengths
    int64_t cap_T;
    int cap_seqs;
} sft_pack_buf;
// Pack sequences seqs[0..n-1] of d back to back into p; the batch points into p. *n_targets (optional)
// receives the number of scored positions.
engine_batch sft_pack(sft_pack_buf *p, const sft_dataset *d, const int *seqs, int n, int64_t *n_targets);
void sft_pack_free(sft_pack_buf *p);
