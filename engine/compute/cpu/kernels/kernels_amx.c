/*
 * kernels_amx.c - the AMX level: Q8_0 and Q4_0 prefill (16 or more tokens)
 * on AMX int8 tiles (TDPBSSD), everything else from the AVX-512 level.
 *
 * UNTESTED ON HARDWARE: written on a Zen 4 (no AMX). It is therefore off
 * unless asked for by name (EMBER_CPU=amx), and even then only where
 * CPUID, XCR0 and the kernel's permission (arch_prctl
 * ARCH_REQ_XCOMP_PERM for the tile data) all allow it, and where a
 * self-test at start-up finds its results bit-identical to the AVX-512
 * level's (kern_amx_enable()); otherwise Ember logs why once and runs
 * avx512.
 *
 * Per 16 weight rows x 16 tokens and 32-element block b:
 *   A (tmm1): the 16 tokens' activation bytes of block b, 32 a row,
 *             loaded straight from the quantized activation rows (stride
 *             x_stride);
 *   B (tmm2): 8 rows of 64 bytes: row c holds elements 4c..4c+3 of the 16
 *             weight rows, as signed bytes (Q4_0: nibble - 8), built by the
 *             VNNI tiles' transposition (qvnni_avx512.h) and stored once;
 *   C (tmm0): zeroed, += A.B: C[token][row] = the block's exact int32 dot.
 * C is stored and each token's row of 16 int32 (one lane per weight row)
 * goes through acc = fma(float(S), dw * dx, acc), the VNNI and AVX2
 * levels' instruction for that block: the results are bit-identical to
 * theirs, so decode (one token, AVX2 GEMV) and prefill agree and the
 * self-test can demand equality.
 *
 * Tiles are configured by each call (LDTILECFG; every pool worker runs
 * its own calls) and released at its end. Row tails (n_out % 16) and
 * token tails (n_tok % 16) go to the AVX-512 level.
 *
 * Thread safety: kern_amx_enable() runs once under kern_init()'s
 * pthread_once; the gemm functions are pure.
 */
#if defined(__x86_64__)
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels.h"
#include "kernels_impl.h"
#include "qvnni_avx512.h"

#define AMX_TOK 16
#define AMX_ARCH_GET_XCOMP_PERM 0x1022
#define AMX_ARCH_REQ_XCOMP_PERM 0x1023
#define AMX_XFEATURE_XTILEDATA 18

/* LDTILECFG's 64-byte operand, palette 1. */
struct amx_cfg {
	uint8_t palette;
	uint8_t start_row;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};
static_assert(sizeof(struct amx_cfg) == 64, "tile configuration is 64 bytes");

static void amx__configure(void)
{
	struct amx_cfg cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.palette = 1;
	cfg.rows[0] = AMX_TOK; /* C: 16 tokens x 16 int32 */
	cfg.colsb[0] = 64;
	cfg.rows[1] = AMX_TOK; /* A: 16 tokens x 32 bytes */
	cfg.colsb[1] = KERN_QK;
	cfg.rows[2] = KERN_QK / 4; /* B: 8 x (16 rows x 4 bytes) */
	cfg.colsb[2] = 64;
	_tile_loadconfig(&cfg);
}

/* Rows [o, o + 16) for tokens [t, t + 16). */
static void amx__tile(uint32_t wt, const struct kern_gemm_args *a, size_t o, size_t t)
{
	const size_t bs = wt == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0)
					   : sizeof(struct kern_block_q4_0);
	const size_t nb = a->n_in / KERN_QK, st = a->w_stride;
	const char *w = (const char *)a->w + o * st;
	const char *x = (const char *)a->x + t * a->x_stride;
	int32_t c[AMX_TOK][QV_ROWS] __attribute__((aligned(64)));
	__m512i bt[KERN_QK / 4] __attribute__((aligned(64)));
	__m512 acc[AMX_TOK];

	for (int k = 0; k < AMX_TOK; k++)
		acc[k] = _mm512_setzero_ps();
	for (size_t b = 0; b < nb; b++) {
		const __m512 dw = qv__scales(w, st, b, bs);
		__m512i u[8];

		qv__unpack(wt, w, st, b, 1, u);
		for (int i = 0; i < 8; i++)
			_mm512_store_si512(&bt[i], u[i]);
		_tile_zero(0);
		_tile_loadd(1, x + b * sizeof(struct kern_block_q8a) +
				       offsetof(struct kern_block_q8a, qs),
			    (long)a->x_stride);
		_tile_loadd(2, bt, 64);
		_tile_dpbssd(0, 1, 2);
		_tile_stored(0, c, 64);
		for (int k = 0; k < AMX_TOK; k++) {
			const float xd = a->xd[(t + k) * a->xd_stride + b];
			acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[k])),
						 _mm512_mul_ps(dw, _mm512_set1_ps(xd)), acc[k]);
		}
	}
	for (int k = 0; k < AMX_TOK; k++)
		_mm512_storeu_ps(a->y + (t + k) * a->y_stride + o, acc[k]);
}

static void amx__gemm(uint32_t wt, kern_gemm_fn vnni, const struct kern_gemm_args *a, size_t o0,
		      size_t o1)
{
	const size_t full = a->n_tok / AMX_TOK * AMX_TOK;
	size_t o = o0;

	if (full == 0) {
		vnni(a, o0, o1);
		return;
	}
	amx__configure();
	for (; o + QV_ROWS <= o1; o += QV_ROWS)
		for (size_t t = 0; t < full; t += AMX_TOK)
			amx__tile(wt, a, o, t);
	_tile_release();
	if (o < o1) { /* row tail: every token */
		vnni(a, o, o1);
	}
	if (full < a->n_tok && o > o0) { /* token tail of the whole rows */
		struct kern_gemm_args r = *a;
		r.x = (const char *)a->x + full * a->x_stride;
		r.xd = a->xd + full * a->xd_stride;
		r.xs8 = a->xs8 + full * a->xd_stride;
		r.y = a->y + full * a->y_stride;
		r.n_tok = a->n_tok - full;
		vnni(&r, o0, o);
	}
}

void kern_amx_gemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amx__gemm(DTYPE_Q8_0, kern_avx512_gemm_q8_0, a, o0, o1);
}

void kern_amx_gemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	amx__gemm(DTYPE_Q4_0, kern_avx512_gemm_q4_0, a, o0, o1);
}

/* The AMX table: only the quantized GEMMs; every other entry, and the
 * one-token GEMV, is the AVX-512 level's (kern_resolve()). */
const struct kern_ops kern_ops_amx = {
	.name = "amx",
	.gemm =
		{
			[DTYPE_Q8_0] = kern_amx_gemm_q8_0,
			[DTYPE_Q4_0] = kern_amx_gemm_q4_0,
		},
	.gemv =
		{
			[DTYPE_Q8_0] = kern_avx512_gemm_q8_0,
			[DTYPE_Q4_0] = kern_avx512_gemm_q4_0,
		},
};

/* ---- start-up: permission and self-test ----------------------------------------- */

static uint32_t amx__rand(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

/* AMX against the AVX-512 level on 32 rows x 96 inputs x 19 tokens of
 * each type (a row tail-free tile pair, one full token tile and a tail):
 * 0 when every output is bit-identical. */
static int amx__selftest(void)
{
	enum { OUT = 32, IN = 96, TOK = 19, NB = IN / KERN_QK };
	static struct kern_block_q8_0 w8[OUT * NB];
	static struct kern_block_q4_0 w4[OUT * NB];
	static struct kern_block_q8a x[TOK * NB];
	static float xd[TOK * KERN_GROUP * ((NB + KERN_GROUP - 1) / KERN_GROUP)];
	static int32_t xs8[TOK * KERN_GROUP * ((NB + KERN_GROUP - 1) / KERN_GROUP)];
	static float y1[TOK * OUT], y2[TOK * OUT];
	const size_t pad = kern_act_groups_pad(NB);
	uint32_t s = 12345;

	for (size_t i = 0; i < OUT * NB; i++) {
		w8[i].d = w4[i].d = kern_fp32_to_fp16((float)(amx__rand(&s) % 1000 + 1) * 1e-4f);
		for (int j = 0; j < KERN_QK; j++)
			w8[i].qs[j] = (int8_t)(amx__rand(&s) % 255 - 127);
		for (int j = 0; j < KERN_QK / 2; j++)
			w4[i].qs[j] = (uint8_t)amx__rand(&s);
	}
	for (size_t i = 0; i < TOK * NB; i++) {
		x[i].d = (float)(amx__rand(&s) % 1000 + 1) * 1e-3f;
		for (int j = 0; j < KERN_QK; j++)
			x[i].qs[j] = (int8_t)(amx__rand(&s) % 255 - 127);
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
		if (memcmp(y1, y2, sizeof(y1)) != 0)
			return -1;
	}
	return 0;
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
	return 0;
}
#endif
