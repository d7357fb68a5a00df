// dist.c: dist_ctx over MPI (or world 1 without it), collectives with an error handler and a watchdog.
#include "dist/dist.h"

#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/common.h"

#ifdef RLC_WITH_MPI
#include <mpi.h>
#define COMM(d) (*(MPI_Comm *)(d)->comm)

// Check an MPI return code: one line naming the call, the rank and MPI's error string, then abort the job.
#define MPI_CK(d, call, what)                                                                              \
    do {                                                                                                   \
        int _rc = (call);                                                                                  \
        if (_rc != MPI_SUCCESS) {                                                                          \
            char _es[MPI_MAX_ERROR_STRING]; int _el = 0;                                                   \
            MPI_Error_string(_rc, _es, &_el);                                                              \
            fprintf(stderr, "rlc: error: rank %d/%d: %s failed in %s (%s:%d): %s\n", (d)->rank, (d)->world, \
                    #call, (what), __FILE__, __LINE__, _es);                                               \
            fflush(stderr);                                                                                \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                  \
            _exit(1);                                                                                      \
        }                                                                                                  \
    } while (0)
#endif

static int launched_by_mpi(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

static double env_timeout(void) {
    const char *s = getenv("RLC_DIST_TIMEOUT_S");
    if (!s || !*s) return 600.0;
    char *end;
    double v = strtod(s, &end);
    if (*end || !(v > 0)) rlc_die("RLC_DIST_TIMEOUT_S='%s': expected a positive number of seconds", s);
    return v;
}

void dist_init(dist_ctx *d, int *argc, char ***argv) {
    memset(d, 0, sizeof *d);
    d->world = 1;
    d->timeout_s = env_timeout();
#ifdef RLC_WITH_MPI
    if (!launched_by_mpi()) return;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            rlc_die("MPI_Init_thread failed (launched by mpirun?)");
        d->owns_mpi = 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    d->comm = rlc_malloc(sizeof(MPI_Comm));
    MPI_CK(d, MPI_Comm_dup(MPI_COMM_WORLD, (MPI_Comm *)d->comm), "dist_init");
    MPI_CK(d, MPI_Comm_set_errhandler(COMM(d), MPI_ERRORS_RETURN), "dist_init");
    MPI_CK(d, MPI_Comm_rank(COMM(d), &d->rank), "dist_init");
    MPI_CK(d, MPI_Comm_size(COMM(d), &d->world), "dist_init");
    d->mpi = 1;
#else
    (void)argc; (void)argv;
    if (launched_by_mpi() && getenv("OMPI_COMM_WORLD_SIZE") && atoi(getenv("OMPI_COMM_WORLD_SIZE")) > 1)
        rlc_die("this rlc was built without MPI (make MPI=0) but launched by mpirun with %s processes; rebuild with mpicc",
                getenv("OMPI_COMM_WORLD_SIZE"));
#endif
}

void dist_finalize(dist_ctx *d) {
#ifdef RLC_WITH_MPI
    if (d->mpi) {
        dist_barrier(d, "dist_finalize");
        MPI_Comm_free((MPI_Comm *)d->comm);
        free(d->comm);
        if (d->owns_mpi) MPI_Finalize();
    }
#endif
    memset(d, 0, sizeof *d);
    d->world = 1;
}

void dist_init_self(dist_ctx *d, const dist_ctx *parent) {
    memset(d, 0, sizeof *d);
    d->world = 1;
    d->timeout_s = parent ? parent->timeout_s : env_timeout();
#ifdef RLC_WITH_MPI
    if (parent && parent->mpi) {
        d->comm = rlc_malloc(sizeof(MPI_Comm));
        MPI_CK(parent, MPI_Comm_dup(MPI_COMM_SELF, (MPI_Comm *)d->comm), "dist_init_self");
        MPI_CK(parent, MPI_Comm_set_errhandler(COMM(d), MPI_ERRORS_RETURN), "dist_init_self");
        d->mpi = 1;
        d->rank = 0;
    }
#endif
}

void dist_free_self(dist_ctx *d) {
#ifdef RLC_WITH_MPI
    if (d->mpi) { MPI_Comm_free((MPI_Comm *)d->comm); free(d->comm); }
#endif
    memset(d, 0, sizeof *d);
    d->world = 1;
}

void dist_abort(const dist_ctx *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rlc_log_line("error", "rank %d/%d: %s", d->rank, d->world, msg);
    fflush(stderr);
#ifdef RLC_WITH_MPI
    if (d->mpi) MPI_Abort(MPI_COMM_WORLD, 1);
#endif
    _exit(1);
}

int64_t dist_bytes_total(const dist_ctx *d) {
    int64_t s = 0;
    for (int k = 0; k < DIST_K_COUNT; k++) s += d->bytes[k];
    return s;
}

void dist_reset_counters(dist_ctx *d) {
    memset(d->bytes, 0, sizeof d->bytes);
    memset(d->calls, 0, sizeof d->calls);
    d->comm_seconds = 0;
}

static void account(dist_ctx *d, int kind, int64_t bytes) {
    d->bytes[kind] += bytes;
    d->calls[kind]++;
}

#ifdef RLC_WITH_MPI
static int count_of(const dist_ctx *d, int64_t n, const char *what) {
    if (n < 0 || n > INT_MAX) dist_abort(d, "%s: %lld elements exceed MPI's int count", what, (long long)n);
    return (int)n;
}

// Wait for req with the watchdog: abort the job past the deadline. MPI progresses a large transfer only
// inside MPI calls (fragment by fragment), so the first SPIN_S seconds poll MPI_Test back to back (sleeping
// between tests there throttled a 0.6B-shape step's all-gathers to ~0.1 GB/s); after that, a rank waiting for a
// slower one sleeps 200 us between tests so it leaves an oversubscribed core to the rank computing.
#define SPIN_S 0.05
static void wait_req(dist_ctx *d, MPI_Request *req, const char *what) {
    double t0 = rlc_now();
    for (;;) {
        int done = 0;
        MPI_CK(d, MPI_Test(req, &done, MPI_STATUS_IGNORE), what);
        if (done) break;
        double el = rlc_now() - t0;
        if (el > d->timeout_s)
            dist_abort(d, "%s did not complete within %.0f s (RLC_DIST_TIMEOUT_S): another rank died or is stuck; aborting the job",
                       what, d->timeout_s);
        if (el > SPIN_S) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
    }
}
#endif

void dist_barrier(dist_ctx *d, const char *what) {
    double t0 = rlc_now();
#ifdef RLC_WITH_MPI
    if (d->mpi && d->world > 1) {
        MPI_Request r;
        MPI_CK(d, MPI_Ibarrier(COMM(d), &r), what);
        wait_req(d, &r, what);
    }
#endif
    account(d, DIST_K_OTHER, 0);
    d->comm_seconds += rlc_now() - t0;
}

// An in-place all-reduce of n 8-byte values (doubles, or int64 when !f64).
static void allreduce8(dist_ctx *d, void *buf, int n, int f64, int op, const char *what) {
    double t0 = rlc_now();
#ifdef RLC_WITH_MPI
    if (d->mpi && d->world > 1) {
        MPI_Request r;
        MPI_CK(d, MPI_Iallreduce(MPI_IN_PLACE, buf, n, f64 ? MPI_DOUBLE : MPI_INT64_T, op == DIST_MAX ? MPI_MAX : MPI_SUM,
                                 COMM(d), &r), what);
        wait_req(d, &r, what);
        account(d, DIST_K_ALLREDUCE, (int64_t)n * 8 * (d->world - 1));
    }
#endif
    (void)buf; (void)n; (void)f64; (void)op; (void)what;
    d->comm_seconds += rlc_now() - t0;
}

void dist_allreduce_f64(dist_ctx *d, double *buf, int n, int op, const char *what) { allreduce8(d, buf, n, 1, op, what); }

void dist_allreduce_i64(dist_ctx *d, int64_t *buf, int n, int op, const char *what) { allreduce8(d, buf, n, 0, op, what); }

void dist_allgather(dist_ctx *d, const void *send, void *recv, size_t bytes, const char *what) {
    double t0 = rlc_now();
#ifdef RLC_WITH_MPI
    if (d->mpi && d->world > 1) {
        MPI_Request r;
        MPI_CK(d, MPI_Iallgather(send, count_of(d, (int64_t)bytes, what), MPI_BYTE, recv, count_of(d, (int64_t)bytes, what),
                                 MPI_BYTE, COMM(d), &r), what);
        wait_req(d, &r, what);
        account(d, DIST_K_OTHER, (int64_t)bytes * (d->world - 1));
        d->comm_seconds += rlc_now() - t0;
        return;
    }
#endif
    if (recv != send) memmove(recv, send, bytes);
    d->comm_seconds += rlc_now() - t0;
}

void dist_bcast(dist_ctx *d, void *buf, size_t bytes, int root, const char *what) {
    double t0 = rlc_now();
#ifdef RLC_WITH_MPI
    if (d->mpi && d->world > 1) {
        MPI_Request r;
        MPI_CK(d, MPI_Ibcast(buf, count_of(d, (int64_t)bytes, what), MPI_BYTE, root, COMM(d), &r), what);
        wait_req(d, &r, what);
        if (d->rank != root) account(d, DIST_K_OTHER, (int64_t)bytes);
    }
#endif
    (void)buf; (void)bytes; (void)root; (void)what;
    d->comm_seconds += rlc_now() - t0;
}

void dist_reduce_scatter_f32(dist_ctx *d, const float *send, float *recv, int64_t n, const char *what) {
    dist_req r;
    dist_ireduce_scatter_f32(d, send, recv, n, what, &r);
    dist_wait(d, &r);
}

// Start a request record; the transfer itself is the caller's.
static double req_begin(dist_req *r, int kind, const char *what) {
    memset(r, 0, sizeof *r);
    r->what = what;
    r->kind = kind;
    r->t_start = rlc_now();
    return r->t_start;
}

void dist_iallgather_f32(dist_ctx *d, const float *send, float *recv, int64_t n, int kind, const char *what, dist_req *r) {
    double t0 = req_begin(r, kind, what);
#ifdef RLC_WITH_MPI
    if (d->mpi && d->world > 1) {
        r->req = rlc_malloc(sizeof(MPI_Request));
        MPI_CK(d, MPI_Iallgather(send, count_of(d, n, what), MPI_FLOAT, recv, count_of(d, n, what), MPI_FLOAT, COMM(d),
                                 (MPI_Request *)r->req), what);
        r->bytes = n * 4 * (d->world - 1);
        d->comm_seconds += rlc_now() - t0;
        return;
    }
#endif
    if (recv != send) memmove(recv, send, (size_t)n * sizeof(float));
    d->comm_seconds += rlc_now() - t0;
}

void dist_ireduce_scatter_f32(dist_ctx *d, const float *send, float *recv, int64_t n, const char *what, dist_req *r) {
    double t0 = req_begin(r, DIST_K_REDUCE_SCATTER, what);
#ifdef RLC_WITH_MPI
    if (d->mpi && d->world > 1) {
        r->req = rlc_malloc(sizeof(MPI_Request));
        MPI_CK(d, MPI_Ireduce_scatter_block(send, recv, count_of(d, n, what), MPI_FLOAT, MPI_SUM, COMM(d),
                                            (MPI_Request *)r->req), what);
        r->bytes = n * 4 * (d->world - 1);
        d->comm_seconds += rlc_now() - t0;
        return;
    }
#endif
    if (recv != send) memmove(recv, send, (size_t)n * sizeof(float));
    d->comm_seconds += rlc_now() - t0;
}

int dist_test(dist_ctx *d, dist_req *r) {
#ifdef RLC_WITH_MPI
    if (r->req) {
        double t0 = rlc_now();
        int done = 0;
        MPI_CK(d, MPI_Test((MPI_Request *)r->req, &done, MPI_STATUS_IGNORE), r->what);
        d->comm_seconds += rlc_now() - t0;
        if (!done) return 0;
        free(r->req);
        r->req = NULL;
        account(d, r->kind, r->bytes);
    }
#endif
    (void)d;
    (void)r;
    return 1;
}

void dist_wait(dist_ctx *d, dist_req *r) {
    double t0 = rlc_now();
#ifdef RLC_WITH_MPI
    if (r->req) {
        wait_req(d, (MPI_Request *)r->req, r->what);
        free(r->req);
        r->req = NULL;
        account(d, r->kind, r->bytes);
    }
#endif
    (void)r;
    d->comm_seconds += rlc_now() - t0;
}

void dist_allgather_f32(dist_ctx *d, const float *send, float *recv, int64_t n, const char *what) {
    dist_req r;
    dist_iallgather_f32(d, send, recv, n, DIST_K_ALLGATHER, what, &r);
    dist_wait(d, &r);
}
