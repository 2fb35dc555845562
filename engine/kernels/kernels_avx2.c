/*
 * kernels_avx2.c - the AVX2 + FMA + F16C level (compiled with those flags
 * only; selected at run time by kern_init()).
 *
 * Float weights (F32, F16, BF16): 8 weights widened to floats in registers
 * (F16C for f16, a 16-bit shift for bf16), one FMA accumulator per
 * (row, token) pair; a tile of 4 rows x 2 tokens loads each weight vector
 * once for both tokens. Leftover columns (n_in % 8) are summed in scalar.
 *
 * Quantized weights (Q8_0, Q4_0) against Q8 activation blocks: per block
 * the int8 dot product is _mm256_maddubs_epi16(|w|, sign(x, w)) then
 * _mm256_madd_epi16 with ones; no saturation is possible, as |w| <= 128
 * and |x| <= 127 give pairs of at most 32512. The 8 int32 lanes go to
 * float and are scaled by dw, then by dx into the pair's accumulator. Q4_0
 * nibbles are split in registers (low nibbles -> elements 0..15, high ->
 * 16..31) and shifted to -8..7. Tiles: 2 rows x 4 tokens for prefill
 * (16 registers allow no more), 4 rows x 1 token for decode.
 *
 * The per-pair instruction sequence is the same in every tile shape, so
 * results do not depend on tiling, threads or batch size.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"

#define AVX2_INLINE static inline __attribute__((always_inline))
/* Tile loops must unroll fully so accumulators live in registers. */
#define AVX2_UNROLL _Pragma("GCC unroll 4")

/* Tokens per block: their activations stay in L2 while a thread's rows
 * pass over them. */
#define AVX2_TOKEN_BLOCK 64

AVX2_INLINE float avx2__hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* ---- float weights ------------------------------------------------------------ */

AVX2_INLINE __m256 avx2__load_w(uint32_t wt, const void *row, size_t i)
{
	if (wt == DTYPE_F32)
		return _mm256_loadu_ps((const float *)row + i);
	__m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + i));
	if (wt == DTYPE_F16)
		return _mm256_cvtph_ps(h);
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

AVX2_INLINE float avx2__scalar_w(uint32_t wt, const void *row, size_t i)
{
	if (wt == DTYPE_F32)
		return ((const float *)row)[i];
	if (wt == DTYPE_F16)
		return kern_fp16_to_fp32(((const uint16_t *)row)[i]);
	return kern_bf16_to_fp32(((const uint16_t *)row)[i]);
}

/* y for rows o..o+R-1 and tokens t..t+T-1. */
AVX2_INLINE void avx2__tile_f(uint32_t wt, const struct kern_gemm_args *a, size_t o, size_t t,
			      int R, int T)
{
	const char *w[4];
	const float *x[4];
	__m256 acc[4][4];
	size_t n8 = a->n_in & ~(size_t)7;

	AVX2_UNROLL
	for (int r = 0; r < R; r++)
		w[r] = (const char *)a->w + (o + r) * a->w_stride;
	AVX2_UNROLL
	for (int k = 0; k < T; k++)
		x[k] = (const float *)((const char *)a->x + (t + k) * a->x_stride);
	AVX2_UNROLL
	for (int r = 0; r < R; r++)
		AVX2_UNROLL
		for (int k = 0; k < T; k++)
			acc[r][k] = _mm256_setzero_ps();
	for (size_t i = 0; i < n8; i += 8) {
		__m256 xv[4];
		AVX2_UNROLL
		for (int k = 0; k < T; k++)
			xv[k] = _mm256_loadu_ps(x[k] + i);
		AVX2_UNROLL
		for (int r = 0; r < R; r++) {
			__m256 wv = avx2__load_w(wt, w[r], i);
			AVX2_UNROLL
			for (int k = 0; k < T; k++)
				acc[r][k] = _mm256_fmadd_ps(wv, xv[k], acc[r][k]);
		}
	}
	AVX2_UNROLL
	for (int r = 0; r < R; r++) {
		AVX2_UNROLL
		for (int k = 0; k < T; k++) {
			float s = avx2__hsum(acc[r][k]);
			for (size_t i = n8; i < a->n_in; i++)
				s += avx2__scalar_w(wt, w[r], i) * x[k][i];
			a->y[(t + k) * a->y_stride + o + r] = s;
		}
	}
}

/* ---- quantized weights --------------------------------------------------------- */

/* Block b of a Q8_0 / Q4_0 row as 32 signed bytes, and its scale. */
AVX2_INLINE __m256i avx2__load_q(uint32_t wt, const void *row, size_t b, float *d)
{
	if (wt == DTYPE_Q8_0) {
		const struct kern_block_q8_0 *blk = (const struct kern_block_q8_0 *)row + b;
		*d = _cvtsh_ss(blk->d);
		return _mm256_loadu_si256((const __m256i *)blk->qs);
	}
	const struct kern_block_q4_0 *blk = (const struct kern_block_q4_0 *)row + b;
	__m128i q = _mm_loadu_si128((const __m128i *)blk->qs);
	__m256i v = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);

	*d = _cvtsh_ss(blk->d);
	v = _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
	return _mm256_sub_epi8(v, _mm256_set1_epi8(8));
}

AVX2_INLINE void avx2__tile_q(uint32_t wt, const struct kern_gemm_args *a, size_t o, size_t t,
			      int R, int T)
{
	const char *w[4];
	const struct kern_block_q8a *x[4];
	__m256 acc[4][4];
	const __m256i ones = _mm256_set1_epi16(1);
	size_t nb = a->n_in / KERN_QK;

	AVX2_UNROLL
	for (int r = 0; r < R; r++)
		w[r] = (const char *)a->w + (o + r) * a->w_stride;
	AVX2_UNROLL
	for (int k = 0; k < T; k++)
		x[k] = (const struct kern_block_q8a *)((const char *)a->x + (t + k) * a->x_stride);
	AVX2_UNROLL
	for (int r = 0; r < R; r++)
		AVX2_UNROLL
		for (int k = 0; k < T; k++)
			acc[r][k] = _mm256_setzero_ps();
	for (size_t b = 0; b < nb; b++) {
		__m256i wq[4], aw[4];
		__m256 dw[4];
		AVX2_UNROLL
		for (int r = 0; r < R; r++) {
			float d;
			wq[r] = avx2__load_q(wt, w[r], b, &d);
			aw[r] = _mm256_sign_epi8(wq[r], wq[r]);
			dw[r] = _mm256_set1_ps(d);
		}
		AVX2_UNROLL
		for (int k = 0; k < T; k++) {
			__m256i xv = _mm256_loadu_si256((const __m256i *)x[k][b].qs);
			__m256 dx = _mm256_broadcast_ss(&x[k][b].d);
			AVX2_UNROLL
			for (int r = 0; r < R; r++) {
				__m256i p = _mm256_maddubs_epi16(aw[r], _mm256_sign_epi8(xv, wq[r]));
				__m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
				/* (sum * dw) * dx: one broadcast per row and per
				 * token instead of one per pair */
				acc[r][k] = _mm256_fmadd_ps(_mm256_mul_ps(f, dw[r]), dx, acc[r][k]);
			}
		}
	}
	AVX2_UNROLL
	for (int r = 0; r < R; r++)
		AVX2_UNROLL
		for (int k = 0; k < T; k++)
			a->y[(t + k) * a->y_stride + o + r] = avx2__hsum(acc[r][k]);
}

/* ---- drivers ------------------------------------------------------------------- */

AVX2_INLINE void avx2__tile(int quant, uint32_t wt, const struct kern_gemm_args *a, size_t o,
			    size_t t, int R, int T)
{
	if (quant)
		avx2__tile_q(wt, a, o, t, R, T);
	else
		avx2__tile_f(wt, a, o, t, R, T);
}

/* Rows [o0, o1) in RM x TM tiles, remainders in 1-wide tiles. */
AVX2_INLINE void avx2__drive(int quant, uint32_t wt, const struct kern_gemm_args *a, size_t o0,
			     size_t o1, int RM, int TM)
{
	for (size_t tb = 0; tb < a->n_tok; tb += AVX2_TOKEN_BLOCK) {
		size_t te = a->n_tok - tb > AVX2_TOKEN_BLOCK ? tb + AVX2_TOKEN_BLOCK : a->n_tok;
		size_t o = o0, t;
		for (; o + (size_t)RM <= o1; o += (size_t)RM) {
			for (t = tb; t + (size_t)TM <= te; t += (size_t)TM)
				avx2__tile(quant, wt, a, o, t, RM, TM);
			for (; t < te; t++)
				avx2__tile(quant, wt, a, o, t, RM, 1);
		}
		for (; o < o1; o++) {
			for (t = tb; t + (size_t)TM <= te; t += (size_t)TM)
				avx2__tile(quant, wt, a, o, t, 1, TM);
			for (; t < te; t++)
				avx2__tile(quant, wt, a, o, t, 1, 1);
		}
	}
}

#define AVX2_GEMM_F(name, wt)                                                   \
	static void name(const struct kern_gemm_args *a, size_t o0, size_t o1) \
	{                                                                       \
		if (a->n_tok == 1)                                              \
			avx2__drive(0, wt, a, o0, o1, 4, 1);                    \
		else                                                            \
			avx2__drive(0, wt, a, o0, o1, 4, 2);                    \
	}

#define AVX2_GEMM_Q(name, wt)                                                   \
	static void name(const struct kern_gemm_args *a, size_t o0, size_t o1) \
	{                                                                       \
		if (a->n_tok < 4)                                               \
			avx2__drive(1, wt, a, o0, o1, 4, 1);                    \
		else                                                            \
			avx2__drive(1, wt, a, o0, o1, 2, 4);                    \
	}

AVX2_GEMM_F(avx2__gemm_f32, DTYPE_F32)
AVX2_GEMM_F(avx2__gemm_f16, DTYPE_F16)
AVX2_GEMM_F(avx2__gemm_bf16, DTYPE_BF16)
AVX2_GEMM_Q(avx2__gemm_q8_0, DTYPE_Q8_0)
AVX2_GEMM_Q(avx2__gemm_q4_0, DTYPE_Q4_0)

/* ---- activation quantization ----------------------------------------------------- */

/* Rounds like kern_round_q8(): NaN to 0, clamp to +-127, then half away
 * from zero (trunc, and a step where the exact fraction is >= 0.5). */
AVX2_INLINE __m256i avx2__round_q8(__m256 v)
{
	const __m256 lim = _mm256_set1_ps(127.0f), one = _mm256_set1_ps(1.0f);
	__m256 t, f;

	v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
	v = _mm256_max_ps(_mm256_min_ps(v, lim), _mm256_sub_ps(_mm256_setzero_ps(), lim));
	t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
	f = _mm256_sub_ps(v, t);
	t = _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ), one));
	t = _mm256_sub_ps(t, _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(-0.5f), _CMP_LE_OQ), one));
	return _mm256_cvttps_epi32(t);
}

static void avx2__quantize_act(const float *x, struct kern_block_q8a *y, size_t n)
{
	const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));

	for (size_t b = 0; b < n / KERN_QK; b++, x += KERN_QK) {
		__m256 v[4], m;
		__m128 m4;
		for (int k = 0; k < 4; k++)
			v[k] = _mm256_loadu_ps(x + 8 * k);
		m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], absmask), _mm256_and_ps(v[1], absmask)),
				  _mm256_max_ps(_mm256_and_ps(v[2], absmask), _mm256_and_ps(v[3], absmask)));
		m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
		m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
		m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
		float amax = _mm_cvtss_f32(m4);
		float d = amax / 127.0f;
		float id = d != 0.0f ? 1.0f / d : 0.0f;
		__m256 idv = _mm256_set1_ps(id);
		__m256i q0 = avx2__round_q8(_mm256_mul_ps(v[0], idv));
		__m256i q1 = avx2__round_q8(_mm256_mul_ps(v[1], idv));
		__m256i q2 = avx2__round_q8(_mm256_mul_ps(v[2], idv));
		__m256i q3 = avx2__round_q8(_mm256_mul_ps(v[3], idv));
		/* packs interleave 128-bit lanes; the permute restores order */
		__m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
		p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
		y[b].d = d;
		_mm256_storeu_si256((__m256i *)y[b].qs, p);
	}
}

const struct kern_ops kern_ops_avx2 = {
	.name = "avx2",
	.quantize_act = avx2__quantize_act,
	.gemm =
		{
			[DTYPE_F32] = avx2__gemm_f32,
			[DTYPE_F16] = avx2__gemm_f16,
			[DTYPE_BF16] = avx2__gemm_bf16,
			[DTYPE_Q8_0] = avx2__gemm_q8_0,
			[DTYPE_Q4_0] = avx2__gemm_q4_0,
		},
};
#endif
