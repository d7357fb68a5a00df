// safetensors.h: read (mmap, fully validated) and write (streamed, atomic) .safetensors files, and
// open a Hugging Face weight directory (single model.safetensors or sharded with
// model.safetensors.index.json). Format: shared/spec/qwen3.md §3.
//
// Every malformed input is a one-line error naming the file and, where there is one, the tensor.
// The *_err variants return -1 and put that line in `err` instead of exiting.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef enum {
    ST_BOOL, ST_U8, ST_I8, ST_F8_E5M2, ST_F8_E4M3, ST_I16, ST_U16, ST_F16, ST_BF16,
    ST_I32, ST_U32, ST_F32, ST_F64, ST_I64, ST_U64, ST_N_DTYPES
} st_dtype;

const char *st_dtype_name(st_dtype dt);     // "BF16", ...
int st_dtype_size(st_dtype dt);             // bytes per element
int st_dtype_parse(const char *s);          // st_dtype, or -1 if unknown

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER 100000000ull          // the safetensors limit on the header length N

typedef struct {
    char *name;
    st_dtype dtype;
    int ndim;                       // 0 = scalar
    int64_t shape[ST_MAX_DIMS];     // (ndim)
    int64_t numel;                  // prod(shape); 1 for a scalar
    uint64_t begin, end;            // byte range in the data buffer (end exclusive)
    const void *data;               // (numel * dtype size) bytes inside the mapping; may be unaligned
} st_tensor;

typedef struct {
    char *path;
    void *map;                      // whole file, PROT_READ
    size_t map_len;
    uint64_t header_len;            // N
    const unsigned char *data;      // data buffer = map + 8 + N
    uint64_t data_len;
    int n_tensors;
    st_tensor *tensors;             // (n_tensors) in header order
    int *by_name;                   // (n_tensors) indices sorted by name
    int n_meta;
    char **meta_key, **meta_val;    // (n_meta) __metadata__ entries
} st_file;

int st_file_open_err(st_file *f, const char *path, char *err, size_t errlen);
void st_file_open(st_file *f, const char *path);          // dies on any error
void st_file_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);   // NULL if absent
const char *st_meta(const st_file *f, const char *key);         // NULL if absent

// Scalar conversions (round-to-nearest-even; NaN -> 0x7FC0 for BF16 and sign|0x7E00 for F16, as torch).
float st_bf16_to_f32(uint16_t h);
float st_f16_to_f32(uint16_t h);
uint16_t st_f32_to_bf16(float f);
uint16_t st_f32_to_f16(float f);
// Convert n elements of F32/BF16/F16/F64 data (any alignment) to fp32. Returns -1 for other dtypes.
int st_convert_to_f32(st_dtype dt, const void *src, float *dst, int64_t n);
// dst (numel) = tensor as fp32; dies naming `path` and the tensor for a non-float dtype.
void st_tensor_to_f32(const st_tensor *t, float *dst, const char *path);
// Tell the kernel the tensor's mapped pages are no longer needed (they leave RSS; a later read
// faults them back in from the file). Loaders call it after converting each tensor.
void st_tensor_drop_pages(const st_tensor *t);

// A weight directory: DIR/model.safetensors if present (as transformers prefers), else the shards of
// DIR/model.safetensors.index.json. Every weight_map entry must exist in its shard, every tensor of a
// shard must be mapped to that shard, and no name may appear twice.
typedef struct {
    const st_tensor *t;
    int file;                       // index into files
} st_dir_entry;
typedef struct {
    char *dir;
    int n_files;
    st_file *files;                 // (n_files)
    int n_tensors;
    st_dir_entry *entries;          // (n_tensors) sorted by name
} st_dir;

int st_dir_open_err(st_dir *d, const char *dir, char *err, size_t errlen);
void st_dir_open(st_dir *d, const char *dir);
void st_dir_close(st_dir *d);
// Tensor by name (NULL if absent); *path (may be NULL) gets the file holding it.
const st_tensor *st_dir_find(const st_dir *d, const char *name, const char **path);

// Writing. Each tensor is fp32 data converted to `dtype` (F32, BF16 or F16) on the way out, or fp32
// produced on demand by a generator (same conversion; nothing is held in memory), or raw bytes
// already in `dtype`. The header lists tensors in the given order, with contiguous offsets,
// __metadata__ first, and is padded with spaces to a multiple of 8 bytes.
typedef struct st_write_tensor st_write_tensor;
// dst (n) = elements [start, start + n) of the tensor; start is a multiple of ST_FILL_CHUNK.
typedef void (*st_fill_fn)(void *ctx, const st_write_tensor *t, int64_t start, int64_t n, float *dst);
#define ST_FILL_CHUNK ((int64_t)1 << 20)
struct st_write_tensor {
    const char *name;
    st_dtype dtype;                 // stored dtype
    int ndim;
    int64_t shape[ST_MAX_DIMS];     // (ndim)
    const float *f32;               // (numel) fp32 source, or NULL
    st_fill_fn fill;                // generator, used when f32 == NULL and fill != NULL
    void *ctx;                      // passed to fill
    const void *raw;                // (numel * size) bytes in dtype, used when f32 == fill == NULL
};

// Writes atomically (temp file in the same directory, fsync, rename, fsync dir); dies naming the path
// on an I/O error. meta = n_meta key/value pairs {k0, v0, k1, v1, ...}.
void st_write(const char *path, const st_write_tensor *tensors, int n, const char *const *meta, int n_meta);
