/*
 * math_avx512.h - vector math shared by the avx512 level's files
 * (act_avx512.c, attention_avx512.c): math_avx2.h's exp on 16 lanes, the
 * same operations in the same order, so every lane equals avx2__exp's
 * bit for bit (tests/test_kernels.c, tests/test_attention.c); a shorter
 * exp for prompt rows only (avx512__exp_prompt); and the
 * 16 x 16 dword transpose of the amx level's bf16 B tiles (the GEMM's
 * weights, kernels_amx_bf16.c; attention's keys, attention_amx.c).
 * Include only from files built with the avx512 flags.
 */
#ifndef EMBER_MATH_AVX512_H
#define EMBER_MATH_AVX512_H

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* avx2__exp on 16 lanes: the same steps in the same order, but for the
 * final scaling (below), which gives the same values. */
static inline __attribute__((always_inline)) __m512 avx512__exp(__m512 x)
{
	const __m512 c2 = _mm512_set1_ps(1.0f / 2), c3 = _mm512_set1_ps(1.0f / 6),
		     c4 = _mm512_set1_ps(1.0f / 24), c5 = _mm512_set1_ps(1.0f / 120),
		     c6 = _mm512_set1_ps(1.0f / 720), c7 = _mm512_set1_ps(1.0f / 5040),
		     one = _mm512_set1_ps(1.0f);

	x = _mm512_max_ps(_mm512_set1_ps(-110.0f), x); /* NaN: the second operand */
	x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
					_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 f = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
	f = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), f);
	__m512 e = _mm512_fmadd_ps(c7, f, c6);
	e = _mm512_fmadd_ps(e, f, c5);
	e = _mm512_fmadd_ps(e, f, c4);
	e = _mm512_fmadd_ps(e, f, c3);
	e = _mm512_fmadd_ps(e, f, c2);
	e = _mm512_fmadd_ps(e, f, one);
	e = _mm512_fmadd_ps(e, f, one);
	/* avx2__exp scales by 2^n as two exact products by 2^(n/2) and
	 * 2^(n - n/2) (e in [0.7, 1.5], |n| <= 159: the first product is
	 * normal, so only the second rounds, into the subnormals or to
	 * infinity); VSCALEFPS rounds e * 2^n once: the same value, in one
	 * instruction where the split took nine (the exp of a prompt's
	 * softmax and SiLU, LEVELS.md "Prefill attention on AMX hardware"). */
	return _mm512_scalef_ps(e, n);
}

/* exp(x) for prompt rows (kernels.h kern_exp_sum_prompt) as 2^t, t = x
 * log2(e) rounded once: f = t - floor(t) in [0, 1) by VREDUCEPS (exact),
 * 2^f by a degree-4 minimax polynomial (relative error <= 2.6e-6 on
 * [0, 1)), times 2^floor(t) by VSCALEFPS, which also takes t's
 * extremes: t >= 128 gives +inf, t -> -inf (or -inf) gives 0 through
 * the subnormals, NaN stays NaN, so no clamps. t's rounding is
 * |t| 2^-24 ln 2 of exp: <= 2.7e-6 where exp(x) > FLT_MIN (|t| < 127);
 * in all <= 5.4e-6 of exp (KERN_PROMPT_REL_ERR 1e-5). Eight operations
 * where the degree-5 Taylor form (thirteenth session) took twelve
 * micro-operations: two clamps, VRNDSCALEPS (two), the ln 2 reduction
 * and one more FMA (LEVELS.md, attn17). */
static inline __attribute__((always_inline)) __m512 avx512__exp_prompt(__m512 x)
{
	const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
	const __m512 f = _mm512_reduce_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
	__m512 e = _mm512_fmadd_ps(_mm512_set1_ps(0.0135341679f), f, _mm512_set1_ps(0.0520114606f));

	e = _mm512_fmadd_ps(e, f, _mm512_set1_ps(0.241442757f));
	e = _mm512_fmadd_ps(e, f, _mm512_set1_ps(0.693003834f));
	e = _mm512_fmadd_ps(e, f, _mm512_set1_ps(1.00000259f));
	return _mm512_scalef_ps(e, t);
}

/* kern_avx512_exp_sum_prompt's row (kernels.h kern_exp_sum_prompt): x[i]
 * = avx512__exp_prompt(x[i] - m), i < n, the sum in one ZMM. Here so
 * that the amx level's fused prompt softmax (attention_amx.c) takes the
 * same operations in the same order: the same bits. */
static inline __attribute__((always_inline)) float avx512__exp_sum_prompt(float *x, size_t n,
									  float m)
{
	const __m512 mv = _mm512_set1_ps(m);
	__m512 sum = _mm512_setzero_ps();
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		const __m512 e = avx512__exp_prompt(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv));

		_mm512_storeu_ps(x + i, e);
		sum = _mm512_add_ps(sum, e);
	}
	if (i < n) {
		const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
		const __m512 e = avx512__exp_prompt(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mv));

		_mm512_mask_storeu_ps(x + i, k, e);
		sum = _mm512_mask_add_ps(sum, k, sum, e);
	}
	return _mm512_reduce_add_ps(sum);
}

/* kern_avx512_max's row: the largest of x[0..n) (-INFINITY when none;
 * NaNs skipped), shared as avx512__exp_sum_prompt is. */
static inline __attribute__((always_inline)) float avx512__max(const float *x, size_t n)
{
	__m512 m = _mm512_set1_ps(-INFINITY);
	size_t i = 0;

	for (; i + 16 <= n; i += 16)
		m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
	if (i < n)
		m = _mm512_max_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY),
						       (__mmask16)((1u << (n - i)) - 1), x + i),
				  m);
	return _mm512_reduce_max_ps(m);
}

/* 16 x 16 dwords: r[i] lane j <- r[j] lane i. Unpacks build 4 x 4 blocks
 * in each 128-bit lane, two rounds of lane shuffles place them. */
static inline void avx512__transpose16(__m512i r[16])
{
	__m512i t[16], u[16];

	for (int i = 0; i < 8; i++) {
		t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
	}
	/* u[4i + j], 128-bit lane L: column 4L + j of rows 4i..4i+3 */
	for (int i = 0; i < 4; i++) {
		u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
		u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
		u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
		u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
	}
	for (int j = 0; j < 4; j++) {
		const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);
		const __m512i v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xee);
		const __m512i w0 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
		const __m512i w1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xee);

		r[j] = _mm512_shuffle_i32x4(v0, w0, 0x88);
		r[4 + j] = _mm512_shuffle_i32x4(v0, w0, 0xdd);
		r[8 + j] = _mm512_shuffle_i32x4(v1, w1, 0x88);
		r[12 + j] = _mm512_shuffle_i32x4(v1, w1, 0xdd);
	}
}

/* 32 floats from x (n of them valid, the rest 0; or F16 when f16) as
 * bf16 pairs, rounded to nearest even: dword j = elements 2j (low half),
 * 2j + 1. Shared by the prompt-row attention of the amx level
 * (attention_amx.c) and of the avx512 level (attention_bf16_avx512.c). */
static inline __attribute__((always_inline)) __m512i avx512__bf16x32(const void *x, int f16, size_t n)
{
	const __mmask16 k0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
	const __mmask16 k1 = n >= 32 ? 0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
	__m512 lo, hi;

	if (f16) {
		const uint16_t *h = x;

		lo = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k0, h));
		hi = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k1, h + 16));
	} else {
		const float *f = x;

		lo = _mm512_maskz_loadu_ps(k0, f);
		hi = _mm512_maskz_loadu_ps(k1, f + 16);
	}
	return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* act_avx2.c's act__silu_mul on 16 lanes: g / (1 + e^-g) * y. One copy
 * for every writer of the gated SiLU (act_avx512.c's float and bf16 rows,
 * kernels_amx_glu.h's epilogue of the paired gate|up product), so they
 * are the same bits. */
static inline __attribute__((always_inline)) __m512 avx512__silu_mul(__m512 y, __m512 g)
{
	const __m512 one = _mm512_set1_ps(1.0f);
	__m512 e = avx512__exp(_mm512_sub_ps(_mm512_setzero_ps(), g));

	return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), y);
}

#endif
