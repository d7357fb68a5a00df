// hugepage.c: see hugepage.h.
#include "core/hugepage.h"

#include "core/common.h"

// rlc_alloc itself now backs large allocations with huge pages; this name stays for its callers.
void *rlc_alloc_huge(size_t n) { return rlc_alloc(n); }
