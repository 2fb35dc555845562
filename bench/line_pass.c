/*
 * line_pass.c - what a cache line costs to pass between CPUs 0 and 1, the
 * two cores a small-batch product call runs on, so a two-thread figure can
 * be read against the state the machine was in (LEVELS.md, call23).
 *
 *   build/line_pass [REPS]   (default 20000)
 *
 * Two threads, pinned to CPUs 0 and 1:
 * - pass: they take turns writing one line (a counter each waits for the
 *   other to bump): ns a hand-over, the latency of a line the other core
 *   holds modified;
 * - shared write: CPU 1 reads a 18,688-byte buffer (8 Q8_K rows of 2048:
 *   the activations of an 8-token call, which both cores read in the
 *   product pass), then CPU 0 writes every line of it (the next call's
 *   quantizing pass): ns a line; and the same with CPU 1 not reading it
 *   (the lines CPU 0's own).
 * On this guest (Zen 4, KVM, 2 vCPUs) the two-thread products' rate and
 * the cost of the quantizing pass's writes vary by minutes with the
 * same binary (LEVELS.md, call23: tiles 256 or 276-281 TSC cycles a row);
 * this names the state a figure was taken in: 26 ns and 2.4x in minutes
 * where gemm_q q4_kp 8 2 2048 x 2048 ran at 646-652 GFLOP/s, 170 ns and
 * 11x with another real-time process on both cores. Medians of the
 * repetitions. Not a test: timings.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#define LP_BYTES (8 * 2336) /* 8 rows of 8 Q8_K blocks (292 bytes) */
#define LP_LINES (LP_BYTES / 64)

struct lp {
	_Alignas(64) atomic_uint turn;   /* pass: whose write is next */
	_Alignas(64) atomic_uint phase;  /* shared write: the reader's step */
	_Alignas(64) unsigned char buf[LP_BYTES];
	int reps, read; /* read: CPU 1 reads buf before each write pass */
	double *pass_s, *write_s;
	volatile uint64_t sink;
};

static void lp_pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

/* Spins until *a is v; gives up (exits) after 5 s, so a run whose other
 * thread never gets its core (another real-time process there) ends. */
static void lp_wait(atomic_uint *a, unsigned v)
{
	double t0 = 0;

	for (unsigned i = 0; atomic_load_explicit(a, memory_order_acquire) != v; i++)
		if ((i & 0xffff) == 0) {
			const double t = bench_clock_s(CLOCK_MONOTONIC);

			if (t0 == 0)
				t0 = t;
			else if (t - t0 > 5.0) {
				fprintf(stderr, "line_pass: the other thread did not run for 5 s\n");
				exit(1);
			}
		}
}

/* CPU 1's side: the pass's odd turns, then the reads before each write. */
static void *lp_other(void *arg)
{
	struct lp *p = arg;

	for (int r = 0; r < p->reps; r++) {
		lp_wait(&p->turn, 2u * (unsigned)r + 1);
		atomic_store_explicit(&p->turn, 2u * (unsigned)r + 2, memory_order_release);
	}
	for (int r = 0; r < p->reps; r++) {
		uint64_t acc = 0;

		lp_wait(&p->phase, 2u * (unsigned)r);
		if (p->read)
			for (size_t i = 0; i < LP_BYTES; i += 64)
				acc += p->buf[i];
		p->sink = acc;
		atomic_store_explicit(&p->phase, 2u * (unsigned)r + 1, memory_order_release);
	}
	return NULL;
}

/* CPU 0's side: the pass timed over all turns, each write pass alone. */
static int lp_run(struct lp *p)
{
	pthread_t t;
	pthread_attr_t at;
	cpu_set_t s;
	double t0;
	int rc;

	atomic_store(&p->turn, 0);
	atomic_store(&p->phase, 0);
	lp_pin(0);
	/* on CPU 1 from its start: under SCHED_FIFO a thread started on CPU
	 * 0 would wait there behind this one's spinning */
	CPU_ZERO(&s);
	CPU_SET(1, &s);
	pthread_attr_init(&at);
	pthread_attr_setaffinity_np(&at, sizeof(s), &s);
	rc = pthread_create(&t, &at, lp_other, p);
	pthread_attr_destroy(&at);
	if (rc != 0)
		return -1;
	t0 = bench_clock_s(CLOCK_MONOTONIC);
	for (int r = 0; r < p->reps; r++) {
		lp_wait(&p->turn, 2u * (unsigned)r);
		atomic_store_explicit(&p->turn, 2u * (unsigned)r + 1, memory_order_release);
	}
	lp_wait(&p->turn, 2u * (unsigned)p->reps);
	p->pass_s[0] = (bench_clock_s(CLOCK_MONOTONIC) - t0) / (2.0 * p->reps);
	for (int r = 0; r < p->reps; r++) {
		lp_wait(&p->phase, 2u * (unsigned)r + 1);
		t0 = bench_clock_s(CLOCK_MONOTONIC);
		for (size_t i = 0; i < LP_BYTES; i += 64)
			memset(p->buf + i, r & 0xff, 64);
		atomic_thread_fence(memory_order_seq_cst); /* the stores done */
		p->write_s[r] = (bench_clock_s(CLOCK_MONOTONIC) - t0) / LP_LINES;
		atomic_store_explicit(&p->phase, 2u * (unsigned)r + 2, memory_order_release);
	}
	pthread_join(t, NULL);
	bench_sort(p->write_s, (size_t)p->reps);
	return 0;
}

int main(int argc, char **argv)
{
	const int reps = argc > 1 ? atoi(argv[1]) : 20000;
	struct lp *p = aligned_alloc(64, sizeof(struct lp));
	double write_ns[2];

	if (reps <= 0 || p == NULL) {
		fprintf(stderr, "usage: line_pass [REPS]\n");
		return 2;
	}
	memset(p, 0, sizeof(*p));
	p->reps = reps;
	p->pass_s = malloc(sizeof(double));
	p->write_s = malloc(sizeof(double) * (size_t)reps);
	if (p->pass_s == NULL || p->write_s == NULL)
		return 1;
	for (int read = 1; read >= 0; read--) {
		p->read = read;
		if (lp_run(p) != 0) {
			fprintf(stderr, "line_pass: no second thread\n");
			return 1;
		}
		write_ns[read] = p->write_s[reps / 2] * 1e9;
	}
	printf("line_pass: CPU 0 <-> 1 hand-over %.1f ns; a line's write %.2f ns where CPU 1 "
	       "read it, %.2f ns where not (%.1fx), medians of %d\n",
	       p->pass_s[0] * 1e9, write_ns[1], write_ns[0], write_ns[1] / write_ns[0], reps);
	free(p->pass_s);
	free(p->write_s);
	free(p);
	return 0;
}
