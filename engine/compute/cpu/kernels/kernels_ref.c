/*
 * kernels_ref.c - the scalar reference: the specification every SIMD level
 * is tested against, and the kernels of the scalar level.
 *
 * Matmul semantics per weight type (y = sum over i of x[i] * W[i]):
 *   F32, F16, BF16: weights widened exactly to float, products summed in
 *     float, in index order.
 *   Q8_0, Q4_0: the activation row is first quantized to Q8 blocks (Q8_0's
 *     rule, fp32 scale); each block contributes
 *       (float)(sum_j qw[j] * qx[j]) * (dw * dx)
 *     with the integer sum exact; blocks are summed in float, in order.
 * Plain loops, written for clarity, not speed. Also the generic row
 * interleaves of packed weights (kern_pack_groups*), which levels without
 * a pack_fn of their own use.
 */
#include <math.h>
#include <string.h>

#include "ember.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "quants.h"

/* ---- fp16 / bf16 ---------------------------------------------------------- */

static uint32_t ref__f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float ref__u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

float kern_fp16_to_fp32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;

	if (e == 0x1f) /* inf, or NaN with its payload */
		return ref__u2f(sign | 0x7f800000 | (m << 13));
	if (e == 0) {
		/* zero or subnormal: m * 2^-24, exact in float */
		float v = (float)m * 0x1p-24f;
		return sign ? -v : v;
	}
	return ref__u2f(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t kern_fp32_to_fp16(float f)
{
	uint32_t x = ref__f2u(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	uint32_t e, m, r, rem, half, s;

	x &= 0x7fffffff;
	if (x > 0x7f800000) /* NaN: quiet, keep the top of the payload */
		return (uint16_t)(sign | 0x7e00 | ((x >> 13) & 0x3ff));
	if (x >= 0x477ff000) /* >= 65520 rounds to infinity */
		return (uint16_t)(sign | 0x7c00);
	if (x <= 0x33000000) /* <= 2^-25: rounds to zero (the tie goes even) */
		return sign;
	e = x >> 23;
	m = (x & 0x7fffff) | 0x800000;
	if (e < 113) {
		/* half subnormal: round m * 2^(e-150) to a multiple of 2^-24 */
		s = 126 - e;
		r = m >> s;
		rem = m & ((1u << s) - 1);
		half = 1u << (s - 1);
		if (rem > half || (rem == half && (r & 1)))
			r++;
		return (uint16_t)(sign | r); /* r == 0x400 is the smallest normal */
	}
	r = ((e - 112) << 10) | ((m >> 13) & 0x3ff);
	rem = m & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
		r++; /* a carry into the exponent is still correct */
	return (uint16_t)(sign | r);
}

float kern_bf16_to_fp32(uint16_t h)
{
	return ref__u2f((uint32_t)h << 16);
}

uint16_t kern_fp32_to_bf16(float f)
{
	uint32_t x = ref__f2u(f);

	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40); /* NaN stays NaN, quieted */
	/* Round to nearest even; subnormals are kept, overflow gives inf. */
	return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

/* ---- quantize / dequantize ---------------------------------------------- */

static void ref__quantize_q8_0(const float *x, struct kern_block_q8_0 *y, size_t n)
{
	for (size_t b = 0; b < n / KERN_QK; b++, x += KERN_QK) {
		float amax = 0.0f;
		for (int j = 0; j < KERN_QK; j++)
			amax = fmaxf(amax, fabsf(x[j]));
		float d = amax / 127.0f;
		float id = d != 0.0f ? 1.0f / d : 0.0f;
		y[b].d = kern_fp32_to_fp16(d);
		for (int j = 0; j < KERN_QK; j++)
			y[b].qs[j] = kern_round_q8(x[j] * id);
	}
}

/* Q4_0's nibble: trunc(v + 8.5) clamped to [0, 15]; NaN to 8 (zero). */
static uint8_t ref__nibble(float v)
{
	float t = v + 8.5f;

	if (t != t)
		return 8;
	if (t < 0.0f)
		return 0;
	if (t >= 15.0f)
		return 15;
	return (uint8_t)t;
}

static void ref__quantize_q4_0(const float *x, struct kern_block_q4_0 *y, size_t n)
{
	for (size_t b = 0; b < n / KERN_QK; b++, x += KERN_QK) {
		float amax = 0.0f, max = 0.0f;
		/* The signed extreme maps to -8 exactly, using the full range
		 * on the side that has the largest magnitude. */
		for (int j = 0; j < KERN_QK; j++) {
			if (amax < fabsf(x[j])) {
				amax = fabsf(x[j]);
				max = x[j];
			}
		}
		float d = max / -8.0f;
		float id = d != 0.0f ? 1.0f / d : 0.0f;
		y[b].d = kern_fp32_to_fp16(d);
		for (int j = 0; j < KERN_QK / 2; j++) {
			uint8_t lo = ref__nibble(x[j] * id);
			uint8_t hi = ref__nibble(x[j + KERN_QK / 2] * id);
			y[b].qs[j] = (uint8_t)(lo | (hi << 4));
		}
	}
}

static void ref__quantize_act(const float *x, struct kern_block_q8a *y, size_t n)
{
	for (size_t b = 0; b < n / KERN_QK; b++, x += KERN_QK) {
		float amax = 0.0f;
		for (int j = 0; j < KERN_QK; j++)
			amax = fmaxf(amax, fabsf(x[j]));
		float d = amax / 127.0f;
		float id = d != 0.0f ? 1.0f / d : 0.0f;
		y[b].d = d;
		for (int j = 0; j < KERN_QK; j++)
			y[b].qs[j] = kern_round_q8(x[j] * id);
	}
}

int kern_quantize_row(uint32_t t, const float *src, void *dst, size_t n)
{
	size_t i;

	if (dtype_block(t) == 0 || n % dtype_block(t) != 0)
		return EMBER_EINVAL;
	switch (t) {
	case DTYPE_F32:
		memcpy(dst, src, n * sizeof(float));
		return 0;
	case DTYPE_F16:
		for (i = 0; i < n; i++)
			((uint16_t *)dst)[i] = kern_fp32_to_fp16(src[i]);
		return 0;
	case DTYPE_BF16:
		for (i = 0; i < n; i++)
			((uint16_t *)dst)[i] = kern_fp32_to_bf16(src[i]);
		return 0;
	case DTYPE_Q8_0:
		ref__quantize_q8_0(src, dst, n);
		return 0;
	case DTYPE_Q4_0:
		ref__quantize_q4_0(src, dst, n);
		return 0;
	default:
		return kern_quants_quantize(t, src, dst, n) == 0 ? 0 : EMBER_EUNSUPPORTED;
	}
}

int kern_dequantize_row(uint32_t t, const void *src, float *dst, size_t n)
{
	size_t i, b;

	if (dtype_block(t) == 0 || n % dtype_block(t) != 0)
		return EMBER_EINVAL;
	switch (t) {
	case DTYPE_F32:
		memcpy(dst, src, n * sizeof(float));
		return 0;
	case DTYPE_F16:
		for (i = 0; i < n; i++)
			dst[i] = kern_fp16_to_fp32(((const uint16_t *)src)[i]);
		return 0;
	case DTYPE_BF16:
		for (i = 0; i < n; i++)
			dst[i] = kern_bf16_to_fp32(((const uint16_t *)src)[i]);
		return 0;
	case DTYPE_Q8_0:
		for (b = 0; b < n / KERN_QK; b++) {
			const struct kern_block_q8_0 *blk = (const struct kern_block_q8_0 *)src + b;
			float d = kern_fp16_to_fp32(blk->d);
			for (i = 0; i < KERN_QK; i++)
				dst[b * KERN_QK + i] = (float)blk->qs[i] * d;
		}
		return 0;
	case DTYPE_Q4_0:
		for (b = 0; b < n / KERN_QK; b++) {
			const struct kern_block_q4_0 *blk = (const struct kern_block_q4_0 *)src + b;
			float d = kern_fp16_to_fp32(blk->d);
			for (i = 0; i < KERN_QK / 2; i++) {
				dst[b * KERN_QK + i] = (float)((blk->qs[i] & 15) - 8) * d;
				dst[b * KERN_QK + i + 16] = (float)((blk->qs[i] >> 4) - 8) * d;
			}
		}
		return 0;
	default:
		return kern_quants_dequantize(t, src, dst, n) == 0 ? 0 : EMBER_EUNSUPPORTED;
	}
}

/* ---- dot products and gemm -------------------------------------------------- */

static float ref__dot_f32(const void *w, const float *x, size_t n)
{
	const float *wf = w;
	float acc = 0.0f;

	for (size_t i = 0; i < n; i++)
		acc += wf[i] * x[i];
	return acc;
}

static float ref__dot_f16(const void *w, const float *x, size_t n)
{
	const uint16_t *wh = w;
	float acc = 0.0f;

	for (size_t i = 0; i < n; i++)
		acc += kern_fp16_to_fp32(wh[i]) * x[i];
	return acc;
}

static float ref__dot_bf16(const void *w, const float *x, size_t n)
{
	const uint16_t *wh = w;
	float acc = 0.0f;

	for (size_t i = 0; i < n; i++)
		acc += kern_bf16_to_fp32(wh[i]) * x[i];
	return acc;
}

static float ref__dot_q8_0(const void *w, const struct kern_block_q8a *x, size_t n)
{
	const struct kern_block_q8_0 *wb = w;
	float acc = 0.0f;

	for (size_t b = 0; b < n / KERN_QK; b++) {
		int32_t sum = 0;
		for (int j = 0; j < KERN_QK; j++)
			sum += wb[b].qs[j] * x[b].qs[j];
		acc += (float)sum * (kern_fp16_to_fp32(wb[b].d) * x[b].d);
	}
	return acc;
}

static float ref__dot_q4_0(const void *w, const struct kern_block_q8a *x, size_t n)
{
	const struct kern_block_q4_0 *wb = w;
	float acc = 0.0f;

	for (size_t b = 0; b < n / KERN_QK; b++) {
		int32_t sum = 0;
		for (int j = 0; j < KERN_QK / 2; j++) {
			sum += ((wb[b].qs[j] & 15) - 8) * x[b].qs[j];
			sum += ((wb[b].qs[j] >> 4) - 8) * x[b].qs[j + 16];
		}
		acc += (float)sum * (kern_fp16_to_fp32(wb[b].d) * x[b].d);
	}
	return acc;
}

/* One gemm per type from its dot product: every (row, token) pair. */
#define REF_GEMM(name, dot, xtype)                                                        \
	static void name(const struct kern_gemm_args *a, size_t o0, size_t o1)            \
	{                                                                                 \
		for (size_t t = 0; t < a->n_tok; t++) {                                   \
			const xtype *x = (const xtype *)((const char *)a->x + t * a->x_stride); \
			for (size_t o = o0; o < o1; o++)                                  \
				a->y[t * a->y_stride + o] =                               \
					dot((const char *)a->w + o * a->w_stride, x, a->n_in); \
		}                                                                         \
	}

REF_GEMM(ref__gemm_f32, ref__dot_f32, float)
REF_GEMM(ref__gemm_f16, ref__dot_f16, float)
REF_GEMM(ref__gemm_bf16, ref__dot_bf16, float)
REF_GEMM(ref__gemm_q8_0, ref__dot_q8_0, struct kern_block_q8a)
REF_GEMM(ref__gemm_q4_0, ref__dot_q4_0, struct kern_block_q8a)

static float ref__dot(const float *a, const float *b, size_t n)
{
	float s = 0.0f;

	for (size_t i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

static void ref__scale_add(float *y, float r, float p, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = y[i] * r + p * x[i];
}

/* ---- attention blocks --------------------------------------------------------- */

static void ref__attn_scores(const float *q, size_t ld_q, const float *k, size_t d,
			     const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			     size_t nk)
{
	for (size_t i = 0; i < nq; i++)
		for (size_t j = 0; j < nk; j++)
			s[i * ld_s + j] = (ref__dot(q + i * ld_q, k + j * d, d) + (bias ? bias[j] : 0.0f)) *
					  scale;
}

static void ref__attn_accum(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			    const float *v, size_t d, size_t nq, size_t nk)
{
	for (size_t i = 0; i < nq; i++) {
		float *oi = o + i * ld_o;

		for (size_t c = 0; c < d; c++)
			oi[c] *= r[i];
		for (size_t j = 0; j < nk; j++)
			ref__scale_add(oi, 1.0f, p[i * ld_p + j], v + j * d, d);
	}
}

static void ref__fp16_row(const uint16_t *src, float *dst, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = kern_fp16_to_fp32(src[i]);
}

static void ref__fp16_from_row(const float *src, uint16_t *dst, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = kern_fp32_to_fp16(src[i]);
}

static float ref__max(const float *x, size_t n)
{
	float m = -INFINITY;

	for (size_t i = 0; i < n; i++)
		if (x[i] > m)
			m = x[i];
	return m;
}

static float ref__exp_sum(float *x, size_t n, float m)
{
	float s = 0.0f;

	for (size_t i = 0; i < n; i++) {
		x[i] = expf(x[i] - m);
		s += x[i];
	}
	return s;
}

static void ref__silu_mul(float *y, const float *g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] *= g[i] / (1.0f + expf(-g[i]));
}

/* The norm of kern_norm_rows(), row by row (forward.c's former loop). */
static void ref__norm_rows(const struct kern_norm *nm, const float *x, float *res,
			   const float *add, float *out, size_t n)
{
	const uint32_t d = nm->d;

	for (size_t r = 0; r < n; r++) {
		const float *xr = x + r * d;
		float *o = out + r * d;
		double mean = 0.0, var = 0.0, scale;
		uint32_t i;

		if (add)
			for (i = 0; i < d; i++)
				res[r * d + i] += add[r * d + i];
		if (nm->center) {
			for (i = 0; i < d; i++)
				mean += xr[i];
			mean /= d;
		}
		for (i = 0; i < d; i++)
			var += (xr[i] - mean) * (xr[i] - mean);
		scale = 1.0 / sqrt(var / d + nm->eps);
		for (i = 0; i < d; i++)
			o[i] = (float)((xr[i] - mean) * scale) * nm->gain[i] +
			       (nm->bias ? nm->bias[i] : 0.0f);
	}
}

const struct kern_ops kern_ops_ref = {
	.name = "scalar",
	.attn_scores = ref__attn_scores,
	.attn_accum = ref__attn_accum,
	.fp16_row = ref__fp16_row,
	.max = ref__max,
	.exp_sum = ref__exp_sum,
	.silu_mul = ref__silu_mul,
	.norm_rows = ref__norm_rows,
	.fp16_from_row = ref__fp16_from_row,
	.quantize_act = ref__quantize_act,
	.quantize_act_q8k = kern_quantize_act_q8k,
	.gemm =
		{
			[DTYPE_F32] = ref__gemm_f32,
			[DTYPE_F16] = ref__gemm_f16,
			[DTYPE_BF16] = ref__gemm_bf16,
			[DTYPE_Q8_0] = ref__gemm_q8_0,
			[DTYPE_Q4_0] = ref__gemm_q4_0,
			[DTYPE_Q4_1] = kern_ref_gemm_q4_1,
			[DTYPE_Q5_0] = kern_ref_gemm_q5_0,
			[DTYPE_Q5_1] = kern_ref_gemm_q5_1,
			[DTYPE_IQ4_NL] = kern_ref_gemm_iq4_nl,
			[DTYPE_Q2_K] = kern_ref_gemm_q2_k,
			[DTYPE_Q3_K] = kern_ref_gemm_q3_k,
			[DTYPE_Q4_K] = kern_ref_gemm_q4_k,
			[DTYPE_Q5_K] = kern_ref_gemm_q5_k,
			[DTYPE_Q6_K] = kern_ref_gemm_q6_k,
			[DTYPE_IQ4_XS] = kern_ref_gemm_iq4_xs,
		},
};

/* ---- packed rows: the generic interleave (kernels_impl.h) ------------------ */

void kern_pack_groups(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
		      void *tmp)
{
	kern_pack_groups_u(w, n_out, nb, bs, g, bs, unpack, tmp);
}

void kern_pack_groups_u(void *w, size_t n_out, size_t nb, size_t bs, size_t g, size_t u,
			int unpack, void *tmp)
{
	const size_t row = nb * bs;

	for (size_t o = 0; o < n_out; o += g) {
		char *grp = (char *)w + o * row;

		memcpy(tmp, grp, g * row);
		for (size_t r = 0; r < g; r++)
			for (size_t b = 0; b < nb; b++)
				for (size_t k = 0; k < bs; k += u) {
					char *file = grp + r * row + b * bs + k;
					char *pk = grp + b * g * bs + (g * (k / u) + r) * u;
					const char *src = (const char *)tmp + (pk - grp);

					if (!unpack)
						src = (const char *)tmp + (file - grp);
					memcpy(unpack ? file : pk, src, u);
				}
	}
}

void kern_pack_groups16(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			void *tmp)
{
	kern_pack_groups_u(w, n_out, nb, bs, g, 16, unpack, tmp);
}
