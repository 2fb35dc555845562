/*
 * act_avx512.c - the gated SiLU of kernels.h (kern_silu_mul) on 16 lanes,
 * registered in kern_ops_avx512. Each lane runs act_avx2.c's operations
 * (math_avx2.h avx2__exp: the same clamps, rounding, polynomial and
 * scaling, then the division and product) on ZMM registers, so the
 * result is bit-identical to the avx2 level's (tests/test_kernels.c):
 * a token's activations do not depend on the level of the machine.
 * Half the instructions of the YMM loop for the MLP's ~45 K elements a
 * token (TinyLlama), prompts' millions.
 *
 * Also the row norms (kern_norm_rows) with act_avx2.c's operations, the
 * same bits: eight rows a double vector where AVX2 had four, two
 * vectors' chains side by side (KERN_NORM_ROWS = 16 rows a call).
 *
 * And both with their results rounded straight into the amx level's bf16
 * A-tile rows (kern_silu_mul_bf16, kern_norm_rows_bf16: prompt rows that
 * only the next product reads, forward.c), the same values and the same
 * VCVTNE2PS2BF16 as kern_amxbf_act_row's, without the float rows.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "kernels.h"
#include "kernels_impl.h"
#include "math_avx512.h"

void kern_avx512_silu_mul(float *y, const float *g, size_t n)
{
	size_t i = 0;

	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(y + i, avx512__silu_mul(_mm512_loadu_ps(y + i), _mm512_loadu_ps(g + i)));
	if (i < n) { /* the tail's lanes as zeros, like act_avx2.c's padded copy */
		const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);

		_mm512_mask_storeu_ps(y + i, k,
				      avx512__silu_mul(_mm512_maskz_loadu_ps(k, y + i),
						       _mm512_maskz_loadu_ps(k, g + i)));
	}
}

/* kern_avx512_silu_mul's values rounded to bf16 A-tile rows (kernels.h
 * kern_silu_mul_bf16): what kern_amxbf_act_row would make of y after
 * kern_avx512_silu_mul, without y's store and reload (a 512-token
 * prompt's up is 11.5 MB a layer at TinyLlama's n_ff). */
void kern_avx512_silu_mul_bf16(const float *y, const float *g, size_t n, uint16_t *dst,
			       size_t step)
{
	for (size_t i = 0; i + 32 <= n; i += 32, dst += step) {
		const __m512 lo = avx512__silu_mul(_mm512_loadu_ps(y + i), _mm512_loadu_ps(g + i));
		const __m512 hi = avx512__silu_mul(_mm512_loadu_ps(y + i + 16),
						   _mm512_loadu_ps(g + i + 16));

		_mm512_storeu_si512(dst, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
	}
}

/* Rows of a double vector: lane k = row k. */
#define NORM512_ROWS 8

/* Elements i .. i + 3 of rows x[0..7]: c[e] lane k = x[k][i + e], a
 * 4 x 4 transpose in each 128-bit lane (rows k and k + 4). */
static inline __attribute__((always_inline)) void norm512__cols4(const float *const x[8], size_t i,
								__m256 c[4])
{
	const __m256 a0 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(x[0] + i)),
					       _mm_loadu_ps(x[4] + i), 1);
	const __m256 a1 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(x[1] + i)),
					       _mm_loadu_ps(x[5] + i), 1);
	const __m256 a2 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(x[2] + i)),
					       _mm_loadu_ps(x[6] + i), 1);
	const __m256 a3 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(x[3] + i)),
					       _mm_loadu_ps(x[7] + i), 1);
	const __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpackhi_ps(a0, a1);
	const __m256 t2 = _mm256_unpacklo_ps(a2, a3), t3 = _mm256_unpackhi_ps(a2, a3);

	c[0] = _mm256_shuffle_ps(t0, t2, 0x44);
	c[1] = _mm256_shuffle_ps(t0, t2, 0xee);
	c[2] = _mm256_shuffle_ps(t1, t3, 0x44);
	c[3] = _mm256_shuffle_ps(t1, t3, 0xee);
}

/* The term of one element (lane k = row k): x, or (x - m)^2. */
static inline __attribute__((always_inline)) __m512d norm512__term(__m256 c, __m512d m, int sq)
{
	__m512d v = _mm512_cvtps_pd(c);

	if (sq) {
		v = _mm512_sub_pd(v, m);
		v = _mm512_mul_pd(v, v);
	}
	return v;
}

/* Per lane k < 8 (row x[k]), in element order from 0.0:
 *   s_k += x_k[i]                          (sq = 0: the mean's sum)
 *   s_k += (x_k[i] - m_k) * (x_k[i] - m_k) (sq = 1: the variance's)
 * with act_avx2.c norm__sum4's operations (floats widen exactly; no FMA),
 * eight rows a chain where it had four; with `two` a second group's
 * chain (rows x2, mean m2) runs beside the first: a chain is a dependent
 * double addition per element, so two cost little more than one. */
static inline __attribute__((always_inline)) void
norm512__sum8(const float *const x[8], const float *const x2[8], int two, size_t d, __m512d m,
	      __m512d m2, int sq, __m512d *out, __m512d *out2)
{
	__m512d s = _mm512_setzero_pd(), s2 = _mm512_setzero_pd();
	size_t i = 0;

	for (; i + 4 <= d; i += 4) {
		__m256 c[4], c2[4];

		norm512__cols4(x, i, c);
		if (two)
			norm512__cols4(x2, i, c2);
		s = _mm512_add_pd(s, norm512__term(c[0], m, sq));
		if (two)
			s2 = _mm512_add_pd(s2, norm512__term(c2[0], m2, sq));
		s = _mm512_add_pd(s, norm512__term(c[1], m, sq));
		if (two)
			s2 = _mm512_add_pd(s2, norm512__term(c2[1], m2, sq));
		s = _mm512_add_pd(s, norm512__term(c[2], m, sq));
		if (two)
			s2 = _mm512_add_pd(s2, norm512__term(c2[2], m2, sq));
		s = _mm512_add_pd(s, norm512__term(c[3], m, sq));
		if (two)
			s2 = _mm512_add_pd(s2, norm512__term(c2[3], m2, sq));
	}
	for (; i < d; i++) {
		s = _mm512_add_pd(s, norm512__term(_mm256_setr_ps(x[0][i], x[1][i], x[2][i], x[3][i],
								  x[4][i], x[5][i], x[6][i],
								  x[7][i]),
						   m, sq));
		if (two)
			s2 = _mm512_add_pd(
				s2, norm512__term(_mm256_setr_ps(x2[0][i], x2[1][i], x2[2][i],
								 x2[3][i], x2[4][i], x2[5][i],
								 x2[6][i], x2[7][i]),
						  m2, sq));
	}
	*out = s;
	*out2 = s2;
}

/* Elements i .. i + 15 of norm512__scale_row's o. */
static inline __attribute__((always_inline)) __m512
norm512__scale16(const float *x, size_t i, __m512d mv, __m512d sv, const float *gain,
		 const float *bias)
{
	const __m512 xv = _mm512_loadu_ps(x + i);
	__m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(xv));
	__m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xv), 1)));
	__m512 f;

	lo = _mm512_mul_pd(_mm512_sub_pd(lo, mv), sv);
	hi = _mm512_mul_pd(_mm512_sub_pd(hi, mv), sv);
	f = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
	f = _mm512_mul_ps(f, _mm512_loadu_ps(gain + i));
	return _mm512_add_ps(f, bias ? _mm512_loadu_ps(bias + i) : _mm512_setzero_ps());
}

/* o[i] = (float)((x[i] - mean) * scale) * gain[i] + (bias ? bias[i] : 0),
 * act_avx2.c norm__scale_row's operations on 16 lanes. */
static void norm512__scale_row(const float *x, float *o, size_t d, double mean, double scale,
			       const float *gain, const float *bias)
{
	const __m512d mv = _mm512_set1_pd(mean), sv = _mm512_set1_pd(scale);
	size_t i = 0;

	for (; i + 16 <= d; i += 16)
		_mm512_storeu_ps(o + i, norm512__scale16(x, i, mv, sv, gain, bias));
	for (; i < d; i++)
		o[i] = (float)((x[i] - mean) * scale) * gain[i] + (bias ? bias[i] : 0.0f);
}

/* norm512__scale_row's o rounded to bf16, 32 elements at dst + s * step
 * (d a multiple of 32): the A-tile row the product would have made of o
 * (kern_amxbf_act_row's VCVTNE2PS2BF16), without o's store and reload. */
static void norm512__scale_row_bf16(const float *x, uint16_t *dst, size_t step, size_t d,
				    double mean, double scale, const float *gain, const float *bias)
{
	const __m512d mv = _mm512_set1_pd(mean), sv = _mm512_set1_pd(scale);

	for (size_t i = 0; i + 32 <= d; i += 32, dst += step)
		_mm512_storeu_si512(dst, (__m512i)_mm512_cvtne2ps_pbh(
						 norm512__scale16(x, i + 16, mv, sv, gain, bias),
						 norm512__scale16(x, i, mv, sv, gain, bias)));
}

/* kern_avx2_norm_rows on ZMM, the same bits (kernels.h): eight rows a
 * double vector and two vectors' chains side by side, where the avx2
 * level's one chain of four rows left a 512-token prompt's norms bound
 * on the latency of its additions (~3% of a TinyLlama pp512 on Emerald
 * Rapids, LEVELS.md pre13). */
static inline __attribute__((always_inline)) void
norm512__rows(const struct kern_norm *nm, const float *x, float *res, const float *add, float *out,
	      uint16_t *const dst[], size_t step, size_t n)
{
	const size_t d = nm->d;
	size_t r;

	if (n == 0)
		return;
	if (add)
		KERN_NORM_ADD_ROWS(res, add, n, d, 16, _mm512_loadu_ps, _mm512_add_ps,
				   _mm512_storeu_ps);
	for (size_t r0 = 0; r0 < n; r0 += 2 * NORM512_ROWS) {
		const size_t nr = n - r0 < 2 * NORM512_ROWS ? n - r0 : 2 * NORM512_ROWS;
		const int two = nr > NORM512_ROWS;
		const float *rows[2 * NORM512_ROWS];
		_Alignas(64) double mean[2 * NORM512_ROWS] = {0}, var[2 * NORM512_ROWS];
		__m512d s, s2;

		/* Lanes past nr repeat the last row; their sums are not used. */
		for (r = 0; r < 2 * NORM512_ROWS; r++)
			rows[r] = x + (r0 + (r < nr ? r : nr - 1)) * d;
		if (nm->center) {
			if (two)
				norm512__sum8(rows, rows + NORM512_ROWS, 1, d, _mm512_setzero_pd(),
					      _mm512_setzero_pd(), 0, &s, &s2);
			else
				norm512__sum8(rows, rows, 0, d, _mm512_setzero_pd(),
					      _mm512_setzero_pd(), 0, &s, &s2);
			_mm512_store_pd(mean, s);
			_mm512_store_pd(mean + NORM512_ROWS, s2);
			for (r = 0; r < 2 * NORM512_ROWS; r++)
				mean[r] /= (double)d;
		}
		if (two)
			norm512__sum8(rows, rows + NORM512_ROWS, 1, d, _mm512_load_pd(mean),
				      _mm512_load_pd(mean + NORM512_ROWS), 1, &s, &s2);
		else
			norm512__sum8(rows, rows, 0, d, _mm512_load_pd(mean), _mm512_setzero_pd(), 1,
				      &s, &s2);
		_mm512_store_pd(var, s);
		_mm512_store_pd(var + NORM512_ROWS, s2);
		for (r = 0; r < nr; r++) {
			const double scale = 1.0 / sqrt(var[r] / (double)d + nm->eps);

			if (dst)
				norm512__scale_row_bf16(x + (r0 + r) * d, dst[r0 + r], step, d,
							mean[r], scale, nm->gain, nm->bias);
			else
				norm512__scale_row(x + (r0 + r) * d, out + (r0 + r) * d, d,
						   mean[r], scale, nm->gain, nm->bias);
		}
	}
}

void kern_avx512_norm_rows(const struct kern_norm *nm, const float *x, float *res,
			   const float *add, float *out, size_t n)
{
	norm512__rows(nm, x, res, add, out, NULL, 0, n);
}

/* The same rows into bf16 A-tile rows (kernels.h kern_norm_rows_bf16):
 * a prompt row's norm output only the next product reads, as the tiles
 * it would have made of it, which saved writing and reading back 2 x 4
 * bytes an element (LEVELS.md pre15). */
void kern_avx512_norm_rows_bf16(const struct kern_norm *nm, const float *x, float *res,
				const float *add, uint16_t *const dst[], size_t step, size_t n)
{
	norm512__rows(nm, x, res, add, NULL, dst, step, n);
}
#endif
