/* http.c - libuv + libmicrohttpd glue. See http.h. */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "api_error.h"
#include "buf.h"
#include "clock.h"
#include "ember.h"

/* A chunked body past the limit is read and dropped so the client can get
 * its 413; past this much more the connection is cut instead. */
#define DISCARD_MAX (16u << 20)

/* ---- driving MHD from the loop -------------------------------------- */

static void timer_cb(uv_timer_t *t);

/* Runs MHD and re-arms the timer from MHD_get_timeout: MHD must run again
 * within that many ms even without socket activity (idle timeouts,
 * resumed connections). */
static void run_mhd(struct http_server *hs)
{
	MHD_UNSIGNED_LONG_LONG ms;
	uint64_t closed;

	if (hs->mhd == NULL)
		return;
	closed = hs->n_closed;
	MHD_run(hs->mhd);
	/* At the connection limit MHD takes the listening socket out of its
	 * epoll set and puts it back at the start of a later MHD_run, once
	 * below the limit. When this run closed connections (timeouts) that
	 * later run may never come (no connection left: no timeout, and the
	 * epoll fd never wakes), so the daemon stopped accepting for good:
	 * run again now. */
	if (hs->n_closed != closed) {
		uv_timer_start(&hs->timer, timer_cb, 0, 0);
		return;
	}
	if (MHD_get_timeout(hs->mhd, &ms) == MHD_YES)
		uv_timer_start(&hs->timer, timer_cb, ms, 0);
	else
		uv_timer_stop(&hs->timer);
}

static void timer_cb(uv_timer_t *t)
{
	run_mhd(t->data);
}

static void poll_cb(uv_poll_t *p, int status, int events)
{
	(void)status;
	(void)events;
	run_mhd(p->data);
}

/* Schedules MHD_run on the next loop turn; never re-enters MHD from one of
 * its own callbacks. */
static void kick(struct http_server *hs)
{
	if (hs->mhd != NULL)
		uv_timer_start(&hs->timer, timer_cb, 0, 0);
}

/* ---- header deadlines ----------------------------------------------------- */

/* One connection (MHD's socket context), from accept to close. */
struct http_conn {
	struct http_conn *prev, *next; /* in hs->waiting while waiting */
	int fd;
	bool waiting;            /* for a request header */
	bool cut;                /* shut down by the deadline */
	uint64_t deadline_ns;
};

/* How often the deadlines are checked: a connection is cut at most this
 * much after its deadline. */
#define HEADER_TICK_MS 250

static void conn_unwait(struct http_server *hs, struct http_conn *hc)
{
	if (hc == NULL || !hc->waiting)
		return;
	if (hc->prev != NULL)
		hc->prev->next = hc->next;
	else
		hs->waiting = hc->next;
	if (hc->next != NULL)
		hc->next->prev = hc->prev;
	hc->prev = hc->next = NULL;
	hc->waiting = false;
}

/* The connection now waits for a request header, for `secs` at most. */
static void conn_wait(struct http_server *hs, struct http_conn *hc,
		      unsigned secs)
{
	if (hc == NULL || hc->cut || hs->opt.header_timeout_s == 0)
		return;
	conn_unwait(hs, hc);
	hc->deadline_ns = clock_now_ns() + (uint64_t)secs * 1000000000ull;
	hc->waiting = true;
	hc->next = hs->waiting;
	if (hs->waiting != NULL)
		hs->waiting->prev = hc;
	hs->waiting = hc;
}

/* Shuts down the sockets past their deadline: MHD then reads the end of
 * the stream and closes the connection itself (it owns the fd, so no
 * close here). A scan of every waiting connection: 10,000 take
 * microseconds. */
static void header_timer_cb(uv_timer_t *t)
{
	struct http_server *hs = t->data;
	struct http_conn *hc, *next;
	uint64_t now = clock_now_ns();
	bool any = false;

	for (hc = hs->waiting; hc != NULL; hc = next) {
		next = hc->next;
		if (hc->deadline_ns > now)
			continue;
		conn_unwait(hs, hc);
		hc->cut = true;
		shutdown(hc->fd, SHUT_RDWR);
		hs->n_header_timeouts++;
		any = true;
	}
	if (any)
		kick(hs);
}

static struct http_conn *conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci;

	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci != NULL ? ci->socket_context : NULL;
}

/* ---- requests ----------------------------------------------------------- */

static struct http_req *req_new(struct http_server *hs,
				struct MHD_Connection *conn, const char *url,
				const char *method)
{
	struct http_req *req = calloc(1, sizeof(*req));

	if (req == NULL)
		return NULL;
	req->hs = hs;
	req->conn = conn;
	req->method = method;
	req->path = url;
	req->start_ns = clock_now_ns();
	req->prompt_tokens = -1;
	req->gen_tokens = -1;
	req->ttft_ms = -1;
	req->next = hs->reqs;
	if (hs->reqs != NULL)
		hs->reqs->prev = req;
	hs->reqs = req;
	hs->in_flight++;
	return req;
}

static int body_append(struct http_req *req, const char *data, size_t n)
{
	size_t max = req->hs->opt.max_body;

	if (req->too_large || n > max - req->body_len) {
		req->too_large = true;
		req->discarded += n;
		return req->discarded > DISCARD_MAX ? -1 : 0;
	}
	if (buf_grow(&req->body, &req->body_cap, req->body_len + n + 1, 4096, max + 1) != 0)
		return -1;
	memcpy(req->body + req->body_len, data, n);
	req->body_len += n;
	req->body[req->body_len] = '\0';
	return 0;
}

/* Content-Length beyond the limit: answer 413 before reading a byte. */
static bool declared_too_large(struct http_req *req)
{
	const char *cl = http_req_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
	unsigned long long n;
	char *end;

	if (cl == NULL)
		return false;
	n = strtoull(cl, &end, 10);
	return end != cl && n > req->hs->opt.max_body;
}

/* Ends one access-handler call: queue the response the handler made, or
 * suspend until it makes one (the engine answers later). */
static enum MHD_Result finish_call(struct http_req *req)
{
	enum MHD_Result r;

	if (req->pending != NULL) {
		r = MHD_queue_response(req->conn, (unsigned)req->status,
				       req->pending);
		MHD_destroy_response(req->pending);
		req->pending = NULL;
		return r;
	}
	if (req->hs->closing)
		return MHD_NO;
	if (!req->responded && !req->suspended) {
		MHD_suspend_connection(req->conn);
		req->suspended = true;
	}
	return MHD_YES;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn,
				 const char *url, const char *method,
				 const char *version, const char *upload,
				 size_t *upload_size, void **con_cls)
{
	struct http_server *hs = cls;
	struct http_req *req = *con_cls;

	(void)version;
	if (req == NULL) {
		/* The header is complete: no deadline until the response. */
		conn_unwait(hs, conn_of(conn));
		req = req_new(hs, conn, url, method);
		if (req == NULL)
			return MHD_NO;
		*con_cls = req;
		if (!declared_too_large(req))
			return MHD_YES;
		req->too_large = true;
		req->handled = true;
		hs->opt.handler(hs->opt.data, req);
		return finish_call(req);
	}
	if (*upload_size != 0) {
		int rc = body_append(req, upload, *upload_size);

		*upload_size = 0;
		return rc == 0 ? MHD_YES : MHD_NO;
	}
	if (!req->handled) {
		req->handled = true;
		/* Handlers may rely on a NUL-terminated body, even an empty one. */
		if (req->body == NULL && !req->too_large &&
		    (req->body = calloc(1, 1)) == NULL)
			return MHD_NO;
		hs->opt.handler(hs->opt.data, req);
	}
	return finish_call(req);
}

static void on_completed(void *cls, struct MHD_Connection *conn,
			 void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct http_server *hs = cls;
	struct http_req *req = *con_cls;

	(void)toe;
	if (req == NULL)
		return;
	*con_cls = NULL;
	/* Kept alive, the connection may idle (timeout) and then must send
	 * the next header in time. */
	conn_wait(hs, conn_of(conn), hs->opt.timeout_s + hs->opt.header_timeout_s);
	if (hs->opt.done != NULL)
		hs->opt.done(hs->opt.data, req);
	if (req->user_free != NULL)
		req->user_free(req->user);
	if (req->pending != NULL)
		MHD_destroy_response(req->pending);
	if (req->prev != NULL)
		req->prev->next = req->next;
	else
		hs->reqs = req->next;
	if (req->next != NULL)
		req->next->prev = req->prev;
	free(req->body);
	free(req);
	hs->in_flight--;
}

/* ---- headers and responses ------------------------------------------- */

const char *http_req_header(struct http_req *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

int http_req_add_header(struct http_req *req, const char *name,
			const char *value)
{
	char (*h)[128];

	if (req->n_headers == HTTP_MAX_HEADERS || strlen(name) > 127 ||
	    strlen(value) > 127)
		return -1;
	h = req->headers[req->n_headers++];
	strcpy(h[0], name);
	strcpy(h[1], value);
	return 0;
}

/* Hands a made response to MHD: queued by the access handler call in
 * progress, or after resuming a request that waited for it. */
static int respond_with(struct http_req *req, int status,
			struct MHD_Response *resp, const char *content_type)
{
	size_t i;

	if (resp == NULL)
		return -1;
	if (req->responded) {
		MHD_destroy_response(resp);
		return -1;
	}
	for (i = 0; i < req->n_headers; i++)
		MHD_add_response_header(resp, req->headers[i][0],
					req->headers[i][1]);
	if (content_type != NULL)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					content_type);
	/* While draining, keep-alive would hold connections open. A body
	 * left unread (413) would be parsed as the next request. */
	if (req->hs->quiesced || req->too_large)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION,
					"close");
	req->status = status;
	req->responded = true;
	req->pending = resp;
	http_req_resume(req);
	return 0;
}

int http_respond(struct http_req *req, int status, const char *content_type,
		 const char *body, size_t len)
{
	struct MHD_Response *resp;

	resp = MHD_create_response_from_buffer(len, (void *)body,
					       MHD_RESPMEM_MUST_COPY);
	return respond_with(req, status, resp, content_type);
}

int http_respond_json(struct http_req *req, int status, char *json)
{
	static const char oom[] = "{\"error\":{\"message\":\"out of memory\","
				  "\"type\":\"server_error\",\"param\":null,"
				  "\"code\":null}}";
	int rc;

	if (json == NULL)
		return http_respond(req, 500, "application/json", oom,
				    sizeof(oom) - 1);
	rc = http_respond(req, status, "application/json", json, strlen(json));
	free(json);
	return rc;
}

int http_respond_error(struct http_req *req, const struct api_error *e)
{
	char num[16];

	if (e->retry_after > 0) {
		snprintf(num, sizeof(num), "%d", e->retry_after);
		http_req_add_header(req, "Retry-After", num);
	}
	if (e->status == 401)
		http_req_add_header(req, "WWW-Authenticate", "Bearer");
	return http_respond_json(req, e->status, api_error_json(e));
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct http_req *req = cls;
	ssize_t n;

	(void)pos;
	n = req->read_cb(req->read_data, buf, max);
	if (n > 0)
		return n;
	if (n < 0)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (req->hs->closing)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	/* Returning 0 without suspending would make MHD spin on us. */
	MHD_suspend_connection(req->conn);
	req->suspended = true;
	return 0;
}

int http_respond_stream(struct http_req *req, int status,
			const char *content_type, http_read_cb read_cb,
			void *data)
{
	struct MHD_Response *resp;

	const union MHD_ConnectionInfo *ci;
	int sndbuf = req->hs->opt.stream_buffer > (1u << 30) ? 1 << 30
		     : (int)req->hs->opt.stream_buffer;

	if (req->responded)
		return -1;
	/* The producers bound what they queue unread (stream_buffer); the
	 * kernel's send buffer, autotuned, would take megabytes more from a
	 * client that stops reading. Fixed, it disables that (Linux doubles
	 * the value and caps it at net.core.wmem_max): a token stream needs
	 * little. */
	ci = MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (sndbuf > 0 && ci != NULL)
		setsockopt(ci->connect_fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	req->read_cb = read_cb;
	req->read_data = data;
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
						 stream_reader, req, NULL);
	if (resp != NULL && content_type != NULL &&
	    strcmp(content_type, "text/event-stream") == 0) {
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
					"no-cache");
		/* Stops reverse proxies (nginx) from buffering the stream. */
		MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	}
	return respond_with(req, status, resp, content_type);
}

void http_req_resume(struct http_req *req)
{
	if (!req->suspended)
		return;
	req->suspended = false;
	MHD_resume_connection(req->conn);
	kick(req->hs);
}

/* ---- start and stop -------------------------------------------------------- */

static int make_addr(const char *host, int port, struct sockaddr_storage *ss,
		     unsigned *flags)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		*flags |= MHD_USE_IPv6;
		return 0;
	}
	return -1;
}

static void on_connection(void *cls, struct MHD_Connection *c,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct http_server *hs = cls;
	struct http_conn *hc = *socket_context;
	const union MHD_ConnectionInfo *ci;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		hs->n_conns++;
		ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		/* Out of memory: the connection goes without a deadline (the
		 * idle timeout still holds). */
		if (ci == NULL || (hc = calloc(1, sizeof(*hc))) == NULL)
			return;
		hc->fd = ci->connect_fd;
		*socket_context = hc;
		conn_wait(hs, hc, hs->opt.header_timeout_s);
		return;
	}
	if (toe != MHD_CONNECTION_NOTIFY_CLOSED)
		return;
	hs->n_closed++;
	hs->n_conns--;
	if (hc != NULL) {
		conn_unwait(hs, hc);
		free(hc);
		*socket_context = NULL;
	}
}

static void close_cb(uv_handle_t *h)
{
	struct http_server *hs = h->data;

	hs->handles_open--;
}

/* Descriptors kept for everything but connections: the listening socket,
 * epoll, libuv, the log, the model, a GPU driver's. */
#define FD_RESERVE 128

/* Each connection holds a descriptor: raises the soft RLIMIT_NOFILE
 * towards the hard one when the limit asks for more, and returns the
 * connection limit that the descriptors allow. */
static unsigned conn_limit(unsigned want)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)want + FD_RESERVE;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return want;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
		rlim_t old = rl.rlim_cur;

		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need
			? need : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			rl.rlim_cur = old;
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
		return want;
	return rl.rlim_cur > FD_RESERVE + 16 ? (unsigned)(rl.rlim_cur - FD_RESERVE) : 16;
}

int http_start(struct http_server *hs, uv_loop_t *loop,
	       const struct http_options *opt, char *err)
{
	unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
			 MHD_USE_ERROR_LOG;
	const union MHD_DaemonInfo *info;
	struct sockaddr_storage ss;

	memset(hs, 0, sizeof(*hs));
	hs->loop = loop;
	hs->opt = *opt;
	hs->opt.max_connections = conn_limit(opt->max_connections > 0
					     ? opt->max_connections : 1024u);
	if (make_addr(opt->host, opt->port, &ss, &flags) != 0)
		return ember_seterr(err, EMBER_EINVAL,
				    "host '%s' is not a numeric IPv4/IPv6 address",
				    opt->host);
	hs->mhd = MHD_start_daemon(
		flags, (uint16_t)opt->port, NULL, NULL, on_access, hs,
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
		/* An inherited socket wins over SOCK_ADDR; MHD_INVALID_SOCKET
		 * (-1) makes MHD bind SOCK_ADDR itself. */
		MHD_OPTION_LISTEN_SOCKET, (MHD_socket)(opt->listen_fd > 0
			? opt->listen_fd : MHD_INVALID_SOCKET),
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)opt->timeout_s,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, hs,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, hs,
		MHD_OPTION_CONNECTION_LIMIT, hs->opt.max_connections,
		/* No MHD_OPTION_LISTENING_ADDRESS_REUSE: it sets SO_REUSEPORT,
		 * which let a second emberd bind a port one already listens on
		 * and the kernel spread connections over both (clients silently
		 * answered by either). MHD's default SO_REUSEADDR still allows a
		 * restart while old connections sit in TIME_WAIT. */
		MHD_OPTION_END);
	if (hs->mhd == NULL)
		return ember_seterr(err, EMBER_EIO,
				    "cannot listen on %s:%d (in use? "
				    "not permitted?)", opt->host, opt->port);
	info = MHD_get_daemon_info(hs->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (info == NULL || uv_poll_init(loop, &hs->poll, info->epoll_fd) != 0) {
		MHD_stop_daemon(hs->mhd);
		hs->mhd = NULL;
		return ember_seterr(err, EMBER_EIO, "cannot watch MHD's epoll fd");
	}
	uv_timer_init(loop, &hs->timer);
	uv_timer_init(loop, &hs->header_timer);
	hs->poll.data = hs;
	hs->timer.data = hs;
	hs->header_timer.data = hs;
	hs->handles_open = 3;
	uv_poll_start(&hs->poll, UV_READABLE, poll_cb);
	if (opt->header_timeout_s > 0)
		uv_timer_start(&hs->header_timer, header_timer_cb,
			       HEADER_TICK_MS, HEADER_TICK_MS);
	kick(hs);
	return 0;
}

/* Connections the kernel had completed but MHD not yet accepted when the
 * drain began: closing the listening socket would reset them, and a
 * balancer sees an empty answer (HAProxy's 502 where it may not retry,
 * as for session routes or bodies past its buffer). MHD takes them
 * (MHD_add_connection closes a socket it cannot take) and answers them
 * as draining. At most HTTP_ADOPT_MAX, so a flood cannot hold the loop. */
#define HTTP_ADOPT_MAX 1024

static void http_adopt_backlog(struct http_server *hs, int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return;
	for (int i = 0; i < HTTP_ADOPT_MAX; i++) {
		struct sockaddr_storage sa;
		socklen_t len = sizeof(sa);
		int c = accept4(fd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return; /* EAGAIN: the backlog is empty */
		}
		(void)MHD_add_connection(hs->mhd, c, (struct sockaddr *)&sa, len);
	}
}

void http_quiesce(struct http_server *hs)
{
	MHD_socket fd;

	if (hs == NULL || hs->mhd == NULL || hs->quiesced)
		return;
	hs->quiesced = true;
	fd = MHD_quiesce_daemon(hs->mhd);
	if (fd != MHD_INVALID_SOCKET) {
		/* Only a connection arriving after the last accept() finds the
		 * port closed: a refused connect, which balancers retry. */
		http_adopt_backlog(hs, fd);
		close(fd);
		kick(hs);
	}
}

void http_close(struct http_server *hs)
{
	struct http_req *req;

	if (hs == NULL || hs->mhd == NULL)
		return;
	/* MHD wants no suspended connections at stop; resumed ones now see
	 * `closing` and end instead of waiting again. */
	hs->closing = true;
	for (req = hs->reqs; req != NULL; req = req->next)
		if (req->suspended) {
			req->suspended = false;
			MHD_resume_connection(req->conn);
		}
	MHD_run(hs->mhd);
	/* The poll must stop before MHD closes the fd it watches. */
	uv_poll_stop(&hs->poll);
	MHD_stop_daemon(hs->mhd);
	hs->mhd = NULL;
	uv_close((uv_handle_t *)&hs->poll, close_cb);
	uv_close((uv_handle_t *)&hs->timer, close_cb);
	uv_close((uv_handle_t *)&hs->header_timer, close_cb);
}
