/*
 * test_mm_mixed.c - parts of differing weight types in one product
 * (kernels.h kern_mm_parts_share; forward_linear.c linear_n(): Q4_K_M's
 * q, k Q4_K with v Q6_K) give the separate products' bits:
 *   - the product: kern_matmul_n_fused over two parts of two types, with
 *     the deferred row work's bf16 writer, against a call per part (the
 *     row work in the first, its float rows read by the second), for
 *     prompt rows and sampled ones, one token (the GEMVs) and 45, packed
 *     rows and not; the scratch poisoned (NaN) before each call, so a part
 *     whose activation blocks the shared job did not make (or left to
 *     demand and never made) shows in its outputs; types whose products
 *     read other blocks are refused;
 *   - the model: the golden Q4_K_M file (layers with v and down Q6_K)
 *     after a prompt, a decode step and as hidden states, with the mixed
 *     parts in one job and with kern_mm_mixed_off (separate products).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "ember.h"
#include "forward.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "kv_cache.h"
#include "model.h"
#include "testutil.h"

static uint64_t mx_rng = 0x31415;

static void mx_fill(float *x, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++) {
		float u = (float)(test_rand(&mx_rng) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
		x[i] = u * scale * ((test_rand(&mx_rng) & 31) == 0 ? 40.0f : 1.0f);
	}
}

/* n_out rows of type t (packed where `pack` and the level packs it) at
 * *w; returns the type id to multiply with. */
static uint32_t mx_weights(uint32_t t, size_t n_out, size_t n_in, int pack, uint8_t **w)
{
	const size_t row = dtype_row_size(t, n_in);
	float *src = test_alloc64(n_in * sizeof(float));
	char err[EMBER_ERR_MAX] = "";
	uint32_t id = t;

	*w = test_alloc64(row * n_out);
	for (size_t o = 0; o < n_out; o++) {
		mx_fill(src, n_in, 0.1f + (float)(o % 5));
		ck_assert_int_eq(kern_quantize_row(t, src, *w + o * row, n_in), 0);
	}
	if (pack && kern_pack_type(t, n_out, n_in) == (t | KERN_PACKED)) {
		ck_assert_msg(kern_pack_rows(t, *w, n_out, n_in, err) == 0, "pack: %s", err);
		id = t | KERN_PACKED;
	}
	free(src);
	return id;
}

START_TEST(mixed_parts_equal_separate_products)
{
	enum { IN = 256, N_TOK = 45 };
	static const uint32_t pairs[][2] = {{DTYPE_Q4_K, DTYPE_Q6_K}, {DTYPE_Q6_K, DTYPE_Q4_K},
					    {DTYPE_Q4_K, DTYPE_Q5_K}, {DTYPE_Q4_0, DTYPE_Q8_0}};
	static const size_t outs[2][2] = {{64, 40}, {64, 48}}; /* unpacked, packed */
	static const size_t toks[] = {1, N_TOK}, exacts[] = {1, 17, N_TOK};
	const int no_threads = test_no_threads("mm_mixed: the product");
	tpool_t pool = no_threads ? NULL : tpool_create(2);
	float *u = test_alloc64(N_TOK * IN * 4), *g = test_alloc64(N_TOK * IN * 4);
	int shared = 0;

	kern_init();
	mx_fill(u, N_TOK * IN, 2.0f);
	mx_fill(g, N_TOK * IN, 3.0f);
	/* Q4_0's int8 blocks are not Q4_K's Q8_K ones: never one job */
	ck_assert(!kern_mm_parts_share(DTYPE_Q4_0, DTYPE_Q6_K, IN));
	ck_assert(!kern_mm_parts_share(DTYPE_Q4_K, DTYPE_F32, IN));
	for (size_t pi = 0; pi < sizeof(pairs) / sizeof(pairs[0]); pi++)
		for (int pack = 0; pack < 2; pack++) {
			uint8_t *w[2];
			uint32_t id[2];

			for (size_t p = 0; p < 2; p++)
				id[p] = mx_weights(pairs[pi][p], outs[pack][p], IN, pack, &w[p]);
			if (!kern_mm_parts_share(id[0], id[1], IN)) {
				fprintf(stderr, "mm_mixed: %s%s and %s%s not shared at the %s level\n",
					dtype_name(pairs[pi][0]), id[0] & KERN_PACKED ? "p" : "",
					dtype_name(pairs[pi][1]), id[1] & KERN_PACKED ? "p" : "",
					cpu_level_name(kern_level()));
				free(w[0]), free(w[1]);
				continue;
			}
			shared++;
			const size_t sz0 = kern_matmul_scratch(id[0], IN, N_TOK);
			const size_t sz1 = kern_matmul_scratch(id[1], IN, N_TOK);
			const size_t sz = sz0 > sz1 ? sz0 : sz1;
			void *scratch = test_alloc64(sz);
			float *x = test_alloc64(N_TOK * IN * 4);

			for (size_t ti = 0; ti < 2; ti++)
				for (size_t ei = 0; ei < 3; ei++)
					for (size_t grp = 1; grp <= 16; grp += 15) {
						const size_t n_tok = toks[ti], n_exact = exacts[ei];
						struct test_silu_pre pre = {u, g, x, IN, 0};
						const struct kern_pre kp = {test_silu_pre_rows, &pre, grp,
									    test_silu_pre_bf16,
									    test_silu_pre_rows, NULL};
						const struct kern_pre kr = {test_silu_pre_rows, &pre, grp, NULL, NULL, NULL};
						struct kern_mm_part sep[2], mix[2];

						for (size_t p = 0; p < 2; p++) {
							const size_t ny = outs[pack][p] * n_tok;

							sep[p] = (struct kern_mm_part){w[p], outs[pack][p],
										       test_alloc64(ny * 4), 0};
							mix[p] = (struct kern_mm_part){w[p], outs[pack][p],
										       test_alloc64(ny * 4), id[p]};
						}
						/* separate: the row work in the first product */
						memset(x, 0, N_TOK * IN * 4);
						memset(scratch, 0xff, sz);
						kern_matmul_n_fused(pool, id[0], IN, &sep[0], 1, x, n_tok, n_exact,
								    scratch, &kr);
						memset(scratch, 0xff, sz);
						kern_matmul_n_fused(pool, id[1], IN, &sep[1], 1, x, n_tok, n_exact,
								    scratch, NULL);
						/* one job: the row work's bf16 writer where it runs */
						memset(x, 0, N_TOK * IN * 4);
						memset(scratch, 0xff, sz);
						kern_matmul_n_fused(pool, id[0], IN, mix, 2, x, n_tok, n_exact,
								    scratch, &kp);
						for (size_t p = 0; p < 2; p++) {
							for (size_t i = 0; i < outs[pack][p] * n_tok; i++) {
								ck_assert_msg(isfinite(sep[p].y[i]),
									      "separate %s: %zu not finite",
									      dtype_name(pairs[pi][p]), i);
								ck_assert_msg(
									memcmp(sep[p].y + i, mix[p].y + i, 4) == 0,
									"%s+%s%s part %zu, %zu tokens, n_exact %zu, "
									"group %zu: output %zu: %.9g separate, %.9g "
									"one job",
									dtype_name(pairs[pi][0]),
									dtype_name(pairs[pi][1]), pack ? " packed" : "",
									p, n_tok, n_exact, grp, i, sep[p].y[i],
									mix[p].y[i]);
							}
							free(sep[p].y), free(mix[p].y);
						}
					}
			free(scratch), free(x), free(w[0]), free(w[1]);
		}
	fprintf(stderr, "mm_mixed: %d type pairs in one job at the %s level\n", shared,
		cpu_level_name(kern_level()));
	free(u), free(g);
	if (pool)
		tpool_destroy(pool);
}
END_TEST

START_TEST(mixed_model_equals_separate_products)
{
	const char *path = "../shared/golden/quants/llama-256/Q4_K_M.gguf";
	char err[EMBER_ERR_MAX] = "";
	struct model m;
	int mixed = 0;

	ck_assert_msg(model_open(&m, path, err) == 0, "model_open %s: %s", path, err);
	for (uint32_t il = 0; il < m.hp.n_layer; il++) {
		const struct model_weight *w = m.layers[il].w;

		mixed += w[ARCH_T_ATTN_V].type != w[ARCH_T_ATTN_Q].type;
	}
	ck_assert_msg(mixed > 0, "%s: no layer with q and v of differing types", path);
	test_model_switch_same(&m, &kern_mm_mixed_off, path, "separate", "one job");
	model_free(&m);
}
END_TEST

Suite *suite_mm_mixed(void)
{
	Suite *s = suite_create("mm_mixed");
	TCase *tc = tcase_create("mixed");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, mixed_parts_equal_separate_products);
	tcase_add_test(tc, mixed_model_equals_separate_products);
	suite_add_tcase(s, tc);
	return s;
}
