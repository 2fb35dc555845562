/* test_kernels.c - every kernel level against the scalar reference, the
 * block formats and the conversions: each kernel's results. The level
 * choice and the threaded driver are in test_kernels_driver.c. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "quants.h"
#include "testutil.h"

/* A SIMD result may differ from the reference only by float summation
 * order: |y - y_ref| <= KT_SUM_TOL * sum_i |w_i * x_i| (terms as the
 * kernel sees them: dequantized weights and activations). */
#define KT_SUM_TOL 1e-6
/* Q8_0 matmul against float math on dequantized weights: activation
 * quantization error is at most dx/2 per element, so per output
 * |y - y_float| <= sum_b (dx_b / 2) * sum_{i in b} |w_i| (+ KT_SUM_TOL);
 * and over a random matrix the relative RMS error stays below this: */
#define KT_Q8_REL_RMS 1e-2

static uint16_t kt_h(float f)
{
	return kern_fp32_to_fp16(f);
}

/* ---- conversions ------------------------------------------------------------ */

/* kern_act_summarize: each block's scale and 8 x the sum of its bytes
 * (the SSE2 form sums q ^ 0x80 as unsigned bytes), every byte value at
 * every position and the extremes whole, then zeros to the padding. */
START_TEST(act_summarize_sums_every_byte_value)
{
	enum { NB = 19 };
	struct kern_block_q8a x[NB];
	float xd[32];
	int32_t xs8[32];
	const size_t pad = kern_act_groups_pad(NB);

	ck_assert_uint_le(pad, 32);
	for (int v0 = -128; v0 < 128; v0 += 17) {
		for (size_t b = 0; b < NB; b++) {
			x[b].d = (float)b + 0.5f;
			for (int j = 0; j < KERN_QK; j++)
				x[b].qs[j] = (int8_t)(b == 0 ? -128
						      : b == 1 ? 127
								: (v0 + 37 * (int)b + 11 * j) % 256 - 128);
		}
		for (size_t i = 0; i < 32; i++) {
			xd[i] = -1.0f;
			xs8[i] = -1;
		}
		kern_act_summarize(x, NB, xd, xs8);
		for (size_t b = 0; b < NB; b++) {
			int32_t sum = 0;

			for (int j = 0; j < KERN_QK; j++)
				sum += x[b].qs[j];
			ck_assert_int_eq(xs8[b], 8 * sum);
			ck_assert(xd[b] == x[b].d);
		}
		for (size_t b = NB; b < pad; b++)
			ck_assert(xs8[b] == 0 && xd[b] == 0.0f);
	}
}
END_TEST

/* Block b's n elements at scale 1 (its maximum 127): each half-integer
 * of the rounding, the floats just below and above it, both signs, and
 * 0.49999997 (just under a half), -0.0: where a rounding rule or a sign
 * put back differs from the reference's. */
static void kt_fill_edges(float *v, int n, size_t b)
{
	v[0] = 127.0f;
	for (int j = 1; j < n; j++) {
		float h = (float)((b * 7 + (size_t)j * 13) % 127) + 0.5f;
		float e = (j % 3 == 0)	 ? nextafterf(h, 0.0f)
			  : (j % 3 == 1) ? h
					 : nextafterf(h, 200.0f);
		v[j] = j % 2 ? -e : e;
	}
	v[1] = 0.49999997f;
	v[2] = -0.49999997f;
	v[3] = -0.0f;
}

/* Every level's activation quantizer against the reference byte for
 * byte: rows of 1..67 blocks (the avx512 level's 16-block folds and its
 * one-block tail), each block at its own scale (2^-10..2^9: a misplaced
 * block maximum changes its d and bytes), a zero block (d = 0), and
 * blocks at scale 1 (an element 127: d = 1) holding the rounding's
 * edges: every half-integer, its float neighbours, and the float just
 * under 0.5, both signs. */
static void kt_check_quantize_level(enum cpu_level level)
{
	static const size_t blocks[] = {1, 15, 16, 17, 33, 67};
	const struct kern_ops *ops = kern_ops_for(level);
	float x[67 * KERN_QK];
	struct kern_block_q8a y[67], yr[67];

	if (!kern_level_runs(level))
		return;
	for (size_t bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
		const size_t nb = blocks[bi];

		test_kern_fill(x, nb * KERN_QK, 1.0f);
		for (size_t b = 0; b < nb; b++) {
			float *v = x + b * KERN_QK;

			if (b % 5 == 3) { /* scale 1: the rounding's edges */
				kt_fill_edges(v, KERN_QK, b);
			} else if (b % 5 == 4) {
				for (int j = 0; j < KERN_QK; j++)
					v[j] = 0.0f;
			} else if (b % 7 == 2) {
				/* a NaN (as a broken activation would carry) in
				 * either half: byte 0, the block's scale from the
				 * other elements, as fmaxf() leaves it */
				for (int j = 0; j < KERN_QK; j++)
					v[j] = ldexpf(v[j], (int)(b % 20) - 10);
				v[b % KERN_QK] = NAN;
			} else {
				for (int j = 0; j < KERN_QK; j++)
					v[j] = ldexpf(v[j], (int)(b % 20) - 10);
			}
		}
		memset(y, 0x5a, sizeof(y));
		memset(yr, 0x5a, sizeof(yr));
		kern_ops_ref.quantize_act(x, yr, nb * KERN_QK);
		ops->quantize_act(x, y, nb * KERN_QK);
		for (size_t b = 0; b < nb; b++)
			ck_assert_msg(memcmp(&y[b], &yr[b], sizeof(y[b])) == 0,
				      "%s quantize_act %zu blocks: block %zu differs", ops->name, nb,
				      b);
	}
}

/* The K-quants' activations (kern_block_q8_k: one scale a 256-element
 * super-block, the sums of each 16) the same way: rows of 1..9
 * super-blocks, each at its own scale (a misplaced maximum changes d),
 * a zero one, one at scale 1 with the rounding's edges, one with a NaN
 * (dropped from the maximum as fmaxf() drops it; its byte 0), one whose
 * maximum is negative. */
static void kt_check_quantize_q8k_level(enum cpu_level level)
{
	static const size_t sbs[] = {1, 2, 3, 9};
	const struct kern_ops *ops = kern_ops_for(level);
	float x[9 * KERN_QKK];
	struct kern_block_q8_k y[9], yr[9];

	if (!kern_level_runs(level) || ops->quantize_act_q8k == NULL)
		return;
	for (size_t si = 0; si < sizeof(sbs) / sizeof(sbs[0]); si++) {
		const size_t ns = sbs[si];

		test_kern_fill(x, ns * KERN_QKK, 1.0f);
		for (size_t b = 0; b < ns; b++) {
			float *v = x + b * KERN_QKK;

			for (int j = 0; j < KERN_QKK; j++)
				v[j] = ldexpf(v[j], (int)(b * 3 % 20) - 10);
			if (b % 4 == 1) { /* scale 1: the rounding's edges */
				kt_fill_edges(v, KERN_QKK, b);
			} else if (b % 4 == 2) {
				/* the maximum in the NaN's lane, before it */
				v[106] = -ldexpf(100.0f, (int)(b * 3 % 20) - 10);
				v[130] = NAN;
			} else if (b == 3) {
				memset(v, 0, KERN_QKK * sizeof(float));
			}
		}
		memset(y, 0x5a, sizeof(y));
		memset(yr, 0x5a, sizeof(yr));
		kern_quantize_act_q8k(x, yr, ns * KERN_QKK);
		ops->quantize_act_q8k(x, y, ns * KERN_QKK);
		for (size_t b = 0; b < ns; b++)
			ck_assert_msg(memcmp(&y[b], &yr[b], sizeof(y[b])) == 0,
				      "%s quantize_act_q8k %zu super-blocks: %zu differs", ops->name,
				      ns, b);
	}
}

START_TEST(act_quantize_matches_reference_on_every_level)
{
	kt_check_quantize_level(CPU_LEVEL_AVX2);
	kt_check_quantize_level(CPU_LEVEL_AVX512);
	kt_check_quantize_level(CPU_LEVEL_NEON);
	kt_check_quantize_level(CPU_LEVEL_DOTPROD);
	kt_check_quantize_q8k_level(CPU_LEVEL_AVX2);
	kt_check_quantize_q8k_level(CPU_LEVEL_AVX512);
	kt_check_quantize_q8k_level(CPU_LEVEL_NEON);
	kt_check_quantize_q8k_level(CPU_LEVEL_DOTPROD);
}
END_TEST

START_TEST(fp16_edge_cases_round_to_nearest_even)
{
	ck_assert_uint_eq(kt_h(0.0f), 0x0000);
	ck_assert_uint_eq(kt_h(-0.0f), 0x8000);
	ck_assert_uint_eq(kt_h(1.0f), 0x3c00);
	ck_assert_uint_eq(kt_h(65504.0f), 0x7bff);
	ck_assert_uint_eq(kt_h(65519.99f), 0x7bff);
	ck_assert_uint_eq(kt_h(65520.0f), 0x7c00); /* tie goes to even: inf */
	ck_assert_uint_eq(kt_h(INFINITY), 0x7c00);
	ck_assert_uint_eq(kt_h(-INFINITY), 0xfc00);
	ck_assert_uint_eq(kt_h(1e10f), 0x7c00);
	ck_assert_uint_eq(kt_h(NAN) & 0x7c00, 0x7c00);
	ck_assert_uint_ne(kt_h(NAN) & 0x03ff, 0);
	ck_assert_uint_eq(kt_h(1.0f + 0x1p-11f), 0x3c00);        /* tie: even below */
	ck_assert_uint_eq(kt_h(1.0f + 3 * 0x1p-11f), 0x3c02);    /* tie: even above */
	ck_assert_uint_eq(kt_h(0x1p-14f), 0x0400);               /* smallest normal */
	ck_assert_uint_eq(kt_h(0x1p-24f), 0x0001);               /* smallest subnormal */
	ck_assert_uint_eq(kt_h(0x1p-25f), 0x0000);               /* tie: even is zero */
	ck_assert_uint_eq(kt_h(1.5f * 0x1p-25f), 0x0001);
	ck_assert_uint_eq(kt_h(3 * 0x1p-25f), 0x0002);           /* tie: 1.5 -> 2 */
	ck_assert_uint_eq(kt_h(-5 * 0x1p-25f), 0x8002);          /* tie: 2.5 -> 2 */
	ck_assert_uint_eq(kt_h(0x1p-14f - 0x1p-25f), 0x0400);    /* rounds up to normal */
	ck_assert(isnan(kern_fp16_to_fp32(0x7e00)));
	ck_assert(isinf(kern_fp16_to_fp32(0xfc00)) && kern_fp16_to_fp32(0xfc00) < 0);
	ck_assert(kern_fp16_to_fp32(0x0001) == 0x1p-24f);
	ck_assert(kern_fp16_to_fp32(0x83ff) == -1023 * 0x1p-24f);
	ck_assert(kern_fp16_to_fp32(0x7bff) == 65504.0f);
}
END_TEST

START_TEST(fp16_round_trips_every_value)
{
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = kern_fp16_to_fp32((uint16_t)h);
		if (isnan(f))
			ck_assert(isnan(kern_fp16_to_fp32(kt_h(f))));
		else
			ck_assert_uint_eq(kt_h(f), h);
	}
}
END_TEST

#ifdef __FLT16_MAX__
/* The compiler's _Float16 conversion (round to nearest even) is an
 * independent oracle for every float exponent. */
START_TEST(fp16_matches_compiler_conversion)
{
	for (uint64_t u = 0; u < 0x100000000ull; u += 4099) {
		uint32_t b = (uint32_t)u;
		float f;
		_Float16 h;
		uint16_t want;

		memcpy(&f, &b, sizeof(f));
		if (isnan(f))
			continue;
		h = (_Float16)f;
		memcpy(&want, &h, sizeof(want));
		ck_assert_msg(kt_h(f) == want, "bits %08x: got %04x want %04x", b, kt_h(f), want);
	}
}
END_TEST
#endif

START_TEST(bf16_edge_cases_round_to_nearest_even)
{
	float f;
	uint32_t b;

#define KT_BF(bits) (b = (bits), memcpy(&f, &b, 4), kern_fp32_to_bf16(f))
	ck_assert_uint_eq(KT_BF(0x3f800000), 0x3f80);
	ck_assert_uint_eq(KT_BF(0x3f808000), 0x3f80); /* tie: even below */
	ck_assert_uint_eq(KT_BF(0x3f818000), 0x3f82); /* tie: even above */
	ck_assert_uint_eq(KT_BF(0x3f808001), 0x3f81);
	ck_assert_uint_eq(KT_BF(0x7f7fffff), 0x7f80); /* FLT_MAX overflows to inf */
	ck_assert_uint_eq(KT_BF(0xff800000), 0xff80);
	ck_assert_uint_eq(KT_BF(0x00018000), 0x0002); /* subnormal tie: kept, even */
	ck_assert_uint_eq(KT_BF(0x00008000), 0x0000);
	ck_assert_uint_eq(KT_BF(0x80000000), 0x8000);
	ck_assert_uint_eq(KT_BF(0x7f800001) & 0x7fc0, 0x7fc0); /* sNaN stays NaN */
	ck_assert_uint_eq(KT_BF(0xffc00000), 0xffc0);
#undef KT_BF
	ck_assert(kern_bf16_to_fp32(0x3fc0) == 1.5f);
	ck_assert(isnan(kern_bf16_to_fp32(0x7fc1)));
	for (uint32_t h = 0; h < 0x10000; h++) {
		float v = kern_bf16_to_fp32((uint16_t)h);
		if (!isnan(v))
			ck_assert_uint_eq(kern_fp32_to_bf16(v), h);
	}
}
END_TEST

/* ---- quantization ------------------------------------------------------------ */

START_TEST(q8_0_block_follows_reference_rule)
{
	float x[KERN_QK] = {1.0f, -0.5f, 0.25f, 0.5f / 127.0f};
	struct kern_block_q8_0 b;

	ck_assert_int_eq(kern_quantize_row(DTYPE_Q8_0, x, &b, KERN_QK), 0);
	ck_assert_uint_eq(b.d, kt_h(1.0f / 127.0f));
	ck_assert_int_eq(b.qs[0], 127);
	ck_assert_int_eq(b.qs[1], -64); /* -63.5 rounds away from zero */
	ck_assert_int_eq(b.qs[2], 32);  /* 31.75 */
	ck_assert_int_eq(b.qs[4], 0);
}
END_TEST

START_TEST(q4_0_block_maps_signed_extreme_to_minus_8)
{
	float x[KERN_QK] = {0};
	struct kern_block_q4_0 b;

	x[0] = -2.0f;  /* max |x|: d = -2 / -8 = 0.25 */
	x[1] = 2.0f;   /* 8 + 8.5 -> clamped to 15 */
	x[2] = 0.125f; /* 0.5 + 8.5 = 9 */
	x[3] = 0.1f;   /* 8.9 -> 8 */
	x[16] = -1.0f; /* high nibble of byte 0: 4.5 -> 4 */
	ck_assert_int_eq(kern_quantize_row(DTYPE_Q4_0, x, &b, KERN_QK), 0);
	ck_assert_uint_eq(b.d, kt_h(0.25f));
	ck_assert_uint_eq(b.qs[0], 0x40);
	ck_assert_uint_eq(b.qs[1], 0x8f);
	ck_assert_uint_eq(b.qs[2], 0x89);
	ck_assert_uint_eq(b.qs[3], 0x88);
}
END_TEST

START_TEST(quantize_round_trip_within_format_bound)
{
	enum { N = 32 * 64 };
	float *x = test_alloc64(N * sizeof(float)), *y = test_alloc64(N * sizeof(float));
	struct kern_block_q8_0 *q8 = test_alloc64(N / 32 * 34);
	struct kern_block_q4_0 *q4 = test_alloc64(N / 32 * 18);

	test_kern_fill(x, N, 3.0f);
	for (size_t i = 0; i < 32; i++)
		x[32 * 5 + i] = 0.0f; /* an all-zero block: d = 0 */
	ck_assert_int_eq(kern_quantize_row(DTYPE_Q8_0, x, q8, N), 0);
	ck_assert_int_eq(kern_dequantize_row(DTYPE_Q8_0, q8, y, N), 0);
	for (size_t i = 0; i < N; i++) {
		float d = kern_fp16_to_fp32(q8[i / 32].d);
		int q = q8[i / 32].qs[i % 32];
		/* d/2, plus the fp16 rounding of the scale carried by q */
		float bound = d / 2 + (float)abs(q) * d * 0x1p-11f + 1e-7f;
		ck_assert_msg(fabsf(x[i] - y[i]) <= bound, "q8_0 %zu: %g vs %g", i, x[i], y[i]);
	}
	ck_assert_int_eq(kern_quantize_row(DTYPE_Q4_0, x, q4, N), 0);
	ck_assert_int_eq(kern_dequantize_row(DTYPE_Q4_0, q4, y, N), 0);
	for (size_t i = 0; i < N; i++) {
		float d = fabsf(kern_fp16_to_fp32(q4[i / 32].d));
		size_t j = i % 32;
		int nib = j < 16 ? q4[i / 32].qs[j] & 15 : q4[i / 32].qs[j - 16] >> 4;
		/* nibble 15 may hold the clamped opposite extreme (+8 -> +7) */
		float bound = (nib == 15 ? d : d / 2) + 8 * d * 0x1p-11f + 1e-7f;
		ck_assert_msg(fabsf(x[i] - y[i]) <= bound, "q4_0 %zu: %g vs %g", i, x[i], y[i]);
	}
	free(x);
	free(y);
	free(q8);
	free(q4);
}
END_TEST

START_TEST(unsupported_types_and_ragged_rows_are_refused)
{
	float x[32] = {0};
	uint8_t buf[256];

	ck_assert_int_eq(kern_supports(DTYPE_Q8_0), 1);
	ck_assert_int_eq(kern_supports(DTYPE_BF16), 1);
	ck_assert_int_eq(kern_supports(DTYPE_Q8_K), 0); /* an activation format only */
	ck_assert_int_eq(kern_supports(DTYPE_COUNT), 0);
	ck_assert_int_eq(kern_quantize_row(DTYPE_Q8_K, x, buf, 256), EMBER_EUNSUPPORTED);
	ck_assert_int_eq(kern_dequantize_row(DTYPE_Q6_K, buf, x, 32), EMBER_EINVAL);
	ck_assert_int_eq(kern_quantize_row(DTYPE_Q8_0, x, buf, 31), EMBER_EINVAL);
	ck_assert_int_eq(kern_quantize_row(99, x, buf, 32), EMBER_EINVAL);
	/* float weights need none, F16 / BF16 only the amx level's split
	 * tiles (kernels_amx_bf16.c: 8 tokens padded to 32, K three times
	 * n_in) */
	kern_init(); /* the level and the bf16 tiles' switch, read below */
#if defined(__x86_64__)
	const size_t f16 = kern_level() == CPU_LEVEL_AMX && kern_amxbf_on ? 32 * 4096 * 3 * 2 + 64 : 0;
#else
	const size_t f16 = 0; /* no bf16 tiles */
#endif
	ck_assert_uint_eq(kern_matmul_scratch(DTYPE_F32, 4096, 8), 0);
	ck_assert_uint_eq(kern_matmul_scratch(DTYPE_F16, 4096, 8), f16);
	ck_assert_uint_ge(kern_matmul_scratch(DTYPE_Q4_0, 4096, 8), 8 * 128 * 36);
	ck_assert_uint_eq(kern_matmul_scratch(DTYPE_Q4_0, 4096, 8) % 64, 0);
}
END_TEST

/* ---- every level against the reference ---------------------------------------- */

static const uint32_t kt_types[] = TEST_KERN_TYPES;

/* The activations the kernel sees, as floats (dequantized Q8 blocks for
 * quantized weights). */
static void kt_act_floats(uint32_t t, const void *xa, const float *x, size_t n_in, size_t n_tok,
			  float *out)
{
	if (!kern_wtype_quantized(t)) {
		memcpy(out, x, n_in * n_tok * sizeof(float));
		return;
	}
	const struct kern_block_q8a *b = xa;
	for (size_t i = 0; i < n_in / KERN_QK * n_tok; i++)
		for (int j = 0; j < KERN_QK; j++)
			out[i * KERN_QK + j] = (float)b[i].qs[j] * b[i].d;
}

static void kt_check_level(enum cpu_level level, uint32_t t, size_t n_out, size_t n_in,
			   size_t n_tok)
{
	const struct kern_ops *ops = kern_ops_for(level);
	float *wf, *x = test_alloc64(n_in * n_tok * sizeof(float));
	float *xf = test_alloc64(n_in * n_tok * sizeof(float));
	float *y = test_alloc64(n_out * n_tok * sizeof(float));
	float *yr = test_alloc64(n_out * n_tok * sizeof(float));
	size_t act_row = n_in / KERN_QK * sizeof(struct kern_block_q8a);
	uint8_t *xa = test_alloc64(act_row * n_tok + 1), *xa_ref = test_alloc64(act_row * n_tok + 1);
	void *w = test_kern_weights(t, n_out, n_in, &wf);
	float *xd = NULL;
	int32_t *xs8 = NULL;
	struct kern_gemm_args a = {
		.w = w,
		.w_stride = (size_t)dtype_row_size(t, n_in),
		.n_in = n_in,
		.n_tok = n_tok,
		.y_stride = n_out,
	};

	test_kern_fill(x, n_in * n_tok, 1.0f);
	if (kern_wtype_quantized(t)) {
		for (size_t k = 0; k < n_tok; k++) {
			kern_ops_ref.quantize_act(x + k * n_in,
						  (struct kern_block_q8a *)(xa_ref + k * act_row), n_in);
			ops->quantize_act(x + k * n_in, (struct kern_block_q8a *)(xa + k * act_row),
					  n_in);
		}
		ck_assert_msg(memcmp(xa, xa_ref, act_row * n_tok) == 0,
			      "%s: activation quantization differs from the reference", ops->name);
		a.x = xa;
		a.x_stride = act_row;
		a.xd_stride = kern_act_groups_pad(n_in / KERN_QK);
		xd = test_alloc64(a.xd_stride * n_tok * sizeof(float));
		xs8 = test_alloc64(a.xd_stride * n_tok * sizeof(int32_t));
		for (size_t k = 0; k < n_tok; k++)
			kern_act_summarize((const struct kern_block_q8a *)(xa + k * act_row),
					   n_in / KERN_QK, xd + k * a.xd_stride,
					   xs8 + k * a.xd_stride);
		a.xd = xd;
		a.xs8 = xs8;
	} else {
		a.x = x;
		a.x_stride = n_in * sizeof(float);
	}
	kt_act_floats(t, a.x, x, n_in, n_tok, xf);
	a.y = yr;
	kern_ops_ref.gemm[t](&a, 0, n_out);
	a.y = y;
	ck_assert_ptr_nonnull(ops->gemm[t]);
	ck_assert_ptr_nonnull(ops->gemv[t]);
	(n_tok == 1 ? ops->gemv[t] : ops->gemm[t])(&a, 0, n_out);
	for (size_t k = 0; k < n_tok; k++) {
		for (size_t o = 0; o < n_out; o++) {
			double scale = 0;
			for (size_t i = 0; i < n_in; i++)
				scale += fabs((double)wf[o * n_in + i] * xf[k * n_in + i]);
			double err = fabs((double)y[k * n_out + o] - yr[k * n_out + o]);
			ck_assert_msg(err <= KT_SUM_TOL * scale + 1e-30,
				      "%s %s out=%zu in=%zu tok=%zu [%zu][%zu]: %.9g vs ref %.9g",
				      ops->name, dtype_name(t), n_out, n_in, n_tok, k, o,
				      y[k * n_out + o], yr[k * n_out + o]);
		}
	}
	free(w);
	free(wf);
	free(x);
	free(xf);
	free(y);
	free(yr);
	free(xa);
	free(xa_ref);
	free(xd);
	free(xs8);
}

static void kt_check_level_all(enum cpu_level level)
{
	static const size_t outs[] = {1, 3, 5, 13, 16, 37}; /* 16: one full prefill tile */
	static const size_t toks[] = {1, 2, 3, 4, 5, 6, 7, 8, 16, 33, 64, 70};
	static const size_t ins_f[] = {1, 7, 37, 256};
	static const size_t ins_q[] = {32, 96, 288, 544};
	/* EMBER_TEST_QUICK (under qemu): still every type, the decode GEMV
	 * (1 token), rows and tokens below, at and past a 4x4 tile and ragged
	 * (3, 5, 37; 3, 7, 33), one block and an odd block count (288 = 9). */
	static const size_t outs_quick[] = {3, 16, 37};
	static const size_t toks_quick[] = {1, 3, 4, 7, 33};
	static const size_t ins_f_quick[] = {7, 37};
	static const size_t ins_q_quick[] = {32, 288};
	int quick = test_quick();
	size_t n_outs = quick ? 3 : 6, n_ins = quick ? 2 : 4;
	size_t n_toks = quick ? 5 : sizeof(toks) / sizeof(toks[0]);

	if (!kern_level_runs(level)) {
		fprintf(stderr, "kernels: skipping the %s level: this CPU lacks it\n",
			cpu_level_name(level));
		return;
	}
	for (size_t ti = 0; ti < sizeof(kt_types) / sizeof(kt_types[0]); ti++) {
		uint32_t t = kt_types[ti];
		const size_t *ins = kern_wtype_quantized(t) ? (quick ? ins_q_quick : ins_q)
							     : (quick ? ins_f_quick : ins_f);
		for (size_t a = 0; a < n_ins; a++)
			for (size_t b = 0; b < n_outs; b++)
				for (size_t c = 0; c < n_toks; c++)
					kt_check_level(level, t, (quick ? outs_quick : outs)[b],
						       ins[a], (quick ? toks_quick : toks)[c]);
	}
}

START_TEST(scalar_level_is_the_reference)
{
	kt_check_level_all(CPU_LEVEL_SCALAR);
}
END_TEST

START_TEST(avx2_level_matches_reference)
{
	kt_check_level_all(CPU_LEVEL_AVX2);
}
END_TEST

START_TEST(avx512_level_matches_reference)
{
	kt_check_level_all(CPU_LEVEL_AVX512);
}
END_TEST

/* The AArch64 levels (skipped elsewhere; tests/arm64/run_qemu.sh). */
START_TEST(arm_levels_match_reference)
{
	kt_check_level_all(CPU_LEVEL_NEON);
	kt_check_level_all(CPU_LEVEL_DOTPROD);
	kt_check_level_all(CPU_LEVEL_I8MM);
}
END_TEST

/* Skipped, with the reason printed, where AMX is not usable. */
START_TEST(amx_level_matches_reference)
{
	kt_check_level_all(CPU_LEVEL_AMX);
}
END_TEST

/* ---- vector helpers (attention) ------------------------------------------------ */

/* The gated SiLU against double math: the SIMD exp is within
 * KERN_EXP_REL_ERR, the division and products add a few float roundings;
 * the tails (n % 8) and the extremes (exp overflowing to +inf, NaN) go
 * through the same lanes. */
static void kt_check_silu_level(enum cpu_level level)
{
	static const size_t lens[] = {1, 7, 8, 9, 17, 131};
	const struct kern_ops *ops = kern_ops_for(level);

	if (!kern_level_runs(level))
		return;
	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		size_t n = lens[li];
		float g[131], y[131], y0[131];

		test_kern_fill(g, n, 12.0f);
		test_kern_fill(y0, n, 3.0f);
		g[0] = -200.0f; /* exp(200) is +inf: silu is -0 */
		if (n > 1)
			g[n - 1] = 95.0f;
		memcpy(y, y0, sizeof(y));
		ops->silu_mul(y, g, n);
		for (size_t i = 0; i < n; i++) {
			double want = (double)y0[i] * g[i] / (1.0 + exp(-(double)g[i]));
			ck_assert_msg(fabs(y[i] - want) <= 1e-6 * fabs(want) + 1e-30,
				      "%s silu_mul n=%zu [%zu]: g=%g y=%g: %.9g vs %.9g", ops->name,
				      n, i, g[i], y0[i], y[i], want);
		}
	}
	{
		float gn = NAN, yn = 1.0f;
		ops->silu_mul(&yn, &gn, 1);
		ck_assert_msg(isnan(yn), "%s silu_mul keeps NaN", ops->name);
	}
}

START_TEST(silu_matches_double_math_on_every_level)
{
	kt_check_silu_level(CPU_LEVEL_SCALAR);
	kt_check_silu_level(CPU_LEVEL_AVX2);
	kt_check_silu_level(CPU_LEVEL_AVX512);
	kt_check_silu_level(CPU_LEVEL_NEON);
}
END_TEST

/* ---- the quantized paths ------------------------------------------------------ */

START_TEST(q8_0_matmul_tracks_float_math_on_dequantized_weights)
{
	enum { OUT = 64, IN = 512, TOK = 3 };
	float *wf, *x = test_alloc64(IN * TOK * sizeof(float)), *y = test_alloc64(OUT * TOK * sizeof(float));
	void *w;
	double se = 0, sy = 0;

	/* The RMS bound is statistical: a fixed draw, whatever ran before
	 * (EMBER_TEST_QUICK changes how much the tests before draw). */
	test_kern_seed(0x9e3779b97f4a7c15ull);
	w = test_kern_weights(DTYPE_Q8_0, OUT, IN, &wf);
	kern_init();
	test_kern_fill(x, IN * TOK, 1.0f);
	test_kern_matmul(NULL, DTYPE_Q8_0, w, OUT, IN, x, TOK, y);
	for (size_t k = 0; k < TOK; k++) {
		for (size_t o = 0; o < OUT; o++) {
			double want = 0, bound = 0, scale = 0;
			for (size_t b = 0; b < IN / KERN_QK; b++) {
				const float *xb = x + k * IN + b * KERN_QK;
				const float *wb = wf + o * IN + b * KERN_QK;
				double amax = 0, wsum = 0;
				for (int j = 0; j < KERN_QK; j++) {
					want += (double)xb[j] * wb[j];
					amax = fmax(amax, fabs(xb[j]));
					wsum += fabs(wb[j]);
					scale += fabs((double)xb[j] * wb[j]);
				}
				bound += amax / 127.0 / 2 * wsum;
			}
			double err = fabs(y[k * OUT + o] - want);
			ck_assert_msg(err <= bound * (1 + 1e-4) + KT_SUM_TOL * scale,
				      "[%zu][%zu] %g vs %g (bound %g)", k, o, y[k * OUT + o], want, bound);
			se += err * err;
			sy += want * want;
		}
	}
	ck_assert_msg(sqrt(se / sy) < KT_Q8_REL_RMS, "relative RMS error %g", sqrt(se / sy));
	free(w);
	free(wf);
	free(x);
	free(y);
}
END_TEST

/* y = level's gemm (gemv for one token) on activations quantized by the
 * reference, for rows [0, n_out) and tokens [t0, t0 + n_tok) of x. */
static void kt_run_q(enum cpu_level level, uint32_t t, const void *w, size_t n_out, size_t n_in,
		     const uint8_t *xa, const float *xd, const int32_t *xs8, size_t t0, size_t n_tok,
		     float *y)
{
	const struct kern_ops *ops = kern_ops_for(level);
	size_t act_row = n_in / KERN_QK * sizeof(struct kern_block_q8a);
	size_t pad = kern_act_groups_pad(n_in / KERN_QK);
	struct kern_gemm_args a = {
		.w = w,
		.w_stride = (size_t)dtype_row_size(t, n_in),
		.n_in = n_in,
		.x = xa + t0 * act_row,
		.x_stride = act_row,
		.n_tok = n_tok,
		.y = y,
		.y_stride = n_out,
		.xd = xd + t0 * pad,
		.xs8 = xs8 + t0 * pad,
		.xd_stride = pad,
	};

	(n_tok == 1 ? ops->gemv[t] : ops->gemm[t])(&a, 0, n_out);
}

/* The quantized paths are integer dots then one fma per block in a fixed
 * order at the AVX2 and AVX-512 levels: their results are equal bit for
 * bit, and a token's result is the same alone as in any batch (the
 * small-batch tiles, the decode GEMV and the tail rows all agree). */
START_TEST(avx512_quantized_equals_avx2_bit_for_bit)
{
	static const size_t outs[] = {16, 37, 64};
	static const size_t ins[] = {32, 288, 2048, 4128}; /* 4128: 129 blocks, past a K-chunk */
	/* 23: two full panel groups, then a 7-token one (kernels_qvnni_avx512.c);
	 * 147, where AMX runs: a full 128-token pass of its tiles, a second
	 * pass and a token tail (kernels_amx.c) */
	static const size_t toks[] = {1, 2, 3, 4, 5, 8, 9, 15, 16, 17, 23, 33, 147};
	static const uint32_t types[] = {DTYPE_Q8_0, DTYPE_Q4_0};
	const int amx = kern_level_runs(CPU_LEVEL_AMX);
	const size_t n_toks = sizeof(toks) / sizeof(toks[0]) - (amx ? 0 : 1);

	if (!kern_level_runs(CPU_LEVEL_AVX512)) {
		fprintf(stderr, "kernels: skipping avx512 vs avx2: this CPU lacks avx512\n");
		return;
	}
	if (!amx) /* the AMX tiles must equal these bit for bit too */
		fprintf(stderr, "kernels: skipping amx vs avx512: no AMX usable here (CPUID, "
				"XCR0 or arch_prctl)\n");
	for (size_t ti = 0; ti < 2; ti++)
		for (size_t oi = 0; oi < 3; oi++)
			for (size_t ii = 0; ii < 4; ii++)
				for (size_t ki = 0; ki < n_toks; ki++) {
		uint32_t t = types[ti];
		size_t n_out = outs[oi], n_in = ins[ii], n_tok = toks[ki];
		size_t act_row = n_in / KERN_QK * sizeof(struct kern_block_q8a);
		size_t pad = kern_act_groups_pad(n_in / KERN_QK);
		float *wf, *x = test_alloc64(n_in * n_tok * sizeof(float));
		float *y2 = test_alloc64(n_out * n_tok * sizeof(float));
		float *y5 = test_alloc64(n_out * n_tok * sizeof(float));
		float *y1 = test_alloc64(n_out * sizeof(float));
		uint8_t *xa = test_alloc64(act_row * n_tok);
		float *xd = test_alloc64(pad * n_tok * sizeof(float));
		int32_t *xs8 = test_alloc64(pad * n_tok * sizeof(int32_t));
		void *w = test_kern_weights(t, n_out, n_in, &wf);

		test_kern_fill(x, n_in * n_tok, 1.0f);
		for (size_t k = 0; k < n_tok; k++) {
			struct kern_block_q8a *blk = (struct kern_block_q8a *)(xa + k * act_row);
			kern_ops_ref.quantize_act(x + k * n_in, blk, n_in);
			kern_act_summarize(blk, n_in / KERN_QK, xd + k * pad, xs8 + k * pad);
		}
		kt_run_q(CPU_LEVEL_AVX2, t, w, n_out, n_in, xa, xd, xs8, 0, n_tok, y2);
		kt_run_q(CPU_LEVEL_AVX512, t, w, n_out, n_in, xa, xd, xs8, 0, n_tok, y5);
		ck_assert_msg(memcmp(y2, y5, n_out * n_tok * sizeof(float)) == 0,
			      "%s out=%zu in=%zu tok=%zu: avx512 differs from avx2", dtype_name(t),
			      n_out, n_in, n_tok);
		if (amx) {
			kt_run_q(CPU_LEVEL_AMX, t, w, n_out, n_in, xa, xd, xs8, 0, n_tok, y2);
			ck_assert_msg(memcmp(y2, y5, n_out * n_tok * sizeof(float)) == 0,
				      "%s out=%zu in=%zu tok=%zu: amx differs from avx512",
				      dtype_name(t), n_out, n_in, n_tok);
		}
		kt_run_q(CPU_LEVEL_AVX512, t, w, n_out, n_in, xa, xd, xs8, n_tok - 1, 1, y1);
		ck_assert_msg(memcmp(y1, y5 + (n_tok - 1) * n_out, n_out * sizeof(float)) == 0,
			      "%s out=%zu in=%zu tok=%zu: last token alone differs", dtype_name(t),
			      n_out, n_in, n_tok);
		free(w);
		free(wf);
		free(x);
		free(y1);
		free(y2);
		free(y5);
		free(xa);
		free(xd);
		free(xs8);
	}
}
END_TEST
Suite *suite_kernels(void)
{
	Suite *s = suite_create("kernels");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, act_summarize_sums_every_byte_value);
	tcase_add_test(tc, act_quantize_matches_reference_on_every_level);
	tcase_add_test(tc, fp16_edge_cases_round_to_nearest_even);
	tcase_add_test(tc, fp16_round_trips_every_value);
#ifdef __FLT16_MAX__
	tcase_add_test(tc, fp16_matches_compiler_conversion);
#endif
	tcase_add_test(tc, bf16_edge_cases_round_to_nearest_even);
	tcase_add_test(tc, q8_0_block_follows_reference_rule);
	tcase_add_test(tc, q4_0_block_maps_signed_extreme_to_minus_8);
	tcase_add_test(tc, quantize_round_trip_within_format_bound);
	tcase_add_test(tc, unsupported_types_and_ragged_rows_are_refused);
	tcase_add_test(tc, scalar_level_is_the_reference);
	tcase_add_test(tc, avx2_level_matches_reference);
	tcase_add_test(tc, avx512_level_matches_reference);
	tcase_add_test(tc, arm_levels_match_reference);
	tcase_add_test(tc, amx_level_matches_reference);
	tcase_add_test(tc, silu_matches_double_math_on_every_level);
	tcase_add_test(tc, q8_0_matmul_tracks_float_math_on_dequantized_weights);
	tcase_add_test(tc, avx512_quantized_equals_avx2_bit_for_bit);
	suite_add_tcase(s, tc);
	return s;
}
