/* test_buf.c - the byte buffers' growth rule: doubling from the first
 * size, the limit, contents kept, overflow refused without a change. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "ember.h"

START_TEST(grows_by_doubling_keeps_contents_and_honours_the_limit)
{
	char *p = NULL;
	size_t cap = 0;

	ck_assert_int_eq(buf_grow(&p, &cap, 10, 64, 0), 0);
	ck_assert_uint_eq(cap, 64);
	memcpy(p, "abc", 4);
	ck_assert_int_eq(buf_grow(&p, &cap, 65, 64, 0), 0);
	ck_assert_uint_eq(cap, 128);
	ck_assert_str_eq(p, "abc");
	ck_assert_int_eq(buf_grow(&p, &cap, 100, 64, 0), 0); /* fits: unchanged */
	ck_assert_uint_eq(cap, 128);
	ck_assert_int_eq(buf_grow(&p, &cap, 300, 64, 400), 0);
	ck_assert_uint_eq(cap, 400);                         /* 512 capped */
	ck_assert_int_eq(buf_grow(&p, &cap, 500, 64, 400), 0);
	ck_assert_uint_eq(cap, 500);                         /* past the limit: exact */
	ck_assert_int_eq(buf_grow(&p, &cap, SIZE_MAX - 8, 64, 0), EMBER_ENOMEM);
	ck_assert_uint_eq(cap, 500);
	ck_assert_str_eq(p, "abc");
	free(p);
}
END_TEST

Suite *suite_buf(void)
{
	Suite *s = suite_create("buf");
	TCase *tc = tcase_create("buf");

	tcase_add_test(tc, grows_by_doubling_keeps_contents_and_honours_the_limit);
	suite_add_tcase(s, tc);
	return s;
}
