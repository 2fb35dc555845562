/*
 * softmax16_avx512.h - the prompt rows' softmax step for a group of 16
 * rows against one block of keys, writing the weights as bf16 A-tile
 * rows (kernels.h kern_attn_softmax_bf16's layout): shared by the amx
 * level's tiles (attention_amx.c) and the avx512 level's VDPBF16PS
 * blocks (attention_bf16_avx512.c), so a prompt row's softmax is the
 * same operations on either. No tile instructions: AVX-512F and
 * AVX512-BF16's VCVTNE2PS2BF16 only.
 *
 * The weights' layout (pt): group of 16 rows g, step st of 32 keys, row
 * i at pt + (g * nks + st) * SM16_TILE + i * SM16_STEP: keys 32 st ..
 * 32 st + 31 of the row as bf16, key 2t in the low half of dword t.
 */
#ifndef EMBER_SOFTMAX16_AVX512_H
#define EMBER_SOFTMAX16_AVX512_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "kernels.h"
#include "math_avx512.h"

#define SM16_T 16			 /* rows of a group */
#define SM16_STEP 32			 /* bf16 keys of a row's step (64 bytes) */
#define SM16_TILE 512			 /* bf16 elements of a group's step */
#define SM16_KEYS KERN_ATTN_BF16_KEYS	 /* keys of a block */

/* Sixteen rows' _mm512_reduce_add_ps (op add) or _mm512_reduce_max_ps
 * (max) at once: v[r] row r's 16 lanes, lane r of the result its value.
 * The same pairing as the one-row form (lane j with j + 8, then j + 4,
 * then j + 2, then j + 1), so the same sums (IEEE addition commutes);
 * the maxima differ at most in a zero's sign, which a softmax does not
 * see (kern_avx512_max). Four rounds of shuffles for 16 rows where the
 * one-row form took a chain of ~8 dependent steps each. */
static inline __attribute__((always_inline)) __m512 avx512__reduce16(const __m512 v[16], int max)
{
	static const uint32_t row_idx[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
	__m512 a[8], b[4], c[2], lo, hi, d;

	/* quarters (2k: 0, 1), (2k + 1: 2, 3): lanes j + j^8 */
	for (int k = 0; k < 8; k++) {
		lo = _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x44);
		hi = _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xee);
		a[k] = max ? _mm512_max_ps(lo, hi) : _mm512_add_ps(lo, hi);
	}
	/* quarter q of b[m]: row 4m + q, lanes j + j^4 */
	for (int k = 0; k < 4; k++) {
		lo = _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0x88);
		hi = _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0xdd);
		b[k] = max ? _mm512_max_ps(lo, hi) : _mm512_add_ps(lo, hi);
	}
	/* per quarter q of c[u]: rows 8u + q, 8u + 4 + q, two lanes each */
	for (int k = 0; k < 2; k++) {
		lo = (__m512)_mm512_unpacklo_pd((__m512d)b[2 * k], (__m512d)b[2 * k + 1]);
		hi = (__m512)_mm512_unpackhi_pd((__m512d)b[2 * k], (__m512d)b[2 * k + 1]);
		c[k] = max ? _mm512_max_ps(lo, hi) : _mm512_add_ps(lo, hi);
	}
	/* lane 4q + k: row 4k + q */
	lo = _mm512_shuffle_ps(c[0], c[1], 0x88);
	hi = _mm512_shuffle_ps(c[0], c[1], 0xdd);
	d = max ? _mm512_max_ps(lo, hi) : _mm512_add_ps(lo, hi);
	return _mm512_permutexvar_ps(_mm512_loadu_si512(row_idx), d);
}

/* kern_attn_softmax_bf16 (kernels.h) for one group of 16 rows (nr of
 * them real): row i's scores are x_i * scale, x_i = s + i * ld_s (scale
 * 1: the scores themselves; the product is exact and the compiler drops
 * it). Per group: every row's maximum, then every row's exponentials
 * (attention.c softmax_block's two passes), with kern_max's and
 * kern_exp_sum_prompt's operations at this level (avx512__max,
 * avx512__exp_sum_prompt) but their final horizontal steps taken for the
 * 16 rows together (avx512__reduce16); then each row's weights rounded to
 * bf16 into its A tiles pg while in L1 (a row that sees all 64 keys:
 * straight from the exps' registers, its scores left as they were;
 * attn17). This took the place of softmax_block, its memsets of masked
 * keys and aamx__a_tiles' separate pass over P (LEVELS.md, attn16). */
static inline __attribute__((always_inline)) void
avx512__softmax16(float *s, size_t ld_s, float scale, const uint32_t *lo, const uint32_t *hi,
		size_t nr, size_t nks, float *m, float *l, float *r, uint16_t *pg)
{
	const __m512 ninf = _mm512_set1_ps(-INFINITY), sc = _mm512_set1_ps(scale);
	__m512 acc[SM16_T];
	_Alignas(64) float m1[SM16_T], sum[SM16_T], rr[SM16_T];

	/* rows that see none of the block: -inf, so m1 = m */
	for (size_t i = 0; i < SM16_T; i++) {
		const size_t n = i < nr ? hi[i] - lo[i] : 0;
		const float *x = i < nr ? s + i * ld_s + lo[i] : s;
		__m512 mv = ninf;
		size_t j = 0;

		if (n == SM16_KEYS) { /* a whole block: straight, the loads at once */
			const __m512 x0 = _mm512_mul_ps(_mm512_loadu_ps(x), sc);
			const __m512 x1 = _mm512_mul_ps(_mm512_loadu_ps(x + 16), sc);
			const __m512 x2 = _mm512_mul_ps(_mm512_loadu_ps(x + 32), sc);
			const __m512 x3 = _mm512_mul_ps(_mm512_loadu_ps(x + 48), sc);

			acc[i] = _mm512_max_ps(
				x3, _mm512_max_ps(x2, _mm512_max_ps(x1, _mm512_max_ps(x0, mv))));
			continue;
		}
		for (; j + 16 <= n; j += 16)
			mv = _mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(x + j), sc), mv);
		if (j < n) {
			const __mmask16 k = (__mmask16)((1u << (n - j)) - 1);

			const __m512 xj = _mm512_mul_ps(_mm512_mask_loadu_ps(ninf, k, x + j), sc);

			mv = _mm512_max_ps(xj, mv);
		}
		acc[i] = mv;
	}
	{
		/* the rows' new maxima and rescales, 16 at once: rr = 1 where
		 * m1 == m ("no growth", a row of -inf scores), else
		 * avx512__exp_prompt(m - m1) (attn17; was expf per row) */
		const __mmask16 kr = (__mmask16)((1u << nr) - 1);
		const __m512 mo = _mm512_maskz_loadu_ps(kr, m);
		const __m512 mn = _mm512_max_ps(avx512__reduce16(acc, 1), mo);
		const __mmask16 same = _mm512_cmp_ps_mask(mn, mo, _CMP_EQ_OQ);

		_mm512_store_ps(m1, mn);
		_mm512_store_ps(rr, _mm512_mask_blend_ps(same,
							 avx512__exp_prompt(_mm512_sub_ps(mo, mn)),
							 _mm512_set1_ps(1.0f)));
	}
	for (size_t i = 0; i < SM16_T; i++) {
		const size_t n = i < nr ? hi[i] - lo[i] : 0;
		float *x = i < nr ? s + i * ld_s + lo[i] : s;
		const __m512 mv = _mm512_set1_ps(m1[i]);
		__m512 sv = _mm512_setzero_ps();
		size_t j = 0;

		if (n == SM16_KEYS) { /* the four exps independent, then the sums in order */
			const __m512 e0 = avx512__exp_prompt(
				_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(x), sc), mv));
			const __m512 e1 = avx512__exp_prompt(
				_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(x + 16), sc), mv));
			const __m512 e2 = avx512__exp_prompt(
				_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(x + 32), sc), mv));
			const __m512 e3 = avx512__exp_prompt(
				_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(x + 48), sc), mv));

			/* every key seen: the weights straight to the A tiles,
			 * the last loop skips the row */
			_mm512_store_si512(pg + i * SM16_STEP,
					   (__m512i)_mm512_cvtne2ps_pbh(e1, e0));
			_mm512_store_si512(pg + SM16_TILE + i * SM16_STEP,
					   (__m512i)_mm512_cvtne2ps_pbh(e3, e2));
			acc[i] = _mm512_add_ps(
				_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(sv, e0), e1), e2), e3);
			continue;
		}
		for (; j + 16 <= n; j += 16) {
			const __m512 e = avx512__exp_prompt(
				_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(x + j), sc), mv));

			_mm512_storeu_ps(x + j, e);
			sv = _mm512_add_ps(sv, e);
		}
		if (j < n) {
			const __mmask16 k = (__mmask16)((1u << (n - j)) - 1);
			const __m512 xj = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + j), sc);
			const __m512 e = avx512__exp_prompt(_mm512_sub_ps(xj, mv));

			_mm512_mask_storeu_ps(x + j, k, e);
			sv = _mm512_mask_add_ps(sv, k, sv, e);
		}
		acc[i] = sv;
	}
	_mm512_store_ps(sum, avx512__reduce16(acc, 0));
	for (size_t i = 0; i < SM16_T; i++) {
		const float *x = s + (i < nr ? i : 0) * ld_s; /* padding rows: none read */
		uint64_t seen = 0;

		if (i < nr && lo[i] < hi[i]) {
			r[i] = rr[i];
			l[i] = l[i] * rr[i] + sum[i];
			m[i] = m1[i];
			if (hi[i] - lo[i] == SM16_KEYS)
				continue; /* tiles written with the exps */
			/* keys [lo, hi) of the row; the rest weigh 0 */
			seen = (hi[i] >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << hi[i]) - 1) &
			       ~(((uint64_t)1 << lo[i]) - 1);
		} else if (i < nr) {
			r[i] = 1.0f;
		}
		for (size_t st = 0; st < nks; st++) {
			const __mmask16 ka = (__mmask16)(seen >> (st * SM16_STEP));
			const __mmask16 kb = (__mmask16)(seen >> (st * SM16_STEP + 16));
			const __m512 a = _mm512_maskz_loadu_ps(ka, x + st * SM16_STEP);
			const __m512 b = _mm512_maskz_loadu_ps(kb, x + st * SM16_STEP + 16);

			_mm512_store_si512(pg + st * SM16_TILE + i * SM16_STEP,
					   (__m512i)_mm512_cvtne2ps_pbh(b, a));
		}
	}
}

#endif
