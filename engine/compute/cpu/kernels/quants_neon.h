/*
 * quants_neon.h - the body of the NEON quantized GEMV/GEMM, shared by the
 * plain-NEON level (kquants_neon.c: widening multiplies, SMULL + SADALP,
 * for cores without the dot-product extension: Cortex-A53/A72) and the
 * dotprod level (kernels_dotprod_neon.c: SDOT). The includer defines
 *   NQ_DOT(acc, a, b)  acc (int32x4) plus the products of the int8x16 a, b,
 *                      in any lane arrangement (only the lanes' total counts)
 *   NQ_FN(name)        the exported name of a kernel
 * before including this file, once. Include only from *_neon.c files.
 *
 * Bit-exact with the scalar reference (kernels_ref.c, quants_ref.c): lanes
 * are weight rows (4 at a time), the integer sums of each 32-element block
 * are exact, and each row's float accumulation is the reference's own
 * expression in the reference's order, one block at a time, with no fused
 * multiply-add (this is C11 mode: GCC does not contract a * b + c). So
 * every (row, token) result equals the scalar level's to the bit, whatever
 * the level, tile or batch, and tests compare with memcmp.
 *
 * Threads: pure functions over the caller's buffers.
 */
#ifndef EMBER_QUANTS_NEON_H
#define EMBER_QUANTS_NEON_H

#include <arm_neon.h>
#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"
#include "quants.h"

#define NQ_INLINE static inline __attribute__((always_inline))
/* The 4-row loops must unroll so each row's vectors live in registers. */
#define NQ_UNROLL _Pragma("GCC unroll 4")

/* Lane r = the total of p[r]'s four lanes. */
NQ_INLINE int32x4_t nq__reduce4(const int32x4_t p[4])
{
	return vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]));
}

/* Four rows' fp16 scales at byte offset `off` of their blocks, widened
 * exactly (FCVTL), lane r from w[r]. */
NQ_INLINE float32x4_t nq__scales4(const uint8_t *const w[4], size_t off)
{
	uint16_t h[4];

	for (int r = 0; r < 4; r++)
		memcpy(&h[r], w[r] + off, 2);
	return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

/* Row pointers of the tile starting at row o: rows past o1 repeat the
 * last one (their lanes are computed and dropped). */
NQ_INLINE void nq__rows(const struct kern_gemm_args *a, size_t o, size_t o1, const uint8_t *w[4])
{
	for (size_t r = 0; r < 4; r++)
		w[r] = (const uint8_t *)a->w + (o + r < o1 ? o + r : o1 - 1) * a->w_stride;
}

NQ_INLINE void nq__store(float *y, float32x4_t v, size_t n)
{
	float out[4];

	if (n == 4) {
		vst1q_f32(y, v);
		return;
	}
	vst1q_f32(out, v);
	memcpy(y, out, n * sizeof(float));
}

/* ---- Q8_0, Q4_0: acc += (float)sum * (dw * dx) per block -------------- */

/* is_q4: weights are Q4_0 (unsigned nibbles; 8 * sum(x) comes off the
 * integer sum, as the xs8 row holds it), else Q8_0. */
NQ_INLINE void nq__gemm_q80(const struct kern_gemm_args *a, size_t o0, size_t o1, const int is_q4)
{
	const size_t nb = a->n_in / KERN_QK, bs = is_q4 ? 18 : 34;
	const uint8x16_t m4 = vdupq_n_u8(15);

	for (size_t t = 0; t < a->n_tok; t++) {
		const struct kern_block_q8a *x =
			(const struct kern_block_q8a *)((const char *)a->x + t * a->x_stride);
		const int32_t *xs8 = a->xs8 + t * a->xd_stride;

		for (size_t o = o0; o < o1; o += 4) {
			const uint8_t *w[4];
			float32x4_t acc = vdupq_n_f32(0.0f);

			nq__rows(a, o, o1, w);
			for (size_t b = 0; b < nb; b++) {
				const int8x16_t x0 = vld1q_s8(x[b].qs), x1 = vld1q_s8(x[b].qs + 16);
				int32x4_t p[4];

				NQ_UNROLL
				for (int r = 0; r < 4; r++) {
					const uint8_t *q = w[r] + b * bs + 2;
					int8x16_t q0, q1;
					if (is_q4) {
						uint8x16_t v = vld1q_u8(q);
						q0 = vreinterpretq_s8_u8(vandq_u8(v, m4));
						q1 = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
					} else {
						q0 = vld1q_s8((const int8_t *)q);
						q1 = vld1q_s8((const int8_t *)q + 16);
					}
					p[r] = NQ_DOT(NQ_DOT(vdupq_n_s32(0), q0, x0), q1, x1);
				}
				int32x4_t sum = nq__reduce4(p);
				if (is_q4)
					sum = vsubq_s32(sum, vdupq_n_s32(xs8[b]));
				const uint8_t *wb[4] = {w[0] + b * bs, w[1] + b * bs, w[2] + b * bs,
							w[3] + b * bs};
				float32x4_t dd = vmulq_n_f32(nq__scales4(wb, 0), x[b].d);
				acc = vaddq_f32(acc, vmulq_f32(vcvtq_f32_s32(sum), dd));
			}
			nq__store(a->y + t * a->y_stride + o, acc, o1 - o < 4 ? o1 - o : 4);
		}
	}
}

void NQ_FN(q8_0)(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	nq__gemm_q80(a, o0, o1, 0);
}

void NQ_FN(q4_0)(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	nq__gemm_q80(a, o0, o1, 1);
}

/* ---- the other block formats: quants_ref.c's form ----------------------
 * Each 32-element block b of a row unpacks to two halves of int8 values
 * q[0], q[1], integer scales sc[h] and minima m[h], floats d, dmin; it adds
 *     dx * (d * (float)(sc0*i0 + sc1*i1) - dmin * (float)(m0*s0 + m1*s1))
 * (i_h = sum q*qx, s_h = sum qx over half h), exactly as the reference. */
struct nq__blk {
	int8x16_t q[2];
	int32_t sc[2], m[2];
	float d, dmin;
};

typedef void (*nq__unpack_fn)(const uint8_t *row, size_t b, struct nq__blk *u);

NQ_INLINE float nq__h(const uint8_t *p)
{
	uint16_t h;

	memcpy(&h, p, 2);
	return kern_fp16_to_fp32(h);
}

/* Q5_0/Q5_1's fifth bits, as 0x10 per element: elements 0..15 (bits 0..15
 * of qh) and 16..31. */
NQ_INLINE void nq__q5_high(const uint8_t qh[4], uint8x16_t hb[2])
{
	static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
	const uint8x16_t bv = vld1q_u8(bits), b4 = vdupq_n_u8(0x10);

	hb[0] = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1])), bv), b4);
	hb[1] = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3])), bv), b4);
}

NQ_INLINE void nq__nibbles(const uint8_t *qs, uint8x16_t n[2])
{
	uint8x16_t v = vld1q_u8(qs);

	n[0] = vandq_u8(v, vdupq_n_u8(15));
	n[1] = vshrq_n_u8(v, 4);
}

NQ_INLINE void nq__set_scales(struct nq__blk *u, int sc0, int sc1, int m0, int m1)
{
	u->sc[0] = sc0;
	u->sc[1] = sc1;
	u->m[0] = m0;
	u->m[1] = m1;
}

NQ_INLINE void nq__unpack_q4_1(const uint8_t *row, size_t b, struct nq__blk *u)
{
	const uint8_t *x = row + b * sizeof(struct kern_block_q4_1);
	uint8x16_t n[2];

	nq__nibbles(x + 4, n);
	u->q[0] = vreinterpretq_s8_u8(n[0]);
	u->q[1] = vreinterpretq_s8_u8(n[1]);
	nq__set_scales(u, 1, 1, 1, 1);
	u->d = nq__h(x);
	u->dmin = -nq__h(x + 2);
}

NQ_INLINE void nq__unpack_q5_0(const uint8_t *row, size_t b, struct nq__blk *u)
{
	const uint8_t *x = row + b * sizeof(struct kern_block_q5_0);
	uint8x16_t n[2], hb[2];

	nq__nibbles(x + 6, n);
	nq__q5_high(x + 2, hb);
	for (int h = 0; h < 2; h++)
		u->q[h] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(n[h], hb[h])), vdupq_n_s8(16));
	nq__set_scales(u, 1, 1, 0, 0);
	u->d = nq__h(x);
	u->dmin = 0.0f;
}

NQ_INLINE void nq__unpack_q5_1(const uint8_t *row, size_t b, struct nq__blk *u)
{
	const uint8_t *x = row + b * sizeof(struct kern_block_q5_1);
	uint8x16_t n[2], hb[2];

	nq__nibbles(x + 8, n);
	nq__q5_high(x + 4, hb);
	for (int h = 0; h < 2; h++)
		u->q[h] = vreinterpretq_s8_u8(vorrq_u8(n[h], hb[h]));
	nq__set_scales(u, 1, 1, 1, 1);
	u->d = nq__h(x);
	u->dmin = -nq__h(x + 2);
}

NQ_INLINE void nq__unpack_iq4_nl(const uint8_t *row, size_t b, struct nq__blk *u)
{
	const uint8_t *x = row + b * sizeof(struct kern_block_iq4_nl);
	const int8x16_t tab = vld1q_s8(kern_iq4nl_values);
	uint8x16_t n[2];

	nq__nibbles(x + 2, n);
	u->q[0] = vqtbl1q_s8(tab, n[0]);
	u->q[1] = vqtbl1q_s8(tab, n[1]);
	nq__set_scales(u, 1, 1, 0, 0);
	u->d = nq__h(x);
	u->dmin = 0.0f;
}

/* Q2_K / Q3_K: block j (0..7) of a super-block takes bits 2 (j % 4) of
 * qs[32 (j / 4) + l], l < 32. */
NQ_INLINE void nq__q2_fields(const uint8_t *qs, int j, uint8x16_t f[2])
{
	const int8x16_t sh = vdupq_n_s8((int8_t)(-2 * (j % 4)));
	const uint8x16_t m3 = vdupq_n_u8(3);

	f[0] = vandq_u8(vshlq_u8(vld1q_u8(qs + 32 * (j / 4)), sh), m3);
	f[1] = vandq_u8(vshlq_u8(vld1q_u8(qs + 32 * (j / 4) + 16), sh), m3);
}

NQ_INLINE void nq__unpack_q2_k(const uint8_t *row, size_t b, struct nq__blk *u)
{
	const struct kern_block_q2_k *x = (const struct kern_block_q2_k *)row + b / 8;
	const int j = (int)(b % 8);
	uint8x16_t f[2];

	nq__q2_fields(x->qs, j, f);
	u->q[0] = vreinterpretq_s8_u8(f[0]);
	u->q[1] = vreinterpretq_s8_u8(f[1]);
	nq__set_scales(u, x->scales[2 * j] & 15, x->scales[2 * j + 1] & 15, x->scales[2 * j] >> 4,
		       x->scales[2 * j + 1] >> 4);
	u->d = kern_fp16_to_fp32(x->d);
	u->dmin = kern_fp16_to_fp32(x->dmin);
}

NQ_INLINE void nq__unpack_q3_k(const uint8_t *row, size_t b, struct nq__blk *u)
{
	const struct kern_block_q3_k *x = (const struct kern_block_q3_k *)row + b / 8;
	const int j = (int)(b % 8);
	const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << j)), four = vdupq_n_u8(4);
	uint8x16_t f[2];

	nq__q2_fields(x->qs, j, f);
	for (int h = 0; h < 2; h++) {
		/* minus 4 where the hmask bit is clear */
		uint8x16_t clear = vbicq_u8(four, vtstq_u8(vld1q_u8(x->hmask + 16 * h), bit));
		u->q[h] = vsubq_s8(vreinterpretq_s8_u8(f[h]), vreinterpretq_s8_u8(clear));
	}
	nq__set_scales(u, kern_q3k_scale(x->scales, 2 * j), kern_q3k_scale(x->scales, 2 * j + 1), 0,
		       0);
	u->d = kern_fp16_to_fp32(x->d);
	u->dmin = 0.0f;
}

/* Q4_K / Q5_K block j: low nibbles of qs[32 (j / 2) + l] for even j, high
 * for odd. */
NQ_INLINE void nq__k_nibbles(const uint8_t *qs, int j, uint8x16_t n[2])
{
	const uint8_t *p = qs + 32 * (j / 2);

	for (int h = 0; h < 2; h++) {
		uint8x16_t v = vld1q_u8(p + 16 * h);
		n[h] = j % 2 ? vshrq_n_u8(v, 4) : vandq_u8(v, vdupq_n_u8(15));
	}
}

NQ_INLINE void nq__unpack_q4_k(const uint8_t *row, size_t b, struct nq__blk *u)
{
	const struct kern_block_q4_k *x = (const struct kern_block_q4_k *)row + b / 8;
	const int j = (int)(b % 8);
	uint8x16_t n[2];
	int sc, m;

	nq__k_nibbles(x->qs, j, n);
	u->q[0] = vreinterpretq_s8_u8(n[0]);
	u->q[1] = vreinterpretq_s8_u8(n[1]);
	kern_k4_scale_min(x->scales, j, &sc, &m);
	nq__set_scales(u, sc, sc, m, m);
	u->d = kern_fp16_to_fp32(x->d);
	u->dmin = kern_fp16_to_fp32(x->dmin);
}

NQ_INLINE void nq__unpack_q5_k(const uint8_t *row, size_t b, struct nq__blk *u)
{
	const struct kern_block_q5_k *x = (const struct kern_block_q5_k *)row + b / 8;
	const int j = (int)(b % 8);
	const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << j)), b4 = vdupq_n_u8(16);
	uint8x16_t n[2];
	int sc, m;

	nq__k_nibbles(x->qs, j, n);
	for (int h = 0; h < 2; h++) {
		uint8x16_t hb = vandq_u8(vtstq_u8(vld1q_u8(x->qh + 16 * h), bit), b4);
		u->q[h] = vreinterpretq_s8_u8(vorrq_u8(n[h], hb));
	}
	kern_k4_scale_min(x->scales, j, &sc, &m);
	nq__set_scales(u, sc, sc, m, m);
	u->d = kern_fp16_to_fp32(x->d);
	u->dmin = kern_fp16_to_fp32(x->dmin);
}

/* Q6_K block j: n = j / 4 picks the half, k = j % 4 the nibble of
 * ql[64 n + 32 (k & 1) + l] and the bit pair of qh[32 n + l]. */
NQ_INLINE void nq__unpack_q6_k(const uint8_t *row, size_t b, struct nq__blk *u)
{
	const struct kern_block_q6_k *x = (const struct kern_block_q6_k *)row + b / 8;
	const int j = (int)(b % 8), n = j / 4, k = j % 4;
	const int8x16_t shq = vdupq_n_s8((int8_t)(-2 * k));
	const uint8x16_t m15 = vdupq_n_u8(15), m3 = vdupq_n_u8(3);

	for (int h = 0; h < 2; h++) {
		uint8x16_t ql = vld1q_u8(x->ql + 64 * n + 32 * (k & 1) + 16 * h);
		uint8x16_t lo = k < 2 ? vandq_u8(ql, m15) : vshrq_n_u8(ql, 4);
		uint8x16_t hi = vandq_u8(vshlq_u8(vld1q_u8(x->qh + 32 * n + 16 * h), shq), m3);
		u->q[h] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 4))),
				   vdupq_n_s8(32));
	}
	nq__set_scales(u, x->scales[2 * j], x->scales[2 * j + 1], 0, 0);
	u->d = kern_fp16_to_fp32(x->d);
	u->dmin = 0.0f;
}

NQ_INLINE void nq__unpack_iq4_xs(const uint8_t *row, size_t b, struct nq__blk *u)
{
	const struct kern_block_iq4_xs *x = (const struct kern_block_iq4_xs *)row + b / 8;
	const int j = (int)(b % 8);
	const int8x16_t tab = vld1q_s8(kern_iq4nl_values);
	uint8x16_t n[2];
	int sc = kern_iq4xs_scale(x, j);

	nq__nibbles(x->qs + 16 * j, n);
	u->q[0] = vqtbl1q_s8(tab, n[0]);
	u->q[1] = vqtbl1q_s8(tab, n[1]);
	nq__set_scales(u, sc, sc, 0, 0);
	u->d = kern_fp16_to_fp32(x->d);
	u->dmin = 0.0f;
}

NQ_INLINE void nq__gemm_k(const struct kern_gemm_args *a, size_t o0, size_t o1,
			  const nq__unpack_fn unpack)
{
	const size_t nb = a->n_in / KERN_QK;

	for (size_t t = 0; t < a->n_tok; t++) {
		const struct kern_block_q8a *x =
			(const struct kern_block_q8a *)((const char *)a->x + t * a->x_stride);

		for (size_t o = o0; o < o1; o += 4) {
			const uint8_t *w[4];
			float32x4_t acc = vdupq_n_f32(0.0f);

			nq__rows(a, o, o1, w);
			for (size_t b = 0; b < nb; b++) {
				const int8x16_t x0 = vld1q_s8(x[b].qs), x1 = vld1q_s8(x[b].qs + 16);
				const int32_t s0 = vaddlvq_s8(x0), s1 = vaddlvq_s8(x1);
				int32_t sc0[4], sc1[4], m0[4], m1[4];
				float d[4], dmin[4];
				int32x4_t p0[4], p1[4];

				NQ_UNROLL
				for (int r = 0; r < 4; r++) {
					struct nq__blk u;
					unpack(w[r], b, &u);
					p0[r] = NQ_DOT(vdupq_n_s32(0), u.q[0], x0);
					p1[r] = NQ_DOT(vdupq_n_s32(0), u.q[1], x1);
					sc0[r] = u.sc[0];
					sc1[r] = u.sc[1];
					m0[r] = u.m[0];
					m1[r] = u.m[1];
					d[r] = u.d;
					dmin[r] = u.dmin;
				}
				int32x4_t ia = vmlaq_s32(vmulq_s32(vld1q_s32(sc0), nq__reduce4(p0)),
							 vld1q_s32(sc1), nq__reduce4(p1));
				int32x4_t ib = vaddq_s32(vmulq_n_s32(vld1q_s32(m0), s0),
							 vmulq_n_s32(vld1q_s32(m1), s1));
				float32x4_t v = vsubq_f32(vmulq_f32(vld1q_f32(d), vcvtq_f32_s32(ia)),
							  vmulq_f32(vld1q_f32(dmin), vcvtq_f32_s32(ib)));
				acc = vaddq_f32(acc, vmulq_n_f32(v, x[b].d));
			}
			nq__store(a->y + t * a->y_stride + o, acc, o1 - o < 4 ? o1 - o : 4);
		}
	}
}

/* Q4_K, the common K-quant, without the generic unpack: per super-block
 * and 4 rows, the 6-bit scales and minima of all 8 blocks are unpacked at
 * once in vector lanes (lane = row), and each 32 bytes of nibbles are
 * loaded once for the two blocks that share them. Same arithmetic as the
 * generic form (sc0 = sc1, m0 = m1: the minimum term is m * (s0 + s1), and
 * s0 + s1 is the xs8 row's 8 * sum over 8). */
NQ_INLINE uint32x4_t nq__lanes_u32(const uint8_t *const w[4], size_t off)
{
	uint32_t v[4];

	for (int r = 0; r < 4; r++)
		memcpy(&v[r], w[r] + off, 4);
	return vld1q_u32(v);
}

/* Lane r = byte k of v's lane r, zero-extended: one TBL (index 255 gives
 * 0). `idx` holds 4r + k in byte 4r of each lane and 255 elsewhere. */
NQ_INLINE int32x4_t nq__byte(uint32x4_t v, uint8x16_t idx)
{
	return vreinterpretq_s32_u8(vqtbl1q_u8(vreinterpretq_u8_u32(v), idx));
}

NQ_INLINE uint8x16_t nq__byte_index(int k)
{
	uint8_t idx[16];

	for (int i = 0; i < 16; i++)
		idx[i] = i % 4 ? 255 : (uint8_t)(i + k);
	return vld1q_u8(idx);
}

/* Rows w[0..3] against nt (1 or 2, a constant after inlining) tokens x[k]:
 * each 32 bytes of nibbles are decoded once for the tokens of the call
 * (prefill), each token keeps its own sums and accumulator. */
NQ_INLINE void nq__q4k_tile(const uint8_t *const w[4], size_t nsb,
			    const struct kern_block_q8a *const x[2], const int32_t *const xs8[2],
			    float32x4_t acc[2], const int nt)
{
	const size_t bs = sizeof(struct kern_block_q4_k);
	const uint8x16_t m4 = vdupq_n_u8(15);
	const uint32x4_t k3f = vdupq_n_u32(0x3f3f3f3f), k0f = vdupq_n_u32(0x0f0f0f0f),
			 k30 = vdupq_n_u32(0x30303030);
	const uint8x16_t bidx[4] = {nq__byte_index(0), nq__byte_index(1), nq__byte_index(2),
				    nq__byte_index(3)};

	for (int k = 0; k < nt; k++)
		acc[k] = vdupq_n_f32(0.0f);
	for (size_t sb = 0; sb < nsb; sb++) {
		const uint8_t *ws[4] = {w[0] + sb * bs, w[1] + sb * bs, w[2] + sb * bs,
					w[3] + sb * bs};
		const float32x4_t d = nq__scales4(ws, 0), dmin = nq__scales4(ws, 2);
		const uint32x4_t w0 = nq__lanes_u32(ws, 4), w1 = nq__lanes_u32(ws, 8),
				 w2 = nq__lanes_u32(ws, 12);
		/* bytes 0..3 and 4..7 of each row's scales and minima */
		const uint32x4_t sc[2] = {
			vandq_u32(w0, k3f),
			vorrq_u32(vandq_u32(w2, k0f), vandq_u32(vshrq_n_u32(w0, 2), k30))};
		const uint32x4_t mn[2] = {
			vandq_u32(w1, k3f),
			vorrq_u32(vandq_u32(vshrq_n_u32(w2, 4), k0f), vandq_u32(vshrq_n_u32(w1, 2), k30))};
		/* Row sums run on across the super-block's blocks (no zeroed
		 * accumulator per block); a block's sums are the difference of
		 * two running totals (exact: at most 256 x 15 x 127 in
		 * magnitude). */
		int32x4_t p[2][4], prev[2];

		for (int k = 0; k < nt; k++) {
			prev[k] = vdupq_n_s32(0);
			NQ_UNROLL
			for (int r = 0; r < 4; r++)
				p[k][r] = vdupq_n_s32(0);
		}
		_Pragma("GCC unroll 4")
		for (int jp = 0; jp < 4; jp++) {
			uint8x16_t v[4][2];

			NQ_UNROLL
			for (int r = 0; r < 4; r++) {
				v[r][0] = vld1q_u8(ws[r] + 16 + 32 * jp);
				v[r][1] = vld1q_u8(ws[r] + 32 + 32 * jp);
			}
			_Pragma("GCC unroll 2")
			for (int odd = 0; odd < 2; odd++) {
				const int j = 2 * jp + odd;
				const size_t b = sb * 8 + (size_t)j;
				const int32x4_t scj = nq__byte(sc[j / 4], bidx[j % 4]);
				const int32x4_t mnj = nq__byte(mn[j / 4], bidx[j % 4]);

				NQ_UNROLL
				for (int r = 0; r < 4; r++) {
					int8x16_t q0 = vreinterpretq_s8_u8(odd ? vshrq_n_u8(v[r][0], 4)
									       : vandq_u8(v[r][0], m4));
					int8x16_t q1 = vreinterpretq_s8_u8(odd ? vshrq_n_u8(v[r][1], 4)
									       : vandq_u8(v[r][1], m4));
					for (int k = 0; k < nt; k++)
						p[k][r] = NQ_DOT(NQ_DOT(p[k][r], q0, vld1q_s8(x[k][b].qs)), q1,
								 vld1q_s8(x[k][b].qs + 16));
				}
				for (int k = 0; k < nt; k++) {
					int32x4_t cum = nq__reduce4(p[k]), i = vsubq_s32(cum, prev[k]);
					prev[k] = cum;
					/* xs8 is 8 x the sum: >> 3 is exact */
					int32x4_t ia = vmulq_s32(scj, i);
					int32x4_t ib = vmulq_n_s32(mnj, xs8[k][b] >> 3);
					float32x4_t rv = vsubq_f32(vmulq_f32(d, vcvtq_f32_s32(ia)),
								   vmulq_f32(dmin, vcvtq_f32_s32(ib)));
					acc[k] = vaddq_f32(acc[k], vmulq_n_f32(rv, x[k][b].d));
				}
			}
		}
	}
}

void NQ_FN(q4_k)(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	const size_t nsb = a->n_in / KERN_QKK;

	for (size_t o = o0; o < o1; o += 4) {
		const uint8_t *w[4];
		const size_t nr = o1 - o < 4 ? o1 - o : 4;

		nq__rows(a, o, o1, w);
		for (size_t t = 0; t < a->n_tok; t += 2) {
			const size_t nt = a->n_tok - t < 2 ? 1 : 2;
			const struct kern_block_q8a *x[2];
			const int32_t *xs8[2];
			float32x4_t acc[2];

			for (size_t k = 0; k < 2; k++) {
				size_t tk = t + (k < nt ? k : 0);
				x[k] = (const struct kern_block_q8a *)((const char *)a->x + tk * a->x_stride);
				xs8[k] = a->xs8 + tk * a->xd_stride;
			}
			if (nt == 2)
				nq__q4k_tile(w, nsb, x, xs8, acc, 2);
			else
				nq__q4k_tile(w, nsb, x, xs8, acc, 1);
			for (size_t k = 0; k < nt; k++)
				nq__store(a->y + (t + k) * a->y_stride + o, acc[k], nr);
		}
	}
}

#define NQ__GEMM_K(type)                                                               \
	void NQ_FN(type)(const struct kern_gemm_args *a, size_t o0, size_t o1)         \
	{                                                                              \
		nq__gemm_k(a, o0, o1, nq__unpack_##type);                              \
	}

NQ__GEMM_K(q4_1)
NQ__GEMM_K(q5_0)
NQ__GEMM_K(q5_1)
NQ__GEMM_K(iq4_nl)
NQ__GEMM_K(q2_k)
NQ__GEMM_K(q3_k)
NQ__GEMM_K(q5_k)
NQ__GEMM_K(q6_k)
NQ__GEMM_K(iq4_xs)

#endif
