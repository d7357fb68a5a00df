// backend_cpu.c: the CPU backend: OpenBLAS sgemm + OpenMP threads, and the OpenBLAS core-type fix.
#include "backend/backend.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include <cblas.h>

// Declared by OpenBLAS (cblas.h in some versions only).
extern char *openblas_get_corename(void);
extern char *openblas_get_config(void);
extern void openblas_set_num_threads(int);

const char *backend_blas_recommended_core(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return NULL;
}

// Kernel families that OpenBLAS 0.3.21 falls back to when it does not know a CPU.
static int is_generic_core(const char *name) {
    if (!name) return 1;
    return strcasecmp(name, "Prescott") == 0 || strcasecmp(name, "Core2") == 0 || strcasecmp(name, "Nehalem") == 0 ||
           strcasecmp(name, "Katmai") == 0 || strcasecmp(name, "Northwood") == 0 || strcasecmp(name, "Barcelona") == 0 ||
           strcasecmp(name, "Generic") == 0 || strcasecmp(name, "Sandybridge") == 0;
}

// OpenMP threads that reach a barrier first spin GOMP_SPINCOUNT iterations before sleeping; libgomp's default
// (300000, about a millisecond) suits big kernels on idle cores. Small models run hundreds of short parallel
// regions per step with serial gaps between them, and on a loaded or small machine the spinning thread steals
// the core that the working thread needs: the demo's SFT used 1.8x the CPU time for the same steps. 10000
// iterations (some tens of microseconds) still covers the gap between back-to-back kernels.
#define RLC_GOMP_SPINCOUNT "10000"

void backend_fix_blas_coretype(int argc, char **argv) {
    (void)argc;
    if (getenv("RLC_BLAS_REEXEC")) {   // second pass: both variables are in place
        const char *cur = openblas_get_corename(), *rec = backend_blas_recommended_core();
        if (rec && is_generic_core(cur) && !getenv("RLC_NO_BLAS_FIX"))
            rlc_warn("OpenBLAS still runs its generic '%s' kernels after setting OPENBLAS_CORETYPE=%s", cur, rec);
        return;
    }
    int reexec = 0;
    // The user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT wins.
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT")) {
        setenv("GOMP_SPINCOUNT", RLC_GOMP_SPINCOUNT, 1);
        reexec = 1;
    }
    const char *cur = openblas_get_corename();
    const char *rec = backend_blas_recommended_core();
    if (!getenv("OPENBLAS_CORETYPE") && !getenv("RLC_NO_BLAS_FIX") && rec && is_generic_core(cur)) {
        setenv("OPENBLAS_CORETYPE", rec, 1);
        reexec = 1;
    }
    if (!reexec) return;
    // libgomp and OpenBLAS read these in load-time constructors, so they must be set before the process starts:
    // set them and re-exec ourselves.
    setenv("RLC_BLAS_REEXEC", "1", 1);
    execv("/proc/self/exe", argv);
    if (getenv("OPENBLAS_CORETYPE") && rec && is_generic_core(cur))
        rlc_warn("OpenBLAS uses generic '%s' kernels on this CPU (about 5x slower); run with OPENBLAS_CORETYPE=%s", cur, rec);
}

void backend_set_threads(backend_ctx *be, int n_threads) {
    if (n_threads <= 0) n_threads = omp_get_num_procs();
    be->n_threads = n_threads;
    omp_set_num_threads(n_threads);
    openblas_set_num_threads(n_threads);
}

void backend_init(backend_ctx *be, int n_threads) {
    memset(be, 0, sizeof *be);
    snprintf(be->blas_core, sizeof be->blas_core, "%s", openblas_get_corename());
    snprintf(be->blas_config, sizeof be->blas_config, "%s", openblas_get_config());
    backend_set_threads(be, n_threads);
}

void backend_sgemm(int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M == 0 || N == 0) return;
    CHECK(M <= INT32_MAX && N <= INT32_MAX && K <= INT32_MAX, "sgemm dims M=%lld N=%lld K=%lld exceed BLAS int", (long long)M, (long long)N, (long long)K);
    cblas_sgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans, transb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
                alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}
