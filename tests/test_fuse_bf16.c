/*
 * test_fuse_bf16.c - the prompt rows' row work written straight into the
 * amx level's bf16 A tiles (kernels.h kern_pre's bf16 writer,
 * kern_matmul_n_fused; forward.c's deferred norms and gated SiLU) gives
 * the unfused path's bits: the rows written as floats, then rounded into
 * the tiles by the quantizing tasks (kern_amxbf_act_row).
 *   - the kernels: kern_silu_mul_bf16 and kern_norm_rows_bf16 against
 *     kern_silu_mul / kern_norm_rows followed by kern_amxbf_act_row, tile
 *     bytes and the residual both;
 *   - the product: kern_matmul_n_fused with a writer against the same
 *     call with kern_bf16_fuse_off, outputs bit for bit, with rows past
 *     the last 16 (the int8 tail reads the float rows: the writer's redo);
 *     Q4_0, Q8_0 and the K-quants, the scratch poisoned before each call,
 *     and those rows also the all-sampled call's (the int8 or Q8_K blocks
 *     left to demand, kern_act_ensure, made and the eager ones' bits);
 *   - the model: the golden Q4_0, Q8_0, Q4_K_M, Q5_K_M and Q6_K files'
 *     logits after a prompt and their hidden states (every row a prompt
 *     row), fused and not.
 * Only where the plain bf16 tiles run (kern_bf16_plain: the amx level
 * with its bf16 GEMM on); elsewhere nothing is fused and it says so.
 */
#include <check.h>
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

static uint64_t fb_rng = 0x5eed15;

static void fb_fill(float *x, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++) {
		float u = (float)(test_rand(&fb_rng) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
		x[i] = u * scale * ((test_rand(&fb_rng) & 31) == 0 ? 40.0f : 1.0f);
	}
}

static int fb_runs(const char *what)
{
	kern_init();
	if (!kern_bf16_plain(DTYPE_Q4_0)) {
		fprintf(stderr, "fuse_bf16: skipping %s: no plain bf16 tiles at the %s level\n", what,
			cpu_level_name(kern_level()));
		return 0;
	}
	return 1;
}

#if defined(__x86_64__) /* the tiles' layout (kern_amxbf_*): x86-64 only */
/* Zeroed activation tiles for n_tok tokens of n_in. */
static uint16_t *fb_tiles(size_t n_in, size_t n_tok)
{
	const size_t n = kern_amxbf_tokens(n_tok) * n_in * sizeof(uint16_t);
	uint16_t *xb = test_alloc64(n);

	memset(xb, 0, n);
	return xb;
}
#endif

START_TEST(fused_kernels_give_the_unfused_tiles)
{
	enum { N_TOK = 21, FF = 768, D = 256 };
	if (!fb_runs("the kernels"))
		return;
#if defined(__x86_64__) /* kern_amxbf_act_row: x86-64 only */
	const size_t ntiles = kern_amxbf_tokens(N_TOK);
	/* the gated SiLU: g large enough for exp's clamps either way */
	float *y = test_alloc64(N_TOK * FF * sizeof(float)), *g = test_alloc64(N_TOK * FF * 4);
	float *yc = test_alloc64(N_TOK * FF * sizeof(float));
	uint16_t *ta = fb_tiles(FF, N_TOK), *tb = fb_tiles(FF, N_TOK);
	const struct kern_bf16_rows b = {tb, FF, 0};

	fb_fill(y, N_TOK * FF, 3.0f);
	fb_fill(g, N_TOK * FF, 4.0f);
	memcpy(yc, y, N_TOK * FF * sizeof(float));
	for (size_t t = 0; t < N_TOK; t++) {
		kern_silu_mul(yc + t * FF, g + t * FF, FF);
		kern_amxbf_act_row(yc + t * FF, FF, t, ta);
		kern_silu_mul_bf16(y + t * FF, g + t * FF, FF, kern_bf16_row(&b, t),
				   KERN_BF16_ROW_STEP);
	}
	ck_assert_msg(memcmp(ta, tb, ntiles * FF * sizeof(uint16_t)) == 0, "silu tiles differ");
	free(y), free(g), free(yc), free(ta), free(tb);

	/* the norms: RMS and layer, with and without bias and residual, 1..16 rows */
	float *x = test_alloc64(N_TOK * D * 4), *xa = test_alloc64(N_TOK * D * 4);
	float *xc = test_alloc64(N_TOK * D * 4), *add = test_alloc64(N_TOK * D * 4);
	float *out = test_alloc64(N_TOK * D * 4), gain[D], bias[D];

	fb_fill(gain, D, 1.5f);
	fb_fill(bias, D, 0.5f);
	for (int center = 0; center < 2; center++)
		for (int res = 0; res < 2; res++)
			for (size_t nr = 1; nr <= KERN_NORM_ROWS; nr += 5) {
				const struct kern_norm nm = {gain, center ? bias : NULL, 1e-5, D, center};
				uint16_t *na = fb_tiles(D, N_TOK), *nb = fb_tiles(D, N_TOK);
				const struct kern_bf16_rows bn = {nb, D, 1};
				uint16_t *dst[KERN_NORM_ROWS];

				fb_fill(x, N_TOK * D, 2.0f);
				fb_fill(add, N_TOK * D, 1.0f);
				memcpy(xa, x, N_TOK * D * 4);
				memcpy(xc, x, N_TOK * D * 4);
				/* rows 1 .. nr (token 0 exact, as forward.c lays a step out) */
				kern_norm_rows(&nm, xa + D, res ? xa + D : NULL, res ? add + D : NULL,
					       out + D, nr);
				for (size_t r = 0; r < nr; r++) {
					kern_amxbf_act_row(out + (1 + r) * D, D, r, na);
					dst[r] = kern_bf16_row(&bn, 1 + r);
				}
				kern_norm_rows_bf16(&nm, xc + D, res ? xc + D : NULL,
						    res ? add + D : NULL, dst, KERN_BF16_ROW_STEP, nr);
				ck_assert_msg(memcmp(na, nb, ntiles * D * 2) == 0,
					      "norm tiles differ: center %d res %d rows %zu", center,
					      res, nr);
				ck_assert(memcmp(xa, xc, N_TOK * D * 4) == 0);
				free(na), free(nb);
			}
	free(x), free(xa), free(xc), free(add), free(out);
#endif
}
END_TEST

START_TEST(fused_product_equals_unfused)
{
	enum { IN = 256, N_TOK = 45 };
	static const uint32_t types[] = {DTYPE_Q4_0, DTYPE_Q8_0, DTYPE_Q4_K, DTYPE_Q5_K,
					 DTYPE_Q6_K};
	static const size_t outs[] = {64, 40}; /* 40: 8 rows past the last 16 */
	static const size_t groups[] = {1, 16};
	const int no_threads = test_no_threads("fuse_bf16: the product");
	tpool_t pool = no_threads ? NULL : tpool_create(2);

	if (!fb_runs("the product")) {
		if (pool)
			tpool_destroy(pool);
		return;
	}
	float *u = test_alloc64(N_TOK * IN * 4), *g = test_alloc64(N_TOK * IN * 4);
	float *src = test_alloc64(IN * 4);

	fb_fill(u, N_TOK * IN, 2.0f);
	fb_fill(g, N_TOK * IN, 3.0f);
	for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++)
		for (size_t gi = 0; gi < 2; gi++)
			for (size_t n_exact = 1; n_exact <= 17; n_exact += 16) {
				const uint32_t t = types[ti];
				const size_t row = dtype_row_size(t, IN);
				const size_t sz = kern_matmul_scratch(t, IN, N_TOK);
				void *scratch = test_alloc64(sz);
				float *x = test_alloc64(N_TOK * IN * 4);
				struct kern_mm_part pa[2], pb[2], pr[2];
				uint8_t *w[2];

				for (size_t p = 0; p < 2; p++) {
					w[p] = test_alloc64(row * outs[p]);
					for (size_t o = 0; o < outs[p]; o++) {
						fb_fill(src, IN, 0.1f + (float)(o % 5));
						ck_assert_int_eq(kern_quantize_row(t, src, w[p] + o * row, IN), 0);
					}
					pa[p] = (struct kern_mm_part){w[p], outs[p],
								      test_alloc64(outs[p] * N_TOK * 4), 0};
					pb[p] = (struct kern_mm_part){w[p], outs[p],
								      test_alloc64(outs[p] * N_TOK * 4), 0};
					pr[p] = (struct kern_mm_part){w[p], outs[p],
								      test_alloc64(outs[p] * N_TOK * 4), 0};
				}
				struct test_silu_pre pre = {u, g, x, IN, 0};
				const struct kern_pre kp = {test_silu_pre_rows, &pre, groups[gi],
							    test_silu_pre_bf16, test_silu_pre_rows, NULL};

				/* poisoned (NaN scales): a path reading blocks left
				 * unmade, or the last call's, shows in its rows */
				memset(scratch, 0xff, sz);
				memset(x, 0, N_TOK * IN * 4);
				kern_matmul_n_fused(pool, t, IN, pr, 2, x, N_TOK, N_TOK, scratch, &kp);
				kern_bf16_fuse_off = 1;
				memset(scratch, 0xff, sz);
				memset(x, 0, N_TOK * IN * 4);
				kern_matmul_n_fused(pool, t, IN, pa, 2, x, N_TOK, n_exact, scratch, &kp);
				ck_assert_int_eq(pre.bf16_rows, 0);
				kern_bf16_fuse_off = 0;
				memset(scratch, 0xff, sz);
				memset(x, 0, N_TOK * IN * 4);
				kern_matmul_n_fused(pool, t, IN, pb, 2, x, N_TOK, n_exact, scratch, &kp);
				ck_assert_int_gt(pre.bf16_rows, 0);
				pre.bf16_rows = 0;
				for (size_t p = 0; p < 2; p++) {
					ck_assert_msg(memcmp(pa[p].y, pb[p].y, outs[p] * N_TOK * 4) == 0,
						      "%s part %zu group %zu n_exact %zu: fused differs",
						      dtype_name(t), p, groups[gi], n_exact);
					/* rows past the last 16: the int8 / VNNI path on
					 * every token, its blocks made on demand */
					for (size_t tok = 0; tok < N_TOK; tok++)
						for (size_t o = outs[p] / 16 * 16; o < outs[p]; o++)
							ck_assert_msg(memcmp(pb[p].y + tok * outs[p] + o,
									     pr[p].y + tok * outs[p] + o,
									     4) == 0,
								      "%s token %zu row %zu n_exact %zu: "
								      "%.9g, sampled %.9g",
								      dtype_name(t), tok, o, n_exact,
								      pb[p].y[tok * outs[p] + o],
								      pr[p].y[tok * outs[p] + o]);
					free(w[p]), free(pa[p].y), free(pb[p].y), free(pr[p].y);
				}
				free(scratch), free(x);
			}
	free(u), free(g), free(src);
	if (pool)
		tpool_destroy(pool);
}
END_TEST

START_TEST(fused_model_equals_unfused)
{
	static const char *const files[] = {"Q4_0", "Q8_0", "Q4_K_M", "Q5_K_M", "Q6_K"};
	char path[256], err[EMBER_ERR_MAX] = "";
	struct model m;

	if (!fb_runs("the model"))
		return;
	snprintf(path, sizeof(path), "../shared/golden/quants/llama-256/%s.gguf", files[_i]);
	ck_assert_msg(model_open(&m, path, err) == 0, "model_open %s: %s", path, err);
	test_model_switch_same(&m, &kern_bf16_fuse_off, files[_i], "unfused", "fused");
	model_free(&m);
}
END_TEST

Suite *suite_fuse_bf16(void)
{
	Suite *s = suite_create("fuse_bf16");
	TCase *tc = tcase_create("fused");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, fused_kernels_give_the_unfused_tiles);
	tcase_add_test(tc, fused_product_equals_unfused);
	tcase_add_loop_test(tc, fused_model_equals_unfused, 0, 5);
	suite_add_tcase(s, tc);
	return s;
}
