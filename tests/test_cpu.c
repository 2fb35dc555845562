/* test_cpu.c - feature detection and the EMBER_CPU override. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "testutil.h"

START_TEST(env_override_lowers_but_never_raises)
{
	struct cpu_features f = {0};

#if !defined(__x86_64__)
	return; /* x86-64's levels; AArch64's: test_neon.c */
#endif

	f.avx2 = 1;
	unsetenv("EMBER_CPU");
	ck_assert_int_eq(cpu_select_level(&f), CPU_LEVEL_AVX2);
	setenv("EMBER_CPU", "scalar", 1);
	ck_assert_int_eq(cpu_select_level(&f), CPU_LEVEL_SCALAR);
	setenv("EMBER_CPU", "avx512", 1); /* the CPU lacks it: stay at AVX2 */
	ck_assert_int_eq(cpu_select_level(&f), CPU_LEVEL_AVX2);
	setenv("EMBER_CPU", "bogus", 1);
	ck_assert_int_eq(cpu_level_from_env(), -2);
	ck_assert_int_eq(cpu_select_level(&f), CPU_LEVEL_AVX2);
	unsetenv("EMBER_CPU");
	ck_assert_int_eq(cpu_level_from_env(), -1);
}
END_TEST

static void cpu__select_all(void *data)
{
	struct cpu_features f;

	memset(&f, 0xff, sizeof(f));
	*(enum cpu_level *)data = cpu_select_level(&f);
}

/* An EMBER_CPU naming no level of this architecture is not silent: one
 * line names the variable and the levels it may name; a good one says
 * nothing. */
START_TEST(unknown_cap_is_said_and_ignored)
{
	const enum cpu_level *list;
	const size_t n = cpu_levels(&list);
	enum cpu_level got;
	char said[256];

	setenv("EMBER_CPU", "bogus", 1);
	test_stderr_of(cpu__select_all, &got, said, sizeof(said));
	ck_assert_int_eq(got, list[n - 1]);
	ck_assert_msg(strstr(said, "ember: EMBER_CPU=bogus: want one of scalar, ") == said, "%s",
		      said);
	ck_assert_ptr_nonnull(strstr(said, cpu_level_name(list[n - 1])));
	/* another architecture's level */
	setenv("EMBER_CPU", n > 1 && list[1] == CPU_LEVEL_NEON ? "avx2" : "neon", 1);
	test_stderr_of(cpu__select_all, &got, said, sizeof(said));
	ck_assert_int_eq(got, list[n - 1]);
	ck_assert_ptr_nonnull(strstr(said, "ember: EMBER_CPU="));
	setenv("EMBER_CPU", "scalar", 1);
	test_stderr_of(cpu__select_all, &got, said, sizeof(said));
	ck_assert_int_eq(got, CPU_LEVEL_SCALAR);
	ck_assert_str_eq(said, "");
	unsetenv("EMBER_CPU");
}
END_TEST

START_TEST(avx512_needs_vnni)
{
	struct cpu_features f = {0};

#if !defined(__x86_64__)
	return; /* x86-64's levels; AArch64's: test_neon.c */
#endif

	f.avx2 = 1;
	f.avx512 = 1;
	unsetenv("EMBER_CPU");
	ck_assert_int_eq(cpu_select_level(&f), CPU_LEVEL_AVX2);
	f.avx512_vnni = 1;
	ck_assert_int_eq(cpu_select_level(&f), CPU_LEVEL_AVX512);
}
END_TEST

/* The caps follow this architecture's list: a name from another one is
 * ignored, and AMX needs its own features on top of AVX-512's. */
START_TEST(caps_follow_the_level_list)
{
	struct cpu_features f;
	const enum cpu_level *list;
	size_t n = cpu_levels(&list);

	ck_assert_int_ge(n, 1);
	ck_assert_int_eq(list[0], CPU_LEVEL_SCALAR);
	memset(&f, 0xff, sizeof(f));
	unsetenv("EMBER_CPU");
	ck_assert_int_eq(cpu_select_level(&f), list[n - 1]);
	for (size_t i = 0; i < n; i++) {
		setenv("EMBER_CPU", cpu_level_name(list[i]), 1);
		ck_assert_int_eq(cpu_select_level(&f), list[i]);
	}
#if defined(__x86_64__)
	setenv("EMBER_CPU", "neon", 1);
	ck_assert_int_eq(cpu_select_level(&f), CPU_LEVEL_AMX);
	ck_assert(!cpu_level_usable(&f, CPU_LEVEL_NEON));
	unsetenv("EMBER_CPU");
	f.amx = 0;
	ck_assert_int_eq(cpu_select_level(&f), CPU_LEVEL_AVX512);
	f.amx = 1;
	f.avx512_vnni = 0; /* AMX without the level below it: not usable */
	ck_assert(!cpu_level_usable(&f, CPU_LEVEL_AMX));
	ck_assert_int_eq(cpu_select_level(&f), CPU_LEVEL_AVX2);
#endif
	unsetenv("EMBER_CPU");
}
END_TEST

START_TEST(describe_lists_features)
{
	struct cpu_features f = {0};
	char buf[128];

	ck_assert_str_eq(cpu_describe(&f, buf, sizeof(buf)), "none (scalar kernels)");
	f.avx2 = 1;
	f.avx512 = 1;
	f.avx512_vnni = 1;
	ck_assert_str_eq(cpu_describe(&f, buf, sizeof(buf)), "AVX2 FMA F16C AVX-512 VNNI");
	cpu_describe(&f, buf, 6); /* truncates, stays terminated */
	ck_assert_uint_eq(strlen(buf), 5);
}
END_TEST

START_TEST(detect_matches_compiler_view)
{
	struct cpu_features f;

	cpu_detect(&f);
#if defined(__x86_64__)
	/* Every x86-64 CPU we build on in CI has at least SSE2; AVX2 we cannot
	 * promise, but AVX-512 without AVX2 would be a detection bug. */
	ck_assert(!(f.avx512 && !f.avx2));
	ck_assert_int_eq(f.neon, 0);
#elif defined(__aarch64__)
	ck_assert_int_eq(f.neon, 1);
#endif
}
END_TEST

Suite *suite_cpu(void)
{
	Suite *s = suite_create("cpu");
	TCase *tc = tcase_create("cpu");

	tcase_add_test(tc, env_override_lowers_but_never_raises);
	tcase_add_test(tc, avx512_needs_vnni);
	tcase_add_test(tc, unknown_cap_is_said_and_ignored);
	tcase_add_test(tc, describe_lists_features);
	tcase_add_test(tc, caps_follow_the_level_list);
	tcase_add_test(tc, detect_matches_compiler_view);
	suite_add_tcase(s, tc);
	return s;
}
