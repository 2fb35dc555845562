/*
 * threadpool.c - compute threads that spin briefly, then sleep (see
 * threadpool.h).
 *
 * One job at a time. The caller publishes it in `job` and bumps `gen`
 * (the futex word workers sleep on); everyone, caller included, claims
 * items by a compare-and-swap on `ticket`, whose high half is the job's
 * generation and low half the next item, so a worker that read a job's
 * fields late can never claim an item of a newer job. `done` counts
 * finished items of the current job: the caller waits for it to reach n,
 * spinning briefly, then on a futex that the finisher of the last item
 * wakes. A worker that finds nothing to claim just goes back to waiting:
 * nobody waits for it.
 *
 * Memory order: every atomic here is sequentially consistent (the
 * defaults), which makes the two sleep/wake handshakes (sleepers vs gen,
 * waiting vs done) free of lost wake-ups; their cost is noise next to an
 * item (a matrix chunk, a norm row).
 */
#include "threadpool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "env.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TPOOL_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define TPOOL_RELAX() __asm__ __volatile__("yield")
#else
#define TPOOL_RELAX() ((void)0)
#endif

/* How long an idle thread spins before it sleeps: decode's loops follow
 * each other within tens of microseconds; longer than this, the core is
 * better given back. EMBER_POOL_SPIN_US overrides it (0: sleep at once). */
#define TPOOL_SPIN_NS_DEFAULT 50000

struct tpool_job {
	_Atomic(tpool_fn_1d) fn1;
	_Atomic(tpool_fn_2d) fn2;
	_Atomic(void *) ctx;
	atomic_size_t n, nj;
};

struct tpool {
	pthread_mutex_t run_lock; /* callers of one pool take turns */
	pthread_t *threads;
	uint32_t n_workers;
	long spin_ns;
	struct tpool_job job;
	atomic_uint gen;          /* job generation; futex word of idle workers */
	atomic_uint_least64_t ticket; /* gen << 32 | next item */
	atomic_uint done;         /* items of this job finished; futex word of the caller */
	atomic_uint sleepers;     /* workers asleep (or about to be) on gen */
	atomic_uint waiting;      /* the caller asleep (or about to be) on done */
	atomic_int stop;
};

static void tpool__futex_wait(atomic_uint *addr, unsigned val)
{
	syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void tpool__futex_wake(atomic_uint *addr, int n)
{
	syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static long tpool__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Spins until *addr != val or spin_ns pass; returns the last value. */
static unsigned tpool__spin(const struct tpool *p, atomic_uint *addr, unsigned val)
{
	long t0 = 0;
	unsigned v;

	for (unsigned i = 0;; i++) {
		if ((v = atomic_load(addr)) != val)
			return v;
		if ((i & 63) == 0) {
			long now = tpool__now_ns();
			if (i == 0)
				t0 = now;
			else if (now - t0 >= p->spin_ns)
				return v;
		}
		TPOOL_RELAX();
	}
}

/* Claims and runs items of generation g until none is left, then counts
 * them in `done` at once: one contended add a thread and job rather than
 * one an item (the two cores' adds to one line, like the claims, cost a
 * transfer each; a decode step runs ~300 jobs of a few items). The
 * caller waits for done = n, so no newer job starts before these items
 * are counted, and a thread that claimed nothing adds nothing. */
static void tpool__work(struct tpool *p, unsigned g)
{
	tpool_fn_1d fn1 = atomic_load(&p->job.fn1);
	tpool_fn_2d fn2 = atomic_load(&p->job.fn2);
	void *ctx = atomic_load(&p->job.ctx);
	size_t n = atomic_load(&p->job.n), nj = atomic_load(&p->job.nj);
	uint64_t t = atomic_load(&p->ticket);
	unsigned ran = 0;

	for (;;) {
		if ((unsigned)(t >> 32) != g || (t & 0xffffffffu) >= n)
			break; /* another job, or nothing left */
		if (!atomic_compare_exchange_weak(&p->ticket, &t, t + 1))
			continue; /* t reloaded */
		size_t i = (size_t)(t & 0xffffffffu);
		if (fn2)
			fn2(ctx, i / nj, i % nj);
		else
			fn1(ctx, i);
		ran++;
		t = atomic_load(&p->ticket);
	}
	if (ran && atomic_fetch_add(&p->done, ran) + ran == n && atomic_load(&p->waiting))
		tpool__futex_wake(&p->done, 1);
}

static void *tpool__main(void *arg)
{
	struct tpool *p = arg;
	unsigned seen = atomic_load(&p->gen);

	for (;;) {
		unsigned g = tpool__spin(p, &p->gen, seen);
		while (g == seen && !atomic_load(&p->stop)) {
			atomic_fetch_add(&p->sleepers, 1);
			if (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
				tpool__futex_wait(&p->gen, seen);
			atomic_fetch_sub(&p->sleepers, 1);
			g = atomic_load(&p->gen);
		}
		if (atomic_load(&p->stop))
			return NULL;
		seen = g;
		tpool__work(p, g);
	}
}

static void tpool__run(tpool_t p, tpool_fn_1d fn1, tpool_fn_2d fn2, void *ctx, size_t n,
		       size_t nj)
{
	unsigned g, d;

	pthread_mutex_lock(&p->run_lock);
	/* Close the finished job's ticket before its fields change: a worker
	 * that saw the old generation late may read the new n (larger than
	 * the old one) beside the old ticket, and would claim a phantom item
	 * under the old generation (run with the new ctx, counted in the new
	 * done: done overshoots n and the join below never returns). With
	 * the item part at its maximum no n admits a claim, and a CAS on a
	 * ticket read before this store fails. */
	atomic_store(&p->ticket, (uint64_t)atomic_load(&p->gen) << 32 | 0xffffffffu);
	atomic_store(&p->job.fn1, fn1);
	atomic_store(&p->job.fn2, fn2);
	atomic_store(&p->job.ctx, ctx);
	atomic_store(&p->job.n, n);
	atomic_store(&p->job.nj, nj);
	atomic_store(&p->done, 0);
	g = atomic_load(&p->gen) + 1;
	atomic_store(&p->ticket, (uint64_t)g << 32);
	atomic_store(&p->gen, g);
	if (atomic_load(&p->sleepers))
		tpool__futex_wake(&p->gen, INT_MAX);
	tpool__work(p, g);
	/* Only items in progress remain: wait for them, not for workers. */
	while ((d = atomic_load(&p->done)) != (unsigned)n) {
		d = tpool__spin(p, &p->done, d);
		if (d == (unsigned)n)
			break;
		atomic_store(&p->waiting, 1);
		if ((d = atomic_load(&p->done)) != (unsigned)n)
			tpool__futex_wait(&p->done, d);
		atomic_store(&p->waiting, 0);
	}
	pthread_mutex_unlock(&p->run_lock);
}

static void tpool__serial_1d(tpool_fn_1d fn, void *ctx, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fn(ctx, i);
}

void tpool_run_1d(tpool_t p, tpool_fn_1d fn, void *ctx, size_t n)
{
	if (p == NULL || p->n_workers == 0 || n <= 1 || n > 0xffffffffu) {
		tpool__serial_1d(fn, ctx, n);
		return;
	}
	tpool__run(p, fn, NULL, ctx, n, 1);
}

void tpool_run_2d(tpool_t p, tpool_fn_2d fn, void *ctx, size_t ni, size_t nj)
{
	if (ni == 0 || nj == 0)
		return;
	if (p == NULL || p->n_workers == 0 || ni * nj <= 1 || ni > 0xffffffffu / nj) {
		for (size_t i = 0; i < ni; i++)
			for (size_t j = 0; j < nj; j++)
				fn(ctx, i, j);
		return;
	}
	tpool__run(p, NULL, fn, ctx, ni * nj, nj);
}

size_t tpool_threads(tpool_t p)
{
	return p ? (size_t)p->n_workers + 1 : 1;
}

tpool_t tpool_create(uint32_t n_threads)
{
	struct tpool *p;
	size_t spin_us;

	if (n_threads == 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		n_threads = c > 0 && c < 1024 ? (uint32_t)c : 1;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	pthread_mutex_init(&p->run_lock, NULL);
	p->spin_ns = TPOOL_SPIN_NS_DEFAULT;
	spin_us = (size_t)(TPOOL_SPIN_NS_DEFAULT / 1000);
	if (env_size("EMBER_POOL_SPIN_US", 0, 1000000, &spin_us))
		p->spin_ns = (long)spin_us * 1000;
	p->threads = calloc(n_threads, sizeof(*p->threads));
	if (p->threads == NULL) {
		pthread_mutex_destroy(&p->run_lock);
		free(p);
		return NULL;
	}
	for (uint32_t i = 0; i + 1 < n_threads; i++) {
		if (pthread_create(&p->threads[i], NULL, tpool__main, p) != 0) {
			tpool_destroy(p);
			return NULL;
		}
		p->n_workers++;
	}
	return p;
}

void tpool_destroy(tpool_t p)
{
	if (p == NULL)
		return;
	atomic_store(&p->stop, 1);
	atomic_fetch_add(&p->gen, 1);
	tpool__futex_wake(&p->gen, INT_MAX);
	for (uint32_t i = 0; i < p->n_workers; i++)
		pthread_join(p->threads[i], NULL);
	free(p->threads);
	pthread_mutex_destroy(&p->run_lock);
	free(p);
}
