/*
 * attention_avx2.c - the AVX2 + FMA + F16C attention blocks of kernels.h
 * (kern_attn_scores, kern_attn_accum, kern_max, kern_exp_sum,
 * kern_fp16_to_fp32_row), registered in kern_ops_avx2 and reused by the
 * avx512 table: head-sized rows gain nothing from ZMM.
 *
 * Scores: one FMA chain per (query, key) pair over d / 8 vectors, 8 pairs
 * at a time (2 queries x 4 keys, or 1 x 8 for a lone query), then a
 * transposing horizontal sum. Values: the output rows are loaded, rescaled
 * once, and take one FMA per key and vector (4 queries x 16 columns, or
 * 1 x 64). Each score and output element sees the same operations in the
 * same order whatever the tile, so a query's result does not depend on
 * the queries it is computed with.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"
#include "math_avx2.h"

#define AVX2_INLINE static inline __attribute__((always_inline))
/* Tile loops must unroll fully so accumulators live in registers. */
#define AVX2_UNROLL _Pragma("GCC unroll 4")
#define AVX2_UNROLL8 _Pragma("GCC unroll 8")

/* Columns c .. c + 7 of a key or value row p: floats, or F16 (the F16
 * cache's rows, read in place) converted exactly when f16 (a constant
 * after inlining): either way the same floats reach the arithmetic. */
AVX2_INLINE __m256 avx2__ld(const void *p, size_t c, const int f16)
{
	return f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + c)))
		   : _mm256_loadu_ps((const float *)p + c);
}

/* Column c of such a row. */
AVX2_INLINE float avx2__ld1(const void *p, size_t c, const int f16)
{
	return f16 ? kern_fp16_to_fp32(((const uint16_t *)p)[c]) : ((const float *)p)[c];
}

/* Row j of a block of rows of d elements (floats or F16). */
AVX2_INLINE const void *avx2__row(const void *base, size_t j, size_t d, const int f16)
{
	return (const char *)base + j * d * (f16 ? sizeof(uint16_t) : sizeof(float));
}

/* Lane j = the sum of the 8 lanes of a[j], in a fixed order. */
AVX2_INLINE __m256 avx2__hsum8(const __m256 a[8])
{
	__m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
	__m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));

	/* h0 = [a0..a3 low halves | a0..a3 high halves], h1 likewise */
	return _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20),
			     _mm256_permute2f128_ps(h0, h1, 0x31));
}

/* Sums of d-long products, 8 at a time: lane j of the result is the dot
 * of a[j] and b[j] (rows, possibly repeated). One FMA chain per lane over
 * d / 8 vectors, then a transposing sum, the same for every lane, so a
 * score does not depend on which 8 were computed together. The 2 x 4 form
 * (a = two queries, each against four keys) loads 6 vectors per 8 FMAs;
 * the 1 x 8 form serves a lone query. */
AVX2_INLINE __m256 avx2__dots8(const float *const a[8], const void *const b[8], size_t d,
				const int f16)
{
	__m256 acc[8];
	size_t c, j;

	AVX2_UNROLL8
	for (j = 0; j < 8; j++)
		acc[j] = _mm256_setzero_ps();
	for (c = 0; c + 8 <= d; c += 8) {
		AVX2_UNROLL8
		for (j = 0; j < 8; j++)
			acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(a[j] + c), avx2__ld(b[j], c, f16),
						 acc[j]);
	}
	__m256 s = avx2__hsum8(acc);
	if (c < d) { /* head widths not a multiple of 8: the rest in scalar */
		float tail[8];

		for (j = 0; j < 8; j++) {
			tail[j] = 0.0f;
			for (size_t i = c; i < d; i++)
				tail[j] += a[j][i] * avx2__ld1(b[j], i, f16);
		}
		s = _mm256_add_ps(s, _mm256_loadu_ps(tail));
	}
	return s;
}

/* Stores lanes [l0, l0 + n) of v to dst. */
AVX2_INLINE void avx2__store_lanes(float *dst, __m256 v, size_t l0, size_t n)
{
	float out[8];

	_mm256_storeu_ps(out, v);
	memcpy(dst, out + l0, n * sizeof(float));
}

/* One row of 8 lanes: dots of a[j] and b[j] plus bias, scaled, to dst. */
AVX2_INLINE __m256 avx2__scores8(const float *const a[8], const void *const b[8], size_t d,
				 __m256 bias, __m256 scale, const int f16)
{
	return _mm256_mul_ps(_mm256_add_ps(avx2__dots8(a, b, d, f16), bias), scale);
}

/* kern_attn_scores() of keys k in floats, or F16 when f16. */
AVX2_INLINE void avx2__scores(const float *q, size_t ld_q, const void *k, size_t d,
			      const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			      size_t nk, const int f16)
{
	const __m256 sv = _mm256_set1_ps(scale);
	const size_t nq2 = nq / 2 * 2;
	const float *a[8];
	const void *b[8];
	float bb[8];

	/* Pairs of queries against 4 keys; a short key group repeats its last
	 * key and stores only n lanes. */
	for (size_t j0 = 0; j0 < nk && nq2; j0 += 4) {
		const size_t n = nk - j0 < 4 ? nk - j0 : 4;

		for (size_t j = 0; j < 8; j++) {
			b[j] = avx2__row(k, j0 + (j % 4 < n ? j % 4 : n - 1), d, f16);
			bb[j] = bias ? bias[j0 + (j % 4 < n ? j % 4 : n - 1)] : 0.0f;
		}
		const __m256 bv = _mm256_loadu_ps(bb);
		for (size_t i = 0; i < nq2; i += 2) {
			for (size_t j = 0; j < 8; j++)
				a[j] = q + (i + j / 4) * ld_q;
			__m256 v = avx2__scores8(a, b, d, bv, sv, f16);
			if (n == 4) {
				_mm_storeu_ps(s + i * ld_s + j0, _mm256_castps256_ps128(v));
				_mm_storeu_ps(s + (i + 1) * ld_s + j0, _mm256_extractf128_ps(v, 1));
			} else {
				avx2__store_lanes(s + i * ld_s + j0, v, 0, n);
				avx2__store_lanes(s + (i + 1) * ld_s + j0, v, 4, n);
			}
		}
	}
	if (nq2 == nq)
		return;
	/* The odd query (decode: the only one) against 8 keys at a time. */
	for (size_t j = 0; j < 8; j++)
		a[j] = q + nq2 * ld_q;
	for (size_t j0 = 0; j0 < nk; j0 += 8) {
		const size_t n = nk - j0 < 8 ? nk - j0 : 8;

		for (size_t j = 0; j < 8; j++) {
			b[j] = avx2__row(k, j0 + (j < n ? j : n - 1), d, f16);
			bb[j] = bias ? bias[j0 + (j < n ? j : n - 1)] : 0.0f;
		}
		__m256 v = avx2__scores8(a, b, d, _mm256_loadu_ps(bb), sv, f16);
		if (n == 8)
			_mm256_storeu_ps(s + nq2 * ld_s + j0, v);
		else
			avx2__store_lanes(s + nq2 * ld_s + j0, v, 0, n);
	}
}

void kern_avx2_attn_scores(const float *q, size_t ld_q, const float *k, size_t d,
			   const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			   size_t nk)
{
	avx2__scores(q, ld_q, k, d, bias, scale, s, ld_s, nq, nk, 0);
}

void kern_avx2_attn_scores_f16(const float *q, size_t ld_q, const uint16_t *k, size_t d,
			       const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			       size_t nk)
{
	avx2__scores(q, ld_q, k, d, bias, scale, s, ld_s, nq, nk, 1);
}

/* Output columns [c, c + 8 * nv) of rows o_0..o_{nq-1} (nq <= 4, nv <= 8,
 * nq * nv <= 8, constants after inlining so acc lives in registers):
 * loaded and rescaled once, then one FMA per key and vector, in key order. */
AVX2_INLINE void avx2__accum_tile(float *o, size_t ld_o, const float *r, const float *p,
				  size_t ld_p, const void *v, size_t d, size_t c, size_t nk,
				  const size_t nq, const size_t nv, const int f16)
{
	__m256 acc[4][8];

	AVX2_UNROLL
	for (size_t i = 0; i < nq; i++)
		AVX2_UNROLL8
		for (size_t u = 0; u < nv; u++)
			acc[i][u] = _mm256_mul_ps(_mm256_loadu_ps(o + i * ld_o + c + 8 * u),
						  _mm256_set1_ps(r[i]));
	for (size_t j = 0; j < nk; j++) {
		__m256 vv[8];

		AVX2_UNROLL8
		for (size_t u = 0; u < nv; u++)
			vv[u] = avx2__ld(v, j * d + c + 8 * u, f16);
		AVX2_UNROLL
		for (size_t i = 0; i < nq; i++) {
			__m256 pb = _mm256_broadcast_ss(p + i * ld_p + j);

			AVX2_UNROLL8
			for (size_t u = 0; u < nv; u++)
				acc[i][u] = _mm256_fmadd_ps(pb, vv[u], acc[i][u]);
		}
	}
	AVX2_UNROLL
	for (size_t i = 0; i < nq; i++)
		AVX2_UNROLL8
		for (size_t u = 0; u < nv; u++)
			_mm256_storeu_ps(o + i * ld_o + c + 8 * u, acc[i][u]);
}

/* Rows of nq = 4 or 1 queries (a constant after inlining): 4 x 16
 * columns (8 accumulators) share each value load; a lone query takes 64
 * columns at once so that decode still has 8 independent FMA chains.
 * Either way each output element sees the same operations in the same
 * order. */
AVX2_INLINE void avx2__accum_cols(float *o, size_t ld_o, const float *r, const float *p,
				  size_t ld_p, const void *v, size_t d, const size_t nq, size_t nk,
				  const int f16)
{
	size_t c = 0;

	if (nq == 4) {
		for (; c + 16 <= d; c += 16)
			avx2__accum_tile(o, ld_o, r, p, ld_p, v, d, c, nk, 4, 2, f16);
		for (; c + 8 <= d; c += 8)
			avx2__accum_tile(o, ld_o, r, p, ld_p, v, d, c, nk, 4, 1, f16);
	} else {
		for (; c + 64 <= d; c += 64)
			avx2__accum_tile(o, ld_o, r, p, ld_p, v, d, c, nk, 1, 8, f16);
		for (; c + 8 <= d; c += 8)
			avx2__accum_tile(o, ld_o, r, p, ld_p, v, d, c, nk, 1, 1, f16);
	}
	for (; c < d; c++)
		for (size_t i = 0; i < nq; i++) {
			float a = o[i * ld_o + c] * r[i];

			for (size_t j = 0; j < nk; j++)
				a = fmaf(p[i * ld_p + j], avx2__ld1(v, j * d + c, f16), a);
			o[i * ld_o + c] = a;
		}
}

/* kern_attn_accum() of values v in floats, or F16 when f16: groups of 4
 * rows, the rest one by one. */
static void avx2__accum(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			const void *v, size_t d, size_t nq, size_t nk, int f16)
{
	size_t i = 0;

	for (; i + 4 <= nq; i += 4) {
		if (f16)
			avx2__accum_cols(o + i * ld_o, ld_o, r + i, p + i * ld_p, ld_p, v, d, 4, nk, 1);
		else
			avx2__accum_cols(o + i * ld_o, ld_o, r + i, p + i * ld_p, ld_p, v, d, 4, nk, 0);
	}
	for (; i < nq; i++) {
		if (f16)
			avx2__accum_cols(o + i * ld_o, ld_o, r + i, p + i * ld_p, ld_p, v, d, 1, nk, 1);
		else
			avx2__accum_cols(o + i * ld_o, ld_o, r + i, p + i * ld_p, ld_p, v, d, 1, nk, 0);
	}
}

void kern_avx2_attn_accum(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			  const float *v, size_t d, size_t nq, size_t nk)
{
	avx2__accum(o, ld_o, r, p, ld_p, v, d, nq, nk, 0);
}

void kern_avx2_attn_accum_f16(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			      const uint16_t *v, size_t d, size_t nq, size_t nk)
{
	avx2__accum(o, ld_o, r, p, ld_p, v, d, nq, nk, 1);
}

void kern_avx2_fp16_row(const uint16_t *src, float *dst, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
	for (; i < n; i++)
		dst[i] = kern_fp16_to_fp32(src[i]);
}

/* VCVTPS2PH rounds to nearest even, saturates to infinity from 65520 up
 * and keeps a NaN's sign and top payload bits with the quiet bit set:
 * kern_fp32_to_fp16()'s rule (tests/test_kernels.c compares them). */
void kern_avx2_fp16_from_row(const float *src, uint16_t *dst, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(dst + i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
						 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	for (; i < n; i++)
		dst[i] = kern_fp32_to_fp16(src[i]);
}

float kern_avx2_max(const float *x, size_t n)
{
	__m256 m = _mm256_set1_ps(-INFINITY);
	float tail[8], out[8], best;
	size_t i = 0;

	/* max_ps returns its second operand when either is NaN: NaNs in x
	 * are skipped, as in the reference. */
	for (; i + 8 <= n; i += 8)
		m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
	if (i < n) { /* padded with -inf, which changes no maximum */
		for (size_t j = 0; j < 8; j++)
			tail[j] = i + j < n ? x[i + j] : -INFINITY;
		m = _mm256_max_ps(_mm256_loadu_ps(tail), m);
	}
	_mm256_storeu_ps(out, m);
	best = out[0];
	for (size_t j = 1; j < 8; j++)
		best = out[j] > best ? out[j] : best;
	return best;
}

float kern_avx2_exp_sum(float *x, size_t n, float m)
{
	const __m256 mv = _mm256_set1_ps(m);
	__m256 sum = _mm256_setzero_ps();
	float tail[8];
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 e = avx2__exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));

		_mm256_storeu_ps(x + i, e);
		sum = _mm256_add_ps(sum, e);
	}
	if (i < n) { /* padded with -inf, which gives 0 */
		for (size_t j = 0; j < 8; j++)
			tail[j] = i + j < n ? x[i + j] : -INFINITY;
		__m256 e = avx2__exp(_mm256_sub_ps(_mm256_loadu_ps(tail), mv));
		_mm256_storeu_ps(tail, e);
		memcpy(x + i, tail, (n - i) * sizeof(float));
		sum = _mm256_add_ps(sum, e);
	}
	return avx2__hsum(sum);
}
#endif
