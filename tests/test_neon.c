/*
 * test_neon.c - the AArch64 levels (neon, dotprod, i8mm): the level choice
 * from made-up HWCAP masks (on every host), and every NEON kernel against
 * the scalar reference (on AArch64, natively or under qemu-aarch64: `make
 * test-arm64` runs this at each level and CPU model).
 *
 * The quantized kernels of every NEON level are bit-exact with the
 * reference (quants_neon.h: exact integer sums, the reference's float
 * expression per block), so they are compared with memcmp, GEMV and GEMM,
 * for every weight type the level has, on random blocks (every byte random
 * but the fp16 scales). The float kernels (F32/F16/BF16, attention) sum in
 * another order and are held to a bound relative to sum |w x|.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "dtype.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "quants.h"
#include "testutil.h"

#define HW_ASIMD (1ul << 1)
#define HW_ASIMDDP (1ul << 20)
#define HW2_I8MM (1ul << 13)

/* Cortex-A53/A72: asimd only; A76/N1: + asimddp; N2/V1: + i8mm. */
START_TEST(hwcap_masks_decode_to_features)
{
	struct cpu_features f;

	cpu_features_from_hwcap(&f, HW_ASIMD | 0xf9, 0); /* fp, evtstrm, aes... */
	ck_assert(f.neon && !f.neon_dotprod && !f.neon_i8mm);
	cpu_features_from_hwcap(&f, HW_ASIMD | HW_ASIMDDP, 0);
	ck_assert(f.neon && f.neon_dotprod && !f.neon_i8mm);
	cpu_features_from_hwcap(&f, HW_ASIMD | HW_ASIMDDP, HW2_I8MM);
	ck_assert(f.neon && f.neon_dotprod && f.neon_i8mm);
	cpu_features_from_hwcap(&f, 0, HW2_I8MM); /* no Advanced SIMD: nothing */
	ck_assert(!f.neon && !f.neon_dotprod && !f.neon_i8mm);
	ck_assert(!f.avx2 && !f.avx512);
}
END_TEST

#if defined(__aarch64__)
static enum cpu_level tn_level_for(unsigned long hw, unsigned long hw2)
{
	struct cpu_features f;

	cpu_features_from_hwcap(&f, hw, hw2);
	return cpu_select_level(&f);
}

/* Each level needs the one before it: i8mm without dotprod stays neon. */
START_TEST(hwcap_masks_choose_the_level)
{
	unsetenv("EMBER_CPU");
	ck_assert_int_eq(tn_level_for(0, 0), CPU_LEVEL_SCALAR);
	ck_assert_int_eq(tn_level_for(HW_ASIMD, 0), CPU_LEVEL_NEON);
	ck_assert_int_eq(tn_level_for(HW_ASIMD | HW_ASIMDDP, 0), CPU_LEVEL_DOTPROD);
	ck_assert_int_eq(tn_level_for(HW_ASIMD | HW_ASIMDDP, HW2_I8MM), CPU_LEVEL_I8MM);
	ck_assert_int_eq(tn_level_for(HW_ASIMD, HW2_I8MM), CPU_LEVEL_NEON);
	setenv("EMBER_CPU", "dotprod", 1);
	ck_assert_int_eq(tn_level_for(HW_ASIMD | HW_ASIMDDP, HW2_I8MM), CPU_LEVEL_DOTPROD);
	ck_assert_int_eq(tn_level_for(HW_ASIMD, 0), CPU_LEVEL_NEON); /* never raises */
	setenv("EMBER_CPU", "avx2", 1); /* another architecture's name: ignored */
	ck_assert_int_eq(tn_level_for(HW_ASIMD | HW_ASIMDDP, 0), CPU_LEVEL_DOTPROD);
	setenv("EMBER_CPU", "scalar", 1);
	ck_assert_int_eq(tn_level_for(HW_ASIMD | HW_ASIMDDP, HW2_I8MM), CPU_LEVEL_SCALAR);
	unsetenv("EMBER_CPU");
}
END_TEST

/* kern_resolve() from made-up masks: the i8mm table takes Q8_0/Q4_0's GEMM
 * and its GEMV from dotprod; every other entry comes from the highest
 * level below that has it; an unresolved entry never stays NULL. */
START_TEST(resolve_follows_the_masks)
{
	struct cpu_features f;
	struct kern_ops ops;
	struct kern_origin org;

	cpu_features_from_hwcap(&f, HW_ASIMD | HW_ASIMDDP, HW2_I8MM);
	ck_assert_int_eq(kern_resolve(&f, CPU_LEVEL_I8MM, &ops, &org), CPU_LEVEL_I8MM);
	ck_assert_int_eq(org.gemm[DTYPE_Q4_0], CPU_LEVEL_I8MM);
	ck_assert(ops.gemv[DTYPE_Q4_0] == kern_ops_dotprod.gemm[DTYPE_Q4_0]);
	ck_assert_int_eq(org.gemm[DTYPE_Q4_K], CPU_LEVEL_DOTPROD);
	ck_assert_int_eq(org.gemm[DTYPE_F16], CPU_LEVEL_NEON);
	ck_assert_int_eq(org.silu_mul, CPU_LEVEL_NEON);
	ck_assert_int_eq(org.quantize_act, CPU_LEVEL_SCALAR);
	cpu_features_from_hwcap(&f, HW_ASIMD, 0);
	ck_assert_int_eq(kern_resolve(&f, CPU_LEVEL_I8MM, &ops, &org), CPU_LEVEL_NEON);
	ck_assert_int_eq(org.gemm[DTYPE_Q4_0], CPU_LEVEL_NEON);
	for (uint32_t t = 0; t < DTYPE_COUNT; t++)
		if (kern_supports(t))
			ck_assert(ops.gemm[t] && ops.gemv[t]);
}
END_TEST

static uint64_t tn_rng = 0x9e3779b97f4a7c15ull;

static void *tn_alloc(size_t n)
{
	void *p = test_alloc64(n);

	memset(p, 0, (n + 63) & ~(size_t)63);
	return p;
}

/* Byte offsets of each format's fp16 scales (-1: none), to keep them
 * finite and realistic; every other byte is random. */
static const struct tn_type {
	uint32_t t;
	int d_off, dmin_off;
} tn_types[] = {
	{DTYPE_Q8_0, 0, -1},   {DTYPE_Q4_0, 0, -1},   {DTYPE_Q4_1, 0, 2},   {DTYPE_Q5_0, 0, -1},
	{DTYPE_Q5_1, 0, 2},    {DTYPE_IQ4_NL, 0, -1}, {DTYPE_Q2_K, 80, 82}, {DTYPE_Q3_K, 108, -1},
	{DTYPE_Q4_K, 0, 2},    {DTYPE_Q5_K, 0, 2},    {DTYPE_Q6_K, 208, -1}, {DTYPE_IQ4_XS, 0, -1},
};

static void tn_put_half(uint8_t *p, float v)
{
	uint16_t h = kern_fp32_to_fp16(v);

	memcpy(p, &h, 2);
}

/* y (n_tok x n_out) from `level`'s gemm (gemv for one token) and the
 * reference's, on the same random weights and quantized activations. */
static void tn_check_q(enum cpu_level level, const struct tn_type *q, size_t n_out, size_t n_in,
		       size_t n_tok)
{
	const struct kern_ops *ops = kern_ops_for(level);
	size_t row = (size_t)dtype_row_size(q->t, n_in), bs = dtype_type_size(q->t);
	size_t act_row = n_in / KERN_QK * sizeof(struct kern_block_q8a);
	size_t pad = kern_act_groups_pad(n_in / KERN_QK);
	uint8_t *w = tn_alloc(row * n_out), *xa = tn_alloc(act_row * n_tok);
	float *x = tn_alloc(n_in * n_tok * sizeof(float));
	float *y = tn_alloc(n_out * n_tok * sizeof(float)), *yr = tn_alloc(n_out * n_tok * sizeof(float));
	float *xd = tn_alloc(pad * n_tok * sizeof(float));
	int32_t *xs8 = tn_alloc(pad * n_tok * sizeof(int32_t));
	struct kern_gemm_args a = {
		.w = w, .w_stride = row, .n_in = n_in, .x = xa, .x_stride = act_row,
		.n_tok = n_tok, .y_stride = n_out, .xd = xd, .xs8 = xs8, .xd_stride = pad,
	};

	for (size_t i = 0; i < row * n_out; i++)
		w[i] = (uint8_t)test_rand(&tn_rng);
	for (size_t b = 0; b < row * n_out / bs; b++) {
		float d = (float)(test_rand(&tn_rng) % 1000 + 1) * 1e-5f;
		tn_put_half(w + b * bs + q->d_off, (test_rand(&tn_rng) & 1) ? d : -d);
		if (q->dmin_off >= 0)
			tn_put_half(w + b * bs + q->dmin_off, (float)(test_rand(&tn_rng) % 1000) * 2e-5f);
	}
	for (size_t i = 0; i < n_in * n_tok; i++)
		x[i] = ((float)(test_rand(&tn_rng) & 0xffff) / 32768.0f - 1.0f) * ((test_rand(&tn_rng) & 31) ? 1 : 8);
	for (size_t k = 0; k < n_tok; k++) {
		struct kern_block_q8a *blk = (struct kern_block_q8a *)(xa + k * act_row);
		kern_ops_ref.quantize_act(x + k * n_in, blk, n_in);
		kern_act_summarize(blk, n_in / KERN_QK, xd + k * pad, xs8 + k * pad);
	}
	a.y = yr;
	kern_ops_ref.gemm[q->t](&a, 0, n_out);
	a.y = y;
	(n_tok == 1 ? ops->gemv[q->t] : ops->gemm[q->t])(&a, 0, n_out);
	for (size_t i = 0; i < n_out * n_tok; i++)
		ck_assert_msg(memcmp(&y[i], &yr[i], sizeof(float)) == 0,
			      "%s %s out=%zu in=%zu tok=%zu [%zu][%zu]: %.9g vs ref %.9g", ops->name,
			      dtype_name(q->t), n_out, n_in, n_tok, i / n_out, i % n_out, y[i], yr[i]);
	/* Rows [1, n_out) alone: a chunk boundary changes nothing. */
	if (n_out > 1) {
		memset(y, 0, n_out * n_tok * sizeof(float));
		(n_tok == 1 ? ops->gemv[q->t] : ops->gemm[q->t])(&a, 1, n_out);
		for (size_t k = 0; k < n_tok; k++)
			ck_assert(memcmp(y + k * n_out + 1, yr + k * n_out + 1,
					 (n_out - 1) * sizeof(float)) == 0);
	}
	free(w);
	free(xa);
	free(x);
	free(y);
	free(yr);
	free(xd);
	free(xs8);
}

static int tn_skip(enum cpu_level level)
{
	if (kern_level_runs(level))
		return 0;
	fprintf(stderr, "neon: skipping the %s level: this CPU lacks it\n", cpu_level_name(level));
	return 1;
}

static void tn_check_quantized(enum cpu_level level)
{
	static const size_t outs[] = {1, 3, 4, 9, 37};
	static const size_t toks[] = {1, 2, 3, 4, 5, 9};
	static const size_t ins_32[] = {32, 96, 288};
	static const size_t ins_256[] = {256, 768};
	const struct kern_ops *own = kern_ops_own(level);
	int tested = 0;

	if (tn_skip(level))
		return;
	for (size_t ti = 0; ti < sizeof(tn_types) / sizeof(tn_types[0]); ti++) {
		const struct tn_type *q = &tn_types[ti];
		int k_type = dtype_block(q->t) == KERN_QKK;
		const size_t *ins = k_type ? ins_256 : ins_32;
		size_t n_ins = k_type ? 2 : 3;

		/* Types this level has no kernel of come from the level below
		 * (tested there) or the reference. */
		if (own->gemm[q->t] == NULL)
			continue;
		for (size_t a = 0; a < n_ins; a++)
			for (size_t b = 0; b < sizeof(outs) / sizeof(outs[0]); b++)
				for (size_t c = 0; c < sizeof(toks) / sizeof(toks[0]); c++)
					tn_check_q(level, q, outs[b], ins[a], toks[c]);
		printf("neon: %s %s equals the scalar reference bit for bit\n", own->name,
		       dtype_name(q->t));
		tested++;
	}
	ck_assert_int_gt(tested, 0);
}

START_TEST(neon_quantized_equals_reference)
{
	tn_check_quantized(CPU_LEVEL_NEON);
}
END_TEST

START_TEST(dotprod_quantized_equals_reference)
{
	tn_check_quantized(CPU_LEVEL_DOTPROD);
}
END_TEST

START_TEST(i8mm_quantized_equals_reference)
{
	tn_check_quantized(CPU_LEVEL_I8MM);
}
END_TEST

/* F32/F16/BF16: |y - y_ref| <= 1e-5 * sum |w x| (another summation order). */
START_TEST(neon_float_matmul_matches_reference)
{
	static const uint32_t types[] = {DTYPE_F32, DTYPE_F16, DTYPE_BF16};
	static const size_t ins[] = {1, 7, 37, 256};
	const struct kern_ops *ops = kern_ops_for(CPU_LEVEL_NEON);

	if (tn_skip(CPU_LEVEL_NEON))
		return;
	for (size_t ti = 0; ti < 3; ti++)
		for (size_t ii = 0; ii < 4; ii++) {
			uint32_t t = types[ti];
			size_t n_in = ins[ii], n_out = 13, n_tok = 3;
			size_t row = (size_t)dtype_row_size(t, n_in);
			float *wf = tn_alloc(n_in * n_out * sizeof(float)), *x = tn_alloc(n_in * n_tok * 4);
			float *y = tn_alloc(n_out * n_tok * 4), *yr = tn_alloc(n_out * n_tok * 4);
			uint8_t *w = tn_alloc(row * n_out);
			struct kern_gemm_args a = {.w = w, .w_stride = row, .n_in = n_in, .x = x,
						   .x_stride = n_in * 4, .n_tok = n_tok, .y_stride = n_out};

			for (size_t i = 0; i < n_in * n_out; i++)
				wf[i] = (float)(test_rand(&tn_rng) & 0xffff) / 32768.0f - 1.0f;
			for (size_t i = 0; i < n_in * n_tok; i++)
				x[i] = (float)(test_rand(&tn_rng) & 0xffff) / 32768.0f - 1.0f;
			for (size_t o = 0; o < n_out; o++) {
				ck_assert_int_eq(kern_quantize_row(t, wf + o * n_in, w + o * row, n_in), 0);
				ck_assert_int_eq(kern_dequantize_row(t, w + o * row, wf + o * n_in, n_in), 0);
			}
			a.y = yr;
			kern_ops_ref.gemm[t](&a, 0, n_out);
			a.y = y;
			ops->gemm[t](&a, 0, n_out);
			for (size_t k = 0; k < n_tok; k++)
				for (size_t o = 0; o < n_out; o++) {
					double s = 0;
					for (size_t i = 0; i < n_in; i++)
						s += fabs((double)wf[o * n_in + i] * x[k * n_in + i]);
					ck_assert_msg(fabs((double)y[k * n_out + o] - yr[k * n_out + o]) <=
							      1e-5 * s + 1e-30,
						      "%s in=%zu [%zu][%zu]: %g vs %g", dtype_name(t), n_in,
						      k, o, y[k * n_out + o], yr[k * n_out + o]);
				}
			free(wf);
			free(x);
			free(y);
			free(yr);
			free(w);
		}
}
END_TEST

/* The gated SiLU on NEON (the kernels suite checks it too, but runs too
 * long under qemu): within 1e-6 of double math, tails, extremes, NaN. */
START_TEST(neon_silu_matches_double_math)
{
	const struct kern_ops *ops = kern_ops_for(CPU_LEVEL_NEON);
	float g[37], y[37], y0[37];

	if (tn_skip(CPU_LEVEL_NEON))
		return;
	for (size_t n = 1; n <= 37; n += 6) {
		for (size_t i = 0; i < n; i++) {
			g[i] = ((float)(test_rand(&tn_rng) & 0xffff) / 32768.0f - 1.0f) * 12.0f;
			y0[i] = y[i] = ((float)(test_rand(&tn_rng) & 0xffff) / 32768.0f - 1.0f) * 3.0f;
		}
		g[0] = -200.0f; /* exp(200) is +inf: silu is -0 */
		if (n > 1)
			g[n - 1] = 95.0f;
		y[0] = y0[0];
		ops->silu_mul(y, g, n);
		for (size_t i = 0; i < n; i++) {
			double want = (double)y0[i] * g[i] / (1.0 + exp(-(double)g[i]));
			ck_assert_msg(fabs(y[i] - want) <= 1e-6 * fabs(want) + 1e-30,
				      "silu_mul n=%zu [%zu]: %.9g vs %.9g", n, i, y[i], want);
		}
	}
	g[0] = NAN;
	y[0] = 1.0f;
	ops->silu_mul(y, g, 1);
	ck_assert(isnan(y[0]));
}
END_TEST
#endif

Suite *suite_neon(void)
{
	Suite *s = suite_create("neon");
	TCase *tc = tcase_create("neon");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, hwcap_masks_decode_to_features);
#if defined(__aarch64__)
	tcase_add_test(tc, hwcap_masks_choose_the_level);
	tcase_add_test(tc, resolve_follows_the_masks);
	tcase_add_test(tc, neon_quantized_equals_reference);
	tcase_add_test(tc, dotprod_quantized_equals_reference);
	tcase_add_test(tc, i8mm_quantized_equals_reference);
	tcase_add_test(tc, neon_float_matmul_matches_reference);
	tcase_add_test(tc, neon_silu_matches_double_math);
#endif
	suite_add_tcase(s, tc);
	return s;
}
