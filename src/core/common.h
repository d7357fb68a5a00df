// common.h: checks, errors and allocation helpers shared by every module.
// Check macros stay on in release builds: a wrong shape or a bad file must never run on silently.
#pragma once
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define RLC_NORETURN __attribute__((noreturn))
#define RLC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define RLC_NORETURN
#define RLC_PRINTF(a, b)
#endif

// Print "rlc: error: <msg>" as one line to stderr and exit(1). For user-facing errors (bad files,
// bad config, bad arguments): the message names the file/line/key and what was expected.
RLC_NORETURN void rlc_die(const char *fmt, ...) RLC_PRINTF(1, 2);
// Internal invariant failure: prints file:line, the failed expression and a hint, then aborts.
RLC_NORETURN void rlc_fail(const char *file, int line, const char *expr, const char *fmt, ...) RLC_PRINTF(4, 5);
void rlc_warn(const char *fmt, ...) RLC_PRINTF(1, 2);
// "rlc: <kind>: <msg>\n" on stderr as one line, as rlc_die and rlc_warn write it: messages quote the user's
// input (a tensor name, a JSON string, a path), so line breaks and other control characters in msg are
// written as escapes (\n, \r, \xNN).
// A message longer than RLC_MSG_MAX, or with a run of more than RLC_RUN_MAX non-space bytes (a 100 KB shard
// name), is shortened in the middle of that run ("head...[N bytes]...tail"), so the reason at the end survives.
void rlc_vlog_line(const char *kind, const char *fmt, va_list ap);
void rlc_log_line(const char *kind, const char *fmt, ...) RLC_PRINTF(2, 3);
#define RLC_MSG_MAX 2048
#define RLC_RUN_MAX 200
// Shorten msg as above into out (cap bytes, NUL-terminated, at most cap - 1 bytes; cap >= 64). Returns out.
char *rlc_shorten_message(const char *msg, char *out, size_t cap);
// snprintf into a fixed error buffer, shortened in the middle rather than cut at the end.
void rlc_format_short(char *out, size_t cap, const char *fmt, ...) RLC_PRINTF(3, 4);

// CHECK(cond, "hint %d", x): always on. Use for invariants and shape agreement between modules.
#define CHECK(cond, ...) \
    do { if (!(cond)) rlc_fail(__FILE__, __LINE__, #cond, __VA_ARGS__); } while (0)
// CHECK_EQ(a, b, "what"): reports both values (as long long).
#define CHECK_EQ(a, b, what) \
    do { long long _a = (long long)(a), _b = (long long)(b); \
         if (_a != _b) rlc_fail(__FILE__, __LINE__, #a " == " #b, "%s: %lld != %lld", (what), _a, _b); } while (0)

// Checked size arithmetic: *out = a * b (or a + b); returns 0, or -1 on size_t overflow.
static inline int rlc_mul_ok(size_t a, size_t b, size_t *out) { return __builtin_mul_overflow(a, b, out) ? -1 : 0; }
static inline int rlc_add_ok(size_t a, size_t b, size_t *out) { return __builtin_add_overflow(a, b, out) ? -1 : 0; }
// a * b, dying "<what>: size a x b overflows" on overflow.
size_t rlc_mul_size(size_t a, size_t b, const char *what);

// Physical memory plus swap of this machine in bytes (/proc/meminfo MemTotal + SwapTotal; -1 if unknown),
// and the bytes free for an unprivileged writer on the file system holding path (-1 if unknown).
int64_t rlc_mem_total(void);
int64_t rlc_disk_free(const char *path);
// Dies "<what> needs <bytes> (<GiB>) of memory; this machine has <GiB> (RAM + swap)" when bytes exceed it.
void rlc_check_memory(double bytes, const char *what);

// Allocation that dies with the requested size on failure. rlc_alloc returns 64-byte-aligned memory
// (AVX-512 friendly); free it with rlc_free.
void *rlc_malloc(size_t n);
void *rlc_calloc(size_t count, size_t size);
void *rlc_realloc(void *p, size_t n);
char *rlc_strdup(const char *s);
void *rlc_alloc(size_t n);           // aligned, uninitialised
void *rlc_alloc_zero(size_t n);      // aligned, zeroed
void rlc_free(void *p);

// Read a whole file into a NUL-terminated buffer; dies with the path on error. *len may be NULL.
char *rlc_read_file(const char *path, size_t *len);
// Write a file atomically: temp file in the same directory, fsync, rename, fsync dir.
// Returns 0 on success, -1 on failure (errno set); never leaves a partial file at `path`.
int rlc_write_file_atomic(const char *path, const void *data, size_t len);
// fsync a directory so a rename inside it is durable.
int rlc_fsync_dir(const char *dir);
// mkdir -p; dies on failure.
void rlc_mkdirs(const char *path);
// Join two path parts into a new malloc'd string.
char *rlc_path_join(const char *a, const char *b);
int rlc_file_exists(const char *path);

// Monotonic wall clock in seconds.
double rlc_now(void);
// Peak resident set size of this process in bytes (from /proc/self/status VmHWM).
int64_t rlc_peak_rss(void);
int64_t rlc_current_rss(void);
