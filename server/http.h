/*
 * http.h - the glue between libuv and libmicrohttpd (MHD).
 *
 * MHD runs in external-polling epoll mode on the libuv loop thread: no MHD
 * thread exists. A uv_poll watches MHD's epoll fd and a uv_timer follows
 * MHD_get_timeout(); both call MHD_run(), which never blocks. Connections
 * are suspended while a streamed response has no bytes ready and resumed
 * (http_req_resume) when its producer has some.
 *
 * A request arrives as a struct http_req: the http layer accumulates the
 * body (up to max_body; beyond it the request is flagged too_large, at once
 * when Content-Length says so) and then calls the handler once. The handler
 * answers with one http_respond* call, now or later (after a resume).
 * When the exchange ends (sent, failed, client gone, timed out) done_cb
 * runs and the request is freed, after its `user_free` callback.
 *
 * Threads: everything here runs on the loop thread. Producers on other
 * threads must not call these functions; they wake the loop (uv_async) and
 * the loop calls http_req_resume.
 */
#ifndef EMBER_HTTP_H
#define EMBER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

struct MHD_Daemon;
struct MHD_Connection;
struct MHD_Response;
struct http_req;

typedef void (*http_handler_cb)(void *data, struct http_req *req);
typedef void (*http_done_cb)(void *data, struct http_req *req);

/* A streamed body's producer: returns bytes written into buf (> 0), 0 when
 * nothing is ready yet (the connection is suspended until
 * http_req_resume), or -1 at the end of the stream. Loop thread. */
typedef ssize_t (*http_read_cb)(void *data, char *buf, size_t max);

struct http_options {
	const char *host;        /* numeric IPv4 or IPv6 address */
	int port;
	unsigned timeout_s;      /* idle connection timeout */
	unsigned header_timeout_s; /* a request header's deadline (below) */
	unsigned max_connections; /* 0 = 1024; http_start lowers it to what
				   * RLIMIT_NOFILE allows (after raising
				   * the soft limit to the hard one) */
	size_t max_body;
	size_t stream_buffer;    /* bytes of a stream its producers may queue
				  * unread before they cancel it
				  * (generation.c, ollama_gen.c); 0 = no bound */
	int listen_fd;           /* socket activation's listening socket (>= 3);
				  * 0 = none: bind host:port */
	http_handler_cb handler; /* the request is complete (or too large) */
	http_done_cb done;       /* the exchange ended; req is freed after */
	void *data;              /* passed to both */
};

#define HTTP_MAX_HEADERS 10

struct http_server {
	uv_loop_t *loop;
	struct MHD_Daemon *mhd;
	uv_poll_t poll;
	uv_timer_t timer;
	struct http_options opt;
	int64_t in_flight;       /* requests between first byte and done */
	bool quiesced;
	bool closing;            /* http_close in progress: no new suspends */
	struct http_req *reqs;   /* every live request (to resume on close) */
	int handles_open;        /* uv handles not yet closed */
	uint64_t n_closed;       /* connections MHD closed (NOTIFY_CONNECTION) */
	/* Header deadlines: MHD's timeout is an idle timeout, so a client
	 * sending a header byte a second (slowloris) would keep its
	 * connection for ever. Every connection waiting for a request header
	 * is on `waiting`; a timer closes (shutdown) those past their
	 * deadline: header_timeout_s after accept, timeout_s +
	 * header_timeout_s after the previous response on a kept-alive one. */
	uv_timer_t header_timer;
	struct http_conn *waiting;
	int64_t n_conns;         /* open connections */
	uint64_t n_header_timeouts; /* connections closed by the deadline */
	uint64_t n_stream_unread; /* streams cancelled: unread (generation.c) */
};

struct http_req {
	struct http_server *hs;
	struct http_req *prev, *next;  /* in hs->reqs */
	struct MHD_Connection *conn;
	const char *method;      /* MHD-owned, valid until done */
	const char *path;        /* without the query string */
	char *body;              /* [body_len] + NUL, owned */
	size_t body_len;
	size_t body_cap;
	bool too_large;          /* body exceeded max_body: answer 413 */
	bool handled;            /* the handler was called */
	bool responded;          /* an http_respond* call was made */
	bool suspended;
	struct MHD_Response *pending; /* made, not yet queued */
	bool stream_ended;
	int status;              /* of the response, for logs and metrics */
	uint64_t start_ns;
	size_t discarded;        /* body bytes dropped after too_large */
	/* headers for whatever response follows (CORS, Allow, Retry-After) */
	size_t n_headers;
	char headers[HTTP_MAX_HEADERS][2][128];
	/* the stream's producer, when answered with http_respond_stream */
	http_read_cb read_cb;
	void *read_data;
	/* handler state, freed (user_free) before the request */
	void *user;
	void (*user_free)(void *user);
	/* filled by handlers for the log line and metrics; -1 = n/a */
	const char *endpoint;    /* route name (static), NULL = unmatched */
	long prompt_tokens;
	long gen_tokens;
	double ttft_ms;
};

/* Starts MHD on opt->host:opt->port and hooks it into `loop`. `hs` is
 * caller-owned and must stay put until http_close's handles are closed
 * (hs->handles_open == 0 after the loop ran). Returns 0 or a negative
 * EMBER_E* code with detail in `err`. */
int http_start(struct http_server *hs, uv_loop_t *loop,
	       const struct http_options *opt, char *err);

/* Stops accepting new connections (graceful drain); open connections keep
 * being served. Idempotent. */
void http_quiesce(struct http_server *hs);

/* Closes every connection (done_cb runs for each open request), stops MHD
 * and closes the uv handles. Idempotent; NULL allowed. */
void http_close(struct http_server *hs);

/* Returns the value of request header `name` (case-insensitive) or NULL. */
const char *http_req_header(struct http_req *req, const char *name);

/* Adds a header to the response this request will get. Values longer than
 * 127 bytes or more than HTTP_MAX_HEADERS headers are dropped (returns -1). */
int http_req_add_header(struct http_req *req, const char *name,
			const char *value);

/* Answers with `body[0..len)` (copied). Returns 0, or -1 if MHD refused
 * (the connection is then closed). Only the first response counts. */
int http_respond(struct http_req *req, int status, const char *content_type,
		 const char *body, size_t len);

/* Answers with a JSON text it takes ownership of (NULL = out of memory,
 * answered as 500). */
int http_respond_json(struct http_req *req, int status, char *json);

/* Answers with an OpenAI error body for `e` (adds Retry-After for 429 and
 * 503 when e->retry_after > 0). */
struct api_error;
int http_respond_error(struct http_req *req, const struct api_error *e);

/* Answers with a body of unknown length produced by read_cb(data, ...);
 * headers for SSE (no caching) are added when content_type is
 * text/event-stream. */
int http_respond_stream(struct http_req *req, int status,
			const char *content_type, http_read_cb read_cb,
			void *data);

/* Resumes a request suspended because its producer had no bytes. No-op if
 * not suspended. */
void http_req_resume(struct http_req *req);

#endif
