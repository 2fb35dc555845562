/* server.c - loop, dispatch and shutdown. See server.h. Request flow:
 * http.c hands a complete request to on_request, which applies CORS, body
 * limit, auth and the route table (routes.c), then calls one handler. */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "api_error.h"
#include "api_ollama.h"
#include "auth.h"
#include "backend.h"
#include "clock.h"
#include "cors.h"
#include "http.h"
#include "metrics.h"
#include "router.h"
#include "routes.h"
#include "server_impl.h"
#include "sd_notify.h"

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
	const struct route *routes;
	size_t n_routes;

	acao = cors_allow_origin(srv->cfg->cors_origins,
				 http_req_header(req, "Origin"));
	if (acao != NULL) {
		http_req_add_header(req, "Access-Control-Allow-Origin", acao);
		if (strcmp(acao, "*") != 0)
			http_req_add_header(req, "Vary", "Origin");
	}
	routes = routes_table(&n_routes);
	router_match(routes, n_routes, req->method, req->path, &m);
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
