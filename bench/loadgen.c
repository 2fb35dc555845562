/* loadgen.c - load generator for emberd: N concurrent streaming clients.
 *
 * Each of N clients runs R requests one after another (all clients start
 * together), each request a streaming POST /v1/chat/completions (or
 * /v1/completions) with a fixed ~P-token prompt, max_tokens M, temperature
 * 0 and stream_options.include_usage. One thread drives every socket with
 * poll(2), so client-side overhead does not distort timings at 16+ streams.
 * A global time limit bounds the run; requests still in flight then count
 * as "timeout" errors.
 *
 * Loopback only: the host must be 127.0.0.0/8, ::1 or "localhost";
 * anything else is refused, so the tool cannot be aimed at another machine.
 *
 * The prompt is built from a word list and calibrated to P tokens with the
 * daemon's POST /tokenize when it answers (else ~1.3 tokens per word). Each
 * request's prompt starts with its own number, so a server's prefix cache
 * cannot skip the prefill (--same-prompt turns that off).
 *
 * Measured per request: time to the first non-empty content delta (TTFT),
 * content chunks, usage.completion_tokens, end time. Reported: aggregate
 * completion tokens / wall time, median per-stream decode rate, TTFT
 * mean/p50/p99 and errors by kind, as a table or one JSON line (--json).
 * Exit status: 0 all requests ok, 1 some failed, 2 bad usage or refused.
 * Self-contained (libc and libm only): no JSON library, no libember.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 1024
#define MAX_BUF (16u << 20) /* one response head or SSE event, at most */

enum err_kind { E_OK, E_CONNECT, E_HTTP, E_SSE, E_TIMEOUT, E_CLOSED, E_STREAM,
		E_USAGE, N_ERR };
static const char *const err_names[N_ERR] = {
	"ok", "connect", "http_status", "malformed_sse", "timeout", "closed",
	"stream_error", "usage_mismatch"};

struct opts {
	const char *host;
	int port, clients, requests, prompt_tokens, max_tokens;
	double duration;
	const char *api_key;
	bool chat, json, same_prompt, quiet;
};

/* One request's outcome; times in seconds since the run's start. */
struct result {
	double t_start, t_first, t_last, t_end;
	int chunks;        /* non-empty content deltas */
	int usage_tokens;  /* usage.completion_tokens; -1 when none came */
	int prompt_tokens; /* usage.prompt_tokens; -1 when none came */
	int status;        /* HTTP status, 0 before the head */
	enum err_kind err;
};

struct buf {
	char *p;
	size_t len, cap;
};

enum phase { PH_IDLE, PH_CONNECT, PH_SEND, PH_HEAD, PH_BODY, PH_FINISHED };
enum body_mode { BODY_EOF, BODY_LENGTH, BODY_CHUNKED };

struct client {
	int fd;
	enum phase ph;
	int next;            /* index of its next request, 0..requests */
	struct result *r;    /* the request in flight */
	struct buf out;      /* request bytes; out_off of them sent */
	size_t out_off;
	struct buf in;       /* received, not yet decoded */
	struct buf body;     /* decoded body, not yet split into SSE lines */
	struct buf event;    /* data lines of the SSE event being read */
	enum body_mode mode;
	long long left;      /* BODY_LENGTH: bytes left; chunked: of this chunk */
	bool in_chunk, chunk_crlf, got_done;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- buffers ---------------------------------------------------------- */

static int buf_reserve(struct buf *b, size_t extra)
{
	size_t cap = b->cap ? b->cap : 4096;
	char *p;

	if (b->len + extra + 1 > MAX_BUF)
		return -1;
	while (cap < b->len + extra + 1)
		cap *= 2;
	if (cap == b->cap)
		return 0;
	p = realloc(b->p, cap);
	if (p == NULL)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

static int buf_add(struct buf *b, const char *s, size_t n)
{
	if (buf_reserve(b, n) != 0)
		return -1;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

static int buf_str(struct buf *b, const char *s)
{
	return buf_add(b, s, strlen(s));
}

static void buf_drop(struct buf *b, size_t n)
{
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
	if (b->p)
		b->p[b->len] = '\0';
}

static void buf_free(struct buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* ---- JSON: just enough to validate a chunk and read four fields -------- */

struct json_chunk {
	bool error;            /* an {"error":...} object came in the stream */
	bool content;          /* the first choice carries non-empty text */
	int completion_tokens; /* usage.*, -1 when absent */
	int prompt_tokens;
};

static const char *json_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* p at '"': the end of the string, or NULL when malformed. */
static const char *json_string_end(const char *p, const char *end)
{
	for (p++; p < end; p++) {
		if (*p == '"')
			return p + 1;
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\' && ++p == end)
			return NULL;
	}
	return NULL;
}

/* The end of the value at p (no leading blanks), or NULL when malformed. */
static const char *json_skip(const char *p, const char *end, int depth)
{
	char close;

	if (p >= end || depth > 64)
		return NULL;
	if (*p == '"')
		return json_string_end(p, end);
	if (*p == '{' || *p == '[') {
		close = *p == '{' ? '}' : ']';
		p = json_ws(p + 1, end);
		if (p < end && *p == close)
			return p + 1;
		for (;;) {
			if (close == '}') {
				if (p >= end || *p != '"' ||
				    (p = json_string_end(p, end)) == NULL)
					return NULL;
				p = json_ws(p, end);
				if (p >= end || *p != ':')
					return NULL;
				p = json_ws(p + 1, end);
			}
			if ((p = json_skip(p, end, depth + 1)) == NULL)
				return NULL;
			p = json_ws(p, end);
			if (p < end && *p == close)
				return p + 1;
			if (p >= end || *p != ',')
				return NULL;
			p = json_ws(p + 1, end);
		}
	}
	if (end - p >= 4 && (!memcmp(p, "true", 4) || !memcmp(p, "null", 4)))
		return p + 4;
	if (end - p >= 5 && !memcmp(p, "false", 5))
		return p + 5;
	if (!strchr("-0123456789", *p))
		return NULL;
	while (p < end && *p && strchr("+-.eE0123456789", *p))
		p++;
	return p;
}

/* The value of member key of the object at p (already validated), or NULL
 * when absent; *ve gets its end. */
static const char *json_get(const char *p, const char *end, const char *key,
			    const char **ve)
{
	size_t klen = strlen(key);
	const char *k, *v;

	if (p == NULL || p >= end || *p != '{')
		return NULL;
	p = json_ws(p + 1, end);
	while (p < end && *p == '"') {
		k = p + 1;
		p = json_string_end(p, end);
		v = json_ws(json_ws(p, end) + 1, end);
		*ve = json_skip(v, end, 0);
		if ((size_t)(p - 1 - k) == klen && memcmp(k, key, klen) == 0)
			return v;
		p = json_ws(*ve, end);
		p = p < end && *p == ',' ? json_ws(p + 1, end) : end;
	}
	return NULL;
}

static int json_int(const char *v, const char *end)
{
	char num[24];
	size_t n = (size_t)(end - v);

	if (v == NULL || n == 0 || n >= sizeof(num) || !strchr("-0123456789", *v))
		return -1;
	memcpy(num, v, n);
	num[n] = '\0';
	return (int)strtol(num, NULL, 10);
}

/* Reads one streamed chunk; 0 ok, -1 when it is not one JSON object. */
static int json_read_chunk(const char *p, const char *end, bool chat,
			   struct json_chunk *ch)
{
	const char *v, *ve = NULL, *c0, *u;

	memset(ch, 0, sizeof(*ch));
	ch->completion_tokens = ch->prompt_tokens = -1;
	p = json_ws(p, end);
	if (p >= end || *p != '{' || (v = json_skip(p, end, 0)) == NULL ||
	    json_ws(v, end) != end)
		return -1;
	ch->error = json_get(p, end, "error", &ve) != NULL;
	v = json_get(p, end, "choices", &ve);
	if (v && *v == '[' && (c0 = json_ws(v + 1, end)) < ve && *c0 == '{') {
		if (chat)
			c0 = json_get(c0, end, "delta", &ve);
		v = json_get(c0, end, chat ? "content" : "text", &ve);
		ch->content = v && *v == '"' && ve - v > 2;
	}
	if ((u = json_get(p, end, "usage", &ve)) != NULL && *u == '{') {
		v = json_get(u, end, "completion_tokens", &ve);
		ch->completion_tokens = v ? json_int(v, ve) : -1;
		v = json_get(u, end, "prompt_tokens", &ve);
		ch->prompt_tokens = v ? json_int(v, ve) : -1;
	}
	return 0;
}

/* ---- address ------------------------------------------------------------ */

/* Fills *ss for host:port if host is a loopback address; -1 otherwise. */
static int loopback_addr(const char *host, int port,
			 struct sockaddr_storage *ss, socklen_t *sl)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (strcmp(host, "localhost") == 0)
		host = "127.0.0.1";
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		if ((ntohl(a4->sin_addr.s_addr) >> 24) != 127)
			return -1;
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		*sl = sizeof(*a4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1 &&
	    IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr)) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		*sl = sizeof(*a6);
		return 0;
	}
	return -1;
}

/* ---- request bodies ------------------------------------------------------ */

static const char *const words[] = {
	"the", "river", "carried", "small", "boats", "past", "old", "stone",
	"houses", "while", "children", "watched", "from", "a", "bridge", "and",
	"counted", "every", "sail", "they", "could", "see", "before", "evening",
	"light", "turned", "water", "gold", "then", "grey", "as", "bells",
	"rang", "over", "market", "where", "bakers", "sold", "bread", "fish",
	"apples", "honey", "to", "travellers", "who", "came", "north", "roads",
	"with", "stories", "about", "mountains", "forests", "cities", "far",
	"away", "beyond", "sea", "many", "years", "ago", "when", "winter", "long"};
#define N_WORDS (sizeof(words) / sizeof(words[0]))

/* Appends n words of deterministic text (no JSON escaping needed). */
static int prompt_text(struct buf *b, int n)
{
	unsigned s = 12345;
	int i;

	for (i = 0; i < n; i++) {
		s = s * 1103515245u + 12345u;
		if ((i && buf_str(b, " ") != 0) ||
		    buf_str(b, words[(s >> 16) % N_WORDS]) != 0)
			return -1;
	}
	return 0;
}

/* The full HTTP request for one generation; tag makes the prompt unique. */
static int build_request(struct buf *out, const struct opts *o, int nwords,
			 long tag)
{
	struct buf body = {0};
	char head[512], pre[32];
	int n, rc = -1;

	n = snprintf(pre, sizeof(pre), "%ld: ", tag);
	if (buf_str(&body, o->chat ? "{\"messages\":[{\"role\":\"user\","
				     "\"content\":\"" : "{\"prompt\":\"") != 0 ||
	    (tag >= 0 && buf_add(&body, pre, (size_t)n) != 0) ||
	    prompt_text(&body, nwords) != 0)
		goto fail;
	n = snprintf(head, sizeof(head), "\"%s,\"max_tokens\":%d,"
		     "\"temperature\":0,\"stream\":true,"
		     "\"stream_options\":{\"include_usage\":true}}",
		     o->chat ? "}]" : "", o->max_tokens);
	if (buf_add(&body, head, (size_t)n) != 0)
		goto fail;
	out->len = 0;
	n = snprintf(head, sizeof(head),
		     "POST /v1/%s HTTP/1.1\r\nHost: %s:%d\r\n"
		     "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
		     "Connection: close\r\nContent-Length: %zu\r\n%s%s%s\r\n",
		     o->chat ? "chat/completions" : "completions", o->host,
		     o->port, body.len, o->api_key ? "Authorization: Bearer " : "",
		     o->api_key ? o->api_key : "", o->api_key ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(head) ||
	    buf_add(out, head, (size_t)n) != 0 ||
	    buf_add(out, body.p, body.len) != 0)
		goto fail;
	rc = 0;
fail:
	buf_free(&body);
	return rc;
}

/* ---- the HTTP response --------------------------------------------------- */

/* Case-insensitive search for "\r\nName:" in the head; value or NULL. */
static const char *header_value(const char *head, const char *name)
{
	size_t n = strlen(name);
	const char *p;

	for (p = strstr(head, "\r\n"); p != NULL; p = strstr(p + 2, "\r\n"))
		if (strncasecmp(p + 2, name, n) == 0 && p[2 + n] == ':') {
			p += 3 + n;
			while (*p == ' ' || *p == '\t')
				p++;
			return p;
		}
	return NULL;
}

/* Parses the head once it is complete; 1 need more, 0 done, <0 error. */
static int parse_head(struct client *c)
{
	char *end = strstr(c->in.p ? c->in.p : "", "\r\n\r\n");
	const char *v;
	int status;

	if (end == NULL)
		return 1;
	end[2] = '\0'; /* the head ends at its last CRLF */
	if (sscanf(c->in.p, "HTTP/1.%*d %d", &status) != 1)
		return -E_SSE;
	c->r->status = status;
	c->mode = BODY_EOF;
	if ((v = header_value(c->in.p, "Transfer-Encoding")) &&
	    strncasecmp(v, "chunked", 7) == 0)
		c->mode = BODY_CHUNKED;
	else if ((v = header_value(c->in.p, "Content-Length")) != NULL) {
		c->mode = BODY_LENGTH;
		c->left = strtoll(v, NULL, 10);
	}
	buf_drop(&c->in, (size_t)(end + 4 - c->in.p));
	c->ph = PH_BODY;
	return status == 200 ? 0 : -E_HTTP;
}

/* Moves decoded body bytes from in to body; 1 body complete, 0 need
 * more, <0 malformed framing. */
static int dechunk(struct client *c)
{
	char *eol;
	size_t n;

	if (c->mode != BODY_CHUNKED) {
		n = c->in.len;
		if (c->mode == BODY_LENGTH && (long long)n > c->left)
			n = (size_t)c->left;
		if (buf_add(&c->body, c->in.p, n) != 0)
			return -E_SSE;
		buf_drop(&c->in, n);
		if (c->mode == BODY_LENGTH && (c->left -= (long long)n) == 0)
			return 1;
		return 0;
	}
	for (;;) {
		if (c->chunk_crlf) {
			if (c->in.len < 2)
				return 0;
			if (memcmp(c->in.p, "\r\n", 2) != 0)
				return -E_SSE;
			buf_drop(&c->in, 2);
			c->chunk_crlf = false;
		}
		if (!c->in_chunk) {
			if (c->in.len == 0 ||
			    (eol = strstr(c->in.p, "\r\n")) == NULL)
				return c->in.len > 64 ? -E_SSE : 0;
			c->left = strtoll(c->in.p, NULL, 16);
			if (c->left < 0 || eol == c->in.p)
				return -E_SSE;
			buf_drop(&c->in, (size_t)(eol + 2 - c->in.p));
			if (c->left == 0)
				return 1; /* trailers ignored: we close */
			c->in_chunk = true;
		}
		n = c->in.len < (size_t)c->left ? c->in.len : (size_t)c->left;
		if (n == 0)
			return 0;
		if (buf_add(&c->body, c->in.p, n) != 0)
			return -E_SSE;
		buf_drop(&c->in, n);
		if ((c->left -= (long long)n) == 0) {
			c->in_chunk = false;
			c->chunk_crlf = true;
		}
	}
}

/* One complete SSE event's data; 0 ok, <0 error kind. */
static int on_event(struct client *c, const struct opts *o, double t)
{
	const char *p = c->event.p, *end = p + c->event.len;
	struct json_chunk ch;

	if (c->event.len == 6 && memcmp(p, "[DONE]", 6) == 0) {
		c->got_done = true;
		return 0;
	}
	if (c->got_done || json_read_chunk(p, end, o->chat, &ch) != 0)
		return -E_SSE;
	if (ch.error)
		return -E_STREAM;
	if (ch.content) {
		if (c->r->chunks++ == 0)
			c->r->t_first = t;
		c->r->t_last = t;
	}
	if (ch.completion_tokens >= 0)
		c->r->usage_tokens = ch.completion_tokens;
	if (ch.prompt_tokens >= 0)
		c->r->prompt_tokens = ch.prompt_tokens;
	return 0;
}

/* Splits decoded body bytes into SSE lines; 0 ok, <0 error kind. */
static int parse_sse(struct client *c, const struct opts *o, double t)
{
	char *nl, *line;
	size_t len;
	int rc;

	while (c->body.len && (nl = memchr(c->body.p, '\n', c->body.len))) {
		line = c->body.p;
		len = (size_t)(nl - line);
		if (len && line[len - 1] == '\r')
			len--;
		if (len == 0) {
			if (c->event.len && (rc = on_event(c, o, t)) != 0)
				return rc;
			c->event.len = 0;
		} else if (len >= 5 && memcmp(line, "data:", 5) == 0) {
			size_t skip = (len > 5 && line[5] == ' ') ? 6 : 5;

			if ((c->event.len && buf_add(&c->event, "\n", 1) != 0) ||
			    buf_add(&c->event, line + skip, len - skip) != 0)
				return -E_SSE;
		} else if (line[0] != ':' && strncmp(line, "event:", 6) &&
			   strncmp(line, "id:", 3) && strncmp(line, "retry:", 6)) {
			return -E_SSE;
		}
		buf_drop(&c->body, (size_t)(nl + 1 - c->body.p));
	}
	return c->body.len > MAX_BUF / 2 ? -E_SSE : 0;
}

/* ---- one client ---------------------------------------------------------- */

static void client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* Ends the request in flight with kind err and readies the next one. */
static void client_finish(struct client *c, const struct opts *o,
			  enum err_kind err, double t)
{
	struct result *r = c->r;

	if (err == E_OK && (r->usage_tokens < 0 || r->chunks > r->usage_tokens ||
			    (r->chunks == 0) != (r->usage_tokens == 0)))
		err = E_USAGE; /* a chunk carries >= 1 token; usage must come */
	r->err = err;
	r->t_end = t;
	client_close(c);
	c->ph = c->next < o->requests ? PH_IDLE : PH_FINISHED;
}

static int client_start(struct client *c, const struct opts *o, int nwords,
			const struct sockaddr_storage *ss, socklen_t sl,
			struct result *r, long tag, double t)
{
	int one = 1;

	memset(r, 0, sizeof(*r));
	r->usage_tokens = r->prompt_tokens = -1;
	r->t_start = t;
	c->r = r;
	c->next++;
	c->in.len = c->body.len = c->event.len = 0;
	c->out_off = 0;
	c->in_chunk = c->chunk_crlf = c->got_done = false;
	if (build_request(&c->out, o, nwords, o->same_prompt ? -1 : tag) != 0)
		return -E_CONNECT;
	c->fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -E_CONNECT;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->fd, (const struct sockaddr *)ss, sl) != 0 &&
	    errno != EINPROGRESS)
		return -E_CONNECT;
	c->ph = PH_CONNECT;
	return 0;
}

/* Reacts to poll readiness; returns 0 or <0 error kind (request over),
 * 1 when the request completed cleanly. */
static int client_step(struct client *c, const struct opts *o, short rev,
		       double t)
{
	char tmp[65536];
	ssize_t n;
	int rc, soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (c->ph == PH_CONNECT) {
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 ||
		    soerr != 0)
			return -E_CONNECT;
		c->ph = PH_SEND;
	}
	if (c->ph == PH_SEND) {
		n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off,
			 MSG_NOSIGNAL);
		if (n < 0)
			return errno == EAGAIN ? 0 : -E_CLOSED;
		if ((c->out_off += (size_t)n) == c->out.len)
			c->ph = PH_HEAD;
		return 0;
	}
	if (!(rev & (POLLIN | POLLHUP | POLLERR)))
		return 0;
	n = recv(c->fd, tmp, sizeof(tmp), 0);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -E_CLOSED;
	if (n == 0) { /* EOF: the end only for a body without framing */
		if (c->ph == PH_BODY && c->mode == BODY_EOF) {
			if ((rc = parse_sse(c, o, t)) != 0)
				return rc;
			return c->got_done ? 1 : -E_SSE;
		}
		return -E_CLOSED;
	}
	if (buf_add(&c->in, tmp, (size_t)n) != 0)
		return -E_SSE;
	if (c->ph == PH_HEAD && (rc = parse_head(c)) != 0)
		return rc > 0 ? 0 : rc;
	if ((rc = dechunk(c)) < 0)
		return rc;
	if ((n = parse_sse(c, o, t)) != 0)
		return (int)n;
	if (rc == 1)
		return c->got_done && c->body.len == 0 ? 1 : -E_SSE;
	return 0;
}

/* ---- calibration: the prompt's length in tokens ----------------------- */

/* A blocking POST /tokenize of nwords words; the token count, or -1 when
 * the daemon has no such endpoint or answers something unexpected. */
static int count_tokens(const struct opts *o, const struct sockaddr_storage *ss,
			socklen_t sl, int nwords)
{
	struct buf req = {0}, body = {0}, resp = {0};
	struct timeval tv = {10, 0};
	char head[512], tmp[65536], *p, *end;
	const char *v, *ve = NULL;
	int fd = -1, n, count = -1;
	ssize_t got;

	if (buf_str(&body, "{\"content\":\"") != 0 ||
	    (!o->same_prompt && buf_str(&body, "0: ") != 0) ||
	    prompt_text(&body, nwords) != 0 ||
	    buf_str(&body, o->chat ? "\",\"add_special\":false}" :
				     "\",\"add_special\":true}") != 0)
		goto out;
	n = snprintf(head, sizeof(head),
		     "POST /tokenize HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n"
		     "Content-Type: application/json\r\nContent-Length: %zu\r\n"
		     "%s%s%s\r\n", o->host, o->port, body.len,
		     o->api_key ? "Authorization: Bearer " : "",
		     o->api_key ? o->api_key : "", o->api_key ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(head) || buf_add(&req, head, (size_t)n) ||
	    buf_add(&req, body.p, body.len) != 0)
		goto out;
	if ((fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    connect(fd, (const struct sockaddr *)ss, sl) != 0 ||
	    send(fd, req.p, req.len, MSG_NOSIGNAL) != (ssize_t)req.len)
		goto out;
	while ((got = recv(fd, tmp, sizeof(tmp), 0)) > 0)
		if (buf_add(&resp, tmp, (size_t)got) != 0)
			goto out;
	if (resp.len < 12 || strncmp(resp.p + 8, " 200", 4) != 0 ||
	    (p = strstr(resp.p, "\r\n\r\n")) == NULL)
		goto out;
	p += 4;
	end = resp.p + resp.len;
	if (json_skip(p, end, 0) == NULL ||
	    (v = json_get(p, end, "tokens", &ve)) == NULL || *v != '[')
		goto out;
	count = 0;
	for (v = json_ws(v + 1, end); v < ve && *v != ']';) {
		count++;
		v = json_ws(json_skip(v, end, 0), end);
		if (*v == ',')
			v = json_ws(v + 1, end);
	}
out:
	if (fd >= 0)
		close(fd);
	buf_free(&req);
	buf_free(&body);
	buf_free(&resp);
	return count;
}

/* Words for a prompt of ~o->prompt_tokens tokens; *measured gets the
 * tokenizer's count (-1 when estimated). */
static int calibrate(const struct opts *o, const struct sockaddr_storage *ss,
		     socklen_t sl, int *measured)
{
	int target = o->prompt_tokens, w = target * 10 / 13, best = -1, bestd = 0;
	int i, n, d;

	*measured = -1;
	for (i = 0; i < 8; i++) {
		if (w < 1)
			w = 1;
		if ((n = count_tokens(o, ss, sl, w)) < 0)
			return best >= 0 ? best : (target * 10 / 13 > 0 ? target * 10 / 13 : 1);
		d = abs(n - target);
		if (best < 0 || d < bestd) {
			best = w;
			bestd = d;
			*measured = n;
		}
		if (d == 0)
			break;
		/* scale by the measured words-per-token, at least one word */
		d = (int)lround((double)(target - n) * w / (n > 0 ? n : 1));
		w += d ? d : (target > n ? 1 : -1);
	}
	return best;
}

/* ---- the run -------------------------------------------------------------- */

/* Drives every client until all requests ended or the deadline passed;
 * the wall time of the run. res holds clients * requests results, in order
 * of client then request; results never started keep status -1. */
static double run(const struct opts *o, int nwords,
		  const struct sockaddr_storage *ss, socklen_t sl,
		  struct client *cl, struct pollfd *pf, struct result *res)
{
	double t0 = now_s(), t, last = 0;
	int i, rc, active, timeout_ms;

	for (i = 0; i < o->clients * o->requests; i++)
		res[i].status = -1;
	for (;;) {
		t = now_s() - t0;
		active = 0;
		for (i = 0; i < o->clients; i++) {
			struct client *c = &cl[i];

			while (c->ph == PH_IDLE && t < o->duration) {
				struct result *r = &res[i * o->requests + c->next];

				rc = client_start(c, o, nwords, ss, sl, r,
						  (long)(i * o->requests + c->next), t);
				if (rc != 0)
					client_finish(c, o, (enum err_kind)-rc, t);
			}
			if (c->ph == PH_IDLE)
				c->ph = PH_FINISHED; /* out of time: never started */
			if (c->ph != PH_FINISHED && t >= o->duration)
				client_finish(c, o, E_TIMEOUT, t);
			pf[i].fd = c->ph == PH_FINISHED ? -1 : c->fd;
			pf[i].events = c->ph == PH_CONNECT || c->ph == PH_SEND ?
					       POLLOUT : POLLIN;
			pf[i].revents = 0;
			active += c->ph != PH_FINISHED;
		}
		if (active == 0)
			break;
		timeout_ms = (int)((o->duration - t) * 1000) + 1;
		if (poll(pf, (nfds_t)o->clients, timeout_ms) < 0 && errno != EINTR)
			break;
		t = now_s() - t0;
		for (i = 0; i < o->clients; i++) {
			if (pf[i].fd < 0 || pf[i].revents == 0)
				continue;
			rc = client_step(&cl[i], o, pf[i].revents, t);
			if (rc != 0)
				client_finish(&cl[i], o, rc > 0 ? E_OK :
						 (enum err_kind)-rc, t);
		}
	}
	for (i = 0; i < o->clients * o->requests; i++)
		if (res[i].status >= 0 && res[i].t_end > last)
			last = res[i].t_end;
	return last;
}

/* ---- statistics ------------------------------------------------------------ */

struct stats {
	int started, ok, errors, by_kind[N_ERR], http[6]; /* http: by hundreds */
	long tokens, chunks;
	double wall, agg_tps, stream_tps_p50, ttft_mean, ttft_p50, ttft_p99;
	double prompt_mean;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile of n sorted values; 0 when n is 0. */
static double pct(const double *v, int n, double p)
{
	int k = (int)ceil(p / 100.0 * n);

	if (n == 0)
		return 0;
	return v[k < 1 ? 0 : (k > n ? n - 1 : k - 1)];
}

static int stats_compute(const struct result *res, int n, double wall,
			 struct stats *s)
{
	double *ttft = malloc(sizeof(double) * (size_t)(n ? n : 1));
	double *tps = malloc(sizeof(double) * (size_t)(n ? n : 1));
	int i, nt = 0, np = 0, nprompt = 0;

	memset(s, 0, sizeof(*s));
	if (ttft == NULL || tps == NULL) {
		free(ttft);
		free(tps);
		return -1;
	}
	for (i = 0; i < n; i++) {
		const struct result *r = &res[i];

		if (r->status < 0)
			continue;
		s->started++;
		s->by_kind[r->err]++;
		if (r->err == E_HTTP && r->status >= 100 && r->status < 600)
			s->http[r->status / 100]++;
		if (r->err != E_OK)
			continue;
		s->ok++;
		s->tokens += r->usage_tokens;
		s->chunks += r->chunks;
		if (r->prompt_tokens >= 0) {
			s->prompt_mean += r->prompt_tokens;
			nprompt++;
		}
		if (r->chunks > 0)
			ttft[nt++] = r->t_first - r->t_start;
		/* decode rate after the first token: chunks may carry several */
		if (r->usage_tokens > 1 && r->t_last > r->t_first)
			tps[np++] = (r->usage_tokens - 1) / (r->t_last - r->t_first);
	}
	s->errors = s->started - s->ok;
	s->wall = wall;
	s->agg_tps = wall > 0 ? s->tokens / wall : 0;
	s->prompt_mean = nprompt ? s->prompt_mean / nprompt : -1;
	qsort(ttft, (size_t)nt, sizeof(double), cmp_double);
	qsort(tps, (size_t)np, sizeof(double), cmp_double);
	for (i = 0; i < nt; i++)
		s->ttft_mean += ttft[i] / nt;
	s->ttft_p50 = pct(ttft, nt, 50);
	s->ttft_p99 = pct(ttft, nt, 99);
	s->stream_tps_p50 = pct(tps, np, 50);
	free(ttft);
	free(tps);
	return 0;
}

static void print_json(const struct opts *o, const struct stats *s,
		       int measured)
{
	int k;

	printf("{\"clients\":%d,\"requests_per_client\":%d,\"endpoint\":\"%s\","
	       "\"prompt_tokens_target\":%d,\"prompt_tokens_calibrated\":%d,"
	       "\"prompt_tokens_mean\":%.1f,\"max_tokens\":%d,"
	       "\"started\":%d,\"ok\":%d,\"errors\":%d,"
	       "\"completion_tokens\":%ld,\"content_chunks\":%ld,"
	       "\"wall_s\":%.4f,\"aggregate_tps\":%.3f,\"stream_tps_p50\":%.3f,"
	       "\"ttft_mean_s\":%.4f,\"ttft_p50_s\":%.4f,\"ttft_p99_s\":%.4f,"
	       "\"errors_by_kind\":{",
	       o->clients, o->requests, o->chat ? "chat" : "completions",
	       o->prompt_tokens, measured, s->prompt_mean, o->max_tokens,
	       s->started, s->ok, s->errors, s->tokens, s->chunks, s->wall,
	       s->agg_tps, s->stream_tps_p50, s->ttft_mean, s->ttft_p50,
	       s->ttft_p99);
	for (k = 1; k < N_ERR; k++)
		printf("%s\"%s\":%d", k > 1 ? "," : "", err_names[k], s->by_kind[k]);
	printf("},\"http_errors\":{");
	for (k = 1; k < 6; k++)
		printf("%s\"%dxx\":%d", k > 1 ? "," : "", k, s->http[k]);
	printf("}}\n");
}

static void print_table(const struct opts *o, const struct stats *s,
			int measured)
{
	int k;

	printf("emberd load: %d clients x %d requests, /v1/%s, prompt ~%d tokens "
	       "(tokenizer: %d, usage mean: %.1f), max_tokens %d\n",
	       o->clients, o->requests, o->chat ? "chat/completions" : "completions",
	       o->prompt_tokens, measured, s->prompt_mean, o->max_tokens);
	printf("  %-22s %d started, %d ok, %d failed\n", "requests", s->started,
	       s->ok, s->errors);
	printf("  %-22s %.3f s\n", "wall time", s->wall);
	printf("  %-22s %ld (content chunks %ld)\n", "completion tokens",
	       s->tokens, s->chunks);
	printf("  %-22s %.2f tok/s\n", "aggregate", s->agg_tps);
	printf("  %-22s %.2f tok/s (median, after first token)\n", "per stream",
	       s->stream_tps_p50);
	printf("  %-22s mean %.3f s, p50 %.3f s, p99 %.3f s\n", "time to first token",
	       s->ttft_mean, s->ttft_p50, s->ttft_p99);
	printf("  %-22s", "errors");
	for (k = 1; k < N_ERR; k++)
		printf(" %s %d%s", err_names[k], s->by_kind[k], k + 1 < N_ERR ? "," : "");
	printf("\n");
	if (s->by_kind[E_HTTP])
		for (k = 1; k < 6; k++)
			if (s->http[k])
				printf("  %-22s %dxx: %d\n", "", k, s->http[k]);
}

/* ---- main ------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: loadgen [options]\n"
		"  --host H           loopback address (127.0.0.1, ::1, localhost)\n"
		"  --port N           daemon port (8080)\n"
		"  -c, --clients N    concurrent streaming clients (4)\n"
		"  -n, --requests N   requests per client (1)\n"
		"  -p, --prompt N     prompt length in tokens (100)\n"
		"  -m, --max-tokens N tokens to generate per request (64)\n"
		"  -t, --duration S   time limit of the whole run in seconds (300)\n"
		"  --endpoint E       chat (default) or completions\n"
		"  --api-key K        sent as 'Authorization: Bearer K'\n"
		"  --same-prompt      one prompt for all (lets a prefix cache work)\n"
		"  --json             one JSON line instead of the table\n");
}

static int parse_int_opt(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{"host", required_argument, 0, 'H'}, {"port", required_argument, 0, 'P'},
		{"clients", required_argument, 0, 'c'}, {"requests", required_argument, 0, 'n'},
		{"prompt", required_argument, 0, 'p'}, {"max-tokens", required_argument, 0, 'm'},
		{"duration", required_argument, 0, 't'}, {"endpoint", required_argument, 0, 'e'},
		{"api-key", required_argument, 0, 'k'}, {"same-prompt", no_argument, 0, 's'},
		{"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
	char *end;
	int ch, bad = 0;

	*o = (struct opts){.host = "127.0.0.1", .port = 8080, .clients = 4,
			   .requests = 1, .prompt_tokens = 100, .max_tokens = 64,
			   .duration = 300, .chat = true};
	while ((ch = getopt_long(argc, argv, "c:n:p:m:t:h", lo, NULL)) != -1) {
		switch (ch) {
		case 'H': o->host = optarg; break;
		case 'P': bad |= parse_int_opt(optarg, 1, 65535, &o->port); break;
		case 'c': bad |= parse_int_opt(optarg, 1, MAX_CLIENTS, &o->clients); break;
		case 'n': bad |= parse_int_opt(optarg, 1, 1000000, &o->requests); break;
		case 'p': bad |= parse_int_opt(optarg, 1, 1000000, &o->prompt_tokens); break;
		case 'm': bad |= parse_int_opt(optarg, 1, 1000000, &o->max_tokens); break;
		case 't':
			o->duration = strtod(optarg, &end);
			bad |= *end || !(o->duration > 0 && o->duration <= 86400) ? -1 : 0;
			break;
		case 'e':
			o->chat = strcmp(optarg, "chat") == 0;
			bad |= !o->chat && strcmp(optarg, "completions") != 0 ? -1 : 0;
			break;
		case 'k': o->api_key = optarg; break;
		case 's': o->same_prompt = true; break;
		case 'j': o->json = true; break;
		case 'h': usage(stdout); exit(0);
		default: bad = -1;
		}
	}
	if (optind < argc)
		bad = -1;
	if (o->api_key && strpbrk(o->api_key, "\r\n"))
		bad = -1;
	return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	struct opts o;
	struct client *cl = NULL;
	struct pollfd *pf = NULL;
	struct result *res = NULL;
	struct stats st;
	double wall;
	int i, nwords, measured, rc = 2;

	if (parse_opts(argc, argv, &o) != 0) {
		usage(stderr);
		return 2;
	}
	if (loopback_addr(o.host, o.port, &ss, &sl) != 0) {
		fprintf(stderr, "loadgen: refusing host '%s': loopback only "
			"(127.0.0.0/8, ::1, localhost)\n", o.host);
		return 2;
	}
	cl = calloc((size_t)o.clients, sizeof(*cl));
	pf = calloc((size_t)o.clients, sizeof(*pf));
	res = calloc((size_t)o.clients * (size_t)o.requests, sizeof(*res));
	if (cl == NULL || pf == NULL || res == NULL) {
		fprintf(stderr, "loadgen: out of memory\n");
		goto fail;
	}
	for (i = 0; i < o.clients; i++)
		cl[i].fd = -1;
	nwords = calibrate(&o, &ss, sl, &measured);
	wall = run(&o, nwords, &ss, sl, cl, pf, res);
	if (stats_compute(res, o.clients * o.requests, wall, &st) != 0) {
		fprintf(stderr, "loadgen: out of memory\n");
		goto fail;
	}
	if (o.json)
		print_json(&o, &st, measured);
	else
		print_table(&o, &st, measured);
	rc = st.errors || st.ok == 0 ? 1 : 0;
fail:
	for (i = 0; cl && i < o.clients; i++) {
		client_close(&cl[i]);
		buf_free(&cl[i].out);
		buf_free(&cl[i].in);
		buf_free(&cl[i].body);
		buf_free(&cl[i].event);
	}
	free(cl);
	free(pf);
	free(res);
	return rc;
}
