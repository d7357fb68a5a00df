// hugepage.c: see hugepage.h.
#include "core/hugepage.h"

#include <stdlib.h>
#include <sys/mman.h>

#include "core/common.h"

void *rlc_alloc_huge(size_t n) {
    const size_t huge = (size_t)2 << 20;
    if (n < 2 * huge) return rlc_alloc(n);
    size_t r = (n + huge - 1) & ~(huge - 1);
    void *p = NULL;
    if (posix_memalign(&p, huge, r) != 0) rlc_die("out of memory allocating %zu bytes", n);
#ifdef MADV_HUGEPAGE
    madvise(p, r, MADV_HUGEPAGE);   // advisory: ignored where THP is off
#endif
    return p;
}
