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
#define AVX2_UNROLL8 _Pragma("GCC unroll 8")

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

/* Prefill tile of quantized weights: RM rows x RN tokens of float
 * accumulators (plus the rows' unpacked blocks) fill the 16 registers. */
#define AVX2_QRM 3
#define AVX2_QRN 4
/* Decode: rows streamed side by side, sharing each activation block load. */
#define AVX2_QRD 4

/* Scales of blocks b..b+n-1 (n <= 8) of a row as floats, zero past n.
 * Block j's fp16 scale sits at byte bs*j = (bs-2)*j + 2j: word j of the
 * 16 bytes at (bs-2)*j (in bounds: they end inside block j). Eight loads
 * and a tree of word blends gather them without a (slow) vpgatherdd. */
AVX2_INLINE __m256 avx2__scales8(const char *row, size_t bs, size_t b, size_t n)
{
	const char *p = row + b * bs;
	__m128i v[KERN_GROUP];

	AVX2_UNROLL8
	for (size_t j = 0; j < KERN_GROUP; j++)
		v[j] = j < n ? _mm_loadu_si128((const __m128i *)(p + (bs - 2) * j))
			     : _mm_setzero_si128();
	v[0] = _mm_blend_epi16(v[0], v[1], 0x02);
	v[2] = _mm_blend_epi16(v[2], v[3], 0x08);
	v[4] = _mm_blend_epi16(v[4], v[5], 0x20);
	v[6] = _mm_blend_epi16(v[6], v[7], 0x80);
	v[0] = _mm_blend_epi16(v[0], v[2], 0x0c);
	v[4] = _mm_blend_epi16(v[4], v[6], 0xc0);
	return _mm256_cvtph_ps(_mm_blend_epi16(v[0], v[4], 0xf0));
}

/* Block b of a row as the unsigned operand of maddubs (Q4_0: nibbles
 * 0..15, low nibbles first; Q8_0: |w|) and, for Q8_0, the signed weights
 * whose signs go onto the activations. */
AVX2_INLINE __m256i avx2__unpack(uint32_t wt, const char *row, size_t b, __m256i *sw)
{
	if (wt == DTYPE_Q8_0) {
		const struct kern_block_q8_0 *blk = (const struct kern_block_q8_0 *)row + b;
		*sw = _mm256_loadu_si256((const __m256i *)blk->qs);
		return _mm256_abs_epi8(*sw);
	}
	const struct kern_block_q4_0 *blk = (const struct kern_block_q4_0 *)row + b;
	__m128i q = _mm_loadu_si128((const __m128i *)blk->qs);

	*sw = _mm256_setzero_si256();
	return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0f));
}

/* One group of n <= 8 blocks from block b of a tile (avx2__tile_q). */
AVX2_INLINE void avx2__group_q(uint32_t wt, const struct kern_gemm_args *a, const char *const *w,
			       const struct kern_block_q8a *const *x,
			       __m256 acc[AVX2_QRD][AVX2_QRN], size_t t, size_t b, size_t n, int R,
			       int T)
{
	const size_t bs = wt == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0)
					   : sizeof(struct kern_block_q4_0);
	const __m256i ones = _mm256_set1_epi16(1), eight = _mm256_set1_epi8(8);
	float p[AVX2_QRD][AVX2_QRN][KERN_GROUP] __attribute__((aligned(32)));
	__m256 dw[AVX2_QRD];

	AVX2_UNROLL
	for (int r = 0; r < R; r++) {
		if (T == 1) /* decode streams: fetch the group after next */
			for (size_t off = 0; off < KERN_GROUP * bs; off += 64)
				_mm_prefetch(w[r] + (b + 2 * KERN_GROUP) * bs + off, _MM_HINT_T0);
		dw[r] = avx2__scales8(w[r], bs, b, n);
	}
	AVX2_UNROLL
	for (int k = 0; k < T; k++) {
		size_t i = (t + (size_t)k) * a->xd_stride + b;
		__m256 dx = _mm256_loadu_ps(a->xd + i);
		AVX2_UNROLL
		for (int r = 0; r < R; r++)
			_mm256_store_ps(p[r][k], _mm256_mul_ps(dw[r], dx));
	}
	for (size_t j = 0; j < n; j++) {
		__m256i uw[AVX2_QRD], sw[AVX2_QRD];
		AVX2_UNROLL
		for (int r = 0; r < R; r++)
			uw[r] = avx2__unpack(wt, w[r], b + j, &sw[r]);
		AVX2_UNROLL
		for (int k = 0; k < T; k++) {
			__m256i xv = _mm256_loadu_si256((const __m256i *)x[k][b + j].qs);
			/* Q4_0's offset: 8 * x pair sums, <= 2032 */
			__m256i xo = wt == DTYPE_Q4_0 ? _mm256_maddubs_epi16(eight, xv)
						      : _mm256_setzero_si256();
			AVX2_UNROLL
			for (int r = 0; r < R; r++) {
				__m256i pr;
				if (wt == DTYPE_Q8_0)
					pr = _mm256_maddubs_epi16(uw[r],
								  _mm256_sign_epi8(xv, sw[r]));
				else
					pr = _mm256_sub_epi16(_mm256_maddubs_epi16(uw[r], xv),
							      xo);
				__m256i s = _mm256_madd_epi16(pr, ones);
				acc[r][k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s),
							    _mm256_broadcast_ss(&p[r][k][j]),
							    acc[r][k]);
			}
		}
	}
}

/*
 * Rows [o, o+R) x tokens [t, t+T), R and T compile-time constants (the
 * accumulators live in registers). Per group of 8 blocks, the R x T scale
 * products dw * dx are formed once as vectors and kept in L1. Then per
 * block and (row, token):
 *   acc += float(madd(maddubs(w, x) [- maddubs(8, x)], 1)) * broadcast(dw * dx)
 * with no horizontal reduction until the row ends; the bracket is Q4_0's
 * -8 offset, taken off exactly in int16 (pairs stay within +-3810). Each (row, token)
 * result sees exactly this sequence in every tile shape, so results do
 * not depend on tiling, threads or batch size. Q4_0 pairs are at most
 * 2*15*127 and Q8_0's (sign trick) 2*128*127: maddubs cannot saturate.
 */
AVX2_INLINE void avx2__tile_q(uint32_t wt, const struct kern_gemm_args *a, size_t o, size_t t,
			      int R, int T)
{
	const size_t nb = a->n_in / KERN_QK;
	const char *w[AVX2_QRD];
	const struct kern_block_q8a *x[AVX2_QRN];
	__m256 acc[AVX2_QRD][AVX2_QRN];

	AVX2_UNROLL
	for (int r = 0; r < R; r++)
		w[r] = (const char *)a->w + (o + (size_t)r) * a->w_stride;
	AVX2_UNROLL
	for (int k = 0; k < T; k++)
		x[k] = (const struct kern_block_q8a *)((const char *)a->x +
						       (t + (size_t)k) * a->x_stride);
	AVX2_UNROLL
	for (int r = 0; r < R; r++)
		AVX2_UNROLL
		for (int k = 0; k < T; k++)
			acc[r][k] = _mm256_setzero_ps();
	for (size_t b = 0; b < nb; b += KERN_GROUP) {
		/* constant n in the common case: no per-block tests */
		if (nb - b >= KERN_GROUP)
			avx2__group_q(wt, a, w, x, acc, t, b, KERN_GROUP, R, T);
		else
			avx2__group_q(wt, a, w, x, acc, t, b, nb - b, R, T);
	}
	AVX2_UNROLL
	for (int r = 0; r < R; r++)
		AVX2_UNROLL
		for (int k = 0; k < T; k++)
			a->y[(t + (size_t)k) * a->y_stride + o + (size_t)r] = avx2__hsum(acc[r][k]);
}

/* Rows [o, o+R) x tokens [t, t+T), with R <= AVX2_QRD and T <= AVX2_QRN
 * known at run time: one constant-shape tile each. */
AVX2_INLINE void avx2__tile_q_any(uint32_t wt, const struct kern_gemm_args *a, size_t o,
				  size_t t, size_t R, size_t T)
{
#define AVX2_QCASE(r, k)                                  \
	case (r) * 8 + (k):                               \
		avx2__tile_q(wt, a, o, t, (r), (k));      \
		break;
	switch (R * 8 + T) {
		AVX2_QCASE(1, 1) AVX2_QCASE(1, 2) AVX2_QCASE(1, 3) AVX2_QCASE(1, 4)
		AVX2_QCASE(2, 1) AVX2_QCASE(2, 2) AVX2_QCASE(2, 3) AVX2_QCASE(2, 4)
		AVX2_QCASE(3, 1) AVX2_QCASE(3, 2) AVX2_QCASE(3, 3) AVX2_QCASE(3, 4)
		AVX2_QCASE(4, 1)
	default:
		assert(!"avx2 quantized tile shape");
	}
#undef AVX2_QCASE
}

AVX2_INLINE void avx2__gemm_q(uint32_t wt, const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	if (a->n_tok == 1) {
		for (size_t o = o0; o < o1; o += AVX2_QRD)
			avx2__tile_q_any(wt, a, o, 0, o1 - o < AVX2_QRD ? o1 - o : AVX2_QRD, 1);
		return;
	}
	for (size_t tb = 0; tb < a->n_tok; tb += AVX2_TOKEN_BLOCK) {
		size_t te = a->n_tok - tb > AVX2_TOKEN_BLOCK ? tb + AVX2_TOKEN_BLOCK : a->n_tok;
		for (size_t o = o0; o < o1; o += AVX2_QRM) {
			size_t R = o1 - o < AVX2_QRM ? o1 - o : AVX2_QRM;
			for (size_t t = tb; t < te; t += AVX2_QRN)
				avx2__tile_q_any(wt, a, o, t, R,
						 te - t < AVX2_QRN ? te - t : AVX2_QRN);
		}
	}
}

/* ---- drivers ------------------------------------------------------------------- */

/* Rows [o0, o1) in RM x TM tiles, remainders in 1-wide tiles. */
AVX2_INLINE void avx2__drive(uint32_t wt, const struct kern_gemm_args *a, size_t o0,
			     size_t o1, int RM, int TM)
{
	for (size_t tb = 0; tb < a->n_tok; tb += AVX2_TOKEN_BLOCK) {
		size_t te = a->n_tok - tb > AVX2_TOKEN_BLOCK ? tb + AVX2_TOKEN_BLOCK : a->n_tok;
		size_t o = o0, t;
		for (; o + (size_t)RM <= o1; o += (size_t)RM) {
			for (t = tb; t + (size_t)TM <= te; t += (size_t)TM)
				avx2__tile_f(wt, a, o, t, RM, TM);
			for (; t < te; t++)
				avx2__tile_f(wt, a, o, t, RM, 1);
		}
		for (; o < o1; o++) {
			for (t = tb; t + (size_t)TM <= te; t += (size_t)TM)
				avx2__tile_f(wt, a, o, t, 1, TM);
			for (; t < te; t++)
				avx2__tile_f(wt, a, o, t, 1, 1);
		}
	}
}

#define AVX2_GEMM_F(name, wt)                                                   \
	static void name(const struct kern_gemm_args *a, size_t o0, size_t o1) \
	{                                                                       \
		if (a->n_tok == 1)                                              \
			avx2__drive(wt, a, o0, o1, 4, 1);                    \
		else                                                            \
			avx2__drive(wt, a, o0, o1, 4, 2);                    \
	}

#define AVX2_GEMM_Q(name, wt)                                                   \
	static void name(const struct kern_gemm_args *a, size_t o0, size_t o1) \
	{                                                                       \
		avx2__gemm_q(wt, a, o0, o1);                                    \
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

/* ---- vector helpers (attention) ---------------------------------------------------- */

float kern_avx2_dot(const float *a, const float *b, size_t n)
{
	__m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
	size_t i = 0;
	float s;

	for (; i + 16 <= n; i += 16) {
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
		s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
	}
	if (i + 8 <= n) {
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
		i += 8;
	}
	s = avx2__hsum(_mm256_add_ps(s0, s1));
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

void kern_avx2_scale_add(float *y, float r, float p, const float *x, size_t n)
{
	const __m256 rv = _mm256_set1_ps(r), pv = _mm256_set1_ps(p);
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(pv, _mm256_loadu_ps(x + i),
						      _mm256_mul_ps(_mm256_loadu_ps(y + i), rv)));
	for (; i < n; i++)
		y[i] = y[i] * r + p * x[i];
}

const struct kern_ops kern_ops_avx2 = {
	.name = "avx2",
	.dot = kern_avx2_dot,
	.scale_add = kern_avx2_scale_add,
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
