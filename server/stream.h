/*
 * stream.h - one generation in flight, between the engine worker that
 * produces text (through the struct gen_sink of backend.h) and the loop
 * that owns the HTTP connection.
 *
 * Worker side: stream_sink() gives the sink to pass to backend_submit. Its
 * text_cb appends to a locked byte queue (capacity is kept, so steady
 * decoding allocates nothing per token) and wakes the loop with
 * uv_async_send; done_cb stores the result and wakes it a last time.
 * uv_async coalesces wake-ups, so the loop takes everything queued at once.
 *
 * Loop side: update_cb(data, s) runs on the loop after each wake-up; it
 * calls stream_take() to get the text so far and whether the generation is
 * over, then formats (SSE or JSON) and resumes the connection.
 *
 * Lifetime: two owners, the worker (until done_cb) and the loop (until
 * stream_release, typically when the HTTP exchange ends). The memory is
 * freed on the loop thread once both let go; the async handle's close is
 * ordered with done_cb under the lock, so the worker never touches a
 * closed handle.
 */
#ifndef EMBER_STREAM_H
#define EMBER_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "backend.h"

struct gen_stream;

typedef void (*stream_update_cb)(void *data, struct gen_stream *s);

/* What stream_take hands the loop. `text` is valid until the next
 * stream_take or stream_release. */
struct stream_chunk {
	const char *text;
	size_t len;
	int n_tokens;              /* tokens behind `text` */
	/* Log-probabilities of the tokens generated since the last take, in
	 * order (requests with logprobs; engine.h says how they line up
	 * with n_tokens). Valid like `text`. */
	const struct engine_logprobs *lp;
	size_t n_lp;
	bool done;                 /* the worker called done_cb: true in one
				    * take only, after which update_cb is not
				    * called again */
	struct engine_result result;  /* when done */
};

/* Creates a stream on `loop` (loop thread). update_cb(data, s) is called
 * on the loop whenever the worker produced something, until
 * stream_release. Returns 0 or EMBER_ENOMEM. */
int stream_new(uv_loop_t *loop, stream_update_cb update_cb, void *data,
	       struct gen_stream **out);

/* The sink for backend_submit; valid until its done_cb has run. */
struct gen_sink stream_sink(struct gen_stream *s);

/* Loop thread: moves all text queued so far into `c` (empty when none). */
void stream_take(struct gen_stream *s, struct stream_chunk *c);

/* Loop thread: the loop lets go (update_cb is not called again). If the
 * worker has not finished, the caller should backend_cancel it; the
 * memory goes when its done_cb arrives. NULL allowed. */
void stream_release(struct gen_stream *s);

/* Loop thread: a stream whose request was never submitted (backend_submit
 * failed) has no worker owner; this drops that share so stream_release
 * can free it. */
void stream_abandon_worker(struct gen_stream *s);

#endif
