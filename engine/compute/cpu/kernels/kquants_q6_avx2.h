/*
 * kquants_q6_avx2.h - Q6_K's 6-bit values on 256-bit vectors: the one
 * piece of the block layout that the one-token GEMV bodies
 * (kquants_gemv.h) and the avx2 level's packers (kquants_pack_avx2.c)
 * both read, so the packed layout is made from the same unpack the file
 * layout's kernels use. Include only from a file compiled with at least
 * AVX2.
 */
#ifndef EMBER_KQUANTS_Q6_AVX2_H
#define EMBER_KQUANTS_Q6_AVX2_H

#include <immintrin.h>

/* Half n (0, 1) of the Q6_K super-block at b: its 128 weights, low
 * nibbles joined with their two high bits, as four vectors of 32
 * unsigned values (sub-block pairs 4n .. 4n + 3, without the -32). */
static inline __attribute__((always_inline)) void kg_q6_unpack(const char *b, int n,
								 __m256i q[4])
{
	const __m256i m4 = _mm256_set1_epi8(0x0f), m03 = _mm256_set1_epi8(0x03);
	const __m256i m0c = _mm256_set1_epi8(0x0c), m30 = _mm256_set1_epi8(0x30);
	const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(b + 64 * n));
	const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(b + 64 * n + 32));
	const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * n));

	q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
			       _mm256_slli_epi16(_mm256_and_si256(qh, m03), 4));
	q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
			       _mm256_slli_epi16(_mm256_and_si256(qh, m0c), 2));
	q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
			       _mm256_and_si256(qh, m30));
	q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
			       _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
}

#endif
