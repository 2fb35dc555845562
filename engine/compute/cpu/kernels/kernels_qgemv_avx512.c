/*
 * kernels_qgemv_avx512.c - the one-token (decode) Q4_0 and Q8_0 GEMVs of
 * the avx512 level: the 16-row VNNI tile of kernels_qvnni_avx512.c for one
 * token, with fewer instructions per block. Per block b, the 16 rows'
 * exact int32 dot S (row r in lane r), then acc = fma(float(S - offset),
 * dw * dx, acc) block after block: the same operations in the same order
 * as the tile and the AVX2 level, so every row's result is theirs bit for
 * bit and a token's result does not depend on its batch. Pure functions;
 * pool threads call them on disjoint row ranges.
 *
 * What differs from the tile: (1) a block's loads (qs and fp16 scales of
 * the 16 rows) are one asm statement addressing every row from two bases
 * (qg_rows); (2) the scales are packed four to a register by SHL and a
 * 16-bit load into the low word; (3) Q4_0's nibbles are q & 0x0f and
 * q & 0xf0 (16 x the high nibble; exact in VPDPBUSD: at most 240 x 128 x
 * 4 per lane and step) in two chains, S = s_lo + (s_hi >> 4) (exact: s_hi
 * is a multiple of 16), instead of AND, shift, AND per vector. Measured on
 * Zen 4 (LEVELS.md, "Decode GEMV, fifth session"): the loop is bound by
 * getting the file layout into row lanes, not by the multiplies.
 *
 * Packed rows (KERN_PACKED): a block step of 16 blocks (qg__tile's pk),
 * so the tile streams one linear run of 288 (Q4_0) or 544 (Q8_0) bytes a
 * block, "tiled" (kern_avx512_pack_q4_0 / _q8_0 below): the scales in one
 * load, the qs already in row lanes (Q8_0: and + 128), no transpose, no
 * scalar scale loads. In L2 (one thread, Zen 4): Q4_0 34 -> 62 GB/s,
 * Q8_0 see LEVELS.md ("Tiled Q4_0 rows", "Tiled Q8_0 rows").
 *
 * Prefetch of the packed stream (kern_avx512_pack_ahead(), also the
 * packed K-quant GEMVs'): none on AMD, where the hardware prefetchers
 * follow the one linear stream and the instructions cost issue slots;
 * 8 rows ahead into L2 on Intel, where without it one core waited on
 * DRAM at ~2/3 of the rate it streams (LEVELS.md, "Decode prefetch on
 * Intel").
 */
#if defined(__x86_64__)
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"
#include "qvnni_avx512.h"

/*
 * The 16 rows at block b for the asm loads below: every address is a base
 * (p: row 0, p8: row 8) plus st, 3st, 5st or 7st times 1, 2 or 4, so a
 * block costs two pointer increments. Compiled from C (qv__load4,
 * qv__scales), GCC kept the sixteen row offsets in registers, spilled
 * half of them to XMM and moved them back every block (~20 of ~130
 * instructions). The loads read bytes 0..17 (Q4_0) or 0..33 (Q8_0) of
 * block b of the 16 rows only.
 */
struct qg_rows {
	const char *p, *p8; /* block b of rows 0 and 8 */
	size_t st, st3, st5, st7;
};

/* 16 bytes at displacement D of block b of the 16 rows: rows i, i+4,
 * i+8, i+12 in the 128-bit lanes of operand v<i> (v0..v3 or w0..w3). */
#define QG_QS_ASM(D, v)                                                        \
	"vmovdqu32 " #D "(%[p]), %x[" #v "0]\n\t"                              \
	"vinserti32x4 $1, " #D "(%[p],%[st],4), %[" #v "0], %[" #v "0]\n\t"    \
	"vinserti32x4 $2, " #D "(%[p8]), %[" #v "0], %[" #v "0]\n\t"           \
	"vinserti32x4 $3, " #D "(%[p8],%[st],4), %[" #v "0], %[" #v "0]\n\t"   \
	"vmovdqu32 " #D "(%[p],%[st],1), %x[" #v "1]\n\t"                      \
	"vinserti32x4 $1, " #D "(%[p],%[st5],1), %[" #v "1], %[" #v "1]\n\t"   \
	"vinserti32x4 $2, " #D "(%[p8],%[st],1), %[" #v "1], %[" #v "1]\n\t"   \
	"vinserti32x4 $3, " #D "(%[p8],%[st5],1), %[" #v "1], %[" #v "1]\n\t"  \
	"vmovdqu32 " #D "(%[p],%[st],2), %x[" #v "2]\n\t"                      \
	"vinserti32x4 $1, " #D "(%[p],%[st3],2), %[" #v "2], %[" #v "2]\n\t"   \
	"vinserti32x4 $2, " #D "(%[p8],%[st],2), %[" #v "2], %[" #v "2]\n\t"   \
	"vinserti32x4 $3, " #D "(%[p8],%[st3],2), %[" #v "2], %[" #v "2]\n\t"  \
	"vmovdqu32 " #D "(%[p],%[st3],1), %x[" #v "3]\n\t"                     \
	"vinserti32x4 $1, " #D "(%[p],%[st7],1), %[" #v "3], %[" #v "3]\n\t"   \
	"vinserti32x4 $2, " #D "(%[p8],%[st3],1), %[" #v "3], %[" #v "3]\n\t"  \
	"vinserti32x4 $3, " #D "(%[p8],%[st7],1), %[" #v "3], %[" #v "3]\n\t"

/* The fp16 scales (the block's first two bytes) of rows 4g..4g+3 into
 * h<g>, row 4g in the low word. */
#define QG_SC_ASM                                                              \
	"movzwl (%[p],%[st3],1), %k[h0]\n\t"                                   \
	"shl $16, %[h0]\n\t"                                                   \
	"movw (%[p],%[st],2), %w[h0]\n\t"                                      \
	"shl $16, %[h0]\n\t"                                                   \
	"movw (%[p],%[st],1), %w[h0]\n\t"                                      \
	"shl $16, %[h0]\n\t"                                                   \
	"movw (%[p]), %w[h0]\n\t"                                              \
	"movzwl (%[p],%[st7],1), %k[h1]\n\t"                                   \
	"shl $16, %[h1]\n\t"                                                   \
	"movw (%[p],%[st3],2), %w[h1]\n\t"                                     \
	"shl $16, %[h1]\n\t"                                                   \
	"movw (%[p],%[st5],1), %w[h1]\n\t"                                     \
	"shl $16, %[h1]\n\t"                                                   \
	"movw (%[p],%[st],4), %w[h1]\n\t"                                      \
	"movzwl (%[p8],%[st3],1), %k[h2]\n\t"                                  \
	"shl $16, %[h2]\n\t"                                                   \
	"movw (%[p8],%[st],2), %w[h2]\n\t"                                     \
	"shl $16, %[h2]\n\t"                                                   \
	"movw (%[p8],%[st],1), %w[h2]\n\t"                                     \
	"shl $16, %[h2]\n\t"                                                   \
	"movw (%[p8]), %w[h2]\n\t"                                             \
	"movzwl (%[p8],%[st7],1), %k[h3]\n\t"                                  \
	"shl $16, %[h3]\n\t"                                                   \
	"movw (%[p8],%[st3],2), %w[h3]\n\t"                                    \
	"shl $16, %[h3]\n\t"                                                   \
	"movw (%[p8],%[st5],1), %w[h3]\n\t"                                    \
	"shl $16, %[h3]\n\t"                                                   \
	"movw (%[p8],%[st],4), %w[h3]"
#define QG_OUT(v, pre)                                                         \
	[pre##0] "=&v"((v)[0]), [pre##1] "=&v"((v)[1]), [pre##2] "=&v"((v)[2]),  \
		[pre##3] "=&v"((v)[3])
#define QG_H_OUT [h0] "=&r"(h[0]), [h1] "=&r"(h[1]), [h2] "=&r"(h[2]), [h3] "=&r"(h[3])
#define QG_IN(r, bytes)                                                        \
	[p] "r"((r)->p), [p8] "r"((r)->p8), [st] "r"((r)->st), [st3] "r"((r)->st3), \
		[st5] "r"((r)->st5), [st7] "r"((r)->st7), "m"(*(const char(*)[bytes])(r)->p)

QV_INLINE __m512 qg__scales_f32(const uint64_t h[4])
{
	return _mm512_cvtph_ps(_mm256_setr_epi64x((long long)h[0], (long long)h[1],
						  (long long)h[2], (long long)h[3]));
}

/* Q4_0, block b: the qs (displacement 2) and the scales, one statement. */
QV_INLINE __m512 qg__load_q4(const struct qg_rows *r, __m512i v[4])
{
	uint64_t h[4];

	__asm__(QG_QS_ASM(2, v) QG_SC_ASM : QG_OUT(v, v), QG_H_OUT : QG_IN(r, 18));
	return qg__scales_f32(h);
}

/* Packed Q4_0 is tiled (kern_avx512_pack_q4_0): the scales in one load,
 * the qs already in row lanes (no transpose in qg__dots_q4). */
QV_INLINE __m512 qgp__load_q4(const char *p, __m512i v[4])
{
	QV_UNROLL
	for (int c = 0; c < 4; c++)
		v[c] = _mm512_loadu_si512(p + 32 + 64 * c);
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

/* Packed Q8_0 is tiled too (kern_avx512_pack_q8_0): the scales in one
 * load, the qs in row lanes and already + 128: eight plain loads. */
QV_INLINE __m512 qgp__load_q8(const char *p, __m512i u[8])
{
	QV_UNROLL
	for (int c = 0; c < 8; c++)
		u[c] = _mm512_loadu_si512(p + 32 + 64 * c);
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

/* Q4_0: the 16 rows' integer dots of block b (before the -8), row r in
 * lane r. */
QV_INLINE __m512i qg__dots_q4(__m512i v[4], const int8_t *q, int pk)
{
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	__m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();

	if (!pk)
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
			     __m512 acc, int pk)
{
	const struct kern_block_q8a *x = a->x;
	__m512i s = qg__dots_q4(v, x[b].qs, pk);

	s = _mm512_sub_epi32(s, _mm512_set1_epi32(a->xs8[b]));
	return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(a->xd[b])),
			       acc);
}

/* Q8_0, block b of the 16 rows: qs bytes 0..15 in u[0..3], 16..31 in
 * u[4..7] (rows i, i+4, i+8, i+12 in the lanes of u[i]), and the scales;
 * qg__step_q8 transposes them as qv__unpack does and adds the 128. */
QV_INLINE __m512 qg__load_q8(const struct qg_rows *r, __m512i u[8])
{
	uint64_t h[4];

	__asm__(QG_QS_ASM(2, v) QG_QS_ASM(18, w) QG_SC_ASM
		: QG_OUT(u, v), QG_OUT(u + 4, w), QG_H_OUT
		: QG_IN(r, 34));
	return qg__scales_f32(h);
}

QV_INLINE __m512 qg__step_q8(const struct kern_gemm_args *a, size_t b, __m512i u[8], __m512 dw,
			     __m512 acc, int pk)
{
	const struct kern_block_q8a *x = a->x;
	const __m512i x80 = _mm512_set1_epi8((char)0x80);
	__m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();

	if (!pk) { /* tiled (packed): in row lanes and + 128 as loaded */
		qv__transpose4(u);
		qv__transpose4(u + 4);
		QV_UNROLL
		for (int c = 0; c < 8; c++)
			u[c] = _mm512_xor_si512(u[c], x80);
	}
	QV_UNROLL
	for (int c = 0; c < 8; c += 2) {
		s0 = qv__dpbusd_bcst(s0, u[c], x[b].qs + 4 * c);
		s1 = qv__dpbusd_bcst(s1, u[c + 1], x[b].qs + 4 * c + 4);
	}
	/* byte + 128 - 128: xs8 = 8 sum x */
	s0 = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_set1_epi32(16 * a->xs8[b]));
	return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), _mm512_mul_ps(dw, _mm512_set1_ps(a->xd[b])),
			       acc);
}

size_t kern_avx512_pack_ahead(void)
{
	return kern_pack_ahead; /* kern_init() chose it (kernels_select.c) */
}

/* n bytes at p into L2 (a packed block pfo bytes ahead of the one read). */
QV_INLINE void qg__prefetch(const char *p, size_t n)
{
	QV_UNROLL
	for (size_t off = 0; off < n; off += 64)
		_mm_prefetch(p + off, _MM_HINT_T1);
}

/* One 16-row tile of either type over all blocks, the next block's loads
 * issued before this block's step; q8 is a constant in each caller, so
 * each type compiles to its own loop. Prefetch: the tile's
 * (qv__tile_ahead, qv__prefetch_ahead); packed, pfo bytes ahead (0: none). */
QV_INLINE void qg__tile(const struct kern_gemm_args *a, size_t o, int q8, int pk, size_t pfo)
{
	const size_t bs = q8 ? sizeof(struct kern_block_q8_0) : sizeof(struct kern_block_q4_0);
	const size_t nb = a->n_in / KERN_QK, st = a->w_stride;
	const size_t rs = qv__rs(st, bs, pk), bstep = qv__bstep(bs, pk);
	const int nv = q8 ? 8 : 4;
	const char *w = (const char *)a->w + o * st;
	const char *next = qv__tile_ahead(w, st, q8);
	struct qg_rows r = {w, w + 8 * rs, rs, 3 * rs, 5 * rs, 7 * rs};
	__m512 acc = _mm512_setzero_ps(), dw, dwn;
	__m512i u[8], un[8];

	dw = pk ? (q8 ? qgp__load_q8(r.p, u) : qgp__load_q4(r.p, u))
		: (q8 ? qg__load_q8(&r, u) : qg__load_q4(&r, u));
	for (size_t b = 0; b < nb; b++) {
		/* packed rows (one linear stream): no software prefetch, left
		 * to the hardware; with it a decode step's matrix products took
		 * (decode_prof 1 thread, CPU ms, Zen 4, 2 MiB pages) Q4_0 tiled
		 * 25.7-26.4 instead of 18.1-18.5, Q8_0 46.7-47.6 vs 35.1-35.9 */
		if (!pk)
			qv__prefetch_ahead(next, b, bs);
		else if (pfo)
			qg__prefetch(r.p + pfo, bstep);
		/* the next block (the last loads itself again rather than branch) */
		if (b + 1 < nb) {
			r.p += bstep;
			r.p8 += bstep;
		}
		dwn = pk ? (q8 ? qgp__load_q8(r.p, un) : qgp__load_q4(r.p, un))
			 : (q8 ? qg__load_q8(&r, un) : qg__load_q4(&r, un));
		acc = q8 ? qg__step_q8(a, b, u, dw, acc, pk) : qg__step_q4(a, b, u, dw, acc, pk);
		dw = dwn;
		QV_UNROLL
		for (int c = 0; c < nv; c++)
			u[c] = un[c];
	}
	_mm512_storeu_ps(a->y + o, acc);
}

static __attribute__((noinline)) void qg__tile_q4(const struct kern_gemm_args *a, size_t o)
{
	qg__tile(a, o, 0, 0, 0);
}

static __attribute__((noinline)) void qg__tile_q8(const struct kern_gemm_args *a, size_t o)
{
	qg__tile(a, o, 1, 0, 0);
}

static __attribute__((noinline)) void qg__ptile_q4(const struct kern_gemm_args *a, size_t o,
						   size_t pfo)
{
	qg__tile(a, o, 0, 1, pfo);
}

/* Tiled Q8_0 (packed): every load of a block is independent of the
 * previous block's work, so the loads of block b are issued where they
 * are used; no software pipelining (and none of its register copies). */
static __attribute__((noinline)) void qg__ptile_q8(const struct kern_gemm_args *a, size_t o,
						   size_t pfo)
{
	const size_t nb = a->n_in / KERN_QK, bstep = QV_ROWS * sizeof(struct kern_block_q8_0);
	const char *p = (const char *)a->w + o * a->w_stride;
	__m512 acc = _mm512_setzero_ps();

	for (size_t b = 0; b < nb; b++, p += bstep) {
		__m512i u[8];
		__m512 dw = qgp__load_q8(p, u);

		if (pfo)
			qg__prefetch(p + pfo, bstep);

		acc = qg__step_q8(a, b, u, dw, acc, 1);
	}
	_mm512_storeu_ps(a->y + o, acc);
}

/* Whole 16-row tiles by `tile`; rows past the last one by the AVX2 GEMV
 * (same bits). More than one token is not called so (kern_matmul_n), but
 * is exact either way. */
QV_INLINE void qg__gemv(const struct kern_gemm_args *a, size_t o0, size_t o1, uint32_t wt,
			void (*tile)(const struct kern_gemm_args *, size_t))
{
	size_t o = o0;

	if (a->n_tok != 1) {
		(wt == DTYPE_Q8_0 ? kern_avx512_gemm_q8_0 : kern_avx512_gemm_q4_0)(a, o0, o1);
		return;
	}
	for (; o + QV_ROWS <= o1; o += QV_ROWS)
		tile(a, o);
	if (o < o1)
		kern_ops_avx2.gemm[wt](a, o, o1);
}

/* The avx512 level's gemv[DTYPE_Q4_0] and gemv[DTYPE_Q8_0] (kernels_avx512.c). */
void kern_avx512_gemv_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	qg__gemv(a, o0, o1, DTYPE_Q4_0, qg__tile_q4);
}

void kern_avx512_gemv_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	qg__gemv(a, o0, o1, DTYPE_Q8_0, qg__tile_q8);
}

/* Packed rows (KERN_PACKED): whole groups by the tile (more than one
 * token: the packed gemm), part-groups through kern_avx512_packed_split.
 * The prefetch runs kern_avx512_pack_ahead() rows ahead, into the next
 * range's rows at the end of this one (prefetches do not fault; past the
 * matrix they are the next matrix's or unused). */
static void qg__pgemv_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	const size_t pfo = kern_avx512_pack_ahead() * a->w_stride;

	if (a->n_tok != 1) {
		kern_avx512_pgemm_q4_0(a, o0, o1);
		return;
	}
	for (size_t o = o0; o < o1; o += QV_ROWS)
		qg__ptile_q4(a, o, pfo);
}

static void qg__pgemv_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	const size_t pfo = kern_avx512_pack_ahead() * a->w_stride;

	if (a->n_tok != 1) {
		kern_avx512_pgemm_q8_0(a, o0, o1);
		return;
	}
	for (size_t o = o0; o < o1; o += QV_ROWS)
		qg__ptile_q8(a, o, pfo);
}

void kern_avx512_pgemv_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kern_avx512_packed_split(a, o0, o1, qg__pgemv_q4_0);
}

void kern_avx512_pgemv_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kern_avx512_packed_split(a, o0, o1, qg__pgemv_q8_0);
}
#endif

#if defined(__x86_64__)
/* File layout <-> tiled (kernels_impl.h kern_avx512_pack_q4_0 / _q8_0),
 * one 16-row group at a time through tmp (g * nb * bs bytes): per block,
 * the g scales side by side, then qs bytes 4c..4c+3 of row r at
 * 2g + 64c + 4r, each XOR flip (Q8_0: 0x80, the + 128 VPDPBUSD's
 * unsigned operand needs; Q4_0: 0, the nibbles are unsigned). */
static void qg__pack_tiled(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			   void *tmp, uint8_t flip)
{
	const size_t row = nb * bs, nc = (bs - 2) / 4;

	for (size_t o = 0; o < n_out; o += g) {
		uint8_t *grp = (uint8_t *)w + o * row;

		memcpy(tmp, grp, g * row);
		for (size_t b = 0; b < nb; b++)
			for (size_t r = 0; r < g; r++) {
				uint8_t *f = (unpack ? grp : (uint8_t *)tmp) + r * row + b * bs;
				uint8_t *t = (unpack ? (uint8_t *)tmp : grp) + b * g * bs;

				if (unpack)
					memcpy(f, t + 2 * r, 2);
				else
					memcpy(t + 2 * r, f, 2);
				for (size_t c = 0; c < nc; c++) {
					uint8_t *fq = f + 2 + 4 * c, *tq = t + 2 * g + 64 * c + 4 * r;
					uint32_t v;

					memcpy(&v, unpack ? tq : fq, 4);
					v ^= flip * 0x01010101u;
					memcpy(unpack ? fq : tq, &v, 4);
				}
			}
	}
}

void kern_avx512_pack_q4_0(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			   void *tmp)
{
	/* registered for Q4_0 with pack_rows 16 only (kernels_avx512.c) */
	assert(g == QV_ROWS && bs == sizeof(struct kern_block_q4_0));
	qg__pack_tiled(w, n_out, nb, bs, g, unpack, tmp, 0);
}

void kern_avx512_pack_q8_0(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			   void *tmp)
{
	/* registered for Q8_0 with pack_rows 16 only (kernels_avx512.c) */
	assert(g == QV_ROWS && bs == sizeof(struct kern_block_q8_0));
	qg__pack_tiled(w, n_out, nb, bs, g, unpack, tmp, 0x80);
}
#endif
