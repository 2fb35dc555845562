/*
 * test_env.c - the EMBER_* knobs' parsing (engine/base/env.h): whole
 * numbers within bounds and words of a list, anything else refused with a
 * line naming the variable and the default kept (no atoi: "-1" must not
 * wrap to a huge size, "abc" must not read as 0, "8x" not as 8).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "env.h"
#include "testutil.h"

START_TEST(size_takes_whole_numbers_within_bounds)
{
	static const char *const ok[] = {"0", "7", "64", "007"};
	static const size_t want[] = {0, 7, 64, 7};
	char err[EMBER_ERR_MAX];
	size_t v;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		v = 99;
		ck_assert_int_eq(env_parse_size("EMBER_X", ok[i], 0, 64, &v, err), 0);
		ck_assert_uint_eq(v, want[i]);
	}
}
END_TEST

START_TEST(size_refuses_signs_garbage_tails_and_range)
{
	static const char *const bad[] = {"-1",  "+3", " 4", "4 ", "abc", "8x", "0x10",
					  "65", "1e3", "99999999999999999999999", "-0"};
	char err[EMBER_ERR_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t v = 5;

		err[0] = '\0';
		ck_assert_msg(env_parse_size("EMBER_PACK_AHEAD", bad[i], 0, 64, &v, err) ==
				      EMBER_EINVAL,
			      "'%s' taken", bad[i]);
		ck_assert_uint_eq(v, 5); /* untouched */
		ck_assert_msg(strstr(err, "EMBER_PACK_AHEAD=") == err, "%s", err);
		ck_assert_ptr_nonnull(strstr(err, "0..64"));
	}
	/* the lower bound too */
	ck_assert_int_eq(env_parse_size("EMBER_X", "1", 2, 10, &(size_t){0}, NULL), EMBER_EINVAL);
}
END_TEST

START_TEST(choice_takes_only_listed_words)
{
	static const char *const words[] = {"0", "1"};
	char err[EMBER_ERR_MAX];
	size_t v = 7;

	ck_assert_int_eq(env_parse_choice("EMBER_PACK", "1", words, 2, &v, err), 0);
	ck_assert_uint_eq(v, 1);
	ck_assert_int_eq(env_parse_choice("EMBER_PACK", "0", words, 2, &v, err), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(env_parse_choice("EMBER_PACK", "yes", words, 2, &v, err), EMBER_EINVAL);
	ck_assert_uint_eq(v, 0);
	ck_assert_str_eq(err, "EMBER_PACK=yes: want one of 0, 1");
	ck_assert_int_eq(env_parse_choice("EMBER_PACK", "10", words, 2, &v, err), EMBER_EINVAL);
}
END_TEST

/* One read of a knob: its value (NULL: unset), the default, and what
 * must come of it. */
struct env_case {
	const char *value;
	int size;       /* env_size (0..64) or env_choice ("0", "1") */
	size_t def;     /* the caller's default */
	int rc;         /* env_size / env_choice's return */
	size_t got;     /* the value after */
	const char *said; /* stderr, exactly */
};

static void env__read(void *data)
{
	static const char *const words[] = {"0", "1"};
	struct env_case *c = data;
	size_t v = c->def;

	if (c->value)
		setenv("EMBER_TEST_KNOB", c->value, 1);
	else
		unsetenv("EMBER_TEST_KNOB");
	c->rc = c->size ? env_size("EMBER_TEST_KNOB", 0, 64, &v)
			: env_choice("EMBER_TEST_KNOB", words, 2, &v);
	c->got = v;
	unsetenv("EMBER_TEST_KNOB");
}

/* A refused value keeps the default and says so on stderr, naming the
 * variable; unset and empty are the default without a word. */
START_TEST(refused_values_keep_the_default_and_say_so)
{
	static const struct env_case cases[] = {
		{NULL, 1, 3, 0, 3, ""},
		{"", 1, 3, 0, 3, ""},
		/* atoi's wrap to 2^64 - 1 */
		{"-1", 1, 3, 0, 3, "ember: EMBER_TEST_KNOB=-1: not a whole number in 0..64; using 3\n"},
		{"12", 1, 3, 1, 12, ""},
		{"off", 0, 1, 0, 1, "ember: EMBER_TEST_KNOB=off: want one of 0, 1; using 1\n"},
		{"0", 0, 1, 1, 0, ""},
	};
	char said[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct env_case c = cases[i];

		test_stderr_of(env__read, &c, said, sizeof(said));
		ck_assert_msg(c.rc == cases[i].rc && c.got == cases[i].got,
			      "case %zu: rc %d value %zu", i, c.rc, c.got);
		ck_assert_str_eq(said, cases[i].said);
	}
}
END_TEST

Suite *suite_env(void)
{
	Suite *s = suite_create("env");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, size_takes_whole_numbers_within_bounds);
	tcase_add_test(tc, size_refuses_signs_garbage_tails_and_range);
	tcase_add_test(tc, choice_takes_only_listed_words);
	tcase_add_test(tc, refused_values_keep_the_default_and_say_so);
	suite_add_tcase(s, tc);
	return s;
}
