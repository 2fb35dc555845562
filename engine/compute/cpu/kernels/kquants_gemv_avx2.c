/*
 * kquants_gemv_avx2.c - the Q2_K .. Q6_K one-token GEMVs on the AVX2
 * level (the body is kquants_gemv.h): the scale applied to VPMADDUBSW's
 * int16 pairs by VPMADDWD, added in int32; Q2_K/Q3_K's batches through
 * the GEMV (kern_avx2_gemm_q8k_*; without Q8_K activations the 32-block
 * gemm of kquants_simd.h); and Q4_K/Q5_K/Q6_K's batches (below: four
 * rows a step, and Q4_K/Q6_K eight rows a step in vector lanes); and
 * Q4_K and Q6_K packed at load with rows in lanes (kern_avx2_pgemm_q4_k,
 * kern_avx2_pgemm_q6_k: batches and one token; the packers are in
 * kquants_pack_avx2.c).
 */
#if defined(__x86_64__)
#include <assert.h>
#include <immintrin.h>
#include <string.h>

#include "kernels_impl.h"
#include "quants.h"

#define KG_FN(name) kern_avx2_##name
#define KG_MADD(acc, p, s) _mm256_add_epi32((acc), _mm256_madd_epi16((p), (s)))
#define KG_GEMM_Q4_K kern_avx2_gemm_q4_k
#define KG_GEMM_Q5_K kern_avx2_gemm_q5_k
#define KG_GEMM_Q6_K kern_avx2_gemm_q6_k
#define KG_GEMM_Q2_K kern_avx2_gemm_q2_k
#define KG_GEMM_Q3_K kern_avx2_gemm_q3_k

#include "kquants_gemv.h"

/*
 * Q4_K, Q5_K and Q6_K for 2 or more tokens (a batched decode step, and
 * prefill KB_MAX tokens at a time):
 * the GEMV's four-row steps (kg_k4_rows(), kg_qk_rows()), with each
 * super-block of the four rows unpacked once (its 8 x 32 weights as
 * bytes, each 32's int16 scale spread for VPMADDWD, the Q4_K/Q5_K
 * minimums, the Q6_K scales for the -32 offset) into kb_rows, then every
 * token applied to it while it is in L1: per token and 32 weights one
 * VPMADDUBSW, one VPMADDWD and one add, against the GEMV's unpacking,
 * scale shuffle and all per token (the GEMV, per token: 256 x 4 rows
 * loaded and unpacked again). Each (row, token) result is the GEMV's,
 * bit for bit: the same exact int32 sums per super-block (integer, so in
 * any order), kg_hsum4()'s lanes, and the same float steps in the same
 * order; rows past R repeat row o (their lanes are never stored), as the
 * GEMV's one-row tail steps give each lane the same sequence.
 */
#define KB_MAX 16 /* most tokens a step takes */

struct kb_rows {
	__m256i w[KG_R][8];  /* 32 weights (unsigned) per 32-block */
	__m256i sc[KG_R][8]; /* the block's scale in every int16 lane */
	__m256i sc16[KG_R];  /* Q6_K: its 16 scales as int16 (offset) */
	__m128i mn[KG_R];    /* Q4_K/Q5_K: the 8 minimums as int16 */
	__m128 d4, m4;       /* the rows' d and dmin (Q6_K: d) */
};

/* Super-block s of the four rows at w[] (kind 0 Q4_K, 1 Q5_K, 2 Q6_K). */
KG_INLINE void kb_unpack(const char *const w[KG_R], size_t sb, int kind, struct kb_rows *u)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f), b16 = _mm256_set1_epi8(16);

	if (kind == 2) {
		__m128 sc4;
		kg_halves4(w, sb + 206, &sc4, &u->d4); /* scales 14, 15, then d */
		KG_UNROLL
		for (int r = 0; r < KG_R; r++) {
			const char *b = w[r] + sb;
			const __m128i sc8 = _mm_loadu_si128((const __m128i *)(b + 192));
			const __m256i sca = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(sc8));
			const __m256i scb =
				_mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(sc8, 8)));
			u->sc16[r] = _mm256_cvtepi8_epi16(sc8);
			KG_UNROLL
			for (int n = 0; n < 2; n++) {
				kg_q6_unpack(b, n, &u->w[r][4 * n]);
				KG_UNROLL
				for (int k = 0; k < 4; k++)
					u->sc[r][4 * n + k] =
						_mm256_shuffle_epi8(n ? scb : sca, kg_idx_pair(k));
			}
		}
		return;
	}
	const size_t qs_off = kind ? 48 : 16;
	kg_halves4(w, sb, &u->d4, &u->m4);
	KG_UNROLL
	for (int r = 0; r < KG_R; r++) {
		__m128i sc;
		kg_k4_scales(w[r] + sb, &sc, &u->mn[r]);
		const __m256i scb = _mm256_broadcastsi128_si256(sc);
		const __m256i qh = kind ? kg_load(w[r] + sb + 16) : _mm256_setzero_si256();
		KG_UNROLL
		for (int p = 0; p < 4; p++) {
			const __m256i q = kg_load(w[r] + sb + qs_off + 32 * p);
			__m256i lo = _mm256_and_si256(q, m4);
			__m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
			if (kind) { /* bit 2p of qh -> 16 on lo, 2p + 1 on hi */
				__m256i h = _mm256_srli_epi16(qh, 2 * p);
				lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h, 4), b16));
				hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(h, 3), b16));
			}
			u->w[r][2 * p] = lo;
			u->w[r][2 * p + 1] = hi;
			u->sc[r][2 * p] = _mm256_shuffle_epi8(scb, kg_idx_all(2 * p));
			u->sc[r][2 * p + 1] = _mm256_shuffle_epi8(scb, kg_idx_all(2 * p + 1));
		}
	}
}

/* One token's super-block (x) on the unpacked rows: acc's float steps. */
KG_INLINE __m128 kb_token(const struct kb_rows *u, const struct kern_block_q8_k *x, int kind,
			  __m128 acc)
{
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i iv[KG_R];

	KG_UNROLL
	for (int r = 0; r < KG_R; r++)
		iv[r] = _mm256_setzero_si256();
	KG_UNROLL
	for (int j = 0; j < 8; j++) {
		const __m256i xv = kg_load(x->qs + 32 * j);
		KG_UNROLL
		for (int r = 0; r < KG_R; r++)
			iv[r] = KG_MADD(iv[r], _mm256_maddubs_epi16(u->w[r][j], xv), u->sc[r][j]);
	}
	const __m128 xd = _mm_set1_ps(x->d);
	if (kind == 2) {
		const __m256i bsums = kg_load(x->bsums);
		KG_UNROLL
		for (int r = 0; r < KG_R; r++) /* the -32 offset */
			iv[r] = _mm256_sub_epi32(
				iv[r], _mm256_slli_epi32(_mm256_madd_epi16(u->sc16[r], bsums), 5));
		const __m128i i4 = kg_hsum4(iv);
		return _mm_add_ps(acc, _mm_mul_ps(_mm_mul_ps(u->d4, xd), _mm_cvtepi32_ps(i4)));
	}
	const __m256i bp = _mm256_madd_epi16(kg_load(x->bsums), ones);
	const __m128i bp16 =
		_mm_packs_epi32(_mm256_castsi256_si128(bp), _mm256_extracti128_si256(bp, 1));
	__m128i mv[KG_R];
	KG_UNROLL
	for (int r = 0; r < KG_R; r++)
		mv[r] = _mm_madd_epi16(u->mn[r], bp16);
	const __m128i i4 = kg_hsum4(iv);
	const __m128i m4s =
		_mm_hadd_epi32(_mm_hadd_epi32(mv[0], mv[1]), _mm_hadd_epi32(mv[2], mv[3]));
	acc = _mm_add_ps(acc, _mm_mul_ps(_mm_mul_ps(u->d4, xd), _mm_cvtepi32_ps(i4)));
	return _mm_sub_ps(acc, _mm_mul_ps(_mm_mul_ps(u->m4, xd), _mm_cvtepi32_ps(m4s)));
}

/* Rows o .. o + R - 1 (R <= 4) x the call's tokens. */
KG_INLINE void kb_rows_step(const struct kern_gemm_args *a, size_t o, int R, int kind,
			    size_t end)
{
	static const size_t sizes[3] = {sizeof(struct kern_block_q4_k),
					sizeof(struct kern_block_q5_k),
					sizeof(struct kern_block_q6_k)};
	const size_t bs = sizes[kind], nsb = a->n_in / KERN_QKK, st = a->w_stride;
	const int pf = o + (size_t)(R - 1) + KG_AHEAD + 1 <= end;
	const char *w[KG_R];
	struct kb_rows u;
	__m128 acc[KB_MAX];

	kg_rows(a, o, R, w);
	for (size_t t = 0; t < a->n_tok; t++)
		acc[t] = _mm_setzero_ps();
	for (size_t s = 0; s < nsb; s++) {
		const size_t sb = s * bs;
		if (pf)
			kg_prefetch_rows(w, R, KG_AHEAD * st + sb, bs);
		kb_unpack(w, sb, kind, &u);
		for (size_t t = 0; t < a->n_tok; t++)
			acc[t] = kb_token(&u, a->xk + t * nsb + s, kind, acc[t]);
	}
	for (size_t t = 0; t < a->n_tok; t++) {
		float out[KG_R];
		_mm_storeu_ps(out, acc[t]);
		memcpy(a->y + t * a->y_stride + o, out, (size_t)R * sizeof(float));
	}
}

#define KB_STEP_FN(name, kind)                                                               \
	static __attribute__((noinline)) void name(const struct kern_gemm_args *a, size_t o,   \
						   int R, size_t end)                          \
	{                                                                                    \
		kb_rows_step(a, o, R, kind, end);                                            \
	}
KB_STEP_FN(kb_q4k, 0)
KB_STEP_FN(kb_q5k, 1)
KB_STEP_FN(kb_q6k, 2)

typedef void (*kb_step_fn)(const struct kern_gemm_args *a, size_t o, int R, size_t end);

/*
 * Q4_K and Q6_K, 8 rows a step, rows in lanes (the eight rows' super-
 * block transposed once into kl_rows, in L1, then every token): lane r
 * of every vector is row r, and vector (j, c) holds elements 4c..4c+3
 * of 32-block j of each row, so one VPMADDUBSW against the token's 4
 * bytes broadcast gives the eight rows' pair sums. A 32-block's 8 (Q4_K)
 * are summed in int16 (a lane: 16 products, at most 16 x 15 x 128 =
 * 30720), then one VPMADDWD by the rows' scales and one add; Q6_K's
 * scale changes every 16 elements and its pairs reach 2 x 63 x 128, so 2
 * per VPMADDWD. Per 256 products, row and token: ~18 vector operations
 * (the four-row steps: ~24 for the products and ~9 for the horizontal
 * sums, minimums and float steps of each row). The int32 sums are the
 * GEMV's (exact), each lane already a row's, and the float steps are the
 * same operations in the same order on eight lanes: the GEMV's bits.
 */
struct kl_rows {
	__m256i w[8][8]; /* [32-block j][c]: elements 4c..4c+3, unsigned */
	__m256i sc[16];  /* Q4_K: [j] the rows' scale in both int16 of a lane;
			  * Q6_K: [k] the rows' scale of 16-block k the same */
	__m256i mp[8];   /* Q4_K: [i] minimums 2i, 2i + 1 as int16 in a lane;
			  * Q6_K: [i] scales 2i, 2i + 1 (for the -32 offset) */
	__m256 d, m;     /* the rows' d and dmin (Q6_K: d) */
};

/* 8x8 transpose of 32-bit elements: v[c] lane r <- v[r] lane c. */
KG_INLINE void kl_transpose8(__m256i v[8])
{
	__m256i t[8], u[8];

	KG_UNROLL
	for (int i = 0; i < 8; i += 2) {
		t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
		t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
	}
	KG_UNROLL
	for (int i = 0; i < 8; i += 4) {
		u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
		u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
		u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
		u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
	}
	KG_UNROLL
	for (int i = 0; i < 4; i++) {
		v[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
		v[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
	}
}

/* Low (hi = 0) or high int16 of every dword in both halves of the dword. */
KG_INLINE __m256i kl_dup16(__m256i v, int hi)
{
	const char l = (char)(2 * hi), h = (char)(2 * hi + 1);
	const __m256i idx = _mm256_setr_epi8(l, h, l, h, l + 4, h + 4, l + 4, h + 4, l + 8, h + 8,
					     l + 8, h + 8, l + 12, h + 12, l + 12, h + 12, l, h, l,
					     h, l + 4, h + 4, l + 4, h + 4, l + 8, h + 8, l + 8,
					     h + 8, l + 12, h + 12, l + 12, h + 12);

	return _mm256_shuffle_epi8(v, idx);
}

/* Super-block sb of the 8 rows at w[] (six = 0 Q4_K, 1 Q6_K) into u. */
KG_INLINE void kl_unpack(const char *const w[8], size_t sb, int six, struct kl_rows *u)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	__m128 lo, hi, lo2, hi2;
	__m256i v[8];

	if (six) {
		kg_halves4(w, sb + 206, &lo, &hi); /* scales 14, 15, then d */
		kg_halves4(w + 4, sb + 206, &lo2, &hi2);
		u->d = _mm256_set_m128(hi2, hi);
		KG_UNROLL
		for (int r = 0; r < 8; r++) /* dword i: scales 2i, 2i + 1 */
			v[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w[r] + sb + 192)));
		kl_transpose8(v);
		KG_UNROLL
		for (int i = 0; i < 8; i++) {
			u->mp[i] = v[i];
			u->sc[2 * i] = kl_dup16(v[i], 0);
			u->sc[2 * i + 1] = kl_dup16(v[i], 1);
		}
		KG_UNROLL
		for (int n = 0; n < 2; n++) {
			__m256i q[8][4];
			KG_UNROLL
			for (int r = 0; r < 8; r++)
				kg_q6_unpack(w[r] + sb, n, q[r]);
			KG_UNROLL
			for (int k = 0; k < 4; k++) {
				KG_UNROLL
				for (int r = 0; r < 8; r++)
					v[r] = q[r][k];
				kl_transpose8(v);
				KG_UNROLL
				for (int c = 0; c < 8; c++)
					u->w[4 * n + k][c] = v[c];
			}
		}
		return;
	}
	kg_halves4(w, sb, &lo, &hi);
	kg_halves4(w + 4, sb, &lo2, &hi2);
	u->d = _mm256_set_m128(lo2, lo);
	u->m = _mm256_set_m128(hi2, hi);
	/* rows r and r + 4 in one vector, then a 4x4 dword transpose in
	 * each half: dword i of each row's scales (minimums) in its lane */
	__m256i s[4], m[4], t[4];
	KG_UNROLL
	for (int r = 0; r < 4; r++) {
		__m128i sc0, mn0, sc1, mn1;
		kg_k4_scales(w[r] + sb, &sc0, &mn0);
		kg_k4_scales(w[r + 4] + sb, &sc1, &mn1);
		s[r] = _mm256_set_m128i(sc1, sc0);
		m[r] = _mm256_set_m128i(mn1, mn0);
	}
	KG_UNROLL
	for (int h = 0; h < 2; h++) {
		__m256i *x = h ? m : s;
		t[0] = _mm256_unpacklo_epi32(x[0], x[1]);
		t[1] = _mm256_unpackhi_epi32(x[0], x[1]);
		t[2] = _mm256_unpacklo_epi32(x[2], x[3]);
		t[3] = _mm256_unpackhi_epi32(x[2], x[3]);
		x[0] = _mm256_unpacklo_epi64(t[0], t[2]);
		x[1] = _mm256_unpackhi_epi64(t[0], t[2]);
		x[2] = _mm256_unpacklo_epi64(t[1], t[3]);
		x[3] = _mm256_unpackhi_epi64(t[1], t[3]);
	}
	KG_UNROLL
	for (int i = 0; i < 4; i++) {
		u->mp[i] = m[i];
		u->sc[2 * i] = kl_dup16(s[i], 0);
		u->sc[2 * i + 1] = kl_dup16(s[i], 1);
	}
	KG_UNROLL
	for (int p = 0; p < 4; p++) {
		KG_UNROLL
		for (int r = 0; r < 8; r++)
			v[r] = kg_load(w[r] + sb + 16 + 32 * p);
		kl_transpose8(v);
		KG_UNROLL
		for (int c = 0; c < 8; c++) {
			u->w[2 * p][c] = _mm256_and_si256(v[c], m4);
			u->w[2 * p + 1][c] = _mm256_and_si256(_mm256_srli_epi16(v[c], 4), m4);
		}
	}
}

/*
 * Q4_K packed at load (kernels.h KERN_PACKED, pack_rows 8,
 * kern_avx2_pack_q4_k()): each super-block of a group of 8 rows, 8 x 144
 * bytes, holds dword k (0 .. 35) of row r's block at dword 8k + r: so
 * vector 0 is the rows' d and dmin, vectors 1 .. 3 their 12 scale bytes
 * in lanes, and vector 4 + 8p + c is what kl_unpack() transposes into
 * (p, c). Read here straight into kl_rows: no transposes, and d, dmin
 * and the 6-bit scales decoded once for all 8 lanes (~27 operations
 * against ~100 for eight rows' kg_k4_scales() and the transposes that
 * follow; with the weights' 96 transposes, a super-block's shared work
 * goes from ~300 to ~125, LEVELS.md).
 */
KG_INLINE __m256i kl_bytes16(int a, int b) /* bytes a, b of each dword as int16 */
{
	const char z = (char)0x80, A = (char)a, B = (char)b;

	return _mm256_setr_epi8(A, z, B, z, A + 4, z, B + 4, z, A + 8, z, B + 8, z, A + 12, z,
				B + 12, z, A, z, B, z, A + 4, z, B + 4, z, A + 8, z, B + 8, z,
				A + 12, z, B + 12, z);
}

KG_INLINE void kl_unpack_pk(const char *blk, struct kl_rows *u)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f), m6 = _mm256_set1_epi8(0x3f);
	const __m256i m30 = _mm256_set1_epi8(0x30);
	const __m256i dm = _mm256_permute4x64_epi64(
		_mm256_shuffle_epi8(kg_load(blk), _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6,
								   7, 10, 11, 14, 15, 0, 1, 4, 5, 8,
								   9, 12, 13, 2, 3, 6, 7, 10, 11, 14,
								   15)),
		0xD8);
	u->d = _mm256_cvtph_ps(_mm256_castsi256_si128(dm));
	u->m = _mm256_cvtph_ps(_mm256_extracti128_si256(dm, 1));
	/* kg_k4_scales() on 8 lanes: bytes j of sc 0..3, sc 4..7, m 0..3,
	 * m 4..7 */
	const __m256i s0 = kg_load(blk + 32), s1 = kg_load(blk + 64), s2 = kg_load(blk + 96);
	const __m256i sl = _mm256_and_si256(s0, m6), ml = _mm256_and_si256(s1, m6);
	const __m256i sh = _mm256_or_si256(_mm256_and_si256(s2, m4),
					   _mm256_and_si256(_mm256_srli_epi32(s0, 2), m30));
	const __m256i mh = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(s2, 4), m4),
					   _mm256_and_si256(_mm256_srli_epi32(s1, 2), m30));
	KG_UNROLL
	for (int j = 0; j < 4; j++) {
		u->sc[j] = _mm256_shuffle_epi8(sl, kl_bytes16(j, j));
		u->sc[4 + j] = _mm256_shuffle_epi8(sh, kl_bytes16(j, j));
	}
	u->mp[0] = _mm256_shuffle_epi8(ml, kl_bytes16(0, 1));
	u->mp[1] = _mm256_shuffle_epi8(ml, kl_bytes16(2, 3));
	u->mp[2] = _mm256_shuffle_epi8(mh, kl_bytes16(0, 1));
	u->mp[3] = _mm256_shuffle_epi8(mh, kl_bytes16(2, 3));
	KG_UNROLL
	for (int p = 0; p < 4; p++) {
		KG_UNROLL
		for (int c = 0; c < 8; c++) {
			const __m256i v = kg_load(blk + 128 + 32 * (8 * p + c));
			u->w[2 * p][c] = _mm256_and_si256(v, m4);
			u->w[2 * p + 1][c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
		}
	}
}

/*
 * Q6_K packed at load (pack_rows 8, kern_avx2_pack_q6_k() in
 * kquants_pack_avx2.c): each super-block of a group of 8 rows, 8 x 210
 * bytes, holds
 *   48 vectors at 32 (24n + 3c + v) (half n, c 0..7, v 0..2): lane r's 4
 *      bytes are elements 4c..4c+3 of 32-block 4n + v of row r (6 bits),
 *      with bits 2v, 2v + 1 of the same elements of 32-block 4n + 3 on
 *      top (bits 6, 7);
 *   4 vectors at 1536 + 32i: lane r = row r's scales 4i .. 4i + 3;
 *   the 8 rows' d at 1664 (fp16).
 * Read straight into kl_rows: one VPAND per 32-block vector, 8 operations
 * for the fourth (its 6 bits from the other three's tops), 2 per scale
 * pair and 1 per scale vector, the d by one VCVTPH2PS: ~210 operations a
 * super-block against ~500 for eight rows' unpacks, their transposes and
 * the scales' (LEVELS.md, sb14).
 */
KG_INLINE __m256i kl_hi16(int a, int b) /* bytes a, b of each dword to int16 tops */
{
	const char z = (char)0x80, A = (char)a, B = (char)b;

	return _mm256_setr_epi8(z, A, z, B, z, A + 4, z, B + 4, z, A + 8, z, B + 8, z, A + 12, z,
				B + 12, z, A, z, B, z, A + 4, z, B + 4, z, A + 8, z, B + 8, z,
				A + 12, z, B + 12);
}

KG_INLINE void kl_unpack_pk6(const char *blk, struct kl_rows *u)
{
	const __m256i m6 = _mm256_set1_epi8(0x3f), m03 = _mm256_set1_epi8(0x03);
	const __m256i m0c = _mm256_set1_epi8(0x0c), m30 = _mm256_set1_epi8(0x30);

	u->d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 1664)));
	KG_UNROLL
	for (int i = 0; i < 4; i++) { /* int8 scales to int16 by the top byte */
		const __m256i s = kg_load(blk + 1536 + 32 * i);
		u->mp[2 * i] = _mm256_srai_epi16(_mm256_shuffle_epi8(s, kl_hi16(0, 1)), 8);
		u->mp[2 * i + 1] = _mm256_srai_epi16(_mm256_shuffle_epi8(s, kl_hi16(2, 3)), 8);
	}
	KG_UNROLL
	for (int i = 0; i < 8; i++) { /* constant selectors (-O2 kept a loop over k) */
		u->sc[2 * i] = kl_dup16(u->mp[i], 0);
		u->sc[2 * i + 1] = kl_dup16(u->mp[i], 1);
	}
	KG_UNROLL
	for (int n = 0; n < 2; n++) {
		KG_UNROLL
		for (int c = 0; c < 8; c++) {
			const char *p = blk + 32 * (24 * n + 3 * c);
			const __m256i w0 = kg_load(p), w1 = kg_load(p + 32), w2 = kg_load(p + 64);
			u->w[4 * n][c] = _mm256_and_si256(w0, m6);
			u->w[4 * n + 1][c] = _mm256_and_si256(w1, m6);
			u->w[4 * n + 2][c] = _mm256_and_si256(w2, m6);
			u->w[4 * n + 3][c] = _mm256_or_si256(
				_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(w0, 6), m03),
						_mm256_and_si256(_mm256_srli_epi16(w1, 4), m0c)),
				_mm256_and_si256(_mm256_srli_epi16(w2, 2), m30));
		}
	}
}

/* An empty asm that "changes" v: keeps GCC from turning a chain of adds
 * into a tree that holds every term live (and spills). */
#define KL_CHAIN(v) __asm__("" : "+x"(v))

#define KL_T 3 /* most tokens a pass over the unpacked rows */

/* Q4_K: the most super-blocks whose activation sums kl_sums() keeps for a
 * batch (n_in up to 16384; a longer row computes them per step). */
#define KL_NSB 64

/*
 * Q4_K's minimums take each 32-block's activation sum (its two bsums
 * added) as int16 pairs, the same for every row: kl_sums() makes them
 * once per batch (t, s at bp[4 (t nsb + s)]: dword i = blocks 2i, 2i + 1)
 * instead of once per 8 rows, and a step reads dword i broadcast (a
 * load, where the shuffles that made it took ~7 vector operations per
 * token, super-block and 8 rows, ~4% of the step). The same int16 values
 * as the GEMV's, so the same bits. NULL where nsb > KL_NSB.
 */
KG_INLINE const int32_t *kl_sums(const struct kern_block_q8_k *x, size_t n_tok, size_t nsb,
				 int32_t bp[KB_MAX * KL_NSB * 4])
{
	const __m256i ones = _mm256_set1_epi16(1);

	if (nsb > KL_NSB)
		return NULL;
	for (size_t i = 0; i < n_tok * nsb; i++) {
		const __m256i v = _mm256_madd_epi16(kg_load(x[i].bsums), ones);
		_mm_storeu_si128((__m128i *)(bp + 4 * i),
				 _mm_packs_epi32(_mm256_castsi256_si128(v),
						 _mm256_extracti128_si256(v, 1)));
	}
	return bp;
}

/* Tokens x[0 .. T-1]'s super-block on the unpacked rows: acc[k]'s float
 * steps; bp[k] the token's kl_sums() entry (NULL: made here). */
KG_INLINE void kl_tokens(const struct kl_rows *u, const struct kern_block_q8_k *const x[KL_T],
			 const int32_t *const bp[KL_T], int T, int six, __m256 acc[KL_T])
{
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i iv[KL_T];

	KG_UNROLL
	for (int j = 0; j < 8; j++) {
		__m256i s[KL_T][2];
		KG_UNROLL
		for (int c = 0; c < 8; c++) {
			const __m256i wv = _mm256_load_si256(&u->w[j][c]);
			const int h = six ? c / 4 : 0; /* Q6_K: 16-block 2j + h */
			KG_UNROLL
			for (int k = 0; k < T; k++) {
				const __m256i p = _mm256_maddubs_epi16(
					wv, _mm256_set1_epi32(kg_word((const char *)x[k]->qs + 32 * j + 4 * c)));
				if (six && c % 2 == 0)
					s[k][h] = p;
				else if (!six && c == 0)
					s[k][0] = p;
				else
					s[k][h] = _mm256_add_epi16(s[k][h], p);
				KL_CHAIN(s[k][h]);
				if (six && c % 2 == 1) { /* two pairs a VPMADDWD */
					const __m256i m = _mm256_madd_epi16(s[k][h], u->sc[2 * j + h]);
					iv[k] = j == 0 && c == 1 ? m : _mm256_add_epi32(iv[k], m);
					KL_CHAIN(iv[k]);
				}
			}
		}
		if (!six) {
			KG_UNROLL
			for (int k = 0; k < T; k++) {
				const __m256i m = _mm256_madd_epi16(s[k][0], u->sc[j]);
				iv[k] = j == 0 ? m : _mm256_add_epi32(iv[k], m);
				KL_CHAIN(iv[k]);
			}
		}
	}
	KG_UNROLL
	for (int k = 0; k < T; k++) {
		const __m256 xd = _mm256_set1_ps(x[k]->d);
		const __m256i bs = kg_load(x[k]->bsums);
		if (six) { /* the -32 offset: sum_i scales . bsums, times 32 */
			__m256i o = _mm256_setzero_si256();
			KG_UNROLL
			for (int i = 0; i < 8; i++) {
				const __m256i b = _mm256_set1_epi32(kg_word((const char *)x[k]->bsums + 4 * i));
				const __m256i m = _mm256_madd_epi16(u->mp[i], b);
				o = i == 0 ? m : _mm256_add_epi32(o, m);
			}
			iv[k] = _mm256_sub_epi32(iv[k], _mm256_slli_epi32(o, 5));
			acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(_mm256_mul_ps(u->d, xd),
								      _mm256_cvtepi32_ps(iv[k])));
			continue;
		}
		/* the 32-blocks' activation sums as int16 pairs, as the GEMV */
		__m128i bp16 = _mm_setzero_si128();
		if (!bp[k]) {
			const __m256i v = _mm256_madd_epi16(bs, ones);
			bp16 = _mm_packs_epi32(_mm256_castsi256_si128(v),
					       _mm256_extracti128_si256(v, 1));
		}
		__m256i ms = _mm256_setzero_si256();
		KG_UNROLL
		for (int i = 0; i < 4; i++) {
			/* dword i in every lane (a variable index: -O1 does not unroll) */
			const __m256i b =
				bp[k] ? _mm256_set1_epi32(bp[k][i])
				      : _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(bp16),
								    _mm256_set1_epi32(i));
			const __m256i m = _mm256_madd_epi16(u->mp[i], b);
			ms = i == 0 ? m : _mm256_add_epi32(ms, m);
		}
		acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(_mm256_mul_ps(u->d, xd),
							      _mm256_cvtepi32_ps(iv[k])));
		acc[k] = _mm256_sub_ps(acc[k], _mm256_mul_ps(_mm256_mul_ps(u->m, xd),
							      _mm256_cvtepi32_ps(ms)));
	}
}

/* Rows o .. o + 7 x the call's tokens (at most KB_MAX); bp: kl_sums()'s
 * (Q4_K; may be NULL); pk: packed (kl_unpack_pk(), kl_unpack_pk6()). */
KG_INLINE void kl_rows_step(const struct kern_gemm_args *a, size_t o, int six, int pk,
			    size_t end, const int32_t *bp)
{
	const size_t bs = six ? sizeof(struct kern_block_q6_k) : sizeof(struct kern_block_q4_k);
	const size_t nsb = a->n_in / KERN_QKK, st = a->w_stride;
	const int pf = o + 7 + KG_AHEAD + 1 <= end;
	const char *g = (const char *)a->w + o * st; /* packed: the group */
	const char *w[8];
	struct kl_rows u __attribute__((aligned(32)));
	__m256 acc[KB_MAX];

	KG_UNROLL
	for (int r = 0; r < 8; r++)
		w[r] = (const char *)a->w + (o + (size_t)r) * st;
	for (size_t t = 0; t < a->n_tok; t++)
		acc[t] = _mm256_setzero_ps();
	for (size_t s = 0; s < nsb; s++) {
		const size_t sb = s * bs;
		if (pk) { /* the same super-block of the group KG_AHEAD rows on */
			if (pf)
				kg_prefetch(g + KG_AHEAD * st + 8 * sb, 8 * bs);
			if (six)
				kl_unpack_pk6(g + 8 * sb, &u);
			else
				kl_unpack_pk(g + 8 * sb, &u);
		} else {
			if (pf) {
				KG_UNROLL
				for (int r = 0; r < 8; r++)
					kg_prefetch(w[r] + KG_AHEAD * st + sb, bs);
			}
			kl_unpack(w, sb, six, &u);
		}
		/* two tokens a pass (four: 2-4% slower at 8, LEVELS.md), an
		 * odd count's last three in one */
		const struct kern_block_q8_k *x[KL_T];
		const int32_t *xb[KL_T];
		size_t t = 0;
		for (; t + 2 <= a->n_tok && a->n_tok - t != 3; t += 2) {
			KG_UNROLL
			for (int k = 0; k < 2; k++) {
				x[k] = a->xk + (t + (size_t)k) * nsb + s;
				xb[k] = bp ? bp + 4 * ((t + (size_t)k) * nsb + s) : NULL;
			}
			kl_tokens(&u, x, xb, 2, six, &acc[t]);
		}
		for (int k = 0; k < KL_T && t + (size_t)k < a->n_tok; k++) {
			x[k] = a->xk + (t + (size_t)k) * nsb + s;
			xb[k] = bp ? bp + 4 * ((t + (size_t)k) * nsb + s) : NULL;
		}
		if (a->n_tok - t == 3)
			kl_tokens(&u, x, xb, 3, six, &acc[t]);
		else if (a->n_tok - t == 1)
			kl_tokens(&u, x, xb, 1, six, &acc[t]);
	}
	for (size_t t = 0; t < a->n_tok; t++)
		_mm256_storeu_ps(a->y + t * a->y_stride + o, acc[t]);
}

static __attribute__((noinline)) void kl_q4k(const struct kern_gemm_args *a, size_t o, size_t end,
					     const int32_t *bp)
{
	kl_rows_step(a, o, 0, 0, end, bp);
}

static __attribute__((noinline)) void kl_q6k(const struct kern_gemm_args *a, size_t o, size_t end,
					     const int32_t *bp)
{
	(void)bp;
	kl_rows_step(a, o, 1, 0, end, NULL);
}

static __attribute__((noinline)) void kl_q4kp(const struct kern_gemm_args *a, size_t o, size_t end,
					      const int32_t *bp)
{
	kl_rows_step(a, o, 0, 1, end, bp);
}

static __attribute__((noinline)) void kl_q6kp(const struct kern_gemm_args *a, size_t o, size_t end,
					      const int32_t *bp)
{
	(void)bp;
	kl_rows_step(a, o, 1, 1, end, NULL);
}

typedef void (*kl_step_fn)(const struct kern_gemm_args *a, size_t o, size_t end,
			   const int32_t *bp);

/* Rows [o, o1) of a batch of at most KB_MAX tokens: by 8 where a step8
 * exists (Q4_K with the batch's kl_sums()), the rest four at a time. */
KG_INLINE void kb_batch(kb_step_fn step, kl_step_fn step8, const struct kern_gemm_args *a,
			size_t o, size_t o1, size_t end)
{
	int32_t sums[KB_MAX * KL_NSB * 4];
	const int32_t *bp = NULL;

	if ((step8 == kl_q4k || step8 == kl_q4kp) && o + 8 <= o1)
		bp = kl_sums(a->xk, a->n_tok, a->n_in / KERN_QKK, sums);
	if (step8)
		for (; o + 8 <= o1; o += 8)
			step8(a, o, end, bp);
	for (; o < o1; o += KG_R)
		step(a, o, o1 - o < KG_R ? (int)(o1 - o) : KG_R, end);
}

/* Tokens with Q8_K activations: Q4_K/Q6_K eight rows a step in lanes
 * (kl_rows_step), then (Q5_K: all) four rows a step (the last one to
 * three together), KB_MAX tokens at a time; a batch (<= KB_MAX) prefetches up
 * to the matrix's last row as kg_gemv() does, a prefill goes by
 * KB_PREFILL_ROWS rows (kept in L2 while its token blocks pass) and
 * prefetches within them. Without Q8_K activations: the scalar
 * reference (kern_gemm_tokens). */
#define KB_PREFILL_ROWS 32
KG_INLINE void kb_gemm(kb_step_fn step, kl_step_fn step8, kern_gemm_fn gemv, kern_gemm_fn ref,
		       const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	const size_t nsb = a->n_in / KERN_QKK;

	if (a->xk == NULL) {
		kern_gemm_tokens(gemv, ref, a, o0, o1);
		return;
	}
	if (a->n_tok <= KB_MAX) {
		kb_batch(step, step8, a, o0, o1, a->y_stride > o1 ? a->y_stride : o1);
		return;
	}
	for (size_t r0 = o0; r0 < o1; r0 += KB_PREFILL_ROWS) {
		const size_t r1 = o1 - r0 < KB_PREFILL_ROWS ? o1 : r0 + KB_PREFILL_ROWS;
		for (size_t t = 0; t < a->n_tok; t += KB_MAX) {
			struct kern_gemm_args b = *a;
			b.n_tok = a->n_tok - t < KB_MAX ? a->n_tok - t : KB_MAX;
			b.xk = a->xk + t * nsb;
			b.y = a->y + t * a->y_stride;
			kb_batch(step, step8, &b, r0, r1, r1);
		}
	}
}

void kern_avx2_gemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kb_gemm(kb_q4k, kl_q4k, kern_avx2_gemv_q4_k, kern_ref_gemm_q4_k, a, o0, o1);
}

/* Packed Q4_K (kl_unpack_pk()), rows [o0, o1) in whole groups of 8: any
 * token count, one included (the GEMV's bits: kl_tokens()), as kb_gemm()
 * goes; packed rows always come with Q8_K activations (kernels.c). */
void kern_avx2_pgemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	assert(a->xk != NULL && o0 % 8 == 0 && o1 % 8 == 0);
	kb_gemm(kb_q4k, kl_q4kp, kern_avx2_gemv_q4_k, kern_ref_gemm_q4_k, a, o0, o1);
}

void kern_avx2_gemm_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kb_gemm(kb_q5k, NULL, kern_avx2_gemv_q5_k, kern_ref_gemm_q5_k, a, o0, o1);
}

void kern_avx2_gemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kb_gemm(kb_q6k, kl_q6k, kern_avx2_gemv_q6_k, kern_ref_gemm_q6_k, a, o0, o1);
}

/* Packed Q6_K (kl_unpack_pk6()), as kern_avx2_pgemm_q4_k(): rows [o0, o1)
 * in whole groups of 8, any token count (one: the GEMV's bits). */
void kern_avx2_pgemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	assert(a->xk != NULL && o0 % 8 == 0 && o1 % 8 == 0);
	kb_gemm(kb_q6k, kl_q6kp, kern_avx2_gemv_q6_k, kern_ref_gemm_q6_k, a, o0, o1);
}

#endif
