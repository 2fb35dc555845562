/*
 * test_engine_api.c - the engine as a front end sees it (engine.h):
 * engine_open owning what it loads, tokenize / detokenize / render, chat
 * messages rendered by the engine with the template's stop texts, a long
 * prompt tokenized without stalling a running stream, and a session's BOS
 * decided by what the session holds when the request runs. Golden llama
 * model; waits are bounded only so that a hang fails.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember.h"
#include "engine.h"
#include "testutil.h"

#define GOLDEN TEST_GOLDEN_LLAMA

/* A request's test_sink, with the order in which the requests ended. */
struct sink {
	struct test_sink t;        /* first: the callbacks' data */
	int done_order;            /* 1 + the done calls before this one */
};

static atomic_int DONE_COUNT;

/* done_hook: this request's place among the ends. */
static void sink_order_cb(struct test_sink *t)
{
	struct sink *s = (struct sink *)t;

	s->done_order = atomic_fetch_add(&DONE_COUNT, 1) + 1;
}

static void sink_init(struct sink *s)
{
	memset(s, 0, sizeof(*s));
	test_sink_init(&s->t);
	s->t.done_hook = sink_order_cb;
}

static struct engine *open_engine(uint32_t slots, uint32_t n_ctx)
{
	struct engine_config c = {.slots = slots, .n_ctx = n_ctx, .kv_f32 = true,
				  .prefill_chunk = 16};
	char err[EMBER_ERR_MAX] = "";
	struct engine *e = NULL;

	ck_assert_msg(engine_open(&e, GOLDEN, &c, err) == 0, "engine_open: %s", err);
	return e;
}

static void submit(struct engine *e, struct engine_request *r, struct sink *s)
{
	char err[EMBER_ERR_MAX] = "";
	uint64_t id = 0;

	r->on_text = test_sink_on_text;
	r->on_done = test_sink_on_done;
	r->data = s;
	ck_assert_msg(engine_submit(e, r, &id, err) == 0, "submit: %s", err);
}

/* Requests a and b submitted together (a first) into fresh sinks, and
 * both waited for; release the sinks with test_sink_destroy(). */
static void run_pair(struct engine *e, struct engine_request *a, struct sink *sa,
		     struct engine_request *b, struct sink *sb)
{
	sink_init(sa);
	sink_init(sb);
	submit(e, a, sa);
	submit(e, b, sb);
	test_sink_wait(&sa->t, 0);
	test_sink_wait(&sb->t, 0);
}

/* Request a (messages) and the same request given their rendering
 * `prompt` instead, run together: a ends well, both with the same prompt
 * tokens (returned), a's text a prefix of b's (b has no stop strings: a's
 * may only have cut it shorter). */
static int messages_vs_prompt(struct engine *e, const struct engine_request *a,
			      const char *prompt, size_t len)
{
	struct engine_request ra = *a, rb = *a;
	struct sink sa, sb;
	int n;

	rb.messages = NULL;
	rb.n_messages = 0;
	rb.prompt = prompt;
	rb.prompt_len = len;
	run_pair(e, &ra, &sa, &rb, &sb);
	ck_assert_int_ne(sa.t.res.finish, ENGINE_FINISH_ERROR);
	ck_assert_int_eq(sa.t.res.prompt_tokens, sb.t.res.prompt_tokens);
	ck_assert_int_eq(strncmp(sa.t.text, sb.t.text, sa.t.len), 0);
	n = (int)sa.t.res.prompt_tokens;
	test_sink_destroy(&sa.t);
	test_sink_destroy(&sb.t);
	return n;
}

START_TEST(tokenize_and_detokenize_round_trip)
{
	struct engine *e = open_engine(1, 128);
	char err[EMBER_ERR_MAX] = "", *text = NULL;
	int32_t *ids = NULL, bad = 1 << 30;
	size_t n = 0, len = 0;

	ck_assert_int_eq(engine_tokenize(e, "Hello world", 11, true, false, &ids, &n, err), 0);
	ck_assert_uint_ge(n, 2);
	ck_assert_int_eq(engine_detokenize(e, ids, n, &text, &len, err), 0);
	ck_assert_ptr_nonnull(strstr(text, "Hello world"));
	ck_assert_uint_eq(strlen(text), len);
	free(text);
	free(ids);
	ck_assert_int_eq(engine_detokenize(e, &bad, 1, &text, &len, err), EMBER_ERANGE);
	ck_assert_ptr_null(text);
	ck_assert_str_ne(engine_chat_template(e), "?");
	engine_free(e);
}
END_TEST

START_TEST(messages_give_what_their_rendered_prompt_gives)
{
	const struct engine_message msgs[] = {{.role = "system", .content = "Be brief."}, {.role = "user", .content = "Name a color."}};
	struct engine *e = open_engine(2, 256);
	char err[EMBER_ERR_MAX] = "", *prompt = NULL;
	const struct engine_request a = {.messages = msgs, .n_messages = 2, .add_special = true,
					 .parse_special = true, .max_tokens = 12};
	size_t len = 0;

	ck_assert_int_eq(engine_render(e, msgs, 2, NULL, &prompt, &len, err), 0);
	ck_assert_ptr_nonnull(strstr(prompt, "Name a color."));
	messages_vs_prompt(e, &a, prompt, len);
	free(prompt);
	engine_free(e);
}
END_TEST

/* "\u0000" is an ordinary character of a message's content: it is
 * rendered in place, and the messages give the same prompt tokens as the
 * completion prompt that is their rendering (NUL included), which tokenizes
 * to more ids than the same text without the NUL. */
START_TEST(a_nul_in_content_is_an_ordinary_character)
{
	const struct engine_message msgs[] = {{.role = "user", .content = "Name a\0 color.", .content_len = 14}};
	struct engine *e = open_engine(2, 256);
	char err[EMBER_ERR_MAX] = "", *prompt = NULL, *hit, *bare = NULL;
	const struct engine_request a = {.messages = msgs, .n_messages = 1, .add_special = true,
					 .parse_special = true, .max_tokens = 4};
	int32_t *ids = NULL, *ids2 = NULL;
	size_t len = 0, n = 0, n2 = 0;

	ck_assert_int_eq(engine_render(e, msgs, 1, NULL, &prompt, &len, err), 0);
	hit = memmem(prompt, len, "Name a\0 color.", 14);
	ck_assert_ptr_nonnull(hit);
	ck_assert_int_eq(engine_tokenize(e, prompt, len, true, true, &ids, &n, err), 0);
	/* the same text with the NUL dropped */
	ck_assert_ptr_nonnull(bare = malloc(len));
	memcpy(bare, prompt, (size_t)(hit - prompt) + 6);
	memcpy(bare + (hit - prompt) + 6, hit + 7, len - (size_t)(hit - prompt) - 7);
	ck_assert_int_eq(engine_tokenize(e, bare, len - 1, true, true, &ids2, &n2, err), 0);
	ck_assert_uint_gt(n, n2);
	ck_assert_int_eq(messages_vs_prompt(e, &a, prompt, len), (int)n);
	free(ids);
	free(ids2);
	free(bare);
	free(prompt);
	engine_free(e);
}
END_TEST

START_TEST(bad_messages_are_refused_on_submit)
{
	const struct engine_message msgs[] = {{.role = "user", .content = NULL}};
	struct engine *e = open_engine(1, 128);
	struct engine_request r = {.messages = msgs, .n_messages = 1, .max_tokens = 4};
	char err[EMBER_ERR_MAX] = "";
	uint64_t id;

	ck_assert_int_eq(engine_submit(e, &r, &id, err), EMBER_EINVAL);
	r.messages = (const struct engine_message[]){{.role = "user", .content = "hi"}};
	r.prompt = "hi";
	r.prompt_len = 2;
	ck_assert_int_eq(engine_submit(e, &r, &id, err), EMBER_EINVAL);
	engine_free(e);
}
END_TEST

/*
 * A stream is paused in its callback; a prompt of 96 KiB is submitted
 * (tokenizing it takes far longer than the stream's remaining steps) and
 * the stream released. Had the worker tokenized it between steps, the
 * long request (which does not fit the context) would end first.
 */
START_TEST(a_long_prompt_does_not_stall_a_running_stream)
{
	struct engine *e = open_engine(2, 256);
	struct engine_request a = {.prompt = "Once upon a time", .prompt_len = 16,
				   .add_special = true, .max_tokens = 24};
	struct engine_request b = {.add_special = true, .max_tokens = 4};
	size_t n = 96 << 10, i;
	char *big = malloc(n);
	struct sink sa, sb;

	ck_assert_ptr_nonnull(big);
	for (i = 0; i < n; i++)
		big[i] = "hello world "[i % 12];
	b.prompt = big;
	b.prompt_len = n;
	sink_init(&sa);
	sink_init(&sb);
	sa.t.block = 1;
	submit(e, &a, &sa);
	test_sink_wait(&sa.t, 1);
	submit(e, &b, &sb);
	test_sink_unblock(&sa.t);
	test_sink_wait(&sa.t, 0);
	test_sink_wait(&sb.t, 0);
	ck_assert_int_eq(sb.t.res.code, EMBER_ECONTEXT);
	ck_assert_int_lt(sa.done_order, sb.done_order);
	free(big);
	test_sink_destroy(&sa.t);
	test_sink_destroy(&sb.t);
	engine_free(e);
}
END_TEST

/* The first request into an empty session fails (too long), so the second,
 * prepared while the first was pending, still opens the session: with BOS. */
START_TEST(a_session_gets_bos_from_the_request_that_opens_it)
{
	struct engine *e = open_engine(1, 64);
	struct engine_session_opts o = {.add_special = true};
	char err[EMBER_ERR_MAX] = "", big[2048];
	struct engine_request r1 = {.add_special = true, .max_tokens = 2};
	struct engine_request r2 = {.prompt = "The quick brown fox", .prompt_len = 19,
				    .add_special = true, .max_tokens = 2};
	int32_t *ids = NULL;
	size_t n = 0, i;
	uint64_t sid;
	struct sink s1, s2;

	for (i = 0; i + 1 < sizeof(big); i++)
		big[i] = "one two "[i % 8];
	big[sizeof(big) - 1] = '\0';
	r1.prompt = big;
	r1.prompt_len = strlen(big);
	ck_assert_int_eq(engine_tokenize(e, r2.prompt, r2.prompt_len, true, false, &ids, &n, err),
			 0);
	ck_assert_msg(engine_session_new(e, &o, &sid, err) == 0, "%s", err);
	r1.session = r2.session = sid;
	run_pair(e, &r1, &s1, &r2, &s2);
	ck_assert_int_eq(s1.t.res.code, EMBER_ECONTEXT);
	ck_assert_int_ne(s2.t.res.finish, ENGINE_FINISH_ERROR);
	ck_assert_int_eq(s2.t.res.prompt_tokens, (int64_t)n);
	free(ids);
	test_sink_destroy(&s1.t);
	test_sink_destroy(&s2.t);
	engine_free(e);
}
END_TEST

START_TEST(engine_open_fails_cleanly)
{
	struct engine_config c = {.chat_template = "nope"};
	char err[EMBER_ERR_MAX] = "";
	struct engine *e = (struct engine *)1;

	ck_assert_int_eq(engine_open(&e, GOLDEN, &c, err), EMBER_EINVAL);
	ck_assert_ptr_null(e);
	ck_assert_ptr_nonnull(strstr(err, "nope"));
	ck_assert_int_lt(engine_open(&e, "/nonexistent.gguf", NULL, err), 0);
	ck_assert_ptr_null(e);
}
END_TEST

Suite *suite_engine_api(void)
{
	Suite *s = suite_create("engine_api");
	TCase *tc = tcase_create("engine_api");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, tokenize_and_detokenize_round_trip);
	tcase_add_test(tc, messages_give_what_their_rendered_prompt_gives);
	tcase_add_test(tc, a_nul_in_content_is_an_ordinary_character);
	tcase_add_test(tc, bad_messages_are_refused_on_submit);
	tcase_add_test(tc, a_long_prompt_does_not_stall_a_running_stream);
	tcase_add_test(tc, a_session_gets_bos_from_the_request_that_opens_it);
	tcase_add_test(tc, engine_open_fails_cleanly);
	suite_add_tcase(s, tc);
	return s;
}
