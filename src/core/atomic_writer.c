// atomic_writer.c: streaming temp-file + fsync + rename writer.
#include "core/atomic_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <unistd.h>

#include "core/common.h"

int rlc_atomic_open(rlc_atomic_writer *w, const char *path) {
    memset(w, 0, sizeof *w);
    size_t n = strlen(path);
    w->path = rlc_strdup(path);
    w->tmp = rlc_malloc(n + 32);
    snprintf(w->tmp, n + 32, "%s.tmp.%d", path, (int)getpid());
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (w->fd < 0) {
        int e = errno;
        free(w->path); free(w->tmp); w->path = w->tmp = NULL;
        errno = e;
        return -1;
    }
    return 0;
}

void rlc_atomic_write(rlc_atomic_writer *w, const void *data, size_t len) {
    const char *p = data;
    while (len > 0 && !w->failed) {
        ssize_t k = write(w->fd, p, len);
        if (k < 0) {
            if (errno == EINTR) continue;
            w->failed = 1; w->err = errno;
            return;
        }
        p += k; len -= (size_t)k;
    }
}

static void cleanup(rlc_atomic_writer *w) {
    free(w->path); free(w->tmp);
    w->path = w->tmp = NULL;
    w->fd = -1;
}

void rlc_atomic_abort(rlc_atomic_writer *w) {
    if (!w->tmp) return;
    if (w->fd >= 0) close(w->fd);
    unlink(w->tmp);
    cleanup(w);
}

int rlc_atomic_commit(rlc_atomic_writer *w) {
    int e = 0;
    if (w->failed) e = w->err;
    else if (fsync(w->fd) != 0) e = errno;
    if (close(w->fd) != 0 && !e) e = errno;
    w->fd = -1;
    if (!e && rename(w->tmp, w->path) != 0) e = errno;
    if (e) {
        unlink(w->tmp);
        cleanup(w);
        errno = e;
        return -1;
    }
    char *d = rlc_strdup(w->path);
    rlc_fsync_dir(dirname(d));
    free(d);
    cleanup(w);
    return 0;
}
