// safetensors.c: validated mmap reader, streaming atomic writer, sharded weight directories.
#include "io/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/bf16.h"
#include "core/common.h"
#include "core/json.h"

static const struct { const char *name; int size; } DTYPES[ST_N_DTYPES] = {
    [ST_BOOL] = {"BOOL", 1}, [ST_U8] = {"U8", 1}, [ST_I8] = {"I8", 1}, [ST_F8_E5M2] = {"F8_E5M2", 1},
    [ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_I16] = {"I16", 2}, [ST_U16] = {"U16", 2}, [ST_F16] = {"F16", 2},
    [ST_BF16] = {"BF16", 2}, [ST_I32] = {"I32", 4}, [ST_U32] = {"U32", 4}, [ST_F32] = {"F32", 4},
    [ST_F64] = {"F64", 8}, [ST_I64] = {"I64", 8}, [ST_U64] = {"U64", 8},
};

const char *st_dtype_name(st_dtype dt) { return (unsigned)dt < ST_N_DTYPES ? DTYPES[dt].name : "?"; }
int st_dtype_size(st_dtype dt) { return (unsigned)dt < ST_N_DTYPES ? DTYPES[dt].size : 0; }
int st_dtype_parse(const char *s) {
    for (int i = 0; i < ST_N_DTYPES; i++)
        if (strcmp(s, DTYPES[i].name) == 0) return i;
    return -1;
}

// ---------------------------------------------------------------------------------------------
// scalar conversions

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float st_bf16_to_f32(uint16_t h) { return bf16_to_f32(h); }

float st_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        if (m == 0) return u2f(sign);
        float v = (float)m * 0x1p-24f;                  // subnormal: m * 2^-24, exact in fp32
        return u2f(sign | f2u(v));
    }
    if (e == 31) return u2f(sign | 0x7f800000u | (m << 13));   // inf / nan (payload kept)
    return u2f(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t st_f32_to_bf16(float f) { return bf16_from_f32(f); }

uint16_t st_f32_to_f16(float f) {
    uint32_t x = f2u(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00;               // NaN, as c10::Half
    if (ax >= 0x477ff000u) return sign | 0x7c00;              // >= 65520 rounds to inf
    if (ax < 0x38800000u) {                                   // below 2^-14: subnormal or zero
        // |f| * 2^24 is exact; round it to an integer, nearest even (may round up to the smallest normal)
        float s = u2f(ax) * 0x1p24f;
        uint32_t m = (uint32_t)s;
        float frac = s - (float)m;
        if (frac > 0.5f || (frac == 0.5f && (m & 1u))) m++;
        return sign | (uint16_t)m;
    }
    uint32_t h = (((ax >> 23) - 112) << 10) | ((ax >> 13) & 0x3ffu);
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;  // carry may reach the exponent (correct)
    return sign | (uint16_t)h;
}

int st_convert_to_f32(st_dtype dt, const void *src, float *dst, int64_t n) {
    const unsigned char *s = src;
    switch (dt) {
    case ST_F32: memcpy(dst, src, (size_t)n * 4); return 0;
    case ST_BF16:
#pragma omp parallel for schedule(static) if (n > (1 << 18))
        for (int64_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, s + 2 * i, 2); dst[i] = st_bf16_to_f32(h); }
        return 0;
    case ST_F16:
#pragma omp parallel for schedule(static) if (n > (1 << 18))
        for (int64_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, s + 2 * i, 2); dst[i] = st_f16_to_f32(h); }
        return 0;
    case ST_F64:
        for (int64_t i = 0; i < n; i++) { double d; memcpy(&d, s + 8 * i, 8); dst[i] = (float)d; }
        return 0;
    default: return -1;
    }
}

void st_tensor_to_f32(const st_tensor *t, float *dst, const char *path) {
    if (st_convert_to_f32(t->dtype, t->data, dst, t->numel) != 0)
        rlc_die("%s: tensor '%s' has dtype %s; expected F32, BF16 or F16", path, t->name, st_dtype_name(t->dtype));
}

void st_tensor_drop_pages(const st_tensor *t) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t b = ((uintptr_t)t->data + page - 1) & ~(page - 1);
    uintptr_t e = ((uintptr_t)t->data + (t->end - t->begin)) & ~(page - 1);
    if (e > b) madvise((void *)b, e - b, MADV_DONTNEED);
}

// ---------------------------------------------------------------------------------------------
// reader

#define FAIL(...) do { rlc_format_short(err, errlen, __VA_ARGS__); goto fail; } while (0)

static int utf8_valid(const unsigned char *s, uint64_t n, uint64_t *bad) {
    uint64_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        int len;
        uint32_t cp;
        if (c < 0x80) {   // JSON allows no raw control bytes (cJSON would take them for whitespace)
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') { *bad = i; return 0; }
            i++;
            continue;
        }
        else if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; }
        else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; }
        else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; }
        else { *bad = i; return 0; }
        if (i + (uint64_t)len > n) { *bad = i; return 0; }
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) { *bad = i; return 0; }
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff)) { *bad = i; return 0; }
        i += (uint64_t)len;
    }
    return 1;
}

// non-negative integer JSON number below 2^53 (exact in a double)
static int json_u64(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0 && d < 9007199254740992.0) || d != floor(d)) return 0;
    *out = (uint64_t)d;
    return 1;
}

typedef struct { const char *name; int idx; } name_idx;
static int cmp_name_idx(const void *a, const void *b) {
    const name_idx *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}
static int cmp_offsets(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

int st_file_open_err(st_file *f, const char *path, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    f->path = rlc_strdup(path);
    cJSON *root = NULL;
    char *hdr = NULL;
    name_idx *names = NULL;
    const st_tensor **order = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) FAIL("%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) { close(fd); FAIL("%s: cannot stat: %s", path, strerror(errno)); }
    if (!S_ISREG(st.st_mode)) { close(fd); FAIL("%s: not a regular file", path); }
    uint64_t size = (uint64_t)st.st_size;
    if (size < 8) { close(fd); FAIL("%s: file is %llu bytes, too short for the 8-byte header length (truncated file?)", path, (unsigned long long)size); }
    f->map_len = (size_t)size;
    f->map = mmap(NULL, f->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED) { f->map = NULL; FAIL("%s: cannot mmap: %s", path, strerror(errno)); }
    const unsigned char *m = f->map;
    uint64_t N = 0;
    for (int i = 7; i >= 0; i--) N = (N << 8) | m[i];   // little-endian u64
    if (N > ST_MAX_HEADER) FAIL("%s: header length %llu exceeds the safetensors limit of %llu bytes", path, (unsigned long long)N, ST_MAX_HEADER);
    if (N > size - 8) FAIL("%s: header length %llu runs past the end of the file (%llu bytes; truncated file?)", path,
                           (unsigned long long)N, (unsigned long long)size);
    if (N < 2) FAIL("%s: header length %llu is too short for a JSON object", path, (unsigned long long)N);
    f->header_len = N;
    f->data = m + 8 + N;
    f->data_len = size - 8 - N;
    uint64_t bad = 0;
    if (!utf8_valid(m + 8, N, &bad)) {
        if (m[8 + bad] < 0x20) FAIL("%s: invalid JSON header: control byte 0x%02x at header byte %llu", path, m[8 + bad], (unsigned long long)bad);
        FAIL("%s: header is not valid UTF-8 at header byte %llu", path, (unsigned long long)bad);
    }
    if (m[8] != '{') FAIL("%s: header does not start with '{' (invalid JSON header)", path);
    hdr = rlc_malloc((size_t)N + 1);
    memcpy(hdr, m + 8, (size_t)N);
    hdr[N] = 0;
    {
        char where[64], jerr[1024];
        snprintf(where, sizeof where, "header");
        root = rlc_json_parse_err(hdr, (size_t)N, where, jerr, sizeof jerr);   // \u0000, trailing text: refused
        if (!root) FAIL("%s: invalid JSON %s", path, jerr);
    }
    if (!cJSON_IsObject(root)) FAIL("%s: header is not a JSON object", path);

    int n_items = cJSON_GetArraySize(root), n_meta_items = 0;
    f->tensors = rlc_calloc((size_t)n_items + 1, sizeof(st_tensor));
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        const char *key = it->string;
        if (strcmp(key, "__metadata__") == 0) {
            if (++n_meta_items > 1) FAIL("%s: duplicate key \"__metadata__\" in header", path);
            if (!cJSON_IsObject(it)) FAIL("%s: __metadata__ must be an object of string values", path);
            int nm = cJSON_GetArraySize(it);
            f->meta_key = rlc_calloc((size_t)nm + 1, sizeof(char *));
            f->meta_val = rlc_calloc((size_t)nm + 1, sizeof(char *));
            const cJSON *mv;
            cJSON_ArrayForEach(mv, it) {
                if (!cJSON_IsString(mv)) FAIL("%s: __metadata__ value for \"%s\" must be a string", path, mv->string);
                for (int k = 0; k < f->n_meta; k++)
                    if (strcmp(f->meta_key[k], mv->string) == 0) FAIL("%s: duplicate __metadata__ key \"%s\"", path, mv->string);
                f->meta_key[f->n_meta] = rlc_strdup(mv->string);
                f->meta_val[f->n_meta++] = rlc_strdup(mv->valuestring);
            }
            continue;
        }
        st_tensor *t = &f->tensors[f->n_tensors++];
        t->name = rlc_strdup(key);
        if (!cJSON_IsObject(it)) FAIL("%s: tensor '%s': entry must be an object with dtype, shape, data_offsets", path, key);
        const cJSON *dt = NULL, *sh = NULL, *of = NULL, *fld;
        cJSON_ArrayForEach(fld, it) {
            const cJSON **slot = !strcmp(fld->string, "dtype") ? &dt : !strcmp(fld->string, "shape") ? &sh
                               : !strcmp(fld->string, "data_offsets") ? &of : NULL;
            if (!slot) continue;   // unknown fields are ignored, as the reference reader does
            if (*slot) FAIL("%s: tensor '%s': duplicate field \"%s\"", path, key, fld->string);
            *slot = fld;
        }
        if (!dt) FAIL("%s: tensor '%s': missing \"dtype\"", path, key);
        if (!sh) FAIL("%s: tensor '%s': missing \"shape\"", path, key);
        if (!of) FAIL("%s: tensor '%s': missing \"data_offsets\"", path, key);
        if (!cJSON_IsString(dt)) FAIL("%s: tensor '%s': dtype must be a string", path, key);
        int d = st_dtype_parse(dt->valuestring);
        if (d < 0) FAIL("%s: tensor '%s': unknown dtype \"%s\"", path, key, dt->valuestring);
        t->dtype = (st_dtype)d;
        if (!cJSON_IsArray(sh)) FAIL("%s: tensor '%s': shape must be an array of non-negative integers", path, key);
        int nd = cJSON_GetArraySize(sh);
        if (nd > ST_MAX_DIMS) FAIL("%s: tensor '%s': %d dimensions, at most %d supported", path, key, nd, ST_MAX_DIMS);
        t->ndim = nd;
        uint64_t numel = 1;
        int k = 0, overflow = 0;
        const cJSON *dv;
        cJSON_ArrayForEach(dv, sh) {
            uint64_t x;
            if (!json_u64(dv, &x)) FAIL("%s: tensor '%s': shape must be an array of non-negative integers", path, key);
            t->shape[k++] = (int64_t)x;
            if (x && numel > UINT64_MAX / x) overflow = 1;
            numel *= x;
        }
        if (overflow || numel > (uint64_t)INT64_MAX / 8) FAIL("%s: tensor '%s': shape has too many elements", path, key);
        t->numel = (int64_t)numel;
        if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 || !json_u64(cJSON_GetArrayItem(of, 0), &t->begin) ||
            !json_u64(cJSON_GetArrayItem(of, 1), &t->end))
            FAIL("%s: tensor '%s': data_offsets must be [begin, end] with non-negative integers", path, key);
        if (t->end < t->begin)
            FAIL("%s: tensor '%s': data_offsets [%llu, %llu] has end before begin", path, key,
                 (unsigned long long)t->begin, (unsigned long long)t->end);
        if (t->end > f->data_len)
            FAIL("%s: tensor '%s': data_offsets [%llu, %llu] out of range: the data buffer holds %llu bytes (truncated file?)",
                 path, key, (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)f->data_len);
        uint64_t want = numel * (uint64_t)DTYPES[d].size;
        if (t->end - t->begin != want)
            FAIL("%s: tensor '%s': data_offsets [%llu, %llu] span %llu bytes, but shape and dtype %s need %llu", path, key,
                 (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)(t->end - t->begin),
                 DTYPES[d].name, (unsigned long long)want);
        t->data = f->data + t->begin;
    }

    // duplicate names (cJSON keeps duplicate keys as separate items)
    names = rlc_calloc((size_t)f->n_tensors + 1, sizeof(name_idx));
    for (int i = 0; i < f->n_tensors; i++) { names[i].name = f->tensors[i].name; names[i].idx = i; }
    qsort(names, (size_t)f->n_tensors, sizeof(name_idx), cmp_name_idx);
    f->by_name = rlc_calloc((size_t)f->n_tensors + 1, sizeof(int));
    for (int i = 0; i < f->n_tensors; i++) {
        if (i > 0 && strcmp(names[i].name, names[i - 1].name) == 0) FAIL("%s: tensor '%s': duplicate key in header", path, names[i].name);
        f->by_name[i] = names[i].idx;
    }

    // contiguous tiling of the data buffer
    order = rlc_calloc((size_t)f->n_tensors + 1, sizeof(*order));
    for (int i = 0; i < f->n_tensors; i++) order[i] = &f->tensors[i];
    qsort(order, (size_t)f->n_tensors, sizeof(*order), cmp_offsets);
    uint64_t pos = 0;
    const st_tensor *prev = NULL;
    for (int i = 0; i < f->n_tensors; i++) {
        const st_tensor *t = order[i];
        if (t->begin < pos)
            FAIL("%s: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s' [%llu, %llu]", path, t->name,
                 (unsigned long long)t->begin, (unsigned long long)t->end, prev->name, (unsigned long long)prev->begin,
                 (unsigned long long)prev->end);
        if (t->begin > pos)
            FAIL("%s: tensor '%s': data_offsets [%llu, %llu] leave a gap of %llu bytes after %s (offsets must be contiguous)",
                 path, t->name, (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)(t->begin - pos),
                 prev ? prev->name : "the start of the data buffer");
        pos = t->end;
        prev = t;
    }
    if (pos != f->data_len)
        FAIL("%s: the tensors end at data byte %llu but the data buffer holds %llu bytes (%s)", path, (unsigned long long)pos,
             (unsigned long long)f->data_len, prev ? "trailing bytes after the last tensor" : "no tensors but trailing bytes");

    free(order);
    free(names);
    free(hdr);
    cJSON_Delete(root);
    return 0;
fail:
    free(order);
    free(names);
    free(hdr);
    cJSON_Delete(root);
    st_file_close(f);
    return -1;
}

void st_file_open(st_file *f, const char *path) {
    char err[1024];
    if (st_file_open_err(f, path, err, sizeof err) != 0) rlc_die("%s", err);
}

void st_file_close(st_file *f) {
    if (f->map) munmap(f->map, f->map_len);
    for (int i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    for (int i = 0; i < f->n_meta; i++) { free(f->meta_key[i]); free(f->meta_val[i]); }
    free(f->tensors);
    free(f->by_name);
    free(f->meta_key);
    free(f->meta_val);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const st_tensor *st_find(const st_file *f, const char *name) {
    int lo = 0, hi = f->n_tensors - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const st_tensor *t = &f->tensors[f->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid - 1; else lo = mid + 1;
    }
    return NULL;
}

const char *st_meta(const st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_key[i], key) == 0) return f->meta_val[i];
    return NULL;
}

// ---------------------------------------------------------------------------------------------
// weight directories

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const st_dir_entry *)a)->t->name, ((const st_dir_entry *)b)->t->name);
}

int st_dir_open_err(st_dir *d, const char *dir, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    d->dir = rlc_strdup(dir);
    char *single = rlc_path_join(dir, "model.safetensors");
    char *index = rlc_path_join(dir, "model.safetensors.index.json");
    char *text = NULL;
    cJSON *root = NULL;
    name_idx *wm = NULL;
    int n_wm = 0;
    if (rlc_file_exists(single)) {
        d->files = rlc_calloc(1, sizeof(st_file));
        if (st_file_open_err(&d->files[0], single, err, errlen) != 0) goto fail;
        d->n_files = 1;
    } else if (rlc_file_exists(index)) {
        size_t len;
        FILE *fp = fopen(index, "rb");
        if (!fp) FAIL("%s: cannot open: %s", index, strerror(errno));
        fclose(fp);
        text = rlc_read_file(index, &len);
        char jerr[1024];
        root = rlc_json_parse_err(text, len, index, jerr, sizeof jerr);
        if (!root) FAIL("%s", jerr);
        const cJSON *map = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
        if (!map) FAIL("%s: missing key \"weight_map\"", index);
        if (!cJSON_IsObject(map)) FAIL("%s: key \"weight_map\" must be an object of tensor name -> shard file", index);
        int n = cJSON_GetArraySize(map);
        wm = rlc_calloc((size_t)n + 1, sizeof(name_idx));
        char **shard_names = rlc_calloc((size_t)n + 1, sizeof(char *));
        const cJSON *e;
        int bad = 0;
        cJSON_ArrayForEach(e, map) {
            if (!cJSON_IsString(e)) { rlc_format_short(err, errlen, "%s: weight_map['%s'] must be a shard file name", index, e->string); bad = 1; break; }
            const char *s = e->valuestring;
            if (!*s || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, "..")) {
                rlc_format_short(err, errlen, "%s: weight_map['%s'] = \"%s\" must name a file in the same directory", index, e->string, s);
                bad = 1;
                break;
            }
            int fi = -1;
            for (int k = 0; k < d->n_files; k++)
                if (strcmp(shard_names[k], s) == 0) { fi = k; break; }
            if (fi < 0) { fi = d->n_files; shard_names[d->n_files++] = (char *)s; }
            wm[n_wm].name = e->string;
            wm[n_wm++].idx = fi;
        }
        if (!bad) {
            qsort(wm, (size_t)n_wm, sizeof(name_idx), cmp_name_idx);
            for (int i = 1; i < n_wm; i++)
                if (strcmp(wm[i].name, wm[i - 1].name) == 0) {
                    rlc_format_short(err, errlen, "%s: tensor '%s': duplicate key in weight_map", index, wm[i].name);
                    bad = 1;
                    break;
                }
        }
        if (bad) { free(shard_names); d->n_files = 0; goto fail; }
        int nf = d->n_files;
        d->n_files = 0;
        d->files = rlc_calloc((size_t)nf + 1, sizeof(st_file));
        for (int k = 0; k < nf; k++) {
            char *p = rlc_path_join(dir, shard_names[k]);
            int rc = st_file_open_err(&d->files[k], p, err, errlen);
            free(p);
            if (rc != 0) { free(shard_names); goto fail; }
            d->n_files++;
        }
        free(shard_names);
        // every mapped tensor is in its shard
        for (int i = 0; i < n_wm; i++)
            if (!st_find(&d->files[wm[i].idx], wm[i].name))
                FAIL("%s: tensor '%s': weight_map names shard %s, which does not hold it", index, wm[i].name,
                     d->files[wm[i].idx].path);
    } else {
        FAIL("%s: no model.safetensors or model.safetensors.index.json", dir);
    }

    for (int k = 0; k < d->n_files; k++) d->n_tensors += d->files[k].n_tensors;
    d->entries = rlc_calloc((size_t)d->n_tensors + 1, sizeof(st_dir_entry));
    int j = 0;
    for (int k = 0; k < d->n_files; k++)
        for (int i = 0; i < d->files[k].n_tensors; i++) { d->entries[j].t = &d->files[k].tensors[i]; d->entries[j++].file = k; }
    qsort(d->entries, (size_t)d->n_tensors, sizeof(st_dir_entry), cmp_entry);
    for (int i = 1; i < d->n_tensors; i++)
        if (strcmp(d->entries[i].t->name, d->entries[i - 1].t->name) == 0)
            FAIL("%s: tensor '%s': present in both %s and %s", dir, d->entries[i].t->name, d->files[d->entries[i - 1].file].path,
                 d->files[d->entries[i].file].path);
    if (root) {
        // every shard tensor is mapped to that shard (wm is sorted by name, like entries)
        for (int i = 0; i < d->n_tensors; i++) {
            name_idx key = {d->entries[i].t->name, -1};
            int lo = 0, hi = n_wm - 1, found = -1;
            while (lo <= hi) {
                int mid = (lo + hi) / 2, c = strcmp(key.name, wm[mid].name);
                if (c == 0) { found = mid; break; }
                if (c < 0) hi = mid - 1; else lo = mid + 1;
            }
            if (found < 0 || wm[found].idx != d->entries[i].file)
                FAIL("%s: tensor '%s' in shard %s is not mapped to that shard by weight_map", index, d->entries[i].t->name,
                     d->files[d->entries[i].file].path);
        }
    }
    free(wm);
    cJSON_Delete(root);
    free(text);
    free(single);
    free(index);
    return 0;
fail:
    free(wm);
    cJSON_Delete(root);
    free(text);
    free(single);
    free(index);
    st_dir_close(d);
    return -1;
}

void st_dir_open(st_dir *d, const char *dir) {
    char err[1024];
    if (st_dir_open_err(d, dir, err, sizeof err) != 0) rlc_die("%s", err);
}

void st_dir_close(st_dir *d) {
    for (int k = 0; k < d->n_files; k++) st_file_close(&d->files[k]);
    free(d->files);
    free(d->entries);
    free(d->dir);
    memset(d, 0, sizeof *d);
}

const st_tensor *st_dir_find(const st_dir *d, const char *name, const char **path) {
    int lo = 0, hi = d->n_tensors - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(name, d->entries[mid].t->name);
        if (c == 0) {
            if (path) *path = d->files[d->entries[mid].file].path;
            return d->entries[mid].t;
        }
        if (c < 0) hi = mid - 1; else lo = mid + 1;
    }
    return NULL;
}

// ---------------------------------------------------------------------------------------------
// writer

typedef struct {
    int fd;
    const char *path;
    char *tmp;
    unsigned char *buf;
    size_t n, cap;
} wfile;

RLC_NORETURN static void wfail(wfile *w, const char *what) {
    int e = errno;
    if (w->fd >= 0) close(w->fd);
    unlink(w->tmp);
    rlc_die("%s: cannot %s: %s", w->path, what, strerror(e));
}

static void wflush(wfile *w) {
    size_t off = 0;
    while (off < w->n) {
        ssize_t k = write(w->fd, w->buf + off, w->n - off);
        if (k < 0) { if (errno == EINTR) continue; wfail(w, "write"); }
        off += (size_t)k;
    }
    w->n = 0;
}

static void wput(wfile *w, const void *p, size_t len) {
    const unsigned char *s = p;
    while (len) {
        size_t k = w->cap - w->n < len ? w->cap - w->n : len;
        memcpy(w->buf + w->n, s, k);
        w->n += k; s += k; len -= k;
        if (w->n == w->cap) wflush(w);
    }
}

// append a JSON string literal
static void jstr(char **s, size_t *n, size_t *cap, const char *v) {
    size_t need = *n + strlen(v) * 6 + 3;
    if (need > *cap) { *cap = need * 2; *s = rlc_realloc(*s, *cap); }
    char *o = *s + *n;
    *o++ = '"';
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\') { *o++ = '\\'; *o++ = (char)*p; }
        else if (*p < 0x20) o += sprintf(o, "\\u%04x", *p);
        else *o++ = (char)*p;
    }
    *o++ = '"';
    *n = (size_t)(o - *s);
}
static void jraw(char **s, size_t *n, size_t *cap, const char *fmt, ...) RLC_PRINTF(4, 5);
static void jraw(char **s, size_t *n, size_t *cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char tmp[512];
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    CHECK(k >= 0 && (size_t)k < sizeof tmp, "json fragment too long");
    if (*n + (size_t)k + 1 > *cap) { *cap = (*n + (size_t)k + 1) * 2; *s = rlc_realloc(*s, *cap); }
    memcpy(*s + *n, tmp, (size_t)k + 1);
    *n += (size_t)k;
}

void st_write(const char *path, const st_write_tensor *tensors, int n, const char *const *meta, int n_meta) {
    // header
    size_t hn = 0, hcap = 4096;
    char *h = rlc_malloc(hcap);
    jraw(&h, &hn, &hcap, "{");
    if (n_meta > 0) {
        jstr(&h, &hn, &hcap, "__metadata__");
        jraw(&h, &hn, &hcap, ":{");
        for (int i = 0; i < n_meta; i++) {
            if (i) jraw(&h, &hn, &hcap, ",");
            jstr(&h, &hn, &hcap, meta[2 * i]);
            jraw(&h, &hn, &hcap, ":");
            jstr(&h, &hn, &hcap, meta[2 * i + 1]);
        }
        jraw(&h, &hn, &hcap, "}");
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const st_write_tensor *t = &tensors[i];
        CHECK(t->ndim >= 0 && t->ndim <= ST_MAX_DIMS, "tensor %s: ndim %d", t->name, t->ndim);
        CHECK((unsigned)t->dtype < ST_N_DTYPES, "tensor %s: dtype %d", t->name, (int)t->dtype);
        if (t->f32) CHECK(t->dtype == ST_F32 || t->dtype == ST_BF16 || t->dtype == ST_F16, "tensor %s: fp32 source needs F32/BF16/F16, got %s", t->name, st_dtype_name(t->dtype));
        int64_t numel = 1;
        for (int k = 0; k < t->ndim; k++) { CHECK(t->shape[k] >= 0, "tensor %s: shape", t->name); numel *= t->shape[k]; }
        CHECK(numel == 0 || t->f32 || t->fill || t->raw, "tensor %s has no data", t->name);
        uint64_t bytes = (uint64_t)numel * (uint64_t)st_dtype_size(t->dtype);
        if (n_meta > 0 || i > 0) jraw(&h, &hn, &hcap, ",");
        jstr(&h, &hn, &hcap, t->name);
        jraw(&h, &hn, &hcap, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(t->dtype));
        for (int k = 0; k < t->ndim; k++) jraw(&h, &hn, &hcap, "%s%lld", k ? "," : "", (long long)t->shape[k]);
        jraw(&h, &hn, &hcap, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + bytes));
        off += bytes;
    }
    jraw(&h, &hn, &hcap, "}");
    while (hn % 8) jraw(&h, &hn, &hcap, " ");
    CHECK(hn <= ST_MAX_HEADER, "header of %zu bytes", hn);

    size_t pl = strlen(path);
    wfile w = {.fd = -1, .path = path};
    w.tmp = rlc_malloc(pl + 32);
    snprintf(w.tmp, pl + 32, "%s.tmp.%d", path, (int)getpid());
    w.fd = open(w.tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (w.fd < 0) { int e = errno; free(w.tmp); free(h); rlc_die("%s: cannot create: %s", path, strerror(e)); }
    w.cap = 8u << 20;
    w.buf = rlc_malloc(w.cap);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hn >> (8 * i));
    wput(&w, len8, 8);
    wput(&w, h, hn);
    free(h);
    enum { CH = 1 << 16 };
    uint16_t *cv = rlc_malloc(CH * sizeof(uint16_t));
    float *gen = NULL;
    for (int i = 0; i < n; i++) {
        const st_write_tensor *t = &tensors[i];
        int64_t numel = 1;
        for (int k = 0; k < t->ndim; k++) numel *= t->shape[k];
        if (!t->f32 && !t->fill) {
            if (numel) wput(&w, t->raw, (size_t)numel * (size_t)st_dtype_size(t->dtype));
            continue;
        }
        if (t->fill && !t->f32) CHECK(t->dtype == ST_F32 || t->dtype == ST_BF16 || t->dtype == ST_F16, "tensor %s: generator needs F32/BF16/F16", t->name);
        if (t->fill && !t->f32 && !gen) gen = rlc_alloc((size_t)ST_FILL_CHUNK * sizeof(float));
        for (int64_t g0 = 0; g0 < numel; g0 += ST_FILL_CHUNK) {   // generator blocks (one block for f32 sources)
            int64_t gn = t->f32 ? numel : (numel - g0 < ST_FILL_CHUNK ? numel - g0 : ST_FILL_CHUNK);
            const float *src = t->f32;
            if (!t->f32) { t->fill(t->ctx, t, g0, gn, gen); src = gen; }
            if (t->dtype == ST_F32) {
                wput(&w, src, (size_t)gn * 4);
            } else {
                for (int64_t s = 0; s < gn; s += CH) {
                    int64_t m = gn - s < CH ? gn - s : CH;
                    if (t->dtype == ST_BF16) for (int64_t j = 0; j < m; j++) cv[j] = st_f32_to_bf16(src[s + j]);
                    else for (int64_t j = 0; j < m; j++) cv[j] = st_f32_to_f16(src[s + j]);
                    wput(&w, cv, (size_t)m * 2);
                }
            }
            if (t->f32) break;
        }
    }
    rlc_free(gen);
    free(cv);
    wflush(&w);
    if (fsync(w.fd) != 0) wfail(&w, "fsync");
    if (close(w.fd) != 0) { w.fd = -1; wfail(&w, "close"); }
    w.fd = -1;
    if (rename(w.tmp, path) != 0) wfail(&w, "rename the temporary file");
    char *dcopy = rlc_strdup(path);
    rlc_fsync_dir(dirname(dcopy));
    free(dcopy);
    free(w.tmp);
    free(w.buf);
}
