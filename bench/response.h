/* response.h - one streamed HTTP response, parsed as it arrives (loadgen).
 *
 * The load generator feeds each connection's received bytes to a struct
 * response, which reads the HTTP/1.1 head, undoes chunked framing, splits
 * Server-Sent Events and reads each OpenAI chunk (chat.completion.chunk or
 * text_completion) just far enough to time it: whether it carries content,
 * usage.completion_tokens and usage.prompt_tokens, an error object, and the
 * closing "data: [DONE]". Everything received is untrusted: malformed
 * framing, SSE or JSON is an error kind, never a crash; one event or head
 * is capped at RESPONSE_MAX bytes.
 *
 * Ownership: a response owns its buffers (response_free releases them);
 * the struct result it fills is the caller's. Single-threaded: the
 * loadgen's one poll loop owns every response.
 */
#ifndef EMBER_BENCH_RESPONSE_H
#define EMBER_BENCH_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>

#define RESPONSE_MAX (16u << 20)

/* Why a request failed; 0 is success. X-macro so names stay in step. */
#define RESPONSE_ERRORS(X)                                            \
	X(OK, "ok")                                                   \
	X(CONNECT, "connect")          /* socket or connect failed */ \
	X(HTTP, "http_status")         /* a status other than 200 */  \
	X(SSE, "malformed_sse")        /* framing, SSE or JSON */     \
	X(TIMEOUT, "timeout")          /* in flight at the deadline */ \
	X(CLOSED, "closed")            /* peer closed mid-response */ \
	X(STREAM, "stream_error")      /* an error object streamed */ \
	X(USAGE, "usage_mismatch")     /* usage absent or < chunks */

enum response_err {
#define RESPONSE_ENUM(name, str) RESP_E_##name,
	RESPONSE_ERRORS(RESPONSE_ENUM)
#undef RESPONSE_ENUM
	RESP_N_ERR
};

/* The name of an error kind ("timeout"); "?" when out of range. */
const char *response_err_name(int kind);

/* A growable byte string, always NUL-terminated past len. */
struct bytes {
	char *p;
	size_t len, cap;
};

/* Appends n bytes (or a C string); 0, or -1 when out of memory or the
 * string would pass RESPONSE_MAX. */
int bytes_add(struct bytes *b, const char *s, size_t n);
int bytes_str(struct bytes *b, const char *s);
/* Removes the first n (<= len) bytes. */
void bytes_drop(struct bytes *b, size_t n);
/* Releases the storage; b is then empty and reusable. NULL-safe. */
void bytes_free(struct bytes *b);

/* One request's outcome; times in seconds since the run's start. */
struct result {
	double t_start, t_first, t_last, t_end;
	int chunks;        /* non-empty content deltas */
	int usage_tokens;  /* usage.completion_tokens; -1 when none came */
	int prompt_tokens; /* usage.prompt_tokens; -1 when none came */
	int status;        /* HTTP status; 0 before the head, -1 never sent */
	enum response_err err;
};

enum response_body { RESP_BODY_EOF, RESP_BODY_LENGTH, RESP_BODY_CHUNKED };

struct response {
	bool chat;              /* chat chunks (delta.content) or text ones */
	struct result *r;       /* filled as events arrive; caller's */
	struct bytes in;        /* received, not yet decoded */
	struct bytes body;      /* decoded, not yet split into lines */
	struct bytes event;     /* data lines of the event being read */
	bool head_done, in_chunk, chunk_crlf, got_done;
	enum response_body mode;
	long long left;         /* LENGTH: body bytes left; CHUNKED: chunk */
};

/* Readies resp for a new response filling r (chat: chat.completion.chunk
 * events, else text_completion ones); keeps the buffers' storage. */
void response_reset(struct response *resp, bool chat, struct result *r);

/* Feeds n received bytes at time t. Returns 1 when the response ended
 * cleanly ([DONE] seen, body complete), 0 when more is needed, or
 * -RESP_E_* when it failed (a non-200 status fails at the head). */
int response_feed(struct response *resp, const char *data, size_t n, double t);

/* The peer closed the connection at time t: 1 when that ended a clean
 * response, else -RESP_E_*. */
int response_eof(struct response *resp, double t);

/* Releases resp's buffers. NULL-safe. */
void response_free(struct response *resp);

/* The number of ids in a /tokenize answer body {"tokens":[...]}, or -1
 * when it is not one. */
int response_count_tokens(const char *body, size_t len);

#endif
