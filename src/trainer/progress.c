// progress.c: one updating progress line on a terminal, a line every N steps elsewhere (see progress.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "core/common.h"
#include "trainer/progress.h"

void progress_init(progress *p, FILE *f, int tty, int64_t first_step, int64_t total, int64_t log_every) {
    memset(p, 0, sizeof *p);
    p->f = f;
    // An MPI launcher hands each rank a pseudo-terminal even when mpirun's own output goes to a file, so under
    // one (OpenMPI's, or a PMI/PMIx one) a rank cannot tell: plain lines are the choice that is right in both.
    const int launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
    p->tty = tty >= 0 ? tty : !launched && isatty(fileno(f));
    p->first_step = first_step;
    p->step = first_step;
    p->total = total;
    p->log_every = log_every >= 1 ? log_every : 1;
    p->t0 = rlc_now();
    p->last_draw = -1;
    p->width = 80;
    struct winsize ws;
    if (p->tty && ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) p->width = ws.ws_col;
}

// "1:02:03" or "2:03"
static void fmt_duration(char *buf, size_t cap, double s) {
    if (!(s >= 0)) s = 0;
    long long t = (long long)(s + 0.5), h = t / 3600, m = t / 60 % 60, sec = t % 60;
    if (h) snprintf(buf, cap, "%lld:%02lld:%02lld", h, m, sec);
    else snprintf(buf, cap, "%lld:%02lld", m, sec);
}

void progress_format(const progress *p, int64_t step, const char *phase, double now, char *buf, size_t cap) {
    size_t n = 0;
#define PUT(...) do { if (n < cap) n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__); } while (0)
    if (p->total > 0) PUT("step %lld/%lld (%d%%)", (long long)step, (long long)p->total, (int)(100 * step / p->total));
    else PUT("step %lld", (long long)step);
    if (phase) PUT(" %s", phase);
    if (p->fields[0]) PUT(" | %s", p->fields);
    double el = now - p->t0;
    int64_t done = p->step - p->first_step;
    if (p->tokens > 0 && el > 0) PUT(" | %.0f tok/s", (double)p->tokens / el);
    char e[32], r[32];
    if (p->total > 0 && done > 0 && p->step < p->total) {
        fmt_duration(r, sizeof r, el / (double)done * (double)(p->total - p->step));
        PUT(" | ETA %s", r);
    }
    fmt_duration(e, sizeof e, el);
    PUT(" | elapsed %s", e);
    if (p->extra[0]) PUT(" | %s", p->extra);
#undef PUT
    if (n >= cap && cap > 0) buf[cap - 1] = 0;
}

// Terminal: "\r", the line cut to the width (one column spare: a full line would move the cursor), erase the rest.
static void draw(progress *p, const char *phase, int64_t step) {
    char line[1024];
    double now = rlc_now();
    progress_format(p, step, phase, now, line, sizeof line);
    size_t w = p->width > 1 ? (size_t)p->width - 1 : 1;
    if (strlen(line) > w) line[w] = 0;
    fprintf(p->f, "\r%s\033[K", line);
    fflush(p->f);
    p->shown = 1;
    p->last_draw = now;
}

void progress_step(progress *p, int64_t step, int64_t tokens, const char *fields, const char *extra) {
    p->step = step;
    p->tokens += tokens;
    snprintf(p->fields, sizeof p->fields, "%s", fields ? fields : "");
    snprintf(p->extra, sizeof p->extra, "%s", extra ? extra : "");
    int last = p->total > 0 && step >= p->total;
    if (p->tty) {
        // Redraw at most ~10 times a second: a fast run's steps would otherwise flood the terminal.
        if (last || p->last_draw < 0 || rlc_now() - p->last_draw >= 0.1) draw(p, NULL, step);
        return;
    }
    if (step == p->first_step + 1 || last || step % p->log_every == 0) {
        char line[1024];
        progress_format(p, step, NULL, rlc_now(), line, sizeof line);
        fprintf(p->f, "%s\n", line);
        fflush(p->f);
    }
}

void progress_phase(progress *p, int64_t step, const char *phase) {
    if (p->tty) draw(p, phase, step);
}

void progress_clear(progress *p) {
    if (!p->tty || !p->shown) return;
    fputs("\r\033[K", p->f);
    fflush(p->f);
    p->shown = 0;
}

void progress_end(progress *p) {
    if (!p->tty || !p->shown) return;
    draw(p, NULL, p->step);   // the final state, even if the last update was rate-limited
    fputc('\n', p->f);
    fflush(p->f);
    p->shown = 0;
}
