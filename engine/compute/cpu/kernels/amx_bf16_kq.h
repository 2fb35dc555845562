/*
 * amx_bf16_kq.h - the B tiles of the AMX bf16 prefill (kernels_amx_bf16.c)
 * for Q4_K, Q5_K and Q6_K rows: a 16-row super-block's eight 32-element
 * K steps dequantized to bf16 with the scales folded in, in the tiles'
 * VNNI pair layout (tile row k holds elements 2k, 2k + 1 of the 16 rows).
 *
 * Why here: the values come from the K-quant VNNI tiles' own unpacking
 * (kquants_vnni_avx512.h: 16 bytes of 16 rows transposed into row lanes,
 * lane r of vector c = elements 4c..4c+3 of row r), which reads the file
 * layout and the rows the level packs at load (kern_pack_groups16, Q6_K's
 * kern_avx512_pack_q6_k, whose rows are in dword lanes already: loads,
 * no transpose) alike, so the tiles need no layout of their own.
 * A lane's four bytes are the Q8_0 packed tile's (amxbf__b_piece): each
 * byte to a float, times its sub-block's scale, and one permutation
 * makes two tile rows. A 32-element sub-block (Q4_K/Q5_K) is one K step;
 * Q6_K's 16-element sub-blocks are its two halves (c < 4, c >= 4).
 *
 * Values: exactly the reference dequantization's fp32 (quants_ref.c
 * ref__deq_q4_k / _q5_k / _q6_k, the same operations in the same order:
 * (d * sc) * q - dmin * m; (d * sc) * (q - 32); Q4_K's one FMA gives the
 * same bits, amxkq__tile4), rounded to bf16 to nearest even:
 * tests/test_amx_bf16_kq.c checks them against kern_dequantize_row()
 * rounded, bit for bit.
 *
 * Private to kernels_amx_bf16.c (AMX flags, which include AVX-512 VNNI).
 */
#ifndef EMBER_AMX_BF16_KQ_H
#define EMBER_AMX_BF16_KQ_H

#include "kquants_vnni_avx512.h"

#define AMXKQ_TILE 512 /* bf16 elements per B tile (16 x 32) */

/* The 16 rows whose first is at w (st bytes apart in the file layout;
 * packed: w is their first group, kv__rows_of()'s form: Q5_K four
 * groups of 4, Q4_K one group of KERN_K4L_ROWS = 16, Q6_K one of
 * KERN_Q6L_ROWS = 16, since the tiles
 * start at multiples of 16 rows, kernels_amx_bf16.c). */
QV_INLINE struct kv_rows amxkq__rows(const char *w, size_t st, int packed, size_t bs)
{
	if (!packed)
		return (struct kv_rows){w, st, 4 * st, bs, 1, 0};
	if (bs == sizeof(struct kern_block_q6_k))
		return kv_rows_q6l(w);
	if (bs == sizeof(struct kern_block_q4_k))
		return kv_rows_k4l(w);
	return (struct kv_rows){w, 16, 4 * st, 4 * bs, 4, 0};
}

/* One 32-element K step of 16 rows as a B tile at bt: w[c] lane r holds
 * the unsigned values of elements 4c..4c+3 of row r; Q4_K/Q5_K (q6 = 0):
 * d1a * q - m1; Q6_K: d1a * (q - 32) for c < 4, d1b * (q - 32) after. */
QV_INLINE void amxkq__tile(const __m512i w[8], __m512 d1a, __m512 d1b, __m512 m1, int q6,
			   uint16_t *bt)
{
	/* word 2n <- word n (the even element), word 2n + 1 <- word 16 + n */
	const __m512i pair = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
					      24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17,
					      1, 16, 0);
	const __m512i k32 = _mm512_set1_epi32(32);

	QV_UNROLL
	for (int c = 0; c < 8; c++) {
		const __m512 d1 = c < 4 ? d1a : d1b;
		__m512 f[4];

		QV_UNROLL
		for (int k = 0; k < 4; k++) {
			const __m512i q = kv__byte_u(w[c], k);

			if (q6)
				f[k] = _mm512_mul_ps(d1, _mm512_cvtepi32_ps(_mm512_sub_epi32(q, k32)));
			else
				f[k] = _mm512_sub_ps(_mm512_mul_ps(d1, _mm512_cvtepi32_ps(q)), m1);
		}
		_mm512_store_si512(bt + 2 * c * 32, _mm512_permutexvar_epi16(
							    pair, (__m512i)_mm512_cvtne2ps_pbh(f[1], f[0])));
		_mm512_store_si512(bt + (2 * c + 1) * 32,
				   _mm512_permutexvar_epi16(
					   pair, (__m512i)_mm512_cvtne2ps_pbh(f[3], f[2])));
	}
}

/* The word permutation that makes two tile rows of a cvtne2ps pair
 * (f[0], f[1] lanes = rows) for Q4_K: word 2r <- word r, word 2r + 1 <-
 * word 16 + r. */
QV_INLINE __m512i amxkq__pair4(void)
{
	static const uint16_t perm[32] __attribute__((aligned(64))) = {
		0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
		8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

	return _mm512_load_si512(perm);
}

/* One Q4_K 32-block of the 16 rows as a B tile at bt: r[c] lane r holds
 * bytes 4c..4c+3 of the block pair's 32 bytes of
 * row r, the block the low (hi = 0) or high nibbles. Each nibble is a
 * float by VPERMPS from 0..15 (it reads index bits 3..0: a shift, no mask,
 * no conversion), then d1 * q - m1 in one FMA: the same bits as the
 * reference's product then difference, because d1 * q is exact in fp32
 * (d1 = d * sc: 11 + 6 significant bits, q 4 bits), so the FMA's one
 * rounding is the difference's. */
QV_INLINE void amxkq__tile4(const __m512i r[8], int hi, __m512 d1, __m512 m1, __m512i perm,
			    uint16_t *bt)
{
	const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);

	QV_UNROLL
	for (int c = 0; c < 8; c++) {
		const __m512i x = hi ? _mm512_srli_epi32(r[c], 4) : r[c];
		const __m512 f0 = _mm512_fmsub_ps(_mm512_permutexvar_ps(x, iota), d1, m1);
		const __m512 f1 = _mm512_fmsub_ps(
			_mm512_permutexvar_ps(_mm512_srli_epi32(x, 8), iota), d1, m1);
		const __m512 f2 = _mm512_fmsub_ps(
			_mm512_permutexvar_ps(_mm512_srli_epi32(x, 16), iota), d1, m1);
		const __m512 f3 = _mm512_fmsub_ps(
			_mm512_permutexvar_ps(_mm512_srli_epi32(x, 24), iota), d1, m1);

		_mm512_store_si512(bt + 2 * c * 32,
				   _mm512_permutexvar_epi16(perm, (__m512i)_mm512_cvtne2ps_pbh(f1, f0)));
		_mm512_store_si512(bt + (2 * c + 1) * 32,
				   _mm512_permutexvar_epi16(perm, (__m512i)_mm512_cvtne2ps_pbh(f3, f2)));
	}
}

/* Super-block s of the 16 rows rp as B tiles at bt (tile j: its 32-block
 * j, AMXKQ_TILE elements apart), 32-blocks 2p and 2p + 1 for p in [p0,
 * p1); Q5_K when `five`. */
QV_INLINE void amxkq__sb_k4(struct kv_rows rp, size_t s, int five, int p0, int p1, uint16_t *bt)
{
	const size_t sb = s * rp.step;
	const __m512i lo16 = _mm512_set1_epi32(0xffff);
	__m512i v[14], qh[8] = {0}, u[8], w[8];

	/* packed Q4_K (KERN_K4L_*): kv__rows16() loads the row lanes whole */
	kv__k4_head(rp, sb, v, 0);
	if (five) {
		kv__rows16(rp, sb + 16 * rp.km, qh);
		kv__rows16(rp, sb + 32 * rp.km, qh + 4);
	}
	const __m512 d = _mm512_castsi512_ps(v[12]), dmin = _mm512_castsi512_ps(v[13]);

	for (int p = p0; p < p1; p++) {
		/* v[8 + p]: m_2p | m_2p+1 << 16 */
		const __m512 m0 = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_and_si512(v[8 + p], lo16)));
		const __m512 m1 = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_srli_epi32(v[8 + p], 16)));
		const __m512 d0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(v[2 * p]));
		const __m512 d1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(v[2 * p + 1]));

		if (!five) { /* the pair's 32 bytes a row, both nibbles */
			kv__rows16(rp, sb + (16 + 32 * p) * rp.km, u);
			kv__rows16(rp, sb + (32 + 32 * p) * rp.km, u + 4);
			amxkq__tile4(u, 0, d0, m0, amxkq__pair4(), bt + 2 * p * AMXKQ_TILE);
			amxkq__tile4(u, 1, d1, m1, amxkq__pair4(), bt + (2 * p + 1) * AMXKQ_TILE);
			continue;
		}
		kv__k4_pair(rp, sb + 48 * rp.km, p, qh, five, u, w);
		amxkq__tile(u, d0, d0, m0, 0, bt + 2 * p * AMXKQ_TILE);
		amxkq__tile(w, d1, d1, m1, 0, bt + (2 * p + 1) * AMXKQ_TILE);
	}
}

/* The same for Q6_K (scales k = 2j, 2j + 1 for 32-block j). */
QV_INLINE void amxkq__sb_q6(struct kv_rows rp, size_t s, uint16_t *bt)
{
	__m512i w[8][8], v[17];

	if (rp.km == KV_KM_Q6L)
		kv__q6u_sb(rp, s * rp.step, w, v);
	else
		kv__q6_sb(rp, s * rp.step, w, v);
	const __m512 d = _mm512_castsi512_ps(v[16]);

	for (int j = 0; j < 8; j++)
		amxkq__tile(w[j], _mm512_mul_ps(d, _mm512_cvtepi32_ps(v[2 * j])),
			    _mm512_mul_ps(d, _mm512_cvtepi32_ps(v[2 * j + 1])), _mm512_setzero_ps(), 1,
			    bt + j * AMXKQ_TILE);
}

/* A super-block's work units: Q4_K/Q5_K a pair of 32-blocks each (its
 * header unpacked again per pair: smaller pieces of vector work between
 * the tile steps), Q6_K the whole (its unpacking makes all 8 at once). */
static inline size_t amxkq_units(uint32_t wt)
{
	return (wt & ~KERN_PACKED) == DTYPE_Q6_K ? 1 : 4;
}

/* wt (DTYPE_Q4_K, _Q5_K or _Q6_K, | KERN_PACKED for packed rows): unit q
 * (amxkq_units) of super-block s of the 16 rows at w (st bytes apart) as
 * B tiles at bt (the super-block's 8 tiles' place). */
QV_INLINE void amxkq_sb_tiles(uint32_t wt, const char *w, size_t st, size_t s, int q,
			      uint16_t *bt)
{
	const int packed = (wt & KERN_PACKED) != 0;

	switch (wt & ~KERN_PACKED) {
	case DTYPE_Q4_K:
		amxkq__sb_k4(amxkq__rows(w, st, packed, sizeof(struct kern_block_q4_k)), s, 0, q,
			     q + 1, bt);
		break;
	case DTYPE_Q5_K:
		amxkq__sb_k4(amxkq__rows(w, st, packed, sizeof(struct kern_block_q5_k)), s, 1, q,
			     q + 1, bt);
		break;
	default:
		amxkq__sb_q6(amxkq__rows(w, st, packed, sizeof(struct kern_block_q6_k)), s, bt);
		break;
	}
}

/* kern_amxbf_gemm_T and kern_amxbf_pgemm_T (file layout, packed rows):
 * kernels_amx_bf16.c's GEMM (amxbf__gemm, expanded there) with the avx512
 * level's VNNI GEMMs as the fallback, which read the Q8_K blocks (args.xk)
 * and only without them the int8 blocks: kern_matmul leaves either unmade
 * for the bf16 tokens (a->lazy), so they are made first. */
#define AMXKQ_GEMMS(t, wt)                                                               \
	static void amxbf__i8_##t(const struct kern_gemm_args *a, size_t o0, size_t o1)   \
	{                                                                                \
		kern_act_ensure(a);                                                      \
		kern_avx512_vnni_gemm_##t(a, o0, o1);                                    \
	}                                                                                \
	static void amxbf__pi8_##t(const struct kern_gemm_args *a, size_t o0, size_t o1)  \
	{                                                                                \
		kern_act_ensure(a);                                                      \
		kern_avx512_vnni_pgemm_##t(a, o0, o1);                                   \
	}                                                                                \
	void kern_amxbf_gemm_##t(const struct kern_gemm_args *a, size_t o0, size_t o1)    \
	{                                                                                \
		amxbf__gemm(wt, amxbf__i8_##t, a, o0, o1, AMXBF_KS);                     \
	}                                                                                \
	void kern_amxbf_pgemm_##t(const struct kern_gemm_args *a, size_t o0, size_t o1)   \
	{                                                                                \
		amxbf__gemm((wt) | KERN_PACKED, amxbf__pi8_##t, a, o0, o1, AMXBF_KS);    \
	}

/* 1 if wt's B tiles are this file's (super-block units of 8 tiles). */
static inline int amxkq_is_kquant(uint32_t wt)
{
	wt &= ~KERN_PACKED;
	return wt == DTYPE_Q4_K || wt == DTYPE_Q5_K || wt == DTYPE_Q6_K;
}

#endif
