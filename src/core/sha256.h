// sha256.h: SHA-256 (FIPS 180-4), used to recognise known files (e.g. a chat template) by content.
#pragma once
#include <stddef.h>
#include <stdint.h>

void rlc_sha256(const void *data, size_t n, uint8_t out[32]);
// Lower-case hex digest into hex[65] (NUL-terminated).
void rlc_sha256_hex(const void *data, size_t n, char hex[65]);
