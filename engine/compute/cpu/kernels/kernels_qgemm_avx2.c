/*
 * kernels_qgemm_avx2.c - the AVX2 level's quantized prefill GEMM (Q4_0 and
 * Q8_0 weights against Q8 activation blocks, two tokens or more); one
 * token (decode) stays in kernels_avx2.c, except on packed rows: their
 * one-token GEMV (qp__gemv) and small batches (qs__small) are below.
 *
 * Layout: as in the decode path, lane r of a vector is row r. A tile is
 * H vectors of 8 rows; vector c of a packed block holds elements 4c..4c+3
 * of every row (row r in bytes 4r..4r+3), so one maddubs against the
 * token's 4 activation bytes broadcast gives every row's pair sums, and
 * one broadcast serves the H vectors. Per block and token that yields
 * each row's exact int32 dot S, and the only float work is
 *   acc = fma(float(S), dw * dx, acc)
 * block after block: the same sequence as the decode path, so a (row,
 * token) result does not depend on tiling, threads or batch size.
 *
 * Q4_0 keeps its nibbles unsigned (0..15): 8 maddubs summed in int16
 * (each lane <= 8 * 2 * 15 * 127 = 30480), one madd to int32, and the -8
 * offset comes off as 8 * sum(x), exactly. Q8_0 uses the sign trick,
 * maddubs(|w|, sign(x, w)) (pairs <= 2 * 128 * 127, so one madd per
 * maddubs, which makes it ~1.5x Q4_0's work per block).
 *
 * Tile: 16 rows (H = 2) x 2 tokens (T = 2) for both types: 4 int sums, 4
 * accumulators, 2 weight vectors and the broadcast fit the 16 YMM
 * registers, and each broadcast feeds two maddubs. llvm-mca (znver3) per
 * block, 8 rows and one token: Q4_0 6.7 cycles, Q8_0 10.1, against 11.7
 * and 12.7 for the former 8 x 4 tile, which spilled; 8 x 4 without
 * spills 7.9 and 11.5; 16 x 3 spills. The tile's blocks are packed
 * QG_KB at a time (L1), and every token of a QG_TOKENS block passes over
 * them T at a time; bench/gemm_q.c times it.
 */
#if defined(__x86_64__)
#include <assert.h>
#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"

#define QG_INLINE static inline __attribute__((always_inline))
#define QG_UNROLL _Pragma("GCC unroll 8")

#define QG_HMAX 2    /* most 8-row vectors per tile */
#define QG_TMAX 2    /* most tokens per pass over the packed blocks */
#define QG_Q4_H 2    /* Q4_0 tile: 16 rows */
#define QG_Q4_T 2    /* x 2 tokens */
#define QG_Q8_H 2    /* Q8_0 tile: 16 rows */
#define QG_Q8_T 2    /* x 2 tokens */
#define QG_KB 16     /* blocks packed at once: 8 KiB (Q4_0) or 16 (Q8_0) */
#define QG_TOKENS 64 /* tokens whose activations stay in L2 */

/* Packed rows (kernels.h KERN_PACKED; kern_avx2_pack_q8_0 below): groups
 * of QP_ROWS rows, block b of the group at group + b * QP_ROWS * bs: the
 * 16 rows' fp16 scales (32 bytes), then the qs as vectors (c, h), vector
 * c of the block for rows 8h..8h+7 (lane r: qs bytes 4c..4c+3 of row
 * 8h+r) at 32 + (2c + h) * 32. */
#define QP_ROWS 16
#define QP_H 2
/* The packed GEMV's prefetch distance, bytes ahead in its one stream,
 * into L2: the hardware streamer stops at each 4 KiB page. Decode step,
 * one thread, CPU ms, Emerald Rapids (loaded), LEVELS.md: Q8_0 none 111-131,
 * 4 KiB 78-79, 8 KiB 85-89, 16 KiB 81-84, 64 KiB 93-101 (file layout
 * 87-92); Q4_0 4 KiB 45, 8-16 KiB 43-46 (file 50-52). */
#define QP_AHEAD 4096
#define qp__vec(blk, c, h) ((blk) + 32 + (size_t)(2 * (c) + (h)) * 32)

/* Packed blocks of a tile of H vectors: block j's vector c for rows
 * 8h..8h+7 is pw[(j * 8 + c) * H + h] (lane r: elements 4c..4c+3 of row
 * 8h+r; Q4_0 nibbles 0..15, low nibbles first; Q8_0 |w|), ps the same for
 * the signed Q8_0 weights, and pd[j * H + h] the rows' scales. */
struct qg_pack {
	__m256i pw[QG_KB * 8 * QG_HMAX];
	__m256i ps[QG_KB * 8 * QG_HMAX];
	__m256 pd[QG_KB * QG_HMAX];
};

/* An empty asm that "changes" v: GCC's reassociation otherwise turns the
 * chain of int16 adds into a tree over all the block's maddubs results,
 * which keeps them all live and spills them (measured: 2x slower). */
#define QG_CHAIN(v) __asm__("" : "+x"(v))

/* 8x8 transpose of 32-bit elements: v[c] lane r <- v[r] lane c. */
QG_INLINE void qg__transpose8(__m256i v[8])
{
	__m256i t[8], u[8];

	QG_UNROLL
	for (int i = 0; i < 8; i += 2) {
		t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
		t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
	}
	QG_UNROLL
	for (int i = 0; i < 8; i += 4) {
		u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
		u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
		u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
		u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
	}
	QG_UNROLL
	for (int i = 0; i < 4; i++) {
		v[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
		v[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
	}
}

/* Block b of the 8 rows from w (`n` <= 8 of them, `stride` bytes apart)
 * as pw[c * H], ps[c * H] (vector c of the block, H apart) and *pd; rows
 * past n are zero. */
QG_INLINE void qg__pack8(uint32_t wt, const char *w, size_t stride, size_t n, size_t b, int H,
			 __m256i *pw, __m256i *ps, __m256 *pd)
{
	const size_t bs = wt == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0)
					   : sizeof(struct kern_block_q4_0);
	uint16_t d[8];

	/* Built in registers: 8 narrow stores then a vector load would stall
	 * on store forwarding every block. */
	QG_UNROLL
	for (size_t r = 0; r < 8; r++) {
		d[r] = 0;
		if (r < n)
			memcpy(&d[r], w + r * stride + b * bs, sizeof(d[r]));
	}
	*pd = _mm256_cvtph_ps(_mm_setr_epi16((short)d[0], (short)d[1], (short)d[2], (short)d[3],
					     (short)d[4], (short)d[5], (short)d[6], (short)d[7]));
	if (wt == DTYPE_Q8_0) {
		__m256i v[8];
		QG_UNROLL
		for (size_t r = 0; r < 8; r++) {
			const struct kern_block_q8_0 *blk =
				(const struct kern_block_q8_0 *)(w + r * stride) + b;
			v[r] = r < n ? _mm256_loadu_si256((const __m256i *)blk->qs)
				     : _mm256_setzero_si256();
		}
		qg__transpose8(v);
		QG_UNROLL
		for (int c = 0; c < 8; c++) {
			ps[c * H] = v[c];
			pw[c * H] = _mm256_abs_epi8(v[c]);
		}
		return;
	}
	/* Rows r and r+4 share a vector; a 4x4 dword transpose gives dword c
	 * of every row, whose low nibbles are chunk c, high nibbles c+4. */
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	__m256i v[4], t[4];
	QG_UNROLL
	for (size_t r = 0; r < 4; r++) {
		const struct kern_block_q4_0 *lo = (const struct kern_block_q4_0 *)(w + r * stride) + b;
		const struct kern_block_q4_0 *hi =
			(const struct kern_block_q4_0 *)(w + (r + 4) * stride) + b;
		__m128i l = r < n ? _mm_loadu_si128((const __m128i *)lo->qs) : _mm_setzero_si128();
		__m128i u = r + 4 < n ? _mm_loadu_si128((const __m128i *)hi->qs)
				      : _mm_setzero_si128();
		v[r] = _mm256_set_m128i(u, l);
	}
	t[0] = _mm256_unpacklo_epi32(v[0], v[1]);
	t[1] = _mm256_unpackhi_epi32(v[0], v[1]);
	t[2] = _mm256_unpacklo_epi32(v[2], v[3]);
	t[3] = _mm256_unpackhi_epi32(v[2], v[3]);
	v[0] = _mm256_unpacklo_epi64(t[0], t[2]);
	v[1] = _mm256_unpackhi_epi64(t[0], t[2]);
	v[2] = _mm256_unpacklo_epi64(t[1], t[3]);
	v[3] = _mm256_unpackhi_epi64(t[1], t[3]);
	QG_UNROLL
	for (int c = 0; c < 4; c++) {
		pw[c * H] = _mm256_and_si256(v[c], m4);
		pw[(c + 4) * H] = _mm256_and_si256(_mm256_srli_epi16(v[c], 4), m4);
	}
}

/* Block j of a tiled 16-row group (kernels_impl.h kern_avx2_pack_q8_0;
 * `blk` its first byte) into the tile at j (H = 2): no transpose, the
 * vectors are already in row lanes. */
QG_INLINE void qg__pack_tiled(uint32_t wt, const char *blk, size_t j, struct qg_pack *p)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);

	QG_UNROLL
	for (int h = 0; h < QP_H; h++) {
		const size_t v = j * 8 * QP_H + (size_t)h;
		p->pd[j * QP_H + (size_t)h] =
			_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
		QG_UNROLL
		for (int c = 0; c < 8; c++) {
			if (wt != DTYPE_Q8_0 && c >= 4)
				break;
			__m256i q = _mm256_loadu_si256((const __m256i *)qp__vec(blk, c, h));
			if (wt == DTYPE_Q8_0) {
				p->ps[v + (size_t)c * QP_H] = q;
				p->pw[v + (size_t)c * QP_H] = _mm256_abs_epi8(q);
			} else {
				p->pw[v + (size_t)c * QP_H] = _mm256_and_si256(q, m4);
				p->pw[v + (size_t)(c + 4) * QP_H] =
					_mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
			}
		}
	}
}

/* Blocks [kb, kb+n) of rows [o, o+R), R <= 8 * H, into p; a packed
 * matrix (wt | KERN_PACKED) is read as its tiled groups (R = 16, H = 2). */
QG_INLINE void qg__pack(uint32_t wt, const struct kern_gemm_args *a, size_t o, size_t R, int H,
			size_t kb, size_t n, struct qg_pack *p)
{
	if (wt & KERN_PACKED) {
		const uint32_t t = wt & ~KERN_PACKED;
		const size_t gb = QP_ROWS * (t == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0)
							     : sizeof(struct kern_block_q4_0));
		const char *g = (const char *)a->w + o * a->w_stride + kb * gb;
		for (size_t j = 0; j < n; j++)
			qg__pack_tiled(t, g + j * gb, j, p);
		return;
	}
	for (size_t j = 0; j < n; j++) {
		QG_UNROLL
		for (int h = 0; h < H; h++) {
			size_t r0 = 8 * (size_t)h, nr = R > r0 ? R - r0 : 0;
			size_t v = j * 8 * (size_t)H + (size_t)h;
			/* rows past the matrix: any in-bounds base, none is read */
			const char *w = (const char *)a->w + (nr ? o + r0 : 0) * a->w_stride;
			/* a constant 8 for full groups drops the per-row checks */
			if (nr >= 8)
				qg__pack8(wt, w, a->w_stride, 8, kb + j, H, &p->pw[v], &p->ps[v],
					  &p->pd[j * (size_t)H + (size_t)h]);
			else
				qg__pack8(wt, w, a->w_stride, nr, kb + j, H, &p->pw[v], &p->ps[v],
					  &p->pd[j * (size_t)H + (size_t)h]);
		}
	}
}

/* Packed blocks [kb, kb+n) against tokens [t, t+T): acc[k * H + h] lane r
 * accumulates (row 8h+r, token t+k). H and T are compile-time constants. */
QG_INLINE void qg__run(uint32_t wt, const struct kern_gemm_args *a, size_t t, int H, int T,
		       size_t kb, size_t n, const struct qg_pack *p, __m256 *accp)
{
	const __m256i ones = _mm256_set1_epi16(1);
	const struct kern_block_q8a *x[QG_TMAX];
	const float *xd[QG_TMAX];
	const int32_t *xs8[QG_TMAX];
	__m256 acc[QG_TMAX][QG_HMAX];

	QG_UNROLL
	for (int k = 0; k < T; k++) {
		x[k] = (const struct kern_block_q8a *)((const char *)a->x +
						       (t + (size_t)k) * a->x_stride) + kb;
		xd[k] = a->xd + (t + (size_t)k) * a->xd_stride + kb;
		xs8[k] = a->xs8 + (t + (size_t)k) * a->xd_stride + kb;
		QG_UNROLL
		for (int h = 0; h < H; h++)
			acc[k][h] = accp[k * H + h];
	}
	for (size_t j = 0; j < n; j++) {
		const __m256i *pw = &p->pw[j * 8 * (size_t)H], *ps = &p->ps[j * 8 * (size_t)H];
		__m256i sum[QG_TMAX][QG_HMAX];
		QG_UNROLL
		for (int c = 0; c < 8; c++) {
			__m256i w[QG_HMAX], sg[QG_HMAX];
			QG_UNROLL
			for (int h = 0; h < H; h++) {
				w[h] = _mm256_load_si256(&pw[c * H + h]);
				QG_CHAIN(w[h]);
				if (wt == DTYPE_Q8_0)
					sg[h] = _mm256_load_si256(&ps[c * H + h]);
			}
			QG_UNROLL
			for (int k = 0; k < T; k++) {
				int32_t q;
				memcpy(&q, x[k][j].qs + 4 * c, sizeof(q));
				__m256i xb = _mm256_set1_epi32(q);
				QG_UNROLL
				for (int h = 0; h < H; h++) {
					__m256i m;
					if (wt == DTYPE_Q8_0) {
						m = _mm256_madd_epi16(
							_mm256_maddubs_epi16(w[h], _mm256_sign_epi8(xb, sg[h])),
							ones);
						sum[k][h] = c == 0 ? m : _mm256_add_epi32(sum[k][h], m);
					} else {
						m = _mm256_maddubs_epi16(w[h], xb);
						sum[k][h] = c == 0 ? m : _mm256_add_epi16(sum[k][h], m);
					}
					QG_CHAIN(sum[k][h]);
				}
			}
		}
		QG_UNROLL
		for (int k = 0; k < T; k++) {
			__m256 dx = _mm256_set1_ps(xd[k][j]);
			__m256i off = _mm256_set1_epi32(xs8[k][j]);
			QG_UNROLL
			for (int h = 0; h < H; h++) {
				__m256i s = sum[k][h];
				if (wt == DTYPE_Q4_0)
					s = _mm256_sub_epi32(_mm256_madd_epi16(s, ones), off);
				acc[k][h] = _mm256_fmadd_ps(
					_mm256_cvtepi32_ps(s),
					_mm256_mul_ps(p->pd[j * (size_t)H + (size_t)h], dx), acc[k][h]);
			}
		}
	}
	QG_UNROLL
	for (int k = 0; k < T; k++)
		QG_UNROLL
		for (int h = 0; h < H; h++)
			accp[k * H + h] = acc[k][h];
}

/* Rows [o, o+R) (R <= 8 * H) x tokens [t0, t1) (at most QG_TOKENS), T
 * tokens at a time. */
QG_INLINE void qg__tile(uint32_t wt, const struct kern_gemm_args *a, size_t o, size_t R, int H,
			int T, size_t t0, size_t t1)
{
	const size_t nb = a->n_in / KERN_QK;
	struct qg_pack p;
	__m256 acc[QG_TOKENS * QG_HMAX];
	float out[8 * QG_HMAX] __attribute__((aligned(32)));

	for (size_t i = 0; i < (t1 - t0) * (size_t)H; i++)
		acc[i] = _mm256_setzero_ps();
	for (size_t kb = 0; kb < nb; kb += QG_KB) {
		size_t n = nb - kb < QG_KB ? nb - kb : QG_KB;
		qg__pack(wt, a, o, R, H, kb, n, &p);
		size_t t = t0;
		for (; t + (size_t)T <= t1; t += (size_t)T)
			qg__run(wt & ~KERN_PACKED, a, t, H, T, kb, n, &p,
				acc + (t - t0) * (size_t)H);
		/* leftover tokens: the per-token sequence does not depend on T */
		for (; t < t1; t++)
			qg__run(wt & ~KERN_PACKED, a, t, H, 1, kb, n, &p,
				acc + (t - t0) * (size_t)H);
	}
	for (size_t t = t0; t < t1; t++) {
		QG_UNROLL
		for (int h = 0; h < H; h++)
			_mm256_store_ps(out + 8 * h, acc[(t - t0) * (size_t)H + (size_t)h]);
		memcpy(a->y + t * a->y_stride + o, out, R * sizeof(float));
	}
}

QG_INLINE void qg__gemm(uint32_t wt, const struct kern_gemm_args *a, size_t o0, size_t o1, int H,
			int T)
{
	const size_t rows = 8 * (size_t)H;

	for (size_t tb = 0; tb < a->n_tok; tb += QG_TOKENS) {
		size_t te = a->n_tok - tb > QG_TOKENS ? tb + QG_TOKENS : a->n_tok;
		for (size_t o = o0; o < o1; o += rows)
			qg__tile(wt, a, o, o1 - o < rows ? o1 - o : rows, H, T, tb, te);
	}
}

void kern_avx2_qgemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	qg__gemm(DTYPE_Q8_0, a, o0, o1, QG_Q8_H, QG_Q8_T);
}

void kern_avx2_qgemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	qg__gemm(DTYPE_Q4_0, a, o0, o1, QG_Q4_H, QG_Q4_T);
}

/* ---- packed rows (KERN_PACKED) ------------------------------------------------ */

static_assert(QG_Q8_H == QP_H && QG_Q4_H == QP_H, "a prefill tile is one packed group");

/*
 * One token over tiled groups [o0, o1): per block, the scales in one
 * load and the 16 rows' qs as 2 x 8 (Q8_0) or 2 x 4 (Q4_0) plain loads
 * in row lanes, against the token's dword c broadcast: the same exact
 * int32 S per (row, block) as the file-layout GEMV (kernels_avx2.c
 * avx2__gemv_q) and the same acc = fma(float(S), dw * dx, acc), so the
 * same bits, without its scale gather and its add-transpose. A group is
 * one linear stream (544 / 288 bytes a block), prefetched QP_AHEAD on;
 * QG_CHAIN keeps the int sums a chain (as a tree, GCC spilled them and
 * the accumulators).
 */
QG_INLINE void qp__gemv(uint32_t wt, const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	const size_t bs = wt == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0)
					   : sizeof(struct kern_block_q4_0);
	const size_t nb = a->n_in / KERN_QK, gb = QP_ROWS * bs;
	const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0f);
	const struct kern_block_q8a *x = a->x;

	assert(o0 % QP_ROWS == 0 && o1 % QP_ROWS == 0);
	for (size_t o = o0; o < o1; o += QP_ROWS) {
		const char *g = (const char *)a->w + o * a->w_stride;
		__m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();

		for (size_t b = 0; b < nb; b++) {
			const char *blk = g + b * gb;
			const int8_t *xq = x[b].qs;
			__m256i s0, s1;

			QG_UNROLL
			for (size_t off = 0; off < gb; off += 64)
				_mm_prefetch(blk + QP_AHEAD + off, _MM_HINT_T1);

			if (wt == DTYPE_Q8_0) {
				QG_UNROLL
				for (int c = 0; c < 8; c++) {
					int32_t q;
					memcpy(&q, xq + 4 * c, sizeof(q));
					const __m256i xb = _mm256_set1_epi32(q);
					const __m256i w0 = _mm256_loadu_si256(
						(const __m256i *)qp__vec(blk, c, 0));
					const __m256i w1 = _mm256_loadu_si256(
						(const __m256i *)qp__vec(blk, c, 1));
					__m256i m0 = _mm256_madd_epi16(
						_mm256_maddubs_epi16(_mm256_abs_epi8(w0),
								     _mm256_sign_epi8(xb, w0)),
						ones);
					__m256i m1 = _mm256_madd_epi16(
						_mm256_maddubs_epi16(_mm256_abs_epi8(w1),
								     _mm256_sign_epi8(xb, w1)),
						ones);
					s0 = c == 0 ? m0 : _mm256_add_epi32(s0, m0);
					s1 = c == 0 ? m1 : _mm256_add_epi32(s1, m1);
					QG_CHAIN(s0);
					QG_CHAIN(s1);
				}
			} else {
				QG_UNROLL
				for (int c = 0; c < 4; c++) {
					int32_t ql, qh;
					memcpy(&ql, xq + 4 * c, sizeof(ql));
					memcpy(&qh, xq + 16 + 4 * c, sizeof(qh));
					const __m256i xl = _mm256_set1_epi32(ql), xh = _mm256_set1_epi32(qh);
					const __m256i w0 = _mm256_loadu_si256(
						(const __m256i *)qp__vec(blk, c, 0));
					const __m256i w1 = _mm256_loadu_si256(
						(const __m256i *)qp__vec(blk, c, 1));
					/* each int16 lane at most 8 * 2 * 15 * 127 = 30480 */
					__m256i m0 = _mm256_add_epi16(
						_mm256_maddubs_epi16(_mm256_and_si256(w0, m4), xl),
						_mm256_maddubs_epi16(
							_mm256_and_si256(_mm256_srli_epi16(w0, 4), m4), xh));
					__m256i m1 = _mm256_add_epi16(
						_mm256_maddubs_epi16(_mm256_and_si256(w1, m4), xl),
						_mm256_maddubs_epi16(
							_mm256_and_si256(_mm256_srli_epi16(w1, 4), m4), xh));
					s0 = c == 0 ? m0 : _mm256_add_epi16(s0, m0);
					s1 = c == 0 ? m1 : _mm256_add_epi16(s1, m1);
					QG_CHAIN(s0);
					QG_CHAIN(s1);
				}
				const __m256i off = _mm256_set1_epi32(a->xs8[b]);
				s0 = _mm256_sub_epi32(_mm256_madd_epi16(s0, ones), off);
				s1 = _mm256_sub_epi32(_mm256_madd_epi16(s1, ones), off);
			}
			const __m256 dx = _mm256_set1_ps(a->xd[b]);
			const __m256 d0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
			const __m256 d1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16)));
			acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_mul_ps(d0, dx), acc0);
			acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), _mm256_mul_ps(d1, dx), acc1);
		}
		_mm256_storeu_ps(a->y + o, acc0);
		_mm256_storeu_ps(a->y + o + 8, acc1);
	}
}

/*
 * Small batches (2 .. QS_MAX tokens, a batched decode step) over tiled
 * groups: the rows are streamed once, from memory, and every token is
 * applied to them while they are in L1/L2, with none of the prefill's
 * copying into qg_pack (which cost as much as the products at a few
 * tokens). Per group: its 8-row halves h in turn, and per half the tokens
 * QS_T at a time, each pass over all the group's blocks with the QS_T
 * accumulators in registers (QS_T int sums + QS_T accumulators + the
 * weights, |w| and the broadcast fit the 16 YMM registers): a weight
 * vector, its |w| (Q8_0) or its two nibble vectors (Q4_0) are made once
 * for QS_T tokens. The first pass (h 0, first tokens) reads the stream
 * and prefetches it as the GEMV does; the others find it in cache (a
 * group's row bytes: 16 x n_in x 34/32 for Q8_0, 34 KiB at n_in 2048),
 * and each pass prefetches a share of the next group (qs__small).
 * Per (row, token) the int32 S per block and acc = fma(float(S), dw *
 * dx, acc) block after block: qp__gemv()'s sequence, so its bits.
 */
#define QS_T 4      /* tokens per pass */
#define QS_MAX 12   /* most tokens taken this way (16: slower than the tile, LEVELS.md) */

/* What a pass prefetches: the stream QP_AHEAD on (ahead, the first pass
 * of a group), and len bytes at `at` (its share of the next group), per
 * bytes a block. */
struct qs_pf {
	int ahead;
	const char *at;
	size_t len, per;
};

QG_INLINE void qs__pass(uint32_t wt, const struct kern_gemm_args *a, const char *g, int h,
			size_t t, int T, const struct qs_pf *pf, float *y)
{
	const size_t bs = wt == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0)
					   : sizeof(struct kern_block_q4_0);
	const size_t nb = a->n_in / KERN_QK, gb = QP_ROWS * bs;
	const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0f);
	const int8_t *xq[QS_T];
	const float *xd[QS_T];
	const int32_t *xs8[QS_T];
	__m256 acc[QS_T];

	QG_UNROLL
	for (int k = 0; k < T; k++) {
		xq[k] = ((const struct kern_block_q8a *)((const char *)a->x +
							 (t + (size_t)k) * a->x_stride))->qs;
		xd[k] = a->xd + (t + (size_t)k) * a->xd_stride;
		xs8[k] = a->xs8 + (t + (size_t)k) * a->xd_stride;
		acc[k] = _mm256_setzero_ps();
	}
	for (size_t b = 0; b < nb; b++) {
		const char *blk = g + b * gb;
		const size_t xo = b * sizeof(struct kern_block_q8a);
		__m256i s[QS_T];

		if (pf->ahead) {
			QG_UNROLL
			for (size_t off = 0; off < gb; off += 64)
				_mm_prefetch(blk + QP_AHEAD + off, _MM_HINT_T1);
		}
		for (size_t off = b * pf->per; off < (b + 1) * pf->per && off < pf->len; off += 64)
			_mm_prefetch(pf->at + off, _MM_HINT_T1);
		if (wt == DTYPE_Q8_0) {
			QG_UNROLL
			for (int c = 0; c < 8; c++) {
				const __m256i w = _mm256_loadu_si256((const __m256i *)qp__vec(blk, c, h));
				const __m256i aw = _mm256_abs_epi8(w);
				QG_UNROLL
				for (int k = 0; k < T; k++) {
					int32_t q;
					memcpy(&q, xq[k] + xo + 4 * c, sizeof(q));
					__m256i m = _mm256_madd_epi16(
						_mm256_maddubs_epi16(
							aw, _mm256_sign_epi8(_mm256_set1_epi32(q), w)),
						ones);
					s[k] = c == 0 ? m : _mm256_add_epi32(s[k], m);
					QG_CHAIN(s[k]);
				}
			}
		} else {
			QG_UNROLL
			for (int c = 0; c < 4; c++) {
				const __m256i w = _mm256_loadu_si256((const __m256i *)qp__vec(blk, c, h));
				const __m256i lo = _mm256_and_si256(w, m4);
				const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
				QG_UNROLL
				for (int k = 0; k < T; k++) {
					int32_t ql, qh;
					memcpy(&ql, xq[k] + xo + 4 * c, sizeof(ql));
					memcpy(&qh, xq[k] + xo + 16 + 4 * c, sizeof(qh));
					/* each int16 lane at most 8 * 2 * 15 * 127 = 30480 */
					__m256i m = _mm256_add_epi16(
						_mm256_maddubs_epi16(lo, _mm256_set1_epi32(ql)),
						_mm256_maddubs_epi16(hi, _mm256_set1_epi32(qh)));
					s[k] = c == 0 ? m : _mm256_add_epi16(s[k], m);
					QG_CHAIN(s[k]);
				}
			}
			QG_UNROLL
			for (int k = 0; k < T; k++)
				s[k] = _mm256_sub_epi32(_mm256_madd_epi16(s[k], ones),
							_mm256_set1_epi32(xs8[k][b]));
		}
		const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
		QG_UNROLL
		for (int k = 0; k < T; k++)
			acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[k]),
						 _mm256_mul_ps(d, _mm256_set1_ps(xd[k][b])), acc[k]);
	}
	QG_UNROLL
	for (int k = 0; k < T; k++)
		_mm256_storeu_ps(y + (t + (size_t)k) * a->y_stride + 8 * (size_t)h, acc[k]);
}

/* One function per (type, tokens per pass): T a constant, loops unrolled. */
#define QS_PASS_FN(name, wt, T)                                                             \
	static __attribute__((noinline)) void name(const struct kern_gemm_args *a,          \
						   const char *g, int h, size_t t,            \
						   const struct qs_pf *pf, float *y)          \
	{                                                                                   \
		qs__pass(wt, a, g, h, t, T, pf, y);                                         \
	}
QS_PASS_FN(qs__q8_4, DTYPE_Q8_0, 4)
QS_PASS_FN(qs__q8_3, DTYPE_Q8_0, 3)
QS_PASS_FN(qs__q8_2, DTYPE_Q8_0, 2)
QS_PASS_FN(qs__q8_1, DTYPE_Q8_0, 1)
QS_PASS_FN(qs__q4_4, DTYPE_Q4_0, 4)
QS_PASS_FN(qs__q4_3, DTYPE_Q4_0, 3)
QS_PASS_FN(qs__q4_2, DTYPE_Q4_0, 2)
QS_PASS_FN(qs__q4_1, DTYPE_Q4_0, 1)

typedef void (*qs_pass_fn)(const struct kern_gemm_args *a, const char *g, int h, size_t t,
			   const struct qs_pf *pf, float *y);

/* Groups [o0, o1) x the call's 2 .. QS_MAX tokens; pass[T - 1] takes T.
 * Each of a group's passes also prefetches its share of the next group
 * (up to the matrix's last row, y_stride, as the one-token paths do:
 * the thread's next chunk follows), so the stream is read during all of
 * them, not only the first. */
static void qs__small(const qs_pass_fn pass[QS_T], const struct kern_gemm_args *a, size_t o0,
		      size_t o1)
{
	const size_t np = QP_H * ((a->n_tok + QS_T - 1) / QS_T), nb = a->n_in / KERN_QK;
	const size_t gsz = QP_ROWS * a->w_stride;

	for (size_t o = o0; o < o1; o += QP_ROWS) {
		const char *g = (const char *)a->w + o * a->w_stride;
		const int next = o + 2 * QP_ROWS <= a->y_stride;
		struct qs_pf pf = {.ahead = 1};
		size_t p = 0;
		for (int h = 0; h < QP_H; h++) {
			for (size_t t = 0; t < a->n_tok; t += QS_T, p++, pf.ahead = 0) {
				size_t n = a->n_tok - t < QS_T ? a->n_tok - t : QS_T;
				/* lines [p, p + 1) * gsz / np of the next group */
				size_t b0 = p * gsz / np / 64 * 64, b1 = (p + 1) * gsz / np / 64 * 64;
				if (p + 1 == np)
					b1 = gsz;
				pf.at = g + gsz + b0;
				pf.len = next ? b1 - b0 : 0;
				pf.per = (pf.len + nb * 64 - 1) / (nb * 64) * 64;
				pass[n - 1](a, g, h, t, &pf, a->y + o);
			}
		}
	}
}

void kern_avx2_pgemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	static const qs_pass_fn pass[QS_T] = {qs__q8_1, qs__q8_2, qs__q8_3, qs__q8_4};

	assert(o0 % QP_ROWS == 0 && o1 % QP_ROWS == 0);
	if (a->n_tok <= QS_MAX)
		qs__small(pass, a, o0, o1);
	else
		qg__gemm(DTYPE_Q8_0 | KERN_PACKED, a, o0, o1, QG_Q8_H, QG_Q8_T);
}

void kern_avx2_pgemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	static const qs_pass_fn pass[QS_T] = {qs__q4_1, qs__q4_2, qs__q4_3, qs__q4_4};

	assert(o0 % QP_ROWS == 0 && o1 % QP_ROWS == 0);
	if (a->n_tok <= QS_MAX)
		qs__small(pass, a, o0, o1);
	else
		qg__gemm(DTYPE_Q4_0 | KERN_PACKED, a, o0, o1, QG_Q4_H, QG_Q4_T);
}

void kern_avx2_pgemv_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	if (a->n_tok != 1)
		kern_avx2_pgemm_q8_0(a, o0, o1);
	else
		qp__gemv(DTYPE_Q8_0, a, o0, o1);
}

void kern_avx2_pgemv_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	if (a->n_tok != 1)
		kern_avx2_pgemm_q4_0(a, o0, o1);
	else
		qp__gemv(DTYPE_Q4_0, a, o0, o1);
}

/* Moves one group's n_blk blocks between the file layout (`f`, rows
 * `row` bytes apart) and the tiled one (`p`): plain byte moves, the
 * layout above; to_tiled 0 moves back. */
static void qp__move_group(char *p, char *f, size_t nb, size_t bs, size_t row, int to_tiled)
{
	for (size_t b = 0; b < nb; b++) {
		char *blk = p + b * QP_ROWS * bs;
		for (size_t r = 0; r < QP_ROWS; r++) {
			char *fb = f + r * row + b * bs;
			char *d = to_tiled ? blk + 2 * r : fb, *s = to_tiled ? fb : blk + 2 * r;
			memcpy(d, s, 2);
			for (size_t c = 0; c < (bs - 2) / 4; c++) {
				char *t = qp__vec(blk, c, r / 8) + 4 * (r % 8);
				memcpy(to_tiled ? t : fb + 2 + 4 * c, to_tiled ? fb + 2 + 4 * c : t, 4);
			}
		}
	}
}

/* The kern_pack_fn of both types (pack_rows 16): each group through tmp. */
static void qp__pack(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack, void *tmp)
{
	const size_t row = nb * bs, gsz = QP_ROWS * row;

	assert(g == QP_ROWS && n_out % QP_ROWS == 0);
	(void)g;
	for (size_t o = 0; o < n_out; o += QP_ROWS) {
		char *grp = (char *)w + o * row;
		memcpy(tmp, grp, gsz);
		if (unpack)
			qp__move_group(tmp, grp, nb, bs, row, 0);
		else
			qp__move_group(grp, tmp, nb, bs, row, 1);
	}
}

void kern_avx2_pack_q8_0(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			 void *tmp)
{
	assert(bs == sizeof(struct kern_block_q8_0));
	qp__pack(w, n_out, nb, bs, g, unpack, tmp);
}

void kern_avx2_pack_q4_0(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			 void *tmp)
{
	assert(bs == sizeof(struct kern_block_q4_0));
	qp__pack(w, n_out, nb, bs, g, unpack, tmp);
}
#endif
