// balance.c: Karmarkar-Karp and micro-batch balancing, mirroring verl's Python step for step (see balance.h).
#include "trainer/balance.h"

#include <string.h>

#include "core/common.h"

void rlc_partition_free(rlc_partition *p) {
    free(p->offsets);
    free(p->items);
    memset(p, 0, sizeof *p);
}

int64_t rlc_seqlen_workload(int64_t L) { return 24576 * L + L * L; }

// Set: items as (idx, val) in append order.
typedef struct {
    int64_t sum;
    int64_t n, cap;
    int64_t *idx, *val;
} kk_set;

// Python Set.__lt__: by sum, then item count, then the item list lexicographically.
static int set_lt(const kk_set *a, const kk_set *b) {
    if (a->sum != b->sum) return a->sum < b->sum;
    if (a->n != b->n) return a->n < b->n;
    for (int64_t i = 0; i < a->n; i++) {
        if (a->idx[i] != b->idx[i]) return a->idx[i] < b->idx[i];
        if (a->val[i] != b->val[i]) return a->val[i] < b->val[i];
    }
    return 0;
}

static void set_add(kk_set *s, int64_t idx, int64_t val) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 4;
        s->idx = rlc_realloc(s->idx, (size_t)s->cap * sizeof(int64_t));
        s->val = rlc_realloc(s->val, (size_t)s->cap * sizeof(int64_t));
    }
    s->idx[s->n] = idx;
    s->val[s->n++] = val;
    s->sum += val;
}

typedef struct {
    kk_set *sets;   // (k), kept in descending order
} kk_state;

// sorted(sets, reverse=True): stable descending insertion sort.
static void sort_sets(kk_set *s, int64_t k) {
    for (int64_t i = 1; i < k; i++) {
        kk_set x = s[i];
        int64_t j = i;
        while (j > 0 && set_lt(&s[j - 1], &x)) { s[j] = s[j - 1]; j--; }
        s[j] = x;
    }
}

static int64_t spread(const kk_state *s, int64_t k) { return s->sets[0].sum - s->sets[k - 1].sum; }

// State.__lt__: the larger spread first; ties: the larger first set first.
static int state_lt(const kk_state *a, const kk_state *b, int64_t k) {
    int64_t sa = spread(a, k), sb = spread(b, k);
    if (sa != sb) return sa > sb;
    return set_lt(&b->sets[0], &a->sets[0]);
}

// Python heapq.
typedef struct {
    kk_state **h;
    int64_t n;
    int64_t k;
} kk_heap;

static void sift_down(kk_heap *q, int64_t start, int64_t pos) {
    kk_state *item = q->h[pos];
    while (pos > start) {
        int64_t parent = (pos - 1) >> 1;
        if (state_lt(item, q->h[parent], q->k)) {
            q->h[pos] = q->h[parent];
            pos = parent;
            continue;
        }
        break;
    }
    q->h[pos] = item;
}
static void sift_up(kk_heap *q, int64_t pos) {
    int64_t end = q->n, start = pos;
    kk_state *item = q->h[pos];
    int64_t child = 2 * pos + 1;
    while (child < end) {
        int64_t right = child + 1;
        if (right < end && !state_lt(q->h[child], q->h[right], q->k)) child = right;
        q->h[pos] = q->h[child];
        pos = child;
        child = 2 * pos + 1;
    }
    q->h[pos] = item;
    sift_down(q, start, pos);
}
static void heap_push(kk_heap *q, kk_state *s) {
    q->h[q->n++] = s;
    sift_down(q, 0, q->n - 1);
}
static kk_state *heap_pop(kk_heap *q) {
    kk_state *last = q->h[--q->n];
    if (q->n) {
        kk_state *ret = q->h[0];
        q->h[0] = last;
        sift_up(q, 0);
        return ret;
    }
    return last;
}

static void state_free(kk_state *s, int64_t k) {
    for (int64_t i = 0; i < k; i++) { free(s->sets[i].idx); free(s->sets[i].val); }
    free(s->sets);
    free(s);
}

typedef struct { int64_t v, i; } vi_pair;
static int cmp_vi(const void *a, const void *b) {
    const vi_pair *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? -1 : 1;
    return x->i < y->i ? -1 : (x->i > y->i);
}

void rlc_karmarkar_karp(rlc_partition *out, const int64_t *values, int64_t n, int64_t k, int equal_size) {
    CHECK(k >= 1, "k_partitions %lld", (long long)k);
    memset(out, 0, sizeof *out);
    out->k = k;
    out->offsets = rlc_calloc((size_t)k + 1, sizeof(int64_t));
    out->items = rlc_malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    if (n == 0) return;
    vi_pair *sorted = rlc_malloc((size_t)n * sizeof(vi_pair));
    for (int64_t i = 0; i < n; i++) sorted[i] = (vi_pair){values[i], i};
    qsort(sorted, (size_t)n, sizeof(vi_pair), cmp_vi);
    kk_heap q = {rlc_malloc((size_t)n * sizeof(kk_state *)), 0, k};
    if (equal_size) {
        CHECK(n % k == 0, "%lld %% %lld != 0", (long long)n, (long long)k);
        for (int64_t off = 0; off < n; off += k) {
            kk_state *s = rlc_malloc(sizeof *s);
            s->sets = rlc_calloc((size_t)k, sizeof(kk_set));
            for (int64_t i = 0; i < k; i++) set_add(&s->sets[i], sorted[off + i].i, sorted[off + i].v);
            sort_sets(s->sets, k);
            heap_push(&q, s);
        }
    } else {
        for (int64_t j = 0; j < n; j++) {
            kk_state *s = rlc_malloc(sizeof *s);
            s->sets = rlc_calloc((size_t)k, sizeof(kk_set));
            set_add(&s->sets[0], sorted[j].i, sorted[j].v);
            sort_sets(s->sets, k);
            heap_push(&q, s);
        }
    }
    while (q.n > 1) {
        kk_state *s0 = heap_pop(&q), *s1 = heap_pop(&q);
        for (int64_t i = 0; i < k; i++) {
            kk_set *dst = &s0->sets[i], *src = &s1->sets[k - 1 - i];
            for (int64_t t = 0; t < src->n; t++) set_add(dst, src->idx[t], src->val[t]);
        }
        sort_sets(s0->sets, k);
        state_free(s1, k);
        heap_push(&q, s0);
    }
    kk_state *fin = q.h[0];
    int64_t o = 0;
    for (int64_t i = 0; i < k; i++) {
        out->offsets[i] = o;
        for (int64_t t = 0; t < fin->sets[i].n; t++) out->items[o++] = fin->sets[i].idx[t];
    }
    out->offsets[k] = o;
    if (equal_size)
        for (int64_t i = 0; i < k; i++)
            CHECK((out->offsets[i + 1] - out->offsets[i]) * k == n, "equal_size partition %lld", (long long)i);
    state_free(fin, k);
    free(q.h);
    free(sorted);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : (x > y);
}

void rlc_balanced_partitions(rlc_partition *out, const int64_t *values, int64_t n, int64_t k, int equal_size) {
    CHECK(n >= k, "number of items %lld < k_partitions %lld", (long long)n, (long long)k);
    rlc_karmarkar_karp(out, values, n, k, equal_size);
    for (int64_t j = 0; j < k; j++) {
        int64_t a = out->offsets[j], b = out->offsets[j + 1];
        CHECK(b > a, "the %lld-th partition is empty", (long long)j);
        qsort(out->items + a, (size_t)(b - a), sizeof(int64_t), cmp_i64);
    }
}

typedef struct { int64_t sum, first, j; } part_key;
static int cmp_part_desc(const void *a, const void *b) {
    const part_key *x = a, *y = b;   // reverse=True on (sum, first); keys are unique (first indices differ)
    if (x->sum != y->sum) return x->sum > y->sum ? -1 : 1;
    if (x->first != y->first) return x->first > y->first ? -1 : 1;
    return x->j < y->j ? -1 : (x->j > y->j);
}

void rlc_rearrange_micro_batches(rlc_partition *out, const int64_t *seqlens, int64_t n, int64_t max_token_len,
                                 int64_t min_num_micro_batch, int64_t num_batches_divided_by, int balance,
                                 const char *key_name) {
    int64_t total = 0, maxl = 0;
    for (int64_t i = 0; i < n; i++) {
        total += seqlens[i];
        if (seqlens[i] > maxl) maxl = seqlens[i];
    }
    if (maxl > max_token_len)
        rlc_die("%s = %lld is smaller than a sequence of %lld tokens; raise it to at least the longest prompt+response",
                key_name ? key_name : "max_token_len", (long long)max_token_len, (long long)maxl);
    int64_t k = (total + max_token_len - 1) / max_token_len;
    if (k > n) k = n;
    if (min_num_micro_batch > 0 && k < min_num_micro_batch) k = min_num_micro_batch;
    if (num_batches_divided_by > 0) k = (k + num_batches_divided_by - 1) / num_batches_divided_by * num_batches_divided_by;
    CHECK(k <= n, "%lld micro-batches for %lld sequences", (long long)k, (long long)n);
    if (n == 0) {
        memset(out, 0, sizeof *out);
        out->offsets = rlc_calloc(1, sizeof(int64_t));
        out->items = rlc_malloc(sizeof(int64_t));
        return;
    }
    int64_t *w = rlc_malloc((size_t)n * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) w[i] = rlc_seqlen_workload(seqlens[i]);
    rlc_partition p;
    rlc_balanced_partitions(&p, w, n, k, 0);
    if (!balance) { *out = p; free(w); return; }
    part_key *pk = rlc_malloc((size_t)k * sizeof(part_key));
    for (int64_t j = 0; j < k; j++) {
        int64_t s = 0;
        for (int64_t t = p.offsets[j]; t < p.offsets[j + 1]; t++) s += w[p.items[t]];
        pk[j] = (part_key){s, p.items[p.offsets[j]], j};
    }
    qsort(pk, (size_t)k, sizeof(part_key), cmp_part_desc);
    // order = sorted[::2][::-1] + sorted[1::2]
    int64_t *order = rlc_malloc((size_t)k * sizeof(int64_t)), no = 0;
    int64_t last_even = (k - 1) / 2 * 2;
    for (int64_t j = last_even; j >= 0; j -= 2) order[no++] = pk[j].j;
    for (int64_t j = 1; j < k; j += 2) order[no++] = pk[j].j;
    memset(out, 0, sizeof *out);
    out->k = k;
    out->offsets = rlc_malloc((size_t)(k + 1) * sizeof(int64_t));
    out->items = rlc_malloc((size_t)n * sizeof(int64_t));
    int64_t o = 0;
    for (int64_t j = 0; j < k; j++) {
        out->offsets[j] = o;
        int64_t src = order[j];
        for (int64_t t = p.offsets[src]; t < p.offsets[src + 1]; t++) out->items[o++] = p.items[t];
    }
    out->offsets[k] = o;
    free(order);
    free(pk);
    free(w);
    rlc_partition_free(&p);
}

void rlc_seqlen_unbalance(double out[6], const int64_t *seqlens, int64_t n, const rlc_partition *p) {
    int64_t k = p->k;
    int64_t bs = n / k;
    double mn = 0, mx = 0, total = 0;
    int first = 1;
    for (int64_t off = 0; off < n && bs > 0; off += bs) {
        double s = 0;
        for (int64_t i = off; i < off + bs && i < n; i++) s += (double)seqlens[i];
        if (first || s < mn) mn = s;
        if (first || s > mx) mx = s;
        first = 0;
        total += s;
    }
    double bmn = 0, bmx = 0;
    for (int64_t j = 0; j < k; j++) {
        double s = 0;
        for (int64_t t = p->offsets[j]; t < p->offsets[j + 1]; t++) s += (double)seqlens[p->items[t]];
        if (j == 0 || s < bmn) bmn = s;
        if (j == 0 || s > bmx) bmx = s;
    }
    out[0] = mn; out[1] = mx; out[2] = mx - mn; out[3] = bmn; out[4] = bmx; out[5] = total / (double)k;
}
