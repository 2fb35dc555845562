/*
 * kernels.c - the public kernel calls other than the matmul driver (see
 * kernels.h): type support and row packing, the activation summaries,
 * and thin calls into the chosen level's table; the level and its table
 * are chosen in kernels_select.c, the threaded matmul driver and its
 * scratch are kernels_matmul.c.
 *
 * Which path runs (level from kern_init(); tiles are rows x tokens):
 *   level   F32 / F16 / BF16 weights            Q8_0 / Q4_0 weights
 *   scalar  kernels_ref.c, one dot per pair     activations -> Q8 blocks, int dot
 *   avx2    FMA on 8 floats, weights widened    activations -> Q8 blocks (exact
 *           in registers (F16C / bf16 shift);   SIMD copy of the reference rule);
 *           tiles 4x2, decode 4x1               8 rows interleaved per vector
 *                                               (lane = row), one fma per block;
 *                                               prefill 16x2 on packed blocks
 *                                               (kernels_qgemm_avx2.c); decode
 *                                               8 rows in file layout, sums
 *                                               folded into row lanes after
 *   avx512  FMA on 16 floats (ZMM), tiles 4x4,  (see LEVELS.md: the avx2 code
 *           decode 4x1                          unless this level has its own)
 * Each operation is taken from the highest level that has it (LEVELS.md,
 * kern_resolve()).
 * Decode (one token) streams each weight row once. Prefill tiles reuse each
 * loaded weight vector for several tokens, and tokens are taken in blocks
 * of 64 so a block's activations stay in cache while a thread's rows pass.
 *
 * XNNPACK (Debian's 2022 build, xnn_create_fully_connected_nc_f32) was
 * measured against the AVX2 F32 path for prefill, 512 tokens x 2048 ->
 * 2048, one thread on a Zen 3: 30.9 GFLOP/s against our 41.8 (and 10-14 vs
 * 12-14 on a loaded machine), plus ~40 ms to pack each weight matrix into
 * a second copy it owns. Not worth it, so it is not used (bench/fc_compare.c
 * re-measures both on the machine at hand).
 *
 * Attention blocks (kern_attn_scores, kern_attn_accum, kern_max,
 * kern_exp_sum, kern_fp16_to_fp32_row; engine/compute/cpu/attention.c drives them) run
 * on the caller's thread: scalar is the reference (expf); avx2
 * (attention_avx2.c) has score
 * tiles of 2 queries x 4 keys, value tiles of 4 queries x 16 columns (one
 * query x 64 for decode), a polynomial exp and F16C; avx512 uses the avx2
 * functions (head-sized rows gain nothing from ZMM).
 *
 * The gated SiLU (kern_silu_mul) has a scalar reference (expf) and an
 * avx2 version (act_avx2.c) on the same polynomial exp (math_avx2.h).
 *
 * Packed rows (kernels.h KERN_PACKED): a packed type id runs the level's
 * pgemv/pgemm on the same chunks (whole groups: kernels_matmul.c's
 * KERN_ROW_ALIGN is a multiple of every group), with the K-quant
 * activations always made per super-block; kern_pack_rows() is the
 * generic in-place interleave.
 */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "quants.h"

int kern_supports(uint32_t t)
{
	if (t & KERN_PACKED) {
		t &= ~KERN_PACKED;
		return t < DTYPE_COUNT && kern_ops_ref.gemm[t] != NULL &&
		       kern_ops_active()->pack_rows[t] != 0;
	}
	return t < DTYPE_COUNT && kern_ops_ref.gemm[t] != NULL;
}

uint32_t kern_pack_type(uint32_t t, size_t n_out, size_t n_in)
{
	const struct kern_ops *ops = kern_ops_active();

	if (t >= DTYPE_COUNT || ops->pack_rows[t] == 0 || n_out == 0 ||
	    n_out % ops->pack_rows[t] != 0 || dtype_block(t) == 0 || n_in % dtype_block(t) != 0)
		return t;
	return t | KERN_PACKED;
}

static int kern__pack(uint32_t t, void *w, size_t n_out, size_t n_in, int unpack, char *err)
{
	size_t g, nb, bs;
	void *tmp;

	if (kern_pack_type(t, n_out, n_in) != (t | KERN_PACKED))
		return ember_seterr(err, EMBER_EINVAL, "%s: no packed rows for %zu x %zu at %s",
				    t < DTYPE_COUNT ? dtype_name(t) : "type", n_out, n_in,
				    kern_ops_active()->name);
	g = kern_ops_active()->pack_rows[t];
	nb = n_in / dtype_block(t);
	bs = dtype_type_size(t);
	if ((tmp = malloc(g * nb * bs)) == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "packing %zu rows", g);
	(kern_ops_active()->pack_fn[t] ? kern_ops_active()->pack_fn[t]
					: kern_pack_groups)(w, n_out, nb, bs, g, unpack, tmp);
	free(tmp);
	return 0;
}

int kern_pack_rows(uint32_t t, void *w, size_t n_out, size_t n_in, char *err)
{
	return kern__pack(t, w, n_out, n_in, 0, err);
}

int kern_unpack_rows(uint32_t t, void *w, size_t n_out, size_t n_in, char *err)
{
	return kern__pack(t, w, n_out, n_in, 1, err);
}

void kern_act_summarize(const struct kern_block_q8a *x, size_t nb, float *xd, int32_t *xs8)
{
	size_t b, pad = kern_act_groups_pad(nb);

	for (b = 0; b < nb; b++) {
		int32_t s = 0;
#if defined(__SSE2__)
		/* PSADBW sums unsigned bytes: q ^ 0x80 is q + 128 as one, so
		 * the block's sum is theirs less 32 * 128 (the compiler's
		 * widening of each byte took ~3x the instructions; 0.7% of a
		 * TinyLlama pp512 with the AMX bf16 tiles, Emerald Rapids) */
		const __m128i m = _mm_set1_epi8((char)0x80), z = _mm_setzero_si128();
		__m128i lo = _mm_loadu_si128((const __m128i *)x[b].qs);
		__m128i hi = _mm_loadu_si128((const __m128i *)(x[b].qs + 16));
		__m128i t = _mm_add_epi64(_mm_sad_epu8(_mm_xor_si128(lo, m), z),
					  _mm_sad_epu8(_mm_xor_si128(hi, m), z));

		s = _mm_cvtsi128_si32(t) + _mm_cvtsi128_si32(_mm_unpackhi_epi64(t, t)) -
		    KERN_QK * 128;
#else
		for (int j = 0; j < KERN_QK; j++)
			s += x[b].qs[j];
#endif
		xd[b] = x[b].d;
		xs8[b] = 8 * s;
	}
	for (; b < pad; b++) {
		xd[b] = 0.0f;
		xs8[b] = 0;
	}
}

void kern_attn_scores(const float *q, size_t ld_q, const float *k, size_t d, const float *bias,
		      float scale, float *s, size_t ld_s, size_t nq, size_t nk)
{
	kern__ops->attn_scores(q, ld_q, k, d, bias, scale, s, ld_s, nq, nk);
}

void kern_attn_accum(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
		     const float *v, size_t d, size_t nq, size_t nk)
{
	kern__ops->attn_accum(o, ld_o, r, p, ld_p, v, d, nq, nk);
}

int kern_attn_f16_rows(void)
{
	const struct kern_ops *ops = kern_ops_active();

	return ops->attn_scores_f16 != NULL && ops->attn_accum_f16 != NULL;
}

void kern_attn_scores_f16(const float *q, size_t ld_q, const uint16_t *k, size_t d,
			  const float *bias, float scale, float *s, size_t ld_s, size_t nq, size_t nk)
{
	kern__ops->attn_scores_f16(q, ld_q, k, d, bias, scale, s, ld_s, nq, nk);
}

void kern_attn_accum_f16(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			 const uint16_t *v, size_t d, size_t nq, size_t nk)
{
	kern__ops->attn_accum_f16(o, ld_o, r, p, ld_p, v, d, nq, nk);
}

void kern_fp16_to_fp32_row(const uint16_t *src, float *dst, size_t n)
{
	kern__ops->fp16_row(src, dst, n);
}

void kern_fp32_to_fp16_row(const float *src, uint16_t *dst, size_t n)
{
	kern__ops->fp16_from_row(src, dst, n);
}

float kern_max(const float *x, size_t n)
{
	return kern__ops->max(x, n);
}

float kern_exp_sum(float *x, size_t n, float m)
{
	return kern__ops->exp_sum(x, n, m);
}

void kern_silu_mul(float *y, const float *g, size_t n)
{
	kern__ops->silu_mul(y, g, n);
}

void kern_norm_rows(const struct kern_norm *nm, const float *x, float *res, const float *add,
		    float *out, size_t n)
{
	kern__ops->norm_rows(nm, x, res, add, out, n);
}

void kern_matmul(tpool_t pool, uint32_t wtype, const void *w, size_t n_out, size_t n_in,
		 const float *x, size_t n_tok, float *y, void *scratch)
{
	const struct kern_mm_part part = { w, n_out, y, 0 };

	kern_matmul_n(pool, wtype, n_in, &part, 1, x, n_tok, scratch);
}

void kern_matmul_n(tpool_t pool, uint32_t wtype, size_t n_in, const struct kern_mm_part *parts,
		   size_t n, const float *x, size_t n_tok, void *scratch)
{
	kern_matmul_n_pre(pool, wtype, n_in, parts, n, x, n_tok, scratch, NULL, NULL, 1);
}

void kern_matmul_n_pre(tpool_t pool, uint32_t wtype, size_t n_in,
		       const struct kern_mm_part *parts, size_t n, const float *x, size_t n_tok,
		       void *scratch, kern_rows_fn pre, void *pre_ctx, size_t pre_rows)
{
	kern_matmul_n_split(pool, wtype, n_in, parts, n, x, n_tok, n_tok, scratch, pre, pre_ctx,
			    pre_rows);
}

void kern_matmul_n_split(tpool_t pool, uint32_t wtype, size_t n_in,
			 const struct kern_mm_part *parts, size_t n, const float *x, size_t n_tok,
			 size_t n_exact, void *scratch, kern_rows_fn pre, void *pre_ctx,
			 size_t pre_rows)
{
	const struct kern_pre p = {pre, pre_ctx, pre_rows, NULL, NULL, NULL};

	kern_matmul_n_fused(pool, wtype, n_in, parts, n, x, n_tok, n_exact, scratch, &p);
}

void kern_silu_mul_bf16(const float *y, const float *g, size_t n, uint16_t *dst, size_t step)
{
#if defined(__x86_64__)
	kern_avx512_silu_mul_bf16(y, g, n, dst, step);
#else
	(void)y, (void)g, (void)n, (void)dst, (void)step;
	abort(); /* kern_bf16_plain() is 0 */
#endif
}

void kern_norm_rows_bf16(const struct kern_norm *nm, const float *x, float *res, const float *add,
			 uint16_t *const dst[], size_t step, size_t n)
{
#if defined(__x86_64__)
	kern_avx512_norm_rows_bf16(nm, x, res, add, dst, step, n);
#else
	(void)nm, (void)x, (void)res, (void)add, (void)dst, (void)step, (void)n;
	abort(); /* kern_bf16_plain() is 0 */
#endif
}
