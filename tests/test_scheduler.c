/*
 * test_scheduler.c - the engine's step policy (scheduler.c) on the golden
 * llama model: concurrent greedy generations equal sequential ones with
 * every chunk size, a long prompt arriving during decoding costs running
 * streams one chunk per step (asserted on the engine's step counters, not
 * on time), token-id prompts, and n choices sharing one prefill. Waits are
 * bounded only so that a hang fails instead of blocking the suite.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember.h"
#include "engine.h"
#include "kernels.h"
#include "model.h"
#include "tokenizer.h"
#include "testutil.h"

static struct model M;
static struct tokenizer *TOK;

static void setup(void)
{
	test_llama_open(&M, &TOK);
}

static void teardown(void)
{
	test_llama_close(&M, TOK);
}

/* A request's test_sink, with the engine's counters at its first text
 * and at its end when `e` is set. */
struct sink {
	struct test_sink t;        /* first: the callbacks' data */
	struct engine *e;
	struct engine_stats first;
	int first_tokens;          /* tokens behind that first text */
	bool have_first;
	struct engine_stats last;  /* the counters when it ended */
};

/* text_hook: the counters at the first text. */
static void sink_first_cb(struct test_sink *t, int n_tokens)
{
	struct sink *s = (struct sink *)t;

	if (s->e && !s->have_first) {
		engine_stats(s->e, &s->first);
		s->first_tokens = n_tokens;
		s->have_first = true;
	}
}

/* done_hook: the counters at the end. */
static void sink_last_cb(struct test_sink *t)
{
	struct sink *s = (struct sink *)t;

	if (s->e)
		engine_stats(s->e, &s->last);
}

static void sink_init(struct sink *s)
{
	memset(s, 0, sizeof(*s));
	test_sink_init(&s->t);
	s->t.text_hook = sink_first_cb;
	s->t.done_hook = sink_last_cb;
}

static struct engine *engine(uint32_t slots, uint32_t chunk)
{
	struct engine_config c = {.slots = slots, .n_ctx = 512, .kv_f32 = true,
				  .prefill_chunk = chunk};
	char err[EMBER_ERR_MAX] = "";
	struct engine *e = NULL;

	ck_assert_msg(engine_new(&e, &M, TOK, &c, err) == 0, "engine_new: %s", err);
	return e;
}

static void submit_req(struct engine *e, struct engine_request *r)
{
	char err[EMBER_ERR_MAX] = "";
	uint64_t id = 0;

	r->on_text = test_sink_on_text;
	r->on_done = test_sink_on_done;
	ck_assert_msg(engine_submit(e, r, &id, err) == 0, "submit: %s", err);
}

static void submit(struct engine *e, struct sink *s, const char *prompt, int max_tokens)
{
	struct engine_request r = {.prompt = prompt, .prompt_len = strlen(prompt),
				   .add_special = true, .max_tokens = max_tokens, .data = s};

	submit_req(e, &r);
}

/* Prompts of 5 to ~120 tokens, so chunks split them in many ways. */
static const char *const PROMPTS[] = {
	"Once upon a time",
	"The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun "
	"of a quiet afternoon",
	"In a land far away, there lived a king who had three daughters. The first was "
	"wise, the second was brave, and the third was kind. One day the king called them "
	"together and said that he would give his kingdom to the one who loved him most. "
	"The first daughter said she loved him more than gold, the second more than "
	"silver, and the third said she loved him as meat loves salt.",
	"Hello world, this is a test of",
};
#define N_PROMPTS 4

/* ---- tests ---------------------------------------------------------------- */

START_TEST(concurrent_greedy_equals_sequential_with_every_chunk_size)
{
	static const uint32_t chunks[] = {1, 2, 3, 5, 16, 17, 64, 256};
	struct sink alone[N_PROMPTS], together[N_PROMPTS];
	struct engine *e;
	size_t c;
	int i;

	/* The reference: one at a time, nothing else in the step. */
	e = engine(1, 256);
	for (i = 0; i < N_PROMPTS; i++) {
		sink_init(&alone[i]);
		submit(e, &alone[i], PROMPTS[i], 24);
		test_sink_wait(&alone[i].t, 0);
		ck_assert_uint_gt(alone[i].t.len, 0);
	}
	engine_free(e);
	for (c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
		e = engine(4, chunks[c]);
		/* Two at once, the others while those decode. */
		for (i = 0; i < N_PROMPTS; i++) {
			sink_init(&together[i]);
			submit(e, &together[i], PROMPTS[i], 24);
			if (i == 1)
				test_sink_wait(&together[0].t, 0);
		}
		for (i = 0; i < N_PROMPTS; i++) {
			test_sink_wait(&together[i].t, 0);
			ck_assert_msg(strcmp(together[i].t.text, alone[i].t.text) == 0,
				      "chunk %u, prompt %d: '%s' != '%s'", chunks[c], i,
				      together[i].t.text, alone[i].t.text);
			ck_assert_int_eq(together[i].t.res.completion_tokens,
					 alone[i].t.res.completion_tokens);
			ck_assert_int_eq(together[i].t.res.finish, alone[i].t.res.finish);
			test_sink_destroy(&together[i].t);
		}
		engine_free(e);
	}
	for (i = 0; i < N_PROMPTS; i++)
		test_sink_destroy(&alone[i].t);
}
END_TEST

/* Waits until `s` has streamed text (its sequence is decoding). */
static void wait_text(struct sink *s)
{
	struct timespec ts = {0, 1000000};
	int i, n;

	for (i = 0; i < 60000; i++) {
		pthread_mutex_lock(&s->t.lock);
		n = s->t.n_tokens;
		pthread_mutex_unlock(&s->t.lock);
		if (n > 0)
			return;
		nanosleep(&ts, NULL);
	}
	ck_abort_msg("the stream never decoded");
}

/* One round of the test below on a fresh engine: two streams decode, a
 * long prompt arrives. Returns 0 when a running stream ended before the
 * long prompt's first text (a loaded machine can hold this thread back
 * that long): the round showed nothing, the caller runs another. */
static int long_prompt_round(void)
{
	const uint32_t B = 64, chunk2 = B / 3; /* two streams decode: B / (1 + 2) */
	struct sink a, b, l;
	struct engine_stats st0, st1;
	struct engine *e = engine(4, B);
	uint64_t steps, p, n;
	uint32_t k;
	int valid;

	sink_init(&a);
	sink_init(&b);
	sink_init(&l);
	a.e = b.e = e;
	submit(e, &a, PROMPTS[0], 400);
	submit(e, &b, PROMPTS[3], 400);
	wait_text(&a);
	wait_text(&b);
	engine_stats(e, &st0);
	l.e = e;
	submit(e, &l, PROMPTS[2], 4);
	test_sink_wait(&l.t, 0);
	test_sink_wait(&a.t, 0);
	test_sink_wait(&b.t, 0);
	ck_assert(l.have_first);
	ck_assert_int_eq(a.t.res.finish, ENGINE_FINISH_LENGTH);
	ck_assert_int_eq(b.t.res.finish, ENGINE_FINISH_LENGTH);
	valid = a.last.steps >= l.first.steps && b.last.steps >= l.first.steps;
	if (valid) {
		steps = l.first.steps - st0.steps;
		p = (uint64_t)l.t.res.prompt_tokens;
		ck_assert_uint_gt(p, 4 * chunk2);
		/* The two streams were in every step until the long prompt's
		 * first text: they never waited more than that one step's
		 * chunk. (When detok held the first token's text back, the
		 * long prompt's own decode steps until its first text count
		 * too.) */
		ck_assert_uint_eq(l.first.decode_tokens - st0.decode_tokens,
				  2 * steps + (uint64_t)(l.first_tokens - 1));
		/* The prompt went in once, in chunks of the adapted size: its
		 * first token came after ceil(p / chunk) prefill steps. */
		ck_assert_uint_eq(l.first.prefill_tokens - st0.prefill_tokens, p);
		ck_assert_uint_eq(l.first.prefill_steps - st0.prefill_steps,
				  (p + chunk2 - 1) / chunk2);
		ck_assert_uint_eq(l.first.max_chunk, chunk2);
	}
	/* The per-phase account counts every step once: the decode-only ones
	 * by batch size (the two streams together, alone before and after
	 * the long prompt), the others as prefill or mixed. */
	engine_stats(e, &st1);
	for (k = 1, n = 0; k <= ENGINE_STATS_BATCH; k++)
		n += st1.decode_steps[k];
	ck_assert_uint_eq(n, st1.steps - st1.prefill_steps);
	ck_assert_uint_gt(st1.decode_steps[2], 0);
	ck_assert(st1.decode_s > 0 && st1.decode_steps_s[2] > 0);
	ck_assert(st1.emit_s >= 0 && st1.between_s >= 0);
	ck_assert(st1.decode_cpu_s > 0 && st1.decode_steps_cpu_s[2] > 0);
	if (valid)
		ck_assert(st1.mixed_s > 0);
	engine_free(e);
	test_sink_destroy(&a.t);
	test_sink_destroy(&b.t);
	test_sink_destroy(&l.t);
	return valid;
}

/* The assertions hold on a round where both streams were still running
 * at the long prompt's first text; 5 rounds without one fail the test
 * (on a quiet machine the first round is one: 400 tokens take far longer
 * than the prompt's few chunks). */
START_TEST(a_long_prompt_costs_running_streams_one_chunk_per_step)
{
	int round;

	for (round = 0; round < 5; round++)
		if (long_prompt_round())
			return;
	ck_abort_msg("in 5 rounds the running streams always ended before the long prompt's "
		     "first text");
}
END_TEST

START_TEST(a_token_id_prompt_equals_its_text)
{
	struct engine *e = engine(2, 16);
	char err[EMBER_ERR_MAX] = "";
	struct sink text, ids;
	struct engine_request r = {0};
	int32_t *tok = NULL, bad = 1 << 30;
	uint64_t id;
	size_t n = 0;

	ck_assert_int_eq(engine_tokenize(e, PROMPTS[1], strlen(PROMPTS[1]), true, false, &tok,
					 &n, err), 0);
	sink_init(&text);
	sink_init(&ids);
	submit(e, &text, PROMPTS[1], 16);
	test_sink_wait(&text.t, 0);
	r.tokens = tok;
	r.n_tokens = n;
	r.max_tokens = 16;
	r.data = &ids;
	submit_req(e, &r);
	test_sink_wait(&ids.t, 0);
	ck_assert_str_eq(ids.t.text, text.t.text);
	ck_assert_int_eq(ids.t.res.prompt_tokens, (int64_t)n);
	ck_assert_int_eq(ids.t.res.completion_tokens, text.t.res.completion_tokens);
	/* An id outside the vocabulary is refused at submit, named. */
	r.tokens = &bad;
	r.n_tokens = 1;
	ck_assert_int_eq(engine_submit(e, &r, &id, err), EMBER_ERANGE);
	ck_assert_ptr_nonnull(strstr(err, "1073741824"));
	engine_free(e);
	free(tok);
	test_sink_destroy(&text.t);
	test_sink_destroy(&ids.t);
}
END_TEST

START_TEST(n_choices_share_one_prefill_and_sample_with_their_own_seeds)
{
	struct sampler_config sc;
	struct sink alone[3], ch[3];
	void *data[3] = {&ch[0], &ch[1], &ch[2]};
	struct engine_request r = {.prompt = PROMPTS[1], .prompt_len = strlen(PROMPTS[1]),
				   .add_special = true, .max_tokens = 12, .n = 3,
				   .choice_data = data, .sampling = &sc};
	struct engine_stats st;
	struct engine *e;
	int i;

	sampler_config_default(&sc);
	sc.temperature = 1.0f;
	sc.seed = 1234;
	/* Choice i alone: the same request with seed + i. */
	e = engine(4, 8);
	for (i = 0; i < 3; i++) {
		struct sampler_config one = sc;
		struct engine_request r1 = r;

		one.seed = sc.seed + (uint64_t)i;
		r1.n = 1;
		r1.choice_data = NULL;
		r1.sampling = &one;
		r1.data = &alone[i];
		sink_init(&alone[i]);
		submit_req(e, &r1);
		test_sink_wait(&alone[i].t, 0);
	}
	engine_free(e);
	e = engine(4, 8);
	for (i = 0; i < 3; i++)
		sink_init(&ch[i]);
	submit_req(e, &r);
	for (i = 0; i < 3; i++) {
		test_sink_wait(&ch[i].t, 0);
		ck_assert_int_eq(ch[i].t.n_done, 1);
		ck_assert_str_eq(ch[i].t.text, alone[i].t.text);
		ck_assert_int_eq(ch[i].t.res.completion_tokens, alone[i].t.res.completion_tokens);
		ck_assert_int_eq(ch[i].t.res.prompt_tokens, alone[i].t.res.prompt_tokens);
	}
	/* The prompt was prefilled once for the three (with chunks of 8). */
	engine_stats(e, &st);
	ck_assert_uint_eq(st.prefill_tokens, (uint64_t)alone[0].t.res.prompt_tokens);
	engine_free(e);
	for (i = 0; i < 3; i++) {
		test_sink_destroy(&alone[i].t);
		test_sink_destroy(&ch[i].t);
	}
}
END_TEST

START_TEST(n_choices_are_refused_beyond_the_slots_and_end_together_on_cancel)
{
	struct engine *e = engine(2, 16);
	char err[EMBER_ERR_MAX] = "";
	struct sink s[2], c[2];
	void *data[2] = {&c[0], &c[1]};
	struct engine_request r = {.prompt = "Hi", .prompt_len = 2, .max_tokens = 4, .n = 3};
	uint64_t id;

	ck_assert_int_eq(engine_submit(e, &r, &id, err), EMBER_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "n = 3"));
	r.n = 2;
	r.max_tokens = 0;
	ck_assert_int_eq(engine_submit(e, &r, &id, err), EMBER_EINVAL);
	/* Queued behind two running requests, then cancelled: both choices
	 * report once. */
	sink_init(&s[0]);
	sink_init(&s[1]);
	sink_init(&c[0]);
	sink_init(&c[1]);
	submit(e, &s[0], PROMPTS[0], 100);
	submit(e, &s[1], PROMPTS[3], 100);
	r.max_tokens = 4;
	r.choice_data = data;
	r.on_text = test_sink_on_text;
	r.on_done = test_sink_on_done;
	ck_assert_int_eq(engine_submit(e, &r, &id, err), 0);
	engine_cancel(e, id);
	test_sink_wait(&c[0].t, 0);
	test_sink_wait(&c[1].t, 0);
	ck_assert_int_eq(c[0].t.res.finish, ENGINE_FINISH_CANCELLED);
	ck_assert_int_eq(c[1].t.res.finish, ENGINE_FINISH_CANCELLED);
	test_sink_wait(&s[0].t, 0);
	test_sink_wait(&s[1].t, 0);
	engine_free(e);
	ck_assert_int_eq(c[0].t.n_done, 1);
	ck_assert_int_eq(c[1].t.n_done, 1);
	test_sink_destroy(&s[0].t);
	test_sink_destroy(&s[1].t);
	test_sink_destroy(&c[0].t);
	test_sink_destroy(&c[1].t);
}
END_TEST

/* 12 requests on 2 slots: the queue holds the rest, nothing is lost, and
 * no request gets its first text in an earlier step than one that came
 * before it. */
START_TEST(queued_requests_start_in_arrival_order)
{
	struct engine *e = engine(2, 16);
	struct sink s[12];
	int i;

	for (i = 0; i < 12; i++) {
		sink_init(&s[i]);
		s[i].e = e;
		submit(e, &s[i], PROMPTS[i % N_PROMPTS], 6);
	}
	for (i = 0; i < 12; i++) {
		test_sink_wait(&s[i].t, 0);
		ck_assert(s[i].t.res.finish == ENGINE_FINISH_LENGTH ||
			  s[i].t.res.finish == ENGINE_FINISH_STOP);
		ck_assert(s[i].have_first);
		if (i > 0)
			ck_assert_uint_le(s[i - 1].first.steps, s[i].first.steps);
	}
	engine_free(e);
	for (i = 0; i < 12; i++)
		test_sink_destroy(&s[i].t);
}
END_TEST

Suite *suite_scheduler(void)
{
	Suite *s = suite_create("scheduler");
	TCase *tc = tcase_create("scheduler");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, concurrent_greedy_equals_sequential_with_every_chunk_size);
	tcase_add_test(tc, a_long_prompt_costs_running_streams_one_chunk_per_step);
	tcase_add_test(tc, a_token_id_prompt_equals_its_text);
	tcase_add_test(tc, n_choices_share_one_prefill_and_sample_with_their_own_seeds);
	tcase_add_test(tc, n_choices_are_refused_beyond_the_slots_and_end_together_on_cancel);
	tcase_add_test(tc, queued_requests_start_in_arrival_order);
	suite_add_tcase(s, tc);
	return s;
}
