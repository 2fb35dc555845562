/*
 * kquants_neon.c - the quantized GEMV/GEMM of the plain-NEON level (every
 * AArch64 core; the ones without the dot-product extension, Cortex-A53 and
 * A72, run these): quants_neon.h's body with a widening multiply for the
 * int8 products (SMULL/SMLAL2 into 16 bits, SADALP into 32: a pair of
 * products is at most 2 x 128 x 127, so 16 bits hold it). Bit-exact with
 * the scalar reference.
 */
#if defined(__aarch64__)
#include <arm_neon.h>

static inline __attribute__((always_inline)) int32x4_t kq__dot(int32x4_t acc, int8x16_t a,
							      int8x16_t b)
{
	int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(b));

	return vpadalq_s16(acc, vmlal_high_s8(p, a, b));
}

#define NQ_DOT(acc, a, b) kq__dot(acc, a, b)
#define NQ_FN(name) kern_neon_gemm_##name
#include "quants_neon.h"
#endif
