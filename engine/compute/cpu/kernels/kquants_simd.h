/*
 * kquants_simd.h - the body of the community block types' matmul kernels
 * on 256-bit vectors, shared by kquants_avx2.c and kquants_avx512.c. Each
 * includes it once after defining
 *   KQ_FN(name)   the prefix of its function names (kern_avx2_##name, ...)
 *   KQ_DOT(u, s)  eight int32 sums of four adjacent u8 x s8 products
 *                 (AVX2: maddubs + madd; AVX-512 VNNI: one VPDPBUSD)
 * so the two levels differ only in that instruction. Include only from a
 * file compiled with at least the AVX2 + FMA flags.
 *
 * What is computed (quants_ref.c is the specification): activations are
 * Q8 blocks of 32 (scale dx); for each weight row and token, per 32-block
 * the integer sum of q x qx is exact (no int16 saturation: the values are
 * below 32 or go through |w| and sign(x, w)), then scaled in float. The
 * minimum terms use the blocks' summed activations (kern_gemm_args.xs8 /
 * 8). Only the order of float additions differs from the reference.
 * Q4_K, Q5_K and Q6_K are not here: every token goes per super-block
 * (kern_block_q8_k) as in the one-token GEMV, kquants_gemv.h, the avx2
 * level's batches in kquants_gemv_avx2.c, the avx512 level's in
 * kquants_vnni_avx512.c.
 *
 * Tiles: one weight row x up to KQ_T tokens: a block is unpacked once per
 * tile and multiplied by each token's blocks. Tokens are taken in blocks
 * of KQ_TOKEN_BLOCK so their activations stay in cache while the rows
 * pass. Each (row, token) result is the same instruction sequence
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


/* Q2_K and Q3_K share the 2-bit layout: the 32 values of block b of a
 * super-block are bits 2(b % 4) of the 32 bytes at qs + 32 (b / 4); each
 * half of 16 has its own scale, so the eight int32 sums of a block split
 * 4 + 4 between two scales. Both x86 levels run these two only for a
 * caller without Q8_K activations (args.xk NULL): their tables take the
 * GEMV-per-token gemms of kquants_gemv.h (kern_*_gemm_q8k_q2_k, _q3_k). */
KQ_INLINE __m256i kq_q2_field(const uint8_t *qs, int b)
{
	return _mm256_and_si256(_mm256_srli_epi16(kq_load(qs + 32 * (b / 4)), 2 * (b % 4)),
				_mm256_set1_epi8(3));
}

KQ_INLINE __m256 kq_pair(const float *f, int b)
{
	return _mm256_setr_m128(_mm_set1_ps(f[2 * b]), _mm_set1_ps(f[2 * b + 1]));
}

/* Q2_K: value = d * sc * q - dmin * m per 16; the minimum term is the
 * activations' sum per 4 (a dot with ones) times dmin * m. */
static void KQ_FN(q2k_tile)(const struct kern_gemm_args *a, const void *wv,
			    const struct kq_tok *k, size_t nt, float *y, size_t y_stride)
{
	const struct kern_block_q2_k *w = wv;
	const size_t nsb = a->n_in / KERN_QKK;
	const __m256i ones = _mm256_set1_epi8(1);
	__m256 acc[KQ_T], accm[KQ_T];

	for (size_t t = 0; t < KQ_T; t++) {
		acc[t] = _mm256_setzero_ps();
		accm[t] = _mm256_setzero_ps();
	}
	for (size_t s = 0; s < nsb; s++) {
		const struct kern_block_q2_k *b = w + s;
		const float d = _cvtsh_ss(b->d), dmin = _cvtsh_ss(b->dmin);
		float fsc[16], fm[16];

		for (int j = 0; j < 16; j++) {
			fsc[j] = d * (float)(b->scales[j] & 15);
			fm[j] = dmin * (float)(b->scales[j] >> 4);
		}
		for (int j = 0; j < 8; j++) {
			__m256i q = kq_q2_field(b->qs, j);
			__m256 scv = kq_pair(fsc, j), mv = kq_pair(fm, j);
			for (size_t t = 0; t < nt; t++) {
				const struct kern_block_q8a *x = k[t].x + 8 * s + j;
				__m256i xv = kq_load(x->qs);
				__m256 dx = _mm256_set1_ps(x->d);
				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KQ_DOT(q, xv)),
							 _mm256_mul_ps(scv, dx), acc[t]);
				accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KQ_DOT(ones, xv)),
							  _mm256_mul_ps(mv, dx), accm[t]);
			}
		}
	}
	for (size_t t = 0; t < nt; t++)
		y[t * y_stride] = avx2__hsum(acc[t]) - avx2__hsum(accm[t]);
}

/* Q3_K: q = 2 low bits + 4 x the hmask bit (bit b of hmask[l] for value
 * l of block b) - 4, signed; d * (6-bit scale - 32) per 16. */
static void KQ_FN(q3k_tile)(const struct kern_gemm_args *a, const void *wv,
			    const struct kq_tok *k, size_t nt, float *y, size_t y_stride)
{
	const struct kern_block_q3_k *w = wv;
	const size_t nsb = a->n_in / KERN_QKK;
	const __m256i one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
	__m256 acc[KQ_T];

	for (size_t t = 0; t < KQ_T; t++)
		acc[t] = _mm256_setzero_ps();
	for (size_t s = 0; s < nsb; s++) {
		const struct kern_block_q3_k *b = w + s;
		const float d = _cvtsh_ss(b->d);
		const __m256i hm = kq_load(b->hmask);
		float fsc[16];

		for (int j = 0; j < 16; j++)
			fsc[j] = d * (float)kern_q3k_scale(b->scales, j);
		for (int j = 0; j < 8; j++) {
			__m256i h = _mm256_and_si256(_mm256_srli_epi16(hm, j), one);
			__m256i q = _mm256_sub_epi8(
				_mm256_or_si256(kq_q2_field(b->qs, j), _mm256_slli_epi16(h, 2)), four);
			__m256i qu = _mm256_abs_epi8(q);
			__m256 scv = kq_pair(fsc, j);
			for (size_t t = 0; t < nt; t++) {
				const struct kern_block_q8a *x = k[t].x + 8 * s + j;
				__m256i i = KQ_DOT(qu, _mm256_sign_epi8(kq_load(x->qs), q));
				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i),
							 _mm256_mul_ps(scv, _mm256_set1_ps(x->d)), acc[t]);
			}
		}
	}
	for (size_t t = 0; t < nt; t++)
		y[t * y_stride] = avx2__hsum(acc[t]);
}

/* 16 bytes of nibbles as 32 bytes: the low nibbles (elements 0-15), then
 * the high ones (16-31): the layout of every 32-element block here. */
KQ_INLINE __m256i kq_nibbles(const uint8_t *p)
{
	const __m128i m4 = _mm_set1_epi8(0x0f);
	__m128i q = _mm_loadu_si128((const __m128i *)p);

	return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}

/* The IQ4_NL levels of 32 nibbles (one table lookup per 128-bit lane). */
KQ_INLINE __m256i kq_iq4_values(const uint8_t *p)
{
	const __m256i tab =
		_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kern_iq4nl_values));

	return _mm256_shuffle_epi8(tab, kq_nibbles(p));
}

/* The fifth bits of a Q5_0/Q5_1 block as 16 in each byte they are set:
 * byte i takes byte i / 8 of qh, then tests bit i % 8. */
KQ_INLINE __m256i kq_q5_high(const uint8_t qh[4])
{
	uint32_t h;

	memcpy(&h, qh, 4);
	const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
						2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	const __m256i bits = _mm256_set1_epi64x(0x8040201008040201ll);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), spread);

	v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
	return _mm256_and_si256(v, _mm256_set1_epi8(16));
}

/* Signed weights: sum w * qx through |w| and sign(qx, w) (|w| <= 127). */
KQ_INLINE __m256i kq_dot_signed(__m256i w, __m256i x)
{
	return KQ_DOT(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
}

static void KQ_FN(iq4xs_tile)(const struct kern_gemm_args *a, const void *wv,
			      const struct kq_tok *k, size_t nt, float *y, size_t y_stride)
{
	const struct kern_block_iq4_xs *w = wv;
	const size_t nsb = a->n_in / KERN_QKK;
	__m256 acc[KQ_T];
	float sc_f[KQ_T][8] __attribute__((aligned(32)));

	for (size_t t = 0; t < KQ_T; t++)
		acc[t] = _mm256_setzero_ps();
	for (size_t s = 0; s < nsb; s++) {
		const struct kern_block_iq4_xs *b = w + s;
		int32_t ls[8] __attribute__((aligned(32)));

		for (int j = 0; j < 8; j++)
			ls[j] = kern_iq4xs_scale(b, j);
		const __m256 dls = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b->d)),
						 _mm256_cvtepi32_ps(_mm256_load_si256((const __m256i *)ls)));
		for (size_t t = 0; t < nt; t++)
			_mm256_store_ps(sc_f[t], _mm256_mul_ps(dls, _mm256_loadu_ps(k[t].xd + 8 * s)));
		for (int j = 0; j < 8; j++) {
			__m256i v = kq_iq4_values(b->qs + 16 * j);
			for (size_t t = 0; t < nt; t++) {
				__m256i i = kq_dot_signed(v, kq_load(k[t].x[8 * s + j].qs));
				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i),
							 _mm256_set1_ps(sc_f[t][j]), acc[t]);
			}
		}
	}
	for (size_t t = 0; t < nt; t++)
		y[t * y_stride] = avx2__hsum(acc[t]);
}

/*
 * The 32-element formats, one block per activation block:
 *   kind 0 IQ4_NL (table values), 1 Q5_0 (q | h << 4, minus 16),
 *   2 Q4_1 (unsigned nibbles), 3 Q5_1 (unsigned 5 bits);
 * kinds 2 and 3 add m * dx * sum(qx) per block (their minimum).
 */
KQ_INLINE void kq_b32_tile(const struct kern_gemm_args *a, const void *wv, int kind,
			   const struct kq_tok *k, size_t nt, float *y, size_t y_stride)
{
	static const size_t sizes[4] = {sizeof(struct kern_block_iq4_nl),
					sizeof(struct kern_block_q5_0),
					sizeof(struct kern_block_q4_1),
					sizeof(struct kern_block_q5_1)};
	const size_t nb = a->n_in / KERN_QK, bs = sizes[kind];
	__m256 acc[KQ_T];
	float accm[KQ_T];

	for (size_t t = 0; t < KQ_T; t++) {
		acc[t] = _mm256_setzero_ps();
		accm[t] = 0.0f;
	}
	for (size_t j = 0; j < nb; j++) {
		const uint8_t *b = (const uint8_t *)wv + j * bs;
		uint16_t dh, mh = 0;
		__m256i v;

		memcpy(&dh, b, 2);
		if (kind == 0) {
			v = kq_iq4_values(b + 2);
		} else if (kind == 1) {
			v = _mm256_or_si256(kq_nibbles(b + 6), kq_q5_high(b + 2));
			v = _mm256_sub_epi8(v, _mm256_set1_epi8(16));
		} else if (kind == 2) {
			memcpy(&mh, b + 2, 2);
			v = kq_nibbles(b + 4);
		} else {
			memcpy(&mh, b + 2, 2);
			v = _mm256_or_si256(kq_nibbles(b + 8), kq_q5_high(b + 4));
		}
		const float d = _cvtsh_ss(dh), m = _cvtsh_ss(mh);
		for (size_t t = 0; t < nt; t++) {
			__m256i x = kq_load(k[t].x[j].qs);
			__m256i i = kind < 2 ? kq_dot_signed(v, x) : KQ_DOT(v, x);
			const float dx = k[t].xd[j];
			acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_set1_ps(d * dx), acc[t]);
			if (kind >= 2)
				accm[t] += m * dx * (float)(k[t].xs8[j] / 8);
		}
	}
	for (size_t t = 0; t < nt; t++)
		y[t * y_stride] = avx2__hsum(acc[t]) + accm[t];
}

#define KQ_B32(name, kind)                                                                    \
	static void KQ_FN(name)(const struct kern_gemm_args *a, const void *w,                \
				const struct kq_tok *k, size_t nt, float *y, size_t y_stride) \
	{                                                                                     \
		kq_b32_tile(a, w, kind, k, nt, y, y_stride);                                  \
	}

KQ_B32(iq4nl_tile, 0)
KQ_B32(q5_0_tile, 1)
KQ_B32(q4_1_tile, 2)
KQ_B32(q5_1_tile, 3)

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

KQ_GEMM(gemm_q2_k, char, KQ_FN(q2k_tile))
KQ_GEMM(gemm_q3_k, char, KQ_FN(q3k_tile))
KQ_GEMM(gemm_iq4_xs, char, KQ_FN(iq4xs_tile))
KQ_GEMM(gemm_iq4_nl, char, KQ_FN(iq4nl_tile))
KQ_GEMM(gemm_q5_0, char, KQ_FN(q5_0_tile))
KQ_GEMM(gemm_q4_1, char, KQ_FN(q4_1_tile))
KQ_GEMM(gemm_q5_1, char, KQ_FN(q5_1_tile))
