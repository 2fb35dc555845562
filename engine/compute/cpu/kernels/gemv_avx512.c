/*
 * gemv_avx512.c - Q8_0 and Q4_0 weights times one token's quantized
 * activations (decode) with AVX-512 VNNI, weights in their file layout.
 *
 * Decode is memory bound only if the kernel keeps up with the memory: on
 * a Zen 4 core the AVX2 GEMV (8 rows a tile, ~100 instructions per 144
 * bytes) computes about as fast as DRAM delivers, so the two did not
 * overlap and a 2-thread decode streamed ~68% of the machine's bandwidth.
 * Here a 16-row tile is ~130 instructions per 288 bytes: each block's
 * bytes are transposed into row lanes once (qvnni_avx512.h, shared with
 * the small-batch tiles) and eight VPDPBUSD give the 16 rows' dots.
 *
 * Prefetch: a tile reads 16 rows at once, 16 streams, more than the
 * hardware prefetchers follow (without software prefetch the tile ran
 * ~2.3x slower from DRAM); so each block prefetches its share of a
 * tile further on (rows are contiguous) into L2 (GV_AHEAD tiles are
 * 36-190 KB ahead: too far for L1, where it evicted the tile in use), and
 * a chunk's first tiles are prefetched as a whole when the chunk starts.
 *
 * Results: per block the 16 exact int32 dots S, then acc = fma(float(S),
 * dw * dx, acc) block after block, as the AVX2 level and the small-batch
 * tiles do, so a (row, token) result is bit-identical whichever of them
 * computed it (a token's logits never depend on its batch). Rows past
 * the last whole tile go to the AVX2 GEMV.
 */
#if defined(__x86_64__)
#include "kernels.h"
#include "kernels_impl.h"
#include "qvnni_avx512.h"

/* Tiles the prefetch runs ahead (36-190 KB on TinyLlama's shapes): one
 * tile ahead was ~6% slower for Q4_0, ~3% for Q8_0. */
#define GV_AHEAD(wt) ((void)(wt), 2)

/* Rows [o, o + 16) for the one token. */
QV_INLINE void gv__tile(uint32_t wt, const struct kern_gemm_args *a, size_t o)
{
	const size_t bs = wt == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0)
					   : sizeof(struct kern_block_q4_0);
	const size_t nb = a->n_in / KERN_QK, st = a->w_stride;
	const char *w = (const char *)a->w + o * st;
	const char *next = w + GV_AHEAD(wt) * QV_ROWS * st;
	const struct kern_block_q8a *x = a->x;
	__m512 acc = _mm512_setzero_ps();

	for (size_t b = 0; b < nb; b++) {
		__m512 dw = qv__scales(w, st, b, bs);
		const int8_t *q = x[b].qs;
		__m512i u[8], s[4];

		/* 16 * bs bytes of the tile GV_AHEAD ahead per block: all of
		 * it by the end of this one */
		QV_UNROLL
		for (size_t off = 0; off < QV_ROWS * bs; off += 64)
			_mm_prefetch(next + b * QV_ROWS * bs + off, _MM_HINT_T1);
		qv__unpack(wt, w, st, b, 0, u);
		/* four chains: one token has nothing else to overlap them with */
		QV_UNROLL
		for (int c = 0; c < 4; c++)
			s[c] = qv__dpbusd_bcst(_mm512_setzero_si512(), u[2 * c], q + 8 * c);
		QV_UNROLL
		for (int c = 0; c < 4; c++)
			s[c] = qv__dpbusd_bcst(s[c], u[2 * c + 1], q + 8 * c + 4);
		s[0] = _mm512_add_epi32(_mm512_add_epi32(s[0], s[1]), _mm512_add_epi32(s[2], s[3]));
		/* Q4_0: nibble - 8; Q8_0: byte + 128 - 128 (xs8 = 8 sum x) */
		s[0] = _mm512_sub_epi32(s[0], _mm512_set1_epi32(wt == DTYPE_Q8_0 ? 16 * a->xs8[b]
										 : a->xs8[b]));
		acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[0]), _mm512_mul_ps(dw, _mm512_set1_ps(a->xd[b])),
				      acc);
	}
	_mm512_storeu_ps(a->y + o, acc);
}

/* One function per type, so the accumulator stays in a register. */
static __attribute__((noinline)) void gv__q8(const struct kern_gemm_args *a, size_t o)
{
	gv__tile(DTYPE_Q8_0, a, o);
}

static __attribute__((noinline)) void gv__q4(const struct kern_gemm_args *a, size_t o)
{
	gv__tile(DTYPE_Q4_0, a, o);
}

static void gv__run(void (*tile)(const struct kern_gemm_args *, size_t), kern_gemm_fn avx2,
		    const struct kern_gemm_args *a, size_t o0, size_t o1, size_t ahead)
{
	const char *w = (const char *)a->w + o0 * a->w_stride;
	const size_t first = (o1 - o0 < ahead * QV_ROWS ? o1 - o0 : ahead * QV_ROWS) * a->w_stride;
	size_t o = o0;

	/* The chunk's first tiles: nobody prefetched them (the pool hands
	 * chunks out in any order). */
	for (size_t off = 0; off < first; off += 64)
		_mm_prefetch(w + off, _MM_HINT_T1);
	for (; o + QV_ROWS <= o1; o += QV_ROWS)
		tile(a, o);
	if (o < o1)
		avx2(a, o, o1);
}

void kern_avx512_gemv_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	gv__run(gv__q8, kern_ops_avx2.gemm[DTYPE_Q8_0], a, o0, o1, GV_AHEAD(DTYPE_Q8_0));
}

void kern_avx512_gemv_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	gv__run(gv__q4, kern_ops_avx2.gemm[DTYPE_Q4_0], a, o0, o1, GV_AHEAD(DTYPE_Q4_0));
}
#endif
