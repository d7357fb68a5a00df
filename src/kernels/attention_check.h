// attention_check.h: the argument check shared by the packed attention kernels and their references
// (internal to src/kernels/).
#pragma once
#include <stdint.h>

#include "core/common.h"

// ---- argument checks --------------------------------------------------------------------------------------
static inline int64_t att_check(const int32_t *cu, int n_seqs, int nh, int nkv, int D) {
    CHECK(cu != NULL && n_seqs >= 0, "attention: cu_seqlens=%p n_seqs=%d", (const void *)cu, n_seqs);
    CHECK(nh > 0 && nkv > 0 && D > 0 && nh % nkv == 0, "attention: nh=%d nkv=%d D=%d (nh must be a multiple of nkv)",
          nh, nkv, D);
    CHECK(cu[0] == 0, "attention: cu_seqlens[0]=%d, expected 0", cu[0]);
    for (int s = 0; s < n_seqs; s++)
        CHECK(cu[s + 1] >= cu[s], "attention: cu_seqlens not non-decreasing at %d: %d then %d", s, cu[s], cu[s + 1]);
    return cu[n_seqs];
}

