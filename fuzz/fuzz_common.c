// fuzz_common.c: the harness (see fuzz_common.h).
#include "fuzz_common.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"

static jmp_buf JB;
static int IN_BODY;
static FILE *DEVNULL;

void __real_exit(int status) __attribute__((noreturn));
void __wrap_exit(int status) __attribute__((noreturn));
void __wrap_exit(int status) {
    if (IN_BODY) { IN_BODY = 0; longjmp(JB, 1); }
    __real_exit(status);
}

// lowest free descriptor: the reader's files are opened from here up
static int lowest_free_fd(void) {
    const int fd = dup(0);
    if (fd >= 0) close(fd);
    return fd;
}

int fuzz_run(void (*body)(const uint8_t *, size_t), const uint8_t *data, size_t n) {
    if (!DEVNULL) DEVNULL = fopen("/dev/null", "w");
    FILE *saved = stderr;
    const int base = lowest_free_fd();
    uint64_t was_open = 0;   // descriptors above base already in use (the sanitizer's symbolizer pipe): kept
    for (int k = 0; k < 64 && base >= 0; k++) was_open |= (uint64_t)(fcntl(base + k, F_GETFD) != -1) << k;
    int rejected = 0;
    stderr = DEVNULL;
    if (setjmp(JB) == 0) {
        IN_BODY = 1;
        body(data, n);
        IN_BODY = 0;
    } else {
        rejected = 1;
        for (int k = 0; k < 64 && base >= 0; k++)   // files the reader left open
            if (!(was_open >> k & 1)) close(base + k);
    }
    stderr = saved;
    return rejected;
}

const char *fuzz_dir(void) {
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/rlc-fuzz-%d", (int)getpid());
        rlc_mkdirs(dir);
    }
    return dir;
}

const char *fuzz_file(const char *name, const uint8_t *data, size_t n) {
    static char path[8][256];
    static char names[8][64];
    int k = 0;
    while (k < 8 && names[k][0] && strcmp(names[k], name)) k++;
    if (k == 8) k = 0;
    snprintf(names[k], sizeof names[k], "%s", name);
    snprintf(path[k], sizeof path[k], "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(path[k], "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s\n", path[k]);
        abort();
    }
    return path[k];
}

char *fuzz_cstr(const uint8_t *data, size_t n) {
    char *s = malloc(n + 1);
    memcpy(s, data, n);
    s[n] = 0;
    return s;
}
