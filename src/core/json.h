// json.h: the strict JSON read every JSON reader of user files goes through (config.json, tokenizer.json and
// its configs, generation_config.json, safetensors headers and index files). cJSON alone is lenient: it
// stops at a NUL byte, ignores text after the value, decodes \u0000 into a C string it then truncates, and
// takes any bytes in strings. Here the text must be exactly one JSON value (RFC 8259): UTF-8, no NUL or raw
// control bytes, no \u0000 escape, only whitespace after the value. Errors name path:line:column.
#pragma once
#include <stddef.h>

#include <cjson/cJSON.h>

// The first byte-level problem of text (len bytes) and its offset, or NULL when there is none.
const char *rlc_json_text_problem(const char *text, size_t len, size_t *off);
// Check text (len bytes; NULs inside count as bytes) for the byte-level rules above, without parsing the
// structure. Returns 0, or -1 with "path:line:col: reason" in err.
int rlc_json_check_text(const char *text, size_t len, const char *path, char *err, size_t errlen);
// Parse exactly one JSON value. Returns the tree (cJSON_Delete it), or NULL with the reason in err.
cJSON *rlc_json_parse_err(const char *text, size_t len, const char *path, char *err, size_t errlen);
// The same, dying with the one-line error.
cJSON *rlc_json_parse(const char *text, size_t len, const char *path);
// Read and parse a whole file; dies naming the file.
cJSON *rlc_json_read_file(const char *path);

// cJSON keeps no number text, so 2.0 and 2 read alike, where Python (json, pyarrow) reads 2.0 as a float and
// prints it so. A number written with a fraction or an exponent is marked RLC_JSON_FLOAT, a bit above cJSON's type
// byte (cJSON's own functions mask the type to its low byte), so what prints input values back (the chat template
// engine) prints them as Python would. The parsers here mark their trees; a tree cJSON parsed directly from text
// is marked by rlc_json_mark_floats (text: the text it was parsed from).
#define RLC_JSON_FLOAT (1 << 12)
void rlc_json_mark_floats(cJSON *root, const char *text, size_t len);
// cJSON_PrintUnformatted with exact numbers that keep their marks: a marked integral number prints as "2.0"
// (Python's repr), any other non-integral one with the fewest digits that read back exactly, so the text
// parsed and marked again gives the same tree. Returns a malloc'd string.
char *rlc_json_print(const cJSON *v);
static inline int rlc_json_is_float(const cJSON *j) { return (j->type & RLC_JSON_FLOAT) != 0; }
