/*
 * kernels_qvnni_avx512.c - Q8_0 and Q4_0 weights times quantized
 * activations with AVX-512 VNNI (VPDPBUSD on ZMM), for batches of two or
 * more tokens (small decode batches and prefill): the weights are read in
 * their file layout (no packing), 16 rows x up to 4 tokens a tile, each
 * 16-row tile from memory once for all the tokens of the call (later
 * groups of 4 find it in L1/L2).
 *
 * Per block b, the 16 rows' exact int32 dots S (one per row lane) come
 * from VPDPBUSD and a transpose-add; then acc = fma(float(S), dw * dx, acc)
 * exactly as the AVX2 level (kernels_avx2.c, kernels_qgemm_avx2.c) does,
 * block after block, so every (row, token) result is bit-identical to the
 * AVX2 level's. That is what lets single tokens, and the rows of a matrix
 * past its last whole 16-row tile, go to the AVX2 code without a token's
 * result depending on its batch.
 *
 *   Q4_0: VPDPBUSD multiplies unsigned by signed bytes; the nibbles are
 *   unsigned 0..15, so S = dot(q, x) - 8 sum(x) = dot - xs8[b]. A ZMM holds
 *   four rows' 16 bytes (rows i, i+4, i+8, i+12 in its 128-bit lanes), so
 *   the transpose-add leaves row r in lane r.
 *   Q8_0: w + 128 (an xor) is unsigned, S = dot(w + 128, x) - 128 sum(x)
 *   = dot - 16 xs8[b]. A ZMM holds two rows' 32 bytes.
 * All sums are exact in int32 (|S| <= 32 * 255 * 127).
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"

#define QV_INLINE static inline __attribute__((always_inline))
#define QV_UNROLL _Pragma("GCC unroll 16")
#define QV_ROWS 16
#define QV_TOK 8

/* The 16 rows' fp16 scales of block b as floats in row lanes: scalar
 * loads packed in general registers (a VPGATHERDD was slower here). */
QV_INLINE __m512 qv__scales(const char *w, size_t st, size_t b, size_t bs)
{
	uint64_t h[4] = {0, 0, 0, 0};

	QV_UNROLL
	for (size_t r = 0; r < QV_ROWS; r++) {
		uint16_t d;
		memcpy(&d, w + r * st + b * bs, sizeof(d));
		h[r / 4] |= (uint64_t)d << (16 * (r % 4));
		/* keeps GCC from moving the packing onto the vector ports */
		__asm__("" : "+r"(h[r / 4]));
	}
	return _mm512_cvtph_ps(_mm256_setr_epi64x((long long)h[0], (long long)h[1],
						  (long long)h[2], (long long)h[3]));
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

/* acc + dot of u's bytes with the 4 bytes at p broadcast, the broadcast
 * embedded in the VPDPBUSD (GCC emits a separate VPBROADCASTD for the
 * intrinsic, one more vector op per four multiplies). */
QV_INLINE __m512i qv__dpbusd_bcst(__m512i acc, __m512i u, const int8_t *p)
{
	__asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const int32_t *)p));
	return acc;
}

/* One 32-bit word of activation bytes, for an embedded broadcast. */
QV_INLINE __m512i qv__xword(const int8_t *qs, int c)
{
	int32_t v;

	memcpy(&v, qs + 4 * c, sizeof(v));
	return _mm512_set1_epi32(v);
}

/*
 * Rows [o, o + 16) for tokens [t, t + T). Per block, the 16 rows' bytes
 * are transposed once into eight vectors u[c] whose lane r holds elements
 * 4c..4c+3 of row r (unsigned: Q4_0's nibbles, Q8_0's bytes + 128), so a
 * token's dot products for all 16 rows are eight VPDPBUSD against its
 * words broadcast, with no reduction after: the unpacking is shared by
 * the T tokens and each token costs 8 VPDPBUSD, a subtract, a convert and
 * two float operations.
 */
QV_INLINE void qv__tile(uint32_t wt, const struct kern_gemm_args *a, size_t o, size_t t, int T)
{
	const size_t bs = wt == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0)
					   : sizeof(struct kern_block_q4_0);
	const size_t nb = a->n_in / KERN_QK, st = a->w_stride;
	const char *w = (const char *)a->w + o * st;
	const char *next = w + QV_ROWS * st;
	const __m512i m4 = _mm512_set1_epi8(0x0f), x80 = _mm512_set1_epi8((char)0x80);
	const struct kern_block_q8a *x[QV_TOK];
	const float *xd[QV_TOK];
	const int32_t *xs[QV_TOK];
	__m512 acc[QV_TOK];

	QV_UNROLL
	for (int k = 0; k < T; k++) {
		x[k] = (const struct kern_block_q8a *)((const char *)a->x + (t + k) * a->x_stride);
		xd[k] = a->xd + (t + k) * a->xd_stride;
		xs[k] = a->xs8 + (t + k) * a->xd_stride;
		acc[k] = _mm512_setzero_ps();
	}
	for (size_t b = 0; b < nb; b++) {
		const char *wb = w + b * bs + 2; /* the block's qs */
		__m512 dw = qv__scales(w, st, b, bs);
		__m512i u[8];

		QV_UNROLL
		for (size_t off = 0; off < QV_ROWS * bs; off += 64)
			_mm_prefetch(next + b * QV_ROWS * bs + off, _MM_HINT_T0);
		if (wt == DTYPE_Q4_0) {
			/* byte j holds element j (low nibble) and j + 16 (high) */
			QV_UNROLL
			for (int i = 0; i < 4; i++)
				u[i] = qv__load4(wb, st, i);
			qv__transpose4(u);
			QV_UNROLL
			for (int c = 0; c < 4; c++) {
				u[c + 4] = _mm512_and_si512(_mm512_srli_epi16(u[c], 4), m4);
				u[c] = _mm512_and_si512(u[c], m4);
			}
		} else {
			QV_UNROLL
			for (int h = 0; h < 2; h++) {
				QV_UNROLL
				for (int i = 0; i < 4; i++)
					u[4 * h + i] = qv__load4(wb + 16 * h, st, i);
				qv__transpose4(u + 4 * h);
			}
			QV_UNROLL
			for (int c = 0; c < 8; c++)
				u[c] = _mm512_xor_si512(u[c], x80);
		}
		QV_UNROLL
		for (int k = 0; k < T; k++) {
			const int8_t *q = x[k][b].qs;
			/* two chains: half the latency of eight dependent VPDPBUSD */
			__m512i s = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
			QV_UNROLL
			for (int c = 0; c < 4; c++) {
				s = qv__dpbusd_bcst(s, u[c], q + 4 * c);
				s1 = qv__dpbusd_bcst(s1, u[c + 4], q + 4 * c + 16);
			}
			s = _mm512_add_epi32(s, s1);
			/* Q4_0: nibble - 8; Q8_0: byte + 128 - 128 (xs8 = 8 sum x) */
			s = _mm512_sub_epi32(s, _mm512_set1_epi32(wt == DTYPE_Q8_0 ? 16 * xs[k][b]
										: xs[k][b]));
			acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),
						 _mm512_mul_ps(dw, _mm512_set1_ps(xd[k][b])), acc[k]);
		}
	}
	QV_UNROLL
	for (int k = 0; k < T; k++)
		_mm512_storeu_ps(a->y + (t + k) * a->y_stride + o, acc[k]);
}

/* One function per (type, token count): each keeps its accumulators in
 * registers (inlined into one driver, GCC spilled them). */
#define QV_TILE_FN(name, wt, T)                                                          \
	static __attribute__((noinline)) void name(const struct kern_gemm_args *a, size_t o, \
						   size_t t)                                 \
	{                                                                                \
		qv__tile(wt, a, o, t, T);                                                \
	}
QV_TILE_FN(qv__q8_1, DTYPE_Q8_0, 1)
QV_TILE_FN(qv__q8_2, DTYPE_Q8_0, 2)
QV_TILE_FN(qv__q8_3, DTYPE_Q8_0, 3)
QV_TILE_FN(qv__q8_4, DTYPE_Q8_0, 4)
QV_TILE_FN(qv__q8_5, DTYPE_Q8_0, 5)
QV_TILE_FN(qv__q8_6, DTYPE_Q8_0, 6)
QV_TILE_FN(qv__q8_7, DTYPE_Q8_0, 7)
QV_TILE_FN(qv__q8_8, DTYPE_Q8_0, 8)
QV_TILE_FN(qv__q4_1, DTYPE_Q4_0, 1)
QV_TILE_FN(qv__q4_2, DTYPE_Q4_0, 2)
QV_TILE_FN(qv__q4_3, DTYPE_Q4_0, 3)
QV_TILE_FN(qv__q4_4, DTYPE_Q4_0, 4)
QV_TILE_FN(qv__q4_5, DTYPE_Q4_0, 5)
QV_TILE_FN(qv__q4_6, DTYPE_Q4_0, 6)
QV_TILE_FN(qv__q4_7, DTYPE_Q4_0, 7)
QV_TILE_FN(qv__q4_8, DTYPE_Q4_0, 8)

typedef void (*qv_tile_fn)(const struct kern_gemm_args *a, size_t o, size_t t);

static const qv_tile_fn qv__q8[QV_TOK + 1] = {NULL,     qv__q8_1, qv__q8_2, qv__q8_3, qv__q8_4,
						 qv__q8_5, qv__q8_6, qv__q8_7, qv__q8_8};
static const qv_tile_fn qv__q4[QV_TOK + 1] = {NULL,     qv__q4_1, qv__q4_2, qv__q4_3, qv__q4_4,
						 qv__q4_5, qv__q4_6, qv__q4_7, qv__q4_8};

static void qv__gemm(const qv_tile_fn *fn, kern_gemm_fn avx2, const struct kern_gemm_args *a,
		     size_t o0, size_t o1)
{
	size_t o = o0;

	/* One token: the AVX2 GEMV, 8 rows a tile, was ~10% faster in
	 * cache on a Zen 5 than a 16-row tile (the weights' unpacking is not
	 * shared by several tokens there), and is the same bit for bit. */
	if (a->n_tok == 1) {
		avx2(a, o0, o1);
		return;
	}
	/* Row tiles outside, token groups inside: a tile's weights come from
	 * memory once and from L1/L2 for the next group of tokens. */
	for (; o + QV_ROWS <= o1; o += QV_ROWS)
		for (size_t t = 0; t < a->n_tok; t += QV_TOK) {
			size_t n = a->n_tok - t < QV_TOK ? a->n_tok - t : QV_TOK;
			fn[n](a, o, t);
		}
	if (o < o1)
		avx2(a, o, o1);
}

void kern_avx512_gemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	qv__gemm(qv__q8, kern_ops_avx2.gemm[DTYPE_Q8_0], a, o0, o1);
}

void kern_avx512_gemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	qv__gemm(qv__q4, kern_ops_avx2.gemm[DTYPE_Q4_0], a, o0, o1);
}
#endif
