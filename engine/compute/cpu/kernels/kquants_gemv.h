/*
 * kquants_gemv.h - the body of the Q4_K, Q5_K and Q6_K one-token GEMVs on
 * 256-bit vectors, shared by kquants_gemv_avx2.c and kquants_gemv_avx512.c.
 * Each includes it once after defining
 *   KG_FN(name)           its function name prefix
 *   KG_MADD(acc, p, s)    acc + the int32 sums of adjacent int16 products
 *                         p x s (AVX2: VPMADDWD + VPADDD; AVX-512 VNNI:
 *                         one VPDPWSSD)
 *   KG_GEMM_Q4_K .. _Q6_K the level's gemm, run when a call has no
 *                         kern_block_q8_k activations (args.xk NULL)
 * Include only from a file compiled with at least AVX2 + FMA + F16C.
 *
 * What is computed: kquants_gemv_ref.c (the specification, equalled bit
 * for bit). Rows are read in their file layout, a super-block at a time,
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
 * into L1 a whole step of rows evicts the rows in use (LEVELS.md).
 */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "quants.h"

#define KG_R 4      /* rows per step */
#define KG_AHEAD 16 /* rows ahead prefetched */
#define KG_INLINE static inline __attribute__((always_inline))

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

/* The fp16 at byte `off` of each row's super-block, as four floats. */
KG_INLINE __m128 kg_half4(const char *const w[KG_R], int R, size_t off)
{
	uint16_t h[8] = {0};

	for (int r = 0; r < R; r++)
		memcpy(&h[r], w[r] + off, 2);
	return _mm_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

KG_INLINE void kg_prefetch(const char *p, size_t n)
{
	for (size_t off = 0; off < n; off += 64)
		_mm_prefetch(p + off, _MM_HINT_T1);
}

/* Rows o .. o + R - 1 of Q4_K (five = 0) or Q5_K. */
KG_INLINE void kg_k4_rows(const struct kern_gemm_args *a, size_t o, int R, int five, size_t o1)
{
	const size_t bs = five ? sizeof(struct kern_block_q5_k) : sizeof(struct kern_block_q4_k);
	const size_t qs_off = five ? 48 : 16, nsb = a->n_in / KERN_QKK, st = a->w_stride;
	const __m256i m4 = _mm256_set1_epi8(0x0f), b16 = _mm256_set1_epi8(16);
	const __m256i ones = _mm256_set1_epi16(1);
	const struct kern_block_q8_k *x = a->xk;
	const char *w[KG_R];
	const int pf = o + KG_AHEAD + R <= o1;
	__m128 acc = _mm_setzero_ps();

	for (int r = 0; r < KG_R; r++)
		w[r] = (const char *)a->w + (o + (r < R ? r : 0)) * st;
	for (size_t s = 0; s < nsb; s++) {
		const size_t sb = s * bs;
		const int8_t *xq = x[s].qs;
		__m256i iv[KG_R];
		__m128i mv[KG_R];

		if (pf)
			for (int r = 0; r < R; r++)
				kg_prefetch(w[r] + KG_AHEAD * st + sb, bs);
		/* activation sums per 32 values, as eight int16 */
		const __m256i bp = _mm256_madd_epi16(kg_load(x[s].bsums), ones);
		const __m128i bp16 = _mm_packs_epi32(_mm256_castsi256_si128(bp),
						     _mm256_extracti128_si256(bp, 1));
		for (int r = 0; r < KG_R; r++) {
			if (r >= R) {
				iv[r] = _mm256_setzero_si256();
				mv[r] = _mm_setzero_si128();
				continue;
			}
			const char *b = w[r] + sb;
			uint32_t a0, a1, a2;

			memcpy(&a0, b + 4, 4);
			memcpy(&a1, b + 8, 4);
			memcpy(&a2, b + 12, 4);
			/* quants.h kern_k4_scale_min(), four at a time */
			const __m128i sc = _mm_cvtepu8_epi16(_mm_setr_epi32(
				(int)(a0 & 0x3f3f3f3f),
				(int)((a2 & 0x0f0f0f0f) | ((a0 >> 2) & 0x30303030)), 0, 0));
			const __m128i mn = _mm_cvtepu8_epi16(_mm_setr_epi32(
				(int)(a1 & 0x3f3f3f3f),
				(int)(((a2 >> 4) & 0x0f0f0f0f) | ((a1 >> 2) & 0x30303030)), 0, 0));
			const __m256i scb = _mm256_broadcastsi128_si256(sc);
			const __m256i qh = five ? kg_load(b + 16) : _mm256_setzero_si256();
			__m256i isum = _mm256_setzero_si256();

			mv[r] = _mm_madd_epi16(mn, bp16);
			for (int p = 0; p < 4; p++) {
				__m256i q = kg_load(b + qs_off + 32 * p);
				__m256i lo = _mm256_and_si256(q, m4);
				__m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
				if (five) { /* bit 2p of qh -> 16 on lo, 2p + 1 on hi */
					__m256i h = _mm256_srli_epi16(qh, 2 * p);
					lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h, 4), b16));
					hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(h, 3), b16));
				}
				isum = KG_MADD(isum, _mm256_maddubs_epi16(lo, kg_load(xq + 64 * p)),
					       _mm256_shuffle_epi8(scb, kg_idx_all(2 * p)));
				isum = KG_MADD(isum, _mm256_maddubs_epi16(hi, kg_load(xq + 64 * p + 32)),
					       _mm256_shuffle_epi8(scb, kg_idx_all(2 * p + 1)));
			}
			iv[r] = isum;
		}
		const __m128i i4 = kg_hsum4(iv);
		const __m128i m4s = _mm_hadd_epi32(_mm_hadd_epi32(mv[0], mv[1]),
						   _mm_hadd_epi32(mv[2], mv[3]));
		const __m128 xd = _mm_set1_ps(x[s].d);
		const __m128 dk = _mm_mul_ps(kg_half4(w, R, sb), xd);
		const __m128 mk = _mm_mul_ps(kg_half4(w, R, sb + 2), xd);
		acc = _mm_add_ps(acc, _mm_mul_ps(dk, _mm_cvtepi32_ps(i4)));
		acc = _mm_sub_ps(acc, _mm_mul_ps(mk, _mm_cvtepi32_ps(m4s)));
	}
	float out[KG_R];
	_mm_storeu_ps(out, acc);
	memcpy(a->y + o, out, (size_t)R * sizeof(float));
}

/* Rows o .. o + R - 1 of Q6_K: ql (128 bytes), qh (64), 16 int8 scales,
 * d; element e: n = e / 128, k = (e % 128) / 32, l = e % 32 takes a
 * nibble of ql[64n + 32(k & 1) + l] (k < 2 low) and bits 2k, 2k + 1 of
 * qh[32n + l]. */
KG_INLINE void kg_q6_rows(const struct kern_gemm_args *a, size_t o, int R, size_t o1)
{
	const size_t bs = sizeof(struct kern_block_q6_k), nsb = a->n_in / KERN_QKK;
	const size_t st = a->w_stride;
	const __m256i m4 = _mm256_set1_epi8(0x0f), m03 = _mm256_set1_epi8(0x03);
	const __m256i m0c = _mm256_set1_epi8(0x0c), m30 = _mm256_set1_epi8(0x30);
	const struct kern_block_q8_k *x = a->xk;
	const char *w[KG_R];
	const int pf = o + KG_AHEAD + R <= o1;
	__m128 acc = _mm_setzero_ps();

	for (int r = 0; r < KG_R; r++)
		w[r] = (const char *)a->w + (o + (r < R ? r : 0)) * st;
	for (size_t s = 0; s < nsb; s++) {
		const size_t sb = s * bs;
		const int8_t *xq = x[s].qs;
		const __m256i bsums = kg_load(x[s].bsums);
		__m256i iv[KG_R];

		if (pf)
			for (int r = 0; r < R; r++)
				kg_prefetch(w[r] + KG_AHEAD * st + sb, bs);
		for (int r = 0; r < KG_R; r++) {
			if (r >= R) {
				iv[r] = _mm256_setzero_si256();
				continue;
			}
			const char *b = w[r] + sb;
			const __m128i sc8 = _mm_loadu_si128((const __m128i *)(b + 192));
			const __m256i sca = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(sc8));
			const __m256i scb =
				_mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(sc8, 8)));
			/* the -32 offset: 32 x sum_k sc_k x (sum of x_k) */
			__m256i isum = _mm256_sub_epi32(
				_mm256_setzero_si256(),
				_mm256_slli_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8), bsums), 5));

			for (int n = 0; n < 2; n++) {
				const __m256i ql0 = kg_load(b + 64 * n), ql1 = kg_load(b + 64 * n + 32);
				const __m256i qh = kg_load(b + 128 + 32 * n);
				__m256i q[4];

				q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
						       _mm256_slli_epi16(_mm256_and_si256(qh, m03), 4));
				q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
						       _mm256_slli_epi16(_mm256_and_si256(qh, m0c), 2));
				q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
						       _mm256_and_si256(qh, m30));
				q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
						       _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
				for (int k = 0; k < 4; k++) {
					const int blk = 4 * n + k; /* sub-blocks 2 blk, 2 blk + 1 */
					const __m256i scv = _mm256_shuffle_epi8(n ? scb : sca,
										kg_idx_pair(k));
					isum = KG_MADD(isum,
						       _mm256_maddubs_epi16(q[k], kg_load(xq + 32 * blk)),
						       scv);
				}
			}
			iv[r] = isum;
		}
		const __m128i i4 = kg_hsum4(iv);
		const __m128 dk = _mm_mul_ps(kg_half4(w, R, sb + 208), _mm_set1_ps(x[s].d));
		acc = _mm_add_ps(acc, _mm_mul_ps(dk, _mm_cvtepi32_ps(i4)));
	}
	float out[KG_R];
	_mm_storeu_ps(out, acc);
	memcpy(a->y + o, out, (size_t)R * sizeof(float));
}

/* One function per (type, rows): constant R, the loops unrolled. */
#define KG_ROWS_FN(name, call)                                                             \
	static __attribute__((noinline)) void name(const struct kern_gemm_args *a, size_t o, \
						   size_t o1)                                \
	{                                                                                  \
		call;                                                                      \
	}
KG_ROWS_FN(KG_FN(q4k_4), kg_k4_rows(a, o, 4, 0, o1))
KG_ROWS_FN(KG_FN(q4k_1), kg_k4_rows(a, o, 1, 0, o1))
KG_ROWS_FN(KG_FN(q5k_4), kg_k4_rows(a, o, 4, 1, o1))
KG_ROWS_FN(KG_FN(q5k_1), kg_k4_rows(a, o, 1, 1, o1))
KG_ROWS_FN(KG_FN(q6k_4), kg_q6_rows(a, o, 4, o1))
KG_ROWS_FN(KG_FN(q6k_1), kg_q6_rows(a, o, 1, o1))

typedef void (*kg_rows_fn)(const struct kern_gemm_args *a, size_t o, size_t o1);

/* Four rows a step; the last one to three one at a time (each lane is
 * the same instruction sequence, so a row's result does not depend on
 * the step it falls in). */
KG_INLINE void kg_gemv(kg_rows_fn four, kg_rows_fn one, const struct kern_gemm_args *a, size_t o0,
		       size_t o1)
{
	size_t o = o0;

	for (; o + KG_R <= o1; o += KG_R)
		four(a, o, o1);
	for (; o < o1; o++)
		one(a, o, o1);
}

void KG_FN(gemv_q4_k)(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	if (a->xk == NULL || a->n_tok != 1)
		KG_GEMM_Q4_K(a, o0, o1);
	else
		kg_gemv(KG_FN(q4k_4), KG_FN(q4k_1), a, o0, o1);
}

void KG_FN(gemv_q5_k)(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	if (a->xk == NULL || a->n_tok != 1)
		KG_GEMM_Q5_K(a, o0, o1);
	else
		kg_gemv(KG_FN(q5k_4), KG_FN(q5k_1), a, o0, o1);
}

void KG_FN(gemv_q6_k)(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	if (a->xk == NULL || a->n_tok != 1)
		KG_GEMM_Q6_K(a, o0, o1);
	else
		kg_gemv(KG_FN(q6k_4), KG_FN(q6k_1), a, o0, o1);
}
