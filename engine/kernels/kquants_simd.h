/*
 * kquants_simd.h - the body of the Q4_K and Q6_K matmul kernels on 256-bit
 * vectors, shared by kquants_avx2.c and kquants_avx512.c. Each includes it
 * once after defining
 *   KQ_FN(name)   the prefix of its function names (kern_avx2_##name, ...)
 *   KQ_DOT(u, s)  eight int32 sums of four adjacent u8 x s8 products
 *                 (AVX2: maddubs + madd; AVX-512 VNNI: one VPDPBUSD)
 * so the two levels differ only in that instruction. Include only from a
 * file compiled with at least the AVX2 + FMA flags.
 *
 * What is computed (quants_ref.c is the specification): activations are
 * Q8 blocks of 32 (scale dx); for each weight row and token, per 32-block
 * the integer sum of q x qx is exact (no int16 saturation: Q4_K's values
 * are below 16, Q6_K's go through |w| and sign(x, w), |w| <= 32), then
 * scaled in float. Q4_K's minimum term uses the blocks' summed activations
 * (kern_gemm_args.xs8 / 8) eight blocks at a time, one vector per
 * super-block. Only the order of float additions differs from the
 * reference.
 *
 * Tiles: one weight row x up to KQ_T tokens: a super-block is unpacked
 * once per tile and multiplied by each token's blocks. Tokens are taken in
 * blocks of KQ_TOKEN_BLOCK so their activations stay in cache while the
 * rows pass. Each (row, token) result is the same instruction sequence
 * whatever the tile, so results do not depend on the token count.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "math_avx2.h"
#include "quants.h"

#define KQ_T 4
#define KQ_TOKEN_BLOCK 64
#define KQ_INLINE static inline __attribute__((always_inline))

struct kq_tok {
	const struct kern_block_q8a *x; /* the token's activation blocks */
	const float *xd;                /* their scales */
	const int32_t *xs8;             /* 8 x their sums */
};

KQ_INLINE void kq_tokens(const struct kern_gemm_args *a, size_t t0, size_t nt, struct kq_tok *k)
{
	for (size_t t = 0; t < nt; t++) {
		k[t].x = (const struct kern_block_q8a *)((const char *)a->x + (t0 + t) * a->x_stride);
		k[t].xd = a->xd + (t0 + t) * a->xd_stride;
		k[t].xs8 = a->xs8 + (t0 + t) * a->xd_stride;
	}
}

KQ_INLINE __m256i kq_load(const void *p)
{
	return _mm256_loadu_si256((const __m256i *)p);
}

/* Q4_K's eight 6-bit scales and minimums of one super-block as bytes:
 * sc[j], m[j] for j < 4 are the low six bits of bytes j and j + 4; for
 * j >= 4 the low/high nibble of byte j + 4 plus the top two bits of
 * bytes j - 4 and j. Four at a time in 32-bit words. */
KQ_INLINE void kq_q4k_scales(const uint8_t *s, uint32_t sc[2], uint32_t m[2])
{
	uint32_t a0, a1, a2;

	memcpy(&a0, s, 4);
	memcpy(&a1, s + 4, 4);
	memcpy(&a2, s + 8, 4);
	sc[0] = a0 & 0x3f3f3f3f;
	m[0] = a1 & 0x3f3f3f3f;
	sc[1] = (a2 & 0x0f0f0f0f) | ((a0 >> 2) & 0x30303030);
	m[1] = ((a2 >> 4) & 0x0f0f0f0f) | ((a1 >> 2) & 0x30303030);
}

/* Eight unsigned bytes as eight int32 lanes. */
KQ_INLINE __m256i kq_u8x8(const uint32_t v[2])
{
	return _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, (int)v[1], (int)v[0]));
}

static void KQ_FN(q4k_tile)(const struct kern_gemm_args *a, const struct kern_block_q4_k *w,
			    const struct kq_tok *k, size_t nt, float *y, size_t y_stride)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	const size_t nsb = a->n_in / KERN_QKK;
	__m256 acc[KQ_T], accm[KQ_T];
	float sc_f[KQ_T][8] __attribute__((aligned(32)));

	for (size_t t = 0; t < KQ_T; t++) {
		acc[t] = _mm256_setzero_ps();
		accm[t] = _mm256_setzero_ps();
	}
	for (size_t s = 0; s < nsb; s++) {
		const struct kern_block_q4_k *b = w + s;
		uint32_t sc[2], m[2];

		kq_q4k_scales(b->scales, sc, m);
		const __m256 dsc = _mm256_mul_ps(_mm256_set1_ps(kern_fp16_to_fp32(b->d)),
						 _mm256_cvtepi32_ps(kq_u8x8(sc)));
		const __m256 dmin = _mm256_set1_ps(kern_fp16_to_fp32(b->dmin));
		const __m256i mv = kq_u8x8(m);
		for (size_t t = 0; t < nt; t++) {
			/* minimum term: dmin * sum_j dx_j * m_j * sum(qx_j) */
			__m256i sx = _mm256_srai_epi32(kq_load(k[t].xs8 + 8 * s), 3);
			__m256 xd = _mm256_loadu_ps(k[t].xd + 8 * s);
			__m256 mt = _mm256_mul_ps(xd, _mm256_cvtepi32_ps(_mm256_mullo_epi32(mv, sx)));
			accm[t] = _mm256_fmadd_ps(mt, dmin, accm[t]);
			_mm256_store_ps(sc_f[t], _mm256_mul_ps(dsc, xd));
		}
		for (int j = 0; j < 4; j++) {
			__m256i q = kq_load(b->qs + 32 * j);
			__m256i lo = _mm256_and_si256(q, m4);
			__m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
			for (size_t t = 0; t < nt; t++) {
				const struct kern_block_q8a *x = k[t].x + 8 * s + 2 * j;
				__m256i i0 = KQ_DOT(lo, kq_load(x[0].qs));
				__m256i i1 = KQ_DOT(hi, kq_load(x[1].qs));
				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0),
							 _mm256_set1_ps(sc_f[t][2 * j]), acc[t]);
				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1),
							 _mm256_set1_ps(sc_f[t][2 * j + 1]), acc[t]);
			}
		}
	}
	for (size_t t = 0; t < nt; t++)
		y[t * y_stride] = avx2__hsum(acc[t]) - avx2__hsum(accm[t]);
}

static void KQ_FN(q6k_tile)(const struct kern_gemm_args *a, const struct kern_block_q6_k *w,
			    const struct kq_tok *k, size_t nt, float *y, size_t y_stride)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03);
	const __m256i off = _mm256_set1_epi8(32);
	const size_t nsb = a->n_in / KERN_QKK;
	__m256 acc[KQ_T];
	float dx[KQ_T][8] __attribute__((aligned(32)));

	for (size_t t = 0; t < KQ_T; t++)
		acc[t] = _mm256_setzero_ps();
	for (size_t s = 0; s < nsb; s++) {
		const struct kern_block_q6_k *b = w + s;
		const float d = kern_fp16_to_fp32(b->d);
		/* d * scale of each 16-element sub-block, four int32 lanes per
		 * sub-block: lanes 0-3 of a block's sums are its first 16. */
		const __m256 sc_lo = _mm256_mul_ps(
			_mm256_set1_ps(d),
			_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)b->scales))));
		const __m256 sc_hi = _mm256_mul_ps(
			_mm256_set1_ps(d),
			_mm256_cvtepi32_ps(
				_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b->scales + 8)))));
		float fsc[16] __attribute__((aligned(32)));

		_mm256_store_ps(fsc, sc_lo);
		_mm256_store_ps(fsc + 8, sc_hi);
		for (size_t t = 0; t < nt; t++)
			_mm256_store_ps(dx[t], _mm256_loadu_ps(k[t].xd + 8 * s));
		for (int n = 0; n < 2; n++) {
			__m256i ql0 = kq_load(b->ql + 64 * n), ql1 = kq_load(b->ql + 64 * n + 32);
			__m256i qh = kq_load(b->qh + 32 * n);
			__m256i q[4];

			q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
					       _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
			q[1] = _mm256_or_si256(
				_mm256_and_si256(ql1, m4),
				_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
			q[2] = _mm256_or_si256(
				_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
				_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
			q[3] = _mm256_or_si256(
				_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
				_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
			for (int kk = 0; kk < 4; kk++) {
				const int blk = 4 * n + kk;
				__m256i ws = _mm256_sub_epi8(q[kk], off);
				__m256i wu = _mm256_abs_epi8(ws);
				__m256 scv = _mm256_setr_m128(_mm_set1_ps(fsc[2 * blk]),
							      _mm_set1_ps(fsc[2 * blk + 1]));
				for (size_t t = 0; t < nt; t++) {
					__m256i xs = _mm256_sign_epi8(kq_load(k[t].x[8 * s + blk].qs), ws);
					__m256i i = KQ_DOT(wu, xs);
					acc[t] = _mm256_fmadd_ps(
						_mm256_cvtepi32_ps(i),
						_mm256_mul_ps(scv, _mm256_set1_ps(dx[t][blk])), acc[t]);
				}
			}
		}
	}
	for (size_t t = 0; t < nt; t++)
		y[t * y_stride] = avx2__hsum(acc[t]);
}

/* Rows o0..o1 x every token, in token blocks, tiles of one row x KQ_T. */
#define KQ_GEMM(name, btype, tile)                                                            \
	void KQ_FN(name)(const struct kern_gemm_args *a, size_t o0, size_t o1)                \
	{                                                                                     \
		struct kq_tok k[KQ_T];                                                        \
		for (size_t tb = 0; tb < a->n_tok; tb += KQ_TOKEN_BLOCK) {                    \
			size_t te = a->n_tok - tb < KQ_TOKEN_BLOCK ? a->n_tok : tb + KQ_TOKEN_BLOCK; \
			for (size_t o = o0; o < o1; o++) {                                    \
				const btype *w = (const btype *)((const char *)a->w + o * a->w_stride); \
				for (size_t t0 = tb; t0 < te; t0 += KQ_T) {                   \
					size_t nt = te - t0 < KQ_T ? te - t0 : KQ_T;          \
					kq_tokens(a, t0, nt, k);                              \
					tile(a, w, k, nt, a->y + t0 * a->y_stride + o, a->y_stride); \
				}                                                             \
			}                                                                     \
		}                                                                             \
	}

KQ_GEMM(gemm_q4_k, struct kern_block_q4_k, KQ_FN(q4k_tile))
KQ_GEMM(gemm_q6_k, struct kern_block_q6_k, KQ_FN(q6k_tile))
