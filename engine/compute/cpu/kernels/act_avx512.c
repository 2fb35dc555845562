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
#include "math_avx512.h"

/* act_avx2.c's act__silu_mul on 16 lanes. */
static inline __attribute__((always_inline)) __m512 act512__silu_mul(__m512 y, __m512 g)
{
	const __m512 one = _mm512_set1_ps(1.0f);
	__m512 e = avx512__exp(_mm512_sub_ps(_mm512_setzero_ps(), g));

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
