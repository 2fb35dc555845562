/* test_dtype.c - the element type table. */
#include <check.h>

#include "dtype.h"

START_TEST(row_sizes_follow_block_layouts)
{
	ck_assert_uint_eq(dtype_row_size(DTYPE_F32, 7), 28);
	ck_assert_uint_eq(dtype_row_size(DTYPE_F16, 7), 14);
	ck_assert_uint_eq(dtype_row_size(DTYPE_BF16, 64), 128);
	ck_assert_uint_eq(dtype_row_size(DTYPE_Q8_0, 64), 68);
	ck_assert_uint_eq(dtype_row_size(DTYPE_Q4_0, 64), 36);
	ck_assert_uint_eq(dtype_row_size(DTYPE_Q4_K, 256), 144);
	ck_assert_uint_eq(dtype_row_size(DTYPE_Q6_K, 512), 420);
}
END_TEST

START_TEST(ragged_rows_and_unknown_ids_are_rejected)
{
	ck_assert_uint_eq(dtype_row_size(DTYPE_Q8_0, 33), 0);
	ck_assert_uint_eq(dtype_row_size(DTYPE_Q4_K, 32), 0);
	ck_assert_uint_eq(dtype_row_size(4, 32), 0); /* removed Q4_2 */
	ck_assert_uint_eq(dtype_row_size(DTYPE_COUNT, 32), 0);
	ck_assert_uint_eq(dtype_row_size(0xffffffffu, 32), 0);
	ck_assert_int_eq(dtype_valid(5), 0);
	ck_assert_str_eq(dtype_name(99), "?");
}
END_TEST

START_TEST(names_round_trip)
{
	int t;

	for (t = 0; t < DTYPE_COUNT; t++)
		if (dtype_valid((uint32_t)t))
			ck_assert_int_eq(dtype_from_name(dtype_name((uint32_t)t)), t);
	ck_assert_int_eq(dtype_from_name("Q4_0"), DTYPE_Q4_0);
	ck_assert_int_eq(dtype_from_name("int4"), -1);
}
END_TEST

Suite *suite_dtype(void)
{
	Suite *s = suite_create("dtype");
	TCase *tc = tcase_create("dtype");

	tcase_add_test(tc, row_sizes_follow_block_layouts);
	tcase_add_test(tc, ragged_rows_and_unknown_ids_are_rejected);
	tcase_add_test(tc, names_round_trip);
	suite_add_tcase(s, tc);
	return s;
}
