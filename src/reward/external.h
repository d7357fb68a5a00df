// external.h: a user reward function as a long-running child process speaking JSONL over stdin/stdout.
// Protocol (one line each, in order):
//   request: {"id": K, "data_source": "...", "response": "...", "ground_truth": "...", "extra_info": {...}}
//   reply:   {"score": <number>, ["id": K,] [other numeric keys: extra metrics], ["pred": "<answer>"]}
// The command runs under /bin/sh -c, stderr is inherited. Requests of a batch are pipelined (poll on both pipes,
// so neither side can deadlock on a full pipe). The process dying, not answering within the timeout, or a reply
// that is not a JSON object with a numeric "score" is a one-line error naming the request.
#pragma once
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    const char *data_source;
    const char *response;       // decoded response text (UTF-8)
    const char *ground_truth;
    const char *extra_info;     // a JSON object as text, or NULL for {}
} rlc_reward_request;

typedef struct {
    double score;
    int n_extra;
    char **extra_keys;          // (n_extra) numeric extra fields of the reply, reply order
    double *extra_vals;         // (n_extra)
    char *pred;                 // "pred" string of the reply (for maj@k), or NULL
} rlc_reward_result;

void rlc_reward_result_free(rlc_reward_result *r);

typedef struct {
    char *command;
    double timeout_s;
    pid_t pid;
    int to_child, from_child;   // pipe fds (our ends)
    char *rbuf;                 // buffered reply bytes
    size_t rlen, rcap;
    int64_t next_id;            // request ids continue across batches
} rlc_reward_ext;

// Start the process (dies if it cannot be started).
void rlc_reward_ext_start(rlc_reward_ext *x, const char *command, double timeout_s);
// Score n requests; out[i] for req[i].
void rlc_reward_ext_score(rlc_reward_ext *x, int64_t n, const rlc_reward_request *req, rlc_reward_result *out);
// Close its stdin, wait briefly for it to exit, then terminate it.
void rlc_reward_ext_stop(rlc_reward_ext *x);
