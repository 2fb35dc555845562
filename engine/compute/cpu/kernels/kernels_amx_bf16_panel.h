/*
 * kernels_amx_bf16_panel.h - the bf16 GEMM's B panels (kernels_amx_bf16.c):
 * an item's weight rows x K chunk dequantized to bf16 B tiles, per weight
 * type. The per-type code is here, apart from the tile loop that reads
 * the panels, so that a weight type adds its B piece and one case of
 * amxbf__panel's dispatch without touching the loop. Included once, by
 * kernels_amx_bf16.c, after its AMXBF_* constants (AVX512-BF16 code).
 */
#ifndef EMBER_KERNELS_AMX_BF16_PANEL_H
#define EMBER_KERNELS_AMX_BF16_PANEL_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "amx_bf16_fx.h"
#include "amx_bf16_kq.h"
#include "kernels_impl.h"
#include "math_avx512.h"


/* One (row block, K chunk, row group) of a call: the block's first row,
 * the chunk's first step and steps, the group's first row and height. */
struct amxbf_item {
	size_t rb, kc, n, o;
	int two;
	size_t p; /* the call's part (weight matrix) whose rows these are */
};

/* Block b of the 16 rows at w (st bytes apart) as one B tile at bt: row r
 * holds elements 2r, 2r+1 of the 16 rows as bf16 pairs, weight row n at
 * bytes 4n..4n+3. Values d * q (Q4_0: d * (q - 8)), exact in fp32, then
 * rounded to nearest even. */
/* The same tile from a tiled packed group (kern_avx512_pack_q4_0 / _q8_0;
 * grp its first byte): block b's 16 scales in one load, chunk c's lane n
 * holding qs bytes 4c..4c+3 of row n (Q8_0 stored + 128), so each K pair
 * is a byte pick per lane, no transposition. Each value is the same exact
 * fp32 product d * q rounded the same way (nearest even) as above, so the
 * tile is bit for bit the file layout's. Built in AMXBF_PIECES pieces of
 * two tile rows (piece q of 8), so the GEMM can spread a tile's vector
 * work between its tile steps. */
static inline __attribute__((always_inline)) void
amxbf__b_piece(uint32_t wt, const char *grp, size_t b, unsigned q, uint16_t *bt)
{
	const size_t bs = wt == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0)
					   : sizeof(struct kern_block_q4_0);
	const char *blk = grp + b * 16 * bs;
	const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
	/* word 2n <- word n (the even element), word 2n + 1 <- word 16 + n */
	const __m512i pair = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
					      24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17,
					      1, 16, 0);
	/* piece q: Q8_0 chunk q; Q4_0 chunk q / 2, low (high) nibbles */
	const unsigned c = wt == DTYPE_Q8_0 ? q : q / 2, h = wt == DTYPE_Q8_0 ? 0 : q % 2;
	const __m512i qv = _mm512_loadu_si512(blk + 32 + 64 * c);
	/* Q4_0: q - 8 from a 16-float table (VPERMPS reads index bits 3..0,
	 * so no mask and no conversion); Q8_0: the byte (stored + 128) as a
	 * float, then d * e - 128 d in one FMA. Both products are exact in
	 * fp32 (11-bit scale, 4- or 8-bit quant), as the file layout's. */
	const __m512 tbl = _mm512_set_ps(7, 6, 5, 4, 3, 2, 1, 0, -1, -2, -3, -4, -5, -6, -7, -8);
	__m512 f[4];

	/* Unrolled by hand with immediate shifts: as a loop over k GCC kept
	 * f[] on the stack and shifted by register counts (8 spill stores and
	 * reloads a piece, between the tile steps; amx14). */
	if (wt == DTYPE_Q8_0) {
		const __m512 d128 = _mm512_mul_ps(d, _mm512_set1_ps(128.0f));
		const __m512i m8 = _mm512_set1_epi32(0xff);

		f[0] = _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_and_si512(qv, m8)), d, d128);
		f[1] = _mm512_fmsub_ps(
			_mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(qv, 8), m8)), d, d128);
		f[2] = _mm512_fmsub_ps(
			_mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(qv, 16), m8)), d, d128);
		f[3] = _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(qv, 24)), d, d128);
	} else {
		const __m512i qh = h ? _mm512_srli_epi32(qv, 4) : qv;

		f[0] = _mm512_mul_ps(_mm512_permutexvar_ps(qh, tbl), d);
		f[1] = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(qh, 8), tbl), d);
		f[2] = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(qh, 16), tbl), d);
		f[3] = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(qh, 24), tbl), d);
	}
	/* K elements 4c..4c+3 (Q4_0 high nibbles: 16 more) */
	const size_t r0 = 2 * (size_t)c + 8 * (size_t)h;

	_mm512_store_si512(bt + r0 * 32,
			   _mm512_permutexvar_epi16(pair, (__m512i)_mm512_cvtne2ps_pbh(f[1], f[0])));
	_mm512_store_si512(bt + (r0 + 1) * 32,
			   _mm512_permutexvar_epi16(pair, (__m512i)_mm512_cvtne2ps_pbh(f[3], f[2])));
}

void kern_amxbf_b_tile(uint32_t wt, const char *w, size_t st, size_t b, uint16_t *bt)
{
	__m512i v[16];

	if (amxkq_is_kquant(wt)) { /* its super-block's 8 tiles, one kept */
		uint16_t sb[8 * AMXBF_TILE] __attribute__((aligned(64)));

		for (size_t q = 0; q < amxkq_units(wt); q++)
			amxkq_sb_tiles(wt, w, st, b / 8, (int)q, sb);
		memcpy(bt, sb + b % 8 * AMXBF_TILE, AMXBF_TILE * sizeof(uint16_t));
		return;
	}
	if (wt & KERN_PACKED) {
		for (unsigned q = 0; q < AMXBF_PIECES; q++)
			amxbf__b_piece(wt & ~KERN_PACKED, w, b, q, bt);
		return;
	}
	for (int r = 0; r < 16; r++) {
		__m512 lo, hi, d;

		if (wt == DTYPE_Q8_0) {
			const struct kern_block_q8_0 *k =
				(const struct kern_block_q8_0 *)(w + r * st) + b;
			d = _mm512_set1_ps(_cvtsh_ss(k->d));
			lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)k->qs)));
			hi = _mm512_cvtepi32_ps(
				_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(k->qs + 16))));
		} else {
			const struct kern_block_q4_0 *k =
				(const struct kern_block_q4_0 *)(w + r * st) + b;
			const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)k->qs));
			const __m512i e = _mm512_set1_epi32(8);

			d = _mm512_set1_ps(_cvtsh_ss(k->d));
			lo = _mm512_cvtepi32_ps(
				_mm512_sub_epi32(_mm512_and_si512(q, _mm512_set1_epi32(15)), e));
			hi = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(q, 4), e));
		}
		v[r] = (__m512i)_mm512_cvtne2ps_pbh(_mm512_mul_ps(hi, d), _mm512_mul_ps(lo, d));
	}
	avx512__transpose16(v);
	for (int r = 0; r < 16; r++)
		_mm512_store_si512(bt + r * 32, v[r]);
}

/* Work units [u0, u1) of the item's panel: B tile p (half p / n, step
 * p % n) is units 8p..8p+7 on packed rows (amxbf__b_piece), unit p on the
 * file layout (16 rows transposed at once; F16 / BF16: a weight step's
 * first tile in the chunk builds the step's tiles, the rest nothing,
 * amxfx_panel_tile); K-quants: a 16-row super-
 * block's amxkq_units() units (amx_bf16_kq.h). Inlined, with amxbf__side and
 * amxbf__fold, into the tile loop: as calls, each tile step ran a call
 * with six pushes, a stack realignment and a vzeroupper (amx14). */
static inline __attribute__((always_inline)) void
amxbf__panel(uint32_t wt, const struct kern_gemm_args *a, const struct amxbf_item *it, size_t u0,
	     size_t u1, uint16_t *bt)
{
	const int packed = (wt & KERN_PACKED) != 0;

	if (amxkq_is_kquant(wt)) { /* chunks are whole super-blocks */
		const size_t us = amxkq_units(wt), nu = it->n / 8 * us;

		for (size_t u = u0; u < u1; u++) {
			const size_t h = u >= nu, v = u - (h ? nu : 0), i = 8 * (v / us);

			amxkq_sb_tiles(wt, (const char *)a->w + (it->o + 16 * h) * a->w_stride,
				       a->w_stride, (it->kc + i) / 8, (int)(v % us),
				       bt + (h * AMXBF_KS + i) * AMXBF_TILE);
		}
		return;
	}
	/* no divisions: this runs between tile steps, a few units a step;
	 * the piece inlined per type (its constants and branches out) */
	for (size_t u = u0; u < u1; u++) {
		const size_t p = packed ? u / AMXBF_PIECES : u, h = p >= it->n;
		const size_t i = p - (h ? it->n : 0);
		const char *w = (const char *)a->w + (it->o + 16 * h) * a->w_stride;
		uint16_t *d = bt + (h * AMXBF_KS + i) * AMXBF_TILE;

		if (!packed && amxfx_widen(wt) > 1) /* F16, BF16: split (amx_bf16_fx.h) */
			amxfx_panel_tile(wt, w, a->w_stride, it->kc, i, it->n, d - i * AMXBF_TILE);
		else if (!packed)
			kern_amxbf_b_tile(wt, w, a->w_stride, it->kc + i, d);
		else if (wt == (DTYPE_Q4_0 | KERN_PACKED))
			amxbf__b_piece(DTYPE_Q4_0, w, it->kc + i, u % AMXBF_PIECES, d);
		else
			amxbf__b_piece(DTYPE_Q8_0, w, it->kc + i, u % AMXBF_PIECES, d);
	}
}

/* The panel's work units for n steps, two halves or one. */
static inline size_t amxbf__units(uint32_t wt, size_t n, int two)
{
	if (amxkq_is_kquant(wt))
		return n / 8 * amxkq_units(wt) * (two ? 2 : 1);
	return n * (two ? 2 : 1) * (wt & KERN_PACKED ? AMXBF_PIECES : 1);
}

#endif
