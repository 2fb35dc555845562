/* response.c - a streamed HTTP response parsed as it arrives. See
 * response.h. */
#include "response.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"

static const char *const err_names[RESP_N_ERR] = {
#define RESPONSE_NAME(name, str) str,
	RESPONSE_ERRORS(RESPONSE_NAME)
#undef RESPONSE_NAME
};

const char *response_err_name(int kind)
{
	return kind >= 0 && kind < RESP_N_ERR ? err_names[kind] : "?";
}

/* ---- buffers ---------------------------------------------------------- */

static int bytes_reserve(struct bytes *b, size_t extra)
{
	if (extra > RESPONSE_MAX || b->len + extra + 1 > RESPONSE_MAX)
		return -1;
	return buf_grow(&b->p, &b->cap, b->len + extra + 1, 4096, 0) == 0 ? 0 : -1;
}

int bytes_add(struct bytes *b, const char *s, size_t n)
{
	if (bytes_reserve(b, n) != 0)
		return -1;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

int bytes_str(struct bytes *b, const char *s)
{
	return bytes_add(b, s, strlen(s));
}

void bytes_drop(struct bytes *b, size_t n)
{
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
	if (b->p)
		b->p[b->len] = '\0';
}

void bytes_free(struct bytes *b)
{
	if (b == NULL)
		return;
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

/* ---- HTTP and SSE --------------------------------------------------------- */

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
static int parse_head(struct response *c)
{
	char *end = strstr(c->in.p ? c->in.p : "", "\r\n\r\n");
	const char *v;
	int status;

	if (end == NULL)
		return 1;
	end[2] = '\0'; /* the head ends at its last CRLF */
	if (sscanf(c->in.p, "HTTP/1.%*d %d", &status) != 1)
		return -RESP_E_SSE;
	c->r->status = status;
	c->mode = RESP_BODY_EOF;
	if ((v = header_value(c->in.p, "Transfer-Encoding")) &&
	    strncasecmp(v, "chunked", 7) == 0)
		c->mode = RESP_BODY_CHUNKED;
	else if ((v = header_value(c->in.p, "Content-Length")) != NULL) {
		c->mode = RESP_BODY_LENGTH;
		c->left = strtoll(v, NULL, 10);
	}
	bytes_drop(&c->in, (size_t)(end + 4 - c->in.p));
	c->head_done = true;
	return status == 200 ? 0 : -RESP_E_HTTP;
}

/* Moves decoded body bytes from in to body; 1 body complete, 0 need
 * more, <0 malformed framing. */
static int dechunk(struct response *c)
{
	char *eol;
	size_t n;

	if (c->mode != RESP_BODY_CHUNKED) {
		n = c->in.len;
		if (c->mode == RESP_BODY_LENGTH && (long long)n > c->left)
			n = (size_t)c->left;
		if (bytes_add(&c->body, c->in.p, n) != 0)
			return -RESP_E_SSE;
		bytes_drop(&c->in, n);
		if (c->mode == RESP_BODY_LENGTH && (c->left -= (long long)n) == 0)
			return 1;
		return 0;
	}
	for (;;) {
		if (c->chunk_crlf) {
			if (c->in.len < 2)
				return 0;
			if (memcmp(c->in.p, "\r\n", 2) != 0)
				return -RESP_E_SSE;
			bytes_drop(&c->in, 2);
			c->chunk_crlf = false;
		}
		if (!c->in_chunk) {
			if (c->in.len == 0 ||
			    (eol = strstr(c->in.p, "\r\n")) == NULL)
				return c->in.len > 64 ? -RESP_E_SSE : 0;
			c->left = strtoll(c->in.p, NULL, 16);
			if (c->left < 0 || eol == c->in.p)
				return -RESP_E_SSE;
			bytes_drop(&c->in, (size_t)(eol + 2 - c->in.p));
			if (c->left == 0)
				return 1; /* trailers ignored: we close */
			c->in_chunk = true;
		}
		n = c->in.len < (size_t)c->left ? c->in.len : (size_t)c->left;
		if (n == 0)
			return 0;
		if (bytes_add(&c->body, c->in.p, n) != 0)
			return -RESP_E_SSE;
		bytes_drop(&c->in, n);
		if ((c->left -= (long long)n) == 0) {
			c->in_chunk = false;
			c->chunk_crlf = true;
		}
	}
}

/* One complete SSE event's data; 0 ok, <0 error kind. */
static int on_event(struct response *c, double t)
{
	const char *p = c->event.p, *end = p + c->event.len;
	struct json_chunk ch;

	if (c->event.len == 6 && memcmp(p, "[DONE]", 6) == 0) {
		c->got_done = true;
		return 0;
	}
	if (c->got_done || json_read_chunk(p, end, c->chat, &ch) != 0)
		return -RESP_E_SSE;
	if (ch.error)
		return -RESP_E_STREAM;
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
static int parse_sse(struct response *c, double t)
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
			if (c->event.len && (rc = on_event(c, t)) != 0)
				return rc;
			c->event.len = 0;
		} else if (len >= 5 && memcmp(line, "data:", 5) == 0) {
			size_t skip = (len > 5 && line[5] == ' ') ? 6 : 5;

			if ((c->event.len && bytes_add(&c->event, "\n", 1) != 0) ||
			    bytes_add(&c->event, line + skip, len - skip) != 0)
				return -RESP_E_SSE;
		} else if (line[0] != ':' && strncmp(line, "event:", 6) &&
			   strncmp(line, "id:", 3) && strncmp(line, "retry:", 6)) {
			return -RESP_E_SSE;
		}
		bytes_drop(&c->body, (size_t)(nl + 1 - c->body.p));
	}
	return c->body.len > RESPONSE_MAX / 2 ? -RESP_E_SSE : 0;
}

/* ---- the public face -------------------------------------------------------- */

void response_reset(struct response *resp, bool chat, struct result *r)
{
	resp->chat = chat;
	resp->r = r;
	resp->in.len = resp->body.len = resp->event.len = 0;
	resp->head_done = resp->in_chunk = resp->chunk_crlf = false;
	resp->got_done = false;
	resp->mode = RESP_BODY_EOF;
	resp->left = 0;
}

int response_feed(struct response *resp, const char *data, size_t n, double t)
{
	int rc, body_end;

	if (bytes_add(&resp->in, data, n) != 0)
		return -RESP_E_SSE;
	if (!resp->head_done && (rc = parse_head(resp)) != 0)
		return rc > 0 ? 0 : rc;
	if ((body_end = dechunk(resp)) < 0)
		return body_end;
	if ((rc = parse_sse(resp, t)) != 0)
		return rc;
	if (body_end)
		return resp->got_done && resp->body.len == 0 ? 1 : -RESP_E_SSE;
	return 0;
}

int response_eof(struct response *resp, double t)
{
	int rc;

	if (!resp->head_done || resp->mode != RESP_BODY_EOF)
		return -RESP_E_CLOSED;
	if ((rc = parse_sse(resp, t)) != 0)
		return rc;
	return resp->got_done ? 1 : -RESP_E_SSE;
}

void response_free(struct response *resp)
{
	if (resp == NULL)
		return;
	bytes_free(&resp->in);
	bytes_free(&resp->body);
	bytes_free(&resp->event);
}

int response_count_tokens(const char *body, size_t len)
{
	const char *end = body + len, *v, *ve = NULL;
	int count = 0;

	body = json_ws(body, end);
	if (json_skip(body, end, 0) == NULL ||
	    (v = json_get(body, end, "tokens", &ve)) == NULL || *v != '[')
		return -1;
	for (v = json_ws(v + 1, end); v < ve && *v != ']';) {
		count++;
		v = json_ws(json_skip(v, end, 0), end);
		if (*v == ',')
			v = json_ws(v + 1, end);
	}
	return count;
}
