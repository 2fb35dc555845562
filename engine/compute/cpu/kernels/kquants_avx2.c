/*
 * kquants_avx2.c - the 32-block community formats' matmul on the AVX2
 * level (the body is kquants_simd.h; Q4_K/Q5_K/Q6_K: kquants_gemv_avx2.c):
 * per 32 elements, maddubs (u8 x s8 pairs to int16, no saturation at
 * these magnitudes) then madd by ones (to int32).
 */
#if defined(__x86_64__)
#include <immintrin.h>

#define KQ_FN(name) kern_avx2_##name
#define KQ_DOT(u, s) _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1))

#include "kquants_simd.h"

#endif
