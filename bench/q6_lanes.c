/*
 * q6_lanes.c - LAYOUT STUDY, NOT USED BY THE ENGINE (twenty-first session,
 * branch q6l21; LEVELS.md "Q6_K rows in dword lanes: a layout study").
 *
 * What a packed Q6_K layout with rows in dword lanes would give the 1-8
 * token tile, measured on a throwaway kernel: 16 rows a ZMM, a row's 4
 * consecutive weights in each dword lane, so each token's activation dword
 * is a free {1to16} embedded broadcast in VPDPBUSD and a row's sum never
 * needs a horizontal reduction (kquants_q6p_avx512.c has a row per 128-bit
 * lane and reduces 4 sub-block dwords per row).
 *
 * Layout (struct lanes_sb, one per 16 rows x super-block, 3360 bytes =
 * 16 x 210, the file's bits permuted; -DLANES_PAD=1: d as float, 3392
 * bytes, every block 64-byte aligned): per
 * sub-block s of 16 elements the four value vectors V0..V3 (lane r byte k
 * = q(row r, element 16 s + 4 j + k), q = 0..63 unbiased) in three ZMM:
 * X = V0 | (V3 & 3) << 6, Y = V1 | (V3 & 12) << 4, Z = V2 | (V3 & 48) << 2
 * (3 VPANDD for V0..V2; V3 by 3 shifts, 2 VPTERNLOGD selects and a
 * VPANDD); int8 scales [s][r] (VPMOVSXBD once a sub-block for all the
 * tokens); the rows' d (fp16, VCVTPH2PS once a super-block). Activations are the project's Q8_K
 * blocks unchanged (kern_avx512_quantize_act_q8k()), token-major.
 *
 * Per 16 rows x sub-block x token: a chain started from the broadcast
 * -32 x bsum (the bias comes out of the scale multiply for free), 4
 * VPDPBUSD with {1to16} activation dwords, 1 VPMULLD by the scales, 1
 * VPADDD into the token's int32 sum; per super-block and token the float
 * step acc + (d D) isum unfused (VMULPS twice, VCVTDQ2PS, VADDPS), as the
 * engine's reference GEMV does it (gref__step()).
 * Checked bit for bit against the engine's scalar kern_ref_gemv_q8k_q6_k()
 * (the same exact int32 sums and float steps) token by token (so it would keep the contract: a token's result independent of
 * its batch, the GEMV's bits), and against kern_quants_dequantize() times
 * the Q8_K values (float rounding).
 *
 * Build (x86-64 with AVX512-VNNI; not part of `all` or `bench`):
 *   make build/q6_lanes
 * (the padded variant: the same compile line plus -DLANES_PAD=1).
 * Run, one thread pinned:
 *   taskset -c 1 build/q6_lanes [REPS] [N K]...   (default 20; the three
 *   TinyLlama shapes 2048x2048, 5632x2048, 2048x5632), 8, 4, 2 and 1
 *   tokens, 16 rows (groups 1) or 32 rows (groups 2) a pass;
 * prints best / median GFLOP/s (2 N K T flop) of the tile alone and of the
 * tile plus the activations' Q8_K quantization (gemm_q's measure).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && defined(__AVX512VNNI__)
#include <immintrin.h>

#include "bench_util.h"
#include "dtype.h"
#include "kernels_impl.h"
#include "quants.h"

#define QK 256
#define INL static inline __attribute__((always_inline))
#define U8 _Pragma("GCC unroll 8")

/* LANES_PAD=1: d as float, 3392 bytes, every block 64-byte aligned; the
 * default keeps d as the file's fp16 (3360 bytes = 16 x 210, a bit
 * permutation of the file's blocks that could be packed in place and
 * unpacked as kern_avx512_pack_q6_k() is; every other block's ZMM
 * loads then straddle two cache lines). */
#ifndef LANES_PAD
#define LANES_PAD 0
#endif
struct lanes_sb {
	uint8_t v[16][3][64]; /* sub-block s: X, Y, Z */
	int8_t sc[16][16];    /* [sub-block][row] */
#if LANES_PAD
	float d[16];
#else
	uint16_t d[16];
#endif
} __attribute__((packed));
_Static_assert(sizeof(struct lanes_sb) == (LANES_PAD ? 3392 : 3360), "16 x 210 (+ 32)");

INL __m512 lanes_d(const struct lanes_sb *p)
{
#if LANES_PAD
	return _mm512_loadu_ps(p->d);
#else
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p->d));
#endif
}

/* q(row, element) 0..63 of a Q6_K super-block, ggml's bit layout. */
static int q6_value(const struct kern_block_q6_k *b, int i)
{
	int h = i / 128, l = i % 128, g = l / 32, j = l % 32;
	int ql = b->ql[64 * h + j + 32 * (g & 1)];
	int lo = g < 2 ? (ql & 15) : (ql >> 4);
	int hi = (b->qh[32 * h + j] >> (2 * g)) & 3;
	return lo | hi << 4;
}

/* Rows n_out (a multiple of 16) x nb super-blocks of file Q6_K to lanes. */
static void lanes_pack(struct lanes_sb *dst, const struct kern_block_q6_k *src, size_t n_out,
		       size_t nb)
{
	for (size_t g = 0; g < n_out / 16; g++)
		for (size_t b = 0; b < nb; b++) {
			struct lanes_sb *o = &dst[g * nb + b];
			for (int r = 0; r < 16; r++) {
				const struct kern_block_q6_k *q = &src[(16 * g + r) * nb + b];
#if LANES_PAD
				o->d[r] = kern_fp16_to_fp32(q->d);
#else
				o->d[r] = q->d;
#endif
				for (int s = 0; s < 16; s++) {
					o->sc[s][r] = q->scales[s];
					for (int k = 0; k < 4; k++) {
						int v0 = q6_value(q, 16 * s + k);
						int v1 = q6_value(q, 16 * s + 4 + k);
						int v2 = q6_value(q, 16 * s + 8 + k);
						int v3 = q6_value(q, 16 * s + 12 + k);
						o->v[s][0][4 * r + k] = (uint8_t)(v0 | (v3 & 3) << 6);
						o->v[s][1][4 * r + k] = (uint8_t)(v1 | (v3 & 12) << 4);
						o->v[s][2][4 * r + k] = (uint8_t)(v2 | (v3 & 48) << 2);
					}
				}
			}
		}
}

/* c += v . the dword at p broadcast: GCC does not fold _mm512_set1_epi32()
 * of a load into VPDPBUSD's embedded {1to16} (it emitted 64 VPBROADCASTD
 * a super-block and token), so the instruction is written out. */
INL __m512i dpbusd_b(__m512i c, __m512i v, const int8_t *p)
{
	__asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(c) : "v"(v), "m"(*(const int32_t *)p));
	return c;
}

/* 16 rows (one group, or two when G == 2) x T tokens over nb super-blocks;
 * y[t * ldy + row]; bias[(t nb + b) 16 + s] = -32 x bsums[s]. */
INL void lanes_tile(const struct lanes_sb *w, size_t nb, const struct kern_block_q8_k *x,
		    const int32_t *bias, float *y, size_t ldy, const int T, const int G)
{
	const __m512i m3f = _mm512_set1_epi8(0x3f), m03 = _mm512_set1_epi8(0x03);
	const __m512i m0f = _mm512_set1_epi8(0x0f);
	__m512 acc[2][8];

	U8 for (int g = 0; g < G; g++)
		U8 for (int t = 0; t < T; t++)
			acc[g][t] = _mm512_setzero_ps();
	for (size_t b = 0; b < nb; b++) {
		__m512i isum[2][8];
		U8 for (int g = 0; g < G; g++)
			U8 for (int t = 0; t < T; t++)
				isum[g][t] = _mm512_setzero_si512();
		for (int s = 0; s < 16; s++) {
			__m512i v[2][4], sc[2];
			U8 for (int g = 0; g < G; g++) {
				const struct lanes_sb *p = &w[g * nb + b];
				__m512i X = _mm512_loadu_si512(p->v[s][0]);
				__m512i Y = _mm512_loadu_si512(p->v[s][1]);
				__m512i Z = _mm512_loadu_si512(p->v[s][2]);
				/* select bits 0-1 of X >> 6 else Y >> 4, then bits
				 * 0-3 of that else Z >> 2; the next byte's bits
				 * shifted in go with the last AND */
				__m512i t01 = _mm512_ternarylogic_epi32(
				    m03, _mm512_srli_epi32(X, 6), _mm512_srli_epi32(Y, 4), 0xca);
				__m512i t3 = _mm512_ternarylogic_epi32(m0f, t01, _mm512_srli_epi32(Z, 2),
								       0xca);
				v[g][0] = _mm512_and_si512(X, m3f);
				v[g][1] = _mm512_and_si512(Y, m3f);
				v[g][2] = _mm512_and_si512(Z, m3f);
				v[g][3] = _mm512_and_si512(t3, m3f);
				sc[g] = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p->sc[s]));
			}
			_Pragma("GCC unroll 8") for (int t = 0; t < T; t++)
			{
				const int8_t *q = x[t * nb + b].qs + 16 * s;
				const int32_t bs = bias[(t * nb + b) * 16 + s];
				U8 for (int g = 0; g < G; g++) {
					__m512i c = _mm512_set1_epi32(bs);
					U8 for (int j = 0; j < 4; j++)
						c = dpbusd_b(c, v[g][j], q + 4 * j);
					isum[g][t] = _mm512_add_epi32(isum[g][t],
								      _mm512_mullo_epi32(c, sc[g]));
				}
			}
		}
		U8 for (int g = 0; g < G; g++) {
			__m512 d = lanes_d(&w[g * nb + b]);
			U8 for (int t = 0; t < T; t++)
				acc[g][t] = _mm512_add_ps(
				    acc[g][t],
				    _mm512_mul_ps(_mm512_mul_ps(d, _mm512_set1_ps(x[t * nb + b].d)),
						  _mm512_cvtepi32_ps(isum[g][t])));
		}
	}
	U8 for (int g = 0; g < G; g++)
		U8 for (int t = 0; t < T; t++)
			_mm512_storeu_ps(y + t * ldy + 16 * g, acc[g][t]);
}

typedef void (*tile_fn)(const struct lanes_sb *, size_t, const struct kern_block_q8_k *,
			const int32_t *, float *, size_t);

#define LANES_TILE(T, G)                                                                           \
	static __attribute__((noinline)) void lanes_tile_##T##_##G(                                \
	    const struct lanes_sb *w, size_t nb, const struct kern_block_q8_k *x,                  \
	    const int32_t *bias, float *y, size_t ldy)                                             \
	{                                                                                          \
		lanes_tile(w, nb, x, bias, y, ldy, T, G);                                          \
	}
LANES_TILE(8, 1)
LANES_TILE(4, 1)
LANES_TILE(4, 2)
LANES_TILE(2, 1)
LANES_TILE(2, 2)
LANES_TILE(1, 1)
LANES_TILE(1, 2)

/* The whole product: the bias from the Q8_K sums, then groups of 16 * G rows. */
static void lanes_gemm(tile_fn fn, int G, const struct lanes_sb *w, size_t n_out, size_t nb,
		       const struct kern_block_q8_k *x, int32_t *bias, float *y, int T)
{
	for (size_t i = 0; i < (size_t)T * nb; i++)
		for (int s = 0; s < 16; s++)
			bias[i * 16 + s] = -32 * x[i].bsums[s];
	for (size_t g = 0; g < n_out / 16; g += (size_t)G)
		fn(w + g * nb, nb, x, bias, y + 16 * g, n_out);
}

static uint32_t rng = 12345;
static uint32_t rnd32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng;
}

static int run_shape(size_t n_out, size_t n_in, int reps)
{
	size_t nb = n_in / QK;
	struct kern_block_q6_k *wf = malloc(n_out * nb * sizeof(*wf));
	struct lanes_sb *wl = aligned_alloc(64, (n_out / 16 * nb * sizeof(*wl) + 63) / 64 * 64);
	float *xf = malloc(8 * n_in * sizeof(float));
	struct kern_block_q8_k *xq = malloc(8 * nb * sizeof(*xq));
	int32_t *bias = malloc(8 * nb * 16 * sizeof(int32_t));
	float *y = malloc(8 * n_out * sizeof(float)), *yr = malloc(8 * n_out * sizeof(float));
	float *deq = malloc(n_in * sizeof(float));
	double *dt = malloc((size_t)reps * sizeof(double));
	int bad = 0;

	if (!wf || !wl || !xf || !xq || !bias || !y || !yr || !deq || !dt) {
		fprintf(stderr, "q6_lanes: %zu x %zu: out of memory\n", n_out, n_in);
		bad = 1;
		goto out;
	}

	for (size_t i = 0; i < n_out * nb; i++) {
		uint8_t *p = (uint8_t *)&wf[i];
		for (size_t k = 0; k < sizeof(*wf); k++)
			p[k] = (uint8_t)rnd32();
		wf[i].d = _cvtss_sh(1e-3f * (float)(1 + rnd32() % 1000) / 1000.0f, 0);
	}
	for (size_t i = 0; i < 8 * n_in; i++)
		xf[i] = (float)((int)(rnd32() % 2001) - 1000) / 250.0f;
	lanes_pack(wl, wf, n_out, nb);

	struct {
		int T, G;
		tile_fn fn;
	} cases[] = {{8, 1, lanes_tile_8_1}, {4, 1, lanes_tile_4_1}, {4, 2, lanes_tile_4_2},
		   {2, 1, lanes_tile_2_1}, {2, 2, lanes_tile_2_2}, {1, 1, lanes_tile_1_1},
		   {1, 2, lanes_tile_1_2}};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int T = cases[c].T, G = cases[c].G;
		kern_avx512_quantize_act_q8k(xf, xq, (size_t)T * n_in);
		/* correctness first: bit for bit the engine's scalar Q8_K
		 * GEMV, token by token (exact int32 sums, one float step a
		 * super-block) */
		lanes_gemm(cases[c].fn, G, wl, n_out, nb, xq, bias, y, T);
		for (int t = 0; t < T; t++) {
			struct kern_gemm_args ga = {.w = wf,
						    .w_stride = nb * sizeof(*wf),
						    .n_in = n_in,
						    .n_tok = 1,
						    .y = yr,
						    .y_stride = n_out,
						    .xk = &xq[(size_t)t * nb]};
			kern_ref_gemv_q8k_q6_k(&ga, 0, n_out);
			if (memcmp(y + (size_t)t * n_out, yr, n_out * sizeof(float)) != 0) {
				fprintf(stderr, "T %d G %d: token %d not kern_ref_gemv_q8k_q6_k's bits\n",
					T, G, t);
				bad = 1;
			}
		}
		/* and the project's dequantizer's dot, within float rounding */
		double maxrel = 0;
		for (size_t r = 0; r < n_out; r += 97) {
			kern_quants_dequantize(DTYPE_Q6_K, &wf[r * nb], deq, n_in);
			for (int t = 0; t < T; t++) {
				double s = 0, sa = 0;
				for (size_t i = 0; i < n_in; i++) {
					const struct kern_block_q8_k *a = &xq[(size_t)t * nb + i / QK];
					double p = (double)deq[i] * a->d * a->qs[i % QK];
					s += p;
					sa += fabs(p);
				}
				double e = fabs(s - y[(size_t)t * n_out + r]) / (sa + 1e-30);
				maxrel = e > maxrel ? e : maxrel;
			}
		}
		if (maxrel > 1e-5) {
			fprintf(stderr, "T %d G %d: %g off the dequantized dot\n", T, G, maxrel);
			bad = 1;
		}
		for (int with_q = 0; with_q < 2; with_q++) {
			/* one untimed pass: the checks above left the file
			 * layout's rows in the caches */
			lanes_gemm(cases[c].fn, G, wl, n_out, nb, xq, bias, y, T);
			for (int i = 0; i < reps; i++) {
				double t0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
				if (with_q)
					kern_avx512_quantize_act_q8k(xf, xq, (size_t)T * n_in);
				lanes_gemm(cases[c].fn, G, wl, n_out, nb, xq, bias, y, T);
				dt[i] = bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
			}
			bench_sort(dt, (size_t)reps);
			double fl = 2.0 * (double)n_out * (double)n_in * T * 1e-9;
			printf("q6_lanes %5zu x %5zu  T %d  groups %d  %-14s best %6.1f  median %6.1f "
			       "GFLOP/s  (rel err %.1e%s)\n",
			       n_out, n_in, T, G, with_q ? "tile+quantize" : "tile", fl / dt[0],
			       fl / dt[reps / 2], maxrel, bad ? ", MISMATCH" : ", bit-equal ref");
		}
	}
out:
	free(wf), free(wl), free(xf), free(xq), free(bias), free(y), free(yr), free(deq), free(dt);
	return bad;
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 20;
	size_t shapes[3][2] = {{2048, 2048}, {5632, 2048}, {2048, 5632}}, ns = 3;
	int bad = 0;

	if (argc > 3) {
		shapes[0][0] = strtoul(argv[2], NULL, 10);
		shapes[0][1] = strtoul(argv[3], NULL, 10);
		ns = 1;
	}
	if (reps < 1 || !shapes[0][0] || !shapes[0][1] || shapes[0][0] % 32 || shapes[0][1] % QK) {
		fprintf(stderr, "usage: q6_lanes [REPS] [N (x32) K (x256)]\n");
		return 2;
	}
	for (size_t i = 0; i < ns; i++)
		bad |= run_shape(shapes[i][0], shapes[i][1], reps);
	return bad;
}
#else
int main(void)
{
	puts("q6_lanes: AVX512-VNNI x86-64 only (a layout study)");
	return 0;
}
#endif
