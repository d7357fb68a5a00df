// dist.h: the data-parallel communication layer (docs/distributed.md). A dist_ctx carries the rank, the
// world size and the communicator; nothing about MPI is a process global. Every collective rlc uses is here,
// with the build without MPI (or a run not launched by mpirun) giving the single-rank result (copies).
//
// Errors: the communicator has MPI_ERRORS_RETURN; a failing call prints one line naming the call, the rank
// and MPI's error string, then MPI_Abort's the job. Hangs: every collective is nonblocking underneath and
// waited on with a deadline (env RLC_DIST_TIMEOUT_S, default 600 s); past it the rank prints which
// operation on which rank timed out and aborts the whole job (a dead peer otherwise hangs the others).
//
// Accounting: each ctx counts the bytes it received from peers per kind of collective, and the seconds
// spent inside collectives (waiting + copying), so the trainer and bench can report communication volume
// and the fraction of time communicating.
#pragma once
#include <stddef.h>
#include <stdint.h>

enum { DIST_SUM = 0, DIST_MAX = 1 };

enum {
    DIST_K_ALLGATHER = 0,     // parameter all-gathers (FSDP)
    DIST_K_REDUCE_SCATTER,    // gradient reduce-scatters (FSDP)
    DIST_K_ALLREDUCE,         // scalars: token counts, norms, losses
    DIST_K_OTHER,             // bcast, gather to rank 0 (checkpoints), barrier
    DIST_K_COUNT
};

typedef struct {
    int rank, world;
    int mpi;                  // 1: MPI is initialised and comm is valid (world may still be 1)
    int owns_mpi;             // 1: dist_finalize calls MPI_Finalize
    void *comm;               // (MPI_Comm *) duplicated communicator, NULL without MPI
    double timeout_s;         // watchdog deadline per collective (RLC_DIST_TIMEOUT_S)
    int64_t bytes[DIST_K_COUNT];   // bytes received from other ranks, per kind (algorithm-independent
                                   // lower bound: (W-1)/W of the payload for gathers/reduce-scatters)
    int64_t calls[DIST_K_COUNT];
    double comm_seconds;      // wall time inside collectives (including waits for slower ranks)
} dist_ctx;

// A nonblocking operation in flight (all-gather for FSDP prefetch).
typedef struct {
    void *req;                // (MPI_Request *) or NULL when already complete
    const char *what;
    int kind;
    int64_t bytes;
    double t_start;
} dist_req;

// MPI_Init_thread (MPI_THREAD_FUNNELED) when built with MPI and launched by mpirun/srun/mpiexec (detected from
// the launcher's environment); otherwise rank 0 of world 1 without touching MPI.
void dist_init(dist_ctx *d, int *argc, char ***argv);
// Finalize (barrier first so no rank leaves while others still talk).
void dist_finalize(dist_ctx *d);
// A world-1 context on this process alone (MPI_COMM_SELF when MPI is up), e.g. to run a 1-rank reference
// next to a distributed run in the same job.
void dist_init_self(dist_ctx *d, const dist_ctx *parent);
void dist_free_self(dist_ctx *d);
// Abort the whole job with a one-line message (rank named). Usable without MPI (exit 1).
void dist_abort(const dist_ctx *d, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));

// Collectives; `what` names the operation in timeout / error messages.
void dist_barrier(dist_ctx *d, const char *what);
void dist_allreduce_f64(dist_ctx *d, double *buf, int n, int op, const char *what);   // buf (n) in place
void dist_allreduce_i64(dist_ctx *d, int64_t *buf, int n, int op, const char *what);  // buf (n) in place
// recv (world * bytes) = every rank's send (bytes), in rank order.
void dist_allgather(dist_ctx *d, const void *send, void *recv, size_t bytes, const char *what);
void dist_bcast(dist_ctx *d, void *buf, size_t bytes, int root, const char *what);
// recv (n) = sum over ranks of send[rank*n .. rank*n + n) (send is world*n).
void dist_reduce_scatter_f32(dist_ctx *d, const float *send, float *recv, int64_t n, const char *what);
// recv (world*n) = every rank's send (n), blocking.
void dist_allgather_f32(dist_ctx *d, const float *send, float *recv, int64_t n, const char *what);
// Nonblocking form: start, then dist_wait (the watchdog applies). send must stay valid until then.
void dist_iallgather_f32(dist_ctx *d, const float *send, float *recv, int64_t n, int kind, const char *what, dist_req *r);
void dist_wait(dist_ctx *d, dist_req *r);
// Nonblocking reduce-scatter (recv (n) = sum over ranks of send[rank*n ..)); send and recv stay valid until
// dist_wait / a dist_test that returns 1.
void dist_ireduce_scatter_f32(dist_ctx *d, const float *send, float *recv, int64_t n, const char *what, dist_req *r);
// One MPI_Test: progresses the transfer (MPI moves large messages only inside MPI calls) and returns 1 when it
// is complete (then accounted, like dist_wait). Cheap; call it between compute phases.
int dist_test(dist_ctx *d, dist_req *r);

int64_t dist_bytes_total(const dist_ctx *d);
void dist_reset_counters(dist_ctx *d);
