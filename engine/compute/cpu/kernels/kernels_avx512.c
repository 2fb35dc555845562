/*
 * kernels_avx512.c - the AVX-512 (F/BW/VL/DQ + VNNI) level, compiled with
 * those flags only and selected by kern_init() only on a CPU that has them.
 *
 * Float weights: as the AVX2 level, but 16 floats per ZMM register and
 * tiles of 4 rows x 4 tokens (32 registers hold 16 accumulators).
 * Leftover columns (n_in % 16) are summed in scalar.
 *
 * Operations this table leaves NULL run the AVX2 level's code
 * (kern_resolve(); LEVELS.md has the measurements behind each choice).
 *
 * Same invariance as the AVX2 level: one instruction sequence per
 * (row, token) pair whatever the tile shape.
 */
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels.h"
#include "kernels_impl.h"
#include "quants.h"

#define AVX512_INLINE static inline __attribute__((always_inline))
/* Tile loops must unroll fully so accumulators live in registers. */
#define AVX512_UNROLL _Pragma("GCC unroll 4")
#define AVX512_TOKEN_BLOCK 64
/* Rows of a one-token (decode) float tile; LEVELS.md has the
 * measurements behind 8. With AVX512_UNROLL at 4, GCC keeps this tile's
 * 8 accumulators on the stack, and that loop streamed F16 faster (77 ms
 * a decode step's matrix products, one thread, Zen 4) than a loop with
 * them in registers (94-103): re-measure when either changes. */
#define AVX512_GEMV_ROWS 8

/* ---- float weights ------------------------------------------------------------ */

AVX512_INLINE __m512 avx512__load_w(uint32_t wt, const void *row, size_t i)
{
	if (wt == DTYPE_F32)
		return _mm512_loadu_ps((const float *)row + i);
	__m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i));
	if (wt == DTYPE_F16)
		return _mm512_cvtph_ps(h);
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

AVX512_INLINE float avx512__scalar_w(uint32_t wt, const void *row, size_t i)
{
	if (wt == DTYPE_F32)
		return ((const float *)row)[i];
	if (wt == DTYPE_F16)
		return kern_fp16_to_fp32(((const uint16_t *)row)[i]);
	return kern_bf16_to_fp32(((const uint16_t *)row)[i]);
}

AVX512_INLINE float avx512__hsum(__m512 v)
{
	__m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
				 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));

	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

AVX512_INLINE float avx512__hsum256(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

AVX512_INLINE void avx512__tile_f(uint32_t wt, const struct kern_gemm_args *a, size_t o,
				  size_t t, int R, int T)
{
	const char *w[AVX512_GEMV_ROWS];
	const float *x[4];
	__m512 acc[AVX512_GEMV_ROWS][4];
	size_t n16 = a->n_in & ~(size_t)15;

	AVX512_UNROLL
	for (int r = 0; r < R; r++)
		w[r] = (const char *)a->w + (o + r) * a->w_stride;
	AVX512_UNROLL
	for (int k = 0; k < T; k++)
		x[k] = (const float *)((const char *)a->x + (t + k) * a->x_stride);
	AVX512_UNROLL
	for (int r = 0; r < R; r++)
		AVX512_UNROLL
		for (int k = 0; k < T; k++)
			acc[r][k] = _mm512_setzero_ps();
	for (size_t i = 0; i < n16; i += 16) {
		__m512 xv[4];
		/* Decode (one token) streams rows that are a page or more each:
		 * the next tile (its R rows lie back to back) goes to L2 at the
		 * pace this one is read, R lines per 64 bytes of a row, as one
		 * linear stream (L2 because a tile ahead is 16-64 KB). */
		if (T == 1 && (i * (wt == DTYPE_F32 ? 4 : 2)) % 64 == 0) {
			const char *nx = w[0] + (size_t)R * a->w_stride;
			size_t off = i * (wt == DTYPE_F32 ? 4 : 2) * (size_t)R;
			AVX512_UNROLL
			for (int r = 0; r < R; r++)
				_mm_prefetch(nx + off + (size_t)r * 64, _MM_HINT_T1);
		}
		AVX512_UNROLL
		for (int k = 0; k < T; k++)
			xv[k] = _mm512_loadu_ps(x[k] + i);
		AVX512_UNROLL
		for (int r = 0; r < R; r++) {
			__m512 wv = avx512__load_w(wt, w[r], i);
			AVX512_UNROLL
			for (int k = 0; k < T; k++)
				acc[r][k] = _mm512_fmadd_ps(wv, xv[k], acc[r][k]);
		}
	}
	AVX512_UNROLL
	for (int r = 0; r < R; r++) {
		AVX512_UNROLL
		for (int k = 0; k < T; k++) {
			float s = avx512__hsum(acc[r][k]);
			for (size_t i = n16; i < a->n_in; i++)
				s += avx512__scalar_w(wt, w[r], i) * x[k][i];
			a->y[(t + k) * a->y_stride + o + r] = s;
		}
	}
}

/* ---- drivers ------------------------------------------------------------------- */

AVX512_INLINE void avx512__drive(uint32_t wt, const struct kern_gemm_args *a,
				 size_t o0, size_t o1, int RM, int TM)
{
	for (size_t tb = 0; tb < a->n_tok; tb += AVX512_TOKEN_BLOCK) {
		size_t te = a->n_tok - tb > AVX512_TOKEN_BLOCK ? tb + AVX512_TOKEN_BLOCK : a->n_tok;
		size_t o = o0, t;
		for (; o + (size_t)RM <= o1; o += (size_t)RM) {
			for (t = tb; t + (size_t)TM <= te; t += (size_t)TM)
				avx512__tile_f(wt, a, o, t, RM, TM);
			for (; t < te; t++)
				avx512__tile_f(wt, a, o, t, RM, 1);
		}
		for (; o < o1; o++) {
			for (t = tb; t + (size_t)TM <= te; t += (size_t)TM)
				avx512__tile_f(wt, a, o, t, 1, TM);
			for (; t < te; t++)
				avx512__tile_f(wt, a, o, t, 1, 1);
		}
	}
}

#define AVX512_GEMM(name, wt)                                                   \
	static void name(const struct kern_gemm_args *a, size_t o0, size_t o1) \
	{                                                                       \
		if (a->n_tok == 1)                                              \
			avx512__drive(wt, a, o0, o1, AVX512_GEMV_ROWS, 1);      \
		else if (a->n_tok < 4)                                          \
			avx512__drive(wt, a, o0, o1, 4, 1);                     \
		else                                                            \
			avx512__drive(wt, a, o0, o1, 4, 4);                     \
	}

AVX512_GEMM(avx512__gemm_f32, DTYPE_F32)
AVX512_GEMM(avx512__gemm_f16, DTYPE_F16)
AVX512_GEMM(avx512__gemm_bf16, DTYPE_BF16)

/* The amx level's exact share of an F16 / BF16 call (its sampled rows)
 * and its GEMV: these, bit for bit. */
void kern_avx512_gemm_f16(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	avx512__gemm_f16(a, o0, o1);
}

void kern_avx512_gemm_bf16(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	avx512__gemm_bf16(a, o0, o1);
}

/* ---- activation quantization ----------------------------------------------------- */

/* Two 16-float halves of a block, rounded as kern_round_q8(): NaN to 0,
 * clamped to +-127, half away from zero. On |v| clamped to [0, 127],
 * trunc(|v| + 0.49999997f) is exactly that rounding (checked on every
 * float: the constant is the float just under 0.5, so a sum just under
 * an integer does not round up to it, and a tie's sum rounds to the
 * integer above), then the sign goes back on as an integer negation.
 * Eight vector operations where trunc, the fraction and two masked
 * steps took twelve (a 2048 row, Zen 4, one thread, hot: 0.71 -> 0.51
 * us). VMAXPS gives its second operand where either is NaN, so
 * max(|v|, 0) is 0 for a NaN. */
AVX512_INLINE __m128i avx512__round_q8(__m512 v)
{
	__m512 a = _mm512_max_ps(_mm512_abs_ps(v), _mm512_setzero_ps());
	__m512i i;

	a = _mm512_min_ps(a, _mm512_set1_ps(127.0f));
	i = _mm512_cvttps_epi32(_mm512_add_ps(a, _mm512_set1_ps(0.49999997f)));
	i = _mm512_mask_sub_epi32(i, _mm512_movepi32_mask(_mm512_castps_si512(v)),
				  _mm512_setzero_si512(), i);
	return _mm512_cvtepi32_epi8(i);
}

/* One block's bytes at scale d (y->d), 1 / d (0 where d is) as id. */
AVX512_INLINE void avx512__quantize_block(const float *x, float d, float id,
					  struct kern_block_q8a *y)
{
	__m512 idv = _mm512_set1_ps(id);

	y->d = d;
	_mm_storeu_si128((__m128i *)y->qs,
			 avx512__round_q8(_mm512_mul_ps(_mm512_loadu_ps(x), idv)));
	_mm_storeu_si128((__m128i *)(y->qs + 16),
			 avx512__round_q8(_mm512_mul_ps(_mm512_loadu_ps(x + 16), idv)));
}

/* A block's |x| maxima, lane-wise; a NaN element drops out as fmaxf()
 * drops it in the reference (VMAXPS gives its second operand where
 * either is NaN, and the second here is NaN-free), so the folds below
 * never meet one. */
AVX512_INLINE __m512 avx512__block_absmax(const float *x)
{
	return _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x)),
			     _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 16)), _mm512_setzero_ps()));
}

/*
 * 16 blocks' |x| maxima at once: the 16 vectors of lane-wise maxima are
 * folded pairwise (halves, quarters, pairs, lanes) into one vector, ~3
 * operations a block where a horizontal reduction took ~8, and d and
 * 1 / d are two vector divisions for the 16 (the same IEEE quotients as
 * the scalar ones). A maximum of absolute values is exact in any order,
 * so every d is the one-block path's. After the folds lane 4k + s holds
 * block k + 4 (s & 1) + 8 (s >> 1); the permute puts block j in lane j.
 * A 2048 row, Zen 4, one thread, hot: 0.51 -> 0.37 us (a decode step
 * quantizes 11,776 elements a layer and token).
 */
static void avx512__quantize16(const float *x, struct kern_block_q8a *y)
{
	const __m512i order =
		_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	float d[16] __attribute__((aligned(64))), id[16] __attribute__((aligned(64)));
	__m512 a[8], b[4], c[2], r, dv;

	for (int i = 0; i < 8; i++) {
		__m512 m0 = avx512__block_absmax(x + 64 * i);
		__m512 m1 = avx512__block_absmax(x + 64 * i + 32);

		a[i] = _mm512_max_ps(_mm512_shuffle_f32x4(m0, m1, 0x44),
				     _mm512_shuffle_f32x4(m0, m1, 0xee));
	}
	for (int i = 0; i < 4; i++)
		b[i] = _mm512_max_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
				     _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xdd));
	for (int i = 0; i < 2; i++)
		c[i] = _mm512_max_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44),
				     _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0xee));
	r = _mm512_max_ps(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xdd));
	dv = _mm512_div_ps(_mm512_permutexvar_ps(order, r), _mm512_set1_ps(127.0f));
	_mm512_store_ps(d, dv);
	_mm512_store_ps(id, _mm512_maskz_div_ps(
				    _mm512_cmp_ps_mask(dv, _mm512_setzero_ps(), _CMP_NEQ_UQ),
				    _mm512_set1_ps(1.0f), dv));
	for (int j = 0; j < 16; j++)
		avx512__quantize_block(x + 32 * j, d[j], id[j], y + j);
}

static void avx512__quantize_act(const float *x, struct kern_block_q8a *y, size_t n)
{
	size_t b = 0;

	for (; b + 16 <= n / KERN_QK; b += 16)
		avx512__quantize16(x + b * KERN_QK, y + b);
	for (; b < n / KERN_QK; b++) {
		float d = _mm512_reduce_max_ps(avx512__block_absmax(x + b * KERN_QK)) / 127.0f;

		avx512__quantize_block(x + b * KERN_QK, d, d != 0.0f ? 1.0f / d : 0.0f, y + b);
	}
}

/* Only what beats the AVX2 level on an AVX-512 CPU (measured on a Zen 5,
 * engine/compute/cpu/kernels/LEVELS.md); NULL entries are the AVX2 level's. */
const struct kern_ops kern_ops_avx512 = {
	.name = "avx512",
	.quantize_act = avx512__quantize_act,
	.attn_scores = kern_avx512_attn_scores,
	.attn_accum = kern_avx512_attn_accum,
	.max = kern_avx512_max,
	.exp_sum = kern_avx512_exp_sum,
	.attn_scores_f16 = kern_avx512_attn_scores_f16,
	.attn_accum_f16 = kern_avx512_attn_accum_f16,
	.silu_mul = kern_avx512_silu_mul,
	.norm_rows = kern_avx512_norm_rows,
	.exp_sum_prompt = kern_avx512_exp_sum_prompt,
	.gemm =
		{
			[DTYPE_F32] = avx512__gemm_f32,
			[DTYPE_F16] = avx512__gemm_f16,
			[DTYPE_BF16] = avx512__gemm_bf16,
			[DTYPE_Q4_K] = kern_avx512_vnni_gemm_q4_k,
			[DTYPE_Q6_K] = kern_avx512_vnni_gemm_q6_k,
			[DTYPE_Q2_K] = kern_avx512_gemm_q8k_q2_k,
			[DTYPE_Q3_K] = kern_avx512_gemm_q8k_q3_k,
			[DTYPE_Q5_K] = kern_avx512_vnni_gemm_q5_k,
			[DTYPE_IQ4_XS] = kern_avx512_gemm_iq4_xs,
			[DTYPE_IQ4_NL] = kern_avx512_gemm_iq4_nl,
			[DTYPE_Q5_0] = kern_avx512_gemm_q5_0,
			[DTYPE_Q4_1] = kern_avx512_gemm_q4_1,
			[DTYPE_Q5_1] = kern_avx512_gemm_q5_1,
			[DTYPE_Q8_0] = kern_avx512_gemm_q8_0,
			[DTYPE_Q4_0] = kern_avx512_gemm_q4_0,
		},
	/* one token: the row-order GEMVs on per-super-block activations
	 * (kquants_gemv.h; LEVELS.md) */
	.quantize_act_q8k = kern_avx512_quantize_act_q8k,
	.gemv =
		{
			[DTYPE_Q4_K] = kern_avx512_gemv_q4_k,
			[DTYPE_Q5_K] = kern_avx512_gemv_q5_k,
			[DTYPE_Q6_K] = kern_avx512_gemv_q6_k,
			[DTYPE_Q2_K] = kern_avx512_gemv_q2_k,
			[DTYPE_Q3_K] = kern_avx512_gemv_q3_k,
			[DTYPE_Q4_0] = kern_avx512_gemv_q4_0,
			[DTYPE_Q8_0] = kern_avx512_gemv_q8_0,
		},
	/* packed rows (kernels.h KERN_PACKED; LEVELS.md "Packed rows"): the
	 * Q5_K in groups of 4 rows, Q4_K, Q6_K, Q4_0 and Q8_0 in the 16-row tiles' */
	.pgemm =
		{
			[DTYPE_Q4_K] = kern_avx512_vnni_pgemm_q4_k,
			[DTYPE_Q5_K] = kern_avx512_vnni_pgemm_q5_k,
			[DTYPE_Q6_K] = kern_avx512_vnni_pgemm_q6_k,
			[DTYPE_Q4_0] = kern_avx512_pgemm_q4_0,
			[DTYPE_Q8_0] = kern_avx512_pgemm_q8_0,
		},
	.pgemv =
		{
			[DTYPE_Q4_K] = kern_avx512_pgemv_q4_k,
			[DTYPE_Q5_K] = kern_avx512_pgemv_q5_k,
			[DTYPE_Q6_K] = kern_avx512_pgemv_q6_k,
			[DTYPE_Q4_0] = kern_avx512_pgemv_q4_0,
			[DTYPE_Q8_0] = kern_avx512_pgemv_q8_0,
		},
	.pack_rows = {[DTYPE_Q4_K] = KERN_K4L_ROWS, [DTYPE_Q5_K] = 4, [DTYPE_Q6_K] = KERN_Q6L_ROWS, [DTYPE_Q4_0] = 16,
		      [DTYPE_Q8_0] = 16},
	.pack_fn = {[DTYPE_Q4_0] = kern_avx512_pack_q4_0,
		    [DTYPE_Q8_0] = kern_avx512_pack_q8_0,
		    [DTYPE_Q4_K] = kern_avx512_pack_q4_k,
		    [DTYPE_Q5_K] = kern_pack_groups16,
		    [DTYPE_Q6_K] = kern_avx512_pack_q6_k},
};
#endif
