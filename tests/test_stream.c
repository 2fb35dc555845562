/* test_stream.c - worker-to-loop text queue: a real thread produces, the
 * uv loop consumes; ASan/LSan in `make asan` check the lifetime rules. */
#include <check.h>
#include <pthread.h>
#include <string.h>
#include <uv.h>

#include "stream.h"

struct consumer {
	size_t bytes;
	int tokens;
	int updates;
	bool done;
	enum engine_finish finish;
	bool order_ok;
	char last;
};

static void update_cb(void *data, struct gen_stream *s)
{
	struct consumer *c = data;
	struct stream_chunk ch;
	size_t i;

	stream_take(s, &ch);
	for (i = 0; i < ch.len; i++) {
		/* the producer alternates 'a','b': any loss or reorder shows */
		if (ch.text[i] == c->last)
			c->order_ok = false;
		c->last = ch.text[i];
	}
	c->bytes += ch.len;
	c->tokens += ch.n_tokens;
	c->updates++;
	if (ch.done) {
		c->done = true;
		c->finish = ch.result.finish;
		stream_release(s);
	}
}

struct producer {
	struct gen_sink sink;
	int n;
	uv_sem_t *wait;   /* when set, waits on it before done_cb */
};

static void *produce(void *arg)
{
	struct producer *p = arg;
	struct engine_result res = {.finish = ENGINE_FINISH_STOP};
	int i;

	for (i = 0; i < p->n; i++)
		p->sink.text_cb(p->sink.data, i % 2 ? "b" : "a", 1, 1);
	if (p->wait != NULL) {
		uv_sem_wait(p->wait);
		res.finish = ENGINE_FINISH_CANCELLED;
	}
	p->sink.done_cb(p->sink.data, &res);
	return NULL;
}

START_TEST(every_byte_arrives_in_order_then_done)
{
	struct consumer c = {.order_ok = true};
	struct producer p;
	struct gen_stream *s;
	pthread_t th;
	uv_loop_t loop;

	ck_assert_int_eq(uv_loop_init(&loop), 0);
	ck_assert_int_eq(stream_new(&loop, update_cb, &c, &s), 0);
	p.sink = stream_sink(s);
	p.n = 20000;
	p.wait = NULL;
	pthread_create(&th, NULL, produce, &p);
	/* Runs until the stream's handle is closed: bounded by the producer. */
	uv_run(&loop, UV_RUN_DEFAULT);
	pthread_join(th, NULL);
	ck_assert(c.done);
	ck_assert_uint_eq(c.bytes, 20000);
	ck_assert_int_eq(c.tokens, 20000);
	ck_assert(c.order_ok);
	ck_assert_int_eq(c.finish, ENGINE_FINISH_STOP);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

static void release_now_cb(void *data, struct gen_stream *s)
{
	int *calls = data;

	(*calls)++;
	stream_release(s);
}

START_TEST(loop_may_let_go_before_the_worker_finishes)
{
	struct producer p;
	struct gen_stream *s;
	pthread_t th;
	uv_loop_t loop;
	uv_sem_t sem;
	int calls = 0;

	ck_assert_int_eq(uv_loop_init(&loop), 0);
	ck_assert_int_eq(uv_sem_init(&sem, 0), 0);
	ck_assert_int_eq(stream_new(&loop, release_now_cb, &calls, &s), 0);
	p.sink = stream_sink(s);
	p.n = 10;
	p.wait = &sem;
	pthread_create(&th, NULL, produce, &p);
	/* The first update releases (a client gone); the worker then
	 * finishes ("cancelled") and the memory must still be freed. */
	while (calls == 0)
		uv_run(&loop, UV_RUN_ONCE);
	uv_sem_post(&sem);
	uv_run(&loop, UV_RUN_DEFAULT);
	pthread_join(th, NULL);
	ck_assert_int_eq(calls, 1);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	uv_sem_destroy(&sem);
}
END_TEST

START_TEST(never_submitted_stream_is_freed)
{
	struct gen_stream *s;
	uv_loop_t loop;
	int calls = 0;

	ck_assert_int_eq(uv_loop_init(&loop), 0);
	ck_assert_int_eq(stream_new(&loop, release_now_cb, &calls, &s), 0);
	stream_abandon_worker(s);
	stream_release(s);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(calls, 0);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	stream_release(NULL);
}
END_TEST

/* A consumer that keeps the stream past its done, as n choices do (each
 * one's stream lives until the last ends). Its first update is where the
 * worker finishes: the done lands between libuv's wake-up and the take. */
struct keeper {
	struct gen_sink sink;
	int updates, dones;
	size_t bytes;
};

static void keep_cb(void *data, struct gen_stream *s)
{
	struct keeper *k = data;
	struct engine_result res = {.finish = ENGINE_FINISH_LENGTH, .completion_tokens = 1};
	struct stream_chunk ch;

	if (k->updates++ == 0)
		k->sink.done_cb(k->sink.data, &res);
	stream_take(s, &ch);
	k->bytes += ch.len;
	if (ch.done) {
		k->dones++;
		ck_assert_int_eq(ch.result.finish, ENGINE_FINISH_LENGTH);
	}
}

START_TEST(done_is_handed_out_once)
{
	struct keeper k = {0};
	struct gen_stream *s;
	uv_loop_t loop;
	int i;

	ck_assert_int_eq(uv_loop_init(&loop), 0);
	ck_assert_int_eq(stream_new(&loop, keep_cb, &k, &s), 0);
	k.sink = stream_sink(s);
	k.sink.text_cb(k.sink.data, "x", 1, 1);
	/* The done's own wake-up is pending after the first update; before
	 * the fix the second update took the done again (a choice counted
	 * twice answered its request before the others ended). */
	for (i = 0; i < 4; i++)
		uv_run(&loop, UV_RUN_NOWAIT);
	ck_assert_int_eq(k.dones, 1);
	ck_assert_int_eq(k.updates, 1);
	ck_assert_uint_eq(k.bytes, 1);
	stream_release(s);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

Suite *suite_stream(void)
{
	Suite *s = suite_create("stream");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, every_byte_arrives_in_order_then_done);
	tcase_add_test(tc, loop_may_let_go_before_the_worker_finishes);
	tcase_add_test(tc, never_submitted_stream_is_freed);
	tcase_add_test(tc, done_is_handed_out_once);
	suite_add_tcase(s, tc);
	return s;
}
