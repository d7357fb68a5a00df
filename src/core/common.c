// common.c: error reporting, allocation, file helpers.
#include "core/common.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void rlc_vlog_line(const char *kind, const char *fmt, va_list ap) {
    char small[1024];
    va_list aq;
    va_copy(aq, ap);
    const int n = vsnprintf(small, sizeof small, fmt, aq);
    va_end(aq);
    char *msg = small;
    if (n >= (int)sizeof small && (msg = malloc((size_t)n + 1)) != NULL) vsnprintf(msg, (size_t)n + 1, fmt, ap);
    if (!msg) msg = small;   // out of memory: the truncated message
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
    if (msg != small) free(msg);
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

void *rlc_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) rlc_die("out of memory allocating %zu bytes", n);
    return p;
}
void *rlc_calloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) rlc_die("out of memory allocating %zu x %zu bytes", count, size);
    return p;
}
void *rlc_realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) rlc_die("out of memory reallocating %zu bytes", n);
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
        if (posix_memalign(&p, huge, r) != 0) rlc_die("out of memory allocating %zu bytes", n);
#ifdef MADV_HUGEPAGE
        madvise(p, r, MADV_HUGEPAGE);   // advisory: ignored where THP is off
#endif
        return p;
    }
    size_t r = (n + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, r ? r : 64) != 0) rlc_die("out of memory allocating %zu bytes", n);
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
