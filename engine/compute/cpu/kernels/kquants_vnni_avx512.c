/*
 * kquants_vnni_avx512.c - Q4_K, Q5_K and Q6_K weights times 2+ tokens with
 * AVX-512 VNNI (VPDPBUSD on ZMM), the tokens quantized as the one-token
 * GEMV takes them (kern_block_q8_k: int8 per 256, one f32 scale D, sums
 * per 16; args.xk, n_in / 256 blocks per token). Each (row, token) result
 * is the GEMV's (kquants_gemv.h, specified by kquants_gemv_ref.c) bit for
 * bit, so a token's logits never depend on its batch: per super-block the
 * same exact int32 sums, then the same float steps in the same order,
 *   Q4_K/Q5_K: isum = sum_j sc_j S_j, msum = sum_j m_j (sum of x_j)
 *              acc = acc + (d D) isum;  acc = acc - (dmin D) msum
 *   Q6_K:      isum = sum_k sc_k (S_k - 32 (sum of x_k))  (16 each)
 *              acc = acc + (d D) isum
 * (separate multiplies and adds: no fused multiply-add, which would round
 * once where the GEMV rounds twice).
 *
 * The weights are read in their file layout or packed (kernels.h
 * KERN_PACKED: Q5_K in groups of 4 rows, Q4_K and Q6_K of 16 with rows in
 * dword lanes already; kv_rows says where a tile's rows and super-blocks
 * are), 16 rows a tile, each
 * super-block's bytes transposed so that dword lane r of vector c holds
 * elements 4c..4c+3 of row r; a token's 32-block is then 8 VPDPBUSD
 * against its words broadcast, giving the 16 rows' exact sums in lanes,
 * each sub-block's sum times its scale by one VPMULLD (the scales in row
 * lanes as int32; Q4_K: its two 16-product halves by one VPDPWSSD each,
 * kv__k4_blk(), or in the streaming tile one VPMULLD by a scale
 * difference on a running sum, kv__tile_k4()), the minimums by VPDPWSSD
 * on int16 pairs. Up to 8 tokens (batched decode; Q4_K/Q5_K up to 16, in
 * two passes over the tile), a super-block's values are used by the
 * tile's tokens as they are unpacked (Q4_K/Q5_K kv__tile_k4, Q6_K
 * kv__tile_s);
 * more (prefill), a tile's
 * super-blocks are unpacked KV_KC at a time into a panel (values, integer
 * scales, d and dmin: ~41 KiB, L1/L2) that every group of up to 8 tokens
 * reads (kv__tile_p); a group's accumulators go through y between chunks
 * (an exact store and reload). Packed Q6_K up to KV_L6_TOK tokens has no
 * panel: its rows are in dword lanes already, so each group unpacks the
 * group's bytes where they lie (3 loads and 9 operations a sub-block,
 * kv__q6l_sub), cheaper than the panel's stores and reloads for up to 4
 * groups. The transpose helpers are
 * qvnni_avx512.h's (the Q8_0/Q4_0 tiles of kernels_qvnni_avx512.c); the
 * row loads and the super-blocks' unpacking, which both paths share, are
 * kquants_vnni_avx512.h's, and the panels' packing is
 * kquants_vnni_pack_avx512.c's.
 */
#if defined(__x86_64__)
#include "kquants_vnni_avx512.h"

/* acc + the int16 pairs of u times those of the dword at p broadcast. */
QV_INLINE __m512i kv__dpwssd_bcst(__m512i acc, __m512i u, const int32_t *p)
{
	__asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*p));
	return acc;
}

/* Where a tile goes: rows o .. o + 15 (stride st, or row o sixteen times
 * when st = 0), results stored for the lanes in `keep`; pk: the rows are
 * packed (o then a multiple of 4 unless st = 0; packed Q4_K and Q6_K: of
 * 16, st never 0, keep all, kv__rows_of()). */
struct kv_at {
	size_t o, st;
	__mmask16 keep;
	int pk;
	/* Q4_K/Q5_K streaming: the tokens' kv__k4_mp() sums, token t's of
	 * super-block s at mp[s * mpn + t], made once a call (kv__gemm());
	 * NULL: the tile makes them */
	const int32_t (*mp)[4];
	size_t mpn;
};

/* The tile's rows (kv_rows) for blocks of bs bytes. Packed Q4_K and Q6_K
 * (groups of KERN_K4L_ROWS = KERN_Q6L_ROWS = 16, kern_avx512_pack_q4_k(),
 * _q6_k()): the tile is one whole group, since kernels_matmul.c gives
 * packed rows only in multiples of pack_rows (o a multiple of 16, never a
 * tail tile or a lone row). */
QV_INLINE struct kv_rows kv__rows_of(const struct kern_gemm_args *a, struct kv_at at, size_t bs)
{
	const char *w = (const char *)a->w;
	/* Q5_K's kern_pack_groups16(): 16-byte lanes */
	const size_t u = bs == sizeof(struct kern_block_q4_k) || bs == sizeof(struct kern_block_q5_k)
			 ? 16
			 : bs;

	if (!at.pk)
		return (struct kv_rows){w + at.o * a->w_stride, at.st, 4 * at.st, bs, 1, 0};
	if (bs == sizeof(struct kern_block_q6_k) || bs == sizeof(struct kern_block_q4_k)) {
		assert(at.st != 0 && at.o % 16 == 0 && at.keep == 0xffff);
		return bs == sizeof(struct kern_block_q4_k) ? kv_rows_k4l(w + at.o * a->w_stride)
							    : kv_rows_q6l(w + at.o * a->w_stride);
	}
	return (struct kv_rows){w + (at.o & ~(size_t)3) * a->w_stride + (at.o & 3) * u,
				at.st ? u : 0, 4 * at.st, 4 * bs, bs / u == 1 ? 1 : 4, at.o & 3};
}

/* The tokens' Q8_K blocks of super-block s: q[i] = token i's values of
 * 32-block b. */
QV_INLINE void kv__q(const struct kern_block_q8_k *const xk[], size_t s, int b, int T,
		     const int8_t *q[])
{
	QV_UNROLL
	for (int i = 0; i < T; i++)
		q[i] = xk[i][s].qs + 32 * b;
}

/* Q4_K/Q5_K, one 32-block (values w, scale sc in row lanes): isum[i] +=
 * sc x (the exact dot with token i's values q[i]), two chains of 16
 * products. Q4_K: each chain's sum is within int16 (16 x 15 x 128 =
 * 30720), so as words it is (sum, its sign) and one VPDPWSSD by sc (a
 * dword 0..63: words sc, 0) adds sc x sum exactly: two VPDPWSSD in place
 * of two VPADDD and a VPMULLD (two operations on Intel's ports 0 and 5,
 * where every ZMM operation here goes). Q5_K's reach 16 x 31 x 128. */
QV_INLINE void kv__k4_blk(const __m512i w[8], __m512i sc, const int8_t *const q[], int T,
			  __m512i isum[], int five)
{
	QV_UNROLL
	for (int i = 0; i < T; i++) {
		__m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();

		QV_UNROLL
		for (int c = 0; c < 4; c++) {
			s0 = qv__dpbusd_bcst(s0, w[c], q[i] + 4 * c);
			s1 = qv__dpbusd_bcst(s1, w[c + 4], q[i] + 16 + 4 * c);
		}
		if (five) {
			isum[i] = _mm512_add_epi32(isum[i],
						   _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), sc));
		} else {
			isum[i] = _mm512_dpwssd_epi32(isum[i], s0, sc);
			isum[i] = _mm512_dpwssd_epi32(isum[i], s1, sc);
		}
	}
}

/* Q4_K/Q5_K: token x's sums per 32 of its super-block as int16 pairs
 * (|sum| <= 4096), mp[p] = sums 2p, 2p + 1, for kv__k4_step(). */
QV_INLINE void kv__k4_mp(const struct kern_block_q8_k *x, int32_t mp[4])
{
	const __m256i b = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums),
					    _mm256_set1_epi16(1));
	_mm_store_si128((__m128i *)mp,
			_mm_packs_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1)));
}

/* Q4_K/Q5_K, super-block s of one token (x its Q8_K block, mp its sums:
 * kv__k4_mp(); header v: kv__k4_head()): the minimums' term of the GEMV's
 * second float step, (dmin D) x their sum. */
QV_INLINE __m512 kv__k4_fmin(const __m512i *v, const struct kern_block_q8_k *x,
			     const int32_t mp[4])
{
	__m512i msum = _mm512_setzero_si512();

	QV_UNROLL
	for (int p = 0; p < 4; p++)
		msum = kv__dpwssd_bcst(msum, v[8 + p], &mp[p]);
	return _mm512_mul_ps(_mm512_mul_ps(_mm512_castsi512_ps(v[13]), _mm512_set1_ps(x->d)),
			     _mm512_cvtepi32_ps(msum));
}

/* The GEMV's two float steps on acc: + (d D) isum, - fm (kv__k4_fmin()). */
QV_INLINE __m512 kv__k4_fstep(__m512 d, const struct kern_block_q8_k *x, __m512i isum, __m512 fm,
			      __m512 acc)
{
	const __m512 dk = _mm512_mul_ps(d, _mm512_set1_ps(x->d));

	return _mm512_sub_ps(_mm512_add_ps(acc, _mm512_mul_ps(dk, _mm512_cvtepi32_ps(isum))), fm);
}

/* Q4_K/Q5_K, the end of super-block s for one token: the minimums' sum,
 * then the GEMV's two float steps on acc. */
QV_INLINE __m512 kv__k4_step(const __m512i *v, const struct kern_block_q8_k *x,
			     const int32_t mp[4], __m512i isum, __m512 acc)
{
	return kv__k4_fstep(_mm512_castsi512_ps(v[12]), x, isum, kv__k4_fmin(v, x, mp), acc);
}

/* kv__k4_step() for the T tokens. */
QV_INLINE void kv__k4_end(const __m512i *v, const struct kern_block_q8_k *const xk[], size_t s,
			  int T, const __m512i isum[], __m512 acc[])
{
	QV_UNROLL
	for (int i = 0; i < T; i++) {
		int32_t mp[4] __attribute__((aligned(16)));

		kv__k4_mp(&xk[i][s], mp);
		acc[i] = kv__k4_step(v, &xk[i][s], mp, isum[i], acc[i]);
	}
}

/* Q6_K: -32 x the tokens' sums per 16 of super-block s, the chains'
 * starts. */
QV_INLINE void kv__q6_off(const struct kern_block_q8_k *const xk[], size_t s, int T,
			  int32_t off[][16])
{
	QV_UNROLL
	for (int i = 0; i < T; i++) {
		const __m512i b = _mm512_cvtepi16_epi32(
			_mm256_loadu_si256((const __m256i *)xk[i][s].bsums));
		_mm512_store_si512(off[i],
				   _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(b, 5)));
	}
}

/* Q6_K, one 32-block b (values w; scales sc0, sc1 of its halves):
 * isum[i] += sc_h x (dot of half h - 32 x its sum), both halves. */
QV_INLINE void kv__q6_blk(const __m512i w[8], __m512i sc0, __m512i sc1, const int8_t *const q[],
			  const int32_t off[][16], int b, int T, __m512i isum[])
{
	QV_UNROLL
	for (int i = 0; i < T; i++) {
		__m512i s0 = _mm512_set1_epi32(off[i][2 * b]), s1 = _mm512_set1_epi32(off[i][2 * b + 1]);

		QV_UNROLL
		for (int c = 0; c < 4; c++) {
			s0 = qv__dpbusd_bcst(s0, w[c], q[i] + 4 * c);
			s1 = qv__dpbusd_bcst(s1, w[c + 4], q[i] + 16 + 4 * c);
		}
		isum[i] = _mm512_add_epi32(isum[i], _mm512_add_epi32(_mm512_mullo_epi32(s0, sc0),
								     _mm512_mullo_epi32(s1, sc1)));
	}
}

/* Q6_K, the end of super-block s: the GEMV's float step. */
QV_INLINE void kv__q6_end(__m512 d, const struct kern_block_q8_k *const xk[], size_t s, int T,
			  const __m512i isum[], __m512 acc[])
{
	QV_UNROLL
	for (int i = 0; i < T; i++) {
		const __m512 dk = _mm512_mul_ps(d, _mm512_set1_ps(xk[i][s].d));
		acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(dk, _mm512_cvtepi32_ps(isum[i])));
	}
}

/* Tokens [t, t + T) against the panel of the tile `at`, super-blocks
 * [s0, s0 + n). The first group (t = 0) prefetches the same super-blocks
 * of the next tile into L2 as it goes, for the next pack, an eighth of a
 * super-block's lines before each 32-block: as one burst a super-block
 * (53 lines of Q6_K) the pack waited on the stream, a 16-token Q6_K step
 * 156 -> 140 ms of CPU spread (Zen 4, LEVELS.md, sbk18). kind: 0 Q4_K,
 * 1 Q5_K, 2 Q6_K; 3 packed Q6_K without the panel (pn unread: the values
 * and scales unpacked from the group's super-block at each 32-block, the
 * same integers as kv__q6u_sb() stores); bs its block size. */
QV_INLINE void kv__tile_p(const struct kern_gemm_args *a, const struct kv_panel *pn,
			  struct kv_at at, size_t t, size_t s0, size_t n, int T, int kind, size_t bs)
{
	const size_t nsb = a->n_in / KERN_QKK;
	const char *next = (const char *)a->w + (at.o + QV_ROWS) * a->w_stride;
	const struct kern_block_q8_k *xk[KV_TOK];
	__m512 acc[KV_TOK];

	QV_UNROLL
	for (int i = 0; i < T; i++) {
		xk[i] = a->xk + (t + i) * nsb;
		acc[i] = s0 == 0 ? _mm512_setzero_ps()
				 : _mm512_maskz_loadu_ps(at.keep, a->y + (t + i) * a->y_stride + at.o);
	}
	for (size_t j = 0; j < n; j++) {
		const size_t s = s0 + j;
		const __m512i *v = kind == 3 ? NULL : pn->v[j];
		/* kind 3: the packed Q6_K group's super-block s itself */
		const char *g6 = (const char *)a->w + at.o * a->w_stride + s * KERN_Q6L_SB;
		__m512i isum[KV_TOK];
		int32_t off[KV_TOK][16] __attribute__((aligned(64)));

		QV_UNROLL
		for (int i = 0; i < T; i++)
			isum[i] = _mm512_setzero_si512();
		if (kind >= 2)
			kv__q6_off(xk, s, T, off);
		QV_UNROLL
		for (int b = 0; b < 8; b++) {
			__m512i w[8];
			const int8_t *q[KV_TOK];

			if (t == 0) {
				QV_UNROLL
				for (size_t pf = b * QV_ROWS * bs / 8 / 64 * 64;
				     pf < (b + 1) * QV_ROWS * bs / 8; pf += 64)
					_mm_prefetch(next + QV_ROWS * s * bs + pf, _MM_HINT_T1);
			}
			kv__q(xk, s, b, T, q);
			if (kind == 3) {
				kv__q6l_sub(g6 + KERN_Q6L_V(2 * b, 0), w);
				kv__q6l_sub(g6 + KERN_Q6L_V(2 * b + 1, 0), w + 4);
				kv__q6_blk(w, kv__q6l_sc(g6, 2 * b), kv__q6l_sc(g6, 2 * b + 1), q, off, b,
					   T, isum);
				continue;
			}
			QV_UNROLL
			for (int c = 0; c < 8; c++)
				w[c] = _mm512_load_si512(&pn->w[j][b][c]);
			if (kind == 2)
				kv__q6_blk(w, v[2 * b], v[2 * b + 1], q, off, b, T, isum);
			else
				kv__k4_blk(w, v[b], q, T, isum, kind == 1);
		}
		if (kind == 3)
			kv__q6_end(kv__q6l_d(g6), xk, s, T, isum, acc);
		else if (kind == 2)
			kv__q6_end(_mm512_castsi512_ps(v[16]), xk, s, T, isum, acc);
		else
			kv__k4_end(v, xk, s, T, isum, acc);
	}
	QV_UNROLL
	for (int i = 0; i < T; i++)
		_mm512_mask_storeu_ps(a->y + (t + i) * a->y_stride + at.o, at.keep, acc[i]);
}

/*
 * Q6_K in the file layout, up to KV_TOK tokens (batched decode; packed
 * rows, rows in dword lanes, go to kquants_q6p_avx512.c instead, which
 * takes every 1..8-token call with args.xk): the tile streams, each
 * super-block's values unpacked into registers and used at once (a panel
 * would store and reload them: as much work as the products for 2
 * tokens). The same integer sums and float steps as the panel path.
 */
QV_INLINE void kv__tile_s(const struct kern_gemm_args *a, struct kv_at at, int T, size_t bs)
{
	assert(!at.pk);
	const size_t nsb = a->n_in / KERN_QKK;
	const struct kv_rows rp = kv__rows_of(a, at, bs);
	/* the next tile's bytes, swept linearly */
	const char *next = (const char *)a->w + at.o * a->w_stride + QV_ROWS * at.st;
	const struct kern_block_q8_k *xk[KV_TOK];
	__m512 acc[KV_TOK];

	QV_UNROLL
	for (int i = 0; i < T; i++) {
		xk[i] = a->xk + i * nsb;
		acc[i] = _mm512_setzero_ps();
	}
	for (size_t s = 0; s < nsb; s++) {
		const size_t sb = s * rp.step;
		__m512i isum[KV_TOK];

		/* the next tile streams into L2 while this one computes */
		const char *npf = next + QV_ROWS * s * bs;
		QV_UNROLL
		for (size_t pf = 0; pf < QV_ROWS * bs; pf += 64)
			_mm_prefetch(npf + pf, _MM_HINT_T1);
		QV_UNROLL
		for (int i = 0; i < T; i++)
			isum[i] = _mm512_setzero_si512();
		int32_t off[KV_TOK][16] __attribute__((aligned(64)));
		__m512i h[4], g[4];

		kv__q6_off(xk, s, T, off);
		kv__rows16(rp, sb + 192, h);
		kv__rows16(rp, sb + 194, g); /* d in the top half of g[3] */
		QV_UNROLL
		for (int hf = 0; hf < 2; hf++) {
			__m512i qh[8], ql[8], qa[8], qb[8];

			kv__rows16(rp, sb + 128 + 32 * hf, qh);
			kv__rows16(rp, sb + 128 + 32 * hf + 16, qh + 4);
			QV_UNROLL
			for (int c = 0; c < 8; c++) {
				qa[c] = _mm512_and_si512(qh[c], _mm512_set1_epi8(0x33));
				qb[c] = _mm512_and_si512(_mm512_srli_epi16(qh[c], 2),
							 _mm512_set1_epi8(0x33));
			}
			QV_UNROLL
			for (int half = 0; half < 2; half++) {
				kv__rows16(rp, sb + 64 * hf + 32 * half, ql);
				kv__rows16(rp, sb + 64 * hf + 32 * half + 16, ql + 4);
				QV_UNROLL
				for (int hi = 0; hi < 2; hi++) {
					const int kk = half + 2 * hi, b = 4 * hf + kk;
					__m512i w[8];
					const int8_t *q[KV_TOK];

					QV_UNROLL
					for (int c = 0; c < 8; c++) {
						__m512i qv = kk == 0   ? _mm512_slli_epi16(qa[c], 4)
							     : kk == 1 ? _mm512_slli_epi16(qb[c], 4)
							     : kk == 2 ? qa[c]
									 : qb[c];
						w[c] = kv__q6(ql[c], hi, qv);
					}
					kv__q(xk, s, b, T, q);
					kv__q6_blk(w, kv__byte_s(h[(2 * b) / 4], (2 * b) % 4),
						   kv__byte_s(h[(2 * b + 1) / 4], (2 * b + 1) % 4), q, off,
						   b, T, isum);
				}
			}
		}
		kv__q6_end(kv__half(g[3], 1), xk, s, T, isum, acc);
	}
	QV_UNROLL
	for (int i = 0; i < T; i++)
		_mm512_mask_storeu_ps(a->y + i * a->y_stride + at.o, at.keep, acc[i]);
}

/* Q4_K/Q5_K sub-block scales as differences, bytes: d[0] byte j = sc_j -
 * sc_j+1 (j 0..3), d[1] byte j = sc_4+j - sc_5+j (sc_8 = 0), each in
 * -63..63; h: the super-block's first 16 bytes transposed (kv__k4_head()). */
QV_INLINE void kv__k4_dsc(const __m512i h[4], __m512i d[2])
{
	const __m512i m3f = _mm512_set1_epi32(0x3f3f3f3f), m0f = _mm512_set1_epi32(0x0f0f0f0f);
	const __m512i m30 = _mm512_set1_epi32(0x30303030);
	const __m512i sc0 = _mm512_and_si512(h[1], m3f);
	const __m512i sc1 = _mm512_ternarylogic_epi32(_mm512_and_si512(h[3], m0f),
						      _mm512_srli_epi32(h[1], 2), m30, 0xF8);

	d[0] = _mm512_sub_epi8(sc0, _mm512_or_si512(_mm512_srli_epi32(sc0, 8),
						    _mm512_slli_epi32(sc1, 24)));
	d[1] = _mm512_sub_epi8(sc1, _mm512_srli_epi32(sc1, 8));
}

#define KV_MPT 512 /* kv__gemm()'s table of the tokens' sums (8 KiB) */
/* kv__tile_k4()'s header of super-block sb (byte offset; x0: token 0's
 * Q8_K block of it, mpt: token 0's kv__k4_mp() sums, token i's at mpt[i],
 * or NULL: made here): the scales' differences (dd, kv__k4_dsc()), d (dv)
 * and the T tokens' minimums' terms (fm, kv__k4_fmin()). */
QV_INLINE void kv__k4_prep(struct kv_rows rp, size_t sb, int pl, const char *x0, size_t xst,
			   const int32_t (*mpt)[4], int T, __m512i dd[2], float *dv,
			   float (*fm)[16])
{
	__m512i h[4], v[14];

	kv__rows16x(rp, sb, h, pl);
	kv__k4_head_of(h, v);
	kv__k4_dsc(h, dd);
	_mm512_store_si512(dv, v[12]);
	QV_UNROLL
	for (int i = 0; i < T; i++) {
		const struct kern_block_q8_k *x = (const struct kern_block_q8_k *)(x0 + i * xst);
		int32_t mp[4] __attribute__((aligned(16)));

		if (!mpt)
			kv__k4_mp(x, mp);
		_mm512_store_ps(fm[i], kv__k4_fmin(v, x, mpt ? mpt[i] : mp));
	}
}

/*
 * Q4_K (Q5_K when `five`), up to KV_TOK tokens (batched decode),
 * streaming: the same sums as the panel path (kv__tile_p) with fewer
 * multiply-pipe operations. On Zen 4 VPDPBUSD,
 * VPDPWSSD, VPMULLD and VMULPS each take one of the two multiply pipes'
 * cycles (one ZMM operation a cycle in all), where the adds, logic,
 * shifts and shuffles go beside them (LEVELS.md, k4s19); kv__k4_blk()
 * spends 8 VPDPBUSD + 2 VPDPWSSD a 32-block and token. Here each token
 * keeps a running sum through the super-block's 32-blocks, T_b = S_0 +
 * .. + S_b (nc chains: two for 4 tokens or fewer, for the VPDPBUSD's
 * latency), never restarted inside it, and by Abel's summation
 *   sum_b sc_b S_b = sum_b (sc_b - sc_b+1) T_b   (sc_8 = 0)
 * one VPMULLD by the difference and a VPADDD after each 32-block give
 * the same exact isum (int32 wraps, but the sum fits: the same value):
 * 8 + 1 multiply-pipe operations. Each 32-block's values are made from
 * the pair's transposed bytes as they are used (one AND, or a shift and
 * an AND), so 8 chains + 8 isum + the pair's 8 byte vectors stay in
 * registers; above 4 tokens the float accumulators live in memory (one
 * load and store a super-block and token: spilled registers were worse,
 * a ZMM store also costs the multiply pipes time here). Q5_K's fifth
 * bits (its qh, 8 vectors transposed once a super-block) are or-ed in
 * per 32-block (a shift and a VPTERNLOGD a vector; at 8 tokens GCC
 * spills some, as fast as a copy stored and reloaded on packed rows and
 * faster on the file layout). kv__k4_blk() spent as
 * many multiply-pipe operations on Q5_K (8 + 1 VPMULLD) but held the
 * pair's 16 value vectors and qh's 8, ~80 spills a super-block
 * (gemm_q q5_kp 8 tokens, Zen 4, one thread: 264 -> 300-311 GFLOP/s,
 * LEVELS.md, k4t20). pl: 0 file layout, 1 packed Q5_K (kv__rows16x()'s
 * permuted lanes), 2 packed Q4_K (KERN_K4L_*: plain loads, rows in their
 * lanes; no inserts or transposes: gemm_q q4_kp 8 tokens 2048 x 2048, one
 * thread, Zen 4, 319-330 -> 339-341 GFLOP/s, LEVELS.md k4r23), whose
 * T = 1 is also the one-token GEMV: there the next tile is not
 * prefetched (as packed Q6_K's GEMV: the 1-sequence step's products
 * streamed 25% slower with it) and each super-block's first lines are
 * asked for into L1 at its start (Q6_K's Q6L_HEAD_PF; a tie against none
 * on Zen 4), and Intel's kern_avx512_pack_ahead() stream is kept.
 */
QV_INLINE void kv__tile_k4(const struct kern_gemm_args *a, struct kv_at at, int T, int pl,
			    int five)
{
	const size_t nsb = a->n_in / KERN_QKK;
	const size_t bs = five ? sizeof(struct kern_block_q5_k) : sizeof(struct kern_block_q4_k);
	const size_t qs = five ? 48 : 16; /* the values' offset in a super-block */
	const size_t xst = nsb * sizeof(struct kern_block_q8_k); /* token to token */
	const struct kv_rows rp = kv__rows_of(a, at, bs);
	const char *next = (const char *)a->w + at.o * a->w_stride + QV_ROWS * at.st;
	/* one token on packed Q4_K (the decode GEMV): Intel's stream
	 * kern_avx512_pack_ahead() rows' bytes ahead, up to the matrix's end */
	const char *wend = (const char *)a->w +
			   (a->y_stride > at.o + QV_ROWS ? a->y_stride : at.o + QV_ROWS) * a->w_stride;
	const size_t pfo = T == 1 && pl == 2 ? kern_avx512_pack_ahead() * a->w_stride : 0;
	const int nc = T <= 4 ? 2 : 1;
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	float accm[KV_TOK][16] __attribute__((aligned(64)));
	float fmb[2][KV_TOK][16] __attribute__((aligned(64)));
	float dvb[2][16] __attribute__((aligned(64)));
	float(*am)[16] = accm;
	__m512 acc[KV_TOK];
	__m512i ddn[2];

	/* opaque to GCC: the accumulators stay in memory above 4 tokens */
	__asm__("" : "+r"(am));
	QV_UNROLL
	for (int i = 0; i < T; i++) {
		acc[i] = _mm512_setzero_ps();
		if (T > 4)
			_mm512_store_ps(am[i], acc[i]);
	}
	if (T > 4)
		kv__k4_prep(rp, 0, pl, (const char *)a->xk, xst, at.mp, T, ddn, dvb[0], fmb[0]);
	for (size_t s = 0; s < nsb; s++) {
		const size_t sb = s * rp.step;
		const char *npf = next + QV_ROWS * s * bs;
		const char *x0 = (const char *)(a->xk + s); /* token 0's block */
		__m512i ch[2][KV_TOK], isum[KV_TOK], dd[2], qhr[8];
		float(*fm)[16] = fmb[T > 4 ? s & 1 : 0];
		const float *dv = dvb[T > 4 ? s & 1 : 0];

		QV_UNROLL
		for (int i = 0; i < T; i++) {
			ch[0][i] = ch[1][i] = _mm512_setzero_si512();
			isum[i] = _mm512_setzero_si512();
		}
#ifndef K4L_HEAD_PF
#define K4L_HEAD_PF 8
#endif
		if (T == 1 && pl == 2) {
			const char *b = rp.w + sb;

			for (int l = 0; l < K4L_HEAD_PF; l++)
				_mm_prefetch(b + 64 * l, _MM_HINT_T0);
			if (pfo && b + pfo + KERN_K4L_SB <= wend)
				for (size_t l = 0; l < KERN_K4L_SB; l += 64)
					_mm_prefetch(b + pfo + l, _MM_HINT_T1);
		}
		if (T <= 4) /* its own header first */
			kv__k4_prep(rp, sb, pl, x0, xst, at.mp ? at.mp + s * at.mpn : NULL, T, ddn,
				    dvb[0], fmb[0]);
		dd[0] = ddn[0];
		dd[1] = ddn[1];
		if (five) {
			kv__rows16x(rp, sb + 16 * rp.km, qhr, pl);
			kv__rows16x(rp, sb + 32 * rp.km, qhr + 4, pl);
		}
		QV_UNROLL
		for (int p = 0; p < 4; p++) {
			__m512i r[8];

			/* above 4 tokens the next super-block's header and
			 * minimums' terms halfway through this one
			 * (double-buffered; as fast as at its start, split
			 * over the pairs slower; at 2 tokens the double
			 * buffer cost 4%: LEVELS.md, k4z21) */
			if (T > 4 && p == 2 && s + 1 < nsb)
				kv__k4_prep(rp, sb + rp.step, pl, x0 + sizeof(struct kern_block_q8_k), xst,
					    at.mp ? at.mp + (s + 1) * at.mpn : NULL, T, ddn, dvb[(s + 1) & 1],
					    fmb[(s + 1) & 1]);

			/* the next tile into L2, 9 (Q5_K 11) lines, not 36
			 * at once: the burst stalled the loop on Emerald
			 * Rapids (a fifth of its samples on the prefetches;
			 * spread, the 8-token step's CPU -13%, LEVELS.md) */
			if (!(T == 1 && pl == 2))
				QV_UNROLL
				for (size_t pf = p * QV_ROWS * bs / 4 / 64 * 64;
				     pf < (p + 1) * QV_ROWS * bs / 4; pf += 64)
					_mm_prefetch(npf + pf, _MM_HINT_T1);
			kv__rows16x(rp, sb + (qs + 32 * p) * rp.km, r, pl);
			kv__rows16x(rp, sb + (qs + 16 + 32 * p) * rp.km, r + 4, pl);
			QV_UNROLL
			for (int hi = 0; hi < 2; hi++) {
				const int b = 2 * p + hi;
				const __m512i dsc = kv__byte_s(dd[b / 4], b % 4);

				QV_UNROLL
				for (int c = 0; c < 8; c++) {
					__m512i u = _mm512_and_si512(
						hi ? _mm512_srli_epi16(r[c], 4) : r[c], m4);
					/* the tokens' words through one pointer stepped
					 * by xst, opaque (GCC otherwise holds 8 pointers
					 * and spills them) */
					const char *q =
						x0 + offsetof(struct kern_block_q8_k, qs) + 32 * b + 4 * c;

					if (five) /* | bit b of qh, as bit 4 */
						u = _mm512_ternarylogic_epi32(
							u, kv__bit_to4(qhr[c], b),
							_mm512_set1_epi8(0x10), 0xF8);

					QV_UNROLL
					for (int i = 0; i < T; i++) {
						__m512i *cp = &ch[c / 4 % nc][i];

						*cp = qv__dpbusd_bcst(*cp, u, (const int8_t *)q);
						q += xst;
						__asm__("" : "+r"(q));
					}
				}
				QV_UNROLL
				for (int i = 0; i < T; i++) {
					const __m512i t =
						nc == 2 ? _mm512_add_epi32(ch[0][i], ch[1][i]) : ch[0][i];

					isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(t, dsc));
					/* in order: GCC would otherwise sum the products
					 * late and hold (spill) them */
					__asm__("" : "+v"(isum[i]));
				}
			}
		}
		QV_UNROLL
		for (int i = 0; i < T; i++) {
			const struct kern_block_q8_k *x = (const struct kern_block_q8_k *)x0;
			const __m512 d = _mm512_load_ps(dv);

			if (T > 4)
				_mm512_store_ps(am[i],
						kv__k4_fstep(d, x, isum[i], _mm512_load_ps(fm[i]),
							     _mm512_load_ps(am[i])));
			else
				acc[i] = kv__k4_fstep(d, x, isum[i], _mm512_load_ps(fm[i]), acc[i]);
			x0 += xst;
			__asm__("" : "+r"(x0));
		}
	}
	QV_UNROLL
	for (int i = 0; i < T; i++) {
		if (T > 4)
			acc[i] = _mm512_load_ps(am[i]);
		if (pl == 1) /* rows back to their lanes */
			acc[i] = _mm512_permutexvar_ps(kv__lane_row(), acc[i]);
		_mm512_mask_storeu_ps(a->y + i * a->y_stride + at.o, at.keep, acc[i]);
	}
}

typedef void (*kv_stream_fn)(const struct kern_gemm_args *a, struct kv_at at);

#define KV_STREAM_FN(name, T, kind, bs)                                                     \
	static __attribute__((noinline)) void name(const struct kern_gemm_args *a,            \
						   struct kv_at at)                           \
	{                                                                                   \
		/* packed Q5_K: 64-byte units; packed Q4_K: rows in dword lanes */        \
		const int pl = at.pk && at.st;                                              \
		if (kind == 0 && pl)                                                        \
			kv__tile_k4(a, at, T, 2, kind);                                     \
		else if (kind != 2 && pl)                                                   \
			kv__tile_k4(a, at, T, 1, kind);                                     \
		else if (kind != 2)                                                         \
			kv__tile_k4(a, at, T, 0, kind);                                     \
		else                                                                        \
			kv__tile_s(a, at, T, bs);                                           \
	}
#define KV_STREAM_FNS(pre, kind, bs)                                                        \
	KV_STREAM_FN(pre##1, 1, kind, bs)                                                   \
	KV_STREAM_FN(pre##2, 2, kind, bs)                                                   \
	KV_STREAM_FN(pre##3, 3, kind, bs)                                                   \
	KV_STREAM_FN(pre##4, 4, kind, bs)                                                   \
	KV_STREAM_FN(pre##5, 5, kind, bs)                                                   \
	KV_STREAM_FN(pre##6, 6, kind, bs)                                                   \
	KV_STREAM_FN(pre##7, 7, kind, bs)                                                   \
	KV_STREAM_FN(pre##8, 8, kind, bs)                                                   \
	static const kv_stream_fn pre[KV_TOK + 1] = {NULL,    pre##1, pre##2, pre##3, pre##4, \
						     pre##5, pre##6, pre##7, pre##8};
KV_STREAM_FNS(kv__s4k_, 0, sizeof(struct kern_block_q4_k))
KV_STREAM_FNS(kv__s5k_, 1, sizeof(struct kern_block_q5_k))
KV_STREAM_FNS(kv__s6k_, 2, sizeof(struct kern_block_q6_k))

typedef void (*kv_panel_fn)(const struct kern_gemm_args *a, const struct kv_panel *pn,
			    struct kv_at at, size_t t, size_t s0, size_t n);

/* One function per (type, token count), accumulators in registers. */
#define KV_PANEL_FN(name, T, kind, bs)                                                      \
	static __attribute__((noinline)) void name(const struct kern_gemm_args *a,            \
						   const struct kv_panel *pn, struct kv_at at, \
						   size_t t, size_t s0, size_t n)             \
	{                                                                                   \
		kv__tile_p(a, pn, at, t, s0, n, T, kind, bs);                               \
	}
#define KV_PANEL_FNS(pre, kind, bs)                                                         \
	KV_PANEL_FN(pre##1, 1, kind, bs)                                                    \
	KV_PANEL_FN(pre##2, 2, kind, bs)                                                    \
	KV_PANEL_FN(pre##3, 3, kind, bs)                                                    \
	KV_PANEL_FN(pre##4, 4, kind, bs)                                                    \
	KV_PANEL_FN(pre##5, 5, kind, bs)                                                    \
	KV_PANEL_FN(pre##6, 6, kind, bs)                                                    \
	KV_PANEL_FN(pre##7, 7, kind, bs)                                                    \
	KV_PANEL_FN(pre##8, 8, kind, bs)                                                    \
	static const kv_panel_fn pre[KV_TOK + 1] = {NULL,    pre##1, pre##2, pre##3, pre##4, \
						    pre##5, pre##6, pre##7, pre##8};
KV_PANEL_FNS(kv__p4k_, 0, sizeof(struct kern_block_q4_k))
KV_PANEL_FNS(kv__p5k_, 1, sizeof(struct kern_block_q5_k))
KV_PANEL_FNS(kv__p6k_, 2, sizeof(struct kern_block_q6_k))
KV_PANEL_FNS(kv__l6k_, 3, sizeof(struct kern_block_q6_k))
/* Packed Q6_K up to this many tokens: kv__l6k_, no panel. Each token group
 * unpacks the values again (9 operations a 4 vectors, ~18 a 32-block
 * against its 64 VPDPBUSD at 8 tokens) where the panel stores 81 vectors
 * a super-block (~41 KiB a chunk, past L1) and reloads them: gemm_q q6_kp
 * 2048 x 2048, one thread, Zen 4: 9 tokens 258 against 218 GFLOP/s, 16
 * 294 / 263, 32 297 / 286, 48 a tie, 512 234 / 267 (LEVELS.md, q6v22). */
#define KV_L6_TOK 32

/* One tile `at`, every token: up to KV_TOK tokens the streaming tile;
 * Q4_K/Q5_K up to twice that (batched decode of 9..16 sequences) the
 * streaming tile twice over the same rows, the tokens halved (the second
 * pass reads the tile from L1/L2): a panel packed for two groups cost a
 * quarter of their time in the packing (gemm_q q4_kp 16, 2048 x 2048, one
 * thread: 257 against 292 GFLOP/s; 9 tokens 206 / 272; LEVELS.md, sbk18);
 * more (prefill, Q6_K's 9..16): K chunks outside (packed once; packed
 * Q6_K up to KV_L6_TOK tokens: kv__l6k_, no panel), token groups inside.
 * Every token's sums and float steps are the same in either path. */
static void kv__tile(const kv_panel_fn *pfn, const kv_stream_fn *sfn, int kind,
		     const struct kern_gemm_args *a, struct kv_at at, struct kv_panel *pn)
{
	const size_t nsb = a->n_in / KERN_QKK;
	const size_t bs = kind == 2   ? sizeof(struct kern_block_q6_k)
			  : kind == 1 ? sizeof(struct kern_block_q5_k)
				      : sizeof(struct kern_block_q4_k);
	const struct kv_rows rp = kv__rows_of(a, at, bs);
	const kv_panel_fn *fn = kind == 2 && at.pk && a->n_tok <= KV_L6_TOK ? kv__l6k_ : pfn;

	if (a->n_tok <= KV_TOK) {
		sfn[a->n_tok](a, at);
		return;
	}
	if (kind != 2 && a->n_tok <= 2 * KV_TOK) {
		struct kern_gemm_args h = *a;

		h.n_tok = (a->n_tok + 1) / 2;
		sfn[h.n_tok](&h, at);
		h.xk += h.n_tok * nsb;
		h.y += h.n_tok * a->y_stride;
		if (at.mp)
			at.mp += h.n_tok;
		h.n_tok = a->n_tok - h.n_tok;
		sfn[h.n_tok](&h, at);
		return;
	}
	for (size_t s0 = 0; s0 < nsb; s0 += KV_KC) {
		size_t n = nsb - s0 < KV_KC ? nsb - s0 : KV_KC;

		if (fn == kv__l6k_)
			; /* no panel: the packed rows read as they are */
		else if (kind == 2)
			kern_avx512_kv_pack_q6(rp, s0, n, pn);
		else
			kern_avx512_kv_pack_k4(rp, s0, n, kind, pn);
		for (size_t t = 0; t < a->n_tok; t += KV_TOK) {
			size_t g = a->n_tok - t < KV_TOK ? a->n_tok - t : KV_TOK;
			fn[g](a, pn, at, t, s0, n);
		}
	}
}

/* Whole tiles of rows [o0, o1); rows past the last whole tile: the tile
 * ending at o1 (its first rows, computed again, are not stored); a matrix
 * under 16 rows: each row alone (stride 0). The lanes never mix, so a
 * row's result is the same in any tile position. Without args.xk (a
 * caller that made only the 32-blocks): the scalar reference. */
static void kv__gemm(const kv_panel_fn *pfn, const kv_stream_fn *sfn, int kind,
		     kern_gemm_fn ref, const struct kern_gemm_args *a, size_t o0, size_t o1, int pk)
{
	const size_t st = a->w_stride, nsb = a->n_in / KERN_QKK;
	struct kv_panel pn __attribute__((aligned(64)));
	int32_t mpt[KV_MPT][4] __attribute__((aligned(16)));
	const int32_t(*mp)[4] = NULL;
	size_t o = o0;

	/* packed rows always come with args.xk (kernels.c): the reference
	 * reads the file layout */
	assert(!pk || a->xk != NULL);
	if (a->xk == NULL) {
		ref(a, o0, o1);
		return;
	}
	/* the streaming tiles' tokens' sums once a call, not once a tile */
	if (kind != 2 && a->n_tok <= 2 * KV_TOK && a->n_tok * nsb <= KV_MPT) {
		for (size_t t = 0; t < a->n_tok; t++)
			for (size_t s = 0; s < nsb; s++)
				kv__k4_mp(&a->xk[t * nsb + s], mpt[s * a->n_tok + t]);
		mp = mpt;
	}
	for (; o + QV_ROWS <= o1; o += QV_ROWS)
		kv__tile(pfn, sfn, kind, a, (struct kv_at){o, st, 0xffff, pk, mp, a->n_tok}, &pn);
	if (o == o1)
		return;
	/* packed Q5_K: b is a multiple of 4, as o1 is; packed Q4_K and Q6_K
	 * never come here (o1 a multiple of 16) */
	if (o1 >= QV_ROWS) {
		size_t b = o1 - QV_ROWS;
		kv__tile(pfn, sfn, kind, a,
			 (struct kv_at){b, st, (__mmask16)(0xffffu << (o - b)), pk, mp, a->n_tok}, &pn);
		return;
	}
	for (; o < o1; o++)
		kv__tile(pfn, sfn, kind, a, (struct kv_at){o, 0, 1, pk, mp, a->n_tok}, &pn);
}

void kern_avx512_vnni_gemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kv__gemm(kv__p4k_, kv__s4k_, 0, kern_ref_gemm_q4_k, a, o0, o1, 0);
}

void kern_avx512_vnni_gemm_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kv__gemm(kv__p5k_, kv__s5k_, 1, kern_ref_gemm_q5_k, a, o0, o1, 0);
}

void kern_avx512_vnni_gemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kv__gemm(kv__p6k_, kv__s6k_, 2, kern_ref_gemm_q6_k, a, o0, o1, 0);
}

/* Packed rows (kernels.h KERN_PACKED): the same tiles, kv__rows_of()'s
 * addresses. */
void kern_avx512_vnni_pgemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kv__gemm(kv__p4k_, kv__s4k_, 0, kern_ref_gemm_q4_k, a, o0, o1, 1);
}

void kern_avx512_vnni_pgemm_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kv__gemm(kv__p5k_, kv__s5k_, 1, kern_ref_gemm_q5_k, a, o0, o1, 1);
}

void kern_avx512_vnni_pgemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	/* up to 8 tokens: kquants_q6p_avx512.c reads the form a row per lane */
	if (kern_avx512_q6p_small(a, o0, o1))
		return;
	kv__gemm(kv__p6k_, kv__s6k_, 2, kern_ref_gemm_q6_k, a, o0, o1, 1);
}
#endif
