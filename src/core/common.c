// common.c: error reporting, allocation, file helpers.
#include "core/common.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

// Start of the UTF-8 character holding byte i (cuts never split a character).
static size_t char_start(const char *s, size_t i) {
    while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80) i--;
    return i;
}

char *rlc_shorten_message(const char *msg, char *out, size_t cap) {
    const size_t keep = RLC_RUN_MAX / 2 - 20;   // bytes kept at each end of a long run
    const size_t n = strlen(msg);
    char *r = malloc(n + 1);   // the message with long runs shortened (never longer than msg)
    if (!r) { snprintf(out, cap, "%s", msg); return out; }
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && msg[j] != ' ') j++;
        if (j == i) { r[o++] = msg[i++]; continue; }
        const size_t run = j - i;
        const size_t h = run > RLC_RUN_MAX ? char_start(msg, i + keep) - i : run;
        const size_t t = run > RLC_RUN_MAX ? j - char_start(msg, j - keep) : 0;
        memcpy(r + o, msg + i, h);
        o += h;
        if (run > RLC_RUN_MAX) {   // head...[N bytes]...tail
            o += (size_t)sprintf(r + o, "...[%zu bytes]...", run - h - t);
            memcpy(r + o, msg + j - t, t);
            o += t;
        }
        i = j;
    }
    r[o] = 0;
    if (o < cap) memcpy(out, r, o + 1);
    else {   // still too long (many words): the first third and the end, where the reason is
        const size_t head = char_start(r, cap / 3), tail_from = char_start(r, o - (cap - head - 8) + 1);
        snprintf(out, cap, "%.*s ... %s", (int)head, r, r + tail_from);
    }
    free(r);
    return out;
}

void rlc_format_short(char *out, size_t cap, const char *fmt, ...) {
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    const int n = vsnprintf(out, cap, fmt, aq);
    va_end(aq);
    char *full;
    if (n >= 0 && (size_t)n >= cap && (full = malloc((size_t)n + 1)) != NULL) {
        vsnprintf(full, (size_t)n + 1, fmt, ap);
        rlc_shorten_message(full, out, cap);
        free(full);
    }
    va_end(ap);
}

void rlc_vlog_line(const char *kind, const char *fmt, va_list ap) {
    char small[RLC_MSG_MAX];
    va_list aq;
    va_copy(aq, ap);
    const int n = vsnprintf(small, sizeof small, fmt, aq);
    va_end(aq);
    char *msg = small, *full = NULL;
    if (n >= (int)sizeof small && (full = malloc((size_t)n + 1)) != NULL) vsnprintf(full, (size_t)n + 1, fmt, ap);
    char shortened[RLC_MSG_MAX];
    int long_run = 0;
    for (const char *c = full ? full : small, *w = c; *c; c++) {
        if (*c == ' ') w = c + 1;
        else if (c - w >= RLC_RUN_MAX) { long_run = 1; break; }
    }
    if (full || long_run) msg = rlc_shorten_message(full ? full : small, shortened, sizeof shortened);
    fputs("rlc: ", stderr);
    fputs(kind, stderr);
    fputs(": ", stderr);
    for (const unsigned char *c = (const unsigned char *)msg; *c; c++) {
        if (*c == '\n') fputs("\\n", stderr);
        else if (*c == '\r') fputs("\\r", stderr);
        else if ((*c < 0x20 && *c != '\t') || *c == 0x7f) fprintf(stderr, "\\x%02x", *c);
        else fputc(*c, stderr);
    }
    fputc('\n', stderr);
    free(full);
}

void rlc_log_line(const char *kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rlc_vlog_line(kind, fmt, ap);
    va_end(ap);
}

void rlc_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    rlc_vlog_line("error", fmt, ap);
    va_end(ap);
    exit(1);
}

void rlc_fail(const char *file, int line, const char *expr, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fprintf(stderr, "rlc: internal check failed at %s:%d: %s: ", file, line, expr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

void rlc_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rlc_vlog_line("warning", fmt, ap);
    va_end(ap);
}

size_t rlc_mul_size(size_t a, size_t b, const char *what) {
    size_t r;
    if (rlc_mul_ok(a, b, &r) != 0) rlc_die("%s: size %zu x %zu overflows", what, a, b);
    return r;
}

static int64_t meminfo_kb(const char *key) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    int64_t v = -1;
    const size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0) { v = strtoll(line + kl, NULL, 10); break; }
    fclose(f);
    return v;
}

int64_t rlc_mem_total(void) {
    const int64_t m = meminfo_kb("MemTotal:"), s = meminfo_kb("SwapTotal:");
    if (m < 0) return -1;
    return (m + (s > 0 ? s : 0)) * 1024;
}

int64_t rlc_disk_free(const char *path) {
    struct statvfs v;
    if (statvfs(path, &v) != 0) return -1;
    return (int64_t)v.f_bavail * (int64_t)v.f_frsize;
}

void rlc_check_memory(double bytes, const char *what) {
    const int64_t have = rlc_mem_total();
    if (have > 0 && bytes > (double)have)
        rlc_die("%s needs %.0f bytes (%.1f GiB) of memory; this machine has %.1f GiB (RAM + swap)", what, bytes,
                bytes / 1073741824.0, (double)have / 1073741824.0);
}

// The allocator's failure, with the figures: the callers check input-derived sizes before allocating, so
// this is a machine too small for a valid input (or a bug), never a reason to crash.
static RLC_NORETURN void die_oom(size_t n, const char *what) {
    const int64_t have = rlc_mem_total();
    rlc_die("out of memory %s %zu bytes (%.2f GiB; this machine has %.1f GiB RAM + swap, %.2f GiB in use by rlc)", what, n,
            (double)n / 1073741824.0, have > 0 ? (double)have / 1073741824.0 : -1.0,
            (double)rlc_current_rss() / 1073741824.0);
}

void *rlc_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die_oom(n, "allocating");
    return p;
}
void *rlc_calloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) die_oom(size && count > SIZE_MAX / size ? SIZE_MAX : count * size, "allocating");
    return p;
}
void *rlc_realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) die_oom(n, "reallocating");
    return q;
}
char *rlc_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = rlc_malloc(n);
    memcpy(d, s, n);
    return d;
}
void *rlc_alloc(size_t n) {
    // Large buffers (weights, gradients, moments, activations) get 2 MiB alignment and transparent huge
    // pages: first touch and TLB misses of 4 KiB pages cost several seconds per GiB on this kind of VM.
    const size_t huge = (size_t)2 << 20;
    void *p = NULL;
    if (n >= 2 * huge) {
        size_t r = (n + huge - 1) & ~(huge - 1);
        if (posix_memalign(&p, huge, r) != 0) die_oom(n, "allocating");
#ifdef MADV_HUGEPAGE
        madvise(p, r, MADV_HUGEPAGE);   // advisory: ignored where THP is off
#endif
        return p;
    }
    size_t r = (n + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, r ? r : 64) != 0) die_oom(n, "allocating");
    return p;
}
void *rlc_alloc_zero(size_t n) {
    void *p = rlc_alloc(n);
    memset(p, 0, n);
    return p;
}
void rlc_free(void *p) { free(p); }

char *rlc_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) rlc_die("%s: cannot open: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) rlc_die("%s: cannot seek: %s", path, strerror(errno));
    long n = ftell(f);
    if (n < 0) rlc_die("%s: cannot read size: %s", path, strerror(errno));
    rewind(f);
    char *buf = rlc_malloc((size_t)n + 1);
    if (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) rlc_die("%s: short read", path);
    buf[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}

int rlc_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int rlc_write_file_atomic(const char *path, const void *data, size_t len) {
    size_t n = strlen(path);
    char *tmp = rlc_malloc(n + 32);
    snprintf(tmp, n + 32, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { free(tmp); return -1; }
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno; close(fd); unlink(tmp); free(tmp); errno = e; return -1;
        }
        p += w; left -= (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) { int e = errno; unlink(tmp); free(tmp); errno = e; return -1; }
    if (rename(tmp, path) != 0) { int e = errno; unlink(tmp); free(tmp); errno = e; return -1; }
    free(tmp);
    char *d = rlc_strdup(path);
    rlc_fsync_dir(dirname(d));
    free(d);
    return 0;
}

void rlc_mkdirs(const char *path) {
    char *p = rlc_strdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) rlc_die("%s: cannot create directory: %s", p, strerror(errno));
            *s = '/';
        }
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST) rlc_die("%s: cannot create directory: %s", p, strerror(errno));
    free(p);
}

char *rlc_path_join(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *r = rlc_malloc(na + nb + 2);
    memcpy(r, a, na);
    size_t k = na;
    if (na && a[na - 1] != '/') r[k++] = '/';
    memcpy(r + k, b, nb + 1);
    return r;
}

int rlc_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

double rlc_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int64_t status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int64_t v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) == 0) { v = strtoll(line + kl, NULL, 10); break; }
    }
    fclose(f);
    return v < 0 ? -1 : v * 1024;
}
int64_t rlc_peak_rss(void) { return status_kb("VmHWM:"); }
int64_t rlc_current_rss(void) { return status_kb("VmRSS:"); }
