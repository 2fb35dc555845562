/*
 * test_attention_simd.c - the SIMD levels' own attention kernels (the
 * kernel table's attn_scores_f16 / attn_accum_f16 and the avx512 softmax
 * rows), each against the AVX2 kernel on float rows it must equal bit for
 * bit (a token's result must not depend on the path its attention took).
 * Skipped, with a line, where the CPU lacks the level.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "attention.h"
#include "cpu.h"
#include "dtype.h"
#include "ember.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "kv_cache.h"

#if defined(__x86_64__)
static uint64_t as_rng = 0x9e3779b97f4a7c15ull;

static void at_fill(float *x, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++) {
		as_rng = as_rng * 6364136223846793005ull + 1442695040888963407ull;
		x[i] = ((float)(as_rng >> 40) / 16777216.0f * 2.0f - 1.0f) * scale;
	}
}

/* The F16-in-place score and value kernels (decode groups, attention.c)
 * against the float ones on the same rows converted: bit for bit, ragged
 * tiles, head widths that are not a multiple of 8, and biases included. */
static void at_check_f16_kernels(size_t nq, size_t nk, size_t d, int with_bias)
{
	const size_t ld_q = d + 3, ld_p = nk + 1;
	float *q = malloc(nq * ld_q * 4), *kf = malloc(nk * d * 4), *vf = malloc(nk * d * 4);
	uint16_t *kh = malloc(nk * d * 2), *vh = malloc(nk * d * 2);
	float *s0 = calloc(nq * nk, 4), *s1 = calloc(nq * nk, 4), *p = malloc(nq * ld_p * 4);
	float *o0 = malloc(nq * d * 4), *o1 = malloc(nq * d * 4), r[32], bias[64];

	at_fill(q, nq * ld_q, 1.0f);
	at_fill(kf, nk * d, 2.0f);
	at_fill(vf, nk * d, 2.0f);
	at_fill(p, nq * ld_p, 1.0f);
	at_fill(o0, nq * d, 1.0f);
	at_fill(r, 32, 1.0f);
	at_fill(bias, nk, 5.0f);
	memcpy(o1, o0, nq * d * 4);
	kern_fp32_to_fp16_row(kf, kh, nk * d);
	kern_fp32_to_fp16_row(vf, vh, nk * d);
	kern_fp16_to_fp32_row(kh, kf, nk * d);
	kern_fp16_to_fp32_row(vh, vf, nk * d);
	kern_avx2_attn_scores(q, ld_q, kf, d, with_bias ? bias : NULL, 0.125f, s0, nk, nq, nk);
	kern_avx2_attn_scores_f16(q, ld_q, kh, d, with_bias ? bias : NULL, 0.125f, s1, nk, nq, nk);
	ck_assert_msg(memcmp(s0, s1, nq * nk * 4) == 0, "avx2 f16 scores %zux%zu d=%zu differ", nq,
		      nk, d);
	if (kern_level_runs(CPU_LEVEL_AVX512)) {
		kern_avx512_attn_scores_f16(q, ld_q, kh, d, with_bias ? bias : NULL, 0.125f, s1, nk,
					    nq, nk);
		ck_assert_msg(memcmp(s0, s1, nq * nk * 4) == 0,
			      "avx512 f16 scores %zux%zu d=%zu differ from avx2's", nq, nk, d);
	}
	kern_avx2_attn_accum(o0, d, r, p, ld_p, vf, d, nq, nk);
	kern_avx2_attn_accum_f16(o1, d, r, p, ld_p, vh, d, nq, nk);
	ck_assert_msg(memcmp(o0, o1, nq * d * 4) == 0, "avx2 f16 values %zux%zu d=%zu differ", nq,
		      nk, d);
	if (kern_level_runs(CPU_LEVEL_AVX512)) {
		memcpy(o1, o0, nq * d * 4);
		kern_avx2_attn_accum(o0, d, r, p, ld_p, vf, d, nq, nk);
		kern_avx512_attn_accum_f16(o1, d, r, p, ld_p, vh, d, nq, nk);
		ck_assert_msg(memcmp(o0, o1, nq * d * 4) == 0,
			      "avx512 f16 values %zux%zu d=%zu differ from avx2's", nq, nk, d);
	}
	free(q);
	free(kf);
	free(vf);
	free(kh);
	free(vh);
	free(s0);
	free(s1);
	free(p);
	free(o0);
	free(o1);
}
#endif

/* The avx512 softmax rows (attention.c at that level) against the AVX2
 * ones: exp_sum the same bits (values and sum) for every row length, a
 * masked tail included; max the same value, NaNs skipped. */
START_TEST(avx512_softmax_rows_equal_avx2)
{
#if defined(__x86_64__)
	float x[131], a[131], b[131];

	if (!kern_level_runs(CPU_LEVEL_AVX512)) {
		fprintf(stderr, "attention: skipping avx512 softmax rows: this CPU lacks avx512\n");
		return;
	}
	for (size_t n = 0; n <= 131; n++) {
		at_fill(x, 131, 20.0f);
		if (n > 3) {
			x[n / 2] = -INFINITY;
			x[n / 3] = NAN;
		}
		const float m2 = kern_avx2_max(x, n), m5 = kern_avx512_max(x, n);
		ck_assert_msg(m2 == m5 || (isinf(m2) && isinf(m5)), "max n=%zu: %g vs %g", n, m2, m5);
		if (n > 3)
			x[n / 3] = 1.0f; /* no NaN scores in a softmax block */
		memcpy(a, x, sizeof(x));
		memcpy(b, x, sizeof(x));
		const float s2 = kern_avx2_exp_sum(a, n, m2), s5 = kern_avx512_exp_sum(b, n, m2);
		ck_assert_msg(memcmp(&s2, &s5, sizeof(s2)) == 0 && memcmp(a, b, sizeof(a)) == 0,
			      "exp_sum n=%zu: %.9g vs %.9g", n, s2, s5);
	}
	/* every 4099th float bit pattern (both signs, subnormal results,
	 * infinities, NaNs) through exp(x - 0): math_avx512.h's one-step
	 * scaling (VSCALEFPS) gives the AVX2 split's bits (all 2^32 patterns
	 * were compared once, LEVELS.md) */
	{
		enum { N = 4096 };
		static float e2[N], e5[N];
		uint64_t u = 0;

		while (u < (1ull << 32)) {
			for (size_t i = 0; i < N; i++, u += 4099) {
				const uint32_t b = (uint32_t)u;

				memcpy(&e2[i], &b, sizeof(b));
			}
			memcpy(e5, e2, sizeof(e2));
			kern_avx2_exp_sum(e2, N, 0.0f);
			kern_avx512_exp_sum(e5, N, 0.0f);
			for (size_t i = 0; i < N; i++)
				ck_assert_msg(memcmp(&e2[i], &e5[i], sizeof(float)) == 0,
					      "exp: avx2 %a, avx512 %a", (double)e2[i], (double)e5[i]);
		}
	}
	for (size_t n = 1; n <= 40; n++) { /* all NaN: -inf, as the AVX2 level */
		for (size_t i = 0; i < n; i++)
			x[i] = NAN;
		ck_assert(isinf(kern_avx512_max(x, n)) && kern_avx512_max(x, n) < 0);
	}
#else
	fprintf(stderr, "attention: skipping avx512 softmax rows: x86-64 only\n");
#endif
}
END_TEST

#if defined(__x86_64__)
static double at_bf(float x)
{
	return (double)kern_bf16_to_fp32(kern_fp32_to_bf16(x));
}

/* Bound of the prompt-row bf16 tiles against a float64 sum of the same
 * bf16-rounded operands: the tile's products of bf16 pairs are exact in
 * fp32, so only its fp32 additions round (d or nk of them): 1e-5 of
 * sum |a b| (the bf16 GEMM self-test's bound), plus the output's own
 * rounding. */
#define AT_BF16_BOUND 1e-5

/* A level's prompt-row bf16 blocks (kernels_impl.h's kern_ops fields). */
struct at_bf16_ops {
	void (*q_bf16)(const float *q, size_t ld_q, size_t d, size_t nq, uint16_t *qt);
	void (*scores_bf16)(const uint16_t *qt, const void *k, int f16, size_t d,
			    const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			    size_t nk);
	void (*accum_bf16)(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			   const void *v, int f16, size_t d, size_t nq, size_t nk);
	/* the fused calls (kernels.h kern_attn_scores_softmax_bf16,
	 * kern_attn_accum_bf16_tiles) */
	void (*scores_softmax)(const uint16_t *qt, const void *k, int f16, size_t d, float scale,
			       const uint32_t *lo, const uint32_t *hi, size_t nq, size_t nk,
			       float *m, float *l, float *r, uint16_t *pt);
	void (*accum_tiles)(float *o, size_t ld_o, const float *r, const uint16_t *pt,
			    const void *v, int f16, size_t d, size_t nq, size_t nk);
	const char *name;
};

static const struct at_bf16_ops at_amx_bf16 = {
	kern_amx_attn_q_bf16,		   kern_amx_attn_scores_bf16,
	kern_amx_attn_accum_bf16,	   kern_amx_attn_scores_softmax_bf16,
	kern_amx_attn_accum_bf16_tiles, "amx"};
static const struct at_bf16_ops at_avx512_bf16 = {
	kern_avx512_attn_q_bf16,	      kern_avx512_attn_scores_bf16,
	kern_avx512_attn_accum_bf16,	      kern_avx512_attn_scores_softmax_bf16,
	kern_avx512_attn_accum_bf16_tiles, "avx512"};

/* Whether ops' level runs here (the avx512 blocks: AVX512-BF16 too). */
static int at_bf16_runs(const struct at_bf16_ops *ops)
{
	struct cpu_features f;

	cpu_detect(&f);
	return ops == &at_amx_bf16 ? kern_level_runs(CPU_LEVEL_AMX)
				   : kern_level_runs(CPU_LEVEL_AVX512) && f.avx512_bf16;
}

/* A level's kern_attn_scores_bf16 / kern_attn_accum_bf16 (prompt rows:
 * attention_amx.c, attention_bf16_avx512.c) against float64 on
 * bf16-rounded operands, keys and values as floats and as F16 rows, and
 * nothing written past the nq x nk scores or the nq x d outputs (guard
 * values). */
static void at_check_bf16(const struct at_bf16_ops *ops, size_t nq, size_t nk, size_t d, int f16,
			  int with_bias)
{
	const size_t ld_q = d + 32, ld_s = 72, ld_p = 64, ld_o = d + 16;
	float *q = malloc(nq * ld_q * 4), *kf = malloc(nk * d * 4), *vf = malloc(nk * d * 4);
	uint16_t *kh = malloc(nk * d * 2), *vh = malloc(nk * d * 2);
	float *s = malloc(nq * ld_s * 4), *p = malloc(nq * ld_p * 4), *o = malloc(nq * ld_o * 4);
	float *o0 = malloc(nq * ld_o * 4), r[64], bias[64];
	const float scale = 0.125f;

	at_fill(q, nq * ld_q, 1.0f);
	at_fill(kf, nk * d, 2.0f);
	at_fill(vf, nk * d, 2.0f);
	at_fill(p, nq * ld_p, 1.0f);
	at_fill(o0, nq * ld_o, 1.0f);
	at_fill(r, 64, 1.0f);
	at_fill(bias, 64, 5.0f);
	for (size_t i = 0; i < nq * ld_s; i++)
		s[i] = 12345.0f;
	memcpy(o, o0, nq * ld_o * 4);
	kern_fp32_to_fp16_row(kf, kh, nk * d);
	kern_fp32_to_fp16_row(vf, vh, nk * d);
	kern_fp16_to_fp32_row(kh, kf, nk * d); /* either form: the same values */
	kern_fp16_to_fp32_row(vh, vf, nk * d);
	uint16_t *qt = aligned_alloc(64, KERN_ATTN_BF16_QT(nq, d) * 2);

	ops->q_bf16(q, ld_q, d, nq, qt);
	ops->scores_bf16(qt, f16 ? (const void *)kh : kf, f16, d, with_bias ? bias : NULL, scale,
			 s, ld_s, nq, nk);
	free(qt);
	for (size_t i = 0; i < nq; i++) {
		for (size_t j = 0; j < nk; j++) {
			double dot = 0, mag = 0;

			for (size_t c = 0; c < d; c++) {
				dot += at_bf(q[i * ld_q + c]) * at_bf(kf[j * d + c]);
				mag += fabs(at_bf(q[i * ld_q + c]) * at_bf(kf[j * d + c]));
			}
			const double want = (dot + (with_bias ? bias[j] : 0.0)) * scale;
			const double got = s[i * ld_s + j];

			ck_assert_msg(fabs(got - want) <= (AT_BF16_BOUND * mag + 1e-6 * fabs(want)) *
								   scale + 1e-30,
				      "bf16 scores %zux%zu d=%zu f16=%d (%zu,%zu): %g, want %g", nq,
				      nk, d, f16, i, j, got, want);
		}
		for (size_t j = nk; j < ld_s; j++)
			ck_assert_msg(s[i * ld_s + j] == 12345.0f, "bf16 scores wrote past nk");
	}
	ops->accum_bf16(o, ld_o, r, p, ld_p, f16 ? (const void *)vh : vf, f16, d, nq, nk);
	for (size_t i = 0; i < nq; i++) {
		for (size_t c = 0; c < d; c++) {
			double sum = 0, mag = 0;

			for (size_t j = 0; j < nk; j++) {
				sum += at_bf(p[i * ld_p + j]) * at_bf(vf[j * d + c]);
				mag += fabs(at_bf(p[i * ld_p + j]) * at_bf(vf[j * d + c]));
			}
			const double base = (double)o0[i * ld_o + c] * r[i];
			const double want = base + sum, got = o[i * ld_o + c];

			ck_assert_msg(fabs(got - want) <=
					      AT_BF16_BOUND * (mag + fabs(base)) + 1e-6 * fabs(want),
				      "bf16 values %zux%zu d=%zu f16=%d (%zu,%zu): %g, want %g", nq,
				      nk, d, f16, i, c, got, want);
		}
		for (size_t c = d; c < ld_o; c++)
			ck_assert_msg(o[i * ld_o + c] == o0[i * ld_o + c], "bf16 values wrote past d");
	}
	free(q);
	free(kf);
	free(vf);
	free(kh);
	free(vh);
	free(s);
	free(p);
	free(o);
	free(o0);
}
#endif

#if defined(__x86_64__)
/* at_check_bf16 over query rows x key counts x head widths (the 16- to
 * 48-column value tails of the avx512 blocks at 96 and 160) where ops'
 * level runs. */
static void at_bf16_blocks(const struct at_bf16_ops *ops)
{
	static const size_t nqs[] = {1, 3, 4, 5, 16, 17, 40, 64}, nks[] = {1, 7, 16, 33, 63, 64},
			    ds[] = {32, 64, 96, 128, 160, 256};

	if (!at_bf16_runs(ops)) {
		fprintf(stderr, "attention: skipping %s bf16 blocks: this CPU or kernel lacks them\n",
			ops->name);
		return;
	}
	for (size_t a = 0; a < sizeof(nqs) / sizeof(nqs[0]); a++)
		for (size_t b = 0; b < sizeof(nks) / sizeof(nks[0]); b++)
			for (size_t c = 0; c < sizeof(ds) / sizeof(ds[0]); c++)
				at_check_bf16(ops, nqs[a], nks[b], ds[c], (a + c) & 1, (a + b) & 1);
}
#endif

START_TEST(amx_bf16_blocks_within_bound_of_float64)
{
#if defined(__x86_64__)
	at_bf16_blocks(&at_amx_bf16);
#else
	fprintf(stderr, "attention: skipping amx bf16 blocks: x86-64 only\n");
#endif
}
END_TEST

/* The avx512 level's VDPBF16PS blocks (CPUs with AVX512-BF16, no AMX). */
START_TEST(avx512_bf16_blocks_within_bound_of_float64)
{
#if defined(__x86_64__)
	at_bf16_blocks(&at_avx512_bf16);
#else
	fprintf(stderr, "attention: skipping avx512 bf16 blocks: x86-64 only\n");
#endif
}
END_TEST

#if defined(__x86_64__)
/* The rows' key ranges [lo, hi) and running states for the bf16
 * softmax checks: ragged ranges (all keys, none, a prefix, a window
 * inside the block) and every third row with no earlier block (m -inf,
 * l 0); m, l filled by the caller, copied to m0, l0; r and r0 poisoned. */
static void at_ragged_rows(size_t nq, size_t nk, uint32_t *lo, uint32_t *hi, float *m, float *l,
			   float *r, float *m0, float *l0, float *r0)
{
	for (size_t i = 0; i < nq; i++) {
		const uint32_t a = (uint32_t)((i * 7) % nk), b = (uint32_t)(nk - (i * 3) % nk);

		switch (i % 5) {
		case 0: lo[i] = 0, hi[i] = (uint32_t)nk; break;
		case 1: lo[i] = hi[i] = (uint32_t)(i % nk); break;
		case 2: lo[i] = 0, hi[i] = 1 + (uint32_t)(i % nk); break;
		default: lo[i] = a < b ? a : b, hi[i] = a < b ? b : a; break;
		}
		l[i] = fabsf(l[i]) + 0.5f;
		if (i % 3 == 0) /* no earlier block */
			m[i] = -INFINITY, l[i] = 0.0f;
		m0[i] = m[i], l0[i] = l[i], r0[i] = r[i] = 777.0f;
	}
}

/* kern_amx_attn_softmax_bf16 + kern_amx_attn_accum_bf16_tiles (the fused
 * prompt softmax, attn16) against attention.c's former steps, bit for
 * bit: per row kern_avx512_max and kern_avx512_exp_sum_prompt over the
 * row's keys [lo, hi), the rest of the row set to 0, then
 * kern_amx_attn_accum_bf16 of the float weights. Rows see ragged ranges
 * (none, a prefix, a window inside the block, all of it), some with a
 * state from earlier blocks, nq not a multiple of 16 (a padded group),
 * nk below 64; and nothing written past KERN_ATTN_BF16_PT(nq, nk).
 * Then kern_amx_attn_out_bf16 against o * (1.0f / l) per element. */
static void at_check_softmax_bf16(const struct at_bf16_ops *ops, size_t nq, size_t nk, size_t d,
				  int f16)
{
	const size_t ld_s = 64, ld_o = d, npt = KERN_ATTN_BF16_PT(nq, nk);
	float *s = malloc(nq * ld_s * 4), *s0 = malloc(nq * ld_s * 4);
	float *vf = malloc(nk * d * 4), *o = malloc(nq * ld_o * 4), *o0 = malloc(nq * ld_o * 4);
	float *m = malloc(nq * 4), *l = malloc(nq * 4), *r = malloc(nq * 4);
	float *m0 = malloc(nq * 4), *l0 = malloc(nq * 4), *r0 = malloc(nq * 4);
	float *out = malloc(nq * d * 4);
	uint32_t *lo = malloc(nq * 4), *hi = malloc(nq * 4);
	uint16_t *vh = malloc(nk * d * 2), *pt = aligned_alloc(64, (npt + 64) * 2);

	at_fill(s, nq * ld_s, 8.0f);
	at_fill(vf, nk * d, 2.0f);
	at_fill(o, nq * ld_o, 1.0f);
	at_fill(l, nq, 1.0f);
	at_fill(m, nq, 4.0f);
	kern_fp32_to_fp16_row(vf, vh, nk * d);
	kern_fp16_to_fp32_row(vh, vf, nk * d);
	memcpy(s0, s, nq * ld_s * 4);
	memcpy(o0, o, nq * ld_o * 4);
	at_ragged_rows(nq, nk, lo, hi, m, l, r, m0, l0, r0);
	for (size_t i = 0; i < npt + 64; i++)
		pt[i] = 0x5a5a;
	/* the former steps, on s0 / m0 / l0 / r0 / o0 */
	for (size_t i = 0; i < nq; i++) {
		float *x = s0 + i * ld_s;

		if (lo[i] == hi[i]) {
			r0[i] = 1.0f;
			memset(x, 0, ld_s * 4);
			continue;
		}
		const float mx = kern_avx512_max(x + lo[i], hi[i] - lo[i]);
		const float m1 = mx > m0[i] ? mx : m0[i];

		float e = m0[i]; /* the rescale by the prompt rows' exp (attn17) */

		kern_avx512_exp_sum_prompt(&e, 1, m1);
		r0[i] = m1 == m0[i] ? 1.0f : e;
		l0[i] = l0[i] * r0[i] + kern_avx512_exp_sum_prompt(x + lo[i], hi[i] - lo[i], m1);
		m0[i] = m1;
		memset(x, 0, lo[i] * 4);
		memset(x + hi[i], 0, (ld_s - hi[i]) * 4);
	}
	ops->accum_bf16(o0, ld_o, r0, s0, ld_s, f16 ? (const void *)vh : vf, f16, d, nq, nk);
	kern_amx_attn_softmax_bf16(s, ld_s, lo, hi, nq, nk, m, l, r, pt);
	for (size_t i = npt; i < npt + 64; i++)
		ck_assert_msg(pt[i] == 0x5a5a, "softmax_bf16 %zux%zu wrote past its tiles", nq, nk);
	ops->accum_tiles(o, ld_o, r, pt, f16 ? (const void *)vh : vf, f16, d, nq, nk);
	for (size_t i = 0; i < nq; i++) {
		ck_assert_msg(memcmp(&m[i], &m0[i], 4) == 0 && memcmp(&l[i], &l0[i], 4) == 0 &&
				      memcmp(&r[i], &r0[i], 4) == 0,
			      "softmax_bf16 %zux%zu row %zu [%u,%u): m %g/%g l %g/%g r %g/%g", nq,
			      nk, i, lo[i], hi[i], m[i], m0[i], l[i], l0[i], r[i], r0[i]);
		ck_assert_msg(memcmp(o + i * ld_o, o0 + i * ld_o, d * 4) == 0,
			      "accum_bf16_tiles %zux%zu d=%zu f16=%d row %zu differs", nq, nk, d,
			      f16, i);
	}
	kern_amx_attn_out_bf16(o, ld_o, l, out, d, d, nq);
	for (size_t i = 0; i < nq; i++)
		for (size_t c = 0; c < d; c++) {
			const float want = o[i * ld_o + c] * (1.0f / l[i]);

			ck_assert_msg(memcmp(&out[i * d + c], &want, 4) == 0,
				      "attn_out_bf16 row %zu col %zu", i, c);
		}
	free(s), free(s0), free(vf), free(o), free(o0), free(m), free(l), free(r);
	free(m0), free(l0), free(r0), free(out), free(lo), free(hi), free(vh), free(pt);
}
#endif

#if defined(__x86_64__)
/* kern_amx_attn_scores_softmax_bf16 (attn17: the scores kept in L1)
 * against kern_amx_attn_scores_bf16 (no bias) then
 * kern_amx_attn_softmax_bf16 on the stored scores: the same weights'
 * tiles, l and r bit for bit, m equal (a zero's sign aside), nothing
 * written past the tiles; ragged ranges and states as above. */
static void at_check_scores_softmax_bf16(const struct at_bf16_ops *ops, size_t nq, size_t nk,
					 size_t d, int f16)
{
	const size_t npt = KERN_ATTN_BF16_PT(nq, nk);
	const float scale = 1.0f / sqrtf((float)d);
	float *q = malloc(nq * d * 4), *kf = malloc(nk * d * 4), *s = malloc(nq * 64 * 4);
	float *m = malloc(nq * 4), *l = malloc(nq * 4), *r = malloc(nq * 4);
	float *m0 = malloc(nq * 4), *l0 = malloc(nq * 4), *r0 = malloc(nq * 4);
	uint32_t *lo = malloc(nq * 4), *hi = malloc(nq * 4);
	uint16_t *kh = malloc(nk * d * 2), *qt = aligned_alloc(64, KERN_ATTN_BF16_QT(nq, d) * 2);
	uint16_t *pt = aligned_alloc(64, (npt + 64) * 2), *pt0 = aligned_alloc(64, (npt + 64) * 2);

	at_fill(q, nq * d, 3.0f);
	at_fill(kf, nk * d, 3.0f);
	at_fill(l, nq, 1.0f);
	at_fill(m, nq, 4.0f);
	kern_fp32_to_fp16_row(kf, kh, nk * d);
	kern_fp16_to_fp32_row(kh, kf, nk * d);
	at_ragged_rows(nq, nk, lo, hi, m, l, r, m0, l0, r0);
	for (size_t i = 0; i < npt + 64; i++)
		pt[i] = pt0[i] = 0x5a5a;
	ops->q_bf16(q, d, d, nq, qt);
	ops->scores_bf16(qt, f16 ? (const void *)kh : kf, f16, d, NULL, scale, s, 64, nq, nk);
	kern_amx_attn_softmax_bf16(s, 64, lo, hi, nq, nk, m0, l0, r0, pt0);
	ops->scores_softmax(qt, f16 ? (const void *)kh : kf, f16, d, scale, lo, hi, nq, nk, m, l,
			    r, pt);
	ck_assert_msg(memcmp(pt, pt0, (npt + 64) * 2) == 0,
		      "scores_softmax_bf16 %zux%zu d=%zu: weights' tiles differ", nq, nk, d);
	for (size_t i = 0; i < nq; i++)
		ck_assert_msg(m[i] == m0[i] && memcmp(&l[i], &l0[i], 4) == 0 &&
				      memcmp(&r[i], &r0[i], 4) == 0,
			      "scores_softmax_bf16 %zux%zu row %zu [%u,%u): m %g/%g l %g/%g "
			      "r %g/%g",
			      nq, nk, i, lo[i], hi[i], m[i], m0[i], l[i], l0[i], r[i], r0[i]);
	free(q), free(kf), free(s), free(m), free(l), free(r), free(m0), free(l0), free(r0);
	free(lo), free(hi), free(kh), free(qt), free(pt), free(pt0);
}
#endif

#if defined(__x86_64__)
/* check over query rows x key counts x head widths (F16 or float keys
 * alternating), where ops' level runs; what names it in the skip. */
static void at_for_bf16_cases(const struct at_bf16_ops *ops,
			      void (*check)(const struct at_bf16_ops *, size_t, size_t, size_t, int),
			      const char *what)
{
	static const size_t nqs[] = {1, 5, 16, 17, 40, 64, 256}, nks[] = {1, 7, 16, 33, 63, 64},
			    ds[] = {64, 128};

	if (!at_bf16_runs(ops)) {
		fprintf(stderr, "attention: skipping %s %s: this CPU or kernel lacks it\n",
			ops->name, what);
		return;
	}
	for (size_t a = 0; a < sizeof(nqs) / sizeof(nqs[0]); a++)
		for (size_t b = 0; b < sizeof(nks) / sizeof(nks[0]); b++)
			for (size_t c = 0; c < sizeof(ds) / sizeof(ds[0]); c++)
				check(ops, nqs[a], nks[b], ds[c], (a + b + c) & 1);
}
#endif

/* At the amx level (its tiles) and the avx512 level (VDPBF16PS, where
 * the CPU has AVX512-BF16: attention_bf16_avx512.c with the shared
 * softmax step, softmax16_avx512.h). */
START_TEST(amx_scores_softmax_equals_the_two_calls)
{
#if defined(__x86_64__)
	at_for_bf16_cases(&at_amx_bf16, at_check_scores_softmax_bf16, "scores + softmax");
	at_for_bf16_cases(&at_avx512_bf16, at_check_scores_softmax_bf16, "scores + softmax");
#else
	fprintf(stderr, "attention: skipping amx scores + softmax: x86-64 only\n");
#endif
}
END_TEST

START_TEST(amx_fused_softmax_equals_the_separate_steps)
{
#if defined(__x86_64__)
	at_for_bf16_cases(&at_amx_bf16, at_check_softmax_bf16, "fused softmax");
	at_for_bf16_cases(&at_avx512_bf16, at_check_softmax_bf16, "fused softmax");
#else
	fprintf(stderr, "attention: skipping amx fused softmax: x86-64 only\n");
#endif
}
END_TEST

/* A sliding-window layer's prompt tiles on the bf16 tiles (the rows' key
 * ranges start inside a block: attention.c prompt_ranges, the fused
 * softmax's lo) against the float tiles of the same layer: within 8e-3
 * of max |v| (test_attention's AT_TOL_BF16; a window start one key late
 * gives 0.17: attn16). At the machine's level, where its bf16 tiles
 * run. */
START_TEST(amx_windowed_prompt_tiles_near_float_tiles)
{
#if defined(__x86_64__)
	enum { N = 150, H = 16, HKV = 2, D = 64, W = 40 };
	struct model_hparams hp = {.n_layer = 2, .n_head = H, .n_head_kv = HKV, .head_dim_k = D,
				   .head_dim_v = D};
	const struct arch_desc *arch = arch_find("gemma2", 6);
	struct attention a;
	struct kv_cache kv;
	struct attention_tile tiles[3];
	char err[EMBER_ERR_MAX] = "";
	float *q = malloc(N * H * D * sizeof(float)), *o1 = malloc(N * H * D * sizeof(float));
	float *o2 = malloc(N * H * D * sizeof(float)), *row = malloc(N * D * sizeof(float));
	double worst = 0;
	uint32_t nt, il = 0;

	kern_init();
	if (!kern_attn_bf16()) {
		fprintf(stderr, "attention: skipping windowed prompt tiles: no bf16 tiles here\n");
		free(q), free(o1), free(o2), free(row);
		return;
	}
	ck_assert_ptr_nonnull(arch);
	ck_assert_int_eq(attention_init(&a, &hp, ARCH_ALIBI_NONE, err), 0);
	ck_assert_int_eq(kv_cache_init(&kv, &hp, N, DTYPE_F16, err), 0);
	attention_set_window(&a, arch, W);
	while (!attention_window(&a, il))
		il++;
	for (uint32_t g = 0; g < HKV; g++) {
		at_fill(row, (size_t)N * D, 1.5f);
		for (uint32_t p = 0; p < N; p++)
			kern_fp32_to_fp16_row(row + (size_t)p * D, kv_cache_k_at(&kv, il, g, p), D);
		at_fill(row, (size_t)N * D, 1.0f);
		for (uint32_t p = 0; p < N; p++)
			kern_fp32_to_fp16_row(row + (size_t)p * D, kv_cache_v_at(&kv, il, g, p), D);
	}
	at_fill(q, N * H * D, 1.0f);
	nt = attention_plan(tiles, &kv, 0, 0, N);
	attention_run(&a, NULL, il, tiles, nt, q, o1);
	for (uint32_t i = 0; i < nt; i++)
		tiles[i].prompt = 1;
	attention_run(&a, NULL, il, tiles, nt, q, o2);
	for (size_t i = 0; i < (size_t)N * H * D; i++)
		worst = fabs((double)o1[i] - o2[i]) > worst ? fabs((double)o1[i] - o2[i]) : worst;
	ck_assert_msg(worst <= 8e-3, "windowed prompt tiles off by %g", worst);
	free(q), free(o1), free(o2), free(row);
	kv_cache_free(&kv);
	attention_free(&a);
#else
	fprintf(stderr, "attention: skipping windowed prompt tiles: x86-64 only\n");
#endif
}
END_TEST

START_TEST(f16_kernels_equal_float_kernels_on_converted_rows)
{
#if defined(__x86_64__)
	/* 8, 9, 16: the avx512 8 x 8 tiles; 4, 12, 20: the 4 x 8 ones too */
	static const size_t nqs[] = {1, 3, 4, 8, 9, 12, 16, 20}, nks[] = {1, 5, 8, 37, 64},
			    ds[] = {8, 24, 64, 72, 80, 128};

	if (!kern_level_runs(CPU_LEVEL_AVX2)) {
		fprintf(stderr, "attention: skipping f16 kernels: this CPU lacks avx2\n");
		return;
	}
	for (size_t a = 0; a < sizeof(nqs) / sizeof(nqs[0]); a++)
		for (size_t b = 0; b < sizeof(nks) / sizeof(nks[0]); b++)
			for (size_t c = 0; c < sizeof(ds) / sizeof(ds[0]); c++)
				at_check_f16_kernels(nqs[a], nks[b], ds[c], (a + b + c) & 1);
#else
	fprintf(stderr, "attention: skipping f16 kernels: x86-64 only\n");
#endif
}
END_TEST

Suite *suite_attention_simd(void)
{
	Suite *s = suite_create("attention_simd");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, f16_kernels_equal_float_kernels_on_converted_rows);
	tcase_add_test(tc, avx512_softmax_rows_equal_avx2);
	tcase_add_test(tc, amx_bf16_blocks_within_bound_of_float64);
	tcase_add_test(tc, avx512_bf16_blocks_within_bound_of_float64);
	tcase_add_test(tc, amx_fused_softmax_equals_the_separate_steps);
	tcase_add_test(tc, amx_scores_softmax_equals_the_two_calls);
	tcase_add_test(tc, amx_windowed_prompt_tiles_near_float_tiles);
	suite_add_tcase(s, tc);
	return s;
}
