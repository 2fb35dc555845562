/* membw_read.c - the read patterns of the bandwidth bench (membw_read.h;
 * bench/membw.c times them and documents each variant by name): one
 * stream of 8-, 32- or 64-byte loads with or without software prefetch,
 * GEMV tiles of rows side by side, a Q6_K GEMV's loads, and the table
 * that names them. Split from membw.c (eighteenth session) with no
 * change to the code.
 */
#include <stddef.h>
#include <stdint.h>

#include "membw_read.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* n: bytes, a multiple of 64 KiB (every variant's step divides it). */
static uint64_t membw_u64(const char *p, size_t n)
{
	const uint64_t *q = (const uint64_t *)p;
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;

	for (size_t i = 0; i + 4 <= n / 8; i += 4) {
		s0 += q[i];
		s1 += q[i + 1];
		s2 += q[i + 2];
		s3 += q[i + 3];
	}
	return s0 + s1 + s2 + s3;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) static uint64_t membw_hsum256(__m256i a)
{
	__m128i s = _mm_add_epi64(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));

	return (uint64_t)_mm_cvtsi128_si64(s) + (uint64_t)_mm_extract_epi64(s, 1);
}

/* Sum of one stream with 32-byte loads, prefetching PF bytes ahead into
 * L2 (0: none). */
__attribute__((target("avx2"), always_inline)) static inline uint64_t
membw_ymm_pf(const char *p, size_t n, size_t pf)
{
	__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;

	for (size_t i = 0; i < n; i += 128) {
		if (pf) {
			_mm_prefetch(p + i + pf, _MM_HINT_T1);
			_mm_prefetch(p + i + pf + 64, _MM_HINT_T1);
		}
		a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
		a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
		a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
		a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
	}
	return membw_hsum256(_mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
}

__attribute__((target("avx2"))) static uint64_t membw_ymm(const char *p, size_t n)
{
	return membw_ymm_pf(p, n, 0);
}

__attribute__((target("avx2"))) static uint64_t membw_ymm_pf1k(const char *p, size_t n)
{
	/* the prefetches past the end stay inside the buffer but for the
	 * last share, where they are harmless hints */
	return membw_ymm_pf(p, n, 1024);
}

__attribute__((target("avx2"))) static uint64_t membw_ymm_pf4k(const char *p, size_t n)
{
	return membw_ymm_pf(p, n, 4096);
}

__attribute__((target("avx512f"))) static uint64_t membw_zmm(const char *p, size_t n)
{
	__m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;

	for (size_t i = 0; i < n; i += 256) {
		a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
		a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
		a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
		a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
	}
	return (uint64_t)_mm512_reduce_add_epi64(
		_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
}

/* R rows of L bytes side by side (a GEMV tile), 32 bytes of each row in
 * turn; tiles follow each other. With pf, the next tile (R * L bytes,
 * contiguous) is prefetched into L2 at the pace this one is read. */
__attribute__((target("avx2"), always_inline)) static inline uint64_t
membw_rows(const char *p, size_t n, int R, size_t L, int pf)
{
	__m256i acc[16];
	size_t tile = (size_t)R * L;

	for (int r = 0; r < R; r++)
		acc[r] = _mm256_setzero_si256();
	for (size_t t = 0; t + tile <= n; t += tile) {
		const char *w = p + t;
		for (size_t i = 0; i < L; i += 64) {
			if (pf) {
				/* R lines of the next tile per 64 bytes of each row */
				for (int r = 0; r < R; r++)
					_mm_prefetch(w + (size_t)pf * tile + i * (size_t)R +
							     (size_t)r * 64,
						     _MM_HINT_T1);
			}
			for (int r = 0; r < R; r++) {
				const char *q = w + (size_t)r * L + i;
				acc[r] = _mm256_add_epi64(acc[r], _mm256_loadu_si256((const __m256i *)q));
				if (i + 32 < L)
					acc[r] = _mm256_add_epi64(
						acc[r], _mm256_loadu_si256((const __m256i *)(q + 32)));
			}
		}
	}
	for (int r = 1; r < R; r++)
		acc[0] = _mm256_add_epi64(acc[0], acc[r]);
	return membw_hsum256(acc[0]);
}

__attribute__((target("avx2"))) static uint64_t membw_rows4(const char *p, size_t n)
{
	return membw_rows(p, n, 4, 4096, 0);
}

__attribute__((target("avx2"))) static uint64_t membw_rows16(const char *p, size_t n)
{
	return membw_rows(p, n, 16, 1152, 0);
}

__attribute__((target("avx2"))) static uint64_t membw_rows16_pf(const char *p, size_t n)
{
	return membw_rows(p, n, 16, 1152, 1);
}

__attribute__((target("avx2"))) static uint64_t membw_rows16_pf2(const char *p, size_t n)
{
	return membw_rows(p, n, 16, 1152, 2);
}

/* Packed Q4_0 tiles of 16 rows x 64 blocks: block b of the 16 rows is
 * 288 contiguous bytes, read as nine 32-byte loads; the tile two ahead's
 * block b prefetched into L2 as the kernel does. */
__attribute__((target("avx2"))) static uint64_t membw_rows16p_pf2(const char *p, size_t n)
{
	__m256i acc[3] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
	const size_t bs = 16 * 18, tile = 64 * bs;

	for (size_t t = 0; t + tile <= n; t += tile)
		for (size_t b = 0; b < 64; b++) {
			const char *q = p + t + b * bs;
			for (size_t off = 0; off < bs; off += 64)
				_mm_prefetch(q + 2 * tile + off, _MM_HINT_T1);
			for (int i = 0; i < 9; i++)
				acc[i % 3] = _mm256_add_epi64(
					acc[i % 3], _mm256_loadu_si256((const __m256i *)(q + 32 * i)));
		}
	return membw_hsum256(_mm256_add_epi64(acc[0], _mm256_add_epi64(acc[1], acc[2])));
}

__attribute__((target("avx2"))) static uint64_t membw_rows4_pf(const char *p, size_t n)
{
	return membw_rows(p, n, 4, 4096, 1);
}

/* One row of 4 KiB at a time, read as 4 segments of 1 KiB side by side
 * (a one-row GEMV with one accumulator per segment), rows in order. */
__attribute__((target("avx2"))) static uint64_t membw_seg4(const char *p, size_t n)
{
	__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;

	for (size_t t = 0; t < n; t += 4096)
		for (size_t i = 0; i < 1024; i += 32) {
			a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + t + i)));
			a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + t + 1024 + i)));
			a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + t + 2048 + i)));
			a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + t + 3072 + i)));
		}
	return membw_hsum256(_mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
}

/* A Q6_K decode GEMV's reads (kz_q6_rows, n_in 2048): rows of 1680
 * bytes, 8 super-blocks of 210; per row and super-block its 128 bytes of
 * low bits, 64 of high bits and its scales. */
#define MEMBW_Q6_SB 210

/* About what the GEMV body spends per row and super-block between its
 * loads: `work` rounds of four 512-bit multiplies on the loaded data
 * (work 2: ~34 GB/s a core when the data is at hand, the body's ~22
 * cycles per 210 bytes), so the loads come at the body's pace rather
 * than as fast as the core can issue them. */
__attribute__((target("avx512f"), always_inline)) static inline void
membw_work(__m512i *a0, __m512i *a1, __m512i *a2, int work)
{
	__m512i t0 = *a0, t1 = *a1, t2 = *a2, t3 = _mm512_xor_si512(*a0, *a1);

	for (int k = 0; k < work; k++) {
		t0 = _mm512_mullo_epi32(t0, t1);
		t1 = _mm512_mullo_epi32(t1, t2);
		t2 = _mm512_mullo_epi32(t2, t3);
		t3 = _mm512_mullo_epi32(t3, t0);
	}
	*a0 = t0;
	*a1 = t1;
	*a2 = _mm512_add_epi64(t2, t3);
}

__attribute__((target("avx512f"), always_inline)) static inline void
membw_q6_sb(const char *b, __m512i acc[4], int work)
{
	acc[0] = _mm512_add_epi64(acc[0], _mm512_loadu_si512(b));
	acc[1] = _mm512_add_epi64(acc[1], _mm512_loadu_si512(b + 64));
	acc[2] = _mm512_add_epi64(acc[2], _mm512_loadu_si512(b + 128));
	acc[3] = _mm512_add_epi64(acc[3],
				  _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(b + 192))));
	membw_work(&acc[0], &acc[1], &acc[2], work);
}

/* Groups of 4 rows, in order. run 1: the body's order, the 4 rows side
 * by side a super-block at a time, and (ahead > 0) the same super-block
 * `ahead` rows on prefetched into L2, 4 lines a row as kg_prefetch_rows()
 * does, or (lin) the group `ahead` rows on as one linear stream of lines
 * spread over the group's 8 steps. run 8: each row whole before the next
 * (one stream, the rows-one-at-a-time order), no software prefetch.
 * A whole number of groups is read, the rest of n linearly. */
__attribute__((target("avx512f"), always_inline)) static inline uint64_t
membw_q6(const char *p, size_t n, size_t ahead, int lin, size_t run, int work)
{
	const size_t st = MEMBW_Q6_ROW, grp = 4 * st;
	__m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
			  _mm512_setzero_si512()};
	size_t g = 0;

	for (; g + grp <= n; g += grp) {
		const char *w = p + g;
		const int pf = ahead && g + grp + ahead * st <= n;
		size_t line = 0;
		for (size_t sb = 0; sb < st; sb += run * MEMBW_Q6_SB) {
			if (pf && lin) {
				/* 105 lines over 8 steps */
				for (int k = 0; k < 14 && line < grp; k++, line += 64)
					_mm_prefetch(w + ahead * st + line, _MM_HINT_T1);
			} else if (pf) {
				for (int r = 0; r < 4; r++)
					for (size_t off = 0; off < MEMBW_Q6_SB; off += 64)
						_mm_prefetch(w + (ahead + (size_t)r) * st + sb + off,
							     _MM_HINT_T1);
			}
			for (int r = 0; r < 4; r++)
				for (size_t j = 0; j < run; j++)
					membw_q6_sb(w + (size_t)r * st + sb + j * MEMBW_Q6_SB, acc, work);
		}
	}
	for (; g + 64 <= n; g += 64)
		acc[0] = _mm512_add_epi64(acc[0], _mm512_loadu_si512(p + g));
	return (uint64_t)_mm512_reduce_add_epi64(
		_mm512_add_epi64(_mm512_add_epi64(acc[0], acc[1]), _mm512_add_epi64(acc[2], acc[3])));
}

/* The body's order from 4 rows a quarter of n apart: 4 long streams, one
 * per quarter, each in row order; no software prefetch. */
__attribute__((target("avx512f"), always_inline)) static inline uint64_t
membw_q6far(const char *p, size_t n, int work)
{
	const size_t st = MEMBW_Q6_ROW, q = n / 4 / st; /* rows per quarter */
	__m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
			  _mm512_setzero_si512()};

	for (size_t i = 0; i < q; i++)
		for (size_t sb = 0; sb < st; sb += MEMBW_Q6_SB)
			for (int r = 0; r < 4; r++)
				membw_q6_sb(p + ((size_t)r * q + i) * st + sb, acc, work);
	for (size_t g = 4 * q * st; g + 64 <= n; g += 64)
		acc[0] = _mm512_add_epi64(acc[0], _mm512_loadu_si512(p + g));
	return (uint64_t)_mm512_reduce_add_epi64(
		_mm512_add_epi64(_mm512_add_epi64(acc[0], acc[1]), _mm512_add_epi64(acc[2], acc[3])));
}

#define MEMBW_FN(name, call)                                                          \
	__attribute__((target("avx512f"))) static uint64_t name(const char *p, size_t n) \
	{                                                                              \
		return call;                                                           \
	}
MEMBW_FN(membw_q6rows, membw_q6(p, n, 16, 0, 1, 0))
MEMBW_FN(membw_q6rows_nopf, membw_q6(p, n, 0, 0, 1, 0))
MEMBW_FN(membw_q6rows_lin, membw_q6(p, n, 16, 1, 1, 0))
MEMBW_FN(membw_q6lin, membw_q6(p, n, 0, 0, 8, 0))
MEMBW_FN(membw_q6far_0, membw_q6far(p, n, 0))
MEMBW_FN(membw_q6rows_w, membw_q6(p, n, 16, 0, 1, 2))
MEMBW_FN(membw_q6lin_w, membw_q6(p, n, 0, 0, 8, 2))
MEMBW_FN(membw_q6far_w, membw_q6far(p, n, 2))

#endif

const struct membw_variant membw_variants[] = {
	{"u64", membw_u64, 0, 0, 0, 0},
#if defined(__x86_64__)
	{"ymm", membw_ymm, 0, 0, 0, 0},
	{"zmm", membw_zmm, 1, 0, 0, 0},
	{"ymm-pf1k", membw_ymm_pf1k, 0, 0, 0, 0},
	{"ymm-pf4k", membw_ymm_pf4k, 0, 0, 0, 0},
	{"rows4", membw_rows4, 0, 0, 0, 0},
	{"rows16", membw_rows16, 0, 0, 0, 0},
	{"rows16-pf", membw_rows16_pf, 0, 0, 0, 0},
	{"rows16-pf2", membw_rows16_pf2, 0, 0, 0, 0},
	{"rows4-pf", membw_rows4_pf, 0, 0, 0, 0},
	{"seg4", membw_seg4, 0, 0, 0, 0},
	{"zmm-il64k", membw_zmm, 1, 0, 64 * 1024, 0},
	{"zmm-2m", membw_zmm, 1, 1, 0, 0},
	{"ymm-2m", membw_ymm, 0, 1, 0, 0},
	{"rows4-pf-2m", membw_rows4_pf, 0, 1, 0, 0},
	{"rows16-pf-2m", membw_rows16_pf, 0, 1, 0, 0},
	{"rows16-pf2-2m", membw_rows16_pf2, 0, 1, 0, 0},
	{"rows16p-pf2-2m", membw_rows16p_pf2, 0, 1, 0, 0},
	{"zmm-il64k-2m", membw_zmm, 1, 1, 64 * 1024, 0},
	{"ymm-pf1k-2m", membw_ymm_pf1k, 0, 1, 0, 0},
	{"q6rows-2m", membw_q6rows, 1, 1, 0, 0},
	{"q6rows-nopf-2m", membw_q6rows_nopf, 1, 1, 0, 0},
	{"q6rows-lin-2m", membw_q6rows_lin, 1, 1, 0, 0},
	{"q6lin-2m", membw_q6lin, 1, 1, 0, 0},
	{"q6far-2m", membw_q6far_0, 1, 1, 0, 0},
	{"q6rows-w-2m", membw_q6rows_w, 1, 1, 0, 0},
	{"q6lin-w-2m", membw_q6lin_w, 1, 1, 0, 0},
	{"q6far-w-2m", membw_q6far_w, 1, 1, 0, 0},
	{"ymm-tok-2m", membw_ymm, 0, 1, 0, 1},
	{"q6rows-tok-2m", membw_q6rows, 1, 1, 0, 1},
#endif
};
_Static_assert(sizeof(membw_variants) / sizeof(membw_variants[0]) == MEMBW_NVAR,
	       "MEMBW_NVAR (membw_read.h) counts the table");

/* membw_read.h */
int membw_runs(const struct membw_variant *mv)
{
	if (mv->fn == membw_u64)
		return 1;
#if defined(__x86_64__)
	__builtin_cpu_init();
#if !defined(__linux__)
	if (mv->huge)
		return 0;
#endif
	return __builtin_cpu_supports("avx2") && (!mv->avx512 || __builtin_cpu_supports("avx512f"));
#else
	return 0;
#endif
}
