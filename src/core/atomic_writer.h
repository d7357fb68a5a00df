// atomic_writer.h: streaming atomic file writes for outputs too large to build in one buffer
// (optimizer state, big checkpoints). Same protocol as rlc_write_file_atomic: write to a temp file in
// the same directory, fsync, rename over the target, fsync the directory. Never leaves a partial file
// at the target path.
#pragma once
#include <stddef.h>

typedef struct {
    int fd;
    int failed;          // a write failed (errno saved in err)
    int err;
    char *path;          // target
    char *tmp;           // temp path
} rlc_atomic_writer;

// Opens the temp file; returns 0 or -1 (errno set).
int rlc_atomic_open(rlc_atomic_writer *w, const char *path);
// Appends len bytes; errors are remembered and reported by rlc_atomic_commit.
void rlc_atomic_write(rlc_atomic_writer *w, const void *data, size_t len);
// fsync + rename + fsync dir. Returns 0, or -1 with errno set (the temp file is removed).
int rlc_atomic_commit(rlc_atomic_writer *w);
// Discard the temp file without touching the target.
void rlc_atomic_abort(rlc_atomic_writer *w);
