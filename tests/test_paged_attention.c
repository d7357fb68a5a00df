// test_paged_attention.c: attention over the paged KV cache, full-causal and sliding-window: against the
// double-precision reference, a dense masked reference on the raw k/v, PyTorch (tests/py/paged_attention_ref.py)
// and the packed (flash) attention_forward; bitwise against the plain C definition; rows independent of the
// other tokens and of the thread count; a windowed row reads no key or block before its window. The Makefile
// also builds this test against paged_attention compiled for other ISAs (test_paged_attention_avx2,
// test_paged_attention_scalar), so every build checks the AVX2 task and the portable one too; RLC_EXPECT_ISA
// names the task such a build must run.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "kernels/kernels.h"
#include "rollout/kv_cache.h"
#include "rollout/paged_attention.h"
#include "testlib.h"

// Build a cache holding n_seqs sequences of given lengths with random k/v written through paged_kv_write,
// in shuffled (non-contiguous) blocks. Returns the block table (n_seqs, stride).
static int32_t *fill_cache(kv_cache *kc, tl_rng *r, int n_seqs, const int *lens, int64_t *stride_out, float **k_out,
                           float **v_out, int32_t **tok_seq_out, int32_t **pos_out, int64_t *T_out, int layer) {
    const int bs = kc->block_size, nkv = kc->n_kv_heads, D = kc->head_dim;
    int64_t stride = 1, T = 0;
    for (int s = 0; s < n_seqs; s++) {
        int64_t nb = (lens[s] + bs - 1) / bs;
        if (nb > stride) stride = nb;
        T += lens[s];
    }
    int32_t *bt = calloc((size_t)(n_seqs * stride), 4);
    // take blocks in a scrambled order: allocate all, then hand out from the end
    for (int s = 0; s < n_seqs; s++)
        for (int64_t i = 0; i < (lens[s] + bs - 1) / bs; i++) bt[s * stride + i] = kv_cache_alloc(kc);
    for (int s = 0; s + 1 < n_seqs; s += 2)   // swap whole tables of neighbours' first blocks for scatter
        if (bt[s * stride] >= 0 && bt[(s + 1) * stride] >= 0) { int32_t t = bt[s * stride]; bt[s * stride] = bt[(s + 1) * stride]; bt[(s + 1) * stride] = t; }
    float *k = tl_alloc_normal(r, T * nkv * D, 1.f), *v = tl_alloc_normal(r, T * nkv * D, 1.f);
    int32_t *ts = malloc((size_t)T * 4), *pos = malloc((size_t)T * 4);
    int64_t t = 0;
    for (int s = 0; s < n_seqs; s++)
        for (int p = 0; p < lens[s]; p++, t++) { ts[t] = s; pos[t] = p; }
    paged_kv_write(kc, layer, k, v, bt, stride, ts, pos, T);
    *stride_out = stride; *k_out = k; *v_out = v; *tok_seq_out = ts; *pos_out = pos; *T_out = T;
    return bt;
}


// Dense masked reference on the raw k/v (T, nkv*D), independent of the cache layout: query t sees key u iff
// ts[u] == ts[t] and pos[t] - window < pos[u] <= pos[t] (window 0: no lower bound). Double precision.
static void dense_masked_ref(float *out, const float *q, const float *k, const float *v, const int32_t *ts,
                             const int32_t *pos, int64_t T, int nh, int nkv, int D, int window, double scale) {
    const int G = nh / nkv;
    double *p = malloc((size_t)T * sizeof(double));
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < nh; h++) {
            const int g = h / G;
            double mx = -INFINITY, sum = 0;
            for (int64_t u = 0; u < T; u++) {
                const int vis = ts[u] == ts[t] && pos[u] <= pos[t] && (window == 0 || pos[u] > pos[t] - window);
                p[u] = -INFINITY;
                if (!vis) continue;
                double sc = 0;
                for (int d = 0; d < D; d++) sc += (double)q[(t * nh + h) * D + d] * (double)k[(u * nkv + g) * D + d];
                p[u] = sc * scale;
                if (p[u] > mx) mx = p[u];
            }
            for (int64_t u = 0; u < T; u++) { p[u] = p[u] == -INFINITY ? 0 : exp(p[u] - mx); sum += p[u]; }
            for (int d = 0; d < D; d++) {
                double a = 0;
                for (int64_t u = 0; u < T; u++)
                    if (p[u] != 0) a += p[u] * (double)v[(u * nkv + g) * D + d];
                out[(t * nh + h) * D + d] = (float)(a / sum);
            }
        }
    free(p);
}

static int write_raw(const char *dir, const char *name, const void *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    int bad = fwrite(p, 1, n, f) != n;
    return fclose(f) != 0 || bad;
}
static int read_raw(const char *dir, const char *name, void *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return 1;
    int bad = fread(p, 1, n, f) != n;
    fclose(f);
    return bad;
}

// PyTorch cases are queued (one directory each) and served by one python run: torch takes seconds to import.
typedef struct { char *dir; float *out; int64_t n; char name[160]; } torch_job;
#define MAX_TORCH_JOBS 32
static torch_job torch_jobs[MAX_TORCH_JOBS];
static int n_torch_jobs;

static void torch_queue(const char *name, const float *out, const float *q, const float *k, const float *v,
                        const int32_t *ts, const int32_t *pos, int64_t T, int nh, int nkv, int D, int window, float scale) {
    if (n_torch_jobs == MAX_TORCH_JOBS) { TL_CHECK(0, "too many torch jobs"); return; }
    torch_job *j = &torch_jobs[n_torch_jobs++];
    j->dir = tl_tmpdir("pattn");
    j->n = T * nh * D;
    j->out = malloc((size_t)j->n * 4);
    memcpy(j->out, out, (size_t)j->n * 4);
    snprintf(j->name, sizeof j->name, "%s", name);
    char meta[160];
    int ml = snprintf(meta, sizeof meta, "%lld %d %d %d %d %.9g\n", (long long)T, nh, nkv, D, window, (double)scale);
    int bad = write_raw(j->dir, "meta.txt", meta, (size_t)ml) | write_raw(j->dir, "seq.i32", ts, (size_t)T * 4) |
              write_raw(j->dir, "pos.i32", pos, (size_t)T * 4) | write_raw(j->dir, "q.f32", q, (size_t)j->n * 4) |
              write_raw(j->dir, "k.f32", k, (size_t)(T * nkv * D) * 4) | write_raw(j->dir, "v.f32", v, (size_t)(T * nkv * D) * 4);
    TL_CHECK(!bad, "%s: writing torch inputs to %s", name, j->dir);
}

static void torch_run_all(void) {
    if (n_torch_jobs == 0) return;
    char cmd[16384];
    int n = snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/py/paged_attention_ref.py");
    for (int i = 0; i < n_torch_jobs && n < (int)sizeof cmd - 600; i++) n += snprintf(cmd + n, sizeof cmd - n, " %s", torch_jobs[i].dir);
    const int rc = tl_system("%s", cmd);
    TL_CHECK(rc == 0, "tests/py/paged_attention_ref.py exited %d", rc);
    for (int i = 0; i < n_torch_jobs; i++) {
        torch_job *j = &torch_jobs[i];
        if (rc == 0) {
            float *t = malloc((size_t)j->n * 4);
            TL_CHECK(read_raw(j->dir, "out.f32", t, (size_t)j->n * 4) == 0, "%s: reading torch output", j->name);
            // fp32 online softmax vs float64 torch on the same (cache-rounded) k/v: rel 1e-5, as vs the double ref
            tl_check_close(j->name, j->out, t, j->n, 1e-5);
            free(t);
        }
        tl_system("rm -rf %s", j->dir);
        free(j->dir);
        free(j->out);
    }
    n_torch_jobs = 0;
}

static void test_paged_attention(void) {
    tl_rng r;
    tl_rng_init(&r, 5);
    const int have_torch = tl_have_torch();
    if (!have_torch) tl_skip("paged attention vs torch: torch not importable by /usr/bin/python3");
    // vector paths: head pairs (G = 2, 4, 8), a leftover head (G = 1, 5), register-resident rows (AVX-512:
    // D % 128 == 0: 128, 256; AVX2: 32-column strips) and the per-vector loop (D = 16, 24, 48, 64; D = 8 and 24
    // are AVX2's, plain C under AVX-512), tasks of several kv heads (the full call) and of one (the
    // batch-invariance calls), groups capped by the accumulator (G = 8: 2 of 4 kv heads); plain C only (block
    // sizes 5 and 32: one block of two 16-key sums)
    struct { int nh, nkv, D, bs; } cfgs[] = {{4, 2, 64, 16},  {8, 8, 16, 16}, {8, 2, 128, 16}, {16, 8, 128, 16},
                                             {10, 2, 128, 16}, {3, 1, 256, 16}, {6, 3, 32, 16}, {32, 4, 64, 16},
                                             {4, 2, 24, 16},  {2, 1, 8, 16},  {6, 2, 48, 16}, {6, 3, 24, 5},
                                             {4, 2, 32, 32}};
    const int ncfg = (int)(sizeof cfgs / sizeof cfgs[0]);
    // windows: full causal; one key; inside a block; exactly a block; edges that cross block boundaries at
    // different offsets; longer than some sequences and shorter than others
    // (each shape runs full, 23, and one of the others in turn: the plain C build stays under a minute)
    const int windows[] = {0, 23, 1, 5, 16, 37};
    for (int ci = 0; ci < 2 * ncfg; ci++) {   // each shape with an fp32, then a bf16 cache
        const int cj = ci % ncfg;
        const int nh = cfgs[cj].nh, nkv = cfgs[cj].nkv, D = cfgs[cj].D, bs = cfgs[cj].bs;
        const kv_dtype dt = ci < ncfg ? KV_F32 : KV_BF16;
        const char *dn = kv_dtype_name(dt);
        // Gemma's query_pre_attn_scalar^-1/2 differs from D^-1/2 in general: one shape uses another scale
        const float scale = cj == 6 ? 0.0625f : 1.0f / sqrtf((float)D);
        for (int wi = 0; wi < 3; wi++) {
            const int W = windows[wi < 2 ? wi : 2 + ci % 4];
            kv_cache kc;
            kv_cache_init(&kc, 2, nkv, D, bs, dt, kv_cache_block_bytes(2, nkv, D, bs, dt) * 64);
            const int lens[] = {1, 17, 40, 16, 3, 53};
            const int n_seqs = 6;
            int64_t stride, T;
            float *k, *v;
            int32_t *ts, *pos;
            int32_t *bt = fill_cache(&kc, &r, n_seqs, lens, &stride, &k, &v, &ts, &pos, &T, 1);
            float *q = tl_alloc_normal(&r, T * nh * D, 1.f);
            float *o = rlc_alloc((size_t)(T * nh * D) * 4), *o_ref = rlc_alloc((size_t)(T * nh * D) * 4);
            paged_attention_forward(o, q, &kc, 1, bt, stride, ts, pos, T, nh, W, scale);
            paged_attention_forward_ref(o_ref, q, &kc, 1, bt, stride, ts, pos, T, nh, W, scale);
            char name[160];
            snprintf(name, sizeof name, "paged attention (%s cache, window %d) vs ref nh=%d nkv=%d D=%d bs=%d", dn, W, nh,
                     nkv, D, bs);
            // fp32 online softmax vs double two-pass over the same (cached) k/v: rel 1e-5
            tl_check_close(name, o, o_ref, T * nh * D, 1e-5);
            // a bf16 cache holds k/v rounded to nearest even: the references below get those values
            if (dt == KV_BF16)
                for (int64_t i = 0; i < T * nkv * D; i++) { k[i] = bf16_to_f32(bf16_from_f32(k[i])); v[i] = bf16_to_f32(bf16_from_f32(v[i])); }
            float *o_dn = rlc_alloc((size_t)(T * nh * D) * 4);
            dense_masked_ref(o_dn, q, k, v, ts, pos, T, nh, nkv, D, W, scale);
            snprintf(name, sizeof name, "paged attention (%s cache, window %d) vs dense masked ref nh=%d nkv=%d D=%d bs=%d",
                     dn, W, nh, nkv, D, bs);
            tl_check_close(name, o, o_dn, T * nh * D, 1e-5);   // same reason as vs ref
            rlc_free(o_dn);
            if (have_torch && dt == KV_F32 && (W == 0 || W == 23 || W == 5)) {
                snprintf(name, sizeof name, "paged attention (window %d) vs torch nh=%d nkv=%d D=%d bs=%d", W, nh, nkv, D, bs);
                torch_queue(name, o, q, k, v, ts, pos, T, nh, nkv, D, W, scale);
            }
            if (W == 0 && scale == 1.0f / sqrtf((float)D)) {
                // vs the packed (flash) attention_forward of kernels.h on the same q/k/v: causal prefill
                int32_t cu[7] = {0};
                for (int s = 0; s < n_seqs; s++) cu[s + 1] = cu[s] + lens[s];
                float *o_fl = rlc_alloc((size_t)(T * nh * D) * 4), *lse = rlc_alloc((size_t)(T * nh) * 4);
                attention_forward(o_fl, lse, q, k, v, cu, n_seqs, nh, nkv, D);
                snprintf(name, sizeof name, "paged attention (%s cache) vs attention_forward nh=%d D=%d", dn, nh, D);
                tl_check_close(name, o, o_fl, T * nh * D, 1e-5);
                rlc_free(o_fl); rlc_free(lse);
            }
            // the vector task computes the definition's bits
            float *o_sc = rlc_alloc((size_t)(T * nh * D) * 4);
            paged_attention_forward_scalar(o_sc, q, &kc, 1, bt, stride, ts, pos, T, nh, W, scale);
            TL_CHECK(!memcmp(o, o_sc, (size_t)(T * nh * D) * 4), "paged attention (%s, %s cache, window %d) bitwise == the "
                     "plain C definition nh=%d nkv=%d D=%d bs=%d", paged_attention_isa(), dn, W, nh, nkv, D, bs);
            // and so does one thread
            const int nt = omp_get_max_threads();
            omp_set_num_threads(1);
            paged_attention_forward(o_sc, q, &kc, 1, bt, stride, ts, pos, T, nh, W, scale);
            omp_set_num_threads(nt);
            TL_CHECK(!memcmp(o, o_sc, (size_t)(T * nh * D) * 4), "paged attention (%s cache, window %d): 1 thread == %d "
                     "threads (D=%d)", dn, W, nt, D);
            rlc_free(o_sc);
            // batch invariance: decode of each token alone == its row in the full (prefill) call (one thread, and so
            // other kv-head groupings; thousands of tiny parallel regions cost seconds on a shared machine)
            int same = 1;
            float *o1 = rlc_alloc((size_t)(nh * D) * 4);
            omp_set_num_threads(1);
            for (int64_t t = 0; t < T; t++) {
                paged_attention_forward(o1, q + t * nh * D, &kc, 1, bt, stride, ts + t, pos + t, 1, nh, W, scale);
                if (memcmp(o1, o + t * nh * D, (size_t)(nh * D) * 4)) same = 0;
            }
            omp_set_num_threads(nt);
            TL_CHECK(same, "paged attention (%s cache, window %d) rows bitwise independent of the other tokens (D=%d)", dn,
                     W, D);
            // a windowed decode reads nothing before its window: the keys before it hold NaN and the table entries
            // of the blocks wholly before it are -1 (recycled), and each sequence's last row keeps its bits
            if (W > 0) {
                int32_t *bt2 = malloc((size_t)(n_seqs * stride) * 4);
                memcpy(bt2, bt, (size_t)(n_seqs * stride) * 4);
                int64_t t_last = -1, nan_n = 0;
                for (int s = 0; s < n_seqs; s++) {
                    t_last += lens[s];
                    const int k0 = pos[t_last] >= W ? pos[t_last] - W + 1 : 0;
                    for (int ib = 0; ib < k0 / bs; ib++) bt2[s * stride + ib] = -1;
                    nan_n += k0;
                }
                float *nanv = malloc((size_t)((nan_n + 1) * nkv * D) * 4);
                for (int64_t i = 0; i < (nan_n + 1) * nkv * D; i++) nanv[i] = NAN;
                int32_t *nts = malloc((size_t)(nan_n + 1) * 4), *npos = malloc((size_t)(nan_n + 1) * 4);
                int64_t ni = 0;
                t_last = -1;
                for (int s = 0; s < n_seqs; s++) {
                    t_last += lens[s];
                    const int k0 = pos[t_last] >= W ? pos[t_last] - W + 1 : 0;
                    for (int p = 0; p < k0; p++, ni++) { nts[ni] = s; npos[ni] = p; }
                }
                paged_kv_write(&kc, 1, nanv, nanv, bt, stride, nts, npos, nan_n);
                same = 1;
                t_last = -1;
                for (int s = 0; s < n_seqs; s++) {
                    t_last += lens[s];
                    paged_attention_forward(o1, q + t_last * nh * D, &kc, 1, bt2, stride, ts + t_last, pos + t_last, 1, nh,
                                            W, scale);
                    if (memcmp(o1, o + t_last * nh * D, (size_t)(nh * D) * 4)) same = 0;
                }
                TL_CHECK(same, "paged attention (%s cache, window %d, D=%d bs=%d): decode reads no key or block before the "
                         "window", dn, W, D, bs);
                free(bt2); free(nanv); free(nts); free(npos);
            }
            rlc_free(o1);
            rlc_free(q); rlc_free(o); rlc_free(o_ref); rlc_free(k); rlc_free(v);
            free(bt); free(ts); free(pos);
            kv_cache_free(&kc);
        }
    }
    torch_run_all();
}

int main(void) {
    const char *isa = paged_attention_isa();
    printf("paged attention task: %s\n", isa);
#ifdef RLC_EXPECT_ISA
    TL_CHECK(!strcmp(isa, RLC_EXPECT_ISA), "paged attention built for %s runs the %s task", RLC_EXPECT_ISA, isa);
    if (!strcmp(RLC_EXPECT_ISA, "avx2") && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
        tl_skip("this CPU has no AVX2+FMA: the avx2 task is not run");
        return tl_summary();
    }
#endif
    test_paged_attention();
    return tl_summary();
}
