/* ollama_gen.c - one Ollama generation over HTTP. See ollama_gen.h. The
 * flow is generation.c's (stream.h between worker and loop, cancel when
 * the exchange ends first); only the framing and the shapes differ. */
#include "ollama_gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <jansson.h>

#include "api_error.h"
#include "api_ollama.h"
#include "buf.h"
#include "clock.h"
#include "generation.h"
#include "jsonw.h"
#include "sse.h"
#include "stream.h"

struct ollama_gen {
	struct http_req *req;      /* NULL once the exchange ended */
	struct backend *backend;
	struct gen_stream *stream;
	struct gen_request gr;     /* owned; the worker reads it until done */
	struct gen_sink sink;
	uint64_t id;
	bool chat;
	struct jsonw jw;
	struct sse_buf out;        /* NDJSON lines waiting for MHD */
	char *text;                /* not streamed: all text so far */
	size_t len, cap;
	bool oom, started, done, ended;
	bool unread;               /* cancelled: stream_buffer left unread */
};

static void gen_free(struct ollama_gen *g)
{
	stream_release(g->stream);
	gen_request_free(&g->gr);
	jsonw_free(&g->jw);
	sse_buf_free(&g->out);
	free(g->text);
	free(g);
}

static void on_exchange_end(void *user)
{
	struct ollama_gen *g = user;

	g->req = NULL;
	if (g->done || g->stream == NULL) {
		gen_free(g);
		return;
	}
	backend_cancel(g->backend, g->id);
}

/* {"model":…,"created_at":"…", */
static void head(struct jsonw *w, const char *model)
{
	struct timeval tv;
	struct tm tm;
	char when[64];

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(when, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%06ldZ", (long)tv.tv_usec);
	jsonw_raw(w, "{\"model\":");
	jsonw_str(w, model);
	jsonw_raw(w, ",\"created_at\":");
	jsonw_str(w, when);
	jsonw_raw(w, ",");
}

static void text_field(struct jsonw *w, bool chat, const char *text, size_t len)
{
	if (chat) {
		jsonw_raw(w, "\"message\":{\"role\":\"assistant\",\"content\":");
		jsonw_strn(w, text, len);
		jsonw_raw(w, "},");
	} else {
		jsonw_raw(w, "\"response\":");
		jsonw_strn(w, text, len);
		jsonw_raw(w, ",");
	}
}

static int64_t ns(double tokens, double per_s)
{
	return per_s > 0 ? (int64_t)(tokens / per_s * 1e9) : 0;
}

/* The last object: done, its reason, the counts and durations. */
static void final_object(struct ollama_gen *g, const char *text, size_t len,
			 const struct engine_result *r)
{
	int64_t prefilled = r->prompt_tokens - r->cached_tokens;

	jsonw_reset(&g->jw);
	head(&g->jw, g->gr.model);
	text_field(&g->jw, g->chat, text, len);
	jsonw_raw(&g->jw, "\"done\":true,\"done_reason\":");
	jsonw_str(&g->jw, r->finish == ENGINE_FINISH_LENGTH ? "length" : "stop");
	jsonw_raw(&g->jw, ",\"total_duration\":");
	jsonw_int(&g->jw, (int64_t)(clock_now_ns() - g->req->start_ns));
	jsonw_raw(&g->jw, ",\"load_duration\":0,\"prompt_eval_count\":");
	jsonw_int(&g->jw, r->prompt_tokens);
	jsonw_raw(&g->jw, ",\"prompt_eval_duration\":");
	jsonw_int(&g->jw, ns((double)(prefilled > 0 ? prefilled : 0), r->prefill_tps));
	jsonw_raw(&g->jw, ",\"eval_count\":");
	jsonw_int(&g->jw, r->completion_tokens);
	jsonw_raw(&g->jw, ",\"eval_duration\":");
	/* decode_tps counts the tokens after the first */
	jsonw_int(&g->jw, ns((double)(r->completion_tokens > 1 ? r->completion_tokens - 1 : 0),
			     r->decode_tps));
	jsonw_raw(&g->jw, "}");
}

static void result_error(struct ollama_gen *g, const struct engine_result *r, struct api_error *e)
{
	if (g->unread)
		api_error_from_code(e, EMBER_ECANCELED, NULL, "the generation was cancelled: "
				    "the client left more than %zu KiB of the stream unread "
				    "(stream_buffer_kb)", g->req->hs->opt.stream_buffer / 1024);
	else if (r->finish == ENGINE_FINISH_CANCELLED)
		api_error_from_code(e, EMBER_ECANCELED, NULL, "the generation was cancelled "
				    "(server shutting down)");
	else if (r->code == EMBER_ECONTEXT)
		api_error_from_code(e, EMBER_ECONTEXT, NULL, "the prompt has %lld tokens, more than "
				    "the context of %u", (long long)r->prompt_tokens,
				    (unsigned)r->n_ctx);
	else
		api_error_from_code(e, r->code ? r->code : EMBER_EIO, NULL, "%s", r->message);
}

static void submit_error(struct backend *b, int rc, const char *detail, struct api_error *e)
{
	if (rc == EMBER_EBUSY) {
		api_error_not_loaded(e, backend_status(b, NULL) == BACKEND_LOADING);
	} else if (rc == EMBER_EFULL) {
		api_error_from_code(e, rc, NULL, "server busy: %s, retry later", detail);
		e->status = backend_full_status(b);
	} else {
		api_error_from_code(e, rc, NULL, "%s", detail);
	}
}

static void push_line(struct ollama_gen *g, const char *s, size_t len)
{
	if (sse_buf_push_line(&g->out, s, len) != 0)
		g->oom = true;
}

static void push_json(struct ollama_gen *g)
{
	if (!jsonw_ok(&g->jw))
		g->oom = true;
	else
		push_line(g, g->jw.data, g->jw.len);
}

static ssize_t stream_read(void *data, char *buf, size_t max)
{
	struct ollama_gen *g = data;
	size_t n = sse_buf_read(&g->out, buf, max);

	if (n > 0)
		return (ssize_t)n;
	return g->ended || g->oom ? -1 : 0;
}

static bool failed(const struct engine_result *r)
{
	return r->finish == ENGINE_FINISH_ERROR || r->finish == ENGINE_FINISH_CANCELLED;
}

static void body_update(struct ollama_gen *g, const struct stream_chunk *c)
{
	struct api_error e;

	if (c->len > 0 && !g->oom) {
		if (buf_grow(&g->text, &g->cap, g->len + c->len, 1024, 0) != 0) {
			g->oom = true;
		} else {
			memcpy(g->text + g->len, c->text, c->len);
			g->len += c->len;
		}
	}
	if (!c->done)
		return;
	generation_note_result(g->req, &c->result);
	if (failed(&c->result)) {
		result_error(g, &c->result, &e);
		api_ollama_respond_error(g->req, &e);
		return;
	}
	if (g->oom) {
		http_respond_json(g->req, 500, NULL);
		return;
	}
	final_object(g, g->text ? g->text : "", g->len, &c->result);
	http_respond_json(g->req, 200, jsonw_take(&g->jw));
}

static void stream_update(struct ollama_gen *g, const struct stream_chunk *c)
{
	struct api_error e;
	size_t max = g->req->hs->opt.stream_buffer;

	if (!g->started) {
		if (c->len == 0 && !c->done)
			return;
		if (c->len == 0 && c->done && failed(&c->result)) {
			generation_note_result(g->req, &c->result);
			result_error(g, &c->result, &e);
			api_ollama_respond_error(g->req, &e);
			return;
		}
		g->started = true;
		if (http_respond_stream(g->req, 200, "application/x-ndjson", stream_read, g) != 0)
			return;
	}
	/* generation.c's rule: a client that stops reading is cancelled,
	 * its text from then on dropped. */
	if (c->len > 0 && !g->unread) {
		jsonw_reset(&g->jw);
		head(&g->jw, g->gr.model);
		text_field(&g->jw, g->chat, c->text, c->len);
		jsonw_raw(&g->jw, "\"done\":false}");
		push_json(g);
	}
	if (c->done) {
		generation_note_result(g->req, &c->result);
		if (failed(&c->result) || g->unread) {
			json_t *o;
			char *s;

			result_error(g, &c->result, &e);
			o = json_pack("{s:s}", "error", e.message);
			s = o ? json_dumps(o, JSON_COMPACT) : NULL;

			if (s)
				push_line(g, s, strlen(s));
			else
				g->oom = true;
			free(s);
			json_decref(o);
		} else {
			final_object(g, "", 0, &c->result);
			push_json(g);
		}
		g->ended = true;
	}
	if (!g->ended && !g->unread && max > 0 && sse_buf_pending(&g->out) > max) {
		g->unread = true;
		g->req->hs->n_stream_unread++;
		backend_cancel(g->backend, g->id);
	}
	http_req_resume(g->req);
}

static void on_update(void *data, struct gen_stream *s)
{
	struct ollama_gen *g = data;
	struct stream_chunk c;

	stream_take(s, &c);
	if (c.done)
		g->done = true;
	if (g->req == NULL) {
		if (c.done)
			gen_free(g);
		return;
	}
	if (c.n_tokens > 0) {
		if (g->req->gen_tokens < 0)
			g->req->gen_tokens = 0;
		if (g->req->ttft_ms < 0)
			g->req->ttft_ms = (double)(clock_now_ns() - g->req->start_ns) / 1e6;
		g->req->gen_tokens += c.n_tokens;
	}
	if (g->gr.stream)
		stream_update(g, &c);
	else
		body_update(g, &c);
}

void ollama_gen_start(uv_loop_t *loop, struct backend *b, struct http_req *req,
		      struct gen_request *gr, bool chat)
{
	struct ollama_gen *g = calloc(1, sizeof(*g));
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
	g->chat = chat;
	jsonw_init(&g->jw);
	sse_buf_init(&g->out);
	if (stream_new(loop, on_update, g, &g->stream) != 0) {
		gen_free(g);
		http_respond_json(req, 500, NULL);
		return;
	}
	g->sink = stream_sink(g->stream);
	rc = backend_submit(b, &g->gr, &g->sink, &g->id, detail);
	if (rc != 0) {
		stream_abandon_worker(g->stream);
		submit_error(b, rc, detail, &e);
		gen_free(g);
		api_ollama_respond_error(req, &e);
		return;
	}
	req->user = g;
	req->user_free = on_exchange_end;
}

void ollama_gen_respond_loaded(struct http_req *req, const struct gen_request *gr, bool chat)
{
	struct jsonw w;

	jsonw_init(&w);
	head(&w, gr->model);
	text_field(&w, chat, "", 0);
	jsonw_raw(&w, "\"done\":true,\"done_reason\":\"load\"}");
	/* streamed or not, one object: a one-line NDJSON stream is the same bytes */
	http_respond_json(req, 200, jsonw_ok(&w) ? jsonw_take(&w) : NULL);
	jsonw_free(&w);
}
