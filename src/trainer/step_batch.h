// step_batch.h: the batch one PPO/GRPO step carries between its phases (verl's DataProto of a step), and the
// helpers the phases share: packing rows into an engine batch, balanced parts and micro-batches, and the
// data-parallel gather / share of the batch.
//
// Layout. B = n_prompts x n samples, prompt-major (sample i belongs to prompt i / n). Sequence i is prompt ++
// response, packed back to back (cu (B+1)). Position t of sequence i scores token t+1: the response's k-th
// token is scored at packed position cu[i] + plen[i] - 1 + k. The RL modules work on padded (B, Tr) arrays with
// Tr = the longest response of the step; row i column k is that same token.
#pragma once
#include <stdint.h>

#include "dist/dist.h"
#include "reward/reward.h"
#include "trainer/balance.h"

// A multi-turn trajectory's statistics (tool_agent rows; docs/agents.md).
typedef struct {
    int num_turns, tool_calls, failures, invalid_blocks;
    int end;                  // agent_end
    int has_score;            // the environment gave the trajectory's score
    double score;
    int64_t model_tokens;     // mask-1 (sampled) response tokens
    double env_wait_s;        // seconds waiting for step replies
} step_agent_stats;

typedef struct {
    int n_prompts, n, B;
    int64_t *ds_index;        // (B) dataset row of each sample's prompt
    int64_t *plen, *rlen;     // (B)
    int32_t *cu;              // (B+1)
    int64_t T;                // packed tokens
    int32_t *tokens;          // (T)
    int32_t *targets;         // (T) scored token at each position, -1 = none
    float *loss_mask;         // (T) 1 on response-scoring positions
    int64_t Tr;               // longest response
    float *rollout_lp;        // (B, Tr) log-probs returned by the rollout
    float *old_lp;            // (B, Tr) actor log-probs before the update (old_log_prob)
    float *ref_lp;            // (B, Tr) reference log-probs (NULL without a reference)
    float *entropy;           // (B, Tr) actor entropy from the old_log_prob pass
    float *values;            // (B, Tr) critic values before the update (NULL without a critic)
    float *mask;              // (B, Tr) response mask
    float *score;             // (B) sequence reward from the reward function
    rlc_reward_result *res;   // (B) reward results (score, extras, pred)
    float *scores;            // (B, Tr) token-level scores (the reward on the last response token)
    float *rewards;           // (B, Tr) token-level rewards (scores - beta * kl when KL is in the reward)
    float *adv, *returns;     // (B, Tr)
    int *finish;              // (B)
    step_agent_stats *agent;  // (B) multi-turn trajectories; NULL for single-turn generation
    char **env_keys;          // (n_env) the environment's numbers (agent_traj env metrics): env/<key>/mean is
    double *env_means;        // (n_env) the per-trajectory sum averaged over the step's tool_agent trajectories
    int n_env;
} step_batch;

// A step batch of n_prompts x n samples, T packed tokens and a longest response of Tr: the per-sample (B),
// packed (T) and response (B, Tr) arrays. sb->score comes with the rewards.
void step_batch_alloc(step_batch *sb, int n_prompts, int n, int64_t T, int64_t Tr);
void step_batch_free(step_batch *sb);
// Sample i, packed at off: prompt ++ response tokens, targets and loss mask on the response-scoring positions
// (the last prompt token through the second-to-last response token), its rollout log-probs (lp, rl) and response
// mask. Returns the offset after it.
int64_t step_batch_put(step_batch *sb, int i, int64_t off, const int32_t *prompt, int64_t pl, const int32_t *resp,
                       int64_t rl, const float *lp);// A multi-turn trajectory: sample i's response mask becomes m (rlen[i]) (1 on sampled tokens, 0 on observation
// tokens), in the (B, Tr) mask and in the packed loss mask at the positions predicting them (targets stay set).
void step_batch_mask_response(step_batch *sb, int i, const float *m);

// DAPO's dynamic sampling: out = the groups of src[0..nsrc) (each n contiguous samples, the same n) whose keep[k][g]
// is 1, in order, repacked (Tr = the longest kept response). Moves the kept reward results out of src (the src
// batches are still freed by the caller).
void step_batch_take_groups(step_batch *out, step_batch *src, uint8_t *const *keep, int nsrc);

// Data parallelism: loc is this rank's generated and scored chunk (prompt-major); out receives the whole step
// batch on every rank, laid out as one process lays it out.
void step_batch_gather(dist_ctx *d, const step_batch *loc, step_batch *out);
// verl's balance_batch: Karmarkar-Karp over 24576*L + L^2 of the sequences rows (n) into W equal-size parts.
void step_batch_balance(rlc_partition *part, const step_batch *sb, const int *rows, int n, int W);
// A (B, Tr) array of which each rank computed the rows of its part (part over 0..B-1): after this every rank has
// all rows.
void step_batch_share_rows(dist_ctx *d, const rlc_partition *part, const step_batch *sb, float *padded);
// verl's dynamic batch size (rearrange_micro_batches: KK over 24576*L + L^2, parts ordered small-large-small):
// reorders rows[0..n) in place so that each part is contiguous and fills starts (n+1) with the part boundaries;
// returns the number of parts.
int step_batch_micro_batches(const step_batch *sb, int *rows, int n, int64_t max_tokens, const char *key, int *starts);

// A packed batch of the step batch's sequences rows[0..n) in that order.
typedef struct {
    int n;
    int32_t *cu;        // (n+1)
    int32_t *tokens;    // (T)
    int32_t *targets;   // (T)
    float *loss_mask;   // (T)
} packed_rows;
void packed_rows_init(packed_rows *p, const step_batch *sb, const int *rows, int n);
void packed_rows_free(packed_rows *p);
