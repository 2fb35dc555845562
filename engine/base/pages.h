/*
 * pages.h - anonymous memory on 2 MiB boundaries, advised for transparent
 * huge pages (THP): what gguf_map.h's weight copy and kv_cache.h's arrays
 * share.
 *
 * A huge page needs a 2 MiB-aligned virtual range, and MADV_HUGEPAGE
 * must come before the first touch so that each fault takes a whole huge
 * page. With THP "madvise" (this project's machines) nothing else gives
 * one; with "never" the advice is refused (the memory stays in 4 KiB
 * pages, still usable); elsewhere than Linux there is no advice at all.
 *
 * EMBER_HUGEPAGES: "1" (the default: THP's setting decides), "0" (off:
 * no advice; the weights stay the file's mapping) or "always" (tests:
 * advise whatever the size and the setting).
 *
 * Threads: all reentrant (the environment is read at each call).
 */
#ifndef EMBER_PAGES_H
#define EMBER_PAGES_H

#include <stddef.h>

#define PAGES_HUGE ((size_t)2 << 20)

enum pages_mode { PAGES_MODE_DEFAULT, PAGES_MODE_OFF, PAGES_MODE_ALWAYS };

/* EMBER_HUGEPAGES (a malformed value refused on stderr: the default). */
enum pages_mode pages_mode(void);

/* 1 if huge pages are worth asking for: EMBER_HUGEPAGES not "0" and THP
 * "always" or "madvise" (Linux only). */
int pages_huge_enabled(void);

/* `len` bytes (rounded up to 4 KiB) of zeroed anonymous read-write memory
 * starting on a 2 MiB boundary, or NULL (mmap failed). Nothing is
 * committed until touched. pages_unmap(p, len) releases it. */
void *pages_map_aligned(size_t len);

/* Releases pages_map_aligned()'s p of `len` bytes. NULL-safe. */
void pages_unmap(void *p, size_t len);

/* MADV_HUGEPAGE on [p, p + len) (p on a page boundary). Returns 0, or -1
 * when refused or not available (the memory is unchanged: 4 KiB pages). */
int pages_advise_huge(void *p, size_t len);

#endif
