// progress.h: training progress that respects where the output goes. On a terminal: one line, rewritten in place
// ("\r" + text + erase to the end of the line), at most ~10 times a second, cut to the terminal's width so it
// never wraps, with step, the caller's fields (loss ...), tokens/s and the ETA. Elsewhere (a log file, a pipe): a
// plain line every log_every steps, and for the first and the last step, never a control character.
#pragma once
#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE *f;
    int tty;              // f is a terminal
    int64_t first_step;   // the step counting starts after (a resumed run's start), for the rates and the ETA
    int64_t total;        // the last step (0: unknown, no ETA)
    int64_t log_every;    // not a terminal: a line every log_every steps
    double t0;            // when counting started
    double last_draw;     // terminal: when the line was last drawn
    int shown;            // terminal: a progress line is on screen (to erase before other output)
    int width;            // terminal columns
    int64_t step;         // the last step reported done
    int64_t tokens;       // tokens processed since first_step
    char fields[256];     // the caller's main fields of the last step (shown before the rates)
    char extra[256];      // and the rest (shown after them, the first to be cut on a narrow terminal)
} progress;

// tty < 0: detect (isatty(fileno(f)), and never under an MPI launcher); 0 or 1 forces it. log_every >= 1.
void progress_init(progress *p, FILE *f, int tty, int64_t first_step, int64_t total, int64_t log_every);
// Step `step` is done, `tokens` more tokens processed; fields: the caller's main text ("loss 1.234"), extra: the
// rest ("grad_norm 0.5 | lr 3e-4"); either may be NULL.
void progress_step(progress *p, int64_t step, int64_t tokens, const char *fields, const char *extra);
// Terminal only: the phase of step `step` now running ("gen", "update_actor 2/4", ...), drawn after the last
// step's fields. Off a terminal nothing is written.
void progress_phase(progress *p, int64_t step, const char *phase);
// Terminal only: erase the progress line, so that a normal line can be printed (it comes back with the next
// update).
void progress_clear(progress *p);
// End: a terminal's progress line stays on screen, followed by a newline.
void progress_end(progress *p);

// The text of one progress line (no newline) into buf: "step S/T (P%) | fields | N tok/s | ETA R | elapsed E | extra";
// phase (may be NULL) is shown after the step. Exposed for tests.
void progress_format(const progress *p, int64_t step, const char *phase, double now, char *buf, size_t cap);
