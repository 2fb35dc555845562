/*
 * amx_tile_model.h - a software model of the AMX tile registers and the
 * instructions Ember's AMX kernels use, for tests that #include a kernel
 * file after this header (test_amx_model.c, test_amx_bf16.c): its
 * _tile_* intrinsics become calls into this model, so the kernel's
 * blocking runs on any CPU with its other instructions (AVX-512).
 *
 * As the ISA reference states them: LDTILECFG palette 1 (rows and bytes
 * per row of tiles 0-7), TILELOADD / TILESTORED (rows x colsb bytes,
 * stride apart), TILEZERO, TDPBSSD (C[m][n] += sum over k of the signed
 * bytes A[m][4k+i] * B[k][4n+i]) and TDPBF16PS (C[m][n] fp32 += for each
 * k in order A[m][2k] * B[k][2n], then A[m][2k+1] * B[k][2n+1], bf16
 * operands widened to fp32, each sum rounded to nearest even, denormal
 * operands and results as zero). Tiles are per thread (pool workers run
 * their own calls); model_ok drops to 0 on any shape the ISA forbids.
 */
#ifndef EMBER_TEST_AMX_TILE_MODEL_H
#define EMBER_TEST_AMX_TILE_MODEL_H

#include <immintrin.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#undef _tile_loadd
#undef _tile_stream_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbssd
#undef _tile_dpbf16ps
#undef _tile_loadconfig
#undef _tile_release

struct model_tile {
	int rows, colsb;
	uint8_t d[16][64];
};
static _Thread_local struct model_tile tm_t[8];
static _Atomic int model_ok = 1;
static _Atomic long model_products;
static _Atomic long model_bf16_products; /* of them TDPBF16PS */
/* The kernels' work memory (their AMX_ALLOC / AMXBF_ALLOC hooks): the
 * next model_alloc_fails allocations fail, to test the fallbacks. */
static _Atomic int model_alloc_fails;

static inline void *model_alloc(size_t n)
{
	if (model_alloc_fails > 0) {
		model_alloc_fails--;
		return NULL;
	}
	return aligned_alloc(64, n);
}

static inline void tm_config(const void *cfg)
{
	const uint8_t *c = cfg;

	model_ok &= c[0] == 1;
	for (int i = 0; i < 8; i++) {
		uint16_t cb;

		memcpy(&cb, c + 16 + 2 * i, sizeof(cb));
		tm_t[i].colsb = cb;
		tm_t[i].rows = c[48 + i];
		model_ok &= cb <= 64 && c[48 + i] <= 16;
	}
}

static inline void tm_load(int t, const void *base, long stride)
{
	for (int r = 0; r < tm_t[t].rows; r++)
		memcpy(tm_t[t].d[r], (const char *)base + r * stride, (size_t)tm_t[t].colsb);
}

static inline void tm_store(int t, void *base, long stride)
{
	for (int r = 0; r < tm_t[t].rows; r++)
		memcpy((char *)base + r * stride, tm_t[t].d[r], (size_t)tm_t[t].colsb);
}

static inline void tm_zero(int t)
{
	memset(tm_t[t].d, 0, sizeof(tm_t[t].d));
}

static inline void tm_dpbssd(int c, int a, int b)
{
	struct model_tile *C = &tm_t[c], *A = &tm_t[a], *B = &tm_t[b];

	model_ok &= A->colsb == B->rows * 4 && C->rows == A->rows && C->colsb == B->colsb;
	model_products++;
	for (int m = 0; m < C->rows; m++)
		for (int n = 0; n < C->colsb / 4; n++) {
			int32_t acc;

			memcpy(&acc, &C->d[m][4 * n], sizeof(acc));
			for (int k = 0; k < A->colsb / 4; k++)
				for (int i = 0; i < 4; i++)
					acc += (int32_t)(int8_t)A->d[m][4 * k + i] *
					       (int32_t)(int8_t)B->d[k][4 * n + i];
			memcpy(&C->d[m][4 * n], &acc, sizeof(acc));
		}
}

/* f with a denormal as a zero of its sign: TDPBF16PS's DAZ and FTZ. */
static inline float tm_daz(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7f800000u) == 0)
		u &= 0x80000000u;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* The bf16 at p widened to fp32. */
static inline float tm_bf16(const uint8_t *p)
{
	uint16_t h;
	uint32_t u;
	float f;

	memcpy(&h, p, sizeof(h));
	u = (uint32_t)h << 16;
	memcpy(&f, &u, sizeof(f));
	return tm_daz(f);
}

static inline void tm_dpbf16ps(int c, int a, int b)
{
	struct model_tile *C = &tm_t[c], *A = &tm_t[a], *B = &tm_t[b];

	model_ok &= A->colsb == B->rows * 4 && C->rows == A->rows && C->colsb == B->colsb;
	model_products++;
	model_bf16_products++;
	for (int m = 0; m < C->rows; m++)
		for (int n = 0; n < C->colsb / 4; n++) {
			float acc;

			memcpy(&acc, &C->d[m][4 * n], sizeof(acc));
			for (int k = 0; k < A->colsb / 4; k++)
				for (int i = 0; i < 2; i++) {
					/* bf16 x bf16 is exact in fp32: one rounding, the sum */
					const float p = tm_bf16(&A->d[m][4 * k + 2 * i]) *
							tm_bf16(&B->d[k][4 * n + 2 * i]);
					acc = tm_daz(tm_daz(acc) + p);
				}
			memcpy(&C->d[m][4 * n], &acc, sizeof(acc));
		}
}

#define _tile_loadd(t, b, s) tm_load(t, b, s)
/* TILELOADDT1: the same load with a cache hint */
#define _tile_stream_loadd(t, b, s) tm_load(t, b, s)
#define _tile_stored(t, b, s) tm_store(t, b, s)
#define _tile_zero(t) tm_zero(t)
#define _tile_dpbssd(c, a, b) tm_dpbssd(c, a, b)
#define _tile_dpbf16ps(c, a, b) tm_dpbf16ps(c, a, b)
#define _tile_loadconfig(p) tm_config(p)
#define _tile_release() ((void)0)

#endif
