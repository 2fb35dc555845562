/*
 * kquants_q6p_avx512.c - packed Q6_K times 1 to 8 tokens on the AVX-512
 * VNNI level: the batched-decode path of kern_avx512_vnni_pgemm_q6_k()
 * (kquants_vnni_avx512.c; 9+ tokens stay on its panels) and, at one token,
 * the decode GEMV (kern_avx512_pgemv_q6_k(), kquants_gemv_avx512.c).
 *
 * The form (kernels_impl.h KERN_Q6L_*): rows in dword lanes, 16 rows a
 * group, a row's 4 consecutive weights in each dword lane of three vectors
 * a sub-block of 16 elements (the fourth vector's bits in their top two
 * bits). So per sub-block the group's four value vectors are made once for
 * all the tokens (3 loads, 9 operations), and each token adds 4 VPDPBUSD
 * whose activation dword is an embedded {1to16} broadcast of its Q8_K
 * block as kern_avx512_quantize_act_q8k() leaves it (no arrangement of
 * the activations), a chain started from -32 x the sub-block's bsum (the
 * bias comes out of the scale's VPMULLD for free), one VPMULLD and one
 * VPADDD into the token's int32 sums of the 16 rows: no horizontal
 * reduction, no stores until the group's end. The former form (a row per
 * 128-bit lane) needed a reduction per row and token and 128-bit
 * broadcasts: 279 GFLOP/s at 8 tokens where this one runs ~340 (LEVELS.md
 * "Q6_K rows in dword lanes", q6l21; this tile, q6t22).
 *
 * Streaming: 2+ tokens take blocks of groups in turn from L2, the next
 * block prefetched into L2 meanwhile, linearly, a few lines a sub-block
 * (with the hardware prefetchers alone a TinyLlama Q6_K 8-sequence step
 * took 118-126 cpu ms against 55, q6t22); one token leaves the stream to
 * the hardware (every software form tried was slower), each super-block's
 * first lines (its scales, d, first values) asked for at its start.
 *
 * Bit contract: each token's result is kern_ref_gemv_q8k_q6_k()'s bits,
 * whatever its batch: the same exact int32 sum a super-block (only the
 * order of its additions differs), then the same unfused float step acc +
 * (d D) isum in super-block order; rows past a window of super-blocks
 * carry acc through y (an exact float store and reload).
 */
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels_impl.h"
#include "kquants_vnni_avx512.h"
#include "quants.h"

#define Q6L_INLINE static inline __attribute__((always_inline))
#define Q6L_UNROLL _Pragma("GCC unroll 8")
#define Q6L_TOK 8
/* Lines of a super-block asked for at its start (its scales, d and first
 * values: the head of the stream, KERN_Q6L_SC = 0). One token, one
 * thread, TinyLlama Q6_K step (forward_step), Zen 4: none 29.3-29.8 cpu
 * ms, 5 lines 28.2-28.6, 10 lines 27.2-28.8, 16 and 26 no better, the
 * next super-block's 5 lines 31.3-32.1 (lead, twenty-second session). */
#define Q6L_HEAD_PF 10
/* token x super-blocks of -32 x bsums a window (64 bytes each, 32 KiB):
 * 64 super-blocks at 8 tokens, so one window for any row up to 16384 */
#define Q6L_WIN 512
/* Blocks of groups: Q6L_BLOCK1 bytes a window, at most Q6L_BLOCK (with
 * the next block prefetched, 768 of L2's 1024 KiB): each window reads the
 * block again, from L2; one window runs best in small blocks (the
 * prefetch starts sooner: a TinyLlama 4-sequence step 12.3 -> 11.5 cpu ms
 * a token, 128 against 384 KiB, LEVELS.md q6s19). */
#define Q6L_BLOCK (384 * 1024)
#define Q6L_BLOCK1 (128 * 1024)

/* c += v . the dword at p broadcast: GCC does not fold _mm512_set1_epi32()
 * of a load into VPDPBUSD's embedded {1to16} (it emitted a VPBROADCASTD a
 * token and VPDPBUSD), so the instruction is written out. */
Q6L_INLINE __m512i q6l_dpbusd(__m512i c, __m512i v, const int8_t *p)
{
	__asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(c) : "v"(v), "m"(*(const int32_t *)p));
	return c;
}

/* -32 x the sums of 16 of token t's super-block s (s0 <= s < s1) at bias
 * + 16 ((s - s0) T + t): each chain's start, broadcast from memory. */
static void q6l_bias(const struct kern_gemm_args *a, int T, size_t s0, size_t s1, int32_t *bias)
{
	const size_t nsb = a->n_in / KERN_QKK;

	for (size_t s = s0; s < s1; s++)
		for (int t = 0; t < T; t++) {
			const __m512i b = _mm512_cvtepi16_epi32(
				_mm256_loadu_si256((const __m256i *)a->xk[t * nsb + s].bsums));

			_mm512_store_si512(bias + 16 * ((s - s0) * (size_t)T + t),
					   _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(b, 5)));
		}
}

/* The group at rows o .. o + 15, T tokens, super-blocks s0 .. s1 - 1 (the
 * window q6l_bias() made), the accumulators from y when s0 > 0; prefetches
 * up to per lines a sub-block from pf while below pfe. Returns pf. */
Q6L_INLINE const char *q6l_group(const struct kern_gemm_args *a, size_t o, int T, const int32_t *bias,
				 size_t s0, size_t s1, const char *pf, size_t per, const char *pfe,
				 size_t pfo, const char *wend)
{
	const size_t nsb = a->n_in / KERN_QKK;
	const char *g = (const char *)a->w + o * a->w_stride;
	const struct kern_block_q8_k *x = a->xk;
	__m512 acc[Q6L_TOK];

	Q6L_UNROLL
	for (int t = 0; t < T; t++)
		acc[t] = s0 > 0 ? _mm512_loadu_ps(a->y + t * a->y_stride + o) : _mm512_setzero_ps();
	for (size_t s = s0; s < s1; s++) {
		const char *b = g + s * KERN_Q6L_SB;
		const int32_t *bs = bias + 16 * T * (s - s0);
		__m512i isum[Q6L_TOK];

		Q6L_UNROLL
		for (int t = 0; t < T; t++)
			isum[t] = _mm512_setzero_si512();
		/* the head of the super-block's stream (Q6L_HEAD_PF) */
		for (int l = 0; l < Q6L_HEAD_PF; l++)
			_mm_prefetch(b + 64 * l, _MM_HINT_T0);
		/* one token on Intel (kern_avx512_pack_ahead(), q6l_rows()):
		 * the same super-block pfo bytes ahead into L2, its head now,
		 * a sub-block's 3 lines with each sub-block */
		const int ahead = T == 1 && pfo && b + pfo + KERN_Q6L_SB <= wend;

		if (ahead)
			for (int l = 0; l < 5; l++)
				_mm_prefetch(b + pfo + 64 * l, _MM_HINT_T1);
		/* not unrolled: 16 copies of the token loop only grew the code */
		for (int j = 0; j < 16; j++) {
			const char *v = b + KERN_Q6L_V(j, 0);
			__m512i vq[4];

			kv__q6l_sub(v, vq);
			const __m512i sc = kv__q6l_sc(b, j);

			if (ahead)
				for (int l = 0; l < 3; l++)
					_mm_prefetch(v + pfo + 64 * l, _MM_HINT_T1);
			/* (none at one token: q6l_rows()) */
			if (T > 1)
				for (size_t l = 0; l < per && pf < pfe; l++, pf += 64)
					_mm_prefetch(pf, _MM_HINT_T1);
			Q6L_UNROLL
			for (int t = 0; t < T; t++) {
				const int8_t *q = x[t * nsb + s].qs + 16 * j;
				__m512i c = _mm512_set1_epi32(bs[16 * t + j]);

				c = q6l_dpbusd(c, vq[0], q);
				c = q6l_dpbusd(c, vq[1], q + 4);
				c = q6l_dpbusd(c, vq[2], q + 8);
				c = q6l_dpbusd(c, vq[3], q + 12);
				isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(c, sc));
			}
		}
		/* the reference's step, unfused: acc + (d D) isum */
		const __m512 d = kv__q6l_d(b);

		Q6L_UNROLL
		for (int t = 0; t < T; t++)
			acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_mul_ps(d, _mm512_set1_ps(x[t * nsb + s].d)),
								     _mm512_cvtepi32_ps(isum[t])));
	}
	Q6L_UNROLL
	for (int t = 0; t < T; t++)
		_mm512_storeu_ps(a->y + t * a->y_stride + o, acc[t]);
	return pf;
}

/* Rows [o0, o1) (whole groups), T tokens: blocks of groups, each window of
 * super-blocks over a block's groups in turn, the next block prefetched
 * beside them. */
Q6L_INLINE void q6l_rows(const struct kern_gemm_args *a, size_t o0, size_t o1, int T)
{
	const size_t R = KERN_Q6L_ROWS, nsb = a->n_in / KERN_QKK, W = Q6L_WIN / (size_t)T;
	const size_t nw = (nsb + W - 1) / W, gbytes = nsb * KERN_Q6L_SB;
	const size_t blk = nw < Q6L_BLOCK / Q6L_BLOCK1 ? nw * Q6L_BLOCK1 : Q6L_BLOCK;
	const size_t gb = blk / gbytes > 1 ? blk / gbytes : 1;
	int32_t bias[16 * Q6L_WIN] __attribute__((aligned(64)));

	for (size_t b0 = o0; b0 < o1; b0 += R * gb) {
		const size_t b1 = o1 - b0 > R * gb ? b0 + R * gb : o1;
		/* the call's last block prefetches the rows after o1: the
		 * pool's next chunk of this thread's region (kernels_matmul.c),
		 * the matrix's n_out rows being y_stride; a prefetch past the
		 * matrix never faults, at worst it reads a block for nothing */
		const size_t nend = b1 < o1 ? o1 : a->y_stride > o1 ? a->y_stride : o1;
		/* one token: none, the hardware's alone (the block's prefetch
		 * ran a TinyLlama 1-sequence step at 44 cpu ms against 35,
		 * a distance ahead in the stream at 35-46; q6t22) */
		const size_t nxb = T == 1 ? 0 : (nend - b1 > R * gb ? R * gb : nend - b1) / R * gbytes;
		/* its lines spread over the block's sub-block steps */
		const size_t steps = (b1 - b0) / R * nsb * 16, per = (nxb / 64 + steps - 1) / steps;
		const char *pf = (const char *)a->w + b1 * a->w_stride, *const pfe = pf + nxb;
		/* one token on Intel: the stream kern_avx512_pack_ahead() rows
		 * ahead, as the other packed GEMVs (without it one core waited
		 * on DRAM at ~2/3 of its rate, LEVELS.md "Decode prefetch on
		 * Intel"; none on AMD, where the hardware's prefetchers follow
		 * the stream), up to the matrix's last row */
		const size_t pfo = T == 1 ? kern_avx512_pack_ahead() * a->w_stride : 0;
		const char *const wend = (const char *)a->w + (a->y_stride > o1 ? a->y_stride : o1) * a->w_stride;

		for (size_t s0 = 0; s0 < nsb; s0 += W) {
			const size_t s1 = nsb - s0 > W ? s0 + W : nsb;

			/* one window: made once for all the blocks */
			if (nw > 1 || b0 == o0)
				q6l_bias(a, T, s0, s1, bias);
			for (size_t o = b0; o < b1; o += R)
				pf = q6l_group(a, o, T, bias, s0, s1, pf, per, pfe, pfo, wend);
		}
	}
}

typedef void (*q6l_fn)(const struct kern_gemm_args *a, size_t o0, size_t o1);

#define Q6L_FN(T)                                                                                     \
	static __attribute__((noinline)) void q6l_rows##T(const struct kern_gemm_args *a, size_t o0,  \
							  size_t o1)                                  \
	{                                                                                             \
		q6l_rows(a, o0, o1, T);                                                               \
	}
Q6L_FN(1)
Q6L_FN(2)
Q6L_FN(3)
Q6L_FN(4)
Q6L_FN(5)
Q6L_FN(6)
Q6L_FN(7)
Q6L_FN(8)

static const q6l_fn q6l_by_tok[Q6L_TOK + 1] = {NULL,	   q6l_rows1, q6l_rows2, q6l_rows3, q6l_rows4,
					       q6l_rows5, q6l_rows6, q6l_rows7, q6l_rows8};

int kern_avx512_q6p_small(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	if (a->n_tok == 0 || a->n_tok > Q6L_TOK || a->xk == NULL)
		return 0;
	q6l_by_tok[a->n_tok](a, o0, o1);
	return 1;
}
#endif
