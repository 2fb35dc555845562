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
#include <string.h>

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

/* n F16 (wt DTYPE_F16) or BF16 (else: truncated) weights from *s, of
 * varied magnitude (2^-12 .. 1, so every low part of a split product is
 * in play), into w; their exact floats into wf. */
static inline void amx_selftest_weights16(uint32_t wt, uint16_t *w, float *wf, size_t n,
					  uint32_t *s)
{
	for (size_t i = 0; i < n; i++) {
		const float v = ((float)(amx_selftest_rand(s) % 2001) - 1000.0f) * 1e-3f /
				(float)(1u << (amx_selftest_rand(s) % 12));
		uint32_t u;

		if (wt == DTYPE_F16) {
			w[i] = kern_fp32_to_fp16(v);
			wf[i] = kern_fp16_to_fp32(w[i]);
		} else {
			memcpy(&u, &v, sizeof(u));
			w[i] = (uint16_t)(u >> 16);
			wf[i] = kern_bf16_to_fp32(w[i]);
		}
	}
}

#endif
