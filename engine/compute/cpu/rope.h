/*
 * rope.h - rotary position embedding: the cos/sin tables of a step's rows
 * and their application to q and k heads, with the scalings of today's
 * models (model.h): Llama 3's rope_freqs divisors, Phi-3's longrope
 * factors and attention factor, linear scaling, and a second base for
 * Gemma 3's sliding layers (chosen by the caller, forward.c).
 *
 * Tables are [rows][n_rot / 2][2] floats (cos, sin), computed in double
 * as the float64 reference does. Pure functions over caller buffers; any
 * thread.
 */
#ifndef EMBER_ROPE_H
#define EMBER_ROPE_H

#include <stdint.h>

#include "model.h"

/* The frequency divisors of a sequence whose session context is n_ctx:
 * rope_freqs (Llama 3), Phi-3's long factors once n_ctx exceeds
 * rope_orig_ctx (llama.cpp's rule; Hugging Face decides by the sequence's
 * length) else its short ones, or NULL (no division). */
const float *rope_divisors(const struct model *m, uint32_t n_ctx);

/* Rows r0 .. r0+n-1 of `table`: cos and sin of theta_i = pos[t] *
 * base^(-2i/n_rot) * scale / div_i (div NULL: 1), each times mscale. */
void rope_fill(const struct model_hparams *hp, const uint32_t *pos, float *table, uint32_t r0,
	       uint32_t n, double base, double scale, const float *div, double mscale);

/* Rotates the first n_rot dims of each head of x[n][n_heads][head_dim_k]
 * by rows 0 .. n-1 of `table`: NORM pairs (x[2i], x[2i+1]), NEOX pairs
 * (x[i], x[i + n_rot/2]); nothing for ARCH_ROPE_NONE. */
void rope_apply(const struct model *m, const float *table, float *x, uint32_t n, uint32_t n_heads);

#endif
