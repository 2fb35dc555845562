/* gguf_map.c - a model file placed in 2 MiB pages (gguf_map.h). */
#include "gguf_map.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pages.h"

#define GGUF_MAP_HUGE PAGES_HUGE
#define GGUF_MAP_PAGE ((size_t)4096)
/* Below this a file spans a few huge pages at most: not worth a copy. */
#define GGUF_MAP_MIN ((size_t)8 << 20)
/* Memory left to everything else after the copy. */
#define GGUF_MAP_SPARE ((size_t)512 << 20)

/* Bytes the kernel could give without swapping (MemAvailable, which counts
 * the reclaimable page cache the file itself may sit in); 0 if unknown. */
static size_t gguf_map__available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	unsigned long long kb = 0;

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb > SIZE_MAX / 1024 ? SIZE_MAX : (size_t)kb * 1024;
}

int gguf_map_huge_enabled(void)
{
	return pages_huge_enabled();
}

int gguf_map_protect(const void *p, size_t size, int writable)
{
	const size_t len = (size + GGUF_MAP_PAGE - 1) & ~(GGUF_MAP_PAGE - 1);

	return mprotect((void *)p, len, PROT_READ | (writable ? PROT_WRITE : 0));
}

void *gguf_map_huge(int fd, size_t size)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
	const enum pages_mode mode = pages_mode();
	const int always = mode == PAGES_MODE_ALWAYS; /* tests: gguf_map.h */
	size_t len, got = 0;
	char *beg;

	if (size > SIZE_MAX - 2 * GGUF_MAP_HUGE)
		return NULL;
	if (!always && (size < GGUF_MAP_MIN || !pages_huge_enabled()))
		return NULL;
	/* A private copy cannot be dropped and paged back in as a file
	 * mapping can: on a machine short of memory, map the file. */
	if (size + GGUF_MAP_SPARE > gguf_map__available())
		return NULL;
	len = (size + GGUF_MAP_PAGE - 1) & ~(GGUF_MAP_PAGE - 1);
	if ((beg = pages_map_aligned(len)) == NULL)
		return NULL;
	/* before the first touch, so each fault takes a whole huge page */
	if (pages_advise_huge(beg, len) != 0 && !always)
		goto fail;
	while (got < size) {
		size_t want = size - got > ((size_t)1 << 30) ? (size_t)1 << 30 : size - got;
		ssize_t n = pread(fd, beg + got, want, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) /* an error or a file that shrank: map it instead */
			goto fail;
		got += (size_t)n;
	}
	/* weights are read-only, as in a file mapping: a stray write faults */
	if (mprotect(beg, len, PROT_READ) != 0)
		goto fail;
	return beg;
fail:
	pages_unmap(beg, len);
	return NULL;
#else
	(void)fd;
	(void)size;
	return NULL;
#endif
}
