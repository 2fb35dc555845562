/*
 * kquants_vnni_avx512.c - Q4_K, Q5_K and Q6_K weights times quantized
 * activations with AVX-512 VNNI (VPDPBUSD on ZMM), for every token count
 * (decode and prefill). The weights are read in their file layout, 16 rows
 * x up to 8 tokens a tile, each super-block of the 16 rows unpacked once for
 * all the tokens of the tile; more than 8 tokens (prefill), a tile is
 * unpacked once into a panel that every group of 8 tokens reads
 * (kv__panels). Both paths give each (row, token) the same float
 * operations in the same order, so a token's result never depends on its
 * batch. The model is the Q8_0/Q4_0 tile of
 * kernels_qvnni_avx512.c (whose transpose and broadcast helpers,
 * qvnni_avx512.h, this file uses).
 *
 * Rows in lanes: a block's bytes of 16 rows are transposed so that dword
 * lane r of vector c holds elements 4c..4c+3 of row r; a token's 32-block
 * is then 8 VPDPBUSD against its words broadcast, giving the 16 rows'
 * exact int32 sums in lanes with no reduction. All scale unpacking is per
 * 16 rows and super-block, shared by the tokens.
 *
 *   Q4_K (and Q5_K, its fifth bit or-ed in: 0..31): nibbles 0..15
 *     unsigned; per 32-block j of super-block s
 *     acc += float(S_j) * (d sc_j) * dx_j  -  (dmin m_j) * dx_j * sum(x_j)
 *   Q6_K: q = 0..63 unsigned (value q - 32), scale per 16 elements, so the
 *     two halves of a 32-block keep separate sums, each minus 32 x the
 *     token's sum over that half (computed once per token and super-block):
 *     acc += (float(S_lo) d sc_lo + float(S_hi) d sc_hi) * dx_j
 * The integer sums are exact (|S| <= 32 * 63 * 127); only the order of
 * float additions differs from quants_ref.c (tests/test_quants_simd.c
 * bounds it). Every (row, token) takes the same instruction sequence in
 * its lane whatever the token count and the tile (kv__gemm() for the
 * rows past the last whole tile), so GEMV and GEMM agree bit for bit.
 */
#if defined(__x86_64__)
#include "kernels.h"
#include "kernels_impl.h"
#include "qvnni_avx512.h"
#include "quants.h"

#define KV_TOK 8

/* A tile's 16 rows: row r at w + r * st (st = 0: all the same row). */
struct kv_rows {
	const char *w;
	size_t st;
};

/* Bytes `off` .. off + 15 of rows i, i + 4, i + 8, i + 12. */
QV_INLINE __m512i kv__load4(struct kv_rows rp, size_t off, int i)
{
	const char *p = rp.w + off;
	__m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(p + i * rp.st)));

	v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + (i + 4) * rp.st)), 1);
	v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + (i + 8) * rp.st)), 2);
	return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + (i + 12) * rp.st)), 3);
}

/* 16 bytes at `off` of the 16 rows, transposed: v[c] lane r = bytes
 * off + 4c .. off + 4c + 3 of row r. */
QV_INLINE void kv__rows16(struct kv_rows rp, size_t off, __m512i v[4])
{
	QV_UNROLL
	for (int i = 0; i < 4; i++)
		v[i] = kv__load4(rp, off, i);
	qv__transpose4(v);
}

/* The fp16 in the low (hi = 0) or high half of each dword lane, as float. */
QV_INLINE __m512 kv__half(__m512i v, int hi)
{
	if (hi)
		v = _mm512_srli_epi32(v, 16);
	return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

/* Byte k (0..3) of each dword lane, unsigned, as float. */
QV_INLINE __m512 kv__byte_u(__m512i v, int k)
{
	return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v, 8 * k),
						   _mm512_set1_epi32(0xff)));
}

/* Byte k (0..3) of each dword lane, signed, as float. */
QV_INLINE __m512 kv__byte_s(__m512i v, int k)
{
	return _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * k), 24));
}

/* The token's integer dot with one 32-block of the 16 rows: w[c] lane r
 * holds elements 4c..4c+3 of row r; two chains (elements 0..15 and
 * 16..31), returned separately. */
QV_INLINE void kv__dot32(const __m512i w[8], const int8_t *q, __m512i *lo, __m512i *hi)
{
	__m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();

	QV_UNROLL
	for (int c = 0; c < 4; c++) {
		s0 = qv__dpbusd_bcst(s0, w[c], q + 4 * c);
		s1 = qv__dpbusd_bcst(s1, w[c + 4], q + 16 + 4 * c);
	}
	*lo = s0;
	*hi = s1;
}

struct kv_tok {
	const struct kern_block_q8a *x;
	const float *xd;
	const int32_t *xs8;
};

/* Where a tile goes: rows o .. o + 15 (stride st, or row o sixteen times
 * when st = 0), results stored for the lanes in `keep`. */
struct kv_at {
	size_t o, st;
	__mmask16 keep;
};

QV_INLINE struct kv_rows kv__rows(const struct kern_gemm_args *a, struct kv_at at)
{
	struct kv_rows r = {(const char *)a->w + at.o * a->w_stride, at.st};

	return r;
}

QV_INLINE void kv__store(const struct kern_gemm_args *a, struct kv_at at, size_t t, __m512 v)
{
	_mm512_mask_storeu_ps(a->y + t * a->y_stride + at.o, at.keep, v);
}

/* Bit `from` of each byte of v moved to bit 4 (other bits: anything). */
QV_INLINE __m512i kv__bit_to4(__m512i v, int from)
{
	return from <= 4 ? _mm512_slli_epi16(v, 4 - from) : _mm512_srli_epi16(v, from - 4);
}

/* Q4_K/Q5_K header of super-block `sb` (byte offset) of the 16 rows: d sc_j
 * and dmin m_j of its eight 32-blocks, in row lanes (scales: quants.h). */
QV_INLINE void kv__k4_scales(struct kv_rows rp, size_t sb, __m512 dsc[8], __m512 mv[8])
{
	const __m512i m3f = _mm512_set1_epi32(0x3f3f3f3f), m0f = _mm512_set1_epi32(0x0f0f0f0f);
	const __m512i m30 = _mm512_set1_epi32(0x30303030);
	__m512i h[4];

	/* d, dmin, then the 12 scale bytes in h[1..3] */
	kv__rows16(rp, sb, h);
	const __m512 d = kv__half(h[0], 0), dmin = kv__half(h[0], 1);
	const __m512i sc0 = _mm512_and_si512(h[1], m3f);
	const __m512i mn0 = _mm512_and_si512(h[2], m3f);
	const __m512i sc1 = _mm512_or_si512(_mm512_and_si512(h[3], m0f),
					    _mm512_and_si512(_mm512_srli_epi32(h[1], 2), m30));
	const __m512i mn1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h[3], 4), m0f),
					    _mm512_and_si512(_mm512_srli_epi32(h[2], 2), m30));
	QV_UNROLL
	for (int j = 0; j < 4; j++) {
		dsc[j] = _mm512_mul_ps(d, kv__byte_u(sc0, j));
		dsc[j + 4] = _mm512_mul_ps(d, kv__byte_u(sc1, j));
		mv[j] = _mm512_mul_ps(dmin, kv__byte_u(mn0, j));
		mv[j + 4] = _mm512_mul_ps(dmin, kv__byte_u(mn1, j));
	}
}

/* 32-blocks 2p (u) and 2p + 1 (v) of the 16 rows, values in row lanes:
 * 32 bytes of each row at qs (byte offset of the super-block's qs), low
 * nibbles block 2p, high nibbles block 2p + 1; Q5_K (`five`) ors in the
 * fifth bit from qh (its 32 bytes transposed, kv__rows16). */
QV_INLINE void kv__k4_pair(struct kv_rows rp, size_t qs, int p, const __m512i qh[8], int five,
			   __m512i u[8], __m512i v[8])
{
	const __m512i m4 = _mm512_set1_epi8(0x0f);

	kv__rows16(rp, qs + 32 * p, u);
	kv__rows16(rp, qs + 16 + 32 * p, u + 4);
	QV_UNROLL
	for (int c = 0; c < 8; c++) {
		v[c] = _mm512_and_si512(_mm512_srli_epi16(u[c], 4), m4);
		u[c] = _mm512_and_si512(u[c], m4);
		if (five) { /* nibble | (bit 4 of the shifted qh) */
			const __m512i b4 = _mm512_set1_epi8(0x10);
			u[c] = _mm512_ternarylogic_epi32(u[c], kv__bit_to4(qh[c], 2 * p), b4, 0xF8);
			v[c] = _mm512_ternarylogic_epi32(v[c], kv__bit_to4(qh[c], 2 * p + 1), b4,
							 0xF8);
		}
	}
}

/* Q4_K, and Q5_K when `five`: the same header and qs, offset by qh (32
 * bytes: bit j of byte l is the fifth bit of element l of block j). */
QV_INLINE void kv__k4_tile(const struct kern_gemm_args *a, struct kv_at at, size_t t, int T,
			   int five)
{
	const size_t bs = five ? sizeof(struct kern_block_q5_k) : sizeof(struct kern_block_q4_k);
	const size_t qs_off = five ? 48 : 16, nsb = a->n_in / KERN_QKK;
	const struct kv_rows rp = kv__rows(a, at);
	const char *next = rp.w + QV_ROWS * at.st;
	struct kv_tok k[KV_TOK];
	__m512 acc[KV_TOK];

	QV_UNROLL
	for (int i = 0; i < T; i++) {
		k[i].x = (const struct kern_block_q8a *)((const char *)a->x + (t + i) * a->x_stride);
		k[i].xd = a->xd + (t + i) * a->xd_stride;
		k[i].xs8 = a->xs8 + (t + i) * a->xd_stride;
		acc[i] = _mm512_setzero_ps();
	}
	for (size_t s = 0; s < nsb; s++) {
		const size_t sb = s * bs;
		__m512 dsc[8], mv[8];
		float dxs[KV_TOK][8] __attribute__((aligned(32)));
		__m512i qh[8];

		/* the next tile streams into L2 while this one computes (into L1,
		 * T0, it evicted this tile: Q4_K_M decode 20.6 -> 32.4 tok/s, Q6_K
		 * 11.0 -> 16.7 on the Zen 4, 2 threads, moving it to T1) */
		QV_UNROLL
		for (size_t off = 0; off < QV_ROWS * bs; off += 64)
			_mm_prefetch(next + QV_ROWS * sb + off, _MM_HINT_T1);
		kv__k4_scales(rp, sb, dsc, mv);
		/* minimum term: dmin m_j * dx_j * sum(x_j), sum = xs8 / 8 exactly */
		QV_UNROLL
		for (int i = 0; i < T; i++) {
			__m256 sx = _mm256_cvtepi32_ps(_mm256_srai_epi32(
				_mm256_loadu_si256((const __m256i *)(k[i].xs8 + 8 * s)), 3));
			_mm256_store_ps(dxs[i], _mm256_mul_ps(sx, _mm256_loadu_ps(k[i].xd + 8 * s)));
			QV_UNROLL
			for (int j = 0; j < 8; j++)
				acc[i] = _mm512_fnmadd_ps(mv[j], _mm512_set1_ps(dxs[i][j]), acc[i]);
		}
		if (five) {
			kv__rows16(rp, sb + 16, qh);
			kv__rows16(rp, sb + 32, qh + 4);
		}
		/* pairs of 32-blocks: 32 bytes of each row, low nibbles block
		 * 2p, high nibbles block 2p + 1 */
		QV_UNROLL
		for (int p = 0; p < 4; p++) {
			__m512i u[8], v[8];

			kv__k4_pair(rp, sb + qs_off, p, qh, five, u, v);
			QV_UNROLL
			for (int i = 0; i < T; i++) {
				const struct kern_block_q8a *x = k[i].x + 8 * s + 2 * p;
				__m512i l0, l1, h0, h1;

				kv__dot32(u, x[0].qs, &l0, &l1);
				kv__dot32(v, x[1].qs, &h0, &h1);
				acc[i] = _mm512_fmadd_ps(
					_mm512_cvtepi32_ps(_mm512_add_epi32(l0, l1)),
					_mm512_mul_ps(dsc[2 * p], _mm512_set1_ps(x[0].d)), acc[i]);
				acc[i] = _mm512_fmadd_ps(
					_mm512_cvtepi32_ps(_mm512_add_epi32(h0, h1)),
					_mm512_mul_ps(dsc[2 * p + 1], _mm512_set1_ps(x[1].d)), acc[i]);
			}
		}
	}
	QV_UNROLL
	for (int i = 0; i < T; i++)
		kv__store(a, at, t + i, acc[i]);
}

/* 32 x the sums of the 16 halves of a token's 8 blocks of super-block s,
 * half h (block h / 2, elements 16 (h % 2) ..) at index 4 (h % 4) + h / 4:
 * bytes + 128 summed by VPSADBW per 8, pairs added, four vectors
 * interleaved; negated when `neg`. */
QV_INLINE void kv__half_sums(const struct kern_block_q8a *x, int32_t out[16], int neg)
{
	const __m512i x80 = _mm512_set1_epi8((char)0x80);
	__m512i v[4];

	QV_UNROLL
	for (int i = 0; i < 4; i++) {
		__m512i b = _mm512_inserti64x4(
			_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)x[2 * i].qs)),
			_mm256_loadu_si256((const __m256i *)x[2 * i + 1].qs), 1);
		b = _mm512_sad_epu8(_mm512_xor_si512(b, x80), _mm512_setzero_si512());
		/* dword 0 of each 128-bit lane: the sum of its 16 bytes */
		v[i] = _mm512_add_epi32(b, _mm512_shuffle_epi32(b, _MM_PERM_BADC));
	}
	__m512i ab = _mm512_unpacklo_epi32(v[0], v[1]), cd = _mm512_unpacklo_epi32(v[2], v[3]);
	__m512i r = _mm512_unpacklo_epi64(ab, cd);

	r = neg ? _mm512_sub_epi32(_mm512_set1_epi32(16 * 128), r)
		: _mm512_sub_epi32(r, _mm512_set1_epi32(16 * 128));
	r = _mm512_slli_epi32(r, 5);
	_mm512_storeu_si512(out, r);
}

#define KV_HALF(h) (4 * ((h) % 4) + (h) / 4)

/* Element values of one Q6_K 32-block: low four bits from l (shifted
 * down 4 if `lhi`), bits 4-5 from h, whose bits 6-7 are clear: one
 * VPTERNLOGD, (l & 0x0f) | (h & ~0x0f). */
QV_INLINE __m512i kv__q6(__m512i l, int lhi, __m512i h)
{
	if (lhi)
		l = _mm512_srli_epi16(l, 4);
	return _mm512_ternarylogic_epi32(l, h, _mm512_set1_epi8(0x0f), 0xE4);
}

/* Q6_K scales of super-block `sb` (byte offset) of the 16 rows: d sc_j of
 * its sixteen 16-element halves, in row lanes. Scales at offset 192, d in
 * the top of the dwords at 194 .. 209. */
QV_INLINE void kv__q6_scales(struct kv_rows rp, size_t sb, __m512 sc[16])
{
	__m512i h[4], g[4];

	kv__rows16(rp, sb + 192, h);
	kv__rows16(rp, sb + 194, g);
	const __m512 d = kv__half(g[3], 1);
	QV_UNROLL
	for (int j = 0; j < 16; j++)
		sc[j] = _mm512_mul_ps(d, kv__byte_s(h[j / 4], j % 4));
}

QV_INLINE void kv__q6k_tile(const struct kern_gemm_args *a, struct kv_at at, size_t t, int T)
{
	const size_t bs = sizeof(struct kern_block_q6_k), nsb = a->n_in / KERN_QKK;
	const struct kv_rows rp = kv__rows(a, at);
	const char *next = rp.w + QV_ROWS * at.st;
	struct kv_tok k[KV_TOK];
	__m512 acc[KV_TOK];

	QV_UNROLL
	for (int i = 0; i < T; i++) {
		k[i].x = (const struct kern_block_q8a *)((const char *)a->x + (t + i) * a->x_stride);
		k[i].xd = a->xd + (t + i) * a->xd_stride;
		acc[i] = _mm512_setzero_ps();
	}
	for (size_t s = 0; s < nsb; s++) {
		const size_t sb = s * bs;
		__m512 sc[16];
		int32_t hs[KV_TOK][16] __attribute__((aligned(64)));

		QV_UNROLL
		for (size_t off = 0; off < QV_ROWS * bs; off += 64)
			_mm_prefetch(next + QV_ROWS * sb + off, _MM_HINT_T1);
		kv__q6_scales(rp, sb, sc);
		QV_UNROLL
		for (int i = 0; i < T; i++)
			kv__half_sums(k[i].x + 8 * s, hs[i], 0);
		QV_UNROLL
		for (int n = 0; n < 2; n++) {
			__m512i qh[8], ql[8];

			kv__rows16(rp, sb + 128 + 32 * n, qh);
			kv__rows16(rp, sb + 128 + 32 * n + 16, qh + 4);
			/* qa: qh bits 0-1 and 4-5 (blocks kk 0, 2), qb: bits 2-3
			 * and 6-7 moved down two (kk 1, 3); the others clear */
			__m512i qa[8], qb[8];
			QV_UNROLL
			for (int c = 0; c < 8; c++) {
				qa[c] = _mm512_and_si512(qh[c], _mm512_set1_epi8(0x33));
				qb[c] = _mm512_and_si512(_mm512_srli_epi16(qh[c], 2),
							 _mm512_set1_epi8(0x33));
			}
			/* kk = 0, 2 from ql bytes 0..31, kk = 1, 3 from 32..63 */
			QV_UNROLL
			for (int half = 0; half < 2; half++) {
				kv__rows16(rp, sb + 64 * n + 32 * half, ql);
				kv__rows16(rp, sb + 64 * n + 32 * half + 16, ql + 4);
				QV_UNROLL
				for (int hi = 0; hi < 2; hi++) {
					const int kk = half + 2 * hi, blk = 4 * n + kk;
					__m512i w[8];

					QV_UNROLL
					for (int c = 0; c < 8; c++) {
						/* qh bits 2kk, 2kk + 1 to bits 4, 5 (what
						 * lands in bits 0-3 is not taken) */
						__m512i q = kk == 0   ? _mm512_slli_epi16(qa[c], 4)
							    : kk == 1 ? _mm512_slli_epi16(qb[c], 4)
							    : kk == 2 ? qa[c]
								      : qb[c];
						w[c] = kv__q6(ql[c], hi, q);
					}
					QV_UNROLL
					for (int i = 0; i < T; i++) {
						const struct kern_block_q8a *x = k[i].x + 8 * s + blk;
						__m512i s0, s1;

						kv__dot32(w, x->qs, &s0, &s1);
						s0 = _mm512_sub_epi32(
							s0, _mm512_set1_epi32(hs[i][KV_HALF(2 * blk)]));
						s1 = _mm512_sub_epi32(
							s1, _mm512_set1_epi32(hs[i][KV_HALF(2 * blk + 1)]));
						__m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(s0), sc[2 * blk]);
						f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), sc[2 * blk + 1], f);
						acc[i] = _mm512_fmadd_ps(f, _mm512_set1_ps(x->d), acc[i]);
					}
				}
			}
		}
	}
	QV_UNROLL
	for (int i = 0; i < T; i++)
		kv__store(a, at, t + i, acc[i]);
}

QV_INLINE void kv__q4k_tile(const struct kern_gemm_args *a, struct kv_at at, size_t t, int T)
{
	kv__k4_tile(a, at, t, T, 0);
}

QV_INLINE void kv__q5k_tile(const struct kern_gemm_args *a, struct kv_at at, size_t t, int T)
{
	kv__k4_tile(a, at, t, T, 1);
}

/*
 * Many tokens (prefill, more than KV_TOK): a 16-row tile's super-blocks
 * [s0, s0 + n) are unpacked once into a panel (the values of each 32-block
 * in row lanes, and the float scales: 40 KiB for KV_KC super-blocks, in
 * L1/L2), then every group of 8 tokens runs its dots from the panel with
 * plain loads, instead of each group transposing and unpacking the same
 * bytes again (the streaming tile's unpacking is ~30% of its work at 8
 * tokens). K goes by chunks of KV_KC super-blocks so the panel keeps its
 * size whatever the row length; a group's accumulators go through y
 * between chunks (an exact store and reload). Each (row, token) lane
 * takes the same float operations in the same order as in the streaming
 * tile above, so results are bit-identical to it (and to one token alone);
 * only integer work differs (one VPDPBUSD chain per 32-block, the Q6_K
 * offset as the chain's start), which is exact.
 */
#define KV_KC 8

struct kv_panel {
	__m512i w[KV_KC][8][8]; /* [super-block][32-block][c]: lane r = elements 4c.. of row r */
	__m512 sc[KV_KC][16];   /* Q4_K/Q5_K: d sc_j, then dmin m_j; Q6_K: d sc per 16 */
};

/* acc - m * (*x) (one rounding: _mm512_fnmadd_ps(m, set1(*x), acc)), the
 * scalar broadcast from memory: from a register GCC extracted each lane
 * with two shuffles. */
QV_INLINE __m512 kv__fnmadd_bcst(__m512 acc, __m512 m, const float *x)
{
	__asm__("vfnmadd231ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(m), "m"(*x));
	return acc;
}

/* Q4_K (Q5_K when `five`): super-blocks [s0, s0 + n) of rows [o, o + 16). */
static void kv__pack_k4(const struct kern_gemm_args *a, size_t o, size_t s0, size_t n, int five,
			struct kv_panel *pn)
{
	const size_t bs = five ? sizeof(struct kern_block_q5_k) : sizeof(struct kern_block_q4_k);
	const size_t qs_off = five ? 48 : 16;
	const struct kv_rows rp = {(const char *)a->w + o * a->w_stride, a->w_stride};

	for (size_t s = 0; s < n; s++) {
		const size_t sb = (s0 + s) * bs;
		__m512i qh[8];

		kv__k4_scales(rp, sb, pn->sc[s], pn->sc[s] + 8);
		if (five) {
			kv__rows16(rp, sb + 16, qh);
			kv__rows16(rp, sb + 32, qh + 4);
		}
		QV_UNROLL
		for (int p = 0; p < 4; p++)
			kv__k4_pair(rp, sb + qs_off, p, qh, five, pn->w[s][2 * p], pn->w[s][2 * p + 1]);
	}
}

/* Q6_K: the streaming tile's unpacking, stored by 32-block. */
static void kv__pack_q6(const struct kern_gemm_args *a, size_t o, size_t s0, size_t n,
			struct kv_panel *pn)
{
	const struct kv_rows rp = {(const char *)a->w + o * a->w_stride, a->w_stride};

	for (size_t s = 0; s < n; s++) {
		const size_t sb = (s0 + s) * sizeof(struct kern_block_q6_k);

		kv__q6_scales(rp, sb, pn->sc[s]);
		for (int h = 0; h < 2; h++) {
			__m512i qh[8], ql[8], qa[8], qb[8];

			kv__rows16(rp, sb + 128 + 32 * h, qh);
			kv__rows16(rp, sb + 128 + 32 * h + 16, qh + 4);
			QV_UNROLL
			for (int c = 0; c < 8; c++) {
				qa[c] = _mm512_and_si512(qh[c], _mm512_set1_epi8(0x33));
				qb[c] = _mm512_and_si512(_mm512_srli_epi16(qh[c], 2),
							 _mm512_set1_epi8(0x33));
			}
			for (int half = 0; half < 2; half++) {
				kv__rows16(rp, sb + 64 * h + 32 * half, ql);
				kv__rows16(rp, sb + 64 * h + 32 * half + 16, ql + 4);
				QV_UNROLL
				for (int hi = 0; hi < 2; hi++) {
					const int kk = half + 2 * hi;

					QV_UNROLL
					for (int c = 0; c < 8; c++) {
						__m512i q = kk == 0   ? _mm512_slli_epi16(qa[c], 4)
							    : kk == 1 ? _mm512_slli_epi16(qb[c], 4)
							    : kk == 2 ? qa[c]
								      : qb[c];
						pn->w[s][4 * h + kk][c] = kv__q6(ql[c], hi, q);
					}
				}
			}
		}
	}
}

/* Tokens [t, t + T) against the panel of rows [o, o + 16), super-blocks
 * [s0, s0 + n). The first group (t = 0) prefetches the same super-blocks
 * of the next tile into L2 as it goes, for the next pack. `q6` picks the
 * body; bs is the block size. */
QV_INLINE void kv__tile_p(const struct kern_gemm_args *a, const struct kv_panel *pn, size_t o,
			  size_t t, size_t s0, size_t n, int T, int q6, size_t bs)
{
	/* Q6_K's order of blocks in the streaming tile (kk = 0, 2, 1, 3) */
	static const int q6_order[8] = {0, 2, 1, 3, 4, 6, 5, 7};
	const char *next = (const char *)a->w + (o + QV_ROWS) * a->w_stride;
	struct kv_tok k[KV_TOK];
	__m512 acc[KV_TOK];

	QV_UNROLL
	for (int i = 0; i < T; i++) {
		k[i].x = (const struct kern_block_q8a *)((const char *)a->x + (t + i) * a->x_stride);
		k[i].xd = a->xd + (t + i) * a->xd_stride;
		k[i].xs8 = a->xs8 + (t + i) * a->xd_stride;
		acc[i] = s0 == 0 ? _mm512_setzero_ps()
				 : _mm512_loadu_ps(a->y + (t + i) * a->y_stride + o);
	}
	for (size_t j = 0; j < n; j++) {
		const size_t s = s0 + j;

		if (t == 0) {
			QV_UNROLL
			for (size_t off = 0; off < QV_ROWS * bs; off += 64)
				_mm_prefetch(next + QV_ROWS * s * bs + off, _MM_HINT_T1);
		}
		if (!q6) {
			float dxs[KV_TOK][8] __attribute__((aligned(32)));

			/* minimum term first, as the streaming tile */
			QV_UNROLL
			for (int i = 0; i < T; i++) {
				__m256 sx = _mm256_cvtepi32_ps(_mm256_srai_epi32(
					_mm256_loadu_si256((const __m256i *)(k[i].xs8 + 8 * s)), 3));
				_mm256_store_ps(dxs[i],
						_mm256_mul_ps(sx, _mm256_loadu_ps(k[i].xd + 8 * s)));
				QV_UNROLL
				for (int b = 0; b < 8; b++)
					acc[i] = kv__fnmadd_bcst(acc[i], pn->sc[j][8 + b], &dxs[i][b]);
			}
			for (int b = 0; b < 8; b++) {
				__m512i w[8];

				QV_UNROLL
				for (int c = 0; c < 8; c++)
					w[c] = _mm512_load_si512(&pn->w[j][b][c]);
				const __m512 dsc = pn->sc[j][b];
				QV_UNROLL
				for (int i = 0; i < T; i++) {
					const struct kern_block_q8a *x = k[i].x + 8 * s + b;
					__m512i sum = _mm512_setzero_si512();

					QV_UNROLL
					for (int c = 0; c < 8; c++)
						sum = qv__dpbusd_bcst(sum, w[c], x->qs + 4 * c);
					acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum),
								 _mm512_mul_ps(dsc, _mm512_set1_ps(x->d)),
								 acc[i]);
				}
			}
		} else {
			int32_t hs[KV_TOK][16] __attribute__((aligned(64)));

			QV_UNROLL
			for (int i = 0; i < T; i++)
				kv__half_sums(k[i].x + 8 * s, hs[i], 1);
			QV_UNROLL
			for (int bi = 0; bi < 8; bi++) {
				const int b = q6_order[bi];
				__m512i w[8];

				QV_UNROLL
				for (int c = 0; c < 8; c++)
					w[c] = _mm512_load_si512(&pn->w[j][b][c]);
				const __m512 sc0 = pn->sc[j][2 * b], sc1 = pn->sc[j][2 * b + 1];
				QV_UNROLL
				for (int i = 0; i < T; i++) {
					const struct kern_block_q8a *x = k[i].x + 8 * s + b;
					/* the -32 offset's sums start the chains */
					__m512i s0v = _mm512_set1_epi32(hs[i][KV_HALF(2 * b)]);
					__m512i s1v = _mm512_set1_epi32(hs[i][KV_HALF(2 * b + 1)]);

					QV_UNROLL
					for (int c = 0; c < 4; c++) {
						s0v = qv__dpbusd_bcst(s0v, w[c], x->qs + 4 * c);
						s1v = qv__dpbusd_bcst(s1v, w[c + 4], x->qs + 16 + 4 * c);
					}
					__m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(s0v), sc0);
					f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1v), sc1, f);
					acc[i] = _mm512_fmadd_ps(f, _mm512_set1_ps(x->d), acc[i]);
				}
			}
		}
	}
	QV_UNROLL
	for (int i = 0; i < T; i++)
		_mm512_storeu_ps(a->y + (t + i) * a->y_stride + o, acc[i]);
}

typedef void (*kv_panel_fn)(const struct kern_gemm_args *a, const struct kv_panel *pn, size_t o,
			    size_t t, size_t s0, size_t n);

#define KV_PANEL_FN(name, T, q6, bs)                                                        \
	static __attribute__((noinline)) void name(const struct kern_gemm_args *a,            \
						   const struct kv_panel *pn, size_t o,       \
						   size_t t, size_t s0, size_t n)             \
	{                                                                                   \
		kv__tile_p(a, pn, o, t, s0, n, T, q6, bs);                                  \
	}
#define KV_PANEL_FNS(pre, q6, bs)                                                           \
	KV_PANEL_FN(pre##1, 1, q6, bs)                                                      \
	KV_PANEL_FN(pre##2, 2, q6, bs)                                                      \
	KV_PANEL_FN(pre##3, 3, q6, bs)                                                      \
	KV_PANEL_FN(pre##4, 4, q6, bs)                                                      \
	KV_PANEL_FN(pre##5, 5, q6, bs)                                                      \
	KV_PANEL_FN(pre##6, 6, q6, bs)                                                      \
	KV_PANEL_FN(pre##7, 7, q6, bs)                                                      \
	KV_PANEL_FN(pre##8, 8, q6, bs)                                                      \
	static const kv_panel_fn pre[KV_TOK + 1] = {NULL,    pre##1, pre##2, pre##3, pre##4, \
						    pre##5, pre##6, pre##7, pre##8};
KV_PANEL_FNS(kv__p4k_, 0, sizeof(struct kern_block_q4_k))
KV_PANEL_FNS(kv__p5k_, 0, sizeof(struct kern_block_q5_k))
KV_PANEL_FNS(kv__p6k_, 1, sizeof(struct kern_block_q6_k))

typedef void (*kv_tile_fn)(const struct kern_gemm_args *a, struct kv_at at, size_t t);

/* One function per (type, token count), accumulators in registers. */
#define KV_TILE_FN(name, body, T)                                                          \
	static __attribute__((noinline)) void name(const struct kern_gemm_args *a,             \
						   struct kv_at at, size_t t)                  \
	{                                                                                  \
		body(a, at, t, T);                                                         \
	}
KV_TILE_FN(kv__q4k_1, kv__q4k_tile, 1)
KV_TILE_FN(kv__q4k_2, kv__q4k_tile, 2)
KV_TILE_FN(kv__q4k_3, kv__q4k_tile, 3)
KV_TILE_FN(kv__q4k_4, kv__q4k_tile, 4)
KV_TILE_FN(kv__q4k_5, kv__q4k_tile, 5)
KV_TILE_FN(kv__q4k_6, kv__q4k_tile, 6)
KV_TILE_FN(kv__q4k_7, kv__q4k_tile, 7)
KV_TILE_FN(kv__q4k_8, kv__q4k_tile, 8)
KV_TILE_FN(kv__q5k_1, kv__q5k_tile, 1)
KV_TILE_FN(kv__q5k_2, kv__q5k_tile, 2)
KV_TILE_FN(kv__q5k_3, kv__q5k_tile, 3)
KV_TILE_FN(kv__q5k_4, kv__q5k_tile, 4)
KV_TILE_FN(kv__q5k_5, kv__q5k_tile, 5)
KV_TILE_FN(kv__q5k_6, kv__q5k_tile, 6)
KV_TILE_FN(kv__q5k_7, kv__q5k_tile, 7)
KV_TILE_FN(kv__q5k_8, kv__q5k_tile, 8)
KV_TILE_FN(kv__q6k_1, kv__q6k_tile, 1)
KV_TILE_FN(kv__q6k_2, kv__q6k_tile, 2)
KV_TILE_FN(kv__q6k_3, kv__q6k_tile, 3)
KV_TILE_FN(kv__q6k_4, kv__q6k_tile, 4)
KV_TILE_FN(kv__q6k_5, kv__q6k_tile, 5)
KV_TILE_FN(kv__q6k_6, kv__q6k_tile, 6)
KV_TILE_FN(kv__q6k_7, kv__q6k_tile, 7)
KV_TILE_FN(kv__q6k_8, kv__q6k_tile, 8)

static const kv_tile_fn kv__q4k[KV_TOK + 1] = {NULL,      kv__q4k_1, kv__q4k_2, kv__q4k_3, kv__q4k_4,
					       kv__q4k_5, kv__q4k_6, kv__q4k_7, kv__q4k_8};
static const kv_tile_fn kv__q5k[KV_TOK + 1] = {NULL,      kv__q5k_1, kv__q5k_2, kv__q5k_3, kv__q5k_4,
					       kv__q5k_5, kv__q5k_6, kv__q5k_7, kv__q5k_8};
static const kv_tile_fn kv__q6k[KV_TOK + 1] = {NULL,      kv__q6k_1, kv__q6k_2, kv__q6k_3, kv__q6k_4,
					       kv__q6k_5, kv__q6k_6, kv__q6k_7, kv__q6k_8};

static void kv__tokens(const kv_tile_fn *fn, const struct kern_gemm_args *a, struct kv_at at)
{
	for (size_t t = 0; t < a->n_tok; t += KV_TOK) {
		size_t n = a->n_tok - t < KV_TOK ? a->n_tok - t : KV_TOK;
		fn[n](a, at, t);
	}
}

/* Whole tiles of rows [o, o1) for more than KV_TOK tokens, from panels:
 * row tiles outside, K chunks, token groups inside. Returns where the
 * whole tiles end. kind: 0 Q4_K, 1 Q5_K, 2 Q6_K. */
static size_t kv__panels(const kv_panel_fn *pfn, int kind, const struct kern_gemm_args *a,
			 size_t o, size_t o1)
{
	const size_t nsb = a->n_in / KERN_QKK;
	struct kv_panel pn __attribute__((aligned(64)));

	for (; o + QV_ROWS <= o1; o += QV_ROWS)
		for (size_t s0 = 0; s0 < nsb; s0 += KV_KC) {
			size_t n = nsb - s0 < KV_KC ? nsb - s0 : KV_KC;

			if (kind == 2)
				kv__pack_q6(a, o, s0, n, &pn);
			else
				kv__pack_k4(a, o, s0, n, kind, &pn);
			for (size_t t = 0; t < a->n_tok; t += KV_TOK) {
				size_t g = a->n_tok - t < KV_TOK ? a->n_tok - t : KV_TOK;
				pfn[g](a, &pn, o, t, s0, n);
			}
		}
	return o;
}

/* Row tiles outside, token groups inside: a tile's weights come from
 * memory once and from L1/L2 for the next group of tokens (more than
 * KV_TOK tokens: unpacked once, kv__panels). Rows past the last whole
 * tile: the tile ending at o1 (its first rows, computed again, are not
 * stored); a matrix under 16 rows: each row alone (stride 0). The lanes
 * never mix, so a row's result is the same in any tile position. */
static void kv__gemm(const kv_tile_fn *fn, const kv_panel_fn *pfn, int kind,
		     const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	const size_t st = a->w_stride;
	size_t o = o0;

	if (a->n_tok > KV_TOK)
		o = kv__panels(pfn, kind, a, o, o1);
	for (; o + QV_ROWS <= o1; o += QV_ROWS)
		kv__tokens(fn, a, (struct kv_at){o, st, 0xffff});
	if (o == o1)
		return;
	if (o1 >= QV_ROWS) {
		size_t b = o1 - QV_ROWS;
		kv__tokens(fn, a, (struct kv_at){b, st, (__mmask16)(0xffffu << (o - b))});
		return;
	}
	for (; o < o1; o++)
		kv__tokens(fn, a, (struct kv_at){o, 0, 1});
}

void kern_avx512_vnni_gemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kv__gemm(kv__q4k, kv__p4k_, 0, a, o0, o1);
}

void kern_avx512_vnni_gemm_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kv__gemm(kv__q5k, kv__p5k_, 1, a, o0, o1);
}

void kern_avx512_vnni_gemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kv__gemm(kv__q6k, kv__p6k_, 2, a, o0, o1);
}
#endif
