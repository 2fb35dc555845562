/* test_ember.c - the error table and message convention. */
#include <check.h>
#include <string.h>

#include "ember.h"

START_TEST(strerror_names_every_code)
{
	ck_assert_str_eq(ember_strerror(EMBER_OK), "ok");
	ck_assert_str_eq(ember_strerror(EMBER_ENOMEM), "out of memory");
	ck_assert_str_eq(ember_strerror(EMBER_EFORMAT), "malformed input");
	ck_assert_str_eq(ember_strerror(12345), "unknown error");
#define X(name, value, msg) ck_assert_str_eq(ember_strerror(value), msg);
	EMBER_ERRNO_MAP(X)
#undef X
}
END_TEST

START_TEST(error_codes_are_negative_and_distinct)
{
	int seen[64] = {0};
#define X(name, value, msg)                   \
	ck_assert_int_lt(value, 0);               \
	ck_assert_int_gt(value, -64);             \
	ck_assert_int_eq(seen[-(value)]++, 0);
	EMBER_ERRNO_MAP(X)
#undef X
}
END_TEST

START_TEST(seterr_formats_and_returns_code)
{
	char err[EMBER_ERR_MAX];
	char big[600];

	ck_assert_int_eq(ember_seterr(err, EMBER_EFORMAT, "tensor %s: %d", "x", 7), EMBER_EFORMAT);
	ck_assert_str_eq(err, "tensor x: 7");
	ck_assert_int_eq(ember_seterr(NULL, EMBER_EIO, "ignored"), EMBER_EIO);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ember_seterr(err, EMBER_EINVAL, "%s", big);
	ck_assert_uint_eq(strlen(err), EMBER_ERR_MAX - 1);
}
END_TEST

Suite *suite_ember(void)
{
	Suite *s = suite_create("ember");
	TCase *tc = tcase_create("errors");

	tcase_add_test(tc, strerror_names_every_code);
	tcase_add_test(tc, error_codes_are_negative_and_distinct);
	tcase_add_test(tc, seterr_formats_and_returns_code);
	suite_add_tcase(s, tc);
	return s;
}
