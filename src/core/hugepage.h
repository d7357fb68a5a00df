// hugepage.h: large aligned allocations backed by transparent huge pages where the kernel allows
// (THP "madvise" mode, as on this machine). On this VM a first touch of 4 KiB pages costs ~20 s/GiB
// under load, against ~8 s/GiB with 2 MiB pages; later passes are ~4x faster too (TLB).
#pragma once
#include <stddef.h>

// Like rlc_alloc (uninitialised; free with rlc_free), 2 MiB aligned with MADV_HUGEPAGE for n >= 4 MiB.
void *rlc_alloc_huge(size_t n);
