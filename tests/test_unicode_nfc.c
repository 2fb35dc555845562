/*
 * test_unicode_nfc.c - NFC (engine/text/unicode_nfc.c) against the
 * Unicode conformance file NormalizationTest.txt (Debian's unicode-data,
 * bzip2-compressed, read through bzcat): every line, 0 mismatches. Then
 * what the file leaves implicit: every code point outside its Part 1 is
 * unchanged (through the quick check and through the slow path), long runs
 * of marks are ordered stably, ill-formed bytes pass through.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "unicode_nfc.h"
#include "utf8.h"

#define NORM_TEST "/usr/share/unicode/NormalizationTest.txt.bz2"

/* NFC of s[0..len) as a malloc'd NUL-terminated string of *n_out bytes. */
static char *nfc_n(const char *s, size_t len, size_t *n_out)
{
	char *out = NULL, *r;
	size_t n = 0;

	ck_assert_int_eq(unicode_nfc(s, len, &out, &n), 0);
	r = malloc(n + 1);
	ck_assert_ptr_nonnull(r);
	memcpy(r, out != NULL ? out : s, n);
	r[n] = '\0';
	free(out);
	*n_out = n;
	return r;
}

static char *nfc(const char *s, size_t len)
{
	size_t n;

	return nfc_n(s, len, &n);
}

/* "0044 0307" -> UTF-8 in `out` (NUL-terminated). */
static void field_utf8(const char *field, char *out, size_t cap)
{
	size_t n = 0;
	char *end;

	for (;;) {
		unsigned long cp = strtoul(field, &end, 16);
		if (end == field)
			break;
		ck_assert_uint_lt(n + 5, cap);
		n += utf8_encode((uint32_t)cp, out + n);
		field = end;
	}
	out[n] = '\0';
}

static void expect_nfc(const char *want, const char *in, size_t line, int col)
{
	char *got = nfc(in, strlen(in));

	ck_assert_msg(strcmp(got, want) == 0, "NormalizationTest line %zu: NFC(c%d) wrong", line, col);
	free(got);
}

START_TEST(normalization_test_every_line)
{
	static char part1[0x110000];
	char line[4096], c[5][512], *p, *semi;
	size_t lineno = 0, cases = 0, part = 0;
	uint32_t cp;
	FILE *f;
	int k;

	f = popen("bzcat " NORM_TEST, "r");
	ck_assert_msg(f != NULL, "bzcat " NORM_TEST);
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (line[0] == '@') {
			part = strncmp(line, "@Part1", 6) == 0;
			continue;
		}
		for (p = line, k = 0; k < 5; k++, p = semi + 1) {
			semi = strchr(p, ';');
			ck_assert_msg(semi != NULL, "line %zu malformed", lineno);
			*semi = '\0';
			field_utf8(p, c[k], sizeof(c[k]));
		}
		/* The spec's NFC conformance: c2 == NFC(c1) == NFC(c2) ==
		 * NFC(c3) and c4 == NFC(c4) == NFC(c5). */
		expect_nfc(c[1], c[0], lineno, 1);
		expect_nfc(c[1], c[1], lineno, 2);
		expect_nfc(c[1], c[2], lineno, 3);
		expect_nfc(c[3], c[3], lineno, 4);
		expect_nfc(c[3], c[4], lineno, 5);
		if (part) {
			size_t adv;
			cp = utf8_decode_lenient((const uint8_t *)c[0], strlen(c[0]), &adv);
			part1[cp] = 1;
		}
		cases++;
	}
	ck_assert_int_eq(pclose(f), 0);
	ck_assert_msg(cases > 19000, "only %zu test lines: is unicode-data installed?", cases);

	/* Part 1 lists every code point NFC may change on its own; all others
	 * stay as they are, through the quick check and through the slow path
	 * (forced by a decomposed "Å" after them). */
	for (cp = 0; cp < 0x110000; cp++) {
		char in[16], *got;
		size_t n, m;

		if (part1[cp] || (cp >= 0xD800 && cp <= 0xDFFF))
			continue;
		n = utf8_encode(cp, in);
		got = nfc_n(in, n, &m);
		ck_assert_msg(m == n && memcmp(got, in, n) == 0, "U+%04X changed", cp);
		free(got);
		memcpy(in + n, "A\xcc\x8a", 4);
		got = nfc_n(in, n + 3, &m);
		ck_assert_msg(m == n + 2 && memcmp(got, in, n) == 0 &&
				      memcmp(got + n, "\xc3\x85", 2) == 0,
			      "U+%04X before A + ring: slow path changed it", cp);
		free(got);
	}
}
END_TEST

START_TEST(quick_check_leaves_normal_text_alone)
{
	static const char *const normal[] = {"", "plain ASCII\n\t", "caf\xc3\xa9",
					     "\xe4\xb8\xad\xe6\x96\x87", "\xea\xb0\x80",
					     "\xf0\x9f\x98\x80", "\xd0\x9f\xd1\x80\xd0\xb8"};
	char *out = (char *)1;
	size_t i, n;

	for (i = 0; i < sizeof(normal) / sizeof(normal[0]); i++) {
		ck_assert_msg(unicode_nfc_quick(normal[i], strlen(normal[i])), "case %zu", i);
		ck_assert_int_eq(unicode_nfc(normal[i], strlen(normal[i]), &out, &n), 0);
		ck_assert_ptr_null(out); /* nothing allocated */
		ck_assert_uint_eq(n, strlen(normal[i]));
	}
	ck_assert(!unicode_nfc_quick("e\xcc\x81", 3)); /* e + combining acute */
}
END_TEST

START_TEST(composes_decomposes_and_handles_hangul)
{
	char *got;

	got = nfc("cafe\xcc\x81", 6); /* NFD café -> NFC */
	ck_assert_str_eq(got, "caf\xc3\xa9");
	free(got);
	got = nfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", 9); /* L V T jamo -> 각 U+AC01 */
	ck_assert_str_eq(got, "\xea\xb0\x81");
	free(got);
	got = nfc("\xe2\x84\xab", 3); /* ANGSTROM SIGN (singleton) -> Å */
	ck_assert_str_eq(got, "\xc3\x85");
	free(got);
	/* Marks out of order: dot below (220) moves before the dot above
	 * (230); then q has no composite, so both stay. */
	got = nfc("q\xcc\x87\xcc\xa3", 5);
	ck_assert_str_eq(got, "q\xcc\xa3\xcc\x87");
	free(got);
}
END_TEST

/* Thousands of marks after one letter take the counting sort, which must
 * be stable and agree with the short-run order. */
START_TEST(long_runs_of_marks_are_ordered_stably)
{
	enum { N = 1000 };
	char *in = malloc(1 + N * 4), *got;
	size_t i, n = 0;

	ck_assert_ptr_nonnull(in);
	in[n++] = 'a';
	for (i = 0; i < N; i++) {
		memcpy(in + n, "\xcc\x81\xcc\x96", 4); /* acute (230), grave below (220) */
		n += 4;
	}
	got = nfc(in, n);
	/* a + acute composes (the grave below, class 220, does not block
	 * it): U+00E1, then the N graves below, then N - 1 acutes. */
	ck_assert_uint_eq(strlen(got), 2 + (2 * N - 1) * 2);
	ck_assert(memcmp(got, "\xc3\xa1", 2) == 0);
	for (i = 0; i < 2 * N - 1; i++)
		ck_assert(memcmp(got + 2 + 2 * i, i < N ? "\xcc\x96" : "\xcc\x81", 2) == 0);
	free(got);
	free(in);
}
END_TEST

START_TEST(ill_formed_bytes_pass_through)
{
	/* An invalid byte between e and the acute: nothing composes across it,
	 * and the bytes come back as they were. A lone surrogate too. */
	static const char in[] = "e\xff\xcc\x81 A\xcc\x8a \xed\xa0\x80";
	char *got = nfc(in, sizeof(in) - 1);

	ck_assert_str_eq(got, "e\xff\xcc\x81 \xc3\x85 \xed\xa0\x80");
	free(got);
}
END_TEST

Suite *suite_unicode_nfc(void)
{
	Suite *s = suite_create("unicode_nfc");
	TCase *tc = tcase_create("unicode_nfc");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, normalization_test_every_line);
	tcase_add_test(tc, quick_check_leaves_normal_text_alone);
	tcase_add_test(tc, composes_decomposes_and_handles_hangul);
	tcase_add_test(tc, long_runs_of_marks_are_ordered_stably);
	tcase_add_test(tc, ill_formed_bytes_pass_through);
	suite_add_tcase(s, tc);
	return s;
}
