/*
 * test_attention.c - the attention kernels (kern_attn_scores, ...) against
 * the scalar reference and expf, and the attention module against a naive
 * float64 softmax(q k^T / sqrt(d) + ALiBi) v on random data, at every
 * kernel level this CPU runs.
 *
 * attention_run() uses the process's kernel level, chosen once
 * (EMBER_CPU), so each level's module check runs in a forked child that
 * sets EMBER_CPU before the first kernel call and reports by exit status.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attention.h"
#include "dtype.h"
#include "ember.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "threadpool.h"

/* Attention output against the float64 reference: |out - ref| <= AT_TOL x
 * max |v| of the cache. Float scores and sums err by ~1e-6 relative; a
 * missed rescale, a wrong mask or a wrong kv head errs by ~1e-1. */
#define AT_TOL 2e-5
/* The same for prompt tiles on the amx level's bf16 tiles (q, k, p, v
 * rounded to bf16, 2^-9 relative each; attention_amx.c): measured up to
 * 3.0e-3 on these cases (Emerald Rapids, 2026-11-28). */
#define AT_TOL_BF16 8e-3
/* 1 in the child that checks the amx level's prompt tiles. */
static int at_prompt;
/* SIMD score and value kernels against the scalar one: float sums in
 * another order, relative to the sum of |terms|. */
#define AT_SUM_TOL 1e-5

static uint64_t at_rng = 0x2545f4914f6cdd1dull;

static float at_uniform(float scale)
{
	at_rng = at_rng * 6364136223846793005ull + 1442695040888963407ull;
	return ((float)(at_rng >> 40) / 16777216.0f * 2.0f - 1.0f) * scale;
}

static void at_fill(float *x, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = at_uniform(scale);
}

static const enum cpu_level at_levels[] = {CPU_LEVEL_SCALAR, CPU_LEVEL_AVX2, CPU_LEVEL_AVX512,
					   CPU_LEVEL_NEON};
#define AT_N_LEVELS (sizeof(at_levels) / sizeof(at_levels[0]))

/* ---- kernels ------------------------------------------------------------------ */

/* exp(x) in double for the float x, and the bound the kernel must meet. */
static void at_check_exp_value(const struct kern_ops *ops, float x, float got)
{
	double e = exp((double)x);

	if (isnan(x)) {
		ck_assert_msg(isnan(got), "%s exp(NaN) = %g", ops->name, got);
		return;
	}
	if (e > FLT_MAX) {
		/* exp overflows from 88.72; the last float below it may round up. */
		ck_assert_msg(isinf(got) || (double)got >= FLT_MAX * (1 - KERN_EXP_REL_ERR),
			      "%s exp(%.9g) = %g", ops->name, x, got);
		return;
	}
	if (e < FLT_MIN) {
		ck_assert_msg(got >= 0 && fabs(got - e) <= FLT_MIN, "%s exp(%.9g) = %g vs %g",
			      ops->name, x, got, e);
		return;
	}
	ck_assert_msg(fabs(got - e) <= KERN_EXP_REL_ERR * e, "%s exp(%.9g) = %.9g vs %.9g (%.3g rel)",
		      ops->name, x, got, e, fabs(got - e) / e);
}

START_TEST(exp_sum_is_within_its_bound_of_exp_over_the_float_range)
{
	static float x[4096], y[4096];
	const float special[] = {-INFINITY, INFINITY, NAN, -FLT_MAX, -1e30f, -1000.0f, -104.0f,
				 -103.97f, -87.5f, -87.33f, -20.0f, -1.0f, -1e-30f, 0.0f, -0.0f,
				 1e-30f, 0.5f, 1.0f, 30.0f, 88.0f, 88.72f, 88.73f, 1e30f};

	for (size_t li = 0; li < AT_N_LEVELS; li++) {
		const struct kern_ops *ops = kern_ops_for(at_levels[li]);
		uint32_t step = 0x7f800000u / 4000u * 2u + 1u, u = 0;

		if (!kern_level_runs(at_levels[li]))
			continue;
		/* Every exponent, both signs: bit patterns from 0 to +inf. */
		for (;;) {
			size_t n = 0;

			for (; n < 4096 && u < 0x7f800000u; n++, u += step) {
				uint32_t b = u | (n & 1 ? 0x80000000u : 0);

				memcpy(&x[n], &b, sizeof(b));
			}
			if (n == 0)
				break;
			memcpy(y, x, n * sizeof(float));
			ops->exp_sum(y, n, 0.0f);
			for (size_t i = 0; i < n; i++)
				at_check_exp_value(ops, x[i], y[i]);
			if (u >= 0x7f800000u)
				break;
		}
		/* Softmax's range, finely: x in [-100, 0]. */
		for (size_t i = 0; i < 4096; i++)
			x[i] = -100.0f * (float)i / 4095.0f;
		memcpy(y, x, sizeof(x));
		ops->exp_sum(y, 4096, 0.0f);
		for (size_t i = 0; i < 4096; i++)
			at_check_exp_value(ops, x[i], y[i]);
		for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++) {
			float v = special[i];

			ops->exp_sum(&v, 1, 0.0f);
			at_check_exp_value(ops, special[i], v);
		}
		float neg[3] = {-INFINITY, -1e30f, -200.0f};
		ck_assert_float_eq(ops->exp_sum(neg, 3, 0.0f), 0.0f);
		ck_assert(neg[0] == 0.0f && neg[1] == 0.0f && neg[2] == 0.0f);
	}
}
END_TEST

START_TEST(exp_sum_subtracts_the_maximum_and_returns_the_sum)
{
	for (size_t li = 0; li < AT_N_LEVELS; li++) {
		const struct kern_ops *ops = kern_ops_for(at_levels[li]);
		static const size_t lens[] = {1, 7, 8, 9, 17, 64, 100};

		if (!kern_level_runs(at_levels[li]))
			continue;
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			float x[100], y[100];
			double want = 0, got;

			at_fill(x, 100, 30.0f);
			memcpy(y, x, sizeof(x));
			got = ops->exp_sum(y, lens[k], 12.5f);
			for (size_t i = 0; i < lens[k]; i++) {
				double e = exp((double)(x[i] - 12.5f)); /* float subtraction */

				ck_assert_msg(fabs(y[i] - e) <= 4 * KERN_EXP_REL_ERR * e + FLT_MIN,
					      "%s n=%zu [%zu]: %g vs %g", ops->name, lens[k], i, y[i], e);
				want += e;
			}
			ck_assert_msg(fabs(got - want) <= 1e-6 * want, "%s sum n=%zu: %g vs %g", ops->name,
				      lens[k], got, want);
		}
	}
}
END_TEST

START_TEST(max_skips_nan_and_is_minus_infinity_when_empty)
{
	for (size_t li = 0; li < AT_N_LEVELS; li++) {
		const struct kern_ops *ops = kern_ops_for(at_levels[li]);

		if (!kern_level_runs(at_levels[li]))
			continue;
		for (size_t n = 1; n <= 40; n++) {
			float x[40];

			at_fill(x, n, 100.0f);
			ck_assert_float_eq(ops->max(x, n), kern_ops_ref.max(x, n));
			x[n / 2] = NAN;
			ck_assert_float_eq(ops->max(x, n), kern_ops_ref.max(x, n));
			x[n - 1] = 1e9f;
			ck_assert_float_eq(ops->max(x, n), 1e9f);
		}
		ck_assert(isinf(ops->max(NULL, 0)) && ops->max(NULL, 0) < 0);
	}
}
END_TEST

START_TEST(fp16_rows_convert_exactly)
{
	uint16_t h[300];
	float f[300];

	for (size_t i = 0; i < 300; i++)
		h[i] = (uint16_t)(i * 219u + 7u); /* normals, subnormals, inf, NaN */
	h[0] = 0x7c00;
	h[1] = 0xfc00;
	h[2] = 0x0001;
	for (size_t li = 0; li < AT_N_LEVELS; li++) {
		const struct kern_ops *ops = kern_ops_for(at_levels[li]);

		if (!kern_level_runs(at_levels[li]))
			continue;
		ops->fp16_row(h, f, 299);
		for (size_t i = 0; i < 299; i++) {
			float want = kern_fp16_to_fp32(h[i]);

			ck_assert_msg(memcmp(&f[i], &want, 4) == 0 || (isnan(f[i]) && isnan(want)),
				      "%s fp16 %#x: %g vs %g", ops->name, h[i], f[i], want);
		}
	}
}
END_TEST

/* Scores and the value sum of one shape against the reference; and each
 * row equal, bit for bit, to the same row computed alone. */
static void at_check_blocks(const struct kern_ops *ops, size_t nq, size_t nk, size_t d, int bias_on)
{
	const size_t ld_q = d + 3, ld_s = nk + 5, ld_o = d + 1;
	float *q = malloc(nq * ld_q * 4), *k = malloc(nk * d * 4), *v = malloc(nk * d * 4);
	float *s = malloc(nq * ld_s * 4), *sr = malloc(nq * ld_s * 4), *one = malloc(ld_s * 4);
	float *o = malloc(nq * ld_o * 4), *orf = malloc(nq * ld_o * 4);
	float bias[80], r[70];

	at_fill(q, nq * ld_q, 1.0f);
	at_fill(k, nk * d, 1.0f);
	at_fill(v, nk * d, 2.0f);
	at_fill(bias, nk, 5.0f);
	ops->attn_scores(q, ld_q, k, d, bias_on ? bias : NULL, 0.125f, s, ld_s, nq, nk);
	kern_ops_ref.attn_scores(q, ld_q, k, d, bias_on ? bias : NULL, 0.125f, sr, ld_s, nq, nk);
	for (size_t i = 0; i < nq; i++) {
		ops->attn_scores(q + i * ld_q, ld_q, k, d, bias_on ? bias : NULL, 0.125f, one, ld_s, 1,
				 nk);
		for (size_t j = 0; j < nk; j++) {
			double mag = bias_on ? fabs(bias[j]) : 0;

			for (size_t c = 0; c < d; c++)
				mag += fabs((double)q[i * ld_q + c] * k[j * d + c]);
			ck_assert_msg(fabs(s[i * ld_s + j] - sr[i * ld_s + j]) <= AT_SUM_TOL * 0.125 * mag,
				      "%s scores %zux%zu d=%zu [%zu][%zu]: %g vs %g", ops->name, nq, nk, d,
				      i, j, s[i * ld_s + j], sr[i * ld_s + j]);
			ck_assert_msg(one[j] == s[i * ld_s + j], "%s scores row %zu alone differs",
				      ops->name, i);
		}
	}
	/* P rows in [0, 1] as softmax gives them; r below 1. */
	for (size_t i = 0; i < nq; i++) {
		for (size_t j = 0; j < nk; j++)
			s[i * ld_s + j] = fabsf(at_uniform(1.0f));
		r[i] = 0.25f + fabsf(at_uniform(0.75f));
	}
	at_fill(o, nq * ld_o, 3.0f);
	memcpy(orf, o, nq * ld_o * 4);
	ops->attn_accum(o, ld_o, r, s, ld_s, v, d, nq, nk);
	kern_ops_ref.attn_accum(orf, ld_o, r, s, ld_s, v, d, nq, nk);
	for (size_t i = 0; i < nq; i++) {
		for (size_t c = 0; c < d; c++) {
			double mag = fabs(3.0 * r[i]); /* |o| was at most 3 */

			for (size_t j = 0; j < nk; j++)
				mag += fabs((double)s[i * ld_s + j] * v[j * d + c]);
			ck_assert_msg(fabs(o[i * ld_o + c] - orf[i * ld_o + c]) <= AT_SUM_TOL * mag,
				      "%s accum %zux%zu d=%zu [%zu][%zu]: %g vs %g", ops->name, nq, nk, d,
				      i, c, o[i * ld_o + c], orf[i * ld_o + c]);
		}
	}
	free(q);
	free(k);
	free(v);
	free(s);
	free(sr);
	free(one);
	free(o);
	free(orf);
}

START_TEST(score_and_value_blocks_match_reference_on_every_level)
{
	static const size_t nqs[] = {1, 2, 3, 4, 5, 7, 64}, nks[] = {1, 3, 4, 5, 8, 9, 64};
	static const size_t ds[] = {8, 20, 64, 80, 128};

	for (size_t li = 0; li < AT_N_LEVELS; li++) {
		const struct kern_ops *ops = kern_ops_for(at_levels[li]);

		if (!kern_level_runs(at_levels[li]))
			continue;
		for (size_t a = 0; a < sizeof(nqs) / sizeof(nqs[0]); a++)
			for (size_t b = 0; b < sizeof(nks) / sizeof(nks[0]); b++)
				for (size_t c = 0; c < sizeof(ds) / sizeof(ds[0]); c++)
					at_check_blocks(ops, nqs[a], nks[b], ds[c], (a + b + c) & 1);
	}
}
END_TEST

/* The avx512 level's score tiles (attention_avx512.c: 4 queries x 8
 * keys on ZMM up to 512-wide heads, 4 x 4 on YMM above) give the AVX2
 * level's scores bit for bit, ragged rows and keys included, and write
 * nothing outside each row's nk scores (ld_s > nk, padding compared). */
START_TEST(avx512_scores_equal_avx2_bit_for_bit)
{
	static const size_t nqs[] = {3, 4, 6, 9, 64}, nks[] = {1, 5, 8, 13, 64},
			    ds[] = {64, 72, 128, 512, 520};

	if (!kern_level_runs(CPU_LEVEL_AVX512)) {
		fprintf(stderr, "attention: skipping avx512 vs avx2: this CPU lacks avx512\n");
		return;
	}
	for (size_t a = 0; a < sizeof(nqs) / sizeof(nqs[0]); a++)
		for (size_t b = 0; b < sizeof(nks) / sizeof(nks[0]); b++)
			for (size_t c = 0; c < sizeof(ds) / sizeof(ds[0]); c++) {
				const size_t nq = nqs[a], nk = nks[b], d = ds[c], ld_q = d + 3;
				const size_t ld_s = nk + 3;
				float *q = malloc(nq * ld_q * 4), *k = malloc(nk * d * 4);
				float *s2 = malloc(nq * ld_s * 4), *s5 = malloc(nq * ld_s * 4), bias[64];

				at_fill(q, nq * ld_q, 1.0f);
				at_fill(k, nk * d, 1.0f);
				at_fill(bias, nk, 5.0f);
				for (size_t i = 0; i < nq * ld_s; i++)
					s2[i] = s5[i] = -7.0f;
				kern_ops_for(CPU_LEVEL_AVX2)->attn_scores(q, ld_q, k, d, b & 1 ? bias : NULL,
									  0.125f, s2, ld_s, nq, nk);
				kern_ops_for(CPU_LEVEL_AVX512)->attn_scores(q, ld_q, k, d,
									    b & 1 ? bias : NULL, 0.125f,
									    s5, ld_s, nq, nk);
				ck_assert_msg(memcmp(s2, s5, nq * ld_s * 4) == 0,
					      "avx512 scores %zux%zu d=%zu differ from avx2's", nq, nk, d);
				free(q);
				free(k);
				free(s2);
				free(s5);
			}
}
END_TEST

/* The avx512 level's value sums of float rows (4 queries x 64 columns on
 * ZMM; widths not a multiple of 16 by the AVX2 code) give the AVX2
 * level's bits, ragged rows included, and leave the rows' padding alone. */
START_TEST(avx512_values_equal_avx2_bit_for_bit)
{
	static const size_t nqs[] = {1, 3, 4, 5, 8, 64}, nks[] = {1, 7, 64},
			    ds[] = {16, 64, 72, 80, 128};

	if (!kern_level_runs(CPU_LEVEL_AVX512)) {
		fprintf(stderr, "attention: skipping avx512 values: this CPU lacks avx512\n");
		return;
	}
	for (size_t a = 0; a < sizeof(nqs) / sizeof(nqs[0]); a++)
		for (size_t b = 0; b < sizeof(nks) / sizeof(nks[0]); b++)
			for (size_t c = 0; c < sizeof(ds) / sizeof(ds[0]); c++) {
				const size_t nq = nqs[a], nk = nks[b], d = ds[c];
				const size_t ld_o = d + 16, ld_p = nk + 1;
				float *v = malloc(nk * d * 4), *p = malloc(nq * ld_p * 4), r[64];
				float *o2 = malloc(nq * ld_o * 4), *o5 = malloc(nq * ld_o * 4);

				at_fill(v, nk * d, 2.0f);
				at_fill(p, nq * ld_p, 1.0f);
				at_fill(r, 64, 1.0f);
				at_fill(o2, nq * ld_o, 1.0f);
				memcpy(o5, o2, nq * ld_o * 4);
				kern_ops_for(CPU_LEVEL_AVX2)->attn_accum(o2, ld_o, r, p, ld_p, v, d, nq, nk);
				kern_ops_for(CPU_LEVEL_AVX512)->attn_accum(o5, ld_o, r, p, ld_p, v, d, nq,
									   nk);
				ck_assert_msg(memcmp(o2, o5, nq * ld_o * 4) == 0,
					      "avx512 values %zux%zu d=%zu differ from avx2's", nq, nk, d);
				free(v);
				free(p);
				free(o2);
				free(o5);
			}
}
END_TEST

/* A lone query's value sum equals its row of a tile bit for bit, so
 * decode and prefill agree (scores: checked in at_check_blocks). */
START_TEST(value_rows_do_not_depend_on_the_tile)
{
	enum { NQ = 7, NK = 37, D = 72 };
	float p[NQ * NK], v[NK * D], o0[NQ * D], o[NQ * D], o1[D], r[NQ];

	at_fill(p, NQ * NK, 1.0f);
	at_fill(v, NK * D, 1.0f);
	at_fill(r, NQ, 1.0f);
	at_fill(o0, NQ * D, 1.0f);
	for (size_t li = 0; li < AT_N_LEVELS; li++) {
		const struct kern_ops *ops = kern_ops_for(at_levels[li]);

		if (!kern_level_runs(at_levels[li]))
			continue;
		memcpy(o, o0, sizeof(o));
		ops->attn_accum(o, D, r, p, NK, v, D, NQ, NK);
		for (size_t i = 0; i < NQ; i++) {
			memcpy(o1, o0 + i * D, sizeof(o1));
			ops->attn_accum(o1, D, r + i, p + i * NK, NK, v, D, 1, NK);
			for (size_t c = 0; c < D; c++)
				ck_assert_msg(o1[c] == o[i * D + c], "%s row %zu [%zu]: %g alone, %g in a tile",
					      ops->name, i, c, o1[c], o[i * D + c]);
		}
	}
}
END_TEST

/* ---- the module against float64 -------------------------------------------------- */

struct at_case {
	uint32_t n_head, n_head_kv, dk, dv;
	enum arch_alibi alibi;
	uint32_t kv_type;
	uint32_t n_seq;
	uint32_t past[2];  /* positions already cached per sequence */
	uint32_t n_tok[2]; /* this step's queries per sequence */
};

/* Positions of any case's longest sequence are below this. */
#define AT_MAX_POS 512

static const struct at_case at_cases[] = {
	/* TinyLlama's shape: 4 groups of 8, one prompt of 150 (2 full tiles + 22) */
	{32, 4, 64, 64, ARCH_ALIBI_NONE, DTYPE_F32, 1, {0}, {150}},
	/* the same after a cached prefix: prompt tiles whose key blocks start
	 * inside them (rows before `first`, attend_prompt_heads), F16 rows */
	{32, 4, 64, 64, ARCH_ALIBI_NONE, DTYPE_F16, 1, {37}, {100}},
	{8, 8, 64, 64, ARCH_ALIBI_NONE, DTYPE_F16, 1, {37}, {70}},
	/* a group of 12 on the tiles: stacked runs of 8 and 4 heads */
	{24, 2, 64, 64, ARCH_ALIBI_NONE, DTYPE_F16, 1, {0}, {80}},
	{8, 2, 80, 80, ARCH_ALIBI_F32, DTYPE_F32, 2, {5, 130}, {64, 3}},
	{12, 1, 64, 64, ARCH_ALIBI_BF16, DTYPE_F16, 2, {0, 300}, {90, 1}},
	/* ^ MQA, decode; bf16(j) rounds past 256, slopes of 12 heads are not powers of 2 */
	{4, 2, 40, 24, ARCH_ALIBI_NONE, DTYPE_F32, 1, {10}, {1}},         /* dk != dv */
	{4, 4, 160, 136, ARCH_ALIBI_F32, DTYPE_F16, 1, {3}, {66}},        /* wide heads */
	/* decode tiles sharing a kv head's converted blocks: wide heads (no
	 * local copies), and a group of 12 taken as runs of 8 and 4 */
	{4, 1, 160, 136, ARCH_ALIBI_F32, DTYPE_F16, 2, {40, 70}, {2, 1}},
	{24, 2, 64, 64, ARCH_ALIBI_NONE, DTYPE_F16, 2, {65, 3}, {5, 1}},
	/* long-context decode groups (TinyLlama's shape): 5 and 3 key blocks,
	 * a short last one, the block after next prefetched (attend_heads),
	 * two tiles a call (the regions on 2 threads) */
	{32, 4, 64, 64, ARCH_ALIBI_NONE, DTYPE_F16, 2, {300, 140}, {1, 1}},
};

static float at_bf16(float x)
{
	return kern_bf16_to_fp32(kern_fp32_to_bf16(x));
}

/* Element c of position pos's key (v = 0) or value (v = 1) row of kv
 * head g, layer il. */
static void *at_row(const struct kv_cache *kv, uint32_t il, uint32_t g, int v, uint32_t pos)
{
	return v ? kv_cache_v_at(kv, il, g, pos) : kv_cache_k_at(kv, il, g, pos);
}

static float at_elt(const struct kv_cache *kv, uint32_t il, uint32_t g, int v, uint32_t pos,
		    uint32_t c)
{
	const void *row = at_row(kv, il, g, v, pos);

	return kv->type == DTYPE_F32 ? ((const float *)row)[c]
				     : kern_fp16_to_fp32(((const uint16_t *)row)[c]);
}

static void at_set(struct kv_cache *kv, uint32_t il, uint32_t g, int v, uint32_t pos, uint32_t c,
		   float x)
{
	void *row = at_row(kv, il, g, v, pos);

	if (kv->type == DTYPE_F32)
		((float *)row)[c] = x;
	else
		((uint16_t *)row)[c] = kern_fp32_to_fp16(x);
}

/* Max |out - ref| / max|v| over the case's rows; writes the case's output
 * through attention_run() with `pool`. */
static double at_run_case(const struct at_case *tc, tpool_t pool, float **out_keep)
{
	const uint32_t il = 1;
	struct model_hparams hp = {0};
	struct attention a;
	struct kv_cache kv[2] = {0};
	struct attention_tile tiles[16];
	uint32_t n_tiles = 0, rows = 0, row0[2], s;
	char err[EMBER_ERR_MAX] = "";
	double worst = 0, vmax = 0;

	hp.n_layer = 2;
	hp.n_head = tc->n_head;
	hp.n_head_kv = tc->n_head_kv;
	hp.head_dim_k = tc->dk;
	hp.head_dim_v = tc->dv;
	hp.alibi_max_bias = 8.0f;
	if (attention_init(&a, &hp, tc->alibi, err) != 0) {
		fprintf(stderr, "attention_init: %s\n", err);
		return INFINITY;
	}
	for (s = 0; s < tc->n_seq; s++) {
		const uint32_t n_pos = tc->past[s] + tc->n_tok[s];

		if (kv_cache_init(&kv[s], &hp, n_pos + 3, tc->kv_type, err) != 0)
			return INFINITY;
		for (uint32_t g = 0; g < tc->n_head_kv; g++)
			for (size_t i = 0; i < (size_t)n_pos * tc->dk; i++)
				at_set(&kv[s], il, g, 0, (uint32_t)(i / tc->dk), (uint32_t)(i % tc->dk),
				       at_uniform(1.5f));
		for (uint32_t g = 0; g < tc->n_head_kv; g++)
			for (size_t i = 0; i < (size_t)n_pos * tc->dv; i++) {
				float x = at_uniform(2.0f);

				vmax = fabs(x) > vmax ? fabs(x) : vmax;
				at_set(&kv[s], il, g, 1, (uint32_t)(i / tc->dv), (uint32_t)(i % tc->dv), x);
			}
		kv[s].n_pos = tc->past[s]; /* this step's rows are stored, not yet counted */
		row0[s] = rows;
		n_tiles += attention_plan(tiles + n_tiles, &kv[s], rows, tc->past[s], tc->n_tok[s]);
		for (uint32_t t = 0; t < n_tiles; t++)
			tiles[t].prompt = at_prompt && tiles[t].n > 1;
		rows += tc->n_tok[s];
	}
	float *q = malloc((size_t)rows * tc->n_head * tc->dk * sizeof(float));
	float *out = malloc((size_t)rows * tc->n_head * tc->dv * sizeof(float));
	double *sc = malloc(AT_MAX_POS * sizeof(double)); /* one query's scores */

	at_fill(q, (size_t)rows * tc->n_head * tc->dk, 1.0f);
	attention_run(&a, pool, il, tiles, n_tiles, q, out);
	for (s = 0; s < tc->n_seq; s++)
		for (uint32_t t = 0; t < tc->n_tok[s]; t++)
			for (uint32_t h = 0; h < tc->n_head; h++) {
				const uint32_t pos = tc->past[s] + t, g = h / (tc->n_head / tc->n_head_kv);
				const float *qh = q + ((size_t)(row0[s] + t) * tc->n_head + h) * tc->dk;
				const float *oh = out + ((size_t)(row0[s] + t) * tc->n_head + h) * tc->dv;
				double slope = arch_alibi_slope(h, tc->n_head, 8.0), m = -INFINITY, l = 0;

				if (tc->alibi == ARCH_ALIBI_BF16)
					slope = at_bf16((float)slope);
				for (uint32_t j = 0; j <= pos; j++) {
					double dot = 0, bias = 0;

					for (uint32_t c = 0; c < tc->dk; c++)
						dot += (double)qh[c] * at_elt(&kv[s], il, g, 0, j, c);
					if (tc->alibi == ARCH_ALIBI_F32)
						bias = (float)slope * (float)j;
					else if (tc->alibi == ARCH_ALIBI_BF16)
						bias = at_bf16((float)slope * at_bf16((float)j));
					sc[j] = (dot + bias) / sqrt((double)tc->dk);
					m = sc[j] > m ? sc[j] : m;
				}
				for (uint32_t j = 0; j <= pos; j++)
					l += sc[j] = exp(sc[j] - m);
				for (uint32_t c = 0; c < tc->dv; c++) {
					double want = 0, e;

					for (uint32_t j = 0; j <= pos; j++)
						want += sc[j] * at_elt(&kv[s], il, g, 1, j, c);
					want /= l;
					e = fabs(oh[c] - want) / vmax;
					if (!(e <= worst)) /* NaN too */
						worst = e;
				}
			}
	free(sc);
	free(q);
	if (out_keep)
		*out_keep = out;
	else
		free(out);
	for (s = 0; s < tc->n_seq; s++)
		kv_cache_free(&kv[s]);
	attention_free(&a);
	return worst;
}

/* 1 if n queries in one call (tiles of 64, the last shorter) and in chunks
 * of `chunk` (1: decode) give equal outputs: each query's result must
 * not depend on its tile. Without ALiBi a decode tile's heads go through
 * the kernels as the rows of one call (attend_heads), with it one head a
 * call; decode at 200 positions reads up to 4 key blocks (the block after
 * next prefetched). With a pool and chunk 1, the queries go 3 one-query
 * tiles a call, the decode steps' regions of tasks (attention.c
 * attend_region_cb) on its threads. */
static int at_decode_equals_prefill(enum arch_alibi alibi, uint32_t chunk, tpool_t pool,
				    uint32_t n)
{
	enum { N_MAX = 200, H = 16, HKV = 2, D = 64 };
	const uint32_t N = n < N_MAX ? n : N_MAX;
	struct model_hparams hp = {.n_layer = 1, .n_head = H, .n_head_kv = HKV, .head_dim_k = D,
				   .head_dim_v = D};
	struct attention a;
	struct kv_cache kv;
	/* one call's tiles; 3 one-query tiles a call on a pool */
	struct attention_tile tiles[(N_MAX + ATTENTION_TILE - 1) / ATTENTION_TILE];
	char err[EMBER_ERR_MAX] = "";
	const size_t bytes = (size_t)N_MAX * H * D * sizeof(float);
	float *q = malloc(bytes), *o1 = malloc(bytes), *o2 = malloc(bytes);
	int same = 1;

	if (attention_init(&a, &hp, alibi, err) != 0 ||
	    kv_cache_init(&kv, &hp, N, DTYPE_F16, err) != 0)
		return 0;
	for (size_t i = 0; i < (size_t)HKV * N * D; i++) {
		((uint16_t *)kv.k)[i] = kern_fp32_to_fp16(at_uniform(1.0f));
		((uint16_t *)kv.v)[i] = kern_fp32_to_fp16(at_uniform(1.0f));
	}
	at_fill(q, N * H * D, 1.0f);
	{
		const uint32_t nt = attention_plan(tiles, &kv, 0, 0, N);

		for (uint32_t i = 0; i < nt; i++)
			tiles[i].prompt = at_prompt;
		attention_run(&a, NULL, 0, tiles, nt, q, o1);
	}
	for (uint32_t t = 0; t < N;) {
		const uint32_t nc = N - t < chunk ? N - t : chunk;
		uint32_t nt = attention_plan(tiles, &kv, t, t, nc);

		t += nc;
		while (pool && chunk == 1 && nt < 3 && t < N) /* more one-query tiles */
			nt += attention_plan(tiles + nt, &kv, t, t, 1), t++;
		for (uint32_t i = 0; i < nt; i++)
			tiles[i].prompt = at_prompt;
		attention_run(&a, pool, 0, tiles, nt, q, o2);
	}
	for (size_t i = 0; i < (size_t)N * H * D; i++)
		same &= o1[i] == o2[i];
	free(q);
	free(o1);
	free(o2);
	kv_cache_free(&kv);
	attention_free(&a);
	return same;
}

/* Child: every case at `level`, alone and on 2 threads (identical), then
 * one prompt token by token against the same prompt in one call. */
static int at_child(enum cpu_level level)
{
	tpool_t pool;
	int bad = 0;

	setenv("EMBER_CPU", cpu_level_name(level), 1);
	if (kern_init() != level) {
		fprintf(stderr, "attention: level %s not selectable in this process\n",
			cpu_level_name(level));
		return 3;
	}
	pool = tpool_create(2);
	for (size_t i = 0; i < sizeof(at_cases) / sizeof(at_cases[0]); i++) {
		float *o1 = NULL, *o2 = NULL;
		uint64_t seed = at_rng;
		double e1 = at_run_case(&at_cases[i], NULL, &o1), e2;
		const struct at_case *tc = &at_cases[i];
		size_t n = (size_t)(tc->n_tok[0] + (tc->n_seq > 1 ? tc->n_tok[1] : 0)) * tc->n_head *
			   tc->dv;

		at_rng = seed;
		e2 = at_run_case(&at_cases[i], pool, &o2);
		if (getenv("AT_VERBOSE"))
			fprintf(stderr, "attention %s case %zu: error %.3g\n", cpu_level_name(level), i,
				e1);
		if (!(e1 <= (at_prompt ? AT_TOL_BF16 : AT_TOL)) || e1 != e2 ||
		    memcmp(o1, o2, n * sizeof(float)) != 0) {
			fprintf(stderr, "attention %s case %zu: error %.3g (threaded %.3g) > %g or "
				"threads differ\n", cpu_level_name(level), i, e1, e2,
				at_prompt ? AT_TOL_BF16 : AT_TOL);
			bad = 1;
		}
		free(o1);
		free(o2);
	}
	/* decode: float tiles, the same bits one by one as in one call, alone
	 * and on 2 threads; prompt tiles (amx, bf16): the same bits in chunks
	 * of 30, 7 and 1 */
	if (!at_prompt && (!at_decode_equals_prefill(ARCH_ALIBI_F32, 1, NULL, 200) ||
			   !at_decode_equals_prefill(ARCH_ALIBI_NONE, 1, NULL, 200) ||
			   !at_decode_equals_prefill(ARCH_ALIBI_NONE, 1, pool, 200))) {
		fprintf(stderr, "attention %s: decode differs from prefill\n", cpu_level_name(level));
		bad = 1;
	}
	/* 129 and 193: one call ends with a one-row prompt tile; chunk 1 on
	 * the pool: one-row prompt tiles only, as decode's regions */
	if (at_prompt && (!at_decode_equals_prefill(ARCH_ALIBI_F32, 30, NULL, 129) ||
			  !at_decode_equals_prefill(ARCH_ALIBI_NONE, 7, NULL, 193) ||
			  !at_decode_equals_prefill(ARCH_ALIBI_NONE, 1, pool, 100) ||
			  !at_decode_equals_prefill(ARCH_ALIBI_NONE, 30, NULL, 200))) {
		fprintf(stderr, "attention %s: prompt rows in chunks differ from one call\n",
			cpu_level_name(level));
		bad = 1;
	}
	tpool_destroy(pool);
	return bad;
}

static void at_check_level(enum cpu_level level, int prompt)
{
	pid_t pid;
	int status = 0;

	if (!kern_level_runs(level)) {
		fprintf(stderr, "attention: skipping the %s level: this CPU lacks it\n",
			cpu_level_name(level));
		return;
	}
	if (getenv("EMBER_TEST_NO_FORK")) { /* qemu-user: tests/arm64/run_qemu.sh */
		fprintf(stderr, "attention: %s level end to end skipped: no fork here\n",
			cpu_level_name(level));
		return;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		at_prompt = prompt;
		exit(at_child(level));
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "attention at %s: child status %#x (see stderr)", cpu_level_name(level),
		      status);
}

START_TEST(attention_matches_float64_softmax_at_scalar_level)
{
	at_check_level(CPU_LEVEL_SCALAR, 0);
}
END_TEST

START_TEST(attention_matches_float64_softmax_at_avx2_level)
{
	at_check_level(CPU_LEVEL_AVX2, 0);
}
END_TEST

/* The avx512 level: prompt tiles on its VDPBF16PS blocks where the CPU
 * has AVX512-BF16 (else its float kernels), within AT_TOL_BF16, the same
 * bits in any chunking and thread count. */
START_TEST(attention_matches_float64_softmax_at_avx512_level)
{
	at_check_level(CPU_LEVEL_AVX512, 0);
	at_check_level(CPU_LEVEL_AVX512, 1);
}
END_TEST

/* The amx level: sampled-row tiles as avx512 (float kernels, AT_TOL);
 * prompt tiles on its bf16 tiles within AT_TOL_BF16, the same bits in
 * any chunking and thread count. */
START_TEST(attention_matches_float64_softmax_at_amx_level)
{
	at_check_level(CPU_LEVEL_AMX, 0);
	at_check_level(CPU_LEVEL_AMX, 1);
}
END_TEST

START_TEST(attention_matches_float64_softmax_at_neon_level)
{
	at_check_level(CPU_LEVEL_NEON, 0);
}
END_TEST

START_TEST(init_rejects_too_wide_heads_and_ragged_groups)
{
	struct model_hparams hp = {0};
	struct attention a;
	char err[EMBER_ERR_MAX] = "";

	hp.n_head = 8;
	hp.n_head_kv = 3;
	hp.head_dim_k = hp.head_dim_v = 64;
	ck_assert_int_eq(attention_init(&a, &hp, ARCH_ALIBI_NONE, err), EMBER_EUNSUPPORTED);
	hp.n_head_kv = 2;
	hp.head_dim_v = ATTENTION_MAX_HEAD_DIM + 1;
	ck_assert_int_eq(attention_init(&a, &hp, ARCH_ALIBI_NONE, err), EMBER_EUNSUPPORTED);
	hp.head_dim_v = 64;
	ck_assert_int_eq(attention_init(&a, &hp, ARCH_ALIBI_BF16, err), 0);
	ck_assert_ptr_nonnull(a.slopes);
	attention_free(&a);
	attention_free(&a);
}
END_TEST

START_TEST(plan_cuts_tiles_of_at_most_attention_tile)
{
	struct attention_tile t[8];
	struct kv_cache kv = {0};

	ck_assert_uint_eq(attention_plan(t, &kv, 10, 5, 1), 1);
	ck_assert_uint_eq(t[0].row, 10);
	ck_assert_uint_eq(t[0].pos, 5);
	ck_assert_uint_eq(t[0].n, 1);
	ck_assert_uint_eq(attention_plan(t, &kv, 0, 0, 2 * ATTENTION_TILE + 3), 3);
	ck_assert_uint_eq(t[1].row, ATTENTION_TILE);
	ck_assert_uint_eq(t[1].pos, ATTENTION_TILE);
	ck_assert_uint_eq(t[1].n, ATTENTION_TILE);
	ck_assert_uint_eq(t[2].n, 3);
	ck_assert_ptr_eq(t[2].kv, &kv);
}
END_TEST

Suite *suite_attention(void)
{
	Suite *s = suite_create("attention");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, exp_sum_is_within_its_bound_of_exp_over_the_float_range);
	tcase_add_test(tc, avx512_scores_equal_avx2_bit_for_bit);
	tcase_add_test(tc, avx512_values_equal_avx2_bit_for_bit);
	tcase_add_test(tc, exp_sum_subtracts_the_maximum_and_returns_the_sum);
	tcase_add_test(tc, max_skips_nan_and_is_minus_infinity_when_empty);
	tcase_add_test(tc, fp16_rows_convert_exactly);
	tcase_add_test(tc, score_and_value_blocks_match_reference_on_every_level);
	tcase_add_test(tc, value_rows_do_not_depend_on_the_tile);
	tcase_add_test(tc, attention_matches_float64_softmax_at_scalar_level);
	tcase_add_test(tc, attention_matches_float64_softmax_at_avx2_level);
	tcase_add_test(tc, attention_matches_float64_softmax_at_avx512_level);
	tcase_add_test(tc, attention_matches_float64_softmax_at_amx_level);
	tcase_add_test(tc, attention_matches_float64_softmax_at_neon_level);
	tcase_add_test(tc, init_rejects_too_wide_heads_and_ragged_groups);
	tcase_add_test(tc, plan_cuts_tiles_of_at_most_attention_tile);
	suite_add_tcase(s, tc);
	return s;
}
