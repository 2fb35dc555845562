/*
 * kquants_gemv.h - the body of the Q2_K .. Q6_K one-token GEMVs on 256-bit
 * vectors, shared by kquants_gemv_avx2.c and kquants_gemv_avx512.c, and
 * of Q2_K/Q3_K's batches through them (gemm_q8k_q2_k, gemm_q8k_q3_k).
 * Each includes it once after defining
 *   KG_FN(name)           its function name prefix
 *   KG_MADD(acc, p, s)    acc + the int32 sums of adjacent int16 products
 *                         p x s (AVX2: VPMADDWD + VPADDD; AVX-512 VNNI:
 *                         one VPDPWSSD)
 *   KG_GEMM_Q2_K .. _Q6_K the level's gemm, run when a call has no
 *                         kern_block_q8_k activations (args.xk NULL)
 *   KG_CHAINS (optional)  2: two accumulators per row (VPDPWSSD latency)
 *   KG_ZMM (optional)     the row bodies of kquants_gemv_zmm.h instead
 *                         (AVX-512 BW/VL + VNNI: VPDPBUSD, packed to int16,
 *                         one VPDPWSSD per 128 weights)
 * Include only from a file compiled with at least AVX2 + FMA + F16C.
 *
 * What is computed: kquants_gemv_ref.c (the specification, equalled bit
 * for bit). Rows are read in their file layout (or, the ZMM bodies with
 * `pk`, packed: kg_rows_at(), kg_step()), a super-block at a time,
 * four rows per step sharing the activation loads: per 32 values one
 * VPMADDUBSW (unsigned weights x int8 activations into int16 pairs, no
 * saturation: 2 x 63 x 127 < 32768) then the sub-block scale applied in
 * int32 by KG_MADD, so a row's super-block is one int32 vector; the four
 * rows' vectors are summed horizontally into one lane each (VPHADDD), and
 * the float steps run in those four lanes. Why not the 16-row VNNI tile
 * of kquants_vnni_avx512.c for one token: it transposes every
 * super-block's bytes into row lanes (compute bound: LEVELS.md).
 *
 * Prefetch: the rows KG_AHEAD ahead, the same super-block, into L2 (T1):
 * into L1 a whole step of rows evicts the rows in use (LEVELS.md); past
 * the chunk, up to the matrix's last row (kg_gemv()).
 *
 * Row order: a step's four rows are adjacent (o .. o + 3). (A quartered
 * order, rows a quarter of the matrix apart, EMBER_GEMV_SPLIT=quarters,
 * was an experiment, removed once packed rows made the K-quant streams
 * linear: LEVELS.md.)
 */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "quants.h"
#include "math_avx2.h"
#include "kquants_q6_avx2.h"

#define KG_R 4      /* rows per step */
#ifndef KG_CHAINS
#define KG_CHAINS 1 /* accumulators per row (2: for a long-latency KG_MADD) */
#endif
#define KG_AHEAD 16 /* rows ahead prefetched */
#define KG_INLINE static inline __attribute__((always_inline))
#define KG_UNROLL _Pragma("GCC unroll 8")

KG_INLINE __m256i kg_load(const void *p)
{
	return _mm256_loadu_si256((const __m256i *)p);
}

/* VPSHUFB indices on a vector holding eight int16 scales in each 128-bit
 * half: kg_bcast16[j] puts scale j in all 16 lanes; kg_pair16[j] puts
 * scale 2j in the low half and 2j + 1 in the high half. */
KG_INLINE __m256i kg_idx_all(int j)
{
	return _mm256_set1_epi16((short)(2 * j | (2 * j + 1) << 8));
}

KG_INLINE __m256i kg_idx_pair(int j)
{
	const short lo = (short)(4 * j | (4 * j + 1) << 8), hi = (short)((4 * j + 2) | (4 * j + 3) << 8);

	return _mm256_setr_epi16(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi);
}

/* Four rows' int32 vectors (r >= R: zero) summed into lanes 0..3. */
KG_INLINE __m128i kg_hsum4(const __m256i v[KG_R])
{
	__m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));

	return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

KG_INLINE int32_t kg_word(const char *p)
{
	int32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* The bases of rows o .. o + R - 1 in w[0 .. R - 1]; the unused ones
 * repeat row o, so a four-row step runs the same instructions for any R. */
KG_INLINE void kg_rows(const struct kern_gemm_args *a, size_t o, int R, const char *w[KG_R])
{
	KG_UNROLL
	for (int r = 0; r < KG_R; r++)
		w[r] = (const char *)a->w + (o + (r < R ? (size_t)r : 0)) * a->w_stride;
}

/* The bases of rows o .. o + 3 where they are packed (kernels.h
 * KERN_PACKED: o a multiple of 4, block s of row r at the group's base +
 * (4 s + r) bs), else kg_rows()'s. */
KG_INLINE void kg_rows_at(const struct kern_gemm_args *a, size_t o, int R, int pk, size_t bs,
			  const char *w[KG_R])
{
	if (!pk) {
		kg_rows(a, o, R, w);
		return;
	}
	KG_UNROLL
	for (int r = 0; r < KG_R; r++)
		w[r] = (const char *)a->w + o * a->w_stride + (size_t)r * bs;
}

/* Bytes from one super-block of a row to its next: packed, past the
 * group's other three rows' (the four rows then read one linear stream,
 * and kg_prefetch_rows() of the same offset covers it KG_AHEAD rows'
 * bytes ahead). */
KG_INLINE size_t kg_step(size_t bs, int pk)
{
	return pk ? KG_R * bs : bs;
}

/* The first R of the four row results to y[o .. o + R - 1]. */
KG_INLINE void kg_store(const struct kern_gemm_args *a, size_t o, int R, __m128 acc)
{
	float out[KG_R];

	_mm_storeu_ps(out, acc);
	memcpy(a->y + o, out, (size_t)R * sizeof(float));
}

/* What kg_store() stored there (lanes past R: 0). */
KG_INLINE __m128 kg_load_y(const struct kern_gemm_args *a, size_t o, int R)
{
	float in[KG_R] = {0};

	memcpy(in, a->y + o, (size_t)R * sizeof(float));
	return _mm_loadu_ps(in);
}

/* The two fp16 in the 4 bytes at `off` of each row's super-block (rows
 * past R repeat row 0: their lanes are never stored), as four floats
 * each: lo the first of each row, hi the second. */
KG_INLINE void kg_halves4(const char *const w[KG_R], size_t off, __m128 *lo, __m128 *hi)
{
	const __m128i v = _mm_setr_epi32(kg_word(w[0] + off), kg_word(w[1] + off), kg_word(w[2] + off),
					 kg_word(w[3] + off));
	const __m128i h = _mm_shuffle_epi8(
		v, _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));

	*lo = _mm_cvtph_ps(h);
	*hi = _mm_cvtph_ps(_mm_unpackhi_epi64(h, h));
}

KG_INLINE void kg_prefetch(const char *p, size_t n)
{
	KG_UNROLL
	for (size_t off = 0; off < n; off += 64)
		_mm_prefetch(p + off, _MM_HINT_T1);
}

/* The next super-block's bytes, off bytes past each of the R rows' bases,
 * into L2. */
KG_INLINE void kg_prefetch_rows(const char *const w[KG_R], int R, size_t off, size_t n)
{
	KG_UNROLL
	for (int r = 0; r < R; r++)
		kg_prefetch(w[r] + off, n);
}

/* Whether a step at rows o .. o + R - 1 prefetches: the rows KG_AHEAD
 * past its last stay below `end` (kg_gemv()). */
KG_INLINE int kg_prefetch_ok(size_t o, int R, size_t end)
{
	return o + (size_t)(R - 1) + KG_AHEAD + 1 <= end;
}

/* A super-block's float step with a minimum (Q4_K, Q5_K, Q2_K): the rows'
 * d and dmin (fp16 at `off` of each row's block), times the activations'
 * scale xd, on the integer sums i4 and minimum sums m4. */
KG_INLINE __m128 kg_step_dmin(__m128 acc, const char *const w[KG_R], size_t off, __m128 xd,
			      __m128i i4, __m128i m4)
{
	__m128 d4, dmin4;

	kg_halves4(w, off, &d4, &dmin4);
	const __m128 dk = _mm_mul_ps(d4, xd);
	const __m128 mk = _mm_mul_ps(dmin4, xd);
	acc = _mm_add_ps(acc, _mm_mul_ps(dk, _mm_cvtepi32_ps(i4)));
	return _mm_sub_ps(acc, _mm_mul_ps(mk, _mm_cvtepi32_ps(m4)));
}

/* The same without a minimum (Q6_K, Q3_K): d is the second fp16 at `off`
 * (the 4 bytes there end the block: two scale bytes, then d). */
KG_INLINE __m128 kg_step_d(__m128 acc, const char *const w[KG_R], size_t off, __m128 xd,
			   __m128i i4)
{
	__m128 sc4, d4;

	kg_halves4(w, off, &sc4, &d4);
	(void)sc4;
	const __m128 dk = _mm_mul_ps(d4, xd);
	return _mm_add_ps(acc, _mm_mul_ps(dk, _mm_cvtepi32_ps(i4)));
}

/* kg_q6_unpack(): kquants_q6_avx2.h (the avx2 packers read it too). */

/* The integer sum of one Q6_K row's super-block at b, spread over eight
 * int32 lanes, without the -32 offset: sum_k sc_k S_k (sc8: the 16 int8
 * scales). Two chains. */
KG_INLINE __m256i kg_q6_row_y(const char *b, __m128i sc8, const int8_t *xq)
{
	const __m256i sca = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(sc8));
	const __m256i scb = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(sc8, 8)));
	__m256i isum = _mm256_setzero_si256(), isum2 = _mm256_setzero_si256();

	KG_UNROLL
	for (int n = 0; n < 2; n++) {
		__m256i q[4];

		kg_q6_unpack(b, n, q);
		KG_UNROLL
		for (int k = 0; k < 4; k++) {
			const int blk = 4 * n + k; /* sub-blocks 2 blk, 2 blk + 1 */
			const __m256i scv = _mm256_shuffle_epi8(n ? scb : sca, kg_idx_pair(k));
			const __m256i pr = _mm256_maddubs_epi16(q[k], kg_load(xq + 32 * blk));
			if (k % 2)
				isum2 = KG_MADD(isum2, pr, scv);
			else
				isum = KG_MADD(isum, pr, scv);
		}
	}
	return _mm256_add_epi32(isum, isum2);
}


/* Q4_K/Q5_K scales and minimums of the super-block at b (quants.h
 * kern_k4_scale_min()) as eight int16 each, in vector registers (no
 * moves from general registers): bytes 4..15 as dwords a0, a1, a2;
 * sc = [a0 & 0x3f.., (a2 & 0x0f..) | (a0 >> 2 & 0x30..)], mn the same on
 * a1 and a2 >> 4. */
KG_INLINE void kg_k4_scales(const char *b, __m128i *sc, __m128i *mn)
{
	const __m128i v = _mm_loadu_si128((const __m128i *)(b + 4)); /* a0 a1 a2 . */
	const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x3f));    /* sc_lo m_lo */
	const __m128i a2 = _mm_srlv_epi32(_mm_shuffle_epi32(v, 0xAA), _mm_setr_epi32(0, 4, 0, 4));
	const __m128i hi = _mm_or_si128(_mm_and_si128(a2, _mm_set1_epi8(0x0f)),
					_mm_and_si128(_mm_srli_epi32(v, 2), _mm_set1_epi8(0x30)));
	const __m128i all = _mm_unpacklo_epi32(lo, hi); /* sc_lo sc_hi m_lo m_hi */

	*sc = _mm_cvtepu8_epi16(all);
	*mn = _mm_cvtepu8_epi16(_mm_srli_si128(all, 8));
}

/* Rows o .. o + R - 1 of Q4_K (five = 0) or Q5_K. */
KG_INLINE void kg_k4_rows(const struct kern_gemm_args *a, size_t o, int R, int five, size_t end)
{
	const size_t bs = five ? sizeof(struct kern_block_q5_k) : sizeof(struct kern_block_q4_k);
	const size_t qs_off = five ? 48 : 16, nsb = a->n_in / KERN_QKK, st = a->w_stride;
	const __m256i ones = _mm256_set1_epi16(1);
	const __m256i m4 = _mm256_set1_epi8(0x0f), b16 = _mm256_set1_epi8(16);
	const struct kern_block_q8_k *x = a->xk;
	const char *w[KG_R];
	const int pf = kg_prefetch_ok(o, R, end);
	__m128 acc = _mm_setzero_ps();

	kg_rows(a, o, R, w);
	for (size_t s = 0; s < nsb; s++) {
		const size_t sb = s * bs;
		const int8_t *xq = x[s].qs;
		__m256i iv[KG_R];
		__m128i mv[KG_R];

		if (pf)
			kg_prefetch_rows(w, R, KG_AHEAD * st + sb, bs);
		/* activation sums per 32 values, as eight int16 */
		const __m256i bp = _mm256_madd_epi16(kg_load(x[s].bsums), ones);
		const __m128i bp16 = _mm_packs_epi32(_mm256_castsi256_si128(bp),
						     _mm256_extracti128_si256(bp, 1));
		__m256i scb[KG_R], qh[KG_R], sa[KG_R], sb2[KG_R];
		KG_UNROLL
		for (int r = 0; r < KG_R; r++) {
			iv[r] = sa[r] = sb2[r] = _mm256_setzero_si256();
			mv[r] = _mm_setzero_si128();
			if (r >= R)
				continue;
			__m128i sc, mn;
			kg_k4_scales(w[r] + sb, &sc, &mn);
			mv[r] = _mm_madd_epi16(mn, bp16);
			scb[r] = _mm256_broadcastsi128_si256(sc);
			qh[r] = five ? kg_load(w[r] + sb + 16) : _mm256_setzero_si256();
		}
		/* block pairs outside, rows inside: each activation vector and
		 * scale index loaded once for the rows */
		KG_UNROLL
		for (int p = 0; p < 4; p++) {
			const __m256i xl = kg_load(xq + 64 * p), xh = kg_load(xq + 64 * p + 32);
			const __m256i il = kg_idx_all(2 * p), ih = kg_idx_all(2 * p + 1);
			KG_UNROLL
			for (int r = 0; r < R; r++) {
				const __m256i q = kg_load(w[r] + sb + qs_off + 32 * p);
				__m256i lo = _mm256_and_si256(q, m4);
				__m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
				if (five) { /* bit 2p of qh -> 16 on lo, 2p + 1 on hi */
					__m256i h = _mm256_srli_epi16(qh[r], 2 * p);
					lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h, 4), b16));
					hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(h, 3), b16));
				}
				sa[r] = KG_MADD(sa[r], _mm256_maddubs_epi16(lo, xl),
						_mm256_shuffle_epi8(scb[r], il));
#if KG_CHAINS == 2
				sb2[r] = KG_MADD(sb2[r], _mm256_maddubs_epi16(hi, xh),
						 _mm256_shuffle_epi8(scb[r], ih));
#else
				sa[r] = KG_MADD(sa[r], _mm256_maddubs_epi16(hi, xh),
						_mm256_shuffle_epi8(scb[r], ih));
#endif
			}
		}
		KG_UNROLL
		for (int r = 0; r < R; r++)
			iv[r] = _mm256_add_epi32(sa[r], sb2[r]);
		const __m128i i4 = kg_hsum4(iv);
		const __m128i m4s = _mm_hadd_epi32(_mm_hadd_epi32(mv[0], mv[1]),
						   _mm_hadd_epi32(mv[2], mv[3]));
		acc = kg_step_dmin(acc, w, sb, _mm_set1_ps(x[s].d), i4, m4s);
	}
	kg_store(a, o, R, acc);
}

/* The integer sum of one Q6_K row's super-block at b (ql 128 bytes, qh
 * 64, 16 int8 scales, d; element e: n = e / 128, k = (e % 128) / 32,
 * l = e % 32 takes a nibble of ql[64n + 32(k & 1) + l] (k < 2 low) and
 * bits 2k, 2k + 1 of qh[32n + l]), with the -32 offset through the
 * activation sums: sum_k sc_k S_k - 32 sum_k sc_k (sum of x_k). */
KG_INLINE __m256i kg_q6_row_sum(const char *b, const int8_t *xq, __m256i bsums)
{
	const __m128i sc8 = _mm_loadu_si128((const __m128i *)(b + 192));
	const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8), bsums), 5);

	return _mm256_sub_epi32(kg_q6_row_y(b, sc8, xq), off);
}

/* The integer sums of one Q2_K row's super-block at b (16 sub-blocks of
 * 16; scales[k]: scale low nibble, minimum high; element 128n + 32j + l
 * in bits 2j, 2j + 1 of qs[32n + l]): isum = sum_k sc_k S_k, returned
 * over eight int32 lanes, and msum = sum_k m_k (sum of x_k) in *mins.
 * Plane j of half n holds sub-block 8n + 2j in its low 128-bit lane and
 * 8n + 2j + 1 in its high one, Q6_K's pairing. Two chains. */
KG_INLINE __m256i kg_q2_row_y(const char *b, const int8_t *xq, __m256i bsums, __m256i *mins)
{
	const __m256i m3 = _mm256_set1_epi8(3);
	const __m128i m4 = _mm_set1_epi8(0x0f);
	const __m128i raw = _mm_loadu_si128((const __m128i *)b);
	const __m128i sc8 = _mm_and_si128(raw, m4);
	const __m256i sca = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc8));
	const __m256i scb = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_srli_si128(sc8, 8)));
	__m256i isum = _mm256_setzero_si256(), isum2 = _mm256_setzero_si256();

	*mins = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4)),
				  bsums);
	KG_UNROLL
	for (int n = 0; n < 2; n++) {
		const __m256i q = kg_load(b + 16 + 32 * n);
		KG_UNROLL
		for (int j = 0; j < 4; j++) {
			const __m256i u = _mm256_and_si256(j ? _mm256_srli_epi16(q, 2 * j) : q, m3);
			const __m256i pr = _mm256_maddubs_epi16(u, kg_load(xq + 128 * n + 32 * j));
			const __m256i scv = _mm256_shuffle_epi8(n ? scb : sca, kg_idx_pair(j));
			if (j % 2)
				isum2 = KG_MADD(isum2, pr, scv);
			else
				isum = KG_MADD(isum, pr, scv);
		}
	}
	return _mm256_add_epi32(isum, isum2);
}

/* Q3_K's 16 signed scales (kern_q3k_scale()) as int8, from the 16 bytes
 * at b + 94 (two before the 12 scale bytes, so as not to pass the block's
 * end): scale j's low 4 bits are s[j] & 15 (j < 8) or s[j - 8] >> 4, its
 * high 2 bits (s[8 + j % 4] >> 2 (j / 4)) & 3. */
KG_INLINE __m128i kg_q3_scales(const char *b)
{
	const __m128i v = _mm_loadu_si128((const __m128i *)(b + 94));
	const __m128i lo = _mm_and_si128(
		_mm_srlv_epi64(_mm_shuffle_epi8(v, _mm_setr_epi8(2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5,
								 6, 7, 8, 9)),
			       _mm_setr_epi32(0, 0, 4, 0)),
		_mm_set1_epi8(0x0f));
	const __m128i hi = _mm_and_si128(
		_mm_srlv_epi32(_mm_shuffle_epi8(v, _mm_setr_epi8(10, 11, 12, 13, 10, 11, 12, 13, 10,
								 11, 12, 13, 10, 11, 12, 13)),
			       _mm_setr_epi32(0, 2, 4, 6)),
		_mm_set1_epi8(3));

	return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
}

/* The integer sum of one Q3_K row's super-block at b: Q2_K's planes (qs
 * at byte 32) with bit 4n + j of hmask[l] as bit 2 (the unsigned value
 * q + 4, 0..7), the same pairing; the -4 offset through the activation
 * sums, as Q6_K's -32: isum = sum_k sc_k S_k - 4 sum_k sc_k (sum of x_k). */
KG_INLINE __m256i kg_q3_row_y(const char *b, const int8_t *xq, __m256i bsums)
{
	const __m256i m3 = _mm256_set1_epi8(3), b4 = _mm256_set1_epi8(4);
	const __m128i sc8 = kg_q3_scales(b);
	const __m256i sca = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(sc8));
	const __m256i scb = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(sc8, 8)));
	const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8), bsums), 2);
	const __m256i hm = kg_load(b);
	__m256i isum = _mm256_setzero_si256(), isum2 = _mm256_setzero_si256();

	KG_UNROLL
	for (int n = 0; n < 2; n++) {
		const __m256i q = kg_load(b + 32 + 32 * n);
		KG_UNROLL
		for (int j = 0; j < 4; j++) {
			const int sh = 4 * n + j - 2; /* hmask bit 4n + j to bit 2 */
			const __m256i h = sh < 0    ? _mm256_slli_epi16(hm, -sh)
					  : sh == 0 ? hm
						    : _mm256_srli_epi16(hm, sh);
			const __m256i u =
				_mm256_or_si256(_mm256_and_si256(j ? _mm256_srli_epi16(q, 2 * j) : q, m3),
						_mm256_and_si256(h, b4));
			const __m256i pr = _mm256_maddubs_epi16(u, kg_load(xq + 128 * n + 32 * j));
			const __m256i scv = _mm256_shuffle_epi8(n ? scb : sca, kg_idx_pair(j));
			if (j % 2)
				isum2 = KG_MADD(isum2, pr, scv);
			else
				isum = KG_MADD(isum, pr, scv);
		}
	}
	return _mm256_sub_epi32(_mm256_add_epi32(isum, isum2), off);
}

/* The K-quants whose rows kg_qk_rows() runs. */
enum kg_qk { KG_QK_Q2, KG_QK_Q3, KG_QK_Q6 };

/* Rows o .. o + R - 1 of Q2_K, Q3_K or Q6_K (qk, a constant once
 * inlined): per super-block each row's integer sums (and Q2_K's minimum
 * sums), then the float step, Q4_K's for Q2_K (d, dmin at 80), without a
 * minimum for Q3_K (d at 108) and Q6_K (d at 208). */
KG_INLINE void kg_qk_rows(const struct kern_gemm_args *a, size_t o, int R, size_t end,
			  enum kg_qk qk)
{
	const size_t bs = qk == KG_QK_Q2   ? sizeof(struct kern_block_q2_k)
			  : qk == KG_QK_Q3 ? sizeof(struct kern_block_q3_k)
					   : sizeof(struct kern_block_q6_k);
	const size_t nsb = a->n_in / KERN_QKK, st = a->w_stride;
	const struct kern_block_q8_k *x = a->xk;
	const char *w[KG_R];
	const int pf = kg_prefetch_ok(o, R, end);
	__m128 acc = _mm_setzero_ps();

	kg_rows(a, o, R, w);
	for (size_t s = 0; s < nsb; s++) {
		const size_t sb = s * bs;
		const __m256i bsums = kg_load(x[s].bsums);
		__m256i iv[KG_R], mv[KG_R];

		if (pf)
			kg_prefetch_rows(w, R, KG_AHEAD * st + sb, bs);
		KG_UNROLL
		for (int r = 0; r < KG_R; r++) {
			if (r >= R) {
				iv[r] = mv[r] = _mm256_setzero_si256();
				continue;
			}
			if (qk == KG_QK_Q2) {
				iv[r] = kg_q2_row_y(w[r] + sb, x[s].qs, bsums, &mv[r]);
				continue;
			}
			iv[r] = qk == KG_QK_Q3 ? kg_q3_row_y(w[r] + sb, x[s].qs, bsums)
					       : kg_q6_row_sum(w[r] + sb, x[s].qs, bsums);
		}
		const __m128i i4 = kg_hsum4(iv);
		if (qk == KG_QK_Q2)
			acc = kg_step_dmin(acc, w, sb + 80, _mm_set1_ps(x[s].d), i4, kg_hsum4(mv));
		else
			acc = kg_step_d(acc, w, sb + (qk == KG_QK_Q3 ? 106 : 206), _mm_set1_ps(x[s].d),
					i4);
	}
	kg_store(a, o, R, acc);
}

/* kern_quantize_act_q8k(), byte for byte: the same amax (max is order
 * free; a NaN element drops out as fmaxf() drops it, MAXPS's second
 * operand NaN-free), scale and rounding; the sums of each 16 from the
 * int8 values. */
void KG_FN(quantize_act_q8k)(const float *x, struct kern_block_q8_k *y, size_t n)
{
	const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);

	for (size_t b = 0; b < n / KERN_QKK; b++, x += KERN_QKK) {
		__m256 m = _mm256_setzero_ps();
		__m256i sums[8];

		KG_UNROLL
		for (int k = 0; k < KERN_QKK / 8; k++)
			m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * k), absmask), m);
		__m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
		m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
		m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
		const float amax = _mm_cvtss_f32(m4);
		const float d = amax / 127.0f;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;
		const __m256 idv = _mm256_set1_ps(id);

		y[b].d = d;
		KG_UNROLL
		for (int c = 0; c < 8; c++) {
			const float *p = x + 32 * c;
			__m256i q0 = avx2__round_q8(_mm256_mul_ps(_mm256_loadu_ps(p), idv));
			__m256i q1 = avx2__round_q8(_mm256_mul_ps(_mm256_loadu_ps(p + 8), idv));
			__m256i q2 = avx2__round_q8(_mm256_mul_ps(_mm256_loadu_ps(p + 16), idv));
			__m256i q3 = avx2__round_q8(_mm256_mul_ps(_mm256_loadu_ps(p + 24), idv));
			/* packs interleave 128-bit lanes; the permute restores order */
			__m256i v = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1),
						       _mm256_packs_epi32(q2, q3));
			v = _mm256_permutevar8x32_epi32(v, perm);
			_mm256_storeu_si256((__m256i *)(y[b].qs + 32 * c), v);
			/* sums of four values; lane half h holds values 16h.. */
			sums[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v),
						    _mm256_set1_epi16(1));
		}
		KG_UNROLL
		for (int g = 0; g < 2; g++) {
			const __m256i *s4 = sums + 4 * g;
			/* lane half 0: the first 16 of blocks 4g..4g+3, half 1 the
			 * second 16 */
			__m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s4[0], s4[1]),
						      _mm256_hadd_epi32(s4[2], s4[3]));
			__m128i lo = _mm256_castsi256_si128(h), hi = _mm256_extracti128_si256(h, 1);
			__m128i w = _mm_packs_epi32(_mm_unpacklo_epi32(lo, hi), _mm_unpackhi_epi32(lo, hi));
			_mm_storeu_si128((__m128i *)(y[b].bsums + 8 * g), w);
		}
	}
}

#ifdef KG_ZMM
#include "kquants_gemv_zmm.h"
#define KG_K4_ROWS kz_k4_rows
#define KG_Q2_ROWS kz_q2_rows
#define KG_Q3_ROWS kz_q3_rows
#else
#define KG_K4_ROWS kg_k4_rows
#define KG_Q6_ROWS(a, o, R, end) kg_qk_rows(a, o, R, end, KG_QK_Q6)
#define KG_Q2_ROWS(a, o, R, end) kg_qk_rows(a, o, R, end, KG_QK_Q2)
#define KG_Q3_ROWS(a, o, R, end) kg_qk_rows(a, o, R, end, KG_QK_Q3)
#endif

/* One function per (type, rows): constant R, the loops unrolled. */
#define KG_ROWS_FN(name, call)                                                             \
	static __attribute__((noinline)) void name(const struct kern_gemm_args *a, size_t o, \
						   size_t end)                               \
	{                                                                                  \
		call;                                                                      \
	}
KG_ROWS_FN(KG_FN(q4k_4), KG_K4_ROWS(a, o, 4, 0, end))
KG_ROWS_FN(KG_FN(q4k_1), KG_K4_ROWS(a, o, 1, 0, end))
KG_ROWS_FN(KG_FN(q5k_4), KG_K4_ROWS(a, o, 4, 1, end))
KG_ROWS_FN(KG_FN(q5k_1), KG_K4_ROWS(a, o, 1, 1, end))
#ifndef KG_ZMM
KG_ROWS_FN(KG_FN(q6k_4), KG_Q6_ROWS(a, o, 4, end))
KG_ROWS_FN(KG_FN(q6k_1), KG_Q6_ROWS(a, o, 1, end))
#endif

typedef void (*kg_rows_fn)(const struct kern_gemm_args *a, size_t o, size_t end);

/* A call without kern_block_q8_k activations, or of more than one token,
 * goes to the level's gemm; one token: four rows a step, the last one to
 * three one at a time (each lane is
 * the same instruction sequence, so a row's result does not depend on
 * the step it falls in). The row functions prefetch up to the matrix's
 * last row (y_stride: n_out for one token), not the chunk's: a thread
 * goes on to the next chunk of its region, whose first KG_AHEAD rows
 * would otherwise come from DRAM unannounced (one 64-row chunk in four
 * of a two-thread decode: 25.6 -> 16.6 GB/s, one thread). */
KG_INLINE void kg_gemv(kern_gemm_fn gemm, kg_rows_fn four, kg_rows_fn one,
		       const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	const size_t end = a->y_stride > o1 ? a->y_stride : o1;
	size_t o = o0;

	if (a->xk == NULL || a->n_tok != 1) {
		gemm(a, o0, o1);
		return;
	}
	for (; o + KG_R <= o1; o += KG_R)
		four(a, o, end);
	for (; o < o1; o++)
		one(a, o, end);
}

void KG_FN(gemv_q4_k)(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kg_gemv(KG_GEMM_Q4_K, KG_FN(q4k_4), KG_FN(q4k_1), a, o0, o1);
}

void KG_FN(gemv_q5_k)(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kg_gemv(KG_GEMM_Q5_K, KG_FN(q5k_4), KG_FN(q5k_1), a, o0, o1);
}

#ifdef KG_ZMM
/* Q6_K at this level: kg_gemv()'s steps, per window of super-blocks,
 * with the activation offsets of kz_q6_bias() built once per call. */
#define KG_Q6_FN(name, R)                                                                    \
	static __attribute__((noinline)) void name(const struct kern_gemm_args *a, size_t o,   \
						   size_t end, const __m512i *bias, size_t s0, \
						   size_t s1)                                  \
	{                                                                                    \
		kz_q6_rows(a, o, R, end, bias, s0, s1, 0);                                   \
	}
KG_Q6_FN(KG_FN(q6k_4), 4)
KG_Q6_FN(KG_FN(q6k_1), 1)

static void KG_FN(q6k_gemv)(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	const size_t end = a->y_stride > o1 ? a->y_stride : o1, nsb = a->n_in / KERN_QKK;
	__m512i bias[4 * KZ_Q6_WIN];

	for (size_t s0 = 0; s0 < nsb; s0 += KZ_Q6_WIN) {
		const size_t s1 = nsb - s0 > KZ_Q6_WIN ? s0 + KZ_Q6_WIN : nsb;
		size_t o = o0;

		kz_q6_bias(a->xk, s0, s1, bias);
		for (; o + KG_R <= o1; o += KG_R)
			KG_FN(q6k_4)(a, o, end, bias, s0, s1);
		for (; o < o1; o++)
			KG_FN(q6k_1)(a, o, end, bias, s0, s1);
	}
}
#endif

void KG_FN(gemv_q6_k)(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
#ifdef KG_ZMM
	if (a->xk == NULL || a->n_tok != 1)
		KG_GEMM_Q6_K(a, o0, o1);
	else
		KG_FN(q6k_gemv)(a, o0, o1);
#else
	kg_gemv(KG_GEMM_Q6_K, KG_FN(q6k_4), KG_FN(q6k_1), a, o0, o1);
#endif
}

KG_ROWS_FN(KG_FN(q2k_4), KG_Q2_ROWS(a, o, 4, end))
KG_ROWS_FN(KG_FN(q2k_1), KG_Q2_ROWS(a, o, 1, end))

void KG_FN(gemv_q2_k)(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kg_gemv(KG_GEMM_Q2_K, KG_FN(q2k_4), KG_FN(q2k_1), a, o0, o1);
}

KG_ROWS_FN(KG_FN(q3k_4), KG_Q3_ROWS(a, o, 4, end))
KG_ROWS_FN(KG_FN(q3k_1), KG_Q3_ROWS(a, o, 1, end))

void KG_FN(gemv_q3_k)(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kg_gemv(KG_GEMM_Q3_K, KG_FN(q3k_4), KG_FN(q3k_1), a, o0, o1);
}

/* Q2_K and Q3_K for 2+ tokens: every token through the GEMV
 * above on its own kern_block_q8_k row (kern_gemm_tokens, quants.h), so a
 * token's result is its one-token result whatever its batch. */
void KG_FN(gemm_q8k_q2_k)(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kern_gemm_tokens(KG_FN(gemv_q2_k), KG_GEMM_Q2_K, a, o0, o1);
}

void KG_FN(gemm_q8k_q3_k)(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kern_gemm_tokens(KG_FN(gemv_q3_k), KG_GEMM_Q3_K, a, o0, o1);
}
