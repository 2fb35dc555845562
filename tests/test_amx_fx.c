/*
 * test_amx_fx.c - F16 and BF16 weights on the AMX bf16 prefill GEMM as
 * split products (amx_bf16_fx.h), on any AVX-512 CPU with AVX512-BF16:
 * kernels_amx.c and kernels_amx_bf16.c compiled here on the software tile
 * model (amx_tile_model.h), as test_amx_bf16.c does, and on AMX machines
 * the library's real tiles too.
 *   - the B tiles and activation rows bit for bit against a scalar
 *     statement of the split (hi = bf16(v), lo = bf16(v - hi));
 *   - the GEMM (row tails, token tails, K of one step to several chunks)
 *     within AMXFX_BOUND (2^-16 + 1e-5) of sum |w x| of a float64
 *     product of the exact weights and activations; the avx512 level's
 *     own distance printed beside it; a split without w_lo fails it;
 *   - sampled rows (n_exact) the avx512 level's bits; with the bf16 tiles
 *     off every row is;
 *   - the start-up self-test passes on the model and fails a wrong GEMM;
 *   - golden: the llama golden model stored as F16 and BF16, every
 *     prefill GEMM through the split, within 1e-5 x max of its logits on
 *     the avx512 path (tests/test_forward.c's TOL_SAME).
 */
#include <check.h>
#include <stdio.h>

#if defined(__x86_64__)
#include "amx_tile_model.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* every AMX symbol of the two files becomes this test's own */
#define kern_amx_gemm_q8_0 fxm_amx_gemm_q8_0
#define kern_amx_gemm_q4_0 fxm_amx_gemm_q4_0
#define kern_amx_i8_gemm_q8_0 fxm_amx_i8_gemm_q8_0
#define kern_amx_i8_gemm_q4_0 fxm_amx_i8_gemm_q4_0
#define kern_amx_gemm_q4_k fxm_amx_gemm_q4_k
#define kern_amx_gemm_q5_k fxm_amx_gemm_q5_k
#define kern_amx_gemm_q6_k fxm_amx_gemm_q6_k
#define kern_amx_pgemm_q4_k fxm_amx_pgemm_q4_k
#define kern_amx_pgemm_q5_k fxm_amx_pgemm_q5_k
#define kern_amx_pgemm_q6_k fxm_amx_pgemm_q6_k
#define kern_amx_pgemm_q8_0 fxm_amx_pgemm_q8_0
#define kern_amx_pgemm_q4_0 fxm_amx_pgemm_q4_0
#define kern_amxbf_gemm_q4_k fxm_amxbf_gemm_q4_k
#define kern_amxbf_gemm_q5_k fxm_amxbf_gemm_q5_k
#define kern_amxbf_gemm_q6_k fxm_amxbf_gemm_q6_k
#define kern_amxbf_pgemm_q4_k fxm_amxbf_pgemm_q4_k
#define kern_amxbf_pgemm_q5_k fxm_amxbf_pgemm_q5_k
#define kern_amxbf_pgemm_q6_k fxm_amxbf_pgemm_q6_k
#define kern_amxbf_pgemm_q8_0 fxm_amxbf_pgemm_q8_0
#define kern_amxbf_pgemm_q4_0 fxm_amxbf_pgemm_q4_0
#define kern_ops_amx fxm_ops_amx
#define kern_amx_enable fxm_amx_enable
#define kern_amxbf_gemm_q8_0 fxm_amxbf_gemm_q8_0
#define kern_amxbf_gemm_q4_0 fxm_amxbf_gemm_q4_0
#define kern_amxbf_on fxm_amxbf_on
#define kern_amxbf_act_row fxm_amxbf_act_row
#define kern_amxbf_b_tile fxm_amxbf_b_tile
#define kern_amxbf_enable fxm_amxbf_enable
#define kern_amxbf_selftest fxm_amxbf_selftest
#define kern_amxbf_scratch fxm_amxbf_scratch
#define kern_amxbf_tiles fxm_amxbf_tiles
#define kern_amxbf_describe fxm_amxbf_describe
#define kern_amxbf_gemm_f16 fxm_amxbf_gemm_f16
#define kern_amxbf_gemm_bf16 fxm_amxbf_gemm_bf16
#define kern_amxbf_glu fxm_amxbf_glu
#define kern_amxbf_glu_ok fxm_amxbf_glu_ok
#define kern_amxbf_glu_y fxm_amxbf_glu_y
#define kern_amx_prompt_args fxm_amx_prompt_args
#define AMX_ALLOC(n) model_alloc(n)
#define AMXBF_ALLOC(n) model_alloc(n)
#include "kernels_amx.c"
#include "kernels_amx_bf16.c"
/* the library's own (real tiles), for AMX machines */
#undef kern_amxbf_gemm_f16
#undef kern_amxbf_gemm_bf16
#undef kern_amxbf_on
void kern_amxbf_gemm_f16(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amxbf_gemm_bf16(const struct kern_gemm_args *a, size_t o0, size_t o1);
extern int kern_amxbf_on;

#include "ember.h"
#include "forward.h"
#include "gguf.h"
#include "model.h"
#include "testutil.h"

/* v's bf16 bits, nearest even (amxbf__round). */
static uint16_t fxm_bits(float v)
{
	uint32_t u;

	v = amxbf__round(v);
	memcpy(&u, &v, sizeof(u));
	return (uint16_t)(u >> 16);
}

/* The split of v: part 0 hi, 1 lo. */
static uint16_t fxm_part(float v, int lo)
{
	return lo ? fxm_bits(v - amxbf__round(v)) : fxm_bits(v);
}

static void fxm_acts(float *x, size_t n, uint32_t *s)
{
	for (size_t i = 0; i < n; i++)
		x[i] = ((float)(amx_selftest_rand(s) % 200001) - 100000.0f) * 1.37e-5f;
}

/* B tiles and activation rows, bit for bit: F16 [hi | hi | lo], BF16
 * [w | w]; activations [hi | lo | hi] / [hi | lo]. */
START_TEST(fx_tiles_and_rows_match_the_scalar_split)
{
	enum { IN = 96, TOK = 37 };
	uint32_t s = 5;

	if (!test_bf16_tiles_run("amx_fx"))
		return;
	for (int ti = 0; ti < 2; ti++) {
		const uint32_t wt = ti ? DTYPE_BF16 : DTYPE_F16;
		const size_t wd = amxfx_widen(wt), ns = IN / 32;
		/* F16: which part of w (0 hi, 1 lo) and of a each sub-step takes */
		static const int wpart[2][3] = {{0, 0, 1}, {0, 0, 0}}, apart[3] = {0, 1, 0};
		uint16_t w[16 * IN], bt[512] __attribute__((aligned(64)));
		float wf[16 * IN], x[TOK * IN];
		uint16_t *xb = aligned_alloc(64, 64 * IN * wd * sizeof(uint16_t));

		ck_assert_ptr_nonnull(xb);
		amx_selftest_weights16(wt, w, wf, 16 * IN, &s);
		for (size_t b = 0; b < ns * wd; b++) {
			const size_t st = b / wd, j = b % wd;

			amxfx_b_tile(wt, (const char *)w, IN * sizeof(uint16_t), b, bt);
			for (int r = 0; r < 16; r++)
				for (int n = 0; n < 16; n++)
					for (int i = 0; i < 2; i++) {
						const float v = wf[n * IN + 32 * st + 2 * r + i];

						ck_assert_msg(bt[r * 32 + 2 * n + i] ==
								      fxm_part(v, wpart[ti][j]),
							      "%s step %zu: B row %d, weight row %d, %d",
							      dtype_name(wt), b, r, n, i);
					}
		}
		fxm_acts(x, TOK * IN, &s);
		for (size_t t = 0; t < 64; t++)
			amxfx_act_row(wt, t < TOK ? x + t * IN : NULL, IN, t, xb);
		for (size_t t = 0; t < 64; t++)
			for (size_t b = 0; b < ns * wd; b++)
				for (int e = 0; e < 32; e++) {
					const uint16_t got =
						xb[((t / 16) * ns * wd + b) * 512 + (t % 16) * 32 + e];
					const float v = t < TOK ? x[t * IN + 32 * (b / wd) + e] : 0.0f;

					ck_assert_msg(got == fxm_part(v, apart[b % wd]),
						      "%s token %zu step %zu elem %d", dtype_name(wt), t,
						      b, e);
				}
		free(xb);
	}
}
END_TEST

/* The tile model's product of one output (row o of wf, token x) as the
 * split's K' steps [hi | hi | lo] x [hi | lo | hi] (BF16 [w | w] x [hi |
 * lo]), every step's B tile loaded: per K chunk of AMXBF_KS steps a sum
 * from zero in the model's order (TDPBF16PS: pair by pair, DAZ), the
 * chunks added in fp32 in order (amxbf__fold). */
static float fxm_tiles_ref(uint32_t wt, const float *wf, const float *x, size_t n_in)
{
	static const int wpart[2][3] = {{0, 0, 1}, {0, 0, 0}}, apart[3] = {0, 1, 0};
	const size_t wd = amxfx_widen(wt), nsteps = n_in / 32 * wd;
	float run = 0;

	for (size_t kc = 0; kc < nsteps; kc += AMXBF_KS) {
		float c = 0;

		for (size_t b = kc; b < nsteps && b < kc + AMXBF_KS; b++)
			for (int e = 0; e < 32; e++) {
				const size_t k = 32 * (b / wd) + (size_t)e;
				const uint16_t wb = fxm_part(wf[k], wpart[wt == DTYPE_BF16][b % wd]);
				const uint16_t ab = fxm_part(x[k], apart[b % wd]);

				c = tm_daz(tm_daz(c) + tm_bf16((const uint8_t *)&ab) *
							       tm_bf16((const uint8_t *)&wb));
			}
		run = kc == 0 ? c : run + c;
	}
	return run;
}

/* Each weight step's w_hi tile built once and kept in the tile registers
 * for the step after (amxfx_same_b, amxfx_panel_tile): the GEMM's bits
 * are those of every K' step loading its own [hi | hi | lo] tile, on
 * chunks that open at each sub-step (576 inputs: K' 54 = 16 + 16 + 16 +
 * 6, chunks opening at F16 sub-steps 0, 1, 2), both tile loops (32 + 16
 * rows) and a token tail. A tile kept at the wrong step, or not built
 * where a chunk opens on it, changes bits. */
START_TEST(fx_kept_b_tiles_are_every_step_loaded_bit_for_bit)
{
	enum { OUT = 48, IN = 576, TOK = 37 };
	uint32_t s = 53;

	if (!test_bf16_tiles_run("amx_fx"))
		return;
	for (int ti = 0; ti < 2; ti++) {
		const uint32_t wt = ti ? DTYPE_BF16 : DTYPE_F16;
		uint16_t *w = malloc(sizeof(uint16_t) * OUT * IN);
		float *wf = malloc(sizeof(float) * OUT * IN), *x = malloc(sizeof(float) * TOK * IN);
		float *y = malloc(sizeof(float) * TOK * OUT);
		struct kern_gemm_args a = {
			.w_stride = IN * sizeof(uint16_t), .n_in = IN, .x_stride = IN * sizeof(float),
			.n_tok = TOK, .y_stride = OUT, .xf_stride = IN,
		};

		ck_assert(w && wf && x && y);
		amx_selftest_weights16(wt, w, wf, OUT * IN, &s);
		fxm_acts(x, TOK * IN, &s);
		a.w = w;
		a.x = a.xf = x;
		a.y = y;
		model_products = 0;
		(ti ? fxm_amxbf_gemm_bf16 : fxm_amxbf_gemm_f16)(&a, 0, OUT);
		ck_assert_int_gt(model_products, 0);
		for (size_t o = 0; o < OUT; o++)
			for (size_t t = 0; t < TOK; t++) {
				const float r = fxm_tiles_ref(wt, wf + o * IN, x + t * IN, IN);

				ck_assert_msg(memcmp(&r, &y[t * OUT + o], sizeof(r)) == 0,
					      "%s row %zu token %zu: %a, every step loaded %a",
					      dtype_name(wt), o, t, (double)y[t * OUT + o], (double)r);
			}
		free(w);
		free(wf);
		free(x);
		free(y);
	}
	ck_assert(model_ok);
}
END_TEST

/* One shape: y = W x by gemm (rows [0, n_out)), against float64 of the
 * exact operands; returns the worst |y - ref| / sum |w x| (also of the
 * avx512 level's float GEMM in *avx). */
static double fxm_check(uint32_t wt, size_t n_out, size_t n_in, size_t n_tok, uint32_t *s,
			kern_gemm_fn gemm, double *avx)
{
	uint16_t *w = malloc(sizeof(uint16_t) * n_out * n_in);
	float *wf = malloc(sizeof(float) * n_out * n_in), *x = malloc(sizeof(float) * n_tok * n_in);
	float *y = malloc(sizeof(float) * n_tok * n_out), *y2 = malloc(sizeof(float) * n_tok * n_out);
	struct kern_gemm_args a = {
		.w_stride = n_in * sizeof(uint16_t), .n_in = n_in, .x_stride = n_in * sizeof(float),
		.n_tok = n_tok, .y_stride = n_out, .xf_stride = n_in,
	};
	double worst = 0;

	ck_assert(w && wf && x && y && y2);
	amx_selftest_weights16(wt, w, wf, n_out * n_in, s);
	fxm_acts(x, n_tok * n_in, s);
	a.w = w;
	a.x = a.xf = x;
	a.y = y;
	gemm(&a, 0, n_out);
	a.y = y2;
	(wt == DTYPE_F16 ? kern_avx512_gemm_f16 : kern_avx512_gemm_bf16)(&a, 0, n_out);
	*avx = 0;
	for (size_t o = 0; o < n_out; o++)
		for (size_t k = 0; k < n_tok; k++) {
			double r = 0, sa = 0;

			for (size_t j = 0; j < n_in; j++) {
				const double p = (double)wf[o * n_in + j] * x[k * n_in + j];

				r += p;
				sa += fabs(p);
			}
			worst = fmax(worst, fabs(y[k * n_out + o] - r) / fmax(sa, 1e-30));
			*avx = fmax(*avx, fabs(y2[k * n_out + o] - r) / fmax(sa, 1e-30));
		}
	free(w);
	free(wf);
	free(x);
	free(y);
	free(y2);
	return worst;
}

static const size_t fxm_cases[][3] = {
	/* n_out, n_in, n_tok: one step; row tail of 8; token tail; several
	 * K chunks (F16 K' = 3 n_in: 2048 -> 192 steps, 12 chunks) */
	{16, 32, 32}, {40, 96, 37}, {152, 576, 69}, {64, 2048, 33},
};

START_TEST(fx_gemm_within_bound_of_float64)
{
	uint32_t s = 17;

	if (!test_bf16_tiles_run("amx_fx"))
		return;
	model_products = 0;
	for (int ti = 0; ti < 2; ti++)
		for (size_t i = 0; i < sizeof(fxm_cases) / sizeof(fxm_cases[0]); i++) {
			const uint32_t wt = ti ? DTYPE_BF16 : DTYPE_F16;
			const size_t *c = fxm_cases[i];
			double avx, e = fxm_check(wt, c[0], c[1], c[2], &s,
						  ti ? fxm_amxbf_gemm_bf16 : fxm_amxbf_gemm_f16, &avx);

			printf("amx_fx: %s %zu x %zu x %zu: split tiles %.3g, avx512 %.3g of sum|w x| "
			       "(bound %.3g)\n",
			       dtype_name(wt), c[0], c[1], c[2], e, avx, AMXFX_BOUND);
			ck_assert_msg(e <= AMXFX_BOUND, "%s case %zu: %.3g", dtype_name(wt), i, e);
		}
	ck_assert(model_ok);
	ck_assert_int_gt(model_bf16_products, 0);
}
END_TEST

/* The same on the real tiles (AMX machines). */
START_TEST(fx_real_tiles_within_bound_of_float64)
{
	uint32_t s = 23;

	if (!test_bf16_tiles_run("amx_fx"))
		return;
	if (!kern_level_runs(CPU_LEVEL_AMX)) {
		fprintf(stderr, "amx_fx: skipping the real tiles: no usable AMX here\n");
		return;
	}
	for (int ti = 0; ti < 2; ti++)
		for (size_t i = 0; i < sizeof(fxm_cases) / sizeof(fxm_cases[0]); i++) {
			const uint32_t wt = ti ? DTYPE_BF16 : DTYPE_F16;
			const size_t *c = fxm_cases[i];
			double avx, e = fxm_check(wt, c[0], c[1], c[2], &s,
						  ti ? kern_amxbf_gemm_bf16 : kern_amxbf_gemm_f16, &avx);

			printf("amx_fx: real tiles %s %zu x %zu x %zu: %.3g (avx512 %.3g)\n",
			       dtype_name(wt), c[0], c[1], c[2], e, avx);
			ck_assert_msg(e <= AMXFX_BOUND, "%s case %zu: %.3g", dtype_name(wt), i, e);
		}
}
END_TEST

/* A GEMM that drops w_lo (every B sub-step w_hi): the cheaper split the
 * bound must refuse. */
static void fxm_no_lo(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	const size_t n = a->n_in;
	uint16_t *w = malloc(a->w_stride * o1);
	struct kern_gemm_args r = *a;

	ck_assert_ptr_nonnull(w);
	for (size_t i = 0; i < o1 * n; i++) /* w_hi as F16 (exact: 8 bits) */
		w[i] = kern_fp32_to_fp16(
			amxbf__round(kern_fp16_to_fp32(((const uint16_t *)a->w)[i])));
	r.w = w;
	fxm_amxbf_gemm_f16(&r, o0, o1);
	free(w);
}

/* The start-up self-test passes on the model, fails a GEMM without w_lo,
 * and kern_amxbf_enable runs it. */
START_TEST(fx_selftest_passes_and_refuses_a_cheaper_split)
{
	uint32_t s = 31;
	double avx;

	if (!test_bf16_tiles_run("amx_fx"))
		return;
	model_products = 0;
	ck_assert_int_eq(amxfx_selftest(fxm_amxbf_gemm_f16, fxm_amxbf_gemm_bf16), 0);
	ck_assert_int_gt(model_products, 0);
	ck_assert_int_ne(amxfx_selftest(fxm_no_lo, fxm_amxbf_gemm_bf16), 0);
	ck_assert_double_gt(fxm_check(DTYPE_F16, 40, 96, 37, &s, fxm_no_lo, &avx), AMXFX_BOUND);
}
END_TEST

/* Sampled rows (tokens [0, n_exact)) are the avx512 level's bits; with
 * the tiles off, every row is. */
START_TEST(fx_sampled_rows_are_avx512_bit_for_bit)
{
	enum { OUT = 48, IN = 128, TOK = 40 };
	uint32_t s = 41;

	if (!test_bf16_tiles_run("amx_fx"))
		return;
	for (int ti = 0; ti < 2; ti++) {
		const uint32_t wt = ti ? DTYPE_BF16 : DTYPE_F16;
		uint16_t w[OUT * IN];
		float wf[OUT * IN], x[TOK * IN], y[TOK * OUT], y2[TOK * OUT];
		struct kern_gemm_args a = {
			.w = w, .w_stride = IN * 2, .n_in = IN, .x = x, .x_stride = IN * 4,
			.n_tok = TOK, .y = y, .y_stride = OUT, .xf = x, .xf_stride = IN,
		};
		const int saved = fxm_amxbf_on;

		amx_selftest_weights16(wt, w, wf, OUT * IN, &s);
		fxm_acts(x, TOK * IN, &s);
		a.y = y2;
		(ti ? kern_avx512_gemm_bf16 : kern_avx512_gemm_f16)(&a, 0, OUT);
		a.y = y;
		for (size_t ne = 0; ne <= TOK; ne += 5) {
			fxm_amxbf_on = 1;
			a.n_exact = ne;
			model_bf16_products = 0;
			fxm_ops_amx.gemm[wt](&a, 0, OUT);
			ck_assert_int_eq(memcmp(y, y2, ne * OUT * sizeof(float)), 0);
			ck_assert_int_eq(model_bf16_products > 0, ne < TOK);
			fxm_amxbf_on = 0; /* EMBER_AMX_BF16=0: every row avx512's */
			model_bf16_products = 0;
			fxm_ops_amx.gemm[wt](&a, 0, OUT);
			ck_assert_int_eq(memcmp(y, y2, sizeof(y)), 0);
			ck_assert_int_eq(model_bf16_products, 0);
		}
		/* the tiles take whole 32-element steps: rows of other
		 * lengths (F16 / BF16 have them) stay on avx512 */
		fxm_amxbf_on = 1;
		ck_assert_uint_eq(fxm_amxbf_scratch(wt, 4096, 8), 32 * 4096 * (ti ? 2 : 3) * 2 + 64);
		ck_assert_uint_eq(fxm_amxbf_scratch(wt, 4100, 8), 0);
		fxm_amxbf_on = saved;
		ck_assert(fxm_ops_amx.gemv[wt] == (ti ? kern_avx512_gemm_bf16 : kern_avx512_gemm_f16));
	}
}
END_TEST

/* ---- golden: the llama model as F16 / BF16 through the prefill ------------------- */

#define FXG_DIR "../shared/golden/llama/"
#define FXG_N_IN 24
#define FXG_VOCAB 1000

/* Every row of a call as a prompt row (forward_eval's logits of every
 * position are sampled rows otherwise): the model's split, or on AMX
 * machines the library's real tiles. */
static int fxg_real;

static void fxg_gemm(uint32_t wt, const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	struct kern_gemm_args r = *a;

	r.n_exact = 0;
	r.xb = NULL;
	r.xf = a->x;
	r.xf_stride = a->n_in;
	if (fxg_real)
		(wt == DTYPE_F16 ? kern_amxbf_gemm_f16 : kern_amxbf_gemm_bf16)(&r, o0, o1);
	else
		fxm_ops_amx.gemm[wt](&r, o0, o1);
}

static void fxg_f16(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	fxg_gemm(DTYPE_F16, a, o0, o1);
}

static void fxg_bf16(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	fxg_gemm(DTYPE_BF16, a, o0, o1);
}

static void fxg_logits(const char *path, uint32_t wt, const int32_t *input, float *logits,
		       int split)
{
	struct forward_opts fo = {.n_ctx = FXG_N_IN};
	char err[EMBER_ERR_MAX] = "";
	struct forward_ctx *f = NULL;
	kern_gemm_fn old = NULL;
	struct model m;

	ck_assert_msg(model_open(&m, path, err) == 0, "%s: %s", path, err);
	ck_assert_uint_eq(m.layers[0].w[ARCH_T_ATTN_Q].type, wt);
	ck_assert_msg(forward_new(&f, &m, &fo, err) == 0, "%s", err);
	if (split) {
		fxm_amxbf_on = 1;
		old = kern_test_set_gemm(wt, wt == DTYPE_F16 ? fxg_f16 : fxg_bf16);
	}
	model_bf16_products = 0;
	ck_assert_msg(forward_eval(f, input, FXG_N_IN, logits, 1, err) == 0, "%s", err);
	if (split) {
		kern_test_set_gemm(wt, old);
		fxm_amxbf_on = 0;
		ck_assert(fxg_real || model_bf16_products > 0); /* the tiles ran */
	}
	forward_free(f);
	model_free(&m);
}

START_TEST(fx_golden_logits_through_the_split_match_the_float_path)
{
	const uint32_t wt = _i % 2 ? DTYPE_BF16 : DTYPE_F16;
	char path[64];
	struct test_golden g;
	float *lf = malloc(sizeof(float) * FXG_N_IN * FXG_VOCAB);
	float *ls = malloc(sizeof(float) * FXG_N_IN * FXG_VOCAB);
	double d = 0, ref = 0, dx = 0;

	if (!test_bf16_tiles_run("amx_fx"))
		goto out;
	fxg_real = _i >= 2;
	if (fxg_real && !kern_level_runs(CPU_LEVEL_AMX)) {
		fprintf(stderr, "amx_fx: skipping the golden real tiles: no usable AMX here\n");
		goto out;
	}
	ck_assert(lf && ls);
	test_golden_load(&g, "llama", FXG_VOCAB);
	snprintf(path, sizeof(path), "/tmp/ember-amx-fx-%d-%s.gguf", (int)getpid(), dtype_name(wt));
	test_write_golden_as(FXG_DIR "model-f32.gguf", path, wt);
	fxg_logits(path, wt, g.input, lf, 0);
	fxg_logits(path, wt, g.input, ls, 1);
	for (size_t i = 0; i < (size_t)FXG_N_IN * FXG_VOCAB; i++) {
		d = fmax(d, fabs((double)ls[i] - lf[i]));
		dx = fmax(dx, fabs((double)ls[i] - g.exact[i]));
		ref = fmax(ref, fabs((double)lf[i]));
	}
	printf("amx_fx: golden llama %s (%s): split vs avx512 %.3g x max, vs exact %.3g x max\n",
	       dtype_name(wt), fxg_real ? "real tiles" : "tile model", d / ref, dx / ref);
	ck_assert_msg(d <= 1e-5 * ref, "%s: %.3g x max", dtype_name(wt), d / ref);
	unlink(path);
	test_golden_free(&g);
out:
	free(lf);
	free(ls);
}
END_TEST

Suite *suite_amx_fx(void)
{
	Suite *s = suite_create("amx_fx");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, fx_tiles_and_rows_match_the_scalar_split);
	tcase_add_test(tc, fx_kept_b_tiles_are_every_step_loaded_bit_for_bit);
	tcase_add_test(tc, fx_gemm_within_bound_of_float64);
	tcase_add_test(tc, fx_real_tiles_within_bound_of_float64);
	tcase_add_test(tc, fx_selftest_passes_and_refuses_a_cheaper_split);
	tcase_add_test(tc, fx_sampled_rows_are_avx512_bit_for_bit);
	tcase_add_loop_test(tc, fx_golden_logits_through_the_split_match_the_float_path, 0, 4);
	suite_add_tcase(s, tc);
	return s;
}
#else
START_TEST(fx_needs_x86_64)
{
	fprintf(stderr, "amx_fx: skipping: not an x86-64 build\n");
}
END_TEST

Suite *suite_amx_fx(void)
{
	Suite *s = suite_create("amx_fx");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, fx_needs_x86_64);
	suite_add_tcase(s, tc);
	return s;
}
#endif
