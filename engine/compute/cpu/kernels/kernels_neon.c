/*
 * kernels_neon.c - the plain-NEON level (AArch64's baseline Advanced SIMD,
 * every ARM64 core): F32/F16/BF16 matrix products, the attention blocks,
 * softmax's exp and the gated SiLU, and the table of the level (its
 * quantized kernels are kquants_neon.c).
 *
 * F16 weights are widened exactly with FCVTL (part of the baseline) and
 * multiplied in fp32, like the reference: FP16 arithmetic (FEAT_FP16,
 * HWCAP fphp/asimdhp) would round every product and partial sum to 11
 * bits, and the golden logits would drift from the other levels'; decode
 * reads the same bytes either way (README, ARM64).
 *
 * Every (row, token) dot and every attention score is one FMA chain over
 * 4 vector accumulators, then a fixed-order sum, whatever the tile, so a
 * result never depends on the batch or the queries it shares.
 *
 * Threads: pure functions over the caller's buffers.
 */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"

#define NEON_INLINE static inline __attribute__((always_inline))

/* ---- F32 / F16 / BF16 matmul -------------------------------------------- */

NEON_INLINE float32x4_t neon__load_w(const void *w, size_t i, uint32_t wtype)
{
	if (wtype == DTYPE_F32)
		return vld1q_f32((const float *)w + i);
	if (wtype == DTYPE_F16)
		return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)w + i)));
	return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)w + i), 16));
}

NEON_INLINE float neon__load_w1(const void *w, size_t i, uint32_t wtype)
{
	if (wtype == DTYPE_F32)
		return ((const float *)w)[i];
	if (wtype == DTYPE_F16)
		return kern_fp16_to_fp32(((const uint16_t *)w)[i]);
	return kern_bf16_to_fp32(((const uint16_t *)w)[i]);
}

/* One row's dot with one activation row: 4 FMA chains of 4 lanes. */
NEON_INLINE float neon__dot_w(const void *w, const float *x, size_t n, uint32_t wtype)
{
	float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
	size_t i = 0;
	float s;

	for (; i + 16 <= n; i += 16) {
		a0 = vfmaq_f32(a0, neon__load_w(w, i, wtype), vld1q_f32(x + i));
		a1 = vfmaq_f32(a1, neon__load_w(w, i + 4, wtype), vld1q_f32(x + i + 4));
		a2 = vfmaq_f32(a2, neon__load_w(w, i + 8, wtype), vld1q_f32(x + i + 8));
		a3 = vfmaq_f32(a3, neon__load_w(w, i + 12, wtype), vld1q_f32(x + i + 12));
	}
	for (; i + 4 <= n; i += 4)
		a0 = vfmaq_f32(a0, neon__load_w(w, i, wtype), vld1q_f32(x + i));
	s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
	for (; i < n; i++)
		s = fmaf(neon__load_w1(w, i, wtype), x[i], s);
	return s;
}

/* Row-major over weights: a row (a few KiB) stays in L1 while every
 * token of the call passes over it. */
NEON_INLINE void neon__gemm_float(const struct kern_gemm_args *a, size_t o0, size_t o1,
				  uint32_t wtype)
{
	for (size_t o = o0; o < o1; o++) {
		const void *w = (const char *)a->w + o * a->w_stride;
		for (size_t t = 0; t < a->n_tok; t++)
			a->y[t * a->y_stride + o] = neon__dot_w(
				w, (const float *)((const char *)a->x + t * a->x_stride), a->n_in, wtype);
	}
}

static void neon__gemm_f32(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	neon__gemm_float(a, o0, o1, DTYPE_F32);
}

static void neon__gemm_f16(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	neon__gemm_float(a, o0, o1, DTYPE_F16);
}

static void neon__gemm_bf16(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	neon__gemm_float(a, o0, o1, DTYPE_BF16);
}

/* ---- attention blocks ------------------------------------------------------ */

static void neon__attn_scores(const float *q, size_t ld_q, const float *k, size_t d,
			      const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			      size_t nk)
{
	for (size_t i = 0; i < nq; i++)
		for (size_t j = 0; j < nk; j++)
			s[i * ld_s + j] =
				(neon__dot_w(k + j * d, q + i * ld_q, d, DTYPE_F32) + (bias ? bias[j] : 0.0f)) *
				scale;
}

/* o_i = o_i * r_i, then one FMA per key and column, in key order. */
static void neon__attn_accum(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			     const float *v, size_t d, size_t nq, size_t nk)
{
	for (size_t i = 0; i < nq; i++) {
		float *oi = o + i * ld_o;
		const float *pi = p + i * ld_p;
		size_t c = 0;

		for (; c + 16 <= d; c += 16) {
			float32x4_t a0 = vmulq_n_f32(vld1q_f32(oi + c), r[i]);
			float32x4_t a1 = vmulq_n_f32(vld1q_f32(oi + c + 4), r[i]);
			float32x4_t a2 = vmulq_n_f32(vld1q_f32(oi + c + 8), r[i]);
			float32x4_t a3 = vmulq_n_f32(vld1q_f32(oi + c + 12), r[i]);
			for (size_t j = 0; j < nk; j++) {
				const float *vj = v + j * d + c;
				a0 = vfmaq_n_f32(a0, vld1q_f32(vj), pi[j]);
				a1 = vfmaq_n_f32(a1, vld1q_f32(vj + 4), pi[j]);
				a2 = vfmaq_n_f32(a2, vld1q_f32(vj + 8), pi[j]);
				a3 = vfmaq_n_f32(a3, vld1q_f32(vj + 12), pi[j]);
			}
			vst1q_f32(oi + c, a0);
			vst1q_f32(oi + c + 4, a1);
			vst1q_f32(oi + c + 8, a2);
			vst1q_f32(oi + c + 12, a3);
		}
		for (; c + 4 <= d; c += 4) {
			float32x4_t a0 = vmulq_n_f32(vld1q_f32(oi + c), r[i]);
			for (size_t j = 0; j < nk; j++)
				a0 = vfmaq_n_f32(a0, vld1q_f32(v + j * d + c), pi[j]);
			vst1q_f32(oi + c, a0);
		}
		for (; c < d; c++) {
			float acc = oi[c] * r[i];
			for (size_t j = 0; j < nk; j++)
				acc = fmaf(pi[j], v[j * d + c], acc);
			oi[c] = acc;
		}
	}
}

static void neon__fp16_row(const uint16_t *src, float *dst, size_t n)
{
	size_t i = 0;

	for (; i + 4 <= n; i += 4)
		vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + i))));
	for (; i < n; i++)
		dst[i] = kern_fp16_to_fp32(src[i]);
}

static float neon__max(const float *x, size_t n)
{
	float32x4_t m = vdupq_n_f32(-INFINITY);
	float best;
	size_t i = 0;

	/* FMAXNM takes the number when one operand is NaN: NaNs are skipped,
	 * as in the reference. */
	for (; i + 4 <= n; i += 4)
		m = vmaxnmq_f32(m, vld1q_f32(x + i));
	best = vmaxnmvq_f32(m);
	for (; i < n; i++)
		best = x[i] > best ? x[i] : best;
	return best;
}

/*
 * exp(x) for 4 floats, the algorithm of math_avx2.h: x = n ln2 + f with
 * n = round(x / ln2) (ln2 in two parts), e^f by Taylor to f^7, 2^n as two
 * factors so the scale stays normal and tiny results round by the
 * multiplication. x is clamped to [-110, 89]; NaN passes through.
 */
NEON_INLINE float32x4_t neon__exp(float32x4_t x)
{
	x = vmaxq_f32(x, vdupq_n_f32(-110.0f)); /* FMAX: NaN stays NaN */
	x = vminq_f32(x, vdupq_n_f32(89.0f));
	float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
	float32x4_t f = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
	f = vfmsq_f32(f, n, vdupq_n_f32(-2.12194440e-4f));
	float32x4_t e = vfmaq_f32(vdupq_n_f32(1.0f / 720), f, vdupq_n_f32(1.0f / 5040));
	e = vfmaq_f32(vdupq_n_f32(1.0f / 120), e, f);
	e = vfmaq_f32(vdupq_n_f32(1.0f / 24), e, f);
	e = vfmaq_f32(vdupq_n_f32(1.0f / 6), e, f);
	e = vfmaq_f32(vdupq_n_f32(1.0f / 2), e, f);
	e = vfmaq_f32(vdupq_n_f32(1.0f), e, f);
	e = vfmaq_f32(vdupq_n_f32(1.0f), e, f);
	int32x4_t ni = vcvtq_s32_f32(n); /* NaN: 0 */
	int32x4_t n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1);
	float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, vdupq_n_s32(127)), 23));
	float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, vdupq_n_s32(127)), 23));
	return vmulq_f32(vmulq_f32(e, s1), s2);
}

static float neon__exp_sum(float *x, size_t n, float m)
{
	const float32x4_t mv = vdupq_n_f32(m);
	float32x4_t sum = vdupq_n_f32(0.0f);
	float tail[4];
	size_t i = 0;

	for (; i + 4 <= n; i += 4) {
		float32x4_t e = neon__exp(vsubq_f32(vld1q_f32(x + i), mv));
		vst1q_f32(x + i, e);
		sum = vaddq_f32(sum, e);
	}
	if (i < n) { /* padded with -inf, which gives 0 */
		for (size_t j = 0; j < 4; j++)
			tail[j] = i + j < n ? x[i + j] : -INFINITY;
		float32x4_t e = neon__exp(vsubq_f32(vld1q_f32(tail), mv));
		vst1q_f32(tail, e);
		memcpy(x + i, tail, (n - i) * sizeof(float));
		sum = vaddq_f32(sum, e);
	}
	return vaddvq_f32(sum);
}

/* g / (1 + exp(-g)) * y; NaN stays NaN, g below about -89 gives -0 * y. */
NEON_INLINE float32x4_t neon__silu_mul4(float32x4_t y, float32x4_t g)
{
	float32x4_t e = neon__exp(vnegq_f32(g));

	return vmulq_f32(vdivq_f32(g, vaddq_f32(vdupq_n_f32(1.0f), e)), y);
}

static void neon__silu_mul(float *y, const float *g, size_t n)
{
	float ty[4] = {0}, tg[4] = {0};
	size_t i = 0;

	for (; i + 4 <= n; i += 4)
		vst1q_f32(y + i, neon__silu_mul4(vld1q_f32(y + i), vld1q_f32(g + i)));
	if (i < n) {
		memcpy(ty, y + i, (n - i) * sizeof(float));
		memcpy(tg, g + i, (n - i) * sizeof(float));
		vst1q_f32(ty, neon__silu_mul4(vld1q_f32(ty), vld1q_f32(tg)));
		memcpy(y + i, ty, (n - i) * sizeof(float));
	}
}

const struct kern_ops kern_ops_neon = {
	.name = "neon",
	.attn_scores = neon__attn_scores,
	.attn_accum = neon__attn_accum,
	.fp16_row = neon__fp16_row,
	.max = neon__max,
	.exp_sum = neon__exp_sum,
	.silu_mul = neon__silu_mul,
	.gemm =
		{
			[DTYPE_F32] = neon__gemm_f32,
			[DTYPE_F16] = neon__gemm_f16,
			[DTYPE_BF16] = neon__gemm_bf16,
			[DTYPE_Q8_0] = kern_neon_gemm_q8_0,
			[DTYPE_Q4_0] = kern_neon_gemm_q4_0,
			[DTYPE_Q4_1] = kern_neon_gemm_q4_1,
			[DTYPE_Q5_0] = kern_neon_gemm_q5_0,
			[DTYPE_Q5_1] = kern_neon_gemm_q5_1,
			[DTYPE_IQ4_NL] = kern_neon_gemm_iq4_nl,
			[DTYPE_Q2_K] = kern_neon_gemm_q2_k,
			[DTYPE_Q3_K] = kern_neon_gemm_q3_k,
			[DTYPE_Q4_K] = kern_neon_gemm_q4_k,
			[DTYPE_Q5_K] = kern_neon_gemm_q5_k,
			[DTYPE_Q6_K] = kern_neon_gemm_q6_k,
			[DTYPE_IQ4_XS] = kern_neon_gemm_iq4_xs,
		},
};
#endif
