/* test_forward.c - the model loader and the forward pass against the golden
 * LLaMA model (../shared/golden/llama): reference logits, greedy
 * continuation, and the equalities every way of running it must keep
 * (prefill vs decode, chunks, sessions, threads, weight types). */
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
#include "kernels.h"
#include "model.h"
#include "testutil.h"

#define GOLDEN "../shared/golden/llama/"
#define N_IN 24
#define N_GREEDY 16
#define N_VOCAB 1000

/* The golden README's tolerance for an F32 forward pass. */
#define TOL_EXACT 1e-4
/* Same computation, different chunking: only GEMM vs GEMV rounding. */
#define TOL_SAME 1e-5
/* Thread count changes nothing but which thread computes a row. */
#define TOL_THREADS 1e-6

static void open_model(struct model *m, const char *path)
{
	char err[EMBER_ERR_MAX] = "";
	int rc = model_open(m, path, err);

	ck_assert_msg(rc == 0, "model_open %s: %s", path, err);
	ck_assert_uint_eq(m->hp.n_vocab, N_VOCAB);
}

static struct forward_ctx *session(const struct model *m, uint32_t max_batch, tpool_t pool)
{
	struct forward_opts o = {.n_ctx = 64, .max_batch = max_batch, .pool = pool};
	char err[EMBER_ERR_MAX] = "";
	struct forward_ctx *f = NULL;

	ck_assert_msg(forward_new(&f, m, &o, err) == 0, "forward_new: %s", err);
	return f;
}

static void eval(struct forward_ctx *f, const int32_t *ids, size_t n, float *logits, int all)
{
	char err[EMBER_ERR_MAX] = "";
	int rc = forward_eval(f, ids, n, logits, all, err);

	ck_assert_msg(rc == 0, "forward_eval: %s", err);
}

static double max_abs(const float *a, size_t n)
{
	double m = 0;
	size_t i;

	for (i = 0; i < n; i++)
		m = fmax(m, fabs(a[i]));
	return m;
}

static double max_diff(const float *a, const float *b, size_t n)
{
	double m = 0;
	size_t i;

	for (i = 0; i < n; i++)
		m = fmax(m, fabs((double)a[i] - b[i]));
	return m;
}

/* Asserts max|a - b| <= tol * max|b| over each position's row of n_vocab. */
static void assert_close_v(const float *a, const float *b, size_t rows, size_t n_vocab, double tol,
			   const char *what)
{
	size_t t;

	for (t = 0; t < rows; t++) {
		const float *ra = a + t * n_vocab, *rb = b + t * n_vocab;
		double d = max_diff(ra, rb, n_vocab), ref = max_abs(rb, n_vocab);

		ck_assert_msg(d <= tol * ref, "%s: position %zu: max|diff| %.3g > %.1g x %.3g", what,
			      t, d, tol, ref);
	}
}

static void assert_close(const float *a, const float *b, size_t rows, double tol, const char *what)
{
	assert_close_v(a, b, rows, N_VOCAB, tol, what);
}

static int32_t argmax_v(const float *x, uint32_t n_vocab)
{
	int32_t i, best = 0;

	for (i = 1; i < (int32_t)n_vocab; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

static int32_t argmax(const float *x)
{
	return argmax_v(x, N_VOCAB);
}

/* All-position logits of the input in one call. */
static float *prefill_all(const struct model *m, const int32_t *ids, tpool_t pool)
{
	struct forward_ctx *f = session(m, 0, pool);
	float *logits = malloc(sizeof(float) * N_IN * N_VOCAB);

	eval(f, ids, N_IN, logits, 1);
	forward_free(f);
	return logits;
}

/* ---- reference -------------------------------------------------------------- */

START_TEST(logits_match_the_exact_reference)
{
	struct test_golden g;
	struct model m;
	float *logits;
	double d, ref;

	test_golden_load(&g, "llama", N_VOCAB);
	open_model(&m, GOLDEN "model-f32.gguf");
	logits = prefill_all(&m, g.input, NULL);
	d = max_diff(logits, g.exact, N_IN * N_VOCAB);
	ref = max_abs(g.exact, N_IN * N_VOCAB);
	printf("forward: golden llama f32: max|diff| = %.3g (%.3g of max|exact| %.3g)\n", d, d / ref,
	       ref);
	assert_close(logits, g.exact, N_IN, TOL_EXACT, "f32 vs exact");
	free(logits);
	model_free(&m);
	test_golden_free(&g);
}
END_TEST

START_TEST(greedy_continuation_matches_the_reference)
{
	struct test_golden g;
	struct model m;
	struct forward_ctx *f;
	float last[N_VOCAB];
	int i;

	test_golden_load(&g, "llama", N_VOCAB);
	open_model(&m, GOLDEN "model-f32.gguf");
	f = session(&m, 0, NULL);
	eval(f, g.input, N_IN, last, 0);
	for (i = 0; i < N_GREEDY; i++) {
		int32_t id = argmax(last);

		ck_assert_msg(id == g.greedy[i], "greedy token %d: %d, expected %d", i, id, g.greedy[i]);
		eval(f, &id, 1, last, 0);
	}
	ck_assert_uint_eq(forward_n_pos(f), N_IN + N_GREEDY);
	forward_free(f);
	model_free(&m);
	test_golden_free(&g);
}
END_TEST

/*
 * Every architecture in the table against its golden model (_i indexes
 * golden_archs): logits at every position within the README tolerance,
 * then the greedy continuation token for token.
 */
static const char *const golden_archs[] = {"llama", "gemma", "qwen2", "stablelm", "phi", "falcon"};

START_TEST(every_architecture_matches_its_golden_model)
{
	char path[256], err[EMBER_ERR_MAX] = "";
	struct test_golden g;
	struct model m;
	struct forward_ctx *f;
	float *logits;
	uint32_t nv;
	double d;
	int i;

	snprintf(path, sizeof(path), "../shared/golden/%s/model-f32.gguf", golden_archs[_i]);
	ck_assert_msg(model_open(&m, path, err) == 0, "%s: %s", path, err);
	nv = m.hp.n_vocab;
	test_golden_load(&g, golden_archs[_i], nv);
	logits = malloc(sizeof(float) * N_IN * nv);

	f = session(&m, 0, NULL);
	eval(f, g.input, N_IN, logits, 1);
	d = max_diff(logits, g.exact, (size_t)N_IN * nv);
	printf("forward: golden %s f32: max|diff| = %.3g (%.3g of max|exact|)\n", golden_archs[_i],
	       d, d / max_abs(g.exact, (size_t)N_IN * nv));
	assert_close_v(logits, g.exact, N_IN, nv, TOL_EXACT, golden_archs[_i]);
	for (i = 0; i < N_GREEDY; i++) {
		int32_t id = argmax_v(i == 0 ? logits + (size_t)(N_IN - 1) * nv : logits, nv);

		ck_assert_msg(id == g.greedy[i], "%s: greedy token %d: %d, expected %d",
			      golden_archs[_i], i, id, g.greedy[i]);
		eval(f, &id, 1, logits, 0);
	}
	forward_free(f);
	test_golden_free(&g);
	free(logits);
	model_free(&m);
}
END_TEST

/* ---- ways of running must agree -------------------------------------------- */

START_TEST(prefill_equals_token_by_token_decode)
{
	struct test_golden g;
	struct model m;
	struct forward_ctx *f;
	float *one_shot, *stepped = malloc(sizeof(float) * N_IN * N_VOCAB);
	int t;

	test_golden_load(&g, "llama", N_VOCAB);
	open_model(&m, GOLDEN "model-f32.gguf");
	one_shot = prefill_all(&m, g.input, NULL);
	f = session(&m, 0, NULL);
	for (t = 0; t < N_IN; t++)
		eval(f, &g.input[t], 1, stepped + (size_t)t * N_VOCAB, 0);
	assert_close(stepped, one_shot, N_IN, TOL_SAME, "decode vs prefill");
	forward_free(f);
	free(stepped);
	free(one_shot);
	model_free(&m);
	test_golden_free(&g);
}
END_TEST

START_TEST(chunked_prefill_equals_one_shot)
{
	static const int chunks[] = {5, 7, 12};
	struct test_golden g;
	struct model m;
	struct forward_ctx *f;
	float *one_shot, *chunked = malloc(sizeof(float) * N_IN * N_VOCAB);
	int c, done = 0;

	test_golden_load(&g, "llama", N_VOCAB);
	open_model(&m, GOLDEN "model-f32.gguf");
	one_shot = prefill_all(&m, g.input, NULL);
	/* Chunks chosen by the caller ... */
	f = session(&m, 0, NULL);
	for (c = 0; c < 3; c++) {
		eval(f, g.input + done, (size_t)chunks[c], chunked + (size_t)done * N_VOCAB, 1);
		done += chunks[c];
	}
	assert_close(chunked, one_shot, N_IN, TOL_SAME, "5+7+12 vs one shot");
	forward_free(f);
	/* ... and by a max_batch smaller than the prompt. */
	memset(chunked, 0, sizeof(float) * N_IN * N_VOCAB);
	f = session(&m, 7, NULL);
	eval(f, g.input, N_IN, chunked, 1);
	assert_close(chunked, one_shot, N_IN, TOL_SAME, "max_batch 7 vs one shot");
	forward_free(f);
	free(chunked);
	free(one_shot);
	model_free(&m);
	test_golden_free(&g);
}
END_TEST

START_TEST(interleaved_sessions_equal_each_alone)
{
	struct test_golden g;
	struct model m;
	struct forward_ctx *a, *b;
	int32_t rev[N_IN];
	float *a_alone, *b_alone, *a_mixed = malloc(sizeof(float) * N_IN * N_VOCAB),
			    *b_mixed = malloc(sizeof(float) * N_IN * N_VOCAB);
	int t;

	test_golden_load(&g, "llama", N_VOCAB);
	for (t = 0; t < N_IN; t++)
		rev[t] = g.input[N_IN - 1 - t];
	open_model(&m, GOLDEN "model-f32.gguf");
	a_alone = prefill_all(&m, g.input, NULL);
	b_alone = prefill_all(&m, rev, NULL);
	a = session(&m, 0, NULL);
	b = session(&m, 0, NULL);
	/* Uneven steps so the two caches are at different positions. */
	eval(a, g.input, 10, a_mixed, 1);
	for (t = 0; t < N_IN; t++) {
		eval(b, &rev[t], 1, b_mixed + (size_t)t * N_VOCAB, 1);
		if (t + 10 < N_IN)
			eval(a, &g.input[t + 10], 1, a_mixed + (size_t)(t + 10) * N_VOCAB, 1);
	}
	assert_close(a_mixed, a_alone, N_IN, TOL_SAME, "session a interleaved");
	assert_close(b_mixed, b_alone, N_IN, TOL_SAME, "session b interleaved");
	forward_free(a);
	forward_free(b);
	free(a_alone);
	free(b_alone);
	free(a_mixed);
	free(b_mixed);
	model_free(&m);
	test_golden_free(&g);
}
END_TEST

START_TEST(two_threads_equal_one)
{
	struct test_golden g;
	struct model m;
	tpool_t pool;
	float *one, *two;

	if (test_no_threads("forward: two_threads_equal_one"))
		return;
	pool = tpool_create(2);
	ck_assert_ptr_nonnull(pool);
	test_golden_load(&g, "llama", N_VOCAB);
	open_model(&m, GOLDEN "model-f32.gguf");
	one = prefill_all(&m, g.input, NULL);
	two = prefill_all(&m, g.input, pool);
	assert_close(two, one, N_IN, TOL_THREADS, "2 threads vs 1");
	free(one);
	free(two);
	tpool_destroy(pool);
	model_free(&m);
	test_golden_free(&g);
}
END_TEST

START_TEST(rewind_recomputes_the_same_logits)
{
	struct test_golden g;
	struct model m;
	struct forward_ctx *f;
	float first[N_VOCAB], again[N_VOCAB];

	test_golden_load(&g, "llama", N_VOCAB);
	open_model(&m, GOLDEN "model-f32.gguf");
	f = session(&m, 0, NULL);
	eval(f, g.input, N_IN, first, 0);
	forward_rewind(f, 10);
	ck_assert_uint_eq(forward_n_pos(f), 10);
	eval(f, g.input + 10, N_IN - 10, again, 0);
	assert_close(again, first, 1, TOL_SAME, "after rewind");
	forward_free(f);
	model_free(&m);
	test_golden_free(&g);
}
END_TEST

START_TEST(bad_tokens_and_overflow_are_errors_that_change_nothing)
{
	struct test_golden g;
	struct model m;
	struct forward_ctx *f;
	struct forward_opts o = {.n_ctx = N_IN};
	char err[EMBER_ERR_MAX] = "";
	int32_t bad[2] = {1, N_VOCAB};
	float last[N_VOCAB];

	test_golden_load(&g, "llama", N_VOCAB);
	open_model(&m, GOLDEN "model-f32.gguf");
	ck_assert_int_eq(forward_new(&f, &m, &o, err), 0);
	ck_assert_int_eq(forward_eval(f, bad, 2, last, 0, err), EMBER_ERANGE);
	ck_assert_msg(strstr(err, "1000") != NULL, "message: %s", err);
	bad[1] = -1;
	ck_assert_int_eq(forward_eval(f, bad, 2, last, 0, err), EMBER_ERANGE);
	ck_assert_int_eq(forward_eval(f, bad, 0, last, 0, err), EMBER_EINVAL);
	ck_assert_uint_eq(forward_n_pos(f), 0);
	eval(f, g.input, N_IN - 1, NULL, 0);
	ck_assert_int_eq(forward_eval(f, g.input, 2, last, 0, err), EMBER_ECONTEXT);
	ck_assert_uint_eq(forward_n_pos(f), N_IN - 1);
	eval(f, g.input + N_IN - 1, 1, last, 0);
	ck_assert_int_eq(argmax(last), g.greedy[0]);
	forward_free(f);
	model_free(&m);
	test_golden_free(&g);
}
END_TEST

/* ---- weight types ------------------------------------------------------------ */

/* Copies the golden model to a temporary file with every matrix stored as
 * `type`, or (round_f32) kept F32 but rounded through `type`, so the two
 * files hold the same numbers in different encodings. */
static void write_variant(const char *path, uint32_t type, int round_f32)
{
	char err[EMBER_ERR_MAX] = "", name[128];
	struct gguf g;
	struct gguf_writer *w;
	uint8_t *buf;
	float *row;
	uint64_t i, r;

	ck_assert_int_eq(gguf_open(&g, GOLDEN "model-f32.gguf", err), 0);
	ck_assert_int_eq(gguf_writer_new(&w, path, err), 0);
	for (i = 0; i < g.n_kv; i++)
		ck_assert_int_eq(gguf_writer_copy_kv(w, &g.kv[i]), 0);
	for (i = 0; i < g.n_tensors; i++) {
		const struct gguf_tensor *t = &g.tensors[i];
		uint32_t ty = t->n_dims == 2 && !round_f32 ? type : t->type;

		ck_assert_uint_lt(t->name.len, sizeof(name));
		memcpy(name, t->name.ptr, t->name.len);
		name[t->name.len] = '\0';
		ck_assert_int_eq(gguf_writer_add_tensor(w, name, ty, t->n_dims, t->ne), 0);
	}
	ck_assert_int_eq(gguf_writer_write_header(w, err), 0);
	buf = malloc(4096 * 4);
	row = malloc(4096 * 4);
	for (i = 0; i < g.n_tensors; i++) {
		const struct gguf_tensor *t = &g.tensors[i];
		uint64_t n_in = t->ne[0];

		ck_assert_uint_eq(t->type, DTYPE_F32);
		if (t->n_dims != 2) {
			ck_assert_int_eq(gguf_writer_write_data(w, t->data, t->size, err), 0);
			continue;
		}
		for (r = 0; r < t->ne[1]; r++) {
			const float *src = (const float *)t->data + r * n_in;

			ck_assert_int_eq(kern_quantize_row(type, src, buf, n_in), 0);
			if (round_f32) {
				ck_assert_int_eq(kern_dequantize_row(type, buf, row, n_in), 0);
				ck_assert_int_eq(gguf_writer_write_data(w, row, n_in * 4, err), 0);
			} else {
				ck_assert_int_eq(gguf_writer_write_data(w, buf,
					dtype_row_size(type, n_in), err), 0);
			}
		}
	}
	ck_assert_msg(gguf_writer_finish(w, err) == 0, "write %s: %s", path, err);
	gguf_writer_free(w);
	free(buf);
	free(row);
	gguf_close(&g);
}

static void tmp_path(char *path, size_t size, const char *tag)
{
	snprintf(path, size, "/tmp/ember_test_forward_%ld_%s.gguf", (long)getpid(), tag);
}

/*
 * A decode step over k sequences (the server's batched step; at the
 * AVX-512 level the small-batch tiles read each weight once for all k)
 * gives each sequence the logits a step of its own gives, bit for bit,
 * for quantized and half-precision weights (_i: Q8_0, Q4_0, F16, BF16)
 * and k = 2..5, 8, 9 and 16 (whole and partial groups of the 8-token
 * tiles). Exact, not within a tolerance: every level computes each
 * (row, token) result by one instruction sequence whatever the batch.
 */
START_TEST(batched_step_equals_single_steps_bit_for_bit)
{
	static const uint32_t types[] = {DTYPE_Q8_0, DTYPE_Q4_0, DTYPE_F16, DTYPE_BF16};
	static const uint32_t ks[] = {2, 3, 4, 5, 8, 9, 16};
	enum { K = 16 };
	char path[128], err[EMBER_ERR_MAX] = "";
	struct forward_opts o = {.max_batch = 16};
	struct forward_pass *p = NULL;
	struct test_golden g;
	struct model m;
	struct kv_cache kv[K], alone[K];
	float *batch = malloc(sizeof(float) * K * N_VOCAB), *one = malloc(sizeof(float) * N_VOCAB);

	tmp_path(path, sizeof(path), dtype_name(types[_i]));
	write_variant(path, types[_i], 0);
	test_golden_load(&g, "llama", N_VOCAB);
	open_model(&m, path);
	ck_assert_msg(forward_pass_new(&p, &m, &o, err) == 0, "pass: %s", err);
	for (int s = 0; s < K; s++) {
		/* Different prompt lengths, so the caches sit at different positions. */
		struct forward_seq q = {kv + s, g.input + s % 5, (uint32_t)(3 + 2 * (s % 5)),
					FORWARD_LOGITS_NONE, false};
		ck_assert_int_eq(kv_cache_init(kv + s, &m.hp, 32, DTYPE_F16, err), 0);
		ck_assert_int_eq(kv_cache_init(alone + s, &m.hp, 32, DTYPE_F16, err), 0);
		ck_assert_msg(forward_pass_run(p, &q, 1, NULL, err) == 0, "prefill: %s", err);
	}
	for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
		const uint32_t k = ks[ki];
		struct forward_seq seqs[K];
		for (uint32_t s = 0; s < k; s++) {
			ck_assert_int_eq(kv_cache_copy(alone + s, kv + s), 0);
			seqs[s] = (struct forward_seq){kv + s, g.input + 12 + s % 5, 1,
						       FORWARD_LOGITS_LAST, false};
		}
		ck_assert_msg(forward_pass_run(p, seqs, k, batch, err) == 0, "batch: %s", err);
		for (uint32_t s = 0; s < k; s++) {
			seqs[s].kv = alone + s;
			ck_assert_msg(forward_pass_run(p, seqs + s, 1, one, err) == 0, "one: %s", err);
			ck_assert_msg(memcmp(one, batch + (size_t)s * N_VOCAB, sizeof(float) * N_VOCAB) == 0,
				      "%s k=%u: sequence %u differs from its own step",
				      dtype_name(types[_i]), k, s);
		}
	}
	for (int s = 0; s < K; s++) {
		kv_cache_free(kv + s);
		kv_cache_free(alone + s);
	}
	forward_pass_free(p);
	model_free(&m);
	test_golden_free(&g);
	unlink(path);
	free(batch);
	free(one);
}
END_TEST

/*
 * A model stored as F16 or BF16 (_i: 0 F16, 1 BF16) gives the logits of
 * the F32 model holding the same rounded values: the kernels widen the
 * weights and keep activations in F32. Against the exact F32 reference it
 * may only differ by the weight rounding.
 */
START_TEST(half_precision_weights_match_f32_holding_the_same_values)
{
	static const uint32_t types[] = {DTYPE_F16, DTYPE_BF16};
	static const double vs_exact[] = {2e-3, 2e-2}; /* 11 vs 8 bits of mantissa */
	uint32_t type = types[_i];
	char p_half[128], p_round[128];
	struct test_golden g;
	struct model half, rounded;
	float *l_half, *l_round;
	double d;

	test_golden_load(&g, "llama", N_VOCAB);
	tmp_path(p_half, sizeof(p_half), dtype_name(type));
	tmp_path(p_round, sizeof(p_round), "rounded");
	write_variant(p_half, type, 0);
	write_variant(p_round, type, 1);
	open_model(&half, p_half);
	open_model(&rounded, p_round);
	ck_assert_uint_eq(half.layers[0].w[ARCH_T_ATTN_Q].type, type);
	ck_assert_uint_eq(rounded.layers[0].w[ARCH_T_ATTN_Q].type, DTYPE_F32);
	l_half = prefill_all(&half, g.input, NULL);
	l_round = prefill_all(&rounded, g.input, NULL);
	assert_close(l_half, l_round, N_IN, TOL_SAME, "half vs rounded f32");
	d = max_diff(l_half, g.exact, N_IN * N_VOCAB);
	printf("forward: golden llama %s: max|diff| vs exact = %.3g\n", dtype_name(type), d);
	assert_close(l_half, g.exact, N_IN, vs_exact[_i], "half vs exact");
	free(l_half);
	free(l_round);
	model_free(&half);
	model_free(&rounded);
	unlink(p_half);
	unlink(p_round);
	test_golden_free(&g);
}
END_TEST

/* ---- load errors --------------------------------------------------------------- */

struct file_copy {
	uint8_t *bytes;
	size_t len;
};

static void read_file(struct file_copy *c, const char *path)
{
	FILE *f = fopen(path, "rb");
	long len;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	c->len = (size_t)len;
	c->bytes = malloc(c->len);
	ck_assert_uint_eq(fread(c->bytes, 1, c->len, f), c->len);
	fclose(f);
}

static void read_golden(struct file_copy *c)
{
	read_file(c, GOLDEN "model-f32.gguf");
}

/* Offset just past the first occurrence of the length-prefixed string s. */
static size_t find_gguf_str(const struct file_copy *c, const char *s)
{
	size_t n = strlen(s), i;

	for (i = 8; i + n <= c->len; i++)
		if (memcmp(c->bytes + i, s, n) == 0 && c->bytes[i - 8] == n)
			return i + n;
	ck_abort_msg("string %s not in the file", s);
	return 0;
}

/* Loads the patched bytes; expects failure `code` with `want` in the message. */
static void expect_load_error(struct file_copy *c, int code, const char *want)
{
	char err[EMBER_ERR_MAX] = "";
	struct gguf g;
	struct model m;
	int rc;

	ck_assert_msg(gguf_open_memory(&g, c->bytes, c->len, err) == 0, "gguf: %s", err);
	rc = model_load(&m, &g, err);
	ck_assert_msg(rc == code, "model_load returned %d (%s), expected %d", rc, err, code);
	ck_assert_msg(strstr(err, want) != NULL, "message '%s' lacks '%s'", err, want);
	printf("forward: load error as expected: %s\n", err);
	model_free(&m);
	gguf_close(&g);
	free(c->bytes);
}

START_TEST(missing_tensor_is_named)
{
	struct file_copy c;

	read_golden(&c);
	c.bytes[find_gguf_str(&c, "blk.1.ffn_up.weight") - 8] = 'X'; /* ffn_Xp */
	expect_load_error(&c, EMBER_EFORMAT, "tensor blk.1.ffn_up.weight is missing");
}
END_TEST

START_TEST(wrong_shape_is_named)
{
	struct file_copy c;
	uint64_t ne[2];
	size_t at;

	/* Swapping ne[0] and ne[1] keeps the byte size, so only the model's
	 * shape check can notice. */
	read_golden(&c);
	at = find_gguf_str(&c, "blk.0.attn_k.weight") + 4;
	memcpy(ne, c.bytes + at, sizeof(ne));
	ck_assert(ne[0] != ne[1]);
	memcpy(c.bytes + at, &ne[1], 8);
	memcpy(c.bytes + at + 8, &ne[0], 8);
	expect_load_error(&c, EMBER_EFORMAT, "tensor blk.0.attn_k.weight has shape [64, 128");
}
END_TEST

START_TEST(missing_key_and_unknown_arch_are_named)
{
	struct file_copy c;
	size_t at;

	read_golden(&c);
	c.bytes[find_gguf_str(&c, "llama.block_count") - 1] = 'X';
	expect_load_error(&c, EMBER_EFORMAT, "missing key llama.block_count");

	read_golden(&c);
	at = find_gguf_str(&c, "general.architecture");
	ck_assert_int_eq(memcmp(c.bytes + at + 12, "llama", 5), 0);
	c.bytes[at + 16] = 'x';
	expect_load_error(&c, EMBER_EUNSUPPORTED, "architecture 'llamx'");
}
END_TEST

START_TEST(attention_needs_split_or_fused_projections)
{
	struct file_copy c;

	/* Phi-2 takes either form, so only the per-layer check can notice. */
	read_file(&c, "../shared/golden/phi/model-f32.gguf");
	c.bytes[find_gguf_str(&c, "blk.1.attn_v.weight") - 8] = 'X';
	expect_load_error(&c, EMBER_EFORMAT, "layer 1: needs blk.1.attn_qkv.weight or all of");
}
END_TEST

START_TEST(tied_output_uses_the_embedding)
{
	char err[EMBER_ERR_MAX] = "";
	struct model m;

	/* Llama 3.2 style: no output.weight in the file. */
	ck_assert_msg(model_open(&m, "../shared/golden/llama3/model-f32.gguf", err) == 0, "%s", err);
	ck_assert_int_eq(m.output_tied, 1);
	ck_assert_ptr_eq(m.w[ARCH_T_OUTPUT].data, m.w[ARCH_T_TOKEN_EMBD].data);
	ck_assert_ptr_nonnull(m.w[ARCH_T_ROPE_FREQS].data);
	model_free(&m);
}
END_TEST

/* A tensor the architecture does not use is a feature Ember would
 * silently skip: the load fails naming it. */
START_TEST(unknown_tensor_is_refused_by_name)
{
	struct file_copy c;

	read_golden(&c);
	c.bytes[find_gguf_str(&c, "output.weight") - 8] = 'X';
	expect_load_error(&c, EMBER_EUNSUPPORTED, "is not supported for architecture llama");
}
END_TEST

Suite *suite_forward(void)
{
	Suite *s = suite_create("forward");
	TCase *tc = tcase_create("golden");
	TCase *te = tcase_create("load");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, logits_match_the_exact_reference);
	tcase_add_test(tc, greedy_continuation_matches_the_reference);
	tcase_add_loop_test(tc, every_architecture_matches_its_golden_model, 0,
			    (int)(sizeof(golden_archs) / sizeof(golden_archs[0])));
	tcase_add_test(tc, prefill_equals_token_by_token_decode);
	tcase_add_test(tc, chunked_prefill_equals_one_shot);
	tcase_add_test(tc, interleaved_sessions_equal_each_alone);
	tcase_add_test(tc, two_threads_equal_one);
	tcase_add_test(tc, rewind_recomputes_the_same_logits);
	tcase_add_test(tc, bad_tokens_and_overflow_are_errors_that_change_nothing);
	tcase_add_loop_test(tc, half_precision_weights_match_f32_holding_the_same_values, 0, 2);
	tcase_add_loop_test(tc, batched_step_equals_single_steps_bit_for_bit, 0, 4);
	suite_add_tcase(s, tc);
	tcase_add_test(te, missing_tensor_is_named);
	tcase_add_test(te, wrong_shape_is_named);
	tcase_add_test(te, missing_key_and_unknown_arch_are_named);
	tcase_add_test(te, attention_needs_split_or_fused_projections);
	tcase_add_test(te, tied_output_uses_the_embedding);
	tcase_add_test(te, unknown_tensor_is_refused_by_name);
	suite_add_tcase(s, te);
	return s;
}
