/*
 * kquants_q6p_avx512.c - packed Q6_K (kern_avx512_pack_q6_k()) times 1 to
 * 8 tokens on the AVX-512 VNNI level: the batched-decode path of
 * kern_avx512_vnni_pgemm_q6_k() (kquants_vnni_avx512.c; 9+ tokens stay
 * on its panels).
 *
 * Why not its 16-row tile: the tile wants one row per dword lane, and the
 * packed form has a sub-block per dword of a row's 16-byte lane, so the
 * tile first unpacked each super-block into a 64-ZMM stack panel (-10 to
 * -13% at 2-4 tokens against the file layout; LEVELS.md "Q6_K re-ordered").
 * Here the group's vectors are used as the one-token GEMV (kp_q6u(),
 * kquants_gemv_avx512.c) uses them, a row per 128-bit lane: per group of
 * 4 rows and half super-block the 8 value vectors are made once for all
 * the tokens (6 loads, 8 VPTERNLOGD, no transposes), two groups at a time
 * (16 ZMM; three at 3 and 5-8 tokens, q6p_group3()), and each token adds 8
 * VPDPBUSD a group against its activations arranged per window of
 * super-blocks as the GEMV arranges them (dword transpose), each 16 bytes
 * loaded once, broadcast to the lanes, for all the groups; 2 chains a group from -32 x its sums of 16, one
 * VPMULLD each by the scales. Per token the first half's scaled sums wait
 * on the stack for the second's, and each quad's four are reduced once a
 * super-block (6 unpacks and adds: lane 4 r + k row r, token k), one
 * float step serving a quad.
 *
 * Bit for bit the file layout's and the GEMV's results: the same exact
 * int32 sums per super-block (only their order of addition differs), then
 * the same float step acc + (d D) isum, in super-block order, through y
 * between windows of super-blocks (an exact float store and reload).
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kernels_impl.h"
#include "quants.h"

#define Q6P_INLINE static inline __attribute__((always_inline))
#define Q6P_UNROLL _Pragma("GCC unroll 16")
#define Q6P_TOK 8
#define Q6P_SB (4 * sizeof(struct kern_block_q6_k)) /* a group's super-block */
/* token x super-blocks of activations per window, 320 bytes each (the
 * quants as the GEMV lays them, 16 bytes a unit, each broadcast to the
 * lanes as it is loaded; -32 x the sums of 16). Broadcast in memory (1280
 * bytes each) each VPDPBUSD took its operand from memory for free; with
 * two groups a load the VBROADCASTI32X4 costs the same and the window is 4
 * x as long (8 tokens 2048 x 2048 258 -> 267 GFLOP/s, LEVELS.md q6s19).
 * 192 (60 KiB, L2; 8 tokens: 24 super-blocks, one window for n_in 5632):
 * every further window re-arranged its activations for every block of
 * groups and sent y through memory (64: 8 tokens 2048 x 5632, 3 windows,
 * 250 -> 263 GFLOP/s, L1-sized windows gave nothing at 2048; the whole
 * activations broadcast in memory instead, 4 x the bytes from L2, won
 * 5% in gemm_q but cost the TinyLlama 8-sequence step 40%: q6t20) */
#define Q6P_WIN 192
#define Q6P_X4(p) _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(p)))
/* Blocks of groups that the windows take in turn from L2, the next block
 * prefetched beside them, linearly (windows over the whole matrix read
 * DRAM in strided runs: a 4-sequence TinyLlama Q6_K decode step 76 ->
 * 120 ms of CPU, one thread; blocks: 57). Also with one window: the
 * hardware prefetchers alone left a TinyLlama 8-sequence step 15.1 cpu
 * ms a token against 9.7 (q6s19). Q6P_BLOCK1 bytes a window, at most
 * Q6P_BLOCK (with the next block prefetched, 768 of L2's 1024 KiB): a
 * block's windows each arrange their activations again, so more windows
 * want more groups a block to share them (8 tokens 2048 x 5632, 3
 * windows: 128 KiB 233, 384 KiB 254 GFLOP/s), while one window (its
 * activations arranged once a call) runs best in small blocks (the
 * prefetch starts sooner: TinyLlama 4-sequence step 12.3 -> 11.5 cpu ms
 * a token, 128 against 384 KiB; LEVELS.md q6s19). */
#define Q6P_BLOCK (384 * 1024)
#define Q6P_BLOCK1 (128 * 1024)

/* Which token of its quad fills lane k when the quad has `n` tokens (1..4):
 * the missing ones repeat a present one (computed, never stored). */
Q6P_INLINE int q6p_tok(int k, int n)
{
	return k < n ? k : n - 1;
}

/* The window's activations: token k's super-block s at xa + 256 ((s -
 * s0) T + k) as kp_q6_act() lays them (per 64-element chunk c, dword i of
 * ql unit u: elements 64c + 16i + 4u .., unit u's 16 bytes at 64c + 16u);
 * -32 x its sums of 16 at bias + 16 ((s - s0) T + k), chain c's at + 4c;
 * per super-block and quad the four tokens' D at xd + 4 (2 (s - s0) + q).
 * A super-block's tokens at fixed offsets from one base. */
static void q6p_act(const struct kern_gemm_args *a, int T, size_t s0, size_t s1, int8_t *xa,
		    int32_t *bias, float *xd)
{
	const size_t nsb = a->n_in / KERN_QKK;
	const __m512i tr = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);

	for (int k = 0; k < T; k++)
		for (size_t s = s0; s < s1; s++) {
			const struct kern_block_q8_k *x = a->xk + k * nsb + s;
			const size_t i = (s - s0) * T + k;

			for (int c = 0; c < 4; c++)
				_mm512_store_si512(xa + 256 * i + 64 * c,
						   _mm512_permutexvar_epi32(tr, _mm512_loadu_si512(x->qs + 64 * c)));
			_mm512_store_si512(bias + 16 * i,
					   _mm512_sub_epi32(_mm512_setzero_si512(),
							    _mm512_slli_epi32(_mm512_cvtepi16_epi32(_mm256_loadu_si256(
										      (const __m256i *)x->bsums)),
									      5)));
		}
	for (size_t s = s0; s < s1; s++)
		for (int q = 0; q * 4 < T; q++) {
			const int n = T - 4 * q < 4 ? T - 4 * q : 4;

			for (int k = 0; k < 4; k++)
				xd[4 * (2 * (s - s0) + q) + k] = a->xk[(4 * q + q6p_tok(k, n)) * nsb + s].d;
		}
}

/* Lane 4 r + k <-> lane 4 k + r (its own inverse). */
Q6P_INLINE __m512i q6p_swap_idx(void)
{
	return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

/* Lane 4 r + k of q6p_pairs(q6p_pair(v0, v1), q6p_pair(v2, v3)): the
 * sum of the four dwords of lane r of v[k] (row r's four partial sums of
 * token k); in two steps so that a quad's first pair is reduced as its
 * tokens come. */
Q6P_INLINE __m512i q6p_pair(__m512i v0, __m512i v1)
{
	return _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
}

Q6P_INLINE __m512i q6p_pairs(__m512i p01, __m512i p23)
{
	return _mm512_add_epi32(_mm512_unpacklo_epi64(p01, p23), _mm512_unpackhi_epi64(p01, p23));
}

/* Group rows o .. o + 3's quad q of tokens (n of them) from y, lane 4 r
 * + k (a window after the first). */
Q6P_INLINE __m512 q6p_acc_load(const struct kern_gemm_args *a, size_t o, int q, int n)
{
	/* (the lanes spelt out: -O1 does not unroll a loop into the
	 * immediates; through a stack array the store forwarding fails, 8
	 * tokens 221 -> 207 GFLOP/s) */
#define Q6P_Y(k) _mm_loadu_ps(a->y + (4 * q + q6p_tok(k, n)) * a->y_stride + o)
	__m512 in = _mm512_castps128_ps512(Q6P_Y(0));

	in = _mm512_insertf32x4(in, Q6P_Y(1), 1);
	in = _mm512_insertf32x4(in, Q6P_Y(2), 2);
	in = _mm512_insertf32x4(in, Q6P_Y(3), 3);
#undef Q6P_Y
	return _mm512_permutexvar_ps(q6p_swap_idx(), in);
}

/* Half n of the group's super-block at b: the 8 value vectors (chain 2n:
 * the low nibbles of ql units 4n .. 4n + 3; 2n + 1: the high ones, as
 * kp_q6u() makes them) and the two chains' sub-block scales. */
Q6P_INLINE void q6p_values(const char *b, int n, __m512i *vl, __m512i *vh, __m512i *sl, __m512i *sh)
{
	const __m512i m4 = _mm512_set1_epi8(0x0f), k33 = _mm512_set1_epi8(0x33);
	const __m512i kcc = _mm512_set1_epi8((char)0xcc);

	Q6P_UNROLL
	for (int j = 0; j < 2; j++) {
		const __m512i h = _mm512_loadu_si512(b + KERN_Q6P_QH(n, j));
		const __m512i hm = _mm512_and_si512(h, k33);
		const __m512i hm2 = _mm512_and_si512(h, kcc);
		__m512i qa = _mm512_loadu_si512(b + KERN_Q6P_QL(n, 2 * j));
		__m512i qb = _mm512_loadu_si512(b + KERN_Q6P_QL(n, 2 * j + 1));

		/* one load each: GCC would fold them twice */
		__asm__("" : "+v"(qa), "+v"(qb));
		vl[2 * j] = _mm512_ternarylogic_epi32(qa, _mm512_slli_epi16(hm, 4), m4, 0xE4);
		vl[2 * j + 1] = _mm512_ternarylogic_epi32(qb, _mm512_slli_epi16(hm2, 2), m4, 0xE4);
		vh[2 * j] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(qa, 4), hm, m4, 0xE4);
		vh[2 * j + 1] =
			_mm512_ternarylogic_epi32(_mm512_srli_epi16(qb, 4), _mm512_srli_epi16(hm2, 2), m4, 0xE4);
	}
	*sl = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 768 + 16 * (2 * n))));
	*sh = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 768 + 16 * (2 * n + 1))));
}

/* A quad of nq tokens' reduced sums from its first pair p0 (tokens 0 and
 * 1, or 0 alone when nq is 1) and the sums t: a quad short of tokens
 * fills the missing lanes with a present token's (computed, never
 * stored). */
Q6P_INLINE __m512i q6p_quad(__m512i p0, const __m512i *t, int nq)
{
	if (nq == 1)
		p0 = q6p_pair(t[0], t[0]);
	return q6p_pairs(p0, nq < 3 ? p0 : q6p_pair(t[2], t[q6p_tok(3, nq)]));
}

/* The float step of the group's super-block at b, its quad q at xq (the
 * four tokens' D). */
Q6P_INLINE __m512 q6p_step(__m512 acc, const char *b, const float *xq, __m512i is)
{
	const __m512i dsel = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
	/* the rows' d, lane 4 r + k = row r's */
	const __m512 d = _mm512_permutexvar_ps(
		dsel, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(b + 832)))));
	const __m512 dk = _mm512_mul_ps(d, _mm512_broadcast_f32x4(_mm_loadu_ps(xq)));

	return _mm512_add_ps(acc, _mm512_mul_ps(dk, _mm512_cvtepi32_ps(is)));
}

/* The quad's n tokens' rows o .. o + 3 into y. */
Q6P_INLINE void q6p_acc_store(const struct kern_gemm_args *a, size_t o, int q, int n, __m512 acc)
{
	/* lane 4 k + r: token k's four rows */
	const __m512 out = _mm512_permutexvar_ps(q6p_swap_idx(), acc);
	float *y = a->y + 4 * q * a->y_stride + o;

	_mm_storeu_ps(y, _mm512_castps512_ps128(out));
	if (n > 1)
		_mm_storeu_ps(y + a->y_stride, _mm512_extractf32x4_ps(out, 1));
	if (n > 2)
		_mm_storeu_ps(y + 2 * a->y_stride, _mm512_extractf32x4_ps(out, 2));
	if (n > 3)
		_mm_storeu_ps(y + 3 * a->y_stride, _mm512_extractf32x4_ps(out, 3));
}

/* The bytes of the pfn to prefetch that each (super-block, quad, half)
 * step of super-blocks s0 .. s1 - 1 at T tokens takes, in whole lines. */
Q6P_INLINE size_t q6p_pf_per(size_t pfn, size_t s0, size_t s1, int T)
{
	const size_t steps = (s1 - s0) * (size_t)((T + 3) / 4) * 2;

	return ((pfn + 63) / 64 + steps - 1) / steps * 64;
}

/* G groups (rows o .. o + 4 G - 1, G 1 or 2), T tokens, super-blocks s0
 * .. s1 - 1 of the window the activations were arranged for (q6p_act());
 * the accumulators from y when s0 > 0. Two groups share each activation
 * load: each VPDPBUSD took its own 64-byte operand, and Zen 4 loads one
 * ZMM a cycle, as many as it issues VPDPBUSD (8 tokens 232 -> 252
 * GFLOP/s). The pfn bytes at pf go into L2 meanwhile, a share before each
 * (super-block, quad, half) step: the same slice as one burst before the
 * group (~27 lines at 8 tokens, more than the core's fill buffers)
 * stalled the group's first loads, 20% of q6p_rows8's samples at two
 * threads (LEVELS.md "Q6_K prefetch spread", q6k14). */
Q6P_INLINE void q6p_group(const struct kern_gemm_args *a, size_t o, int G, int T, const int8_t *xa,
			  const int32_t *bias, const float *xd, size_t s0, size_t s1, const char *pf,
			  size_t pfn)
{
	const size_t per = q6p_pf_per(pfn, s0, s1, T);
	const char *const pfe = pf + pfn;
	const char *g = (const char *)a->w + o * a->w_stride;
	const size_t gs = 4 * a->w_stride;
	const int Q = (T + 3) / 4;
	__m512 acc[2][2];

	Q6P_UNROLL
	for (int e = 0; e < G; e++)
		Q6P_UNROLL
		for (int q = 0; q < Q; q++) {
			acc[e][q] = _mm512_setzero_ps();
			if (s0 > 0)
				acc[e][q] = q6p_acc_load(a, o + 4 * e, q, T - 4 * q < 4 ? T - 4 * q : 4);
		}
	for (size_t s = s0; s < s1; s++) {
		const int8_t *xs = xa + 256 * T * (s - s0);
		const int32_t *bs = bias + 16 * T * (s - s0);
		/* per half super-block the 8 value vectors of a group are made
		 * once for all the tokens (a quad at a time, the values were
		 * made again for the second quad); each token's scaled sums of
		 * the first half wait in th (stack, L1) for the second's, and
		 * each quad's four are reduced once a super-block, linear, as
		 * one (reduced per half: 8 tokens 249 -> 253, 4 tokens 229 ->
		 * 234 GFLOP/s; held in registers the quads' sums spilled, 20
		 * ZMM a group and super-block, q6p18) */
		__m512i th[2][Q6P_TOK], is[2][2];

		Q6P_UNROLL
		for (int n = 0; n < 2; n++) {
			__m512i vl[2][4], vh[2][4], sl[2], sh[2];

			Q6P_UNROLL
			for (int e = 0; e < G; e++)
				q6p_values(g + e * gs + s * Q6P_SB, n, vl[e], vh[e], &sl[e], &sh[e]);

			Q6P_UNROLL
			for (int q = 0; q < Q; q++) {
				const int nq = T - 4 * q < 4 ? T - 4 * q : 4;
				/* p: set where nq >= 2, read by q6p_quad() only then */
				__m512i t[2][4], p[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};

				for (size_t l = 0; l < per && pf < pfe; l += 64, pf += 64)
					_mm_prefetch(pf, _MM_HINT_T1);

				/* two tokens at a time: 8 chains in flight (4 chains of
				 * 4 dependent VPDPBUSD a token left the multiply pipes
				 * waiting on their latency) */
				Q6P_UNROLL
				for (int k = 0; k < nq; k += 2) {
					const int nk = nq - k < 2 ? nq - k : 2;
					__m512i cl[2][2], ch[2][2];

					Q6P_UNROLL
					for (int i = 0; i < nk; i++) {
						const int32_t *bk = bs + 16 * (4 * q + k + i);
						const __m512i bl = Q6P_X4(bk + 4 * (2 * n));
						const __m512i bh = Q6P_X4(bk + 4 * (2 * n + 1));

						Q6P_UNROLL
						for (int e = 0; e < G; e++) {
							cl[i][e] = bl;
							ch[i][e] = bh;
						}
					}
					Q6P_UNROLL
					for (int u = 0; u < 4; u++)
						Q6P_UNROLL
						for (int i = 0; i < nk; i++) {
							const int8_t *x = xs + 256 * (4 * q + k + i);
							__m512i xl = Q6P_X4(x + 64 * (2 * n) + 16 * u);
							__m512i xh = Q6P_X4(x + 64 * (2 * n + 1) + 16 * u);

							/* one load for both groups */
							if (G > 1)
								__asm__("" : "+v"(xl), "+v"(xh));
							Q6P_UNROLL
							for (int e = 0; e < G; e++) {
								cl[i][e] = _mm512_dpbusd_epi32(cl[i][e], vl[e][u], xl);
								ch[i][e] = _mm512_dpbusd_epi32(ch[i][e], vh[e][u], xh);
							}
						}
					Q6P_UNROLL
					for (int i = 0; i < nk; i++)
						Q6P_UNROLL
						for (int e = 0; e < G; e++) {
							const __m512i v = _mm512_add_epi32(_mm512_mullo_epi32(cl[i][e], sl[e]),
											   _mm512_mullo_epi32(ch[i][e], sh[e]));

							if (n == 0) {
								th[e][4 * q + k + i] = v;
								continue;
							}
							t[e][k + i] = _mm512_add_epi32(v, th[e][4 * q + k + i]);
							if (k + i == 1)
								p[e] = q6p_pair(t[e][0], t[e][1]);
						}
				}
				if (n == 0)
					continue;
				Q6P_UNROLL
				for (int e = 0; e < G; e++)
					is[e][q] = q6p_quad(p[e], t[e], nq);
			}
		}
		Q6P_UNROLL
		for (int e = 0; e < G; e++)
			Q6P_UNROLL
			for (int q = 0; q < Q; q++)
				acc[e][q] = q6p_step(acc[e][q], g + e * gs + s * Q6P_SB, xd + 4 * (2 * (s - s0) + q),
						     is[e][q]);
	}
	Q6P_UNROLL
	for (int e = 0; e < G; e++)
		Q6P_UNROLL
		for (int q = 0; q < Q; q++)
			q6p_acc_store(a, o + 4 * e, q, T - 4 * q < 4 ? T - 4 * q : 4, acc[e][q]);
}

/* Three groups (rows o .. o + 11) at T = 3 or 5..8 tokens: 12 rows share
 * each activation broadcast (8 tokens 2048 x 2048 268 -> 273, 2048 x 5632
 * 263 -> 275 GFLOP/s, q6t20). The 24 value vectors leave no room for the
 * scales: they wait on the stack, read by VPMULLD as memory operands
 * through a pointer GCC cannot see through (else it keeps them in
 * registers and spills the values), and one token's 6 chains run at a
 * time. Each token's three groups are reduced together at once (lane 4 r
 * + e: row 4 e + r; lanes 4 r + 3 a copy of group 2's, never stored) and
 * stepped into its accumulator on the stack, so nothing lives from one
 * token to the next: reduced a quad of tokens at a time (a group's four
 * tokens, as q6p_group() does), the quad's sums did not fit beside the 24
 * values and GCC spilled ~40 ZMM a super-block, and a quad short of tokens
 * did a whole quad's work (7 tokens 2048 x 2048 265 -> 274, 8 tokens 274
 * -> 279; run at 3, 5 and 6 tokens too, 214 -> 219, 243 -> 258, 255 ->
 * 268, where two groups were faster before; 4 tokens, a whole quad, tie:
 * LEVELS.md q6z21). Its own function, never inlined: written into
 * q6p_group() (arrays of 3, even unused) it moved the 2..6-token bodies'
 * stack frames, 4 tokens 240 -> 235, 6 tokens 256 -> 244 GFLOP/s. */
Q6P_INLINE void q6p_group3(const struct kern_gemm_args *a, size_t o, int T, const int8_t *xa,
			   const int32_t *bias, const float *xd, size_t s0, size_t s1, const char *pf,
			   size_t pfn)
{
	const size_t per = q6p_pf_per(pfn, s0, s1, T);
	const char *const pfe = pf + pfn;
	const char *g = (const char *)a->w + o * a->w_stride;
	const size_t gs = 4 * a->w_stride;
	const __mmask16 m12 = 0x0fff;
	float accm[Q6P_TOK][16] __attribute__((aligned(64)));
	float dm[16] __attribute__((aligned(64)));
	float *ap = accm[0];
	float *dp = dm;

	/* opaque: GCC would keep them in registers and spill the values */
	__asm__("" : "+r"(ap), "+r"(dp));
	for (int k = 0; k < T; k++)
		_mm512_store_ps(ap + 16 * k,
				s0 > 0 ? _mm512_permutexvar_ps(q6p_swap_idx(),
							       _mm512_maskz_loadu_ps(m12, a->y + k * a->y_stride + o))
				       : _mm512_setzero_ps());
	for (size_t s = s0; s < s1; s++) {
		const int8_t *xs = xa + 256 * T * (s - s0);
		const int32_t *bs = bias + 16 * T * (s - s0);
		const float *xk = xd + 8 * (s - s0);
		__m512i th[3][Q6P_TOK];
		int32_t sc[3][2][16] __attribute__((aligned(64)));

		{
			/* the rows' d, lane 4 r + e = row 4 e + r's */
			const char *b = g + s * Q6P_SB + 832;
			__m256i h = _mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)b));

			h = _mm256_insert_epi64(h, *(const int64_t *)(b + gs), 1);
			h = _mm256_insert_epi64(h, *(const int64_t *)(b + 2 * gs), 2);
			h = _mm256_insert_epi64(h, *(const int64_t *)(b + 2 * gs), 3);
			_mm512_store_ps(dp, _mm512_permutexvar_ps(q6p_swap_idx(), _mm512_cvtph_ps(h)));
		}
		Q6P_UNROLL
		for (int n = 0; n < 2; n++) {
			__m512i vl[3][4], vh[3][4];

			Q6P_UNROLL
			for (int e = 0; e < 3; e++) {
				__m512i sl, sh;

				q6p_values(g + e * gs + s * Q6P_SB, n, vl[e], vh[e], &sl, &sh);
				_mm512_store_si512(sc[e][0], sl);
				_mm512_store_si512(sc[e][1], sh);
			}
			__asm__ volatile("" ::: "memory");

			Q6P_UNROLL
			for (int k = 0; k < T; k++) {
				const int32_t *bk = bs + 16 * k;
				const int8_t *x = xs + 256 * k;
				const __m512i bl = Q6P_X4(bk + 4 * (2 * n));
				const __m512i bh = Q6P_X4(bk + 4 * (2 * n + 1));
				__m512i cl[3], ch[3], t[3];

				if (k % 4 == 0)
					for (size_t l = 0; l < per && pf < pfe; l += 64, pf += 64)
						_mm_prefetch(pf, _MM_HINT_T1);
				Q6P_UNROLL
				for (int e = 0; e < 3; e++) {
					cl[e] = bl;
					ch[e] = bh;
				}
				Q6P_UNROLL
				for (int u = 0; u < 4; u++) {
					__m512i xl = Q6P_X4(x + 64 * (2 * n) + 16 * u);
					__m512i xh = Q6P_X4(x + 64 * (2 * n + 1) + 16 * u);

					/* one load for the three groups */
					__asm__("" : "+v"(xl), "+v"(xh));
					Q6P_UNROLL
					for (int e = 0; e < 3; e++) {
						cl[e] = _mm512_dpbusd_epi32(cl[e], vl[e][u], xl);
						ch[e] = _mm512_dpbusd_epi32(ch[e], vh[e][u], xh);
					}
				}
				Q6P_UNROLL
				for (int e = 0; e < 3; e++) {
					const int32_t *sp = sc[e][0];

					__asm__("" : "+r"(sp));
					const __m512i v = _mm512_add_epi32(_mm512_mullo_epi32(cl[e], _mm512_load_si512(sp)),
									   _mm512_mullo_epi32(ch[e], _mm512_load_si512(sp + 16)));

					if (n == 0)
						th[e][k] = v;
					else
						t[e] = _mm512_add_epi32(v, th[e][k]);
				}
				if (n == 0)
					continue;
				/* group 2 again in lanes 4 r + 3: its dwords 0 + 2 = its sum */
				const __m512i t2 = _mm512_add_epi32(t[2], _mm512_shuffle_epi32(t[2], _MM_PERM_CDAB));
				const __m512i is = q6p_pairs(q6p_pair(t[0], t[1]), t2);
				const __m512 dk = _mm512_mul_ps(_mm512_load_ps(dp), _mm512_set1_ps(xk[k]));

				_mm512_store_ps(ap + 16 * k, _mm512_add_ps(_mm512_load_ps(ap + 16 * k),
									   _mm512_mul_ps(dk, _mm512_cvtepi32_ps(is))));
			}
		}
	}
	for (int k = 0; k < T; k++)
		_mm512_mask_storeu_ps(a->y + k * a->y_stride + o, m12,
				      _mm512_permutexvar_ps(q6p_swap_idx(), _mm512_load_ps(ap + 16 * k)));
}

typedef void (*q6p_three_fn)(const struct kern_gemm_args *a, size_t o, const int8_t *xa, const int32_t *bias,
			     const float *xd, size_t s0, size_t s1, const char *pf, size_t pfn);

#define Q6P_G3(T)                                                                                     \
	static __attribute__((noinline)) void q6p_three##T(const struct kern_gemm_args *a, size_t o,  \
							   const int8_t *xa, const int32_t *bias,     \
							   const float *xd, size_t s0, size_t s1,     \
							   const char *pf, size_t pfn)                \
	{                                                                                             \
		q6p_group3(a, o, T, xa, bias, xd, s0, s1, pf, pfn);                                   \
	}
Q6P_G3(3)
Q6P_G3(5)
Q6P_G3(6)
Q6P_G3(7)
Q6P_G3(8)

/* Rows [o0, o1) (whole groups), T tokens; three groups at a time by
 * `three` where it is not NULL (q6p_three3/5..8()), else two. */
Q6P_INLINE void q6p_rows(const struct kern_gemm_args *a, size_t o0, size_t o1, int T, q6p_three_fn three)
{
	const size_t nsb = a->n_in / KERN_QKK, W = Q6P_WIN / (size_t)T;
	int8_t xa[256 * Q6P_WIN] __attribute__((aligned(64)));
	int32_t bias[16 * Q6P_WIN] __attribute__((aligned(64)));
	float xd[4 * 2 * Q6P_WIN] __attribute__((aligned(64)));

	const size_t gbytes = nsb * Q6P_SB, nw = (nsb + W - 1) / W;
	/* blocks of groups the windows take in turn (their bytes in L2),
	 * the next block prefetched into L2 meanwhile, linearly, a slice
	 * per group and window */
	const size_t blk = nw < Q6P_BLOCK / Q6P_BLOCK1 ? nw * Q6P_BLOCK1 : Q6P_BLOCK;
	/* at least a pair (one group a block lost the shared loads); with
	 * three, a multiple of three groups */
	const size_t gm = three != NULL ? 3 : 2;
	const size_t gb = gm < 3 ? (blk / gbytes > 2 ? blk / gbytes : 2)
				 : (blk / gbytes > 3 ? blk / gbytes / 3 * 3 : 3);

	for (size_t b0 = o0; b0 < o1; b0 += 4 * gb) {
		const size_t b1 = o1 - b0 > 4 * gb ? b0 + 4 * gb : o1;
		const char *nx = (const char *)a->w + b1 * a->w_stride;
		/* the call's last block prefetches the rows after o1: the
		 * pool's next chunk of this thread's region (kernels.c), the
		 * matrix's n_out rows being y_stride; a prefetch past the
		 * matrix never faults, at worst it reads a block for nothing */
		const size_t nend = b1 < o1 ? o1 : a->y_stride > o1 ? a->y_stride : o1;
		const size_t nxb = (nend - b1 > 4 * gb ? 4 * gb : nend - b1) / 4 * gbytes;
		const size_t slice = (nxb / (nw * (b1 - b0) / 4) + 63) & ~(size_t)63;
		size_t k = 0;

		for (size_t s0 = 0; s0 < nsb; s0 += W) {
			const size_t s1 = nsb - s0 > W ? s0 + W : nsb;

			/* one window: arranged once for all the blocks */
			if (nw > 1 || b0 == o0)
				q6p_act(a, T, s0, s1, xa, bias, xd);
			/* groups gm at a time, the rest (fewer) in one call */
			for (size_t o = b0; o < b1; o += 4 * gm, k += gm) {
				const size_t l0 = k * slice < nxb ? k * slice : nxb;
				const size_t l1 = (k + gm) * slice < nxb ? (k + gm) * slice : nxb;

				if (three != NULL && b1 - o >= 12)
					three(a, o, xa, bias, xd, s0, s1, nx + l0, l1 - l0);
				else if (b1 - o >= 8)
					q6p_group(a, o, 2, T, xa, bias, xd, s0, s1, nx + l0, l1 - l0);
				else
					q6p_group(a, o, 1, T, xa, bias, xd, s0, s1, nx + l0, l1 - l0);
			}
		}
	}
}

typedef void (*q6p_fn)(const struct kern_gemm_args *a, size_t o0, size_t o1);

#define Q6P_FN(T, THREE)                                                                      \
	static __attribute__((noinline)) void q6p_rows##T(const struct kern_gemm_args *a,      \
							  size_t o0, size_t o1)               \
	{                                                                                     \
		q6p_rows(a, o0, o1, T, THREE);                                                \
	}
Q6P_FN(1, NULL)
Q6P_FN(2, NULL)
Q6P_FN(3, q6p_three3)
Q6P_FN(4, NULL)
Q6P_FN(5, q6p_three5)
Q6P_FN(6, q6p_three6)
Q6P_FN(7, q6p_three7)
Q6P_FN(8, q6p_three8)

static const q6p_fn q6p_by_tok[Q6P_TOK + 1] = {NULL,	    q6p_rows1, q6p_rows2, q6p_rows3, q6p_rows4,
					      q6p_rows5, q6p_rows6, q6p_rows7, q6p_rows8};

int kern_avx512_q6p_small(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	if (a->n_tok == 0 || a->n_tok > Q6P_TOK || a->xk == NULL)
		return 0;
	q6p_by_tok[a->n_tok](a, o0, o1);
	return 1;
}
#endif
