/*
 * kquants_gemv_zmm.h - the AVX-512 VNNI row bodies of the Q4_K, Q5_K and
 * Q6_K one-token GEMVs, included by kquants_gemv.h when KG_ZMM is set
 * (kquants_gemv_avx512.c only; AVX-512 F/BW/VL + VNNI, no VBMI).
 *
 * What is computed: kquants_gemv_ref.c, bit for bit (the integer sums are
 * exact in any order; the float steps are the reference's, four rows in
 * four lanes). How, per row and 64 weights (one ZMM):
 *   VPDPBUSD  the unsigned weights x the int8 activations, four products
 *             per int32 lane: every 128-bit lane holds one sub-block (Q6_K:
 *             16 values) or half of one (Q4_K/Q5_K: 32), so a lane's sums
 *             belong to a single scale;
 *   VPACKSSDW two such vectors into int16: exact, as a lane's four
 *             products are at most 4 x 63 x 127 = 32004 in magnitude;
 *   VPDPWSSD  those int16 times their sub-block scales (a vector built per
 *             row and super-block by one VPERMW of the row's scales),
 *             added into the row's int32 accumulator.
 * That is 1.5 multiplies per 64 weights where VPMADDUBSW + VPDPWSSD take
 * 2, and no per-block scale shuffles. Q6_K's -32 offset starts each
 * VPDPBUSD (-32 x its lane's activation sum, built once per call:
 * kz_q6_bias()), and Q6_K packs two rows' sums into one vector, so a
 * row pair shares one accumulator; Q4_K/Q5_K's minimums are one
 * VPMADDWD for four rows. The four rows' accumulators are reduced
 * together once per super-block (VPUNPCK tree, no VPHADDD), with the
 * minimum sums beside them. Every row's scales are read one super-block
 * ahead: they start the row's chain, and from DRAM their latency was the
 * step's.
 * Instruction counts per row and super-block: LEVELS.md.
 */
#ifndef KQUANTS_GEMV_ZMM_H
#define KQUANTS_GEMV_ZMM_H

KG_INLINE __m512i kz_load(const void *p)
{
	return _mm512_loadu_si512(p);
}

/* Two 32-byte pieces as one ZMM. */
KG_INLINE __m512i kz_join(__m256i lo, __m256i hi)
{
	return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* The 16 bytes at off of each of the four rows' super-block, row r in
 * 128-bit lane r. */
KG_INLINE __m512i kz_gather16(const char *const w[KG_R], size_t off)
{
	__m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(w[0] + off)));

	v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(w[1] + off)), 1);
	v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(w[2] + off)), 2);
	return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(w[3] + off)), 3);
}

/* VPERMW indices that make the scale vector of one row and ZMM: word k
 * (128-bit lane k / 8) takes scale `first + (k / 16) * lane_step +
 * (k % 8 / 4) * half_step` of the row whose scales start at word base. */
KG_INLINE __m512i kz_scale_idx(int base, int first, int lane_step, int lane_div, int half_step)
{
	short v[32];

	for (int k = 0; k < 32; k++)
		v[k] = (short)(base + first + (k / 8 / lane_div) * lane_step + (k % 8 / 4) * half_step);
	return _mm512_loadu_si512(v);
}

/* Q4_K/Q5_K/Q2_K's float step for the four rows' super-block (d and dmin
 * of the rows in d4, dmin4; isum in im's low lanes, msum in its high ones):
 * acc + (d D) isum, then - (dmin D) msum, the order of kquants_gemv_ref.c. */
KG_INLINE __m128 kz_step_dmin4(__m128 acc, __m256i im, __m128 d4, __m128 dmin4, float xd_s)
{
	const __m128 xd = _mm_set1_ps(xd_s);
	const __m128 dk = _mm_mul_ps(d4, xd);
	const __m128 mk = _mm_mul_ps(dmin4, xd);
	acc = _mm_add_ps(acc, _mm_mul_ps(dk, _mm_cvtepi32_ps(_mm256_castsi256_si128(im))));
	return _mm_sub_ps(acc, _mm_mul_ps(mk, _mm_cvtepi32_ps(_mm256_extracti128_si256(im, 1))));
}

/* kz_step_dmin4() with d and dmin read as halves at w[r] + off. */
KG_INLINE __m128 kz_step_dmin(__m128 acc, __m256i im, const char *const w[KG_R], size_t off,
			      float xd_s)
{
	__m128 d4, dmin4;

	kg_halves4(w, off, &d4, &dmin4);
	return kz_step_dmin4(acc, im, d4, dmin4, xd_s);
}

/* Four rows' int32 accumulators (16 lanes each) and a vector whose lane k
 * holds [row 0 .. row 3] partial sums (the minimums'): lanes 0..3 of the
 * result the rows' totals of acc, lanes 4..7 of part. */
KG_INLINE __m256i kz_reduce4(const __m512i acc[KG_R], __m512i part)
{
	const __m512i u01 = _mm512_add_epi32(_mm512_unpacklo_epi32(acc[0], acc[1]),
					     _mm512_unpackhi_epi32(acc[0], acc[1]));
	const __m512i u23 = _mm512_add_epi32(_mm512_unpacklo_epi32(acc[2], acc[3]),
					     _mm512_unpackhi_epi32(acc[2], acc[3]));
	/* lane k: [row 0 .. row 3] partial sums */
	const __m512i v = _mm512_add_epi32(_mm512_unpacklo_epi64(u01, u23),
					   _mm512_unpackhi_epi64(u01, u23));
	const __m512i t = _mm512_add_epi32(_mm512_shuffle_i64x2(v, part, _MM_SHUFFLE(2, 0, 2, 0)),
					   _mm512_shuffle_i64x2(v, part, _MM_SHUFFLE(3, 1, 3, 1)));
	const __m512i s = _mm512_add_epi32(t, _mm512_shuffle_i64x2(t, t, _MM_SHUFFLE(2, 3, 0, 1)));

	/* s: [acc totals, acc totals, part totals, part totals] */
	return _mm512_castsi512_si256(_mm512_shuffle_i64x2(s, s, _MM_SHUFFLE(2, 2, 2, 0)));
}

/* The scales of four rows' super-block at off (lane r: row r's eight, as
 * int16) and their minimums times the activation sums of xs, lane k:
 * [row 0 .. row 3] partial sums. */
KG_INLINE void kz_k4_decode(const char *const w[KG_R], size_t off, const struct kern_block_q8_k *xs,
			    __m512i *sc, __m512i *mins)
{
	const __m512i m4 = _mm512_set1_epi8(0x0f), m3f = _mm512_set1_epi8(0x3f);
	const __m512i sh04 = _mm512_set4_epi32(4, 0, 4, 0);
	/* bytes 0..7 of a lane (the scales) / 8..15 (minimums) as int16 */
	const __m512i to_sc = _mm512_broadcast_i32x4(
		_mm_setr_epi8(0, -1, 1, -1, 2, -1, 3, -1, 4, -1, 5, -1, 6, -1, 7, -1));
	const __m512i to_mn = _mm512_broadcast_i32x4(
		_mm_setr_epi8(8, -1, 9, -1, 10, -1, 11, -1, 12, -1, 13, -1, 14, -1, 15, -1));
	/* dword (lane r, k) -> (lane k, r): the minimum sums transposed */
	const __m512i tr = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	/* activation sums per 32 values as int16, in every lane */
	const __m256i bp = _mm256_madd_epi16(kg_load(xs->bsums), _mm256_set1_epi16(1));
	const __m512i bp16 = _mm512_broadcast_i32x4(
		_mm_packs_epi32(_mm256_castsi256_si128(bp), _mm256_extracti128_si256(bp, 1)));
	/* kg_k4_scales() on four rows at once: lane r = [sc 0..7, m 0..7] */
	const __m512i v = kz_gather16(w, off + 4);
	const __m512i a2 = _mm512_srlv_epi32(_mm512_shuffle_epi32(v, 0xAA), sh04);
	const __m512i hi = _mm512_ternarylogic_epi32(_mm512_and_si512(a2, m4), _mm512_srli_epi32(v, 2),
						     _mm512_set1_epi8(0x30), 0xF8);
	const __m512i all = _mm512_unpacklo_epi32(_mm512_and_si512(v, m3f), hi);

	*sc = _mm512_shuffle_epi8(all, to_sc);
	*mins = _mm512_permutexvar_epi32(tr, _mm512_madd_epi16(_mm512_shuffle_epi8(all, to_mn), bp16));
}

/* Rows o .. o + R - 1 of Q4_K (five = 0) or Q5_K. Per row and 64 weights
 * (sub-blocks 4h .. 4h + 3 of the pair of 32-byte qs pieces): low nibbles
 * are sub-blocks [4h | 4h + 2], high ones [4h + 1 | 4h + 3], so the
 * activations are taken as [x 4h | x 4h + 2] and [x 4h + 1 | x 4h + 3]
 * (built once per super-block for the four rows); packed, a 128-bit lane
 * holds [sub 4h x 4 | sub 4h + 1 x 4] (lanes 0, 1) or [4h + 2 | 4h + 3]. */
KG_INLINE void kz_k4_body(const struct kern_gemm_args *a, size_t o, int R, int five, size_t end,
			  int pk)
{
	const size_t bs = five ? sizeof(struct kern_block_q5_k) : sizeof(struct kern_block_q4_k);
	const size_t qs_off = five ? 48 : 16, nsb = a->n_in / KERN_QKK, st = a->w_stride;
	const size_t step = kg_step(bs, pk);
	const __m512i m4 = _mm512_set1_epi8(0x0f), b16 = _mm512_set1_epi8(16);
	const struct kern_block_q8_k *x = a->xk;
	const char *w[KG_R];
	const size_t ah = pk ? kern_avx512_pack_ahead() : KG_AHEAD;
	const int pf = o + (size_t)(R - 1) + ah + 1 <= end && ah;
	__m512i pidx[KG_R][2];
	__m128 acc = _mm_setzero_ps();

	kg_rows_at(a, o, R, pk, bs, w);
	KG_UNROLL
	for (int r = 0; r < KG_R; r++) {
		KG_UNROLL
		for (int h = 0; h < 2; h++)
			pidx[r][h] = kz_scale_idx(8 * r, 4 * h, 2, 2, 1);
	}
	/* each super-block's scales decoded one step ahead: off the path
	 * from its weight loads to its sums */
	__m512i sc_n, mins_n;
	kz_k4_decode(w, 0, x, &sc_n, &mins_n);
	for (size_t s = 0; s < nsb; s++) {
		const size_t sb = s * step;
		const int8_t *xq = x[s].qs;

		if (pf)
			kg_prefetch_rows(w, R, ah * st + sb, bs);
		const __m512i xl[2] = {kz_join(kg_load(xq), kg_load(xq + 64)),
				       kz_join(kg_load(xq + 128), kg_load(xq + 192))};
		const __m512i xh[2] = {kz_join(kg_load(xq + 32), kg_load(xq + 96)),
				       kz_join(kg_load(xq + 160), kg_load(xq + 224))};
		const __m512i sc = sc_n, mins = mins_n;
		if (s + 1 < nsb)
			kz_k4_decode(w, sb + step, x + s + 1, &sc_n, &mins_n);
		__m512i iacc[KG_R];

		KG_UNROLL
		for (int r = 0; r < KG_R; r++) {
			iacc[r] = _mm512_setzero_si512();
			if (r >= R)
				continue;
			const char *b = w[r] + sb;
			__m512i qh2 = _mm512_setzero_si512();
			if (five) { /* [qh | qh >> 2]: bit 4h of a byte for 4h / 4h + 2 */
				const __m256i h = kg_load(b + 16);
				qh2 = kz_join(h, _mm256_srli_epi16(h, 2));
			}
			KG_UNROLL
			for (int h = 0; h < 2; h++) {
				const __m512i q = kz_load(b + qs_off + 64 * h);
				__m512i lo = _mm512_and_si512(q, m4);
				__m512i hn = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
				if (five) {
					const __m512i t = h ? _mm512_srli_epi16(qh2, 4) : qh2;
					lo = _mm512_ternarylogic_epi32(
						lo, b16, _mm512_slli_epi16(t, 4), 0xF8);
					hn = _mm512_ternarylogic_epi32(
						hn, b16, _mm512_slli_epi16(t, 3), 0xF8);
				}
				const __m512i pl = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xl[h]);
				const __m512i ph = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hn, xh[h]);
				iacc[r] = _mm512_dpwssd_epi32(iacc[r], _mm512_packs_epi32(pl, ph),
							      _mm512_permutexvar_epi16(pidx[r][h], sc));
			}
		}
		const __m256i im = kz_reduce4(iacc, mins);
		acc = kz_step_dmin(acc, im, w, sb, x[s].d);
	}
	kg_store(a, o, R, acc);
}

/* Rows o .. o + R - 1 in the file layout. */
KG_INLINE void kz_k4_rows(const struct kern_gemm_args *a, size_t o, int R, int five, size_t end)
{
	kz_k4_body(a, o, R, five, end, 0);
}

/* The 16 int8 scales at off of rows 2i and 2i + 1 as int16, in sc[i]. */
KG_INLINE void kz_q6_scales(const char *const w[KG_R], size_t off, __m512i sc[2])
{
	KG_UNROLL
	for (int i = 0; i < 2; i++)
		sc[i] = _mm512_cvtepi8_epi16(
			_mm256_setr_m128i(_mm_loadu_si128((const __m128i *)(w[2 * i] + off)),
					  _mm_loadu_si128((const __m128i *)(w[2 * i + 1] + off))));
}

/* Super-blocks of Q6_K activation offsets per window (kz_q6_gemv): 16 KiB
 * of stack; a longer row (n_in > 16384) is taken in windows. */
#define KZ_Q6_WIN 64

/* Q6_K's -32 offset, for super-blocks s0 .. s1 - 1 of x: vector j of a
 * super-block holds, per int32 lane i, -32 x (the sum of its activations
 * 64 j + 4 i .. 64 j + 4 i + 3). A row's VPDPBUSD starts from it, so each
 * lane sums (q - 32) x exactly: four products of at most 32 x 128, so
 * the lanes stay within int16 for VPACKSSDW. Built once per call, for
 * all its rows (it replaced a VPDPWSSD of the scales with the bsums per
 * row: the same integer, as bsums are the quantizer's sums of qs). */
KG_INLINE void kz_q6_bias(const struct kern_block_q8_k *x, size_t s0, size_t s1, __m512i *bias)
{
	const __m512i b32 = _mm512_set1_epi8(32);

	for (size_t s = s0; s < s1; s++) {
		KG_UNROLL
		for (int j = 0; j < 4; j++)
			bias[4 * (s - s0) + j] = _mm512_sub_epi32(
				_mm512_setzero_si512(),
				_mm512_dpbusd_epi32(_mm512_setzero_si512(), b32, kz_load(x[s].qs + 64 * j)));
	}
}

/* Super-blocks s0 .. s1 - 1 of rows o .. o + R - 1 of Q6_K (layout:
 * kg_q6_row_sum()), added to y (s0 > 0: the float steps go on from the
 * stored sums, in the reference's order). Per row and half n of a
 * super-block: [ql | qh] make q01, elements 128n .. 128n + 63, and q23,
 * 128n + 64 .. 128n + 127, whose activations are contiguous; a 128-bit
 * lane L holds sub-block 8n + L (q01) or 8n + 4 + L (q23), so packed:
 * [sub 8n + L x 4 | sub 8n + 4 + L x 4]. The 32 qh bytes of a half,
 * broadcast to both 256-bit halves and masked 0x33 (low) / 0xcc (high),
 * give q01's two bits by a shift left 4 / 2 and q23's by none / a shift
 * right 2, with bits 6 and 7 zero, so one VPTERNLOGD selects the result. */
KG_INLINE void kz_q6_rows(const struct kern_gemm_args *a, size_t o, int R, size_t end,
			  const __m512i *bias, size_t s0, size_t s1, int pk)
{
	const size_t bs = sizeof(struct kern_block_q6_k), st = a->w_stride;
	const size_t step = kg_step(bs, pk);
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	/* bytes 0..31: 0x33, 32..63: 0xcc; words 0..15: 4, 16..31: 2 */
	const __m512i hmask = _mm512_inserti64x4(_mm512_set1_epi8(0x33), _mm256_set1_epi8((char)0xcc), 1);
	const __m512i hshl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
	const struct kern_block_q8_k *x = a->xk;
	const char *w[KG_R];
	const size_t ah = pk ? kern_avx512_pack_ahead() : KG_AHEAD;
	const int pf = o + (size_t)(R - 1) + ah + 1 <= end && ah;
	__m512i pidx[4];
	__m128 acc = _mm_setzero_ps();

	kg_rows_at(a, o, R, pk, bs, w);
	if (s0 > 0)
		acc = kg_load_y(a, o, R);
	/* VPERMW indices of a pair's scales (row 2i: words 0..15 of sc[i],
	 * row 2i + 1: 16..31) for vector k (q01 / q23 of half k / 2): word w of
	 * lane L takes sub-block 8 (k / 2) + 4 (k % 2) + L of the row w / 4 */
	KG_UNROLL
	for (int k = 0; k < 4; k++)
		pidx[k] = kz_scale_idx(0, 8 * (k / 2) + 4 * (k % 2), 1, 1, 16);
	__m512i sc_n[2];
	kz_q6_scales(w, s0 * step + 192, sc_n);
	for (size_t s = s0; s < s1; s++) {
		const size_t sb = s * step;
		const int8_t *xq = x[s].qs;
		const __m512i *bv = bias + 4 * (s - s0);

		if (pf)
			kg_prefetch_rows(w, R, ah * st + sb, bs);
		const __m512i xv[4] = {kz_load(xq), kz_load(xq + 64), kz_load(xq + 128),
				       kz_load(xq + 192)};
		__m512i pacc[2];

		/* rows 2i, 2i + 1: their 16 int8 scales as int16, read one
		 * super-block ahead */
		const __m512i sc[2] = {sc_n[0], sc_n[1]};
		if (s + 1 < s1)
			kz_q6_scales(w, sb + step + 192, sc_n);
		KG_UNROLL
		for (int i = 0; i < 2; i++) {
			__m512i p[2][4]; /* [row of the pair][q01 / q23 of half n: 2n, 2n + 1] */

			pacc[i] = _mm512_setzero_si512();
			if (2 * i >= R)
				continue;
			KG_UNROLL
			for (int r2 = 0; r2 < 2; r2++) {
				const char *b = w[2 * i + r2] + sb;
				KG_UNROLL
				for (int n = 0; n < 2; n++) {
					const __m512i ql = kz_load(b + 64 * n);
					const __m512i hm = _mm512_and_si512(
						_mm512_broadcast_i64x4(kg_load(b + 128 + 32 * n)), hmask);
					/* (ql & 15) | (hm << [4 | 2]);  (ql >> 4 & 15) | (hm >> [0 | 2]) */
					const __m512i q01 = _mm512_ternarylogic_epi32(
						ql, _mm512_sllv_epi16(hm, hshl), m4, 0xE4);
					const __m512i q23 = _mm512_ternarylogic_epi32(
						_mm512_srli_epi16(ql, 4),
						_mm512_mask_srli_epi16(hm, 0xFFFF0000u, hm, 2), m4, 0xE4);
					p[r2][2 * n] = _mm512_dpbusd_epi32(bv[2 * n], q01, xv[2 * n]);
					p[r2][2 * n + 1] =
						_mm512_dpbusd_epi32(bv[2 * n + 1], q23, xv[2 * n + 1]);
				}
			}
			/* lane L: [row 2i x 4 | row 2i + 1 x 4] of one sub-block */
			KG_UNROLL
			for (int k = 0; k < 4; k++)
				pacc[i] = _mm512_dpwssd_epi32(pacc[i], _mm512_packs_epi32(p[0][k], p[1][k]),
							      _mm512_permutexvar_epi16(pidx[k], sc[i]));
		}
		/* lane L of pacc[i]: [row 2i, row 2i, row 2i + 1, row 2i + 1] */
		const __m512i t0 = _mm512_add_epi32(pacc[0], _mm512_shuffle_epi32(pacc[0], _MM_PERM_CDAB));
		const __m512i t1 = _mm512_add_epi32(pacc[1], _mm512_shuffle_epi32(pacc[1], _MM_PERM_CDAB));
		const __m512i u = _mm512_castps_si512(_mm512_shuffle_ps(
			_mm512_castsi512_ps(t0), _mm512_castsi512_ps(t1), _MM_SHUFFLE(2, 0, 2, 0)));
		const __m256i u2 = _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64(u, 1));
		const __m128i im = _mm_add_epi32(_mm256_castsi256_si128(u2), _mm256_extracti128_si256(u2, 1));
		acc = kg_step_d(acc, w, sb + 206, _mm_set1_ps(x[s].d), im);
	}
	kg_store(a, o, R, acc);
}

/* VPERMW indices of Q2_K's scale vector for rows 2i + r2 (r2 = 0, 1 of a
 * pair's 32 int16 scales) and pair jj of its value planes: word k in lane
 * L takes sub-block [0, 1, 8, 9][L] + 4 jj + 2 (k % 8 / 4). */
KG_INLINE __m512i kz_q2_idx(int r2, int jj)
{
	static const short base[4] = {0, 1, 8, 9};
	short v[32];

	for (int k = 0; k < 32; k++)
		v[k] = (short)(16 * r2 + base[k / 8] + 4 * jj + 2 * (k % 8 / 4));
	return _mm512_loadu_si512(v);
}

/* kz_q2_idx() of both rows of a pair and both plane pairs: idx[r2][jj]. */
KG_INLINE void kz_q2_idx_all(__m512i idx[2][2])
{
	KG_UNROLL
	for (int r = 0; r < 2; r++) {
		KG_UNROLL
		for (int jj = 0; jj < 2; jj++)
			idx[r][jj] = kz_q2_idx(r, jj);
	}
}

/* A super-block's activations for Q2_K's and Q3_K's planes: xv[j] holds
 * elements [32j .. 32j + 31 | 128 + 32j ..], as (qs >> 2j) & 3 holds the
 * values. */
KG_INLINE void kz_q2_acts(const int8_t *xq, __m512i xv[4])
{
	KG_UNROLL
	for (int j = 0; j < 4; j++)
		xv[j] = kz_join(kg_load(xq + 32 * j), kg_load(xq + 128 + 32 * j));
}

/* Q2_K scales of rows 2i, 2i + 1 as int16 (sc[i]) and the four rows'
 * minimums times the activation sums of xs, lane k: [row 0 .. row 3]. */
KG_INLINE void kz_q2_decode(const char *const w[KG_R], size_t off, const struct kern_block_q8_k *xs,
			    __m512i sc[2], __m512i *mins)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	const __m512i bs2 = _mm512_broadcast_i64x4(kg_load(xs->bsums));
	const __m512i tr = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	__m512i ms[2];

	KG_UNROLL
	for (int i = 0; i < 2; i++) {
		const __m256i raw =
			_mm256_setr_m128i(_mm_loadu_si128((const __m128i *)(w[2 * i] + off)),
					  _mm_loadu_si128((const __m128i *)(w[2 * i + 1] + off)));
		sc[i] = _mm512_cvtepu8_epi16(_mm256_and_si256(raw, m4));
		ms[i] = _mm512_madd_epi16(
			_mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4)), bs2);
	}
	/* lane r: row r's four partial sums, then transposed */
	const __m512i p = _mm512_add_epi32(_mm512_shuffle_i64x2(ms[0], ms[1], _MM_SHUFFLE(2, 0, 2, 0)),
					   _mm512_shuffle_i64x2(ms[0], ms[1], _MM_SHUFFLE(3, 1, 3, 1)));
	*mins = _mm512_permutexvar_epi32(tr, p);
}

/* Rows o .. o + R - 1 of Q2_K: 16 sub-blocks of 16, a 4-bit scale and
 * minimum each (scales[k] low / high nibble), 2-bit values, element
 * 128n + 32j + l in bits 2j, 2j + 1 of qs[32n + l]. A row's 64 qs bytes
 * are one ZMM; (qs >> 2j) & 3 holds elements [32j .. | 128 + 32j ..], a
 * 128-bit lane one sub-block ([2j, 2j + 1, 8 + 2j, 9 + 2j]), against the
 * activations joined the same way; planes j and j + 1 packed to int16. */
KG_INLINE void kz_q2_rows(const struct kern_gemm_args *a, size_t o, int R, size_t end)
{
	const size_t bs = sizeof(struct kern_block_q2_k), nsb = a->n_in / KERN_QKK;
	const size_t st = a->w_stride;
	const __m512i m3 = _mm512_set1_epi8(3);
	const struct kern_block_q8_k *x = a->xk;
	const char *w[KG_R];
	const size_t ah = KG_AHEAD;
	const int pf = kg_prefetch_ok(o, R, end);
	__m512i pidx[2][2];
	__m128 acc = _mm_setzero_ps();

	kg_rows(a, o, R, w);
	kz_q2_idx_all(pidx);
	__m512i sc_n[2], mins_n;
	kz_q2_decode(w, 0, x, sc_n, &mins_n);
	for (size_t s = 0; s < nsb; s++) {
		const size_t sb = s * bs;
		const int8_t *xq = x[s].qs;

		if (pf)
			kg_prefetch_rows(w, R, ah * st + sb, bs);
		const __m512i sc[2] = {sc_n[0], sc_n[1]}, mins = mins_n;
		if (s + 1 < nsb)
			kz_q2_decode(w, sb + bs, x + s + 1, sc_n, &mins_n);
		__m512i xv[4];
		kz_q2_acts(xq, xv);
		__m512i iacc[KG_R];

		KG_UNROLL
		for (int r = 0; r < KG_R; r++) {
			iacc[r] = _mm512_setzero_si512();
			if (r >= R)
				continue;
			const __m512i q = kz_load(w[r] + sb + 16);
			__m512i p[4];
			KG_UNROLL
			for (int j = 0; j < 4; j++)
				p[j] = _mm512_dpbusd_epi32(
					_mm512_setzero_si512(),
					_mm512_and_si512(j ? _mm512_srli_epi16(q, 2 * j) : q, m3), xv[j]);
			KG_UNROLL
			for (int jj = 0; jj < 2; jj++)
				iacc[r] = _mm512_dpwssd_epi32(
					iacc[r], _mm512_packs_epi32(p[2 * jj], p[2 * jj + 1]),
					_mm512_permutexvar_epi16(pidx[r % 2][jj], sc[r / 2]));
		}
		const __m256i im = kz_reduce4(iacc, mins);
		acc = kz_step_dmin(acc, im, w, sb + 80, x[s].d);
	}
	kg_store(a, o, R, acc);
}

/* Q3_K's 16 signed scales of rows 2i, 2i + 1 as int16 (sc[i]), from the
 * 16 bytes at off (two bytes before the 12 scale bytes: 16 from the
 * scales would pass the block's end). */
KG_INLINE void kz_q3_scales(const char *const w[KG_R], size_t off, __m512i sc[2])
{
	const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3);
	/* bytes 0..7, 8..15: s0..s7 twice; then s8..s11 in every dword */
	const __m256i lo_idx = _mm256_broadcastsi128_si256(
		_mm_setr_epi8(2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5, 6, 7, 8, 9));
	const __m256i hi_idx = _mm256_broadcastsi128_si256(
		_mm_setr_epi8(10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13));

	KG_UNROLL
	for (int i = 0; i < 2; i++) {
		const __m256i v =
			_mm256_setr_m128i(_mm_loadu_si128((const __m128i *)(w[2 * i] + off)),
					  _mm_loadu_si128((const __m128i *)(w[2 * i + 1] + off)));
		/* scale j: low 4 bits s[j] & 15 (j < 8) or s[j - 8] >> 4, high
		 * 2 bits (s[8 + j % 4] >> 2 (j / 4)) & 3 */
		const __m256i lo = _mm256_and_si256(
			_mm256_srlv_epi64(_mm256_shuffle_epi8(v, lo_idx), _mm256_setr_epi64x(0, 4, 0, 4)),
			m4);
		const __m256i hi = _mm256_and_si256(
			_mm256_srlv_epi32(_mm256_shuffle_epi8(v, hi_idx),
					  _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)),
			m3);
		const __m256i s8 = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)),
						   _mm256_set1_epi8(32));
		sc[i] = _mm512_cvtepi8_epi16(s8);
	}
}

/* Rows o .. o + R - 1 of Q3_K: Q2_K's value planes (qs at byte 32) with
 * the hmask bit as bit 2 (the unsigned value q + 4), the same lanes and
 * packing; the -4 starts the accumulator as Q6_K's -32 does. */
KG_INLINE void kz_q3_rows(const struct kern_gemm_args *a, size_t o, int R, size_t end)
{
	const size_t bs = sizeof(struct kern_block_q3_k), nsb = a->n_in / KERN_QKK;
	const size_t st = a->w_stride;
	const __m512i m3 = _mm512_set1_epi8(3), b4 = _mm512_set1_epi8(4);
	const struct kern_block_q8_k *x = a->xk;
	const char *w[KG_R];
	const size_t ah = KG_AHEAD;
	const int pf = kg_prefetch_ok(o, R, end);
	__m512i pidx[2][2];
	__m128 acc = _mm_setzero_ps();

	kg_rows(a, o, R, w);
	kz_q2_idx_all(pidx);
	__m512i sc_n[2];
	kz_q3_scales(w, 94, sc_n);
	for (size_t s = 0; s < nsb; s++) {
		const size_t sb = s * bs;
		const int8_t *xq = x[s].qs;

		if (pf)
			kg_prefetch_rows(w, R, ah * st + sb, bs);
		const __m512i sc[2] = {sc_n[0], sc_n[1]};
		if (s + 1 < nsb)
			kz_q3_scales(w, sb + bs + 94, sc_n);
		/* -(sums of 16 activations), for both rows of a scale pair */
		const __m512i nbs = _mm512_sub_epi16(_mm512_setzero_si512(),
						     _mm512_broadcast_i64x4(kg_load(x[s].bsums)));
		__m512i xv[4];
		kz_q2_acts(xq, xv);
		__m512i iacc[KG_R];

		KG_UNROLL
		for (int r = 0; r < KG_R; r++) {
			iacc[r] = _mm512_setzero_si512();
			if (r >= R)
				continue;
			const char *b = w[r] + sb;
			const __m512i q = kz_load(b + 32);
			const __m256i hm = kg_load(b);
			/* bit j of a byte: hmask bit j (first 32 bytes) or 4 + j */
			const __m512i hb = kz_join(hm, _mm256_srli_epi16(hm, 4));
			/* the -4 offset: 4 sc_k x -(sum of x_k), this row's half */
			iacc[r] = _mm512_maskz_dpwssd_epi32(r % 2 ? 0xFF00 : 0x00FF, iacc[r],
							    _mm512_slli_epi16(sc[r / 2], 2), nbs);
			__m512i p[4];
			KG_UNROLL
			for (int j = 0; j < 4; j++) {
				const __m512i hj = j < 2   ? _mm512_slli_epi16(hb, 2 - j)
						   : j == 2 ? hb
							    : _mm512_srli_epi16(hb, 1);
				/* (q >> 2j & 3) | (hj & 4) */
				const __m512i u = _mm512_ternarylogic_epi32(
					j ? _mm512_srli_epi16(q, 2 * j) : q, m3,
					_mm512_and_si512(hj, b4), 0xEA);
				p[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, xv[j]);
			}
			KG_UNROLL
			for (int jj = 0; jj < 2; jj++)
				iacc[r] = _mm512_dpwssd_epi32(
					iacc[r], _mm512_packs_epi32(p[2 * jj], p[2 * jj + 1]),
					_mm512_permutexvar_epi16(pidx[r % 2][jj], sc[r / 2]));
		}
		const __m256i im = kz_reduce4(iacc, _mm512_setzero_si512());
		acc = kg_step_d(acc, w, sb + 106, _mm_set1_ps(x[s].d), _mm256_castsi256_si128(im));
	}
	kg_store(a, o, R, acc);
}

#endif
