/* pages.c - anonymous memory on 2 MiB boundaries (pages.h). */
#include "pages.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "env.h"

#define PAGES_SMALL ((size_t)4096)

enum pages_mode pages_mode(void)
{
	static const char *const words[] = {"1", "0", "always"};
	size_t mode = PAGES_MODE_DEFAULT;

	env_choice("EMBER_HUGEPAGES", words, 3, &mode);
	return (enum pages_mode)mode;
}

/* Whether the kernel's transparent huge pages are "always" or "madvise". */
static int pages__thp_on(void)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
	char buf[128] = "";
	/* "always [madvise] never": the bracketed word is the setting */
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

	if (f == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) == NULL)
		buf[0] = '\0';
	fclose(f);
	return strstr(buf, "[always]") != NULL || strstr(buf, "[madvise]") != NULL;
#else
	return 0;
#endif
}

int pages_huge_enabled(void)
{
	return pages_mode() != PAGES_MODE_OFF && pages__thp_on();
}

void *pages_map_aligned(size_t len)
{
	size_t span;
	uintptr_t raw, beg;
	void *m;

	if (len > SIZE_MAX - 2 * PAGES_HUGE)
		return NULL;
	len = (len + PAGES_SMALL - 1) & ~(PAGES_SMALL - 1);
	/* over-allocate by one huge page and trim, so the range starts on a
	 * 2 MiB boundary and munmap(p, len) releases exactly what is left */
	span = len + PAGES_HUGE;
	m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	raw = (uintptr_t)m;
	beg = (raw + PAGES_HUGE - 1) & ~(uintptr_t)(PAGES_HUGE - 1);
	if (beg > raw)
		munmap(m, beg - raw);
	if (raw + span > beg + len)
		munmap((void *)(beg + len), raw + span - (beg + len));
	return (void *)beg;
}

void pages_unmap(void *p, size_t len)
{
	if (p)
		munmap(p, (len + PAGES_SMALL - 1) & ~(PAGES_SMALL - 1));
}

int pages_advise_huge(void *p, size_t len)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
	return madvise(p, (len + PAGES_SMALL - 1) & ~(PAGES_SMALL - 1), MADV_HUGEPAGE) == 0 ? 0 : -1;
#else
	(void)p;
	(void)len;
	return -1;
#endif
}
