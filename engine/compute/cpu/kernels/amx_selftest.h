/*
 * amx_selftest.h - what the AMX start-up self-tests share (kernels_amx.c:
 * int8 tiles against avx512 bit for bit; kernels_amx_bf16.c: bf16 tiles
 * against float64 and avx512 within bounds): one pseudo-random sequence
 * and one way to fill Q8_0 and Q4_0 weight blocks from it. Deterministic,
 * so a failing self-test fails the same way every start.
 * Pure, static inline: any thread (each caller owns its seed).
 */
#ifndef EMBER_AMX_SELFTEST_H
#define EMBER_AMX_SELFTEST_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "kernels_impl.h"

/* The next draw of the LCG at *s (24 bits). */
static inline uint32_t amx_selftest_rand(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

/* n blocks of each type from *s, block i of both sharing its scale (in
 * 1e-4 .. 0.1): Q8_0 quants in -127..127, Q4_0 bytes any. */
static inline void amx_selftest_weights(struct kern_block_q8_0 *w8, struct kern_block_q4_0 *w4,
					size_t n, uint32_t *s)
{
	for (size_t i = 0; i < n; i++) {
		w8[i].d = w4[i].d = kern_fp32_to_fp16((float)(amx_selftest_rand(s) % 1000 + 1) * 1e-4f);
		for (int j = 0; j < KERN_QK; j++)
			w8[i].qs[j] = (int8_t)(amx_selftest_rand(s) % 255 - 127);
		for (int j = 0; j < KERN_QK / 2; j++)
			w4[i].qs[j] = (uint8_t)amx_selftest_rand(s);
	}
}

#endif
