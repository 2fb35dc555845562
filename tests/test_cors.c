/* test_cors.c - the CORS allow list. */
#include <check.h>

#include "cors.h"

START_TEST(listed_origins_are_echoed_others_refused)
{
	const char *list = "http://localhost:3000, app://companion";

	ck_assert_str_eq(cors_allow_origin(list, "http://localhost:3000"),
			 "http://localhost:3000");
	ck_assert_str_eq(cors_allow_origin(list, "app://companion"),
			 "app://companion");
	ck_assert_ptr_null(cors_allow_origin(list, "http://localhost:300"));
	ck_assert_ptr_null(cors_allow_origin(list, "http://evil.example"));
	ck_assert_ptr_null(cors_allow_origin(list, NULL));
	ck_assert_ptr_null(cors_allow_origin(NULL, "http://localhost:3000"));
	ck_assert_ptr_null(cors_allow_origin("", "http://localhost:3000"));
}
END_TEST

START_TEST(star_allows_any_origin)
{
	ck_assert_str_eq(cors_allow_origin("*", "http://x.example"), "*");
	ck_assert_ptr_null(cors_allow_origin("*", ""));
}
END_TEST

Suite *suite_cors(void)
{
	Suite *s = suite_create("cors");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, listed_origins_are_echoed_others_refused);
	tcase_add_test(tc, star_allows_any_origin);
	suite_add_tcase(s, tc);
	return s;
}
