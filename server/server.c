/* server.c - loop, dispatch, operational handlers and shutdown. See
 * server.h. Request flow: http.c hands a complete request to on_request,
 * which applies CORS, body limit, auth and the route table, then calls
 * one handler. */
#include "server.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "api_embed.h"
#include "api_error.h"
#include "api_fields.h"
#include "api_llamacpp.h"
#include "api_models.h"
#include "api_native.h"
#include "api_ollama.h"
#include "api_openai.h"
#include "auth.h"
#include "backend.h"
#include "clock.h"
#include "cors.h"
#include "generation.h"
#include "http.h"
#include "metrics.h"
#include "router.h"
#include "sd_notify.h"

enum server_state { RUNNING, DRAINING, STOPPED };

struct server {
	const struct config *cfg;
	const struct logger *log;
	uv_loop_t loop;
	struct http_server http;
	struct metrics metrics;
	struct backend *backend;
	uv_signal_t sigterm;
	uv_signal_t sigint;
	uv_timer_t drain_timer;  /* polls for an empty server while draining */
	uv_timer_t watchdog;     /* WATCHDOG=1 every WATCHDOG_USEC / 2 */
	uv_timer_t ready_timer;  /* waits for the model, then READY=1 */
	struct sd_notify notify; /* systemd's socket; sends are no-ops without */
	uint64_t drain_deadline_ns;
	bool drain_cancelled;    /* drain timeout hit: generations cancelled */
	enum server_state state;
	int exit_code;
	time_t started;
};

/* ---- handlers -------------------------------------------------------------- */

static void handle_health(struct server *srv, struct http_req *req,
			  const struct route_match *m)
{
	const char *msg = NULL;
	enum backend_status st;
	json_t *o;

	(void)m;
	backend_model_changed(srv->backend);
	st = backend_status(srv->backend, &msg);
	switch (st) {
	case BACKEND_READY:
		o = json_pack("{s:s}", "status", "ok");
		break;
	case BACKEND_LOADING:
		o = json_pack("{s:s}", "status", "loading");
		break;
	case BACKEND_NO_MODEL:
		o = json_pack("{s:s}", "status", "no_model");
		break;
	default:
		o = json_pack("{s:s,s:s}", "status", "error", "message", msg);
		break;
	}
	http_respond_json(req, st == BACKEND_READY ? 200 : 503,
			  o ? json_dumps(o, JSON_COMPACT) : NULL);
	json_decref(o);
}

static void handle_metrics(struct server *srv, struct http_req *req,
			   const struct route_match *m)
{
	size_t len = 0;
	char *text;

	(void)m;
	srv->metrics.in_flight = srv->http.in_flight;
	srv->metrics.connections = srv->http.n_conns;
	srv->metrics.header_timeouts = srv->http.n_header_timeouts;
	srv->metrics.streams_unread = srv->http.n_stream_unread;
	backend_refresh_metrics(srv->backend);
	text = metrics_render(&srv->metrics, &len);
	if (text == NULL) {
		http_respond_json(req, 500, NULL);
		return;
	}
	http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", text,
		     len);
	free(text);
}

static void handle_models(struct server *srv, struct http_req *req,
			  const struct route_match *m)
{
	(void)m;
	api_models_list(srv->backend, req, srv->started);
}

static void handle_model(struct server *srv, struct http_req *req,
			 const struct route_match *m)
{
	char id[256];

	if (router_param(m, "id", id, sizeof(id)) < 0)
		id[0] = '\0';
	api_models_get(srv->backend, req, srv->started, id);
}

/* Parses an OpenAI-style body of `kind` and hands it to a generation
 * answering in `fmt`; `session` extends that backend session (0: none). */
static void start_generation(struct server *srv, struct http_req *req,
			     enum gen_kind kind, enum api_format fmt,
			     uint64_t session)
{
	struct api_limits lim = {.max_tokens = (int32_t)srv->cfg->max_tokens};
	struct gen_request gr;
	struct api_error e;
	const char *id;
	int rc;

	if (api_openai_check_content_type(
		    http_req_header(req, "Content-Type"), &e) != 0) {
		http_respond_error(req, &e);
		return;
	}
	rc = kind == GEN_CHAT
		? api_openai_parse_chat(req->body, req->body_len, &lim, &gr, &e)
		: api_openai_parse_completion(req->body, req->body_len, &lim,
					      &gr, &e);
	if (rc != 0) {
		http_respond_error(req, &e);
		return;
	}
	/* One model per daemon: naming another is a client mistake worth an
	 * answer (GET /v1/models lists the one we serve), not a silent
	 * substitution. Absent or empty means "the model". */
	id = backend_model_id(srv->backend);
	if (gr.model != NULL && gr.model[0] != '\0' && id != NULL &&
	    strcmp(gr.model, id) != 0) {
		api_error_set(&e, 400, API_ERR_INVALID_REQUEST, "model", "model_not_found",
			      "The model '%.64s' is not served here; this server serves '%s' "
			      "(GET /v1/models).", gr.model, id);
		gen_request_free(&gr);
		http_respond_error(req, &e);
		return;
	}
	if (api_fields_check_vocab(srv->backend, &gr, &e) != 0) {
		gen_request_free(&gr);
		http_respond_error(req, &e);
		return;
	}
	/* suffix: fill in the middle, with the model's FIM tokens */
	if (gr.suffix != NULL &&
	    api_llamacpp_fim(srv->backend, &gr, gr.suffix, NULL, "suffix",
			     &e) != 0) {
		gen_request_free(&gr);
		http_respond_error(req, &e);
		return;
	}
	gr.session = session;
	generation_start(&srv->loop, srv->backend, req, &gr, fmt, id);
}

static void handle_chat(struct server *srv, struct http_req *req,
			const struct route_match *m)
{
	(void)m;
	start_generation(srv, req, GEN_CHAT, API_FMT_CHAT, 0);
}

static void handle_completions(struct server *srv, struct http_req *req,
			       const struct route_match *m)
{
	(void)m;
	start_generation(srv, req, GEN_COMPLETION, API_FMT_COMPLETION, 0);
}

static void handle_generate(struct server *srv, struct http_req *req,
			    const struct route_match *m)
{
	(void)m;
	start_generation(srv, req, GEN_COMPLETION, API_FMT_NATIVE, 0);
}

/* POST /apply-template: {"messages": [...], "tools": [...]} -> {"prompt":
 * "..."}, the text a chat request with those messages would feed the model
 * (as llama-server's endpoint). */
static void handle_apply_template(struct server *srv, struct http_req *req,
				  const struct route_match *m)
{
	struct api_limits lim = {.max_tokens = (int32_t)srv->cfg->max_tokens,
				 .render_only = true};
	struct gen_request gr;
	struct api_error e;
	char err[EMBER_ERR_MAX] = "", *prompt = NULL;
	size_t len = 0;
	json_t *o;

	(void)m;
	if (api_openai_check_content_type(http_req_header(req, "Content-Type"), &e) != 0 ||
	    api_openai_parse_chat(req->body, req->body_len, &lim, &gr, &e) != 0) {
		http_respond_error(req, &e);
		return;
	}
	int rc = backend_apply_template(srv->backend, &gr, &prompt, &len, err);
	gen_request_free(&gr);
	if (rc != 0) {
		if (rc == EMBER_EBUSY)
			api_error_set(&e, 503, API_ERR_SERVER, NULL, "model_not_ready", "%s", err);
		else if (rc == EMBER_EINVAL)
			api_error_set(&e, 400, API_ERR_INVALID_REQUEST, "messages", "invalid_value", "%s", err);
		else
			api_error_set(&e, 500, API_ERR_SERVER, NULL, NULL, "%s", err);
		http_respond_error(req, &e);
		return;
	}
	o = json_pack("{s:s%}", "prompt", prompt, len);
	free(prompt);
	http_respond_json(req, 200, o ? json_dumps(o, JSON_COMPACT) : NULL);
	json_decref(o);
}

/* llama-server's POST /completion (infill false) and POST /infill. */
static void start_llamacpp(struct server *srv, struct http_req *req, bool infill)
{
	struct gen_request gr;
	struct api_error e;
	char *middle = NULL;

	if (api_openai_check_content_type(http_req_header(req, "Content-Type"), &e) != 0 ||
	    api_llamacpp_parse(req->body, req->body_len, (int32_t)srv->cfg->max_tokens,
			       infill, &gr, &middle, &e) != 0) {
		http_respond_error(req, &e);
		return;
	}
	if (infill && api_llamacpp_fim(srv->backend, &gr, gr.suffix, middle,
				       "input_suffix", &e) != 0) {
		free(middle);
		gen_request_free(&gr);
		http_respond_error(req, &e);
		return;
	}
	free(middle);
	free(gr.suffix);
	gr.suffix = NULL;
	generation_start(&srv->loop, srv->backend, req, &gr, API_FMT_LLAMACPP,
			 backend_model_id(srv->backend));
}

static void handle_llama_completion(struct server *srv, struct http_req *req,
				    const struct route_match *m)
{
	(void)m;
	start_llamacpp(srv, req, false);
}

static void handle_infill(struct server *srv, struct http_req *req,
			  const struct route_match *m)
{
	(void)m;
	start_llamacpp(srv, req, true);
}

static void handle_props(struct server *srv, struct http_req *req,
			 const struct route_match *m)
{
	(void)m;
	api_llamacpp_props(srv->backend, srv->cfg, req);
}

static void handle_slots(struct server *srv, struct http_req *req,
			 const struct route_match *m)
{
	(void)m;
	api_llamacpp_slots(srv->backend, srv->cfg, req);
}

static void handle_slot_action(struct server *srv, struct http_req *req,
			       const struct route_match *m)
{
	(void)m;
	api_llamacpp_slot_action(srv->cfg, req);
}

static void handle_tokenize(struct server *srv, struct http_req *req,
			    const struct route_match *m)
{
	(void)m;
	api_native_tokenize(&srv->loop, srv->backend, req);
}

static void handle_detokenize(struct server *srv, struct http_req *req,
			      const struct route_match *m)
{
	(void)m;
	api_native_detokenize(&srv->loop, srv->backend, req);
}

/* The {id} of a session route ("" when too long: not found later). */
static void session_param(const struct route_match *m, char *buf, size_t size)
{
	if (router_param(m, "id", buf, size) < 0)
		buf[0] = '\0';
}

static void handle_session_new(struct server *srv, struct http_req *req,
			       const struct route_match *m)
{
	(void)m;
	api_native_session_new(srv->backend, req);
}

static void handle_session_get(struct server *srv, struct http_req *req,
			       const struct route_match *m)
{
	char id[API_SESSION_ID_MAX];

	session_param(m, id, sizeof(id));
	api_native_session_get(srv->backend, req, id);
}

static void handle_session_delete(struct server *srv, struct http_req *req,
				  const struct route_match *m)
{
	char id[API_SESSION_ID_MAX];

	session_param(m, id, sizeof(id));
	api_native_session_delete(srv->backend, req, id);
}

static void handle_session_clone(struct server *srv, struct http_req *req,
				 const struct route_match *m)
{
	char id[API_SESSION_ID_MAX];

	session_param(m, id, sizeof(id));
	api_native_session_clone(srv->backend, req, id);
}

static void handle_session_generate(struct server *srv, struct http_req *req,
				    const struct route_match *m)
{
	uint64_t sid;
	char id[API_SESSION_ID_MAX];

	session_param(m, id, sizeof(id));
	if (api_native_parse_session_id(id, backend_replica_id(srv->backend),
					&sid) != 0) {
		api_native_respond_session_not_found(srv->backend, req, id);
		return;
	}
	start_generation(srv, req, GEN_COMPLETION, API_FMT_NATIVE, sid);
}

/* ---- embeddings and Ollama's API (api_embed.h, api_ollama.h) ---------- */

static void handle_embeddings(struct server *srv, struct http_req *req,
			      const struct route_match *m)
{
	(void)m;
	api_embed_handle(&srv->loop, srv->backend, req, API_EMBED_OPENAI,
			 backend_model_id(srv->backend));
}

static void handle_embedding_llama(struct server *srv, struct http_req *req,
				   const struct route_match *m)
{
	(void)m;
	api_embed_handle(&srv->loop, srv->backend, req, API_EMBED_LLAMA,
			 backend_model_id(srv->backend));
}

static void handle_ollama_embed(struct server *srv, struct http_req *req,
				const struct route_match *m)
{
	(void)m;
	api_embed_handle(&srv->loop, srv->backend, req,
			 strcmp(req->path, "/api/embed") == 0 ? API_EMBED_OLLAMA
							     : API_EMBED_OLLAMA_LEGACY,
			 backend_model_id(srv->backend));
}

static void handle_ollama_root(struct server *srv, struct http_req *req,
			       const struct route_match *m)
{
	(void)srv;
	(void)m;
	api_ollama_root(req);
}

static void handle_ollama_version(struct server *srv, struct http_req *req,
				  const struct route_match *m)
{
	(void)srv;
	(void)m;
	api_ollama_version(req);
}

static void handle_ollama_tags(struct server *srv, struct http_req *req,
			       const struct route_match *m)
{
	(void)m;
	api_ollama_tags(srv->backend, req, strcmp(req->path, "/api/ps") == 0);
}

static void handle_ollama_show(struct server *srv, struct http_req *req,
			       const struct route_match *m)
{
	(void)m;
	api_ollama_show(srv->backend, req);
}

static void handle_ollama_generate(struct server *srv, struct http_req *req,
				   const struct route_match *m)
{
	(void)m;
	api_ollama_generate(&srv->loop, srv->backend, req,
			    strcmp(req->path, "/api/chat") == 0,
			    (int32_t)srv->cfg->max_tokens);
}

static const struct route routes[] = {
	{"GET", "/health", handle_health, "health"},
	{"GET", "/metrics", handle_metrics, "metrics"},
	{"GET", "/v1/models", handle_models, "models"},
	{"GET", "/v1/models/{id}", handle_model, "model"},
	{"GET", "/models", handle_models, "models"},
	{"GET", "/models/{id}", handle_model, "model"},
	{"POST", "/chat/completions", handle_chat, "chat_completions"},
	{"POST", "/completions", handle_completions, "completions"},
	{"POST", "/v1/chat/completions", handle_chat, "chat_completions"},
	{"POST", "/v1/completions", handle_completions, "completions"},
	{"POST", "/v1/generate", handle_generate, "generate"},
	{"POST", "/tokenize", handle_tokenize, "tokenize"},
	{"POST", "/apply-template", handle_apply_template, "apply_template"},
	{"POST", "/completion", handle_llama_completion, "llama_completion"},
	{"POST", "/infill", handle_infill, "infill"},
	{"GET", "/props", handle_props, "props"},
	{"GET", "/slots", handle_slots, "slots"},
	{"POST", "/slots/{id}", handle_slot_action, "slots"},
	{"POST", "/detokenize", handle_detokenize, "detokenize"},
	{"POST", "/v1/sessions", handle_session_new, "sessions"},
	{"GET", "/v1/sessions/{id}", handle_session_get, "session"},
	{"DELETE", "/v1/sessions/{id}", handle_session_delete, "session"},
	{"POST", "/v1/sessions/{id}/generate", handle_session_generate,
	 "session_generate"},
	{"POST", "/v1/sessions/{id}/clone", handle_session_clone,
	 "session_clone"},
	{"POST", "/v1/embeddings", handle_embeddings, "embeddings"},
	{"POST", "/embeddings", handle_embeddings, "embeddings"},
	{"POST", "/embedding", handle_embedding_llama, "embedding"},
	{"GET", "/", handle_ollama_root, "ollama_root"},
	{"GET", "/api/version", handle_ollama_version, "ollama_version"},
	{"GET", "/api/tags", handle_ollama_tags, "ollama_tags"},
	{"GET", "/api/ps", handle_ollama_tags, "ollama_ps"},
	{"POST", "/api/show", handle_ollama_show, "ollama_show"},
	{"POST", "/api/generate", handle_ollama_generate, "ollama_generate"},
	{"POST", "/api/chat", handle_ollama_generate, "ollama_chat"},
	{"POST", "/api/embed", handle_ollama_embed, "ollama_embed"},
	{"POST", "/api/embeddings", handle_ollama_embed, "ollama_embeddings"},
};

#define NROUTES (sizeof(routes) / sizeof(routes[0]))

/* ---- dispatch ------------------------------------------------------------ */

static void respond_status(struct http_req *req, int status,
			   enum api_error_type type, const char *code,
			   const char *msg)
{
	struct api_error e;

	api_error_set(&e, status, type, NULL, code, "%s", msg);
	/* Ollama's clients read {"error": "..."} only */
	if (strncmp(req->path, "/api/", 5) == 0)
		api_ollama_respond_error(req, &e);
	else
		http_respond_error(req, &e);
}

/* OPTIONS: a CORS preflight when the browser sent one, else just Allow. */
static void handle_options(struct server *srv, struct http_req *req,
			   const struct route_match *m, const char *acao)
{
	char allow[80], hdrs[1024];

	(void)srv;
	if (m->status == 404) {
		respond_status(req, 404, API_ERR_INVALID_REQUEST, "not_found",
			       "No such endpoint.");
		return;
	}
	snprintf(allow, sizeof(allow), "%s, OPTIONS", m->allow);
	if (http_req_header(req, "Origin") != NULL &&
	    http_req_header(req, "Access-Control-Request-Method") != NULL) {
		if (acao == NULL) {
			respond_status(req, 403, API_ERR_INVALID_REQUEST,
				       "cors_origin_not_allowed",
				       "Origin not allowed (see cors_origins).");
			return;
		}
		http_req_add_header(req, "Access-Control-Allow-Methods", allow);
		http_req_add_header(req, "Access-Control-Allow-Headers",
				    cors_allow_headers(srv->cfg->cors_headers,
						       http_req_header(req, "Access-Control-Request-Headers"),
						       hdrs, sizeof(hdrs)));
		http_req_add_header(req, "Access-Control-Max-Age",
				    CORS_MAX_AGE);
	}
	http_req_add_header(req, "Allow", allow);
	http_respond(req, 204, NULL, "", 0);
}

static void on_request(void *data, struct http_req *req)
{
	struct server *srv = data;
	struct route_match m;
	const char *acao;

	acao = cors_allow_origin(srv->cfg->cors_origins,
				 http_req_header(req, "Origin"));
	if (acao != NULL) {
		http_req_add_header(req, "Access-Control-Allow-Origin", acao);
		if (strcmp(acao, "*") != 0)
			http_req_add_header(req, "Vary", "Origin");
	}
	router_match(routes, NROUTES, req->method, req->path, &m);
	req->endpoint = m.route ? m.route->name : NULL;
	if (strcmp(req->method, "OPTIONS") == 0) {
		handle_options(srv, req, &m, acao);
		return;
	}
	if (req->too_large) {
		char msg[96];

		snprintf(msg, sizeof(msg), "Request body exceeds %lld bytes.",
			 (long long)srv->cfg->max_body);
		respond_status(req, 413, API_ERR_INVALID_REQUEST,
			       "request_too_large", msg);
		return;
	}
	if (strcmp(req->path, "/health") != 0 &&
	    !auth_check(srv->cfg->api_key,
			http_req_header(req, "Authorization"))) {
		respond_status(req, 401, API_ERR_AUTHENTICATION,
			       "invalid_api_key",
			       "Missing or invalid API key "
			       "(Authorization: Bearer <key>).");
		return;
	}
	if (m.status == 404) {
		respond_status(req, 404, API_ERR_INVALID_REQUEST, "not_found",
			       "No such endpoint.");
		return;
	}
	if (m.status == 405) {
		http_req_add_header(req, "Allow", m.allow);
		respond_status(req, 405, API_ERR_INVALID_REQUEST,
			       "method_not_allowed", "Method not allowed.");
		return;
	}
	m.route->handler(srv, req, &m);
}

static void on_done(void *data, struct http_req *req)
{
	struct server *srv = data;
	double dur_ms = (double)(clock_now_ns() - req->start_ns) / 1e6;
	struct log_request lr = {
		.method = req->method,
		.path = req->path,
		.status = req->responded ? req->status : 499,
		.prompt_tokens = req->prompt_tokens,
		.gen_tokens = req->gen_tokens,
		.ttft_ms = req->ttft_ms,
		.duration_ms = dur_ms,
	};

	log_request(srv->log, &lr);
	metrics_count_request(&srv->metrics,
			      req->endpoint ? req->endpoint : "unmatched",
			      lr.status, dur_ms / 1e3);
	if (req->gen_tokens >= 0)
		metrics_count_generation(&srv->metrics,
					 (uint64_t)(req->prompt_tokens > 0
						    ? req->prompt_tokens : 0),
					 (uint64_t)req->gen_tokens,
					 req->ttft_ms >= 0 ? req->ttft_ms / 1e3
							   : -1);
}

/* ---- shutdown ------------------------------------------------------------ */

static void stop(struct server *srv)
{
	if (srv->state == STOPPED)
		return;
	srv->state = STOPPED;
	http_close(&srv->http);
	uv_close((uv_handle_t *)&srv->sigterm, NULL);
	uv_close((uv_handle_t *)&srv->sigint, NULL);
	uv_close((uv_handle_t *)&srv->drain_timer, NULL);
	uv_close((uv_handle_t *)&srv->watchdog, NULL);
	uv_close((uv_handle_t *)&srv->ready_timer, NULL);
}

/* Proves to systemd that the loop still turns; a stuck loop misses it. */
static void watchdog_cb(uv_timer_t *t)
{
	struct server *srv = t->data;

	sd_notify_send(&srv->notify, "WATCHDOG=1");
}

/*
 * systemd's READY=1 means "serving": sent once the model has loaded and
 * /health answers 200, so `systemctl start` returns when requests work.
 * The loader thread only publishes an atomic status; polling it every
 * READY_POLL_MS costs nothing and keeps the loader free of loop handles.
 */
#define READY_POLL_MS 20

static void ready_cb(uv_timer_t *t)
{
	struct server *srv = t->data;
	const char *msg = NULL;

	switch (backend_status(srv->backend, &msg)) {
	case BACKEND_LOADING:
		return;
	case BACKEND_READY:
		sd_notify_send(&srv->notify, "READY=1");
		sd_notify_status(&srv->notify, "serving");
		break;
	case BACKEND_NO_MODEL:
		sd_notify_send(&srv->notify, "READY=1");
		sd_notify_status(&srv->notify, "serving without a model (test mode)");
		break;
	case BACKEND_FAILED:
		/* Still READY: the daemon answers /health 503 with the reason,
		 * which is easier to diagnose than a start-up timeout. */
		log_printf(srv->log, LOG_ERROR, "model failed to load: %s",
			   msg ? msg : "?");
		sd_notify_send(&srv->notify, "READY=1");
		sd_notify_status(&srv->notify, "model failed to load: %s", msg ? msg : "?");
		break;
	}
	uv_timer_stop(t);
}

/* After the drain timeout cancels the generations, how long their final
 * events get to reach clients (one that does not read is then cut). */
#define DRAIN_CANCEL_GRACE_MS 2000

static void drain_cb(uv_timer_t *t)
{
	struct server *srv = t->data;

	if (srv->http.in_flight == 0) {
		log_printf(srv->log, LOG_INFO, "drained; exiting");
		stop(srv);
	} else if (clock_now_ns() >= srv->drain_deadline_ns &&
		   !srv->drain_cancelled) {
		/* Cancel rather than cut: each stream then ends with its
		 * "cancelled (server shutting down)" error event, a queued
		 * request with a 503, within a decode step. */
		log_printf(srv->log, LOG_WARN,
			   "drain timeout: cancelling %lld request(s)",
			   (long long)srv->http.in_flight);
		srv->drain_cancelled = true;
		backend_cancel_all(srv->backend);
		srv->drain_deadline_ns = clock_now_ns() +
					 DRAIN_CANCEL_GRACE_MS * 1000000ull;
	} else if (clock_now_ns() >= srv->drain_deadline_ns) {
		log_printf(srv->log, LOG_WARN,
			   "drain timeout: closing %lld request(s)",
			   (long long)srv->http.in_flight);
		stop(srv);
	}
}

static void signal_cb(uv_signal_t *s, int signum)
{
	struct server *srv = s->data;

	if (srv->state == DRAINING) {
		if (signum == SIGINT) {
			log_printf(srv->log, LOG_WARN,
				   "second SIGINT: exiting now");
			srv->exit_code = 130;
			stop(srv);
		}
		return;
	}
	if (srv->state != RUNNING)
		return;
	log_printf(srv->log, LOG_INFO,
		   "%s: draining (%lld request(s), at most %llds)",
		   signum == SIGINT ? "SIGINT" : "SIGTERM",
		   (long long)srv->http.in_flight,
		   (long long)srv->cfg->drain_timeout);
	srv->state = DRAINING;
	sd_notify_send(&srv->notify, "STOPPING=1");
	http_quiesce(&srv->http);
	srv->drain_deadline_ns =
		clock_now_ns() + (uint64_t)srv->cfg->drain_timeout * 1000000000u;
	uv_timer_start(&srv->drain_timer, drain_cb, 0, 50);
}

/* ---- run ---------------------------------------------------------------- */

int server_run(const struct config *cfg, const struct logger *log)
{
	struct server *srv = calloc(1, sizeof(*srv));
	struct http_options opt;
	char err[EMBER_ERR_MAX];
	uint64_t watchdog_usec = 0;
	int listen_fd = -1;
	int rc = 1;

	if (srv == NULL)
		return 1;
	srv->cfg = cfg;
	srv->log = log;
	srv->started = time(NULL);
	metrics_init(&srv->metrics);
	if (uv_loop_init(&srv->loop) != 0) {
		free(srv);
		return 1;
	}
	/* systemd's variables, read before any engine thread exists. */
	if (sd_notify_init(&srv->notify, err) != 0)
		log_printf(log, LOG_WARN, "%s: not notifying systemd", err);
	if (sd_notify_watchdog_usec(&watchdog_usec, err) != 0)
		log_printf(log, LOG_WARN, "%s: watchdog off", err);
	if (sd_notify_listen_socket(&listen_fd, err) != 0) {
		log_printf(log, LOG_ERROR, "%s", err);
		goto fail;
	}
	if (backend_new(cfg, &srv->metrics, &srv->backend, err) != 0) {
		log_printf(log, LOG_ERROR, "%s", err);
		goto fail;
	}
	opt = (struct http_options){
		.host = cfg->host,
		.port = (int)cfg->port,
		.timeout_s = (unsigned)cfg->timeout,
		.header_timeout_s = (unsigned)cfg->header_timeout,
		.max_connections = (unsigned)cfg->max_connections,
		.max_body = (size_t)cfg->max_body,
		.stream_buffer = (size_t)cfg->stream_buffer_kb * 1024,
		.listen_fd = listen_fd > 0 ? listen_fd : 0,
		.handler = on_request,
		.done = on_done,
		.data = srv,
	};
	if (http_start(&srv->http, &srv->loop, &opt, err) != 0) {
		log_printf(log, LOG_ERROR, "%s", err);
		goto fail;
	}
	if (srv->http.opt.max_connections < (unsigned)cfg->max_connections)
		log_printf(log, LOG_WARN, "max_connections %lld lowered to %u: "
			   "the open-file limit (ulimit -n; LimitNOFILE=) allows no more",
			   (long long)cfg->max_connections, srv->http.opt.max_connections);
	uv_signal_init(&srv->loop, &srv->sigterm);
	uv_signal_init(&srv->loop, &srv->sigint);
	uv_timer_init(&srv->loop, &srv->drain_timer);
	uv_timer_init(&srv->loop, &srv->watchdog);
	uv_timer_init(&srv->loop, &srv->ready_timer);
	srv->sigterm.data = srv->sigint.data = srv->drain_timer.data = srv;
	srv->watchdog.data = srv->ready_timer.data = srv;
	if (watchdog_usec > 0)
		uv_timer_start(&srv->watchdog, watchdog_cb, 0,
			       watchdog_usec / 2000 > 0 ? watchdog_usec / 2000 : 1);
	uv_signal_start(&srv->sigterm, signal_cb, SIGTERM);
	uv_signal_start(&srv->sigint, signal_cb, SIGINT);
	if (listen_fd > 0)
		log_printf(log, LOG_INFO, "emberd %s listening on the socket "
			   "systemd passed (fd %d)%s", EMBER_VERSION, listen_fd,
			   cfg->no_model ? " (no model: test mode)" : "");
	else
		log_printf(log, LOG_INFO, "emberd %s listening on %s:%lld%s",
			   EMBER_VERSION, cfg->host, (long long)cfg->port,
			   cfg->no_model ? " (no model: test mode)" : "");
	sd_notify_status(&srv->notify, "loading the model");
	uv_timer_start(&srv->ready_timer, ready_cb, 0, READY_POLL_MS);
	uv_run(&srv->loop, UV_RUN_DEFAULT);
	rc = srv->exit_code;
fail:
	if (srv->state != STOPPED && srv->http.mhd != NULL)
		stop(srv);
	uv_run(&srv->loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&srv->loop) != 0)
		log_printf(log, LOG_WARN, "loop closed with open handles");
	backend_free(srv->backend);
	sd_notify_free(&srv->notify);
	free(srv);
	return rc;
}
