// config_internal.h: the trainer configuration's key table (one typed entry per verl key) and its lookups, shared
// by src/trainer/config*.c only. config_keys.c holds the table, config_parse.c sets values from YAML and overrides,
// config_validate.c checks a loaded config as a whole, config_write.c prints it, config.c derives typed views.
#pragma once
#include <stddef.h>

#include "core/common.h"
#include "trainer/config.h"

// CT_STRORLIST: like CT_STRLIST, but whether a string or a list was given is kept (PEFT reads them differently)
typedef enum { CT_BOOL, CT_INT, CT_FLOAT, CT_STR, CT_STRLIST, CT_FLOAT2, CT_STRORLIST } ctype;

typedef struct {
    const char *key;      // dotted verl name
    ctype type;
    size_t off;           // offset in rlc_train_config
    const char *def;      // default as YAML text
    double lo, hi;        // inclusive range for numbers (lo > hi: unchecked)
    int nullable;
    const char *choices;  // "a|b|c" for enumerated strings (NULL: any)
    const char *doc;
} cfg_entry;

#define AR "actor_rollout_ref."

extern const cfg_entry cfg_keys[];   // (cfg_n_keys) in the order the YAML output nests them
extern const int cfg_n_keys;

const cfg_entry *cfg_find_key(const char *key);   // NULL: no such key
int cfg_is_section(const char *prefix);            // some key starts with "prefix."
// Dies naming `where`, the unknown key and the nearest valid key, if one is close.
RLC_NORETURN void cfg_die_unknown(const char *where, const char *key);
