/*
 * kernels_qgemv_avx512.c - the one-token (decode) Q4_0 GEMV of the avx512
 * level. The 16-row VNNI tile of kernels_qvnni_avx512.c for one token,
 * with fewer vector operations per block: a block's nibbles as q & 0x0f
 * and q & 0xf0 (16 x the high nibble, exact in VPDPBUSD: 240 x 127 x 4
 * per lane and step) in two chains, S = s_lo + (s_hi >> 4) (exact: s_hi
 * is a multiple of 16), instead of the tile's AND, shift, AND per vector
 * and its constant chain split. Per block b, the 16 rows' exact int32 dot
 * S (row r in lane r), then acc = fma(float(S - xs8[b]), dw * dx, acc)
 * block after block: the same operations in the same order as the tile
 * and the AVX2 level, so every row's result is theirs bit for bit and a
 * token's result does not depend on its batch. Pure function; pool
 * threads call it on disjoint row ranges.
 *
 * Measured on Zen 4 (LEVELS.md, "Decode GEMV, fifth session"): the loop
 * is bound by getting the file layout into row lanes (sixteen 16-byte
 * loads and twelve inserts, sixteen scalar scale loads and their
 * packing), not by the multiplies.
 */
#if defined(__x86_64__)
#include "kernels.h"
#include "kernels_impl.h"
#include "qvnni_avx512.h"

/* Q4_0: block b's 16 rows' qs, rows i, i+4, i+8, i+12 in the 128-bit
 * lanes of v[i] (the tile's loads; transposed by the caller). */
QV_INLINE void qg__load_q4(const char *w, size_t st, size_t b, __m512i v[4])
{
	QV_UNROLL
	for (int i = 0; i < 4; i++)
		v[i] = qv__load4(w + b * sizeof(struct kern_block_q4_0) + 2, st, i);
}

/* The 16 rows' fp16 scales of block b as floats in row lanes, as
 * qv__scales but packed 4 to a register by SHL + a 16-bit load into the
 * low word (MOV r16 keeps the upper bits): 7 instructions per 4 rows
 * instead of 10 (load, shift, or). */
QV_INLINE __m512 qg__scales(const char *w, size_t st, size_t b)
{
	const char *p = w + b * sizeof(struct kern_block_q4_0);
	uint64_t h[4];

	QV_UNROLL
	for (int g = 0; g < 4; g++) {
		uint16_t d;

		memcpy(&d, p + (size_t)(4 * g + 3) * st, sizeof(d));
		h[g] = d;
		QV_UNROLL
		for (int r = 2; r >= 0; r--)
			__asm__("shl $16, %0\n\tmovw %1, %w0"
				: "+r"(h[g])
				: "m"(*(const uint16_t *)(p + (size_t)(4 * g + r) * st)));
	}
	return _mm512_cvtph_ps(_mm256_setr_epi64x((long long)h[0], (long long)h[1],
						  (long long)h[2], (long long)h[3]));
}

/* Q4_0: the 16 rows' integer dots of block b (before the -8), row r in
 * lane r. */
QV_INLINE __m512i qg__dots_q4(__m512i v[4], const int8_t *q)
{
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	__m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();

	qv__transpose4(v);
	QV_UNROLL
	for (int c = 0; c < 4; c++) {
		s0 = qv__dpbusd_bcst(s0, _mm512_and_si512(v[c], m4), q + 4 * c);
		s1 = qv__dpbusd_bcst(s1, _mm512_andnot_si512(m4, v[c]), q + 16 + 4 * c);
	}
	return _mm512_add_epi32(s0, _mm512_srai_epi32(s1, 4));
}

/* Block b's step: acc = fma(float(S - xs8), dw * xd, acc). */
QV_INLINE __m512 qg__step_q4(const struct kern_gemm_args *a, size_t b, __m512i v[4], __m512 dw,
			     __m512 acc)
{
	const struct kern_block_q8a *x = a->x;
	__m512i s = qg__dots_q4(v, x[b].qs);

	s = _mm512_sub_epi32(s, _mm512_set1_epi32(a->xs8[b]));
	return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(a->xd[b])),
			       acc);
}

static __attribute__((noinline)) void qg__tile_q4(const struct kern_gemm_args *a, size_t o)
{
	const size_t bs = sizeof(struct kern_block_q4_0);
	const size_t nb = a->n_in / KERN_QK, st = a->w_stride;
	const char *w = (const char *)a->w + o * st;
	/* two tiles ahead into L2, as the tile (LEVELS.md) */
	const char *next = w + 2 * QV_ROWS * st;
	__m512 acc = _mm512_setzero_ps(), dw = qg__scales(w, st, 0);
	__m512i v[4];

	qg__load_q4(w, st, 0, v);
	for (size_t b = 0; b < nb; b++) {
		/* the last block loads itself again rather than branch */
		size_t bn = b + 1 < nb ? b + 1 : b;
		__m512 dwn = qg__scales(w, st, bn);
		__m512i vn[4];

		QV_UNROLL
		for (size_t off = 0; off < QV_ROWS * bs; off += 64)
			_mm_prefetch(next + b * QV_ROWS * bs + off, _MM_HINT_T1);
		qg__load_q4(w, st, bn, vn);
		acc = qg__step_q4(a, b, v, dw, acc);
		dw = dwn;
		QV_UNROLL
		for (int i = 0; i < 4; i++)
			v[i] = vn[i];
	}
	_mm512_storeu_ps(a->y + o, acc);
}

/* The avx512 level's gemv[DTYPE_Q4_0] (kernels_avx512.c). */
void kern_avx512_gemv_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	size_t o = o0;

	if (a->n_tok != 1) { /* not called so (kern_matmul_n), but exact either way */
		kern_avx512_gemm_q4_0(a, o0, o1);
		return;
	}
	for (; o + QV_ROWS <= o1; o += QV_ROWS)
		qg__tile_q4(a, o);
	if (o < o1) /* rows past the last whole tile: the AVX2 GEMV, same bits */
		kern_ops_avx2.gemm[DTYPE_Q4_0](a, o, o1);
}
#endif
