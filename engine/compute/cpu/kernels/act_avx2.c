/*
 * act_avx2.c - the AVX2 + FMA activation kernels of kernels.h
 * (kern_silu_mul), registered in kern_ops_avx2 and reused by the avx512
 * table. The activation is one transcendental per FFN element (2.9 M a
 * layer for a 512-token TinyLlama prompt); expf() one at a time cost
 * about as much as the whole attention.
 *
 * Also the row norms (kern_norm_rows): their sums are a chain of double
 * additions that must stay in element order (the scalar reference's
 * bits), so they go one row per lane of a 4-double vector, four rows'
 * chains at the price of one; the residual add and the scaling of the
 * output are plain element-wise SIMD with the reference's operations.
 * An 8-sequence TinyLlama decode step spent ~2.9 ms of one thread's CPU
 * in the scalar loops (Zen 4).
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
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

/* Per lane r < 4, in element order from 0.0:
 *   s_r += x_r[i]                          (sq = 0: the mean's sum)
 *   s_r += (x_r[i] - m_r) * (x_r[i] - m_r) (sq = 1: the variance's)
 * each term and addition rounded as the scalar loop rounds it (floats
 * widen exactly; no FMA). Rows 4 floats at a time, transposed so that a
 * vector holds element i of the four rows. */
static inline __attribute__((always_inline)) __m256d norm__sum4(const float *const x[4], size_t d,
								 __m256d m, int sq)
{
	__m256d s = _mm256_setzero_pd();
	size_t i = 0;

	for (; i + 4 <= d; i += 4) {
		__m128 a0 = _mm_loadu_ps(x[0] + i), a1 = _mm_loadu_ps(x[1] + i);
		__m128 a2 = _mm_loadu_ps(x[2] + i), a3 = _mm_loadu_ps(x[3] + i);
		__m256d c0, c1, c2, c3;

		_MM_TRANSPOSE4_PS(a0, a1, a2, a3);
		c0 = _mm256_cvtps_pd(a0);
		c1 = _mm256_cvtps_pd(a1);
		c2 = _mm256_cvtps_pd(a2);
		c3 = _mm256_cvtps_pd(a3);
		if (sq) {
			c0 = _mm256_sub_pd(c0, m);
			c1 = _mm256_sub_pd(c1, m);
			c2 = _mm256_sub_pd(c2, m);
			c3 = _mm256_sub_pd(c3, m);
			c0 = _mm256_mul_pd(c0, c0);
			c1 = _mm256_mul_pd(c1, c1);
			c2 = _mm256_mul_pd(c2, c2);
			c3 = _mm256_mul_pd(c3, c3);
		}
		s = _mm256_add_pd(s, c0);
		s = _mm256_add_pd(s, c1);
		s = _mm256_add_pd(s, c2);
		s = _mm256_add_pd(s, c3);
	}
	for (; i < d; i++) {
		__m256d c = _mm256_setr_pd(x[0][i], x[1][i], x[2][i], x[3][i]);

		if (sq) {
			__m256d t = _mm256_sub_pd(c, m);
			c = _mm256_mul_pd(t, t);
		}
		s = _mm256_add_pd(s, c);
	}
	return s;
}

/* o[i] = (float)((x[i] - mean) * scale) * gain[i] + (bias ? bias[i] : 0). */
static void norm__scale_row(const float *x, float *o, size_t d, double mean, double scale,
			    const float *gain, const float *bias)
{
	const __m256d mv = _mm256_set1_pd(mean), sv = _mm256_set1_pd(scale);
	size_t i = 0;

	for (; i + 8 <= d; i += 8) {
		__m256 xv = _mm256_loadu_ps(x + i);
		__m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(xv));
		__m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1));
		__m256 f;

		lo = _mm256_mul_pd(_mm256_sub_pd(lo, mv), sv);
		hi = _mm256_mul_pd(_mm256_sub_pd(hi, mv), sv);
		f = _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
		f = _mm256_mul_ps(f, _mm256_loadu_ps(gain + i));
		f = _mm256_add_ps(f, bias ? _mm256_loadu_ps(bias + i) : _mm256_setzero_ps());
		_mm256_storeu_ps(o + i, f);
	}
	for (; i < d; i++)
		o[i] = (float)((x[i] - mean) * scale) * gain[i] + (bias ? bias[i] : 0.0f);
}

void kern_avx2_norm_rows(const struct kern_norm *nm, const float *x, float *res, const float *add,
			 float *out, size_t n)
{
	const size_t d = nm->d;
	size_t r;

	if (n == 0)
		return;
	if (add)
		KERN_NORM_ADD_ROWS(res, add, n, d, 8, _mm256_loadu_ps, _mm256_add_ps,
				   _mm256_storeu_ps);
	/* four rows a chain (KERN_NORM_ROWS is the avx512 level's 16) */
	for (size_t r0 = 0; r0 < n; r0 += 4) {
		const size_t nr = n - r0 < 4 ? n - r0 : 4;
		const float *rows[4];
		double mean[4] = {0.0, 0.0, 0.0, 0.0}, var[4];

		/* Lanes past nr repeat the last row; their sums are not used. */
		for (r = 0; r < 4; r++)
			rows[r] = x + (r0 + (r < nr ? r : nr - 1)) * d;
		if (nm->center) {
			_mm256_storeu_pd(mean, norm__sum4(rows, d, _mm256_setzero_pd(), 0));
			for (r = 0; r < 4; r++)
				mean[r] /= (double)d;
		}
		_mm256_storeu_pd(var, norm__sum4(rows, d, _mm256_loadu_pd(mean), 1));
		for (r = 0; r < nr; r++)
			norm__scale_row(x + (r0 + r) * d, out + (r0 + r) * d, d, mean[r],
					1.0 / sqrt(var[r] / (double)d + nm->eps), nm->gain,
					nm->bias);
	}
}
#endif
