/* metrics.c - Prometheus counters and histograms. See metrics.h. */
#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Seconds; spans a fast first token through a long generation. */
static const double bucket_le[METRICS_NBUCKETS] = {
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
};

void metrics_init(struct metrics *m)
{
	memset(m, 0, sizeof(*m));
	atomic_init(&m->queue_depth, 0);
	atomic_init(&m->slots_busy, 0);
	atomic_init(&m->kv_cache_bytes, 0);
	atomic_init(&m->engine_steps, 0);
	atomic_init(&m->engine_prefill_tokens, 0);
	atomic_init(&m->engine_decode_tokens, 0);
}

void metrics_set_engine_account(struct metrics *m, const struct engine_stats *st)
{
	m->account = *st;
}

static void observe(struct metrics_histogram *h, double v)
{
	size_t i = 0;

	while (i < METRICS_NBUCKETS && v > bucket_le[i])
		i++;
	h->buckets[i]++;
	h->sum += v;
	h->count++;
}

void metrics_count_request(struct metrics *m, const char *endpoint, int status,
			   double duration_s)
{
	size_t i;

	for (i = 0; i < m->n_series; i++)
		if (m->series[i].status == status &&
		    strcmp(m->series[i].endpoint, endpoint) == 0)
			break;
	if (i == m->n_series) {
		if (m->n_series == METRICS_MAX_SERIES) {
			/* The last slot doubles as the overflow bucket. */
			i = METRICS_MAX_SERIES - 1;
			m->series[i].endpoint = "other";
			m->series[i].status = 0;
		} else {
			m->series[i].endpoint = endpoint;
			m->series[i].status = status;
			m->n_series++;
		}
	}
	m->series[i].count++;
	observe(&m->duration, duration_s);
}

void metrics_count_generation(struct metrics *m, uint64_t prompt_tokens,
			      uint64_t gen_tokens, double ttft_s)
{
	m->prompt_tokens += prompt_tokens;
	m->gen_tokens += gen_tokens;
	if (ttft_s >= 0)
		observe(&m->ttft, ttft_s);
}

void metrics_set_queue_depth(struct metrics *m, int64_t n)
{
	atomic_store_explicit(&m->queue_depth, n, memory_order_relaxed);
}

void metrics_set_slots_busy(struct metrics *m, int64_t n)
{
	atomic_store_explicit(&m->slots_busy, n, memory_order_relaxed);
}

void metrics_set_engine_counts(struct metrics *m, uint64_t steps, uint64_t prefill,
			       uint64_t decode)
{
	atomic_store_explicit(&m->engine_steps, steps, memory_order_relaxed);
	atomic_store_explicit(&m->engine_prefill_tokens, prefill, memory_order_relaxed);
	atomic_store_explicit(&m->engine_decode_tokens, decode, memory_order_relaxed);
}

void metrics_set_kv_cache_bytes(struct metrics *m, int64_t n)
{
	atomic_store_explicit(&m->kv_cache_bytes, n, memory_order_relaxed);
}

static void write_histogram(FILE *f, const char *name, const char *help,
			    const struct metrics_histogram *h)
{
	uint64_t cum = 0;
	size_t i;

	fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (i = 0; i < METRICS_NBUCKETS; i++) {
		cum += h->buckets[i];
		fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, bucket_le[i],
			(unsigned long long)cum);
	}
	cum += h->buckets[METRICS_NBUCKETS];
	fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name,
		(unsigned long long)cum);
	fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name,
		(unsigned long long)h->count);
}

static void write_gauge(FILE *f, const char *name, const char *help,
			long long v)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n%s %lld\n", name, help, name,
		name, v);
}

/* The per-phase account: where the workers' time went (engine.h). */
static void write_account(FILE *f, const struct engine_stats *a)
{
	const char *phase[] = {"prefill", "mixed", "decode", "emit", "between"};
	const double secs[] = {a->prefill_s, a->mixed_s, a->decode_s, a->emit_s, a->between_s};
	size_t i;

	fputs("# HELP ember_engine_step_seconds_total Worker time by phase: passes with "
	      "prompt tokens only (prefill), with prompt and decode tokens (mixed), decode "
	      "only (decode); sampling and delivering tokens (emit); between steps while "
	      "busy (between).\n# TYPE ember_engine_step_seconds_total counter\n", f);
	for (i = 0; i < sizeof(secs) / sizeof(secs[0]); i++)
		fprintf(f, "ember_engine_step_seconds_total{phase=\"%s\"} %.6f\n", phase[i],
			secs[i]);
	fprintf(f, "# HELP ember_engine_step_cpu_seconds_total Process CPU time (all threads) "
		"in passes by phase.\n# TYPE ember_engine_step_cpu_seconds_total counter\n"
		"ember_engine_step_cpu_seconds_total{phase=\"prefill\"} %.6f\n"
		"ember_engine_step_cpu_seconds_total{phase=\"mixed\"} %.6f\n"
		"ember_engine_step_cpu_seconds_total{phase=\"decode\"} %.6f\n",
		a->prefill_cpu_s, a->mixed_cpu_s, a->decode_cpu_s);
	fputs("# HELP ember_engine_decode_steps_total Decode-only passes by the sequences "
	      "in them (16: 16 or more).\n# TYPE ember_engine_decode_steps_total counter\n", f);
	for (i = 1; i <= ENGINE_STATS_BATCH; i++)
		fprintf(f, "ember_engine_decode_steps_total{batch=\"%zu\"} %llu\n", i,
			(unsigned long long)a->decode_steps[i]);
	fputs("# HELP ember_engine_decode_step_seconds_total Time in decode-only passes by "
	      "the sequences in them.\n# TYPE ember_engine_decode_step_seconds_total counter\n",
	      f);
	for (i = 1; i <= ENGINE_STATS_BATCH; i++)
		fprintf(f, "ember_engine_decode_step_seconds_total{batch=\"%zu\"} %.6f\n", i,
			a->decode_steps_s[i]);
	fputs("# HELP ember_engine_decode_step_cpu_seconds_total Process CPU time in "
	      "decode-only passes by the sequences in them.\n"
	      "# TYPE ember_engine_decode_step_cpu_seconds_total counter\n", f);
	for (i = 1; i <= ENGINE_STATS_BATCH; i++)
		fprintf(f, "ember_engine_decode_step_cpu_seconds_total{batch=\"%zu\"} %.6f\n", i,
			a->decode_steps_cpu_s[i]);
	fprintf(f, "# HELP ember_engine_partial_steps_total Steps that ran while a busy "
		"sequence was not in them.\n# TYPE ember_engine_partial_steps_total counter\n"
		"ember_engine_partial_steps_total %llu\n"
		"# HELP ember_engine_left_out_total Busy sequences left out of steps, summed "
		"over steps.\n# TYPE ember_engine_left_out_total counter\n"
		"ember_engine_left_out_total %llu\n"
		"# HELP ember_engine_prefill_steps_total Passes that carried prompt tokens.\n"
		"# TYPE ember_engine_prefill_steps_total counter\n"
		"ember_engine_prefill_steps_total %llu\n",
		(unsigned long long)a->partial_steps, (unsigned long long)a->left_out,
		(unsigned long long)a->prefill_steps);
}

char *metrics_render(struct metrics *m, size_t *len)
{
	char *out = NULL;
	size_t size = 0, i;
	FILE *f = open_memstream(&out, &size);

	if (f == NULL)
		return NULL;
	fputs("# HELP ember_requests_total HTTP requests by endpoint and status.\n"
	      "# TYPE ember_requests_total counter\n", f);
	for (i = 0; i < m->n_series; i++)
		fprintf(f, "ember_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n",
			m->series[i].endpoint, m->series[i].status,
			(unsigned long long)m->series[i].count);
	fprintf(f, "# HELP ember_prompt_tokens_total Prompt tokens processed.\n"
		"# TYPE ember_prompt_tokens_total counter\n"
		"ember_prompt_tokens_total %llu\n",
		(unsigned long long)m->prompt_tokens);
	fprintf(f, "# HELP ember_generated_tokens_total Tokens generated.\n"
		"# TYPE ember_generated_tokens_total counter\n"
		"ember_generated_tokens_total %llu\n",
		(unsigned long long)m->gen_tokens);
	write_histogram(f, "ember_time_to_first_token_seconds",
			"Time from request to first generated token.", &m->ttft);
	write_histogram(f, "ember_request_duration_seconds",
			"Time from request to last byte queued.", &m->duration);
	write_gauge(f, "ember_requests_in_flight", "Requests being served.",
		    (long long)m->in_flight);
	write_gauge(f, "ember_connections", "Open client connections.",
		    (long long)m->connections);
	fprintf(f, "# HELP ember_header_timeouts_total Connections closed for "
		"not sending a request header within header_timeout.\n"
		"# TYPE ember_header_timeouts_total counter\n"
		"ember_header_timeouts_total %llu\n"
		"# HELP ember_streams_unread_total Streams cancelled because "
		"their client left stream_buffer_kb unread.\n"
		"# TYPE ember_streams_unread_total counter\n"
		"ember_streams_unread_total %llu\n",
		(unsigned long long)m->header_timeouts,
		(unsigned long long)m->streams_unread);
	write_gauge(f, "ember_queue_depth", "Requests waiting for a slot.",
		    (long long)atomic_load(&m->queue_depth));
	write_gauge(f, "ember_slots_busy", "Slots running a sequence.",
		    (long long)atomic_load(&m->slots_busy));
	write_gauge(f, "ember_kv_cache_bytes", "Bytes of KV cache in use.",
		    (long long)atomic_load(&m->kv_cache_bytes));
	fprintf(f, "# HELP ember_engine_steps_total Forward passes run.\n"
		"# TYPE ember_engine_steps_total counter\nember_engine_steps_total %llu\n"
		"# HELP ember_engine_prefill_tokens_total Prompt tokens evaluated.\n"
		"# TYPE ember_engine_prefill_tokens_total counter\n"
		"ember_engine_prefill_tokens_total %llu\n"
		"# HELP ember_engine_decode_tokens_total Generated tokens evaluated.\n"
		"# TYPE ember_engine_decode_tokens_total counter\n"
		"ember_engine_decode_tokens_total %llu\n",
		(unsigned long long)atomic_load(&m->engine_steps),
		(unsigned long long)atomic_load(&m->engine_prefill_tokens),
		(unsigned long long)atomic_load(&m->engine_decode_tokens));
	write_account(f, &m->account);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	if (len != NULL)
		*len = size;
	return out;
}
