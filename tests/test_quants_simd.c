/*
 * test_quants_simd.c - every SIMD matmul of the community block formats
 * (kquants_avx2.c, kquants_avx512.c, ...) against the scalar reference
 * (quants_ref.c) on random blocks: every byte random except the fp16
 * scales (kept in a realistic range), ragged row counts, token counts
 * across the tile and token-block edges. The integer sums are exact at
 * every level; only the order of float additions differs, so per output
 *   |y - y_ref| <= QS_TOL * sum_i (|w_i| + |min_i|) * |x_i|
 * with w the dequantized weights, min_i their minimum term (K-quants with
 * a dmin), x the Q8 activations as the kernels see them.
 * Each token alone (the level's GEMV) must equal its column of the batch
 * (the GEMM) bit for bit. A level this CPU cannot run is skipped with a
 * message. Where a level has its own Q2_K..Q6_K GEMV on per-super-block
 * activations (args.xk), its GEMM takes every token that way too, and each
 * token of the batch must equal that GEMV's scalar reference
 * (kquants_gemv_ref.c) bit for bit.
 *
 * The Q2_K..Q6_K decode GEMVs on per-super-block
 * activations (kquants_gemv.h, args.xk) must equal their scalar reference
 * (kquants_gemv_ref.c) bit for bit, at every level and row count, and be
 * the product of the dequantized rows with those activations within
 * QS_TOL; also at the formats' extremes (every weight and scale at its
 * largest, activations all +-127), where an int16 step that could
 * saturate would show.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "quants.h"
#include "testutil.h"

#define QS_TOL 2e-6

/* Where each format keeps its fp16 scale and minimum scale (-1: none). */
static const struct qs_type {
	uint32_t t;
	int d_off, dmin_off;
} qs_types[] = {
	{DTYPE_Q4_1, 0, 2},   {DTYPE_Q5_0, 0, -1},  {DTYPE_Q5_1, 0, 2},  {DTYPE_IQ4_NL, 0, -1},
	{DTYPE_Q2_K, 80, 82}, {DTYPE_Q3_K, 108, -1}, {DTYPE_Q4_K, 0, 2}, {DTYPE_Q5_K, 0, 2},
	{DTYPE_Q6_K, 208, -1}, {DTYPE_IQ4_XS, 0, -1},
};
#define QS_N_TYPES (sizeof(qs_types) / sizeof(qs_types[0]))

static uint64_t qs_rng = 0x2545f4914f6cdd1dull;

static void qs_put_half(uint8_t *p, float v)
{
	uint16_t h = kern_fp32_to_fp16(v);

	memcpy(p, &h, 2);
}

/* n_out random rows of n_in elements of type q->t. */
static uint8_t *qs_weights(const struct qs_type *q, size_t n_out, size_t n_in)
{
	size_t row = (size_t)dtype_row_size(q->t, n_in), bs = dtype_type_size(q->t);
	uint8_t *w = test_alloc64(row * n_out);

	for (size_t i = 0; i < row * n_out; i++)
		w[i] = (uint8_t)test_rand(&qs_rng);
	for (size_t b = 0; b < row * n_out / bs; b++) {
		float d = (float)(test_rand(&qs_rng) % 1000 + 1) * 1e-5f;
		qs_put_half(w + b * bs + q->d_off, (test_rand(&qs_rng) & 1) ? d : -d);
		if (q->dmin_off >= 0)
			qs_put_half(w + b * bs + q->dmin_off, (float)(test_rand(&qs_rng) % 1000) * 2e-5f);
	}
	return w;
}

/* The same rows with every d zeroed: what is left is the minimum term. */
static uint8_t *qs_min_part(const struct qs_type *q, const uint8_t *w, size_t bytes)
{
	size_t bs = dtype_type_size(q->t);
	uint8_t *m = test_alloc64(bytes);

	memcpy(m, w, bytes);
	for (size_t b = 0; b < bytes / bs; b++)
		memset(m + b * bs + q->d_off, 0, 2);
	return m;
}

/* The scalar reference of a K-quant GEMV on kern_block_q8_k activations,
 * NULL for the other types. */
static kern_gemm_fn qs_q8k_ref(uint32_t t)
{
	return t == DTYPE_Q4_K	 ? kern_ref_gemv_q8k_q4_k
	       : t == DTYPE_Q5_K ? kern_ref_gemv_q8k_q5_k
	       : t == DTYPE_Q6_K ? kern_ref_gemv_q8k_q6_k
	       : t == DTYPE_Q2_K ? kern_ref_gemv_q8k_q2_k
	       : t == DTYPE_Q3_K ? kern_ref_gemv_q8k_q3_k
				 : NULL;
}

static void qs_check(enum cpu_level level, const struct qs_type *q, size_t n_out, size_t n_in,
		     size_t n_tok)
{
	const struct kern_ops *ops = kern_ops_for(level);
	/* the level's batches take Q8_K activations, as its GEMV */
	const kern_gemm_fn q8k_ref = ops->gemv[q->t] != ops->gemm[q->t] ? qs_q8k_ref(q->t) : NULL;
	const size_t nsb = n_in / KERN_QKK;
	struct kern_block_q8_k *xk = NULL;
	size_t row = (size_t)dtype_row_size(q->t, n_in);
	size_t act_row = n_in / KERN_QK * sizeof(struct kern_block_q8a);
	uint8_t *w = qs_weights(q, n_out, n_in), *wm = qs_min_part(q, w, row * n_out);
	float *x = test_alloc64(n_in * n_tok * sizeof(float)), *xf = test_alloc64(n_in * n_tok * sizeof(float));
	float *wf = test_alloc64(n_in * sizeof(float)), *wmf = test_alloc64(n_in * sizeof(float));
	float *y = test_alloc64(n_out * n_tok * sizeof(float)), *yr = test_alloc64(n_out * n_tok * sizeof(float));
	uint8_t *xa = test_alloc64(act_row * n_tok);
	struct kern_gemm_args a = {
		.w = w,
		.w_stride = row,
		.n_in = n_in,
		.x = xa,
		.x_stride = act_row,
		.n_tok = n_tok,
		.y_stride = n_out,
		.xd_stride = kern_act_groups_pad(n_in / KERN_QK),
	};
	float *xd = test_alloc64(a.xd_stride * n_tok * sizeof(float));
	int32_t *xs8 = test_alloc64(a.xd_stride * n_tok * sizeof(int32_t));

	for (size_t i = 0; i < n_in * n_tok; i++)
		x[i] = ((float)(test_rand(&qs_rng) & 0xffff) / 32768.0f - 1.0f) * ((test_rand(&qs_rng) & 31) ? 1 : 8);
	for (size_t k = 0; k < n_tok; k++) {
		const struct kern_block_q8a *b = (const struct kern_block_q8a *)(xa + k * act_row);
		kern_ops_ref.quantize_act(x + k * n_in, (struct kern_block_q8a *)(xa + k * act_row),
					  n_in);
		kern_act_summarize(b, n_in / KERN_QK, xd + k * a.xd_stride, xs8 + k * a.xd_stride);
		for (size_t i = 0; i < n_in; i++)
			xf[k * n_in + i] = (float)b[i / KERN_QK].qs[i % KERN_QK] * b[i / KERN_QK].d;
	}
	a.xd = xd;
	a.xs8 = xs8;
	if (q8k_ref != NULL) {
		xk = test_alloc64(nsb * n_tok * sizeof(*xk));
		for (size_t k = 0; k < n_tok; k++)
			kern_quantize_act_q8k(x + k * n_in, xk + k * nsb, n_in);
		a.xk = xk;
	}
	a.y = yr;
	kern_ops_ref.gemm[q->t](&a, 0, n_out);
	a.y = y;
	ops->gemm[q->t](&a, 0, n_out);
	/* a token's result does not depend on its batch: each token alone
	 * through the level's GEMV equals its column of the GEMM bit for bit */
	for (size_t k = 0; k < n_tok && n_tok > 1; k++) {
		struct kern_gemm_args one = a;
		float *y1 = test_alloc64(n_out * sizeof(float));

		one.x = xa + k * act_row;
		one.xd = xd + k * a.xd_stride;
		one.xs8 = xs8 + k * a.xd_stride;
		one.n_tok = 1;
		one.y = y1;
		if (xk != NULL)
			one.xk = xk + k * nsb;
		ops->gemv[q->t](&one, 0, n_out);
		for (size_t o = 0; o < n_out; o++)
			ck_assert_msg(memcmp(&y1[o], &y[k * n_out + o], sizeof(float)) == 0,
				      "%s %s out=%zu in=%zu tok=%zu: token %zu alone %.9g, in batch %.9g",
				      ops->name, dtype_name(q->t), n_out, n_in, n_tok, k, y1[o],
				      y[k * n_out + o]);
		free(y1);
	}
	/* Q8_K activations: each token of the batch is the reference GEMV's
	 * result for it alone, bit for bit (test_quants_simd's q8k test
	 * bounds that reference against the exact product) */
	for (size_t k = 0; k < n_tok && q8k_ref != NULL; k++) {
		struct kern_gemm_args one = a;
		float *y1 = test_alloc64(n_out * sizeof(float));

		one.n_tok = 1;
		one.xk = xk + k * nsb;
		one.y = y1;
		q8k_ref(&one, 0, n_out);
		for (size_t o = 0; o < n_out; o++)
			ck_assert_msg(memcmp(&y1[o], &y[k * n_out + o], sizeof(float)) == 0,
				      "%s %s out=%zu in=%zu tok=%zu: token %zu in batch %.9g, q8k "
				      "reference %.9g",
				      ops->name, dtype_name(q->t), n_out, n_in, n_tok, k,
				      y[k * n_out + o], y1[o]);
		free(y1);
	}
	for (size_t o = 0; o < n_out && q8k_ref == NULL; o++) {
		ck_assert_int_eq(kern_dequantize_row(q->t, w + o * row, wf, n_in), 0);
		ck_assert_int_eq(kern_dequantize_row(q->t, wm + o * row, wmf, n_in), 0);
		for (size_t k = 0; k < n_tok; k++) {
			double scale = 0;
			for (size_t i = 0; i < n_in; i++)
				scale += (fabs((double)wf[i]) + fabs((double)wmf[i])) *
					 fabs((double)xf[k * n_in + i]);
			double err = fabs((double)y[k * n_out + o] - yr[k * n_out + o]);
			ck_assert_msg(err <= QS_TOL * scale + 1e-30,
				      "%s %s out=%zu in=%zu tok=%zu [%zu][%zu]: %.9g vs ref %.9g",
				      ops->name, dtype_name(q->t), n_out, n_in, n_tok, k, o,
				      y[k * n_out + o], yr[k * n_out + o]);
		}
	}
	free(w);
	free(wm);
	free(x);
	free(xf);
	free(wf);
	free(wmf);
	free(y);
	free(yr);
	free(xa);
	free(xd);
	free(xs8);
	free(xk);
}

static void qs_check_level(enum cpu_level level)
{
	static const size_t outs[] = {1, 3, 16, 37};
	/* 1..16: every small-batch split (avx512 Q4_K/Q5_K: 9..16 in two
	 * streaming passes); 64, 70: the prefill panels */
	static const size_t toks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 64, 70};
	static const size_t ins[] = {256, 768, 2304}; /* 2304: two K chunks of the panels */
	const struct kern_ops *ops = kern_ops_for(level);
	int tested = 0;

	if (!kern_level_runs(level)) {
		fprintf(stderr, "quants_simd: skipping the %s level: this CPU lacks it\n",
			cpu_level_name(level));
		return;
	}
	for (size_t ti = 0; ti < QS_N_TYPES; ti++) {
		const struct qs_type *q = &qs_types[ti];
		/* A level without its own kernel for a type runs the reference
		 * (kern_matmul falls back); nothing to compare. */
		if (ops->gemm[q->t] == NULL || ops->gemm[q->t] == kern_ops_ref.gemm[q->t])
			continue;
		for (size_t a = 0; a < sizeof(ins) / sizeof(ins[0]); a++)
			for (size_t b = 0; b < sizeof(outs) / sizeof(outs[0]); b++)
				for (size_t c = 0; c < sizeof(toks) / sizeof(toks[0]); c++)
					qs_check(level, q, outs[b], ins[a], toks[c]);
		/* 33 super-blocks: 16 tokens' sums per 32 overflow the avx512
		 * Q4_K/Q5_K tile's per-call table (kv__gemm(), 512 entries) and
		 * are made in the tile; 8 tokens' fit it */
		if (q->t == DTYPE_Q4_K || q->t == DTYPE_Q5_K) {
			qs_check(level, q, 37, 33 * 256, 8);
			qs_check(level, q, 37, 33 * 256, 16);
		}
		printf("quants_simd: %s %s matches the scalar reference%s\n", ops->name,
		       dtype_name(q->t),
		       ops->gemv[q->t] != ops->gemm[q->t] && qs_q8k_ref(q->t)
			       ? " (q8k, each token of a batch bit for bit)"
			       : "");
		tested++;
	}
	if (level != CPU_LEVEL_SCALAR)
		ck_assert_int_gt(tested, 0);
}

/* Rows at the format's extremes: every weight and 6-bit scale at its
 * maximum (Q6_K's int8 scales at -128), only d and dmin kept sane; alt:
 * Q4_K/Q5_K's sub-block scales 63, 0, 63, 0, ... instead (the avx512
 * batch tile multiplies by their differences, -63 and 63 here), and
 * Q5_K's fifth bits alternating. */
static void qs_extreme_weights(const struct qs_type *q, uint8_t *w, size_t bytes, int alt)
{
	/* kern_k4_scale_min(): sc_0..3 in bytes 0..3, sc_4..7 low nibbles
	 * of 8..11 and the top bits of 0..3; the minimums all 63 */
	static const uint8_t alt_sc[12] = {0xff, 0x00, 0xff, 0x00, 0xff, 0xff,
					   0xff, 0xff, 0xff, 0xf0, 0xff, 0xf0};

	size_t bs = dtype_type_size(q->t);
	uint8_t keep[4] = {0};

	for (size_t b = 0; b < bytes / bs; b++) {
		uint8_t *blk = w + b * bs;
		memcpy(keep, blk + q->d_off, 2);
		if (q->dmin_off >= 0)
			memcpy(keep + 2, blk + q->dmin_off, 2);
		memset(blk, 0xff, bs);
		if (q->t == DTYPE_Q6_K)
			memset(blk + 192, 0x80, 16);
		memcpy(blk + q->d_off, keep, 2);
		if (q->dmin_off >= 0)
			memcpy(blk + q->dmin_off, keep + 2, 2);
		if (alt && (q->t == DTYPE_Q4_K || q->t == DTYPE_Q5_K))
			memcpy(blk + 4, alt_sc, sizeof(alt_sc));
		/* Q5_K's fifth bits: 32-block j of element l takes bit j of
		 * qh[l]; 0xaa / 0x55 by element (values 31 and 15 alternating,
		 * swapped from 32-block to 32-block), so a bit taken for the
		 * wrong block or element changes the sums */
		for (size_t l = 0; alt && q->t == DTYPE_Q5_K && l < 32; l++)
			blk[16 + l] = l % 2 ? 0x55 : 0xaa;
	}
}

/* One Q8_K-activation GEMV case: level `level`, type t, n_out x n_in;
 * extreme != 0: qs_extreme_weights() and every activation +-127
 * (extreme's sign), where any int16 step of a level would saturate;
 * extreme +-2: the alternating scales, and the activations' sign
 * alternating by 32-block too. */
static void qs_check_q8k(enum cpu_level level, const struct qs_type *q, kern_gemm_fn ref,
			 size_t n_out, size_t n_in, int extreme)
{
	const struct kern_ops *ops = kern_ops_for(level);
	size_t row = (size_t)dtype_row_size(q->t, n_in), nsb = n_in / KERN_QKK;
	uint8_t *w = qs_weights(q, n_out, n_in), *wm;

	if (extreme)
		qs_extreme_weights(q, w, row * n_out, extreme == 2 || extreme == -2);
	wm = qs_min_part(q, w, row * n_out);
	float *x = test_alloc64(n_in * sizeof(float)), *xf = test_alloc64(n_in * sizeof(float));
	float *wf = test_alloc64(n_in * sizeof(float)), *wmf = test_alloc64(n_in * sizeof(float));
	float *y = test_alloc64(n_out * sizeof(float)), *yr = test_alloc64(n_out * sizeof(float));
	struct kern_block_q8_k *xk = test_alloc64(nsb * sizeof(*xk));
	struct kern_gemm_args a = {
		.w = w, .w_stride = row, .n_in = n_in, .n_tok = 1, .y_stride = n_out, .xk = xk,
	};

	for (size_t i = 0; i < n_in; i++)
		x[i] = extreme ? (extreme > 0 ? 1.0f : -1.0f) *
					 (extreme % 2 == 0 && i / 32 % 2 ? -1.0f : 1.0f)
			       : ((float)(test_rand(&qs_rng) & 0xffff) / 32768.0f - 1.0f) *
					 ((test_rand(&qs_rng) & 31) ? 1 : 8);
	kern_quantize_act_q8k(x, xk, n_in);
	{ /* the level's quantizer writes the same bytes */
		struct kern_block_q8_k *xl = test_alloc64(nsb * sizeof(*xl));
		ops->quantize_act_q8k(x, xl, n_in);
		ck_assert_msg(memcmp(xl, xk, nsb * sizeof(*xk)) == 0,
			      "%s: q8k activation quantization differs from the reference",
			      ops->name);
		free(xl);
	}
	for (size_t i = 0; i < n_in; i++)
		xf[i] = (float)xk[i / KERN_QKK].qs[i % KERN_QKK] * xk[i / KERN_QKK].d;
	a.y = yr;
	ref(&a, 0, n_out);
	for (size_t o = 0; o < n_out; o++)
		y[o] = -1.0f;
	a.y = y;
	ops->gemv[q->t](&a, 0, n_out);
	for (size_t o = 0; o < n_out; o++) {
		ck_assert_msg(memcmp(&y[o], &yr[o], sizeof(float)) == 0,
			      "%s %s q8k gemv out=%zu in=%zu row %zu: %.9g, reference %.9g",
			      ops->name, dtype_name(q->t), n_out, n_in, o, y[o], yr[o]);
		/* and the reference is the product it claims to be */
		ck_assert_int_eq(kern_dequantize_row(q->t, w + o * row, wf, n_in), 0);
		ck_assert_int_eq(kern_dequantize_row(q->t, wm + o * row, wmf, n_in), 0);
		double exact = 0, scale = 0;
		for (size_t i = 0; i < n_in; i++) {
			exact += (double)wf[i] * xf[i];
			scale += (fabs((double)wf[i]) + fabs((double)wmf[i])) * fabs((double)xf[i]);
		}
		ck_assert_msg(fabs(yr[o] - exact) <= QS_TOL * scale + 1e-30,
			      "%s q8k reference out=%zu in=%zu row %zu: %.9g, exact %.9g",
			      dtype_name(q->t), n_out, n_in, o, yr[o], exact);
	}
	if (q->t == DTYPE_Q4_K || q->t == DTYPE_Q5_K) {
		/* the level's batch (8 tokens: batched decode) of this token
		 * gives the GEMV's bits for each: at the extremes too, where
		 * the avx512 Q4_K tile's int16 half sums (16 x 15 x 127) are
		 * closest to their bound */
		const size_t nt = 8;
		struct kern_block_q8_k *xt = test_alloc64(nt * nsb * sizeof(*xt));
		float *yt = test_alloc64(nt * n_out * sizeof(float));
		struct kern_gemm_args b = a;

		for (size_t t = 0; t < nt; t++)
			memcpy(xt + t * nsb, xk, nsb * sizeof(*xk));
		b.xk = xt;
		b.y = yt;
		b.n_tok = nt;
		ops->gemm[q->t](&b, 0, n_out);
		for (size_t t = 0; t < nt; t++)
			ck_assert_msg(memcmp(yt + t * n_out, yr, n_out * sizeof(float)) == 0,
				      "%s %s q8k batch out=%zu in=%zu token %zu differs from the gemv",
				      ops->name, dtype_name(q->t), n_out, n_in, t);
		free(xt);
		free(yt);
	}
	free(w);
	free(wm);
	free(x);
	free(xf);
	free(wf);
	free(wmf);
	free(y);
	free(yr);
	free(xk);
}

static void qs_check_q8k_level(enum cpu_level level)
{
	static const size_t outs[] = {1, 3, 4, 5, 16, 37};
	static const size_t ins[] = {256, 768, 2048};
	static const struct {
		uint32_t t;
		kern_gemm_fn ref;
	} types[] = {
		{DTYPE_Q4_K, kern_ref_gemv_q8k_q4_k},
		{DTYPE_Q5_K, kern_ref_gemv_q8k_q5_k},
		{DTYPE_Q6_K, kern_ref_gemv_q8k_q6_k},
		{DTYPE_Q2_K, kern_ref_gemv_q8k_q2_k},
		{DTYPE_Q3_K, kern_ref_gemv_q8k_q3_k},
	};
	const struct kern_ops *ops = kern_ops_for(level);

	if (!kern_level_runs(level)) {
		fprintf(stderr, "quants_simd: skipping the %s level: this CPU lacks it\n",
			cpu_level_name(level));
		return;
	}
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		const struct qs_type *q = NULL;
		for (size_t k = 0; k < QS_N_TYPES; k++)
			if (qs_types[k].t == types[i].t)
				q = &qs_types[k];
		ck_assert_ptr_nonnull(q);
		ck_assert_ptr_nonnull(ops->gemv[q->t]);
		ck_assert_ptr_ne(ops->gemv[q->t], ops->gemm[q->t]);
		for (size_t b = 0; b < sizeof(ins) / sizeof(ins[0]); b++)
			for (size_t c = 0; c < sizeof(outs) / sizeof(outs[0]); c++)
				qs_check_q8k(level, q, types[i].ref, outs[c], ins[b], 0);
		qs_check_q8k(level, q, types[i].ref, 5, 768, 1);
		qs_check_q8k(level, q, types[i].ref, 5, 768, -1);
		qs_check_q8k(level, q, types[i].ref, 37, 768, 2);
		qs_check_q8k(level, q, types[i].ref, 37, 768, -2);
		/* 65 super-blocks: past the avx512 Q6_K body's 64-block window
		 * of activation offsets (kz_q6_bias), so a row is summed in two */
		qs_check_q8k(level, q, types[i].ref, 5, 65 * KERN_QKK, 0);
		qs_check_q8k(level, q, types[i].ref, 5, 65 * KERN_QKK, -1);
		printf("quants_simd: %s %s q8k gemv equals its reference\n", ops->name,
		       dtype_name(q->t));
	}
}

START_TEST(q8k_gemvs_equal_their_reference_bit_for_bit)
{
	qs_check_q8k_level(CPU_LEVEL_AVX2);
	qs_check_q8k_level(CPU_LEVEL_AVX512);
}
END_TEST

START_TEST(avx2_matches_the_reference_on_random_blocks)
{
	qs_check_level(CPU_LEVEL_AVX2);
}
END_TEST

/* The avx2 level's Q4_K/Q5_K/Q6_K small batches (kquants_gemv_avx2.c:
 * Q4_K/Q6_K eight rows a step in lanes, then four rows a step, each
 * super-block unpacked once for all tokens): every k from 2 to 17 (17:
 * the prefill's 16 + 1), row counts with no, one, two and four 8-row
 * steps and ragged tails (a last step of 1 to 3 rows), each token equal
 * to the GEMV alone and to the scalar reference, bit for bit (qs_check). */
START_TEST(avx2_kquant_batches_of_2_to_16_equal_single_steps)
{
	static const size_t outs[] = {1, 6, 7, 8, 16, 23, 37};
	static const size_t ins[] = {256, 768};

	if (!kern_level_runs(CPU_LEVEL_AVX2))
		return;
	for (size_t ti = 0; ti < QS_N_TYPES; ti++) {
		const struct qs_type *q = &qs_types[ti];
		if (q->t != DTYPE_Q4_K && q->t != DTYPE_Q5_K && q->t != DTYPE_Q6_K)
			continue;
		for (size_t i = 0; i < sizeof(ins) / sizeof(ins[0]); i++)
			for (size_t o = 0; o < sizeof(outs) / sizeof(outs[0]); o++)
				for (size_t k = 2; k <= 17; k++)
					qs_check(CPU_LEVEL_AVX2, q, outs[o], ins[i], k);
	}
}
END_TEST

START_TEST(avx512_matches_the_reference_on_random_blocks)
{
	qs_check_level(CPU_LEVEL_AVX512);
}
END_TEST

/* The AArch64 levels (skipped elsewhere; test_neon.c also checks them
 * bit for bit). */
START_TEST(arm_levels_match_the_reference_on_random_blocks)
{
	qs_check_level(CPU_LEVEL_NEON);
	qs_check_level(CPU_LEVEL_DOTPROD);
}
END_TEST

Suite *suite_quants_simd(void)
{
	Suite *s = suite_create("quants_simd");
	TCase *tc = tcase_create("levels");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, avx2_matches_the_reference_on_random_blocks);
	tcase_add_test(tc, avx2_kquant_batches_of_2_to_16_equal_single_steps);
	tcase_add_test(tc, avx512_matches_the_reference_on_random_blocks);
	tcase_add_test(tc, arm_levels_match_the_reference_on_random_blocks);
	/* every arch: an x86 level this CPU lacks is skipped with a line */
	tcase_add_test(tc, q8k_gemvs_equal_their_reference_bit_for_bit);
	suite_add_tcase(s, tc);
	return s;
}
