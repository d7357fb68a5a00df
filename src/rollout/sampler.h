// sampler.h: next-token selection for the rollout engine: greedy, temperature, top-k, top-p.
//
// Semantics (HF/vLLM): z = logits / temperature; top-k keeps the tokens whose logit is >= the k-th largest
// (ties at the boundary kept); top-p then keeps the smallest prefix of the remaining tokens, in descending
// probability (ties by lower id), whose renormalised mass reaches top_p (at least one token); the token is
// drawn from the renormalised kept distribution by inverse CDF with one uniform u.
// Greedy (do_sample = 0 or temperature = 0): argmax, lowest id on ties.
//
// The returned log-prob is the trainer's: log_softmax(logits / T')[token] over the FULL vocabulary, T' =
// temperature (T' = 1 when temperature is 0), i.e. what logprob_head_forward gives for the same hidden
// state. It ignores the top-k/top-p truncation (vLLM's processed_logprobs would renormalise over the kept
// set; with verl's defaults top_k=-1, top_p=1 the two are the same).
//
// Randomness: sampler_uniform(seed, prompt_id, sample_idx, step) is a pure function (Philox4x32-10 from
// core/rng.h), so a sample's draws do not depend on batch composition, threads or scheduling order.
#pragma once
#include <stdint.h>

typedef struct {
    float temperature;   // >= 0; 0 = greedy
    int top_k;           // <= 0 or >= V: off
    float top_p;         // in (0, 1]; 1 = off
    int do_sample;       // 0 = greedy
} sampler_params;

// Per-thread scratch for a vocabulary of V tokens.
typedef struct {
    int64_t V;
    float *e;            // (V) exp(z - max z)
    float *tmp;          // (V) logits copy for the top-k selection
    struct sampler_pair { float e; int32_t i; } *pairs;   // (V) candidates for top-p sorting
    int32_t *kept;       // (V) kept token ids in sampling order
} sampler_ws;
void sampler_ws_init(sampler_ws *ws, int64_t V);
void sampler_ws_free(sampler_ws *ws);

// Dies with a one-line message naming the bad field.
void sampler_params_check(const sampler_params *sp);
int sampler_is_greedy(const sampler_params *sp);

// Uniform in [0, 1) (53 bits), a pure function of its arguments.
double sampler_uniform(uint64_t seed, uint64_t prompt_id, uint64_t sample_idx, uint64_t step);

// Pick a token from logits (V) with uniform u; *logprob (may be NULL) as described above.
int32_t sampler_sample(const sampler_params *sp, const float *logits, int64_t V, double u, float *logprob, sampler_ws *ws);
// The processed distribution sampler_sample draws from: probs (V), zero outside the kept set, summing to 1
// (greedy: one-hot argmax). Returns the number of kept tokens. Tests and diagnostics.
int64_t sampler_probs(const sampler_params *sp, const float *logits, int64_t V, double *probs, sampler_ws *ws);
