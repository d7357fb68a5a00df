// env.h: an agent environment as one long-running child process speaking JSON Lines (protocol rlc-env/1,
// docs/env-protocol.md) on its stdin/stdout: a hello handshake that declares the tools, then start / step /
// finish per trajectory. Requests of a batch are pipelined (poll on both pipes, so neither side can block on a
// full pipe) and replies are matched by trajectory id and expected type, in whatever order they come.
//
// Fatal, with one line naming the environment command and the trajectory: the process cannot start, exits or
// closes its stdout; no reply within timeout_s; a line that is not a JSON object with a known string "type";
// a reply for a trajectory with no outstanding request, or of the wrong type; an "error" message.
#pragma once
#include <stdint.h>
#include <sys/types.h>

#include "core/strbuf.h"

struct cJSON;

// What rlc tells the environment in its hello (the rollout settings a tool may want to know).
typedef struct {
    const char *format;             // "hermes"
    const char *chat_template;      // "qwen3" | "template" | ...
    int enable_thinking;            // -1: not passed (sent as null), 0, 1
    int64_t response_length;
    int max_parallel_calls;
    int max_tool_response_length;
} rlc_env_hello;

enum { RLC_ENV_OBSERVE_TOOL_CALLS = 0, RLC_ENV_OBSERVE_ALL = 1 };

typedef struct {
    char *command;
    double timeout_s;               // per-request deadline (seconds without the reply)
    int max_inflight;               // outstanding requests at most (0 = no cap): min of rlc's and the env's
    pid_t pid;
    int to_child, from_child;       // pipe fds (our ends), non-blocking
    char *rbuf;                     // buffered reply bytes (rlen of rcap)
    size_t rlen, rcap;
    struct rlc_env_req *q;          // (nq of capq) requests queued or outstanding
    int nq, capq, outstanding;
    rlc_strbuf wbuf;                // bytes being written (whole requests), from woff
    size_t woff;
    double last;                    // time of the last reply (or of the first request after an idle period)
    struct cJSON *tools;            // the hello's tool list (owned; an empty list when none)
    int observe;                    // RLC_ENV_OBSERVE_*
    double wait_s;                  // total seconds spent in rlc_env_exchange
} rlc_env;

// Start the command under /bin/sh -c in its own process group and do the handshake. timeout_s > 0;
// max_inflight >= 0 (0 = no cap). Dies with one line when the process or its hello is not usable.
void rlc_env_start(rlc_env *env, const char *command, double timeout_s, int max_inflight, const rlc_env_hello *hello);

// One batch of requests: req[i] is one compact JSON object (no newline) for trajectory traj[i], whose reply
// must have type expect[i]. Sends them (at most max_inflight outstanding), collects every reply in any order,
// and stores the parsed reply object in reply[i] (caller frees with cJSON_Delete) and the seconds from sending
// request i to its reply in wait_s[i] (may be NULL). traj ids of one batch are distinct.
void rlc_env_exchange(rlc_env *env, int n, const char *const *req, const char *const *traj, const char *const *expect,
                      struct cJSON **reply, double *wait_s);

// Streaming form (the continuous engine): queue one request (sent when the inflight cap allows); tag is returned
// with its reply.
void rlc_env_send(rlc_env *env, const char *req, const char *traj, const char *expect, int64_t tag);
// One reply matched to an outstanding request, or NULL when none is ready (block = 0). block = 1 waits for one
// (dies after timeout_s without any reply). *tag and *wait_s (seconds since its request was sent; may be NULL)
// describe the request it answers. Caller frees the reply with cJSON_Delete.
struct cJSON *rlc_env_recv(rlc_env *env, int block, int64_t *tag, double *wait_s);
int rlc_env_pending(const rlc_env *env);   // requests queued or outstanding

// Close its stdin, wait briefly for it to exit, then SIGTERM / SIGKILL its process group.
void rlc_env_stop(rlc_env *env);

// A tool list as the hello (or a started reply) may declare it: a list of {"type": "function", "function": {"name":
// <non-empty string>, ...}}. Returns 0, or -1 with what is wrong in err ("tools[2] is not ...").
int rlc_env_check_tools(const struct cJSON *tools, rlc_strbuf *err);

// The reply-line reader (exposed for tests and the fuzzer): parse one line (n bytes, no newline) into a JSON
// object with a string "type" among hello | started | observation | finished | error and a "traj" that is a
// string (or null / absent, for hello and error). Numbers written with a point or an exponent are marked as
// floats (core/json.h), so that tool schemas render as the chat template renders them in Python. Returns the
// object, or NULL with one line in err.
struct cJSON *rlc_env_parse_line(const char *line, size_t n, rlc_strbuf *err);
