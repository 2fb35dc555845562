/*
 * math_avx2.h - float helpers on 8 lanes shared by the AVX2 kernel files:
 * the horizontal sum, exp() (attention's softmax, the gated SiLU) and the
 * int8 rounding of the activation quantizers.
 * Include only from files compiled with the AVX2 + FMA flags (*_avx2.c).
 */
#ifndef EMBER_MATH_AVX2_H
#define EMBER_MATH_AVX2_H

#include <immintrin.h>

static inline __attribute__((always_inline)) float avx2__hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/*
 * exp(x) for 8 floats: x = n ln2 + f with n = round(x / ln2), |f| <= ln2/2
 * (ln2 split in two so n ln2 is exact to 2^-30), e^f by its Taylor series to
 * f^7 (truncation below 6e-9 relative), then 2^n applied as two factors
 * 2^(n/2) so the scale stays a normal float across the whole range and
 * tiny results round to subnormals or 0 by the multiplication itself.
 * x is clamped to [-110, 89] first (exp is 0 / +inf beyond), which keeps
 * n in int range; NaN passes the clamps and the polynomial unchanged.
 */
static inline __attribute__((always_inline)) __m256 avx2__exp(__m256 x)
{
	const __m256 c2 = _mm256_set1_ps(1.0f / 2), c3 = _mm256_set1_ps(1.0f / 6),
		     c4 = _mm256_set1_ps(1.0f / 24), c5 = _mm256_set1_ps(1.0f / 120),
		     c6 = _mm256_set1_ps(1.0f / 720), c7 = _mm256_set1_ps(1.0f / 5040),
		     one = _mm256_set1_ps(1.0f);

	x = _mm256_max_ps(_mm256_set1_ps(-110.0f), x); /* NaN: the second operand */
	x = _mm256_min_ps(_mm256_set1_ps(89.0f), x);
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
				   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 f = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
	f = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), f);
	__m256 e = _mm256_fmadd_ps(c7, f, c6);
	e = _mm256_fmadd_ps(e, f, c5);
	e = _mm256_fmadd_ps(e, f, c4);
	e = _mm256_fmadd_ps(e, f, c3);
	e = _mm256_fmadd_ps(e, f, c2);
	e = _mm256_fmadd_ps(e, f, one);
	e = _mm256_fmadd_ps(e, f, one);
	__m256i ni = _mm256_cvtps_epi32(n);
	__m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
	const __m256i bias = _mm256_set1_epi32(127);
	__m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
	__m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
	return _mm256_mul_ps(_mm256_mul_ps(e, s1), s2);
}

/* Rounds like kern_round_q8() (the activation quantizers of kernels_avx2.c
 * and kquants_gemv.h share it, so their bytes equal the scalar ones): NaN to 0, clamp to +-127, then half away
 * from zero (trunc, and a step where the exact fraction is >= 0.5). */
static inline __attribute__((always_inline)) __m256i avx2__round_q8(__m256 v)
{
	const __m256 lim = _mm256_set1_ps(127.0f), one = _mm256_set1_ps(1.0f);
	__m256 t, f;

	v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
	v = _mm256_max_ps(_mm256_min_ps(v, lim), _mm256_sub_ps(_mm256_setzero_ps(), lim));
	t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
	f = _mm256_sub_ps(v, t);
	t = _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ), one));
	t = _mm256_sub_ps(t, _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(-0.5f), _CMP_LE_OQ), one));
	return _mm256_cvttps_epi32(t);
}

#endif
