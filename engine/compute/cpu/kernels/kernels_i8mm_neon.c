/*
 * kernels_i8mm_neon.c - the i8mm level (int8 matrix multiply, HWCAP2 i8mm:
 * Cortex-A510/A710/X2 and later, Neoverse N2/V1/V2, Graviton 3+): the Q8_0
 * and Q4_0 prefill GEMM with SMMLA, which multiplies a 2 x 8 block of
 * weights by a 2 x 8 block of activations into a 2 x 2 tile of int32 sums
 * (twice SDOT's products per instruction, and no lane reduction after).
 * Tiles are 4 rows x 4 tokens (2 x 2 SMMLA tiles); one token (decode) runs
 * the dotprod level's GEMV. Built with -march=armv8.2-a+dotprod+i8mm.
 *
 * Bit-exact with the scalar reference and the other NEON levels: the
 * integer sums are exact, and each (row, token) lane takes the reference's
 * (float)sum * (dw * dx), block by block, with no fused multiply-add.
 */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"

#define I8_INLINE static inline __attribute__((always_inline))

/* The 8-element chunks k = 0..3 of two 32-element rows, interleaved as
 * SMMLA's operand: chunk k of row a in the low half, of row b high. */
I8_INLINE void i8__pairs(int8x16_t a0, int8x16_t a1, int8x16_t b0, int8x16_t b1, int8x16_t c[4])
{
	int64x2_t x0 = vreinterpretq_s64_s8(a0), x1 = vreinterpretq_s64_s8(a1);
	int64x2_t y0 = vreinterpretq_s64_s8(b0), y1 = vreinterpretq_s64_s8(b1);

	c[0] = vreinterpretq_s8_s64(vzip1q_s64(x0, y0));
	c[1] = vreinterpretq_s8_s64(vzip2q_s64(x0, y0));
	c[2] = vreinterpretq_s8_s64(vzip1q_s64(x1, y1));
	c[3] = vreinterpretq_s8_s64(vzip2q_s64(x1, y1));
}

/* Block b's 32 weights of a row as two int8x16 (Q4_0: unsigned nibbles). */
I8_INLINE void i8__weights(const uint8_t *row, size_t b, const int is_q4, int8x16_t q[2])
{
	if (is_q4) {
		uint8x16_t v = vld1q_u8(row + b * 18 + 2);
		q[0] = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(15)));
		q[1] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
	} else {
		q[0] = vld1q_s8((const int8_t *)row + b * 34 + 2);
		q[1] = vld1q_s8((const int8_t *)row + b * 34 + 18);
	}
}

I8_INLINE float i8__half(const uint8_t *p)
{
	uint16_t h;

	memcpy(&h, p, 2);
	return kern_fp16_to_fp32(h);
}

/* Rows o..o+3 x tokens t..t+3 (pointers already clamped: repeats are
 * computed and dropped). Lanes of acc[rp][tp]: (row 2rp, tok 2tp),
 * (2rp, 2tp+1), (2rp+1, 2tp), (2rp+1, 2tp+1). */
I8_INLINE void i8__tile(const uint8_t *const w[4], const struct kern_block_q8a *const x[4],
			const int32_t *const xs8[4], size_t nb, const int is_q4,
			float32x4_t acc[2][2])
{
	const size_t bs = is_q4 ? 18 : 34;

	for (int rp = 0; rp < 2; rp++)
		for (int tp = 0; tp < 2; tp++)
			acc[rp][tp] = vdupq_n_f32(0.0f);
	for (size_t b = 0; b < nb; b++) {
		int8x16_t xc[2][4], wc[2][4], q[4][2];
		float dw[4], dx[4];

		for (int tp = 0; tp < 2; tp++)
			i8__pairs(vld1q_s8(x[2 * tp][b].qs), vld1q_s8(x[2 * tp][b].qs + 16),
				  vld1q_s8(x[2 * tp + 1][b].qs), vld1q_s8(x[2 * tp + 1][b].qs + 16),
				  xc[tp]);
		for (int r = 0; r < 4; r++) {
			i8__weights(w[r], b, is_q4, q[r]);
			dw[r] = i8__half(w[r] + b * bs);
			dx[r] = x[r][b].d;
		}
		for (int rp = 0; rp < 2; rp++)
			i8__pairs(q[2 * rp][0], q[2 * rp][1], q[2 * rp + 1][0], q[2 * rp + 1][1], wc[rp]);
		for (int rp = 0; rp < 2; rp++)
			for (int tp = 0; tp < 2; tp++) {
				int32x4_t s = vdupq_n_s32(0);
				for (int k = 0; k < 4; k++)
					s = vmmlaq_s32(s, wc[rp][k], xc[tp][k]);
				if (is_q4) {
					int32_t off[4] = {xs8[2 * tp][b], xs8[2 * tp + 1][b],
							  xs8[2 * tp][b], xs8[2 * tp + 1][b]};
					s = vsubq_s32(s, vld1q_s32(off));
				}
				float dwv[4] = {dw[2 * rp], dw[2 * rp], dw[2 * rp + 1], dw[2 * rp + 1]};
				float dxv[4] = {dx[2 * tp], dx[2 * tp + 1], dx[2 * tp], dx[2 * tp + 1]};
				float32x4_t dd = vmulq_f32(vld1q_f32(dwv), vld1q_f32(dxv));
				acc[rp][tp] = vaddq_f32(acc[rp][tp], vmulq_f32(vcvtq_f32_s32(s), dd));
			}
	}
}

I8_INLINE void i8__gemm(const struct kern_gemm_args *a, size_t o0, size_t o1, const int is_q4)
{
	const size_t nb = a->n_in / KERN_QK;

	for (size_t t = 0; t < a->n_tok; t += 4) {
		const struct kern_block_q8a *x[4];
		const int32_t *xs8[4];
		size_t nt = a->n_tok - t < 4 ? a->n_tok - t : 4;

		for (size_t k = 0; k < 4; k++) {
			size_t tk = t + (k < nt ? k : nt - 1);
			x[k] = (const struct kern_block_q8a *)((const char *)a->x + tk * a->x_stride);
			xs8[k] = a->xs8 + tk * a->xd_stride;
		}
		for (size_t o = o0; o < o1; o += 4) {
			const uint8_t *w[4];
			float32x4_t acc[2][2];
			float out[2][2][4];
			size_t nr = o1 - o < 4 ? o1 - o : 4;

			for (size_t r = 0; r < 4; r++)
				w[r] = (const uint8_t *)a->w + (o + (r < nr ? r : nr - 1)) * a->w_stride;
			i8__tile(w, x, xs8, nb, is_q4, acc);
			for (int rp = 0; rp < 2; rp++)
				for (int tp = 0; tp < 2; tp++)
					vst1q_f32(out[rp][tp], acc[rp][tp]);
			for (size_t k = 0; k < nt; k++)
				for (size_t r = 0; r < nr; r++)
					a->y[(t + k) * a->y_stride + o + r] =
						out[r / 2][k / 2][2 * (r % 2) + k % 2];
		}
	}
}

static void i8__gemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	i8__gemm(a, o0, o1, 0);
}

static void i8__gemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	i8__gemm(a, o0, o1, 1);
}

const struct kern_ops kern_ops_i8mm = {
	.name = "i8mm",
	.gemm =
		{
			[DTYPE_Q8_0] = i8__gemm_q8_0,
			[DTYPE_Q4_0] = i8__gemm_q4_0,
		},
	.gemv =
		{
			[DTYPE_Q8_0] = kern_dotprod_gemm_q8_0,
			[DTYPE_Q4_0] = kern_dotprod_gemm_q4_0,
		},
};
#endif
