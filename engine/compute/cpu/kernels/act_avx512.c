/*
 * act_avx512.c - the gated SiLU of kernels.h (kern_silu_mul) on 16 lanes,
 * registered in kern_ops_avx512. Each lane runs act_avx2.c's operations
 * (math_avx2.h avx2__exp: the same clamps, rounding, polynomial and
 * scaling, then the division and product) on ZMM registers, so the
 * result is bit-identical to the avx2 level's (tests/test_kernels.c):
 * a token's activations do not depend on the level of the machine.
 * Half the instructions of the YMM loop for the MLP's ~45 K elements a
 * token (TinyLlama), prompts' millions.
 */
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels.h"
#include "kernels_impl.h"

/* avx2__exp on 16 lanes: the same steps in the same order. */
static inline __attribute__((always_inline)) __m512 act512__exp(__m512 x)
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
	__m512i ni = _mm512_cvtps_epi32(n);
	__m512i n1 = _mm512_srai_epi32(ni, 1), n2 = _mm512_sub_epi32(ni, n1);
	const __m512i bias = _mm512_set1_epi32(127);
	__m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
	__m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
	return _mm512_mul_ps(_mm512_mul_ps(e, s1), s2);
}

/* act_avx2.c's act__silu_mul on 16 lanes. */
static inline __attribute__((always_inline)) __m512 act512__silu_mul(__m512 y, __m512 g)
{
	const __m512 one = _mm512_set1_ps(1.0f);
	__m512 e = act512__exp(_mm512_sub_ps(_mm512_setzero_ps(), g));

	return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), y);
}

void kern_avx512_silu_mul(float *y, const float *g, size_t n)
{
	size_t i = 0;

	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(y + i, act512__silu_mul(_mm512_loadu_ps(y + i), _mm512_loadu_ps(g + i)));
	if (i < n) { /* the tail's lanes as zeros, like act_avx2.c's padded copy */
		const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);

		_mm512_mask_storeu_ps(y + i, k,
				      act512__silu_mul(_mm512_maskz_loadu_ps(k, y + i),
						       _mm512_maskz_loadu_ps(k, g + i)));
	}
}
#endif
