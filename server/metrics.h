/*
 * metrics.h - counters, histograms and gauges, rendered as Prometheus text
 * (exposition format 0.0.4) for GET /metrics:
 *
 *   ember_requests_total{endpoint,status}   counter
 *   ember_prompt_tokens_total               counter
 *   ember_generated_tokens_total            counter
 *   ember_time_to_first_token_seconds       histogram
 *   ember_request_duration_seconds          histogram
 *   ember_requests_in_flight                gauge (loop)
 *   ember_queue_depth, ember_slots_busy,
 *   ember_kv_cache_bytes                    gauges (set by the engine)
 *   ember_engine_steps_total,
 *   ember_engine_prefill_tokens_total,
 *   ember_engine_decode_tokens_total        counters (the engine's own:
 *                                           forward passes, prompt tokens
 *                                           evaluated, tokens decoded)
 *   ember_engine_step_seconds_total{phase}, counters: the scheduler's
 *   ember_engine_decode_steps_total{batch}, per-phase account (engine.h
 *   ember_engine_decode_step_seconds_total{batch},   engine_stats): time in
 *   ember_engine_step_cpu_seconds_total{phase},  (and process CPU time in)
 *   ember_engine_decode_step_cpu_seconds_total{batch},
 *   ember_engine_partial_steps_total,       passes by kind, emitting,
 *   ember_engine_left_out_total             between steps; decode-only
 *                                           steps by sequences; steps
 *                                           that left busy sequences out
 *
 * Threads: the loop thread owns the counters and histograms (it sees every
 * request finish); the engine-side gauges are atomics that any thread may
 * set. Endpoint labels are the route names (a fixed set), so the label
 * space stays bounded whatever clients send.
 */
#ifndef EMBER_METRICS_H
#define EMBER_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

#define METRICS_NBUCKETS 14  /* upper bounds in metrics.c, then +Inf */
#define METRICS_MAX_SERIES 64

struct metrics_histogram {
	uint64_t buckets[METRICS_NBUCKETS + 1];  /* per bucket, not cumulative */
	double sum;
	uint64_t count;
};

struct metrics_series {
	const char *endpoint;  /* a route name: static storage, not owned */
	int status;
	uint64_t count;
};

struct metrics {
	/* loop thread */
	struct metrics_series series[METRICS_MAX_SERIES];
	size_t n_series;
	uint64_t prompt_tokens;
	uint64_t gen_tokens;
	int64_t in_flight;
	int64_t connections;       /* open (http.h) */
	uint64_t header_timeouts;  /* connections cut by header_timeout */
	uint64_t streams_unread;   /* streams cancelled: stream_buffer_kb unread */
	struct metrics_histogram ttft;
	struct metrics_histogram duration;
	struct engine_stats account; /* the per-phase account's fields */
	/* any thread */
	_Atomic int64_t queue_depth;
	_Atomic int64_t slots_busy;
	_Atomic int64_t kv_cache_bytes;
	_Atomic uint64_t engine_steps, engine_prefill_tokens, engine_decode_tokens;
};

/* Zeroes everything. */
void metrics_init(struct metrics *m);

/* Counts one finished request. `endpoint` must be static storage (a route
 * name or "unmatched"). Once METRICS_MAX_SERIES pairs exist, new pairs are
 * counted under endpoint "other". Loop thread. */
void metrics_count_request(struct metrics *m, const char *endpoint, int status,
			   double duration_s);

/* Adds a generation's token counts and, if ttft_s >= 0, its time to first
 * token. Loop thread. */
void metrics_count_generation(struct metrics *m, uint64_t prompt_tokens,
			      uint64_t gen_tokens, double ttft_s);

/* Engine-side gauges: any thread. */
void metrics_set_queue_depth(struct metrics *m, int64_t n);
void metrics_set_slots_busy(struct metrics *m, int64_t n);
void metrics_set_kv_cache_bytes(struct metrics *m, int64_t n);
/* The engine's counters (engine_stats): steps, prefill and decode tokens. */
void metrics_set_engine_counts(struct metrics *m, uint64_t steps, uint64_t prefill,
			       uint64_t decode);

/* The scheduler's per-phase account (engine_stats' seconds and step
 * counts), copied from `st`. Loop thread. */
void metrics_set_engine_account(struct metrics *m, const struct engine_stats *st);

/* Renders the exposition text. Returns a malloc'd NUL-terminated string
 * (length in *len) the caller frees, or NULL when out of memory. */
char *metrics_render(struct metrics *m, size_t *len);

#endif
