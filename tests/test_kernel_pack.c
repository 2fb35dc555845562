/*
 * test_kernel_pack.c - packed weight rows (kernels.h KERN_PACKED): the
 * generic pack/unpack (layout as kernels.h specifies it, round trip),
 * kern_resolve()'s rule (a type's packed form comes from the level that
 * supplies its gemm, or not at all), and every level's packed GEMV/GEMM
 * against the same level's file-layout kernels bit for bit: random
 * blocks, ragged token counts (1 .. 17: the GEMV, the streaming tiles,
 * the panels), row ranges starting and ending on different group
 * multiples. Levels this CPU cannot run are skipped.
 */
#include <check.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "ember.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "quants.h"
#include "testutil.h"

static uint64_t kp_rng = 0x9e3779b97f4a7c15ull;

/* Byte k of block b of row r, as the file lays it out: a function of all
 * three, so any misplaced block shows. */
static uint8_t kp_byte(size_t r, size_t b, size_t k)
{
	return (uint8_t)(r * 131 + b * 17 + k * 7 + (r >> 3) * 3);
}

/* kern_pack_groups() puts block b of row r at group_base + (b g + r) bs,
 * group g over exactly its rows' bytes; unpack restores the file. */
/* Packs 2-3 groups of g rows of 3 blocks of bs bytes in units of u (u ==
 * bs: kern_pack_groups(), the generic interleave), checks where every byte
 * went (byte k of block b of row r at group_base + b g bs + (g (k / u) +
 * r) u + k % u), unpacks and checks the file order is back. */
static void kp_check_groups(size_t g, size_t bs, size_t u, size_t n_groups)
{
	const size_t nb = 3, n_out = n_groups * g, row = nb * bs;
	uint8_t *w = malloc(n_out * row), *tmp = malloc(g * row);

	for (size_t r = 0; r < n_out; r++)
		for (size_t b = 0; b < nb; b++)
			for (size_t k = 0; k < bs; k++)
				w[r * row + b * bs + k] = kp_byte(r, b, k);
	if (u == bs)
		kern_pack_groups(w, n_out, nb, bs, g, 0, tmp);
	else
		kern_pack_groups_u(w, n_out, nb, bs, g, u, 0, tmp);
	for (size_t r = 0; r < n_out; r++)
		for (size_t b = 0; b < nb; b++)
			for (size_t k = 0; k < bs; k++) {
				const size_t at = (r / g) * g * row + b * g * bs +
						  (g * (k / u) + r % g) * u + k % u;
				ck_assert_msg(w[at] == kp_byte(r, b, k),
					      "g %zu bs %zu u %zu row %zu block %zu byte %zu", g, bs, u,
					      r, b, k);
			}
	if (u == bs)
		kern_pack_groups(w, n_out, nb, bs, g, 1, tmp);
	else
		kern_pack_groups_u(w, n_out, nb, bs, g, u, 1, tmp);
	for (size_t r = 0; r < n_out; r++)
		for (size_t b = 0; b < nb; b++)
			for (size_t k = 0; k < bs; k++)
				ck_assert(w[r * row + b * bs + k] == kp_byte(r, b, k));
	free(w);
	free(tmp);
}

START_TEST(pack_groups_layout_and_round_trip)
{
	static const size_t gs[] = {1, 4, 16};
	static const size_t bss[] = {1, 18, 34, 144, 176, 210};

	for (size_t gi = 0; gi < 3; gi++)
		for (size_t bi = 0; bi < 6; bi++)
			kp_check_groups(gs[gi], bss[bi], bss[bi], 2);
}
END_TEST

/* kern_pack_groups_u() in 16-byte units (Q5_K's rule, kern_pack_groups16()). */
START_TEST(pack_groups_units)
{
	static const size_t bss[] = {16, 144, 176};

#if defined(__x86_64__)
	/* the avx512 level's rules: Q5_K in 16s, Q4_K and Q6_K their own
	 * (test_qpacked.c) */
	ck_assert(kern_ops_avx512.pack_fn[DTYPE_Q4_K] == kern_avx512_pack_q4_k);
	ck_assert(kern_ops_avx512.pack_fn[DTYPE_Q5_K] == kern_pack_groups16);
	ck_assert(kern_ops_avx512.pack_fn[DTYPE_Q6_K] == kern_avx512_pack_q6_k);
#endif
	for (size_t bi = 0; bi < 3; bi++)
		kp_check_groups(4, bss[bi], 16, 3);
}
END_TEST

/* kern_resolve(): for every feature set and cap, a type's pack_rows,
 * pgemm and pgemv are those of the level its gemm came from (a level
 * without a packed form gives none), and pack_rows is never set
 * without both products. */
START_TEST(resolve_takes_packed_form_with_gemm)
{
	const enum cpu_level *list;
	size_t n = cpu_levels(&list);
	struct cpu_features fs[3];

	memset(fs, 0, sizeof(fs));
	fs[1].avx2 = 1;
	memset(&fs[2], 0xff, sizeof(fs[2]));
	for (size_t fi = 0; fi < 3; fi++)
		for (size_t ci = 0; ci < n; ci++) {
			struct kern_ops ops;
			struct kern_origin org;

			kern_resolve(&fs[fi], list[ci], &ops, &org);
			for (uint32_t t = 0; t < DTYPE_COUNT; t++) {
				const struct kern_ops *own = kern_ops_own(org.gemm[t]);
				if (ops.gemm[t] == NULL)
					continue;
				ck_assert_ptr_nonnull(own);
				ck_assert(ops.gemm[t] == own->gemm[t]);
				if (own->pgemm[t] == NULL) {
					ck_assert_uint_eq(ops.pack_rows[t], 0);
					ck_assert_ptr_null(ops.pgemm[t]);
					ck_assert_ptr_null(ops.pgemv[t]);
					continue;
				}
				ck_assert_uint_eq(ops.pack_rows[t], own->pack_rows[t]);
				ck_assert(ops.pgemm[t] == own->pgemm[t]);
				ck_assert(ops.pgemv[t] == (own->pgemv[t] ? own->pgemv[t] : own->pgemm[t]));
				ck_assert(ops.pack_rows[t] > 0 && 16 % ops.pack_rows[t] == 0);
			}
		}
	/* the scalar reference never packs */
	for (uint32_t t = 0; t < DTYPE_COUNT; t++)
		ck_assert_uint_eq(kern_ops_ref.pack_rows[t], 0);
}
END_TEST

/* kern_pack_type() / kern_pack_rows(): packed only where the level in
 * use has the form and n_out is a multiple of its group; pack then
 * unpack gives the file back; a refused shape says why. */
START_TEST(pack_rows_follow_the_active_level)
{
	const struct kern_ops *ops = kern_ops_active();
	char err[EMBER_ERR_MAX] = "";

	for (uint32_t t = 0; t < DTYPE_COUNT; t++) {
		if (!kern_supports(t) || dtype_block(t) == 0)
			continue;
		const size_t n_in = 2 * (dtype_block(t) > 256 ? dtype_block(t) : 256);
		const size_t g = ops->pack_rows[t], n_out = g ? 3 * g : 4;
		const size_t bytes = n_out * dtype_row_size(t, n_in);
		uint8_t *w = malloc(bytes), *c = malloc(bytes);

		for (size_t i = 0; i < bytes; i++)
			w[i] = (uint8_t)test_rand(&kp_rng);
		memcpy(c, w, bytes);
		if (g == 0) {
			ck_assert_uint_eq(kern_pack_type(t, n_out, n_in), t);
			ck_assert(!kern_supports(t | KERN_PACKED));
			ck_assert_int_eq(kern_pack_rows(t, w, n_out, n_in, err), EMBER_EINVAL);
			ck_assert_ptr_nonnull(strstr(err, "no packed rows"));
		} else {
			ck_assert_uint_eq(kern_pack_type(t, n_out, n_in), t | KERN_PACKED);
			ck_assert(kern_supports(t | KERN_PACKED));
			if (g > 1)
				ck_assert_uint_eq(kern_pack_type(t, n_out + 1, n_in), t);
			ck_assert_int_eq(kern_pack_rows(t, w, n_out, n_in, err), 0);
			ck_assert_int_eq(kern_unpack_rows(t, w, n_out, n_in, err), 0);
		}
		ck_assert(memcmp(w, c, bytes) == 0);
		free(w);
		free(c);
	}
}
END_TEST

/* Random blocks of type t with sane fp16 scales (d, dmin). */
static void kp_fill_blocks(uint32_t t, uint8_t *w, size_t bytes)
{
	const size_t bs = dtype_type_size(t);

	for (size_t i = 0; i < bytes; i++)
		w[i] = (uint8_t)test_rand(&kp_rng);
	for (size_t b = 0; b < bytes / bs; b++) {
		uint8_t *p = w + b * bs;
		const size_t d_at = t == DTYPE_Q6_K ? 208 : 0;
		for (size_t k = 0; k < (t == DTYPE_Q6_K ? 1u : 2u); k++) {
			const uint16_t h = kern_fp32_to_fp16(
				((float)(test_rand(&kp_rng) % 2000) + 1.0f) * (k ? 1e-5f : 2e-5f));
			memcpy(p + d_at + 2 * k, &h, 2);
		}
	}
}

/* y from kernel f over the row ranges cut at cuts[] (ascending, from 0
 * to n_out). */
static void kp_run(kern_gemm_fn f, struct kern_gemm_args a, const size_t *cuts, size_t n_cuts)
{
	for (size_t i = 0; i + 1 < n_cuts; i++)
		f(&a, cuts[i], cuts[i + 1]);
}

/* `level`'s packed GEMV/GEMM of every type it packs against its own
 * file-layout kernels, bit for bit. */
static void kp_check_level(enum cpu_level level)
{
	static const size_t n_outs[] = {40, 8, 4, 64};
	/* 16 x 256: avx512 Q6_K's small batch at 1..4 tokens in one window
	 * over several blocks of groups (kquants_q6p_avx512.c) */
	static const size_t n_ins[] = {512, 65 * 256, 16 * 256};
	static const size_t toks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17};
	const struct kern_ops *ops = kern_ops_for(level);

	for (uint32_t t = 0; t < DTYPE_COUNT; t++) {
		const size_t g = ops->pack_rows[t];
		/* the K-quants (activations per super-block); Q4_0 / Q8_0
		 * take per-block ones: test_qpacked.c */
		if (g == 0 || dtype_block(t) != KERN_QKK)
			continue;
		ck_assert_ptr_nonnull(ops->pgemm[t]);
		ck_assert_ptr_nonnull(ops->pgemv[t]);
		for (size_t oi = 0; oi < 4; oi++)
			for (size_t ii = 0; ii < sizeof(n_ins) / sizeof(n_ins[0]); ii++) {
				const size_t n_out = n_outs[oi], n_in = n_ins[ii];
				if (n_out % g != 0) /* avx2 Q4_K/Q6_K: groups of 8 */
					continue;
				const size_t st = dtype_row_size(t, n_in), nb = n_in / dtype_block(t);
				const size_t nsb = n_in / KERN_QKK, T = 17;
				uint8_t *w = malloc(n_out * st), *pw = malloc(n_out * st);
				uint8_t *tmp = malloc(g * st);
				float *x = malloc(sizeof(float) * n_in * T);
				float *y0 = malloc(sizeof(float) * n_out * T);
				float *y1 = malloc(sizeof(float) * n_out * T);
				struct kern_block_q8_k *xk = malloc(sizeof(*xk) * nsb * T);
				/* whole; cut at different group multiples */
				const size_t whole[] = {0, n_out};
				const size_t cut[] = {0, g, n_out / 2 / g * g + g, n_out};
				const size_t ncut = n_out > 2 * g ? 4 : 2;

				kp_fill_blocks(t, w, n_out * st);
				memcpy(pw, w, n_out * st);
				(ops->pack_fn[t] ? ops->pack_fn[t] : kern_pack_groups)(
					pw, n_out, nb, dtype_type_size(t), g, 0, tmp);
				for (size_t i = 0; i < n_in * T; i++)
					x[i] = (float)((int)(test_rand(&kp_rng) % 2001) - 1000) / 300.0f;
				for (size_t i = 0; i < T; i++)
					ops->quantize_act_q8k(x + i * n_in, xk + i * nsb, n_in);
				for (size_t ti = 0; ti < sizeof(toks) / sizeof(toks[0]); ti++) {
					const size_t nt = toks[ti];
					struct kern_gemm_args a = {.w = w, .w_stride = st, .n_in = n_in,
								   .x = x, .x_stride = n_in * 4,
								   .n_tok = nt, .y = y0,
								   .y_stride = n_out, .xk = xk};
					struct kern_gemm_args p = a;

					p.w = pw;
					p.y = y1;
					memset(y0, 0xa5, sizeof(float) * n_out * T);
					memset(y1, 0x5a, sizeof(float) * n_out * T);
					kp_run(nt == 1 ? ops->gemv[t] : ops->gemm[t], a, whole, 2);
					kp_run(nt == 1 ? ops->pgemv[t] : ops->pgemm[t], p,
					       ncut == 4 ? cut : whole, ncut);
					ck_assert_msg(memcmp(y0, y1, sizeof(float) * n_out * nt) == 0,
						      "%s %s: %zu x %zu, %zu tokens: packed differs",
						      cpu_level_name(level), dtype_name(t), n_out, n_in,
						      nt);
					/* the GEMV entry with 2+ tokens is the packed GEMM */
					memset(y1, 0x5a, sizeof(float) * n_out * T);
					kp_run(ops->pgemv[t], p, whole, 2);
					ck_assert(memcmp(y0, y1, sizeof(float) * n_out * nt) == 0);
					/* and the packed GEMM with one token (Q6_K: its own
					 * small-batch path, kquants_q6p_avx512.c) */
					memset(y1, 0x5a, sizeof(float) * n_out * T);
					kp_run(ops->pgemm[t], p, ncut == 4 ? cut : whole, ncut);
					ck_assert(memcmp(y0, y1, sizeof(float) * n_out * nt) == 0);
				}
				free(w);
				free(pw);
				free(tmp);
				free(x);
				free(y0);
				free(y1);
				free(xk);
			}
	}
}

START_TEST(packed_kernels_equal_file_layout_bit_for_bit)
{
	int ran = 0;

	for (int l = 0; l < CPU_LEVEL_COUNT; l++) {
		const struct kern_ops *ops = kern_ops_for((enum cpu_level)l);
		int any = 0;

		if (ops == NULL)
			continue;
		for (uint32_t t = 0; t < DTYPE_COUNT; t++)
			any |= ops->pack_rows[t] != 0;
		if (!any)
			continue;
		if (!kern_level_runs((enum cpu_level)l)) {
			printf("kernel_pack: skipping the %s level: this CPU lacks it\n",
			       cpu_level_name((enum cpu_level)l));
			continue;
		}
		kp_check_level((enum cpu_level)l);
		ran++;
	}
	if (!ran)
		printf("kernel_pack: no level with packed rows runs here\n");
}
END_TEST

#if defined(__x86_64__)
/* Q6_K rows at the format's extremes through the avx512 packed small batch
 * (kquants_q6p_avx512.c), each token against the one-token GEMV on the file
 * layout, bit for bit: the 6-bit values 0 and 63 (rows all one, all the
 * other, or alternating by element), the sub-block scales -128 and 127
 * alternating, the activations +-127 with their sign alternating by element
 * or by 16-block or random; 3 groups of 16 rows (the packed form's), 1..8
 * tokens, 3 and 25 super-blocks. */
START_TEST(q6_k_packed_batch_extremes_equal_the_gemv)
{
	const struct kern_ops *ops = kern_ops_for(CPU_LEVEL_AVX512);
	static const size_t n_ins[] = {3 * 256, 25 * 256};
	const size_t n_out = 48, bs = dtype_type_size(DTYPE_Q6_K), T = 8;

	if (ops == NULL || !kern_level_runs(CPU_LEVEL_AVX512) || ops->pack_rows[DTYPE_Q6_K] == 0)
		return;
	for (size_t ii = 0; ii < 2; ii++) {
		const size_t n_in = n_ins[ii], nb = n_in / KERN_QKK, st = nb * bs;
		const size_t g = ops->pack_rows[DTYPE_Q6_K];
		uint8_t *w = malloc(n_out * st), *pw = malloc(n_out * st), *tmp = malloc(g * st);
		float *x = malloc(sizeof(float) * n_in * T), *y0 = malloc(sizeof(float) * n_out * T);
		float *y1 = malloc(sizeof(float) * n_out * T);
		struct kern_block_q8_k *xk = malloc(sizeof(*xk) * nb * T);

		for (size_t r = 0; r < n_out; r++)
			for (size_t b = 0; b < nb; b++) {
				uint8_t *blk = w + r * st + b * bs;
				/* ql 0..127, qh 128..191 (bytes 0xff: every value
				 * 63; 0x00: 0; 0x0f / 0xf0 and 0x33 / 0xcc mixed),
				 * scales 192..207, d 208 */
				const uint8_t ql = r % 3 == 0 ? 0xff : r % 3 == 1 ? 0x00 : 0x0f;
				const uint8_t qh = r % 3 == 0 ? 0xff : r % 3 == 1 ? 0x00 : 0x33;

				memset(blk, ql, 128);
				memset(blk + 128, qh, 64);
				for (int j = 0; j < 16; j++)
					blk[192 + j] = (uint8_t)((j + r + b) % 2 ? 0x80 : 0x7f);
				blk[208] = 0x00;
				blk[209] = (uint8_t)(0x3c - (r % 4)); /* 1, 0.5, .. */
			}
		memcpy(pw, w, n_out * st);
		ops->pack_fn[DTYPE_Q6_K](pw, n_out, nb, bs, g, 0, tmp);
		for (size_t k = 0; k < T; k++)
			for (size_t i = 0; i < n_in; i++) {
				const int sign = k % 3 == 0   ? (i % 2 ? -1 : 1)
						 : k % 3 == 1 ? ((i / 16) % 2 ? -1 : 1)
							      : (test_rand(&kp_rng) % 2 ? -1 : 1);

				x[k * n_in + i] = (float)sign * (k % 2 ? 1.0f : 3.5f);
			}
		for (size_t k = 0; k < T; k++)
			ops->quantize_act_q8k(x + k * n_in, xk + k * nb, n_in);
		for (size_t k = 0; k < T; k++) {
			struct kern_gemm_args a = {.w = w, .w_stride = st, .n_in = n_in,
						   .x = x + k * n_in, .x_stride = n_in * 4, .n_tok = 1,
						   .y = y0 + k * n_out, .y_stride = n_out, .xk = xk + k * nb};

			ops->gemv[DTYPE_Q6_K](&a, 0, n_out);
		}
		for (size_t nt = 1; nt <= T; nt++) {
			struct kern_gemm_args p = {.w = pw, .w_stride = st, .n_in = n_in, .x = x,
						   .x_stride = n_in * 4, .n_tok = nt, .y = y1,
						   .y_stride = n_out, .xk = xk};

			memset(y1, 0x5a, sizeof(float) * n_out * T);
			ops->pgemm[DTYPE_Q6_K](&p, 0, n_out);
			ck_assert_msg(memcmp(y0, y1, sizeof(float) * n_out * nt) == 0,
				      "q6_k extremes: %zu x %zu, %zu tokens", n_out, n_in, nt);
		}
		free(w);
		free(pw);
		free(tmp);
		free(x);
		free(y0);
		free(y1);
		free(xk);
	}
}
END_TEST

/* The bit contract of the avx512 packed Q6_K and Q4_K small batches
 * (kquants_q6p_avx512.c; kquants_vnni_avx512.c kv__tile_k4() on
 * KERN_K4L_*, also the one-token GEMV): every token of every call of
 * 1..8 tokens, whichever tokens share it, is kern_ref_gemv_q8k_q6_k()'s
 * (_q4_k()'s) bits for that token alone. Shapes: 20 groups of 2
 * super-blocks (blocks of 19 groups, the next one prefetched), 3 groups
 * of 65 (a block a group; two windows of activation sums at 8 tokens;
 * Q4_K: past kv__gemm()'s table of sums, the tile makes its own) and 4
 * of 129 (two windows from 4 tokens); whole calls and calls cut at
 * groups 1 and 3 (a call's last block prefetches the rows after it). */
START_TEST(q6_k_packed_tokens_independent_of_their_batch)
{
	const struct kern_ops *ops = kern_ops_for(CPU_LEVEL_AVX512);
	static const size_t shapes[][2] = {{320, 2 * 256}, {48, 65 * 256}, {64, 129 * 256}};
	static const uint32_t types[] = {DTYPE_Q6_K, DTYPE_Q4_K};
	const size_t T = 8;

	if (ops == NULL || !kern_level_runs(CPU_LEVEL_AVX512) || ops->pack_rows[DTYPE_Q6_K] == 0)
		return;
	for (size_t c = 0; c < 2 * sizeof(shapes) / sizeof(shapes[0]); c++) {
		const uint32_t wt = types[c / 3];
		const size_t si = c % 3, bs = dtype_type_size(wt);
		const size_t n_out = shapes[si][0], n_in = shapes[si][1], nb = n_in / KERN_QKK;
		const size_t st = nb * bs, g = ops->pack_rows[wt];
		uint8_t *w = malloc(n_out * st), *pw = malloc(n_out * st), *tmp = malloc(g * st);
		float *x = malloc(sizeof(float) * n_in * T), *yr = malloc(sizeof(float) * n_out * T);
		float *y = malloc(sizeof(float) * n_out * T);
		struct kern_block_q8_k *xk = malloc(sizeof(*xk) * nb * T);
		const size_t cut[] = {0, g, 3 * g, n_out}, whole[] = {0, n_out};

		kp_fill_blocks(wt, w, n_out * st);
		memcpy(pw, w, n_out * st);
		ops->pack_fn[wt](pw, n_out, nb, bs, g, 0, tmp);
		for (size_t i = 0; i < n_in * T; i++)
			x[i] = (float)((int)(test_rand(&kp_rng) % 2001) - 1000) / 300.0f;
		for (size_t k = 0; k < T; k++) {
			struct kern_gemm_args r = {.w = w, .w_stride = st, .n_in = n_in, .n_tok = 1,
						   .y = yr + k * n_out, .y_stride = n_out,
						   .xk = xk + k * nb};

			ops->quantize_act_q8k(x + k * n_in, xk + k * nb, n_in);
			(wt == DTYPE_Q6_K ? kern_ref_gemv_q8k_q6_k : kern_ref_gemv_q8k_q4_k)(&r, 0, n_out);
		}
		/* every batch of nt consecutive tokens from k0 */
		for (size_t nt = 1; nt <= T; nt++)
			for (size_t k0 = 0; k0 + nt <= T; k0 += (nt > 1 ? nt - 1 : 3)) {
				struct kern_gemm_args p = {.w = pw, .w_stride = st, .n_in = n_in,
							   .n_tok = nt, .y = y, .y_stride = n_out,
							   .xk = xk + k0 * nb};

				const int split = (nt + k0 + si) % 2;
				const size_t keep = kern_pack_ahead;

				/* one token also with Intel's prefetch distance
				 * (8 rows ahead, up to the matrix's end) */
				for (int pa = 0; pa < (nt == 1 ? 2 : 1); pa++) {
					kern_pack_ahead = pa ? 8 : keep;
					memset(y, 0x5a, sizeof(float) * n_out * T);
					kp_run(nt == 1 ? ops->pgemv[wt] : ops->pgemm[wt], p,
					       split ? cut : whole, split ? 4 : 2);
					kern_pack_ahead = keep;
					ck_assert_msg(memcmp(yr + k0 * n_out, y, sizeof(float) * n_out * nt) == 0,
						      "%s: %zu x %zu, tokens %zu..%zu (ahead %d) not the "
						      "reference's bits",
						      dtype_name(wt), n_out, n_in, k0, k0 + nt - 1, pa);
				}
			}
		free(w);
		free(pw);
		free(tmp);
		free(x);
		free(yr);
		free(y);
		free(xk);
	}
}
END_TEST

/* Packed Q4_K at the avx512 level (kernels_impl.h KERN_K4L_*), written
 * per byte, independently of the macro: in group super-block s (2304
 * bytes at group_base + 2304 s) byte k of row r's block at 256 (k / 16) +
 * 64 (k % 16 / 4) + 4 r + k % 4 (the header unit first). The SIMD packer
 * on 1, 3 and 5 groups of 1, 2, 7, 16 and 65 super-blocks (a row's blocks
 * in its own group super-block's region, in earlier ones, in later ones:
 * read from the saved copy or in place), random bytes, a stale temporary;
 * the unpack gives the file back. Then the panels (33 and 64 tokens, 20
 * super-blocks: chunks of 8, token groups of 8) against the file layout's
 * GEMM, called cut at a group; rows not a multiple of 16 have no packed
 * form. (1..17 tokens: packed_kernels_equal_file_layout_bit_for_bit and
 * the test above.) */
START_TEST(q4_k_packed_layout_is_the_contract)
{
	static const size_t outs[] = {16, 48, 80}, nbs[] = {1, 2, 7, 16, 65}, toks[] = {33, 64};
	const struct kern_ops *ops = kern_ops_for(CPU_LEVEL_AVX512);
	const size_t bs = sizeof(struct kern_block_q4_k);

	if (ops == NULL || !kern_level_runs(CPU_LEVEL_AVX512))
		return;
	ck_assert_uint_eq(ops->pack_rows[DTYPE_Q4_K], 16);
	for (size_t oi = 0; oi < 3; oi++)
		for (size_t bi = 0; bi < 5; bi++) {
			const size_t n_out = outs[oi], nb = nbs[bi], row = nb * bs, bytes = n_out * row;
			uint8_t *w = malloc(bytes), *p = malloc(bytes), *tmp = malloc(16 * row);

			ck_assert(w && p && tmp);
			for (size_t k = 0; k < bytes; k++)
				w[k] = (uint8_t)test_rand(&kp_rng);
			memcpy(p, w, bytes);
			memset(tmp, 0xa5, 16 * row);
			kern_avx512_pack_q4_k(p, n_out, nb, bs, 16, 0, tmp);
			for (size_t o = 0; o < n_out; o++)
				for (size_t b = 0; b < nb; b++)
					for (size_t k = 0; k < bs; k++)
						ck_assert_msg(p[o / 16 * 16 * row + b * 16 * bs + 256 * (k / 16) +
								64 * (k % 16 / 4) + 4 * (o % 16) + k % 4] ==
								      w[o * row + b * bs + k],
							      "row %zu block %zu byte %zu", o, b, k);
			kern_avx512_pack_q4_k(p, n_out, nb, bs, 16, 1, tmp);
			ck_assert(memcmp(p, w, bytes) == 0);
			free(w);
			free(p);
			free(tmp);
		}
	for (size_t ti = 0; ti < 2; ti++) {
		const size_t n_out = 48, nb = 20, n_in = nb * KERN_QKK, row = nb * bs, nt = toks[ti];
		uint8_t *w = malloc(n_out * row), *pw = malloc(n_out * row), *tmp = malloc(16 * row);
		float *x = malloc(sizeof(float) * n_in * nt), *y = malloc(sizeof(float) * n_out * nt);
		float *yp = malloc(sizeof(float) * n_out * nt);
		struct kern_block_q8_k *xk = malloc(sizeof(*xk) * nb * nt);
		const size_t cut[] = {0, 16, n_out};

		ck_assert(w && pw && tmp && x && y && yp && xk);
		kp_fill_blocks(DTYPE_Q4_K, w, n_out * row);
		memcpy(pw, w, n_out * row);
		ops->pack_fn[DTYPE_Q4_K](pw, n_out, nb, bs, 16, 0, tmp);
		for (size_t i = 0; i < n_in * nt; i++)
			x[i] = (float)((int)(test_rand(&kp_rng) % 2001) - 1000) / 300.0f;
		for (size_t t = 0; t < nt; t++)
			ops->quantize_act_q8k(x + t * n_in, xk + t * nb, n_in);
		struct kern_gemm_args a = {.w = w, .w_stride = row, .n_in = n_in, .x = x,
					   .x_stride = n_in * 4, .n_tok = nt, .y = y,
					   .y_stride = n_out, .xk = xk};
		struct kern_gemm_args pa = a;

		pa.w = pw;
		pa.y = yp;
		memset(yp, 0x5a, sizeof(float) * n_out * nt);
		ops->gemm[DTYPE_Q4_K](&a, 0, n_out);
		kp_run(ops->pgemm[DTYPE_Q4_K], pa, cut, 3);
		ck_assert_msg(memcmp(y, yp, sizeof(float) * n_out * nt) == 0,
			      "Q4_K 48 x %zu, %zu tokens: packed differs", n_in, nt);
		free(w);
		free(pw);
		free(tmp);
		free(x);
		free(y);
		free(yp);
		free(xk);
	}
	if (kern_init() == CPU_LEVEL_AVX512) {
		ck_assert_uint_eq(kern_pack_type(DTYPE_Q4_K, 40, 256), DTYPE_Q4_K);
		ck_assert_uint_eq(kern_pack_type(DTYPE_Q4_K, 8, 256), DTYPE_Q4_K);
		ck_assert_uint_eq(kern_pack_type(DTYPE_Q4_K, 48, 256), DTYPE_Q4_K | KERN_PACKED);
	}
}
END_TEST

/* The avx512 packed GEMVs' prefetch distance: EMBER_PACK_AHEAD's rows
 * where it is set and valid, else the vendor's default, 8 rows on Intel
 * (where without it a core streamed at ~2/3 of its rate), none elsewhere
 * (Zen 4: the prefetches cost issue slots the hardware prefetchers make
 * useless). A refused value keeps the vendor's default: it once counted
 * as set (a getenv() presence check) and gave 0 rows on Intel. */
START_TEST(pack_ahead_follows_env_or_vendor)
{
	static const char *const refused[] = {"9x", "-1", "65", "99999999999999999999", " 4"};
	const char *old = getenv("EMBER_PACK_AHEAD");
	char *keep = old ? strdup(old) : NULL;
	unsigned a, b, c, d;
	char vendor[13] = {0};
	size_t want = 0;

	if (__get_cpuid(0, &a, &b, &c, &d)) {
		memcpy(vendor, &b, 4);
		memcpy(vendor + 4, &d, 4);
		memcpy(vendor + 8, &c, 4);
	}
	if (strcmp(vendor, "GenuineIntel") == 0)
		want = 8;
	ck_assert_uint_eq(kern_pack_ahead_vendor(), want);
	unsetenv("EMBER_PACK_AHEAD");
	ck_assert_uint_eq(kern_pack_ahead_choose(), want);
	setenv("EMBER_PACK_AHEAD", "", 1);
	ck_assert_uint_eq(kern_pack_ahead_choose(), want);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		setenv("EMBER_PACK_AHEAD", refused[i], 1);
		ck_assert_uint_eq(kern_pack_ahead_choose(), want);
	}
	setenv("EMBER_PACK_AHEAD", "0", 1);
	ck_assert_uint_eq(kern_pack_ahead_choose(), 0);
	setenv("EMBER_PACK_AHEAD", "64", 1);
	ck_assert_uint_eq(kern_pack_ahead_choose(), 64);
	setenv("EMBER_PACK_AHEAD", "3", 1);
	ck_assert_uint_eq(kern_pack_ahead_choose(), 3);
	if (keep) {
		setenv("EMBER_PACK_AHEAD", keep, 1);
		free(keep);
	} else {
		unsetenv("EMBER_PACK_AHEAD");
	}
	/* what kern_init() chose is what the kernels read */
	kern_init();
	ck_assert_uint_eq(kern_avx512_pack_ahead(), kern_pack_ahead_choose());
	ck_assert_uint_le(kern_avx512_pack_ahead(), KERN_PACK_AHEAD_MAX);
}
END_TEST
#endif

Suite *suite_kernel_pack(void)
{
	Suite *s = suite_create("kernel_pack");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, pack_groups_layout_and_round_trip);
	tcase_add_test(tc, pack_groups_units);
	tcase_add_test(tc, resolve_takes_packed_form_with_gemm);
	tcase_add_test(tc, pack_rows_follow_the_active_level);
	tcase_add_test(tc, packed_kernels_equal_file_layout_bit_for_bit);
#if defined(__x86_64__)
	tcase_add_test(tc, q6_k_packed_batch_extremes_equal_the_gemv);
	tcase_add_test(tc, q6_k_packed_tokens_independent_of_their_batch);
	tcase_add_test(tc, q4_k_packed_layout_is_the_contract);
	tcase_add_test(tc, pack_ahead_follows_env_or_vendor);
#endif
	suite_add_tcase(s, tc);
	return s;
}
