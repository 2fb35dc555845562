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
 * request's prompt starts with its own 7-digit number, drawn afresh for
 * every run, so a server's prefix cache cannot skip the prefill, not even
 * when the same command runs twice (--same-prompt turns that off).
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

#include "bench_util.h"
#include "clock.h"
#include "response.h"

#define MAX_CLIENTS 1024
struct opts {
	const char *host;
	int port, clients, requests, prompt_tokens, max_tokens;
	double duration;
	const char *api_key;
	bool chat, json, same_prompt;
	long tag_base; /* first prompt number: differs between runs */
};

enum phase { PH_IDLE, PH_CONNECT, PH_SEND, PH_RECV, PH_FINISHED };

struct client {
	int fd;
	enum phase ph;
	int next;              /* index of its next request, 0..requests */
	struct bytes out;      /* request bytes; out_off of them sent */
	size_t out_off;
	struct response resp;  /* parses the answer into the result */
};

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
static int prompt_text(struct bytes *b, int n)
{
	unsigned s = 12345;
	int i;

	for (i = 0; i < n; i++) {
		s = s * 1103515245u + 12345u;
		if ((i && bytes_str(b, " ") != 0) ||
		    bytes_str(b, words[(s >> 16) % N_WORDS]) != 0)
			return -1;
	}
	return 0;
}

/* The full HTTP request for one generation; tag makes the prompt unique. */
static int build_request(struct bytes *out, const struct opts *o, int nwords,
			 long tag)
{
	struct bytes body = {0};
	char head[512], pre[32];
	int n, rc = -1;

	n = snprintf(pre, sizeof(pre), "%ld: ", tag);
	if (bytes_str(&body, o->chat ? "{\"messages\":[{\"role\":\"user\","
				     "\"content\":\"" : "{\"prompt\":\"") != 0 ||
	    (tag >= 0 && bytes_add(&body, pre, (size_t)n) != 0) ||
	    prompt_text(&body, nwords) != 0)
		goto fail;
	n = snprintf(head, sizeof(head), "\"%s,\"max_tokens\":%d,"
		     "\"temperature\":0,\"stream\":true,"
		     "\"stream_options\":{\"include_usage\":true}}",
		     o->chat ? "}]" : "", o->max_tokens);
	if (bytes_add(&body, head, (size_t)n) != 0)
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
	    bytes_add(out, head, (size_t)n) != 0 ||
	    bytes_add(out, body.p, body.len) != 0)
		goto fail;
	rc = 0;
fail:
	bytes_free(&body);
	return rc;
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
			  enum response_err err, double t)
{
	struct result *r = c->resp.r;

	if (err == RESP_E_OK && (r->usage_tokens < 0 || r->chunks > r->usage_tokens ||
			    (r->chunks == 0) != (r->usage_tokens == 0)))
		err = RESP_E_USAGE; /* a chunk carries >= 1 token; usage must come */
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
	response_reset(&c->resp, o->chat, r);
	c->next++;
	c->out_off = 0;
	if (build_request(&c->out, o, nwords, o->same_prompt ? -1 : o->tag_base + tag) != 0)
		return -RESP_E_CONNECT;
	c->fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -RESP_E_CONNECT;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->fd, (const struct sockaddr *)ss, sl) != 0 &&
	    errno != EINPROGRESS)
		return -RESP_E_CONNECT;
	c->ph = PH_CONNECT;
	return 0;
}

/* Reacts to poll readiness; returns 0 or <0 error kind (request over),
 * 1 when the request completed cleanly. */
static int client_step(struct client *c, short rev, double t)
{
	char tmp[65536];
	ssize_t n;
	int soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (c->ph == PH_CONNECT) {
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 ||
		    soerr != 0)
			return -RESP_E_CONNECT;
		c->ph = PH_SEND;
	}
	if (c->ph == PH_SEND) {
		n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off,
			 MSG_NOSIGNAL);
		if (n < 0)
			return errno == EAGAIN ? 0 : -RESP_E_CLOSED;
		if ((c->out_off += (size_t)n) == c->out.len)
			c->ph = PH_RECV;
		return 0;
	}
	if (!(rev & (POLLIN | POLLHUP | POLLERR)))
		return 0;
	n = recv(c->fd, tmp, sizeof(tmp), 0);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -RESP_E_CLOSED;
	if (n == 0)
		return response_eof(&c->resp, t);
	return response_feed(&c->resp, tmp, (size_t)n, t);
}

/* ---- calibration: the prompt's length in tokens ----------------------- */

/* A blocking POST /tokenize of nwords words; the token count, or -1 when
 * the daemon has no such endpoint or answers something unexpected. */
static int count_tokens(const struct opts *o, const struct sockaddr_storage *ss,
			socklen_t sl, int nwords)
{
	struct bytes req = {0}, body = {0}, resp = {0};
	struct timeval tv = {10, 0};
	char head[512], tmp[65536], pre[32], *p;
	int fd = -1, n, count = -1;
	ssize_t got;

	snprintf(pre, sizeof(pre), "%ld: ", o->tag_base);
	if (bytes_str(&body, "{\"content\":\"") != 0 ||
	    (!o->same_prompt && bytes_str(&body, pre) != 0) ||
	    prompt_text(&body, nwords) != 0 ||
	    bytes_str(&body, o->chat ? "\",\"add_special\":false}" :
				     "\",\"add_special\":true}") != 0)
		goto out;
	n = snprintf(head, sizeof(head),
		     "POST /tokenize HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n"
		     "Content-Type: application/json\r\nContent-Length: %zu\r\n"
		     "%s%s%s\r\n", o->host, o->port, body.len,
		     o->api_key ? "Authorization: Bearer " : "",
		     o->api_key ? o->api_key : "", o->api_key ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(head) || bytes_add(&req, head, (size_t)n) ||
	    bytes_add(&req, body.p, body.len) != 0)
		goto out;
	if ((fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    connect(fd, (const struct sockaddr *)ss, sl) != 0 ||
	    send(fd, req.p, req.len, MSG_NOSIGNAL) != (ssize_t)req.len)
		goto out;
	while ((got = recv(fd, tmp, sizeof(tmp), 0)) > 0)
		if (bytes_add(&resp, tmp, (size_t)got) != 0)
			goto out;
	if (resp.len < 12 || strncmp(resp.p + 8, " 200", 4) != 0 ||
	    (p = strstr(resp.p, "\r\n\r\n")) == NULL)
		goto out;
	p += 4;
	count = response_count_tokens(p, (size_t)(resp.p + resp.len - p));
out:
	if (fd >= 0)
		close(fd);
	bytes_free(&req);
	bytes_free(&body);
	bytes_free(&resp);
	return count;
}

/* Words for a prompt of ~o->prompt_tokens tokens; *measured gets the
 * tokenizer's count (-1 when estimated at ~1.3 tokens per word). Token
 * counts grow with words, so a bisection finds the closest in ~10 asks. */
static int calibrate(const struct opts *o, const struct sockaddr_storage *ss,
		     socklen_t sl, int *measured)
{
	int target = o->prompt_tokens, lo = 1, hi = 2 * target + 8, mid, n;
	int n_lo, n_hi;

	*measured = -1;
	if ((n_lo = count_tokens(o, ss, sl, lo)) < 0)
		return target * 10 / 13 > 0 ? target * 10 / 13 : 1;
	n_hi = count_tokens(o, ss, sl, hi);
	if (n_lo >= target || n_hi <= target) {
		*measured = n_lo >= target ? n_lo : n_hi;
		return n_lo >= target ? lo : hi;
	}
	while (hi - lo > 1) { /* tokens(lo) < target < tokens(hi) */
		mid = lo + (hi - lo) / 2;
		if ((n = count_tokens(o, ss, sl, mid)) < 0)
			break;
		if (n == target) {
			*measured = n;
			return mid;
		}
		if (n < target) {
			lo = mid;
			n_lo = n;
		} else {
			hi = mid;
			n_hi = n;
		}
	}
	*measured = target - n_lo <= n_hi - target ? n_lo : n_hi;
	return *measured == n_lo ? lo : hi;
}

/* ---- the run -------------------------------------------------------------- */

/* Drives every client until all requests ended or the deadline passed;
 * the wall time of the run. res holds clients * requests results, in order
 * of client then request; results never started keep status -1. */
static double run(const struct opts *o, int nwords,
		  const struct sockaddr_storage *ss, socklen_t sl,
		  struct client *cl, struct pollfd *pf, struct result *res)
{
	double t0 = clock_now_s(), t, last = 0;
	int i, rc, active, timeout_ms;

	for (i = 0; i < o->clients * o->requests; i++)
		res[i].status = -1;
	for (;;) {
		t = clock_now_s() - t0;
		active = 0;
		for (i = 0; i < o->clients; i++) {
			struct client *c = &cl[i];

			while (c->ph == PH_IDLE && t < o->duration) {
				struct result *r = &res[i * o->requests + c->next];

				rc = client_start(c, o, nwords, ss, sl, r,
						  (long)(i * o->requests + c->next), t);
				if (rc != 0)
					client_finish(c, o, (enum response_err)-rc, t);
			}
			if (c->ph == PH_IDLE)
				c->ph = PH_FINISHED; /* out of time: never started */
			if (c->ph != PH_FINISHED && t >= o->duration)
				client_finish(c, o, RESP_E_TIMEOUT, t);
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
		t = clock_now_s() - t0;
		for (i = 0; i < o->clients; i++) {
			if (pf[i].fd < 0 || pf[i].revents == 0)
				continue;
			rc = client_step(&cl[i], pf[i].revents, t);
			if (rc != 0)
				client_finish(&cl[i], o, rc > 0 ? RESP_E_OK :
						 (enum response_err)-rc, t);
		}
	}
	for (i = 0; i < o->clients * o->requests; i++)
		if (res[i].status >= 0 && res[i].t_end > last)
			last = res[i].t_end;
	return last;
}

/* ---- statistics ------------------------------------------------------------ */

struct stats {
	int started, ok, errors, by_kind[RESP_N_ERR], http[6]; /* http: by hundreds */
	long tokens, chunks;
	double wall, agg_tps, stream_tps_p50, ttft_mean, ttft_p50, ttft_p99, ttft_max;
	double prompt_mean;
	double inversions;         /* of request pairs started in order, the share
				    * whose first tokens came in the other order */
};

/* Fairness: pairs (a, b) where a started first (or together, with the
 * lower index) but b's first token came first. FIFO scheduling gives
 * ~0; a server that lets late requests overtake gives more. */
static double order_inversions(const struct result *res, int n)
{
	long pairs = 0, inv = 0;
	int a, b;

	for (a = 0; a < n; a++) {
		if (res[a].status < 0 || res[a].err != RESP_E_OK || res[a].chunks == 0)
			continue;
		for (b = 0; b < n; b++) {
			if (b == a || res[b].status < 0 || res[b].err != RESP_E_OK ||
			    res[b].chunks == 0)
				continue;
			if (res[a].t_start < res[b].t_start ||
			    (res[a].t_start == res[b].t_start && a < b)) {
				pairs++;
				inv += res[b].t_first < res[a].t_first;
			}
		}
	}
	return pairs ? (double)inv / (double)pairs : 0;
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
		if (r->err == RESP_E_HTTP && r->status >= 100 && r->status < 600)
			s->http[r->status / 100]++;
		if (r->err != RESP_E_OK)
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
	bench_sort(ttft, (size_t)nt);
	bench_sort(tps, (size_t)np);
	for (i = 0; i < nt; i++)
		s->ttft_mean += ttft[i] / nt;
	s->ttft_p50 = pct(ttft, nt, 50);
	s->ttft_p99 = pct(ttft, nt, 99);
	s->ttft_max = nt ? ttft[nt - 1] : 0;
	s->inversions = order_inversions(res, n);
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
	       "\"ttft_max_s\":%.4f,\"order_inversions\":%.4f,"
	       "\"errors_by_kind\":{",
	       o->clients, o->requests, o->chat ? "chat" : "completions",
	       o->prompt_tokens, measured, s->prompt_mean, o->max_tokens,
	       s->started, s->ok, s->errors, s->tokens, s->chunks, s->wall,
	       s->agg_tps, s->stream_tps_p50, s->ttft_mean, s->ttft_p50,
	       s->ttft_p99, s->ttft_max, s->inversions);
	for (k = 1; k < RESP_N_ERR; k++)
		printf("%s\"%s\":%d", k > 1 ? "," : "", response_err_name(k), s->by_kind[k]);
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
	printf("  %-22s mean %.3f s, p50 %.3f s, p99 %.3f s, max %.3f s\n",
	       "time to first token", s->ttft_mean, s->ttft_p50, s->ttft_p99, s->ttft_max);
	printf("  %-22s %.1f%% of pairs (first tokens against start order)\n",
	       "order inversions", 100 * s->inversions);
	printf("  %-22s", "errors");
	for (k = 1; k < RESP_N_ERR; k++)
		printf(" %s %d%s", response_err_name(k), s->by_kind[k], k + 1 < RESP_N_ERR ? "," : "");
	printf("\n");
	if (s->by_kind[RESP_E_HTTP])
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
	struct timespec ts;
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
	clock_gettime(CLOCK_REALTIME, &ts);
	/* 7 digits for any run of < 1e6 requests: a constant prompt length */
	o.tag_base = 1000000 + ((long)ts.tv_nsec / 1000 + (long)getpid() * 7919) % 8000000;
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
		bytes_free(&cl[i].out);
		response_free(&cl[i].resp);
	}
	free(cl);
	free(pf);
	free(res);
	return rc;
}
