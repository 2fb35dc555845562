/*
 * kernels_amx_glu.h - the epilogue of the paired gate|up product
 * (kernels_amx_bf16.c kern_amxbf_glu, issue 17): one token's rows
 * [rb, re) of the MLP's up and gate sums made into silu(gate) * up and
 * rounded straight into the down projection's bf16 A-tile row.
 *
 * Why here and not after the product: the unfused path stored gate and
 * up as floats (11.5 MiB each for a 512-token TinyLlama prompt, rows
 * n_ff floats apart) and the down job's pre task read both back to make
 * the same tile rows (kern_silu_mul_bf16). The values are the same bits:
 * the same avx512__silu_mul (math_avx512.h) on the same fp32 sums, the
 * same VCVTNE2PS2BF16 into the same places (K element k of the token's
 * row at (k / 32) * KERN_BF16_ROW_STEP + k % 32). Rows of a call start and
 * end on 16s, not 32s (176-row pool chunks), so a 32-element step may be
 * half this call's: that half is stored alone (a 32-byte store), the
 * other half is its neighbour call's.
 */
#ifndef EMBER_KERNELS_AMX_GLU_H
#define EMBER_KERNELS_AMX_GLU_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "math_avx512.h"

/* Rows [rb, re) (multiples of 16) of one token: up's element k at
 * u + ((k - rb) / 32) * bs + (k - rb) % 32, gate's at g + the same (bs:
 * 1024 in the GEMM's running sums, 32 in a float row); the bf16 results
 * into row (the token's step 0 in the down product's tiles). */
static inline __attribute__((always_inline)) void
amxglu__row(const float *u, const float *g, size_t bs, size_t rb, size_t re, uint16_t *row)
{
	for (size_t k = rb & ~(size_t)31; k < re; k += 32) {
		const int has_lo = k >= rb, has_hi = k + 16 < re;
		__m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
		uint16_t *d = row + (k / 32) * 512;

		if (has_lo) {
			const size_t e = ((k - rb) / 32) * bs + (k - rb) % 32;

			lo = avx512__silu_mul(_mm512_loadu_ps(u + e), _mm512_loadu_ps(g + e));
		}
		if (has_hi) {
			const size_t e = ((k + 16 - rb) / 32) * bs + (k + 16 - rb) % 32;

			hi = avx512__silu_mul(_mm512_loadu_ps(u + e), _mm512_loadu_ps(g + e));
		}
		const __m512i v = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);

		if (has_lo && has_hi)
			_mm512_storeu_si512(d, v);
		else if (has_lo)
			_mm256_storeu_si256((__m256i *)d, _mm512_castsi512_si256(v));
		else
			_mm256_storeu_si256((__m256i *)(d + 16), _mm512_extracti64x4_epi64(v, 1));
	}
}

#endif
