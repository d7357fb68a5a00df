// fuzz_common.h: the libFuzzer harness shared by every fuzz/fuzz_<reader>.c target.
//
// rlc's readers report bad input with rlc_die, which prints one line and calls exit(1). A fuzz target must
// survive that: the fuzz binaries link with -Wl,--wrap=exit, and while a target's body runs, exit() jumps
// back into the harness (fuzz_run), which counts it as a clean rejection. Any other ending (a sanitizer
// report, abort() from CHECK, a signal, a timeout) is a finding. Messages go to /dev/null during the body;
// sanitizer reports write to fd 2 directly and still show. A rejected input may leak what the reader had
// allocated (rlc_die never frees): run with -detect_leaks=0 (make fuzz-run does).
#pragma once
#include <stddef.h>
#include <stdint.h>

// Run body(data, n) with exit() caught. Returns 0 when it returned, 1 when it rejected the input.
int fuzz_run(void (*body)(const uint8_t *data, size_t n), const uint8_t *data, size_t n);
// Write data to a per-process scratch file named `name` (inside a scratch directory made once); returns its
// path (owned by the harness, valid until the next call with the same name).
const char *fuzz_file(const char *name, const uint8_t *data, size_t n);
// The scratch directory (created on first use).
const char *fuzz_dir(void);
// A NUL-terminated copy of data (free it).
char *fuzz_cstr(const uint8_t *data, size_t n);

// One target: LLVMFuzzerTestOneInput runs body under fuzz_run.
#define FUZZ_TARGET(body)                                                   \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {             \
        fuzz_run(body, data, n);                                            \
        return 0;                                                           \
    }
