// jsonl.h: JSON Lines input, the one reader behind every JSONL file rlc takes (datasets, SFT data, prompts,
// sequences to score). It streams the file line by line, numbers lines from 1, skips blank lines (spaces,
// tabs, CR; or refuses them, see blank_is_error), and dies with one line "path:N: ..." when a line is not exactly one JSON object (broken JSON,
// another JSON type, trailing text or a NUL byte after the object).
#pragma once
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "core/strbuf.h"

typedef struct {
    const char *path;   // as given to rlc_jsonl_open, for messages
    FILE *f;
    char *buf;          // (cap) the current line
    size_t cap;
    int64_t line;       // 1-based number of the line last returned
    cJSON *obj;         // the object last returned; freed by the next rlc_jsonl_next and by rlc_jsonl_close
    int blank_is_error; // 0 (default): blank lines are skipped; 1: one is an error (outputs match input lines)
} rlc_jsonl;

// Dies "path: cannot open <what>: <reason>" when the file cannot be read.
void rlc_jsonl_open(rlc_jsonl *r, const char *path, const char *what);
// The next non-blank line's object (owned by r), or NULL at the end of the file. `expected` describes the
// line's shape for the error message, e.g. "{\"input_ids\": [...]}".
const cJSON *rlc_jsonl_next(rlc_jsonl *r, const char *expected);
void rlc_jsonl_close(rlc_jsonl *r);

// Append the token ids of the array `arr`, the value of `key` on the current line, to out. Dies naming
// path:line and the element unless `arr` is an array of integers in [0, vocab) (vocab <= 0: [0, 2^31)).
void rlc_jsonl_token_ids(const rlc_jsonl *r, const cJSON *arr, const char *key, int64_t vocab, rlc_ivec *out);
