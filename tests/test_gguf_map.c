/* test_gguf_map.c - a model file copied into 2 MiB pages (gguf_map.h):
 * the bytes are the file's, read-only, released by munmap(p, size), and
 * the copy is skipped when turned off or not worthwhile. */
#include <check.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ember.h"
#include "gguf.h"
#include "gguf_map.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)

/* A file of `size` pattern bytes; returns an fd open for reading. */
static int make_file(char *path, size_t size, uint8_t **bytes)
{
	uint8_t *p = malloc(size);
	int fd;

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < size; i++)
		p[i] = (uint8_t)(i * 2654435761u >> 13);
	strcpy(path, "/tmp/ember-gmap-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, p, size), (ssize_t)size);
	*bytes = p;
	return fd;
}

/* /proc/self/maps read without malloc (ASan's allocator maps memory and
 * could fill the holes under test between the unmap and the look). */
static char maps[1 << 20];

static void maps_snapshot(void)
{
	int fd = open("/proc/self/maps", O_RDONLY);
	size_t n = 0;
	ssize_t r;

	ck_assert_int_ge(fd, 0);
	while (n < sizeof(maps) - 1 && (r = read(fd, maps + n, sizeof(maps) - 1 - n)) > 0)
		n += (size_t)r;
	maps[n] = '\0';
	close(fd);
}

/* Permissions ("r--p") of the snapshot's mapping that holds `a`, "" if
 * none. */
static void perms_at(const void *a, char out[8])
{
	const char *line = maps;

	out[0] = '\0';
	while (*line) {
		unsigned long lo, hi;
		char pm[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, pm) == 3 && (uintptr_t)a >= lo &&
		    (uintptr_t)a < hi) {
			strcpy(out, pm);
			return;
		}
		line = strchr(line, '\n');
		if (line == NULL)
			return;
		line++;
	}
}

START_TEST(copy_holds_the_file_read_only_and_unmaps_whole)
{
	char path[32], pm[8];
	size_t size = 12 * MIB + 123; /* a partial last page */
	uint8_t *want, *p;
	int fd = make_file(path, size, &want);

	unsetenv("EMBER_HUGEPAGES");
	p = gguf_map_huge(fd, size);
	if (!gguf_map_huge_enabled()) {
		printf("gguf_map: transparent huge pages off here; only the fallback is checked\n");
		ck_assert_ptr_null(p);
	} else {
		ck_assert_ptr_nonnull(p);
		ck_assert_uint_eq((uintptr_t)p % (2 * MIB), 0);
		ck_assert(memcmp(p, want, size) == 0);
		maps_snapshot();
		perms_at(p + size - 1, pm);
		ck_assert_str_eq(pm, "r--p");
		ck_assert_int_eq(munmap(p, size), 0);
		/* nothing of the over-allocation is left before or after */
		maps_snapshot();
		perms_at(p, pm);
		ck_assert_str_eq(pm, "");
		perms_at(p + size + 4096, pm);
		ck_assert_str_eq(pm, "");
		perms_at(p - 1, pm);
		ck_assert_str_eq(pm, "");
	}
	close(fd);
	unlink(path);
	free(want);
}
END_TEST

static void huge__enabled(void *out)
{
	*(int *)out = gguf_map_huge_enabled();
}

/* A word EMBER_HUGEPAGES does not know is said, naming it, and the
 * default (THP's own setting) stands: never taken silently as on or off. */
START_TEST(an_unknown_hugepages_word_is_refused_by_name)
{
	char said[256];
	int dflt, got = -1;

	unsetenv("EMBER_HUGEPAGES");
	dflt = gguf_map_huge_enabled();
	setenv("EMBER_HUGEPAGES", "off", 1);
	test_stderr_of(huge__enabled, &got, said, sizeof(said));
	unsetenv("EMBER_HUGEPAGES");
	ck_assert_int_eq(got, dflt);
	ck_assert_str_eq(said, "ember: EMBER_HUGEPAGES=off: want one of 1, 0, always; using 1\n");
}
END_TEST

START_TEST(copy_is_skipped_when_off_or_small)
{
	char path[32];
	uint8_t *want;
	int fd = make_file(path, 9 * MIB, &want);

	setenv("EMBER_HUGEPAGES", "0", 1);
	ck_assert_int_eq(gguf_map_huge_enabled(), 0);
	ck_assert_ptr_null(gguf_map_huge(fd, 9 * MIB));
	unsetenv("EMBER_HUGEPAGES");
	ck_assert_ptr_null(gguf_map_huge(fd, 1 * MIB)); /* under the minimum */
	/* a size past the file's end: the read comes up short, no copy */
	ck_assert_ptr_null(gguf_map_huge(fd, 10 * MIB));
	close(fd);
	unlink(path);
	free(want);
}
END_TEST

START_TEST(open_weights_reads_what_open_reads)
{
	char err[EMBER_ERR_MAX] = "", path[64];
	const uint64_t ne[] = {1024, 3 * 1024}; /* 12 MiB of F32 */
	size_t n = (size_t)ne[0] * ne[1];
	struct gguf_writer *w;
	struct gguf a, b;
	float *x = malloc(n * sizeof(float));
	int fd;

	ck_assert_ptr_nonnull(x);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(i % 977) - 300.0f;
	strcpy(path, "/tmp/ember-gmap-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(gguf_writer_new(&w, path, err), 0);
	ck_assert_int_eq(gguf_writer_add_tensor(w, "w", DTYPE_F32, 2, ne), 0);
	ck_assert_msg(gguf_writer_write_header(w, err) == 0, "%s", err);
	ck_assert_msg(gguf_writer_write_data(w, x, n * sizeof(float), err) == 0, "%s", err);
	ck_assert_msg(gguf_writer_finish(w, err) == 0, "%s", err);
	gguf_writer_free(w);
	ck_assert_msg(gguf_open(&a, path, err) == 0, "%s", err);
	ck_assert_msg(gguf_open_weights(&b, path, err) == 0, "%s", err);
	ck_assert_uint_eq(a.size, b.size);
	ck_assert(memcmp(a.map, b.map, a.size) == 0);
	ck_assert(memcmp(gguf_find_tensor(&b, "w")->data, x, n * sizeof(float)) == 0);
	gguf_close(&a);
	gguf_close(&b);
	ck_assert_int_eq(gguf_open_weights(&b, "/nonexistent/model.gguf", err), EMBER_EIO);
	unlink(path);
	free(x);
}
END_TEST

Suite *suite_gguf_map(void)
{
	Suite *s = suite_create("gguf_map");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, copy_holds_the_file_read_only_and_unmaps_whole);
	tcase_add_test(tc, copy_is_skipped_when_off_or_small);
	tcase_add_test(tc, an_unknown_hugepages_word_is_refused_by_name);
	tcase_add_test(tc, open_weights_reads_what_open_reads);
	suite_add_tcase(s, tc);
	return s;
}
