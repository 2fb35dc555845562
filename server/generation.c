/* generation.c - one generation over HTTP. See generation.h. */
#include "generation.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_error.h"
#include "api_logprobs.h"
#include "buf.h"
#include "clock.h"
#include "jsonw.h"
#include "sse.h"
#include "stream.h"

struct generation {
	struct http_req *req;      /* NULL once the exchange ended */
	struct backend *backend;
	struct gen_stream *stream; /* NULL when never created */
	struct gen_request gr;     /* owned; the worker reads it until done */
	struct gen_sink sink;      /* borrowed by the backend until done */
	uint64_t id;               /* the backend's, for cancel */
	struct api_meta meta;
	struct jsonw jw;           /* formatting scratch, capacity kept */
	struct sse_buf out;        /* streamed bytes waiting for MHD */
	char *text;                /* non-streamed: all text so far */
	size_t len, cap;
	bool oom;                  /* text was dropped */
	/* logprobs: the generated tokens' records, in order; the first
	 * n_delivered tokens' text has arrived (engine.h), lp_sent of them
	 * are written. A stream drops the records it sent. */
	struct engine_logprobs *lp;
	size_t n_lp, lp_cap, lp_sent;
	int64_t n_delivered;
	size_t text_offset;        /* completions: where the next token starts */
	struct jsonw lpw;          /* the logprobs JSON of the next write */
	bool started;              /* streamed: the status line is out */
	bool done;                 /* the worker's done_cb reached the loop */
	bool ended;                /* streamed: last event queued */
	bool tools_on;             /* chat with tools: the output may hold calls */
	struct tool_stream tools;  /* its splitter (tool_call.h) */
};

static void generation_free(struct generation *g)
{
	stream_release(g->stream);
	gen_request_free(&g->gr);
	jsonw_free(&g->jw);
	jsonw_free(&g->lpw);
	free(g->lp);
	sse_buf_free(&g->out);
	free(g->text);
	tool_stream_free(&g->tools);
	free(g);
}

/* http.c's user_free: the exchange ended. A generation still running is
 * cancelled; its memory goes when the worker's done_cb arrives. */
static void on_exchange_end(void *user)
{
	struct generation *g = user;

	g->req = NULL;
	if (g->done || g->stream == NULL) {
		generation_free(g);
		return;
	}
	backend_cancel(g->backend, g->id);
}

/* The status and OpenAI error for a backend error code (api_error.c's
 * table; the wording is this endpoint's). */
static void error_for(struct generation *g, int code, const char *detail,
		      struct api_error *e)
{
	enum backend_status st = backend_status(g->backend, NULL);

	if (code == EMBER_EBUSY)
		api_error_not_loaded(e, st == BACKEND_LOADING);
	else if (code == EMBER_EFULL) {
		api_error_from_code(e, code, NULL,
				    "The server is busy: %s. Retry later.", detail);
		e->status = backend_full_status(g->backend);
	} else if (code == EMBER_ECANCELED)
		api_error_from_code(e, code, NULL, "The generation was cancelled "
				    "(server shutting down).");
	else
		api_error_from_code(e, code, code != EMBER_ECONTEXT ? NULL
				    : g->gr.kind == GEN_CHAT ? "messages" : "prompt",
				    "%s", detail);
}

static void result_error(struct generation *g, const struct engine_result *r,
			 struct api_error *e)
{
	char msg[EMBER_ERR_MAX];

	if (r->finish == ENGINE_FINISH_CANCELLED) {
		error_for(g, EMBER_ECANCELED, "", e);
	} else if (r->code == EMBER_ECONTEXT) {
		/* OpenAI's wording, which clients match on. */
		snprintf(msg, sizeof(msg), "This model's maximum context length "
			 "is %u tokens. However, your prompt is %lld tokens long. "
			 "Please reduce the length of the prompt.",
			 (unsigned)r->n_ctx, (long long)r->prompt_tokens);
		error_for(g, EMBER_ECONTEXT, msg, e);
	} else {
		error_for(g, r->code ? r->code : EMBER_EIO, r->message, e);
	}
}

static void note_result(struct http_req *req, const struct engine_result *r)
{
	req->prompt_tokens = (long)r->prompt_tokens;
	req->gen_tokens = (long)r->completion_tokens;
	if (r->ttft_ms >= 0)
		req->ttft_ms = r->ttft_ms;
}

static void append_text(struct generation *g, const char *text, size_t len)
{
	if (len == 0 || g->oom)
		return;
	if (buf_grow(&g->text, &g->cap, g->len + len, 1024, 0) != 0) {
		g->oom = true;
		return;
	}
	memcpy(g->text + g->len, text, len);
	g->len += len;
}

/* Keeps the chunk's token records; false when out of memory. */
static bool keep_logprobs(struct generation *g, const struct stream_chunk *c)
{
	g->n_delivered += c->n_tokens;
	if (c->n_lp == 0)
		return true;
	if (buf_grow(&g->lp, &g->lp_cap, (g->n_lp + c->n_lp) * sizeof(*g->lp),
		     64 * sizeof(*g->lp), 0) != 0)
		return false;
	memcpy(g->lp + g->n_lp, c->lp, c->n_lp * sizeof(*g->lp));
	g->n_lp += c->n_lp;
	return true;
}

/* Points meta.logprobs at the JSON of the delivered tokens not sent yet
 * (NULL without logprobs). A final end-of-generation token has no record,
 * and tokens a stop string swallowed are never delivered. */
static void logprobs_ready(struct generation *g)
{
	size_t ready = g->n_delivered < (int64_t)g->n_lp ? (size_t)g->n_delivered : g->n_lp;

	g->meta.logprobs = NULL;
	if (!g->gr.logprobs)
		return;
	api_logprobs_write(&g->lpw, g->meta.fmt, g->backend, g->lp + g->lp_sent,
			   ready - g->lp_sent, &g->text_offset);
	g->lp_sent = ready;
	/* A stream keeps only the records not sent yet. */
	if (g->gr.stream) {
		memmove(g->lp, g->lp + ready, (g->n_lp - ready) * sizeof(*g->lp));
		g->n_lp -= ready;
		g->n_delivered -= (int64_t)ready;
		g->lp_sent = 0;
	}
	if (!jsonw_ok(&g->lpw))
		g->oom = true;
	else
		g->meta.logprobs = g->lpw.data;
}

/* llama.cpp's stopping_word: the client's stop string that ended it. */
static void note_stop(struct generation *g, const struct engine_result *r)
{
	if (r->stop_index >= 0 && (size_t)r->stop_index < g->gr.n_stop)
		g->meta.stopping_word = g->gr.stop[r->stop_index];
}

/* Non-streamed with tools: answers with the calls and returns true, or
 * returns false when the text holds none. */
static bool body_tools(struct generation *g, const struct engine_result *r)
{
	struct tool_parse p;

	if (tool_call_parse(g->tools.family, g->text ? g->text : "", g->len, &p) != 0) {
		http_respond_json(g->req, 500, NULL);
		return true;
	}
	if (p.n_calls == 0)
		return false;
	api_response_body_tools(&g->jw, &g->meta, g->text, &p, r);
	tool_parse_free(&p);
	http_respond_json(g->req, 200, jsonw_take(&g->jw));
	return true;
}

/* Non-streamed: collect text, answer once at the end. */
static void body_update(struct generation *g, const struct stream_chunk *c)
{
	struct api_error e;

	append_text(g, c->text, c->len);
	if (!c->done)
		return;
	note_result(g->req, &c->result);
	if (c->result.finish == ENGINE_FINISH_ERROR ||
	    c->result.finish == ENGINE_FINISH_CANCELLED) {
		result_error(g, &c->result, &e);
		http_respond_error(g->req, &e);
		return;
	}
	logprobs_ready(g);
	note_stop(g, &c->result);
	if (g->oom) {
		http_respond_json(g->req, 500, NULL);
		return;
	}
	if (g->tools_on && body_tools(g, &c->result))
		return;
	api_response_body(&g->jw, &g->meta, g->text ? g->text : "", g->len,
			  &c->result);
	http_respond_json(g->req, 200, jsonw_take(&g->jw));
}

static void push_json(struct generation *g)
{
	if (!jsonw_ok(&g->jw) ||
	    sse_buf_push_event(&g->out, g->jw.data, g->jw.len) != 0)
		g->oom = true;
}

static ssize_t stream_read(void *data, char *buf, size_t max)
{
	struct generation *g = data;
	size_t n = sse_buf_read(&g->out, buf, max);

	if (n > 0)
		return (ssize_t)n;
	/* Out of memory for the output: cut the stream rather than send a
	 * response with holes in it. */
	return g->ended || g->oom ? -1 : 0;
}

static void push_text(struct generation *g, const char *text, size_t len)
{
	if (len == 0)
		return;
	api_response_chunk_text(&g->jw, &g->meta, text, len);
	push_json(g);
}

/* The end of a streamed chat with tools: held-back content, then each
 * call as two deltas (id and name, then the arguments) and the
 * "tool_calls" finish. Returns false when there were no calls (the caller
 * sends the usual finish). */
static bool stream_tools(struct generation *g)
{
	struct tool_parse p;
	const char *rest;
	size_t n, calls;

	if (tool_stream_finish(&g->tools, &rest, &n, &p) != 0) {
		g->oom = true;
		return false;
	}
	push_text(g, rest, n);
	for (size_t i = 0; i < p.n_calls; i++) {
		api_response_chunk_tool_call(&g->jw, &g->meta, i, &p.calls[i], true);
		push_json(g);
		api_response_chunk_tool_call(&g->jw, &g->meta, i, &p.calls[i], false);
		push_json(g);
	}
	calls = p.n_calls;
	if (calls > 0) {
		api_response_chunk_finish_tools(&g->jw, &g->meta);
		push_json(g);
	}
	tool_parse_free(&p);
	return calls > 0;
}

static void stream_finish(struct generation *g, const struct engine_result *r)
{
	struct api_error e;
	char *json;

	if (r->finish == ENGINE_FINISH_ERROR || r->finish == ENGINE_FINISH_CANCELLED) {
		result_error(g, r, &e);
		json = api_error_json(&e);
		if (json == NULL ||
		    sse_buf_push_event(&g->out, json, strlen(json)) != 0)
			g->oom = true;
		free(json);
	} else if (g->tools_on && stream_tools(g)) {
		if (api_response_chunk_usage(&g->jw, &g->meta, r))
			push_json(g);
	} else {
		note_stop(g, r);
		api_response_chunk_finish(&g->jw, &g->meta, r);
		push_json(g);
		if (api_response_chunk_usage(&g->jw, &g->meta, r))
			push_json(g);
	}
	/* llama-server ends its streams without [DONE]. */
	if (g->meta.fmt != API_FMT_LLAMACPP && sse_buf_push_done(&g->out) != 0)
		g->oom = true;
	g->ended = true;
}

/* Streamed: the status goes out with the first event, so an error found
 * before any text still gets its own status. */
static void stream_update(struct generation *g, const struct stream_chunk *c)
{
	struct api_error e;

	if (!g->started) {
		if (c->len == 0 && !c->done)
			return;
		if (c->len == 0 && c->done &&
		    (c->result.finish == ENGINE_FINISH_ERROR ||
		     c->result.finish == ENGINE_FINISH_CANCELLED)) {
			note_result(g->req, &c->result);
			result_error(g, &c->result, &e);
			http_respond_error(g->req, &e);
			return;
		}
		g->started = true;
		if (http_respond_stream(g->req, 200, "text/event-stream",
					stream_read, g) != 0)
			return;
		if (api_response_chunk_start(&g->jw, &g->meta))
			push_json(g);
		if (g->gr.echo) {
			api_response_chunk_text(&g->jw, &g->meta, g->gr.prompt,
						g->gr.prompt_len);
			push_json(g);
		}
	}
	if (c->len > 0 && g->tools_on) {
		const char *out;
		size_t n;

		logprobs_ready(g);
		if (tool_stream_feed(&g->tools, c->text, c->len, &out, &n) != 0)
			g->oom = true;
		push_text(g, out, n);
		g->meta.logprobs = NULL;
	} else if (c->len > 0) {
		logprobs_ready(g);
		api_response_chunk_text(&g->jw, &g->meta, c->text, c->len);
		g->meta.logprobs = NULL;
		push_json(g);
	}
	if (c->done) {
		note_result(g->req, &c->result);
		stream_finish(g, &c->result);
	}
	http_req_resume(g->req);
}

static void on_update(void *data, struct gen_stream *s)
{
	struct generation *g = data;
	struct stream_chunk c;

	stream_take(s, &c);
	if (c.done)
		g->done = true;
	if (!keep_logprobs(g, &c))
		g->oom = true;
	if (g->req == NULL) {
		if (c.done)
			generation_free(g);
		return;
	}
	if (c.n_tokens > 0) {
		/* Running counts, so a request cut short still logs them. */
		if (g->req->gen_tokens < 0)
			g->req->gen_tokens = 0;
		if (g->req->ttft_ms < 0)
			g->req->ttft_ms =
				(double)(clock_now_ns() - g->req->start_ns) / 1e6;
		g->req->gen_tokens += c.n_tokens;
	}
	if (g->gr.stream)
		stream_update(g, &c);
	else
		body_update(g, &c);
}

void generation_start(uv_loop_t *loop, struct backend *b, struct http_req *req,
		      struct gen_request *gr, enum api_format fmt,
		      const char *model)
{
	struct generation *g = calloc(1, sizeof(*g));
	char detail[EMBER_ERR_MAX] = "";
	struct api_error e;
	int rc;

	if (g == NULL) {
		gen_request_free(gr);
		http_respond_json(req, 500, NULL);
		return;
	}
	g->gr = *gr;
	memset(gr, 0, sizeof(*gr));
	g->req = req;
	g->backend = b;
	jsonw_init(&g->jw);
	sse_buf_init(&g->out);
	api_meta_init(&g->meta, fmt, model, g->gr.include_usage);
	jsonw_init(&g->lpw);
	/* echo: the prompt leads the text (completions only; the parser
	 * refuses it elsewhere) */
	if (g->gr.echo) {
		g->text_offset = g->gr.prompt_len;
		if (!g->gr.stream)
			append_text(g, g->gr.prompt, g->gr.prompt_len);
	}
	g->tools_on = fmt == API_FMT_CHAT && g->gr.tool_mode != GEN_TOOLS_OFF;
	tool_stream_init(&g->tools, backend_tool_family(b));
	if (stream_new(loop, on_update, g, &g->stream) != 0) {
		generation_free(g);
		http_respond_json(req, 500, NULL);
		return;
	}
	g->sink = stream_sink(g->stream);
	if (g->gr.tools != NULL && backend_status(b, NULL) == BACKEND_READY &&
	    !backend_renders_tools(b)) {
		api_error_set(&e, 400, API_ERR_INVALID_REQUEST, "tools", "unsupported_parameter",
			      "'tools' needs a chat template that shows tool definitions to the "
			      "model, and this model's does not (serve it with "
			      "--chat-template-file=T.jinja).");
		stream_abandon_worker(g->stream);
		generation_free(g);
		http_respond_error(req, &e);
		return;
	}
	rc = backend_submit(b, &g->gr, &g->sink, &g->id, detail);
	if (rc != 0) {
		stream_abandon_worker(g->stream);
		error_for(g, rc, detail, &e);
		generation_free(g);
		http_respond_error(req, &e);
		return;
	}
	req->user = g;
	req->user_free = on_exchange_end;
}
