/* membw.c - the machine's streaming read bandwidth, to set decode rates
 * against (issue 17: decode >= 85% of it).
 *
 *   build/membw [THREADS [MIB [REPS]]]   (2 1024 5)
 *
 * Each thread reads its own contiguous share of a MIB-mebibyte buffer
 * (far larger than the caches) with 32-byte loads, summed so nothing is
 * optimised away, the way decode streams weights; the buffer is touched
 * first so no page fault is timed. Prints the best and median GB/s over
 * REPS passes (wall time, all threads). Not a test: a timing. On a
 * shared machine, run it in the same minutes as the benchmark it is
 * compared with.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

#define MEMBW_MAX_THREADS 64

struct membw_part {
	const uint64_t *p;
	size_t n; /* uint64_t words */
	pthread_barrier_t *start;
	uint64_t sum;
};

static void *membw_read(void *arg)
{
	struct membw_part *m = arg;
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;

	pthread_barrier_wait(m->start);
	for (size_t i = 0; i + 4 <= m->n; i += 4) {
		s0 += m->p[i];
		s1 += m->p[i + 1];
		s2 += m->p[i + 2];
		s3 += m->p[i + 3];
	}
	m->sum = s0 + s1 + s2 + s3;
	return NULL;
}

static int membw_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 2;
	long mib = argc > 2 ? atol(argv[2]) : 1024;
	int reps = argc > 3 ? atoi(argv[3]) : 5;
	size_t bytes, words, share;
	uint64_t *buf, total = 0;
	double t[64];

	if (threads < 1 || threads > MEMBW_MAX_THREADS || mib < 16 || mib > 65536 || reps < 1 ||
	    reps > 64) {
		fprintf(stderr, "usage: membw [THREADS [MIB [REPS]]]\n");
		return 2;
	}
	bytes = (size_t)mib << 20;
	words = bytes / sizeof(uint64_t);
	share = words / (size_t)threads / 4 * 4;
	buf = aligned_alloc(64, bytes);
	if (buf == NULL) {
		fprintf(stderr, "membw: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < words; i++)
		buf[i] = i;
	for (int r = 0; r < reps; r++) {
		pthread_t th[MEMBW_MAX_THREADS];
		struct membw_part part[MEMBW_MAX_THREADS];
		pthread_barrier_t start;
		double t0;

		pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
		for (int i = 0; i < threads; i++) {
			part[i] = (struct membw_part){buf + (size_t)i * share, share, &start, 0};
			pthread_create(&th[i], NULL, membw_read, &part[i]);
		}
		pthread_barrier_wait(&start);
		t0 = clock_now_s();
		for (int i = 0; i < threads; i++) {
			pthread_join(th[i], NULL);
			total += part[i].sum;
		}
		t[r] = clock_now_s() - t0;
		pthread_barrier_destroy(&start);
	}
	qsort(t, (size_t)reps, sizeof(double), membw_cmp);
	printf("membw: %d threads, %ld MiB: best %.1f GB/s, median %.1f GB/s (checksum %llu)\n",
	       threads, mib, (double)share * threads * 8 / t[0] / 1e9,
	       (double)share * threads * 8 / t[reps / 2] / 1e9, (unsigned long long)(total & 0xff));
	free(buf);
	return 0;
}
