/*
 * kquants_vnni_avx512.h - what the K-quant VNNI tiles (kquants_vnni_avx512.c)
 * and their panel packing (kquants_vnni_pack_avx512.c) share: where a
 * tile's 16 rows and super-blocks lie (struct kv_rows), the loads that
 * transpose 16 bytes of the 16 rows into row lanes, the unpacking of a
 * super-block's values, scales and d into those lanes (used at once by the
 * streaming tiles, stored by the packing), and the panel (struct kv_panel)
 * the packing fills for prefill. Private to those two files,
 * kquants_q6p_avx512.c (packed Q6_K's values, scales and d) and
 * amx_bf16_kq.h (the AMX bf16 tiles' K-quant B tiles), included only by
 * files built with the AVX-512 flags; pure functions but for the two
 * packing functions declared at the end.
 */
#ifndef EMBER_KQUANTS_VNNI_AVX512_H
#define EMBER_KQUANTS_VNNI_AVX512_H

#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"
#include "qvnni_avx512.h"
#include "quants.h"

#define KV_TOK 8
#define KV_KC 8 /* super-blocks per panel */

/* A tile's 16 rows: row 4g + i at w + g * gst + i * rst, its super-block
 * s `step` bytes after s - 1, byte k of a super-block km k bytes past its
 * start (k a multiple of 16, 16 bytes read). File layout: rst = st, gst =
 * 4 st, step = bs, km = 1; packed Q4_K/Q5_K (kernels.h KERN_PACKED,
 * kern_pack_groups16(), groups of 4 in 16-byte units): rst = 16, gst =
 * 4 st, step = 4 bs, km = 4; rst = gst = 0: all the same row, r0 its
 * place in its group (the scales and d are not in its lanes). Packed
 * Q4_K (kern_avx512_pack_q4_k(), kernels_impl.h KERN_K4L_*, groups of 16:
 * a tile is exactly one group): kv_rows_k4l(), w the group, step =
 * KERN_K4L_SB, km = KV_KM_K4L = 16 (a file offset k is 16 k bytes into
 * the super-block: the unit's 4 vectors), kv__rows16() loads the
 * transposed vectors whole. Packed Q6_K (kern_avx512_pack_q6_k(), rows in dword lanes, groups of
 * KERN_Q6L_ROWS = 16: a tile is exactly one group): kv_rows_q6l(), w
 * the group, step = KERN_Q6L_SB, km = KV_KM_Q6L, which marks the form;
 * kv__q6u_sb() reads it and no other field. */
struct kv_rows {
	const char *w;
	size_t rst, gst, step, km, r0;
};

#define KV_KM_Q6L 2  /* kv_rows.km of packed Q6_K (a mark: no 16-byte units) */
#define KV_KM_K4L 16 /* kv_rows.km of packed Q4_K: 16-byte units x 16 rows */

/* The packed Q6_K group at w (its first row's place, a multiple of
 * KERN_Q6L_ROWS rows into the matrix) as a tile's kv_rows. */
QV_INLINE struct kv_rows kv_rows_q6l(const char *w)
{
	return (struct kv_rows){w, 0, 0, KERN_Q6L_SB, KV_KM_Q6L, 0};
}

/* The packed Q4_K group at w (a multiple of KERN_K4L_ROWS rows into the
 * matrix) as a tile's kv_rows. */
QV_INLINE struct kv_rows kv_rows_k4l(const char *w)
{
	return (struct kv_rows){w, 0, 0, KERN_K4L_SB, KV_KM_K4L, 0};
}

/* Bytes `off` .. off + 15 of rows i, i + 4, i + 8, i + 12. */
QV_INLINE __m512i kv__load4(struct kv_rows rp, size_t off, int i)
{
	const char *p = rp.w + off + i * rp.rst;
	__m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p));

	v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + rp.gst)), 1);
	v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 2 * rp.gst)), 2);
	return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 3 * rp.gst)), 3);
}

/* Packed Q4_K's (KV_KM_K4L) kv__rows16(): the unit's 4 vectors as they
 * lie (off already km x the file offset). */
QV_INLINE void kv__rows16_k4l(struct kv_rows rp, size_t off, __m512i v[4])
{
	QV_UNROLL
	for (int c = 0; c < 4; c++)
		v[c] = _mm512_loadu_si512(rp.w + off + 64 * c);
}

/* 16 bytes at `off` of the 16 rows, transposed: v[c] lane r = bytes
 * off + 4c .. off + 4c + 3 of row r. */
QV_INLINE void kv__rows16(struct kv_rows rp, size_t off, __m512i v[4])
{
	if (rp.km == KV_KM_K4L) {
		kv__rows16_k4l(rp, off, v);
		return;
	}
	QV_UNROLL
	for (int i = 0; i < 4; i++)
		v[i] = kv__load4(rp, off, i);
	qv__transpose4(v);
}

/* kv__rows16() for a packed tile (rp.rst = 16: each group's 4 rows side
 * by side in 64 bytes, o a multiple of 4) when `pl` is 1: four whole
 * loads and the transpose, no inserts (12 of its 20 shuffle-port
 * operations), but dword lane 4 i + g then holds row 4 g + i
 * (kv__lane_row() undoes it). Every vector of a tile is read one way, so
 * lanes never mix. pl = 2: packed Q4_K (kv__rows16_k4l(), rows in their
 * lanes), known at compile time. */
QV_INLINE void kv__rows16x(struct kv_rows rp, size_t off, __m512i v[4], int pl)
{
	if (pl == 2) {
		kv__rows16_k4l(rp, off, v);
		return;
	}
	if (!pl) {
		kv__rows16(rp, off, v);
		return;
	}
	QV_UNROLL
	for (int g = 0; g < 4; g++)
		v[g] = _mm512_loadu_si512(rp.w + off + g * rp.gst);
	qv__transpose4(v);
}

/* Row r's lane under kv__rows16x() with pl (its own inverse): lane r of
 * the permuted result. */
QV_INLINE __m512i kv__lane_row(void)
{
	return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

/* The fp16 in the low (hi = 0) or high half of each dword lane, as float. */
QV_INLINE __m512 kv__half(__m512i v, int hi)
{
	if (hi)
		v = _mm512_srli_epi32(v, 16);
	return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

/* Bit `from` of each byte of v moved to bit 4 (other bits: anything). */
QV_INLINE __m512i kv__bit_to4(__m512i v, int from)
{
	return from <= 4 ? _mm512_slli_epi16(v, 4 - from) : _mm512_srli_epi16(v, from - 4);
}

/* 32-blocks 2p (u) and 2p + 1 (v) of the 16 rows, values in row lanes:
 * 32 bytes of each row at qs (byte offset of the super-block's qs), low
 * nibbles block 2p, high nibbles block 2p + 1; Q5_K (`five`) ors in the
 * fifth bit from qh (its 32 bytes transposed, kv__rows16). Rows read by
 * kv__rows16(), the form both callers (the panel's unpack, the AMX tiles'
 * Q5_K) use since the streaming tile reads Q5_K itself (k4t20). */
QV_INLINE void kv__k4_pair(struct kv_rows rp, size_t qs, int p, const __m512i qh[8], int five,
			   __m512i u[8], __m512i v[8])
{
	const __m512i m4 = _mm512_set1_epi8(0x0f);

	kv__rows16(rp, qs + 32 * p * rp.km, u);
	kv__rows16(rp, qs + (16 + 32 * p) * rp.km, u + 4);
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

/* Element values of one Q6_K 32-block: low four bits from l (shifted
 * down 4 if `lhi`), bits 4-5 from h, whose bits 6-7 are clear: one
 * VPTERNLOGD, (l & 0x0f) | (h & ~0x0f). */
QV_INLINE __m512i kv__q6(__m512i l, int lhi, __m512i h)
{
	if (lhi)
		l = _mm512_srli_epi16(l, 4);
	return _mm512_ternarylogic_epi32(l, h, _mm512_set1_epi8(0x0f), 0xE4);
}

/* Byte k (0..3) of each dword lane, unsigned. */
QV_INLINE __m512i kv__byte_u(__m512i v, int k)
{
	return _mm512_and_si512(_mm512_srli_epi32(v, 8 * k), _mm512_set1_epi32(0xff));
}

/* Byte k (0..3) of each dword lane, signed. */
QV_INLINE __m512i kv__byte_s(__m512i v, int k)
{
	return _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * k), 24);
}

/* A panel: KV_KC super-blocks of a tile's 16 rows, in row lanes. */
struct kv_panel {
	__m512i w[KV_KC][8][8]; /* [super-block][32-block][c]: lane r = elements 4c.. of row r */
	/* Q4_K/Q5_K: sc_j (0..7), m pairs m_2i | m_2i+1 << 16 (8..11), d (12)
	 * and dmin (13) as float bits; Q6_K: sc_k (0..15), d (16) */
	__m512i v[KV_KC][17];
};

/* Q4_K/Q5_K header of the 16 rows into v[0..13] (scales: quants.h
 * kern_k4_scale_min()) from its 16 bytes transposed (kv__rows16x()): d,
 * dmin, then the 12 scale bytes in h[1..3]. */
QV_INLINE void kv__k4_head_of(const __m512i h[4], __m512i v[14])
{
	const __m512i m3f = _mm512_set1_epi32(0x3f3f3f3f), m0f = _mm512_set1_epi32(0x0f0f0f0f);
	const __m512i m30 = _mm512_set1_epi32(0x30303030), lo16 = _mm512_set1_epi32(0xffff);

	const __m512i sc0 = _mm512_and_si512(h[1], m3f);
	const __m512i mn0 = _mm512_and_si512(h[2], m3f);
	const __m512i sc1 = _mm512_or_si512(_mm512_and_si512(h[3], m0f),
					    _mm512_and_si512(_mm512_srli_epi32(h[1], 2), m30));
	const __m512i mn1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h[3], 4), m0f),
					    _mm512_and_si512(_mm512_srli_epi32(h[2], 2), m30));
	QV_UNROLL
	for (int j = 0; j < 4; j++) {
		v[j] = kv__byte_u(sc0, j);
		v[j + 4] = kv__byte_u(sc1, j);
	}
	/* bytes m0 m1 m2 m3 -> words (m0, m1), (m2, m3) */
	QV_UNROLL
	for (int i = 0; i < 2; i++) {
		const __m512i a = i ? mn1 : mn0;
		const __m512i b = _mm512_and_si512(a, _mm512_set1_epi32(0x00ff00ff)); /* m0, m2 */
		const __m512i c = _mm512_and_si512(_mm512_srli_epi32(a, 8),
						   _mm512_set1_epi32(0x00ff00ff)); /* m1, m3 */
		v[8 + 2 * i] = _mm512_or_si512(_mm512_and_si512(b, lo16), _mm512_slli_epi32(c, 16));
		v[9 + 2 * i] = _mm512_or_si512(_mm512_srli_epi32(b, 16),
					       _mm512_andnot_si512(lo16, c));
	}
	v[12] = _mm512_castps_si512(kv__half(h[0], 0));
	v[13] = _mm512_castps_si512(kv__half(h[0], 1));
}

/* kv__k4_head_of() of super-block `sb` (byte offset). */
QV_INLINE void kv__k4_head(struct kv_rows rp, size_t sb, __m512i v[14], int pl)
{
	__m512i h[4];

	kv__rows16x(rp, sb, h, pl);
	kv__k4_head_of(h, v);
}

/* Sub-block j's value vectors of 16 rows of packed Q6_K (kernels_impl.h
 * KERN_Q6L_V(j, 0..2): X, Y, Z at p, p + 64, p + 128) as v[i] lane r =
 * elements 16 j + 4 i .. + 3 of row r, unsigned 0..63: V0..V2 are X,
 * Y, Z's low six bits; V3 takes bits 0-1 from X >> 6, 2-3 from Y >> 4,
 * 4-5 from Z >> 2 (two selects; the dword shifts' bits from the next
 * byte go with the last AND). 3 loads and 9 operations (LEVELS.md
 * q6l21). Also the 1..8-token tile's (kquants_q6p_avx512.c). */
QV_INLINE void kv__q6l_sub(const char *p, __m512i v[4])
{
	const __m512i m3f = _mm512_set1_epi8(0x3f), m03 = _mm512_set1_epi8(0x03);
	const __m512i m0f = _mm512_set1_epi8(0x0f);
	const __m512i x = _mm512_loadu_si512(p);
	const __m512i y = _mm512_loadu_si512(p + KERN_Q6L_V(0, 1) - KERN_Q6L_V(0, 0));
	const __m512i z = _mm512_loadu_si512(p + KERN_Q6L_V(0, 2) - KERN_Q6L_V(0, 0));
	const __m512i t01 = _mm512_ternarylogic_epi32(m03, _mm512_srli_epi32(x, 6),
						      _mm512_srli_epi32(y, 4), 0xca);
	const __m512i t3 = _mm512_ternarylogic_epi32(m0f, t01, _mm512_srli_epi32(z, 2), 0xca);

	v[0] = _mm512_and_si512(x, m3f);
	v[1] = _mm512_and_si512(y, m3f);
	v[2] = _mm512_and_si512(z, m3f);
	v[3] = _mm512_and_si512(t3, m3f);
}

/* Sub-block j's 16 int8 scales of a packed Q6_K super-block at p, as
 * int32 in row lanes. */
QV_INLINE __m512i kv__q6l_sc(const char *p, int j)
{
	return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + KERN_Q6L_SC + 16 * j)));
}

/* The 16 rows' d of a packed Q6_K super-block at p, as float. */
QV_INLINE __m512 kv__q6l_d(const char *p)
{
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + KERN_Q6L_D)));
}

/* Packed Q6_K (kern_avx512_pack_q6_k(), kv_rows' packed-Q6_K form: rp.w
 * the 16-row group, which is the whole tile): super-block sb (byte
 * offset, a multiple of KERN_Q6L_SB) of the group as
 * kern_avx512_kv_pack_q6() leaves it (w[b][c] lane r: elements 4c ..
 * 4c + 3 of 32-block b of row r; v[k] scale k, v[16] d). The layout
 * already has rows in dword lanes, so no transpose: sub-block j's value
 * vector i (elements 16 j + 4 i ..) is w[j / 2][4 (j % 2) + i]; its 16
 * int8 scales one VPMOVSXBD, the 16 fp16 d one VCVTPH2PS. */
QV_INLINE void kv__q6u_sb(struct kv_rows rp, size_t sb, __m512i w[8][8], __m512i v[17])
{
	const char *p = rp.w + sb;

	QV_UNROLL
	for (int j = 0; j < 16; j++) {
		kv__q6l_sub(p + KERN_Q6L_V(j, 0), &w[j / 2][4 * (j % 2)]);
		v[j] = kv__q6l_sc(p, j);
	}
	v[16] = _mm512_castps_si512(kv__q6l_d(p));
}

/* File-layout Q6_K: super-block sb (byte offset) of the 16 rows as
 * kv__q6u_sb() leaves the packed form. ql (128 bytes), qh (64), 16 int8
 * scales, d; 32-block 4n + kk takes nibble (kk >= 2: high) of
 * ql[64n + 32(kk & 1) + l] and bits 2kk, 2kk + 1 of qh[32n + l]. */
QV_INLINE void kv__q6_sb(struct kv_rows rp, size_t sb, __m512i w[8][8], __m512i v[17])
{
	__m512i h[4], g[4];

	kv__rows16(rp, sb + 192, h);
	kv__rows16(rp, sb + 194, g); /* d in the top half of g[3] */
	QV_UNROLL
	for (int k = 0; k < 16; k++)
		v[k] = kv__byte_s(h[k / 4], k % 4);
	v[16] = _mm512_castps_si512(kv__half(g[3], 1));
	for (int hf = 0; hf < 2; hf++) {
		__m512i qh[8], ql[8], qa[8], qb[8];

		kv__rows16(rp, sb + 128 + 32 * hf, qh);
		kv__rows16(rp, sb + 128 + 32 * hf + 16, qh + 4);
		/* qa: qh bits 0-1 and 4-5 (kk 0, 2), qb: bits 2-3 and 6-7
		 * moved down two (kk 1, 3); the others clear */
		QV_UNROLL
		for (int c = 0; c < 8; c++) {
			qa[c] = _mm512_and_si512(qh[c], _mm512_set1_epi8(0x33));
			qb[c] = _mm512_and_si512(_mm512_srli_epi16(qh[c], 2),
						 _mm512_set1_epi8(0x33));
		}
		for (int half = 0; half < 2; half++) {
			kv__rows16(rp, sb + 64 * hf + 32 * half, ql);
			kv__rows16(rp, sb + 64 * hf + 32 * half + 16, ql + 4);
			QV_UNROLL
			for (int hi = 0; hi < 2; hi++) {
				const int kk = half + 2 * hi;

				QV_UNROLL
				for (int c = 0; c < 8; c++) {
					/* qh bits 2kk, 2kk + 1 to bits 4, 5 */
					__m512i q = kk == 0   ? _mm512_slli_epi16(qa[c], 4)
						    : kk == 1 ? _mm512_slli_epi16(qb[c], 4)
						    : kk == 2 ? qa[c]
							      : qb[c];
					w[4 * hf + kk][c] = kv__q6(ql[c], hi, q);
				}
			}
		}
	}
}

/* kquants_vnni_pack_avx512.c: super-blocks [s0, s0 + n) (n <= KV_KC) of
 * the tile rp into the panel pn; Q4_K, or Q5_K when `five`, and Q6_K. */
void kern_avx512_kv_pack_k4(struct kv_rows rp, size_t s0, size_t n, int five, struct kv_panel *pn);
void kern_avx512_kv_pack_q6(struct kv_rows rp, size_t s0, size_t n, struct kv_panel *pn);

#endif
