/*
 * kquants_gemv_avx2.c - the Q2_K .. Q6_K one-token GEMVs on the AVX2
 * level (the body is kquants_gemv.h): the scale applied to VPMADDUBSW's
 * int16 pairs by VPMADDWD, added in int32; Q2_K/Q3_K's batches through
 * the GEMV (kern_avx2_gemm_q8k_*; without Q8_K activations the 32-block
 * gemm of kquants_simd.h).
 */
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels_impl.h"
#include "quants.h"

#define KG_FN(name) kern_avx2_##name
#define KG_MADD(acc, p, s) _mm256_add_epi32((acc), _mm256_madd_epi16((p), (s)))
#define KG_GEMM_Q4_K kern_avx2_gemm_q4_k
#define KG_GEMM_Q5_K kern_avx2_gemm_q5_k
#define KG_GEMM_Q6_K kern_avx2_gemm_q6_k
#define KG_GEMM_Q2_K kern_avx2_gemm_q2_k
#define KG_GEMM_Q3_K kern_avx2_gemm_q3_k

#include "kquants_gemv.h"

#endif
