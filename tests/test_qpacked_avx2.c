/*
 * test_qpacked_avx2.c - the avx2 level's Q4_0 and Q8_0 products on packed
 * weight rows (kernels.h KERN_PACKED; kernels_impl.h kern_avx2_pack_q8_0:
 * groups of 16 rows tiled block by block) against the same level's
 * file-layout products, bit for bit: random blocks (Q8_0's -128
 * included), one token (the packed GEMV) and batches (the packed GEMM:
 * 2 .. 70 tokens: the small-batch passes up to 12, the prefill tiles
 * past them and past their 64-token blocks), K across its 16-block
 * packing steps, row ranges cut on group multiples; the packer against
 * the layout written out here, and its round trip; the table wiring;
 * a batch of k = 2 .. 16 tokens equal to its k single steps. Q6_K
 * packed in 8-row groups with rows in lanes (kquants_pack_avx2.c): its
 * layout and round trip, and its GEMV and batches at the extremes.
 * Skipped with a message where the CPU lacks AVX2.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "dtype.h"
#include "ember.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "quants.h"
#include "testutil.h"

#if defined(__x86_64__)
static uint64_t q2_rng = 0x2545f4914f6cdd1dull;

/* The layout of the contract, written independently of the packer:
 * block b of group g (rows 16 g + r) in the 16 bs bytes at
 * g 16 row + b 16 bs: row r's scale at 2 r, its qs byte j at
 * 32 + 64 (j / 4) + 4 r + j % 4 (as the bytes are: no + 128). */
static void q2_pack(const uint8_t *w, uint8_t *p, size_t n_out, size_t row, size_t bs)
{
	for (size_t o = 0; o < n_out; o++)
		for (size_t b = 0; b < row / bs; b++) {
			const uint8_t *f = w + o * row + b * bs;
			uint8_t *blk = p + o / 16 * 16 * row + b * 16 * bs;
			const size_t r = o % 16;

			memcpy(blk + 2 * r, f, 2);
			for (size_t j = 0; j < bs - 2; j++)
				blk[32 + 64 * (j / 4) + 4 * r + j % 4] = f[2 + j];
		}
}

static int q2_skip(void)
{
	if (kern_level_runs(CPU_LEVEL_AVX2))
		return 0;
	fprintf(stderr, "qpacked_avx2: skipping: this CPU lacks the avx2 level\n");
	return 1;
}

/* Random blocks with sane fp16 scales of either sign; qs random bytes,
 * so Q8_0's -128 (0x80) comes up. */
static void q2_fill(uint32_t t, uint8_t *w, size_t bytes)
{
	const size_t bs = dtype_type_size(t);

	for (size_t i = 0; i < bytes; i++)
		w[i] = (uint8_t)test_rand(&q2_rng);
	for (size_t b = 0; b < bytes / bs; b++) {
		const float d = (float)(test_rand(&q2_rng) % 1000 + 1) * 1e-4f;
		const uint16_t h = kern_fp32_to_fp16((test_rand(&q2_rng) & 1) ? d : -d);
		memcpy(w + b * bs, &h, 2);
	}
}

/* One case: n_out x n_in weights in the file layout (w) and packed (wp),
 * n_tok activation rows quantized with their sums (an outlier of `big`
 * where the draw & odds is 0), and the product's arguments over them
 * (a.w = w; a.y to set). */
struct q2_case {
	uint8_t *w, *wp, *xa;
	float *x, *xd;
	int32_t *xs8;
	size_t act_row;
	struct kern_gemm_args a;
};

static void q2_case_make(struct q2_case *c, uint32_t t, size_t n_out, size_t n_in, size_t n_tok,
			 uint32_t odds, float big)
{
	const size_t bs = dtype_type_size(t), row = (size_t)dtype_row_size(t, n_in);
	const size_t nb = n_in / KERN_QK;

	c->act_row = nb * sizeof(struct kern_block_q8a);
	c->w = test_alloc64(row * n_out);
	c->wp = test_alloc64(row * n_out);
	c->xa = test_alloc64(c->act_row * n_tok);
	c->x = test_alloc64(n_in * sizeof(float));
	c->a = (struct kern_gemm_args){
		.w = c->w,
		.w_stride = row,
		.n_in = n_in,
		.x = c->xa,
		.x_stride = c->act_row,
		.n_tok = n_tok,
		.y_stride = n_out,
		.xd_stride = kern_act_groups_pad(nb),
	};
	c->xd = test_alloc64(c->a.xd_stride * n_tok * sizeof(float));
	c->xs8 = test_alloc64(c->a.xd_stride * n_tok * sizeof(int32_t));
	q2_fill(t, c->w, row * n_out);
	q2_pack(c->w, c->wp, n_out, row, bs);
	for (size_t k = 0; k < n_tok; k++) {
		struct kern_block_q8a *blk = (struct kern_block_q8a *)(c->xa + k * c->act_row);
		for (size_t i = 0; i < n_in; i++)
			c->x[i] = ((float)(test_rand(&q2_rng) & 0xffff) / 32768.0f - 1.0f) *
				  ((test_rand(&q2_rng) & odds) ? 1 : big);
		kern_ops_ref.quantize_act(c->x, blk, n_in);
		kern_act_summarize(blk, nb, c->xd + k * c->a.xd_stride,
				   c->xs8 + k * c->a.xd_stride);
	}
	c->a.xd = c->xd;
	c->a.xs8 = c->xs8;
}

static void q2_case_free(struct q2_case *c)
{
	free(c->w);
	free(c->wp);
	free(c->xa);
	free(c->x);
	free(c->xd);
	free(c->xs8);
}

/* avx2's file-layout gemv/gemm against its packed pgemv and pgemm for
 * n_out x n_in and n_tok tokens, the rows cut at `cut` (a group
 * multiple; n_out: whole). */
static void q2_check(uint32_t t, size_t n_out, size_t n_in, size_t n_tok, size_t cut)
{
	const struct kern_ops *ops = kern_ops_for(CPU_LEVEL_AVX2);
	const kern_gemm_fn fs[] = {ops->pgemm[t], ops->pgemv[t]};
	struct q2_case c;
	float *y, *yp;

	q2_case_make(&c, t, n_out, n_in, n_tok, 31, 8);
	y = test_alloc64(n_out * n_tok * sizeof(float));
	yp = test_alloc64(n_out * n_tok * sizeof(float));
	memset(y, 0x5a, n_out * n_tok * sizeof(float));
	c.a.y = y;
	(n_tok == 1 ? ops->gemv : ops->gemm)[t](&c.a, 0, n_out);
	c.a.w = c.wp;
	c.a.y = yp;
	/* the packed GEMM (for any count, one token included) and the
	 * packed GEMV (2+ tokens: it runs the GEMM) */
	for (size_t f = 0; f < 2; f++) {
		memset(yp, 0xa5, n_out * n_tok * sizeof(float));
		fs[f](&c.a, 0, cut);
		fs[f](&c.a, cut, n_out);
		ck_assert_msg(memcmp(y, yp, n_out * n_tok * sizeof(float)) == 0,
			      "%s out %zu in %zu tok %zu cut %zu: packed %s differs",
			      dtype_name(t), n_out, n_in, n_tok, cut, f ? "gemv" : "gemm");
	}
	q2_case_free(&c);
	free(y);
	free(yp);
}

START_TEST(avx2_packed_products_equal_the_file_layout_bit_for_bit)
{
	static const uint32_t types[] = {DTYPE_Q4_0, DTYPE_Q8_0};
	static const size_t toks[] = {1, 2, 3, 4, 5, 8, 16, 17, 64, 70};
	/* 96: three blocks; 1056: 33 blocks, past two 16-block packing steps */
	static const size_t ins[] = {32, 96, 1056};
	static const size_t outs[] = {16, 48};

	if (q2_skip())
		return;
	for (size_t t = 0; t < 2; t++)
		for (size_t i = 0; i < sizeof(ins) / sizeof(ins[0]); i++)
			for (size_t o = 0; o < sizeof(outs) / sizeof(outs[0]); o++)
				for (size_t k = 0; k < sizeof(toks) / sizeof(toks[0]); k++) {
					q2_check(types[t], outs[o], ins[i], toks[k], 0);
					q2_check(types[t], outs[o], ins[i], toks[k], 16);
				}
}
END_TEST

/* A batch of k = 2 .. 16 tokens through the packed GEMM (the small-batch
 * passes of kernels_qgemm_avx2.c up to 12: 4 tokens a pass, then 3, 2 or
 * 1; the prefill tile past them) gives
 * each token the bits of the packed one-token GEMV on that token alone,
 * for n_out rows cut at `cut` (group multiples, ragged group counts). */
static void q2_check_steps(uint32_t t, size_t n_out, size_t n_in, size_t n_tok, size_t cut)
{
	const struct kern_ops *ops = kern_ops_for(CPU_LEVEL_AVX2);
	struct q2_case c;
	float *y, *y1;

	q2_case_make(&c, t, n_out, n_in, n_tok, 7, 64); /* full-range activations too */
	y = test_alloc64(n_out * n_tok * sizeof(float));
	y1 = test_alloc64(n_out * sizeof(float));
	c.a.w = c.wp;
	c.a.y = y;
	memset(y, 0xa5, n_out * n_tok * sizeof(float));
	ops->pgemm[t](&c.a, 0, cut);
	ops->pgemm[t](&c.a, cut, n_out);
	for (size_t k = 0; k < n_tok; k++) {
		struct kern_gemm_args one = c.a;

		one.n_tok = 1;
		one.x = c.xa + k * c.act_row;
		one.xd = c.xd + k * c.a.xd_stride;
		one.xs8 = c.xs8 + k * c.a.xd_stride;
		one.y = y1;
		memset(y1, 0x5a, n_out * sizeof(float));
		ops->pgemv[t](&one, 0, n_out);
		ck_assert_msg(memcmp(y + k * n_out, y1, n_out * sizeof(float)) == 0,
			      "%s out %zu in %zu: token %zu of %zu differs from its single step",
			      dtype_name(t), n_out, n_in, k, n_tok);
	}
	q2_case_free(&c);
	free(y);
	free(y1);
}

START_TEST(avx2_packed_batch_of_k_equals_k_single_steps)
{
	static const uint32_t types[] = {DTYPE_Q4_0, DTYPE_Q8_0};
	static const size_t ins[] = {32, 96, 1056};
	static const size_t outs[] = {16, 48, 80};

	if (q2_skip())
		return;
	for (size_t t = 0; t < 2; t++)
		for (size_t i = 0; i < sizeof(ins) / sizeof(ins[0]); i++)
			for (size_t o = 0; o < sizeof(outs) / sizeof(outs[0]); o++)
				for (size_t k = 2; k <= 16; k++)
					q2_check_steps(types[t], outs[o], ins[i], k,
						       outs[o] > 16 ? 16 * (1 + k % 2) : 0);
}
END_TEST

/* The packer (the level's pack_fn, what the model load runs through
 * kern_pack_rows) writes the layout above, and unpacking restores the
 * file bytes. */
START_TEST(avx2_packer_writes_the_layout_and_round_trips)
{
	static const uint32_t types[] = {DTYPE_Q4_0, DTYPE_Q8_0};
	const struct kern_ops *ops = kern_ops_for(CPU_LEVEL_AVX2);
	const size_t n_out = 48, n_in = 320;

	for (size_t ti = 0; ti < 2; ti++) {
		const uint32_t t = types[ti];
		const size_t bs = dtype_type_size(t), row = (size_t)dtype_row_size(t, n_in);
		uint8_t *w = test_alloc64(row * n_out), *c = test_alloc64(row * n_out);
		uint8_t *q = test_alloc64(row * n_out), *tmp = test_alloc64(16 * row);

		q2_fill(t, w, row * n_out);
		memcpy(c, w, row * n_out);
		q2_pack(c, q, n_out, row, bs);
		ck_assert_uint_eq(ops->pack_rows[t], 16);
		ck_assert_ptr_nonnull(ops->pack_fn[t]);
		ops->pack_fn[t](w, n_out, n_in / KERN_QK, bs, 16, 0, tmp);
		ck_assert_msg(memcmp(w, q, row * n_out) == 0, "%s: layout", dtype_name(t));
		ops->pack_fn[t](w, n_out, n_in / KERN_QK, bs, 16, 1, tmp);
		ck_assert_msg(memcmp(w, c, row * n_out) == 0, "%s: round trip", dtype_name(t));
		free(w);
		free(c);
		free(q);
		free(tmp);
	}
}
END_TEST

/* Packed Q6_K's contract (kquants_gemv_avx2.c kl_unpack_pk6()), written
 * from the file's 6-bit values independently of the packer: super-block
 * s of group g (rows 8 g + r) at g 8 row + s 8 210; element 4c + e of
 * 32-block 4n + v (v < 3) of row r in the low 6 bits of byte
 * 32 (24 n + 3 c + v) + 4 r + e, bits 2v, 2v + 1 of 32-block 4n + 3's
 * on top of it; row r's scales 4i .. 4i + 3 at 1536 + 32 i + 4 r; its d
 * at 1664 + 2 r. */
static uint8_t q2_q6_value(const uint8_t *b, size_t i) /* quants.h's Q6_K */
{
	const size_t n = i / 128, k = i % 128 / 32, l = i % 32;
	const uint8_t ql = b[64 * n + 32 * (k % 2) + l], qh = b[128 + 32 * n + l];

	return (uint8_t)((k < 2 ? ql & 15 : ql >> 4) | ((qh >> (2 * k)) & 3) << 4);
}

static void q2_q6_pack(const uint8_t *w, uint8_t *p, size_t n_out, size_t nsb)
{
	const size_t bs = sizeof(struct kern_block_q6_k), row = nsb * bs;

	memset(p, 0, n_out * row);
	for (size_t o = 0; o < n_out; o++)
		for (size_t s = 0; s < nsb; s++) {
			const uint8_t *f = w + o * row + s * bs;
			uint8_t *blk = p + o / 8 * 8 * row + s * 8 * bs;
			const size_t r = o % 8;
			for (size_t i = 0; i < 256; i++) {
				const size_t j = i / 32, n = j / 4, k = j % 4, c = i % 32 / 4;
				const uint8_t q = q2_q6_value(f, i);
				if (k < 3) {
					blk[32 * (24 * n + 3 * c + k) + 4 * r + i % 4] |= q;
					continue;
				}
				for (size_t v = 0; v < 3; v++)
					blk[32 * (24 * n + 3 * c + v) + 4 * r + i % 4] |=
						(uint8_t)(((q >> (2 * v)) & 3) << 6);
			}
			for (size_t i = 0; i < 4; i++)
				memcpy(blk + 1536 + 32 * i + 4 * r, f + 192 + 4 * i, 4);
			memcpy(blk + 1664 + 2 * r, f + 208, 2);
		}
}

/* The avx2 Q6_K packer writes the layout above and unpacks to the file
 * bytes (random bytes: every 6-bit value, scale and d pattern). */
START_TEST(avx2_q6_k_packer_writes_the_layout_and_round_trips)
{
	if (q2_skip())
		return;

	const struct kern_ops *ops = kern_ops_for(CPU_LEVEL_AVX2);
	const size_t n_out = 24, nsb = 3, bs = sizeof(struct kern_block_q6_k), row = nsb * bs;
	uint8_t *w = test_alloc64(row * n_out), *c = test_alloc64(row * n_out);
	uint8_t *q = test_alloc64(row * n_out), *tmp = test_alloc64(8 * row);
	for (size_t i = 0; i < row * n_out; i++)
		w[i] = (uint8_t)test_rand(&q2_rng);
	memcpy(c, w, row * n_out);
	q2_q6_pack(c, q, n_out, nsb);
	ck_assert_uint_eq(ops->pack_rows[DTYPE_Q6_K], 8);
	ops->pack_fn[DTYPE_Q6_K](w, n_out, nsb, bs, 8, 0, tmp);
	ck_assert_msg(memcmp(w, q, row * n_out) == 0, "Q6_K: layout");
	ops->pack_fn[DTYPE_Q6_K](w, n_out, nsb, bs, 8, 1, tmp);
	ck_assert_msg(memcmp(w, c, row * n_out) == 0, "Q6_K: round trip");
	free(w);
	free(c);
	free(q);
	free(tmp);
}
END_TEST

/* Packed Q6_K at the extremes (every 6-bit value 63 or 0, scales 127 /
 * -128, activations at +-127 after quantizing, so the int16 pair sums
 * reach 2 x 63 x 127 and the -32 offset its largest) and on random
 * blocks: the packed GEMV equals the file-layout GEMV bit for bit, and a
 * batch of 8 copies of the token (the small-batch step, file layout and
 * packed) gives that result in every column. */
START_TEST(avx2_q6_k_packed_extremes_and_copies_equal_the_gemv)
{
	if (q2_skip())
		return;

	const struct kern_ops *ops = kern_ops_for(CPU_LEVEL_AVX2);
	const size_t n_out = 24, n_in = 512, nsb = n_in / KERN_QKK, T = 8;
	const size_t bs = sizeof(struct kern_block_q6_k), row = nsb * bs;
	uint8_t *w = test_alloc64(row * n_out), *wp = test_alloc64(row * n_out);
	uint8_t *tmp = test_alloc64(8 * row);
	float *x = test_alloc64(sizeof(float) * n_in), *y1 = test_alloc64(sizeof(float) * n_out);
	float *y0 = test_alloc64(sizeof(float) * n_out);
	float *yb = test_alloc64(sizeof(float) * n_out * T);
	struct kern_block_q8_k *xk = test_alloc64(sizeof(*xk) * nsb * T);
	for (int e = 0; e < 5; e++) {
		const uint8_t qb = e < 2 ? 0xff : 0x00; /* q 63 or 0 */
		for (size_t b = 0; b < n_out * nsb; b++) {
			uint8_t *blk = w + b * bs;
			if (e == 4) {
				for (size_t i = 0; i < bs; i++)
					blk[i] = (uint8_t)test_rand(&q2_rng);
			} else {
				memset(blk, qb, 192);
				for (size_t i = 0; i < 16; i++) /* 127, -128 by turns (e odd) */
					blk[192 + i] = (uint8_t)(e % 2 && i % 2 ? 0x80 : 0x7f);
			}
			const uint16_t h = kern_fp32_to_fp16((float)(b % 7 + 1) * 1e-3f);
			memcpy(blk + 208, &h, 2);
		}
		for (size_t i = 0; i < n_in; i++) /* +-amax: every quantized byte +-127 */
			x[i] = e == 4 ? (float)((int)(test_rand(&q2_rng) % 2001) - 1000) / 300.0f
			       : (e == 1 ? (i % 3 ? -2.5f : 2.5f) : (e == 2 ? -2.5f : 2.5f));
		for (size_t t = 0; t < T; t++)
			ops->quantize_act_q8k(x, xk + t * nsb, n_in);
		memcpy(wp, w, row * n_out);
		ops->pack_fn[DTYPE_Q6_K](wp, n_out, nsb, bs, 8, 0, tmp);
		struct kern_gemm_args a = {.w = w, .w_stride = row, .n_in = n_in, .x = x,
					   .x_stride = n_in * 4, .n_tok = 1, .y = y0,
					   .y_stride = n_out, .xk = xk};
		ops->gemv[DTYPE_Q6_K](&a, 0, n_out);
		a.w = wp;
		a.y = y1;
		ops->pgemv[DTYPE_Q6_K](&a, 0, n_out);
		ck_assert_msg(memcmp(y0, y1, sizeof(float) * n_out) == 0, "case %d: packed GEMV", e);
		for (int pk = 0; pk < 2; pk++) {
			a.w = pk ? wp : w;
			a.n_tok = T;
			a.y = yb;
			memset(yb, 0x5a, sizeof(float) * n_out * T);
			(pk ? ops->pgemm : ops->gemm)[DTYPE_Q6_K](&a, 0, n_out);
			for (size_t t = 0; t < T; t++)
				ck_assert_msg(memcmp(y0, yb + t * n_out, sizeof(float) * n_out) == 0,
					      "case %d: %s batch, token %zu", e, pk ? "packed" : "file",
					      t);
		}
	}
	free(w);
	free(wp);
	free(tmp);
	free(x);
	free(y0);
	free(y1);
	free(yb);
	free(xk);
}
END_TEST
#endif

/* A process capped at avx2 packs Q4_0 / Q8_0 (16-row groups) and Q4_K,
 * Q6_K (8-row groups, rows in lanes) with the avx2 level's own packers and
 * kernels; avx512 (and amx) keep theirs. */
START_TEST(avx2_packs_q4_0_q8_0_q4_k_q6_k_with_its_own_kernels)
{
#if defined(__x86_64__)
	struct cpu_features f;
	struct kern_ops ops;
	struct kern_origin org;

	memset(&f, 0xff, sizeof(f));
	ck_assert_int_eq(kern_resolve(&f, CPU_LEVEL_AVX2, &ops, &org), CPU_LEVEL_AVX2);
	for (uint32_t t = 0; t < DTYPE_COUNT; t++) {
		if (t == DTYPE_Q4_K || t == DTYPE_Q6_K) {
			const int six = t == DTYPE_Q6_K;
			ck_assert_uint_eq(ops.pack_rows[t], 8);
			ck_assert(ops.pgemm[t] == (six ? kern_avx2_pgemm_q6_k : kern_avx2_pgemm_q4_k));
			ck_assert(ops.pgemv[t] == (six ? kern_avx2_pgemm_q6_k : kern_avx2_pgemm_q4_k));
			ck_assert(ops.pack_fn[t] == (six ? kern_avx2_pack_q6_k : kern_avx2_pack_q4_k));
			ck_assert_int_eq(org.gemm[t], CPU_LEVEL_AVX2);
			continue;
		}
		if (t != DTYPE_Q4_0 && t != DTYPE_Q8_0) {
			ck_assert_uint_eq(ops.pack_rows[t], 0);
			continue;
		}
		const int q8 = t == DTYPE_Q8_0;
		ck_assert_uint_eq(ops.pack_rows[t], 16);
		ck_assert(ops.pgemm[t] == (q8 ? kern_avx2_pgemm_q8_0 : kern_avx2_pgemm_q4_0));
		ck_assert(ops.pgemv[t] == (q8 ? kern_avx2_pgemv_q8_0 : kern_avx2_pgemv_q4_0));
		ck_assert(ops.pack_fn[t] == (q8 ? kern_avx2_pack_q8_0 : kern_avx2_pack_q4_0));
		ck_assert_int_eq(org.gemm[t], CPU_LEVEL_AVX2);
	}
	ck_assert_int_eq(kern_resolve(&f, CPU_LEVEL_AVX512, &ops, NULL), CPU_LEVEL_AVX512);
	ck_assert(ops.pack_fn[DTYPE_Q8_0] == kern_avx512_pack_q8_0);
	ck_assert(ops.pgemv[DTYPE_Q4_0] == kern_avx512_pgemv_q4_0);
	ck_assert(ops.pgemm[DTYPE_Q4_K] != kern_avx2_pgemm_q4_k);
	ck_assert(ops.pack_fn[DTYPE_Q4_K] != kern_avx2_pack_q4_k);
	ck_assert(ops.pack_fn[DTYPE_Q6_K] != kern_avx2_pack_q6_k);
	ck_assert(ops.pgemm[DTYPE_Q6_K] != kern_avx2_pgemm_q6_k);
#endif
}
END_TEST

Suite *suite_qpacked_avx2(void)
{
	Suite *s = suite_create("qpacked_avx2");
	TCase *tc = tcase_create("avx2");

	tcase_set_timeout(tc, 120);
#if defined(__x86_64__)
	tcase_add_test(tc, avx2_packed_products_equal_the_file_layout_bit_for_bit);
	tcase_add_test(tc, avx2_packed_batch_of_k_equals_k_single_steps);
	tcase_add_test(tc, avx2_packer_writes_the_layout_and_round_trips);
	tcase_add_test(tc, avx2_q6_k_packer_writes_the_layout_and_round_trips);
	tcase_add_test(tc, avx2_q6_k_packed_extremes_and_copies_equal_the_gemv);
#endif
	tcase_add_test(tc, avx2_packs_q4_0_q8_0_q4_k_q6_k_with_its_own_kernels);
	suite_add_tcase(s, tc);
	return s;
}
