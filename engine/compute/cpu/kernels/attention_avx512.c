/*
 * attention_avx512.c - kern_attn_scores for the avx512 level: the AVX2
 * arithmetic (attention_avx2.c) on tiles of 4 queries x 4 keys, which the
 * 32 YMM registers of AVX-512VL hold (16 accumulators, 8 row vectors):
 * 8 loads per 16 FMAs where the AVX2 level's 2 x 4 tile, limited to 16
 * registers, took 10 (each key loaded once per query as a memory operand)
 * per 8, and its loop over d was as long as the FMAs it fed. In prefill
 * the scores took ~1.8x the time of the value products (the same FMA
 * count), ~6% of a TinyLlama pp512 on the Zen 4. Heads up to 512 wide
 * now go by 8 queries x 8 keys on ZMM (two (query, key) pairs a register,
 * the keys read in place: a decode group's 8 heads), 4 x 8 for a last 4
 * rows (8 keys packed once per call for all its rows): twice the products
 * per instruction where 512-bit FMAs run at full rate (Emerald Rapids: a
 * prompt's scores ~35% faster, LEVELS.md); the YMM tiles stay for wider
 * heads. Also kern_attn_accum and its F16 form on ZMM, and the softmax
 * rows.
 *
 * Every score sees the AVX2 level's operations in the same order: one FMA
 * chain per lane over the d / 8 vectors, the same transposing sum of 8
 * lanes, then + bias and * scale; so results equal the AVX2 level's bit
 * for bit, whatever the tile (a query's scores do not depend on the
 * queries computed with it), in either tile. Rows past the last 4, and
 * head widths that are not a multiple of 8, go to the AVX2 function
 * itself.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"
#include "math_avx2.h"
#include "math_avx512.h"

#define AVX512A_INLINE static inline __attribute__((always_inline))
#define AVX512A_UNROLL _Pragma("GCC unroll 16")

/* Columns c .. c + 7 of row k: floats, or F16 converted exactly (f16 a
 * constant after inlining). */
AVX512A_INLINE __m256 avx512a__ld8(const void *k, size_t c, const int f16)
{
	return f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)k + c)))
		   : _mm256_loadu_ps((const float *)k + c);
}

/* Lane j = the sum of the 8 lanes of aj: attention_avx2.c's tree (the
 * vectors by value: an array passed by address kept GCC from holding the
 * 16 accumulators in registers). */
AVX512A_INLINE __m256 avx512a__hsum8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4,
				     __m256 a5, __m256 a6, __m256 a7)
{
	__m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
	__m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));

	return _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20),
			     _mm256_permute2f128_ps(h0, h1, 0x31));
}

/* Stores lanes 4h .. 4h + n - 1 of v (query row h of a pair) to dst. */
AVX512A_INLINE void avx512a__store(float *dst, __m256 v, int h, size_t n)
{
	__m128 x = h ? _mm256_extractf128_ps(v, 1) : _mm256_castps256_ps128(v);

	if (n == 4) {
		_mm_storeu_ps(dst, x);
	} else {
		float out[4];

		_mm_storeu_ps(out, x);
		memcpy(dst, out, n * sizeof(float));
	}
}

/* Queries q0..q3 (rows of q, ld_q apart) against keys k[0..3] (floats,
 * or F16 converted exactly when f16, a constant after inlining): the
 * scores of pairs (query 2p + j / 4, key j % 4) in lane j of r[p]. */
AVX512A_INLINE void avx512a__tile(const float *q, size_t ld_q, const void *const k[4], size_t d,
				  __m256 bv, __m256 sv, __m256 r[2], const int f16)
{
	__m256 acc[16];

	AVX512A_UNROLL
	for (int j = 0; j < 16; j++)
		acc[j] = _mm256_setzero_ps();
	for (size_t c = 0; c < d; c += 8) {
		__m256 qv[4], kv[4];

		AVX512A_UNROLL
		for (int i = 0; i < 4; i++) {
			qv[i] = _mm256_loadu_ps(q + i * ld_q + c);
			kv[i] = avx512a__ld8(k[i], c, f16);
		}
		AVX512A_UNROLL
		for (int i = 0; i < 4; i++)
			AVX512A_UNROLL
			for (int j = 0; j < 4; j++)
				acc[4 * i + j] = _mm256_fmadd_ps(qv[i], kv[j], acc[4 * i + j]);
	}
	r[0] = _mm256_mul_ps(_mm256_add_ps(avx512a__hsum8(acc[0], acc[1], acc[2], acc[3], acc[4],
							  acc[5], acc[6], acc[7]),
					   bv),
			     sv);
	r[1] = _mm256_mul_ps(_mm256_add_ps(avx512a__hsum8(acc[8], acc[9], acc[10], acc[11],
							  acc[12], acc[13], acc[14], acc[15]),
					   bv),
			     sv);
}

/* The tile's two instances, out of line (one call per 4 x 4 scores). */
static __attribute__((noinline)) void avx512a__tile_f32(const float *q, size_t ld_q,
							const void *const k[4], size_t d,
							__m256 bv, __m256 sv, __m256 r[2])
{
	avx512a__tile(q, ld_q, k, d, bv, sv, r, 0);
}

static __attribute__((noinline)) void avx512a__tile_f16(const float *q, size_t ld_q,
							const void *const k[4], size_t d,
							__m256 bv, __m256 sv, __m256 r[2])
{
	avx512a__tile(q, ld_q, k, d, bv, sv, r, 1);
}

/* ---- 4 queries x 8 keys on ZMM ------------------------------------------------- */

/* Widest head the ZMM tiles take: a group of 8 keys is packed into a
 * stack buffer of 8 x d floats (16 KB); wider heads use the YMM tiles. */
#define AVX512A_PACK_DIM 512

/* hadd_ps within each 128-bit block (AVX-512 has no VHADDPS): the odd
 * elements plus the even ones, VHADDPS's operands in its order. */
AVX512A_INLINE __m512 avx512a__hadd(__m512 x, __m512 y)
{
	return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0xdd), _mm512_shuffle_ps(x, y, 0x88));
}

/* avx512a__hsum8 in each 256-bit half: half h of the result holds, in
 * lane j, the sum of half h of aj, by the same tree; then the halves'
 * 128-bit blocks are reordered so that the low half is the first query
 * (a0..a3: its 4 keys of the low halves, then of the high halves) and the
 * high half the second (a4..a7). The last addition is lane-wise, so
 * permuting both operands alike permutes its sums and no more. */
AVX512A_INLINE __m512 avx512a__hsum8x2(__m512 a0, __m512 a1, __m512 a2, __m512 a3, __m512 a4,
				       __m512 a5, __m512 a6, __m512 a7)
{
	const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25,
					     26, 27);
	const __m512i hi = _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29,
					     30, 31);
	__m512 h0 = avx512a__hadd(avx512a__hadd(a0, a1), avx512a__hadd(a2, a3));
	__m512 h1 = avx512a__hadd(avx512a__hadd(a4, a5), avx512a__hadd(a6, a7));

	return _mm512_add_ps(_mm512_permutex2var_ps(h0, lo, h1),
			     _mm512_permutex2var_ps(h0, hi, h1));
}

/* Keys k[0..7] (floats, or F16 converted exactly) packed for the tile:
 * for each 8 columns c, 4 vectors, vector j = columns c..c+7 of key j in
 * its low half and of key j + 4 in its high half. */
AVX512A_INLINE void avx512a__pack8(const void *const k[8], size_t d, float *kp, const int f16)
{
	for (size_t c = 0; c < d; c += 8) {
		__m256 v[8];

		AVX512A_UNROLL
		for (size_t j = 0; j < 8; j++)
			v[j] = avx512a__ld8(k[j], c, f16);
		/* whole vectors: a ZMM load of two YMM stores would not be
		 * forwarded from them */
		AVX512A_UNROLL
		for (size_t j = 0; j < 4; j++)
			_mm512_store_ps(kp + c * 8 + j * 16,
					_mm512_insertf32x8(_mm512_castps256_ps512(v[j]), v[j + 4], 1));
	}
}

/* Stores the 8 scores of two queries (low half: row s0, high: s1), the
 * first n of each. */
AVX512A_INLINE void avx512a__store8x2(float *s0, float *s1, __m512 v, size_t n)
{
	if (n == 8) {
		_mm256_storeu_ps(s0, _mm512_castps512_ps256(v));
		_mm256_storeu_ps(s1, _mm512_extractf32x8_ps(v, 1));
	} else {
		const __mmask8 k = (__mmask8)((1u << n) - 1);

		_mm256_mask_storeu_ps(s0, k, _mm512_castps512_ps256(v));
		_mm256_mask_storeu_ps(s1, k, _mm512_extractf32x8_ps(v, 1));
	}
}

/* Queries q0..q3 (rows of q, ld_q apart) against 8 packed keys: the AVX2
 * chains (lane l of a pair's accumulator: columns c + l, c += 8, one FMA
 * each in column order), two pairs a ZMM: 16 accumulators, 4 query and
 * 4 key loads per 16 FMAs, where the YMM tile did 8 loads per 16 FMAs of
 * half the width and reduced twice as often. Then the AVX2 sum tree,
 * + bias, * scale, and the first n of each row's 8 scores stored. */
static __attribute__((noinline)) void avx512a__tile8(const float *q, size_t ld_q,
						      const float *kp, size_t d, __m512 bv,
						      __m512 sv, float *s, size_t ld_s, size_t n)
{
	__m512 acc[16];

	AVX512A_UNROLL
	for (int j = 0; j < 16; j++)
		acc[j] = _mm512_setzero_ps();
	for (size_t c = 0; c < d; c += 8) {
		__m512 qv[4], kv[4];

		AVX512A_UNROLL
		for (int i = 0; i < 4; i++) {
			qv[i] = _mm512_broadcast_f32x8(_mm256_loadu_ps(q + i * ld_q + c));
			kv[i] = _mm512_loadu_ps(kp + c * 8 + i * 16);
		}
		AVX512A_UNROLL
		for (int i = 0; i < 4; i++)
			AVX512A_UNROLL
			for (int j = 0; j < 4; j++)
				acc[4 * i + j] = _mm512_fmadd_ps(qv[i], kv[j], acc[4 * i + j]);
	}
	AVX512A_UNROLL
	for (int p = 0; p < 2; p++) {
		const __m512 v = _mm512_mul_ps(
			_mm512_add_ps(avx512a__hsum8x2(acc[8 * p], acc[8 * p + 1], acc[8 * p + 2],
						       acc[8 * p + 3], acc[8 * p + 4],
						       acc[8 * p + 5], acc[8 * p + 6],
						       acc[8 * p + 7]),
				      bv),
			sv);

		avx512a__store8x2(s + 2 * p * ld_s, s + (2 * p + 1) * ld_s, v, n);
	}
}

/* Row form of avx512a__hsum8x2 for tiles of (query, key pair) vectors:
 * a_{2i + j} holds query i's chains against keys j (low half) and j + 2
 * (high half), i = 0..3; the same tree, then the last addition's lanes
 * chosen so that lane 4i + t is query i, key t. */
AVX512A_INLINE __m512 avx512a__hsum8x2_rows(const __m512 a[8])
{
	const __m512i lo = _mm512_setr_epi32(0, 1, 8, 9, 2, 3, 10, 11, 16, 17, 24, 25, 18, 19, 26,
					     27);
	const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(4));
	__m512 h0 = avx512a__hadd(avx512a__hadd(a[0], a[1]), avx512a__hadd(a[2], a[3]));
	__m512 h1 = avx512a__hadd(avx512a__hadd(a[4], a[5]), avx512a__hadd(a[6], a[7]));

	return _mm512_add_ps(_mm512_permutex2var_ps(h0, lo, h1),
			     _mm512_permutex2var_ps(h0, hi, h1));
}

/* 8 query rows (ld_q apart, each 8 columns broadcast to both halves)
 * against keys kr[0..3] converted in registers (keys t and t + 2 in one
 * vector): 16 accumulators, 8 query broadcasts and 4 conversions per 16
 * FMAs; r[h] = queries 4h .. 4h + 3 x keys 0..3, row by row. The rows
 * duplicated into a buffer once a call (plain loads in the loop) were
 * faster alone (824 against 880 ns a 64-key block) but slower in the
 * attention (LEVELS.md, attn23). */
AVX512A_INLINE void avx512a__pass8x4(const float *q, size_t ld_q, const void *const kr[4],
				     size_t d, __m512 r[2], const int f16)
{
	__m512 acc[16];

	AVX512A_UNROLL
	for (int j = 0; j < 16; j++)
		acc[j] = _mm512_setzero_ps();
	for (size_t c = 0; c < d; c += 8) {
		const __m512 k0 = _mm512_insertf32x8(
			_mm512_castps256_ps512(avx512a__ld8(kr[0], c, f16)),
			avx512a__ld8(kr[2], c, f16), 1);
		const __m512 k1 = _mm512_insertf32x8(
			_mm512_castps256_ps512(avx512a__ld8(kr[1], c, f16)),
			avx512a__ld8(kr[3], c, f16), 1);

		AVX512A_UNROLL
		for (int i = 0; i < 8; i++) {
			const __m512 qv = _mm512_broadcast_f32x8(_mm256_loadu_ps(q + i * ld_q + c));

			acc[2 * i] = _mm512_fmadd_ps(qv, k0, acc[2 * i]);
			acc[2 * i + 1] = _mm512_fmadd_ps(qv, k1, acc[2 * i + 1]);
		}
	}
	r[0] = avx512a__hsum8x2_rows(acc);
	r[1] = avx512a__hsum8x2_rows(acc + 8);
}

/* 8 queries x 8 keys (kr[0..7], rows of the cache read in place): two
 * passes of 4 keys, whose rows are put together (2 VPERMT2PS per 16
 * scores), + bias, * scale, the first n of each row's 8 stored. No
 * packed copy of the keys: the 4 x 8 tile's pack (64 conversions, 32
 * inserts and 32 ZMM stores per 8 keys) was bound by its stores. */
static __attribute__((noinline)) void avx512a__tile88(const float *q, size_t ld_q,
						       const void *const kr[8], size_t d, __m512 bv,
						       __m512 sv, float *s, size_t ld_s, size_t n,
						       int f16)
{
	const __m512i w0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22,
					     23);
	const __m512i w1 = _mm512_add_epi32(w0, _mm512_set1_epi32(8));
	__m512 ra[2], rb[2];

	if (f16) {
		avx512a__pass8x4(q, ld_q, kr, d, ra, 1);
		avx512a__pass8x4(q, ld_q, kr + 4, d, rb, 1);
	} else {
		avx512a__pass8x4(q, ld_q, kr, d, ra, 0);
		avx512a__pass8x4(q, ld_q, kr + 4, d, rb, 0);
	}
	AVX512A_UNROLL
	for (int h = 0; h < 2; h++) {
		float *sh = s + 4 * h * ld_s;
		const __m512 v0 = _mm512_permutex2var_ps(ra[h], w0, rb[h]);
		const __m512 v1 = _mm512_permutex2var_ps(ra[h], w1, rb[h]);

		avx512a__store8x2(sh, sh + ld_s, _mm512_mul_ps(_mm512_add_ps(v0, bv), sv), n);
		avx512a__store8x2(sh + 2 * ld_s, sh + 3 * ld_s,
				  _mm512_mul_ps(_mm512_add_ps(v1, bv), sv), n);
	}
}

/* kern_attn_scores() on the ZMM tiles, rows [0, nq4) (a multiple of 4),
 * d a multiple of 8 up to AVX512A_PACK_DIM, 8 keys at a time: 8 rows at
 * a time by the 8 x 8 tile (a decode group's 8 heads), a last 4 by the
 * 4 x 8 tile on the group's keys packed; a short key group repeats its
 * last key and stores only n scores a row. */
static void avx512a__scores8(const float *q, size_t ld_q, const void *k, size_t d,
			     const float *bias, float scale, float *s, size_t ld_s, size_t nq4,
			     size_t nk, int f16)
{
	const size_t elt = f16 ? sizeof(uint16_t) : sizeof(float);
	const __m512 sv = _mm512_set1_ps(scale);
	_Alignas(64) float kp[8 * AVX512A_PACK_DIM];

	for (size_t j0 = 0; j0 < nk; j0 += 8) {
		const size_t n = nk - j0 < 8 ? nk - j0 : 8;
		const void *kr[8];
		/* the bias of the n keys in both halves (lanes past n are
		 * not stored); built in registers: 16 scalar stores read back
		 * as one vector missed store forwarding, ~20 cycles a group */
		const __m512 bv = bias ? _mm512_broadcast_f32x8(_mm256_maskz_loadu_ps(
						 (__mmask8)((1u << n) - 1), bias + j0))
				       : _mm512_setzero_ps();
		size_t i = 0;

		for (size_t j = 0; j < 8; j++)
			kr[j] = (const char *)k + (j0 + (j < n ? j : n - 1)) * d * elt;

		for (; i + 8 <= nq4; i += 8)
			avx512a__tile88(q + i * ld_q, ld_q, kr, d, bv, sv, s + i * ld_s + j0, ld_s,
					n, f16);
		if (i == nq4)
			continue;
		if (f16)
			avx512a__pack8(kr, d, kp, 1);
		else
			avx512a__pack8(kr, d, kp, 0);
		for (; i < nq4; i += 4)
			avx512a__tile8(q + i * ld_q, ld_q, kp, d, bv, sv, s + i * ld_s + j0, ld_s, n);
	}
}

/* kern_attn_scores() of keys k in floats, or F16 when f16 (rows of d
 * elements either way). */
static void avx512a__scores(const float *q, size_t ld_q, const void *k, size_t d,
			    const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			    size_t nk, int f16)
{
	const size_t elt = f16 ? sizeof(uint16_t) : sizeof(float);
	const __m256 sv = _mm256_set1_ps(scale);
	const size_t nq4 = d % 8 == 0 ? nq / 4 * 4 : 0;

	if (nq4 && d <= AVX512A_PACK_DIM) {
		avx512a__scores8(q, ld_q, k, d, bias, scale, s, ld_s, nq4, nk, f16);
		goto rest;
	}

	/* 4 keys at a time; a short key group repeats its last key and
	 * stores only n lanes (as the AVX2 level does) */
	for (size_t j0 = 0; j0 < nk && nq4; j0 += 4) {
		const size_t n = nk - j0 < 4 ? nk - j0 : 4;
		const void *kr[4];
		float bb[8];

		for (size_t j = 0; j < 4; j++)
			kr[j] = (const char *)k + (j0 + (j < n ? j : n - 1)) * d * elt;
		for (size_t j = 0; j < 8; j++)
			bb[j] = bias ? bias[j0 + (j % 4 < n ? j % 4 : n - 1)] : 0.0f;
		const __m256 bv = _mm256_loadu_ps(bb);
		for (size_t i = 0; i < nq4; i += 4) {
			__m256 r[2];

			if (f16)
				avx512a__tile_f16(q + i * ld_q, ld_q, kr, d, bv, sv, r);
			else
				avx512a__tile_f32(q + i * ld_q, ld_q, kr, d, bv, sv, r);
			for (int p = 0; p < 2; p++) {
				avx512a__store(s + (i + 2 * p) * ld_s + j0, r[p], 0, n);
				avx512a__store(s + (i + 2 * p + 1) * ld_s + j0, r[p], 1, n);
			}
		}
	}
rest:
	if (nq4 < nq && f16)
		kern_avx2_attn_scores_f16(q + nq4 * ld_q, ld_q, k, d, bias, scale, s + nq4 * ld_s,
					  ld_s, nq - nq4, nk);
	else if (nq4 < nq)
		kern_avx2_attn_scores(q + nq4 * ld_q, ld_q, k, d, bias, scale, s + nq4 * ld_s, ld_s,
				      nq - nq4, nk);
}

void kern_avx512_attn_scores(const float *q, size_t ld_q, const float *k, size_t d,
			     const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			     size_t nk)
{
	avx512a__scores(q, ld_q, k, d, bias, scale, s, ld_s, nq, nk, 0);
}

void kern_avx512_attn_scores_f16(const float *q, size_t ld_q, const uint16_t *k, size_t d,
				 const float *bias, float scale, float *s, size_t ld_s, size_t nq,
				 size_t nk)
{
	avx512a__scores(q, ld_q, k, d, bias, scale, s, ld_s, nq, nk, 1);
}
/* Value sums on 16 lanes, from F16 rows (f16, a constant after inlining)
 * or float rows: rows o_0..o_{nq-1} (nq = 4 or 1, a constant after
 * inlining), columns [c, c + 16 nv): loaded and rescaled once, then one
 * FMA per key and vector in key order, the AVX2 level's operations on
 * every element (each output element is its own chain: o * r, then
 * + p_j v_j for j = 0, 1, ...), so the same bits. A ZMM instruction does
 * the work of two YMM ones on Zen 4 and 4 queries x 64 columns share each
 * value row's conversion, where the AVX2 tiles (4 x 16 columns) converted
 * each row 4 times: in a decode group the value sums took more time than
 * the scores. Float rows: 16 accumulators, 4 value and 4 weight loads per
 * 16 FMAs, where the AVX2 tile's 8 YMM accumulators took 2 + 4 per 8; on
 * the Emerald Rapids (two 512-bit FMA ports) a prompt's value sums took
 * half the time of the AVX2 code (LEVELS.md "Prefill attention on AMX
 * hardware"). */
AVX512A_INLINE void avx512a__accum_tile(float *o, size_t ld_o, const float *r, const float *p,
					size_t ld_p, const void *v, size_t d, size_t c,
					size_t nk, const size_t nq, const size_t nv,
					const int f16)
{
	__m512 acc[4][4];

	AVX512A_UNROLL
	for (size_t i = 0; i < nq; i++)
		AVX512A_UNROLL
		for (size_t u = 0; u < nv; u++)
			acc[i][u] = _mm512_mul_ps(_mm512_loadu_ps(o + i * ld_o + c + 16 * u),
						  _mm512_set1_ps(r[i]));
	for (size_t j = 0; j < nk; j++) {
		__m512 vv[4];

		AVX512A_UNROLL
		for (size_t u = 0; u < nv; u++)
			vv[u] = f16 ? _mm512_cvtph_ps(_mm256_loadu_si256(
					      (const __m256i *)((const uint16_t *)v + j * d + c + 16 * u)))
				    : _mm512_loadu_ps((const float *)v + j * d + c + 16 * u);
		AVX512A_UNROLL
		for (size_t i = 0; i < nq; i++) {
			const __m512 pb = _mm512_set1_ps(p[i * ld_p + j]);

			AVX512A_UNROLL
			for (size_t u = 0; u < nv; u++)
				acc[i][u] = _mm512_fmadd_ps(pb, vv[u], acc[i][u]);
		}
	}
	AVX512A_UNROLL
	for (size_t i = 0; i < nq; i++)
		AVX512A_UNROLL
		for (size_t u = 0; u < nv; u++)
			_mm512_storeu_ps(o + i * ld_o + c + 16 * u, acc[i][u]);
}

/* Rows of nq = 4 or 1 queries, every column (d a multiple of 16). */
AVX512A_INLINE void avx512a__accum_cols(float *o, size_t ld_o, const float *r, const float *p,
					size_t ld_p, const void *v, size_t d, size_t nk,
					const size_t nq, const int f16)
{
	size_t c = 0;

	for (; c + 64 <= d; c += 64)
		avx512a__accum_tile(o, ld_o, r, p, ld_p, v, d, c, nk, nq, 4, f16);
	for (; c < d; c += 16)
		avx512a__accum_tile(o, ld_o, r, p, ld_p, v, d, c, nk, nq, 1, f16);
}

/* kern_attn_accum() of values v in floats, or F16 when f16: groups of 4
 * rows, the rest one by one; head widths not a multiple of 16 go to the
 * AVX2 function. */
static void avx512a__accum(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			   const void *v, size_t d, size_t nq, size_t nk, int f16)
{
	size_t i = 0;

	if (d % 16 != 0) {
		if (f16)
			kern_avx2_attn_accum_f16(o, ld_o, r, p, ld_p, v, d, nq, nk);
		else
			kern_avx2_attn_accum(o, ld_o, r, p, ld_p, v, d, nq, nk);
		return;
	}
	for (; i + 4 <= nq; i += 4) {
		if (f16)
			avx512a__accum_cols(o + i * ld_o, ld_o, r + i, p + i * ld_p, ld_p, v, d, nk,
					    4, 1);
		else
			avx512a__accum_cols(o + i * ld_o, ld_o, r + i, p + i * ld_p, ld_p, v, d, nk,
					    4, 0);
	}
	for (; i < nq; i++) {
		if (f16)
			avx512a__accum_cols(o + i * ld_o, ld_o, r + i, p + i * ld_p, ld_p, v, d, nk,
					    1, 1);
		else
			avx512a__accum_cols(o + i * ld_o, ld_o, r + i, p + i * ld_p, ld_p, v, d, nk,
					    1, 0);
	}
}

void kern_avx512_attn_accum(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			    const float *v, size_t d, size_t nq, size_t nk)
{
	avx512a__accum(o, ld_o, r, p, ld_p, v, d, nq, nk, 0);
}

void kern_avx512_attn_accum_f16(float *o, size_t ld_o, const float *r, const float *p,
				size_t ld_p, const uint16_t *v, size_t d, size_t nq, size_t nk)
{
	avx512a__accum(o, ld_o, r, p, ld_p, v, d, nq, nk, 1);
}

/* kern_avx2_exp_sum on 16 lanes where a row has them: every element the
 * same exp (avx512__exp = avx2__exp lane for lane), and the sum of each
 * 16 taken as its two 8-lane halves in order, the AVX2 loop's additions.
 * So the same bits, with half the instructions and no scalar tail. */
float kern_avx512_exp_sum(float *x, size_t n, float m)
{
	const __m512 mv16 = _mm512_set1_ps(m);
	__m256 sum = _mm256_setzero_ps();
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m512 e = avx512__exp(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv16));

		_mm512_storeu_ps(x + i, e);
		sum = _mm256_add_ps(sum, _mm512_castps512_ps256(e));
		sum = _mm256_add_ps(sum, _mm512_extractf32x8_ps(e, 1));
	}
	if (i < n) {
		/* The rest (1 to 15) masked in one ZMM, -inf in the lanes past
		 * n (exp gives 0): its low half is the AVX2 loop's next 8 (or
		 * its padded tail), the high half its padded tail when more
		 * than 8 remain, added in that order. */
		const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
		__m512 e = avx512__exp(_mm512_sub_ps(
			_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, x + i), mv16));

		_mm512_mask_storeu_ps(x + i, k, e);
		sum = _mm256_add_ps(sum, _mm512_castps512_ps256(e));
		if (n - i > 8)
			sum = _mm256_add_ps(sum, _mm512_extractf32x8_ps(e, 1));
	}
	return avx2__hsum(sum);
}

/* kern_exp_sum_prompt (kernels.h): avx512__exp_prompt, the sum in one
 * ZMM (a prompt tile's weights are rounded to bf16 before P V; the sum
 * l takes the same unrounded values as P, so the rows' normalisation
 * stays consistent). ~10 instructions a vector where the exact form
 * took ~16 (exp 14, the sum's halves and extract 3). */
float kern_avx512_exp_sum_prompt(float *x, size_t n, float m)
{
	return avx512__exp_sum_prompt(x, n, m);
}

/* The largest of x[0..n) (-INFINITY when none; NaNs skipped: VMAXPS
 * returns its second operand, the running maximum, for a NaN), on 16
 * lanes. The same value as kern_avx2_max's, but for the sign of a zero
 * maximum, which a softmax cannot see (exp(s - 0) either way). */
float kern_avx512_max(const float *x, size_t n)
{
	return avx512__max(x, n);
}
#endif
