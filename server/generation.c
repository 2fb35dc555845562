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

/* One choice: a prompt's j-th generation, with its own stream from the
 * worker. */
struct choice {
	struct generation *g;
	uint32_t index;            /* OpenAI's: prompt * n + j */
	struct gen_stream *stream; /* NULL when never created */
	struct gen_sink sink;      /* borrowed by the backend until done */
	char *text;                /* non-streamed: all text so far */
	size_t len, cap;
	bool role_sent;            /* streamed: its role chunk (and echo) is out */
	bool done;                 /* the worker's done_cb reached the loop */
	struct engine_result res;  /* when done */
	/* logprobs: the generated tokens' records, in order; the first
	 * n_delivered tokens' text has arrived (engine.h), lp_sent of them
	 * are written. A stream drops the records it sent. */
	struct engine_logprobs *lp;
	size_t n_lp, lp_cap, lp_sent;
	int64_t n_delivered;
	size_t text_offset;        /* completions: where the next token starts */
	struct jsonw lpw;          /* the logprobs JSON of the next write */
	struct tool_stream tools;  /* chat with tools: its splitter (tool_call.h) */
};

struct generation {
	struct http_req *req;      /* NULL once the exchange ended */
	struct backend *backend;
	struct gen_request gr;     /* owned; the worker reads it until done */
	struct choice *ch;         /* [n_ch] = prompts * gr.n, in index order */
	size_t n_ch;
	size_t n_live;             /* choices submitted whose done has not come */
	uint64_t *ids;             /* [prompts] the backend's, for cancel */
	size_t n_ids;              /* prompts submitted */
	struct api_meta meta;
	struct jsonw jw;           /* formatting scratch, capacity kept */
	struct sse_buf out;        /* streamed bytes waiting for MHD */
	const struct choice *bad;  /* the first choice that failed, or NULL */
	bool oom;                  /* text was dropped */
	bool started;              /* streamed: the status line is out */
	bool ended;                /* streamed: last event queued */
	bool tools_on;             /* chat with tools (one choice): calls may come */
	bool unread;               /* streamed: cancelled, the client left
				    * stream_buffer bytes unread */
};

static void generation_free(struct generation *g)
{
	size_t i;

	for (i = 0; g->ch && i < g->n_ch; i++) {
		stream_release(g->ch[i].stream);
		free(g->ch[i].text);
		free(g->ch[i].lp);
		jsonw_free(&g->ch[i].lpw);
		tool_stream_free(&g->ch[i].tools);
	}
	free(g->ch);
	free(g->ids);
	gen_request_free(&g->gr);
	jsonw_free(&g->jw);
	sse_buf_free(&g->out);
	free(g);
}

static void cancel_all(struct generation *g)
{
	size_t i;

	for (i = 0; i < g->n_ids; i++)
		backend_cancel(g->backend, g->ids[i]);
}

/* http.c's user_free: the exchange ended. Choices still running are
 * cancelled; the memory goes when the last done_cb arrives. */
static void on_exchange_end(void *user)
{
	struct generation *g = user;

	g->req = NULL;
	if (g->n_live == 0) {
		generation_free(g);
		return;
	}
	cancel_all(g);
}

/* The status and OpenAI error for a backend error code (api_error.c's
 * table; the wording is this endpoint's). */
static void error_for(struct generation *g, int code, const char *detail,
		      struct api_error *e)
{
	const char *why = NULL;
	enum backend_status st = backend_status(g->backend, &why);

	if (code == EMBER_EBUSY && st == BACKEND_FAILED)
		api_error_model_failed(e, why);
	else if (code == EMBER_EBUSY)
		api_error_not_loaded(e, st == BACKEND_LOADING);
	else if (code == EMBER_EFULL) {
		api_error_from_code(e, code, NULL,
				    "The server is busy: %s. Retry later.", detail);
		e->status = backend_full_status(g->backend);
	} else if (code == EMBER_ECANCELED)
		api_error_from_code(e, code, NULL, "The generation was cancelled "
				    "(server shutting down).");
	else
		api_error_from_code(e, code, code == EMBER_ERANGE ? "prompt"
				    : code != EMBER_ECONTEXT ? NULL
				    : g->gr.kind == GEN_CHAT ? "messages" : "prompt",
				    "%s", detail);
}

static void result_error(struct generation *g, const struct engine_result *r,
			 struct api_error *e)
{
	char msg[EMBER_ERR_MAX];

	if (g->unread) {
		api_error_from_code(e, EMBER_ECANCELED, NULL, "The generation was cancelled: "
				    "the client left more than %zu KiB of the stream unread "
				    "(stream_buffer_kb).", g->req->hs->opt.stream_buffer / 1024);
	} else if (r->finish == ENGINE_FINISH_CANCELLED) {
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

static bool failed(const struct engine_result *r)
{
	return r->finish == ENGINE_FINISH_ERROR || r->finish == ENGINE_FINISH_CANCELLED;
}

/* The usage of the whole response: each prompt counted once (its first
 * choice's prompt and cached tokens: the choices share its prefill), the
 * completions of every choice summed; the rest from choice 0. */
static void usage_sum(const struct generation *g, struct engine_result *u)
{
	size_t i;

	*u = g->ch[0].res;
	u->prompt_tokens = u->cached_tokens = u->completion_tokens = 0;
	for (i = 0; i < g->n_ch; i++) {
		if (i % g->gr.n == 0) {
			u->prompt_tokens += g->ch[i].res.prompt_tokens;
			u->cached_tokens += g->ch[i].res.cached_tokens;
		}
		u->completion_tokens += g->ch[i].res.completion_tokens;
	}
}

void generation_note_result(struct http_req *req, const struct engine_result *r)
{
	req->prompt_tokens = (long)r->prompt_tokens;
	req->gen_tokens = (long)r->completion_tokens;
	if (r->ttft_ms >= 0)
		req->ttft_ms = r->ttft_ms;
}

static void append_text(struct generation *g, struct choice *c, const char *text, size_t len)
{
	if (len == 0 || g->oom)
		return;
	if (buf_grow(&c->text, &c->cap, c->len + len, 1024, 0) != 0) {
		g->oom = true;
		return;
	}
	memcpy(c->text + c->len, text, len);
	c->len += len;
}

/* Keeps the chunk's token records of choice `ch`; false when out of
 * memory. */
static bool keep_logprobs(struct choice *ch, const struct stream_chunk *c)
{
	ch->n_delivered += c->n_tokens;
	if (c->n_lp == 0)
		return true;
	if (buf_grow(&ch->lp, &ch->lp_cap, (ch->n_lp + c->n_lp) * sizeof(*ch->lp),
		     64 * sizeof(*ch->lp), 0) != 0)
		return false;
	memcpy(ch->lp + ch->n_lp, c->lp, c->n_lp * sizeof(*ch->lp));
	ch->n_lp += c->n_lp;
	return true;
}

/* Points meta.logprobs at the JSON of choice ch's delivered tokens not
 * sent yet (NULL without logprobs); the JSON stays in ch->lpw until its
 * next call. A final end-of-generation token has no record, and tokens a
 * stop string swallowed are never delivered. */
static void logprobs_ready(struct generation *g, struct choice *ch)
{
	size_t ready = ch->n_delivered < (int64_t)ch->n_lp ? (size_t)ch->n_delivered : ch->n_lp;

	g->meta.logprobs = NULL;
	if (!g->gr.logprobs)
		return;
	api_logprobs_write(&ch->lpw, g->meta.fmt, g->backend, ch->lp + ch->lp_sent,
			   ready - ch->lp_sent, &ch->text_offset);
	ch->lp_sent = ready;
	/* A stream keeps only the records not sent yet. */
	if (g->gr.stream) {
		memmove(ch->lp, ch->lp + ready, (ch->n_lp - ready) * sizeof(*ch->lp));
		ch->n_lp -= ready;
		ch->n_delivered -= (int64_t)ready;
		ch->lp_sent = 0;
	}
	if (!jsonw_ok(&ch->lpw))
		g->oom = true;
	else
		g->meta.logprobs = ch->lpw.data;
}

/* llama.cpp's stopping_word: the client's stop string that ended it. */
static void note_stop(struct generation *g, const struct engine_result *r)
{
	g->meta.stopping_word = NULL;
	if (r->stop_index >= 0 && (size_t)r->stop_index < g->gr.n_stop)
		g->meta.stopping_word = g->gr.stop[r->stop_index];
}

/* Non-streamed with tools (one choice): answers with the calls and
 * returns true, or returns false when the text holds none. */
static bool body_tools(struct generation *g, struct choice *ch, const struct engine_result *r)
{
	struct tool_parse p;

	if (tool_call_parse(ch->tools.family, ch->text ? ch->text : "", ch->len, &p) != 0) {
		http_respond_json(g->req, 500, NULL);
		return true;
	}
	if (p.n_calls == 0)
		return false;
	api_response_body_tools(&g->jw, &g->meta, ch->text, &p, r);
	tool_parse_free(&p);
	http_respond_json(g->req, 200, jsonw_take(&g->jw));
	return true;
}

/* Non-streamed: collect text, answer once every choice is done (an error
 * of any choice answers for the whole request). */
static void body_update(struct generation *g, struct choice *ch, const struct stream_chunk *c)
{
	struct api_choice stack[4], *out = stack;
	struct engine_result u;
	struct api_error e;
	size_t i;

	append_text(g, ch, c->text, c->len);
	if (c->done && failed(&c->result) && g->n_live > 0)
		cancel_all(g); /* the answer is an error whatever the others give */
	if (g->n_live > 0)
		return;
	usage_sum(g, &u);
	generation_note_result(g->req, &u);
	/* The file changed while this ran: its text may come from the new
	 * bytes under the old index. Never answer it. */
	if (g->bad == NULL && backend_model_changed(g->backend)) {
		error_for(g, EMBER_EBUSY, "", &e);
		http_respond_error(g->req, &e);
		return;
	}
	if (g->bad != NULL) {
		result_error(g, &g->bad->res, &e);
		http_respond_error(g->req, &e);
		return;
	}
	if (g->n_ch > 4 && !(out = malloc(g->n_ch * sizeof(*out))))
		g->oom = true;
	for (i = 0; !g->oom && i < g->n_ch; i++) {
		logprobs_ready(g, &g->ch[i]);
		out[i] = (struct api_choice){g->ch[i].text ? g->ch[i].text : "", g->ch[i].len,
					     g->ch[i].res.finish, g->meta.logprobs};
	}
	if (g->oom) {
		if (out != stack)
			free(out);
		http_respond_json(g->req, 500, NULL);
		return;
	}
	/* one choice: the meta carries its logprobs and stop (native and
	 * llama.cpp bodies) */
	g->meta.logprobs = out[0].logprobs;
	note_stop(g, &g->ch[0].res);
	if (g->tools_on && body_tools(g, &g->ch[0], &u)) {
		if (out != stack)
			free(out);
		return;
	}
	api_response_body_choices(&g->jw, &g->meta, out, g->n_ch, &u);
	if (out != stack)
		free(out);
	http_respond_json(g->req, 200, jsonw_take(&g->jw));
}

static void push_json(struct generation *g)
{
	if (!jsonw_ok(&g->jw) ||
	    sse_buf_push_event(&g->out, g->jw.data, g->jw.len) != 0)
		g->oom = true;
}

static void push_text(struct generation *g, const char *text, size_t len)
{
	if (len == 0)
		return;
	api_response_chunk_text(&g->jw, &g->meta, text, len);
	push_json(g);
}

/* The end of a streamed chat with tools (one choice): held-back content,
 * then each call as two deltas (id and name, then the arguments) and the
 * "tool_calls" finish. Returns false when there were no calls (the caller
 * sends the usual finish). */
static bool stream_tools(struct generation *g, struct choice *ch)
{
	struct tool_parse p;
	const char *rest;
	size_t n, calls;

	if (tool_stream_finish(&ch->tools, &rest, &n, &p) != 0) {
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

/* The stream's last events: an error event (and the other choices
 * cancelled), or the usage once every choice is done; then [DONE]. */
static void stream_finish(struct generation *g, const struct engine_result *r)
{
	struct engine_result u;
	struct api_error e;
	char *json;

	if (failed(r)) {
		result_error(g, r, &e);
		json = api_error_json(&e);
		if (json == NULL ||
		    sse_buf_push_event(&g->out, json, strlen(json)) != 0)
			g->oom = true;
		free(json);
		cancel_all(g);
	} else {
		if (g->n_live > 0)
			return;
		usage_sum(g, &u);
		generation_note_result(g->req, &u);
		if (api_response_chunk_usage(&g->jw, &g->meta, &u))
			push_json(g);
	}
	/* llama-server ends its streams without [DONE]. */
	if (g->meta.fmt != API_FMT_LLAMACPP && sse_buf_push_done(&g->out) != 0)
		g->oom = true;
	g->ended = true;
}

/* A client that stops reading must not hold a slot and grow our memory
 * until max_tokens: past stream_buffer unread bytes the generation is
 * cancelled; its text from then on is dropped and the stream ends with an
 * error event once every choice is done. */
static void check_unread(struct generation *g)
{
	size_t max = g->req->hs->opt.stream_buffer;

	if (g->unread || g->ended || max == 0 || sse_buf_pending(&g->out) <= max)
		return;
	g->unread = true;
	g->req->hs->n_stream_unread++;
	cancel_all(g);
}

/* Streamed: the status goes out with the first event, so an error found
 * before any text still gets its own status. Choices' events interleave,
 * each naming its index. */
static void stream_update(struct generation *g, struct choice *ch, const struct stream_chunk *c)
{
	struct api_error e;
	struct engine_result r;

	if (g->ended)
		return;
	if (g->unread) {
		if (c->done && g->n_live == 0) {
			r = c->result;
			r.finish = ENGINE_FINISH_CANCELLED;
			stream_finish(g, &r);
			http_req_resume(g->req);
		}
		return;
	}
	if (!g->started) {
		if (c->len == 0 && !c->done)
			return;
		if (c->len == 0 && c->done && failed(&c->result)) {
			generation_note_result(g->req, &c->result);
			result_error(g, &c->result, &e);
			http_respond_error(g->req, &e);
			return;
		}
		g->started = true;
		if (http_respond_stream(g->req, 200, "text/event-stream",
					stream_read, g) != 0)
			return;
	}
	g->meta.index = ch->index;
	g->meta.logprobs = NULL;
	if (!ch->role_sent && (c->len > 0 || (c->done && !failed(&c->result)))) {
		ch->role_sent = true;
		if (api_response_chunk_start(&g->jw, &g->meta))
			push_json(g);
		if (g->gr.echo) /* completions, one text prompt (the parser's rule) */
			push_text(g, g->gr.prompt, g->gr.prompt_len);
	}
	if (c->len > 0 && g->tools_on) {
		const char *out;
		size_t n;

		logprobs_ready(g, ch);
		if (tool_stream_feed(&ch->tools, c->text, c->len, &out, &n) != 0)
			g->oom = true;
		push_text(g, out, n);
		g->meta.logprobs = NULL;
	} else if (c->len > 0) {
		logprobs_ready(g, ch);
		api_response_chunk_text(&g->jw, &g->meta, c->text, c->len);
		g->meta.logprobs = NULL;
		push_json(g);
	}
	if (c->done && !failed(&c->result) && backend_model_changed(g->backend)) {
		/* as in body_update; the text already sent cannot be taken
		 * back, but the stream ends with an error, not a finish */
		r = c->result;
		r.finish = ENGINE_FINISH_ERROR;
		r.code = EMBER_EBUSY;
		stream_finish(g, &r);
	} else if (c->done) {
		if (!failed(&c->result) && !(g->tools_on && stream_tools(g, ch))) {
			note_stop(g, &c->result);
			api_response_chunk_finish(&g->jw, &g->meta, &c->result);
			push_json(g);
		}
		if (g->n_ch == 1)
			generation_note_result(g->req, &c->result);
		stream_finish(g, &c->result);
	}
	check_unread(g);
	http_req_resume(g->req);
}

static void on_update(void *data, struct gen_stream *s)
{
	struct choice *ch = data;
	struct generation *g = ch->g;
	struct stream_chunk c;

	stream_take(s, &c);
	if (!keep_logprobs(ch, &c))
		g->oom = true;
	if (c.done) {
		ch->done = true;
		ch->res = c.result;
		g->n_live--;
		if (failed(&c.result) && g->bad == NULL)
			g->bad = ch;
	}
	if (g->req == NULL) {
		if (g->n_live == 0)
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
		stream_update(g, ch, &c);
	else
		body_update(g, ch, &c);
}

/* Submits every prompt; on an error, those already submitted are
 * cancelled and 0 is not returned (their done_cb still come). */
static int submit_all(struct generation *g, size_t n_prompts, char *detail)
{
	struct gen_sink stack[8], *sinks = stack;
	size_t p, j, n = g->gr.n;
	int rc = 0;

	if (n > 8 && !(sinks = malloc(n * sizeof(*sinks))))
		return ember_seterr(detail, EMBER_ENOMEM, "choices");
	for (p = 0; p < n_prompts && rc == 0; p++) {
		for (j = 0; j < n; j++)
			sinks[j] = g->ch[p * n + j].sink;
		rc = backend_submit_prompt(g->backend, &g->gr, p, sinks, &g->ids[p], detail);
		if (rc == 0) {
			g->n_ids++;
			g->n_live += n;
		}
	}
	for (p = g->n_ids * n; p < g->n_ch; p++)
		stream_abandon_worker(g->ch[p].stream);
	if (rc != 0)
		cancel_all(g);
	if (sinks != stack)
		free(sinks);
	return rc;
}

void generation_start(uv_loop_t *loop, struct backend *b, struct http_req *req,
		      struct gen_request *gr, enum api_format fmt,
		      const char *model)
{
	struct generation *g = calloc(1, sizeof(*g));
	char detail[EMBER_ERR_MAX] = "";
	struct api_error e;
	size_t i, n_prompts;
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
	if (g->gr.n == 0)
		g->gr.n = 1;
	if (g->gr.tools != NULL && backend_status(b, NULL) == BACKEND_READY &&
	    !backend_renders_tools(b)) {
		api_error_set(&e, 400, API_ERR_INVALID_REQUEST, "tools", "unsupported_parameter",
			      "'tools' needs a chat template that shows tool definitions to the "
			      "model, and this model's does not (serve it with "
			      "--chat-template-file=T.jinja).");
		generation_free(g);
		http_respond_error(req, &e);
		return;
	}
	n_prompts = gen_request_n_prompts(&g->gr);
	if (n_prompts * g->gr.n > 1024) {
		api_error_from_code(&e, EMBER_EINVAL, "n", "%zu prompts with n = %u make more "
				    "than 1024 choices.", n_prompts, g->gr.n);
		generation_free(g);
		http_respond_error(req, &e);
		return;
	}
	/* The native and llama.cpp shapes hold one completion. */
	if (n_prompts * g->gr.n > 1 && (fmt == API_FMT_NATIVE || fmt == API_FMT_LLAMACPP)) {
		api_error_set(&e, 400, API_ERR_INVALID_REQUEST, g->gr.n > 1 ? "n" : "prompt",
			      "unsupported_value", "this endpoint answers one completion: n = 1 "
			      "and one prompt (use /v1/completions for more).");
		generation_free(g);
		http_respond_error(req, &e);
		return;
	}
	g->n_ch = n_prompts * g->gr.n;
	g->ch = calloc(g->n_ch, sizeof(*g->ch));
	g->ids = calloc(n_prompts, sizeof(*g->ids));
	if (g->ch == NULL || g->ids == NULL) {
		generation_free(g);
		http_respond_json(req, 500, NULL);
		return;
	}
	/* tools with several choices are refused by the parser */
	g->tools_on = fmt == API_FMT_CHAT && g->gr.tool_mode != GEN_TOOLS_OFF && g->n_ch == 1;
	for (i = 0; i < g->n_ch; i++) {
		g->ch[i].g = g;
		g->ch[i].index = (uint32_t)i;
		jsonw_init(&g->ch[i].lpw);
		tool_stream_init(&g->ch[i].tools, backend_tool_family(b));
		/* echo: the prompt leads each choice's text (completions with
		 * one text prompt only; the parser refuses the rest) */
		if (g->gr.echo) {
			g->ch[i].text_offset = g->gr.prompt_len;
			if (!g->gr.stream)
				append_text(g, &g->ch[i], g->gr.prompt, g->gr.prompt_len);
		}
		if (stream_new(loop, on_update, &g->ch[i], &g->ch[i].stream) != 0) {
			while (i-- > 0)
				stream_abandon_worker(g->ch[i].stream);
			generation_free(g);
			http_respond_json(req, 500, NULL);
			return;
		}
		g->ch[i].sink = stream_sink(g->ch[i].stream);
	}
	rc = submit_all(g, n_prompts, detail);
	if (rc != 0) {
		error_for(g, rc, detail, &e);
		if (g->n_live == 0)
			generation_free(g);
		else
			g->req = NULL; /* freed when the submitted ones are done */
		http_respond_error(req, &e);
		return;
	}
	req->user = g;
	req->user_free = on_exchange_end;
}
