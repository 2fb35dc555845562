/*
 * attention_amx.c - the amx level's prompt-row attention blocks: a
 * tile's scores against a key block (Q K^T) and its probability-weighted
 * value sums (P V) on AMX bf16 tiles (TDPBF16PS), for the prompt rows
 * only (attention.c: tiles forward.c marks `prompt`, whose outputs are
 * never sampled; sampled rows keep the avx512 float kernels bit for bit).
 *
 * Numbers: q, k, p and v are rounded to bf16 (round to nearest even,
 * VCVTNE2PS2BF16), products accumulate in fp32 (the tile's order), as
 * the bf16 GEMM does for the same rows' projections (kernels_amx_bf16.c).
 * A score or output element depends only on its own query row and the
 * block's keys and values, never on the rows computed with it, so a
 * prompt row's result is the same in any tile, chunk or thread.
 *
 * Layouts (all tiles 16 rows x 64 bytes, kern_amx_config_bf16()):
 *   scores: A = 16 queries x 32 bf16 of the head (one K step of 32),
 *           B = the keys' transpose in pairs: row kk, dword n = elements
 *           2kk, 2kk + 1 of key n (a 16 x 16 dword transpose of 16 key
 *           rows), C = 16 queries x 16 keys; four key groups (64 keys)
 *           in tmm0-3, A in tmm4, B in tmm5-7.
 *   values: A = 16 queries x 32 weights (keys), B = two value rows
 *           interleaved: row kk = (v[2kk][c], v[2kk + 1][c]) for 16
 *           columns c, C = 16 queries x 16 columns, four column groups
 *           in tmm0-3; then o = o * r + C on ZMM.
 * A block and head (64 queries x 64 keys x 64 wide) is 32 tile products
 * for the scores and 32 for the values, where the avx512 kernels did
 * 2 x 64^3 float FMAs and a transposing sum per 4 x 8 scores; the
 * conversions and the 16 x 16 transposes of the keys (~64 shuffles
 * each) are the rest. Emerald Rapids, one thread: a 512-token prompt's
 * attention a layer ~14.5 -> ~9.8 ms (LEVELS.md, attn12).
 *
 * The keys' and values' preparation is once a call: attention.c stacks
 * a kv head's query heads (up to 8) as the rows of one call, so a key
 * block is transposed once per (64-query tile, run of heads), not per
 * 16-row tile or head. The softmax between the two products
 * (kern_amx_attn_softmax_bf16) writes the weights straight into the
 * value call's A tiles (kern_amx_attn_accum_bf16_tiles), with the
 * separate steps' bits; kern_amx_attn_out_bf16 divides the outputs by
 * the sums (attn16).
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"
#include "math_avx512.h"

#define AAMX_T 16	  /* rows of a tile: queries, or key pairs */
#define AAMX_STEP 32	  /* bf16 elements of a tile row (64 bytes) */
#define AAMX_TILE 512	  /* bf16 elements of a tile */
#define AAMX_KEYS KERN_ATTN_BF16_KEYS /* four C tiles of 16 keys */

/* 32 floats from x (n of them valid, the rest 0; or F16 when f16) as
 * bf16 pairs: dword j = elements 2j, 2j + 1. */
static inline __m512i aamx__bf16x32(const void *x, int f16, size_t n)
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

/* Rows [i0, i0 + 16) of x (n valid: zeros past them; ld apart), as the A
 * tiles of ns K steps: tile s = 16 rows x elements 32s .. 32s + 31. */
static void aamx__a_tiles(const float *x, size_t ld, size_t n, size_t ns, size_t w,
			  uint16_t *a)
{
	for (size_t i = 0; i < AAMX_T; i++)
		for (size_t s = 0; s < ns; s++) {
			const size_t c = s * AAMX_STEP;
			const __m512i v = i < n && c < w ? aamx__bf16x32(x + i * ld + c, 0,
									 w - c)
						    : _mm512_setzero_si512();

			_mm512_store_si512(a + s * AAMX_TILE + i * AAMX_STEP, v);
		}
}

/* The keys [0, nk) of a block (nk <= AAMX_KEYS; floats or, when f16, F16
 * rows of d) rounded to bf16 as the B tiles of the scores: key group g,
 * step s at kt + (g * ns + s) * AAMX_TILE, keys past nk 0. */
static void aamx__key_tiles(const void *k, int f16, size_t d, size_t nk, uint16_t *kt)
{
	const size_t ns = d / AAMX_STEP, elt = f16 ? 2 : 4;

	for (size_t g = 0; g < 4; g++)
		for (size_t st = 0; st < ns; st++) {
			__m512i r[16];

			for (size_t n = 0; n < AAMX_T; n++) {
				const size_t j = g * AAMX_T + n;

				r[n] = j < nk ? aamx__bf16x32((const char *)k +
								      (j * d + st * AAMX_STEP) * elt,
							      f16, AAMX_STEP)
					      : _mm512_setzero_si512();
			}
			avx512__transpose16(r);
			for (size_t kk = 0; kk < AAMX_T; kk++)
				_mm512_store_si512(kt + (g * ns + st) * AAMX_TILE + kk * AAMX_STEP,
						   r[kk]);
		}
}

/* 16 queries' (A tiles qa, ns steps) products with the 64 keys' B tiles
 * kt (aamx__key_tiles), unscaled, into c as 16 rows of 64 (row i at c +
 * 64 i: the four C tiles side by side). The tiles must be configured. */
static inline void aamx__score_tiles(const uint16_t *qa, const uint16_t *kt, size_t ns, float *c)
{
	_tile_zero(0);
	_tile_zero(1);
	_tile_zero(2);
	_tile_zero(3);
	for (size_t st = 0; st < ns; st++) {
		_tile_loadd(4, qa + st * AAMX_TILE, 64);
		_tile_loadd(5, kt + (0 * ns + st) * AAMX_TILE, 64);
		_tile_loadd(6, kt + (1 * ns + st) * AAMX_TILE, 64);
		_tile_dpbf16ps(0, 4, 5);
		_tile_loadd(7, kt + (2 * ns + st) * AAMX_TILE, 64);
		_tile_dpbf16ps(1, 4, 6);
		_tile_loadd(5, kt + (3 * ns + st) * AAMX_TILE, 64);
		_tile_dpbf16ps(2, 4, 7);
		_tile_dpbf16ps(3, 4, 5);
	}
	_tile_stored(0, c, 4 * 64);
	_tile_stored(1, c + 16, 4 * 64);
	_tile_stored(2, c + 32, 4 * 64);
	_tile_stored(3, c + 48, 4 * 64);
}

/* kern_attn_scores() of queries (given as A tiles, kern_attn_q_bf16) and
 * keys rounded to bf16 (the keys as floats or, when f16, F16 rows),
 * nk <= AAMX_KEYS (64), d a multiple of 32 up to KERN_ATTN_BF16_DIM. */
static void aamx__scores(const uint16_t *qt, const void *k, int f16, size_t d,
			 const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			 size_t nk)
{
	const size_t ns = d / AAMX_STEP;
	_Alignas(64) uint16_t kt[4 * KERN_ATTN_BF16_DIM / AAMX_STEP * AAMX_TILE];
	_Alignas(64) float c[AAMX_T * AAMX_KEYS];
	const __m512 sv = _mm512_set1_ps(scale);

	aamx__key_tiles(k, f16, d, nk, kt);
	kern_amx_config_bf16();
	for (size_t i0 = 0; i0 < nq; i0 += AAMX_T) {
		const size_t nr = nq - i0 < AAMX_T ? nq - i0 : AAMX_T;

		aamx__score_tiles(qt + i0 / AAMX_T * ns * AAMX_TILE, kt, ns, c);
		for (size_t g = 0; g * AAMX_T < nk; g++) {
			const size_t j0 = g * AAMX_T, nj = nk - j0 < AAMX_T ? nk - j0 : AAMX_T;
			const __mmask16 m = (__mmask16)((1u << nj) - 1);
			const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + j0)
					       : _mm512_setzero_ps();

			for (size_t i = 0; i < nr; i++) {
				const __m512 x = _mm512_load_ps(c + i * AAMX_KEYS + j0);

				_mm512_mask_storeu_ps(s + (i0 + i) * ld_s + j0, m,
						      _mm512_mul_ps(_mm512_add_ps(x, bv), sv));
			}
		}
	}
}

/* kern_attn_accum() of weights and values rounded to bf16 (the values as
 * floats or F16 rows), nk <= AAMX_KEYS, d a multiple of 16 up to
 * KERN_ATTN_BF16_DIM: C = P V on the tiles from zero, then o = o r + C.
 * The weights as floats p (made into A tiles a group of 16 rows at a
 * time) or, when pt, already as A tiles (kern_amx_attn_softmax_bf16's). */
static void aamx__accum(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			const uint16_t *pt, const void *v, int f16, size_t d, size_t nq, size_t nk)
{
	const size_t nks = (nk + AAMX_STEP - 1) / AAMX_STEP, ncg = d / AAMX_T;
	const size_t elt = f16 ? 2 : 4;
	/* word 2c = element c of the first row, 2c + 1 of the second */
	static const uint16_t pair_idx[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
					      21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
					      11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
	const __m512i pair = _mm512_loadu_si512(pair_idx);
	_Alignas(64) uint16_t vb[AAMX_KEYS / AAMX_STEP * KERN_ATTN_BF16_DIM / AAMX_T * AAMX_TILE];
	_Alignas(64) uint16_t pa[AAMX_KEYS / AAMX_STEP * AAMX_TILE];
	_Alignas(64) float c[4 * AAMX_T * AAMX_T];

	/* B: step s (32 keys), column group g at vb + (s * ncg + g) * AAMX_TILE */
	for (size_t st = 0; st < nks; st++)
		for (size_t kk = 0; kk < AAMX_T; kk++) {
			const size_t j = st * AAMX_STEP + 2 * kk;
			const char *v0 = (const char *)v + j * d * elt, *v1 = v0 + d * elt;

			for (size_t g = 0; g < ncg; g++) {
				__m512 lo, hi;

				if (f16) {
					lo = j < nk ? _mm512_cvtph_ps(_mm256_loadu_si256(
							      (const __m256i *)v0 + g))
						    : _mm512_setzero_ps();
					hi = j + 1 < nk ? _mm512_cvtph_ps(_mm256_loadu_si256(
								  (const __m256i *)v1 + g))
							: _mm512_setzero_ps();
				} else {
					lo = j < nk ? _mm512_loadu_ps((const float *)v0 + 16 * g)
						    : _mm512_setzero_ps();
					hi = j + 1 < nk ? _mm512_loadu_ps((const float *)v1 + 16 * g)
							: _mm512_setzero_ps();
				}
				_mm512_store_si512(vb + (st * ncg + g) * AAMX_TILE + kk * AAMX_STEP,
						   _mm512_permutexvar_epi16(
							   pair, (__m512i)_mm512_cvtne2ps_pbh(hi, lo)));
			}
		}
	kern_amx_config_bf16();
	for (size_t i0 = 0; i0 < nq; i0 += AAMX_T) {
		const size_t nr = nq - i0 < AAMX_T ? nq - i0 : AAMX_T;

		const uint16_t *pg = pt ? pt + i0 / AAMX_T * nks * AAMX_TILE : pa;

		if (!pt)
			aamx__a_tiles(p + i0 * ld_p, ld_p, nr, nks, nk, pa);
		for (size_t g0 = 0; g0 < ncg; g0 += 4) {
			const size_t ng = ncg - g0 < 4 ? ncg - g0 : 4;

			_tile_zero(0);
			_tile_zero(1);
			_tile_zero(2);
			_tile_zero(3);
			for (size_t st = 0; st < nks; st++) {
				const uint16_t *b = vb + (st * ncg + g0) * AAMX_TILE;

				_tile_loadd(4, pg + st * AAMX_TILE, 64);
				_tile_loadd(5, b, 64);
				_tile_dpbf16ps(0, 4, 5);
				if (ng > 1) {
					_tile_loadd(6, b + AAMX_TILE, 64);
					_tile_dpbf16ps(1, 4, 6);
				}
				if (ng > 2) {
					_tile_loadd(7, b + 2 * AAMX_TILE, 64);
					_tile_dpbf16ps(2, 4, 7);
				}
				if (ng > 3) {
					_tile_loadd(5, b + 3 * AAMX_TILE, 64);
					_tile_dpbf16ps(3, 4, 5);
				}
			}
			_tile_stored(0, c, 64);
			_tile_stored(1, c + 256, 64);
			_tile_stored(2, c + 512, 64);
			_tile_stored(3, c + 768, 64);
			for (size_t i = 0; i < nr; i++) {
				const __m512 rv = _mm512_set1_ps(r[i0 + i]);
				float *oi = o + (i0 + i) * ld_o + g0 * AAMX_T;

				for (size_t g = 0; g < ng; g++)
					_mm512_storeu_ps(oi + 16 * g,
							 _mm512_fmadd_ps(_mm512_loadu_ps(oi + 16 * g),
									 rv,
									 _mm512_load_ps(c + g * 256 +
											i * 16)));
			}
		}
	}
}

void kern_amx_attn_q_bf16(const float *q, size_t ld_q, size_t d, size_t nq, uint16_t *qt)
{
	const size_t ns = d / AAMX_STEP;

	for (size_t i0 = 0; i0 < nq; i0 += AAMX_T)
		aamx__a_tiles(q + i0 * ld_q, ld_q, nq - i0 < AAMX_T ? nq - i0 : AAMX_T, ns, d,
			      qt + i0 / AAMX_T * ns * AAMX_TILE);
}

void kern_amx_attn_scores_bf16(const uint16_t *qt, const void *k, int f16, size_t d,
			       const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			       size_t nk)
{
	aamx__scores(qt, k, f16, d, bias, scale, s, ld_s, nq, nk);
}

void kern_amx_attn_accum_bf16(float *o, size_t ld_o, const float *r, const float *p,
			      size_t ld_p, const void *v, int f16, size_t d, size_t nq, size_t nk)
{
	aamx__accum(o, ld_o, r, p, ld_p, NULL, v, f16, d, nq, nk);
}

/* Sixteen rows' _mm512_reduce_add_ps (op add) or _mm512_reduce_max_ps
 * (max) at once: v[r] row r's 16 lanes, lane r of the result its value.
 * The same pairing as the one-row form (lane j with j + 8, then j + 4,
 * then j + 2, then j + 1), so the same sums (IEEE addition commutes);
 * the maxima differ at most in a zero's sign, which a softmax does not
 * see (kern_avx512_max). Four rounds of shuffles for 16 rows where the
 * one-row form took a chain of ~8 dependent steps each. */
static inline __m512 aamx__reduce16(const __m512 v[16], int max)
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
 * 16 rows together (aamx__reduce16); then each row's weights rounded to
 * bf16 into its A tiles pg while in L1 (a row that sees all 64 keys:
 * straight from the exps' registers, its scores left as they were;
 * attn17). This took the place of softmax_block, its memsets of masked
 * keys and aamx__a_tiles' separate pass over P (LEVELS.md, attn16). */
static inline __attribute__((always_inline)) void
aamx__softmax16(float *s, size_t ld_s, float scale, const uint32_t *lo, const uint32_t *hi,
		size_t nr, size_t nks, float *m, float *l, float *r, uint16_t *pg)
{
	const __m512 ninf = _mm512_set1_ps(-INFINITY), sc = _mm512_set1_ps(scale);
	__m512 acc[AAMX_T];
	_Alignas(64) float m1[AAMX_T], sum[AAMX_T], rr[AAMX_T];

	/* rows that see none of the block: -inf, so m1 = m */
	for (size_t i = 0; i < AAMX_T; i++) {
		const size_t n = i < nr ? hi[i] - lo[i] : 0;
		const float *x = i < nr ? s + i * ld_s + lo[i] : s;
		__m512 mv = ninf;
		size_t j = 0;

		if (n == AAMX_KEYS) { /* a whole block: straight, the loads at once */
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
		const __m512 mn = _mm512_max_ps(aamx__reduce16(acc, 1), mo);
		const __mmask16 same = _mm512_cmp_ps_mask(mn, mo, _CMP_EQ_OQ);

		_mm512_store_ps(m1, mn);
		_mm512_store_ps(rr, _mm512_mask_blend_ps(same,
							 avx512__exp_prompt(_mm512_sub_ps(mo, mn)),
							 _mm512_set1_ps(1.0f)));
	}
	for (size_t i = 0; i < AAMX_T; i++) {
		const size_t n = i < nr ? hi[i] - lo[i] : 0;
		float *x = i < nr ? s + i * ld_s + lo[i] : s;
		const __m512 mv = _mm512_set1_ps(m1[i]);
		__m512 sv = _mm512_setzero_ps();
		size_t j = 0;

		if (n == AAMX_KEYS) { /* the four exps independent, then the sums in order */
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
			_mm512_store_si512(pg + i * AAMX_STEP,
					   (__m512i)_mm512_cvtne2ps_pbh(e1, e0));
			_mm512_store_si512(pg + AAMX_TILE + i * AAMX_STEP,
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
	_mm512_store_ps(sum, aamx__reduce16(acc, 0));
	for (size_t i = 0; i < AAMX_T; i++) {
		const float *x = s + (i < nr ? i : 0) * ld_s; /* padding rows: none read */
		uint64_t seen = 0;

		if (i < nr && lo[i] < hi[i]) {
			r[i] = rr[i];
			l[i] = l[i] * rr[i] + sum[i];
			m[i] = m1[i];
			if (hi[i] - lo[i] == AAMX_KEYS)
				continue; /* tiles written with the exps */
			/* keys [lo, hi) of the row; the rest weigh 0 */
			seen = (hi[i] >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << hi[i]) - 1) &
			       ~(((uint64_t)1 << lo[i]) - 1);
		} else if (i < nr) {
			r[i] = 1.0f;
		}
		for (size_t st = 0; st < nks; st++) {
			const __mmask16 ka = (__mmask16)(seen >> (st * AAMX_STEP));
			const __mmask16 kb = (__mmask16)(seen >> (st * AAMX_STEP + 16));
			const __m512 a = _mm512_maskz_loadu_ps(ka, x + st * AAMX_STEP);
			const __m512 b = _mm512_maskz_loadu_ps(kb, x + st * AAMX_STEP + 16);

			_mm512_store_si512(pg + st * AAMX_TILE + i * AAMX_STEP,
					   (__m512i)_mm512_cvtne2ps_pbh(b, a));
		}
	}
}

void kern_amx_attn_softmax_bf16(float *s, size_t ld_s, const uint32_t *lo, const uint32_t *hi,
				size_t nq, size_t nk, float *m, float *l, float *r, uint16_t *pt)
{
	const size_t nks = (nk + AAMX_STEP - 1) / AAMX_STEP;

	for (size_t i0 = 0; i0 < nq; i0 += AAMX_T)
		aamx__softmax16(s + i0 * ld_s, ld_s, 1.0f, lo + i0, hi + i0,
				nq - i0 < AAMX_T ? nq - i0 : AAMX_T, nks, m + i0, l + i0, r + i0,
				pt + i0 / AAMX_T * nks * AAMX_TILE);
}

/* kern_attn_scores_softmax_bf16 (kernels.h): aamx__scores' products for a
 * group of 16 rows, the four C tiles stored as one 16 x 64 block (row i
 * at c + 64 i, in L1), then aamx__softmax16 on it with the scale: the
 * scores never go to s (attn17). */
void kern_amx_attn_scores_softmax_bf16(const uint16_t *qt, const void *k, int f16, size_t d,
				       float scale, const uint32_t *lo, const uint32_t *hi,
				       size_t nq, size_t nk, float *m, float *l, float *r,
				       uint16_t *pt)
{
	const size_t ns = d / AAMX_STEP, nks = (nk + AAMX_STEP - 1) / AAMX_STEP;
	_Alignas(64) uint16_t kt[4 * KERN_ATTN_BF16_DIM / AAMX_STEP * AAMX_TILE];
	_Alignas(64) float c[AAMX_T * AAMX_KEYS];

	aamx__key_tiles(k, f16, d, nk, kt);
	kern_amx_config_bf16();
	for (size_t i0 = 0; i0 < nq; i0 += AAMX_T) {
		aamx__score_tiles(qt + i0 / AAMX_T * ns * AAMX_TILE, kt, ns, c);
		aamx__softmax16(c, AAMX_KEYS, scale, lo + i0, hi + i0,
				nq - i0 < AAMX_T ? nq - i0 : AAMX_T, nks, m + i0, l + i0, r + i0,
				pt + i0 / AAMX_T * nks * AAMX_TILE);
	}
}

void kern_amx_attn_accum_bf16_tiles(float *o, size_t ld_o, const float *r, const uint16_t *pt,
				    const void *v, int f16, size_t d, size_t nq, size_t nk)
{
	aamx__accum(o, ld_o, r, NULL, 0, pt, v, f16, d, nq, nk);
}
/* kern_attn_out_bf16 (kernels.h): scale_row's one product an element
 * (attention.c), on ZMM; the next rows' loads are issued ahead, as the
 * output rows are n_head * d floats apart (8 KB for TinyLlama), a page
 * each, out of the prefetchers' reach. */
void kern_amx_attn_out_bf16(const float *o, size_t ld_o, const float *l, float *out,
			    size_t ld_out, size_t d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const __m512 sv = _mm512_set1_ps(1.0f / l[i]);
		const float *src = o + i * ld_o;
		float *dst = out + i * ld_out;

		if (i + 4 < n)
			for (size_t c = 0; c < d; c += 16)
				_mm_prefetch((const char *)(out + (i + 4) * ld_out + c), _MM_HINT_T0);
		for (size_t c = 0; c < d; c += 16)
			_mm512_storeu_ps(dst + c, _mm512_mul_ps(_mm512_loadu_ps(src + c), sv));
	}
}
#endif
