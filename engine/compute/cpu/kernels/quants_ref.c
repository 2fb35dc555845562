/*
 * quants_ref.c - scalar reference of the community block formats
 * (quants.h): the dequantizers and the dot products every SIMD level is
 * tested against.
 *
 * Dequantization reproduces ggml's reference to the bit: the same float
 * operations in the same order (e.g. Q4_K is (d * sc) * q - dmin * m),
 * without fused multiply-adds (this file is built without FMA flags; C11
 * mode does not contract).
 *
 * Dot products: the activation row is quantized to kern_block_q8a (32
 * elements, fp32 scale dx) like Q8_0/Q4_0's. Every weight format is then
 * read, per 32 elements, as two halves h of 16 with integer values q,
 * integer scale sc[h], integer minimum m[h], and float d, dmin:
 *     w = d * sc[h] * q - dmin * m[h]
 * (formats without a minimum have dmin = 0; Q4_1/Q5_1's additive minimum
 * is dmin = -m, m[h] = 1; formats with one scale per 32 have sc[0] =
 * sc[1]). Each block contributes
 *     dx * (d * (float)(sc0*i0 + sc1*i1) - dmin * (float)(m0*s0 + m1*s1))
 * where i_h = sum q * qx and s_h = sum qx over half h, integer and exact;
 * contributions are summed in float, in block order.
 */
#include "kernels.h"
#include "quants.h"

const int8_t kern_iq4nl_values[16] = {
	-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* One 32-element block of weights in the form above. */
struct ref__blk {
	int8_t q[KERN_QK];
	int sc[2], m[2];
	float d, dmin;
};

static float ref__h(uint16_t h)
{
	return kern_fp16_to_fp32(h);
}

/* The scales of a 32-element block (one scale d; with a minimum, value
 * = d * q - dmin, dmin = -m): both halves scale 1, minimum 1 or 0. */
static void ref__set_scales_32(struct ref__blk *u, float d, float dmin, int has_min)
{
	u->sc[0] = u->sc[1] = 1;
	u->m[0] = u->m[1] = has_min;
	u->d = d;
	u->dmin = dmin;
}

/* The fifth bit of element j of a Q5_0/Q5_1 block. */
static int ref__q5_high(const uint8_t qh[4], int j)
{
	uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
		     (uint32_t)qh[3] << 24;

	return (h >> j) & 1;
}

/* ---- unpacking: block b of a row into struct ref__blk ------------------- */

static void ref__unpack_q4_1(const void *row, size_t b, struct ref__blk *u)
{
	const struct kern_block_q4_1 *x = (const struct kern_block_q4_1 *)row + b;

	for (int j = 0; j < 16; j++) {
		u->q[j] = (int8_t)(x->qs[j] & 15);
		u->q[j + 16] = (int8_t)(x->qs[j] >> 4);
	}
	ref__set_scales_32(u, ref__h(x->d), -ref__h(x->m), 1);
}

static void ref__unpack_q5_0(const void *row, size_t b, struct ref__blk *u)
{
	const struct kern_block_q5_0 *x = (const struct kern_block_q5_0 *)row + b;

	for (int j = 0; j < 16; j++) {
		u->q[j] = (int8_t)(((x->qs[j] & 15) | ref__q5_high(x->qh, j) << 4) - 16);
		u->q[j + 16] = (int8_t)(((x->qs[j] >> 4) | ref__q5_high(x->qh, j + 16) << 4) - 16);
	}
	ref__set_scales_32(u, ref__h(x->d), 0.0f, 0);
}

static void ref__unpack_q5_1(const void *row, size_t b, struct ref__blk *u)
{
	const struct kern_block_q5_1 *x = (const struct kern_block_q5_1 *)row + b;

	for (int j = 0; j < 16; j++) {
		u->q[j] = (int8_t)((x->qs[j] & 15) | ref__q5_high(x->qh, j) << 4);
		u->q[j + 16] = (int8_t)((x->qs[j] >> 4) | ref__q5_high(x->qh, j + 16) << 4);
	}
	ref__set_scales_32(u, ref__h(x->d), -ref__h(x->m), 1);
}

static void ref__unpack_iq4_nl(const void *row, size_t b, struct ref__blk *u)
{
	const struct kern_block_iq4_nl *x = (const struct kern_block_iq4_nl *)row + b;

	for (int j = 0; j < 16; j++) {
		u->q[j] = kern_iq4nl_values[x->qs[j] & 15];
		u->q[j + 16] = kern_iq4nl_values[x->qs[j] >> 4];
	}
	ref__set_scales_32(u, ref__h(x->d), 0.0f, 0);
}

/* Element e (0..255) of a Q2_K/Q3_K super-block: its 2-bit field. The
 * 16-element sub-block of e is e / 16 in both. */
static int ref__q2_field(const uint8_t *qs, int e)
{
	int n = e / 128, shift = 2 * ((e % 128) / 32), half = (e % 32) / 16, l = e % 16;

	return (qs[32 * n + 16 * half + l] >> shift) & 3;
}

static void ref__unpack_q2_k(const void *row, size_t b, struct ref__blk *u)
{
	const struct kern_block_q2_k *x = (const struct kern_block_q2_k *)row + b / 8;
	int e0 = (int)(b % 8) * KERN_QK;

	for (int j = 0; j < KERN_QK; j++)
		u->q[j] = (int8_t)ref__q2_field(x->qs, e0 + j);
	for (int h = 0; h < 2; h++) {
		u->sc[h] = x->scales[e0 / 16 + h] & 15;
		u->m[h] = x->scales[e0 / 16 + h] >> 4;
	}
	u->d = ref__h(x->d);
	u->dmin = ref__h(x->dmin);
}

static void ref__unpack_q3_k(const void *row, size_t b, struct ref__blk *u)
{
	const struct kern_block_q3_k *x = (const struct kern_block_q3_k *)row + b / 8;
	int e0 = (int)(b % 8) * KERN_QK;

	for (int j = 0; j < KERN_QK; j++) {
		int e = e0 + j, hbit = (x->hmask[e % 32] >> (e / 32)) & 1;
		u->q[j] = (int8_t)(ref__q2_field(x->qs, e) - (hbit ? 0 : 4));
	}
	for (int h = 0; h < 2; h++) {
		u->sc[h] = kern_q3k_scale(x->scales, e0 / 16 + h);
		u->m[h] = 0;
	}
	u->d = ref__h(x->d);
	u->dmin = 0.0f;
}

/* Q4_K/Q5_K element e: low nibble of qs[32 * (e / 64) + e % 32] for the
 * first 32 of each 64, high nibble for the second; sub-block e / 32. */
static void ref__unpack_q4_k(const void *row, size_t b, struct ref__blk *u)
{
	const struct kern_block_q4_k *x = (const struct kern_block_q4_k *)row + b / 8;
	int j8 = (int)(b % 8), sc, m;
	const uint8_t *qs = x->qs + 32 * (j8 / 2);

	for (int j = 0; j < KERN_QK; j++)
		u->q[j] = (int8_t)(j8 % 2 ? qs[j] >> 4 : qs[j] & 15);
	kern_k4_scale_min(x->scales, j8, &sc, &m);
	u->sc[0] = u->sc[1] = sc;
	u->m[0] = u->m[1] = m;
	u->d = ref__h(x->d);
	u->dmin = ref__h(x->dmin);
}

static void ref__unpack_q5_k(const void *row, size_t b, struct ref__blk *u)
{
	const struct kern_block_q5_k *x = (const struct kern_block_q5_k *)row + b / 8;
	int j8 = (int)(b % 8), sc, m;
	const uint8_t *qs = x->qs + 32 * (j8 / 2);

	for (int j = 0; j < KERN_QK; j++) {
		int lo = j8 % 2 ? qs[j] >> 4 : qs[j] & 15;
		u->q[j] = (int8_t)(lo | ((x->qh[j] >> j8) & 1) << 4);
	}
	kern_k4_scale_min(x->scales, j8, &sc, &m);
	u->sc[0] = u->sc[1] = sc;
	u->m[0] = u->m[1] = m;
	u->d = ref__h(x->d);
	u->dmin = ref__h(x->dmin);
}

/* Q6_K element e: n = e / 128 picks the half of ql/qh, k = (e % 128) / 32
 * which nibble of ql[64n + 32(k & 1) + l] and which bit pair of
 * qh[32n + l] (l = e % 32); sub-block e / 16. */
static int ref__q6_value(const struct kern_block_q6_k *x, int e)
{
	int n = e / 128, k = (e % 128) / 32, l = e % 32;
	int ql = x->ql[64 * n + 32 * (k & 1) + l];
	int lo = k < 2 ? ql & 15 : ql >> 4;
	int hi = (x->qh[32 * n + l] >> (2 * k)) & 3;

	return (lo | hi << 4) - 32;
}

static void ref__unpack_q6_k(const void *row, size_t b, struct ref__blk *u)
{
	const struct kern_block_q6_k *x = (const struct kern_block_q6_k *)row + b / 8;
	int e0 = (int)(b % 8) * KERN_QK;

	for (int j = 0; j < KERN_QK; j++)
		u->q[j] = (int8_t)ref__q6_value(x, e0 + j);
	for (int h = 0; h < 2; h++) {
		u->sc[h] = x->scales[e0 / 16 + h];
		u->m[h] = 0;
	}
	u->d = ref__h(x->d);
	u->dmin = 0.0f;
}

static void ref__unpack_iq4_xs(const void *row, size_t b, struct ref__blk *u)
{
	const struct kern_block_iq4_xs *x = (const struct kern_block_iq4_xs *)row + b / 8;
	int j8 = (int)(b % 8);
	const uint8_t *qs = x->qs + 16 * j8;

	for (int j = 0; j < 16; j++) {
		u->q[j] = kern_iq4nl_values[qs[j] & 15];
		u->q[j + 16] = kern_iq4nl_values[qs[j] >> 4];
	}
	u->sc[0] = u->sc[1] = kern_iq4xs_scale(x, j8);
	u->m[0] = u->m[1] = 0;
	u->d = ref__h(x->d);
	u->dmin = 0.0f;
}

/* ---- dot products and gemm ---------------------------------------------- */

typedef void (*ref__unpack_fn)(const void *row, size_t b, struct ref__blk *u);

static float ref__dot(ref__unpack_fn unpack, const void *w, const struct kern_block_q8a *x,
		      size_t n)
{
	float acc = 0.0f;
	struct ref__blk u;

	for (size_t b = 0; b < n / KERN_QK; b++) {
		int32_t i[2] = {0, 0}, s[2] = {0, 0};

		unpack(w, b, &u);
		for (int j = 0; j < KERN_QK; j++) {
			i[j / 16] += u.q[j] * x[b].qs[j];
			s[j / 16] += x[b].qs[j];
		}
		acc += x[b].d * (u.d * (float)(u.sc[0] * i[0] + u.sc[1] * i[1]) -
				 u.dmin * (float)(u.m[0] * s[0] + u.m[1] * s[1]));
	}
	return acc;
}

static void ref__gemm(ref__unpack_fn unpack, const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	for (size_t t = 0; t < a->n_tok; t++) {
		const struct kern_block_q8a *x =
			(const struct kern_block_q8a *)((const char *)a->x + t * a->x_stride);
		for (size_t o = o0; o < o1; o++)
			a->y[t * a->y_stride + o] =
				ref__dot(unpack, (const char *)a->w + o * a->w_stride, x, a->n_in);
	}
}

#define REF_GEMM(type)                                                                     \
	void kern_ref_gemm_##type(const struct kern_gemm_args *a, size_t o0, size_t o1)    \
	{                                                                                  \
		ref__gemm(ref__unpack_##type, a, o0, o1);                                  \
	}

REF_GEMM(q4_1)
REF_GEMM(q5_0)
REF_GEMM(q5_1)
REF_GEMM(iq4_nl)
REF_GEMM(q2_k)
REF_GEMM(q3_k)
REF_GEMM(q4_k)
REF_GEMM(q5_k)
REF_GEMM(q6_k)
REF_GEMM(iq4_xs)

/* ---- dequantization, ggml's float operations in ggml's order ------------- */

static void ref__deq_q4_1(const struct kern_block_q4_1 *x, float *y)
{
	float d = ref__h(x->d), m = ref__h(x->m);

	for (int j = 0; j < 16; j++) {
		y[j] = (float)(x->qs[j] & 15) * d + m;
		y[j + 16] = (float)(x->qs[j] >> 4) * d + m;
	}
}

static void ref__deq_q5_0(const struct kern_block_q5_0 *x, float *y)
{
	float d = ref__h(x->d);

	for (int j = 0; j < 16; j++) {
		y[j] = (float)(((x->qs[j] & 15) | ref__q5_high(x->qh, j) << 4) - 16) * d;
		y[j + 16] = (float)(((x->qs[j] >> 4) | ref__q5_high(x->qh, j + 16) << 4) - 16) * d;
	}
}

static void ref__deq_q5_1(const struct kern_block_q5_1 *x, float *y)
{
	float d = ref__h(x->d), m = ref__h(x->m);

	for (int j = 0; j < 16; j++) {
		y[j] = (float)((x->qs[j] & 15) | ref__q5_high(x->qh, j) << 4) * d + m;
		y[j + 16] = (float)((x->qs[j] >> 4) | ref__q5_high(x->qh, j + 16) << 4) * d + m;
	}
}

static void ref__deq_iq4_nl(const struct kern_block_iq4_nl *x, float *y)
{
	float d = ref__h(x->d);

	for (int j = 0; j < 16; j++) {
		y[j] = d * (float)kern_iq4nl_values[x->qs[j] & 15];
		y[j + 16] = d * (float)kern_iq4nl_values[x->qs[j] >> 4];
	}
}

static void ref__deq_q2_k(const struct kern_block_q2_k *x, float *y)
{
	float d = ref__h(x->d), dmin = ref__h(x->dmin);

	for (int e = 0; e < KERN_QKK; e++) {
		uint8_t sc = x->scales[e / 16];
		float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
		y[e] = dl * (float)ref__q2_field(x->qs, e) - ml;
	}
}

static void ref__deq_q3_k(const struct kern_block_q3_k *x, float *y)
{
	float d = ref__h(x->d);

	for (int e = 0; e < KERN_QKK; e++) {
		float dl = d * (float)kern_q3k_scale(x->scales, e / 16);
		int hbit = (x->hmask[e % 32] >> (e / 32)) & 1;
		y[e] = dl * (float)(ref__q2_field(x->qs, e) - (hbit ? 0 : 4));
	}
}

static void ref__deq_q4_k(const struct kern_block_q4_k *x, float *y)
{
	float d = ref__h(x->d), dmin = ref__h(x->dmin);

	for (int j8 = 0; j8 < 8; j8++) {
		const uint8_t *qs = x->qs + 32 * (j8 / 2);
		int sc, m;
		kern_k4_scale_min(x->scales, j8, &sc, &m);
		float d1 = d * (float)sc, m1 = dmin * (float)m;
		for (int l = 0; l < 32; l++)
			y[32 * j8 + l] = d1 * (float)(j8 % 2 ? qs[l] >> 4 : qs[l] & 15) - m1;
	}
}

static void ref__deq_q5_k(const struct kern_block_q5_k *x, float *y)
{
	float d = ref__h(x->d), dmin = ref__h(x->dmin);

	for (int j8 = 0; j8 < 8; j8++) {
		const uint8_t *qs = x->qs + 32 * (j8 / 2);
		int sc, m;
		kern_k4_scale_min(x->scales, j8, &sc, &m);
		float d1 = d * (float)sc, m1 = dmin * (float)m;
		for (int l = 0; l < 32; l++) {
			int lo = j8 % 2 ? qs[l] >> 4 : qs[l] & 15;
			y[32 * j8 + l] = d1 * (float)(lo + ((x->qh[l] >> j8) & 1) * 16) - m1;
		}
	}
}

static void ref__deq_q6_k(const struct kern_block_q6_k *x, float *y)
{
	float d = ref__h(x->d);

	for (int e = 0; e < KERN_QKK; e++)
		y[e] = d * (float)x->scales[e / 16] * (float)ref__q6_value(x, e);
}

static void ref__deq_iq4_xs(const struct kern_block_iq4_xs *x, float *y)
{
	float d = ref__h(x->d);

	for (int j8 = 0; j8 < 8; j8++) {
		const uint8_t *qs = x->qs + 16 * j8;
		float dl = d * (float)kern_iq4xs_scale(x, j8);
		for (int j = 0; j < 16; j++) {
			y[32 * j8 + j] = dl * (float)kern_iq4nl_values[qs[j] & 15];
			y[32 * j8 + j + 16] = dl * (float)kern_iq4nl_values[qs[j] >> 4];
		}
	}
}

#define REF_DEQ(type, bk)                                                            \
	for (size_t b = 0; b < n / (bk); b++)                                        \
		ref__deq_##type((const struct kern_block_##type *)src + b, dst + b * (bk)); \
	return 0

int kern_quants_dequantize(uint32_t t, const void *src, float *dst, size_t n)
{
	switch (t) {
	case DTYPE_Q4_1:
		REF_DEQ(q4_1, KERN_QK);
	case DTYPE_Q5_0:
		REF_DEQ(q5_0, KERN_QK);
	case DTYPE_Q5_1:
		REF_DEQ(q5_1, KERN_QK);
	case DTYPE_IQ4_NL:
		REF_DEQ(iq4_nl, KERN_QK);
	case DTYPE_Q2_K:
		REF_DEQ(q2_k, KERN_QKK);
	case DTYPE_Q3_K:
		REF_DEQ(q3_k, KERN_QKK);
	case DTYPE_Q4_K:
		REF_DEQ(q4_k, KERN_QKK);
	case DTYPE_Q5_K:
		REF_DEQ(q5_k, KERN_QKK);
	case DTYPE_Q6_K:
		REF_DEQ(q6_k, KERN_QKK);
	case DTYPE_IQ4_XS:
		REF_DEQ(iq4_xs, KERN_QKK);
	case DTYPE_Q8_K:
		for (size_t b = 0; b < n / KERN_QKK; b++) {
			const struct kern_block_q8_k *x = (const struct kern_block_q8_k *)src + b;
			for (int j = 0; j < KERN_QKK; j++)
				dst[b * KERN_QKK + j] = x->d * (float)x->qs[j];
		}
		return 0;
	default:
		return -1;
	}
}
