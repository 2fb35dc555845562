/*
 * kernels_dotprod_neon.c - the dotprod level (ARMv8.2 dot-product
 * extension, HWCAP asimddp: Cortex-A55/A76 and later, Neoverse N1/V1,
 * Graviton 2+, Apple M): quants_neon.h's quantized GEMV/GEMM with SDOT,
 * four int8 products summed into each 32-bit lane per instruction.
 * Built with -march=armv8.2-a+dotprod (Makefile); cpu.c runs it only where
 * HWCAP says so. Everything else comes from the plain-NEON level.
 */
#if defined(__aarch64__)
#include <arm_neon.h>

#define NQ_DOT(acc, a, b) vdotq_s32(acc, a, b)
#define NQ_FN(name) kern_dotprod_gemm_##name
#include "quants_neon.h"

const struct kern_ops kern_ops_dotprod = {
	.name = "dotprod",
	.gemm =
		{
			[DTYPE_Q8_0] = kern_dotprod_gemm_q8_0,
			[DTYPE_Q4_0] = kern_dotprod_gemm_q4_0,
			[DTYPE_Q4_1] = kern_dotprod_gemm_q4_1,
			[DTYPE_Q5_0] = kern_dotprod_gemm_q5_0,
			[DTYPE_Q5_1] = kern_dotprod_gemm_q5_1,
			[DTYPE_IQ4_NL] = kern_dotprod_gemm_iq4_nl,
			[DTYPE_Q2_K] = kern_dotprod_gemm_q2_k,
			[DTYPE_Q3_K] = kern_dotprod_gemm_q3_k,
			[DTYPE_Q4_K] = kern_dotprod_gemm_q4_k,
			[DTYPE_Q5_K] = kern_dotprod_gemm_q5_k,
			[DTYPE_Q6_K] = kern_dotprod_gemm_q6_k,
			[DTYPE_IQ4_XS] = kern_dotprod_gemm_iq4_xs,
		},
};
#endif
