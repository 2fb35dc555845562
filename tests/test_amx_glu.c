/*
 * test_amx_glu.c - the MLP's gate and up products of prompt rows as one
 * paired call whose epilogue writes silu(gate) * up straight into the
 * down product's bf16 A tiles (kernels.h kern_matmul_glu, kernels_amx_bf16.c
 * kern_amxbf_glu, issue 17) gives the unfused path's bits:
 *   - the product: kern_matmul_glu's tile rows against the two products
 *     (kern_matmul_n_split) followed by kern_silu_mul_bf16, byte for byte,
 *     and its sampled rows' y against theirs: Q4_0, Q8_0, Q4_K, Q6_K
 *     (packed and not), one K chunk and three, one row block and two,
 *     TinyLlama's 5632 rows (176-row pool chunks: calls that start and end
 *     half way through a 32-element step), 77 tokens (not a multiple of
 *     32), n_exact 0 and 3, one thread and two, the tiles and the scratch
 *     poisoned with NaNs before each call; and the driver's fallback from
 *     the two products' y (kern_amxbf_glu_y) against the same rows;
 *   - the model: the golden llama-256 Q4_0 and Q4_K_M files' prompt and
 *     decode logits and hidden states with the paired calls and without
 *     (kern_glu_off), bit for bit.
 * Only where the plain bf16 tiles run (kern_bf16_plain); elsewhere it says
 * so and checks nothing.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "ember.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "model.h"
#include "testutil.h"

static int glu_runs(const char *what)
{
	kern_init();
	if (!kern_bf16_plain(DTYPE_Q4_0)) {
		fprintf(stderr, "amx_glu: skipping %s: no plain bf16 tiles at the %s level\n", what,
			cpu_level_name(kern_level()));
		return 0;
	}
	return 1;
}

#if defined(__x86_64__) /* the tiles' layout (kern_amxbf_*): x86-64 only */
static uint64_t glu_rng = 0x91017;

static void glu_fill(float *x, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++) {
		float u = (float)(test_rand(&glu_rng) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
		x[i] = u * scale * ((test_rand(&glu_rng) & 31) == 0 ? 40.0f : 1.0f);
	}
}

/* Token k's tile row (out elements, a multiple of 32) in a and b alike. */
static int glu_rows_equal(uint16_t *a, uint16_t *b, size_t out, size_t k)
{
	for (size_t s = 0; s < out / 32; s++)
		if (memcmp(kern_amxbf_row(a, out, k) + s * KERN_BF16_ROW_STEP,
			   kern_amxbf_row(b, out, k) + s * KERN_BF16_ROW_STEP, 64) != 0)
			return 0;
	return 1;
}

/* One shape: types x n_exact x threads, paired against unfused. */
static void glu_check(size_t in, size_t out, size_t n_tok, tpool_t pool)
{
	static const uint32_t types[] = {DTYPE_Q4_0, DTYPE_Q8_0, DTYPE_Q4_K, DTYPE_Q6_K};
	const size_t ntb = kern_amxbf_tokens(n_tok) * out * sizeof(uint16_t);
	float *x = test_alloc64(n_tok * in * 4), *src = test_alloc64(in * 4);
	float *yu = test_alloc64(n_tok * out * 4), *yg = test_alloc64(n_tok * out * 4);
	float *ru = test_alloc64(n_tok * out * 4), *rg = test_alloc64(n_tok * out * 4);
	uint16_t *xa = test_alloc64(ntb), *xr = test_alloc64(ntb);

	glu_fill(x, n_tok * in, 1.0f);
	for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++)
		for (int packed = 0; packed < 2; packed++) {
			const uint32_t t = packed ? kern_pack_type(types[ti], out, in) : types[ti];
			const size_t row = dtype_row_size(types[ti], in);
			const size_t sz = kern_matmul_scratch(t, in, n_tok);
			void *scratch = test_alloc64(sz);
			uint8_t *w[2];

			char err[EMBER_ERR_MAX] = "";

			if (packed && !(t & KERN_PACKED)) {
				free(scratch);
				continue;
			}
			for (size_t p = 0; p < 2; p++) {
				w[p] = test_alloc64(row * out);
				for (size_t o = 0; o < out; o++) {
					glu_fill(src, in, 0.05f + 0.02f * (float)(o % 7));
					ck_assert_int_eq(kern_quantize_row(types[ti], src, w[p] + o * row,
									   in),
							 0);
				}
				if (packed)
					ck_assert_msg(kern_pack_rows(types[ti], w[p], out, in, err) == 0,
						      "pack: %s", err);
			}
			for (size_t n_exact = 0; n_exact <= 3; n_exact += 3) {
				const struct kern_mm_part pr[2] = {{w[0], out, ru, t}, {w[1], out, rg, t}};
				const struct kern_mm_part pg[2] = {{w[0], out, yu, t}, {w[1], out, yg, t}};
				const struct kern_bf16_rows b = {xr, out, n_exact};

				/* unfused: both products, then the SiLU into tiles */
				memset(scratch, 0xff, sz);
				memset(xr, 0, ntb);
				kern_matmul_n_split(pool, t, in, pr, 2, x, n_tok, n_exact, scratch,
						    NULL, NULL, 0);
				for (size_t k = n_exact; k < n_tok; k++)
					kern_silu_mul_bf16(ru + k * out, rg + k * out, out,
							   kern_bf16_row(&b, k), KERN_BF16_ROW_STEP);
				/* paired: tiles poisoned (NaN), y poisoned */
				memset(scratch, 0xff, sz);
				memset(xa, 0xff, ntb);
				memset(yu, 0xff, n_tok * out * 4);
				memset(yg, 0xff, n_tok * out * 4);
				ck_assert_int_eq(kern_matmul_glu(pool, t, in, pg, x, n_tok, n_exact,
								 scratch, NULL, xa),
						 1);
				for (size_t k = 0; k < n_tok - n_exact; k++)
					ck_assert_msg(glu_rows_equal(xa, xr, out, k),
						      "%s packed %d in %zu out %zu n_exact %zu: "
						      "token %zu's tiles differ",
						      dtype_name(types[ti]), packed, in, out, n_exact, k);
				/* the sampled rows' y: the products' */
				ck_assert(memcmp(yu, ru, n_exact * out * 4) == 0);
				ck_assert(memcmp(yg, rg, n_exact * out * 4) == 0);
				/* the fallback's epilogue from y: the same rows */
				memset(xa, 0xff, ntb);
				kern_amxbf_glu_y(ru + n_exact * out, rg + n_exact * out, out,
						 n_tok - n_exact, 0, out, xa);
				for (size_t k = 0; k < n_tok - n_exact; k++)
					ck_assert_msg(glu_rows_equal(xa, xr, out, k),
						      "%s: fallback token %zu differs",
						      dtype_name(types[ti]), k);
				/* off: the plain product, every row's y */
				kern_glu_off = 1;
				memset(scratch, 0xff, sz);
				ck_assert_int_eq(kern_matmul_glu(pool, t, in, pg, x, n_tok, n_exact,
								 scratch, NULL, xa),
						 0);
				kern_glu_off = 0;
				ck_assert(memcmp(yu, ru, n_tok * out * 4) == 0);
				ck_assert(memcmp(yg, rg, n_tok * out * 4) == 0);
			}
			free(w[0]), free(w[1]), free(scratch);
		}
	free(x), free(src), free(yu), free(yg), free(ru), free(rg), free(xa), free(xr);
}
#endif

START_TEST(paired_call_gives_the_unfused_tiles)
{
	const int no_threads = test_no_threads("amx_glu: the product");
	tpool_t pool = no_threads ? NULL : tpool_create(2);

	if (glu_runs("the product")) {
#if defined(__x86_64__)
		/* one K chunk (256), three (1280: 16 + 16 + 8 steps); 416
		 * rows in one row block; TinyLlama's 5632 rows, 176-row chunks */
		glu_check(256, 416, 77, pool);
		glu_check(1280, 416, 77, pool);
		glu_check(1280, 416, 77, NULL);
		glu_check(256, 5632, 45, pool);
		/* one call over two row blocks at the library's sums budget
		 * (1 MiB for both parts: 1344 rows at 96 padded tokens) */
		glu_check(1280, 1600, 77, NULL);
#endif
	}
	if (pool)
		tpool_destroy(pool);
}
END_TEST

START_TEST(paired_model_equals_unpaired)
{
	static const char *const files[] = {"Q4_0", "Q4_K_M"};
	char path[256], err[EMBER_ERR_MAX] = "";
	struct model m;

	if (!glu_runs("the model"))
		return;
	snprintf(path, sizeof(path), "../shared/golden/quants/llama-256/%s.gguf", files[_i]);
	ck_assert_msg(model_open(&m, path, err) == 0, "model_open %s: %s", path, err);
	test_model_switch_same(&m, &kern_glu_off, files[_i], "unpaired", "paired");
	model_free(&m);
}
END_TEST

Suite *suite_amx_glu(void)
{
	Suite *s = suite_create("amx_glu");
	TCase *tc = tcase_create("paired");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, paired_call_gives_the_unfused_tiles);
	tcase_add_loop_test(tc, paired_model_equals_unpaired, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
