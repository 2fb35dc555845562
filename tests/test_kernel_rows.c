/* test_kernel_rows.c - the row kernels of kernels.h at every level
 * against the reference, bit for bit: the norms (kern_norm_rows), the
 * F32 -> F16 rows of the KV cache stores (kern_fp32_to_fp16_row) and the
 * avx512 gated SiLU against the avx2 one; and the prompt rows' exp-sum
 * (kern_exp_sum_prompt) within its bound of float64. Levels this CPU
 * cannot run are skipped. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"
#include "testutil.h"

static uint64_t kr_rng = 0x2545f4914f6cdd1dull;

/* Uniform in [-1, 1) times scale, with an occasional 8x outlier. */
static void kr_fill(float *x, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++) {
		float u = (float)(test_rand(&kr_rng) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
		x[i] = u * scale * ((test_rand(&kr_rng) & 63) == 0 ? 8.0f : 1.0f);
	}
}

/* kern_norm_rows at `level` gives the reference's bits: RMS and layer
 * norms, with and without bias and residual, in place, 1..4 rows, widths
 * with and without a vector tail; and a batch of rows equals the rows
 * one at a time (a batched decode step equals its single steps). */
static void kr_check_norm_level(enum cpu_level level)
{
	static const uint32_t widths[] = {1, 3, 8, 13, 64, 2051};
	const struct kern_ops *ops = kern_ops_for(level);
	enum { W = 2051, R = KERN_NORM_ROWS };

	if (!kern_level_runs(level))
		return;
	for (size_t wi = 0; wi < sizeof(widths) / sizeof(widths[0]); wi++)
		for (int mode = 0; mode < 8; mode++) {
			const uint32_t d = widths[wi];
			const int center = mode & 1, use_bias = mode & 2, use_add = mode & 4;
			static float x0[R * W], add[R * W], gain[W], bias[W];
			static float xa[R * W], xb[R * W], xc[R * W], oa[R * W], ob[R * W], oc[R * W];
			struct kern_norm nm = {gain, use_bias ? bias : NULL, 1e-5, d, center};

			kr_fill(x0, (size_t)R * d, 4.0f);
			kr_fill(add, (size_t)R * d, 2.0f);
			kr_fill(gain, d, 1.5f);
			kr_fill(bias, d, 0.5f);
			x0[0] = -0.0f; /* -0 * scale + 0: +0 in both */
			for (size_t n = 1; n <= R; n++) {
				memcpy(xa, x0, sizeof(float) * n * d);
				memcpy(xb, x0, sizeof(float) * n * d);
				memcpy(xc, x0, sizeof(float) * n * d);
				kern_ops_ref.norm_rows(&nm, xa, use_add ? xa : NULL, use_add ? add : NULL,
						       oa, n);
				ops->norm_rows(&nm, xb, use_add ? xb : NULL, use_add ? add : NULL, ob, n);
				for (size_t r = 0; r < n; r++) /* one row a call, in place */
					ops->norm_rows(&nm, xc + r * d, use_add ? xc + r * d : NULL,
						       use_add ? add + r * d : NULL, xc + r * d, 1);
				memcpy(oc, xc, sizeof(float) * n * d);
				ck_assert_msg(memcmp(xa, xb, sizeof(float) * n * d) == 0,
					      "%s norm d=%u mode %d n=%zu: residual differs", ops->name,
					      d, mode, n);
				ck_assert_msg(memcmp(oa, ob, sizeof(float) * n * d) == 0,
					      "%s norm d=%u mode %d n=%zu: output differs", ops->name, d,
					      mode, n);
				ck_assert_msg(memcmp(oa, oc, sizeof(float) * n * d) == 0,
					      "%s norm d=%u mode %d n=%zu: in place, row by row differs",
					      ops->name, d, mode, n);
			}
		}
}

/* kern_fp32_to_fp16_row at every level: kern_fp32_to_fp16's bits for
 * every F16 value, the ties half way between neighbours and the floats
 * one ulp either side of them (both signs), NaNs, infinities, the
 * overflow edge, and a stride through all float bit patterns. */
static void kr_check_fp16_from_level(enum cpu_level level)
{
	enum { N = 1 << 16 };
	const struct kern_ops *ops = kern_ops_for(level);
	static float src[N];
	static uint16_t got[N];

	if (!kern_level_runs(level))
		return;
	for (int pass = 0; pass < 5; pass++) {
		for (uint32_t i = 0; i < N; i++) {
			uint32_t u;

			if (pass < 4) { /* a value, its upper tie, +-1 ulp of it */
				float a = kern_fp16_to_fp32((uint16_t)i);
				float b = kern_fp16_to_fp32((uint16_t)(i + 1));

				memcpy(&u, &a, 4);
				if (pass > 0 && isfinite(a) && isfinite(b) &&
				    (i & 0x7fff) != 0x7bff) {
					float t = (float)(((double)a + (double)b) / 2);
					memcpy(&u, &t, 4);
					u += (uint32_t)(pass - 2); /* -1, 0, +1 */
				}
			} else {
				u = i * 65521u + 12345u; /* a stride through all patterns */
			}
			memcpy(&src[i], &u, 4);
		}
		ops->fp16_from_row(src, got, N - pass); /* odd lengths: the tail too */
		for (uint32_t i = 0; i < N - (uint32_t)pass; i++)
			ck_assert_msg(got[i] == kern_fp32_to_fp16(src[i]),
				      "%s fp16_from_row pass %d [%u] %a: %04x vs %04x", ops->name,
				      pass, i, (double)src[i], got[i], kern_fp32_to_fp16(src[i]));
	}
}

START_TEST(fp16_from_row_equals_scalar_on_every_level)
{
	kr_check_fp16_from_level(CPU_LEVEL_SCALAR);
	kr_check_fp16_from_level(CPU_LEVEL_AVX2);
	kr_check_fp16_from_level(CPU_LEVEL_AVX512);
	kr_check_fp16_from_level(CPU_LEVEL_NEON);
}
END_TEST

START_TEST(norm_rows_equal_reference_on_every_level)
{
	kr_check_norm_level(CPU_LEVEL_SCALAR);
	kr_check_norm_level(CPU_LEVEL_AVX2);
	kr_check_norm_level(CPU_LEVEL_AVX512);
	kr_check_norm_level(CPU_LEVEL_NEON);
}
END_TEST

/* The avx512 SiLU runs the avx2 level's operations per lane: the same
 * bits, every length (tails), the clamps' edges, NaN and infinities. */
START_TEST(silu_avx512_equals_avx2_bit_for_bit)
{
	enum { N = 4099 };
	const struct kern_ops *a2 = kern_ops_for(CPU_LEVEL_AVX2), *a5 = kern_ops_for(CPU_LEVEL_AVX512);
	static float g[N], y0[N], ya[N], yb[N];
	static const float edges[] = {-110.0f, -109.99f, -89.0f, -88.7f, 88.7f, 89.0f, 95.0f,
				      -200.0f, 0.0f, -0.0f, 1e-30f, -1e-30f, INFINITY, -INFINITY, NAN};

	if (!kern_level_runs(CPU_LEVEL_AVX512)) {
		printf("kernels: skipping avx512 silu: this CPU lacks avx512\n");
		return;
	}
	kr_fill(g, N, 30.0f);
	kr_fill(y0, N, 3.0f);
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		g[i * 7] = edges[i];
	for (size_t n = 0; n <= 40; n++) {
		size_t len = n <= 33 ? n : N - (40 - n);

		memcpy(ya, y0, sizeof(ya));
		memcpy(yb, y0, sizeof(yb));
		a2->silu_mul(ya, g, len);
		a5->silu_mul(yb, g, len);
		ck_assert_msg(memcmp(ya, yb, sizeof(ya)) == 0, "silu avx512 vs avx2 differ, n=%zu", len);
	}
}
END_TEST

/* The prompt rows' exp-sum at each level that has one: every x[i] =
 * exp(x[i] - m) within KERN_PROMPT_REL_ERR of float64 (or below FLT_MIN
 * absolute), the sum within KERN_PROMPT_REL_ERR plus n float roundings,
 * every length 0..70 (tails), -inf gives 0, NaN stays NaN, untouched
 * past n. */
START_TEST(exp_sum_prompt_within_bound)
{
	enum { N = 70 };
	static const enum cpu_level levels[] = {CPU_LEVEL_AVX2, CPU_LEVEL_AVX512, CPU_LEVEL_NEON};

	for (size_t li = 0; li < sizeof(levels) / sizeof(levels[0]); li++) {
		const struct kern_ops *ops = kern_ops_for(levels[li]);
		float x0[N + 1], x[N + 1];

		if (!kern_level_runs(levels[li]) || !ops->exp_sum_prompt)
			continue;
		for (int pass = 0; pass < 200; pass++)
			for (size_t n = 0; n <= N; n++) {
				const float m = pass % 3 ? 3.5f : 0.0f;
				double want = 0.0, sum;

				kr_fill(x0, N + 1, pass % 2 ? 90.0f : 6.0f);
				for (size_t i = 0; i < N + 1; i++)
					x0[i] = x0[i] > 0.0f ? -x0[i] : x0[i]; /* scores - max */
				if (pass == 1 && n > 3) {
					x0[1] = -INFINITY;
					x0[2] = -103.5f;
				}
				memcpy(x, x0, sizeof(x));
				sum = ops->exp_sum_prompt(x, n, m);
				for (size_t i = 0; i < n; i++) {
					const double e = exp((double)x0[i] - (double)m);

					want += e;
					ck_assert_msg(fabs(x[i] - e) <= KERN_PROMPT_REL_ERR * e + 1.2e-38,
						      "%s exp_sum_prompt x=%g: %g vs %g", ops->name,
						      (double)x0[i], (double)x[i], e);
				}
				ck_assert_msg(fabs(sum - want) <=
						      (KERN_PROMPT_REL_ERR + n * 6e-8) * want + n * 1.2e-38,
					      "%s exp_sum_prompt n=%zu: sum %g vs %g", ops->name, n, sum,
					      want);
				ck_assert_msg(memcmp(&x[n], &x0[n], sizeof(float)) == 0,
					      "%s exp_sum_prompt wrote past n", ops->name);
			}
		x[0] = NAN;
		ck_assert(isnan(ops->exp_sum_prompt(x, 1, 0.0f)) && isnan(x[0]));
	}
}
END_TEST

Suite *suite_kernel_rows(void)
{
	Suite *s = suite_create("kernel_rows");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, norm_rows_equal_reference_on_every_level);
	tcase_add_test(tc, fp16_from_row_equals_scalar_on_every_level);
	tcase_add_test(tc, silu_avx512_equals_avx2_bit_for_bit);
	tcase_add_test(tc, exp_sum_prompt_within_bound);
	suite_add_tcase(s, tc);
	return s;
}
