// io_testutil.h: helpers for tests of user-facing errors (header-only).
// io_expect_die runs fn(arg) in a forked child with stderr captured and checks that it exits with
// status 1 and prints exactly one line "rlc: error: ..." containing each of the given substrings.
#pragma once
#include <stdarg.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

// The child only leaves through rlc_die's exit(1) (or _exit(0) below). Ending it from an atexit hook
// registered in the child runs before LeakSanitizer's own hook, whose report (the error path exits
// without freeing, by design) would otherwise land in the captured message.
static void io_child_atexit(void) { _exit(1); }

// Run fn(arg) in a forked child with its stderr captured into msg (cap bytes, NUL-terminated; the rest is
// read and dropped). Returns the exit status, or 128 + the signal that ended it.
static inline int io_run_child(void (*fn)(void *), void *arg, char *msg, size_t cap) {
    int p[2];
    if (pipe(p) != 0) return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        atexit(io_child_atexit);
        close(p[0]);
        dup2(p[1], 2);
        fn(arg);
        _exit(0);
    }
    close(p[1]);
    size_t n = 0;
    ssize_t k;
    while (n + 1 < cap && (k = read(p[0], msg + n, cap - 1 - n)) > 0) n += (size_t)k;
    msg[n] = 0;
    char rest[4096];
    while (read(p[0], rest, sizeof rest) > 0) {}   // drain: a child blocked on a full pipe never exits
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// needles: a NULL-terminated list of substrings the message must contain.
static inline int io_expect_die_list(const char *what, void (*fn)(void *), void *arg, const char *const *needles) {
    char msg[8192];
    int rc = io_run_child(fn, arg, msg, sizeof msg);
    int ok = rc == 1 && strncmp(msg, "rlc: error: ", 12) == 0 && strchr(msg, '\n') == msg + strlen(msg) - 1;
    const char *missing = NULL;
    for (const char *const *s = needles; *s; s++)
        if (!strstr(msg, *s)) { ok = 0; if (!missing) missing = *s; }
    TL_CHECK(ok, "%s: exit %d, message '%s'%s%s", what, rc, msg, missing ? " lacks " : "", missing ? missing : "");
    if (ok) printf("ok %s: %s", what, msg);
    return ok;
}

// The same with the substrings as arguments, ending in (const char *)NULL.
static inline int io_expect_die(const char *what, void (*fn)(void *), void *arg, ...) {
    const char *needles[17];
    int n = 0;
    va_list ap;
    va_start(ap, arg);
    for (const char *s; (s = va_arg(ap, const char *)) && n < 16;) needles[n++] = s;
    va_end(ap);
    needles[n] = NULL;
    return io_expect_die_list(what, fn, arg, needles);
}
