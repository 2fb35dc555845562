/*
 * test_vulkan_pass.c - the Vulkan device through compute.h (the shaders
 * one by one: test_vulkan.c), on whatever Vulkan device is present
 * (lavapipe in `make test`): a batched step equal to single steps, hidden
 * states (embeddings) as on the CPU, sliding-window rings equal to full
 * caches, weights imported from the file's map equal to copied ones, a
 * copied prefix continuing like the original, a weight type without a
 * shader refused by name. Without a Vulkan device each test says why it is
 * skipped and passes.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute.h"
#include "dtype.h"
#include "ember.h"
#include "model.h"
#include "testutil.h"
#include "vk.h"

#define LLAMA TEST_GOLDEN_DIR "llama/model-f32.gguf"

static int open_vulkan(struct model *m, const char *path)
{
	char err[EMBER_ERR_MAX] = "";

	if (test_vulkan_skip())
		return -1;
	ck_assert_msg(compute_device_select("vulkan", err) == 0, "%s", err);
	ck_assert_int_eq(compute_device_vulkan(), 1);
	ck_assert_msg(model_open(m, path, err) == 0, "%s: %s", path, err);
	return 0;
}

/* Three sequences in one step (a prompt, a decode, another prompt long
 * enough for the prefill GEMM) give the logits each gives alone, bit for
 * bit: a token's arithmetic does not depend on its neighbours (matmul.comp
 * and gemm.comp tile tokens, the GEMM is chosen per sequence, attention
 * runs per sequence). */
START_TEST(batched_step_equals_single_steps)
{
	struct test_golden g;
	struct model m;
	struct compute_pass *p;
	struct compute_opts o = {.max_batch = 32};
	struct compute_kv *kv[3], *solo;
	const uint32_t len[3] = {7, 1, 20}, V = 1000;
	float *batched = malloc((size_t)(7 + 1 + 1) * V * sizeof(float)), *one = malloc(7 * V * 4);
	char err[EMBER_ERR_MAX] = "";
	uint32_t s, off;

	if (open_vulkan(&m, LLAMA) < 0)
		goto out;
	test_golden_load(&g, "llama", V);
	ck_assert_msg(compute_pass_new(&p, &m, &o, err) == 0, "%s", err);
	for (s = 0; s < 3; s++)
		ck_assert_int_eq(compute_kv_new(&kv[s], &m, 64, DTYPE_F16, 0, err), 0);
	/* Sequence 1 decodes after a 5-token prefix. */
	{
		struct compute_seq pre = {kv[1], g.input, 5, COMPUTE_LOGITS_NONE, false};

		ck_assert_int_eq(compute_pass_run(p, &pre, 1, NULL, err), 0);
	}
	{
		struct compute_seq seqs[3] = {{kv[0], g.input, len[0], COMPUTE_LOGITS_ALL, false},
					      {kv[1], g.input + 5, len[1], COMPUTE_LOGITS_LAST, false},
					      {kv[2], g.input + 3, len[2], COMPUTE_LOGITS_LAST, false}};

		ck_assert_msg(compute_pass_run(p, seqs, 3, batched, err) == 0, "%s", err);
	}
	for (s = 0, off = 0; s < 3; s++) {
		const int32_t *tok = s == 0 ? g.input : s == 1 ? g.input : g.input + 3;
		const uint32_t pre = s == 1 ? 5 : 0, rows = s == 0 ? len[0] : 1;
		struct compute_seq a = {NULL, tok, pre, COMPUTE_LOGITS_NONE, false};
		struct compute_seq b = {NULL, tok + pre, len[s], s == 0 ? COMPUTE_LOGITS_ALL
									 : COMPUTE_LOGITS_LAST, false};

		ck_assert_int_eq(compute_kv_new(&solo, &m, 64, DTYPE_F16, 0, err), 0);
		a.kv = b.kv = solo;
		if (pre)
			ck_assert_int_eq(compute_pass_run(p, &a, 1, NULL, err), 0);
		ck_assert_int_eq(compute_pass_run(p, &b, 1, one, err), 0);
		ck_assert_msg(memcmp(one, batched + (size_t)off * V, (size_t)rows * V * 4) == 0,
			      "sequence %u: batched logits differ from its own step", s);
		ck_assert_uint_eq(compute_kv_n_pos(solo), compute_kv_n_pos(kv[s]));
		compute_kv_free(solo);
		off += rows;
	}
	printf("vulkan batched step: 3 sequences equal their single steps bit for bit\n");
	for (s = 0; s < 3; s++)
		compute_kv_free(kv[s]);
	compute_pass_free(p);
	test_golden_free(&g);
	model_free(&m);
out:
	free(batched), free(one);
}
END_TEST

/* Embeddings: the final hidden states (COMPUTE_HIDDEN_ALL) of two
 * sequences in one step, on the device and on the CPU, within 1e-5 x max;
 * a step mixing them with logits is refused. */
START_TEST(hidden_states_match_the_cpu)
{
	struct test_golden g;
	struct model m;
	struct compute_pass *p[2];
	struct compute_opts o = {.max_batch = 32};
	struct compute_kv *kv[2][2];
	const uint32_t D = 128, n0 = 9, n1 = 5;
	float *h[2];
	double *want = malloc((size_t)(n0 + n1) * D * sizeof(double));
	char err[EMBER_ERR_MAX] = "";
	const char *dev[2] = {"vulkan", "cpu"};
	uint32_t d, s, i;

	h[0] = calloc((size_t)(n0 + n1) * D, sizeof(float));
	h[1] = calloc((size_t)(n0 + n1) * D, sizeof(float));
	if (open_vulkan(&m, LLAMA) < 0)
		goto out;
	test_golden_load(&g, "llama", 1000);
	ck_assert_uint_eq(m.hp.n_embd, D);
	for (d = 0; d < 2; d++) {
		struct compute_seq seqs[2] = {{NULL, g.input, n0, COMPUTE_HIDDEN_ALL, false},
					      {NULL, g.input + 11, n1, COMPUTE_HIDDEN_ALL, false}};

		ck_assert_msg(compute_device_select(dev[d], err) == 0, "%s", err);
		ck_assert_msg(compute_pass_new(&p[d], &m, &o, err) == 0, "%s", err);
		for (s = 0; s < 2; s++) {
			ck_assert_int_eq(compute_kv_new(&kv[d][s], &m, 64, DTYPE_F32, 0, err), 0);
			seqs[s].kv = kv[d][s];
		}
		ck_assert_msg(compute_pass_run(p[d], seqs, 2, h[d], err) == 0, "%s: %s", dev[d],
			      err);
	}
	for (i = 0; i < (n0 + n1) * D; i++)
		want[i] = h[1][i];
	test_vulkan_close(h[0], want, (size_t)(n0 + n1) * D, 1e-5, "hidden states vs the CPU");
	{
		struct compute_seq mixed[2] = {{kv[0][0], g.input, 1, COMPUTE_HIDDEN_ALL, false},
					       {kv[0][1], g.input, 1, COMPUTE_LOGITS_LAST, false}};

		ck_assert_int_eq(compute_pass_run(p[0], mixed, 2, h[0], err), EMBER_EINVAL);
		ck_assert_uint_eq(compute_kv_n_pos(kv[0][0]), n0);
	}
	ck_assert_msg(compute_device_select("vulkan", err) == 0, "%s", err);
	for (d = 0; d < 2; d++) {
		for (s = 0; s < 2; s++)
			compute_kv_free(kv[d][s]);
		compute_pass_free(p[d]);
	}
	test_golden_free(&g);
	model_free(&m);
out:
	free(h[0]), free(h[1]), free(want);
}
END_TEST

/* Weights read in place from the file's map (VK_EXT_external_memory_host,
 * where the device has it: lavapipe does), weights copied into device
 * memory, and weights staged into device-local memory through a small
 * staging buffer (as on a discrete GPU; 65532 bytes, so tensors are split
 * across many submissions at unaligned offsets) give the same logits, bit
 * for bit. */
START_TEST(imported_copied_and_staged_weights_give_identical_logits)
{
	struct test_golden g;
	struct model m;
	struct compute_opts o = {.max_batch = 32};
	const uint32_t V = 1000, n = 24;
	float *l[3] = {malloc((size_t)n * V * 4), malloc((size_t)n * V * 4),
		       malloc((size_t)n * V * 4)};
	char err[EMBER_ERR_MAX] = "", list[4096];
	int mode, has_ext;

	if (open_vulkan(&m, LLAMA) < 0)
		goto out;
	has_ext = strstr(vk_describe(list, sizeof(list)), " VK_EXT_external_memory_host") != NULL;
	test_golden_load(&g, "llama", V);
	for (mode = 0; mode < 3; mode++) {
		struct compute_pass *p;
		struct compute_kv *kv;
		struct compute_seq sq = {NULL, g.input, n, COMPUTE_LOGITS_ALL, false};

		vk_test_import(mode == 0);
		vk_test_staging(mode == 2 ? 65532 : 0);
		ck_assert_msg(compute_pass_new(&p, &m, &o, err) == 0, "%s", err);
		ck_assert_int_eq(vk_test_n_imported(), mode == 0 && has_ext);
		ck_assert_int_eq(vk_test_n_staged(), mode == 2);
		ck_assert_int_eq(compute_kv_new(&kv, &m, 64, DTYPE_F32, 0, err), 0);
		sq.kv = kv;
		ck_assert_msg(compute_pass_run(p, &sq, 1, l[mode], err) == 0, "%s", err);
		compute_kv_free(kv);
		compute_pass_free(p);
	}
	vk_test_import(1);
	vk_test_staging(0);
	ck_assert_msg(memcmp(l[0], l[1], (size_t)n * V * 4) == 0, "imported and copied weights "
		      "give different logits");
	ck_assert_msg(memcmp(l[2], l[1], (size_t)n * V * 4) == 0, "staged and copied weights "
		      "give different logits");
	printf("vulkan weights: %s, copied and staged (65532-byte staging buffer) give the same "
	       "logits bit for bit\n",
	       has_ext ? "imported from the file's map" : "(no host import on this device)");
	test_golden_free(&g);
	model_free(&m);
out:
	free(l[0]), free(l[1]), free(l[2]);
}
END_TEST

/* A 24-token prompt through the prefill GEMM (gemm.comp, the default from
 * 16 tokens) and through the per-token matmul (EMBER_VK_GEMM=0): logits
 * of every position within 1e-5 x max of each other (the sums run in
 * another order); EMBER_VK_GEMM that is not a count is refused. The
 * cooperative-matrix GEMM is asked for (EMBER_VK_COOPMAT=1): on a device
 * without it (lavapipe) that changes nothing; on one with it the logits
 * are held to 2e-2 x max (f16 operands). */
START_TEST(prefill_gemm_matches_the_per_token_matmul)
{
	struct test_golden g;
	struct model m;
	struct compute_opts o = {.max_batch = 32};
	const uint32_t V = 1000, n = 24;
	float *l[2] = {malloc((size_t)n * V * 4), malloc((size_t)n * V * 4)};
	double *want = malloc((size_t)n * V * sizeof(double));
	char err[EMBER_ERR_MAX] = "";
	struct compute_pass *p;
	char list[4096];
	size_t i;
	int mode, coop;

	/* read when the device opens (this test's process opens it here) */
	setenv("EMBER_VK_COOPMAT", "1", 1);
	if (open_vulkan(&m, LLAMA) < 0)
		goto out;
	unsetenv("EMBER_VK_COOPMAT");
	coop = strstr(vk_describe(list, sizeof(list)), "VK_NV_cooperative_matrix:") != NULL;
	test_golden_load(&g, "llama", V);
	for (mode = 0; mode < 2; mode++) {
		struct compute_kv *kv;
		struct compute_seq sq = {NULL, g.input, n, COMPUTE_LOGITS_ALL, false};

		if (mode == 0)
			unsetenv("EMBER_VK_GEMM");
		else
			setenv("EMBER_VK_GEMM", "0", 1);
		ck_assert_msg(compute_pass_new(&p, &m, &o, err) == 0, "%s", err);
		ck_assert_int_eq(compute_kv_new(&kv, &m, 64, DTYPE_F32, 0, err), 0);
		sq.kv = kv;
		ck_assert_msg(compute_pass_run(p, &sq, 1, l[mode], err) == 0, "%s", err);
		compute_kv_free(kv);
		compute_pass_free(p);
	}
	setenv("EMBER_VK_GEMM", "16x", 1);
	ck_assert_int_ne(compute_pass_new(&p, &m, &o, err), 0);
	ck_assert_msg(strstr(err, "EMBER_VK_GEMM=16x") != NULL, "%s", err);
	unsetenv("EMBER_VK_GEMM");
	for (i = 0; i < (size_t)n * V; i++)
		want[i] = l[1][i];
	test_vulkan_close(l[0], want, (size_t)n * V, coop ? 2e-2 : 1e-5,
		     coop ? "prefill coopmat vs per-token matmul" : "prefill gemm vs per-token matmul");
	test_golden_free(&g);
	model_free(&m);
out:
	unsetenv("EMBER_VK_COOPMAT");
	free(l[0]), free(l[1]), free(want);
}
END_TEST

/* Sliding-window layers in a ring (gemma2: window 8; steps of 3, so 10
 * rows) give the logits of a full cache bit for bit over 24 positions,
 * wrapping twice; a ring copied keeps going the same; a rewind past the
 * ring's slack is refused as on the CPU. */
START_TEST(ring_caches_equal_full_caches)
{
	struct test_golden g;
	struct model m;
	struct compute_pass *p;
	struct compute_opts o = {.max_batch = 32};
	struct compute_kv *full, *ring, *copy;
	const uint32_t step = 3;
	float *a = NULL, *b = NULL, *c = NULL;
	char err[EMBER_ERR_MAX] = "";
	uint32_t t, V;

	if (open_vulkan(&m, TEST_GOLDEN_DIR "gemma2/model-f32.gguf") < 0)
		goto out;
	ck_assert_uint_eq(m.hp.n_swa, 8);
	V = m.hp.n_vocab;
	a = malloc(step * V * 4), b = malloc(step * V * 4), c = malloc(step * V * 4);
	test_golden_load(&g, "gemma2", V);
	ck_assert_msg(compute_pass_new(&p, &m, &o, err) == 0, "%s", err);
	ck_assert_int_eq(compute_kv_new(&full, &m, 64, DTYPE_F16, 0, err), 0);
	ck_assert_int_eq(compute_kv_new(&ring, &m, 64, DTYPE_F16, step, err), 0);
	ck_assert_int_eq(compute_kv_new(&copy, &m, 64, DTYPE_F16, step, err), 0);
	for (t = 0; t < 24; t += step) {
		struct compute_seq sa = {full, g.input + t, step, COMPUTE_LOGITS_ALL, false};
		struct compute_seq sb = {ring, g.input + t, step, COMPUTE_LOGITS_ALL, false};

		ck_assert_msg(compute_pass_run(p, &sa, 1, a, err) == 0, "%s", err);
		ck_assert_msg(compute_pass_run(p, &sb, 1, b, err) == 0, "%s", err);
		ck_assert_msg(memcmp(a, b, step * V * 4) == 0, "ring differs at positions %u..", t);
		if (t == 12) { /* a copy of the ring at 15 continues as the ring */
			ck_assert_int_eq(compute_kv_copy_prefix(copy, ring, 15), 0);
		} else if (t > 12) {
			struct compute_seq sc = {copy, g.input + t, step, COMPUTE_LOGITS_ALL, false};

			ck_assert_msg(compute_pass_run(p, &sc, 1, c, err) == 0, "%s", err);
			ck_assert_msg(memcmp(a, c, step * V * 4) == 0, "copied ring differs at %u", t);
		}
	}
	/* Slack is 2 rows: a rewind to 22 still holds its window, to 12 not. */
	ck_assert(compute_kv_holds(ring, 22));
	ck_assert(!compute_kv_holds(ring, 12));
	compute_kv_truncate(ring, 12);
	{
		struct compute_seq sb = {ring, g.input + 12, 1, COMPUTE_LOGITS_LAST, false};

		ck_assert_int_eq(compute_pass_run(p, &sb, 1, b, err), EMBER_EINVAL);
		ck_assert_msg(strstr(err, "rewound past its ring") != NULL, "%s", err);
	}
	printf("vulkan ring caches: 24 positions through a 10-row ring equal a full cache bit "
	       "for bit\n");
	compute_kv_free(full), compute_kv_free(ring), compute_kv_free(copy);
	compute_pass_free(p);
	test_golden_free(&g);
	model_free(&m);
out:
	free(a), free(b), free(c);
}
END_TEST

/* A prefix copied into another cache continues exactly as the original;
 * a truncated cache recomputes the same logits. */
START_TEST(copied_prefix_and_rewind_continue_the_same)
{
	struct test_golden g;
	struct model m;
	struct compute_pass *p;
	struct compute_opts o = {.max_batch = 24};
	struct compute_kv *a, *b;
	float *la = malloc(1000 * 4), *lb = malloc(1000 * 4);
	char err[EMBER_ERR_MAX] = "";

	if (open_vulkan(&m, LLAMA) < 0)
		goto out;
	test_golden_load(&g, "llama", 1000);
	ck_assert_int_eq(compute_pass_new(&p, &m, &o, err), 0);
	ck_assert_int_eq(compute_kv_new(&a, &m, 32, DTYPE_F32, 0, err), 0);
	ck_assert_int_eq(compute_kv_new(&b, &m, 32, DTYPE_F32, 0, err), 0);
	{
		struct compute_seq s1 = {a, g.input, 10, COMPUTE_LOGITS_NONE, false};
		struct compute_seq s2 = {a, g.input + 10, 1, COMPUTE_LOGITS_LAST, false};
		struct compute_seq s3 = {b, g.input + 10, 1, COMPUTE_LOGITS_LAST, false};

		ck_assert_int_eq(compute_pass_run(p, &s1, 1, NULL, err), 0);
		ck_assert_int_eq(compute_kv_copy_prefix(b, a, 10), 0);
		ck_assert_int_eq(compute_pass_run(p, &s2, 1, la, err), 0);
		ck_assert_int_eq(compute_pass_run(p, &s3, 1, lb, err), 0);
		ck_assert_msg(memcmp(la, lb, 4000) == 0, "copied prefix continues differently");
		compute_kv_truncate(a, 10);
		ck_assert_uint_eq(compute_kv_n_pos(a), 10);
		ck_assert_int_eq(compute_pass_run(p, &s2, 1, lb, err), 0);
		ck_assert_msg(memcmp(la, lb, 4000) == 0, "rewound cache recomputes differently");
	}
	compute_kv_free(a);
	compute_kv_free(b);
	compute_pass_free(p);
	test_golden_free(&g);
	model_free(&m);
out:
	free(la), free(lb);
}
END_TEST

/* A weight type without a shader (Q8_K here, set on one tensor of the
 * loaded model) is refused by tensor and type before anything runs. */
START_TEST(weight_type_without_shader_is_refused_by_name)
{
	struct model m;
	struct compute_pass *p = NULL;
	struct compute_opts o = {.max_batch = 8};
	char err[EMBER_ERR_MAX] = "";

	if (open_vulkan(&m, LLAMA) < 0)
		return;
	m.layers[1].w[ARCH_T_FFN_DOWN].type = DTYPE_Q8_K;
	ck_assert_int_eq(compute_pass_new(&p, &m, &o, err), EMBER_EUNSUPPORTED);
	ck_assert_ptr_null(p);
	ck_assert_msg(strstr(err, "tensor blk.1.ffn_down.weight: no shader for type q8_k") != NULL,
		      "%s", err);
	printf("vulkan refuses: %s\n", err);
	model_free(&m);
}
END_TEST

Suite *suite_vulkan_pass(void)
{
	Suite *s = suite_create("vulkan_pass");
	TCase *te = tcase_create("engine");

	tcase_set_timeout(te, 120);
	tcase_add_test(te, batched_step_equals_single_steps);
	tcase_add_test(te, hidden_states_match_the_cpu);
	tcase_add_test(te, ring_caches_equal_full_caches);
	tcase_add_test(te, imported_copied_and_staged_weights_give_identical_logits);
	tcase_add_test(te, prefill_gemm_matches_the_per_token_matmul);
	tcase_add_test(te, copied_prefix_and_rewind_continue_the_same);
	tcase_add_test(te, weight_type_without_shader_is_refused_by_name);
	suite_add_tcase(s, te);
	return s;
}
