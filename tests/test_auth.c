/* test_auth.c - Bearer API keys. */
#include <check.h>

#include "auth.h"

START_TEST(no_keys_means_open)
{
	ck_assert(auth_check(NULL, NULL));
	ck_assert(auth_check("", "Bearer x"));
}
END_TEST

START_TEST(bearer_must_carry_a_listed_key)
{
	const char *keys = "alpha, beta-2 ,gamma";

	ck_assert(auth_check(keys, "Bearer alpha"));
	ck_assert(auth_check(keys, "bearer beta-2"));
	ck_assert(auth_check(keys, "Bearer gamma"));
	ck_assert(!auth_check(keys, NULL));
	ck_assert(!auth_check(keys, "Bearer "));
	ck_assert(!auth_check(keys, "Bearer alph"));
	ck_assert(!auth_check(keys, "Bearer alphaa"));
	ck_assert(!auth_check(keys, "Bearer Alpha"));
	ck_assert(!auth_check(keys, "Basic alpha"));
	ck_assert(!auth_check(keys, "alpha"));
	ck_assert(!auth_check(keys, "Bearer alpha, beta-2"));
	ck_assert(!auth_check(",,", "Bearer x"));
}
END_TEST

Suite *suite_auth(void)
{
	Suite *s = suite_create("auth");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, no_keys_means_open);
	tcase_add_test(tc, bearer_must_carry_a_listed_key);
	suite_add_tcase(s, tc);
	return s;
}
