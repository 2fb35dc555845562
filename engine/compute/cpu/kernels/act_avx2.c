/*
 * act_avx2.c - the AVX2 + FMA activation kernels of kernels.h
 * (kern_silu_mul), registered in kern_ops_avx2 and reused by the avx512
 * table. The activation is one transcendental per FFN element (2.9 M a
 * layer for a 512-token TinyLlama prompt); expf() one at a time cost
 * about as much as the whole attention.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"
#include "math_avx2.h"

/* g / (1 + exp(-g)) * y: exp(-g) is +inf for g below about -89, which
 * gives -0 * y, the limit; NaN stays NaN. */
static inline __attribute__((always_inline)) __m256 act__silu_mul(__m256 y, __m256 g)
{
	const __m256 one = _mm256_set1_ps(1.0f);
	__m256 e = avx2__exp(_mm256_sub_ps(_mm256_setzero_ps(), g));

	return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), y);
}

void kern_avx2_silu_mul(float *y, const float *g, size_t n)
{
	float ty[8] = {0}, tg[8] = {0};
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, act__silu_mul(_mm256_loadu_ps(y + i), _mm256_loadu_ps(g + i)));
	if (i < n) {
		memcpy(ty, y + i, (n - i) * sizeof(float));
		memcpy(tg, g + i, (n - i) * sizeof(float));
		_mm256_storeu_ps(ty, act__silu_mul(_mm256_loadu_ps(ty), _mm256_loadu_ps(tg)));
		memcpy(y + i, ty, (n - i) * sizeof(float));
	}
}
#endif
