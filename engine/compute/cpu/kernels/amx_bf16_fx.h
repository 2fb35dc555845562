/*
 * amx_bf16_fx.h - F16 and BF16 weights on the AMX bf16 prefill GEMM
 * (kernels_amx_bf16.c) as split products, so prompt rows keep F16's
 * accuracy on the bf16 tiles (issue 17).
 *
 * Why a split: F16 users chose accuracy; rounding an F16 weight (11
 * significant bits) and an fp32 activation to bf16 (8) moves outputs by
 * ~2^-9 of sum |w x|, and tests/test_embed.c and test_vulkan_pass.c hold
 * an F16 model's embeddings to 1e-4 / 1e-5 of the exact logits (LEVELS.md:
 * they failed when F16 prompt rows took bf16 in attention). So:
 *   w = w_hi + w_lo exactly: w_hi = bf16(w) (nearest even), w_lo = w -
 *       w_hi, at most 3 significant bits (fp16 has 11, w_hi took 8), so
 *       exact in bf16 (F16's range and subnormals are normal in bf16);
 *   a = a_hi + a_lo + r: a_hi = bf16(a), a_lo = bf16(a - a_hi) (a - a_hi
 *       exact in fp32), |r| <= 2^-17 |a|;
 *   w a = w_hi a_hi + w_hi a_lo + w_lo a_hi + (w_lo a_lo + w r), the
 *       dropped part <= 2^-18 + 2^-17 (1 + 2^-9) < 2^-16 of |w a|.
 * The three products are ordinary bf16 tile products with fp32 sums, so
 * the GEMM runs unchanged on a K three times as long (AMXFX_W = 3): each
 * 32-element K step s of the activations becomes steps 3s, 3s+1, 3s+2
 * holding [a_hi | a_lo | a_hi], and the weights' B tiles [w_hi | w_hi |
 * w_lo]. BF16 weights are exact in bf16 (w_lo = 0): [a_hi | a_lo] with
 * [w | w], K twice as long, the dropped part |w r| <= 2^-17 |w a|. Only
 * the activation rows, the B tiles and which K steps reuse the B tiles
 * of the step before (amxfx_keep: w_hi's second sub-step, built once and
 * kept in the tile registers) know the type; all three are here.
 * Against a float64 product the error is that bound per product plus the
 * fp32 sums' rounding, the avx512 level's F16 GEMM's own kind of error
 * (LEVELS.md fx15 has the measured distances of both).
 *
 * Denormals: VCVTNE2PS2BF16 and TDPBF16PS treat denormal inputs as zero;
 * a_lo is denormal only where |a| < ~2^-117, w_lo never (F16's smallest
 * is 2^-24).
 */
#ifndef EMBER_AMX_BF16_FX_H
#define EMBER_AMX_BF16_FX_H

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "amx_selftest.h"
#include "dtype.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "math_avx512.h"

/* K steps of the split per 32-element step of the weights (1: not split). */
static inline size_t amxfx_widen(uint32_t wt)
{
	return wt == DTYPE_F16 ? 3 : wt == DTYPE_BF16 ? 2 : 1;
}

/* 16 bf16 bits (in the low half of each dword) back to fp32. */
static inline __m512 amxfx__bf16_ps(__m256i h)
{
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* 32 floats at x as hi, lo: each a 32-element bf16 vector (elements in
 * order), hi = bf16(x), lo = bf16(x - hi), both nearest even. */
static inline void amxfx__split(__m512 x0, __m512 x1, __m512i *hi, __m512i *lo)
{
	const __m512i h = (__m512i)_mm512_cvtne2ps_pbh(x1, x0);
	const __m512 h0 = amxfx__bf16_ps(_mm512_castsi512_si256(h));
	const __m512 h1 = amxfx__bf16_ps(_mm512_extracti64x4_epi64(h, 1));

	*hi = h;
	*lo = (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(x1, h1), _mm512_sub_ps(x0, h0));
}

/* Token t's n_in floats x (NULL: zeros) into the activation tiles xb of
 * a wt product (K of n_in * amxfx_widen(wt)): kern_amxbf_act_row's
 * layout, step s of x as steps W s .. W s + W - 1: [a_hi | a_lo | a_hi]
 * (F16), [a_hi | a_lo] (BF16), [bf16(a)] (every other type). */
static inline void amxfx_act_row(uint32_t wt, const float *x, size_t n_in, size_t t,
				 uint16_t *xb)
{
	const size_t wd = amxfx_widen(wt), ns = n_in / 32;
	uint16_t *d = xb + (t / 16) * ns * wd * 512 + (t % 16) * 32;

	for (size_t s = 0; s < ns; s++) {
		__m512i hi = _mm512_setzero_si512(), lo = hi;
		uint16_t *e = d + s * wd * 512;

		if (x)
			amxfx__split(_mm512_loadu_ps(x + 32 * s), _mm512_loadu_ps(x + 32 * s + 16),
				     &hi, &lo);
		_mm512_storeu_si512(e, hi);
		if (wd > 1)
			_mm512_storeu_si512(e + 512, lo);
		if (wd > 2)
			_mm512_storeu_si512(e + 1024, hi);
	}
}

/* 1 when K' step b's B tile is step b - 1's: the second sub-step of a
 * weight step (F16 [w_hi | w_hi | w_lo], BF16 [w | w]). The tile loop
 * keeps step b - 1's B tiles in their registers for it (amxfx_keep) and
 * the panel does not build it, unless b opens a K chunk (LEVELS.md fx16:
 * building w_hi twice was a third of an F16 panel). */
static inline int amxfx_same_b(uint32_t wt, size_t b)
{
	const size_t wd = amxfx_widen(wt);

	return wd > 1 && b % wd == 1;
}

/* The K chunk [kc, kc + n)'s steps whose B tiles stay from the step
 * before (bit i: step kc + i; never bit 0, the chunk's first step loads);
 * 0 for every type that is not split. */
static inline uint32_t amxfx_keep(uint32_t wt, size_t kc, size_t n)
{
	uint32_t m = 0;

	for (size_t i = 1; i < n && i < 32; i++)
		m |= (uint32_t)amxfx_same_b(wt, kc + i) << i;
	return m;
}

/* Weight step s of 16 F16 or BF16 weight rows (w, st bytes apart) as B
 * tiles (kern_amxbf_b_tile's layout: row r = elements 2r, 2r+1 of the 16
 * rows): hi (NULL: not wanted) the w_hi tile (BF16: w), lo the w_lo tile
 * (F16 only; NULL: not wanted). The raw 16-bit rows are transposed once
 * (as dword pairs) and split after: the split is per element, so the
 * tiles are those of splitting first and transposing each, with one
 * transposition and one conversion per weight step instead of one per
 * tile (LEVELS.md fx16). */
static inline void amxfx_b_tiles(uint32_t wt, const char *w, size_t st, size_t s, uint16_t *hi,
				 uint16_t *lo)
{
	__m512i v[16];

	for (int r = 0; r < 16; r++)
		v[r] = _mm512_loadu_si512((const uint16_t *)(w + r * st) + 32 * s);
	avx512__transpose16(v);
	for (int r = 0; r < 16; r++) {
		__m512i h = v[r], l = h;

		if (wt != DTYPE_BF16)
			amxfx__split(_mm512_cvtph_ps(_mm512_castsi512_si256(v[r])),
				     _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v[r], 1)), &h, &l);
		if (hi)
			_mm512_store_si512(hi + r * 32, h);
		if (lo && wt != DTYPE_BF16)
			_mm512_store_si512(lo + r * 32, l);
	}
}

/* Step b (of K * amxfx_widen(wt) / 32) of the 16 rows as one B tile at
 * bt: [w_hi | w_hi | w_lo] (F16), [w | w] (BF16), by b's place in its
 * weight step. */
static inline void amxfx_b_tile(uint32_t wt, const char *w, size_t st, size_t b, uint16_t *bt)
{
	const size_t wd = amxfx_widen(wt), j = b % wd;

	amxfx_b_tiles(wt, w, st, b / wd, j == 2 ? NULL : bt, j == 2 ? bt : NULL);
}

/* The tiles of a K chunk's panel half that tile i (K' step b = kc + i,
 * n steps in the chunk) builds, at bt (the half's tile 0): the first
 * tile of its weight step in the chunk builds every tile of that step
 * the tile loop loads (amxfx_same_b's ones only where they open the
 * chunk), the others nothing. */
static inline void amxfx_panel_tile(uint32_t wt, const char *w, size_t st, size_t kc, size_t i,
				    size_t n, uint16_t *bt)
{
	const size_t wd = amxfx_widen(wt), b = kc + i, j = b % wd;
	uint16_t *h = NULL, *l = NULL;

	if (i >= j ? j != 0 : i != 0) /* not its weight step's first in the chunk */
		return;
	/* sub-step jj of the step sits at chunk place i - j + jj: w_hi at jj
	 * 0 (in the chunk only when j is 0) and jj 1 (only when it opens the
	 * chunk), w_lo (F16) at jj 2 */
	if (j == 0 || (j == 1 && i == 0))
		h = bt + i * 512;
	if (wd == 3 && i + 2 - j < n)
		l = bt + (i + 2 - j) * 512;
	amxfx_b_tiles(wt, w, st, b / wd, h, l);
}

/* The bound the split GEMM holds against a float64 product of the
 * exact operands, per output, as a fraction of sum |w x|: the dropped
 * part (< 2^-16, above) and the fp32 sums' allowance of the bf16
 * self-test (1e-5). */
#define AMXFX_BOUND (0x1p-16 + 1e-5)

/* The start-up self-test of the split products (kern_amxbf_enable): f16
 * and bf16 (the GEMMs, wt order) on 152 rows (a 128-row block, a 16-row
 * group, an 8-row tail on the avx512 level), 576 inputs (K' of 54 / 36
 * steps: chunks of 16, a partial last one, both folds), 69 tokens (two
 * 32-token groups and a tail of 5) against a float64 product of the
 * exact F16 / BF16 weights and float activations: within AMXFX_BOUND of
 * sum |w x|. Weights of varied magnitude (2^-12 .. 1), so every w_lo
 * and a_lo is in play. 0 when it holds. */
static inline int amxfx_selftest(kern_gemm_fn f16, kern_gemm_fn bf16)
{
	enum { OUT = 152, IN = 576, TOK = 69 };
	uint16_t *w = malloc(sizeof(uint16_t) * OUT * IN);
	float *wf = malloc(sizeof(float) * OUT * IN), *xf = malloc(sizeof(float) * TOK * IN);
	float *y = malloc(sizeof(float) * TOK * OUT);
	uint32_t s = 9173;
	int rc = -1;

	if (!w || !wf || !xf || !y)
		goto out;
	for (size_t i = 0; i < TOK * IN; i++)
		xf[i] = ((float)(amx_selftest_rand(&s) % 200001) - 100000.0f) * 1.37e-5f;
	for (int ti = 0; ti < 2; ti++) {
		const uint32_t wt = ti ? DTYPE_BF16 : DTYPE_F16;
		struct kern_gemm_args a = {
			.w = w, .w_stride = IN * sizeof(uint16_t), .n_in = IN, .x = xf,
			.x_stride = IN * sizeof(float), .n_tok = TOK, .y = y, .y_stride = OUT,
			.xf = xf, .xf_stride = IN,
		};

		amx_selftest_weights16(wt, w, wf, OUT * IN, &s);
		(ti ? bf16 : f16)(&a, 0, OUT);
		for (size_t o = 0; o < OUT; o++)
			for (size_t k = 0; k < TOK; k++) {
				double r = 0, sa = 0;

				for (size_t j = 0; j < IN; j++) {
					const double p = (double)wf[o * IN + j] * xf[k * IN + j];

					r += p;
					sa += fabs(p);
				}
				if (!(fabs(y[k * OUT + o] - r) <= AMXFX_BOUND * sa + 1e-30))
					goto out;
			}
	}
	rc = 0;
out:
	free(w);
	free(wf);
	free(xf);
	free(y);
	return rc;
}

#endif
