/*
 * sse.h - Server-Sent Events framing into a byte queue.
 *
 * An event is `data: <payload>\n\n`; a payload with line breaks becomes one
 * `data:` line per line (the SSE rule that lets a client rebuild it). The
 * OpenAI stream ends with `data: [DONE]\n\n`. The queue is a growable buffer
 * with a read cursor: producers append events, the HTTP content reader
 * drains bytes. Capacity is kept between events, so a steady stream
 * allocates nothing per token.
 *
 * Ownership: the caller owns the struct; sse_buf_free releases its memory.
 * Threads: not synchronised; the owner (the stream, under its lock) serialises.
 */
#ifndef EMBER_SSE_H
#define EMBER_SSE_H

#include <stddef.h>

struct sse_buf {
	char *data;   /* [cap] bytes; live bytes are data[head..len) */
	size_t head;
	size_t len;
	size_t cap;
};

/* Sets up an empty queue (allocates nothing). */
void sse_buf_init(struct sse_buf *b);

/* Releases the memory (NULL allowed); the queue is empty afterwards. */
void sse_buf_free(struct sse_buf *b);

/* Appends one `data:` event carrying `payload[0..len)`. Returns 0 or
 * EMBER_ENOMEM (the queue is then unchanged). */
int sse_buf_push_event(struct sse_buf *b, const char *payload, size_t len);

/* Appends line[0..len) and a "\n" as they are (NDJSON streams: the
 * caller's JSON has no raw line break). Returns 0 or EMBER_ENOMEM. */
int sse_buf_push_line(struct sse_buf *b, const char *line, size_t len);

/* Appends `data: [DONE]\n\n`. Returns 0 or EMBER_ENOMEM. */
int sse_buf_push_done(struct sse_buf *b);

/* Appends a comment line (`: text\n\n`), which clients ignore: used as a
 * keep-alive. `text` must not contain line breaks. */
int sse_buf_push_comment(struct sse_buf *b, const char *text);

/* Bytes waiting to be read. */
size_t sse_buf_pending(const struct sse_buf *b);

/* Moves up to `max` pending bytes into `out`; returns how many. */
size_t sse_buf_read(struct sse_buf *b, char *out, size_t max);

#endif
