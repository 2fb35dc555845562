/*
 * test_kquant_batch.c - K-quant models give each sequence of a batched
 * step the logits of a step of its own, bit for bit (issue 17's rule for
 * the small-batch path; the K-quant kernels quantize every token per
 * 256-value super-block, whatever the batch: kernels.c, kquants_*).
 *
 * Models: llama.cpp's Q4_K_M (Q4_K + Q6_K), Q5_K_M (Q5_K + Q6_K), Q6_K,
 * Q2_K (Q2_K + Q3_K/Q4_K) and Q3_K_M (Q3_K + Q4_K/Q5_K)
 * of the golden llama-256 model (../shared/golden/quants/llama-256: every
 * row a multiple of 256, so every tensor keeps its K-quant type).
 * Batches of k = 2, 3, 5, 8 (the streaming tiles), 9 and 16 (the prefill
 * panels), each sequence at its own position (ragged prompt lengths), on
 * two threads (one under EMBER_TEST_NO_THREADS). Runs at the kernel level this process chose;
 * tests/integration/test_kquant_batch.sh runs it again under
 * EMBER_CPU=avx2 and avx512. Also: packed weight rows (compute_prepare_model)
 * give the file layout's logits bit for bit.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute.h"
#include "cpu.h"
#include "dtype.h"
#include "ember.h"
#include "forward.h"
#include "kernels.h"
#include "kv_cache.h"
#include "model.h"

#define KB_DIR "../shared/golden/quants/llama-256/"
#define KB_K 16

START_TEST(batched_kquant_step_equals_single_steps_bit_for_bit)
{
	static const char *const files[] = {"Q4_K_M", "Q5_K_M", "Q6_K", "Q2_K", "Q3_K_M"};
	static const uint32_t ks[] = {2, 3, 5, 8, 9, 16};
	char path[256], err[EMBER_ERR_MAX] = "";
	/* two threads, except where a guest cannot start them (qemu-user) */
	struct forward_opts o = {.max_batch = KB_K,
				 .n_threads = getenv("EMBER_TEST_NO_THREADS") ? 1 : 2};
	struct forward_pass *p = NULL;
	struct model m;
	struct kv_cache kv[KB_K], alone[KB_K];
	int32_t ids[KB_K][16];
	int kq = 0;

	snprintf(path, sizeof(path), KB_DIR "%s.gguf", files[_i]);
	ck_assert_msg(model_open(&m, path, err) == 0, "model_open %s: %s", path, err);
	for (size_t l = 0; l < m.hp.n_layer; l++)
		for (size_t w = 0; w < ARCH_T_COUNT; w++) {
			const struct model_weight *t = &m.layers[l].w[w];
			kq |= t->data != NULL && (t->type == DTYPE_Q4_K || t->type == DTYPE_Q5_K ||
						  t->type == DTYPE_Q6_K || t->type == DTYPE_Q2_K ||
						  t->type == DTYPE_Q3_K);
		}
	ck_assert_msg(kq, "%s holds no Q2_K..Q6_K tensor", path);
	const size_t nv = m.hp.n_vocab;
	float *batch = malloc(sizeof(float) * KB_K * nv), *one = malloc(sizeof(float) * nv);

	ck_assert_msg(forward_pass_new(&p, &m, &o, err) == 0, "pass: %s", err);
	for (int s = 0; s < KB_K; s++) {
		for (int j = 0; j < 16; j++)
			ids[s][j] = (int32_t)((37 * s + 11 * j + 5) % nv);
		/* different prompt lengths: the caches sit at different positions */
		struct forward_seq q = {kv + s, ids[s], (uint32_t)(2 + s % 7), FORWARD_LOGITS_NONE, false};
		ck_assert_int_eq(kv_cache_init(kv + s, &m.hp, 32, DTYPE_F16, err), 0);
		ck_assert_int_eq(kv_cache_init(alone + s, &m.hp, 32, DTYPE_F16, err), 0);
		ck_assert_msg(forward_pass_run(p, &q, 1, NULL, err) == 0, "prefill: %s", err);
	}
	for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
		const uint32_t k = ks[ki];
		struct forward_seq seqs[KB_K];

		for (uint32_t s = 0; s < k; s++) {
			ck_assert_int_eq(kv_cache_copy(alone + s, kv + s), 0);
			seqs[s] = (struct forward_seq){kv + s, ids[s] + 10 + ki, 1, FORWARD_LOGITS_LAST, false};
		}
		ck_assert_msg(forward_pass_run(p, seqs, k, batch, err) == 0, "batch: %s", err);
		for (uint32_t s = 0; s < k; s++) {
			seqs[s].kv = alone + s;
			ck_assert_msg(forward_pass_run(p, seqs + s, 1, one, err) == 0, "one: %s", err);
			for (size_t v = 0; v < nv; v++)
				ck_assert_msg(memcmp(one + v, batch + (size_t)s * nv + v, sizeof(float)) == 0,
					      "%s at %s, k=%u: sequence %u logit %zu: %.9g in the batch, "
					      "%.9g alone",
					      files[_i], cpu_level_name(kern_level()), k, s, v,
					      batch[(size_t)s * nv + v], one[v]);
		}
	}
	printf("kquant_batch: %s at the %s level: every sequence of batches of 2..16 equals "
	       "its own step bit for bit\n",
	       files[_i], cpu_level_name(kern_level()));
	for (int s = 0; s < KB_K; s++) {
		kv_cache_free(kv + s);
		kv_cache_free(alone + s);
	}
	forward_pass_free(p);
	model_free(&m);
	free(batch);
	free(one);
}
END_TEST

/* The logits of one fixed run: a 12-token prompt (all rows: the prefill
 * panels), a step of 3 sequences (the streaming tiles), then one token
 * (the GEMV), into out[(12 + 3 + 1) * nv]. */
static void kb_run(const struct model *m, float *out)
{
	struct forward_opts o = {.max_batch = KB_K,
				 .n_threads = getenv("EMBER_TEST_NO_THREADS") ? 1 : 2};
	const size_t nv = m->hp.n_vocab;
	struct forward_pass *p = NULL;
	struct kv_cache kv[3];
	char err[EMBER_ERR_MAX] = "";
	int32_t ids[16];

	for (int j = 0; j < 16; j++)
		ids[j] = (int32_t)((29 * j + 7) % nv);
	ck_assert_msg(forward_pass_new(&p, m, &o, err) == 0, "pass: %s", err);
	for (int s = 0; s < 3; s++)
		ck_assert_int_eq(kv_cache_init(kv + s, &m->hp, 32, DTYPE_F16, err), 0);
	struct forward_seq q = {kv, ids, 12, FORWARD_LOGITS_ALL, false};
	ck_assert_msg(forward_pass_run(p, &q, 1, out, err) == 0, "prefill: %s", err);
	struct forward_seq three[3];
	for (int s = 0; s < 3; s++)
		three[s] = (struct forward_seq){kv + s, ids + 12 + s, 1, FORWARD_LOGITS_LAST, false};
	ck_assert_msg(forward_pass_run(p, three, 3, out + 12 * nv, err) == 0, "step: %s", err);
	q = (struct forward_seq){kv, ids + 15, 1, FORWARD_LOGITS_LAST, false};
	ck_assert_msg(forward_pass_run(p, &q, 1, out + 15 * nv, err) == 0, "decode: %s", err);
	for (int s = 0; s < 3; s++)
		kv_cache_free(kv + s);
	forward_pass_free(p);
}

/* Packed weight rows (compute_prepare_model(), kernels.h KERN_PACKED)
 * give the file layout's logits bit for bit, prefill, batch and decode.
 * The golden files are under gguf_map's 8 MiB minimum for its private
 * copy, which the pack needs: EMBER_HUGEPAGES=always makes it (gguf_map.h).
 * At a level without packed K-quants (EMBER_CPU=avx2) nothing is packed
 * and the run says so. */
START_TEST(packed_rows_give_the_file_layout_logits)
{
	static const char *const files[] = {"Q4_K_M", "Q5_K_M", "Q6_K", "Q4_0", "Q8_0"};
	char path[256], err[EMBER_ERR_MAX] = "";
	const char *old = getenv("EMBER_HUGEPAGES");
	char *keep = old ? strdup(old) : NULL;
	struct model m;
	int packed = 0;

	snprintf(path, sizeof(path), KB_DIR "%s.gguf", files[_i]);
	setenv("EMBER_HUGEPAGES", "always", 1);
	ck_assert_msg(model_open(&m, path, err) == 0, "model_open %s: %s", path, err);
	if (keep)
		setenv("EMBER_HUGEPAGES", keep, 1);
	else
		unsetenv("EMBER_HUGEPAGES");
	free(keep);
	ck_assert_msg(m.gguf->copy, "%s: no private copy of the weights", path);
	const size_t nv = m.hp.n_vocab, n = 16 * nv;
	float *file = malloc(sizeof(float) * n), *pk = malloc(sizeof(float) * n);

	kb_run(&m, file);
	/* the layers' matrices the level packs (the avx2 level: Q4_K and
	 * Q6_K, not Q5_K; avx512: all three), none or some */
	int packable = 0;
	for (size_t l = 0; l < m.hp.n_layer; l++)
		for (size_t w = 0; w < ARCH_T_COUNT; w++) {
			const struct model_weight *t = &m.layers[l].w[w];
			packable += t->data != NULL && t->n_out > 1 &&
				    kern_pack_type(t->type, t->n_out, t->n_in) != t->type;
		}
	/* the first K-quant matrix of layer 0 the level packs: its file bytes,
	 * to check the packed form unpacks to them (kern_unpack_rows()) */
	const struct model_weight *kw = NULL;
	for (size_t w = 0; w < ARCH_T_COUNT && kw == NULL; w++) {
		const struct model_weight *t = &m.layers[0].w[w];
		if (t->data != NULL && dtype_block(t->type) == 256 &&
		    kern_pack_type(t->type, t->n_out, t->n_in) != t->type)
			kw = t;
	}
	const size_t kbytes = kw ? (size_t)dtype_row_size(kw->type, kw->n_in) * kw->n_out : 0;
	uint8_t *kfile = kw ? malloc(kbytes) : NULL, *kpk = kw ? malloc(kbytes) : NULL;
	if (kw)
		memcpy(kfile, kw->data, kbytes);
	ck_assert_int_eq(compute_prepare_model(&m, err), 0);
	if (kw) { /* packed differs from the file, and unpacks to it */
		ck_assert(kw->packed != 0);
		memcpy(kpk, kw->data, kbytes);
		ck_assert(memcmp(kpk, kfile, kbytes) != 0);
		ck_assert_int_eq(kern_unpack_rows(kw->type, kpk, kw->n_out, kw->n_in, err), 0);
		ck_assert_msg(memcmp(kpk, kfile, kbytes) == 0, "%s: %s unpacked differs from the file",
			      files[_i], dtype_name(kw->type));
	}
	free(kfile);
	free(kpk);
	for (size_t l = 0; l < m.hp.n_layer; l++)
		for (size_t w = 0; w < ARCH_T_COUNT; w++)
			packed += m.layers[l].w[w].packed != 0;
	ck_assert_uint_eq(m.w[ARCH_T_TOKEN_EMBD].packed, 0);
	if (packable == 0) {
		ck_assert_int_eq(packed, 0);
		printf("kquant_batch: %s: the %s level packs none of its matrices\n", files[_i],
		       cpu_level_name(kern_level()));
	} else {
		ck_assert_int_gt(packed, 0);
	}
	kb_run(&m, pk);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(memcmp(file + i, pk + i, sizeof(float)) == 0,
			      "%s at %s: logit %zu of row %zu: %.9g in file layout, %.9g packed",
			      files[_i], cpu_level_name(kern_level()), i % nv, i / nv, file[i], pk[i]);
	if (packed)
		printf("kquant_batch: %s at the %s level: %d packed matrices, logits bit for bit\n",
		       files[_i], cpu_level_name(kern_level()), packed);
	model_free(&m);
	free(file);
	free(pk);
}
END_TEST

Suite *suite_kquant_batch(void)
{
	Suite *s = suite_create("kquant_batch");
	TCase *tc = tcase_create("steps");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, batched_kquant_step_equals_single_steps_bit_for_bit, 0, 5);
	tcase_add_loop_test(tc, packed_rows_give_the_file_layout_logits, 0, 5);
	suite_add_tcase(s, tc);
	return s;
}
