/* test_utf8.c - the strict decoder refuses what Unicode calls ill-formed;
 * the lenient one passes overlongs and surrogates as the BPE references
 * do; the encoder round-trips both. */
#include <check.h>
#include <string.h>

#include "utf8.h"

START_TEST(strict_sequences_follow_the_well_formed_table)
{
	static const struct {
		const char *s;
		size_t len;
	} cases[] = {
		{"a", 1}, {"\xc3\xa9", 2}, {"\xe2\x82\xac", 3}, {"\xf0\x9f\x98\x80", 4},
		{"\xc0\xaf", 0},        /* overlong */
		{"\xe0\x80\xaf", 0},    /* overlong, 3 bytes */
		{"\xed\xa0\x80", 0},    /* surrogate */
		{"\xf4\x90\x80\x80", 0}, /* past U+10FFFF */
		{"\x80", 0}, {"\xe2\x82", 0}, /* continuation alone; cut short */
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_uint_eq(utf8_seq_len((const unsigned char *)cases[i].s,
					       strlen(cases[i].s)), cases[i].len);
	ck_assert(utf8_valid("h\xc3\xa9llo", 6));
	ck_assert(!utf8_valid("h\xed\xa0\x80", 4));
}
END_TEST

START_TEST(lenient_decoding_keeps_what_the_references_keep)
{
	char out[4];
	size_t adv;

	ck_assert_uint_eq(utf8_decode_lenient((const uint8_t *)"\xed\xa0\x80", 3, &adv), 0xD800);
	ck_assert_uint_eq(adv, 3);
	ck_assert_uint_eq(utf8_decode_lenient((const uint8_t *)"\xc0\xaf", 2, &adv), 0x2F);
	ck_assert_uint_eq(adv, 2);
	ck_assert_uint_eq(utf8_decode_lenient((const uint8_t *)"\xff", 1, &adv), 0xFFFD);
	ck_assert_uint_eq(adv, 1);
	ck_assert_uint_eq(utf8_decode_lenient((const uint8_t *)"\xe2\x82", 2, &adv), 0xFFFD);
	ck_assert_uint_eq(adv, 1);
	ck_assert_uint_eq(utf8_encode(0x1F600, out), 4);
	ck_assert_int_eq(memcmp(out, "\xf0\x9f\x98\x80", 4), 0);
	ck_assert_uint_eq(utf8_decode_lenient((const uint8_t *)out, 4, &adv), 0x1F600);
}
END_TEST

Suite *suite_utf8(void)
{
	Suite *s = suite_create("utf8");
	TCase *tc = tcase_create("utf8");

	tcase_add_test(tc, strict_sequences_follow_the_well_formed_table);
	tcase_add_test(tc, lenient_decoding_keeps_what_the_references_keep);
	suite_add_tcase(s, tc);
	return s;
}
