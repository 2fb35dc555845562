/*
 * test_amx_model.c - the AMX level's blocking (kernels_amx.c: passes,
 * panels, repacked A tiles, four C tiles in flight, tails) checked on any
 * AVX-512 CPU: its tile instructions run on a software model of the tile
 * registers here, and the results must equal the AVX-512 level bit for
 * bit, as they must on AMX hardware (where test_kernels and the start-up
 * self-test run the real instructions). Without it CI, which has no AMX,
 * would never execute that code.
 *
 * The model (amx_tile_model.h): LDTILECFG's palette 1, TILELOADD,
 * TILESTORED, TILEZERO, TDPBSSD and TDPBF16PS as the ISA reference states
 * them. The bf16 dispatch stays off here (these calls carry no float
 * activations); test_amx_bf16.c runs the bf16 GEMM on the model.
 */
#include <check.h>
#include <stdio.h>

#if defined(__x86_64__)
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "amx_tile_model.h"

/* the library's own AMX symbols stay the library's */
#define kern_amx_gemm_q8_0 model_amx_gemm_q8_0
#define kern_amx_gemm_q4_0 model_amx_gemm_q4_0
#define kern_amx_i8_gemm_q8_0 model_amx_i8_gemm_q8_0
#define kern_amx_i8_gemm_q4_0 model_amx_i8_gemm_q4_0
#define kern_amx_pgemm_q8_0 model_amx_pgemm_q8_0
#define kern_amx_pgemm_q4_0 model_amx_pgemm_q4_0
#define kern_amx_gemm_q4_k model_amx_gemm_q4_k
#define kern_amx_gemm_q5_k model_amx_gemm_q5_k
#define kern_amx_gemm_q6_k model_amx_gemm_q6_k
#define kern_amx_pgemm_q4_k model_amx_pgemm_q4_k
#define kern_amx_pgemm_q5_k model_amx_pgemm_q5_k
#define kern_amx_pgemm_q6_k model_amx_pgemm_q6_k
#define kern_ops_amx model_ops_amx
#define kern_amx_enable model_amx_enable
#define kern_amx_prompt_args model_amx_prompt_args
/* the work memory through the model's failing hook */
#define AMX_ALLOC(n) model_alloc(n)
#include "kernels_amx.c"

/* The start-up self-test (its 40 x 4192 x 147 case crosses every
 * boundary) passes on the model. */
START_TEST(model_passes_the_startup_selftest)
{
	if (!kern_level_runs(CPU_LEVEL_AVX512)) {
		fprintf(stderr, "amx_model: skipping: this CPU lacks avx512\n");
		return;
	}
	model_products = 0;
	ck_assert_int_eq(amx__selftest(), 0);
	ck_assert(model_ok);
	ck_assert_int_gt(model_products, 0); /* the tiles ran, not only the fallback */
}
END_TEST

/* Without its work memory a call runs at the avx512 level: the
 * self-test's bit-for-bit comparison still holds, and no tile ran. */
START_TEST(model_without_work_memory_is_avx512)
{
	if (!kern_level_runs(CPU_LEVEL_AVX512)) {
		fprintf(stderr, "amx_model: skipping: this CPU lacks avx512\n");
		return;
	}
	model_products = 0;
	model_alloc_fails = 1 << 20;
	ck_assert_int_eq(amx__selftest(), 0);
	model_alloc_fails = 0;
	ck_assert_int_eq(model_products, 0);
	ck_assert(model_ok);
}
END_TEST

/* Row ranges that start off a 16-row group, K past two panels, token
 * counts of one group, a tail, passes and a tail: equal to avx512. */
START_TEST(model_equals_avx512_bit_for_bit)
{
	static const size_t outs[] = {16, 37, 64}, ins[] = {32, 288, 2048, 4128};
	static const size_t toks[] = {16, 17, 33, 147, 300};
	uint32_t s = 7;

	if (!kern_level_runs(CPU_LEVEL_AVX512)) {
		fprintf(stderr, "amx_model: skipping: this CPU lacks avx512\n");
		return;
	}
	for (int ti = 0; ti < 2; ti++)
		for (size_t oi = 0; oi < 3; oi++)
			for (size_t ii = 0; ii < 4; ii++)
				for (size_t ki = 0; ki < 5; ki++) {
		const uint32_t wt = ti ? DTYPE_Q4_0 : DTYPE_Q8_0;
		const size_t n_out = outs[oi], n_in = ins[ii], n_tok = toks[ki], nb = n_in / KERN_QK;
		const size_t pad = kern_act_groups_pad(nb), row = (size_t)dtype_row_size(wt, n_in);
		const size_t bs = wt == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0)
						   : sizeof(struct kern_block_q4_0);
		const size_t o0 = oi == 1 ? 5 : 0; /* a range off the 16-row grid */
		uint8_t *w = malloc(row * n_out);
		struct kern_block_q8a *x = malloc(sizeof(*x) * n_tok * nb);
		float *xd = malloc(sizeof(float) * n_tok * pad);
		int32_t *xs8 = malloc(sizeof(int32_t) * n_tok * pad);
		float *y1 = calloc(n_tok * n_out, sizeof(float));
		float *y2 = calloc(n_tok * n_out, sizeof(float));

		ck_assert(w && x && xd && xs8 && y1 && y2);
		for (size_t i = 0; i < row * n_out; i++)
			w[i] = (uint8_t)amx_selftest_rand(&s);
		for (size_t i = 0; i < row * n_out / bs; i++) {
			uint16_t h = kern_fp32_to_fp16((float)(amx_selftest_rand(&s) % 1000 + 1) * 1e-4f);

			memcpy(w + i * bs, &h, sizeof(h));
		}
		for (size_t i = 0; i < n_tok * nb; i++) {
			x[i].d = (float)(amx_selftest_rand(&s) % 1000 + 1) * 1e-3f;
			for (int j = 0; j < KERN_QK; j++)
				x[i].qs[j] = (int8_t)(amx_selftest_rand(&s) % 255 - 127);
		}
		for (size_t k = 0; k < n_tok; k++)
			kern_act_summarize(x + k * nb, nb, xd + k * pad, xs8 + k * pad);
		struct kern_gemm_args a = {
			.w = w, .w_stride = row, .n_in = n_in, .x = x,
			.x_stride = nb * sizeof(*x), .n_tok = n_tok, .y = y1, .y_stride = n_out,
			.xd = xd, .xs8 = xs8, .xd_stride = pad,
		};
		(ti ? model_amx_gemm_q4_0 : model_amx_gemm_q8_0)(&a, o0, n_out);
		a.y = y2;
		(ti ? kern_avx512_gemm_q4_0 : kern_avx512_gemm_q8_0)(&a, o0, n_out);
		ck_assert_msg(memcmp(y1, y2, sizeof(float) * n_tok * n_out) == 0,
			      "%s out=%zu in=%zu tok=%zu: the AMX blocking differs from avx512",
			      dtype_name(wt), n_out, n_in, n_tok);
		free(w);
		free(x);
		free(xd);
		free(xs8);
		free(y1);
		free(y2);
	}
	ck_assert(model_ok);
}
END_TEST

Suite *suite_amx_model(void)
{
	Suite *s = suite_create("amx_model");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, model_passes_the_startup_selftest);
	tcase_add_test(tc, model_without_work_memory_is_avx512);
	tcase_add_test(tc, model_equals_avx512_bit_for_bit);
	suite_add_tcase(s, tc);
	return s;
}
#else
/* AArch64: no AMX level to model. */
START_TEST(model_needs_x86_64)
{
	fprintf(stderr, "amx_model: skipping: not an x86-64 build\n");
}
END_TEST

Suite *suite_amx_model(void)
{
	Suite *s = suite_create("amx_model");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, model_needs_x86_64);
	suite_add_tcase(s, tc);
	return s;
}
#endif
