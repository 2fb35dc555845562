/* test_jsonw.c - the JSON text writer: escaping that any JSON parser reads
 * back exactly, numbers, sticky reset. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "jsonw.h"

START_TEST(strings_round_trip_through_a_parser)
{
	static const char text[] = "quote \" backslash \\ nl \n tab \t cr \r "
				   "bell \a nul-free \x01\x1f caf\xc3\xa9 \xe2\x82\xac";
	struct jsonw w;
	json_t *v;

	jsonw_init(&w);
	jsonw_raw(&w, "[");
	jsonw_strn(&w, text, sizeof(text) - 1);
	jsonw_raw(&w, "]");
	ck_assert(jsonw_ok(&w));
	v = json_loads(w.data, 0, NULL);
	ck_assert_ptr_nonnull(v);
	ck_assert_str_eq(json_string_value(json_array_get(v, 0)), text);
	json_decref(v);
	jsonw_free(&w);
}
END_TEST

START_TEST(numbers_are_json_even_when_not_finite)
{
	struct jsonw w;
	json_t *v;

	jsonw_init(&w);
	jsonw_raw(&w, "[");
	jsonw_int(&w, -9007199254740993LL);
	jsonw_raw(&w, ",");
	jsonw_num(&w, 12.5);
	jsonw_raw(&w, ",");
	jsonw_num(&w, NAN);
	jsonw_raw(&w, ",");
	jsonw_num(&w, INFINITY);
	jsonw_raw(&w, ",");
	jsonw_str(&w, NULL);
	jsonw_raw(&w, "]");
	v = json_loads(w.data, 0, NULL);
	ck_assert_ptr_nonnull(v);
	ck_assert(json_integer_value(json_array_get(v, 0)) == -9007199254740993LL);
	ck_assert(json_number_value(json_array_get(v, 1)) == 12.5);
	ck_assert(json_number_value(json_array_get(v, 2)) == 0);
	ck_assert(json_number_value(json_array_get(v, 3)) == 0);
	ck_assert(json_is_null(json_array_get(v, 4)));
	json_decref(v);
	jsonw_free(&w);
}
END_TEST

START_TEST(reset_keeps_capacity_and_take_hands_over)
{
	struct jsonw w;
	size_t cap;
	char *s;

	jsonw_init(&w);
	jsonw_strn(&w, "abcdefghijklmnopqrstuvwxyz", 26);
	cap = w.cap;
	jsonw_reset(&w);
	ck_assert_uint_eq(w.len, 0);
	ck_assert_uint_eq(w.cap, cap);
	ck_assert_str_eq(w.data, "");
	jsonw_raw(&w, "{}");
	s = jsonw_take(&w);
	ck_assert_str_eq(s, "{}");
	ck_assert_ptr_null(w.data);
	free(s);
	s = jsonw_take(&w);  /* empty writer: an empty string */
	ck_assert_str_eq(s, "");
	free(s);
	jsonw_free(&w);
	jsonw_free(NULL);
}
END_TEST

Suite *suite_jsonw(void)
{
	Suite *s = suite_create("jsonw");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, strings_round_trip_through_a_parser);
	tcase_add_test(tc, numbers_are_json_even_when_not_finite);
	tcase_add_test(tc, reset_keeps_capacity_and_take_hands_over);
	suite_add_tcase(s, tc);
	return s;
}
