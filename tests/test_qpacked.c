/*
 * test_qpacked.c - the avx512 level's Q4_0 and Q8_0 products on packed
 * weight rows (kernels.h KERN_PACKED: each group of 16 rows interleaved
 * block by block, block b of the group's rows in the 16 * type_size
 * bytes at group_base + b * 16 * type_size, tiled: qp_pack)
 * against the same level's file-layout products, bit for
 * bit: random blocks, token counts across the one-token GEMV, the
 * streaming tiles (2..8, one pass of 9..16) and the panel path (17+),
 * K across the panel's 64-block chunks, and row ranges that start and
 * end inside 16-row groups (the part-group path) as well as on them.
 * Skipped with a message where the CPU lacks AVX-512.
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
#include "threadpool.h"

#if defined(__x86_64__)
static uint64_t qp_rng = 0x9e3779b97f4a7c15ull;

/* The layout of the contract, written independently of the library's
 * packer: both tiled (kernels_impl.h kern_avx512_pack_q4_0 / _q8_0):
 * block b of group g (rows g * 16 + r) in the 16 * bs bytes at
 * g * 16 * row + b * 16 * bs: row r's scale at 2 r, its qs byte j at
 * 32 + 64 (j / 4) + 4 r + j % 4; Q8_0's qs bytes XOR 0x80 (+ 128). */
static void qp_pack(const uint8_t *w, uint8_t *p, size_t n_out, size_t row, size_t bs)
{
	const uint8_t flip = bs == sizeof(struct kern_block_q8_0) ? 0x80 : 0;

	for (size_t o = 0; o < n_out; o++)
		for (size_t b = 0; b < row / bs; b++) {
			const uint8_t *f = w + o * row + b * bs;
			uint8_t *blk = p + o / 16 * 16 * row + b * 16 * bs;
			const size_t r = o % 16;

			memcpy(blk + 2 * r, f, 2);
			for (size_t j = 0; j < bs - 2; j++)
				blk[32 + 64 * (j / 4) + 4 * r + j % 4] = f[2 + j] ^ flip;
		}
}

struct qp_case {
	uint32_t t;
	size_t n_out, n_in, n_tok, o0, o1;
	int alone; /* also every token alone through the file layout's GEMV */
};

/* The file-layout gemm (and gemv for one token) against the packed ones
 * of the avx512 level for rows [o0, o1) of one random matrix. */
static void qp_check(const struct qp_case *c)
{
	const size_t bs = dtype_type_size(c->t), row = (size_t)dtype_row_size(c->t, c->n_in);
	const size_t nb = c->n_in / KERN_QK, act_row = nb * sizeof(struct kern_block_q8a);
	const int q8 = c->t == DTYPE_Q8_0;
	const struct kern_ops *ops = kern_ops_for(CPU_LEVEL_AVX512);
	uint8_t *w = test_alloc64(row * c->n_out), *wp = test_alloc64(row * c->n_out);
	uint8_t *xa = test_alloc64(act_row * c->n_tok);
	float *x = test_alloc64(c->n_in * sizeof(float));
	float *y = test_alloc64(c->n_out * c->n_tok * sizeof(float));
	float *yp = test_alloc64(c->n_out * c->n_tok * sizeof(float));
	struct kern_gemm_args a = {
		.w = w,
		.w_stride = row,
		.n_in = c->n_in,
		.x = xa,
		.x_stride = act_row,
		.n_tok = c->n_tok,
		.y_stride = c->n_out,
		.xd_stride = kern_act_groups_pad(nb),
	};
	float *xd = test_alloc64(a.xd_stride * c->n_tok * sizeof(float));
	int32_t *xs8 = test_alloc64(a.xd_stride * c->n_tok * sizeof(int32_t));

	for (size_t i = 0; i < row * c->n_out; i++)
		w[i] = (uint8_t)test_rand(&qp_rng);
	for (size_t b = 0; b < row * c->n_out / bs; b++) {
		float d = (float)(test_rand(&qp_rng) % 1000 + 1) * 1e-4f;
		uint16_t h = kern_fp32_to_fp16((test_rand(&qp_rng) & 1) ? d : -d);
		memcpy(w + b * bs, &h, 2);
	}
	qp_pack(w, wp, c->n_out, row, bs);
	for (size_t k = 0; k < c->n_tok; k++) {
		struct kern_block_q8a *blk = (struct kern_block_q8a *)(xa + k * act_row);
		for (size_t i = 0; i < c->n_in; i++)
			x[i] = ((float)(test_rand(&qp_rng) & 0xffff) / 32768.0f - 1.0f) *
			       ((test_rand(&qp_rng) & 31) ? 1 : 8);
		kern_ops_ref.quantize_act(x, blk, c->n_in);
		kern_act_summarize(blk, nb, xd + k * a.xd_stride, xs8 + k * a.xd_stride);
	}
	a.xd = xd;
	a.xs8 = xs8;
	/* rows outside [o0, o1) must stay as they were */
	memset(y, 0x5a, c->n_out * c->n_tok * sizeof(float));
	memset(yp, 0x5a, c->n_out * c->n_tok * sizeof(float));
	a.y = y;
	(c->n_tok == 1 ? ops->gemv : ops->gemm)[c->t](&a, c->o0, c->o1);
	a.w = wp;
	a.y = yp;
	(q8 ? kern_avx512_pgemm_q8_0 : kern_avx512_pgemm_q4_0)(&a, c->o0, c->o1);
	ck_assert_msg(memcmp(y, yp, c->n_out * c->n_tok * sizeof(float)) == 0,
		      "%s out %zu in %zu tok %zu rows [%zu, %zu): packed gemm differs",
		      dtype_name(c->t), c->n_out, c->n_in, c->n_tok, c->o0, c->o1);
	/* the packed GEMV (more than one token: it runs the packed gemm) */
	memset(yp, 0x5a, c->n_out * c->n_tok * sizeof(float));
	(q8 ? kern_avx512_pgemv_q8_0 : kern_avx512_pgemv_q4_0)(&a, c->o0, c->o1);
	ck_assert_msg(memcmp(y, yp, c->n_out * c->n_tok * sizeof(float)) == 0,
		      "%s out %zu in %zu tok %zu rows [%zu, %zu): packed gemv differs",
		      dtype_name(c->t), c->n_out, c->n_in, c->n_tok, c->o0, c->o1);
	/* each token alone (the one-token GEMV) as in the batch */
	for (size_t k = 0; c->alone && k < c->n_tok; k++) {
		struct kern_gemm_args one = a;

		one.w = w;
		one.x = xa + k * act_row;
		one.xd = xd + k * a.xd_stride;
		one.xs8 = xs8 + k * a.xd_stride;
		one.n_tok = 1;
		one.y = yp;
		memset(yp, 0x5a, c->n_out * sizeof(float));
		ops->gemv[c->t](&one, c->o0, c->o1);
		ck_assert_msg(memcmp(y + k * c->n_out + c->o0, yp + c->o0,
				     (c->o1 - c->o0) * sizeof(float)) == 0,
			      "%s out %zu in %zu tok %zu rows [%zu, %zu): token %zu alone differs",
			      dtype_name(c->t), c->n_out, c->n_in, c->n_tok, c->o0, c->o1, k);
	}
	free(w);
	free(wp);
	free(xa);
	free(x);
	free(y);
	free(yp);
	free(xd);
	free(xs8);
}

static int qp_skip(void)
{
	if (kern_level_runs(CPU_LEVEL_AVX512))
		return 0;
	fprintf(stderr, "qpacked: skipping: this CPU lacks the avx512 level\n");
	return 1;
}

START_TEST(packed_products_equal_the_file_layout_bit_for_bit)
{
	static const uint32_t types[] = {DTYPE_Q4_0, DTYPE_Q8_0};
	static const size_t toks[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 24, 31, 70};
	/* 96: three blocks; 2304: two K chunks of the panel (64 blocks) */
	static const size_t ins[] = {96, 1024, 2304};
	static const size_t outs[] = {16, 48};

	if (qp_skip())
		return;
	for (size_t t = 0; t < 2; t++)
		for (size_t i = 0; i < sizeof(ins) / sizeof(ins[0]); i++)
			for (size_t o = 0; o < sizeof(outs) / sizeof(outs[0]); o++)
				for (size_t k = 0; k < sizeof(toks) / sizeof(toks[0]); k++) {
					struct qp_case c = {types[t], outs[o], ins[i], toks[k], 0,
							    outs[o], 1};
					qp_check(&c);
				}
}
END_TEST

/* 9..16 tokens run as one pass over the weights (kernels_qvnni_avx512.c
 * qv__tile2, one function per count): every count, K of 3 blocks and of
 * 513 (past the streaming tile's 512-block K chunk: the accumulators
 * through y between chunks), whole groups and a range ending inside one
 * (file layout: the last rows by the AVX2 level; packed: the part-group
 * path); each token also alone. */
START_TEST(small_batches_of_9_to_16_are_each_token_alone)
{
	static const size_t ins[] = {96, 513 * KERN_QK};
	static const size_t ranges[][2] = {{0, 48}, {0, 37}};

	if (qp_skip())
		return;
	for (uint32_t t = 0; t < 2; t++)
		for (size_t i = 0; i < sizeof(ins) / sizeof(ins[0]); i++)
			for (size_t r = 0; r < 2; r++)
				for (size_t k = 9; k <= 16; k++) {
					struct qp_case c = {t ? DTYPE_Q8_0 : DTYPE_Q4_0,
							    48,
							    ins[i],
							    k,
							    ranges[r][0],
							    ranges[r][1],
							    1};
					qp_check(&c);
				}
}
END_TEST

START_TEST(packed_row_ranges_inside_groups_are_exact)
{
	/* [o0, o1): whole groups from the second on, a part at either end,
	 * inside one group, one row */
	static const size_t ranges[][2] = {{16, 48}, {5, 48}, {0, 37}, {5, 37},
					   {3, 9},   {17, 18}, {31, 33}, {47, 48}};
	static const size_t toks[] = {1, 3, 16, 17, 40};

	if (qp_skip())
		return;
	for (uint32_t t = 0; t < 2; t++)
		for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++)
			for (size_t k = 0; k < sizeof(toks) / sizeof(toks[0]); k++) {
				struct qp_case c = {t ? DTYPE_Q8_0 : DTYPE_Q4_0, 48, 256, toks[k],
						    ranges[r][0], ranges[r][1], 1};
				qp_check(&c);
			}
}
END_TEST

/* Ragged row counts: a matrix whose n_out is not a multiple of the 16-row
 * group has no packed form (kern_pack_type() keeps the file type, so the
 * model load leaves it in file order) and kern_pack_rows() refuses it,
 * naming the shape, without touching a byte; the multiples around it
 * pack, and round-trip. */
START_TEST(ragged_row_counts_stay_in_file_layout)
{
	static const uint32_t types[] = {DTYPE_Q4_0, DTYPE_Q8_0};
	static const size_t outs[] = {1, 8, 15, 17, 40, 47, 16, 32, 48};
	const size_t n_in = 256;
	char err[EMBER_ERR_MAX] = "";

	if (kern_init() != CPU_LEVEL_AVX512) {
		fprintf(stderr, "qpacked: skipping ragged rows: the level in use is %s\n",
			cpu_level_name(kern_level()));
		return;
	}
	for (size_t ti = 0; ti < 2; ti++)
		for (size_t oi = 0; oi < sizeof(outs) / sizeof(outs[0]); oi++) {
			const uint32_t t = types[ti];
			const size_t n_out = outs[oi], row = (size_t)dtype_row_size(t, n_in);
			uint8_t *w = test_alloc64(row * n_out), *c = test_alloc64(row * n_out);

			for (size_t i = 0; i < row * n_out; i++)
				w[i] = (uint8_t)test_rand(&qp_rng);
			memcpy(c, w, row * n_out);
			if (n_out % 16 != 0) {
				ck_assert_uint_eq(kern_pack_type(t, n_out, n_in), t);
				ck_assert_int_eq(kern_pack_rows(t, w, n_out, n_in, err), EMBER_EINVAL);
				ck_assert_ptr_nonnull(strstr(err, "no packed rows"));
				ck_assert(memcmp(w, c, row * n_out) == 0);
			} else {
				uint8_t *q = test_alloc64(row * n_out);

				ck_assert_uint_eq(kern_pack_type(t, n_out, n_in), t | KERN_PACKED);
				ck_assert_int_eq(kern_pack_rows(t, w, n_out, n_in, err), 0);
				qp_pack(c, q, n_out, row, dtype_type_size(t));
				ck_assert_msg(memcmp(w, q, row * n_out) == 0, "%s %zu rows: layout",
					      dtype_name(t), n_out);
				ck_assert_int_eq(kern_unpack_rows(t, w, n_out, n_in, err), 0);
				ck_assert(memcmp(w, c, row * n_out) == 0);
				free(q);
			}
			free(w);
			free(c);
		}
}
END_TEST

/* Through the library: kern_pack_rows() then kern_matmul() on the packed
 * type id, two threads, against kern_matmul() on the file layout. */
START_TEST(packed_matmul_equals_the_file_layout_bit_for_bit)
{
	static const uint32_t types[] = {DTYPE_Q4_0, DTYPE_Q8_0};
	static const size_t toks[] = {1, 4, 17};
	const size_t n_out = 160, n_in = 512;
	tpool_t pool = tpool_create(2);
	char err[EMBER_ERR_MAX] = "";

	ck_assert_ptr_nonnull(pool);
	if (kern_init() != CPU_LEVEL_AVX512) {
		fprintf(stderr, "qpacked: skipping kern_matmul: the level in use is %s\n",
			cpu_level_name(kern_level()));
		tpool_destroy(pool);
		return;
	}
	for (size_t ti = 0; ti < 2; ti++) {
		const uint32_t t = types[ti];
		const size_t row = (size_t)dtype_row_size(t, n_in);
		uint8_t *w = test_alloc64(row * n_out), *wp = test_alloc64(row * n_out);
		float *wf = test_alloc64(n_in * sizeof(float));

		for (size_t o = 0; o < n_out; o++) {
			for (size_t i = 0; i < n_in; i++)
				wf[i] = (float)(test_rand(&qp_rng) & 0xffff) / 32768.0f - 1.0f;
			kern_quantize_row(t, wf, w + o * row, n_in);
		}
		memcpy(wp, w, row * n_out);
		ck_assert_uint_eq(kern_pack_type(t, n_out, n_in), t | KERN_PACKED);
		ck_assert_int_eq(kern_pack_rows(t, wp, n_out, n_in, err), 0);
		ck_assert(memcmp(w, wp, row * n_out) != 0);
		/* the library's packer writes the contract's layout, and
		 * kern_unpack_rows() gives the file back */
		{
			uint8_t *wq = test_alloc64(row * n_out);

			qp_pack(w, wq, n_out, row, dtype_type_size(t));
			ck_assert_msg(memcmp(wq, wp, row * n_out) == 0, "%s: packed layout differs",
				      dtype_name(t));
			memcpy(wq, wp, row * n_out);
			ck_assert_int_eq(kern_unpack_rows(t, wq, n_out, n_in, err), 0);
			ck_assert_msg(memcmp(wq, w, row * n_out) == 0, "%s: unpack differs",
				      dtype_name(t));
			free(wq);
		}
		for (size_t k = 0; k < sizeof(toks) / sizeof(toks[0]); k++) {
			const size_t n_tok = toks[k];
			float *x = test_alloc64(n_in * n_tok * sizeof(float));
			float *y = test_alloc64(n_out * n_tok * sizeof(float));
			float *yp = test_alloc64(n_out * n_tok * sizeof(float));
			void *scr = test_alloc64(kern_matmul_scratch(t | KERN_PACKED, n_in, n_tok));

			for (size_t i = 0; i < n_in * n_tok; i++)
				x[i] = (float)(test_rand(&qp_rng) & 0xffff) / 32768.0f - 1.0f;
			kern_matmul(pool, t, w, n_out, n_in, x, n_tok, y, scr);
			kern_matmul(pool, t | KERN_PACKED, wp, n_out, n_in, x, n_tok, yp, scr);
			ck_assert_msg(memcmp(y, yp, n_out * n_tok * sizeof(float)) == 0,
				      "%s tok %zu: kern_matmul packed differs", dtype_name(t), n_tok);
			free(x);
			free(y);
			free(yp);
			free(scr);
		}
		free(w);
		free(wp);
		free(wf);
	}
	tpool_destroy(pool);
}
END_TEST

/* Packed Q6_K (kernels_impl.h kern_avx512_pack_q6_k, rows in dword
 * lanes, groups of 16), written per element, independently of the
 * library's moves: in group super-block s (3360 bytes at group_base +
 * 3360 s), scale j of row r at 16 j + r, d at 256 + 2 r, element E = 16 j
 * + 4 i + k (i < 3) of row r bits 0-5 of byte 288 + 192 j + 64 i + 4 r +
 * k; element 16 j + 12 + k has its bits 2i, 2i + 1 at bits 6-7 of that
 * byte (i = 0, 1, 2). The file block: quants_ref.c's rule (ql[64 n +
 * 32 (kk & 1) + l], nibble kk / 2, qh[32 n + l] bits 2 kk, E = 128 n + 32
 * kk + l). */
static int qp_q6_file_value(const uint8_t *f, size_t E)
{
	const size_t n = E / 128, kk = E % 128 / 32, l = E % 32;

	return (f[64 * n + 32 * (kk & 1) + l] >> 4 * (kk / 2) & 15) |
	       (f[128 + 32 * n + l] >> 2 * kk & 3) << 4;
}

static void qp_check_q6_layout(const uint8_t *file, const uint8_t *pk, size_t n_out, size_t nb)
{
	const size_t bs = sizeof(struct kern_block_q6_k), row = nb * bs;

	for (size_t o = 0; o < n_out; o++)
		for (size_t s = 0; s < nb; s++) {
			const uint8_t *f = file + o * row + s * bs;
			const uint8_t *p = pk + o / 16 * 16 * row + s * 16 * bs;
			const size_t r = o % 16;

			for (size_t E = 0; E < 256; E++) {
				const size_t j = E / 16, i = E % 16 / 4, k = E % 4;
				int pv;

				if (i < 3)
					pv = p[288 + 192 * j + 64 * i + 4 * r + k] & 63;
				else
					pv = (p[288 + 192 * j + 4 * r + k] >> 6) |
					     (p[288 + 192 * j + 64 + 4 * r + k] >> 6) << 2 |
					     (p[288 + 192 * j + 128 + 4 * r + k] >> 6) << 4;
				ck_assert_msg(qp_q6_file_value(f, E) == pv,
					      "row %zu super-block %zu element %zu: %d packed as %d", o,
					      s, E, qp_q6_file_value(f, E), pv);
			}
			for (size_t j = 0; j < 16; j++)
				ck_assert_uint_eq(p[16 * j + r], f[192 + j]);
			ck_assert(memcmp(p + 256 + 2 * r, f + 208, 2) == 0);
		}
}

/* The Q6_K packer against the element rule above, 1 and 3 groups of 3
 * and 8 super-blocks, and its unpack giving the file back. The products
 * on the form: test_kernel_pack.c (every packed kernel against the file
 * layout's, bit for bit). */
START_TEST(q6_k_packed_layout_is_the_contract)
{
	static const size_t outs[] = {16, 48}, nbs[] = {3, 8};

	if (qp_skip())
		return;
	for (size_t oi = 0; oi < 2; oi++)
		for (size_t bi = 0; bi < 2; bi++) {
			const size_t n_out = outs[oi], nb = nbs[bi];
			const size_t bytes = n_out * nb * sizeof(struct kern_block_q6_k);
			uint8_t *w = malloc(bytes), *p = malloc(bytes), *tmp = malloc(bytes);

			for (size_t k = 0; k < bytes; k++)
				w[k] = (uint8_t)test_rand(&qp_rng);
			memcpy(p, w, bytes);
			kern_avx512_pack_q6_k(p, n_out, nb, sizeof(struct kern_block_q6_k), 16, 0, tmp);
			qp_check_q6_layout(w, p, n_out, nb);
			kern_avx512_pack_q6_k(p, n_out, nb, sizeof(struct kern_block_q6_k), 16, 1, tmp);
			ck_assert(memcmp(p, w, bytes) == 0);
			free(w);
			free(p);
			free(tmp);
		}
}
END_TEST

/* The SIMD packer (kern_avx512_pack_q6_k, what a model load runs) against
 * its scalar twin, bit for bit, on ragged shapes: 1, 2 and 5 groups of 1,
 * 2, 7, 16 and 65 super-blocks (a row's blocks in its own group
 * super-block's region, in earlier ones, in later ones: the packer reads
 * each from its saved copy or in place), random bytes (every qh bit
 * pattern), the temporary stale junk; the unpack gives the file back. */
START_TEST(q6_k_simd_packer_equals_the_scalar_one)
{
	static const size_t outs[] = {16, 32, 80}, nbs[] = {1, 2, 7, 16, 65};

	if (qp_skip())
		return;
	for (size_t oi = 0; oi < 3; oi++)
		for (size_t bi = 0; bi < 5; bi++) {
			const size_t n_out = outs[oi], nb = nbs[bi], bs = sizeof(struct kern_block_q6_k);
			const size_t bytes = n_out * nb * bs;
			uint8_t *w = malloc(bytes), *p = malloc(bytes), *q = malloc(bytes);
			uint8_t *tmp = malloc(16 * nb * bs);

			for (size_t k = 0; k < bytes; k++)
				w[k] = (uint8_t)test_rand(&qp_rng);
			memcpy(p, w, bytes);
			memcpy(q, w, bytes);
			memset(tmp, 0xa5, 16 * nb * bs);
			kern_avx512_pack_q6_k(p, n_out, nb, bs, 16, 0, tmp);
			kern_avx512_pack_q6_k_scalar(q, n_out, nb, bs, 16, 0, tmp);
			ck_assert_msg(memcmp(p, q, bytes) == 0, "Q6_K packers differ: %zu rows x %zu",
				      n_out, nb);
			kern_avx512_pack_q6_k(p, n_out, nb, bs, 16, 1, tmp);
			ck_assert(memcmp(p, w, bytes) == 0);
			free(w);
			free(p);
			free(q);
			free(tmp);
		}
}
END_TEST

/* n_out random Q6_K rows (every byte random, d 1e-4 .. 0.1 either sign). */
static uint8_t *qp_q6_rows(size_t n_out, size_t nb)
{
	const size_t bs = sizeof(struct kern_block_q6_k), n = n_out * nb;
	uint8_t *w = test_alloc64(n * bs);

	for (size_t k = 0; k < n * bs; k++)
		w[k] = (uint8_t)test_rand(&qp_rng);
	for (size_t b = 0; b < n; b++) {
		const float d = (float)(test_rand(&qp_rng) % 1000 + 1) * 1e-4f;
		const uint16_t h = kern_fp32_to_fp16((test_rand(&qp_rng) & 1) ? d : -d);

		memcpy(w + b * bs + offsetof(struct kern_block_q6_k, d), &h, 2);
	}
	return w;
}

/* Packed Q6_K at 9+ tokens (the VNNI panels, kquants_vnni_avx512.h
 * kv__q6u_sb(): the layout's rows in dword lanes read by loads) against
 * the file layout's GEMM and each token alone through the GEMV, bit for
 * bit: 9, 16, 17 and 64 tokens (one, two, three and eight groups of the
 * panel), 1, 9 and 20 super-blocks (the panel's chunks of 8: one part, a
 * whole and a part, two and a part), one and three 16-row groups, called
 * whole and cut at a group. Random bytes: every qh bit pattern, so a
 * reader that mixes up one bit of one element fails. */
START_TEST(q6_k_panels_equal_the_file_layout_bit_for_bit)
{
	static const size_t toks[] = {9, 16, 17, 64}, nbs[] = {1, 9, 20}, outs[] = {16, 48};
	const struct kern_ops *ops = kern_ops_for(CPU_LEVEL_AVX512);
	const size_t bs = sizeof(struct kern_block_q6_k), T = 64;

	if (qp_skip())
		return;
	for (size_t oi = 0; oi < 2; oi++)
		for (size_t bi = 0; bi < 3; bi++) {
			const size_t n_out = outs[oi], nb = nbs[bi], n_in = nb * KERN_QKK;
			const size_t row = nb * bs;
			uint8_t *w = qp_q6_rows(n_out, nb), *wp = test_alloc64(n_out * row);
			uint8_t *tmp = test_alloc64(16 * row);
			float *x = test_alloc64(n_in * T * sizeof(float));
			float *y = test_alloc64(n_out * T * sizeof(float));
			float *yp = test_alloc64(n_out * T * sizeof(float));
			struct kern_block_q8_k *xk = test_alloc64(sizeof(*xk) * nb * T);

			memcpy(wp, w, n_out * row);
			kern_avx512_pack_q6_k(wp, n_out, nb, bs, 16, 0, tmp);
			for (size_t i = 0; i < n_in * T; i++)
				x[i] = ((float)(test_rand(&qp_rng) & 0xffff) / 32768.0f - 1.0f) *
				       ((test_rand(&qp_rng) & 31) ? 1 : 8);
			for (size_t t = 0; t < T; t++)
				ops->quantize_act_q8k(x + t * n_in, xk + t * nb, n_in);
			for (size_t k = 0; k < sizeof(toks) / sizeof(toks[0]); k++) {
				const size_t nt = toks[k];
				struct kern_gemm_args a = {.w = w, .w_stride = row, .n_in = n_in,
							   .x = x, .x_stride = n_in * sizeof(float),
							   .n_tok = nt, .y = y, .y_stride = n_out,
							   .xk = xk};
				struct kern_gemm_args p = a;

				p.w = wp;
				p.y = yp;
				memset(y, 0xa5, n_out * T * sizeof(float));
				memset(yp, 0x5a, n_out * T * sizeof(float));
				ops->gemm[DTYPE_Q6_K](&a, 0, n_out);
				kern_avx512_vnni_pgemm_q6_k(&p, 0, 16);
				kern_avx512_vnni_pgemm_q6_k(&p, 16, n_out);
				ck_assert_msg(memcmp(y, yp, n_out * nt * sizeof(float)) == 0,
					      "Q6_K %zu x %zu, %zu tokens: packed differs", n_out,
					      n_in, nt);
				for (size_t t = 0; t < nt; t++) { /* each token alone */
					struct kern_gemm_args one = a;

					one.n_tok = 1;
					one.xk = xk + t * nb;
					one.y = yp;
					ops->gemv[DTYPE_Q6_K](&one, 0, n_out);
					ck_assert_msg(memcmp(y + t * n_out, yp, n_out * sizeof(float)) == 0,
						      "Q6_K %zu x %zu, %zu tokens: token %zu alone",
						      n_out, n_in, nt, t);
				}
			}
			free(w);
			free(wp);
			free(tmp);
			free(x);
			free(y);
			free(yp);
			free(xk);
		}
}
END_TEST

/* Through the library: kern_pack_rows() then kern_matmul() on packed Q6_K,
 * two threads, 9+ tokens, against the file layout; a ragged row count (40:
 * not a multiple of the 16-row group) has no packed form and is refused. */
START_TEST(q6_k_packed_matmul_equals_the_file_layout)
{
	static const size_t toks[] = {9, 17, 64};
	const size_t n_out = 160, nb = 3, n_in = nb * KERN_QKK, T = 64;
	const size_t row = nb * sizeof(struct kern_block_q6_k);
	tpool_t pool = tpool_create(2);
	char err[EMBER_ERR_MAX] = "";

	ck_assert_ptr_nonnull(pool);
	if (kern_init() != CPU_LEVEL_AVX512) {
		fprintf(stderr, "qpacked: skipping Q6_K kern_matmul: the level in use is %s\n",
			cpu_level_name(kern_level()));
		tpool_destroy(pool);
		return;
	}
	uint8_t *w = qp_q6_rows(n_out, nb), *wp = test_alloc64(n_out * row);
	float *x = test_alloc64(n_in * T * sizeof(float));
	float *y = test_alloc64(n_out * T * sizeof(float));
	float *yp = test_alloc64(n_out * T * sizeof(float));
	void *scr = test_alloc64(kern_matmul_scratch(DTYPE_Q6_K | KERN_PACKED, n_in, T));

	ck_assert_uint_eq(kern_pack_type(DTYPE_Q6_K, 40, n_in), DTYPE_Q6_K);
	memcpy(wp, w, 40 * row);
	ck_assert_int_eq(kern_pack_rows(DTYPE_Q6_K, wp, 40, n_in, err), EMBER_EINVAL);
	ck_assert(memcmp(wp, w, 40 * row) == 0);
	memcpy(wp, w, n_out * row);
	ck_assert_uint_eq(kern_pack_type(DTYPE_Q6_K, n_out, n_in), DTYPE_Q6_K | KERN_PACKED);
	ck_assert_int_eq(kern_pack_rows(DTYPE_Q6_K, wp, n_out, n_in, err), 0);
	for (size_t i = 0; i < n_in * T; i++)
		x[i] = (float)(test_rand(&qp_rng) & 0xffff) / 32768.0f - 1.0f;
	for (size_t k = 0; k < sizeof(toks) / sizeof(toks[0]); k++) {
		kern_matmul(pool, DTYPE_Q6_K, w, n_out, n_in, x, toks[k], y, scr);
		kern_matmul(pool, DTYPE_Q6_K | KERN_PACKED, wp, n_out, n_in, x, toks[k], yp, scr);
		ck_assert_msg(memcmp(y, yp, n_out * toks[k] * sizeof(float)) == 0,
			      "Q6_K tok %zu: kern_matmul packed differs", toks[k]);
	}
	free(w);
	free(wp);
	free(x);
	free(y);
	free(yp);
	free(scr);
	tpool_destroy(pool);
}
END_TEST
#else
START_TEST(q6_k_panels_equal_the_file_layout_bit_for_bit)
{
}
END_TEST

START_TEST(q6_k_packed_matmul_equals_the_file_layout)
{
}
END_TEST

START_TEST(q6_k_simd_packer_equals_the_scalar_one)
{
}
END_TEST

START_TEST(packed_matmul_equals_the_file_layout_bit_for_bit)
{
}
END_TEST

START_TEST(packed_products_equal_the_file_layout_bit_for_bit)
{
	fprintf(stderr, "qpacked: skipping: not x86-64\n");
}
END_TEST

START_TEST(small_batches_of_9_to_16_are_each_token_alone)
{
}
END_TEST

START_TEST(packed_row_ranges_inside_groups_are_exact)
{
}
END_TEST

START_TEST(ragged_row_counts_stay_in_file_layout)
{
}
END_TEST

START_TEST(q6_k_packed_layout_is_the_contract)
{
}
END_TEST
#endif

/* The avx512 level packs Q4_0 / Q8_0 in groups of 16 with its own
 * kernels; the amx level packs them the same way (the same pack_rows,
 * pack_fn and packed GEMV; its packed GEMM the avx512 one unless the bf16
 * tiles take the call), whatever the CPU at hand; the origins say amx. */
START_TEST(avx512_and_amx_pack_q4_0_and_q8_0)
{
	struct cpu_features f;
	struct kern_ops ops;
#if defined(__x86_64__)
	struct kern_origin org;
#endif
	static const uint32_t types[] = {DTYPE_Q4_0, DTYPE_Q8_0};

	memset(&f, 0xff, sizeof(f));
	for (size_t i = 0; i < 2; i++) {
		const uint32_t t = types[i];
#if defined(__x86_64__)
		ck_assert_int_eq(kern_resolve(&f, CPU_LEVEL_AVX512, &ops, NULL), CPU_LEVEL_AVX512);
		ck_assert_uint_eq(ops.pack_rows[t], 16);
		ck_assert(ops.pgemm[t] == (t == DTYPE_Q4_0 ? kern_avx512_pgemm_q4_0
							  : kern_avx512_pgemm_q8_0));
		ck_assert(ops.pgemv[t] == (t == DTYPE_Q4_0 ? kern_avx512_pgemv_q4_0
							  : kern_avx512_pgemv_q8_0));
		/* both tiled, each by its own rule */
		ck_assert(ops.pack_fn[t] == (t == DTYPE_Q4_0 ? kern_avx512_pack_q4_0
							    : kern_avx512_pack_q8_0));
		ck_assert_int_eq(kern_resolve(&f, CPU_LEVEL_AMX, &ops, &org), CPU_LEVEL_AMX);
		ck_assert_uint_eq(ops.pack_rows[t], 16);
		ck_assert(ops.pack_fn[t] == (t == DTYPE_Q4_0 ? kern_avx512_pack_q4_0
							    : kern_avx512_pack_q8_0));
		ck_assert(ops.pgemv[t] == (t == DTYPE_Q4_0 ? kern_avx512_pgemv_q4_0
							  : kern_avx512_pgemv_q8_0));
		ck_assert(ops.pgemm[t] == (t == DTYPE_Q4_0 ? kern_amx_pgemm_q4_0
							  : kern_amx_pgemm_q8_0));
		ck_assert(ops.gemm[t] == (t == DTYPE_Q4_0 ? kern_amx_gemm_q4_0 : kern_amx_gemm_q8_0));
		ck_assert_int_eq(org.gemm[t], CPU_LEVEL_AMX);
		ck_assert_int_eq(org.gemv[t], CPU_LEVEL_AMX);
#endif
		ck_assert_int_eq(kern_resolve(&f, CPU_LEVEL_SCALAR, &ops, NULL), CPU_LEVEL_SCALAR);
		ck_assert_uint_eq(ops.pack_rows[t], 0);
	}
}
END_TEST

Suite *suite_qpacked(void)
{
	Suite *s = suite_create("qpacked");
	TCase *tc = tcase_create("avx512");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, packed_products_equal_the_file_layout_bit_for_bit);
	tcase_add_test(tc, small_batches_of_9_to_16_are_each_token_alone);
	tcase_add_test(tc, packed_row_ranges_inside_groups_are_exact);
	tcase_add_test(tc, q6_k_simd_packer_equals_the_scalar_one);
	tcase_add_test(tc, packed_matmul_equals_the_file_layout_bit_for_bit);
	tcase_add_test(tc, ragged_row_counts_stay_in_file_layout);
	tcase_add_test(tc, avx512_and_amx_pack_q4_0_and_q8_0);
	tcase_add_test(tc, q6_k_packed_layout_is_the_contract);
	tcase_add_test(tc, q6_k_panels_equal_the_file_layout_bit_for_bit);
	tcase_add_test(tc, q6_k_packed_matmul_equals_the_file_layout);
	suite_add_tcase(s, tc);
	return s;
}
