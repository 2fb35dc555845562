/*
 * kquants_gemv_avx512.c - the Q4_K, Q5_K and Q6_K one-token GEMVs on the
 * AVX-512 VNNI level: kquants_gemv.h's steps with the ZMM row bodies of
 * kquants_gemv_zmm.h (KG_ZMM; per 128 weights two VPDPBUSD, one
 * VPACKSSDW, one VPDPWSSD). KG_MADD serves the shared code's unused AVX2
 * bodies only.
 */
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels_impl.h"
#include "quants.h"

#define KG_FN(name) kern_avx512_##name
#define KG_ZMM 1
#define KG_CHAINS 2
#define KG_MADD(acc, p, s) _mm256_dpwssd_epi32((acc), (p), (s))
#define KG_GEMM_Q4_K kern_avx512_vnni_gemm_q4_k
#define KG_GEMM_Q5_K kern_avx512_vnni_gemm_q5_k
#define KG_GEMM_Q6_K kern_avx512_vnni_gemm_q6_k
#define KG_GEMM_Q2_K kern_avx512_gemm_q2_k
#define KG_GEMM_Q3_K kern_avx512_gemm_q3_k

#include "kquants_gemv.h"

#endif
