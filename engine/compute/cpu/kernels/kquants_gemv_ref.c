/*
 * kquants_gemv_ref.c - the one-token (decode) products of Q2_K, Q3_K, Q4_K,
 * Q5_K and Q6_K rows with activations quantized per 256-element super-block
 * (kern_block_q8_k): the activation quantizer and the scalar reference
 * that the SIMD GEMVs (kquants_gemv.h) equal bit for bit.
 *
 * Why a second activation form: with one activation scale per super-block,
 * a row's whole super-block is one integer sum (sub-block scales applied
 * in int32, the minimums as an integer dot with the 16-element sums), so
 * a row is read in its file order with no transposition and one float
 * step per super-block (LEVELS.md). On x86 the batched kernels of these
 * types take every token in this form too and repeat these steps per
 * (row, token), so a token's result is the same alone or in a batch; the
 * other levels (scalar, NEON) run one kernel on 32-element blocks for
 * every batch.
 *
 * Per row and super-block s, with D = the activations' scale:
 *   Q4_K/Q5_K: isum = sum_j sc_j * S_j, msum = sum_j m_j * (sum of x_j)
 *              acc = acc + (d D) isum;  acc = acc - (dmin D) msum
 *   Q2_K:      the same over its 16 sub-blocks of 16
 *   Q3_K:      isum = sum_k sc_k * (S_k - 4 * (sum of x_k)), S_k on the
 *              unsigned values q + 4 (0..7); acc = acc + (d D) isum
 *   Q6_K:      isum = sum_k sc_k * (S_k - 32 * (sum of x_k))  (16 each)
 *              acc = acc + (d D) isum
 * S_j the integer dot of sub-block j's unsigned values with the int8
 * activations. Every product and sum is exact in int32; the float steps
 * are separate multiplies and adds (no fused multiply-add), in this order,
 * which the SIMD levels repeat lane by lane.
 *
 * Thread safety: pure functions.
 */
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "quants.h"

void kern_quantize_act_q8k(const float *x, struct kern_block_q8_k *y, size_t n)
{
	for (size_t b = 0; b < n / KERN_QKK; b++, x += KERN_QKK) {
		float amax = 0.0f;
		for (int j = 0; j < KERN_QKK; j++)
			amax = fmaxf(amax, fabsf(x[j]));
		float d = amax / 127.0f;
		float id = d != 0.0f ? 1.0f / d : 0.0f;
		y[b].d = d;
		for (int j = 0; j < KERN_QKK; j++)
			y[b].qs[j] = kern_round_q8(x[j] * id);
		for (int k = 0; k < KERN_QKK / 16; k++) {
			int s = 0;
			for (int j = 0; j < 16; j++)
				s += y[b].qs[16 * k + j];
			y[b].bsums[k] = (int16_t)s;
		}
	}
}

/* Unsigned value of element e of a Q4_K (five = 0) or Q5_K super-block. */
static int gref__k4_value(const uint8_t *qs, const uint8_t *qh, int e)
{
	int j = e / 32, l = e % 32;
	int v = j % 2 ? qs[32 * (j / 2) + l] >> 4 : qs[32 * (j / 2) + l] & 15;

	return qh ? v | ((qh[l] >> j) & 1) << 4 : v;
}

/* One step of the float chain, kept as two statements so that no
 * compiler contracts it into a fused multiply-add. */
static float gref__step(float acc, float scale, int32_t isum)
{
	float p = scale * (float)isum;

	return acc + p;
}

static float gref__dot_k4(const char *w, int five, const struct kern_block_q8_k *x, size_t nsb)
{
	const size_t bs = five ? sizeof(struct kern_block_q5_k) : sizeof(struct kern_block_q4_k);
	float acc = 0.0f;

	for (size_t s = 0; s < nsb; s++) {
		const struct kern_block_q4_k *b = (const struct kern_block_q4_k *)(w + s * bs);
		const uint8_t *qs = five ? ((const struct kern_block_q5_k *)b)->qs : b->qs;
		const uint8_t *qh = five ? ((const struct kern_block_q5_k *)b)->qh : NULL;
		int32_t isum = 0, msum = 0;

		for (int j = 0; j < 8; j++) {
			int sc, m, S = 0;
			kern_k4_scale_min(b->scales, j, &sc, &m);
			for (int l = 0; l < 32; l++)
				S += gref__k4_value(qs, qh, 32 * j + l) * x[s].qs[32 * j + l];
			isum += sc * S;
			msum += m * (x[s].bsums[2 * j] + x[s].bsums[2 * j + 1]);
		}
		float dk = kern_fp16_to_fp32(b->d) * x[s].d;
		float mk = kern_fp16_to_fp32(b->dmin) * x[s].d;
		acc = gref__step(acc, dk, isum);
		acc = gref__step(acc, -mk, msum);
	}
	return acc;
}

static float gref__dot_q6(const char *w, const struct kern_block_q8_k *x, size_t nsb)
{
	float acc = 0.0f;

	for (size_t s = 0; s < nsb; s++) {
		const struct kern_block_q6_k *b = (const struct kern_block_q6_k *)w + s;
		int32_t isum = 0;

		for (int k = 0; k < 16; k++) {
			int S = 0;
			for (int l = 0; l < 16; l++) {
				int e = 16 * k + l, n = e / 128, kk = (e % 128) / 32, i = e % 32;
				int ql = b->ql[64 * n + 32 * (kk & 1) + i];
				int lo = kk < 2 ? ql & 15 : ql >> 4;
				int hi = (b->qh[32 * n + i] >> (2 * kk)) & 3;
				S += (lo | hi << 4) * x[s].qs[e];
			}
			isum += b->scales[k] * (S - 32 * x[s].bsums[k]);
		}
		acc = gref__step(acc, kern_fp16_to_fp32(b->d) * x[s].d, isum);
	}
	return acc;
}

/* Q2_K: element e is bits 2 ((e % 128) / 32) of qs[32 (e / 128) + e % 32];
 * sub-block k = e / 16 has scale scales[k] & 15 and minimum scales[k] >> 4. */
static float gref__dot_q2(const char *w, const struct kern_block_q8_k *x, size_t nsb)
{
	float acc = 0.0f;

	for (size_t s = 0; s < nsb; s++) {
		const struct kern_block_q2_k *b = (const struct kern_block_q2_k *)w + s;
		int32_t isum = 0, msum = 0;

		for (int k = 0; k < 16; k++) {
			int S = 0;
			for (int l = 0; l < 16; l++) {
				int e = 16 * k + l;
				int q = (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
				S += q * x[s].qs[e];
			}
			isum += (b->scales[k] & 15) * S;
			msum += (b->scales[k] >> 4) * x[s].bsums[k];
		}
		float dk = kern_fp16_to_fp32(b->d) * x[s].d;
		float mk = kern_fp16_to_fp32(b->dmin) * x[s].d;
		acc = gref__step(acc, dk, isum);
		acc = gref__step(acc, -mk, msum);
	}
	return acc;
}

/* Q3_K: the Q2_K value field plus 4 when bit e / 32 of hmask[e % 32] is
 * set, minus 4; signed 6-bit scales (kern_q3k_scale()). */
static float gref__dot_q3(const char *w, const struct kern_block_q8_k *x, size_t nsb)
{
	float acc = 0.0f;

	for (size_t s = 0; s < nsb; s++) {
		const struct kern_block_q3_k *b = (const struct kern_block_q3_k *)w + s;
		int32_t isum = 0;

		for (int k = 0; k < 16; k++) {
			int S = 0;
			for (int l = 0; l < 16; l++) {
				int e = 16 * k + l;
				int q = (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
				q |= ((b->hmask[e % 32] >> (e / 32)) & 1) << 2;
				S += q * x[s].qs[e];
			}
			isum += kern_q3k_scale(b->scales, k) * (S - 4 * x[s].bsums[k]);
		}
		acc = gref__step(acc, kern_fp16_to_fp32(b->d) * x[s].d, isum);
	}
	return acc;
}

static void gref__gemv(int kind, const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	const struct kern_block_q8_k *x = a->xk;
	const size_t nsb = a->n_in / KERN_QKK;

	for (size_t o = o0; o < o1; o++) {
		const char *w = (const char *)a->w + o * a->w_stride;
		a->y[o] = kind == 6   ? gref__dot_q6(w, x, nsb)
			  : kind == 2 ? gref__dot_q2(w, x, nsb)
			  : kind == 3 ? gref__dot_q3(w, x, nsb)
				      : gref__dot_k4(w, kind == 5, x, nsb);
	}
}

void kern_ref_gemv_q8k_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	gref__gemv(4, a, o0, o1);
}

void kern_ref_gemv_q8k_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	gref__gemv(5, a, o0, o1);
}

void kern_ref_gemv_q8k_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	gref__gemv(6, a, o0, o1);
}

void kern_ref_gemv_q8k_q2_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	gref__gemv(2, a, o0, o1);
}

void kern_ref_gemv_q8k_q3_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	gref__gemv(3, a, o0, o1);
}
