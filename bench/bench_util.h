/*
 * bench_util.h - what the timing tools in bench/ share: a clock read in
 * seconds and the sort that gives a run's best and median. Header only:
 * each tool is one file linked against libember (Makefile), with nothing
 * of bench/ beside it.
 */
#ifndef EMBER_BENCH_UTIL_H
#define EMBER_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* Clock `clk` (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, ...) in seconds;
 * clock.h's clock_now_s() and clock_cpu_s() are the monotonic and process
 * CPU ones. */
static inline double bench_clock_s(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* v[0..n) ascending: the best time is v[0], the median v[n / 2]. */
static inline void bench_sort(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), bench_cmp_double);
}

#endif
