/*
 * test_engine.c - the engine (engine.h) on the golden llama model, which
 * is tiny and has a real SentencePiece vocabulary: streaming, greedy
 * equality with a plain forward_eval loop, batching, cancellation, the
 * bounded queue, context overflow, prefix reuse, eviction, sessions and
 * shutdown with requests in flight. No timing assertions: waits are
 * bounded only so that a hang fails instead of blocking the suite.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "detok.h"
#include "dtype.h"
#include "ember.h"
#include "engine.h"
#include "forward.h"
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

/* A request's test_sink, with an optional cancel from on_text. */
struct sink {
	struct test_sink t; /* first: the callbacks' data */
	struct engine *cancel_engine;
	uint64_t cancel_id;
	int cancel_after;   /* tokens */
};

/* text_hook: cancels the request once it has streamed cancel_after
 * tokens, from inside on_text (a cancel racing the worker). */
static void sink_cancel_cb(struct test_sink *t, int n_tokens)
{
	struct sink *s = (struct sink *)t;

	(void)n_tokens;
	if (s->cancel_engine && t->n_tokens >= s->cancel_after) {
		engine_cancel(s->cancel_engine, s->cancel_id);
		s->cancel_engine = NULL;
	}
}

static void sink_init(struct sink *s)
{
	memset(s, 0, sizeof(*s));
	test_sink_init(&s->t);
	s->t.text_hook = sink_cancel_cb;
}

static struct engine *engine(uint32_t slots, uint32_t n_ctx, uint32_t kv_mb, uint32_t queue)
{
	struct engine_config c = {.slots = slots, .n_ctx = n_ctx, .kv_cache_mb = kv_mb,
				  .queue_max = queue, .kv_f32 = true, .prefill_chunk = 16};
	char err[EMBER_ERR_MAX] = "";
	struct engine *e = NULL;

	ck_assert_msg(engine_new(&e, &M, TOK, &c, err) == 0, "engine_new: %s", err);
	return e;
}

static uint64_t submit(struct engine *e, struct sink *s, const char *prompt, int max_tokens,
		       uint64_t session)
{
	struct engine_request r = {.prompt = prompt, .prompt_len = strlen(prompt),
				   .add_special = true, .max_tokens = max_tokens,
				   .session = session, .on_text = test_sink_on_text,
				   .on_done = test_sink_on_done, .data = s};
	char err[EMBER_ERR_MAX] = "";
	uint64_t id = 0;

	ck_assert_msg(engine_submit(e, &r, &id, err) == 0, "submit: %s", err);
	ck_assert_uint_ne(id, 0);
	return id;
}

/* One prompt through a fresh engine: the text and result. */
static void run_alone(const char *prompt, int max_tokens, struct sink *s)
{
	struct engine *e = engine(1, 256, 0, 0);

	sink_init(s);
	submit(e, s, prompt, max_tokens, 0);
	test_sink_wait(&s->t, 0);
	engine_free(e);
}

static const char *const PROMPTS[] = {
	"Once upon a time", "The quick brown fox", "In a land far away, there lived",
	"Hello world, this is a test of",
};

/* ---- tests ---------------------------------------------------------------- */

START_TEST(engine_streams_text_then_reports_done_once)
{
	struct sink s;

	run_alone(PROMPTS[0], 12, &s);
	ck_assert_int_eq(s.t.n_done, 1);
	ck_assert(s.t.res.finish == ENGINE_FINISH_LENGTH || s.t.res.finish == ENGINE_FINISH_STOP);
	ck_assert_int_gt(s.t.res.completion_tokens, 0);
	ck_assert_int_le(s.t.res.completion_tokens, 12);
	ck_assert_int_gt(s.t.res.prompt_tokens, 1);
	ck_assert_int_eq(s.t.res.cached_tokens, 0);
	ck_assert(s.t.res.ttft_ms >= 0.0);
	ck_assert_int_gt(s.t.n_text_calls, 0);
	ck_assert_int_le(s.t.n_tokens, s.t.res.completion_tokens);
	test_sink_destroy(&s.t);
}
END_TEST

/* The reference: forward_eval + argmax + detok, token by token. */
static size_t reference_greedy(const char *prompt, int max_tokens, char *out, size_t cap)
{
	char err[EMBER_ERR_MAX] = "", piece[256], buf[DETOK_OUT_MAX(256)];
	struct forward_opts o = {.n_ctx = 256};
	struct forward_ctx *f = NULL;
	float *logits = malloc(M.hp.n_vocab * sizeof(float));
	int32_t ids[256];
	struct detok d;
	size_t len = 0, n_out;
	int64_t n = tokenizer_encode(TOK, prompt, strlen(prompt), 1, 0, ids, 256);
	int i;

	ck_assert(n > 0 && n < 256);
	ck_assert_int_eq(detok_init(&d, NULL, 0, err), 0);
	ck_assert_int_eq(forward_new(&f, &M, &o, err), 0);
	ck_assert_int_eq(forward_eval(f, ids, (size_t)n, logits, 0, err), 0);
	for (i = 0; i < max_tokens; i++) {
		int32_t best = 0, v;
		int np;

		for (v = 1; v < (int32_t)M.hp.n_vocab; v++)
			if (logits[v] > logits[best])
				best = v;
		if (tokenizer_is_eog(TOK, best))
			break;
		np = tokenizer_piece(TOK, best, 0, piece, sizeof(piece));
		ck_assert(np >= 0 && np < (int)sizeof(piece));
		detok_push(&d, piece, (size_t)np, buf, sizeof(buf), &n_out);
		ck_assert(len + n_out < cap);
		memcpy(out + len, buf, n_out);
		len += n_out;
		ck_assert_int_eq(forward_eval(f, &best, 1, logits, 0, err), 0);
	}
	detok_flush(&d, buf, sizeof(buf), &n_out);
	memcpy(out + len, buf, n_out);
	len += n_out;
	out[len] = '\0';
	forward_free(f);
	free(logits);
	return len;
}

START_TEST(greedy_output_equals_a_plain_forward_loop)
{
	char want[TEST_SINK_TEXT_MAX];
	struct sink s;
	size_t i;

	for (i = 0; i < 2; i++) {
		reference_greedy(PROMPTS[i], 20, want, sizeof(want));
		run_alone(PROMPTS[i], 20, &s);
		ck_assert_str_eq(s.t.text, want);
		test_sink_destroy(&s.t);
	}
}
END_TEST

START_TEST(batched_sequences_give_the_tokens_each_gives_alone)
{
	struct sink alone[4], together[4];
	struct engine *e = engine(4, 256, 0, 0);
	int i;

	for (i = 0; i < 4; i++) {
		run_alone(PROMPTS[i], 24, &alone[i]);
		sink_init(&together[i]);
		submit(e, &together[i], PROMPTS[i], 24, 0);
	}
	for (i = 0; i < 4; i++) {
		test_sink_wait(&together[i].t, 0);
		ck_assert_uint_gt(alone[i].t.len, 0);
		ck_assert_int_eq(together[i].t.res.finish, alone[i].t.res.finish);
		ck_assert_str_eq(together[i].t.text, alone[i].t.text);
		ck_assert_int_eq(together[i].t.res.completion_tokens,
				 alone[i].t.res.completion_tokens);
		test_sink_destroy(&alone[i].t);
		test_sink_destroy(&together[i].t);
	}
	engine_free(e);
}
END_TEST

START_TEST(cancel_mid_batch_frees_the_slot_and_spares_the_others)
{
	struct sink alone[3], s[3];
	struct engine *e = engine(3, 256, 0, 0);
	struct engine_stats st;
	int i;

	for (i = 0; i < 3; i++) {
		run_alone(PROMPTS[i], 40, &alone[i]);
		sink_init(&s[i]);
	}
	s[1].cancel_engine = e;
	s[1].cancel_after = 3;
	s[1].t.block = 1; /* until its id is known */
	for (i = 0; i < 3; i++) {
		uint64_t id = submit(e, &s[i], PROMPTS[i], 40, 0);

		if (i == 1) {
			pthread_mutex_lock(&s[1].t.lock);
			s[1].cancel_id = id;
			pthread_mutex_unlock(&s[1].t.lock);
			test_sink_unblock(&s[1].t);
		}
	}
	for (i = 0; i < 3; i++)
		test_sink_wait(&s[i].t, 0);
	ck_assert_int_eq(s[1].t.res.finish, ENGINE_FINISH_CANCELLED);
	ck_assert_int_lt(s[1].t.res.completion_tokens, 40);
	for (i = 0; i < 3; i += 2)
		ck_assert_str_eq(s[i].t.text, alone[i].t.text);
	engine_stats(e, &st);
	ck_assert_uint_eq(st.slots_busy, 0);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(s[i].t.n_done, 1);
		test_sink_destroy(&alone[i].t);
		test_sink_destroy(&s[i].t);
	}
	engine_free(e);
}
END_TEST

START_TEST(a_full_queue_answers_efull)
{
	struct engine *e = engine(1, 256, 0, 2);
	struct engine_request r = {.prompt = "x", .prompt_len = 1, .max_tokens = 2};
	char err[EMBER_ERR_MAX] = "";
	struct sink s[3];
	struct engine_stats st;
	uint64_t id;
	int i;

	for (i = 0; i < 3; i++)
		sink_init(&s[i]);
	s[0].t.block = 1;
	submit(e, &s[0], PROMPTS[0], 8, 0);
	/* Wait until the worker has taken it (it then blocks in on_text). */
	for (;;) {
		engine_stats(e, &st);
		if (st.queue_depth == 0 && st.slots_busy == 1)
			break;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	submit(e, &s[1], PROMPTS[1], 2, 0);
	submit(e, &s[2], PROMPTS[2], 2, 0);
	ck_assert_int_eq(engine_submit(e, &r, &id, err), EMBER_EFULL);
	engine_stats(e, &st);
	ck_assert_uint_eq(st.queue_depth, 2);
	test_sink_unblock(&s[0].t);
	for (i = 0; i < 3; i++) {
		test_sink_wait(&s[i].t, 0);
		ck_assert_int_ne(s[i].t.res.finish, ENGINE_FINISH_ERROR);
		test_sink_destroy(&s[i].t);
	}
	engine_free(e);
}
END_TEST

START_TEST(context_overflow_is_reported_with_the_numbers)
{
	struct engine *e = engine(1, 16, 0, 0);
	struct sink s;

	sink_init(&s);
	submit(e, &s, "This prompt is much longer than sixteen tokens of context, surely, "
		      "because it goes on and on and on for a while.", 4, 0);
	test_sink_wait(&s.t, 0);
	ck_assert_int_eq(s.t.res.finish, ENGINE_FINISH_ERROR);
	ck_assert_int_eq(s.t.res.code, EMBER_ECONTEXT);
	ck_assert_int_gt(s.t.res.prompt_tokens, 16);
	ck_assert_uint_eq(s.t.res.n_ctx, 16);
	ck_assert_int_eq(s.t.n_text_calls, 0);
	ck_assert_ptr_nonnull(strstr(s.t.res.message, "16"));
	test_sink_destroy(&s.t);
	engine_free(e);
}
END_TEST

START_TEST(prefix_reuse_matches_a_cold_run_with_fewer_prefilled_tokens)
{
	const char *longer = "Once upon a time there was a small dragon who";
	struct engine *e = engine(2, 256, 0, 0);
	struct sink first, warm, cold;

	sink_init(&first);
	submit(e, &first, longer, 6, 0);
	test_sink_wait(&first.t, 0);
	ck_assert_int_eq(first.t.res.cached_tokens, 0);
	ck_assert_uint_gt(first.t.len, 0);
	/* The same prompt again: all but the last token come from the cache. */
	sink_init(&warm);
	submit(e, &warm, longer, 6, 0);
	test_sink_wait(&warm.t, 0);
	ck_assert_int_eq(warm.t.res.cached_tokens, warm.t.res.prompt_tokens - 1);
	ck_assert_str_eq(warm.t.text, first.t.text);
	test_sink_destroy(&warm.t);
	/* A longer prompt sharing the start. */
	sink_init(&warm);
	submit(e, &warm, "Once upon a time there was a small dragon who lived", 8, 0);
	test_sink_wait(&warm.t, 0);
	ck_assert_int_gt(warm.t.res.cached_tokens, 0);
	run_alone("Once upon a time there was a small dragon who lived", 8, &cold);
	ck_assert_int_eq(cold.t.res.cached_tokens, 0);
	ck_assert_str_eq(warm.t.text, cold.t.text);
	test_sink_destroy(&first.t);
	test_sink_destroy(&warm.t);
	test_sink_destroy(&cold.t);
	engine_free(e);
}
END_TEST

START_TEST(a_tiny_budget_evicts_the_least_recently_used_cache)
{
	/* F16: 2 layers x 2 kv heads x (32 + 32) x 2 bytes = 512 bytes per
	 * position, so 1 MiB holds two caches of 1024 positions. */
	struct engine_config c = {.slots = 1, .n_ctx = 1024, .kv_cache_mb = 1};
	char err[EMBER_ERR_MAX] = "";
	struct engine *e = NULL;
	struct engine_stats st;
	struct sink s;
	const char *p[3] = {"Alpha beta gamma delta", "Seven silver swans swam",
			    "Zebras zigzag quietly"};
	int i;

	ck_assert_msg(engine_new(&e, &M, TOK, &c, err) == 0, "%s", err);
	for (i = 0; i < 3; i++) {
		sink_init(&s);
		submit(e, &s, p[i], 2, 0);
		test_sink_wait(&s.t, 0);
		test_sink_destroy(&s.t);
	}
	engine_stats(e, &st);
	ck_assert_uint_le(st.kv_bytes, 1u << 20);
	ck_assert_uint_eq(st.kv_cached, 2);
	/* The second prompt is still cached; the first was evicted. */
	sink_init(&s);
	submit(e, &s, p[1], 2, 0);
	test_sink_wait(&s.t, 0);
	ck_assert_int_gt(s.t.res.cached_tokens, 1);
	test_sink_destroy(&s.t);
	sink_init(&s);
	submit(e, &s, p[0], 2, 0);
	test_sink_wait(&s.t, 0);
	ck_assert_int_le(s.t.res.cached_tokens, 1);
	test_sink_destroy(&s.t);
	engine_free(e);
	/* A budget below one context is refused. */
	c.n_ctx = 4096;
	c.kv_f32 = true;
	ck_assert_int_eq(engine_new(&e, &M, TOK, &c, err), EMBER_EINVAL);
}
END_TEST

START_TEST(a_session_keeps_its_cache_and_a_clone_diverges)
{
	struct engine *e = engine(2, 512, 0, 0);
	struct engine_session_opts o = {.system = "You are a storyteller.", .system_len = 22,
					.add_special = true};
	struct engine_session_info pi, ci;
	char err[EMBER_ERR_MAX] = "";
	uint64_t sid, cid;
	struct sink a, b, c, d;

	ck_assert_msg(engine_session_new(e, &o, &sid, err) == 0, "%s", err);
	sink_init(&a);
	submit(e, &a, " Tell me about the sea.", 6, sid);
	test_sink_wait(&a.t, 0);
	ck_assert_int_ne(a.t.res.finish, ENGINE_FINISH_ERROR);
	/* The system text was prefilled before: this turn reused it. */
	ck_assert_int_gt(a.t.res.cached_tokens, 0);
	ck_assert_int_eq(engine_session_info(e, sid, &pi), 0);
	ck_assert_uint_gt(pi.n_tokens, (uint32_t)a.t.res.prompt_tokens);
	ck_assert_uint_eq(pi.n_left, 512 - pi.n_tokens);

	ck_assert_msg(engine_session_clone(e, sid, &cid, err) == 0, "%s", err);
	ck_assert_int_eq(engine_session_info(e, cid, &ci), 0);
	ck_assert_uint_eq(ci.n_tokens, pi.n_tokens);
	/* The same turn into both gives the same text; the clone's cache
	 * came from the parent's. */
	sink_init(&b);
	submit(e, &b, " And the mountains?", 6, cid);
	test_sink_wait(&b.t, 0);
	ck_assert_int_ge(b.t.res.cached_tokens, pi.n_tokens - 1);
	sink_init(&c);
	submit(e, &c, " And the mountains?", 6, sid);
	test_sink_wait(&c.t, 0);
	ck_assert_str_eq(b.t.text, c.t.text);
	/* Diverging: another turn into the clone only. */
	sink_init(&d);
	submit(e, &d, " Now rivers.", 4, cid);
	test_sink_wait(&d.t, 0);
	ck_assert_int_eq(engine_session_info(e, sid, &pi), 0);
	ck_assert_int_eq(engine_session_info(e, cid, &ci), 0);
	ck_assert_uint_gt(ci.n_tokens, pi.n_tokens);
	ck_assert_int_eq(engine_session_delete(e, cid), 0);
	ck_assert_int_eq(engine_session_info(e, cid, &ci), EMBER_ENOTFOUND);
	ck_assert_int_eq(engine_session_delete(e, cid), EMBER_ENOTFOUND);
	test_sink_destroy(&a.t);
	test_sink_destroy(&b.t);
	test_sink_destroy(&c.t);
	test_sink_destroy(&d.t);
	engine_free(e);
}
END_TEST

START_TEST(session_count_and_idle_limits_hold)
{
	struct engine_config c = {.slots = 1, .n_ctx = 128, .kv_f32 = true, .max_sessions = 2,
				  .session_idle_s = 1};
	struct engine_session_opts o = {.add_special = true};
	struct engine_session_info info;
	char err[EMBER_ERR_MAX] = "";
	struct engine *e = NULL;
	uint64_t a, b, x;
	struct timespec nap = {1, 300000000};

	ck_assert_msg(engine_new(&e, &M, TOK, &c, err) == 0, "%s", err);
	ck_assert_int_eq(engine_session_new(e, &o, &a, err), 0);
	ck_assert_int_eq(engine_session_new(e, &o, &b, err), 0);
	ck_assert_int_eq(engine_session_new(e, &o, &x, err), EMBER_EFULL);
	ck_assert_ptr_nonnull(strstr(err, "sessions"));
	/* Unused past session_idle_s: the next allocation retires both. */
	nanosleep(&nap, NULL);
	ck_assert_int_eq(engine_session_new(e, &o, &x, err), 0);
	ck_assert_int_eq(engine_session_info(e, a, &info), EMBER_ENOTFOUND);
	ck_assert_int_eq(engine_session_info(e, b, &info), EMBER_ENOTFOUND);
	ck_assert_int_eq(engine_session_info(e, x, &info), 0);
	engine_free(e);
}
END_TEST

START_TEST(two_workers_give_the_tokens_one_gives)
{
	struct engine_config c = {.workers = 2, .slots = 2, .n_ctx = 256, .kv_f32 = true,
				  .prefill_chunk = 16};
	struct sink alone[4], both[4];
	char err[EMBER_ERR_MAX] = "";
	struct engine *e = NULL;
	size_t i;

	for (i = 0; i < 4; i++)
		run_alone(PROMPTS[i], 8, &alone[i]);
	ck_assert_msg(engine_new(&e, &M, TOK, &c, err) == 0, "%s", err);
	for (i = 0; i < 4; i++) {
		sink_init(&both[i]);
		submit(e, &both[i], PROMPTS[i], 8, 0);
	}
	for (i = 0; i < 4; i++) {
		test_sink_wait(&both[i].t, 0);
		ck_assert_str_eq(both[i].t.text, alone[i].t.text);
		ck_assert_int_eq(both[i].t.n_done, 1);
		test_sink_destroy(&both[i].t);
		test_sink_destroy(&alone[i].t);
	}
	engine_free(e);
}
END_TEST

START_TEST(engine_free_with_requests_in_flight_reports_each_once)
{
	struct engine *e = engine(2, 256, 0, 16);
	struct sink s[6];
	uint64_t sid;
	int i;

	ck_assert_int_eq(engine_session_new(e, NULL, &sid, NULL), 0);
	for (i = 0; i < 6; i++) {
		sink_init(&s[i]);
		submit(e, &s[i], PROMPTS[i % 4], 200, i == 5 ? sid : 0);
	}
	engine_free(e);
	for (i = 0; i < 6; i++) {
		ck_assert_int_eq(s[i].t.n_done, 1);
		test_sink_destroy(&s[i].t);
	}
}
END_TEST

/* The drain timeout's cancel: running and queued requests all end with
 * ENGINE_FINISH_CANCELLED, once each, and the engine serves afterwards. */
START_TEST(cancel_all_ends_running_and_queued_requests)
{
	struct engine *e = engine(2, 256, 0, 16);
	struct sink s[5], after;
	int i;

	for (i = 0; i < 5; i++) {
		sink_init(&s[i]);
		s[i].t.block = i == 0; /* holds the worker inside on_text */
		submit(e, &s[i], PROMPTS[i % 4], 200, 0);
	}
	engine_cancel_all(e);
	test_sink_unblock(&s[0].t);
	for (i = 0; i < 5; i++) {
		test_sink_wait(&s[i].t, 0);
		ck_assert_int_eq(s[i].t.n_done, 1);
		ck_assert_int_eq(s[i].t.res.finish, ENGINE_FINISH_CANCELLED);
	}
	sink_init(&after);
	submit(e, &after, PROMPTS[0], 4, 0);
	test_sink_wait(&after.t, 0);
	ck_assert_int_ne(after.t.res.finish, ENGINE_FINISH_CANCELLED);
	engine_free(e);
	for (i = 0; i < 5; i++)
		test_sink_destroy(&s[i].t);
	test_sink_destroy(&after.t);
}
END_TEST

Suite *suite_engine(void)
{
	Suite *s = suite_create("engine");
	TCase *tc = tcase_create("engine");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, engine_streams_text_then_reports_done_once);
	tcase_add_test(tc, greedy_output_equals_a_plain_forward_loop);
	tcase_add_test(tc, batched_sequences_give_the_tokens_each_gives_alone);
	tcase_add_test(tc, cancel_mid_batch_frees_the_slot_and_spares_the_others);
	tcase_add_test(tc, a_full_queue_answers_efull);
	tcase_add_test(tc, context_overflow_is_reported_with_the_numbers);
	tcase_add_test(tc, prefix_reuse_matches_a_cold_run_with_fewer_prefilled_tokens);
	tcase_add_test(tc, a_tiny_budget_evicts_the_least_recently_used_cache);
	tcase_add_test(tc, a_session_keeps_its_cache_and_a_clone_diverges);
	tcase_add_test(tc, session_count_and_idle_limits_hold);
	tcase_add_test(tc, two_workers_give_the_tokens_one_gives);
	tcase_add_test(tc, engine_free_with_requests_in_flight_reports_each_once);
	tcase_add_test(tc, cancel_all_ends_running_and_queued_requests);
	suite_add_tcase(s, tc);
	return s;
}
