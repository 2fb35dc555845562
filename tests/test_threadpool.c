/* test_threadpool.c - the compute pool: every item runs exactly once, in
 * 1-D and 2-D loops, for any pool size, over many back-to-back runs (the
 * decode pattern: workers catch jobs while spinning and after sleeping). */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "threadpool.h"

struct tp_count {
	atomic_uint *hits;
	size_t nj;
	unsigned sleep_us; /* item 0 sleeps this long: others must finish the rest */
};

static void tp_item(void *ctx, size_t i)
{
	struct tp_count *c = ctx;

	if (i == 0 && c->sleep_us)
		usleep(c->sleep_us);
	atomic_fetch_add(&c->hits[i], 1);
}

static void tp_item2(void *ctx, size_t i, size_t j)
{
	struct tp_count *c = ctx;

	atomic_fetch_add(&c->hits[i * c->nj + j], 1);
}

static void tp_check(tpool_t p, size_t n, unsigned sleep_us)
{
	atomic_uint *hits = calloc(n ? n : 1, sizeof(*hits));
	struct tp_count c = {hits, 0, sleep_us};

	ck_assert_ptr_nonnull(hits);
	tpool_run_1d(p, tp_item, &c, n);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(atomic_load(&hits[i]) == 1, "n=%zu: item %zu ran %u times", n, i,
			      atomic_load(&hits[i]));
	free(hits);
}

START_TEST(every_item_runs_once_for_any_pool_size)
{
	static const size_t ns[] = {0, 1, 2, 3, 7, 64, 1000};

	for (uint32_t threads = 1; threads <= 4; threads++) {
		tpool_t p = tpool_create(threads);
		ck_assert_ptr_nonnull(p);
		ck_assert_uint_eq(tpool_threads(p), threads);
		for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
			tp_check(p, ns[k], 0);
		tp_check(p, 16, 20000); /* one slow item: the join waits for it only */
		tpool_destroy(p);
	}
	tp_check(NULL, 5, 0); /* no pool: the caller runs everything */
	ck_assert_uint_eq(tpool_threads(NULL), 1);
	tpool_destroy(NULL);
}
END_TEST

START_TEST(two_d_covers_the_grid_once)
{
	tpool_t p = tpool_create(3);
	enum { NI = 7, NJ = 13 };
	atomic_uint hits[NI * NJ];
	struct tp_count c = {hits, NJ, 0};

	memset(hits, 0, sizeof(hits));
	tpool_run_2d(p, tp_item2, &c, NI, NJ);
	for (size_t i = 0; i < NI * NJ; i++)
		ck_assert_uint_eq(atomic_load(&hits[i]), 1);
	tpool_run_2d(p, tp_item2, &c, 0, NJ); /* empty: nothing runs */
	for (size_t i = 0; i < NI * NJ; i++)
		ck_assert_uint_eq(atomic_load(&hits[i]), 1);
	tpool_destroy(p);
}
END_TEST

/* Thousands of short runs back to back, some after a pause long enough
 * for the workers to fall asleep: no item lost or run twice, no hang. */
START_TEST(back_to_back_runs_lose_nothing)
{
	tpool_t p = tpool_create(3);
	enum { N = 37 };
	atomic_uint hits[N];
	struct tp_count c = {hits, 0, 0};

	memset(hits, 0, sizeof(hits));
	for (unsigned r = 1; r <= 5000; r++) {
		tpool_run_1d(p, tp_item, &c, N);
		if (r % 500 == 0)
			usleep(2000);
	}
	for (size_t i = 0; i < N; i++)
		ck_assert_uint_eq(atomic_load(&hits[i]), 5000);
	tpool_destroy(p);
	/* and a pool that never spins (sleeps at once; read at create) */
	setenv("EMBER_POOL_SPIN_US", "0", 1);
	p = tpool_create(2);
	memset(hits, 0, sizeof(hits));
	for (unsigned r = 0; r < 2000; r++)
		tpool_run_1d(p, tp_item, &c, N);
	for (size_t i = 0; i < N; i++)
		ck_assert_uint_eq(atomic_load(&hits[i]), 2000);
	tpool_destroy(p);
	unsetenv("EMBER_POOL_SPIN_US");
}
END_TEST

struct tp_caller {
	tpool_t p;
	pthread_barrier_t *start; /* so the two callers overlap */
	atomic_uint hits[64];
};

static void *tp_caller_main(void *arg)
{
	struct tp_caller *c = arg;
	struct tp_count k = {c->hits, 0, 0};

	pthread_barrier_wait(c->start);
	for (int r = 0; r < 3000; r++)
		tpool_run_1d(c->p, tp_item, &k, 64);
	return NULL;
}

/* Two threads sharing one pool (forward passes borrowing it) take turns:
 * each loop's items run once, none is lost to the other caller's job
 * (without the turn-taking, this hung or lost items). */
START_TEST(concurrent_callers_take_turns)
{
	struct tp_caller c[2];
	pthread_t th[2];
	tpool_t p = tpool_create(2);
	pthread_barrier_t start;

	memset(c, 0, sizeof(c));
	pthread_barrier_init(&start, NULL, 2);
	for (int i = 0; i < 2; i++) {
		c[i].p = p;
		c[i].start = &start;
		ck_assert_int_eq(pthread_create(&th[i], NULL, tp_caller_main, &c[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 64; j++)
			ck_assert_uint_eq(atomic_load(&c[i].hits[j]), 3000);
	pthread_barrier_destroy(&start);
	tpool_destroy(p);
}
END_TEST

struct tp_alt {
	tpool_t p;
	unsigned rounds;
	atomic_uint small[2], big[40];
	atomic_int finished;
};

static void *tp_alt_main(void *arg)
{
	struct tp_alt *a = arg;
	struct tp_count s = {a->small, 0, 0}, b = {a->big, 0, 0};

	for (unsigned r = 0; r < a->rounds; r++) {
		tpool_run_1d(a->p, tp_item, &s, 2);
		tpool_run_1d(a->p, tp_item, &b, 40);
	}
	atomic_store(&a->finished, 1);
	return NULL;
}

/* Jobs that grow from one run to the next (a norm of 2 items, then a
 * GEMV of 40: the decode pattern). A worker that saw the small job late
 * used to read the big job's n beside the small job's exhausted ticket
 * and claim a phantom item: run with the big job's context, counted in
 * its `done`, which then overshot n and the join waited forever (seen in
 * `ember bench`). Run on a second thread so a hang fails in seconds. */
START_TEST(growing_jobs_never_claim_a_stale_item)
{
	for (uint32_t threads = 2; threads <= 3; threads++) {
		struct tp_alt *a = calloc(1, sizeof(*a));
		pthread_t th;
		int waited_ms = 0;

		ck_assert_ptr_nonnull(a);
		a->p = tpool_create(threads);
		a->rounds = 200000;
		ck_assert_int_eq(pthread_create(&th, NULL, tp_alt_main, a), 0);
		while (!atomic_load(&a->finished) && waited_ms < 30000) {
			usleep(10000);
			waited_ms += 10;
		}
		ck_assert_msg(atomic_load(&a->finished), "%u threads: the pool hung", threads);
		pthread_join(th, NULL);
		for (int i = 0; i < 2; i++)
			ck_assert_uint_eq(atomic_load(&a->small[i]), a->rounds);
		for (int i = 0; i < 40; i++)
			ck_assert_uint_eq(atomic_load(&a->big[i]), a->rounds);
		tpool_destroy(a->p);
		free(a);
	}
}
END_TEST

Suite *suite_threadpool(void)
{
	Suite *s = suite_create("threadpool");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, every_item_runs_once_for_any_pool_size);
	tcase_add_test(tc, two_d_covers_the_grid_once);
	tcase_add_test(tc, back_to_back_runs_lose_nothing);
	tcase_add_test(tc, concurrent_callers_take_turns);
	tcase_add_test(tc, growing_jobs_never_claim_a_stale_item);
	suite_add_tcase(s, tc);
	return s;
}
