/*
 * threadpool.h - the compute threads of the CPU backend: a fixed set of
 * workers that run the items of one parallel loop at a time with the
 * calling thread.
 *
 * Why not pthreadpool (used before): it hands each thread a range up
 * front and its join waits until every worker has checked in, even one
 * that was woken but not yet scheduled and had nothing left to do; with
 * a join per product and per layer step (TinyLlama's decode: 111 a token,
 * kernels.c), a machine whose other cores are busy (a co-located
 * process, other jobs) made each join wait a scheduler time slice, and
 * the waiting thread spun meanwhile. Here items are claimed one by one
 * from a shared counter, the caller runs items too, and the join waits
 * only for items actually in progress: a worker that wakes late finds
 * nothing to claim and does not hold anyone up. Idle threads spin
 * briefly (decode's loops come back to back, tens of microseconds apart)
 * and then sleep on a futex, so they never keep a core from another
 * process for longer than that.
 *
 * Ownership: tpool_create() returns a pool the caller destroys.
 * Threads: tpool_run_*() may be called from any thread; calls on one
 * pool take turns (forward passes sharing a pool). Each returns when every
 * item of its loop has run. An item must not call tpool_run_*() on its
 * own pool. A NULL pool runs every item on the calling thread.
 */
#ifndef EMBER_THREADPOOL_H
#define EMBER_THREADPOOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct tpool *tpool_t;

/* Item i of a 1-D loop, or item (i, j) of a 2-D one. */
typedef void (*tpool_fn_1d)(void *ctx, size_t i);
typedef void (*tpool_fn_2d)(void *ctx, size_t i, size_t j);

/* A pool of n_threads threads in all, the caller included (n_threads - 1
 * workers; 0 means one per online CPU). NULL when threads cannot be
 * created. */
tpool_t tpool_create(uint32_t n_threads);

/* Stops and joins the workers; NULL is a no-op. Not during a run. */
void tpool_destroy(tpool_t p);

/* Threads that run items, the caller included (1 for NULL). */
size_t tpool_threads(tpool_t p);

/* fn(ctx, i) for every i < n, in any order, over the pool's threads. */
void tpool_run_1d(tpool_t p, tpool_fn_1d fn, void *ctx, size_t n);

/* fn(ctx, i, j) for every i < ni, j < nj. */
void tpool_run_2d(tpool_t p, tpool_fn_2d fn, void *ctx, size_t ni, size_t nj);

#endif
