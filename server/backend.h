/*
 * backend.h - the one place where the server meets the engine.
 *
 * The server hands over a validated struct gen_request (gen_request.h:
 * plain C, no JSON) together with a struct gen_sink, and gets generated
 * text back through the sink's callbacks. Everything the engine must
 * provide is in this header; backend.c adapts it to engine/ (today: a stub
 * without an engine, see below).
 *
 * What the engine provides (contract):
 *   - backend_new/free: load the model named by the config (may finish
 *     loading in the background: backend_status says LOADING until then).
 *   - backend_submit: queue a request; return at once (never block the
 *     loop). EMBER_EFULL when the queue (config `queue`) is full -> 429;
 *     EMBER_ECONTEXT when the prompt cannot fit the context -> 400;
 *     EMBER_EBUSY while not READY -> 503.
 *   - then, on a worker thread, any number of sink->text_cb calls (UTF-8
 *     text, stop strings already removed, never a split code point) and
 *     exactly one sink->done_cb, the last call for that request. The
 *     request and sink stay valid (owned by the server) until done_cb.
 *   - backend_cancel: the client went away; the worker stops at its next
 *     step and still calls done_cb (finish GEN_FINISH_CANCELLED).
 *   - gauges: metrics_set_queue_depth / slots_busy / kv_cache_bytes on the
 *     struct metrics passed to backend_new, from any thread.
 * The callbacks run on worker threads: they must only copy into a locked
 * queue and uv_async_send (server side, stream.c), never touch HTTP.
 *
 * Threads: backend_* functions are called on the loop thread only.
 */
#ifndef EMBER_BACKEND_H
#define EMBER_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "ember.h"
#include "gen_request.h"
#include "metrics.h"

enum backend_status {
	BACKEND_LOADING,   /* health 503 {"status":"loading"} */
	BACKEND_READY,     /* health 200 {"status":"ok"} */
	BACKEND_NO_MODEL,  /* --no-model test mode: health 503 */
	BACKEND_FAILED,    /* load failed: health 503 with the message */
};

enum gen_finish {
	GEN_FINISH_STOP,      /* end of sequence or a stop string */
	GEN_FINISH_LENGTH,    /* max_tokens or the context filled */
	GEN_FINISH_CANCELLED, /* backend_cancel */
	GEN_FINISH_ERROR,     /* see message */
};

struct gen_result {
	enum gen_finish finish;
	int64_t prompt_tokens;
	int64_t completion_tokens;
	double ttft_ms;       /* submit to first token; -1 if none */
	double prefill_tps;   /* prompt tokens per second */
	double decode_tps;    /* generated tokens per second */
	char message[EMBER_ERR_MAX]; /* GEN_FINISH_ERROR detail */
};

struct gen_sink {
	/* Worker thread: `len` bytes of new text (not NUL-terminated) that
	 * took `n_tokens` tokens. The bytes are only valid during the call. */
	void (*text_cb)(void *data, const char *text, size_t len, int n_tokens);
	/* Worker thread, exactly once, after the last text_cb. */
	void (*done_cb)(void *data, const struct gen_result *res);
	void *data;
};

struct backend;

/* Creates the engine for `cfg` (borrowed; must outlive the backend) and
 * starts loading the model. `metrics` receives the engine gauges. Returns
 * 0 or a negative EMBER_E* code with detail in `err`. */
int backend_new(const struct config *cfg, struct metrics *metrics,
		struct backend **out, char *err);

/* Stops the workers (requests still running get done_cb with
 * GEN_FINISH_CANCELLED first) and frees everything. NULL allowed. */
void backend_free(struct backend *b);

/* Where loading stands; `msg` (may be NULL) gets a line for FAILED. */
enum backend_status backend_status(const struct backend *b, const char **msg);

/* The model's id for /v1/models and responses ("tinyllama-q8_0"), or NULL
 * when none is configured. Valid as long as the backend. */
const char *backend_model_id(const struct backend *b);

/* Queues `req` for generation; on success *id names it for cancel. `req`
 * and `sink` are borrowed until sink->done_cb. Errors above. */
int backend_submit(struct backend *b, const struct gen_request *req,
		   const struct gen_sink *sink, uint64_t *id, char *err);

/* Asks the engine to stop request `id` (unknown ids are ignored). */
void backend_cancel(struct backend *b, uint64_t id);

#endif
