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

START_TEST(preflight_headers_echo_the_request_unless_configured)
{
	char buf[256];
	const char *req = "authorization, content-type, x-stainless-os, x-stainless-lang";

	/* default: echo, so browser SDKs' own headers pass */
	ck_assert_str_eq(cors_allow_headers("", req, buf, sizeof(buf)), req);
	ck_assert_str_eq(cors_allow_headers(NULL, req, buf, sizeof(buf)), req);
	/* nothing asked: the basic pair */
	ck_assert_str_eq(cors_allow_headers(NULL, NULL, buf, sizeof(buf)), CORS_ALLOW_HEADERS);
	ck_assert_str_eq(cors_allow_headers(NULL, "", buf, sizeof(buf)), CORS_ALLOW_HEADERS);
	/* a configured list wins */
	ck_assert_str_eq(cors_allow_headers("Authorization, X-Mine", req, buf, sizeof(buf)),
			 "Authorization, X-Mine");
	/* never echoed: anything but header names (no CR/LF, no quotes), too long */
	ck_assert_str_eq(cors_allow_headers(NULL, "x-a\r\nSet-Cookie: a=b", buf, sizeof(buf)),
			 CORS_ALLOW_HEADERS);
	ck_assert_str_eq(cors_allow_headers(NULL, "x-a;b", buf, sizeof(buf)), CORS_ALLOW_HEADERS);
	ck_assert_str_eq(cors_allow_headers(NULL, req, buf, 8), CORS_ALLOW_HEADERS);
}
END_TEST

Suite *suite_cors(void)
{
	Suite *s = suite_create("cors");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, listed_origins_are_echoed_others_refused);
	tcase_add_test(tc, star_allows_any_origin);
	tcase_add_test(tc, preflight_headers_echo_the_request_unless_configured);
	suite_add_tcase(s, tc);
	return s;
}
