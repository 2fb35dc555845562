/*
 * test_amx_bf16.c - the AMX level's bf16 prefill GEMM (kernels_amx_bf16.c)
 * on any AVX-512 CPU with AVX512-BF16: the kernel file is compiled here
 * on the software tile model (amx_tile_model.h, TDPBF16PS as the ISA
 * reference states it), with its int8 row tail and the int8 dispatch of
 * kernels_amx.c on the same model.
 *   - the weight and activation tiles, bit for bit against a scalar
 *     statement of their layout and rounding;
 *   - the GEMM for shapes with row and token tails, K of one step to
 *     several chunks: against a float64 product of the bf16-rounded
 *     operands (1e-5 of sum |w x|: only the fp32 sums differ) and against
 *     the exact product of the dequantized weights and float activations
 *     (2^-7 of sum |w x|: bf16 rounding); rows of the tail equal avx512;
 *   - (the dispatch by token purpose: test_amx_split.c);
 *   - the start-up self-test passes on the model;
 *   - golden: the Q4_0 and Q8_0 golden files' logits with every prefill
 *     GEMM through this path are within 1.25x llama.cpp's distance of the
 *     exact dequantized reference (tests/test_quants.c's bound).
 */
#include <check.h>
#include <stdio.h>

#if defined(__x86_64__)
#include "amx_tile_model.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* every AMX symbol of the two files becomes this test's own */
#define kern_amx_gemm_q8_0 bfm_amx_gemm_q8_0
#define kern_amx_gemm_q4_0 bfm_amx_gemm_q4_0
#define kern_amx_i8_gemm_q8_0 bfm_amx_i8_gemm_q8_0
#define kern_amx_i8_gemm_q4_0 bfm_amx_i8_gemm_q4_0
#define kern_amx_pgemm_q8_0 bfm_amx_pgemm_q8_0
#define kern_amx_pgemm_q4_0 bfm_amx_pgemm_q4_0
#define kern_amx_gemm_q4_k bfm_amx_gemm_q4_k
#define kern_amx_gemm_q5_k bfm_amx_gemm_q5_k
#define kern_amx_gemm_q6_k bfm_amx_gemm_q6_k
#define kern_amx_pgemm_q4_k bfm_amx_pgemm_q4_k
#define kern_amx_pgemm_q5_k bfm_amx_pgemm_q5_k
#define kern_amx_pgemm_q6_k bfm_amx_pgemm_q6_k
#define kern_amxbf_gemm_q4_k bfm_amxbf_gemm_q4_k
#define kern_amxbf_gemm_q5_k bfm_amxbf_gemm_q5_k
#define kern_amxbf_gemm_q6_k bfm_amxbf_gemm_q6_k
#define kern_amxbf_pgemm_q4_k bfm_amxbf_pgemm_q4_k
#define kern_amxbf_pgemm_q5_k bfm_amxbf_pgemm_q5_k
#define kern_amxbf_pgemm_q6_k bfm_amxbf_pgemm_q6_k
#define kern_amxbf_pgemm_q8_0 bfm_amxbf_pgemm_q8_0
#define kern_amxbf_pgemm_q4_0 bfm_amxbf_pgemm_q4_0
#define kern_ops_amx bfm_ops_amx
#define kern_amx_enable bfm_amx_enable
#define kern_amxbf_gemm_q8_0 bfm_amxbf_gemm_q8_0
#define kern_amxbf_gemm_q4_0 bfm_amxbf_gemm_q4_0
#define kern_amxbf_on bfm_amxbf_on
#define kern_amxbf_min_tok bfm_amxbf_min_tok
#define kern_amxbf_act_row bfm_amxbf_act_row
#define kern_amxbf_b_tile bfm_amxbf_b_tile
#define kern_amxbf_enable bfm_amxbf_enable
#define kern_amxbf_selftest bfm_amxbf_selftest
#define kern_amxbf_scratch bfm_amxbf_scratch
#define kern_amxbf_tiles bfm_amxbf_tiles
#define kern_amxbf_describe bfm_amxbf_describe
#define kern_amxbf_gemm_f16 bfm_amxbf_gemm_f16
#define kern_amxbf_gemm_bf16 bfm_amxbf_gemm_bf16
#define kern_amxbf_glu bfm_amxbf_glu
#define kern_amxbf_glu_ok bfm_amxbf_glu_ok
#define kern_amxbf_glu_y bfm_amxbf_glu_y
#define kern_amx_prompt_args bfm_amx_prompt_args
/* both files' work memory through the model's failing hook */
#define AMX_ALLOC(n) model_alloc(n)
#define AMXBF_ALLOC(n) model_alloc(n)
/* the running sums' budget at the cases' token counts (1 MiB at 512 in
 * the library): blocks of 512 rows at 33 tokens, 320 at 70, 256 at 101,
 * so the cases below cross row blocks of several heights */
#define AMXBF_SUMS (128u << 10)
#include "kernels_amx.c"
#include "kernels_amx_bf16.c"
/* the library's own bf16 GEMM (real tiles), for AMX machines */
#undef kern_amxbf_gemm_q8_0
#undef kern_amxbf_gemm_q4_0
#undef kern_amxbf_on
#undef kern_amxbf_enable
void kern_amxbf_gemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amxbf_gemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
extern int kern_amxbf_on;
int kern_amxbf_enable(char *why, size_t len);

#include "ember.h"
#include "forward.h"
#include "model.h"
#include "testutil.h"
#include "amx_acts.h"

static float bfm_round(float f)
{
	return amxbf__round(f);
}

static uint16_t bfm_bits(float f)
{
	uint32_t u;

	f = bfm_round(f);
	memcpy(&u, &f, sizeof(u));
	return (uint16_t)(u >> 16);
}

/* The tiles' layouts and rounding, bit for bit. */
START_TEST(bf16_tiles_match_the_scalar_layout)
{
	uint32_t s = 99;

	if (!test_bf16_tiles_run("amx_bf16"))
		return;
	for (int ti = 0; ti < 2; ti++) {
		const uint32_t wt = ti ? DTYPE_Q4_0 : DTYPE_Q8_0;
		const size_t n_in = 96, row = (size_t)dtype_row_size(wt, n_in);
		uint8_t *w = amx_test_weights(wt, 16, n_in, &s);
		uint16_t bt[512] __attribute__((aligned(64)));
		float f[16][96];

		for (int n = 0; n < 16; n++)
			ck_assert_int_eq(kern_dequantize_row(wt, w + n * row, f[n], n_in), 0);
		for (size_t b = 0; b < 3; b++) {
			bfm_amxbf_b_tile(wt, (const char *)w, row, b, bt);
			for (int r = 0; r < 16; r++)
				for (int n = 0; n < 16; n++)
					for (int i = 0; i < 2; i++)
						ck_assert_msg(bt[r * 32 + 2 * n + i] ==
								      bfm_bits(f[n][32 * b + 2 * r + i]),
							      "%s block %zu: B row %d, weight row %d, %d",
							      dtype_name(wt), b, r, n, i);
		}
		free(w);
	}
	/* activations: 37 tokens (padding to 64), 96 inputs (3 steps) */
	{
		enum { T = 37, TP = 64, IN = 96, NS = IN / 32 };
		float *x = malloc(sizeof(float) * T * IN);
		uint16_t *xb = aligned_alloc(64, sizeof(uint16_t) * TP * IN);

		ck_assert(x && xb);
		memset(xb, 0xff, sizeof(uint16_t) * TP * IN);
		for (size_t i = 0; i < T * IN; i++)
			x[i] = ((float)(amx_selftest_rand(&s) % 200001) - 100000.0f) * 1.37e-5f;
		for (size_t t = 0; t < TP; t++)
			bfm_amxbf_act_row(t < T ? x + t * IN : NULL, IN, t, xb);
		for (size_t t = 0; t < TP; t++)
			for (size_t k = 0; k < IN; k++) {
				const uint16_t want = t < T ? bfm_bits(x[t * IN + k]) : 0;

				ck_assert_msg(xb[((t / 16) * NS + k / 32) * 512 + (t % 16) * 32 + k % 32] ==
						      want,
					      "activation tile: token %zu element %zu", t, k);
			}
		/* kern_matmul's placement: the next 64-byte boundary, padding zeroed */
		{
			char *raw = malloc(sizeof(uint16_t) * TP * IN + 128);
			const uint16_t *at;

			ck_assert_ptr_nonnull(raw);
			memset(raw, 0xff, sizeof(uint16_t) * TP * IN + 128);
			at = bfm_amxbf_tiles(raw + 1, IN, T);
			ck_assert((uintptr_t)at % 64 == 0 && (const char *)at >= raw + 1 &&
				  (const char *)at < raw + 65);
			for (size_t t = T; t < TP; t++)
				for (size_t k = 0; k < IN; k++)
					ck_assert(at[((t / 16) * NS + k / 32) * 512 + (t % 16) * 32 + k % 32] ==
						  0);
			free(raw);
		}
		free(x);
		free(xb);
	}
}
END_TEST

struct bfm_case {
	size_t n_out, o0, n_in, n_tok;
};

/* One shape: the bf16 GEMM (from xf, and from ready tiles xb: the same
 * bits) against both references; rows of the int8 tail equal avx512. */
static void bfm_check(uint32_t wt, const struct bfm_case *c, uint32_t *s, kern_gemm_fn g8,
		      kern_gemm_fn g4, float *y_out)
{
	const size_t n_out = c->n_out, n_in = c->n_in, n_tok = c->n_tok, nb = n_in / KERN_QK;
	const size_t pad = kern_act_groups_pad(nb), row = (size_t)dtype_row_size(wt, n_in);
	const size_t bf_end = c->o0 + (n_out - c->o0) / 16 * 16;
	uint8_t *w = amx_test_weights(wt, n_out, n_in, s);
	float *xf = malloc(sizeof(float) * n_tok * n_in), *wf = malloc(sizeof(float) * n_in);
	struct kern_block_q8a *x = malloc(sizeof(*x) * n_tok * nb);
	float *xd = malloc(sizeof(float) * n_tok * pad);
	int32_t *xs8 = malloc(sizeof(int32_t) * n_tok * pad);
	uint16_t *xb = aligned_alloc(64, sizeof(uint16_t) * kern_amxbf_tokens(n_tok) * n_in);
	float *y1 = calloc(n_tok * n_out, sizeof(float)), *y2 = calloc(n_tok * n_out, sizeof(float));
	float *y3 = calloc(n_tok * n_out, sizeof(float));

	ck_assert(xf && wf && x && xd && xs8 && xb && y1 && y2 && y3);
	for (size_t i = 0; i < n_tok * n_in; i++)
		xf[i] = ((float)(amx_selftest_rand(s) % 20001) - 10000.0f) * 1e-4f;
	for (size_t k = 0; k < n_tok; k++) {
		kern_ops_ref.quantize_act(xf + k * n_in, x + k * nb, n_in);
		kern_act_summarize(x + k * nb, nb, xd + k * pad, xs8 + k * pad);
	}
	for (size_t t = 0; t < kern_amxbf_tokens(n_tok); t++)
		bfm_amxbf_act_row(t < n_tok ? xf + t * n_in : NULL, n_in, t, xb);
	struct kern_gemm_args a = {
		.w = w, .w_stride = row, .n_in = n_in, .x = x, .x_stride = nb * sizeof(*x),
		.n_tok = n_tok, .y = y1, .y_stride = n_out, .xd = xd, .xs8 = xs8, .xd_stride = pad,
		.xf = xf, .xf_stride = n_in,
	};
	(wt == DTYPE_Q4_0 ? g4 : g8)(&a, c->o0, n_out);
	a.y = y3;
	a.xb = xb;
	(wt == DTYPE_Q4_0 ? g4 : g8)(&a, c->o0, n_out);
	a.y = y2;
	a.xb = NULL;
	(wt == DTYPE_Q4_0 ? kern_avx512_gemm_q4_0 : kern_avx512_gemm_q8_0)(&a, c->o0, n_out);
	ck_assert_msg(memcmp(y1, y3, sizeof(float) * n_tok * n_out) == 0,
		      "%s %zu x %zu x %zu: ready tiles (xb) differ from xf", dtype_name(wt), n_out,
		      n_in, n_tok);
	/* calls that cross row blocks: the same bits in 48-row calls (a
	 * row's sums never depend on its call's rows or blocks) */
	if (n_out - c->o0 > 256) {
		a.y = y3;
		a.xb = xb;
		memset(y3, 0, sizeof(float) * n_tok * n_out);
		for (size_t o = c->o0; o < n_out; o += 48)
			(wt == DTYPE_Q4_0 ? g4 : g8)(&a, o, n_out - o > 48 ? o + 48 : n_out);
		ck_assert_msg(memcmp(y1, y3, sizeof(float) * n_tok * n_out) == 0,
			      "%s %zu x %zu x %zu: 48-row calls differ from one call", dtype_name(wt),
			      n_out, n_in, n_tok);
	}
	for (size_t o = c->o0; o < n_out; o++) {
		ck_assert_int_eq(kern_dequantize_row(wt, w + o * row, wf, n_in), 0);
		for (size_t t = 0; t < n_tok; t++) {
			const float *xr = xf + t * n_in;
			const double got = y1[t * n_out + o];
			double rb = 0, re = 0, sa = 0;

			for (size_t j = 0; j < n_in; j++) {
				rb += (double)bfm_round(wf[j]) * bfm_round(xr[j]);
				re += (double)wf[j] * xr[j];
				sa += fabs((double)wf[j] * xr[j]);
			}
			if (o >= bf_end) {
				ck_assert_msg(got == y2[t * n_out + o],
					      "%s %zu x %zu x %zu: tail row %zu token %zu not int8's",
					      dtype_name(wt), n_out, n_in, n_tok, o, t);
				continue;
			}
			ck_assert_msg(fabs(got - rb) <= 1e-5 * sa + 1e-30,
				      "%s %zu x %zu x %zu: row %zu token %zu: %.9g vs bf16 reference %.9g "
				      "(sum |wx| %.3g)",
				      dtype_name(wt), n_out, n_in, n_tok, o, t, got, rb, sa);
			ck_assert_msg(fabs(got - re) <= 0x1p-7 * sa,
				      "%s %zu x %zu x %zu: row %zu token %zu: %.9g vs exact %.9g",
				      dtype_name(wt), n_out, n_in, n_tok, o, t, got, re);
		}
	}
	if (y_out)
		memcpy(y_out, y1, sizeof(float) * n_tok * n_out);
	free(w);
	free(xf);
	free(wf);
	free(x);
	free(xd);
	free(xs8);
	free(xb);
	free(y1);
	free(y2);
	free(y3);
}

/* ---- packed (tiled) rows at the amx level --------------------------------------- */

/* The B tile from a tiled group equals the file layout's, bit for bit. */
START_TEST(bf16_packed_tiles_equal_the_file_layouts)
{
	uint32_t s = 5;

	if (!test_bf16_tiles_run("amx_bf16"))
		return;
	for (int ti = 0; ti < 2; ti++) {
		const uint32_t wt = ti ? DTYPE_Q4_0 : DTYPE_Q8_0;
		const size_t n_in = 160, row = (size_t)dtype_row_size(wt, n_in);
		uint8_t *w = amx_test_weights(wt, 32, n_in, &s), *p = amx_test_packed(wt, w, 32, n_in);
		uint16_t bt[512] __attribute__((aligned(64))), bp[512] __attribute__((aligned(64)));

		for (size_t g = 0; g < 2; g++)
			for (size_t b = 0; b < n_in / 32; b++) {
				bfm_amxbf_b_tile(wt, (const char *)w + g * 16 * row, row, b, bt);
				memset(bp, 0xff, sizeof(bp));
				bfm_amxbf_b_tile(wt | KERN_PACKED, (const char *)p + g * 16 * row, 0, b,
						 bp);
				ck_assert_msg(memcmp(bt, bp, sizeof(bt)) == 0,
					      "%s group %zu block %zu: packed tile differs",
					      dtype_name(wt), g, b);
			}
		free(w);
		free(p);
	}
}
END_TEST

/* The amx level's table (this file's copy, on the model) on tiled rows
 * against its file-layout entries, bit for bit: pgemv vs gemv (1 token),
 * pgemm vs gemm with the bf16 tiles off (avx512's packed GEMM vs the int8
 * tiles) and on (bf16 tiles on packed vs file rows; from xf and from
 * ready tiles xb). Row ranges on 16-row groups (pool chunks of packed
 * rows), K across chunks of AMXBF_KC (512: 2112 has five, the middle
 * three folded into the running sums), token tails. A ragged row count is not
 * packed at all (kern_pack_type: n_out % 16; test_qpacked), so it runs
 * the file-layout gemm tested above. */
START_TEST(bf16_amx_level_packed_rows_equal_the_file_layout)
{
	static const struct bfm_case cases[] = {
		{16, 0, 64, 40},   {32, 0, 544, 64},  {48, 16, 1088, 33}, {176, 0, 288, 70},
		{64, 32, 32, 101}, {304, 16, 96, 20}, {96, 0, 544, 1},    {32, 16, 1056, 16},
		{48, 16, 2112, 37},
	};
	uint32_t s = 11;

	if (!test_bf16_tiles_run("amx_bf16"))
		return;
	model_products = 0;
	for (int ti = 0; ti < 2; ti++)
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			for (int on = 0; on < 2; on++)
				for (int usexb = 0; usexb < 2; usexb++) {
					const struct bfm_case *c = &cases[i];
					const uint32_t wt = ti ? DTYPE_Q4_0 : DTYPE_Q8_0;
					const size_t n_out = c->n_out, n_in = c->n_in, n_tok = c->n_tok;
					const size_t nb = n_in / KERN_QK, pad = kern_act_groups_pad(nb);
					const size_t row = (size_t)dtype_row_size(wt, n_in);
					uint8_t *w = amx_test_weights(wt, n_out, n_in, &s);
					uint8_t *p = amx_test_packed(wt, w, n_out, n_in);
					float *xf = malloc(sizeof(float) * n_tok * n_in);
					struct kern_block_q8a *x = malloc(sizeof(*x) * n_tok * nb);
					float *xd = malloc(sizeof(float) * n_tok * pad);
					int32_t *xs8 = malloc(sizeof(int32_t) * n_tok * pad);
					uint16_t *xb = aligned_alloc(
						64, sizeof(uint16_t) * kern_amxbf_tokens(n_tok) * n_in);
					float *y1 = calloc(n_tok * n_out, sizeof(float));
					float *y2 = calloc(n_tok * n_out, sizeof(float));

					ck_assert(xf && x && xd && xs8 && xb && y1 && y2);
					for (size_t k = 0; k < n_tok * n_in; k++)
						xf[k] = ((float)(amx_selftest_rand(&s) % 20001) - 10000.0f) * 1e-4f;
					for (size_t k = 0; k < n_tok; k++) {
						kern_ops_ref.quantize_act(xf + k * n_in, x + k * nb, n_in);
						kern_act_summarize(x + k * nb, nb, xd + k * pad,
								   xs8 + k * pad);
					}
					for (size_t t = 0; t < kern_amxbf_tokens(n_tok); t++)
						bfm_amxbf_act_row(t < n_tok ? xf + t * n_in : NULL, n_in, t,
								  xb);
					struct kern_gemm_args a = {
						.w = w, .w_stride = row, .n_in = n_in, .x = x,
						.x_stride = nb * sizeof(*x), .n_tok = n_tok, .y = y1,
						.y_stride = n_out, .xd = xd, .xs8 = xs8, .xd_stride = pad,
						.xf = xf, .xf_stride = n_in, .xb = usexb ? xb : NULL,
					};
					bfm_amxbf_on = on;
					(n_tok == 1 ? bfm_ops_amx.gemv : bfm_ops_amx.gemm)[wt](&a, c->o0,
											 n_out);
					a.w = p;
					a.y = y2;
					(n_tok == 1 ? bfm_ops_amx.pgemv : bfm_ops_amx.pgemm)[wt](&a, c->o0,
											   n_out);
					bfm_amxbf_on = 0;
					ck_assert_msg(memcmp(y1, y2, sizeof(float) * n_tok * n_out) == 0,
						      "%s %zu x %zu x %zu from %zu, bf16 %s%s: packed rows "
						      "differ from the file layout",
						      dtype_name(wt), n_out, n_in, n_tok, c->o0,
						      on ? "on" : "off", usexb ? " (xb)" : "");
					free(w);
					free(p);
					free(xf);
					free(x);
					free(xd);
					free(xs8);
					free(xb);
					free(y1);
					free(y2);
				}
	ck_assert(model_ok);
	ck_assert_int_gt(model_products, 0);
	/* the table packs as the avx512 level does */
	for (int ti = 0; ti < 2; ti++) {
		const uint32_t wt = ti ? DTYPE_Q4_0 : DTYPE_Q8_0;
		const struct kern_ops *v = kern_ops_for(CPU_LEVEL_AVX512);

		ck_assert_uint_eq(bfm_ops_amx.pack_rows[wt], v->pack_rows[wt]);
		ck_assert(bfm_ops_amx.pack_fn[wt] == v->pack_fn[wt]);
		ck_assert(bfm_ops_amx.pgemv[wt] == v->pgemv[wt]);
	}
}
END_TEST

/* n_out, o0 (a pool range off the 32-row grid), n_in, n_tok */
static const struct bfm_case bfm_cases[] = {
		{32, 0, 32, 32},    {64, 0, 64, 64},     {72, 0, 1088, 101}, {48, 16, 544, 33},
		{100, 0, 96, 16},   {40, 0, 2048, 70},   {32, 0, 512, 31},   {96, 32, 160, 1},
		{64, 0, 1056, 64},  {37, 5, 64, 47},     {80, 0, 544, 70},   {48, 0, 1088, 40},
		{16, 0, 64, 33},    {56, 16, 32, 64},    {176, 0, 544, 40},  {304, 16, 96, 20},
		{48, 0, 2112, 40},  {160, 0, 3136, 67},
		/* one 512-row block (AMXBF_SUMS) and one of 32, two K chunks */
		{560, 16, 544, 33},
		/* two 512-row blocks and one of 32; two 320-row blocks and one
		 * of 32, 70 tokens (not a multiple of 32) */
		{1072, 16, 544, 33},
		{688, 16, 544, 70},
};
#define BFM_N_CASES (sizeof(bfm_cases) / sizeof(bfm_cases[0]))

/* Row blocks as tall as the sums' budget allows (AMXBF_SUMS, here 128
 * KiB, shared by a call's parts), on 32-row groups, never under AMXBF_RB. */
START_TEST(bf16_row_blocks_fill_the_sums_budget)
{
	ck_assert_uint_eq(amxbf__rb_rows(32, 1), 1024);
	ck_assert_uint_eq(amxbf__rb_rows(64, 1), 512);
	ck_assert_uint_eq(amxbf__rb_rows(96, 1), 320);
	ck_assert_uint_eq(amxbf__rb_rows(128, 1), AMXBF_RB);
	ck_assert_uint_eq(amxbf__rb_rows(4096, 1), AMXBF_RB);
	/* a paired call (kern_amxbf_glu): the budget is both parts' */
	ck_assert_uint_eq(amxbf__rb_rows(32, 2), 512);
	ck_assert_uint_eq(amxbf__rb_rows(64, 2), AMXBF_RB);
}
END_TEST

START_TEST(bf16_gemm_matches_the_references)
{
	uint32_t s = 3;

	if (!test_bf16_tiles_run("amx_bf16"))
		return;
	model_products = 0;
	for (int ti = 0; ti < 2; ti++)
		for (size_t i = 0; i < BFM_N_CASES; i++)
			bfm_check(ti ? DTYPE_Q4_0 : DTYPE_Q8_0, &bfm_cases[i], &s, bfm_amxbf_gemm_q8_0,
				  bfm_amxbf_gemm_q4_0, NULL);
	ck_assert(model_ok);
	ck_assert_int_gt(model_products, 0);
}
END_TEST

/* On an AMX machine with the bf16 GEMM on: the real tiles against the
 * same references, and against the model (the ISA's stated order of the
 * fp32 sums; bit for bit expected, printed, not asserted beyond the
 * references' bound). Elsewhere: skipped with the reason. */
START_TEST(bf16_real_tiles_match_the_references_and_the_model)
{
	size_t same = 0, all = 0;
	double worst = 0;

	if (!test_bf16_tiles_run("amx_bf16"))
		return;
	if (!kern_level_runs(CPU_LEVEL_AMX)) {
		fprintf(stderr, "amx_bf16: skipping the real tiles: no usable AMX here\n");
		return;
	}
	if (!kern_amxbf_on) { /* EMBER_AMX_BF16=0 here: switch it on as the default does */
		char why[128];

		setenv("EMBER_AMX_BF16", "1", 1);
		if (kern_amxbf_enable(why, sizeof(why)) != 0) {
			unsetenv("EMBER_AMX_BF16");
			ck_abort_msg("amx_bf16: the real tiles' self-test: %s", why);
		}
		unsetenv("EMBER_AMX_BF16");
	}
	for (int ti = 0; ti < 2; ti++)
		for (size_t i = 0; i < BFM_N_CASES; i++) {
			const struct bfm_case *c = &bfm_cases[i];
			const size_t n = c->n_out * c->n_tok;
			float *yr = calloc(n, sizeof(float)), *ym = calloc(n, sizeof(float));
			uint32_t s1 = 77 + (uint32_t)i, s2 = 77 + (uint32_t)i;

			ck_assert(yr && ym);
			bfm_check(ti ? DTYPE_Q4_0 : DTYPE_Q8_0, c, &s1, kern_amxbf_gemm_q8_0,
				  kern_amxbf_gemm_q4_0, yr);
			bfm_check(ti ? DTYPE_Q4_0 : DTYPE_Q8_0, c, &s2, bfm_amxbf_gemm_q8_0,
				  bfm_amxbf_gemm_q4_0, ym);
			for (size_t k = 0; k < n; k++) {
				same += memcmp(yr + k, ym + k, sizeof(float)) == 0;
				worst = fmax(worst, fabs((double)yr[k] - ym[k]) /
							    fmax(fabs((double)ym[k]), 1e-30));
			}
			all += n;
			free(yr);
			free(ym);
		}
	printf("amx_bf16: real tiles vs the model: %zu of %zu outputs bit for bit, worst relative "
	       "difference %.3g\n",
	       same, all, worst);
}
END_TEST

/* Without its work memory the bf16 GEMM is the int8 path, bit for bit:
 * its own allocation failing (the int8 tiles then run), and every one
 * (avx512 then runs, no tile product); on tiled packed rows the avx512
 * level's packed GEMM, the same bits again. 48 rows (a 32-row group and
 * a 16), K over two chunks, a token tail. */
START_TEST(bf16_without_work_memory_is_the_int8_path)
{
	const size_t n_out = 48, n_in = 320, n_tok = 70, n = n_tok * n_out;
	static const int fails[] = {1, 1 << 20};
	uint32_t s = 23;

	if (!test_bf16_tiles_run("amx_bf16"))
		return;
	for (int ti = 0; ti < 2; ti++)
		for (size_t fi = 0; fi < 2; fi++) {
			const uint32_t wt = ti ? DTYPE_Q4_0 : DTYPE_Q8_0;
			uint8_t *w = amx_test_weights(wt, n_out, n_in, &s), *p = amx_test_packed(wt, w, n_out, n_in);
			float *y1 = calloc(n, sizeof(float)), *y2 = calloc(n, sizeof(float));
			float *y3 = calloc(n, sizeof(float));
			struct kern_gemm_args a = {
				.w = w, .w_stride = (size_t)dtype_row_size(wt, n_in), .y = y1,
				.y_stride = n_out,
			};
			struct amx_acts m;

			ck_assert(y1 && y2 && y3);
			amx_acts_make(&m, n_tok, n_in, &s, &a);
			model_products = 0;
			model_alloc_fails = fails[fi];
			(ti ? bfm_amxbf_gemm_q4_0 : bfm_amxbf_gemm_q8_0)(&a, 0, n_out);
			model_alloc_fails = 0;
			if (fi == 0)
				ck_assert_int_gt(model_products, 0); /* the int8 tiles ran */
			else
				ck_assert_int_eq(model_products, 0);
			a.y = y2;
			(ti ? kern_avx512_gemm_q4_0 : kern_avx512_gemm_q8_0)(&a, 0, n_out);
			ck_assert_msg(memcmp(y1, y2, sizeof(float) * n) == 0,
				      "%s, %d allocations failing: not the int8 path's bits",
				      dtype_name(wt), fails[fi]);
			a.y = y3;
			a.w = p;
			model_alloc_fails = fails[fi];
			(ti ? bfm_amxbf_pgemm_q4_0 : bfm_amxbf_pgemm_q8_0)(&a, 0, n_out);
			model_alloc_fails = 0;
			ck_assert_msg(memcmp(y3, y2, sizeof(float) * n) == 0,
				      "%s packed, %d allocations failing: not the int8 path's bits",
				      dtype_name(wt), fails[fi]);
			amx_acts_free(&m);
			free(w);
			free(p);
			free(y1);
			free(y2);
			free(y3);
		}
	ck_assert(model_ok);
}
END_TEST

START_TEST(bf16_startup_selftest_passes_on_the_model)
{
	if (!test_bf16_tiles_run("amx_bf16"))
		return;
	model_products = 0;
	ck_assert_int_eq(bfm_amxbf_selftest(), 0);
	ck_assert(model_ok);
	ck_assert_int_gt(model_products, 0);
}
END_TEST

/* On by default (only prompt rows take the tiles, so what is sampled
 * never depends on the batch or the prefix cache): unless
 * EMBER_AMX_BF16=0 the self-test runs (tile products at start-up) and
 * turns it on ("yes": refused with a note, the default); with 0 it stays
 * off and no self-test runs. */
START_TEST(bf16_on_unless_ember_amx_bf16_is_0)
{
	static const char *const on[] = {NULL, "1", "yes"};
	char why[128];

	if (!test_bf16_tiles_run("amx_bf16"))
		return;
	for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
		if (on[i])
			setenv("EMBER_AMX_BF16", on[i], 1);
		else
			unsetenv("EMBER_AMX_BF16");
		model_products = 0;
		bfm_amxbf_on = 0;
		ck_assert_int_eq(bfm_amxbf_enable(why, sizeof(why)), 0);
		ck_assert_int_eq(bfm_amxbf_on, 1);
		ck_assert_int_gt(model_products, 0);
		ck_assert_ptr_nonnull(strstr(bfm_amxbf_describe(), "bf16 tiles on prompt rows"));
	}
	setenv("EMBER_AMX_BF16", "0", 1);
	model_products = 0;
	ck_assert_int_eq(bfm_amxbf_enable(why, sizeof(why)), 1);
	unsetenv("EMBER_AMX_BF16");
	ck_assert_int_eq(bfm_amxbf_on, 0);
	ck_assert_int_eq(model_products, 0);
	ck_assert_ptr_nonnull(strstr(bfm_amxbf_describe(), "bf16 off"));
	ck_assert_ptr_nonnull(strstr(why, "EMBER_AMX_BF16=0"));
}
END_TEST

/* ---- golden: logits through the bf16 prefill -------------------------------------- */

#define BFG_DIR "../shared/golden/quants/"

static const char *const bfg_files[] = {"llama/Q4_0", "llama/Q8_0", "llama-256/Q4_0",
					"llama-256/Q8_0"};

/* Every row of a call as a prompt row (n_exact 0) on the modelled amx
 * dispatch: forward_eval's logits of every position are sampled rows,
 * int8, otherwise. */
static void bfg_gemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	struct kern_gemm_args r = *a;

	kern_act_ensure(a);
	r.n_exact = 0;
	r.xb = NULL; /* they would hold the bf16 tokens only */
	r.lazy = NULL;
	bfm_amx_gemm_q8_0(&r, o0, o1);
}

static void bfg_gemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	struct kern_gemm_args r = *a;

	kern_act_ensure(a);
	r.n_exact = 0;
	r.xb = NULL;
	r.lazy = NULL;
	bfm_amx_gemm_q4_0(&r, o0, o1);
}

/* test_bf16_golden_check's switch: every quantized GEMM of both types on
 * the modelled bf16 path (bfg_gemm_*), the rest as the level runs it. */
static void bfg_bf16(int on)
{
	static kern_gemm_fn old8, old4;

	if (on) {
		bfm_amxbf_on = 1;
		old8 = kern_test_set_gemm(DTYPE_Q8_0, bfg_gemm_q8_0);
		old4 = kern_test_set_gemm(DTYPE_Q4_0, bfg_gemm_q4_0);
		model_bf16_products = 0;
		return;
	}
	kern_test_set_gemm(DTYPE_Q8_0, old8);
	kern_test_set_gemm(DTYPE_Q4_0, old4);
	bfm_amxbf_on = 0;
	ck_assert_int_gt(model_bf16_products, 0); /* the bf16 tiles ran */
}

START_TEST(golden_logits_through_bf16_within_the_llamacpp_bound)
{
	static const struct test_bf16_golden g = {.suite = "amx_bf16", .dir = BFG_DIR,
						  .prefix = "", .width = 15, .own = "int8",
						  .bf16 = bfg_bf16};

	test_bf16_golden_check(&g, bfg_files[_i]);
}
END_TEST

Suite *suite_amx_bf16(void)
{
	Suite *s = suite_create("amx_bf16");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, bf16_tiles_match_the_scalar_layout);
	tcase_add_test(tc, bf16_row_blocks_fill_the_sums_budget);
	tcase_add_test(tc, bf16_gemm_matches_the_references);
	tcase_add_test(tc, bf16_real_tiles_match_the_references_and_the_model);
		tcase_add_test(tc, bf16_without_work_memory_is_the_int8_path);
	tcase_add_test(tc, bf16_startup_selftest_passes_on_the_model);
	tcase_add_test(tc, bf16_on_unless_ember_amx_bf16_is_0);
	tcase_add_test(tc, bf16_packed_tiles_equal_the_file_layouts);
	tcase_add_test(tc, bf16_amx_level_packed_rows_equal_the_file_layout);
	tcase_add_loop_test(tc, golden_logits_through_bf16_within_the_llamacpp_bound, 0,
			    (int)(sizeof(bfg_files) / sizeof(bfg_files[0])));
	suite_add_tcase(s, tc);
	return s;
}
#else
/* AArch64: no AMX level to model. */
START_TEST(bf16_needs_x86_64)
{
	fprintf(stderr, "amx_bf16: skipping: not an x86-64 build\n");
}
END_TEST

Suite *suite_amx_bf16(void)
{
	Suite *s = suite_create("amx_bf16");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, bf16_needs_x86_64);
	suite_add_tcase(s, tc);
	return s;
}
#endif
