/*
 * qvnni_avx512.h - the Q8_0 / Q4_0 weight-tile helpers shared by the
 * AVX-512 VNNI small-batch tiles (kernels_qvnni_avx512.c) and the AMX
 * tiles (kernels_amx.c): 16 rows' block scales in row lanes, and a block's
 * bytes transposed so that vector c holds elements 4c..4c+3 of rows
 * 0..15 in its dword lanes. Included only by files built with the
 * AVX-512 flags. Pure functions.
 */
#ifndef EMBER_QVNNI_AVX512_H
#define EMBER_QVNNI_AVX512_H

#include <immintrin.h>
#include <string.h>

#include "kernels_impl.h"

#define QV_INLINE static inline __attribute__((always_inline))
#define QV_UNROLL _Pragma("GCC unroll 16")
#define QV_ROWS 16

/* The tile prefetched while the 16 rows at w stream: Q4_0 two tiles
 * ahead (a decode step's matrix products 23.1-23.6 -> 21.9-22.6 ms of
 * CPU, one thread, Zen 4), Q8_0 one (two: no change). */
QV_INLINE const char *qv__tile_ahead(const char *w, size_t st, int q8)
{
	return w + (q8 ? 1 : 2) * QV_ROWS * st;
}

/* Block b's share of a later tile into L2: its 16 rows are contiguous,
 * so the b-th run of 16 blocks' bytes, one linear stream at the pace the
 * tile is read. Not L1: a whole tile ahead (18-50 KiB) into L1 evicted
 * this tile's rows and the activations; with T0 a 2-token decode step
 * cost 1.7x a 1-token one (forward_step, one thread), with T1 0.9x.
 * On packed rows (KERN_PACKED) the b-th run is exactly block b of the
 * later tile's 16 rows. */
QV_INLINE void qv__prefetch_ahead(const char *next, size_t b, size_t bs)
{
	QV_UNROLL
	for (size_t off = 0; off < QV_ROWS * bs; off += 64)
		_mm_prefetch(next + b * QV_ROWS * bs + off, _MM_HINT_T1);
}

/*
 * Where block b of the tile's row r lies: w + r * rs + b * bstep. File
 * layout: rs = the row stride, bstep = the block size. Packed rows
 * (kernels.h KERN_PACKED; 16-row groups interleaved block by block at
 * load): rs = the block size, bstep = 16 blocks, so a tile reads one
 * linear stream and a block's rows sit at constant offsets (the
 * compiler's immediates).
 */
QV_INLINE size_t qv__rs(size_t st, size_t bs, int pk)
{
	return pk ? bs : st;
}

QV_INLINE size_t qv__bstep(size_t bs, int pk)
{
	return pk ? QV_ROWS * bs : bs;
}

/* The 16 rows' fp16 scales of the block at offset off (b * bstep) as
 * floats in row lanes: scalar loads packed in general registers (a
 * VPGATHERDD was slower here). */
QV_INLINE __m512 qv__scales_g(const char *w, size_t rs, size_t off)
{
	uint64_t h[4] = {0, 0, 0, 0};

	QV_UNROLL
	for (size_t r = 0; r < QV_ROWS; r++) {
		uint16_t d;
		memcpy(&d, w + r * rs + off, sizeof(d));
		h[r / 4] |= (uint64_t)d << (16 * (r % 4));
		/* keeps GCC from moving the packing onto the vector ports */
		__asm__("" : "+r"(h[r / 4]));
	}
	return _mm512_cvtph_ps(_mm256_setr_epi64x((long long)h[0], (long long)h[1],
						  (long long)h[2], (long long)h[3]));
}

/* qv__scales_g() of block b in the file layout (row stride st). */
QV_INLINE __m512 qv__scales(const char *w, size_t st, size_t b, size_t bs)
{
	return qv__scales_g(w, st, b * bs);
}

/* 4x4 transpose of dwords inside each 128-bit lane: v[i] lane j holds
 * dwords 0..3 of row i + 4j; afterwards v[c] holds dword c of rows
 * 0..15 in dword lanes 0..15 (lane 4j + i is row i + 4j). */
QV_INLINE void qv__transpose4(__m512i v[4])
{
	__m512i t0 = _mm512_unpacklo_epi32(v[0], v[1]), t1 = _mm512_unpackhi_epi32(v[0], v[1]);
	__m512i t2 = _mm512_unpacklo_epi32(v[2], v[3]), t3 = _mm512_unpackhi_epi32(v[2], v[3]);

	v[0] = _mm512_unpacklo_epi64(t0, t2);
	v[1] = _mm512_unpackhi_epi64(t0, t2);
	v[2] = _mm512_unpacklo_epi64(t1, t3);
	v[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* 16 bytes at offset `off` of block b's qs of rows i, i+4, i+8, i+12. */
QV_INLINE __m512i qv__load4(const char *wb, size_t st, int i)
{
	__m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(wb + (size_t)i * st)));

	v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(wb + (size_t)(i + 4) * st)), 1);
	v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(wb + (size_t)(i + 8) * st)), 2);
	return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(wb + (size_t)(i + 12) * st)),
				  3);
}

/* qv__load4() as two 256-bit halves joined: Zen 4 runs a 256-bit insert
 * in half the pipe time of a 512-bit one, and these shuffles share pipes
 * with VPDPBUSD. Faster where many tokens share the block (the 8-token
 * streaming tile: Q4_0 gemm_q 5632 x 2048 one thread 321 -> 326
 * GFLOP/s), slower with few (1 to 4 tokens: 1-3% less), Zen 4. */
QV_INLINE __m512i qv__load4y(const char *wb, size_t st, int i)
{
	__m256i lo = _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(wb + (size_t)i * st)));
	__m256i hi = _mm256_castsi128_si256(
		_mm_loadu_si128((const __m128i *)(wb + (size_t)(i + 8) * st)));

	lo = _mm256_inserti128_si256(lo, _mm_loadu_si128((const __m128i *)(wb + (size_t)(i + 4) * st)),
				     1);
	hi = _mm256_inserti128_si256(hi,
				     _mm_loadu_si128((const __m128i *)(wb + (size_t)(i + 12) * st)), 1);
	return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* acc + dot of u's bytes with the 4 bytes at p broadcast, the broadcast
 * embedded in the VPDPBUSD (GCC emits a separate VPBROADCASTD for the
 * intrinsic, one more vector op per four multiplies). */
QV_INLINE __m512i qv__dpbusd_bcst(__m512i acc, __m512i u, const int8_t *p)
{
	__asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const int32_t *)p));
	return acc;
}


/* The block at offset off of rows [0, 16) of w (row r at w + r * st:
 * qv__rs) as eight vectors u[c], dword lane r = elements 4c..4c+3 of
 * row r. Q4_0: the nibbles (0..15)
 * unless `centred` (then minus 8: signed values); Q8_0: the bytes plus
 * 128 (unsigned, for VPDPBUSD) unless `centred` (then as stored). `y`:
 * gather the rows with qv__load4y() (same values). */
QV_INLINE void qv__unpack_g(uint32_t wt, const char *w, size_t st, size_t off, int centred,
			    int y, __m512i u[8])
{
	const char *wb = w + off + 2; /* the block's qs */
	const __m512i m4 = _mm512_set1_epi8(0x0f), x80 = _mm512_set1_epi8((char)0x80);
	const __m512i m8 = _mm512_set1_epi8(8);

	if (wt == DTYPE_Q4_0) {
		/* byte j holds element j (low nibble) and j + 16 (high) */
		QV_UNROLL
		for (int i = 0; i < 4; i++)
			u[i] = y ? qv__load4y(wb, st, i) : qv__load4(wb, st, i);
		qv__transpose4(u);
		QV_UNROLL
		for (int c = 0; c < 4; c++) {
			u[c + 4] = _mm512_and_si512(_mm512_srli_epi16(u[c], 4), m4);
			u[c] = _mm512_and_si512(u[c], m4);
			if (centred) {
				u[c] = _mm512_sub_epi8(u[c], m8);
				u[c + 4] = _mm512_sub_epi8(u[c + 4], m8);
			}
		}
	} else {
		QV_UNROLL
		for (int h = 0; h < 2; h++) {
			QV_UNROLL
			for (int i = 0; i < 4; i++)
				u[4 * h + i] = y ? qv__load4y(wb + 16 * h, st, i)
						 : qv__load4(wb + 16 * h, st, i);
			qv__transpose4(u + 4 * h);
		}
		if (!centred) {
			QV_UNROLL
			for (int c = 0; c < 8; c++)
				u[c] = _mm512_xor_si512(u[c], x80);
		}
	}
}

QV_INLINE size_t qv__bsize(uint32_t wt)
{
	return wt == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0) : sizeof(struct kern_block_q4_0);
}

/* qv__unpack_g() of block b in the file layout (row stride st). */
QV_INLINE void qv__unpack_l(uint32_t wt, const char *w, size_t st, size_t b, int centred, int y,
			    __m512i u[8])
{
	qv__unpack_g(wt, w, st, b * qv__bsize(wt), centred, y, u);
}

/* qv__unpack_l() with qv__load4(). */
QV_INLINE void qv__unpack(uint32_t wt, const char *w, size_t st, size_t b, int centred,
			  __m512i u[8])
{
	qv__unpack_l(wt, w, st, b, centred, 0, u);
}

/*
 * Packed Q4_0 and Q8_0 are "tiled" (kern_avx512_pack_q4_0 / _q8_0): the
 * block at w + off (off = b * bstep) holds the 16 rows' fp16 scales side
 * by side, then the vectors qv__unpack_g() builds by loads and
 * qv__transpose4(), as stored (Q4_0: the four vectors of packed nibbles;
 * Q8_0: all eight, each byte already + 128, i.e. XOR 0x80): one 256-bit
 * load and VCVTPH2PS for the scales, four (Q4_0) or eight (Q8_0) 512-bit
 * loads for the qs. Same values, so the same bits.
 */
QV_INLINE int qv__tiled(uint32_t wt, int pk)
{
	return pk && (wt == DTYPE_Q4_0 || wt == DTYPE_Q8_0);
}

QV_INLINE __m512 qv__scales_p(uint32_t wt, const char *w, size_t rs, size_t off, int pk)
{
	if (qv__tiled(wt, pk))
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + off)));
	return qv__scales_g(w, rs, off);
}

/* qv__unpack_g() (not centred) of either layout. */
QV_INLINE void qv__unpack_p(uint32_t wt, const char *w, size_t rs, size_t off, int y, int pk,
			    __m512i u[8])
{
	const __m512i m4 = _mm512_set1_epi8(0x0f);

	if (!qv__tiled(wt, pk)) {
		qv__unpack_g(wt, w, rs, off, 0, y, u);
		return;
	}
	if (wt == DTYPE_Q8_0) {
		QV_UNROLL
		for (int c = 0; c < 8; c++)
			u[c] = _mm512_loadu_si512(w + off + 32 + 64 * c);
		return;
	}
	QV_UNROLL
	for (int c = 0; c < 4; c++) {
		__m512i v = _mm512_loadu_si512(w + off + 32 + 64 * c);

		u[c + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
		u[c] = _mm512_and_si512(v, m4);
	}
}

/* Packed rows (kernels.h KERN_PACKED, 16-row groups): rows [o0, o1) of
 * the product, `whole` running the whole groups inside and each part-
 * group at an end computed whole into a buffer (kernels_qvnni_avx512.c). */
void kern_avx512_packed_split(const struct kern_gemm_args *a, size_t o0, size_t o1,
			      kern_gemm_fn whole);

#endif
