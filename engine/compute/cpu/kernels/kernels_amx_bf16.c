/*
 * kernels_amx_bf16.c - the AMX level's bf16 prefill GEMM for Q8_0 and Q4_0
 * weights, and Q4_K/Q5_K/Q6_K (B tiles: amx_bf16_kq.h) (TDPBF16PS), for the prompt rows of a call that has float
 * activations (kern_gemm_args xf, or xb made once per matmul): its
 * tokens [n_exact, n_tok), whatever their count (kernels_amx.c).
 *
 * Why: the int8 tiles (kernels_amx.c) must leave the tiles every 32-element
 * block to apply the block scales (one TILESTORED and a float step per
 * 8,192 products), which caps them near 600 GFLOP/s a core (LEVELS.md).
 * Here the block scale is folded into each weight value before rounding it
 * to bf16, so C accumulates in fp32 inside the tiles over a whole K chunk.
 * The results are not the other levels' bits: weights (d * q, or
 * d * (q - 8)) and activations are rounded to bf16 (round to nearest
 * even), products and sums in fp32. Each output is within about
 * 2^-8 * sum |w x| of the exact product; the start-up self-test
 * (kern_amxbf_enable) checks that bound against a float64 reference and
 * the avx512 level. A token's outputs depend only on its own activations
 * (each C element is its own row and column's sums, in a fixed K order),
 * never on the other tokens of the call. F16 and BF16 weights run here
 * too, as split products (amx_bf16_fx.h: the K steps three / two times
 * as many, only their B tiles and activation rows differ).
 *
 * On by default (EMBER_AMX_BF16=0: off, no self-test), for prompt rows
 * only (issue 17): the rows whose logits are sampled (decode tokens, a
 * prompt's last token) take the int8 path (forward.c plan(),
 * kern_matmul_n_split), so a sampled token never depends on what shares
 * its step nor on whether its prompt's prefix came from the cache, and
 * batched decode stays decode's bits. Until then it was off: chosen by
 * call size (64+ tokens), a decode row in a mixed step and a prompt's
 * last token in its chunk took it, the same token alone did not, and a
 * repeated prompt that hit the prefix cache sampled other text.
 *
 * Blocking, per call (rows [o0, o1) from the pool, all n_tok tokens):
 *   activations: xb, bf16 in tiles: token group g (16 tokens), K step s
 *     (32 elements) at xb + (g * K/32 + s) * 512, 16 rows of 64 bytes, so
 *     an A tile is 16 whole cache lines; tokens padded with zeros to a
 *     multiple of 32. Made once per kern_matmul by the quantizing tasks
 *     (kern_amxbf_act_row), else by the call from xf (self-test, tests).
 *   items: per block of rows (amxbf__rb_rows: 512 at 512 tokens), per K chunk of AMXBF_KC
 *     (512) elements, per group of 32 weight rows: the B panel, those
 *     rows x chunk dequantized to bf16 (32 KiB) in the VNNI pair layout:
 *     B tile row r = K elements (2r, 2r+1) of 16 weight rows, 64 bytes.
 *     Each weight element is dequantized once per call; the per-type
 *     pieces and their dispatch are kernels_amx_bf16_panel.h.
 *   per item and group of 32 tokens: C tiles tmm0-3 (2 x 2: 16 tokens x
 *     16 rows each; C[token][row] is y's layout) zeroed, then per K step
 *     2 A tiles (tmm4/5, streaming loads: the B panel stays in L1), 2 B
 *     tiles (tmm6/7; F16 / BF16 keep step i - 1's where they are the
 *     same, amxfx_keep, and their panels skip those tiles) and 4
 *     TDPBF16PS, then
 *     stored: the first chunk into the running sums (a call-local 32 x
 *     32 block per token group and row group of the row block; straight
 *     into y when K is one chunk), later chunks into a partial block that
 *     amxbf__fold adds (vector adds) to the sums; after a row block's
 *     last chunk its sums go to y token by token (amxbf__sums_to_y).
 *   between the tile steps of each block: the previous block's fold and
 *     a share of the next item's panel (a second buffer), so that the
 *     vector work is in the out-of-order window with tile work.
 *   parts (kern_amxbf_glu, issue 17): the MLP's up and gate, the same
 *     rows of two matrices, as one call: items ordered row block, K
 *     chunk, part, row group, so the second part reads the chunk's A
 *     tiles from L2; each part its running sums; after the row block's
 *     last chunk the epilogue (kernels_amx_glu.h) writes silu(gate) * up
 *     as the down product's bf16 tile rows instead of y (LEVELS.md glu17).
 * Packed rows (kern_amxbf_pgemm_*, the amx level's pgemm where the bf16
 * tiles take the call): the avx512 level's tiled groups, each B tile
 * built from a block's 16 scales (one load) and its qs chunks (a byte
 * pick per lane, no transposition), bit for bit the file layout's tile.
 * Tails: a last group of 16 rows runs on one B tile (C tiles 0 and 2;
 * pool chunks are multiples of 16 rows, so e.g. 5632 / 32 chunks of 176
 * rows stay on the tiles); rows past the last 16 go to the int8 path (all
 * tokens); tokens past the last whole 32 run in the tiles on zero-padded
 * activations with C in a call-local buffer, copied to y at the end.
 *
 * Measured (Emerald Rapids, one core, 2026-11-28; LEVELS.md has the
 * runs): TDPBF16PS alone 2.7-2.9 TFLOP/s (~5.7 ns each); with 2 A + 2 B
 * tile loads a step from L1 or L2 the same. What cost the first version
 * (~400 GFLOP/s): C tiles loaded back from y each 8-step chunk (a load
 * into a C tile waits for its store, the products for the load: half
 * the tile rate), y's rows n_out floats apart for those moves, and the
 * panel and folds as vector work that does not overlap the tiles (tile
 * part and vector part add up in time). amx10: no C loads, KC 1024,
 * about 650-750 GFLOP/s at 512 tokens. amxg11: the tile steps alone (no
 * panel, no folds) ran at only ~1.2 TFLOP/s, a scratch loop of this
 * layout at ~2.0 with everything in L1 and ~1.2-1.5 with A from L2;
 * A loads with the streaming hint and a 32 KiB panel (KC 512) keep B in
 * L1: +7-12% (730 -> 800 GFLOP/s at 2048 x 2048). Dequantizing a B tile
 * costs ~60-110 ns against ~180 ns of its products, and still does not
 * overlap them. amxg13: the tile peak on this VM measured ~2.25 TFLOP/s
 * (~7.2 ns a TDPBF16PS), this block's loop ~1.9, A from L3 ~0.75; the
 * last chunk's fold into y's strided rows cost ~22% (now the sums go to
 * y after each row block, token by token); the panels and y's writes are
 * the larger parts left. amx14: the side work inlined, no stack traffic
 * between the tile steps (+4-9%); the panel's stores are ~1/3 of its
 * cost (two 32 KiB panels do not fit L1 together). amx15: in the model's
 * 64-row calls A's stream from L3 (all tokens, once a call) is ~1/3 of
 * the time and y's copy ~1/4, the panel ~1/6; one panel rewritten in
 * L1, prefetching A, streaming stores to y: no gain.
 *
 * Thread safety: kern_amxbf_enable() runs once under kern_init()'s
 * pthread_once (via kern_amx_enable); the GEMMs are pure, each call
 * configures its own tiles and allocates its own work memory (two B
 * panels, the running sums, the tail's C, the activation tiles when no
 * xb came: per pool
 * item of a prefill, as kernels_amx.c's); without it the call is the
 * int8 path's, bit for bit (test_amx_bf16.c fails the allocation). The
 * int8 paths here (that fallback, rows past the last 16) read the int8
 * blocks of every token, which kern_matmul leaves unmade for bf16 tokens
 * (a->lazy): they call kern_act_ensure() first (amxbf__i8_*).
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "amx_bf16_kq.h"
#include "amx_bf16_fx.h"
#include "amx_selftest.h"
#include "kernels.h"
#include "kernels_amx_glu.h"
#include "kernels_impl.h"
#include "math_avx512.h"

#define AMXBF_TOK 16  /* tokens per A / C tile */
#define AMXBF_ROWS 32 /* weight rows per group: two B tiles */
#define AMXBF_STEP 32 /* K elements per tile product (16 bf16 pairs) */
#define AMXBF_TILE (AMXBF_TOK * AMXBF_STEP) /* bf16 elements per A/B tile */
/* K elements per chunk: a B panel of 32 KiB, which stays in L1 across the
 * token groups while A streams past it (TILELOADDT1); 1024 (64 KiB, past
 * L1) and 256 (a fold per 8 steps) measured slower (LEVELS.md, amxg11). */
#ifndef AMXBF_KC
#define AMXBF_KC 512
#endif
#define AMXBF_KS (AMXBF_KC / AMXBF_STEP)
#define AMXBF_PIECES 8 /* a packed B tile's pieces (amxbf__b_piece) */
/* Rows per block: a block's running sums stay in L2 across the K chunks,
 * and each K chunk's A tiles (512 KiB at 512 tokens) stream from L3 once
 * per block. A call's blocks are as tall as AMXBF_SUMS bytes of sums
 * allow (1 MiB: 512 rows at 512 tokens, beside that A chunk and the two
 * 32 KiB panels in the 2 MiB L2; 1024 rows at 256 tokens), never under
 * AMXBF_RB rows (past L2, sums cost the same per row in any block, A's
 * passes fewer in taller ones). 512 rows against 256 at 512 tokens: +4-5%
 * in 512-row calls, +9% in 1408-row calls; 1024 (2 MiB of sums) no better
 * than 512, nor 1024 than 256 at 256 tokens (rb17, LEVELS.md); 128
 * against 256: 5-10% slower (amxg11). */
#ifndef AMXBF_RB
#define AMXBF_RB 256
#endif
#ifndef AMXBF_SUMS
#define AMXBF_SUMS (1u << 20)
#endif
/* The int8 path for rows past the last whole 16 (tests rename it). */
#ifndef AMXBF_INT8_Q8_0
#define AMXBF_INT8_Q8_0 kern_amx_i8_gemm_q8_0
#define AMXBF_INT8_Q4_0 kern_amx_i8_gemm_q4_0
#endif

/* A call's work memory (64-byte aligned; test_amx_bf16.c fails it on
 * demand to check the fallback's bits). */
#ifndef AMXBF_ALLOC
#define AMXBF_ALLOC(n) aligned_alloc(64, (n))
#endif

/* the B panels' per-type pieces (they read the constants above) */
#include "kernels_amx_bf16_panel.h"

int kern_amxbf_on;

/* The paths that read the int8 blocks of every token of a call (rows
 * past the last 16, the fallback without work memory): those blocks made
 * first where kern_matmul left them to demand (kern_act_ensure). */
static void amxbf__i8_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kern_act_ensure(a);
	AMXBF_INT8_Q8_0(a, o0, o1);
}

static void amxbf__i8_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kern_act_ensure(a);
	AMXBF_INT8_Q4_0(a, o0, o1);
}

static void amxbf__pi8_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kern_act_ensure(a);
	kern_avx512_pgemm_q8_0(a, o0, o1);
}

static void amxbf__pi8_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	kern_act_ensure(a);
	kern_avx512_pgemm_q4_0(a, o0, o1);
}

/* The tiles' shape is kernels_impl.h's kern_amx_cfg_bf16 (AMXBF_TOK
 * rows); loaded through the intrinsic's name, which the tests' software
 * tile model (tests/amx_tile_model.h) redefines. */
static_assert(AMXBF_TOK == 16, "kern_amx_cfg_bf16 has 16-row tiles");

static void amxbf__configure(void)
{
	_tile_loadconfig(kern_amx_cfg_bf16);
}

void kern_amxbf_act_row(const float *x, size_t n_in, size_t t, uint16_t *xb)
{
	const size_t ns = n_in / AMXBF_STEP;
	uint16_t *d = xb + (t / AMXBF_TOK) * ns * AMXBF_TILE + (t % AMXBF_TOK) * AMXBF_STEP;

	for (size_t s = 0; s < ns; s++) {
		__m512i v = _mm512_setzero_si512();

		if (x)
			v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + s * AMXBF_STEP + 16),
							 _mm512_loadu_ps(x + s * AMXBF_STEP));
		_mm512_storeu_si512(d + s * AMXBF_TILE, v);
	}
}

size_t kern_amxbf_scratch(uint32_t wtype, size_t n_in, size_t n_tok)
{
	/* F16 / BF16 rows of any length exist: the tiles take whole steps */
	if ((wtype != DTYPE_Q8_0 && wtype != DTYPE_Q4_0 && !amxkq_is_kquant(wtype) &&
	     amxfx_widen(wtype) == 1) ||
	    n_in % AMXBF_STEP != 0 || !kern_amxbf_on)
		return 0;
	return kern_amxbf_tokens(n_tok) * n_in * amxfx_widen(wtype) * sizeof(uint16_t) + 64;
}

const uint16_t *kern_amxbf_tiles(const void *at, size_t n_in, size_t n_tok)
{
	uint16_t *xb = (uint16_t *)(((uintptr_t)at + 63) & ~(uintptr_t)63);

	for (size_t t = n_tok; t < kern_amxbf_tokens(n_tok); t++)
		kern_amxbf_act_row(NULL, n_in, t, xb);
	return xb;
}

/* kern_amxbf_describe()'s line, written by kern_amxbf_enable(). */
static char amxbf__desc[256] = "q8_0/q4_0 prefill: int8 tiles (bf16 not tried)";

const char *kern_amxbf_describe(void)
{
	return amxbf__desc;
}

/* A chunk's 32 x 32 partial sums (p, 32 floats a token) waiting to be
 * added: dst = src + p, 16 or 32 (two) columns; src, dst with their
 * strides (a block of the call's running sums, or y on the last chunk). */
struct amxbf_fold {
	const float *p, *src;
	float *dst;
	size_t scs, dcs;
	int two;
};

/* Token rows [t0, t1) of the fold: vector adds. */
static inline __attribute__((always_inline)) void
amxbf__fold(const struct amxbf_fold *f, size_t t0, size_t t1)
{
	for (size_t t = t0; t < t1; t++) {
		const float *p = f->p + 32 * t, *s = f->src + t * f->scs;
		float *d = f->dst + t * f->dcs;

		_mm512_storeu_ps(d, _mm512_add_ps(_mm512_loadu_ps(s), _mm512_load_ps(p)));
		if (f->two)
			_mm512_storeu_ps(d + 16, _mm512_add_ps(_mm512_loadu_ps(s + 16),
							       _mm512_load_ps(p + 16)));
	}
}

/* A row block's finished sums (rows [rb, re), every token group's 32 x
 * 32 blocks at cb, rbw rows a token group) into y, token by token: each
 * token's rows are one contiguous run of y. Why not the last chunk's fold
 * straight into y, as until amxg13: that wrote 32 token rows of 128
 * bytes n_out floats apart (8 KiB at 2048 rows: one L1 set) per block,
 * and took ~22% of a 2048 x 2048 x 512 call (LEVELS.md, amxg13). */
static void amxbf__sums_to_y(const struct kern_gemm_args *a, const float *cb, size_t rbw,
			     size_t rb, size_t re)
{
	for (size_t t = 0; t < a->n_tok; t++) {
		const float *s = cb + (t / 32) * rbw * 32 + (t % 32) * 32;
		float *d = a->y + t * a->y_stride + rb;

		for (size_t o = 0; o < re - rb; o += 32, s += 1024) {
			_mm512_storeu_ps(d + o, _mm512_load_ps(s));
			if (o + 16 < re - rb)
				_mm512_storeu_ps(d + o + 16, _mm512_load_ps(s + 16));
		}
	}
}

/* amxbf__sums_to_y()'s rows for the paired gate|up call: each token's
 * rows [rb, re) of up's sums (cu) and gate's (cg) through the epilogue
 * (kernels_amx_glu.h) into the down product's tile row (xb, K n_ff). */
static void amxbf__glu_rows(size_t n_tok, const float *cu, const float *cg, size_t rbw, size_t rb,
			    size_t re, uint16_t *xb, size_t n_ff)
{
	for (size_t t = 0; t < n_tok; t++) {
		const size_t e = (t / 32) * rbw * 32 + (t % 32) * 32;

		amxglu__row(cu + e, cg + e, 1024, rb, re, kern_amxbf_row(xb, n_ff, t));
	}
}

static void amxbf__set(struct amxbf_item *it, size_t rb, size_t kc, size_t o, size_t ns,
		       size_t ks, size_t o_end)
{
	it->rb = rb;
	it->kc = kc;
	it->n = ns - kc < ks ? ns - kc : ks;
	it->o = o;
	it->two = o + AMXBF_ROWS <= o_end;
}

/* Rows per block for mp (padded) tokens and np parts: amxbf__gemm's
 * blocks, as tall as AMXBF_SUMS of running sums (all parts') allow. */
static size_t amxbf__rb_rows(size_t mp, size_t np)
{
	const size_t r = AMXBF_SUMS / (np * mp * sizeof(float)) / AMXBF_ROWS * AMXBF_ROWS;

	return r > AMXBF_RB ? r : AMXBF_RB;
}

/* The item after cur in the call's order (row blocks of rbn rows, in
 * each the chunks of ks steps, in each the np parts (weight matrices
 * over the same activations, kern_amxbf_glu), in each the row groups;
 * rows end on a 16): 0 past the last. Parts inside the chunk, so that a
 * chunk's A tiles, read again by each part, are still in L2. */
static int amxbf__next(const struct amxbf_item *cur, struct amxbf_item *nx, size_t ns, size_t ks,
		       size_t o_end, size_t np, size_t rbn)
{
	const size_t rb_end = cur->rb + rbn < o_end ? cur->rb + rbn : o_end;
	size_t rb = cur->rb, kc = cur->kc, o = cur->o + AMXBF_ROWS, p = cur->p;

	if (o >= rb_end && ++p < np) {
		o = rb;
	} else if (o >= rb_end) {
		o = rb;
		p = 0;
		kc += ks;
		if (kc >= ns) {
			kc = 0;
			rb += rbn;
			o = rb;
			if (rb >= o_end)
				return 0;
		}
	}
	amxbf__set(nx, rb, kc, o, ns, ks, o_end);
	nx->p = p;
	return 1;
}

/* The vector work a block runs between its tile steps: the previous
 * block's fold (f, or NULL; fr token rows a step) and units [u0, u1) of
 * the next item's panel (it into bt; up a step). */
struct amxbf_side {
	const struct amxbf_fold *f;
	uint32_t wt;
	const struct kern_gemm_args *a;
	const struct amxbf_item *it;
	size_t u0, u1, up, fr;
	uint16_t *bt;
};

/* Step i's share of the side work. */
static inline __attribute__((always_inline)) void amxbf__side(const struct amxbf_side *s,
								 size_t i)
{
	const size_t t0 = i * s->fr, u0 = s->u0 + i * s->up;

	if (s->f && t0 < 32)
		amxbf__fold(s->f, t0, t0 + s->fr < 32 ? t0 + s->fr : 32);
	if (u0 < s->u1)
		amxbf__panel(s->wt, s->a, s->it, u0, u0 + s->up < s->u1 ? u0 + s->up : s->u1, s->bt);
}

/* A 32-token x 32-row block (16 rows when !two: tiles 0 and 2 only) over
 * n K steps from zero, stored at co (ocs floats between token rows): the
 * token group's A tiles at x0 (its second 16 tokens ns tiles on), B panel
 * bt. A tiles load with TILELOADDT1 (the streaming hint): each is used
 * by one block, and as plain loads they pushed the B panel, read by every
 * token group, out of L1 (7-12% slower, LEVELS.md amxg11). C never comes
 * back into the tiles: a TILELOADD into a C tile waits
 * for the TILESTORED before it and the products after it wait for the
 * load, which drained the tiles once per chunk (half their rate at 8
 * steps a chunk, LEVELS.md); partial sums are added by amxbf__fold. The
 * side work goes between the steps, so that the out-of-order window
 * always holds tile work: issued as one run after the block, it filled
 * the window while the block's products retired, and the tiles idled. */
static void amxbf__block(float *co, size_t ocs, int two, const uint16_t *x0, size_t ns,
			 const uint16_t *bt, size_t n, uint32_t keep, const struct amxbf_side *side)
{
	const long ob = (long)(ocs * sizeof(float));
	const uint16_t *x1 = x0 + ns * AMXBF_TILE;

	_tile_zero(0);
	_tile_zero(2);
	if (!two) {
		for (size_t i = 0; i < n; i++) {
			_tile_stream_loadd(4, x0 + i * AMXBF_TILE, 64);
			if (!(keep >> i & 1))
				_tile_loadd(6, bt + i * AMXBF_TILE, 64);
			_tile_dpbf16ps(0, 4, 6);
			_tile_stream_loadd(5, x1 + i * AMXBF_TILE, 64);
			_tile_dpbf16ps(2, 5, 6);
			amxbf__side(side, i);
		}
		_tile_stored(0, co, ob);
		_tile_stored(2, co + 16 * ocs, ob);
		return;
	}
	_tile_zero(1);
	_tile_zero(3);
	for (size_t i = 0; i < n; i++) {
		_tile_stream_loadd(4, x0 + i * AMXBF_TILE, 64);
		if (keep >> i & 1) { /* tmm6/7 hold step i - 1's tiles, the same */
			_tile_dpbf16ps(0, 4, 6);
			_tile_dpbf16ps(1, 4, 7);
		} else {
			_tile_loadd(6, bt + i * AMXBF_TILE, 64);
			_tile_dpbf16ps(0, 4, 6);
			_tile_loadd(7, bt + (AMXBF_KS + i) * AMXBF_TILE, 64);
			_tile_dpbf16ps(1, 4, 7);
		}
		_tile_stream_loadd(5, x1 + i * AMXBF_TILE, 64);
		_tile_dpbf16ps(2, 5, 6);
		_tile_dpbf16ps(3, 5, 7);
		amxbf__side(side, i);
	}
	_tile_stored(0, co, ob);
	_tile_stored(1, co + 16, ob);
	_tile_stored(2, co + 16 * ocs, ob);
	_tile_stored(3, co + 16 * ocs + 16, ob);
}

/*
 * The call's items in order, each running every 32-token group on its B
 * panel while the next item's panel is dequantized into the other buffer,
 * a share after each token group: vector work the core overlaps with the
 * tile products in flight, instead of a pause of ~3,000 cycles per item.
 * wt | KERN_PACKED: tiled packed rows (o0, o1 on 16-row groups, so no
 * row tail), i8 then the avx512 level's packed GEMM (the fallback).
 * as[0 .. np): the parts, weight matrices of wt over as[0]'s activations
 * (np 2: kern_amxbf_glu, whose glu is where the epilogue writes; np 1
 * and glu NULL: y). Returns 0, or -1 where the paired call cannot run
 * (nothing done: a row tail, which the epilogue does not take, or no
 * work memory).
 */
static int amxbf__gemm_parts(uint32_t wt, kern_gemm_fn i8, const struct kern_gemm_args *const *as,
			     size_t np, uint16_t *glu, size_t o0, size_t o1, size_t ks)
{
	const struct kern_gemm_args *const a = as[0];
	/* F16, BF16: K steps of the split products (amx_bf16_fx.h) */
	const size_t wd = amxfx_widen(wt);
	const size_t ns = a->n_in * wd / AMXBF_STEP, mp = kern_amxbf_tokens(a->n_tok), ntg = mp / 32;
	const size_t full = a->n_tok / 32 * 32, rows = (o1 - o0) / 16 * 16;
	const size_t o_end = o0 + rows;
	const size_t bt_bytes = 2 * AMXBF_KS * AMXBF_TILE * sizeof(uint16_t);
	const size_t ct_bytes =
		full < mp && ns <= ks && !glu ? (32 * rows * sizeof(float) + 63) & ~(size_t)63 : 0;
	const size_t xb_bytes = a->xb ? 0 : mp * a->n_in * wd * sizeof(uint16_t);
	/* the running sums between K chunks: per part and token group a row
	 * block's (rbw rows: the call's, up to rbn) 32 x 32 blocks (4 KiB
	 * each, contiguous: y's rows are n_out floats apart, all on a few
	 * cache sets), then two chunks' partial blocks */
	const size_t rbn = amxbf__rb_rows(mp, np);
	const size_t rbw = rows < rbn ? (rows + 31) / 32 * 32 : rbn;
	/* (the paired call's epilogue reads sums, even of one chunk) */
	const int sums = ns > ks || glu;
	const size_t cb_bytes = sums ? (np * mp * rbw + 2048) * sizeof(float) : 0;
	const uint16_t *xb = a->xb;
	struct amxbf_item it = {0}, nx = {0};
	uint16_t *bt[2];
	struct amxbf_fold fold[2];
	size_t nf = 0;
	float *ct, *cb, *part;
	char *m;

	if (glu && rows != o1 - o0)
		return -1;
	if (rows == 0 || ns == 0 || (a->xb == NULL && a->xf == NULL) ||
	    !(m = AMXBF_ALLOC(2 * bt_bytes + ct_bytes + cb_bytes + xb_bytes))) {
		if (glu)
			return -1;
		i8(a, o0, o1);
		return 0;
	}
	bt[0] = (uint16_t *)m;
	bt[1] = (uint16_t *)(m + bt_bytes);
	ct = (float *)(m + 2 * bt_bytes);
	cb = (float *)(m + 2 * bt_bytes + ct_bytes);
	part = cb_bytes ? cb + np * mp * rbw : NULL;
	if (!xb) {
		uint16_t *own = (uint16_t *)(m + 2 * bt_bytes + ct_bytes + cb_bytes);

		for (size_t t = 0; t < mp; t++)
			amxfx_act_row(wt, t < a->n_tok ? a->xf + t * a->xf_stride : NULL, a->n_in, t,
				      own);
		xb = own;
	}
	amxbf__set(&it, o0, 0, o0, ns, ks, o_end);
	amxbf__panel(wt, as[0], &it, 0, amxbf__units(wt, it.n, it.two), bt[0]);
	amxbf__configure();
	for (size_t i = 0;; i++) {
		const int more = amxbf__next(&it, &nx, ns, ks, o_end, np, rbn);
		const size_t nu = more ? amxbf__units(wt, nx.n, nx.two) : 0;
		const uint16_t *b = bt[i & 1];
		const size_t re = it.rb + rbn < o_end ? it.rb + rbn : o_end;
		/* the row block's last item (several chunks, the last part):
		 * its sums go to y, or through the epilogue */
		const int fin = sums && it.kc + it.n == ns && it.p + 1 == np &&
				(!more || nx.rb != it.rb);
		/* F16 / BF16: the steps that keep the step before's B tiles */
		const uint32_t keep = amxfx_keep(wt, it.kc, it.n);
		const struct kern_gemm_args *ap = as[it.p];
		float *const cbp = cb + it.p * mp * rbw;

		for (size_t j = 0; j < ntg; j++) {
			const size_t tg = 32 * j;
			const uint16_t *x0 = xb + ((tg / AMXBF_TOK) * ns + it.kc) * AMXBF_TILE;
			float *run = cbp + (j * (rbw / 32) + (it.o - it.rb) / 32) * 1024;
			float *out = tg < full ? ap->y + tg * ap->y_stride + it.o : ct + (it.o - o0);
			const size_t os = tg < full ? ap->y_stride : rows;
			const int last = it.kc + it.n == ns && !glu;
			const size_t u0 = nu * j / ntg, u1 = nu * (j + 1) / ntg;
			const struct amxbf_side side = {
				nf ? &fold[(nf - 1) & 1] : NULL, wt, as[nx.p], &nx, u0, u1,
				(u1 - u0 + it.n - 1) / it.n, (32 + it.n - 1) / it.n, bt[(i + 1) & 1],
			};

			if (it.kc == 0) { /* straight to the sums (or y: one chunk) */
				amxbf__block(last ? out : run, last ? os : 32, it.two, x0, ns, b, it.n,
					     keep, &side);
				nf = 0;
			} else {
				float *p = part + (nf & 1) * 1024;

				amxbf__block(p, 32, it.two, x0, ns, b, it.n, keep, &side);
				fold[nf & 1] = (struct amxbf_fold){p, run, run, 32, 32, it.two};
				nf++;
			}
		}
		/* the row block's last item: its sums into y, or up's and
		 * gate's through the epilogue into the down product's tiles
		 * (the pending fold first; the earlier part's last folds ran
		 * in this part's first blocks) */
		if (fin) {
			if (nf) /* none after a lone chunk (the paired call) */
				amxbf__fold(&fold[(nf - 1) & 1], 0, 32);
			nf = 0;
			if (glu)
				amxbf__glu_rows(a->n_tok, cb, cb + mp * rbw, rbw, it.rb, re, glu,
						as[0]->y_stride);
			else
				amxbf__sums_to_y(a, cb, rbw, it.rb, re);
		}
		if (!more)
			break;
		it = nx;
	}
	_tile_release();
	for (size_t t = full; ns <= ks && !glu && t < a->n_tok; t++)
		memcpy(a->y + t * a->y_stride + o0, ct + (t - full) * rows, rows * sizeof(float));
	free(m);
	if (o_end < o1) /* rows past the last 16: every token, int8 */
		i8(a, o_end, o1);
	return 0;
}

static void amxbf__gemm(uint32_t wt, kern_gemm_fn i8, const struct kern_gemm_args *a, size_t o0,
			size_t o1, size_t ks)
{
	amxbf__gemm_parts(wt, i8, &a, 1, NULL, o0, o1, ks);
}

int kern_amxbf_glu(uint32_t wt, const struct kern_gemm_args *up, const struct kern_gemm_args *gate,
		   size_t o0, size_t o1, uint16_t *xb)
{
	const struct kern_gemm_args *const as[2] = {up, gate};

	if (!kern_amxbf_glu_ok(wt) || up->n_in != gate->n_in || up->n_tok != gate->n_tok ||
	    up->xb != gate->xb || up->y_stride != gate->y_stride)
		return -1;
	return amxbf__gemm_parts(wt, NULL, as, 2, xb, o0, o1, AMXBF_KS);
}

int kern_amxbf_glu_ok(uint32_t wt)
{
	const uint32_t t = wt & ~KERN_PACKED;

	return kern_amxbf_on && (t == DTYPE_Q8_0 || t == DTYPE_Q4_0 || amxkq_is_kquant(t));
}

void kern_amxbf_glu_y(const float *up, const float *gate, size_t stride, size_t n_tok,
		      size_t o0, size_t o1, uint16_t *xb)
{
	for (size_t t = 0; t < n_tok; t++)
		amxglu__row(up + t * stride + o0, gate + t * stride + o0, 32, o0, o1,
			    kern_amxbf_row(xb, stride, t));
}

void kern_amxbf_gemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amxbf__gemm(DTYPE_Q8_0, amxbf__i8_q8_0, a, o0, o1, AMXBF_KS);
}

void kern_amxbf_gemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amxbf__gemm(DTYPE_Q4_0, amxbf__i8_q4_0, a, o0, o1, AMXBF_KS);
}

void kern_amxbf_pgemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amxbf__gemm(DTYPE_Q8_0 | KERN_PACKED, amxbf__pi8_q8_0, a, o0, o1, AMXBF_KS);
}

void kern_amxbf_pgemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amxbf__gemm(DTYPE_Q4_0 | KERN_PACKED, amxbf__pi8_q4_0, a, o0, o1, AMXBF_KS);
}

/* The K-quants (amx_bf16_kq.h's tiles; AMXBF_KC a multiple of 256). */
static_assert(AMXBF_KS % 8 == 0, "K chunks of whole super-blocks");
AMXKQ_GEMMS(q4_k, DTYPE_Q4_K)
AMXKQ_GEMMS(q5_k, DTYPE_Q5_K)
AMXKQ_GEMMS(q6_k, DTYPE_Q6_K)

/* F16 / BF16 weights as split products (amx_bf16_fx.h); rows past the
 * last 16 and the fallback run the avx512 level's float GEMM. */
void kern_amxbf_gemm_f16(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amxbf__gemm(DTYPE_F16, kern_avx512_gemm_f16, a, o0, o1, AMXBF_KS);
}

void kern_amxbf_gemm_bf16(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amxbf__gemm(DTYPE_BF16, kern_avx512_gemm_bf16, a, o0, o1, AMXBF_KS);
}

/* ---- start-up self-test ----------------------------------------------------------- */

/* f rounded to bf16 (nearest even) and back: the tiles' operands. */
static float amxbf__round(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/*
 * The bf16 GEMM on each type at a size that crosses its boundaries (152
 * rows: a 128-row block of four 32-row groups, then a 16-row group and an
 * int8 row tail of 8; 576 inputs in chunks of AMXBF_ST_KS steps: a first
 * chunk, a middle one and a partial last one, so both kinds of fold; 101
 * tokens: three 32-token groups and a tail of 5) against a float64
 * product of the bf16-rounded operands (within 1e-5 of sum |w x|: the
 * tiles' fp32 sums) and against the avx512 level (within 2^-6 of sum |w|
 * |x|: bf16 against int8 activations). 0 when both hold. The chunk length
 * is the one thing the calls' own (AMXBF_KS) differs in; a shorter one
 * keeps the float64 reference small (the self-test runs at every start).
 */
#define AMXBF_ST_KS 8
/* The K-quants (amx_bf16_kq.h) run this same loop; only their B tiles
 * differ, vector code with no tile instruction, checked bit for bit by
 * tests/test_amx_bf16_kq.c wherever AVX512-BF16 is: not run again at
 * every start. */
int kern_amxbf_selftest(void)
{
	enum { OUT = 152, IN = 2 * AMXBF_ST_KS * AMXBF_STEP + 64, NB = IN / KERN_QK, TOK = 101 };
	const size_t pad = kern_act_groups_pad(NB);
	struct kern_block_q8_0 *w8 = malloc(sizeof(*w8) * OUT * NB);
	struct kern_block_q4_0 *w4 = malloc(sizeof(*w4) * OUT * NB);
	struct kern_block_q8a *x = malloc(sizeof(*x) * TOK * NB);
	float *xf = malloc(sizeof(float) * TOK * IN), *wf = malloc(sizeof(float) * IN);
	float *xr = malloc(sizeof(float) * TOK * IN), *wr = malloc(sizeof(float) * IN);
	float *xd = malloc(sizeof(float) * TOK * pad);
	int32_t *xs8 = malloc(sizeof(int32_t) * TOK * pad);
	float *y1 = malloc(sizeof(float) * TOK * OUT), *y2 = malloc(sizeof(float) * TOK * OUT);
	uint32_t s = 4321;
	int rc = -1;

	if (!w8 || !w4 || !x || !xf || !wf || !xr || !wr || !xd || !xs8 || !y1 || !y2)
		goto out;
	amx_selftest_weights(w8, w4, OUT * NB, &s);
	for (size_t i = 0; i < TOK * IN; i++)
		xf[i] = ((float)(amx_selftest_rand(&s) % 20001) - 10000.0f) * 1e-4f;
	for (size_t i = 0; i < TOK * IN; i++)
		xr[i] = amxbf__round(xf[i]);
	for (size_t k = 0; k < TOK; k++) {
		kern_ops_ref.quantize_act(xf + k * IN, x + k * NB, IN);
		kern_act_summarize(x + k * NB, NB, xd + k * pad, xs8 + k * pad);
	}
	for (int ti = 0; ti < 2; ti++) {
		const uint32_t wt = ti ? DTYPE_Q4_0 : DTYPE_Q8_0;
		const size_t row = (size_t)dtype_row_size(wt, IN);
		const char *w = ti ? (const char *)w4 : (const char *)w8;
		struct kern_gemm_args a = {
			.w = w, .w_stride = row, .n_in = IN, .x = x,
			.x_stride = NB * sizeof(struct kern_block_q8a), .n_tok = TOK, .y = y1,
			.y_stride = OUT, .xd = xd, .xs8 = xs8, .xd_stride = pad,
			.xf = xf, .xf_stride = IN,
		};
		amxbf__gemm(wt, ti ? AMXBF_INT8_Q4_0 : AMXBF_INT8_Q8_0, &a, 0, OUT, AMXBF_ST_KS);
		a.y = y2;
		(ti ? kern_avx512_gemm_q4_0 : kern_avx512_gemm_q8_0)(&a, 0, OUT);
		for (size_t o = 0; o < OUT; o++) {
			if (kern_dequantize_row(wt, w + o * row, wf, IN) != 0)
				goto out;
			for (size_t j = 0; j < IN; j++)
				wr[j] = amxbf__round(wf[j]);
			for (size_t k = 0; k < TOK; k++) {
				const float *xk = xf + k * IN, *xkr = xr + k * IN;
				const double got = y1[k * OUT + o];
				double r = 0, sa = 0;

				for (size_t j = 0; j < IN; j++) {
					r += (double)wr[j] * xkr[j];
					sa += fabs((double)wf[j] * xk[j]);
				}
				/* rows past the last 16 ran int8: the
				 * looser bound only */
				if ((o < OUT / 16 * 16 && fabs(got - r) > 1e-5 * sa + 1e-30) ||
				    fabs(got - y2[k * OUT + o]) > 0x1p-6 * sa)
					goto out;
			}
		}
	}
	rc = 0;
out:
	free(w8);
	free(w4);
	free(x);
	free(xf);
	free(wf);
	free(xr);
	free(wr);
	free(xd);
	free(xs8);
	free(y1);
	free(y2);
	return rc;
}

int kern_amxbf_enable(char *why, size_t len)
{
	static const char *const offon[] = {"0", "1"};
	size_t on = 1;

	kern_amxbf_on = 0;
	/* On by default: prompt rows only (kern_matmul_n_split), so what a
	 * sequence samples never depends on its batch or on the prefix
	 * cache; EMBER_AMX_BF16=0 keeps every row on the int8 path (and
	 * skips the self-test). */
	snprintf(amxbf__desc, sizeof(amxbf__desc),
		 "q8_0/q4_0 prefill: int8 tiles (bf16 off: EMBER_AMX_BF16=0)");
	env_choice("EMBER_AMX_BF16", offon, 2, &on);
	if (!on) {
		snprintf(why, len, "off (EMBER_AMX_BF16=0)");
		return 1;
	}
	if (kern_amxbf_selftest() != 0 ||
	    amxfx_selftest(kern_amxbf_gemm_f16, kern_amxbf_gemm_bf16) != 0) {
		snprintf(amxbf__desc, sizeof(amxbf__desc),
			 "q8_0/q4_0 prefill: int8 tiles (bf16 off: its self-test failed)");
		snprintf(why, len, "off: the bf16 self-test failed its bounds");
		return -1;
	}
	kern_amxbf_on = 1;
	snprintf(amxbf__desc, sizeof(amxbf__desc),
		 "q8_0/q4_0/q4_k/q5_k/q6_k prefill: bf16 tiles on prompt rows (weights and "
		 "activations rounded to bf16, fp32 sums), int8 tiles on sampled rows (k-quants: "
		 "avx512 vnni; EMBER_AMX_BF16=0: all rows)");
	snprintf(why, len, "on");
	return 0;
}
#endif
