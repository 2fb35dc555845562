/*
 * kquants_avx512.c - the community block types on the AVX-512 VNNI level
 * (the body is kquants_simd.h): per 32 elements, one VPDPBUSD on a 256-bit
 * register (AVX512-VL encoding), u8 x s8 straight into int32. Q4_K, Q5_K
 * and Q6_K are not in kquants_simd.h: this level takes them from
 * kquants_vnni_avx512.c (16-row ZMM tiles) and kquants_gemv_avx512.c (one
 * token).
 */
#if defined(__x86_64__)
#include <immintrin.h>

#define KQ_FN(name) kern_avx512_##name
#define KQ_DOT(u, s) _mm256_dpbusd_epi32(_mm256_setzero_si256(), (u), (s))

#include "kquants_simd.h"

#endif
