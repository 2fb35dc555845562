/* test_kernels_driver.c - the kernels' public driver: the level each
 * operation gets (resolve, describe, init) and the threaded paths (a
 * threaded matmul, the region split, the fused and row-work matmuls)
 * bit for bit against one thread. Each kernel's own results are in
 * test_kernels.c. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "testutil.h"

static const uint32_t kt_types[] = TEST_KERN_TYPES;

/* One matmul case: weights of type over out x in (w, their float
 * values wf), n_tok activation rows x filled at scale (after the
 * weights, so the random stream is the one the tests always drew), and
 * two outputs y1, y2 to compare. kt_case_free() releases them. */
struct kt_case {
	void *w;
	float *wf, *x, *y1, *y2;
};

static void kt_case_new(struct kt_case *c, uint32_t type, size_t out, size_t in, size_t n_tok,
			float scale)
{
	c->x = test_alloc64(in * n_tok * sizeof(float));
	c->y1 = test_alloc64(out * n_tok * sizeof(float));
	c->y2 = test_alloc64(out * n_tok * sizeof(float));
	c->w = test_kern_weights(type, out, in, &c->wf);
	test_kern_fill(c->x, in * n_tok, scale);
}

static void kt_case_free(struct kt_case *c)
{
	free(c->w);
	free(c->wf);
	free(c->x);
	free(c->y1);
	free(c->y2);
}

/* ---- the public driver -------------------------------------------------------- */

START_TEST(threaded_matmul_equals_single_thread_bit_for_bit)
{
	enum { OUT = 133, IN = 256 };
	static const size_t toks[] = {1, 9};
	tpool_t pool;

	if (test_no_threads("kernels: threaded_matmul_equals_single_thread_bit_for_bit"))
		return;
	pool = tpool_create(2);

	ck_assert_ptr_nonnull(pool);
	kern_init();
	for (size_t ti = 0; ti < sizeof(kt_types) / sizeof(kt_types[0]); ti++) {
		for (size_t k = 0; k < 2; k++) {
			size_t n_tok = toks[k];
			struct kt_case c;
			float *x, *y1, *y2;
			void *w;

			kt_case_new(&c, kt_types[ti], OUT, IN, n_tok, 1.0f);
			w = c.w, x = c.x, y1 = c.y1, y2 = c.y2;
			test_kern_matmul(NULL, kt_types[ti], w, OUT, IN, x, n_tok, y1);
			test_kern_matmul(pool, kt_types[ti], w, OUT, IN, x, n_tok, y2);
			ck_assert_msg(memcmp(y1, y2, OUT * n_tok * sizeof(float)) == 0, "%s tok=%zu",
				      dtype_name(kt_types[ti]), n_tok);
			if (n_tok > 1) { /* a token's result does not depend on its batch */
				test_kern_matmul(pool, kt_types[ti], w, OUT, IN, x + IN, 1, y2);
				ck_assert(memcmp(y1 + OUT, y2, OUT * sizeof(float)) == 0);
			}
			kt_case_free(&c);
		}
	}
	tpool_destroy(pool);
}
END_TEST

/* The tokens [1, n_tok) of a matmul as prompt rows (the bf16 tiles where
 * the level has them), token 0 exact. */
static void kt_matmul_split(tpool_t pool, uint32_t t, const void *w, size_t n_out, size_t n_in,
			    const float *x, size_t n_tok, float *y)
{
	const struct kern_mm_part part = {w, n_out, y, 0};
	size_t sz = kern_matmul_scratch(t, n_in, n_tok);
	void *scratch = sz ? test_alloc64(sz) : NULL;

	kern_matmul_n_split(pool, t, n_in, &part, 1, x, n_tok, 1, scratch, NULL, NULL, 0);
	free(scratch);
}

/* Threads split the chunks into one region each with stealing: one chunk
 * a claim for decode and small batches (kernels.c, kern__region_cb),
 * shrinking runs of chunks, one call a run, in prefill (kern__runs_cb).
 * Any thread count, more threads than chunks, rows past the last whole
 * tile, token counts on both sides of the small-batch bound, prompt rows
 * on their own path too: all bit-identical to one thread. */
START_TEST(region_split_equals_single_thread_bit_for_bit)
{
	enum { OUT = 301, IN = 256 };
	static const uint32_t threads[] = {2, 3, 7, 40};
	static const size_t toks[] = {1, 3, 16, 17, 40};

	if (test_no_threads("kernels: region_split_equals_single_thread_bit_for_bit"))
		return;
	kern_init();
	for (size_t p = 0; p < sizeof(threads) / sizeof(threads[0]); p++) {
		tpool_t pool = tpool_create(threads[p]);
		ck_assert_ptr_nonnull(pool);
		for (size_t ti = 0; ti < sizeof(kt_types) / sizeof(kt_types[0]); ti++)
			for (size_t k = 0; k < sizeof(toks) / sizeof(toks[0]); k++) {
				size_t n_tok = toks[k];
				struct kt_case c;
				float *x, *y1, *y2;
				void *w;

				kt_case_new(&c, kt_types[ti], OUT, IN, n_tok, 0.5f);
				w = c.w, x = c.x, y1 = c.y1, y2 = c.y2;
				memset(y2, 0xff, OUT * n_tok * sizeof(float)); /* NaNs: unwritten */
				test_kern_matmul(NULL, kt_types[ti], w, OUT, IN, x, n_tok, y1);
				test_kern_matmul(pool, kt_types[ti], w, OUT, IN, x, n_tok, y2);
				ck_assert_msg(memcmp(y1, y2, OUT * n_tok * sizeof(float)) == 0,
					      "%s tok=%zu threads=%u", dtype_name(kt_types[ti]), n_tok,
					      threads[p]);
				memset(y2, 0xff, OUT * n_tok * sizeof(float));
				kt_matmul_split(NULL, kt_types[ti], w, OUT, IN, x, n_tok, y1);
				kt_matmul_split(pool, kt_types[ti], w, OUT, IN, x, n_tok, y2);
				ck_assert_msg(memcmp(y1, y2, OUT * n_tok * sizeof(float)) == 0,
					      "%s tok=%zu threads=%u, prompt rows",
					      dtype_name(kt_types[ti]), n_tok, threads[p]);
				kt_case_free(&c);
			}
		tpool_destroy(pool);
	}
}
END_TEST

START_TEST(fused_matmul_equals_separate_matmuls_bit_for_bit)
{
	enum { IN = 288 };
	static const size_t outs[] = {133, 0, 8, 37};
	static const size_t toks[] = {1, 9};
	/* 2, 3 and 5 threads: streaming jobs cut their chunks into regions
	 * of about equal rows over parts of unequal chunk heights (kernels.c
	 * kern__cut_regions), regions across part boundaries */
	static const uint32_t pools[] = {2, 3, 5};
	tpool_t pool;

	if (test_no_threads("kernels: fused_matmul_equals_separate_matmuls_bit_for_bit"))
		return;
	kern_init();
	for (size_t pi = 0; pi < sizeof(pools) / sizeof(pools[0]); pi++) {
		pool = tpool_create(pools[pi]);
		ck_assert_ptr_nonnull(pool);
		for (size_t ti = 0; ti < sizeof(kt_types) / sizeof(kt_types[0]); ti++) {
			for (size_t k = 0; k < 2; k++) {
				size_t n_tok = toks[k], sz = kern_matmul_scratch(kt_types[ti], IN, n_tok);
				float *x = test_alloc64(IN * n_tok * sizeof(float));
				void *scratch = sz ? test_alloc64(sz) : NULL;
				struct kern_mm_part parts[4];
				void *w[4];
				float *wf[4], *y1[4];

				test_kern_fill(x, IN * n_tok, 1.0f);
				for (size_t p = 0; p < 4; p++) {
					w[p] = test_kern_weights(kt_types[ti], outs[p] ? outs[p] : 1, IN, &wf[p]);
					y1[p] = test_alloc64((outs[p] + 1) * n_tok * sizeof(float));
					parts[p] = (struct kern_mm_part){w[p], outs[p],
									 test_alloc64((outs[p] + 1) * n_tok *
										  sizeof(float)), 0};
					test_kern_matmul(NULL, kt_types[ti], w[p], outs[p], IN, x, n_tok, y1[p]);
				}
				kern_matmul_n(pool, kt_types[ti], IN, parts, 4, x, n_tok, scratch);
				for (size_t p = 0; p < 4; p++) {
					ck_assert_msg(memcmp(y1[p], parts[p].y,
							     outs[p] * n_tok * sizeof(float)) == 0,
						      "%s tok=%zu part=%zu", dtype_name(kt_types[ti]), n_tok, p);
					free(w[p]);
					free(wf[p]);
					free(y1[p]);
					free(parts[p].y);
				}
				free(scratch);
				free(x);
			}
		}
		tpool_destroy(pool);
	}
}
END_TEST

/* kern_matmul_n_pre's row work: x[t] = x0[t] * (t + 1), marking the rows
 * it was called for (each exactly once). */
struct kt_pre {
	const float *x0;
	float *x;
	size_t n_in;
	int calls[64];
};

static void kt_pre_rows(void *ctx, size_t t0, size_t t1)
{
	struct kt_pre *p = ctx;

	for (size_t t = t0; t < t1; t++) {
		for (size_t i = 0; i < p->n_in; i++)
			p->x[t * p->n_in + i] = p->x0[t * p->n_in + i] * (float)(t + 1);
		p->calls[t]++;
	}
}

static void kt_row_work_check(tpool_t pool);

/* kern_matmul_n_pre() equals its row work followed by kern_matmul_n(),
 * bit for bit, on every type, 1, 2 and 4 threads (4: more regions than
 * the host's two CPUs), groups of 1 and 4 rows, batch sizes around the
 * groups; and runs the work once per row. One token's outputs also
 * equal a run without a pool (a decode step's rows never depend on the
 * thread that streams them). */
START_TEST(matmul_with_row_work_equals_work_then_matmul)
{
	const int no_threads = test_no_threads("kernels: matmul_with_row_work");

	for (size_t n_thr = 2; n_thr <= 4; n_thr += 2)
		kt_row_work_check(no_threads ? NULL : tpool_create(n_thr));
}
END_TEST

static void kt_row_work_check(tpool_t pool)
{
	enum { IN = 288 };
	static const size_t outs[] = {133, 8};
	static const size_t toks[] = {1, 5, 8, 17};

	kern_init();
	for (size_t ti = 0; ti < sizeof(kt_types) / sizeof(kt_types[0]); ti++)
		for (size_t k = 0; k < sizeof(toks) / sizeof(toks[0]); k++)
			for (size_t rows = 1; rows <= 4; rows += 3) {
				size_t n_tok = toks[k], sz = kern_matmul_scratch(kt_types[ti], IN, n_tok);
				float *x0 = test_alloc64(IN * n_tok * sizeof(float));
				float *xa = test_alloc64(IN * n_tok * sizeof(float));
				float *xb = test_alloc64(IN * n_tok * sizeof(float));
				void *scratch = sz ? test_alloc64(sz) : NULL;
				struct kern_mm_part pa[2], pb[2];
				struct kt_pre pre = {x0, xb, IN, {0}};
				void *w[2];
				float *wf[2];

				test_kern_fill(x0, IN * n_tok, 1.0f);
				for (size_t t = 0; t < n_tok; t++)
					for (size_t i = 0; i < IN; i++)
						xa[t * IN + i] = x0[t * IN + i] * (float)(t + 1);
				for (size_t p = 0; p < 2; p++) {
					w[p] = test_kern_weights(kt_types[ti], outs[p], IN, &wf[p]);
					pa[p] = (struct kern_mm_part){w[p], outs[p],
								      test_alloc64(outs[p] * n_tok * sizeof(float)), 0};
					pb[p] = (struct kern_mm_part){w[p], outs[p],
								      test_alloc64(outs[p] * n_tok * sizeof(float)), 0};
				}
				kern_matmul_n(pool, kt_types[ti], IN, pa, 2, xa, n_tok, scratch);
				kern_matmul_n_pre(pool, kt_types[ti], IN, pb, 2, xb, n_tok, scratch,
						  kt_pre_rows, &pre, rows);
				ck_assert(memcmp(xa, xb, IN * n_tok * sizeof(float)) == 0);
				for (size_t t = 0; t < n_tok; t++)
					ck_assert_int_eq(pre.calls[t], 1);
				for (size_t p = 0; p < 2; p++) {
					ck_assert_msg(memcmp(pa[p].y, pb[p].y,
							     outs[p] * n_tok * sizeof(float)) == 0,
						      "%s tok=%zu rows=%zu part=%zu threads=%zu",
						      dtype_name(kt_types[ti]), n_tok, rows, p,
						      tpool_threads(pool));
					if (n_tok == 1) { /* the pool's run equals one thread's */
						kern_matmul_n(NULL, kt_types[ti], IN, &pa[p], 1, xa,
							      1, scratch);
						ck_assert_msg(memcmp(pa[p].y, pb[p].y,
								     outs[p] * sizeof(float)) == 0,
							      "%s part=%zu threads=%zu alone",
							      dtype_name(kt_types[ti]), p,
							      tpool_threads(pool));
					}
					free(w[p]);
					free(wf[p]);
					free(pa[p].y);
					free(pb[p].y);
				}
				free(scratch);
				free(x0);
				free(xa);
				free(xb);
			}
	tpool_destroy(pool);
}

/* ---- the level each operation gets ------------------------------------------- */

/* Per-operation choice: with made-up feature sets and every cap, each
 * entry comes from a level the features allow and the cap admits, and no
 * entry is left empty (a level's missing entries come from below). */
START_TEST(resolve_never_picks_an_unavailable_level)
{
	const enum cpu_level *list;
	size_t n = cpu_levels(&list);
	struct cpu_features fs[6];

	memset(fs, 0, sizeof(fs));
	fs[1].avx2 = 1;
	fs[2].avx2 = fs[2].avx512 = 1; /* no VNNI: not the avx512 level */
	fs[3].avx2 = fs[3].avx512 = fs[3].avx512_vnni = 1;
	fs[4].avx512 = fs[4].avx512_vnni = 1; /* AVX-512 without AVX2: scalar */
	memset(&fs[5], 0xff, sizeof(fs[5]));
	for (size_t fi = 0; fi < sizeof(fs) / sizeof(fs[0]); fi++) {
		for (size_t ci = 0; ci < n; ci++) {
			struct kern_ops ops;
			struct kern_origin org;
			enum cpu_level top = kern_resolve(&fs[fi], list[ci], &ops, &org);
			enum cpu_level got[9 + 2 * DTYPE_COUNT];
			size_t k = 0, rank_cap = ci;

			got[k++] = org.quantize_act;
			got[k++] = org.attn_scores;
			got[k++] = org.attn_accum;
			got[k++] = org.fp16_row;
			got[k++] = org.max;
			got[k++] = org.exp_sum;
			got[k++] = org.silu_mul;
			got[k++] = org.norm_rows;
			got[k++] = org.fp16_from_row;
			for (uint32_t t = 0; t < DTYPE_COUNT; t++) {
				if (!kern_supports(t))
					continue;
				ck_assert_ptr_nonnull(ops.gemm[t]);
				ck_assert_ptr_nonnull(ops.gemv[t]);
				ck_assert_int_eq(org.gemm[t], org.gemv[t]);
				got[k++] = org.gemm[t];
			}
			ck_assert(ops.quantize_act && ops.attn_scores && ops.attn_accum &&
				  ops.fp16_row && ops.max && ops.exp_sum && ops.silu_mul && ops.norm_rows &&
				  ops.fp16_from_row);
			ck_assert(cpu_level_usable(&fs[fi], top));
			for (size_t j = 0; j < k; j++) {
				size_t r = 0;
				while (r < n && list[r] != got[j])
					r++;
				ck_assert_msg(r < n && r <= rank_cap && cpu_level_usable(&fs[fi], got[j]),
					      "features #%zu cap %s: entry %zu from %s", fi,
					      cpu_level_name(list[ci]), j, cpu_level_name(got[j]));
			}
		}
	}
	/* Below AVX2 everything is the reference. */
	{
		struct kern_ops ops;
		kern_resolve(&fs[4], CPU_LEVEL_AVX512, &ops, NULL);
		ck_assert(ops.gemm[DTYPE_Q4_0] == kern_ops_ref.gemm[DTYPE_Q4_0]);
		ck_assert(ops.silu_mul == kern_ops_ref.silu_mul);
		/* no F16-in-place attention there: the caller converts rows */
		ck_assert(ops.attn_scores_f16 == NULL && ops.attn_accum_f16 == NULL);
	}
#if defined(__x86_64__)
	/* the AVX2 and AVX-512 levels read F16 rows in place, each its own */
	{
		struct kern_ops ops;
		struct kern_origin org;
		kern_resolve(&fs[1], CPU_LEVEL_AVX512, &ops, &org);
		ck_assert(ops.attn_scores_f16 && ops.attn_accum_f16);
		ck_assert_int_eq(org.attn_scores_f16, CPU_LEVEL_AVX2);
		kern_resolve(&fs[3], CPU_LEVEL_AVX512, &ops, &org);
		ck_assert_int_eq(org.attn_scores_f16, CPU_LEVEL_AVX512);
		ck_assert_int_eq(org.exp_sum, CPU_LEVEL_AVX512);
		kern_resolve(&fs[3], CPU_LEVEL_AVX2, &ops, &org);
		ck_assert_int_eq(org.attn_accum_f16, CPU_LEVEL_AVX2);
	}
#endif
}
END_TEST

/* kern_describe() names only levels this CPU runs. */
START_TEST(describe_names_runnable_levels)
{
	char buf[KERN_DESCRIBE_MAX], *line;

	kern_init();
	kern_describe(buf, sizeof(buf));
	/* not truncated: the last line whole (the version commands print it) */
	ck_assert_uint_lt(strlen(buf), sizeof(buf) - 64);
	ck_assert_ptr_nonnull(strstr(buf, "op norm: "));
	ck_assert_ptr_nonnull(strstr(buf, "op gemv q4_0: "));
	ck_assert_ptr_nonnull(strstr(buf, "op silu_mul: "));
	for (line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		const char *lv = strrchr(line, ' ') + 1;
		int ok = 0;
		for (int l = 0; l < CPU_LEVEL_COUNT; l++)
			if (strcmp(lv, cpu_level_name((enum cpu_level)l)) == 0)
				ok = kern_level_runs((enum cpu_level)l);
		ck_assert_msg(ok, "%s", line);
	}
	kern_describe(buf, 10); /* truncates, stays terminated */
	ck_assert_uint_le(strlen(buf), 9);
}
END_TEST

START_TEST(init_picks_a_level_this_cpu_runs)
{
	enum cpu_level level = kern_init();

	ck_assert_int_eq(kern_init(), level);
	ck_assert_int_eq(kern_level(), level);
	ck_assert(kern_level_runs(level));
	ck_assert_ptr_nonnull(kern_ops_for(level));
}
END_TEST

Suite *suite_kernels_driver(void)
{
	Suite *s = suite_create("kernels_driver");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, threaded_matmul_equals_single_thread_bit_for_bit);
	tcase_add_test(tc, fused_matmul_equals_separate_matmuls_bit_for_bit);
	tcase_add_test(tc, matmul_with_row_work_equals_work_then_matmul);
	tcase_add_test(tc, region_split_equals_single_thread_bit_for_bit);
	tcase_add_test(tc, init_picks_a_level_this_cpu_runs);
	tcase_add_test(tc, resolve_never_picks_an_unavailable_level);
	tcase_add_test(tc, describe_names_runnable_levels);
	suite_add_tcase(s, tc);
	return s;
}
