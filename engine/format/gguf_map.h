/*
 * gguf_map.h - a model file placed in 2 MiB pages for streaming.
 *
 * Decode reads every weight once per token, front to back: on a file
 * mapping in 4 KiB pages the CPU walks a page table every 4 KiB and its
 * prefetchers stop at each page's end. Measured with bench/membw (AMD
 * EPYC Zen 4, 2 vCPUs): 4 KiB pages streamed ~37 GB/s of CPU time at 2
 * threads, 2 MiB pages ~55 GB/s. The page cache holds a file in pages of
 * whatever size it was first read with (mostly small ones, and without
 * CONFIG_READ_ONLY_THP_FOR_FS the kernel cannot collapse them), so the
 * dependable way to huge pages is a copy in anonymous memory advised for
 * transparent huge pages (MADV_HUGEPAGE; THP "always" or "madvise").
 *
 * Costs: the load reads the file once (a page-cache copy, ~0.1-0.3 s per
 * GB) and the pages are private, not shared with other processes mapping
 * the same file (the page cache copy stays reclaimable). The resident size
 * is the file's either way, as decode touches all of it.
 *
 * EMBER_HUGEPAGES=0 turns it off (the zero-copy file mapping of
 * gguf_open); so does THP "never", a file under 8 MiB, or one that would
 * leave under 512 MiB of MemAvailable (a private copy cannot be paged
 * out to the file as a mapping's pages can). EMBER_HUGEPAGES=always (for
 * tests: small models, machines with THP "never") makes the copy whatever
 * the size and the THP setting, still short of the memory bound.
 *
 * The copy is read-only, as a mapping would be, except while a backend
 * lays its weights out once after loading (gguf_map_protect; the CPU's
 * packed rows, kernels.h KERN_PACKED).
 *
 * Threads: gguf_map_huge is reentrant.
 */
#ifndef EMBER_GGUF_MAP_H
#define EMBER_GGUF_MAP_H

#include <stddef.h>

/* The `size` bytes of the open file `fd`, read-only, in anonymous memory
 * advised for huge pages; munmap(p, size) releases them. NULL when turned
 * off, not worthwhile or failed (nothing to release): the caller maps the
 * file as before, and that path reports any error. */
void *gguf_map_huge(int fd, size_t size);

/* 1 if gguf_map_huge would try (environment and kernel setting). */
int gguf_map_huge_enabled(void);

/* Makes gguf_map_huge()'s copy p of `size` bytes writable (1) or
 * read-only again (0). Returns 0, or -1 with errno (mprotect). */
int gguf_map_protect(const void *p, size_t size, int writable);

#endif
