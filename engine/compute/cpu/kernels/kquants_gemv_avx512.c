/*
 * kquants_gemv_avx512.c - the Q4_K, Q5_K and Q6_K one-token GEMVs on the
 * AVX-512 VNNI level: kquants_gemv.h's steps with the ZMM row bodies of
 * kquants_gemv_zmm.h (KG_ZMM; per 128 weights two VPDPBUSD, one
 * VPACKSSDW, one VPDPWSSD). KG_MADD serves the shared code's unused AVX2
 * bodies only.
 *
 * Also packed Q5_K (kernels.h KERN_PACKED, groups of KG_R = 4 rows
 * interleaved 16 bytes at a time, so the step reads one linear stream:
 * LEVELS.md, "Packed rows"), with its own body (kp_k4: four rows in the
 * lanes of one ZMM). Q4_K's and Q6_K's packs (groups of 16 rows in dword
 * lanes, kernels_impl.h KERN_K4L_*, KERN_Q6L_*): the SIMD packers a model
 * load runs (kern_avx512_pack_q4_k(), _q6_k()), their scalar unpacks; their
 * one-token products are the VNNI tiles at T = 1.
 */
#if defined(__x86_64__)
#include <assert.h>
#include <immintrin.h>
#include <string.h>

#include "kernels_impl.h"
#include "quants.h"
#include "qvnni_avx512.h"

#define KG_FN(name) kern_avx512_##name
#define KG_ZMM 1
#define KG_CHAINS 2
#define KG_MADD(acc, p, s) _mm256_dpwssd_epi32((acc), (p), (s))
#define KG_GEMM_Q4_K kern_avx512_vnni_gemm_q4_k
#define KG_GEMM_Q5_K kern_avx512_vnni_gemm_q5_k
#define KG_GEMM_Q6_K kern_avx512_vnni_gemm_q6_k
#define KG_GEMM_Q2_K kern_avx512_gemm_q2_k
#define KG_GEMM_Q3_K kern_avx512_gemm_q3_k

#include "kquants_gemv.h"

/* Bit `from` of each byte of v moved to bit 4 (other bits: anything). */
KG_INLINE __m512i kp_bit_to4(__m512i v, int from)
{
	return from <= 4 ? _mm512_slli_epi16(v, 4 - from) : _mm512_srli_epi16(v, from - 4);
}

/* kp_k4()'s float step: lane r of is / mins row r's four partial sums,
 * hd the super-block's header lanes (d, dmin in dword 0). */
static inline __m128 kp_q4k_step(__m128 acc, __m512i is, __m512i mins, __m512i hd, float xd,
				 __m512i red, __m128i dsel)
{
	/* lane r: [is 0 + 2, is 1 + 3, mins 0 + 2, mins 1 + 3], then the sums */
	const __m512i t =
		_mm512_add_epi32(_mm512_unpacklo_epi64(is, mins), _mm512_unpackhi_epi64(is, mins));
	const __m512i u = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_CDAB));
	/* [isum rows 0..3, msum rows 0..3, (d, dmin) rows 0..3, -] */
	const __m512i imd = _mm512_permutex2var_epi32(u, red, hd);
	const __m128i dd = _mm_shuffle_epi8(_mm512_extracti32x4_epi32(imd, 2), dsel);

	return kz_step_dmin4(acc, _mm512_castsi512_si256(imd), _mm_cvtph_ps(dd),
			     _mm_cvtph_ps(_mm_unpackhi_epi64(dd, dd)), xd);
}

/* One packed group of four Q5_K rows (o a multiple of 4; until k4r23 also
 * Q4_K's, LEVELS.md), interleaved 16 bytes at a time (kern_pack_groups16()): byte k of row
 * r's super-block s at group + 4 s bs + (4 (k / 16) + r) 16 + k % 16.
 * So one ZMM load holds
 * the same 16 bytes of the four rows, row r in 128-bit lane r: the header
 * (d, dmin, 12 scale bytes), then qs chunk j (bytes 16j .. 16j + 15: 32
 * values, low nibbles of sub-block 2 (j / 2), high ones of 2 (j / 2) + 1,
 * after the two qh chunks) against the activations' 16 bytes broadcast
 * to the four lanes. Each
 * sub-block's 8-product partial sums stay in lanes (at most 8 x 31 x 128:
 * int16), two sub-blocks are packed by one VPACKSSDW and scaled by one
 * VPDPWSSD whose scales (VPSHUFB of the decoded row lanes) serve the four
 * rows at once: per 1024 weights 16 VPDPBUSD, 4 VPACKSSDW, 4 VPSHUFB, 4
 * VPDPWSSD, where the per-row body takes 16, 8, 8 VPERMW, 8 and a 4-row
 * reduce. Same integer sums, same float steps (kz_step_dmin4()), the
 * float step of super-block s after the sums of s + 1. */
KG_INLINE void kp_k4(const struct kern_gemm_args *a, size_t o, size_t end, const int16_t *mp)
{
	const size_t bs = sizeof(struct kern_block_q5_k);
	const size_t nsb = a->n_in / KERN_QKK, qs_c = 3;
	const __m512i b16 = _mm512_set1_epi8(16);
	const size_t step = KG_R * bs, ah = kern_avx512_pack_ahead(), pfo = ah * a->w_stride;
	const int pf = ah && o + KG_R + ah <= end;
	const char *g = (const char *)a->w + o * a->w_stride;
	const struct kern_block_q8_k *x = a->xk;
	const __m512i m4 = _mm512_set1_epi8(0x0f), m3f = _mm512_set1_epi8(0x3f);
	const __m512i sh04 = _mm512_set4_epi32(4, 0, 4, 0);
	const __m512i to_mn = _mm512_broadcast_i32x4(
		_mm_setr_epi8(8, -1, 9, -1, 10, -1, 11, -1, 12, -1, 13, -1, 14, -1, 15, -1));
	/* the scales of sub-blocks 2p, 2p + 1 (bytes 2p, 2p + 1 of a decoded
	 * lane), each as int16 four times */
	__m512i to_sc[4];
	/* dwords 0 and 2 of each lane: the rows' isum, then msum */
	const __m512i red = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 16, 20, 24, 28, 0, 0, 0, 0);
	/* kg_halves4()'s: the d of rows 0..3, then their dmin */
	const __m128i dsel = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
	__m128 acc = _mm_setzero_ps();

	KG_UNROLL
	for (int p = 0; p < 4; p++) {
		char c[16];

		for (int k = 0; k < 16; k++)
			c[k] = (char)(k % 2 ? -1 : 2 * p + k / 8);
		to_sc[p] = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)c));
	}
	__m512i hd_n = kz_load(g), is_p = _mm512_setzero_si512(), mins_p = is_p, hd_p = is_p;
	for (size_t s = 0; s < nsb; s++) {
		const char *b = g + s * step;
		const int8_t *xq = x[s].qs;

		if (pf)
			kg_prefetch(b + pfo, step);
		const __m512i hd = hd_n;
		if (s + 1 < nsb)
			hd_n = kz_load(b + step);
		/* kz_k4_decode() on the lanes: [sc 0..7, m 0..7] */
		const __m512i v = _mm512_bsrli_epi128(hd, 4);
		const __m512i a2 = _mm512_srlv_epi32(_mm512_shuffle_epi32(v, 0xAA), sh04);
		const __m512i hi = _mm512_ternarylogic_epi32(_mm512_and_si512(a2, m4), _mm512_srli_epi32(v, 2),
							     _mm512_set1_epi8(0x30), 0xF8);
		const __m512i all = _mm512_unpacklo_epi32(_mm512_and_si512(v, m3f), hi);
		__m512i bp16;
		if (mp) {
			bp16 = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(mp + 8 * s)));
		} else {
			const __m256i bp = _mm256_madd_epi16(kg_load(x[s].bsums), _mm256_set1_epi16(1));
			bp16 = _mm512_broadcast_i32x4(
				_mm_packs_epi32(_mm256_castsi256_si128(bp), _mm256_extracti128_si256(bp, 1)));
		}
		const __m512i mins = _mm512_madd_epi16(_mm512_shuffle_epi8(all, to_mn), bp16);
		__m512i sub[8], isum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
		/* qh bytes 16 hf .. 16 hf + 15 of the rows (bit 2p: the fifth
		 * bit of sub-block 2p's element, 2p + 1: of 2p + 1's) */
		const __m512i qh[2] = {kz_load(b + 64), kz_load(b + 128)};

		KG_UNROLL
		for (int j = 0; j < 8; j++) {
			const int p = j / 2, hf = j % 2;
			__m512i q = kz_load(b + 64 * (qs_c + j));

			/* one load: GCC would fold it into both uses */
			__asm__("" : "+v"(q));
			const __m512i xl = _mm512_broadcast_i32x4(
				_mm_loadu_si128((const __m128i *)(xq + 64 * p + 16 * hf)));
			const __m512i xh = _mm512_broadcast_i32x4(
				_mm_loadu_si128((const __m128i *)(xq + 64 * p + 32 + 16 * hf)));
			/* the nibbles | bits 2p, 2p + 1 of qh as bit 4 */
			const __m512i lo = _mm512_ternarylogic_epi32(_mm512_and_si512(q, m4), b16,
								     kp_bit_to4(qh[hf], 2 * p), 0xF8);
			const __m512i hn =
				_mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(q, 4), m4), b16,
							  kp_bit_to4(qh[hf], 2 * p + 1), 0xF8);

			sub[2 * p] = _mm512_dpbusd_epi32(hf ? sub[2 * p] : _mm512_setzero_si512(), lo, xl);
			sub[2 * p + 1] =
				_mm512_dpbusd_epi32(hf ? sub[2 * p + 1] : _mm512_setzero_si512(), hn, xh);
		}
		KG_UNROLL
		for (int p = 0; p < 4; p++)
			isum[p % 2] = _mm512_dpwssd_epi32(
				isum[p % 2],
				_mm512_packs_epi32(sub[2 * p], sub[2 * p + 1]),
				_mm512_shuffle_epi8(all, to_sc[p]));
		/* the previous super-block's float step, its sums long done: a
		 * step at the end of its own sums' chain stalled the loop */
		if (s > 0)
			acc = kp_q4k_step(acc, is_p, mins_p, hd_p, x[s - 1].d, red, dsel);
		is_p = _mm512_add_epi32(isum[0], isum[1]);
		mins_p = mins;
		hd_p = hd;
	}
	acc = kp_q4k_step(acc, is_p, mins_p, hd_p, x[nsb - 1].d, red, dsel);
	kg_store(a, o, KG_R, acc);
}

static __attribute__((noinline)) void kp_q5k(const struct kern_gemm_args *a, size_t o, size_t end)
{
	kp_k4(a, o, end, NULL);
}

/* kp_k4() with the minimums' activation sums made once per call (mp:
 * per super-block the 8 sums of 32 as int16, what each group recomputed
 * from bsums). */
static __attribute__((noinline)) void kp_q5k_m(const struct kern_gemm_args *a, size_t o,
					       size_t end, const int16_t *mp)
{
	kp_k4(a, o, end, mp);
}

/* The packed Q5_K GEMV over whole groups [o0, o1): with the minimums'
 * sums made once (up to KZ_Q6_WIN super-blocks a row; longer rows: per
 * group, as before). */
static void kp_k5_gemv(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	const size_t end = a->y_stride > o1 ? a->y_stride : o1, nsb = a->n_in / KERN_QKK;
	int16_t mp[8 * KZ_Q6_WIN] __attribute__((aligned(64)));

	if (nsb > KZ_Q6_WIN) {
		for (size_t o = o0; o < o1; o += KG_R)
			kp_q5k(a, o, end);
		return;
	}
	for (size_t s = 0; s < nsb; s++) {
		const __m256i bp = _mm256_madd_epi16(kg_load(a->xk[s].bsums), _mm256_set1_epi16(1));

		_mm_store_si128((__m128i *)(mp + 8 * s),
				_mm_packs_epi32(_mm256_castsi256_si128(bp), _mm256_extracti128_si256(bp, 1)));
	}
	for (size_t o = o0; o < o1; o += KG_R)
		kp_q5k_m(a, o, end, mp);
}

/*
 * Packed Q6_K (kern_avx512_pack_q6_k(), kernels_impl.h "rows in dword
 * lanes", groups of KERN_Q6L_ROWS = 16 rows): a group's super-block s is
 * KERN_Q6L_SB = 16 x 210 bytes at group_base + KERN_Q6L_SB s, the file's
 * bits permuted (so packing in place needs one group of temporary and
 * unpacking gives the file back). The element values q 0..63 (unbiased)
 * of a row's block, in the file's bit layout (quants_ref.c): element E =
 * 128 n + 32 kk + l has its low four bits in nibble kk / 2 of ql[64 n +
 * 32 (kk & 1) + l], its high two at bits 2 kk of qh[32 n + l].
 */
static void kp_q6_values(const uint8_t *f, uint8_t q[KERN_QKK])
{
	for (size_t e = 0; e < KERN_QKK; e++) {
		const size_t n = e / 128, kk = e % 128 / 32, l = e % 32;

		q[e] = (uint8_t)((f[64 * n + 32 * (kk & 1) + l] >> 4 * (kk / 2) & 15) |
				 (f[128 + 32 * n + l] >> 2 * kk & 3) << 4);
	}
}

/* kp_q6_values()'s inverse: ql and qh of the file block f from q. */
static void kp_q6_file(const uint8_t q[KERN_QKK], uint8_t *f)
{
	memset(f, 0, 192);
	for (size_t e = 0; e < KERN_QKK; e++) {
		const size_t n = e / 128, kk = e % 128 / 32, l = e % 32;

		f[64 * n + 32 * (kk & 1) + l] |= (uint8_t)((q[e] & 15) << 4 * (kk / 2));
		f[128 + 32 * n + l] |= (uint8_t)((q[e] >> 4) << 2 * kk);
	}
}

/* Row r's super-block between its file block f and the group super-block
 * p: packed from f, or f restored from p (unpack). Lane r byte k of
 * sub-block j's X, Y, Z (KERN_Q6L_V(j, 0..2)): elements 16 j + k, + 4,
 * + 8, each with two bits of element 16 j + 12 + k above its six. */
static void kp_q6_move(uint8_t *f, uint8_t *p, size_t r, int unpack)
{
	uint8_t q[KERN_QKK];

	if (!unpack)
		kp_q6_values(f, q);
	for (size_t j = 0; j < 16; j++)
		for (size_t k = 0; k < 4; k++) {
			uint8_t *x = p + KERN_Q6L_V(j, 0) + 4 * r + k, *y = x + 64, *z = x + 128;
			const size_t e = 16 * j + k;

			if (!unpack) {
				const unsigned v3 = q[e + 12];

				*x = (uint8_t)(q[e] | (v3 & 3) << 6);
				*y = (uint8_t)(q[e + 4] | (v3 & 12) << 4);
				*z = (uint8_t)(q[e + 8] | (v3 & 48) << 2);
			} else {
				q[e] = *x & 63;
				q[e + 4] = *y & 63;
				q[e + 8] = *z & 63;
				q[e + 12] = (uint8_t)(*x >> 6 | (*y >> 6) << 2 | (*z >> 6) << 4);
			}
		}
	if (unpack)
		kp_q6_file(q, f);
	for (size_t j = 0; j < 16; j++)
		*(unpack ? f + 192 + j : p + KERN_Q6L_SC + 16 * j + r) =
			*(unpack ? p + KERN_Q6L_SC + 16 * j + r : f + 192 + j);
	memcpy(unpack ? f + 208 : p + KERN_Q6L_D + 2 * r, unpack ? p + KERN_Q6L_D + 2 * r : f + 208, 2);
}

void kern_avx512_pack_q6_k_scalar(void *w, size_t n_out, size_t nb, size_t bs, size_t g,
				  int unpack, void *tmp)
{
	const size_t row = nb * bs;

	assert(g == KERN_Q6L_ROWS && bs == sizeof(struct kern_block_q6_k));
	for (size_t o = 0; o < n_out; o += g) {
		uint8_t *grp = (uint8_t *)w + o * row, *t = tmp;

		memcpy(tmp, grp, g * row);
		for (size_t s = 0; s < nb; s++)
			for (size_t r = 0; r < g; r++)
				kp_q6_move((unpack ? grp : t) + r * row + s * bs,
					   (unpack ? t : grp) + s * KERN_Q6L_SB, r, unpack);
	}
}

/* The 16 bytes at f[r] + c of rows r = t, t + 4, t + 8, t + 12: lane R
 * row 4R + t. Four loads (three inserted). */
KG_INLINE __m512i kp_rows4(const uint8_t *const *f, size_t c)
{
	__m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(f[0] + c)));

	v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(f[4] + c)), 1);
	v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(f[8] + c)), 2);
	return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(f[12] + c)), 3);
}

/* The 16 rows' four dwords at f[r] + at in dword lanes: v[d] lane r =
 * row r's dword d. A 16 x 4 dword transpose: four rows a 128-bit lane by
 * the loads (kp_rows4()), the 4 x 4 inside the lanes by
 * qv__transpose4()'s 8 unpacks (half the shuffles of a register
 * transpose). */
KG_INLINE void kp_cols4(const uint8_t *const f[KERN_Q6L_ROWS], size_t at, __m512i v[4])
{
	KG_UNROLL
	for (int t = 0; t < 4; t++)
		v[t] = kp_rows4(f + t, at);
	qv__transpose4(v);
}

/* v's dwords shifted left by s bits (right by -s). */
KG_INLINE __m512i kp_q6_shl(__m512i v, int s)
{
	if (s > 0)
		return _mm512_slli_epi32(v, (unsigned)s);
	return s < 0 ? _mm512_srli_epi32(v, (unsigned)-s) : v;
}

/* kp_q6_move()'s pack of the 16 rows' super-blocks (row r's file block at
 * f[r]) into the group super-block p, the file's bits taken into row
 * lanes first: a sub-block j = 8n + 2kk + jh (elements 128n + 32kk +
 * 16jh + 4i + k, i, k < 4) reads ql dword 16n + 8 (kk & 1) + 4jh + i
 * (nibble kk / 2) and qh dword 8n + 4jh + i (bits 2kk, 2kk + 1), so the
 * ql and qh dwords of one (n, jh) (kp_cols4(): la, lb, h) make the
 * four sub-blocks kk = 0..3, each X, Y, Z as two bit selects (VPTERNLOGD)
 * of dword shifts: the value's nibble (bits 0-3), its qh bits (4-5) and
 * V3's two bits (6-7, from la/lb[3] or h[3]); bits a dword shift moves
 * across bytes are never selected. The scales by the same transpose, a
 * VPSHUFB (4 x 4 bytes in each dword lane) and a VPERMD (lanes to
 * sub-blocks); the d's 16 copies. */
static void kp_q6_pack_sb(const uint8_t *const f[KERN_Q6L_ROWS], uint8_t *p)
{
	const __m512i m30 = _mm512_set1_epi8(0x30), mc0 = _mm512_set1_epi8((char)0xc0);
	const __m512i tb = _mm512_broadcast_i32x4(
		_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
	const __m512i tr = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	__m512i sc[4];

	KG_UNROLL
	for (int n = 0; n < 2; n++)
		KG_UNROLL
		for (int jh = 0; jh < 2; jh++) {
			__m512i la[4], lb[4], h[4];

			kp_cols4(f, 64 * n + 16 * jh, la);
			kp_cols4(f, 64 * n + 32 + 16 * jh, lb);
			kp_cols4(f, 128 + 32 * n + 16 * jh, h);
			KG_UNROLL
			for (int kk = 0; kk < 4; kk++) {
				const __m512i *l = kk & 1 ? lb : la;
				const int ns = 4 * (kk / 2);
				/* V3's bits 0-1 (X), 2-3 (Y), 4-5 (Z) at bits 6-7 */
				const __m512i top[3] = {kp_q6_shl(l[3], 6 - ns), kp_q6_shl(l[3], 4 - ns),
							kp_q6_shl(h[3], 6 - 2 * kk)};
				uint8_t *o = p + KERN_Q6L_V(8 * n + 2 * kk + jh, 0);

				KG_UNROLL
				for (int i = 0; i < 3; i++) {
					const __m512i v = _mm512_ternarylogic_epi32(
						kp_q6_shl(h[i], 4 - 2 * kk), kp_q6_shl(l[i], -ns), m30, 0xE4);

					_mm512_storeu_si512(o + 64 * i,
							    _mm512_ternarylogic_epi32(top[i], v, mc0, 0xE4));
				}
			}
		}
	/* sc[d] lane R dword t: row 4R + t's scales 4d .. 4d + 3; to byte 4b +
	 * t of the lane, then lane b dword R: sub-block 4d + b, row 4R + t */
	kp_cols4(f, 192, sc);
	KG_UNROLL
	for (int d = 0; d < 4; d++)
		_mm512_storeu_si512(p + KERN_Q6L_SC + 64 * d,
				    _mm512_permutexvar_epi32(tr, _mm512_shuffle_epi8(sc[d], tb)));
	for (size_t r = 0; r < KERN_Q6L_ROWS; r++)
		memcpy(p + KERN_Q6L_D + 2 * r, f[r] + 208, 2);
}

/* One file block (bs bytes) from src to dst. */
KG_INLINE void kp_copy_block(uint8_t *dst, const uint8_t *src, size_t bs)
{
	size_t k = 0;

	for (; k + 64 <= bs; k += 64)
		_mm512_storeu_si512(dst + k, _mm512_loadu_si512(src + k));
	if (k < bs) {
		const __mmask64 m = _cvtu64_mask64(~0ull >> (64 - (bs - k)));

		_mm512_mask_storeu_epi8(dst + k, m, _mm512_maskz_loadu_epi8(m, src + k));
	}
}

/* A 16-row group's super-block packed from its rows' file blocks f[r]
 * into p (kp_q6_pack_sb(), kp_k4l_pack_sb()). */
typedef void (*kp_pack_sb_fn)(const uint8_t *const f[16], uint8_t *p);

/* What a model load runs for a type packed in 16-row groups whose
 * super-block s is the group's 16 file blocks (16 bs bytes) at 16 bs s,
 * a permutation of their bits: a group's super-blocks in order, each by
 * `sb` in place. Super-block s's output covers the group's file blocks
 * 16 s .. 16 s + 15 (row r's block s is block r nb + s): just before it
 * is written, those still to be read (of super-block s or later, about
 * half of the group's) are saved to tmp at the same offsets, and a row's
 * block is read from tmp once its region is written, from the group
 * before. The next group is prefetched to L2 one region a step, so the
 * rows' blocks read ahead come from L2, not memory. Against copying the
 * whole group first (the scalar twin, the 4-row packer): the copy halved
 * and spread over the steps; LEVELS.md "Q6_K rows in dword lanes: the
 * SIMD packer". */
static void kp_pack16(void *w, size_t n_out, size_t nb, size_t bs, void *tmp, kp_pack_sb_fn sb)
{
	const size_t row = nb * bs, gsb = 16 * bs;

	for (size_t o = 0; o < n_out; o += 16) {
		uint8_t *grp = (uint8_t *)w + o * row, *t = tmp;

		for (size_t s = 0; s < nb; s++) {
			const uint8_t *f[16];

			for (size_t b = 16 * s; b < 16 * s + 16; b++)
				if (b % nb >= s)
					kp_copy_block(t + b * bs, grp + b * bs, bs);
			for (size_t r = 0; r < 16; r++) {
				const size_t b = r * nb + s;

				f[r] = (b / 16 <= s ? t : grp) + b * bs;
			}
			if (o + 16 < n_out)
				for (size_t c = 0; c < gsb; c += 64)
					_mm_prefetch((const char *)grp + 16 * row + s * gsb + c,
						     _MM_HINT_T1);
			sb(f, grp + s * gsb);
		}
	}
}

/* What a model load runs: kp_pack16() by kp_q6_pack_sb(). Unpacking
 * (tests, a reader wanting the file order back) stays the scalar moves. */
void kern_avx512_pack_q6_k(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			   void *tmp)
{
	assert(g == KERN_Q6L_ROWS && bs == sizeof(struct kern_block_q6_k));
	if (unpack)
		kern_avx512_pack_q6_k_scalar(w, n_out, nb, bs, g, unpack, tmp);
	else
		kp_pack16(w, n_out, nb, bs, tmp, kp_q6_pack_sb);
}

/* Packed Q4_K (kernels_impl.h KERN_K4L_*): a group super-block's 9
 * 16-byte units, each the 16 rows' 16 bytes by kp_cols4() (dword c of
 * row r at 64 c + 4 r), in place by kp_pack16(). */
static void kp_k4l_pack_sb(const uint8_t *const f[16], uint8_t *p)
{
	KG_UNROLL
	for (size_t k = 0; k < sizeof(struct kern_block_q4_k); k += 16) {
		__m512i v[4];

		kp_cols4(f, k, v);
		KG_UNROLL
		for (int c = 0; c < 4; c++)
			_mm512_storeu_si512(p + 16 * k + 64 * c, v[c]);
	}
}

/* Unpacking (tests, a reader wanting the file order back): the group
 * copied to tmp, then each dword to its file place. */
void kern_avx512_pack_q4_k(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			   void *tmp)
{
	const size_t row = nb * bs;

	assert(g == KERN_K4L_ROWS && bs == sizeof(struct kern_block_q4_k));
	if (!unpack) {
		kp_pack16(w, n_out, nb, bs, tmp, kp_k4l_pack_sb);
		return;
	}
	for (size_t o = 0; o < n_out; o += g) {
		uint8_t *grp = (uint8_t *)w + o * row;

		memcpy(tmp, grp, g * row);
		for (size_t r = 0; r < g; r++)
			for (size_t s = 0; s < nb; s++)
				for (size_t k = 0; k < bs; k += 4)
					memcpy(grp + r * row + s * bs + k,
					       (const uint8_t *)tmp + KERN_K4L_AT(s, r, k), 4);
	}
}

/* The packed GEMVs: rows [o0, o1) whole groups; the prefetch bound as
 * kg_gemv()'s (the matrix's last row). Every call has args.xk (kernels.c
 * makes it for packed K-quants); 2+ tokens go to the packed GEMM. */
void kern_avx512_pgemv_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	/* KERN_K4L_*: one token is the 1..8-token tile at T = 1 */
	kern_avx512_vnni_pgemm_q4_k(a, o0, o1);
}

void kern_avx512_pgemv_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	if (a->n_tok != 1)
		kern_avx512_vnni_pgemm_q5_k(a, o0, o1);
	else
		kp_k5_gemv(a, o0, o1);
}

/* One token: the 1..8-token tile (kquants_q6p_avx512.c) at T = 1. */
void kern_avx512_pgemv_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	if (a->n_tok != 1 || !kern_avx512_q6p_small(a, o0, o1))
		kern_avx512_vnni_pgemm_q6_k(a, o0, o1);
}

#endif
