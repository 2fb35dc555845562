/* sse.c - SSE framing into a byte queue. See sse.h. */
#include "sse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "ember.h"

void sse_buf_init(struct sse_buf *b)
{
	memset(b, 0, sizeof(*b));
}

void sse_buf_free(struct sse_buf *b)
{
	if (b == NULL)
		return;
	free(b->data);
	memset(b, 0, sizeof(*b));
}

/* Makes room for `extra` more bytes, first by sliding the live bytes to
 * the front (cheap: the reader usually drained almost everything). */
static int reserve(struct sse_buf *b, size_t extra)
{
	size_t live = b->len - b->head;

	if (b->head > 0 && b->len + extra > b->cap) {
		memmove(b->data, b->data + b->head, live);
		b->head = 0;
		b->len = live;
	}
	if (b->len + extra <= b->cap)
		return 0;
	if (extra > SIZE_MAX / 2 - b->len)
		return EMBER_ENOMEM;
	return buf_grow(&b->data, &b->cap, b->len + extra, 256, 0);
}

static void put(struct sse_buf *b, const char *s, size_t n)
{
	memcpy(b->data + b->len, s, n);
	b->len += n;
}

int sse_buf_push_line(struct sse_buf *b, const char *line, size_t len)
{
	if (reserve(b, len + 1) != 0)
		return EMBER_ENOMEM;
	put(b, line, len);
	put(b, "\n", 1);
	return 0;
}

int sse_buf_push_event(struct sse_buf *b, const char *payload, size_t len)
{
	size_t lines = 1, i, start = 0;

	for (i = 0; i < len; i++)
		if (payload[i] == '\n')
			lines++;
	/* "data: " and "\n" per line, plus the blank line. */
	if (reserve(b, len + lines * 7 + 1) != 0)
		return EMBER_ENOMEM;
	for (i = 0; i <= len; i++) {
		if (i < len && payload[i] != '\n')
			continue;
		put(b, "data: ", 6);
		/* A CR before the LF would end the line early for the client. */
		put(b, payload + start,
		    i - start - (i > start && payload[i - 1] == '\r'));
		put(b, "\n", 1);
		start = i + 1;
	}
	put(b, "\n", 1);
	return 0;
}

int sse_buf_push_done(struct sse_buf *b)
{
	static const char done[] = "data: [DONE]\n\n";

	if (reserve(b, sizeof(done) - 1) != 0)
		return EMBER_ENOMEM;
	put(b, done, sizeof(done) - 1);
	return 0;
}

int sse_buf_push_comment(struct sse_buf *b, const char *text)
{
	size_t n = strlen(text);

	if (reserve(b, n + 4) != 0)
		return EMBER_ENOMEM;
	put(b, ": ", 2);
	put(b, text, n);
	put(b, "\n\n", 2);
	return 0;
}

size_t sse_buf_pending(const struct sse_buf *b)
{
	return b->len - b->head;
}

size_t sse_buf_read(struct sse_buf *b, char *out, size_t max)
{
	size_t n = b->len - b->head;

	if (n > max)
		n = max;
	if (n > 0)
		memcpy(out, b->data + b->head, n);
	b->head += n;
	if (b->head == b->len)
		b->head = b->len = 0;
	return n;
}
