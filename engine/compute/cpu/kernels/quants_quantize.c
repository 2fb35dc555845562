/*
 * quants_quantize.c - float rows to the community block formats, with
 * llama.cpp's reference rounding rules (its quantizers without an
 * importance matrix), so a tensor written here is byte-identical to
 * llama-quantize's from the same float input.
 *
 * Byte identity needs the same float operations in the same order: this
 * file is built without FMA flags and C11 does not contract, so each
 * expression below is evaluated exactly as written. The search loops
 * (kq__fit_min_scale, kq__fit_signed, kq__fit_q3) are the formats'
 * definitions of a "good" scale, reproduced from their published rules:
 *   - Q4_K/Q5_K/Q2_K: per sub-block, scale and minimum by weighted least
 *     squares over a sweep of candidate step counts, keeping the lowest
 *     weighted error; the super-block then quantizes the sub-block scales
 *     and minimums to 6 (4 for Q2_K) bits and requantizes the values.
 *   - Q6_K: per 16, the signed scale among 19 candidates maximizing
 *     (sum w x l)^2 / sum w l^2 (w = x^2); Q3_K: the same start refined
 *     by coordinate descent.
 *   - Q4_1/Q5_0/Q5_1: min/max (or signed absmax) scales, truncating casts.
 * Hostile input (NaN, inf) gives some block, never undefined behaviour:
 * every float-to-int conversion is clamped first.
 *
 * Thread safety: pure functions.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "quants.h"

/* Round to nearest, ties to even, as adding 1.5 * 2^23 does for |v| below
 * 2^22 (the formats' rounding rule); NaN gives 0, larger values clamp. */
static int kq__nearest(float v)
{
	if (v != v)
		return 0;
	if (v > 4194303.0f)
		v = 4194303.0f;
	if (v < -4194303.0f)
		v = -4194303.0f;
	float f = v + 12582912.0f;
	int32_t i;

	memcpy(&i, &f, sizeof(i));
	return (i & 0x007fffff) - 0x00400000;
}

/* A C cast to int of v (truncation), defined for every input. */
static int kq__trunc(float v)
{
	if (v != v)
		return 0;
	if (v > 1e6f)
		return 1000000;
	if (v < -1e6f)
		return -1000000;
	return (int)v;
}

static int kq__clamp(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* ---- 32-element formats -------------------------------------------------- */

static void kq__minmax(const float *x, int n, float *min, float *max)
{
	*min = FLT_MAX;
	*max = -FLT_MAX;
	for (int j = 0; j < n; j++) {
		if (x[j] < *min)
			*min = x[j];
		if (x[j] > *max)
			*max = x[j];
	}
}

/* The value of largest magnitude in x[0..n) (the first of equals; 0 when
 * all are 0 or NaN), its magnitude in *amax: the signed formats' scale
 * reference, whose sign they keep. */
static float kq__absmax(const float *x, int n, float *amax)
{
	float max = 0.0f;

	*amax = 0.0f;
	for (int j = 0; j < n; j++) {
		if (fabsf(x[j]) > *amax) {
			*amax = fabsf(x[j]);
			max = x[j];
		}
	}
	return max;
}

static void kq__quantize_q4_1(const float *x, void *dst, size_t nb)
{
	struct kern_block_q4_1 *y = dst;
	for (size_t b = 0; b < nb; b++, x += KERN_QK) {
		float min, max;
		kq__minmax(x, KERN_QK, &min, &max);
		const float d = (max - min) / 15;
		const float id = d ? 1.0f / d : 0.0f;
		y[b].d = kern_fp32_to_fp16(d);
		y[b].m = kern_fp32_to_fp16(min);
		for (int j = 0; j < 16; j++) {
			/* the format's rule: an int8 cast of v + 0.5, at most 15 */
			int lo = (int8_t)kq__clamp(kq__trunc((x[j] - min) * id + 0.5f), -128, 127);
			int hi = (int8_t)kq__clamp(kq__trunc((x[j + 16] - min) * id + 0.5f), -128, 127);
			y[b].qs[j] = (uint8_t)((uint8_t)(lo < 15 ? lo : 15) |
					       (uint8_t)(hi < 15 ? hi : 15) << 4);
		}
	}
}

static void kq__quantize_q5_0(const float *x, void *dst, size_t nb)
{
	struct kern_block_q5_0 *y = dst;
	for (size_t b = 0; b < nb; b++, x += KERN_QK) {
		float amax;
		const float max = kq__absmax(x, KERN_QK, &amax);
		const float d = max / -16;
		const float id = d ? 1.0f / d : 0.0f;
		uint32_t qh = 0;
		y[b].d = kern_fp32_to_fp16(d);
		for (int j = 0; j < 16; j++) {
			int v0 = (int8_t)kq__clamp(kq__trunc(x[j] * id + 16.5f), -128, 127);
			int v1 = (int8_t)kq__clamp(kq__trunc(x[j + 16] * id + 16.5f), -128, 127);
			uint8_t q0 = (uint8_t)(v0 < 31 ? v0 : 31), q1 = (uint8_t)(v1 < 31 ? v1 : 31);
			y[b].qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
			qh |= (uint32_t)((q0 >> 4) & 1) << j;
			qh |= (uint32_t)((q1 >> 4) & 1) << (j + 16);
		}
		for (int k = 0; k < 4; k++)
			y[b].qh[k] = (uint8_t)(qh >> (8 * k));
	}
}

static void kq__quantize_q5_1(const float *x, void *dst, size_t nb)
{
	struct kern_block_q5_1 *y = dst;
	for (size_t b = 0; b < nb; b++, x += KERN_QK) {
		float min, max;
		kq__minmax(x, KERN_QK, &min, &max);
		const float d = (max - min) / 31;
		const float id = d ? 1.0f / d : 0.0f;
		uint32_t qh = 0;
		y[b].d = kern_fp32_to_fp16(d);
		y[b].m = kern_fp32_to_fp16(min);
		for (int j = 0; j < 16; j++) {
			/* a uint8 cast of v + 0.5 (v >= 0 by construction) */
			uint8_t q0 = (uint8_t)kq__clamp(kq__trunc((x[j] - min) * id + 0.5f), 0, 255);
			uint8_t q1 = (uint8_t)kq__clamp(kq__trunc((x[j + 16] - min) * id + 0.5f), 0, 255);
			y[b].qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
			qh |= (uint32_t)((q0 >> 4) & 1) << j;
			qh |= (uint32_t)((q1 >> 4) & 1) << (j + 16);
		}
		for (int k = 0; k < 4; k++)
			y[b].qh[k] = (uint8_t)(qh >> (8 * k));
	}
}

/* ---- scale searches --------------------------------------------------------- */

/*
 * Unsigned levels 0..nmax with a minimum: x ~ scale * L + min (min <= 0).
 * Starts from the min/max fit, then tries step counts nmax + rmin +
 * rdelta * k (k = 0..nstep), each refit by weighted least squares, and
 * keeps the lowest weighted error (squared, or absolute if use_mad).
 * Returns the scale; *neg_min = -min.
 */
static float kq__fit_min_scale(int n, int nmax, const float *x, const float *w, uint8_t *L,
			       float *neg_min, float rmin, float rdelta, int nstep, int use_mad)
{
	float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
	uint8_t aux[32];

	for (int i = 1; i < n; i++) {
		if (x[i] < min)
			min = x[i];
		if (x[i] > max)
			max = x[i];
		sum_w += w[i];
		sum_x += w[i] * x[i];
	}
	if (min > 0)
		min = 0;
	if (max == min) {
		memset(L, 0, (size_t)n);
		*neg_min = -min;
		return 0.0f;
	}
	float iscale = nmax / (max - min);
	float scale = 1 / iscale;
	float best = 0;
	for (int i = 0; i < n; i++) {
		L[i] = (uint8_t)kq__clamp(kq__nearest(iscale * (x[i] - min)), 0, nmax);
		float diff = scale * L[i] + min - x[i];
		diff = use_mad ? fabsf(diff) : diff * diff;
		best += w[i] * diff;
	}
	for (int k = 0; k <= nstep; k++) {
		iscale = (rmin + rdelta * k + nmax) / (max - min);
		float sum_l = 0, sum_l2 = 0, sum_xl = 0;
		for (int i = 0; i < n; i++) {
			int l = kq__clamp(kq__nearest(iscale * (x[i] - min)), 0, nmax);
			aux[i] = (uint8_t)l;
			sum_l += w[i] * l;
			sum_l2 += w[i] * l * l;
			sum_xl += w[i] * l * x[i];
		}
		float D = sum_w * sum_l2 - sum_l * sum_l;
		if (!(D > 0))
			continue;
		float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
		float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
		if (this_min > 0) {
			this_min = 0;
			this_scale = sum_xl / sum_l2;
		}
		float err = 0;
		for (int i = 0; i < n; i++) {
			float diff = this_scale * aux[i] + this_min - x[i];
			diff = use_mad ? fabsf(diff) : diff * diff;
			err += w[i] * diff;
		}
		if (err < best) {
			memcpy(L, aux, (size_t)n);
			best = err;
			scale = this_scale;
			min = this_min;
		}
	}
	*neg_min = -min;
	return scale;
}

/* Signed levels -nmax..nmax-1 (stored + nmax), weights x^2: the scale
 * among -(nmax + 0.1 k) / max, k = -9..9, that maximizes
 * (sum w x l)^2 / sum w l^2, refit by least squares. */
static float kq__fit_signed(int n, int nmax, const float *x, int8_t *L)
{
	float amax;
	const float max = kq__absmax(x, n, &amax);

	if (amax < 1e-15f) {
		memset(L, 0, (size_t)n);
		return 0.0f;
	}
	float iscale = -nmax / max, sumlx = 0, suml2 = 0;
	for (int i = 0; i < n; i++) {
		int l = kq__clamp(kq__nearest(iscale * x[i]), -nmax, nmax - 1);
		float w = x[i] * x[i];
		L[i] = (int8_t)(l + nmax);
		sumlx += w * x[i] * l;
		suml2 += w * l * l;
	}
	float scale = suml2 ? sumlx / suml2 : 0.0f;
	float best = scale * sumlx;
	for (int k = -9; k <= 9; k++) {
		if (k == 0)
			continue;
		iscale = -(nmax + 0.1f * k) / max;
		sumlx = suml2 = 0;
		for (int i = 0; i < n; i++) {
			int l = kq__clamp(kq__nearest(iscale * x[i]), -nmax, nmax - 1);
			float w = x[i] * x[i];
			sumlx += w * x[i] * l;
			suml2 += w * l * l;
		}
		if (suml2 > 0 && sumlx * sumlx > best * suml2) {
			for (int i = 0; i < n; i++)
				L[i] = (int8_t)(nmax + kq__clamp(kq__nearest(iscale * x[i]), -nmax, nmax - 1));
			scale = sumlx / suml2;
			best = scale * sumlx;
		}
	}
	return scale;
}

/* Q3_K's sub-block fit: signed levels -nmax..nmax-1 from -nmax / max,
 * then up to five passes of coordinate descent on
 * (sum w x l)^2 / sum w l^2 (w = x^2). L is stored + nmax. */
static float kq__fit_q3(int n, int nmax, const float *x, int8_t *L)
{
	float amax, sumlx = 0, suml2 = 0;
	const float max = kq__absmax(x, n, &amax);

	if (amax < 1e-15f) {
		memset(L, 0, (size_t)n);
		return 0.0f;
	}
	float iscale = -nmax / max;
	for (int i = 0; i < n; i++) {
		int l = kq__clamp(kq__nearest(iscale * x[i]), -nmax, nmax - 1);
		float w = x[i] * x[i];
		L[i] = (int8_t)l;
		sumlx += w * x[i] * l;
		suml2 += w * l * l;
	}
	for (int pass = 0; pass < 5; pass++) {
		int changed = 0;
		for (int i = 0; i < n; i++) {
			float w = x[i] * x[i];
			float slx = sumlx - w * x[i] * L[i];
			if (!(slx > 0))
				continue;
			float sl2 = suml2 - w * L[i] * L[i];
			int nl = kq__clamp(kq__nearest(x[i] * sl2 / slx), -nmax, nmax - 1);
			if (nl == L[i])
				continue;
			slx += w * x[i] * nl;
			sl2 += w * nl * nl;
			if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
				L[i] = (int8_t)nl;
				sumlx = slx;
				suml2 = sl2;
				changed++;
			}
		}
		if (!changed)
			break;
	}
	for (int i = 0; i < n; i++)
		L[i] = (int8_t)(L[i] + nmax);
	return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ---- K-quants ------------------------------------------------------------------ */

/* Q4_K / Q5_K: nmax 15 or 31, sweep from nmax - 1 (Q4_K, 20 steps) or
 * nmax - 0.5 (Q5_K, 15 steps). Writes d, dmin, scales and the levels. */
static void kq__k4_super(const float *x, int nmax, uint16_t *dp, uint16_t *dminp, uint8_t *scales,
			 uint8_t L[KERN_QKK])
{
	float mins[8], sc[8], w[32], max_scale = 0, max_min = 0;

	for (int j = 0; j < 8; j++) {
		float sum_x2 = 0;
		for (int l = 0; l < 32; l++)
			sum_x2 += x[32 * j + l] * x[32 * j + l];
		float av_x = sqrtf(sum_x2 / 32);
		for (int l = 0; l < 32; l++)
			w[l] = av_x + fabsf(x[32 * j + l]);
		sc[j] = nmax == 15 ? kq__fit_min_scale(32, 15, x + 32 * j, w, L + 32 * j, &mins[j],
						       -1.0f, 0.1f, 20, 0)
				   : kq__fit_min_scale(32, 31, x + 32 * j, w, L + 32 * j, &mins[j],
						       -0.5f, 0.1f, 15, 0);
		if (sc[j] > max_scale)
			max_scale = sc[j];
		if (mins[j] > max_min)
			max_min = mins[j];
	}
	float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
	float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
	memset(scales, 0, 12);
	for (int j = 0; j < 8; j++) {
		/* the format stores nearest() truncated to a byte, at most 63 */
		uint8_t ls = (uint8_t)kq__nearest(inv_scale * sc[j]);
		uint8_t lm = (uint8_t)kq__nearest(inv_min * mins[j]);
		ls = ls < 63 ? ls : 63;
		lm = lm < 63 ? lm : 63;
		if (j < 4) {
			scales[j] = ls;
			scales[j + 4] = lm;
		} else {
			scales[j + 4] = (uint8_t)((ls & 15) | (lm & 15) << 4);
			scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
			scales[j] |= (uint8_t)((lm >> 4) << 6);
		}
	}
	*dp = kern_fp32_to_fp16(max_scale / 63.f);
	*dminp = kern_fp32_to_fp16(max_min / 63.f);
	for (int j = 0; j < 8; j++) {
		int s, m;
		kern_k4_scale_min(scales, j, &s, &m);
		const float d = kern_fp16_to_fp32(*dp) * s;
		if (!d)
			continue; /* the sub-block keeps its fitted levels */
		const float dm = kern_fp16_to_fp32(*dminp) * m;
		for (int i = 0; i < 32; i++)
			L[32 * j + i] = (uint8_t)kq__clamp(kq__nearest((x[32 * j + i] + dm) / d), 0, nmax);
	}
}

static void kq__quantize_q4_k(const float *x, void *dst, size_t nb)
{
	struct kern_block_q4_k *y = dst;
	uint8_t L[KERN_QKK];

	for (size_t b = 0; b < nb; b++, x += KERN_QKK) {
		kq__k4_super(x, 15, &y[b].d, &y[b].dmin, y[b].scales, L);
		for (int n = 0; n < 4; n++)
			for (int l = 0; l < 32; l++)
				y[b].qs[32 * n + l] = (uint8_t)(L[64 * n + l] | L[64 * n + l + 32] << 4);
	}
}

static void kq__quantize_q5_k(const float *x, void *dst, size_t nb)
{
	struct kern_block_q5_k *y = dst;
	uint8_t L[KERN_QKK];

	for (size_t b = 0; b < nb; b++, x += KERN_QKK) {
		kq__k4_super(x, 31, &y[b].d, &y[b].dmin, y[b].scales, L);
		memset(y[b].qh, 0, sizeof(y[b].qh));
		for (int n = 0; n < 4; n++) {
			for (int l = 0; l < 32; l++) {
				int l1 = L[64 * n + l], l2 = L[64 * n + l + 32];
				if (l1 > 15) {
					l1 -= 16;
					y[b].qh[l] |= (uint8_t)(1 << (2 * n));
				}
				if (l2 > 15) {
					l2 -= 16;
					y[b].qh[l] |= (uint8_t)(2 << (2 * n));
				}
				y[b].qs[32 * n + l] = (uint8_t)(l1 | l2 << 4);
			}
		}
	}
}

static void kq__quantize_q6_k(const float *x, void *dst, size_t nb)
{
	struct kern_block_q6_k *y = dst;
	int8_t L[KERN_QKK];
	float sc[16];

	for (size_t b = 0; b < nb; b++, x += KERN_QKK) {
		float max_abs;
		for (int j = 0; j < 16; j++)
			sc[j] = kq__fit_signed(16, 32, x + 16 * j, L + 16 * j);
		const float max_scale = kq__absmax(sc, 16, &max_abs);
		if (max_abs < 1e-15f) {
			memset(&y[b], 0, sizeof(y[b]));
			continue;
		}
		float iscale = -128.f / max_scale;
		y[b].d = kern_fp32_to_fp16(1 / iscale);
		for (int j = 0; j < 16; j++) {
			int s = kq__nearest(iscale * sc[j]);
			y[b].scales[j] = (int8_t)(s < 127 ? s : 127);
		}
		for (int j = 0; j < 16; j++) {
			float d = kern_fp16_to_fp32(y[b].d) * y[b].scales[j];
			if (!d)
				continue;
			for (int i = 0; i < 16; i++)
				L[16 * j + i] = (int8_t)(kq__clamp(kq__nearest(x[16 * j + i] / d), -32, 31) + 32);
		}
		for (int n = 0; n < 2; n++) {
			const int8_t *q = L + 128 * n;
			for (int l = 0; l < 32; l++) {
				y[b].ql[64 * n + l] = (uint8_t)((q[l] & 15) | (q[l + 64] & 15) << 4);
				y[b].ql[64 * n + l + 32] = (uint8_t)((q[l + 32] & 15) | (q[l + 96] & 15) << 4);
				y[b].qh[32 * n + l] = (uint8_t)((q[l] >> 4) | (q[l + 32] >> 4) << 2 |
								(q[l + 64] >> 4) << 4 | (q[l + 96] >> 4) << 6);
			}
		}
	}
}

/* The 2-bit fields of Q2_K and Q3_K: value e of each 128 at bit pair
 * (e % 128) / 32 of byte 32 * (e / 128) + e % 32. */
static void kq__pack2(const int8_t *L, uint8_t *qs)
{
	for (int n = 0; n < 2; n++)
		for (int l = 0; l < 32; l++)
			qs[32 * n + l] = (uint8_t)(L[128 * n + l] | L[128 * n + l + 32] << 2 |
						   L[128 * n + l + 64] << 4 | L[128 * n + l + 96] << 6);
}

static void kq__quantize_q2_k(const float *x, void *dst, size_t nb)
{
	struct kern_block_q2_k *y = dst;
	uint8_t L[KERN_QKK];
	int8_t L8[KERN_QKK];
	float w[16], mins[16], sc[16];

	for (size_t b = 0; b < nb; b++, x += KERN_QKK) {
		float max_scale = 0, max_min = 0;
		for (int j = 0; j < 16; j++) {
			for (int l = 0; l < 16; l++)
				w[l] = fabsf(x[16 * j + l]);
			sc[j] = kq__fit_min_scale(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f,
						  0.1f, 15, 1);
			if (sc[j] > max_scale)
				max_scale = sc[j];
			if (mins[j] > max_min)
				max_min = mins[j];
		}
		if (max_scale > 0) {
			float iscale = 15.f / max_scale;
			for (int j = 0; j < 16; j++)
				y[b].scales[j] = (uint8_t)kq__nearest(iscale * sc[j]);
			y[b].d = kern_fp32_to_fp16(max_scale / 15.f);
		} else {
			memset(y[b].scales, 0, sizeof(y[b].scales));
			y[b].d = kern_fp32_to_fp16(0.f);
		}
		if (max_min > 0) {
			float iscale = 15.f / max_min;
			for (int j = 0; j < 16; j++)
				y[b].scales[j] |= (uint8_t)(kq__nearest(iscale * mins[j]) << 4);
			y[b].dmin = kern_fp32_to_fp16(max_min / 15.f);
		} else {
			y[b].dmin = kern_fp32_to_fp16(0.f);
		}
		for (int j = 0; j < 16; j++) {
			const float d = kern_fp16_to_fp32(y[b].d) * (y[b].scales[j] & 15);
			if (!d)
				continue;
			const float dm = kern_fp16_to_fp32(y[b].dmin) * (y[b].scales[j] >> 4);
			for (int i = 0; i < 16; i++)
				L[16 * j + i] = (uint8_t)kq__clamp(kq__nearest((x[16 * j + i] + dm) / d), 0, 3);
		}
		for (int i = 0; i < KERN_QKK; i++)
			L8[i] = (int8_t)L[i];
		kq__pack2(L8, y[b].qs);
	}
}

static void kq__quantize_q3_k(const float *x, void *dst, size_t nb)
{
	struct kern_block_q3_k *y = dst;
	int8_t L[KERN_QKK];
	float sc[16];

	for (size_t b = 0; b < nb; b++, x += KERN_QKK) {
		float amax;
		for (int j = 0; j < 16; j++)
			sc[j] = kq__fit_q3(16, 4, x + 16 * j, L + 16 * j);
		const float max_scale = kq__absmax(sc, 16, &amax);
		memset(y[b].scales, 0, 12);
		if (max_scale) {
			float iscale = -32.f / max_scale;
			for (int j = 0; j < 16; j++) {
				/* nearest() kept as a signed byte, then clamped */
				int l = (int8_t)kq__nearest(iscale * sc[j]);
				l = kq__clamp(l, -32, 31) + 32;
				if (j < 8)
					y[b].scales[j] = (uint8_t)(l & 15);
				else
					y[b].scales[j - 8] |= (uint8_t)((l & 15) << 4);
				y[b].scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
			}
			y[b].d = kern_fp32_to_fp16(1 / iscale);
		} else {
			y[b].d = kern_fp32_to_fp16(0.f);
		}
		for (int j = 0; j < 16; j++) {
			float d = kern_fp16_to_fp32(y[b].d) * kern_q3k_scale(y[b].scales, j);
			if (!d)
				continue;
			for (int i = 0; i < 16; i++)
				L[16 * j + i] = (int8_t)(kq__clamp(kq__nearest(x[16 * j + i] / d), -4, 3) + 4);
		}
		/* high bit of value e in bit e / 32 of hmask[e % 32] */
		memset(y[b].hmask, 0, sizeof(y[b].hmask));
		for (int e = 0; e < KERN_QKK; e++) {
			if (L[e] > 3) {
				y[b].hmask[e % 32] |= (uint8_t)(1 << (e / 32));
				L[e] = (int8_t)(L[e] - 4);
			}
		}
		kq__pack2(L, y[b].qs);
	}
}

/* ---- IQ4_NL / IQ4_XS --------------------------------------------------------- */

/* The index of the IQ4_NL level nearest v (the lower one on a tie). */
static int kq__iq4_index(float v)
{
	const int8_t *val = kern_iq4nl_values;
	int lo = 0, hi = 15;

	if (v <= val[0])
		return 0;
	if (v >= val[15])
		return 15;
	while (hi - lo > 1) {
		int mid = (lo + hi) / 2;
		if (v < val[mid])
			hi = mid;
		else
			lo = mid;
	}
	return v - val[hi - 1] < val[hi] - v ? hi - 1 : hi;
}

/*
 * One IQ4 super-block of `n` values (32 for IQ4_NL, 256 for IQ4_XS): per
 * 32, the scale among (k - 127) / max, k = -7..7, that maximizes
 * (sum w x q)^2 / sum w q^2 (w = x^2, q the nearest levels); IQ4_XS then
 * stores those scales in 6 bits against d = -max_scale / 32 and picks the
 * levels again for each stored scale.
 */
static void kq__iq4_super(const float *x, int n, uint16_t *dh, uint8_t *q4, uint16_t *scales_h,
			  uint8_t *scales_l)
{
	const int8_t *val = kern_iq4nl_values;
	const int nb = n / 32, ntry = 7;
	float scales[8], w[32], amax_scale;
	uint8_t L[KERN_QKK];

	memset(q4, 0, (size_t)n / 2);
	memset(L, 0, sizeof(L));
	for (int ib = 0; ib < nb; ib++) {
		const float *xb = x + 32 * ib;
		uint8_t *Lb = L + 32 * ib;
		float amax;
		const float max = kq__absmax(xb, 32, &amax);
		for (int j = 0; j < 32; j++)
			w[j] = xb[j] * xb[j];
		if (amax < 1e-15f) {
			scales[ib] = 0;
			continue;
		}
		float d = -max / val[0], id = 1 / d, sumqx = 0, sumq2 = 0;
		for (int j = 0; j < 32; j++) {
			int l = kq__iq4_index(id * xb[j]);
			float q = val[l];
			Lb[j] = (uint8_t)l;
			sumqx += w[j] * q * xb[j];
			sumq2 += w[j] * q * q;
		}
		d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
		float best = d * sumqx;
		for (int k = -ntry; k <= ntry; k++) {
			id = (k + val[0]) / max;
			sumqx = sumq2 = 0;
			for (int j = 0; j < 32; j++) {
				float q = val[kq__iq4_index(id * xb[j])];
				sumqx += w[j] * q * xb[j];
				sumq2 += w[j] * q * q;
			}
			if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
				d = sumqx / sumq2;
				best = d * sumqx;
			}
		}
		scales[ib] = d;
	}
	const float max_scale = kq__absmax(scales, nb, &amax_scale);
	if (nb > 1) {
		float d = -max_scale / 32, id = d ? 1 / d : 0.f;
		*dh = kern_fp32_to_fp16(d);
		*scales_h = 0;
		for (int ib = 0; ib < nb; ib++) {
			int l = kq__clamp(kq__nearest(id * scales[ib]), -32, 31);
			float dl = d * l, idl = dl ? 1 / dl : 0.f;
			for (int j = 0; j < 32; j++)
				L[32 * ib + j] = (uint8_t)kq__iq4_index(idl * x[32 * ib + j]);
			l += 32;
			if (ib % 2 == 0)
				scales_l[ib / 2] = (uint8_t)(l & 15);
			else
				scales_l[ib / 2] |= (uint8_t)((l & 15) << 4);
			*scales_h |= (uint16_t)((l >> 4) << (2 * ib));
		}
	} else {
		*dh = kern_fp32_to_fp16(scales[0]);
		float id = scales[0] ? 1 / scales[0] : 0;
		for (int j = 0; j < 32; j++)
			L[j] = (uint8_t)kq__iq4_index(id * x[j]);
	}
	for (int i = 0; i < nb; i++)
		for (int j = 0; j < 16; j++)
			q4[16 * i + j] = (uint8_t)(L[32 * i + j] | L[32 * i + 16 + j] << 4);
}

/* IQ4_NL / IQ4_XS rows: kq__iq4_super() per block (IQ4_NL has no
 * sub-block scales to store). */
static void kq__quantize_iq4_nl(const float *x, void *dst, size_t nb)
{
	struct kern_block_iq4_nl *y = dst;
	uint16_t unused_h;

	for (size_t b = 0; b < nb; b++)
		kq__iq4_super(x + 32 * b, 32, &y[b].d, y[b].qs, &unused_h, NULL);
}

static void kq__quantize_iq4_xs(const float *x, void *dst, size_t nb)
{
	struct kern_block_iq4_xs *y = dst;

	for (size_t b = 0; b < nb; b++)
		kq__iq4_super(x + KERN_QKK * b, KERN_QKK, &y[b].d, y[b].qs, &y[b].scales_h,
			      y[b].scales_l);
}

/* The formats quantized here, each by its own function of whole blocks
 * (a table, not a switch: adding one is one row). */
static const struct {
	uint32_t type;
	void (*quantize)(const float *x, void *dst, size_t nb);
} kq__formats[] = {
	{DTYPE_Q4_1, kq__quantize_q4_1},     {DTYPE_Q5_0, kq__quantize_q5_0},
	{DTYPE_Q5_1, kq__quantize_q5_1},     {DTYPE_Q2_K, kq__quantize_q2_k},
	{DTYPE_Q3_K, kq__quantize_q3_k},     {DTYPE_Q4_K, kq__quantize_q4_k},
	{DTYPE_Q5_K, kq__quantize_q5_k},     {DTYPE_Q6_K, kq__quantize_q6_k},
	{DTYPE_IQ4_NL, kq__quantize_iq4_nl}, {DTYPE_IQ4_XS, kq__quantize_iq4_xs},
};

int kern_quants_quantize(uint32_t t, const float *src, void *dst, size_t n)
{
	for (size_t i = 0; i < sizeof(kq__formats) / sizeof(kq__formats[0]); i++) {
		if (kq__formats[i].type == t) {
			kq__formats[i].quantize(src, dst, n / dtype_block(t));
			return 0;
		}
	}
	return -1;
}
