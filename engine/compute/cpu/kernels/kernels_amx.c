/*
 * kernels_amx.c - the AMX level: Q8_0 and Q4_0 GEMMs of 16 or more tokens
 * on AMX int8 tiles (TDPBSSD), everything else from the AVX-512 level.
 *
 * Chosen by default where CPUID (AMX-TILE/INT8, and AVX-512 below it),
 * XCR0 (tile state), the kernel's permission (arch_prctl
 * ARCH_REQ_XCOMP_PERM for the tile data) and a start-up self-test against
 * the AVX-512 level (bit for bit, kern_amx_enable()) all agree; otherwise
 * Ember says why once and runs avx512. EMBER_CPU=avx512 caps it.
 * Run on an Intel Xeon (family 6 model 207, Emerald Rapids) on
 * 2026-11-27: the unit tests and the self-test pass there, and it is the
 * faster level for these GEMMs (LEVELS.md has the figures and the
 * profile); tests/test_amx_model.c runs this file's blocking on a
 * software model of the tiles wherever AVX-512 exists, CI included.
 *
 * Per 16 weight rows x 16 tokens and 32-element block b:
 *   A (tmm4/5): the 16 tokens' activation bytes of block b, 32 a row,
 *               repacked once per pass so a tile is 8 whole cache lines;
 *   B (tmm6/7): 8 rows of 64 bytes: row c holds elements 4c..4c+3 of the
 *               16 weight rows, as signed bytes (Q4_0: nibble - 8), built
 *               by the VNNI tiles' transposition (qvnni_avx512.h) once per
 *               pass, row group and panel of AMX_KC blocks;
 *   C (tmm0-3): zeroed, += A.B: C[token][row] = the block's exact int32
 *               dot; four blocks in flight.
 * Each block's C is stored and each token's row of 16 int32 (one lane per
 * weight row) goes through acc = fma(float(S), dw * dx, acc), the VNNI and
 * AVX2 levels' instruction for that block, with the 16 accumulators in
 * registers: the results are bit-identical to theirs, so decode (one
 * token) and prefill agree and the self-test can demand equality. The
 * per-block scales are why C must leave the tiles every block (one
 * TILESTORED per 8,192 products): that store and the float step bound
 * this level (LEVELS.md).
 *
 * Tiles are configured by each call (LDTILECFG; every pool worker runs
 * its own calls) and released at its end. Row tails (n_out % 16) and
 * token tails (n_tok % 16) go to the AVX-512 level. Each call allocates
 * its work memory (panel and repacked activations, 293 KiB) and frees it:
 * a call is a pool item of a prefill GEMM (16+ tokens, never a decode
 * step), milliseconds of tile work against one malloc that glibc's
 * dynamic mmap threshold serves from the heap after the first free.
 * Without it the call runs at the AVX-512 level, the same bits
 * (test_amx_model.c fails the allocation to check).
 *
 * Numbers by token purpose, not by call size (issue 17): a call's tokens
 * [n_exact, n_tok), prompt rows (kern_matmul_n_split; forward.c lays
 * the sampled rows first), run the bf16 tiles of kernels_amx_bf16.c
 * where they are on (by default; EMBER_AMX_BF16=0 and a failed self-test
 * turn them off) and the call has float activations; tokens [0,
 * n_exact), the rows whose logits are sampled, run the int8 path here,
 * each share a call of its own over the same rows (amx__split). So a
 * decode row is decode's bits whatever shares its step, and a prompt's
 * last token the same in its chunk as alone after a prefix-cache hit
 * (kern_amx_gemm_*; kern_amx_i8_gemm_* are the int8 path alone).
 *
 * K-quants (Q4_K, Q5_K, Q6_K; kq15): prompt rows on the bf16 tiles
 * (amx_bf16_kq.h), sampled rows and the GEMV the avx512 level's VNNI
 * code, packed as that level packs them (kern_amx_gemm_q4_k ...).
 *
 * F16 / BF16 (amx__gemm_f16 / _bf16): the same split by purpose, prompt
 * rows as split bf16 products (amx_bf16_fx.h), sampled rows (and the
 * GEMV) the avx512 level's float GEMM, bit for bit.
 *
 * Packed rows (KERN_PACKED, at load): the amx level packs Q4_0 / Q8_0 as
 * the avx512 level does and runs its packed GEMV / GEMM (kern_amx_pgemm_*:
 * the bf16 tiles on the tiled rows where they take the call); the int8
 * tiles here read the file layout only, so they run on unpacked matrices.
 *
 * Thread safety: kern_amx_enable() runs once under kern_init()'s
 * pthread_once; the gemm functions are pure.
 */
#if defined(__x86_64__)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "amx_selftest.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "quants.h"
#include "qvnni_avx512.h"

/* Tokens per A and C tile; tokens per pass (the pass's activations,
 * AMX_TB x AMX_KC blocks of 36 bytes = 295 KiB, stay in the 2 MiB L2
 * while every row group of the call reads them); blocks per panel (the
 * panel's B tiles and scales, 36 KiB, stay in L1 while every token group
 * of the pass reads them). */
#define AMX_TOK 16
#ifndef AMX_TB /* -D for tuning runs (bench) */
#define AMX_TB 128
#endif
#ifndef AMX_KC
#define AMX_KC 64
#endif
#define AMX_ARCH_GET_XCOMP_PERM 0x1022
#define AMX_ARCH_REQ_XCOMP_PERM 0x1023
#define AMX_XFEATURE_XTILEDATA 18

/* A call's work memory (64-byte aligned; tests make it fail on demand,
 * test_amx_model.c, to check the fallback's bits). */
#ifndef AMX_ALLOC
#define AMX_ALLOC(n) aligned_alloc(64, (n))
#endif

/* LDTILECFG's 64-byte operand, palette 1. */
struct amx_cfg {
	uint8_t palette;
	uint8_t start_row;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};
static_assert(sizeof(struct amx_cfg) == 64, "tile configuration is 64 bytes");

/* 16 weight rows x AMX_KC blocks, unpacked once per pass and row group:
 * block i's B tile (8 rows of 64 bytes) and its 16 rows' scales. */
struct amx_panel {
	__m512i bt[AMX_KC][KERN_QK / 4];
	__m512 dw[AMX_KC];
};

/* Tiles 0-3: C (16 tokens x 16 int32), four blocks in flight; 4, 5: A
 * (16 tokens x 32 bytes); 6, 7: B (8 x 64 bytes). */
static const struct amx_cfg amx__cfg = {
	.palette = 1,
	.colsb = {64, 64, 64, 64, KERN_QK, KERN_QK, 64, 64},
	.rows = {AMX_TOK, AMX_TOK, AMX_TOK, AMX_TOK, AMX_TOK, AMX_TOK, KERN_QK / 4, KERN_QK / 4},
};

/* A constant table, as kernels_impl.h's kern_amx_cfg_bf16 says why. */
static void amx__configure(void)
{
	_tile_loadconfig(&amx__cfg);
}

/* Blocks [b0, b0 + n) of the 16 rows at w into p. */
static void amx__panel(uint32_t wt, const char *w, size_t st, size_t b0, size_t n,
		       struct amx_panel *p)
{
	const size_t bs = wt == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0)
					   : sizeof(struct kern_block_q4_0);

	for (size_t i = 0; i < n; i++) {
		__m512i u[8];

		p->dw[i] = qv__scales(w, st, b0 + i, bs);
		qv__unpack(wt, w, st, b0 + i, 1, u);
		for (int c = 0; c < 8; c++)
			_mm512_store_si512(&p->bt[i][c], u[c]);
	}
}

/* One block's 16x16 exact dots c into the 16 tokens' accumulators: the
 * AVX-512 level's instruction for a block, acc = fma(S, dw * dx, acc),
 * so the sums stay bit-identical. xd: the tokens' scale of this block. */
#define AMX_SCALE(acc, c, dw, xd, xds)                                                        \
	do {                                                                                  \
		QV_UNROLL                                                                     \
		for (int k_ = 0; k_ < AMX_TOK; k_++)                                          \
			(acc)[k_] = _mm512_fmadd_ps(                                          \
				_mm512_cvtepi32_ps(_mm512_load_si512((c)[k_])),               \
				_mm512_mul_ps((dw), _mm512_set1_ps((xd)[k_ * (xds)])),        \
				(acc)[k_]);                                                   \
	} while (0)

/* Rows [o, o + 16) of tokens [t, t + 16) over the panel's n blocks,
 * starting at block b0, A tiles from the repacked xa: first panel from
 * zero, later ones from y. */
static void amx__group(const struct kern_gemm_args *a, const struct amx_panel *p, size_t n,
		       size_t b0, size_t o, size_t t, const int8_t *xa)
{
	const int8_t *xq = xa; /* block i's A tile at xq + i * qb, rows xs apart */
	const size_t qb = AMX_TOK * KERN_QK;
	const long xs = KERN_QK;
	const float *xd = a->xd + t * a->xd_stride + b0;
	const size_t xds = a->xd_stride;
	float *y = a->y + t * a->y_stride + o;
	int32_t c[4][AMX_TOK][QV_ROWS] __attribute__((aligned(64)));
	__m512 acc[AMX_TOK];
	size_t i = 0;

	QV_UNROLL
	for (int k = 0; k < AMX_TOK; k++)
		acc[k] = b0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(y + k * a->y_stride);
	/* Four blocks' tile products, then their four float steps in block
	 * order: the next four's tile loads and products overlap the steps. */
	for (; i + 4 <= n; i += 4) {
		_tile_zero(0);
		_tile_loadd(4, xq + i * qb, xs);
		_tile_loadd(6, p->bt[i], 64);
		_tile_dpbssd(0, 4, 6);
		_tile_zero(1);
		_tile_loadd(5, xq + (i + 1) * qb, xs);
		_tile_loadd(7, p->bt[i + 1], 64);
		_tile_dpbssd(1, 5, 7);
		_tile_zero(2);
		_tile_loadd(4, xq + (i + 2) * qb, xs);
		_tile_loadd(6, p->bt[i + 2], 64);
		_tile_dpbssd(2, 4, 6);
		_tile_zero(3);
		_tile_loadd(5, xq + (i + 3) * qb, xs);
		_tile_loadd(7, p->bt[i + 3], 64);
		_tile_dpbssd(3, 5, 7);
		_tile_stored(0, c[0], 64);
		_tile_stored(1, c[1], 64);
		_tile_stored(2, c[2], 64);
		_tile_stored(3, c[3], 64);
		AMX_SCALE(acc, c[0], p->dw[i], xd + i, xds);
		AMX_SCALE(acc, c[1], p->dw[i + 1], xd + i + 1, xds);
		AMX_SCALE(acc, c[2], p->dw[i + 2], xd + i + 2, xds);
		AMX_SCALE(acc, c[3], p->dw[i + 3], xd + i + 3, xds);
	}
	for (; i < n; i++) {
		_tile_zero(0);
		_tile_loadd(4, xq + i * qb, xs);
		_tile_loadd(6, p->bt[i], 64);
		_tile_dpbssd(0, 4, 6);
		_tile_stored(0, c[0], 64);
		AMX_SCALE(acc, c[0], p->dw[i], xd + i, xds);
	}
	QV_UNROLL
	for (int k = 0; k < AMX_TOK; k++)
		_mm512_storeu_ps(y + k * a->y_stride, acc[k]);
}

/* The pass's activation bytes of blocks [b0, b0 + n), tile by tile:
 * token group g's block i at xa[g][i], 16 rows of 32 bytes, so an A
 * tile is 8 whole cache lines (in the activation rows a block's 32 bytes
 * sit 36 apart and every other one straddles two lines). */
static void amx__repack(const struct kern_gemm_args *a, size_t t0, size_t t1, size_t b0, size_t n,
			int8_t (*xa)[AMX_KC][AMX_TOK][KERN_QK])
{
	for (size_t t = t0; t < t1; t++) {
		const char *row = (const char *)a->x + t * a->x_stride + b0 * sizeof(struct kern_block_q8a) +
				  offsetof(struct kern_block_q8a, qs);
		const size_t g = (t - t0) / AMX_TOK, k = (t - t0) % AMX_TOK;

		for (size_t i = 0; i < n; i++)
			_mm256_store_si256((__m256i *)xa[g][i][k],
					   _mm256_loadu_si256((const __m256i *)(row + i * sizeof(struct kern_block_q8a))));
	}
}

/* Per pass of AMX_TB tokens and panel of AMX_KC blocks: the activations
 * repacked once, then per 16-row group the panel unpacked once and run by
 * every 16-token group of the pass. Work memory (293 KiB) is the call's
 * own; if it cannot be had, the AVX-512 level does the call. */
static void amx__gemm(uint32_t wt, kern_gemm_fn vnni, const struct kern_gemm_args *a, size_t o0,
		      size_t o1)
{
	const size_t full = a->n_tok / AMX_TOK * AMX_TOK, nb = a->n_in / KERN_QK;
	const size_t rows = (o1 - o0) / QV_ROWS * QV_ROWS, o_end = o0 + rows;
	struct amx_work {
		struct amx_panel panel;
		int8_t xa[AMX_TB / AMX_TOK][AMX_KC][AMX_TOK][KERN_QK];
	} *m;

	if (full == 0 || rows == 0 || !(m = AMX_ALLOC(sizeof(*m)))) {
		vnni(a, o0, o1);
		return;
	}
	amx__configure();
	for (size_t tb = 0; tb < full; tb += AMX_TB) {
		const size_t te = tb + AMX_TB < full ? tb + AMX_TB : full;

		for (size_t b0 = 0; b0 < nb; b0 += AMX_KC) {
			const size_t n = nb - b0 < AMX_KC ? nb - b0 : AMX_KC;

			amx__repack(a, tb, te, b0, n, m->xa);
			for (size_t o = o0; o < o_end; o += QV_ROWS) {
				amx__panel(wt, (const char *)a->w + o * a->w_stride, a->w_stride, b0, n,
					   &m->panel);
				for (size_t t = tb; t < te; t += AMX_TOK)
					amx__group(a, &m->panel, n, b0, o, t,
						   (const int8_t *)m->xa[(t - tb) / AMX_TOK]);
			}
		}
	}
	_tile_release();
	free(m);
	if (o_end < o1) /* row tail: every token */
		vnni(a, o_end, o1);
	if (full < a->n_tok) { /* token tail of the whole rows */
		struct kern_gemm_args r = *a;
		r.x = (const char *)a->x + full * a->x_stride;
		r.xd = a->xd + full * a->xd_stride;
		r.xs8 = a->xs8 + full * a->xd_stride;
		r.y = a->y + full * a->y_stride;
		r.n_tok = a->n_tok - full;
		vnni(&r, o0, o_end);
	}
}

void kern_amx_i8_gemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amx__gemm(DTYPE_Q8_0, kern_avx512_gemm_q8_0, a, o0, o1);
}

void kern_amx_i8_gemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amx__gemm(DTYPE_Q4_0, kern_avx512_gemm_q4_0, a, o0, o1);
}

/* Whether the bf16 tiles take tokens [n_exact, n_tok) of the call: they
 * are on (kernels_amx_bf16.c), there are such tokens, and the call has
 * their float activations. */
static int amx__bf16(const struct kern_gemm_args *a)
{
	return kern_amxbf_on && (a->xb || a->xf) && a->n_exact < a->n_tok;
}

/* Numbers by token purpose, not by call size: tokens [0, n_exact) on the
 * exact path (int8: decode's bits, whatever else is in the call), the
 * rest on the bf16 tiles as a call of their own over the same rows (the
 * weights still warm), so neither side depends on the other. */
static void amx__split(const struct kern_gemm_args *a, size_t o0, size_t o1, kern_gemm_fn exact,
		       kern_gemm_fn bf16)
{
	const size_t t = a->n_exact;
	struct kern_gemm_args r = *a;

	if (!amx__bf16(a)) {
		kern_act_ensure(a); /* never left unmade then; kept correct anyway */
		exact(a, o0, o1);
		return;
	}
	if (t > 0) {
		r.n_tok = t;
		r.lazy = NULL;
		exact(&r, o0, o1);
	}
	kern_amx_prompt_args(a, &r);
	bf16(&r, o0, o1);
}

void kern_amx_prompt_args(const struct kern_gemm_args *a, struct kern_gemm_args *r)
{
	const size_t t = a->n_exact;

	*r = *a;
	r->x = (const char *)a->x + t * a->x_stride;
	r->xd = a->xd + t * a->xd_stride;
	r->xs8 = a->xs8 + t * a->xd_stride;
	r->xf = a->xf ? a->xf + t * a->xf_stride : NULL;
	r->xk = a->xk ? a->xk + t * (a->n_in / KERN_QKK) : NULL; /* the K-quants' */
	r->y = a->y + t * a->y_stride;
	r->n_tok = a->n_tok - t;
	r->n_exact = 0;
}

void kern_amx_gemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amx__split(a, o0, o1, kern_amx_i8_gemm_q8_0, kern_amxbf_gemm_q8_0);
}

void kern_amx_gemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amx__split(a, o0, o1, kern_amx_i8_gemm_q4_0, kern_amxbf_gemm_q4_0);
}

/* Packed (tiled) rows: the bf16 tiles on their tokens where they are on,
 * the rest exactly the avx512 level's packed GEMM (the int8 tiles read
 * the file layout only). */
void kern_amx_pgemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amx__split(a, o0, o1, kern_avx512_pgemm_q8_0, kern_amxbf_pgemm_q8_0);
}

void kern_amx_pgemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amx__split(a, o0, o1, kern_avx512_pgemm_q4_0, kern_amxbf_pgemm_q4_0);
}

/* The K-quants: prompt rows on the bf16 tiles (amx_bf16_kq.h), sampled
 * rows on the avx512 level's VNNI GEMMs, the GEMV's bits (no int8 tiles:
 * their per-32 scales would need per-16 sums for Q6_K, and the VNNI path
 * already keeps batched equal to single). */
#define AMX_KQ(name, vnni, bf16)                                              \
	void name(const struct kern_gemm_args *a, size_t o0, size_t o1)       \
	{                                                                     \
		amx__split(a, o0, o1, vnni, bf16);                            \
	}
AMX_KQ(kern_amx_gemm_q4_k, kern_avx512_vnni_gemm_q4_k, kern_amxbf_gemm_q4_k)
AMX_KQ(kern_amx_gemm_q5_k, kern_avx512_vnni_gemm_q5_k, kern_amxbf_gemm_q5_k)
AMX_KQ(kern_amx_gemm_q6_k, kern_avx512_vnni_gemm_q6_k, kern_amxbf_gemm_q6_k)
AMX_KQ(kern_amx_pgemm_q4_k, kern_avx512_vnni_pgemm_q4_k, kern_amxbf_pgemm_q4_k)
AMX_KQ(kern_amx_pgemm_q5_k, kern_avx512_vnni_pgemm_q5_k, kern_amxbf_pgemm_q5_k)
AMX_KQ(kern_amx_pgemm_q6_k, kern_avx512_vnni_pgemm_q6_k, kern_amxbf_pgemm_q6_k)

/* F16 / BF16: prompt rows as split products on the bf16 tiles
 * (amx_bf16_fx.h), sampled rows the avx512 level's float GEMM, bit for
 * bit (static: the table is their only caller). */
static void amx__gemm_f16(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amx__split(a, o0, o1, kern_avx512_gemm_f16, kern_amxbf_gemm_f16);
}

static void amx__gemm_bf16(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amx__split(a, o0, o1, kern_avx512_gemm_bf16, kern_amxbf_gemm_bf16);
}

/* The AMX table: only the quantized GEMMs; every other entry, and the
 * one-token GEMV, is the AVX-512 level's (kern_resolve()). Packed rows as
 * the avx512 level packs them (kern_resolve takes a type's packed form
 * from the level of its gemm[]): the same pack_rows, pack_fn and GEMV, so
 * decode on an AMX machine reads the tiled rows too. */
const struct kern_ops kern_ops_amx = {
	.name = "amx",
	.attn_q_bf16 = kern_amx_attn_q_bf16,
	.attn_scores_bf16 = kern_amx_attn_scores_bf16,
	.attn_accum_bf16 = kern_amx_attn_accum_bf16,
	.attn_scores_softmax_bf16 = kern_amx_attn_scores_softmax_bf16,
	.attn_accum_bf16_tiles = kern_amx_attn_accum_bf16_tiles,
	.gemm =
		{
			[DTYPE_Q8_0] = kern_amx_gemm_q8_0,
			[DTYPE_Q4_0] = kern_amx_gemm_q4_0,
			[DTYPE_Q4_K] = kern_amx_gemm_q4_k,
			[DTYPE_Q5_K] = kern_amx_gemm_q5_k,
			[DTYPE_Q6_K] = kern_amx_gemm_q6_k,
			[DTYPE_F16] = amx__gemm_f16,
			[DTYPE_BF16] = amx__gemm_bf16,
		},
	.gemv =
		{
			[DTYPE_Q8_0] = kern_avx512_gemm_q8_0,
			[DTYPE_Q4_0] = kern_avx512_gemm_q4_0,
			[DTYPE_Q4_K] = kern_avx512_gemv_q4_k,
			[DTYPE_Q5_K] = kern_avx512_gemv_q5_k,
			[DTYPE_Q6_K] = kern_avx512_gemv_q6_k,
			[DTYPE_F16] = kern_avx512_gemm_f16,
			[DTYPE_BF16] = kern_avx512_gemm_bf16,
		},
	.pgemm = {[DTYPE_Q8_0] = kern_amx_pgemm_q8_0, [DTYPE_Q4_0] = kern_amx_pgemm_q4_0,
		  [DTYPE_Q4_K] = kern_amx_pgemm_q4_k, [DTYPE_Q5_K] = kern_amx_pgemm_q5_k,
		  [DTYPE_Q6_K] = kern_amx_pgemm_q6_k},
	.pgemv = {[DTYPE_Q8_0] = kern_avx512_pgemv_q8_0, [DTYPE_Q4_0] = kern_avx512_pgemv_q4_0,
		  [DTYPE_Q4_K] = kern_avx512_pgemv_q4_k, [DTYPE_Q5_K] = kern_avx512_pgemv_q5_k,
		  [DTYPE_Q6_K] = kern_avx512_pgemv_q6_k},
	/* the K-quants packed as the avx512 level packs them (its GEMV) */
	.pack_rows = {[DTYPE_Q8_0] = 16, [DTYPE_Q4_0] = 16, [DTYPE_Q4_K] = KERN_K4L_ROWS, [DTYPE_Q5_K] = 4,
		      [DTYPE_Q6_K] = KERN_Q6L_ROWS},
	.pack_fn = {[DTYPE_Q8_0] = kern_avx512_pack_q8_0, [DTYPE_Q4_0] = kern_avx512_pack_q4_0,
		    [DTYPE_Q4_K] = kern_avx512_pack_q4_k, [DTYPE_Q5_K] = kern_pack_groups16,
		    [DTYPE_Q6_K] = kern_avx512_pack_q6_k},
};

/* ---- start-up: permission and self-test ----------------------------------------- */

/* AMX against the AVX-512 level on each type, at a size that crosses
 * every boundary of amx__gemm: 40 rows (two row groups and a row tail),
 * 131 blocks (two full panels, one of 3: the single-block loop), 147
 * tokens (a full pass, a second pass of one group, a token tail of 3):
 * 0 when every output is bit-identical. */
static int amx__selftest(void)
{
	enum { OUT = 40, NB = 2 * AMX_KC + 3, IN = NB * KERN_QK, TOK = AMX_TB + AMX_TOK + 3 };
	const size_t pad = kern_act_groups_pad(NB);
	struct kern_block_q8_0 *w8 = malloc(sizeof(*w8) * OUT * NB);
	struct kern_block_q4_0 *w4 = malloc(sizeof(*w4) * OUT * NB);
	struct kern_block_q8a *x = malloc(sizeof(*x) * TOK * NB);
	float *xd = malloc(sizeof(float) * TOK * pad);
	int32_t *xs8 = malloc(sizeof(int32_t) * TOK * pad);
	float *y1 = malloc(sizeof(float) * TOK * OUT), *y2 = malloc(sizeof(float) * TOK * OUT);
	uint32_t s = 12345;
	int rc = -1;

	if (!w8 || !w4 || !x || !xd || !xs8 || !y1 || !y2)
		goto out;
	amx_selftest_weights(w8, w4, OUT * NB, &s);
	for (size_t i = 0; i < TOK * NB; i++) {
		x[i].d = (float)(amx_selftest_rand(&s) % 1000 + 1) * 1e-3f;
		for (int j = 0; j < KERN_QK; j++)
			x[i].qs[j] = (int8_t)(amx_selftest_rand(&s) % 255 - 127);
	}
	for (size_t k = 0; k < TOK; k++)
		kern_act_summarize(x + k * NB, NB, xd + k * pad, xs8 + k * pad);
	for (int ti = 0; ti < 2; ti++) {
		const uint32_t wt = ti ? DTYPE_Q4_0 : DTYPE_Q8_0;
		struct kern_gemm_args a = {
			.w = ti ? (const void *)w4 : (const void *)w8,
			.w_stride = (size_t)dtype_row_size(wt, IN),
			.n_in = IN,
			.x = x,
			.x_stride = NB * sizeof(struct kern_block_q8a),
			.n_tok = TOK,
			.y = y1,
			.y_stride = OUT,
			.xd = xd,
			.xs8 = xs8,
			.xd_stride = pad,
		};
		(ti ? kern_amx_gemm_q4_0 : kern_amx_gemm_q8_0)(&a, 0, OUT);
		a.y = y2;
		(ti ? kern_avx512_gemm_q4_0 : kern_avx512_gemm_q8_0)(&a, 0, OUT);
		if (memcmp(y1, y2, sizeof(float) * TOK * OUT) != 0)
			goto out;
	}
	rc = 0;
out:
	free(w8);
	free(w4);
	free(x);
	free(xd);
	free(xs8);
	free(y1);
	free(y2);
	return rc;
}

int kern_amx_enable(char *why, size_t len)
{
	unsigned long bits = 0;

	if (syscall(SYS_arch_prctl, AMX_ARCH_REQ_XCOMP_PERM, AMX_XFEATURE_XTILEDATA) != 0 ||
	    syscall(SYS_arch_prctl, AMX_ARCH_GET_XCOMP_PERM, &bits) != 0 ||
	    !(bits & (1ul << AMX_XFEATURE_XTILEDATA))) {
		snprintf(why, len, "the kernel refused AMX tile data (arch_prctl)");
		return -1;
	}
	if (amx__selftest() != 0) {
		snprintf(why, len, "the AMX self-test differed from the avx512 level");
		return -1;
	}
	/* the bf16 prompt rows on top, or said once why not (int8 stays)
	 * unless EMBER_AMX_BF16=0 asked for that (1) */
	if (kern_amxbf_enable(why, len) < 0)
		fprintf(stderr, "ember: amx bf16 prefill %s; int8 tiles\n", why);
	return 0;
}
#endif
