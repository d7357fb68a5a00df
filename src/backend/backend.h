// backend.h: the compute seam. Everything that a later CUDA backend (cuBLAS, NCCL) replaces goes
// through here: dense matrix products and the thread count. The CPU backend is OpenBLAS + OpenMP.
#pragma once
#include <stdint.h>

typedef struct {
    int n_threads;            // OpenMP + BLAS threads (>= 1)
    // How the decoder spreads a packed batch over the threads (decoder_split.c): 0 = automatic (small
    // models: each thread runs whole sequences through every layer, with single-threaded kernels and sgemm);
    // -1 = never (each kernel and sgemm threaded on its own); 1 = whenever there are enough sequences (tests).
    int row_split;
    char blas_core[64];       // OpenBLAS kernel family actually in use, e.g. "SkylakeX", "Haswell", "Prescott"
    char blas_config[256];    // openblas_get_config()
} backend_ctx;

// Choose threads and report the BLAS core. n_threads <= 0 means "all cores" (omp_get_max_threads()).
void backend_init(backend_ctx *be, int n_threads);
void backend_set_threads(backend_ctx *be, int n_threads);

// Called first thing in main(), before anything touches BLAS: if OpenBLAS would fall back to a
// generic kernel on a CPU it does not recognise (Debian 12's 0.3.21 on Zen 4/5 and Sapphire Rapids),
// set OPENBLAS_CORETYPE to the best matching family and re-exec ourselves so the library initialises
// with it (its CPU detection runs in a load-time constructor). Honours a user-set OPENBLAS_CORETYPE
// and RLC_NO_BLAS_FIX=1. In the same re-exec it sets GOMP_SPINCOUNT (short OpenMP barrier spinning: small
// kernels on shared cores) unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT. argv is needed for the re-exec.
void backend_fix_blas_coretype(int argc, char **argv);
// The core type OpenBLAS would pick for this CPU on its own (cpuid based), and the one rlc recommends.
const char *backend_blas_recommended_core(void);

// C (M,N) = alpha * op(A) op(B) + beta * C, row-major. transa/transb: 0 = as stored, 1 = transposed.
// lda/ldb/ldc are row strides in elements of the matrices as stored.
void backend_sgemm(int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
