/*
 * kquants_gemv_avx512.c - the Q4_K, Q5_K and Q6_K one-token GEMVs on the
 * AVX-512 VNNI level: kquants_gemv.h's steps with the ZMM row bodies of
 * kquants_gemv_zmm.h (KG_ZMM; per 128 weights two VPDPBUSD, one
 * VPACKSSDW, one VPDPWSSD). KG_MADD serves the shared code's unused AVX2
 * bodies only.
 *
 * Also their packed forms (kernels.h KERN_PACKED, groups of KG_R = 4
 * rows): the same row bodies, the same instructions per row, with the
 * four rows' bases a block apart and a row's super-blocks 4 blocks apart,
 * so the step reads one linear stream (LEVELS.md, "Packed rows"); Q4_K's
 * and Q5_K's groups are interleaved 16 bytes at a time and have their own
 * body (kp_k4: four rows in the lanes of one ZMM); Q6_K's are re-ordered
 * inside such lanes (kern_avx512_pack_q6_k(), body kp_q6u: LEVELS.md "Q6_K
 * re-ordered").
 */
#if defined(__x86_64__)
#include <assert.h>
#include <immintrin.h>
#include <string.h>

#include "kernels_impl.h"
#include "quants.h"

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

/* kp_q4k()'s float step: lane r of is / mins row r's four partial sums,
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

/* One packed group of four Q4_K (five = 0) or Q5_K rows (o a multiple of
 * 4), interleaved 16 bytes at a time (kern_pack_groups16()): byte k of row
 * r's super-block s at group + 4 s bs + (4 (k / 16) + r) 16 + k % 16.
 * So one ZMM load holds
 * the same 16 bytes of the four rows, row r in 128-bit lane r: the header
 * (d, dmin, 12 scale bytes), then qs chunk j (bytes 16j .. 16j + 15: 32
 * values, low nibbles of sub-block 2 (j / 2), high ones of 2 (j / 2) + 1;
 * Q5_K: after its two qh chunks) against the activations' 16 bytes
 * broadcast to the four lanes. Q4_K's high nibbles are taken as 16 x the
 * nibble (VPANDN; the sums shifted back by one VPSRAD). Each
 * sub-block's 8-product partial sums stay in lanes (at most 8 x 31 x 128:
 * int16), two sub-blocks are packed by one VPACKSSDW and scaled by one
 * VPDPWSSD whose scales (VPSHUFB of the decoded row lanes) serve the four
 * rows at once: per 1024 weights 16 VPDPBUSD, 4 VPACKSSDW, 4 VPSHUFB, 4
 * VPDPWSSD, where the per-row body takes 16, 8, 8 VPERMW, 8 and a 4-row
 * reduce. Same integer sums, same float steps (kz_step_dmin4()), the
 * float step of super-block s after the sums of s + 1. */
KG_INLINE void kp_k4(const struct kern_gemm_args *a, size_t o, size_t end, int five,
		     const int16_t *mp)
{
	const size_t bs = five ? sizeof(struct kern_block_q5_k) : sizeof(struct kern_block_q4_k);
	const size_t nsb = a->n_in / KERN_QKK, qs_c = five ? 3 : 1;
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
		/* Q5_K: qh bytes 16 hf .. 16 hf + 15 of the rows (bit 2p: the
		 * fifth bit of sub-block 2p's element, 2p + 1: of 2p + 1's) */
		const __m512i qh[2] = {five ? kz_load(b + 64) : m4, five ? kz_load(b + 128) : m4};

		KG_UNROLL
		for (int j = 0; j < 8; j++) {
			const int p = j / 2, hf = j % 2;
			__m512i q = kz_load(b + 64 * (qs_c + j));

			/* one load: GCC would fold it into both VPAND and VPANDN */
			__asm__("" : "+v"(q));
			const __m512i xl = _mm512_broadcast_i32x4(
				_mm_loadu_si128((const __m128i *)(xq + 64 * p + 16 * hf)));
			const __m512i xh = _mm512_broadcast_i32x4(
				_mm_loadu_si128((const __m128i *)(xq + 64 * p + 32 + 16 * hf)));
			__m512i lo = _mm512_and_si512(q, m4);
			/* Q4_K: 16 x the high nibble (VPSRAD on the sums below) */
			__m512i hn = _mm512_andnot_si512(m4, q);
			if (five) { /* bits 2p, 2p + 1 of qh to bit 4 */
				lo = _mm512_ternarylogic_epi32(lo, b16, kp_bit_to4(qh[hf], 2 * p), 0xF8);
				hn = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(q, 4), m4),
							       b16, kp_bit_to4(qh[hf], 2 * p + 1), 0xF8);
			}

			sub[2 * p] = _mm512_dpbusd_epi32(hf ? sub[2 * p] : _mm512_setzero_si512(), lo, xl);
			sub[2 * p + 1] =
				_mm512_dpbusd_epi32(hf ? sub[2 * p + 1] : _mm512_setzero_si512(), hn, xh);
		}
		KG_UNROLL
		for (int p = 0; p < 4; p++)
			isum[p % 2] = _mm512_dpwssd_epi32(
				isum[p % 2],
				_mm512_packs_epi32(sub[2 * p],
						   five ? sub[2 * p + 1] : _mm512_srai_epi32(sub[2 * p + 1], 4)),
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

static __attribute__((noinline)) void kp_q4k(const struct kern_gemm_args *a, size_t o, size_t end)
{
	kp_k4(a, o, end, 0, NULL);
}

static __attribute__((noinline)) void kp_q5k(const struct kern_gemm_args *a, size_t o, size_t end)
{
	kp_k4(a, o, end, 1, NULL);
}

/* kp_k4() with the minimums' activation sums made once per call (mp:
 * per super-block the 8 sums of 32 as int16, what each group recomputed
 * from bsums). */
static __attribute__((noinline)) void kp_q4k_m(const struct kern_gemm_args *a, size_t o,
					       size_t end, const int16_t *mp)
{
	kp_k4(a, o, end, 0, mp);
}

static __attribute__((noinline)) void kp_q5k_m(const struct kern_gemm_args *a, size_t o,
					       size_t end, const int16_t *mp)
{
	kp_k4(a, o, end, 1, mp);
}

/* The packed Q4_K / Q5_K GEMV over whole groups [o0, o1): with the
 * minimums' sums made once (up to KZ_Q6_WIN super-blocks a row; longer
 * rows: per group, as before). */
static void kp_k4_gemv(const struct kern_gemm_args *a, size_t o0, size_t o1, int five)
{
	const size_t end = a->y_stride > o1 ? a->y_stride : o1, nsb = a->n_in / KERN_QKK;
	int16_t mp[8 * KZ_Q6_WIN] __attribute__((aligned(64)));

	if (nsb > KZ_Q6_WIN) {
		for (size_t o = o0; o < o1; o += KG_R)
			five ? kp_q5k(a, o, end) : kp_q4k(a, o, end);
		return;
	}
	for (size_t s = 0; s < nsb; s++) {
		const __m256i bp = _mm256_madd_epi16(kg_load(a->xk[s].bsums), _mm256_set1_epi16(1));

		_mm_store_si128((__m128i *)(mp + 8 * s),
				_mm_packs_epi32(_mm256_castsi256_si128(bp), _mm256_extracti128_si256(bp, 1)));
	}
	for (size_t o = o0; o < o1; o += KG_R)
		five ? kp_q5k_m(a, o, end, mp) : kp_q4k_m(a, o, end, mp);
}

/*
 * Packed Q6_K (kern_avx512_pack_q6_k(), kernels_impl.h): per group of 4
 * rows and super-block, 840 bytes: ql units u = 4n + m (at
 * KERN_Q6P_QL(n, m): row r's 16 bytes at 16 r, dword i = ql bytes 64n +
 * 16i + 4m .. + 3), so the low
 * nibbles of a unit are the elements 128n + 16i + 4m + e: dword i of a
 * lane in sub-block 8n + i, the high nibbles (+ 64) in 8n + 4 + i; qh
 * units 2n + j (at KERN_Q6P_QH(n, j), each before its two ql units: one
 * ascending stream), byte 4i + e of a lane the high bits
 * of that dword's elements for ql units 4n + 2j (bits 0-1 low nibble,
 * 4-5 high) and 4n + 2j + 1 (2-3, 6-7); the scales at 768 + 16q + 4r + i
 * (sub-block 4q + i of row r); d at 832 + 2r.
 */
#define KP_Q6_SB (KG_R * sizeof(struct kern_block_q6_k))

/* One row's super-block between its file block f and the packed p (row r
 * of the group): packed from f, or f restored from p (unpack). */
static void kp_q6_move(uint8_t *f, uint8_t *p, size_t r, int unpack)
{
	for (size_t n = 0; n < 2; n++)
		for (size_t m = 0; m < 4; m++)
			for (size_t i = 0; i < 4; i++) {
				uint8_t *pu = p + KERN_Q6P_QL(n, m) + 16 * r + 4 * i;
				uint8_t *fu = f + 64 * n + 16 * i + 4 * m;
				memcpy(unpack ? fu : pu, unpack ? pu : fu, 4);
			}
	/* qh byte a (ql unit 4n + 2j) and b (4n + 2j + 1) of dword h: fields
	 * 0, 2 (t = 0: dword h) and 1, 3 (t = 1: dword h + 2) */
	for (size_t n = 0; n < 2; n++)
		for (size_t j = 0; j < 2; j++)
			for (size_t h = 0; h < 2; h++)
				for (size_t e = 0; e < 4; e++) {
					uint8_t *a = f + 128 + 32 * n + 16 * h + 8 * j + e, *b = a + 4;
					uint8_t *p0 = p + KERN_Q6P_QH(n, j) + 16 * r + 4 * h + e;
					uint8_t *p1 = p0 + 8;

					if (!unpack) {
						*p0 = (uint8_t)((*a & 0x33) | (*b & 0x33) << 2);
						*p1 = (uint8_t)((*a >> 2 & 0x33) | (*b & 0xcc));
					} else {
						*a = (uint8_t)((*p0 & 0x33) | (*p1 & 0x33) << 2);
						*b = (uint8_t)((*p0 >> 2 & 0x33) | (*p1 & 0xcc));
					}
				}
	for (size_t q = 0; q < 4; q++)
		memcpy(unpack ? f + 192 + 4 * q : p + 768 + 16 * q + 4 * r,
		       unpack ? p + 768 + 16 * q + 4 * r : f + 192 + 4 * q, 4);
	memcpy(unpack ? f + 208 : p + 832 + 2 * r, unpack ? p + 832 + 2 * r : f + 208, 2);
}

void kern_avx512_pack_q6_k_scalar(void *w, size_t n_out, size_t nb, size_t bs, size_t g,
				  int unpack, void *tmp)
{
	const size_t row = nb * bs;

	assert(g == KG_R && bs == sizeof(struct kern_block_q6_k));
	for (size_t o = 0; o < n_out; o += g) {
		uint8_t *grp = (uint8_t *)w + o * row, *t = tmp;

		memcpy(tmp, grp, g * row);
		for (size_t s = 0; s < nb; s++)
			for (size_t r = 0; r < g; r++)
				kp_q6_move((unpack ? grp : t) + r * row + s * bs,
					   (unpack ? t : grp) + s * KP_Q6_SB, r, unpack);
	}
}

/* kp_q6_move()'s pack of the four rows' super-blocks f[r] into the group
 * super-block p, the same bytes: the ql halves 64n .. 64n + 63 by one
 * dword transpose each (lane m: unit 4n + m's), the qh re-encoded 4 units
 * at once (lane 2n + j: dwords a, b of kp_q6_move() gathered by two
 * VPERMD, its byte formulas on whole dwords: the masks keep every shifted
 * bit inside its byte), the scales by one dword transpose of the four
 * rows'. */
static void kp_q6_pack_sb(const uint8_t *const f[KG_R], uint8_t *p)
{
	const __m512i tr = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	/* lane L = 2n + j, dword k: qh dword 8n + 4 (k % 2) + 2j (a), + 1 (b) */
	const __m512i ia = _mm512_setr_epi32(0, 4, 0, 4, 2, 6, 2, 6, 8, 12, 8, 12, 10, 14, 10, 14);
	const __m512i ib = _mm512_add_epi32(ia, _mm512_set1_epi32(1));
	const __m512i k33 = _mm512_set1_epi8(0x33);
	__m128i sc[KG_R];

	for (size_t r = 0; r < KG_R; r++) {
		for (int n = 0; n < 2; n++) {
			const __m512i t = _mm512_permutexvar_epi32(tr, _mm512_loadu_si512(f[r] + 64 * n));

			_mm_storeu_si128((__m128i *)(p + KERN_Q6P_QL(n, 0) + 16 * r), _mm512_extracti32x4_epi32(t, 0));
			_mm_storeu_si128((__m128i *)(p + KERN_Q6P_QL(n, 1) + 16 * r), _mm512_extracti32x4_epi32(t, 1));
			_mm_storeu_si128((__m128i *)(p + KERN_Q6P_QL(n, 2) + 16 * r), _mm512_extracti32x4_epi32(t, 2));
			_mm_storeu_si128((__m128i *)(p + KERN_Q6P_QL(n, 3) + 16 * r), _mm512_extracti32x4_epi32(t, 3));
		}
		const __m512i h = _mm512_loadu_si512(f[r] + 128);
		const __m512i a = _mm512_permutexvar_epi32(ia, h), b = _mm512_permutexvar_epi32(ib, h);
		/* dwords 0, 1 of a lane: (a & 0x33) | (b & 0x33) << 2; 2, 3:
		 * (a >> 2 & 0x33) | (b & 0xcc) */
		const __m512i p0 = _mm512_ternarylogic_epi32(a, _mm512_slli_epi32(b, 2), k33, 0xE4);
		const __m512i p1 = _mm512_ternarylogic_epi32(_mm512_srli_epi32(a, 2), b, k33, 0xE4);
		const __m512i q = _mm512_mask_blend_epi32(0xCCCC, p0, p1);

		_mm_storeu_si128((__m128i *)(p + KERN_Q6P_QH(0, 0) + 16 * r), _mm512_extracti32x4_epi32(q, 0));
		_mm_storeu_si128((__m128i *)(p + KERN_Q6P_QH(0, 1) + 16 * r), _mm512_extracti32x4_epi32(q, 1));
		_mm_storeu_si128((__m128i *)(p + KERN_Q6P_QH(1, 0) + 16 * r), _mm512_extracti32x4_epi32(q, 2));
		_mm_storeu_si128((__m128i *)(p + KERN_Q6P_QH(1, 1) + 16 * r), _mm512_extracti32x4_epi32(q, 3));
		sc[r] = _mm_loadu_si128((const __m128i *)(f[r] + 192));
		memcpy(p + 832 + 2 * r, f[r] + 208, 2);
	}
	/* dword 4q + r: row r's scales 4q .. 4q + 3 */
	__m512i s4 = _mm512_castsi128_si512(sc[0]);
	s4 = _mm512_inserti32x4(s4, sc[1], 1);
	s4 = _mm512_inserti32x4(s4, sc[2], 2);
	s4 = _mm512_inserti32x4(s4, sc[3], 3);
	_mm512_storeu_si512(p + 768, _mm512_permutexvar_epi32(tr, s4));
}

void kern_avx512_pack_q6_k(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			   void *tmp)
{
	const size_t row = nb * bs;

	assert(g == KG_R && bs == sizeof(struct kern_block_q6_k));
	/* unpacking (tests, a reader wanting file order): the scalar moves */
	if (unpack) {
		kern_avx512_pack_q6_k_scalar(w, n_out, nb, bs, g, unpack, tmp);
		return;
	}
	for (size_t o = 0; o < n_out; o += g) {
		uint8_t *grp = (uint8_t *)w + o * row;
		const uint8_t *t = tmp;

		memcpy(tmp, grp, g * row);
		for (size_t s = 0; s < nb; s++) {
			const uint8_t *f[KG_R];

			for (size_t r = 0; r < KG_R; r++)
				f[r] = t + r * row + s * bs;
			kp_q6_pack_sb(f, grp + s * KP_Q6_SB);
		}
	}
}

/* The activations of super-blocks s0 .. s1 - 1 as the packed Q6_K body
 * takes them (once per call, for all its rows): per super-block and
 * 64-element chunk c (elements 64c ..), 16 bytes per ql unit m (dword i:
 * elements 64c + 16i + 4m ..: a 4 x 4 dword transpose), and -32 x the
 * sums of 16 as int32 (the chains' starts: kz_q6_bias()'s offset). */
static void kp_q6_act(const struct kern_block_q8_k *x, size_t s0, size_t s1, int8_t *xa,
		      int32_t *bias)
{
	const __m512i tr = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);

	for (size_t s = s0; s < s1; s++) {
		KG_UNROLL
		for (int c = 0; c < 4; c++)
			_mm512_storeu_si512(xa + 256 * (s - s0) + 64 * c,
					    _mm512_permutexvar_epi32(tr, kz_load(x[s].qs + 64 * c)));
		_mm512_storeu_si512(bias + 16 * (s - s0),
				    _mm512_sub_epi32(_mm512_setzero_si512(),
						     _mm512_slli_epi32(_mm512_cvtepi16_epi32(kg_load(x[s].bsums)),
								       5)));
	}
}

/* kp_q6u()'s float step: lane r of t row r's four partial sums, d4 the
 * rows' d: acc + (d D) isum, kz_q6_rows()'s. */
static inline __m128 kp_q6_step(__m128 acc, __m512i t, __m128 d4, float xd, __m512i red)
{
	t = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_CDAB));
	t = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_BADC));
	const __m128i im = _mm512_castsi512_si128(_mm512_permutexvar_epi32(red, t));
	const __m128 dk = _mm_mul_ps(d4, _mm_set1_ps(xd));

	return _mm_add_ps(acc, _mm_mul_ps(dk, _mm_cvtepi32_ps(im)));
}

/* Rows of more super-blocks than this prefetch each next super-block's
 * arranged activations (320 bytes) while the current one runs. A group's
 * window of s super-blocks streams 840 s bytes of weights between two
 * uses of the same activations (320 s bytes): past ~16 (TinyLlama's down
 * projection, n_in 5632: 18.5 + 7 KB against the 32 KB L1) they are
 * evicted by the stream, and each super-block's 16 broadcast loads missed
 * L1 at the head of its chains; two threads from DRAM in the host's fast
 * mode, 2048 x 5632 streamed at 0.85 of 5632 x 2048's rate (LEVELS.md,
 * "Q6_K rows of 22 super-blocks"). One ahead: two or four were no better
 * than none. Shorter rows keep them in L1 and skip the 5 prefetches. */
#define KP_Q6_XA_PF 16

/* Super-blocks s0 .. s1 - 1 of one packed Q6_K group (rows o .. o + 3),
 * added to y (s0 > 0). Per ql unit: its low and high nibbles, each or-ed
 * with its two high bits by one VPTERNLOGD (the qh unit masked 0x33 /
 * 0xcc and shifted once per pair of ql units), against the activations'
 * 16 bytes broadcast to the four lanes; four VPDPBUSD chains, c = 2n +
 * hi, dword i of lane r summing sub-block 4c + i of row r from -32 x its
 * activation sum (exact: int32), then one VPMULLD each by the scales
 * (VPMOVSXBD of 16 bytes: four rows, four sub-blocks). Per 1024 weights:
 * 16 VPDPBUSD, 16 VPTERNLOGD, 4 VPMULLD, ~20 shifts and masks; the float
 * step of super-block s after the sums of s + 1 (as kp_k4()). */
KG_INLINE void kp_q6u(const struct kern_gemm_args *a, size_t o, size_t end, const int8_t *xa,
		      const int32_t *bias, size_t s0, size_t s1)
{
	const size_t ah = kern_avx512_pack_ahead(), pfo = ah * a->w_stride;
	const int pf = ah && o + KG_R + ah <= end;
	const char *g = (const char *)a->w + o * a->w_stride;
	const __m512i m4 = _mm512_set1_epi8(0x0f), k33 = _mm512_set1_epi8(0x33);
	const __m512i kcc = _mm512_set1_epi8((char)0xcc);
	const __m512i red = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	__m128 acc = s0 > 0 ? kg_load_y(a, o, KG_R) : _mm_setzero_ps();
	__m512i t_p = _mm512_setzero_si512();
	__m128 d_p = _mm_setzero_ps();
	const int pxa = s1 - s0 > KP_Q6_XA_PF;

	for (size_t s = s0; s < s1; s++) {
		const char *b = g + s * KP_Q6_SB;
		const int8_t *xs = xa + 256 * (s - s0);
		const int32_t *bs = bias + 16 * (s - s0);
		__m512i ch[4];

		if (pxa && s + 1 < s1) {
			/* the next super-block's activations, back into L1 */
			KG_UNROLL
			for (int c = 0; c < 4; c++)
				_mm_prefetch((const char *)xs + 256 + 64 * c, _MM_HINT_T0);
			_mm_prefetch((const char *)(bs + 16), _MM_HINT_T0);
		}
		KG_UNROLL
		for (int c = 0; c < 4; c++)
			ch[c] = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(bs + 4 * c)));
		KG_UNROLL
		for (int n = 0; n < 2; n++) {
			KG_UNROLL
			for (int j = 0; j < 2; j++) {
				/* the same 192 bytes (the last step: + the scales
				 * and d) of the super-block pfo ahead: one burst of
				 * 14 lines a super-block waited for fill buffers
				 * (LEVELS.md "Q6_K prefetch spread", q6k14) */
				if (pf)
					kg_prefetch(b + pfo + KERN_Q6P_QH(n, j),
						    n == 1 && j == 1 ? KP_Q6_SB - KERN_Q6P_QH(1, 1) : 192);
				const __m512i h = kz_load(b + KERN_Q6P_QH(n, j));
				const __m512i hm = _mm512_and_si512(h, k33), hm2 = _mm512_and_si512(h, kcc);
				__m512i qa = kz_load(b + KERN_Q6P_QL(n, 2 * j));
				__m512i qb = kz_load(b + KERN_Q6P_QL(n, 2 * j + 1));

				/* one load each: GCC would fold them twice */
				__asm__("" : "+v"(qa), "+v"(qb));
				const __m512i la = _mm512_ternarylogic_epi32(qa, _mm512_slli_epi16(hm, 4), m4, 0xE4);
				const __m512i lb = _mm512_ternarylogic_epi32(qb, _mm512_slli_epi16(hm2, 2), m4, 0xE4);
				const __m512i ha = _mm512_ternarylogic_epi32(_mm512_srli_epi16(qa, 4), hm, m4, 0xE4);
				const __m512i hb = _mm512_ternarylogic_epi32(_mm512_srli_epi16(qb, 4),
									     _mm512_srli_epi16(hm2, 2), m4, 0xE4);
				const int8_t *xl = xs + 64 * (2 * n), *xh = xs + 64 * (2 * n + 1);
#define KP_X(p) _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(p)))
				ch[2 * n] = _mm512_dpbusd_epi32(ch[2 * n], la, KP_X(xl + 32 * j));
				ch[2 * n] = _mm512_dpbusd_epi32(ch[2 * n], lb, KP_X(xl + 32 * j + 16));
				ch[2 * n + 1] = _mm512_dpbusd_epi32(ch[2 * n + 1], ha, KP_X(xh + 32 * j));
				ch[2 * n + 1] = _mm512_dpbusd_epi32(ch[2 * n + 1], hb, KP_X(xh + 32 * j + 16));
#undef KP_X
			}
		}
		__m512i t = _mm512_setzero_si512();
		KG_UNROLL
		for (int c = 0; c < 4; c++)
			t = _mm512_add_epi32(t, _mm512_mullo_epi32(ch[c], _mm512_cvtepi8_epi32(_mm_loadu_si128(
									 (const __m128i *)(b + 768 + 16 * c)))));
		if (s > s0)
			acc = kp_q6_step(acc, t_p, d_p, a->xk[s - 1].d, red);
		t_p = t;
		d_p = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(b + 832)));
	}
	acc = kp_q6_step(acc, t_p, d_p, a->xk[s1 - 1].d, red);
	kg_store(a, o, KG_R, acc);
}

static __attribute__((noinline)) void kp_q6k(const struct kern_gemm_args *a, size_t o, size_t end,
					     const int8_t *xa, const int32_t *bias, size_t s0,
					     size_t s1)
{
	kp_q6u(a, o, end, xa, bias, s0, s1);
}

/* The packed GEMVs: rows [o0, o1) whole groups; the prefetch bound as
 * kg_gemv()'s (the matrix's last row). Every call has args.xk (kernels.c
 * makes it for packed K-quants); 2+ tokens go to the packed GEMM. */
void kern_avx512_pgemv_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	if (a->n_tok != 1)
		kern_avx512_vnni_pgemm_q4_k(a, o0, o1);
	else
		kp_k4_gemv(a, o0, o1, 0);
}

void kern_avx512_pgemv_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	if (a->n_tok != 1)
		kern_avx512_vnni_pgemm_q5_k(a, o0, o1);
	else
		kp_k4_gemv(a, o0, o1, 1);
}

/* kern_avx512_q6k_gemv()'s windows of activations (kp_q6_act()), packed
 * rows. */
void kern_avx512_pgemv_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	const size_t end = a->y_stride > o1 ? a->y_stride : o1, nsb = a->n_in / KERN_QKK;
	int8_t xa[256 * KZ_Q6_WIN] __attribute__((aligned(64)));
	int32_t bias[16 * KZ_Q6_WIN] __attribute__((aligned(64)));

	if (a->n_tok != 1) {
		kern_avx512_vnni_pgemm_q6_k(a, o0, o1);
		return;
	}
	for (size_t s0 = 0; s0 < nsb; s0 += KZ_Q6_WIN) {
		const size_t s1 = nsb - s0 > KZ_Q6_WIN ? s0 + KZ_Q6_WIN : nsb;

		kp_q6_act(a->xk, s0, s1, xa, bias);
		for (size_t o = o0; o < o1; o += KG_R)
			kp_q6k(a, o, end, xa, bias, s0, s1);
	}
}

#endif
