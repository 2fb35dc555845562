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
 * int32); Q8_0 uses the sign trick (maddubs(|w|, sign(x, w))). Prefill
 * (two tokens or more) is kernels_qgemm_avx2.c: that layout packed once
 * per block of tokens, 16 rows x 2 tokens a tile. Decode (one token,
 * memory bound) reads the weights in their file layout and reduces the 8
 * rows' partial sums into row lanes afterwards (Q4_0: two vphaddw; Q8_0:
 * an add-transpose), which costs fewer vector-port cycles than
 * transposing the weights going in; block scales are gathered in general
 * registers; the next 8 rows are prefetched. Per 8 rows and block that is
 * ~15 cycles for either type on Zen 3 by llvm-mca (was 21 and 37).
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
#include "quants.h"
#include "math_avx2.h"

#define AVX2_INLINE static inline __attribute__((always_inline))
/* Tile loops must unroll fully so accumulators live in registers. */
#define AVX2_UNROLL _Pragma("GCC unroll 4")
#define AVX2_UNROLL8 _Pragma("GCC unroll 8")

/* Tokens per block: their activations stay in L2 while a thread's rows
 * pass over them. */
#define AVX2_TOKEN_BLOCK 64
/* Rows of a one-token (decode) float tile (LEVELS.md). */
#define AVX2_GEMV_ROWS 8

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
	const char *w[AVX2_GEMV_ROWS];
	const float *x[4];
	__m256 acc[AVX2_GEMV_ROWS][4];
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
		/* Decode streams rows that are a page each (f16, 2048 wide):
		 * the hardware prefetchers restart at every page, so the next
		 * tile's rows are fetched at the pace this one is read, into
		 * L2: 16-32 KB ahead overflowed L1 (Zen 4, F16 decode step
		 * 136-138 -> 94-102 ms CPU). */
		if (T == 1 && (i * (wt == DTYPE_F32 ? 4 : 2)) % 64 == 0) {
			/* the tile's R rows lie back to back: the next tile
			 * as one linear stream, R lines per 64 bytes of a row */
			const char *nx = w[0] + (size_t)R * a->w_stride;
			size_t off = i * (wt == DTYPE_F32 ? 4 : 2) * (size_t)R;
			AVX2_UNROLL
			for (int r = 0; r < R; r++)
				_mm_prefetch(nx + off + (size_t)r * 64, _MM_HINT_T1);
		}
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

/* The fp16 scales of block b of rows [0, R) (rows `stride` bytes apart
 * from w, blocks `bs` bytes long) as 8 floats, rows past R zero. They are
 * gathered in general registers: 8 `vpinsrw` from memory cost ~12 cycles
 * of vector-port time per block on Zen 3 (llvm-mca), more than the whole
 * dot product; scalar loads, shifts and ors run on the idle integer side. */
AVX2_INLINE __m256 avx2__scales(const char *w, size_t stride, size_t bs, size_t b, size_t R)
{
	uint64_t h[2] = {0, 0};

	AVX2_UNROLL8
	for (size_t r = 0; r < AVX2_QR; r++) {
		uint16_t d = 0;
		if (R == AVX2_QR || r < R)
			memcpy(&d, w + r * stride + b * bs, sizeof(d));
		h[r / 4] |= (uint64_t)d << (16 * (r % 4));
		/* GCC otherwise turns the shifts and ors into vector code,
		 * back on the ports this is meant to spare. */
		__asm__("" : "+r"(h[r / 4]));
	}
	return _mm256_cvtph_ps(_mm_set_epi64x((long long)h[1], (long long)h[0]));
}

/* 8 rows' int32 sums from v[r] (8 int32 partial sums of row r each):
 * an add-transpose (unpack, add; 14 shuffles) instead of transposing the
 * weights going in (24 for Q8_0's 32-byte rows) or vphaddd (2 cycles of
 * one port each on Zen 3). Lane r of the result is row r. */
AVX2_INLINE __m256i avx2__rows_sum8(__m256i v[8])
{
	__m256i a[4], c[2];

	AVX2_UNROLL
	for (int i = 0; i < 4; i++)
		a[i] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
					_mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
	/* a[i] per half: rows 2i, 2i+1, 2i, 2i+1 */
	AVX2_UNROLL
	for (int i = 0; i < 2; i++)
		c[i] = _mm256_add_epi32(_mm256_unpacklo_epi64(a[2 * i], a[2 * i + 1]),
					_mm256_unpackhi_epi64(a[2 * i], a[2 * i + 1]));
	/* c[i] per half: rows 4i .. 4i+3 */
	return _mm256_add_epi32(_mm256_permute2x128_si256(c[0], c[1], 0x20),
				_mm256_permute2x128_si256(c[0], c[1], 0x31));
}

/*
 * Rows [o, o+R) (R <= 8) for one token (decode), block by block. Each
 * block's exact int32 dot S of the 8 rows is formed in row lanes, then
 * goes through acc = fma(float(S), dw * dx, acc) like avx2__run_q, so a
 * (row, token) result is the same whichever path computed it. The weights
 * stay in their file layout (one load per row and block, no transpose):
 *   Q4_0: rows r and r+4 share a vector (16 bytes each); maddubs against
 *   the activation's elements 0..15 (low nibbles) and 16..31 (high), both
 *   128-bit halves alike, gives 8 int16 partial sums per row (each at most
 *   4 * 15 * 127 = 7620); two vphaddw and a vpmaddwd bring the 8 rows
 *   together (at most 4 * 7620 = 30480 in int16 before the widening).
 *   Q8_0: maddubs(|w|, sign(x, w)) and vpmaddwd per row, then
 *   avx2__rows_sum8.
 * The rows lie back to back, so the 8 rows two tiles on are prefetched
 * at the pace this tile consumes its own, into L2: one tile of Q8_0 is
 * 17-48 KB on TinyLlama's shapes, and into a 32 KB L1 the next one
 * evicted the tile in use. On a Zen 4, CPU ms of a decode step: Q8_0 69
 * (next tile, L1) -> 50 (L2) -> 47 (two tiles ahead); Q4_0 33 -> 33 ->
 * 28.
 */
AVX2_INLINE void avx2__gemv_q(uint32_t wt, const struct kern_gemm_args *a, size_t o, size_t R)
{
	const size_t bs = wt == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0)
					   : sizeof(struct kern_block_q4_0);
	const size_t nb = a->n_in / KERN_QK;
	const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0f);
	const struct kern_block_q8a *x = a->x;
	const char *w = (const char *)a->w + o * a->w_stride;
	const char *next = w + 2 * AVX2_QR * a->w_stride;
	float out[AVX2_QR] __attribute__((aligned(32)));
	__m256 acc = _mm256_setzero_ps();

	for (size_t b = 0; b < nb; b++) {
		__m256i sum;
		__m256 dw;

		/* A fixed count per block, unrolled: an inner loop here made GCC
		 * keep acc on the stack. */
		AVX2_UNROLL8
		for (size_t off = 0; off < AVX2_QR * bs; off += 64)
			_mm_prefetch(next + b * AVX2_QR * bs + off, _MM_HINT_T1);
		dw = avx2__scales(w, a->w_stride, bs, b, R);
		if (wt == DTYPE_Q4_0) {
			const __m256i xl = _mm256_broadcastsi128_si256(
				_mm_loadu_si128((const __m128i *)x[b].qs));
			const __m256i xh = _mm256_broadcastsi128_si256(
				_mm_loadu_si128((const __m128i *)(x[b].qs + 16)));
			__m256i p[4];
			AVX2_UNROLL
			for (size_t r = 0; r < 4; r++) {
				const struct kern_block_q4_0 *lo =
					(const struct kern_block_q4_0 *)(w + r * a->w_stride) + b;
				const struct kern_block_q4_0 *hi =
					(const struct kern_block_q4_0 *)(w + (r + 4) * a->w_stride) + b;
				__m128i l = R == AVX2_QR || r < R
						    ? _mm_loadu_si128((const __m128i *)lo->qs)
						    : _mm_setzero_si128();
				__m128i h = R == AVX2_QR || r + 4 < R
						    ? _mm_loadu_si128((const __m128i *)hi->qs)
						    : _mm_setzero_si128();
				__m256i v = _mm256_set_m128i(h, l);
				p[r] = _mm256_add_epi16(
					_mm256_maddubs_epi16(_mm256_and_si256(v, m4), xl),
					_mm256_maddubs_epi16(
						_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), xh));
			}
			sum = _mm256_hadd_epi16(_mm256_hadd_epi16(p[0], p[1]),
						_mm256_hadd_epi16(p[2], p[3]));
			sum = _mm256_sub_epi32(_mm256_madd_epi16(sum, ones),
					       _mm256_set1_epi32(a->xs8[b]));
		} else {
			const __m256i xv = _mm256_loadu_si256((const __m256i *)x[b].qs);
			__m256i v[AVX2_QR];
			AVX2_UNROLL8
			for (size_t r = 0; r < AVX2_QR; r++) {
				const struct kern_block_q8_0 *blk =
					(const struct kern_block_q8_0 *)(w + r * a->w_stride) + b;
				__m256i q = R == AVX2_QR || r < R
						    ? _mm256_loadu_si256((const __m256i *)blk->qs)
						    : _mm256_setzero_si256();
				v[r] = _mm256_madd_epi16(
					_mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(xv, q)),
					ones);
			}
			sum = avx2__rows_sum8(v);
		}
		acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, _mm256_set1_ps(a->xd[b])),
				      acc);
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
		const char *w = (const char *)a->w + o0 * a->w_stride;
		size_t o = o0, first = (o1 - o0 < 2 * AVX2_QR ? o1 - o0 : 2 * AVX2_QR) * a->w_stride;
		/* The chunk's first two tiles: no earlier tile prefetched them
		 * (the pool hands chunks out in any order). */
		for (size_t off = 0; off < first; off += 64)
			_mm_prefetch(w + off, _MM_HINT_T1);
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
			avx2__drive(wt, a, o0, o1, AVX2_GEMV_ROWS, 1);       \
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

static void avx2__quantize_act(const float *x, struct kern_block_q8a *y, size_t n)
{
	const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));

	for (size_t b = 0; b < n / KERN_QK; b++, x += KERN_QK) {
		__m256 v[4], m;
		__m128 m4;
		for (int k = 0; k < 4; k++)
			v[k] = _mm256_loadu_ps(x + 8 * k);
		/* MAXPS gives its second operand where either is NaN: with
		 * a NaN-free second operand a NaN element drops out of the
		 * maximum, as fmaxf() drops it in the reference (so every
		 * level quantizes a block holding a NaN alike) */
		m = _mm256_max_ps(
			_mm256_max_ps(_mm256_and_ps(v[0], absmask),
				      _mm256_max_ps(_mm256_and_ps(v[1], absmask), _mm256_setzero_ps())),
			_mm256_max_ps(_mm256_and_ps(v[2], absmask),
				      _mm256_max_ps(_mm256_and_ps(v[3], absmask), _mm256_setzero_ps())));
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
	.attn_scores = kern_avx2_attn_scores,
	.attn_accum = kern_avx2_attn_accum,
	.fp16_row = kern_avx2_fp16_row,
	.max = kern_avx2_max,
	.exp_sum = kern_avx2_exp_sum,
	.silu_mul = kern_avx2_silu_mul,
	.norm_rows = kern_avx2_norm_rows,
	.fp16_from_row = kern_avx2_fp16_from_row,
	.attn_scores_f16 = kern_avx2_attn_scores_f16,
	.attn_accum_f16 = kern_avx2_attn_accum_f16,
	.quantize_act = avx2__quantize_act,
	.gemm =
		{
			[DTYPE_F32] = avx2__gemm_f32,
			[DTYPE_F16] = avx2__gemm_f16,
			[DTYPE_BF16] = avx2__gemm_bf16,
			[DTYPE_Q8_0] = avx2__gemm_q8_0,
			[DTYPE_Q4_0] = avx2__gemm_q4_0,
			[DTYPE_Q4_K] = kern_avx2_gemm_q4_k,
			[DTYPE_Q6_K] = kern_avx2_gemm_q6_k,
			[DTYPE_Q2_K] = kern_avx2_gemm_q8k_q2_k,
			[DTYPE_Q3_K] = kern_avx2_gemm_q8k_q3_k,
			[DTYPE_Q5_K] = kern_avx2_gemm_q5_k,
			[DTYPE_IQ4_XS] = kern_avx2_gemm_iq4_xs,
			[DTYPE_IQ4_NL] = kern_avx2_gemm_iq4_nl,
			[DTYPE_Q5_0] = kern_avx2_gemm_q5_0,
			[DTYPE_Q4_1] = kern_avx2_gemm_q4_1,
			[DTYPE_Q5_1] = kern_avx2_gemm_q5_1,
		},
	/* one token: the row-order GEMVs on per-super-block activations
	 * (kquants_gemv.h; LEVELS.md) */
	.quantize_act_q8k = kern_avx2_quantize_act_q8k,
	.gemv =
		{
			[DTYPE_Q4_K] = kern_avx2_gemv_q4_k,
			[DTYPE_Q5_K] = kern_avx2_gemv_q5_k,
			[DTYPE_Q6_K] = kern_avx2_gemv_q6_k,
			[DTYPE_Q2_K] = kern_avx2_gemv_q2_k,
			[DTYPE_Q3_K] = kern_avx2_gemv_q3_k,
		},
	/* packed rows (kernels.h KERN_PACKED; LEVELS.md "avx2: tiled Q8_0 and
	 * Q4_0 rows"): 16-row groups tiled at load, bit for bit the above;
	 * Q4_K (thirteenth session) and Q6_K (fourteenth) 8-row groups with
	 * rows in lanes (LEVELS.md) */
	.pgemm = {[DTYPE_Q8_0] = kern_avx2_pgemm_q8_0, [DTYPE_Q4_0] = kern_avx2_pgemm_q4_0,
		  [DTYPE_Q4_K] = kern_avx2_pgemm_q4_k, [DTYPE_Q6_K] = kern_avx2_pgemm_q6_k},
	.pgemv = {[DTYPE_Q8_0] = kern_avx2_pgemv_q8_0, [DTYPE_Q4_0] = kern_avx2_pgemv_q4_0,
		  [DTYPE_Q4_K] = kern_avx2_pgemm_q4_k, [DTYPE_Q6_K] = kern_avx2_pgemm_q6_k},
	.pack_rows = {[DTYPE_Q8_0] = 16, [DTYPE_Q4_0] = 16, [DTYPE_Q4_K] = 8, [DTYPE_Q6_K] = 8},
	.pack_fn = {[DTYPE_Q8_0] = kern_avx2_pack_q8_0, [DTYPE_Q4_0] = kern_avx2_pack_q4_0,
		    [DTYPE_Q4_K] = kern_avx2_pack_q4_k, [DTYPE_Q6_K] = kern_avx2_pack_q6_k},
};
#endif
