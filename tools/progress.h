/*
 * progress.h - "tensor i/n, MB/s" lines on stderr for long tool runs
 * (convert, quantize). Silent unless enabled, which the commands do only
 * when stderr is a terminal. Caller storage, one thread.
 */
#ifndef EMBER_PROGRESS_H
#define EMBER_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

struct progress {
	int on;
	double t0;      /* seconds, CLOCK_MONOTONIC */
	uint64_t bytes; /* source bytes done */
};

/* Starts the clock; `on` = 0 makes every call a no-op. */
void progress_init(struct progress *p, int on);

/* Reports tensor `i` (1-based) of `n`, named `name`, of `bytes` source
 * bytes, as done; overwrites the previous line. */
void progress_step(struct progress *p, size_t i, size_t n, const char *name, uint64_t bytes);

/* Ends the line. */
void progress_done(struct progress *p);

#endif
