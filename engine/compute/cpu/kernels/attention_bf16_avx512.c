/*
 * attention_bf16_avx512.c - prompt-row attention blocks (kernels.h
 * kern_attn_q_bf16 / kern_attn_scores_bf16 / kern_attn_accum_bf16) for
 * the avx512 level on CPUs with AVX512-BF16 but no AMX (Zen 4, Zen 5,
 * Cooper Lake): q, k, the softmax weights and v rounded to bf16, fp32
 * sums by VDPBF16PS, 32 products a ZMM instruction where the float
 * kernels' FMA takes 16. Rows whose outputs are never sampled only
 * (attention.c's prompt tiles, the amx level's contract): the same
 * rounding as the amx level's bf16 tiles (attention_amx.c), other sums'
 * order, so other bits than both the float kernels and the amx level.
 *
 * Keys in lanes, no horizontal sums: a block's keys are rounded and
 * transposed once a call into key pairs (pair p of key j: elements 2p,
 * 2p + 1 of key row j, one dword; 16 keys a ZMM, the amx level's B-tile
 * layout), and a query's pair p is broadcast against them, so a 4-query
 * x 64-key tile is 16 accumulators and each score row comes out as the
 * row of S that attention.c's softmax reads. The values likewise: two
 * value rows interleaved by column (pair of keys 2t, 2t + 1 of column c,
 * one dword), a query's weights broadcast by key pair, 4 queries x 64
 * columns a tile. Each score and output element depends only on its own
 * row and the block (the products run in the same order whatever the
 * rows computed with it), so a prompt row's result does not depend on
 * its tile, chunk or thread.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"
#include "math_avx512.h"
#include "softmax16_avx512.h"

#define AVX512B_INLINE static inline __attribute__((always_inline))
#define AVX512B_UNROLL _Pragma("GCC unroll 16")
#define AVX512B_KEYS KERN_ATTN_BF16_KEYS /* four ZMM of 16 keys */
#define AVX512B_ROWS 4			 /* queries a tile */

/* Rows [0, nq) of q (d floats, ld_q apart) rounded to bf16 into qt: row
 * i at qt + i * d (so row group g at qt + g * 16 * d, kernels.h's
 * layout), the rows up to the next 16 zeros. d a multiple of 32. */
void kern_avx512_attn_q_bf16(const float *q, size_t ld_q, size_t d, size_t nq, uint16_t *qt)
{
	const size_t n16 = (nq + 15) / 16 * 16;

	for (size_t i = 0; i < n16; i++)
		for (size_t c = 0; c < d; c += 32)
			_mm512_store_si512(qt + i * d + c, i < nq ? avx512__bf16x32(q + i * ld_q + c,
										    0, d - c)
								  : _mm512_setzero_si512());
}

/* Keys [0, nk) of a block (floats, or F16 rows when f16; d wide) as key
 * pairs: pair p of keys 16g .. 16g + 15 is the ZMM at kt + (4p + g) * 16
 * dwords; keys past nk (up to the group's 16) 0. */
static void avx512b__key_pairs(const void *k, int f16, size_t d, size_t nk, uint32_t *kt)
{
	const size_t elt = f16 ? 2 : 4;

	for (size_t g = 0; g * 16 < nk; g++)
		for (size_t st = 0; st < d / 32; st++) {
			__m512i r[16];

			for (size_t n = 0; n < 16; n++) {
				const size_t j = g * 16 + n;

				r[n] = j < nk ? avx512__bf16x32((const char *)k + (j * d + st * 32) * elt,
								f16, 32)
					      : _mm512_setzero_si512();
			}
			avx512__transpose16(r); /* r[kk]: pair 16 st + kk, key lanes */
			for (size_t kk = 0; kk < 16; kk++)
				_mm512_store_si512(kt + ((st * 16 + kk) * 4 + g) * 16, r[kk]);
		}
}

/* nr (a constant after inlining) queries' bf16 rows (qt, d apart)
 * against the ng key groups of kt: the dot of query i and key 16g + lane
 * in acc[i][g]. */
AVX512B_INLINE void avx512b__scores_tile(const uint16_t *qt, size_t d, const uint32_t *kt,
					 const int nr, const int ng, __m512 acc[AVX512B_ROWS][4])
{
	AVX512B_UNROLL
	for (int i = 0; i < nr; i++)
		AVX512B_UNROLL
		for (int g = 0; g < ng; g++)
			acc[i][g] = _mm512_setzero_ps();
	for (size_t p = 0; p < d / 2; p++) {
		__m512i kv[4];

		AVX512B_UNROLL
		for (int g = 0; g < ng; g++)
			kv[g] = _mm512_load_si512(kt + (4 * p + g) * 16);
		AVX512B_UNROLL
		for (int i = 0; i < nr; i++) {
			uint32_t pair;

			memcpy(&pair, qt + i * d + 2 * p, sizeof(pair));
			const __m512bh qv = (__m512bh)_mm512_set1_epi32((int)pair);

			AVX512B_UNROLL
			for (int g = 0; g < ng; g++)
				acc[i][g] = _mm512_dpbf16_ps(acc[i][g], qv, (__m512bh)kv[g]);
		}
	}
}

/* s row i, keys [0, nk) = (acc[i] + bias) * scale. */
AVX512B_INLINE void avx512b__scores_store(__m512 acc[AVX512B_ROWS][4], const int nr,
					  const int ng, const float *bias, float scale, float *s,
					  size_t ld_s, size_t nk)
{
	const __m512 sv = _mm512_set1_ps(scale);

	AVX512B_UNROLL
	for (int g = 0; g < ng; g++) {
		const size_t left = nk - 16 * (size_t)g;
		const __mmask16 km = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
		const __m512 bv = bias ? _mm512_maskz_loadu_ps(km, bias + 16 * g)
				       : _mm512_setzero_ps();

		AVX512B_UNROLL
		for (int i = 0; i < nr; i++)
			_mm512_mask_storeu_ps(s + i * ld_s + 16 * g, km,
					      _mm512_mul_ps(_mm512_add_ps(acc[i][g], bv), sv));
	}
}

/* The rows [0, nq) of one call with ng key groups (a constant). */
AVX512B_INLINE void avx512b__scores_rows(const uint16_t *qt, size_t d, const uint32_t *kt,
					 const int ng, const float *bias, float scale, float *s,
					 size_t ld_s, size_t nq, size_t nk)
{
	__m512 acc[AVX512B_ROWS][4];
	size_t i = 0;

	for (; i + AVX512B_ROWS <= nq; i += AVX512B_ROWS) {
		avx512b__scores_tile(qt + i * d, d, kt, AVX512B_ROWS, ng, acc);
		avx512b__scores_store(acc, AVX512B_ROWS, ng, bias, scale, s + i * ld_s, ld_s, nk);
	}
	for (; i < nq; i++) {
		avx512b__scores_tile(qt + i * d, d, kt, 1, ng, acc);
		avx512b__scores_store(acc, 1, ng, bias, scale, s + i * ld_s, ld_s, nk);
	}
}

/* Rows [0, nq) against the key pairs kt of nk keys, by the key groups'
 * count. */
static void avx512b__scores_groups(const uint16_t *qt, size_t d, const uint32_t *kt,
				   const float *bias, float scale, float *s, size_t ld_s,
				   size_t nq, size_t nk)
{
	switch ((nk + 15) / 16) {
	case 1:
		avx512b__scores_rows(qt, d, kt, 1, bias, scale, s, ld_s, nq, nk);
		break;
	case 2:
		avx512b__scores_rows(qt, d, kt, 2, bias, scale, s, ld_s, nq, nk);
		break;
	case 3:
		avx512b__scores_rows(qt, d, kt, 3, bias, scale, s, ld_s, nq, nk);
		break;
	default:
		avx512b__scores_rows(qt, d, kt, 4, bias, scale, s, ld_s, nq, nk);
		break;
	}
}

void kern_avx512_attn_scores_bf16(const uint16_t *qt, const void *k, int f16, size_t d,
				  const float *bias, float scale, float *s, size_t ld_s, size_t nq,
				  size_t nk)
{
	_Alignas(64) uint32_t kt[KERN_ATTN_BF16_DIM / 2 * AVX512B_KEYS];

	avx512b__key_pairs(k, f16, d, nk, kt);
	avx512b__scores_groups(qt, d, kt, bias, scale, s, ld_s, nq, nk);
}

/* Value rows [0, nk) (floats, or F16 when f16; d wide, d a multiple of
 * 16) as key pairs: columns c .. c + 15 of keys 2t, 2t + 1 at vt + (t * d
 * + c) dwords, key 2t in the low half; a missing key nk (odd nk) 0. */
static void avx512b__value_pairs(const void *v, int f16, size_t d, size_t nk, uint32_t *vt)
{
	/* bf16 lane 2c <- lane c (key 2t), lane 2c + 1 <- lane 16 + c */
	const __m512i ix = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
					    24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17,
					    1, 16, 0);
	const size_t elt = f16 ? 2 : 4;

	for (size_t t = 0; 2 * t < nk; t++)
		for (size_t c = 0; c < d; c += 16) {
			const char *v0 = (const char *)v + (2 * t * d + c) * elt;
			__m512 a, b;

			if (f16) {
				a = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)v0));
				b = 2 * t + 1 < nk ? _mm512_cvtph_ps(_mm256_loadu_si256(
							     (const __m256i *)(v0 + d * elt)))
						   : _mm512_setzero_ps();
			} else {
				a = _mm512_loadu_ps(v0);
				b = 2 * t + 1 < nk ? _mm512_loadu_ps(v0 + d * elt) : _mm512_setzero_ps();
			}
			_mm512_store_si512(vt + t * d + c,
					   _mm512_permutexvar_epi16(ix, (__m512i)_mm512_cvtne2ps_pbh(b, a)));
		}
}

/* nr (a constant) rows' outputs, columns [0, 16 nc) of o (nc a constant):
 * o = o * r + the block's weighted values; pw row i = the row's weights as
 * bf16 key pairs (np of them). */
AVX512B_INLINE void avx512b__accum_tile(float *o, size_t ld_o, const float *r,
					const uint32_t *pw, const uint32_t *vt, size_t d, size_t np,
					const int nr, const int nc)
{
	__m512 acc[AVX512B_ROWS][4];

	AVX512B_UNROLL
	for (int i = 0; i < nr; i++)
		AVX512B_UNROLL
		for (int c = 0; c < nc; c++)
			acc[i][c] = _mm512_mul_ps(_mm512_loadu_ps(o + i * ld_o + 16 * c),
						  _mm512_set1_ps(r[i]));
	for (size_t t = 0; t < np; t++) {
		__m512i vv[4];

		AVX512B_UNROLL
		for (int c = 0; c < nc; c++)
			vv[c] = _mm512_load_si512(vt + t * d + 16 * c);
		AVX512B_UNROLL
		for (int i = 0; i < nr; i++) {
			const __m512bh pv =
				(__m512bh)_mm512_set1_epi32((int)pw[i * (AVX512B_KEYS / 2) + t]);

			AVX512B_UNROLL
			for (int c = 0; c < nc; c++)
				acc[i][c] = _mm512_dpbf16_ps(acc[i][c], pv, (__m512bh)vv[c]);
		}
	}
	AVX512B_UNROLL
	for (int i = 0; i < nr; i++)
		AVX512B_UNROLL
		for (int c = 0; c < nc; c++)
			_mm512_storeu_ps(o + i * ld_o + 16 * c, acc[i][c]);
}

/* nr rows' outputs of one call (nr a constant), all d columns: every
 * 64 columns, then a last 16 .. 48; pw row i = the row's weights as bf16
 * key pairs (np of them, AVX512B_KEYS / 2 apart). */
AVX512B_INLINE void avx512b__accum_cols(float *o, size_t ld_o, const float *r,
					const uint32_t *pw, const uint32_t *vt, size_t d, size_t np,
					const int nr)
{
	size_t c = 0;

	for (; c + 64 <= d; c += 64)
		avx512b__accum_tile(o + c, ld_o, r, pw, vt + c, d, np, nr, 4);
	switch ((d - c) / 16) {
	case 1:
		avx512b__accum_tile(o + c, ld_o, r, pw, vt + c, d, np, nr, 1);
		break;
	case 2:
		avx512b__accum_tile(o + c, ld_o, r, pw, vt + c, d, np, nr, 2);
		break;
	case 3:
		avx512b__accum_tile(o + c, ld_o, r, pw, vt + c, d, np, nr, 3);
		break;
	default:
		break;
	}
}

/* Row i's weights as bf16 key pairs into pw + i * AVX512B_KEYS / 2 (all
 * 32, zeros past nk): from the floats of p (ld_p apart) or, when pt, from
 * the softmax's A-tile rows (softmax16_avx512.h's layout, nks steps a
 * group of 16 rows). */
AVX512B_INLINE void avx512b__weights(const float *p, size_t ld_p, const uint16_t *pt,
				     size_t i0, size_t nks, size_t nk, const int nr, uint32_t *pw)
{
	for (int i = 0; i < nr; i++) {
		uint32_t *dst = pw + i * (AVX512B_KEYS / 2);

		if (pt) {
			const size_t row = i0 + (size_t)i;
			const uint16_t *src =
				pt + row / SM16_T * nks * SM16_TILE + row % SM16_T * SM16_STEP;

			_mm512_store_si512(dst, _mm512_load_si512(src));
			_mm512_store_si512(dst + 16, nks > 1 ? _mm512_load_si512(src + SM16_TILE)
							     : _mm512_setzero_si512());
			continue;
		}
		_mm512_store_si512(dst, avx512__bf16x32(p + i * ld_p, 0, nk));
		_mm512_store_si512(dst + 16, nk > 32 ? avx512__bf16x32(p + i * ld_p + 32, 0, nk - 32)
						     : _mm512_setzero_si512());
	}
}

/* Key pairs [0, n) of the nr rows' weights pw past which all are 0 (n
 * <= np): the diagonal block's early rows, whose masked keys weigh 0.
 * Leaving them out changes no bit: with finite values a product is +-0,
 * and acc + +-0 is acc for an acc that is never -0 (o starts at +0,
 * scales by r > 0, and a sum rounds an exact 0 to +0). */
AVX512B_INLINE size_t avx512b__pairs_used(const uint32_t *pw, size_t np, const int nr)
{
	__m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512();
	uint32_t nz;

	for (int i = 0; i < nr; i++) {
		a = _mm512_or_si512(a, _mm512_load_si512(pw + i * (AVX512B_KEYS / 2)));
		b = _mm512_or_si512(b, _mm512_load_si512(pw + i * (AVX512B_KEYS / 2) + 16));
	}
	nz = (uint32_t)_mm512_test_epi32_mask(a, a) | (uint32_t)_mm512_test_epi32_mask(b, b) << 16;
	return nz ? (32u - (size_t)__builtin_clz(nz) < np ? 32u - (size_t)__builtin_clz(nz) : np)
		  : 0;
}

/* kern_attn_accum_bf16 (p, ld_p) or kern_attn_accum_bf16_tiles (pt). */
static void avx512b__accum(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			   const uint16_t *pt, const void *v, int f16, size_t d, size_t nq,
			   size_t nk)
{
	_Alignas(64) uint32_t vt[AVX512B_KEYS / 2 * KERN_ATTN_BF16_DIM];
	_Alignas(64) uint32_t pw[AVX512B_ROWS * AVX512B_KEYS / 2];
	const size_t np = (nk + 1) / 2, nks = (nk + SM16_STEP - 1) / SM16_STEP;
	size_t i = 0;

	avx512b__value_pairs(v, f16, d, nk, vt);
	for (; i + AVX512B_ROWS <= nq; i += AVX512B_ROWS) {
		avx512b__weights(p ? p + i * ld_p : NULL, ld_p, pt, i, nks, nk, AVX512B_ROWS, pw);
		avx512b__accum_cols(o + i * ld_o, ld_o, r + i, pw, vt, d,
				    avx512b__pairs_used(pw, np, AVX512B_ROWS), AVX512B_ROWS);
	}
	for (; i < nq; i++) {
		avx512b__weights(p ? p + i * ld_p : NULL, ld_p, pt, i, nks, nk, 1, pw);
		avx512b__accum_cols(o + i * ld_o, ld_o, r + i, pw, vt, d, np, 1);
	}
}

void kern_avx512_attn_accum_bf16(float *o, size_t ld_o, const float *r, const float *p,
				 size_t ld_p, const void *v, int f16, size_t d, size_t nq, size_t nk)
{
	avx512b__accum(o, ld_o, r, p, ld_p, NULL, v, f16, d, nq, nk);
}

void kern_avx512_attn_accum_bf16_tiles(float *o, size_t ld_o, const float *r,
				       const uint16_t *pt, const void *v, int f16, size_t d,
				       size_t nq, size_t nk)
{
	avx512b__accum(o, ld_o, r, NULL, 0, pt, v, f16, d, nq, nk);
}

/* kern_attn_scores_softmax_bf16 (kernels.h): the block's key pairs once,
 * then per group of 16 rows their scores into c (16 x 64 floats, L1) and
 * the amx level's softmax step on them (softmax16_avx512.h, with the
 * scale), the weights into pt's A-tile rows. */
void kern_avx512_attn_scores_softmax_bf16(const uint16_t *qt, const void *k, int f16, size_t d,
					  float scale, const uint32_t *lo, const uint32_t *hi,
					  size_t nq, size_t nk, float *m, float *l, float *r,
					  uint16_t *pt)
{
	_Alignas(64) uint32_t kt[KERN_ATTN_BF16_DIM / 2 * AVX512B_KEYS];
	_Alignas(64) float c[SM16_T * SM16_KEYS];
	const size_t nks = (nk + SM16_STEP - 1) / SM16_STEP;

	avx512b__key_pairs(k, f16, d, nk, kt);
	for (size_t i0 = 0; i0 < nq; i0 += SM16_T) {
		const size_t nr = nq - i0 < SM16_T ? nq - i0 : SM16_T;
		/* by 4 rows, only the key groups they see (the diagonal block's
		 * early rows: the softmax reads no score past hi) */
		for (size_t i = 0; i < nr; i += AVX512B_ROWS) {
			const size_t n4 = nr - i < AVX512B_ROWS ? nr - i : AVX512B_ROWS;
			size_t seen = 0; /* keys [0, seen) */

			for (size_t e = i0 + i; e < i0 + i + n4; e++)
				seen = hi[e] > lo[e] && hi[e] > seen ? hi[e] : seen;
			if (seen)
				avx512b__scores_groups(qt + (i0 + i) * d, d, kt, NULL, 1.0f,
						       c + i * SM16_KEYS, SM16_KEYS, n4, seen);
		}
		avx512__softmax16(c, SM16_KEYS, scale, lo + i0, hi + i0, nr, nks, m + i0, l + i0,
				  r + i0, pt + i0 / SM16_T * nks * SM16_TILE);
	}
}
#endif
