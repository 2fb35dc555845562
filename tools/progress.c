/* progress.c - progress lines on stderr (see progress.h). */
#include "progress.h"

#include <stdio.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_init(struct progress *p, int on)
{
	p->on = on;
	p->t0 = now();
	p->bytes = 0;
}

void progress_step(struct progress *p, size_t i, size_t n, const char *name, uint64_t bytes)
{
	double dt;

	if (!p->on)
		return;
	p->bytes += bytes;
	dt = now() - p->t0;
	fprintf(stderr, "\r[%zu/%zu] %-40.40s %8.1f MB/s", i, n, name,
		dt > 0 ? (double)p->bytes / dt / 1e6 : 0.0);
	fflush(stderr);
}

void progress_done(struct progress *p)
{
	if (p->on)
		fprintf(stderr, "\n");
}
