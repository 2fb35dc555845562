/* test_session_id.c - session ids with and without a replica name: what a
 * replica accepts as its own, and that names round-trip. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "api_native.h"
#include "ember.h"

START_TEST(plain_ids_without_a_replica)
{
	char buf[API_SESSION_ID_MAX];
	uint64_t id = 0;

	api_native_session_name(NULL, 17, buf);
	ck_assert_str_eq(buf, "sess-17");
	ck_assert_int_eq(api_native_parse_session_id(buf, NULL, &id), 0);
	ck_assert_uint_eq(id, 17);
	api_native_session_name("", 3, buf);
	ck_assert_str_eq(buf, "sess-3");
	/* Malformed, zero, overflowing, or another replica's. */
	ck_assert_int_eq(api_native_parse_session_id("sess-0", NULL, &id), EMBER_EINVAL);
	ck_assert_int_eq(api_native_parse_session_id("sess-", NULL, &id), EMBER_EINVAL);
	ck_assert_int_eq(api_native_parse_session_id("sess-1x", NULL, &id), EMBER_EINVAL);
	ck_assert_int_eq(api_native_parse_session_id("sess--1", NULL, &id), EMBER_EINVAL);
	ck_assert_int_eq(api_native_parse_session_id("ses-1", NULL, &id), EMBER_EINVAL);
	ck_assert_int_eq(api_native_parse_session_id(
				 "sess-99999999999999999999999", NULL, &id), EMBER_EINVAL);
	ck_assert_int_eq(api_native_parse_session_id("sess-r1-4", NULL, &id),
			 EMBER_EINVAL);
}
END_TEST

START_TEST(replica_ids_name_their_replica)
{
	char buf[API_SESSION_ID_MAX];
	uint64_t id = 0;

	api_native_session_name("r1", 42, buf);
	ck_assert_str_eq(buf, "sess-r1-42");
	ck_assert_int_eq(api_native_parse_session_id(buf, "r1", &id), 0);
	ck_assert_uint_eq(id, 42);
	/* Another replica's id, a prefix of ours, or one without a name. */
	ck_assert_int_eq(api_native_parse_session_id(buf, "r2", &id), EMBER_EINVAL);
	ck_assert_int_eq(api_native_parse_session_id(buf, "r", &id), EMBER_EINVAL);
	ck_assert_int_eq(api_native_parse_session_id(buf, "r11", &id), EMBER_EINVAL);
	ck_assert_int_eq(api_native_parse_session_id("sess-42", "r1", &id), EMBER_EINVAL);
	ck_assert_int_eq(api_native_parse_session_id("sess-r1-", "r1", &id), EMBER_EINVAL);
	ck_assert_int_eq(api_native_parse_session_id("sess-r1-0", "r1", &id),
			 EMBER_EINVAL);
	/* The longest name and the largest id fit the buffer. */
	api_native_session_name("abcdefghijklmnop", UINT64_MAX, buf);
	ck_assert_int_eq(api_native_parse_session_id(buf, "abcdefghijklmnop",
						     &id), 0);
	ck_assert_uint_eq(id, UINT64_MAX);
}
END_TEST

Suite *suite_session_id(void)
{
	Suite *s = suite_create("session_id");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, plain_ids_without_a_replica);
	tcase_add_test(tc, replica_ids_name_their_replica);
	suite_add_tcase(s, tc);
	return s;
}
