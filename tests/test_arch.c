/* test_arch.c - the architecture table: variant selection by a file's bool
 * keys and the ALiBi slopes, against values worked out by hand from the
 * formula in arch.h (HF build_alibi_tensor, max_bias 8). */
#include <check.h>
#include <math.h>
#include <string.h>

#include "arch.h"

/* Slopes are computed with pow() in double: only its rounding differs. */
#define TOL_SLOPE 1e-15

static void assert_slopes(uint32_t n_head, const double *want)
{
	uint32_t h;

	for (h = 0; h < n_head; h++) {
		double got = arch_alibi_slope(h, n_head, 8.0);

		ck_assert_msg(fabs(got - want[h]) <= TOL_SLOPE * want[h],
			      "n_head %u, head %u: slope %.17g, expected %.17g", n_head, h, got,
			      want[h]);
	}
}

START_TEST(alibi_slopes_for_a_power_of_two_halve_every_two_heads_of_four)
{
	/* p = 4: 2^(-8(h+1)/4) = 2^(-2(h+1)). */
	static const double want[4] = {0.25, 0.0625, 0.015625, 0.00390625};

	assert_slopes(4, want);
}
END_TEST

START_TEST(alibi_slopes_for_six_heads_interleave_the_next_power)
{
	/* p = 4: the first four as for n = 4; the other two take
	 * 2^(-4(2i+1)/4) for i = 0, 1: 2^-1 and 2^-3. */
	static const double want[6] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};

	assert_slopes(6, want);
}
END_TEST

START_TEST(alibi_slopes_for_twelve_heads_use_odd_half_powers)
{
	/* p = 8: 2^-(h+1) for h < 8; then 2^(-4(2i+1)/8) = 2^-(i + 1/2). */
	const double r = sqrt(0.5);
	const double want[12] = {0.5,      0.25,      0.125,      0.0625,      0.03125,     0.015625,
				 0.0078125, 0.00390625, r,          r / 2,       r / 4,       r / 8};

	assert_slopes(12, want);
}
END_TEST

START_TEST(alibi_slopes_for_thirty_two_heads_step_by_a_fourth_root)
{
	/* p = 32 (Falcon-RW-1B): 2^(-(h+1)/4). For h = 4k + r that is
	 * 2^-k times 2^-1/4, 2^-1/2, 2^-3/4, 2^-1 (r = 0..3). */
	static const double root[4] = {0.8408964152537145, 0.7071067811865476,
				       0.5946035575013605, 0.5};
	double want[32];
	uint32_t h;

	for (h = 0; h < 32; h++)
		want[h] = ldexp(root[h % 4], -(int)(h / 4));
	assert_slopes(32, want);
	ck_assert(fabs(arch_alibi_slope(3, 32, 8.0) - 0.5) < 1e-16);
	ck_assert(fabs(arch_alibi_slope(31, 32, 8.0) - 1.0 / 256) < 1e-18);
}
END_TEST

START_TEST(alibi_max_bias_scales_the_exponent)
{
	/* llama.cpp's generalisation: max_bias b gives 2^(-b(h+1)/p). */
	ck_assert(fabs(arch_alibi_slope(0, 4, 4.0) - 0.5) < 1e-16);
	ck_assert(fabs(arch_alibi_slope(4, 6, 4.0) - sqrt(0.5)) < 1e-16);
}
END_TEST

/* arch_flag_cb answering from a NULL-terminated list of true keys. */
static int flags_cb(const char *suffix, void *data)
{
	const char *const *set = data;

	for (; *set; set++)
		if (strcmp(*set, suffix) == 0)
			return 1;
	return 0;
}

START_TEST(falcon_with_use_alibi_selects_falcon_rw)
{
	static const char *const alibi[] = {"use_alibi", NULL}, *const none[] = {NULL};
	const struct arch_desc *rw = arch_select("falcon", 6, flags_cb, (void *)alibi);
	const struct arch_desc *plain = arch_select("falcon", 6, flags_cb, (void *)none);

	ck_assert_ptr_nonnull(rw);
	ck_assert_str_eq(rw->name, "falcon-rw");
	ck_assert_str_eq(rw->gguf_arch, "falcon");
	ck_assert_int_eq(rw->alibi, ARCH_ALIBI_BF16);
	ck_assert_int_eq(rw->rope, ARCH_ROPE_NONE);
	ck_assert_int_eq(rw->residual, ARCH_RESIDUAL_SEQUENTIAL);
	ck_assert_int_eq(rw->act, ARCH_ACT_GELU_ERF);
	ck_assert_int_eq(rw->tensors[ARCH_T_FFN_NORM], ARCH_REQ);
	ck_assert_ptr_nonnull(plain);
	ck_assert_str_eq(plain->name, "falcon");
	ck_assert_int_eq(plain->alibi, ARCH_ALIBI_NONE);
	ck_assert_ptr_eq(arch_select("falcon", 6, NULL, NULL), plain);
	ck_assert_ptr_eq(arch_find("falcon-rw", 9), rw);
}
END_TEST

START_TEST(select_ignores_flags_of_other_architectures_and_unknown_names)
{
	static const char *const alibi[] = {"use_alibi", NULL};
	const struct arch_desc *a = arch_select("llama", 5, flags_cb, (void *)alibi);

	ck_assert_ptr_nonnull(a);
	ck_assert_str_eq(a->name, "llama");
	ck_assert_ptr_null(arch_select("falcon-rw", 9, flags_cb, (void *)alibi));
	ck_assert_ptr_null(arch_select("falco", 5, NULL, NULL));
	ck_assert_ptr_null(arch_find("falcon-r", 8));
}
END_TEST

START_TEST(every_row_is_named_and_alibi_rows_have_no_rotary)
{
	const char *const *names = arch_names();
	int n = 0;

	for (; *names; names++, n++) {
		const struct arch_desc *a = arch_find(*names, strlen(*names));

		ck_assert_msg(a != NULL, "%s is listed but not in the table", *names);
		ck_assert_ptr_nonnull(a->gguf_arch);
		ck_assert(a->alibi == ARCH_ALIBI_NONE || a->rope == ARCH_ROPE_NONE);
	}
	ck_assert_int_eq(n, 11);
}
END_TEST

/* Gemma 2 slides on even layers, Gemma 3 on five of each six. */
START_TEST(sliding_layer_patterns)
{
	const struct arch_desc *g2 = arch_find("gemma2", 6), *g3 = arch_find("gemma3", 6);
	const struct arch_desc *ll = arch_find("llama", 5);
	uint32_t il;

	ck_assert_ptr_nonnull(g2);
	ck_assert_ptr_nonnull(g3);
	for (il = 0; il < 24; il++) {
		ck_assert_int_eq(arch_layer_is_swa(g2, il), il % 2 == 0);
		ck_assert_int_eq(arch_layer_is_swa(g3, il), il % 6 != 5);
		ck_assert_int_eq(arch_layer_is_swa(ll, il), 0);
	}
}
END_TEST

Suite *suite_arch(void)
{
	Suite *s = suite_create("arch");
	TCase *tc = tcase_create("table");

	tcase_add_test(tc, alibi_slopes_for_a_power_of_two_halve_every_two_heads_of_four);
	tcase_add_test(tc, alibi_slopes_for_six_heads_interleave_the_next_power);
	tcase_add_test(tc, alibi_slopes_for_twelve_heads_use_odd_half_powers);
	tcase_add_test(tc, alibi_slopes_for_thirty_two_heads_step_by_a_fourth_root);
	tcase_add_test(tc, alibi_max_bias_scales_the_exponent);
	tcase_add_test(tc, falcon_with_use_alibi_selects_falcon_rw);
	tcase_add_test(tc, select_ignores_flags_of_other_architectures_and_unknown_names);
	tcase_add_test(tc, every_row_is_named_and_alibi_rows_have_no_rotary);
	tcase_add_test(tc, sliding_layer_patterns);
	suite_add_tcase(s, tc);
	return s;
}
