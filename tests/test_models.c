/*
 * test_models.c - today's small models beyond the golden logits (those are
 * in test_golden.c and tests/integration/test_golden_archs.sh):
 *   - sliding-window layers in a ring cache give the same results as a
 *     full cache masked the same way, in a fraction of its memory, and
 *     refuse a rewind past what the ring holds;
 *   - decode and chunked prefill equal one-shot prefill on Gemma 2 and 3
 *     past the window and across key blocks;
 *   - what a GGUF asks for that Ember does not implement is refused at
 *     load, by name (rope scaling types, experts, tensors such as
 *     rope_freqs in an architecture without them), and what it does
 *     implement is read (linear scaling, attention.scale).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtype.h"
#include "ember.h"
#include "forward.h"
#include "gguf.h"
#include "compute.h"
#include "kv_cache.h"
#include "kv_pool.h"
#include "model.h"
#include "testutil.h"

#define GOLDEN "../shared/golden/"
#define N_TOK 150

static void open_golden(struct model *m, const char *arch)
{
	char path[256], err[EMBER_ERR_MAX] = "";

	snprintf(path, sizeof(path), GOLDEN "%s/model-f32.gguf", arch);
	ck_assert_msg(model_open(m, path, err) == 0, "%s: %s", path, err);
}

/* N_TOK token ids from a fixed LCG, inside the vocabulary. */
static void some_tokens(int32_t *ids, uint32_t n_vocab)
{
	uint64_t x = 12345;
	int i;

	for (i = 0; i < N_TOK; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		ids[i] = (int32_t)((x >> 33) % n_vocab);
	}
}

/* Runs ids through `kv` in steps of `step` tokens, every position's logits. */
static void run_steps(struct forward_pass *f, struct kv_cache *kv, const int32_t *ids,
		      uint32_t step, float *logits, uint32_t n_vocab)
{
	char err[EMBER_ERR_MAX] = "";
	uint32_t done;

	for (done = 0; done < N_TOK; done += step) {
		uint32_t n = N_TOK - done < step ? N_TOK - done : step;
		struct forward_seq sq = {kv, ids + done, n, FORWARD_LOGITS_ALL, false};

		ck_assert_msg(forward_pass_run(f, &sq, 1, logits + (size_t)done * n_vocab, err) == 0,
			      "%s", err);
	}
}

static double max_rel(const float *a, const float *b, size_t n)
{
	double d = 0, ref = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		d = fmax(d, fabs((double)a[i] - b[i]));
		ref = fmax(ref, fabs(b[i]));
	}
	return d / ref;
}

static const char *const swa_archs[] = {"gemma2", "gemma3"};

/* The ring (window 8 plus a step of 16: 23 rows) against a full cache of
 * 160 positions, both through the same masked attention: identical. */
START_TEST(ring_cache_equals_full_cache_masked_the_same_way)
{
	const uint32_t step = 16;
	struct forward_opts o = {.max_batch = step};
	char err[EMBER_ERR_MAX] = "";
	struct forward_pass *f;
	struct kv_cache ring, full;
	int32_t ids[N_TOK];
	float *a, *b;
	struct model m;
	size_t n;
	uint32_t il;

	open_golden(&m, swa_archs[_i]);
	n = (size_t)N_TOK * m.hp.n_vocab;
	some_tokens(ids, m.hp.n_vocab);
	a = malloc(n * sizeof(float));
	b = malloc(n * sizeof(float));
	ck_assert_int_eq(forward_pass_new(&f, &m, &o, err), 0);
	ck_assert_int_eq(kv_cache_init_ring(&ring, &m.hp, N_TOK + 10, DTYPE_F32, m.arch, step, err), 0);
	ck_assert_int_eq(kv_cache_init(&full, &m.hp, N_TOK + 10, DTYPE_F32, err), 0);
	ck_assert_uint_eq(ring.ring_rows, m.hp.n_swa - 1 + step);
	for (il = 0; il < m.hp.n_layer; il++)
		ck_assert_int_eq(kv_cache_is_ring(&ring, il), arch_layer_is_swa(m.arch, il));
	run_steps(f, &ring, ids, step, a, m.hp.n_vocab);
	run_steps(f, &full, ids, step, b, m.hp.n_vocab);
	ck_assert_msg(memcmp(a, b, n * sizeof(float)) == 0, "%s: ring differs from full cache by %.3g",
		      swa_archs[_i], max_rel(a, b, n));
	printf("models: %s ring cache == full cache over %d tokens; %zu of %zu bytes (%.0f%%)\n",
	       swa_archs[_i], N_TOK, kv_cache_bytes(&ring), kv_cache_bytes(&full),
	       100.0 * (double)kv_cache_bytes(&ring) / (double)kv_cache_bytes(&full));
	ck_assert_uint_lt(kv_cache_bytes(&ring), kv_cache_bytes(&full));

	/* A step longer than the ring's is refused, not run wrong. */
	kv_cache_truncate(&ring, 0);
	{
		struct forward_seq sq = {&ring, ids, step + 1, FORWARD_LOGITS_NONE, false};

		ck_assert_int_eq(forward_pass_run(f, &sq, 1, NULL, err), EMBER_EINVAL);
		ck_assert_ptr_nonnull(strstr(err, "sliding-window cache"));
	}
	kv_cache_free(&ring);
	kv_cache_free(&full);
	forward_pass_free(f);
	free(a);
	free(b);
	model_free(&m);
}
END_TEST

/* Token by token and in chunks of 7 against one shot, past the window and
 * across key blocks (150 positions): the same within float rounding. */
START_TEST(sliding_window_decode_and_chunks_equal_one_shot)
{
	struct forward_opts one = {.n_ctx = N_TOK, .max_batch = N_TOK};
	struct forward_opts seven = {.n_ctx = N_TOK, .max_batch = 7};
	char err[EMBER_ERR_MAX] = "";
	struct forward_ctx *c;
	int32_t ids[N_TOK];
	float *shot, *other;
	struct model m;
	size_t n;
	int t;

	open_golden(&m, swa_archs[_i]);
	n = (size_t)N_TOK * m.hp.n_vocab;
	some_tokens(ids, m.hp.n_vocab);
	shot = malloc(n * sizeof(float));
	other = malloc(n * sizeof(float));
	ck_assert_int_eq(forward_new(&c, &m, &one, err), 0);
	ck_assert_int_eq(forward_eval(c, ids, N_TOK, shot, 1, err), 0);
	forward_free(c);
	ck_assert_int_eq(forward_new(&c, &m, &seven, err), 0);
	ck_assert_int_eq(forward_eval(c, ids, N_TOK, other, 1, err), 0);
	ck_assert_msg(max_rel(other, shot, n) <= 1e-5, "chunks of 7: %.3g", max_rel(other, shot, n));
	forward_rewind(c, 0);
	for (t = 0; t < N_TOK; t++)
		ck_assert_int_eq(forward_eval(c, &ids[t], 1, other + (size_t)t * m.hp.n_vocab, 0, err), 0);
	ck_assert_msg(max_rel(other, shot, n) <= 1e-5, "decode: %.3g", max_rel(other, shot, n));

	/* Rewinding within the ring's slack keeps working; past it the
	 * session refuses instead of attending to overwritten keys. */
	forward_rewind(c, N_TOK - 3);
	ck_assert_int_eq(forward_eval(c, &ids[N_TOK - 3], 1, other, 0, err), 0);
	forward_rewind(c, N_TOK / 2);
	ck_assert_int_eq(forward_eval(c, &ids[N_TOK / 2], 1, other, 0, err), EMBER_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "no longer holds"));
	printf("models: %s rewind past the ring: %s\n", swa_archs[_i], err);
	forward_rewind(c, 0);
	ck_assert_int_eq(forward_eval(c, ids, 1, other, 0, err), 0);
	forward_free(c);
	free(shot);
	free(other);
	model_free(&m);
}
END_TEST

/* The daemon's pool: ring entries are smaller, so more fit one budget;
 * a cached sequence whose ring no longer holds the window before a shorter
 * common prefix is not reused for it (the prompt is computed again). */
START_TEST(pool_entries_use_rings_and_reuse_only_what_they_hold)
{
	const uint32_t n_ctx = 160, step = 16;
	char err[EMBER_ERR_MAX] = "";
	struct compute_opts o = {.max_batch = step};
	struct compute_pass *f;
	struct kv_claim c;
	struct kv_pool p;
	int32_t ids[N_TOK];
	struct model m;
	size_t full;
	uint32_t n_full, done;

	open_golden(&m, "gemma3");
	some_tokens(ids, m.hp.n_vocab);
	full = compute_kv_bytes(&m, n_ctx, DTYPE_F16);
	ck_assert_int_eq(kv_pool_init(&p, &m, n_ctx, DTYPE_F16, 4 * full, err), 0);
	n_full = p.n_max;
	ck_assert_int_eq(kv_pool_set_ring(&p, step, err), 0);
	ck_assert_uint_lt(p.entry_bytes, full);
	ck_assert_uint_gt(p.n_max, n_full);
	printf("models: pool entry %zu bytes with rings, %zu without: %u entries instead of %u\n",
	       p.entry_bytes, full, p.n_max, n_full);
	ck_assert_uint_eq(p.entry_bytes, compute_kv_ring_bytes(&m, n_ctx, DTYPE_F16, step));
	ck_assert_int_eq(compute_pass_new(&f, &m, &o, err), 0);
	ck_assert_int_eq(kv_pool_acquire(&p, ids, N_TOK, &c, err), 0);
	ck_assert_uint_eq(c.n_reuse, 0);
	for (done = 0; done < N_TOK; done += step) {
		struct compute_seq sq = {c.entry->kv, ids + done,
					 N_TOK - done < step ? N_TOK - done : step, COMPUTE_LOGITS_NONE, false};

		ck_assert_msg(compute_pass_run(f, &sq, 1, NULL, err) == 0, "%s", err);
	}
	memcpy(c.entry->tokens, ids, sizeof(ids));
	kv_pool_release(&p, c.entry, NULL);
	/* The whole sequence plus one: reused in full. */
	ck_assert_int_eq(kv_pool_acquire(&p, ids, N_TOK, &c, err), 0);
	ck_assert_uint_eq(c.n_reuse, N_TOK - 1);
	kv_pool_release(&p, c.entry, NULL);
	/* Half of it: the ring has overwritten that window; nothing reused. */
	ck_assert_int_eq(kv_pool_acquire(&p, ids, N_TOK / 2, &c, err), 0);
	ck_assert_uint_eq(c.n_reuse, 0);
	ck_assert(compute_kv_holds(c.entry->kv, compute_kv_n_pos(c.entry->kv)));
	kv_pool_release(&p, c.entry, NULL);
	compute_pass_free(f);
	kv_pool_free(&p);
	model_free(&m);
}
END_TEST

/* ---- what a file asks for ------------------------------------------------------ */

/* Writes `src` plus key `key` (a string when str, else a u32 or f32) to
 * path, tensors and all. */
static void copy_with_key(const char *src, const char *key, const char *str, double num, int u32,
			  const char *path)
{
	char err[EMBER_ERR_MAX] = "";
	struct gguf_writer *w;
	struct gguf g;
	uint64_t i;

	ck_assert_int_eq(gguf_open(&g, src, err), 0);
	ck_assert_int_eq(gguf_writer_new(&w, path, err), 0);
	for (i = 0; i < g.n_kv; i++)
		ck_assert_int_eq(gguf_writer_copy_kv(w, &g.kv[i]), 0);
	if (str)
		ck_assert_int_eq(gguf_writer_set_str(w, key, str), 0);
	else if (u32)
		ck_assert_int_eq(gguf_writer_set_u32(w, key, (uint32_t)num), 0);
	else
		ck_assert_int_eq(gguf_writer_set_f32(w, key, (float)num), 0);
	for (i = 0; i < g.n_tensors; i++) {
		char name[128];

		snprintf(name, sizeof(name), "%.*s", (int)g.tensors[i].name.len, g.tensors[i].name.ptr);
		ck_assert_int_eq(gguf_writer_add_tensor(w, name, g.tensors[i].type, g.tensors[i].n_dims,
							g.tensors[i].ne), 0);
	}
	ck_assert_msg(gguf_writer_write_header(w, err) == 0, "%s", err);
	for (i = 0; i < g.n_tensors; i++)
		ck_assert_int_eq(gguf_writer_write_data(w, g.tensors[i].data, g.tensors[i].size, err), 0);
	ck_assert_msg(gguf_writer_finish(w, err) == 0, "%s", err);
	gguf_writer_free(w);
	gguf_close(&g);
}

static void expect_refused(const char *path, const char *want)
{
	char err[EMBER_ERR_MAX] = "";
	struct model m;

	ck_assert_int_eq(model_open(&m, path, err), EMBER_EUNSUPPORTED);
	ck_assert_msg(strstr(err, want) != NULL, "message '%s' lacks '%s'", err, want);
	printf("models: refused as expected: %s\n", err);
	unlink(path);
}

START_TEST(unimplemented_features_are_refused_at_load)
{
	char path[128];

	snprintf(path, sizeof(path), "/tmp/ember_test_models_%ld.gguf", (long)getpid());
	copy_with_key(GOLDEN "llama3/model-f32.gguf", "llama.rope.scaling.type", "yarn", 0, 0, path);
	expect_refused(path, "rope.scaling.type 'yarn' is not supported");
	copy_with_key(GOLDEN "qwen3/model-f32.gguf", "qwen3.expert_count", NULL, 8, 1, path);
	expect_refused(path, "mixture of experts");
}
END_TEST

/* Llama 3's rope_freqs is not Qwen2's: the same file read as qwen2 (its
 * "llama." keys renamed in place) is refused naming the tensor. */
START_TEST(rope_freqs_in_an_architecture_without_it_is_refused)
{
	char err[EMBER_ERR_MAX] = "";
	size_t len, i;
	char *bytes = test_read_file(GOLDEN "llama3/model-f32.gguf", &len);
	struct gguf g;
	struct model m;

	ck_assert_ptr_nonnull(bytes);
	/* Every key prefix, and the value of general.architecture (a string
	 * of length 5: its u64 length precedes it). */
	for (i = 0; i + 13 <= len; i++) {
		if (memcmp(bytes + i, "llama.", 6) == 0)
			memcpy(bytes + i, "qwen2", 5);
		else if (memcmp(bytes + i, "\x05\0\0\0\0\0\0\0llama", 13) == 0)
			memcpy(bytes + i + 8, "qwen2", 5);
	}
	ck_assert_int_eq(gguf_open_memory(&g, bytes, len, err), 0);
	ck_assert_msg(model_load(&m, &g, err) == EMBER_EUNSUPPORTED, "%s", err);
	ck_assert_msg(strstr(err, "tensor rope_freqs.weight is not supported for architecture qwen2"),
		      "%s", err);
	printf("models: refused as expected: %s\n", err);
	gguf_close(&g);
	free(bytes);
}
END_TEST

START_TEST(linear_scaling_and_attention_scale_are_read)
{
	char err[EMBER_ERR_MAX] = "", path[128];
	struct model m;

	snprintf(path, sizeof(path), "/tmp/ember_test_models_l_%ld.gguf", (long)getpid());
	open_golden(&m, "gemma2");
	ck_assert_float_eq_tol(m.hp.attn_scale, 1.0 / sqrt(48.0), 1e-7);
	ck_assert_float_eq_tol(m.hp.attn_softcap, 0.1, 1e-7);
	ck_assert_float_eq_tol(m.hp.final_softcap, 1.0, 1e-7);
	ck_assert_uint_eq(m.hp.n_swa, 8);
	model_free(&m);
	copy_with_key(GOLDEN "gemma2/model-f32.gguf", "gemma2.attention.scale", NULL, 0.125, 0, path);
	ck_assert_msg(model_open(&m, path, err) == 0, "%s", err);
	ck_assert_float_eq(m.hp.attn_scale, 0.125f);
	model_free(&m);
	copy_with_key(GOLDEN "gemma3/model-f32.gguf", "gemma3.rope.scaling.type", "linear", 0, 0, path);
	ck_assert_int_eq(model_open(&m, path, err), EMBER_EFORMAT); /* no factor */
	ck_assert_ptr_nonnull(strstr(err, "rope.scaling.factor"));
	unlink(path);
	open_golden(&m, "gemma3");
	ck_assert_int_eq(m.hp.has_rope_base_swa, 1);
	ck_assert_float_eq(m.hp.rope_base_swa, 10000.0f);
	ck_assert_float_eq(m.hp.rope_freq_scale, 1.0f);
	model_free(&m);
}
END_TEST

Suite *suite_models(void)
{
	Suite *s = suite_create("models");
	TCase *tc = tcase_create("models");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, ring_cache_equals_full_cache_masked_the_same_way, 0, 2);
	tcase_add_loop_test(tc, sliding_window_decode_and_chunks_equal_one_shot, 0, 2);
	tcase_add_test(tc, pool_entries_use_rings_and_reuse_only_what_they_hold);
	tcase_add_test(tc, unimplemented_features_are_refused_at_load);
	tcase_add_test(tc, rope_freqs_in_an_architecture_without_it_is_refused);
	tcase_add_test(tc, linear_scaling_and_attention_scale_are_read);
	suite_add_tcase(s, tc);
	return s;
}
