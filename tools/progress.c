/* progress.c - progress lines on stderr (see progress.h). */
#include "progress.h"

#include <stdio.h>
#include <time.h>

#include "clock.h"

void progress_init(struct progress *p, int on)
{
	p->on = on;
	p->t0 = clock_now_s();
	p->bytes = 0;
}

void progress_step(struct progress *p, size_t i, size_t n, const char *name, uint64_t bytes)
{
	double dt;

	if (!p->on)
		return;
	p->bytes += bytes;
	dt = clock_now_s() - p->t0;
	fprintf(stderr, "\r[%zu/%zu] %-40.40s %8.1f MB/s", i, n, name,
		dt > 0 ? (double)p->bytes / dt / 1e6 : 0.0);
	fflush(stderr);
}

void progress_done(struct progress *p)
{
	if (p->on)
		fprintf(stderr, "\n");
}
