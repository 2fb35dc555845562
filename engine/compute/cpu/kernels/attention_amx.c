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
#include "softmax16_avx512.h"

#define AAMX_T 16	  /* rows of a tile: queries, or key pairs */
#define AAMX_STEP 32	  /* bf16 elements of a tile row (64 bytes) */
#define AAMX_TILE 512	  /* bf16 elements of a tile */
#define AAMX_KEYS KERN_ATTN_BF16_KEYS /* four C tiles of 16 keys */

/* Rows [i0, i0 + 16) of x (n valid: zeros past them; ld apart), as the A
 * tiles of ns K steps: tile s = 16 rows x elements 32s .. 32s + 31. */
static void aamx__a_tiles(const float *x, size_t ld, size_t n, size_t ns, size_t w,
			  uint16_t *a)
{
	for (size_t i = 0; i < AAMX_T; i++)
		for (size_t s = 0; s < ns; s++) {
			const size_t c = s * AAMX_STEP;
			const __m512i v = i < n && c < w ? avx512__bf16x32(x + i * ld + c, 0,
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

				r[n] = j < nk ? avx512__bf16x32((const char *)k +
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

void kern_amx_attn_softmax_bf16(float *s, size_t ld_s, const uint32_t *lo, const uint32_t *hi,
				size_t nq, size_t nk, float *m, float *l, float *r, uint16_t *pt)
{
	const size_t nks = (nk + AAMX_STEP - 1) / AAMX_STEP;

	for (size_t i0 = 0; i0 < nq; i0 += AAMX_T)
		avx512__softmax16(s + i0 * ld_s, ld_s, 1.0f, lo + i0, hi + i0,
				nq - i0 < AAMX_T ? nq - i0 : AAMX_T, nks, m + i0, l + i0, r + i0,
				pt + i0 / AAMX_T * nks * AAMX_TILE);
}

/* kern_attn_scores_softmax_bf16 (kernels.h): aamx__scores' products for a
 * group of 16 rows, the four C tiles stored as one 16 x 64 block (row i
 * at c + 64 i, in L1), then avx512__softmax16 on it with the scale: the
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
		avx512__softmax16(c, AAMX_KEYS, scale, lo + i0, hi + i0,
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
