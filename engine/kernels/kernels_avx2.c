/*
 * kernels_avx2.c - the AVX2 + FMA + F16C level (compiled with those flags
 * only; selected at run time by kern_init()).
 *
 * Float weights (F32, F16, BF16): 8 weights widened to floats in registers
 * (F16C for f16, a 16-bit shift for bf16), one FMA accumulator per
 * (row, token) pair; a tile of 4 rows x 2 tokens loads each weight vector
 * once for both tokens. Leftover columns (n_in % 8) are summed in scalar.
 *
 * Quantized weights (Q8_0, Q4_0) against Q8 activation blocks: 8 rows
 * at a time, interleaved so that lane r of a vector is row r: vector c
 * of a block holds elements 4c..4c+3 of each row, and one maddubs with
 * the token's 4 bytes broadcast gives the 8 rows' pair sums. Per block
 * and token that yields the 8 rows' exact int32 dot products S in one
 * vector, and the only float work is acc = fma(float(S), dw * dx, acc):
 * no horizontal sums, and results come out in row lanes. Q4_0 nibbles
 * are used unsigned (the -8 offset comes off as 8 * sum(x), exactly, in
 * int32); Q8_0 uses the sign trick (maddubs(|w|, sign(x, w))). Decode
 * (one token) interleaves in registers block by block (Q4_0: a 4x4 dword
 * transpose of the packed nibbles; Q8_0: 8x8) and prefetches the next 8
 * rows. Prefill (two tokens or more) is kernels_qgemm_avx2.c: the same
 * layout packed once per block of tokens, 16 rows x 2 tokens a tile.
 *
 * Every (row, token) result is that same fma sequence over the blocks in
 * order (the int sums are exact whatever computes them), so results do
 * not depend on tiling, threads or batch size.
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

/* Rows per lane vector: lane r of every vector below is row o + r. */
#define AVX2_QR 8

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

/* 8x8 transpose of 32-bit elements: v[c] lane r <- v[r] lane c. */
AVX2_INLINE void avx2__transpose8(__m256i v[8])
{
	__m256i t[8], u[8];

	AVX2_UNROLL8
	for (int i = 0; i < 8; i += 2) {
		t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
		t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
	}
	AVX2_UNROLL8
	for (int i = 0; i < 8; i += 4) {
		u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
		u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
		u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
		u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
	}
	AVX2_UNROLL8
	for (int i = 0; i < 4; i++) {
		v[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
		v[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
	}
}

/* Q4_0 block b of rows [0, R) (R <= 8; rows `stride` bytes apart from
 * w) straight to the interleaved layout: the 16 qs bytes of rows r and
 * r+4 share a vector, a 4x4 dword transpose gives dword c of every row,
 * whose low nibbles are chunk c and high nibbles chunk c+4. */
AVX2_INLINE void avx2__q4_dwords(const char *w, size_t stride, size_t b, size_t R, __m256i v[4])
{
	__m256i t[4];

	AVX2_UNROLL
	for (size_t r = 0; r < 4; r++) {
		const struct kern_block_q4_0 *lo =
			(const struct kern_block_q4_0 *)(w + r * stride) + b;
		const struct kern_block_q4_0 *hi =
			(const struct kern_block_q4_0 *)(w + (r + 4) * stride) + b;
		__m128i l = r < R ? _mm_loadu_si128((const __m128i *)lo->qs) : _mm_setzero_si128();
		__m128i h = r + 4 < R ? _mm_loadu_si128((const __m128i *)hi->qs)
				      : _mm_setzero_si128();
		v[r] = _mm256_set_m128i(h, l);
	}
	t[0] = _mm256_unpacklo_epi32(v[0], v[1]);
	t[1] = _mm256_unpackhi_epi32(v[0], v[1]);
	t[2] = _mm256_unpacklo_epi32(v[2], v[3]);
	t[3] = _mm256_unpackhi_epi32(v[2], v[3]);
	v[0] = _mm256_unpacklo_epi64(t[0], t[2]);
	v[1] = _mm256_unpackhi_epi64(t[0], t[2]);
	v[2] = _mm256_unpacklo_epi64(t[1], t[3]);
	v[3] = _mm256_unpackhi_epi64(t[1], t[3]);
}

/* Rows [o, o+R) (R <= 8) for one token (decode), block by block: the 8
 * rows' blocks are unpacked and transposed in registers to the packed
 * layout of the prefill GEMM (kernels_qgemm_avx2.c), then go through
 * the same sequence as its passes. The rows lie back to back, so the next
 * 8 are prefetched at the pace this tile consumes its own. */
AVX2_INLINE void avx2__gemv_q(uint32_t wt, const struct kern_gemm_args *a, size_t o, size_t R)
{
	const size_t bs = wt == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0)
					   : sizeof(struct kern_block_q4_0);
	const size_t nb = a->n_in / KERN_QK;
	const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0f);
	const struct kern_block_q8a *x = a->x;
	const char *w = (const char *)a->w + o * a->w_stride;
	const char *next = w + AVX2_QR * a->w_stride;
	float out[AVX2_QR] __attribute__((aligned(32)));
	__m256 acc = _mm256_setzero_ps();

	for (size_t b = 0; b < nb; b++) {
		__m256i u[AVX2_QR], sg[AVX2_QR], sum;
		__m128i h = _mm_setzero_si128();
#if defined(__clang__)
		/* clang wants a constant lane for _mm_insert_epi16 even in an
		 * unrolled loop; GCC's inserts measured faster than this. */
		uint16_t hs[8] __attribute__((aligned(16))) = {0};
#endif

		/* A fixed count per block, unrolled: an inner loop here made GCC
		 * keep acc on the stack. */
		AVX2_UNROLL8
		for (size_t off = 0; off < AVX2_QR * bs; off += 64)
			_mm_prefetch(next + b * AVX2_QR * bs + off, _MM_HINT_T0);
		AVX2_UNROLL8
		for (size_t r = 0; r < AVX2_QR; r++) {
			const char *row = w + r * a->w_stride;
			if (R == AVX2_QR || r < R) {
				uint16_t d;
				if (wt == DTYPE_Q8_0)
					u[r] = avx2__unpack(wt, row, b, &sg[r]);
				memcpy(&d, row + b * bs, sizeof(d));
#if defined(__clang__)
				hs[r] = d;
#else
				h = _mm_insert_epi16(h, d, (int)r);
#endif
			} else {
				u[r] = sg[r] = _mm256_setzero_si256();
			}
		}
#if defined(__clang__)
		h = _mm_load_si128((const __m128i *)hs);
#endif
		if (wt == DTYPE_Q4_0) {
			/* Nibbles are split as they are consumed so that only 4
			 * block vectors are live and acc stays in a register (with
			 * 8 live, GCC spilled acc and every block paid a store and
			 * reload on the fma chain). The int16 sum is exact in any
			 * order (at most 30480). */
			__m256i v[4];
			avx2__q4_dwords(w, a->w_stride, b, R, v);
			AVX2_UNROLL
			for (int c = 0; c < 4; c++) {
				int32_t q0, q1;
				memcpy(&q0, x[b].qs + 4 * c, sizeof(q0));
				memcpy(&q1, x[b].qs + 4 * (c + 4), sizeof(q1));
				__m256i lo = _mm256_and_si256(v[c], m4);
				__m256i hi = _mm256_and_si256(_mm256_srli_epi16(v[c], 4), m4);
				__m256i p = _mm256_add_epi16(
					_mm256_maddubs_epi16(lo, _mm256_set1_epi32(q0)),
					_mm256_maddubs_epi16(hi, _mm256_set1_epi32(q1)));
				sum = c == 0 ? p : _mm256_add_epi16(sum, p);
			}
			sum = _mm256_sub_epi32(_mm256_madd_epi16(sum, ones),
					       _mm256_set1_epi32(a->xs8[b]));
			acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum),
					      _mm256_mul_ps(_mm256_cvtph_ps(h),
							    _mm256_set1_ps(a->xd[b])),
					      acc);
			continue;
		}
		avx2__transpose8(u);
		avx2__transpose8(sg);
		AVX2_UNROLL8
		for (int c = 0; c < 8; c++) {
			int32_t q;
			memcpy(&q, x[b].qs + 4 * c, sizeof(q));
			__m256i xb = _mm256_set1_epi32(q);
			__m256i m = _mm256_madd_epi16(
				_mm256_maddubs_epi16(u[c], _mm256_sign_epi8(xb, sg[c])), ones);
			sum = c == 0 ? m : _mm256_add_epi32(sum, m);
		}
		acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum),
				      _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(a->xd[b])), acc);
	}
	/* A full tile stores straight to y: through `out`, GCC gave acc
	 * out's stack slot, and the fma chain went through memory. */
	if (R == AVX2_QR) {
		_mm256_storeu_ps(a->y + o, acc);
		return;
	}
	_mm256_store_ps(out, acc);
	memcpy(a->y + o, out, R * sizeof(float));
}

/* Full decode tiles get a function of their own: inlined into the
 * driver beside the prefill code, GCC kept the fma accumulator on the
 * stack and every block paid a store and reload on that chain. */
static __attribute__((noinline)) void avx2__gemv_q8_0_full(const struct kern_gemm_args *a,
							   size_t o)
{
	avx2__gemv_q(DTYPE_Q8_0, a, o, AVX2_QR);
}

static __attribute__((noinline)) void avx2__gemv_q4_0_full(const struct kern_gemm_args *a,
							   size_t o)
{
	avx2__gemv_q(DTYPE_Q4_0, a, o, AVX2_QR);
}

AVX2_INLINE void avx2__gemm_q(uint32_t wt, const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	if (a->n_tok == 1) {
		size_t o = o0;
		for (; o + AVX2_QR <= o1; o += AVX2_QR) {
			if (wt == DTYPE_Q8_0)
				avx2__gemv_q8_0_full(a, o);
			else
				avx2__gemv_q4_0_full(a, o);
		}
		if (o < o1)
			avx2__gemv_q(wt, a, o, o1 - o);
		return;
	}
	if (wt == DTYPE_Q8_0)
		kern_avx2_qgemm_q8_0(a, o0, o1);
	else
		kern_avx2_qgemm_q4_0(a, o0, o1);
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
