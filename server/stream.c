/* stream.c - worker-to-loop text queue. See stream.h. */
#include "stream.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "ember.h"

struct gen_stream {
	uv_async_t async;         /* first: the handle's memory is the stream's */
	pthread_mutex_t lock;
	/* under lock */
	char *pending;            /* [pending_cap], pending_len bytes queued */
	size_t pending_len, pending_cap;
	int pending_tokens;
	struct engine_logprobs *pending_lp; /* [pending_lp_cap bytes], n_pending_lp */
	size_t n_pending_lp, pending_lp_cap;
	bool worker_done;
	bool done_taken;          /* stream_take has handed the done out */
	bool loop_released;
	bool closing;             /* uv_close issued */
	bool oom;                 /* text was dropped: ends with an error */
	struct engine_result result;
	/* loop only */
	char *taken;              /* the buffer handed out by stream_take */
	size_t taken_cap;
	struct engine_logprobs *taken_lp;
	size_t taken_lp_cap;
	stream_update_cb update_cb;
	void *data;
};

static void close_cb(uv_handle_t *h)
{
	struct gen_stream *s = (struct gen_stream *)h;

	pthread_mutex_destroy(&s->lock);
	free(s->pending);
	free(s->taken);
	free(s->pending_lp);
	free(s->taken_lp);
	free(s);
}

/* Under lock, loop thread: close once both owners let go. */
static void maybe_close(struct gen_stream *s)
{
	if (s->worker_done && s->loop_released && !s->closing) {
		s->closing = true;
		uv_close((uv_handle_t *)&s->async, close_cb);
	}
}

/*
 * A wake-up can come after the done was handed out: the worker's last
 * text and its done each send one, and when the done lands while this
 * callback runs for the text (after libuv cleared the pending flag,
 * before stream_take took the lock), the take sees both and libuv calls
 * again for the second send. Nothing can follow a done, so that call is
 * dropped here; a consumer that keeps the stream past its done (n
 * choices: every one until the last ends) must not see it twice.
 */
static void async_cb(uv_async_t *a)
{
	struct gen_stream *s = (struct gen_stream *)a;
	bool quiet;

	pthread_mutex_lock(&s->lock);
	quiet = s->loop_released || s->done_taken;
	maybe_close(s);
	pthread_mutex_unlock(&s->lock);
	if (!quiet)
		s->update_cb(s->data, s);
}

static void text_cb(void *data, const char *text, size_t len, int n_tokens)
{
	struct gen_stream *s = data;

	pthread_mutex_lock(&s->lock);
	if (buf_grow(&s->pending, &s->pending_cap, s->pending_len + len, 256, 0) != 0) {
		s->oom = true;
		goto out;
	}
	memcpy(s->pending + s->pending_len, text, len);
	s->pending_len += len;
	s->pending_tokens += n_tokens;
out:
	uv_async_send(&s->async);
	pthread_mutex_unlock(&s->lock);
}

static void logprobs_cb(void *data, const struct engine_logprobs *lp)
{
	struct gen_stream *s = data;
	size_t need = (s->n_pending_lp + 1) * sizeof(*lp);

	pthread_mutex_lock(&s->lock);
	if (buf_grow(&s->pending_lp, &s->pending_lp_cap, need, 16 * sizeof(*lp), 0) != 0)
		s->oom = true;
	else
		s->pending_lp[s->n_pending_lp++] = *lp;
	/* No wake-up: the text callback that covers this token sends one. */
	pthread_mutex_unlock(&s->lock);
}

static void done_cb(void *data, const struct engine_result *res)
{
	struct gen_stream *s = data;

	pthread_mutex_lock(&s->lock);
	s->result = *res;
	if (s->oom && res->finish != ENGINE_FINISH_CANCELLED) {
		s->result.finish = ENGINE_FINISH_ERROR;
		snprintf(s->result.message, sizeof(s->result.message),
			 "out of memory queueing output");
	}
	s->worker_done = true;
	/* Sent under the lock: the loop closes the handle only under it and
	 * only after seeing worker_done, so this send cannot race the close. */
	uv_async_send(&s->async);
	pthread_mutex_unlock(&s->lock);
}

int stream_new(uv_loop_t *loop, stream_update_cb update_cb, void *data,
	       struct gen_stream **out)
{
	struct gen_stream *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (s == NULL)
		return EMBER_ENOMEM;
	if (pthread_mutex_init(&s->lock, NULL) != 0) {
		free(s);
		return EMBER_ENOMEM;
	}
	if (uv_async_init(loop, &s->async, async_cb) != 0) {
		pthread_mutex_destroy(&s->lock);
		free(s);
		return EMBER_ENOMEM;
	}
	s->update_cb = update_cb;
	s->data = data;
	*out = s;
	return 0;
}

struct gen_sink stream_sink(struct gen_stream *s)
{
	struct gen_sink sink = {text_cb, done_cb, logprobs_cb, s};

	return sink;
}

void stream_take(struct gen_stream *s, struct stream_chunk *c)
{
	char *tmp;
	size_t cap;

	memset(c, 0, sizeof(*c));
	pthread_mutex_lock(&s->lock);
	/* Swap buffers: the worker keeps appending into the other one, and
	 * both keep their capacity. */
	tmp = s->taken;
	cap = s->taken_cap;
	s->taken = s->pending;
	s->taken_cap = s->pending_cap;
	c->len = s->pending_len;
	c->n_tokens = s->pending_tokens;
	s->pending = tmp;
	s->pending_cap = cap;
	s->pending_len = 0;
	s->pending_tokens = 0;
	tmp = (char *)s->taken_lp;
	cap = s->taken_lp_cap;
	s->taken_lp = s->pending_lp;
	s->taken_lp_cap = s->pending_lp_cap;
	c->n_lp = s->n_pending_lp;
	s->pending_lp = (struct engine_logprobs *)(void *)tmp;
	s->pending_lp_cap = cap;
	s->n_pending_lp = 0;
	/* The done goes out once (async_cb's comment). */
	c->done = s->worker_done && !s->done_taken;
	if (c->done) {
		c->result = s->result;
		s->done_taken = true;
	}
	pthread_mutex_unlock(&s->lock);
	c->text = s->taken ? s->taken : "";
	c->lp = s->taken_lp;
}

void stream_release(struct gen_stream *s)
{
	if (s == NULL)
		return;
	pthread_mutex_lock(&s->lock);
	s->loop_released = true;
	maybe_close(s);
	pthread_mutex_unlock(&s->lock);
}

void stream_abandon_worker(struct gen_stream *s)
{
	pthread_mutex_lock(&s->lock);
	s->worker_done = true;
	maybe_close(s);
	pthread_mutex_unlock(&s->lock);
}
