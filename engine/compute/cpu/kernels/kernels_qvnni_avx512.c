/*
 * kernels_qvnni_avx512.c - Q8_0 and Q4_0 weights times quantized
 * activations with AVX-512 VNNI (VPDPBUSD on ZMM), for any number of
 * tokens (decode of one or several sequences, prefill): 16-row tiles.
 * Up to 8 tokens, a tile streams the weights in their file layout (no
 * packing; the next tile is prefetched into L2), so a k-token decode
 * step reads each weight once; 9 to 16 tokens, one pass of all of them
 * (QV_SMALL2, qv__tile2). 17 or more tokens (prefill), a tile's
 * blocks are unpacked once into a 36 KiB panel per 64 blocks of K and
 * every group of 8 tokens runs from it.
 *
 * Per block b, the 16 rows' exact int32 dots S (one per row lane) come
 * from VPDPBUSD and a transpose-add; then acc = fma(float(S), dw * dx, acc)
 * exactly as the AVX2 level (kernels_avx2.c, kernels_qgemm_avx2.c) does,
 * block after block, so every (row, token) result is bit-identical to the
 * AVX2 level's. That is what lets the rows of a matrix past its last
 * whole 16-row tile go to the AVX2 code without a token's result
 * depending on its batch.
 *
 *   Q4_0: VPDPBUSD multiplies unsigned by signed bytes; the nibbles are
 *   unsigned 0..15, so S = dot(q, x) - 8 sum(x) = dot - xs8[b]. A ZMM holds
 *   four rows' 16 bytes (rows i, i+4, i+8, i+12 in its 128-bit lanes), so
 *   the transpose-add leaves row r in lane r.
 *   Q8_0: w + 128 (an xor) is unsigned, S = dot(w + 128, x) - 128 sum(x)
 *   = dot - 16 xs8[b]. A ZMM holds two rows' 32 bytes.
 * All sums are exact in int32 (|S| <= 32 * 255 * 127).
 *
 * Packed rows (kernels.h KERN_PACKED, kernels_avx512.c's pgemm/pgemv):
 * the same tiles compiled a second time with row r of block b at
 * tile + (b * 16 + r) * bs (qvnni_avx512.h qv__rs / qv__bstep) instead of
 * tile + r * row + b * bs, so a tile reads one linear stream; the next-
 * tile prefetch is unchanged (it already took the next tile's bytes in
 * order). Same operations, same bits.
 */
#if defined(__x86_64__)
#include "kernels.h"
#include "kernels_impl.h"
#include "qvnni_avx512.h"
#include "quants.h"

#define QV_TOK 8
/* Up to this many tokens (a decode step of 9..16 sequences) a tile
 * streams its weights once for all of them (qv__tile2), rather than
 * packing a panel that only two token groups use (a 16-sequence
 * TinyLlama step 138.9-142.9 -> 132.1-137.2 ms of CPU against the panel,
 * when this was two 8-token passes; one pass: LEVELS.md, eighteenth
 * session). Same bits: every (row, token) sees the same block-by-block
 * operations either way. */
#define QV_SMALL2 16

/* One block's dots for a token of the panel tile: eight VPDPBUSD against
 * the token's words broadcast in NC independent chains, the offset term,
 * then acc = fma(float(S), dw * dx, acc) as the AVX2 level does. */
QV_INLINE __m512 qv__dot(uint32_t wt, const __m512i u[8], __m512 dw, const int8_t *q, float xd,
			 int32_t xs, __m512 acc, int NC)
{
	__m512i s[4];

	QV_UNROLL
	for (int c = 0; c < NC; c++)
		s[c] = _mm512_setzero_si512();
	QV_UNROLL
	for (int c = 0; c < 8; c++)
		s[c % NC] = qv__dpbusd_bcst(s[c % NC], u[c], q + 4 * c);
	QV_UNROLL
	for (int c = 1; c < NC; c++)
		s[0] = _mm512_add_epi32(s[0], s[c]);
	/* Q4_0: nibble - 8; Q8_0: byte + 128 - 128 (xs8 = 8 sum x) */
	s[0] = _mm512_sub_epi32(s[0], _mm512_set1_epi32(wt == DTYPE_Q8_0 ? 16 * xs : xs));
	return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[0]), _mm512_mul_ps(dw, _mm512_set1_ps(xd)), acc);
}

/* qv__dot() for the streaming tile: the offset term comes negated from
 * memory (*noff = -xs8, or -16 xs8 for Q8_0) as the first chain's
 * starting value, a broadcast load, instead of a zeroed register and a
 * VPSUBD after the dots: the same exact int32 sum S with one vector
 * operation less a token and block. On Zen 4 VPDPBUSD, VMULPS and VFMADD
 * take the same two pipes (one ZMM each a cycle) and other vector work
 * spills onto them: 8 tokens' 64 VPDPBUSD + 8 VMULPS + 8 VFMADD make a
 * floor of 80 cycles a block and tile, and the tile ran ~95 before
 * (microbenchmarked: the Q4_0 unpack's shifts and masks ~7 cycles, its
 * ZMM inserts ~2, the offsets' VPSUBD ~3). With the offset as the start,
 * one chain a token beats two from 5 tokens up. */
QV_INLINE __m512 qv__dot_n(const __m512i u[8], __m512 dw, const int8_t *q, float xd,
			   const int32_t *noff, __m512 acc, int NC)
{
	__m512i s[4];

	s[0] = _mm512_set1_epi32(*noff);
	QV_UNROLL
	for (int c = 1; c < NC; c++)
		s[c] = _mm512_setzero_si512();
	QV_UNROLL
	for (int c = 0; c < 8; c++)
		s[c % NC] = qv__dpbusd_bcst(s[c % NC], u[c], q + 4 * c);
	QV_UNROLL
	for (int c = 1; c < NC; c++)
		s[0] = _mm512_add_epi32(s[0], s[c]);
	return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[0]), _mm512_mul_ps(dw, _mm512_set1_ps(xd)), acc);
}

/*
 * A group's per-block activation terms side by side (block j of a K
 * chunk: token k's scale d[k] and negated offset n[k]), copied once per
 * call from the per-token rows of kern_gemm_args: the streaming tile
 * reaches every token's terms through one pointer (the 16 per-token row
 * pointers had been spilled and reloaded every block), and the offsets
 * come ready for qv__dot_n(). K runs in chunks of QV_XB blocks so the
 * copy stays on the stack (32 KiB a group); a tile's accumulators go
 * through y between chunks (an exact store and reload, as the panel
 * path's), so results do not change. Rows of up to 16384 elements are
 * one chunk: chunks of 128 blocks cut TinyLlama's 5632-wide down rows
 * into two passes over the tiles, which broke the streaming order and
 * the next-tile prefetch (a one-token step +14% of CPU, Zen 4).
 */
#define QV_XB 512

struct qv_xsum {
	float d[QV_TOK];
	int32_t n[QV_TOK];
} __attribute__((aligned(64)));

/* 16 x 16 dwords transposed: r[i] lane j <-> r[j] lane i. */
QV_INLINE void qv__transpose16(__m512i r[16])
{
	__m512i t[16];

	QV_UNROLL
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
		t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
	}
	QV_UNROLL
	for (int i = 0; i < 16; i += 4) {
		r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
		r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
		r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
		r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
	}
	/* each 128-bit lane now holds its 4 x 4 block transposed; the two
	 * rounds of 128-bit shuffles put the blocks in place */
	QV_UNROLL
	for (int i = 0; i < 4; i++) {
		t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
		t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
		t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
		t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
	}
	QV_UNROLL
	for (int i = 0; i < 4; i++) {
		r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
		r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
		r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
		r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
	}
}

/* xs[0, n) for tokens [t, t + T) (T <= 8), blocks [b0, b0 + n): 16 blocks
 * at a time as one 16 x 16 transpose of the tokens' scale and offset rows
 * (a scalar copy was ~3% of the 8-token products at 2 threads: it runs
 * once per chunk of rows, 16 rows for TinyLlama's k and v). */
static void qv__xsum(uint32_t wt, const struct kern_gemm_args *a, size_t t, size_t T, size_t b0,
		     size_t n, struct qv_xsum *xs)
{
	const int sh = wt == DTYPE_Q8_0 ? 4 : 0;

	for (size_t j = 0; j < n; j += 16) {
		const size_t m = n - j < 16 ? n - j : 16;
		const __mmask16 k16 = (__mmask16)((1u << m) - 1);
		__m512i r[16];

		for (size_t k = 0; k < QV_TOK; k++) {
			if (k < T) {
				const size_t row = (t + k) * a->xd_stride + b0 + j;
				r[k] = _mm512_maskz_loadu_epi32(k16, a->xd + row);
				r[k + 8] = _mm512_sub_epi32(
					_mm512_setzero_si512(),
					_mm512_slli_epi32(_mm512_maskz_loadu_epi32(k16, a->xs8 + row),
							  sh));
			} else {
				r[k] = r[k + 8] = _mm512_setzero_si512();
			}
		}
		qv__transpose16(r);
		for (size_t i = 0; i < m; i++)
			_mm512_store_si512(&xs[j + i], r[i]);
	}
}

/*
 * Rows [o, o + 16) for tokens [t, t + T), blocks [b0, b0 + n) (their
 * activation terms in xs), weights straight from the file
 * layout (up to 8 tokens: small decode batches). Per block, the 16 rows'
 * bytes are transposed once into eight vectors u[c] whose lane r holds
 * elements 4c..4c+3 of row r (unsigned: Q4_0's nibbles, Q8_0's bytes +
 * 128), so a token's dot products for all 16 rows are eight VPDPBUSD with
 * no reduction after. The next block is unpacked before this one's dots
 * (software pipelining): unpacking is a chain of loads and shuffles that
 * otherwise left the multiplier pipes idle at every block boundary.
 */
QV_INLINE void qv__tile(uint32_t wt, const struct kern_gemm_args *a, const struct qv_xsum *xs,
			size_t o, size_t t, size_t b0, size_t n, int T, int pk)
{
	const size_t bs = qv__bsize(wt), st = a->w_stride, b1 = b0 + n;
	const size_t rs = qv__rs(st, bs, pk), bstep = qv__bstep(bs, pk);
	const char *w = (const char *)a->w + o * st;
	const char *next = qv__tile_ahead(w, st, wt == DTYPE_Q8_0);
	const struct kern_block_q8a *x[QV_TOK];
	__m512 acc[QV_TOK], dw;
	__m512i u[8];

	QV_UNROLL
	for (int k = 0; k < T; k++) {
		x[k] = (const struct kern_block_q8a *)((const char *)a->x + (t + k) * a->x_stride);
		acc[k] = b0 == 0 ? _mm512_setzero_ps()
				 : _mm512_loadu_ps(a->y + (t + k) * a->y_stride + o);
	}
	dw = qv__scales_p(wt, w, rs, b0 * bstep, pk);
	qv__unpack_p(wt, w, rs, b0 * bstep, T > 4, pk, u);
	for (size_t b = b0; b < b1; b++, xs++) {
		/* the last block unpacks itself again rather than branch */
		size_t bn = b + 1 < b1 ? b + 1 : b;
		__m512 dwn = qv__scales_p(wt, w, rs, bn * bstep, pk);
		__m512i un[8];

		qv__prefetch_ahead(next, b, bs);
		qv__unpack_p(wt, w, rs, bn * bstep, T > 4, pk, un);
		QV_UNROLL
		for (int k = 0; k < T; k++)
			acc[k] = qv__dot_n(u, dw, x[k][b].qs, xs->d[k], &xs->n[k], acc[k],
					   T <= 4 ? 2 : 1);
		dw = dwn;
		QV_UNROLL
		for (int c = 0; c < 8; c++)
			u[c] = un[c];
	}
	QV_UNROLL
	for (int k = 0; k < T; k++)
		_mm512_storeu_ps(a->y + (t + k) * a->y_stride + o, acc[k]);
}

/*
 * 9 to 16 tokens (a decode step of that many sequences): rows [o, o + 16)
 * for tokens [0, T), blocks [b0, b0 + n), in one pass over the weights:
 * a block is unpacked once and all T tokens' dots run from the same u
 * vectors (16 accumulators, the 8 u, the scales: 28 of the 32 ZMM, so no
 * software pipelining; 16 tokens of dots, ~160 cycles of the multiply
 * pipes a block, leave the out-of-order core room to load and unpack the
 * next block beside them). Two 8-token passes had unpacked every block
 * twice and read the tile a second time from L2. Tokens 0..7's terms
 * are xs, 8..15's xs + QV_XB (qv__gemm's two groups). A token's qs are
 * reached by one pointer stepped by the row stride (kept opaque to GCC,
 * which otherwise held 16 row pointers and spilled them). Each (row,
 * token) sees qv__dot_n()'s operations in the same order as in the
 * 8-token tile, so the same bits.
 */
QV_INLINE void qv__tile2(uint32_t wt, const struct kern_gemm_args *a, const struct qv_xsum *xs,
			 size_t o, size_t b0, size_t n, int T, int pk)
{
	const size_t bs = qv__bsize(wt), st = a->w_stride, b1 = b0 + n, xst = a->x_stride;
	const size_t rs = qv__rs(st, bs, pk), bstep = qv__bstep(bs, pk);
	const char *w = (const char *)a->w + o * st;
	const char *next = qv__tile_ahead(w, st, wt == DTYPE_Q8_0);
	const char *xb = (const char *)a->x + b0 * sizeof(struct kern_block_q8a);
	__m512 acc[2 * QV_TOK];

	QV_UNROLL
	for (int k = 0; k < T; k++)
		acc[k] = b0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(a->y + k * a->y_stride + o);
	for (size_t b = b0; b < b1; b++, xs++, xb += sizeof(struct kern_block_q8a)) {
		const __m512 dw = qv__scales_p(wt, w, rs, b * bstep, pk);
		const char *p = xb + offsetof(struct kern_block_q8a, qs);
		__m512i u[8];

		qv__prefetch_ahead(next, b, bs);
		qv__unpack_p(wt, w, rs, b * bstep, 1, pk, u);
		QV_UNROLL
		for (int k = 0; k < T; k++) {
			const struct qv_xsum *g = xs + (k / QV_TOK) * QV_XB;

			acc[k] = qv__dot_n(u, dw, (const int8_t *)p, g->d[k % QV_TOK],
					   &g->n[k % QV_TOK], acc[k], 1);
			p += xst;
			__asm__("" : "+r"(p));
		}
	}
	QV_UNROLL
	for (int k = 0; k < T; k++)
		_mm512_storeu_ps(a->y + k * a->y_stride + o, acc[k]);
}

/*
 * One token (decode of one sequence): rows [o, o + 16) for tokens
 * [t, t + T), weights straight from the file layout, each token's terms
 * from its own rows (this was the tile for every T up to 8; one token
 * keeps it, being bound by memory, where the per-call copy below and the
 * other changes only cost: 1-3% slower in cache). Per block, the 16 rows'
 * bytes are transposed once into eight vectors u[c] whose lane r holds
 * elements 4c..4c+3 of row r (unsigned: Q4_0's nibbles, Q8_0's bytes +
 * 128), so a token's dot products for all 16 rows are eight VPDPBUSD with
 * no reduction after. The next block is unpacked before this one's dots
 * (software pipelining): unpacking is a chain of loads and shuffles that
 * otherwise left the multiplier pipes idle at every block boundary.
 */
QV_INLINE void qv__tile1(uint32_t wt, const struct kern_gemm_args *a, size_t o, size_t t, int T,
			 int pk)
{
	const size_t bs = qv__bsize(wt), nb = a->n_in / KERN_QK, st = a->w_stride;
	const size_t rs = qv__rs(st, bs, pk), bstep = qv__bstep(bs, pk);
	const char *w = (const char *)a->w + o * st;
	const char *next = qv__tile_ahead(w, st, wt == DTYPE_Q8_0);
	const struct kern_block_q8a *x[QV_TOK];
	const float *xd[QV_TOK];
	const int32_t *xs[QV_TOK];
	__m512 acc[QV_TOK], dw;
	__m512i u[8];

	QV_UNROLL
	for (int k = 0; k < T; k++) {
		x[k] = (const struct kern_block_q8a *)((const char *)a->x + (t + k) * a->x_stride);
		xd[k] = a->xd + (t + k) * a->xd_stride;
		xs[k] = a->xs8 + (t + k) * a->xd_stride;
		acc[k] = _mm512_setzero_ps();
	}
	dw = qv__scales_p(wt, w, rs, 0, pk);
	qv__unpack_p(wt, w, rs, 0, 0, pk, u);
	for (size_t b = 0; b < nb; b++) {
		/* the last block unpacks itself again rather than branch */
		size_t bn = b + 1 < nb ? b + 1 : b;
		__m512 dwn = qv__scales_p(wt, w, rs, bn * bstep, pk);
		__m512i un[8];

		qv__prefetch_ahead(next, b, bs);
		qv__unpack_p(wt, w, rs, bn * bstep, 0, pk, un);
		QV_UNROLL
		for (int k = 0; k < T; k++)
			acc[k] = qv__dot(wt, u, dw, x[k][b].qs, xd[k][b], xs[k][b], acc[k],
					 T <= 4 ? 2 : 1);
		dw = dwn;
		QV_UNROLL
		for (int c = 0; c < 8; c++)
			u[c] = un[c];
	}
	QV_UNROLL
	for (int k = 0; k < T; k++)
		_mm512_storeu_ps(a->y + (t + k) * a->y_stride + o, acc[k]);
}

/*
 * Many tokens (prefill): a 16-row tile's blocks [b0, b0 + n) are unpacked
 * once into a panel (u vectors and scales, 36 KiB: L1/L2), then every group
 * of 8 tokens runs its dots from the panel with plain loads, instead of
 * each group unpacking the same blocks again. K is cut into chunks of
 * QV_KC blocks so the panel stays that size whatever the row length; a
 * group's accumulators go through y between chunks (an exact store and
 * reload), so each (row, token) still sees acc = fma(...) block after
 * block in order: bit-identical to the streaming tile and to the AVX2 GEMV.
 */
#define QV_KC 64

struct qv_panel {
	__m512i u[QV_KC][8];
	__m512 dw[QV_KC];
};

QV_INLINE void qv__pack(uint32_t wt, const struct kern_gemm_args *a, size_t o, size_t b0,
			size_t n, struct qv_panel *p, int pk)
{
	const size_t bs = qv__bsize(wt), st = a->w_stride;
	const size_t rs = qv__rs(st, bs, pk), bstep = qv__bstep(bs, pk);
	const char *w = (const char *)a->w + o * st;

	for (size_t j = 0; j < n; j++) {
		p->dw[j] = qv__scales_p(wt, w, rs, (b0 + j) * bstep, pk);
		qv__unpack_p(wt, w, rs, (b0 + j) * bstep, 0, pk, p->u[j]);
	}
}

/* Token groups [t0, t0 + ng * 8) (T tokens each; T < 8: one group)
 * against the panel of rows [o, o + 16), blocks [b0, b0 + n). The first
 * group of a tile (t0 = 0) prefetches the same blocks of the next tile
 * into L2 as it goes, so the next pack finds them there: spread over the
 * dots rather than bunched in the pack, where they overflowed the miss
 * queue and the pack waited on DRAM. Every group but the last prefetches
 * the next group's activation blocks into L1 as it goes, block for
 * block, so the next group does not start each of its 8 rows' streams
 * cold: gemm_q q4_0 512 5632 x 2048, one thread, 322-332 -> 327-339
 * GFLOP/s best, alternated, Zen 4 (into L2: no gain). The groups loop
 * here, not in the caller: one call per tile and K chunk. The token's
 * scale comes from its block (x[b].d, the value xd holds): 8 pointers
 * fewer (GCC still keeps the 8 offset-row pointers in vector registers,
 * a VMOVQ back per token and block; staging the offsets, below, removed
 * them without a gain in place). Two VPDPBUSD chains a token
 * whatever T (gemm_q q4_0 64, one thread: ~2% over one chain; staging
 * the groups' negated offsets for a K chunk to start the chains, with K
 * chunks outside the row tiles so the staging is shared, and the chains
 * interleaved across tokens: ran in 81 cycles a block of 8 tokens from
 * L1, the 80-cycle floor of the multiply pipes, but 1-4% slower in
 * gemm_q, the staging and repacking costing more than the body saved). */
QV_INLINE void qv__tile_p(uint32_t wt, const struct kern_gemm_args *a, const struct qv_panel *p,
			  size_t o, size_t t0, size_t ng, size_t b0, size_t n, int T)
{
	const size_t bs = wt == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0)
					   : sizeof(struct kern_block_q4_0);
	const char *next = (const char *)a->w + (o + QV_ROWS) * a->w_stride + b0 * QV_ROWS * bs;

	for (size_t g = 0; g < ng; g++) {
		const size_t t = t0 + g * QV_TOK;
		const int pf = t == 0, apf = g + 1 < ng;
		const struct kern_block_q8a *x[QV_TOK];
		const int32_t *xs[QV_TOK];
		__m512 acc[QV_TOK];

		QV_UNROLL
		for (int k = 0; k < T; k++) {
			x[k] = (const struct kern_block_q8a *)((const char *)a->x +
							       (t + k) * a->x_stride) +
			       b0;
			xs[k] = a->xs8 + (t + k) * a->xd_stride + b0;
			acc[k] = b0 == 0 ? _mm512_setzero_ps()
					 : _mm512_loadu_ps(a->y + (t + k) * a->y_stride + o);
		}
		for (size_t j = 0; j < n; j++) {
			__m512i u[8];
			__m512 dw = p->dw[j];

			if (pf)
				qv__prefetch_ahead(next, j, bs);
			if (apf) {
				QV_UNROLL
				for (int k = 0; k < T; k++)
					_mm_prefetch((const char *)(x[k] + j) + QV_TOK * a->x_stride,
						     _MM_HINT_T0);
			}
			QV_UNROLL
			for (int c = 0; c < 8; c++)
				u[c] = _mm512_load_si512(&p->u[j][c]);
			QV_UNROLL
			for (int k = 0; k < T; k++)
				acc[k] = qv__dot(wt, u, dw, x[k][j].qs, x[k][j].d, xs[k][j], acc[k], 2);
		}
		QV_UNROLL
		for (int k = 0; k < T; k++)
			_mm512_storeu_ps(a->y + (t + k) * a->y_stride + o, acc[k]);
	}
}

/* One function per (type, token count, layout): each keeps its
 * accumulators in registers (inlined into one driver, GCC spilled them). */
/* T <= 8: qv__tile (software-pipelined); 9..16: qv__tile2 (one pass) */
#define QV_TILE_FN(name, wt, T, pk)                                                      \
	static __attribute__((noinline)) void name(const struct kern_gemm_args *a,        \
						   const struct qv_xsum *xs, size_t o,    \
						   size_t t, size_t b0, size_t n)         \
	{                                                                                \
		if ((T) > QV_TOK)                                                        \
			qv__tile2(wt, a, xs, o, b0, n, T, pk);                           \
		else                                                                     \
			qv__tile(wt, a, xs, o, t, b0, n, T, pk);                         \
	}
#define QV_PANEL_FN(name, wt, T)                                                         \
	static __attribute__((noinline)) void name(const struct kern_gemm_args *a,        \
						   const struct qv_panel *p, size_t o,    \
						   size_t t, size_t ng, size_t b0,        \
						   size_t n)                              \
	{                                                                                \
		qv__tile_p(wt, a, p, o, t, ng, b0, n, T);                                \
	}
#define QV_ONE_FN(name, wt, pk)                                                          \
	static __attribute__((noinline)) void name(const struct kern_gemm_args *a, size_t o) \
	{                                                                                \
		qv__tile1(wt, a, o, 0, 1, pk);                                           \
	}
#define QV_PACK_FN(name, wt, pk)                                                         \
	static __attribute__((noinline)) void name(const struct kern_gemm_args *a, size_t o, \
						   size_t b0, size_t n, struct qv_panel *p) \
	{                                                                                \
		qv__pack(wt, a, o, b0, n, p, pk);                                        \
	}
#define QV_TILE_FNS(pre, wt, pk)                                                         \
	QV_TILE_FN(pre##_1, wt, 1, pk)                                                   \
	QV_TILE_FN(pre##_2, wt, 2, pk)                                                   \
	QV_TILE_FN(pre##_3, wt, 3, pk)                                                   \
	QV_TILE_FN(pre##_4, wt, 4, pk)                                                   \
	QV_TILE_FN(pre##_5, wt, 5, pk)                                                   \
	QV_TILE_FN(pre##_6, wt, 6, pk)                                                   \
	QV_TILE_FN(pre##_7, wt, 7, pk)                                                   \
	QV_TILE_FN(pre##_8, wt, 8, pk)                                                   \
	QV_TILE_FN(pre##_9, wt, 9, pk)                                                   \
	QV_TILE_FN(pre##_10, wt, 10, pk)                                                 \
	QV_TILE_FN(pre##_11, wt, 11, pk)                                                 \
	QV_TILE_FN(pre##_12, wt, 12, pk)                                                 \
	QV_TILE_FN(pre##_13, wt, 13, pk)                                                 \
	QV_TILE_FN(pre##_14, wt, 14, pk)                                                 \
	QV_TILE_FN(pre##_15, wt, 15, pk)                                                 \
	QV_TILE_FN(pre##_16, wt, 16, pk)                                                 \
	static const qv_tile_fn pre[2 * QV_TOK + 1] = {                                   \
		NULL,	  pre##_1,  pre##_2,  pre##_3,  pre##_4,  pre##_5,		  \
		pre##_6,  pre##_7,  pre##_8,  pre##_9,  pre##_10, pre##_11,		  \
		pre##_12, pre##_13, pre##_14, pre##_15, pre##_16};
#define QV_PANEL_FNS(pre, wt)                                                            \
	QV_PANEL_FN(pre##_1, wt, 1)                                                      \
	QV_PANEL_FN(pre##_2, wt, 2)                                                      \
	QV_PANEL_FN(pre##_3, wt, 3)                                                      \
	QV_PANEL_FN(pre##_4, wt, 4)                                                      \
	QV_PANEL_FN(pre##_5, wt, 5)                                                      \
	QV_PANEL_FN(pre##_6, wt, 6)                                                      \
	QV_PANEL_FN(pre##_7, wt, 7)                                                      \
	QV_PANEL_FN(pre##_8, wt, 8)                                                      \
	static const qv_panel_fn pre[QV_TOK + 1] = {NULL,     pre##_1, pre##_2,          \
						    pre##_3, pre##_4, pre##_5,          \
						    pre##_6, pre##_7, pre##_8};

typedef void (*qv_tile_fn)(const struct kern_gemm_args *a, const struct qv_xsum *xs, size_t o,
			   size_t t, size_t b0, size_t n);
typedef void (*qv_panel_fn)(const struct kern_gemm_args *a, const struct qv_panel *p, size_t o,
			    size_t t, size_t ng, size_t b0, size_t n);

QV_TILE_FNS(qv__q8, DTYPE_Q8_0, 0)
QV_TILE_FNS(qv__q4, DTYPE_Q4_0, 0)
QV_TILE_FNS(qv__q8p, DTYPE_Q8_0, 1)
QV_TILE_FNS(qv__q4p, DTYPE_Q4_0, 1)
QV_PANEL_FNS(qv__p8, DTYPE_Q8_0)
QV_PANEL_FNS(qv__p4, DTYPE_Q4_0)
QV_ONE_FN(qv__one8, DTYPE_Q8_0, 0)
QV_ONE_FN(qv__one4, DTYPE_Q4_0, 0)
QV_ONE_FN(qv__one8p, DTYPE_Q8_0, 1)
QV_ONE_FN(qv__one4p, DTYPE_Q4_0, 1)
QV_PACK_FN(qv__pack8, DTYPE_Q8_0, 0)
QV_PACK_FN(qv__pack4, DTYPE_Q4_0, 0)
QV_PACK_FN(qv__pack8p, DTYPE_Q8_0, 1)
QV_PACK_FN(qv__pack4p, DTYPE_Q4_0, 1)

/* One type and layout's functions for qv__gemm(). */
struct qv_fns {
	void (*one)(const struct kern_gemm_args *a, size_t o);
	const qv_tile_fn *tile; /* [T], 1..16 tokens */
	const qv_panel_fn *panel;
	void (*pack)(const struct kern_gemm_args *a, size_t o, size_t b0, size_t n,
		     struct qv_panel *p);
};

/* Rows [o0, o1) by whole 16-row tiles; the rows past the last one by
 * `tail` (file layout: the AVX2 level's gemm, same bits; packed: none,
 * the caller aligns). */
static void qv__gemm(uint32_t wt, const struct qv_fns *f, const struct kern_gemm_args *a,
		     size_t o0, size_t o1, kern_gemm_fn tail)
{
	const qv_tile_fn *fn = f->tile;
	const qv_panel_fn *pfn = f->panel;
	const size_t nb = a->n_in / KERN_QK;
	size_t o = o0;

	/* One token too: with the next tile prefetched into L2, a 16-row
	 * tile streamed the TinyLlama decode step in 24 ms of CPU where the
	 * AVX2 GEMV took 33-35 (Zen 4, one thread; in cache on a Zen 5 the
	 * GEMV had been ~10% faster). Same bits either way. */
	if (a->n_tok == 1) {
		for (; o + QV_ROWS <= o1; o += QV_ROWS)
			f->one(a, o);
	} else if (a->n_tok <= QV_SMALL2) {
		/* stream the weights straight from their layout: one group
		 * of terms up to QV_TOK tokens, two past it (one pass) */
		struct qv_xsum xs[2][QV_XB] __attribute__((aligned(64)));
		const size_t g1 = a->n_tok > QV_TOK ? a->n_tok - QV_TOK : 0, g0 = a->n_tok - g1;
		const size_t oe = o0 + (o1 - o0) / QV_ROWS * QV_ROWS;

		for (size_t b0 = 0; b0 < nb; b0 += QV_XB) {
			size_t n = nb - b0 < QV_XB ? nb - b0 : QV_XB;
			qv__xsum(wt, a, 0, g0, b0, n, xs[0]);
			if (g1)
				qv__xsum(wt, a, QV_TOK, g1, b0, n, xs[1]);
			for (o = o0; o < oe; o += QV_ROWS)
				fn[a->n_tok](a, xs[0], o, 0, b0, n);
		}
		o = oe;
	} else {
		/* Row tiles outside, K chunks, token groups inside: a tile's
		 * weights come from memory and are unpacked once for all. */
		struct qv_panel p __attribute__((aligned(64)));
		const size_t nf = a->n_tok / QV_TOK, tr = a->n_tok % QV_TOK;

		for (; o + QV_ROWS <= o1; o += QV_ROWS)
			for (size_t b0 = 0; b0 < nb; b0 += QV_KC) {
				size_t n = nb - b0 < QV_KC ? nb - b0 : QV_KC;
				f->pack(a, o, b0, n, &p);
				if (nf)
					pfn[QV_TOK](a, &p, o, 0, nf, b0, n);
				if (tr)
					pfn[tr](a, &p, o, nf * QV_TOK, 1, b0, n);
			}
	}
	if (o < o1)
		tail(a, o, o1);
}

static const struct qv_fns qv__f8 = {qv__one8, qv__q8, qv__p8, qv__pack8};
static const struct qv_fns qv__f4 = {qv__one4, qv__q4, qv__p4, qv__pack4};
static const struct qv_fns qv__f8p = {qv__one8p, qv__q8p, qv__p8, qv__pack8p};
static const struct qv_fns qv__f4p = {qv__one4p, qv__q4p, qv__p4, qv__pack4p};

/* The packed (aligned) products: rows [o0, o1) in whole groups. */
static void qv__pgemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	qv__gemm(DTYPE_Q8_0, &qv__f8p, a, o0, o1, NULL);
}

static void qv__pgemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	qv__gemm(DTYPE_Q4_0, &qv__f4p, a, o0, o1, NULL);
}

/* Rows [o0, o1) inside one packed group (o0 / 16 == (o1 - 1) / 16): the
 * whole group by `whole` into a buffer, 16 tokens at a time, and the
 * rows asked for copied out. Same bits (each (row, token) result is
 * independent of the batch). Not a fast path: the row chunks handed out
 * by kern__chunk_rows are whole groups. */
static void qv__packed_part(const struct kern_gemm_args *a, size_t o0, size_t o1,
			    kern_gemm_fn whole)
{
	const size_t g = o0 / QV_ROWS * QV_ROWS;
	float y[QV_ROWS * QV_ROWS];

	for (size_t t = 0; t < a->n_tok; t += QV_ROWS) {
		struct kern_gemm_args b = *a;
		const size_t m = a->n_tok - t < QV_ROWS ? a->n_tok - t : QV_ROWS;

		b.w = (const char *)a->w + g * a->w_stride;
		b.x = (const char *)a->x + t * a->x_stride;
		b.n_tok = m;
		b.y = y;
		b.y_stride = QV_ROWS;
		if (a->xd) {
			b.xd = a->xd + t * a->xd_stride;
			b.xs8 = a->xs8 + t * a->xd_stride;
		}
		if (a->xk)
			b.xk = a->xk + t * (a->n_in / 256);
		whole(&b, 0, QV_ROWS);
		for (size_t k = 0; k < m; k++)
			memcpy(a->y + (t + k) * a->y_stride + o0, y + k * QV_ROWS + (o0 - g),
			       (o1 - o0) * sizeof(float));
	}
}

void kern_avx512_packed_split(const struct kern_gemm_args *a, size_t o0, size_t o1,
			      kern_gemm_fn whole)
{
	const size_t a1 = o1 / QV_ROWS * QV_ROWS;

	if (o0 % QV_ROWS) {
		size_t e = (o0 / QV_ROWS + 1) * QV_ROWS;
		e = e < o1 ? e : o1;
		qv__packed_part(a, o0, e, whole);
		o0 = e;
	}
	if (o0 < a1) {
		whole(a, o0, a1);
		o0 = a1;
	}
	if (o0 < o1)
		qv__packed_part(a, o0, o1, whole);
}

void kern_avx512_gemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	qv__gemm(DTYPE_Q8_0, &qv__f8, a, o0, o1, kern_ops_avx2.gemm[DTYPE_Q8_0]);
}

void kern_avx512_gemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	qv__gemm(DTYPE_Q4_0, &qv__f4, a, o0, o1, kern_ops_avx2.gemm[DTYPE_Q4_0]);
}

/* Packed rows (kernels.h KERN_PACKED): the same tiles on the interleaved
 * layout, bit-identical to the two above. Rows [o0, o1): whole groups
 * (kern__chunk_rows aligns), a part-group at either end through
 * qv__packed_part(). */
void kern_avx512_pgemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kern_avx512_packed_split(a, o0, o1, qv__pgemm_q8_0);
}

void kern_avx512_pgemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kern_avx512_packed_split(a, o0, o1, qv__pgemm_q4_0);
}
#endif
