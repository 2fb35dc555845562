/*
 * test_embed.c - embeddings (engine.h on_embed, compute.h
 * COMPUTE_HIDDEN_ALL) on the golden llama model:
 *   - the hidden states the seam returns are the model's final normed
 *     state: through the output head they give the float64 reference
 *     logits (logits-exact.f32) within the F32 tolerance;
 *   - the engine's embedding (chunked prefill, the scheduler's job kind)
 *     equals the mean of those rows, L2-normalized, computed here;
 *   - deterministic, normalized, text input equals its token ids, two
 *     requests at once equal each one alone, truncate cuts to the context.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arch.h"
#include "compute.h"
#include "dtype.h"
#include "ember.h"
#include "engine.h"
#include "testutil.h"

#define GOLDEN TEST_GOLDEN_LLAMA
#define N_EMBD_MAX 4096

static atomic_int DONE_COUNT;

struct vec_sink {
	int done_order;            /* 1 + the done calls before this one */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	float v[N_EMBD_MAX];
	size_t n;
	int done;
	struct engine_result res;
};

static void on_embed(void *data, const float *v, size_t n)
{
	struct vec_sink *s = data;

	ck_assert_uint_le(n, N_EMBD_MAX);
	memcpy(s->v, v, n * sizeof(float));
	s->n = n;
}

static void on_done(void *data, const struct engine_result *res)
{
	struct vec_sink *s = data;

	pthread_mutex_lock(&s->lock);
	s->res = *res;
	s->done = 1;
	s->done_order = atomic_fetch_add(&DONE_COUNT, 1) + 1;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static struct vec_sink *sink_new(void)
{
	struct vec_sink *s = calloc(1, sizeof(*s));

	test_sink_sync_init(&s->lock, &s->cond);
	return s;
}

static void sink_free(struct vec_sink *s)
{
	test_sink_sync_destroy(&s->lock, &s->cond);
	free(s);
}

static void sink_wait(struct vec_sink *s)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 60;
	pthread_mutex_lock(&s->lock);
	while (!s->done)
		ck_assert_msg(pthread_cond_timedwait(&s->cond, &s->lock, &until) == 0,
			      "embedding never finished");
	pthread_mutex_unlock(&s->lock);
}

static struct engine *open_engine(uint32_t n_ctx)
{
	struct engine_config c = {.slots = 2, .n_ctx = n_ctx, .kv_f32 = true, .prefill_chunk = 16};
	char err[EMBER_ERR_MAX] = "";
	struct engine *e = NULL;

	ck_assert_msg(engine_open(&e, GOLDEN, &c, err) == 0, "engine_open: %s", err);
	return e;
}

/* Submits an embedding of `ids` (or of `text` when ids is NULL). */
static void submit(struct engine *e, const int32_t *ids, size_t n, const char *text, bool trunc,
		   struct vec_sink *s)
{
	struct engine_request r = {.on_embed = on_embed, .on_done = on_done, .data = s,
				   .embed_truncate = trunc};
	char err[EMBER_ERR_MAX] = "";
	uint64_t id;

	if (ids) {
		r.embed_tokens = ids;
		r.embed_n_tokens = n;
	} else {
		r.prompt = text;
		r.prompt_len = strlen(text);
		r.add_special = true;
	}
	ck_assert_msg(engine_submit(e, &r, &id, err) == 0, "submit: %s", err);
}

static void embed(struct engine *e, const int32_t *ids, size_t n, const char *text, float *out,
		  size_t *n_out)
{
	struct vec_sink *s = sink_new();

	submit(e, ids, n, text, false, s);
	sink_wait(s);
	ck_assert_int_eq(s->res.finish, ENGINE_FINISH_STOP);
	memcpy(out, s->v, s->n * sizeof(float));
	*n_out = s->n;
	sink_free(s);
}

START_TEST(hidden_states_are_the_final_normed_state)
{
	const struct model *m;
	struct engine *e = open_engine(64);
	struct test_golden g;
	struct compute_pass *p = NULL;
	struct compute_kv *kv = NULL;
	struct compute_opts o = {.max_batch = 32, .n_threads = 1};
	char err[EMBER_ERR_MAX] = "";
	float *hid, emb[N_EMBD_MAX];
	double *mean, norm = 0, worst = 0, scale = 0;
	size_t d, n_emb = 0, t, k, v;

	m = engine_model(e);
	d = m->hp.n_embd;
	ck_assert_uint_le(d, N_EMBD_MAX);
	ck_assert_int_eq(m->w[ARCH_T_OUTPUT].type, DTYPE_F32);
	test_golden_load(&g, "llama", m->hp.n_vocab);
	ck_assert_int_eq(compute_pass_new(&p, m, &o, err), 0);
	ck_assert_int_eq(compute_kv_new(&kv, m, 64, DTYPE_F32, 0, err), 0);
	hid = malloc(TEST_GOLDEN_N_IN * d * sizeof(float));
	mean = calloc(d, sizeof(double));
	{
		struct compute_seq sq = {kv, g.input, TEST_GOLDEN_N_IN, COMPUTE_HIDDEN_ALL, false};
		struct compute_seq mix[2] = {sq, sq};

		/* hidden states and logits never share a step */
		mix[1].logits = COMPUTE_LOGITS_LAST;
		ck_assert_int_eq(compute_pass_run(p, mix, 2, hid, err), EMBER_EINVAL);
		ck_assert_msg(compute_pass_run(p, &sq, 1, hid, err) == 0, "%s", err);
	}
	/* Through the head (F32 here, a plain product) they give the exact logits. */
	for (t = 0; t < TEST_GOLDEN_N_IN; t++)
		for (v = 0; v < m->hp.n_vocab; v++) {
			const float *w = (const float *)m->w[ARCH_T_OUTPUT].data + v * d;
			double l = 0, ref = g.exact[t * m->hp.n_vocab + v];

			for (k = 0; k < d; k++)
				l += (double)w[k] * hid[t * d + k];
			if (fabs(ref) > scale)
				scale = fabs(ref);
			if (fabs(l - ref) > worst)
				worst = fabs(l - ref);
		}
	ck_assert_msg(worst <= 1e-4 * scale, "head(hidden) is %g from the exact logits (max %g)",
		      worst, scale);
	/* Mean pooling, normalized, computed here from those rows ... */
	for (t = 0; t < TEST_GOLDEN_N_IN; t++)
		for (k = 0; k < d; k++)
			mean[k] += hid[t * d + k] / (double)TEST_GOLDEN_N_IN;
	for (k = 0; k < d; k++)
		norm += mean[k] * mean[k];
	norm = sqrt(norm);
	/* ... equals the engine's (prefilled in chunks of 16 on its own cache). */
	embed(e, g.input, TEST_GOLDEN_N_IN, NULL, emb, &n_emb);
	ck_assert_uint_eq(n_emb, d);
	for (k = 0; k < d; k++)
		ck_assert_msg(fabs(emb[k] - mean[k] / norm) < 1e-5, "dim %zu: %g vs %g", k, emb[k],
			      mean[k] / norm);
	ck_assert_str_eq(engine_pooling_name(engine_pooling(e)), "mean");
	free(mean);
	free(hid);
	compute_kv_free(kv);
	compute_pass_free(p);
	test_golden_free(&g);
	engine_free(e);
}
END_TEST

START_TEST(normalized_deterministic_and_text_equals_ids)
{
	struct engine *e = open_engine(64);
	static float a[N_EMBD_MAX], b[N_EMBD_MAX], c[N_EMBD_MAX];
	char err[EMBER_ERR_MAX] = "";
	int32_t *ids = NULL;
	size_t n_ids = 0, na, nb, nc, k;
	double norm = 0;

	embed(e, NULL, 0, "The sea is calm tonight.", a, &na);
	embed(e, NULL, 0, "The sea is calm tonight.", b, &nb);
	ck_assert_uint_eq(na, nb);
	ck_assert(memcmp(a, b, na * sizeof(float)) == 0);
	for (k = 0; k < na; k++)
		norm += (double)a[k] * a[k];
	ck_assert_double_eq_tol(norm, 1.0, 1e-5);
	ck_assert_int_eq(engine_tokenize(e, "The sea is calm tonight.", 24, true, false, &ids,
					 &n_ids, err), 0);
	embed(e, ids, n_ids, NULL, c, &nc);
	ck_assert(memcmp(a, c, na * sizeof(float)) == 0);
	/* another text gives another vector */
	embed(e, NULL, 0, "A different sentence.", b, &nb);
	ck_assert(memcmp(a, b, na * sizeof(float)) != 0);
	free(ids);
	engine_free(e);
}
END_TEST

START_TEST(two_at_once_equal_each_alone)
{
	struct engine *e = open_engine(64);
	struct vec_sink *s1 = sink_new(), *s2 = sink_new();
	static float a[N_EMBD_MAX], b[N_EMBD_MAX];
	size_t na, nb;

	embed(e, NULL, 0, "first input", a, &na);
	embed(e, NULL, 0, "the second input, longer", b, &nb);
	submit(e, NULL, 0, "first input", false, s1);
	submit(e, NULL, 0, "the second input, longer", false, s2);
	sink_wait(s1);
	sink_wait(s2);
	ck_assert(memcmp(s1->v, a, na * sizeof(float)) == 0);
	ck_assert(memcmp(s2->v, b, nb * sizeof(float)) == 0);
	ck_assert_int_gt(s2->res.prompt_tokens, s1->res.prompt_tokens);
	sink_free(s1);
	sink_free(s2);
	engine_free(e);
}
END_TEST

START_TEST(too_long_is_refused_or_truncated)
{
	struct engine *e = open_engine(16);
	struct vec_sink *s = sink_new();
	int32_t ids[40];
	size_t k;

	for (k = 0; k < 40; k++)
		ids[k] = (int32_t)(5 + k);
	submit(e, ids, 40, NULL, false, s);
	sink_wait(s);
	ck_assert_int_eq(s->res.finish, ENGINE_FINISH_ERROR);
	ck_assert_int_eq(s->res.code, EMBER_ECONTEXT);
	sink_free(s);
	s = sink_new();
	submit(e, ids, 40, NULL, true, s);
	sink_wait(s);
	ck_assert_int_eq(s->res.finish, ENGINE_FINISH_STOP);
	ck_assert_int_eq(s->res.prompt_tokens, 16);
	sink_free(s);
	engine_free(e);
}
END_TEST

/* An embedding advances a chunk per worker step: a stream admitted after
 * a long one still finishes first (counted in steps, not timed). */
START_TEST(a_long_embedding_does_not_stall_a_stream)
{
	struct engine *e = open_engine(512);
	struct vec_sink *emb = sink_new(), *gen = sink_new();
	struct engine_request r = {.prompt = "Hello", .prompt_len = 5, .add_special = true,
				   .max_tokens = 4, .on_done = on_done, .data = gen};
	static int32_t ids[480];
	char err[EMBER_ERR_MAX] = "";
	uint64_t id;
	size_t k;

	for (k = 0; k < 480; k++)
		ids[k] = (int32_t)(3 + k % 900);
	submit(e, ids, 480, NULL, false, emb); /* 30 chunks of 16 */
	ck_assert_msg(engine_submit(e, &r, &id, err) == 0, "%s", err);
	sink_wait(emb);
	sink_wait(gen);
	ck_assert_int_eq(emb->res.finish, ENGINE_FINISH_STOP);
	ck_assert_int_eq(gen->res.finish, ENGINE_FINISH_LENGTH);
	ck_assert_msg(gen->done_order < emb->done_order, "the stream waited for the embedding");
	sink_free(emb);
	sink_free(gen);
	engine_free(e);
}
END_TEST

/* An embedding's chunks are the step's prompt tokens (scheduler.c's
 * budget): alone, 100 tokens at prefill_chunk 16 take 7 steps of at most
 * 16, counted in engine_stats like a prompt's prefill. */
START_TEST(embedding_chunks_count_in_the_step_budget)
{
	struct engine *e = open_engine(128);
	struct vec_sink *s = sink_new();
	struct engine_stats a, b;
	int32_t ids[100];
	size_t k;

	for (k = 0; k < 100; k++)
		ids[k] = (int32_t)(7 + k);
	engine_stats(e, &a);
	submit(e, ids, 100, NULL, false, s);
	sink_wait(s);
	engine_stats(e, &b);
	ck_assert_int_eq(s->res.finish, ENGINE_FINISH_STOP);
	ck_assert_uint_eq(b.prefill_tokens - a.prefill_tokens, 100);
	ck_assert_uint_eq(b.steps - a.steps, 7);
	ck_assert_uint_eq(b.prefill_steps - a.prefill_steps, 7);
	sink_free(s);
	engine_free(e);
}
END_TEST

Suite *suite_embed(void)
{
	Suite *s = suite_create("embed");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, hidden_states_are_the_final_normed_state);
	tcase_add_test(tc, normalized_deterministic_and_text_equals_ids);
	tcase_add_test(tc, two_at_once_equal_each_alone);
	tcase_add_test(tc, too_long_is_refused_or_truncated);
	tcase_add_test(tc, a_long_embedding_does_not_stall_a_stream);
	tcase_add_test(tc, embedding_chunks_count_in_the_step_budget);
	suite_add_tcase(s, tc);
	return s;
}
