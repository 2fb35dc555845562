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

#include "env.h"

#define GGUF_MAP_HUGE ((size_t)2 << 20)
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

/* EMBER_HUGEPAGES as an index of its words: 0 "1" (the default: THP's
 * setting decides), 1 "0" (off), 2 "always" (tests: gguf_map.h); any other
 * value is refused on stderr, naming it, and the default stands. */
static size_t gguf_map__mode(void)
{
	static const char *const words[] = {"1", "0", "always"};
	size_t mode = 0;

	env_choice("EMBER_HUGEPAGES", words, 3, &mode);
	return mode;
}

/* Whether the kernel's transparent huge pages are "always" or "madvise". */
static int gguf_map__thp_on(void)
{
	char buf[128] = "";
	FILE *f;

#if defined(__linux__) && defined(MADV_HUGEPAGE)
	/* "always [madvise] never": the bracketed word is the setting */
	f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	if (f == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) == NULL)
		buf[0] = '\0';
	fclose(f);
	return strstr(buf, "[always]") != NULL || strstr(buf, "[madvise]") != NULL;
#else
	(void)buf;
	(void)f;
	return 0;
#endif
}

int gguf_map_huge_enabled(void)
{
	return gguf_map__mode() != 1 && gguf_map__thp_on();
}

int gguf_map_protect(const void *p, size_t size, int writable)
{
	const size_t len = (size + GGUF_MAP_PAGE - 1) & ~(GGUF_MAP_PAGE - 1);

	return mprotect((void *)p, len, PROT_READ | (writable ? PROT_WRITE : 0));
}

void *gguf_map_huge(int fd, size_t size)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
	const size_t mode = gguf_map__mode();
	const int always = mode == 2; /* tests: gguf_map.h */
	size_t len, span, got = 0;
	uintptr_t raw, beg;
	void *m;

	if (size > SIZE_MAX - 2 * GGUF_MAP_HUGE)
		return NULL;
	if (!always && (size < GGUF_MAP_MIN || mode == 1 || !gguf_map__thp_on()))
		return NULL;
	/* A private copy cannot be dropped and paged back in as a file
	 * mapping can: on a machine short of memory, map the file. */
	if (size + GGUF_MAP_SPARE > gguf_map__available())
		return NULL;
	len = (size + GGUF_MAP_PAGE - 1) & ~(GGUF_MAP_PAGE - 1);
	/* over-allocate by one huge page and trim, so the copy starts on a
	 * 2 MiB boundary (a huge page needs an aligned virtual range) and
	 * munmap(p, size) releases exactly what is left */
	span = len + GGUF_MAP_HUGE;
	m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	raw = (uintptr_t)m;
	beg = (raw + GGUF_MAP_HUGE - 1) & ~(uintptr_t)(GGUF_MAP_HUGE - 1);
	if (beg > raw)
		munmap(m, beg - raw);
	if (raw + span > beg + len)
		munmap((void *)(beg + len), raw + span - (beg + len));
	/* before the first touch, so each fault takes a whole huge page */
	if (madvise((void *)beg, len, MADV_HUGEPAGE) != 0 && !always)
		goto fail;
	while (got < size) {
		size_t want = size - got > ((size_t)1 << 30) ? (size_t)1 << 30 : size - got;
		ssize_t n = pread(fd, (char *)beg + got, want, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) /* an error or a file that shrank: map it instead */
			goto fail;
		got += (size_t)n;
	}
	/* weights are read-only, as in a file mapping: a stray write faults */
	if (mprotect((void *)beg, len, PROT_READ) != 0)
		goto fail;
	return (void *)beg;
fail:
	munmap((void *)beg, len);
	return NULL;
#else
	(void)fd;
	(void)size;
	return NULL;
#endif
}
